/* coord_server: coordinator.proto handlers, the job table persisted under the state dir, a runner per running job
   (several parameter_server jobs at once, a multi_worker_mirrored one alone), STATUS streams to followers. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "coord_drop.h"
#include "coord_job.h"
#include "coord_http.h"
#include "coord_server.h"
#include "zdist/prom.h"
#include "coord_state.h"
#include "zdist/coord_service.h"
#include "zdist/daemon.h"
#include "zdist/file.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

#define S_FOLLOW_MIN_MS 250      /* at most one update per follower this often */
#define S_FOLLOW_IDLE_MS 5000    /* and at least one this often, changed or not */
#define S_MAX_EVENTS 64          /* recent events kept for the dashboard */
#define S_CURVE_POINTS 2000      /* loss points per job sent to the dashboard */
#define S_EVALS_SHOWN 200        /* evaluations per job in a status (the last ones) */
#define S_CURVE_BYTES (64u << 20) /* metrics.jsonl read for them */

typedef struct {
    char id[ZDIST_COORD_ID_MAX];
    char *name;
    char *text;     /* the submitted document (job.json) */
    uint32_t text_crc; /* its CRC-32, kept in state.json */
    char *base_dir;
    char state[ZDIST_COORD_STATE_MAX];
    int64_t step, steps;
    char *error;
    char *detail;   /* JSON */
    int64_t seq;    /* submission order */
    int priority;   /* the job's: a higher one starts first */
    bool mwm;       /* multi_worker_mirrored or tpu (the ring): runs alone */
    bool ps;        /* parameter_server: its variables live on the psds */
    bool vars_dropped; /* ... and are dropped from every psd */
    int64_t last_persist_ms; /* state.json written from a runner's status (at most once a second) */
} s_job_t;

/* A running job and its runner actor. */
typedef struct {
    zactor_t *actor;
    s_job_t *job;
} s_run_t;

/* A STATUS stream: the deferred call and what it was last sent. A client that
   goes away without a word stays here until its job ends or its call's
   deadline passes (ROUTER drops what it cannot route), hence the limit. */
typedef struct {
    zdist_rpc_call_t *call;
    char job_id[ZDIST_COORD_ID_MAX];
    char state[ZDIST_COORD_STATE_MAX];
    int64_t step;
    int64_t sent_ms;
} s_follower_t;

typedef struct {
    coord_server_config_t config;
    zsock_t *pipe;
    zloop_t *loop;
    zdist_rpc_server_t *rpc;
    s_job_t **jobs;
    size_t njobs;
    int64_t next_seq;
    s_run_t runs[COORD_MAX_RUNNING];
    int nruns;
    zactor_t *dropper; /* coord_drop: ended jobs' variables off the psds (NULL: --keep-variables) */
    s_follower_t followers[COORD_MAX_FOLLOWERS];
    size_t nfollowers;
    int follow_timer; /* zloop timer of the next follower update due; -1 none */
    zdist_http_t *http; /* --http */
    struct {
        double time; /* seconds since the epoch */
        char job[ZDIST_COORD_ID_MAX];
        char kind[16];
        char *text;
    } events[S_MAX_EVENTS]; /* a ring, oldest at ev_head when full */
    int ev_head, ev_n;
} self_t;

/* ---- events (the dashboard's "recent events") ---- */

static double
s_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
s_event(self_t *self, const char *job, const char *kind, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void
s_event(self_t *self, const char *job, const char *kind, const char *fmt, ...)
{
    int at = (self->ev_head + self->ev_n) % S_MAX_EVENTS;
    if (self->ev_n == S_MAX_EVENTS) {
        at = self->ev_head;
        self->ev_head = (self->ev_head + 1) % S_MAX_EVENTS;
    } else {
        self->ev_n++;
    }
    free(self->events[at].text);
    self->events[at].time = s_wall_s();
    snprintf(self->events[at].job, sizeof self->events[at].job, "%s", job);
    snprintf(self->events[at].kind, sizeof self->events[at].kind, "%s", kind);
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&self->events[at].text, fmt, ap) < 0)
        self->events[at].text = NULL;
    va_end(ap);
}

/* ---- persistence ----

   A job lives in STATE/jobs/ID: job.json, the document as submitted, and
   state.json, its row of the table. Both are written crash-safe through
   zdist/file.h. state.json carries "crc32", the CRC-32 of the rest of it in
   its canonical form (compact, keys sorted), and "job_crc32", that of
   job.json: a damaged job is refused at the next start, naming the file,
   instead of resumed from wrong values. */

static void
s_job_dir(self_t *self, const s_job_t *j, char *buf, size_t size)
{
    if (snprintf(buf, size, "%s/jobs/%s", self->config.state_dir, j->id) >= (int)size)
        buf[0] = '\0'; /* main keeps state_dir short enough */
}

static void
s_persist(self_t *self, s_job_t *j)
{
    char dir[1100], path[1200];
    s_job_dir(self, j, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/state.json", dir);
    json_t *detail = j->detail ? json_loads(j->detail, 0, NULL) : NULL;
    json_t *st = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:I, s:o, s:I, s:b}", "job_id", j->id, "name",
                           j->name, "state", j->state, "step", (json_int_t)j->step, "steps", (json_int_t)j->steps,
                           "error", j->error ? j->error : "", "base_dir", j->base_dir, "seq", (json_int_t)j->seq,
                           "detail", detail ? detail : json_object(), "job_crc32", (json_int_t)j->text_crc,
                           "variables_dropped", j->vars_dropped);
    zdist_error_t err = {0};
    if (!st)
        zsys_warning("job %s: cannot write '%s': out of memory, ignoring", j->id, path);
    else if (zdist_json_write_sealed(path, st, "crc32", &err) < 0)
        zsys_warning("job %s: %s, ignoring", j->id, err.text);
    json_decref(st);
}

static void
s_job_free(s_job_t **jp)
{
    if (!*jp)
        return;
    free((*jp)->name);
    free((*jp)->text);
    free((*jp)->base_dir);
    free((*jp)->error);
    free((*jp)->detail);
    free(*jp);
    *jp = NULL;
}

