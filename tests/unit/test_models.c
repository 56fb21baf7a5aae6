/* CUnit suite: built-in models — finite-difference checks of every backward pass, empty batches, bad params. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/models.h"
#include "testutil.h"
#include "worker_registry.h"
#include "worker_vars.h"

/* A replica context of one replica that records what a step does: reads
   come from `vals`, applied gradients (dense, or sparse summed into dense)
   land in `grads`, the loss output in `loss`. Only zdist/step.h is used, as
   by any host. */
typedef struct {
    zdist_replica_ctx_t base;
    worker_vars_t *vars;
    float **vals, **grads;
    zdist_step_batch_t batch;
    bool given, applied;
    double loss, correct, examples;
    void *scratch[ZDIST_SCRATCH_SLOTS];
    /* Replica rid of nrep (0: of 1): all_gather hands back `sizes`, as if
       the other replicas had posted them. */
    int rid, nrep;
    float sizes[4];
} s_fake_t;

static int s_rid(zdist_replica_ctx_t *c) { return ((s_fake_t *)c)->rid; }
static int s_nrep(zdist_replica_ctx_t *c) { return ((s_fake_t *)c)->nrep > 0 ? ((s_fake_t *)c)->nrep : 1; }

static int
s_next(zdist_replica_ctx_t *c, const zdist_step_batch_t **ret)
{
    s_fake_t *f = (s_fake_t *)c;
    if (f->given)
        return 0;
    f->given = true;
    *ret = &f->batch;
    return 1;
}

static int s_var(zdist_replica_ctx_t *c, const char *name) { return worker_vars_find(((s_fake_t *)c)->vars, name); }

static int
s_read(zdist_replica_ctx_t *c, int var, const float **ret)
{
    *ret = ((s_fake_t *)c)->vals[var];
    return 0;
}

static int
s_read_rows(zdist_replica_ctx_t *c, int var, const int64_t *ids, int64_t n, float *out)
{
    s_fake_t *f = (s_fake_t *)c;
    int64_t w = f->vars->vars[var].width;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= f->vars->vars[var].rows)
            return -ERANGE;
        memcpy(out + i * w, f->vals[var] + ids[i] * w, (size_t)w * sizeof *out);
    }
    return 0;
}

static int
s_apply(zdist_replica_ctx_t *c, const zdist_grad_t *g, int n)
{
    s_fake_t *f = (s_fake_t *)c;
    f->applied = true;
    for (int i = 0; i < n; i++) {
        const worker_var_t *v = &f->vars->vars[g[i].var];
        float *dst = f->grads[g[i].var];
        if (!g[i].ids) {
            memcpy(dst, g[i].values, (size_t)v->n * sizeof *dst);
            continue;
        }
        memset(dst, 0, (size_t)v->n * sizeof *dst);
        for (int64_t k = 0; k < g[i].nids; k++)
            for (int64_t j = 0; j < v->width; j++)
                dst[g[i].ids[k] * v->width + j] += g[i].values[k * v->width + j];
    }
    return 0;
}

static int
s_output(zdist_replica_ctx_t *c, const char *name, double value, zdist_reduce_op_t op)
{
    s_fake_t *f = (s_fake_t *)c;
    (void)op;
    if (strcmp(name, ZDIST_OUTPUT_LOSS) == 0)
        f->loss = value;
    else if (strcmp(name, ZDIST_OUTPUT_CORRECT) == 0)
        f->correct = value;
    else if (strcmp(name, ZDIST_OUTPUT_EXAMPLES) == 0)
        f->examples = value;
    return 0;
}

static void *
s_scratch(zdist_replica_ctx_t *c, int slot, size_t bytes)
{
    s_fake_t *f = (s_fake_t *)c;
    free(f->scratch[slot]);
    f->scratch[slot] = calloc(1, bytes + 64);
    return f->scratch[slot];
}

static void s_set_error(zdist_replica_ctx_t *c, int code, const char *text) { (void)c; (void)code; (void)text; }

/* One replica: an all-reduce leaves the values as they are. */
static int
s_all_reduce(zdist_replica_ctx_t *c, zdist_reduce_op_t op, float *const *bufs, const int64_t *lens, int n)
{
    (void)c, (void)op, (void)bufs, (void)lens, (void)n;
    return 0;
}

static int
s_all_gather(zdist_replica_ctx_t *c, const float *in, const zdist_shape_t *shape, int axis, const float **ret,
             zdist_shape_t *ret_shape)
{
    s_fake_t *f = (s_fake_t *)c;
    CU_ASSERT(shape->rank == 1 && shape->dims[0] == 1 && axis == 0 && f->nrep > 1 &&
              in[0] == f->sizes[f->rid]);
    *ret = f->sizes;
    *ret_shape = (zdist_shape_t){1, {f->nrep}};
    return 0;
}

static int
s_assign_add(zdist_replica_ctx_t *c, int var, const float *delta)
{
    s_fake_t *f = (s_fake_t *)c;
    for (int64_t j = 0; j < f->vars->vars[var].n; j++)
        f->vals[var][j] += delta[j];
    return 0;
}

