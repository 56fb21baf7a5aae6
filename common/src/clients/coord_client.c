/* coord_client: the client of the coordinator service (submit, status, cancel, list, follow). */
#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/coord_client.h"
#include "zdist/coord_service.h"
#include "zdist/sys.h"

/* ---- client ---- */

struct zdist_coord_client_t {
    zdist_rpc_client_t *rpc;
};

zdist_coord_client_t *
zdist_coord_client_new(const char *endpoint, const zdist_rpc_client_options_t *opts, zdist_error_t *err)
{
    zdist_coord_client_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->rpc = zdist_rpc_client_new(endpoint, opts, err);
    if (!self->rpc)
        zdist_coord_client_destroy(&self);
    return self;
}

void
zdist_coord_client_destroy(zdist_coord_client_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_rpc_client_destroy(&(*self_p)->rpc);
    free(*self_p);
    *self_p = NULL;
}

const char *
zdist_coord_client_endpoint(const zdist_coord_client_t *self)
{
    return zdist_rpc_client_endpoint(self->rpc);
}

/* A reply's status as the errno of the header comment, err its message. */
static int
s_status_error(const zdist_msg_t *reply, zdist_error_t *err)
{
    int st = zdist_msg_status(reply);
    if (st == ZDIST_STATUS_OK)
        return 0;
    const char *msg = zdist_msg_status_message(reply);
    return zdist_error_set(err, zdist_status_to_errno(st), "%s", *msg ? msg : zdist_status_name(st));
}

/* One call: *ret_reply (status OK) or the errno of its refusal. */
static int
s_call(zdist_coord_client_t *self, zdist_msg_t *m, int64_t timeout_ms, zdist_msg_t **ret_reply,
       zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    if (!m)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    int rc = zdist_rpc_client_call(self->rpc, &m, timeout_ms, &reply);
    if (rc < 0)
        return zdist_error_set(err, rc, "cannot send to %s: %s", zdist_coord_client_endpoint(self),
                               strerror(-rc));
    if ((rc = s_status_error(reply, err)) < 0) {
        zdist_msg_destroy(&reply);
        return rc;
    }
    *ret_reply = reply;
    return 0;
}

int
zdist_coord_client_submit(zdist_coord_client_t *self, const char *job_json, const char *base_dir,
                          int64_t timeout_ms, char ret_job_id[ZDIST_COORD_ID_MAX], zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, zdist_coord_request_submit(job_json, base_dir), timeout_ms, &reply, err);
    if (rc < 0)
        return rc;
    rc = zdist_coord_reply_read_submit(reply, ret_job_id, err);
    zdist_msg_destroy(&reply);
    return rc;
}

int
zdist_coord_client_status(zdist_coord_client_t *self, const char *job_id, int64_t timeout_ms,
                          zdist_coord_job_t *ret, zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, zdist_coord_request_status(job_id, false), timeout_ms, &reply, err);
    if (rc < 0)
        return rc;
    rc = zdist_coord_reply_read_job(reply, ret, err);
    zdist_msg_destroy(&reply);
    return rc;
}

int
zdist_coord_client_cancel(zdist_coord_client_t *self, const char *job_id, int64_t timeout_ms,
                          char ret_state[ZDIST_COORD_STATE_MAX], zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, zdist_coord_request_cancel(job_id), timeout_ms, &reply, err);
    if (rc < 0)
        return rc;
    rc = zdist_coord_reply_read_cancel(reply, ret_state, err);
    zdist_msg_destroy(&reply);
    return rc;
}

int
zdist_coord_client_drain(zdist_coord_client_t *self, int task_index, int64_t timeout_ms,
                         char ret_state[ZDIST_COORD_STATE_MAX], zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, zdist_coord_request_drain(task_index), timeout_ms, &reply, err);
    if (rc < 0)
        return rc;
    rc = zdist_coord_reply_read_drain(reply, ret_state, err);
    zdist_msg_destroy(&reply);
    return rc;
}

int
zdist_coord_client_reshard(zdist_coord_client_t *self, const char *job_id, int num_ps, int64_t timeout_ms,
                           int *ret_num_ps, char *ret_detail, size_t size, zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, zdist_coord_request_reshard(job_id, num_ps), timeout_ms, &reply, err);
    if (rc < 0)
        return rc;
    rc = zdist_coord_reply_read_reshard(reply, ret_num_ps, ret_detail, size, err);
    zdist_msg_destroy(&reply);
    return rc;
}

int
zdist_coord_client_list(zdist_coord_client_t *self, int64_t timeout_ms, zdist_coord_job_t **ret_jobs,
                        size_t *ret_n, zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, zdist_coord_request_list(), timeout_ms, &reply, err);
    if (rc < 0)
        return rc;
    rc = zdist_coord_reply_read_jobs(reply, ret_jobs, ret_n, err);
    zdist_msg_destroy(&reply);
    return rc;
}

/* ---- following a job ---- */

void
zdist_coord_follow_options_default(zdist_coord_follow_options_t *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->lost_wait_ms = 180000;
    opts->resubscribe_ms = 500;
    opts->poll_timeout_ms = 2000;
}

/* Sends STATUS (a stream with follow, else one snapshot with a deadline). */
static int
s_send_status(zdist_coord_client_t *self, const char *job_id, bool follow, int64_t timeout_ms,
              uint64_t *ret_id)
{
    zdist_msg_t *m = zdist_coord_request_status(job_id, follow);
    if (!m)
        return -ENOMEM;
    return zdist_rpc_client_send(self->rpc, &m, follow ? 0 : timeout_ms, ret_id);
}

