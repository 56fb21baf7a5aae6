/* zdist RPC server: ROUTER socket, checked dispatch by method table. */
#include <arpa/inet.h>
#include <czmq.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common.pb-c.h"
#include "wire/body.h"
#include "wire/latency.h"
#include "wire/monitor.h"
#include "zdist/prom.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

typedef struct {
    uint64_t requests;
    uint64_t errors;
    uint32_t latency[ZDIST_LATENCY_BUCKETS]; /* wire/latency.h */
    uint64_t bytes_in, bytes_out; /* bodies and tensor payloads */
    zdist_prom_histogram_t seconds;
} s_method_stats_t;

struct zdist_rpc_server_t {
    zsock_t *sock;
    void *handle; /* raw libzmq socket */
    const zdist_rpc_method_t *methods;
    size_t nmethods;
    s_method_stats_t *stats; /* nmethods + 1 (built-in PING last) */
    void *state;
    zdist_rpc_server_options_t opts;
    char *role;
    char endpoint[256];
    uint64_t incarnation;
    int64_t started_ms;
    uint64_t rejected;
    zhashx_t *in_flight; /* peer key -> deferred calls in flight (uintptr_t, >= 1) */
    /* max_connections_per_peer: NULL (all three) without a limit. */
    zsock_t *monitor;    /* ACCEPTED / DISCONNECTED of the ROUTER's connections */
    zhashx_t *conns;     /* "fd" -> s_conn_t, every connection the monitor reported open */
    zhashx_t *peers;     /* peer key -> s_peer_t, peers holding at least one slot */
    uint64_t refused_connections;
    bool monitor_polled; /* the caller's loop watches before each dispatch */
    bool dispatching;
    zdist_rpc_server_wake_fn *wake; /* see zdist_rpc_server_set_wake */
    void *wake_arg;
};

/* The longest peer key: a certificate name or a routing id's text. */
#define S_PEER_KEY_MAX 128

/* One TCP connection, named by its descriptor as the monitor and ZMQ_SRCFD
   name it. A descriptor the monitor reports accepted again was closed in
   between (a close the monitor did not report), so the new one replaces it. */
typedef struct {
    int fd;
    char peer[S_PEER_KEY_MAX]; /* "addr:IP" or "key:NAME"; "" until known */
    bool counted;              /* holds one of its peer's slots */
    bool refused;              /* counted in refused_connections */
    bool closed;               /* shut down by us: its requests are refused */
    bool pending;              /* accepted in this monitor batch, not yet decided */
    int64_t refused_ms;        /* plain, past its address's limit: shut down S_REFUSED_GRACE_MS after */
} s_conn_t;

/* A plain connection past its address's limit stays open this long, so
   its requests are answered RESOURCE_EXHAUSTED naming the flag (a client
   shut out at once could only guess: libzmq says no more than "handshake
   failed"), then it is shut down; past S_REFUSED_OPEN_MAX of them waiting,
   the oldest at once (a peer opening many has its newest answered). */
#define S_REFUSED_GRACE_MS 1000
#define S_REFUSED_OPEN_MAX 64

typedef struct {
    size_t open;  /* its connections holding a slot */
    bool logged;  /* its refusal was logged since it last had room */
} s_peer_t;

struct zdist_rpc_call_t {
    zdist_rpc_server_t *server;
    zdist_msg_t *request;
    zdist_msg_t *reply;
    ProtobufCMessage *pb; /* the unpacked body */
    void *body;           /* its typed form (pb itself without a decode) */
    const zdist_rpc_method_t *method;
    s_method_stats_t *stats;
    int64_t received_us;
    int64_t deadline_ms; /* absolute, INT64_MAX for none */
    bool deferred;
    bool counted; /* in server->in_flight under peer_key */
    char peer_key[S_PEER_KEY_MAX];
};

void
zdist_rpc_server_options_default(zdist_rpc_server_options_t *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->role = "zdist";
    zdist_wire_limits_default(&opts->limits);
    opts->heartbeat_ivl_ms = 1000;
    opts->heartbeat_timeout_ms = 5000;
    opts->rcvhwm = 10000;
    opts->sndhwm = 100000;
    opts->keys = zdist_keys_process();
    opts->max_calls_per_peer = ZDIST_RPC_MAX_CALLS_PER_PEER;
    opts->max_connections_per_peer = ZDIST_RPC_MAX_CONNECTIONS_PER_PEER;
}