static const zdist_replica_ops_t s_fake_ops = {
    .size = sizeof(zdist_replica_ops_t),
    .replica_id_in_sync_group = s_rid,
    .num_replicas_in_sync = s_nrep,
    .next_batch = s_next,
    .variable = s_var,
    .read = s_read,
    .read_rows = s_read_rows,
    .apply_gradients = s_apply,
    .all_reduce = s_all_reduce,
    .all_gather = s_all_gather,
    .assign_add = s_assign_add,
    .output = s_output,
    .scratch = s_scratch,
    .set_error = s_set_error,
};

static uint64_t s_rng = 0x9e3779b97f4a7c15ull;
static double
s_uniform(void)
{
    return zdist_test_uniform(&s_rng);
}

typedef struct {
    const zdist_model_t *model;
    void *state;
    worker_vars_t vars;
    float *vals[16], *grads[16];
    s_fake_t f;
    bool skip_kinks; /* s_check_gradients skips points next to a kink */
    int checked, kinks;
} s_harness_t;

static void
s_setup(s_harness_t *h, const zdist_model_t *model, const char *params, const zdist_model_info_t *info, bool randomize)
{
    memset(h, 0, sizeof *h);
    h->model = model;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(model->init(params, info, &h->state, &err), 0);
    CU_ASSERT_EQUAL_FATAL(worker_vars_build(model, h->state, &h->vars, &err), 0);
    CU_ASSERT_FATAL(h->vars.n <= 16);
    for (int v = 0; v < h->vars.n; v++) {
        h->vals[v] = calloc((size_t)h->vars.vars[v].n, sizeof(float));
        h->grads[v] = calloc((size_t)h->vars.vars[v].n, sizeof(float));
        CU_ASSERT_EQUAL(worker_vars_init_values(&h->vars.vars[v], 7, h->vals[v], &err), 0);
        /* Zero-initialized weights and biases make a poor test point. */
        if (randomize)
            for (int64_t j = 0; j < h->vars.vars[v].n; j++)
                h->vals[v][j] += (float)(s_uniform() - 0.5) * 0.5f;
    }
    h->f.base.ops = &s_fake_ops;
    h->f.vars = &h->vars;
    h->f.vals = h->vals;
    h->f.grads = h->grads;
}

static void
s_teardown(s_harness_t *h)
{
    for (int v = 0; v < h->vars.n; v++) {
        free(h->vals[v]);
        free(h->grads[v]);
    }
    for (int s = 0; s < ZDIST_SCRATCH_SLOTS; s++)
        free(h->f.scratch[s]);
    worker_vars_release(&h->vars);
    h->model->destroy(h->state);
}

static double
s_loss(s_harness_t *h)
{
    h->f.given = false;
    h->f.applied = false;
    CU_ASSERT_EQUAL(h->model->train_step(h->state, &h->f.base), 0);
    CU_ASSERT(h->f.applied);
    return h->f.loss;
}

/* Central differences on every element (or a sample of big variables),
   against the gradient the step applied. Returns the worst relative error. */
static double
s_check_gradients(s_harness_t *h, double eps)
{
    s_loss(h);
    float *analytic[16];
    for (int v = 0; v < h->vars.n; v++) {
        analytic[v] = malloc((size_t)h->vars.vars[v].n * sizeof(float));
        memcpy(analytic[v], h->grads[v], (size_t)h->vars.vars[v].n * sizeof(float));
    }
    double worst = 0;
    for (int v = 0; v < h->vars.n; v++) {
        int64_t n = h->vars.vars[v].n;
        if (!h->vars.vars[v].trainable)
            continue; /* no gradient: batch norm's moving statistics */
        for (int64_t j = 0; j < n; j += n > 64 ? n / 40 + 1 : 1) {
            float keep = h->vals[v][j];
            h->vals[v][j] = keep + (float)eps;
            double lp = s_loss(h);
            h->vals[v][j] = keep - (float)eps;
            double lm = s_loss(h);
            h->vals[v][j] = keep;
            double step = (double)(keep + (float)eps) - (double)(keep - (float)eps);
            if (h->skip_kinks) {
                /* A max-pool switch or a ReLU kink inside [-eps, eps]: the
                   one-sided differences disagree; such points are skipped. */
                double l0 = s_loss(h), fwd = (lp - l0) / (step / 2), bwd = (l0 - lm) / (step / 2);
                h->checked++;
                if (fabs(fwd - bwd) > 0.1 * (fabs(fwd) + fabs(bwd)) + 2e-4) {
                    h->kinks++;
                    continue;
                }
            }
            double fd = (lp - lm) / step, an = analytic[v][j];
            double rel = fabs(fd - an) / (fabs(fd) + fabs(an) + 1e-3);
            if (rel > worst)
                worst = rel;
            if (rel > 2e-2)
                fprintf(stderr, "\n  %s %s[%lld]: finite difference %.6g, gradient %.6g", h->model->name,
                        h->vars.vars[v].name, (long long)j, fd, an);
        }
    }
    for (int v = 0; v < h->vars.n; v++)
        free(analytic[v]);
    if (getenv("ZDIST_TEST_VERBOSE"))
        fprintf(stderr, "\n  %s: worst relative error %.2e", h->model->name, worst);
    return worst;
}

