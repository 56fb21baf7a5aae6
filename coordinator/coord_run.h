/* coord_run: the state of a running job shared by the runner's parts (coord_runner.c: status, metrics,
   checkpoints, parameter_server; coord_mwm.c: multi_worker_mirrored). Private to the coordinator. */
#ifndef COORD_RUN_H
#define COORD_RUN_H

#include <czmq.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "coord_runner.h"
#include "zdist/coordinator.h"
#include "zdist/prom.h"
#include "zdist/ps_client.h"

#define S_MAX_POINTS 4096

typedef struct coord_mwm_t coord_mwm_t;

/* A worker's step times: the last minute's samples (for p50/p99) and a
   histogram since the job started (for /metrics). */
#define COORD_STEP_SAMPLES 2048
typedef struct {
    int64_t t_ms[COORD_STEP_SAMPLES];
    double sec[COORD_STEP_SAMPLES];
    int head, n;
    zdist_prom_histogram_t hist;
} coord_steptime_t;

typedef struct {
    coord_runner_config_t *cfg;
    zsock_t *pipe;
    zdist_coordinator_t *coord;
    zdist_ps_client_t *ps[COORD_MAX_TASKS];
    uint64_t ps_inc[COORD_MAX_TASKS];
    uint64_t ps_bytes[COORD_MAX_TASKS], ps_requests[COORD_MAX_TASKS];
    int64_t step, steps, scheduled;
    int64_t ckpt_step; /* last complete checkpoint, -1 none */
    int64_t ckpt_tried; /* last step a save was tried at (the next is due an interval later) */
    unsigned ckpt_damaged, ckpt_failed; /* checkpoints set aside as damaged; saves that failed */
    const char *state;
    char error[4096];
    double loss;       /* mean loss of the latest window */
    double ex_per_s;
    double test_accuracy, test_loss;
    bool evaluated;
    int64_t started_ms;
    /* metrics window */
    int64_t win_start_ms, win_steps;
    double win_loss, win_examples;
    int64_t last_line_step;
    FILE *metrics;
    int npoints;
    double pt_step[S_MAX_POINTS], pt_loss[S_MAX_POINTS];
    int64_t last_status_ms, last_stats_ms;
    bool cancel, term;
    unsigned psd_recoveries;
    coord_mwm_t *mwm;     /* multi_worker_mirrored jobs */
    /* Per worker, over the ClusterCoordinators of earlier attempts. */
    unsigned worker_restarts[COORD_MAX_TASKS];
    int64_t worker_closures[COORD_MAX_TASKS];
    char lost_why[1024];  /* why the attempt ended with -EAGAIN */
    char ckpt_why[1024];  /* why the last save failed */
    coord_steptime_t steptime[COORD_MAX_TASKS];
    int64_t examples_total;
    /* ps request rates: the requests per method at the last stats call */
    int64_t ps_stats_ms[COORD_MAX_TASKS];
    json_t *ps_methods[COORD_MAX_TASKS]; /* [{method, requests, per_s, p50_us, p99_us, errors}] */
} coord_run_t;

/* Counts a result's steps, loss and examples; writes metrics lines. */
void coord_run_account(coord_run_t *r, const zdist_closure_result_t *res);
/* Sends an EVENT to the server (kind: lost, back, recovered...; one line). */
void coord_run_event(coord_run_t *r, const char *kind, const char *line);
/* Sends a STATUS to the server, at most every 250 ms unless forced. */
void coord_run_status(coord_run_t *r, bool force);
/* Takes CANCEL / $TERM from the pipe (sets r->cancel, r->term). */
void coord_run_check_pipe(coord_run_t *r);
/* Waits up to ms for the pipe, then takes what came (CANCEL, $TERM). */
void coord_run_wait_pipe(coord_run_t *r, int64_t ms);
/* The step of the newest complete checkpoint, -1 when none. */
int64_t coord_run_ckpt_last(const char *job_dir);
/* STATE/jobs/ID/ckpt-STEP into dir (created). */
void coord_run_ckpt_dir(const coord_run_t *r, int64_t step, char *dir, size_t size);
/* Completes the checkpoint of `step` whose files are in its dir: writes the
   manifest (fields: a JSON object's members, without braces), prunes to the
   newest `keep`, redraws loss.svg. 0 or a negative errno. */
int coord_run_ckpt_commit(coord_run_t *r, int64_t step, const char *fields, uint64_t bytes, const char *where);

/* Checks the coordinator's manifest.json of checkpoint `step` against its
   CRC-32 (manifests without one pass): 0, or -EBADMSG (-ENOMEM) with why filled. */
int coord_run_ckpt_check(const coord_run_t *r, int64_t step, char *why, size_t size);
/* Sets a damaged checkpoint aside (ckpt-STEP -> ckpt-STEP.damaged, kept
   for a look until newer checkpoints replace it) and logs which and why,
   so the next coord_run_ckpt_last is the one before. */
void coord_run_ckpt_reject(coord_run_t *r, int64_t step, const char *why);
/* No checkpoint left to resume from, every one set aside: r->error says so; -EBADMSG. */
int coord_run_ckpt_all_damaged(coord_run_t *r);
/* A save at `step` failed (a full disk, a psd's error): removes what it
   wrote, keeps the previous checkpoint, logs that it retries an interval
   later. */
void coord_run_ckpt_failed(coord_run_t *r, int64_t step, const char *why);
/* The step the next checkpoint is due at, for checkpoints every `every`. */
int64_t coord_run_ckpt_next(const coord_run_t *r, int64_t every);

/* multi_worker_mirrored (coord_mwm.c). attempt: 0 done, 1 stopped (cancel
   or term), -EAGAIN a worker was lost or came back (call wait, then again),
   other negative errno failed (r->error set). wait: false when stopped. */
int coord_mwm_attempt(coord_run_t *r);
bool coord_mwm_wait(coord_run_t *r);
int coord_mwm_evaluate(coord_run_t *r, zdist_evaluation_t *ret, zdist_error_t *err);
void coord_mwm_stop(coord_run_t *r);
/* The workers' part of a STATUS detail. */
json_t *coord_mwm_workers_json(coord_run_t *r);
/* Why the ring was last re-formed ("" when never). */
const char *coord_mwm_last_failure(const coord_run_t *r);
void coord_mwm_destroy(coord_run_t *r);

#endif
