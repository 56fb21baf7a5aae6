/* bench_ps: zdist-psd through the libzdist ps client against raw ZeroMQ moving the same bytes, in the same
   run.

   A real zdist-psd runs as a child process on a free loopback port. Each
   case runs W calls in flight (W = 1 measures plain round trips, W = 8 the
   pipelined client), first against a raw ROUTER echo server moving the same
   request and reply bytes (the approach of bench_rpc), then against the psd;
   the raw server is this program run with --raw-server: a child process
   with its own libzmq context, like the psd. Cases:
     pull         dense pull of a whole shard (reply carries SIZE bytes)
     push+sgd     dense gradient push applied by SGD (request carries SIZE),
                  in parts of ZDIST_PS_PART_BYTES as the ps client sends it
     pull_rows    1,024 ids x 64 float32 from a 1,000,000-row table
     push sparse  1,024 ids x 64 float32 gradient rows, SGD, same table
     push_pull    dense gradient up (SGD), the updated shard back: SIZE
                  each way
     pull 64 B    small-request round trip
   Ratios are psd/raw throughput (for 64 B: psd/raw round-trip time).
   Beside them, what a call costs the client and its server together:
   system calls (the raw_syscalls:sys_enter tracepoint) and minor page
   faults (fresh pages), counted per thread with perf_event_open over the
   last repeat of each case; "-" where the kernel does not let us count.
   Both sides run with zdist_daemon_keep_memory (glibc keeps freed buffers),
   as zdist-psd and zdist-worker do.
   Goals (reported, never asserted): pull >= 0.9, push+sgd and push_pull
   >= 0.8 from 256 KiB up; sparse >= 0.7 (issue #18); 64 B round trip within 1.2 x raw.
   --touch adds a table against a second raw server that reads every
   request byte and writes every reply byte once (bench_raw_t.touch): the
   least work a server that uses the data does. psd/touch near 1 says the
   psd adds little to that work; what is left between psd and the echo is
   then the cost, on this machine, of touching the bytes at all.
   --ipc adds a table of raw ZeroMQ over ipc:// (a Unix socket, the raw
   server in a second child process) against loopback TCP, the same
   cases: what co-located tasks would gain by talking over ipc://.
   --curve adds a second table: the same cases against a second zdist-psd
   serving with --keys (certificates made for the run), the plain psd
   beside it, with what CURVE costs per call and per MiB moved. */
#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_raw.h"
#include "zdist/auth.h"
#include "zdist/daemon.h"
#include "zdist/parse.h"
#include "zdist/ps_client.h"
#include "zdist/sys.h"

#define S_TABLE_ROWS 1000000
#define S_SPARSE_IDS 1024
#define S_SPARSE_COLS 64

static uint8_t *s_blob; /* raw server replies and gradients come from here */
static size_t s_blob_size;
static int64_t s_ids[S_SPARSE_IDS];
static pid_t s_psd_pid;

/* ---- the psd child ---- */

typedef struct {
    int fd; /* the psd's stderr */
} s_drain_t;

static void *
s_drain(void *arg)
{
    s_drain_t *d = arg;
    char buf[4096];
    while (read(d->fd, buf, sizeof buf) > 0)
        ;
    return NULL;
}

static pid_t s_raw_pid, s_curve_pid, s_ipc_pid, s_touch_pid;

/* Stops a child started by s_spawn (pid 0: none) and, when given, the
   thread draining its log. */
static void
s_stop_child(pid_t *pid, pthread_t *drain_thread, s_drain_t *drain)
{
    if (*pid > 0) {
        kill(*pid, SIGTERM);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
    if (drain && drain->fd >= 0) {
        pthread_join(*drain_thread, NULL);
        close(drain->fd);
        drain->fd = -1;
    }
}

static void
s_stop_children(void)
{
    pid_t *pids[5] = {&s_psd_pid, &s_raw_pid, &s_curve_pid, &s_ipc_pid, &s_touch_pid};
    for (int i = 0; i < 5; i++)
        s_stop_child(pids[i], NULL, NULL);
}

/* Starts a server process (zdist-psd, or this program as the raw server)
   on a free port; returns its endpoint (into endpoint) or NULL. */
static const char *
s_spawn(const char *path, const char *arg1, const char *arg2, const char *arg3, const char *arg4, pid_t *ret_pid,
        char *endpoint, pthread_t *drain_thread, s_drain_t *drain)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return NULL;
    pid_t pid = fork();
    if (pid < 0)
        return NULL;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(fds[1], 2);
        execl(path, path, arg1, arg2, arg3, arg4, (char *) NULL);
        fprintf(stderr, "bench_ps: cannot run %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    *ret_pid = pid;
    /* Read its log until "serving at ENDPOINT". */
    char line[1024];
    size_t len = 0;
    while (1) {
        char c;
        ssize_t n = read(fds[0], &c, 1);
        if (n <= 0) {
            fprintf(stderr, "bench_ps: %s exited before serving\n", path);
            close(fds[0]);
            return NULL;
        }
        if (c != '\n') {
            if (len + 1 < sizeof line)
                line[len++] = c;
            continue;
        }
        line[len] = '\0';
        len = 0;
        const char *at = strstr(line, "serving at ");
        if (at && sscanf(at + 11, "%255s", endpoint) == 1)
            break;
    }
    drain->fd = fds[0];
    pthread_create(drain_thread, NULL, s_drain, drain);
    return endpoint;
}

/* ---- cost per call: system calls and page faults of every thread ---- */

#define S_MAX_THREADS 64
typedef struct {
    int fds[2][S_MAX_THREADS]; /* [0] syscalls, [1] minor faults; -1: not counted */
    int n;
} s_counters_t;

static int
s_perf_open(uint32_t type, uint64_t config, pid_t tid)
{
    struct perf_event_attr a = {.type = type, .size = sizeof a, .config = config, .exclude_hv = 1};
    return (int) syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* The tracepoint id of raw_syscalls:sys_enter, or -1. */
static long
s_sys_enter_id(void)
{
    long id = -1;
    FILE *f = fopen("/sys/kernel/tracing/events/raw_syscalls/sys_enter/id", "re");
    if (!f)
        f = fopen("/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id", "re");
    if (f) {
        if (fscanf(f, "%ld", &id) != 1)
            id = -1;
        fclose(f);
    }
    return id;
}

/* Counters on every thread pid has now (its libzmq threads exist by then). */
static void
s_counters_open(s_counters_t *c, pid_t pid)
{
    memset(c, 0, sizeof *c);
    long tp = s_sys_enter_id();
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int) pid);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) && c->n < S_MAX_THREADS) {
        if (e->d_name[0] == '.')
            continue;
        pid_t tid = (pid_t) atoi(e->d_name);
        c->fds[0][c->n] = tp >= 0 ? s_perf_open(PERF_TYPE_TRACEPOINT, (uint64_t) tp, tid) : -1;
        c->fds[1][c->n] = s_perf_open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN, tid);
        c->n++;
    }
    if (d)
        closedir(d);
}

