/* zdist strategy_run: Strategy.run on the replica runtime (zdist/replicas.h)
   — a thread per replica, the rendezvous of their collectives, and the
   replica context's methods. */
#include "strategy_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The runtime's barrier, with the text of a replica that left. */
int
strategy_barrier(zdist_strategy_replica_t *ctx, const char *what, zdist_error_t *err)
{
    int who = -1;
    if (zdist_replicas_barrier(ctx->strategy->rt, &who) == 0)
        return 0;
    return zdist_error_set(
        err, -EPIPE,
        "replica %d: %s: replica %d returned from the step function without joining it; every "
        "replica must make the same collective calls in the same order",
        ctx->id, what, who);
}

/* Replica r's turn of a run, on its runtime thread: the step function in
   its replica context. */
static void
s_replica_main(void *p, int r)
{
    zdist_strategy_replica_t *ctx = &((zdist_strategy_replica_t *) p)[r];
    strategy_tl_strategy = ctx->strategy;
    strategy_tl_depth = 0;
    strategy_tl_replica = ctx;
    zdist_error_clear(&ctx->err);
    ctx->rc = ctx->fn(ctx, ctx->arg, &ctx->ret, &ctx->err);
    if (ctx->rc < 0 && ctx->err.text[0] == '\0')
        zdist_error_set(&ctx->err, ctx->rc, "replica %d: the step function failed (%s)", ctx->id,
                        strerror(-ctx->rc));
    strategy_tl_replica = NULL;
    strategy_tl_strategy = NULL;
}

void
zdist_strategy_values_free(zdist_tensor_t *values, int n)
{
    if (!values)
        return;
    for (int i = 0; i < n; i++) {
        free(values[i].data);
        memset(&values[i], 0, sizeof values[i]);
    }
}

int
zdist_strategy_run(zdist_strategy_object_t *self, zdist_strategy_fn fn, void *arg,
                   void *const *args_per_replica, zdist_tensor_t *ret_values, zdist_error_t *err)
{
    if (!self || !fn)
        return zdist_error_set(err, -EINVAL, "run: strategy and fn are required");
    int rc = strategy_require_cross(self, NULL, err);
    if (rc < 0)
        return rc;
    if (self->ps)
        return zdist_error_set(err, -ENOTSUP,
                               "run: under ParameterServerStrategy the step function runs on a worker, inside "
                               "a function scheduled with ClusterCoordinator.schedule, and a C function "
                               "cannot travel there: the step function is the job's model's train_step "
                               "(zdist/step.h); schedule it with zdist_strategy_schedule");
    if (self->running)
        return zdist_error_set(
            err, -EBUSY,
            "run: a run of this %s is under way (run called from a merge_call's merge_fn?); "
            "call run from outside it",
            zdist_strategy_class_name(self));
    int n = self->replicas;
    zdist_strategy_replica_t *ctxs = calloc((size_t) n, sizeof *ctxs);
    if (!ctxs)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    self->running = 1;
    for (int r = 0; r < n; r++) {
        ctxs[r].strategy = self;
        ctxs[r].id = r;
        ctxs[r].fn = fn;
        ctxs[r].arg = args_per_replica ? args_per_replica[r] : arg;
    }
    zdist_replicas_run(self->rt, s_replica_main, ctxs);
    if (rc == 0)
        for (int r = 0; r < n; r++)
            if (ctxs[r].rc < 0) {
                rc = ctxs[r].rc;
                if (err)
                    *err = ctxs[r].err;
                break;
            }
    for (int r = 0; r < n; r++) {
        if (rc == 0 && ret_values)
            ret_values[r] = ctxs[r].ret;
        else
            free(ctxs[r].ret.data);
    }
    free(ctxs);
    self->running = 0;
    return rc;
}

int
zdist_strategy_replica_id(const zdist_strategy_replica_t *ctx)
{
    return ctx ? ctx->strategy->rank * ctx->strategy->replicas + ctx->id : 0;
}

int
zdist_strategy_replica_num_replicas_in_sync(const zdist_strategy_replica_t *ctx)
{
    return ctx ? ctx->strategy->total : 1;
}

zdist_strategy_object_t *
zdist_strategy_replica_strategy(const zdist_strategy_replica_t *ctx)
{
    return ctx ? ctx->strategy : NULL;
}

