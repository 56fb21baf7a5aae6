/* coord_server: coordinator.proto handlers, the job table persisted under the state dir, one job runner at a time,
   STATUS streams to followers. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "common.pb-c.h"
#include "wire/body.h"
#include "coord_job.h"
#include "coord_server.h"
#include "coordinator.pb-c.h"
#include "zdist/daemon.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

#define S_MAX_JOB_BYTES (16u << 20)
#define S_MAX_FOLLOWERS 64       /* STATUS streams open at once */
#define S_FOLLOW_MIN_MS 250      /* at most one update per follower this often */
#define S_FOLLOW_IDLE_MS 5000    /* and at least one this often, changed or not */

typedef struct {
    char id[64];
    char *name;
    char *text;     /* the submitted document */
    char *base_dir;
    char state[16];
    int64_t step, steps;
    char *error;
    char *detail;   /* JSON */
    int64_t seq;    /* submission order */
} s_job_t;

/* A STATUS stream: the deferred call and what it was last sent. A client that
   goes away without a word stays here until its job ends or its call's
   deadline passes (ROUTER drops what it cannot route), hence the limit. */
typedef struct {
    zdist_rpc_call_t *call;
    char job_id[64];
    char state[16];
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
    zactor_t *runner;
    s_job_t *running;
    int64_t last_persist_ms;
    s_follower_t followers[S_MAX_FOLLOWERS];
    size_t nfollowers;
} self_t;

/* ---- persistence ---- */

static int
s_write_atomic(const char *path, const char *text)
{
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    size_t len = strlen(text);
    int rc = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0 ? 0 : -EIO;
    close(fd);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    return rc;
}

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
    json_t *detail = j->detail ? json_loads(j->detail, 0, NULL) : NULL;
    json_t *st = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:I, s:o}", "job_id", j->id, "name", j->name,
                           "state", j->state, "step", (json_int_t)j->step, "steps", (json_int_t)j->steps, "error",
                           j->error ? j->error : "", "base_dir", j->base_dir, "seq", (json_int_t)j->seq, "detail",
                           detail ? detail : json_object());
    char *text = st ? json_dumps(st, JSON_INDENT(1)) : NULL;
    json_decref(st);
    snprintf(path, sizeof path, "%s/state.json", dir);
    if (!text || s_write_atomic(path, text) < 0)
        zsys_warning("job %s: cannot write '%s', ignoring", j->id, path);
    free(text);
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

static char *
s_read_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[8192];
    size_t got;
    while (m && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, got, m);
    if (m)
        fclose(m);
    fclose(f);
    return buf;
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
        if (e->d_name[0] == '.')
            continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s/state.json", dir, e->d_name);
        json_t *st = json_load_file(path, 0, NULL);
        snprintf(path, sizeof path, "%s/%s/job.json", dir, e->d_name);
        char *text = s_read_file(path);
        const char *state = NULL, *name = NULL, *error = NULL, *base = NULL;
        json_int_t step = 0, steps = 0, seq = 0;
        json_t *detail = NULL;
        if (!st || !text ||
            json_unpack(st, "{s:s, s:s, s:I, s:I, s:s, s:s, s:I, s:o}", "state", &state, "name", &name, "step", &step,
                        "steps", &steps, "error", &error, "base_dir", &base, "seq", &seq, "detail", &detail) < 0 ||
            strlen(e->d_name) >= sizeof((s_job_t *)0)->id) {
            zsys_warning("state dir: '%s/%s' is not a job I can read, ignoring", dir, e->d_name);
            json_decref(st);
            free(text);
            continue;
        }
        s_job_t *j = calloc(1, sizeof *j);
        if (j) {
            /* Length checked above; memcpy says so to gcc's truncation check. */
            memcpy(j->id, e->d_name, strlen(e->d_name) + 1);
            j->name = strdup(name);
            j->text = text;
            text = NULL;
            j->base_dir = strdup(base);
            bool unfinished = strcmp(state, "queued") == 0 || strcmp(state, "running") == 0;
            snprintf(j->state, sizeof j->state, "%s", unfinished ? "queued" : state);
            j->step = step;
            j->steps = steps;
            j->error = strdup(error);
            j->detail = json_dumps(detail, JSON_COMPACT);
            j->seq = seq;
            if (s_add(self, j) < 0)
                s_job_free(&j);
            else if (unfinished)
                zsys_info("job %s ('%s') was %s at step %lld: resuming it from its last checkpoint", j->id, j->name,
                          state, (long long)step);
        }
        free(text);
        json_decref(st);
    }
    closedir(d);
}

