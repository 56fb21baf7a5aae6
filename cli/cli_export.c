/* zdist export: a trained checkpoint written as an ONNX model (zdist/onnx.h), one table entry per layer kind. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "cli_export.h"
#include "zdist/ckpt.h"
#include "zdist/file.h"
#include "zdist/job.h"
#include "zdist/model_spec.h"
#include "zdist/onnx.h"

#define S_OPSET 13
#define S_MAX_JOB_BYTES (16u << 20)


/* A fresh tensor name "PREFIX_SEQ" into buf (CLI_EXPORT_NAME bytes). */
static const char *
s_name(cli_export_t *x, const char *prefix, char *buf)
{
    snprintf(buf, CLI_EXPORT_NAME, "%s_%d", prefix, x->seq++);
    return buf;
}

/* One node from the current tensor plus extra inputs to a new tensor, which becomes current. */
static int
s_node(cli_export_t *x, const char *op, const char *const *extra, int nextra, const zdist_onnx_attr_t *attrs,
       int nattrs)
{
    const char *in[8] = {x->cur};
    for (int i = 0; i < nextra && i < 7; i++)
        in[i + 1] = extra[i];
    char out[CLI_EXPORT_NAME];
    s_name(x, op, out);
    int rc = zdist_onnx_node(x->g, op, in, 1 + nextra, (const char *const[]){out}, 1, attrs, nattrs);
    snprintf(x->cur, sizeof x->cur, "%s", out);
    return rc;
}

static int
s_transpose(cli_export_t *x, bool to_nchw)
{
    if (x->rank != 3 || x->nchw == to_nchw)
        return 0;
    static const int64_t nchw[] = {0, 3, 1, 2}, nhwc[] = {0, 2, 3, 1};
    zdist_onnx_attr_t perm = {"perm", ZDIST_ONNX_ATTR_INTS, .ints = to_nchw ? nchw : nhwc, .n = 4};
    x->nchw = to_nchw;
    return s_node(x, "Transpose", NULL, 0, &perm, 1);
}

/* The checkpoint's variable LAYER/WHAT with n elements, or NULL with err. */
const zdist_ckpt_var_t *
cli_export_var(cli_export_t *x, const char *layer, const char *what, int64_t n)
{
    char name[ZDIST_LAYER_NAME_MAX + 32];
    snprintf(name, sizeof name, "%s%s%s", layer, *layer ? "/" : "", what); /* softmax_regression's have no layer */
    const zdist_ckpt_var_t *v = zdist_ckpt_find(x->ck, name);
    if (!v)
        zdist_error_set(x->err, -ENOENT, "the checkpoint has no variable '%s' (layer '%s'): was it saved by another "
                        "model?", name, layer);
    else if (v->n != n)
        zdist_error_set(x->err, -EINVAL, "variable '%s' has %lld elements in the checkpoint, the model's layer "
                        "'%s' needs %lld: was it saved by another model?", name, (long long)v->n, layer,
                        (long long)n);
    return v && v->n == n ? v : NULL;
}

/* An initializer from data, named "LAYER/WHAT" (ONNX names may hold '/'). */
int
cli_export_const(cli_export_t *x, const char *layer, const char *what, const int64_t *dims, int rank, const float *data,
        char *ret_name)
{
    if (snprintf(ret_name, CLI_EXPORT_NAME, "%s%s%s", layer, *layer ? "/" : "", what) >= CLI_EXPORT_NAME)
        return -ENAMETOOLONG; /* a cut name could meet another's */
    return zdist_onnx_initializer(x->g, ret_name, ZDIST_DTYPE_FLOAT32, dims, rank, data);
}

/* An activation applied to the current tensor (softmax over the last axis, NHWC). */
int
cli_export_activation(cli_export_t *x, zdist_activation_t act)
{
    static const char *const ops[] = {
        [ZDIST_ACT_RELU] = "Relu", [ZDIST_ACT_TANH] = "Tanh", [ZDIST_ACT_SIGMOID] = "Sigmoid",
        [ZDIST_ACT_SOFTMAX] = "Softmax"};
    if (act == ZDIST_ACT_LINEAR)
        return 0;
    if (act == ZDIST_ACT_SOFTMAX) {
        int rc = s_transpose(x, false);
        zdist_onnx_attr_t axis = {"axis", ZDIST_ONNX_ATTR_INT, .i = -1};
        return rc < 0 ? rc : s_node(x, ops[act], NULL, 0, &axis, 1);
    }
    return s_node(x, ops[act], NULL, 0, NULL, 0);
}

