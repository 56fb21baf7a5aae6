/* CUnit suite: the worker protocol — worker_client against a real RPC server using worker_service's bodies
 * and builders. */
#include <czmq.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "testutil.h"
#include "zdist/coordinator.h"
#include "zdist/job.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"
#include "zdist/worker_client.h"
#include "zdist/worker_service.h"

#define S_JOB                                                                                                \
    "{\"name\": \"wc\", \"strategy\": {\"type\": \"multi_worker_mirrored\"}, \"model\": {\"name\": "         \
    "\"mlp\"},"                                                                                              \
    " \"optimizer\": {\"type\": \"adam\"}, \"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": " \
    "64,"                                                                                                    \
    " \"test_n\": 16, \"dim\": 4, \"classes\": 2}, \"global_batch_size\": 8}, \"epochs\": 2,"                \
    " \"checkpoint\": {\"every_steps\": 10, \"keep\": 2}}"

/* What the handlers saw (written on the server's thread before it replies). */
typedef struct {
    atomic_int calls;
    char job[64], model[64], prefix[64], ps1[128], ep1[128], tensor0[64];
    int worker_index, num_workers, ckpt_keep, ntensors;
    size_t num_ps, num_endpoints;
    bool create, repeat;
    int64_t steps, step, iterations, skip, first_step;
    float tensor0_first;
} s_seen_t;

static s_seen_t s_seen;

static void
s_copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "(null)");
}

static int
s_start(zdist_rpc_call_t *call, void *state)
{
    (void) state;
    const zdist_worker_start_t *q = zdist_rpc_call_body(call);
    atomic_fetch_add(&s_seen.calls, 1);
    s_copy(s_seen.job, sizeof s_seen.job, q->job->name);
    s_copy(s_seen.model, sizeof s_seen.model, q->job->model);
    s_copy(s_seen.prefix, sizeof s_seen.prefix, q->variable_prefix);
    s_copy(s_seen.ps1, sizeof s_seen.ps1, q->num_ps > 1 ? q->ps_endpoints[1] : NULL);
    s_seen.ckpt_keep = (int) q->job->ckpt_keep;
    s_seen.worker_index = q->worker_index;
    s_seen.num_workers = q->num_workers;
    s_seen.num_ps = q->num_ps;
    s_seen.create = q->create_variables;
    s_seen.repeat = q->repeat_input;
    zdist_worker_started_t r = {.job = q->job->name,
                                .strategy = "multi_worker_mirrored",
                                .num_replicas = 2,
                                .steps_per_epoch = 4,
                                .num_variables = 6,
                                .created = true,
                                .collective_endpoint = "tcp://127.0.0.1:9"};
    return zdist_worker_reply_started(call, &r);
}

static int
s_run(zdist_rpc_call_t *call, void *state)
{
    (void) state;
    const zdist_worker_run_t *q = zdist_rpc_call_body(call);
    atomic_fetch_add(&s_seen.calls, 1);
    s_seen.steps = q->steps;
    s_seen.first_step = q->first_step;
    if (strcmp(q->job, "bad-reply") == 0) {
        /* One output more than a step may carry: the client refuses it. No
           builder makes such a reply, so it is encoded here by hand
           (proto/worker.proto): RunStepsReply { steps = 1: StepResult {
           outputs = 3: Output { name = 1: "x" } x 17 } }. */
        _Static_assert(5 * (ZDIST_WORKER_MAX_OUTPUTS + 1) < 128, "the step's length fits one byte");
        uint8_t b[2 + 5 * (ZDIST_WORKER_MAX_OUTPUTS + 1)];
        b[0] = 0x0a; /* field 1, length-delimited */
        b[1] = 5 * (ZDIST_WORKER_MAX_OUTPUTS + 1);
        for (int k = 0; k <= ZDIST_WORKER_MAX_OUTPUTS; k++)
            memcpy(&b[2 + 5 * k], "\x1a\x03\x0a\x01x", 5); /* field 3 holding field 1 = "x" */
        return zdist_msg_set_body_bytes(zdist_rpc_call_reply(call), b, sizeof b);
    }
    zdist_worker_step_t steps[3] = {
        {.step = 1,
         .epoch = 0,
         .num_outputs = 3,
         .names = {"loss", "examples", "correct"},
         .values = {0.5, 8, 6}},
        {.step = 2, .epoch = 0, .num_outputs = 2, .names = {"examples", "loss"}, .values = {8, 0.25}},
        {.step = 3, .epoch = 1, .num_outputs = 2, .names = {"loss", "aux"}, .values = {0.125, 42}},
    };
    zdist_worker_ran_t ran = {.steps = steps, .num_steps = 3, .worker_step = 3, .end_of_data = true};
    return zdist_worker_reply_ran(call, &ran);
}

