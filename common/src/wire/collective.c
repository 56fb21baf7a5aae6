/* zdist collective: ring all-reduce / all-gather / broadcast over ZeroMQ PUSH/PULL with zero-copy payloads. */
#include "zdist/collective.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include "zdist/auth.h"
#include "zdist/sys.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the collective header is little-endian host order");

#define S_MAGIC 0x4c4f435aU /* "ZCOL" */
#define S_VERSION 1
#define S_MAX_RANKS 4096
#define S_DEFAULT_CHUNK (1u << 20)
#define S_DEFAULT_PACK (4u << 20)
#define S_DEFAULT_TIMEOUT_MS 30000
#define S_RESET_WAIT_MS 2000

enum { S_HELLO = 1, S_DATA = 2, S_ABORT = 3 };

/* Frame 0 of every message; frame 1 (DATA only) is the payload. */
typedef struct {
    uint32_t magic;
    uint8_t version;
    uint8_t kind;
    uint16_t from;   /* sender's rank */
    uint32_t size;   /* ring size */
    uint32_t step;   /* ring step (HELLO: hop; ABORT: negative errno as -code) */
    uint64_t coll;   /* collective id: 0 join, then 1, 2, ... per ring pass */
    uint64_t chunk;  /* chunk index within its segment (HELLO/ABORT: origin rank) */
    uint64_t offset; /* byte offset of the chunk in the collective's buffer */
    uint64_t bytes;  /* payload bytes */
    uint64_t total;  /* bytes of the whole buffer (all ranks must agree) */
} s_header_t;

struct zdist_comm_t {
    int rank, size;
    void *ctx, *pull, *push;
    char *endpoint;   /* bound, resolved */
    char **endpoints; /* [size] after connect */
    size_t chunk_bytes, bytes_per_pack;
    int64_t timeout_ms;
    uint64_t coll;   /* id of the current (last started) ring pass */
    bool joined;
    atomic_int inflight; /* zero-copy payloads libzmq still holds */
    int efd;             /* signalled when inflight drops to 0 */
    char *pack;          /* staging buffer for packed small tensors */
    size_t pack_cap;
    const char *what; /* the collective running, for errors */
    zdist_keys_t *keys; /* CURVE between workers; NULL: plain */
    bool zap_held;      /* this context's ZAP handler is ours to release */
};

static int
s_mod(int a, int n)
{
    return ((a % n) + n) % n;
}

static int
s_zerr(void)
{
    return -(errno ? errno : EIO);
}

static void
s_release(void *data, void *hint)
{
    (void)data;
    zdist_comm_t *self = hint;
    if (atomic_fetch_sub(&self->inflight, 1) == 1) {
        uint64_t one = 1;
        ssize_t w = write(self->efd, &one, sizeof one);
        (void)w;
    }
}

