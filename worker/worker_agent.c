/* worker_agent: worker.proto handlers — several jobs' sessions, their steps on a thread of their own, shared by
   priority then round robin — as a czmq actor. */
#include <cblas.h>
#include <errno.h>
#include <assert.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>


#include "worker_agent.h"
#include "worker_fault.h"
#include "worker_psd.h"
#include "worker_sched.h"
#include "worker_session.h"
#include "zdist/job.h"
#include "zdist/cluster.h"
#include "zdist/collective.h"
#include "zdist/input.h"
#include "zdist/parse.h"
#include "zdist/daemon.h"
#include "zdist/prom.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"
#include "zdist/worker_service.h"

_Static_assert(ZDIST_WORKER_MAX_PS <= WORKER_AGENT_MAX_PS, "a START_JOB's ps endpoints fit the agent's table");
_Static_assert(WORKER_MAX_OUTPUTS <= ZDIST_WORKER_MAX_OUTPUTS, "a step's outputs fit a RUN_STEPS reply");

typedef struct {
    bool active;
    bool failed;
    char error[2 * ZDIST_ERROR_TEXT_MAX + 4];
    uint8_t *start_body; /* the START_JOB body, to recognise a repeated start */
    size_t start_len;
    worker_session_t *sess;
    const zdist_job_t *job; /* the session's */
    int worker_index, num_workers;
    int64_t steps;
    double last_loss;
    bool end_of_data;
    bool connected; /* multi_worker_mirrored with more than one worker */
    int64_t collective_timeout_ms;
    uint64_t last_served; /* the steps thread's turn counter when it last ran a request of the job */
} s_job_t;

/* The worker's counters since it started, kept by the steps thread and
   copied into each snapshot, for /metrics. */
typedef struct {
    uint64_t steps, examples, failed_steps;
    double loss; /* of the last step, NaN before one */
    zdist_prom_histogram_t step_seconds;
} s_counters_t;

/* What STATUS and systemd are told: the job as the steps thread last left
   it (the agent's thread never reads s_job_t while that thread runs). */
typedef struct {
    bool active, failed;
    int njobs;
    char job[256]; /* the jobs' names, comma-separated */
    const char *strategy;
    int64_t steps;
    double last_loss;
    char error[2 * ZDIST_ERROR_TEXT_MAX + 4];
    s_counters_t counters;
} s_snapshot_t;

typedef struct {
    worker_agent_config_t config;
    zdist_rpc_server_t *rpc;
    s_job_t jobs[WORKER_AGENT_MAX_JOBS]; /* the steps thread's; a free slot is !active */
    uint64_t turns;          /* requests the steps thread has run */
    zactor_t *steps;         /* runs every request that touches the job */
    atomic_bool stopping;    /* set before the steps thread is flushed */
    s_snapshot_t snap;       /* the agent thread's */
    s_counters_t counters;   /* the steps thread's */
    zdist_http_t *http;      /* --http */
    zdist_http_metrics_t metrics;
    worker_fault_t fault; /* test builds only (worker_fault.h) */
} self_t;

/* A request handed to the steps thread: its handler runs there and fills
   the reply; the agent's thread then sends it (only it may). */
typedef struct s_work_t {
    zdist_rpc_call_t *call;
    zdist_rpc_handler_fn *fn;
    char job[256];    /* the job the request names */
    int priority;     /* START_JOB: the job's (others: the held job's) */
    struct s_work_t *next; /* the steps thread's queue */
    int rc;
    s_snapshot_t snap;
} s_work_t;

/* Sets the reply's status and logs the refusal once, here. */
static void
s_job_release(s_job_t *j)
{
    worker_session_destroy(&j->sess);
    free(j->start_body);
    memset(j, 0, sizeof *j);
}

static void
s_notify(const self_t *self)
{
    const s_snapshot_t *n = &self->snap;
    if (!n->active)
        sd_notifyf(0, "STATUS=worker task %d serving, no job", self->config.worker_task);
    else
        sd_notifyf(0, "STATUS=worker task %d: job%s '%s' step %lld loss %.4f%s", self->config.worker_task,
                   n->njobs > 1 ? "s" : "", n->job, (long long)n->steps, n->last_loss, n->failed ? " (failed)" : "");
}

/* What STATUS says of the jobs held: their names, the steps run for all of
   them, the loss of the job served last, the first failure. */
static void
s_snapshot(const self_t *self, const s_job_t *last, s_snapshot_t *ret)
{
    memset(ret, 0, sizeof *ret);
    ret->last_loss = NAN;
    for (int i = 0; i < WORKER_AGENT_MAX_JOBS; i++) {
        const s_job_t *j = &self->jobs[i];
        if (!j->active)
            continue;
        size_t len = strlen(ret->job);
        snprintf(ret->job + len, sizeof ret->job - len, "%s%s", ret->njobs ? "," : "", j->job->name);
        if (!ret->njobs++)
            ret->strategy = zdist_strategy_name(j->job->strategy);
        ret->active = true;
        ret->steps += j->steps;
        if (j->failed && !ret->failed) {
            ret->failed = true;
            snprintf(ret->error, sizeof ret->error, "%s", j->error);
        }
        if (j == last || isnan(ret->last_loss))
            ret->last_loss = j->last_loss;
    }
}

/* The held job named `name`, or NULL. */
static s_job_t *
s_held(self_t *self, const char *name)
{
    for (int i = 0; name && i < WORKER_AGENT_MAX_JOBS; i++)
        if (self->jobs[i].active && strcmp(self->jobs[i].job->name, name) == 0)
            return &self->jobs[i];
    return NULL;
}