int
zdist_strategy_num_logical_devices_per_replica(const zdist_strategy_object_t *self)
{
    return self ? self->ldev : 1;
}

/* A hand-over to a logical device: the function runs in the replica
   context of the replica that handed it. */
typedef struct {
    zdist_strategy_replica_t *ctx;
    zdist_strategy_device_fn fn;
    void *arg;
    zdist_error_t err;
} s_device_call_t;

static int
s_device_main(void *p, int device)
{
    s_device_call_t *c = p;
    if (device == 0)
        return c->fn(c->ctx, 0, c->arg, &c->err);
    strategy_tl_device = device;
    strategy_tl_strategy = c->ctx->strategy;
    strategy_tl_replica = c->ctx;
    int rc = c->fn(c->ctx, device, c->arg, &c->err);
    strategy_tl_replica = NULL;
    strategy_tl_strategy = NULL;
    strategy_tl_device = 0;
    return rc;
}

int
zdist_strategy_replica_run_on_logical_device(zdist_strategy_replica_t *ctx, int device,
                                             zdist_strategy_device_fn fn, void *arg, zdist_error_t *err)
{
    int rc = strategy_require_replica(ctx, err);
    if (rc < 0)
        return rc;
    if (!fn)
        return zdist_error_set(err, -EINVAL, "run_on_logical_device: fn is required");
    zdist_strategy_object_t *s = ctx->strategy;
    if (device < 0 || device >= s->ldev) /* TPUStrategy.experimental_assign_to_logical_device's ValueError */
        return zdist_error_set(err, -EINVAL,
                               "`logical_core_id` to assign must be lower then total number of logical devices "
                               "per replica. Received logical device id %d but there are only total of %d "
                               "logical devices in replica.",
                               device, s->ldev);
    if (strategy_tl_device != 0)
        return zdist_error_set(err, -EDEADLK,
                               "run_on_logical_device: called from logical device %d's function; hand work to "
                               "logical devices from the replica's step function only (device 0 is its thread, "
                               "which waits for this call)",
                               strategy_tl_device);
    s_device_call_t call = {.ctx = ctx, .fn = fn, .arg = arg};
    rc = zdist_replicas_run_on_devices(s->rt, ctx->id, device, s_device_main, &call);
    if (rc < 0 && err)
        *err = call.err;
    if (rc < 0 && err && err->text[0] == '\0')
        zdist_error_set(err, rc, "replica %d: logical device %d's function failed (%s)", ctx->id, device,
                        strerror(-rc));
    return rc;
}

/* Local replica 0 computes s->merged from the operands in s->slots; every
   replica gets its own copy (or the error). Three meetings: operands in,
   result out, result freed. */
typedef int (*s_leader_fn)(zdist_strategy_replica_t *ctx, void *cookie, zdist_tensor_t *out,
                           zdist_error_t *err);

static int
s_leader(zdist_strategy_replica_t *ctx, const char *what, s_leader_fn fn, void *cookie, zdist_tensor_t *ret,
         zdist_error_t *err)
{
    zdist_strategy_object_t *s = ctx->strategy;
    int rc = strategy_barrier(ctx, what, err);
    if (rc < 0)
        return rc;
    if (ctx->id == 0) {
        zdist_error_clear(&s->coll_err);
        memset(&s->merged, 0, sizeof s->merged);
        s->coll_rc = fn(ctx, cookie, &s->merged, &s->coll_err);
        if (s->coll_rc < 0 && s->coll_err.text[0] == '\0')
            zdist_error_set(&s->coll_err, s->coll_rc, "%s failed (%s)", what, strerror(-s->coll_rc));
    }
    if ((rc = strategy_barrier(ctx, what, err)) < 0)
        return rc;
    rc = s->coll_rc;
    if (rc < 0) {
        if (err)
            *err = s->coll_err;
    } else if (ret) {
        *ret = s->merged;
        ret->data = NULL;
        if (s->merged.nbytes) {
            ret->data = malloc(s->merged.nbytes);
            if (!ret->data)
                rc = zdist_error_set(err, -ENOMEM, "out of memory");
            else
                memcpy(ret->data, s->merged.data, s->merged.nbytes);
        }
    }
    int brc = strategy_barrier(ctx, what, rc < 0 ? NULL : err);
    if (ctx->id == 0) {
        free(s->merged.data);
        memset(&s->merged, 0, sizeof s->merged);
    }
    if (rc == 0 && brc < 0) {
        if (ret) {
            free(ret->data);
            ret->data = NULL;
        }
        rc = brc;
    }
    return rc;
}

