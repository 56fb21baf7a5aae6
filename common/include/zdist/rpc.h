/* zdist RPC over ZeroMQ: a ROUTER server with a method table, a DEALER client
   with many calls in flight, deadlines, heartbeats and incarnation ids.

   Server: one thread owns it. It binds one ROUTER socket; the owner polls
   zdist_rpc_server_socket() (zmq_poll or a zloop poller) and calls
   zdist_rpc_server_dispatch() when it is readable. Every request is checked
   (wire limits, version, frame count, payload lengths, known method, body
   decode, tensor count) before its handler runs; a bad one is answered
   INVALID_ARGUMENT (or UNIMPLEMENTED) and logged, and the server keeps
   serving. Every reply carries the server's incarnation id. Method 1 (PING)
   is answered by the server itself unless the table overrides it.

   Client: one thread owns it. Calls are pipelined: send any number (up to
   max_in_flight), then receive replies in any order. A call that gets no
   reply by its deadline completes with DEADLINE_EXCEEDED; calls in flight
   when the connection drops complete with UNAVAILABLE. Replies carry the
   server's incarnation: a change means the peer restarted. */
#ifndef ZDIST_RPC_H
#define ZDIST_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "zdist/auth.h"
#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZDIST_METHOD_PING 1

/* ---- server ---- */

typedef struct zdist_rpc_server_t zdist_rpc_server_t;
typedef struct zdist_rpc_call_t zdist_rpc_call_t;

/* Runs a request. Fill the reply through zdist_rpc_call_reply() and return 0
   (sent with status OK unless set), or return a negative errno / the result
   of zdist_rpc_call_fail(). To answer later, take the call with
   zdist_rpc_call_defer() and return 0. */
typedef int(zdist_rpc_handler_fn)(zdist_rpc_call_t *call, void *state);

/* A request body type: how a method's body decodes into a typed, validated
   C struct. Opaque; libzdist defines one per method of each service
   (zdist/ps_client.h, zdist/worker_client.h, zdist/coord_client.h name them
   zdist_<service>_body_<method>). A body that does not decode or whose
   values are invalid is answered INVALID_ARGUMENT before any handler runs. */
typedef struct zdist_rpc_body_t zdist_rpc_body_t;

typedef struct {
    uint32_t method;
    const char *name;
    const zdist_rpc_body_t *request; /* body type; NULL: no body expected */
    zdist_rpc_handler_fn *handler;
    uint32_t min_tensors;
    uint32_t max_tensors;
    unsigned allow; /* ZDIST_ROLE_* a CURVE peer needs; 0: everyone. Others
                       get PERMISSION_DENIED before the body is decoded. */
} zdist_rpc_method_t;

/* Log hook for events the server decides on (refused messages). */
typedef void(zdist_rpc_log_fn)(void *log_state, const char *line);

typedef struct {
    const char *role;            /* reported by PING, e.g. "ps" */
    zdist_wire_limits_t limits;  /* what a peer may send */
    int64_t heartbeat_ivl_ms;    /* ZMTP heartbeats; 0 disables */
    int64_t heartbeat_timeout_ms;
    int rcvhwm;                  /* queued incoming messages before TCP pushes back */
    int sndhwm;                  /* queued replies per peer before they are dropped */
    zdist_rpc_log_fn *log;
    void *log_state;
    zdist_keys_t *keys;          /* CURVE server with keys' own certificate;
                                    NULL: plain. Default: zdist_keys_process() */
    size_t max_calls_per_peer;   /* deferred calls (answered later) in flight
                                    from one peer — its CURVE key, else its
                                    connection; one more is answered
                                    RESOURCE_EXHAUSTED naming the limit and
                                    --max-calls-per-peer. 0: no limit.
                                    Default ZDIST_RPC_MAX_CALLS_PER_PEER */
    size_t max_connections_per_peer; /* TCP connections one peer may hold
                                    open — its CURVE key, else its source
                                    address; one more is refused naming
                                    --max-connections-per-peer (see
                                    zdist_rpc_server_watch). 0: no limit.
                                    Default ZDIST_RPC_MAX_CONNECTIONS_PER_PEER */
} zdist_rpc_server_options_t;

/* The default of max_calls_per_peer. Handlers that answer at once never
   count: the server runs them one at a time, so a peer has at most one of
   those in a handler, and the socket's rcvhwm bounds what waits. */
