/* zdist export: a functional model (common's model_graph) as an ONNX graph, layer by layer as worker/models/functional.c computes it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_export.h"

/* One input's or layer's value in the graph: its tensor, and for a var
   feature (ragged ids, [N, K] padded) its mask [N, K]. */
typedef struct {
    char t[CLI_EXPORT_NAME];
    char mask[CLI_EXPORT_NAME];
} s_val_t;

typedef struct {
    cli_export_t *x;
    const zdist_model_spec_t *spec;
    s_val_t *vals; /* inputs, then layers */
} s_graph_t;

static const s_val_t *
s_in(const s_graph_t *g, const zdist_layer_spec_t *l, int j)
{
    int ref = l->inputs[j];
    return &g->vals[ref < 0 ? -1 - ref : g->spec->num_inputs + ref];
}

/* The named inputs: [N, shape...] of their dtype; a var feature [N, K] and its mask. */
static int
s_inputs(s_graph_t *g)
{
    int rc = 0;
    for (int k = 0; rc == 0 && k < g->spec->num_inputs; k++) {
        const zdist_model_input_t *in = &g->spec->inputs[k];
        int64_t dims[ZDIST_MAX_RANK + 1] = {ZDIST_ONNX_BATCH, ZDIST_ONNX_WIDTH};
        int rank = 2;
        if (!in->ragged) {
            for (int d = 0; d < in->shape.rank; d++)
                dims[d + 1] = in->shape.dims[d];
            rank = in->shape.rank + 1;
        }
        snprintf(g->vals[k].t, CLI_EXPORT_NAME, "%s", in->name);
        rc = zdist_onnx_input(g->x->g, in->name, in->dtype, dims, rank);
        if (rc == 0 && in->ragged) {
            snprintf(g->vals[k].mask, CLI_EXPORT_NAME, "%s_mask", in->name);
            for (int o = 0; o < g->spec->num_inputs; o++)
                if (strcmp(g->spec->inputs[o].name, g->vals[k].mask) == 0)
                    return zdist_error_set(g->x->err, -EINVAL, "input '%s': a var feature's ids come with a mask "
                                           "input named '%s', and another input has that name; rename one",
                                           in->name, g->vals[k].mask);
            rc = zdist_onnx_input(g->x->g, g->vals[k].mask, ZDIST_DTYPE_FLOAT32, dims, 2);
        }
    }
    return rc;
}

/* Gemm(in, LAYER/kernel [d, units], LAYER/bias) into out. */
static int
s_gemm(s_graph_t *g, const zdist_layer_spec_t *l, const char *in, int64_t d, int64_t units, char *out)
{
    cli_export_t *x = g->x;
    const zdist_ckpt_var_t *k = cli_export_var(x, l->name, "kernel", d * units), *b = NULL;
    if (!k || (l->use_bias && !(b = cli_export_var(x, l->name, "bias", units))))
        return x->err->code;
    char kn[CLI_EXPORT_NAME], bn[CLI_EXPORT_NAME];
    int rc = cli_export_const(x, l->name, "kernel", (const int64_t[]){d, units}, 2, k->values, kn);
    if (rc == 0 && b)
        rc = cli_export_const(x, l->name, "bias", (const int64_t[]){units}, 1, b->values, bn);
    return rc < 0 ? rc : cli_export_op(x, "Gemm", (const char *const[]){in, kn, bn}, b ? 3 : 2, NULL, 0, out);
}

