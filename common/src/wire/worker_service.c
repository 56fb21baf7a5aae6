/* worker_service: the worker protocol's request bodies (decoded and checked into C structs) and reply
 * builders. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/job_wire.h"
#include "wire/body.h"
#include "worker.pb-c.h"
#include "zdist/worker_service.h"

/* ---- request bodies ---- */

typedef struct {
    zdist_worker_start_t start; /* first: what the handler reads */
    zdist_job_t job;
} s_start_body_t;

static int
s_decode_start(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const Zdist__Worker__StartJobRequest *q = (const void *) pb;
    s_start_body_t *b = ret;
    if (!q->job)
        return zdist_error_set(err, -EINVAL, "job: missing; send the whole job (zdist_worker_start_t.job)");
    if (q->n_ps_endpoints > ZDIST_WORKER_MAX_PS)
        return zdist_error_set(err, -EINVAL, "ps_endpoints: %zu ps tasks, at most %d", q->n_ps_endpoints,
                               ZDIST_WORKER_MAX_PS);
    for (size_t i = 0; i < q->n_ps_endpoints; i++) {
        size_t len = q->ps_endpoints[i] ? strlen(q->ps_endpoints[i]) : 0;
        if (len == 0 || len >= ZDIST_WORKER_ENDPOINT_MAX)
            return zdist_error_set(err, -EINVAL, "ps_endpoints[%zu]: %s", i,
                                   len ? "longer than 255 bytes" : "empty; give tcp://HOST:PORT");
    }
    if (q->num_workers < 0)
        return zdist_error_set(err, -EINVAL, "num_workers: %d; give the job's workers (0 = 1)",
                               q->num_workers);
    if (q->ps_timeout_ms < 0 || q->collective_timeout_ms < 0)
        return zdist_error_set(err, -EINVAL,
                               "ps_timeout_ms, collective_timeout_ms: must be >= 0 (0: the default)");
    int rc = zdist_job_from_pb(q->job, &b->job, err);
    if (rc < 0) {
        zdist_error_prefix(err, "job");
        return rc;
    }
    b->start = (zdist_worker_start_t){
        .job = &b->job,
        .worker_index = q->worker_index,
        .num_workers = q->num_workers,
        .ps_endpoints = (const char *const *) q->ps_endpoints,
        .num_ps = q->n_ps_endpoints,
        .create_variables = q->create_variables,
        .ps_timeout_ms = q->ps_timeout_ms,
        .variable_prefix = q->variable_prefix && *q->variable_prefix ? q->variable_prefix : NULL,
        .collective_timeout_ms = q->collective_timeout_ms,
        .repeat_input = q->repeat_input,
    };
    return 0;
}

static void
s_release_start(void *typed)
{
    zdist_job_release(&((s_start_body_t *) typed)->job);
}

static int
s_decode_run(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const Zdist__Worker__RunStepsRequest *q = (const void *) pb;
    if (q->steps < 0 || q->steps > ZDIST_WORKER_MAX_STEPS_PER_CALL)
        return zdist_error_set(err, -EINVAL, "steps: %lld is outside 0..%d (0: steps_per_execution)",
                               (long long) q->steps, ZDIST_WORKER_MAX_STEPS_PER_CALL);
    if (q->first_step < 0)
        return zdist_error_set(err, -EINVAL, "first_step: %lld is negative (0: none)", (long long) q->first_step);
    *(zdist_worker_run_t *) ret = (zdist_worker_run_t){q->job ? q->job : "", q->steps, q->first_step};
    return 0;
}

/* EVALUATE, STOP_JOB, GET_STATE: their one field, "job", found by name. */
static int
s_decode_job_arg(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(pb->descriptor, "job");
    if (!f || f->type != PROTOBUF_C_TYPE_STRING)
        return zdist_error_set(err, -EINVAL, "%s has no job field", pb->descriptor->name);
    const char *job = *(char *const *) (const void *) ((const char *) pb + f->offset);
    ((zdist_worker_job_arg_t *) ret)->job = job ? job : "";
    return 0;
}

