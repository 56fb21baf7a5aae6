/* zdist strategy: the Strategy object of the local strategies — per-thread
   contexts, scope, variables, run's replica threads and their collectives,
   the cross-replica methods and extended. */
#include "zdist/strategy.h"

#include "zdist/collective.h"
#include "zdist/job.h"
#include "zdist/model_spec.h"
#include "strategy_ps.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_REPLICAS 256

/* distribute_lib.py's texts. */
static const char s_need_cross[] =
    "Method requires being in cross-replica context, use get_replica_context().merge_call()";
static const char s_gather_cross[] =
    "tf.distribute.Strategy.gather method requires cross-replica context, use "
    "get_replica_context().all_gather() instead";
static const char s_need_replica[] = "Need to be inside `call_for_each_replica()`";

struct zdist_strategy_var_t {
    zdist_strategy_object_t *strategy;
    char *name;
    zdist_dtype_t dtype;
    zdist_shape_t shape;
    size_t nbytes;
    zdist_var_sync_t sync;
    zdist_var_agg_t agg;
    int ncopies;
    zdist_tensor_t *copies;
    const zdist_strategy_var_t *anchor;
    strategy_ps_var_t *ps; /* parameter_server: where it lives */
    zdist_strategy_var_t *next;
};

struct zdist_strategy_replica_t {
    zdist_strategy_object_t *strategy;
    int id;
    zdist_strategy_fn fn;
    void *arg;
    pthread_t thread;
    zdist_tensor_t ret;
    int rc;
    zdist_error_t err;
};

/* tpu: logical device `index` (>= 1) of replica `replica`, a thread kept
   for the strategy's life; device 0 is the replica's own thread. One call
   at a time: the replica's thread hands it work and waits. */
typedef struct {
    zdist_strategy_object_t *strategy;
    int replica, index;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool work, stop;
    zdist_strategy_replica_t *ctx;
    zdist_strategy_device_fn fn;
    void *arg;
    int rc;
    zdist_error_t err;
} s_device_t;

struct zdist_strategy_object_t {
    zdist_strategy_t kind;
    int ldev;            /* tpu: logical devices per replica; 1 otherwise */
    s_device_t *devices; /* tpu with ldev > 1: [replicas * ldev], device d of replica r at r * ldev + d (d >= 1) */
    int replicas; /* this process's (local) replicas: run's threads */
    int workers;  /* multi_worker_mirrored: the ring's ranks; 1 otherwise */
    int rank;
    int total; /* num_replicas_in_sync = workers x replicas */
    zdist_comm_t *comm;
    zdist_comm_t *own_comm; /* the ring formed from spec.cluster (comm then), destroyed with the strategy */
    strategy_ps_t *ps;      /* parameter_server: the psds and the ClusterCoordinator */
    zdist_strategy_var_t *vars;
    zdist_strategy_var_t **vars_tail;
    /* run's rendezvous */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;
    unsigned long generation;
    int departed;
    int departed_id;
    zdist_tensor_t *slots; /* [replicas]: each replica's operand */
    void **uargs;          /* [replicas]: each replica's update argument */
    zdist_tensor_t merged; /* merge_call's result, copied by every replica */
    int coll_rc;
    zdist_error_t coll_err;
    int running; /* a run is under way (its replicas share the fields above) */
};

static int s_ring_dtype(const char *what, zdist_dtype_t dtype, zdist_error_t *err);
static int s_mw_reduce(zdist_strategy_object_t *s, zdist_reduce_op_t op, const zdist_tensor_t *values, int n,
                       const int *axes, int num_axes, zdist_tensor_t *ret, zdist_error_t *err);

/* The calling thread's mode (distribute_lib's _ThreadMode): the current
   strategy (NULL: default), how many times its scope is entered, and the
   replica context when on one of run's threads. */
static _Thread_local zdist_strategy_object_t *tl_strategy;
static _Thread_local int tl_depth;
static _Thread_local zdist_strategy_replica_t *tl_replica;
static _Thread_local const zdist_strategy_var_t *tl_anchor;
static _Thread_local zdist_strategy_object_t *tl_anchor_strategy;
static _Thread_local int tl_device; /* a logical device thread's index (>= 1); 0 elsewhere */

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
static int
s_require_cross(const zdist_strategy_object_t *self, const char *msg, zdist_error_t *err)
{
    if (!tl_strategy)
        return 0;
    if (tl_strategy != self)
        return zdist_error_set(err, -EPERM, "Mixing different tf.distribute.Strategy objects: %s is not %s",
                               zdist_strategy_class_name(tl_strategy), zdist_strategy_class_name(self));
    if (!tl_replica)
        return 0;
    return zdist_error_set(err, -EPERM, "%s", msg ? msg : s_need_cross);
}

/* _require_strategy_scope_extended, then cross-replica. */
static int
s_require_scope(const zdist_strategy_object_t *self, zdist_error_t *err)
{
    if (!tl_strategy)
        return zdist_error_set(err, -EPERM, "Need to be inside \"with strategy.scope()\" for %s",
                               zdist_strategy_class_name(self));
    return s_require_cross(self, NULL, err);
}

