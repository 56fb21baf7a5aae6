/* bench_layers: zdist's layer kernels (worker/layers) per layer and shape, forward and backward, timed the
   way bench_layers.sh times PyTorch's: warmed, the median of equal rounds, batch 128.

   usage: bench_layers [--quick] [--rounds R] [--path auto|gemm|direct|winograd] [--only TEXT] [--cpu] [--list]
   One line per case and pass: "NAME PASS MS" (MS: the median milliseconds of one call, over R rounds of
   calls lasting ~0.2 s each; --cpu: of the process's CPU time instead of wall time). --list prints the cases' geometry (for bench_layers_torch.py) and exits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "layers/layers.h"

typedef struct {
    const char *name;
    char kind; /* c conv2d, m max pool, a avg pool, d dense */
    int h, w, c, k, s, filters;
    bool same, first; /* first: the model's first layer, no input gradient */
} s_case_t;

/* The layers of the mlp, the project's CNN (fmnist-cnn-run.json), the CNN (#35) and the shapes a
   user writes: 1-3 input channels, 5x5 and 3x3, same and valid, strides 1 and 2. */
static const s_case_t s_cases[] = {
    {"conv 28x28x1 16f 5x5 same s1 (issue 1st)", 'c', 28, 28, 1, 5, 1, 16, true, true},
    {"conv 14x14x16 24f 3x3 valid s1 (issue 2nd)", 'c', 14, 14, 16, 3, 1, 24, false, false},
    {"conv 28x28x1 32f 3x3 valid s1 (project 1st)", 'c', 28, 28, 1, 3, 1, 32, false, true},
    {"conv 13x13x32 64f 3x3 valid s1 (project 2nd)", 'c', 13, 13, 32, 3, 1, 64, false, false},
    {"conv 28x28x1 16f 5x5 valid s2", 'c', 28, 28, 1, 5, 2, 16, false, true},
    {"conv 28x28x1 32f 3x3 same s2", 'c', 28, 28, 1, 3, 2, 32, true, true},
    {"conv 32x32x3 32f 3x3 same s1", 'c', 32, 32, 3, 3, 1, 32, true, true},
    {"conv 32x32x3 32f 5x5 valid s1", 'c', 32, 32, 3, 5, 1, 32, false, true},
    {"conv 32x32x3 16f 3x3 same s2", 'c', 32, 32, 3, 3, 2, 16, true, true},
    {"conv 16x16x2 8f 3x3 same s1 (dx)", 'c', 16, 16, 2, 3, 1, 8, true, false},
    {"max_pool 28x28x16 2x2", 'm', 28, 28, 16, 2, 2, 0, false, false},
    {"max_pool 26x26x32 2x2", 'm', 26, 26, 32, 2, 2, 0, false, false},
    {"max_pool 32x32x32 3x3 s2 same", 'm', 32, 32, 32, 3, 2, 0, true, false},
    {"avg_pool 28x28x16 2x2", 'a', 28, 28, 16, 2, 2, 0, false, false},
    {"dense 784x128 (mlp)", 'd', 1, 1, 784, 0, 0, 128, false, true},
    {"dense 1600x128 (project)", 'd', 1, 1, 1600, 0, 0, 128, false, false},
};
#define S_NCASES ((int)(sizeof s_cases / sizeof s_cases[0]))
#define S_BATCH 128

static clockid_t s_clock = CLOCK_MONOTONIC;

static double
s_now(void)
{
    struct timespec ts;
    clock_gettime(s_clock, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
s_window(const s_case_t *c, layer_window_t *g)
{
    int64_t oh, ow, pt = 0, pl = 0;
    if (c->same) {
        oh = (c->h + c->s - 1) / c->s;
        ow = (c->w + c->s - 1) / c->s;
        int64_t th = (oh - 1) * c->s + c->k - c->h, tw = (ow - 1) * c->s + c->k - c->w;
        pt = th > 0 ? th / 2 : 0;
        pl = tw > 0 ? tw / 2 : 0;
    } else {
        oh = (c->h - c->k) / c->s + 1;
        ow = (c->w - c->k) / c->s + 1;
    }
    *g = (layer_window_t){.h = c->h, .w = c->w, .c = c->c, .kh = c->k, .kw = c->k, .sh = c->s, .sw = c->s,
                          .pad_top = pt, .pad_left = pl, .oh = oh, .ow = ow, .filters = c->filters};
}

static float *
s_random(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u % 1000) / 1000.0 - 0.5);
    return p;
}

typedef struct {
    const s_case_t *c;
    layer_window_t g;
    int path; /* 0 auto, 1 gemm, 2 direct, 3 winograd */
    float *x, *w, *b, *y, *dy, *dx, *dw, *db, *cols;
} s_bench_t;

