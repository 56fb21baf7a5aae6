/* Built-in model functional: a Keras functional model from the job (named inputs over the batch's feature columns, a DAG of layers) on the layer library, under every strategy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layers.h"
#include "models.h"
#include "zdist/model_spec.h"

/* Per-replica scratch slots (zdist_ctx_scratch), grown to the largest step. */
enum {
    S_SLOT_FLOATS = 0, /* values, their gradients, cross's prod, embedding rows, the backward's temporaries */
    S_SLOT_INTS,       /* int64 inputs and hashings, embedding ids and bags */
    S_SLOT_GRADS,      /* the dense variables' gradients */
    S_SLOT_NODES,      /* this step's s_node_t per input and layer */
    S_SLOT_PRED,       /* eval, binary: each example's probability */
};

#define S_ALIGN 16 /* floats: regions start on 64-byte boundaries */
#define S_MAX_VARS (2 * ZDIST_GRAPH_MAX_LAYERS)

typedef struct {
    const zdist_layer_spec_t *spec;
    int64_t in_size, out_size; /* elements per example (input 0; output, fixed) */
    int kernel, bias, table;   /* variable handles (-1: none) */
    int64_t kernel_n, bias_n;
} s_layer_t;

typedef struct {
    zdist_model_spec_t spec;
    s_layer_t *layers;
    int nl, ni;
    bool fused;          /* the output's softmax / sigmoid is part of the loss */
    int64_t grad_floats; /* the dense variables' gradients */
} s_state_t;

/* One input's or layer's value this step: float32 [n, size] (f, and its
   gradient df when training), or int64 ids (fixed [n, size], or ragged
   by offsets[n + 1]); a layer's own buffers beside. */
typedef struct {
    float *f, *df;
    const int64_t *ids, *offsets;
    int64_t size, m;    /* per example (fixed); ids (ragged: offsets[n]) */
    float *prod;        /* cross */
    int64_t *eids, *eoffs; /* embedding: ids looked up, bags */
    float *ew, *rows, *drows;
    int64_t bags;
} s_node_t;

static int64_t
s_round(int64_t n)
{
    return (n + S_ALIGN - 1) / S_ALIGN * S_ALIGN;
}

/* The node of a layer's input reference. */
static int
s_ref(const s_state_t *s, int ref)
{
    return ref < 0 ? -1 - ref : s->ni + ref;
}

static int
s_init(const char *params_json, const zdist_model_info_t *info, void **ret_state, zdist_error_t *err)
{
    (void)info;
    s_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    int rc = zdist_model_graph_parse(params_json, &s->spec, err);
    if (rc == 0 && !(s->layers = calloc((size_t)s->spec.num_layers, sizeof *s->layers)))
        rc = -ENOMEM;
    if (rc < 0) {
        zdist_model_spec_release(&s->spec);
        free(s);
        return rc;
    }
    s->nl = s->spec.num_layers;
    s->ni = s->spec.num_inputs;
    const zdist_layer_spec_t *last = &s->spec.layers[s->nl - 1];
    zdist_activation_t fin = last->kind == ZDIST_LAYER_DENSE || last->kind == ZDIST_LAYER_ACTIVATION
                                 ? last->activation
                                 : ZDIST_ACT_LINEAR;
    s->fused = (s->spec.loss == ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY && fin == ZDIST_ACT_SOFTMAX) ||
               (s->spec.loss == ZDIST_LOSS_BINARY_CROSSENTROPY && fin == ZDIST_ACT_SIGMOID);
    for (int i = 0; i < s->nl; i++) {
        s_layer_t *l = &s->layers[i];
        l->spec = &s->spec.layers[i];
        l->kernel = l->bias = l->table = -1;
        zdist_shape_num_elements(&l->spec->in, &l->in_size);
        zdist_shape_num_elements(&l->spec->out, &l->out_size);
    }
    *ret_state = s;
    return 0;
}