static void
s_dense_batch(s_harness_t *h, int64_t n, int64_t d, int classes, float *x, void *y)
{
    for (int64_t i = 0; i < n * d; i++)
        x[i] = (float)(s_uniform() * 2 - 1);
    for (int64_t i = 0; i < n; i++) {
        if (classes)
            ((int32_t *)y)[i] = (int32_t)(s_uniform() * classes) % classes;
        else
            ((float *)y)[i] = (float)(s_uniform() * 4 - 2);
    }
    h->f.batch = (zdist_step_batch_t){.size = n, .dim = d, .global_size = n + 3, .features = x,
                                      .label_dtype = classes ? ZDIST_DTYPE_INT32 : ZDIST_DTYPE_FLOAT32, .labels = y};
}

static void
test_linear_regression_gradients(void)
{
    zdist_model_info_t info = {.input_dim = 5, .label_dtype = ZDIST_DTYPE_FLOAT32};
    s_harness_t h;
    s_setup(&h, &worker_model_linear_regression, "{}", &info, true);
    float x[7 * 5], y[7];
    s_dense_batch(&h, 7, 5, 0, x, y);
    CU_ASSERT(s_check_gradients(&h, 1e-2) < 1e-2);
    CU_ASSERT_DOUBLE_EQUAL(h.f.examples, 7, 0);
    s_teardown(&h);
}

static void
test_softmax_regression_gradients(void)
{
    zdist_model_info_t info = {.input_dim = 6, .num_classes = 4, .label_dtype = ZDIST_DTYPE_INT32};
    s_harness_t h;
    s_setup(&h, &worker_model_softmax_regression, "{}", &info, true);
    float x[9 * 6];
    int32_t y[9];
    s_dense_batch(&h, 9, 6, 4, x, y);
    CU_ASSERT(s_check_gradients(&h, 1e-2) < 1e-2);
    CU_ASSERT(h.f.correct >= 0 && h.f.correct <= 9);
    s_teardown(&h);
}

static void
test_mlp_gradients(void)
{
    zdist_model_info_t info = {.input_dim = 5, .num_classes = 3, .label_dtype = ZDIST_DTYPE_INT32};
    s_harness_t h;
    s_setup(&h, &worker_model_mlp, "{\"hidden\": [7, 6]}", &info, true);
    CU_ASSERT_EQUAL(h.vars.n, 6);
    CU_ASSERT_STRING_EQUAL(h.vars.vars[2].name, "dense_1/kernel");
    float x[8 * 5];
    int32_t y[8];
    s_dense_batch(&h, 8, 5, 3, x, y);
    /* A small step keeps finite differences off ReLU kinks. */
    CU_ASSERT(s_check_gradients(&h, 2e-3) < 2e-2);
    s_teardown(&h);
}

static void
test_sparse_logreg_gradients(void)
{
    zdist_model_info_t info = {.input_dim = 10, .num_classes = 2, .sparse = true, .label_dtype = ZDIST_DTYPE_INT32};
    s_harness_t h;
    s_setup(&h, &worker_model_sparse_logreg, "{}", &info, true);
    /* Four examples; feature 3 twice in the first (folded duplicates sum). */
    int64_t offs[] = {0, 3, 5, 5, 8};
    int64_t ids[] = {3, 1, 3, 9, 0, 2, 3, 7};
    float vals[] = {0.5f, -1.0f, 1.5f, 2.0f, 0.25f, -0.75f, 1.0f, 0.5f};
    int32_t y[] = {1, 0, 1, 0};
    h.f.batch = (zdist_step_batch_t){.size = 4, .dim = 10, .global_size = 6, .row_offsets = offs,
                                     .feature_ids = ids, .feature_values = vals,
                                     .label_dtype = ZDIST_DTYPE_INT32, .labels = y};
    CU_ASSERT(s_check_gradients(&h, 1e-2) < 1e-2);
    /* Rows no example touches get no gradient. */
    CU_ASSERT_EQUAL(h.grads[0][4], 0);
    CU_ASSERT_EQUAL(h.grads[0][8], 0);
    s_teardown(&h);
}

/* sequential: a small CNN with every image layer, batch norm and dropout;
   the loss's softmax fused. Dropout's mask is the same on every call here
   (the fake context's scratch starts from zero: step 0 each time). A max
   pool has kinks: a perturbed weight moves hundreds of activations, so
   at some points two of a window's come within the step; those points are
   skipped. The first convolution is smooth (tanh): ReLU's kinks there,
   scaled by batch norm, hide below what the skip detects (the layer suite
   checks ReLU on its own, and conv2d_1 here has one). */
static const char *s_seq_cnn =
    "{\"input_shape\": [4, 4, 2], \"layers\": ["
    "{\"conv2d\": {\"filters\": 3, \"kernel\": 3, \"padding\": \"same\", \"activation\": \"tanh\"}},"
    "{\"batch_norm\": {}}, {\"max_pool2d\": {\"pool\": 2}},"
    "{\"conv2d\": {\"filters\": 2, \"kernel\": [2, 1], \"strides\": [1, 2], \"activation\": \"relu\"}},"
    "{\"avg_pool2d\": {\"pool\": 2, \"strides\": 1, \"padding\": \"same\"}},"
    "\"flatten\", {\"dropout\": {\"rate\": 0.3}}, {\"dense\": {\"units\": 4}}, \"sigmoid\","
    "{\"dense\": {\"units\": 3, \"activation\": \"softmax\"}}],"
    " \"loss\": \"sparse_categorical_crossentropy\"}";

