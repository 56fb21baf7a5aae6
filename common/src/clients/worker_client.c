/* worker_client: the worker protocol's client — requests from C structs, pipelined, replies decoded into C
 * structs. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.pb-c.h"
#include "config/job_wire.h"
#include "wire/body.h"
#include "worker.pb-c.h"
#include "zdist/step.h"
#include "zdist/worker_client.h"

struct zdist_worker_client_t {
    zdist_rpc_client_t *rpc;
};

/* What a decoded reply holds on to: its message (strings, tensors) and body. */
typedef struct {
    zdist_msg_t *msg;
    ProtobufCMessage *pb;
    zdist_worker_step_t *steps;
} s_internal_t;

zdist_worker_client_t *
zdist_worker_client_new(const char *endpoint, const zdist_rpc_client_options_t *opts, zdist_error_t *err)
{
    zdist_worker_client_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->rpc = zdist_rpc_client_new(endpoint, opts, err);
    if (!self->rpc)
        zdist_worker_client_destroy(&self);
    return self;
}

void
zdist_worker_client_destroy(zdist_worker_client_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_rpc_client_destroy(&(*self_p)->rpc);
    free(*self_p);
    *self_p = NULL;
}

const char *
zdist_worker_client_endpoint(const zdist_worker_client_t *self)
{
    return zdist_rpc_client_endpoint(self->rpc);
}

size_t
zdist_worker_client_in_flight(const zdist_worker_client_t *self)
{
    return zdist_rpc_client_in_flight(self->rpc);
}

/* ---- requests ---- */

/* Sends a request whose body is `body` (NULL: none), with `m` when the
   caller already made the message (tensors attached). */
static int
s_send(zdist_worker_client_t *self, uint32_t method, const ProtobufCMessage *body, zdist_msg_t *m,
       int64_t timeout_ms, uint64_t *ret_id)
{
    if (!m && !(m = zdist_msg_new(method)))
        return -ENOMEM;
    if (body && zdist_msg_set_body(m, body) < 0) {
        zdist_msg_destroy(&m);
        return -ENOMEM;
    }
    uint64_t id = 0;
    int rc = zdist_rpc_client_send(self->rpc, &m, timeout_ms, &id);
    if (rc == 0 && ret_id)
        *ret_id = id;
    return rc;
}

static char *
s_arg(const char *s)
{
    return (char *) (s ? s : "");
}

int
zdist_worker_client_start_job(zdist_worker_client_t *self, const zdist_worker_start_t *req,
                              int64_t timeout_ms, uint64_t *ret_id)
{
    if (!req || !req->job || req->num_ps > ZDIST_WORKER_MAX_PS || (req->num_ps && !req->ps_endpoints))
        return -EINVAL;
    zdist_job_pb_t job;
    zdist_job_to_pb(req->job, &job);
    Zdist__Worker__StartJobRequest b = ZDIST__WORKER__START_JOB_REQUEST__INIT;
    b.job = &job.job;
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
    return s_send(self, ZDIST_WORKER_START_JOB, &b.base, NULL, timeout_ms, ret_id);
}

int
zdist_worker_client_run_steps(zdist_worker_client_t *self, const zdist_worker_run_t *req, int64_t timeout_ms,
                              uint64_t *ret_id)
{
    if (!req || !req->job)
        return -EINVAL;
    Zdist__Worker__RunStepsRequest b = ZDIST__WORKER__RUN_STEPS_REQUEST__INIT;
    b.job = (char *) req->job;
    b.steps = req->steps;
    b.first_step = req->first_step;
    return s_send(self, ZDIST_WORKER_RUN_STEPS, &b.base, NULL, timeout_ms, ret_id);
}

int
zdist_worker_client_evaluate(zdist_worker_client_t *self, const char *job, int64_t timeout_ms,
                             uint64_t *ret_id)
{
    Zdist__Worker__EvaluateRequest b = ZDIST__WORKER__EVALUATE_REQUEST__INIT;
    b.job = s_arg(job);
    return s_send(self, ZDIST_WORKER_EVALUATE, &b.base, NULL, timeout_ms, ret_id);
}

