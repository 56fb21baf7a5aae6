/* Built-in model mlp (and the dense network softmax_regression shares): ReLU layers, softmax cross-entropy, CBLAS. */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layers.h"
#include "models.h"

int
model_dense_init(const char *model, bool hidden_allowed, const char *params_json, const zdist_model_info_t *info,
                 void **ret_state, zdist_error_t *err)
{
    static const char *const with_hidden[] = {"hidden", "num_classes", NULL};
    static const char *const without[] = {"num_classes", NULL};
    json_t *p;
    int rc = model_params_parse(model, params_json, hidden_allowed ? with_hidden : without, &p, err);
    if (rc < 0)
        return rc;
    model_dense_t *s = calloc(1, sizeof *s);
    if (!s) {
        json_decref(p);
        return -ENOMEM;
    }
    s->model = model;
    s->layer_names = hidden_allowed;
    int64_t classes = info->num_classes;
    if ((rc = model_params_int(model, p, "num_classes", 1 << 20, &classes, err)) < 0)
        goto fail;
    rc = -EINVAL;
    if (info->sparse) {
        zdist_error_set(err, -EINVAL, "%s needs dense features (idx, csv or synthetic data)", model);
        goto fail;
    }
    if (info->label_dtype != ZDIST_DTYPE_INT32 || classes < 2) {
        zdist_error_set(err, -EINVAL, "%s needs class labels (int32) and at least 2 classes, got %lld", model,
                        (long long)classes);
        goto fail;
    }
    if (classes < info->num_classes) {
        zdist_error_set(err, -EINVAL, "model.params.num_classes: %lld is less than the data's %d classes",
                        (long long)classes, info->num_classes);
        goto fail;
    }
    s->sizes[0] = info->input_dim;
    int nh = 0;
    json_t *hidden = json_object_get(p, "hidden");
    if (hidden) {
        size_t i;
        json_t *h;
        /* Checked by model_params_parse (zdist_model_params_check). */
        json_array_foreach(hidden, i, h)
            s->sizes[++nh] = json_integer_value(h);
    } else if (hidden_allowed) {
        s->sizes[++nh] = 256;
        s->sizes[++nh] = 128;
    }
    s->nlayers = nh + 1;
    s->sizes[s->nlayers] = classes;
    json_decref(p);
    *ret_state = s;
    return 0;
fail:
    json_decref(p);
    free(s);
    return rc;
}

void
model_dense_destroy(void *state)
{
    free(state);
}

int
model_dense_build(void *state, zdist_model_builder_t *b, zdist_error_t *err)
{
    model_dense_t *s = state;
    for (int l = 0; l < s->nlayers; l++) {
        char kname[64], bname[64];
        if (s->layer_names) {
            snprintf(kname, sizeof kname, "dense_%d/kernel", l);
            snprintf(bname, sizeof bname, "dense_%d/bias", l);
        } else {
            snprintf(kname, sizeof kname, "kernel");
            snprintf(bname, sizeof bname, "bias");
        }
        zdist_var_spec_t k = {.name = kname, .dtype = ZDIST_DTYPE_FLOAT32,
                              .shape = {2, {s->sizes[l], s->sizes[l + 1]}},
                              .init = {.kind = ZDIST_INIT_GLOROT_UNIFORM}, .trainable = true};
        zdist_var_spec_t bias = {.name = bname, .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {s->sizes[l + 1]}},
                                 .init = {.kind = ZDIST_INIT_ZEROS}, .trainable = true};
        if ((s->kernel[l] = zdist_builder_add_variable(b, &k, err)) < 0)
            return s->kernel[l];
        if ((s->bias[l] = zdist_builder_add_variable(b, &bias, err)) < 0)
            return s->bias[l];
    }
    return 0;
}