static s_job_t *
s_find(self_t *self, const char *id)
{
    if (!id || !*id) {
        s_job_t *latest = NULL;
        for (size_t i = 0; i < self->njobs; i++)
            if (!latest || self->jobs[i]->seq > latest->seq)
                latest = self->jobs[i];
        return latest;
    }
    for (size_t i = 0; i < self->njobs; i++)
        if (strcmp(self->jobs[i]->id, id) == 0)
            return self->jobs[i];
    return NULL;
}

static int
s_add(self_t *self, s_job_t *j)
{
    s_job_t **n = realloc(self->jobs, (self->njobs + 1) * sizeof *n);
    if (!n)
        return -ENOMEM;
    self->jobs = n;
    self->jobs[self->njobs++] = j;
    if (j->seq >= self->next_seq)
        self->next_seq = j->seq + 1;
    return 0;
}

/* The job's priority and whether it runs alone, from its document (a
   document that no longer parses fails when it is started). */
static void
s_job_kind(s_job_t *j)
{
    zdist_job_t spec;
    if (zdist_job_parse(j->text, NULL, &spec, NULL) < 0)
        return;
    j->priority = spec.priority;
    j->mwm = zdist_strategy_syncs_workers(spec.strategy);
    j->ps = spec.strategy == ZDIST_STRATEGY_PARAMETER_SERVER;
    zdist_job_release(&spec);
}

/* One job of an earlier run from STATE/jobs/<name>: -errno with err naming
   the file that is missing or damaged. */
static int
s_load_job(self_t *self, const char *dir, const char *name, zdist_error_t *err)
{
    if (strlen(name) >= sizeof((s_job_t *)0)->id)
        return zdist_error_set(err, -EINVAL, "%s/%s: the name is too long for a job id", dir, name);
    char path[1400];
    snprintf(path, sizeof path, "%s/%s/state.json", dir, name);
    coord_state_row_t row;
    int rc = coord_state_read(path, &row, err);
    if (rc < 0)
        return rc;
    snprintf(path, sizeof path, "%s/%s/job.json", dir, name);
    void *text = NULL;
    size_t text_len = 0;
    s_job_t *j = NULL;
    rc = zdist_file_read(path, ZDIST_COORD_MAX_JOB_BYTES, &text, &text_len, err);
    if (rc < 0)
        goto out;
    if (zdist_crc32(0, text, text_len) != row.job_crc) {
        rc = zdist_error_set(err, -EBADMSG, "%s: damaged (its CRC-32 is not state.json's job_crc32)", path);
        goto out;
    }
    j = calloc(1, sizeof *j);
    if (!j) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    /* Length checked above; memcpy says so to gcc's truncation check. */
    memcpy(j->id, name, strlen(name) + 1);
    j->name = row.name;
    row.name = NULL;
    j->text = text;
    text = NULL;
    j->text_crc = row.job_crc;
    j->base_dir = row.base_dir;
    row.base_dir = NULL;
    bool unfinished = strcmp(row.state, "queued") == 0 || strcmp(row.state, "running") == 0;
    snprintf(j->state, sizeof j->state, "%s", unfinished ? "queued" : row.state);
    j->step = row.step;
    j->steps = row.steps;
    j->error = row.error;
    row.error = NULL;
    j->detail = row.detail;
    row.detail = NULL;
    j->seq = row.seq;
    j->vars_dropped = row.variables_dropped;
    s_job_kind(j);
    if (s_add(self, j) < 0) {
        s_job_free(&j);
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (unfinished) { /* state.json's step lags: name the checkpoint's */
        char jd[1100];
        s_job_dir(self, j, jd, sizeof jd);
        int64_t from = coord_job_resume_step(j->text, j->base_dir, jd, j->id);
        zsys_info("job %s ('%s') was %s, its last checkpoint at step %lld: resuming it from its last checkpoint",
                  j->id, j->name, row.state, (long long)(from > 0 ? from : 0));
    }
out:
    free(text);
    coord_state_row_release(&row);
    return rc;
}

/* Jobs of earlier runs: finished ones for STATUS, unfinished ones queued again. */
static void
s_load_jobs(self_t *self)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/jobs", self->config.state_dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        zdist_error_t err = {0};
        if (e->d_name[0] != '.' && s_load_job(self, dir, e->d_name, &err) < 0)
            zsys_warning("state dir: '%s/%s' is not a job I can read: %s, ignoring", dir, e->d_name, err.text);
    }
    closedir(d);
}

/* ---- dropping ended jobs' variables ---- */

/* A parameter_server job that has ended: its variables off every psd
   (coord_drop tries each until it answers). Its runner wrote the final
   checkpoint before it ended: that holds the result from now on. */
static void
s_drop_vars(self_t *self, s_job_t *j)
{
    if (!self->dropper || !j->ps || j->vars_dropped || !zdist_coord_state_final(j->state))
        return;
    zstr_sendm(zactor_sock(self->dropper), "DROP");
    zstr_send(zactor_sock(self->dropper), j->id);
}

/* "DROPPED" + id: recorded in state.json, so a restart does not ask again. */
static int
s_on_dropper(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    self_t *self = arg;
    char *kind = zstr_recv(sock);
    char *id = kind ? zstr_recv(sock) : NULL;
    s_job_t *j = kind && id && strcmp(kind, "DROPPED") == 0 && *id ? s_find(self, id) : NULL;
    if (j) {
        j->vars_dropped = true;
        s_persist(self, j);
        s_event(self, j->id, "dropped", "job '%s': its variables are dropped from every ps", j->name);
    }
    zstr_free(&kind);
    zstr_free(&id);
    return 0;
}

/* ---- runner ---- */

static int s_on_runner(zloop_t *loop, zsock_t *sock, void *arg);

/* The queued job to start next: the highest priority, then the oldest. */
static s_job_t *
s_next_queued(self_t *self)
{
    s_job_t *next = NULL;
    for (size_t i = 0; i < self->njobs; i++) {
        s_job_t *j = self->jobs[i];
        if (strcmp(j->state, "queued") != 0)
            continue;
        if (!next || j->priority > next->priority || (j->priority == next->priority && j->seq < next->seq))
            next = j;
    }
    return next;
}

