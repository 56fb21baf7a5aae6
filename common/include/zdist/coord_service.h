/* zdist coordinator service: proto/coordinator.proto's request bodies and reply setters, for
   zdist-coordinator's method table.

   Each body type decodes a request into the plain C struct below and checks
   it before any handler runs (a bad one is answered INVALID_ARGUMENT
   "<method>: <the field and the fix>", STYLE rule 13); the handler reads it
   with zdist_rpc_call_body and answers with a setter below. So the
   coordinator never sees protobuf-c. The methods, limits and a job's status
   record live here, with the codec that reads and writes them;
   zdist/coord_client.h (which includes this header) sends the requests. */
#ifndef ZDIST_COORD_SERVICE_H
#define ZDIST_COORD_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/job.h"
#include "zdist/rpc.h"
#include "zdist/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* coordinator.proto method numbers. */
typedef enum {
    ZDIST_COORD_SUBMIT = 300,
    ZDIST_COORD_STATUS = 301,
    ZDIST_COORD_CANCEL = 302,
    ZDIST_COORD_LIST = 303,
    ZDIST_COORD_PREEMPT = 304,
    ZDIST_COORD_JOIN = 305,
    ZDIST_COORD_DRAIN = 306,
    ZDIST_COORD_RESHARD = 307,
} zdist_coord_method_t;

/* A job id is at most ZDIST_COORD_ID_MAX - 1 bytes, a state name at most
   ZDIST_COORD_STATE_MAX - 1: requests and replies beyond are refused. */
#define ZDIST_COORD_ID_MAX 64
#define ZDIST_COORD_STATE_MAX 16
/* The largest job document SUBMIT takes, and the longest base_dir. */
#define ZDIST_COORD_MAX_JOB_BYTES (16u << 20)
#define ZDIST_COORD_MAX_PATH 4096

/* One job's status. Received (zdist_coord_client_*): the strings are the
   caller's, freed by zdist_coord_job_release. Given to zdist_coord_reply_jobs
   (below): borrowed for the call, NULL name / error / detail_json sent as
   "". */
typedef struct {
    char job_id[ZDIST_COORD_ID_MAX];
    char *name;
    char state[ZDIST_COORD_STATE_MAX]; /* queued, running, done, failed, cancelled */
    int64_t step;                      /* steps completed */
    int64_t steps;                     /* steps requested; 0 until known (epochs) */
    char *error;                       /* why it failed; "" otherwise */
    /* Everything else as one JSON object: metrics {loss, examples_per_sec,
       test_accuracy, ...}, workers [...], ps [...], checkpoint, elapsed_s. */
    char *detail_json;
} zdist_coord_job_t;

/* Frees the strings of a received job and zeroes it; NULL-safe. */
ZDIST_EXPORT void zdist_coord_job_release(zdist_coord_job_t *job);
/* Releases n jobs and frees the array; NULL-safe, nulls the pointer. */
ZDIST_EXPORT void zdist_coord_jobs_free(zdist_coord_job_t **jobs_p, size_t n);
/* True for the states a job ends in: done, failed, cancelled. */
ZDIST_EXPORT bool zdist_coord_state_final(const char *state);

/* SUBMIT as its handler gets it: the document, present and at most
   ZDIST_COORD_MAX_JOB_BYTES, parsed and validated by zdist_job_parse (a bad
   job is answered INVALID_ARGUMENT "submit: <the field and the fix>" before
   the handler runs). Strings borrowed from the request; the job is the
   call's (released after the handler, or the deferred call's finish). */
typedef struct {
    const char *job_json; /* the document as sent, to keep */
    const char *base_dir; /* resolves relative data paths; NULL: as given */
    zdist_job_t job;
} zdist_coord_submit_request_t;

/* STATUS: job_id "" = the latest job; follow: a stream (see
   proto/coordinator.proto). job_id bounded by ZDIST_COORD_ID_MAX. */
typedef struct {
    const char *job_id;
    bool follow;
} zdist_coord_status_request_t;

/* CANCEL: job_id not empty, bounded by ZDIST_COORD_ID_MAX. */
typedef struct {
    const char *job_id;
} zdist_coord_cancel_request_t;

/* PREEMPT: task_type "worker" or "ps", task_index >= 0. */
typedef struct {
    const char *task_type;
    int task_index;
} zdist_coord_preempt_request_t;

/* JOIN: the worker's endpoint (tcp://host:port, at most 255 bytes); under
   CURVE the public key (Z85, 40 characters) of the certificate it serves
   with, else ""; a TF_CONFIG worker's task index (-1: `--join`, the next
   index) and its cluster's ps and worker addresses (at most
   ZDIST_COORD_JOIN_MAX_TASKS each). Decoded, the strings point into the
   request. */
#define ZDIST_COORD_JOIN_MAX_TASKS 4096
typedef struct {
    const char *endpoint;
    const char *public_key;
    int task_index;
    const char *const *ps;
    size_t num_ps;
    const char *const *workers;
    size_t num_workers;
} zdist_coord_join_request_t;

/* DRAIN: worker task_index >= 0. */
typedef struct {
    int task_index;
} zdist_coord_drain_request_t;

/* RESHARD: a job's id (not empty) and its new number of ps tasks (>= 1). */
typedef struct {
    const char *job_id;
    int num_ps;
} zdist_coord_reshard_request_t;

