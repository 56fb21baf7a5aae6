/* CUnit suite: the ps service's typed messages — encoders, the psd's checked body types, replies. */
#include <czmq.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "testutil.h"
#include "zdist/ps_service.h"
#include "zdist/rpc.h"

/* A server whose handlers record the typed request they were given (copying
   what is borrowed), and a client; both driven from this thread. */
typedef struct {
    zdist_rpc_server_t *server;
    zdist_rpc_client_t *client;
    int calls;
    zdist_ps_request_t seen;
    char name[512];
    char init_name[64]; /* create's, "(none)" when absent */
    int64_t ids[16];
    double values[64];
    /* push_pull: what the handler saw of each item */
    size_t pp_nitems;
    uint64_t pp_sequence, pp_job_step;
    zdist_ps_push_pull_item_t pp_items[4];
    char pp_names[4][32];
} s_fixture_t;

static void
s_record_name(s_fixture_t *f, const char **field)
{
    snprintf(f->name, sizeof f->name, "%s", *field);
    *field = f->name;
}

static int
s_record(zdist_rpc_call_t *call, void *state)
{
    s_fixture_t *f = state;
    uint32_t method = zdist_rpc_call_method(call);
    const void *body = zdist_rpc_call_body(call);
    f->calls++;
    memset(&f->seen, 0, sizeof f->seen);
    f->seen.method = method;
    zdist_msg_t *reply = zdist_rpc_call_reply(call);
    switch (method) {
    case ZDIST_PS_CREATE:
        f->seen.create = *(const zdist_ps_var_spec_t *) body;
        s_record_name(f, &f->seen.create.name);
        snprintf(f->init_name, sizeof f->init_name, "%s",
                 f->seen.create.init_name ? f->seen.create.init_name : "(none)");
        f->seen.create.init_name = f->init_name;
        return zdist_ps_reply_set_create(reply, true);
    case ZDIST_PS_PULL:
        f->seen.pull = *(const zdist_ps_pull_t *) body;
        s_record_name(f, &f->seen.pull.name);
        return 0;
    case ZDIST_PS_PULL_ROWS:
        f->seen.pull_rows = *(const zdist_ps_pull_rows_t *) body;
        s_record_name(f, &f->seen.pull_rows.name);
        if (f->seen.pull_rows.nids <= 16)
            memcpy(f->ids, f->seen.pull_rows.ids, f->seen.pull_rows.nids * sizeof *f->ids);
        f->seen.pull_rows.ids = f->ids;
        return 0;
    case ZDIST_PS_SAVE:
        f->seen.save = *(const zdist_ps_save_t *) body;
        s_record_name(f, &f->seen.save.dir);
        return zdist_ps_reply_set_save(reply, 4096);
    case ZDIST_PS_RESTORE:
        f->seen.restore = *(const zdist_ps_restore_t *) body;
        s_record_name(f, &f->seen.restore.dir);
        return zdist_ps_reply_set_restore(reply, 77);
    case ZDIST_PS_STATS:
        return 0;
    case ZDIST_PS_DROP_JOB:
        f->seen.drop_job = *(const zdist_ps_drop_job_t *) body;
        s_record_name(f, &f->seen.drop_job.job);
        return zdist_ps_reply_set_drop_job(reply, 3, 1ull << 33);
    case ZDIST_PS_SET_OPTIMIZER:
        f->seen.optimizer = *(const zdist_optim_config_t *) body;
        return zdist_ps_reply_set_write(reply, false, 0);
    case ZDIST_PS_PUSH_PULL: {
        /* Answers item i with duplicate = (i odd), step 10 + i, and for a
           pull a float32 [2] tensor {i, i}. */
        const zdist_ps_push_pull_t *pp = body;
        f->pp_nitems = pp->nitems;
        f->pp_sequence = pp->sequence;
        f->pp_job_step = pp->job_step;
        bool dup[4];
        int64_t step[4];
        for (size_t i = 0; i < pp->nitems && i < 4; i++) {
            f->pp_items[i] = pp->items[i];
            snprintf(f->pp_names[i], sizeof f->pp_names[i], "%s", pp->items[i].name);
            f->pp_items[i].name = f->pp_names[i];
            f->pp_items[i].ids = NULL;
            f->pp_items[i].grad.data = NULL;
            if (pp->items[i].by_ids && pp->items[i].nids)
                f->ids[i] = pp->items[i].ids[pp->items[i].nids - 1]; /* the last id of item i */
            dup[i] = i % 2 == 1;
            step[i] = 10 + (int64_t) i;
            if (pp->items[i].pull) {
                float v[2] = {(float) i, (float) i};
                zdist_shape_t shape = {.rank = 1, .dims = {2}};
                zdist_msg_add_tensor_copy(reply, pp->items[i].name, ZDIST_DTYPE_FLOAT32, &shape, v, sizeof v);
            }
        }
        return zdist_ps_reply_set_push_pull(reply, pp->nitems, dup, step);
    }
    default: {
        zdist_ps_write_t *w = &f->seen.write;
        *w = *(const zdist_ps_write_t *) body;
        s_record_name(f, &w->name);
        if (w->by_ids && w->nids <= 16)
            memcpy(f->ids, w->ids, w->nids * sizeof *f->ids);
        w->ids = w->by_ids ? f->ids : NULL;
        if (w->values.nbytes <= sizeof f->values)
            memcpy(f->values, w->values.data, w->values.nbytes);
        w->values.data = f->values;
        w->values.name = NULL;
        return zdist_ps_reply_set_write(reply, true, 5);
    }
    }
}

