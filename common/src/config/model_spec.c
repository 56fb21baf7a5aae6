/* model_spec: the `sequential` model of a job — layers parsed strictly, shapes inferred, parameters counted, Keras's summary (a functional model's too). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_spec_private.h"
#include "zdist/model_spec.h"

#define S_MAX_DIM (INT64_C(1) << 24)      /* one dimension of a shape */
#define S_MAX_ELEMENTS (INT64_C(1) << 24) /* one example's activations in one layer */
#define S_MAX_PARAMS (INT64_C(1) << 36)
#define S_MAX_WINDOW 15                   /* kernels, pools and strides */

/* One row per layer type: the job's key, Keras's class and default name,
   and the fields it takes besides "name" and "comment". */
typedef struct {
    const char *key;
    zdist_layer_kind_t kind;
    zdist_activation_t activation; /* for relu, tanh, sigmoid, softmax */
    const char *keras_type, *keras_name;
    const char *fields[8];
} s_type_t;

static const s_type_t s_types[] = {
    {"dense", ZDIST_LAYER_DENSE, 0, "Dense", "dense", {"units", "activation", "use_bias", "split"}},
    {"conv2d", ZDIST_LAYER_CONV2D, 0, "Conv2D", "conv2d",
     {"filters", "kernel", "strides", "padding", "activation", "use_bias", "split"}},
    {"max_pool2d", ZDIST_LAYER_MAX_POOL2D, 0, "MaxPooling2D", "max_pooling2d", {"pool", "strides", "padding"}},
    {"avg_pool2d", ZDIST_LAYER_AVG_POOL2D, 0, "AveragePooling2D", "average_pooling2d", {"pool", "strides", "padding"}},
    {"flatten", ZDIST_LAYER_FLATTEN, 0, "Flatten", "flatten", {NULL}},
    {"dropout", ZDIST_LAYER_DROPOUT, 0, "Dropout", "dropout", {"rate"}},
    {"relu", ZDIST_LAYER_ACTIVATION, ZDIST_ACT_RELU, "Activation", "activation", {NULL}},
    {"tanh", ZDIST_LAYER_ACTIVATION, ZDIST_ACT_TANH, "Activation", "activation", {NULL}},
    {"sigmoid", ZDIST_LAYER_ACTIVATION, ZDIST_ACT_SIGMOID, "Activation", "activation", {NULL}},
    {"softmax", ZDIST_LAYER_ACTIVATION, ZDIST_ACT_SOFTMAX, "Activation", "activation", {NULL}},
    {"batch_norm", ZDIST_LAYER_BATCH_NORM, 0, "BatchNormalization", "batch_normalization",
     {"momentum", "epsilon", "center", "scale"}},
    {"embedding", ZDIST_LAYER_EMBEDDING, 0, "Embedding", "embedding",
     {"input_dim", "output_dim", "combiner", "first_id", "dynamic"}},
    {"concat", ZDIST_LAYER_CONCAT, 0, "Concatenate", "concatenate", {"dense_features"}},
    {"hashing", ZDIST_LAYER_HASHING, 0, "Hashing", "hashing", {"num_bins"}},
    {"dot_interaction", ZDIST_LAYER_DOT_INTERACTION, 0, "DotInteraction", "dot_interaction",
     {"self_interaction", "skip_gather", "concat_dense"}},
    {"cross", ZDIST_LAYER_CROSS, 0, "Cross", "cross", {"use_bias", "diag_scale"}},
    {"add", ZDIST_LAYER_ADD, 0, "Add", "add", {NULL}},
};
#define S_NTYPES ((int)(sizeof s_types / sizeof s_types[0]))

static const char *const s_act_names[] = {"linear", "relu", "tanh", "sigmoid", "softmax", NULL};
static const char *const s_padding_names[] = {"valid", "same", NULL};
static const char *const s_combiner_names[] = {"mean", "sum", "sqrtn", NULL};
static const char *const s_loss_names[] = {"sparse_categorical_crossentropy", "binary_crossentropy",
                                           "mean_squared_error", NULL};

const char *
zdist_activation_name(zdist_activation_t act)
{
    return act >= ZDIST_ACT_LINEAR && act <= ZDIST_ACT_SOFTMAX ? s_act_names[act] : "invalid";
}

const char *
zdist_loss_name(zdist_loss_t loss)
{
    return loss >= ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY && loss <= ZDIST_LOSS_MEAN_SQUARED_ERROR
               ? s_loss_names[loss]
               : "invalid";
}

static const s_type_t *
s_type_of(const zdist_layer_spec_t *l)
{
    for (int t = 0; t < S_NTYPES; t++)
        if (s_types[t].kind == l->kind && (l->kind != ZDIST_LAYER_ACTIVATION || s_types[t].activation == l->activation))
            return &s_types[t];
    return &s_types[0];
}

/* ---- field readers: where is "model.layers[2].conv2d" ---- */

/* The value as JSON text for "got ..." (at most 60 characters). */
static const char *
s_shown(json_t *v, char *buf, size_t size)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(buf, size, "%.60s%s", text ? text : "?", text && strlen(text) > 60 ? "..." : "");
    free(text);
    return buf;
}

static int
s_bad(const char *where, const char *key, json_t *v, const char *want, zdist_error_t *err)
{
    char got[80];
    return zdist_error_set(err, -EINVAL, "%s.%s: must be %s, got %s", where, key, want, s_shown(v, got, sizeof got));
}

static int
s_get_int(json_t *o, const char *where, const char *key, int64_t min, int64_t max, int64_t *ret, zdist_error_t *err)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        char want[64];
        snprintf(want, sizeof want, "an integer in %lld..%lld", (long long)min, (long long)max);
        return s_bad(where, key, v, want, err);
    }
    *ret = json_integer_value(v);
    return 0;
}