static int
s_decode_connect(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const Zdist__Worker__ConnectRequest *q = (const void *) pb;
    if (q->n_endpoints > ZDIST_WORKER_MAX_RING)
        return zdist_error_set(err, -EINVAL, "endpoints: %zu, at most %d", q->n_endpoints,
                               ZDIST_WORKER_MAX_RING);
    for (size_t i = 0; i < q->n_endpoints; i++)
        if (!q->endpoints[i] || strncmp(q->endpoints[i], "tcp://", 6) != 0 || strchr(q->endpoints[i], '*') ||
            strlen(q->endpoints[i]) >= ZDIST_WORKER_ENDPOINT_MAX)
            return zdist_error_set(err, -EINVAL, "endpoints[%zu]: '%.255s' is not a tcp://HOST:PORT endpoint",
                                   i, q->endpoints[i] ? q->endpoints[i] : "");
    *(zdist_worker_connect_t *) ret =
        (zdist_worker_connect_t){q->job ? q->job : "", (const char *const *) q->endpoints, q->n_endpoints};
    return 0;
}

static int
s_decode_state(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) request;
    const Zdist__Worker__State *q = (const void *) pb;
    if (q->skip_steps < 0 || q->step < 0 || q->iterations < 0)
        return zdist_error_set(err, -EINVAL, "step, iterations and skip_steps must be >= 0");
    *(zdist_worker_state_t *) ret =
        (zdist_worker_state_t){q->job ? q->job : "", q->step, q->iterations, q->skip_steps};
    return 0;
}

const zdist_rpc_body_t zdist_worker_body_start_job = {
    &zdist__worker__start_job_request__descriptor, sizeof(s_start_body_t), s_decode_start, s_release_start};
const zdist_rpc_body_t zdist_worker_body_run_steps = {&zdist__worker__run_steps_request__descriptor,
                                                      sizeof(zdist_worker_run_t), s_decode_run, NULL};
const zdist_rpc_body_t zdist_worker_body_evaluate = {&zdist__worker__evaluate_request__descriptor,
                                                     sizeof(zdist_worker_job_arg_t), s_decode_job_arg, NULL};
const zdist_rpc_body_t zdist_worker_body_stop_job = {&zdist__worker__stop_job_request__descriptor,
                                                     sizeof(zdist_worker_job_arg_t), s_decode_job_arg, NULL};
const zdist_rpc_body_t zdist_worker_body_get_state = {&zdist__worker__get_state_request__descriptor,
                                                      sizeof(zdist_worker_job_arg_t), s_decode_job_arg, NULL};
const zdist_rpc_body_t zdist_worker_body_connect = {&zdist__worker__connect_request__descriptor,
                                                    sizeof(zdist_worker_connect_t), s_decode_connect, NULL};
const zdist_rpc_body_t zdist_worker_body_set_state = {&zdist__worker__state__descriptor,
                                                      sizeof(zdist_worker_state_t), s_decode_state, NULL};

/* ---- reply builders ---- */

static int
s_set(zdist_rpc_call_t *call, const ProtobufCMessage *body)
{
    return zdist_msg_set_body(zdist_rpc_call_reply(call), body);
}

static char *
s_arg(const char *s)
{
    return (char *) (s ? s : "");
}

int
zdist_worker_reply_started(zdist_rpc_call_t *call, const zdist_worker_started_t *r)
{
    Zdist__Worker__StartJobReply b = ZDIST__WORKER__START_JOB_REPLY__INIT;
    b.job = s_arg(r->job);
    b.strategy = s_arg(r->strategy);
    b.num_replicas = r->num_replicas;
    b.steps_per_epoch = r->steps_per_epoch;
    b.num_variables = r->num_variables;
    b.num_shards = r->num_shards;
    b.created = r->created;
    b.collective_endpoint = s_arg(r->collective_endpoint);
    return s_set(call, &b.base);
}

