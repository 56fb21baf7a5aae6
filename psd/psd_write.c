/* psd_write: a shard's write path: checks, then under its write lock dedup, copy on write and apply.
   Read psd_shard_write at the bottom first: it calls the three stages in that order. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "psd_shard_impl.h"
#include "psd_write.h"

/* ---- element kernels ---- */

/* dst := X + src (or X - src) elementwise, X being dst itself or another
   buffer (values a reply still holds). */
#define S_ADDSUB(T, U, X)                                               \
    do {                                                                \
        T *d = dst;                                                     \
        const T *x = X, *s = src;                                       \
        if (sub)                                                        \
            for (size_t i = 0; i < n; i++)                              \
                d[i] = (T) ((U) x[i] - (U) s[i]);                       \
        else                                                            \
            for (size_t i = 0; i < n; i++)                              \
                d[i] = (T) ((U) x[i] + (U) s[i]);                       \
    } while (0)

/* Integer arithmetic wraps as TF's does (computed unsigned: no UB). */
#define S_ADDSUB_DTYPES(X)                                              \
    do {                                                                \
        switch (dtype) {                                                \
        case ZDIST_DTYPE_FLOAT32:                                       \
            S_ADDSUB(float, float, X);                                  \
            break;                                                      \
        case ZDIST_DTYPE_FLOAT64:                                       \
            S_ADDSUB(double, double, X);                                \
            break;                                                      \
        case ZDIST_DTYPE_INT32:                                         \
            S_ADDSUB(int32_t, uint32_t, X);                             \
            break;                                                      \
        case ZDIST_DTYPE_INT64:                                         \
            S_ADDSUB(int64_t, uint64_t, X);                             \
            break;                                                      \
        case ZDIST_DTYPE_UINT8:                                         \
            S_ADDSUB(uint8_t, uint8_t, X);                              \
            break;                                                      \
        default:                                                        \
            break;                                                      \
        }                                                               \
    } while (0)

static void
s_addsub(zdist_dtype_t dtype, void *restrict dst, const void *restrict src, size_t n, bool sub)
{
    S_ADDSUB_DTYPES(dst);
}

/* In a separate function: restrict keeps dst apart from in. */
static void
s_addsub_to(zdist_dtype_t dtype, void *restrict dst, const void *restrict in, const void *restrict src,
            size_t n, bool sub)
{
    S_ADDSUB_DTYPES(in);
}

static const char *
s_op_name(psd_op_t op)
{
    switch (op) {
    case PSD_OP_ASSIGN:
        return "assign";
    case PSD_OP_ASSIGN_ADD:
        return "assign_add";
    case PSD_OP_ASSIGN_SUB:
        return "assign_sub";
    case PSD_OP_SCATTER_ADD:
        return "scatter_add";
    case PSD_OP_SCATTER_UPDATE:
        return "scatter_update";
    case PSD_OP_APPLY_DENSE:
        return "apply (dense)";
    case PSD_OP_APPLY_SPARSE:
        return "apply (sparse)";
    }
    return "unknown";
}


static bool
s_is_dense(psd_op_t op)
{
    return op == PSD_OP_ASSIGN || op == PSD_OP_ASSIGN_ADD || op == PSD_OP_ASSIGN_SUB || op == PSD_OP_APPLY_DENSE;
}

static bool
s_is_apply(psd_op_t op)
{
    return op == PSD_OP_APPLY_DENSE || op == PSD_OP_APPLY_SPARSE;
}

/* Allocates slots at their initial values; under the write lock. */
static int
s_ensure_slots(psd_shard_t *self)
{
    int count = zdist_optim_num_slots(self->optim.kind);
    if (self->nslots == count)
        return 0;
    void *fresh[ZDIST_OPTIM_MAX_SLOTS] = {0};
    size_t n = self->value_bytes / self->esize;
    for (int i = 0; i < count; i++) {
        fresh[i] = psd_buffer_alloc(self->value_bytes);
        if (!fresh[i]) {
            for (int k = 0; k < i; k++)
                free(fresh[k]);
            return -ENOMEM;
        }
        zdist_optim_slot_fill(&self->optim, i, self->spec.dtype, fresh[i], n);
    }
    psd_shard_free_slots(self);
    for (int i = 0; i < count; i++)
        self->slots[i] = fresh[i];
    self->nslots = count;
    return 0;
}