static int
s_job_arg(zdist_rpc_call_t *call, void *state)
{
    (void) state;
    const zdist_worker_job_arg_t *q = zdist_rpc_call_body(call);
    atomic_fetch_add(&s_seen.calls, 1);
    s_copy(s_seen.job, sizeof s_seen.job, q->job);
    switch (zdist_rpc_call_method(call)) {
    case ZDIST_WORKER_EVALUATE: {
        zdist_evaluation_t e = {.correct = 7, .total = 16, .loss_sum = 3.5, .has_correct = true};
        return zdist_worker_reply_evaluation(call, &e);
    }
    case ZDIST_WORKER_STOP_JOB:
        return zdist_worker_reply_stopped(call, 99);
    default: { /* GET_STATE */
        float v[4] = {1, 2, 3, 4};
        zdist_shape_t shape = {.rank = 2, .dims = {2, 2}};
        int rc = zdist_msg_add_tensor_copy(zdist_rpc_call_reply(call), "w", ZDIST_DTYPE_FLOAT32, &shape, v,
                                           sizeof v);
        zdist_worker_state_t st = {.job = q->job, .step = 12, .iterations = 11};
        return rc < 0 ? rc : zdist_worker_reply_state(call, &st);
    }
    }
}

static int
s_connect(zdist_rpc_call_t *call, void *state)
{
    (void) state;
    const zdist_worker_connect_t *q = zdist_rpc_call_body(call);
    atomic_fetch_add(&s_seen.calls, 1);
    s_seen.num_endpoints = q->num_endpoints;
    s_copy(s_seen.ep1, sizeof s_seen.ep1, q->num_endpoints > 1 ? q->endpoints[1] : NULL);
    return 0;
}

static int
s_set_state(zdist_rpc_call_t *call, void *state)
{
    (void) state;
    const zdist_worker_state_t *q = zdist_rpc_call_body(call);
    const zdist_msg_t *req = zdist_rpc_call_request(call);
    atomic_fetch_add(&s_seen.calls, 1);
    s_seen.step = q->step;
    s_seen.iterations = q->iterations;
    s_seen.skip = q->skip_steps;
    s_seen.ntensors = (int) zdist_msg_tensor_count(req);
    const zdist_tensor_t *t = zdist_msg_tensor(req, 0);
    s_copy(s_seen.tensor0, sizeof s_seen.tensor0, t ? t->name : NULL);
    s_seen.tensor0_first = t ? ((const float *) t->data)[0] : NAN;
    return zdist_worker_reply_state_set(call, s_seen.ntensors);
}

static int
s_status(zdist_rpc_call_t *call, void *state)
{
    (void) state;
    zdist_worker_status_t st = {.job = "wc",
                                .running = true,
                                .steps = 5,
                                .last_loss = 0.75,
                                .strategy = "parameter_server",
                                .worker_task = 3};
    return zdist_worker_reply_status(call, &st);
}