/* The names of the jobs held, for a refusal ("'a', 'b'" or "none"). */
static const char *
s_held_names(const self_t *self, char *buf, size_t size)
{
    buf[0] = 0;
    for (int i = 0; i < WORKER_AGENT_MAX_JOBS; i++)
        if (self->jobs[i].active) {
            size_t len = strlen(buf);
            snprintf(buf + len, size - len, "%s'%s'", len ? ", " : "", self->jobs[i].job->name);
        }
    if (!buf[0])
        snprintf(buf, size, "none");
    return buf;
}

/* ---- START_JOB ---- */

static int
s_start_reply(zdist_rpc_call_t *call, const s_job_t *j, bool created)
{
    worker_backend_t *be = worker_trainer_backend(worker_session_trainer(j->sess));
    zdist_comm_t *comm = worker_session_comm(j->sess);
    zdist_worker_started_t r = {
        .job = j->job->name,
        .strategy = zdist_strategy_name(j->job->strategy),
        .num_replicas = worker_trainer_num_replicas(worker_session_trainer(j->sess)),
        .steps_per_epoch = zdist_input_steps_per_epoch(worker_session_input(j->sess)),
        .num_variables = worker_trainer_vars(worker_session_trainer(j->sess))->n,
        .num_shards = worker_psd_is(be) ? worker_psd_num_shards(be) : 0,
        .created = created,
        .collective_endpoint = comm ? zdist_comm_endpoint(comm) : "",
    };
    return zdist_worker_reply_started(call, &r);
}

static int
s_start_job(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_worker_start_t *req = zdist_rpc_call_body(call);
    s_job_t *j = s_held(self, req->job->name);
    size_t body_len = 0;
    const uint8_t *body = zdist_msg_body(zdist_rpc_call_request(call), &body_len);
    char held[1200];
    if (j) {
        if (body_len == j->start_len && memcmp(body, j->start_body, body_len) == 0 && !j->failed)
            return s_start_reply(call, j, false); /* a repeated start (the caller retried) */
        return zdist_rpc_call_refuse(
            call, ZDIST_STATUS_FAILED_PRECONDITION,
            "job '%s' is running on worker task %d; STOP_JOB it before starting it again", j->job->name,
            self->config.worker_task);
    }
    /* multi_worker_mirrored (and tpu across workers) owns the worker: its
       ring steps in lockstep with the other workers, so it runs alone. */
    bool mwm = zdist_strategy_syncs_workers(req->job->strategy);
    int nheld = 0;
    for (int i = 0; i < WORKER_AGENT_MAX_JOBS; i++) {
        const s_job_t *o = &self->jobs[i];
        if (!o->active)
            continue;
        nheld++;
        if (mwm || zdist_strategy_syncs_workers(o->job->strategy))
            return zdist_rpc_call_refuse(
                call, ZDIST_STATUS_FAILED_PRECONDITION,
                "worker task %d runs job '%s' (%s); a multi_worker_mirrored or tpu job shares a worker "
                "with no other: STOP_JOB it first, or wait for it to end",
                self->config.worker_task, o->job->name, zdist_strategy_name(o->job->strategy));
    }
    if (nheld >= self->config.max_jobs)
        return zdist_rpc_call_refuse(
            call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
            "worker task %d holds %d jobs (%s), its limit (zdist-worker --max-jobs %d); STOP_JOB one "
            "first, or keep the coordinator's --max-running-jobs at most the workers' --max-jobs",
            self->config.worker_task, nheld, s_held_names(self, held, sizeof held), self->config.max_jobs);
    for (int i = 0; i < WORKER_AGENT_MAX_JOBS && !j; i++)
        if (!self->jobs[i].active)
            j = &self->jobs[i];
    int status = ZDIST_STATUS_INVALID_ARGUMENT;
    zdist_error_t err = {0};
    zdist_job_t job; /* the session takes it */
    if (zdist_job_copy(req->job, &job, &err) < 0)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_RESOURCE_EXHAUSTED, "%s", err.text);
    const char *eps[WORKER_AGENT_MAX_PS];
    int nps = 0;
    for (size_t i = 0; i < req->num_ps; i++)
        eps[nps++] = req->ps_endpoints[i];
    for (int i = 0; nps == 0 && i < self->config.num_ps; i++)
        eps[i] = self->config.ps_endpoints[i];
    if (nps == 0)
        nps = self->config.num_ps;
    char host[WORKER_AGENT_ENDPOINT_MAX] = "";
    if (zdist_endpoint_split(self->config.endpoint, host, sizeof host, NULL) < 0)
        host[0] = 0;
    worker_session_config_t cfg = {
        .worker_index = req->worker_index,
        .num_workers = req->num_workers,
        .host_workers = self->config.host_workers,
        .ps_endpoints = eps,
        .num_ps = job.strategy == ZDIST_STRATEGY_PARAMETER_SERVER ? nps : 0,
        .ps_timeout_ms = req->ps_timeout_ms > 0 ? req->ps_timeout_ms : self->config.ps_timeout_ms,
        .variable_prefix = req->variable_prefix,
        .create_variables = req->create_variables,
        .ring_host = host,
        .collective_timeout_ms = req->collective_timeout_ms,
        .repeat_input = req->repeat_input,
        .confined = true,
        .confine_data = self->config.confine_data,
        .plugin_dirs = self->config.plugin_dirs,
    };
    const char *roots[WORKER_AGENT_MAX_DIRS];
    for (int i = 0; i < self->config.num_data_roots; i++)
        roots[i] = self->config.data_roots[i];
    cfg.data_roots = roots;
    cfg.num_data_roots = (size_t)self->config.num_data_roots;
    worker_session_stage_t stage;
    s_job_t nj = {0};
    nj.sess = worker_session_new(&job, &cfg, &stage, &err);
    if (!nj.sess) {
        zdist_job_release(&job);
        if (stage == WORKER_SESSION_CONFINED)
            status = ZDIST_STATUS_PERMISSION_DENIED;
        else if (stage == WORKER_SESSION_DATASET)
            status = err.code == -ENOENT ? ZDIST_STATUS_NOT_FOUND : ZDIST_STATUS_INVALID_ARGUMENT;
        else if (stage != WORKER_SESSION_BAD_JOB && stage != WORKER_SESSION_MODEL)
            status = zdist_status_from_errno(err.code ? err.code : -ENOMEM);
        return zdist_rpc_call_refuse(call, status, "%s", err.text);
    }
    nj.job = worker_session_job(nj.sess);
    nj.num_workers = req->num_workers > 0 ? req->num_workers : 1;
    nj.worker_index = req->worker_index;
    nj.collective_timeout_ms = req->collective_timeout_ms > 0 ? req->collective_timeout_ms : nj.job->collective_timeout_ms;
    nj.start_body = malloc(body_len ? body_len : 1);
    if (!nj.start_body) {
        s_job_release(&nj);
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
    memcpy(nj.start_body, body, body_len);
    nj.start_len = body_len;
    nj.active = true;
    nj.last_loss = NAN;
    nj.last_served = self->turns;
    *j = nj;
    if (worker_session_blas_threads(j->sess) > 0)
        zsys_info("BLAS threads per replica: %d (%ld cores, %d worker%s on this host, %d replica%s each)",
                  worker_session_blas_threads(j->sess), sysconf(_SC_NPROCESSORS_ONLN),
                  self->config.host_workers > 0 ? self->config.host_workers : 1,
                  self->config.host_workers > 1 ? "s" : "", j->job->num_replicas, j->job->num_replicas == 1 ? "" : "s");
    bool created = worker_session_created(j->sess);
    zsys_info("job '%s' started: model %s, %s, input pipeline %d of %d sharded by %s, %lld steps per epoch%s",
              j->job->name, j->job->model, zdist_strategy_name(j->job->strategy), j->worker_index, j->num_workers,
              j->job->exactly_once ? "nothing (visitation exactly_once: the whole dataset, closures name the batches)"
                                   : zdist_auto_shard_policy_name(worker_session_shard_policy(j->sess)),
              (long long)zdist_input_steps_per_epoch(worker_session_input(j->sess)),
              req->create_variables ? (created ? ", variables created" : ", variables already there") : "");
    return s_start_reply(call, j, created);
}

