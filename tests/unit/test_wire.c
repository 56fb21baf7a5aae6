/* CUnit suite: wire framing over a real loopback socket pair. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "common.pb-c.h"
#include "wire/body.h"
#include "testutil.h"
#include "zdist/wire.h"

typedef struct {
    void *ctx;
    void *router;
    void *dealer;
} s_pair_t;

static void
s_pair_open(s_pair_t *p)
{
    p->ctx = zmq_ctx_new();
    p->router = zmq_socket(p->ctx, ZMQ_ROUTER);
    p->dealer = zmq_socket(p->ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(p->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(p->dealer, ZMQ_LINGER, &linger, sizeof linger);
    CU_ASSERT_EQUAL_FATAL(zmq_bind(p->router, "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(p->router, ZMQ_LAST_ENDPOINT, ep, &len);
    CU_ASSERT_EQUAL_FATAL(zmq_connect(p->dealer, ep), 0);
}

static void
s_pair_close(s_pair_t *p)
{
    zmq_close(p->router);
    zmq_close(p->dealer);
    zmq_ctx_term(p->ctx);
}

static atomic_int s_freed;

static void
s_count_free(void *data, void *hint)
{
    (void) data;
    (void) hint;
    atomic_fetch_add(&s_freed, 1);
}

/* Receives on the router with a generous wait. */
static int
s_recv(s_pair_t *p, const zdist_wire_limits_t *lim, zdist_msg_t **msg, zdist_error_t *err)
{
    zmq_pollitem_t item = {p->router, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, 5000) != 1)
        return -ETIMEDOUT;
    return zdist_wire_recv(p->router, true, lim, 0, msg, err);
}

