/* coord_server: the coordinator service (proto/coordinator.proto): its handlers, a runner per running job
   (several parameter_server jobs at once, a multi_worker_mirrored one alone), the dropper of ended jobs'
   variables, and --http. The table, the queue, the STATUS streams and the pages are classes of their own. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "coord_drop.h"
#include "coord_events.h"
#include "coord_follow.h"
#include "coord_http.h"
#include "coord_job.h"
#include "coord_queue.h"
#include "coord_runner.h"
#include "coord_server.h"
#include "coord_table.h"
#include "zdist/auth.h"
#include "zdist/coord_service.h"
#include "zdist/daemon.h"
#include "zdist/endpoint.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

/* A running job and its runner actor. */
typedef struct {
    zactor_t *actor;
    coord_row_t *job;
} s_run_t;

/* A PREEMPT waiting for the runners it went to: answered when the last one
   has checkpointed (or ended). */
#define S_MAX_PREEMPTS 64
typedef struct {
    zdist_rpc_call_t *call;
    zactor_t *waits[COORD_MAX_RUNNING];
    int nwaits;
    char detail[2048];
} s_preempt_t;

/* A RESHARD waiting for its job's runner: answered when the job trains on
   its new ps layout, the move fails, or the job ends. */
typedef struct {
    zdist_rpc_call_t *call;
    zactor_t *actor;
} s_reshard_t;

typedef struct {
    coord_server_config_t config;
    zsock_t *pipe;
    zloop_t *loop;
    zdist_rpc_server_t *rpc;
    coord_table_t table;
    s_run_t runs[COORD_MAX_RUNNING];
    int nruns;
    zactor_t *dropper; /* coord_drop: ended jobs' variables off the psds (NULL: --keep-variables) */
    coord_follow_t follow;
    coord_events_t events;
    zdist_http_t *http; /* --http */
    coord_http_view_t view;
    s_preempt_t preempts[S_MAX_PREEMPTS];
    int npreempts;
    s_reshard_t reshards[COORD_MAX_RUNNING]; /* one per running job at most */
    int nreshards;
    /* Elastic workers: config.workers[i] joined through JOIN (not in the
       cluster file); left (drained, or a joined one's SIGTERM) for good. */
    bool joined[COORD_MAX_WORKERS], left[COORD_MAX_WORKERS];
    /* Under CURVE, the certificate a joined worker serves and calls with
       ("": worker-N, a cluster file's). */
    char cert[COORD_MAX_WORKERS][64];
} self_t;

/* ---- dropping ended jobs' variables ---- */

/* A parameter_server job that has ended: its variables off every psd
   (coord_drop tries each until it answers). Its runner wrote the final
   checkpoint before it ended: that holds the result from now on. */
static void
s_drop_vars(self_t *self, coord_row_t *j)
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
    coord_row_t *j = kind && id && strcmp(kind, "DROPPED") == 0 && *id ? coord_table_find(&self->table, id) : NULL;
    if (j) {
        j->vars_dropped = true;
        coord_table_persist(&self->table, j);
        coord_events_add(&self->events, j->id, "dropped", "job '%s': its variables are dropped from every ps",
                         j->name);
    }
    zstr_free(&kind);
    zstr_free(&id);
    return 0;
}

/* ---- runner ---- */

static int s_on_runner(zloop_t *loop, zsock_t *sock, void *arg);

/* Starts queued jobs while they may run — up to max_running at once, a
   multi_worker_mirrored job alone — highest priority first, then oldest.
   Each runner's pipe is read by the server's loop, so the server wakes when
   a runner has news. A job whose document no longer parses fails, and the
   next one is tried. The jobs left queued say what they wait for. */