static int
s_step(model_dense_t *s, zdist_replica_ctx_t *ctx, bool train)
{
    const zdist_step_batch_t *batch;
    int rc = zdist_ctx_next_batch(ctx, &batch);
    if (rc <= 0)
        return rc;
    if (batch->label_dtype != ZDIST_DTYPE_INT32 || (batch->size > 0 && !batch->features))
        return -EINVAL;
    int L = s->nlayers;
    int64_t n = batch->size;
    const float *w[MODEL_DENSE_MAX_LAYERS], *bias[MODEL_DENSE_MAX_LAYERS];
    for (int l = 0; l < L; l++)
        if ((rc = zdist_ctx_read(ctx, s->kernel[l], &w[l])) < 0 || (rc = zdist_ctx_read(ctx, s->bias[l], &bias[l])) < 0)
            return rc;

    /* Scratch 0: activations A_l [n, sizes[l+1]] (the last one: logits, then
       their gradient) and two delta buffers [n, widest hidden]. Scratch 1:
       the gradients, kernel then bias per layer. */
    int64_t act = 0, maxh = 1, grads = 0;
    for (int l = 0; l < L; l++) {
        act += n * s->sizes[l + 1];
        grads += s->sizes[l] * s->sizes[l + 1] + s->sizes[l + 1];
        if (l < L - 1 && s->sizes[l + 1] > maxh)
            maxh = s->sizes[l + 1];
    }
    float *buf = zdist_ctx_scratch(ctx, 0, (size_t)(act + 2 * n * maxh + 1) * sizeof(float));
    float *gbuf = train ? zdist_ctx_scratch(ctx, 1, (size_t)grads * sizeof(float)) : NULL;
    if (!buf || (train && !gbuf))
        return -ENOMEM;
    float *A[MODEL_DENSE_MAX_LAYERS];
    float *p = buf;
    for (int l = 0; l < L; l++) {
        A[l] = p;
        p += n * s->sizes[l + 1];
    }
    float *delta[2] = {p, p + n * maxh};

    /* Forward */
    for (int l = 0; l < L && n > 0; l++) {
        const float *in = l == 0 ? batch->features : A[l - 1];
        int64_t fi = s->sizes[l], fo = s->sizes[l + 1];
        for (int64_t i = 0; i < n; i++)
            memcpy(A[l] + i * fo, bias[l], (size_t)fo * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)fo, (int)fi, 1.0f, in, (int)fi, w[l],
                    (int)fo, 1.0f, A[l], (int)fo);
        if (l < L - 1)
            for (int64_t j = 0; j < n * fo; j++)
                A[l][j] = A[l][j] > 0 ? A[l][j] : 0;
    }
    /* before the loss, which turns the logits into their gradient in place */
    if (!train && (rc = model_predictions_emit(ctx, A[L - 1], n, s->sizes[L], ZDIST_ACT_SOFTMAX)) < 0)
        return rc;
    double loss = 0;
    int64_t correct = 0;
    float scale = batch->global_size > 0 ? 1.0f / (float)batch->global_size : 0;
    if (n > 0 && layer_loss_sparse_xent(A[L - 1], batch->labels, n, (int)s->sizes[L], scale, &loss, &correct) < 0) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s: a label is outside [0, %lld)", s->model, (long long)s->sizes[L]);
        zdist_ctx_set_error(ctx, -ERANGE, msg);
        return -ERANGE;
    }

    if (train) {
        /* Backward: dZ of the last layer is in A[L-1]. */
        zdist_grad_t g[2 * MODEL_DENSE_MAX_LAYERS];
        float *gp = gbuf;
        float *dz = A[L - 1];
        int di = 0;
        for (int l = L - 1; l >= 0; l--) {
            int64_t fi = s->sizes[l], fo = s->sizes[l + 1];
            float *dw = gp, *db = gp + fi * fo;
            gp += fi * fo + fo;
            g[2 * l] = (zdist_grad_t){.var = s->kernel[l], .values = dw};
            g[2 * l + 1] = (zdist_grad_t){.var = s->bias[l], .values = db};
            if (n == 0) {
                memset(dw, 0, (size_t)(fi * fo + fo) * sizeof(float));
                continue;
            }
            const float *in = l == 0 ? batch->features : A[l - 1];
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)fi, (int)fo, (int)n, 1.0f, in, (int)fi, dz,
                        (int)fo, 0.0f, dw, (int)fo);
            layer_colsum(dz, n, fo, db);
            if (l > 0) {
                float *dprev = delta[di];
                di ^= 1;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)fi, (int)fo, 1.0f, dz, (int)fo,
                            w[l], (int)fo, 0.0f, dprev, (int)fi);
                const float *a = A[l - 1];
                for (int64_t j = 0; j < n * fi; j++)
                    if (a[j] <= 0)
                        dprev[j] = 0;
                dz = dprev;
            }
        }
        if ((rc = zdist_ctx_apply_gradients(ctx, g, 2 * L)) < 0)
            return rc;
    }
    return model_outputs(ctx, loss, batch->global_size, correct, n);
}

int
model_dense_train_step(void *state, zdist_replica_ctx_t *ctx)
{
    return s_step(state, ctx, true);
}

int
model_dense_eval_step(void *state, zdist_replica_ctx_t *ctx)
{
    return s_step(state, ctx, false);
}

static int
s_init(const char *params_json, const zdist_model_info_t *info, void **ret_state, zdist_error_t *err)
{
    return model_dense_init("mlp", true, params_json, info, ret_state, err);
}

const zdist_model_t worker_model_mlp = {
    .name = "mlp",
    .description = "ReLU multi-layer perceptron (params: hidden [256,128]), softmax cross-entropy",
    .init = s_init,
    .destroy = model_dense_destroy,
    .build = model_dense_build,
    .train_step = model_dense_train_step,
    .eval_step = model_dense_eval_step,
};