/* Everything psd_shard_write checks before it takes the lock: the local
   first row, the rows and the bytes the write covers. */
static int
s_check_write(psd_shard_t *self, const psd_write_t *w, int64_t *ret_local, size_t *ret_need,
              zdist_error_t *err)
{
    const psd_shard_spec_t *s = &self->spec;
    bool dense = s_is_dense(w->op);
    bool by_id = w->op == PSD_OP_SCATTER_ADD || w->op == PSD_OP_SCATTER_UPDATE
                 || w->op == PSD_OP_APPLY_SPARSE;
    if (!dense && !by_id)
        return zdist_error_set(err, -EINVAL, "unknown write operation %d", (int) w->op);
    const char *op = s_op_name(w->op);
    if (w->dtype != s->dtype)
        return zdist_error_set(err, -EINVAL, "%s on '%s' part %d: expected dtype %s, got %s", op,
                               s->name, (int) s->shard_index, zdist_dtype_name(s->dtype),
                               zdist_dtype_name(w->dtype));
    if (s_is_apply(w->op) && !psd_dtype_is_float(s->dtype))
        return zdist_error_set(err, -EINVAL, "%s on '%s': optimizers need a float32 or float64 "
                               "variable, not %s", op, s->name, zdist_dtype_name(s->dtype));
    int64_t local = 0, n = 0;
    uint64_t rows;
    int rc;
    if (dense) {
        if ((rc = psd_shard_range(self, w->row_start, w->nrows, &local, &n, err)) < 0) {
            zdist_error_prefix(err, "%s", op);
            return rc;
        }
        rows = (uint64_t) n;
    } else {
        if ((rc = psd_shard_check_ids(self, w->ids, w->nids, err)) < 0) {
            zdist_error_prefix(err, "%s", op);
            return rc;
        }
        rows = w->nids;
    }
    size_t need = 0;
    if (psd_shard_rows_bytes(self, rows, &need) < 0 || need != w->nbytes || (need > 0 && !w->data)) {
        char shape[160];
        zdist_shape_t rs = s->shape;
        if (rs.rank == 0)
            rs.rank = 1;
        rs.dims[0] = (int64_t) rows;
        zdist_shape_format(&rs, shape, sizeof shape);
        return zdist_error_set(err, -EINVAL, "%s on '%s' part %d: expected %s %s = %zu bytes, "
                               "got %zu bytes", op, s->name, (int) s->shard_index, shape,
                               zdist_dtype_name(s->dtype), need, w->data ? w->nbytes : 0);
    }
    *ret_local = local;
    *ret_need = need;
    return 0;
}

int
psd_shard_check_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err)
{
    int64_t local;
    size_t need;
    if (self->dyn)
        return psd_shard_dyn_check_write(self, w, err);
    return s_check_write(self, w, &local, &need, err);
}

/* Stage 2, copy on write: a buffer a reply still holds is left to it and
   the write goes to another. A dense write of the whole shard computes the
   new values there from the held ones in one pass; any other copies them
   first. *ret_old is what the write reads; *ret_held the buffer left to the
   reply (NULL when none), whose reference the shard drops once the write
   is done: a reply released meanwhile must not free what the write reads. */
static int
s_copy_on_write(psd_shard_t *self, const psd_write_t *w, int64_t local, size_t need, const char **ret_old,
                psd_values_t **ret_held)
{
    *ret_old = self->values;
    *ret_held = NULL;
    if (!psd_values_shared(self->vals))
        return 0;
    psd_values_t *v = psd_values_other(self->pool, self->value_bytes);
    if (!v)
        return -ENOMEM;
    if (!(s_is_dense(w->op) && local == 0 && need == self->value_bytes)) {
        memcpy(v->data, self->values, self->value_bytes);
        *ret_old = v->data;
    }
    *ret_held = self->vals;
    self->vals = v;
    self->values = v->data;
    return 0;
}

/* An optimizer step over the rows the write covers, read from `from`
   (dense) or by id. A push in parts advances the step once, with its last. */