static void
s_start_next(self_t *self)
{
    for (;;) {
        coord_row_t *running[COORD_MAX_RUNNING];
        for (int i = 0; i < self->nruns; i++)
            running[i] = self->runs[i].job;
        coord_row_t *next = coord_queue_next(&self->table, running, self->nruns, self->config.max_running);
        if (!next)
            return;
        coord_run_config_t *cfg = calloc(1, sizeof *cfg);
        zdist_error_t err = {0};
        if (!cfg || !(cfg->base_dir = strdup(next->base_dir)) ||
            coord_job_parse(next->text, *next->base_dir ? next->base_dir : NULL, &cfg->job, &err) < 0) {
            snprintf(next->state, sizeof next->state, "failed");
            free(next->error);
            next->error = strdup(err.text[0] ? err.text : "out of memory");
            coord_table_persist(&self->table, next);
            coord_run_config_destroy(&cfg);
            continue;
        }
        snprintf(cfg->job_id, sizeof cfg->job_id, "%s", next->id);
        coord_table_dir(&self->table, next, cfg->job_dir, sizeof cfg->job_dir);
        if (cfg->job.spec.ckpt_dir)
            snprintf(cfg->ckpt_root, sizeof cfg->ckpt_root, "%s/%s", cfg->job.spec.ckpt_dir, next->id);
        else
            snprintf(cfg->ckpt_root, sizeof cfg->ckpt_root, "%s", cfg->job_dir);
        mkdir(cfg->ckpt_root, 0755); /* made at submit; again in case it was removed since */
        cfg->num_workers = self->config.num_workers;
        cfg->num_ps = cfg->cluster_ps = self->config.num_ps;
        memcpy(cfg->workers, self->config.workers, sizeof cfg->workers);
        memcpy(cfg->joined, self->joined, sizeof cfg->joined);
        memcpy(cfg->left, self->left, sizeof cfg->left);
        memcpy(cfg->ps, self->config.ps, sizeof cfg->ps);
        cfg->closure_timeout_ms = self->config.closure_timeout_ms;
        snprintf(next->state, sizeof next->state, "running");
        free(next->detail);
        next->detail = strdup("{}");
        coord_table_persist(&self->table, next);
        zsys_info("job %s ('%s'): running on %d workers and %d ps%s", next->id, next->name, cfg->num_workers,
                  cfg->num_ps, self->nruns ? " beside other jobs" : "");
        coord_events_add(&self->events, next->id, "running", "job '%s' running on %d workers and %d ps", next->name,
                         cfg->num_workers, cfg->num_ps);
        s_run_t *run = &self->runs[self->nruns++];
        run->job = next;
        run->actor = zactor_new(coord_runner_actor, cfg);
        if (!run->actor || zloop_reader(self->loop, zactor_sock(run->actor), s_on_runner, self) < 0) {
            zsys_error("job %s: cannot start its runner: out of memory", next->id);
            abort();
        }
    }
}

/* ---- elastic workers ---- */

/* Worker `index` leaves for good: every running job drains it (its closures
   in flight finish, no new ones); `why` for the log and the events. */
static void
s_worker_leaves(self_t *self, int index, const char *why)
{
    self->left[index] = true;
    for (int i = 0; i < self->nruns; i++)
        zstr_sendf(self->runs[i].actor, "DRAIN %d", index);
    zsys_info("worker:%d (%s) leaves: %s", index, self->config.workers[index], why);
    coord_events_add(&self->events, "", "left", "worker:%d (%s) leaves: %s", index, self->config.workers[index], why);
}

/* Whether two endpoints are one place (tcp://localhost:1 is tcp://127.0.0.1:1). */
static bool
s_same_endpoint(const char *a, const char *b)
{
    char na[256], nb[256];
    if (zdist_endpoint_normalize(a, na, sizeof na, NULL) < 0)
        snprintf(na, sizeof na, "%s", a);
    if (zdist_endpoint_normalize(b, nb, sizeof nb, NULL) < 0)
        snprintf(nb, sizeof nb, "%s", b);
    return strcmp(na, nb) == 0;
}

