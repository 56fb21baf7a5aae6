/* zdist daemon runtime: task lookup, actor start, systemd, clean stop. */
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "zdist/auth.h"
#include "zdist/coord_service.h"
#include "zdist/daemon.h"
#include "zdist/sys.h"

/* The daemon that serves a task type, for "start X instead" messages. */
static const char *
s_daemon_for(const char *type)
{
    if (!type)
        return "the daemon for that task";
    if (strcmp(type, "ps") == 0)
        return "zdist-psd";
    if (strcmp(type, "worker") == 0)
        return "zdist-worker";
    if (strcmp(type, "evaluator") == 0)
        return "zdist-worker --evaluator";
    if (strcmp(type, "chief") == 0)
        return "zdist-coordinator";
    return "the daemon for that task";
}

int
zdist_daemon_find_task(const char *ident, const char *cluster_file, const char *task_spec, const char *bind,
                       const char *want_type, int *ret_index, char *endpoint, size_t endpoint_size,
                       zdist_cluster_t **ret_cluster)
{
    zdist_cluster_t *cluster = NULL;
    int index = 0;
    if (cluster_file || task_spec || getenv("TF_CONFIG")) {
        zdist_error_t err = {0};
        if (zdist_cluster_load(cluster_file, task_spec, &cluster, &err) < 0) {
            fprintf(stderr, "%s: %s\n", ident, err.text);
            return 2;
        }
        const char *type = zdist_cluster_task_type(cluster);
        if (!type || strcmp(type, want_type) != 0) {
            fprintf(stderr, "%s: serves task type '%s', but the task is '%s'; start %s instead or pass --task %s:N\n",
                    ident, want_type, type ? type : "(none)", s_daemon_for(type), want_type);
            zdist_cluster_destroy(&cluster);
            return 2;
        }
        index = zdist_cluster_task_id(cluster);
        if (!bind && zdist_cluster_bind_endpoint(cluster, endpoint, endpoint_size) < 0) {
            fprintf(stderr, "%s: task %s:%d has no address in the cluster; add it or pass --bind\n", ident,
                    want_type, index);
            zdist_cluster_destroy(&cluster);
            return 2;
        }
    } else if (!bind) {
        fprintf(stderr, "%s: no task: set TF_CONFIG, or pass --cluster FILE --task %s:N, or --bind ENDPOINT\n", ident,
                want_type);
        return 2;
    }
    if (bind)
        snprintf(endpoint, endpoint_size, "%s", bind);
    *ret_index = index;
    if (ret_cluster)
        *ret_cluster = cluster;
    else
        zdist_cluster_destroy(&cluster);
    return 0;
}

int
zdist_daemon_keys(const char *ident, const char *keys_dir, const char *type, int index,
                  const zdist_cluster_t *cluster)
{
    char name[64];
    snprintf(name, sizeof name, "%s-%d", type, index);
    return zdist_daemon_keys_as(ident, keys_dir, name, cluster);
}

int
zdist_daemon_keys_as(const char *ident, const char *keys_dir, const char *name, const zdist_cluster_t *cluster)
{
    zdist_keys_t *keys = NULL;
    zdist_error_t err = {0};
    if (zdist_keys_load(keys_dir, name, &keys, &err) < 0 || (keys && zdist_keys_learn_cluster(keys, cluster) < 0)) {
        fprintf(stderr, "%s: --keys: %s\n", ident, err.text[0] ? err.text : "out of memory");
        zdist_keys_destroy(&keys);
        return 2;
    }
    zdist_keys_set_process(keys);
    return 0;
}

static bool
s_is_local(const char *endpoint)
{
    return strncmp(endpoint, "tcp://127.", 10) == 0 || strncmp(endpoint, "tcp://[::1]", 11) == 0 ||
           strncmp(endpoint, "ipc://", 6) == 0 || strncmp(endpoint, "inproc://", 9) == 0;
}

