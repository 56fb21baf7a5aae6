/* CUnit suite: the coordinator service (zdist/coord_service.h: bodies, replies) and its client
   (zdist/coord_client.h), against a small coordinator actor over real loopback sockets. */
#include <czmq.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zdist/coord_client.h"
#include "zdist/coord_service.h"
#include "zdist/sys.h"

#define S_JOB_OK                                                                                             \
    "{\"name\": \"syn\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": "             \
    "\"softmax_regression\"}, \"optimizer\": {\"type\": \"sgd\"}, \"dataset\": {\"format\": \"synthetic\", " \
    "\"synthetic\": {\"n\": 64, \"dim\": 2, \"classes\": 2}, \"global_batch_size\": 8}, \"steps\": %d}"

/* ---- a small coordinator: the library's body types and replies, jobs
   that advance one step per tick, STATUS streams ---- */

#define S_MAX_JOBS 8
#define S_MAX_FOLLOWERS 8

typedef struct {
    zdist_coord_job_t st; /* name, error, detail_json owned */
} s_tjob_t;

typedef struct {
    zsock_t *pipe;
    zloop_t *loop;
    zdist_rpc_server_t *rpc;
    char endpoint[256];
    bool refuse_streams; /* RESOURCE_EXHAUSTED to follow: clients poll */
    int64_t hold_at;     /* jobs wait at this step until a RELEASE (0: never) */
    s_tjob_t jobs[S_MAX_JOBS];
    size_t njobs;
    zdist_rpc_call_t *followers[S_MAX_FOLLOWERS];
    char following[S_MAX_FOLLOWERS][ZDIST_COORD_ID_MAX]; /* a stream stays with the job it started on */
    size_t nfollowers;
    int rebind_attempts; /* since the last RESTART */
    bool drained;        /* DRAIN of worker:1 came */
} s_coord_t;

/* Binding again after a RESTART: the old socket's port is let go by
   libzmq's I/O thread (closing is asynchronous), so EADDRINUSE is tried
   again every 5 ms, this many times at most. */
#define S_REBIND_ATTEMPTS 2000
/* Set when the coordinator could not bind its endpoint again: the restart
   test fails on it, not on the follow's 3 minutes of silence alone. */
static atomic_bool s_rebind_gave_up;

static s_tjob_t *
s_find(s_coord_t *self, const char *id)
{
    if (!*id)
        return self->njobs ? &self->jobs[self->njobs - 1] : NULL;
    for (size_t i = 0; i < self->njobs; i++)
        if (strcmp(self->jobs[i].st.job_id, id) == 0)
            return &self->jobs[i];
    return NULL;
}

static int
s_submit(zdist_rpc_call_t *call, void *state)
{
    s_coord_t *self = state;
    const zdist_coord_submit_request_t *req = zdist_rpc_call_body(call);
    if (self->njobs == S_MAX_JOBS)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED, "jobs: %d at most", S_MAX_JOBS);
    s_tjob_t *j = &self->jobs[self->njobs++];
    snprintf(j->st.job_id, sizeof j->st.job_id, "j%zu", self->njobs);
    snprintf(j->st.state, sizeof j->st.state, "running");
    j->st.name = strdup(req->job.name);
    j->st.steps = req->job.steps;
    j->st.error = strdup("");
    /* What the handler was given, for the test to read back through STATUS. */
    char detail[512];
    snprintf(detail, sizeof detail, "{\"strategy\": \"%s\", \"base_dir\": \"%s\", \"doc_bytes\": %zu}",
             zdist_strategy_name(req->job.strategy), req->base_dir ? req->base_dir : "(none)",
             strlen(req->job_json));
    j->st.detail_json = strdup(detail);
    return zdist_coord_reply_submit(call, j->st.job_id);
}

