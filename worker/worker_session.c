/* worker_session: the one place a job becomes data, an input pipeline, a model and its trainer on a worker. */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "worker_psd.h"
#include "worker_registry.h"
#include "worker_session.h"
#include "zdist/partition.h"
#include "worker_strategy.h"
#include "zdist/ckpt.h"

#define S_MAX_PS 64

struct worker_session_t {
    zdist_job_t job;
    worker_registry_t *reg;
    worker_trainer_t *tr;
    zdist_dataset_t *train, *test;
    zdist_input_context_t *ictx;
    zdist_input_t *in;
    zdist_comm_t *comm;
    int worker_index, num_workers;
    bool created;
    int blas_threads;
    worker_psd_config_t psd; /* valid during _new only (borrowed strings) */
    worker_epoch_read_t reading, done_reading; /* this epoch's so far; the last one ended */
    zdist_auto_shard_policy_t applied;          /* the shard policy the training input applied */
    bool epoch_ended;
    /* dataset.visitation exactly_once: the job's batch (epoch * steps per
       epoch + batch in it) the next step reads; -1 none named. */
    int64_t next_batch;
};

void
worker_session_destroy(worker_session_t **self_p)
{
    worker_session_t *self = *self_p;
    if (!self)
        return;
    zdist_input_destroy(&self->in);
    zdist_input_context_destroy(&self->ictx);
    worker_trainer_destroy(&self->tr);
    zdist_comm_destroy(&self->comm); /* after the trainer: its backend borrows it */
    zdist_dataset_destroy(&self->train);
    zdist_dataset_destroy(&self->test);
    worker_registry_destroy(&self->reg);
    zdist_job_release(&self->job);
    free(self);
    *self_p = NULL;
}

static worker_backend_t *
s_make_psd(const worker_vars_t *vars, void *arg, zdist_error_t *err)
{
    return worker_psd_new(vars, arg, err);
}

/* OpenBLAS's threads spin (sched_yield) while they wait for work: more of
   them than cores, over the workers on this host and their replica threads,
   slows every step (2.5x for two workers on two cores). The environment's
   OPENBLAS_NUM_THREADS / OMP_NUM_THREADS win (0: left alone). */
static int
s_blas_threads(int host_workers, int replicas)
{
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("OMP_NUM_THREADS"))
        return 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int share = host_workers > 0 ? host_workers : 1;
    int n = cores > 0 ? (int)(cores / ((long)share * (replicas > 0 ? replicas : 1))) : 1;
    if (n < 1)
        n = 1;
    openblas_set_num_threads(n);
    return n;
}

/* multi_worker_mirrored: binds this rank's end of the ring on the worker's
   host (a fresh port); CONNECT joins it to the others. */
static int
s_comm_new(worker_session_t *self, const worker_session_config_t *cfg, zdist_error_t *err)
{
    if (!cfg->ring_host || !*cfg->ring_host)
        return zdist_error_set(err, -EINVAL, "no host to bind this worker's end of the ring on");
    char bind[300];
    snprintf(bind, sizeof bind, "tcp://%s:*", cfg->ring_host);
    int64_t timeout_ms = cfg->collective_timeout_ms > 0 ? cfg->collective_timeout_ms : self->job.collective_timeout_ms;
    /* A step waiting out the deadline for a lost peer must end before
       systemd's watchdog decides the worker hangs. */
    uint64_t wd_us = 0;
    if (sd_watchdog_enabled(0, &wd_us) > 0 && wd_us > 0 && (uint64_t)timeout_ms * 1000 * 4 >= wd_us * 3)
        return zdist_error_set(err, -EINVAL,
                               "strategy.collective_timeout_ms %lld is not under 3/4 of this worker's watchdog "
                               "interval (%llu ms, WatchdogSec= of its unit): a step waiting that long for a lost "
                               "peer would get the worker restarted; lower it or raise WatchdogSec",
                               (long long)timeout_ms, (unsigned long long)(wd_us / 1000));
    zdist_comm_config_t cc = {.rank = self->worker_index,
                              .size = self->num_workers,
                              .bind = bind,
                              .bytes_per_pack = (size_t)self->job.bytes_per_pack,
                              .timeout_ms = timeout_ms};
    self->comm = zdist_comm_new(&cc, err);
    return self->comm ? 0 : (err && err->code ? err->code : -EINVAL);
}