int
zdist_worker_client_stop_job(zdist_worker_client_t *self, const char *job, int64_t timeout_ms,
                             uint64_t *ret_id)
{
    Zdist__Worker__StopJobRequest b = ZDIST__WORKER__STOP_JOB_REQUEST__INIT;
    b.job = s_arg(job);
    return s_send(self, ZDIST_WORKER_STOP_JOB, &b.base, NULL, timeout_ms, ret_id);
}

int
zdist_worker_client_status(zdist_worker_client_t *self, int64_t timeout_ms, uint64_t *ret_id)
{
    return s_send(self, ZDIST_WORKER_STATUS, NULL, NULL, timeout_ms, ret_id);
}

int
zdist_worker_client_ping(zdist_worker_client_t *self, int64_t timeout_ms, uint64_t *ret_id)
{
    return s_send(self, ZDIST_METHOD_PING, NULL, NULL, timeout_ms, ret_id);
}

int
zdist_worker_client_connect(zdist_worker_client_t *self, const zdist_worker_connect_t *req,
                            int64_t timeout_ms, uint64_t *ret_id)
{
    if (!req || (req->num_endpoints && !req->endpoints))
        return -EINVAL;
    Zdist__Worker__ConnectRequest b = ZDIST__WORKER__CONNECT_REQUEST__INIT;
    b.job = s_arg(req->job);
    b.endpoints = (char **) req->endpoints;
    b.n_endpoints = req->num_endpoints;
    return s_send(self, ZDIST_WORKER_CONNECT, &b.base, NULL, timeout_ms, ret_id);
}

int
zdist_worker_client_get_state(zdist_worker_client_t *self, const char *job, int64_t timeout_ms,
                              uint64_t *ret_id)
{
    Zdist__Worker__GetStateRequest b = ZDIST__WORKER__GET_STATE_REQUEST__INIT;
    b.job = s_arg(job);
    return s_send(self, ZDIST_WORKER_GET_STATE, &b.base, NULL, timeout_ms, ret_id);
}

int
zdist_worker_client_set_state(zdist_worker_client_t *self, const zdist_worker_state_t *state,
                              const zdist_tensor_t *tensors, size_t n, int64_t timeout_ms, uint64_t *ret_id)
{
    if (!state || (n && !tensors))
        return -EINVAL;
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
    return s_send(self, ZDIST_WORKER_SET_STATE, &b.base, m, timeout_ms, ret_id);
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

const char *
zdist_worker_reply_why(const zdist_worker_reply_t *reply, char *buf, size_t size)
{
    if (!reply)
        snprintf(buf, size, "no answer");
    else
        snprintf(buf, size, "%s%s%s", zdist_status_name(reply->status), *reply->message ? ": " : "",
                 reply->message);
    return buf;
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
        ret->evaluation = (zdist_evaluation_t){b->correct, b->total, b->loss_sum, b->has_correct};
        return 0;
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

/* Takes *msg_p into a decoded reply. A body that does not decode makes the
   reply INTERNAL, saying why. */
static int
s_decode(zdist_worker_client_t *self, zdist_msg_t **msg_p, zdist_worker_reply_t *ret)
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
                             method, zdist_worker_client_endpoint(self), err.text);
        ret->status = ZDIST_STATUS_INTERNAL;
    }
    ret->message = zdist_msg_status_message(in->msg);
    return 0;
}

int
zdist_worker_client_recv(zdist_worker_client_t *self, int64_t wait_ms, zdist_worker_reply_t *ret)
{
    zdist_msg_t *msg = NULL;
    int rc = zdist_rpc_client_recv(self->rpc, wait_ms, &msg);
    return rc < 0 ? rc : s_decode(self, &msg, ret);
}

int
zdist_worker_client_wait(zdist_worker_client_t *self, uint64_t id, zdist_worker_reply_t *ret)
{
    zdist_msg_t *msg = NULL;
    int rc = zdist_rpc_client_recv_id(self->rpc, id, -1, &msg);
    return rc < 0 ? rc : s_decode(self, &msg, ret);
}

int
zdist_worker_client_wait_any(zdist_worker_client_t *const *clients, size_t n, void *also, int64_t wait_ms)
{
    zdist_rpc_client_t **rpcs = calloc(n ? n : 1, sizeof *rpcs);
    if (!rpcs)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        rpcs[i] = clients[i] ? clients[i]->rpc : NULL;
    int rc = zdist_rpc_client_wait_any(rpcs, n, also, wait_ms);
    free(rpcs);
    return rc;
}