static void
test_sequential_cnn_gradients(void)
{
    zdist_model_info_t info = {.input_dim = 32, .num_classes = 3, .label_dtype = ZDIST_DTYPE_INT32, .seed = 3};
    s_harness_t h;
    s_setup(&h, &worker_model_sequential, s_seq_cnn, &info, true);
    CU_ASSERT_EQUAL(h.vars.n, 12);
    CU_ASSERT_STRING_EQUAL(h.vars.vars[0].name, "conv2d/kernel");
    CU_ASSERT_EQUAL(h.vars.vars[0].shape.rank, 4);
    CU_ASSERT_STRING_EQUAL(h.vars.vars[4].name, "batch_normalization/moving_mean");
    CU_ASSERT_EQUAL(h.vars.vars[4].synchronization, ZDIST_SYNC_ON_READ);
    CU_ASSERT_EQUAL(h.vars.vars[4].aggregation, ZDIST_AGG_MEAN);
    CU_ASSERT_FALSE(h.vars.vars[5].trainable);
    float x[3 * 32];
    int32_t y[3];
    s_dense_batch(&h, 3, 32, 3, x, y);
    h.skip_kinks = true;
    CU_ASSERT(s_check_gradients(&h, 2e-3) < 2e-2);
    CU_ASSERT(h.checked > 80);
    CU_ASSERT(h.kinks * 10 < h.checked);
    if (getenv("ZDIST_TEST_VERBOSE"))
        fprintf(stderr, "\n  %d of %d points next to a kink", h.kinks, h.checked);
    CU_ASSERT_DOUBLE_EQUAL(h.f.examples, 3, 0);
    s_teardown(&h);
}

/* sequential with strategy tpu's placement, on a host of one logical
   device (this fake context): the split layers' parts and the assigned
   layer run one after the other on the caller's thread, and the gradients
   are the whole model's (finite differences; smooth activations). */
static void
test_sequential_split_gradients(void)
{
    zdist_model_info_t info = {.input_dim = 32, .num_classes = 3, .label_dtype = ZDIST_DTYPE_INT32, .seed = 4};
    s_harness_t h;
    s_setup(&h, &worker_model_sequential,
            "{\"input_shape\": [4, 4, 2], \"layers\": ["
            "{\"conv2d\": {\"filters\": 3, \"kernel\": 3, \"padding\": \"same\", \"activation\": \"tanh\", "
            "\"split\": [2, 2]}},"
            "{\"conv2d\": {\"filters\": 2, \"kernel\": [2, 3], \"activation\": \"tanh\", \"split\": [3, 1]}},"
            "{\"conv2d\": {\"filters\": 2, \"kernel\": 1, \"activation\": \"tanh\", \"logical_device\": 1}},"
            "\"flatten\", {\"dense\": {\"units\": 4, \"activation\": \"tanh\", \"split\": [4]}},"
            "{\"dense\": {\"units\": 3, \"split\": [2]}}], \"loss\": \"sparse_categorical_crossentropy\"}",
            &info, true);
    float x[3 * 32];
    int32_t y[3];
    s_dense_batch(&h, 3, 32, 3, x, y);
    CU_ASSERT(s_check_gradients(&h, 2e-3) < 2e-2);
    s_teardown(&h);
}

/* One train step moves batch norm's moving statistics by (1 - momentum)
   toward the batch's; evaluation uses them and drops nothing. */
static void
test_sequential_batch_norm_moving(void)
{
    zdist_model_info_t info = {.input_dim = 3, .num_classes = 2, .label_dtype = ZDIST_DTYPE_INT32};
    s_harness_t h;
    s_setup(&h, &worker_model_sequential,
            "{\"input_shape\": [3], \"layers\": [{\"batch_norm\": {\"momentum\": 0.75}}, "
            "{\"dropout\": {\"rate\": 0.5}}, {\"dense\": {\"units\": 2}}], "
            "\"loss\": \"sparse_categorical_crossentropy\"}", &info, false);
    float x[4 * 3] = {1, 2, 3, 3, 2, 1, 5, 2, 0, -1, 2, 4};
    int32_t y[4] = {0, 1, 1, 0};
    h.f.batch = (zdist_step_batch_t){.size = 4, .dim = 3, .global_size = 4, .features = x,
                                     .label_dtype = ZDIST_DTYPE_INT32, .labels = y};
    s_loss(&h);
    /* means 2, 2, 2; variances 5, 0, 2.5 */
    const float mean[3] = {2, 2, 2}, var[3] = {5, 0, 2.5};
    for (int c = 0; c < 3; c++) {
        CU_ASSERT_DOUBLE_EQUAL(h.vals[2][c], 0.25 * mean[c], 1e-5);
        CU_ASSERT_DOUBLE_EQUAL(h.vals[3][c], 0.75 + 0.25 * var[c], 1e-5);
    }
    /* Evaluation: the same loss twice (no dropout), from the moving statistics. */
    h.f.given = false;
    CU_ASSERT_EQUAL(h.model->eval_step(h.state, &h.f.base), 0);
    double e1 = h.f.loss;
    h.f.given = false;
    CU_ASSERT_EQUAL(h.model->eval_step(h.state, &h.f.base), 0);
    CU_ASSERT_DOUBLE_EQUAL(h.f.loss, e1, 0);
    CU_ASSERT_DOUBLE_EQUAL(h.vals[2][0], 0.5, 1e-5); /* eval writes nothing */
    s_teardown(&h);
}