/* The certificate worker:index serves and calls with, under CURVE. */
static void
s_worker_cert(const self_t *self, int index, char *out, size_t size)
{
    if (self->cert[index][0])
        snprintf(out, size, "%s", self->cert[index]);
    else
        snprintf(out, size, "worker-%d", index);
}

/* Under CURVE: the JOIN carries the key the call was authenticated with
   (`who`'s, a worker's: the method's role mask saw to that), which the chief
   then trusts at the worker's endpoint; and no other worker that is still
   a member holds that certificate. 0, or the refusal's status. */
static int
s_join_key(self_t *self, zdist_keys_t *keys, const char *who, const zdist_coord_join_request_t *req, char *why,
           size_t size)
{
    const char *pub = who ? zdist_keys_public(keys, who) : NULL;
    if (!pub || strcmp(pub, req->public_key) != 0) {
        snprintf(why, size, "join: the public key sent (%.40s) is not the key of the certificate '%s' this call "
                 "was authenticated with: a worker joins with the certificate it serves with",
                 *req->public_key ? req->public_key : "none", who ? who : "(none)");
        return ZDIST_STATUS_PERMISSION_DENIED;
    }
    for (int i = 0; i < self->config.num_workers; i++) {
        char cert[64];
        s_worker_cert(self, i, cert, sizeof cert);
        if (!self->left[i] && strcmp(cert, who) == 0 && !s_same_endpoint(self->config.workers[i], req->endpoint)) {
            snprintf(why, size, "join: key '%s' is worker:%d's (%s): a joining worker needs a certificate of its "
                     "own (zdist keygen worker-join-N; zdist-worker --key worker-join-N)", who, i,
                     self->config.workers[i]);
            return ZDIST_STATUS_PERMISSION_DENIED;
        }
    }
    return 0;
}

/* A TF_CONFIG worker's cluster against the chief's: the same ps tasks, and
   the same address for every worker both know. 0, or the refusal's status. */
static int
s_join_cluster(const self_t *self, const zdist_coord_join_request_t *req, char *why, size_t size)
{
    const char *fix = "give it the chief's cluster (TF_CONFIG or --cluster) plus its own task";
    bool same = req->num_ps == (size_t)self->config.num_ps;
    for (int i = 0; same && i < self->config.num_ps; i++)
        if (!s_same_endpoint(req->ps[i], self->config.ps[i])) {
            snprintf(why, size, "join: worker:%d's cluster disagrees with the chief's: ps:%d is %s there, %s here; "
                     "%s", req->task_index, i, *req->ps[i] ? req->ps[i] : "missing", self->config.ps[i], fix);
            return ZDIST_STATUS_INVALID_ARGUMENT;
        }
    if (!same) {
        snprintf(why, size, "join: worker:%d's cluster disagrees with the chief's: %zu ps tasks there, %d here; %s",
                 req->task_index, req->num_ps, self->config.num_ps, fix);
        return ZDIST_STATUS_INVALID_ARGUMENT;
    }
    for (int i = 0; i < self->config.num_workers && (size_t)i < req->num_workers; i++) {
        const char *there = i == req->task_index ? req->endpoint : req->workers[i];
        if (*there && !self->left[i] && !s_same_endpoint(there, self->config.workers[i])) {
            snprintf(why, size, "join: worker:%d's cluster disagrees with the chief's: worker:%d is %s there, %s "
                     "here; %s", req->task_index, i, there, self->config.workers[i], fix);
            return ZDIST_STATUS_INVALID_ARGUMENT;
        }
    }
    if (req->task_index > self->config.num_workers) {
        snprintf(why, size, "join: worker:%d is not the chief's next worker (it has %d: worker:%d joins next); "
                 "waiting for the ones before", req->task_index, self->config.num_workers, self->config.num_workers);
        return ZDIST_STATUS_FAILED_PRECONDITION;
    }
    if (req->task_index < self->config.num_workers && self->left[req->task_index]) {
        snprintf(why, size, "join: worker:%d left the cluster for good (drained or stopped); it is not taken back: "
                 "start it as a new worker (a TF_CONFIG task after the last, or --join)", req->task_index);
        return ZDIST_STATUS_FAILED_PRECONDITION;
    }
    return 0;
}