static void
test_roundtrip_zero_copy(void)
{
    s_pair_t p;
    s_pair_open(&p);
    atomic_store(&s_freed, 0);

    static float values[6] = {1, 2, 3, 4, 5, 6};
    int64_t ids[4] = {7, 0, -3, 1LL << 40};
    zdist_msg_t *m = zdist_msg_new(42);
    zdist_msg_set_request_id(m, 99);
    zdist_msg_set_deadline_ms(m, 1500);
    zdist_msg_set_client_id(m, 0xabcdef);
    Zdist__PingReply body = ZDIST__PING_REPLY__INIT;
    body.role = "ps";
    body.uptime_ms = 12345;
    CU_ASSERT_EQUAL(zdist_msg_set_body(m, &body.base), 0);
    zdist_shape_t s23 = {.rank = 2, .dims = {2, 3}};
    zdist_shape_t s4 = {.rank = 1, .dims = {4}};
    CU_ASSERT_EQUAL(zdist_msg_add_tensor(m, "w", ZDIST_DTYPE_FLOAT32, &s23, values, sizeof values, s_count_free, NULL), 0);
    CU_ASSERT_EQUAL(zdist_msg_add_tensor_copy(m, "ids", ZDIST_DTYPE_INT64, &s4, ids, sizeof ids), 0);
    CU_ASSERT_EQUAL(zdist_msg_tensor_count(m), 2);
    CU_ASSERT_EQUAL(zdist_wire_send(p.dealer, &m, 0), 0);
    CU_ASSERT_PTR_NULL(m);

    zdist_msg_t *got = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(s_recv(&p, NULL, &got, &err), 0);
    CU_ASSERT_EQUAL(zdist_msg_method(got), 42);
    CU_ASSERT_EQUAL(zdist_msg_request_id(got), 99);
    CU_ASSERT_EQUAL(zdist_msg_deadline_ms(got), 1500);
    CU_ASSERT_EQUAL(zdist_msg_client_id(got), 0xabcdef);
    CU_ASSERT_NOT_EQUAL(zdist_msg_peer(got)[0], '\0');
    /* The TCP connection it came on, as libzmq's socket monitor names it;
       none for a message built here. */
    CU_ASSERT(zdist_msg_source_fd(got) > 2);
    zdist_msg_t *local = zdist_msg_new(42);
    CU_ASSERT_EQUAL(zdist_msg_source_fd(local), -1);
    zdist_msg_destroy(&local);
    ProtobufCMessage *pb = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_msg_unpack_body(got, &zdist__ping_reply__descriptor, &pb, &err), 0);
    Zdist__PingReply *r = (Zdist__PingReply *) pb;
    CU_ASSERT_STRING_EQUAL(r->role, "ps");
    CU_ASSERT_EQUAL(r->uptime_ms, 12345);
    protobuf_c_message_free_unpacked(pb, NULL);
    CU_ASSERT_EQUAL_FATAL(zdist_msg_tensor_count(got), 2);
    const zdist_tensor_t *t0 = zdist_msg_tensor(got, 0);
    CU_ASSERT_STRING_EQUAL(t0->name, "w");
    CU_ASSERT_EQUAL(t0->dtype, ZDIST_DTYPE_FLOAT32);
    CU_ASSERT_TRUE(zdist_shape_equal(&t0->shape, &s23));
    CU_ASSERT_EQUAL(t0->nbytes, sizeof values);
    CU_ASSERT_EQUAL(memcmp(t0->data, values, sizeof values), 0);
    const zdist_tensor_t *t1 = zdist_msg_tensor(got, 1);
    CU_ASSERT_EQUAL(t1->dtype, ZDIST_DTYPE_INT64);
    CU_ASSERT_EQUAL(memcmp(t1->data, ids, sizeof ids), 0);
    /* Small frames land at any address inside libzmq; handlers get them
       aligned for their dtype. */
    CU_ASSERT_EQUAL((uintptr_t) t0->data % sizeof(float), 0);
    CU_ASSERT_EQUAL((uintptr_t) t1->data % sizeof(int64_t), 0);
    CU_ASSERT_PTR_NULL(zdist_msg_tensor(got, 2));
    zdist_msg_destroy(&got);
    zdist_msg_destroy(&got); /* idempotent */

    /* The zero-copy buffer is handed back exactly once. */
    for (int i = 0; i < 500 && atomic_load(&s_freed) == 0; i++)
        usleep(1000);
    CU_ASSERT_EQUAL(atomic_load(&s_freed), 1);
    s_pair_close(&p);
}

static void
test_add_tensor_refusals(void)
{
    atomic_store(&s_freed, 0);
    zdist_msg_t *m = zdist_msg_new(1);
    float v[6] = {0};
    zdist_shape_t s23 = {.rank = 2, .dims = {2, 3}};
    CU_ASSERT_EQUAL(zdist_msg_add_tensor(m, "x", ZDIST_DTYPE_FLOAT32, &s23, v, 20, s_count_free, NULL), -EINVAL);
    CU_ASSERT_EQUAL(zdist_msg_add_tensor(m, "x", ZDIST_DTYPE_STRING, &s23, v, 24, s_count_free, NULL), -EINVAL);
    CU_ASSERT_EQUAL(zdist_msg_add_tensor(m, "x", ZDIST_DTYPE_FLOAT16, &s23, v, 12, s_count_free, NULL), -EINVAL);
    CU_ASSERT_EQUAL(zdist_msg_tensor_count(m), 0);
    CU_ASSERT_EQUAL(atomic_load(&s_freed), 0);
    /* Unsent zero-copy payloads are handed back on destroy. */
    CU_ASSERT_EQUAL(zdist_msg_add_tensor(m, "x", ZDIST_DTYPE_FLOAT32, &s23, v, 24, s_count_free, NULL), 0);
    zdist_msg_destroy(&m);
    CU_ASSERT_EQUAL(atomic_load(&s_freed), 1);
}

/* Sends raw frames from the dealer: a header built here plus payloads. */
static void
s_send_raw(void *sock, const void *const *frames, const size_t *sizes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        zmq_send(sock, frames[i], sizes[i], i + 1 < n ? ZMQ_SNDMORE : 0);
}

