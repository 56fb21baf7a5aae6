/* zdist strategy_cross: the cross-replica methods (reduce, gather, local
   results, distributing values and datasets) and Strategy.extended. */
#include "strategy_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char s_gather_cross[] =
    "tf.distribute.Strategy.gather method requires cross-replica context, use "
    "get_replica_context().all_gather() instead";

static int
s_check_values(const zdist_strategy_object_t *self, const char *what, const zdist_tensor_t *values, int n,
               zdist_error_t *err)
{
    if (!values)
        return zdist_error_set(err, -EINVAL, "%s: values is NULL", what);
    if (n != self->replicas)
        return zdist_error_set(
            err, -EINVAL,
            "%s: %d values for a %s of %d %sreplicas; pass one per replica (strategy.run's "
            "per-replica results)",
            what, n, zdist_strategy_class_name(self), self->replicas, self->workers > 1 ? "local " : "");
    return 0;
}

/* cross_device_ops.reduce_non_distributed_value: zeros stay zeros, MEAN is
   the value, SUM over several replicas is TF's ValueError. */
static int
s_reduce_non_distributed(const zdist_strategy_object_t *self, zdist_reduce_op_t op,
                         const zdist_tensor_t *value, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) self;
    bool zeros = true;
    for (size_t i = 0; i < value->nbytes && zeros; i++)
        zeros = ((const unsigned char *) value->data)[i] == 0;
    if (!zeros && op == ZDIST_REDUCE_SUM) {
        char text[64] = "<a tensor>";
        if (value->shape.rank == 0 && value->dtype == ZDIST_DTYPE_FLOAT32) {
            double v = *(const float *) value->data;
            snprintf(text, sizeof text, v == (double) (long long) v ? "%.1f" : "%g", v);
        } else if (value->shape.rank == 0 && value->dtype == ZDIST_DTYPE_FLOAT64) {
            double v = *(const double *) value->data;
            snprintf(text, sizeof text, v == (double) (long long) v ? "%.1f" : "%g", v);
        } else if (value->shape.rank == 0 && value->dtype == ZDIST_DTYPE_INT32) {
            snprintf(text, sizeof text, "%d", *(const int32_t *) value->data);
        } else if (value->shape.rank == 0 && value->dtype == ZDIST_DTYPE_INT64) {
            snprintf(text, sizeof text, "%lld", (long long) *(const int64_t *) value->data);
        }
        return zdist_error_set(err, -EINVAL,
                               "A non-DistributedValues value %s cannot be reduced with the given reduce op "
                               "ReduceOp.SUM.",
                               text);
    }
    zdist_tensor_t out = *value;
    out.name = NULL;
    out.data = malloc(value->nbytes ? value->nbytes : 1);
    if (!out.data)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    memcpy(out.data, value->data, value->nbytes);
    *ret = out;
    return 0;
}

int
zdist_strategy_reduce(zdist_strategy_object_t *self, zdist_reduce_op_t op, const zdist_tensor_t *values,
                      int n, int axis, zdist_tensor_t *ret, zdist_error_t *err)
{
    bool none = axis == ZDIST_AXIS_NONE;
    return zdist_strategy_reduce_axes(self, op, values, n, none ? NULL : &axis, none ? 0 : 1, ret, err);
}

int
zdist_strategy_reduce_axes(zdist_strategy_object_t *self, zdist_reduce_op_t op, const zdist_tensor_t *values,
                           int n, const int *axes, int num_axes, zdist_tensor_t *ret, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "reduce: strategy is NULL");
    int rc = strategy_require_cross(self, NULL, err);
    if (rc < 0)
        return rc;
    if (n == 1 && values && self->replicas > 1) { /* a value that is not distributed */
        if (!axes)
            return s_reduce_non_distributed(self, op, values, ret, err);
        return zdist_distribute_reduce_axes(op, values, 1, axes, num_axes, ret, err);
    }
    if ((rc = s_check_values(self, "reduce", values, n, err)) < 0)
        return rc;
    if (self->workers > 1)
        return strategy_mw_reduce(self, op, values, n, axes, num_axes, ret, err);
    return zdist_distribute_reduce_axes(op, values, n, axes, num_axes, ret, err);
}