static int
s_status(zdist_rpc_call_t *call, void *state)
{
    s_coord_t *self = state;
    const zdist_coord_status_request_t *req = zdist_rpc_call_body(call);
    s_tjob_t *j = s_find(self, req->job_id);
    if (!j)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "job '%s': no such job", req->job_id);
    bool follow = req->follow && !zdist_coord_state_final(j->st.state);
    if (follow && (self->refuse_streams || self->nfollowers == S_MAX_FOLLOWERS))
        return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED, "status streams: poll instead");
    int rc = zdist_coord_reply_jobs(call, &j->st, 1);
    if (rc < 0 || !follow)
        return rc;
    rc = zdist_rpc_call_send_partial(zdist_rpc_call_defer(call));
    if (rc == 0) {
        memcpy(self->following[self->nfollowers], j->st.job_id, ZDIST_COORD_ID_MAX);
        self->followers[self->nfollowers++] = call;
    }
    return rc;
}

static int
s_cancel(zdist_rpc_call_t *call, void *state)
{
    s_coord_t *self = state;
    const zdist_coord_cancel_request_t *req = zdist_rpc_call_body(call);
    s_tjob_t *j = s_find(self, req->job_id);
    if (!j)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "job '%s': no such job", req->job_id);
    snprintf(j->st.state, sizeof j->st.state, "cancelled");
    return zdist_coord_reply_cancel(call, j->st.state);
}

static int
s_list(zdist_rpc_call_t *call, void *state)
{
    s_coord_t *self = state;
    zdist_coord_job_t v[S_MAX_JOBS];
    for (size_t i = 0; i < self->njobs; i++) {
        v[i] = self->jobs[i].st;
        v[i].detail_json = NULL; /* sent as "" */
    }
    return zdist_coord_reply_jobs(call, v, self->njobs);
}

/* Two workers: worker:1 drains, then has left. */
static int
s_drain(zdist_rpc_call_t *call, void *state)
{
    s_coord_t *self = state;
    const zdist_coord_drain_request_t *req = zdist_rpc_call_body(call);
    if (req->task_index >= 2)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "drain: no worker:%d", req->task_index);
    bool left = self->drained;
    self->drained = true;
    return zdist_coord_reply_drain(call, left ? "left" : "draining");
}

/* RESHARD of job "j1" to up to 3 ps: the layout and a line back. */
static int
s_reshard(zdist_rpc_call_t *call, void *state)
{
    (void) state;
    const zdist_coord_reshard_request_t *req = zdist_rpc_call_body(call);
    if (strcmp(req->job_id, "j1") != 0)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "reshard: no job '%s'", req->job_id);
    if (req->num_ps > 3)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INVALID_ARGUMENT, "reshard: --ps %d", req->num_ps);
    char line[64];
    snprintf(line, sizeof line, "moved to %d ps tasks", req->num_ps);
    return zdist_coord_reply_reshard(call, req->num_ps, line);
}

static const zdist_rpc_method_t s_methods[] = {
    {ZDIST_COORD_SUBMIT, "submit", &zdist_coord_body_submit, s_submit, 0, 0, 0},
    {ZDIST_COORD_STATUS, "status", &zdist_coord_body_status, s_status, 0, 0, 0},
    {ZDIST_COORD_CANCEL, "cancel", &zdist_coord_body_cancel, s_cancel, 0, 0, 0},
    {ZDIST_COORD_LIST, "list", &zdist_coord_body_list, s_list, 0, 0, 0},
    {ZDIST_COORD_DRAIN, "drain", &zdist_coord_body_drain, s_drain, 0, 0, 0},
    {ZDIST_COORD_RESHARD, "reshard", &zdist_coord_body_reshard, s_reshard, 0, 0, 0},
};

static int
s_on_request(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    (void) loop;
    (void) item;
    s_coord_t *self = arg;
    int rc = zdist_rpc_server_dispatch(self->rpc, 16);
    if (rc < 0)
        fprintf(stderr, "test coordinator: dispatch: %s\n", strerror(-rc));
    return 0;
}

/* Binds endpoint and polls it; self->rpc is set only once both worked, so
   a failed attempt never drops (or NULLs) a server the loop polls. */