static size_t
s_pack_header(Zdist__Header *h, uint8_t *buf)
{
    return zdist__header__pack(h, buf);
}

static void
s_expect_proto(s_pair_t *p, const zdist_wire_limits_t *lim, uint64_t want_id, const char *want_text)
{
    zdist_msg_t *got = NULL;
    zdist_error_t err = {0};
    int rc = s_recv(p, lim, &got, &err);
    CU_ASSERT_EQUAL(rc, -EPROTO);
    CU_ASSERT_PTR_NOT_NULL(got);
    if (!strstr(err.text, want_text))
        fprintf(stderr, "\n  error text '%s' lacks '%s'\n", err.text, want_text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want_text));
    if (got) {
        CU_ASSERT_EQUAL(zdist_msg_request_id(got), want_id);
        CU_ASSERT_NOT_EQUAL(zdist_msg_peer(got)[0], '\0');
    }
    zdist_msg_destroy(&got);
}

/* After a bad message, a good one must still decode: no desync. */
static void
s_expect_good(s_pair_t *p)
{
    zdist_msg_t *m = zdist_msg_new(7);
    zdist_msg_set_request_id(m, 1234);
    CU_ASSERT_EQUAL(zdist_wire_send(p->dealer, &m, 0), 0);
    zdist_msg_t *got = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(s_recv(p, NULL, &got, &err), 0);
    if (got)
        CU_ASSERT_EQUAL(zdist_msg_request_id(got), 1234);
    zdist_msg_destroy(&got);
}

static void
test_malformed_messages(void)
{
    s_pair_t p;
    s_pair_open(&p);
    uint8_t hbuf[512];
    float payload[6] = {0};

    /* 1. garbage that is not a protobuf */
    const char *garbage = "\xff\xff\xff\xff garbage";
    zmq_send(p.dealer, garbage, strlen(garbage), 0);
    s_expect_proto(&p, NULL, 0, "does not decode");
    s_expect_good(&p);

    /* 2. wrong protocol version */
    Zdist__Header h = ZDIST__HEADER__INIT;
    h.version = 9;
    h.request_id = 5;
    size_t hl = s_pack_header(&h, hbuf);
    zmq_send(p.dealer, hbuf, hl, 0);
    s_expect_proto(&p, NULL, 5, "protocol version 9");
    s_expect_good(&p);

    /* 3. header describes a tensor whose frame is missing */
    Zdist__TensorMeta tm = ZDIST__TENSOR_META__INIT;
    Zdist__TensorMeta *tms[1] = {&tm};
    int64_t dims[2] = {2, 3};
    tm.dtype = ZDIST__DTYPE__DT_FLOAT32;
    tm.n_shape = 2;
    tm.shape = dims;
    tm.byte_length = 24;
    tm.frame = 1;
    h.version = 1;
    h.request_id = 6;
    h.n_tensors = 1;
    h.tensors = tms;
    hl = s_pack_header(&h, hbuf);
    zmq_send(p.dealer, hbuf, hl, 0);
    s_expect_proto(&p, NULL, 6, "describes 1 payload frames, message has 0");
    s_expect_good(&p);

    /* 4. payload shorter than dtype x shape */
    const void *fr[3] = {hbuf, payload, payload};
    size_t sz[3] = {hl, 20, 24};
    s_send_raw(p.dealer, fr, sz, 2);
    s_expect_proto(&p, NULL, 6, "needs 24 bytes, header says 24, frame holds 20");
    s_expect_good(&p);

    /* 5. an extra frame nobody described */
    sz[1] = 24;
    s_send_raw(p.dealer, fr, sz, 3);
    s_expect_proto(&p, NULL, 6, "message has 2");
    s_expect_good(&p);

    /* 6. byte_length disagrees with dtype x shape */
    tm.byte_length = 20;
    hl = s_pack_header(&h, hbuf);
    sz[0] = hl;
    sz[1] = 20;
    s_send_raw(p.dealer, fr, sz, 2);
    s_expect_proto(&p, NULL, 6, "header says 20");
    s_expect_good(&p);

    /* 7. a dtype that carries no data */
    tm.byte_length = 24;
    tm.dtype = 77;
    hl = s_pack_header(&h, hbuf);
    sz[0] = hl;
    sz[1] = 24;
    s_send_raw(p.dealer, fr, sz, 2);
    s_expect_proto(&p, NULL, 6, "unknown dtype 77");
    s_expect_good(&p);

    /* 8. wrong frame index */
    tm.dtype = ZDIST__DTYPE__DT_FLOAT32;
    tm.frame = 3;
    hl = s_pack_header(&h, hbuf);
    sz[0] = hl;
    s_send_raw(p.dealer, fr, sz, 2);
    s_expect_proto(&p, NULL, 6, "frame index 3");
    s_expect_good(&p);

    /* 9. over the size limit */
    tm.frame = 1;
    hl = s_pack_header(&h, hbuf);
    sz[0] = hl;
    zdist_wire_limits_t small;
    zdist_wire_limits_default(&small);
    small.max_message_bytes = 16;
    s_send_raw(p.dealer, fr, sz, 2);
    s_expect_proto(&p, &small, 6, "exceeds the limit of 16 bytes");
    s_expect_good(&p);

    /* 10. too many tensors */
    small.max_message_bytes = 1 << 20;
    small.max_tensors = 0;
    s_send_raw(p.dealer, fr, sz, 2);
    s_expect_proto(&p, &small, 6, "1 tensors exceed the limit of 0");
    s_expect_good(&p);

    /* 11. a negative dimension */
    small.max_tensors = 8;
    dims[1] = -3;
    hl = s_pack_header(&h, hbuf);
    sz[0] = hl;
    s_send_raw(p.dealer, fr, sz, 2);
    s_expect_proto(&p, &small, 6, "negative dimension");
    s_expect_good(&p);

    s_pair_close(&p);
}