/* Dropout's masks follow the examples: one replica of 8 examples, and 2
   replicas of 4 each (the second's first example is the global batch's
   fifth), give the same loss and gradients, summed over the replicas. */
static void
test_sequential_dropout_replicas(void)
{
    zdist_model_info_t info = {.input_dim = 6, .num_classes = 3, .label_dtype = ZDIST_DTYPE_INT32, .seed = 5};
    const char *params = "{\"input_shape\": [6], \"layers\": ["
                         "{\"dense\": {\"units\": 16, \"activation\": \"tanh\"}}, "
                         "{\"dropout\": {\"rate\": 0.5}}, {\"dense\": {\"units\": 3}}], "
                         "\"loss\": \"sparse_categorical_crossentropy\"}";
    s_harness_t one, two;
    s_setup(&one, &worker_model_sequential, params, &info, true);
    s_setup(&two, &worker_model_sequential, params, &info, false);
    for (int v = 0; v < one.vars.n; v++)
        memcpy(two.vals[v], one.vals[v], (size_t)one.vars.vars[v].n * sizeof(float));
    float x[8 * 6];
    int32_t y[8];
    s_dense_batch(&one, 8, 6, 3, x, y);
    one.f.batch.global_size = 8;
    double whole = s_loss(&one);
    /* dropout is on: evaluation (no dropout) gives another loss */
    one.f.given = false;
    CU_ASSERT_EQUAL(one.model->eval_step(one.state, &one.f.base), 0);
    CU_ASSERT(fabs(one.f.loss - whole) > 1e-4);

    double halves = 0;
    float *sum[16];
    for (int v = 0; v < two.vars.n; v++)
        sum[v] = calloc((size_t)two.vars.vars[v].n, sizeof(float));
    two.f.nrep = 2;
    two.f.sizes[0] = two.f.sizes[1] = 4;
    for (int r = 0; r < 2; r++) {
        two.f.rid = r;
        two.f.batch = (zdist_step_batch_t){.size = 4, .dim = 6, .global_size = 8, .features = x + r * 4 * 6,
                                           .label_dtype = ZDIST_DTYPE_INT32, .labels = y + r * 4};
        halves += s_loss(&two);
        for (int v = 0; v < two.vars.n; v++)
            for (int64_t j = 0; j < two.vars.vars[v].n; j++)
                sum[v][j] += two.grads[v][j];
    }
    CU_ASSERT_DOUBLE_EQUAL(halves, whole, 1e-5);
    int off = 0;
    for (int v = 0; v < two.vars.n; v++) {
        for (int64_t j = 0; j < two.vars.vars[v].n; j++)
            off += fabsf(sum[v][j] - one.grads[v][j]) > 1e-5f;
        free(sum[v]);
    }
    CU_ASSERT_EQUAL(off, 0);
    s_teardown(&one);
    s_teardown(&two);
}

/* Binary and squared losses on dense layers; an unfused sigmoid output. */
static void
test_sequential_losses_gradients(void)
{
    zdist_model_info_t info = {.input_dim = 5, .num_classes = 2, .label_dtype = ZDIST_DTYPE_INT32};
    s_harness_t h;
    s_setup(&h, &worker_model_sequential,
            "{\"input_shape\": [5], \"layers\": [{\"dense\": {\"units\": 4, \"activation\": \"relu\"}}, "
            "{\"dense\": {\"units\": 1}}], \"loss\": \"binary_crossentropy\"}", &info, true);
    float x[6 * 5];
    int32_t y[6];
    s_dense_batch(&h, 6, 5, 2, x, y);
    CU_ASSERT(s_check_gradients(&h, 2e-3) < 2e-2);
    CU_ASSERT(h.f.correct >= 0 && h.f.correct <= 6);
    s_teardown(&h);

    zdist_model_info_t reg = {.input_dim = 5, .label_dtype = ZDIST_DTYPE_FLOAT32};
    s_setup(&h, &worker_model_sequential,
            "{\"input_shape\": [5], \"layers\": [{\"dense\": {\"units\": 4, \"activation\": \"sigmoid\", "
            "\"use_bias\": false}}, {\"dense\": {\"units\": 1, \"activation\": \"tanh\"}}], "
            "\"loss\": \"mean_squared_error\"}", &reg, true);
    CU_ASSERT_EQUAL(h.vars.n, 3);
    float t[6];
    s_dense_batch(&h, 6, 5, 0, x, t);
    for (int i = 0; i < 6; i++)
        t[i] /= 4; /* within tanh's range */
    CU_ASSERT(s_check_gradients(&h, 2e-3) < 1e-2);
    s_teardown(&h);
}

