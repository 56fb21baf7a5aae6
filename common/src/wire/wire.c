/* zdist wire codec: protobuf-c header frame plus zero-copy payload frames. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common.pb-c.h"
#include "wire/body.h"
#include "zdist/wire.h"

struct zdist_msg_t {
    uint32_t method;
    uint64_t request_id;
    int64_t deadline_ms;
    uint64_t incarnation;
    uint64_t client_id;
    bool more;
    int status;
    char *status_message; /* owned; NULL means "" */

    uint8_t *body; /* owned when body_owned, else points into header */
    size_t body_len;
    bool body_owned;
    Zdist__Header *header; /* received header; owns names and body */

    size_t ntensors;
    size_t cap;
    zdist_tensor_t *tensors;
    zmq_msg_t *payloads; /* one per tensor */
    char **names;        /* outgoing names, owned */

    bool has_route;
    zmq_msg_t route;
    char peer[40];
    char user_id[64]; /* ZAP's User-Id of the connection; "" on plain ones */
    int source_fd;    /* the connection's descriptor + 1 (0: none) */
};

void
zdist_wire_limits_default(zdist_wire_limits_t *limits)
{
    limits->max_message_bytes = (size_t) 256 << 20;
    limits->max_tensors = 1024;
}

zdist_msg_t *
zdist_msg_new(uint32_t method)
{
    zdist_msg_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->method = method;
    return self;
}

void
zdist_msg_destroy(zdist_msg_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_msg_t *self = *self_p;
    for (size_t i = 0; i < self->ntensors; i++) {
        zmq_msg_close(&self->payloads[i]);
        if (self->names)
            free(self->names[i]);
    }
    free(self->payloads);
    free(self->tensors);
    free(self->names);
    if (self->body_owned)
        free(self->body);
    if (self->header)
        zdist__header__free_unpacked(self->header, NULL);
    if (self->has_route)
        zmq_msg_close(&self->route);
    free(self->status_message);
    free(self);
    *self_p = NULL;
}

uint32_t zdist_msg_method(const zdist_msg_t *self) { return self->method; }
void zdist_msg_set_method(zdist_msg_t *self, uint32_t method) { self->method = method; }
uint64_t zdist_msg_request_id(const zdist_msg_t *self) { return self->request_id; }
void zdist_msg_set_request_id(zdist_msg_t *self, uint64_t id) { self->request_id = id; }
int64_t zdist_msg_deadline_ms(const zdist_msg_t *self) { return self->deadline_ms; }
void zdist_msg_set_deadline_ms(zdist_msg_t *self, int64_t budget_ms) { self->deadline_ms = budget_ms; }
uint64_t zdist_msg_incarnation(const zdist_msg_t *self) { return self->incarnation; }
void zdist_msg_set_incarnation(zdist_msg_t *self, uint64_t inc) { self->incarnation = inc; }
uint64_t zdist_msg_client_id(const zdist_msg_t *self) { return self->client_id; }
void zdist_msg_set_client_id(zdist_msg_t *self, uint64_t id) { self->client_id = id; }
bool zdist_msg_more(const zdist_msg_t *self) { return self->more; }
void zdist_msg_set_more(zdist_msg_t *self, bool more) { self->more = more; }
int zdist_msg_status(const zdist_msg_t *self) { return self->status; }

const char *
zdist_msg_status_message(const zdist_msg_t *self)
{
    return self->status_message ? self->status_message : "";
}

void
zdist_msg_set_status(zdist_msg_t *self, int status, const char *fmt, ...)
{
    self->status = status;
    free(self->status_message);
    self->status_message = NULL;
    if (!fmt)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&self->status_message, fmt, ap) < 0)
        self->status_message = NULL;
    va_end(ap);
}

int
zdist_msg_read_body(const zdist_msg_t *self, const ProtobufCMessageDescriptor *desc,
                    int (*read)(const ProtobufCMessage *pb, void *arg, zdist_error_t *err), void *arg,
                    zdist_error_t *err)
{
    ProtobufCMessage *pb = NULL;
    int rc = zdist_msg_unpack_body(self, desc, &pb, err);
    if (rc < 0)
        return rc;
    rc = read(pb, arg, err);
    protobuf_c_message_free_unpacked(pb, NULL);
    return rc;
}

