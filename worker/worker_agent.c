/* worker_agent: worker.proto handlers — one job at a time, its steps run on the actor's thread — as a czmq actor. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>


#include "worker.pb-c.h"
#include "wire/body.h"
#include "worker_agent.h"
#include "zdist/job.h"
#include "worker_psd.h"
#include "worker_registry.h"
#include "worker_trainer.h"
#include "zdist/cluster.h"
#include "zdist/collective.h"
#include "zdist/input.h"
#include "zdist/daemon.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

/* Most steps one RUN_STEPS may ask for (a peer-controlled quantity). */
#define S_MAX_STEPS_PER_CALL 100000

typedef struct {
    bool active;
    bool failed;
    char error[2 * ZDIST_ERROR_TEXT_MAX + 4];
    char *json; /* the START_JOB text, to recognise a repeated start */
    zdist_job_t job;
    worker_registry_t *reg;
    worker_trainer_t *tr;
    zdist_dataset_t *train, *test;
    zdist_input_context_t *ictx;
    zdist_input_t *in;
    int worker_index, num_workers;
    int64_t steps;
    double last_loss;
    bool end_of_data;
    worker_psd_config_t psd; /* valid during START_JOB only (borrowed strings) */
    /* multi_worker_mirrored with more than one worker */
    zdist_comm_t *comm;
    bool connected;
    int64_t collective_timeout_ms;
} s_job_t;

typedef struct {
    worker_agent_config_t config;
    zdist_rpc_server_t *rpc;
    s_job_t job;
} self_t;