/* JOIN: a worker not in the cluster file (zdist-worker --join, or a
   TF_CONFIG task the chief does not have) becomes worker:N, N the next
   index; the running parameter_server jobs give it closures once it
   answers, and later jobs count it. A worker that joined before and calls
   again from the same endpoint (restarted) keeps its index; a TF_CONFIG
   worker the chief has there is told it is a member. Under CURVE the chief
   learns the worker's certificate for its endpoint (zdist_keys_add_endpoint),
   so its clients trust that key there. */
static int
s_join(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_coord_join_request_t *req = zdist_rpc_call_body(call);
    zdist_keys_t *keys = zdist_keys_process();
    const char *who = keys ? zdist_msg_user_id(zdist_rpc_call_request(call)) : NULL;
    char why[768];
    int status = keys ? s_join_key(self, keys, who, req, why, sizeof why) : 0;
    if (status == 0 && req->task_index >= 0)
        status = s_join_cluster(self, req, why, sizeof why);
    if (status != 0)
        return zdist_rpc_call_fail(call, status, "%s", why);
    int index = -1;
    for (int i = 0; i < self->config.num_workers && index < 0; i++)
        if (!self->left[i] && s_same_endpoint(self->config.workers[i], req->endpoint))
            index = i;
    if (index >= 0 && !self->joined[index])
        return zdist_coord_reply_join(call, index, self->config.num_workers, true, self->config.ps,
                                      (size_t)self->config.num_ps);
    if (index >= 0 && keys && strcmp(self->cert[index], who) != 0)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_PERMISSION_DENIED, "join: worker:%d at %s serves with key "
                                   "'%s', not '%s'", index, req->endpoint, self->cert[index], who);
    if (index < 0) {
        if (self->config.num_workers >= COORD_MAX_WORKERS)
            return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED, "join: %d workers already, the most a "
                                       "cluster has", self->config.num_workers);
        if (keys && zdist_keys_add_endpoint(keys, req->endpoint, who) < 0)
            return zdist_rpc_call_fail(call, ZDIST_STATUS_INTERNAL, "join: out of memory");
        index = self->config.num_workers++;
        self->view.num_workers = self->config.num_workers;
        snprintf(self->config.workers[index], sizeof self->config.workers[index], "%s", req->endpoint);
        snprintf(self->cert[index], sizeof self->cert[index], "%s", who ? who : "");
        self->joined[index] = true;
        for (int i = 0; i < self->nruns; i++)
            zstr_sendf(self->runs[i].actor, "JOIN %d %s", index, req->endpoint);
        zsys_info("worker:%d (%s) joined the cluster%s%s: %d workers", index, req->endpoint, who ? " with key " : "",
                  who ? who : "", self->config.num_workers);
        coord_events_add(&self->events, "", "joined", "worker:%d (%s) joined the cluster", index, req->endpoint);
    }
    return zdist_coord_reply_join(call, index, self->config.num_workers, false, self->config.ps,
                                  (size_t)self->config.num_ps);
}

/* DRAIN (zdist drain worker:N): the worker leaves the running jobs and the
   cluster on purpose; nothing it runs is lost or run twice. */
static int
s_drain(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_coord_drain_request_t *req = zdist_rpc_call_body(call);
    if (req->task_index >= self->config.num_workers)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "drain: no worker:%d (the cluster has %d workers)",
                                   req->task_index, self->config.num_workers);
    if (self->left[req->task_index])
        return zdist_coord_reply_drain(call, "left");
    s_worker_leaves(self, req->task_index, "drained (zdist drain)");
    return zdist_coord_reply_drain(call, "draining");
}

/* ---- resharding ---- */