int
zdist_msg_set_body(zdist_msg_t *self, const ProtobufCMessage *body)
{
    if (self->body_owned)
        free(self->body);
    self->body = NULL;
    self->body_len = 0;
    self->body_owned = false;
    if (!body)
        return 0;
    size_t len = protobuf_c_message_get_packed_size(body);
    /* malloc(0) may return NULL; an empty body is a valid encoding. */
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return -ENOMEM;
    protobuf_c_message_pack(body, buf);
    self->body = buf;
    self->body_len = len;
    self->body_owned = true;
    return 0;
}

zdist_msg_t *
zdist_msg_new_body(uint32_t method, const ProtobufCMessage *body)
{
    zdist_msg_t *msg = zdist_msg_new(method);
    if (msg && zdist_msg_set_body(msg, body) < 0)
        zdist_msg_destroy(&msg);
    return msg;
}

int
zdist_msg_set_body_bytes(zdist_msg_t *self, const void *data, size_t len)
{
    /* malloc(0) may return NULL; an empty body is a valid encoding. */
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return -ENOMEM;
    if (len)
        memcpy(buf, data, len);
    if (self->body_owned)
        free(self->body);
    self->body = buf;
    self->body_len = len;
    self->body_owned = true;
    return 0;
}

const uint8_t *
zdist_msg_body(const zdist_msg_t *self, size_t *ret_len)
{
    *ret_len = self->body_len;
    return self->body;
}

int
zdist_msg_unpack_body(const zdist_msg_t *self, const ProtobufCMessageDescriptor *desc,
                      ProtobufCMessage **ret_body, zdist_error_t *err)
{
    static const uint8_t empty = 0;
    ProtobufCMessage *m =
        protobuf_c_message_unpack(desc, NULL, self->body_len, self->body ? self->body : &empty);
    if (!m)
        return zdist_error_set(err, -EPROTO, "body of %zu bytes does not decode as %s", self->body_len,
                               desc->name);
    *ret_body = m;
    return 0;
}

static int
s_grow(zdist_msg_t *self)
{
    if (self->ntensors < self->cap)
        return 0;
    size_t cap = self->cap ? self->cap * 2 : 4;
    /* Moving a zmq_msg_t byte-wise is not allowed, so payloads move with
       zmq_msg_move into a fresh array. */
    zmq_msg_t *payloads = calloc(cap, sizeof *payloads);
    zdist_tensor_t *tensors = calloc(cap, sizeof *tensors);
    char **names = calloc(cap, sizeof *names);
    if (!payloads || !tensors || !names) {
        free(payloads);
        free(tensors);
        free(names);
        return -ENOMEM;
    }
    for (size_t i = 0; i < self->ntensors; i++) {
        zmq_msg_init(&payloads[i]);
        zmq_msg_move(&payloads[i], &self->payloads[i]);
        zmq_msg_close(&self->payloads[i]);
        tensors[i] = self->tensors[i];
        names[i] = self->names ? self->names[i] : NULL;
    }
    free(self->payloads);
    free(self->tensors);
    free(self->names);
    self->payloads = payloads;
    self->tensors = tensors;
    self->names = names;
    self->cap = cap;
    return 0;
}

static int
s_check_tensor(zdist_dtype_t dtype, const zdist_shape_t *shape, size_t nbytes)
{
    if (!zdist_dtype_is_data(dtype) || !shape || shape->rank < 0 || shape->rank > ZDIST_MAX_RANK)
        return -EINVAL;
    size_t need;
    int rc = zdist_tensor_byte_size(dtype, shape, &need);
    if (rc < 0)
        return rc;
    return need == nbytes ? 0 : -EINVAL;
}

static void
s_free_malloced(void *data, void *hint)
{
    (void) hint;
    free(data);
}