int
zdist_worker_reply_ran(zdist_rpc_call_t *call, const zdist_worker_ran_t *ran)
{
    size_t n = ran->num_steps, nout = 0;
    if (n > ZDIST_WORKER_MAX_STEPS_PER_CALL)
        return -EINVAL;
    for (size_t s = 0; s < n; s++) {
        if (ran->steps[s].num_outputs < 0 || ran->steps[s].num_outputs > ZDIST_WORKER_MAX_OUTPUTS)
            return -EINVAL;
        nout += (size_t) ran->steps[s].num_outputs;
    }
    Zdist__Worker__StepResult *res = calloc(n ? n : 1, sizeof *res);
    Zdist__Worker__StepResult **resp = calloc(n ? n : 1, sizeof *resp);
    Zdist__Worker__Output *outs = calloc(nout ? nout : 1, sizeof *outs);
    Zdist__Worker__Output **outp = calloc(nout ? nout : 1, sizeof *outp);
    int rc = -ENOMEM;
    if (res && resp && outs && outp) {
        size_t o = 0;
        for (size_t s = 0; s < n; s++) {
            const zdist_worker_step_t *st = &ran->steps[s];
            Zdist__Worker__StepResult *r = &res[s];
            zdist__worker__step_result__init(r);
            r->step = st->step;
            r->epoch = st->epoch;
            r->outputs = &outp[o];
            r->n_outputs = (size_t) st->num_outputs;
            for (int k = 0; k < st->num_outputs; k++, o++) {
                zdist__worker__output__init(&outs[o]);
                outs[o].name = s_arg(st->names[k]);
                outs[o].value = st->values[k];
                outp[o] = &outs[o];
            }
            resp[s] = r;
        }
        Zdist__Worker__RunStepsReply b = ZDIST__WORKER__RUN_STEPS_REPLY__INIT;
        b.n_steps = n;
        b.steps = resp;
        b.worker_step = ran->worker_step;
        b.end_of_data = ran->end_of_data;
        rc = s_set(call, &b.base);
    }
    free(res);
    free(resp);
    free(outs);
    free(outp);
    return rc;
}

int
zdist_worker_reply_evaluation(zdist_rpc_call_t *call, const zdist_evaluation_t *e)
{
    Zdist__Worker__EvaluateReply b = ZDIST__WORKER__EVALUATE_REPLY__INIT;
    b.correct = e->correct;
    b.total = e->total;
    b.loss_sum = e->loss_sum;
    b.has_correct = e->has_correct;
    int rc = s_set(call, &b.base);
    if (rc < 0 || e->scored <= 0 || !e->predictions || !e->positives)
        return rc;
    /* the exact AUC's parts: every scored example's probability and label */
    zdist_shape_t shape = {.rank = 1, .dims = {e->scored}};
    zdist_msg_t *m = zdist_rpc_call_reply(call);
    if ((rc = zdist_msg_add_tensor_copy(m, "predictions", ZDIST_DTYPE_FLOAT32, &shape, e->predictions,
                                        (size_t)e->scored * sizeof(float))) < 0 ||
        (rc = zdist_msg_add_tensor_copy(m, "positives", ZDIST_DTYPE_UINT8, &shape, e->positives,
                                        (size_t)e->scored)) < 0)
        return rc;
    return 0;
}

int
zdist_worker_reply_stopped(zdist_rpc_call_t *call, int64_t steps)
{
    Zdist__Worker__StopJobReply b = ZDIST__WORKER__STOP_JOB_REPLY__INIT;
    b.steps = steps;
    return s_set(call, &b.base);
}

int
zdist_worker_reply_status(zdist_rpc_call_t *call, const zdist_worker_status_t *st)
{
    Zdist__Worker__StatusReply b = ZDIST__WORKER__STATUS_REPLY__INIT;
    b.job = s_arg(st->job);
    b.running = st->running;
    b.steps = st->steps;
    b.last_loss = st->last_loss;
    b.strategy = s_arg(st->strategy);
    b.failed = st->failed;
    b.error = s_arg(st->error);
    b.worker_task = st->worker_task;
    return s_set(call, &b.base);
}

int
zdist_worker_reply_state(zdist_rpc_call_t *call, const zdist_worker_state_t *state)
{
    Zdist__Worker__State b = ZDIST__WORKER__STATE__INIT;
    b.job = s_arg(state->job);
    b.step = state->step;
    b.iterations = state->iterations;
    b.skip_steps = state->skip_steps;
    return s_set(call, &b.base);
}

int
zdist_worker_reply_state_set(zdist_rpc_call_t *call, int num_tensors)
{
    Zdist__Worker__SetStateReply b = ZDIST__WORKER__SET_STATE_REPLY__INIT;
    b.num_tensors = num_tensors;
    return s_set(call, &b.base);
}
