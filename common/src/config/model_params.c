/* model_params: the built-in models' params, checked as the worker takes them (at submit too). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "zdist/model_spec.h"

/* The built-in models' params: each field an integer in 1..max, except
   mlp's "hidden", a list of layer widths. */
typedef struct {
    const char *model;
    const char *fields[3];
    int64_t max[3]; /* 0: the hidden list */
} s_params_t;

static const s_params_t s_params[] = {
    {"linear_regression", {NULL}, {0}},
    {"softmax_regression", {"num_classes", NULL}, {1 << 20}},
    {"mlp", {"hidden", "num_classes", NULL}, {0, 1 << 20}},
    {"sparse_logreg", {"dim", NULL}, {INT64_C(1) << 32}},
};

static int
s_hidden(const char *model, const json_t *hidden, zdist_error_t *err)
{
    if (!json_is_array(hidden) || json_array_size(hidden) > ZDIST_MODEL_MAX_HIDDEN)
        return zdist_error_set(err, -EINVAL,
                               "model.params.hidden: %s needs a list of at most %d layer widths, "
                               "e.g. [256, 128]",
                               model, ZDIST_MODEL_MAX_HIDDEN);
    size_t i;
    const json_t *h;
    json_array_foreach(hidden, i, h)
    {
        if (!json_is_integer(h) || json_integer_value(h) < 1 || json_integer_value(h) > ZDIST_MODEL_MAX_WIDTH)
            return zdist_error_set(err, -EINVAL,
                                   "model.params.hidden[%zu]: a layer width is an integer in 1..%d", i,
                                   ZDIST_MODEL_MAX_WIDTH);
    }
    return 0;
}

static int
s_field(const s_params_t *m, const char *key, const json_t *val, zdist_error_t *err)
{
    for (int f = 0; m->fields[f]; f++) {
        if (strcmp(m->fields[f], key) != 0)
            continue;
        if (m->max[f] == 0)
            return s_hidden(m->model, val, err);
        if (!json_is_integer(val) || json_integer_value(val) < 1 || json_integer_value(val) > m->max[f])
            return zdist_error_set(err, -EINVAL, "model.params.%s: %s needs an integer in 1..%lld", key,
                                   m->model, (long long) m->max[f]);
        return 0;
    }
    char known[256] = "";
    for (int f = 0; m->fields[f]; f++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", f ? ", " : "", m->fields[f]);
    return zdist_error_set(err, -EINVAL, "model.params: unknown field '%s' for %s; known fields: %s", key,
                           m->model, known[0] ? known : "(none)");
}

int
zdist_model_params_check(const char *model, const char *params_json, zdist_error_t *err)
{
    const s_params_t *m = NULL;
    for (size_t i = 0; model && i < sizeof s_params / sizeof s_params[0] && !m; i++)
        if (strcmp(s_params[i].model, model) == 0)
            m = &s_params[i];
    if (!m)
        return 0; /* sequential (zdist_model_spec_parse), or a plugin's own */
    json_error_t jerr;
    json_t *p = json_loads(params_json ? params_json : "{}", JSON_REJECT_DUPLICATES, &jerr);
    if (!p)
        return zdist_error_set(err, -EINVAL, "%s: params are not JSON: %s", model, jerr.text);
    int rc = 0;
    if (!json_is_object(p))
        rc = zdist_error_set(err, -EINVAL, "%s: params must be a JSON object", model);
    const char *key;
    json_t *val;
    json_object_foreach(p, key, val)
    {
        if (rc == 0)
            rc = s_field(m, key, val, err);
    }
    json_decref(p);
    return rc;
}