/* Sets the reply's status and logs the refusal once, here. */
static int
s_refuse(zdist_rpc_call_t *call, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int
s_refuse(zdist_rpc_call_t *call, int status, const char *fmt, ...)
{
    char text[3 * ZDIST_ERROR_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    zsys_warning("refused method %u from %s: %s: %s", zdist_rpc_call_method(call),
                 zdist_msg_peer(zdist_rpc_call_request(call)), zdist_status_name(status), text);
    return zdist_rpc_call_fail(call, status, "%s", text);
}

static void
s_job_release(s_job_t *j)
{
    zdist_input_destroy(&j->in);
    zdist_input_context_destroy(&j->ictx);
    worker_trainer_destroy(&j->tr);
    zdist_comm_destroy(&j->comm); /* after the trainer: its backend borrows it */
    zdist_dataset_destroy(&j->train);
    zdist_dataset_destroy(&j->test);
    worker_registry_destroy(&j->reg);
    if (j->active || j->job.name)
        zdist_job_release(&j->job);
    free(j->json);
    memset(j, 0, sizeof *j);
}

static void
s_notify(self_t *self)
{
    s_job_t *j = &self->job;
    if (!j->active)
        sd_notifyf(0, "STATUS=worker task %d serving, no job", self->config.worker_task);
    else
        sd_notifyf(0, "STATUS=worker task %d: job '%s' step %lld loss %.4f%s", self->config.worker_task,
                   j->job.name, (long long)j->steps, j->last_loss, j->failed ? " (failed)" : "");
}

static worker_backend_t *
s_make_psd(const worker_vars_t *vars, void *arg, zdist_error_t *err)
{
    return worker_psd_new(vars, arg, err);
}

/* Names the psd in a failure the step ABI reports only as an errno. */
static void
s_step_error(s_job_t *j, const zdist_error_t *err)
{
    worker_backend_t *be = j->tr ? worker_trainer_backend(j->tr) : NULL;
    const char *ps = be && worker_psd_is(be) ? worker_psd_last_error(be)
                     : worker_local_is(be)   ? worker_local_last_error(be)
                                             : "";
    snprintf(j->error, sizeof j->error, "%s%s%s", err->text, ps[0] ? ": " : "", ps);
}

/* OpenBLAS's threads spin (sched_yield) while they wait for work: more of
   them than cores, over the workers on this host and their replica threads,
   slows every step (2.5x for two workers on two cores). The environment's
   OPENBLAS_NUM_THREADS / OMP_NUM_THREADS win. */
static void
s_blas_threads(self_t *self, int replicas)
{
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("OMP_NUM_THREADS"))
        return;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int share = self->config.host_workers > 0 ? self->config.host_workers : 1;
    int n = cores > 0 ? (int)(cores / ((long)share * (replicas > 0 ? replicas : 1))) : 1;
    if (n < 1)
        n = 1;
    openblas_set_num_threads(n);
    zsys_info("BLAS threads per replica: %d (%ld cores, %d worker%s on this host, %d replica%s each)", n, cores,
              share, share == 1 ? "" : "s", replicas, replicas == 1 ? "" : "s");
}

/* ---- START_JOB ---- */

static int
s_start_reply(zdist_rpc_call_t *call, const s_job_t *j, bool created)
{
    Zdist__Worker__StartJobReply reply = ZDIST__WORKER__START_JOB_REPLY__INIT;
    reply.job = j->job.name;
    reply.strategy = (char *)zdist_strategy_name(j->job.strategy);
    reply.num_replicas = worker_trainer_num_replicas(j->tr);
    reply.steps_per_epoch = zdist_input_steps_per_epoch(j->in);
    reply.num_variables = worker_trainer_vars(j->tr)->n;
    worker_backend_t *be = worker_trainer_backend(j->tr);
    reply.num_shards = worker_psd_is(be) ? worker_psd_num_shards(be) : 0;
    reply.created = created;
    reply.collective_endpoint = j->comm ? (char *)zdist_comm_endpoint(j->comm) : "";
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
}

/* multi_worker_mirrored: binds this rank's end of the ring on the host the
   worker serves on (a fresh port); CONNECT joins it to the others. */
static int
s_comm_new(self_t *self, s_job_t *j, int64_t timeout_ms, zdist_error_t *err)
{
    char host[WORKER_AGENT_ENDPOINT_MAX], bind[WORKER_AGENT_ENDPOINT_MAX + 16];
    if (zdist_endpoint_split(self->config.endpoint, host, sizeof host, NULL) < 0)
        return zdist_error_set(err, -EINVAL, "cannot derive a bind address from '%s'", self->config.endpoint);
    snprintf(bind, sizeof bind, "tcp://%s:*", host);
    j->collective_timeout_ms = timeout_ms > 0 ? timeout_ms : j->job.collective_timeout_ms;
    /* Steps block the event loop that feeds systemd's watchdog: a step
       waiting out the deadline for a lost peer must not get us killed. */
    uint64_t wd_us = 0;
    if (sd_watchdog_enabled(0, &wd_us) > 0 && wd_us > 0 &&
        (uint64_t)j->collective_timeout_ms * 1000 * 4 >= wd_us * 3)
        return zdist_error_set(err, -EINVAL,
                               "strategy.collective_timeout_ms %lld is not under 3/4 of this worker's watchdog "
                               "interval (%llu ms, WatchdogSec= of its unit): a step waiting that long for a lost "
                               "peer would get the worker restarted; lower it or raise WatchdogSec",
                               (long long)j->collective_timeout_ms, (unsigned long long)(wd_us / 1000));
    zdist_comm_config_t cc = {.rank = j->worker_index,
                              .size = j->num_workers,
                              .bind = bind,
                              .bytes_per_pack = (size_t)j->job.bytes_per_pack,
                              .timeout_ms = j->collective_timeout_ms};
    j->comm = zdist_comm_new(&cc, err);
    return j->comm ? 0 : (err->code ? err->code : -EINVAL);
}

static int
s_start_job(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Worker__StartJobRequest *req = (const Zdist__Worker__StartJobRequest *)zdist_rpc_call_body(call);
    s_job_t *j = &self->job;
    if (j->active) {
        if (strcmp(j->json, req->job_json) == 0 && !j->failed)
            return s_start_reply(call, j, false); /* a repeated start (the caller retried) */
        return s_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                        "job '%s' is running on worker task %d; STOP_JOB it before starting another", j->job.name,
                        self->config.worker_task);
    }
    s_job_t nj = {0};
    zdist_error_t err = {0};
    int status = ZDIST_STATUS_INVALID_ARGUMENT, rc;
    char *plugin_path = NULL;
    if (!req->job_json || !*req->job_json) {
        s_refuse(call, status, "job_json: empty; send the job document");
        goto fail;
    }
    if (zdist_job_parse(req->job_json, req->base_dir && *req->base_dir ? req->base_dir : NULL, &nj.job, &err) < 0) {
        s_refuse(call, status, "job_json: %s", err.text);
        goto fail;
    }
    nj.num_workers = req->num_workers > 0 ? req->num_workers : 1;
    nj.worker_index = req->worker_index;
    if (nj.worker_index < 0 || nj.worker_index >= nj.num_workers) {
        s_refuse(call, status, "worker_index: %d is outside 0..%d (num_workers %d)", nj.worker_index,
                 nj.num_workers - 1, nj.num_workers);
        goto fail;
    }
    const zdist_job_t *job = &nj.job;
    const char *eps[WORKER_AGENT_MAX_PS];
    int nps = 0;
    if (job->strategy == ZDIST_STRATEGY_PARAMETER_SERVER) {
        if (job->num_replicas != 1) {
            s_refuse(call, status,
                     "strategy.num_replicas: parameter_server runs 1 replica per worker, got %d; add workers instead",
                     job->num_replicas);
            goto fail;
        }
        if (req->n_ps_endpoints > WORKER_AGENT_MAX_PS) {
            s_refuse(call, status, "ps_endpoints: %zu ps tasks, at most %d", req->n_ps_endpoints,
                     WORKER_AGENT_MAX_PS);
            goto fail;
        }
        for (size_t i = 0; i < req->n_ps_endpoints; i++)
            eps[nps++] = req->ps_endpoints[i];
        if (nps == 0)
            for (int i = 0; i < self->config.num_ps; i++)
                eps[nps++] = self->config.ps_endpoints[i];
        if (nps == 0) {
            s_refuse(call, status,
                     "ps_endpoints: none given and the worker's cluster has no ps tasks; parameter_server needs them");
            goto fail;
        }
        nj.psd = (worker_psd_config_t){.endpoints = eps, .num_ps = nps, .partitioner = job->partitioner,
                                       .timeout_ms = req->ps_timeout_ms > 0 ? req->ps_timeout_ms
                                                                            : self->config.ps_timeout_ms,
                                       .retries = 2,
                                       .prefix = req->variable_prefix};
    }

    nj.ictx = zdist_input_context_new(nj.num_workers, nj.worker_index, nj.num_workers * job->num_replicas, &err);
    zdist_auto_shard_policy_t applied = ZDIST_AUTO_SHARD_DATA;
    if (!nj.ictx || (rc = zdist_job_load_dataset(job, false, nj.ictx, job->shard_policy, &nj.train, &applied, &err)) < 0 ||
        (job->has_test && (rc = zdist_job_load_dataset(job, true, NULL, ZDIST_AUTO_SHARD_OFF, &nj.test, NULL, &err)) < 0)) {
        s_refuse(call, err.code == -ENOENT ? ZDIST_STATUS_NOT_FOUND : status, "dataset: %s", err.text);
        goto fail;
    }
    const char *env = getenv("ZDIST_PLUGIN_PATH");
    if (asprintf(&plugin_path, "%s:%s", job->plugin_path ? job->plugin_path : "", env ? env : "") < 0)
        plugin_path = NULL;
    nj.reg = plugin_path ? worker_registry_new(plugin_path) : NULL;
    const zdist_model_t *model = nj.reg ? worker_registry_find(nj.reg, job->model, &err) : NULL;
    if (!model) {
        s_refuse(call, nj.reg ? status : ZDIST_STATUS_RESOURCE_EXHAUSTED, "model.name: %s",
                 nj.reg ? err.text : "out of memory");
        goto fail;
    }
    zdist_model_info_t info = {
        .input_dim = zdist_dataset_dim(nj.train),
        .num_classes = zdist_dataset_num_classes(nj.train),
        .sparse = zdist_dataset_is_sparse(nj.train),
        .label_dtype = zdist_dataset_label_dtype(nj.train),
        .seed = job->seed,
    };
    if (nj.test && zdist_dataset_num_classes(nj.test) > info.num_classes)
        info.num_classes = zdist_dataset_num_classes(nj.test);
    worker_trainer_config_t cfg = {.strategy = job->strategy, .num_replicas = job->num_replicas,
                                   .optim = job->optimizer, .seed = job->seed};
    if (job->strategy == ZDIST_STRATEGY_MULTI_WORKER_MIRRORED) {
        cfg.num_workers = nj.num_workers;
        cfg.worker_index = nj.worker_index;
    }
    if (job->strategy == ZDIST_STRATEGY_PARAMETER_SERVER) {
        cfg.make_backend = s_make_psd;
        cfg.make_backend_arg = &nj.psd;
    }
    s_blas_threads(self, job->num_replicas);
    nj.tr = worker_trainer_new(model, job->model_params, &info, &cfg, &err);
    if (!nj.tr) {
        s_refuse(call, zdist_status_from_errno(err.code ? err.code : -ENOMEM), "%s", err.text);
        goto fail;
    }
    if (job->strategy == ZDIST_STRATEGY_MULTI_WORKER_MIRRORED && nj.num_workers > 1 &&
        (rc = s_comm_new(self, &nj, req->collective_timeout_ms, &err)) < 0) {
        s_refuse(call, zdist_status_from_errno(rc), "the collective ring: %s", err.text);
        goto fail;
    }
    bool created = false;
    worker_backend_t *be = worker_trainer_backend(nj.tr);
    if (req->create_variables && worker_psd_is(be) &&
        (rc = worker_psd_create_variables(be, &job->optimizer, job->seed, &created, &err)) < 0) {
        s_refuse(call, zdist_status_from_errno(rc), "creating the variables: %s", err.text);
        goto fail;
    }
    zdist_input_options_t opts;
    zdist_input_options_init(&opts, job->global_batch_size);
    opts.shuffle = job->shuffle;
    opts.shuffle_seed = job->shuffle_seed;
    opts.drop_remainder = job->drop_remainder;
    opts.epochs = job->epochs > 0 ? job->epochs : ZDIST_INPUT_REPEAT_FOREVER;
    opts.shard_policy = applied;
    opts.prefetch = job->prefetch;
    nj.in = zdist_input_new(nj.train, nj.ictx, &opts, &err);
    if (!nj.in) {
        s_refuse(call, status, "dataset: %s", err.text);
        goto fail;
    }
    nj.json = strdup(req->job_json);
    if (!nj.json) {
        s_refuse(call, ZDIST_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        goto fail;
    }
    free(plugin_path);
    nj.psd = (worker_psd_config_t){0};
    nj.active = true;
    nj.last_loss = NAN;
    *j = nj;
    zsys_info("job '%s' started: model %s, %s, input pipeline %d of %d, %lld steps per epoch%s", j->job.name,
              j->job.model, zdist_strategy_name(j->job.strategy), j->worker_index, j->num_workers,
              (long long)zdist_input_steps_per_epoch(j->in),
              req->create_variables ? (created ? ", variables created" : ", variables already there") : "");
    s_notify(self);
    return s_start_reply(call, j, created);
fail:
    free(plugin_path);
    s_job_release(&nj);
    return -EINVAL;
}

/* The running job named `name`, or a refusal. */
static s_job_t *
s_the_job(self_t *self, zdist_rpc_call_t *call, const char *name)
{
    s_job_t *j = &self->job;
    if (!j->active) {
        s_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION, "no job is running on worker task %d; START_JOB first",
                 self->config.worker_task);
        return NULL;
    }
    if (!name || strcmp(name, j->job.name) != 0) {
        s_refuse(call, ZDIST_STATUS_NOT_FOUND, "unknown job '%s'; worker task %d runs job '%s'", name ? name : "",
                 self->config.worker_task, j->job.name);
        return NULL;
    }
    return j;
}