/* Sums of each counter into ret ([0] syscalls, [1] faults; -1: not counted). */
static void
s_counters_read(const s_counters_t *c, int64_t ret[2])
{
    for (int k = 0; k < 2; k++) {
        ret[k] = c->n ? 0 : -1;
        for (int i = 0; i < c->n && ret[k] >= 0; i++) {
            uint64_t v;
            if (c->fds[k][i] < 0 || read(c->fds[k][i], &v, sizeof v) != (ssize_t) sizeof v)
                ret[k] = -1;
            else
                ret[k] += (int64_t) v;
        }
    }
}

static void
s_counters_close(s_counters_t *c)
{
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < c->n; i++)
            if (c->fds[k][i] >= 0)
                close(c->fds[k][i]);
    c->n = 0;
}

/* Per call, client + server: [0] syscalls, [1] faults (-1: not counted). */
typedef struct {
    const s_counters_t *client, *server;
    int64_t at[2][2];
} s_cost_t;

static void
s_cost_begin(s_cost_t *cost)
{
    s_counters_read(cost->client, cost->at[0]);
    s_counters_read(cost->server, cost->at[1]);
}

static void
s_cost_end(s_cost_t *cost, int calls, double ret[2])
{
    int64_t now[2][2];
    s_counters_read(cost->client, now[0]);
    s_counters_read(cost->server, now[1]);
    for (int k = 0; k < 2; k++) {
        bool ok = now[0][k] >= 0 && now[1][k] >= 0 && cost->at[0][k] >= 0 && cost->at[1][k] >= 0;
        ret[k] = ok ? (double) (now[0][k] - cost->at[0][k] + now[1][k] - cost->at[1][k]) / calls : -1;
    }
}

/* "12.3" or "-". */
static const char *
s_fmt_cost(double v, char *buf, size_t size)
{
    if (v < 0)
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%.1f", v);
    return buf;
}

/* ---- raw baseline (bench_raw.c) ---- */

/* --raw-server: the baseline as its own process, like the psd, bound to
   bind (--raw-bind; NULL: a free loopback TCP port); --raw-touch: it reads
   and writes the bytes it moves (bench_raw_t.touch). */
static int
s_raw_server_main(const char *bind, bool touch)
{
    zsys_init();
    zsys_set_logstream(NULL);
    zsock_t *sock = zsock_new(ZMQ_ROUTER);
    zsock_set_linger(sock, 0);
    zsock_set_sndhwm(sock, 100000);
    zsock_set_rcvhwm(sock, 100000);
    bench_raw_t raw = {.sock = zsock_resolve(sock), .blob = s_blob, .blob_size = s_blob_size, .touch = touch};
    char ep[256];
    size_t len = sizeof ep;
    if (zmq_bind(raw.sock, bind ? bind : "tcp://127.0.0.1:*") != 0 ||
        zmq_getsockopt(raw.sock, ZMQ_LAST_ENDPOINT, ep, &len) != 0) {
        fprintf(stderr, "bench_ps: the raw server cannot bind %s: %s\n", bind ? bind : "tcp://127.0.0.1:*",
                zmq_strerror(zmq_errno()));
        return 1;
    }
    fprintf(stderr, "raw ROUTER serving at %s\n", ep);
    fflush(stderr);
    /* Runs until SIGTERM (czmq sets zsys_interrupted). */
    pthread_t t;
    pthread_create(&t, NULL, bench_raw_loop, &raw);
    while (!zsys_interrupted)
        pause();
    atomic_store(&raw.stop, 1);
    pthread_join(t, NULL);
    zsock_destroy(&sock);
    return 0;
}

