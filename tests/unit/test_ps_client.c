/* CUnit suite: the ps client's runs — pipelined ops over several ps tasks, retransmissions with the same
 * sequence. */
#include <czmq.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "testutil.h"
#include "zdist/ps_client.h"

/* A stand-in psd in a thread of its own: it applies each write once per
   (client id, sequence), answers a repeated one duplicate = true, and,
   when told to, loses replies (the call is held and never answered in
   time), as a psd does when the network drops them. */
#define S_MAX_SEEN 256

typedef struct {
    uint64_t client_id;
    uint64_t sequence;
} s_write_id_t;

typedef struct {
    zdist_rpc_server_t *server;
    pthread_t thread;
    atomic_int stop;
    pthread_mutex_t lock;
    int lose;                      /* lose the replies of the first `lose` arrivals of each write (-1: all) */
    s_write_id_t seen[S_MAX_SEEN]; /* every write that arrived, in order */
    int nseen;
    int applied; /* writes applied (first arrivals) */
    int reads;
    zdist_rpc_call_t *held[S_MAX_SEEN];
    int nheld;
} s_psd_t;

/* Arrivals of (client, sequence) before this one; under the lock. */
static int
s_arrivals(const s_psd_t *p, uint64_t client_id, uint64_t sequence)
{
    int n = 0;
    for (int i = 0; i < p->nseen; i++)
        n += p->seen[i].client_id == client_id && p->seen[i].sequence == sequence;
    return n;
}

static int
s_write(zdist_rpc_call_t *call, void *state)
{
    s_psd_t *p = state;
    const zdist_ps_write_t *w = zdist_rpc_call_body(call);
    uint64_t client_id = zdist_msg_client_id(zdist_rpc_call_request(call));
    pthread_mutex_lock(&p->lock);
    int before = s_arrivals(p, client_id, w->sequence);
    if (p->nseen < S_MAX_SEEN)
        p->seen[p->nseen++] = (s_write_id_t){client_id, w->sequence};
    if (before == 0)
        p->applied++;
    bool lose = p->lose < 0 || before < p->lose;
    if (lose && p->nheld < S_MAX_SEEN)
        p->held[p->nheld++] = zdist_rpc_call_defer(call);
    pthread_mutex_unlock(&p->lock);
    return lose ? 0 : zdist_ps_reply_set_write(zdist_rpc_call_reply(call), before > 0, (int64_t) w->sequence);
}

static int
s_pull(zdist_rpc_call_t *call, void *state)
{
    s_psd_t *p = state;
    const zdist_ps_pull_t *r = zdist_rpc_call_body(call);
    pthread_mutex_lock(&p->lock);
    p->reads++;
    pthread_mutex_unlock(&p->lock);
    /* One row holding the shard index, so a reply shows which request it answers. */
    float v = (float) r->shard_index;
    zdist_shape_t shape = {.rank = 1, .dims = {1}};
    return zdist_msg_add_tensor_copy(zdist_rpc_call_reply(call), r->name, ZDIST_DTYPE_FLOAT32, &shape, &v,
                                     sizeof v);
}

static const zdist_rpc_method_t s_methods[] = {
    {ZDIST_PS_PULL, "pull", &zdist_ps_body_pull, s_pull, 0, 0, 0},
    {ZDIST_PS_PUSH, "push", &zdist_ps_body_write, s_write, 1, 2, 0},
    {ZDIST_PS_ASSIGN, "assign", &zdist_ps_body_write, s_write, 1, 1, 0},
};

static void *
s_psd_loop(void *arg)
{
    s_psd_t *p = arg;
    while (!atomic_load(&p->stop)) {
        zmq_pollitem_t item = {zdist_rpc_server_socket(p->server), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 20) > 0)
            zdist_rpc_server_dispatch(p->server, 64);
    }
    /* Held calls are answered (too late) before the server goes. */
    for (int i = 0; i < p->nheld; i++)
        zdist_rpc_call_finish(&p->held[i]);
    return NULL;
}

static void
s_log_nothing(void *state, const char *line)
{
    (void) state, (void) line;
}