typedef struct {
    zdist_reduce_op_t op;
    int axis;
    int gather;
} s_mw_coll_t;

static int
s_mw_coll_leader(zdist_strategy_replica_t *ctx, void *cookie, zdist_tensor_t *out, zdist_error_t *err)
{
    s_mw_coll_t *c = cookie;
    zdist_strategy_object_t *s = ctx->strategy;
    if (c->gather)
        return strategy_mw_gather(s, s->slots, s->replicas, c->axis, out, err);
    return strategy_mw_reduce(s, c->op, s->slots, s->replicas, NULL, 0, out, err);
}

typedef enum { S_REDUCE, S_GATHER } s_coll_t;

static int
s_collective(zdist_strategy_replica_t *ctx, s_coll_t kind, zdist_reduce_op_t op, int axis,
             const zdist_tensor_t *value, zdist_tensor_t *ret, zdist_error_t *err)
{
    int rc = strategy_require_replica(ctx, err);
    if (rc < 0)
        return rc;
    if (!value || !ret)
        return zdist_error_set(err, -EINVAL, "replica %d: value and ret are required", ctx->id);
    const char *what = kind == S_REDUCE ? "all_reduce" : "all_gather";
    zdist_strategy_object_t *s = ctx->strategy;
    s->slots[ctx->id] = *value;
    if (s->workers > 1) {
        s_mw_coll_t c = {.op = op, .axis = axis, .gather = kind == S_GATHER};
        return s_leader(ctx, what, s_mw_coll_leader, &c, ret, err);
    }
    if ((rc = strategy_barrier(ctx, what, err)) < 0)
        return rc;
    /* Every replica computes the same function of the same operands, in
       replica order: the same result, or the same error, everywhere. */
    zdist_tensor_t out;
    if (kind == S_REDUCE)
        rc = zdist_distribute_reduce(op, s->slots, s->replicas, ZDIST_AXIS_NONE, &out, err);
    else
        rc = zdist_distribute_all_gather(s->slots, s->replicas, axis, &out, err);
    int brc = strategy_barrier(ctx, what, rc < 0 ? NULL : err);
    if (rc < 0)
        return rc;
    if (brc < 0) {
        free(out.data);
        return brc;
    }
    *ret = out;
    return 0;
}

int
zdist_strategy_replica_all_reduce(zdist_strategy_replica_t *ctx, zdist_reduce_op_t op,
                                  const zdist_tensor_t *value, zdist_tensor_t *ret, zdist_error_t *err)
{
    return s_collective(ctx, S_REDUCE, op, 0, value, ret, err);
}

int
zdist_strategy_replica_all_gather(zdist_strategy_replica_t *ctx, const zdist_tensor_t *value, int axis,
                                  zdist_tensor_t *ret, zdist_error_t *err)
{
    return s_collective(ctx, S_GATHER, ZDIST_REDUCE_SUM, axis, value, ret, err);
}

int
zdist_strategy_replica_read(zdist_strategy_replica_t *ctx, const zdist_strategy_var_t *var,
                            const zdist_tensor_t **ret, zdist_error_t *err)
{
    int rc = strategy_require_replica(ctx, err);
    if (rc < 0)
        return rc;
    if ((rc = strategy_check_own_var(ctx->strategy, var, err)) < 0)
        return rc;
    if (!ret)
        return zdist_error_set(err, -EINVAL, "replica read: ret is required");
    *ret = &var->copies[var->ncopies == 1 ? 0 : ctx->id];
    return 0;
}