/* err's text prefixed with what failed; the stage for the caller. */
static worker_session_t *
s_fail(worker_session_t **self_p, worker_session_stage_t stage, worker_session_stage_t *ret_stage, int rc,
       const char *prefix, zdist_error_t *err)
{
    if (prefix && err)
        zdist_error_prefix(err, prefix);
    if (err && !err->code)
        err->code = rc < 0 ? rc : -EINVAL;
    if (ret_stage)
        *ret_stage = stage;
    worker_session_destroy(self_p);
    return NULL;
}

/* Where a step of assembling the session failed: its stage, and what to
   prefix err's text with (NULL: nothing). */
typedef struct {
    worker_session_stage_t stage;
    const char *prefix;
} s_where_t;

static int
s_at(s_where_t *w, worker_session_stage_t stage, const char *prefix, int rc)
{
    w->stage = stage;
    w->prefix = prefix;
    return rc;
}

/* What this worker refuses before loading anything: its place, the
   strategy's own limits, and (confined) code or data from elsewhere. */
static int
s_check_job(worker_session_t *self, const worker_session_config_t *cfg, s_where_t *w, zdist_error_t *err)
{
    const zdist_job_t *job = &self->job;
    int rc;
    if (self->worker_index < 0 || self->worker_index >= self->num_workers)
        return zdist_error_set(err, -EINVAL, "worker_index: %d is outside 0..%d (num_workers %d)",
                               self->worker_index, self->num_workers - 1, self->num_workers);
    if (job->strategy == ZDIST_STRATEGY_PARAMETER_SERVER) {
        if (job->num_replicas != 1)
            return zdist_error_set(err, -EINVAL, "strategy.num_replicas: parameter_server runs 1 replica per "
                                   "worker, got %d; add workers instead", job->num_replicas);
        if (cfg->num_ps <= 0 || cfg->num_ps > S_MAX_PS)
            return zdist_error_set(err, -EINVAL, cfg->num_ps <= 0
                                       ? "ps_endpoints: none given and the worker's cluster has no ps tasks; "
                                         "parameter_server needs them"
                                       : "ps_endpoints: too many ps tasks (at most 64)");
        self->psd = (worker_psd_config_t){.endpoints = cfg->ps_endpoints, .num_ps = cfg->num_ps,
                                          .partitioner = job->partitioner, .timeout_ms = cfg->ps_timeout_ms,
                                          .retries = 2, .prefix = cfg->variable_prefix};
    }
    if (job->strategy == ZDIST_STRATEGY_TPU &&
        (rc = zdist_job_check_logical_devices(job->num_replicas, job->logical_devices_per_replica, job->oversubscribe,
                                              err)) < 0)
        return rc;
    if (!cfg->confined)
        return 0;
    if (job->plugin_path && *job->plugin_path)
        return s_at(w, WORKER_SESSION_CONFINED, NULL,
                    zdist_error_set(err, -EACCES,
                                    "plugin_path: '%.200s': a job sent to a cluster names its model by name only "
                                    "(model.name) and never a place to load code from; this worker loads plugins "
                                    "from its --plugin-dir directories (%s): remove plugin_path and ask the "
                                    "operator to install the plugin there", job->plugin_path,
                                    cfg->plugin_dirs && *cfg->plugin_dirs ? cfg->plugin_dirs : "none configured"));
    if (cfg->confine_data && (rc = zdist_job_confine_data(&self->job, cfg->data_roots, cfg->num_data_roots, err)) < 0)
        return s_at(w, rc == -EACCES ? WORKER_SESSION_CONFINED : WORKER_SESSION_DATASET, NULL, rc);
    return 0;
}

/* The model by name: built-in, or a plugin from the job's plugin_path and
   ZDIST_PLUGIN_PATH (confined: the worker's --plugin-dir only). */
