/* psd_dyntable_impl: psd_dyntable's private layout (psd_dyntable.c only; apart to keep that file's size). */
#ifndef PSD_DYNTABLE_IMPL_H
#define PSD_DYNTABLE_IMPL_H

#include "psd_arena.h"
#include "psd_dyntable.h"

/* A row's header; its values and slots follow it. */
typedef struct {
    int64_t id;         /* a free row: the arena's link in its first 4 bytes */
    uint64_t last_step;
    uint32_t opt_step;
    uint32_t epoch;     /* 0: a free row */
} psd_dyntable_head_t;

/* An id counted towards admission. */
typedef struct {
    int64_t id;
    uint32_t count; /* 0: an empty entry */
    uint32_t epoch; /* the table's epoch when last counted: a delta saves those of the current one */
    uint64_t last_seen;
} psd_dyntable_counter_t;

struct psd_dyntable_t {
    char *name;
    int64_t dim;
    uint64_t seed;
    zdist_initializer_t init;
    zdist_shape_t shape; /* [dim, dim]: the initializer's row width and fans */
    zdist_optim_config_t optim;
    int nslots;
    uint32_t min_count;
    uint64_t evict_after;
    double evict_l2;
    float *defval; /* dim values; NULL: zeros */
    psd_dyntable_budget_t *budget;

    psd_arena_t arena; /* the rows: a header, values, slots */
    size_t stride;

    /* The index: an entry is (hash's high 32 bits) << 32 | (row + 1), 0
       when empty; its home bucket is those 32 bits & (cap - 1), so growing
       and deleting never read a row. Linear probing, load <= 0.8,
       backward-shift deletion (no tombstones). Big ones on huge pages. */
    uint64_t *index;
    size_t index_cap;
    uint64_t nrows;

    psd_dyntable_counter_t *counters; /* the same scheme keyed by id, load <= 0.5 */
    size_t counters_cap, npending;

    int64_t *evicted; /* since the mark */
    size_t nevicted, evicted_cap;
    uint32_t epoch; /* a row changed since the mark has this epoch */
    /* Rows that took the epoch (again if freed, reused), so a delta needs no walk over every row;
       lost (walk) when it cannot grow or would list over an eighth of the rows: <= a byte a row. */
    uint32_t *dirty;
    size_t ndirty, dirty_cap;
    bool dirty_lost;

    psd_dyntable_stats_t st; /* admitted, refused, evicted, dropped_grads */
    uint64_t bytes;

    /* Per-call scratch (not in bytes: it scales with a request, not the table). */
    uint32_t *rows;
    psd_dyntable_head_t **heads; /* rows' headers, beside rows */
    size_t rows_cap, heads_cap;
    uint32_t *umap; /* apply: row -> unique index + 1 */
    size_t umap_cap;
    const float **ugrad;
    float *usum;
    size_t ucap;
};

#endif
