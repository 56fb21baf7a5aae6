/* worker_eval: zdist-worker --evaluator, TensorFlow's SidecarEvaluator — evaluates each new checkpoint of running jobs. */
#include "worker_eval.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "worker_session.h"
#include "zdist/cluster.h"
#include "zdist/daemon.h"
#include "zdist/ckpt.h"
#include "zdist/file.h"
#include "zdist/job.h"
#include "zdist/prom.h"
#include "zdist/sys.h"

#define S_MAX_JOBS 256
#define S_POLL_MS 300                    /* between two looks at the state directory */
#define S_MAX_TEXT_BYTES (16u << 20)     /* job.json, state.json, a manifest, evaluations.jsonl */

typedef struct {
    char id[128];
    int64_t last_eval;   /* eval_step of the last evaluation written; -1 none */
    bool refused;        /* the job cannot be evaluated here (said once) */
    bool torn;           /* evaluations.jsonl ends without a newline (a kill -9 mid-write) */
    bool seen;           /* present at this look */
    int64_t failed_step; /* the checkpoint whose evaluation failed last (not retried) */
    worker_session_t *sess;
} s_job_t;

/* A job directory not followed (not running when seen): its state.json's
   modification time, so it is read again only when the file changes. */
typedef struct {
    char id[128];
    struct timespec mtime;
} s_idle_t;

typedef struct {
    worker_agent_config_t config;
    zdist_rpc_server_t *rpc;
    zdist_http_t *http;
    zdist_http_metrics_t metrics;
    zactor_t *evaluator;
    /* Counters, written by the evaluation thread, read by /metrics. */
    atomic_llong evaluations, skipped, failures, last_step;
    s_job_t jobs[S_MAX_JOBS];
    int njobs;
    s_idle_t *idle;
    int nidle, idle_cap;
} self_t;

/* True when `id`'s state.json (st) is as it was when last found not running. */
static bool
s_idle_unchanged(self_t *self, const char *id, const struct stat *st)
{
    for (int i = 0; i < self->nidle; i++)
        if (strcmp(self->idle[i].id, id) == 0)
            return self->idle[i].mtime.tv_sec == st->st_mtim.tv_sec &&
                   self->idle[i].mtime.tv_nsec == st->st_mtim.tv_nsec;
    return false;
}

static void
s_idle_note(self_t *self, const char *id, const struct stat *st)
{
    if (strlen(id) >= sizeof self->idle[0].id)
        return;
    for (int i = 0; i < self->nidle; i++)
        if (strcmp(self->idle[i].id, id) == 0) {
            self->idle[i].mtime = st->st_mtim;
            return;
        }
    if (self->nidle == self->idle_cap) {
        int cap = self->idle_cap ? 2 * self->idle_cap : 64;
        s_idle_t *n = cap <= 1 << 20 ? realloc(self->idle, (size_t)cap * sizeof *n) : NULL;
        if (!n)
            return; /* read again at the next look */
        self->idle = n;
        self->idle_cap = cap;
    }
    snprintf(self->idle[self->nidle].id, sizeof self->idle[0].id, "%s", id);
    self->idle[self->nidle++].mtime = st->st_mtim;
}

/* ---- files ---- */

/* dir + "/" + name into buf: false when it does not fit (a path cut short
   would name another file). */
static bool
s_join(char *buf, size_t size, const char *dir, const char *name)
{
    size_t d = strlen(dir), n = strlen(name);
    if (d + 1 + n + 1 > size)
        return false;
    memmove(buf, dir, d);
    buf[d] = '/';
    memcpy(buf + d + 1, name, n + 1);
    return true;
}

/* The highest eval_step in a job's evaluations.jsonl (-1: none); *ret_torn
   when its last line was cut short (a kill -9 during the write). */
static int64_t
s_last_eval(const char *job_dir, bool *ret_torn)
{
    char path[PATH_MAX];
    void *buf = NULL;
    size_t len = 0;
    *ret_torn = false;
    if (!s_join(path, sizeof path, job_dir, "evaluations.jsonl") || zdist_file_read(path, S_MAX_TEXT_BYTES, &buf, &len, NULL) < 0)
        return -1;
    int64_t last = -1;
    char *save = NULL;
    *ret_torn = len > 0 && ((char *)buf)[len - 1] != '\n';
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *o = json_loads(line, 0, NULL);
        json_t *s = json_object_get(o, "eval_step");
        if (json_is_integer(s) && json_integer_value(s) > last)
            last = json_integer_value(s);
        json_decref(o);
    }
    free(buf);
    return last;
}

