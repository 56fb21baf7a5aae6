/* zdist worker service: the worker protocol's request bodies and reply builders, for zdist-worker's method
   table.

   Each body type decodes a request into the plain C struct of
   zdist/worker_client.h and checks it before any handler runs (a bad one is
   answered INVALID_ARGUMENT naming the field, STYLE rule 13); the handler
   reads it with zdist_rpc_call_body and answers with a builder below. So a
   worker never sees protobuf-c. Tensors (GET_STATE, SET_STATE) stay on the
   messages: zdist_rpc_call_request / zdist_rpc_call_reply. */
#ifndef ZDIST_WORKER_SERVICE_H
#define ZDIST_WORKER_SERVICE_H

#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/rpc.h"
#include "zdist/wire.h"
#include "zdist/worker_client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* START_JOB -> const zdist_worker_start_t *: the job held to the parser's
   rules (zdist_job_validate; its errors start "job: "), at most
   ZDIST_WORKER_MAX_PS ps endpoints, timeouts and num_workers >= 0. The job
   is the call's: zdist_job_copy it to keep it. */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_worker_body_start_job;
/* RUN_STEPS -> const zdist_worker_run_t *: steps in 0..ZDIST_WORKER_MAX_STEPS_PER_CALL. */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_worker_body_run_steps;
/* EVALUATE, STOP_JOB, GET_STATE -> const zdist_worker_job_arg_t *. */
typedef struct {
    const char *job; /* the job's name, "" when not given */
} zdist_worker_job_arg_t;
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_worker_body_evaluate;
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_worker_body_stop_job;
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_worker_body_get_state;
/* CONNECT -> const zdist_worker_connect_t *: at most ZDIST_WORKER_MAX_RING
   endpoints, each tcp://HOST:PORT without a wildcard. */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_worker_body_connect;
/* SET_STATE -> const zdist_worker_state_t *: step, iterations, skip_steps >= 0. */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_worker_body_set_state;
/* STATUS takes no body: its table entry names none. */

/* Reply builders: each sets the body of the call's reply. 0 or -ENOMEM
   (-EINVAL: more steps or outputs than the protocol's limits). */
ZDIST_EXPORT int zdist_worker_reply_started(zdist_rpc_call_t *call, const zdist_worker_started_t *started);
/* ran->steps' outputs; the sums of a decoded reply are not sent. */
ZDIST_EXPORT int zdist_worker_reply_ran(zdist_rpc_call_t *call, const zdist_worker_ran_t *ran);
ZDIST_EXPORT int zdist_worker_reply_evaluation(zdist_rpc_call_t *call, const zdist_evaluation_t *evaluation);
ZDIST_EXPORT int zdist_worker_reply_stopped(zdist_rpc_call_t *call, int64_t steps);
ZDIST_EXPORT int zdist_worker_reply_status(zdist_rpc_call_t *call, const zdist_worker_status_t *status);
/* GET_STATE: the tensors are added to zdist_rpc_call_reply (call) by the handler. */
ZDIST_EXPORT int zdist_worker_reply_state(zdist_rpc_call_t *call, const zdist_worker_state_t *state);
ZDIST_EXPORT int zdist_worker_reply_state_set(zdist_rpc_call_t *call, int num_tensors);

/* ---- a client's side (zdist/worker_client.h sends these) ----
   Request messages from the plain C structs, strings and arrays copied into
   the packed body; NULL when out of memory. They check nothing: the worker
   does (START_JOB with req->job NULL makes the request without a job that
   the worker refuses). */
ZDIST_EXPORT zdist_msg_t *zdist_worker_request_start_job(const zdist_worker_start_t *req);
ZDIST_EXPORT zdist_msg_t *zdist_worker_request_run_steps(const zdist_worker_run_t *req);
/* EVALUATE, STOP_JOB or GET_STATE of `job` (NULL: ""); NULL for another method. */
ZDIST_EXPORT zdist_msg_t *zdist_worker_request_job(uint32_t method, const char *job);
ZDIST_EXPORT zdist_msg_t *zdist_worker_request_connect(const zdist_worker_connect_t *req);
/* SET_STATE with the n tensors copied: 0 with *ret_msg, or -ENOMEM. */
ZDIST_EXPORT int zdist_worker_request_set_state(const zdist_worker_state_t *state, const zdist_tensor_t *tensors,
                                                size_t n, zdist_msg_t **ret_msg);
/* Takes the reply *msg_p (nulled) into *ret (release it). A body that does
   not decode makes the reply INTERNAL, saying why and naming `endpoint`.
   0, or -ENOMEM (*msg_p destroyed). */
ZDIST_EXPORT int zdist_worker_reply_decode(zdist_msg_t **msg_p, const char *endpoint, zdist_worker_reply_t *ret);

#ifdef __cplusplus
}
#endif
#endif
