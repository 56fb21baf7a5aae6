/* CUnit suite: RPC server and client over real loopback sockets. */
#include <czmq.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.pb-c.h"
#include "wire/body.h"
#include "testutil.h"
#include "zdist/daemon.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

#define M_ECHO 100
#define M_FAIL 101

/* ECHO: body is a zdist.Status whose code comes back +1; tensors come back. */
static int
s_echo(zdist_rpc_call_t *call, void *state)
{
    (void) state;
    const Zdist__Status *in = (const Zdist__Status *) zdist_rpc_call_body(call);
    Zdist__Status out = ZDIST__STATUS__INIT;
    out.code = in->code + 1;
    out.message = in->message;
    zdist_msg_t *reply = zdist_rpc_call_reply(call);
    int rc = zdist_msg_set_body(reply, &out.base);
    const zdist_msg_t *req = zdist_rpc_call_request(call);
    for (size_t i = 0; rc == 0 && i < zdist_msg_tensor_count(req); i++) {
        const zdist_tensor_t *t = zdist_msg_tensor(req, i);
        rc = zdist_msg_add_tensor_copy(reply, t->name, t->dtype, &t->shape, t->data, t->nbytes);
    }
    return rc;
}

static int
s_fail(zdist_rpc_call_t *call, void *state)
{
    (void) state;
    return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "variable '%s' is unknown", "nope");
}

/* Transitional: bodies passed through undecoded until this service has typed ones. */
static const zdist_rpc_body_t s_body_status = {&zdist__status__descriptor, 0, NULL, NULL};

static const zdist_rpc_method_t s_methods[] = {
    {M_ECHO, "echo", &s_body_status, s_echo, 0, 4, 0},
    {M_FAIL, "fail", NULL, s_fail, 0, 0, 0},
};

typedef struct {
    zdist_rpc_server_t *server;
    pthread_t thread;
    atomic_int stop;
    atomic_int logged;
} s_server_t;

static void
s_log(void *state, const char *line)
{
    (void) line;
    s_server_t *s = state;
    atomic_fetch_add(&s->logged, 1);
}

static void *
s_server_loop(void *arg)
{
    s_server_t *s = arg;
    while (!atomic_load(&s->stop)) {
        zmq_pollitem_t item = {zdist_rpc_server_socket(s->server), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 20) > 0)
            zdist_rpc_server_dispatch(s->server, 256);
    }
    return NULL;
}

static s_server_t *
s_server_start(const char *endpoint, size_t max_bytes)
{
    s_server_t *s = calloc(1, sizeof *s);
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = "test";
    opts.log = s_log;
    opts.log_state = s;
    opts.heartbeat_ivl_ms = 200;
    opts.heartbeat_timeout_ms = 1000;
    if (max_bytes)
        opts.limits.max_message_bytes = max_bytes;
    zdist_error_t err = {0};
    s->server = zdist_rpc_server_new(endpoint, s_methods, 2, NULL, &opts, &err);
    if (!s->server) {
        fprintf(stderr, "server: %s\n", err.text);
        free(s);
        return NULL;
    }
    pthread_create(&s->thread, NULL, s_server_loop, s);
    return s;
}

static void
s_server_stop(s_server_t **s_p)
{
    s_server_t *s = *s_p;
    if (!s)
        return;
    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    zdist_rpc_server_destroy(&s->server);
    free(s);
    *s_p = NULL;
}

static zdist_rpc_client_t *
s_client(const char *endpoint)
{
    zdist_rpc_client_options_t opts;
    zdist_rpc_client_options_default(&opts);
    opts.heartbeat_ivl_ms = 200;
    opts.heartbeat_timeout_ms = 1000;
    zdist_error_t err = {0};
    zdist_rpc_client_t *c = zdist_rpc_client_new(endpoint, &opts, &err);
    CU_ASSERT_PTR_NOT_NULL(c);
    return c;
}

static zdist_msg_t *
s_echo_request(int32_t code, int64_t tensor_value)
{
    zdist_msg_t *m = zdist_msg_new(M_ECHO);
    Zdist__Status body = ZDIST__STATUS__INIT;
    body.code = code;
    zdist_msg_set_body(m, &body.base);
    zdist_shape_t s1 = {.rank = 1, .dims = {1}};
    zdist_msg_add_tensor_copy(m, "v", ZDIST_DTYPE_INT64, &s1, &tensor_value, sizeof tensor_value);
    return m;
}