/* The running job named `name`, or a refusal. */
static s_job_t *
s_the_job(self_t *self, zdist_rpc_call_t *call, const char *name)
{
    s_job_t *j = s_held(self, name);
    if (j)
        return j;
    char held[1200];
    s_held_names(self, held, sizeof held);
    if (strcmp(held, "none") == 0)
        zdist_rpc_call_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                              "no job is running on worker task %d; START_JOB first",
                              self->config.worker_task);
    else
        zdist_rpc_call_refuse(call, ZDIST_STATUS_NOT_FOUND, "unknown job '%s'; worker task %d runs job%s %s",
                              name ? name : "", self->config.worker_task, strchr(held, ',') ? "s" : "", held);
    return NULL;
}

/* ---- RUN_STEPS ---- */

static int
s_run_steps(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_worker_run_t *req = zdist_rpc_call_body(call);
    s_job_t *j = s_the_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    if (j->failed)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                                     "job '%s' failed at step %lld (%s); STOP_JOB and START_JOB it again",
                                     j->job->name, (long long) j->steps + 1, j->error);
    if (worker_session_comm(j->sess) && !j->connected)
        return zdist_rpc_call_refuse(
            call, ZDIST_STATUS_FAILED_PRECONDITION,
            "job '%s' is multi_worker_mirrored over %d workers: CONNECT the ring before RUN_STEPS",
            j->job->name, j->num_workers);
    int64_t n = req->steps > 0 ? req->steps : j->job->steps_per_execution;
    if (n < 1)
        n = 1;
    if (n > ZDIST_WORKER_MAX_STEPS_PER_CALL)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                                     "steps: %lld is outside 0..%d (0: steps_per_execution)", (long long) n,
                                     ZDIST_WORKER_MAX_STEPS_PER_CALL);
    zdist_worker_step_t *res = calloc((size_t)n, sizeof *res);
    worker_outputs_t *vals = calloc((size_t)n, sizeof *vals);
    int rc = 0;
    if (!res || !vals) {
        rc = zdist_rpc_call_refuse(call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                                   "out of memory for %lld steps' outputs", (long long) n);
        goto out;
    }
    int64_t done = 0;
    bool end = false;
    worker_backend_t *be = worker_trainer_backend(worker_session_trainer(j->sess));
    bool fault_hit = false;
    /* A stopping worker answers with the steps it ran: $TERM waits one step, not a whole call. */
    while (done < n && !atomic_load(&self->stopping)) {
        zdist_error_t err = {0};
        worker_outputs_t *o = &vals[done];
        int64_t epoch = 0;
        int64_t t0 = zdist_clock_now_us();
        if (worker_psd_is(be))
            worker_psd_set_job_step(be, req->first_step > 0 ? (uint64_t) (req->first_step + done) : 0);
        worker_session_set_batch(j->sess, req->first_step > 0 ? req->first_step - 1 + done : -1);
        int more = worker_session_step(j->sess, o, &epoch, &err);
        if (more < 0) {
            self->counters.failed_steps++;
            j->failed = true;
            snprintf(j->error, sizeof j->error, "%s", err.text);
            zsys_error("job '%s' step %lld failed: %s", j->job->name, (long long)j->steps + 1, j->error);
            rc = zdist_rpc_call_refuse(call, zdist_status_from_errno(more), "job '%s' step %lld: %s",
                                       j->job->name, (long long) j->steps + 1, j->error);
            goto out;
        }
        if (more == 0) {
            end = true;
            break;
        }
        j->steps++;
        worker_epoch_read_t er;
        if (worker_session_epoch_read(j->sess, &er))
            zsys_info("job '%s': input epoch %lld read %lld examples (fingerprint %016llx)", j->job->name,
                      (long long)er.epoch, (long long)er.examples, (unsigned long long)er.fingerprint);
        j->last_loss = worker_outputs_get(o, ZDIST_OUTPUT_LOSS, NAN);
        self->counters.steps++;
        fault_hit |= worker_fault_after_push(&self->fault, self->counters.steps);
        self->counters.loss = j->last_loss;
        double ex = worker_outputs_get(o, ZDIST_OUTPUT_EXAMPLES, 0);
        self->counters.examples += ex > 0 ? (uint64_t)ex : 0;
        zdist_prom_histogram_observe(&self->counters.step_seconds, (double)(zdist_clock_now_us() - t0) / 1e6);
        zdist_worker_step_t *r = &res[done];
        r->step = j->steps;
        r->epoch = epoch;
        r->num_outputs = o->n;
        for (int k = 0; k < o->n; k++) {
            r->names[k] = o->names[k];
            r->values[k] = o->values[k];
        }
        done++;
    }
    if (worker_psd_is(be))
        worker_psd_set_job_step(be, 0); /* writes outside a closure are no step's */
    worker_fault_after_closure(&self->fault, fault_hit);
    j->end_of_data = end;
    zdist_worker_ran_t ran = {.steps = res, .num_steps = (size_t)done, .worker_step = j->steps, .end_of_data = end};
    rc = zdist_worker_reply_ran(call, &ran);
