/* psd_shard: one variable shard: its life, its reads (copied or pinned for a zero-copy reply) and its checkpoint view.
   Its write path is psd_write.c; the store that names shards is psd_store.c. */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psd_shard_impl.h"

void
psd_shard_destroy(psd_shard_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    psd_shard_t *self = *self_p;
    if (self->lock_ready)
        pthread_rwlock_destroy(&self->lock);
    if (self->vals)
        psd_values_release(self->vals);
    else
        free(self->values);
    if (self->pool) {
        /* Ours now; a buffer a reply still holds comes back to the pool
           after this, and the reply frees it with the pool. */
        psd_pool_drop_spare(self->pool);
        psd_pool_release(self->pool);
    }
    for (int i = 0; i < ZDIST_OPTIM_MAX_SLOTS; i++)
        free(self->slots[i]);
    zdist_optim_scratch_release(&self->scratch);
    psd_dedup_table_destroy(&self->dedup);
    psd_dyntable_destroy(&self->dyn);
    free(self);
    *self_p = NULL;
}

uint64_t
psd_shard_retire(psd_shard_t **self_p)
{
    psd_shard_t *self = *self_p;
    /* Its write lock: a reader on another thread (the store's API allows
       one) finishes before the shard goes. */
    pthread_rwlock_wrlock(&self->lock);
    uint64_t bytes = self->value_bytes + (uint64_t) self->nslots * self->value_bytes;
    if (self->dyn) {
        psd_dyntable_stats_t st;
        psd_dyntable_stats(self->dyn, &st);
        bytes += st.bytes;
    }
    pthread_rwlock_unlock(&self->lock);
    psd_shard_destroy(self_p);
    return bytes;
}

void
psd_shard_memory(psd_shard_t *self, uint64_t *ret_slot_bytes, uint64_t *ret_spare_bytes)
{
    pthread_rwlock_rdlock(&self->lock);
    *ret_slot_bytes = (uint64_t) self->nslots * self->value_bytes;
    pthread_rwlock_unlock(&self->lock);
    *ret_spare_bytes = psd_pool_has_spare(self->pool) ? self->value_bytes : 0;
}

void
psd_shard_free_slots(psd_shard_t *self)
{
    for (int i = 0; i < ZDIST_OPTIM_MAX_SLOTS; i++) {
        free(self->slots[i]);
        self->slots[i] = NULL;
    }
    self->nslots = 0;
}

int
psd_shard_spec_validate(const psd_shard_spec_t *spec, int64_t *ret_width, size_t *ret_value_bytes,
                        zdist_error_t *err)
{
    if (!spec->name || !spec->name[0])
        return zdist_error_set(err, -EINVAL, "variable name is empty; give the variable a name");
    size_t len = strnlen(spec->name, PSD_NAME_MAX + 1);
    if (len > PSD_NAME_MAX)
        return zdist_error_set(err, -EINVAL, "variable name is longer than %d bytes", PSD_NAME_MAX);
    if (!zdist_dtype_is_data(spec->dtype))
        return zdist_error_set(err, -EINVAL, "variable '%s': dtype %s cannot be stored; use "
                               "float32, float64, int32, int64 or uint8", spec->name,
                               zdist_dtype_name(spec->dtype));
    zdist_shape_t shape;
    if (zdist_shape_init(&shape, spec->shape.rank, spec->shape.dims) < 0)
        return zdist_error_set(err, -EINVAL, "variable '%s': shape has rank %d or a negative "
                               "dimension; rank is 0..%d, dimensions >= 0", spec->name,
                               spec->shape.rank, ZDIST_MAX_RANK);
    size_t bytes;
    if (zdist_tensor_byte_size(spec->dtype, &spec->shape, &bytes) < 0)
        return zdist_error_set(err, -EINVAL, "variable '%s': shape is too large", spec->name);
    int64_t total = spec->shape.rank > 0 ? spec->shape.dims[0] : 1;
    int64_t width = 1;
    for (int i = 1; i < spec->shape.rank; i++)
        width *= spec->shape.dims[i]; /* no overflow: the whole shape fits */
    if (spec->shard_index < 0)
        return zdist_error_set(err, -EINVAL, "variable '%s': shard index %d is negative",
                               spec->name, (int) spec->shard_index);
    if (spec->row_offset < 0 || spec->rows < 0 || spec->row_offset > total
        || spec->rows > total - spec->row_offset)
        return zdist_error_set(err, -EINVAL, "variable '%s' part %d: rows [%" PRId64 ", %" PRId64
                               ") are outside its %" PRId64 " rows", spec->name,
                               (int) spec->shard_index, spec->row_offset,
                               spec->row_offset + spec->rows, total);
    int rc = zdist_init_validate(&spec->init, spec->dtype, err);
    if (rc < 0) {
        zdist_error_prefix(err, "variable '%s'", spec->name);
        return rc;
    }
    *ret_width = width;
    *ret_value_bytes = (size_t) spec->rows * (size_t) width * zdist_dtype_size(spec->dtype);
    return 0;
}

