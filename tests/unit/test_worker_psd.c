/* CUnit suite: worker_psd, the parameter_server backend, over a real psd server (psd_server_actor in this
 * process). */
#include <czmq.h>
#include <string.h>

#include "testutil.h"
#include "models/models.h"
#include "worker_psd.h"
#include "worker_trainer_rows.h"
#include "worker_vars.h"
#include <errno.h>
#include "zdist/ps_client.h"

/* One psd, the backend over two variables placed on it ('w' [4, 2] in two
   shards, 'b' [2] whole; with_scalar: and 's', a rank-0 variable), and a
   second client standing for another worker. */
typedef struct {
    zactor_t *psd;
    char endpoint[256];
    worker_var_t var[3];
    worker_vars_t vars;
    worker_backend_t *be;
    zdist_ps_client_t *other;
} s_fixture_t;

static s_fixture_t *
s_fixture_new(bool with_scalar)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    f->psd = zdist_test_psd_start(0, f->endpoint, sizeof f->endpoint);

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
    f->var[2] = (worker_var_t){.name = "s",
                               .dtype = ZDIST_DTYPE_FLOAT32,
                               .shape = {0, {0}},
                               .init = {.kind = ZDIST_INIT_CONSTANT, .value = 3},
                               .trainable = true,
                               .rows = 1,
                               .width = 1,
                               .n = 1};
    f->vars = (worker_vars_t){.vars = f->var, .n = with_scalar ? 3 : 2, .cap = 3};
    const char *eps[1] = {f->endpoint};
    worker_psd_config_t pcfg = {.endpoints = eps, .num_ps = 1, .prefix = "t/", .timeout_ms = 10000};
    zdist_error_t err = {0};
    f->be = worker_psd_new(&f->vars, &pcfg, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->be);
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 1};
    int rc = worker_psd_create_variables(f->be, &sgd, 1, NULL, &err);
    if (rc < 0)
        fprintf(stderr, "create_variables: %s\n", err.text);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
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
    s_fixture_t *f = s_fixture_new(false);
    const float *w = s_read(f, 0);
    CU_ASSERT_EQUAL(w[0], 1);
    s_read(f, 1);
    uint64_t pulls = zdist_test_psd_requests(f->other, "pull");
    CU_ASSERT_EQUAL(pulls, 3); /* 'w' in two shards, 'b' */

    /* A step's apply: one push_pull (one ps) carrying both gradients and
       asking back both variables. */
    float gw[8] = {1, 1, 1, 1, 1, 1, 1, 1}, gb[2] = {2, 2};
    zdist_grad_t grads[2] = {{.var = 0, .values = gw}, {.var = 1, .values = gb}};
    CU_ASSERT_EQUAL(f->be->ops->apply(f->be, 0, grads, 2), 0);
    CU_ASSERT_EQUAL(zdist_test_psd_requests(f->other, "push_pull"), 1);
    CU_ASSERT_EQUAL(zdist_test_psd_requests(f->other, "push"), 0);

    /* Another worker updates 'w' after our push: our next read may (and
       does) return the values our push_pull brought back, with no pull;
       they are those right after our own push. */
    s_other_adds(f, 10);
    w = s_read(f, 0);
    const float *b = s_read(f, 1);
    CU_ASSERT_EQUAL(zdist_test_psd_requests(f->other, "pull"), pulls);
    CU_ASSERT_EQUAL(w[0], 0); /* 1 - 1 x 1 */
    CU_ASSERT_EQUAL(w[7], 0);
    CU_ASSERT_EQUAL(b[0], -2);

    /* The read after that pulls again and sees the other worker's update. */
    w = s_read(f, 0);
    CU_ASSERT_EQUAL(zdist_test_psd_requests(f->other, "pull"), pulls + 2);
    CU_ASSERT_EQUAL(w[0], 10);
    CU_ASSERT_EQUAL(w[7], 0);
    s_fixture_destroy(&f);
}

static void
test_values_never_older_than_the_own_last_push(void)
{
    s_fixture_t *f = s_fixture_new(false);
    s_read(f, 0);
    float gw[8] = {1, 1, 1, 1, 1, 1, 1, 1}, gw2[8] = {2, 2, 2, 2, 2, 2, 2, 2};
    zdist_grad_t one = {.var = 0, .values = gw};
    CU_ASSERT_EQUAL(f->be->ops->apply(f->be, 0, &one, 1), 0); /* 'w' fresh: 0 */
    /* Two gradients for 'w' in one apply cannot share a sequence: pushed
       one by one, and the values kept from the push_pull before are now
       older than this worker's own push, so the next read pulls. */
    zdist_grad_t two[2] = {{.var = 0, .values = gw}, {.var = 0, .values = gw2}};
    uint64_t pushes = zdist_test_psd_requests(f->other, "push"), pulls = zdist_test_psd_requests(f->other, "pull");
    CU_ASSERT_EQUAL(f->be->ops->apply(f->be, 0, two, 2), 0);
    CU_ASSERT_EQUAL(zdist_test_psd_requests(f->other, "push"), pushes + 4); /* 2 gradients x 2 shards */
    const float *w = s_read(f, 0);
    CU_ASSERT_EQUAL(zdist_test_psd_requests(f->other, "pull"), pulls + 2);
    CU_ASSERT_EQUAL(w[0], -3); /* 0 - 1 - 2 */

    /* assign writes values directly: nothing kept survives it either. */
    CU_ASSERT_EQUAL(f->be->ops->apply(f->be, 0, &one, 1), 0); /* fresh: -4 */
    float v[8] = {5, 5, 5, 5, 5, 5, 5, 5};
    CU_ASSERT_EQUAL(f->be->ops->assign(f->be, 0, 0, v, false), 0);
    w = s_read(f, 0);
    CU_ASSERT_EQUAL(w[0], 5);
    s_fixture_destroy(&f);
}