static void
test_ping_echo_fail(void)
{
    s_server_t *s = s_server_start("tcp://127.0.0.1:*", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    zdist_rpc_client_t *c = s_client(zdist_rpc_server_endpoint(s->server));

    zdist_msg_t *req = zdist_msg_new(ZDIST_METHOD_PING);
    zdist_msg_t *reply = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 5000, &reply), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    ProtobufCMessage *pb = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_msg_unpack_body(reply, &zdist__ping_reply__descriptor, &pb, NULL), 0);
    Zdist__PingReply *ping = (Zdist__PingReply *) pb;
    CU_ASSERT_STRING_EQUAL(ping->role, "test");
    CU_ASSERT_EQUAL(ping->protocol, ZDIST_PROTOCOL_VERSION);
    CU_ASSERT_EQUAL(ping->incarnation, zdist_rpc_server_incarnation(s->server));
    CU_ASSERT_EQUAL(zdist_msg_incarnation(reply), zdist_rpc_server_incarnation(s->server));
    CU_ASSERT_EQUAL(zdist_rpc_client_peer_incarnation(c), zdist_rpc_server_incarnation(s->server));
    protobuf_c_message_free_unpacked(pb, NULL);
    /* The same reply read through the library: no protobuf for callers. */
    zdist_rpc_ping_t p;
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_ping_read(reply, &p, NULL), 0);
    CU_ASSERT_STRING_EQUAL(p.role, "test");
    CU_ASSERT_STRING_EQUAL(p.version, ZDIST_VERSION_STRING);
    CU_ASSERT_EQUAL(p.protocol, ZDIST_PROTOCOL_VERSION);
    CU_ASSERT_EQUAL(p.incarnation, zdist_rpc_server_incarnation(s->server));
    CU_ASSERT(p.uptime_ms >= 0);
    zdist_msg_destroy(&reply);
    /* A role longer than its field, a body of another type: -EPROTO. */
    Zdist__PingReply long_role = ZDIST__PING_REPLY__INIT;
    long_role.role = "a-role-much-longer-than-thirty-one-bytes";
    zdist_msg_t *bad = zdist_msg_new(ZDIST_METHOD_PING);
    CU_ASSERT_EQUAL_FATAL(zdist_msg_set_body(bad, &long_role.base), 0);
    zdist_error_t perr = {0};
    CU_ASSERT_EQUAL(zdist_rpc_ping_read(bad, &p, &perr), -EPROTO);
    CU_ASSERT_PTR_NOT_NULL(strstr(perr.text, "PING reply: role or version longer than 31 bytes"));
    Zdist__Status other = ZDIST__STATUS__INIT;
    other.code = 7;
    CU_ASSERT_EQUAL_FATAL(zdist_msg_set_body(bad, &other.base), 0);
    CU_ASSERT_EQUAL(zdist_rpc_ping_read(bad, &p, &perr), -EPROTO);
    zdist_msg_destroy(&bad);
    CU_ASSERT_STRING_EQUAL(p.role, "test"); /* written only on success */

    req = s_echo_request(41, 1234567);
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 5000, &reply), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(zdist_msg_unpack_body(reply, &zdist__status__descriptor, &pb, NULL), 0);
    CU_ASSERT_EQUAL(((Zdist__Status *) pb)->code, 42);
    protobuf_c_message_free_unpacked(pb, NULL);
    CU_ASSERT_EQUAL_FATAL(zdist_msg_tensor_count(reply), 1);
    CU_ASSERT_EQUAL(*(int64_t *) zdist_msg_tensor(reply, 0)->data, 1234567);
    zdist_msg_destroy(&reply);

    req = zdist_msg_new(M_FAIL);
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 5000, &reply), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(zdist_msg_status_message(reply), "variable 'nope' is unknown");
    zdist_msg_destroy(&reply);

    /* Unknown method: UNIMPLEMENTED, and the server keeps serving. */
    req = zdist_msg_new(777);
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 5000, &reply), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_UNIMPLEMENTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(zdist_msg_status_message(reply), "method 777"));
    zdist_msg_destroy(&reply);

    /* Too many tensors for the method. */
    req = s_echo_request(1, 1);
    zdist_shape_t s1 = {.rank = 1, .dims = {1}};
    int64_t v = 0;
    for (int i = 0; i < 4; i++)
        zdist_msg_add_tensor_copy(req, "x", ZDIST_DTYPE_INT64, &s1, &v, sizeof v);
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 5000, &reply), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(zdist_msg_status_message(reply), "echo takes 0 to 4 tensors, got 5"));
    zdist_msg_destroy(&reply);

    zdist_rpc_method_stats_t st;
    CU_ASSERT_EQUAL(zdist_rpc_server_method_stats(s->server, M_FAIL, &st), 0);
    CU_ASSERT_EQUAL(st.requests, 1);
    CU_ASSERT_EQUAL(st.errors, 1);
    CU_ASSERT_EQUAL(zdist_rpc_server_method_stats(s->server, 999, &st), -ENOENT);
    CU_ASSERT_EQUAL(zdist_rpc_client_in_flight(c), 0);
    zdist_rpc_client_destroy(&c);
    s_server_stop(&s);
}

