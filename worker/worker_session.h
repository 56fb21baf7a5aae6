/* worker_session: one job assembled on a worker — data, input pipeline, model, trainer and strategy backend — for START_JOB and `zdist run` alike. */
#ifndef WORKER_SESSION_H
#define WORKER_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "worker_trainer.h"
#include "zdist/collective.h"
#include "zdist/error.h"
#include "zdist/input.h"
#include "zdist/job.h"
#include "zdist/metrics.h"

/* What a failure of worker_session_new was about, so a caller can answer
   it in its own terms (a status on the wire, an exit code). The message in
   err already names the field ("dataset: ...", "model.name: ..."). */
typedef enum {
    WORKER_SESSION_BAD_JOB = 0, /* a field of the job does not fit this worker */
    WORKER_SESSION_DATASET,     /* the data could not be read */
    WORKER_SESSION_MODEL,       /* no such model, or its plugin refused */
    WORKER_SESSION_TRAINER,     /* the model's build or the backend failed */
    WORKER_SESSION_RING,        /* multi_worker_mirrored's end of the ring */
    WORKER_SESSION_VARIABLES,   /* parameter_server: creating the shards */
    WORKER_SESSION_CONFINED,    /* a daemon's job named a place: plugin_path, data outside the roots */
} worker_session_stage_t;

typedef struct {
    int worker_index, num_workers; /* input pipeline i of n; n 0 = 1 */
    int host_workers;              /* worker tasks sharing this host's cores; 0 = 1 */
    /* parameter_server (strings borrowed during _new only) */
    const char *const *ps_endpoints;
    int num_ps;
    int64_t ps_timeout_ms;
    const char *variable_prefix;
    bool create_variables;
    /* multi_worker_mirrored over more than one worker: the host this rank's
       end of the ring binds on, and the collective deadline (0: the job's). */
    const char *ring_host;
    int64_t collective_timeout_ms;
    /* Input epochs: the job's, or for ever when the coordinator counts steps. */
    bool repeat_input;
    /* A daemon's START_JOB (false for `zdist run`, which keeps its user's
       rules: the job's plugin_path and ZDIST_PLUGIN_PATH): a job names code
       and data, never places. The job's plugin_path is refused and plugins
       come only from plugin_dirs (colon-separated; NULL or "": none); the
       dataset's files must lie under data_roots (canonical directories,
       zdist_job_confine_data) when confine_data (none then: no file). */
    bool confined, confine_data;
    const char *plugin_dirs;
    const char *const *data_roots;
    size_t num_data_roots;
} worker_session_config_t;

typedef struct worker_session_t worker_session_t;

/* Assembles *job_p (taken: the session owns it; *job_p is zeroed). NULL
   with err (its code a negative errno) and *ret_stage (may be NULL). */
worker_session_t *worker_session_new(zdist_job_t *job_p, const worker_session_config_t *cfg,
                                     worker_session_stage_t *ret_stage, zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. */
void worker_session_destroy(worker_session_t **self_p);

const zdist_job_t *worker_session_job(const worker_session_t *self);
worker_trainer_t *worker_session_trainer(worker_session_t *self);
zdist_input_t *worker_session_input(worker_session_t *self);
/* The ring (multi_worker_mirrored over > 1 workers), else NULL. */
zdist_comm_t *worker_session_comm(worker_session_t *self);
bool worker_session_has_test(const worker_session_t *self);
/* parameter_server: a shard was created by this session. */
bool worker_session_created(const worker_session_t *self);
/* BLAS threads per replica chosen at assembly (0: left to the environment). */
int worker_session_blas_threads(const worker_session_t *self);

/* dataset.visitation exactly_once: the next step reads the job's batch
   `batch` (epoch * steps per epoch + batch in the epoch: the closure's step
   number - 1), whichever worker runs it; a step without one fails. */
void worker_session_set_batch(worker_session_t *self, int64_t batch);
/* One training step on the next batch: 1 with *ret_out (examples always
   reported) and the batch's epoch, 0 at the end of the input, or a negative
   errno with err naming what failed (the replica, the psd or the peer). */
int worker_session_step(worker_session_t *self, worker_outputs_t *ret_out, int64_t *ret_epoch, zdist_error_t *err);

/* What one epoch of the training input read, for datasets that know each
   example's origin (TFRecord: file and record): its examples and the sum of
   splitmix64 (origin) over them, so the pipelines' epochs can be checked to
   read every example exactly once. */
typedef struct {
    int64_t epoch;
    int64_t examples;
    uint64_t fingerprint;
} worker_epoch_read_t;

/* 1 and *ret once per epoch, right after the step that ended it (then 0
   until the next epoch ends). */
int worker_session_epoch_read(worker_session_t *self, worker_epoch_read_t *ret);
/* The auto-shard policy the training input applied (never AUTO). */
zdist_auto_shard_policy_t worker_session_shard_policy(const worker_session_t *self);

typedef struct {
    double loss_sum; /* sum of per-example losses */
    double correct;  /* classification only (has_correct) */
    double total;    /* examples evaluated */
    bool has_correct;
    /* A binary classifier's (zdist_ctx_predictions) every evaluated example's
       probability and label, exact (zdist_auc_new (0)): this share's AUC, or
       the parts to send for the whole's. NULL when the model gives none. */
    zdist_auc_t *auc;
} worker_eval_t;

/* Evaluates this input pipeline's share of the test set (batches dealt
   round robin over the workers). -ENOENT when the job has no test set.
   Release *ret with worker_eval_release, also after a failure. */
int worker_session_evaluate(worker_session_t *self, worker_eval_t *ret, zdist_error_t *err);
void worker_eval_release(worker_eval_t *ev);

/* Sets a local session's variables (every copy; no optimizer slots) from
   the checkpoint `path` names (zdist_ckpt_locate: a ckpt-STEP/ or the
   directory holding them; any strategy's, zdist/ckpt.h), each by name, all
   read and checked before any is set. *ret_step: its step. Negative errno
   with err naming the file or the variable. */
int worker_session_restore(worker_session_t *self, const char *path, int64_t *ret_step, zdist_error_t *err);

#endif