static int
s_apply_optimizer(psd_shard_t *self, const psd_write_t *w, int64_t local, size_t need, const char *from)
{
    const psd_shard_spec_t *s = &self->spec;
    int64_t step = self->step + 1;
    int rc;
    if (w->op == PSD_OP_APPLY_DENSE) {
        void *row_slots[ZDIST_OPTIM_MAX_SLOTS] = {0};
        for (int i = 0; i < self->nslots; i++)
            row_slots[i] = (char *) self->slots[i] + (size_t) local * self->row_bytes;
        char *base = (char *) self->values + (size_t) local * self->row_bytes;
        rc = zdist_optim_apply_dense_to(&self->optim, s->dtype, step, base, from, row_slots, w->data,
                                        need / self->esize);
    } else {
        rc = zdist_optim_apply_sparse(&self->optim, s->dtype, step, self->values, self->slots,
                                      s->row_offset, s->rows, self->width, w->ids, w->nids,
                                      w->data, &self->scratch);
    }
    if (rc == 0 && !w->more_parts)
        self->step = step;
    return rc;
}

/* Stage 3, apply: the new values of the rows the write covers, computed
   from `old` (the values before it: the shard's own, or the ones a reply
   holds) into the shard's values. */
static int
s_apply(psd_shard_t *self, const psd_write_t *w, int64_t local, size_t need, const char *old)
{
    const psd_shard_spec_t *s = &self->spec;
    char *base = (char *) self->values + (size_t) local * self->row_bytes;
    const char *from = old + (size_t) local * self->row_bytes;
    size_t nelem = need / self->esize;
    switch (w->op) {
    case PSD_OP_ASSIGN:
        if (need)
            memcpy(base, w->data, need);
        return 0;
    case PSD_OP_ASSIGN_ADD:
    case PSD_OP_ASSIGN_SUB:
        if (from == base)
            s_addsub(s->dtype, base, w->data, nelem, w->op == PSD_OP_ASSIGN_SUB);
        else
            s_addsub_to(s->dtype, base, from, w->data, nelem, w->op == PSD_OP_ASSIGN_SUB);
        return 0;
    case PSD_OP_SCATTER_ADD:
    case PSD_OP_SCATTER_UPDATE:
        for (size_t i = 0; i < w->nids; i++) {
            char *row = (char *) self->values + (size_t) (w->ids[i] - s->row_offset) * self->row_bytes;
            const char *src = (const char *) w->data + i * self->row_bytes;
            if (w->op == PSD_OP_SCATTER_UPDATE)
                memcpy(row, src, self->row_bytes);
            else
                s_addsub(s->dtype, row, src, (size_t) self->width, false);
        }
        return 0;
    case PSD_OP_APPLY_DENSE:
    case PSD_OP_APPLY_SPARSE:
        return s_apply_optimizer(self, w, local, need, from);
    }
    return 0;
}

int
psd_shard_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err)
{
    if (self->dyn) /* a dynamic table's part: the same dedup, then count and apply (psd_dynshard.c) */
        return psd_shard_dyn_write(self, w, err);
    int64_t local = 0;
    size_t need = 0;
    int rc = s_check_write(self, w, &local, &need, err);
    if (rc < 0)
        return rc;
    psd_dedup_key_t key = {.job_step = w->job_step, .step_write = w->step_write,
                           .client_id = w->client_id, .sequence = w->sequence};
    const char *old = NULL;   /* what the write reads */
    psd_values_t *held = NULL; /* the values a reply holds, when the write moved away from them */
    pthread_rwlock_wrlock(&self->lock);
    rc = psd_dedup_admit(self->dedup, &key); /* 1. applied already? */
    if (rc == 0 && s_is_apply(w->op))
        rc = s_ensure_slots(self); /* while a failure still leaves the shard as it was */
    if (rc == 0)
        rc = s_copy_on_write(self, w, local, need, &old, &held); /* 2. a reply holds the values? */
    if (rc == 0)
        rc = s_apply(self, w, local, need, old); /* 3. */
    if (rc == 0)
        psd_dedup_record(self->dedup, &key);
    pthread_rwlock_unlock(&self->lock);
    psd_values_release(held);
    if (rc == -ENOMEM)
        zdist_error_set(err, rc, "%s on '%s': out of memory", s_op_name(w->op), self->spec.name);
    return rc;
}