/* Appends one line, fsync'd. */
static int
s_append(const char *job_dir, bool torn, const char *line, zdist_error_t *err)
{
    char path[PATH_MAX];
    if (!s_join(path, sizeof path, job_dir, "evaluations.jsonl"))
        return zdist_error_set(err, -ENAMETOOLONG, "%s/evaluations.jsonl: path too long", job_dir);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return zdist_error_set(err, -errno, "%s: %s", path, strerror(errno));
    size_t len = strlen(line);
    int rc = 0;
    if ((torn && write(fd, "\n", 1) != 1) || write(fd, line, len) != (ssize_t)len || fsync(fd) < 0)
        rc = zdist_error_set(err, -EIO, "%s: writing: %s", path, strerror(errno));
    close(fd);
    return rc;
}

/* The newest complete checkpoint of a job (-1 when none) and how many
   complete ones are newer than `after` (counted among the newest 1,024). */
static int64_t
s_newest_ckpt(const char *job_dir, int *ret_count_newer, int64_t after)
{
    int64_t steps[1024];
    int n = zdist_ckpt_list(job_dir, true, steps, 1024);
    *ret_count_newer = 0;
    if (n <= 0)
        return -1;
    n = n > 1024 ? 1024 : n;
    for (int i = 0; i < n; i++)
        *ret_count_newer += steps[i] > after;
    return steps[n - 1];
}

/* ---- one job ---- */

/* A one_device session of the job, for evaluation only. NULL with err; a
   job this evaluator cannot evaluate is -ENOTSUP. */
static worker_session_t *
s_session(self_t *self, const char *job_dir, zdist_error_t *err)
{
    char path[PATH_MAX];
    if (!s_join(path, sizeof path, job_dir, "state.json")) {
        zdist_error_set(err, -ENAMETOOLONG, "%s: path too long", job_dir);
        return NULL;
    }
    json_t *st = zdist_json_read(path, S_MAX_TEXT_BYTES, NULL, err);
    if (!st)
        return NULL;
    const char *base = json_string_value(json_object_get(st, "base_dir"));
    s_join(path, sizeof path, job_dir, "job.json"); /* no longer than state.json's */
    void *text = NULL;
    size_t len = 0;
    zdist_job_t job = {0};
    worker_session_t *sess = NULL;
    if (zdist_file_read(path, S_MAX_TEXT_BYTES, &text, &len, err) < 0 ||
        zdist_job_parse(text, base ? base : "", &job, err) < 0)
        goto out;
    if (job.strategy != ZDIST_STRATEGY_PARAMETER_SERVER && !zdist_strategy_syncs_workers(job.strategy)) {
        zdist_error_set(err, -ENOTSUP, "strategy %s: the coordinator runs parameter_server, "
                        "multi_worker_mirrored and tpu jobs only", zdist_strategy_name(job.strategy));
        goto out;
    }
    if (!job.has_test) {
        zdist_error_set(err, -ENOTSUP, "no test set (dataset.test or dataset.synthetic.test_n)");
        goto out;
    }
    job.strategy = ZDIST_STRATEGY_ONE_DEVICE;
    job.num_replicas = 1;
    job.logical_devices_per_replica = 1; /* a tpu job's split layers run their parts in turn */
    job.spmd = job.oversubscribe = false;
    const char *roots[WORKER_AGENT_MAX_DIRS];
    for (int i = 0; i < self->config.num_data_roots; i++)
        roots[i] = self->config.data_roots[i];
    worker_session_config_t sc = {
        .num_workers = 1,
        .host_workers = self->config.host_workers,
        .repeat_input = true,
        .confined = true,
        .confine_data = self->config.confine_data,
        .plugin_dirs = self->config.plugin_dirs,
        .data_roots = roots,
        .num_data_roots = (size_t)self->config.num_data_roots,
    };
    sess = worker_session_new(&job, &sc, NULL, err);
out:
    zdist_job_release(&job);
    free(text);
    json_decref(st);
    return sess;
}