/* A rank-0 variable: its layout has one shard of 0 rows (axis 0 does not
   exist), but the psd must hold its one value, and reads and writes carry it. */
static void
test_scalar_variable(void)
{
    s_fixture_t *f = s_fixture_new(true);
    float buf[4] = {0};
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = buf, .nbytes = sizeof buf};
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_pull(f->other, "t/s", 0, 0, 0, &t, &err), 0);
    CU_ASSERT_EQUAL(t.nbytes, sizeof(float)); /* the psd holds the value */
    CU_ASSERT_EQUAL(t.shape.rank, 0);
    CU_ASSERT_EQUAL(buf[0], 3);
    CU_ASSERT_EQUAL(s_read(f, 2)[0], 3);
    float g = 0.5f; /* SGD, learning rate 1 */
    zdist_grad_t grad = {.var = 2, .values = &g};
    CU_ASSERT_EQUAL(f->be->ops->apply(f->be, 0, &grad, 1), 0);
    CU_ASSERT_EQUAL(s_read(f, 2)[0], 2.5f);
    float v = 7;
    CU_ASSERT_EQUAL(f->be->ops->assign(f->be, 0, 2, &v, false), 0);
    CU_ASSERT_EQUAL(s_read(f, 2)[0], 7);
    t = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .data = buf, .nbytes = sizeof buf};
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_pull(f->other, "t/s", 0, 0, 0, &t, &err), 0);
    CU_ASSERT(t.nbytes == sizeof(float) && buf[0] == 7);
    s_fixture_destroy(&f);
}

/* ---- colocate_vars_with through the step ABI's builder ---- */

/* emb [6, 2] (the job's fixed:2: ps 0 and 1), bias [2] (unpartitioned: ps 0), then under
   colocate_vars_with(bias): bias_acc [2]; then last [2], which takes the
   next turn (ps 1, as the colocated one took none); then under
   colocate_vars_with(emb): emb_norm [6, 2], one shard beside emb's first. */
static int
s_colocated_build(void *state, zdist_model_builder_t *b, zdist_error_t *err)
{
    (void)state;
    zdist_var_spec_t v = {.dtype = ZDIST_DTYPE_FLOAT32, .init = {.kind = ZDIST_INIT_CONSTANT, .value = 1}};
    int emb, bias, rc;
    v.name = "emb", v.shape = (zdist_shape_t){2, {6, 2}}, v.trainable = true;
    if ((emb = zdist_builder_add_variable(b, &v, err)) < 0)
        return emb;
    v.name = "bias", v.shape = (zdist_shape_t){1, {2}}, v.partitioner = "none";
    if ((bias = zdist_builder_add_variable(b, &v, err)) < 0)
        return bias;
    if ((rc = zdist_builder_colocate_vars_with(b, bias, err)) < 0)
        return rc;
    v.name = "bias_acc", v.trainable = false, v.partitioner = NULL;
    if ((rc = zdist_builder_add_variable(b, &v, err)) < 0)
        return rc;
    if ((rc = zdist_builder_colocate_vars_with(b, ZDIST_NO_COLOCATION, err)) < 0)
        return rc;
    v.name = "last", v.partitioner = "none";
    if ((rc = zdist_builder_add_variable(b, &v, err)) < 0)
        return rc;
    if ((rc = zdist_builder_colocate_vars_with(b, emb, err)) < 0)
        return rc;
    v.name = "emb_norm", v.shape = (zdist_shape_t){2, {6, 2}}, v.partitioner = NULL;
    return zdist_builder_add_variable(b, &v, err);
}

static const zdist_model_t s_colocated_model = {.name = "colocated", .build = s_colocated_build};

/* Bad uses: an anchor that is no variable, a partitioner under colocation. */
static int
s_bad_anchor_build(void *state, zdist_model_builder_t *b, zdist_error_t *err)
{
    (void)state;
    return zdist_builder_colocate_vars_with(b, 3, err);
}

static int
s_bad_partitioner_build(void *state, zdist_model_builder_t *b, zdist_error_t *err)
{
    (void)state;
    zdist_var_spec_t v = {.name = "a", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {4}}, .trainable = true};
    int a = zdist_builder_add_variable(b, &v, err), rc;
    if (a < 0)
        return a;
    if ((rc = zdist_builder_colocate_vars_with(b, a, err)) < 0)
        return rc;
    v.name = "a_slot", v.partitioner = "fixed:2";
    return zdist_builder_add_variable(b, &v, err);
}