/* Wide and deep on CSR examples: embedding rows read by id (sparse
   gradient), dense features appended, binary cross-entropy. */
static void
test_sequential_wide_deep_gradients(void)
{
    zdist_model_info_t info = {.input_dim = 10, .num_classes = 2, .sparse = true, .label_dtype = ZDIST_DTYPE_INT32};
    s_harness_t h;
    s_setup(&h, &worker_model_sequential,
            "{\"input_shape\": [10], \"layers\": [{\"embedding\": {\"input_dim\": 5, \"output_dim\": 3, "
            "\"first_id\": 2}}, {\"concat\": {\"dense_features\": 2}}, {\"dense\": {\"units\": 3, "
            "\"activation\": \"tanh\"}}, {\"dense\": {\"units\": 1, \"activation\": \"sigmoid\"}}], "
            "\"loss\": \"binary_crossentropy\"}", &info, true);
    CU_ASSERT_STRING_EQUAL(h.vars.vars[0].name, "embedding/embeddings");
    int64_t offs[] = {0, 3, 5, 6, 9};
    int64_t ids[] = {0, 3, 9, 1, 4, 2, 0, 3, 3};
    float vals[] = {0.5f, 1.0f, 1.5f, 2.0f, 0.25f, 1.0f, -1.0f, 1.0f, 0.5f};
    int32_t y[] = {1, 0, 1, 0};
    h.f.batch = (zdist_step_batch_t){.size = 4, .dim = 10, .global_size = 5, .row_offsets = offs,
                                     .feature_ids = ids, .feature_values = vals,
                                     .label_dtype = ZDIST_DTYPE_INT32, .labels = y};
    CU_ASSERT(s_check_gradients(&h, 1e-2) < 1e-2);
    /* Row 4 of the table ((id - 2) % 5 for ids 3, 9, 4, 2, 3, 3: rows 1, 2, 2, 0, 1, 1) gets nothing. */
    CU_ASSERT_EQUAL(h.grads[0][4 * 3], 0);
    CU_ASSERT_EQUAL(h.grads[0][3 * 3 + 1], 0);
    s_teardown(&h);
}

/* A functional DLRM / DCN-v2 hybrid over named columns: a bottom MLP on two
   float features, an embedding of a fixed int64 feature, a hashed var
   feature's mean embedding, DLRM's interaction, a cross, add, concat and a
   sigmoid top; every variable (the tables' rows through sparse gradients)
   checked by finite differences. */
static const char *s_functional =
    "{\"inputs\": [{\"name\": \"dense_in\", \"features\": [\"I1\", \"I2\"]}],"
    " \"layers\": ["
    "{\"name\": \"top\", \"dense\": {\"units\": 1, \"activation\": \"sigmoid\"}, \"inputs\": [\"cat\"]},"
    "{\"name\": \"bot\", \"dense\": {\"units\": 3, \"activation\": \"tanh\"}, \"inputs\": [\"dense_in\"]},"
    "{\"name\": \"e1\", \"embedding\": {\"input_dim\": 5, \"output_dim\": 3}, \"inputs\": [\"C1\"]},"
    "{\"name\": \"h2\", \"hashing\": {\"num_bins\": 4}, \"inputs\": [\"C2\"]},"
    "{\"name\": \"e2\", \"embedding\": {\"input_dim\": 4, \"output_dim\": 3, \"combiner\": \"mean\"},"
    " \"inputs\": [\"h2\"]},"
    "{\"name\": \"inter\", \"dot_interaction\": {\"concat_dense\": true}, \"inputs\": [\"bot\", \"e1\", \"e2\"]},"
    "{\"name\": \"x\", \"cross\": {\"diag_scale\": 0.5}, \"inputs\": [\"inter\"]},"
    "{\"name\": \"sum\", \"add\": {}, \"inputs\": [\"x\", \"inter\"]},"
    "{\"name\": \"cat\", \"concat\": {}, \"inputs\": [\"sum\", \"bot\"]}],"
    " \"output\": \"top\", \"loss\": \"binary_crossentropy\","
    " \"features\": {\"I1\": {\"kind\": \"fixed\", \"dtype\": \"float32\", \"shape\": []},"
    " \"I2\": {\"kind\": \"fixed\", \"dtype\": \"float32\", \"shape\": []},"
    " \"C1\": {\"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": []},"
    " \"C2\": {\"kind\": \"var\", \"dtype\": \"int64\"}}}";

