/* coord_service: coordinator.proto <-> plain C: the coordinator's request bodies and reply setters, and a
   client's requests and reply readers, and the job status record they carry. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator.pb-c.h"
#include "wire/body.h"
#include "zdist/coord_service.h"

/* ---- jobs ---- */

void
zdist_coord_job_release(zdist_coord_job_t *job)
{
    if (!job)
        return;
    free(job->name);
    free(job->error);
    free(job->detail_json);
    memset(job, 0, sizeof *job);
}

void
zdist_coord_jobs_free(zdist_coord_job_t **jobs_p, size_t n)
{
    if (!jobs_p || !*jobs_p)
        return;
    for (size_t i = 0; i < n; i++)
        zdist_coord_job_release(&(*jobs_p)[i]);
    free(*jobs_p);
    *jobs_p = NULL;
}

bool
zdist_coord_state_final(const char *state)
{
    return state &&
           (strcmp(state, "done") == 0 || strcmp(state, "failed") == 0 || strcmp(state, "cancelled") == 0);
}

/* A string field of at most size - 1 bytes: `code` (-EINVAL for a request,
   -EPROTO for a reply) naming it otherwise. */
static int
s_bounded(const char *field, const char *s, size_t size, int code, zdist_error_t *err)
{
    if (s && strnlen(s, size) >= size)
        return zdist_error_set(err, code, "%s: longer than %zu bytes", field, size - 1);
    return 0;
}

/* ---- request bodies ---- */

static int
s_decode_submit(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const Zdist__Coordinator__SubmitRequest *m = (const Zdist__Coordinator__SubmitRequest *) pb;
    zdist_coord_submit_request_t *r = ret;
    if (!m->job_json || !*m->job_json)
        return zdist_error_set(err, -EINVAL, "job_json: empty; send the job document");
    if (strnlen(m->job_json, ZDIST_COORD_MAX_JOB_BYTES + 1) > ZDIST_COORD_MAX_JOB_BYTES)
        return zdist_error_set(err, -EINVAL, "job_json: larger than %u MiB", ZDIST_COORD_MAX_JOB_BYTES >> 20);
    int rc = s_bounded("base_dir", m->base_dir, ZDIST_COORD_MAX_PATH, -EINVAL, err);
    if (rc < 0)
        return rc;
    r->job_json = m->job_json;
    r->base_dir = m->base_dir && *m->base_dir ? m->base_dir : NULL;
    return zdist_job_parse(r->job_json, r->base_dir, &r->job, err);
}

static void
s_release_submit(void *typed)
{
    zdist_job_release(&((zdist_coord_submit_request_t *) typed)->job);
}

static int
s_decode_status(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const Zdist__Coordinator__StatusRequest *m = (const Zdist__Coordinator__StatusRequest *) pb;
    zdist_coord_status_request_t *r = ret;
    int rc = s_bounded("job_id", m->job_id, ZDIST_COORD_ID_MAX, -EINVAL, err);
    if (rc < 0)
        return rc;
    r->job_id = m->job_id ? m->job_id : "";
    r->follow = m->follow;
    return 0;
}

static int
s_decode_cancel(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const Zdist__Coordinator__CancelRequest *m = (const Zdist__Coordinator__CancelRequest *) pb;
    zdist_coord_cancel_request_t *r = ret;
    if (!m->job_id || !*m->job_id)
        return zdist_error_set(err, -EINVAL, "job_id: empty; give the id of the job to cancel");
    int rc = s_bounded("job_id", m->job_id, ZDIST_COORD_ID_MAX, -EINVAL, err);
    if (rc < 0)
        return rc;
    r->job_id = m->job_id;
    return 0;
}

/* LIST has no fields: the body must only decode. */
static int
s_decode_list(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) pb;
    (void) request;
    (void) ret;
    (void) err;
    return 0;
}