static const zdist_rpc_method_t s_methods[] = {
    {ZDIST_PS_CREATE, "create", &zdist_ps_body_create, s_record, 0, 0, 0},
    {ZDIST_PS_PULL, "pull", &zdist_ps_body_pull, s_record, 0, 0, 0},
    {ZDIST_PS_PULL_ROWS, "pull_rows", &zdist_ps_body_pull_rows, s_record, 1, 1, 0},
    {ZDIST_PS_PUSH, "push", &zdist_ps_body_write, s_record, 1, 2, 0},
    {ZDIST_PS_ASSIGN, "assign", &zdist_ps_body_write, s_record, 1, 1, 0},
    {ZDIST_PS_SCATTER_ADD, "scatter_add", &zdist_ps_body_write, s_record, 0, 2, 0},
    {ZDIST_PS_SAVE, "save", &zdist_ps_body_save, s_record, 0, 0, 0},
    {ZDIST_PS_RESTORE, "restore", &zdist_ps_body_restore, s_record, 0, 0, 0},
    {ZDIST_PS_STATS, "stats", &zdist_ps_body_stats, s_record, 0, 0, 0},
    {ZDIST_PS_SET_OPTIMIZER, "set_optimizer", &zdist_ps_body_set_optimizer, s_record, 0, 0, 0},
    {ZDIST_PS_PUSH_PULL, "push_pull", &zdist_ps_body_push_pull, s_record, 0, 16, 0},
    {ZDIST_PS_DROP_JOB, "drop_job", &zdist_ps_body_drop_job, s_record, 0, 0, 0},
};

static void
s_log_nothing(void *state, const char *line)
{
    (void) state, (void) line;
}

static s_fixture_t *
s_fixture_new(void)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = "ps";
    opts.log = s_log_nothing;
    zdist_error_t err = {0};
    f->server = zdist_rpc_server_new("tcp://127.0.0.1:*", s_methods, sizeof s_methods / sizeof s_methods[0],
                                     f, &opts, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->server);
    f->client = zdist_rpc_client_new(zdist_rpc_server_endpoint(f->server), NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->client);
    return f;
}

static void
s_fixture_destroy(s_fixture_t **f_p)
{
    s_fixture_t *f = *f_p;
    zdist_rpc_client_destroy(&f->client);
    zdist_rpc_server_destroy(&f->server);
    free(f);
    *f_p = NULL;
}

/* Sends req (taken) and serves it here; the reply, or NULL. */
static zdist_msg_t *
s_exchange(s_fixture_t *f, zdist_msg_t *req)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(req);
    uint64_t id;
    CU_ASSERT_EQUAL_FATAL(zdist_rpc_client_send(f->client, &req, 10000, &id), 0);
    zdist_msg_t *reply = NULL;
    while (!reply) {
        zmq_pollitem_t item = {zdist_rpc_server_socket(f->server), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 10) > 0)
            zdist_rpc_server_dispatch(f->server, 16);
        if (zdist_rpc_client_recv(f->client, 0, &reply) < 0)
            reply = NULL;
    }
    CU_ASSERT_EQUAL(zdist_msg_request_id(reply), id);
    return reply;
}

/* req must be refused INVALID_ARGUMENT before any handler, with `want` in
   the message. */
static void
s_refused(s_fixture_t *f, zdist_msg_t *req, const char *want)
{
    int calls = f->calls;
    zdist_msg_t *reply = s_exchange(f, req);
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_INVALID_ARGUMENT);
    const char *text = zdist_msg_status_message(reply);
    if (!strstr(text, want))
        fprintf(stderr, "\n  message '%s' lacks '%s'\n", text, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, want));
    CU_ASSERT_EQUAL(f->calls, calls);
    zdist_msg_destroy(&reply);
}

static zdist_ps_var_spec_t
s_spec(const char *name, int64_t rows, int64_t cols)
{
    zdist_ps_var_spec_t s = {0};
    s.name = name;
    s.dtype = ZDIST_DTYPE_FLOAT32;
    s.shape.rank = 2;
    s.shape.dims[0] = rows;
    s.shape.dims[1] = cols;
    s.row_count = rows;
    return s;
}

static int s_freed;

static void
s_count_free(void *data, void *hint)
{
    (void) data, (void) hint;
    s_freed++;
}