static void
s_log(zdist_rpc_server_t *self, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
s_log(zdist_rpc_server_t *self, const char *fmt, ...)
{
    if (!self->opts.log)
        return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    self->opts.log(self->opts.log_state, line);
}

/* ---- connections per peer ----

   A ROUTER hides its connections: libzmq neither lists them nor closes one
   on request, and tells no one when a peer goes. Two places each see half
   of a connection: the ZAP handler sees a CURVE peer's key and address but
   not which connection it admits, and never hears of a close; the socket
   monitor sees every connection accepted and closed, named by its
   descriptor, but not its key. So the monitor keeps the set of open
   connections and their peers: on a plain socket a connection's peer is
   its source address (getpeername at accept), and one past the address's
   limit is refused: its requests are answered RESOURCE_EXHAUSTED naming
   the flag for S_REFUSED_GRACE_MS, then it is shut down; with CURVE the
   peer is the key, known only from the User-Id of the connection's first
   request (ZMQ_SRCFD names the connection), and a connection past the
   key's limit stays open — the directory admitted the key — but each of its
   requests is answered RESOURCE_EXHAUSTED until the key has room. The
   monitor is asynchronous: a descriptor closed and reused before we read
   its ACCEPTED is reported accepted twice (the second replaces the first),
   and a shutdown decided for a descriptor that closed and was reused in the
   microseconds since closes that newer connection, which reconnects. */

static void
s_free_item(void **item)
{
    free(*item);
    *item = NULL;
}

static int
s_monitor_start(zdist_rpc_server_t *self, zdist_error_t *err)
{
    self->conns = zhashx_new();
    self->peers = zhashx_new();
    if (!self->conns || !self->peers)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    zhashx_set_destructor(self->conns, s_free_item);
    zhashx_set_destructor(self->peers, s_free_item);
    /* Unbounded (monitor.h): a burst of connections between two reads must
       not drop events either (a lost close would hold its peer's slot). */
    self->monitor = zdist_monitor_open(self->handle, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED,
                                       "the server socket's connections", err);
    return self->monitor ? 0 : -EIO;
}

/* "address 127.0.0.1" or "key 'alice' (Z85 public key)" for a peer key. */
static void
s_peer_describe(const zdist_rpc_server_t *self, const char *peer, char *out, size_t cap)
{
    if (strncmp(peer, "key:", 4) == 0) {
        const char *pub = self->opts.keys ? zdist_keys_public(self->opts.keys, peer + 4) : NULL;
        snprintf(out, cap, "key '%s' (%s)", peer + 4, pub ? pub : "no public key");
    } else
        snprintf(out, cap, "address %s", strncmp(peer, "addr:", 5) == 0 ? peer + 5 : peer);
}

/* The connection takes one of its peer's slots, or is refused (counted
   once, logged once per peer until it has room again). */
static bool
s_admit(zdist_rpc_server_t *self, s_conn_t *conn)
{
    s_peer_t *peer = zhashx_lookup(self->peers, conn->peer);
    if (!peer || peer->open < self->opts.max_connections_per_peer) {
        if (!peer) {
            if (!(peer = calloc(1, sizeof *peer)))
                return true; /* out of memory: uncounted rather than refused */
            zhashx_insert(self->peers, conn->peer, peer);
        }
        peer->open++;
        conn->counted = true;
        return true;
    }
    if (!conn->refused) {
        conn->refused = true;
        self->refused_connections++;
    }
    if (!peer->logged) {
        peer->logged = true;
        char who[192];
        s_peer_describe(self, conn->peer, who, sizeof who);
        s_log(self,
              "refused a connection of %s: it holds %zu connections here, the most one peer may "
              "(--max-connections-per-peer %zu); further refusals of it are not logged until it has room",
              who, peer->open, self->opts.max_connections_per_peer);
    }
    return false;
}

static void
s_conn_forget(zdist_rpc_server_t *self, int fd)
{
    char key[16];
    snprintf(key, sizeof key, "%d", fd);
    s_conn_t *conn = zhashx_lookup(self->conns, key);
    if (!conn)
        return;
    s_peer_t *peer = conn->counted ? zhashx_lookup(self->peers, conn->peer) : NULL;
    if (peer && --peer->open == 0)
        zhashx_delete(self->peers, conn->peer);
    else if (peer && peer->open < self->opts.max_connections_per_peer)
        peer->logged = false;
    zhashx_delete(self->conns, key);
}

/* The source address of an accepted connection; "" when it is gone already. */
static void
s_source_address(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "";
    if (getpeername(fd, (struct sockaddr *) &ss, &len) == 0) {
        if (ss.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *) &ss)->sin_addr, ip, sizeof ip);
        else if (ss.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *) &ss)->sin6_addr, ip, sizeof ip);
    }
    snprintf(out, cap, "%s%s", ip[0] ? "addr:" : "", ip);
}

