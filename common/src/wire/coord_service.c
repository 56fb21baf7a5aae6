/* coord_service: coordinator.proto's request bodies (decoded and checked into C structs) and reply setters.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator.pb-c.h"
#include "wire/body.h"
#include "zdist/coord_service.h"

/* A string field of at most size - 1 bytes: -EINVAL naming it otherwise. */
static int
s_bounded(const char *field, const char *s, size_t size, zdist_error_t *err)
{
    if (s && strnlen(s, size) >= size)
        return zdist_error_set(err, -EINVAL, "%s: longer than %zu bytes", field, size - 1);
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
    int rc = s_bounded("base_dir", m->base_dir, ZDIST_COORD_MAX_PATH, err);
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
    int rc = s_bounded("job_id", m->job_id, ZDIST_COORD_ID_MAX, err);
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
    int rc = s_bounded("job_id", m->job_id, ZDIST_COORD_ID_MAX, err);
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

/* ---- replies ---- */

int
zdist_coord_reply_submit(zdist_rpc_call_t *call, const char *job_id)
{
    int rc = s_bounded("job_id", job_id, ZDIST_COORD_ID_MAX, NULL);
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
    int rc = s_bounded("state", state, ZDIST_COORD_STATE_MAX, NULL);
    if (rc < 0)
        return rc;
    Zdist__Coordinator__CancelReply r = ZDIST__COORDINATOR__CANCEL_REPLY__INIT;
    r.state = (char *) state;
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &r.base);
}