typedef struct {
    zactor_t *psd[3];
    zdist_ps_client_t *client[3];
    char endpoint[3][256];
    worker_backend_t *be;
} s_cluster_t;

static void
s_cluster_start(s_cluster_t *c, int num_ps, const worker_vars_t *vars)
{
    zdist_error_t err = {0};
    const char *eps[3];
    for (int i = 0; i < num_ps; i++) {
        c->psd[i] = zdist_test_psd_start(i, c->endpoint[i], sizeof c->endpoint[i]);
        eps[i] = c->endpoint[i];
        c->client[i] = zdist_ps_client_new(c->endpoint[i], NULL, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c->client[i]);
    }
    worker_psd_config_t pcfg = {.endpoints = eps, .num_ps = num_ps, .partitioner = "fixed:2", .prefix = "t/",
                                .timeout_ms = 10000};
    c->be = worker_psd_new((worker_vars_t *)vars, &pcfg, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c->be);
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 1};
    int rc = worker_psd_create_variables(c->be, &sgd, 1, NULL, &err);
    if (rc < 0)
        fprintf(stderr, "create_variables: %s\n", err.text);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static void
s_cluster_stop(s_cluster_t *c, int num_ps)
{
    c->be->ops->destroy(&c->be);
    for (int i = 0; i < num_ps; i++) {
        zdist_ps_client_destroy(&c->client[i]);
        zactor_destroy(&c->psd[i]);
    }
}

/* Whether ps task `ps` holds shard 0 of `name`: a pull answers, or NOT_FOUND. */
static int
s_pull2(s_cluster_t *c, int ps, const char *name, float *out)
{
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = out, .nbytes = 2 * sizeof(float)};
    return zdist_ps_client_pull(c->client[ps], name, 0, 0, 0, &t, NULL);
}

static void
test_colocate_vars_with(void)
{
    zdist_error_t err = {0};
    worker_vars_t vars;
    CU_ASSERT_EQUAL(worker_vars_build(&(zdist_model_t){.name = "bad", .build = s_bad_anchor_build}, NULL, &vars,
                                      &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "colocate_vars_with: 3 is not a declared variable's handle"));
    CU_ASSERT_EQUAL(worker_vars_build(&(zdist_model_t){.name = "bad", .build = s_bad_partitioner_build}, NULL,
                                      &vars, &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "variable 'a_slot': declared under colocate_vars_with('a')"));

    CU_ASSERT_EQUAL_FATAL(worker_vars_build(&s_colocated_model, NULL, &vars, &err), 0);
    CU_ASSERT_EQUAL_FATAL(vars.n, 5);
    CU_ASSERT_FALSE(vars.vars[1].colocated);
    CU_ASSERT_TRUE(vars.vars[2].colocated);
    CU_ASSERT_EQUAL(vars.vars[2].anchor, 1);
    CU_ASSERT_FALSE(vars.vars[3].colocated);
    CU_ASSERT_EQUAL(vars.vars[4].anchor, 0);

    /* Two ps tasks: the placement. */
    s_cluster_t c = {0};
    s_cluster_start(&c, 2, &vars);
    const zdist_layout_t *emb = worker_psd_layout(c.be, 0), *bias = worker_psd_layout(c.be, 1),
                         *acc = worker_psd_layout(c.be, 2), *last = worker_psd_layout(c.be, 3),
                         *norm = worker_psd_layout(c.be, 4);
    CU_ASSERT_EQUAL(emb->num_shards, 2);
    CU_ASSERT_EQUAL(bias->shards[0].ps, 0);
    CU_ASSERT_EQUAL(acc->num_shards, 1);
    CU_ASSERT_EQUAL(acc->shards[0].ps, 0);
    CU_ASSERT_EQUAL(last->shards[0].ps, 1); /* count 3: the colocated variable took no turn */
    CU_ASSERT_FALSE(norm->sharded);          /* the job's fixed:2 does not apply */
    CU_ASSERT_EQUAL(norm->shards[0].ps, emb->shards[0].ps);
    /* ... and the shards really are there on the real psds */
    float got[2];
    CU_ASSERT_EQUAL(s_pull2(&c, 0, "t/bias_acc", got), 0);
    CU_ASSERT_EQUAL(got[0], 1.0f);
    CU_ASSERT_EQUAL(s_pull2(&c, 1, "t/bias_acc", got), -ENOENT);
    CU_ASSERT_EQUAL(s_pull2(&c, 1, "t/last", got), 0);

    /* Checkpoint: bias_acc = 7 saved, then 9, then restored onto three ps
       tasks: the new layout puts bias (count 2) and bias_acc on ps 2, and
       the restore finds the saved 7 there. */
    float seven[2] = {7, 7}, nine[2] = {9, 9};
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}, .data = seven, .nbytes = sizeof seven};
    CU_ASSERT_EQUAL(zdist_ps_client_assign(c.client[0], "t/bias_acc", 0, 0, 0, &t, NULL, &err), 0);
    char *dir = zdist_test_tmpdir("colocate");
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(zdist_ps_client_save(c.client[i], dir, 5, i, NULL, &err), 0);
    t.data = nine;
    CU_ASSERT_EQUAL(zdist_ps_client_assign(c.client[0], "t/bias_acc", 0, 0, 0, &t, NULL, &err), 0);
    s_cluster_stop(&c, 2);

    s_cluster_t d = {0};
    s_cluster_start(&d, 3, &vars);
    bias = worker_psd_layout(d.be, 1);
    acc = worker_psd_layout(d.be, 2);
    CU_ASSERT_EQUAL(bias->shards[0].ps, 2);
    CU_ASSERT_EQUAL(acc->shards[0].ps, 2);
    CU_ASSERT_EQUAL(worker_psd_layout(d.be, 4)->shards[0].ps, worker_psd_layout(d.be, 0)->shards[0].ps);
    int64_t step = -1;
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(zdist_ps_client_restore(d.client[i], dir, &step, &err), 0);
    CU_ASSERT_EQUAL(step, 5);
    CU_ASSERT_EQUAL(s_pull2(&d, 2, "t/bias_acc", got), 0);
    CU_ASSERT_EQUAL(got[0], 7.0f);
    CU_ASSERT_EQUAL(got[1], 7.0f);
    CU_ASSERT_EQUAL(s_pull2(&d, 0, "t/bias_acc", got), -ENOENT);
    s_cluster_stop(&d, 3);
    worker_vars_release(&vars);
    zdist_test_rmtree(dir);
    free(dir);
}

