/* zdist ClusterCoordinator: closures of N steps scheduled onto zdist-worker tasks, as
   tf.distribute.experimental.coordinator.ClusterCoordinator.

   A coordinator owns one worker client (zdist/worker_client.h) per worker
   task. zdist_coordinator_start gives every worker the job (START_JOB: the
   whole job, its worker index and count, the ps endpoints, the variable
   prefix; the first worker that answers creates the variables). Then:

     zdist_remote_value_t *rv = zdist_coordinator_schedule (c, steps);
     ... schedule more, returns at once ...
     zdist_coordinator_join (c, &err);   // every closure done; first error once
     zdist_remote_value_fetch (rv, &result, &err);

   A closure is `steps` steps on whichever worker is free, sent in a
   RUN_STEPS; up to max_in_flight_per_worker RUN_STEPS are pipelined on
   each worker so none idles between them. Short closures share a message:
   consecutive queued closures go in one RUN_STEPS (up to
   max_closures_per_dispatch, and about 2 ms of the worker's measured time
   per step, so long closures still go one by one), and each closure takes
   its own steps' results out of the per-step reply. Worker failure is not an error: a closure that
   ends UNAVAILABLE or DEADLINE_EXCEEDED, or that a restarted worker (new
   incarnation) refuses, goes back to the front of the queue and runs
   elsewhere, under the same step numbers (zdist_coordinator_set_step: then
   the steps the lost worker had already pushed are not applied twice); the
   lost worker is PINGed until it answers, given the job
   again (START_JOB) and rejoins. Any other failure of a closure is the
   coordinator's error: it is kept, closures still queued are cancelled
   (their values fail with -ECANCELED), and join returns it once.

   Progress happens only inside the calls that wait (poll, join, fetch),
   which wait in one poll over every worker's socket: the coordinator is
   single-threaded and belongs to the thread that made it. Remote values belong to the coordinator and live until it is
   destroyed. */
#ifndef ZDIST_COORDINATOR_H
#define ZDIST_COORDINATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/job.h"
#include "zdist/worker_client.h" /* zdist_evaluation_t */