/* Waits on the client's socket for the next completion of call `id` until
   `until` (absolute ms); completions of earlier calls are dropped.
   -EAGAIN when none came in time. */
static int
s_next_reply(zdist_coord_client_t *self, uint64_t id, int64_t until, zdist_msg_t **ret_reply)
{
    for (;;) {
        int64_t now = zdist_clock_now_ms();
        if (now >= until)
            return -EAGAIN;
        zdist_msg_t *reply = NULL;
        int rc = zdist_rpc_client_recv(self->rpc, until - now, &reply);
        if (rc == -EINTR && !zsys_interrupted)
            continue; /* a stop and continue of the process, not SIGINT or SIGTERM */
        if (rc < 0)
            return rc;
        if (id && zdist_msg_request_id(reply) == id) {
            *ret_reply = reply;
            return 0;
        }
        zdist_msg_destroy(&reply);
    }
}

int
zdist_coord_client_follow(zdist_coord_client_t *self, const char *job_id,
                          const zdist_coord_follow_options_t *opts, zdist_coord_job_t *ret_last,
                          zdist_error_t *err)
{
    zdist_coord_follow_options_t o;
    if (opts)
        o = *opts;
    else
        zdist_coord_follow_options_default(&o);
    memset(ret_last, 0, sizeof *ret_last);
    if (job_id && strnlen(job_id, ZDIST_COORD_ID_MAX) >= ZDIST_COORD_ID_MAX)
        return zdist_error_set(err, -EINVAL, "job_id: longer than %d bytes", ZDIST_COORD_ID_MAX - 1);
    int rc;
    char job[ZDIST_COORD_ID_MAX];
    snprintf(job, sizeof job, "%s", job_id ? job_id : "");
    bool follow = true; /* false: the coordinator will not stream to us; poll */
    bool lost = false;  /* told on_lost of this outage */
    int64_t heard_ms = zdist_clock_now_ms(), sent_ms = 0;
    for (;;) {
        /* One call: a stream (no deadline) or, polling, one snapshot. Not
           more often than resubscribe_ms: the wait is on the socket. */
        int64_t give_up = heard_ms + o.lost_wait_ms;
        if (sent_ms) {
            zdist_msg_t *stale = NULL;
            int64_t next = sent_ms + o.resubscribe_ms;
            rc = s_next_reply(self, 0, next < give_up ? next : give_up, &stale);
            if (rc < 0 && rc != -EAGAIN)
                return zdist_error_set(err, rc, "%s: %s", zdist_coord_client_endpoint(self), strerror(-rc));
        }
        if (zdist_clock_now_ms() >= give_up)
            break;
        uint64_t id = 0;
        rc = s_send_status(self, job, follow, o.poll_timeout_ms, &id);
        if (rc < 0)
            return zdist_error_set(err, rc, "cannot send STATUS to %s: %s", zdist_coord_client_endpoint(self),
                                   strerror(-rc));
        sent_ms = zdist_clock_now_ms();
        for (;;) {
            zdist_msg_t *reply = NULL;
            rc = s_next_reply(self, id, heard_ms + o.lost_wait_ms, &reply);
            if (rc == -EAGAIN)
                break; /* silent for lost_wait_ms */
            if (rc < 0)
                return zdist_error_set(err, rc, "%s: %s", zdist_coord_client_endpoint(self), strerror(-rc));
            bool more = zdist_msg_more(reply);
            int st = zdist_msg_status(reply);
            if (st == ZDIST_STATUS_UNAVAILABLE || st == ZDIST_STATUS_DEADLINE_EXCEEDED) {
                /* The coordinator stopped or restarts: it resumes the job; subscribe again. */
                if (!lost && o.on_lost)
                    o.on_lost(*zdist_msg_status_message(reply) ? zdist_msg_status_message(reply)
                                                               : zdist_status_name(st),
                              o.arg);
                lost = true;
                more = false;
            } else if (st == ZDIST_STATUS_RESOURCE_EXHAUSTED && follow) {
                follow = false; /* too many streams: poll */
                more = false;
            } else if (st != ZDIST_STATUS_OK) {
                rc = s_status_error(reply, err);
                zdist_msg_destroy(&reply);
                return rc;
            } else {
                zdist_coord_job_t got;
                rc = zdist_coord_reply_read_job(reply, &got, err);
                if (rc < 0) {
                    zdist_msg_destroy(&reply);
                    return rc;
                }
                zdist_coord_job_release(ret_last);
                *ret_last = got;
                heard_ms = zdist_clock_now_ms();
                lost = false;
                /* Stay with this job across restarts, also when asked for the latest. */
                memcpy(job, got.job_id, sizeof job);
                if (o.on_status)
                    o.on_status(ret_last, o.arg);
                if (zdist_coord_state_final(got.state)) {
                    zdist_msg_destroy(&reply);
                    return 0;
                }
            }
            zdist_msg_destroy(&reply);
            if (!more)
                break; /* the stream (or the poll) ended: call again */
        }
        if (rc == -EAGAIN)
            break;
    }
    return zdist_error_set(err, -ETIMEDOUT, "coordinator %s: nothing heard for %lld ms",
                           zdist_coord_client_endpoint(self), (long long) o.lost_wait_ms);
}