/* Sums the dynamic table's counters over the psds. */
static void
s_dyn_totals(zdist_ps_client_t *const *c, int n, uint64_t *ret_rows, uint64_t *ret_pending)
{
    *ret_rows = *ret_pending = 0;
    for (int p = 0; p < n; p++) {
        zdist_ps_stats_t *st = NULL;
        CU_ASSERT_EQUAL_FATAL(zdist_ps_client_stats(c[p], &st, NULL), 0);
        CU_ASSERT_EQUAL(st->nembeddings, 1);
        for (size_t i = 0; i < st->nembeddings; i++) {
            CU_ASSERT_STRING_EQUAL(st->embeddings[i].name, "t/e");
            *ret_rows += st->embeddings[i].rows;
            *ret_pending += st->embeddings[i].pending;
        }
        zdist_ps_stats_destroy(&st);
    }
}

/* A dynamic table over two psds: raw int64 ids routed by
   zdist_partition_id_ps, the default for ids not admitted, admission at the
   push, and a step pushed again by another worker counted once. */
static void
test_dynamic_table(void)
{
    zactor_t *psd[2];
    char ep[2][256];
    for (int p = 0; p < 2; p++)
        psd[p] = zdist_test_psd_start(p, ep[p], sizeof ep[p]);
    worker_var_t var[2] = {
        {.name = "e", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {0, 2}}, .trainable = true, .width = 2,
         .init = {.kind = ZDIST_INIT_CONSTANT, .value = 1}, .dynamic = true, .dyn = {.min_count = 2}},
        {.name = "b", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}, .trainable = true, .rows = 2, .width = 1,
         .n = 2},
    };
    worker_vars_t vars = {.vars = var, .n = 2, .cap = 2};
    const char *eps[2] = {ep[0], ep[1]};
    worker_psd_config_t pcfg = {.endpoints = eps, .num_ps = 2, .prefix = "t/", .timeout_ms = 10000};
    zdist_error_t err = {0};
    worker_backend_t *be[2];
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 1};
    for (int w = 0; w < 2; w++) {
        be[w] = worker_psd_new(&vars, &pcfg, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(be[w]);
        CU_ASSERT_EQUAL_FATAL(worker_psd_create_variables(be[w], &sgd, 1, NULL, &err), 0);
    }
    CU_ASSERT_EQUAL(worker_psd_layout(be[0], 0)->num_shards, 2);
    zdist_ps_client_t *c[2];
    for (int p = 0; p < 2; p++)
        c[p] = zdist_ps_client_new(ep[p], NULL, &err);

    const int64_t ids[3] = {INT64_MIN, 42, INT64_MAX};
    float rows[6];
    CU_ASSERT_EQUAL(be[0]->ops->read_rows(be[0], 0, 0, ids, 3, rows), 0);
    for (int i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(rows[i], 0.0f); /* no row yet: the default */
    const float *whole;
    CU_ASSERT_EQUAL(be[0]->ops->read(be[0], 0, 0, &whole), -EINVAL);

    const int64_t gids[4] = {INT64_MIN, INT64_MIN, 42, INT64_MAX};
    float g[8];
    for (int i = 0; i < 8; i++)
        g[i] = 0.25f;
    zdist_grad_t grad = {.var = 0, .values = g, .ids = gids, .nids = 4};
    worker_psd_set_job_step(be[0], 1);
    CU_ASSERT_EQUAL(be[0]->ops->apply(be[0], 0, &grad, 1), 0);
    uint64_t n, pending;
    s_dyn_totals(c, 2, &n, &pending);
    CU_ASSERT(n == 1 && pending == 2); /* INT64_MIN seen twice: admitted, its gradients applied */
    /* Step 1 again from the other worker (a re-run): acknowledged, counted once. */
    worker_psd_set_job_step(be[1], 1);
    CU_ASSERT_EQUAL(be[1]->ops->apply(be[1], 0, &grad, 1), 0);
    s_dyn_totals(c, 2, &n, &pending);
    CU_ASSERT(n == 1 && pending == 2);
    CU_ASSERT_EQUAL(be[1]->ops->read_rows(be[1], 0, 0, ids, 3, rows), 0);
    CU_ASSERT(rows[0] == 0.5f && rows[1] == 0.5f); /* 1 - 1 x (0.25 + 0.25) */
    CU_ASSERT(rows[2] == 0.0f && rows[5] == 0.0f);
    worker_psd_set_job_step(be[1], 2);
    CU_ASSERT_EQUAL(be[1]->ops->apply(be[1], 0, &grad, 1), 0);
    s_dyn_totals(c, 2, &n, &pending);
    CU_ASSERT(n == 3 && pending == 0); /* 42 and INT64_MAX at their second occurrence */

    for (int p = 0; p < 2; p++)
        zdist_ps_client_destroy(&c[p]);
    for (int w = 0; w < 2; w++)
        be[w]->ops->destroy(&be[w]);
    for (int p = 0; p < 2; p++)
        zactor_destroy(&psd[p]);
}

/* ---- a functional model's tables under parameter_server ---- */

/* A replica context over the psd backend, as the trainer's makes it for
   one replica: reads pulled, rows read by unique id, gradients pushed. */
typedef struct {
    zdist_replica_ctx_t base;
    worker_backend_t *be;
    const worker_vars_t *vars;
    zdist_step_batch_t batch;
    bool given;
    double loss;
    void *scratch[ZDIST_SCRATCH_SLOTS];
} s_psd_ctx_t;

static s_psd_ctx_t *
s_pc(zdist_replica_ctx_t *c)
{
    return (s_psd_ctx_t *)c;
}

static int s_pc_zero(zdist_replica_ctx_t *c) { (void)c; return 0; }
static int s_pc_one(zdist_replica_ctx_t *c) { (void)c; return 1; }

static int
s_pc_next(zdist_replica_ctx_t *c, const zdist_step_batch_t **ret)
{
    if (s_pc(c)->given)
        return 0;
    s_pc(c)->given = true;
    *ret = &s_pc(c)->batch;
    return 1;
}

static int s_pc_var(zdist_replica_ctx_t *c, const char *name) { return worker_vars_find(s_pc(c)->vars, name); }

static int
s_pc_read(zdist_replica_ctx_t *c, int var, const float **ret)
{
    return s_pc(c)->be->ops->read(s_pc(c)->be, 0, var, ret);
}

static int
s_cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int
s_pc_read_rows(zdist_replica_ctx_t *c, int var, const int64_t *ids, int64_t n, float *out)
{
    int64_t width = s_pc(c)->vars->vars[var].width, nu = 0;
    int64_t *uniq = malloc((size_t)n * sizeof *uniq);
    float *rows = malloc((size_t)(n * width) * sizeof *rows);
    memcpy(uniq, ids, (size_t)n * sizeof *ids);
    qsort(uniq, (size_t)n, sizeof *uniq, s_cmp_id);
    for (int64_t i = 0; i < n; i++)
        if (nu == 0 || uniq[i] != uniq[nu - 1])
            uniq[nu++] = uniq[i];
    int rc = s_pc(c)->be->ops->read_rows(s_pc(c)->be, 0, var, uniq, nu, rows);
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        const int64_t *at = bsearch(&ids[i], uniq, (size_t)nu, sizeof *uniq, s_cmp_id);
        memcpy(out + i * width, rows + (at - uniq) * width, (size_t)width * sizeof *out);
    }
    free(uniq);
    free(rows);
    return rc;
}