static int
s_serve(s_coord_t *self, const char *endpoint, zdist_error_t *err)
{
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = "chief";
    zdist_rpc_server_t *rpc = zdist_rpc_server_new(endpoint, s_methods, sizeof s_methods / sizeof s_methods[0], self, &opts, err);
    if (!rpc)
        return -1;
    zmq_pollitem_t item = {zdist_rpc_server_socket(rpc), 0, ZMQ_POLLIN, 0};
    if (zloop_poller(self->loop, &item, s_on_request, self) < 0) {
        zdist_error_set(err, -ENOMEM, "zloop_poller failed");
        zdist_rpc_server_destroy(&rpc);
        return -1;
    }
    self->rpc = rpc;
    snprintf(self->endpoint, sizeof self->endpoint, "%s", zdist_rpc_server_endpoint(rpc));
    return 0;
}

/* Ends every stream with the status a stopping coordinator sends. */
static void
s_end_streams(s_coord_t *self)
{
    for (size_t i = 0; i < self->nfollowers; i++) {
        zdist_rpc_call_fail(self->followers[i], ZDIST_STATUS_UNAVAILABLE, "coordinator stopping");
        zdist_rpc_call_finish(&self->followers[i]);
    }
    self->nfollowers = 0;
}

/* A tick: running jobs advance a step, followers get their job. */
static int
s_on_tick(zloop_t *loop, int timer_id, void *arg)
{
    (void) loop;
    (void) timer_id;
    s_coord_t *self = arg;
    for (size_t i = 0; i < self->njobs; i++) {
        zdist_coord_job_t *st = &self->jobs[i].st;
        if (strcmp(st->state, "running") != 0 || (self->hold_at && st->step >= self->hold_at))
            continue;
        if (++st->step >= st->steps)
            snprintf(st->state, sizeof st->state, "done");
    }
    for (size_t i = 0; i < self->nfollowers;) {
        zdist_rpc_call_t *call = self->followers[i];
        s_tjob_t *j = s_find(self, self->following[i]);
        zdist_coord_reply_jobs(call, &j->st, 1);
        if (zdist_coord_state_final(j->st.state)) {
            zdist_rpc_call_finish(&self->followers[i]);
            self->nfollowers--;
            self->followers[i] = self->followers[self->nfollowers];
            memcpy(self->following[i], self->following[self->nfollowers], ZDIST_COORD_ID_MAX);
        } else {
            zdist_rpc_call_send_partial(call);
            i++;
        }
    }
    return 0;
}

/* Binding the endpoint again once libzmq's I/O thread has let the old
   socket's port go (closing is asynchronous).

   The timer can fire again after it ended itself: zloop_timer_end only
   takes effect at the end of a loop pass, and czmq 4.2's zloop_start skips
   that end (a `continue` to rebuild the poll set) when a timer handler
   registered a poller, as a successful bind here does. Under load the next
   pass finds this timer due again. It used to bind once more, fail with
   EADDRINUSE against its own new socket and set self->rpc to NULL while
   that socket's poller stayed registered: the next request dispatched a
   NULL server. Hence: already bound, nothing to do. */
static int
s_on_rebind(zloop_t *loop, int timer_id, void *arg)
{
    s_coord_t *self = arg;
    if (self->rpc) {
        zloop_timer_end(loop, timer_id);
        return 0;
    }
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", self->endpoint);
    zdist_error_t err = {0};
    if (s_serve(self, endpoint, &err) == 0) {
        zloop_timer_end(loop, timer_id);
        return 0;
    }
    if (err.code == -EADDRINUSE && ++self->rebind_attempts < S_REBIND_ATTEMPTS)
        return 0; /* the old socket still holds the port: again in 5 ms */
    fprintf(stderr, "test coordinator: cannot bind %s again after a restart (%d attempts): %s\n", endpoint,
            self->rebind_attempts, err.text);
    atomic_store(&s_rebind_gave_up, true);
    return -1; /* the actor stops */
}

/* Commands: "RESTART" (streams end UNAVAILABLE, the server goes and comes
   back on the same endpoint), "REFUSE STREAMS", "HOLD <step>" (running jobs
   wait at that step), "RELEASE" (they go on), "$TERM". */