static const zdist_rpc_method_t s_methods[] = {
    {ZDIST_WORKER_START_JOB, "start_job", &zdist_worker_body_start_job, s_start, 0, 0, 0},
    {ZDIST_WORKER_RUN_STEPS, "run_steps", &zdist_worker_body_run_steps, s_run, 0, 0, 0},
    {ZDIST_WORKER_EVALUATE, "evaluate", &zdist_worker_body_evaluate, s_job_arg, 0, 0, 0},
    {ZDIST_WORKER_STOP_JOB, "stop_job", &zdist_worker_body_stop_job, s_job_arg, 0, 0, 0},
    {ZDIST_WORKER_STATUS, "status", NULL, s_status, 0, 0, 0},
    {ZDIST_WORKER_CONNECT, "connect", &zdist_worker_body_connect, s_connect, 0, 0, 0},
    {ZDIST_WORKER_GET_STATE, "get_state", &zdist_worker_body_get_state, s_job_arg, 0, 0, 0},
    {ZDIST_WORKER_SET_STATE, "set_state", &zdist_worker_body_set_state, s_set_state, 0, 16, 0},
};

typedef struct {
    zdist_rpc_server_t *server;
    pthread_t thread;
    atomic_int stop;
} s_server_t;

static void *
s_serve(void *arg)
{
    s_server_t *s = arg;
    while (!atomic_load(&s->stop)) {
        zmq_pollitem_t item = {zdist_rpc_server_socket(s->server), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 20) > 0)
            zdist_rpc_server_dispatch(s->server, 64);
    }
    return NULL;
}

static s_server_t *
s_server_start(void)
{
    s_server_t *s = calloc(1, sizeof *s);
    zdist_error_t err = {0};
    s->server = zdist_rpc_server_new("tcp://127.0.0.1:*", s_methods, sizeof s_methods / sizeof s_methods[0],
                                     NULL, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s->server);
    pthread_create(&s->thread, NULL, s_serve, s);
    return s;
}

static void
s_server_stop(s_server_t **s_p)
{
    atomic_store(&(*s_p)->stop, 1);
    pthread_join((*s_p)->thread, NULL);
    zdist_rpc_server_destroy(&(*s_p)->server);
    free(*s_p);
    *s_p = NULL;
}