out:
    free(res);
    free(vals);
    return rc;
}

/* ---- EVALUATE ---- */

static int
s_evaluate(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_worker_job_arg_t *req = zdist_rpc_call_body(call);
    s_job_t *j = s_the_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    if (j->failed)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                                     "job '%s' failed (%s); STOP_JOB and START_JOB it again", j->job->name,
                                     j->error);
    if (!worker_session_has_test(j->sess))
        return zdist_rpc_call_refuse(
            call, ZDIST_STATUS_FAILED_PRECONDITION,
            "job '%s' has no test set; add dataset.test (or dataset.synthetic.test_n)", j->job->name);
    worker_eval_t ev;
    zdist_error_t err = {0};
    int rc = worker_session_evaluate(j->sess, &ev, &err);
    if (rc < 0) {
        worker_eval_release(&ev);
        if (rc != -EINVAL && rc != -EIO) {
            j->failed = true;
            snprintf(j->error, sizeof j->error, "%s", err.text);
        }
        return zdist_rpc_call_refuse(call, zdist_status_from_errno(rc), "job '%s' evaluation: %s",
                                     j->job->name, err.text);
    }
    zdist_evaluation_t reply = {
        .correct = (int64_t)llround(ev.correct),
        .total = (int64_t)llround(ev.total),
        .loss_sum = ev.loss_sum,
        .has_correct = ev.has_correct,
    };
    /* a binary classifier's predictions and labels: the coordinator's exact AUC of every worker's together */
    if (ev.auc)
        reply.scored = zdist_auc_exact_parts(ev.auc, &reply.predictions, &reply.positives);
    zsys_info("job '%s' evaluated at step %lld: %lld examples, loss %.4f%s, %lld scored", j->job->name,
              (long long)j->steps, (long long)reply.total, ev.total > 0 ? ev.loss_sum / ev.total : NAN,
              ev.has_correct ? "" : " (no accuracy)", (long long)(reply.scored > 0 ? reply.scored : 0));
    rc = zdist_worker_reply_evaluation(call, &reply);
    worker_eval_release(&ev);
    return rc;
}

/* ---- CONNECT, GET_STATE, SET_STATE ---- */

static int
s_connect(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_worker_connect_t *req = zdist_rpc_call_body(call);
    s_job_t *j = s_the_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    if (!zdist_strategy_syncs_workers(j->job->strategy))
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                                     "job '%s' is %s: only multi_worker_mirrored and tpu "
                                     "connect a ring",
                                     j->job->name, zdist_strategy_name(j->job->strategy));
    if (req->num_endpoints != (size_t)j->num_workers)
        return zdist_rpc_call_refuse(
            call, ZDIST_STATUS_INVALID_ARGUMENT,
            "endpoints: %zu given, the job was started over %d workers; send one per worker, in rank "
            "order",
            req->num_endpoints, j->num_workers);
    zdist_comm_t *comm = worker_session_comm(j->sess);
    if (!comm || j->connected) /* one worker: no ring; or a retried CONNECT (the reply has no body) */
        return 0;
    zdist_error_t err = {0};
    if (zdist_comm_connect(comm, req->endpoints, &err) < 0)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT, "connecting the ring: %s",
                                     err.text);
    worker_local_set_comm(worker_trainer_backend(worker_session_trainer(j->sess)), comm, j->num_workers, j->collective_timeout_ms);
    j->connected = true;
    zsys_info("job '%s': rank %d of %d in the ring, right neighbour %s", j->job->name, j->worker_index, j->num_workers,
              req->endpoints[(j->worker_index + 1) % j->num_workers]);
    return 0;
}