static void
test_pipelined_10000(void)
{
    enum { N = 10000 };
    s_server_t *s = s_server_start("tcp://127.0.0.1:*", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    zdist_rpc_client_t *c = s_client(zdist_rpc_server_endpoint(s->server));
    uint64_t *ids = calloc(N, sizeof *ids);
    for (int i = 0; i < N; i++) {
        zdist_msg_t *req = s_echo_request(i, (int64_t) i * 7);
        CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_send(c, &req, 30000, &ids[i]), 0);
    }
    CU_ASSERT_EQUAL(zdist_rpc_client_in_flight(c), N);
    int matched = 0, mismatched = 0;
    char *seen = calloc(N, 1);
    for (int n = 0; n < N; n++) {
        zdist_msg_t *reply = NULL;
        if (zdist_rpc_client_recv(c, 30000, &reply) != 0)
            break;
        /* Find which call this is from its id (ids are unique). */
        uint64_t id = zdist_msg_request_id(reply);
        int which = -1;
        for (int k = n < N ? 0 : 0; k < N; k++)
            if (ids[k] == id) {
                which = k;
                break;
            }
        ProtobufCMessage *pb = NULL;
        if (which >= 0 && !seen[which] && zdist_msg_status(reply) == ZDIST_STATUS_OK &&
            zdist_msg_unpack_body(reply, &zdist__status__descriptor, &pb, NULL) == 0 &&
            ((Zdist__Status *) pb)->code == which + 1 && zdist_msg_tensor_count(reply) == 1 &&
            *(int64_t *) zdist_msg_tensor(reply, 0)->data == (int64_t) which * 7) {
            matched++;
            seen[which] = 1;
        } else {
            mismatched++;
        }
        if (pb)
            protobuf_c_message_free_unpacked(pb, NULL);
        zdist_msg_destroy(&reply);
    }
    CU_ASSERT_EQUAL(matched, N);
    CU_ASSERT_EQUAL(mismatched, 0);
    CU_ASSERT_EQUAL(zdist_rpc_client_in_flight(c), 0);
    CU_ASSERT_EQUAL(zdist_rpc_client_dropped(c), 0);
    free(seen);
    free(ids);
    zdist_rpc_client_destroy(&c);
    s_server_stop(&s);
}

static void
test_silent_server_deadline(void)
{
    /* A raw ROUTER that reads and never answers. */
    zsock_t *silent = zsock_new(ZMQ_ROUTER);
    zsock_set_linger(silent, 0);
    CU_ASSERT_EQUAL_FATAL(zmq_bind(zsock_resolve(silent), "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(zsock_resolve(silent), ZMQ_LAST_ENDPOINT, ep, &len);
    zdist_rpc_client_t *c = s_client(ep);

    /* Two calls with different deadlines complete in deadline order. */
    uint64_t id_long, id_short;
    zdist_msg_t *req = s_echo_request(1, 1);
    int64_t t0 = zdist_clock_now_ms();
    CU_ASSERT_EQUAL(zdist_rpc_client_send(c, &req, 900, &id_long), 0);
    req = s_echo_request(2, 2);
    CU_ASSERT_EQUAL(zdist_rpc_client_send(c, &req, 300, &id_short), 0);
    zdist_msg_t *reply = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_recv(c, 10000, &reply), 0);
    int64_t t1 = zdist_clock_now_ms();
    CU_ASSERT_EQUAL(zdist_msg_request_id(reply), id_short);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_DEADLINE_EXCEEDED);
    CU_ASSERT_PTR_NOT_NULL(strstr(zdist_msg_status_message(reply), "deadline"));
    CU_ASSERT(t1 - t0 >= 300);
    CU_ASSERT(t1 - t0 < 300 + 2000); /* "on time": not a perf bound, a liveness one */
    zdist_msg_destroy(&reply);
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_recv(c, 10000, &reply), 0);
    int64_t t2 = zdist_clock_now_ms();
    CU_ASSERT_EQUAL(zdist_msg_request_id(reply), id_long);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_DEADLINE_EXCEEDED);
    CU_ASSERT(t2 - t0 >= 900);
    CU_ASSERT(t2 - t0 < 900 + 2000);
    zdist_msg_destroy(&reply);

    /* recv with nothing in flight and a short wait: -EAGAIN, not a hang. */
    CU_ASSERT_EQUAL(zdist_rpc_client_recv(c, 50, &reply), -EAGAIN);
    zdist_rpc_client_destroy(&c);
    zsock_destroy(&silent);
}

static bool
s_wait_connected(zdist_rpc_client_t *c, bool want, int64_t ms)
{
    int64_t until = zdist_clock_now_ms() + ms;
    while (zdist_clock_now_ms() < until) {
        if (zdist_rpc_client_connected(c) == want)
            return true;
        usleep(10000);
    }
    return false;
}

