/* layer_conv_direct: conv2d by direct convolution for few input channels (C_in 1-4): the input padded once,
   outputs and kernel gradients accumulated in registers, no im2col matrix. */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

/* Output pixels and filters a forward block keeps in registers (4 x 16 floats: 8 AVX registers), and the
   kernel taps a backward block does (4 taps x 16 filters). */
enum { S_PB = 4, S_FB = 16, S_TB = 4, S_MAX_SHARES = 8 };

/* The kernels are built twice, for AVX2 with FMA and for the baseline, and the loader picks one for the
   CPU (GCC's target_clones): the build stays portable and fast machines get 8-wide FMAs. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define S_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define S_CLONES
#endif

/* Measured against im2col + OpenBLAS (bench_layers --cpu, one thread): direct wins for 1-4 input channels
   and 8 filters or more once a window has 12 taps or more (5x5x1: 2.5x forward, 1.6x backward; 3x3x3 and
   5x5x3: 1.3-1.6x); at 3x3x1 (9 taps) GEMM's is as fast or faster. */
bool
layer_conv2d_is_direct(const layer_window_t *g)
{
    int64_t taps = g->kh * g->kw * g->c;
    return g->c <= 4 && g->filters >= 8 && taps >= 12 && taps <= LAYER_MAX_TAPS;
}

/* Rows and columns of the padded input the windows read. */
static void
s_padded(const layer_window_t *g, int64_t *hp, int64_t *wp)
{
    *hp = (g->oh - 1) * g->sh + g->kh;
    *wp = (g->ow - 1) * g->sw + g->kw;
}

int64_t
layer_conv2d_direct_floats(const layer_window_t *g, int64_t n)
{
    int64_t hp, wp;
    s_padded(g, &hp, &wp);
    return n * hp * wp * g->c;
}

/* xp[n, hp, wp, c]: x with the window's padding as zeros (what lies past the windows left out). */
static void
s_pad(const layer_window_t *g, const float *x, int64_t n, float *xp)
{
    int64_t hp, wp, c = g->c;
    s_padded(g, &hp, &wp);
    memset(xp, 0, (size_t)(n * hp * wp * c) * sizeof *xp);
    int64_t x0 = g->pad_left, cols = g->w < wp - x0 ? g->w : wp - x0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t y = 0; y < g->h; y++) {
            int64_t py = y + g->pad_top;
            if (py >= hp)
                break;
            memcpy(xp + ((i * hp + py) * wp + x0) * c, x + (i * g->h + y) * g->w * c, (size_t)(cols * c) * sizeof *xp);
        }
}

/* 8 floats: one AVX register (two SSE ones in the baseline build); vu8 may sit anywhere. */
typedef float v8 __attribute__((vector_size(32)));
typedef float vu8 __attribute__((vector_size(32), aligned(4)));

/* One block: outputs y[p][f0 .. f0 + fb) of np <= S_PB pixels in a row (fb <= S_FB), from the padded
   input at xs (pixel p at xs + p * step) and the taps' offsets. Full blocks of 16 or 8 filters and 4
   pixels stay in registers; the rest goes element by element. */