static void
s_free_nothing(void *data, void *hint)
{
    (void) data;
    (void) hint;
}

typedef struct {
    double calls_per_s;
    double mb_per_s;
    double rtt_us;
} s_result_t;

/* A case: what a call moves. */
typedef struct {
    const char *op;
    const char *size_name;
    size_t req_bytes[2]; /* request payload frames (0: none) */
    size_t reply_bytes;
    size_t moved; /* bytes counted for MB/s */
    /* psd side */
    uint32_t method;
    const char *var;
    bool sparse;
    double goal; /* ratio goal, 0: none */
    bool latency;
} s_case_t;

static s_result_t
s_finish(int64_t t0, int done, size_t moved)
{
    double secs = (double) (zdist_clock_now_us() - t0) / 1e6;
    s_result_t r;
    r.calls_per_s = done / secs;
    r.mb_per_s = (double) done * (double) moved / secs / 1e6;
    r.rtt_us = secs * 1e6 / done;
    return r;
}

static s_result_t
s_run_raw(const char *ep, const s_case_t *c, int window, int calls)
{
    zsock_t *sock = zsock_new(ZMQ_DEALER);
    zsock_set_linger(sock, 0);
    zsock_set_sndhwm(sock, 0);
    zsock_set_rcvhwm(sock, 0);
    void *h = zsock_resolve(sock);
    zmq_connect(h, ep);
    /* One warm-up round trip so connecting is not timed. */
    for (int warm = 1, sent = 0, done = 0; warm >= 0; warm--) {
        int n = warm ? 1 : calls;
        int64_t t0 = zdist_clock_now_us();
        sent = done = 0;
        while (done < n) {
            while (sent < n && sent - done < window) {
                uint64_t sz = c->reply_bytes;
                zmq_msg_t hdr, payload;
                zmq_msg_init_size(&hdr, sizeof sz);
                memcpy(zmq_msg_data(&hdr), &sz, sizeof sz);
                bool p0 = c->req_bytes[0] > 0, p1 = c->req_bytes[1] > 0;
                zmq_msg_send(&hdr, h, p0 ? ZMQ_SNDMORE : 0);
                if (p0) {
                    zmq_msg_init_data(&payload, s_blob, c->req_bytes[0], s_free_nothing, NULL);
                    zmq_msg_send(&payload, h, p1 ? ZMQ_SNDMORE : 0);
                }
                if (p1) {
                    zmq_msg_init_data(&payload, s_blob, c->req_bytes[1], s_free_nothing, NULL);
                    zmq_msg_send(&payload, h, 0);
                }
                sent++;
            }
            zmq_msg_t f;
            zmq_msg_init(&f);
            zmq_msg_recv(&f, h, 0);
            while (zmq_msg_more(&f)) {
                zmq_msg_close(&f);
                zmq_msg_init(&f);
                zmq_msg_recv(&f, h, 0);
            }
            zmq_msg_close(&f);
            done++;
        }
        if (!warm) {
            zsock_destroy(&sock);
            return s_finish(t0, done, c->moved);
        }
    }
    zsock_destroy(&sock);
    return (s_result_t){0};
}

/* One request of a call other than a dense push (s_psd_send). */
static zdist_msg_t *
s_psd_request(const s_case_t *c, uint64_t seq)
{
    if (c->method == ZDIST_PS_PULL)
        return zdist_ps_request_pull(c->var, 0, 0, 0);
    if (c->method == ZDIST_PS_PULL_ROWS)
        return zdist_ps_request_pull_rows(c->var, s_ids, S_SPARSE_IDS, s_free_nothing, NULL);
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = s_blob};
    if (c->sparse) {
        t.shape = (zdist_shape_t){2, {S_SPARSE_IDS, S_SPARSE_COLS}};
        t.nbytes = (size_t) S_SPARSE_IDS * S_SPARSE_COLS * sizeof(float);
        return zdist_ps_request_write_ids(ZDIST_PS_PUSH, c->var, 0, seq, s_ids, S_SPARSE_IDS, &t, s_free_nothing,
                                          NULL);
    }
    t.nbytes = c->req_bytes[0];
    t.shape = (zdist_shape_t){2, {(int64_t) (t.nbytes / 1024), 256}}; /* dense variables have 1 KiB rows */
    zdist_ps_push_pull_item_t item = {.name = c->var, .push = true, .grad = t, .pull = true};
    zdist_ps_push_pull_t pp = {.sequence = seq, .items = &item, .nitems = 1};
    return zdist_ps_request_push_pull(&pp, s_free_nothing, NULL);
}

/* The requests of one call: a dense push goes in parts, as the ps client
   sends it (zdist_ps_write_parts, ZDIST_PS_PART_BYTES), each part with a
   sequence of its own. Returns how many were sent, or -1. */