/* Dense: Gemm(x, kernel [in, units], bias): zdist's kernel is already Gemm's B. */
static int
s_dense(cli_export_t *x, const zdist_layer_spec_t *l)
{
    int64_t in = l->in.dims[0];
    const zdist_ckpt_var_t *k = cli_export_var(x, l->name, "kernel", in * l->units), *b = NULL;
    if (!k || (l->use_bias && !(b = cli_export_var(x, l->name, "bias", l->units))))
        return x->err->code;
    char kn[CLI_EXPORT_NAME], bn[CLI_EXPORT_NAME];
    int rc = cli_export_const(x, l->name, "kernel", (const int64_t[]){in, l->units}, 2, k->values, kn);
    if (rc == 0 && b)
        rc = cli_export_const(x, l->name, "bias", (const int64_t[]){l->units}, 1, b->values, bn);
    return rc < 0 ? rc : s_node(x, "Gemm", (const char *const[]){kn, bn}, b ? 2 : 1, NULL, 0);
}

/* Explicit pads [top, left, bottom, right] of a window layer, as zdist pads it (TF's SAME: the extra at the end). */
static void
s_pads(const zdist_layer_spec_t *l, int64_t pads[4])
{
    memset(pads, 0, 4 * sizeof *pads);
    if (l->padding != ZDIST_PADDING_SAME)
        return;
    for (int d = 0; d < 2; d++) {
        int64_t total = (l->out.dims[d] - 1) * l->strides[d] + l->kernel[d] - l->in.dims[d];
        int64_t before = d == 0 ? l->pad_top : l->pad_left;
        pads[d] = before;
        pads[d + 2] = total > before ? total - before : 0;
    }
}

/* A window op (Conv, MaxPool, AveragePool) on the NCHW image: the layer's
   kernel (or pool), strides and explicit pads. */
static int
s_window(cli_export_t *x, const zdist_layer_spec_t *l, const char *op, const char *const *extra, int nextra)
{
    int64_t pads[4];
    s_pads(l, pads);
    zdist_onnx_attr_t attrs[] = {
        {"kernel_shape", ZDIST_ONNX_ATTR_INTS, .ints = l->kernel, .n = 2},
        {"strides", ZDIST_ONNX_ATTR_INTS, .ints = l->strides, .n = 2},
        {"pads", ZDIST_ONNX_ATTR_INTS, .ints = pads, .n = 4},
    };
    int rc = s_transpose(x, true);
    return rc < 0 ? rc : s_node(x, op, extra, nextra, attrs, 3);
}

/* Conv2D: zdist's kernel is Keras's [kh, kw, in, filters] (HWIO); ONNX's Conv takes OIHW on NCHW. */
static int
s_conv2d(cli_export_t *x, const zdist_layer_spec_t *l)
{
    int64_t kh = l->kernel[0], kw = l->kernel[1], ci = l->in.dims[2], co = l->filters, n = kh * kw * ci * co;
    const zdist_ckpt_var_t *k = cli_export_var(x, l->name, "kernel", n), *b = NULL;
    if (!k || (l->use_bias && !(b = cli_export_var(x, l->name, "bias", co))))
        return x->err->code;
    float *oihw = malloc((size_t)n * sizeof *oihw);
    if (!oihw)
        return zdist_error_set(x->err, -ENOMEM, "out of memory");
    for (int64_t y = 0; y < kh; y++)
        for (int64_t z = 0; z < kw; z++)
            for (int64_t i = 0; i < ci; i++)
                for (int64_t o = 0; o < co; o++)
                    oihw[((o * ci + i) * kh + y) * kw + z] = k->values[((y * kw + z) * ci + i) * co + o];
    char kn[CLI_EXPORT_NAME], bn[CLI_EXPORT_NAME];
    int rc = cli_export_const(x, l->name, "kernel", (const int64_t[]){co, ci, kh, kw}, 4, oihw, kn);
    free(oihw);
    if (rc == 0 && b)
        rc = cli_export_const(x, l->name, "bias", (const int64_t[]){co}, 1, b->values, bn);
    return rc < 0 ? rc : s_window(x, l, "Conv", (const char *const[]){kn, bn}, b ? 2 : 1);
}

/* Max and average pooling: the padding is left out of a window (TF's
   SAME), which is MaxPool's and AveragePool's count_include_pad 0. */
static int
s_pool(cli_export_t *x, const zdist_layer_spec_t *l)
{
    return s_window(x, l, l->kind == ZDIST_LAYER_MAX_POOL2D ? "MaxPool" : "AveragePool", NULL, 0);
}

/* Batch normalization in inference form: the moving statistics, gamma and
   beta (ones and zeros when the layer has none), over the channel axis. */