static const zdist_model_t *
s_find_model(worker_session_t *self, const worker_session_config_t *cfg, zdist_error_t *err)
{
    const zdist_job_t *job = &self->job;
    char *plugin_path = NULL;
    const char *env = getenv("ZDIST_PLUGIN_PATH");
    if (cfg->confined)
        plugin_path = strdup(cfg->plugin_dirs ? cfg->plugin_dirs : "");
    else if (asprintf(&plugin_path, "%s:%s", job->plugin_path ? job->plugin_path : "", env ? env : "") < 0)
        plugin_path = NULL;
    self->reg = plugin_path ? worker_registry_new(plugin_path, cfg->confined ? "this worker's --plugin-dir directories"
                                                                             : NULL)
                            : NULL;
    free(plugin_path);
    if (!self->reg) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    return worker_registry_find(self->reg, job->model, err);
}

/* The trainer of model on this worker's replicas, with the strategy's
   backend and BLAS threads. */
static int
s_make_trainer(worker_session_t *self, const worker_session_config_t *cfg, const zdist_model_t *model,
               zdist_error_t *err)
{
    const zdist_job_t *job = &self->job;
    zdist_model_info_t info = {
        .input_dim = zdist_dataset_dim(self->train),
        .num_classes = zdist_dataset_num_classes(self->train),
        .sparse = zdist_dataset_is_sparse(self->train),
        .label_dtype = zdist_dataset_label_dtype(self->train),
        .seed = job->seed,
    };
    if (self->test && zdist_dataset_num_classes(self->test) > info.num_classes)
        info.num_classes = zdist_dataset_num_classes(self->test);
    worker_trainer_config_t tc = {.strategy = job->strategy, .num_replicas = job->num_replicas,
                                  .optim = job->optimizer, .seed = job->seed};
    if (zdist_strategy_syncs_workers(job->strategy)) {
        tc.num_workers = self->num_workers;
        tc.worker_index = self->worker_index;
    }
    if (job->strategy == ZDIST_STRATEGY_PARAMETER_SERVER) {
        tc.make_backend = s_make_psd;
        tc.make_backend_arg = &self->psd;
    }
    if (job->strategy == ZDIST_STRATEGY_TPU) {
        /* A logical device is one core: one BLAS thread in each device thread. */
        tc.logical_devices = job->logical_devices_per_replica;
        tc.pin = true;
        openblas_set_num_threads(1);
        self->blas_threads = 1;
    } else {
        self->blas_threads = s_blas_threads(cfg->host_workers, job->num_replicas);
    }
    self->tr = worker_trainer_new(model, job->model_params, &info, &tc, err);
    return self->tr ? 0 : -EINVAL;
}

/* The training input pipeline over this worker's shard. */
static int
s_make_input(worker_session_t *self, const worker_session_config_t *cfg, zdist_auto_shard_policy_t applied,
             zdist_error_t *err)
{
    const zdist_job_t *job = &self->job;
    zdist_input_options_t opts;
    zdist_input_options_init(&opts, job->global_batch_size);
    opts.shuffle = job->shuffle;
    opts.shuffle_seed = job->shuffle_seed;
    opts.drop_remainder = job->drop_remainder;
    opts.epochs = job->epochs > 0 && !cfg->repeat_input ? job->epochs : ZDIST_INPUT_REPEAT_FOREVER;
    opts.shard_policy = applied;
    opts.prefetch = job->prefetch;
    opts.whole_batches = job->strategy == ZDIST_STRATEGY_PARAMETER_SERVER;
    self->in = zdist_input_new(self->train, self->ictx, &opts, err);
    return self->in ? 0 : -EINVAL;
}

