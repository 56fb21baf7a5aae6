/* bench_rpc: round trips/s and MB/s through the zdist RPC layer against raw
   libzmq moving the same payloads in the same run, with ratios.

   push: the request carries the payload, the reply is empty.
   pull: the request is empty, the reply carries the payload.
   Both run with W calls in flight (W = 1 measures plain round trips). The
   server runs on its own thread in this process, for raw and RPC alike.
   --curve adds a second table: the same RPC calls in plain text and under
   CurveZMQ (keys made for the run in a temporary directory), with what
   CURVE costs per call and per MiB. */
#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "bench_raw.h"
#include "zdist/auth.h"
#include "zdist/ps_service.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

#define M_PUSH 100
#define M_PULL ZDIST_PS_PULL /* a ps pull request's typed body asks for row_count bytes */

static uint8_t *s_blob; /* the payload every pull returns, never freed early */
static size_t s_blob_size;

/* ---- zdist RPC server ---- */

static int
s_push(zdist_rpc_call_t *call, void *state)
{
    (void) call;
    (void) state;
    return 0;
}

static int
s_pull(zdist_rpc_call_t *call, void *state)
{
    (void) state;
    /* The bench reuses the ps pull request as "give me `row_count` bytes". */
    const zdist_ps_pull_t *req = zdist_rpc_call_body(call);
    size_t n = (size_t) req->row_count;
    if (n > s_blob_size)
        return -EINVAL;
    zdist_shape_t shape = {.rank = 1, .dims = {(int64_t) n}};
    return zdist_msg_add_tensor(zdist_rpc_call_reply(call), "blob", ZDIST_DTYPE_UINT8, &shape, s_blob, n, NULL,
                                NULL);
}

static const zdist_rpc_method_t s_methods[] = {
    {M_PUSH, "push", NULL, s_push, 1, 1, 0},
    {M_PULL, "pull", &zdist_ps_body_pull, s_pull, 0, 0, 0},
};

typedef struct {
    atomic_int stop;
    zdist_rpc_server_t *rpc;
    char endpoint[256];
} s_server_t;

static void *
s_rpc_loop(void *arg)
{
    s_server_t *s = arg;
    while (!atomic_load(&s->stop)) {
        zmq_pollitem_t item = {zdist_rpc_server_socket(s->rpc), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 50) > 0)
            zdist_rpc_server_dispatch(s->rpc, 1024);
    }
    return NULL;
}

/* ---- clients ---- */

typedef struct {
    double calls_per_s;
    double mb_per_s;
} s_result_t;

static void
s_free_nothing(void *data, void *hint)
{
    (void) data;
    (void) hint;
}

static zdist_keys_t *s_client_keys; /* --curve: the client's certificate */

static s_result_t
s_run_rpc_keys(const char *ep, bool push, size_t size, int window, int calls, zdist_keys_t *keys)
{
    zdist_rpc_client_options_t co;
    zdist_rpc_client_options_default(&co);
    co.keys = keys;
    co.server_name = keys ? "ps-0" : NULL;
    zdist_error_t err = {0};
    zdist_rpc_client_t *c = zdist_rpc_client_new(ep, &co, &err);
    if (!c) {
        fprintf(stderr, "bench_rpc: %s\n", err.text);
        exit(1);
    }
    s_result_t r = {0};
    int sent = 0, done = 0;
    int64_t t0 = zdist_clock_now_us();
    while (done < calls) {
        while (sent < calls && sent - done < window) {
            zdist_msg_t *req = push ? zdist_msg_new(M_PUSH) : zdist_ps_request_pull("blob", 0, 0, (int64_t) size);
            if (push) {
                zdist_shape_t shape = {.rank = 1, .dims = {(int64_t) size}};
                zdist_msg_add_tensor(req, "blob", ZDIST_DTYPE_UINT8, &shape, s_blob, size, s_free_nothing, NULL);
            }
            if (zdist_rpc_client_send(c, &req, 60000, NULL) < 0)
                goto out;
            sent++;
        }
        zdist_msg_t *reply = NULL;
        if (zdist_rpc_client_recv(c, 60000, &reply) < 0)
            goto out;
        if (zdist_msg_status(reply) != ZDIST_STATUS_OK) {
            fprintf(stderr, "bench_rpc: call failed: %s\n", zdist_msg_status_message(reply));
            zdist_msg_destroy(&reply);
            goto out;
        }
        zdist_msg_destroy(&reply);
        done++;
    }
out:;
    double secs = (double) (zdist_clock_now_us() - t0) / 1e6;
    r.calls_per_s = done / secs;
    r.mb_per_s = (double) done * (double) size / secs / 1e6;
    zdist_rpc_client_destroy(&c);
    return r;
}

