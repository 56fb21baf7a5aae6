/* zdist RPC client: DEALER socket, pipelined calls, deadlines, peer tracking. */
#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.pb-c.h"
#include "wire/body.h"
#include "wire/monitor.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

/* A request id carries the slot of its call in its low bits, so a reply
   finds its call without a search; the high bits make ids unique over time. */
#define S_SLOT_BITS 24
#define S_SLOT_MASK ((UINT64_C(1) << S_SLOT_BITS) - 1)

typedef struct {
    uint64_t id; /* 0 when free */
    uint32_t method;
    int64_t deadline_ms; /* absolute; INT64_MAX for none */
    size_t heap_pos;
} s_flight_t;

typedef struct s_done_t {
    zdist_msg_t *reply;
    struct s_done_t *next;
} s_done_t;

/* A handshake failing this soon after the connect is the server's refusal
   (libzmq's own handshake deadline, ZMQ_HANDSHAKE_IVL, is 30 s). */
#define S_REFUSED_AT_ONCE_MS 5000

struct zdist_rpc_client_t {
    zsock_t *sock;
    void *handle;
    zsock_t *monitor; /* PAIR receiving socket events */
    char endpoint[256];
    zdist_rpc_client_options_t opts;
    uint64_t client_id;
    uint64_t next_seq;

    s_flight_t *slots;
    size_t nslots;
    size_t *free_slots; /* stack of free slot indices */
    size_t nfree;
    size_t *heap; /* slot indices ordered by deadline */
    size_t nheap;

    s_done_t *done_head, *done_tail; /* completions not yet received */

    bool connected;
    int handshakes_failed; /* NO_DETAIL failures since the last handshake that succeeded */
    bool handshaken;       /* this connection's handshake succeeded (its calls may have left) */
    int64_t connected_ms;  /* when CONNECTED was read (0: not yet) */
    uint64_t peer_incarnation;
    unsigned restarts;
    uint64_t dropped;
};

void
zdist_rpc_client_options_default(zdist_rpc_client_options_t *opts)
{
    memset(opts, 0, sizeof *opts);
    zdist_wire_limits_default(&opts->limits);
    opts->heartbeat_ivl_ms = 1000;
    opts->heartbeat_timeout_ms = 5000;
    opts->max_in_flight = 100000;
    opts->keys = zdist_keys_process();
}

void
zdist_rpc_client_destroy(zdist_rpc_client_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_rpc_client_t *self = *self_p;
    while (self->done_head) {
        s_done_t *d = self->done_head;
        self->done_head = d->next;
        zdist_msg_destroy(&d->reply);
        free(d);
    }
    if (self->monitor) /* before the socket: monitor.h */
        zdist_monitor_close(self->sock ? zsock_resolve(self->sock) : NULL, &self->monitor);
    zsock_destroy(&self->sock);
    free(self->slots);
    free(self->free_slots);
    free(self->heap);
    free(self);
    *self_p = NULL;
}

