/* psd_shard_impl: the shard's fields, for its sources only: psd_shard.c (its life, reads and
   checkpoint views), psd_write.c (its write path) and psd_dynshard.c (a dynamic table's part).
   Nothing else includes this. */
#ifndef PSD_SHARD_IMPL_H
#define PSD_SHARD_IMPL_H

#include <pthread.h>

#include "psd_buffer.h"
#include "psd_shard.h"
#include "psd_write.h"

struct _psd_shard_t {
    psd_shard_spec_t spec; /* spec.name points at name */
    char name[PSD_NAME_MAX + 1];
    int64_t width;
    size_t esize, row_bytes, value_bytes;
    pthread_rwlock_t lock;
    bool lock_ready;
    /* guarded by lock */
    void *values; /* vals->data */
    psd_values_t *vals;
    psd_pool_t *pool; /* set once */
    void *slots[ZDIST_OPTIM_MAX_SLOTS];
    int nslots; /* allocated slots: 0 or the optimizer's count */
    zdist_optim_config_t optim;
    int64_t step;
    zdist_optim_scratch_t scratch;
    psd_dedup_table_t *dedup; /* set once; its contents replaced by a restore */
    /* a dynamic table's part (spec.dynamic.enabled): its rows, no values of its own */
    psd_dyntable_t *dyn;
    bool dyn_refusal_told;
};

/* psd_dynshard.c: a dynamic part's table, made by psd_shard_new from its spec. */
int psd_shard_dyn_open(psd_shard_t *self, const psd_shard_spec_t *spec, zdist_error_t *err);
/* The optimizer of a dynamic part: its table is made anew when it holds no rows (else kept). */
int psd_shard_dyn_set_optimizer(psd_shard_t *self, const zdist_optim_config_t *cfg, zdist_error_t *err);
/* psd_shard_check_write and psd_shard_write for a dynamic part: sparse pushes only. */
int psd_shard_dyn_check_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err);
int psd_shard_dyn_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err);

/* Resolves a dense row range (PSD_WHOLE_SHARD allowed) to a local row;
   -EINVAL with a message naming the shard's range. */
int psd_shard_range(const psd_shard_t *self, int64_t row_start, int64_t nrows, int64_t *ret_local,
                    int64_t *ret_n, zdist_error_t *err);
/* -EINVAL naming the first id outside the shard. */
int psd_shard_check_ids(const psd_shard_t *self, const int64_t *ids, size_t nids, zdist_error_t *err);
/* Bytes of n rows, or -EINVAL when it cannot be. */
int psd_shard_rows_bytes(const psd_shard_t *self, uint64_t n, size_t *ret);
/* Optimizers run on float shards only. */
static inline bool
psd_dtype_is_float(zdist_dtype_t dtype)
{
    return dtype == ZDIST_DTYPE_FLOAT32 || dtype == ZDIST_DTYPE_FLOAT64;
}
/* Drops the optimizer slots; under the write lock. */
void psd_shard_free_slots(psd_shard_t *self);

#endif