static int
s_batch_norm(cli_export_t *x, const zdist_layer_spec_t *l)
{
    int64_t c = l->out.dims[l->out.rank - 1];
    const zdist_ckpt_var_t *g = l->scale ? cli_export_var(x, l->name, "gamma", c) : NULL;
    const zdist_ckpt_var_t *b = l->center ? cli_export_var(x, l->name, "beta", c) : NULL;
    const zdist_ckpt_var_t *m = cli_export_var(x, l->name, "moving_mean", c),
                           *v = cli_export_var(x, l->name, "moving_variance", c);
    if ((l->scale && !g) || (l->center && !b) || !m || !v)
        return x->err->code;
    float *fill = malloc((size_t)(2 * c) * sizeof *fill);
    if (!fill)
        return zdist_error_set(x->err, -ENOMEM, "out of memory");
    for (int64_t i = 0; i < c; i++) {
        fill[i] = 1.0f;
        fill[c + i] = 0.0f;
    }
    char gn[CLI_EXPORT_NAME], bn[CLI_EXPORT_NAME], mn[CLI_EXPORT_NAME], vn[CLI_EXPORT_NAME];
    int rc = cli_export_const(x, l->name, "gamma", &c, 1, g ? g->values : fill, gn);
    if (rc == 0)
        rc = cli_export_const(x, l->name, "beta", &c, 1, b ? b->values : fill + c, bn);
    if (rc == 0)
        rc = cli_export_const(x, l->name, "moving_mean", &c, 1, m->values, mn);
    if (rc == 0)
        rc = cli_export_const(x, l->name, "moving_variance", &c, 1, v->values, vn);
    free(fill);
    zdist_onnx_attr_t eps = {"epsilon", ZDIST_ONNX_ATTR_FLOAT, .f = (float)l->epsilon};
    if (rc == 0)
        rc = s_transpose(x, true);
    return rc < 0 ? rc : s_node(x, "BatchNormalization", (const char *const[]){gn, bn, mn, vn}, 4, &eps, 1);
}

/* Flatten in zdist's order: the image NHWC, then one row per example. */
static int
s_flatten(cli_export_t *x, const zdist_layer_spec_t *l)
{
    zdist_onnx_attr_t axis = {"axis", ZDIST_ONNX_ATTR_INT, .i = 1};
    int rc = s_transpose(x, false);
    if (rc == 0 && x->rank != 1)
        rc = s_node(x, "Flatten", NULL, 0, &axis, 1);
    x->rank = 1;
    return rc;
}

/* Dropout at inference is the identity: no node. */
static int
s_identity(cli_export_t *x, const zdist_layer_spec_t *l)
{
    return 0;
}

static int
s_act_layer(cli_export_t *x, const zdist_layer_spec_t *l)
{
    return 0; /* the table's caller applies every layer's activation */
}

/* One node of named inputs to a fresh tensor (into out, CLI_EXPORT_NAME bytes); the current tensor stays. */
int
cli_export_op(cli_export_t *x, const char *op, const char *const *in, int nin, const zdist_onnx_attr_t *attrs,
              int nattrs, char *out)
{
    s_name(x, op, out);
    return zdist_onnx_node(x->g, op, in, nin, (const char *const[]){out}, 1, attrs, nattrs);
}

/* A constant int64 (rank 0 or [1]) or float scalar named LAYER/WHAT. */
int
cli_export_const_i64(cli_export_t *x, const char *layer, const char *what, int64_t v, int rank, char *ret_name)
{
    if (snprintf(ret_name, CLI_EXPORT_NAME, "%s/%s", layer, what) >= CLI_EXPORT_NAME)
        return -ENAMETOOLONG;
    return zdist_onnx_initializer(x->g, ret_name, ZDIST_DTYPE_INT64, (const int64_t[]){1}, rank, &v);
}

/* Sum over the examples' features (axis 1), keeping it or not. */
static int
s_sum_features(cli_export_t *x, const char *layer, const char *in, bool keep, char *out)
{
    char axes[CLI_EXPORT_NAME];
    zdist_onnx_attr_t kd = {"keepdims", ZDIST_ONNX_ATTR_INT, .i = keep};
    int rc = cli_export_const_i64(x, layer, keep ? "axes_keep" : "axes", 1, 1, axes);
    return rc < 0 ? rc : cli_export_op(x, "ReduceSum", (const char *const[]){in, axes}, 2, &kd, 1, out);
}

/* in [N, K] times rows [N, K, E] summed over K: [N, E]. */
int
cli_export_weighted_sum(cli_export_t *x, const char *layer, const char *w, const char *rows, char *out)
{
    char axes[CLI_EXPORT_NAME], w3[CLI_EXPORT_NAME], prod[CLI_EXPORT_NAME];
    int rc = cli_export_const_i64(x, layer, "axes_last", 2, 1, axes);
    if (rc == 0)
        rc = cli_export_op(x, "Unsqueeze", (const char *const[]){w, axes}, 2, NULL, 0, w3);
    if (rc == 0)
        rc = cli_export_op(x, "Mul", (const char *const[]){rows, w3}, 2, NULL, 0, prod);
    return rc < 0 ? rc : s_sum_features(x, layer, prod, false, out);
}

