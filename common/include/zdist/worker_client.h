/* zdist worker client: the worker protocol (proto/worker.proto) in plain C, one client per zdist-worker task.

   Requests are built from C structs, sent pipelined with deadlines, and
   their replies decoded into C structs; the protobuf-c types stay inside
   libzdist. The ClusterCoordinator (zdist/coordinator.h), the coordinator's
   multi_worker_mirrored runner and the tests all talk to workers through
   this class; the worker's own side (typed request bodies and reply
   builders) is zdist/worker_service.h.

     zdist_worker_client_t *c = zdist_worker_client_new ("tcp://10.0.0.2:2222", NULL, &err);
     uint64_t id;
     zdist_worker_client_run_steps (c, &(zdist_worker_run_t){"mnist", 8}, 60000, &id);
     zdist_worker_reply_t r;
     zdist_worker_client_wait (c, id, &r);     // or _recv: any completion
     if (r.status == ZDIST_STATUS_OK) use (r.ran.loss_sum / r.ran.num_steps);
     zdist_worker_reply_release (&r);

   A call that gets no reply by its deadline completes with
   DEADLINE_EXCEEDED, calls in flight when the connection drops with
   UNAVAILABLE (both made here: incarnation 0). One thread owns a client. */
#ifndef ZDIST_WORKER_CLIENT_H
#define ZDIST_WORKER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/job.h"
#include "zdist/metrics.h"
#include "zdist/rpc.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Method numbers of proto/worker.proto (PING is ZDIST_METHOD_PING). */
#define ZDIST_WORKER_START_JOB 200
#define ZDIST_WORKER_RUN_STEPS 201
#define ZDIST_WORKER_EVALUATE 202
#define ZDIST_WORKER_STOP_JOB 203
#define ZDIST_WORKER_STATUS 204
#define ZDIST_WORKER_CONNECT 205
#define ZDIST_WORKER_GET_STATE 206
#define ZDIST_WORKER_SET_STATE 207

/* Limits on what a request may ask (checked by the worker before any handler). */
#define ZDIST_WORKER_MAX_PS 64     /* ps endpoints in one START_JOB */
#define ZDIST_WORKER_MAX_RING 1024 /* endpoints in one CONNECT */
#define ZDIST_WORKER_MAX_STEPS_PER_CALL 100000
#define ZDIST_WORKER_MAX_OUTPUTS 16 /* named outputs of one step */
#define ZDIST_WORKER_ENDPOINT_MAX 256

/* ---- requests ---- */

/* START_JOB: the whole job (sent as the typed proto/job.proto message) and
   this worker's part in it. Strings and arrays are borrowed. */
typedef struct {
    const zdist_job_t *job;
    int worker_index;                /* input_pipeline_id (multi_worker_mirrored: the rank) */
    int num_workers;                 /* num_input_pipelines; 0 = 1 */
    const char *const *ps_endpoints; /* ps task i at index i; none = the worker's cluster */
    size_t num_ps;
    bool create_variables;         /* parameter_server: create the shards (idempotent) */
    int64_t ps_timeout_ms;         /* per psd call attempt; 0 = the worker's default */
    const char *variable_prefix;   /* e.g. "JOB/"; NULL or "" = none */
    int64_t collective_timeout_ms; /* multi_worker_mirrored; 0 = the job's */
    bool repeat_input;             /* the caller counts steps: the input repeats for ever */
} zdist_worker_start_t;

/* RUN_STEPS: `steps` steps of the running job (0: its steps_per_execution).
   parameter_server: first_step is the job's global number of the first of
   them (from 1; 0: none); the worker's writes to the psds carry it, so a
   closure run twice (its first worker lost) is applied once. */
typedef struct {
    const char *job;
    int64_t steps;
    int64_t first_step;
} zdist_worker_run_t;

/* CONNECT (multi_worker_mirrored): every rank's ring endpoint, rank i at i. */
typedef struct {
    const char *job;
    const char *const *endpoints;
    size_t num_endpoints;
} zdist_worker_connect_t;

/* A worker's variables as of a step: the GET_STATE reply and the SET_STATE
   request. The tensors travel beside it: each variable named as itself,
   then its optimizer slots "<variable>/slot<k>", float32. */
typedef struct {
    const char *job;
    int64_t step;       /* the job's step the state belongs to */
    int64_t iterations; /* the optimizer's apply count */
    int64_t skip_steps; /* SET_STATE: input batches to skip (resuming mid-data) */
} zdist_worker_state_t;

