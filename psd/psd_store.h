/* psd_store: the psd's shards by (variable name, shard index), and each job's optimizer.

   Thread rules: every function may be called from any thread. A shard
   pointer returned by the store stays valid until the store is destroyed
   or the shard's job is dropped (psd_store_drop_job): the psd drops on the
   thread that serves every request, so no handler holds a pointer across
   it. A reply answered zero-copy (psd_shard_pin) holds a reference to the
   values it sends: a drop, like a write, leaves them to the reply until
   libzmq has sent it. */
#ifndef PSD_STORE_H
#define PSD_STORE_H

#include "psd_dyntable_ckpt.h"
#include "psd_shard.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct _psd_store_t psd_store_t;

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

/* The shards of `job` (every one for NULL or "") that are dynamic
   tables' parts (dynamic) or not, in psd_store_list's order, in a new
   array (the caller frees it); *ret_n receives how many. NULL when out of
   memory. */
psd_shard_t **psd_store_list_job(psd_store_t *self, const char *job, bool dynamic, size_t *ret_n);

/* The chain of job `job`'s dynamic tables' checkpoints on this psd
   (psd_dyntable_ckpt; job NULL or "": the store's own), made at the first
   call with a full every full_every saves (0: PSD_STORE_DYN_FULL_EVERY)
   and kept until the job is dropped (a restarted psd starts a new chain:
   its first save is a full); a later call with full_every > 0 sets it
   anew (the job file's checkpoint.full_every, sent with each save). Borrowed; only the thread that saves and restores uses it.
   NULL with err set: -ENOMEM, -ENOSPC past PSD_MAX_JOBS jobs. */
psd_dyntable_ckpt_t *psd_store_dyn_ckpt(psd_store_t *self, const char *job, int full_every, zdist_error_t *err);
#define PSD_STORE_DYN_FULL_EVERY 10

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

typedef struct {
    size_t variables;     /* distinct names */
    size_t shards;
    uint64_t value_bytes; /* bytes of values */
    uint64_t slot_bytes;  /* bytes of allocated optimizer slots */
    uint64_t spare_bytes; /* values buffers kept for writes to pinned shards (not in --max-bytes) */
} psd_store_stats_t;
void psd_store_stats(psd_store_t *self, psd_store_stats_t *ret_stats);

#ifdef __cplusplus
}
#endif
#endif