S_CLONES static void
s_fwd_block(const float *xs, int64_t step, const int64_t *off, int64_t taps, const float *w, int64_t f, int64_t f0,
            int64_t fb, int np, const float *b, float *y)
{
    if (np == S_PB && (fb == 16 || fb == 8)) {
        int nv = (int)fb / 8;
        v8 acc[S_PB][2];
        for (int v = 0; v < nv; v++) {
            v8 bv = b ? *(const vu8 *)(b + f0 + 8 * v) : (v8){0};
            for (int p = 0; p < S_PB; p++)
                acc[p][v] = bv;
        }
        if (nv == 2)
            for (int64_t t = 0; t < taps; t++) {
                v8 w0 = *(const vu8 *)(w + t * f + f0), w1 = *(const vu8 *)(w + t * f + f0 + 8);
                for (int p = 0; p < S_PB; p++) {
                    float xv = xs[p * step + off[t]];
                    acc[p][0] += xv * w0;
                    acc[p][1] += xv * w1;
                }
            }
        else
            for (int64_t t = 0; t < taps; t++) {
                v8 w0 = *(const vu8 *)(w + t * f + f0);
                for (int p = 0; p < S_PB; p++)
                    acc[p][0] += xs[p * step + off[t]] * w0;
            }
        for (int p = 0; p < S_PB; p++)
            for (int v = 0; v < nv; v++)
                *(vu8 *)(y + p * f + f0 + 8 * v) = acc[p][v];
        return;
    }
    for (int p = 0; p < np; p++)
        for (int64_t k = 0; k < fb; k++) {
            float a = b ? b[f0 + k] : 0.0f;
            for (int64_t t = 0; t < taps; t++)
                a += xs[p * step + off[t]] * w[t * f + f0 + k];
            y[p * f + f0 + k] = a;
        }
}

/* off[t]: the offset of tap t = (ky, kx, ch) from its window's corner in the padded input. */
static int64_t
s_offsets(const layer_window_t *g, int64_t wp, int64_t *off)
{
    int64_t t = 0;
    for (int64_t ky = 0; ky < g->kh; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++)
            for (int64_t ch = 0; ch < g->c; ch++)
                off[t++] = (ky * wp + kx) * g->c + ch;
    return t;
}

/* One thread's share of a direct pass: examples [n0, n1) of the batch. */
typedef struct {
    const layer_window_t *g;
    const float *x, *w, *b, *dy;
    float *xp, *y, *dw; /* dw: this share's own sums (thread 0: the caller's) */
    int64_t n0, n1;
} s_share_t;

static void *
s_forward_share(void *arg)
{
    const s_share_t *a = arg;
    const layer_window_t *g = a->g;
    int64_t hp, wp, f = g->filters, c = g->c, n = a->n1 - a->n0;
    s_padded(g, &hp, &wp);
    int64_t off[LAYER_MAX_TAPS];
    int64_t taps = s_offsets(g, wp, off);
    float *xp = a->xp + a->n0 * hp * wp * c, *y = a->y + a->n0 * g->oh * g->ow * f;
    s_pad(g, a->x + a->n0 * g->h * g->w * c, n, xp);
    for (int64_t i = 0; i < n; i++)
        for (int64_t oy = 0; oy < g->oh; oy++) {
            const float *row = xp + (i * hp + oy * g->sh) * wp * c;
            float *yr = y + (i * g->oh + oy) * g->ow * f;
            for (int64_t ox = 0; ox < g->ow; ox += S_PB) {
                int np = g->ow - ox < S_PB ? (int)(g->ow - ox) : S_PB;
                for (int64_t f0 = 0; f0 < f;) {
                    int64_t fb = f - f0 >= 16 ? 16 : f - f0 >= 8 ? 8 : f - f0;
                    s_fwd_block(row + ox * g->sw * c, g->sw * c, off, taps, a->w, f, f0, fb, np, a->b, yr + ox * f);
                    f0 += fb;
                }
            }
        }
    return NULL;
}

/* Runs fn over the batch cut into as many shares as BLAS has threads (the session's choice of threads per
   replica), share 0 on this thread; extra[s - 1] gets share s's dw (taps * filters floats) when dw_floats
   > 0 (the caller adds and frees them). A share whose thread cannot start runs here; without memory for
   the extra sums the batch is one share. Returns the shares. */