void
zdist_daemon_keep_memory(void)
{
    if (!getenv("MALLOC_MMAP_THRESHOLD_"))
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
    if (!getenv("MALLOC_TRIM_THRESHOLD_"))
        mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

/* ---- preemption ---- */

static struct {
    char chief[256]; /* "" : no preemption */
    char type[16];
    int index;
    bool joined; /* through JOIN: its SIGTERM also tells the chief it leaves, jobs held or not */
} s_preempt_cfg;
static atomic_int s_jobs_held;
static struct {
    char chief[256]; /* "": not joining */
    char endpoint[256];
    int task_index;         /* a TF_CONFIG worker's index; -1: --join */
    char **ps, **workers;   /* its cluster's addresses ("" where it has none) */
    size_t num_ps, num_workers;
    int64_t next_ms;
    int unanswered;         /* tries in a row without an answer */
    char last_warning[512]; /* said once until it changes */
    zdist_rpc_client_t *client;
} s_join_cfg;

static void
s_join_free(void)
{
    for (size_t i = 0; i < s_join_cfg.num_ps; i++)
        free(s_join_cfg.ps[i]);
    for (size_t i = 0; i < s_join_cfg.num_workers; i++)
        free(s_join_cfg.workers[i]);
    free(s_join_cfg.ps);
    free(s_join_cfg.workers);
    s_join_cfg.ps = s_join_cfg.workers = NULL;
    s_join_cfg.num_ps = s_join_cfg.num_workers = 0;
}

/* A job's endpoints of the cluster by index, "" for an index it lacks. */
static char **
s_job_endpoints(const zdist_cluster_t *cluster, const char *job, size_t *ret_n)
{
    size_t n = 0;
    for (size_t t = 0; t < zdist_cluster_num_tasks(cluster, job); t++) {
        int index = 0;
        if (zdist_cluster_job_task(cluster, job, t, &index, NULL) == 0 && (size_t)index + 1 > n)
            n = (size_t)index + 1;
    }
    char **out = calloc(n ? n : 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++) {
        char ep[256] = "";
        if (zdist_cluster_endpoint(cluster, job, (int)i, ep, sizeof ep) < 0)
            ep[0] = '\0';
        out[i] = strdup(ep);
    }
    *ret_n = out ? n : 0;
    return out;
}

void
zdist_daemon_set_join(const char *chief_endpoint, const char *endpoint, const zdist_cluster_t *cluster,
                      int task_index)
{
    s_join_free();
    snprintf(s_join_cfg.chief, sizeof s_join_cfg.chief, "%s", chief_endpoint ? chief_endpoint : "");
    snprintf(s_join_cfg.endpoint, sizeof s_join_cfg.endpoint, "%s", endpoint ? endpoint : "");
    s_join_cfg.task_index = cluster ? task_index : -1;
    if (cluster) {
        s_join_cfg.ps = s_job_endpoints(cluster, "ps", &s_join_cfg.num_ps);
        s_join_cfg.workers = s_job_endpoints(cluster, "worker", &s_join_cfg.num_workers);
    }
}

void
zdist_daemon_set_preempt(const zdist_cluster_t *cluster, const char *type, int index)
{
    s_preempt_cfg.chief[0] = '\0';
    if (!cluster || !type || !zdist_cluster_has_job(cluster, "chief") ||
        zdist_cluster_endpoint(cluster, "chief", 0, s_preempt_cfg.chief, sizeof s_preempt_cfg.chief) < 0) {
        s_preempt_cfg.chief[0] = '\0';
        return;
    }
    snprintf(s_preempt_cfg.type, sizeof s_preempt_cfg.type, "%s", type);
    s_preempt_cfg.index = index;
}

void
zdist_daemon_set_jobs(int n)
{
    atomic_store(&s_jobs_held, n);
}

static int64_t
s_preempt_timeout_ms(void)
{
    const char *v = getenv("ZDIST_PREEMPT_TIMEOUT_MS");
    char *end = NULL;
    long long ms = v && *v ? strtoll(v, &end, 10) : 25000;
    return end && *end ? 25000 : ms;
}

/* One call to the chief, waiting up to its deadline (through signals when
   `through`: a second SIGTERM): the reply, or NULL. */
static zdist_msg_t *
s_chief_call(zdist_rpc_client_t *c, zdist_msg_t *req, int64_t timeout_ms, bool through)
{
    uint64_t id = 0;
    if (!req || zdist_rpc_client_send(c, &req, timeout_ms, &id) < 0)
        return NULL;
    int64_t until = zdist_clock_now_ms() + timeout_ms + 1000;
    zdist_msg_t *reply = NULL;
    while (!reply && zdist_clock_now_ms() < until) {
        int rc = zdist_rpc_client_recv_id(c, id, until - zdist_clock_now_ms(), &reply);
        if (rc == -EINTR && !through)
            break;
        if (rc == -EINTR)
            zsys_info("another SIGTERM: still waiting for the chief's checkpoint (it stops the task anyway by "
                      "%lld ms)", (long long)timeout_ms);
        else if (rc < 0)
            break;
    }
    return reply;
}

/* SIGTERM with jobs held: the chief checkpoints them before this task goes. */
static void
s_preempt(void)
{
    int64_t timeout = s_preempt_timeout_ms();
    if (!s_preempt_cfg.chief[0] || timeout <= 0 || (atomic_load(&s_jobs_held) <= 0 && !s_preempt_cfg.joined))
        return;
    zsys_info("SIGTERM: asking the chief (%s) to checkpoint the jobs of %s:%d before stopping", s_preempt_cfg.chief,
              s_preempt_cfg.type, s_preempt_cfg.index);
    zdist_rpc_client_t *c = zdist_rpc_client_new(s_preempt_cfg.chief, NULL, NULL);
    zdist_msg_t *reply = c ? s_chief_call(c, zdist_msg_new(ZDIST_METHOD_PING), 2000, true) : NULL;
    if (reply && zdist_msg_status(reply) == ZDIST_STATUS_OK) {
        zdist_msg_destroy(&reply);
        reply = s_chief_call(c, zdist_coord_request_preempt(s_preempt_cfg.type, s_preempt_cfg.index), timeout, true);
        char detail[2048] = "";
        if (reply && zdist_msg_status(reply) == ZDIST_STATUS_OK &&
            zdist_coord_reply_read_preempt(reply, detail, sizeof detail, NULL) == 0)
            zsys_info("preemption checkpoint done: %s", *detail ? detail : "no job needed one");
        else
            zsys_warning("preemption: the chief did not confirm a checkpoint (%s%s%s); stopping anyway",
                         reply ? zdist_status_name(zdist_msg_status(reply)) : "no answer",
                         reply && *zdist_msg_status_message(reply) ? ": " : "",
                         reply ? zdist_msg_status_message(reply) : "");
    } else {
        zsys_warning("preemption: the chief (%s) does not answer; stopping without a checkpoint", s_preempt_cfg.chief);
    }
    zdist_msg_destroy(&reply);
    zdist_rpc_client_destroy(&c);
}

/* A warning about the join, once until it changes. */
static void
s_join_warn(const char *text)
{
    if (strcmp(text, s_join_cfg.last_warning) == 0)
        return;
    snprintf(s_join_cfg.last_warning, sizeof s_join_cfg.last_warning, "%s", text);
    zsys_warning("%s", text);
}

/* The chief answered JOIN OK: a member already, or worker:index now. */
static void
s_joined(const zdist_msg_t *reply)
{
    enum { S_MAX_PS = 1024 };
    char (*ps)[256] = calloc(S_MAX_PS, sizeof *ps);
    zdist_coord_join_reply_t r = {0};
    zdist_error_t err = {0};
    if (!ps || zdist_coord_reply_read_join(reply, &r, ps, S_MAX_PS, &err) < 0) {
        zsys_warning("joining through the chief at %s: %s; trying again", s_join_cfg.chief,
                     ps ? err.text : "out of memory");
        free(ps);
        return;
    }
    int index = r.task_index, n = r.num_workers;
    /* Under CURVE a worker that joined with --join has no cluster: it trusts
       ps-i at the chief's ps:i (the psds its jobs reach). */
    zdist_keys_t *keys = zdist_keys_process();
    for (size_t i = 0; keys && i < r.num_ps; i++) {
        char name[32];
        snprintf(name, sizeof name, "ps-%zu", i);
        if (!zdist_keys_name_at(keys, ps[i]) && zdist_keys_add_endpoint(keys, ps[i], name) < 0)
            zsys_warning("joining: out of memory learning ps:%zu's key", i);
    }
    free(ps);
    if (r.member) {
        zsys_info("the chief at %s has worker:%d in its cluster at %s (%d workers)", s_join_cfg.chief, index,
                  s_join_cfg.endpoint, n);
    } else {
        zsys_info("joined the cluster through the chief at %s as worker:%d (%d workers); reached at %s",
                  s_join_cfg.chief, index, n, s_join_cfg.endpoint);
        sd_notifyf(0, "STATUS=worker:%d, joined through the chief at %s", index, s_join_cfg.chief);
        snprintf(s_preempt_cfg.chief, sizeof s_preempt_cfg.chief, "%s", s_join_cfg.chief);
        snprintf(s_preempt_cfg.type, sizeof s_preempt_cfg.type, "worker");
        s_preempt_cfg.index = index;
        s_preempt_cfg.joined = true;
    }
    s_join_cfg.chief[0] = '\0';
    zdist_rpc_client_destroy(&s_join_cfg.client);
    s_join_free();
}

/* The chief refused JOIN: FAILED_PRECONDITION (e.g. worker:4 before
   worker:3 joined) is tried again; UNIMPLEMENTED (an older chief) ends the
   tries; any other refusal (a key that may not join, no key for a chief
   under CURVE, a cluster that disagrees with the chief's) stops the
   daemon: -1. */
static int
s_join_refused(const zdist_msg_t *reply)
{
    int status = zdist_msg_status(reply);
    char text[512];
    snprintf(text, sizeof text, "joining through the chief at %s: %s: %s", s_join_cfg.chief,
             zdist_status_name(status), zdist_msg_status_message(reply));
    /* A TF_CONFIG worker may be a member the chief already reaches: only a
       refusal by the chief itself stops it, not its handshake. */
    bool transient = status == ZDIST_STATUS_UNAUTHENTICATED && s_join_cfg.task_index >= 0;
    if (status == ZDIST_STATUS_FAILED_PRECONDITION || status == ZDIST_STATUS_UNAVAILABLE ||
        status == ZDIST_STATUS_RESOURCE_EXHAUSTED || transient) {
        s_join_warn(text);
        return 0;
    }
    if (status == ZDIST_STATUS_UNIMPLEMENTED) {
        zsys_warning("%s; not trying again", text);
        s_join_cfg.chief[0] = '\0';
        return 0;
    }
    zsys_error("%s; stopping (this worker cannot be part of that cluster)", text);
    return -1;
}

/* JOIN, once the daemon serves: retried every second until the chief
   answers; then this task is worker:N for its preemption. -1: refused for
   good, the daemon stops. Without an answer it says so after 5 tries and
   every 30 (under CURVE a chief never answers a key it does not admit). */
static int
s_join(void)
{
    if (!s_join_cfg.chief[0] || zdist_clock_now_ms() < s_join_cfg.next_ms)
        return 0;
    s_join_cfg.next_ms = zdist_clock_now_ms() + 1000;
    zdist_keys_t *keys = zdist_keys_process();
    /* --join under CURVE: the chief serves as chief-0 (zdist-coordinator's certificate). */
    if (keys && !zdist_keys_name_at(keys, s_join_cfg.chief))
        (void)zdist_keys_add_endpoint(keys, s_join_cfg.chief, "chief-0");
    zdist_error_t err = {0};
    if (!s_join_cfg.client && !(s_join_cfg.client = zdist_rpc_client_new(s_join_cfg.chief, NULL, &err))) {
        s_join_warn(err.text[0] ? err.text : "joining through the chief: out of memory");
        return 0;
    }
    zdist_coord_join_request_t req = {
        .endpoint = s_join_cfg.endpoint,
        .public_key = keys ? zdist_keys_public(keys, zdist_keys_self_name(keys)) : "",
        .task_index = s_join_cfg.task_index,
        .ps = (const char *const *)s_join_cfg.ps,
        .num_ps = s_join_cfg.num_ps,
        .workers = (const char *const *)s_join_cfg.workers,
        .num_workers = s_join_cfg.num_workers,
    };
    zdist_msg_t *reply = s_chief_call(s_join_cfg.client, zdist_coord_request_join(&req), 2000, false);
    int rc = 0;
    if (!reply) {
        int n = ++s_join_cfg.unanswered;
        if (n == 5 || n % 30 == 0)
            zsys_warning("joining through the chief at %s: no answer after %d tries%s; trying every second",
                         s_join_cfg.chief, n, keys ? "" : " (a chief under CURVE admits only the keys of its key "
                         "directory: give --keys DIR)");
    } else if (zdist_msg_status(reply) == ZDIST_STATUS_OK) {
        s_joined(reply);
    } else {
        rc = s_join_refused(reply);
    }
    if (reply)
        s_join_cfg.unanswered = 0;
    zdist_msg_destroy(&reply);
    return rc;
}

int
zdist_daemon_run(zactor_fn *actor_fn, void *args, const char *what)
{
    zdist_daemon_keep_memory();
    zactor_t *actor = zactor_new(actor_fn, args);
    char *hello = actor ? zstr_recv(actor) : NULL;
    if (!hello || strncmp(hello, "READY ", 6) != 0) {
        zsys_error("cannot start: %s", hello ? hello + 6 : "actor failed");
        zstr_free(&hello);
        zactor_destroy(&actor);
        zdist_keys_t *keys = zdist_keys_process();
        zdist_keys_destroy(&keys); /* its ZAP handler holds czmq's context open */
        return 1;
    }
    const char *endpoint = hello + 6;
    zdist_keys_t *keys = zdist_keys_process();
    if (keys)
        zsys_info("CURVE on: certificate '%s', keys in '%s'", zdist_keys_self_name(keys), zdist_keys_dir(keys));
    else if (!s_is_local(endpoint))
        zsys_warning("serving %s without CURVE: traffic is neither encrypted nor authenticated", endpoint);
    zsys_info("%s serving at %s (version %s)", what, endpoint, ZDIST_VERSION_STRING);
    sd_notifyf(0, "READY=1\nSTATUS=%s serving at %s", what, endpoint);
    zstr_free(&hello);

    /* czmq turns SIGINT/SIGTERM into zsys_interrupted. */
    zpoller_t *poller = zpoller_new(actor, NULL);
    int status = 0;
    while (!zsys_interrupted) {
        if (s_join() < 0) {
            status = 1;
            break;
        }
        if (zpoller_wait(poller, s_join_cfg.chief[0] ? 100 : 500) == actor) {
            char *msg = zstr_recv(actor);
            zsys_error("server stopped: %s", msg ? msg : "unknown reason");
            zstr_free(&msg);
            status = 1;
            break;
        }
    }
    zpoller_destroy(&poller);
    zdist_rpc_client_destroy(&s_join_cfg.client);
    s_join_free();
    sd_notify(0, "STOPPING=1\nSTATUS=stopping");
    if (status == 0) {
        sd_notify(0, "STATUS=preempted: checkpointing before the stop");
        s_preempt(); /* the actor still serves: the chief needs this task for the checkpoint */
    }
    /* From here a SIGINT or SIGTERM would only cut short (EINTR) the waits
       for the actor's threads, which may be finishing a step blocked on a
       frozen psd: main would return and exit() close the sockets they still
       use (czmq then aborts). SIGKILL still ends a daemon that hangs.
       czmq's handlers go first: its exit handler would put back the
       default ones, and a late second SIGTERM would end the process 143. */
    zsys_handler_reset();
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    zsys_info("stopping");
    zactor_destroy(&actor);
    zdist_keys_destroy(&keys);
    zsys_info("stopped");
    return status;
}

/* The serve loop polls the actor pipe, the ROUTER and the connection
   monitor by their ZMQ_FD, not as ZeroMQ items: zmq_poll reads ZMQ_EVENTS
   of every ZeroMQ item before and after each poll (a poll and a getpid
   each), about eight polls per wake-up for three items. A ZMQ_FD is
   edge-triggered: it is readable when commands arrive for its socket, not
   while messages wait, and any call that processes the socket's commands
   (recv, send, ZMQ_EVENTS) may take the edge. So each handler reads until
   its socket is empty, the loop handles what waits before it first polls,
   and the rpc server says when requests may wait unsignalled (dispatch
   stopped at its batch, a deferred reply was sent from a timer or another
   reader): the loop then dispatches again from a timer due at once, after
   the other handlers, so a flood of requests does not starve $TERM. */
typedef struct {
    zloop_t *loop;
    zsock_t *pipe;
    zdist_rpc_server_t *rpc;
    int batch;
    int again; /* the timer that dispatches again, -1 for none */
} s_serve_t;

/* Every command waiting; -1 (the loop ends) on $TERM or a broken pipe. */
static int
s_on_pipe(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    (void) loop;
    (void) item;
    s_serve_t *serve = arg;
    while (zsock_events(serve->pipe) & ZMQ_POLLIN) {
        char *command = zstr_recv(serve->pipe);
        if (!command)
            return -1;
        bool term = streq(command, "$TERM");
        zstr_free(&command);
        if (term) {
            /* Answer what is already here before stopping. */
            while (zdist_rpc_server_dispatch(serve->rpc, 1024) > 0)
                ;
            return -1;
        }
    }
    return 0;
}

static void
s_dispatch(s_serve_t *serve)
{
    int rc = zdist_rpc_server_dispatch(serve->rpc, serve->batch);
    if (rc < 0)
        zsys_error("server socket failed: %s", zmq_strerror(-rc));
}

static int
s_on_request(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    (void) loop;
    (void) item;
    s_dispatch(arg);
    return 0;
}

static int
s_on_again(zloop_t *loop, int timer_id, void *arg)
{
    (void) loop;
    (void) timer_id;
    s_serve_t *serve = arg;
    serve->again = -1;
    s_dispatch(serve);
    return 0;
}

static void
s_wake(void *arg)
{
    s_serve_t *serve = arg;
    if (serve->again < 0)
        serve->again = zloop_timer(serve->loop, 0, 1, s_on_again, serve);
}

/* zdist_rpc_server_watch reads the monitor until it is empty, wherever it
   is called from, so its descriptor is readable again at the next event. */
static int
s_on_watch(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    (void) loop;
    (void) item;
    zdist_rpc_server_watch(((s_serve_t *) arg)->rpc);
    return 0;
}

static int
s_on_sweep(zloop_t *loop, int timer_id, void *arg)
{
    (void) timer_id;
    return s_on_watch(loop, NULL, arg);
}

/* Fed from the event loop itself, so a wedged loop (not just a dead
   process) gets the daemon restarted. */
static int
s_on_watchdog(zloop_t *loop, int timer_id, void *arg)
{
    (void) loop;
    (void) timer_id;
    (void) arg;
    sd_notify(0, "WATCHDOG=1");
    return 0;
}

/* The loop's first act: what came before it (a $TERM, a connection, a
   request) may have left no edge on the descriptors. */
static int
s_on_start(zloop_t *loop, int timer_id, void *arg)
{
    (void) timer_id;
    s_serve_t *serve = arg;
    zdist_rpc_server_watch(serve->rpc);
    s_dispatch(serve);
    return s_on_pipe(loop, NULL, serve);
}

/* A socket's ZMQ_FD as a raw poll item. */
static zmq_pollitem_t
s_fd_item(void *socket)
{
    zmq_pollitem_t item = {NULL, -1, ZMQ_POLLIN, 0};
    size_t size = sizeof item.fd;
    if (socket && zmq_getsockopt(socket, ZMQ_FD, &item.fd, &size) != 0)
        item.fd = -1;
    return item;
}

void
zdist_daemon_serve(zloop_t *loop, zsock_t *pipe, zdist_rpc_server_t *rpc, int batch)
{
    s_serve_t serve = {loop, pipe, rpc, batch > 0 ? batch : 1, -1};
    zloop_set_nonstop(loop, true); /* main decides when to stop: $TERM */
    zmq_pollitem_t on_pipe = s_fd_item(zsock_resolve(pipe));
    zmq_pollitem_t item = s_fd_item(zdist_rpc_server_socket(rpc));
    /* Connections come and go without requests: a plain one past its
       peer's limit is refused when accepted, not at its first request,
       and shut down a second later (the timer: when no other event comes). */
    zmq_pollitem_t watch = s_fd_item(zdist_rpc_server_monitor_socket(rpc));
    if (on_pipe.fd < 0 || item.fd < 0) {
        zsys_error("cannot poll the actor's sockets: %s", zmq_strerror(zmq_errno()));
        return;
    }
    zloop_poller(loop, &on_pipe, s_on_pipe, &serve);
    /* Before the ROUTER, so a wake-up learns of new connections before it
       reads their requests, and dispatch need not read the monitor. */
    int sweep = -1;
    if (watch.fd >= 0) {
        zloop_poller(loop, &watch, s_on_watch, &serve);
        zdist_rpc_server_set_monitor_polled(rpc, true);
        sweep = zloop_timer(loop, 1000, 0, s_on_sweep, &serve);
    }
    zloop_poller(loop, &item, s_on_request, &serve);
    zdist_rpc_server_set_wake(rpc, s_wake, &serve);
    int timer = -1;
    uint64_t watchdog_us = 0;
    if (sd_watchdog_enabled(0, &watchdog_us) > 0 && watchdog_us > 0)
        timer = zloop_timer(loop, watchdog_us / 2000 > 0 ? watchdog_us / 2000 : 1, 0, s_on_watchdog, NULL);
    /* In the loop, not before it: a loop that never started cannot end
       its timers. */
    if (zloop_timer(loop, 0, 1, s_on_start, &serve) < 0)
        zsys_error("cannot start the event loop: out of memory");
    else
        /* zloop_start also returns 0 when a signal interrupts its poll (a
           SIGSTOP/SIGCONT does): only $TERM (a handler returning -1) ends it. */
        while (zloop_start(loop) == 0)
            ;
    zdist_rpc_server_set_wake(rpc, NULL, NULL);
    zloop_poller_end(loop, &on_pipe);
    zloop_poller_end(loop, &item);
    if (watch.fd >= 0) {
        zloop_poller_end(loop, &watch);
        zdist_rpc_server_set_monitor_polled(rpc, false);
    }
    if (sweep >= 0)
        zloop_timer_end(loop, sweep);
    if (serve.again >= 0)
        zloop_timer_end(loop, serve.again);
    if (timer >= 0)
        zloop_timer_end(loop, timer);
}

void
zdist_daemon_rpc_log(void *state, const char *line)
{
    (void) state;
    zsys_warning("%s", line);
}

/* ---- --http ---- */

zdist_http_t *
zdist_daemon_http(const char *addr, zloop_t *loop, zdist_http_handler_fn *fn, void *arg, zdist_error_t *err)
{
    if (!addr || !*addr)
        return NULL;
    zdist_http_t *h = zdist_http_new(addr, loop, fn, arg, err);
    if (!h) {
        zsys_error("%s", err->text);
        return NULL;
    }
    zsys_info("http: serving %s (/metrics)", zdist_http_url(h));
    if (!zdist_http_is_loopback(h))
        zsys_warning("http: %s is not a loopback address: anyone who reaches it reads this daemon's metrics "
                     "(read-only, plain HTTP, no authentication); bind 127.0.0.1 and put a proxy in front to "
                     "restrict it",
                     zdist_http_url(h));
    return h;
}