/* Why `next` cannot start now ("" when it can). */
static void
s_why_waiting(self_t *self, const s_job_t *next, char *why, size_t size)
{
    why[0] = 0;
    char ids[COORD_MAX_RUNNING * (ZDIST_COORD_ID_MAX + 2)] = "";
    for (int i = 0; i < self->nruns; i++) {
        size_t len = strlen(ids);
        snprintf(ids + len, sizeof ids - len, "%s%s", i ? ", " : "", self->runs[i].job->id);
    }
    for (int i = 0; i < self->nruns; i++)
        if (self->runs[i].job->mwm) {
            snprintf(why, size, "waiting for job %s to end (multi_worker_mirrored: it owns the workers' ring and "
                     "runs alone)", self->runs[i].job->id);
            return;
        }
    if (next->mwm && self->nruns > 0)
        snprintf(why, size, "waiting for job%s %s to end (a multi_worker_mirrored job owns the workers' ring and "
                 "runs alone)", self->nruns > 1 ? "s" : "", ids);
    else if (self->nruns >= self->config.max_running)
        snprintf(why, size, "waiting for one of the %d running jobs (%s) to end: the limit (zdist-coordinator "
                 "--max-running-jobs %d)", self->nruns, ids, self->config.max_running);
}

/* A queued job's detail says why it waits ({"waiting": why}). */
static void
s_set_waiting(s_job_t *j, const char *why)
{
    json_t *d = json_pack("{s:s}", "waiting", why);
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (text) {
        free(j->detail);
        j->detail = text;
    }
}

/* Starts queued jobs while they may run — up to max_running at once, a
   multi_worker_mirrored job alone — highest priority first, then oldest.
   Each runner's pipe is read by the server's loop, so the server wakes when
   a runner has news. A job whose document no longer parses fails, and the
   next one is tried. The jobs left queued say what they wait for. */
static void
s_start_next(self_t *self)
{
    for (;;) {
        s_job_t *next = s_next_queued(self);
        if (!next)
            return;
        char why[1024];
        s_why_waiting(self, next, why, sizeof why);
        if (why[0]) {
            /* Each queued job: what it waits for, and the job before it. */
            for (size_t i = 0; i < self->njobs; i++) {
                s_job_t *j = self->jobs[i];
                if (strcmp(j->state, "queued") != 0)
                    continue;
                char mine[1024], line[1200];
                s_why_waiting(self, j, mine, sizeof mine);
                if (j == next)
                    snprintf(line, sizeof line, "%s", mine);
                else
                    snprintf(line, sizeof line, "%s%sjob %s (priority %d) starts before it", mine,
                             mine[0] ? "; " : "", next->id, next->priority);
                s_set_waiting(j, line);
            }
            return;
        }
        coord_runner_config_t *cfg = calloc(1, sizeof *cfg);
        zdist_error_t err = {0};
        if (!cfg || !(cfg->base_dir = strdup(next->base_dir)) ||
            coord_job_parse(next->text, *next->base_dir ? next->base_dir : NULL, &cfg->job, &err) < 0) {
            snprintf(next->state, sizeof next->state, "failed");
            free(next->error);
            next->error = strdup(err.text[0] ? err.text : "out of memory");
            s_persist(self, next);
            coord_runner_config_destroy(&cfg);
            continue;
        }
        snprintf(cfg->job_id, sizeof cfg->job_id, "%s", next->id);
        s_job_dir(self, next, cfg->job_dir, sizeof cfg->job_dir);
        if (cfg->job.spec.ckpt_dir)
            snprintf(cfg->ckpt_root, sizeof cfg->ckpt_root, "%s/%s", cfg->job.spec.ckpt_dir, next->id);
        else
            snprintf(cfg->ckpt_root, sizeof cfg->ckpt_root, "%s", cfg->job_dir);
        mkdir(cfg->ckpt_root, 0755); /* made at submit; again in case it was removed since */
        cfg->num_workers = self->config.num_workers;
        cfg->num_ps = self->config.num_ps;
        memcpy(cfg->workers, self->config.workers, sizeof cfg->workers);
        memcpy(cfg->ps, self->config.ps, sizeof cfg->ps);
        cfg->closure_timeout_ms = self->config.closure_timeout_ms;
        snprintf(next->state, sizeof next->state, "running");
        free(next->detail);
        next->detail = strdup("{}");
        s_persist(self, next);
        zsys_info("job %s ('%s'): running on %d workers and %d ps%s", next->id, next->name, cfg->num_workers,
                  cfg->num_ps, self->nruns ? " beside other jobs" : "");
        s_event(self, next->id, "running", "job '%s' running on %d workers and %d ps", next->name, cfg->num_workers,
                cfg->num_ps);
        s_run_t *run = &self->runs[self->nruns++];
        run->job = next;
        run->actor = zactor_new(coord_runner_actor, cfg);
        if (!run->actor || zloop_reader(self->loop, zactor_sock(run->actor), s_on_runner, self) < 0) {
            zsys_error("job %s: cannot start its runner: out of memory", next->id);
            abort();
        }
    }
}

/* A status message from a runner; returns true on its last one. */
static bool
s_runner_message(self_t *self, s_run_t *run)
{
    char *kind = zstr_recv(run->actor);
    char *text = kind ? zstr_recv(run->actor) : NULL;
    bool end = kind && strcmp(kind, "END") == 0;
    s_job_t *j = run->job;
    if (kind && strcmp(kind, "EVENT") == 0) {
        json_t *ev = text ? json_loads(text, 0, NULL) : NULL;
        const char *ek = json_string_value(json_object_get(ev, "kind"));
        const char *et = json_string_value(json_object_get(ev, "text"));
        if (j && ek && et)
            s_event(self, j->id, ek, "%s", et);
        json_decref(ev);
        zstr_free(&kind);
        zstr_free(&text);
        return false;
    }
    json_t *st = text ? json_loads(text, 0, NULL) : NULL;
    const char *state = NULL, *error = NULL;
    json_int_t step = 0, steps = 0;
    json_t *detail = NULL;
    if (j && st &&
        json_unpack(st, "{s:s, s:I, s:I, s:s, s:o}", "state", &state, "step", &step, "steps", &steps, "error", &error,
                    "detail", &detail) == 0) {
        bool changed = strcmp(j->state, state) != 0;
        snprintf(j->state, sizeof j->state, "%s", state);
        j->step = step;
        j->steps = steps;
        free(j->error);
        j->error = strdup(error);
        free(j->detail);
        j->detail = json_dumps(detail, JSON_COMPACT);
        int64_t now = zdist_clock_now_ms();
        if (changed || end || now - j->last_persist_ms > 1000) {
            s_persist(self, j);
            j->last_persist_ms = now;
        }
        if (end) {
            zsys_info("job %s ('%s'): %s at step %lld of %lld%s%s", j->id, j->name, j->state, (long long)j->step,
                      (long long)j->steps, *j->error ? ": " : "", j->error);
            s_event(self, j->id, j->state, "job '%s' %s at step %lld of %lld%s%s", j->name, j->state,
                    (long long)j->step, (long long)j->steps, *j->error ? ": " : "", j->error);
            s_drop_vars(self, j);
        }
        sd_notifyf(0, "STATUS=job %s %s: step %lld/%lld", j->id, j->state, (long long)j->step, (long long)j->steps);
    }
    json_decref(st);
    bool gone = !kind;
    zstr_free(&kind);
    zstr_free(&text);
    return end || gone;
}