/* Body types for a zdist_rpc_method_t table: SUBMIT ->
   zdist_coord_submit_request_t, STATUS -> zdist_coord_status_request_t,
   CANCEL -> zdist_coord_cancel_request_t, LIST -> no fields (the body must
   decode). zdist_rpc_call_body returns the typed struct. */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_coord_body_submit;
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_coord_body_status;
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_coord_body_cancel;
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_coord_body_list;
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_coord_body_preempt;
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_coord_body_join;
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_coord_body_drain;
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_coord_body_reshard;

/* Replies, set on the call's reply (a deferred call's too, e.g. before
   zdist_rpc_call_send_partial). -ENOMEM, or -EINVAL for an id or state
   longer than its bound. STATUS and LIST answer with jobs (STATUS with
   exactly one). */
ZDIST_EXPORT int zdist_coord_reply_submit(zdist_rpc_call_t *call, const char *job_id);
ZDIST_EXPORT int zdist_coord_reply_jobs(zdist_rpc_call_t *call, const zdist_coord_job_t *jobs, size_t n);
ZDIST_EXPORT int zdist_coord_reply_cancel(zdist_rpc_call_t *call, const char *state);
/* PREEMPT: one line per running job (NULL: ""). */
ZDIST_EXPORT int zdist_coord_reply_preempt(zdist_rpc_call_t *call, const char *detail);
/* JOIN: member when the worker was already in the chief's cluster there;
   the ps tasks' endpoints. */
ZDIST_EXPORT int zdist_coord_reply_join(zdist_rpc_call_t *call, int task_index, int num_workers, bool member,
                                        const char (*ps)[256], size_t num_ps);
/* DRAIN: "draining" or "left". */
ZDIST_EXPORT int zdist_coord_reply_drain(zdist_rpc_call_t *call, const char *state);
/* RESHARD: the job's ps tasks now and one line on the move (NULL: ""). */
ZDIST_EXPORT int zdist_coord_reply_reshard(zdist_rpc_call_t *call, int num_ps, const char *detail);

/* ---- a client's side (zdist/coord_client.h sends these) ----
   Requests, strings copied into the packed body (NULL: ""); NULL when out
   of memory. They check nothing: the coordinator does. */
ZDIST_EXPORT zdist_msg_t *zdist_coord_request_submit(const char *job_json, const char *base_dir);
/* follow: a stream of the job's statuses, else one snapshot. */
ZDIST_EXPORT zdist_msg_t *zdist_coord_request_status(const char *job_id, bool follow);
ZDIST_EXPORT zdist_msg_t *zdist_coord_request_cancel(const char *job_id);
ZDIST_EXPORT zdist_msg_t *zdist_coord_request_list(void);
ZDIST_EXPORT zdist_msg_t *zdist_coord_request_preempt(const char *task_type, int task_index);
ZDIST_EXPORT zdist_msg_t *zdist_coord_request_join(const zdist_coord_join_request_t *req);
ZDIST_EXPORT zdist_msg_t *zdist_coord_request_drain(int task_index);
ZDIST_EXPORT zdist_msg_t *zdist_coord_request_reshard(const char *job_id, int num_ps);
/* Readers of an OK reply's body: 0, -EPROTO (err naming the field) for a
   body that does not decode or breaks a bound, -ENOMEM. ret is written
   only on success. */
ZDIST_EXPORT int zdist_coord_reply_read_submit(const zdist_msg_t *reply, char ret_job_id[ZDIST_COORD_ID_MAX],
                                               zdist_error_t *err);
/* STATUS: exactly one job (release it). */
ZDIST_EXPORT int zdist_coord_reply_read_job(const zdist_msg_t *reply, zdist_coord_job_t *ret, zdist_error_t *err);
/* LIST: the jobs (free with zdist_coord_jobs_free). */
ZDIST_EXPORT int zdist_coord_reply_read_jobs(const zdist_msg_t *reply, zdist_coord_job_t **ret_jobs, size_t *ret_n,
                                             zdist_error_t *err);
ZDIST_EXPORT int zdist_coord_reply_read_cancel(const zdist_msg_t *reply, char ret_state[ZDIST_COORD_STATE_MAX],
                                               zdist_error_t *err);

/* PREEMPT: the detail into ret[size] (cut to fit). */
ZDIST_EXPORT int zdist_coord_reply_read_preempt(const zdist_msg_t *reply, char *ret, size_t size,
                                                zdist_error_t *err);

/* JOIN: the index the chief gave the worker, how many it knows, whether
   it was a member already, and the ps tasks' endpoints (at most max_ps,
   each cut to 255 bytes; ret_ps may be NULL with max_ps 0). */
typedef struct {
    int task_index, num_workers;
    bool member;
    size_t num_ps;
} zdist_coord_join_reply_t;
ZDIST_EXPORT int zdist_coord_reply_read_join(const zdist_msg_t *reply, zdist_coord_join_reply_t *ret,
                                             char (*ret_ps)[256], size_t max_ps, zdist_error_t *err);
/* DRAIN: the worker's state after the request. */
ZDIST_EXPORT int zdist_coord_reply_read_drain(const zdist_msg_t *reply, char ret_state[ZDIST_COORD_STATE_MAX],
                                              zdist_error_t *err);
/* RESHARD: the job's ps tasks now, and the detail into ret_detail[size] (cut to fit). */
ZDIST_EXPORT int zdist_coord_reply_read_reshard(const zdist_msg_t *reply, int *ret_num_ps, char *ret_detail,
                                                size_t size, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