/* Everything after the checks, in order; w says where it failed. */
static int
s_assemble(worker_session_t *self, const worker_session_config_t *cfg, s_where_t *w, zdist_error_t *err)
{
    const zdist_job_t *job = &self->job;
    int rc;
    /* exactly_once: every worker reads the whole dataset, in the order all
       share, the batches its closures name (zdist_input_seek). */
    int pipelines = job->exactly_once ? 1 : self->num_workers;
    self->ictx = zdist_input_context_new(pipelines, job->exactly_once ? 0 : self->worker_index,
                                         pipelines * job->num_replicas, err);
    zdist_auto_shard_policy_t applied = ZDIST_AUTO_SHARD_DATA;
    if (!self->ictx)
        return s_at(w, WORKER_SESSION_BAD_JOB, "dataset", -EINVAL);
    if ((rc = zdist_job_load_dataset(job, false, self->ictx, job->shard_policy, &self->train, &applied, err)) < 0 ||
        (job->has_test &&
         (rc = zdist_job_load_dataset(job, true, NULL, ZDIST_AUTO_SHARD_OFF, &self->test, NULL, err)) < 0))
        return s_at(w, WORKER_SESSION_DATASET, "dataset", rc);
    const zdist_model_t *model = s_find_model(self, cfg, err);
    if (!model)
        return s_at(w, WORKER_SESSION_MODEL, "model.name", self->reg ? -EINVAL : -ENOMEM);
    if ((rc = s_make_trainer(self, cfg, model, err)) < 0)
        return s_at(w, WORKER_SESSION_TRAINER, NULL, rc);
    if (zdist_strategy_syncs_workers(job->strategy) && self->num_workers > 1 &&
        (rc = s_comm_new(self, cfg, err)) < 0)
        return s_at(w, WORKER_SESSION_RING, "the collective ring", rc);
    worker_backend_t *be = worker_trainer_backend(self->tr);
    if (cfg->create_variables && worker_psd_is(be) &&
        (rc = worker_psd_create_variables(be, &job->optimizer, job->seed, &self->created, err)) < 0)
        return s_at(w, WORKER_SESSION_VARIABLES, "creating the variables", rc);
    self->psd = (worker_psd_config_t){0};
    self->applied = applied;
    if ((rc = s_make_input(self, cfg, applied, err)) < 0)
        return s_at(w, WORKER_SESSION_BAD_JOB, "dataset", rc);
    return 0;
}

worker_session_t *
worker_session_new(zdist_job_t *job_p, const worker_session_config_t *cfg, worker_session_stage_t *ret_stage,
                   zdist_error_t *err)
{
    worker_session_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->job = *job_p;
    memset(job_p, 0, sizeof *job_p);
    self->num_workers = cfg->num_workers > 0 ? cfg->num_workers : 1;
    self->worker_index = cfg->worker_index;
    self->next_batch = -1;
    s_where_t w = {.stage = WORKER_SESSION_BAD_JOB};
    int rc = s_check_job(self, cfg, &w, err);
    if (rc == 0)
        rc = s_assemble(self, cfg, &w, err);
    if (rc < 0)
        return s_fail(&self, w.stage, ret_stage, rc, w.prefix, err);
    return self;
}

const zdist_job_t *
worker_session_job(const worker_session_t *self)
{
    return &self->job;
}

worker_trainer_t *
worker_session_trainer(worker_session_t *self)
{
    return self->tr;
}

zdist_input_t *
worker_session_input(worker_session_t *self)
{
    return self->in;
}

zdist_comm_t *
worker_session_comm(worker_session_t *self)
{
    return self->comm;
}

bool
worker_session_has_test(const worker_session_t *self)
{
    return self->test != NULL;
}

bool
worker_session_created(const worker_session_t *self)
{
    return self->created;
}

int
worker_session_blas_threads(const worker_session_t *self)
{
    return self->blas_threads;
}

/* A step failure names the psd or the peer the step ABI reports only as an errno. */
static int
s_step_failed(worker_session_t *self, int rc, zdist_error_t *err)
{
    worker_backend_t *be = worker_trainer_backend(self->tr);
    const char *why = worker_psd_is(be) ? worker_psd_last_error(be) : worker_local_is(be) ? worker_local_last_error(be)
                                                                                          : "";
    if (err && why && *why) {
        char text[2 * sizeof err->text + 4];
        snprintf(text, sizeof text, "%s: %s", err->text, why);
        snprintf(err->text, sizeof err->text, "%.*s", (int)sizeof err->text - 1, text);
    }
    if (err && !err->code)
        err->code = rc;
    return rc;
}

/* The step's examples into this epoch's count, by origin. */
static void
s_count_read(worker_session_t *self, const zdist_input_step_t *st)
{
    const int64_t *origin = zdist_dataset_origins(self->train);
    if (!origin)
        return;
    worker_epoch_read_t *e = &self->reading;
    e->epoch = st->epoch;
    for (int r = 0; r < st->num_replicas; r++) {
        const zdist_batch_t *b = &st->replicas[r];
        for (int64_t i = 0; i < b->size; i++)
            e->fingerprint += zdist_partition_id_hash(origin[b->indices[i]]); /* splitmix64, documented */
        e->examples += b->size;
    }
    if (st->step_in_epoch + 1 == zdist_input_steps_per_epoch(self->in)) {
        self->done_reading = *e;
        self->epoch_ended = true;
        *e = (worker_epoch_read_t){0};
    }
}

