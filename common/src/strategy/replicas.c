/* zdist replicas: the replica runtime — replica threads, the abortable
   barrier of their collectives, and each replica's logical-device threads. */
#include "zdist/replicas.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct s_replica_t s_replica_t;

/* Logical device d >= 1 of a replica (device 0 is the replica's thread). */
typedef struct {
    s_replica_t *r;
    int index;
    pthread_t thread;
    bool started;
    uint64_t seen_gen;
    int rc;
} s_device_t;

struct s_replica_t {
    zdist_replicas_t *rt;
    int id;
    pthread_t thread;
    bool started;
    uint64_t seen_gen;
    /* devices[1..L-1] and the work a hand-over gives them */
    s_device_t *devices;
    bool dsync_ready, dstop;
    pthread_mutex_t dmu;
    pthread_cond_t dgo, ddone;
    uint64_t dgen;
    int dpending, dtarget;
    zdist_replicas_device_fn dfn;
    void *darg;
};

struct zdist_replicas_t {
    int n, ndev;
    bool caller_first;
    zdist_replicas_thread_fn on_start;
    void *on_start_arg;
    s_replica_t *replicas;
    /* the run under way */
    pthread_mutex_t mu;
    pthread_cond_t go_cv, done_cv;
    uint64_t gen;
    int pending;
    bool stop;
    zdist_replicas_fn fn;
    void *arg;
    /* the barrier */
    pthread_cond_t bar_cv;
    int arrived;
    uint64_t bar_gen;
    int departed; /* replicas departed this run */
    int departed_id;
};

int
zdist_replicas_count(const zdist_replicas_t *self)
{
    return self ? self->n : 1;
}

int
zdist_replicas_devices(const zdist_replicas_t *self)
{
    return self ? self->ndev : 1;
}

void
zdist_replicas_depart(zdist_replicas_t *self, int replica)
{
    pthread_mutex_lock(&self->mu);
    if (self->departed++ == 0)
        self->departed_id = replica;
    pthread_cond_broadcast(&self->bar_cv);
    pthread_mutex_unlock(&self->mu);
}

int
zdist_replicas_barrier(zdist_replicas_t *self, int *ret_departed)
{
    pthread_mutex_lock(&self->mu);
    uint64_t gen = self->bar_gen;
    if (self->departed == 0 && ++self->arrived == self->n) {
        self->arrived = 0;
        self->bar_gen++;
        pthread_cond_broadcast(&self->bar_cv);
        pthread_mutex_unlock(&self->mu);
        return 0;
    }
    while (gen == self->bar_gen && self->departed == 0)
        pthread_cond_wait(&self->bar_cv, &self->mu);
    bool ok = gen != self->bar_gen;
    int who = self->departed_id;
    pthread_mutex_unlock(&self->mu);
    if (ok)
        return 0;
    if (ret_departed)
        *ret_departed = who;
    return -EPIPE;
}

static void
s_run_one(zdist_replicas_t *self, int r)
{
    self->fn(self->arg, r);
    zdist_replicas_depart(self, r);
}

static void *
s_replica_thread(void *p)
{
    s_replica_t *r = p;
    zdist_replicas_t *self = r->rt;
    if (self->on_start)
        self->on_start(self->on_start_arg, r->id * self->ndev);
    for (;;) {
        pthread_mutex_lock(&self->mu);
        while (r->seen_gen == self->gen && !self->stop)
            pthread_cond_wait(&self->go_cv, &self->mu);
        if (self->stop) {
            pthread_mutex_unlock(&self->mu);
            return NULL;
        }
        r->seen_gen = self->gen;
        pthread_mutex_unlock(&self->mu);
        s_run_one(self, r->id);
        pthread_mutex_lock(&self->mu);
        if (--self->pending == 0)
            pthread_cond_signal(&self->done_cv);
        pthread_mutex_unlock(&self->mu);
    }
}

void
zdist_replicas_run(zdist_replicas_t *self, zdist_replicas_fn fn, void *arg)
{
    pthread_mutex_lock(&self->mu);
    self->fn = fn;
    self->arg = arg;
    self->arrived = 0;
    self->departed = 0;
    self->departed_id = -1;
    self->pending = self->caller_first ? self->n - 1 : self->n;
    self->gen++;
    pthread_cond_broadcast(&self->go_cv);
    pthread_mutex_unlock(&self->mu);
    if (self->caller_first)
        s_run_one(self, 0);
    pthread_mutex_lock(&self->mu);
    while (self->pending > 0)
        pthread_cond_wait(&self->done_cv, &self->mu);
    pthread_mutex_unlock(&self->mu);
}

static void *
s_device_thread(void *p)
{
    s_device_t *d = p;
    s_replica_t *r = d->r;
    if (r->rt->on_start)
        r->rt->on_start(r->rt->on_start_arg, r->id * r->rt->ndev + d->index);
    for (;;) {
        pthread_mutex_lock(&r->dmu);
        while (d->seen_gen == r->dgen && !r->dstop)
            pthread_cond_wait(&r->dgo, &r->dmu);
        if (r->dstop) {
            pthread_mutex_unlock(&r->dmu);
            return NULL;
        }
        d->seen_gen = r->dgen;
        bool mine = r->dtarget < 0 || r->dtarget == d->index;
        zdist_replicas_device_fn fn = r->dfn;
        void *farg = r->darg;
        pthread_mutex_unlock(&r->dmu);
        if (!mine)
            continue;
        d->rc = fn(farg, d->index);
        pthread_mutex_lock(&r->dmu);
        if (--r->dpending == 0)
            pthread_cond_signal(&r->ddone);
        pthread_mutex_unlock(&r->dmu);
    }
}

