/* Built-in model sparse_logreg: logistic regression on hashed sparse features; weight rows pulled by id, sparse gradients. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

/* The weights are a [dim, 1] table, one row per hashed feature: the classic
   parameter-server workload (a step touches only its batch's rows). */
typedef struct {
    int64_t dim;
    int weights, bias;
} s_state_t;

static int
s_init(const char *params_json, const zdist_model_info_t *info, void **ret_state, zdist_error_t *err)
{
    static const char *const allowed[] = {"dim", NULL};
    json_t *p;
    int rc = model_params_parse("sparse_logreg", params_json, allowed, &p, err);
    if (rc < 0)
        return rc;
    int64_t dim = info->input_dim;
    rc = model_params_int("sparse_logreg", p, "dim", INT64_C(1) << 32, &dim, err);
    json_decref(p);
    if (rc < 0)
        return rc;
    if (!info->sparse)
        return zdist_error_set(err, -EINVAL, "sparse_logreg needs sparse features (libsvm data)");
    if (info->label_dtype != ZDIST_DTYPE_INT32 || info->num_classes > 2)
        return zdist_error_set(err, -EINVAL, "sparse_logreg needs binary labels (0/1), got %d classes",
                               info->num_classes);
    s_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->dim = dim;
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
    zdist_var_spec_t w = {.name = "weights", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {s->dim, 1}},
                          .init = {.kind = ZDIST_INIT_ZEROS}, .trainable = true};
    zdist_var_spec_t bias = {.name = "bias", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {1}},
                             .init = {.kind = ZDIST_INIT_ZEROS}, .trainable = true};
    if ((s->weights = zdist_builder_add_variable(b, &w, err)) < 0)
        return s->weights;
    if ((s->bias = zdist_builder_add_variable(b, &bias, err)) < 0)
        return s->bias;
    return 0;
}

static int
s_step(s_state_t *s, zdist_replica_ctx_t *ctx, bool train)
{
    const zdist_step_batch_t *batch;
    int rc = zdist_ctx_next_batch(ctx, &batch);
    if (rc <= 0)
        return rc;
    if (batch->size > 0 && !batch->row_offsets) {
        zdist_ctx_set_error(ctx, -EINVAL, "sparse_logreg: the batch is not sparse");
        return -EINVAL;
    }
    int64_t n = batch->size;
    int64_t nnz = n > 0 ? batch->row_offsets[n] : 0;
    const int32_t *y = batch->labels;
    const float *b;
    if ((rc = zdist_ctx_read(ctx, s->bias, &b)) < 0)
        return rc;
    /* Scratch: hashed ids (int64), pulled rows, then the gradient rows. */
    int64_t *ids = zdist_ctx_scratch(ctx, 0, (size_t)(nnz + 1) * sizeof(int64_t));
    float *rows = zdist_ctx_scratch(ctx, 1, (size_t)(2 * nnz + 1) * sizeof(float));
    if (!ids || !rows)
        return -ENOMEM;
    float *grad = rows + nnz;
    /* eval: each example's probability, for the exact AUC over the test split */
    float *pred = train ? NULL : zdist_ctx_scratch(ctx, 2, (size_t)(n + 1) * sizeof(float));
    if (!train && !pred)
        return -ENOMEM;
    for (int64_t k = 0; k < nnz; k++)
        ids[k] = batch->feature_ids[k] % s->dim;
    if (nnz > 0 && (rc = zdist_ctx_read_rows(ctx, s->weights, ids, nnz, rows)) < 0)
        return rc;
    double loss = 0;
    int64_t correct = 0;
    float db = 0;
    float scale = batch->global_size > 0 ? 1.0f / (float)batch->global_size : 0;
    for (int64_t i = 0; i < n; i++) {
        double z = b[0];
        for (int64_t k = batch->row_offsets[i]; k < batch->row_offsets[i + 1]; k++)
            z += (double)rows[k] * batch->feature_values[k];
        int32_t label = y[i];
        if (label != 0 && label != 1) {
            zdist_ctx_set_error(ctx, -ERANGE, "sparse_logreg: a label is not 0 or 1");
            return -ERANGE;
        }
        /* Stable sigmoid cross-entropy: max(z,0) - z*y + log(1 + exp(-|z|)). */
        loss += (z > 0 ? z : 0) - z * label + log1p(exp(-fabs(z)));
        double prob = z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z));
        correct += (prob >= 0.5) == (label == 1);
        if (pred)
            pred[i] = (float)prob;
        float dz = (float)(prob - label) * scale;
        db += dz;
        for (int64_t k = batch->row_offsets[i]; k < batch->row_offsets[i + 1]; k++)
            grad[k] = dz * batch->feature_values[k];
    }
    if (train) {
        zdist_grad_t g[2] = {{.var = s->weights, .values = grad, .ids = ids, .nids = nnz},
                             {.var = s->bias, .values = &db}};
        if ((rc = zdist_ctx_apply_gradients(ctx, g, 2)) < 0)
            return rc;
    } else if ((rc = zdist_ctx_predictions(ctx, pred, n)) < 0 && rc != -ENOSYS) {
        return rc;
    }
    return model_outputs(ctx, loss, batch->global_size, correct, n);
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

const zdist_model_t worker_model_sparse_logreg = {
    .name = "sparse_logreg",
    .description = "logistic regression on hashed sparse features (params: dim), rows pulled by id",
    .init = s_init,
    .destroy = s_destroy,
    .build = s_build,
    .train_step = s_train_step,
    .eval_step = s_eval_step,
};