/* ---- replies ---- */

typedef struct {
    const char *job, *strategy;
    int num_replicas;        /* local replicas */
    int64_t steps_per_epoch; /* of this worker's input pipeline */
    int num_variables;
    int num_shards;                  /* parameter_server: shards over all variables */
    bool created;                    /* at least one shard was created by this start */
    const char *collective_endpoint; /* multi_worker_mirrored: where its ring receives
                                        (a wildcard host means the worker's own), else "" */
} zdist_worker_started_t;

/* One step's named outputs ("loss", "examples", "correct", ...). */
typedef struct {
    int64_t step; /* the worker's step counter after it */
    int64_t epoch;
    int num_outputs;
    const char *names[ZDIST_WORKER_MAX_OUTPUTS];
    double values[ZDIST_WORKER_MAX_OUTPUTS];
} zdist_worker_step_t;

typedef struct {
    const zdist_worker_step_t *steps;
    size_t num_steps;
    int64_t worker_step; /* steps the worker has run for the job */
    bool end_of_data;    /* the input ran out before all steps ran */
    /* Decoded replies: over the steps, the sums of "loss", "examples" and
       "correct" (0 when absent) and the last "loss" (NaN when none). */
    double loss_sum, examples, correct, last_loss;
} zdist_worker_ran_t;

/* EVALUATE: this worker's share of the test set (summed over workers by the caller). */
typedef struct {
    int64_t correct; /* classification only (has_correct) */
    int64_t total;   /* examples evaluated */
    double loss_sum; /* sum of per-example losses */
    bool has_correct;
    /* A binary classifier's share of the exact AUC: its `scored` examples'
       predicted probabilities and labels (0/1), borrowed (from the reply,
       or the evaluator's accumulator); 0 and NULL when the model gives no
       predictions. Travels as two tensors of the EVALUATE reply. */
    const float *predictions;
    const uint8_t *positives;
    int64_t scored;
    /* The whole test split's exact AUC, once the parts are combined
       (zdist_evaluation_finish). */
    bool has_auc;
    double auc;
} zdist_evaluation_t;

/* Adds one part (a worker's share) to *sum: the counts and sums, and its
   scored pairs into auc (exact: zdist_auc_new (0); NULL drops them) — the
   AUC of the whole split from every pair, never an average of the parts'.
   0 or -ENOMEM. */
ZDIST_EXPORT int zdist_evaluation_add(zdist_evaluation_t *sum, const zdist_evaluation_t *part, zdist_auc_t *auc);
/* sum->has_auc and sum->auc from auc when it holds an example (pointers
   of sum cleared: the parts' are not the sum's). 0 or -ENOMEM. */
ZDIST_EXPORT int zdist_evaluation_finish(zdist_evaluation_t *sum, const zdist_auc_t *auc);

typedef struct {
    const char *job; /* "" when none */
    bool running;
    bool failed;
    const char *error; /* why the job failed */
    const char *strategy;
    int64_t steps;
    double last_loss;
    int worker_task;
} zdist_worker_status_t;

/* A completed call, decoded. The method's part is set when status is OK
   (strings borrowed from the reply: valid until zdist_worker_reply_release). */
typedef struct {
    uint64_t id;          /* the request id returned when it was sent */
    uint32_t method;      /* ZDIST_WORKER_*, ZDIST_METHOD_PING */
    int status;           /* ZDIST_STATUS_* */
    const char *message;  /* the status message, "" when none */
    uint64_t incarnation; /* the worker's; 0 when the completion was made here */
    union {
        zdist_worker_started_t started; /* START_JOB */
        zdist_worker_ran_t ran;         /* RUN_STEPS */
        zdist_evaluation_t evaluation;  /* EVALUATE */
        int64_t stopped_steps;          /* STOP_JOB: steps the job ran there */
        zdist_worker_status_t worker;   /* STATUS */
        zdist_worker_state_t state;     /* GET_STATE; tensors: zdist_worker_reply_tensor */
        int state_tensors;              /* SET_STATE: tensors taken */
    };
    void *internal; /* the reply message and its decoded body */
} zdist_worker_reply_t;

/* NULL-safe; zeroes *reply. */
ZDIST_EXPORT void zdist_worker_reply_release(zdist_worker_reply_t *reply);
/* The reply's tensors (GET_STATE), borrowed like its strings. */
ZDIST_EXPORT size_t zdist_worker_reply_tensor_count(const zdist_worker_reply_t *reply);
ZDIST_EXPORT const zdist_tensor_t *zdist_worker_reply_tensor(const zdist_worker_reply_t *reply, size_t index);
/* "STATUS: message" of a failed reply (or "no answer" for NULL) into buf; returns buf. */
ZDIST_EXPORT const char *zdist_worker_reply_why(const zdist_worker_reply_t *reply, char *buf, size_t size);