static zdist_worker_client_t *
s_client(s_server_t *s)
{
    zdist_error_t err = {0};
    zdist_worker_client_t *c = zdist_worker_client_new(zdist_rpc_server_endpoint(s->server), NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    return c;
}

/* Waits for call *id (a pointer: the sending argument may be evaluated
   after it); asserts it completed. */
static void
s_wait(zdist_worker_client_t *c, int send_rc, const uint64_t *id, zdist_worker_reply_t *ret)
{
    CU_ASSERT_EQUAL_FATAL(send_rc, 0);
    CU_ASSERT_EQUAL_FATAL(zdist_worker_client_wait(c, *id, ret), 0);
    CU_ASSERT_EQUAL(ret->id, *id);
}

static void
test_round_trip(void)
{
    s_server_t *s = s_server_start();
    zdist_worker_client_t *c = s_client(s);
    zdist_job_t job;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(S_JOB, NULL, &job, &err), 0);
    zdist_worker_reply_t r;
    uint64_t id = 0;

    /* START_JOB: the whole job arrives typed, checkpoint section included. */
    const char *ps[2] = {"tcp://10.0.0.1:1", "tcp://10.0.0.2:2"};
    zdist_worker_start_t start = {.job = &job,
                                  .worker_index = 1,
                                  .num_workers = 2,
                                  .ps_endpoints = ps,
                                  .num_ps = 2,
                                  .create_variables = true,
                                  .variable_prefix = "J/",
                                  .repeat_input = true};
    s_wait(c, zdist_worker_client_start_job(c, &start, 5000, &id), &id, &r);
    CU_ASSERT_EQUAL(r.status, ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL(r.method, ZDIST_WORKER_START_JOB);
    CU_ASSERT_NOT_EQUAL(r.incarnation, 0);
    CU_ASSERT_STRING_EQUAL(s_seen.job, "wc");
    CU_ASSERT_STRING_EQUAL(s_seen.model, "mlp");
    CU_ASSERT_STRING_EQUAL(s_seen.prefix, "J/");
    CU_ASSERT_STRING_EQUAL(s_seen.ps1, "tcp://10.0.0.2:2");
    CU_ASSERT_EQUAL(s_seen.ckpt_keep, 2);
    CU_ASSERT(s_seen.worker_index == 1 && s_seen.num_workers == 2 && s_seen.num_ps == 2);
    CU_ASSERT(s_seen.create && s_seen.repeat);
    CU_ASSERT_STRING_EQUAL(r.started.job, "wc");
    CU_ASSERT_STRING_EQUAL(r.started.collective_endpoint, "tcp://127.0.0.1:9");
    CU_ASSERT(r.started.num_replicas == 2 && r.started.steps_per_epoch == 4 && r.started.num_variables == 6);
    CU_ASSERT(r.started.created);
    zdist_worker_reply_release(&r);
    CU_ASSERT_PTR_NULL(r.internal);

    /* RUN_STEPS: per-step outputs, and the sums the coordinators use. */
    zdist_worker_run_t run = {.job = "wc", .steps = 3, .first_step = 41};
    s_wait(c, zdist_worker_client_run_steps(c, &run, 5000, &id), &id, &r);
    CU_ASSERT_EQUAL(s_seen.steps, 3);
    CU_ASSERT_EQUAL(s_seen.first_step, 41); /* the job's step numbers travel with the closure */
    CU_ASSERT_EQUAL_FATAL(r.status, ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(r.ran.num_steps, 3);
    CU_ASSERT(r.ran.end_of_data && r.ran.worker_step == 3);
    CU_ASSERT_EQUAL(r.ran.steps[2].epoch, 1);
    CU_ASSERT_EQUAL(r.ran.steps[2].num_outputs, 2);
    CU_ASSERT_STRING_EQUAL(r.ran.steps[2].names[1], "aux");
    CU_ASSERT_EQUAL(r.ran.steps[2].values[1], 42);
    CU_ASSERT_EQUAL(r.ran.loss_sum, 0.875);
    CU_ASSERT_EQUAL(r.ran.last_loss, 0.125);
    CU_ASSERT_EQUAL(r.ran.examples, 16);
    CU_ASSERT_EQUAL(r.ran.correct, 6);
    zdist_worker_reply_release(&r);

    s_wait(c, zdist_worker_client_evaluate(c, "wc", 5000, &id), &id, &r);
    CU_ASSERT_STRING_EQUAL(s_seen.job, "wc");
    CU_ASSERT(r.evaluation.correct == 7 && r.evaluation.total == 16 && r.evaluation.loss_sum == 3.5 &&
              r.evaluation.has_correct);
    zdist_worker_reply_release(&r);

    s_wait(c, zdist_worker_client_status(c, 5000, &id), &id, &r);
    CU_ASSERT_STRING_EQUAL(r.worker.job, "wc");
    CU_ASSERT_STRING_EQUAL(r.worker.error, "");
    CU_ASSERT(r.worker.running && !r.worker.failed && r.worker.steps == 5 && r.worker.last_loss == 0.75 &&
              r.worker.worker_task == 3);
    zdist_worker_reply_release(&r);

    const char *eps[3] = {"tcp://a:1", "tcp://b:2", "tcp://c:3"};
    zdist_worker_connect_t conn = {"wc", eps, 3};
    s_wait(c, zdist_worker_client_connect(c, &conn, 5000, &id), &id, &r);
    CU_ASSERT_EQUAL(r.status, ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL(s_seen.num_endpoints, 3);
    CU_ASSERT_STRING_EQUAL(s_seen.ep1, "tcp://b:2");
    zdist_worker_reply_release(&r);

    /* GET_STATE: tensors beside the typed body; SET_STATE sends them back. */
    s_wait(c, zdist_worker_client_get_state(c, "wc", 5000, &id), &id, &r);
    CU_ASSERT(r.state.step == 12 && r.state.iterations == 11);
    CU_ASSERT_STRING_EQUAL(r.state.job, "wc");
    CU_ASSERT_EQUAL_FATAL(zdist_worker_reply_tensor_count(&r), 1);
    zdist_tensor_t t = *zdist_worker_reply_tensor(&r, 0);
    CU_ASSERT(t.nbytes == 16 && t.shape.rank == 2 && ((const float *) t.data)[3] == 4);
    CU_ASSERT_PTR_NULL(zdist_worker_reply_tensor(&r, 1));
    zdist_worker_reply_t r2;
    zdist_worker_state_t st = {"wc", 12, 11, 5};
    s_wait(c, zdist_worker_client_set_state(c, &st, &t, 1, 5000, &id), &id, &r2);
    zdist_worker_reply_release(&r); /* the tensors were copied into the request */
    CU_ASSERT_EQUAL(r2.state_tensors, 1);
    CU_ASSERT(s_seen.step == 12 && s_seen.iterations == 11 && s_seen.skip == 5 && s_seen.ntensors == 1);
    CU_ASSERT_STRING_EQUAL(s_seen.tensor0, "w");
    CU_ASSERT_EQUAL(s_seen.tensor0_first, 1);
    zdist_worker_reply_release(&r2);

    s_wait(c, zdist_worker_client_stop_job(c, "wc", 5000, &id), &id, &r);
    CU_ASSERT_EQUAL(r.stopped_steps, 99);
    zdist_worker_reply_release(&r);

    s_wait(c, zdist_worker_client_ping(c, 5000, &id), &id, &r);
    CU_ASSERT_EQUAL(r.status, ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL(r.method, ZDIST_METHOD_PING);
    zdist_worker_reply_release(&r);
    CU_ASSERT_EQUAL(zdist_worker_client_in_flight(c), 0);

    zdist_job_release(&job);
    zdist_worker_client_destroy(&c);
    zdist_worker_client_destroy(&c); /* idempotent */
    s_server_stop(&s);
}

/* Bad requests are refused before any handler runs, naming the field. */
static void
test_bad_requests(void)
{
    s_server_t *s = s_server_start();
    zdist_worker_client_t *c = s_client(s);
    int before = atomic_load(&s_seen.calls);
    zdist_worker_reply_t r;
    uint64_t id = 0;

    zdist_worker_run_t run = {.job = "wc", .steps = -1};
    s_wait(c, zdist_worker_client_run_steps(c, &run, 5000, &id), &id, &r);
    CU_ASSERT_EQUAL(r.status, ZDIST_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "run_steps: steps: -1 is outside 0..100000"));
    zdist_worker_reply_release(&r);
    run = (zdist_worker_run_t){.job = "wc", .steps = 1, .first_step = -5};
    s_wait(c, zdist_worker_client_run_steps(c, &run, 5000, &id), &id, &r);
    CU_ASSERT_EQUAL(r.status, ZDIST_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "first_step: -5 is negative"));
    zdist_worker_reply_release(&r);

    const char *eps[2] = {"tcp://a:1", "tcp://*:2"};
    zdist_worker_connect_t conn = {"wc", eps, 2};
    s_wait(c, zdist_worker_client_connect(c, &conn, 5000, &id), &id, &r);
    CU_ASSERT_EQUAL(r.status, ZDIST_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "endpoints[1]: 'tcp://*:2' is not a tcp://HOST:PORT endpoint"));
    zdist_worker_reply_release(&r);

    zdist_worker_state_t st = {"wc", 1, -2, 0};
    s_wait(c, zdist_worker_client_set_state(c, &st, NULL, 0, 5000, &id), &id, &r);
    CU_ASSERT_EQUAL(r.status, ZDIST_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "step, iterations and skip_steps must be >= 0"));
    zdist_worker_reply_release(&r);

    /* A job the parser would refuse is refused on arrival. */
    zdist_job_t job;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(S_JOB, NULL, &job, &err), 0);
    job.optimizer.learning_rate = -1;
    zdist_worker_start_t start = {.job = &job, .num_workers = 1};
    s_wait(c, zdist_worker_client_start_job(c, &start, 5000, &id), &id, &r);
    CU_ASSERT_EQUAL(r.status, ZDIST_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "start_job: job: optimizer"));
    zdist_worker_reply_release(&r);
    job.optimizer.learning_rate = 0.01;
    start.num_workers = -1;
    s_wait(c, zdist_worker_client_start_job(c, &start, 5000, &id), &id, &r);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "num_workers: -1"));
    zdist_worker_reply_release(&r);
    zdist_job_release(&job);
    /* The client does not send what cannot be a START_JOB. */
    zdist_worker_start_t nojob = {0};
    CU_ASSERT_EQUAL(zdist_worker_client_start_job(c, &nojob, 5000, &id), -EINVAL);
    CU_ASSERT_EQUAL(atomic_load(&s_seen.calls), before);

    /* A reply breaking the protocol's limits completes INTERNAL, saying why. */
    zdist_worker_run_t bad = {.job = "bad-reply", .steps = 1};
    s_wait(c, zdist_worker_client_run_steps(c, &bad, 5000, &id), &id, &r);
    CU_ASSERT_EQUAL(r.status, ZDIST_STATUS_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "malformed reply to method 201"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "17 outputs, at most 16"));
    CU_ASSERT_EQUAL(r.ran.num_steps, 0);
    zdist_worker_reply_release(&r);

    /* No such call. */
    CU_ASSERT_EQUAL(zdist_worker_client_wait(c, 12345, &r), -ENOENT);
    zdist_worker_client_destroy(&c);
    s_server_stop(&s);
}

