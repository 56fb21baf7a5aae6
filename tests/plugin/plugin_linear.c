/* A zdist step plugin built outside worker/: "plugin_linear", y = x.w + b with MSE, plain C loops, only zdist/step.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/step.h"

/* The ABI version this object claims: the test builds a second copy with a
   wrong one to see it refused. */
#ifndef PLUGIN_ABI_VERSION
#define PLUGIN_ABI_VERSION ZDIST_STEP_ABI_VERSION
#endif

typedef struct {
    int64_t dim;
    int w, b;
} s_state_t;

static int
s_init(const char *params_json, const zdist_model_info_t *info, void **ret_state, zdist_error_t *err)
{
    (void)params_json;
    if (info->sparse || info->label_dtype != ZDIST_DTYPE_FLOAT32) {
        /* No libzdist here: fill the message by hand. */
        if (err) {
            err->code = -EINVAL;
            strcpy(err->text, "plugin_linear needs dense features and float labels");
        }
        return -EINVAL;
    }
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
    zdist_var_spec_t w = {.name = "plugin/w", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {s->dim}},
                          .init = {.kind = ZDIST_INIT_ZEROS}, .trainable = true};
    zdist_var_spec_t bias = {.name = "plugin/b", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {1}},
                             .init = {.kind = ZDIST_INIT_ZEROS}, .trainable = true};
    if ((s->w = zdist_builder_add_variable(b, &w, err)) < 0)
        return s->w;
    if ((s->b = zdist_builder_add_variable(b, &bias, err)) < 0)
        return s->b;
    return 0;
}

/* plugin_linear_colocated: the same model plus "plugin/w_avg" [dim], a
   non-trainable companion of w declared under colocate_vars_with(w): one
   unpartitioned shard on the ps task of w's first shard. */
static int
s_build_colocated(void *state, zdist_model_builder_t *b, zdist_error_t *err)
{
    s_state_t *s = state;
    int rc = s_build(state, b, err);
    if (rc < 0)
        return rc;
    if ((rc = zdist_builder_colocate_vars_with(b, s->w, err)) < 0)
        return rc;
    zdist_var_spec_t avg = {.name = "plugin/w_avg", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {s->dim}},
                            .init = {.kind = ZDIST_INIT_ZEROS}, .trainable = false,
                            .aggregation = ZDIST_AGG_ONLY_FIRST_REPLICA};
    if ((rc = zdist_builder_add_variable(b, &avg, err)) < 0)
        return rc;
    return zdist_builder_colocate_vars_with(b, ZDIST_NO_COLOCATION, err);
}

static int
s_step(s_state_t *s, zdist_replica_ctx_t *ctx, int train)
{
    const zdist_step_batch_t *batch;
    int rc = zdist_ctx_next_batch(ctx, &batch);
    if (rc <= 0)
        return rc;
    const float *w, *b;
    if ((rc = zdist_ctx_read(ctx, s->w, &w)) < 0 || (rc = zdist_ctx_read(ctx, s->b, &b)) < 0)
        return rc;
    float *g = zdist_ctx_scratch(ctx, 0, (size_t)(s->dim + 1) * sizeof(float));
    if (!g)
        return -ENOMEM;
    memset(g, 0, (size_t)(s->dim + 1) * sizeof(float));
    const float *y = batch->labels;
    double loss = 0, gs = batch->global_size > 0 ? (double)batch->global_size : 1;
    for (int64_t i = 0; i < batch->size; i++) {
        const float *x = batch->features + i * s->dim;
        double p = b[0];
        for (int64_t j = 0; j < s->dim; j++)
            p += (double)w[j] * x[j];
        double r = p - y[i];
        loss += r * r;
        float d = (float)(2 * r / gs);
        for (int64_t j = 0; j < s->dim; j++)
            g[j] += d * x[j];
        g[s->dim] += d;
    }
    if (train) {
        zdist_grad_t grads[2] = {{.var = s->w, .values = g}, {.var = s->b, .values = g + s->dim}};
        if ((rc = zdist_ctx_apply_gradients(ctx, grads, 2)) < 0)
            return rc;
    }
    if ((rc = zdist_ctx_output(ctx, ZDIST_OUTPUT_LOSS, loss / gs, ZDIST_REDUCE_SUM)) < 0)
        return rc;
    return zdist_ctx_output(ctx, ZDIST_OUTPUT_EXAMPLES, (double)batch->size, ZDIST_REDUCE_SUM);
}

static int
s_train(void *state, zdist_replica_ctx_t *ctx)
{
    return s_step(state, ctx, 1);
}

static int
s_eval(void *state, zdist_replica_ctx_t *ctx)
{
    return s_step(state, ctx, 0);
}

static const zdist_model_t s_linear = {
    .name = "plugin_linear",
    .description = "test plugin: linear regression in plain C",
    .init = s_init,
    .destroy = s_destroy,
    .build = s_build,
    .train_step = s_train,
    .eval_step = s_eval,
};

static const zdist_model_t s_linear_colocated = {
    .name = "plugin_linear_colocated",
    .description = "test plugin: plugin_linear with a companion of w under colocate_vars_with",
    .init = s_init,
    .destroy = s_destroy,
    .build = s_build_colocated,
    .train_step = s_train,
    .eval_step = s_eval,
};

static const zdist_model_t *const s_models[] = {&s_linear, &s_linear_colocated};

__attribute__((visibility("default"))) const zdist_step_plugin_t zdist_step_plugin = {
    .abi_version = PLUGIN_ABI_VERSION,
    .name = "zdist-test-plugin",
    .num_models = 2,
    .models = s_models,
};
