/* CUnit suite: worker_psd, the parameter_server backend, over a real psd server (psd_server_actor in this
 * process). */
#include <czmq.h>
#include <string.h>

#include "psd_server.h"
#include "testutil.h"
#include "worker_psd.h"
#include "zdist/ps_client.h"

/* One psd, the backend over two variables placed on it ('w' [4, 2] in two
   shards, 'b' [2] whole), and a second client standing for another worker. */
typedef struct {
    zactor_t *psd;
    char endpoint[256];
    worker_var_t var[2];
    worker_vars_t vars;
    worker_backend_t *be;
    zdist_ps_client_t *other;
} s_fixture_t;

static s_fixture_t *
s_fixture_new(void)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    psd_server_config_t cfg = {.endpoint = "tcp://127.0.0.1:*", .max_tensor_bytes = 1 << 20};
    zdist_wire_limits_default(&cfg.limits);
    f->psd = zactor_new(psd_server_actor, &cfg);
    char *hello = zstr_recv(f->psd);
    CU_ASSERT_FATAL(hello && strncmp(hello, "READY ", 6) == 0);
    snprintf(f->endpoint, sizeof f->endpoint, "%s", hello + 6);
    zstr_free(&hello);

    f->var[0] = (worker_var_t){.name = "w",
                               .dtype = ZDIST_DTYPE_FLOAT32,
                               .shape = {2, {4, 2}},
                               .init = {.kind = ZDIST_INIT_CONSTANT, .value = 1},
                               .partitioner = "fixed:2",
                               .trainable = true,
                               .rows = 4,
                               .width = 2,
                               .n = 8};
    f->var[1] = (worker_var_t){.name = "b",
                               .dtype = ZDIST_DTYPE_FLOAT32,
                               .shape = {1, {2}},
                               .init = {.kind = ZDIST_INIT_ZEROS},
                               .trainable = true,
                               .rows = 2,
                               .width = 1,
                               .n = 2};
    f->vars = (worker_vars_t){.vars = f->var, .n = 2, .cap = 2};
    const char *eps[1] = {f->endpoint};
    worker_psd_config_t pcfg = {.endpoints = eps, .num_ps = 1, .prefix = "t/", .timeout_ms = 10000};
    zdist_error_t err = {0};
    f->be = worker_psd_new(&f->vars, &pcfg, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->be);
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 1};
    CU_ASSERT_EQUAL_FATAL(worker_psd_create_variables(f->be, &sgd, 1, NULL, &err), 0);
    f->other = zdist_ps_client_new(f->endpoint, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->other);
    return f;
}

static void
s_fixture_destroy(s_fixture_t **f_p)
{
    s_fixture_t *f = *f_p;
    zdist_ps_client_destroy(&f->other);
    f->be->ops->destroy(&f->be);
    zactor_destroy(&f->psd);
    free(f);
    *f_p = NULL;
}

/* Requests the psd served for method `name` so far. */
static uint64_t
s_requests(s_fixture_t *f, const char *name)
{
    zdist_ps_stats_t *st = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_stats(f->other, &st, NULL), 0);
    uint64_t n = 0;
    for (size_t i = 0; i < st->nmethods; i++)
        if (strcmp(st->methods[i].name, name) == 0)
            n = st->methods[i].requests;
    zdist_ps_stats_destroy(&st);
    return n;
}

/* What another worker does: adds `delta` to every value of 'w' shard 0. */
static void
s_other_adds(s_fixture_t *f, float delta)
{
    float d[4] = {delta, delta, delta, delta};
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {2, 2}}, .data = d, .nbytes = sizeof d};
    CU_ASSERT_EQUAL(zdist_ps_client_assign_add(f->other, "t/w", 0, 0, 0, &t, NULL, NULL), 0);
}

static const float *
s_read(s_fixture_t *f, int var)
{
    const float *v = NULL;
    CU_ASSERT_EQUAL_FATAL(f->be->ops->read(f->be, 0, var, &v), 0);
    return v;
}

