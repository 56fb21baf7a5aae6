/* psd_shard: the psd's variable shards and the store that maps names to them. */
#ifndef PSD_SHARD_H
#define PSD_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/init.h"
#include "zdist/optim.h"
#include "zdist/error.h"
#include "zdist/tensor.h"
#include "psd_ledger.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest variable name, in bytes (without the NUL). */
#define PSD_NAME_MAX 255
/* Clients remembered per shard for exactly-once writes (least recently used
   evicted beyond), and how many sequence numbers below the highest applied
   one are tracked individually. */
#define PSD_DEDUP_MAX_CLIENTS 1024
#define PSD_DEDUP_WINDOW 64
/* Positive return of a write that was a retransmission: acknowledged, not
   applied again. */
#define PSD_DUPLICATE 1
/* psd_write_t.nrows value meaning "every row of the shard". */
#define PSD_WHOLE_SHARD (-1)

/* A shard: rows [row_offset, row_offset + rows) of variable `name` whose
   full shape is `shape` (rows slice dim 0; a scalar is a single row). */
typedef struct {
    const char *name;
    zdist_shape_t shape;
    zdist_dtype_t dtype;
    int32_t shard_index;
    int64_t row_offset;
    int64_t rows;
    zdist_initializer_t init;
    uint64_t seed;
    const char *init_name; /* values drawn for it (NULL: name); borrowed for the create only */
} psd_shard_spec_t;

typedef struct _psd_shard_t psd_shard_t;
typedef struct _psd_store_t psd_store_t;

/* ---- store ----
   Thread rules: every function may be called from any thread. A shard
   pointer returned by the store stays valid until the store is destroyed
   or the shard's job is dropped (psd_store_drop_job): the psd drops on the
   thread that serves every request, so no handler holds a pointer across
   it. Each shard has its own rwlock (writers preferred): writes are atomic
   per shard, readers never see a half-applied write. A reply answered
   zero-copy (psd_shard_pin) holds a reference to the values it sends: a
   drop, like a write, leaves them to the reply until libzmq has sent it. */

psd_store_t *psd_store_new(void);
/* NULL-safe, idempotent, nulls *self_p. No other thread may use the store. */
void psd_store_destroy(psd_store_t **self_p);

/* Jobs whose optimizer a store remembers (psd_store_set_optimizer_job). */
#define PSD_MAX_JOBS 1024

/* Optimizer every shard uses (default: sgd, lr 0.01). Applied to existing
   shards too; a shard whose kind changes drops its slots and step counter.
   -EINVAL (message) for a bad config. */
int psd_store_set_optimizer(psd_store_t *self, const zdist_optim_config_t *cfg, zdist_error_t *err);
void psd_store_get_optimizer(psd_store_t *self, zdist_optim_config_t *ret_cfg);
/* The optimizer of one job's shards (psd_shard_in_job): applied to those it
   holds and to those created later, whatever the store's default; other
   jobs' shards keep theirs. job NULL or "": psd_store_set_optimizer.
   -EINVAL for a bad config, -ENOSPC past PSD_MAX_JOBS jobs. */
int psd_store_set_optimizer_job(psd_store_t *self, const char *job, const zdist_optim_config_t *cfg,
                                zdist_error_t *err);

/* Removes every shard of job `job`'s namespace (psd_shard_in_job; job
   non-empty) with its values, optimizer slots and exactly-once table, and
   forgets the job's optimizer. Returns how many shards went (0 for a job
   the store does not hold: dropping twice is fine); ret_bytes (may be NULL)
   gets their bytes of values and slots, which psd_store_stats no longer
   counts. -EINVAL for a NULL or empty job (that would be every shard). */
int psd_store_drop_job(psd_store_t *self, const char *job, uint64_t *ret_bytes);

/* Creates the shard (name, shard_index) filled by its initializer. The same
   spec again returns 0 and changes nothing; another spec under the same key,
   or a spec disagreeing with other shards of the variable (dtype, full
   shape) is -EEXIST; overlapping rows of another shard, bad shapes, ranges,
   dtypes or initializers are -EINVAL; all with a message. spec->name is
   copied. ret_shard (may be NULL) receives the shard, existing or new. */
int psd_store_create(psd_store_t *self, const psd_shard_spec_t *spec, psd_shard_t **ret_shard,
                     zdist_error_t *err);
/* Borrowed shard or NULL. */
psd_shard_t *psd_store_find(psd_store_t *self, const char *name, int32_t shard_index);
/* The first shard (lowest index) of variable `name` here, for its dtype and
   row shape; borrowed, or NULL. */