/* The job whose variables live in this worker (not on psds), or a refusal. */
static s_job_t *
s_local_job(self_t *self, zdist_rpc_call_t *call, const char *name)
{
    s_job_t *j = s_the_job(self, call, name);
    if (j && !worker_local_is(worker_trainer_backend(worker_session_trainer(j->sess)))) {
        zdist_rpc_call_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                              "job '%s' keeps its variables on the ps tasks: checkpoint them there (PS_SAVE)",
                              j->job->name);
        return NULL;
    }
    return j;
}

static int
s_get_state(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_worker_job_arg_t *req = zdist_rpc_call_body(call);
    s_job_t *j = s_local_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    if (j->failed)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                                     "job '%s' failed (%s): its variables may be half updated", j->job->name,
                                     j->error);
    worker_backend_t *be = worker_trainer_backend(worker_session_trainer(j->sess));
    const worker_vars_t *vars = worker_trainer_vars(worker_session_trainer(j->sess));
    zdist_msg_t *reply = zdist_rpc_call_reply(call);
    int nslots = worker_local_num_slots(be);
    for (int v = 0; v < vars->n; v++) {
        const worker_var_t *var = &vars->vars[v];
        /* Its declared shape, which the checkpoint keeps for readers (SET_STATE checks only the bytes). */
        zdist_shape_t shape = var->shape;
        size_t bytes = (size_t)var->n * sizeof(float);
        const float *w = NULL;
        int rc = be->ops->read(be, 0, v, &w);
        /* Copies: the next step changes the variables while the reply may
           still be queued. */
        if (rc == 0)
            rc = zdist_msg_add_tensor_copy(reply, var->name, ZDIST_DTYPE_FLOAT32, &shape, w, bytes);
        for (int k = 0; k < nslots && rc == 0; k++) {
            const float *slot = worker_local_slot(be, v, k);
            char name[512];
            snprintf(name, sizeof name, "%s/slot%d", var->name, k);
            if (slot)
                rc = zdist_msg_add_tensor_copy(reply, name, ZDIST_DTYPE_FLOAT32, &shape, slot, bytes);
        }
        if (rc < 0)
            return zdist_rpc_call_refuse(call, ZDIST_STATUS_RESOURCE_EXHAUSTED, "copying variable '%s': %s",
                                         var->name, strerror(-rc));
    }
    zdist_worker_state_t body = {.job = j->job->name, .step = j->steps, .iterations = worker_local_iterations(be)};
    return zdist_worker_reply_state(call, &body);
}

/* The request's tensor named `name` with n float32 elements, or NULL. */
static const zdist_tensor_t *
s_state_tensor(const zdist_msg_t *msg, const char *name, int64_t n, bool *ret_bad)
{
    for (size_t i = 0; i < zdist_msg_tensor_count(msg); i++) {
        const zdist_tensor_t *t = zdist_msg_tensor(msg, i);
        if (!t->name || strcmp(t->name, name) != 0)
            continue;
        *ret_bad = t->dtype != ZDIST_DTYPE_FLOAT32 || t->nbytes != (size_t)n * sizeof(float);
        return t;
    }
    return NULL;
}

static int
s_set_state(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_worker_state_t *req = zdist_rpc_call_body(call);
    s_job_t *j = s_local_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    const zdist_msg_t *msg = zdist_rpc_call_request(call);
    worker_backend_t *be = worker_trainer_backend(worker_session_trainer(j->sess));
    const worker_vars_t *vars = worker_trainer_vars(worker_session_trainer(j->sess));
    int nslots = worker_local_num_slots(be), used = 0;
    /* Everything is checked before anything is written. */
    for (int v = 0; v < vars->n; v++) {
        const worker_var_t *var = &vars->vars[v];
        bool bad = false;
        if (!s_state_tensor(msg, var->name, var->n, &bad) || bad)
            return zdist_rpc_call_refuse(
                call, ZDIST_STATUS_INVALID_ARGUMENT,
                "variable '%s' (float32, %lld elements) is %s in the state; send every variable of "
                "model '%s'",
                var->name, (long long) var->n, bad ? "of another dtype or size" : "missing", j->job->model);
        used++;
        for (int k = 0; k < nslots && worker_local_slot(be, v, k); k++) {
            char name[512];
            snprintf(name, sizeof name, "%s/slot%d", var->name, k);
            if (!s_state_tensor(msg, name, var->n, &bad) || bad)
                return zdist_rpc_call_refuse(
                    call, ZDIST_STATUS_INVALID_ARGUMENT,
                    "optimizer slot '%s' is %s in the state (the job's optimizer has %d slots)", name,
                    bad ? "of another dtype or size" : "missing", nslots);
            used++;
        }
    }
    if ((size_t)used != zdist_msg_tensor_count(msg))
        return zdist_rpc_call_refuse(
            call, ZDIST_STATUS_INVALID_ARGUMENT,
            "the state has %zu tensors, model '%s' with its optimizer has %d; was it saved by another "
            "job?",
            zdist_msg_tensor_count(msg), j->job->model, used);
    for (int v = 0; v < vars->n; v++) {
        const worker_var_t *var = &vars->vars[v];
        bool bad;
        const float *slots[ZDIST_OPTIM_MAX_SLOTS] = {0};
        for (int k = 0; k < nslots && worker_local_slot(be, v, k); k++) {
            char name[512];
            snprintf(name, sizeof name, "%s/slot%d", var->name, k);
            slots[k] = s_state_tensor(msg, name, var->n, &bad)->data;
        }
        worker_local_set_state(be, v, s_state_tensor(msg, var->name, var->n, &bad)->data, slots);
    }
    worker_local_set_iterations(be, req->iterations);
    for (int64_t i = 0; i < req->skip_steps; i++) {
        const zdist_input_step_t *st;
        int more = zdist_input_next(worker_session_input(j->sess), &st);
        if (more < 0)
            return zdist_rpc_call_refuse(call, ZDIST_STATUS_INTERNAL, "skipping to step %lld: %s",
                                         (long long) req->skip_steps, strerror(-more));
        if (more == 0)
            break;
    }
    j->steps = req->step;
    zsys_info("job '%s': state of step %lld set (%zu tensors, %lld batches skipped)", j->job->name,
              (long long)req->step, zdist_msg_tensor_count(msg), (long long)req->skip_steps);
    return zdist_worker_reply_state_set(call, used);
}