#define ZDIST_RPC_MAX_CALLS_PER_PEER 256
/* The default of max_connections_per_peer: a daemon or client holds one
   connection per server it talks to (a worker one per psd and job), so 64
   is far above a well-behaved peer and far below the descriptors a daemon
   has. */
#define ZDIST_RPC_MAX_CONNECTIONS_PER_PEER 64

ZDIST_EXPORT void zdist_rpc_server_options_default(zdist_rpc_server_options_t *opts);

/* Binds endpoint ("tcp://127.0.0.1:5000", "tcp://127.0.0.1:*" for a free
   port). The table is borrowed and must outlive the server; state is passed
   to handlers. NULL on failure with err filled (e.g. address in use). */
ZDIST_EXPORT zdist_rpc_server_t *zdist_rpc_server_new(const char *endpoint, const zdist_rpc_method_t *methods,
                                                      size_t nmethods, void *state,
                                                      const zdist_rpc_server_options_t *opts, zdist_error_t *err);
ZDIST_EXPORT void zdist_rpc_server_destroy(zdist_rpc_server_t **self_p);
/* Raw libzmq socket to poll for ZMQ_POLLIN; NULL for a NULL server. */
ZDIST_EXPORT void *zdist_rpc_server_socket(zdist_rpc_server_t *self);
/* The bound endpoint with the real port, e.g. "tcp://127.0.0.1:40411". */
ZDIST_EXPORT const char *zdist_rpc_server_endpoint(const zdist_rpc_server_t *self);
ZDIST_EXPORT uint64_t zdist_rpc_server_incarnation(const zdist_rpc_server_t *self);
/* Handles up to max_messages waiting requests without blocking. Returns how
   many were handled, or a negative errno when the socket failed; -EINVAL,
   touching nothing, for a NULL server (one that failed to bind, or was
   destroyed). */
ZDIST_EXPORT int zdist_rpc_server_dispatch(zdist_rpc_server_t *self, int max_messages);
/* Requests refused before reaching a handler (malformed, unknown method...). */
ZDIST_EXPORT uint64_t zdist_rpc_server_rejected(const zdist_rpc_server_t *self);
/* The connection limit's socket monitor (a raw libzmq socket to poll for
   ZMQ_POLLIN alongside zdist_rpc_server_socket, or by its ZMQ_FD; NULL
   without a limit), and what to call when it is readable: it takes the
   connections accepted and closed since, and closes at once a plain
   connection past its source address's limit. It reads the monitor until
   it is empty, so its ZMQ_FD signals the next event. dispatch calls it
   too, before reading requests, unless told the monitor is polled. */
ZDIST_EXPORT void *zdist_rpc_server_monitor_socket(zdist_rpc_server_t *self);
ZDIST_EXPORT void zdist_rpc_server_watch(zdist_rpc_server_t *self);
/* true: the caller's loop polls the monitor and calls watch when it is
   readable, before dispatch in the same wake-up (zdist_daemon_serve does),
   so dispatch no longer reads the monitor first: a poll and a getpid less
   per dispatch. A request from a connection accepted since the last watch
   still makes dispatch watch. */
ZDIST_EXPORT void zdist_rpc_server_set_monitor_polled(zdist_rpc_server_t *self, bool polled);
/* For a loop that polls zdist_rpc_server_socket by its ZMQ_FD, which is
   edge-triggered: `wake` (NULL: none) is called when requests may be
   waiting that the descriptor will not signal, and the loop should call
   dispatch again without waiting for it: dispatch stopped at its
   max_messages (or was interrupted) before the socket was empty, or a
   reply sent outside dispatch (a deferred call finished from a timer or
   another reader) found requests waiting. */
typedef void(zdist_rpc_server_wake_fn)(void *arg);
ZDIST_EXPORT void zdist_rpc_server_set_wake(zdist_rpc_server_t *self, zdist_rpc_server_wake_fn *wake, void *arg);
/* Connections refused by max_connections_per_peer so far. */
ZDIST_EXPORT uint64_t zdist_rpc_server_refused_connections(const zdist_rpc_server_t *self);

/* Per-method counters: requests handled and latency percentiles of the
   handler in microseconds (0 when none). -ENOENT for an unknown method. */
typedef struct {
    uint64_t requests;
    uint64_t errors;
    int64_t p50_us;
    int64_t p99_us;
} zdist_rpc_method_stats_t;
ZDIST_EXPORT int zdist_rpc_server_method_stats(const zdist_rpc_server_t *self, uint32_t method,
                                               zdist_rpc_method_stats_t *ret_stats);
