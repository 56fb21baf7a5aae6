/* coord_run: what every way of running a job shares — the running job's state, its status, metrics and
   checkpoint bookkeeping, the runner's pipe — and the ops table a way of running it implements
   (coord_runner_ps.c: parameter_server closures; coord_runner_ring.c: the ring's lockstep for
   multi_worker_mirrored and tpu). The implementations call down into this; it calls them only through
   the table. Private to the coordinator. */
#ifndef COORD_RUN_H
#define COORD_RUN_H

#include <czmq.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "coord_job.h"
#include "zdist/coordinator.h"
#include "zdist/prom.h"
#include "zdist/ps_client.h"

#define S_MAX_POINTS 4096 /* loss points kept for loss.svg */

/* Worker tasks of a cluster, at most: as many as the ClusterCoordinator
   takes. A running job's per-worker state (its step times, ~33 KiB) is in
   memory the kernel maps only where a worker's slot is used. */
#define COORD_MAX_WORKERS ZDIST_COORDINATOR_MAX_WORKERS
/* ps tasks of a cluster, at most: as many as a worker's START_JOB takes. */
#define COORD_MAX_PS ZDIST_WORKER_MAX_PS

/* A job to run: what the server hands its runner (heap; the runner frees it). */
typedef struct {
    char job_id[64];
    char job_dir[1024];   /* STATE/jobs/ID (absolute): metrics, loss.svg */
    char ckpt_root[1024]; /* where ckpt-STEP/ go: job_dir, or checkpoint.dir/ID */
    char *base_dir;       /* owned */
    coord_job_t job;      /* owned */
    /* num_ps: the job's ps tasks, ps[0..num_ps) (parameter_server: its
       layout, which `zdist reshard` changes); cluster_ps: the cluster's,
       ps[0..cluster_ps), num_ps at most. */
    int num_workers, num_ps, cluster_ps;
    char workers[COORD_MAX_WORKERS][256];
    /* Elastic workers: joined through the chief (not in the cluster file),
       and left (drained, or a joined one's SIGTERM): no closures for it. */
    bool joined[COORD_MAX_WORKERS], left[COORD_MAX_WORKERS];
    char ps[COORD_MAX_PS][256];
    int64_t closure_timeout_ms;
} coord_run_config_t;
/* NULL-safe; nulls *self_p. */
void coord_run_config_destroy(coord_run_config_t **self_p);

typedef struct coord_run_t coord_run_t;

/* A way of running a job. attempt: one try from the last checkpoint to the
   end: 0 done, 1 stopped (cancel or term), -EAGAIN something was lost or
   came back (call wait, then attempt again), another negative errno failed
   (r->error set). Each op may be NULL where marked. */
typedef struct {
    /* Before the first status (NULL: nothing to set up). 0 or a negative errno, r->error set. */
    int (*start)(coord_run_t *r);
    int (*attempt)(coord_run_t *r);
    /* After -EAGAIN: says why, then waits for what was lost; false when
       stopped (cancel, term) or given up (r->error set). */
    bool (*wait)(coord_run_t *r);
    /* On the test set, after a done attempt. */
    int (*evaluate)(coord_run_t *r, zdist_evaluation_t *ret, zdist_error_t *err);
    /* After a done attempt: the final checkpoint when it has not saved one (NULL: it has). */
    void (*finish)(coord_run_t *r);
    /* The job ended (not stopped to resume): tells the workers to drop it. */
    void (*stop)(coord_run_t *r);
    /* Its part of a STATUS detail: appends to the detail's "workers" array
       and sets its own members. */
    void (*status)(coord_run_t *r, json_t *detail, int64_t now);
    /* Frees r->impl (NULL-safe about it). */
    void (*destroy)(coord_run_t *r);
} coord_run_ops_t;

/* A worker's step times: the last minute's samples (for p50/p99) and a
   histogram since the job started (for /metrics). */
#define COORD_STEP_SAMPLES 2048
typedef struct {
    int64_t t_ms[COORD_STEP_SAMPLES];
    double sec[COORD_STEP_SAMPLES];
    int head, n;
    zdist_prom_histogram_t hist;
} coord_steptime_t;