static void s_followers_update(self_t *self, bool stopping);

/* The runner's pipe is readable: one message (the loop comes back while
   more wait). Followers hear of it at once. */
static int
s_on_runner(zloop_t *loop, zsock_t *sock, void *arg)
{
    self_t *self = arg;
    int at = 0;
    while (at < self->nruns && zactor_sock(self->runs[at].actor) != sock)
        at++;
    if (at == self->nruns) { /* not ours any more */
        zloop_reader_end(loop, sock);
        return 0;
    }
    if (s_runner_message(self, &self->runs[at])) {
        zloop_reader_end(loop, sock);
        zactor_destroy(&self->runs[at].actor);
        self->runs[at] = self->runs[--self->nruns];
        s_start_next(self);
    }
    s_followers_update(self, false);
    return 0;
}

/* ---- preflight ---- */

static int
s_preflight(self_t *self, char *why, size_t size)
{
    int n = self->config.num_workers + self->config.num_ps;
    zdist_rpc_client_t *c[2 * COORD_MAX_TASKS] = {0};
    uint64_t ids[2 * COORD_MAX_TASKS] = {0};
    int rc = 0;
    for (int i = 0; i < n; i++) {
        bool w = i < self->config.num_workers;
        const char *ep = w ? self->config.workers[i] : self->config.ps[i - self->config.num_workers];
        c[i] = zdist_rpc_client_new(ep, NULL, NULL);
        zdist_msg_t *m = zdist_msg_new(ZDIST_METHOD_PING);
        if (!c[i] || !m || zdist_rpc_client_send(c[i], &m, self->config.preflight_timeout_ms, &ids[i]) < 0) {
            zdist_msg_destroy(&m);
            snprintf(why, size, "preflight: cannot reach %s:%d at %s", w ? "worker" : "ps",
                     w ? i : i - self->config.num_workers, ep);
            rc = -EIO;
            goto out;
        }
    }
    for (int i = 0; i < n; i++) {
        bool w = i < self->config.num_workers;
        int task = w ? i : i - self->config.num_workers;
        const char *want = w ? "worker" : "ps";
        zdist_msg_t *reply = NULL;
        if (zdist_rpc_client_recv(c[i], self->config.preflight_timeout_ms + 1000, &reply) < 0) {
            snprintf(why, size, "preflight: task %s:%d (%s): no answer", want, task, zdist_rpc_client_endpoint(c[i]));
            rc = -ETIMEDOUT;
            goto out;
        }
        int st = zdist_msg_status(reply);
        zdist_rpc_ping_t p;
        if (st != ZDIST_STATUS_OK) {
            snprintf(why, size, "preflight: task %s:%d (%s) is unreachable: %s%s%s; start it (zdist-%s) or fix the "
                     "cluster",
                     want, task, zdist_rpc_client_endpoint(c[i]), zdist_status_name(st),
                     *zdist_msg_status_message(reply) ? ": " : "", zdist_msg_status_message(reply),
                     w ? "worker" : "psd");
            rc = -ENOTCONN;
        } else if (zdist_rpc_ping_read(reply, &p, NULL) < 0) {
            snprintf(why, size, "preflight: task %s:%d (%s): its PING reply does not decode", want, task,
                     zdist_rpc_client_endpoint(c[i]));
            rc = -EPROTO;
        } else if (strcmp(p.role, want) != 0) {
            snprintf(why, size, "preflight: task %s:%d (%s) answers as '%s', not '%s'; check the cluster addresses",
                     want, task, zdist_rpc_client_endpoint(c[i]), p.role, want);
            rc = -EPROTO;
        } else if (p.protocol != ZDIST_PROTOCOL_VERSION) {
            snprintf(why, size, "preflight: task %s:%d (%s) speaks protocol %u, this coordinator %d; upgrade it",
                     want, task, zdist_rpc_client_endpoint(c[i]), p.protocol, ZDIST_PROTOCOL_VERSION);
            rc = -EPROTO;
        }
        zdist_msg_destroy(&reply);
        if (rc < 0)
            goto out;
    }
out:
    for (int i = 0; i < n; i++)
        zdist_rpc_client_destroy(&c[i]);
    return rc;
}

/* ---- handlers ---- */

/* checkpoint.dir at submit: created with its parents if missing, and
   writable. -errno with why naming the field. */
static int
s_mkdirs(const char *dir, char *why, size_t size)
{
    char path[1100];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        snprintf(why, size, "checkpoint.dir: '%.200s...' is too long", dir);
        return -ENAMETOOLONG;
    }
    for (char *p = path + 1;; p++) {
        bool last = *p == 0;
        if (*p == '/' || last) {
            *p = 0;
            if (mkdir(path, 0755) < 0 && errno != EEXIST) {
                int e = errno;
                snprintf(why, size, "checkpoint.dir: cannot create '%.300s': %s; give a directory the coordinator "
                         "and the ps tasks can write (under the psds' --checkpoint-root when they have one)", path,
                         strerror(e));
                return -e;
            }
            if (last)
                break;
            *p = '/';
        }
    }
    struct stat sb;
    if (stat(path, &sb) < 0 || !S_ISDIR(sb.st_mode) || access(path, W_OK | X_OK) < 0) {
        snprintf(why, size, "checkpoint.dir: '%.300s' is not a directory the coordinator can write; give one the "
                 "coordinator and the ps tasks can write", path);
        return -EACCES;
    }
    return 0;
}