psd_shard_t *
psd_shard_new(const psd_shard_spec_t *spec, int64_t width, size_t value_bytes,
              const zdist_optim_config_t *optim, int *ret_rc, zdist_error_t *err)
{
    *ret_rc = -ENOMEM;
    psd_shard_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->spec = *spec;
    snprintf(self->name, sizeof self->name, "%s", spec->name);
    self->spec.name = self->name;
    self->spec.init_name = NULL; /* the caller's, used by the fill below only */
    self->width = width;
    self->esize = zdist_dtype_size(spec->dtype);
    self->row_bytes = (size_t) width * self->esize;
    self->value_bytes = value_bytes;
    self->optim = *optim;
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* glibc favours readers by default; a steady stream of pulls would starve pushes. */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(&self->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0)
        goto fail;
    self->lock_ready = true;
    self->values = psd_buffer_alloc(value_bytes);
    if (!self->values || !(self->pool = psd_pool_new(value_bytes))
        || !(self->vals = psd_values_wrap(self->pool, self->values)) || !(self->dedup = psd_dedup_table_new(NULL, 0)))
        goto fail;
    if ((*ret_rc = zdist_init_fill(&spec->init, spec->seed, spec->init_name ? spec->init_name : spec->name, spec->dtype, &spec->shape,
                                 spec->row_offset, spec->rows, self->values, value_bytes, err)) < 0)
        goto fail;
    if (spec->dynamic.enabled && (*ret_rc = psd_shard_dyn_open(self, spec, err)) < 0)
        goto fail;
    return self;
fail:
    psd_shard_destroy(&self);
    return NULL;
}

const psd_shard_spec_t *
psd_shard_spec(const psd_shard_t *self)
{
    return &self->spec;
}

int64_t
psd_shard_row_width(const psd_shard_t *self)
{
    return self->width;
}

size_t
psd_shard_row_bytes(const psd_shard_t *self)
{
    return self->row_bytes;
}

size_t
psd_shard_value_bytes(const psd_shard_t *self)
{
    return self->value_bytes;
}

int64_t
psd_shard_step(psd_shard_t *self)
{
    pthread_rwlock_rdlock(&self->lock);
    int64_t step = self->step;
    pthread_rwlock_unlock(&self->lock);
    return step;
}

void
psd_shard_get_optimizer(psd_shard_t *self, zdist_optim_config_t *ret_cfg)
{
    pthread_rwlock_rdlock(&self->lock);
    *ret_cfg = self->optim;
    pthread_rwlock_unlock(&self->lock);
}