psd_shard_t *psd_store_first(psd_store_t *self, const char *name);
/* The shard of variable `name` holding global row `row`, or NULL. */
psd_shard_t *psd_store_find_row(psd_store_t *self, const char *name, int64_t row);
/* With out NULL: returns how many shards the store holds. Otherwise copies
   up to max shard pointers (ordered by name, then shard index) into out and
   returns how many it copied (never more than max, even if shards were
   created since the count was taken). */
size_t psd_store_list(psd_store_t *self, psd_shard_t **out, size_t max);
/* Rows by global id across this store's shards of `name` (duplicates fine).
   -ENOENT if the variable is unknown; -EINVAL naming the first id no shard
   here holds, or when buf_bytes < nids x row bytes. Nothing is written to
   buf on error. */
int psd_store_read_ids(psd_store_t *self, const char *name, const int64_t *ids, size_t nids,
                       void *buf, size_t buf_bytes, zdist_error_t *err);

/* A buffer for a shard's values or slots: big ones on huge-page boundaries.
   Freed with free(). */
void *psd_buffer_alloc(size_t bytes);

typedef struct {
    size_t variables;     /* distinct names */
    size_t shards;
    uint64_t value_bytes; /* bytes of values */
    uint64_t slot_bytes;  /* bytes of allocated optimizer slots */
    uint64_t spare_bytes; /* values buffers kept for writes to pinned shards (not in --max-bytes) */
} psd_store_stats_t;
void psd_store_stats(psd_store_t *self, psd_store_stats_t *ret_stats);

/* ---- shard ---- */

/* True when the shard belongs to job `job`'s namespace: its name begins
   "JOB/". Every shard belongs to job NULL or "". */
bool psd_shard_in_job(const psd_shard_t *self, const char *job);
/* The same for a variable name. */
bool psd_name_in_job(const char *name, const char *job);

/* The shard's spec; name borrowed from the shard. Immutable. */
const psd_shard_spec_t *psd_shard_spec(const psd_shard_t *self);
/* Elements per row and bytes per row. */
int64_t psd_shard_row_width(const psd_shard_t *self);
size_t psd_shard_row_bytes(const psd_shard_t *self);
/* Bytes of all values of the shard. */
size_t psd_shard_value_bytes(const psd_shard_t *self);
/* Applies so far (the optimizer's step counter). */
int64_t psd_shard_step(psd_shard_t *self);
/* The shard's optimizer; setting another kind drops slots and the step. */
void psd_shard_get_optimizer(psd_shard_t *self, zdist_optim_config_t *ret_cfg);
int psd_shard_set_optimizer(psd_shard_t *self, const zdist_optim_config_t *cfg, zdist_error_t *err);

/* Reads nrows global rows from row_start (PSD_WHOLE_SHARD: all) into buf.
   -EINVAL (message names the shard's range) if outside the shard or
   buf_bytes is smaller than needed. */
int psd_shard_read(psd_shard_t *self, int64_t row_start, int64_t nrows, void *buf,
                   size_t buf_bytes, zdist_error_t *err);
/* Rows like psd_shard_read, without copying, for a reply sent zero-copy:
   *ret_data (*ret_bytes long) stays valid and unchanged until
   psd_shard_unpin (data, *ret_pin) — a zdist_free_fn, callable from any
   thread — however the shard is written meanwhile: while any are pinned a
   write goes to another buffer (computed there in one pass when it covers
   the whole shard densely, else after a copy), the shard's spare when it
   has one: the buffer the last unpin released. -EINVAL as psd_shard_read. */
int psd_shard_pin(psd_shard_t *self, int64_t row_start, int64_t nrows, void **ret_data, size_t *ret_bytes,
                  void **ret_pin, zdist_error_t *err);
void psd_shard_unpin(void *data, void *pin);
/* Reads rows by global id (duplicates fine); -EINVAL naming the first id
   outside the shard and the shard's range. */
int psd_shard_read_ids(psd_shard_t *self, const int64_t *ids, size_t nids, void *buf,
                       size_t buf_bytes, zdist_error_t *err);
/* Copies one optimizer slot (i < zdist_optim_num_slots) for rows like
   psd_shard_read. A slot not yet allocated reads as its initial value. */
int psd_shard_read_slot(psd_shard_t *self, int slot, int64_t row_start, int64_t nrows, void *buf,
                        size_t buf_bytes, zdist_error_t *err);

typedef enum {
    PSD_OP_ASSIGN = 1,      /* dense rows := data */
    PSD_OP_ASSIGN_ADD,      /* dense rows += data */
    PSD_OP_ASSIGN_SUB,      /* dense rows -= data */
    PSD_OP_SCATTER_ADD,     /* rows[ids[i]] += data[i] */
    PSD_OP_SCATTER_UPDATE,  /* rows[ids[i]] := data[i] (later duplicates win) */
    PSD_OP_APPLY_DENSE,     /* optimizer step with a dense gradient for rows */
    PSD_OP_APPLY_SPARSE,    /* optimizer step with gradient rows by id (summed) */
} psd_op_t;