static void
s_destroy(void *state)
{
    s_state_t *s = state;
    if (!s)
        return;
    zdist_model_spec_release(&s->spec);
    free(s->layers);
    free(s);
}

static int
s_add(zdist_model_builder_t *b, const char *layer, const char *what, zdist_shape_t shape, zdist_initializer_t init,
      int *ret, int64_t *ret_n, zdist_error_t *err)
{
    char name[ZDIST_LAYER_NAME_MAX + 32];
    snprintf(name, sizeof name, "%s/%s", layer, what);
    zdist_var_spec_t v = {.name = name, .dtype = ZDIST_DTYPE_FLOAT32, .shape = shape, .init = init, .trainable = true};
    *ret = zdist_builder_add_variable(b, &v, err);
    if (*ret >= S_MAX_VARS)
        return zdist_error_set(err, -EINVAL, "functional: more than %d variables", S_MAX_VARS);
    if (ret_n)
        zdist_shape_num_elements(&shape, ret_n);
    return *ret < 0 ? *ret : 0;
}

/* Keras's defaults: Dense glorot_uniform and zeros; TFRS's Cross
   truncated_normal (stddev 0.05) and zeros; Embedding uniform(-0.05, 0.05). */
static int
s_build(void *state, zdist_model_builder_t *b, zdist_error_t *err)
{
    s_state_t *s = state;
    const zdist_initializer_t glorot = {.kind = ZDIST_INIT_GLOROT_UNIFORM}, zeros = {.kind = ZDIST_INIT_ZEROS},
                              normal = {.kind = ZDIST_INIT_TRUNCATED_NORMAL, .stddev = 0.05},
                              uniform = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -0.05, .maxval = 0.05};
    int rc = 0;
    s->grad_floats = 0;
    for (int i = 0; i < s->nl && rc == 0; i++) {
        s_layer_t *l = &s->layers[i];
        const zdist_layer_spec_t *sp = l->spec;
        int64_t in = sp->in.rank > 0 ? sp->in.dims[sp->in.rank - 1] : 1;
        int64_t units = sp->kind == ZDIST_LAYER_DENSE ? sp->units : in;
        switch (sp->kind) {
        case ZDIST_LAYER_DENSE:
        case ZDIST_LAYER_CROSS:
            rc = s_add(b, sp->name, "kernel", (zdist_shape_t){2, {in, units}},
                       sp->kind == ZDIST_LAYER_DENSE ? glorot : normal, &l->kernel, &l->kernel_n, err);
            if (rc == 0 && sp->use_bias)
                rc = s_add(b, sp->name, "bias", (zdist_shape_t){1, {units}}, zeros, &l->bias, &l->bias_n, err);
            break;
        case ZDIST_LAYER_EMBEDDING:
            /* fixed, or dynamic (no input_dim): the ids as they are, rows on the psds */
            rc = model_add_embedding(b, sp, uniform, &l->table, err);
            if (rc == 0 && l->table >= S_MAX_VARS)
                rc = zdist_error_set(err, -EINVAL, "functional: more than %d variables", S_MAX_VARS);
            break;
        default:
            break;
        }
        s->grad_floats += s_round(l->kernel_n) + s_round(l->bias_n);
    }
    return rc;
}

/* ---- a step's buffers ---- */

/* Ids of a ragged node (its offsets known). */
static int64_t
s_ids_of(const s_node_t *v, int64_t n)
{
    return v->offsets ? v->offsets[n] : n * v->size;
}

/* Reads the inputs' columns: float32 groups copied into place, int64
   features read where they are (a group copied). -EINVAL naming the
   feature when the batch does not have it as the model reads it. */