static int
s_split(const s_share_t *base, int64_t n, int64_t dw_floats, void *(*fn)(void *), s_share_t *shares, float **extra)
{
    int want = openblas_get_num_threads();
    want = want < 1 ? 1 : want > S_MAX_SHARES ? S_MAX_SHARES : want;
    if (want > n)
        want = n > 1 ? (int)n : 1;
    for (int k = 1; k < want && dw_floats > 0; k++)
        if (!(extra[k - 1] = malloc((size_t)dw_floats * sizeof(float)))) {
            while (--k >= 1)
                free(extra[k - 1]);
            want = 1;
        }
    pthread_t th[S_MAX_SHARES];
    bool running[S_MAX_SHARES] = {false};
    for (int k = 0; k < want; k++) {
        shares[k] = *base;
        shares[k].n0 = n * k / want;
        shares[k].n1 = n * (k + 1) / want;
        if (k > 0 && dw_floats > 0)
            shares[k].dw = extra[k - 1];
        if (k > 0)
            running[k] = pthread_create(&th[k], NULL, fn, &shares[k]) == 0;
    }
    for (int k = 0; k < want; k++)
        if (k == 0 || !running[k])
            fn(&shares[k]);
    for (int k = 1; k < want; k++)
        if (running[k])
            pthread_join(th[k], NULL);
    return want;
}

void
layer_conv2d_direct_forward(const layer_window_t *g, const float *x, int64_t n, const float *w, const float *b,
                            float *xp, float *y)
{
    s_share_t base = {.g = g, .x = x, .w = w, .b = b, .xp = xp, .y = y}, shares[S_MAX_SHARES];
    float *extra[S_MAX_SHARES];
    s_split(&base, n, 0, s_forward_share, shares, extra);
}

/* dw[t0 .. t0 + tb)[f0 .. f0 + fb) += the sum over the ow pixels of a row (from xs, pixel p at xs + p *
   step; its dy at dy + p * f) of x[tap] dy[f]: 4 taps by 16 or 8 filters in registers, else element-wise. */
S_CLONES static void
s_dw_block(const float *xs, int64_t step, const int64_t *off, int64_t t0, int64_t tb, const float *dy, int64_t ow,
           int64_t f, int64_t f0, int64_t fb, float *dw)
{
    if (tb == S_TB && (fb == 16 || fb == 8)) {
        v8 acc[S_TB][2] = {{{0}}};
        const int64_t o0 = off[t0], o1 = off[t0 + 1], o2 = off[t0 + 2], o3 = off[t0 + 3];
        if (fb == 16)
            for (int64_t p = 0; p < ow; p++) {
                const float *xpix = xs + p * step;
                v8 d0 = *(const vu8 *)(dy + p * f + f0), d1 = *(const vu8 *)(dy + p * f + f0 + 8);
                acc[0][0] += xpix[o0] * d0, acc[0][1] += xpix[o0] * d1;
                acc[1][0] += xpix[o1] * d0, acc[1][1] += xpix[o1] * d1;
                acc[2][0] += xpix[o2] * d0, acc[2][1] += xpix[o2] * d1;
                acc[3][0] += xpix[o3] * d0, acc[3][1] += xpix[o3] * d1;
            }
        else
            for (int64_t p = 0; p < ow; p++) {
                const float *xpix = xs + p * step;
                v8 d0 = *(const vu8 *)(dy + p * f + f0);
                acc[0][0] += xpix[o0] * d0;
                acc[1][0] += xpix[o1] * d0;
                acc[2][0] += xpix[o2] * d0;
                acc[3][0] += xpix[o3] * d0;
            }
        for (int t = 0; t < S_TB; t++)
            for (int v = 0; v < (int)fb / 8; v++)
                *(vu8 *)(dw + (t0 + t) * f + f0 + 8 * v) += acc[t][v];
        return;
    }
    if (fb % 8 == 0) {
        /* the last taps: one at a time, its filters' vectors in registers */
        for (int64_t t = 0; t < tb; t++)
            for (int64_t v = 0; v < fb / 8; v++) {
                v8 a = {0};
                const int64_t o = off[t0 + t];
                for (int64_t p = 0; p < ow; p++)
                    a += xs[p * step + o] * *(const vu8 *)(dy + p * f + f0 + 8 * v);
                *(vu8 *)(dw + (t0 + t) * f + f0 + 8 * v) += a;
            }
        return;
    }
    for (int64_t t = 0; t < tb; t++)
        for (int64_t k = 0; k < fb; k++) {
            float a = 0;
            for (int64_t p = 0; p < ow; p++)
                a += xs[p * step + off[t0 + t]] * dy[p * f + f0 + k];
            dw[(t0 + t) * f + f0 + k] += a;
        }
}