static int
s_submit(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_coord_submit_request_t *req = zdist_rpc_call_body(call);
    if ((int)self->njobs >= self->config.max_jobs)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                                   "%zu jobs in the state dir (limit %d); remove old ones from %s/jobs", self->njobs,
                                   self->config.max_jobs, self->config.state_dir);
    size_t unfinished = 0;
    for (size_t i = 0; i < self->njobs; i++)
        unfinished += !zdist_coord_state_final(self->jobs[i]->state);
    if (unfinished >= (size_t)self->config.max_queued) {
        zsys_warning("job '%s' refused: %zu jobs queued or running (limit %d)", req->job.name, unfinished,
                     self->config.max_queued);
        return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                                   "%zu jobs are queued or running, the limit (zdist-coordinator --max-queued-jobs "
                                   "%d); wait for one to end or cancel one", unfinished, self->config.max_queued);
    }
    zdist_error_t err = {0};
    int crc = coord_job_check(&req->job, &err);
    if (crc < 0) {
        if (crc == -EACCES)
            zsys_warning("job '%s' refused: %s", req->job.name, err.text);
        return zdist_rpc_call_fail(call, crc == -EACCES ? ZDIST_STATUS_PERMISSION_DENIED
                                                        : ZDIST_STATUS_INVALID_ARGUMENT, "%s", err.text);
    }
    if (req->job.strategy == ZDIST_STRATEGY_PARAMETER_SERVER && self->config.num_ps == 0)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_FAILED_PRECONDITION,
                                   "strategy.type: parameter_server needs ps tasks and the cluster has none; add "
                                   "\"ps\" tasks to the cluster or use multi_worker_mirrored");
    char why[1024];
    if (req->job.ckpt_dir && s_mkdirs(req->job.ckpt_dir, why, sizeof why) < 0) {
        zsys_warning("job '%s' refused: %s", req->job.name, why);
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INVALID_ARGUMENT, "%s", why);
    }
    if (s_preflight(self, why, sizeof why) < 0) {
        zsys_warning("job '%s' refused: %s", req->job.name, why);
        return zdist_rpc_call_fail(call, ZDIST_STATUS_FAILED_PRECONDITION, "%s", why);
    }
    s_job_t *j = calloc(1, sizeof *j);
    if (!j)
        return -ENOMEM;
    char dir[1100];
    do {
        snprintf(j->id, sizeof j->id, "j%08llx", (unsigned long long)(zdist_random_u64() & 0xffffffffu));
        s_job_dir(self, j, dir, sizeof dir);
    } while (access(dir, F_OK) == 0);
    j->name = strdup(req->job.name);
    j->text = strdup(req->job_json);
    j->base_dir = strdup(req->base_dir ? req->base_dir : "");
    snprintf(j->state, sizeof j->state, "queued");
    j->steps = req->job.steps;
    j->error = strdup("");
    j->detail = strdup("{}");
    j->seq = self->next_seq;
    j->priority = req->job.priority;
    j->mwm = zdist_strategy_syncs_workers(req->job.strategy);
    j->ps = req->job.strategy == ZDIST_STRATEGY_PARAMETER_SERVER;
    char path[1200];
    snprintf(path, sizeof path, "%s/job.json", dir);
    zdist_file_piece_t doc = {j->text, j->text ? strlen(j->text) : 0};
    if (!j->name || !j->text || !j->base_dir || !j->error || !j->detail)
        zdist_error_set(&err, -ENOMEM, "out of memory");
    else if (mkdir(dir, 0755) < 0)
        zdist_error_set(&err, -errno, "cannot create '%s': %s", dir, strerror(errno));
    else if (zdist_file_write(path, &doc, 1, 0644, &j->text_crc, &err) == 0 && s_add(self, j) < 0)
        zdist_error_set(&err, -ENOMEM, "out of memory");
    if (err.code < 0) {
        s_job_free(&j);
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INTERNAL, "%s", err.text);
    }
    if (req->job.ckpt_dir) {
        char ckpt[1100];
        snprintf(ckpt, sizeof ckpt, "%s/%s", req->job.ckpt_dir, j->id);
        if (mkdir(ckpt, 0755) < 0 && errno != EEXIST)
            zsys_warning("job %s: cannot create %s: %s (tried again when it starts)", j->id, ckpt, strerror(errno));
    }
    s_persist(self, j);
    zsys_info("job %s ('%s') submitted", j->id, j->name);
    s_event(self, j->id, "submitted", "job '%s' submitted", j->name);
    int rc = zdist_coord_reply_submit(call, j->id);
    s_start_next(self);
    s_followers_update(self, false);
    return rc;
}

/* The sidecar evaluator's results for a job (zdist-worker --evaluator
   appends them to STATE/jobs/ID/evaluations.jsonl): [{eval_step,
   test_loss, test_accuracy, examples, time, eval_seconds}, ...] by
   eval_step, the last S_EVALS_SHOWN; a cut line (the evaluator killed
   mid-write) is skipped. */