/* The combiner's factor of each example [N, 1] from the weights w: mean
   1 / sum(w), sqrtn 1 / sqrt(sum(w^2)), 0 where that sum is 0 (as
   libzdist's zdist_combiner_scale). */
int
cli_export_combiner_scale(cli_export_t *x, const zdist_layer_spec_t *l, const char *w, char *out)
{
    char sq[CLI_EXPORT_NAME], den[CLI_EXPORT_NAME], root[CLI_EXPORT_NAME], zero[CLI_EXPORT_NAME],
        one[CLI_EXPORT_NAME], isz[CLI_EXPORT_NAME], inv[CLI_EXPORT_NAME];
    const float zf = 0.0f, of = 1.0f;
    int rc = cli_export_const(x, l->name, "zero", (const int64_t[]){1}, 0, &zf, zero);
    if (rc == 0)
        rc = cli_export_const(x, l->name, "one", (const int64_t[]){1}, 0, &of, one);
    bool sqrtn = l->combiner == ZDIST_COMBINER_SQRTN;
    if (rc == 0 && sqrtn)
        rc = cli_export_op(x, "Mul", (const char *const[]){w, w}, 2, NULL, 0, sq);
    if (rc == 0)
        rc = s_sum_features(x, l->name, sqrtn ? sq : w, true, den);
    if (rc == 0 && sqrtn)
        rc = cli_export_op(x, "Sqrt", (const char *const[]){den}, 1, NULL, 0, root);
    const char *d = sqrtn ? root : den;
    if (rc == 0)
        rc = cli_export_op(x, "Equal", (const char *const[]){d, zero}, 2, NULL, 0, isz);
    if (rc == 0)
        rc = cli_export_op(x, "Div", (const char *const[]){one, d}, 2, NULL, 0, inv);
    return rc < 0 ? rc : cli_export_op(x, "Where", (const char *const[]){isz, zero, inv}, 3, NULL, 0, out);
}

/* The rows an embedding of sparse examples looks up and each feature's
   weight: a fixed table's features whose id is at least first_id look up
   row (id - first_id) mod input_dim, weighted by their value; a dynamic
   table's every feature looks up its id's row (zeros when the table has
   none), weighted by its value. */
static int
s_lookup(cli_export_t *x, const zdist_layer_spec_t *l, char *w, char *rows)
{
    char table[CLI_EXPORT_NAME], row[CLI_EXPORT_NAME];
    if (l->dynamic) {
        int rc = cli_export_dynamic_rows(x, l, "ids", table, row);
        snprintf(w, CLI_EXPORT_NAME, "values");
        return rc < 0 ? rc : cli_export_op(x, "Gather", (const char *const[]){table, row}, 2, NULL, 0, rows);
    }
    const zdist_ckpt_var_t *t = cli_export_var(x, l->name, "embeddings", l->input_dim * l->output_dim);
    if (!t)
        return x->err->code;
    char first[CLI_EXPORT_NAME], dim[CLI_EXPORT_NAME], zero[CLI_EXPORT_NAME], ge[CLI_EXPORT_NAME],
        mask[CLI_EXPORT_NAME], sh[CLI_EXPORT_NAME], cl[CLI_EXPORT_NAME];
    zdist_onnx_attr_t to_float = {"to", ZDIST_ONNX_ATTR_INT, .i = 1 /* TensorProto.FLOAT */};
    int rc = cli_export_const(x, l->name, "embeddings", (const int64_t[]){l->input_dim, l->output_dim}, 2,
                              t->values, table);
    if (rc == 0)
        rc = cli_export_const_i64(x, l->name, "first_id", l->first_id, 0, first);
    if (rc == 0)
        rc = cli_export_const_i64(x, l->name, "input_dim", l->input_dim, 0, dim);
    if (rc == 0)
        rc = cli_export_const_i64(x, l->name, "zero_id", 0, 0, zero);
    if (rc == 0)
        rc = cli_export_op(x, "GreaterOrEqual", (const char *const[]){"ids", first}, 2, NULL, 0, ge);
    if (rc == 0)
        rc = cli_export_op(x, "Cast", (const char *const[]){ge}, 1, &to_float, 1, mask);
    if (rc == 0)
        rc = cli_export_op(x, "Mul", (const char *const[]){"values", mask}, 2, NULL, 0, w);
    if (rc == 0)
        rc = cli_export_op(x, "Sub", (const char *const[]){"ids", first}, 2, NULL, 0, sh);
    if (rc == 0)
        rc = cli_export_op(x, "Max", (const char *const[]){sh, zero}, 2, NULL, 0, cl);
    if (rc == 0)
        rc = cli_export_op(x, "Mod", (const char *const[]){cl, dim}, 2, NULL, 0, row);
    return rc < 0 ? rc : cli_export_op(x, "Gather", (const char *const[]){table, row}, 2, NULL, 0, rows);
}