/* An integer (both dimensions) or [height, width], each in 1..S_MAX_WINDOW. */
static int
s_get_pair(json_t *o, const char *where, const char *key, int64_t ret[2], zdist_error_t *err)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    json_t *h = v, *w = v;
    if (json_is_array(v)) {
        h = json_array_size(v) == 2 ? json_array_get(v, 0) : NULL;
        w = json_array_size(v) == 2 ? json_array_get(v, 1) : NULL;
    }
    if (!h || !w || !json_is_integer(h) || !json_is_integer(w) || json_integer_value(h) < 1 ||
        json_integer_value(h) > S_MAX_WINDOW || json_integer_value(w) < 1 || json_integer_value(w) > S_MAX_WINDOW) {
        char want[64];
        snprintf(want, sizeof want, "an integer in 1..%d or [height, width]", S_MAX_WINDOW);
        return s_bad(where, key, v, want, err);
    }
    ret[0] = json_integer_value(h);
    ret[1] = json_integer_value(w);
    return 0;
}

/* A number in [min, max] (max_open: < max). */
static int
s_get_num(json_t *o, const char *where, const char *key, double min, double max, bool max_open, double *ret,
          zdist_error_t *err)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(x >= min && (max_open ? x < max : x <= max))) {
        char want[80];
        snprintf(want, sizeof want, "a number in [%g, %g%s", min, max, max_open ? ")" : "]");
        return s_bad(where, key, v, want, err);
    }
    *ret = x;
    return 0;
}

static int
s_get_bool(json_t *o, const char *where, const char *key, bool *ret, zdist_error_t *err)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return s_bad(where, key, v, "true or false", err);
    *ret = json_is_true(v);
    return 0;
}

/* One of names (NULL-terminated) into *ret (its index). */
static int
s_get_enum(json_t *o, const char *where, const char *key, const char *const *names, int *ret, zdist_error_t *err)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    for (int i = 0; names[i] && json_is_string(v); i++)
        if (strcmp(names[i], json_string_value(v)) == 0) {
            *ret = i;
            return 0;
        }
    char want[200] = "one of ";
    for (int i = 0; names[i]; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s\"%s\"", i ? ", " : "", names[i]);
    return s_bad(where, key, v, want, err);
}

/* dynamic.default: what a lookup of an id without a row reads (an id not
   yet admitted, or never trained, in training and evaluation alike): every
   element the same value, as DeepRec's default_value_no_permission and a
   scalar default_value of TF Recommenders-Addons. "zeros" (the default),
   "ones" or a number. */
static int
s_parse_default(json_t *d, const char *at, double *ret, zdist_error_t *err)
{
    json_t *v = json_object_get(d, "default");
    if (!v)
        return 0;
    if (json_is_string(v) && (!strcmp(json_string_value(v), "zeros") || !strcmp(json_string_value(v), "ones"))) {
        *ret = strcmp(json_string_value(v), "ones") == 0 ? 1.0 : 0.0;
        return 0;
    }
    if (json_is_number(v) && isfinite(json_number_value(v)) && fabs(json_number_value(v)) <= 3.4e38) {
        *ret = json_number_value(v);
        return 0;
    }
    return s_bad(at, "default", v, "\"zeros\", \"ones\" or a number (every element of what an id without a row "
                 "reads)", err);
}

/* An embedding without a vocabulary (issue 29): "dynamic": {"min_count": N,
   "evict_after_steps": S, "evict_l2_below": x, "default": "zeros" | "ones" |
   x}, no input_dim and no first_id (ids reach the table as they are). */
static int
s_parse_dynamic(json_t *o, const char *where, zdist_layer_spec_t *l, int *comb, zdist_error_t *err)
{
    static const char *const keys[] = {"min_count", "evict_after_steps", "evict_l2_below", "default", "comment", NULL};
    json_t *d = json_object_get(o, "dynamic"), *v;
    char at[ZDIST_ERROR_TEXT_MAX / 2];
    snprintf(at, sizeof at, "%s.dynamic", where);
    const char *key;
    int rc;
    int64_t min_count = 1, after = 0;
    if (!json_is_object(d))
        return s_bad(where, "dynamic", d, "an object {\"min_count\": N, \"evict_after_steps\": S, "
                     "\"evict_l2_below\": x, \"default\": \"zeros\" | \"ones\" | x}", err);
    if (json_object_get(o, "input_dim") || json_object_get(o, "first_id"))
        return zdist_error_set(err, -EINVAL, "%s.%s: a dynamic embedding has no vocabulary: its rows are keyed by the "
                               "ids as they are; drop %s", where, json_object_get(o, "input_dim") ? "input_dim"
                               : "first_id", json_object_get(o, "input_dim") ? "input_dim" : "first_id");
    json_object_foreach(d, key, v) {
        bool known = false;
        for (int i = 0; keys[i] && !known; i++)
            known = strcmp(keys[i], key) == 0;
        if (!known)
            return zdist_error_set(err, -EINVAL, "%s.%s: unknown field; dynamic takes min_count, evict_after_steps, "
                                   "evict_l2_below and default", at, key);
    }
    if (!json_object_get(o, "output_dim"))
        return zdist_error_set(err, -EINVAL, "%s.output_dim: missing; an embedding needs its width", where);
    if ((rc = s_get_int(o, where, "output_dim", 1, 4096, &l->output_dim, err)) < 0 ||
        (rc = s_get_enum(o, where, "combiner", s_combiner_names, comb, err)) < 0 ||
        (rc = s_get_int(d, at, "min_count", 0, UINT32_MAX, &min_count, err)) < 0 ||
        (rc = s_get_int(d, at, "evict_after_steps", 0, INT64_MAX, &after, err)) < 0 ||
        (rc = s_get_num(d, at, "evict_l2_below", 0, 1e30, false, &l->evict_l2_below, err)) < 0 ||
        (rc = s_parse_default(d, at, &l->dyn_default, err)) < 0)
        return rc;
    l->combiner = (zdist_combiner_t) *comb;
    l->dynamic = true;
    l->min_count = (uint32_t) min_count;
    l->evict_after_steps = (uint64_t) after;
    return 0;
}