/* The server's counters in Prometheus text format (zdist/prom.h), each
   family named PREFIX_...: requests_total, request_errors_total,
   received_bytes_total, sent_bytes_total and the request_duration_seconds
   histogram, labelled {method="pull"} (PING as "ping"); then
   rejected_requests_total, with a connection limit connections (open now)
   and refused_connections_total, and uptime_seconds. */
ZDIST_EXPORT void zdist_rpc_server_write_metrics(const zdist_rpc_server_t *self, FILE *out, const char *prefix);

/* In a handler: */
ZDIST_EXPORT uint32_t zdist_rpc_call_method(const zdist_rpc_call_t *call);
/* The decoded, validated body: the typed struct of the table's body type
   (see its declaration); NULL without one. Borrowed like the request. */
ZDIST_EXPORT const void *zdist_rpc_call_body(const zdist_rpc_call_t *call);
/* The request: tensors, client id... Borrowed for the handler's duration
   (or until zdist_rpc_call_finish for a deferred call). */
ZDIST_EXPORT const zdist_msg_t *zdist_rpc_call_request(const zdist_rpc_call_t *call);
/* The reply being built: set its body and add tensors. */
ZDIST_EXPORT zdist_msg_t *zdist_rpc_call_reply(zdist_rpc_call_t *call);
/* Milliseconds left before the caller gives up; INT64_MAX without a deadline. */
ZDIST_EXPORT int64_t zdist_rpc_call_remaining_ms(const zdist_rpc_call_t *call);
/* Sets the reply's status and message; returns the matching negative errno
   so a handler can `return zdist_rpc_call_fail (call, ...)`. */
