/* Built-in model sequential: a Keras-like stack of layers from the job (zdist/model_spec.h) run on the layer library, under every strategy. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layers.h"
#include "models.h"
#include "zdist/model_spec.h"

/* Per-replica scratch slots (zdist_ctx_scratch): they grow to the largest
   batch seen and are reused, so steps allocate nothing. */
enum {
    S_SLOT_FLOATS = 0, /* activations, im2col, batch-norm state, the two gradient buffers */
    S_SLOT_GRADS,      /* the variables' gradients */
    S_SLOT_IDS,        /* embedding ids and per-example offsets */
    S_SLOT_ROWS,       /* embedding weights, rows and their gradients */
    S_SLOT_STEP,       /* this replica's training-step counter (dropout's seed) */
    S_SLOT_PARTS,      /* strategy tpu: split layers' parts, one per logical device */
    S_SLOT_KEYS,       /* dropout: each example's key this step */
    S_SLOT_PRED,       /* eval, binary: each example's probability */
};

#define S_ALIGN 16 /* floats: regions start on 64-byte boundaries */

typedef struct {
    const zdist_layer_spec_t *spec;
    layer_window_t win;             /* conv2d, pools */
    int64_t in_size, out_size;      /* elements per example */
    int64_t channels;               /* batch norm: the last axis */
    int kernel, bias;               /* dense, conv2d: variable handles (-1: none) */
    int gamma, beta, mean, var;     /* batch norm */
    int table;                      /* embedding */
    int64_t kernel_n, bias_n;       /* elements, for the gradient buffer */
    /* strategy tpu: a split layer's parts, part d on logical device d
       (conv2d: the output blocks and the input each reads; dense: units) */
    int nparts;
    layer_window_t pwin[ZDIST_MAX_LOGICAL_DEVICES];
    int64_t iy0[ZDIST_MAX_LOGICAL_DEVICES], ix0[ZDIST_MAX_LOGICAL_DEVICES];
    int64_t oy0[ZDIST_MAX_LOGICAL_DEVICES], ox0[ZDIST_MAX_LOGICAL_DEVICES];
} s_layer_t;

typedef struct {
    zdist_model_spec_t spec;
    s_layer_t layers[ZDIST_MODEL_MAX_LAYERS];
    int nl;
    uint64_t seed;
    bool fused;          /* the last activation (softmax / sigmoid) is part of the loss */
    bool dropout;        /* a dropout layer: training steps key every example */
    int64_t max_size;    /* largest per-example activation */
    int64_t grad_floats; /* all trainable variables */
} s_state_t;

/* Where a step's buffers are this step (offsets into the scratch slots). */
typedef struct {
    float *act[ZDIST_MODEL_MAX_LAYERS];  /* outputs (NULL: the input is reused) */
    float *aux[ZDIST_MODEL_MAX_LAYERS];  /* conv2d: im2col; batch norm: xhat; max pool: its argmax (bytes) */
    float *stats[ZDIST_MODEL_MAX_LAYERS]; /* batch norm: mean[c], var[c], sums[2c + 1], dsums[2c] */
    float *parts[ZDIST_MODEL_MAX_LAYERS]; /* split layers: their parts' buffers (s_part_floats each) */
    int64_t part_floats[ZDIST_MODEL_MAX_LAYERS];
    float *delta[2];
    float *grads;
    uint64_t *keys; /* dropout: the examples' keys (training) */
    /* embedding */
    int64_t *ids, *offsets;
    float *weights, *rows, *drows;
    int64_t lookups;
} s_plan_t;

static int64_t
s_round(int64_t n)
{
    return (n + S_ALIGN - 1) / S_ALIGN * S_ALIGN;
}