static json_t *
s_evaluations(self_t *self, s_job_t *j)
{
    char dir[1100], path[1200];
    s_job_dir(self, j, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/evaluations.jsonl", dir);
    json_t *evals = json_array();
    FILE *f = fopen(path, "re");
    if (!f || !evals) {
        if (f)
            fclose(f);
        return evals;
    }
    char line[1024];
    size_t read = 0;
    while (fgets(line, sizeof line, f) && read < S_CURVE_BYTES) {
        read += strlen(line);
        json_t *o = json_loads(line, 0, NULL);
        if (json_is_integer(json_object_get(o, "eval_step"))) {
            if (json_array_size(evals) >= S_EVALS_SHOWN)
                json_array_remove(evals, 0);
            json_array_append(evals, o);
        }
        json_decref(o);
    }
    fclose(f);
    return evals;
}

/* The job's detail with "evaluations" when the evaluator wrote any (a new
   string), else NULL (use j->detail as it is). */
static char *
s_detail_with_evaluations(self_t *self, s_job_t *j)
{
    json_t *evals = s_evaluations(self, j);
    if (!evals || json_array_size(evals) == 0) {
        json_decref(evals);
        return NULL;
    }
    json_t *detail = j->detail ? json_loads(j->detail, 0, NULL) : NULL;
    if (!json_is_object(detail)) {
        json_decref(detail);
        detail = json_object();
    }
    json_object_set_new(detail, "evaluations", evals);
    char *text = detail ? json_dumps(detail, JSON_COMPACT) : NULL;
    json_decref(detail);
    return text;
}

/* The table's view of jobs, for a reply; detail: STATUS's per-task detail
   and the evaluator's results. */
static int
s_reply_jobs(self_t *self, zdist_rpc_call_t *call, s_job_t **jobs, size_t n, bool detail)
{
    zdist_coord_job_t *v = calloc(n ? n : 1, sizeof *v);
    char **own = calloc(n ? n : 1, sizeof *own);
    if (!v || !own) {
        free(v);
        free(own);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(v[i].job_id, jobs[i]->id, sizeof v[i].job_id);
        memcpy(v[i].state, jobs[i]->state, sizeof v[i].state);
        v[i].name = jobs[i]->name;
        v[i].step = jobs[i]->step;
        v[i].steps = jobs[i]->steps;
        v[i].error = jobs[i]->error;
        if (detail)
            own[i] = s_detail_with_evaluations(self, jobs[i]);
        v[i].detail_json = detail ? (own[i] ? own[i] : jobs[i]->detail) : NULL;
    }
    int rc = zdist_coord_reply_jobs(call, v, n);
    for (size_t i = 0; i < n; i++)
        free(own[i]);
    free(own);
    free(v);
    return rc;
}

static int
s_status(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_coord_status_request_t *req = zdist_rpc_call_body(call);
    s_job_t *j = s_find(self, req->job_id);
    if (!j)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "job '%s': no such job%s", req->job_id,
                                   *req->job_id ? "; 'zdist status' lists them" : " yet");
    bool follow = req->follow && !zdist_coord_state_final(j->state);
    if (follow && self->nfollowers >= (size_t)self->config.max_followers) {
        zsys_warning("STATUS stream of job %s refused: %zu status streams open, the limit (zdist-coordinator "
                     "--max-followers %d)", j->id, self->nfollowers, self->config.max_followers);
        return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                                   "%zu status streams open, the limit (zdist-coordinator --max-followers %d); poll "
                                   "STATUS without follow", self->nfollowers, self->config.max_followers);
    }
    int rc = s_reply_jobs(self, call, &j, 1, true);
    if (rc < 0 || !follow)
        return rc;
    /* The snapshot goes out now marked `more`; s_followers_update sends the rest. */
    rc = zdist_rpc_call_send_partial(zdist_rpc_call_defer(call));
    if (rc < 0)
        return rc; /* the RPC layer finishes the call with that error */
    s_follower_t *f = &self->followers[self->nfollowers++];
    f->call = call;
    snprintf(f->job_id, sizeof f->job_id, "%s", j->id);
    snprintf(f->state, sizeof f->state, "%s", j->state);
    f->step = j->step;
    f->sent_ms = zdist_clock_now_ms();
    s_followers_update(self, false);
    return 0;
}

static int s_on_follow_timer(zloop_t *loop, int timer_id, void *arg);

/* When a follower is next owed a reply: its job changed (S_FOLLOW_MIN_MS
   after the last), S_FOLLOW_IDLE_MS without one, or its call's deadline. */
static int64_t
s_follower_due(self_t *self, const s_follower_t *f, int64_t now)
{
    s_job_t *j = s_find(self, f->job_id);
    bool changed = !j || j->step != f->step || strcmp(j->state, f->state) != 0;
    int64_t due = f->sent_ms + (changed ? S_FOLLOW_MIN_MS : S_FOLLOW_IDLE_MS);
    int64_t left = zdist_rpc_call_remaining_ms(f->call);
    if (left < due - now)
        due = now + left;
    return due;
}

/* Sends each follower its job's news: an update when the step or state
   changed (at most every S_FOLLOW_MIN_MS), the last reply when the job ended;
   with stopping, ends every stream with UNAVAILABLE so clients subscribe
   again. Then sets a timer for the next update due, so nothing waits for
   a tick. Runs on the server's thread while the RPC server exists. */
static void
s_followers_update(self_t *self, bool stopping)
{
    int64_t now = zdist_clock_now_ms();
    for (size_t i = 0; i < self->nfollowers;) {
        s_follower_t *f = &self->followers[i];
        s_job_t *j = s_find(self, f->job_id);
        bool expired = zdist_rpc_call_remaining_ms(f->call) <= 0; /* a caller that sent a deadline gave up */
        bool end = stopping || expired || !j || zdist_coord_state_final(j->state);
        if (stopping) {
            zdist_rpc_call_fail(f->call, ZDIST_STATUS_UNAVAILABLE, "coordinator stopping");
        } else if (expired) {
            zdist_rpc_call_fail(f->call, ZDIST_STATUS_DEADLINE_EXCEEDED, "status stream: past its deadline");
        } else if (!j) {
            zdist_rpc_call_fail(f->call, ZDIST_STATUS_NOT_FOUND, "job '%s': no such job", f->job_id);
        } else {
            if (!end && s_follower_due(self, f, now) > now) {
                i++;
                continue;
            }
            if (s_reply_jobs(self, f->call, &j, 1, true) < 0) {
                if (!end) {
                    i++;
                    continue; /* out of memory: try again at the next update */
                }
                zdist_rpc_call_fail(f->call, ZDIST_STATUS_INTERNAL, "out of memory");
            }
        }
        if (end) {
            zdist_rpc_call_finish(&f->call);
            self->followers[i] = self->followers[--self->nfollowers];
            continue;
        }
        zdist_rpc_call_send_partial(f->call); /* a failed send is logged; the next update follows */
        snprintf(f->state, sizeof f->state, "%s", j->state);
        f->step = j->step;
        f->sent_ms = now;
        i++;
    }
    if (self->follow_timer >= 0) {
        zloop_timer_end(self->loop, self->follow_timer);
        self->follow_timer = -1;
    }
    if (stopping || self->nfollowers == 0)
        return;
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < self->nfollowers; i++) {
        int64_t due = s_follower_due(self, &self->followers[i], now);
        next = due < next ? due : next;
    }
    self->follow_timer = zloop_timer(self->loop, next > now ? (size_t)(next - now) : 1, 1, s_on_follow_timer, self);
}

static int
s_on_follow_timer(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    self_t *self = arg;
    self->follow_timer = -1; /* a one-shot timer: zloop frees it */
    s_followers_update(self, false);
    return 0;
}