static void
test_restart_noticed(void)
{
    s_server_t *a = s_server_start("tcp://127.0.0.1:*", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    char ep[256];
    snprintf(ep, sizeof ep, "%s", zdist_rpc_server_endpoint(a->server));
    uint64_t inc_a = zdist_rpc_server_incarnation(a->server);
    zdist_rpc_client_t *c = s_client(ep);
    zdist_msg_t *req = zdist_msg_new(ZDIST_METHOD_PING), *reply = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 5000, &reply), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    zdist_msg_destroy(&reply);
    CU_ASSERT_EQUAL(zdist_rpc_client_peer_incarnation(c), inc_a);
    CU_ASSERT_TRUE(s_wait_connected(c, true, 5000));

    /* The peer goes away: the client notices. */
    s_server_stop(&a);
    CU_ASSERT_TRUE(s_wait_connected(c, false, 5000));

    /* Same address, new process (incarnation): noticed on the next reply. */
    s_server_t *b = s_server_start(ep, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    uint64_t inc_b = zdist_rpc_server_incarnation(b->server);
    CU_ASSERT_NOT_EQUAL(inc_a, inc_b);
    int status = -1;
    for (int attempt = 0; attempt < 5 && status != ZDIST_STATUS_OK; attempt++) {
        req = zdist_msg_new(ZDIST_METHOD_PING);
        CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 3000, &reply), 0);
        status = zdist_msg_status(reply);
        zdist_msg_destroy(&reply);
    }
    CU_ASSERT_EQUAL(status, ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL(zdist_rpc_client_peer_incarnation(c), inc_b);
    CU_ASSERT_EQUAL(zdist_rpc_client_peer_restarts(c), 1);
    zdist_rpc_client_destroy(&c);
    s_server_stop(&b);
}

static void
test_garbage_from_raw_socket(void)
{
    s_server_t *s = s_server_start("tcp://127.0.0.1:*", 1 << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    zsock_t *raw = zsock_new(ZMQ_DEALER);
    zsock_set_linger(raw, 0);
    void *h = zsock_resolve(raw);
    CU_ASSERT_EQUAL_FATAL(zmq_connect(h, zdist_rpc_server_endpoint(s->server)), 0);

    const char *junk[] = {"hello", "\x08\x01\x10", ""};
    for (size_t i = 0; i < 3; i++) {
        zmq_send(h, junk[i], strlen(junk[i]), 0);
        zmq_pollitem_t item = {h, 0, ZMQ_POLLIN, 0};
        CU_ASSERT_EQUAL_FATAL(zmq_poll(&item, 1, 5000), 1);
        zdist_msg_t *reply = NULL;
        zdist_error_t err = {0};
        CU_ASSERT_EQUAL_FATAL(zdist_wire_recv(h, false, NULL, 0, &reply, &err), 0);
        CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_INVALID_ARGUMENT);
        CU_ASSERT_EQUAL(zdist_msg_incarnation(reply), zdist_rpc_server_incarnation(s->server));
        zdist_msg_destroy(&reply);
    }
    /* A body that does not decode as the method's request. */
    {
        Zdist__Header hd = ZDIST__HEADER__INIT;
        hd.version = ZDIST_PROTOCOL_VERSION;
        hd.method = M_ECHO;
        hd.request_id = 77;
        uint8_t bad[] = {0xff, 0xff, 0xff};
        hd.body.data = bad;
        hd.body.len = sizeof bad;
        uint8_t buf[128];
        size_t n = zdist__header__pack(&hd, buf);
        zmq_send(h, buf, n, 0);
        zmq_pollitem_t item = {h, 0, ZMQ_POLLIN, 0};
        CU_ASSERT_EQUAL_FATAL(zmq_poll(&item, 1, 5000), 1);
        zdist_msg_t *reply = NULL;
        CU_ASSERT_EQUAL_FATAL(zdist_wire_recv(h, false, NULL, 0, &reply, NULL), 0);
        CU_ASSERT_EQUAL(zdist_msg_request_id(reply), 77);
        CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_INVALID_ARGUMENT);
        CU_ASSERT_PTR_NOT_NULL(strstr(zdist_msg_status_message(reply), "zdist.Status"));
        zdist_msg_destroy(&reply);
    }
    CU_ASSERT_EQUAL(zdist_rpc_server_rejected(s->server), 4);
    CU_ASSERT(atomic_load(&s->logged) >= 4);

    /* An oversized message: INVALID_ARGUMENT naming the limit. */
    zdist_rpc_client_t *c = s_client(zdist_rpc_server_endpoint(s->server));
    zdist_msg_t *req = zdist_msg_new(M_ECHO), *reply = NULL;
    Zdist__Status body = ZDIST__STATUS__INIT;
    zdist_msg_set_body(req, &body.base);
    void *big;
    zdist_shape_t shape = {.rank = 1, .dims = {(3 << 19) / 8}}; /* 1.5 MiB > 1 MiB limit */
    CU_ASSERT_EQUAL_FATAL(zdist_msg_add_tensor_alloc(req, "big", ZDIST_DTYPE_INT64, &shape, &big), 0);
    memset(big, 0, (3 << 19));
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 5000, &reply), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(zdist_msg_status_message(reply), "exceeds the limit"));
    zdist_msg_destroy(&reply);

    /* Still serving. */
    req = s_echo_request(5, 5);
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 5000, &reply), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    zdist_msg_destroy(&reply);
    zdist_rpc_client_destroy(&c);
    zsock_destroy(&raw);
    s_server_stop(&s);
}