static int
s_init(const char *params_json, const zdist_model_info_t *info, void **ret_state, zdist_error_t *err)
{
    s_state_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    int rc = zdist_model_spec_parse(params_json, info->sparse, &s->spec, err);
    if (rc == 0)
        rc = zdist_model_spec_check_data(&s->spec, info->input_dim, info->num_classes, info->label_dtype, err);
    if (rc < 0) {
        zdist_model_spec_release(&s->spec);
        free(s);
        return rc;
    }
    s->nl = s->spec.num_layers;
    s->seed = info->seed;
    const zdist_layer_spec_t *last = &s->spec.layers[s->nl - 1];
    zdist_activation_t fin = last->kind == ZDIST_LAYER_DENSE || last->kind == ZDIST_LAYER_CONV2D ||
                                     last->kind == ZDIST_LAYER_ACTIVATION
                                 ? last->activation
                                 : ZDIST_ACT_LINEAR;
    s->fused = (s->spec.loss == ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY && fin == ZDIST_ACT_SOFTMAX) ||
               (s->spec.loss == ZDIST_LOSS_BINARY_CROSSENTROPY && fin == ZDIST_ACT_SIGMOID);
    s->max_size = 1;
    for (int i = 0; i < s->nl; i++) {
        s_layer_t *l = &s->layers[i];
        l->spec = &s->spec.layers[i];
        l->kernel = l->bias = l->gamma = l->beta = l->mean = l->var = l->table = -1;
        zdist_shape_num_elements(&l->spec->in, &l->in_size);
        zdist_shape_num_elements(&l->spec->out, &l->out_size);
        l->channels = l->spec->out.dims[l->spec->out.rank - 1];
        if (l->spec->kind == ZDIST_LAYER_CONV2D || l->spec->kind == ZDIST_LAYER_MAX_POOL2D ||
            l->spec->kind == ZDIST_LAYER_AVG_POOL2D)
            layer_window_from_spec(l->spec, &l->win);
        if (l->spec->num_split > 0) {
            l->nparts = l->spec->split[0] * l->spec->split[1];
            for (int d = 0; d < l->nparts && l->spec->kind == ZDIST_LAYER_CONV2D; d++)
                layer_window_part(&l->win, l->spec->split[0], l->spec->split[1], d / l->spec->split[1],
                                  d % l->spec->split[1], &l->pwin[d], &l->iy0[d], &l->ix0[d], &l->oy0[d], &l->ox0[d]);
        }
        if (l->spec->kind == ZDIST_LAYER_DROPOUT)
            s->dropout = true;
        if (l->out_size > s->max_size)
            s->max_size = l->out_size;
        if (i > 0 && l->in_size > s->max_size)
            s->max_size = l->in_size;
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
    free(s);
}

/* A binary classifier's eval step tells the host each example's probability
   (sigmoid of its logit), for the exact AUC over the test split. */
static int
s_add(zdist_model_builder_t *b, const char *layer, const char *what, zdist_shape_t shape, zdist_initializer_t init,
      bool trainable, int *ret, int64_t *ret_n, zdist_error_t *err)
{
    char name[ZDIST_LAYER_NAME_MAX + 32];
    snprintf(name, sizeof name, "%s/%s", layer, what);
    zdist_var_spec_t v = {.name = name, .dtype = ZDIST_DTYPE_FLOAT32, .shape = shape, .init = init,
                          .trainable = trainable};
    if (!trainable) {
        /* Keras's moving statistics: each replica's own, averaged when read across replicas. */
        v.synchronization = ZDIST_SYNC_ON_READ;
        v.aggregation = ZDIST_AGG_MEAN;
    }
    *ret = zdist_builder_add_variable(b, &v, err);
    if (ret_n)
        zdist_shape_num_elements(&shape, ret_n);
    return *ret < 0 ? *ret : 0;
}

static int
s_build(void *state, zdist_model_builder_t *b, zdist_error_t *err)
{
    s_state_t *s = state;
    const zdist_initializer_t glorot = {.kind = ZDIST_INIT_GLOROT_UNIFORM}, zeros = {.kind = ZDIST_INIT_ZEROS},
                              ones = {.kind = ZDIST_INIT_ONES},
                              uniform = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -0.05, .maxval = 0.05};
    int rc = 0;
    s->grad_floats = 0;
    for (int i = 0; i < s->nl && rc == 0; i++) {
        s_layer_t *l = &s->layers[i];
        const zdist_layer_spec_t *sp = l->spec;
        const char *nm = sp->name;
        int64_t in = sp->in.dims[sp->in.rank - 1], c = l->channels, n = 0;
        switch (sp->kind) {
        case ZDIST_LAYER_DENSE:
            rc = s_add(b, nm, "kernel", (zdist_shape_t){2, {in, sp->units}}, glorot, true, &l->kernel, &l->kernel_n,
                       err);
            if (rc == 0 && sp->use_bias)
                rc = s_add(b, nm, "bias", (zdist_shape_t){1, {sp->units}}, zeros, true, &l->bias, &l->bias_n, err);
            break;
        case ZDIST_LAYER_CONV2D:
            /* [kh, kw, in, filters]: Keras's layout, and glorot's fans over the receptive field */
            rc = s_add(b, nm, "kernel", (zdist_shape_t){4, {sp->kernel[0], sp->kernel[1], in, sp->filters}}, glorot,
                       true, &l->kernel, &l->kernel_n, err);
            if (rc == 0 && sp->use_bias)
                rc = s_add(b, nm, "bias", (zdist_shape_t){1, {sp->filters}}, zeros, true, &l->bias, &l->bias_n, err);
            break;
        case ZDIST_LAYER_BATCH_NORM:
            if (sp->scale)
                rc = s_add(b, nm, "gamma", (zdist_shape_t){1, {c}}, ones, true, &l->gamma, &n, err);
            s->grad_floats += s_round(n);
            n = 0;
            if (rc == 0 && sp->center)
                rc = s_add(b, nm, "beta", (zdist_shape_t){1, {c}}, zeros, true, &l->beta, &n, err);
            s->grad_floats += s_round(n);
            if (rc == 0)
                rc = s_add(b, nm, "moving_mean", (zdist_shape_t){1, {c}}, zeros, false, &l->mean, NULL, err);
            if (rc == 0)
                rc = s_add(b, nm, "moving_variance", (zdist_shape_t){1, {c}}, ones, false, &l->var, NULL, err);
            break;
        case ZDIST_LAYER_EMBEDDING:
            rc = model_add_embedding(b, sp, uniform, &l->table, err);
            break;
        default:
            break;
        }
        s->grad_floats += s_round(l->kernel_n) + s_round(l->bias_n);
    }
    return rc;
}

/* Floats of one part of split layer l for n examples: conv2d: its input
   block (then the input's gradient), im2col, its output block (then dy's),
   dw and db; dense: its share of dx (training). */
static int64_t
s_part_floats(const s_layer_t *l, int d, int64_t n, bool train)
{
    if (l->spec->kind == ZDIST_LAYER_DENSE)
        return train ? s_round(n * l->in_size) : 0;
    const layer_window_t *g = &l->pwin[d];
    return s_round(n * g->h * g->w * g->c) + s_round(layer_conv2d_cols(g, n)) + s_round(n * g->oh * g->ow * g->filters) +
           s_round(l->kernel_n) + s_round(g->filters);
}