/* ---- RUN_STEPS ---- */

static int
s_run_steps(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Worker__RunStepsRequest *req = (const Zdist__Worker__RunStepsRequest *)zdist_rpc_call_body(call);
    s_job_t *j = s_the_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    if (j->failed)
        return s_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                        "job '%s' failed at step %lld (%s); STOP_JOB and START_JOB it again", j->job.name,
                        (long long)j->steps + 1, j->error);
    if (j->comm && !j->connected)
        return s_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                        "job '%s' is multi_worker_mirrored over %d workers: CONNECT the ring before RUN_STEPS",
                        j->job.name, j->num_workers);
    int64_t n = req->steps > 0 ? req->steps : j->job.steps_per_execution;
    if (n < 1)
        n = 1;
    if (req->steps < 0 || n > S_MAX_STEPS_PER_CALL)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT, "steps: %lld is outside 0..%d (0: steps_per_execution)",
                        (long long)req->steps, S_MAX_STEPS_PER_CALL);
    Zdist__Worker__StepResult *res = calloc((size_t)n, sizeof *res);
    Zdist__Worker__StepResult **resp = calloc((size_t)n, sizeof *resp);
    Zdist__Worker__Output *outs = calloc((size_t)n * WORKER_MAX_OUTPUTS, sizeof *outs);
    Zdist__Worker__Output **outp = calloc((size_t)n * WORKER_MAX_OUTPUTS, sizeof *outp);
    worker_outputs_t *vals = calloc((size_t)n, sizeof *vals);
    int rc = 0;
    if (!res || !resp || !outs || !outp || !vals) {
        rc = s_refuse(call, ZDIST_STATUS_RESOURCE_EXHAUSTED, "out of memory for %lld steps' outputs", (long long)n);
        goto out;
    }
    int64_t done = 0;
    bool end = false;
    while (done < n) {
        const zdist_input_step_t *st;
        int more = zdist_input_next(j->in, &st);
        if (more < 0) {
            j->failed = true;
            snprintf(j->error, sizeof j->error, "reading the training data: %s", strerror(-more));
            rc = s_refuse(call, ZDIST_STATUS_INTERNAL, "job '%s' step %lld: %s", j->job.name,
                          (long long)j->steps + 1, j->error);
            goto out;
        }
        if (more == 0) {
            end = true;
            break;
        }
        zdist_error_t err = {0};
        worker_outputs_t *o = &vals[done];
        if ((rc = worker_trainer_step(j->tr, st, false, o, &err)) < 0) {
            j->failed = true;
            s_step_error(j, &err);
            zsys_error("job '%s' step %lld failed: %s", j->job.name, (long long)j->steps + 1, j->error);
            rc = s_refuse(call, zdist_status_from_errno(rc), "job '%s' step %lld: %s", j->job.name,
                          (long long)j->steps + 1, j->error);
            s_notify(self);
            goto out;
        }
        j->steps++;
        j->last_loss = worker_outputs_get(o, ZDIST_OUTPUT_LOSS, NAN);
        Zdist__Worker__StepResult *r = &res[done];
        zdist__worker__step_result__init(r);
        r->step = j->steps;
        r->epoch = st->epoch;
        bool has_examples = false;
        for (int k = 0; k < o->n; k++) {
            Zdist__Worker__Output *x = &outs[done * WORKER_MAX_OUTPUTS + k];
            zdist__worker__output__init(x);
            x->name = o->names[k];
            x->value = o->values[k];
            outp[done * WORKER_MAX_OUTPUTS + k] = x;
            has_examples = has_examples || strcmp(o->names[k], ZDIST_OUTPUT_EXAMPLES) == 0;
        }
        r->n_outputs = (size_t)o->n;
        if (!has_examples && o->n < WORKER_MAX_OUTPUTS) {
            /* Every step reports its examples, as the coordinator counts them. */
            int k = o->n++;
            snprintf(o->names[k], WORKER_OUTPUT_NAME_MAX, "%s", ZDIST_OUTPUT_EXAMPLES);
            o->values[k] = (double)st->size;
            Zdist__Worker__Output *x = &outs[done * WORKER_MAX_OUTPUTS + k];
            zdist__worker__output__init(x);
            x->name = o->names[k];
            x->value = o->values[k];
            outp[done * WORKER_MAX_OUTPUTS + k] = x;
            r->n_outputs++;
        }
        r->outputs = &outp[done * WORKER_MAX_OUTPUTS];
        resp[done] = r;
        done++;
    }
    j->end_of_data = end;
    Zdist__Worker__RunStepsReply reply = ZDIST__WORKER__RUN_STEPS_REPLY__INIT;
    reply.n_steps = (size_t)done;
    reply.steps = resp;
    reply.worker_step = j->steps;
    reply.end_of_data = end;
    rc = zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
    s_notify(self);