ZDIST_EXPORT int zdist_rpc_call_fail(zdist_rpc_call_t *call, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A handler's refusal: zdist_rpc_call_fail, and one line through the
   server's log hook ("refused method M from PEER: STATUS: text"), so that
   every daemon words its refusals alike. Returns as zdist_rpc_call_fail. */
ZDIST_EXPORT int zdist_rpc_call_refuse(zdist_rpc_call_t *call, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Takes the call out of the handler: no reply is sent when it returns 0.
   The caller owns the call and ends it with zdist_rpc_call_finish. Only the
   server's thread may finish it, and only while the server exists. A handler
   that defers and then cannot hand the call on returns its error instead
   (never finishes it itself): the server answers the call with it. */
ZDIST_EXPORT zdist_rpc_call_t *zdist_rpc_call_defer(zdist_rpc_call_t *call);
/* Sends the reply of a deferred call and destroys it. */
ZDIST_EXPORT int zdist_rpc_call_finish(zdist_rpc_call_t **call_p);
/* Streams: sends the reply built so far marked `more`, and starts a new one. */
ZDIST_EXPORT int zdist_rpc_call_send_partial(zdist_rpc_call_t *call);

/* ---- client ---- */

typedef struct zdist_rpc_client_t zdist_rpc_client_t;

typedef struct {
    zdist_wire_limits_t limits;  /* what the server may send back */
    int64_t heartbeat_ivl_ms;    /* 0 disables */
    int64_t heartbeat_timeout_ms;
    size_t max_in_flight;        /* send refuses beyond this (-EBUSY) */
    uint64_t client_id;          /* 0: random; identifies writes for exactly-once */
    const zdist_keys_t *keys;    /* CURVE client; NULL: plain. Default: zdist_keys_process() */
    const char *server_name;     /* the server's certificate ("ps-0"); NULL: the
                                    name keys learned for the endpoint */
} zdist_rpc_client_options_t;

ZDIST_EXPORT void zdist_rpc_client_options_default(zdist_rpc_client_options_t *opts);

/* Connects (asynchronously: the server may come up later). NULL on a bad
   endpoint with err filled. */
ZDIST_EXPORT zdist_rpc_client_t *zdist_rpc_client_new(const char *endpoint, const zdist_rpc_client_options_t *opts,
                                                      zdist_error_t *err);
ZDIST_EXPORT void zdist_rpc_client_destroy(zdist_rpc_client_t **self_p);

/* Sends *request_p (destroyed, also on failure) with a deadline of
   timeout_ms from now (<= 0: none). Writes the request id. -EBUSY when
   max_in_flight calls are pending. */
ZDIST_EXPORT int zdist_rpc_client_send(zdist_rpc_client_t *self, zdist_msg_t **request_p, int64_t timeout_ms,
                                       uint64_t *ret_id);
/* Next completed call, waiting up to wait_ms (-1 forever, 0 poll): a reply
   from the server, or one made here with DEADLINE_EXCEEDED / UNAVAILABLE.
   Match it with zdist_msg_request_id; check zdist_msg_status. Returns 0,
   -EAGAIN when nothing completed in time, -EINTR. The reply is the caller's. */
ZDIST_EXPORT int zdist_rpc_client_recv(zdist_rpc_client_t *self, int64_t wait_ms, zdist_msg_t **ret_reply);
/* The completion of call `id` (from zdist_rpc_client_send), waiting up to
   wait_ms (-1: until its deadline at the latest); other completions stay
   queued for zdist_rpc_client_recv. Returns 0 with *ret_reply (the
   caller's), -EAGAIN, -EINTR, or -ENOENT when no such call is pending. */
ZDIST_EXPORT int zdist_rpc_client_recv_id(zdist_rpc_client_t *self, uint64_t id, int64_t wait_ms,
                                          zdist_msg_t **ret_reply);
/* Sends and waits for that call's completion; other completions arriving
   meanwhile are kept for zdist_rpc_client_recv. Returns 0 with *ret_reply
   (whose status may be an error), or a negative errno from sending. */
ZDIST_EXPORT int zdist_rpc_client_call(zdist_rpc_client_t *self, zdist_msg_t **request_p, int64_t timeout_ms,
                                       zdist_msg_t **ret_reply);
/* Waits for many clients in one zmq_poll: until one of them has a
   completion to take (a reply, or a call past its deadline or lost with
   its connection), `also` (a raw libzmq socket, e.g. an actor's pipe;
   NULL: none) is readable, or wait_ms (-1: no limit) passes. Returns how
   many clients have a completion ready (0 on time out or when only `also`
   woke it), or a negative errno (-EINTR). NULL entries are skipped. */
ZDIST_EXPORT int zdist_rpc_client_wait_any(zdist_rpc_client_t *const *clients, size_t n, void *also,
                                           int64_t wait_ms);
ZDIST_EXPORT size_t zdist_rpc_client_in_flight(const zdist_rpc_client_t *self);
ZDIST_EXPORT const char *zdist_rpc_client_endpoint(const zdist_rpc_client_t *self);
ZDIST_EXPORT uint64_t zdist_rpc_client_id(const zdist_rpc_client_t *self);
/* The server's incarnation from the latest reply (0 before any). */
ZDIST_EXPORT uint64_t zdist_rpc_client_peer_incarnation(const zdist_rpc_client_t *self);
/* How many times the incarnation changed: the peer restarted. */
ZDIST_EXPORT unsigned zdist_rpc_client_peer_restarts(const zdist_rpc_client_t *self);
/* True while a connection to the peer is up (from the socket monitor). */
ZDIST_EXPORT bool zdist_rpc_client_connected(zdist_rpc_client_t *self);
/* Replies that came after their call had completed (late or unknown ids). */
ZDIST_EXPORT uint64_t zdist_rpc_client_dropped(const zdist_rpc_client_t *self);
/* The peer did not answer a call (down, restarting or cut off) rather
   than refusing it: rc, a call's negative errno, maps to DEADLINE_EXCEEDED
   or UNAVAILABLE (-ETIMEDOUT, -ENOTCONN, -ECONNREFUSED, -EHOSTUNREACH,
   -ECONNRESET). Such a peer is worth asking again later; a refusal is not. */
ZDIST_EXPORT bool zdist_rpc_unreachable(int rc);

/* PING (method 1, answered by every zdist server): send
   zdist_msg_new (ZDIST_METHOD_PING) as it is, and read a reply whose
   status is OK into *ret (written only on success). -EPROTO with err when
   it does not decode or a string is longer than its field. */
typedef struct {
    char role[32];    /* "ps", "worker", "chief", ... */
    char version[32]; /* the server's software version */
    uint32_t protocol;
    uint64_t incarnation;
    int64_t uptime_ms;
} zdist_rpc_ping_t;
ZDIST_EXPORT int zdist_rpc_ping_read(const zdist_msg_t *reply, zdist_rpc_ping_t *ret, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