/* DCN-v2's Cross: x0 * (x W + b + diag_scale * x) + x (x: the last input). */
static int
s_cross(s_graph_t *g, const zdist_layer_spec_t *l, char *out)
{
    cli_export_t *x = g->x;
    const char *x0 = s_in(g, l, 0)->t, *xl = s_in(g, l, l->ninputs - 1)->t;
    int64_t d = l->in.dims[0];
    char prod[CLI_EXPORT_NAME], s[CLI_EXPORT_NAME], sx[CLI_EXPORT_NAME], p2[CLI_EXPORT_NAME], m[CLI_EXPORT_NAME];
    int rc = s_gemm(g, l, xl, d, d, prod);
    if (rc == 0 && l->diag_scale != 0) {
        const float f = (float)l->diag_scale;
        rc = cli_export_const(x, l->name, "diag_scale", (const int64_t[]){1}, 0, &f, s);
        if (rc == 0)
            rc = cli_export_op(x, "Mul", (const char *const[]){xl, s}, 2, NULL, 0, sx);
        if (rc == 0)
            rc = cli_export_op(x, "Add", (const char *const[]){prod, sx}, 2, NULL, 0, p2);
        snprintf(prod, sizeof prod, "%s", p2);
    }
    if (rc == 0)
        rc = cli_export_op(x, "Mul", (const char *const[]){x0, prod}, 2, NULL, 0, m);
    return rc < 0 ? rc : cli_export_op(x, "Add", (const char *const[]){m, xl}, 2, NULL, 0, out);
}

/* TFRS's DotInteraction as the worker computes it: the F inputs [N, d]
   stacked [N, F, d], their Gram matrix [N, F, F] flattened row by row,
   then the pairs (i, j), j < i (j <= i with self_interaction), in that
   order (Gather), or with skip_gather the whole matrix with the rest
   zeroed (a mask); input 0 in front with concat_dense. */
static int
s_dot_interaction(s_graph_t *g, const zdist_layer_spec_t *l, char *out)
{
    cli_export_t *x = g->x;
    int f = l->ninputs;
    int64_t d = l->in.dims[0], ff = (int64_t)f * f;
    const char *in[ZDIST_LAYER_MAX_INPUTS];
    for (int j = 0; j < f; j++)
        in[j] = s_in(g, l, j)->t;
    char cat[CLI_EXPORT_NAME], shape[CLI_EXPORT_NAME], st[CLI_EXPORT_NAME], tr[CLI_EXPORT_NAME],
        gram[CLI_EXPORT_NAME], flat[CLI_EXPORT_NAME], sel[CLI_EXPORT_NAME], pick[CLI_EXPORT_NAME];
    zdist_onnx_attr_t axis1 = {"axis", ZDIST_ONNX_ATTR_INT, .i = 1};
    static const int64_t perm[] = {0, 2, 1};
    zdist_onnx_attr_t tp = {"perm", ZDIST_ONNX_ATTR_INTS, .ints = perm, .n = 3};
    int64_t sh[3] = {-1, f, d};
    /* "LAYER/..." always fits: a layer name is shorter than ZDIST_LAYER_NAME_MAX */
    snprintf(shape, sizeof shape, "%s/stack_shape", l->name);
    int rc = cli_export_op(x, "Concat", in, f, &axis1, 1, cat);
    if (rc == 0)
        rc = zdist_onnx_initializer(x->g, shape, ZDIST_DTYPE_INT64, (const int64_t[]){3}, 1, sh);
    if (rc == 0)
        rc = cli_export_op(x, "Reshape", (const char *const[]){cat, shape}, 2, NULL, 0, st);
    if (rc == 0)
        rc = cli_export_op(x, "Transpose", (const char *const[]){st}, 1, &tp, 1, tr);
    if (rc == 0)
        rc = cli_export_op(x, "MatMul", (const char *const[]){st, tr}, 2, NULL, 0, gram);
    if (rc == 0)
        rc = cli_export_op(x, "Flatten", (const char *const[]){gram}, 1, &axis1, 1, flat);
    int64_t *idx = malloc((size_t)ff * sizeof *idx);
    float *mask = malloc((size_t)ff * sizeof *mask);
    int64_t np = 0;
    for (int i = 0; idx && mask && i < f; i++)
        for (int j = 0; j < f; j++) {
            bool on = l->self_interaction ? j <= i : j < i;
            mask[i * f + j] = on ? 1.0f : 0.0f;
            if (on)
                idx[np++] = (int64_t)i * f + j;
        }
    if (!idx || !mask)
        rc = zdist_error_set(x->err, -ENOMEM, "out of memory");
    snprintf(sel, sizeof sel, "%s/pairs", l->name);
    if (rc == 0 && l->skip_gather)
        rc = cli_export_const(x, l->name, "triangle", &ff, 1, mask, sel);
    else if (rc == 0)
        rc = zdist_onnx_initializer(x->g, sel, ZDIST_DTYPE_INT64, &np, 1, idx);
    free(idx);
    free(mask);
    if (rc == 0 && l->skip_gather)
        rc = cli_export_op(x, "Mul", (const char *const[]){flat, sel}, 2, NULL, 0, l->concat_dense ? pick : out);
    else if (rc == 0)
        rc = cli_export_op(x, "Gather", (const char *const[]){flat, sel}, 2, &axis1, 1, l->concat_dense ? pick : out);
    if (rc == 0 && l->concat_dense)
        rc = cli_export_op(x, "Concat", (const char *const[]){in[0], pick}, 2, &axis1, 1, out);
    return rc;
}