static void
test_push_pull(void)
{
    s_fixture_t *f = s_fixture_new();
    float dense[6] = {1, 2, 3, 4, 5, 6}, rows[4] = {7, 8, 9, 10};
    int64_t ids[2] = {3, 5};
    zdist_ps_push_pull_item_t items[3] = {
        {.name = "w",
         .shard_index = 1,
         .push = true,
         .grad = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {3, 2}}, .data = dense, .nbytes = sizeof dense},
         .pull = true},
        {.name = "emb",
         .push = true,
         .by_ids = true,
         .ids = ids,
         .nids = 2,
         .grad = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {2, 2}}, .data = rows, .nbytes = sizeof rows},
         .step_write = 2},
        {.name = "b", .pull = true},
    };
    zdist_ps_push_pull_t pp = {.sequence = 42, .job_step = 1234, .items = items, .nitems = 3};
    s_freed = 0;
    zdist_msg_t *req = zdist_ps_request_push_pull(&pp, s_count_free, NULL);
    CU_ASSERT_EQUAL(zdist_msg_tensor_count(req), 3); /* w's gradient, emb's ids and rows */
    zdist_msg_t *reply = s_exchange(f, req);
    CU_ASSERT_EQUAL(s_freed, 3); /* every zero-copy buffer released once */
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL(f->pp_nitems, 3);
    CU_ASSERT_EQUAL(f->pp_sequence, 42);
    CU_ASSERT_EQUAL(f->pp_job_step, 1234);
    CU_ASSERT_EQUAL(f->pp_items[0].step_write, 0);
    CU_ASSERT_EQUAL(f->pp_items[1].step_write, 2);
    CU_ASSERT_STRING_EQUAL(f->pp_items[0].name, "w");
    CU_ASSERT_EQUAL(f->pp_items[0].shard_index, 1);
    CU_ASSERT_TRUE(f->pp_items[0].push && !f->pp_items[0].by_ids && f->pp_items[0].pull);
    CU_ASSERT_EQUAL(f->pp_items[0].grad.nbytes, sizeof dense);
    CU_ASSERT_TRUE(f->pp_items[1].push && f->pp_items[1].by_ids && !f->pp_items[1].pull);
    CU_ASSERT_EQUAL(f->pp_items[1].nids, 2);
    CU_ASSERT_EQUAL(f->ids[1], 5);
    CU_ASSERT_EQUAL(f->pp_items[1].grad.nbytes, sizeof rows);
    CU_ASSERT_TRUE(!f->pp_items[2].push && f->pp_items[2].pull);
    bool dup[3];
    int64_t step[3];
    zdist_tensor_t vals[3];
    CU_ASSERT_EQUAL(zdist_ps_reply_push_pull(reply, &pp, dup, step, vals, NULL), 0);
    CU_ASSERT_TRUE(!dup[0] && dup[1] && !dup[2]);
    CU_ASSERT_TRUE(step[0] == 10 && step[1] == 11 && step[2] == 12);
    CU_ASSERT_EQUAL(vals[0].nbytes, 2 * sizeof(float));
    CU_ASSERT_EQUAL(((const float *) vals[0].data)[0], 0);
    CU_ASSERT_PTR_NULL(vals[1].data); /* no pull */
    CU_ASSERT_EQUAL(((const float *) vals[2].data)[1], 2);
    /* The reply read against a request it does not answer. */
    zdist_error_t err = {0};
    zdist_ps_push_pull_t other = {.items = items, .nitems = 2};
    CU_ASSERT_EQUAL(zdist_ps_reply_push_pull(reply, &other, NULL, NULL, NULL, &err), -EPROTO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "for 2 items"));
    zdist_msg_destroy(&reply);

    /* Refused before the handler: a shard twice, tensors the items do not take. */
    zdist_ps_push_pull_item_t twice[2] = {items[0], items[0]};
    pp = (zdist_ps_push_pull_t){.items = twice, .nitems = 2};
    s_refused(f, zdist_ps_request_push_pull(&pp, NULL, NULL), "send one item per shard");
    zdist_ps_push_pull_item_t many = items[0];
    many.step_write = ZDIST_PS_MAX_STEP_WRITE + 1;
    pp = (zdist_ps_push_pull_t){.job_step = 3, .items = &many, .nitems = 1};
    s_refused(f, zdist_ps_request_push_pull(&pp, NULL, NULL), "item 0 ('w'): step_write 65536 is above 65535");
    pp = (zdist_ps_push_pull_t){.items = &items[2], .nitems = 1};
    req = zdist_ps_request_push_pull(&pp, NULL, NULL);
    CU_ASSERT_EQUAL(zdist_msg_add_tensor_copy(req, "extra", ZDIST_DTYPE_FLOAT32, &items[0].grad.shape, dense,
                                              sizeof dense),
                    0);
    s_refused(f, req, "take 0 tensors, got 1");
    /* Encoders refuse what cannot be sent: ids and rows disagreeing (ffn
       still called for every buffer). */
    zdist_ps_push_pull_item_t bad = items[1];
    bad.nids = 1;
    pp = (zdist_ps_push_pull_t){.items = &bad, .nitems = 1};
    s_freed = 0;
    CU_ASSERT_PTR_NULL(zdist_ps_request_push_pull(&pp, s_count_free, NULL));
    CU_ASSERT_EQUAL(s_freed, 2);
    s_fixture_destroy(&f);
}