static void
test_functional_gradients(void)
{
    zdist_model_info_t info = {.num_classes = 2, .label_dtype = ZDIST_DTYPE_INT32};
    s_harness_t h;
    s_setup(&h, &worker_model_functional, s_functional, &info, true);
    CU_ASSERT_EQUAL(h.vars.n, 8);
    float i1[] = {0.5f, -1.0f, 0.25f, 2.0f}, i2[] = {1.5f, 0.0f, -0.5f, 1.0f};
    int64_t c1[] = {0, 4, 2, 4};
    int64_t c2_offs[] = {0, 2, 2, 5, 6};
    int64_t c2[] = {INT64_MIN, 7, 123456789012345, -3, 7, INT64_MAX};
    zdist_step_column_t cols[] = {
        {.name = "I1", .dtype = ZDIST_DTYPE_FLOAT32, .width = 1, .values = i1},
        {.name = "C2", .dtype = ZDIST_DTYPE_INT64, .row_offsets = c2_offs, .values = c2},
        {.name = "I2", .dtype = ZDIST_DTYPE_FLOAT32, .width = 1, .values = i2},
        {.name = "C1", .dtype = ZDIST_DTYPE_INT64, .width = 1, .values = c1},
    };
    int32_t y[] = {1, 0, 1, 0};
    h.f.batch = (zdist_step_batch_t){.size = 4, .global_size = 5, .label_dtype = ZDIST_DTYPE_INT32, .labels = y,
                                     .ncolumns = 4, .columns = cols};
    CU_ASSERT(s_check_gradients(&h, 1e-2) < 1e-2);
    /* e1's rows 1 and 3 are read by no example: no gradient */
    int e1 = worker_vars_find(&h.vars, "e1/embeddings");
    CU_ASSERT_FATAL(e1 >= 0);
    CU_ASSERT_EQUAL(h.grads[e1][1 * 3], 0);
    CU_ASSERT_EQUAL(h.grads[e1][3 * 3 + 2], 0);
    CU_ASSERT_NOT_EQUAL(h.grads[e1][4 * 3], 0);
    /* an id outside the table: TF's text, the step refused */
    c1[2] = 5;
    h.f.given = false;
    CU_ASSERT_EQUAL(h.model->train_step(h.state, &h.f.base), -EINVAL);
    c1[2] = 2;
    /* a batch without the feature */
    cols[3].name = "C9";
    h.f.given = false;
    CU_ASSERT_EQUAL(h.model->train_step(h.state, &h.f.base), -EINVAL);
    s_teardown(&h);
}

/* DCN-v2's pieces: [k] ids per example embedded to (k, d) and flattened,
   concatenated with a float feature, two stacked crosses (x0 and x; one
   without bias), add, softmax over 3 classes. */
static void
test_functional_dcn_gradients(void)
{
    zdist_model_info_t info = {.num_classes = 3, .label_dtype = ZDIST_DTYPE_INT32};
    s_harness_t h;
    s_setup(&h, &worker_model_functional,
            "{\"layers\": [{\"name\": \"e3\", \"embedding\": {\"input_dim\": 9, \"output_dim\": 2}, "
            "\"inputs\": [\"C3\"]}, {\"name\": \"f\", \"flatten\": {}, \"inputs\": [\"e3\"]},"
            "{\"name\": \"x0\", \"concat\": {}, \"inputs\": [\"f\", \"V\"]},"
            "{\"name\": \"c1\", \"cross\": {\"diag_scale\": 0.5}, \"inputs\": [\"x0\"]},"
            "{\"name\": \"c2\", \"cross\": {\"use_bias\": false}, \"inputs\": [\"x0\", \"c1\"]},"
            "{\"name\": \"s\", \"add\": {}, \"inputs\": [\"c1\", \"c2\"]},"
            "{\"name\": \"t\", \"tanh\": {}, \"inputs\": [\"s\"]},"
            "{\"name\": \"top\", \"dense\": {\"units\": 3, \"activation\": \"softmax\"}, \"inputs\": [\"t\"]}],"
            " \"output\": \"top\", \"loss\": \"sparse_categorical_crossentropy\","
            " \"features\": {\"V\": {\"kind\": \"fixed\", \"dtype\": \"float32\", \"shape\": [2]},"
            " \"C3\": {\"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": [3]}}}", &info, true);
    CU_ASSERT_EQUAL(h.vars.n, 6);
    float v[] = {0.5f, -1.0f, 0.25f, 2.0f, 1.0f, -0.5f};
    int64_t c3[] = {0, 8, 8, 4, 1, 2, 7, 7, 7};
    zdist_step_column_t cols[] = {{.name = "V", .dtype = ZDIST_DTYPE_FLOAT32, .width = 2, .values = v},
                                  {.name = "C3", .dtype = ZDIST_DTYPE_INT64, .width = 3, .values = c3}};
    int32_t y[] = {2, 0, 1};
    h.f.batch = (zdist_step_batch_t){.size = 3, .global_size = 3, .label_dtype = ZDIST_DTYPE_INT32, .labels = y,
                                     .ncolumns = 2, .columns = cols};
    CU_ASSERT(s_check_gradients(&h, 1e-2) < 1e-2);
    /* an empty replica: zero gradients, still applied */
    h.f.batch.size = 0;
    s_loss(&h);
    CU_ASSERT_EQUAL(h.f.examples, 0);
    for (int64_t j = 0; j < h.vars.vars[h.vars.n - 1].n; j++)
        CU_ASSERT_EQUAL(h.grads[h.vars.n - 1][j], 0);
    s_teardown(&h);
}