static int
s_list(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    return s_reply_jobs(self, call, self->jobs, self->njobs, false);
}

static int
s_cancel(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_coord_cancel_request_t *req = zdist_rpc_call_body(call);
    s_job_t *j = s_find(self, req->job_id);
    if (!j)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "job '%s': no such job", req->job_id);
    if (strcmp(j->state, "queued") == 0) {
        snprintf(j->state, sizeof j->state, "cancelled");
        s_persist(self, j);
        s_followers_update(self, false);
    }
    s_run_t *run = NULL;
    for (int i = 0; i < self->nruns && !run; i++)
        if (self->runs[i].job == j)
            run = &self->runs[i];
    if (run) {
        zstr_send(run->actor, "CANCEL");
        zsys_info("job %s: cancelling", j->id);
    }
    return zdist_coord_reply_cancel(call, run ? "cancelling" : j->state);
}

static const zdist_rpc_method_t s_methods[] = {
    {ZDIST_COORD_SUBMIT, "submit", &zdist_coord_body_submit, s_submit, 0, 0, ZDIST_ROLE_CLIENT},
    {ZDIST_COORD_STATUS, "status", &zdist_coord_body_status, s_status, 0, 0, ZDIST_ROLE_CLIENT},
    {ZDIST_COORD_CANCEL, "cancel", &zdist_coord_body_cancel, s_cancel, 0, 0, ZDIST_ROLE_CLIENT},
    {ZDIST_COORD_LIST, "list", &zdist_coord_body_list, s_list, 0, 0, ZDIST_ROLE_CLIENT},
};
#define S_NMETHODS (sizeof s_methods / sizeof s_methods[0])

/* ---- --http: the dashboard, its JSON, /metrics (coord_http.c renders) ---- */

/* The jobs the dashboard and /metrics show: running and queued ones, and
   the newest S_SHOWN of the rest, newest first. */
#define S_SHOWN 10
static size_t
s_shown_jobs(self_t *self, s_job_t **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < self->njobs; i++)
        if (!zdist_coord_state_final(self->jobs[i]->state) && n < max)
            out[n++] = self->jobs[i];
    for (size_t i = 0; i < self->njobs; i++)
        if (zdist_coord_state_final(self->jobs[i]->state) && n < max)
            out[n++] = self->jobs[i];
    /* newest first */
    for (size_t a = 1; a < n; a++)
        for (size_t b = a; b > 0 && out[b - 1]->seq < out[b]->seq; b--) {
            s_job_t *t = out[b];
            out[b] = out[b - 1];
            out[b - 1] = t;
        }
    size_t keep = 0, finals = 0;
    for (size_t i = 0; i < n; i++) {
        bool final = zdist_coord_state_final(out[i]->state);
        if (final && finals >= S_SHOWN)
            continue;
        finals += final;
        out[keep++] = out[i];
    }
    return keep;
}

/* A job's loss curve from its metrics.jsonl: [[step, loss], ...], the last
   S_CURVE_POINTS. */
static json_t *
s_curve(self_t *self, s_job_t *j)
{
    char dir[1100], path[1200];
    s_job_dir(self, j, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    json_t *points = json_array();
    FILE *f = fopen(path, "re");
    if (!f)
        return points;
    char line[512];
    size_t read = 0;
    while (fgets(line, sizeof line, f) && read < S_CURVE_BYTES) {
        read += strlen(line);
        json_t *o = json_loads(line, 0, NULL);
        json_t *st = json_object_get(o, "step"), *lo = json_object_get(o, "loss");
        if (json_is_integer(st) && json_is_number(lo)) {
            if (json_array_size(points) >= S_CURVE_POINTS)
                json_array_remove(points, 0);
            json_array_append_new(points, json_pack("[I, f]", json_integer_value(st), json_number_value(lo)));
        }
        json_decref(o);
    }
    fclose(f);
    return points;
}

static json_t *
s_api_status(self_t *self)
{
    s_job_t *shown[64];
    size_t n = s_shown_jobs(self, shown, 64);
    json_t *jobs = json_array();
    for (size_t i = 0; i < n; i++) {
        s_job_t *j = shown[i];
        json_t *detail = j->detail ? json_loads(j->detail, 0, NULL) : NULL;
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:o, s:o, s:o}", "job_id", j->id, "name", j->name,
                              "state", j->state, "step", (json_int_t)j->step, "steps", (json_int_t)j->steps, "error",
                              j->error ? j->error : "", "detail", detail ? detail : json_object(), "loss_curve",
                              s_curve(self, j), "evaluations", s_evaluations(self, j));
        json_array_append_new(jobs, o);
    }
    json_t *events = json_array();
    for (int k = self->ev_n - 1; k >= 0; k--) { /* newest first */
        int at = (self->ev_head + k) % S_MAX_EVENTS;
        json_array_append_new(events, json_pack("{s:f, s:s, s:s, s:s}", "time", self->events[at].time, "job",
                                                self->events[at].job, "kind", self->events[at].kind, "text",
                                                self->events[at].text ? self->events[at].text : ""));
    }
    return json_pack("{s:f, s:s, s:i, s:i, s:o, s:o}", "time", s_wall_s(), "endpoint",
                     zdist_rpc_server_endpoint(self->rpc), "num_workers", self->config.num_workers, "num_ps",
                     self->config.num_ps, "jobs", jobs, "events", events);
}

static void
s_metrics(void *arg, FILE *f)
{
    self_t *self = arg;
    zdist_rpc_server_write_metrics(self->rpc, f, "zdist_coordinator");
    static const char *const states[] = {"queued", "running", "done", "failed", "cancelled"};
    zdist_prom_family(f, "zdist_coordinator_jobs", "gauge", "Jobs in the coordinator's table, by state.");
    for (size_t k = 0; k < sizeof states / sizeof states[0]; k++) {
        int count = 0;
        for (size_t i = 0; i < self->njobs; i++)
            count += strcmp(self->jobs[i]->state, states[k]) == 0;
        zdist_prom_sample(f, "zdist_coordinator_jobs", count, "state", states[k], NULL);
    }
    s_job_t *shown[64];
    size_t n = s_shown_jobs(self, shown, 64);
    coord_http_job_t v[64];
    for (size_t i = 0; i < n; i++)
        v[i] = (coord_http_job_t){shown[i]->id, shown[i]->name, shown[i]->state, shown[i]->step, shown[i]->steps,
                                  shown[i]->detail ? json_loads(shown[i]->detail, 0, NULL) : NULL};
    coord_http_jobs_metrics(f, v, n);
    for (size_t i = 0; i < n; i++)
        json_decref(v[i].detail);
}