/* require_replica_context(ctx). */
static int
s_require_replica(const zdist_strategy_replica_t *ctx, zdist_error_t *err)
{
    if (!ctx || !tl_replica)
        return zdist_error_set(err, -EPERM, "%s", s_need_replica);
    if (tl_replica != ctx) {
        if (tl_replica->strategy == ctx->strategy)
            return zdist_error_set(err, -EPERM, "Mismatching ReplicaContext.");
        return zdist_error_set(err, -EPERM, "Mismatching tf.distribute.Strategy objects: %s is not %s.",
                               zdist_strategy_class_name(tl_replica->strategy),
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
        if (errno || end == colon + 1 || *end || n < 1 || n > S_MAX_REPLICAS)
            return zdist_error_set(
                err, -EINVAL, "strategy spec \"%s\": the replica count after ':' must be an integer in 1..%d",
                text, S_MAX_REPLICAS);
        spec.num_replicas = (int) n;
    }
    *ret = spec;
    return 0;
}

/* MultiWorkerMirroredStrategy from TFConfigClusterResolver: the ranks are
   the cluster's chief then its workers (id_in_cluster), each at its task's
   address; this task binds its own and connects to the next, with the
   library's ring calls (those a zdist-worker session makes). */
static int
s_ring_from_cluster(zdist_strategy_object_t *self, const zdist_strategy_spec_t *spec, zdist_error_t *err)
{
    const zdist_cluster_t *cl = spec->cluster;
    int rc = zdist_cluster_validate(cl, ZDIST_STRATEGY_MULTI_WORKER_MIRRORED, err);
    if (rc < 0) {
        zdist_error_prefix(err, "strategy spec: cluster");
        return rc;
    }
    const char *type = zdist_cluster_task_type(cl);
    if (!type || (strcmp(type, "chief") != 0 && strcmp(type, "worker") != 0) || !zdist_cluster_has_id_in_cluster(cl))
        return zdist_error_set(err, -EINVAL,
                               "strategy spec: multi_worker_mirrored needs the cluster's task (TF_CONFIG's "
                               "\"task\") to be the chief or a worker, not %s; set task.type and task.index",
                               type ? type : "none");
    int size = zdist_cluster_worker_count(cl), rank = zdist_cluster_id_in_cluster(cl);
    int chiefs = (int) zdist_cluster_num_tasks(cl, "chief");
    if (rank < 0 || rank >= size)
        return zdist_error_set(err, -EINVAL,
                               "strategy spec: cluster: this task's id in the cluster, %d, is not a ring rank "
                               "0..%d; number the chief and worker tasks from 0 without gaps",
                               rank, size - 1);
    self->workers = size;
    self->rank = rank;
    if (size == 1)
        return 0; /* one worker: no ring */
    char(*eps)[300] = calloc((size_t) size, sizeof *eps);
    const char **epp = calloc((size_t) size, sizeof *epp);
    if (!eps || !epp) {
        free(eps);
        free(epp);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    for (int r = 0; r < size && rc == 0; r++) {
        const char *job = r < chiefs ? "chief" : "worker";
        int index = 0;
        rc = zdist_cluster_job_task(cl, job, (size_t) (r < chiefs ? r : r - chiefs), &index, NULL);
        if (rc == 0)
            rc = zdist_cluster_endpoint(cl, job, index, eps[r], sizeof eps[r]);
        if (rc < 0)
            zdist_error_set(err, -EINVAL, "strategy spec: cluster: no address for ring rank %d (%s)", r, job);
        epp[r] = eps[r];
    }
    char bind[300];
    if (rc == 0 && (rc = zdist_cluster_bind_endpoint(cl, bind, sizeof bind)) < 0)
        zdist_error_set(err, -EINVAL, "strategy spec: cluster: this task has no address to bind its end of the ring");
    if (rc == 0) {
        zdist_comm_config_t cc = {.rank = rank, .size = size, .bind = bind, .timeout_ms = spec->collective_timeout_ms};
        self->own_comm = zdist_comm_new(&cc, err);
        if (!self->own_comm)
            rc = err && err->code ? err->code : -EINVAL;
        else if ((rc = zdist_comm_connect(self->own_comm, epp, err)) < 0)
            zdist_comm_destroy(&self->own_comm);
        if (rc < 0)
            zdist_error_prefix(err, "strategy spec: multi_worker_mirrored ring rank %d of %d at %s", rank, size,
                               eps[rank]);
    }
    free(eps);
    free(epp);
    self->comm = self->own_comm;
    return rc;
}

/* A logical device thread: runs each function handed to it in the
   replica context of the replica that handed it. */
static void *
s_device_main(void *p)
{
    s_device_t *d = p;
    tl_device = d->index;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->work && !d->stop)
            pthread_cond_wait(&d->cv, &d->mu);
        if (d->stop)
            break;
        pthread_mutex_unlock(&d->mu);
        tl_strategy = d->strategy;
        tl_replica = d->ctx;
        zdist_error_clear(&d->err);
        int rc = d->fn(d->ctx, d->index, d->arg, &d->err);
        tl_replica = NULL;
        tl_strategy = NULL;
        pthread_mutex_lock(&d->mu);
        d->rc = rc;
        d->work = false;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static void
s_devices_stop(zdist_strategy_object_t *self)
{
    if (!self->devices)
        return;
    for (int i = 0; i < self->replicas * self->ldev; i++) {
        s_device_t *d = &self->devices[i];
        if (!d->started)
            continue;
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->cv);
    }
    free(self->devices);
    self->devices = NULL;
}

/* TPUStrategy: logical devices 1..L-1 of every replica, started once. */
static int
s_devices_start(zdist_strategy_object_t *self, zdist_error_t *err)
{
    self->devices = calloc((size_t) (self->replicas * self->ldev), sizeof *self->devices);
    if (!self->devices)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    for (int r = 0; r < self->replicas; r++)
        for (int i = 1; i < self->ldev; i++) {
            s_device_t *d = &self->devices[r * self->ldev + i];
            *d = (s_device_t){.strategy = self, .replica = r, .index = i};
            pthread_mutex_init(&d->mu, NULL);
            pthread_cond_init(&d->cv, NULL);
            int e = pthread_create(&d->thread, NULL, s_device_main, d);
            if (e != 0) {
                pthread_mutex_destroy(&d->mu);
                pthread_cond_destroy(&d->cv);
                return zdist_error_set(err, -e, "strategy spec: cannot start logical device %d of replica %d: %s",
                                       i, r, strerror(e));
            }
            d->started = true;
        }
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
        if (n < 1 || n > S_MAX_REPLICAS)
            return zdist_error_set(err, -EINVAL, "strategy spec: num_replicas %d is out of range; use 1..%d",
                                   spec->num_replicas, S_MAX_REPLICAS);
        break;
    case ZDIST_STRATEGY_MULTI_WORKER_MIRRORED:
        if (n < 1 || n > S_MAX_REPLICAS)
            return zdist_error_set(err, -EINVAL, "strategy spec: num_replicas %d is out of range; use 1..%d",
                                   spec->num_replicas, S_MAX_REPLICAS);
        if (!spec->comm && spec->cluster)
            break; /* the ring's place comes from the cluster (s_ring_from_cluster) */
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
        if (n < 1 || n > S_MAX_REPLICAS)
            return zdist_error_set(err, -EINVAL, "strategy spec: num_replicas %d is out of range; use 1..%d",
                                   spec->num_replicas, S_MAX_REPLICAS);
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
        int rc = s_ring_from_cluster(self, spec, err);
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
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->cv, NULL);
    self->ldev = spec->kind == ZDIST_STRATEGY_TPU && spec->logical_devices_per_replica > 1
                     ? spec->logical_devices_per_replica
                     : 1;
    if (self->ldev > 1) {
        int rc = s_devices_start(self, err);
        if (rc < 0) {
            zdist_strategy_destroy(&self);
            return rc;
        }
    }
    *ret = self;
    return 0;
}