/* Unknown fields: the message lists the ones this layer takes. */
static int
s_check_fields(json_t *o, const char *where, const s_type_t *t, zdist_error_t *err)
{
    const char *key;
    json_t *val;
    json_object_foreach(o, key, val) {
        bool ok = strcmp(key, "name") == 0 || strcmp(key, "comment") == 0 || strcmp(key, "logical_device") == 0;
        for (int i = 0; t->fields[i] && !ok; i++)
            ok = strcmp(t->fields[i], key) == 0;
        if (ok)
            continue;
        char known[200] = "";
        for (int i = 0; t->fields[i]; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s, ", t->fields[i]);
        return zdist_error_set(err, -EINVAL, "%s.%s: unknown field; %s takes %sname, logical_device (and comment)",
                               where, key, t->key, known);
    }
    return 0;
}

/* ---- shapes ---- */

/* Elements of a shape, INT64_MAX when the product does not fit. */
static int64_t
s_elements(const zdist_shape_t *s)
{
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++)
        if (__builtin_mul_overflow(n, s->dims[d], &n))
            return INT64_MAX;
    return n;
}

/* "(None, 26, 26, 32)" */
const char *
model_spec_keras_shape(const zdist_shape_t *s, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "(None");
    for (int d = 0; d < s->rank && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, ", %lld", (long long)s->dims[d]);
    if (len < size)
        snprintf(buf + len, size - len, ")");
    return buf;
}

/* "(26, 26, 32)": a shape in messages, without the batch. */
static const char *
s_shape_text(const zdist_shape_t *s, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "(");
    for (int d = 0; d < s->rank && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", d ? ", " : "", (long long)s->dims[d]);
    if (len < size)
        snprintf(buf + len, size - len, ")");
    return buf;
}

/* TF's output size and leading padding along one axis; -EINVAL when the
   window does not fit (valid padding). */
static int
s_window(int64_t in, int64_t k, int64_t s, zdist_padding_t padding, int64_t *ret_out, int64_t *ret_pad)
{
    if (padding == ZDIST_PADDING_SAME) {
        int64_t out = (in + s - 1) / s;
        int64_t total = (out - 1) * s + k - in;
        *ret_out = out;
        *ret_pad = total > 0 ? total / 2 : 0;
        return 0;
    }
    if (in < k)
        return -EINVAL;
    *ret_out = (in - k) / s + 1;
    *ret_pad = 0;
    return 0;
}