out:
    free(res);
    free(resp);
    free(outs);
    free(outp);
    free(vals);
    return rc;
}

/* ---- EVALUATE ---- */

static int64_t
s_gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int
s_evaluate(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Worker__EvaluateRequest *req = (const Zdist__Worker__EvaluateRequest *)zdist_rpc_call_body(call);
    s_job_t *j = s_the_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    if (j->failed)
        return s_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION, "job '%s' failed (%s); STOP_JOB and START_JOB it again",
                        j->job.name, j->error);
    if (!j->test)
        return s_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                        "job '%s' has no test set; add dataset.test (or dataset.synthetic.test_n)", j->job.name);
    const zdist_job_t *job = &j->job;
    /* Synthetic: the test examples follow the training ones. Batches are
       dealt round robin over the workers: each evaluates its shard. */
    int64_t skip = job->format == ZDIST_INPUT_FORMAT_SYNTHETIC ? job->synthetic_n : 0;
    int64_t batch = skip > 0 ? s_gcd(skip, job->global_batch_size) : job->global_batch_size;
    zdist_error_t err = {0};
    zdist_input_context_t *ictx = zdist_input_context_new(1, 0, job->num_replicas, &err);
    zdist_input_t *in = NULL;
    int rc = 0;
    if (ictx) {
        zdist_input_options_t opts;
        zdist_input_options_init(&opts, batch);
        opts.shard_policy = ZDIST_AUTO_SHARD_OFF;
        in = zdist_input_new(j->test, ictx, &opts, &err);
    }
    if (!in) {
        rc = s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT, "dataset.test: %s", err.text);
        goto out;
    }
    double loss = 0, correct = 0, total = 0;
    bool has_correct = false;
    int64_t b = 0;
    const zdist_input_step_t *st;
    for (;;) {
        int more = zdist_input_next(in, &st);
        if (more < 0) {
            rc = s_refuse(call, ZDIST_STATUS_INTERNAL, "reading the test set: %s", strerror(-more));
            goto out;
        }
        if (more == 0)
            break;
        if (skip > 0) {
            skip -= st->size;
            continue;
        }
        if (b++ % j->num_workers != j->worker_index)
            continue;
        worker_outputs_t o;
        if ((rc = worker_trainer_step(j->tr, st, true, &o, &err)) < 0) {
            j->failed = true;
            s_step_error(j, &err);
            rc = s_refuse(call, zdist_status_from_errno(rc), "job '%s' evaluation: %s", job->name, j->error);
            goto out;
        }
        double ex = worker_outputs_get(&o, ZDIST_OUTPUT_EXAMPLES, (double)st->size);
        loss += worker_outputs_get(&o, ZDIST_OUTPUT_LOSS, 0) * ex;
        double c = worker_outputs_get(&o, ZDIST_OUTPUT_CORRECT, NAN);
        if (!isnan(c)) {
            has_correct = true;
            correct += c;
        }
        total += ex;
    }
    Zdist__Worker__EvaluateReply reply = ZDIST__WORKER__EVALUATE_REPLY__INIT;
    reply.correct = (int64_t)llround(correct);
    reply.total = (int64_t)llround(total);
    reply.loss_sum = loss;
    reply.has_correct = has_correct;
    rc = zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
    zsys_info("job '%s' evaluated at step %lld: %lld examples, loss %.4f%s", job->name, (long long)j->steps,
              (long long)reply.total, total > 0 ? loss / total : NAN, has_correct ? "" : " (no accuracy)");