/* ---- runner ---- */

static void
s_start_next(self_t *self)
{
    if (self->runner)
        return;
    s_job_t *next = NULL;
    for (size_t i = 0; i < self->njobs; i++)
        if (strcmp(self->jobs[i]->state, "queued") == 0 && (!next || self->jobs[i]->seq < next->seq))
            next = self->jobs[i];
    if (!next)
        return;
    coord_runner_config_t *cfg = calloc(1, sizeof *cfg);
    zdist_error_t err = {0};
    if (!cfg || !(cfg->base_dir = strdup(next->base_dir)) ||
        coord_job_parse(next->text, *next->base_dir ? next->base_dir : NULL, &cfg->job, &err) < 0) {
        snprintf(next->state, sizeof next->state, "failed");
        free(next->error);
        next->error = strdup(err.text[0] ? err.text : "out of memory");
        s_persist(self, next);
        coord_runner_config_destroy(&cfg);
        return;
    }
    snprintf(cfg->job_id, sizeof cfg->job_id, "%s", next->id);
    s_job_dir(self, next, cfg->job_dir, sizeof cfg->job_dir);
    cfg->num_workers = self->config.num_workers;
    cfg->num_ps = self->config.num_ps;
    memcpy(cfg->workers, self->config.workers, sizeof cfg->workers);
    memcpy(cfg->ps, self->config.ps, sizeof cfg->ps);
    cfg->closure_timeout_ms = self->config.closure_timeout_ms;
    snprintf(next->state, sizeof next->state, "running");
    s_persist(self, next);
    self->running = next;
    zsys_info("job %s ('%s'): running on %d workers and %d ps", next->id, next->name, cfg->num_workers,
              cfg->num_ps);
    self->runner = zactor_new(coord_runner_actor, cfg);
    if (!self->runner) {
        snprintf(next->state, sizeof next->state, "failed");
        self->running = NULL;
        return;
    }
}

/* A status message from the runner; returns true on its last one. */
static bool
s_runner_message(self_t *self)
{
    char *kind = zstr_recv(self->runner);
    char *text = kind ? zstr_recv(self->runner) : NULL;
    bool end = kind && strcmp(kind, "END") == 0;
    s_job_t *j = self->running;
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
        if (changed || end || now - self->last_persist_ms > 1000) {
            s_persist(self, j);
            self->last_persist_ms = now;
        }
        if (end)
            zsys_info("job %s ('%s'): %s at step %lld of %lld%s%s", j->id, j->name, j->state, (long long)j->step,
                      (long long)j->steps, *j->error ? ": " : "", j->error);
        sd_notifyf(0, "STATUS=job %s %s: step %lld/%lld", j->id, j->state, (long long)j->step, (long long)j->steps);
    }
    json_decref(st);
    bool gone = !kind;
    zstr_free(&kind);
    zstr_free(&text);
    return end || gone;
}

static void s_followers_update(self_t *self, bool stopping);

/* The runner's messages, drained from a timer: a job's progress needs no
   lower latency than this. Followers hear of it from here too. */