/* Output shape and parameter counts of layer l (index i) from l->in. */
static int
s_infer(zdist_model_spec_t *spec, int i, zdist_layer_spec_t *l, const char *where, zdist_error_t *err)
{
    char sb[96];
    const zdist_shape_t *in = &l->in;
    l->out = *in;
    switch (l->kind) {
    case ZDIST_LAYER_DENSE:
        if (in->rank != 1)
            return zdist_error_set(err, -EINVAL, "%s: its input has shape %s; add a flatten layer before it", where,
                                   s_shape_text(in, sb, sizeof sb));
        l->out = (zdist_shape_t){1, {l->units}};
        l->params = in->dims[0] * l->units + (l->use_bias ? l->units : 0);
        break;
    case ZDIST_LAYER_CONV2D:
    case ZDIST_LAYER_MAX_POOL2D:
    case ZDIST_LAYER_AVG_POOL2D: {
        if (in->rank != 3)
            return zdist_error_set(err, -EINVAL, "%s: needs an input of shape (height, width, channels), got %s%s",
                                   where, s_shape_text(in, sb, sizeof sb),
                                   i == 0 ? "; set model.input_shape to [height, width, channels]" : "");
        int64_t oh, ow;
        if (s_window(in->dims[0], l->kernel[0], l->strides[0], l->padding, &oh, &l->pad_top) < 0 ||
            s_window(in->dims[1], l->kernel[1], l->strides[1], l->padding, &ow, &l->pad_left) < 0)
            return zdist_error_set(err, -EINVAL, "%s: its input %s is smaller than the %s %lldx%lld with padding "
                                   "\"valid\"; use padding \"same\" or a smaller %s", where,
                                   s_shape_text(in, sb, sizeof sb), l->kind == ZDIST_LAYER_CONV2D ? "kernel" : "pool",
                                   (long long)l->kernel[0], (long long)l->kernel[1],
                                   l->kind == ZDIST_LAYER_CONV2D ? "kernel" : "pool");
        int64_t c = l->kind == ZDIST_LAYER_CONV2D ? l->filters : in->dims[2];
        l->out = (zdist_shape_t){3, {oh, ow, c}};
        if (l->kind == ZDIST_LAYER_CONV2D)
            l->params = l->kernel[0] * l->kernel[1] * in->dims[2] * l->filters + (l->use_bias ? l->filters : 0);
        break;
    }
    case ZDIST_LAYER_FLATTEN:
        l->out = (zdist_shape_t){1, {s_elements(in)}};
        break;
    case ZDIST_LAYER_DROPOUT:
    case ZDIST_LAYER_ACTIVATION:
        break;
    case ZDIST_LAYER_BATCH_NORM: {
        int64_t c = in->dims[in->rank - 1];
        l->params = c * (2 + (l->center ? 1 : 0) + (l->scale ? 1 : 0));
        l->non_trainable = 2 * c;
        break;
    }
    case ZDIST_LAYER_EMBEDDING:
        if (i != 0 || !spec->sparse_input)
            return zdist_error_set(err, -EINVAL, "%s: an embedding looks up the ids of sparse (libsvm) examples: it "
                                   "is the first layer of a model on libsvm data", where);
        l->out = (zdist_shape_t){1, {l->output_dim}};
        l->params = l->input_dim * l->output_dim; /* dynamic: 0, its rows come as ids are admitted */
        break;
    case ZDIST_LAYER_HASHING:
    case ZDIST_LAYER_DOT_INTERACTION:
    case ZDIST_LAYER_CROSS:
    case ZDIST_LAYER_ADD:
        return zdist_error_set(err, -EINVAL, "%s: %s reads named features or several layers: it is a layer of "
                               "functional models (model.name \"functional\"), not of a sequential stack", where,
                               s_type_of(l)->key);
    case ZDIST_LAYER_CONCAT:
        if (!spec->sparse_input || in->rank != 1)
            return zdist_error_set(err, -EINVAL, "%s: concat appends features of sparse (libsvm) examples to a flat "
                                   "output (after an embedding); its input here is %s%s", where,
                                   s_shape_text(in, sb, sizeof sb), spec->sparse_input ? "" : " on dense data");
        if (l->dense_features > spec->input_shape.dims[0])
            return zdist_error_set(err, -EINVAL, "%s.dense_features: %lld is more than the input's %lld features",
                                   where, (long long)l->dense_features, (long long)spec->input_shape.dims[0]);
        l->out = (zdist_shape_t){1, {in->dims[0] + l->dense_features}};
        break;
    }
    if (i == 0 && spec->sparse_input && l->kind != ZDIST_LAYER_EMBEDDING)
        return zdist_error_set(err, -EINVAL, "%s: sparse (libsvm) examples go through an embedding first; start "
                               "the layers with {\"embedding\": {\"input_dim\": ..., \"output_dim\": ...}}", where);
    for (int d = 0; d < l->out.rank; d++)
        if (l->out.dims[d] > S_MAX_DIM)
            return zdist_error_set(err, -EINVAL, "%s: its output %s is too large", where,
                                   s_shape_text(&l->out, sb, sizeof sb));
    if (s_elements(&l->out) > S_MAX_ELEMENTS)
        return zdist_error_set(err, -EINVAL, "%s: its output %s has more than %lld values per example", where,
                               s_shape_text(&l->out, sb, sizeof sb), (long long)S_MAX_ELEMENTS);
    return 0;
}

/* ---- layers ---- */

static bool
s_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 40)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-' || *s == '.'))
            return false;
    return true;
}

/* Keras's default name: the type's base, then base_1, base_2, ... */
static void
s_default_name(const zdist_model_spec_t *spec, int i, const s_type_t *t, zdist_layer_spec_t *l)
{
    int seen = 0;
    for (int j = 0; j < i; j++)
        if (strcmp(s_type_of(&spec->layers[j])->keras_name, t->keras_name) == 0)
            seen++;
    if (seen == 0)
        snprintf(l->name, sizeof l->name, "%s", t->keras_name);
    else
        snprintf(l->name, sizeof l->name, "%s_%d", t->keras_name, seen);
}