static s_psd_t *
s_psd_start(int lose)
{
    s_psd_t *p = calloc(1, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    p->lose = lose;
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = "ps";
    opts.log = s_log_nothing;
    zdist_error_t err = {0};
    p->server = zdist_rpc_server_new("tcp://127.0.0.1:*", s_methods, sizeof s_methods / sizeof s_methods[0],
                                     p, &opts, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p->server);
    pthread_create(&p->thread, NULL, s_psd_loop, p);
    return p;
}

static void
s_psd_stop(s_psd_t **p_p)
{
    s_psd_t *p = *p_p;
    atomic_store(&p->stop, 1);
    pthread_join(p->thread, NULL);
    zdist_rpc_server_destroy(&p->server);
    pthread_mutex_destroy(&p->lock);
    free(p);
    *p_p = NULL;
}

/* A client of p whose attempts time out after timeout_ms. */
static zdist_ps_client_t *
s_client(s_psd_t *p, int64_t timeout_ms, int retries)
{
    zdist_ps_client_options_t opts;
    zdist_ps_client_options_default(&opts);
    opts.timeout_ms = timeout_ms;
    opts.retries = retries;
    zdist_error_t err = {0};
    zdist_ps_client_t *c = zdist_ps_client_new(zdist_rpc_server_endpoint(p->server), &opts, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    return c;
}

static float s_values[4] = {1, 2, 3, 4};

static zdist_ps_op_t
s_assign_op(zdist_ps_client_t *c, int32_t shard)
{
    zdist_ps_op_t op = {.client = c, .request = {.method = ZDIST_PS_ASSIGN}};
    op.request.write = (zdist_ps_write_t){
        .name = "v",
        .shard_index = shard,
        .values = {
            .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {4}}, .data = s_values, .nbytes = sizeof s_values}};
    return op;
}

static zdist_ps_op_t
s_pull_op(zdist_ps_client_t *c, int32_t shard)
{
    return (zdist_ps_op_t){.client = c, .request = {.method = ZDIST_PS_PULL, .pull = {"v", shard, 0, 0}}};
}

static void
test_run_pipelines_over_tasks(void)
{
    s_psd_t *a = s_psd_start(0), *b = s_psd_start(0);
    zdist_ps_client_t *ca = s_client(a, 10000, 3), *cb = s_client(b, 10000, 3);
    zdist_ps_op_t ops[7] = {s_assign_op(ca, 0), s_pull_op(ca, 5),   s_assign_op(cb, 1), s_assign_op(ca, 2),
                            s_pull_op(cb, 6),   s_assign_op(cb, 3), s_assign_op(ca, 4)};
    /* A write with its own sequence keeps it. */
    ops[6].request.write.sequence = 1000;
    zdist_ps_client_run(ops, 7);
    for (int i = 0; i < 7; i++) {
        CU_ASSERT_EQUAL(ops[i].rc, 0);
        CU_ASSERT_EQUAL(ops[i].attempts, 1);
        CU_ASSERT_EQUAL(zdist_msg_status(ops[i].reply), ZDIST_STATUS_OK);
    }
    /* Writes are numbered per client, in op order. */
    CU_ASSERT_EQUAL(ops[0].request.write.sequence, 1);
    CU_ASSERT_EQUAL(ops[3].request.write.sequence, 2);
    CU_ASSERT_EQUAL(ops[2].request.write.sequence, 1);
    CU_ASSERT_EQUAL(ops[5].request.write.sequence, 2);
    CU_ASSERT_EQUAL(ops[6].request.write.sequence, 1000);
    int64_t step = 0;
    CU_ASSERT_EQUAL(zdist_ps_reply_write(ops[6].reply, NULL, &step, NULL), 0);
    CU_ASSERT_EQUAL(step, 1000);
    /* Each reply answers its own request. */
    zdist_tensor_t t;
    CU_ASSERT_EQUAL_FATAL(zdist_ps_reply_values(ops[1].reply, &t, NULL), 0);
    CU_ASSERT_EQUAL(*(const float *) t.data, 5.0f);
    CU_ASSERT_EQUAL_FATAL(zdist_ps_reply_values(ops[4].reply, &t, NULL), 0);
    CU_ASSERT_EQUAL(*(const float *) t.data, 6.0f);
    zdist_ps_ops_release(ops, 7);
    for (int i = 0; i < 7; i++)
        CU_ASSERT_PTR_NULL(ops[i].reply);
    CU_ASSERT_EQUAL(a->applied, 3);
    CU_ASSERT_EQUAL(b->applied, 2);
    CU_ASSERT_EQUAL(a->reads + b->reads, 2);
    CU_ASSERT_EQUAL(zdist_ps_client_retransmissions(ca) + zdist_ps_client_retransmissions(cb), 0);
    zdist_ps_client_destroy(&ca);
    zdist_ps_client_destroy(&cb);
    s_psd_stop(&a);
    s_psd_stop(&b);
}

static void
test_run_retransmits_with_the_same_sequence(void)
{
    /* Every write's first reply is lost: each is sent again, once, with
       the same client id and sequence, and applied once. */
    s_psd_t *p = s_psd_start(1);
    zdist_ps_client_t *c = s_client(p, 300, 3);
    zdist_ps_op_t ops[4] = {s_assign_op(c, 0), s_assign_op(c, 1), s_pull_op(c, 2), s_assign_op(c, 3)};
    zdist_ps_client_run(ops, 4);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(ops[i].rc, 0);
        CU_ASSERT_EQUAL(zdist_msg_status(ops[i].reply), ZDIST_STATUS_OK);
    }
    CU_ASSERT_EQUAL(ops[2].attempts, 1); /* the read was answered */
    for (int i = 0; i < 4; i++) {
        if (i == 2)
            continue;
        CU_ASSERT_EQUAL(ops[i].attempts, 2);
        bool dup = false;
        CU_ASSERT_EQUAL(zdist_ps_reply_write(ops[i].reply, &dup, NULL, NULL), 0);
        CU_ASSERT_TRUE(dup);
    }
    zdist_ps_ops_release(ops, 4);
    CU_ASSERT_EQUAL(zdist_ps_client_retransmissions(c), 3);
    pthread_mutex_lock(&p->lock);
    CU_ASSERT_EQUAL(p->applied, 3);
    CU_ASSERT_EQUAL_FATAL(p->nseen, 6);
    uint64_t id = zdist_rpc_client_id(zdist_ps_client_rpc(c));
    for (uint64_t seq = 1; seq <= 3; seq++)
        CU_ASSERT_EQUAL(s_arrivals(p, id, seq), 2);
    /* The first attempts went out together, before any retransmission. */
    CU_ASSERT_EQUAL(p->seen[0].sequence, 1);
    CU_ASSERT_EQUAL(p->seen[1].sequence, 2);
    CU_ASSERT_EQUAL(p->seen[2].sequence, 3);
    pthread_mutex_unlock(&p->lock);

    /* The synchronous calls are runs of one: the same machinery. */
    zdist_tensor_t v = {
        .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {4}}, .data = s_values, .nbytes = sizeof s_values};
    zdist_ps_write_result_t res = {0};
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_ps_client_assign(c, "v", 0, 0, 0, &v, &res, &err), 0);
    CU_ASSERT_EQUAL(res.sequence, 4);
    CU_ASSERT_TRUE(res.duplicate);
    CU_ASSERT_EQUAL(zdist_ps_client_retransmissions(c), 4);
    zdist_ps_client_destroy(&c);
    s_psd_stop(&p);
}

