/* worker_service_client: the worker protocol's client side: requests from C structs, replies decoded into them. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.pb-c.h"
#include "wire/body.h"
#include "wire/job_wire.h"
#include "worker.pb-c.h"
#include "zdist/step.h"
#include "zdist/worker_service.h"

/* What a decoded reply holds on to: its message (strings, tensors) and body. */
typedef struct {
    zdist_msg_t *msg;
    ProtobufCMessage *pb;
    zdist_worker_step_t *steps;
} s_internal_t;

/* ---- requests ---- */

static char *
s_arg(const char *s)
{
    return (char *) (s ? s : "");
}

zdist_msg_t *
zdist_worker_request_start_job(const zdist_worker_start_t *req)
{
    zdist_job_pb_t job;
    Zdist__Worker__StartJobRequest b = ZDIST__WORKER__START_JOB_REQUEST__INIT;
    if (req->job) {
        zdist_job_to_pb(req->job, &job);
        b.job = &job.job;
    }
    b.worker_index = req->worker_index;
    b.num_workers = req->num_workers;
    /* Packing only reads them. */
    b.ps_endpoints = (char **) req->ps_endpoints;
    b.n_ps_endpoints = req->num_ps;
    b.create_variables = req->create_variables;
    b.ps_timeout_ms = req->ps_timeout_ms;
    b.variable_prefix = s_arg(req->variable_prefix);
    b.collective_timeout_ms = req->collective_timeout_ms;
    b.repeat_input = req->repeat_input;
    return zdist_msg_new_body(ZDIST_WORKER_START_JOB, &b.base);
}

zdist_msg_t *
zdist_worker_request_run_steps(const zdist_worker_run_t *req)
{
    Zdist__Worker__RunStepsRequest b = ZDIST__WORKER__RUN_STEPS_REQUEST__INIT;
    b.job = s_arg(req->job);
    b.steps = req->steps;
    b.first_step = req->first_step;
    return zdist_msg_new_body(ZDIST_WORKER_RUN_STEPS, &b.base);
}

zdist_msg_t *
zdist_worker_request_job(uint32_t method, const char *job)
{
    /* EVALUATE, STOP_JOB and GET_STATE requests are one message shape: a job's name. */
    Zdist__Worker__EvaluateRequest evaluate = ZDIST__WORKER__EVALUATE_REQUEST__INIT;
    Zdist__Worker__StopJobRequest stop = ZDIST__WORKER__STOP_JOB_REQUEST__INIT;
    Zdist__Worker__GetStateRequest get = ZDIST__WORKER__GET_STATE_REQUEST__INIT;
    switch (method) {
    case ZDIST_WORKER_EVALUATE:
        evaluate.job = s_arg(job);
        return zdist_msg_new_body(method, &evaluate.base);
    case ZDIST_WORKER_STOP_JOB:
        stop.job = s_arg(job);
        return zdist_msg_new_body(method, &stop.base);
    case ZDIST_WORKER_GET_STATE:
        get.job = s_arg(job);
        return zdist_msg_new_body(method, &get.base);
    default:
        return NULL;
    }
}

zdist_msg_t *
zdist_worker_request_connect(const zdist_worker_connect_t *req)
{
    Zdist__Worker__ConnectRequest b = ZDIST__WORKER__CONNECT_REQUEST__INIT;
    b.job = s_arg(req->job);
    b.endpoints = (char **) req->endpoints;
    b.n_endpoints = req->num_endpoints;
    return zdist_msg_new_body(ZDIST_WORKER_CONNECT, &b.base);
}

int
zdist_worker_request_set_state(const zdist_worker_state_t *state, const zdist_tensor_t *tensors, size_t n,
                               zdist_msg_t **ret_msg)
{
    zdist_msg_t *m = zdist_msg_new(ZDIST_WORKER_SET_STATE);
    if (!m)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const zdist_tensor_t *t = &tensors[i];
        int rc = zdist_msg_add_tensor_copy(m, t->name, t->dtype, &t->shape, t->data, t->nbytes);
        if (rc < 0) {
            zdist_msg_destroy(&m);
            return rc;
        }
    }
    Zdist__Worker__State b = ZDIST__WORKER__STATE__INIT;
    b.job = s_arg(state->job);
    b.step = state->step;
    b.iterations = state->iterations;
    b.skip_steps = state->skip_steps;
    if (zdist_msg_set_body(m, &b.base) < 0) {
        zdist_msg_destroy(&m);
        return -ENOMEM;
    }
    *ret_msg = m;
    return 0;
}

/* ---- replies ---- */