int
zdist_msg_add_tensor(zdist_msg_t *self, const char *name, zdist_dtype_t dtype, const zdist_shape_t *shape,
                     void *data, size_t nbytes, zdist_free_fn *ffn, void *hint)
{
    int rc = s_check_tensor(dtype, shape, nbytes);
    if (rc < 0)
        return rc;
    char *name_copy = NULL;
    if (name && !(name_copy = strdup(name)))
        return -ENOMEM;
    rc = s_grow(self);
    if (rc < 0) {
        free(name_copy);
        return rc;
    }
    size_t i = self->ntensors;
    /* libzmq wants a non-NULL pointer even for an empty payload. */
    static uint8_t empty_payload;
    void *ptr = nbytes ? data : &empty_payload;
    if (zmq_msg_init_data(&self->payloads[i], ptr, nbytes, nbytes ? ffn : NULL, hint) != 0) {
        free(name_copy);
        return -errno;
    }
    if (!nbytes && ffn)
        ffn(data, hint);
    self->names[i] = name_copy;
    self->tensors[i] = (zdist_tensor_t){
        .name = name_copy, .dtype = dtype, .shape = *shape, .data = ptr, .nbytes = nbytes};
    self->ntensors++;
    return 0;
}

int
zdist_msg_add_tensor_alloc(zdist_msg_t *self, const char *name, zdist_dtype_t dtype, const zdist_shape_t *shape,
                           void **ret_data)
{
    size_t nbytes;
    if (!zdist_dtype_is_data(dtype) || !shape)
        return -EINVAL;
    int rc = zdist_tensor_byte_size(dtype, shape, &nbytes);
    if (rc < 0)
        return rc;
    void *buf = malloc(nbytes ? nbytes : 1);
    if (!buf)
        return -ENOMEM;
    rc = zdist_msg_add_tensor(self, name, dtype, shape, buf, nbytes, s_free_malloced, NULL);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    if (nbytes == 0)
        buf = self->tensors[self->ntensors - 1].data; /* freed already; hand out the placeholder */
    *ret_data = buf;
    return 0;
}

int
zdist_msg_add_tensor_copy(zdist_msg_t *self, const char *name, zdist_dtype_t dtype, const zdist_shape_t *shape,
                          const void *data, size_t nbytes)
{
    int rc = s_check_tensor(dtype, shape, nbytes);
    if (rc < 0)
        return rc;
    void *buf;
    rc = zdist_msg_add_tensor_alloc(self, name, dtype, shape, &buf);
    if (rc < 0)
        return rc;
    if (nbytes)
        memcpy(buf, data, nbytes);
    return 0;
}

size_t
zdist_msg_tensor_count(const zdist_msg_t *self)
{
    return self->ntensors;
}

const zdist_tensor_t *
zdist_msg_tensor(const zdist_msg_t *self, size_t index)
{
    return index < self->ntensors ? &self->tensors[index] : NULL;
}

size_t
zdist_msg_payload_bytes(const zdist_msg_t *self)
{
    size_t total = self->body_len;
    for (size_t i = 0; i < self->ntensors; i++)
        total += self->tensors[i].nbytes;
    return total;
}

static void
s_set_peer(zdist_msg_t *self)
{
    const uint8_t *id = zmq_msg_data(&self->route);
    size_t len = zmq_msg_size(&self->route);
    size_t used = (size_t) snprintf(self->peer, sizeof self->peer, "peer ");
    for (size_t i = 0; i < len && used + 3 < sizeof self->peer; i++)
        used += (size_t) snprintf(self->peer + used, sizeof self->peer - used, "%02x", id[i]);
}

int
zdist_msg_copy_route(zdist_msg_t *dst, const zdist_msg_t *src)
{
    if (!src->has_route)
        return -EINVAL;
    if (dst->has_route)
        zmq_msg_close(&dst->route);
    zmq_msg_init(&dst->route);
    if (zmq_msg_copy(&dst->route, (zmq_msg_t *) &src->route) != 0) {
        zmq_msg_close(&dst->route);
        dst->has_route = false;
        return -errno;
    }
    dst->has_route = true;
    dst->peer[0] = '\0';
    return 0;
}

const char *
zdist_msg_peer(const zdist_msg_t *self)
{
    if (!self->has_route)
        return "";
    /* Formatted on first use: only logs need it, not every message. */
    if (!self->peer[0])
        s_set_peer((zdist_msg_t *) self);
    return self->peer;
}

const char *
zdist_msg_user_id(const zdist_msg_t *self)
{
    return self->user_id[0] ? self->user_id : NULL;
}