int
zdist_strategy_gather(zdist_strategy_object_t *self, const zdist_tensor_t *values, int n, int axis,
                      zdist_tensor_t *ret, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "gather: strategy is NULL");
    int rc = strategy_require_cross(self, s_gather_cross, err);
    if (rc < 0)
        return rc;
    if ((rc = s_check_values(self, "gather", values, n, err)) < 0)
        return rc;
    if (self->workers > 1)
        return strategy_mw_gather(self, values, n, axis, ret, err);
    return zdist_distribute_gather(values, n, axis, ret, err);
}

int
zdist_strategy_gather_indexed_slices(zdist_strategy_object_t *self, const zdist_indexed_slices_t *values,
                                     int n, int axis, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) values, (void) n, (void) axis, (void) ret;
    if (!self)
        return zdist_error_set(err, -EINVAL, "gather: strategy is NULL");
    int rc = strategy_require_cross(self, s_gather_cross, err);
    return rc < 0 ? rc : zdist_error_set(err, -ENOTSUP, "gather does not support IndexedSlices");
}

int
zdist_strategy_experimental_local_results(zdist_strategy_object_t *self, const zdist_tensor_t *values, int n,
                                          const zdist_tensor_t **ret_values, int *ret_n, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "experimental_local_results: strategy is NULL");
    if (n == 1)
        return zdist_distribute_local_results(values, 1, 0, 1, ret_values, ret_n, err);
    int rc = s_check_values(self, "experimental_local_results", values, n, err);
    if (rc < 0)
        return rc;
    return zdist_distribute_local_results(values, n, 0, n, ret_values, ret_n, err);
}

int
zdist_strategy_experimental_distribute_values_from_function(zdist_strategy_object_t *self, zdist_value_fn fn,
                                                            void *arg, zdist_tensor_t *ret_values,
                                                            zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL,
                               "experimental_distribute_values_from_function: strategy is NULL");
    return zdist_distribute_values_from_function(self->total, self->rank * self->replicas, self->replicas, fn,
                                                 arg, ret_values, err);
}

int
zdist_strategy_experimental_distribute_dataset(zdist_strategy_object_t *self, const zdist_dataset_t *dataset,
                                               const zdist_input_options_t *opts, zdist_input_t **ret,
                                               zdist_error_t *err)
{
    if (!self || !dataset || !opts || !ret)
        return zdist_error_set(err, -EINVAL,
                               "experimental_distribute_dataset: strategy, dataset, options and ret "
                               "are required");
    zdist_input_context_t *ctx = zdist_input_context_new(self->workers, self->rank, self->total, err);
    if (!ctx)
        return err ? err->code : -ENOMEM;
    zdist_input_t *in = zdist_input_new(dataset, ctx, opts, err);
    zdist_input_context_destroy(&ctx);
    if (!in)
        return err && err->code < 0 ? err->code : -EINVAL;
    *ret = in;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Strategy.extended                                                          */

int
zdist_strategy_extended_reduce_to(zdist_strategy_object_t *self, zdist_reduce_op_t op,
                                  const zdist_tensor_t *values, int n,
                                  const zdist_strategy_var_t *destination, zdist_tensor_t *dests,
                                  int num_dests, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "reduce_to: strategy is NULL");
    int rc = strategy_require_cross(self, NULL, err);
    if (rc < 0)
        return rc;
    if ((rc = s_check_values(self, "reduce_to", values, n, err)) < 0)
        return rc;
    if (destination) {
        if ((rc = strategy_check_own_var(self, destination, err)) < 0)
            return rc;
        if (num_dests != destination->ncopies)
            return zdist_error_set(
                err, -EINVAL, "reduce_to: destination %s has %d copies; pass num_dests %d buffers, not %d",
                destination->name, destination->ncopies, destination->ncopies, num_dests);
    }
    if (self->workers > 1) {
        zdist_reduce_pair_t pair = {values, n, dests, num_dests};
        return strategy_mw_batch_reduce_to(self, op, &pair, 1, err);
    }
    return zdist_distribute_reduce_to(op, values, n, dests, num_dests, err);
}

int
zdist_strategy_extended_batch_reduce_to(zdist_strategy_object_t *self, zdist_reduce_op_t op,
                                        const zdist_reduce_pair_t *pairs, int n, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "batch_reduce_to: strategy is NULL");
    int rc = strategy_require_cross(self, NULL, err);
    if (rc < 0)
        return rc;
    for (int i = 0; pairs && i < n; i++)
        if ((rc = s_check_values(self, "batch_reduce_to", pairs[i].values, pairs[i].num_replicas, err)) < 0) {
            zdist_error_prefix(err, "pair %d", i);
            return rc;
        }
    if (self->workers > 1)
        return strategy_mw_batch_reduce_to(self, op, pairs, n, err);
    return zdist_distribute_batch_reduce_to(op, pairs, n, err);
}