void *
zdist_rpc_server_monitor_socket(zdist_rpc_server_t *self)
{
    return self && self->monitor ? zsock_resolve(self->monitor) : NULL;
}

void
zdist_rpc_server_set_monitor_polled(zdist_rpc_server_t *self, bool polled)
{
    if (self)
        self->monitor_polled = polled;
}

void
zdist_rpc_server_set_wake(zdist_rpc_server_t *self, zdist_rpc_server_wake_fn *wake, void *arg)
{
    if (!self)
        return;
    self->wake = wake;
    self->wake_arg = arg;
}

static void
s_wake(zdist_rpc_server_t *self)
{
    if (self->wake)
        self->wake(self->wake_arg);
}

uint64_t
zdist_rpc_server_refused_connections(const zdist_rpc_server_t *self)
{
    return self->refused_connections;
}

static bool
s_refused_waiting(const s_conn_t *conn)
{
    return conn->refused_ms && !conn->closed && !conn->counted;
}

static void
s_refused_close(s_conn_t *conn)
{
    shutdown(conn->fd, SHUT_RDWR);
    conn->closed = true;
}

static int
s_cmp_ms(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return x < y ? -1 : x > y;
}

/* More than S_REFUSED_OPEN_MAX refused connections wait for their grace:
   the oldest are shut down now. */
static void
s_refused_trim(zdist_rpc_server_t *self, size_t waiting)
{
    int64_t *ms = malloc(waiting * sizeof *ms);
    size_t n = 0;
    for (s_conn_t *conn = zhashx_first(self->conns); conn; conn = zhashx_next(self->conns))
        if (s_refused_waiting(conn)) {
            if (!ms) /* out of memory: every one */
                s_refused_close(conn);
            else if (n < waiting)
                ms[n++] = conn->refused_ms;
        }
    if (!ms)
        return;
    qsort(ms, n, sizeof *ms, s_cmp_ms);
    int64_t keep_from = ms[n - S_REFUSED_OPEN_MAX];
    free(ms);
    for (s_conn_t *conn = zhashx_first(self->conns); conn; conn = zhashx_next(self->conns))
        if (s_refused_waiting(conn) && conn->refused_ms < keep_from)
            s_refused_close(conn);
}

void
zdist_rpc_server_watch(zdist_rpc_server_t *self)
{
    if (!self || !self->monitor)
        return;
    void *mon = zsock_resolve(self->monitor);
    bool accepted = false;
    for (;;) {
        zmq_msg_t ev;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            break;
        }
        uint16_t event = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&ev) >= 6) {
            memcpy(&event, zmq_msg_data(&ev), sizeof event);
            memcpy(&value, (char *) zmq_msg_data(&ev) + 2, sizeof value);
        }
        zmq_msg_close(&ev);
        while (zsock_rcvmore(self->monitor)) { /* the endpoint */
            zmq_msg_init(&ev);
            int rc = zmq_msg_recv(&ev, mon, 0);
            zmq_msg_close(&ev);
            if (rc < 0)
                break;
        }
        int fd = (int) value;
        s_conn_forget(self, fd); /* a close, or a reused descriptor */
        if (event != ZMQ_EVENT_ACCEPTED)
            continue;
        s_conn_t *conn = calloc(1, sizeof *conn);
        if (!conn)
            continue; /* out of memory: uncounted */
        conn->fd = fd;
        conn->pending = true;
        if (!self->opts.keys)
            s_source_address(fd, conn->peer, sizeof conn->peer);
        char key[16];
        snprintf(key, sizeof key, "%d", fd);
        zhashx_insert(self->conns, key, conn);
        accepted = true;
    }
    /* Decided once the batch is read, so no descriptor is acted on for a
       connection the batch says is closed. */
    int64_t now = zdist_clock_now_ms();
    size_t waiting = 0;
    for (s_conn_t *conn = zhashx_first(self->conns); conn; conn = zhashx_next(self->conns)) {
        if (accepted && conn->pending) {
            conn->pending = false;
            if (conn->peer[0] && !s_admit(self, conn))
                conn->refused_ms = now;
        }
        if (s_refused_waiting(conn) && now - conn->refused_ms >= S_REFUSED_GRACE_MS)
            s_refused_close(conn);
        waiting += s_refused_waiting(conn);
    }
    if (waiting > S_REFUSED_OPEN_MAX)
        s_refused_trim(self, waiting);
}