static int
s_on_runner(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    self_t *self = arg;
    while (self->runner && (zsock_events(zactor_sock(self->runner)) & ZMQ_POLLIN)) {
        if (s_runner_message(self)) {
            zactor_destroy(&self->runner);
            self->running = NULL;
            s_start_next(self);
        }
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
        Zdist__PingRequest req = ZDIST__PING_REQUEST__INIT;
        zdist_msg_t *m = zdist_msg_new(ZDIST_METHOD_PING);
        if (!c[i] || !m || zdist_msg_set_body(m, &req.base) < 0 ||
            zdist_rpc_client_send(c[i], &m, self->config.preflight_timeout_ms, &ids[i]) < 0) {
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
        Zdist__PingReply *p = NULL;
        if (st != ZDIST_STATUS_OK) {
            snprintf(why, size, "preflight: task %s:%d (%s) is unreachable: %s%s%s; start it (zdist-%s) or fix the "
                     "cluster",
                     want, task, zdist_rpc_client_endpoint(c[i]), zdist_status_name(st),
                     *zdist_msg_status_message(reply) ? ": " : "", zdist_msg_status_message(reply),
                     w ? "worker" : "psd");
            rc = -ENOTCONN;
        } else if (zdist_msg_unpack_body(reply, &zdist__ping_reply__descriptor, (ProtobufCMessage **)&p, NULL) < 0) {
            snprintf(why, size, "preflight: task %s:%d (%s): its PING reply does not decode", want, task,
                     zdist_rpc_client_endpoint(c[i]));
            rc = -EPROTO;
        } else if (strcmp(p->role, want) != 0) {
            snprintf(why, size, "preflight: task %s:%d (%s) answers as '%s', not '%s'; check the cluster addresses",
                     want, task, zdist_rpc_client_endpoint(c[i]), p->role, want);
            rc = -EPROTO;
        } else if (p->protocol != ZDIST_PROTOCOL_VERSION) {
            snprintf(why, size, "preflight: task %s:%d (%s) speaks protocol %u, this coordinator %d; upgrade it",
                     want, task, zdist_rpc_client_endpoint(c[i]), p->protocol, ZDIST_PROTOCOL_VERSION);
            rc = -EPROTO;
        }
        if (p)
            protobuf_c_message_free_unpacked(&p->base, NULL);
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

static int
s_submit(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Coordinator__SubmitRequest *req =
        (const Zdist__Coordinator__SubmitRequest *)zdist_rpc_call_body(call);
    if (!req->job_json || !*req->job_json)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INVALID_ARGUMENT, "job_json: empty; send the job document");
    if (strlen(req->job_json) > S_MAX_JOB_BYTES)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INVALID_ARGUMENT, "job_json: larger than 16 MiB");
    if ((int)self->njobs >= self->config.max_jobs)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                                   "%zu jobs in the state dir (limit %d); remove old ones from %s/jobs", self->njobs,
                                   self->config.max_jobs, self->config.state_dir);
    coord_job_t job;
    zdist_error_t err = {0};
    const char *base = req->base_dir && *req->base_dir ? req->base_dir : NULL;
    if (coord_job_parse(req->job_json, base, &job, &err) < 0)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INVALID_ARGUMENT, "%s", err.text);
    if (job.strategy == ZDIST_STRATEGY_PARAMETER_SERVER && self->config.num_ps == 0) {
        coord_job_release(&job);
        return zdist_rpc_call_fail(call, ZDIST_STATUS_FAILED_PRECONDITION,
                                   "strategy.type: parameter_server needs ps tasks and the cluster has none; add "
                                   "\"ps\" tasks to the cluster or use multi_worker_mirrored");
    }
    char why[1024];
    if (s_preflight(self, why, sizeof why) < 0) {
        coord_job_release(&job);
        zsys_warning("job '%s' refused: %s", job.name ? job.name : "?", why);
        return zdist_rpc_call_fail(call, ZDIST_STATUS_FAILED_PRECONDITION, "%s", why);
    }
    s_job_t *j = calloc(1, sizeof *j);
    if (!j) {
        coord_job_release(&job);
        return -ENOMEM;
    }
    char dir[1100];
    do {
        snprintf(j->id, sizeof j->id, "j%08llx", (unsigned long long)(zdist_random_u64() & 0xffffffffu));
        s_job_dir(self, j, dir, sizeof dir);
    } while (access(dir, F_OK) == 0);
    j->name = strdup(job.name);
    j->text = strdup(req->job_json);
    j->base_dir = strdup(base ? base : "");
    snprintf(j->state, sizeof j->state, "queued");
    j->steps = job.steps;
    j->error = strdup("");
    j->detail = strdup("{}");
    j->seq = self->next_seq;
    coord_job_release(&job);
    char path[1200];
    snprintf(path, sizeof path, "%s/job.json", dir);
    if (!j->name || !j->text || !j->base_dir || !j->error || !j->detail || mkdir(dir, 0755) < 0 ||
        s_write_atomic(path, j->text) < 0 || s_add(self, j) < 0) {
        int e = errno;
        s_job_free(&j);
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INTERNAL, "cannot create '%s': %s", dir, strerror(e));
    }
    s_persist(self, j);
    zsys_info("job %s ('%s') submitted", j->id, j->name);
    Zdist__Coordinator__SubmitReply reply = ZDIST__COORDINATOR__SUBMIT_REPLY__INIT;
    reply.job_id = j->id;
    int rc = zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
    s_start_next(self);
    return rc;
}