/* Lays this step's buffers out in the scratch slots for n examples (nnz
   sparse features). -ENOMEM. */
static int
s_plan(const s_state_t *s, zdist_replica_ctx_t *ctx, int64_t n, int64_t nnz, bool train, s_plan_t *p)
{
    memset(p, 0, sizeof *p);
    int64_t floats = 0;
    int64_t act_off[ZDIST_MODEL_MAX_LAYERS], aux_off[ZDIST_MODEL_MAX_LAYERS], st_off[ZDIST_MODEL_MAX_LAYERS];
    for (int i = 0; i < s->nl; i++) {
        const s_layer_t *l = &s->layers[i];
        zdist_layer_kind_t k = l->spec->kind;
        act_off[i] = aux_off[i] = st_off[i] = -1;
        /* flatten reuses its input, except as the last layer: the loss
           writes its gradient over the output */
        if (k != ZDIST_LAYER_FLATTEN || i == s->nl - 1) {
            act_off[i] = floats;
            floats += s_round(n * l->out_size);
        }
        if (k == ZDIST_LAYER_CONV2D) {
            aux_off[i] = floats;
            floats += s_round(layer_conv2d_cols(&l->win, n));
        }
        if (k == ZDIST_LAYER_MAX_POOL2D && train && l->win.kh * l->win.kw <= LAYER_POOL_ARG_MAX) {
            aux_off[i] = floats;
            floats += s_round((n * l->out_size + 3) / 4);
        }
        if (k == ZDIST_LAYER_BATCH_NORM) {
            if (train) {
                aux_off[i] = floats;
                floats += s_round(n * l->out_size);
            }
            st_off[i] = floats;
            floats += s_round(6 * l->channels + 1);
        }
    }
    int64_t delta_off = floats;
    if (train)
        floats += 2 * s_round(n * s->max_size);
    float *f = zdist_ctx_scratch(ctx, S_SLOT_FLOATS, (size_t)(floats + 1) * sizeof(float));
    p->grads = train ? zdist_ctx_scratch(ctx, S_SLOT_GRADS, (size_t)(s->grad_floats + 1) * sizeof(float)) : NULL;
    if (!f || (train && !p->grads))
        return -ENOMEM;
    for (int i = 0; i < s->nl; i++) {
        p->act[i] = act_off[i] >= 0 ? f + act_off[i] : NULL;
        p->aux[i] = aux_off[i] >= 0 ? f + aux_off[i] : NULL;
        p->stats[i] = st_off[i] >= 0 ? f + st_off[i] : NULL;
    }
    if (train) {
        p->delta[0] = f + delta_off;
        p->delta[1] = f + delta_off + s_round(n * s->max_size);
    }
    int64_t parts = 0, part_off[ZDIST_MODEL_MAX_LAYERS];
    for (int i = 0; i < s->nl; i++) {
        const s_layer_t *l = &s->layers[i];
        part_off[i] = parts;
        p->part_floats[i] = 0;
        for (int d = 0; d < l->nparts; d++)
            p->part_floats[i] = s_part_floats(l, d, n, train) > p->part_floats[i] ? s_part_floats(l, d, n, train)
                                                                                  : p->part_floats[i];
        parts += p->part_floats[i] * l->nparts;
    }
    if (parts > 0) {
        float *pf = zdist_ctx_scratch(ctx, S_SLOT_PARTS, (size_t)(parts + 1) * sizeof(float));
        if (!pf)
            return -ENOMEM;
        for (int i = 0; i < s->nl; i++)
            p->parts[i] = s->layers[i].nparts > 0 ? pf + part_off[i] : NULL;
    }
    if (s->spec.sparse_input) {
        const s_layer_t *e = &s->layers[0];
        int64_t width = e->spec->output_dim;
        int64_t *ids = zdist_ctx_scratch(ctx, S_SLOT_IDS, (size_t)(nnz + n + 2) * sizeof(int64_t));
        float *rows = zdist_ctx_scratch(ctx, S_SLOT_ROWS, (size_t)(s_round(nnz) + 2 * s_round(nnz * width) + 1) *
                                                              sizeof(float));
        if (!ids || !rows)
            return -ENOMEM;
        p->ids = ids;
        p->offsets = ids + nnz + 1;
        p->weights = rows;
        p->rows = rows + s_round(nnz);
        p->drows = p->rows + s_round(nnz * width);
    }
    return 0;
}

/* Dropout's masks belong to the examples, not to the replicas: example e's
   mask in layer i at step t is drawn from the job's seed, t, i and e's key
   (its index in the global batch, its label and its features), so that one
   device and any number of replicas, local or on other workers, drop the
   same units of the same examples (TensorFlow makes no such promise; here
   a model with dropout trains under every strategy as on one device). The
   features keep workers apart where nothing else does (parameter_server:
   every worker is replica 0 at its own step count). */
static uint64_t
s_dropout_seed(const s_state_t *s, uint64_t step, int layer, uint64_t key)
{
    return s->seed * 0x9e3779b97f4a7c15ull ^ step * 0xbf58476d1ce4e5b9ull ^ (uint64_t)layer << 40 ^ key;
}

#define S_FNV_PRIME 0x100000001b3ull

static uint64_t
s_fnv_u32(uint64_t h, const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v); /* a float's bits, or an int32 label */
    return (h ^ v) * S_FNV_PRIME;
}