/* RESHARD (zdist reshard JOB --ps N): the running parameter_server job
   moves onto the cluster's ps tasks 0..N-1 at its next step boundary; the
   reply waits until it trains there. */
static int
s_reshard(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_coord_reshard_request_t *req = zdist_rpc_call_body(call);
    coord_row_t *j = coord_table_find(&self->table, req->job_id);
    if (!j)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_NOT_FOUND, "reshard: no job '%s' (zdist status lists them)",
                                     req->job_id);
    if (!j->ps)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION, "reshard: job %s is not a "
                                     "parameter_server job: its variables live on its workers, not on ps tasks",
                                     j->id);
    if (req->num_ps > self->config.num_ps)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT, "reshard: --ps %d, but the cluster has %d "
                                     "ps task%s: a job moves onto ps tasks 0..N-1 of the cluster file (for more, add "
                                     "psds to it and restart the chief)", req->num_ps, self->config.num_ps,
                                     self->config.num_ps == 1 ? "" : "s");
    s_run_t *run = NULL;
    for (int i = 0; i < self->nruns && !run; i++)
        if (self->runs[i].job == j)
            run = &self->runs[i];
    if (!run)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION, "reshard: job %s is %s; only a running "
                                     "job moves (a job starts on every ps task of the cluster)", j->id, j->state);
    for (int i = 0; i < self->nreshards; i++)
        if (self->reshards[i].actor == run->actor)
            return zdist_rpc_call_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION, "reshard: job %s is already "
                                         "moving; try again once that move has answered", j->id);
    s_reshard_t *m = &self->reshards[self->nreshards];
    if (self->nreshards >= COORD_MAX_RUNNING || !(m->call = zdist_rpc_call_defer(call)))
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INTERNAL, "reshard: out of memory");
    m->actor = run->actor;
    self->nreshards++;
    zstr_sendf(run->actor, "RESHARD %d", req->num_ps);
    coord_events_add(&self->events, j->id, "resharding", "job '%s' moves to %d ps tasks at its next step boundary",
                     j->name, req->num_ps);
    return 0;
}

/* Runner `actor` answered its RESHARD (text: {ok, num_ps, detail}; NULL:
   the job ended first). */
static void
s_reshard_done(self_t *self, zactor_t *actor, const char *text, const coord_row_t *j)
{
    for (int i = 0; i < self->nreshards; i++) {
        s_reshard_t *m = &self->reshards[i];
        if (m->actor != actor)
            continue;
        json_t *a = text ? json_loads(text, 0, NULL) : NULL;
        const char *detail = json_string_value(json_object_get(a, "detail"));
        int num_ps = (int)json_integer_value(json_object_get(a, "num_ps"));
        if (!text)
            zdist_rpc_call_fail(m->call, ZDIST_STATUS_ABORTED, "reshard: job %s ended (%s at step %lld) before it "
                                "moved", j ? j->id : "?", j ? j->state : "?", j ? (long long)j->step : -1LL);
        else if (!json_is_true(json_object_get(a, "ok")) || num_ps < 1)
            zdist_rpc_call_fail(m->call, ZDIST_STATUS_ABORTED, "reshard: %s", detail ? detail : "failed");
        else
            zdist_coord_reply_reshard(m->call, num_ps, detail);
        json_decref(a);
        zdist_rpc_call_finish(&m->call);
        self->reshards[i] = self->reshards[--self->nreshards];
        return;
    }
}

/* ---- preemption ---- */

/* Runner `actor` has checkpointed for the PREEMPTs sent to it (line: what
   it saved; NULL: it ended, its final state saved): each PREEMPT it was
   the last runner of is answered. */