static int
s_decode_preempt(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const Zdist__Coordinator__PreemptRequest *m = (const Zdist__Coordinator__PreemptRequest *) pb;
    zdist_coord_preempt_request_t *r = ret;
    if (!m->task_type || (strcmp(m->task_type, "worker") != 0 && strcmp(m->task_type, "ps") != 0))
        return zdist_error_set(err, -EINVAL, "task_type: '%.32s'; give \"worker\" or \"ps\"",
                               m->task_type ? m->task_type : "");
    if (m->task_index < 0)
        return zdist_error_set(err, -EINVAL, "task_index: %d; give the task's index (>= 0)", (int) m->task_index);
    r->task_type = m->task_type;
    r->task_index = m->task_index;
    return 0;
}

static int
s_decode_join(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const Zdist__Coordinator__JoinRequest *m = (const Zdist__Coordinator__JoinRequest *) pb;
    if (!m->endpoint || strncmp(m->endpoint, "tcp://", 6) != 0)
        return zdist_error_set(err, -EINVAL, "endpoint: '%.64s'; give where the chief reaches the worker, "
                               "tcp://HOST:PORT (zdist-worker --bind)", m->endpoint ? m->endpoint : "");
    int rc = s_bounded("endpoint", m->endpoint, 256, -EINVAL, err);
    if (rc == 0 && m->public_key && *m->public_key && strlen(m->public_key) != 40)
        rc = zdist_error_set(err, -EINVAL, "public_key: %zu characters; a CURVE key in Z85 has 40",
                             strlen(m->public_key));
    if (rc == 0 && (m->task < 0 || m->task > ZDIST_COORD_JOIN_MAX_TASKS))
        rc = zdist_error_set(err, -EINVAL, "task: %d; give the worker's TF_CONFIG index + 1 (0: the next index)",
                             (int) m->task);
    if (rc == 0 && (m->n_ps > ZDIST_COORD_JOIN_MAX_TASKS || m->n_workers > ZDIST_COORD_JOIN_MAX_TASKS))
        rc = zdist_error_set(err, -EINVAL, "ps, workers: %zu and %zu addresses; at most %d each", m->n_ps,
                             m->n_workers, ZDIST_COORD_JOIN_MAX_TASKS);
    for (size_t i = 0; rc == 0 && i < m->n_ps + m->n_workers; i++)
        rc = s_bounded(i < m->n_ps ? "ps" : "workers", i < m->n_ps ? m->ps[i] : m->workers[i - m->n_ps], 256,
                       -EINVAL, err);
    if (rc == 0) {
        zdist_coord_join_request_t *r = ret;
        r->endpoint = m->endpoint;
        r->public_key = m->public_key ? m->public_key : "";
        r->task_index = m->task - 1;
        r->ps = (const char *const *) m->ps;
        r->num_ps = m->n_ps;
        r->workers = (const char *const *) m->workers;
        r->num_workers = m->n_workers;
    }
    return rc;
}

static int
s_decode_drain(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const Zdist__Coordinator__DrainRequest *m = (const Zdist__Coordinator__DrainRequest *) pb;
    if (m->task_index < 0)
        return zdist_error_set(err, -EINVAL, "task_index: %d; give the worker's index (>= 0)", (int) m->task_index);
    ((zdist_coord_drain_request_t *) ret)->task_index = m->task_index;
    return 0;
}

static int
s_decode_reshard(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const Zdist__Coordinator__ReshardRequest *m = (const Zdist__Coordinator__ReshardRequest *) pb;
    zdist_coord_reshard_request_t *r = ret;
    if (!m->job_id || !*m->job_id)
        return zdist_error_set(err, -EINVAL, "job_id: empty; give the id of the running job to reshard");
    int rc = s_bounded("job_id", m->job_id, ZDIST_COORD_ID_MAX, -EINVAL, err);
    if (rc < 0)
        return rc;
    if (m->num_ps < 1)
        return zdist_error_set(err, -EINVAL, "num_ps: %d; a job needs at least one ps task (--ps N, N >= 1)",
                               (int) m->num_ps);
    r->job_id = m->job_id;
    r->num_ps = m->num_ps;
    return 0;
}