static int
s_layer_fields(json_t *o, const char *where, zdist_layer_spec_t *l, bool graph, zdist_error_t *err)
{
    int rc, act = (int)l->activation, pad = 0, comb = 0;
    switch (l->kind) {
    case ZDIST_LAYER_DENSE:
        if (!json_object_get(o, "units"))
            return zdist_error_set(err, -EINVAL, "%s.units: missing; add the layer's width, e.g. \"units\": 128", where);
        if ((rc = s_get_int(o, where, "units", 1, 1 << 20, &l->units, err)) < 0)
            return rc;
        break;
    case ZDIST_LAYER_CONV2D:
        if (!json_object_get(o, "filters") || !json_object_get(o, "kernel"))
            return zdist_error_set(err, -EINVAL, "%s.%s: missing; a conv2d needs filters and kernel, e.g. "
                                   "{\"filters\": 32, \"kernel\": 3}", where,
                                   json_object_get(o, "filters") ? "kernel" : "filters");
        if ((rc = s_get_int(o, where, "filters", 1, 4096, &l->filters, err)) < 0 ||
            (rc = s_get_pair(o, where, "kernel", l->kernel, err)) < 0)
            return rc;
        break;
    case ZDIST_LAYER_MAX_POOL2D:
    case ZDIST_LAYER_AVG_POOL2D:
        l->kernel[0] = l->kernel[1] = 2;
        if ((rc = s_get_pair(o, where, "pool", l->kernel, err)) < 0)
            return rc;
        l->strides[0] = l->kernel[0]; /* Keras: strides default to the pool */
        l->strides[1] = l->kernel[1];
        break;
    case ZDIST_LAYER_DROPOUT:
        if (!json_object_get(o, "rate"))
            return zdist_error_set(err, -EINVAL, "%s.rate: missing; add the fraction of inputs to drop, e.g. "
                                   "\"rate\": 0.5", where);
        if ((rc = s_get_num(o, where, "rate", 0, 1, true, &l->rate, err)) < 0)
            return rc;
        break;
    case ZDIST_LAYER_BATCH_NORM:
        if ((rc = s_get_num(o, where, "momentum", 0, 1, false, &l->momentum, err)) < 0 ||
            (rc = s_get_num(o, where, "epsilon", 1e-12, 1, false, &l->epsilon, err)) < 0 ||
            (rc = s_get_bool(o, where, "center", &l->center, err)) < 0 ||
            (rc = s_get_bool(o, where, "scale", &l->scale, err)) < 0)
            return rc;
        break;
    case ZDIST_LAYER_EMBEDDING:
        if (json_object_get(o, "dynamic"))
            return s_parse_dynamic(o, where, l, &comb, err);
        if (!json_object_get(o, "input_dim") || !json_object_get(o, "output_dim"))
            return zdist_error_set(err, -EINVAL, "%s.%s: missing; an embedding needs input_dim (rows) and "
                                   "output_dim (width)", where,
                                   json_object_get(o, "input_dim") ? "output_dim" : "input_dim");
        if ((rc = s_get_int(o, where, "input_dim", 1, INT64_C(1) << 32, &l->input_dim, err)) < 0 ||
            (rc = s_get_int(o, where, "output_dim", 1, 4096, &l->output_dim, err)) < 0 ||
            (rc = s_get_enum(o, where, "combiner", s_combiner_names, &comb, err)) < 0 ||
            (rc = s_get_int(o, where, "first_id", 0, INT64_C(1) << 32, &l->first_id, err)) < 0)
            return rc;
        l->combiner = (zdist_combiner_t)comb;
        break;
    case ZDIST_LAYER_CONCAT:
        if (graph) {
            if (json_object_get(o, "dense_features"))
                return zdist_error_set(err, -EINVAL, "%s.dense_features: a functional model's concat joins the "
                                       "layers and inputs it names in inputs; remove it", where);
            break;
        }
        if (!json_object_get(o, "dense_features"))
            return zdist_error_set(err, -EINVAL, "%s.dense_features: missing; add how many of the input's first "
                                   "features to append", where);
        if ((rc = s_get_int(o, where, "dense_features", 1, 1 << 20, &l->dense_features, err)) < 0)
            return rc;
        break;
    case ZDIST_LAYER_HASHING:
        if (!json_object_get(o, "num_bins"))
            return zdist_error_set(err, -EINVAL, "%s.num_bins: missing; add the number of ids to hash into, e.g. "
                                   "\"num_bins\": 100000", where);
        if ((rc = s_get_int(o, where, "num_bins", 1, INT64_C(1) << 32, &l->num_bins, err)) < 0)
            return rc;
        break;
    case ZDIST_LAYER_DOT_INTERACTION:
        if ((rc = s_get_bool(o, where, "self_interaction", &l->self_interaction, err)) < 0 ||
            (rc = s_get_bool(o, where, "skip_gather", &l->skip_gather, err)) < 0 ||
            (rc = s_get_bool(o, where, "concat_dense", &l->concat_dense, err)) < 0)
            return rc;
        break;
    case ZDIST_LAYER_CROSS:
        if ((rc = s_get_bool(o, where, "use_bias", &l->use_bias, err)) < 0 ||
            (rc = s_get_num(o, where, "diag_scale", 0, 1e6, false, &l->diag_scale, err)) < 0)
            return rc;
        break;
    case ZDIST_LAYER_FLATTEN:
    case ZDIST_LAYER_ACTIVATION:
    case ZDIST_LAYER_ADD:
        break;
    }
    if (l->kind == ZDIST_LAYER_CONV2D || l->kind == ZDIST_LAYER_MAX_POOL2D || l->kind == ZDIST_LAYER_AVG_POOL2D) {
        if ((rc = s_get_pair(o, where, "strides", l->strides, err)) < 0 ||
            (rc = s_get_enum(o, where, "padding", s_padding_names, &pad, err)) < 0)
            return rc;
        l->padding = (zdist_padding_t)pad;
    }
    if (l->kind == ZDIST_LAYER_DENSE || l->kind == ZDIST_LAYER_CONV2D) {
        if ((rc = s_get_enum(o, where, "activation", s_act_names, &act, err)) < 0 ||
            (rc = s_get_bool(o, where, "use_bias", &l->use_bias, err)) < 0)
            return rc;
        l->activation = (zdist_activation_t)act;
    }
    return 0;
}

/* TPUStrategy's placement of a layer: "logical_device": d, or "split":
   [parts] (dense: its units) / [height parts, width parts] (conv2d: its
   input). Checked against the strategy by zdist_model_spec_check_devices. */
static int
s_placement(json_t *o, const char *where, zdist_layer_spec_t *l, zdist_error_t *err)
{
    l->logical_device = -1;
    int64_t d = -1;
    int rc = s_get_int(o, where, "logical_device", 0, ZDIST_MAX_LOGICAL_DEVICES - 1, &d, err);
    if (rc < 0)
        return rc;
    l->logical_device = (int)d;
    json_t *v = json_object_get(o, "split");
    if (!v)
        return 0;
    size_t want = l->kind == ZDIST_LAYER_CONV2D ? 2 : 1;
    bool ok = json_is_array(v) && json_array_size(v) == want;
    for (size_t i = 0; ok && i < want; i++) {
        json_t *e = json_array_get(v, i);
        ok = json_is_integer(e) && json_integer_value(e) >= 1 && json_integer_value(e) <= ZDIST_MAX_LOGICAL_DEVICES;
        if (ok)
            l->split[i] = (int)json_integer_value(e);
    }
    if (!ok)
        return s_bad(where, "split", v,
                     want == 2 ? "[height parts, width parts], each in 1..64 (the input's partition)"
                               : "[parts] in 1..64 (the units' partition)",
                     err);
    if (want == 1)
        l->split[1] = 1;
    l->num_split = (int)want;
    if (d >= 0)
        return zdist_error_set(err, -EINVAL, "%s: logical_device and split both given; a layer is either assigned "
                               "to one logical device or split over all of them", where);
    return 0;
}