void
zdist_rpc_server_destroy(zdist_rpc_server_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_rpc_server_t *self = *self_p;
    if (self->monitor)
        zdist_monitor_close(self->handle, &self->monitor);
    zsock_destroy(&self->sock);
    zhashx_destroy(&self->in_flight);
    zhashx_destroy(&self->conns);
    zhashx_destroy(&self->peers);
    free(self->stats);
    free(self->role);
    free(self);
    *self_p = NULL;
}

zdist_rpc_server_t *
zdist_rpc_server_new(const char *endpoint, const zdist_rpc_method_t *methods, size_t nmethods, void *state,
                     const zdist_rpc_server_options_t *opts, zdist_error_t *err)
{
    zdist_rpc_server_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    if (opts)
        self->opts = *opts;
    else
        zdist_rpc_server_options_default(&self->opts);
    self->role = strdup(self->opts.role ? self->opts.role : "zdist");
    self->opts.role = self->role;
    self->methods = methods;
    self->nmethods = nmethods;
    self->state = state;
    self->incarnation = zdist_random_u64();
    self->started_ms = zdist_clock_now_ms();
    self->stats = calloc(nmethods + 1, sizeof *self->stats);
    self->sock = zsock_new(ZMQ_ROUTER);
    self->in_flight = zhashx_new();
    if (!self->role || !self->stats || !self->sock || !self->in_flight) {
        zdist_error_set(err, -ENOMEM, "cannot create the server socket");
        zdist_rpc_server_destroy(&self);
        return NULL;
    }
    for (size_t i = 0; i <= nmethods; i++)
        zdist_prom_histogram_init_seconds(&self->stats[i].seconds);
    self->handle = zsock_resolve(self->sock);
    zsock_set_linger(self->sock, 0);
    zsock_set_rcvhwm(self->sock, self->opts.rcvhwm);
    zsock_set_sndhwm(self->sock, self->opts.sndhwm);
    /* Messages a little over the limit are read and answered
       INVALID_ARGUMENT; a frame past twice the limit is not even buffered:
       libzmq drops that peer's connection. */
    int64_t maxmsg = (int64_t) self->opts.limits.max_message_bytes * 2 + 65536;
    zmq_setsockopt(self->handle, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (self->opts.heartbeat_ivl_ms > 0) {
        zsock_set_heartbeat_ivl(self->sock, (int) self->opts.heartbeat_ivl_ms);
        zsock_set_heartbeat_timeout(self->sock, (int) self->opts.heartbeat_timeout_ms);
        zsock_set_heartbeat_ttl(self->sock, (int) self->opts.heartbeat_timeout_ms);
    }
    if (self->opts.keys && zdist_keys_apply_server(self->opts.keys, NULL, self->handle, err) < 0) {
        zdist_rpc_server_destroy(&self);
        return NULL;
    }
    if (self->opts.max_connections_per_peer > 0 && s_monitor_start(self, err) < 0) {
        zdist_rpc_server_destroy(&self);
        return NULL;
    }
    if (zmq_bind(self->handle, endpoint) != 0) {
        zdist_error_set(err, -errno, "cannot bind '%s': %s", endpoint, zmq_strerror(errno));
        zdist_rpc_server_destroy(&self);
        return NULL;
    }
    size_t len = sizeof self->endpoint;
    if (zmq_getsockopt(self->handle, ZMQ_LAST_ENDPOINT, self->endpoint, &len) != 0)
        snprintf(self->endpoint, sizeof self->endpoint, "%s", endpoint);
    return self;
}

void *
zdist_rpc_server_socket(zdist_rpc_server_t *self)
{
    return self ? self->handle : NULL;
}

const char *
zdist_rpc_server_endpoint(const zdist_rpc_server_t *self)
{
    return self->endpoint;
}

uint64_t
zdist_rpc_server_incarnation(const zdist_rpc_server_t *self)
{
    return self->incarnation;
}

uint64_t
zdist_rpc_server_rejected(const zdist_rpc_server_t *self)
{
    return self->rejected;
}

int
zdist_rpc_server_method_stats(const zdist_rpc_server_t *self, uint32_t method, zdist_rpc_method_stats_t *ret)
{
    const s_method_stats_t *st = NULL;
    for (size_t i = 0; i < self->nmethods; i++)
        if (self->methods[i].method == method)
            st = &self->stats[i];
    if (!st && method == ZDIST_METHOD_PING)
        st = &self->stats[self->nmethods];
    if (!st)
        return -ENOENT;
    ret->requests = st->requests;
    ret->errors = st->errors;
    ret->p50_us = zdist_latency_percentile(st->latency, 0.50);
    ret->p99_us = zdist_latency_percentile(st->latency, 0.99);
    return 0;
}

void
zdist_rpc_server_write_metrics(const zdist_rpc_server_t *self, FILE *out, const char *prefix)
{
    static const struct {
        const char *suffix, *type, *help;
    } fam[] = {
        {"requests_total", "counter", "Requests handled, by method."},
        {"request_errors_total", "counter", "Requests answered with an error status, by method."},
        {"received_bytes_total", "counter", "Request bytes (body and tensors) received, by method."},
        {"sent_bytes_total", "counter", "Reply bytes (body and tensors) sent, by method."},
        {"request_duration_seconds", "histogram", "Time from a request's arrival to its reply, by method."},
    };
    char name[160];
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        snprintf(name, sizeof name, "%s_%s", prefix, fam[f].suffix);
        zdist_prom_family(out, name, fam[f].type, fam[f].help);
        for (size_t i = 0; i <= self->nmethods; i++) {
            const s_method_stats_t *st = &self->stats[i];
            const char *labels[2] = {"method", i < self->nmethods ? self->methods[i].name : "ping"};
            double v = f == 0 ? (double) st->requests
                     : f == 1 ? (double) st->errors
                     : f == 2 ? (double) st->bytes_in
                              : (double) st->bytes_out;
            if (f == 4)
                zdist_prom_histogram_write(out, name, labels, 1, &st->seconds);
            else
                zdist_prom_sample_v(out, name, labels, 1, v);
        }
    }
    snprintf(name, sizeof name, "%s_rejected_requests_total", prefix);
    zdist_prom_family(out, name, "counter", "Requests refused before a handler (malformed, unknown method, limits).");
    zdist_prom_sample_v(out, name, NULL, 0, (double) self->rejected);
    if (self->conns) {
        snprintf(name, sizeof name, "%s_connections", prefix);
        zdist_prom_family(out, name, "gauge", "TCP connections open to the server.");
        zdist_prom_sample_v(out, name, NULL, 0, (double) zhashx_size(self->conns));
        snprintf(name, sizeof name, "%s_refused_connections_total", prefix);
        zdist_prom_family(out, name, "counter", "Connections refused past --max-connections-per-peer.");
        zdist_prom_sample_v(out, name, NULL, 0, (double) self->refused_connections);
    }
    snprintf(name, sizeof name, "%s_uptime_seconds", prefix);
    zdist_prom_family(out, name, "gauge", "Seconds since this process started serving (a drop is a restart).");
    zdist_prom_sample_v(out, name, NULL, 0, (double) (zdist_clock_now_ms() - self->started_ms) / 1000.0);
}

