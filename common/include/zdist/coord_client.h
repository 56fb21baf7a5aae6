/* zdist coordinator client: proto/coordinator.proto as plain C — its methods, a job's status, and the client
   of `zdist submit`, `status` and `cancel`.

   The service of zdist-coordinator: SUBMIT a job document, STATUS of a
   job (one snapshot, or a stream with follow), CANCEL a job, LIST every
   job. Everything protobuf about it stays in libzdist; the methods, limits
   and a job's status record (zdist_coord_job_t), with the coordinator's
   method table and replies, are in zdist/coord_service.h, which this header
   includes.

   Errors: functions return 0 or a negative errno. When the coordinator
   refused a call, the errno is its status's (zdist_status_to_errno:
   INVALID_ARGUMENT -EINVAL, NOT_FOUND -ENOENT, FAILED_PRECONDITION -EBUSY,
   RESOURCE_EXHAUSTED -ENOSPC, DEADLINE_EXCEEDED -ETIMEDOUT, UNAVAILABLE
   -ENOTCONN...; zdist_status_from_errno gives the status back) and
   err->text is the coordinator's message as it sent it. A reply that does
   not decode is -EPROTO. err may be NULL.

   Threads: a zdist_coord_client_t, like the rpc client under it, belongs to
   one thread. */
#ifndef ZDIST_COORD_CLIENT_H
#define ZDIST_COORD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/coord_service.h"
#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/rpc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- client ---- */

typedef struct zdist_coord_client_t zdist_coord_client_t;

/* Connects to the coordinator at endpoint ("tcp://host:port";
   asynchronously: it may come up later) with the rpc client's options
   (NULL: zdist_rpc_client_options_default, e.g. CURVE keys). NULL with err
   on a bad endpoint. */
ZDIST_EXPORT zdist_coord_client_t *
zdist_coord_client_new(const char *endpoint, const zdist_rpc_client_options_t *opts, zdist_error_t *err);
ZDIST_EXPORT void zdist_coord_client_destroy(zdist_coord_client_t **self_p);
ZDIST_EXPORT const char *zdist_coord_client_endpoint(const zdist_coord_client_t *self);

/* Submits the job document (base_dir: the job file's directory, resolving
   its relative data paths on the coordinator; NULL: as given). Waits up to
   timeout_ms. Writes the new job's id to ret_job_id. A bad job: -EINVAL
   with the coordinator's message naming the field. */
ZDIST_EXPORT int zdist_coord_client_submit(zdist_coord_client_t *self, const char *job_json,
                                           const char *base_dir, int64_t timeout_ms,
                                           char ret_job_id[ZDIST_COORD_ID_MAX], zdist_error_t *err);
/* One STATUS snapshot of job_id ("" = the latest job) into *ret (the
   caller releases it; written only on success). */
ZDIST_EXPORT int zdist_coord_client_status(zdist_coord_client_t *self, const char *job_id, int64_t timeout_ms,
                                           zdist_coord_job_t *ret, zdist_error_t *err);
/* Cancels job_id; ret_state: its state after the request ("cancelling"
   for the running job, "cancelled" for a queued one, else its final state). */
ZDIST_EXPORT int zdist_coord_client_cancel(zdist_coord_client_t *self, const char *job_id, int64_t timeout_ms,
                                           char ret_state[ZDIST_COORD_STATE_MAX], zdist_error_t *err);
/* DRAIN of worker:task_index (elastic workers): ret_state "draining" or "left". */
ZDIST_EXPORT int zdist_coord_client_drain(zdist_coord_client_t *self, int task_index, int64_t timeout_ms,
                                          char ret_state[ZDIST_COORD_STATE_MAX], zdist_error_t *err);
/* RESHARD: job_id's variables moved onto the cluster's first num_ps ps
   tasks at its next step boundary; returns once it trains there
   (ret_num_ps: its ps tasks now; ret_detail: the move, cut to size). */
ZDIST_EXPORT int zdist_coord_client_reshard(zdist_coord_client_t *self, const char *job_id, int num_ps,
                                            int64_t timeout_ms, int *ret_num_ps, char *ret_detail, size_t size,
                                            zdist_error_t *err);
/* Every job, without per-task detail: *ret_jobs (free with
   zdist_coord_jobs_free) and *ret_n. */
ZDIST_EXPORT int zdist_coord_client_list(zdist_coord_client_t *self, int64_t timeout_ms,
                                         zdist_coord_job_t **ret_jobs, size_t *ret_n, zdist_error_t *err);

/* Following a job (zdist_coord_client_follow). */
typedef struct {
    /* Give up when nothing came from the coordinator for this long (a
       stream hears at least every 5 s; default 180000). */
    int64_t lost_wait_ms;
    /* At most one STATUS call this often: subscribing again after a loss,
       or polling when the coordinator will not stream (default 500). */
    int64_t resubscribe_ms;
    /* Deadline of one poll when polling (default 2000). */
    int64_t poll_timeout_ms;
    /* Each status received, the last one included (may be NULL). The job
       is borrowed for the call. */
    void (*on_status)(const zdist_coord_job_t *job, void *arg);
    /* The coordinator stopped answering (why: its message or the status
       name); once per outage, until a status comes again (may be NULL). */
    void (*on_lost)(const char *why, void *arg);
    void *arg;
} zdist_coord_follow_options_t;

ZDIST_EXPORT void zdist_coord_follow_options_default(zdist_coord_follow_options_t *opts);

/* Follows job_id ("" = the latest job, then that job) through the STATUS
   stream until it is done, failed or cancelled. When the stream breaks
   (the coordinator stopped or restarts) it subscribes again; with too many
   streams open at the coordinator it polls. Waits only on the client's
   socket. *ret_last (the caller releases it; job_id "" when nothing came)
   is the last status received. Returns 0 when the job ended (its state in
   *ret_last), -ETIMEDOUT when the coordinator was silent for lost_wait_ms,
   -EINTR after SIGINT or SIGTERM (czmq's zsys_interrupted), or the error
   of a refused call (-ENOENT: no such job...). opts NULL: the defaults. */
ZDIST_EXPORT int zdist_coord_client_follow(zdist_coord_client_t *self, const char *job_id,
                                           const zdist_coord_follow_options_t *opts,
                                           zdist_coord_job_t *ret_last, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