/* Fills keys[0..n) for this replica's examples: first is the global index
   of its first example (every replica's size, gathered in replica order). */
static int
s_example_keys(zdist_replica_ctx_t *ctx, const zdist_step_batch_t *batch, uint64_t *keys)
{
    int64_t n = batch->size, first = 0;
    int nrep = zdist_ctx_num_replicas(ctx), rid = zdist_ctx_replica_id(ctx);
    if (nrep > 1) {
        float size = (float)n;
        const float *sizes;
        zdist_shape_t shape = {1, {1}}, got;
        int rc = zdist_ctx_all_gather(ctx, &size, &shape, 0, &sizes, &got);
        if (rc < 0)
            return rc;
        /* a host whose gather does not span the sync group: the replica id keeps it apart */
        if (got.dims[0] == nrep)
            for (int q = 0; q < rid; q++)
                first += (int64_t)sizes[q];
        else
            first = (int64_t)rid << 32;
    }
    for (int64_t e = 0; e < n; e++) {
        uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)(first + e) * 0xc2b2ae3d27d4eb4full;
        if (batch->labels)
            h = s_fnv_u32(h, (const char *)batch->labels + 4 * e);
        if (batch->features) {
            for (int64_t k = 0; k < batch->dim; k++)
                h = s_fnv_u32(h, batch->features + e * batch->dim + k);
        } else if (batch->row_offsets) {
            for (int64_t j = batch->row_offsets[e]; j < batch->row_offsets[e + 1]; j++) {
                h = s_fnv_u32(h, batch->feature_values + j);
                h = (h ^ (uint64_t)batch->feature_ids[j]) * S_FNV_PRIME;
            }
        }
        keys[e] = h;
    }
    return 0;
}

/* Dropout on n examples of `size` units, each example with its own mask
   (the same call forward and backward). */
static void
s_dropout(const s_state_t *s, float *x, int64_t n, int64_t size, double rate, uint64_t step, int layer,
          const uint64_t *keys)
{
    for (int64_t e = 0; e < n; e++)
        layer_dropout(x + e * size, size, rate, s_dropout_seed(s, step, layer, keys[e]));
}

/* One pass's state, so that a layer can run on another logical device's
   thread (the replica's thread waits meanwhile). */
typedef struct {
    s_state_t *s;
    zdist_replica_ctx_t *ctx;
    const zdist_step_batch_t *batch;
    const float *const *w;
    s_plan_t *p;
    bool train;
    uint64_t step;
    int layer;
    const float *x; /* forward: the layer's input */
    /* backward */
    float *dy, *dx, *gp;
    zdist_grad_t *g;
    int ng;
} s_pass_t;

/* ---- split layers (strategy tpu): part d on logical device d, each calling
   the layer library's kernels on its sub-tensors ---- */

/* Part d's buffers (s_part_floats). */
typedef struct {
    float *x, *cols, *y, *dw, *db; /* conv2d */
    float *dx;                     /* dense */
} s_part_bufs_t;

static void
s_part_bufs(const s_pass_t *a, int d, s_part_bufs_t *b)
{
    const s_layer_t *l = &a->s->layers[a->layer];
    float *f = a->p->parts[a->layer] + a->p->part_floats[a->layer] * d;
    int64_t n = a->batch->size;
    memset(b, 0, sizeof *b);
    if (l->spec->kind == ZDIST_LAYER_DENSE) {
        b->dx = f;
        return;
    }
    const layer_window_t *g = &l->pwin[d];
    b->x = f;
    b->cols = b->x + s_round(n * g->h * g->w * g->c);
    b->y = b->cols + s_round(layer_conv2d_cols(g, n));
    b->dw = b->y + s_round(n * g->oh * g->ow * g->filters);
    b->db = b->dw + s_round(l->kernel_n);
}

static void
s_units(const s_layer_t *l, int d, int64_t *u0, int64_t *u1)
{
    *u0 = l->out_size * d / l->nparts;
    *u1 = l->out_size * (d + 1) / l->nparts;
}

static int
s_split_forward_part(void *arg, int d)
{
    const s_pass_t *a = arg;
    const s_layer_t *l = &a->s->layers[a->layer];
    const float *w = a->w[l->kernel], *b = l->bias >= 0 ? a->w[l->bias] : NULL;
    float *y = a->p->act[a->layer];
    int64_t n = a->batch->size;
    if (l->spec->kind == ZDIST_LAYER_DENSE) {
        int64_t u0, u1;
        s_units(l, d, &u0, &u1);
        layer_dense_forward_cols(a->x, n, l->in_size, l->out_size, u0, u1, w, b, y);
        return 0;
    }
    const layer_window_t *g = &l->pwin[d], *full = &l->win;
    if (g->oh == 0 || g->ow == 0)
        return 0;
    s_part_bufs_t pb;
    s_part_bufs(a, d, &pb);
    /* its input block with the halo rows / columns its windows read */
    layer_block(LAYER_BLOCK_GATHER, (float *)a->x, full->h, full->w, full->c, pb.x, n, l->iy0[d], g->h, l->ix0[d],
                g->w);
    layer_conv2d_forward(g, pb.x, n, w, b, pb.cols, pb.y);
    layer_block(LAYER_BLOCK_SCATTER, y, full->oh, full->ow, full->filters, pb.y, n, l->oy0[d], g->oh, l->ox0[d],
                g->ow);
    return 0;
}