/* ---- the client ---- */

typedef struct zdist_worker_client_t zdist_worker_client_t;

/* Connects (asynchronously: the worker may come up later). opts NULL:
   zdist_rpc_client_options_default. NULL on a bad endpoint, with err. */
ZDIST_EXPORT zdist_worker_client_t *
zdist_worker_client_new(const char *endpoint, const zdist_rpc_client_options_t *opts, zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. Calls in flight are dropped. */
ZDIST_EXPORT void zdist_worker_client_destroy(zdist_worker_client_t **self_p);
ZDIST_EXPORT const char *zdist_worker_client_endpoint(const zdist_worker_client_t *self);
ZDIST_EXPORT size_t zdist_worker_client_in_flight(const zdist_worker_client_t *self);

/* Each sends one request with a deadline timeout_ms from now (<= 0: none)
   and returns at once: 0 with *ret_id (may be NULL), -EINVAL for a request
   the worker would refuse anyway (with no job...), -EBUSY when max_in_flight
   calls are pending, -ENOMEM. */
ZDIST_EXPORT int zdist_worker_client_start_job(zdist_worker_client_t *self, const zdist_worker_start_t *req,
                                               int64_t timeout_ms, uint64_t *ret_id);
ZDIST_EXPORT int zdist_worker_client_run_steps(zdist_worker_client_t *self, const zdist_worker_run_t *req,
                                               int64_t timeout_ms, uint64_t *ret_id);
ZDIST_EXPORT int zdist_worker_client_evaluate(zdist_worker_client_t *self, const char *job,
                                              int64_t timeout_ms, uint64_t *ret_id);
ZDIST_EXPORT int zdist_worker_client_stop_job(zdist_worker_client_t *self, const char *job,
                                              int64_t timeout_ms, uint64_t *ret_id);
ZDIST_EXPORT int zdist_worker_client_status(zdist_worker_client_t *self, int64_t timeout_ms,
                                            uint64_t *ret_id);
ZDIST_EXPORT int zdist_worker_client_ping(zdist_worker_client_t *self, int64_t timeout_ms, uint64_t *ret_id);
ZDIST_EXPORT int zdist_worker_client_connect(zdist_worker_client_t *self, const zdist_worker_connect_t *req,
                                             int64_t timeout_ms, uint64_t *ret_id);
ZDIST_EXPORT int zdist_worker_client_get_state(zdist_worker_client_t *self, const char *job,
                                               int64_t timeout_ms, uint64_t *ret_id);
/* The n tensors are copied into the request. */
ZDIST_EXPORT int zdist_worker_client_set_state(zdist_worker_client_t *self, const zdist_worker_state_t *state,
                                               const zdist_tensor_t *tensors, size_t n, int64_t timeout_ms,
                                               uint64_t *ret_id);

/* The next completed call, waiting up to wait_ms (-1: until one completes,
   0: not at all), decoded into *ret (release it). A reply whose body does
   not decode completes with INTERNAL. 0, -EAGAIN when none completed in
   time, -EINTR. */
ZDIST_EXPORT int zdist_worker_client_recv(zdist_worker_client_t *self, int64_t wait_ms,
                                          zdist_worker_reply_t *ret);
/* The completion of call `id` (sent on this client), waiting until it
   completes (by its deadline at the latest); others arriving meanwhile are
   kept for _recv. 0, -ENOENT when no such call is pending (-EINVAL for id
   0), -EINTR. */
ZDIST_EXPORT int zdist_worker_client_wait(zdist_worker_client_t *self, uint64_t id,
                                          zdist_worker_reply_t *ret);

/* Waits in one poll over every client's socket (and `also`, a raw libzmq
   socket such as an actor's pipe; NULL: none) until a client has a
   completion to take, `also` is readable, or wait_ms (-1: no limit)
   passes. Returns how many clients have a completion ready (0: none, on
   time out or `also`), or a negative errno (-EINTR). NULL clients are
   skipped. */
ZDIST_EXPORT int zdist_worker_client_wait_any(zdist_worker_client_t *const *clients, size_t n, void *also,
                                              int64_t wait_ms);

#ifdef __cplusplus
}
#endif
#endif