int
zdist_msg_source_fd(const zdist_msg_t *self)
{
    return self->source_fd - 1;
}

/* ---- send ---- */

static int
s_send_frame(void *socket, zmq_msg_t *frame, int flags)
{
    if (zmq_msg_send(frame, socket, flags) < 0) {
        int e = errno;
        zmq_msg_close(frame);
        return -e;
    }
    return 0;
}

int
zdist_wire_send(void *socket, zdist_msg_t **msg_p, int flags)
{
    zdist_msg_t *self = *msg_p;
    int rc = 0;
    Zdist__TensorMeta metas_stack[8];
    Zdist__TensorMeta *ptrs_stack[8];
    Zdist__TensorMeta *metas = metas_stack;
    Zdist__TensorMeta **ptrs = ptrs_stack;
    if (self->ntensors > 8) {
        metas = calloc(self->ntensors, sizeof *metas);
        ptrs = calloc(self->ntensors, sizeof *ptrs);
        if (!metas || !ptrs) {
            rc = -ENOMEM;
            goto out;
        }
    }
    Zdist__Header h = ZDIST__HEADER__INIT;
    h.version = ZDIST_PROTOCOL_VERSION;
    h.request_id = self->request_id;
    h.method = self->method;
    h.deadline_ms = self->deadline_ms;
    h.incarnation = self->incarnation;
    h.client_id = self->client_id;
    h.more = self->more;
    Zdist__Status status = ZDIST__STATUS__INIT;
    if (self->status != 0 || self->status_message) {
        status.code = self->status;
        status.message = self->status_message ? self->status_message : (char *) "";
        h.status = &status;
    }
    h.body.data = self->body;
    h.body.len = self->body_len;
    h.n_tensors = self->ntensors;
    h.tensors = ptrs;
    for (size_t i = 0; i < self->ntensors; i++) {
        zdist_tensor_t *t = &self->tensors[i];
        zdist__tensor_meta__init(&metas[i]);
        metas[i].name = t->name ? (char *) t->name : (char *) "";
        metas[i].dtype = (Zdist__DType) t->dtype;
        metas[i].n_shape = (size_t) t->shape.rank;
        metas[i].shape = t->shape.dims;
        metas[i].byte_length = t->nbytes;
        metas[i].frame = (uint32_t) (i + 1);
        ptrs[i] = &metas[i];
    }
    zmq_msg_t frame;
    size_t hlen = zdist__header__get_packed_size(&h);
    if (zmq_msg_init_size(&frame, hlen) != 0) {
        rc = -errno;
        goto out;
    }
    zdist__header__pack(&h, zmq_msg_data(&frame));

    if (self->has_route) {
        rc = s_send_frame(socket, &self->route, flags | ZMQ_SNDMORE);
        self->has_route = false; /* sent or closed */
        if (rc < 0) {
            zmq_msg_close(&frame);
            goto out;
        }
    }
    rc = s_send_frame(socket, &frame, flags | (self->ntensors ? ZMQ_SNDMORE : 0));
    if (rc < 0)
        goto out;
    size_t sent = 0;
    for (; sent < self->ntensors; sent++) {
        int more = sent + 1 < self->ntensors ? ZMQ_SNDMORE : 0;
        rc = s_send_frame(socket, &self->payloads[sent], flags | more);
        zmq_msg_init(&self->payloads[sent]); /* sent (ownership moved) or closed */
        if (rc < 0)
            break;
    }
out:
    if (metas != metas_stack)
        free(metas);
    if (ptrs != ptrs_stack)
        free(ptrs);
    zdist_msg_destroy(msg_p);
    return rc;
}

/* ---- receive ---- */

/* Reads and discards the rest of a multipart message. */
static size_t
s_drain(void *socket)
{
    size_t n = 0;
    int more = 1;
    size_t len = sizeof more;
    while (zmq_getsockopt(socket, ZMQ_RCVMORE, &more, &len) == 0 && more) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, socket, 0) < 0) {
            zmq_msg_close(&f);
            break;
        }
        zmq_msg_close(&f);
        n++;
        len = sizeof more;
    }
    return n;
}

static bool
s_has_more(void *socket)
{
    int more = 0;
    size_t len = sizeof more;
    zmq_getsockopt(socket, ZMQ_RCVMORE, &more, &len);
    return more != 0;
}