zdist_rpc_client_t *
zdist_rpc_client_new(const char *endpoint, const zdist_rpc_client_options_t *opts, zdist_error_t *err)
{
    zdist_rpc_client_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    if (opts)
        self->opts = *opts;
    else
        zdist_rpc_client_options_default(&self->opts);
    if (self->opts.max_in_flight == 0 || self->opts.max_in_flight > S_SLOT_MASK)
        self->opts.max_in_flight = S_SLOT_MASK;
    self->client_id = self->opts.client_id ? self->opts.client_id : zdist_random_u64();
    snprintf(self->endpoint, sizeof self->endpoint, "%s", endpoint);
    self->sock = zsock_new(ZMQ_DEALER);
    if (!self->sock) {
        zdist_error_set(err, -ENOMEM, "cannot create a socket");
        zdist_rpc_client_destroy(&self);
        return NULL;
    }
    self->handle = zsock_resolve(self->sock);
    zsock_set_linger(self->sock, 0);
    /* Calls are bounded by max_in_flight, not by the socket: a send must
       never block past its deadline while the peer is away. */
    zsock_set_sndhwm(self->sock, 0);
    zsock_set_rcvhwm(self->sock, 0);
    int64_t maxmsg = (int64_t) self->opts.limits.max_message_bytes;
    zmq_setsockopt(self->handle, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (self->opts.heartbeat_ivl_ms > 0) {
        zsock_set_heartbeat_ivl(self->sock, (int) self->opts.heartbeat_ivl_ms);
        zsock_set_heartbeat_timeout(self->sock, (int) self->opts.heartbeat_timeout_ms);
        zsock_set_heartbeat_ttl(self->sock, (int) self->opts.heartbeat_timeout_ms);
    }
    /* Reconnect quickly after a restart of the peer. */
    zsock_set_reconnect_ivl(self->sock, 100);
    zsock_set_reconnect_ivl_max(self->sock, 1000);
    if (self->opts.keys) {
        const char *server = self->opts.server_name ? self->opts.server_name
                                                    : zdist_keys_name_at(self->opts.keys, endpoint);
        if (zdist_keys_apply_client(self->opts.keys, self->handle, server, err) < 0) {
            zdist_rpc_client_destroy(&self);
            return NULL;
        }
    }

    char what[300];
    snprintf(what, sizeof what, "the connection to '%s'", endpoint);
    self->monitor = zdist_monitor_open(self->handle,
                                       ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED |
                                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED,
                                       what, err);
    if (!self->monitor) {
        zdist_rpc_client_destroy(&self);
        return NULL;
    }
    if (zmq_connect(self->handle, endpoint) != 0) {
        zdist_error_set(err, -EINVAL, "cannot connect to '%s': %s", endpoint, zmq_strerror(errno));
        zdist_rpc_client_destroy(&self);
        return NULL;
    }
    return self;
}

const char *
zdist_rpc_client_endpoint(const zdist_rpc_client_t *self)
{
    return self->endpoint;
}

uint64_t
zdist_rpc_client_id(const zdist_rpc_client_t *self)
{
    return self->client_id;
}

size_t
zdist_rpc_client_in_flight(const zdist_rpc_client_t *self)
{
    return self->nslots - self->nfree;
}

uint64_t
zdist_rpc_client_peer_incarnation(const zdist_rpc_client_t *self)
{
    return self->peer_incarnation;
}

unsigned
zdist_rpc_client_peer_restarts(const zdist_rpc_client_t *self)
{
    return self->restarts;
}

uint64_t
zdist_rpc_client_dropped(const zdist_rpc_client_t *self)
{
    return self->dropped;
}

/* ---- deadline heap ---- */

static void
s_heap_swap(zdist_rpc_client_t *self, size_t a, size_t b)
{
    size_t t = self->heap[a];
    self->heap[a] = self->heap[b];
    self->heap[b] = t;
    self->slots[self->heap[a]].heap_pos = a;
    self->slots[self->heap[b]].heap_pos = b;
}

static int64_t
s_heap_key(zdist_rpc_client_t *self, size_t pos)
{
    return self->slots[self->heap[pos]].deadline_ms;
}

static void
s_heap_up(zdist_rpc_client_t *self, size_t pos)
{
    while (pos > 0) {
        size_t parent = (pos - 1) / 2;
        if (s_heap_key(self, parent) <= s_heap_key(self, pos))
            break;
        s_heap_swap(self, parent, pos);
        pos = parent;
    }
}

static void
s_heap_down(zdist_rpc_client_t *self, size_t pos)
{
    while (1) {
        size_t l = 2 * pos + 1, r = l + 1, min = pos;
        if (l < self->nheap && s_heap_key(self, l) < s_heap_key(self, min))
            min = l;
        if (r < self->nheap && s_heap_key(self, r) < s_heap_key(self, min))
            min = r;
        if (min == pos)
            break;
        s_heap_swap(self, pos, min);
        pos = min;
    }
}

static void
s_heap_remove(zdist_rpc_client_t *self, size_t pos)
{
    size_t last = self->nheap - 1;
    if (pos != last) {
        s_heap_swap(self, pos, last);
        self->nheap--;
        s_heap_down(self, pos);
        s_heap_up(self, pos);
    } else {
        self->nheap--;
    }
}

static int
s_grow_slots(zdist_rpc_client_t *self)
{
    size_t n = self->nslots ? self->nslots * 2 : 64;
    if (n > S_SLOT_MASK + 1)
        n = S_SLOT_MASK + 1;
    if (n <= self->nslots)
        return -EBUSY;
    s_flight_t *slots = realloc(self->slots, n * sizeof *slots);
    if (!slots)
        return -ENOMEM;
    self->slots = slots;
    size_t *fs = realloc(self->free_slots, n * sizeof *fs);
    if (!fs)
        return -ENOMEM;
    self->free_slots = fs;
    size_t *heap = realloc(self->heap, n * sizeof *heap);
    if (!heap)
        return -ENOMEM;
    self->heap = heap;
    /* Push new slots so the lowest index is used first. */
    for (size_t i = n; i > self->nslots; i--) {
        memset(&self->slots[i - 1], 0, sizeof self->slots[0]);
        self->free_slots[self->nfree++] = i - 1;
    }
    self->nslots = n;
    return 0;
}

static void
s_release(zdist_rpc_client_t *self, size_t slot)
{
    s_heap_remove(self, self->slots[slot].heap_pos);
    self->slots[slot].id = 0;
    self->free_slots[self->nfree++] = slot;
}

/* ---- completions ---- */

static void
s_complete(zdist_rpc_client_t *self, zdist_msg_t *reply)
{
    s_done_t *d = malloc(sizeof *d);
    if (!d) {
        zdist_msg_destroy(&reply);
        self->dropped++;
        return;
    }
    d->reply = reply;
    d->next = NULL;
    if (self->done_tail)
        self->done_tail->next = d;
    else
        self->done_head = d;
    self->done_tail = d;
}

static zdist_msg_t *
s_pop_done(zdist_rpc_client_t *self, uint64_t want_id)
{
    s_done_t *prev = NULL;
    for (s_done_t *d = self->done_head; d; prev = d, d = d->next) {
        if (want_id && zdist_msg_request_id(d->reply) != want_id)
            continue;
        if (prev)
            prev->next = d->next;
        else
            self->done_head = d->next;
        if (self->done_tail == d)
            self->done_tail = prev;
        zdist_msg_t *reply = d->reply;
        free(d);
        return reply;
    }
    return NULL;
}

/* Completes a call here with status and message (no reply came). */
static void
s_fail_slot(zdist_rpc_client_t *self, size_t slot, int status, const char *why)
{
    s_flight_t *f = &self->slots[slot];
    zdist_msg_t *reply = zdist_msg_new(f->method);
    if (reply) {
        zdist_msg_set_request_id(reply, f->id);
        zdist_msg_set_status(reply, status, "%s (method %u, %s)", why, f->method, self->endpoint);
        s_complete(self, reply);
    }
    s_release(self, slot);
}

static void
s_expire(zdist_rpc_client_t *self, int64_t now)
{
    while (self->nheap > 0 && s_heap_key(self, 0) <= now)
        s_fail_slot(self, self->heap[0], ZDIST_STATUS_DEADLINE_EXCEEDED, "no reply before the deadline");
}

/* A failed security handshake, in words an operator can act on: the calls
   in flight end UNAUTHENTICATED at once instead of at their deadline. */
static void
s_handshake_failed(zdist_rpc_client_t *self, uint16_t event, uint32_t value)
{
    char why[768];
    const zdist_keys_t *keys = self->opts.keys;
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        snprintf(why, sizeof why,
                 "the server at %s refused the key '%s' (ZAP status %u): its public key %s.key is not in its key "
                 "directory; the operator adds it there, or use a key that is",
                 self->endpoint, keys ? zdist_keys_self_name(keys) : "?", value,
                 keys ? zdist_keys_self_name(keys) : "NAME");
    else if (!keys)
        snprintf(why, sizeof why,
                 "security handshake with %s failed (%s) twice, at once: it speaks CURVE and this process has no "
                 "keys; give --keys DIR (or ZDIST_KEYS_DIR) and --key NAME (or it shuts this address out past its "
                 "--max-connections-per-peer: this host holds too many connections to it)", self->endpoint,
                 event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "mechanism mismatch" : "no detail");
    else
        snprintf(why, sizeof why,
                 "CURVE handshake with %s failed (%s, code 0x%x): it serves without keys, or not as the "
                 "certificate this client expects (%s); check --keys on both sides", self->endpoint,
                 event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "protocol error" : "no detail", value,
                 self->opts.server_name ? self->opts.server_name
                                        : zdist_keys_name_at(keys, self->endpoint) ? zdist_keys_name_at(keys, self->endpoint)
                                                                                  : "unknown");
    while (self->nheap > 0)
        s_fail_slot(self, self->heap[0], ZDIST_STATUS_UNAUTHENTICATED, why);
}

static void
s_read_monitor(zdist_rpc_client_t *self)
{
    while (1) {
        zmq_msg_t ev;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, zsock_resolve(self->monitor), ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t event = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&ev) >= 2)
            memcpy(&event, zmq_msg_data(&ev), 2);
        if (zmq_msg_size(&ev) >= 6)
            memcpy(&value, (const uint8_t *) zmq_msg_data(&ev) + 2, 4);
        zmq_msg_close(&ev);
        /* The second frame holds the address. */
        zmq_msg_t addr;
        zmq_msg_init(&addr);
        zmq_msg_recv(&addr, zsock_resolve(self->monitor), 0);
        zmq_msg_close(&addr);
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            /* A connection lost or timed out before the handshake ended (a
               peer frozen, killed or cut off as it was connected) says this
               too, once: only a second in a row, with no handshake done
               between, is the security handshake failing. The first is a
               lost connection (DISCONNECTED follows) — unless it came at
               once after the connect: a server refusing our mechanism (no
               keys against CURVE) closes within a round trip, a frozen
               peer is only given up at libzmq's handshake deadline (30 s). */
            /* Only a second one in a row, at once too, is a refusal: a peer
               dying (killed as we connected: at once, but then the port is
               closed or it is back and answers) or frozen (30 s) is not. */
            bool at_once = self->connected_ms > 0 && zdist_clock_now_ms() - self->connected_ms < S_REFUSED_AT_ONCE_MS;
            if (++self->handshakes_failed >= 2 && at_once)
                s_handshake_failed(self, event, value);
        } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
            s_handshake_failed(self, event, value);
        } else if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            self->handshakes_failed = 0;
            self->handshaken = true;
        } else if (event == ZMQ_EVENT_CONNECTED) {
            self->connected = true;
            self->handshaken = false;
            self->connected_ms = zdist_clock_now_ms();
        } else if (event == ZMQ_EVENT_DISCONNECTED) {
            self->connected = false;
            /* Before a handshake nothing left: the calls wait in the pipe
               for the reconnect (UNAVAILABLE would send the caller after a
               peer that is only restarting), up to their deadlines. */
            if (!self->handshaken)
                continue;
            self->handshaken = false;
            /* Whatever was in flight may never be answered: the caller
               retries (writes carry client id + sequence). */
            while (self->nheap > 0)
                s_fail_slot(self, self->heap[0], ZDIST_STATUS_UNAVAILABLE, "connection lost");
        }
    }
}

