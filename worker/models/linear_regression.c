/* Built-in model linear_regression: y = x.w + b, mean squared error (Keras Dense(1) + MSE). */
#include <cblas.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

typedef struct {
    int64_t dim;
    int kernel, bias;
} s_state_t;

static int
s_init(const char *params_json, const zdist_model_info_t *info, void **ret_state, zdist_error_t *err)
{
    static const char *const allowed[] = {NULL};
    json_t *p;
    int rc = model_params_parse("linear_regression", params_json, allowed, &p, err);
    if (rc < 0)
        return rc;
    json_decref(p);
    if (info->sparse)
        return zdist_error_set(err, -EINVAL, "linear_regression needs dense features (idx, csv or synthetic data)");
    if (info->label_dtype != ZDIST_DTYPE_FLOAT32)
        return zdist_error_set(err, -EINVAL,
                               "linear_regression needs float labels: use synthetic regression data (classes 0) "
                               "or csv with label_dtype float32");
    s_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->dim = info->input_dim;
    *ret_state = s;
    return 0;
}

static void
s_destroy(void *state)
{
    free(state);
}

static int
s_build(void *state, zdist_model_builder_t *b, zdist_error_t *err)
{
    s_state_t *s = state;
    zdist_var_spec_t k = {.name = "kernel", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {s->dim, 1}},
                          .init = {.kind = ZDIST_INIT_GLOROT_UNIFORM}, .trainable = true};
    zdist_var_spec_t bias = {.name = "bias", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {1}},
                             .init = {.kind = ZDIST_INIT_ZEROS}, .trainable = true};
    if ((s->kernel = zdist_builder_add_variable(b, &k, err)) < 0)
        return s->kernel;
    if ((s->bias = zdist_builder_add_variable(b, &bias, err)) < 0)
        return s->bias;
    return 0;
}

/* Forward (and backward when train): loss sum over the batch. */
static int
s_step(s_state_t *s, zdist_replica_ctx_t *ctx, bool train)
{
    const zdist_step_batch_t *batch;
    int rc = zdist_ctx_next_batch(ctx, &batch);
    if (rc <= 0)
        return rc;
    const float *w, *b;
    if ((rc = zdist_ctx_read(ctx, s->kernel, &w)) < 0 || (rc = zdist_ctx_read(ctx, s->bias, &b)) < 0)
        return rc;
    int64_t n = batch->size, d = s->dim;
    float *pred = zdist_ctx_scratch(ctx, 0, (size_t)(n + d + 1) * sizeof(float));
    if (!pred)
        return -ENOMEM;
    float *dw = pred + n, *db = dw + d;
    const float *y = batch->labels;
    double loss = 0;
    float scale = batch->global_size > 0 ? 2.0f / (float)batch->global_size : 0;
    *db = 0;
    if (n > 0) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)d, 1.0f, batch->features, (int)d, w, 1, 0.0f, pred, 1);
        for (int64_t i = 0; i < n; i++) {
            float r = pred[i] + b[0] - y[i];
            loss += (double)r * r;
            pred[i] = r * scale;
            *db += pred[i];
        }
        if (train)
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)n, (int)d, 1.0f, batch->features, (int)d, pred, 1, 0.0f, dw, 1);
    } else {
        memset(dw, 0, (size_t)d * sizeof *dw);
    }
    if (train) {
        zdist_grad_t g[2] = {{.var = s->kernel, .values = dw}, {.var = s->bias, .values = db}};
        if ((rc = zdist_ctx_apply_gradients(ctx, g, 2)) < 0)
            return rc;
    }
    return model_outputs(ctx, loss, batch->global_size, -1, n);
}

static int
s_train_step(void *state, zdist_replica_ctx_t *ctx)
{
    return s_step(state, ctx, true);
}

static int
s_eval_step(void *state, zdist_replica_ctx_t *ctx)
{
    return s_step(state, ctx, false);
}

const zdist_model_t worker_model_linear_regression = {
    .name = "linear_regression",
    .description = "y = x.w + b with mean squared error (float labels)",
    .init = s_init,
    .destroy = s_destroy,
    .build = s_build,
    .train_step = s_train_step,
    .eval_step = s_eval_step,
};