static void
test_bind_conflict_and_bad_endpoint(void)
{
    s_server_t *a = s_server_start("tcp://127.0.0.1:*", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    zdist_error_t err = {0};
    zdist_rpc_server_t *b =
        zdist_rpc_server_new(zdist_rpc_server_endpoint(a->server), s_methods, 2, NULL, NULL, &err);
    CU_ASSERT_PTR_NULL(b);
    CU_ASSERT_EQUAL(err.code, -EADDRINUSE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "cannot bind"));
    /* The server that failed to bind (NULL) is refused, not dereferenced. */
    CU_ASSERT_EQUAL(zdist_rpc_server_dispatch(b, 16), -EINVAL);
    CU_ASSERT_PTR_NULL(zdist_rpc_server_socket(b));
    s_server_stop(&a);
    zdist_rpc_client_t *c = zdist_rpc_client_new("tcp://nonsense", NULL, &err);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "cannot connect to 'tcp://nonsense'"));
}

extern char **environ;

/* A peer that stops answering without closing its connection (a hung or
   frozen process) is noticed by heartbeats, not by TCP. A real zdist-psd is
   frozen with SIGSTOP. */
static void
test_frozen_peer_noticed_by_heartbeat(void)
{
    /* Pick a free port by binding and releasing it. */
    zsock_t *probe = zsock_new(ZMQ_ROUTER);
    zsock_set_linger(probe, 0);
    CU_ASSERT_EQUAL_FATAL(zmq_bind(zsock_resolve(probe), "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(zsock_resolve(probe), ZMQ_LAST_ENDPOINT, ep, &len);
    zsock_destroy(&probe);

    char *argv[] = {ZDIST_BUILD_DIR "/psd/zdist-psd", "--bind", ep, NULL};
    pid_t pid;
    CU_ASSERT_EQUAL_FATAL(posix_spawn(&pid, argv[0], NULL, NULL, argv, environ), 0);
    zdist_rpc_client_t *c = s_client(ep);
    int status = -1;
    for (int attempt = 0; attempt < 50 && status != ZDIST_STATUS_OK; attempt++) {
        zdist_msg_t *req = zdist_msg_new(ZDIST_METHOD_PING), *reply = NULL;
        CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 200, &reply), 0);
        status = zdist_msg_status(reply);
        zdist_msg_destroy(&reply);
    }
    CU_ASSERT_EQUAL(status, ZDIST_STATUS_OK);
    CU_ASSERT_TRUE(s_wait_connected(c, true, 5000));

    kill(pid, SIGSTOP);
    /* Signals arrive asynchronously: wait until the child is really stopped. */
    int wstatus = 0;
    CU_ASSERT_EQUAL_FATAL(waitpid(pid, &wstatus, WUNTRACED), pid);
    CU_ASSERT_TRUE(WIFSTOPPED(wstatus));
    int64_t t0 = zdist_clock_now_ms();
    /* In flight when the peer froze: completes UNAVAILABLE once the
       heartbeat gives up (timeout 1 s), long before its 30 s deadline. */
    zdist_msg_t *req = zdist_msg_new(ZDIST_METHOD_PING), *reply = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 30000, &reply), 0);
    int64_t waited = zdist_clock_now_ms() - t0;
    if (zdist_msg_status(reply) != ZDIST_STATUS_UNAVAILABLE)
        fprintf(stderr, "\n  frozen peer: status %s '%s' after %lld ms\n", zdist_status_name(zdist_msg_status(reply)),
                zdist_msg_status_message(reply), (long long) waited);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_UNAVAILABLE);
    CU_ASSERT(waited < 10000);
    zdist_msg_destroy(&reply);
    CU_ASSERT_FALSE(zdist_rpc_client_connected(c));

    kill(pid, SIGCONT);
    kill(pid, SIGTERM);
    waitpid(pid, &wstatus, 0);
    CU_ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    zdist_rpc_client_destroy(&c);
}

/* ---- calls in flight per peer ---- */

#define M_HOLD 102
#define S_HOLD_MAX 16

typedef struct {
    zdist_rpc_server_t *server;
    pthread_t thread;
    atomic_int stop, release, held_n;
    zdist_rpc_call_t *held[S_HOLD_MAX];
} s_hold_server_t;

/* HOLD: answered only when the test says so (a deferred call). */
static int
s_hold(zdist_rpc_call_t *call, void *state)
{
    s_hold_server_t *h = state;
    int n = atomic_load(&h->held_n);
    if (n >= S_HOLD_MAX)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INTERNAL, "test holds too many");
    h->held[n] = zdist_rpc_call_defer(call);
    atomic_store(&h->held_n, n + 1);
    return 0;
}