static void
test_status_and_route(void)
{
    zdist_msg_t *m = zdist_msg_new(3);
    CU_ASSERT_EQUAL(zdist_msg_status(m), ZDIST_STATUS_OK);
    CU_ASSERT_STRING_EQUAL(zdist_msg_status_message(m), "");
    zdist_msg_set_status(m, ZDIST_STATUS_NOT_FOUND, "variable '%s' is unknown", "w");
    CU_ASSERT_EQUAL(zdist_msg_status(m), ZDIST_STATUS_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(zdist_msg_status_message(m), "variable 'w' is unknown");
    zdist_msg_t *other = zdist_msg_new(3);
    CU_ASSERT_EQUAL(zdist_msg_copy_route(other, m), -EINVAL); /* m has no route */
    zdist_msg_destroy(&other);
    zdist_msg_destroy(&m);
    CU_ASSERT_STRING_EQUAL(zdist_status_name(ZDIST_STATUS_DATA_LOSS), "DATA_LOSS");
    CU_ASSERT_EQUAL(zdist_status_from_errno(-EINVAL), ZDIST_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(zdist_status_from_errno(-ETIMEDOUT), ZDIST_STATUS_DEADLINE_EXCEEDED);
    CU_ASSERT_EQUAL(zdist_status_from_errno(-EPROTO), ZDIST_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(zdist_status_to_errno(ZDIST_STATUS_NOT_FOUND), -ENOENT);
    CU_ASSERT_EQUAL(zdist_status_to_errno(ZDIST_STATUS_OK), 0);
}

void
zdist_test_wire_register(void)
{
    ZDIST_SUITE("wire",
                {"roundtrip, zero-copy payload freed once", test_roundtrip_zero_copy},
                {"add_tensor refusals", test_add_tensor_refusals},
                {"malformed messages caught, no desync", test_malformed_messages},
                {"status, route, errno mapping", test_status_and_route});
}