/* ---- STOP_JOB, STATUS ---- */

static int
s_stop_job(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_worker_job_arg_t *req = zdist_rpc_call_body(call);
    s_job_t *j = s_the_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    int rc = zdist_worker_reply_stopped(call, j->steps);
    zsys_info("job '%s' stopped after %lld steps", j->job->name, (long long)j->steps);
    s_job_release(j);
    return rc;
}

static int
s_status(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const s_snapshot_t *n = &self->snap;
    zdist_worker_status_t reply = {.worker_task = self->config.worker_task};
    if (n->active) {
        reply.job = n->job;
        reply.running = !n->failed;
        reply.steps = n->steps;
        reply.last_loss = n->last_loss;
        reply.strategy = n->strategy;
        reply.failed = n->failed;
        reply.error = n->error;
    }
    return zdist_worker_reply_status(call, &reply);
}

/* ---- the steps thread ---- */

/* Requests that touch the job run on the steps thread, in arrival order,
   so a long RUN_STEPS or START_JOB (loading the data) never stops this
   thread from answering STATUS, PING and $TERM. */
static const struct {
    uint32_t method;
    zdist_rpc_handler_fn *fn;
} s_offloaded[] = {
    {ZDIST_WORKER_START_JOB, s_start_job},
    {ZDIST_WORKER_RUN_STEPS, s_run_steps},
    {ZDIST_WORKER_EVALUATE, s_evaluate},
    {ZDIST_WORKER_STOP_JOB, s_stop_job},
    {ZDIST_WORKER_CONNECT, s_connect},
    {ZDIST_WORKER_GET_STATE, s_get_state},
    {ZDIST_WORKER_SET_STATE, s_set_state},
};

static int
s_offload(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    s_work_t *w = calloc(1, sizeof *w);
    if (!w)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    for (size_t i = 0; i < sizeof s_offloaded / sizeof s_offloaded[0]; i++)
        if (s_offloaded[i].method == zdist_rpc_call_method(call))
            w->fn = s_offloaded[i].fn;
    assert(w->fn); /* the method table names s_offload only for these */
    const void *body = zdist_rpc_call_body(call);
    const char *job = "";
    switch (zdist_rpc_call_method(call)) {
    case ZDIST_WORKER_START_JOB:
        job = ((const zdist_worker_start_t *)body)->job->name;
        w->priority = ((const zdist_worker_start_t *)body)->job->priority;
        break;
    case ZDIST_WORKER_RUN_STEPS:
        job = ((const zdist_worker_run_t *)body)->job;
        break;
    case ZDIST_WORKER_CONNECT:
        job = ((const zdist_worker_connect_t *)body)->job;
        break;
    case ZDIST_WORKER_SET_STATE:
        job = ((const zdist_worker_state_t *)body)->job;
        break;
    default: /* EVALUATE, STOP_JOB, GET_STATE */
        job = ((const zdist_worker_job_arg_t *)body)->job;
        break;
    }
    snprintf(w->job, sizeof w->job, "%s", job ? job : "");
    w->call = zdist_rpc_call_defer(call);
    if (zsock_send(self->steps, "sp", "RUN", w) < 0) {
        /* Not handed on: the error returned makes the RPC layer answer the
           call (finishing it here would leave the layer a freed call). */
        free(w);
        return zdist_rpc_call_fail(call, ZDIST_STATUS_UNAVAILABLE, "worker task %d cannot run the request now",
                                   self->config.worker_task);
    }
    return 0;
}

/* The next request to run (worker_sched_pick: each job's in arrival order,
   then priority, then round robin); a job not held yet (its START_JOB, or a
   request to refuse) counts as never served, at its priority. Takes it off
   the queue. */