static int
s_open_push(zdist_comm_t *self)
{
    self->push = zmq_socket(self->ctx, ZMQ_PUSH);
    if (!self->push)
        return s_zerr();
    int zero = 0;
    zmq_setsockopt(self->push, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(self->push, ZMQ_SNDHWM, &zero, sizeof zero); /* our own buffers: never block */
    char right[32];
    snprintf(right, sizeof right, "worker-%d", s_mod(self->rank + 1, self->size));
    if (self->keys && zdist_keys_apply_client(self->keys, self->push, right, NULL) < 0)
        return -EACCES;
    if (self->endpoints && zmq_connect(self->push, self->endpoints[s_mod(self->rank + 1, self->size)]) != 0)
        return s_zerr();
    return 0;
}

void
zdist_comm_destroy(zdist_comm_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_comm_t *self = *self_p;
    if (self->push)
        zmq_close(self->push);
    if (self->pull)
        zmq_close(self->pull);
    if (self->zap_held)
        zdist_keys_zap_release(self->ctx); /* its sockets first: ctx_term waits for them */
    if (self->ctx)
        zmq_ctx_term(self->ctx); /* linger 0: pending payloads are dropped, released */
    if (self->efd >= 0)
        close(self->efd);
    if (self->endpoints)
        for (int i = 0; i < self->size; i++)
            free(self->endpoints[i]);
    free(self->endpoints);
    free(self->endpoint);
    free(self->pack);
    free(self);
    *self_p = NULL;
}

zdist_comm_t *
zdist_comm_new(const zdist_comm_config_t *cfg, zdist_error_t *err)
{
    if (!cfg || cfg->size < 1 || cfg->size > S_MAX_RANKS || cfg->rank < 0 || cfg->rank >= cfg->size || !cfg->bind) {
        zdist_error_set(err, -EINVAL, "communicator: need 0 <= rank < size <= %d and a bind endpoint", S_MAX_RANKS);
        return NULL;
    }
    zdist_comm_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->efd = -1;
    self->rank = cfg->rank;
    self->size = cfg->size;
    self->chunk_bytes = cfg->chunk_bytes ? cfg->chunk_bytes & ~(size_t)3 : S_DEFAULT_CHUNK;
    if (self->chunk_bytes < 4)
        self->chunk_bytes = 4;
    self->bytes_per_pack = cfg->bytes_per_pack ? cfg->bytes_per_pack : S_DEFAULT_PACK;
    self->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : S_DEFAULT_TIMEOUT_MS;
    atomic_init(&self->inflight, 0);
    self->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    self->ctx = zmq_ctx_new();
    if (self->efd < 0 || !self->ctx) {
        zdist_error_set(err, -ENOMEM, "communicator: cannot create eventfd or ZeroMQ context");
        goto fail;
    }
    zmq_ctx_set(self->ctx, ZMQ_BLOCKY, 0);
    /* The ring's two sockets on their own I/O threads: sending to the right
       and receiving from the left overlap (64 MiB over 2 ranks: ~42 -> ~33 ms). */
    zmq_ctx_set(self->ctx, ZMQ_IO_THREADS, 2);
    self->pull = zmq_socket(self->ctx, ZMQ_PULL);
    if (!self->pull) {
        zdist_error_set(err, s_zerr(), "communicator: cannot create a socket: %s", zmq_strerror(errno));
        goto fail;
    }
    int zero = 0, rcvhwm = 4096;
    int64_t maxmsg = (int64_t)self->chunk_bytes + 1024; /* a peer cannot make us buffer more per frame */
    zmq_setsockopt(self->pull, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(self->pull, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    zmq_setsockopt(self->pull, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    self->keys = cfg->keys ? cfg->keys : zdist_keys_process();
    if (self->keys) {
        if (zdist_keys_apply_server(self->keys, self->ctx, self->pull, err) < 0) {
            zdist_error_prefix(err, "rank %d", cfg->rank);
            goto fail;
        }
        self->zap_held = true;
    }
    if (zmq_bind(self->pull, cfg->bind) != 0) {
        int rc = s_zerr();
        zdist_error_set(err, rc, "rank %d cannot bind '%s': %s", cfg->rank, cfg->bind, zmq_strerror(-rc));
        goto fail;
    }
    char ep[256];
    size_t len = sizeof ep;
    if (zmq_getsockopt(self->pull, ZMQ_LAST_ENDPOINT, ep, &len) != 0 || !(self->endpoint = strdup(ep))) {
        zdist_error_set(err, -ENOMEM, "communicator: cannot read the bound endpoint");
        goto fail;
    }
    return self;
fail:
    zdist_comm_destroy(&self);
    return NULL;
}

const char *
zdist_comm_endpoint(zdist_comm_t *self)
{
    return self ? self->endpoint : NULL;
}

int
zdist_comm_connect(zdist_comm_t *self, const char *const *endpoints, zdist_error_t *err)
{
    if (!self || !endpoints)
        return zdist_error_set(err, -EINVAL, "connect: no endpoints");
    if (self->endpoints)
        return zdist_error_set(err, -EALREADY, "connect: already connected");
    for (int i = 0; i < self->size; i++)
        if (!endpoints[i])
            return zdist_error_set(err, -EINVAL, "connect: no endpoint for rank %d", i);
    size_t n = (size_t)(unsigned)self->size;
    self->endpoints = n <= S_MAX_RANKS ? calloc(n, sizeof *self->endpoints) : NULL;
    if (!self->endpoints)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    for (int i = 0; i < self->size; i++)
        if (!(self->endpoints[i] = strdup(endpoints[i])))
            return zdist_error_set(err, -ENOMEM, "out of memory");
    if (self->size == 1)
        return 0;
    int rc = s_open_push(self);
    if (rc < 0)
        return zdist_error_set(err, rc, "rank %d cannot connect to rank %d at '%s': %s", self->rank,
                               s_mod(self->rank + 1, self->size), self->endpoints[s_mod(self->rank + 1, self->size)],
                               zmq_strerror(-rc));
    return 0;
}

/* Sends a header and (when bytes > 0) a zero-copy payload that libzmq
   releases through s_release. */
static int
s_send(zdist_comm_t *self, s_header_t *h, void *payload, zdist_error_t *err)
{
    h->magic = S_MAGIC;
    h->version = S_VERSION;
    h->from = (uint16_t)self->rank;
    h->size = (uint32_t)self->size;
    bool more = h->kind == S_DATA;
    if (zmq_send(self->push, h, sizeof *h, ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0)) < 0)
        goto fail;
    if (more) {
        zmq_msg_t m;
        atomic_fetch_add(&self->inflight, 1);
        if (zmq_msg_init_data(&m, payload, h->bytes, s_release, self) != 0) {
            atomic_fetch_sub(&self->inflight, 1);
            goto fail;
        }
        if (zmq_msg_send(&m, self->push, ZMQ_DONTWAIT) < 0) {
            int e = errno;
            zmq_msg_close(&m); /* releases */
            errno = e;
            goto fail;
        }
    }
    return 0;
fail:;
    int rc = s_zerr();
    return zdist_error_set(err, rc, "%s: rank %d cannot send to rank %d (%s): %s", self->what, self->rank,
                           s_mod(self->rank + 1, self->size), self->endpoints[s_mod(self->rank + 1, self->size)],
                           zmq_strerror(-rc));
}

/* What the next message from the left must be. */
typedef struct {
    int kind;
    uint32_t step;
    uint64_t chunk, offset, bytes, total;
    int64_t deadline_ms;
    int culprit; /* named on timeout */
} s_expect_t;

/* Receives the expected message; its payload into *payload (initialised
   msg, closed by the caller) for DATA. Drops stale messages of earlier
   collectives. */
static int
s_recv(zdist_comm_t *self, const s_expect_t *x, zmq_msg_t *payload, zdist_error_t *err)
{
    int left = s_mod(self->rank - 1, self->size);
    for (;;) {
        int64_t wait = x->deadline_ms - zdist_clock_now_ms();
        if (wait < 0)
            wait = 0;
        zmq_pollitem_t it = {.socket = self->pull, .events = ZMQ_POLLIN};
        int n = zmq_poll(&it, 1, (long)wait);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return zdist_error_set(err, s_zerr(), "%s: poll: %s", self->what, zmq_strerror(errno));
        if (n == 0) {
            if (x->kind == S_HELLO)
                return zdist_error_set(err, -ETIMEDOUT,
                                       "%s: rank %d (%s) did not join within the deadline (rank %d waited)",
                                       self->what, x->culprit, self->endpoints[x->culprit], self->rank);
            return zdist_error_set(err, -ETIMEDOUT,
                                   "%s: no data from rank %d (%s) within the deadline (rank %d waited for step %u, "
                                   "chunk %" PRIu64 ")",
                                   self->what, x->culprit, self->endpoints[x->culprit], self->rank, x->step,
                                   x->chunk);
        }
        zmq_msg_t hm, pm;
        zmq_msg_init(&hm);
        zmq_msg_init(&pm);
        if (zmq_msg_recv(&hm, self->pull, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&hm);
            zmq_msg_close(&pm);
            continue;
        }
        bool has_payload = zmq_msg_more(&hm);
        int frames = 1;
        if (has_payload) {
            zmq_msg_recv(&pm, self->pull, 0);
            frames++;
            while (zmq_msg_more(&pm)) { /* extra frames: drain, refuse below */
                zmq_msg_close(&pm);
                zmq_msg_init(&pm);
                zmq_msg_recv(&pm, self->pull, 0);
                frames++;
            }
        }
        s_header_t h;
        const char *why = NULL;
        char sender[32];
        snprintf(sender, sizeof sender, "worker-%d", left);
        const char *user = self->keys ? zmq_msg_gets(&hm, "User-Id") : NULL;
        if (self->keys && (!user || strcmp(user, sender) != 0))
            why = "not signed by the left neighbour's key";
        else if (zmq_msg_size(&hm) != sizeof h)
            why = "header of the wrong size";
        else {
            memcpy(&h, zmq_msg_data(&hm), sizeof h);
            if (h.magic != S_MAGIC || h.version != S_VERSION)
                why = "bad magic or version";
            else if (h.from != left || h.size != (uint32_t)self->size)
                why = "not from the left neighbour of this ring";
            else if (h.coll < self->coll) {
                /* an earlier, failed collective's leftovers */
                zmq_msg_close(&hm);
                zmq_msg_close(&pm);
                continue;
            } else if (h.coll > self->coll)
                why = "a later collective than ours (ranks out of step)";
            else if (h.kind == S_ABORT) {
                zmq_msg_close(&hm);
                zmq_msg_close(&pm);
                int code = h.step > 0 && h.step < 4096 ? -(int)h.step : -ECANCELED;
                int c = h.chunk < (uint64_t)self->size ? (int)h.chunk : left;
                /* Said as the rank that gave up saw it: a timeout before the
                   ring formed is a rank that never joined. */
                if (code == -ETIMEDOUT)
                    return zdist_error_set(err, code, "%s: rank %d gave up: rank %d (%s) %s within the deadline",
                                           self->what, left, c, self->endpoints[c],
                                           x->kind == S_HELLO ? "did not join" : "sent no data");
                return zdist_error_set(err, code, "%s: rank %d gave up: rank %d (%s) failed (%s)", self->what, left,
                                       c, self->endpoints[c], strerror(-code));
            } else if (h.kind != x->kind || frames != (x->kind == S_DATA ? 2 : 1))
                why = "unexpected message kind or frame count";
            else if (h.step != x->step || h.chunk != x->chunk)
                why = "out of sequence (step or chunk)";
            else if (x->kind == S_DATA && h.total != x->total)
                why = "different total size (ranks disagree on tensor sizes)";
            else if (x->kind == S_DATA &&
                     (h.offset != x->offset || h.bytes != x->bytes || zmq_msg_size(&pm) != x->bytes))
                why = "chunk offset or length differ from the plan";
        }
        zmq_msg_close(&hm);
        if (why) {
            zmq_msg_close(&pm);
            return zdist_error_set(err, -EPROTO, "%s: bad message from rank %d (%s): %s", self->what, left,
                                   self->endpoints[left], why);
        }
        if (x->kind == S_DATA)
            zmq_msg_move(payload, &pm);
        zmq_msg_close(&pm);
        return 0;
    }
}

/* Waits until libzmq released every zero-copy payload (sent), by the deadline. */
static int
s_wait_released(zdist_comm_t *self, int64_t deadline_ms)
{
    while (atomic_load(&self->inflight) > 0) {
        int64_t wait = deadline_ms - zdist_clock_now_ms();
        if (wait <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = self->efd, .events = POLLIN};
        int n = poll(&p, 1, (int)(wait > 60000 ? 60000 : wait));
        if (n > 0) {
            uint64_t v;
            ssize_t r = read(self->efd, &v, sizeof v);
            (void)r;
        }
    }
    return 0;
}

/* After a failure: drop what is queued for the right neighbour (so nothing
   points into the caller's buffers any more), reconnect, and tell the
   right neighbour which rank failed so it gives up now, not at its deadline. */
static void
s_after_failure(zdist_comm_t *self, int code, int culprit)
{
    if (self->size == 1 || !self->push)
        return;
    zmq_close(self->push);
    self->push = NULL;
    if (s_wait_released(self, zdist_clock_now_ms() + S_RESET_WAIT_MS) < 0)
        abort(); /* libzmq kept pointers into the caller's memory: cannot return safely */
    if (s_open_push(self) < 0)
        return;
    s_header_t h = {.kind = S_ABORT, .coll = self->coll, .step = (uint32_t)-code, .chunk = (uint64_t)culprit};
    (void)s_send(self, &h, NULL, NULL);
}

/* The first collective checks that every rank is there: each rank sends its
   HELLO and forwards the ones from upstream; a rank not heard from is the
   nearest upstream rank whose HELLO is missing. */
static int
s_join(zdist_comm_t *self, int64_t deadline_ms, zdist_error_t *err)
{
    if (self->joined || self->size == 1)
        return 0;
    self->coll = 0;
    s_header_t h = {.kind = S_HELLO, .chunk = (uint64_t)self->rank};
    int rc = s_send(self, &h, NULL, err);
    for (int i = 1; rc == 0 && i < self->size; i++) {
        int origin = s_mod(self->rank - i, self->size);
        s_expect_t x = {.kind = S_HELLO, .step = (uint32_t)(i - 1), .chunk = (uint64_t)origin,
                        .deadline_ms = deadline_ms, .culprit = origin};
        rc = s_recv(self, &x, NULL, err);
        if (rc == 0 && i < self->size - 1) {
            s_header_t f = {.kind = S_HELLO, .step = (uint32_t)i, .chunk = (uint64_t)origin};
            rc = s_send(self, &f, NULL, err);
        }
        if (rc == -ETIMEDOUT)
            s_after_failure(self, rc, origin);
    }
    if (rc == 0)
        self->joined = true;
    return rc;
}

static void
s_add(float *dst, const void *src, size_t bytes)
{
    size_t n = bytes / 4;
    if (((uintptr_t)src & 3) == 0) {
        const float *s = src;
        for (size_t i = 0; i < n; i++)
            dst[i] += s[i];
    } else
        for (size_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, (const char *)src + i * 4, 4);
            dst[i] += v;
        }
}

/* One ring pass over base[total] split in size segments (off/len bytes).
   Step t sends segment (rank - t) and receives segment (rank - t - 1);
   steps < n_add add floats (the last of them divides by size when mean),
   later steps copy. A received chunk is forwarded as the next step at once,
   so chunks pipeline round the ring. */
static int
s_ring(zdist_comm_t *self, char *base, size_t total, const size_t *off, const size_t *len, int nsteps, int n_add,
       bool mean, int64_t deadline_ms, zdist_error_t *err)
{
    int N = self->size, r = self->rank, rc = 0;
    self->coll++;
    if (nsteps <= 0)
        return 0;
    size_t cb = self->chunk_bytes;
    int seg = r;
    for (uint64_t k = 0; rc == 0 && k * cb < len[seg]; k++) {
        size_t o = k * cb, b = len[seg] - o < cb ? len[seg] - o : cb;
        s_header_t h = {.kind = S_DATA, .coll = self->coll, .step = 0, .chunk = k, .offset = off[seg] + o,
                        .bytes = b, .total = total};
        rc = s_send(self, &h, base + off[seg] + o, err);
    }
    int culprit = s_mod(r - 1, N);
    for (int t = 0; rc == 0 && t < nsteps; t++) {
        seg = s_mod(r - t - 1, N);
        for (uint64_t k = 0; rc == 0 && k * cb < len[seg]; k++) {
            size_t o = k * cb, b = len[seg] - o < cb ? len[seg] - o : cb;
            s_expect_t x = {.kind = S_DATA, .step = (uint32_t)t, .chunk = k, .offset = off[seg] + o, .bytes = b,
                            .total = total, .deadline_ms = deadline_ms, .culprit = culprit};
            zmq_msg_t m;
            zmq_msg_init(&m);
            rc = s_recv(self, &x, &m, err);
            if (rc < 0) {
                zmq_msg_close(&m);
                break;
            }
            char *dst = base + off[seg] + o;
            if (t < n_add) {
                s_add((float *)(void *)dst, zmq_msg_data(&m), b);
                if (mean && t == n_add - 1)
                    for (size_t i = 0; i < b / 4; i++)
                        ((float *)(void *)dst)[i] /= (float)N;
            } else
                memcpy(dst, zmq_msg_data(&m), b);
            zmq_msg_close(&m);
            if (t + 1 < nsteps) {
                s_header_t h = {.kind = S_DATA, .coll = self->coll, .step = (uint32_t)(t + 1), .chunk = k,
                                .offset = off[seg] + o, .bytes = b, .total = total};
                rc = s_send(self, &h, dst, err);
            }
        }
    }
    if (rc == 0 && s_wait_released(self, deadline_ms) < 0) {
        int right = s_mod(r + 1, N);
        rc = zdist_error_set(err, -ETIMEDOUT, "%s: rank %d (%s) did not take our data within the deadline",
                             self->what, right, self->endpoints[right]);
        culprit = right;
    }
    if (rc < 0)
        s_after_failure(self, rc, culprit);
    return rc;
}

static int
s_begin(zdist_comm_t *self, const char *what, int64_t timeout_ms, int64_t *ret_deadline, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "%s: no communicator", what);
    self->what = what;
    if (!self->endpoints)
        return zdist_error_set(err, -ENOTCONN, "%s: call zdist_comm_connect first", what);
    *ret_deadline = zdist_clock_now_ms() + (timeout_ms > 0 ? timeout_ms : self->timeout_ms);
    return s_join(self, *ret_deadline, err);
}

/* Segments of `elems` elements of `esize` bytes over N ranks, as even as can be. */
static void
s_even_segments(int N, size_t elems, size_t esize, size_t *off, size_t *len)
{
    size_t o = 0;
    for (int s = 0; s < N; s++) {
        size_t e = elems / (size_t)N + ((size_t)s < elems % (size_t)N ? 1 : 0);
        off[s] = o * esize;
        len[s] = e * esize;
        o += e;
    }
}

static int
s_reduce_buffer(zdist_comm_t *self, float *buf, size_t elems, bool mean, int64_t deadline_ms, size_t *off,
                size_t *len, zdist_error_t *err)
{
    int N = self->size;
    s_even_segments(N, elems, 4, off, len);
    return s_ring(self, (char *)buf, elems * 4, off, len, 2 * N - 2, N - 1, mean, deadline_ms, err);
}

int
zdist_comm_all_reduce(zdist_comm_t *self, zdist_reduce_op_t op, float *const *bufs, const int64_t *lens, int n,
                      int64_t timeout_ms, zdist_error_t *err)
{
    if (op != ZDIST_REDUCE_SUM && op != ZDIST_REDUCE_MEAN)
        return zdist_error_set(err, -EINVAL, "all_reduce: op must be SUM or MEAN");
    if (n < 0 || (n > 0 && (!bufs || !lens)))
        return zdist_error_set(err, -EINVAL, "all_reduce: bad tensor list");
    for (int i = 0; i < n; i++)
        if (lens[i] < 0 || (uint64_t)lens[i] > SIZE_MAX / 8 || (lens[i] > 0 && !bufs[i]))
            return zdist_error_set(err, -EINVAL, "all_reduce: tensor %d has a bad length or no data", i);
    int64_t deadline;
    int rc = s_begin(self, "all_reduce", timeout_ms, &deadline, err);
    if (rc < 0 || self->size == 1)
        return rc;
    bool mean = op == ZDIST_REDUCE_MEAN;
    size_t *off = calloc(2 * (size_t)self->size, sizeof *off);
    if (!off)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    size_t *len = off + self->size;

    /* Packs: consecutive tensors smaller than bytes_per_pack share one
       staging buffer (copied in and out); bigger ones go in place. */
    int i = 0;
    while (rc == 0 && i < n) {
        size_t bytes = (size_t)lens[i] * 4;
        if (bytes == 0) {
            i++;
            continue;
        }
        if (bytes >= self->bytes_per_pack) {
            rc = s_reduce_buffer(self, bufs[i], (size_t)lens[i], mean, deadline, off, len, err);
            i++;
            continue;
        }
        int j = i;
        size_t pack = 0;
        while (j < n && (size_t)lens[j] * 4 < self->bytes_per_pack && pack + (size_t)lens[j] * 4 <= self->bytes_per_pack)
            pack += (size_t)lens[j++] * 4;
        if (pack > self->pack_cap) {
            char *p = realloc(self->pack, pack);
            if (!p) {
                rc = zdist_error_set(err, -ENOMEM, "out of memory for a %zu-byte pack", pack);
                break;
            }
            self->pack = p;
            self->pack_cap = pack;
        }
        size_t o = 0;
        for (int k = i; k < j; k++) {
            if (lens[k])
                memcpy(self->pack + o, bufs[k], (size_t)lens[k] * 4);
            o += (size_t)lens[k] * 4;
        }
        rc = s_reduce_buffer(self, (float *)(void *)self->pack, pack / 4, mean, deadline, off, len, err);
        o = 0;
        for (int k = i; rc == 0 && k < j; k++) {
            if (lens[k])
                memcpy(bufs[k], self->pack + o, (size_t)lens[k] * 4);
            o += (size_t)lens[k] * 4;
        }
        i = j;
    }
    free(off);
    return rc;
}

int
zdist_comm_all_gather(zdist_comm_t *self, const void *data, int64_t rows, size_t row_bytes, void **ret_data,
                      int64_t *ret_rows, int64_t *ret_rank_rows, int64_t timeout_ms, zdist_error_t *err)
{
    if (rows < 0 || (rows > 0 && !data) || !ret_data || !ret_rows || row_bytes == 0 ||
        (rows > 0 && row_bytes > SIZE_MAX / (size_t)rows))
        return zdist_error_set(err, -EINVAL, "all_gather: bad rows, row size or output");
    int64_t deadline;
    int rc = s_begin(self, "all_gather", timeout_ms, &deadline, err);
    if (rc < 0)
        return rc;
    int N = self->size;
    /* Ring 1: every rank's (rows, row_bytes). */
    int64_t *meta = calloc(2 * (size_t)N, sizeof *meta);
    size_t *off = calloc(2 * (size_t)N, sizeof *off);
    char *out = NULL;
    if (!meta || !off) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    size_t *len = off + N;
    meta[2 * self->rank] = rows;
    meta[2 * self->rank + 1] = (int64_t)row_bytes;
    for (int s = 0; s < N; s++) {
        off[s] = (size_t)s * 16;
        len[s] = 16;
    }
    rc = s_ring(self, (char *)meta, (size_t)N * 16, off, len, N - 1, 0, false, deadline, err);
    if (rc < 0)
        goto done;
    size_t total_rows = 0;
    for (int s = 0; s < N; s++) {
        if (meta[2 * s + 1] != (int64_t)row_bytes || meta[2 * s] < 0) {
            rc = zdist_error_set(err, -EPROTO, "all_gather: rank %d has rows of %" PRId64 " bytes, rank %d of %zu", s,
                                 meta[2 * s + 1], self->rank, row_bytes);
            goto done;
        }
        if ((uint64_t)meta[2 * s] > (SIZE_MAX / row_bytes) - total_rows) {
            rc = zdist_error_set(err, -EOVERFLOW, "all_gather: result too large");
            goto done;
        }
        total_rows += (size_t)meta[2 * s];
    }
    size_t total = total_rows * row_bytes, o = 0;
    for (int s = 0; s < N; s++) {
        off[s] = o;
        len[s] = (size_t)meta[2 * s] * row_bytes;
        o += len[s];
    }
    if (total) {
        out = malloc(total);
        if (!out) {
            rc = zdist_error_set(err, -ENOMEM, "all_gather: out of memory for %zu bytes", total);
            goto done;
        }
        if (len[self->rank])
            memcpy(out + off[self->rank], data, len[self->rank]);
        rc = s_ring(self, out, total, off, len, N - 1, 0, false, deadline, err);
        if (rc < 0)
            goto done;
    }
    if (ret_rank_rows)
        for (int s = 0; s < N; s++)
            ret_rank_rows[s] = meta[2 * s];
    *ret_data = out;
    *ret_rows = (int64_t)total_rows;
    out = NULL;
done:
    free(out);
    free(meta);
    free(off);
    return rc;
}

int
zdist_comm_broadcast(zdist_comm_t *self, int root, void *buf, size_t bytes, int64_t timeout_ms, zdist_error_t *err)
{
    if (!self || root < 0 || root >= self->size || (bytes > 0 && !buf))
        return zdist_error_set(err, -EINVAL, "broadcast: bad root or buffer");
    int64_t deadline;
    int rc = s_begin(self, "broadcast", timeout_ms, &deadline, err);
    if (rc < 0)
        return rc;
    int N = self->size, r = self->rank, d = s_mod(r - root, N);
    self->coll++;
    if (N == 1 || bytes == 0)
        return 0;
    size_t cb = self->chunk_bytes;
    int culprit = s_mod(r - 1, N);
    for (uint64_t k = 0; rc == 0 && k * cb < bytes; k++) {
        size_t o = k * cb, b = bytes - o < cb ? bytes - o : cb;
        if (d > 0) {
            s_expect_t x = {.kind = S_DATA, .step = (uint32_t)(d - 1), .chunk = k, .offset = o, .bytes = b,
                            .total = bytes, .deadline_ms = deadline, .culprit = culprit};
            zmq_msg_t m;
            zmq_msg_init(&m);
            rc = s_recv(self, &x, &m, err);
            if (rc == 0)
                memcpy((char *)buf + o, zmq_msg_data(&m), b);
            zmq_msg_close(&m);
        }
        if (rc == 0 && d < N - 1) {
            s_header_t h = {.kind = S_DATA, .coll = self->coll, .step = (uint32_t)d, .chunk = k, .offset = o,
                            .bytes = b, .total = bytes};
            rc = s_send(self, &h, (char *)buf + o, err);
        }
    }
    if (rc == 0 && s_wait_released(self, deadline) < 0) {
        int right = s_mod(r + 1, N);
        rc = zdist_error_set(err, -ETIMEDOUT, "broadcast: rank %d (%s) did not take our data within the deadline",
                             right, self->endpoints[right]);
        culprit = right;
    }
    if (rc < 0)
        s_after_failure(self, rc, culprit);
    return rc;
}