static void
s_call(s_bench_t *t, bool backward)
{
    const s_case_t *c = t->c;
    int64_t n = S_BATCH;
    float *dx = c->first ? NULL : t->dx;
    switch (c->kind) {
    case 'c':
        if (!backward)
            t->path == 1   ? layer_conv2d_gemm_forward(&t->g, t->x, n, t->w, t->b, t->cols, t->y)
            : t->path == 2 ? layer_conv2d_direct_forward(&t->g, t->x, n, t->w, t->b, t->cols, t->y)
            : t->path == 3 ? layer_conv2d_winograd_forward(&t->g, t->x, n, t->w, t->b, t->cols, t->y)
                           : layer_conv2d_forward(&t->g, t->x, n, t->w, t->b, t->cols, t->y);
        else
            t->path == 1   ? layer_conv2d_gemm_backward(&t->g, t->dy, n, t->w, t->cols, t->dw, t->db, dx)
            : t->path == 2 ? layer_conv2d_direct_backward(&t->g, t->dy, n, t->w, t->cols, t->dw, t->db, dx)
            : t->path == 3 ? layer_conv2d_winograd_backward(&t->g, t->dy, n, t->w, t->cols, t->dw, t->db, dx)
                           : layer_conv2d_backward(&t->g, t->dy, n, t->w, t->cols, t->dw, t->db, dx);
        break;
    case 'm':
        /* as a model trains: the forward pass keeps the argmax (cols), the backward one reads it */
        if (!backward)
            layer_max_pool_forward_arg(&t->g, t->x, n, t->y, (uint8_t *)t->cols);
        else
            layer_max_pool_backward_arg(&t->g, (const uint8_t *)t->cols, t->dy, n, t->dx);
        break;
    case 'a':
        if (!backward)
            layer_avg_pool_forward(&t->g, t->x, n, t->y);
        else
            layer_avg_pool_backward(&t->g, t->dy, n, t->dx);
        break;
    default:
        if (!backward)
            layer_dense_forward(t->x, n, c->c, c->filters, t->w, t->b, t->y);
        else
            layer_dense_backward(t->x, t->dy, n, c->c, c->filters, t->w, t->dw, t->db, dx);
    }
}

static int
s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median over rounds of the mean time of one call (ms). */
static double
s_time(s_bench_t *t, bool backward, int rounds, double round_secs)
{
    double t0 = s_now();
    int calls = 0;
    for (; calls < 3 || s_now() - t0 < round_secs / 4; calls++) { /* warm-up, and the calls per round */
        if (backward)
            s_call(t, false);
        s_call(t, backward);
    }
    double per = (s_now() - t0) / calls;
    int reps = (int)(round_secs / (per > 1e-6 ? per : 1e-6)) + 1;
    double ms[16];
    for (int r = 0; r < rounds; r++) {
        if (backward)
            s_call(t, false); /* the forward pass leaves cols for the backward one */
        double a = s_now();
        for (int i = 0; i < reps; i++)
            s_call(t, backward);
        ms[r] = (s_now() - a) / reps * 1e3;
    }
    qsort(ms, (size_t)rounds, sizeof ms[0], s_cmp);
    return ms[rounds / 2];
}

static void
s_bench_case(const s_case_t *c, int path, int rounds, double round_secs)
{
    s_bench_t t = {.c = c, .path = path};
    int64_t n = S_BATCH, in, out, nw = 0;
    if (c->kind == 'd') {
        in = n * c->c;
        out = n * c->filters;
        nw = (int64_t)c->c * c->filters;
    } else {
        s_window(c, &t.g);
        if (c->kind != 'c')
            t.g.filters = 0;
        in = n * c->h * c->w * c->c;
        out = n * t.g.oh * t.g.ow * (c->kind == 'c' ? c->filters : c->c);
        nw = (int64_t)c->k * c->k * c->c * c->filters;
    }
    if (c->kind == 'c' && path >= 2 && !layer_conv2d_is_direct(&t.g))
        return;
    if (c->kind == 'c' && path == 3 && !(t.g.kh == 3 && t.g.kw == 3 && t.g.sh == 1 && t.g.sw == 1 && t.g.c >= 8))
        return;
    int64_t cols = c->kind == 'c' ? n * t.g.oh * t.g.ow * c->k * c->k * c->c : c->kind == 'm' ? out / 4 + 1 : 0;
    if (c->kind == 'c' && layer_conv2d_direct_floats(&t.g, n) > cols)
        cols = layer_conv2d_direct_floats(&t.g, n);
    t.x = s_random(in), t.dx = s_random(in), t.y = s_random(out), t.dy = s_random(out);
    t.w = s_random(nw), t.dw = s_random(nw), t.b = s_random(c->filters), t.db = s_random(c->filters);
    t.cols = s_random(cols);
    printf("%s\tforward\t%.4f\n", c->name, s_time(&t, false, rounds, round_secs));
    printf("%s\tbackward\t%.4f\n", c->name, s_time(&t, true, rounds, round_secs));
    fflush(stdout);
    free(t.x), free(t.dx), free(t.y), free(t.dy), free(t.w), free(t.dw), free(t.b), free(t.db), free(t.cols);
}

int
main(int argc, char **argv)
{
    int rounds = 3, path = 0;
    double round_secs = 0.2;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            rounds = 1;
            round_secs = 0.01;
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
            rounds = rounds < 1 ? 1 : rounds > 15 ? 15 : rounds;
        } else if (strcmp(argv[i], "--path") == 0 && i + 1 < argc) {
            i++;
            path = strcmp(argv[i], "gemm") == 0     ? 1
                   : strcmp(argv[i], "direct") == 0   ? 2
                   : strcmp(argv[i], "winograd") == 0 ? 3
                                                      : 0;
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--cpu") == 0) {
            s_clock = CLOCK_PROCESS_CPUTIME_ID; /* the work done, whatever else runs on the machine */
        } else if (strcmp(argv[i], "--list") == 0) {
            for (int k = 0; k < S_NCASES; k++) {
                const s_case_t *c = &s_cases[k];
                printf("%s\t%c\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", c->name, c->kind, c->h, c->w, c->c, c->k, c->s,
                       c->filters, c->same, c->first);
            }
            return 0;
        } else {
            fprintf(stderr, "usage: bench_layers [--quick] [--rounds R] [--path auto|gemm|direct|winograd] [--only TEXT] "
                            "[--cpu] [--list]\n");
            return 2;
        }
    }
    for (int k = 0; k < S_NCASES; k++)
        if (!only || strstr(s_cases[k].name, only))
            s_bench_case(&s_cases[k], path, rounds, round_secs);
    return 0;
}
