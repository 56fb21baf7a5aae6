/* Helpers shared by the built-in models: strict params, the standard outputs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layers.h"

#include "models.h"
#include "zdist/model_spec.h"

int
model_params_parse(const char *model, const char *params_json, const char *const *allowed, json_t **ret,
                   zdist_error_t *err)
{
    /* The built-in models' fields and ranges are libzdist's, which the
       coordinator applies at submit too. */
    int rc = zdist_model_params_check(model, params_json, err);
    if (rc < 0)
        return rc;
    json_error_t jerr;
    json_t *p = json_loads(params_json ? params_json : "{}", JSON_REJECT_DUPLICATES, &jerr);
    if (!p)
        return zdist_error_set(err, -EINVAL, "%s: params are not JSON: %s", model, jerr.text);
    if (!json_is_object(p)) {
        json_decref(p);
        return zdist_error_set(err, -EINVAL, "%s: params must be a JSON object", model);
    }
    const char *key;
    json_t *val;
    json_object_foreach(p, key, val) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok = ok || strcmp(*a, key) == 0;
        if (!ok) {
            char known[256] = "";
            for (const char *const *a = allowed; *a; a++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", a == allowed ? "" : ", ", *a);
            zdist_error_set(err, -EINVAL, "model.params: unknown field '%s' for %s; known fields: %s", key, model,
                            known[0] ? known : "(none)");
            json_decref(p);
            return -EINVAL;
        }
    }
    *ret = p;
    return 0;
}

int
model_params_int(const char *model, json_t *params, const char *key, int64_t max, int64_t *ret, zdist_error_t *err)
{
    json_t *v = json_object_get(params, key);
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max)
        return zdist_error_set(err, -EINVAL, "model.params.%s: %s needs an integer in 1..%lld", key, model,
                               (long long)max);
    *ret = json_integer_value(v);
    return 0;
}

/* Sequential's and functional's embeddings: one declaration, so both kinds
   of model give a dynamic table the same name and the same spec. */
int
model_add_embedding(zdist_model_builder_t *b, const zdist_layer_spec_t *sp, zdist_initializer_t init, int *ret,
                    zdist_error_t *err)
{
    char name[ZDIST_LAYER_NAME_MAX + 32];
    snprintf(name, sizeof name, "%s/embeddings", sp->name);
    zdist_var_spec_t v = {.name = name, .dtype = ZDIST_DTYPE_FLOAT32,
                          .shape = {2, {sp->dynamic ? 0 : sp->input_dim, sp->output_dim}}, .init = init,
                          .trainable = true};
    zdist_dynamic_spec_t dyn = {.min_count = sp->min_count, .evict_after_steps = sp->evict_after_steps,
                                .evict_l2_below = sp->evict_l2_below, .default_value = sp->dyn_default};
    *ret = sp->dynamic ? zdist_builder_add_dynamic_variable(b, &v, &dyn, err) : zdist_builder_add_variable(b, &v, err);
    return *ret < 0 ? *ret : 0;
}

int
model_outputs(zdist_replica_ctx_t *ctx, double loss_sum, int64_t global_size, int64_t correct, int64_t n)
{
    double gsize = global_size > 0 ? (double)global_size : 1;
    int rc;
    if ((rc = zdist_ctx_output(ctx, ZDIST_OUTPUT_LOSS, loss_sum / gsize, ZDIST_REDUCE_SUM)) < 0 ||
        (correct >= 0 && (rc = zdist_ctx_output(ctx, ZDIST_OUTPUT_CORRECT, (double)correct, ZDIST_REDUCE_SUM)) < 0) ||
        (rc = zdist_ctx_output(ctx, ZDIST_OUTPUT_EXAMPLES, (double)n, ZDIST_REDUCE_SUM)) < 0)
        return rc;
    return 0;
}

int
model_predictions(zdist_replica_ctx_t *ctx, int slot, zdist_loss_t loss, const float *logits, int64_t n)
{
    if (loss != ZDIST_LOSS_BINARY_CROSSENTROPY)
        return 0;
    float *p = zdist_ctx_scratch(ctx, slot, (size_t)(n + 1) * sizeof *p);
    if (!p)
        return -ENOMEM;
    for (int64_t i = 0; i < n; i++) {
        double z = logits[i];
        p[i] = (float)(z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z)));
    }
    int rc = zdist_ctx_predictions(ctx, p, n);
    return rc == -ENOSYS ? 0 : rc;
}

int
model_loss(zdist_replica_ctx_t *ctx, const char *model, zdist_loss_t loss, float *out, int64_t units,
           const zdist_step_batch_t *batch, double *ret_loss, int64_t *ret_correct)
{
    int64_t n = batch->size;
    float scale = batch->global_size > 0 ? 1.0f / (float)batch->global_size : 0;
    int rc = 0;
    *ret_loss = 0;
    *ret_correct = 0;
    if (n == 0)
        return 0;
    switch (loss) {
    case ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY:
        rc = batch->label_dtype != ZDIST_DTYPE_INT32
                 ? -EINVAL
                 : layer_loss_sparse_xent(out, batch->labels, n, (int)units, scale, ret_loss, ret_correct);
        break;
    case ZDIST_LOSS_BINARY_CROSSENTROPY:
        rc = layer_loss_sigmoid_xent(out, batch->label_dtype, batch->labels, n, scale, ret_loss, ret_correct);
        break;
    case ZDIST_LOSS_MEAN_SQUARED_ERROR:
        rc = layer_loss_mse(out, batch->label_dtype, batch->labels, n, scale, ret_loss);
        break;
    }
    if (rc < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s: a label does not fit %s (%s)", model, zdist_loss_name(loss),
                 loss == ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ? "an int32 class below the output units"
                                                                     : "a number in [0, 1]");
        zdist_ctx_set_error(ctx, rc, msg);
    }
    return rc;
}

static model_predictions_fn s_predictions_fn;
static void *s_predictions_arg;

void
model_predictions_sink(model_predictions_fn fn, void *arg)
{
    s_predictions_fn = fn;
    s_predictions_arg = arg;
}

int
model_predictions_emit(zdist_replica_ctx_t *ctx, const float *out, int64_t n, int64_t width, zdist_activation_t act)
{
    if (!s_predictions_fn)
        return 0;
    float *rows = malloc((size_t)(n * width + 1) * sizeof *rows);
    if (!rows)
        return -ENOMEM;
    if (n > 0) {
        memcpy(rows, out, (size_t)(n * width) * sizeof *rows);
        layer_act_forward(act, rows, n, width);
    }
    s_predictions_fn(s_predictions_arg, zdist_ctx_replica_id(ctx), rows, n, width);
    free(rows);
    return 0;
}