static s_result_t
s_run_rpc(const char *ep, bool push, size_t size, int window, int calls)
{
    return s_run_rpc_keys(ep, push, size, window, calls, NULL);
}

static s_result_t
s_run_raw(const char *ep, bool push, size_t size, int window, int calls)
{
    zsock_t *sock = zsock_new(ZMQ_DEALER);
    zsock_set_linger(sock, 0);
    zsock_set_sndhwm(sock, 0);
    zsock_set_rcvhwm(sock, 0);
    void *h = zsock_resolve(sock);
    zmq_connect(h, ep);
    int sent = 0, done = 0;
    int64_t t0 = zdist_clock_now_us();
    while (done < calls) {
        while (sent < calls && sent - done < window) {
            uint64_t sz = push ? 0 : size; /* bytes the reply should carry */
            zmq_msg_t hdr, payload;
            zmq_msg_init_size(&hdr, sizeof sz);
            memcpy(zmq_msg_data(&hdr), &sz, sizeof sz);
            if (push) {
                zmq_msg_send(&hdr, h, ZMQ_SNDMORE);
                zmq_msg_init_data(&payload, s_blob, size, s_free_nothing, NULL);
                zmq_msg_send(&payload, h, 0);
            } else {
                zmq_msg_send(&hdr, h, 0);
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
    double secs = (double) (zdist_clock_now_us() - t0) / 1e6;
    zsock_destroy(&sock);
    return (s_result_t){done / secs, (double) done * (double) size / secs / 1e6};
}

static int
s_calls_for(size_t size, bool quick)
{
    if (quick)
        return 50;
    /* About 2 GB or 100,000 calls per run, whichever is fewer. */
    size_t n = ((size_t) 2 << 30) / (size ? size : 1);
    if (n > 100000)
        n = 100000;
    if (n < 100)
        n = 100;
    return (int) n;
}

static const size_t s_sizes[] = {64, 4 << 10, 256 << 10, 4 << 20, 16 << 20};
static const char *s_names[] = {"64 B", "4 KiB", "256 KiB", "4 MiB", "16 MiB"};

/* --curve: the plain server beside a CURVE one (certificates ps-0 and
   worker-0 made for the run), the same calls on both. */
static int
s_curve_table(const s_server_t *plain, bool quick, int reps, const char *only_op, long only_size, long only_window)
{
    char dir[] = "/tmp/zdist-bench-keys.XXXXXX";
    zdist_error_t err = {0};
    zdist_keys_t *server_keys = NULL;
    if (!mkdtemp(dir) || zdist_keys_generate(dir, "ps-0", false, &err) < 0 ||
        zdist_keys_generate(dir, "worker-0", false, &err) < 0 || zdist_keys_load(dir, "ps-0", &server_keys, &err) < 0 ||
        zdist_keys_load(dir, "worker-0", &s_client_keys, &err) < 0) {
        fprintf(stderr, "bench_rpc: keys: %s\n", err.text[0] ? err.text : strerror(errno));
        return 1;
    }
    s_server_t cs = {0};
    zdist_rpc_server_options_t so;
    zdist_rpc_server_options_default(&so);
    so.role = "bench";
    so.keys = server_keys;
    cs.rpc = zdist_rpc_server_new("tcp://127.0.0.1:*", s_methods, 2, NULL, &so, &err);
    if (!cs.rpc) {
        fprintf(stderr, "bench_rpc: %s\n", err.text);
        return 1;
    }
    snprintf(cs.endpoint, sizeof cs.endpoint, "%s", zdist_rpc_server_endpoint(cs.rpc));
    pthread_t t;
    pthread_create(&t, NULL, s_rpc_loop, &cs);
    printf("\nzdist RPC in plain text vs CurveZMQ (same process, loopback TCP, best of %d)\n", reps);
    printf("%-5s %-8s %6s %12s %12s %10s %10s %7s %10s %10s\n", "op", "size", "window", "plain c/s", "curve c/s",
           "plain MB/s", "curve MB/s", "ratio", "+us/call", "+ms/MiB");
    int windows[2] = {1, 16};
    for (int op = 0; op < 2; op++) {
        bool push = op == 0;
        if (only_op && strcmp(only_op, push ? "push" : "pull") != 0)
            continue;
        for (size_t si = 0; si < sizeof s_sizes / sizeof s_sizes[0]; si++) {
            if (only_size && (size_t) only_size != s_sizes[si])
                continue;
            for (int wi = 0; wi < 2; wi++) {
                int window = windows[wi];
                if (only_window && only_window != window)
                    continue;
                if (quick && (window != 1 || s_sizes[si] > ((size_t) 4 << 20)))
                    continue; /* --quick: that it works, on a few cases */
                /* An eighth of the first table's bytes: CURVE is slower, the cost shows. */
                int calls = quick ? s_calls_for(s_sizes[si], quick) : s_calls_for(s_sizes[si], quick) / 8 + 50;
                s_result_t bp = {0}, bc = {0};
                for (int r = 0; r < reps; r++) {
                    s_result_t a = s_run_rpc_keys(plain->endpoint, push, s_sizes[si], window, calls, NULL);
                    s_result_t b = s_run_rpc_keys(cs.endpoint, push, s_sizes[si], window, calls, s_client_keys);
                    if (a.calls_per_s > bp.calls_per_s)
                        bp = a;
                    if (b.calls_per_s > bc.calls_per_s)
                        bc = b;
                }
                /* What CURVE adds: time per call, and per MiB moved. */
                double us_call = 1e6 / bc.calls_per_s - 1e6 / bp.calls_per_s;
                double ms_mib = us_call / 1000.0 / ((double) s_sizes[si] / (1 << 20));
                printf("%-5s %-8s %6d %12.0f %12.0f %10.1f %10.1f %7.2f %10.1f %10.2f\n", push ? "push" : "pull",
                       s_names[si], window, bp.calls_per_s, bc.calls_per_s, bp.mb_per_s, bc.mb_per_s,
                       bc.calls_per_s / bp.calls_per_s, us_call, ms_mib);
                fflush(stdout);
            }
        }
    }
    atomic_store(&cs.stop, 1);
    pthread_join(t, NULL);
    zdist_rpc_server_destroy(&cs.rpc);
    zdist_keys_destroy(&s_client_keys);
    zdist_keys_destroy(&server_keys);
    char path[PATH_MAX];
    const char *files[] = {"ps-0.key", "ps-0.key_secret", "worker-0.key", "worker-0.key_secret"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    return 0;
}

int
main(int argc, char **argv)
{
    bool quick = false;
    int reps = 3, rc = 0;
    const char *only_op = NULL; /* run one case: for profiling */
    long only_size = 0, only_window = 0;
    static const struct option longopts[] = {{"quick", no_argument, NULL, 'q'},
                                             {"reps", required_argument, NULL, 'r'},
                                             {"op", required_argument, NULL, 'o'},
                                             {"size", required_argument, NULL, 's'},
                                             {"window", required_argument, NULL, 'w'},
                                             {"curve", no_argument, NULL, 'c'},
                                             {"help", no_argument, NULL, 'h'},
                                             {0}};
    bool curve = false;
    int opt;
    while ((opt = getopt_long(argc, argv, "qr:o:s:w:hc", longopts, NULL)) != -1) {
        if (opt == 'q')
            quick = true;
        else if (opt == 'c')
            curve = true;
        else if (opt == 'r')
            reps = atoi(optarg) > 0 ? atoi(optarg) : 1;
        else if (opt == 'o')
            only_op = optarg;
        else if (opt == 's')
            only_size = atol(optarg);
        else if (opt == 'w')
            only_window = atol(optarg);
        else {
            printf("usage: bench_rpc [--quick] [--reps N] [--curve] [--op push|pull --size BYTES --window W]\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    if (quick)
        reps = 1;
    zsys_init();
    zsys_set_logstream(NULL);
    s_blob_size = (size_t) 16 << 20;
    s_blob = malloc(s_blob_size);
    for (size_t i = 0; i < s_blob_size; i++)
        s_blob[i] = (uint8_t) (i * 31);

    s_server_t rpc = {0};
    bench_raw_t raw = {.blob = s_blob, .blob_size = s_blob_size};
    char raw_endpoint[256];
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = "bench";
    zdist_error_t err = {0};
    rpc.rpc = zdist_rpc_server_new("tcp://127.0.0.1:*", s_methods, 2, NULL, &opts, &err);
    if (!rpc.rpc) {
        fprintf(stderr, "bench_rpc: %s\n", err.text);
        return 1;
    }
    snprintf(rpc.endpoint, sizeof rpc.endpoint, "%s", zdist_rpc_server_endpoint(rpc.rpc));
    zsock_t *raw_sock = zsock_new(ZMQ_ROUTER);
    zsock_set_linger(raw_sock, 0);
    zsock_set_sndhwm(raw_sock, 100000);
    raw.sock = zsock_resolve(raw_sock);
    zmq_bind(raw.sock, "tcp://127.0.0.1:*");
    size_t len = sizeof raw_endpoint;
    zmq_getsockopt(raw.sock, ZMQ_LAST_ENDPOINT, raw_endpoint, &len);
    pthread_t t_rpc, t_raw;
    pthread_create(&t_rpc, NULL, s_rpc_loop, &rpc);
    pthread_create(&t_raw, NULL, bench_raw_loop, &raw);

    static const size_t sizes[] = {64, 4 << 10, 256 << 10, 4 << 20, 16 << 20};
    static const char *names[] = {"64 B", "4 KiB", "256 KiB", "4 MiB", "16 MiB"};
    printf("zdist RPC vs raw ZeroMQ (same process, loopback TCP, best of %d)\n", reps);
    printf("%-5s %-8s %6s %12s %12s %10s %10s %7s\n", "op", "size", "window", "raw calls/s", "rpc calls/s",
           "raw MB/s", "rpc MB/s", "ratio");
    int windows[2] = {1, 16};
    for (int op = 0; op < 2; op++) {
        bool push = op == 0;
        if (only_op && strcmp(only_op, push ? "push" : "pull") != 0)
            continue;
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            if (only_size && (size_t) only_size != sizes[si])
                continue;
            for (int wi = 0; wi < 2; wi++) {
                int window = windows[wi];
                if (only_window && only_window != window)
                    continue;
                int calls = s_calls_for(sizes[si], quick);
                s_result_t best_raw = {0}, best_rpc = {0};
                for (int r = 0; r < reps; r++) {
                    s_result_t a = s_run_raw(raw_endpoint, push, sizes[si], window, calls);
                    s_result_t b = s_run_rpc(rpc.endpoint, push, sizes[si], window, calls);
                    if (a.calls_per_s > best_raw.calls_per_s)
                        best_raw = a;
                    if (b.calls_per_s > best_rpc.calls_per_s)
                        best_rpc = b;
                }
                printf("%-5s %-8s %6d %12.0f %12.0f %10.1f %10.1f %7.2f\n", push ? "push" : "pull", names[si],
                       window, best_raw.calls_per_s, best_rpc.calls_per_s, best_raw.mb_per_s, best_rpc.mb_per_s,
                       best_rpc.calls_per_s / best_raw.calls_per_s);
                fflush(stdout);
            }
        }
    }
    if (curve && s_curve_table(&rpc, quick, reps, only_op, only_size, only_window) != 0)
        rc = 1;
    atomic_store(&rpc.stop, 1);
    atomic_store(&raw.stop, 1);
    pthread_join(t_rpc, NULL);
    pthread_join(t_raw, NULL);
    zdist_rpc_server_destroy(&rpc.rpc);
    zsock_destroy(&raw_sock);
    free(s_blob);
    return rc;
}