const zdist_rpc_body_t zdist_coord_body_submit = {&zdist__coordinator__submit_request__descriptor,
                                                  sizeof(zdist_coord_submit_request_t), s_decode_submit,
                                                  s_release_submit};
const zdist_rpc_body_t zdist_coord_body_status = {&zdist__coordinator__status_request__descriptor,
                                                  sizeof(zdist_coord_status_request_t), s_decode_status,
                                                  NULL};
const zdist_rpc_body_t zdist_coord_body_cancel = {&zdist__coordinator__cancel_request__descriptor,
                                                  sizeof(zdist_coord_cancel_request_t), s_decode_cancel,
                                                  NULL};
const zdist_rpc_body_t zdist_coord_body_list = {&zdist__coordinator__list_request__descriptor, 0,
                                                s_decode_list, NULL};
const zdist_rpc_body_t zdist_coord_body_join = {&zdist__coordinator__join_request__descriptor,
                                                sizeof(zdist_coord_join_request_t), s_decode_join, NULL};
const zdist_rpc_body_t zdist_coord_body_drain = {&zdist__coordinator__drain_request__descriptor,
                                                 sizeof(zdist_coord_drain_request_t), s_decode_drain, NULL};
const zdist_rpc_body_t zdist_coord_body_reshard = {&zdist__coordinator__reshard_request__descriptor,
                                                   sizeof(zdist_coord_reshard_request_t), s_decode_reshard,
                                                   NULL};
const zdist_rpc_body_t zdist_coord_body_preempt = {&zdist__coordinator__preempt_request__descriptor,
                                                   sizeof(zdist_coord_preempt_request_t), s_decode_preempt,
                                                   NULL};

/* ---- replies ---- */

int
zdist_coord_reply_submit(zdist_rpc_call_t *call, const char *job_id)
{
    int rc = s_bounded("job_id", job_id, ZDIST_COORD_ID_MAX, -EINVAL, NULL);
    if (rc < 0)
        return rc;
    Zdist__Coordinator__SubmitReply r = ZDIST__COORDINATOR__SUBMIT_REPLY__INIT;
    r.job_id = (char *) job_id;
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &r.base);
}

static char *
s_or_empty(char *s)
{
    return s ? s : (char *) "";
}

int
zdist_coord_reply_jobs(zdist_rpc_call_t *call, const zdist_coord_job_t *jobs, size_t n)
{
    Zdist__Coordinator__JobStatus *st = calloc(n ? n : 1, sizeof *st);
    Zdist__Coordinator__JobStatus **sp = calloc(n ? n : 1, sizeof *sp);
    int rc = st && sp ? 0 : -ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        /* The structs' arrays are bounded by their type; only their NULs can be missing. */
        if (strnlen(jobs[i].job_id, sizeof jobs[i].job_id) == sizeof jobs[i].job_id ||
            strnlen(jobs[i].state, sizeof jobs[i].state) == sizeof jobs[i].state) {
            rc = -EINVAL;
            break;
        }
        zdist__coordinator__job_status__init(&st[i]);
        st[i].job_id = (char *) jobs[i].job_id;
        st[i].name = s_or_empty(jobs[i].name);
        st[i].state = (char *) jobs[i].state;
        st[i].step = jobs[i].step;
        st[i].steps = jobs[i].steps;
        st[i].error = s_or_empty(jobs[i].error);
        st[i].detail_json = s_or_empty(jobs[i].detail_json);
        sp[i] = &st[i];
    }
    if (rc == 0) {
        Zdist__Coordinator__StatusReply reply = ZDIST__COORDINATOR__STATUS_REPLY__INIT;
        reply.n_jobs = n;
        reply.jobs = sp;
        rc = zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
    }
    free(st);
    free(sp);
    return rc;
}