static int
s_pc_apply(zdist_replica_ctx_t *c, const zdist_grad_t *g, int n)
{
    return s_pc(c)->be->ops->apply(s_pc(c)->be, 0, g, n);
}

static int
s_pc_output(zdist_replica_ctx_t *c, const char *name, double v, zdist_reduce_op_t op)
{
    (void)op;
    if (strcmp(name, ZDIST_OUTPUT_LOSS) == 0)
        s_pc(c)->loss = v;
    return 0;
}

static void *
s_pc_scratch(zdist_replica_ctx_t *c, int slot, size_t bytes)
{
    void *p = realloc(s_pc(c)->scratch[slot], bytes);
    if (p)
        s_pc(c)->scratch[slot] = p;
    return p;
}

static void s_pc_error(zdist_replica_ctx_t *c, int code, const char *text) { (void)c, (void)code, (void)text; }

static const zdist_replica_ops_t s_pc_ops = {
    .size = sizeof(zdist_replica_ops_t),
    .replica_id_in_sync_group = s_pc_zero,
    .num_replicas_in_sync = s_pc_one,
    .next_batch = s_pc_next,
    .variable = s_pc_var,
    .read = s_pc_read,
    .read_rows = s_pc_read_rows,
    .apply_gradients = s_pc_apply,
    .output = s_pc_output,
    .scratch = s_pc_scratch,
    .set_error = s_pc_error,
};