static int
s_split_backward_part(void *arg, int d)
{
    const s_pass_t *a = arg;
    const s_layer_t *l = &a->s->layers[a->layer];
    const float *w = a->w[l->kernel];
    float *dw = a->gp, *db = l->bias >= 0 ? a->gp + s_round(l->kernel_n) : NULL;
    int64_t n = a->batch->size;
    s_part_bufs_t pb;
    s_part_bufs(a, d, &pb);
    if (l->spec->kind == ZDIST_LAYER_DENSE) {
        int64_t u0, u1;
        s_units(l, d, &u0, &u1);
        layer_dense_backward_cols(a->x, a->dy, n, l->in_size, l->out_size, u0, u1, w, dw, db,
                                  a->dx && u1 > u0 ? pb.dx : NULL);
        return 0;
    }
    const layer_window_t *g = &l->pwin[d], *full = &l->win;
    if (g->oh == 0 || g->ow == 0)
        return 0;
    layer_block(LAYER_BLOCK_GATHER, a->dy, full->oh, full->ow, full->filters, pb.y, n, l->oy0[d], g->oh, l->ox0[d],
                g->ow);
    layer_conv2d_backward(g, pb.y, n, w, pb.cols, pb.dw, db ? pb.db : NULL, a->dx ? pb.x : NULL);
    return 0;
}

/* Every part of the layer: part d on logical device d, or all of them on
   this thread where the host has fewer devices than parts (the sidecar
   evaluator's one_device copy of a tpu job's model): the same numbers. */