/* update(var, fn, arg) from a replica context: TF's _replica_ctx_update, a
   merge_call whose merge function updates every copy, copy r with replica
   r's argument (one copy: once, with replica 0's). */
static int
s_update_in_replica(zdist_strategy_replica_t *ctx, zdist_strategy_var_t *var, zdist_update_fn fn, void *arg,
                    zdist_error_t *err)
{
    zdist_strategy_object_t *s = ctx->strategy;
    int rc = strategy_check_own_var(s, var, err);
    if (rc < 0)
        return rc;
    if (!fn)
        return zdist_error_set(err, -EINVAL, "update: fn is required");
    s->uargs[ctx->id] = arg;
    if ((rc = strategy_barrier(ctx, "update", err)) < 0)
        return rc;
    if (ctx->id == 0) {
        zdist_error_clear(&s->coll_err);
        s->coll_rc = 0;
        for (int c = 0; c < var->ncopies && s->coll_rc == 0; c++) {
            s->coll_rc = fn(&var->copies[c], c, s->uargs[var->ncopies == 1 ? 0 : c]);
            if (s->coll_rc < 0)
                zdist_error_set(&s->coll_err, s->coll_rc, "update of %s: fn failed on copy %d", var->name, c);
        }
    }
    if ((rc = strategy_barrier(ctx, "update", err)) < 0)
        return rc;
    if (s->coll_rc < 0 && err)
        *err = s->coll_err;
    return s->coll_rc;
}

int
zdist_strategy_extended_update(zdist_strategy_object_t *self, zdist_strategy_var_t *var, zdist_update_fn fn,
                               void *arg, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "update: strategy is NULL");
    if (strategy_tl_replica && strategy_tl_replica->strategy == self)
        return s_update_in_replica(strategy_tl_replica, var, fn, arg, err);
    int rc = strategy_require_cross(self, NULL, err);
    if (rc < 0)
        return rc;
    if ((rc = strategy_check_own_var(self, var, err)) < 0)
        return rc;
    if (self->ps)
        return zdist_error_set(err, -ENOTSUP,
                               "update of %s: under parameter_server the variable lives on the psds; write it "
                               "with zdist_strategy_variable_assign (assign, assign_add, assign_sub)",
                               var->name);
    return zdist_distribute_update(var->copies, var->ncopies, fn, arg, err);
}

int
zdist_strategy_extended_colocate_vars_with_begin(zdist_strategy_object_t *self,
                                                 const zdist_strategy_var_t *anchor, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "colocate_vars_with: strategy is NULL");
    int rc = strategy_require_scope(self, err);
    if (rc < 0)
        return rc;
    if (!anchor)
        return zdist_error_set(err, -EINVAL, "colocate_vars_with: the anchor variable is NULL");
    if (anchor->strategy != self)
        return zdist_error_set(err, -EINVAL,
                               "`colocate_vars_with` must only be passed a variable created in this "
                               "tf.distribute.Strategy.scope(), not %s created in scope: %s",
                               anchor->name, zdist_strategy_class_name(anchor->strategy));
    if (strategy_tl_anchor_strategy)
        return zdist_error_set(err, -EBUSY,
                               "colocate_vars_with(%s) is already open on this thread; end it before opening "
                               "another",
                               strategy_tl_anchor->name);
    strategy_tl_anchor = anchor;
    strategy_tl_anchor_strategy = self;
    return 0;
}

int
zdist_strategy_extended_colocate_vars_with_end(zdist_strategy_object_t *self, zdist_error_t *err)
{
    if (!self || strategy_tl_anchor_strategy != self)
        return zdist_error_set(err, -EINVAL,
                               "colocate_vars_with end: no colocate_vars_with is open on this thread "
                               "for this strategy");
    strategy_tl_anchor = NULL;
    strategy_tl_anchor_strategy = NULL;
    return 0;
}

bool
zdist_strategy_extended_variable_created_in_scope(const zdist_strategy_object_t *self,
                                                  const zdist_strategy_var_t *var)
{
    return self && var && var->strategy == self;
}