/* Replica 0's half of an assign: the write of every replica's value. */
static int
s_apply_replica_write(zdist_strategy_object_t *s, zdist_strategy_var_t *var, zdist_var_op_t op,
                      zdist_error_t *err)
{
    if (s->workers > 1 && var->sync == ZDIST_SYNC_ON_WRITE) {
        zdist_tensor_t v;
        int rc = strategy_mw_combine_write(s, var, &v, err);
        if (rc < 0)
            return rc;
        rc = zdist_distribute_var_write_cross_replica(ZDIST_SYNC_ON_WRITE, var->agg, op, var->copies,
                                                      var->ncopies, &v, err);
        free(v.data);
        return rc;
    }
    if (var->ncopies == s->replicas)
        return zdist_distribute_var_write_replica(var->sync, var->agg, op, var->copies, s->slots, s->replicas,
                                                  err);
    /* One copy for several replicas (central_storage ON_WRITE): the
       aggregated write computed on scratch copies, then stored once. */
    int rc = zdist_distribute_check_replica_write(var->sync, var->agg, var->dtype, s->replicas, err);
    if (rc < 0)
        return rc;
    zdist_tensor_t *tmp = calloc((size_t) s->replicas, sizeof *tmp);
    if (!tmp)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    for (int r = 0; r < s->replicas && rc == 0; r++) {
        tmp[r] = var->copies[0];
        tmp[r].data = malloc(var->nbytes ? var->nbytes : 1);
        if (!tmp[r].data)
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
        else
            memcpy(tmp[r].data, var->copies[0].data, var->nbytes);
    }
    if (rc == 0)
        rc = zdist_distribute_var_write_replica(var->sync, var->agg, op, tmp, s->slots, s->replicas, err);
    if (rc == 0)
        memcpy(var->copies[0].data, tmp[0].data, var->nbytes);
    for (int r = 0; r < s->replicas; r++)
        free(tmp[r].data);
    free(tmp);
    return rc;
}

int
zdist_strategy_replica_assign(zdist_strategy_replica_t *ctx, zdist_strategy_var_t *var, zdist_var_op_t op,
                              const zdist_tensor_t *value, zdist_error_t *err)
{
    int rc = strategy_require_replica(ctx, err);
    if (rc < 0)
        return rc;
    if ((rc = strategy_check_own_var(ctx->strategy, var, err)) < 0)
        return rc;
    if (!value)
        return zdist_error_set(err, -EINVAL, "replica %d: assign to %s: value is required", ctx->id,
                               var->name);
    zdist_strategy_object_t *s = ctx->strategy;
    s->slots[ctx->id] = *value;
    if ((rc = strategy_barrier(ctx, "assign", err)) < 0)
        return rc;
    if (ctx->id == 0) {
        zdist_error_clear(&s->coll_err);
        s->coll_rc = s_apply_replica_write(s, var, op, &s->coll_err);
    }
    if ((rc = strategy_barrier(ctx, "assign", err)) < 0)
        return rc;
    if (s->coll_rc < 0 && err)
        *err = s->coll_err;
    return s->coll_rc;
}

typedef struct {
    zdist_strategy_merge_fn fn;
    void *arg;
} s_merge_t;

static int
s_merge_leader(zdist_strategy_replica_t *ctx, void *cookie, zdist_tensor_t *out, zdist_error_t *err)
{
    s_merge_t *m = cookie;
    zdist_strategy_object_t *s = ctx->strategy;
    /* merge_fn runs once, in the strategy's cross-replica context */
    strategy_tl_replica = NULL;
    strategy_tl_depth = 1;
    int rc = m->fn(s, s->slots, s->replicas, m->arg, out, err);
    strategy_tl_depth = 0;
    strategy_tl_replica = ctx;
    if (rc < 0 && err && err->text[0] == '\0')
        zdist_error_set(err, rc, "merge_call: merge_fn failed (%s)", strerror(-rc));
    return rc;
}

int
zdist_strategy_replica_merge_call(zdist_strategy_replica_t *ctx, zdist_strategy_merge_fn fn, void *arg,
                                  const zdist_tensor_t *value, zdist_tensor_t *ret, zdist_error_t *err)
{
    int rc = strategy_require_replica(ctx, err);
    if (rc < 0)
        return rc;
    if (!fn || !value)
        return zdist_error_set(err, -EINVAL, "replica %d: merge_call: merge_fn and value are required",
                               ctx->id);
    ctx->strategy->slots[ctx->id] = *value;
    s_merge_t m = {.fn = fn, .arg = arg};
    return s_leader(ctx, "merge_call", s_merge_leader, &m, ret, err);
}