/* A functional model's embedding tables live on two psds, each split in
   row ranges (the job's partitioner), read by row and updated by sparse
   gradients: rows no example reads keep their values, read ones move,
   and the loss goes down. */
static void
test_functional_tables(void)
{
    static const char *model =
        "{\"layers\": ["
        "{\"name\": \"h\", \"hashing\": {\"num_bins\": 64}, \"inputs\": [\"C2\"]},"
        "{\"name\": \"e1\", \"embedding\": {\"input_dim\": 40, \"output_dim\": 4}, \"inputs\": [\"C1\"]},"
        "{\"name\": \"e2\", \"embedding\": {\"input_dim\": 64, \"output_dim\": 4}, \"inputs\": [\"h\"]},"
        "{\"name\": \"x\", \"dot_interaction\": {\"self_interaction\": true}, \"inputs\": [\"e1\", \"e2\"]},"
        "{\"name\": \"top\", \"dense\": {\"units\": 1}, \"inputs\": [\"x\"]}],"
        " \"output\": \"top\", \"loss\": \"binary_crossentropy\","
        " \"features\": {\"C1\": {\"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": []},"
        " \"C2\": {\"kind\": \"var\", \"dtype\": \"int64\"}}}";
    zdist_model_info_t info = {.label_dtype = ZDIST_DTYPE_INT32};
    zdist_error_t err = {0};
    void *state = NULL;
    worker_vars_t vars;
    CU_ASSERT_EQUAL_FATAL(worker_model_functional.init(model, &info, &state, &err), 0);
    CU_ASSERT_EQUAL_FATAL(worker_vars_build(&worker_model_functional, state, &vars, &err), 0);
    char eps_buf[2][256];
    zactor_t *psd[2] = {zdist_test_psd_start(0, eps_buf[0], sizeof eps_buf[0]),
                        zdist_test_psd_start(1, eps_buf[1], sizeof eps_buf[1])};
    const char *eps[2] = {eps_buf[0], eps_buf[1]};
    worker_psd_config_t pcfg = {.endpoints = eps, .num_ps = 2, .partitioner = "fixed:2", .prefix = "f/",
                                .timeout_ms = 10000};
    s_psd_ctx_t c = {.base.ops = &s_pc_ops, .vars = &vars};
    c.be = worker_psd_new(&vars, &pcfg, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.be);
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 0.5};
    CU_ASSERT_EQUAL_FATAL(worker_psd_create_variables(c.be, &sgd, 1, NULL, &err), 0);
    int e1 = worker_vars_find(&vars, "e1/embeddings");
    CU_ASSERT_FATAL(e1 >= 0);
    const zdist_layout_t *layout = worker_psd_layout(c.be, e1);
    CU_ASSERT_EQUAL_FATAL(layout->num_shards, 2);
    CU_ASSERT_NOT_EQUAL(layout->shards[0].ps, layout->shards[1].ps);
    CU_ASSERT_EQUAL(layout->shards[1].offset, 20);

    int64_t c1[] = {3, 31, 3, 25}, offs[] = {0, 2, 3, 3, 5}, c2[] = {INT64_MIN, 11, 5, -7, INT64_MAX};
    zdist_step_column_t cols[] = {{.name = "C1", .dtype = ZDIST_DTYPE_INT64, .width = 1, .values = c1},
                                  {.name = "C2", .dtype = ZDIST_DTYPE_INT64, .row_offsets = offs, .values = c2}};
    int32_t y[] = {1, 0, 1, 0};
    c.batch = (zdist_step_batch_t){.size = 4, .global_size = 4, .label_dtype = ZDIST_DTYPE_INT32, .labels = y,
                                   .ncolumns = 2, .columns = cols};
    int64_t probe[] = {3, 25, 7, 30};
    float before[16], after[16];
    CU_ASSERT_EQUAL(s_pc_read_rows(&c.base, e1, probe, 4, before), 0);
    double first = 0, last = 0;
    for (int step = 0; step < 30; step++) {
        c.given = false;
        CU_ASSERT_EQUAL_FATAL(worker_model_functional.train_step(state, &c.base), 0);
        if (step == 0)
            first = c.loss;
        last = c.loss;
    }
    CU_ASSERT(last < first);
    CU_ASSERT_EQUAL(s_pc_read_rows(&c.base, e1, probe, 4, after), 0);
    /* rows 3 (shard 0) and 25 (shard 1) were read, rows 7 and 30 never */
    CU_ASSERT_NOT_EQUAL(memcmp(before, after, 4 * sizeof(float)), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(before + 4, after + 4, 4 * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(before + 8, after + 8, 8 * sizeof(float)), 0);
    for (int slot = 0; slot < ZDIST_SCRATCH_SLOTS; slot++)
        free(c.scratch[slot]);
    c.be->ops->destroy(&c.be);
    zactor_destroy(&psd[0]);
    zactor_destroy(&psd[1]);
    worker_vars_release(&vars);
    worker_model_functional.destroy(state);
}

/* ---- read_rows_many: every table's rows in one exchange ---- */