static void
test_requests_round_trip(void)
{
    s_fixture_t *f = s_fixture_new();

    zdist_ps_var_spec_t spec = s_spec("layer/kernel", 13, 4);
    spec.shard_index = 2;
    spec.row_offset = 6;
    spec.row_count = 3;
    spec.init.kind = ZDIST_INIT_RANDOM_UNIFORM;
    spec.init.minval = -0.5;
    spec.init.maxval = 0.25;
    spec.seed = 99;
    spec.init_name = "kernel";
    zdist_msg_t *reply = s_exchange(f, zdist_ps_request_create(&spec));
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    bool created = false;
    CU_ASSERT_EQUAL(zdist_ps_reply_create(reply, &created, NULL), 0);
    CU_ASSERT_TRUE(created);
    zdist_msg_destroy(&reply);
    const zdist_ps_var_spec_t *got = &f->seen.create;
    CU_ASSERT_EQUAL(f->seen.method, ZDIST_PS_CREATE);
    CU_ASSERT_STRING_EQUAL(got->name, "layer/kernel");
    CU_ASSERT_EQUAL(got->dtype, ZDIST_DTYPE_FLOAT32);
    CU_ASSERT_TRUE(zdist_shape_equal(&got->shape, &spec.shape));
    CU_ASSERT_EQUAL(got->shard_index, 2);
    CU_ASSERT_EQUAL(got->row_offset, 6);
    CU_ASSERT_EQUAL(got->row_count, 3);
    CU_ASSERT_TRUE(zdist_init_equal(&got->init, &spec.init));
    CU_ASSERT_EQUAL(got->seed, 99);
    CU_ASSERT_STRING_EQUAL(got->init_name, "kernel");

    /* No initializer kind on the wire: zeros. */
    zdist_ps_request_t req = {.method = ZDIST_PS_CREATE, .create = s_spec("z", 2, 2)};
    reply = s_exchange(f, zdist_ps_request_encode(&req));
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL(f->seen.create.init.kind, ZDIST_INIT_ZEROS);
    CU_ASSERT_STRING_EQUAL(f->seen.create.init_name, "(none)"); /* none sent: the psd uses the name */
    CU_ASSERT_FALSE(f->seen.create.dynamic.enabled);
    zdist_msg_destroy(&reply);

    /* A dynamic table's part: [0, dim], its admission and eviction. */
    zdist_ps_var_spec_t dyn = s_spec("j/t", 0, 8);
    dyn.shard_index = 1;
    dyn.dynamic = (zdist_ps_dynamic_t){.enabled = true, .min_count = 3, .evict_after_steps = 100,
                                       .evict_l2_below = 0.5, .num_ps = 2};
    reply = s_exchange(f, zdist_ps_request_create(&dyn));
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    zdist_msg_destroy(&reply);
    const zdist_ps_dynamic_t *gd = &f->seen.create.dynamic;
    CU_ASSERT(gd->enabled && gd->min_count == 3 && gd->evict_after_steps == 100 && gd->evict_l2_below == 0.5 &&
              gd->num_ps == 2);

    reply = s_exchange(f, zdist_ps_request_pull("v", 1, 4, 2));
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    zdist_msg_destroy(&reply);
    CU_ASSERT_EQUAL(f->seen.method, ZDIST_PS_PULL);
    CU_ASSERT_STRING_EQUAL(f->seen.pull.name, "v");
    CU_ASSERT_EQUAL(f->seen.pull.shard_index, 1);
    CU_ASSERT_EQUAL(f->seen.pull.row_start, 4);
    CU_ASSERT_EQUAL(f->seen.pull.row_count, 2);

    int64_t ids[3] = {7, 0, 7};
    req = (zdist_ps_request_t){.method = ZDIST_PS_PULL_ROWS, .pull_rows = {"table", ids, 3}};
    reply = s_exchange(f, zdist_ps_request_encode(&req));
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    zdist_msg_destroy(&reply);
    CU_ASSERT_STRING_EQUAL(f->seen.pull_rows.name, "table");
    CU_ASSERT_EQUAL_FATAL(f->seen.pull_rows.nids, 3);
    CU_ASSERT_EQUAL(memcmp(f->seen.pull_rows.ids, ids, sizeof ids), 0);

    /* A dense push: one tensor, a range, a sequence. */
    float grad[2 * 4];
    for (int i = 0; i < 8; i++)
        grad[i] = (float) i / 4;
    zdist_tensor_t t = {
        .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {2, 4}}, .data = grad, .nbytes = sizeof grad};
    reply = s_exchange(f, zdist_ps_request_write(ZDIST_PS_PUSH, "w", 0, 3, 2, 41, &t, NULL, NULL));
    bool dup = false;
    int64_t step = 0;
    CU_ASSERT_EQUAL(zdist_ps_reply_write(reply, &dup, &step, NULL), 0);
    CU_ASSERT_TRUE(dup);
    CU_ASSERT_EQUAL(step, 5);
    zdist_msg_destroy(&reply);
    const zdist_ps_write_t *w = &f->seen.write;
    CU_ASSERT_EQUAL(f->seen.method, ZDIST_PS_PUSH);
    CU_ASSERT_FALSE(w->by_ids);
    CU_ASSERT_STRING_EQUAL(w->name, "w");
    CU_ASSERT_EQUAL(w->row_start, 3);
    CU_ASSERT_EQUAL(w->row_count, 2);
    CU_ASSERT_EQUAL(w->sequence, 41);
    CU_ASSERT_EQUAL(w->values.dtype, ZDIST_DTYPE_FLOAT32);
    CU_ASSERT_TRUE(zdist_shape_equal(&w->values.shape, &t.shape));
    CU_ASSERT_EQUAL_FATAL(w->values.nbytes, sizeof grad);
    CU_ASSERT_EQUAL(memcmp(w->values.data, grad, sizeof grad), 0);

    /* A push with ids is sparse; its range is not sent. */
    int64_t rows_ids[2] = {9, 3};
    req = (zdist_ps_request_t){.method = ZDIST_PS_PUSH,
                               .write = {.name = "emb",
                                         .shard_index = 1,
                                         .row_start = 5,
                                         .row_count = 5,
                                         .sequence = 42,
                                         .job_step = 77,
                                         .step_write = 1,
                                         .by_ids = true,
                                         .ids = rows_ids,
                                         .nids = 2,
                                         .values = t}};
    reply = s_exchange(f, zdist_ps_request_encode(&req));
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    zdist_msg_destroy(&reply);
    CU_ASSERT_TRUE(w->by_ids);
    CU_ASSERT_EQUAL(w->shard_index, 1);
    CU_ASSERT_EQUAL(w->row_count, 0);
    CU_ASSERT_EQUAL(w->sequence, 42);
    CU_ASSERT_EQUAL(w->job_step, 77);
    CU_ASSERT_EQUAL(w->step_write, 1);
    CU_ASSERT_EQUAL_FATAL(w->nids, 2);
    CU_ASSERT_EQUAL(memcmp(w->ids, rows_ids, sizeof rows_ids), 0);
    CU_ASSERT_EQUAL(memcmp(w->values.data, grad, sizeof grad), 0);

    reply = s_exchange(f, zdist_ps_request_save("/tmp/ckpt", 500, 1));
    uint64_t bytes = 0;
    CU_ASSERT_EQUAL(zdist_ps_reply_save(reply, &bytes, NULL), 0);
    CU_ASSERT_EQUAL(bytes, 4096);
    zdist_msg_destroy(&reply);
    CU_ASSERT_STRING_EQUAL(f->seen.save.dir, "/tmp/ckpt");
    CU_ASSERT_EQUAL(f->seen.save.step, 500);
    CU_ASSERT_EQUAL(f->seen.save.ps_task, 1);

    reply = s_exchange(f, zdist_ps_request_restore("/tmp/ckpt"));
    CU_ASSERT_EQUAL(zdist_ps_reply_restore(reply, &step, NULL), 0);
    CU_ASSERT_EQUAL(step, 77);
    zdist_msg_destroy(&reply);
    CU_ASSERT_STRING_EQUAL(f->seen.restore.dir, "/tmp/ckpt");

    req = (zdist_ps_request_t){.method = ZDIST_PS_DROP_JOB, .drop_job = {"j0123abcd"}};
    reply = s_exchange(f, zdist_ps_request_encode(&req));
    uint64_t shards = 0;
    bytes = 0;
    CU_ASSERT_EQUAL(zdist_ps_reply_drop_job(reply, &shards, &bytes, NULL), 0);
    CU_ASSERT_EQUAL(shards, 3);
    CU_ASSERT_EQUAL(bytes, 1ull << 33);
    zdist_msg_destroy(&reply);
    CU_ASSERT_EQUAL(f->seen.method, ZDIST_PS_DROP_JOB);
    CU_ASSERT_STRING_EQUAL(f->seen.drop_job.job, "j0123abcd");
    CU_ASSERT_STRING_EQUAL(zdist_ps_method_name(ZDIST_PS_DROP_JOB), "drop_job");

    req = (zdist_ps_request_t){.method = ZDIST_PS_STATS};
    reply = s_exchange(f, zdist_ps_request_encode(&req));
    CU_ASSERT_EQUAL(zdist_msg_status(reply), ZDIST_STATUS_OK);
    CU_ASSERT_EQUAL(f->seen.method, ZDIST_PS_STATS);
    zdist_msg_destroy(&reply);

    /* Zero fields of an optimizer take Keras's defaults for its kind. */
    zdist_optim_config_t adam = {.kind = ZDIST_OPTIM_ADAM, .learning_rate = 0.01, .lazy = true};
    reply = s_exchange(f, zdist_ps_request_set_optimizer(&adam));
    CU_ASSERT_EQUAL(zdist_ps_reply_write(reply, NULL, NULL, NULL), 0);
    zdist_msg_destroy(&reply);
    zdist_optim_config_t want;
    zdist_optim_config_default(&want, ZDIST_OPTIM_ADAM);
    want.learning_rate = 0.01;
    want.lazy = true;
    CU_ASSERT_TRUE(zdist_optim_config_equal(&f->seen.optimizer, &want));
    CU_ASSERT_TRUE(f->seen.optimizer.lazy);
    CU_ASSERT_EQUAL(f->seen.optimizer.beta2, want.beta2);

    /* ftrl's zeros (a fixed rate, an empty accumulator) arrive as zeros, its other fields as given. */
    zdist_optim_config_t ftrl;
    zdist_optim_config_default(&ftrl, ZDIST_OPTIM_FTRL);
    ftrl.learning_rate_power = 0;
    ftrl.initial_accumulator_value = 0;
    ftrl.l1 = 0.5;
    ftrl.l2 = 0.25;
    ftrl.l2_shrinkage = 0.125;
    ftrl.beta = 2;
    reply = s_exchange(f, zdist_ps_request_set_optimizer(&ftrl));
    CU_ASSERT_EQUAL(zdist_ps_reply_write(reply, NULL, NULL, NULL), 0);
    zdist_msg_destroy(&reply);
    CU_ASSERT_TRUE(zdist_optim_config_equal(&f->seen.optimizer, &ftrl));
    s_fixture_destroy(&f);
}