struct coord_run_t {
    coord_run_config_t *cfg;
    zsock_t *pipe;
    const coord_run_ops_t *ops;
    void *impl; /* the ops' own state, theirs to free */
    /* The cluster's ps tasks, cfg->cluster_ps (every strategy's status shows the job's, cfg->num_ps). */
    zdist_ps_client_t *ps[COORD_MAX_PS];
    uint64_t ps_bytes[COORD_MAX_PS], ps_requests[COORD_MAX_PS];
    int64_t ps_stats_ms[COORD_MAX_PS];  /* ps request rates: when the requests per method were read */
    json_t *ps_methods[COORD_MAX_PS];   /* [{method, requests, per_s, p50_us, p99_us, errors}] */
    json_t *ps_embeddings[COORD_MAX_PS]; /* the job's dynamic tables' parts there: [{table, rows, admitted,
                                            refused, evicted, pending, bytes}] */
    int64_t last_stats_ms;                 /* 0: read the psds' figures at the next status */
    int64_t step, steps;
    int64_t ckpt_step;  /* last complete checkpoint, -1 none */
    int64_t ckpt_tried; /* last step a save was tried at (the next is due an interval later) */
    unsigned ckpt_damaged, ckpt_failed; /* checkpoints set aside as damaged; saves that failed */
    char ckpt_why[1024];                /* why the last save failed */
    const char *state;
    char error[4096];
    double loss; /* mean loss of the latest window */
    double ex_per_s;
    double test_accuracy, test_loss;
    double test_auc; /* exact, over the whole test split; NaN when the model gives no predictions */
    int64_t test_examples;
    bool evaluated;
    int64_t started_ms;
    /* metrics window */
    int64_t win_start_ms, win_steps;
    double win_loss, win_examples;
    int64_t last_line_step;
    FILE *metrics;
    int npoints;
    double pt_step[S_MAX_POINTS], pt_loss[S_MAX_POINTS];
    int64_t last_status_ms;
    bool cancel, term;
    /* Tasks that got SIGTERM (PREEMPT from the server) and wait for this
       job's checkpoint at its next step boundary: coord_run_preempt_answer. */
    struct {
        char type[8]; /* worker, ps */
        int index;
    } preempt[16];
    int npreempt;
    /* JOIN / DRAIN taken from the pipe: cfg's workers, joined and left are
       updated; the ops apply them (parameter_server) and clear this. */
    bool members_changed;
    /* RESHARD N taken from the pipe (0: none): the ps tasks the job moves
       to at its next step boundary; answered by coord_run_reshard_answer. */
    int reshard;
    json_t *membership; /* its history: [{time, event, task, endpoint}], the last 100 */
    coord_steptime_t steptime[COORD_MAX_WORKERS];
    int64_t examples_total;
};

/* Sets up r for cfg (taken) on pipe, to run with ops: the ps clients,
   metrics.jsonl (a psd or file that cannot be reached is left out). */
void coord_run_init(coord_run_t *r, coord_run_config_t *cfg, zsock_t *pipe, const coord_run_ops_t *ops);
/* Frees what coord_run_init made (the ops' state first) and the config. */
void coord_run_release(coord_run_t *r);
/* A new training window from r->step (after a restore or a start). */
void coord_run_window(coord_run_t *r);
/* Counts a result's steps, loss and examples; writes metrics lines. */
void coord_run_account(coord_run_t *r, const zdist_closure_result_t *res);
/* Worker i ran `steps` steps at `sec` each: the samples of its last
   minute's p50/p99 and its histogram. */
void coord_run_step_time(coord_run_t *r, int i, double sec, int64_t steps);
/* Worker i's step times into its STATUS object w: step_time_p50_s,
   step_time_p99_s and step_time_samples when it has samples in the last
   minute (then true, *p50 set), and step_seconds (the histogram). */
bool coord_run_step_json(coord_run_t *r, int i, int64_t now, json_t *w, double *p50);
/* The lower median of v[0..n) (sorted in place): of two, the smaller; 0 when n is 0. */
double coord_run_lower_median(double *v, int n);
/* A lost worker's STATUS fields: lost_ms_ago, lost_since (wall clock), lost_why. */
void coord_run_lost_json(json_t *w, int64_t now, int64_t lost_since_ms, const char *why);
/* Sends an EVENT to the server (kind: lost, back, recovered...; one line). */
void coord_run_event(coord_run_t *r, const char *kind, const char *line);
/* Sends a STATUS to the server, at most every 250 ms unless forced. */
void coord_run_status(coord_run_t *r, bool force);
/* The final evaluation's line of metrics.jsonl: step, test_loss,
   test_accuracy, test_auc (null when absent), test_examples, time. */
void coord_run_eval_line(coord_run_t *r);
/* The last message: "END" with the final status. */
void coord_run_end(coord_run_t *r);
/* Redraws loss.svg in the job's dir. */
void coord_run_svg(coord_run_t *r);
/* Takes CANCEL / $TERM / PREEMPT / JOIN / DRAIN / RESHARD from the pipe (sets r->cancel, r->term,
   r->preempt, r->members_changed, r->reshard). */
void coord_run_check_pipe(coord_run_t *r);
/* Waits up to ms for the pipe, then takes what came (CANCEL, $TERM). */
void coord_run_wait_pipe(coord_run_t *r, int64_t ms);
/* Answers the pending PREEMPTs ("PREEMPTED" to the server: "job ID: " + line) and clears them. */
void coord_run_preempt_answer(coord_run_t *r, const char *line);
/* Answers them after the preemption's save at r->step (rc: its result):
   the checkpoint's step, or that the job resumes from the last one. */
void coord_run_preempt_saved(coord_run_t *r, int rc);
/* Answers them, when there are, from a runner that is not training (waiting
   for a lost task): the job resumes from its last checkpoint anyway. */
void coord_run_preempt_idle(coord_run_t *r);
/* Answers the pending RESHARD ("RESHARDED" to the server: {ok, num_ps,
   detail}, num_ps the job's ps tasks now) and clears it. */
void coord_run_reshard_answer(coord_run_t *r, bool ok, const char *line);
/* Whether task type:index is among the pending PREEMPTs. */
bool coord_run_preempted(const coord_run_t *r, const char *type, int index);
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

#endif