static const zdist_rpc_method_t s_hold_methods[] = {
    {M_HOLD, "hold", NULL, s_hold, 0, 0, 0},
};

static void *
s_hold_loop(void *arg)
{
    s_hold_server_t *h = arg;
    while (!atomic_load(&h->stop)) {
        zmq_pollitem_t item = {zdist_rpc_server_socket(h->server), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 10) > 0)
            zdist_rpc_server_dispatch(h->server, 256);
        if (atomic_load(&h->release)) { /* finished on the server's thread */
            int n = atomic_load(&h->held_n);
            for (int i = 0; i < n; i++)
                zdist_rpc_call_finish(&h->held[i]);
            atomic_store(&h->held_n, 0);
            atomic_store(&h->release, 0);
        }
    }
    int n = atomic_load(&h->held_n);
    for (int i = 0; i < n; i++)
        zdist_rpc_call_finish(&h->held[i]);
    return NULL;
}

static uint64_t
s_send_hold(zdist_rpc_client_t *c)
{
    zdist_msg_t *req = zdist_msg_new(M_HOLD);
    uint64_t id = 0;
    CU_ASSERT_EQUAL(zdist_rpc_client_send(c, &req, 30000, &id), 0);
    return id;
}

static void
s_wait_held(s_hold_server_t *h, int want)
{
    for (int i = 0; i < 3000 && atomic_load(&h->held_n) != want; i++)
        usleep(2000);
    CU_ASSERT_EQUAL(atomic_load(&h->held_n), want);
}

static void
test_calls_in_flight_per_peer(void)
{
    s_hold_server_t h = {0};
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    CU_ASSERT_EQUAL(opts.max_calls_per_peer, ZDIST_RPC_MAX_CALLS_PER_PEER);
    CU_ASSERT_EQUAL(opts.max_connections_per_peer, ZDIST_RPC_MAX_CONNECTIONS_PER_PEER);
    opts.role = "test";
    opts.max_calls_per_peer = 3;
    zdist_error_t err = {0};
    h.server = zdist_rpc_server_new("tcp://127.0.0.1:*", s_hold_methods, 1, &h, &opts, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h.server);
    pthread_create(&h.thread, NULL, s_hold_loop, &h);
    const char *ep = zdist_rpc_server_endpoint(h.server);
    zdist_rpc_client_t *a = s_client(ep), *b = s_client(ep);

    /* Three held calls from a: the fourth (and a PING) is refused at once,
       naming the limit and its flag; nothing reached the handler. */
    uint64_t held_ids[3];
    for (int i = 0; i < 3; i++)
        held_ids[i] = s_send_hold(a);
    s_wait_held(&h, 3);
    uint64_t over = s_send_hold(a);
    zdist_msg_t *reply = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_recv(a, 10000, &reply), 0);
    CU_ASSERT_EQUAL(zdist_msg_request_id(reply), over);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_RESOURCE_EXHAUSTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(zdist_msg_status_message(reply), "--max-calls-per-peer 3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(zdist_msg_status_message(reply), "3 calls from this peer are already in flight"));
    zdist_msg_destroy(&reply);
    zdist_msg_t *ping = zdist_msg_new(ZDIST_METHOD_PING);
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(a, &ping, 10000, &reply), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_RESOURCE_EXHAUSTED);
    zdist_msg_destroy(&reply);
    CU_ASSERT_EQUAL(atomic_load(&h.held_n), 3);
    CU_ASSERT_EQUAL(zdist_rpc_server_rejected(h.server), 2);

    /* Another peer is not held back by a's calls. */
    s_send_hold(b);
    s_wait_held(&h, 4);

    /* Once answered, a's calls no longer count: it may call again. */
    atomic_store(&h.release, 1);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_recv(a, 10000, &reply), 0);
        CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
        uint64_t id = zdist_msg_request_id(reply);
        CU_ASSERT(id == held_ids[0] || id == held_ids[1] || id == held_ids[2]);
        zdist_msg_destroy(&reply);
    }
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_recv(b, 10000, &reply), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    zdist_msg_destroy(&reply);
    for (int i = 0; i < 3; i++)
        s_send_hold(a);
    s_wait_held(&h, 3);
    CU_ASSERT_EQUAL(zdist_rpc_server_rejected(h.server), 2);

    atomic_store(&h.stop, 1);
    pthread_join(h.thread, NULL);
    zdist_rpc_client_destroy(&a);
    zdist_rpc_client_destroy(&b);
    zdist_rpc_server_destroy(&h.server);
}

/* A client and its server closed at the same moment, again and again, in
   one process (one libzmq IO thread): the client's close may report its
   connection lost after its monitor's reader is gone. libzmq sends that
   event with a blocking send on its IO thread, so unless the monitor is
   stopped first that thread hangs and with it every socket of the
   process: the next call below would never be answered. */