int
zdist_replicas_run_on_devices(zdist_replicas_t *self, int replica, int device, zdist_replicas_device_fn fn,
                              void *arg)
{
    int ndev = self->ndev;
    if (!fn || replica < 0 || replica >= self->n || device < -1 || device >= ndev)
        return -EINVAL;
    if (device == 0 || ndev == 1)
        return fn(arg, 0);
    s_replica_t *r = &self->replicas[replica];
    pthread_mutex_lock(&r->dmu);
    r->dfn = fn;
    r->darg = arg;
    r->dtarget = device;
    r->dpending = device < 0 ? ndev - 1 : 1;
    r->dgen++;
    pthread_cond_broadcast(&r->dgo);
    pthread_mutex_unlock(&r->dmu);
    int rc = device < 0 ? fn(arg, 0) : 0;
    pthread_mutex_lock(&r->dmu);
    while (r->dpending > 0)
        pthread_cond_wait(&r->ddone, &r->dmu);
    pthread_mutex_unlock(&r->dmu);
    for (int d = 1; d < ndev && rc == 0; d++)
        if (device < 0 || device == d)
            rc = r->devices[d].rc;
    return rc;
}

static void
s_devices_stop(zdist_replicas_t *self, s_replica_t *r)
{
    if (!r->dsync_ready)
        return;
    pthread_mutex_lock(&r->dmu);
    r->dstop = true;
    pthread_cond_broadcast(&r->dgo);
    pthread_mutex_unlock(&r->dmu);
    for (int d = 1; d < self->ndev; d++)
        if (r->devices[d].started)
            pthread_join(r->devices[d].thread, NULL);
    pthread_mutex_destroy(&r->dmu);
    pthread_cond_destroy(&r->dgo);
    pthread_cond_destroy(&r->ddone);
}

void
zdist_replicas_destroy(zdist_replicas_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_replicas_t *self = *self_p;
    if (self->replicas) {
        pthread_mutex_lock(&self->mu);
        self->stop = true;
        pthread_cond_broadcast(&self->go_cv);
        pthread_mutex_unlock(&self->mu);
        for (int i = 0; i < self->n; i++) {
            s_replica_t *r = &self->replicas[i];
            if (r->started)
                pthread_join(r->thread, NULL);
            s_devices_stop(self, r);
            free(r->devices);
        }
        free(self->replicas);
    }
    pthread_mutex_destroy(&self->mu);
    pthread_cond_destroy(&self->go_cv);
    pthread_cond_destroy(&self->done_cv);
    pthread_cond_destroy(&self->bar_cv);
    free(self);
    *self_p = NULL;
}

/* Replica r's devices 1..L-1, then its own thread unless the caller's. */
static int
s_replica_start(zdist_replicas_t *self, s_replica_t *r, zdist_error_t *err)
{
    if (self->ndev > 1) {
        r->devices = calloc((size_t) self->ndev, sizeof *r->devices);
        if (!r->devices)
            return zdist_error_set(err, -ENOMEM, "out of memory");
        pthread_mutex_init(&r->dmu, NULL);
        pthread_cond_init(&r->dgo, NULL);
        pthread_cond_init(&r->ddone, NULL);
        r->dsync_ready = true;
        for (int d = 1; d < self->ndev; d++) {
            r->devices[d] = (s_device_t){.r = r, .index = d};
            int e = pthread_create(&r->devices[d].thread, NULL, s_device_thread, &r->devices[d]);
            if (e != 0)
                return zdist_error_set(err, -EAGAIN, "cannot start logical device %d of replica %d: %s", d, r->id,
                                       strerror(e));
            r->devices[d].started = true;
        }
    }
    if (r->id == 0 && self->caller_first)
        return 0;
    int e = pthread_create(&r->thread, NULL, s_replica_thread, r);
    if (e != 0)
        return zdist_error_set(err, -EAGAIN, "cannot start replica %d's thread: %s", r->id, strerror(e));
    r->started = true;
    return 0;
}

int
zdist_replicas_new(const zdist_replicas_config_t *cfg, zdist_replicas_t **ret, zdist_error_t *err)
{
    if (!cfg || !ret)
        return zdist_error_set(err, -EINVAL, "zdist_replicas_new: cfg and ret are required");
    int ndev = cfg->devices > 1 ? cfg->devices : 1;
    if (cfg->replicas < 1 || cfg->replicas > ZDIST_REPLICAS_MAX || cfg->devices > ZDIST_REPLICAS_MAX_DEVICES)
        return zdist_error_set(err, -EINVAL, "replicas: %d replicas of %d logical devices; use 1..%d and 1..%d",
                               cfg->replicas, cfg->devices, ZDIST_REPLICAS_MAX, ZDIST_REPLICAS_MAX_DEVICES);
    zdist_replicas_t *self = calloc(1, sizeof *self);
    if (!self)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    self->n = cfg->replicas;
    self->ndev = ndev;
    self->caller_first = cfg->caller_runs_first;
    self->on_start = cfg->on_thread_start;
    self->on_start_arg = cfg->on_thread_arg;
    self->departed_id = -1;
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->go_cv, NULL);
    pthread_cond_init(&self->done_cv, NULL);
    pthread_cond_init(&self->bar_cv, NULL);
    self->replicas = calloc((size_t) self->n, sizeof *self->replicas);
    if (!self->replicas) {
        zdist_replicas_destroy(&self);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    for (int i = 0; i < self->n; i++) {
        self->replicas[i].rt = self;
        self->replicas[i].id = i;
        int rc = s_replica_start(self, &self->replicas[i], err);
        if (rc < 0) {
            zdist_replicas_destroy(&self);
            return rc;
        }
    }
    *ret = self;
    return 0;
}