static int
s_on_pipe(zloop_t *loop, zsock_t *pipe, void *arg)
{
    s_coord_t *self = arg;
    char *cmd = zstr_recv(pipe);
    int rc = 0;
    if (!cmd || strcmp(cmd, "$TERM") == 0) {
        rc = -1;
    } else if (strcmp(cmd, "RESTART") == 0) {
        s_end_streams(self);
        zmq_pollitem_t item = {zdist_rpc_server_socket(self->rpc), 0, ZMQ_POLLIN, 0};
        zloop_poller_end(loop, &item);
        zdist_rpc_server_destroy(&self->rpc);
        self->rebind_attempts = 0;
        rc = zloop_timer(loop, 5, 0, s_on_rebind, self) < 0 ? -1 : 0;
    } else if (strcmp(cmd, "REFUSE STREAMS") == 0) {
        self->refuse_streams = true;
    } else if (strncmp(cmd, "HOLD ", 5) == 0) {
        self->hold_at = strtoll(cmd + 5, NULL, 10);
    } else if (strcmp(cmd, "RELEASE") == 0) {
        self->hold_at = 0;
    }
    zstr_free(&cmd);
    return rc;
}

/* args: the tick in ms (a size_t). Sends the endpoint on its pipe. */
static void
s_coord_actor(zsock_t *pipe, void *args)
{
    size_t tick_ms = *(size_t *) args;
    s_coord_t *self = calloc(1, sizeof *self);
    self->pipe = pipe;
    self->loop = zloop_new();
    zsock_signal(pipe, 0);
    if (s_serve(self, "tcp://127.0.0.1:*", NULL) < 0) {
        zstr_send(pipe, "");
        zloop_destroy(&self->loop);
        free(self);
        return;
    }
    zstr_send(pipe, self->endpoint);
    zloop_reader(self->loop, pipe, s_on_pipe, self);
    zloop_timer(self->loop, tick_ms, 0, s_on_tick, self);
    zloop_start(self->loop);
    s_end_streams(self);
    zloop_destroy(&self->loop);
    zdist_rpc_server_destroy(&self->rpc);
    for (size_t i = 0; i < self->njobs; i++)
        zdist_coord_job_release(&self->jobs[i].st);
    free(self);
}

/* Starts the coordinator actor; its endpoint in buf. */
static zactor_t *
s_coord_start(size_t tick_ms, char *buf, size_t size)
{
    static size_t tick;
    tick = tick_ms;
    zactor_t *a = zactor_new(s_coord_actor, &tick);
    char *ep = a ? zstr_recv(a) : NULL;
    snprintf(buf, size, "%s", ep ? ep : "");
    zstr_free(&ep);
    return a;
}

static char *
s_job_text(int steps)
{
    char *text = NULL;
    if (asprintf(&text, S_JOB_OK, steps) < 0)
        return NULL;
    return text;
}

/* ---- tests ---- */