static void
test_run_gives_up_after_the_retries(void)
{
    s_psd_t *p = s_psd_start(-1);
    zdist_ps_client_t *c = s_client(p, 200, 2);
    zdist_ps_op_t ops[2] = {s_assign_op(c, 0), s_assign_op(c, 1)};
    zdist_ps_client_run(ops, 2);
    zdist_error_t err = {0};
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(ops[i].rc, 0);
        CU_ASSERT_EQUAL(ops[i].attempts, 3);
        CU_ASSERT_EQUAL(zdist_ps_reply_write(ops[i].reply, NULL, NULL, &err), -ETIMEDOUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "DEADLINE_EXCEEDED"));
    }
    zdist_ps_ops_release(ops, 2);
    pthread_mutex_lock(&p->lock);
    CU_ASSERT_EQUAL(p->applied, 2);
    CU_ASSERT_EQUAL(p->nseen, 6);
    pthread_mutex_unlock(&p->lock);

    /* The synchronous call reports it with the operation and endpoint. */
    zdist_tensor_t v = {
        .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {4}}, .data = s_values, .nbytes = sizeof s_values};
    CU_ASSERT_EQUAL(zdist_ps_client_assign(c, "v", 0, 0, 0, &v, NULL, &err), -ETIMEDOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "assign 'v' on tcp://127.0.0.1:"));
    zdist_ps_client_destroy(&c);
    s_psd_stop(&p);
}