/* ---- calls ---- */

uint32_t
zdist_rpc_call_method(const zdist_rpc_call_t *call)
{
    return zdist_msg_method(call->request);
}

const void *
zdist_rpc_call_body(const zdist_rpc_call_t *call)
{
    return call->body;
}

const zdist_msg_t *
zdist_rpc_call_request(const zdist_rpc_call_t *call)
{
    return call->request;
}

zdist_msg_t *
zdist_rpc_call_reply(zdist_rpc_call_t *call)
{
    return call->reply;
}

int64_t
zdist_rpc_call_remaining_ms(const zdist_rpc_call_t *call)
{
    if (call->deadline_ms == INT64_MAX)
        return INT64_MAX;
    return call->deadline_ms - zdist_clock_now_ms();
}

int
zdist_rpc_call_fail(zdist_rpc_call_t *call, int status, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    zdist_msg_set_status(call->reply, status, "%s", text);
    return zdist_status_to_errno(status);
}

int
zdist_rpc_call_refuse(zdist_rpc_call_t *call, int status, const char *fmt, ...)
{
    char text[3 * ZDIST_ERROR_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    zdist_rpc_server_t *server = call->server;
    if (server->opts.log) {
        char line[sizeof text + 256];
        snprintf(line, sizeof line, "refused method %u from %s: %s: %s", zdist_rpc_call_method(call),
                 zdist_msg_peer(call->request), zdist_status_name(status), text);
        server->opts.log(server->opts.log_state, line);
    }
    return zdist_rpc_call_fail(call, status, "%s", text);
}

static zdist_msg_t *
s_new_reply(zdist_rpc_server_t *server, const zdist_msg_t *request)
{
    zdist_msg_t *reply = zdist_msg_new(zdist_msg_method(request));
    if (!reply)
        return NULL;
    zdist_msg_set_request_id(reply, zdist_msg_request_id(request));
    zdist_msg_set_incarnation(reply, server->incarnation);
    if (zdist_msg_copy_route(reply, request) < 0)
        zdist_msg_destroy(&reply);
    return reply;
}

static void
s_call_free(zdist_rpc_call_t **call_p)
{
    zdist_rpc_call_t *call = *call_p;
    if (!call)
        return;
    if (call->counted) {
        uintptr_t n = (uintptr_t) zhashx_lookup(call->server->in_flight, call->peer_key);
        if (n > 1)
            zhashx_update(call->server->in_flight, call->peer_key, (void *) (n - 1));
        else
            zhashx_delete(call->server->in_flight, call->peer_key);
    }
    zdist_msg_destroy(&call->request);
    zdist_msg_destroy(&call->reply);
    if (call->body && call->body != call->pb) {
        if (call->method && call->method->request->release)
            call->method->request->release(call->body);
        free(call->body);
    }
    if (call->pb)
        protobuf_c_message_free_unpacked(call->pb, NULL);
    free(call);
    *call_p = NULL;
}

static int
s_send_reply(zdist_rpc_server_t *server, zdist_msg_t **reply_p)
{
    const char *peer = zdist_msg_peer(*reply_p);
    char peer_copy[48];
    snprintf(peer_copy, sizeof peer_copy, "%s", peer);
    int rc = zdist_wire_send(server->handle, reply_p, ZMQ_DONTWAIT);
    if (rc < 0)
        s_log(server, "cannot reply to %s: %s, ignoring", peer_copy, zmq_strerror(-rc));
    /* A deferred reply, sent from a timer or another reader: the send may
       have taken the commands that would have made the socket's ZMQ_FD
       readable for requests now waiting. */
    if (server->wake && !server->dispatching) {
        uint32_t events = 0;
        size_t size = sizeof events;
        if (zmq_getsockopt(server->handle, ZMQ_EVENTS, &events, &size) != 0 || (events & ZMQ_POLLIN))
            s_wake(server);
    }
    return rc;
}

zdist_rpc_call_t *
zdist_rpc_call_defer(zdist_rpc_call_t *call)
{
    call->deferred = true;
    return call;
}

static uint64_t
s_msg_bytes(const zdist_msg_t *m)
{
    size_t body = 0;
    if (!m)
        return 0;
    zdist_msg_body(m, &body);
    return (uint64_t) body + zdist_msg_payload_bytes(m);
}

static void
s_account(zdist_rpc_call_t *call)
{
    if (!call->stats)
        return;
    call->stats->requests++;
    if (zdist_msg_status(call->reply) != ZDIST_STATUS_OK)
        call->stats->errors++;
    int64_t us = zdist_clock_now_us() - call->received_us;
    call->stats->latency[zdist_latency_bucket(us)]++;
    zdist_prom_histogram_observe(&call->stats->seconds, (double) us / 1e6);
    call->stats->bytes_in += s_msg_bytes(call->request);
    call->stats->bytes_out += s_msg_bytes(call->reply);
}

int
zdist_rpc_call_finish(zdist_rpc_call_t **call_p)
{
    if (!call_p || !*call_p)
        return -EINVAL;
    zdist_rpc_call_t *call = *call_p;
    s_account(call);
    int rc = s_send_reply(call->server, &call->reply);
    s_call_free(call_p);
    return rc;
}

int
zdist_rpc_call_send_partial(zdist_rpc_call_t *call)
{
    zdist_msg_t *next = s_new_reply(call->server, call->request);
    if (!next)
        return -ENOMEM;
    zdist_msg_set_more(call->reply, true);
    int rc = s_send_reply(call->server, &call->reply);
    call->reply = next;
    return rc;
}

/* ---- dispatch ---- */

static void
s_refuse(zdist_rpc_server_t *self, zdist_msg_t **request_p, int status, const char *reason, bool log)
{
    zdist_msg_t *request = *request_p;
    self->rejected++;
    if (log)
        s_log(self, "refused request %llu (method %u) from %s: %s",
              (unsigned long long) zdist_msg_request_id(request), zdist_msg_method(request),
              *zdist_msg_peer(request) ? zdist_msg_peer(request) : "unknown peer", reason);
    zdist_msg_t *reply = s_new_reply(self, request);
    if (reply) {
        zdist_msg_set_status(reply, status, "%s", reason);
        s_send_reply(self, &reply);
    }
    zdist_msg_destroy(request_p);
}

static void
s_reject(zdist_rpc_server_t *self, zdist_msg_t **request_p, int status, const char *reason)
{
    s_refuse(self, request_p, status, reason, true);
}

/* False (the request answered RESOURCE_EXHAUSTED) on a connection past its
   peer's limit. With CURVE this is where a connection meets its key. */
static bool
s_connection_admitted(zdist_rpc_server_t *self, zdist_msg_t **request_p)
{
    int fd = zdist_msg_source_fd(*request_p);
    char key[16];
    snprintf(key, sizeof key, "%d", fd);
    s_conn_t *conn = fd >= 0 ? zhashx_lookup(self->conns, key) : NULL;
    if (!conn && fd >= 0) { /* accepted after this batch's first look */
        zdist_rpc_server_watch(self);
        conn = zhashx_lookup(self->conns, key);
    }
    if (!conn)
        return true; /* not TCP: not counted */
    const char *user = zdist_msg_user_id(*request_p);
    if (!conn->peer[0] && user && *user)
        snprintf(conn->peer, sizeof conn->peer, "key:%s", user);
    if (conn->counted || !conn->peer[0] || (!conn->closed && s_admit(self, conn)))
        return true;
    char who[192], reason[512];
    s_peer_describe(self, conn->peer, who, sizeof who);
    const s_peer_t *peer = zhashx_lookup(self->peers, conn->peer);
    snprintf(reason, sizeof reason,
             "connection refused: %s holds %zu connections to this %s, the most one peer may "
             "(--max-connections-per-peer %zu); close some, or raise the limit",
             who, peer ? peer->open : 0, self->role, self->opts.max_connections_per_peer);
    s_refuse(self, request_p, ZDIST_STATUS_RESOURCE_EXHAUSTED, reason, false); /* s_admit logged it */
    return false;
}

static int
s_ping(zdist_rpc_server_t *self, zdist_rpc_call_t *call)
{
    Zdist__PingReply r = ZDIST__PING_REPLY__INIT;
    r.role = self->role;
    r.version = (char *) ZDIST_VERSION_STRING;
    r.protocol = ZDIST_PROTOCOL_VERSION;
    r.incarnation = self->incarnation;
    r.uptime_ms = zdist_clock_now_ms() - self->started_ms;
    return zdist_msg_set_body(call->reply, &r.base);
}

/* Unpacks and validates a request body into its typed struct. */
static int
s_decode(const zdist_rpc_body_t *type, const zdist_msg_t *request, zdist_rpc_call_t *call, zdist_error_t *err)
{
    int rc = zdist_msg_unpack_body(request, type->desc, &call->pb, err);
    if (rc < 0)
        return rc;
    if (!type->decode) {
        call->body = call->pb;
        return 0;
    }
    call->body = calloc(1, type->size ? type->size : 1);
    if (!call->body)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    rc = type->decode(call->pb, request, call->body, err);
    if (rc < 0) {
        if (type->release)
            type->release(call->body);
        free(call->body);
        call->body = NULL;
    }
    return rc;
}

static void
s_handle(zdist_rpc_server_t *self, zdist_msg_t *request)
{
    if (self->conns && !s_connection_admitted(self, &request))
        return;
    uint32_t method = zdist_msg_method(request);
    const zdist_rpc_method_t *m = NULL;
    s_method_stats_t *stats = NULL;
    for (size_t i = 0; i < self->nmethods; i++)
        if (self->methods[i].method == method) {
            m = &self->methods[i];
            stats = &self->stats[i];
            break;
        }
    bool builtin_ping = !m && method == ZDIST_METHOD_PING;
    if (!m && !builtin_ping) {
        char reason[128];
        snprintf(reason, sizeof reason, "method %u is not served by %s", method, self->role);
        s_reject(self, &request, ZDIST_STATUS_UNIMPLEMENTED, reason);
        return;
    }
    if (builtin_ping)
        stats = &self->stats[self->nmethods];
    if (m && m->allow && self->opts.keys && !(zdist_keys_role_of(zdist_msg_user_id(request)) & m->allow)) {
        const char *who = zdist_msg_user_id(request);
        char reason[192];
        snprintf(reason, sizeof reason, "%s: key '%s' (%s) may not call it", m->name, who ? who : "(none)",
                 who && zdist_keys_public(self->opts.keys, who) ? zdist_keys_public(self->opts.keys, who) : "no key");
        s_reject(self, &request, ZDIST_STATUS_PERMISSION_DENIED, reason);
        return;
    }
    size_t ntensors = zdist_msg_tensor_count(request);
    uint32_t min_t = m ? m->min_tensors : 0, max_t = m ? m->max_tensors : 0;
    if (ntensors < min_t || ntensors > max_t) {
        char reason[160];
        snprintf(reason, sizeof reason, "%s takes %u to %u tensors, got %zu", m ? m->name : "ping", min_t, max_t,
                 ntensors);
        s_reject(self, &request, ZDIST_STATUS_INVALID_ARGUMENT, reason);
        return;
    }
    /* A peer is its CURVE key (all its connections together), else its connection. */
    char peer_key[S_PEER_KEY_MAX];
    const char *user = zdist_msg_user_id(request);
    if (user && *user)
        snprintf(peer_key, sizeof peer_key, "key:%s", user);
    else
        snprintf(peer_key, sizeof peer_key, "conn:%s", zdist_msg_peer(request));
    uintptr_t peer_calls = (uintptr_t) zhashx_lookup(self->in_flight, peer_key);
    if (self->opts.max_calls_per_peer > 0 && peer_calls >= self->opts.max_calls_per_peer) {
        char reason[256];
        snprintf(reason, sizeof reason,
                 "%s: %zu calls from this peer are already in flight, the most %s takes from one peer "
                 "(--max-calls-per-peer %zu); wait for their replies, or raise the limit",
                 m ? m->name : "ping", (size_t) peer_calls, self->role, self->opts.max_calls_per_peer);
        s_reject(self, &request, ZDIST_STATUS_RESOURCE_EXHAUSTED, reason);
        return;
    }
    zdist_rpc_call_t *call = calloc(1, sizeof *call);
    if (!call) {
        s_reject(self, &request, ZDIST_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    memcpy(call->peer_key, peer_key, sizeof peer_key);
    call->server = self;
    call->request = request;
    call->method = m;
    call->stats = stats;
    call->received_us = zdist_clock_now_us();
    int64_t budget = zdist_msg_deadline_ms(request);
    call->deadline_ms = budget > 0 ? zdist_clock_now_ms() + budget : INT64_MAX;
    call->reply = s_new_reply(self, request);
    if (!call->reply) {
        call->request = NULL;
        s_call_free(&call);
        s_reject(self, &request, ZDIST_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    if (m && m->request) {
        zdist_error_t err = {0};
        if (s_decode(m->request, request, call, &err) < 0) {
            call->request = NULL;
            s_call_free(&call);
            char reason[ZDIST_ERROR_TEXT_MAX + 64];
            snprintf(reason, sizeof reason, "%s: %s", m->name, err.text);
            s_reject(self, &request, ZDIST_STATUS_INVALID_ARGUMENT, reason);
            return;
        }
    }
    int rc = builtin_ping ? s_ping(self, call) : m->handler(call, self->state);
    if (call->deferred && rc == 0) {
        /* The handler owns it now; it counts against its peer until finished. */
        uintptr_t now = (uintptr_t) zhashx_lookup(self->in_flight, call->peer_key);
        zhashx_update(self->in_flight, call->peer_key, (void *) (now + 1));
        call->counted = true;
        return;
    }
    if (rc < 0 && zdist_msg_status(call->reply) == ZDIST_STATUS_OK)
        zdist_msg_set_status(call->reply, zdist_status_from_errno(rc), "%s failed: %s", m ? m->name : "ping",
                             strerror(-rc));
    call->deferred = false;
    zdist_rpc_call_finish(&call);
}

int
zdist_rpc_server_dispatch(zdist_rpc_server_t *self, int max_messages)
{
    /* No server (one whose zdist_rpc_server_new failed, or destroyed): a
       caller's bug, refused rather than dereferenced. */
    if (!self)
        return -EINVAL;
    /* Every request's connection is known before it is read (a request
       from one accepted since still makes s_connection_admitted watch). */
    if (!self->monitor_polled)
        zdist_rpc_server_watch(self);
    self->dispatching = true;
    int handled = 0, rc = 0;
    while (handled < max_messages) {
        zdist_msg_t *request = NULL;
        zdist_error_t err = {0};
        rc = zdist_wire_recv(self->handle, true, &self->opts.limits, ZMQ_DONTWAIT, &request, &err);
        if (rc == -EAGAIN || rc == -EINTR)
            break;
        if (rc == -EPROTO) {
            handled++;
            s_reject(self, &request, ZDIST_STATUS_INVALID_ARGUMENT, err.text);
            continue;
        }
        if (rc < 0)
            break;
        handled++;
        s_handle(self, request);
    }
    self->dispatching = false;
    bool failed = rc < 0 && rc != -EAGAIN && rc != -EINTR && rc != -EPROTO;
    /* Only a read that found the socket empty leaves its ZMQ_FD to
       signal the next request. */
    if (rc != -EAGAIN && !failed)
        s_wake(self);
    return failed && !handled ? rc : handled;
}