static void
s_var_free(zdist_strategy_var_t *v)
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

void
zdist_strategy_destroy(zdist_strategy_object_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_strategy_object_t *self = *self_p;
    if (tl_strategy == self && !tl_replica) {
        tl_strategy = NULL;
        tl_depth = 0;
    }
    if (tl_anchor_strategy == self) {
        tl_anchor = NULL;
        tl_anchor_strategy = NULL;
    }
    zdist_strategy_var_t *v = self->vars;
    while (v) {
        zdist_strategy_var_t *next = v->next;
        s_var_free(v);
        v = next;
    }
    s_devices_stop(self);
    zdist_comm_destroy(&self->own_comm);
    strategy_ps_destroy(&self->ps);
    pthread_mutex_destroy(&self->mu);
    pthread_cond_destroy(&self->cv);
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
    if (tl_strategy) {
        int rc = s_require_cross(self, NULL, err);
        if (rc < 0)
            return rc;
        tl_depth++;
        return 0;
    }
    tl_strategy = self;
    tl_depth = 1;
    return 0;
}

int
zdist_strategy_scope_exit(zdist_strategy_object_t *self, zdist_error_t *err)
{
    if (!self || tl_strategy != self || tl_replica || tl_depth < 1)
        return zdist_error_set(err, -EINVAL,
                               "scope exit: this thread is not inside %s's scope (exit without enter)",
                               zdist_strategy_class_name(self));
    if (--tl_depth == 0) {
        tl_strategy = NULL;
        if (tl_anchor_strategy == self) {
            tl_anchor = NULL;
            tl_anchor_strategy = NULL;
        }
    }
    return 0;
}

zdist_strategy_object_t *
zdist_strategy_current(void)
{
    return tl_strategy;
}

bool
zdist_strategy_in_cross_replica_context(void)
{
    return tl_strategy != NULL && tl_replica == NULL;
}

zdist_strategy_replica_t *
zdist_strategy_get_replica_context(void)
{
    return tl_replica;
}

/* ------------------------------------------------------------------------ */
/* Variables                                                                  */