static void
test_bad_requests_refused_before_the_handler(void)
{
    s_fixture_t *f = s_fixture_new();
    zdist_ps_var_spec_t spec = s_spec("", 4, 2);
    s_refused(f, zdist_ps_request_create(&spec), "create: name is empty");
    char long_name[300];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    spec.name = long_name;
    s_refused(f, zdist_ps_request_create(&spec), "is longer than 255 bytes");
    spec.name = "a\nb";
    s_refused(f, zdist_ps_request_create(&spec), "name has a control character (byte 1)");
    spec = s_spec("v", 4, 2);
    spec.dtype = zdist_dtype_from_name("bool");
    s_refused(f, zdist_ps_request_create(&spec), "variable 'v': dtype 'bool' cannot be stored");
    spec = s_spec("v", 4, -2);
    s_refused(f, zdist_ps_request_create(&spec), "variable 'v': shape must have rank <= 8");
    spec = s_spec("v", INT64_MAX / 2, 4);
    s_refused(f, zdist_ps_request_create(&spec), "variable 'v': the shape overflows");
    spec = s_spec("v", 4, 2);
    spec.row_offset = 2;
    s_refused(f, zdist_ps_request_create(&spec),
              "variable 'v' shard 0: row_offset 2 and row_count 4 do not fit its 4 rows");
    spec = s_spec("v", 4, 2);
    spec.dynamic = (zdist_ps_dynamic_t){.enabled = true, .num_ps = 1};
    s_refused(f, zdist_ps_request_create(&spec), "variable 'v': a dynamic table is float32 of shape [0, dim]");
    spec = s_spec("v", 0, 2);
    spec.shard_index = 2;
    spec.dynamic = (zdist_ps_dynamic_t){.enabled = true, .num_ps = 2};
    s_refused(f, zdist_ps_request_create(&spec), "variable 'v': dynamic.num_ps 2: give the ps task count");
    spec = s_spec("v", 4, 2);
    spec.shard_index = -1;
    s_refused(f, zdist_ps_request_create(&spec), "variable 'v': shard_index -1 is negative");
    spec = s_spec("v", 4, 2);
    spec.init.kind = (zdist_init_kind_t) 99;
    s_refused(f, zdist_ps_request_create(&spec), "variable 'v': unknown initializer 'invalid'");
    spec.init = (zdist_initializer_t){.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = 1, .maxval = -1};
    s_refused(f, zdist_ps_request_create(&spec), "variable 'v': initializer");

    s_refused(f, zdist_ps_request_pull("v", 0, 0, -1), "pull: variable 'v': row_count -1 is negative");
    s_refused(f, zdist_ps_request_pull("v", 0, -3, 2), "variable 'v': row_start -3 is negative");
    s_refused(f, zdist_ps_request_pull("v", -2, 0, 0), "variable 'v': shard_index -2 is negative");
    s_refused(f, zdist_ps_request_pull("v", 0, INT64_MAX, 5),
              "variable 'v': row_start 9223372036854775807 + row_count 5 overflows");
    s_refused(f, zdist_ps_request_pull("", 0, 0, 0), "pull: name is empty");

    /* The ids of pull_rows must be int64 [n]. A pull body carries the name
       in the same field, so it stands in for a pull_rows body here. */
    zdist_msg_t *req = zdist_ps_request_pull("v", 0, 0, 0);
    zdist_msg_set_method(req, ZDIST_PS_PULL_ROWS);
    float not_ids[2] = {1, 2};
    zdist_shape_t s2 = {.rank = 1, .dims = {2}};
    zdist_msg_add_tensor_copy(req, "ids", ZDIST_DTYPE_FLOAT32, &s2, not_ids, sizeof not_ids);
    s_refused(f, req, "pull_rows: tensor 0 must be the ids: int64 with shape [n]");

    /* Writes: ids and rows must agree; the range must be sane. */
    int64_t ids[3] = {0, 1, 2};
    float rows[2 * 4] = {0};
    zdist_shape_t r2 = {.rank = 2, .dims = {2, 4}};
    req = zdist_ps_request_pull_rows("v", ids, 3, NULL, NULL);
    zdist_msg_set_method(req, ZDIST_PS_SCATTER_ADD);
    zdist_msg_add_tensor_copy(req, "rows", ZDIST_DTYPE_FLOAT32, &r2, rows, sizeof rows);
    s_refused(f, req, "scatter_add: write to 'v': 3 ids but the rows tensor has 2 rows");
    req = zdist_ps_request_pull_rows("v", ids, 3, NULL, NULL);
    zdist_msg_set_method(req, ZDIST_PS_SCATTER_ADD);
    s_refused(f, req, "write to 'v' by ids takes two tensors (ids int64 [n], rows [n, ...]), got 1");
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = r2, .data = rows, .nbytes = sizeof rows};
    s_refused(f, zdist_ps_request_write(ZDIST_PS_ASSIGN, "v", 0, 0, -2, 1, &t, NULL, NULL),
              "assign: variable 'v': row_count -2 is negative");
    s_refused(f, zdist_ps_request_write(ZDIST_PS_PUSH, "v", -1, 0, 0, 1, &t, NULL, NULL),
              "push: variable 'v': shard_index -1 is negative");

    s_refused(f, zdist_ps_request_save("", 1, 0), "save: dir is empty; give the checkpoint directory");
    s_refused(f, zdist_ps_request_save("/tmp/x", -1, 0), "save: step -1 is negative");
    s_refused(f, zdist_ps_request_save("/tmp/x", 1, -1), "save: ps_task -1 is negative");
    s_refused(f, zdist_ps_request_restore(""), "restore: dir is empty");
    s_refused(f, zdist_ps_request_save_job("/tmp/x", 1, 0, "j1/x"), "save: job 'j1/x': byte 2 is not one of");
    s_refused(f, zdist_ps_request_restore_job("/tmp/x", ".."), "restore: job '..' is not a job id");
    s_refused(f, zdist_ps_request_drop_job(""), "drop_job: job is empty; name the job whose variables to drop");
    s_refused(f, zdist_ps_request_drop_job("j1/x"), "drop_job: job 'j1/x': byte 2 is not one of [A-Za-z0-9._-]");
    s_refused(f, zdist_ps_request_drop_job("."), "drop_job: job '.' is not a job id");

    zdist_optim_config_t bad = {.kind = (zdist_optim_kind_t) 99};
    s_refused(f, zdist_ps_request_set_optimizer(&bad), "set_optimizer: optimizer 'invalid' is unknown");
    bad = (zdist_optim_config_t){.kind = ZDIST_OPTIM_SGD, .learning_rate = -1};
    s_refused(f, zdist_ps_request_set_optimizer(&bad), "set_optimizer: optimizer sgd");
    CU_ASSERT_EQUAL(f->calls, 0);
    s_fixture_destroy(&f);
}

