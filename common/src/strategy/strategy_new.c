/* zdist strategy_new: the Strategy object's life — its spec, new (checking
   the spec, then the psds' client, the ring or the replica threads it
   runs on) and destroy (its variables, threads, ring and psds with it). */
#include "strategy_internal.h"
#include "strategy_ps.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