static int
s_psd_send(zdist_ps_client_t *client, const s_case_t *c)
{
    zdist_rpc_client_t *rpc = zdist_ps_client_rpc(client);
    zdist_ps_write_t parts[ZDIST_PS_MAX_PARTS];
    size_t n = 0;
    if (c->method == ZDIST_PS_PUSH && !c->sparse) {
        zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = s_blob, .nbytes = c->req_bytes[0]};
        t.shape = (zdist_shape_t){2, {(int64_t) (t.nbytes / 1024), 256}};
        zdist_ps_write_t w = {.name = c->var, .sequence = zdist_ps_client_next_sequence(client), .values = t};
        n = zdist_ps_write_parts(ZDIST_PS_PUSH, &w, ZDIST_PS_PART_BYTES, parts);
        for (size_t i = 1; i < n; i++) /* keep the client's numbering past the parts */
            zdist_ps_client_next_sequence(client);
    }
    for (size_t i = 0; i < (n ? n : 1); i++) {
        zdist_msg_t *req = n ? zdist_ps_request_write_from(ZDIST_PS_PUSH, &parts[i], s_free_nothing, NULL)
                             : s_psd_request(c, zdist_ps_client_next_sequence(client));
        if (!req || zdist_rpc_client_send(rpc, &req, 60000, NULL) < 0)
            return -1;
    }
    return n ? (int) n : 1;
}

static s_result_t
s_run_psd(zdist_ps_client_t *client, const s_case_t *c, int window, int calls, bool *failed)
{
    zdist_rpc_client_t *rpc = zdist_ps_client_rpc(client);
    int sent = 0, done = 0, replies = 0, per_call = 1;
    int64_t t0 = zdist_clock_now_us();
    while (done < calls) {
        while (sent < calls && sent - done < window) {
            if ((per_call = s_psd_send(client, c)) < 0) {
                fprintf(stderr, "bench_ps: cannot send %s\n", c->op);
                *failed = true;
                return (s_result_t){0};
            }
            sent++;
        }
        zdist_msg_t *reply = NULL;
        if (zdist_rpc_client_recv(rpc, 60000, &reply) < 0) {
            *failed = true;
            return (s_result_t){0};
        }
        zdist_error_t err = {0};
        int rc;
        if (c->method == ZDIST_PS_PULL || c->method == ZDIST_PS_PULL_ROWS) {
            zdist_tensor_t v;
            rc = zdist_ps_reply_values(reply, &v, &err);
            if (rc == 0 && v.nbytes != c->reply_bytes)
                rc = zdist_error_set(&err, -EPROTO, "got %zu bytes, wanted %zu", v.nbytes, c->reply_bytes);
        } else if (c->method == ZDIST_PS_PUSH_PULL) {
            zdist_ps_push_pull_item_t item = {.name = c->var, .push = true, .pull = true};
            zdist_ps_push_pull_t pp = {.items = &item, .nitems = 1};
            bool dup = false;
            zdist_tensor_t v;
            rc = zdist_ps_reply_push_pull(reply, &pp, &dup, NULL, &v, &err);
            if (rc == 0 && (dup || v.nbytes != c->reply_bytes))
                rc = zdist_error_set(&err, -EPROTO, "duplicate %d, %zu bytes back, wanted %zu", dup, v.nbytes,
                                     c->reply_bytes);
        } else {
            bool dup = false;
            rc = zdist_ps_reply_write(reply, &dup, NULL, &err);
            if (rc == 0 && dup)
                rc = zdist_error_set(&err, -EPROTO, "a fresh write was reported duplicate");
        }
        zdist_msg_destroy(&reply);
        if (rc < 0) {
            fprintf(stderr, "bench_ps: %s %s: %s\n", c->op, c->size_name, err.text);
            *failed = true;
            return (s_result_t){0};
        }
        done = ++replies / per_call; /* a call is done with the reply of its last part */
    }
    return s_finish(t0, done, c->moved);
}

static int
s_calls_for(size_t bytes, bool quick)
{
    if (quick)
        return 20;
    size_t n = ((size_t) 1 << 30) / (bytes ? bytes : 1);
    if (n > 20000)
        n = 20000;
    if (n < 60)
        n = 60;
    return (int) n;
}

static int
s_create(zdist_ps_client_t *c, const char *name, int64_t rows, int64_t cols)
{
    zdist_ps_var_spec_t spec = {0};
    spec.name = name;
    spec.dtype = ZDIST_DTYPE_FLOAT32;
    spec.shape = (zdist_shape_t){2, {rows, cols}};
    spec.row_count = rows;
    spec.init.kind = ZDIST_INIT_ZEROS;
    zdist_error_t err = {0};
    int rc = zdist_ps_client_create(c, &spec, NULL, &err);
    if (rc < 0)
        fprintf(stderr, "bench_ps: %s\n", err.text);
    return rc;
}

static const char *
s_default_psd(void)
{
    const char *env = getenv("ZDIST_PSD_BIN");
    if (env && *env)
        return env;
    static char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 64);
    if (n <= 0)
        return "zdist-psd";
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    if (slash)
        strcpy(slash, "/../../psd/zdist-psd");
    return path;
}

/* --curve: a second psd serving with keys, the same cases on both. */
/* --ipc: the raw baseline over ipc:// (a second raw server, bound in a
   directory made for the run) against loopback TCP, case by case. 0, or 1
   when that server cannot be started. */
