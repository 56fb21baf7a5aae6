/* psd_dyntable: a dynamic embedding table: rows keyed by any int64 id, admitted, evicted by age or norm.

   A table without a vocabulary (issue 29; TF Recommenders-Addons'
   dynamic_embedding, DeepRec's EmbeddingVariable): a row exists once its
   id has been admitted, and holds dim float32 values and the optimizer's
   slots for them. The invariants:

   - An id's row is created at its min_count-th occurrence in training
     lookups (DeepRec's CounterFilter: occurrences are counted, two in one
     lookup count two; min_count 0 or 1 admits at first sight). Before that
     a lookup answers the table's default (zeros or the configured vector)
     and a gradient for the id is dropped and counted. An evaluation lookup
     neither counts nor creates.
   - A new row's values come from zdist_init_fill_row (seed, name, id): the
     same on any ps task and each time the row is created again. Its slots
     start at the optimizer's initial values.
   - Nothing but an eviction or psd_dyntable_remove takes a row away: past
     the memory budget new ids are refused (counted), never an existing
     row dropped, and no call crashes or fails a lookup for lack of memory.
   - A row's header, values and slots live in a psd_arena chunk, which
     never moves while the table lives: a row's pointer stays valid until
     that row is evicted or removed (its slot is then reused).
   - Iteration visits rows in ascending id order (signed), whatever the
     insertion history, so two tables holding the same rows write the same
     checkpoint.

   Memory per row: a 24-byte header (id, last update step, the optimizer's
   per-row step, the change epoch) beside dim * 4 * (1 + slots) bytes of
   values and slots, rounded up to 8 (4 bytes of padding at most); and an
   8-byte index entry, the index's load between 0.4 and 0.8 (it doubles
   past 0.8): 10 to 20 bytes a row. So at most payload + slots + 48 bytes,
   besides what the arena leaves unused (less than a row per chunk, and
   the last chunk until it fills). bench_dyntable measures 42 bytes over
   payload + slots for 2^20 rows of 32 floats with adagrad (index load
   0.5). Ids counted but not admitted take 24 bytes each in a second map
   (load <= 0.5). Rows changed since the mark are listed (4 bytes each,
   at most an eighth of the rows: past that the list is dropped and a
   delta walks every row instead), so a delta of few rows reads only
   them: at most a byte a row.

   Not thread-safe: one caller at a time (the psd's actor thread that owns
   the job's variables). */
#ifndef PSD_DYNTABLE_H
#define PSD_DYNTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/error.h"
#include "zdist/init.h"
#include "zdist/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows a table may hold (row slots are 32-bit, the index at most 2^32 entries). */
#define PSD_DYNTABLE_MAX_ROWS ((uint64_t) 3 << 30)

/* Memory shared by the tables of one psd (its --max-bytes): each table
   adds what it allocates to `used` and subtracts what it frees; a row or
   counter that would take `used` past `max_bytes` is refused. max_bytes 0:
   no bound. The caller owns it; it must outlive the tables using it. */
typedef struct {
    uint64_t max_bytes;
    uint64_t used;
} psd_dyntable_budget_t;

typedef struct {
    const char *name;         /* the table's id: seeds its rows' initial values (copied) */
    int64_t dim;              /* values per row, 1 .. 65536 */
    uint64_t seed;            /* the job's seed */
    zdist_initializer_t init; /* new rows' values (glorot's fans: [dim, dim]) */
    zdist_optim_config_t optim; /* adam is always lazy here: see psd_dyntable_apply */
    uint32_t min_count;       /* occurrences that admit an id; 0 or 1: the first */
    uint64_t evict_after_steps; /* evict rows not updated for more than this many steps; 0: never */
    double evict_l2_below;    /* evict rows whose values' L2 norm is below this; 0: never */
    const float *default_value; /* dim values answered for ids without a row (copied); NULL: zeros */
    psd_dyntable_budget_t *budget; /* borrowed; NULL: no bound */
} psd_dyntable_config_t;

typedef struct {
    uint64_t rows;          /* held now */
    uint64_t pending;       /* ids counted, not yet admitted */
    uint64_t admitted;      /* rows created (by admission or psd_dyntable_put), ever */
    uint64_t refused;       /* rows or counters not created: past the budget or out of memory */
    uint64_t evicted;       /* rows evicted, ever */
    uint64_t dropped_grads; /* gradient rows for ids without a row */
    uint64_t bytes;         /* what the table holds (chunks, index, counters, lists) */
} psd_dyntable_stats_t;

/* One row, borrowed: valid until the table next changes. */
typedef struct {
    int64_t id;
    const float *values;                        /* dim */
    const float *slots[ZDIST_OPTIM_MAX_SLOTS];  /* dim each; NULL past the optimizer's */
    uint32_t opt_step;   /* updates applied to the row (adam's t) */
    uint64_t last_step;  /* global step of its last update (of its creation before one) */
    bool changed;        /* created or updated since the last psd_dyntable_mark */
} psd_dyntable_row_t;

typedef struct psd_dyntable_t psd_dyntable_t;

/* A table, or NULL with err: -EINVAL for a bad dim, initializer, optimizer
   (validated) or eviction threshold, -ENOMEM. */
psd_dyntable_t *psd_dyntable_new(const psd_dyntable_config_t *cfg, zdist_error_t *err);
/* NULL-safe, idempotent; nulls the pointer and returns its bytes to the budget. */
void psd_dyntable_destroy(psd_dyntable_t **self_p);