static void
test_run_bad_ops_and_hand_pipelined_calls(void)
{
    s_psd_t *p = s_psd_start(0);
    zdist_ps_client_t *c = s_client(p, 10000, 3);
    zdist_rpc_client_t *rpc = zdist_ps_client_rpc(c);
    /* A call pipelined by hand on the client's connection... */
    uint64_t id;
    zdist_msg_t *req = zdist_ps_request_pull("v", 9, 0, 0);
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_send(rpc, &req, 10000, &id), 0);

    zdist_ps_op_t ops[3] = {s_assign_op(c, 0), s_assign_op(NULL, 1), s_assign_op(c, 2)};
    ops[2].request.write.values.nbytes -= sizeof(float); /* does not match its shape */
    zdist_ps_client_run(ops, 3);
    CU_ASSERT_EQUAL(ops[0].rc, 0);
    CU_ASSERT_EQUAL(zdist_msg_status(ops[0].reply), ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL(ops[1].rc, -EINVAL);
    CU_ASSERT_EQUAL(ops[2].rc, -EINVAL);
    CU_ASSERT_PTR_NULL(ops[1].reply);
    CU_ASSERT_PTR_NULL(ops[2].reply);
    CU_ASSERT_EQUAL(ops[2].attempts, 0);
    zdist_ps_ops_release(ops, 3);
    pthread_mutex_lock(&p->lock);
    CU_ASSERT_EQUAL(p->nseen, 1);
    pthread_mutex_unlock(&p->lock);

    /* ... stays queued for its owner through the run. */
    zdist_msg_t *reply = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_recv_id(rpc, id, -1, &reply), 0);
    zdist_tensor_t t;
    CU_ASSERT_EQUAL_FATAL(zdist_ps_reply_values(reply, &t, NULL), 0);
    CU_ASSERT_EQUAL(*(const float *) t.data, 9.0f);
    zdist_msg_destroy(&reply);
    CU_ASSERT_EQUAL(zdist_rpc_client_recv_id(rpc, id, -1, &reply), -ENOENT);
    CU_ASSERT_EQUAL(zdist_rpc_client_recv_id(rpc, 0, 0, &reply), -EINVAL);
    zdist_ps_client_run(NULL, 0);
    zdist_ps_client_destroy(&c);
    s_psd_stop(&p);
}

/* ---- dense pushes in parts, against a real psd (psd_server_actor) ---- */

#define S_ROWS 64
#define S_COLS 1024 /* 4 KiB rows: a 256 KiB gradient */

static void
s_create(zdist_ps_client_t *c, const char *name, int32_t shard, int64_t offset, int64_t rows)
{
    zdist_ps_var_spec_t spec = {.name = name,
                                .dtype = ZDIST_DTYPE_FLOAT32,
                                .shape = {2, {2 * S_ROWS, S_COLS}},
                                .shard_index = shard,
                                .row_offset = offset,
                                .row_count = rows,
                                .init = {.kind = ZDIST_INIT_CONSTANT, .value = 0.5}};
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_create(c, &spec, NULL, &err), 0);
}

static void
s_pull_all(zdist_ps_client_t *c, const char *name, int32_t shard, float *out)
{
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = out, .nbytes = S_ROWS * S_COLS * sizeof(float)};
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_pull(c, name, shard, 0, 0, &t, NULL), 0);
}

/* A 256 KiB Adam push through a client with 64 KiB parts goes as 4
   requests and leaves exactly what the same push sent whole leaves: the
   same values, bit for bit, and the step advanced once per push. Sent again
   with its first part's sequence, every part is acknowledged duplicate. */
