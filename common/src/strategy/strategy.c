/* zdist strategy: the Strategy object's life and its per-thread contexts —
   spec, new and destroy, scope, and which context the calling thread is in. */
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

int
zdist_strategy_spec_parse(const char *text, zdist_strategy_spec_t *ret, zdist_error_t *err)
{
    if (!text || !ret)
        return zdist_error_set(err, -EINVAL,
                               "strategy spec: missing text; write one_device, mirrored[:N] or "
                               "central_storage[:N]");
    char name[64];
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t) (colon - text) : strlen(text);
    if (len >= sizeof name)
        len = sizeof name - 1;
    memcpy(name, text, len);
    name[len] = '\0';
    zdist_strategy_spec_t spec = {.kind = zdist_strategy_from_name(name), .num_replicas = 1};
    if (spec.kind == ZDIST_STRATEGY_INVALID)
        return zdist_error_set(
            err, -EINVAL,
            "strategy spec \"%s\": unknown strategy \"%s\"; write one_device, mirrored[:N] or "
            "central_storage[:N]",
            text, name);
    if (colon) {
        char *end = NULL;
        errno = 0;
        long n = strtol(colon + 1, &end, 10);
        if (errno || end == colon + 1 || *end || n < 1 || n > STRATEGY_MAX_REPLICAS)
            return zdist_error_set(
                err, -EINVAL, "strategy spec \"%s\": the replica count after ':' must be an integer in 1..%d",
                text, STRATEGY_MAX_REPLICAS);
        spec.num_replicas = (int) n;
    }
    *ret = spec;
    return 0;
}
int
zdist_strategy_new(const zdist_strategy_spec_t *spec, zdist_strategy_object_t **ret, zdist_error_t *err)
{
    if (!spec || !ret)
        return zdist_error_set(err, -EINVAL, "zdist_strategy_new: spec and ret are required");
    int n = spec->num_replicas == 0 ? 1 : spec->num_replicas;
    switch (spec->kind) {
    case ZDIST_STRATEGY_ONE_DEVICE:
        if (n != 1)
            return zdist_error_set(
                err, -EINVAL,
                "strategy spec: one_device runs exactly 1 replica, not num_replicas %d; use "
                "mirrored:%d for several",
                spec->num_replicas, spec->num_replicas);
        break;
    case ZDIST_STRATEGY_MIRRORED:
    case ZDIST_STRATEGY_CENTRAL_STORAGE:
        if (n < 1 || n > STRATEGY_MAX_REPLICAS)
            return zdist_error_set(err, -EINVAL, "strategy spec: num_replicas %d is out of range; use 1..%d",
                                   spec->num_replicas, STRATEGY_MAX_REPLICAS);
        break;
    case ZDIST_STRATEGY_MULTI_WORKER_MIRRORED:
        if (n < 1 || n > STRATEGY_MAX_REPLICAS)
            return zdist_error_set(err, -EINVAL, "strategy spec: num_replicas %d is out of range; use 1..%d",
                                   spec->num_replicas, STRATEGY_MAX_REPLICAS);
        if (!spec->comm && spec->cluster)
            break; /* the ring's place comes from the cluster (strategy_ring_from_cluster) */
        if (spec->num_workers < 1 || spec->worker_index < 0 || spec->worker_index >= spec->num_workers)
            return zdist_error_set(
                err, -EINVAL,
                "strategy spec: multi_worker_mirrored needs num_workers >= 1 and worker_index in "
                "0..num_workers-1 (got %d and %d)",
                spec->num_workers, spec->worker_index);
        if (!spec->comm && spec->num_workers > 1)
            return zdist_error_set(
                err, -EINVAL,
                "strategy spec: multi_worker_mirrored over %d workers needs comm, a connected "
                "zdist/collective.h ring (zdist_comm_new + zdist_comm_connect)",
                spec->num_workers);
        break;
    case ZDIST_STRATEGY_PARAMETER_SERVER:
        if (n != 1)
            return zdist_error_set(err, -EINVAL,
                                   "strategy spec: parameter_server runs 1 replica per worker, not num_replicas "
                                   "%d; add workers instead",
                                   spec->num_replicas);
        break;
    case ZDIST_STRATEGY_TPU: {
        if (n < 1 || n > STRATEGY_MAX_REPLICAS)
            return zdist_error_set(err, -EINVAL, "strategy spec: num_replicas %d is out of range; use 1..%d",
                                   spec->num_replicas, STRATEGY_MAX_REPLICAS);
        int l = spec->logical_devices_per_replica;
        if (l < 0 || l > ZDIST_MAX_LOGICAL_DEVICES)
            return zdist_error_set(err, -EINVAL,
                                   "strategy spec: logical_devices_per_replica %d is out of range; use 0..%d "
                                   "(0 means 1)",
                                   l, ZDIST_MAX_LOGICAL_DEVICES);
        int rc = zdist_job_check_logical_devices(n, l, spec->oversubscribe, err);
        if (rc < 0)
            return rc;
        break;
    }
    default:
        return zdist_error_set(err, -EINVAL,
                               "strategy spec: unknown strategy kind %d; use one_device, mirrored or "
                               "central_storage",
                               (int) spec->kind);
    }
    zdist_strategy_object_t *self = calloc(1, sizeof *self);
    if (!self)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    self->slots = calloc((size_t) n, sizeof *self->slots);
    self->uargs = calloc((size_t) n, sizeof *self->uargs);
    if (!self->slots || !self->uargs) {
        free(self->slots);
        free(self->uargs);
        free(self);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    self->kind = spec->kind;
    self->replicas = n;
    self->workers = 1;
    if (spec->kind == ZDIST_STRATEGY_PARAMETER_SERVER) {
        int rc = strategy_ps_new(spec->coordinator, &self->ps, err);
        if (rc < 0) {
            free(self->slots);
            free(self->uargs);
            free(self);
            return rc;
        }
    } else if (spec->kind == ZDIST_STRATEGY_MULTI_WORKER_MIRRORED && !spec->comm && spec->cluster) {
        int rc = strategy_ring_from_cluster(self, spec, err);
        if (rc < 0) {
            free(self->slots);
            free(self->uargs);
            free(self);
            return rc;
        }
    } else if (spec->kind == ZDIST_STRATEGY_MULTI_WORKER_MIRRORED) {
        self->workers = spec->num_workers;
        self->rank = spec->worker_index;
        self->comm = spec->comm;
    }
    self->total = self->workers * n;
    self->vars_tail = &self->vars;
    self->ldev = spec->kind == ZDIST_STRATEGY_TPU && spec->logical_devices_per_replica > 1
                     ? spec->logical_devices_per_replica
                     : 1;
    if (!self->ps) {
        /* TPUStrategy: logical devices 1..L-1 of every replica, started once */
        zdist_replicas_config_t rc_cfg = {.replicas = n, .devices = self->ldev};
        int rc = zdist_replicas_new(&rc_cfg, &self->rt, err);
        if (rc < 0) {
            zdist_error_prefix(err, "strategy spec");
            zdist_strategy_destroy(&self);
            return rc;
        }
    }
    *ret = self;
    return 0;
}

void
zdist_strategy_destroy(zdist_strategy_object_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_strategy_object_t *self = *self_p;
    if (strategy_tl_strategy == self && !strategy_tl_replica) {
        strategy_tl_strategy = NULL;
        strategy_tl_depth = 0;
    }
    if (strategy_tl_anchor_strategy == self) {
        strategy_tl_anchor = NULL;
        strategy_tl_anchor_strategy = NULL;
    }
    zdist_strategy_var_t *v = self->vars;
    while (v) {
        zdist_strategy_var_t *next = v->next;
        strategy_var_free(v);
        v = next;
    }
    zdist_replicas_destroy(&self->rt);
    zdist_comm_destroy(&self->own_comm);
    strategy_ps_destroy(&self->ps);
    free(self->slots);
    free(self->uargs);
    free(self);
    *self_p = NULL;
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