static int
s_run_parts(s_pass_t *a, zdist_device_fn fn)
{
    int nparts = a->s->layers[a->layer].nparts;
    if (zdist_ctx_num_logical_devices(a->ctx) == nparts)
        return zdist_ctx_run_on_logical_devices(a->ctx, -1, fn, a);
    for (int d = 0; d < nparts; d++) {
        int rc = fn(a, d);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int
s_split_forward(s_pass_t *a)
{
    return s_run_parts(a, s_split_forward_part);
}

/* The parts' gradients combined in part order: conv2d's dw and db summed and
   the input's gradient added up over the blocks (halos overlap); dense's
   shares of dx summed (dw and db were written in place, by columns). */
static int
s_split_backward(s_pass_t *a)
{
    int rc = s_run_parts(a, s_split_backward_part);
    if (rc < 0)
        return rc;
    const s_layer_t *l = &a->s->layers[a->layer];
    const layer_window_t *full = &l->win;
    int64_t n = a->batch->size;
    float *dw = a->gp, *db = l->bias >= 0 ? a->gp + s_round(l->kernel_n) : NULL;
    bool first = true;
    if (a->dx && l->spec->kind == ZDIST_LAYER_CONV2D)
        memset(a->dx, 0, (size_t)(n * l->in_size) * sizeof *a->dx);
    for (int d = 0; d < l->nparts; d++) {
        s_part_bufs_t pb;
        s_part_bufs(a, d, &pb);
        if (l->spec->kind == ZDIST_LAYER_DENSE) {
            int64_t u0, u1;
            s_units(l, d, &u0, &u1);
            if (!a->dx || u1 <= u0)
                continue;
            for (int64_t k = 0; k < n * l->in_size; k++)
                a->dx[k] = first ? pb.dx[k] : a->dx[k] + pb.dx[k];
            first = false;
            continue;
        }
        const layer_window_t *g = &l->pwin[d];
        if (g->oh == 0 || g->ow == 0)
            continue;
        for (int64_t k = 0; k < l->kernel_n; k++)
            dw[k] = first ? pb.dw[k] : dw[k] + pb.dw[k];
        for (int64_t k = 0; db && k < full->filters; k++)
            db[k] = first ? pb.db[k] : db[k] + pb.db[k];
        first = false;
        if (a->dx)
            layer_block(LAYER_BLOCK_ADD, a->dx, full->h, full->w, full->c, pb.x, n, l->iy0[d], g->h, l->ix0[d], g->w);
    }
    if (first && l->spec->kind == ZDIST_LAYER_CONV2D) {
        /* no part had outputs: nothing flows back */
        memset(dw, 0, (size_t)l->kernel_n * sizeof *dw);
        if (db)
            memset(db, 0, (size_t)full->filters * sizeof *db);
    }
    if (first && a->dx && l->spec->kind == ZDIST_LAYER_DENSE)
        memset(a->dx, 0, (size_t)(n * l->in_size) * sizeof *a->dx);
    return 0;
}

/* Layer a->layer's forward pass from a->x. */
static int
s_forward_layer(s_pass_t *a)
{
    s_state_t *s = a->s;
    s_plan_t *p = a->p;
    const float *const *w = a->w;
    const zdist_step_batch_t *batch = a->batch;
    const float *x = a->x;
    int i = a->layer, rc;
    int64_t n = batch->size;
    const s_layer_t *l = &s->layers[i];
    const zdist_layer_spec_t *sp = l->spec;
    float *y = p->act[i];
    bool last_fused = i == s->nl - 1 && s->fused;
    switch (sp->kind) {
    case ZDIST_LAYER_DENSE:
        if (l->nparts > 0 && (rc = s_split_forward(a)) < 0)
            return rc;
        if (l->nparts == 0)
            layer_dense_forward(x, n, l->in_size, l->out_size, w[l->kernel], l->bias >= 0 ? w[l->bias] : NULL, y);
        if (!last_fused)
            layer_act_forward(sp->activation, y, n, l->out_size);
        break;
    case ZDIST_LAYER_CONV2D:
        if (l->nparts > 0 && (rc = s_split_forward(a)) < 0)
            return rc;
        if (l->nparts == 0)
            layer_conv2d_forward(&l->win, x, n, w[l->kernel], l->bias >= 0 ? w[l->bias] : NULL, p->aux[i], y);
        if (!last_fused)
            layer_act_forward(sp->activation, y, n * l->out_size / l->channels, l->channels);
        break;
    case ZDIST_LAYER_MAX_POOL2D:
        if (p->aux[i])
            layer_max_pool_forward_arg(&l->win, x, n, y, (uint8_t *)p->aux[i]);
        else
            layer_max_pool_forward(&l->win, x, n, y);
        break;
    case ZDIST_LAYER_AVG_POOL2D:
        layer_avg_pool_forward(&l->win, x, n, y);
        break;
    case ZDIST_LAYER_FLATTEN:
        if (y)
            memcpy(y, x, (size_t)(n * l->out_size) * sizeof *y);
        else
            p->act[i] = (float *)x;
        break;
    case ZDIST_LAYER_DROPOUT:
        memcpy(y, x, (size_t)(n * l->out_size) * sizeof *y);
        if (a->train)
            s_dropout(s, y, n, l->out_size, sp->rate, a->step, i, p->keys);
        break;
    case ZDIST_LAYER_ACTIVATION:
        memcpy(y, x, (size_t)(n * l->out_size) * sizeof *y);
        if (!last_fused)
            layer_act_forward(sp->activation, y, n * l->out_size / l->channels, l->channels);
        break;
    case ZDIST_LAYER_BATCH_NORM: {
        int64_t c = l->channels, rows = n * l->out_size / c;
        float *mean = p->stats[i], *var = mean + c, *sums = var + c;
        const float *gamma = l->gamma >= 0 ? w[l->gamma] : NULL, *beta = l->beta >= 0 ? w[l->beta] : NULL;
        if (!a->train) {
            layer_bn_forward(x, rows, c, w[l->mean], w[l->var], sp->epsilon, gamma, beta, NULL, y);
            break;
        }
        /* The global batch's statistics: every replica's sums, all-reduced. */
        layer_bn_sums(x, rows, c, w[l->mean], sums);
        sums[2 * c] = (float)rows;
        float *bufs[1] = {sums};
        int64_t lens[1] = {2 * c + 1};
        if ((rc = zdist_ctx_all_reduce(a->ctx, ZDIST_REDUCE_SUM, bufs, lens, 1)) < 0)
            return rc;
        layer_bn_moments(sums, w[l->mean], c, sums[2 * c], mean, var);
        layer_bn_forward(x, rows, c, mean, var, sp->epsilon, gamma, beta, p->aux[i], y);
        break;
    }
    case ZDIST_LAYER_EMBEDDING: {
        int64_t width = sp->output_dim;
        p->lookups = n > 0 ? layer_embedding_lookups(batch->row_offsets, batch->feature_ids, batch->feature_values,
                                                     n, sp->first_id, sp->input_dim, p->ids, p->weights, p->offsets)
                           : 0;
        if (p->lookups > 0 && (rc = zdist_ctx_read_rows(a->ctx, l->table, p->ids, p->lookups, p->rows)) < 0)
            return rc;
        if (n > 0)
            layer_embedding_forward(p->rows, p->weights, p->offsets, n, width, sp->combiner, y);
        break;
    }
    case ZDIST_LAYER_CONCAT:
        layer_concat_forward(x, n, l->in_size, batch->row_offsets, batch->feature_ids, batch->feature_values,
                             sp->dense_features, y);
        break;
    default: /* functional models' layers: the sequential parse refuses them */
        break;
    }
    return 0;
}

static int
s_forward_on_device(void *arg, int device)
{
    (void)device;
    return s_forward_layer(arg);
}

/* A layer assigned to logical device d > 0 runs on its thread (TF's
   experimental_assign_to_logical_device): its input and output stay where
   they are, in the replica's memory, which every device reads. A host
   without that device runs it here. */
static int
s_on_device(s_pass_t *a, zdist_device_fn fn)
{
    int d = a->s->layers[a->layer].spec->logical_device;
    return d > 0 && d < zdist_ctx_num_logical_devices(a->ctx) ? zdist_ctx_run_on_logical_devices(a->ctx, d, fn, a)
                                                              : fn(a, 0);
}

/* The forward pass; *ret_out gets the last layer's output (logits when fused). */
static int
s_forward(s_state_t *s, zdist_replica_ctx_t *ctx, const zdist_step_batch_t *batch, const float *const *w,
          s_plan_t *p, bool train, uint64_t step, float **ret_out)
{
    s_pass_t a = {.s = s, .ctx = ctx, .batch = batch, .w = w, .p = p, .train = train, .step = step,
                  .x = batch->features};
    for (int i = 0; i < s->nl; i++) {
        a.layer = i;
        int rc = s_on_device(&a, s_forward_on_device);
        if (rc < 0)
            return rc;
        a.x = p->act[i];
    }
    *ret_out = p->act[s->nl - 1];
    return 0;
}

/* Layer a->layer's backward pass from a->dy into a->dx (NULL for the first
   layer; a->dx = a->dy when the layer works in place), its gradients
   appended at a->gp / a->g. */
static int
s_backward_layer(s_pass_t *a)
{
    s_state_t *s = a->s;
    s_plan_t *p = a->p;
    const float *const *w = a->w;
    const zdist_step_batch_t *batch = a->batch;
    int i = a->layer, rc;
    int64_t n = batch->size;
    const s_layer_t *l = &s->layers[i];
    const zdist_layer_spec_t *sp = l->spec;
    const float *x = a->x;
    float *dy = a->dy, *dx = a->dx, *gp = a->gp;
    zdist_grad_t *g = a->g;
    bool last_fused = i == s->nl - 1 && s->fused;
    switch (sp->kind) {
    case ZDIST_LAYER_DENSE:
    case ZDIST_LAYER_CONV2D: {
        float *dw = gp, *db = l->bias >= 0 ? gp + s_round(l->kernel_n) : NULL;
        if (!last_fused)
            layer_act_backward(sp->activation, p->act[i], dy, n * l->out_size / l->channels, l->channels);
        if (l->nparts > 0) {
            if ((rc = s_split_backward(a)) < 0)
                return rc;
        } else if (sp->kind == ZDIST_LAYER_DENSE) {
            layer_dense_backward(x, dy, n, l->in_size, l->out_size, w[l->kernel], dw, db, dx);
        } else {
            layer_conv2d_backward(&l->win, dy, n, w[l->kernel], p->aux[i], dw, db, dx);
        }
        a->gp += s_round(l->kernel_n) + s_round(l->bias_n);
        g[a->ng++] = (zdist_grad_t){.var = l->kernel, .values = dw};
        if (db)
            g[a->ng++] = (zdist_grad_t){.var = l->bias, .values = db};
        break;
    }
    case ZDIST_LAYER_MAX_POOL2D:
        if (dx && p->aux[i])
            layer_max_pool_backward_arg(&l->win, (const uint8_t *)p->aux[i], dy, n, dx);
        else if (dx)
            layer_max_pool_backward(&l->win, x, p->act[i], dy, n, dx);
        break;
    case ZDIST_LAYER_AVG_POOL2D:
        if (dx)
            layer_avg_pool_backward(&l->win, dy, n, dx);
        break;
    case ZDIST_LAYER_FLATTEN:
        a->dx = dy;
        break;
    case ZDIST_LAYER_DROPOUT:
        s_dropout(s, dy, n, l->out_size, sp->rate, a->step, i, p->keys);
        a->dx = dy;
        break;
    case ZDIST_LAYER_ACTIVATION:
        if (!last_fused)
            layer_act_backward(sp->activation, p->act[i], dy, n * l->out_size / l->channels, l->channels);
        a->dx = dy;
        break;
    case ZDIST_LAYER_BATCH_NORM: {
        int64_t c = l->channels, rows = n * l->out_size / c;
        float *var = p->stats[i] + c, *count = var + c + 2 * c, *dsums = count + 1;
        layer_bn_backward_sums(dy, p->aux[i], rows, c, dsums);
        /* gamma's and beta's gradients are this replica's sums (apply_gradients adds the replicas') */
        if (l->gamma >= 0) {
            memcpy(a->gp, dsums + c, (size_t)c * sizeof *a->gp);
            g[a->ng++] = (zdist_grad_t){.var = l->gamma, .values = a->gp};
            a->gp += s_round(c);
        }
        if (l->beta >= 0) {
            memcpy(a->gp, dsums, (size_t)c * sizeof *a->gp);
            g[a->ng++] = (zdist_grad_t){.var = l->beta, .values = a->gp};
            a->gp += s_round(c);
        }
        /* the input's gradient goes through the global batch's statistics */
        float *bufs[1] = {dsums};
        int64_t lens[1] = {2 * c};
        if ((rc = zdist_ctx_all_reduce(a->ctx, ZDIST_REDUCE_SUM, bufs, lens, 1)) < 0)
            return rc;
        if (dx)
            layer_bn_backward(dy, p->aux[i], rows, c, var, sp->epsilon, l->gamma >= 0 ? w[l->gamma] : NULL, dsums,
                              *count, dx);
        break;
    }
    case ZDIST_LAYER_EMBEDDING:
        if (n > 0)
            layer_embedding_backward(dy, p->weights, p->offsets, n, sp->output_dim, sp->combiner, p->drows);
        g[a->ng++] = (zdist_grad_t){.var = l->table, .values = p->drows, .ids = p->ids, .nids = p->lookups};
        break;
    case ZDIST_LAYER_CONCAT:
        if (dx) {
            layer_concat_backward(dy, n, l->in_size, sp->dense_features, dy);
            a->dx = dy;
        }
        break;
    default: /* functional models' layers: the sequential parse refuses them */
        break;
    }
    return 0;
}

static int
s_backward_on_device(void *arg, int device)
{
    (void)device;
    return s_backward_layer(arg);
}

/* The backward pass from dy (the loss's gradient, in the last output):
   the gradients land in p->grads; batch norm all-reduces its sums. */
static int
s_backward(s_state_t *s, zdist_replica_ctx_t *ctx, const zdist_step_batch_t *batch, const float *const *w,
           s_plan_t *p, uint64_t step, float *dy, zdist_grad_t *g, int *ret_ng)
{
    s_pass_t a = {.s = s, .ctx = ctx, .batch = batch, .w = w, .p = p, .train = true, .step = step,
                  .gp = p->grads, .g = g};
    for (int i = s->nl - 1; i >= 0; i--) {
        a.layer = i;
        a.x = i > 0 ? p->act[i - 1] : batch->features;
        a.dy = dy;
        /* dx: the delta buffer dy is not in (none for the first layer) */
        a.dx = i == 0 ? NULL : dy == p->delta[0] ? p->delta[1] : p->delta[0];
        int rc = s_on_device(&a, s_backward_on_device);
        if (rc < 0)
            return rc;
        dy = a.dx;
    }
    *ret_ng = a.ng;
    return 0;
}

static int
s_step(s_state_t *s, zdist_replica_ctx_t *ctx, bool train)
{
    const zdist_step_batch_t *batch;
    int rc = zdist_ctx_next_batch(ctx, &batch);
    if (rc <= 0)
        return rc;
    int64_t n = batch->size;
    bool sparse = s->spec.sparse_input;
    if (n > 0 && (sparse ? !batch->row_offsets : !batch->features)) {
        zdist_ctx_set_error(ctx, -EINVAL, sparse ? "sequential: the model's input is sparse, the batch is not"
                                                 : "sequential: the model's input is dense, the batch is not");
        return -EINVAL;
    }
    const float *w[4 * ZDIST_MODEL_MAX_LAYERS] = {0};
    for (int i = 0; i < s->nl; i++) {
        const s_layer_t *l = &s->layers[i];
        int vars[] = {l->kernel, l->bias, l->gamma, l->beta, l->mean, l->var};
        for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++)
            if (vars[v] >= 0 && (rc = zdist_ctx_read(ctx, vars[v], &w[vars[v]])) < 0)
                return rc;
    }
    s_plan_t p;
    if ((rc = s_plan(s, ctx, n, sparse && n > 0 ? batch->row_offsets[n] : 0, train, &p)) < 0)
        return rc;
    uint64_t *counter = train ? zdist_ctx_scratch(ctx, S_SLOT_STEP, sizeof(uint64_t)) : NULL;
    if (train && !counter)
        return -ENOMEM;
    uint64_t step = train ? (*counter)++ : 0;
    p.keys = NULL;
    if (train && s->dropout) {
        if (!(p.keys = zdist_ctx_scratch(ctx, S_SLOT_KEYS, (size_t)(n + 1) * sizeof *p.keys)))
            return -ENOMEM;
        if ((rc = s_example_keys(ctx, batch, p.keys)) < 0)
            return rc;
    }

    float *out;
    if ((rc = s_forward(s, ctx, batch, w, &p, train, step, &out)) < 0)
        return rc;
    int64_t units = s->layers[s->nl - 1].out_size;
    zdist_activation_t link = s->spec.loss == ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ? ZDIST_ACT_SOFTMAX
                              : s->spec.loss == ZDIST_LOSS_BINARY_CROSSENTROPY          ? ZDIST_ACT_SIGMOID
                                                                                        : ZDIST_ACT_LINEAR;
    if (!train && (rc = model_predictions_emit(ctx, out, n, units, link)) < 0)
        return rc;
    if (train) {
        /* The loss turns its input into the gradient: the last layer's
           output stays for its own backward pass (an activation's derivative). */
        memcpy(p.delta[0], out, (size_t)(n * units) * sizeof *out);
        out = p.delta[0];
    }
    double loss = 0;
    int64_t correct = 0;
    if (!train && (rc = model_predictions(ctx, S_SLOT_PRED, s->spec.loss, out, n)) < 0)
        return rc;
    if ((rc = model_loss(ctx, "sequential", s->spec.loss, out, units, batch, &loss, &correct)) < 0)
        return rc;

    if (train) {
        zdist_grad_t g[2 * ZDIST_MODEL_MAX_LAYERS];
        int ng = 0;
        /* an empty replica still applies (zero) gradients */
        if ((rc = s_backward(s, ctx, batch, w, &p, step, out, g, &ng)) < 0 ||
            (rc = zdist_ctx_apply_gradients(ctx, g, ng)) < 0)
            return rc;
        /* Keras's moving statistics, after the apply (reads stay valid until then):
           moving += (1 - momentum) * (batch - moving), each replica its own copy. */
        for (int i = 0; i < s->nl; i++) {
            const s_layer_t *l = &s->layers[i];
            if (l->spec->kind != ZDIST_LAYER_BATCH_NORM)
                continue;
            int64_t c = l->channels;
            float *mean = p.stats[i], *var = mean + c, *dsums = var + 3 * c + 1;
            float f = (float)(1 - l->spec->momentum);
            const float *mm, *mv;
            if ((rc = zdist_ctx_read(ctx, l->mean, &mm)) < 0 || (rc = zdist_ctx_read(ctx, l->var, &mv)) < 0)
                return rc;
            /* dsums is spent: it holds the two deltas */
            for (int64_t ch = 0; ch < c; ch++) {
                dsums[ch] = f * (mean[ch] - mm[ch]);
                dsums[c + ch] = f * (var[ch] - mv[ch]);
            }
            if ((rc = zdist_ctx_assign_add(ctx, l->mean, dsums)) < 0 ||
                (rc = zdist_ctx_assign_add(ctx, l->var, dsums + c)) < 0)
                return rc;
        }
    }
    return model_outputs(ctx, loss, batch->global_size, s->spec.loss == ZDIST_LOSS_MEAN_SQUARED_ERROR ? -1 : correct,
                         n);
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

const zdist_model_t worker_model_sequential = {
    .name = ZDIST_MODEL_SEQUENTIAL,
    .description = "Keras-like stack of layers from the job's model section (input_shape, layers, loss)",
    .init = s_init,
    .destroy = s_destroy,
    .build = s_build,
    .train_step = s_train_step,
    .eval_step = s_eval_step,
};