/* Distinct values in the rows of ids (grad row k: k + 0.5 times id's low bits), pushed by sparse gradients. */
static void
s_mark_rows(worker_backend_t *be, int var, const int64_t *ids, int64_t n)
{
    float g[2 * 8];
    for (int64_t k = 0; k < n; k++)
        for (int j = 0; j < 2; j++)
            g[2 * k + j] = (float)(k + 1) * 0.5f + (float)j * 0.25f;
    zdist_grad_t grad = {.var = var, .values = g, .ids = ids, .nids = n};
    CU_ASSERT_EQUAL(be->ops->apply(be, 0, &grad, 1), 0);
}

/* A fixed table split over two psds and a dynamic table: a batched read
   (duplicate ids, the same table twice, an empty read) gives what separate
   reads give, and an id outside the fixed table is refused with nothing
   read. */
static void
test_read_rows_many(void)
{
    zactor_t *psd[2];
    char ep[2][256];
    for (int p = 0; p < 2; p++)
        psd[p] = zdist_test_psd_start(p, ep[p], sizeof ep[p]);
    worker_var_t var[2] = {
        {.name = "f", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {40, 2}}, .trainable = true, .rows = 40,
         .width = 2, .n = 80, .init = {.kind = ZDIST_INIT_CONSTANT, .value = 1}},
        {.name = "d", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {0, 2}}, .trainable = true, .width = 2,
         .init = {.kind = ZDIST_INIT_CONSTANT, .value = 2}, .dynamic = true},
    };
    worker_vars_t vars = {.vars = var, .n = 2, .cap = 2};
    const char *eps[2] = {ep[0], ep[1]};
    worker_psd_config_t pcfg = {.endpoints = eps, .num_ps = 2, .partitioner = "fixed:2", .prefix = "m/",
                                .timeout_ms = 10000};
    zdist_error_t err = {0};
    worker_backend_t *be = worker_psd_new(&vars, &pcfg, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(be);
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 1};
    CU_ASSERT_EQUAL_FATAL(worker_psd_create_variables(be, &sgd, 1, NULL, &err), 0);
    CU_ASSERT_EQUAL_FATAL(worker_psd_layout(be, 0)->num_shards, 2);
    CU_ASSERT_NOT_EQUAL(worker_psd_layout(be, 0)->shards[0].ps, worker_psd_layout(be, 0)->shards[1].ps);
    const int64_t fmark[] = {0, 5, 21, 39}, dmark[] = {INT64_MIN, -3, 7, INT64_MAX};
    worker_psd_set_job_step(be, 1);
    s_mark_rows(be, 0, fmark, 4);
    s_mark_rows(be, 1, dmark, 4);

    const int64_t fa[] = {39, 0, 21, 0, 6, 5}, da[] = {7, 99, INT64_MIN, 7, -3, INT64_MAX}, fb[] = {20, 19};
    const int vs[4] = {0, 1, 0, 1};
    const int64_t *ids[4] = {fa, da, fb, da};
    const int64_t counts[4] = {6, 6, 2, 0};
    float many[4][12], one[3][12];
    float *outs[4] = {many[0], many[1], many[2], many[3]};
    worker_rows_t rows = {0};
    zdist_ps_client_t *c[2];
    uint64_t before[2];
    for (int p = 0; p < 2; p++) {
        c[p] = zdist_ps_client_new(ep[p], NULL, &err);
        before[p] = zdist_test_psd_requests(c[p], "pull_rows");
    }
    CU_ASSERT_EQUAL(worker_rows_read(&rows, be, 0, &vars, 4, vs, ids, counts, outs, &err), 0);
    for (int p = 0; p < 2; p++) /* every table's rows in one request per psd */
        CU_ASSERT_EQUAL(zdist_test_psd_requests(c[p], "pull_rows"), before[p] + 1);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(worker_rows_read(&rows, be, 0, &vars, 1, &vs[i], &ids[i], &counts[i], (float *[]){one[i]},
                                         &err), 0);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(memcmp(many[i], one[i], (size_t)(counts[i] * 2) * sizeof(float)), 0);
    CU_ASSERT(many[0][0] == 1.0f - 2.0f && many[0][2] == 0.5f); /* row 39 (shard 1) moved, row 0 too */
    CU_ASSERT(many[0][8] == 1.0f && many[0][9] == 1.0f);       /* row 6 never pushed */
    CU_ASSERT(many[1][2] == 0.0f && many[1][3] == 0.0f);       /* id 99: no row, the default */
    CU_ASSERT(many[1][0] == 2.0f - 1.5f);                      /* id 7 */

    /* An id outside the fixed table: -ERANGE naming it, nothing read. */
    const int64_t bad[] = {3, 40};
    const int64_t *bids[2] = {da, bad};
    const int bvs[2] = {1, 0};
    const int64_t bcounts[2] = {6, 2};
    float sentinel[2][12];
    memset(sentinel, 0x7f, sizeof sentinel);
    float *bouts[2] = {sentinel[0], sentinel[1]};
    err = (zdist_error_t){0};
    CU_ASSERT_EQUAL(worker_rows_read(&rows, be, 0, &vars, 2, bvs, bids, bcounts, bouts, &err), -ERANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "id 40 is outside variable 'f'"));
    for (int k = 0; k < 12; k++)
        CU_ASSERT_NOT_EQUAL(sentinel[0][k], many[1][k]);
    /* ... and by the backend itself (the ids a host passes it unchecked) */
    CU_ASSERT_EQUAL(be->ops->read_rows_many(be, 0, 2, bvs, bids, bcounts, bouts), -ERANGE);
    const int bad_var = 7;
    CU_ASSERT_EQUAL(worker_rows_read(&rows, be, 0, &vars, 1, &bad_var, ids, counts, outs, &err), -EINVAL);

    /* A psd refuses the whole request when one of its items names a variable it does not hold. */
    const zdist_ps_rows_item_t more[1] = {{.name = "m/nope", .ids = fa, .nids = 1}};
    const int64_t row0 = 0; /* in shard 0 */
    zdist_ps_op_t op = {.client = c[worker_psd_layout(be, 0)->shards[0].ps],
                        .request = {.method = ZDIST_PS_PULL_ROWS,
                                    .pull_rows = {.name = "m/f", .ids = &row0, .nids = 1, .more = more, .nmore = 1}}};
    zdist_ps_client_run(&op, 1);
    CU_ASSERT_EQUAL(op.rc, 0);
    zdist_tensor_t t;
    CU_ASSERT_EQUAL(zdist_ps_reply_values_at(op.reply, 0, 2, &t, &err), -ENOENT);
    zdist_ps_ops_release(&op, 1);
    worker_rows_free(&rows);
    for (int p = 0; p < 2; p++)
        zdist_ps_client_destroy(&c[p]);
    be->ops->destroy(&be);
    for (int p = 0; p < 2; p++)
        zactor_destroy(&psd[p]);
}