static int
s_ipc_table(const char *tcp_ep, const s_case_t *cases, size_t ncases, const char *only, bool quick, int reps)
{
    char dir[] = "/tmp/zdist-bench-ipc.XXXXXX", bind[PATH_MAX], ipc_ep[256];
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench_ps: --ipc: cannot make a directory under /tmp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(bind, sizeof bind, "ipc://%s/raw.sock", dir);
    pthread_t drain_thread;
    static s_drain_t drain = {-1};
    if (!s_spawn("/proc/self/exe", "--raw-server", "--raw-bind", bind, NULL, &s_ipc_pid, ipc_ep, &drain_thread,
                 &drain)) {
        s_stop_child(&s_ipc_pid, NULL, NULL);
        rmdir(dir);
        return 1;
    }
    printf("\nraw ZeroMQ over ipc:// vs loopback TCP (server in a child process, best of %d)\n", reps);
    printf("%-12s %-8s %3s %11s %11s %10s %10s %7s\n", "op", "size", "W", "tcp calls/s", "ipc calls/s",
               "tcp MB/s", "ipc MB/s", "ipc/tcp");
    static const int windows[] = {1, 8};
    for (size_t ci = 0; ci < ncases; ci++) {
        const s_case_t *c = &cases[ci];
        if (only && strcmp(only, c->op) != 0)
            continue;
        for (int wi = 0; wi < 2; wi++) {
            int calls = s_calls_for(c->moved, quick);
            s_result_t best_tcp = {0}, best_ipc = {0};
            for (int r = 0; r < reps; r++) {
                s_result_t a = s_run_raw(tcp_ep, c, windows[wi], calls);
                s_result_t b = s_run_raw(ipc_ep, c, windows[wi], calls);
                if (a.calls_per_s > best_tcp.calls_per_s)
                    best_tcp = a;
                if (b.calls_per_s > best_ipc.calls_per_s)
                    best_ipc = b;
            }
            printf("%-12s %-8s %3d %11.0f %11.0f %10.1f %10.1f %7.2f\n", c->op, c->size_name, windows[wi],
                   best_tcp.calls_per_s, best_ipc.calls_per_s, best_tcp.mb_per_s, best_ipc.mb_per_s,
                   best_tcp.calls_per_s > 0 ? best_ipc.calls_per_s / best_tcp.calls_per_s : 0);
            fflush(stdout);
        }
    }
    printf("ipc/tcp: throughput over ipc:// / over TCP (above 1: ipc:// is faster)\n");
    s_stop_child(&s_ipc_pid, &drain_thread, &drain);
    unlink(bind + strlen("ipc://"));
    rmdir(dir);
    return 0;
}

/* --touch: the raw echo, a raw server that touches the bytes (started
   here), and the psd, case by case in the same repeats. 0, or 1 when a
   server cannot be started or a psd call fails. */
static int
s_touch_table(const char *raw_ep, zdist_ps_client_t *client, const s_case_t *cases, size_t ncases,
              const char *only, bool quick, int reps)
{
    char touch_ep[256];
    pthread_t drain_thread;
    static s_drain_t drain = {-1};
    if (!s_spawn("/proc/self/exe", "--raw-server", "--raw-touch", NULL, NULL, &s_touch_pid, touch_ep, &drain_thread,
                 &drain)) {
        s_stop_child(&s_touch_pid, NULL, NULL);
        return 1;
    }
    printf("\nzdist-psd against the raw echo and a raw server that reads and writes the bytes once (best of %d)\n",
           reps);
    printf("%-12s %-8s %3s %11s %11s %11s %9s %9s\n", "op", "size", "W", "echo c/s", "touch c/s", "psd c/s",
           "psd/echo", "psd/touch");
    static const int windows[] = {1, 8};
    int rc = 0;
    for (size_t ci = 0; ci < ncases && rc == 0; ci++) {
        const s_case_t *c = &cases[ci];
        if (only && strcmp(only, c->op) != 0)
            continue;
        for (int wi = 0; wi < 2 && rc == 0; wi++) {
            int calls = s_calls_for(c->moved, quick);
            s_result_t best[3] = {{0}};
            bool f = false;
            for (int r = 0; r < reps && !f; r++) {
                s_result_t got[3] = {s_run_raw(raw_ep, c, windows[wi], calls),
                                     s_run_raw(touch_ep, c, windows[wi], calls),
                                     s_run_psd(client, c, windows[wi], calls, &f)};
                for (int k = 0; k < 3; k++)
                    if (got[k].calls_per_s > best[k].calls_per_s)
                        best[k] = got[k];
            }
            if (f) {
                rc = 1;
                break;
            }
            printf("%-12s %-8s %3d %11.0f %11.0f %11.0f %9.2f %9.2f\n", c->op, c->size_name, windows[wi],
                   best[0].calls_per_s, best[1].calls_per_s, best[2].calls_per_s,
                   best[2].calls_per_s / best[0].calls_per_s, best[2].calls_per_s / best[1].calls_per_s);
            fflush(stdout);
        }
    }
    printf("echo: moves the bytes untouched (the goal's baseline); touch: reads each request byte and writes each\n"
           "reply byte once; psd/touch near 1: the psd costs little beyond touching the bytes it must\n");
    s_stop_child(&s_touch_pid, &drain_thread, &drain);
    return rc;
}