static void
test_push_in_parts_applies_as_one(void)
{
    char endpoint[256];
    zactor_t *psd = zdist_test_psd_start(0, endpoint, sizeof endpoint);
    zdist_ps_client_options_t opts;
    zdist_ps_client_options_default(&opts);
    CU_ASSERT_EQUAL(opts.part_bytes, ZDIST_PS_PART_BYTES);
    opts.part_bytes = 64 << 10;
    zdist_error_t err = {0};
    zdist_ps_client_t *parted = zdist_ps_client_new(endpoint, &opts, &err);
    opts.part_bytes = 0;
    zdist_ps_client_t *whole = zdist_ps_client_new(endpoint, &opts, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(parted);
    CU_ASSERT_PTR_NOT_NULL_FATAL(whole);
    /* Shard 1 of each: rows 64..127, so the parts' rows are not global rows by chance. */
    s_create(whole, "a", 1, S_ROWS, S_ROWS);
    s_create(whole, "b", 1, S_ROWS, S_ROWS);
    zdist_optim_config_t adam;
    zdist_optim_config_default(&adam, ZDIST_OPTIM_ADAM);
    adam.learning_rate = 0.01;
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_set_optimizer(whole, &adam, &err), 0);

    static float grad[S_ROWS * S_COLS], va[S_ROWS * S_COLS], vb[S_ROWS * S_COLS];
    zdist_tensor_t g = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {S_ROWS, S_COLS}}, .data = grad,
                        .nbytes = sizeof grad};
    zdist_ps_write_result_t ra = {0}, rb = {0};
    for (int step = 1; step <= 2; step++) {
        for (size_t i = 0; i < S_ROWS * S_COLS; i++)
            grad[i] = (float) ((i * 7919 + (size_t) step * 104729) % 2001) / 1000.0f - 1.0f;
        uint64_t before = zdist_test_psd_requests(whole, "push");
        CU_ASSERT_EQUAL_FATAL(zdist_ps_client_push(parted, "a", 1, 0, 0, &g, &ra, &err), 0);
        CU_ASSERT_EQUAL(zdist_test_psd_requests(whole, "push") - before, 4);
        CU_ASSERT_EQUAL_FATAL(zdist_ps_client_push(whole, "b", 1, 0, 0, &g, &rb, &err), 0);
        CU_ASSERT_EQUAL(zdist_test_psd_requests(whole, "push") - before, 5);
        CU_ASSERT_EQUAL(ra.step, step);
        CU_ASSERT_EQUAL(rb.step, step);
        CU_ASSERT_FALSE(ra.duplicate);
    }
    s_pull_all(whole, "a", 1, va);
    s_pull_all(whole, "b", 1, vb);
    CU_ASSERT_NOT_EQUAL(va[0], 0.5f);
    CU_ASSERT_EQUAL(memcmp(va, vb, sizeof va), 0);

    /* A row range (global rows 70..100, 31 rows: 2 parts) the same way. */
    zdist_tensor_t part = g;
    part.shape.dims[0] = 31;
    part.nbytes = 31 * S_COLS * sizeof(float);
    zdist_ps_write_result_t pa = {0}, pb = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_push(parted, "a", 1, 70, 31, &part, &pa, &err), 0);
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_push(whole, "b", 1, 70, 31, &part, &pb, &err), 0);
    CU_ASSERT_EQUAL(pa.step, 3);
    CU_ASSERT_EQUAL(pb.step, 3);
    s_pull_all(whole, "a", 1, va);
    s_pull_all(whole, "b", 1, vb);
    CU_ASSERT_EQUAL(memcmp(va, vb, sizeof va), 0);

    /* The last whole-shard push again, with its sequence: the same 4 parts, all duplicates. */
    zdist_ps_write_result_t again = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_write_seq(parted, ZDIST_PS_PUSH, "a", 1, 0, 0, ra.sequence, &g, &again,
                                                    &err), 0);
    CU_ASSERT_TRUE(again.duplicate);
    CU_ASSERT_EQUAL(again.step, 3);
    CU_ASSERT_EQUAL(again.sequence, ra.sequence);
    s_pull_all(whole, "a", 1, vb);
    CU_ASSERT_EQUAL(memcmp(va, vb, sizeof va), 0);
    /* The client's own numbering went past the parts: a new push applies. */
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_push(parted, "a", 1, 0, 0, &g, &ra, &err), 0);
    CU_ASSERT_FALSE(ra.duplicate);
    CU_ASSERT_EQUAL(ra.step, 4);

    zdist_ps_client_destroy(&parted);
    zdist_ps_client_destroy(&whole);
    zactor_destroy(&psd);
}