static void
test_closed_together(void)
{
    for (int i = 0; i < 40; i++) {
        s_server_t *s = s_server_start("tcp://127.0.0.1:*", 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        zdist_rpc_client_t *c = s_client(zdist_rpc_server_endpoint(s->server));
        zdist_msg_t *req = s_echo_request(i, i), *reply = NULL;
        CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_call(c, &req, 5000, &reply), 0);
        CU_ASSERT_EQUAL_FATAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
        zdist_msg_destroy(&reply);
        s_server_stop(&s);            /* its connection closes on the IO thread... */
        zdist_rpc_client_destroy(&c); /* ...while the client's goes too */
    }
    s_server_t *s = s_server_start("tcp://127.0.0.1:*", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    zdist_rpc_client_t *c = s_client(zdist_rpc_server_endpoint(s->server));
    zdist_msg_t *req = s_echo_request(7, 7), *reply = NULL;
    CU_ASSERT_EQUAL(zdist_rpc_client_call(c, &req, 5000, &reply), 0);
    CU_ASSERT(reply && zdist_msg_status(reply) == ZDIST_STATUS_OK);
    zdist_msg_destroy(&reply);
    zdist_rpc_client_destroy(&c);
    s_server_stop(&s);
}

/* ---- the daemons' serve loop (zdist_daemon_serve) ----

   It polls the pipe and the connection monitor by their ZMQ_FD, which
   signals only new arrivals: these fail if an event waiting before the loop
   polls, or one no request follows, is never handled. */

typedef struct {
    zdist_rpc_server_t *server;
    zsock_t *front, *back; /* the test's end of the pipe, the loop's end */
    pthread_t thread;
    bool take_edge; /* see the $TERM waiting before zdist_daemon_serve polls */
    int batch;      /* requests per wake-up; 0 for 32 */
} s_serve_case_t;

static void *
s_serve_thread(void *arg)
{
    s_serve_case_t *c = arg;
    /* Reading ZMQ_EVENTS takes the descriptor's edge: the $TERM waits, its
       descriptor is no longer readable. */
    while (c->take_edge && !(zsock_events(c->back) & ZMQ_POLLIN))
        usleep(1000);
    zloop_t *loop = zloop_new();
    zdist_daemon_serve(loop, c->back, c->server, c->batch ? c->batch : 32);
    zloop_destroy(&loop);
    zstr_send(c->back, "SERVED");
    return NULL;
}

static void
s_serve_start(s_serve_case_t *c, size_t max_connections_per_peer)
{
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = "test";
    opts.max_connections_per_peer = max_connections_per_peer;
    zdist_error_t err = {0};
    c->server = zdist_rpc_server_new("tcp://127.0.0.1:*", s_methods, 2, NULL, &opts, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c->server);
    c->front = zsys_create_pipe(&c->back);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c->front);
    zsock_set_rcvtimeo(c->front, 20000);
}

/* After a $TERM: true when the loop ended (the thread joined, the pipe freed). */
static bool
s_serve_stop(s_serve_case_t *c)
{
    char *done = zstr_recv(c->front);
    bool served = done && streq(done, "SERVED");
    zstr_free(&done);
    if (!served) { /* a lost $TERM: the loop still polls; leave it */
        pthread_detach(c->thread);
        return false;
    }
    pthread_join(c->thread, NULL);
    zsock_destroy(&c->front);
    zsock_destroy(&c->back);
    return true;
}

static void
test_serve_term_before_loop(void)
{
    s_serve_case_t c = {.take_edge = true};
    s_serve_start(&c, 0);
    CU_ASSERT_EQUAL_FATAL(zstr_send(c.front, "$TERM"), 0);
    pthread_create(&c.thread, NULL, s_serve_thread, &c);
    CU_ASSERT_FATAL(s_serve_stop(&c));
    zdist_rpc_server_destroy(&c.server);
}

/* One request per wake-up: those left waiting when a wake-up ends are
   answered too, though no new arrival makes the socket readable. */
static void
test_serve_past_batch(void)
{
    s_serve_case_t c = {.batch = 1};
    s_serve_start(&c, 0);
    pthread_create(&c.thread, NULL, s_serve_thread, &c);
    zdist_rpc_client_t *client = s_client(zdist_rpc_server_endpoint(c.server));
    enum { N = 200 };
    for (int i = 0; i < N; i++) {
        zdist_msg_t *req = s_echo_request(i, i);
        CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_send(client, &req, 30000, NULL), 0);
    }
    int answered = 0;
    zdist_msg_t *reply = NULL;
    while (answered < N && zdist_rpc_client_recv(client, 10000, &reply) == 0) {
        answered += zdist_msg_status(reply) == ZDIST_STATUS_OK;
        zdist_msg_destroy(&reply);
    }
    CU_ASSERT_EQUAL(answered, N);
    zdist_rpc_client_destroy(&client);
    CU_ASSERT_EQUAL_FATAL(zstr_send(c.front, "$TERM"), 0);
    CU_ASSERT_FATAL(s_serve_stop(&c));
    zdist_rpc_server_destroy(&c.server);
}