int64_t psd_dyntable_dim(const psd_dyntable_t *self);
/* The name its rows' initial values are drawn for (borrowed, as long as the table). */
const char *psd_dyntable_name(const psd_dyntable_t *self);
/* The table's optimizer (borrowed, as long as the table). */
const zdist_optim_config_t *psd_dyntable_optim(const psd_dyntable_t *self);
void psd_dyntable_stats(const psd_dyntable_t *self, psd_dyntable_stats_t *ret_stats);

/* A training lookup: counts each occurrence of an id without a row,
   creates the rows whose count reaches min_count, then writes n x dim
   values to out (row-major): each id's row, or the default for an id
   still without one. Every occurrence of an id in one call gets the same
   answer (counted first, answered after). global_step is the rows' and
   counters' creation step for eviction. Returns how many of the n got the
   default; it cannot fail. */
size_t psd_dyntable_lookup_train(psd_dyntable_t *self, const int64_t *ids, size_t n,
                                 uint64_t global_step, float *out);
/* An evaluation lookup: the same answers, nothing counted or created. */
size_t psd_dyntable_lookup_eval(psd_dyntable_t *self, const int64_t *ids, size_t n, float *out);

/* The counting half of a training lookup, without an answer: what the
   psd runs when a step's sparse push arrives, under the exactly-once
   ledger, so that a retried or re-run step counts nothing twice (a lookup
   is not deduplicated; the push is). Returns the rows it created. */
size_t psd_dyntable_count(psd_dyntable_t *self, const int64_t *ids, size_t n, uint64_t global_step);

/* Applies n gradient rows (n x dim, row-major) with the table's optimizer:
   gradients of one id are summed first, in request order, then each
   touched row is updated once, as TF's sparse applies do; a row nobody
   touched is left alone (for adam: LazyAdam's semantics, but with the
   row's own step t in the bias correction, which advances only when the
   row is updated, where TF's LazyAdam takes the optimizer's global
   iterations: a row first trained late starts with t = 1, as a new
   row's should; restores keep t as opt_step). Rows touched get
   last_step = global_step and count as changed. Gradients for ids
   without a row are dropped and counted. 0, or -ENOMEM before anything
   changed. */
int psd_dyntable_apply(psd_dyntable_t *self, const int64_t *ids, size_t n, const float *grads,
                       uint64_t global_step);

/* Evicts, deterministically, every row that qualifies at global_step
   (a walk over every row, none when the table has no threshold):
   global_step - last_step > evict_after_steps (when set; DeepRec's
   steps_to_live), or the L2 norm of its values < evict_l2_below (when
   set). Counters not seen for more than evict_after_steps steps go too.
   Evicted ids join the list since the mark. Returns the rows evicted. */
size_t psd_dyntable_evict(psd_dyntable_t *self, uint64_t global_step);

/* The row of id, or false. */
bool psd_dyntable_find(psd_dyntable_t *self, int64_t id, psd_dyntable_row_t *ret_row);

/* Creates or overwrites id's row with values and slots (nslots arrays of
   dim, nslots the optimizer's; slots NULL: initial values) as a restore
   does: no counting, no admission rule. -ENOSPC past the budget (counted
   as refused), -EINVAL for a wrong nslots. */
int psd_dyntable_put(psd_dyntable_t *self, int64_t id, const float *values, const float *const *slots,
                     int nslots, uint32_t opt_step, uint64_t last_step);
/* Removes id's row, or else its admission counter (neither listed as
   evicted): true if it had a row. */
bool psd_dyntable_remove(psd_dyntable_t *self, int64_t id);

/* An id counted towards admission, not yet admitted (min_count > 1). */
typedef struct {
    int64_t id;
    uint32_t count;
    uint64_t last_seen; /* global step of its last occurrence */
} psd_dyntable_pending_t;
/* Puts id's admission counter as a restore replays it (count 0, or an id
   with a row: nothing). -ENOSPC past the budget. */
int psd_dyntable_put_pending(psd_dyntable_t *self, int64_t id, uint32_t count, uint64_t last_seen);
/* The counters (changed_only: those counted since the mark), ascending by
   id, in a new array the caller frees, *ret_n of them; NULL when out of
   memory. Counters evicted since the mark are among psd_dyntable_evicted's
   ids, and a row put by psd_dyntable_put ends its id's counter. */
psd_dyntable_pending_t *psd_dyntable_pending(psd_dyntable_t *self, bool changed_only, size_t *ret_n);

/* Calls fn on every row (changed_only: on those changed since the mark,
   found from their list, not by a walk over every row, unless it was
   dropped) in ascending id order; stops at fn's first nonzero return and returns
   it. -ENOMEM (nothing visited) when the order cannot be built. The table
   must not change during the walk. */
typedef int (*psd_dyntable_visit_fn)(const psd_dyntable_row_t *row, void *arg);
int psd_dyntable_iterate(psd_dyntable_t *self, bool changed_only, psd_dyntable_visit_fn fn, void *arg);

/* Ids evicted since the mark, ascending (an id may also have a row again,
   re-created since: a restore applies these removals before the rows).
   Borrowed until the table next changes. */
const int64_t *psd_dyntable_evicted(psd_dyntable_t *self, size_t *ret_n);
/* Starts a new interval (an incremental checkpoint was saved): no row is
   changed any more and the evicted list is empty. O(1) for the rows. */
void psd_dyntable_mark(psd_dyntable_t *self);

#ifdef __cplusplus
}
#endif
#endif