void
zdist_worker_reply_release(zdist_worker_reply_t *reply)
{
    if (!reply)
        return;
    s_internal_t *in = reply->internal;
    if (in) {
        if (in->pb)
            protobuf_c_message_free_unpacked(in->pb, NULL);
        free(in->steps);
        zdist_msg_destroy(&in->msg);
        free(in);
    }
    memset(reply, 0, sizeof *reply);
}

size_t
zdist_worker_reply_tensor_count(const zdist_worker_reply_t *reply)
{
    const s_internal_t *in = reply ? reply->internal : NULL;
    return in ? zdist_msg_tensor_count(in->msg) : 0;
}

const zdist_tensor_t *
zdist_worker_reply_tensor(const zdist_worker_reply_t *reply, size_t index)
{
    const s_internal_t *in = reply ? reply->internal : NULL;
    return in ? zdist_msg_tensor(in->msg, index) : NULL;
}

static const char *
s_str(const char *s)
{
    return s ? s : "";
}

static const ProtobufCMessageDescriptor *
s_reply_desc(uint32_t method)
{
    switch (method) {
    case ZDIST_WORKER_START_JOB:
        return &zdist__worker__start_job_reply__descriptor;
    case ZDIST_WORKER_RUN_STEPS:
        return &zdist__worker__run_steps_reply__descriptor;
    case ZDIST_WORKER_EVALUATE:
        return &zdist__worker__evaluate_reply__descriptor;
    case ZDIST_WORKER_STOP_JOB:
        return &zdist__worker__stop_job_reply__descriptor;
    case ZDIST_WORKER_STATUS:
        return &zdist__worker__status_reply__descriptor;
    case ZDIST_WORKER_CONNECT:
        return &zdist__worker__connect_reply__descriptor;
    case ZDIST_WORKER_GET_STATE:
        return &zdist__worker__state__descriptor;
    case ZDIST_WORKER_SET_STATE:
        return &zdist__worker__set_state_reply__descriptor;
    case ZDIST_METHOD_PING:
        return &zdist__ping_reply__descriptor;
    default:
        return NULL;
    }
}

static int
s_ran(const Zdist__Worker__RunStepsReply *b, s_internal_t *in, zdist_worker_ran_t *ret, zdist_error_t *err)
{
    if (b->n_steps > ZDIST_WORKER_MAX_STEPS_PER_CALL)
        return zdist_error_set(err, -EPROTO, "%zu steps, at most %d", b->n_steps,
                               ZDIST_WORKER_MAX_STEPS_PER_CALL);
    in->steps = calloc(b->n_steps ? b->n_steps : 1, sizeof *in->steps);
    if (!in->steps)
        return zdist_error_set(err, -ENOMEM, "out of memory for %zu steps", b->n_steps);
    ret->last_loss = NAN;
    for (size_t s = 0; s < b->n_steps; s++) {
        const Zdist__Worker__StepResult *r = b->steps[s];
        zdist_worker_step_t *st = &in->steps[s];
        if (r->n_outputs > ZDIST_WORKER_MAX_OUTPUTS)
            return zdist_error_set(err, -EPROTO, "step %zu has %zu outputs, at most %d", s, r->n_outputs,
                                   ZDIST_WORKER_MAX_OUTPUTS);
        st->step = r->step;
        st->epoch = r->epoch;
        st->num_outputs = (int) r->n_outputs;
        for (size_t k = 0; k < r->n_outputs; k++) {
            const char *name = s_str(r->outputs[k]->name);
            double v = r->outputs[k]->value;
            st->names[k] = name;
            st->values[k] = v;
            if (strcmp(name, ZDIST_OUTPUT_LOSS) == 0) {
                ret->loss_sum += v;
                ret->last_loss = v;
            } else if (strcmp(name, ZDIST_OUTPUT_EXAMPLES) == 0) {
                ret->examples += v;
            } else if (strcmp(name, ZDIST_OUTPUT_CORRECT) == 0) {
                ret->correct += v;
            }
        }
    }
    ret->steps = in->steps;
    ret->num_steps = b->n_steps;
    ret->worker_step = b->worker_step;
    ret->end_of_data = b->end_of_data;
    return 0;
}

/* EVALUATE's tensors, when the model gave predictions: "predictions"
   float32 [n] and "positives" uint8 [n], checked against each other. */