out:
    zdist_input_destroy(&in);
    zdist_input_context_destroy(&ictx);
    return rc;
}

/* ---- CONNECT, GET_STATE, SET_STATE ---- */

static int
s_connect(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Worker__ConnectRequest *req = (const Zdist__Worker__ConnectRequest *)zdist_rpc_call_body(call);
    s_job_t *j = s_the_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    if (j->job.strategy != ZDIST_STRATEGY_MULTI_WORKER_MIRRORED)
        return s_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION, "job '%s' is %s: only multi_worker_mirrored connects "
                        "a ring", j->job.name, zdist_strategy_name(j->job.strategy));
    if (req->n_endpoints != (size_t)j->num_workers)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                        "endpoints: %zu given, the job was started over %d workers; send one per worker, in rank "
                        "order", req->n_endpoints, j->num_workers);
    for (size_t i = 0; i < req->n_endpoints; i++)
        if (!req->endpoints[i] || strncmp(req->endpoints[i], "tcp://", 6) != 0 || strchr(req->endpoints[i], '*'))
            return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                            "endpoints[%zu]: '%s' is not a tcp://HOST:PORT endpoint", i,
                            req->endpoints[i] ? req->endpoints[i] : "");
    Zdist__Worker__ConnectReply reply = ZDIST__WORKER__CONNECT_REPLY__INIT;
    if (!j->comm || j->connected) /* one worker: no ring; or a retried CONNECT */
        return zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
    zdist_error_t err = {0};
    if (zdist_comm_connect(j->comm, (const char *const *)req->endpoints, &err) < 0)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT, "connecting the ring: %s", err.text);
    worker_local_set_comm(worker_trainer_backend(j->tr), j->comm, j->num_workers, j->collective_timeout_ms);
    j->connected = true;
    zsys_info("job '%s': rank %d of %d in the ring, right neighbour %s", j->job.name, j->worker_index, j->num_workers,
              req->endpoints[(j->worker_index + 1) % j->num_workers]);
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
}