void
worker_session_set_batch(worker_session_t *self, int64_t batch)
{
    self->next_batch = batch;
}

/* exactly_once: the input moved to the batch the step's closure names
   (none named: the next one, as one process running the job reads them). */
static int
s_seek(worker_session_t *self, zdist_error_t *err)
{
    int64_t spe = zdist_input_steps_per_epoch(self->in), b = self->next_batch;
    if (b < 0)
        return 0;
    int rc = spe > 0 ? zdist_input_seek(self->in, b / spe, b % spe) : -EINVAL;
    if (rc < 0)
        return zdist_error_set(err, rc, "dataset.visitation exactly_once: cannot read batch %lld (%lld batches an "
                               "epoch)", (long long)b, (long long)spe);
    self->next_batch = -1;
    return 0;
}

int
worker_session_step(worker_session_t *self, worker_outputs_t *ret_out, int64_t *ret_epoch, zdist_error_t *err)
{
    const zdist_input_step_t *st;
    if (self->job.exactly_once) {
        int rc = s_seek(self, err);
        if (rc < 0)
            return rc;
    }
    int more = zdist_input_next(self->in, &st);
    if (more < 0)
        return zdist_error_set(err, more, "reading the training data: %s", strerror(-more));
    if (more == 0)
        return 0;
    int rc = worker_trainer_step(self->tr, st, false, ret_out, err);
    if (rc < 0)
        return s_step_failed(self, rc, err);
    /* Every step reports its examples: callers count them. */
    if (isnan(worker_outputs_get(ret_out, ZDIST_OUTPUT_EXAMPLES, NAN)) && ret_out->n < WORKER_MAX_OUTPUTS) {
        int k = ret_out->n++;
        snprintf(ret_out->names[k], WORKER_OUTPUT_NAME_MAX, "%s", ZDIST_OUTPUT_EXAMPLES);
        ret_out->values[k] = (double)st->size;
    }
    if (ret_epoch)
        *ret_epoch = st->epoch;
    s_count_read(self, st);
    return 1;
}

zdist_auto_shard_policy_t
worker_session_shard_policy(const worker_session_t *self)
{
    return self->applied;
}

int
worker_session_epoch_read(worker_session_t *self, worker_epoch_read_t *ret)
{
    if (!self->epoch_ended)
        return 0;
    self->epoch_ended = false;
    *ret = self->done_reading;
    return 1;
}

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

/* The eval step's predictions, with each replica's labels (classes as 0/1,
   or float labels, non-zero positive), into ret->auc. */
