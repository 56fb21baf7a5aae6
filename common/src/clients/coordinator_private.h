/* The ClusterCoordinator's state, shared by its two files: coordinator.c (closures, dispatch, losses, the
   start and stop of a job) and coordinator_members.c (its workers as the status and the elastic membership
   see them, and evaluation). Private to libzdist. */
#ifndef ZDIST_COORDINATOR_PRIVATE_H
#define ZDIST_COORDINATOR_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

#include "zdist/coordinator.h"
#include "zdist/worker_client.h"

#define S_MAX_K 16     /* RUN_STEPS messages in flight per worker */
#define S_MAX_BATCH 64 /* closures in one RUN_STEPS */
/* A RUN_STEPS carries consecutive queued closures until it holds about this
   much of the worker's time (by its measured time per step), so near-empty
   closures share a message and its reply while long ones go alone. */
#define S_BATCH_TARGET_US 2000

typedef enum { S_QUEUED, S_FLIGHT, S_DONE } s_vstate_t;

struct zdist_remote_value_t {
    zdist_coordinator_t *owner;
    int64_t steps;
    int64_t first_step; /* the job's number of its first step: the same on every attempt */
    s_vstate_t state;
    int rc;
    zdist_error_t err;
    zdist_closure_result_t result;
    uint64_t req_id;
    int64_t sent_ms;
    int64_t sent_us;
    zdist_remote_value_t *qnext;    /* queue, completed list, or spare list */
    zdist_remote_value_t *all_next; /* every value, for destroy */
    bool detached; /* zdist_coordinator_schedule_detached's: nobody fetches it, so it is reused once its
                      result is taken (or it failed) instead of living as long as the coordinator */
};

/* W_LEFT: drained (zdist_coordinator_drain_worker): no closures, no pings. */
typedef enum { W_DOWN, W_STARTING, W_UP, W_LEFT } s_wstate_t;

typedef struct {
    char endpoint[256];
    zdist_worker_client_t *cl; /* NULL once the worker has left (W_LEFT) */
    s_wstate_t state;
    uint64_t incarnation; /* from the START_JOB reply */
    zdist_remote_value_t **flight; /* closures in flight, in dispatch order (a batch shares req_id) */
    int nflight;
    int nmsgs;          /* RUN_STEPS messages in flight */
    double us_per_step; /* measured on this worker (moving average); 0 before a reply */
    uint64_t ping_id, start_id, eval_id;
    bool evaluated; /* zdist_coordinator_evaluate has its part */
    zdist_evaluation_t evaluation;
    int64_t next_ping_ms;
    int64_t done;
    int64_t last_heard_ms;
    unsigned restarts;
    int64_t steps_per_epoch;
    bool ever_up;
    int64_t last_done_us;   /* when its last closure completed (service time of the next) */
    int64_t lost_since_ms;  /* 0 while up */
    char lost_why[256];
    bool draining; /* takes no more closures; W_LEFT once those in flight are back */
} s_worker_t;

struct zdist_coordinator_t {
    zdist_job_t job;
    char *prefix;
    char **ps;
    size_t nps;
    bool create_variables, repeat_input;
    int k;         /* RUN_STEPS messages in flight per worker */
    int max_batch; /* closures per RUN_STEPS */
    int64_t closure_timeout_ms, start_timeout_ms, ping_interval_ms;
    s_worker_t *workers;
    zdist_worker_client_t **clients; /* workers[i].cl, for one poll over all */
    size_t nworkers;
    size_t rr; /* round robin for dispatch */
    int64_t next_step; /* the job's step the next scheduled closure follows */
    bool numbered;     /* zdist_coordinator_set_step was called: closures carry step numbers */
    zdist_remote_value_t *qhead, *qtail;
    size_t nqueued;
    zdist_remote_value_t *chead, *ctail; /* completed, not yet taken */
    zdist_remote_value_t *all;
    zdist_remote_value_t *spare; /* detached values done with, reused by the next ones */
    bool paused;
    int first_rc;
    zdist_error_t first_err;
    bool error_raised;
    int eval_rc; /* the first refusal of an EVALUATE */
    zdist_error_t eval_err;
    zdist_auc_t *eval_auc; /* every worker's scored examples of this evaluation: the exact AUC */
    void (*on_event)(void *arg, bool problem, const char *line);
    void *on_event_arg;
};

#endif