static int
s_inputs(const s_state_t *s, zdist_replica_ctx_t *ctx, const zdist_step_batch_t *batch, s_node_t *nodes)
{
    int64_t n = batch->size;
    for (int k = 0; k < s->ni; k++) {
        const zdist_model_input_t *in = &s->spec.inputs[k];
        s_node_t *v = &nodes[k];
        int64_t off = 0;
        for (int j = 0; j < in->nfeatures; j++) {
            const zdist_step_column_t *c = zdist_step_batch_column(batch, in->features[j]);
            bool ok = c && c->dtype == in->dtype && (in->ragged ? c->row_offsets != NULL
                                                                : !c->row_offsets && c->width == in->widths[j]);
            if (!ok) {
                char msg[200];
                snprintf(msg, sizeof msg, "functional: input '%s' reads feature '%s' as %s; the batch %s", in->name,
                         in->features[j], in->ragged ? "a var feature" : "a fixed feature",
                         c ? "has it otherwise" : "does not have it");
                zdist_ctx_set_error(ctx, -EINVAL, msg);
                return -EINVAL;
            }
            size_t w = (size_t)in->widths[j];
            if (in->ragged || (in->dtype == ZDIST_DTYPE_INT64 && in->nfeatures == 1)) {
                v->ids = c->values;
                v->offsets = c->row_offsets;
            } else if (in->dtype == ZDIST_DTYPE_INT64) {
                for (int64_t e = 0; e < n; e++)
                    memcpy(v->eids + e * v->size + off, (const int64_t *)c->values + e * (int64_t)w, w * 8);
            } else {
                for (int64_t e = 0; e < n; e++)
                    memcpy(v->f + e * v->size + off, (const float *)c->values + e * (int64_t)w, w * 4);
            }
            off += (int64_t)w;
        }
    }
    return 0;
}

/* Lays this step's buffers out: with bases NULL it only counts (floats,
   ints); then again on the scratch. Ragged sizes come from the batch. */
static void
s_layout(const s_state_t *s, const zdist_step_batch_t *batch, bool train, s_node_t *nodes, float *fb, int64_t *ib,
         int64_t *ret_floats, int64_t *ret_ints)
{
    int64_t n = batch->size, fo = 0, io = 0, tmp = 0;
#define S_F(count) (fo += s_round(count), fb ? fb + fo - s_round(count) : NULL)
#define S_I(count) (io += s_round(count), ib ? ib + io - s_round(count) : NULL)
    for (int k = 0; k < s->ni; k++) {
        const zdist_model_input_t *in = &s->spec.inputs[k];
        s_node_t *v = &nodes[k];
        memset(v, 0, sizeof *v);
        zdist_shape_num_elements(&in->shape, &v->size);
        if (in->ragged) {
            const zdist_step_column_t *c = zdist_step_batch_column(batch, in->features[0]);
            v->offsets = c && c->row_offsets ? c->row_offsets : NULL;
        }
        if (in->dtype == ZDIST_DTYPE_FLOAT32)
            v->f = S_F(n * v->size);
        else if (in->nfeatures > 1)
            v->ids = v->eids = S_I(n * v->size);
    }
    for (int i = 0; i < s->nl; i++) {
        const s_layer_t *l = &s->layers[i];
        const zdist_layer_spec_t *sp = l->spec;
        s_node_t *v = &nodes[s->ni + i], *x = &nodes[s_ref(s, sp->inputs[0])];
        memset(v, 0, sizeof *v);
        v->size = l->out_size;
        int64_t in_total = 0;
        for (int j = 0; j < sp->ninputs; j++)
            in_total += nodes[s_ref(s, sp->inputs[j])].size;
        tmp = n * in_total > tmp ? n * in_total : tmp;
        if (sp->kind == ZDIST_LAYER_HASHING) {
            v->offsets = x->offsets;
            v->m = s_ids_of(x, n);
            v->ids = v->eids = S_I(v->m);
            continue;
        }
        v->f = S_F(n * v->size);
        v->df = train ? S_F(n * v->size) : NULL;
        if (sp->kind == ZDIST_LAYER_CROSS)
            v->prod = S_F(n * v->size);
        if (sp->kind == ZDIST_LAYER_EMBEDDING) {
            v->m = s_ids_of(x, n);
            v->bags = x->offsets ? n : n * x->size;
            v->eids = S_I(v->m);
            v->eoffs = S_I(v->bags + 1);
            v->ew = S_F(v->m);
            v->rows = S_F(v->m * sp->output_dim);
            v->drows = train ? S_F(v->m * sp->output_dim) : NULL;
        }
    }
    /* the backward's temporaries: every input's dx of the widest layer, and cross's dprod */
    nodes[s->ni + s->nl].f = train ? S_F(3 * tmp) : NULL;
#undef S_F
#undef S_I
    *ret_floats = fo;
    *ret_ints = io;
}