/* Embedding of sparse examples: the looked-up rows (Gather) weighted,
   combined per example (sum, mean or sqrtn). */
static int
s_embedding(cli_export_t *x, const zdist_layer_spec_t *l)
{
    char w[CLI_EXPORT_NAME], rows[CLI_EXPORT_NAME], sum[CLI_EXPORT_NAME], scale[CLI_EXPORT_NAME];
    int rc = s_lookup(x, l, w, rows);
    if (rc == 0)
        rc = cli_export_weighted_sum(x, l->name, w, rows, sum);
    if (rc == 0 && l->combiner == ZDIST_COMBINER_SUM) {
        snprintf(x->cur, sizeof x->cur, "%s", sum);
        return 0;
    }
    if (rc == 0)
        rc = cli_export_combiner_scale(x, l, w, scale);
    if (rc == 0)
        rc = cli_export_op(x, "Mul", (const char *const[]){sum, scale}, 2, NULL, 0, x->cur);
    return rc;
}

/* Concat: the current tensor, then the example's dense features (ids
   below dense_features, at their id, summed), from the sparse input. */
static int
s_concat(cli_export_t *x, const zdist_layer_spec_t *l)
{
    if (!x->sparse)
        return zdist_error_set(x->err, -ENOTSUP, "layer '%s': concat reads a sparse input", l->name);
    char depth[CLI_EXPORT_NAME], onoff[CLI_EXPORT_NAME], hot[CLI_EXPORT_NAME], dense[CLI_EXPORT_NAME],
        out[CLI_EXPORT_NAME];
    const float vals[2] = {0.0f, 1.0f};
    zdist_onnx_attr_t axis = {"axis", ZDIST_ONNX_ATTR_INT, .i = 1};
    int rc = cli_export_const_i64(x, l->name, "dense_features", l->dense_features, 0, depth);
    if (rc == 0)
        rc = cli_export_const(x, l->name, "on_off", (const int64_t[]){2}, 1, vals, onoff);
    /* an id outside [0, dense_features) is all off: not a dense feature */
    if (rc == 0)
        rc = cli_export_op(x, "OneHot", (const char *const[]){"ids", depth, onoff}, 3, NULL, 0, hot);
    if (rc == 0)
        rc = cli_export_weighted_sum(x, l->name, "values", hot, dense);
    if (rc == 0)
        rc = cli_export_op(x, "Concat", (const char *const[]){x->cur, dense}, 2, &axis, 1, out);
    snprintf(x->cur, sizeof x->cur, "%s", out);
    return rc;
}

typedef int (*s_layer_fn)(cli_export_t *x, const zdist_layer_spec_t *l);

/* The exporter of each layer kind; a kind without one is refused naming
   the layer. The layer's activation (dense, conv2d, activation layers) is
   applied after it by the caller. */
static const struct {
    zdist_layer_kind_t kind;
    s_layer_fn fn;
} s_layers[] = {
    {ZDIST_LAYER_DENSE, s_dense},         {ZDIST_LAYER_CONV2D, s_conv2d},
    {ZDIST_LAYER_MAX_POOL2D, s_pool},     {ZDIST_LAYER_AVG_POOL2D, s_pool},
    {ZDIST_LAYER_FLATTEN, s_flatten},     {ZDIST_LAYER_DROPOUT, s_identity},
    {ZDIST_LAYER_ACTIVATION, s_act_layer}, {ZDIST_LAYER_BATCH_NORM, s_batch_norm},
    {ZDIST_LAYER_EMBEDDING, s_embedding},  {ZDIST_LAYER_CONCAT, s_concat},
};
#define S_NLAYERS (sizeof s_layers / sizeof s_layers[0])

/* The activation the loss applies to the last layer's output (the model's
   predictions), and whether the last layer's own activation is that one. */
zdist_activation_t
cli_export_output_activation(const zdist_model_spec_t *spec)
{
    return spec->loss == ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ? ZDIST_ACT_SOFTMAX
           : spec->loss == ZDIST_LOSS_BINARY_CROSSENTROPY           ? ZDIST_ACT_SIGMOID
                                                                    : ZDIST_ACT_LINEAR;
}

/* The output: the loss's activation (unless logits), named "predictions" (or "logits"). */
int
cli_export_finish(cli_export_t *x, zdist_activation_t out_act, const zdist_shape_t *out)
{
    int rc = s_transpose(x, false);
    if (rc == 0 && !x->logits)
        rc = cli_export_activation(x, out_act);
    const char *name = x->logits && out_act != ZDIST_ACT_LINEAR ? "logits" : "predictions";
    if (rc == 0)
        rc = zdist_onnx_node(x->g, "Identity", (const char *const[]){x->cur}, 1, (const char *const[]){name}, 1,
                             NULL, 0);
    int64_t dims[ZDIST_MAX_RANK + 1] = {ZDIST_ONNX_BATCH};
    for (int d = 0; d < out->rank; d++)
        dims[d + 1] = out->dims[d];
    return rc < 0 ? rc : zdist_onnx_output(x->g, name, ZDIST_DTYPE_FLOAT32, dims, out->rank + 1);
}