static void
s_preempt_done(self_t *self, zactor_t *actor, const char *line)
{
    for (int i = 0; i < self->npreempts;) {
        s_preempt_t *p = &self->preempts[i];
        for (int k = 0; k < p->nwaits; k++)
            if (p->waits[k] == actor) {
                p->waits[k] = p->waits[--p->nwaits];
                size_t len = strlen(p->detail);
                snprintf(p->detail + len, sizeof p->detail - len, "%s%s", len ? "; " : "",
                         line ? line : "a job ended (its final checkpoint saved)");
                break;
            }
        if (p->nwaits > 0) {
            i++;
            continue;
        }
        zdist_coord_reply_preempt(p->call, p->detail);
        zdist_rpc_call_finish(&p->call);
        self->preempts[i] = self->preempts[--self->npreempts];
    }
}

/* PREEMPT: the task got SIGTERM. Every running job checkpoints at its next
   step boundary (a job the task does not serve answers at once); the reply
   waits for them, so the task exits after its jobs' state is safe. */
static int
s_preempt(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_coord_preempt_request_t *req = zdist_rpc_call_body(call);
    bool worker = strcmp(req->task_type, "worker") == 0;
    int n = worker ? self->config.num_workers : self->config.num_ps;
    if (req->task_index >= n)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INVALID_ARGUMENT,
                                   "preempt: task %s:%d is not in the cluster (%d %s tasks)", req->task_type,
                                   req->task_index, n, req->task_type);
    /* Least privilege: a task's key preempts that task only. */
    const char *who = zdist_keys_process() ? zdist_msg_user_id(zdist_rpc_call_request(call)) : NULL;
    char cert[64];
    if (worker)
        s_worker_cert(self, req->task_index, cert, sizeof cert);
    else
        snprintf(cert, sizeof cert, "ps-%d", req->task_index);
    if (zdist_keys_process() && (!who || strcmp(who, cert) != 0))
        return zdist_rpc_call_fail(call, ZDIST_STATUS_PERMISSION_DENIED,
                                   "preempt: key '%s' may preempt only its own task; %s:%d is key '%s'",
                                   who ? who : "(none)", req->task_type, req->task_index, cert);
    zsys_info("task %s:%d got SIGTERM (preempted): %d running job%s checkpoint%s first", req->task_type,
              req->task_index, self->nruns, self->nruns == 1 ? "" : "s", self->nruns == 1 ? "s" : "");
    if (self->nruns == 0) {
        if (worker && self->joined[req->task_index] && !self->left[req->task_index])
            s_worker_leaves(self, req->task_index, "SIGTERM (a joined worker)");
        return zdist_coord_reply_preempt(call, "no job running");
    }
    if (self->npreempts >= S_MAX_PREEMPTS)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED, "preempt: %d preemptions under way",
                                   self->npreempts);
    s_preempt_t *p = &self->preempts[self->npreempts];
    memset(p, 0, sizeof *p);
    if (!(p->call = zdist_rpc_call_defer(call)))
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INTERNAL, "preempt: out of memory");
    self->npreempts++;
    for (int i = 0; i < self->nruns; i++) {
        zstr_sendf(self->runs[i].actor, "PREEMPT %s %d", req->task_type, req->task_index);
        p->waits[p->nwaits++] = self->runs[i].actor;
    }
    /* A joined worker that gets SIGTERM leaves on purpose: no one restarts it. */
    if (worker && self->joined[req->task_index] && !self->left[req->task_index])
        s_worker_leaves(self, req->task_index, "SIGTERM (a joined worker)");
    return 0;
}

/* The server stops: its runners checkpointed at $TERM; every PREEMPT is answered. */
static void
s_preempt_stop(self_t *self)
{
    for (int i = 0; i < self->npreempts; i++) {
        s_preempt_t *p = &self->preempts[i];
        size_t len = strlen(p->detail);
        snprintf(p->detail + len, sizeof p->detail - len, "%sthe chief stopped: its jobs checkpointed as it did",
                 len ? "; " : "");
        zdist_coord_reply_preempt(p->call, p->detail);
        zdist_rpc_call_finish(&p->call);
    }
    self->npreempts = 0;
}