/* The job whose variables live in this worker (not on psds), or a refusal. */
static s_job_t *
s_local_job(self_t *self, zdist_rpc_call_t *call, const char *name)
{
    s_job_t *j = s_the_job(self, call, name);
    if (j && !worker_local_is(worker_trainer_backend(j->tr))) {
        s_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                 "job '%s' keeps its variables on the ps tasks: checkpoint them there (PS_SAVE)", j->job.name);
        return NULL;
    }
    return j;
}

static int
s_get_state(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Worker__GetStateRequest *req = (const Zdist__Worker__GetStateRequest *)zdist_rpc_call_body(call);
    s_job_t *j = s_local_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    if (j->failed)
        return s_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                        "job '%s' failed (%s): its variables may be half updated", j->job.name, j->error);
    worker_backend_t *be = worker_trainer_backend(j->tr);
    const worker_vars_t *vars = worker_trainer_vars(j->tr);
    zdist_msg_t *reply = zdist_rpc_call_reply(call);
    int nslots = worker_local_num_slots(be);
    for (int v = 0; v < vars->n; v++) {
        const worker_var_t *var = &vars->vars[v];
        zdist_shape_t shape = {.rank = 1, .dims = {var->n}};
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
            return s_refuse(call, ZDIST_STATUS_RESOURCE_EXHAUSTED, "copying variable '%s': %s", var->name,
                            strerror(-rc));
    }
    Zdist__Worker__State body = ZDIST__WORKER__STATE__INIT;
    body.job = j->job.name;
    body.step = j->steps;
    body.iterations = worker_local_iterations(be);
    return zdist_msg_set_body(reply, &body.base);
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
    const Zdist__Worker__State *req = (const Zdist__Worker__State *)zdist_rpc_call_body(call);
    s_job_t *j = s_local_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    if (req->skip_steps < 0 || req->step < 0 || req->iterations < 0)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT, "step, iterations and skip_steps must be >= 0");
    const zdist_msg_t *msg = zdist_rpc_call_request(call);
    worker_backend_t *be = worker_trainer_backend(j->tr);
    const worker_vars_t *vars = worker_trainer_vars(j->tr);
    int nslots = worker_local_num_slots(be), used = 0;
    /* Everything is checked before anything is written. */
    for (int v = 0; v < vars->n; v++) {
        const worker_var_t *var = &vars->vars[v];
        bool bad = false;
        if (!s_state_tensor(msg, var->name, var->n, &bad) || bad)
            return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                            "variable '%s' (float32, %lld elements) is %s in the state; send every variable of "
                            "model '%s'", var->name, (long long)var->n, bad ? "of another dtype or size" : "missing",
                            j->job.model);
        used++;
        for (int k = 0; k < nslots && worker_local_slot(be, v, k); k++) {
            char name[512];
            snprintf(name, sizeof name, "%s/slot%d", var->name, k);
            if (!s_state_tensor(msg, name, var->n, &bad) || bad)
                return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                                "optimizer slot '%s' is %s in the state (the job's optimizer has %d slots)", name,
                                bad ? "of another dtype or size" : "missing", nslots);
            used++;
        }
    }
    if ((size_t)used != zdist_msg_tensor_count(msg))
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                        "the state has %zu tensors, model '%s' with its optimizer has %d; was it saved by another "
                        "job?", zdist_msg_tensor_count(msg), j->job.model, used);
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
        int more = zdist_input_next(j->in, &st);
        if (more < 0)
            return s_refuse(call, ZDIST_STATUS_INTERNAL, "skipping to step %lld: %s", (long long)req->skip_steps,
                            strerror(-more));
        if (more == 0)
            break;
    }
    j->steps = req->step;
    zsys_info("job '%s': state of step %lld set (%zu tensors, %lld batches skipped)", j->job.name,
              (long long)req->step, zdist_msg_tensor_count(msg), (long long)req->skip_steps);
    Zdist__Worker__SetStateReply reply = ZDIST__WORKER__SET_STATE_REPLY__INIT;
    reply.num_tensors = used;
    s_notify(self);
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
}