/* A sequential model's layers. */
static int
s_export_sequential(cli_export_t *x, const zdist_model_spec_t *spec)
{
    int64_t dims[ZDIST_MAX_RANK + 1] = {ZDIST_ONNX_BATCH, ZDIST_ONNX_WIDTH};
    int rc;
    x->sparse = spec->sparse_input;
    if (x->sparse) {
        /* a libsvm example as its feature ids and values, padded with value 0 */
        rc = zdist_onnx_input(x->g, "ids", ZDIST_DTYPE_INT64, dims, 2);
        if (rc == 0)
            rc = zdist_onnx_input(x->g, "values", ZDIST_DTYPE_FLOAT32, dims, 2);
    } else {
        for (int d = 0; d < spec->input_shape.rank; d++)
            dims[d + 1] = spec->input_shape.dims[d];
        rc = zdist_onnx_input(x->g, "input", ZDIST_DTYPE_FLOAT32, dims, spec->input_shape.rank + 1);
    }
    snprintf(x->cur, sizeof x->cur, "input");
    x->rank = spec->input_shape.rank;
    zdist_activation_t out_act = cli_export_output_activation(spec);
    for (int i = 0; rc == 0 && i < spec->num_layers; i++) {
        const zdist_layer_spec_t *l = &spec->layers[i];
        s_layer_fn fn = NULL;
        for (size_t k = 0; k < S_NLAYERS; k++)
            if (s_layers[k].kind == l->kind)
                fn = s_layers[k].fn;
        if (!fn)
            return zdist_error_set(x->err, -ENOTSUP, "model.layers[%d] '%s': this layer kind is not exported to ONNX "
                                   "(dense, conv2d, max/avg pooling, batch_norm, dropout, flatten, activations, "
                                   "embedding and concat are)", i, l->name);
        if ((rc = fn(x, l)) < 0)
            break;
        x->rank = l->out.rank;
        bool has_act = l->kind == ZDIST_LAYER_DENSE || l->kind == ZDIST_LAYER_CONV2D ||
                       l->kind == ZDIST_LAYER_ACTIVATION;
        /* the last layer's softmax / sigmoid is the loss's: cli_export_finish applies it (or not, for logits) */
        bool fused = i == spec->num_layers - 1 && out_act != ZDIST_ACT_LINEAR && l->activation == out_act;
        if (has_act && !fused)
            rc = cli_export_activation(x, l->activation);
    }
    return rc < 0 ? rc : cli_export_finish(x, out_act, &spec->layers[spec->num_layers - 1].out);
}

/* mlp and softmax_regression: dense layers (ReLU between), softmax
   cross-entropy; their widths are the checkpoint's. */
static int
s_export_dense_model(cli_export_t *x, bool named)
{
    zdist_model_spec_t spec = {.loss = ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY};
    zdist_layer_spec_t layers[ZDIST_MODEL_MAX_HIDDEN + 1];
    int nl = 0;
    for (; nl < ZDIST_MODEL_MAX_HIDDEN + 1; nl++) {
        zdist_layer_spec_t *l = &layers[nl];
        memset(l, 0, sizeof *l);
        snprintf(l->name, sizeof l->name, named ? "dense_%d" : "", nl);
        char bname[ZDIST_LAYER_NAME_MAX + 8];
        snprintf(bname, sizeof bname, named ? "%s/bias" : "bias", l->name);
        const zdist_ckpt_var_t *b = zdist_ckpt_find(x->ck, bname);
        if (!b || (!named && nl > 0))
            break;
        const zdist_ckpt_var_t *k = zdist_ckpt_find(x->ck, named ? (snprintf(bname, sizeof bname, "%s/kernel",
                                                                             l->name), bname) : "kernel");
        if (!k || b->n < 1 || k->n % b->n != 0)
            return zdist_error_set(x->err, -EINVAL, "%s: the checkpoint's '%s' kernel and bias disagree", x->model,
                                   bname);
        *l = (zdist_layer_spec_t){.kind = ZDIST_LAYER_DENSE, .use_bias = true, .units = b->n,
                                  .activation = ZDIST_ACT_RELU, .in = {1, {k->n / b->n}}, .out = {1, {b->n}}};
        snprintf(l->name, sizeof l->name, named ? "dense_%d" : "", nl);
        if (nl > 0 && l->in.dims[0] != layers[nl - 1].units)
            return zdist_error_set(x->err, -EINVAL, "%s: layer %s takes %lld inputs, the one before gives %lld",
                                   x->model, l->name, (long long)l->in.dims[0], (long long)layers[nl - 1].units);
    }
    if (nl == 0)
        return zdist_error_set(x->err, -ENOENT, "%s: the checkpoint has no %s: was it saved by another model?",
                               x->model, named ? "dense_0/kernel and dense_0/bias" : "kernel and bias");
    layers[nl - 1].activation = ZDIST_ACT_LINEAR;
    spec.layers = layers;
    spec.num_layers = nl;
    spec.input_shape = layers[0].in;
    return s_export_sequential(x, &spec);
}