/* An embedding of a feature's ids: a fixed input [N] or [N, k] gives
   each id's row ([N, E], [N, k, E]); a var one [N, K] (with its mask as
   the weights) is combined per example into [N, E]. A dynamic table maps
   the ids to its rows first. */
static int
s_embedding(s_graph_t *g, const zdist_layer_spec_t *l, char *out)
{
    cli_export_t *x = g->x;
    const s_val_t *v = s_in(g, l, 0);
    char table[CLI_EXPORT_NAME], row[CLI_EXPORT_NAME], rows[CLI_EXPORT_NAME], sum[CLI_EXPORT_NAME],
        scale[CLI_EXPORT_NAME];
    int rc;
    if (l->dynamic) {
        rc = cli_export_dynamic_rows(x, l, v->t, table, row);
    } else {
        const zdist_ckpt_var_t *t = cli_export_var(x, l->name, "embeddings", l->input_dim * l->output_dim);
        if (!t)
            return x->err->code;
        rc = cli_export_const(x, l->name, "embeddings", (const int64_t[]){l->input_dim, l->output_dim}, 2,
                              t->values, table);
        snprintf(row, sizeof row, "%s", v->t);
    }
    bool ragged = v->mask[0] != '\0';
    if (rc == 0)
        rc = cli_export_op(x, "Gather", (const char *const[]){table, row}, 2, NULL, 0, ragged ? rows : out);
    if (rc < 0 || !ragged)
        return rc;
    rc = cli_export_weighted_sum(x, l->name, v->mask, rows, sum);
    if (rc == 0 && l->combiner == ZDIST_COMBINER_SUM)
        return cli_export_op(x, "Identity", (const char *const[]){sum}, 1, NULL, 0, out);
    if (rc == 0)
        rc = cli_export_combiner_scale(x, l, v->mask, scale);
    return rc < 0 ? rc : cli_export_op(x, "Mul", (const char *const[]){sum, scale}, 2, NULL, 0, out);
}