static int
s_proto_error(void *socket, zdist_error_t *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
s_proto_error(void *socket, zdist_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    zdist_error_vset(err, -EPROTO, fmt, ap);
    va_end(ap);
    s_drain(socket);
    return -EPROTO;
}

static int
s_adopt_header(zdist_msg_t *self, Zdist__Header *h)
{
    self->header = h;
    self->request_id = h->request_id;
    self->method = h->method;
    self->deadline_ms = h->deadline_ms;
    self->incarnation = h->incarnation;
    self->client_id = h->client_id;
    self->more = h->more;
    if (h->status) {
        self->status = h->status->code;
        if (h->status->message && *h->status->message && !(self->status_message = strdup(h->status->message)))
            return -ENOMEM;
    }
    self->body = h->body.data;
    self->body_len = h->body.len;
    self->body_owned = false;
    return 0;
}

/* Receives the n payload frames the header announced into self; total is
   the bytes so far (the header's), checked against the limit with each
   frame. */
static int
s_recv_payloads(void *socket, zdist_msg_t *self, size_t n, size_t total, const zdist_wire_limits_t *limits,
                zdist_error_t *err)
{
    int rc;
    /* Exact-size arrays: frames land in place and never move. */
    if (n) {
        self->payloads = calloc(n, sizeof *self->payloads);
        self->tensors = calloc(n, sizeof *self->tensors);
        if (!self->payloads || !self->tensors) {
            s_drain(socket);
            return -ENOMEM;
        }
        self->cap = n;
    }
    size_t got = 0;
    while (s_has_more(socket)) {
        if (got == n) {
            size_t extra = s_drain(socket);
            return zdist_error_set(err, -EPROTO, "header describes %zu payload frames, message has %zu", n,
                                   n + extra);
        }
        zmq_msg_init(&self->payloads[got]);
        if (zmq_msg_recv(&self->payloads[got], socket, 0) < 0) {
            rc = -errno;
            zmq_msg_close(&self->payloads[got]);
            self->ntensors = got;
            s_drain(socket);
            return rc;
        }
        got++;
        self->ntensors = got;
        total += zmq_msg_size(&self->payloads[got - 1]);
        if (total > limits->max_message_bytes)
            return s_proto_error(socket, err, "message exceeds the limit of %zu bytes",
                                 limits->max_message_bytes);
    }
    if (got != n)
        return zdist_error_set(err, -EPROTO, "header describes %zu payload frames, message has %zu", n, got);
    return 0;
}

/* Checks tensor i's meta against its payload frame and fills self->tensors[i]. */
static int
s_adopt_tensor(zdist_msg_t *self, size_t i, const Zdist__TensorMeta *m, zdist_error_t *err)
{
    zdist_tensor_t *t = &self->tensors[i];
    const char *name = m->name && *m->name ? m->name : "";
    if (m->frame != i + 1)
        return zdist_error_set(err, -EPROTO, "tensor %zu '%s': payload frame index %u, expected %zu", i,
                               name, m->frame, i + 1);
    if (!zdist_dtype_is_data((zdist_dtype_t) m->dtype))
        return zdist_error_set(err, -EPROTO, "tensor %zu '%s': unknown dtype %d", i, name, (int) m->dtype);
    if (m->n_shape > ZDIST_MAX_RANK)
        return zdist_error_set(err, -EPROTO, "tensor %zu '%s': rank %zu exceeds %d", i, name, m->n_shape,
                               ZDIST_MAX_RANK);
    if (zdist_shape_init(&t->shape, (int) m->n_shape, m->shape) < 0)
        return zdist_error_set(err, -EPROTO, "tensor %zu '%s': negative dimension", i, name);
    size_t need;
    char sbuf[160];
    if (zdist_tensor_byte_size((zdist_dtype_t) m->dtype, &t->shape, &need) < 0)
        return zdist_error_set(err, -EPROTO, "tensor %zu '%s': shape %s overflows", i, name,
                               zdist_shape_format(&t->shape, sbuf, sizeof sbuf));
    size_t have = zmq_msg_size(&self->payloads[i]);
    if (need != m->byte_length || have != need)
        return zdist_error_set(err, -EPROTO,
                               "tensor %zu '%s': %s %s needs %zu bytes, header says %llu, frame holds %zu", i,
                               name, zdist_dtype_name((zdist_dtype_t) m->dtype),
                               zdist_shape_format(&t->shape, sbuf, sizeof sbuf), need,
                               (unsigned long long) m->byte_length, have);
    /* libzmq packs small frames into shared or inline buffers at any
       address; handlers read payloads as typed arrays, so a misaligned
       one (small by construction) is moved to its own allocation. */
    size_t esize = zdist_dtype_size((zdist_dtype_t) m->dtype);
    if (have && (uintptr_t) zmq_msg_data(&self->payloads[i]) % esize != 0) {
        void *copy = malloc(have);
        if (!copy)
            return -ENOMEM;
        memcpy(copy, zmq_msg_data(&self->payloads[i]), have);
        zmq_msg_close(&self->payloads[i]);
        if (zmq_msg_init_data(&self->payloads[i], copy, have, s_free_malloced, NULL) != 0) {
            free(copy);
            zmq_msg_init(&self->payloads[i]);
            return -ENOMEM;
        }
    }
    t->name = name;
    t->dtype = (zdist_dtype_t) m->dtype;
    t->data = zmq_msg_data(&self->payloads[i]);
    t->nbytes = have;
    return 0;
}

int
zdist_wire_recv(void *socket, bool routed, const zdist_wire_limits_t *limits, int flags, zdist_msg_t **ret_msg,
                zdist_error_t *err)
{
    zdist_wire_limits_t defaults;
    if (!limits) {
        zdist_wire_limits_default(&defaults);
        limits = &defaults;
    }
    zdist_msg_t *self = zdist_msg_new(0);
    if (!self)
        return -ENOMEM;
    int rc;
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    if (routed) {
        zmq_msg_init(&self->route);
        if (zmq_msg_recv(&self->route, socket, flags) < 0) {
            rc = -errno;
            zmq_msg_close(&self->route);
            zdist_msg_destroy(&self);
            return rc;
        }
        self->has_route = true;
        if (!s_has_more(socket)) {
            *ret_msg = self;
            return zdist_error_set(err, -EPROTO, "message has no header frame");
        }
        flags = 0; /* the rest of a multipart message is already here */
    }
    if (zmq_msg_recv(&frame, socket, flags) < 0) {
        rc = -errno;
        zmq_msg_close(&frame);
        zdist_msg_destroy(&self);
        return rc;
    }
    *ret_msg = self;
    const char *user_id = zmq_msg_gets(&frame, "User-Id");
    if (user_id)
        snprintf(self->user_id, sizeof self->user_id, "%s", user_id);
    self->source_fd = zmq_msg_get(&frame, ZMQ_SRCFD) + 1; /* -1 (none) becomes 0 */
    size_t total = zmq_msg_size(&frame);
    if (total > limits->max_message_bytes) {
        zmq_msg_close(&frame);
        return s_proto_error(socket, err, "header frame of %zu bytes exceeds the limit of %zu bytes", total,
                             limits->max_message_bytes);
    }
    Zdist__Header *h = zdist__header__unpack(NULL, zmq_msg_size(&frame), zmq_msg_data(&frame));
    zmq_msg_close(&frame);
    if (!h)
        return s_proto_error(socket, err, "header frame of %zu bytes does not decode as zdist.Header", total);
    if ((rc = s_adopt_header(self, h)) < 0) {
        s_drain(socket);
        return rc;
    }
    if (h->version != ZDIST_PROTOCOL_VERSION)
        return s_proto_error(socket, err, "protocol version %u, expected %d", h->version, ZDIST_PROTOCOL_VERSION);
    if (h->n_tensors > limits->max_tensors)
        return s_proto_error(socket, err, "%zu tensors exceed the limit of %zu", h->n_tensors,
                             limits->max_tensors);

    if ((rc = s_recv_payloads(socket, self, h->n_tensors, total, limits, err)) < 0)
        return rc;
    for (size_t i = 0; i < h->n_tensors; i++)
        if ((rc = s_adopt_tensor(self, i, h->tensors[i], err)) < 0)
            return rc;
    return 0;
}