#ifdef __cplusplus
extern "C" {
#endif

#define ZDIST_COORDINATOR_MAX_WORKERS 1024

typedef struct zdist_coordinator_t zdist_coordinator_t;
typedef struct zdist_remote_value_t zdist_remote_value_t;

typedef struct {
    /* Borrowed for zdist_coordinator_new only (copied). */
    const zdist_job_t *job;        /* sent whole in START_JOB; RUN_STEPS names it */
    bool repeat_input;             /* the caller counts steps: the workers' input repeats for
                                      ever (else a job of epochs ends with end_of_data) */
    const char *const *workers;    /* "tcp://host:port" of worker task i */
    size_t num_workers;
    const char *const *ps;         /* ps task endpoints; none = the workers' cluster */
    size_t num_ps;
    const char *variable_prefix;   /* e.g. "JOB/"; NULL = none */
    bool create_variables;         /* the first START_JOB creates them (default true) */
    int max_in_flight_per_worker;  /* RUN_STEPS messages in flight per worker (default 2, at most 16) */
    int max_closures_per_dispatch; /* consecutive queued closures one RUN_STEPS may carry (default
                                      32, at most 64; 1: one each) */
    int64_t closure_timeout_ms;    /* deadline of one RUN_STEPS (default 120000) */
    int64_t start_timeout_ms;      /* deadline of START_JOB (default 60000) */
    int64_t ping_interval_ms;      /* PING of a lost worker (default 300) */
    /* Called (on the polling thread) when a worker that was running closures
       is lost (problem true) and when it is back running them: one line
       each, e.g. for the daemon's log. NULL: silent. */
    void (*on_event)(void *arg, bool problem, const char *line);
    void *on_event_arg;
} zdist_coordinator_options_t;

ZDIST_EXPORT void zdist_coordinator_options_default(zdist_coordinator_options_t *opts);

/* What a closure did. */
typedef struct {
    int64_t steps;       /* steps run (fewer than asked only at end_of_data) */
    double loss_sum;     /* sum of the steps' "loss" */
    double last_loss;
    double examples;     /* sum of the steps' "examples" */
    double correct;      /* sum of "correct" (0 when the model reports none) */
    int worker;          /* the worker task that ran it */
    int attempts;        /* 1 + times it was put back after a worker loss */
    bool end_of_data;
    int64_t run_us;      /* how long the worker ran it (microseconds): from its sending, or from the end of the
                            worker's previous closure when that was later, to its reply */
} zdist_closure_result_t;

/* NULL with err on bad options (no workers, too many, bad endpoint). */
ZDIST_EXPORT zdist_coordinator_t *zdist_coordinator_new(const zdist_coordinator_options_t *opts,
                                                        zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. Abandons closures in flight (their
   workers finish them). Remote values die with it. */
ZDIST_EXPORT void zdist_coordinator_destroy(zdist_coordinator_t **self_p);

/* START_JOB on every worker (STOP_JOB first when wait_stop: a worker still
   holding the job from an earlier run). Waits up to the start deadline;
   workers that do not answer are lost (they get the job when they come
   back). Returns 0 when at least one worker runs the job, or the first
   refusal (INVALID_ARGUMENT, NOT_FOUND...: err says which worker and why),
   or -ENOTCONN when none answered. */
ZDIST_EXPORT int zdist_coordinator_start(zdist_coordinator_t *self, bool stop_first, zdist_error_t *err);
/* Whether the first START_JOB creates the job's variables (options'
   create_variables), before zdist_coordinator_start: false when the
   caller created them on the psds itself (zdist/strategy.h's scope under
   parameter_server). */
ZDIST_EXPORT void zdist_coordinator_set_create_variables(zdist_coordinator_t *self, bool create);
/* From the workers' START_JOB replies: steps per epoch of each worker's
   input pipeline, summed over the workers that answered (0 before); with
   dataset.visitation exactly_once every pipeline is the whole epoch: the
   largest of them. */
ZDIST_EXPORT int64_t zdist_coordinator_steps_per_epoch(const zdist_coordinator_t *self);

/* Numbers the closures by the job's global steps: the next one scheduled
   covers steps step + 1 .. step + its steps, and so on. Give the step the
   psds' variables hold: 0 for variables just created, the checkpoint's step
   after a restore (a psd remembers the steps it applied with its values, so
   numbers it already holds would be taken for re-runs and skipped). A
   closure put back after its worker was lost runs again with the same
   numbers, and the workers' writes to the psds carry them: the psds apply
   each step once, although the lost worker may have pushed some of them
   before it went. Without this call closures carry no numbers and such a
   re-run applies those steps again. */
ZDIST_EXPORT void zdist_coordinator_set_step(zdist_coordinator_t *self, int64_t step);
/* Queues a closure of `steps` steps (>= 1). Returns at once; NULL only when
   out of memory or steps < 1. The value is the coordinator's, and lives as
   long as it: a caller that schedules closures for ever and reads their
   results with next_result only schedules them detached instead. */
ZDIST_EXPORT zdist_remote_value_t *zdist_coordinator_schedule(zdist_coordinator_t *self, int64_t steps);
/* Queues a closure as zdist_coordinator_schedule does, with no value to
   fetch: its result comes only through zdist_coordinator_next_result, after
   which (or once it fails or is cancelled: the coordinator's error says
   why) its memory serves the next closure. So memory stays bounded by the
   closures queued, in flight and completed but not taken, however long the
   job runs. 0, -EINVAL (steps < 1) or -ENOMEM. */
ZDIST_EXPORT int zdist_coordinator_schedule_detached(zdist_coordinator_t *self, int64_t steps);
/* Makes progress: sends queued closures to free workers, collects replies,
   handles lost workers. Waits up to wait_ms (0: not at all) for something
   to complete. Returns how many closures completed (>= 0). */
ZDIST_EXPORT int zdist_coordinator_poll(zdist_coordinator_t *self, int64_t wait_ms);
/* Waits until no closure is queued or in flight. Returns 0, or the first
   error of a closure (once: a second join returns 0), with err. */
ZDIST_EXPORT int zdist_coordinator_join(zdist_coordinator_t *self, zdist_error_t *err);
/* True when nothing is queued or in flight. */
ZDIST_EXPORT bool zdist_coordinator_done(const zdist_coordinator_t *self);
/* The first error (0 when none), without consuming it. */
ZDIST_EXPORT int zdist_coordinator_error(const zdist_coordinator_t *self, zdist_error_t *err);
/* Stops handing out queued closures (true) or resumes (false); in-flight
   ones still complete. For checkpoints: pause, wait for done, save. */
ZDIST_EXPORT void zdist_coordinator_pause(zdist_coordinator_t *self, bool paused);
/* Drops every queued closure (their values fail with -ECANCELED). */
ZDIST_EXPORT void zdist_coordinator_cancel_queued(zdist_coordinator_t *self);
ZDIST_EXPORT size_t zdist_coordinator_queued(const zdist_coordinator_t *self);
ZDIST_EXPORT size_t zdist_coordinator_in_flight(const zdist_coordinator_t *self);
/* Completed results not yet taken with next_result, in completion order.
   Returns true and fills *ret while there is one. For a loop that counts
   steps and metrics as they come. */
ZDIST_EXPORT bool zdist_coordinator_next_result(zdist_coordinator_t *self, zdist_closure_result_t *ret);

/* Per-worker view, for status. */
typedef struct {
    const char *endpoint;   /* borrowed */
    bool up;                /* has the job and takes closures */
    int64_t closures_done;
    int in_flight;
    int64_t oldest_in_flight_ms; /* how long the oldest in-flight closure has run; 0 without */
    int64_t last_heard_ms;  /* zdist_clock_now_ms of the last reply; 0 never */
    unsigned restarts;      /* times it rejoined after a loss */
    bool rejoining;         /* lost, answered again, being given the job (START_JOB in flight) */
    int64_t lost_since_ms;  /* zdist_clock_now_ms when it was lost; 0 when up or never lost */
    const char *lost_why;   /* borrowed: why it was lost ("" when not) */
    bool draining;          /* zdist_coordinator_drain_worker: its closures in flight finish, no new ones */
    bool left;              /* drained: out of the job */
} zdist_coordinator_worker_info_t;

/* A worker that joins the running job (elastic workers): index
   num_workers, pinged at once, given the job (START_JOB, its index of the
   count then) and closures once it answers. Returns its index, or a
   negative errno (-ENOSPC past ZDIST_COORDINATOR_MAX_WORKERS, -ENOMEM, a
   bad endpoint) with err. */
ZDIST_EXPORT int zdist_coordinator_add_worker(zdist_coordinator_t *self, const char *endpoint, zdist_error_t *err);
/* Worker i leaves on purpose: it gets no more closures, those in flight
   finish (or, if it goes before they do, go back to the queue whole as a
   lost worker's), then it is out of the job for good: never pinged, no
   part in evaluations. */
ZDIST_EXPORT void zdist_coordinator_drain_worker(zdist_coordinator_t *self, size_t i);
ZDIST_EXPORT size_t zdist_coordinator_num_workers(const zdist_coordinator_t *self);
ZDIST_EXPORT int zdist_coordinator_worker_info(zdist_coordinator_t *self, size_t i,
                                               zdist_coordinator_worker_info_t *ret);

/* The closure's result, waiting (and making progress) until it completes.
   0, or its error: the worker's refusal, or -ECANCELED when it was dropped
   from the queue. */
ZDIST_EXPORT int zdist_remote_value_fetch(zdist_remote_value_t *value, zdist_closure_result_t *ret,
                                          zdist_error_t *err);

/* EVALUATE on every worker that has the job (each its shard of the test
   set, all at once), summed. Waits for them (the closures in flight
   first); a lost worker is evaluated when it has rejoined. */
ZDIST_EXPORT int zdist_coordinator_evaluate(zdist_coordinator_t *self, zdist_evaluation_t *ret, zdist_error_t *err);
/* STOP_JOB on every worker that answers within timeout_ms. */
ZDIST_EXPORT void zdist_coordinator_stop_job(zdist_coordinator_t *self, int64_t timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
