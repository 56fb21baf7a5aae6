/* zdist strategy_var: the Strategy object's variables — created in scope,
   placed by the strategy, read and written from the cross-replica context. */
#include "strategy_internal.h"
#include "strategy_ps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
strategy_var_free(zdist_strategy_var_t *v)
{
    if (!v)
        return;
    if (v->copies)
        for (int i = 0; i < v->ncopies; i++)
            free(v->copies[i].data);
    free(v->copies);
    free(v->name);
    strategy_ps_var_destroy(&v->ps);
    free(v);
}

int
zdist_strategy_variable_new(zdist_strategy_object_t *self, const zdist_strategy_var_def_t *def,
                            zdist_strategy_var_t **ret, zdist_error_t *err)
{
    if (!self || !def || !ret)
        return zdist_error_set(err, -EINVAL, "variable: strategy, def and ret are required");
    int rc = strategy_require_scope(self, err);
    if (rc < 0)
        return rc;
    if (!def->name || !*def->name)
        return zdist_error_set(err, -EINVAL, "variable: name is missing; give every variable a name");
    switch (def->dtype) {
    case ZDIST_DTYPE_FLOAT32:
    case ZDIST_DTYPE_FLOAT64:
    case ZDIST_DTYPE_INT32:
    case ZDIST_DTYPE_INT64:
        break;
    default:
        return zdist_error_set(err, -EINVAL,
                               "variable %s: dtype %s is not served; use float32, float64, int32 or int64",
                               def->name, zdist_dtype_name(def->dtype));
    }
    if (def->synchronization != ZDIST_SYNC_ON_WRITE && def->synchronization != ZDIST_SYNC_ON_READ)
        return zdist_error_set(err, -EINVAL,
                               "variable %s: synchronization %d is unknown; use ON_WRITE or ON_READ",
                               def->name, (int) def->synchronization);
    if ((int) def->aggregation < ZDIST_AGG_NONE || def->aggregation > ZDIST_AGG_ONLY_FIRST_REPLICA)
        return zdist_error_set(
            err, -EINVAL, "variable %s: aggregation %d is unknown; use NONE, SUM, MEAN or ONLY_FIRST_REPLICA",
            def->name, (int) def->aggregation);
    size_t nbytes = 0;
    zdist_shape_t shape;
    if (zdist_shape_init(&shape, def->shape.rank, def->shape.dims) < 0 ||
        zdist_tensor_byte_size(def->dtype, &shape, &nbytes) < 0)
        return zdist_error_set(err, -EINVAL, "variable %s: shape is invalid (rank 0..%d, dims >= 0)",
                               def->name, ZDIST_MAX_RANK);
    for (zdist_strategy_var_t *o = self->vars; o; o = o->next)
        if (strcmp(o->name, def->name) == 0)
            return zdist_error_set(err, -EEXIST,
                                   "variable %s: a variable of that name exists in this strategy", def->name);
    int ncopies = 1;
    if (self->kind == ZDIST_STRATEGY_MIRRORED || self->kind == ZDIST_STRATEGY_MULTI_WORKER_MIRRORED ||
        self->kind == ZDIST_STRATEGY_TPU ||
        (self->kind == ZDIST_STRATEGY_CENTRAL_STORAGE && def->synchronization == ZDIST_SYNC_ON_READ))
        ncopies = self->replicas;
    zdist_strategy_var_t *v = calloc(1, sizeof *v);
    if (!v)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    v->strategy = self;
    v->name = strdup(def->name);
    v->dtype = def->dtype;
    v->shape = shape;
    v->nbytes = nbytes;
    v->sync = def->synchronization;
    v->agg = def->aggregation;
    v->ncopies = ncopies;
    v->copies = calloc((size_t) ncopies, sizeof *v->copies);
    if (!v->name || !v->copies) {
        strategy_var_free(v);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    for (int i = 0; i < ncopies; i++) {
        zdist_tensor_t *c = &v->copies[i];
        c->name = v->name;
        c->dtype = v->dtype;
        c->shape = shape;
        c->nbytes = nbytes;
        c->data = calloc(1, nbytes ? nbytes : 1);
        if (!c->data) {
            strategy_var_free(v);
            return zdist_error_set(err, -ENOMEM, "out of memory");
        }
        if (def->initial_value && nbytes)
            memcpy(c->data, def->initial_value, nbytes);
    }
    if (self->workers > 1 && nbytes) {
        /* MultiWorkerMirroredStrategy: the initial value is worker 0's,
           broadcast to every worker (each creates its variables in the same
           order) */
        int rc2 = zdist_comm_broadcast(self->comm, 0, v->copies[0].data, nbytes, 0, err);
        if (rc2 < 0) {
            strategy_var_free(v);
            zdist_error_prefix(err, "variable %s: broadcasting worker 0's initial value", def->name);
            return rc2;
        }
        for (int i = 1; i < ncopies; i++)
            memcpy(v->copies[i].data, v->copies[0].data, nbytes);
    }
    if (strategy_tl_anchor_strategy == self)
        v->anchor = strategy_tl_anchor;
    if (self->ps && (rc = strategy_ps_var_new(self->ps, v->name, v->dtype, &v->shape, def->initial_value, nbytes,
                                              v->anchor ? v->anchor->ps : NULL, &v->ps, err)) < 0) {
        strategy_var_free(v);
        return rc;
    }
    *self->vars_tail = v;
    self->vars_tail = &v->next;
    *ret = v;
    return 0;
}

const char *
zdist_strategy_variable_name(const zdist_strategy_var_t *var)
{
    return var ? var->name : NULL;
}

int
zdist_strategy_variable_num_copies(const zdist_strategy_var_t *var)
{
    return var ? var->ncopies : 0;
}

const zdist_tensor_t *
zdist_strategy_variable_copy(const zdist_strategy_var_t *var, int i)
{
    if (!var || i < 0 || i >= var->ncopies)
        return NULL;
    return &var->copies[i];
}

const zdist_strategy_var_t *
zdist_strategy_variable_colocated_with(const zdist_strategy_var_t *var)
{
    return var ? var->anchor : NULL;
}

int
strategy_check_own_var(const zdist_strategy_object_t *self, const zdist_strategy_var_t *var, zdist_error_t *err)
{
    if (!var)
        return zdist_error_set(err, -EINVAL, "variable is NULL");
    if (var->strategy != self)
        return zdist_error_set(err, -EINVAL,
                               "variable %s was created under another strategy's scope, not this %s's",
                               var->name, zdist_strategy_class_name(self));
    return 0;
}

/* A cross-replica read or write of var: the context, then the variable. */
static int
s_cross_var(const zdist_strategy_object_t *self, const zdist_strategy_var_t *var, zdist_error_t *err)
{
    int rc = strategy_require_cross(self, NULL, err);
    return rc < 0 ? rc : strategy_check_own_var(self, var, err);
}

int
zdist_strategy_variable_read(zdist_strategy_object_t *self, const zdist_strategy_var_t *var,
                             zdist_tensor_t *ret, zdist_error_t *err)
{
    int rc = s_cross_var(self, var, err);
    if (rc < 0)
        return rc;
    if (self->ps) {
        /* its shards, from the psds; the copy keeps what was read */
        if (!ret || ret->dtype != var->dtype || ret->nbytes != var->nbytes || (!ret->data && var->nbytes))
            return zdist_error_set(
                err, -EINVAL, "read of %s: ret must be a buffer of the variable's dtype and size", var->name);
        if ((rc = strategy_ps_var_read(self->ps, var->ps, var->copies[0].data, var->nbytes, err)) < 0)
            return rc;
        memcpy(ret->data, var->copies[0].data, var->nbytes);
        return 0;
    }
    if (self->workers > 1 && var->sync == ZDIST_SYNC_ON_READ &&
        (var->agg == ZDIST_AGG_SUM || var->agg == ZDIST_AGG_MEAN)) {
        /* SyncOnRead SUM / MEAN: every replica of every worker */
        if (!ret || ret->dtype != var->dtype || ret->nbytes != var->nbytes || !ret->data)
            return zdist_error_set(
                err, -EINVAL, "read of %s: ret must be a buffer of the variable's dtype and size", var->name);
        zdist_tensor_t v;
        rc = strategy_mw_reduce(self, var->agg == ZDIST_AGG_SUM ? ZDIST_REDUCE_SUM : ZDIST_REDUCE_MEAN, var->copies,
                         var->ncopies, NULL, 0, &v, err);
        if (rc < 0)
            return rc;
        if (v.dtype != var->dtype || v.nbytes != var->nbytes) {
            free(v.data);
            return zdist_error_set(err, -EINVAL,
                                   "read of %s: MEAN of %s copies is a %s, not the variable's dtype; give the "
                                   "variable SUM aggregation or a float dtype",
                                   var->name, zdist_dtype_name(var->dtype), zdist_dtype_name(v.dtype));
        }
        memcpy(ret->data, v.data, var->nbytes);
        free(v.data);
        return 0;
    }
    return zdist_distribute_var_read_cross_replica(var->sync, var->agg, var->copies, var->ncopies, ret, err);
}

int
zdist_strategy_variable_assign(zdist_strategy_object_t *self, zdist_strategy_var_t *var, zdist_var_op_t op,
                               const zdist_tensor_t *value, zdist_error_t *err)
{
    int rc = s_cross_var(self, var, err);
    if (rc < 0)
        return rc;
    if (self->ps) {
        if (!value || value->dtype != var->dtype || value->nbytes != var->nbytes || (!value->data && var->nbytes))
            return zdist_error_set(err, -EINVAL, "assign to %s: the value must have the variable's dtype and size",
                                   var->name);
        return strategy_ps_var_write(self->ps, var->ps, op, value->data, var->nbytes, err);
    }
    if (self->workers > 1 && var->sync == ZDIST_SYNC_ON_READ && var->agg == ZDIST_AGG_SUM &&
        op == ZDIST_VAR_ASSIGN && value) {
        /* each copy holds value / num_replicas_in_sync, so that the SUM over
           every worker reads value back: this worker's share first */
        if ((rc = strategy_ring_dtype("assign", value->dtype, err)) < 0)
            return rc;
        zdist_tensor_t share = *value;
        share.data = malloc(value->nbytes ? value->nbytes : 1);
        if (!share.data)
            return zdist_error_set(err, -ENOMEM, "out of memory");
        for (size_t i = 0; i < value->nbytes / sizeof(float); i++)
            ((float *) share.data)[i] = ((const float *) value->data)[i] / (float) self->workers;
        rc = zdist_distribute_var_write_cross_replica(var->sync, var->agg, op, var->copies, var->ncopies,
                                                      &share, err);
        free(share.data);
        return rc;
    }
    return zdist_distribute_var_write_cross_replica(var->sync, var->agg, op, var->copies, var->ncopies, value,
                                                    err);
}