const char *
model_spec_type_key(const zdist_layer_spec_t *l)
{
    return s_type_of(l)->key;
}

const char *
model_spec_keras_type(const zdist_layer_spec_t *l)
{
    return s_type_of(l)->keras_type;
}

bool
model_spec_type_known(const char *key)
{
    for (int k = 0; k < S_NTYPES; k++)
        if (strcmp(s_types[k].key, key) == 0)
            return true;
    return false;
}

int
model_spec_layer_fields(const char *key, json_t *fields, const char *where, bool graph, zdist_layer_spec_t *l,
                        zdist_error_t *err)
{
    const s_type_t *t = NULL;
    for (int k = 0; k < S_NTYPES && !t; k++)
        if (strcmp(s_types[k].key, key) == 0)
            t = &s_types[k];
    if (!t)
        return -ENOENT;
    char got[80];
    if (!json_is_object(fields))
        return zdist_error_set(err, -EINVAL, "%s: must be an object of fields { ... }, got %s", where,
                               s_shown(fields, got, sizeof got));
    *l = (zdist_layer_spec_t){.kind = t->kind, .activation = t->activation, .use_bias = true, .strides = {1, 1},
                              .momentum = 0.99, .epsilon = 1e-3, .center = true, .scale = true};
    int rc;
    if ((rc = s_check_fields(fields, where, t, err)) < 0 || (rc = s_layer_fields(fields, where, l, graph, err)) < 0 ||
        (rc = s_placement(fields, where, l, err)) < 0)
        return rc;
    return 0;
}

/* Layer i: "flatten" or {"conv2d": {...}}. */
static int
s_layer(zdist_model_spec_t *spec, int i, json_t *v, zdist_error_t *err)
{
    zdist_layer_spec_t *l = &spec->layers[i];
    char where[96], got[80];
    const char *key = NULL;
    json_t *fields = NULL, *empty = NULL;
    if (json_is_string(v)) {
        key = json_string_value(v);
    } else if (json_is_object(v) && json_object_size(v) == 1) {
        void *it = json_object_iter(v);
        key = json_object_iter_key(it);
        fields = json_object_iter_value(it);
    }
    const s_type_t *t = NULL;
    for (int k = 0; key && k < S_NTYPES && !t; k++)
        if (strcmp(s_types[k].key, key) == 0)
            t = &s_types[k];
    if (!t) {
        char types[300] = "";
        for (int k = 0; k < S_NTYPES && s_types[k].kind <= ZDIST_LAYER_CONCAT; k++) /* sequential's */
            snprintf(types + strlen(types), sizeof types - strlen(types), "%s%s", k ? ", " : "", s_types[k].key);
        return zdist_error_set(err, -EINVAL, "model.layers[%d]: must be {\"TYPE\": {fields}} (or \"TYPE\" for a "
                               "layer without fields) with TYPE one of %s; got %s", i, types,
                               s_shown(v, got, sizeof got));
    }
    snprintf(where, sizeof where, "model.layers[%d].%s", i, t->key);
    if (!fields)
        fields = empty = json_object();
    int rc = -ENOMEM;
    if (!fields)
        return rc;
    if ((rc = model_spec_layer_fields(t->key, fields, where, false, l, err)) < 0)
        goto out;
    json_t *name = json_object_get(fields, "name");
    if (name) {
        if (!json_is_string(name) || !s_name_ok(json_string_value(name))) {
            rc = s_bad(where, "name", name, "1..40 characters of [A-Za-z0-9_.-]", err);
            goto out;
        }
        snprintf(l->name, sizeof l->name, "%s", json_string_value(name));
    } else {
        s_default_name(spec, i, t, l);
    }
    for (int j = 0; j < i; j++)
        if (strcmp(spec->layers[j].name, l->name) == 0) {
            rc = zdist_error_set(err, -EINVAL, "%s.name: '%s' is also the name of model.layers[%d]; layer names "
                                 "are unique", where, l->name, j);
            goto out;
        }
    l->in = i == 0 ? spec->input_shape : spec->layers[i - 1].out;
    rc = s_infer(spec, i, l, where, err);
out:
    json_decref(empty);
    return rc;
}

static int
s_input_shape(json_t *root, zdist_model_spec_t *spec, zdist_error_t *err)
{
    json_t *v = json_object_get(root, "input_shape");
    char got[80];
    if (!v)
        return zdist_error_set(err, -EINVAL, "model.input_shape: missing; add the shape of one example, e.g. "
                               "[28, 28, 1] for images or [784]");
    bool ok = json_is_array(v) && json_array_size(v) >= 1 && json_array_size(v) <= 3 &&
              (!spec->sparse_input || json_array_size(v) == 1);
    for (size_t d = 0; ok && d < json_array_size(v); d++) {
        json_t *x = json_array_get(v, d);
        ok = json_is_integer(x) && json_integer_value(x) >= 1 &&
             json_integer_value(x) <= (spec->sparse_input ? INT64_C(1) << 32 : S_MAX_DIM);
        if (ok)
            spec->input_shape.dims[d] = json_integer_value(x);
    }
    if (!ok)
        return zdist_error_set(err, -EINVAL, "model.input_shape: must be %s, got %s",
                               spec->sparse_input ? "[features] for sparse (libsvm) data"
                                                  : "a list of 1 to 3 dimensions in 1..16777216, e.g. [28, 28, 1]",
                               s_shown(v, got, sizeof got));
    spec->input_shape.rank = (int)json_array_size(v);
    if (!spec->sparse_input && s_elements(&spec->input_shape) > S_MAX_ELEMENTS)
        return zdist_error_set(err, -EINVAL, "model.input_shape: %s has more than %lld features per example",
                               s_shown(v, got, sizeof got), (long long)S_MAX_ELEMENTS);
    return 0;
}