/* ---- forward and backward ---- */

typedef struct {
    const s_state_t *s;
    zdist_replica_ctx_t *ctx;
    int64_t n;
    bool train;
    const float *const *w;
    s_node_t *nodes;
    float *tmp;     /* the backward's temporaries */
    float *gp;      /* the next dense gradient's place */
    zdist_grad_t *g;
    int ng;
} s_pass_t;

static s_node_t *
s_in(const s_pass_t *a, const zdist_layer_spec_t *sp, int j)
{
    return &a->nodes[s_ref(a->s, sp->inputs[j])];
}

/* An embedding's ids (v->eids, bags in v->eoffs): how many, or -EINVAL
   naming the id outside a fixed range. */
static int64_t
s_embed_ids(s_pass_t *a, const s_layer_t *l, s_node_t *v, const s_node_t *x)
{
    const zdist_layer_spec_t *sp = l->spec;
    int64_t m = layer_embedding_ids(x->ids, x->offsets, a->n, x->size, sp->input_dim, v->eids, v->ew, v->eoffs);
    if (m < 0) {
        char msg[200];
        int64_t k = -1 - m;
        snprintf(msg, sizeof msg, "functional: %s: indices[%lld] = %lld is not in [0, %lld)", sp->name,
                 (long long)k, (long long)x->ids[k], (long long)sp->input_dim);
        zdist_ctx_set_error(a->ctx, -EINVAL, msg);
        return -EINVAL;
    }
    return m;
}

/* Before the forward: the hashings, every embedding's ids, then one read
   of every table's rows (zdist_ctx_read_rows_many: under parameter_server
   one exchange with the psds per step, not one per table). An embedding's
   input is ids (a feature or a hashing), so nothing here waits for the
   forward. */
static int
s_lookups(s_pass_t *a)
{
    int vars[ZDIST_GRAPH_MAX_LAYERS], k = 0;
    const int64_t *ids[ZDIST_GRAPH_MAX_LAYERS];
    int64_t counts[ZDIST_GRAPH_MAX_LAYERS];
    float *outs[ZDIST_GRAPH_MAX_LAYERS];
    for (int i = 0; i < a->s->nl; i++) {
        const s_layer_t *l = &a->s->layers[i];
        s_node_t *v = &a->nodes[a->s->ni + i], *x = s_in(a, l->spec, 0);
        if (l->spec->kind == ZDIST_LAYER_HASHING) {
            layer_hashing(x->ids, v->m, l->spec->num_bins, v->eids);
        } else if (l->spec->kind == ZDIST_LAYER_EMBEDDING) {
            int64_t m = s_embed_ids(a, l, v, x);
            if (m < 0)
                return (int)m;
            vars[k] = l->table;
            ids[k] = v->eids;
            counts[k] = m;
            outs[k++] = v->rows;
        }
    }
    return zdist_ctx_read_rows_many(a->ctx, k, vars, ids, counts, outs);
}