int
zdist_coord_reply_cancel(zdist_rpc_call_t *call, const char *state)
{
    int rc = s_bounded("state", state, ZDIST_COORD_STATE_MAX, -EINVAL, NULL);
    if (rc < 0)
        return rc;
    Zdist__Coordinator__CancelReply r = ZDIST__COORDINATOR__CANCEL_REPLY__INIT;
    r.state = (char *) state;
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &r.base);
}

int
zdist_coord_reply_preempt(zdist_rpc_call_t *call, const char *detail)
{
    Zdist__Coordinator__PreemptReply r = ZDIST__COORDINATOR__PREEMPT_REPLY__INIT;
    r.detail = (char *) (detail ? detail : "");
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &r.base);
}

int
zdist_coord_reply_join(zdist_rpc_call_t *call, int task_index, int num_workers, bool member, const char (*ps)[256],
                       size_t num_ps)
{
    Zdist__Coordinator__JoinReply r = ZDIST__COORDINATOR__JOIN_REPLY__INIT;
    r.task_index = task_index;
    r.num_workers = num_workers;
    r.member = member;
    char **eps = num_ps ? calloc(num_ps, sizeof *eps) : NULL;
    if (num_ps && !eps)
        return -ENOMEM;
    for (size_t i = 0; i < num_ps; i++)
        eps[i] = (char *) ps[i];
    r.ps = eps;
    r.n_ps = num_ps;
    int rc = zdist_msg_set_body(zdist_rpc_call_reply(call), &r.base);
    free(eps);
    return rc;
}

int
zdist_coord_reply_drain(zdist_rpc_call_t *call, const char *state)
{
    int rc = s_bounded("state", state, ZDIST_COORD_STATE_MAX, -EINVAL, NULL);
    if (rc < 0)
        return rc;
    Zdist__Coordinator__DrainReply r = ZDIST__COORDINATOR__DRAIN_REPLY__INIT;
    r.state = (char *) state;
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &r.base);
}

int
zdist_coord_reply_reshard(zdist_rpc_call_t *call, int num_ps, const char *detail)
{
    Zdist__Coordinator__ReshardReply r = ZDIST__COORDINATOR__RESHARD_REPLY__INIT;
    r.num_ps = num_ps;
    r.detail = (char *) (detail ? detail : "");
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &r.base);
}

/* ---- a client's side ---- */

zdist_msg_t *
zdist_coord_request_submit(const char *job_json, const char *base_dir)
{
    Zdist__Coordinator__SubmitRequest req = ZDIST__COORDINATOR__SUBMIT_REQUEST__INIT;
    req.job_json = (char *) (job_json ? job_json : "");
    req.base_dir = (char *) (base_dir ? base_dir : "");
    return zdist_msg_new_body(ZDIST_COORD_SUBMIT, &req.base);
}

zdist_msg_t *
zdist_coord_request_status(const char *job_id, bool follow)
{
    Zdist__Coordinator__StatusRequest req = ZDIST__COORDINATOR__STATUS_REQUEST__INIT;
    req.job_id = (char *) (job_id ? job_id : "");
    req.follow = follow;
    return zdist_msg_new_body(ZDIST_COORD_STATUS, &req.base);
}

zdist_msg_t *
zdist_coord_request_cancel(const char *job_id)
{
    Zdist__Coordinator__CancelRequest req = ZDIST__COORDINATOR__CANCEL_REQUEST__INIT;
    req.job_id = (char *) (job_id ? job_id : "");
    return zdist_msg_new_body(ZDIST_COORD_CANCEL, &req.base);
}

zdist_msg_t *
zdist_coord_request_list(void)
{
    Zdist__Coordinator__ListRequest req = ZDIST__COORDINATOR__LIST_REQUEST__INIT;
    return zdist_msg_new_body(ZDIST_COORD_LIST, &req.base);
}