/* dxp[tap of each pixel] += dy . w[tap]: the padded input's gradient, pixel by pixel (rarely wanted: a
   layer with few input channels is most often the first). */
static void
s_dx_direct(const layer_window_t *g, const float *dy, int64_t n, const float *w, const int64_t *off, int64_t taps,
            float *dxp)
{
    int64_t hp, wp, f = g->filters, c = g->c;
    s_padded(g, &hp, &wp);
    memset(dxp, 0, (size_t)(n * hp * wp * c) * sizeof *dxp);
    for (int64_t i = 0; i < n; i++)
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const float *d = dy + ((i * g->oh + oy) * g->ow + ox) * f;
                float *corner = dxp + ((i * hp + oy * g->sh) * wp + ox * g->sw) * c;
                for (int64_t t = 0; t < taps; t++) {
                    float s = 0;
                    for (int64_t k = 0; k < f; k++)
                        s += d[k] * w[t * f + k];
                    corner[off[t]] += s;
                }
            }
}

static void *
s_dw_share(void *arg)
{
    const s_share_t *a = arg;
    const layer_window_t *g = a->g;
    int64_t hp, wp, f = g->filters, c = g->c;
    s_padded(g, &hp, &wp);
    int64_t off[LAYER_MAX_TAPS];
    int64_t taps = s_offsets(g, wp, off);
    memset(a->dw, 0, (size_t)(taps * f) * sizeof *a->dw);
    for (int64_t i = a->n0; i < a->n1; i++)
        for (int64_t oy = 0; oy < g->oh; oy++) {
            const float *row = a->xp + (i * hp + oy * g->sh) * wp * c, *dyr = a->dy + (i * g->oh + oy) * g->ow * f;
            for (int64_t t0 = 0; t0 < taps; t0 += S_TB)
                for (int64_t f0 = 0; f0 < f;) {
                    int64_t fb = f - f0 >= 16 ? 16 : f - f0 >= 8 ? 8 : f - f0;
                    s_dw_block(row, g->sw * c, off, t0, taps - t0 < S_TB ? taps - t0 : S_TB, dyr, g->ow, f, f0, fb,
                               a->dw);
                    f0 += fb;
                }
        }
    return NULL;
}

void
layer_conv2d_direct_backward(const layer_window_t *g, const float *dy, int64_t n, const float *w, float *xp,
                             float *dw, float *db, float *dx)
{
    int64_t hp, wp, f = g->filters, c = g->c;
    s_padded(g, &hp, &wp);
    int64_t off[LAYER_MAX_TAPS];
    int64_t taps = s_offsets(g, wp, off);
    s_share_t base = {.g = g, .dy = dy, .xp = xp, .dw = dw}, shares[S_MAX_SHARES];
    float *extra[S_MAX_SHARES];
    int k = s_split(&base, n, taps * f, s_dw_share, shares, extra);
    for (int s = 1; s < k; s++) {
        for (int64_t j = 0; j < taps * f; j++)
            dw[j] += extra[s - 1][j];
        free(extra[s - 1]);
    }
    if (db)
        layer_colsum(dy, n * g->oh * g->ow, f, db);
    if (!dx)
        return;
    /* xp is spent: it takes the padded input's gradient, cropped into dx */
    s_dx_direct(g, dy, n, w, off, taps, xp);
    int64_t cols = g->w < wp - g->pad_left ? g->w : wp - g->pad_left;
    memset(dx, 0, (size_t)(n * g->h * g->w * c) * sizeof *dx);
    for (int64_t i = 0; i < n; i++)
        for (int64_t y = 0; y < g->h && y + g->pad_top < hp; y++)
            memcpy(dx + (i * g->h + y) * g->w * c, xp + ((i * hp + y + g->pad_top) * wp + g->pad_left) * c,
                   (size_t)(cols * c) * sizeof *dx);
}