static int
s_curve_table(const char *psd_path, zdist_ps_client_t *plain, const s_case_t *cases, size_t ncases, bool quick,
              int reps)
{
    static char dir[] = "/tmp/zdist-bench-keys.XXXXXX";
    zdist_error_t err = {0};
    zdist_keys_t *keys = NULL;
    if (!mkdtemp(dir) || zdist_keys_generate(dir, "ps-0", false, &err) < 0 ||
        zdist_keys_generate(dir, "worker-0", false, &err) < 0 || zdist_keys_load(dir, "worker-0", &keys, &err) < 0) {
        fprintf(stderr, "bench_ps: keys: %s\n", err.text[0] ? err.text : strerror(errno));
        return 1;
    }
    static char ep[256];
    pthread_t drain_thread;
    static s_drain_t drain = {-1};
    int rc = 1;
    zdist_ps_client_t *c = NULL;
    if (!s_spawn(psd_path, "--bind", "tcp://127.0.0.1:*", "--keys", dir, &s_curve_pid, ep, &drain_thread, &drain))
        goto out;
    zdist_ps_client_options_t copts;
    zdist_ps_client_options_default(&copts);
    copts.timeout_ms = 60000;
    copts.rpc.keys = keys;
    copts.rpc.server_name = "ps-0";
    c = zdist_ps_client_new(ep, &copts, &err);
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 0.01};
    if (!c || zdist_ps_client_set_optimizer(c, &sgd, &err) < 0 || s_create(c, "d4k", 4, 256) < 0 ||
        s_create(c, "d256k", 256, 256) < 0 || s_create(c, "d4m", 4096, 256) < 0 || s_create(c, "d16m", 16384, 256) < 0 ||
        s_create(c, "table", S_TABLE_ROWS, S_SPARSE_COLS) < 0 || s_create(c, "small", 1, 16) < 0) {
        fprintf(stderr, "bench_ps: the CURVE psd: %s\n", err.text);
        goto out;
    }
    printf("\nzdist-psd in plain text vs with --keys (CurveZMQ), same client code (best of %d)\n", reps);
    printf("%-12s %-8s %3s %11s %11s %10s %10s %7s %10s %10s\n", "op", "size", "W", "plain c/s", "curve c/s",
           "plain MB/s", "curve MB/s", "ratio", "+us/call", "+ms/MiB");
    static const int windows[] = {1, 8};
    for (size_t ci = 0; ci < ncases; ci++) {
        const s_case_t *k = &cases[ci];
        for (int wi = 0; wi < 2; wi++) {
            if (quick && (windows[wi] != 1 || k->moved > ((size_t) 4 << 20)))
                continue; /* --quick: that it works, on a few cases */
            int calls = quick ? s_calls_for(k->moved, quick) : s_calls_for(k->moved, quick) / 4 + 20;
            s_result_t bp = {0}, bc = {0};
            bool f = false;
            for (int r = 0; r < reps && !f; r++) {
                s_result_t a = s_run_psd(plain, k, windows[wi], calls, &f);
                s_result_t b = s_run_psd(c, k, windows[wi], calls, &f);
                if (a.calls_per_s > bp.calls_per_s)
                    bp = a;
                if (b.calls_per_s > bc.calls_per_s)
                    bc = b;
            }
            if (f)
                goto out;
            double us_call = 1e6 / bc.calls_per_s - 1e6 / bp.calls_per_s;
            double ms_mib = us_call / 1000.0 / ((double) k->moved / (1 << 20));
            printf("%-12s %-8s %3d %11.0f %11.0f %10.1f %10.1f %7.2f %10.1f %10.2f\n", k->op, k->size_name,
                   windows[wi], bp.calls_per_s, bc.calls_per_s, bp.mb_per_s, bc.mb_per_s,
                   bc.calls_per_s / bp.calls_per_s, us_call, ms_mib);
            fflush(stdout);
        }
    }
    printf("+us/call: what CURVE adds to one call; +ms/MiB: the same per MiB moved (both directions)\n");
    rc = 0;
out:
    zdist_ps_client_destroy(&c);
    s_stop_child(&s_curve_pid, &drain_thread, &drain);
    zdist_keys_destroy(&keys);
    char path[PATH_MAX];
    const char *files[] = {"ps-0.key", "ps-0.key_secret", "worker-0.key", "worker-0.key_secret"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    return rc;
}