static s_work_t *
s_pick(self_t *self, s_work_t **queue)
{
    size_t n = 0;
    for (s_work_t *w = *queue; w; w = w->next)
        n++;
    if (n == 0)
        return NULL;
    worker_sched_item_t *items = calloc(n, sizeof *items);
    size_t pick = 0;
    if (items) { /* out of memory: the oldest request */
        size_t i = 0;
        for (s_work_t *w = *queue; w; w = w->next, i++) {
            const s_job_t *j = s_held(self, w->job);
            items[i] = (worker_sched_item_t){w->job, j ? j->job->priority : w->priority, j ? j->last_served : 0};
        }
        pick = worker_sched_pick(items, n);
        free(items);
    }
    s_work_t **at = queue;
    while (pick--)
        at = &(*at)->next;
    s_work_t *w = *at;
    *at = w->next;
    w->next = NULL;
    return w;
}

static void
s_run_work(self_t *self, zsock_t *pipe, s_work_t *w)
{
    if (atomic_load(&self->stopping))
        w->rc = zdist_rpc_call_fail(w->call, ZDIST_STATUS_UNAVAILABLE, "worker task %d is stopping",
                                    self->config.worker_task);
    else
        w->rc = w->fn(w->call, self);
    self->turns++;
    s_job_t *j = s_held(self, w->job);
    if (j)
        j->last_served = self->turns;
    s_snapshot(self, j, &w->snap);
    w->snap.counters = self->counters;
    zsock_send(pipe, "sp", "DONE", w);
}

/* Takes what the agent sent while requests ran, then runs one picked by
   s_pick; FLUSH is answered once every request before it has run. */
static void
s_steps_actor(zsock_t *pipe, void *args)
{
    self_t *self = args;
    zsock_signal(pipe, 0);
    s_work_t *queue = NULL, **tail = &queue;
    bool term = false;
    while (!term) {
        bool flush = false;
        while (!term && !flush && (!queue || (zsock_events(pipe) & ZMQ_POLLIN))) {
            char *cmd = NULL;
            void *ptr = NULL;
            if (zsock_recv(pipe, "sp", &cmd, &ptr) < 0) {
                term = true;
                break;
            }
            term = !cmd || streq(cmd, "$TERM");
            if (cmd && streq(cmd, "RUN") && ptr) {
                *tail = ptr;
                tail = &((s_work_t *)ptr)->next;
            } else if (cmd && streq(cmd, "FLUSH")) {
                flush = true;
            }
            free(cmd);
        }
        if (flush || term) {
            /* Everything received before runs (refused UNAVAILABLE once stopping). */
            for (s_work_t *w; (w = s_pick(self, &queue));)
                s_run_work(self, pipe, w);
            tail = &queue;
            if (flush)
                zsock_send(pipe, "sp", "FLUSHED", NULL);
            continue;
        }
        s_work_t *w = s_pick(self, &queue);
        if (w) {
            s_run_work(self, pipe, w);
            for (tail = &queue; *tail; tail = &(*tail)->next)
                ;
        }
    }
}

/* Sends a request the steps thread has run. */
static void
s_finish(self_t *self, s_work_t *w)
{
    zdist_msg_t *reply = zdist_rpc_call_reply(w->call);
    if (w->rc < 0 && zdist_msg_status(reply) == ZDIST_STATUS_OK)
        zdist_msg_set_status(reply, zdist_status_from_errno(w->rc), "method %u failed: %s",
                             zdist_rpc_call_method(w->call), strerror(-w->rc));
    zdist_rpc_call_finish(&w->call);
    self->snap = w->snap;
    zdist_daemon_set_jobs(self->snap.njobs); /* a SIGTERM with jobs held asks the chief for a checkpoint */
    free(w);
    s_notify(self);
}

static int
s_on_steps(zloop_t *loop, zsock_t *sock, void *arg)
{
    char *cmd = NULL;
    void *ptr = NULL;
    if (zsock_recv(sock, "sp", &cmd, &ptr) == 0 && cmd && streq(cmd, "DONE") && ptr)
        s_finish(arg, ptr);
    free(cmd);
    return 0;
}

static const zdist_rpc_method_t s_methods[] = {
    {ZDIST_WORKER_START_JOB, "start_job", &zdist_worker_body_start_job, s_offload, 0, 0, ZDIST_ROLE_CHIEF},
    {ZDIST_WORKER_RUN_STEPS, "run_steps", &zdist_worker_body_run_steps, s_offload, 0, 0, ZDIST_ROLE_CHIEF},
    {ZDIST_WORKER_EVALUATE, "evaluate", &zdist_worker_body_evaluate, s_offload, 0, 0, ZDIST_ROLE_CHIEF},
    {ZDIST_WORKER_STOP_JOB, "stop_job", &zdist_worker_body_stop_job, s_offload, 0, 0, ZDIST_ROLE_CHIEF},
    {ZDIST_WORKER_STATUS, "status", NULL, s_status, 0, 0, 0},
    {ZDIST_WORKER_CONNECT, "connect", &zdist_worker_body_connect, s_offload, 0, 0, ZDIST_ROLE_CHIEF},
    {ZDIST_WORKER_GET_STATE, "get_state", &zdist_worker_body_get_state, s_offload, 0, 0, ZDIST_ROLE_CHIEF},
    {ZDIST_WORKER_SET_STATE, "set_state", &zdist_worker_body_set_state, s_offload, 0, 1024, ZDIST_ROLE_CHIEF},
};
#define S_NMETHODS (sizeof s_methods / sizeof s_methods[0])

/* ---- --http ---- */