static void
s_http(void *arg, const char *path, zdist_http_reply_t *reply)
{
    self_t *self = arg;
    if (strcmp(path, "/metrics") == 0) {
        zdist_http_reply_metrics(reply, s_metrics, self);
    } else if (strcmp(path, "/api/status") == 0) {
        json_t *st = s_api_status(self);
        reply->body = st ? json_dumps(st, JSON_COMPACT) : NULL;
        json_decref(st);
        reply->len = reply->body ? strlen(reply->body) : 0;
        reply->status = reply->body ? 200 : 500;
        reply->content_type = "application/json";
    } else if (strcmp(path, "/") == 0 || strcmp(path, "/index.html") == 0) {
        reply->body = strdup(coord_dashboard_html);
        reply->len = reply->body ? strlen(reply->body) : 0;
        reply->status = reply->body ? 200 : 500;
        reply->content_type = "text/html; charset=utf-8";
    } else {
        reply->status = 404;
        reply->body = strdup("not found: / (the dashboard), /api/status, /metrics\n");
        reply->len = reply->body ? strlen(reply->body) : 0;
    }
}

/* ---- the actor ---- */

static void
s_rpc_log(void *state, const char *line)
{
    (void)state;
    zsys_warning("%s", line);
}

void
coord_server_actor(zsock_t *pipe, void *args)
{
    self_t *self = calloc(1, sizeof *self);
    zsock_signal(pipe, 0);
    if (!self) {
        zstr_send(pipe, "ERROR out of memory");
        return;
    }
    self->config = *(const coord_server_config_t *)args;
    self->pipe = pipe;
    if (self->config.max_jobs <= 0)
        self->config.max_jobs = 10000;
    if (self->config.max_queued <= 0)
        self->config.max_queued = 64;
    if (self->config.max_running <= 0 || self->config.max_running > COORD_MAX_RUNNING)
        self->config.max_running = 4;
    if (self->config.max_followers <= 0 || self->config.max_followers > COORD_MAX_FOLLOWERS)
        self->config.max_followers = 64;
    if (self->config.max_message_bytes == 0)
        self->config.max_message_bytes = (size_t)32 << 20;
    if (self->config.preflight_timeout_ms <= 0)
        self->config.preflight_timeout_ms = 3000;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/jobs", self->config.state_dir);
    mkdir(self->config.state_dir, 0755);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        zstr_sendf(pipe, "ERROR cannot create the state dir '%s': %s", dir, strerror(errno));
        free(self);
        return;
    }
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = "chief";
    opts.log = s_rpc_log;
    opts.limits.max_message_bytes = self->config.max_message_bytes;
    if (self->config.max_calls_per_peer)
        opts.max_calls_per_peer = self->config.max_calls_per_peer;
    if (self->config.max_connections_per_peer)
        opts.max_connections_per_peer = self->config.max_connections_per_peer;
    zdist_error_t err = {0};
    self->rpc = zdist_rpc_server_new(self->config.endpoint, s_methods, S_NMETHODS, self, &opts, &err);
    if (!self->rpc) {
        zstr_sendf(pipe, "ERROR %s", err.text);
        free(self);
        return;
    }
    self->loop = zloop_new();
    self->follow_timer = -1;
    if (*self->config.http && !(self->http = zdist_daemon_http(self->config.http, self->loop, s_http, self, &err))) {
        zstr_sendf(pipe, "ERROR %s", err.text);
        zloop_destroy(&self->loop);
        zdist_rpc_server_destroy(&self->rpc);
        free(self);
        return;
    }
    if (self->config.num_ps > 0 && !self->config.keep_variables) {
        coord_drop_config_t dc = {.num_ps = self->config.num_ps};
        memcpy(dc.ps, self->config.ps, sizeof dc.ps);
        self->dropper = zactor_new(coord_drop_actor, &dc);
        if (!self->dropper || zloop_reader(self->loop, zactor_sock(self->dropper), s_on_dropper, self) < 0) {
            zsys_error("cannot start the dropper of ended jobs' variables: out of memory");
            abort();
        }
    } else if (self->config.keep_variables) {
        zsys_info("--keep-variables: ended jobs' variables stay on the psds");
    }
    zstr_sendf(pipe, "READY %s", zdist_rpc_server_endpoint(self->rpc));
    s_load_jobs(self);
    for (size_t i = 0; i < self->njobs; i++) /* ended before a restart, not yet dropped */
        s_drop_vars(self, self->jobs[i]);
    s_start_next(self);
    zdist_daemon_serve(self->loop, pipe, self->rpc, 16);
    /* SIGTERM: every running job checkpoints and stops (all at once); each
       resumes at the next start. */
    for (int i = 0; i < self->nruns; i++) {
        zsys_info("job %s: checkpointing before the stop", self->runs[i].job->id);
        zstr_send(self->runs[i].actor, "$TERM");
    }
    for (int i = 0; i < self->nruns; i++) {
        zsock_set_rcvtimeo(zactor_sock(self->runs[i].actor), 60000);
        while (!s_runner_message(self, &self->runs[i]))
            ;
        zloop_reader_end(self->loop, zactor_sock(self->runs[i].actor));
        zactor_destroy(&self->runs[i].actor);
    }
    self->nruns = 0;
    /* Deferred calls end while the RPC server still exists: a job that ended
       meanwhile gets its last reply, every other stream UNAVAILABLE. */
    s_followers_update(self, false);
    s_followers_update(self, true);
    if (self->dropper)
        zloop_reader_end(self->loop, zactor_sock(self->dropper));
    zactor_destroy(&self->dropper);
    zdist_http_destroy(&self->http);
    zloop_destroy(&self->loop);
    for (int i = 0; i < S_MAX_EVENTS; i++)
        free(self->events[i].text);
    for (size_t i = 0; i < self->njobs; i++)
        s_job_free(&self->jobs[i]);
    free(self->jobs);
    zdist_rpc_server_destroy(&self->rpc);
    free(self);
}