/* Layer i into its value; its activation (dense, activation layers) after it unless fused into the output. */
static int
s_layer(s_graph_t *g, int i, bool fused)
{
    cli_export_t *x = g->x;
    const zdist_layer_spec_t *l = &g->spec->layers[i];
    char *out = g->vals[g->spec->num_inputs + i].t;
    const char *in[ZDIST_LAYER_MAX_INPUTS];
    for (int j = 0; j < l->ninputs; j++)
        in[j] = s_in(g, l, j)->t;
    zdist_onnx_attr_t axis1 = {"axis", ZDIST_ONNX_ATTR_INT, .i = 1}, last = {"axis", ZDIST_ONNX_ATTR_INT, .i = -1};
    int rc;
    switch (l->kind) {
    case ZDIST_LAYER_DENSE:
        rc = s_gemm(g, l, in[0], l->in.dims[0], l->units, out);
        break;
    case ZDIST_LAYER_ACTIVATION:
        rc = cli_export_op(x, "Identity", in, 1, NULL, 0, out);
        break;
    case ZDIST_LAYER_FLATTEN:
        rc = cli_export_op(x, "Flatten", in, 1, &axis1, 1, out);
        break;
    case ZDIST_LAYER_ADD:
        rc = cli_export_op(x, "Sum", in, l->ninputs, NULL, 0, out);
        break;
    case ZDIST_LAYER_CONCAT:
        rc = cli_export_op(x, "Concat", in, l->ninputs, &last, 1, out);
        break;
    case ZDIST_LAYER_DOT_INTERACTION:
        rc = s_dot_interaction(g, l, out);
        break;
    case ZDIST_LAYER_CROSS:
        rc = s_cross(g, l, out);
        break;
    case ZDIST_LAYER_EMBEDDING:
        rc = s_embedding(g, l, out);
        break;
    default:
        return zdist_error_set(x->err, -ENOTSUP, "model.layers '%s': this layer kind is not exported to ONNX", l->name);
    }
    if (rc < 0 || fused || (l->kind != ZDIST_LAYER_DENSE && l->kind != ZDIST_LAYER_ACTIVATION) ||
        l->activation == ZDIST_ACT_LINEAR)
        return rc;
    snprintf(x->cur, sizeof x->cur, "%s", out);
    rc = cli_export_activation(x, l->activation);
    snprintf(out, CLI_EXPORT_NAME, "%s", x->cur);
    return rc;
}

/* A hashing layer is refused before anything is read: ONNX has no
   FarmHash, and an approximation would score ids differently from zdist. */
static int
s_check_layers(cli_export_t *x, const zdist_model_spec_t *spec)
{
    for (int i = 0; i < spec->num_layers; i++)
        if (spec->layers[i].kind == ZDIST_LAYER_HASHING)
            return zdist_error_set(x->err, -ENOTSUP, "layer '%s': hashing (Keras's Hashing: FarmHash64 of the id's "
                                   "decimal text) has no ONNX operator, so the model is not exported; hash the ids "
                                   "before the model, or embed the raw ids with a dynamic table (\"dynamic\": {...}, "
                                   "no input_dim), which exports as an id->row map", spec->layers[i].name);
    return 0;
}

static int
s_export(cli_export_t *x, const zdist_model_spec_t *spec)
{
    if (s_check_layers(x, spec) < 0)
        return x->err->code;
    s_graph_t g = {.x = x, .spec = spec};
    g.vals = calloc((size_t)(spec->num_inputs + spec->num_layers), sizeof *g.vals);
    if (!g.vals)
        return zdist_error_set(x->err, -ENOMEM, "out of memory");
    int rc = s_inputs(&g);
    zdist_activation_t out_act = cli_export_output_activation(spec);
    const zdist_layer_spec_t *lastl = &spec->layers[spec->num_layers - 1];
    /* the output's softmax / sigmoid is the loss's (functional.c's "fused"): cli_export_finish applies it */
    bool fused = out_act != ZDIST_ACT_LINEAR && lastl->activation == out_act &&
                 (lastl->kind == ZDIST_LAYER_DENSE || lastl->kind == ZDIST_LAYER_ACTIVATION);
    for (int i = 0; rc == 0 && i < spec->num_layers; i++)
        rc = s_layer(&g, i, fused && i == spec->num_layers - 1);
    if (rc == 0) {
        snprintf(x->cur, sizeof x->cur, "%s", g.vals[spec->num_inputs + spec->num_layers - 1].t);
        x->rank = lastl->out.rank;
        x->nchw = false;
        rc = cli_export_finish(x, out_act, &lastl->out);
    }
    free(g.vals);
    return rc;
}

int
cli_export_graph(cli_export_t *x, const char *params_json)
{
    zdist_model_spec_t spec;
    int rc = zdist_model_graph_parse(params_json, &spec, x->err);
    if (rc == 0)
        rc = s_export(x, &spec);
    zdist_model_spec_release(&spec);
    return rc;
}