int
zdist_strategy_variable_new(zdist_strategy_object_t *self, const zdist_strategy_var_def_t *def,
                            zdist_strategy_var_t **ret, zdist_error_t *err)
{
    if (!self || !def || !ret)
        return zdist_error_set(err, -EINVAL, "variable: strategy, def and ret are required");
    int rc = s_require_scope(self, err);
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
        s_var_free(v);
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
            s_var_free(v);
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
            s_var_free(v);
            zdist_error_prefix(err, "variable %s: broadcasting worker 0's initial value", def->name);
            return rc2;
        }
        for (int i = 1; i < ncopies; i++)
            memcpy(v->copies[i].data, v->copies[0].data, nbytes);
    }
    if (tl_anchor_strategy == self)
        v->anchor = tl_anchor;
    if (self->ps && (rc = strategy_ps_var_new(self->ps, v->name, v->dtype, &v->shape, def->initial_value, nbytes,
                                              v->anchor ? v->anchor->ps : NULL, &v->ps, err)) < 0) {
        s_var_free(v);
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

static int
s_check_own_var(const zdist_strategy_object_t *self, const zdist_strategy_var_t *var, zdist_error_t *err)
{
    if (!var)
        return zdist_error_set(err, -EINVAL, "variable is NULL");
    if (var->strategy != self)
        return zdist_error_set(err, -EINVAL,
                               "variable %s was created under another strategy's scope, not this %s's",
                               var->name, zdist_strategy_class_name(self));
    return 0;
}

int
zdist_strategy_variable_read(zdist_strategy_object_t *self, const zdist_strategy_var_t *var,
                             zdist_tensor_t *ret, zdist_error_t *err)
{
    int rc = s_require_cross(self, NULL, err);
    if (rc < 0)
        return rc;
    if ((rc = s_check_own_var(self, var, err)) < 0)
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
        rc = s_mw_reduce(self, var->agg == ZDIST_AGG_SUM ? ZDIST_REDUCE_SUM : ZDIST_REDUCE_MEAN, var->copies,
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
    int rc = s_require_cross(self, NULL, err);
    if (rc < 0)
        return rc;
    if ((rc = s_check_own_var(self, var, err)) < 0)
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
        if ((rc = s_ring_dtype("assign", value->dtype, err)) < 0)
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

/* ------------------------------------------------------------------------ */
/* run: a thread per replica, and the rendezvous of their collectives        */

/* Every replica meets here; -EPIPE when a replica has returned from the
   step function and so never will. */
static int
s_barrier(zdist_strategy_replica_t *ctx, const char *what, zdist_error_t *err)
{
    zdist_strategy_object_t *s = ctx->strategy;
    pthread_mutex_lock(&s->mu);
    unsigned long gen = s->generation;
    if (s->departed == 0 && ++s->arrived == s->replicas) {
        s->arrived = 0;
        s->generation++;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    while (gen == s->generation && s->departed == 0)
        pthread_cond_wait(&s->cv, &s->mu);
    int ok = gen != s->generation;
    int who = s->departed_id;
    pthread_mutex_unlock(&s->mu);
    if (ok)
        return 0;
    return zdist_error_set(
        err, -EPIPE,
        "replica %d: %s: replica %d returned from the step function without joining it; every "
        "replica must make the same collective calls in the same order",
        ctx->id, what, who);
}

static void *
s_replica_main(void *p)
{
    zdist_strategy_replica_t *ctx = p;
    tl_strategy = ctx->strategy;
    tl_depth = 0;
    tl_replica = ctx;
    zdist_error_clear(&ctx->err);
    ctx->rc = ctx->fn(ctx, ctx->arg, &ctx->ret, &ctx->err);
    if (ctx->rc < 0 && ctx->err.text[0] == '\0')
        zdist_error_set(&ctx->err, ctx->rc, "replica %d: the step function failed (%s)", ctx->id,
                        strerror(-ctx->rc));
    zdist_strategy_object_t *s = ctx->strategy;
    pthread_mutex_lock(&s->mu);
    if (s->departed++ == 0)
        s->departed_id = ctx->id;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    tl_replica = NULL;
    tl_strategy = NULL;
    return NULL;
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
    int rc = s_require_cross(self, NULL, err);
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
    self->arrived = 0;
    self->departed = 0;
    self->departed_id = -1;
    int started = 0;
    for (int r = 0; r < n; r++) {
        ctxs[r].strategy = self;
        ctxs[r].id = r;
        ctxs[r].fn = fn;
        ctxs[r].arg = args_per_replica ? args_per_replica[r] : arg;
        int e = pthread_create(&ctxs[r].thread, NULL, s_replica_main, &ctxs[r]);
        if (e != 0) {
            rc = zdist_error_set(err, -e, "run: cannot start replica %d's thread: %s", r, strerror(e));
            /* the started replicas see a departure at their first collective */
            pthread_mutex_lock(&self->mu);
            if (self->departed++ == 0)
                self->departed_id = r;
            pthread_cond_broadcast(&self->cv);
            pthread_mutex_unlock(&self->mu);
            break;
        }
        started++;
    }
    for (int r = 0; r < started; r++)
        pthread_join(ctxs[r].thread, NULL);
    if (rc == 0)
        for (int r = 0; r < n; r++)
            if (ctxs[r].rc < 0) {
                rc = ctxs[r].rc;
                if (err)
                    *err = ctxs[r].err;
                break;
            }
    for (int r = 0; r < started; r++) {
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

int
zdist_strategy_replica_run_on_logical_device(zdist_strategy_replica_t *ctx, int device,
                                             zdist_strategy_device_fn fn, void *arg, zdist_error_t *err)
{
    int rc = s_require_replica(ctx, err);
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
    if (tl_device != 0)
        return zdist_error_set(err, -EDEADLK,
                               "run_on_logical_device: called from logical device %d's function; hand work to "
                               "logical devices from the replica's step function only (device 0 is its thread, "
                               "which waits for this call)",
                               tl_device);
    if (device == 0)
        return fn(ctx, 0, arg, err);
    s_device_t *d = &s->devices[ctx->id * s->ldev + device];
    pthread_mutex_lock(&d->mu);
    d->ctx = ctx;
    d->fn = fn;
    d->arg = arg;
    d->work = true;
    pthread_cond_broadcast(&d->cv);
    while (d->work)
        pthread_cond_wait(&d->cv, &d->mu);
    rc = d->rc;
    if (rc < 0 && err)
        *err = d->err;
    pthread_mutex_unlock(&d->mu);
    if (rc < 0 && err && err->text[0] == '\0')
        zdist_error_set(err, rc, "replica %d: logical device %d's function failed (%s)", ctx->id, device,
                        strerror(-rc));
    return rc;
}

/* ------------------------------------------------------------------------ */
/* multi_worker_mirrored: this worker's replicas combined, then the ring     */

static int
s_ring_dtype(const char *what, zdist_dtype_t dtype, zdist_error_t *err)
{
    if (dtype == ZDIST_DTYPE_FLOAT32)
        return 0;
    return zdist_error_set(
        err, -ENOTSUP,
        "%s: multi_worker_mirrored combines float32 values across workers (the ring's dtype), "
        "not %s",
        what, zdist_dtype_name(dtype));
}

static int
s_ring_sum(zdist_strategy_object_t *s, float *data, int64_t len, zdist_error_t *err)
{
    float *p = data;
    return zdist_comm_all_reduce(s->comm, ZDIST_REDUCE_SUM, &p, &len, 1, 0, err);
}

/* One value on the wire of s_mw_all_values: its dtype, rank, dims and byte
   count, then its bytes padded to 8. */
typedef struct {
    int32_t dtype;
    int32_t rank;
    int64_t dims[ZDIST_MAX_RANK];
    uint64_t nbytes;
} s_value_head_t;

static size_t
s_pad8(size_t n)
{
    return (n + 7) & ~(size_t) 7;
}

/* Every replica's value of every worker, in replica-id order (worker 0's
   local replicas first): each worker's n values go round the ring whole,
   with their dtypes and shapes, so that any dtype and any shape can then be
   combined exactly as one worker holding every replica would.
   *ret_all[workers * n] points into *ret_buf (the caller frees both). */
static int
s_mw_all_values(zdist_strategy_object_t *s, const zdist_tensor_t *values, int n, zdist_tensor_t **ret_all,
                void **ret_buf, zdist_error_t *err)
{
    size_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += sizeof(s_value_head_t) + s_pad8(values[i].nbytes);
    char *mine = calloc(1, bytes ? bytes : 1);
    if (!mine)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        s_value_head_t h = {.dtype = (int32_t) values[i].dtype,
                            .rank = values[i].shape.rank,
                            .nbytes = values[i].nbytes};
        for (int d = 0; d < values[i].shape.rank && d < ZDIST_MAX_RANK; d++)
            h.dims[d] = values[i].shape.dims[d];
        memcpy(mine + off, &h, sizeof h);
        off += sizeof h;
        if (values[i].nbytes)
            memcpy(mine + off, values[i].data, values[i].nbytes);
        off += s_pad8(values[i].nbytes);
    }
    void *all = NULL;
    int64_t total = 0;
    int rc = zdist_comm_all_gather(s->comm, mine, (int64_t) bytes, 1, &all, &total, NULL, 0, err);
    free(mine);
    if (rc < 0)
        return rc;
    int count = s->workers * n;
    zdist_tensor_t *vals = calloc((size_t) count, sizeof *vals);
    if (!vals) {
        free(all);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    off = 0;
    for (int i = 0; i < count; i++) {
        s_value_head_t h;
        if (off + sizeof h > (size_t) total) {
            rc = -EPROTO;
            break;
        }
        memcpy(&h, (char *) all + off, sizeof h);
        off += sizeof h;
        size_t want = 0;
        zdist_shape_t shape;
        if (h.rank < 0 || h.rank > ZDIST_MAX_RANK || zdist_shape_init(&shape, h.rank, h.dims) < 0 ||
            zdist_tensor_byte_size((zdist_dtype_t) h.dtype, &shape, &want) < 0 || want != h.nbytes ||
            off + s_pad8(h.nbytes) > (size_t) total) {
            rc = -EPROTO;
            break;
        }
        vals[i] = (zdist_tensor_t){.dtype = (zdist_dtype_t) h.dtype,
                                   .shape = shape,
                                   .data = (char *) all + off,
                                   .nbytes = h.nbytes};
        off += s_pad8(h.nbytes);
    }
    if (rc == 0 && off != (size_t) total)
        rc = -EPROTO;
    if (rc < 0) {
        free(vals);
        free(all);
        return zdist_error_set(err, rc,
                               "the workers' values do not agree: every worker must pass one value per local "
                               "replica (the same number of replicas on every worker)");
    }
    *ret_all = vals;
    *ret_buf = all;
    return 0;
}

/* Strategy.reduce over every worker: values[n] are this worker's replicas'. */
static int
s_mw_reduce(zdist_strategy_object_t *s, zdist_reduce_op_t op, const zdist_tensor_t *values, int n,
            const int *axes, int num_axes, zdist_tensor_t *ret, zdist_error_t *err)
{
    int rc;
    if (values[0].dtype != ZDIST_DTYPE_FLOAT32) {
        /* other dtypes: every replica's value, reduced here as one worker
           with all the replicas reduces them (MEAN of integers a float64) */
        zdist_tensor_t *all = NULL;
        void *buf = NULL;
        if ((rc = s_mw_all_values(s, values, n, &all, &buf, err)) < 0)
            return rc;
        rc = zdist_distribute_reduce_axes(op, all, s->workers * n, axes, num_axes, ret, err);
        free(all);
        free(buf);
        return rc;
    }
    zdist_tensor_t loc;
    double local_count = 0;
    if ((rc = zdist_distribute_reduce_count(op, values, n, axes, num_axes, &local_count, err)) < 0 ||
        (rc = zdist_distribute_reduce_axes(ZDIST_REDUCE_SUM, values, n, axes, num_axes, &loc, err)) < 0)
        return rc;
    int64_t len = (int64_t) (loc.nbytes / sizeof(float));
    double count = s->total;
    if (axes) {
        /* MEAN divides by the reduced axes' sizes over every replica of every worker */
        float *buf = malloc((size_t) (len + 1) * sizeof *buf);
        if (!buf) {
            free(loc.data);
            return zdist_error_set(err, -ENOMEM, "out of memory");
        }
        memcpy(buf, loc.data, loc.nbytes);
        buf[len] = (float) local_count;
        rc = s_ring_sum(s, buf, len + 1, err);
        if (rc == 0) {
            memcpy(loc.data, buf, loc.nbytes);
            count = buf[len];
        }
        free(buf);
    } else {
        rc = s_ring_sum(s, loc.data, len, err);
    }
    if (rc < 0) {
        free(loc.data);
        return rc;
    }
    if (op == ZDIST_REDUCE_MEAN)
        for (int64_t i = 0; i < len; i++)
            ((float *) loc.data)[i] = (float) (((float *) loc.data)[i] / count);
    *ret = loc;
    return 0;
}

/* Strategy.gather over every worker. */
static int
s_mw_gather(zdist_strategy_object_t *s, const zdist_tensor_t *values, int n, int axis, zdist_tensor_t *ret,
            zdist_error_t *err)
{
    int rank = values[0].shape.rank, rc;
    if ((axis < 0 ? axis + rank : axis) != 0) {
        /* along another axis the workers' blocks interleave: every replica's
           value, concatenated here in replica order as one worker would */
        zdist_tensor_t *all = NULL;
        void *buf = NULL;
        if ((rc = s_mw_all_values(s, values, n, &all, &buf, err)) < 0)
            return rc;
        rc = zdist_distribute_gather(all, s->workers * n, axis, ret, err);
        free(all);
        free(buf);
        return rc;
    }
    zdist_tensor_t loc;
    rc = zdist_distribute_gather(values, n, axis, &loc, err);
    if (rc < 0)
        return rc;
    int64_t inner = 1;
    for (int d = 1; d < loc.shape.rank; d++)
        inner *= loc.shape.dims[d];
    size_t row_bytes = (size_t) inner * zdist_dtype_size(loc.dtype);
    void *all = NULL;
    int64_t rows = 0;
    rc = zdist_comm_all_gather(s->comm, loc.data, loc.shape.dims[0], row_bytes, &all, &rows, NULL, 0, err);
    free(loc.data);
    if (rc < 0)
        return rc;
    loc.shape.dims[0] = rows;
    loc.data = all;
    loc.nbytes = (size_t) rows * row_bytes;
    *ret = loc;
    return 0;
}

/* The one value an ON_WRITE variable takes from every replica's write
   (s->slots hold this worker's), for a cross-replica write of it. */
static int
s_mw_combine_write(zdist_strategy_object_t *s, const zdist_strategy_var_t *var, zdist_tensor_t *ret,
                   zdist_error_t *err)
{
    int rc = zdist_distribute_check_replica_write(var->sync, var->agg, var->dtype, s->total, err);
    if (rc < 0)
        return rc;
    if (var->agg == ZDIST_AGG_SUM || var->agg == ZDIST_AGG_MEAN)
        return s_mw_reduce(s, var->agg == ZDIST_AGG_SUM ? ZDIST_REDUCE_SUM : ZDIST_REDUCE_MEAN, s->slots,
                           s->replicas, NULL, 0, ret, err);
    /* ONLY_FIRST_REPLICA: values_util.apply_aggregation takes
       experimental_local_results(value)[0], this worker's first replica's
       value (TF does not send it to the other workers) */
    if (s->slots[0].nbytes != var->nbytes || s->slots[0].dtype != var->dtype)
        return zdist_error_set(
            err, -EINVAL, "assign to %s: the value's dtype or size differs from the variable's", var->name);
    zdist_tensor_t v = var->copies[0];
    v.data = malloc(var->nbytes ? var->nbytes : 1);
    if (!v.data)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    memcpy(v.data, s->slots[0].data, var->nbytes);
    *ret = v;
    return 0;
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
    int rc = s_barrier(ctx, what, err);
    if (rc < 0)
        return rc;
    if (ctx->id == 0) {
        zdist_error_clear(&s->coll_err);
        memset(&s->merged, 0, sizeof s->merged);
        s->coll_rc = fn(ctx, cookie, &s->merged, &s->coll_err);
        if (s->coll_rc < 0 && s->coll_err.text[0] == '\0')
            zdist_error_set(&s->coll_err, s->coll_rc, "%s failed (%s)", what, strerror(-s->coll_rc));
    }
    if ((rc = s_barrier(ctx, what, err)) < 0)
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
    int brc = s_barrier(ctx, what, rc < 0 ? NULL : err);
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
        return s_mw_gather(s, s->slots, s->replicas, c->axis, out, err);
    return s_mw_reduce(s, c->op, s->slots, s->replicas, NULL, 0, out, err);
}

typedef enum { S_REDUCE, S_GATHER } s_coll_t;

static int
s_collective(zdist_strategy_replica_t *ctx, s_coll_t kind, zdist_reduce_op_t op, int axis,
             const zdist_tensor_t *value, zdist_tensor_t *ret, zdist_error_t *err)
{
    int rc = s_require_replica(ctx, err);
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
    if ((rc = s_barrier(ctx, what, err)) < 0)
        return rc;
    /* Every replica computes the same function of the same operands, in
       replica order: the same result, or the same error, everywhere. */
    zdist_tensor_t out;
    if (kind == S_REDUCE)
        rc = zdist_distribute_reduce(op, s->slots, s->replicas, ZDIST_AXIS_NONE, &out, err);
    else
        rc = zdist_distribute_all_gather(s->slots, s->replicas, axis, &out, err);
    int brc = s_barrier(ctx, what, rc < 0 ? NULL : err);
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
    int rc = s_require_replica(ctx, err);
    if (rc < 0)
        return rc;
    if ((rc = s_check_own_var(ctx->strategy, var, err)) < 0)
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
        int rc = s_mw_combine_write(s, var, &v, err);
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
    int rc = s_require_replica(ctx, err);
    if (rc < 0)
        return rc;
    if ((rc = s_check_own_var(ctx->strategy, var, err)) < 0)
        return rc;
    if (!value)
        return zdist_error_set(err, -EINVAL, "replica %d: assign to %s: value is required", ctx->id,
                               var->name);
    zdist_strategy_object_t *s = ctx->strategy;
    s->slots[ctx->id] = *value;
    if ((rc = s_barrier(ctx, "assign", err)) < 0)
        return rc;
    if (ctx->id == 0) {
        zdist_error_clear(&s->coll_err);
        s->coll_rc = s_apply_replica_write(s, var, op, &s->coll_err);
    }
    if ((rc = s_barrier(ctx, "assign", err)) < 0)
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
    tl_replica = NULL;
    tl_depth = 1;
    int rc = m->fn(s, s->slots, s->replicas, m->arg, out, err);
    tl_depth = 0;
    tl_replica = ctx;
    if (rc < 0 && err && err->text[0] == '\0')
        zdist_error_set(err, rc, "merge_call: merge_fn failed (%s)", strerror(-rc));
    return rc;
}

int
zdist_strategy_replica_merge_call(zdist_strategy_replica_t *ctx, zdist_strategy_merge_fn fn, void *arg,
                                  const zdist_tensor_t *value, zdist_tensor_t *ret, zdist_error_t *err)
{
    int rc = s_require_replica(ctx, err);
    if (rc < 0)
        return rc;
    if (!fn || !value)
        return zdist_error_set(err, -EINVAL, "replica %d: merge_call: merge_fn and value are required",
                               ctx->id);
    ctx->strategy->slots[ctx->id] = *value;
    s_merge_t m = {.fn = fn, .arg = arg};
    return s_leader(ctx, "merge_call", s_merge_leader, &m, ret, err);
}

/* ------------------------------------------------------------------------ */
/* Cross-replica methods                                                      */

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
    int rc = s_require_cross(self, NULL, err);
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
        return s_mw_reduce(self, op, values, n, axes, num_axes, ret, err);
    return zdist_distribute_reduce_axes(op, values, n, axes, num_axes, ret, err);
}

int
zdist_strategy_gather(zdist_strategy_object_t *self, const zdist_tensor_t *values, int n, int axis,
                      zdist_tensor_t *ret, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "gather: strategy is NULL");
    int rc = s_require_cross(self, s_gather_cross, err);
    if (rc < 0)
        return rc;
    if ((rc = s_check_values(self, "gather", values, n, err)) < 0)
        return rc;
    if (self->workers > 1)
        return s_mw_gather(self, values, n, axis, ret, err);
    return zdist_distribute_gather(values, n, axis, ret, err);
}

int
zdist_strategy_gather_indexed_slices(zdist_strategy_object_t *self, const zdist_indexed_slices_t *values,
                                     int n, int axis, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) values, (void) n, (void) axis, (void) ret;
    if (!self)
        return zdist_error_set(err, -EINVAL, "gather: strategy is NULL");
    int rc = s_require_cross(self, s_gather_cross, err);
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

/* reduce_to / batch_reduce_to over every worker: every pair checked (float32,
   destinations of the reduced shape) before the first ring call. */
static int
s_mw_batch_reduce_to(zdist_strategy_object_t *s, zdist_reduce_op_t op, const zdist_reduce_pair_t *pairs,
                     int n, zdist_error_t *err)
{
    if (!pairs && n > 0)
        return zdist_error_set(err, -EINVAL, "batch_reduce_to: pairs is NULL");
    for (int i = 0; i < n; i++) {
        const zdist_reduce_pair_t *p = &pairs[i];
        if (p->values && p->values[0].dtype != ZDIST_DTYPE_FLOAT32 && op == ZDIST_REDUCE_MEAN &&
            p->values[0].dtype != ZDIST_DTYPE_FLOAT64)
            return zdist_error_set(err, -EINVAL,
                                   "reduce_to: pair %d: MEAN of %s values is a float64, which does not fit "
                                   "their destination; reduce with SUM or use float values",
                                   i, zdist_dtype_name(p->values[0].dtype));
        for (int d = 0; d < p->num_dests; d++)
            if (!p->dests || p->dests[d].dtype != p->values[0].dtype || !p->dests[d].data ||
                !zdist_shape_equal(&p->dests[d].shape, &p->values[0].shape))
                return zdist_error_set(
                    err, -EINVAL,
                    "reduce_to: pair %d, destination %d: give a buffer of the values' dtype and "
                    "shape",
                    i, d);
    }
    for (int i = 0; i < n; i++) {
        zdist_tensor_t v;
        int rc = s_mw_reduce(s, op, pairs[i].values, pairs[i].num_replicas, NULL, 0, &v, err);
        if (rc < 0)
            return rc;
        for (int d = 0; d < pairs[i].num_dests; d++)
            memcpy(pairs[i].dests[d].data, v.data, v.nbytes);
        free(v.data);
    }
    return 0;
}

int
zdist_strategy_extended_reduce_to(zdist_strategy_object_t *self, zdist_reduce_op_t op,
                                  const zdist_tensor_t *values, int n,
                                  const zdist_strategy_var_t *destination, zdist_tensor_t *dests,
                                  int num_dests, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "reduce_to: strategy is NULL");
    int rc = s_require_cross(self, NULL, err);
    if (rc < 0)
        return rc;
    if ((rc = s_check_values(self, "reduce_to", values, n, err)) < 0)
        return rc;
    if (destination) {
        if ((rc = s_check_own_var(self, destination, err)) < 0)
            return rc;
        if (num_dests != destination->ncopies)
            return zdist_error_set(
                err, -EINVAL, "reduce_to: destination %s has %d copies; pass num_dests %d buffers, not %d",
                destination->name, destination->ncopies, destination->ncopies, num_dests);
    }
    if (self->workers > 1) {
        zdist_reduce_pair_t pair = {values, n, dests, num_dests};
        return s_mw_batch_reduce_to(self, op, &pair, 1, err);
    }
    return zdist_distribute_reduce_to(op, values, n, dests, num_dests, err);
}

int
zdist_strategy_extended_batch_reduce_to(zdist_strategy_object_t *self, zdist_reduce_op_t op,
                                        const zdist_reduce_pair_t *pairs, int n, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "batch_reduce_to: strategy is NULL");
    int rc = s_require_cross(self, NULL, err);
    if (rc < 0)
        return rc;
    for (int i = 0; pairs && i < n; i++)
        if ((rc = s_check_values(self, "batch_reduce_to", pairs[i].values, pairs[i].num_replicas, err)) < 0) {
            zdist_error_prefix(err, "pair %d", i);
            return rc;
        }
    if (self->workers > 1)
        return s_mw_batch_reduce_to(self, op, pairs, n, err);
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
    int rc = s_check_own_var(s, var, err);
    if (rc < 0)
        return rc;
    if (!fn)
        return zdist_error_set(err, -EINVAL, "update: fn is required");
    s->uargs[ctx->id] = arg;
    if ((rc = s_barrier(ctx, "update", err)) < 0)
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
    if ((rc = s_barrier(ctx, "update", err)) < 0)
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
    if (tl_replica && tl_replica->strategy == self)
        return s_update_in_replica(tl_replica, var, fn, arg, err);
    int rc = s_require_cross(self, NULL, err);
    if (rc < 0)
        return rc;
    if ((rc = s_check_own_var(self, var, err)) < 0)
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
    int rc = s_require_scope(self, err);
    if (rc < 0)
        return rc;
    if (!anchor)
        return zdist_error_set(err, -EINVAL, "colocate_vars_with: the anchor variable is NULL");
    if (anchor->strategy != self)
        return zdist_error_set(err, -EINVAL,
                               "`colocate_vars_with` must only be passed a variable created in this "
                               "tf.distribute.Strategy.scope(), not %s created in scope: %s",
                               anchor->name, zdist_strategy_class_name(anchor->strategy));
    if (tl_anchor_strategy)
        return zdist_error_set(err, -EBUSY,
                               "colocate_vars_with(%s) is already open on this thread; end it before opening "
                               "another",
                               tl_anchor->name);
    tl_anchor = anchor;
    tl_anchor_strategy = self;
    return 0;
}

int
zdist_strategy_extended_colocate_vars_with_end(zdist_strategy_object_t *self, zdist_error_t *err)
{
    if (!self || tl_anchor_strategy != self)
        return zdist_error_set(err, -EINVAL,
                               "colocate_vars_with end: no colocate_vars_with is open on this thread "
                               "for this strategy");
    tl_anchor = NULL;
    tl_anchor_strategy = NULL;
    return 0;
}

bool
zdist_strategy_extended_variable_created_in_scope(const zdist_strategy_object_t *self,
                                                  const zdist_strategy_var_t *var)
{
    return self && var && var->strategy == self;
}

/* ------------------------------------------------------------------------ */
/* parameter_server: the ClusterCoordinator                                   */

static int
s_require_ps(const zdist_strategy_object_t *self, const char *what, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "%s: strategy is NULL", what);
    if (!self->ps)
        return zdist_error_set(err, -EINVAL,
                               "%s: a %s has no ClusterCoordinator (parameter_server only); call "
                               "zdist_strategy_run",
                               what, zdist_strategy_class_name(self));
    return s_require_cross(self, NULL, err);
}

int
zdist_strategy_schedule(zdist_strategy_object_t *self, int64_t steps, zdist_remote_value_t **ret,
                        zdist_error_t *err)
{
    int rc = s_require_ps(self, "schedule", err);
    if (rc < 0)
        return rc;
    if (!ret)
        return zdist_error_set(err, -EINVAL, "schedule: ret is required");
    return strategy_ps_schedule(self->ps, steps, ret, err);
}

int
zdist_strategy_fetch(zdist_strategy_object_t *self, zdist_remote_value_t *value, zdist_tensor_t *ret_values,
                     zdist_error_t *err)
{
    int rc = s_require_ps(self, "fetch", err);
    if (rc < 0)
        return rc;
    if (!value || !ret_values)
        return zdist_error_set(err, -EINVAL, "fetch: value and ret_values are required");
    zdist_closure_result_t r;
    if ((rc = zdist_remote_value_fetch(value, &r, err)) < 0)
        return rc;
    float *loss = malloc(sizeof *loss);
    if (!loss)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    *loss = r.steps > 0 ? (float) (r.loss_sum / (double) r.steps) : 0.0f;
    ret_values[0] = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = loss, .nbytes = sizeof *loss};
    return 0;
}

int
zdist_strategy_join(zdist_strategy_object_t *self, zdist_error_t *err)
{
    int rc = s_require_ps(self, "join", err);
    return rc < 0 ? rc : strategy_ps_join(self->ps, err);
}

zdist_coordinator_t *
zdist_strategy_coordinator(zdist_strategy_object_t *self)
{
    return self && self->ps ? strategy_ps_coordinator(self->ps) : NULL;
}

int
zdist_strategy_variable_ps_tasks(const zdist_strategy_var_t *var, int *ret_tasks, int max)
{
    if (!var || !var->ps)
        return 0;
    int n = strategy_ps_var_num_shards(var->ps);
    for (int i = 0; ret_tasks && i < n && i < max; i++)
        ret_tasks[i] = strategy_ps_var_shard_task(var->ps, i);
    return n;
}