zdist_msg_t *
zdist_coord_request_preempt(const char *task_type, int task_index)
{
    Zdist__Coordinator__PreemptRequest req = ZDIST__COORDINATOR__PREEMPT_REQUEST__INIT;
    req.task_type = (char *) (task_type ? task_type : "");
    req.task_index = task_index;
    return zdist_msg_new_body(ZDIST_COORD_PREEMPT, &req.base);
}

zdist_msg_t *
zdist_coord_request_join(const zdist_coord_join_request_t *r)
{
    Zdist__Coordinator__JoinRequest req = ZDIST__COORDINATOR__JOIN_REQUEST__INIT;
    req.endpoint = (char *) (r->endpoint ? r->endpoint : "");
    req.public_key = (char *) (r->public_key ? r->public_key : "");
    req.task = r->task_index >= 0 ? r->task_index + 1 : 0;
    req.ps = (char **) r->ps;
    req.n_ps = r->num_ps;
    req.workers = (char **) r->workers;
    req.n_workers = r->num_workers;
    return zdist_msg_new_body(ZDIST_COORD_JOIN, &req.base);
}

zdist_msg_t *
zdist_coord_request_drain(int task_index)
{
    Zdist__Coordinator__DrainRequest req = ZDIST__COORDINATOR__DRAIN_REQUEST__INIT;
    req.task_index = task_index;
    return zdist_msg_new_body(ZDIST_COORD_DRAIN, &req.base);
}

zdist_msg_t *
zdist_coord_request_reshard(const char *job_id, int num_ps)
{
    Zdist__Coordinator__ReshardRequest req = ZDIST__COORDINATOR__RESHARD_REQUEST__INIT;
    req.job_id = (char *) (job_id ? job_id : "");
    req.num_ps = num_ps;
    return zdist_msg_new_body(ZDIST_COORD_RESHARD, &req.base);
}

static int
s_read_submit(const ProtobufCMessage *pb, void *arg, zdist_error_t *err)
{
    const Zdist__Coordinator__SubmitReply *r = (const Zdist__Coordinator__SubmitReply *) pb;
    if (!r->job_id || !*r->job_id)
        return zdist_error_set(err, -EPROTO, "SUBMIT reply: no job_id");
    int rc = s_bounded("SUBMIT reply: job_id", r->job_id, ZDIST_COORD_ID_MAX, -EPROTO, err);
    if (rc == 0)
        memcpy(arg, r->job_id, strlen(r->job_id) + 1);
    return rc;
}

int
zdist_coord_reply_read_submit(const zdist_msg_t *reply, char ret_job_id[ZDIST_COORD_ID_MAX], zdist_error_t *err)
{
    char id[ZDIST_COORD_ID_MAX];
    int rc = zdist_msg_read_body(reply, &zdist__coordinator__submit_reply__descriptor, s_read_submit, id, err);
    if (rc == 0)
        memcpy(ret_job_id, id, sizeof id);
    return rc;
}