/* One poll over many clients: it wakes for the client that has a
   completion, for `also`, and for a call's deadline (made here). */
static void
test_wait_any(void)
{
    s_server_t *s = s_server_start();
    zdist_worker_client_t *cl[3] = {s_client(s), s_client(s), NULL};
    zdist_error_t err = {0};
    /* Nobody serves this one: its calls end at their deadlines. */
    cl[2] = zdist_worker_client_new("tcp://127.0.0.1:1", NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cl[2]);
    zdist_worker_reply_t r;

    CU_ASSERT_EQUAL(zdist_worker_client_wait_any(cl, 3, NULL, 0), 0);
    uint64_t id = 0;
    CU_ASSERT_EQUAL(zdist_worker_client_status(cl[1], 5000, &id), 0);
    CU_ASSERT_EQUAL(zdist_worker_client_wait_any(cl, 3, NULL, -1), 1);
    CU_ASSERT_EQUAL(zdist_worker_client_recv(cl[0], 0, &r), -EAGAIN);
    CU_ASSERT_EQUAL_FATAL(zdist_worker_client_recv(cl[1], 0, &r), 0);
    CU_ASSERT(r.id == id && r.status == ZDIST_STATUS_OK && r.worker.worker_task == 3);
    zdist_worker_reply_release(&r);

    CU_ASSERT_EQUAL(zdist_worker_client_ping(cl[2], 100, &id), 0);
    CU_ASSERT_EQUAL(zdist_worker_client_wait_any(cl, 3, NULL, -1), 1);
    CU_ASSERT_EQUAL_FATAL(zdist_worker_client_recv(cl[2], 0, &r), 0);
    CU_ASSERT(r.id == id && r.status == ZDIST_STATUS_DEADLINE_EXCEEDED && r.incarnation == 0);
    zdist_worker_reply_release(&r);

    /* `also` readable: back with no client ready; NULL clients skipped. */
    zsock_t *a = zsock_new_pair("@inproc://test-wait-any"), *b = zsock_new_pair(">inproc://test-wait-any");
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    zstr_send(b, "CANCEL");
    zdist_worker_client_t *some[2] = {NULL, cl[0]};
    CU_ASSERT_EQUAL(zdist_worker_client_wait_any(some, 2, zsock_resolve(a), -1), 0);
    char *cmd = zstr_recv(a);
    CU_ASSERT_STRING_EQUAL(cmd, "CANCEL");
    zstr_free(&cmd);
    zsock_destroy(&a);
    zsock_destroy(&b);
    for (int i = 0; i < 3; i++)
        zdist_worker_client_destroy(&cl[i]);
    s_server_stop(&s);
}