static int
s_forward_layer(s_pass_t *a, int i)
{
    const s_layer_t *l = &a->s->layers[i];
    const zdist_layer_spec_t *sp = l->spec;
    s_node_t *v = &a->nodes[a->s->ni + i], *x = s_in(a, sp, 0);
    int64_t n = a->n, last = sp->out.rank > 0 ? sp->out.dims[sp->out.rank - 1] : 1;
    bool act = !(i == a->s->nl - 1 && a->s->fused);
    const float *xs[ZDIST_LAYER_MAX_INPUTS];
    int64_t widths[ZDIST_LAYER_MAX_INPUTS];
    for (int j = 0; j < sp->ninputs; j++)
        xs[j] = s_in(a, sp, j)->f;
    switch (sp->kind) {
    case ZDIST_LAYER_DENSE:
        layer_dense_forward(x->f, n, l->in_size, l->out_size, a->w[l->kernel], l->bias >= 0 ? a->w[l->bias] : NULL,
                            v->f);
        if (act)
            layer_act_forward(sp->activation, v->f, n, l->out_size);
        break;
    case ZDIST_LAYER_ACTIVATION:
    case ZDIST_LAYER_FLATTEN:
        memcpy(v->f, x->f, (size_t)(n * v->size) * sizeof *v->f);
        if (act && sp->kind == ZDIST_LAYER_ACTIVATION)
            layer_act_forward(sp->activation, v->f, n * v->size / last, last);
        break;
    case ZDIST_LAYER_ADD:
        memcpy(v->f, x->f, (size_t)(n * v->size) * sizeof *v->f);
        for (int j = 1; j < sp->ninputs; j++)
            for (int64_t k = 0; k < n * v->size; k++)
                v->f[k] += xs[j][k];
        break;
    case ZDIST_LAYER_CONCAT:
        for (int j = 0; j < sp->ninputs; j++)
            widths[j] = s_in(a, sp, j)->size / (v->size / last);
        layer_concat_last_forward(xs, widths, sp->ninputs, n * (v->size / last), v->f);
        break;
    case ZDIST_LAYER_DOT_INTERACTION:
        layer_dot_interaction_forward(xs, sp->ninputs, n, x->size, sp->self_interaction, sp->skip_gather,
                                      sp->concat_dense, v->f);
        break;
    case ZDIST_LAYER_CROSS:
        layer_cross_forward(x->f, xs[sp->ninputs - 1], n, x->size, a->w[l->kernel],
                            l->bias >= 0 ? a->w[l->bias] : NULL, sp->diag_scale, v->prod, v->f);
        break;
    case ZDIST_LAYER_HASHING:
        break; /* s_lookups hashed */
    case ZDIST_LAYER_EMBEDDING:
        /* s_lookups read the rows; a fixed input's bags hold one id each: any combiner gives its row */
        layer_embedding_forward(v->rows, v->ew, v->eoffs, v->bags, sp->output_dim,
                                x->offsets ? sp->combiner : ZDIST_COMBINER_SUM, v->f);
        break;
    default:
        return -ENOTSUP; /* refused by the graph's parse */
    }
    return 0;
}

/* df of input j += g (count values): nothing for a model input. */
static void
s_acc(const s_pass_t *a, const zdist_layer_spec_t *sp, int j, const float *g, int64_t count)
{
    float *df = s_in(a, sp, j)->df;
    for (int64_t k = 0; df && k < count; k++)
        df[k] += g[k];
}