static int
s_reply_jobs(zdist_rpc_call_t *call, s_job_t **jobs, size_t n, bool detail)
{
    Zdist__Coordinator__JobStatus *st = calloc(n ? n : 1, sizeof *st);
    Zdist__Coordinator__JobStatus **sp = calloc(n ? n : 1, sizeof *sp);
    if (!st || !sp) {
        free(st);
        free(sp);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        zdist__coordinator__job_status__init(&st[i]);
        st[i].job_id = jobs[i]->id;
        st[i].name = jobs[i]->name;
        st[i].state = jobs[i]->state;
        st[i].step = jobs[i]->step;
        st[i].steps = jobs[i]->steps;
        st[i].error = jobs[i]->error;
        st[i].detail_json = detail ? jobs[i]->detail : (char *)"";
        sp[i] = &st[i];
    }
    Zdist__Coordinator__StatusReply reply = ZDIST__COORDINATOR__STATUS_REPLY__INIT;
    reply.n_jobs = n;
    reply.jobs = sp;
    int rc = zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
    free(st);
    free(sp);
    return rc;
}

static bool
s_final(const char *state)
{
    return strcmp(state, "done") == 0 || strcmp(state, "failed") == 0 || strcmp(state, "cancelled") == 0;
}

static int
s_status(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Coordinator__StatusRequest *req =
        (const Zdist__Coordinator__StatusRequest *)zdist_rpc_call_body(call);
    s_job_t *j = s_find(self, req->job_id);
    if (!j)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "job '%s': no such job%s", req->job_id,
                                   *req->job_id ? "; 'zdist status' lists them" : " yet");
    bool follow = req->follow && !s_final(j->state);
    if (follow && self->nfollowers >= S_MAX_FOLLOWERS)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                                   "%d status streams open (the limit); poll STATUS without follow", S_MAX_FOLLOWERS);
    int rc = s_reply_jobs(call, &j, 1, true);
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
    return 0;
}

/* Sends each follower its job's news: an update when the step or state
   changed (at most every S_FOLLOW_MIN_MS), the last reply when the job ended;
   with stopping, ends every stream with UNAVAILABLE so clients subscribe
   again. Runs on the server's thread while the RPC server exists. */