/* Copies a received job into *ret (zeroed; released on error). */
static int
s_job_from_pb(const Zdist__Coordinator__JobStatus *pb, zdist_coord_job_t *ret, zdist_error_t *err)
{
    memset(ret, 0, sizeof *ret);
    int rc = s_bounded("STATUS reply: job_id", pb->job_id, ZDIST_COORD_ID_MAX, -EPROTO, err);
    if (rc == 0)
        rc = s_bounded("STATUS reply: state", pb->state, ZDIST_COORD_STATE_MAX, -EPROTO, err);
    if (rc < 0)
        return rc;
    snprintf(ret->job_id, sizeof ret->job_id, "%s", pb->job_id ? pb->job_id : "");
    snprintf(ret->state, sizeof ret->state, "%s", pb->state ? pb->state : "");
    ret->step = pb->step;
    ret->steps = pb->steps;
    ret->name = strdup(pb->name ? pb->name : "");
    ret->error = strdup(pb->error ? pb->error : "");
    ret->detail_json = strdup(pb->detail_json ? pb->detail_json : "");
    if (!ret->name || !ret->error || !ret->detail_json) {
        zdist_coord_job_release(ret);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

/* A STATUS / LIST reply's jobs. */
typedef struct {
    bool one; /* STATUS: exactly one job */
    zdist_coord_job_t *jobs;
    size_t n;
} s_jobs_read_t;

static int
s_read_jobs(const ProtobufCMessage *pb, void *arg, zdist_error_t *err)
{
    const Zdist__Coordinator__StatusReply *r = (const Zdist__Coordinator__StatusReply *) pb;
    s_jobs_read_t *out = arg;
    if (out->one && r->n_jobs != 1)
        return zdist_error_set(err, -EPROTO, "STATUS reply: %zu jobs instead of one", r->n_jobs);
    zdist_coord_job_t *jobs = calloc(r->n_jobs ? r->n_jobs : 1, sizeof *jobs);
    if (!jobs)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < r->n_jobs; i++) {
        int rc = s_job_from_pb(r->jobs[i], &jobs[i], err);
        if (rc < 0) {
            zdist_coord_jobs_free(&jobs, i);
            return rc;
        }
    }
    out->jobs = jobs;
    out->n = r->n_jobs;
    return 0;
}

int
zdist_coord_reply_read_job(const zdist_msg_t *reply, zdist_coord_job_t *ret, zdist_error_t *err)
{
    s_jobs_read_t got = {.one = true};
    int rc =
        zdist_msg_read_body(reply, &zdist__coordinator__status_reply__descriptor, s_read_jobs, &got, err);
    if (rc < 0)
        return rc;
    *ret = got.jobs[0];
    free(got.jobs);
    return 0;
}

int
zdist_coord_reply_read_jobs(const zdist_msg_t *reply, zdist_coord_job_t **ret_jobs, size_t *ret_n,
                            zdist_error_t *err)
{
    s_jobs_read_t got = {.one = false};
    int rc = zdist_msg_read_body(reply, &zdist__coordinator__status_reply__descriptor, s_read_jobs, &got, err);
    if (rc < 0)
        return rc;
    *ret_jobs = got.jobs;
    *ret_n = got.n;
    return 0;
}

static int
s_read_cancel(const ProtobufCMessage *pb, void *arg, zdist_error_t *err)
{
    const Zdist__Coordinator__CancelReply *r = (const Zdist__Coordinator__CancelReply *) pb;
    int rc = s_bounded("CANCEL reply: state", r->state, ZDIST_COORD_STATE_MAX, -EPROTO, err);
    if (rc == 0)
        snprintf(arg, ZDIST_COORD_STATE_MAX, "%s", r->state ? r->state : "");
    return rc;
}

int
zdist_coord_reply_read_cancel(const zdist_msg_t *reply, char ret_state[ZDIST_COORD_STATE_MAX], zdist_error_t *err)
{
    char state[ZDIST_COORD_STATE_MAX];
    int rc = zdist_msg_read_body(reply, &zdist__coordinator__cancel_reply__descriptor, s_read_cancel, state, err);
    if (rc == 0)
        memcpy(ret_state, state, sizeof state);
    return rc;
}

/* PREEMPT's detail into the caller's buffer. */
typedef struct {
    char *buf;
    size_t size;
} s_text_t;

static int
s_read_preempt(const ProtobufCMessage *pb, void *arg, zdist_error_t *err)
{
    (void) err;
    const Zdist__Coordinator__PreemptReply *r = (const Zdist__Coordinator__PreemptReply *) pb;
    s_text_t *out = arg;
    snprintf(out->buf, out->size, "%s", r->detail ? r->detail : "");
    return 0;
}

int
zdist_coord_reply_read_preempt(const zdist_msg_t *reply, char *ret, size_t size, zdist_error_t *err)
{
    if (!ret || size == 0)
        return -EINVAL;
    s_text_t out = {ret, size};
    return zdist_msg_read_body(reply, &zdist__coordinator__preempt_reply__descriptor, s_read_preempt, &out, err);
}

typedef struct {
    zdist_coord_join_reply_t *ret;
    char (*ps)[256];
    size_t max_ps;
} s_join_out_t;

static int
s_read_join(const ProtobufCMessage *pb, void *arg, zdist_error_t *err)
{
    const Zdist__Coordinator__JoinReply *r = (const Zdist__Coordinator__JoinReply *) pb;
    if (r->task_index < 0 || r->num_workers <= r->task_index)
        return zdist_error_set(err, -EPROTO, "JOIN reply: task_index %d of %d workers", (int) r->task_index,
                               (int) r->num_workers);
    s_join_out_t *out = arg;
    out->ret->task_index = r->task_index;
    out->ret->num_workers = r->num_workers;
    out->ret->member = r->member;
    out->ret->num_ps = r->n_ps < out->max_ps ? r->n_ps : out->max_ps;
    for (size_t i = 0; i < out->ret->num_ps; i++)
        snprintf(out->ps[i], sizeof out->ps[i], "%s", r->ps[i] ? r->ps[i] : "");
    return 0;
}

int
zdist_coord_reply_read_join(const zdist_msg_t *reply, zdist_coord_join_reply_t *ret, char (*ret_ps)[256],
                            size_t max_ps, zdist_error_t *err)
{
    s_join_out_t out = {ret, ret_ps, ret_ps ? max_ps : 0};
    return zdist_msg_read_body(reply, &zdist__coordinator__join_reply__descriptor, s_read_join, &out, err);
}

static int
s_read_drain(const ProtobufCMessage *pb, void *arg, zdist_error_t *err)
{
    const Zdist__Coordinator__DrainReply *r = (const Zdist__Coordinator__DrainReply *) pb;
    int rc = s_bounded("DRAIN reply: state", r->state, ZDIST_COORD_STATE_MAX, -EPROTO, err);
    if (rc == 0)
        snprintf(arg, ZDIST_COORD_STATE_MAX, "%s", r->state ? r->state : "");
    return rc;
}

int
zdist_coord_reply_read_drain(const zdist_msg_t *reply, char ret_state[ZDIST_COORD_STATE_MAX], zdist_error_t *err)
{
    char state[ZDIST_COORD_STATE_MAX];
    int rc = zdist_msg_read_body(reply, &zdist__coordinator__drain_reply__descriptor, s_read_drain, state, err);
    if (rc == 0)
        memcpy(ret_state, state, sizeof state);
    return rc;
}

typedef struct {
    int num_ps;
    char *detail;
    size_t size;
} s_reshard_read_t;

static int
s_read_reshard(const ProtobufCMessage *pb, void *arg, zdist_error_t *err)
{
    const Zdist__Coordinator__ReshardReply *r = (const Zdist__Coordinator__ReshardReply *) pb;
    s_reshard_read_t *out = arg;
    if (r->num_ps < 1)
        return zdist_error_set(err, -EPROTO, "RESHARD reply: num_ps %d", (int) r->num_ps);
    out->num_ps = r->num_ps;
    if (out->size)
        snprintf(out->detail, out->size, "%s", r->detail ? r->detail : "");
    return 0;
}

int
zdist_coord_reply_read_reshard(const zdist_msg_t *reply, int *ret_num_ps, char *ret_detail, size_t size,
                               zdist_error_t *err)
{
    s_reshard_read_t out = {0, ret_detail, ret_detail ? size : 0};
    int rc = zdist_msg_read_body(reply, &zdist__coordinator__reshard_reply__descriptor, s_read_reshard, &out, err);
    if (rc == 0)
        *ret_num_ps = out.num_ps;
    return rc;
}