static int
s_backward_layer(s_pass_t *a, int i)
{
    const s_layer_t *l = &a->s->layers[i];
    const zdist_layer_spec_t *sp = l->spec;
    s_node_t *v = &a->nodes[a->s->ni + i], *x = s_in(a, sp, 0);
    int64_t n = a->n, last = sp->out.rank > 0 ? sp->out.dims[sp->out.rank - 1] : 1, d = x->size;
    bool act = !(i == a->s->nl - 1 && a->s->fused);
    float *dy = v->df, *dxs[ZDIST_LAYER_MAX_INPUTS];
    const float *xs[ZDIST_LAYER_MAX_INPUTS];
    int64_t widths[ZDIST_LAYER_MAX_INPUTS], off = 0;
    for (int j = 0; j < sp->ninputs; j++) {
        xs[j] = s_in(a, sp, j)->f;
        dxs[j] = a->tmp + off;
        off += n * s_in(a, sp, j)->size;
    }
    float *dw = a->gp, *db = l->bias >= 0 ? a->gp + s_round(l->kernel_n) : NULL;
    switch (sp->kind) {
    case ZDIST_LAYER_DENSE:
        if (act)
            layer_act_backward(sp->activation, v->f, dy, n, l->out_size);
        layer_dense_backward(x->f, dy, n, l->in_size, l->out_size, a->w[l->kernel], dw, db, x->df ? dxs[0] : NULL);
        s_acc(a, sp, 0, dxs[0], n * d);
        break;
    case ZDIST_LAYER_ACTIVATION:
        if (act)
            layer_act_backward(sp->activation, v->f, dy, n * v->size / last, last);
        s_acc(a, sp, 0, dy, n * d);
        break;
    case ZDIST_LAYER_FLATTEN:
    case ZDIST_LAYER_ADD:
        for (int j = 0; j < sp->ninputs; j++)
            s_acc(a, sp, j, dy, n * v->size);
        break;
    case ZDIST_LAYER_CONCAT:
        for (int j = 0; j < sp->ninputs; j++)
            widths[j] = s_in(a, sp, j)->size / (v->size / last);
        layer_concat_last_backward(dy, widths, sp->ninputs, n * (v->size / last), dxs);
        for (int j = 0; j < sp->ninputs; j++)
            s_acc(a, sp, j, dxs[j], n * s_in(a, sp, j)->size);
        break;
    case ZDIST_LAYER_DOT_INTERACTION:
        layer_dot_interaction_backward(xs, sp->ninputs, n, d, sp->self_interaction, sp->skip_gather,
                                       sp->concat_dense, dy, dxs);
        for (int j = 0; j < sp->ninputs; j++)
            s_acc(a, sp, j, dxs[j], n * d);
        break;
    case ZDIST_LAYER_CROSS: {
        /* one input is both x0 and x: its two gradients go to it in turn */
        float *dx = sp->ninputs == 2 ? dxs[1] : a->tmp + off, *dprod = dx + n * d;
        layer_cross_backward(x->f, xs[sp->ninputs - 1], v->prod, dy, n, d, a->w[l->kernel], sp->diag_scale, dprod,
                             dw, db, dxs[0], dx);
        s_acc(a, sp, 0, dxs[0], n * d);
        s_acc(a, sp, sp->ninputs - 1, dx, n * d);
        break;
    }
    case ZDIST_LAYER_EMBEDDING:
        layer_embedding_backward(dy, v->ew, v->eoffs, v->bags, sp->output_dim,
                                 x->offsets ? sp->combiner : ZDIST_COMBINER_SUM, v->drows);
        a->g[a->ng++] = (zdist_grad_t){.var = l->table, .values = v->drows, .ids = v->eids, .nids = v->m};
        return 0;
    default:
        return 0; /* hashing: no gradient */
    }
    if (l->kernel >= 0) {
        a->g[a->ng++] = (zdist_grad_t){.var = l->kernel, .values = dw};
        if (db)
            a->g[a->ng++] = (zdist_grad_t){.var = l->bias, .values = db};
        a->gp += s_round(l->kernel_n) + s_round(l->bias_n);
    }
    return 0;
}

/* ---- the step ---- */

/* Lays out and reads this step's inputs; *ret_nodes in scratch. */
static int
s_prepare(const s_state_t *s, zdist_replica_ctx_t *ctx, const zdist_step_batch_t *batch, bool train,
          s_node_t **ret_nodes)
{
    int nn = s->ni + s->nl + 1;
    s_node_t *nodes = zdist_ctx_scratch(ctx, S_SLOT_NODES, (size_t)nn * sizeof *nodes);
    if (!nodes)
        return -ENOMEM;
    int64_t nf, ni;
    s_layout(s, batch, train, nodes, NULL, NULL, &nf, &ni);
    float *fb = zdist_ctx_scratch(ctx, S_SLOT_FLOATS, (size_t)(nf + 1) * sizeof(float));
    int64_t *ib = zdist_ctx_scratch(ctx, S_SLOT_INTS, (size_t)(ni + 1) * sizeof(int64_t));
    if (!fb || !ib)
        return -ENOMEM;
    s_layout(s, batch, train, nodes, fb, ib, &nf, &ni);
    if (train)
        for (int i = 0; i < s->nl; i++)
            if (nodes[s->ni + i].df)
                memset(nodes[s->ni + i].df, 0, (size_t)(batch->size * nodes[s->ni + i].size) * sizeof(float));
    *ret_nodes = nodes;
    return s_inputs(s, ctx, batch, nodes);
}