/* The last layer fits the loss: a flat output, one unit for the binary and
   squared losses, and an activation the loss can be fused with. */
int
model_spec_check_loss(const zdist_model_spec_t *spec, zdist_error_t *err)
{
    const zdist_layer_spec_t *last = &spec->layers[spec->num_layers - 1];
    char sb[96];
    char at[ZDIST_LAYER_NAME_MAX + 32];
    if (spec->graph)
        snprintf(at, sizeof at, "model.output ('%s')", last->name);
    else
        snprintf(at, sizeof at, "model.layers[%d]", spec->num_layers - 1);
    if (last->out.rank != 1)
        return zdist_error_set(err, -EINVAL, "%s: the model's output has shape %s; end with flatten "
                               "and dense layers", at, s_shape_text(&last->out, sb, sizeof sb));
    int64_t units = last->out.dims[0];
    bool fused = last->kind == ZDIST_LAYER_DENSE || last->kind == ZDIST_LAYER_CONV2D ||
                 last->kind == ZDIST_LAYER_ACTIVATION;
    zdist_activation_t act = fused ? last->activation : ZDIST_ACT_LINEAR;
    switch (spec->loss) {
    case ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY:
        if (units < 2)
            return zdist_error_set(err, -EINVAL, "%s: sparse_categorical_crossentropy needs one output "
                                   "per class (at least 2), the model gives %lld", at, (long long)units);
        if (act != ZDIST_ACT_LINEAR && act != ZDIST_ACT_SOFTMAX)
            return zdist_error_set(err, -EINVAL, "%s: sparse_categorical_crossentropy takes logits (no "
                                   "activation) or softmax, not %s", at, zdist_activation_name(act));
        break;
    case ZDIST_LOSS_BINARY_CROSSENTROPY:
        if (units != 1)
            return zdist_error_set(err, -EINVAL, "%s: binary_crossentropy needs 1 output unit, the "
                                   "model gives %lld", at, (long long)units);
        if (act != ZDIST_ACT_LINEAR && act != ZDIST_ACT_SIGMOID)
            return zdist_error_set(err, -EINVAL, "%s: binary_crossentropy takes a logit (no "
                                   "activation) or sigmoid, not %s", at, zdist_activation_name(act));
        break;
    case ZDIST_LOSS_MEAN_SQUARED_ERROR:
        if (units != 1)
            return zdist_error_set(err, -EINVAL, "%s: mean_squared_error needs 1 output unit (one "
                                   "label per example), the model gives %lld", at, (long long)units);
        break;
    }
    return 0;
}

int
model_spec_loss(json_t *root, zdist_loss_t *ret, zdist_error_t *err)
{
    if (!json_object_get(root, "loss"))
        return zdist_error_set(err, -EINVAL, "model.loss: missing; add sparse_categorical_crossentropy, "
                               "binary_crossentropy or mean_squared_error");
    int kind = 0, rc = s_get_enum(root, "model", "loss", s_loss_names, &kind, err);
    *ret = (zdist_loss_t)kind;
    return rc;
}

int
zdist_model_spec_parse(const char *json_text, bool sparse_input, zdist_model_spec_t *spec, zdist_error_t *err)
{
    memset(spec, 0, sizeof *spec);
    spec->sparse_input = sparse_input;
    json_error_t jerr;
    json_t *root = json_loads(json_text ? json_text : "", JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return zdist_error_set(err, -EINVAL, "model: not JSON: %s", jerr.text);
    int rc = -EINVAL;
    const char *key;
    json_t *val, *layers;
    if (!json_is_object(root)) {
        zdist_error_set(err, -EINVAL, "model: must be an object with input_shape, layers and loss");
        goto out;
    }
    json_object_foreach(root, key, val) {
        if (strcmp(key, "input_shape") && strcmp(key, "layers") && strcmp(key, "loss") && strcmp(key, "comment")) {
            zdist_error_set(err, -EINVAL, "model.%s: unknown field; a sequential model takes name, input_shape, "
                            "layers, loss (and comment)", key);
            goto out;
        }
    }
    if ((rc = s_input_shape(root, spec, err)) < 0)
        goto out;
    rc = -EINVAL;
    layers = json_object_get(root, "layers");
    if (!layers || !json_is_array(layers) || json_array_size(layers) < 1 ||
        json_array_size(layers) > ZDIST_MODEL_MAX_LAYERS) {
        char got[80];
        zdist_error_set(err, -EINVAL, "model.layers: must be a list of 1..%d layers, e.g. [{\"dense\": {\"units\": "
                        "10}}], got %s", ZDIST_MODEL_MAX_LAYERS, layers ? s_shown(layers, got, sizeof got) : "nothing");
        goto out;
    }
    if ((rc = model_spec_loss(root, &spec->loss, err)) < 0)
        goto out;
    spec->layers = calloc(json_array_size(layers), sizeof *spec->layers);
    if (!spec->layers) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < json_array_size(layers); i++) {
        if ((rc = s_layer(spec, (int)i, json_array_get(layers, i), err)) < 0)
            goto out;
        spec->num_layers++;
        spec->total_params += spec->layers[i].params;
        spec->non_trainable_params += spec->layers[i].non_trainable;
        if (spec->total_params > S_MAX_PARAMS) {
            rc = zdist_error_set(err, -EINVAL, "model.layers[%zu]: the model has more than %lld parameters", i,
                                 (long long)S_MAX_PARAMS);
            goto out;
        }
    }
    rc = model_spec_check_loss(spec, err);
out:
    json_decref(root);
    if (rc < 0)
        zdist_model_spec_release(spec);
    return rc;
}