/* Loads checkpoint `step` (under ckpt_root) into the job's session and
   evaluates it; the result goes to job_dir's evaluations.jsonl. */
static int
s_evaluate(self_t *self, s_job_t *j, const char *job_dir, const char *ckpt_root, int64_t step, int skipped,
           zdist_error_t *err)
{
    char ckpt[32], dir[PATH_MAX];
    snprintf(ckpt, sizeof ckpt, "ckpt-%lld", (long long)step);
    if (!s_join(dir, sizeof dir, ckpt_root, ckpt))
        return zdist_error_set(err, -ENAMETOOLONG, "%s: path too long", ckpt_root);
    int64_t t0 = zdist_clock_now_ms();
    /* ps shards (their names in the job's namespace, the coordinator's
       variable_prefix) or multi_worker_mirrored's workers' state, every
       file checked, every variable read and checked before any is set */
    int64_t saved = -1;
    int rc = worker_session_restore(j->sess, dir, &saved, err);
    if (rc == 0 && saved != step)
        rc = zdist_error_set(err, -EBADMSG, "%s: its manifests say step %lld", dir, (long long)saved);
    if (rc < 0)
        return rc;
    worker_eval_t ev;
    rc = worker_session_evaluate(j->sess, &ev, err);
    double auc = NAN;
    if (rc == 0 && ev.auc && zdist_auc_result(ev.auc, &auc) < 0)
        rc = zdist_error_set(err, -ENOMEM, "out of memory for the AUC");
    worker_eval_release(&ev);
    if (rc < 0)
        return rc;
    double secs = (double)(zdist_clock_now_ms() - t0) / 1000.0;
    double loss = ev.total > 0 ? ev.loss_sum / ev.total : NAN;
    double acc = ev.has_correct && ev.total > 0 ? ev.correct / ev.total : NAN;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    json_t *o = json_pack("{s:I, s:o, s:o, s:I, s:f, s:f}", "eval_step", (json_int_t)step, "test_loss",
                          isfinite(loss) ? json_real(loss) : json_null(), "test_accuracy",
                          isfinite(acc) ? json_real(acc) : json_null(), "examples", (json_int_t)ev.total, "time",
                          (double)now.tv_sec + now.tv_nsec / 1e9, "eval_seconds", secs);
    if (o && isfinite(auc))
        json_object_set_new(o, "test_auc", json_real(auc));
    char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    char *nl = line ? malloc(strlen(line) + 2) : NULL;
    if (!nl) {
        free(line);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    sprintf(nl, "%s\n", line);
    free(line);
    rc = s_append(job_dir, j->torn, nl, err);
    free(nl);
    if (rc < 0)
        return rc;
    j->torn = false;
    j->last_eval = step;
    atomic_fetch_add(&self->evaluations, 1);
    atomic_fetch_add(&self->skipped, skipped);
    atomic_store(&self->last_step, step);
    zsys_info("job %s: checkpoint at step %lld evaluated: test loss %.4f, accuracy %.4f over %.0f examples in %.2f s%s",
              j->id, (long long)step, loss, acc, ev.total, secs,
              skipped > 0 ? " (newer checkpoints came meanwhile: older ones skipped)" : "");
    if (skipped > 0)
        zsys_info("job %s: %d older checkpoint%s skipped to evaluate the newest", j->id, skipped,
                  skipped == 1 ? "" : "s");
    return 0;
}

static s_job_t *
s_job(self_t *self, const char *id, const char *job_dir)
{
    for (int i = 0; i < self->njobs; i++)
        if (strcmp(self->jobs[i].id, id) == 0)
            return &self->jobs[i];
    if (self->njobs == S_MAX_JOBS || strlen(id) >= sizeof self->jobs[0].id)
        return NULL;
    s_job_t *j = &self->jobs[self->njobs++];
    memset(j, 0, sizeof *j);
    snprintf(j->id, sizeof j->id, "%s", id);
    j->last_eval = s_last_eval(job_dir, &j->torn);
    j->failed_step = -1;
    if (j->last_eval >= 0)
        zsys_info("job %s: evaluated up to step %lld before (evaluations.jsonl): continuing after it", id,
                  (long long)j->last_eval);
    return j;
}

/* Evaluates the job's newest complete checkpoint (under ckpt_root: its
   job_dir, or its checkpoint.dir) when it is newer than the last one
   evaluated (and did not fail already). */
static void
s_look(self_t *self, s_job_t *j, const char *job_dir, const char *ckpt_root)
{
    int newer = 0;
    int64_t step = s_newest_ckpt(ckpt_root, &newer, j->last_eval);
    if (step <= j->last_eval || step == j->failed_step)
        return;
    zdist_error_t err = {0};
    if (!j->sess && !(j->sess = s_session(self, job_dir, &err))) {
        if (err.code == -ENOTSUP) {
            j->refused = true;
            zsys_notice("job %s: not evaluated: %s", j->id, err.text);
        } else {
            j->failed_step = step; /* tried again with the next checkpoint */
            atomic_fetch_add(&self->failures, 1);
            zsys_warning("job %s: cannot assemble it for evaluation: %s", j->id, err.text);
        }
        return;
    }
    if (s_evaluate(self, j, job_dir, ckpt_root, step, newer - 1, &err) < 0) {
        /* A checkpoint pruned meanwhile, a damaged one: the next newer
           one is tried; this one is not again. */
        j->failed_step = step;
        atomic_fetch_add(&self->failures, 1);
        zsys_warning("job %s: evaluating the checkpoint at step %lld failed: %s", j->id, (long long)step, err.text);
    }
}

/* One look at the state directory: each running job's newest checkpoint,
   and one last look at a job that ended since the previous one. */
static void
s_scan(self_t *self)
{
    char jobs_dir[1100];
    snprintf(jobs_dir, sizeof jobs_dir, "%s/jobs", self->config.state_dir);
    DIR *d = opendir(jobs_dir);
    if (!d)
        return;
    for (int i = 0; i < self->njobs; i++)
        self->jobs[i].seen = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char job_dir[PATH_MAX], path[PATH_MAX];
        if (!s_join(job_dir, sizeof job_dir, jobs_dir, e->d_name) || !s_join(path, sizeof path, job_dir, "state.json"))
            continue;
        s_job_t *j = NULL;
        for (int i = 0; i < self->njobs; i++)
            if (strcmp(self->jobs[i].id, e->d_name) == 0)
                j = &self->jobs[i];
        struct stat sst;
        if (stat(path, &sst) < 0 || (!j && s_idle_unchanged(self, e->d_name, &sst)))
            continue;
        json_t *st = zdist_json_read(path, S_MAX_TEXT_BYTES, NULL, NULL);
        char state[32];
        snprintf(state, sizeof state, "%s", json_is_string(json_object_get(st, "state"))
                                                ? json_string_value(json_object_get(st, "state")) : "?");
        bool running = strcmp(state, "running") == 0;
        /* The coordinator's status names where the checkpoints go (the job's
           checkpoint.dir, else its directory). */
        char ckpt_root[PATH_MAX];
        const char *cd = json_string_value(json_object_get(json_object_get(st, "detail"), "checkpoint_dir"));
        snprintf(ckpt_root, sizeof ckpt_root, "%s", cd && cd[0] == '/' ? cd : job_dir);
        json_decref(st);
        if (!running && !j) {
            s_idle_note(self, e->d_name, &sst); /* queued, or finished before this evaluator saw it run */
            continue;
        }
        if (!j && !(j = s_job(self, e->d_name, job_dir)))
            continue;
        j->seen = true;
        if (!j->refused)
            s_look(self, j, job_dir, ckpt_root);
        if (!running) { /* it ended: that was its last look; follow it again if it runs again */
            zsys_info("job %s ended (%s): last evaluation at step %lld", j->id, state, (long long)j->last_eval);
            s_idle_note(self, j->id, &sst);
            worker_session_destroy(&j->sess);
            *j = self->jobs[--self->njobs];
        }
    }
    closedir(d);
    /* Jobs whose directory went: forget them. */
    for (int i = 0; i < self->njobs;) {
        if (self->jobs[i].seen) {
            i++;
            continue;
        }
        worker_session_destroy(&self->jobs[i].sess);
        self->jobs[i] = self->jobs[--self->njobs];
    }
}