/* A raw TCP connection to port; -1 when it cannot connect. */
static int
s_tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof sa) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void
test_serve_closes_connection_past_limit_at_accept(void)
{
    s_serve_case_t c = {0};
    s_serve_start(&c, 1);
    pthread_create(&c.thread, NULL, s_serve_thread, &c);
    const char *ep = zdist_rpc_server_endpoint(c.server);
    int port = atoi(strrchr(ep, ':') + 1);
    /* Two connections from 127.0.0.1 that send nothing: one is over the
       limit and the psd shuts it down when the monitor reports it. */
    struct pollfd fds[2];
    for (int i = 0; i < 2; i++) {
        fds[i].fd = s_tcp_connect(port);
        fds[i].events = POLLIN;
        CU_ASSERT_FATAL(fds[i].fd >= 0);
    }
    bool closed[2] = {false, false};
    int64_t give_up = zdist_clock_now_ms() + 20000;
    while (!closed[0] && !closed[1] && zdist_clock_now_ms() < give_up) {
        if (poll(fds, 2, 100) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            char buf[256]; /* the server's greeting, then the close */
            if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && recv(fds[i].fd, buf, sizeof buf, 0) <= 0) {
                closed[i] = true;
                fds[i].fd = -fds[i].fd - 1; /* poll skips it */
            }
        }
    }
    CU_ASSERT(closed[0] || closed[1]);
    for (int i = 0; i < 2; i++)
        close(fds[i].fd < 0 ? -fds[i].fd - 1 : fds[i].fd);
    CU_ASSERT_EQUAL_FATAL(zstr_send(c.front, "$TERM"), 0);
    CU_ASSERT_FATAL(s_serve_stop(&c));
    CU_ASSERT_EQUAL(zdist_rpc_server_refused_connections(c.server), 1);
    zdist_rpc_server_destroy(&c.server);
}

/* Unreachable: what a call's deadline or a lost connection leaves, and
   the socket errors that map to UNAVAILABLE; not a refusal, not success. */
static void
test_unreachable(void)
{
    CU_ASSERT_TRUE(zdist_rpc_unreachable(-ETIMEDOUT));
    CU_ASSERT_TRUE(zdist_rpc_unreachable(-ENOTCONN));
    CU_ASSERT_TRUE(zdist_rpc_unreachable(-ECONNREFUSED));
    CU_ASSERT_TRUE(zdist_rpc_unreachable(-EHOSTUNREACH));
    CU_ASSERT_TRUE(zdist_rpc_unreachable(-ECONNRESET));
    CU_ASSERT_TRUE(zdist_rpc_unreachable(zdist_status_to_errno(ZDIST_STATUS_UNAVAILABLE)));
    CU_ASSERT_TRUE(zdist_rpc_unreachable(zdist_status_to_errno(ZDIST_STATUS_DEADLINE_EXCEEDED)));
    CU_ASSERT_FALSE(zdist_rpc_unreachable(0));
    CU_ASSERT_FALSE(zdist_rpc_unreachable(-EINVAL));
    CU_ASSERT_FALSE(zdist_rpc_unreachable(-EACCES));
    CU_ASSERT_FALSE(zdist_rpc_unreachable(-ENOENT));
    CU_ASSERT_FALSE(zdist_rpc_unreachable(-EAGAIN));
    CU_ASSERT_FALSE(zdist_rpc_unreachable(-EBADMSG));
    CU_ASSERT_FALSE(zdist_rpc_unreachable(ETIMEDOUT)); /* not a negative errno */
}

void
zdist_test_rpc_register(void)
{
    ZDIST_SUITE("rpc",
                {"ping, echo, failure status, unknown method", test_ping_echo_fail},
                {"unreachable: deadline and lost connection, not a refusal", test_unreachable},
                {"10,000 pipelined calls matched to replies", test_pipelined_10000},
                {"silent server: DEADLINE_EXCEEDED on time", test_silent_server_deadline},
                {"restarted server noticed by incarnation", test_restart_noticed},
                {"garbage from a raw socket, oversized message", test_garbage_from_raw_socket},
                {"bind conflict, bad endpoint, NULL server refused", test_bind_conflict_and_bad_endpoint},
                {"frozen peer noticed by heartbeat", test_frozen_peer_noticed_by_heartbeat},
                {"calls in flight per peer limited, RESOURCE_EXHAUSTED naming the flag",
                 test_calls_in_flight_per_peer},
                {"a client and its server closed together, 40 times: the IO thread never stalls",
                 test_closed_together},
                {"serve loop: a $TERM waiting before it polls ends it", test_serve_term_before_loop},
                {"serve loop: one request per wake-up, 200 pipelined all answered", test_serve_past_batch},
                {"serve loop: a connection past the limit is closed at accept, with no request",
                 test_serve_closes_connection_past_limit_at_accept});
}