/* The ClusterCoordinator's detached closures, as the chief schedules them
   (their memory reused once their result is taken): every result comes
   through next_result once, with its steps, round after round; closures
   cancelled before they ran never do; a tracked closure among them is
   fetched as before. */
static void
test_detached_closures(void)
{
    s_server_t *s = s_server_start();
    zdist_error_t err = {0};
    zdist_job_t job;
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(S_JOB, NULL, &job, &err), 0);
    const char *workers[] = {zdist_rpc_server_endpoint(s->server)};
    zdist_coordinator_options_t o;
    zdist_coordinator_options_default(&o);
    o.job = &job;
    o.workers = workers;
    o.num_workers = 1;
    o.max_closures_per_dispatch = 1; /* this worker runs 3 steps a message, whatever it is asked */
    zdist_coordinator_t *c = zdist_coordinator_new(&o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(zdist_coordinator_start(c, false, &err), 0);
    CU_ASSERT_EQUAL(zdist_coordinator_schedule_detached(c, 0), -EINVAL);
    zdist_closure_result_t res;
    int64_t results = 0, steps = 0, first_try = 0;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 100; i++)
            CU_ASSERT_EQUAL(zdist_coordinator_schedule_detached(c, 3), 0);
        CU_ASSERT_EQUAL(zdist_coordinator_join(c, &err), 0);
        while (zdist_coordinator_next_result(c, &res)) {
            results++;
            steps += res.steps;
            first_try += res.worker == 0 && res.attempts == 1;
        }
    }
    CU_ASSERT_EQUAL(results, 300);
    CU_ASSERT_EQUAL(steps, 900);
    CU_ASSERT_EQUAL(first_try, 300);

    zdist_coordinator_pause(c, true);
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(zdist_coordinator_schedule_detached(c, 3), 0);
    CU_ASSERT_EQUAL(zdist_coordinator_queued(c), 5);
    zdist_coordinator_cancel_queued(c);
    CU_ASSERT_EQUAL(zdist_coordinator_queued(c), 0);
    CU_ASSERT_FALSE(zdist_coordinator_next_result(c, &res));
    zdist_coordinator_pause(c, false);

    CU_ASSERT_EQUAL(zdist_coordinator_schedule_detached(c, 3), 0);
    zdist_remote_value_t *v = zdist_coordinator_schedule(c, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(zdist_coordinator_schedule_detached(c, 3), 0);
    CU_ASSERT_EQUAL(zdist_remote_value_fetch(v, &res, &err), 0);
    CU_ASSERT_EQUAL(res.steps, 3);
    CU_ASSERT_EQUAL(zdist_coordinator_join(c, &err), 0);
    results = 0;
    while (zdist_coordinator_next_result(c, &res))
        results += res.steps == 3;
    CU_ASSERT_EQUAL(results, 3); /* the tracked one's result is also in the stream */
    zdist_coordinator_destroy(&c);
    zdist_job_release(&job);
    s_server_stop(&s);
}

void
zdist_test_worker_client_register(void)
{
    ZDIST_SUITE("worker_client", {"every method round trips typed structs", test_round_trip},
                {"bad requests refused before the handler, bad replies INTERNAL", test_bad_requests},
                {"one poll over many clients, a pipe and deadlines", test_wait_any},
                {"the ClusterCoordinator's detached closures: each result once, memory reused",
                 test_detached_closures});
}