/* A status message from a runner; returns true on its last one. */
static bool
s_runner_message(self_t *self, s_run_t *run)
{
    char *kind = zstr_recv(run->actor);
    char *text = kind ? zstr_recv(run->actor) : NULL;
    bool end = kind && strcmp(kind, "END") == 0;
    coord_row_t *j = run->job;
    if (kind && strcmp(kind, "RESHARDED") == 0) {
        s_reshard_done(self, run->actor, text, j);
        zstr_free(&kind);
        zstr_free(&text);
        return false;
    }
    if (kind && strcmp(kind, "PREEMPTED") == 0) {
        s_preempt_done(self, run->actor, text);
        zstr_free(&kind);
        zstr_free(&text);
        return false;
    }
    if (kind && strcmp(kind, "EVENT") == 0) {
        json_t *ev = text ? json_loads(text, 0, NULL) : NULL;
        const char *ek = json_string_value(json_object_get(ev, "kind"));
        const char *et = json_string_value(json_object_get(ev, "text"));
        if (j && ek && et)
            coord_events_add(&self->events, j->id, ek, "%s", et);
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
            coord_table_persist(&self->table, j);
            j->last_persist_ms = now;
        }
        if (end) {
            zsys_info("job %s ('%s'): %s at step %lld of %lld%s%s", j->id, j->name, j->state, (long long)j->step,
                      (long long)j->steps, *j->error ? ": " : "", j->error);
            coord_events_add(&self->events, j->id, j->state, "job '%s' %s at step %lld of %lld%s%s", j->name,
                             j->state, (long long)j->step, (long long)j->steps, *j->error ? ": " : "", j->error);
            s_drop_vars(self, j);
        }
        sd_notifyf(0, "STATUS=job %s %s: step %lld/%lld", j->id, j->state, (long long)j->step, (long long)j->steps);
    }
    json_decref(st);
    bool gone = !kind;
    zstr_free(&kind);
    zstr_free(&text);
    if (end || gone) {
        s_preempt_done(self, run->actor, NULL);
        s_reshard_done(self, run->actor, NULL, j);
    }
    return end || gone;
}

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
    coord_follow_update(&self->follow, false);
    return 0;
}

/* ---- preflight ---- */

/* Every task answers PING as what the cluster says it is. min_workers > 0 (an elastic ring's job): a worker
   that does not answer is only down (the ring forms of those that do), as long as min_workers answer. */
static int
s_preflight(self_t *self, int min_workers, char *why, size_t size)
{
    int n = self->config.num_workers + self->config.num_ps, down = 0, answered = 0;
    zdist_rpc_client_t *c[COORD_MAX_WORKERS + COORD_MAX_PS] = {0};
    uint64_t ids[COORD_MAX_WORKERS + COORD_MAX_PS] = {0};
    int rc = 0;
    for (int i = 0; i < n; i++) {
        bool w = i < self->config.num_workers;
        if (w && (self->joined[i] || self->left[i]))
            continue; /* elastic: one that is gone is only lost */
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
        if (!c[i])
            continue;
        int task = w ? i : i - self->config.num_workers;
        const char *want = w ? "worker" : "ps";
        zdist_msg_t *reply = NULL;
        int got = zdist_rpc_client_recv(c[i], self->config.preflight_timeout_ms + 1000, &reply);
        if (w && min_workers > 0 && (got < 0 || zdist_msg_status(reply) != ZDIST_STATUS_OK)) {
            zdist_msg_destroy(&reply);
            down++;
            continue;
        }
        answered += w;
        if (got < 0) {
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
    if (rc == 0 && min_workers > 0 && answered < min_workers) {
        snprintf(why, size, "preflight: %d worker%s answer%s, strategy.min_workers is %d (%d down); start more "
                 "(zdist-worker) or lower it", answered, answered == 1 ? "" : "s", answered == 1 ? "s" : "",
                 min_workers, down);
        rc = -ENOTCONN;
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
    if ((int)self->table.n >= self->config.max_jobs)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                                   "%zu jobs in the state dir (limit %d); remove old ones from %s/jobs", self->table.n,
                                   self->config.max_jobs, self->config.state_dir);
    size_t unfinished = coord_table_unfinished(&self->table);
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
    if (s_preflight(self, req->job.max_workers > 0 ? req->job.min_workers : 0, why, sizeof why) < 0) {
        zsys_warning("job '%s' refused: %s", req->job.name, why);
        return zdist_rpc_call_fail(call, ZDIST_STATUS_FAILED_PRECONDITION, "%s", why);
    }
    coord_row_t *j;
    if (coord_table_submit(&self->table, req, &j, &err) < 0)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INTERNAL, "%s", err.text);
    zsys_info("job %s ('%s') submitted", j->id, j->name);
    coord_events_add(&self->events, j->id, "submitted", "job '%s' submitted", j->name);
    int rc = zdist_coord_reply_submit(call, j->id);
    s_start_next(self);
    coord_follow_update(&self->follow, false);
    return rc;
}

static int
s_status(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_coord_status_request_t *req = zdist_rpc_call_body(call);
    coord_row_t *j = coord_table_find(&self->table, req->job_id);
    if (!j)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "job '%s': no such job%s", req->job_id,
                                   *req->job_id ? "; 'zdist status' lists them" : " yet");
    return coord_follow_status(&self->follow, call, j, req->follow);
}