/* ---- STOP_JOB, STATUS ---- */

static int
s_stop_job(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Worker__StopJobRequest *req = (const Zdist__Worker__StopJobRequest *)zdist_rpc_call_body(call);
    s_job_t *j = s_the_job(self, call, req->job);
    if (!j)
        return -ENOENT;
    Zdist__Worker__StopJobReply reply = ZDIST__WORKER__STOP_JOB_REPLY__INIT;
    reply.steps = j->steps;
    int rc = zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
    zsys_info("job '%s' stopped after %lld steps", j->job.name, (long long)j->steps);
    s_job_release(j);
    s_notify(self);
    return rc;
}

static int
s_status(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    s_job_t *j = &self->job;
    Zdist__Worker__StatusReply reply = ZDIST__WORKER__STATUS_REPLY__INIT;
    reply.worker_task = self->config.worker_task;
    if (j->active) {
        reply.job = j->job.name;
        reply.running = !j->failed;
        reply.steps = j->steps;
        reply.last_loss = j->last_loss;
        reply.strategy = (char *)zdist_strategy_name(j->job.strategy);
        reply.failed = j->failed;
        reply.error = j->error;
    }
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
}

/* Transitional: bodies passed through undecoded until this service has typed ones. */
static const zdist_rpc_body_t s_body_worker_connect_request = {&zdist__worker__connect_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_worker_evaluate_request = {&zdist__worker__evaluate_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_worker_get_state_request = {&zdist__worker__get_state_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_worker_run_steps_request = {&zdist__worker__run_steps_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_worker_start_job_request = {&zdist__worker__start_job_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_worker_state = {&zdist__worker__state__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_worker_status_request = {&zdist__worker__status_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_worker_stop_job_request = {&zdist__worker__stop_job_request__descriptor, 0, NULL, NULL};

static const zdist_rpc_method_t s_methods[] = {
    {ZDIST__WORKER__METHOD__WORKER_START_JOB, "start_job", &s_body_worker_start_job_request,
     s_start_job, 0, 0},
    {ZDIST__WORKER__METHOD__WORKER_RUN_STEPS, "run_steps", &s_body_worker_run_steps_request,
     s_run_steps, 0, 0},
    {ZDIST__WORKER__METHOD__WORKER_EVALUATE, "evaluate", &s_body_worker_evaluate_request, s_evaluate,
     0, 0},
    {ZDIST__WORKER__METHOD__WORKER_STOP_JOB, "stop_job", &s_body_worker_stop_job_request, s_stop_job,
     0, 0},
    {ZDIST__WORKER__METHOD__WORKER_STATUS, "status", &s_body_worker_status_request, s_status, 0, 0},
    {ZDIST__WORKER__METHOD__WORKER_CONNECT, "connect", &s_body_worker_connect_request, s_connect, 0, 0},
    {ZDIST__WORKER__METHOD__WORKER_GET_STATE, "get_state", &s_body_worker_get_state_request,
     s_get_state, 0, 0},
    {ZDIST__WORKER__METHOD__WORKER_SET_STATE, "set_state", &s_body_worker_state, s_set_state, 0, 1024},
};
#define S_NMETHODS (sizeof s_methods / sizeof s_methods[0])

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
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = self->config.evaluator ? "evaluator" : "worker";
    opts.limits = self->config.limits;
    opts.log = zdist_daemon_rpc_log;
    zdist_error_t err = {0};
    self->rpc = zdist_rpc_server_new(self->config.endpoint, s_methods, S_NMETHODS, self, &opts, &err);
    if (!self->rpc) {
        zstr_sendf(pipe, "ERROR %s", err.text);
        free(self);
        return;
    }
    zstr_sendf(pipe, "READY %s", zdist_rpc_server_endpoint(self->rpc));

    zloop_t *loop = zloop_new();
    /* One request per wake-up: a RUN_STEPS may take a while, and the pipe
       ($TERM) gets its turn between requests. */
    zdist_daemon_serve(loop, pipe, self->rpc, 1);
    zloop_destroy(&loop);
    if (self->job.active)
        zsys_info("job '%s' dropped at step %lld by the stop", self->job.job.name, (long long)self->job.steps);
    s_job_release(&self->job);
    zdist_rpc_server_destroy(&self->rpc);
    free(self);
}