int
main(int argc, char **argv)
{
    bool quick = false;
    int64_t reps = 3;
    const char *psd_path = NULL;
    bool raw_server = false;
    static const struct option longopts[] = {{"quick", no_argument, NULL, 'q'},
                                              {"raw-server", no_argument, NULL, 'R'},
                                              {"raw-bind", required_argument, NULL, 'B'},
                                              {"raw-touch", no_argument, NULL, 'T'},
                                              {"ipc", no_argument, NULL, 'i'},
                                              {"touch", no_argument, NULL, 't'},
                                              {"reps", required_argument, NULL, 'r'},
                                              {"psd", required_argument, NULL, 'p'},
                                              {"curve", no_argument, NULL, 'c'},
                                              {"only", required_argument, NULL, 'o'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    int opt;
    bool curve = false, ipc = false, touch = false, raw_touch = false;
    const char *only = NULL, *raw_bind = NULL;
    while ((opt = getopt_long(argc, argv, "qr:p:hco:i", longopts, NULL)) != -1) {
        if (opt == 'q')
            quick = true;
        else if (opt == 'i')
            ipc = true;
        else if (opt == 't')
            touch = true;
        else if (opt == 'T')
            raw_touch = true;
        else if (opt == 'B')
            raw_bind = optarg;
        else if (opt == 'c')
            curve = true;
        else if (opt == 'R')
            raw_server = true;
        else if (opt == 'r' && zdist_parse_int64(optarg, 1, 100, &reps) == 0)
            ;
        else if (opt == 'p')
            psd_path = optarg;
        else if (opt == 'o')
            only = optarg;
        else {
            printf("usage: bench_ps [--quick] [--reps N] [--curve] [--ipc] [--touch] [--only OP] [--psd PATH/zdist-psd]\n"
                   "  (default psd: $ZDIST_PSD_BIN, else ../../psd/zdist-psd beside this binary;\n"
                   "   --only: the cases of one op: pull, push+sgd, push_pull, pull_rows, \"push sparse\")\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    if (quick)
        reps = 1;
    /* The client and the raw server keep their freed memory as the psd and
       the worker do (zdist_daemon_keep_memory): the baseline gets the same
       malloc, so the ratio compares the protocols, not the allocators. */
    zdist_daemon_keep_memory();
    if (!psd_path)
        psd_path = s_default_psd();
    s_blob_size = (size_t) 16 << 20;
    s_blob = malloc(s_blob_size);
    /* Small finite float32 values: gradients that keep the weights finite. */
    for (size_t i = 0; i < s_blob_size / 4; i++)
        ((float *) s_blob)[i] = 1e-6f * (float) (i % 7);
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < S_SPARSE_IDS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        s_ids[i] = (int64_t) (x % S_TABLE_ROWS);
    }

    if (raw_server)
        return s_raw_server_main(raw_bind, raw_touch);

    /* Both servers are child processes, each with its own libzmq context. */
    pthread_t drain_threads[2];
    s_drain_t drains[2] = {{-1}, {-1}};
    static char psd_ep[256], raw_ep[256];
    atexit(s_stop_children);
    if (!s_spawn(psd_path, "--bind", "tcp://127.0.0.1:*", NULL, NULL, &s_psd_pid, psd_ep, &drain_threads[0],
                 &drains[0]) ||
        !s_spawn("/proc/self/exe", "--raw-server", NULL, NULL, NULL, &s_raw_pid, raw_ep, &drain_threads[1],
                 &drains[1]))
        return 1;
    zsys_init();
    zsys_set_logstream(NULL);
    signal(SIGPIPE, SIG_IGN);

    zdist_error_t err = {0};
    zdist_ps_client_options_t copts;
    zdist_ps_client_options_default(&copts);
    copts.timeout_ms = 60000;
    zdist_ps_client_t *client = zdist_ps_client_new(psd_ep, &copts, &err);
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 0.01};
    int failed = !client || zdist_ps_client_set_optimizer(client, &sgd, &err) < 0;

    static const size_t sizes[] = {4 << 10, 256 << 10, 4 << 20, 16 << 20};
    static const char *names[] = {"4 KiB", "256 KiB", "4 MiB", "16 MiB"};
    static const char *vars[] = {"d4k", "d256k", "d4m", "d16m"};
    s_case_t cases[24];
    size_t ncases = 0;
    for (size_t i = 0; i < 4 && !failed; i++) {
        failed |= s_create(client, vars[i], (int64_t) (sizes[i] / 1024), 256) < 0;
        cases[ncases++] = (s_case_t){"pull", names[i], {0, 0}, sizes[i], sizes[i], ZDIST_PS_PULL, vars[i], false,
                                     i ? 0.9 : 0, false};
    }
    for (size_t i = 0; i < 4; i++)
        cases[ncases++] = (s_case_t){"push+sgd", names[i], {sizes[i], 0}, 0, sizes[i], ZDIST_PS_PUSH, vars[i],
                                     false, i ? 0.8 : 0, false};
    /* A worker's step on one ps: the gradient up, the updated values back. */
    for (size_t i = 1; i < 4; i++)
        cases[ncases++] = (s_case_t){"push_pull", names[i], {sizes[i], 0}, sizes[i], 2 * sizes[i],
                                     ZDIST_PS_PUSH_PULL, vars[i], false, 0.8, false};
    size_t ids_bytes = S_SPARSE_IDS * sizeof(int64_t), rows_bytes = (size_t) S_SPARSE_IDS * S_SPARSE_COLS * 4;
    if (!failed)
        failed |= s_create(client, "table", S_TABLE_ROWS, S_SPARSE_COLS) < 0;
    cases[ncases++] = (s_case_t){"pull_rows", "1024x64", {ids_bytes, 0}, rows_bytes, ids_bytes + rows_bytes,
                                 ZDIST_PS_PULL_ROWS, "table", true, 0.7, false};
    cases[ncases++] = (s_case_t){"push sparse", "1024x64", {ids_bytes, rows_bytes}, 0, ids_bytes + rows_bytes,
                                 ZDIST_PS_PUSH, "table", true, 0.7, false};
    if (!failed)
        failed |= s_create(client, "small", 1, 16) < 0;
    cases[ncases++] = (s_case_t){"pull", "64 B", {0, 0}, 64, 64, ZDIST_PS_PULL, "small", false, 1.2, true};
    if (failed) {
        fprintf(stderr, "bench_ps: setting up the psd failed: %s\n", err.text);
        zdist_ps_client_destroy(&client);
        return 1;
    }

    s_counters_t cnt_self, cnt_raw, cnt_psd;
    s_counters_open(&cnt_self, getpid());
    s_counters_open(&cnt_raw, s_raw_pid);
    s_counters_open(&cnt_psd, s_psd_pid);
    s_cost_t cost_raw = {.client = &cnt_self, .server = &cnt_raw};
    s_cost_t cost_psd = {.client = &cnt_self, .server = &cnt_psd};

    printf("zdist-psd via the libzdist ps client vs raw ZeroMQ (loopback TCP, psd in a child process, best of %d)\n",
           (int) reps);
    printf("%-12s %-8s %3s %11s %11s %10s %10s %7s  %-22s %17s %17s\n", "op", "size", "W", "raw calls/s",
           "psd calls/s", "raw MB/s", "psd MB/s", "ratio", "goal", "syscalls raw/psd", "faults raw/psd");
    static const int windows[] = {1, 8};
    for (size_t ci = 0; ci < ncases && !failed; ci++) {
        const s_case_t *c = &cases[ci];
        if (only && strcmp(only, c->op) != 0)
            continue;
        for (int wi = 0; wi < 2 && !failed; wi++) {
            int window = windows[wi];
            int calls = s_calls_for(c->moved, quick);
            s_result_t best_raw = {0}, best_psd = {0};
            bool f = false;
            double per_raw[2], per_psd[2]; /* the last repeat's */
            for (int r = 0; r < reps && !f; r++) {
                s_cost_begin(&cost_raw);
                s_result_t a = s_run_raw(raw_ep, c, window, calls);
                s_cost_end(&cost_raw, calls, per_raw);
                s_cost_begin(&cost_psd);
                s_result_t b = s_run_psd(client, c, window, calls, &f);
                s_cost_end(&cost_psd, calls, per_psd);
                if (a.calls_per_s > best_raw.calls_per_s)
                    best_raw = a;
                if (b.calls_per_s > best_psd.calls_per_s)
                    best_psd = b;
            }
            if (f) {
                failed = true;
                break;
            }
            char goal[48] = "", b[4][16], costs[2][40];
            snprintf(costs[0], sizeof costs[0], "%s/%s", s_fmt_cost(per_raw[0], b[0], sizeof b[0]),
                     s_fmt_cost(per_psd[0], b[1], sizeof b[1]));
            snprintf(costs[1], sizeof costs[1], "%s/%s", s_fmt_cost(per_raw[1], b[2], sizeof b[2]),
                     s_fmt_cost(per_psd[1], b[3], sizeof b[3]));
            if (c->latency) {
                double ratio = best_psd.rtt_us / best_raw.rtt_us;
                if (window == 1)
                    snprintf(goal, sizeof goal, "rtt %.1f vs %.1f us, <= %.1fx %s", best_psd.rtt_us, best_raw.rtt_us,
                             c->goal, ratio <= c->goal ? "met" : "MISSED");
                printf("%-12s %-8s %3d %11.0f %11.0f %10.2f %10.2f %7.2f  %-22s %17s %17s\n", c->op,
                       c->size_name, window, best_raw.calls_per_s, best_psd.calls_per_s, best_raw.mb_per_s,
                       best_psd.mb_per_s, ratio, goal, costs[0], costs[1]);
            } else {
                double ratio = best_psd.calls_per_s / best_raw.calls_per_s;
                if (c->goal > 0)
                    snprintf(goal, sizeof goal, ">= %.1f %s", c->goal, ratio >= c->goal ? "met" : "MISSED");
                printf("%-12s %-8s %3d %11.0f %11.0f %10.1f %10.1f %7.2f  %-22s %17s %17s\n", c->op,
                       c->size_name, window, best_raw.calls_per_s, best_psd.calls_per_s, best_raw.mb_per_s,
                       best_psd.mb_per_s, ratio, goal, costs[0], costs[1]);
            }
            fflush(stdout);
        }
    }
    printf("ratio: psd/raw throughput (64 B row: psd/raw round-trip time, lower is better)\n");
    printf("syscalls, faults: per call, client and server processes together (all threads), last repeat\n");
    if (s_sys_enter_id() < 0)
        printf("syscalls \"-\": the raw_syscalls:sys_enter tracepoint is not readable here; as root, mount "
               "tracefs (mount -t tracefs nodev /sys/kernel/tracing) and run again\n");
    if (touch && !failed)
        failed = s_touch_table(raw_ep, client, cases, ncases, only, quick, (int) reps) != 0;
    if (ipc && !failed)
        failed = s_ipc_table(raw_ep, cases, ncases, only, quick, (int) reps) != 0;
    if (curve && !failed)
        failed = s_curve_table(psd_path, client, cases, ncases, quick, (int) reps) != 0;
    s_counters_close(&cnt_self);
    s_counters_close(&cnt_raw);
    s_counters_close(&cnt_psd);

    zdist_ps_client_destroy(&client);
    s_stop_children();
    for (int i = 0; i < 2; i++) {
        pthread_join(drain_threads[i], NULL);
        close(drains[i].fd);
    }
    free(s_blob);
    return failed ? 1 : 0;
}