static void
test_encoders_refuse_bad_arguments(void)
{
    float v[6] = {0};
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {2, 3}}, .data = v, .nbytes = sizeof v};
    zdist_tensor_t short_t = t;
    short_t.nbytes -= sizeof(float);
    int64_t ids[2] = {0, 1};
    CU_ASSERT_PTR_NULL(zdist_ps_request_write(ZDIST_PS_ASSIGN, "v", 0, 0, 0, 1, &short_t, NULL, NULL));
    CU_ASSERT_PTR_NULL(zdist_ps_request_write(ZDIST_PS_SCATTER_ADD, "v", 0, 0, 0, 1, &t, NULL, NULL));
    CU_ASSERT_PTR_NULL(zdist_ps_request_write(ZDIST_PS_PUSH, NULL, 0, 0, 0, 1, &t, NULL, NULL));
    CU_ASSERT_PTR_NULL(zdist_ps_request_write_ids(ZDIST_PS_ASSIGN, "v", 0, 1, ids, 2, &t, NULL, NULL));
    CU_ASSERT_PTR_NULL(zdist_ps_request_write_ids(ZDIST_PS_SCATTER_ADD, "v", 0, 1, ids, 1, &t, NULL, NULL));
    CU_ASSERT_PTR_NULL(zdist_ps_request_pull(NULL, 0, 0, 0));
    CU_ASSERT_PTR_NULL(zdist_ps_request_save(NULL, 0, 0));
    CU_ASSERT_PTR_NULL(zdist_ps_request_drop_job(NULL));
    zdist_ps_request_t req = {.method = 999};
    CU_ASSERT_PTR_NULL(zdist_ps_request_encode(&req));
    CU_ASSERT_PTR_NULL(zdist_ps_request_encode(NULL));

    /* Zero-copy payloads pass to the builder, also when it refuses. */
    s_freed = 0;
    CU_ASSERT_PTR_NULL(
        zdist_ps_request_write_ids(ZDIST_PS_SCATTER_ADD, "v", 0, 1, ids, 1, &t, s_count_free, NULL));
    CU_ASSERT_EQUAL(s_freed, 2);
    s_freed = 0;
    zdist_msg_t *m =
        zdist_ps_request_write_ids(ZDIST_PS_SCATTER_ADD, "v", 0, 1, ids, 2, &t, s_count_free, NULL);
    CU_ASSERT_PTR_NOT_NULL(m);
    CU_ASSERT_EQUAL(zdist_msg_tensor_count(m), 2);
    CU_ASSERT_EQUAL(s_freed, 0);
    zdist_msg_destroy(&m);
    CU_ASSERT_EQUAL(s_freed, 2);
    s_freed = 0;
    CU_ASSERT_PTR_NULL(zdist_ps_request_pull_rows(NULL, ids, 2, s_count_free, NULL));
    CU_ASSERT_EQUAL(s_freed, 1);

    /* The union encoder and the per-method builders write the same bytes. */
    req = (zdist_ps_request_t){
        .method = ZDIST_PS_ASSIGN,
        .write = {.name = "v", .shard_index = 3, .row_start = 1, .row_count = 2, .sequence = 8, .values = t}};
    zdist_msg_t *a = zdist_ps_request_encode(&req);
    zdist_msg_t *b = zdist_ps_request_write(ZDIST_PS_ASSIGN, "v", 3, 1, 2, 8, &t, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    size_t alen, blen;
    const uint8_t *abody = zdist_msg_body(a, &alen), *bbody = zdist_msg_body(b, &blen);
    CU_ASSERT_EQUAL_FATAL(alen, blen);
    CU_ASSERT_EQUAL(memcmp(abody, bbody, alen), 0);
    CU_ASSERT_EQUAL(zdist_msg_method(a), ZDIST_PS_ASSIGN);
    zdist_msg_destroy(&a);
    zdist_msg_destroy(&b);
}