/* An empty replica still applies (zero) gradients and reports 0 examples. */
static void
test_empty_batch(void)
{
    const zdist_model_t *models[] = {&worker_model_softmax_regression, &worker_model_mlp, &worker_model_sequential};
    const char *params[] = {"{}", "{}",
                            "{\"input_shape\": [2, 2, 1], \"layers\": [{\"conv2d\": {\"filters\": 2, \"kernel\": 2, "
                            "\"padding\": \"same\"}}, {\"batch_norm\": {}}, \"flatten\", {\"dense\": {\"units\": 3}}], "
                            "\"loss\": \"sparse_categorical_crossentropy\"}"};
    for (int m = 0; m < 3; m++) {
        zdist_model_info_t info = {.input_dim = 4, .num_classes = 3, .label_dtype = ZDIST_DTYPE_INT32};
        s_harness_t h;
        s_setup(&h, models[m], params[m], &info, true);
        for (int v = 0; v < h.vars.n; v++)
            for (int64_t j = 0; j < h.vars.vars[v].n; j++)
                h.grads[v][j] = 1;
        h.f.batch = (zdist_step_batch_t){.size = 0, .dim = 4, .global_size = 8, .label_dtype = ZDIST_DTYPE_INT32};
        CU_ASSERT_DOUBLE_EQUAL(s_loss(&h), 0, 0);
        CU_ASSERT_DOUBLE_EQUAL(h.f.examples, 0, 0);
        for (int v = 0; v < h.vars.n; v++)
            for (int64_t j = 0; j < h.vars.vars[v].n && h.vars.vars[v].trainable; j++)
                CU_ASSERT_EQUAL(h.grads[v][j], 0);
        s_teardown(&h);
    }
}

static void
test_bad_params(void)
{
    zdist_model_info_t info = {.input_dim = 4, .num_classes = 3, .label_dtype = ZDIST_DTYPE_INT32};
    zdist_error_t err = {0};
    void *st = NULL;
    CU_ASSERT_EQUAL(worker_model_mlp.init("{\"hiden\": [3]}", &info, &st, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "'hiden'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "hidden"));
    CU_ASSERT_EQUAL(worker_model_mlp.init("{\"hidden\": [0]}", &info, &st, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "model.params.hidden[0]"));
    CU_ASSERT_EQUAL(worker_model_sparse_logreg.init("{}", &info, &st, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "sparse"));
    CU_ASSERT_EQUAL(worker_model_linear_regression.init("{}", &info, &st, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "float labels"));
    /* A label outside the classes is an error, not a wild write. */
    s_harness_t h;
    s_setup(&h, &worker_model_softmax_regression, "{}", &info, false);
    float x[2 * 4] = {0};
    int32_t y[2] = {1, 3};
    h.f.batch = (zdist_step_batch_t){.size = 2, .dim = 4, .global_size = 2, .features = x,
                                     .label_dtype = ZDIST_DTYPE_INT32, .labels = y};
    CU_ASSERT_EQUAL(h.model->train_step(h.state, &h.f.base), -ERANGE);
    s_teardown(&h);
}

static void
test_registry_builtins(void)
{
    worker_registry_t *reg = worker_registry_new(NULL, NULL);
    zdist_error_t err = {0};
    const char *names[] = {"linear_regression", "softmax_regression", "mlp", "sparse_logreg", "sequential",
                           "functional"};
    for (int i = 0; i < 6; i++) {
        const zdist_model_t *m = worker_registry_find(reg, names[i], &err);
        CU_ASSERT_PTR_NOT_NULL(m);
        if (m)
            CU_ASSERT_STRING_EQUAL(m->name, names[i]);
    }
    CU_ASSERT_PTR_NULL(worker_registry_find(reg, "resnet", &err));
    CU_ASSERT_EQUAL(err.code, -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "unknown model 'resnet'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "softmax_regression"));
    worker_registry_destroy(&reg);
    CU_ASSERT_PTR_NULL(reg);
}

void
zdist_test_models_register(void)
{
    ZDIST_SUITE("models",
                {"linear_regression gradients (finite differences)", test_linear_regression_gradients},
                {"softmax_regression gradients (finite differences)", test_softmax_regression_gradients},
                {"mlp gradients (finite differences)", test_mlp_gradients},
                {"sparse_logreg sparse gradients (finite differences)", test_sparse_logreg_gradients},
                {"sequential CNN gradients (finite differences)", test_sequential_cnn_gradients},
                {"sequential: split and assigned layers on a host of one logical device (finite differences)",
                 test_sequential_split_gradients},
                {"sequential batch norm moving statistics, evaluation", test_sequential_batch_norm_moving},
                {"sequential dropout: one replica's masks and losses over 2 replicas",
                 test_sequential_dropout_replicas},
                {"sequential binary and squared losses (finite differences)", test_sequential_losses_gradients},
                {"sequential wide and deep on sparse input (finite differences)", test_sequential_wide_deep_gradients},
                {"functional DLRM and DCN layers over named columns (finite differences)",
                 test_functional_gradients},
                {"functional DCN-v2 pieces: [k] ids, flatten, concat, stacked crosses, add, softmax (finite "
                 "differences)", test_functional_dcn_gradients},
                {"empty batch: zero gradients, still applied", test_empty_batch},
                {"bad params and labels", test_bad_params},
                {"registry built-ins", test_registry_builtins});
}