/* Every item's rows of a pull_rows go back in one message: items that fit
   alone but not together are refused RESOURCE_EXHAUSTED naming the limit,
   and the same rows in two calls are served. */
static void
test_read_rows_many_message_limit(void)
{
    char ep[256];
    zactor_t *psd = zdist_test_psd_start_limited(0, 64 << 10, ep, sizeof ep);
    worker_var_t var = {.name = "f", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {4096, 8}}, .trainable = true,
                        .rows = 4096, .width = 8, .n = 4096 * 8, .init = {.kind = ZDIST_INIT_CONSTANT, .value = 1}};
    worker_vars_t vars = {.vars = &var, .n = 1, .cap = 1};
    const char *eps[1] = {ep};
    worker_psd_config_t pcfg = {.endpoints = eps, .num_ps = 1, .partitioner = "fixed:1", .prefix = "m/",
                                .timeout_ms = 10000};
    zdist_error_t err = {0};
    worker_backend_t *be = worker_psd_new(&vars, &pcfg, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(be);
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 1};
    CU_ASSERT_EQUAL_FATAL(worker_psd_create_variables(be, &sgd, 1, NULL, &err), 0);
    static int64_t ids[1500];
    for (int i = 0; i < 1500; i++)
        ids[i] = i;
    zdist_ps_client_t *c = zdist_ps_client_new(ep, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    /* 1,500 rows of 32 bytes (48 KB) fit the 64 KiB limit; twice that does not. */
    const zdist_ps_rows_item_t more[1] = {{.name = "m/f", .ids = ids, .nids = 1500}};
    for (int n = 0; n <= 1; n++) {
        zdist_ps_op_t op = {.client = c,
                            .request = {.method = ZDIST_PS_PULL_ROWS,
                                        .pull_rows = {.name = "m/f", .ids = ids, .nids = 1500, .more = more,
                                                      .nmore = (size_t)n}}};
        zdist_ps_client_run(&op, 1);
        CU_ASSERT_EQUAL(op.rc, 0);
        zdist_tensor_t t;
        err = (zdist_error_t){0};
        int rc = zdist_ps_reply_values_at(op.reply, 0, (size_t)n + 1, &t, &err);
        if (n == 0) {
            CU_ASSERT_EQUAL(rc, 0);
            CU_ASSERT_EQUAL(t.nbytes, (size_t)1500 * 8 * sizeof(float));
        } else {
            CU_ASSERT(rc < 0);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "message limit of 65536 bytes"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "RESOURCE_EXHAUSTED"));
        }
        zdist_ps_ops_release(&op, 1);
    }
    zdist_ps_client_destroy(&c);
    be->ops->destroy(&be);
    zactor_destroy(&psd);
}

void
zdist_test_worker_psd_register(void)
{
    ZDIST_SUITE(
        "worker_psd", {"push_pull feeds the next read", test_push_pull_feeds_the_next_read},
        {"values never older than the own last push", test_values_never_older_than_the_own_last_push},
        {"a batched pull_rows within the message limit", test_read_rows_many_message_limit},
        {"colocate_vars_with: placement, checkpoint and restore", test_colocate_vars_with},
        {"a rank-0 variable: held, read, pushed and assigned", test_scalar_variable},
        {"a dynamic table over two psds: raw ids, admission at the push, a re-run counted once",
         test_dynamic_table},
        {"a functional model's tables on two psds: read by row, sparse gradients", test_functional_tables},
        {"read_rows_many: fixed and dynamic tables as separate reads, an id outside refused", test_read_rows_many});
}
