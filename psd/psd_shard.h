/* psd_shard: one variable shard of the psd: rows of a variable, their optimizer slots and exactly-once table.

   Thread rules: every function may be called from any thread. Each shard
   has its own rwlock (writers preferred): writes (psd_write.h) are atomic
   per shard, readers never see a half-applied write. A reply answered
   zero-copy (psd_shard_pin) holds a reference to the values it sends: a
   write, like a drop, leaves them to the reply until libzmq has sent it
   (psd_buffer.h). */
#ifndef PSD_SHARD_H
#define PSD_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/init.h"
#include "zdist/optim.h"
#include "zdist/error.h"
#include "zdist/tensor.h"
#include "psd_dedup.h"
#include "psd_dyntable.h"
#include "zdist/ps_service.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest variable name, in bytes (without the NUL). */
#define PSD_NAME_MAX 255
/* Row count meaning "every row of the shard" (reads, psd_write_t.nrows). */
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
    /* enabled: a dynamic embedding table's part (psd_dynshard.c): shape
       [0, dim], no rows of its own, rows by id in a psd_dyntable */
    zdist_ps_dynamic_t dynamic;
    psd_dyntable_budget_t *budget; /* dynamic: the psd's --max-bytes (borrowed; outlives the shard) */
} psd_shard_spec_t;

typedef struct _psd_shard_t psd_shard_t;

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

/* ---- a dynamic table's part (psd_dynshard.c) ----
   The part's rows live in a psd_dyntable under the shard's lock; its
   writes go through psd_shard_write's dedup (psd_write.h), so a sparse
   push counts its ids' occurrences toward admission, creates the rows that
   reach min_count and applies its gradients exactly once per (job step,
   ordinal). Dense reads see no rows. */

/* True for a dynamic table's part. */
bool psd_shard_is_dynamic(const psd_shard_t *self);
/* Rows of n ids (ids on other ps tasks, by zdist_partition_id_ps, are
   -EINVAL naming the first): each id's row, or the table's default (zeros)
   for an id not admitted; nothing is counted or created. */
int psd_shard_lookup(psd_shard_t *self, const int64_t *ids, size_t nids, float *out, size_t out_bytes,
                     zdist_error_t *err);
/* The table's counters. */
void psd_shard_dyn_stats(psd_shard_t *self, psd_dyntable_stats_t *ret_stats);
/* Evicts the rows that qualify at global step `step` (psd_dyntable_evict:
   by age, by norm), as a checkpoint of that step is taken, so that the
   checkpoint and every run evict the same rows. Returns how many went. */
size_t psd_shard_dyn_evict(psd_shard_t *self, uint64_t step);
/* True once, the first time the table has refused an id (past --max-bytes):
   the caller logs it then, once per table. */
bool psd_shard_dyn_refusal_news(psd_shard_t *self);

/* ---- for psd_store ---- */

/* Checks a spec on its own (the messages of psd_store_create) and computes
   its row width and bytes of values. */
int psd_shard_spec_validate(const psd_shard_spec_t *spec, int64_t *ret_width, size_t *ret_value_bytes,
                            zdist_error_t *err);
/* A shard of a validated spec filled by its initializer, with optimizer
   optim; NULL with *ret_rc -ENOMEM, or the initializer's error and message.
   spec->name is copied. */
psd_shard_t *psd_shard_new(const psd_shard_spec_t *spec, int64_t width, size_t value_bytes,
                           const zdist_optim_config_t *optim, int *ret_rc, zdist_error_t *err);
/* NULL-safe, idempotent, nulls *self_p; destroys a half-built shard too. */
void psd_shard_destroy(psd_shard_t **self_p);
/* Waits for readers holding the shard's lock, then destroys it; returns the
   bytes of values and slots it held. */
uint64_t psd_shard_retire(psd_shard_t **self_p);
/* Bytes of allocated optimizer slots, and of the spare values buffer kept
   for writes to a pinned shard (0 without one). */
void psd_shard_memory(psd_shard_t *self, uint64_t *ret_slot_bytes, uint64_t *ret_spare_bytes);
/* -EINVAL (message) when buf_bytes is smaller than nrows rows. */
int psd_shard_check_buf(const psd_shard_t *self, uint64_t nrows, size_t buf_bytes, zdist_error_t *err);

/* ---- for psd_ckpt ---- */

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
/* A dynamic part's checkpoint (psd_ckpt_dyn.c): takes the part's write lock, fills
   ret_view's exactly-once table and ledger (no values) and returns the
   table, which the caller evicts, saves and marks under that lock; pair
   with psd_shard_view_end. */
psd_dyntable_t *psd_shard_dyn_save_begin(psd_shard_t *self, psd_shard_view_t *ret_view);
/* A new, empty table of the part's configuration and optimizer (for a
   restore to fill); NULL with err set. */
psd_dyntable_t *psd_shard_dyn_table_new(psd_shard_t *self, zdist_error_t *err);
/* Swaps in a restored table and exactly-once table (both taken, pointers
   nulled) and the count of pushes applied (the shard's step) under the
   write lock; the old ones are freed. Cannot fail. */
void psd_shard_dyn_replace(psd_shard_t *self, psd_dyntable_t **table_p, psd_dedup_table_t **dedup_p,
                           int64_t step);

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