/* The evaluation thread: a look every S_POLL_MS until $TERM (which waits
   for an evaluation under way to end). */
static void
s_eval_actor(zsock_t *pipe, void *args)
{
    self_t *self = args;
    zsock_signal(pipe, 0);
    zpoller_t *poller = zpoller_new(pipe, NULL);
    while (poller) {
        s_scan(self);
        zsock_t *which = zpoller_wait(poller, S_POLL_MS);
        if (which == pipe) {
            char *cmd = zstr_recv(pipe);
            bool term = !cmd || streq(cmd, "$TERM");
            zstr_free(&cmd);
            if (term)
                break;
        } else if (zpoller_terminated(poller)) {
            break;
        }
    }
    zpoller_destroy(&poller);
    for (int i = 0; i < self->njobs; i++)
        worker_session_destroy(&self->jobs[i].sess);
    self->njobs = 0;
    free(self->idle);
    self->idle = NULL;
    self->nidle = self->idle_cap = 0;
}

/* ---- the service ---- */

static void
s_metrics(void *arg, FILE *f)
{
    self_t *self = arg;
    zdist_rpc_server_write_metrics(self->rpc, f, "zdist_evaluator");
    zdist_prom_family(f, "zdist_evaluator_evaluations_total", "counter", "Checkpoints evaluated.");
    zdist_prom_sample(f, "zdist_evaluator_evaluations_total", (double)atomic_load(&self->evaluations), NULL);
    zdist_prom_family(f, "zdist_evaluator_skipped_checkpoints_total", "counter",
                      "Checkpoints skipped because a newer one was committed before they could be evaluated.");
    zdist_prom_sample(f, "zdist_evaluator_skipped_checkpoints_total", (double)atomic_load(&self->skipped), NULL);
    zdist_prom_family(f, "zdist_evaluator_failures_total", "counter", "Checkpoints whose evaluation failed.");
    zdist_prom_sample(f, "zdist_evaluator_failures_total", (double)atomic_load(&self->failures), NULL);
    zdist_prom_family(f, "zdist_evaluator_last_eval_step", "gauge", "Step of the last checkpoint evaluated (-1: none).");
    zdist_prom_sample(f, "zdist_evaluator_last_eval_step", (double)atomic_load(&self->last_step), NULL);
}