void
zdist_model_spec_release(zdist_model_spec_t *spec)
{
    if (!spec)
        return;
    free(spec->layers);
    for (int k = 0; spec->inputs && k < spec->num_inputs; k++) {
        free(spec->inputs[k].features);
        free(spec->inputs[k].widths);
    }
    free(spec->inputs);
    memset(spec, 0, sizeof *spec);
}

int64_t
zdist_model_spec_input_size(const zdist_model_spec_t *spec)
{
    return s_elements(&spec->input_shape);
}

int
zdist_model_spec_check_devices(const zdist_model_spec_t *spec, int logical_devices, bool spmd, zdist_error_t *err)
{
    for (int i = 0; i < spec->num_layers; i++) {
        const zdist_layer_spec_t *l = &spec->layers[i];
        const char *key = s_type_of(l)->key;
        if (logical_devices < 1 && (l->logical_device >= 0 || l->num_split > 0))
            return zdist_error_set(err, -EINVAL, "model.layers[%d].%s.%s: only strategy tpu has logical devices; "
                                   "remove it or use {\"type\": \"tpu\", \"logical_devices_per_replica\": ...}", i,
                                   key, l->logical_device >= 0 ? "logical_device" : "split");
        if (l->logical_device >= 0 && spmd)
            return zdist_error_set(err, -EINVAL, "model.layers[%d].%s.logical_device: Cannot assign a tensor to a "
                                   "logical device in SPMD mode. To disable SPMD, Please construct the TPUStrategy "
                                   "with `experimental_spmd_xla_partitioning=False` (here: strategy.spmd false)",
                                   i, key);
        if (l->logical_device >= logical_devices)
            return zdist_error_set(err, -EINVAL, "model.layers[%d].%s.logical_device: `logical_core_id` to assign "
                                   "must be lower then total number of logical devices per replica. Received "
                                   "logical device id %d but there are only total of %d logical devices in replica.",
                                   i, key, l->logical_device, logical_devices);
        if (l->num_split == 0)
            continue;
        /* TF's partition_dimensions over the split tensor: conv2d's input
           [batch, height, width, channels], dense's kernel [in, units]. */
        int64_t dims[2] = {l->kind == ZDIST_LAYER_CONV2D ? l->in.dims[0] : l->units,
                           l->kind == ZDIST_LAYER_CONV2D ? l->in.dims[1] : 1};
        char shown[48];
        if (l->num_split == 2)
            snprintf(shown, sizeof shown, "[1, %d, %d, 1]", l->split[0], l->split[1]);
        else
            snprintf(shown, sizeof shown, "[1, %d]", l->split[0]);
        for (int k = 0; k < l->num_split; k++)
            if (dims[k] % l->split[k] != 0)
                return zdist_error_set(err, -EINVAL, "model.layers[%d].%s.split: Tensor shape at "
                                       "`partition_dimensions[%d]` must be divisible by corresponding value "
                                       "specified by `partition_dimensions` (%d). Received: %lld.", i, key,
                                       1 + k, l->split[k], (long long)dims[k]);
        int parts = l->split[0] * l->split[1];
        if (parts != logical_devices)
            return zdist_error_set(err, -EINVAL, "model.layers[%d].%s.split: The product of `partition_dimensions` "
                                   "should be the same as the number of logical devices (=%d). Received "
                                   "`partition_dimensions`=%s,and their product is %d.", i, key, logical_devices,
                                   shown, parts);
    }
    return 0;
}

int
zdist_model_spec_check_data(const zdist_model_spec_t *spec, int64_t input_dim, int num_classes,
                            zdist_dtype_t label_dtype, zdist_error_t *err)
{
    char sb[96];
    if (zdist_model_spec_input_size(spec) != input_dim)
        return zdist_error_set(err, -EINVAL, "model.input_shape: %s is %lld features per example, the data has "
                               "%lld", s_shape_text(&spec->input_shape, sb, sizeof sb),
                               (long long)zdist_model_spec_input_size(spec), (long long)input_dim);
    const zdist_layer_spec_t *last = &spec->layers[spec->num_layers - 1];
    switch (spec->loss) {
    case ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY:
        if (label_dtype != ZDIST_DTYPE_INT32)
            return zdist_error_set(err, -EINVAL, "model.loss: sparse_categorical_crossentropy needs class labels "
                                   "(int32)");
        if (last->out.dims[0] < num_classes)
            return zdist_error_set(err, -EINVAL, "model.layers[%d]: %lld outputs for data with %d classes; give the "
                                   "last layer at least %d units", spec->num_layers - 1,
                                   (long long)last->out.dims[0], num_classes, num_classes);
        break;
    case ZDIST_LOSS_BINARY_CROSSENTROPY:
        if (label_dtype == ZDIST_DTYPE_INT32 && num_classes > 2)
            return zdist_error_set(err, -EINVAL, "model.loss: binary_crossentropy needs labels 0 and 1, the data has "
                                   "%d classes", num_classes);
        break;
    case ZDIST_LOSS_MEAN_SQUARED_ERROR:
        break;
    }
    return 0;
}

const char *
model_spec_shape_text(const zdist_shape_t *s, char *buf, size_t size)
{
    return s_shape_text(s, buf, size);
}

bool
model_spec_name_ok(const char *s)
{
    return s_name_ok(s);
}

const char *
model_spec_shown(json_t *v, char *buf, size_t size)
{
    return s_shown(v, buf, size);
}

int64_t
model_spec_elements(const zdist_shape_t *s)
{
    return s_elements(s);
}