static void
test_submit_status_cancel_list(void)
{
    char ep[256];
    zactor_t *coord = s_coord_start(1000000, ep, sizeof ep); /* no ticks: jobs stay at step 0 */
    CU_ASSERT_FATAL(coord && *ep);
    zdist_error_t err = {0};
    zdist_coord_client_t *c = zdist_coord_client_new(ep, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(zdist_coord_client_endpoint(c), ep);

    char *text = s_job_text(12);
    char id[ZDIST_COORD_ID_MAX] = "";
    CU_ASSERT_EQUAL(zdist_coord_client_submit(c, text, "/data/jobs", 5000, id, &err), 0);
    CU_ASSERT_STRING_EQUAL(id, "j1");
    char id2[ZDIST_COORD_ID_MAX] = "";
    CU_ASSERT_EQUAL(zdist_coord_client_submit(c, text, NULL, 5000, id2, &err), 0);
    CU_ASSERT_STRING_EQUAL(id2, "j2");

    /* The handler got the parsed job, the document and base_dir (NULL when not sent). */
    zdist_coord_job_t st;
    CU_ASSERT_EQUAL_FATAL(zdist_coord_client_status(c, "j1", 5000, &st, &err), 0);
    CU_ASSERT_STRING_EQUAL(st.job_id, "j1");
    CU_ASSERT_STRING_EQUAL(st.name, "syn");
    CU_ASSERT_STRING_EQUAL(st.state, "running");
    CU_ASSERT_EQUAL(st.step, 0);
    CU_ASSERT_EQUAL(st.steps, 12);
    CU_ASSERT_STRING_EQUAL(st.error, "");
    char want[256];
    snprintf(want, sizeof want,
             "{\"strategy\": \"parameter_server\", \"base_dir\": \"/data/jobs\", \"doc_bytes\": %zu}",
             strlen(text));
    CU_ASSERT_STRING_EQUAL(st.detail_json, want);
    zdist_coord_job_release(&st);
    CU_ASSERT_PTR_NULL(st.name);
    CU_ASSERT_EQUAL(zdist_coord_client_status(c, "", 5000, &st, &err), 0); /* the latest */
    CU_ASSERT_STRING_EQUAL(st.job_id, "j2");
    CU_ASSERT_PTR_NOT_NULL(strstr(st.detail_json, "\"base_dir\": \"(none)\""));
    zdist_coord_job_release(&st);

    char state[ZDIST_COORD_STATE_MAX] = "";
    CU_ASSERT_EQUAL(zdist_coord_client_cancel(c, "j2", 5000, state, &err), 0);
    CU_ASSERT_STRING_EQUAL(state, "cancelled");

    zdist_coord_job_t *jobs = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(zdist_coord_client_list(c, 5000, &jobs, &n, &err), 0);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(jobs[0].job_id, "j1");
    CU_ASSERT_STRING_EQUAL(jobs[1].state, "cancelled");
    CU_ASSERT_STRING_EQUAL(jobs[1].detail_json, "");
    zdist_coord_jobs_free(&jobs, n);
    CU_ASSERT_PTR_NULL(jobs);

    /* The coordinator's refusals: the errno of their status, its message. */
    CU_ASSERT_EQUAL(zdist_coord_client_status(c, "j9", 5000, &st, &err), -ENOENT);
    CU_ASSERT_STRING_EQUAL(err.text, "job 'j9': no such job");
    CU_ASSERT_EQUAL(zdist_coord_client_cancel(c, "j9", 5000, state, &err), -ENOENT);
    free(text);
    zdist_coord_client_destroy(&c);
    CU_ASSERT_PTR_NULL(c);
    zactor_destroy(&coord);
}

static void
test_requests_checked_before_handlers(void)
{
    char ep[256];
    zactor_t *coord = s_coord_start(1000000, ep, sizeof ep);
    CU_ASSERT_FATAL(coord && *ep);
    zdist_error_t err = {0};
    zdist_coord_client_t *c = zdist_coord_client_new(ep, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char id[ZDIST_COORD_ID_MAX] = "unchanged";

    CU_ASSERT_EQUAL(zdist_coord_client_submit(c, "", NULL, 5000, id, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "submit: job_json: empty; send the job document");
    /* A bad job is refused naming the field, by zdist/job.h's parser. */
    const char *bad =
        "{\"name\": \"x\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": "
        "\"softmax_regression\"}, \"optimizer\": {\"type\": \"sgd\"}, \"dataset\": {\"format\": "
        "\"synthetic\", \"synthetic\": {\"n\": 64, \"dim\": 2, \"classes\": 2}, \"global_batch_size\": "
        "\"8\"}, \"steps\": 4}";
    CU_ASSERT_EQUAL(zdist_coord_client_submit(c, bad, NULL, 5000, id, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "submit: dataset.global_batch_size"));
    CU_ASSERT_EQUAL(zdist_coord_client_submit(c, "{\"name\": ", NULL, 5000, id, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "not valid JSON at line 1"));
    /* Larger than the limit. */
    size_t big = ZDIST_COORD_MAX_JOB_BYTES + 1;
    char *huge = malloc(big + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(huge);
    memset(huge, ' ', big);
    huge[0] = '{';
    huge[big - 1] = '}';
    huge[big] = '\0';
    CU_ASSERT_EQUAL(zdist_coord_client_submit(c, huge, NULL, 30000, id, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "submit: job_json: larger than 16 MiB");
    free(huge);
    CU_ASSERT_STRING_EQUAL(id, "unchanged"); /* written only on success */

    /* Job ids are bounded; CANCEL needs one. */
    char longid[ZDIST_COORD_ID_MAX + 1];
    memset(longid, 'j', ZDIST_COORD_ID_MAX);
    longid[ZDIST_COORD_ID_MAX] = '\0';
    zdist_coord_job_t st;
    CU_ASSERT_EQUAL(zdist_coord_client_status(c, longid, 5000, &st, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "status: job_id: longer than 63 bytes");
    char state[ZDIST_COORD_STATE_MAX];
    CU_ASSERT_EQUAL(zdist_coord_client_cancel(c, longid, 5000, state, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "cancel: job_id: longer than 63 bytes");
    CU_ASSERT_EQUAL(zdist_coord_client_cancel(c, "", 5000, state, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "cancel: job_id: empty; give the id of the job to cancel");
    /* DRAIN: typed both ways; a negative index refused before the handler. */
    CU_ASSERT_EQUAL(zdist_coord_client_drain(c, -1, 5000, state, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "drain: task_index: -1; give the worker's index (>= 0)");
    CU_ASSERT_EQUAL(zdist_coord_client_drain(c, 1, 5000, state, &err), 0);
    CU_ASSERT_STRING_EQUAL(state, "draining");
    CU_ASSERT_EQUAL(zdist_coord_client_drain(c, 1, 5000, state, &err), 0);
    CU_ASSERT_STRING_EQUAL(state, "left");
    CU_ASSERT_EQUAL(zdist_coord_client_drain(c, 5, 5000, state, &err), -ENOENT);
    /* RESHARD: typed both ways; no job id or fewer than one ps refused before the handler. */
    int nps = 0;
    char line[16];
    CU_ASSERT_EQUAL(zdist_coord_client_reshard(c, "", 2, 5000, &nps, line, sizeof line, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "reshard: job_id: empty; give the id of the running job to reshard");
    CU_ASSERT_EQUAL(zdist_coord_client_reshard(c, "j1", 0, 5000, &nps, line, sizeof line, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "reshard: num_ps: 0; a job needs at least one ps task (--ps N, N >= 1)");
    CU_ASSERT_EQUAL(nps, 0);
    CU_ASSERT_EQUAL(zdist_coord_client_reshard(c, "j1", 2, 5000, &nps, line, sizeof line, &err), 0);
    CU_ASSERT_EQUAL(nps, 2);
    CU_ASSERT_STRING_EQUAL(line, "moved to 2 ps t"); /* cut to the caller's size */
    CU_ASSERT_EQUAL(zdist_coord_client_reshard(c, "j1", 4, 5000, &nps, line, sizeof line, &err), -EINVAL);
    CU_ASSERT_EQUAL(zdist_coord_client_reshard(c, "j2", 1, 5000, &nps, line, sizeof line, &err), -ENOENT);
    /* The table is untouched: no job got in. */
    CU_ASSERT_EQUAL(zdist_coord_client_status(c, "", 5000, &st, &err), -ENOENT);
    zdist_coord_client_destroy(&c);
    zactor_destroy(&coord);
}

/* What a follow saw. */
typedef struct {
    int updates;
    int lost;
    int64_t first_step, last_step;
    bool monotonic;
    char lost_why[128];
    zactor_t *coord; /* restarted at restart_at (0: never) */
    int64_t restart_at;
    bool restarted;
    /* The coordinator holds the job (HOLD): RELEASE it on the first update,
       or with restart_at, on the first after the restart was noticed. So
       the follower sees the job mid-way however late it reads its socket. */
    bool held;
    const char *endpoint; /* a second client submits a job there before the restart */
} s_seen_t;

static void
s_on_status(const zdist_coord_job_t *job, void *arg)
{
    s_seen_t *s = arg;
    if (s->updates++ == 0)
        s->first_step = job->step;
    else if (job->step < s->last_step)
        s->monotonic = false;
    s->last_step = job->step;
    if (s->restart_at && !s->restarted && job->step >= s->restart_at) {
        s->restarted = true;
        /* Another job becomes the latest: the follower stays with its own. */
        zdist_coord_client_t *other = zdist_coord_client_new(s->endpoint, NULL, NULL);
        char *text = s_job_text(1000000);
        char id[ZDIST_COORD_ID_MAX];
        CU_ASSERT_EQUAL(zdist_coord_client_submit(other, text, NULL, 5000, id, NULL), 0);
        free(text);
        zdist_coord_client_destroy(&other);
        zstr_send(s->coord, "RESTART");
    } else if (s->held && (!s->restart_at || s->lost > 0)) {
        s->held = false;
        zstr_send(s->coord, "RELEASE");
    }
}

static void
s_on_lost(const char *why, void *arg)
{
    s_seen_t *s = arg;
    s->lost++;
    snprintf(s->lost_why, sizeof s->lost_why, "%s", why);
}

static void
test_follow_stream_across_restart(void)
{
    char ep[256];
    zactor_t *coord = s_coord_start(5, ep, sizeof ep);
    CU_ASSERT_FATAL(coord && *ep);
    /* The job waits at step 10 for the restart and the first status after
       it: a client that reads its stream late (a loaded machine) still
       restarts the coordinator mid-job and sees the job after the restart
       before its end. The pipe's command is handled before the SUBMIT that
       comes after it. */
    zstr_send(coord, "HOLD 10");
    zdist_error_t err = {0};
    zdist_coord_client_t *c = zdist_coord_client_new(ep, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char *text = s_job_text(60);
    char id[ZDIST_COORD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(zdist_coord_client_submit(c, text, NULL, 5000, id, &err), 0);
    free(text);

    s_seen_t seen = {.monotonic = true, .coord = coord, .restart_at = 10, .held = true, .endpoint = ep};
    zdist_coord_follow_options_t opts;
    zdist_coord_follow_options_default(&opts);
    CU_ASSERT_EQUAL(opts.lost_wait_ms, 180000);
    CU_ASSERT_EQUAL(opts.resubscribe_ms, 500);
    opts.resubscribe_ms = 50;
    opts.on_status = s_on_status;
    opts.on_lost = s_on_lost;
    opts.arg = &seen;
    zdist_coord_job_t last;
    /* "" = the latest job: this one, and still this one after the restart. */
    CU_ASSERT_EQUAL(zdist_coord_client_follow(c, "", &opts, &last, &err), 0);
    /* The coordinator bound its endpoint again (else its reason is on stderr). */
    CU_ASSERT_FALSE(atomic_load(&s_rebind_gave_up));
    CU_ASSERT_STRING_EQUAL(last.job_id, id);
    CU_ASSERT_STRING_EQUAL(last.state, "done");
    CU_ASSERT_EQUAL(last.step, 60);
    CU_ASSERT_EQUAL(last.steps, 60);
    CU_ASSERT_TRUE(seen.restarted);
    CU_ASSERT_EQUAL(seen.lost, 1);
    /* Its last word, or the connection's end when the word was lost with the socket. */
    CU_ASSERT(strcmp(seen.lost_why, "coordinator stopping") == 0 ||
              strncmp(seen.lost_why, "connection lost", 15) == 0);
    CU_ASSERT_TRUE(seen.monotonic);
    CU_ASSERT_TRUE(seen.updates >= 3);
    CU_ASSERT_EQUAL(seen.last_step, 60);
    zdist_coord_job_release(&last);

    /* A finished job: one status, the last. */
    seen = (s_seen_t){.monotonic = true};
    CU_ASSERT_EQUAL(zdist_coord_client_follow(c, id, &opts, &last, &err), 0);
    CU_ASSERT_EQUAL(seen.updates, 1);
    CU_ASSERT_STRING_EQUAL(last.state, "done");
    zdist_coord_job_release(&last);

    /* No such job: the coordinator's refusal, nothing seen. */
    CU_ASSERT_EQUAL(zdist_coord_client_follow(c, "j99", &opts, &last, &err), -ENOENT);
    CU_ASSERT_STRING_EQUAL(err.text, "job 'j99': no such job");
    CU_ASSERT_STRING_EQUAL(last.job_id, "");
    zdist_coord_client_destroy(&c);
    zactor_destroy(&coord);
}

static void
test_follow_polls_when_streams_are_refused(void)
{
    char ep[256];
    zactor_t *coord = s_coord_start(5, ep, sizeof ep);
    CU_ASSERT_FATAL(coord && *ep);
    zstr_send(coord, "REFUSE STREAMS");
    zstr_send(coord, "HOLD 1"); /* until the first poll's answer: then at least one more poll */
    zdist_error_t err = {0};
    zdist_coord_client_t *c = zdist_coord_client_new(ep, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char *text = s_job_text(40);
    char id[ZDIST_COORD_ID_MAX];
    CU_ASSERT_EQUAL_FATAL(zdist_coord_client_submit(c, text, NULL, 5000, id, &err), 0);
    free(text);
    s_seen_t seen = {.monotonic = true, .coord = coord, .held = true};
    zdist_coord_follow_options_t opts;
    zdist_coord_follow_options_default(&opts);
    opts.resubscribe_ms = 20;
    opts.on_status = s_on_status;
    opts.on_lost = s_on_lost;
    opts.arg = &seen;
    zdist_coord_job_t last;
    CU_ASSERT_EQUAL(zdist_coord_client_follow(c, id, &opts, &last, &err), 0);
    CU_ASSERT_STRING_EQUAL(last.state, "done");
    CU_ASSERT_EQUAL(seen.lost, 0);
    CU_ASSERT_TRUE(seen.updates >= 2); /* one per poll */
    CU_ASSERT_TRUE(seen.monotonic);
    zdist_coord_job_release(&last);
    zdist_coord_client_destroy(&c);
    zactor_destroy(&coord);
}

static void
test_follow_gives_up_on_silence(void)
{
    /* An endpoint nobody serves: the coordinator's own, after it stopped. */
    char ep[256];
    zactor_t *coord = s_coord_start(1000000, ep, sizeof ep);
    CU_ASSERT_FATAL(coord && *ep);
    zactor_destroy(&coord);
    zdist_error_t err = {0};
    zdist_coord_client_t *c = zdist_coord_client_new(ep, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    zdist_coord_follow_options_t opts;
    zdist_coord_follow_options_default(&opts);
    opts.lost_wait_ms = 300;
    zdist_coord_job_t last;
    CU_ASSERT_EQUAL(zdist_coord_client_follow(c, "j1", &opts, &last, &err), -ETIMEDOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, ": nothing heard for 300 ms"));
    CU_ASSERT_STRING_EQUAL(last.job_id, "");
    char longid[ZDIST_COORD_ID_MAX + 1];
    memset(longid, 'j', ZDIST_COORD_ID_MAX);
    longid[ZDIST_COORD_ID_MAX] = '\0';
    CU_ASSERT_EQUAL(zdist_coord_client_follow(c, longid, &opts, &last, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "job_id: longer than 63 bytes");
    zdist_coord_client_destroy(&c);
    CU_ASSERT_PTR_NULL(zdist_coord_client_new("tcp://nowhere:x", NULL, &err));
    CU_ASSERT_EQUAL(err.code, -EINVAL);
}

static void
test_state_final(void)
{
    CU_ASSERT_TRUE(zdist_coord_state_final("done"));
    CU_ASSERT_TRUE(zdist_coord_state_final("failed"));
    CU_ASSERT_TRUE(zdist_coord_state_final("cancelled"));
    CU_ASSERT_FALSE(zdist_coord_state_final("running"));
    CU_ASSERT_FALSE(zdist_coord_state_final("queued"));
    CU_ASSERT_FALSE(zdist_coord_state_final(NULL));
    zdist_coord_job_release(NULL);
    zdist_coord_jobs_free(NULL, 0);
}

void
zdist_test_coord_client_register(void)
{
    ZDIST_SUITE(
        "coord_client", {"submit, status, cancel, list: typed both ways", test_submit_status_cancel_list},
        {"bad requests refused before the handler, naming the field", test_requests_checked_before_handlers},
        {"follow: a stream to the end across a coordinator restart", test_follow_stream_across_restart},
        {"follow: polls when the coordinator will not stream", test_follow_polls_when_streams_are_refused},
        {"follow: gives up after lost_wait_ms of silence", test_follow_gives_up_on_silence},
        {"final states, NULL-safe release", test_state_final});
}