/* Parts that do not fit are refused, naming the rows; only a dense push is
   split, and only a dense push may be sent in parts. */
static void
test_parts_that_do_not_fit(void)
{
    char endpoint[256];
    zactor_t *psd = zdist_test_psd_start(0, endpoint, sizeof endpoint);
    zdist_error_t err = {0};
    zdist_ps_client_t *c = zdist_ps_client_new(endpoint, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    s_create(c, "a", 0, 0, S_ROWS);

    static float rows[8 * S_COLS];
    zdist_ps_write_t w = {.name = "a",
                          .sequence = 1,
                          .part_row = S_ROWS - 4, /* 8 rows from row 60 of a 64-row shard */
                          .more_parts = true,
                          .values = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {8, S_COLS}}, .data = rows,
                                     .nbytes = sizeof rows}};
    zdist_msg_t *req = zdist_ps_request_write_from(ZDIST_PS_PUSH, &w, NULL, NULL), *reply = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(req);
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_call(c, &req, &reply, &err), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(zdist_msg_status_message(reply), "part_row 60 is outside the shard's 64 rows"));
    zdist_msg_destroy(&reply);
    /* Within a row range: 8 rows from part_row 4 of a 10-row write. */
    w.row_start = 0;
    w.row_count = 10;
    w.part_row = 4;
    req = zdist_ps_request_write_from(ZDIST_PS_PUSH, &w, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_call(c, &req, &reply, &err), 0);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(zdist_msg_status_message(reply), "does not fit the write's rows (row_count 10"));
    zdist_msg_destroy(&reply);
    /* An assign is never sent in parts, nor split. */
    CU_ASSERT_PTR_NULL(zdist_ps_request_write_from(ZDIST_PS_ASSIGN, &w, NULL, NULL));
    zdist_ps_write_t parts[ZDIST_PS_MAX_PARTS];
    w.part_row = 0;
    w.more_parts = false;
    CU_ASSERT_EQUAL(zdist_ps_write_parts(ZDIST_PS_ASSIGN, &w, 1024, parts), 1);
    CU_ASSERT_EQUAL(zdist_ps_write_parts(ZDIST_PS_PUSH, &w, 1024, parts), 8);
    CU_ASSERT_EQUAL(parts[7].part_row, 7);
    CU_ASSERT_FALSE(parts[7].more_parts);
    CU_ASSERT_TRUE(parts[6].more_parts);
    CU_ASSERT_EQUAL(parts[7].sequence, 8);
    /* Never more than ZDIST_PS_MAX_PARTS, however small the parts asked for. */
    static float big[2 * S_ROWS * S_COLS];
    w.values = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {2 * S_ROWS * 4, S_COLS / 4}},
                                .data = big, .nbytes = sizeof big};
    CU_ASSERT_EQUAL(zdist_ps_write_parts(ZDIST_PS_PUSH, &w, 1, parts), ZDIST_PS_MAX_PARTS);
    /* A push under a job step names one write: whole. */
    w.job_step = 3;
    CU_ASSERT_EQUAL(zdist_ps_write_parts(ZDIST_PS_PUSH, &w, 1024, parts), 1);
    zdist_ps_client_destroy(&c);
    zactor_destroy(&psd);
}

void
zdist_test_ps_client_register(void)
{
    ZDIST_SUITE("ps_client", {"run pipelines over ps tasks", test_run_pipelines_over_tasks},
                {"run retransmits with the same sequence", test_run_retransmits_with_the_same_sequence},
                {"run gives up after the retries", test_run_gives_up_after_the_retries},
                {"bad ops, and calls pipelined by hand", test_run_bad_ops_and_hand_pipelined_calls},
                {"a dense push in parts applies as one push", test_push_in_parts_applies_as_one},
                {"parts that do not fit are refused", test_parts_that_do_not_fit});
}