static void
s_usage(FILE *out)
{
    fprintf(out,
            "usage: zdist export CHECKPOINT_DIR|JOB_DIR|JOB_ID --onnx MODEL.onnx [--logits] [--job JOB.json]\n"
            "                    [--state-dir DIR]\n\n"
            "Writes a trained model as an ONNX graph (opset %d): the model of the job, the variables of its\n"
            "checkpoint (any strategy's: a parameter_server checkpoint's shards are merged). The argument is a\n"
            "checkpoint (ckpt-STEP/), a directory holding ckpt-STEP/ directories (a job's directory in the\n"
            "coordinator's state, a checkpoint.dir, `zdist run --save`'s DIR: the newest complete one), or a\n"
            "job id under --state-dir DIR (the coordinator's state directory). The job's document is job.json\n"
            "in the checkpoint or the directory above it, or --job.\n\n"
            "The graph's input \"input\" is float32 [N, input_shape...] (channels last, as zdist reads\n"
            "examples); a model of sparse (libsvm) examples takes \"ids\" int64 and \"values\" float32 [N, K]\n"
            "instead, each example's features padded with value 0. A functional model takes its named\n"
            "inputs: float32 or int64 [N, shape...] (a group: its features concatenated in order); a var\n"
            "feature NAME as \"NAME\" int64 [N, K] padded with id 0 and \"NAME_mask\" float32 [N, K] (1 for an\n"
            "id, 0 for padding). A dynamic embedding table is exported as its rows and an id->row map\n"
            "(ai.onnx.ml LabelEncoder): an id the table does not hold looks up zeros, as on the psd. A\n"
            "hashing layer has no ONNX equivalent and is refused. Its output \"predictions\" applies the\n"
            "loss's activation (softmax or sigmoid) to the last layer; --logits leaves it out (output\n"
            "\"logits\"). The file is written whole or not at all.\n",
            S_OPSET);
}

/* dir/name into buf (PATH_MAX); false when it does not fit. */
static bool
s_join(char *buf, const char *dir, const char *name)
{
    int n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);
    return n > 0 && n < PATH_MAX;
}

static bool
s_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The checkpoint directory the argument names into ckpt, and the directory
   that may hold the job's job.json into job_dir. */
static int
s_resolve(const char *arg, const char *state_dir, char *ckpt, char *job_dir, zdist_error_t *err)
{
    char p[PATH_MAX];
    if (!s_is_dir(arg)) {
        if (!state_dir || strchr(arg, '/') || !s_join(p, state_dir, "jobs") || !s_join(job_dir, p, arg) ||
            !s_is_dir(job_dir))
            return zdist_error_set(err, -ENOENT, "%s: no such checkpoint directory%s", arg,
                                   state_dir ? " nor job under --state-dir" : " (a job id needs --state-dir)");
        arg = job_dir;
    }
    int rc = zdist_ckpt_locate(arg, ckpt, PATH_MAX, err);
    if (rc == -ENOENT) {
        /* a coordinator's job with checkpoint.dir: its state.json says where */
        json_t *s = s_join(p, arg, "state.json") ? json_load_file(p, 0, NULL) : NULL;
        const char *cd = json_string_value(json_object_get(json_object_get(s, "detail"), "checkpoint_dir"));
        if (cd && cd[0] == '/')
            rc = zdist_ckpt_locate(cd, ckpt, PATH_MAX, err);
        json_decref(s);
    }
    if (rc < 0)
        return rc;
    if (strcmp(ckpt, arg) == 0 ? snprintf(job_dir, PATH_MAX, "%s/..", arg) >= PATH_MAX
                               : job_dir != arg && snprintf(job_dir, PATH_MAX, "%s", arg) >= PATH_MAX)
        return zdist_error_set(err, -ENAMETOOLONG, "'%s': the path is too long", arg);
    return 0;
}

/* The job document: --job, else job.json in the checkpoint or job_dir. */
static int
s_load_job(const char *job_path, const char *ckpt, const char *job_dir, zdist_job_t *job, zdist_error_t *err)
{
    char p[PATH_MAX];
    if (!job_path) {
        if (s_join(p, ckpt, "job.json") && access(p, F_OK) == 0)
            job_path = p;
        else if (s_join(p, job_dir, "job.json") && access(p, F_OK) == 0)
            job_path = p;
        else
            return zdist_error_set(err, -ENOENT, "%s: no job.json in the checkpoint nor the directory above it: give "
                                   "the job's document with --job JOB.json", ckpt);
    }
    void *text = NULL;
    size_t len = 0;
    int rc = zdist_file_read(job_path, S_MAX_JOB_BYTES, &text, &len, err);
    if (rc == 0 && (rc = zdist_job_parse(text, NULL, job, err)) < 0)
        zdist_error_prefix(err, "%s", job_path);
    free(text);
    return rc;
}