static void
s_followers_update(self_t *self, bool stopping)
{
    int64_t now = zdist_clock_now_ms();
    for (size_t i = 0; i < self->nfollowers;) {
        s_follower_t *f = &self->followers[i];
        s_job_t *j = s_find(self, f->job_id);
        bool expired = zdist_rpc_call_remaining_ms(f->call) <= 0; /* a caller that sent a deadline gave up */
        bool end = stopping || expired || !j || s_final(j->state);
        if (stopping) {
            zdist_rpc_call_fail(f->call, ZDIST_STATUS_UNAVAILABLE, "coordinator stopping");
        } else if (expired) {
            zdist_rpc_call_fail(f->call, ZDIST_STATUS_DEADLINE_EXCEEDED, "status stream: past its deadline");
        } else if (!j) {
            zdist_rpc_call_fail(f->call, ZDIST_STATUS_NOT_FOUND, "job '%s': no such job", f->job_id);
        } else {
            bool changed = j->step != f->step || strcmp(j->state, f->state) != 0;
            if (!end && !(changed && now - f->sent_ms >= S_FOLLOW_MIN_MS) && now - f->sent_ms < S_FOLLOW_IDLE_MS) {
                i++;
                continue;
            }
            if (s_reply_jobs(f->call, &j, 1, true) < 0) {
                if (!end) {
                    i++;
                    continue; /* out of memory: try again at the next tick */
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
}

static int
s_list(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    return s_reply_jobs(call, self->jobs, self->njobs, false);
}

static int
s_cancel(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Coordinator__CancelRequest *req =
        (const Zdist__Coordinator__CancelRequest *)zdist_rpc_call_body(call);
    s_job_t *j = s_find(self, req->job_id);
    if (!j || !*req->job_id)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "job '%s': no such job", req->job_id);
    if (strcmp(j->state, "queued") == 0) {
        snprintf(j->state, sizeof j->state, "cancelled");
        s_persist(self, j);
    } else if (j == self->running && self->runner) {
        zstr_send(self->runner, "CANCEL");
        zsys_info("job %s: cancelling", j->id);
    }
    Zdist__Coordinator__CancelReply reply = ZDIST__COORDINATOR__CANCEL_REPLY__INIT;
    reply.state = j == self->running ? (char *)"cancelling" : j->state;
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
}

/* Transitional: bodies passed through undecoded until this service has typed ones. */
static const zdist_rpc_body_t s_body_coordinator_cancel_request = {&zdist__coordinator__cancel_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_coordinator_list_request = {&zdist__coordinator__list_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_coordinator_status_request = {&zdist__coordinator__status_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_coordinator_submit_request = {&zdist__coordinator__submit_request__descriptor, 0, NULL, NULL};

static const zdist_rpc_method_t s_methods[] = {
    {ZDIST__COORDINATOR__METHOD__COORDINATOR_SUBMIT, "submit", &s_body_coordinator_submit_request,
     s_submit, 0, 0, ZDIST_ROLE_CLIENT},
    {ZDIST__COORDINATOR__METHOD__COORDINATOR_STATUS, "status", &s_body_coordinator_status_request,
     s_status, 0, 0, ZDIST_ROLE_CLIENT},
    {ZDIST__COORDINATOR__METHOD__COORDINATOR_CANCEL, "cancel", &s_body_coordinator_cancel_request,
     s_cancel, 0, 0, ZDIST_ROLE_CLIENT},
    {ZDIST__COORDINATOR__METHOD__COORDINATOR_LIST, "list", &s_body_coordinator_list_request, s_list, 0,
     0, ZDIST_ROLE_CLIENT},
};
#define S_NMETHODS (sizeof s_methods / sizeof s_methods[0])

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
    zdist_error_t err = {0};
    self->rpc = zdist_rpc_server_new(self->config.endpoint, s_methods, S_NMETHODS, self, &opts, &err);
    if (!self->rpc) {
        zstr_sendf(pipe, "ERROR %s", err.text);
        free(self);
        return;
    }
    zstr_sendf(pipe, "READY %s", zdist_rpc_server_endpoint(self->rpc));
    self->loop = zloop_new();
    zloop_timer(self->loop, 50, 0, s_on_runner, self);
    s_load_jobs(self);
    s_start_next(self);
    zdist_daemon_serve(self->loop, pipe, self->rpc, 16);
    if (self->runner) {
        /* SIGTERM: the running job checkpoints and stops; it resumes at the next start. */
        zsys_info("job %s: checkpointing before the stop", self->running->id);
        zstr_send(self->runner, "$TERM");
        zsock_set_rcvtimeo(zactor_sock(self->runner), 60000);
        while (!s_runner_message(self))
            ;
        zactor_destroy(&self->runner);
    }
    /* Deferred calls end while the RPC server still exists: a job that ended
       meanwhile gets its last reply, every other stream UNAVAILABLE. */
    s_followers_update(self, false);
    s_followers_update(self, true);
    zloop_destroy(&self->loop);
    for (size_t i = 0; i < self->njobs; i++)
        s_job_free(&self->jobs[i]);
    free(self->jobs);
    zdist_rpc_server_destroy(&self->rpc);
    free(self);
}
