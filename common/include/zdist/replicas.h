/* zdist replicas: the replica runtime — one process's replicas on threads
   of their own, meeting at an abortable barrier, each with its logical-device
   threads. The Strategy objects (zdist/strategy.h) and zdist-worker's trainer
   both run their replicas on it. */
#ifndef ZDIST_REPLICAS_H
#define ZDIST_REPLICAS_H

#include <stdbool.h>

#include "zdist/defs.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Replicas one runtime may run, and logical devices per replica. */
#define ZDIST_REPLICAS_MAX 256
#define ZDIST_REPLICAS_MAX_DEVICES 64

typedef struct zdist_replicas_t zdist_replicas_t;

/* Replica `replica`'s work in one zdist_replicas_run; its return value is
   the caller's business (keep it in arg), the runtime only notes that the
   replica has returned. */
typedef void (*zdist_replicas_fn)(void *arg, int replica);
/* Work handed to logical device `device` of a replica (zdist/step.h's
   zdist_device_fn): 0 or a negative errno. */
typedef int (*zdist_replicas_device_fn)(void *arg, int device);
/* Called once on each thread the runtime starts, before any work: slot is
   replica * devices + device (the replica's own thread is device 0). For
   pinning threads to cores; must not fail. */
typedef void (*zdist_replicas_thread_fn)(void *arg, int slot);

typedef struct {
    int replicas; /* 1..ZDIST_REPLICAS_MAX */
    int devices;  /* logical devices per replica, 0 means 1; 1..ZDIST_REPLICAS_MAX_DEVICES */
    /* Replica 0 runs on the thread that calls zdist_replicas_run (no thread
       of its own); otherwise every replica has a thread of the runtime's. */
    bool caller_runs_first;
    zdist_replicas_thread_fn on_thread_start; /* NULL: none */
    void *on_thread_arg;
} zdist_replicas_config_t;

/* Starts the replicas' threads (all but replica 0's when
   caller_runs_first) and devices 1..devices-1 of every replica. 0 and *ret
   (the caller's, for zdist_replicas_destroy), or -EINVAL (a bad config),
   -ENOMEM, -EAGAIN (a thread would not start), with err. */
ZDIST_EXPORT int zdist_replicas_new(const zdist_replicas_config_t *cfg, zdist_replicas_t **ret,
                                    zdist_error_t *err);
/* Stops and joins every thread. Not while a run is under way. NULL-safe;
   nulls *self_p. */
ZDIST_EXPORT void zdist_replicas_destroy(zdist_replicas_t **self_p);

ZDIST_EXPORT int zdist_replicas_count(const zdist_replicas_t *self);
ZDIST_EXPORT int zdist_replicas_devices(const zdist_replicas_t *self);

/* Runs fn(arg, r) for every replica r at once, each on its thread, and
   returns when every one has returned. A run opens a new round of the
   barrier: no replica has departed yet. One run at a time, from one thread
   (not from a replica's). */
ZDIST_EXPORT void zdist_replicas_run(zdist_replicas_t *self, zdist_replicas_fn fn, void *arg);

/* The barrier of the run under way, called by every replica in the same
   order: 0 once every replica has arrived. A replica that has departed —
   returned from its fn, or called zdist_replicas_depart — never will, so
   every wait that is pending or comes later in the run returns -EPIPE
   instead of hanging, and *ret_departed (may be NULL) is the first
   departed replica. Called from replica threads only. */
ZDIST_EXPORT int zdist_replicas_barrier(zdist_replicas_t *self, int *ret_departed);
/* Replica `replica` leaves the run's collectives now (a failure that
   leaves the replicas out of step): the others' waits return -EPIPE. */
ZDIST_EXPORT void zdist_replicas_depart(zdist_replicas_t *self, int replica);

/* Runs fn on logical device `device` of replica `replica` and waits: on
   the calling thread for device 0, on the device's thread for 1..devices-1,
   or with device -1 on every device at once (device 0 on the calling
   thread). Returns the first nonzero rc in device order. -EINVAL for a
   device outside -1..devices-1. Call from replica `replica`'s own thread
   (one hand-over at a time per replica); fn must not call this again. */
ZDIST_EXPORT int zdist_replicas_run_on_devices(zdist_replicas_t *self, int replica, int device,
                                               zdist_replicas_device_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif
