/* CUnit suite: the layer library — finite-difference checks of every layer's and loss's backward pass over several shapes, strides and paddings. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layers.h"
#include "testutil.h"
#include "zdist/embedding.h"

static uint64_t s_rng = 0x2545f4914f6cdd1dull;
static double
s_uniform(void)
{
    return zdist_test_uniform(&s_rng);
}

static float *
s_random(int64_t n, double lo, double hi)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(lo + (hi - lo) * s_uniform());
    return p;
}

static double
s_dot(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* The scalar a check differentiates: L = sum(output * R) for a fixed random R. */
typedef double (*s_loss_fn)(void *arg);

/* Central differences of f over every element of p (a sample of big
   arrays) against the analytic gradient; the worst relative error. */
static double
s_fd(s_loss_fn f, void *arg, float *p, const float *analytic, int64_t n, double eps, const char *what)
{
    double worst = 0;
    for (int64_t j = 0; j < n; j += n > 80 ? n / 60 + 1 : 1) {
        float keep = p[j];
        p[j] = keep + (float)eps;
        double lp = f(arg);
        p[j] = keep - (float)eps;
        double lm = f(arg);
        p[j] = keep;
        double h = (double)(keep + (float)eps) - (double)(keep - (float)eps);
        double fd = (lp - lm) / h, an = analytic[j];
        double rel = fabs(fd - an) / (fabs(fd) + fabs(an) + 1e-3);
        if (rel > worst)
            worst = rel;
        if (rel > 1e-2)
            fprintf(stderr, "\n  %s[%lld]: finite difference %.6g, gradient %.6g", what, (long long)j, fd, an);
    }
    return worst;
}

/* ---- dense + activations ---- */

typedef struct {
    int64_t n, in, out;
    zdist_activation_t act;
    float *x, *w, *b, *r, *y;
} s_dense_t;

static double
s_dense_loss(void *arg)
{
    s_dense_t *t = arg;
    layer_dense_forward(t->x, t->n, t->in, t->out, t->w, t->b, t->y);
    layer_act_forward(t->act, t->y, t->n, t->out);
    return s_dot(t->y, t->r, t->n * t->out);
}

static void
test_dense_activations(void)
{
    for (int act = ZDIST_ACT_LINEAR; act <= ZDIST_ACT_SOFTMAX; act++) {
        s_dense_t t = {.n = 4, .in = 5, .out = 3, .act = (zdist_activation_t)act};
        t.x = s_random(t.n * t.in, -1, 1);
        t.w = s_random(t.in * t.out, -1, 1);
        t.b = s_random(t.out, -0.5, 0.5);
        t.r = s_random(t.n * t.out, -1, 1);
        t.y = malloc((size_t)(t.n * t.out) * sizeof(float));
        float *dy = malloc((size_t)(t.n * t.out) * sizeof(float)), *dw = malloc((size_t)(t.in * t.out) * sizeof(float));
        float db[3], *dx = malloc((size_t)(t.n * t.in) * sizeof(float));
        s_dense_loss(&t);
        memcpy(dy, t.r, (size_t)(t.n * t.out) * sizeof *dy);
        layer_act_backward(t.act, t.y, dy, t.n, t.out);
        layer_dense_backward(t.x, dy, t.n, t.in, t.out, t.w, dw, db, dx);
        char what[64];
        snprintf(what, sizeof what, "dense+%s", zdist_activation_name(t.act));
        double eps = act == ZDIST_ACT_RELU ? 1e-3 : 1e-2;
        CU_ASSERT(s_fd(s_dense_loss, &t, t.x, dx, t.n * t.in, eps, what) < 1e-2);
        CU_ASSERT(s_fd(s_dense_loss, &t, t.w, dw, t.in * t.out, eps, what) < 1e-2);
        CU_ASSERT(s_fd(s_dense_loss, &t, t.b, db, t.out, eps, what) < 1e-2);
        free(t.x), free(t.w), free(t.b), free(t.r), free(t.y), free(dy), free(dw), free(dx);
    }
}

/* ---- conv2d and pools: geometry from the spec, as the model gets it ---- */

static void
s_layer0(const char *layer_json, const char *input_shape, zdist_layer_spec_t *ret)
{
    char text[512];
    snprintf(text, sizeof text, "{\"input_shape\": %s, \"layers\": [%s, \"flatten\", {\"dense\": {\"units\": 1}}], "
             "\"loss\": \"mean_squared_error\"}", input_shape, layer_json);
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    int rc = zdist_model_spec_parse(text, false, &spec, &err);
    if (rc < 0)
        fprintf(stderr, "\n  %s: %s", text, err.text);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    *ret = spec.layers[0];
    zdist_model_spec_release(&spec);
}

typedef struct {
    layer_window_t g;
    int64_t n;
    bool bias;
    float *x, *w, *b, *r, *y, *cols;
    int kind; /* 0 conv, 1 max pool, 2 avg pool */
    int path; /* conv: 0 the one layer_conv2d_forward picks, 1 GEMM, 2 direct, 3 Winograd */
} s_win_t;

static void
s_conv_forward(const s_win_t *t)
{
    const float *b = t->bias ? t->b : NULL;
    if (t->path == 1)
        layer_conv2d_gemm_forward(&t->g, t->x, t->n, t->w, b, t->cols, t->y);
    else if (t->path == 2)
        layer_conv2d_direct_forward(&t->g, t->x, t->n, t->w, b, t->cols, t->y);
    else if (t->path == 3)
        layer_conv2d_winograd_forward(&t->g, t->x, t->n, t->w, b, t->cols, t->y);
    else
        layer_conv2d_forward(&t->g, t->x, t->n, t->w, b, t->cols, t->y);
}

static void
s_conv_backward(const s_win_t *t, float *dw, float *db, float *dx)
{
    if (t->path == 1)
        layer_conv2d_gemm_backward(&t->g, t->r, t->n, t->w, t->cols, dw, db, dx);
    else if (t->path == 2)
        layer_conv2d_direct_backward(&t->g, t->r, t->n, t->w, t->cols, dw, db, dx);
    else if (t->path == 3)
        layer_conv2d_winograd_backward(&t->g, t->r, t->n, t->w, t->cols, dw, db, dx);
    else
        layer_conv2d_backward(&t->g, t->r, t->n, t->w, t->cols, dw, db, dx);
}

/* Scratch for either path. */
static int64_t
s_cols_floats(const layer_window_t *g, int64_t n)
{
    int64_t gemm = n * g->oh * g->ow * g->kh * g->kw * g->c, direct = layer_conv2d_direct_floats(g, n);
    return (gemm > direct ? gemm : direct) + 1;
}

static int64_t s_in_size(const s_win_t *t) { return t->n * t->g.h * t->g.w * t->g.c; }
static int64_t
s_out_size(const s_win_t *t)
{
    return t->n * t->g.oh * t->g.ow * (t->kind == 0 ? t->g.filters : t->g.c);
}

static double
s_win_loss(void *arg)
{
    s_win_t *t = arg;
    if (t->kind == 0)
        s_conv_forward(t);
    else if (t->kind == 1)
        layer_max_pool_forward(&t->g, t->x, t->n, t->y);
    else
        layer_avg_pool_forward(&t->g, t->x, t->n, t->y);
    return s_dot(t->y, t->r, s_out_size(t));
}

static void
s_check_window_path(int kind, const char *layer_json, const char *input_shape, int64_t n, int path)
{
    zdist_layer_spec_t l;
    s_layer0(layer_json, input_shape, &l);
    s_win_t t = {.n = n, .kind = kind, .bias = l.use_bias, .path = path};
    layer_window_from_spec(&l, &t.g);
    CU_ASSERT_EQUAL(t.g.oh, l.out.dims[0]);
    int64_t nin = s_in_size(&t), nout = s_out_size(&t), nw = t.g.kh * t.g.kw * t.g.c * t.g.filters;
    CU_ASSERT_EQUAL(nout, n * l.out.dims[0] * l.out.dims[1] * l.out.dims[2]);
    t.x = s_random(nin, -1, 1);
    t.w = s_random(nw, -1, 1);
    t.b = s_random(t.g.filters, -0.5, 0.5);
    t.r = s_random(nout, -1, 1);
    t.y = malloc((size_t)nout * sizeof(float));
    t.cols = malloc((size_t)s_cols_floats(&t.g, n) * sizeof(float));
    CU_ASSERT(layer_conv2d_cols(&t.g, n) < s_cols_floats(&t.g, n));
    float *dx = malloc((size_t)nin * sizeof(float)), *dw = malloc((size_t)(nw + 1) * sizeof(float));
    float *db = malloc((size_t)(t.g.filters + 1) * sizeof(float));
    s_win_loss(&t);
    if (kind == 0)
        s_conv_backward(&t, dw, t.bias ? db : NULL, dx);
    else if (kind == 1)
        layer_max_pool_backward(&t.g, t.x, t.y, t.r, n, dx);
    else
        layer_avg_pool_backward(&t.g, t.r, n, dx);
    char what[300];
    snprintf(what, sizeof what, "%s on %s%s", layer_json, input_shape,
             kind ? "" : path == 1 ? " (GEMM)" : path == 2 ? " (direct)" : path == 3 ? " (Winograd)" : "");
    double eps = kind == 1 ? 1e-3 : 1e-2;
    CU_ASSERT(s_fd(s_win_loss, &t, t.x, dx, nin, eps, what) < 1e-2);
    if (kind == 1) { /* the argmax kept: the same outputs, the same input gradient to the bit */
        uint8_t *arg = malloc((size_t)nout);
        float *y2 = malloc((size_t)nout * sizeof(float)), *dx2 = malloc((size_t)nin * sizeof(float));
        s_win_loss(&t);
        layer_max_pool_forward_arg(&t.g, t.x, n, y2, arg);
        layer_max_pool_backward_arg(&t.g, arg, t.r, n, dx2);
        CU_ASSERT_EQUAL(memcmp(t.y, y2, (size_t)nout * sizeof(float)), 0);
        CU_ASSERT_EQUAL(memcmp(dx, dx2, (size_t)nin * sizeof(float)), 0);
        free(arg), free(y2), free(dx2);
    }
    if (kind == 0) {
        CU_ASSERT(s_fd(s_win_loss, &t, t.w, dw, nw, eps, what) < 1e-2);
        if (t.bias)
            CU_ASSERT(s_fd(s_win_loss, &t, t.b, db, t.g.filters, eps, what) < 1e-2);
        /* without dx the parameters' gradients are the same */
        float *dw2 = malloc((size_t)(nw + 1) * sizeof(float));
        s_win_loss(&t);
        s_conv_backward(&t, dw2, NULL, NULL);
        CU_ASSERT_EQUAL(memcmp(dw, dw2, (size_t)nw * sizeof(float)), 0);
        free(dw2);
    }
    free(t.x), free(t.w), free(t.b), free(t.r), free(t.y), free(t.cols), free(dx), free(dw), free(db);
}

/* A pool, or a conv2d through the path layer_conv2d_forward picks and through both paths, and through
   Winograd's for a 3x3 stride-1 window (on data of its own draw: the later checks keep theirs). */
static void
s_check_window(int kind, const char *layer_json, const char *input_shape, int64_t n)
{
    for (int path = 0; path <= (kind == 0 ? 2 : 0); path++)
        s_check_window_path(kind, layer_json, input_shape, n, path);
    zdist_layer_spec_t l;
    s_layer0(layer_json, input_shape, &l);
    if (kind == 0 && l.kernel[0] == 3 && l.kernel[1] == 3 && l.strides[0] == 1 && l.strides[1] == 1) {
        uint64_t keep = s_rng;
        s_check_window_path(kind, layer_json, input_shape, n, 3);
        s_rng = keep;
    }
}

/* A conv2d's window and its input, output and kernel sizes for n examples. */
static void
s_conv_geometry(const char *layer_json, const char *input_shape, int64_t n, layer_window_t *g, int64_t *nin,
                int64_t *nout, int64_t *nw)
{
    zdist_layer_spec_t l;
    s_layer0(layer_json, input_shape, &l);
    layer_window_from_spec(&l, g);
    *nin = n * g->h * g->w * g->c;
    *nout = n * g->oh * g->ow * g->filters;
    *nw = g->kh * g->kw * g->c * g->filters;
}

/* The direct path and Winograd's compute the outputs and gradients the GEMM path does (float rounding
   apart). */
static void
s_check_paths(const char *layer_json, const char *input_shape, int64_t n)
{
    layer_window_t g;
    int64_t nin, nout, nw;
    s_conv_geometry(layer_json, input_shape, n, &g, &nin, &nout, &nw);
    float *x = s_random(nin, -1, 1), *w = s_random(nw, -1, 1), *b = s_random(g.filters, -1, 1);
    float *dy = s_random(nout, -1, 1), *res[3][4];
    void (*fwd[3])(const layer_window_t *, const float *, int64_t, const float *, const float *, float *, float *) = {
        layer_conv2d_gemm_forward, layer_conv2d_direct_forward, layer_conv2d_winograd_forward};
    void (*bwd[3])(const layer_window_t *, const float *, int64_t, const float *, float *, float *, float *,
                   float *) = {layer_conv2d_gemm_backward, layer_conv2d_direct_backward,
                               layer_conv2d_winograd_backward};
    for (int p = 0; p < 3; p++) {
        float *cols = malloc((size_t)s_cols_floats(&g, n) * sizeof(float));
        res[p][0] = malloc((size_t)nout * sizeof(float));
        res[p][1] = malloc((size_t)nw * sizeof(float));
        res[p][2] = malloc((size_t)g.filters * sizeof(float));
        res[p][3] = malloc((size_t)nin * sizeof(float));
        fwd[p](&g, x, n, w, b, cols, res[p][0]);
        bwd[p](&g, dy, n, w, cols, res[p][1], res[p][2], res[p][3]);
        free(cols);
    }
    int64_t len[4] = {nout, nw, g.filters, nin};
    for (int k = 0; k < 4; k++) {
        for (int p = 1; p < 3; p++) {
            double worst = 0;
            for (int64_t i = 0; i < len[k]; i++) {
                double d = fabs((double)res[0][k][i] - res[p][k][i]) / (fabs(res[0][k][i]) + 1.0);
                worst = d > worst ? d : worst;
            }
            if (worst > 1e-4)
                fprintf(stderr, "\n  %s on %s: GEMM and %s differ by %.3g in result %d", layer_json, input_shape,
                        p == 1 ? "direct" : "Winograd", worst, k);
            CU_ASSERT(worst <= 1e-4);
        }
        free(res[0][k]), free(res[1][k]), free(res[2][k]);
    }
    free(x), free(w), free(b), free(dy);
}

static void
test_conv2d(void)
{
    /* the shapes a user writes for images with few channels: 16, 24 (16 + 8) and 12 filters */
    s_check_window(0, "{\"conv2d\": {\"filters\": 16, \"kernel\": 5, \"padding\": \"same\"}}", "[9, 8, 1]", 3);
    s_check_window(0, "{\"conv2d\": {\"filters\": 24, \"kernel\": 3, \"strides\": 2, \"padding\": \"same\"}}",
                   "[8, 9, 3]", 2);
    s_check_window(0, "{\"conv2d\": {\"filters\": 12, \"kernel\": 5, \"strides\": 2}}", "[11, 12, 2]", 2);
    s_check_window(0, "{\"conv2d\": {\"filters\": 32, \"kernel\": 3, \"use_bias\": false}}", "[7, 9, 4]", 2);
    s_check_paths("{\"conv2d\": {\"filters\": 16, \"kernel\": 5, \"padding\": \"same\"}}", "[28, 28, 1]", 5);
    s_check_paths("{\"conv2d\": {\"filters\": 40, \"kernel\": 3, \"strides\": 2, \"padding\": \"same\"}}",
                  "[15, 14, 3]", 3);
    s_check_paths("{\"conv2d\": {\"filters\": 8, \"kernel\": [4, 2], \"strides\": [1, 3]}}", "[10, 13, 2]", 4);
    s_check_window(0, "{\"conv2d\": {\"filters\": 3, \"kernel\": 3}}", "[5, 5, 2]", 2);
    s_check_window(0, "{\"conv2d\": {\"filters\": 2, \"kernel\": [3, 2], \"strides\": [2, 1], \"padding\": \"same\"}}",
                   "[6, 5, 3]", 3);
    s_check_window(0, "{\"conv2d\": {\"filters\": 4, \"kernel\": 5, \"strides\": 2, \"padding\": \"same\", "
                      "\"use_bias\": false}}", "[7, 7, 1]", 2);
    s_check_window(0, "{\"conv2d\": {\"filters\": 2, \"kernel\": [1, 3], \"strides\": [1, 2]}}", "[4, 6, 2]", 2);
    s_check_window(0, "{\"conv2d\": {\"filters\": 3, \"kernel\": 4, \"strides\": 3, \"padding\": \"same\"}}",
                   "[8, 9, 2]", 1);
    /* 8 input channels or more: the direct path's input gradient as a convolution of dy with the kernel
       turned around, over strides, paddings and windows wider than tall (from a generator of their own:
       the later tests keep their data, chosen free of near ties) */
    uint64_t keep = s_rng;
    s_rng = 0x9e3779b97f4a7c15ull;
    s_check_window(0, "{\"conv2d\": {\"filters\": 24, \"kernel\": 3}}", "[7, 6, 16]", 2);
    s_check_window(0, "{\"conv2d\": {\"filters\": 16, \"kernel\": 3, \"strides\": 2, \"padding\": \"same\"}}",
                   "[8, 9, 8]", 1);
    s_check_window(0, "{\"conv2d\": {\"filters\": 16, \"kernel\": 5, \"padding\": \"same\"}}", "[6, 7, 8]", 1);
    s_check_window(0, "{\"conv2d\": {\"filters\": 8, \"kernel\": [3, 2], \"strides\": [2, 3]}}", "[9, 8, 20]", 2);
    s_check_window(0, "{\"conv2d\": {\"filters\": 40, \"kernel\": 2, \"strides\": 2, \"padding\": \"same\", "
                      "\"use_bias\": false}}", "[4, 6, 8]", 1);
    /* Winograd's tiles: odd outputs (tiles half outside), padding, channels and filters not a multiple of 8 */
    s_check_window(0, "{\"conv2d\": {\"filters\": 9, \"kernel\": 3, \"padding\": \"same\"}}", "[5, 6, 11]", 2);
    s_check_window(0, "{\"conv2d\": {\"filters\": 17, \"kernel\": 3, \"use_bias\": false}}", "[6, 7, 8]", 1);
    /* bigger layers against the GEMM path (finite differences of their large sums drown in rounding) */
    s_check_paths("{\"conv2d\": {\"filters\": 40, \"kernel\": 4, \"strides\": 3, \"padding\": \"same\"}}",
                  "[8, 7, 9]", 2);
    s_check_paths("{\"conv2d\": {\"filters\": 64, \"kernel\": 3}}", "[13, 13, 32]", 2);
    s_check_paths("{\"conv2d\": {\"filters\": 24, \"kernel\": 3}}", "[14, 14, 16]", 3);
    s_check_paths("{\"conv2d\": {\"filters\": 33, \"kernel\": 3, \"padding\": \"same\"}}", "[9, 12, 40]", 2);
    s_check_paths("{\"conv2d\": {\"filters\": 24, \"kernel\": 3, \"strides\": 2, \"padding\": \"same\"}}",
                  "[14, 14, 16]", 3);
    s_rng = keep;
}

/* A conv2d split into hp x wp parts, each through the whole-layer kernels on
   its input block (halo included): the output, dw and db summed and dx
   added up over the blocks equal the whole layer's. */
static void
s_check_split(const char *layer_json, const char *input_shape, int64_t n, int hp, int wp)
{
    layer_window_t g;
    int64_t nin, nout, nw;
    s_conv_geometry(layer_json, input_shape, n, &g, &nin, &nout, &nw);
    float *x = s_random(nin, -1, 1), *w = s_random(nw, -1, 1), *b = s_random(g.filters, -0.5, 0.5);
    float *dy = s_random(nout, -1, 1), *y = calloc((size_t)nout, sizeof(float)), *y2 = calloc((size_t)nout, 4);
    float *cols = malloc((size_t)(layer_conv2d_cols(&g, n) + 1) * sizeof(float));
    float *dx = malloc((size_t)nin * 4), *dx2 = calloc((size_t)nin, 4), *dw = malloc((size_t)nw * 4);
    float *dw2 = calloc((size_t)nw, 4), *db = malloc((size_t)g.filters * 4), *db2 = calloc((size_t)g.filters, 4);
    layer_conv2d_forward(&g, x, n, w, b, cols, y);
    layer_conv2d_backward(&g, dy, n, w, cols, dw, db, dx);
    int64_t covered = 0;
    for (int ph = 0; ph < hp; ph++)
        for (int pw = 0; pw < wp; pw++) {
            layer_window_t pg;
            int64_t iy0, ix0, oy0, ox0;
            layer_window_part(&g, hp, wp, ph, pw, &pg, &iy0, &ix0, &oy0, &ox0);
            int64_t pin = n * pg.h * pg.w * pg.c, pout = n * pg.oh * pg.ow * pg.filters;
            covered += pout;
            float *px = malloc((size_t)(pin + 1) * 4), *py = malloc((size_t)(pout + 1) * 4);
            float *pc = malloc((size_t)(layer_conv2d_cols(&pg, n) + 1) * 4), *pdw = malloc((size_t)nw * 4);
            float *pdb = malloc((size_t)g.filters * 4);
            layer_block(LAYER_BLOCK_GATHER, x, g.h, g.w, g.c, px, n, iy0, pg.h, ix0, pg.w);
            layer_conv2d_forward(&pg, px, n, w, b, pc, py);
            layer_block(LAYER_BLOCK_SCATTER, y2, g.oh, g.ow, g.filters, py, n, oy0, pg.oh, ox0, pg.ow);
            layer_block(LAYER_BLOCK_GATHER, dy, g.oh, g.ow, g.filters, py, n, oy0, pg.oh, ox0, pg.ow);
            layer_conv2d_backward(&pg, py, n, w, pc, pdw, pdb, px);
            layer_block(LAYER_BLOCK_ADD, dx2, g.h, g.w, g.c, px, n, iy0, pg.h, ix0, pg.w);
            for (int64_t k = 0; k < nw; k++)
                dw2[k] += pdw[k];
            for (int64_t k = 0; k < g.filters; k++)
                db2[k] += pdb[k];
            free(px), free(py), free(pc), free(pdw), free(pdb);
        }
    CU_ASSERT_EQUAL(covered, nout); /* the blocks tile the output */
    double worst = 0;
    for (int64_t k = 0; k < nout; k++)
        worst = fmax(worst, fabs(y[k] - y2[k]));
    for (int64_t k = 0; k < nin; k++)
        worst = fmax(worst, fabs(dx[k] - dx2[k]));
    for (int64_t k = 0; k < nw; k++)
        worst = fmax(worst, fabs(dw[k] - dw2[k]));
    for (int64_t k = 0; k < g.filters; k++)
        worst = fmax(worst, fabs(db[k] - db2[k]));
    if (worst > 1e-4)
        fprintf(stderr, "\n  %s on %s split [%d, %d]: off by %g", layer_json, input_shape, hp, wp, worst);
    CU_ASSERT(worst <= 1e-4);
    free(x), free(w), free(b), free(dy), free(y), free(y2), free(cols), free(dx), free(dx2), free(dw), free(dw2);
    free(db), free(db2);
}

static void
test_split(void)
{
    s_check_split("{\"conv2d\": {\"filters\": 3, \"kernel\": 3, \"padding\": \"same\"}}", "[8, 8, 2]", 2, 2, 2);
    s_check_split("{\"conv2d\": {\"filters\": 3, \"kernel\": 3}}", "[8, 6, 2]", 2, 4, 1);
    s_check_split("{\"conv2d\": {\"filters\": 2, \"kernel\": [3, 2], \"strides\": [2, 1], \"padding\": \"same\"}}",
                  "[6, 5, 3]", 3, 3, 1);
    s_check_split("{\"conv2d\": {\"filters\": 4, \"kernel\": 5, \"strides\": 2, \"padding\": \"same\"}}", "[8, 8, 1]",
                  2, 1, 4);
    /* more parts than output rows: the empty ones add nothing */
    s_check_split("{\"conv2d\": {\"filters\": 2, \"kernel\": 3}}", "[4, 4, 1]", 1, 4, 1);
    /* the direct path's parts (few input channels, a 5x5 window) */
    s_check_split("{\"conv2d\": {\"filters\": 16, \"kernel\": 5, \"padding\": \"same\"}}", "[9, 8, 1]", 2, 2, 2);
    s_check_split("{\"conv2d\": {\"filters\": 24, \"kernel\": 5, \"strides\": 2}}", "[12, 11, 3]", 2, 3, 1);

    /* dense split along its units: columns in place, the dx shares summed */
    int64_t n = 3, in = 5, out = 7;
    float *x = s_random(n * in, -1, 1), *w = s_random(in * out, -1, 1), *b = s_random(out, -1, 1);
    float *dy = s_random(n * out, -1, 1), y[21], y2[21], dw[35], dw2[35], db[7], db2[7], dx[15], dx2[15] = {0}, part[15];
    layer_dense_forward(x, n, in, out, w, b, y);
    layer_dense_backward(x, dy, n, in, out, w, dw, db, dx);
    for (int p = 0; p < 3; p++) {
        int64_t u0 = out * p / 3, u1 = out * (p + 1) / 3;
        layer_dense_forward_cols(x, n, in, out, u0, u1, w, b, y2);
        layer_dense_backward_cols(x, dy, n, in, out, u0, u1, w, dw2, db2, part);
        for (int k = 0; k < n * in; k++)
            dx2[k] += part[k];
    }
    double worst = 0;
    for (int k = 0; k < n * out; k++)
        worst = fmax(worst, fabs(y[k] - y2[k]));
    for (int k = 0; k < in * out; k++)
        worst = fmax(worst, fabs(dw[k] - dw2[k]));
    for (int k = 0; k < out; k++)
        worst = fmax(worst, fabs(db[k] - db2[k]));
    for (int k = 0; k < n * in; k++)
        worst = fmax(worst, fabs(dx[k] - dx2[k]));
    CU_ASSERT(worst <= 1e-5);
    free(x), free(w), free(b), free(dy);
}

static void
test_pools(void)
{
    for (int kind = 1; kind <= 2; kind++) {
        const char *type = kind == 1 ? "max_pool2d" : "avg_pool2d";
        char j[200];
        snprintf(j, sizeof j, "{\"%s\": {}}", type);
        s_check_window(kind, j, "[6, 6, 3]", 2);
        snprintf(j, sizeof j, "{\"%s\": {\"pool\": 3, \"strides\": 2, \"padding\": \"same\"}}", type);
        s_check_window(kind, j, "[7, 6, 2]", 2);
        snprintf(j, sizeof j, "{\"%s\": {\"pool\": [2, 3], \"strides\": 1}}", type);
        s_check_window(kind, j, "[5, 5, 1]", 3);
        snprintf(j, sizeof j, "{\"%s\": {\"pool\": 2, \"padding\": \"same\"}}", type);
        s_check_window(kind, j, "[5, 7, 2]", 1);
    }
    /* Same padding never picks the padding, and averages over what is inside. */
    zdist_layer_spec_t l;
    s_layer0("{\"avg_pool2d\": {\"pool\": 2, \"padding\": \"same\"}}", "[3, 3, 1]", &l);
    layer_window_t g;
    layer_window_from_spec(&l, &g);
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, y[4];
    layer_avg_pool_forward(&g, x, 1, y);
    CU_ASSERT_DOUBLE_EQUAL(y[0], 3, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(y[1], 4.5, 1e-6); /* (3 + 6) / 2 */
    CU_ASSERT_DOUBLE_EQUAL(y[3], 9, 1e-6);
    float neg[9] = {-9, -8, -7, -6, -5, -4, -3, -2, -1};
    s_layer0("{\"max_pool2d\": {\"pool\": 2, \"padding\": \"same\"}}", "[3, 3, 1]", &l);
    layer_window_from_spec(&l, &g);
    layer_max_pool_forward(&g, neg, 1, y);
    CU_ASSERT_DOUBLE_EQUAL(y[3], -1, 0);
    CU_ASSERT_DOUBLE_EQUAL(y[1], -4, 0);
    /* ties: the gradient goes to the first maximum, once */
    float flat[9] = {5, 5, 1, 5, 5, 1, 1, 1, 1}, dy[4] = {1, 2, 3, 4}, dx[9];
    layer_max_pool_forward(&g, flat, 1, y);
    layer_max_pool_backward(&g, flat, y, dy, 1, dx);
    CU_ASSERT_DOUBLE_EQUAL(dx[0], 1, 0);
    CU_ASSERT_DOUBLE_EQUAL(dx[1] + dx[3] + dx[4], 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(dx[2], 2, 0);
    CU_ASSERT_DOUBLE_EQUAL(dx[6], 3, 0);
    CU_ASSERT_DOUBLE_EQUAL(dx[8], 4, 0);
}

/* Max pools over 16 channels or more: the backward pass's 16- and 8-wide paths and the tail, with windows that
   tile the input (nothing cleared beforehand), overlap (gradients added), leave gaps or a remainder. */
static void
test_max_pool_wide(void)
{
    s_check_window(1, "{\"max_pool2d\": {}}", "[6, 6, 27]", 2);
    s_check_window(1, "{\"max_pool2d\": {\"pool\": 2, \"padding\": \"same\"}}", "[5, 7, 16]", 2);
    s_check_window(1, "{\"max_pool2d\": {\"pool\": 3, \"strides\": 2, \"padding\": \"same\"}}", "[7, 6, 25]", 2);
    s_check_window(1, "{\"max_pool2d\": {\"pool\": 2, \"strides\": 3}}", "[8, 7, 16]", 1);
    s_check_window(1, "{\"max_pool2d\": {}}", "[5, 5, 33]", 2);
    /* ties in every channel: each window's gradient goes to its first element, and every element of dx is
       written although the windows tile the input and dx held NaNs */
    zdist_layer_spec_t l;
    s_layer0("{\"max_pool2d\": {}}", "[4, 2, 26]", &l);
    layer_window_t g;
    layer_window_from_spec(&l, &g);
    float x[4 * 2 * 26], y[2 * 26], dy[2 * 26], dx[4 * 2 * 26];
    for (int k = 0; k < 4 * 2 * 26; k++)
        x[k] = 1.5f, dx[k] = NAN;
    for (int k = 0; k < 2 * 26; k++)
        dy[k] = (float)(k + 1);
    for (int with_arg = 0; with_arg < 2; with_arg++) {
        uint8_t arg[2 * 26];
        if (with_arg) {
            layer_max_pool_forward_arg(&g, x, 1, y, arg);
            layer_max_pool_backward_arg(&g, arg, dy, 1, dx);
        } else {
            layer_max_pool_forward(&g, x, 1, y);
            layer_max_pool_backward(&g, x, y, dy, 1, dx);
        }
        for (int k = 0; k < 4 * 2 * 26; k++) {
            int pix = k / 26, ch = k % 26;
            float want = pix == 0 ? dy[ch] : pix == 4 ? dy[26 + ch] : 0.0f;
            CU_ASSERT_DOUBLE_EQUAL(dx[k], want, 0);
            dx[k] = NAN;
        }
    }
}

/* ---- batch norm: one replica, and the same batch split over two "replicas" whose sums are added ---- */

typedef struct {
    int64_t rows, c;
    int parts; /* the batch's rows split over this many replicas */
    float *x, *gamma, *beta, *r, *y, *xhat, *shift;
    float mean[8], var[8];
} s_bn_t;

static void
s_bn_forward(s_bn_t *t)
{
    float sums[16] = {0}, part[16];
    int64_t per = t->rows / t->parts;
    for (int p = 0; p < t->parts; p++) {
        layer_bn_sums(t->x + p * per * t->c, per, t->c, t->shift, part);
        for (int j = 0; j < 2 * t->c; j++)
            sums[j] += part[j]; /* the all-reduce */
    }
    layer_bn_moments(sums, t->shift, t->c, (double)t->rows, t->mean, t->var);
    for (int p = 0; p < t->parts; p++)
        layer_bn_forward(t->x + p * per * t->c, per, t->c, t->mean, t->var, 1e-3, t->gamma, t->beta,
                         t->xhat + p * per * t->c, t->y + p * per * t->c);
}

static double
s_bn_loss(void *arg)
{
    s_bn_t *t = arg;
    s_bn_forward(t);
    return s_dot(t->y, t->r, t->rows * t->c);
}

static void
s_check_bn(int64_t rows, int64_t c, int parts)
{
    s_bn_t t = {.rows = rows, .c = c, .parts = parts};
    int64_t n = rows * c, per = rows / parts;
    t.x = s_random(n, -2, 3);
    t.gamma = s_random(c, 0.5, 1.5);
    t.beta = s_random(c, -0.5, 0.5);
    t.shift = s_random(c, -0.2, 0.2);
    t.r = s_random(n, -1, 1);
    t.y = malloc((size_t)n * sizeof(float));
    t.xhat = malloc((size_t)n * sizeof(float));
    float *dx = malloc((size_t)n * sizeof(float)), dsums[16] = {0}, part[16];
    s_bn_forward(&t);
    for (int p = 0; p < parts; p++) {
        layer_bn_backward_sums(t.r + p * per * c, t.xhat + p * per * c, per, c, part);
        for (int j = 0; j < 2 * c; j++)
            dsums[j] += part[j];
    }
    for (int p = 0; p < parts; p++)
        layer_bn_backward(t.r + p * per * c, t.xhat + p * per * c, per, c, t.var, 1e-3, t.gamma, dsums, (double)rows,
                          dx + p * per * c);
    CU_ASSERT(s_fd(s_bn_loss, &t, t.x, dx, n, 1e-2, "batch_norm x") < 1e-2);
    CU_ASSERT(s_fd(s_bn_loss, &t, t.gamma, dsums + c, c, 1e-2, "batch_norm gamma") < 1e-2);
    CU_ASSERT(s_fd(s_bn_loss, &t, t.beta, dsums, c, 1e-2, "batch_norm beta") < 1e-2);
    /* The moments are the batch's, whatever the shift. */
    for (int64_t ch = 0; ch < c; ch++) {
        double m = 0, v = 0;
        for (int64_t r = 0; r < rows; r++)
            m += t.x[r * c + ch];
        m /= rows;
        for (int64_t r = 0; r < rows; r++)
            v += (t.x[r * c + ch] - m) * (t.x[r * c + ch] - m);
        CU_ASSERT_DOUBLE_EQUAL(t.mean[ch], m, 1e-5);
        CU_ASSERT_DOUBLE_EQUAL(t.var[ch], v / rows, 1e-4);
    }
    free(t.x), free(t.gamma), free(t.beta), free(t.shift), free(t.r), free(t.y), free(t.xhat), free(dx);
}

static void
test_batch_norm(void)
{
    s_check_bn(6, 3, 1);
    s_check_bn(12, 4, 2); /* global-batch statistics over two replicas */
    s_check_bn(20, 1, 4);
    /* Inference: the moving statistics, nothing kept. */
    float x[2] = {1, 3}, mean[1] = {2}, var[1] = {4}, g[1] = {2}, b[1] = {1}, y[2];
    layer_bn_forward(x, 2, 1, mean, var, 0, g, b, NULL, y);
    CU_ASSERT_DOUBLE_EQUAL(y[0], 0, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(y[1], 2, 1e-6);
}

/* ---- dropout ---- */

static void
test_dropout(void)
{
    int64_t n = 20000;
    float *x = malloc((size_t)n * sizeof *x), *again = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = again[i] = 1;
    layer_dropout(x, n, 0.25, 42);
    layer_dropout(again, n, 0.25, 42);
    CU_ASSERT_EQUAL(memcmp(x, again, (size_t)n * sizeof *x), 0);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        CU_ASSERT(x[i] == 0 || fabsf(x[i] - 1 / 0.75f) < 1e-6);
        kept += x[i] != 0;
    }
    /* 15000 expected; 6 standard deviations is +- 367 */
    CU_ASSERT(kept > 14600 && kept < 15400);
    for (int64_t i = 0; i < n; i++)
        again[i] = 1;
    layer_dropout(again, n, 0.25, 43);
    CU_ASSERT_NOT_EQUAL(memcmp(x, again, (size_t)n * sizeof *x), 0);
    /* rate 0 is the identity */
    for (int64_t i = 0; i < n; i++)
        again[i] = 2;
    layer_dropout(again, n, 0, 1);
    CU_ASSERT_DOUBLE_EQUAL(again[17], 2, 0);
    free(x);
    free(again);
}

/* ---- embedding and concat ---- */

typedef struct {
    int64_t n, e, m, k, p;
    zdist_combiner_t comb;
    const int64_t *offs, *fids;
    const float *vals;
    int64_t ids[32], loff[8];
    float weights[32];
    float *table, *rows, *y, *r, *z;
} s_emb_t;

static double
s_emb_loss(void *arg)
{
    s_emb_t *t = arg;
    for (int64_t j = 0; j < t->m; j++)
        memcpy(t->rows + j * t->e, t->table + t->ids[j] * t->e, (size_t)t->e * sizeof(float));
    layer_embedding_forward(t->rows, t->weights, t->loff, t->n, t->e, t->comb, t->y);
    layer_concat_forward(t->y, t->n, t->e, t->offs, t->fids, t->vals, t->k, t->z);
    return s_dot(t->z, t->r, t->n * (t->e + t->k));
}

static void
test_embedding_concat(void)
{
    /* 4 examples, ids 0..2 are dense features, 3.. hashed into 5 rows; the
       third has no ids; the first repeats one. */
    static const int64_t offs[] = {0, 4, 6, 8, 11};
    static const int64_t fids[] = {0, 3, 9, 3, 1, 12, 2, 0, 4, 2, 5};
    static const float vals[] = {0.5f, 1, 2, 0.5f, -1, 1, 3, 1, 0.25f, 2, 1.5f};
    static const char *const names[] = {"embedding mean", "embedding sum", "embedding sqrtn"};
    for (int comb = 0; comb < 3; comb++) {
        s_emb_t t = {.n = 4, .e = 3, .k = 3, .comb = (zdist_combiner_t)comb, .offs = offs, .fids = fids, .vals = vals};
        t.m = layer_embedding_lookups(offs, fids, vals, 4, 3, 5, t.ids, t.weights, t.loff);
        CU_ASSERT_EQUAL(t.m, 6);
        CU_ASSERT_EQUAL(t.ids[1], (9 - 3) % 5);
        CU_ASSERT_EQUAL(t.loff[2], 4);
        CU_ASSERT_EQUAL(t.loff[3], 4); /* no ids */
        t.table = s_random(5 * 3, -1, 1);
        t.rows = malloc(32 * 3 * sizeof(float));
        t.y = malloc(4 * 3 * sizeof(float));
        t.z = malloc(4 * 6 * sizeof(float));
        t.r = s_random(4 * 6, -1, 1);
        s_emb_loss(&t);
        CU_ASSERT_DOUBLE_EQUAL(t.z[3], 0.5, 0);      /* feature 0 of example 0 */
        CU_ASSERT_DOUBLE_EQUAL(t.z[2 * 6 + 5], 3, 0); /* feature 2 of example 2 */
        CU_ASSERT_DOUBLE_EQUAL(t.y[2 * 3], 0, 0);    /* no ids: zeros */
        /* the layer's forward is libzdist's embedding_lookup_sparse */
        float want[4 * 3];
        zdist_sparse_ids_t sp = {.n = 4, .row_offsets = t.loff, .ids = t.ids, .weights = t.weights};
        CU_ASSERT_EQUAL(zdist_embedding_lookup_sparse(t.table, 5, 3, &sp, t.comb, want, NULL), 0);
        for (int i = 0; i < 12; i++)
            CU_ASSERT_DOUBLE_EQUAL(t.y[i], want[i], 1e-5);
        float dy[12], drows[32 * 3], dtable[15] = {0};
        layer_concat_backward(t.r, 4, 3, 3, dy);
        layer_embedding_backward(dy, t.weights, t.loff, 4, 3, t.comb, drows);
        for (int64_t j = 0; j < t.m; j++) /* duplicates sum, as the host does */
            for (int c = 0; c < 3; c++)
                dtable[t.ids[j] * 3 + c] += drows[j * 3 + c];
        CU_ASSERT(s_fd(s_emb_loss, &t, t.table, dtable, 15, 1e-2, names[comb]) < 1e-2);
        free(t.table), free(t.rows), free(t.y), free(t.z), free(t.r);
    }
}

/* ---- losses ---- */

typedef struct {
    int which; /* 0 sparse xent, 1 sigmoid int labels, 2 sigmoid float labels, 3 mse */
    int64_t n;
    int classes;
    float *logits, *work;
    const void *labels;
} s_lossck_t;

static double
s_loss_value(void *arg)
{
    s_lossck_t *t = arg;
    int64_t cnt = t->n * (t->which == 0 ? t->classes : 1);
    memcpy(t->work, t->logits, (size_t)cnt * sizeof(float));
    double loss = 0;
    int64_t correct;
    if (t->which == 0)
        layer_loss_sparse_xent(t->work, t->labels, t->n, t->classes, 0.25f, &loss, &correct);
    else if (t->which == 3)
        layer_loss_mse(t->work, ZDIST_DTYPE_FLOAT32, t->labels, t->n, 0.25f, &loss);
    else
        layer_loss_sigmoid_xent(t->work, t->which == 1 ? ZDIST_DTYPE_INT32 : ZDIST_DTYPE_FLOAT32, t->labels, t->n,
                                0.25f, &loss, &correct);
    return loss * 0.25;
}

static void
test_losses(void)
{
    int32_t classes[6] = {0, 3, 2, 1, 3, 0}, bits[6] = {0, 1, 1, 0, 1, 0};
    float soft[6] = {0.1f, 0.9f, 0.5f, 0, 1, 0.3f}, targets[6] = {1.5f, -2, 0.25f, 3, 0, -1};
    const void *labels[4] = {classes, bits, soft, targets};
    const char *names[4] = {"sparse_xent", "sigmoid_xent int", "sigmoid_xent float", "mse"};
    for (int w = 0; w < 4; w++) {
        s_lossck_t t = {.which = w, .n = 6, .classes = 4, .labels = labels[w]};
        int64_t cnt = 6 * (w == 0 ? 4 : 1);
        t.logits = s_random(cnt, -2, 2);
        t.work = malloc((size_t)cnt * sizeof(float));
        s_loss_value(&t);
        float *grad = malloc((size_t)cnt * sizeof(float));
        memcpy(grad, t.work, (size_t)cnt * sizeof(float));
        CU_ASSERT(s_fd(s_loss_value, &t, t.logits, grad, cnt, 1e-2, names[w]) < 1e-2);
        free(t.logits), free(t.work), free(grad);
    }
    /* Known values: log(2) for a zero logit, a perfect softmax is ~0. */
    float z[2] = {0, 0};
    int32_t y1[2] = {1, 0};
    double loss;
    int64_t correct;
    CU_ASSERT_EQUAL(layer_loss_sigmoid_xent(z, ZDIST_DTYPE_INT32, y1, 2, 1, &loss, &correct), 0);
    CU_ASSERT_DOUBLE_EQUAL(loss, 2 * log(2), 1e-6);
    CU_ASSERT_EQUAL(correct, 1); /* p = 0.5 counts as 1 */
    float big[3] = {50, 0, 0};
    int32_t c0[1] = {0};
    CU_ASSERT_EQUAL(layer_loss_sparse_xent(big, c0, 1, 3, 1, &loss, &correct), 0);
    CU_ASSERT(loss < 1e-12);
    CU_ASSERT_EQUAL(correct, 1);
    /* Labels out of range are errors. */
    int32_t bad[1] = {3};
    float zz[3] = {0};
    CU_ASSERT_EQUAL(layer_loss_sparse_xent(zz, bad, 1, 3, 1, &loss, &correct), -ERANGE);
    int32_t two[1] = {2};
    CU_ASSERT_EQUAL(layer_loss_sigmoid_xent(zz, ZDIST_DTYPE_INT32, two, 1, 1, &loss, &correct), -ERANGE);
    float nan_label[1] = {NAN};
    CU_ASSERT_EQUAL(layer_loss_mse(zz, ZDIST_DTYPE_FLOAT32, nan_label, 1, 1, &loss), -ERANGE);
}

/* ---- functional models' layers ---- */

/* Keras's Hashing and TF's to_hash_bucket_fast on their documented examples;
   an int64 id hashes as its decimal text (tf.as_string), over the whole range. */
static void
test_hashing(void)
{
    const char *keras[] = {"A", "B", "C", "D", "E"};
    const uint64_t keras_bins[] = {1, 0, 1, 1, 2};
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(layer_fingerprint64(keras[i], 1) % 3, keras_bins[i]);
    const char *tf[] = {"Hello", "TensorFlow", "2.x"};
    const uint64_t tf_bins[] = {0, 2, 2};
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(layer_fingerprint64(tf[i], strlen(tf[i])) % 3, tf_bins[i]);
    int64_t ids[] = {0, 7, -3, INT64_MIN, INT64_MAX, 123456789012345}, out[6];
    const char *text[] = {"0", "7", "-3", "-9223372036854775808", "9223372036854775807", "123456789012345"};
    layer_hashing(ids, 6, 1000003, out);
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL((uint64_t)out[i], layer_fingerprint64(text[i], strlen(text[i])) % 1000003);
        CU_ASSERT(out[i] >= 0 && out[i] < 1000003);
    }
    /* ids are checked against the table, with the position of the first bad one */
    int64_t bad[] = {0, 4, 5}, got[3], offs[4];
    float w[3];
    CU_ASSERT_EQUAL(layer_embedding_ids(bad, NULL, 3, 1, 5, got, w, offs), -1 - 2);
    CU_ASSERT_EQUAL(layer_embedding_ids(bad, NULL, 2, 1, 5, got, w, offs), 2);
    int64_t rows[] = {0, 2, 3};
    CU_ASSERT_EQUAL(layer_embedding_ids(bad, rows, 2, 0, 6, got, w, offs), 3);
    CU_ASSERT_EQUAL(offs[1], 2);
    CU_ASSERT_EQUAL(offs[2], 3);
}

typedef struct {
    int f;
    int64_t n, d, out;
    bool self, skip, dense;
    float *x[4], *r, *y;
} s_dot_t;

static double
s_dot_loss(void *arg)
{
    s_dot_t *t = arg;
    layer_dot_interaction_forward((const float *const *)t->x, t->f, t->n, t->d, t->self, t->skip, t->dense, t->y);
    return s_dot(t->y, t->r, t->n * t->out);
}

/* DotInteraction: TFRS's order and values on a known case, and gradients
   with and without self, gathered or not, with the dense input first. */
static void
test_dot_interaction(void)
{
    float a[] = {1, 2}, b[] = {3, 4}, c[] = {5, 6}, y[12];
    const float *abc[] = {a, b, c};
    layer_dot_interaction_forward(abc, 3, 1, 2, false, false, true, y);
    const float want[] = {1, 2, 11, 17, 39}; /* a, then b.a, c.a, c.b */
    for (int i = 0; i < 5; i++)
        CU_ASSERT_DOUBLE_EQUAL(y[i], want[i], 1e-6);
    layer_dot_interaction_forward(abc, 3, 1, 2, true, false, false, y);
    const float want_self[] = {5, 11, 25, 17, 39, 61};
    for (int i = 0; i < 6; i++)
        CU_ASSERT_DOUBLE_EQUAL(y[i], want_self[i], 1e-6);
    layer_dot_interaction_forward(abc, 3, 1, 2, false, true, false, y);
    const float want_skip[] = {0, 0, 0, 11, 0, 0, 17, 39, 0};
    for (int i = 0; i < 9; i++)
        CU_ASSERT_DOUBLE_EQUAL(y[i], want_skip[i], 1e-6);
    for (int variant = 0; variant < 4; variant++) {
        s_dot_t t = {.f = 4, .n = 3, .d = 5, .self = variant & 1, .skip = variant == 2, .dense = variant != 1};
        int64_t pairs = t.skip ? 16 : t.self ? 10 : 6;
        t.out = pairs + (t.dense ? t.d : 0);
        float *dx[4];
        for (int k = 0; k < t.f; k++) {
            t.x[k] = s_random(t.n * t.d, -1, 1);
            dx[k] = malloc((size_t)(t.n * t.d) * sizeof(float));
        }
        t.r = s_random(t.n * t.out, -1, 1);
        t.y = malloc((size_t)(t.n * t.out) * sizeof(float));
        layer_dot_interaction_backward((const float *const *)t.x, t.f, t.n, t.d, t.self, t.skip, t.dense, t.r, dx);
        for (int k = 0; k < t.f; k++)
            CU_ASSERT(s_fd(s_dot_loss, &t, t.x[k], dx[k], t.n * t.d, 1e-2, "dot_interaction") < 1e-2);
        for (int k = 0; k < t.f; k++)
            free(t.x[k]), free(dx[k]);
        free(t.r), free(t.y);
    }
}

/* DotInteraction's two ways (an example on the stack, and pair by pair for
   an interaction too large for it) against sums in double: forward, and
   backward as dx_i = sum_j S_ij x_j with a self pair's gradient doubled. */
static void
test_dot_interaction_paths(void)
{
    const int64_t ds[] = {7, 1100}; /* 5 x 1100 floats is over the stack's 4096 */
    for (int di = 0; di < 2; di++)
        for (int variant = 0; variant < 3; variant++) {
            int f = 5;
            int64_t n = 2, d = ds[di];
            bool self = variant == 1, skip = variant == 2, dense = variant != 1;
            int64_t pairs = skip ? f * f : self ? f * (f + 1) / 2 : f * (f - 1) / 2, out = pairs + (dense ? d : 0);
            float *x[5], *dx[5], *y = malloc((size_t)(n * out) * sizeof(float)), *g = s_random(n * out, -1, 1);
            for (int k = 0; k < f; k++) {
                x[k] = s_random(n * d, -1, 1);
                dx[k] = malloc((size_t)(n * d) * sizeof(float));
            }
            layer_dot_interaction_forward((const float *const *)x, f, n, d, self, skip, dense, y);
            layer_dot_interaction_backward((const float *const *)x, f, n, d, self, skip, dense, g, dx);
            double worst = 0;
            for (int64_t e = 0; e < n; e++) {
                const float *ye = y + e * out + (dense ? d : 0), *ge = g + e * out + (dense ? d : 0);
                double S[25] = {0};
                for (int i = 0, at = 0; i < f; i++)
                    for (int j = 0; j < (skip ? f : i + 1); j++) {
                        bool in = self ? j <= i : j < i;
                        if (!in && !skip)
                            continue;
                        double want = 0;
                        for (int64_t k = 0; in && k < d; k++)
                            want += (double)x[i][e * d + k] * x[j][e * d + k];
                        worst = fmax(worst, fabs(ye[at] - want));
                        if (in)
                            S[i * f + j] += ge[at], S[j * f + i] += ge[at];
                        at++;
                    }
                for (int i = 0; i < f; i++)
                    for (int64_t k = 0; k < d; k++) {
                        double want = dense && i == 0 ? g[e * out + k] : 0;
                        for (int j = 0; j < f; j++)
                            want += S[i * f + j] * x[j][e * d + k];
                        worst = fmax(worst, fabs(dx[i][e * d + k] - want));
                    }
            }
            CU_ASSERT(worst < 1e-3);
            if (worst >= 1e-3)
                fprintf(stderr, "dot_interaction d=%lld variant %d: off by %g\n", (long long)d, variant, worst);
            for (int k = 0; k < f; k++)
                free(x[k]), free(dx[k]);
            free(y), free(g);
        }
}

typedef struct {
    int64_t n, d;
    double diag;
    bool one; /* x is x0 */
    float *x0, *x, *w, *b, *r, *prod, *y;
} s_cross_t;

static double
s_cross_loss(void *arg)
{
    s_cross_t *t = arg;
    layer_cross_forward(t->x0, t->one ? t->x0 : t->x, t->n, t->d, t->w, t->b, t->diag, t->prod, t->y);
    return s_dot(t->y, t->r, t->n * t->d);
}

/* DCN-v2's cross: x0 * (x W + b + diag x) + x, on a known case and by finite differences. */
static void
test_cross(void)
{
    float x0[] = {1, 2}, x[] = {3, -1}, w[] = {1, 0, 2, 1}, b[] = {0.5f, -0.5f}, prod[2], y[2];
    layer_cross_forward(x0, x, 1, 2, w, b, 0.5, prod, y);
    /* x W = [3 - 2, -1] = [1, -1]; + b = [1.5, -1.5]; + 0.5 x = [3, -2]; y = x0 * that + x = [6, -5] */
    CU_ASSERT_DOUBLE_EQUAL(y[0], 6, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(y[1], -5, 1e-6);
    for (int variant = 0; variant < 2; variant++) {
        s_cross_t t = {.n = 4, .d = 3, .diag = variant ? 0.25 : 0, .one = variant == 1};
        t.x0 = s_random(t.n * t.d, -1, 1);
        t.x = s_random(t.n * t.d, -1, 1);
        t.w = s_random(t.d * t.d, -1, 1);
        t.b = s_random(t.d, -0.5, 0.5);
        t.r = s_random(t.n * t.d, -1, 1);
        t.prod = malloc((size_t)(t.n * t.d) * sizeof(float));
        t.y = malloc((size_t)(t.n * t.d) * sizeof(float));
        float *dprod = malloc((size_t)(t.n * t.d) * sizeof(float)), *dw = malloc((size_t)(t.d * t.d) * sizeof(float));
        float db[3], *dx0 = malloc((size_t)(t.n * t.d) * sizeof(float)), *dx = malloc((size_t)(t.n * t.d) * sizeof(float));
        s_cross_loss(&t);
        layer_cross_backward(t.x0, t.one ? t.x0 : t.x, t.prod, t.r, t.n, t.d, t.w, t.diag, dprod, dw, db, dx0, dx);
        if (t.one)
            for (int64_t k = 0; k < t.n * t.d; k++)
                dx0[k] += dx[k];
        CU_ASSERT(s_fd(s_cross_loss, &t, t.x0, dx0, t.n * t.d, 1e-2, "cross x0") < 1e-2);
        if (!t.one)
            CU_ASSERT(s_fd(s_cross_loss, &t, t.x, dx, t.n * t.d, 1e-2, "cross x") < 1e-2);
        CU_ASSERT(s_fd(s_cross_loss, &t, t.w, dw, t.d * t.d, 1e-2, "cross w") < 1e-2);
        CU_ASSERT(s_fd(s_cross_loss, &t, t.b, db, t.d, 1e-2, "cross b") < 1e-2);
        free(t.x0), free(t.x), free(t.w), free(t.b), free(t.r), free(t.prod), free(t.y);
        free(dprod), free(dw), free(dx0), free(dx);
    }
}

typedef struct {
    float *x[3], *r, *y;
    int64_t widths[3], rows;
} s_cat_t;

static double
s_cat_loss(void *arg)
{
    s_cat_t *t = arg;
    layer_concat_last_forward((const float *const *)t->x, t->widths, 3, t->rows, t->y);
    return s_dot(t->y, t->r, t->rows * 9);
}

/* Concatenate(axis=-1) and its gradient's cut. */
static void
test_concat_last(void)
{
    s_cat_t t = {.widths = {2, 3, 4}, .rows = 5};
    float *dx[3];
    for (int j = 0; j < 3; j++) {
        t.x[j] = s_random(t.rows * t.widths[j], -1, 1);
        dx[j] = malloc((size_t)(t.rows * t.widths[j]) * sizeof(float));
    }
    t.r = s_random(t.rows * 9, -1, 1);
    t.y = malloc((size_t)(t.rows * 9) * sizeof(float));
    s_cat_loss(&t);
    CU_ASSERT_EQUAL(t.y[9 + 2], t.x[1][3]); /* row 1's third value is x[1]'s first of row 1 */
    layer_concat_last_backward(t.r, t.widths, 3, t.rows, dx);
    for (int j = 0; j < 3; j++)
        CU_ASSERT(s_fd(s_cat_loss, &t, t.x[j], dx[j], t.rows * t.widths[j], 1e-2, "concat") < 1e-2);
    for (int j = 0; j < 3; j++)
        free(t.x[j]), free(dx[j]);
    free(t.r), free(t.y);
}

void
zdist_test_layers_register(void)
{
    ZDIST_SUITE("layers",
                {"dense with every activation (finite differences)", test_dense_activations},
                {"conv2d: shapes, strides, valid and same padding, GEMM and direct paths (finite differences)",
                 test_conv2d},
                {"conv2d split spatially with halos, dense split along units: the whole layer's numbers",
                 test_split},
                {"max and average pools (finite differences, padding)", test_pools},
                {"max pools over 16 channels or more (finite differences, ties, every element written)",
                 test_max_pool_wide},
                {"batch norm, one replica and global-batch sums (finite differences)", test_batch_norm},
                {"dropout: seeded, scaled, rate 0", test_dropout},
                {"embedding sum/mean and concat (finite differences)", test_embedding_concat},
                {"losses (finite differences, known values, bad labels)", test_losses},
                {"hashing as Keras's Hashing (FarmHash64), embedding ids in range", test_hashing},
                {"dot_interaction as TFRS's (known values, finite differences)", test_dot_interaction},
                {"dot_interaction on the stack and pair by pair, against double", test_dot_interaction_paths},
                {"DCN-v2 cross (known values, finite differences)", test_cross},
                {"concat along the last axis (finite differences)", test_concat_last});
}