int
psd_shard_set_optimizer(psd_shard_t *self, const zdist_optim_config_t *cfg, zdist_error_t *err)
{
    int rc = zdist_optim_config_validate(cfg, err);
    if (rc < 0)
        return rc;
    if (self->dyn)
        return psd_shard_dyn_set_optimizer(self, cfg, err);
    pthread_rwlock_wrlock(&self->lock);
    if (cfg->kind != self->optim.kind) {
        psd_shard_free_slots(self);
        self->step = 0;
    }
    self->optim = *cfg;
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

int
psd_shard_range(const psd_shard_t *self, int64_t row_start, int64_t nrows, int64_t *ret_local,
                int64_t *ret_n, zdist_error_t *err)
{
    const psd_shard_spec_t *s = &self->spec;
    if (nrows == PSD_WHOLE_SHARD) {
        *ret_local = 0;
        *ret_n = s->rows;
        return 0;
    }
    if (nrows < 0 || row_start < s->row_offset || row_start > s->row_offset + s->rows
        || nrows > s->row_offset + s->rows - row_start)
        return zdist_error_set(err, -EINVAL, "rows [%" PRId64 ", %" PRId64 ") are outside shard "
                               "'%s' part %d, which holds rows [%" PRId64 ", %" PRId64 ")",
                               row_start, row_start + (nrows > 0 ? nrows : 0), s->name,
                               (int) s->shard_index, s->row_offset, s->row_offset + s->rows);
    *ret_local = row_start - s->row_offset;
    *ret_n = nrows;
    return 0;
}

int
psd_shard_check_ids(const psd_shard_t *self, const int64_t *ids, size_t nids, zdist_error_t *err)
{
    const psd_shard_spec_t *s = &self->spec;
    int64_t lo = s->row_offset, hi = s->row_offset + s->rows;
    if (nids > 0 && !ids)
        return zdist_error_set(err, -EINVAL, "%zu ids announced but none given", nids);
    for (size_t i = 0; i < nids; i++)
        if (ids[i] < lo || ids[i] >= hi)
            return zdist_error_set(err, -EINVAL, "id %" PRId64 " (at position %zu) is outside "
                                   "shard '%s' part %d, which holds rows [%" PRId64 ", %" PRId64 ")",
                                   ids[i], i, s->name, (int) s->shard_index, lo, hi);
    return 0;
}

int
psd_shard_rows_bytes(const psd_shard_t *self, uint64_t n, size_t *ret)
{
    size_t bytes;
    if (n > SIZE_MAX || __builtin_mul_overflow((size_t) n, self->row_bytes, &bytes))
        return -EINVAL;
    *ret = bytes;
    return 0;
}

int
psd_shard_check_buf(const psd_shard_t *self, uint64_t nrows, size_t buf_bytes, zdist_error_t *err)
{
    size_t need = 0;
    if (psd_shard_rows_bytes(self, nrows, &need) < 0 || buf_bytes < need)
        return zdist_error_set(err, -EINVAL, "buffer of %zu bytes is too small for %" PRIu64
                               " rows of %zu bytes", buf_bytes, nrows, self->row_bytes);
    return 0;
}

int
psd_shard_read(psd_shard_t *self, int64_t row_start, int64_t nrows, void *buf, size_t buf_bytes,
               zdist_error_t *err)
{
    int64_t local = 0, n = 0;
    int rc = psd_shard_range(self, row_start, nrows, &local, &n, err);
    if (rc < 0 || (rc = psd_shard_check_buf(self, (uint64_t) n, buf_bytes, err)) < 0)
        return rc;
    if (n == 0)
        return 0;
    pthread_rwlock_rdlock(&self->lock);
    memcpy(buf, (char *) self->values + (size_t) local * self->row_bytes,
           (size_t) n * self->row_bytes);
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

int
psd_shard_pin(psd_shard_t *self, int64_t row_start, int64_t nrows, void **ret_data, size_t *ret_bytes,
              void **ret_pin, zdist_error_t *err)
{
    int64_t local = 0, n = 0;
    int rc = psd_shard_range(self, row_start, nrows, &local, &n, err);
    if (rc < 0)
        return rc;
    pthread_rwlock_rdlock(&self->lock);
    psd_values_hold(self->vals);
    *ret_pin = self->vals;
    *ret_data = (char *) self->values + (size_t) local * self->row_bytes;
    *ret_bytes = (size_t) n * self->row_bytes;
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

void
psd_shard_unpin(void *data, void *pin)
{
    (void) data;
    psd_values_release(pin);
}

int
psd_shard_read_ids(psd_shard_t *self, const int64_t *ids, size_t nids, void *buf,
                   size_t buf_bytes, zdist_error_t *err)
{
    int rc = psd_shard_check_ids(self, ids, nids, err);
    if (rc < 0 || (rc = psd_shard_check_buf(self, nids, buf_bytes, err)) < 0)
        return rc;
    pthread_rwlock_rdlock(&self->lock);
    for (size_t i = 0; i < nids; i++)
        memcpy((char *) buf + i * self->row_bytes,
               (char *) self->values + (size_t) (ids[i] - self->spec.row_offset) * self->row_bytes,
               self->row_bytes);
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

int
psd_shard_read_slot(psd_shard_t *self, int slot, int64_t row_start, int64_t nrows, void *buf,
                    size_t buf_bytes, zdist_error_t *err)
{
    int64_t local = 0, n = 0;
    int rc = psd_shard_range(self, row_start, nrows, &local, &n, err);
    if (rc < 0 || (rc = psd_shard_check_buf(self, (uint64_t) n, buf_bytes, err)) < 0)
        return rc;
    pthread_rwlock_rdlock(&self->lock);
    int count = zdist_optim_num_slots(self->optim.kind);
    if (slot < 0 || slot >= count || !psd_dtype_is_float(self->spec.dtype)) {
        pthread_rwlock_unlock(&self->lock);
        return zdist_error_set(err, -EINVAL, "shard '%s' has no optimizer slot %d (%s has %d)",
                               self->name, slot, zdist_optim_kind_name(self->optim.kind), count);
    }
    size_t off = (size_t) local * self->row_bytes, len = (size_t) n * self->row_bytes;
    if (self->nslots)
        memcpy(buf, (char *) self->slots[slot] + off, len);
    else
        zdist_optim_slot_fill(&self->optim, slot, self->spec.dtype, buf, len / self->esize);
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

void
psd_shard_view_begin(psd_shard_t *self, psd_shard_view_t *ret_view)
{
    pthread_rwlock_rdlock(&self->lock);
    psd_shard_view_t v = {
        .values = self->values,
        .value_bytes = self->value_bytes,
        .optim = self->optim,
        .nslots = self->nslots,
        .step = self->step,
        .ndedup = psd_dedup_table_size(self->dedup),
        .ledger = psd_dedup_table_ledger(self->dedup),
    };
    for (int i = 0; i < self->nslots; i++)
        v.slots[i] = self->slots[i];
    *ret_view = v;
}

void
psd_shard_view_end(psd_shard_t *self)
{
    pthread_rwlock_unlock(&self->lock);
}

void
psd_shard_view_dedup(psd_shard_t *self, size_t i, psd_dedup_t *ret)
{
    psd_dedup_table_get(self->dedup, i, ret);
}

void
psd_shard_replace(psd_shard_t *self, void **values_p, void **slots_p, int nslots, zdist_optim_kind_t kind,
                  int64_t step, psd_dedup_table_t **dedup_p)
{
    psd_dedup_table_t *table = dedup_p ? *dedup_p : NULL;
    if (dedup_p)
        *dedup_p = NULL;
    pthread_rwlock_wrlock(&self->lock);
    if (table) {
        psd_dedup_table_t *mine = self->dedup;
        self->dedup = table;
        table = mine; /* freed below, outside the lock */
    } else {
        psd_dedup_table_clear(self->dedup);
    }
    /* The new values get a count of their own; the old ones go when the
       last reply holding them is sent. Without memory for the count, wait
       for those replies and reuse it (replace cannot fail). */
    psd_values_t *old = self->vals, *v = psd_values_wrap(self->pool, *values_p);
    if (!v) {
        while (psd_values_shared(old))
            sched_yield();
        free(old->data);
        old->data = *values_p;
        v = old;
        old = NULL;
    }
    self->vals = v;
    self->values = v->data;
    *values_p = NULL;
    psd_shard_free_slots(self);
    bool install = nslots > 0 && kind == self->optim.kind
                   && nslots == zdist_optim_num_slots(self->optim.kind);
    for (int i = 0; i < nslots; i++) {
        if (install)
            self->slots[i] = slots_p[i];
        else
            free(slots_p[i]);
        slots_p[i] = NULL;
    }
    self->nslots = install ? nslots : 0;
    self->step = kind == self->optim.kind ? step : 0;
    pthread_rwlock_unlock(&self->lock);
    psd_values_release(old);
    psd_dedup_table_destroy(&table);
}

bool
psd_name_in_job(const char *name, const char *job)
{
    if (!job || !*job)
        return true;
    size_t n = strlen(job);
    return strncmp(name, job, n) == 0 && name[n] == '/';
}

bool
psd_shard_in_job(const psd_shard_t *self, const char *job)
{
    return psd_name_in_job(self->name, job);
}