bool
zdist_rpc_client_connected(zdist_rpc_client_t *self)
{
    s_read_monitor(self);
    return self->connected;
}

static bool
s_in_flight(const zdist_rpc_client_t *self, uint64_t id)
{
    size_t slot = (size_t) (id & S_SLOT_MASK);
    return id && slot < self->nslots && self->slots[slot].id == id;
}

/* Reads the replies waiting on the socket without blocking: all of them,
   or up to the one the caller waits for (want_id; the rest stay readable
   for the next poll, which costs no more than the recv that would find
   the socket empty). */
static int
s_read_replies(zdist_rpc_client_t *self, uint64_t want_id)
{
    while (1) {
        zdist_msg_t *reply = NULL;
        zdist_error_t err = {0};
        int rc = zdist_wire_recv(self->handle, false, &self->opts.limits, ZMQ_DONTWAIT, &reply, &err);
        if (rc == -EAGAIN || rc == -EINTR)
            return 0;
        if (rc < 0 && rc != -EPROTO)
            return rc;
        uint64_t id = zdist_msg_request_id(reply);
        size_t slot = (size_t) (id & S_SLOT_MASK);
        if (!s_in_flight(self, id)) {
            self->dropped++;
            zdist_msg_destroy(&reply);
            continue;
        }
        if (rc == -EPROTO)
            zdist_msg_set_status(reply, ZDIST_STATUS_INTERNAL, "malformed reply: %s", err.text);
        uint64_t inc = zdist_msg_incarnation(reply);
        if (inc) {
            if (self->peer_incarnation && inc != self->peer_incarnation)
                self->restarts++;
            self->peer_incarnation = inc;
        }
        /* A stream's partial replies keep the call open. */
        if (!(rc == 0 && zdist_msg_more(reply)))
            s_release(self, slot);
        s_complete(self, reply);
        if (want_id && id == want_id)
            return 0;
    }
}