/* One write. Data is row-major, little-endian, of the shard's dtype:
   nrows x row bytes for dense ops, nids x row bytes for id ops. */
typedef struct {
    psd_op_t op;
    uint64_t client_id; /* 0: not deduplicated */
    uint64_t sequence;  /* per client, increasing */
    uint64_t job_step;  /* the job's step that writes (psd_ledger.h); 0: deduplicated by client and sequence */
    uint32_t step_write; /* its ordinal among that step's writes to the shard */
    zdist_dtype_t dtype;
    int64_t row_start; /* dense ops: first global row */
    int64_t nrows;     /* dense ops: rows, or PSD_WHOLE_SHARD */
    bool more_parts;   /* APPLY_DENSE: a part of a push, more follow; the step advances with the last */
    const int64_t *ids;
    size_t nids;
    const void *data;
    size_t nbytes;
} psd_write_t;

/* Validates everything, then applies the write under the shard's write
   lock. Returns 0 when applied, PSD_DUPLICATE when (job_step, step_write)
   was already applied to this shard (psd_ledger.h) or, for a write without
   a job step, when (client_id, sequence) was (the highest sequence plus a
   window of PSD_DEDUP_WINDOW below it are remembered; anything older
   counts as applied), or a negative errno with a message naming expected vs got:
   -EINVAL for a wrong dtype, length, row range or id, or an optimizer op on
   an integer shard; -ENOMEM. A refused write changes nothing and is not
   recorded, so it may be retried. */
int psd_shard_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err);
/* The checks of psd_shard_write alone (0 or its -EINVAL and message): what
   a write of several shards runs on all of them before it applies any. */
int psd_shard_check_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err);

/* ---- for psd_ckpt ---- */

/* What a shard remembers of one client for exactly-once writes: the
   highest sequence applied, and bit i of window set when sequence
   highest - 1 - i was applied (older ones count as applied). */
typedef struct {
    uint64_t client_id;
    uint64_t highest;
    uint64_t window;
} psd_dedup_t;

/* A consistent view of a shard's state while its read lock is held. */
typedef struct {
    const void *values;
    size_t value_bytes;
    zdist_optim_config_t optim;
    int nslots;                              /* 0 when slots are not allocated */
    const void *slots[ZDIST_OPTIM_MAX_SLOTS];  /* each value_bytes long */
    int64_t step;
    size_t ndedup; /* clients remembered; read them with psd_shard_view_dedup */
    const psd_ledger_t *ledger; /* the steps applied, while the view is held */
} psd_shard_view_t;
/* Takes the read lock and fills view; pair with psd_shard_view_end. */
void psd_shard_view_begin(psd_shard_t *self, psd_shard_view_t *ret_view);
void psd_shard_view_end(psd_shard_t *self);
/* Client i (< view.ndedup) of the exactly-once table, while the view is held. */
void psd_shard_view_dedup(psd_shard_t *self, size_t i, psd_dedup_t *ret);

/* True when (client, seq) counts as applied by this record. */
bool psd_dedup_seen(const psd_dedup_t *d, uint64_t seq);

/* An exactly-once table ready to be swapped into a shard (so the swap
   cannot fail): the first PSD_DEDUP_MAX_CLIENTS records of list with a
   client id other than 0. NULL when out of memory. */
typedef struct _psd_dedup_table_t psd_dedup_table_t;
psd_dedup_table_t *psd_dedup_table_new(const psd_dedup_t *list, size_t n);
void psd_dedup_table_destroy(psd_dedup_table_t **self_p);
/* The table's ledger of steps becomes *ledger (taken; *ledger emptied). */
void psd_dedup_table_set_ledger(psd_dedup_table_t *self, psd_ledger_t *ledger);

/* Replaces the shard's state under its write lock, taking ownership of
   *values_p (malloc'd, psd_shard_value_bytes long) and of slots_p[0..nslots)
   (each as long), and nulling the pointers taken. The slots are installed
   when nslots equals the slot count of the shard's optimizer kind `kind`
   as it is now; otherwise (0 slots, or the optimizer changed meanwhile) they
   are freed and the shard starts fresh slots on its next apply. The
   exactly-once table becomes *dedup_p (taken, nulled; NULL or a NULL
   table: empty), so it describes the writes the new values hold: a
   retransmission of one of them is a duplicate, a write they lack is
   applied. The old buffers are freed. Cannot fail. */
void psd_shard_replace(psd_shard_t *self, void **values_p, void **slots_p, int nslots,
                       zdist_optim_kind_t kind, int64_t step, psd_dedup_table_t **dedup_p);

#ifdef __cplusplus
}
#endif
#endif