/* /metrics, on the agent's thread: the counters of the last snapshot. */
static void
s_metrics(void *arg, FILE *f)
{
    self_t *self = arg;
    const s_counters_t *c = &self->snap.counters;
    zdist_rpc_server_write_metrics(self->rpc, f, "zdist_worker");
    zdist_prom_family(f, "zdist_worker_steps_total", "counter", "Training steps run by this worker.");
    zdist_prom_sample(f, "zdist_worker_steps_total", (double)c->steps, NULL);
    zdist_prom_family(f, "zdist_worker_examples_total", "counter", "Training examples consumed by this worker.");
    zdist_prom_sample(f, "zdist_worker_examples_total", (double)c->examples, NULL);
    zdist_prom_family(f, "zdist_worker_failed_steps_total", "counter", "Training steps that failed.");
    zdist_prom_sample(f, "zdist_worker_failed_steps_total", (double)c->failed_steps, NULL);
    zdist_prom_family(f, "zdist_worker_loss", "gauge", "Loss of the last training step (NaN before one).");
    zdist_prom_sample(f, "zdist_worker_loss", c->steps ? c->loss : NAN, NULL);
    zdist_prom_family(f, "zdist_worker_step_seconds", "histogram", "Wall time of one training step on this worker.");
    zdist_prom_histogram_write(f, "zdist_worker_step_seconds", NULL, 0, &c->step_seconds);
    zdist_prom_family(f, "zdist_worker_job_active", "gauge", "Jobs the worker holds (0 when idle).");
    zdist_prom_sample(f, "zdist_worker_job_active", self->snap.njobs, NULL);
    zdist_prom_family(f, "zdist_worker_task", "gauge", "This worker's index in the worker job.");
    zdist_prom_sample(f, "zdist_worker_task", (double)self->config.worker_task, NULL);
}

/* ---- the actor ---- */

void
worker_agent_actor(zsock_t *pipe, void *args)
{
    self_t *self = calloc(1, sizeof *self);
    zsock_signal(pipe, 0);
    if (!self) {
        zstr_send(pipe, "ERROR out of memory");
        return;
    }
    self->config = *(const worker_agent_config_t *)args;
    if (self->config.max_jobs <= 0 || self->config.max_jobs > WORKER_AGENT_MAX_JOBS)
        self->config.max_jobs = WORKER_AGENT_DEFAULT_JOBS;
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = self->config.evaluator ? "evaluator" : "worker";
    opts.limits = self->config.limits;
    if (self->config.max_calls_per_peer)
        opts.max_calls_per_peer = self->config.max_calls_per_peer;
    if (self->config.max_connections_per_peer)
        opts.max_connections_per_peer = self->config.max_connections_per_peer;
    opts.log = zdist_daemon_rpc_log;
    zdist_error_t err = {0};
    self->rpc = zdist_rpc_server_new(self->config.endpoint, s_methods, S_NMETHODS, self, &opts, &err);
    if (!self->rpc) {
        zstr_sendf(pipe, "ERROR %s", err.text);
        free(self);
        return;
    }
    if (worker_fault_arm(&self->fault, &err) < 0) {
        zstr_sendf(pipe, "ERROR %s", err.text);
        zdist_rpc_server_destroy(&self->rpc);
        free(self);
        return;
    }
    zdist_prom_histogram_init_seconds(&self->counters.step_seconds);
    self->counters.loss = NAN;
    self->snap.counters = self->counters;
    zloop_t *loop = zloop_new();
    self->metrics = (zdist_http_metrics_t){s_metrics, self};
    if (loop && *self->config.http &&
        !(self->http = zdist_daemon_http(self->config.http, loop, zdist_http_serve_metrics, &self->metrics, &err))) {
        zstr_sendf(pipe, "ERROR %s", err.text);
        zloop_destroy(&loop);
        zdist_rpc_server_destroy(&self->rpc);
        free(self);
        return;
    }
    zstr_sendf(pipe, "READY %s", zdist_rpc_server_endpoint(self->rpc));

    self->steps = zactor_new(s_steps_actor, self);
    if (loop && self->steps) {
        zloop_reader(loop, zactor_sock(self->steps), s_on_steps, self);
        zdist_daemon_serve(loop, pipe, self->rpc, 32);
        zloop_reader_end(loop, zactor_sock(self->steps));
        zdist_http_destroy(&self->http);
        zloop_destroy(&loop);
    } else {
        zsys_error("cannot start the steps thread: out of memory");
        zdist_http_destroy(&self->http);
        zloop_destroy(&loop);
    }
    /* Requests still queued for the steps thread are answered (UNAVAILABLE
       past the one running) before the server goes. */
    atomic_store(&self->stopping, true);
    if (self->steps && zsock_send(self->steps, "sp", "FLUSH", NULL) == 0)
        for (;;) {
            char *cmd = NULL;
            void *ptr = NULL;
            if (zsock_recv(self->steps, "sp", &cmd, &ptr) < 0) {
                free(cmd);
                if (errno == EINTR) /* a stop and continue: the steps thread still runs */
                    continue;
                break;
            }
            bool flushed = cmd && streq(cmd, "FLUSHED");
            if (cmd && streq(cmd, "DONE") && ptr)
                s_finish(self, ptr);
            free(cmd);
            if (flushed)
                break;
        }
    zactor_destroy(&self->steps);
    for (int i = 0; i < WORKER_AGENT_MAX_JOBS; i++) {
        if (self->jobs[i].active)
            zsys_info("job '%s' dropped at step %lld by the stop", self->jobs[i].job->name,
                      (long long)self->jobs[i].steps);
        s_job_release(&self->jobs[i]);
    }
    zdist_rpc_server_destroy(&self->rpc);
    free(self);
}