int
zdist_rpc_client_send(zdist_rpc_client_t *self, zdist_msg_t **request_p, int64_t timeout_ms, uint64_t *ret_id)
{
    zdist_msg_t *req = *request_p;
    if (zdist_rpc_client_in_flight(self) >= self->opts.max_in_flight) {
        zdist_msg_destroy(request_p);
        return -EBUSY;
    }
    if (self->nfree == 0) {
        int rc = s_grow_slots(self);
        if (rc < 0) {
            zdist_msg_destroy(request_p);
            return rc;
        }
    }
    size_t slot = self->free_slots[--self->nfree];
    uint64_t id = (++self->next_seq << S_SLOT_BITS) | slot;
    s_flight_t *f = &self->slots[slot];
    f->id = id;
    f->method = zdist_msg_method(req);
    f->deadline_ms = timeout_ms > 0 ? zdist_clock_now_ms() + timeout_ms : INT64_MAX;
    f->heap_pos = self->nheap;
    self->heap[self->nheap++] = slot;
    s_heap_up(self, f->heap_pos);

    zdist_msg_set_request_id(req, id);
    zdist_msg_set_client_id(req, self->client_id);
    zdist_msg_set_deadline_ms(req, timeout_ms > 0 ? timeout_ms : 0);
    int rc = zdist_wire_send(self->handle, request_p, ZMQ_DONTWAIT);
    if (rc < 0) {
        s_release(self, slot);
        return rc;
    }
    if (ret_id)
        *ret_id = id;
    return 0;
}