/* Builds the graph of job's model over ckpt's variables into x->g. */
static int
s_build(cli_export_t *x, const zdist_job_t *job)
{
    if (strcmp(job->model, ZDIST_MODEL_SEQUENTIAL) == 0) {
        zdist_model_spec_t spec;
        int rc = zdist_model_spec_parse(job->model_params, job->format == ZDIST_INPUT_FORMAT_LIBSVM, &spec, x->err);
        if (rc == 0)
            rc = s_export_sequential(x, &spec);
        zdist_model_spec_release(&spec);
        return rc;
    }
    if (strcmp(job->model, ZDIST_MODEL_FUNCTIONAL) == 0)
        return cli_export_graph(x, job->model_params);
    if (strcmp(job->model, "mlp") == 0 || strcmp(job->model, "softmax_regression") == 0)
        return s_export_dense_model(x, strcmp(job->model, "mlp") == 0);
    return zdist_error_set(x->err, -ENOTSUP, "model '%s' is not exported to ONNX (sequential, functional, mlp "
                           "and softmax_regression are)", job->model);
}

/* The target must be a file path whose directory exists. */
static int
s_check_target(const char *path, zdist_error_t *err)
{
    if (!*path || path[strlen(path) - 1] == '/' || s_is_dir(path))
        return zdist_error_set(err, -EISDIR, "--onnx '%s': names a directory, not a file", path);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    if (slash && !s_is_dir(dir))
        return zdist_error_set(err, -ENOENT, "--onnx '%s': directory '%s' does not exist", path, dir);
    if (access(slash ? dir : ".", W_OK) != 0)
        return zdist_error_set(err, -EACCES, "--onnx '%s': directory '%s' is not writable", path, slash ? dir : ".");
    return 0;
}

static int
s_export(const char *arg, const char *onnx, const char *job_path, const char *state_dir, bool logits)
{
    zdist_error_t err = {0};
    char ckpt[PATH_MAX], job_dir[PATH_MAX];
    zdist_job_t job = {0};
    zdist_ckpt_t ck = {0};
    cli_export_t x = {.logits = logits, .err = &err, .ck = &ck, .ckpt_dir = ckpt};
    int rc = s_check_target(onnx, &err);
    if (rc == 0)
        rc = s_resolve(arg, state_dir, ckpt, job_dir, &err);
    if (rc == 0)
        rc = s_load_job(job_path, ckpt, job_dir, &job, &err);
    if (rc == 0)
        rc = zdist_ckpt_load(ckpt, &ck, &err);
    char doc[PATH_MAX + 128];
    snprintf(doc, sizeof doc, "zdist job '%s' (model %s), checkpoint step %lld", rc == 0 ? job.name : "",
             rc == 0 ? job.model : "", (long long)ck.step);
    if (rc == 0 && !(x.g = zdist_onnx_new(job.name, S_OPSET, doc)))
        rc = zdist_error_set(&err, -ENOMEM, "out of memory");
    x.model = job.model;
    if (rc == 0)
        rc = s_build(&x, &job);
    if (rc == 0 && (rc = zdist_onnx_write(x.g, onnx, &err)) < 0)
        zdist_error_prefix(&err, "--onnx");
    if (rc == 0)
        fprintf(stderr, "zdist export: %s (step %lld) -> %s\n", ckpt, (long long)ck.step, onnx);
    else
        fprintf(stderr, "zdist export: %s\n", err.text);
    zdist_onnx_destroy(&x.g);
    zdist_ckpt_release(&ck);
    zdist_job_release(&job);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
}

int
cli_export_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"onnx", required_argument, NULL, 'o'},      {"logits", no_argument, NULL, 'l'},
        {"job", required_argument, NULL, 'j'},       {"state-dir", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0},
    };
    const char *onnx = NULL, *job = NULL, *state_dir = NULL;
    bool logits = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            onnx = optarg;
            break;
        case 'l':
            logits = true;
            break;
        case 'j':
            job = optarg;
            break;
        case 's':
            state_dir = optarg;
            break;
        case 'h':
            s_usage(stdout);
            return CLI_EXIT_OK;
        default:
            s_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("export", "expected one checkpoint directory or job, e.g. zdist export "
                               "STATE/jobs/ID --onnx model.onnx");
    if (!onnx)
        return cli_usage_error("export", "--onnx MODEL.onnx is required (the file to write)");
    return s_export(argv[optind], onnx, job, state_dir, logits);
}
