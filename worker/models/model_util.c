/* Helpers shared by the built-in models: strict params, the standard outputs. */
#include <errno.h>
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