/* Waits until something may have completed, at most until `until` (absolute
   ms, INT64_MAX forever; now: just looks) or the earliest deadline. One
   poll; the monitor is read only when it has events. */
static int
s_wait(zdist_rpc_client_t *self, int64_t until, uint64_t want_id)
{
    int64_t now = zdist_clock_now_ms();
    int64_t wake = until;
    if (self->nheap > 0 && s_heap_key(self, 0) < wake)
        wake = s_heap_key(self, 0);
    long timeout = wake == INT64_MAX ? -1 : (long) (wake > now ? wake - now : 0);
    zmq_pollitem_t items[2] = {
        {self->handle, 0, ZMQ_POLLIN, 0},
        {zsock_resolve(self->monitor), 0, ZMQ_POLLIN, 0},
    };
    int n = zmq_poll(items, 2, timeout);
    if (n < 0)
        return -errno;
    if (items[1].revents & ZMQ_POLLIN)
        s_read_monitor(self);
    if (items[0].revents & ZMQ_POLLIN) {
        int rc = s_read_replies(self, want_id);
        if (rc < 0)
            return rc;
    }
    s_expire(self, zdist_clock_now_ms());
    return 0;
}

/* Picks up what already arrived (replies, connection events, expired
   deadlines) without blocking. */
static int
s_collect(zdist_rpc_client_t *self)
{
    s_read_monitor(self);
    int rc = s_read_replies(self, 0);
    s_expire(self, zdist_clock_now_ms());
    return rc;
}

static int
s_recv(zdist_rpc_client_t *self, uint64_t want_id, int64_t wait_ms, zdist_msg_t **ret_reply)
{
    int64_t until = wait_ms < 0 ? INT64_MAX : zdist_clock_now_ms() + wait_ms;
    /* A reply read while waiting for another costs nothing more; otherwise
       one poll per wake-up (it also sees what arrived already). */
    bool waited = false;
    while (1) {
        zdist_msg_t *reply = s_pop_done(self, want_id);
        if (reply) {
            *ret_reply = reply;
            return 0;
        }
        if (want_id && !s_in_flight(self, want_id))
            return -ENOENT; /* never sent, or received already: nothing to wait for */
        if (waited && zdist_clock_now_ms() >= until)
            return -EAGAIN;
        int rc = s_wait(self, until, want_id);
        if (rc < 0)
            return rc;
        waited = true;
    }
}