static int
s_step(s_state_t *s, zdist_replica_ctx_t *ctx, bool train)
{
    const zdist_step_batch_t *batch;
    int rc = zdist_ctx_next_batch(ctx, &batch);
    if (rc <= 0)
        return rc;
    const float *w[S_MAX_VARS] = {0};
    for (int i = 0; i < s->nl; i++) {
        const s_layer_t *l = &s->layers[i];
        if ((l->kernel >= 0 && (rc = zdist_ctx_read(ctx, l->kernel, &w[l->kernel])) < 0) ||
            (l->bias >= 0 && (rc = zdist_ctx_read(ctx, l->bias, &w[l->bias])) < 0))
            return rc;
    }
    s_node_t *nodes;
    if ((rc = s_prepare(s, ctx, batch, train, &nodes)) < 0)
        return rc;
    s_pass_t a = {.s = s, .ctx = ctx, .n = batch->size, .train = train, .w = w, .nodes = nodes,
                  .tmp = nodes[s->ni + s->nl].f};
    if ((rc = s_lookups(&a)) < 0)
        return rc;
    for (int i = 0; i < s->nl; i++)
        if ((rc = s_forward_layer(&a, i)) < 0)
            return rc;
    s_node_t *out = &nodes[s->ni + s->nl - 1];
    float *pred = out->f;
    if (train) {
        /* the loss turns its input into the gradient, in the output's df */
        memcpy(out->df, out->f, (size_t)(a.n * out->size) * sizeof *out->df);
        pred = out->df;
    }
    /* zdist run --dump-predictions (zdist export's check): the loss's activation of the output */
    zdist_activation_t link = s->spec.loss == ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ? ZDIST_ACT_SOFTMAX
                              : s->spec.loss == ZDIST_LOSS_BINARY_CROSSENTROPY          ? ZDIST_ACT_SIGMOID
                                                                                        : ZDIST_ACT_LINEAR;
    if (!train && (rc = model_predictions_emit(ctx, out->f, a.n, out->size, link)) < 0)
        return rc;
    double loss = 0;
    int64_t correct = 0;
    if ((!train && (rc = model_predictions(ctx, S_SLOT_PRED, s->spec.loss, pred, a.n)) < 0) ||
        (rc = model_loss(ctx, "functional", s->spec.loss, pred, out->size, batch, &loss, &correct)) < 0)
        return rc;
    if (train) {
        zdist_grad_t g[S_MAX_VARS];
        if (!(a.gp = zdist_ctx_scratch(ctx, S_SLOT_GRADS, (size_t)(s->grad_floats + 1) * sizeof(float))))
            return -ENOMEM;
        a.g = g;
        /* an empty replica still applies (zero) gradients */
        for (int i = s->nl - 1; i >= 0; i--)
            if ((rc = s_backward_layer(&a, i)) < 0)
                return rc;
        if ((rc = zdist_ctx_apply_gradients(ctx, g, a.ng)) < 0)
            return rc;
    }
    return model_outputs(ctx, loss, batch->global_size, s->spec.loss == ZDIST_LOSS_MEAN_SQUARED_ERROR ? -1 : correct,
                         a.n);
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

const zdist_model_t worker_model_functional = {
    .name = ZDIST_MODEL_FUNCTIONAL,
    .description = "Keras-like functional model from the job's model section (inputs over the dataset's "
                   "features, named layers, output, loss)",
    .init = s_init,
    .destroy = s_destroy,
    .build = s_build,
    .train_step = s_train_step,
    .eval_step = s_eval_step,
};