static int
s_scored(s_internal_t *in, zdist_evaluation_t *ev, zdist_error_t *err)
{
    size_t nt = zdist_msg_tensor_count(in->msg);
    if (nt == 0)
        return 0;
    const zdist_tensor_t *p = zdist_msg_tensor(in->msg, 0), *l = nt == 2 ? zdist_msg_tensor(in->msg, 1) : NULL;
    if (!l || p->dtype != ZDIST_DTYPE_FLOAT32 || l->dtype != ZDIST_DTYPE_UINT8 || p->shape.rank != 1 ||
        l->shape.rank != 1 || p->shape.dims[0] != l->shape.dims[0] || p->shape.dims[0] > ev->total)
        return zdist_error_set(err, -EPROTO, "EVALUATE reply: its predictions and labels do not match (%zu tensors)",
                               nt);
    ev->predictions = p->data;
    ev->positives = l->data;
    ev->scored = p->shape.dims[0];
    return 0;
}

/* The decoded body of an OK reply into ret's method part. */
static int
s_body(zdist_worker_reply_t *ret, s_internal_t *in, zdist_error_t *err)
{
    const ProtobufCMessageDescriptor *desc = s_reply_desc(ret->method);
    if (!desc)
        return 0;
    int rc = zdist_msg_unpack_body(in->msg, desc, &in->pb, err);
    if (rc < 0)
        return rc;
    switch (ret->method) {
    case ZDIST_WORKER_START_JOB: {
        const Zdist__Worker__StartJobReply *b = (const void *) in->pb;
        ret->started = (zdist_worker_started_t){
            .job = s_str(b->job),
            .strategy = s_str(b->strategy),
            .num_replicas = b->num_replicas,
            .steps_per_epoch = b->steps_per_epoch,
            .num_variables = b->num_variables,
            .num_shards = b->num_shards,
            .created = b->created,
            .collective_endpoint = s_str(b->collective_endpoint),
        };
        return 0;
    }
    case ZDIST_WORKER_RUN_STEPS:
        return s_ran((const void *) in->pb, in, &ret->ran, err);
    case ZDIST_WORKER_EVALUATE: {
        const Zdist__Worker__EvaluateReply *b = (const void *) in->pb;
        ret->evaluation = (zdist_evaluation_t){
            .correct = b->correct, .total = b->total, .loss_sum = b->loss_sum, .has_correct = b->has_correct};
        return s_scored(in, &ret->evaluation, err);
    }
    case ZDIST_WORKER_STOP_JOB:
        ret->stopped_steps = ((const Zdist__Worker__StopJobReply *) (const void *) in->pb)->steps;
        return 0;
    case ZDIST_WORKER_STATUS: {
        const Zdist__Worker__StatusReply *b = (const void *) in->pb;
        ret->worker = (zdist_worker_status_t){
            .job = s_str(b->job),
            .running = b->running,
            .failed = b->failed,
            .error = s_str(b->error),
            .strategy = s_str(b->strategy),
            .steps = b->steps,
            .last_loss = b->last_loss,
            .worker_task = b->worker_task,
        };
        return 0;
    }
    case ZDIST_WORKER_GET_STATE: {
        const Zdist__Worker__State *b = (const void *) in->pb;
        ret->state = (zdist_worker_state_t){s_str(b->job), b->step, b->iterations, b->skip_steps};
        return 0;
    }
    case ZDIST_WORKER_SET_STATE:
        ret->state_tensors = ((const Zdist__Worker__SetStateReply *) (const void *) in->pb)->num_tensors;
        return 0;
    default:
        return 0;
    }
}

int
zdist_worker_reply_decode(zdist_msg_t **msg_p, const char *endpoint, zdist_worker_reply_t *ret)
{
    memset(ret, 0, sizeof *ret);
    s_internal_t *in = calloc(1, sizeof *in);
    if (!in) {
        zdist_msg_destroy(msg_p);
        return -ENOMEM;
    }
    in->msg = *msg_p;
    *msg_p = NULL;
    ret->internal = in;
    ret->id = zdist_msg_request_id(in->msg);
    ret->method = zdist_msg_method(in->msg);
    ret->status = zdist_msg_status(in->msg);
    ret->incarnation = zdist_msg_incarnation(in->msg);
    zdist_error_t err = {0};
    if (ret->status == ZDIST_STATUS_OK && s_body(ret, in, &err) < 0) {
        uint32_t method = ret->method;
        /* Nothing half decoded stays visible. */
        memset((char *) ret + offsetof(zdist_worker_reply_t, started), 0,
               offsetof(zdist_worker_reply_t, internal) - offsetof(zdist_worker_reply_t, started));
        zdist_msg_set_status(in->msg, ZDIST_STATUS_INTERNAL, "malformed reply to method %u from %s: %s",
                             method, endpoint, err.text);
        ret->status = ZDIST_STATUS_INTERNAL;
    }
    ret->message = zdist_msg_status_message(in->msg);
    return 0;
}