void
worker_eval_actor(zsock_t *pipe, void *args)
{
    self_t *self = calloc(1, sizeof *self);
    zsock_signal(pipe, 0);
    if (!self) {
        zstr_send(pipe, "ERROR out of memory");
        return;
    }
    self->config = *(const worker_agent_config_t *)args;
    atomic_store(&self->last_step, -1);
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = "evaluator";
    opts.limits = self->config.limits;
    opts.log = zdist_daemon_rpc_log;
    zdist_error_t err = {0};
    self->rpc = zdist_rpc_server_new(self->config.endpoint, NULL, 0, self, &opts, &err);
    if (!self->rpc) {
        zstr_sendf(pipe, "ERROR %s", err.text);
        free(self);
        return;
    }
    zloop_t *loop = zloop_new();
    self->metrics = (zdist_http_metrics_t){s_metrics, self};
    if (!loop || (*self->config.http && !(self->http = zdist_daemon_http(self->config.http, loop,
                                                                          zdist_http_serve_metrics, &self->metrics,
                                                                          &err)))) {
        zstr_sendf(pipe, "ERROR %s", loop ? err.text : "out of memory");
        zloop_destroy(&loop);
        zdist_rpc_server_destroy(&self->rpc);
        free(self);
        return;
    }
    self->evaluator = zactor_new(s_eval_actor, self);
    if (!self->evaluator) {
        zstr_send(pipe, "ERROR cannot start the evaluation thread");
        zdist_http_destroy(&self->http);
        zloop_destroy(&loop);
        zdist_rpc_server_destroy(&self->rpc);
        free(self);
        return;
    }
    zsys_info("evaluating the newest checkpoint of each running job under %s/jobs", self->config.state_dir);
    zstr_sendf(pipe, "READY %s", zdist_rpc_server_endpoint(self->rpc));
    zdist_daemon_serve(loop, pipe, self->rpc, 32);
    zactor_destroy(&self->evaluator);
    zdist_http_destroy(&self->http);
    zloop_destroy(&loop);
    zdist_rpc_server_destroy(&self->rpc);
    free(self);
}
