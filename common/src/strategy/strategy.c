/* zdist strategy: the Strategy object's per-thread contexts — the calling
   thread's mode, the context checks every other file of the object calls,
   scope, which context the calling thread is in, and the object's
   accessors. Its life (spec, new, destroy) is in strategy_new.c, above the
   files it calls, so this file calls none of them. */
#include "strategy_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* distribute_lib.py's texts. */
static const char s_need_cross[] =
    "Method requires being in cross-replica context, use get_replica_context().merge_call()";
static const char s_need_replica[] = "Need to be inside `call_for_each_replica()`";

/* The calling thread's mode (distribute_lib's _ThreadMode): the current
   strategy (NULL: default), how many times its scope is entered, and the
   replica context when on one of run's threads. */
_Thread_local zdist_strategy_object_t *strategy_tl_strategy;
_Thread_local int strategy_tl_depth;
_Thread_local zdist_strategy_replica_t *strategy_tl_replica;
_Thread_local const zdist_strategy_var_t *strategy_tl_anchor;
_Thread_local zdist_strategy_object_t *strategy_tl_anchor_strategy;
_Thread_local int strategy_tl_device; /* a logical device thread's index (>= 1); 0 elsewhere */

const char *
zdist_strategy_class_name(const zdist_strategy_object_t *self)
{
    if (!self)
        return "DefaultDistributionStrategy";
    switch (self->kind) {
    case ZDIST_STRATEGY_ONE_DEVICE:
        return "OneDeviceStrategy";
    case ZDIST_STRATEGY_MIRRORED:
        return "MirroredStrategy";
    case ZDIST_STRATEGY_CENTRAL_STORAGE:
        return "CentralStorageStrategy";
    case ZDIST_STRATEGY_MULTI_WORKER_MIRRORED:
        return "MultiWorkerMirroredStrategy";
    case ZDIST_STRATEGY_PARAMETER_SERVER:
        return "ParameterServerStrategy";
    case ZDIST_STRATEGY_TPU:
        return "TPUStrategy";
    default:
        return "Strategy";
    }
}

/* _require_cross_replica_or_default_context_extended. */
int
strategy_require_cross(const zdist_strategy_object_t *self, const char *msg, zdist_error_t *err)
{
    if (!strategy_tl_strategy)
        return 0;
    if (strategy_tl_strategy != self)
        return zdist_error_set(err, -EPERM, "Mixing different tf.distribute.Strategy objects: %s is not %s",
                               zdist_strategy_class_name(strategy_tl_strategy), zdist_strategy_class_name(self));
    if (!strategy_tl_replica)
        return 0;
    return zdist_error_set(err, -EPERM, "%s", msg ? msg : s_need_cross);
}

/* _require_strategy_scope_extended, then cross-replica. */
int
strategy_require_scope(const zdist_strategy_object_t *self, zdist_error_t *err)
{
    if (!strategy_tl_strategy)
        return zdist_error_set(err, -EPERM, "Need to be inside \"with strategy.scope()\" for %s",
                               zdist_strategy_class_name(self));
    return strategy_require_cross(self, NULL, err);
}

/* require_replica_context(ctx). */
int
strategy_require_replica(const zdist_strategy_replica_t *ctx, zdist_error_t *err)
{
    if (!ctx || !strategy_tl_replica)
        return zdist_error_set(err, -EPERM, "%s", s_need_replica);
    if (strategy_tl_replica != ctx) {
        if (strategy_tl_replica->strategy == ctx->strategy)
            return zdist_error_set(err, -EPERM, "Mismatching ReplicaContext.");
        return zdist_error_set(err, -EPERM, "Mismatching tf.distribute.Strategy objects: %s is not %s.",
                               zdist_strategy_class_name(strategy_tl_replica->strategy),
                               zdist_strategy_class_name(ctx->strategy));
    }
    return 0;
}

zdist_strategy_t
zdist_strategy_kind(const zdist_strategy_object_t *self)
{
    return self ? self->kind : ZDIST_STRATEGY_INVALID;
}

int
zdist_strategy_num_replicas_in_sync(const zdist_strategy_object_t *self)
{
    return self ? self->total : 1;
}

void
zdist_strategy_worker_place(const zdist_strategy_object_t *self, int *ret_num_workers, int *ret_worker_index,
                            int *ret_local_replicas)
{
    if (ret_num_workers)
        *ret_num_workers = self ? self->workers : 1;
    if (ret_worker_index)
        *ret_worker_index = self ? self->rank : 0;
    if (ret_local_replicas)
        *ret_local_replicas = self ? self->replicas : 1;
}

int
zdist_strategy_scope_enter(zdist_strategy_object_t *self, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "scope: strategy is NULL");
    if (strategy_tl_strategy) {
        int rc = strategy_require_cross(self, NULL, err);
        if (rc < 0)
            return rc;
        strategy_tl_depth++;
        return 0;
    }
    strategy_tl_strategy = self;
    strategy_tl_depth = 1;
    return 0;
}

int
zdist_strategy_scope_exit(zdist_strategy_object_t *self, zdist_error_t *err)
{
    if (!self || strategy_tl_strategy != self || strategy_tl_replica || strategy_tl_depth < 1)
        return zdist_error_set(err, -EINVAL,
                               "scope exit: this thread is not inside %s's scope (exit without enter)",
                               zdist_strategy_class_name(self));
    if (--strategy_tl_depth == 0) {
        strategy_tl_strategy = NULL;
        if (strategy_tl_anchor_strategy == self) {
            strategy_tl_anchor = NULL;
            strategy_tl_anchor_strategy = NULL;
        }
    }
    return 0;
}

zdist_strategy_object_t *
zdist_strategy_current(void)
{
    return strategy_tl_strategy;
}

bool
zdist_strategy_in_cross_replica_context(void)
{
    return strategy_tl_strategy != NULL && strategy_tl_replica == NULL;
}

zdist_strategy_replica_t *
zdist_strategy_get_replica_context(void)
{
    return strategy_tl_replica;
}