static void
test_replies(void)
{
    zdist_ps_method_stats_t methods[2] = {{"pull", 10, 1, 40, 900}, {"ping", 3, 0, 5, 7}};
    zdist_ps_shard_info_t shards[2] = {
        {"a", 0, ZDIST_DTYPE_FLOAT32, {2, {10, 4}}, 0, 5, 12},
        {"b", 1, ZDIST_DTYPE_INT64, {1, {7}}, 4, 3, 0},
    };
    zdist_ps_embedding_info_t emb = {"j1/embedding/embeddings", 10, 12, 3, 2, 4096, 5, 7};
    zdist_ps_stats_t st = {.variables = 2,
                           .shards = 2,
                           .value_bytes = 104,
                           .slot_bytes = 80,
                           .uptime_ms = 1234,
                           .incarnation = UINT64_C(0xfeedfacecafe),
                           .ps_task = 3,
                           .optimizer = "adam",
                           .nmethods = 2,
                           .methods = methods,
                           .nshard_info = 2,
                           .shard_info = shards,
                           .nembeddings = 1,
                           .embeddings = &emb};
    zdist_msg_t *reply = zdist_msg_new(ZDIST_PS_STATS);
    CU_ASSERT_EQUAL_FATAL(zdist_ps_reply_set_stats(reply, &st), 0);
    zdist_ps_stats_t *got = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_ps_reply_stats(reply, &got, NULL), 0);
    CU_ASSERT_EQUAL(got->variables, 2);
    CU_ASSERT_EQUAL(got->value_bytes, 104);
    CU_ASSERT_EQUAL(got->slot_bytes, 80);
    CU_ASSERT_EQUAL(got->uptime_ms, 1234);
    CU_ASSERT_EQUAL(got->incarnation, UINT64_C(0xfeedfacecafe));
    CU_ASSERT_EQUAL(got->ps_task, 3);
    CU_ASSERT_STRING_EQUAL(got->optimizer, "adam");
    CU_ASSERT_EQUAL_FATAL(got->nmethods, 2);
    CU_ASSERT_STRING_EQUAL(got->methods[0].name, "pull");
    CU_ASSERT_EQUAL(got->methods[0].errors, 1);
    CU_ASSERT_EQUAL(got->methods[0].p99_us, 900);
    CU_ASSERT_EQUAL_FATAL(got->nshard_info, 2);
    CU_ASSERT_STRING_EQUAL(got->shard_info[1].name, "b");
    CU_ASSERT_EQUAL(got->shard_info[1].dtype, ZDIST_DTYPE_INT64);
    CU_ASSERT_TRUE(zdist_shape_equal(&got->shard_info[0].shape, &shards[0].shape));
    CU_ASSERT_EQUAL(got->shard_info[1].row_offset, 4);
    CU_ASSERT_EQUAL(got->shard_info[0].step, 12);
    CU_ASSERT_EQUAL_FATAL(got->nembeddings, 1);
    CU_ASSERT_STRING_EQUAL(got->embeddings[0].name, "j1/embedding/embeddings");
    CU_ASSERT(got->embeddings[0].rows == 10 && got->embeddings[0].admitted == 12 && got->embeddings[0].refused == 3 &&
              got->embeddings[0].evicted == 2 && got->embeddings[0].bytes == 4096 && got->embeddings[0].pending == 5 &&
              got->embeddings[0].dropped_grads == 7);
    zdist_ps_stats_destroy(&got);
    CU_ASSERT_PTR_NULL(got);
    zdist_ps_stats_destroy(&got);

    /* A refusal comes back as its errno with "STATUS: message". */
    zdist_error_t err = {0};
    zdist_msg_set_status(reply, ZDIST_STATUS_NOT_FOUND, "variable 'x' is not on ps task 0");
    CU_ASSERT_EQUAL(zdist_ps_reply_stats(reply, &got, &err), -ENOENT);
    CU_ASSERT_PTR_NULL(got);
    CU_ASSERT_STRING_EQUAL(err.text, "NOT_FOUND: variable 'x' is not on ps task 0");
    zdist_msg_destroy(&reply);

    /* A values reply without its tensor is -EPROTO. */
    reply = zdist_msg_new(ZDIST_PS_PULL);
    CU_ASSERT_EQUAL(zdist_ps_reply_values(reply, NULL, &err), -EPROTO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "pull reply: expected one values tensor, got 0"));
    zdist_msg_destroy(&reply);
}

void
zdist_test_ps_service_register(void)
{
    ZDIST_SUITE("ps_service", {"requests round trip", test_requests_round_trip},
                {"push_pull: items, tensors and results round trip", test_push_pull},
                {"bad requests refused before the handler", test_bad_requests_refused_before_the_handler},
                {"encoders refuse bad arguments", test_encoders_refuse_bad_arguments},
                {"replies", test_replies});
}