static void
test_push_pull_feeds_the_next_read(void)
{
    s_fixture_t *f = s_fixture_new();
    const float *w = s_read(f, 0);
    CU_ASSERT_EQUAL(w[0], 1);
    s_read(f, 1);
    uint64_t pulls = s_requests(f, "pull");
    CU_ASSERT_EQUAL(pulls, 3); /* 'w' in two shards, 'b' */

    /* A step's apply: one push_pull (one ps) carrying both gradients and
       asking back both variables. */
    float gw[8] = {1, 1, 1, 1, 1, 1, 1, 1}, gb[2] = {2, 2};
    zdist_grad_t grads[2] = {{.var = 0, .values = gw}, {.var = 1, .values = gb}};
    CU_ASSERT_EQUAL(f->be->ops->apply(f->be, 0, grads, 2), 0);
    CU_ASSERT_EQUAL(s_requests(f, "push_pull"), 1);
    CU_ASSERT_EQUAL(s_requests(f, "push"), 0);

    /* Another worker updates 'w' after our push: our next read may (and
       does) return the values our push_pull brought back, with no pull;
       they are those right after our own push. */
    s_other_adds(f, 10);
    w = s_read(f, 0);
    const float *b = s_read(f, 1);
    CU_ASSERT_EQUAL(s_requests(f, "pull"), pulls);
    CU_ASSERT_EQUAL(w[0], 0); /* 1 - 1 x 1 */
    CU_ASSERT_EQUAL(w[7], 0);
    CU_ASSERT_EQUAL(b[0], -2);

    /* The read after that pulls again and sees the other worker's update. */
    w = s_read(f, 0);
    CU_ASSERT_EQUAL(s_requests(f, "pull"), pulls + 2);
    CU_ASSERT_EQUAL(w[0], 10);
    CU_ASSERT_EQUAL(w[7], 0);
    s_fixture_destroy(&f);
}

static void
test_values_never_older_than_the_own_last_push(void)
{
    s_fixture_t *f = s_fixture_new();
    s_read(f, 0);
    float gw[8] = {1, 1, 1, 1, 1, 1, 1, 1}, gw2[8] = {2, 2, 2, 2, 2, 2, 2, 2};
    zdist_grad_t one = {.var = 0, .values = gw};
    CU_ASSERT_EQUAL(f->be->ops->apply(f->be, 0, &one, 1), 0); /* 'w' fresh: 0 */
    /* Two gradients for 'w' in one apply cannot share a sequence: pushed
       one by one, and the values kept from the push_pull before are now
       older than this worker's own push, so the next read pulls. */
    zdist_grad_t two[2] = {{.var = 0, .values = gw}, {.var = 0, .values = gw2}};
    uint64_t pushes = s_requests(f, "push"), pulls = s_requests(f, "pull");
    CU_ASSERT_EQUAL(f->be->ops->apply(f->be, 0, two, 2), 0);
    CU_ASSERT_EQUAL(s_requests(f, "push"), pushes + 4); /* 2 gradients x 2 shards */
    const float *w = s_read(f, 0);
    CU_ASSERT_EQUAL(s_requests(f, "pull"), pulls + 2);
    CU_ASSERT_EQUAL(w[0], -3); /* 0 - 1 - 2 */

    /* assign writes values directly: nothing kept survives it either. */
    CU_ASSERT_EQUAL(f->be->ops->apply(f->be, 0, &one, 1), 0); /* fresh: -4 */
    float v[8] = {5, 5, 5, 5, 5, 5, 5, 5};
    CU_ASSERT_EQUAL(f->be->ops->assign(f->be, 0, 0, v, false), 0);
    w = s_read(f, 0);
    CU_ASSERT_EQUAL(w[0], 5);
    s_fixture_destroy(&f);
}

void
zdist_test_worker_psd_register(void)
{
    ZDIST_SUITE(
        "worker_psd", {"push_pull feeds the next read", test_push_pull_feeds_the_next_read},
        {"values never older than the own last push", test_values_never_older_than_the_own_last_push});
}