static int
s_scored(worker_session_t *self, const zdist_input_step_t *st, worker_eval_t *ret)
{
    for (int r = 0; r < st->num_replicas; r++) {
        const zdist_batch_t *b = &st->replicas[r];
        const float *p;
        int64_t n = worker_trainer_predictions(self->tr, r, &p);
        if (n < 0 || n != b->size)
            continue;
        if (!ret->auc && !(ret->auc = zdist_auc_new(0, NULL)))
            return -ENOMEM;
        uint8_t y[256]; /* labels in chunks: nothing allocated per step */
        for (int64_t at = 0; at < n; at += 256) {
            int64_t k = n - at < 256 ? n - at : 256;
            for (int64_t i = 0; i < k; i++)
                y[i] = zdist_dataset_label_dtype(self->test) == ZDIST_DTYPE_INT32
                           ? ((const int32_t *)b->labels)[at + i] != 0
                           : ((const float *)b->labels)[at + i] != 0;
            int rc = zdist_auc_update_u8(ret->auc, y, p + at, k);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

int
worker_session_evaluate(worker_session_t *self, worker_eval_t *ret, zdist_error_t *err)
{
    memset(ret, 0, sizeof *ret);
    const zdist_job_t *job = &self->job;
    if (!self->test)
        return zdist_error_set(err, -ENOENT, "job '%s' has no test set; add dataset.test (or "
                               "dataset.synthetic.test_n)", job->name);
    /* Synthetic: the test examples follow the training ones, skipped with
       a batch that divides their count so the skip ends exactly there. */
    int64_t skip = job->format == ZDIST_INPUT_FORMAT_SYNTHETIC ? job->synthetic_n : 0;
    int64_t batch = skip > 0 ? s_gcd(skip, job->global_batch_size) : job->global_batch_size;
    zdist_input_context_t *ictx = zdist_input_context_new(1, 0, job->num_replicas, err);
    zdist_input_t *in = NULL;
    if (ictx) {
        zdist_input_options_t opts;
        zdist_input_options_init(&opts, batch);
        opts.shard_policy = ZDIST_AUTO_SHARD_OFF;
        opts.prefetch = job->prefetch;
        in = zdist_input_new(self->test, ictx, &opts, err);
    }
    int rc = 0;
    if (!in) {
        zdist_error_prefix(err, "dataset.test");
        rc = err && err->code ? err->code : -EINVAL;
    }
    worker_backend_t *be = worker_trainer_backend(self->tr);
    if (worker_psd_is(be))
        worker_psd_forget(be); /* the variables as they are now, not as this worker's last step left them */
    int64_t b = 0;
    const zdist_input_step_t *st;
    while (rc == 0) {
        int more = zdist_input_next(in, &st);
        if (more < 0) {
            rc = zdist_error_set(err, more, "reading the test set: %s", strerror(-more));
            break;
        }
        if (more == 0)
            break;
        if (skip > 0) {
            skip -= st->size;
            continue;
        }
        /* Batches are dealt round robin: each worker evaluates its share. */
        if (b++ % self->num_workers != self->worker_index)
            continue;
        worker_outputs_t o;
        if ((rc = worker_trainer_step(self->tr, st, true, &o, err)) < 0) {
            s_step_failed(self, rc, err);
            break;
        }
        double ex = worker_outputs_get(&o, ZDIST_OUTPUT_EXAMPLES, (double)st->size);
        ret->loss_sum += worker_outputs_get(&o, ZDIST_OUTPUT_LOSS, 0) * ex;
        double c = worker_outputs_get(&o, ZDIST_OUTPUT_CORRECT, NAN);
        if (!isnan(c)) {
            ret->has_correct = true;
            ret->correct += c;
        }
        ret->total += ex;
        if (rc == 0 && (rc = s_scored(self, st, ret)) < 0)
            zdist_error_set(err, rc, "evaluation: out of memory for the AUC's predictions");
    }
    zdist_input_destroy(&in);
    zdist_input_context_destroy(&ictx);
    return rc;
}

void
worker_eval_release(worker_eval_t *ev)
{
    if (ev)
        zdist_auc_destroy(&ev->auc);
}

int
worker_session_restore(worker_session_t *self, const char *path, int64_t *ret_step, zdist_error_t *err)
{
    const worker_vars_t *vars = worker_trainer_vars(self->tr);
    worker_backend_t *be = worker_trainer_backend(self->tr);
    char dir[PATH_MAX];
    zdist_ckpt_t ck = {0};
    int rc = zdist_ckpt_locate(path, dir, sizeof dir, err);
    if (rc == 0)
        rc = zdist_ckpt_load(dir, &ck, err);
    for (int v = 0; rc == 0 && v < vars->n; v++) {
        const zdist_ckpt_var_t *cv = zdist_ckpt_find(&ck, vars->vars[v].name);
        if (!cv)
            rc = zdist_error_set(err, -ENOENT, "%s: the model's variable '%s' is not in the checkpoint: was it saved "
                                 "by another model?", dir, vars->vars[v].name);
        else if (cv->n != vars->vars[v].n)
            rc = zdist_error_set(err, -EINVAL, "%s: variable '%s' has %lld elements in the checkpoint, the model "
                                 "declares %lld: was it saved by another model?", dir, cv->name, (long long)cv->n,
                                 (long long)vars->vars[v].n);
    }
    for (int v = 0; rc == 0 && v < vars->n; v++)
        if ((rc = worker_local_set_state(be, v, zdist_ckpt_find(&ck, vars->vars[v].name)->values, NULL)) < 0)
            zdist_error_set(err, rc, "%s: setting variable '%s': %s", dir, vars->vars[v].name, strerror(-rc));
    if (rc == 0)
        *ret_step = ck.step;
    zdist_ckpt_release(&ck);
    return rc;
}