static int
s_list(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    return coord_table_reply(&self->table, call, self->table.rows, self->table.n, false);
}

static int
s_cancel(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_coord_cancel_request_t *req = zdist_rpc_call_body(call);
    coord_row_t *j = coord_table_find(&self->table, req->job_id);
    if (!j)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "job '%s': no such job", req->job_id);
    if (strcmp(j->state, "queued") == 0) {
        snprintf(j->state, sizeof j->state, "cancelled");
        coord_table_persist(&self->table, j);
        coord_follow_update(&self->follow, false);
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
    {ZDIST_COORD_PREEMPT, "preempt", &zdist_coord_body_preempt, s_preempt, 0, 0,
     ZDIST_ROLE_WORKER | ZDIST_ROLE_PS},
    /* Under CURVE only a worker's key may join. */
    {ZDIST_COORD_JOIN, "join", &zdist_coord_body_join, s_join, 0, 0, ZDIST_ROLE_WORKER},
    {ZDIST_COORD_DRAIN, "drain", &zdist_coord_body_drain, s_drain, 0, 0, ZDIST_ROLE_CLIENT},
    {ZDIST_COORD_RESHARD, "reshard", &zdist_coord_body_reshard, s_reshard, 0, 0, ZDIST_ROLE_CLIENT},
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
    coord_table_init(&self->table, self->config.state_dir);
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
    coord_follow_init(&self->follow, self->loop, &self->table, self->config.max_followers);
    self->view = (coord_http_view_t){&self->table, &self->events, self->rpc, self->config.num_workers,
                                     self->config.num_ps, self->config.workers, self->joined, self->left};
    if (*self->config.http &&
        !(self->http = zdist_daemon_http(self->config.http, self->loop, coord_http_handle, &self->view, &err))) {
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
    coord_table_load(&self->table);
    for (size_t i = 0; i < self->table.n; i++) /* ended before a restart, not yet dropped */
        s_drop_vars(self, self->table.rows[i]);
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
    s_preempt_stop(self);
    /* Deferred calls end while the RPC server still exists: a job that ended
       meanwhile gets its last reply, every other stream UNAVAILABLE. */
    coord_follow_update(&self->follow, false);
    coord_follow_update(&self->follow, true);
    if (self->dropper)
        zloop_reader_end(self->loop, zactor_sock(self->dropper));
    zactor_destroy(&self->dropper);
    zdist_http_destroy(&self->http);
    zloop_destroy(&self->loop);
    coord_events_release(&self->events);
    coord_table_release(&self->table);
    zdist_rpc_server_destroy(&self->rpc);
    free(self);
}