int
zdist_rpc_client_wait_any(zdist_rpc_client_t *const *clients, size_t n, void *also, int64_t wait_ms)
{
    int64_t until = wait_ms < 0 ? INT64_MAX : zdist_clock_now_ms() + wait_ms;
    zmq_pollitem_t *items = calloc(2 * n + 1, sizeof *items);
    if (!items)
        return -ENOMEM;
    bool also_ready = false;
    int rc;
    for (;;) {
        int ready = 0;
        int64_t wake = until;
        for (size_t i = 0; i < n; i++) {
            zdist_rpc_client_t *c = clients[i];
            if (!c)
                continue;
            if ((rc = s_collect(c)) < 0)
                goto out;
            ready += c->done_head != NULL;
            if (c->nheap > 0 && s_heap_key(c, 0) < wake)
                wake = s_heap_key(c, 0);
        }
        int64_t now = zdist_clock_now_ms();
        if (ready > 0 || also_ready || now >= until) {
            rc = ready;
            goto out;
        }
        int k = 0;
        for (size_t i = 0; i < n; i++) {
            if (!clients[i])
                continue;
            items[k++] = (zmq_pollitem_t){clients[i]->handle, 0, ZMQ_POLLIN, 0};
            items[k++] = (zmq_pollitem_t){zsock_resolve(clients[i]->monitor), 0, ZMQ_POLLIN, 0};
        }
        if (also)
            items[k++] = (zmq_pollitem_t){also, 0, ZMQ_POLLIN, 0};
        if (k == 0 && wake == INT64_MAX) {
            rc = 0; /* nothing could ever wake it */
            goto out;
        }
        long timeout = wake == INT64_MAX ? -1 : (long) (wake > now ? wake - now : 0);
        if (zmq_poll(items, k, timeout) < 0) {
            rc = -errno;
            goto out;
        }
        also_ready = also && (items[k - 1].revents & ZMQ_POLLIN);
    }
out:
    free(items);
    return rc;
}

int
zdist_rpc_client_recv(zdist_rpc_client_t *self, int64_t wait_ms, zdist_msg_t **ret_reply)
{
    return s_recv(self, 0, wait_ms, ret_reply);
}

int
zdist_rpc_client_recv_id(zdist_rpc_client_t *self, uint64_t id, int64_t wait_ms, zdist_msg_t **ret_reply)
{
    return id ? s_recv(self, id, wait_ms, ret_reply) : -EINVAL;
}

bool
zdist_rpc_unreachable(int rc)
{
    int status = zdist_status_from_errno(rc);
    return rc < 0 && (status == ZDIST_STATUS_DEADLINE_EXCEEDED || status == ZDIST_STATUS_UNAVAILABLE);
}

int
zdist_rpc_client_call(zdist_rpc_client_t *self, zdist_msg_t **request_p, int64_t timeout_ms,
                      zdist_msg_t **ret_reply)
{
    uint64_t id;
    int rc = zdist_rpc_client_send(self, request_p, timeout_ms, &id);
    if (rc < 0)
        return rc;
    /* The call completes by its deadline at the latest (or never, without one). */
    return s_recv(self, id, -1, ret_reply);
}

/* ---- PING ---- */

static int
s_read_ping(const ProtobufCMessage *pb, void *arg, zdist_error_t *err)
{
    const Zdist__PingReply *p = (const Zdist__PingReply *) pb;
    zdist_rpc_ping_t *ret = arg;
    if (!p->role || strlen(p->role) >= sizeof ret->role || !p->version || strlen(p->version) >= sizeof ret->version)
        return zdist_error_set(err, -EPROTO, "PING reply: role or version longer than %zu bytes",
                               sizeof ret->role - 1);
    memcpy(ret->role, p->role, strlen(p->role) + 1);
    memcpy(ret->version, p->version, strlen(p->version) + 1);
    ret->protocol = p->protocol;
    ret->incarnation = p->incarnation;
    ret->uptime_ms = p->uptime_ms;
    return 0;
}

int
zdist_rpc_ping_read(const zdist_msg_t *reply, zdist_rpc_ping_t *ret, zdist_error_t *err)
{
    zdist_rpc_ping_t ping = {0};
    int rc = zdist_msg_read_body(reply, &zdist__ping_reply__descriptor, s_read_ping, &ping, err);
    if (rc == 0)
        *ret = ping;
    return rc;
}
