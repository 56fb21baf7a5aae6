/* layer_conv_direct: conv2d by direct convolution for few input channels (C_in 1-4): the input padded once,
   outputs and kernel gradients accumulated in registers, no im2col matrix. */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

/* A forward tile keeps up to 8 output pixels by 32 filters in registers, a kernel-gradient tile up to 8
   taps by 32 filters; S_MAX_SHARES bounds the threads of one pass. */
enum { S_PB = 8, S_TB = 8, S_MAX_SHARES = 8 };

#define S_INLINE static inline __attribute__((always_inline))

/* The input's gradient as a convolution of its own (s_dx_share) for 8 input channels or more, when its taps
   (kh * kw * filters) fit; with fewer, pixel by pixel (s_dx_pixels). */
static bool
s_dx_transposed(const layer_window_t *g)
{
    return g->c >= 8 && g->kh * g->kw * g->filters <= LAYER_MAX_TAPS;
}

/* Measured against im2col + OpenBLAS (bench_layers --cpu, one thread): direct wins for 1-4 input channels
   and 8 filters or more once a window has 12 taps or more (5x5x1: 2.5x forward, 1.6x backward; 3x3x3 and
   5x5x3: 1.3-1.6x); at 3x3x1 (9 taps) GEMM's is as fast or faster on AVX2. The AVX-512 build is 2.5-4x
   faster than GEMM at 3x3x1 too, and faster for 8-64 input channels (14x14x16 24f 3x3 and 13x13x32 64f
   3x3, on a Zen 5). */
bool
layer_conv2d_is_direct(const layer_window_t *g)
{
    int64_t taps = g->kh * g->kw * g->c;
    if (g->filters < 8 || taps > LAYER_MAX_TAPS)
        return false;
    if (g->c <= 4)
        return taps >= (LAYER_WIDE() ? 9 : 12);
    return LAYER_WIDE() && g->c >= 8 && g->c <= 64 && s_dx_transposed(g);
}

/* Winograd's F(2x2, 3x3) computes 3x3 stride-1 windows whose tiles' transforms fit (both directions'
   channels at least 8, the direct path's taps within bounds). */
static bool
s_wino_shape(const layer_window_t *g)
{
    return g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->c >= 8 && g->filters >= 8 &&
           g->kh * g->kw * g->c <= LAYER_MAX_TAPS && s_dx_transposed(g);
}

bool
layer_conv2d_is_winograd(const layer_window_t *g)
{
    return s_wino_shape(g) && layer_conv2d_is_direct(g);
}

/* Measured (bench_layers --cpu, one thread, AVX-512): Winograd's input gradient is faster than the direct
   one at 14x14x16 24f (its dy has 24 channels) but slower at 13x13x32 64f, where the direct tiles of 64
   taps per pixel run near the FMA units' peak and the 13x13 input leaves a row and a column of tiles
   half empty. */
bool
layer_conv2d_is_winograd_dx(const layer_window_t *g)
{
    return layer_conv2d_is_winograd(g) && g->filters <= 32;
}

/* Rows and columns of the padded input the windows read. */
static void
s_padded(const layer_window_t *g, int64_t *hp, int64_t *wp)
{
    *hp = (g->oh - 1) * g->sh + g->kh;
    *wp = (g->ow - 1) * g->sw + g->kw;
}

/* Rows and columns of s_dx_share's grid: dy spread over the padded input's (the stride's gaps zeros)
   after kh - 1 rows and kw - 1 columns of zeros, as far as the windows read. */
static void
s_grid(const layer_window_t *g, int64_t *hd, int64_t *wd)
{
    int64_t hp, wp;
    s_padded(g, &hp, &wp);
    *hd = (g->h + g->pad_top > hp - g->kh + 1 ? g->h + g->pad_top : hp - g->kh + 1) + g->kh - 1;
    *wd = (g->w + g->pad_left > wp - g->kw + 1 ? g->w + g->pad_left : wp - g->kw + 1) + g->kw - 1;
}

int64_t
layer_conv2d_direct_floats(const layer_window_t *g, int64_t n)
{
    int64_t hp, wp, hd, wd;
    s_padded(g, &hp, &wp);
    s_grid(g, &hd, &wd);
    int64_t padded = n * hp * wp * g->c, grid = n * hd * wd * g->filters;
    return s_dx_transposed(g) && grid > padded ? grid : padded;
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

/* np pixels (pixel p at xs + p * step) by nv vectors of 16 filters from f0, over the taps: the outputs
   stay in registers until the last tap. np and nv are constants where it is inlined. */
S_INLINE void
s_fwd_tile(const float *xs, int64_t step, const int64_t *off, int64_t taps, const float *w, int64_t f, int64_t f0,
           const float *b, float *y, const int np, const int nv)
{
    layer_v16 acc[S_PB][2];
    for (int v = 0; v < nv; v++) {
        layer_v16 bv = b ? *(const layer_vu16 *)(b + f0 + 16 * v) : (layer_v16){0};
        for (int p = 0; p < np; p++)
            acc[p][v] = bv;
    }
    for (int64_t t = 0; t < taps; t++) {
        const float *wt = w + t * f + f0, *xt = xs + off[t];
        layer_v16 w0 = *(const layer_vu16 *)wt, w1 = nv > 1 ? *(const layer_vu16 *)(wt + 16) : w0;
        for (int p = 0; p < np; p++) {
            float xv = xt[p * step];
            acc[p][0] += xv * w0;
            if (nv > 1)
                acc[p][1] += xv * w1;
        }
    }
    for (int p = 0; p < np; p++)
        for (int v = 0; v < nv; v++)
            *(layer_vu16 *)(y + p * f + f0 + 16 * v) = acc[p][v];
}

/* The same for np pixels by 8 filters. */
S_INLINE void
s_fwd_tile8(const float *xs, int64_t step, const int64_t *off, int64_t taps, const float *w, int64_t f, int64_t f0,
            const float *b, float *y, const int np)
{
    layer_v8 acc[S_PB], bv = b ? *(const layer_vu8 *)(b + f0) : (layer_v8){0};
    for (int p = 0; p < np; p++)
        acc[p] = bv;
    for (int64_t t = 0; t < taps; t++) {
        layer_v8 w0 = *(const layer_vu8 *)(w + t * f + f0);
        for (int p = 0; p < np; p++)
            acc[p] += xs[p * step + off[t]] * w0;
    }
    for (int p = 0; p < np; p++)
        *(layer_vu8 *)(y + p * f + f0) = acc[p];
}

/* One tile of np pixels (1-8) by nv vectors of 16 filters (0: one of 8), each count its own code so that
   its accumulators stay in registers. */
S_INLINE void
s_fwd_tile_n(const float *xs, int64_t step, const int64_t *off, int64_t taps, const float *w, int64_t f, int64_t f0,
             const float *b, float *y, int np, int nv)
{
#define S_CASE(k)                                                                                                      \
    case k:                                                                                                            \
        if (nv == 2)                                                                                                   \
            s_fwd_tile(xs, step, off, taps, w, f, f0, b, y, k, 2);                                                     \
        else if (nv == 1)                                                                                              \
            s_fwd_tile(xs, step, off, taps, w, f, f0, b, y, k, 1);                                                     \
        else                                                                                                           \
            s_fwd_tile8(xs, step, off, taps, w, f, f0, b, y, k);                                                       \
        break;
    switch (np) {
        S_CASE(1) S_CASE(2) S_CASE(3) S_CASE(4) S_CASE(5) S_CASE(6) S_CASE(7) S_CASE(8)
    }
#undef S_CASE
}

/* Outputs y[p][f0 .. f0 + fb) of np pixels in a row (fb 32 wide only, 16 or 8, or the last few filters),
   from the padded input at xs (pixel p at xs + p * step) and the taps' offsets: in as few tiles of at
   most 8 pixels (4 when not wide) as they fill, of even sizes (11 pixels: 6 and 5, not 8 and three of one,
   whose few accumulators wait on the FMAs' latency); filters that fill no vector element by element. */
LAYER_CLONES static void
s_fwd_block(const float *xs, int64_t step, const int64_t *off, int64_t taps, const float *w, int64_t f, int64_t f0,
            int64_t fb, int np, bool wide, const float *b, float *y)
{
    int p = 0;
    if (fb == 32 || fb == 16 || fb == 8) {
        int big = wide ? 8 : 4;
        for (int tiles = (np + big - 1) / big; tiles > 0; tiles--) {
            int k = (np - p + tiles - 1) / tiles;
            s_fwd_tile_n(xs + p * step, step, off, taps, w, f, f0, b, y + p * f, k, (int)fb / 16);
            p += k;
        }
        return;
    }
    for (; p < np; p++)
        for (int64_t k = 0; k < fb; k++) {
            float a = b ? b[f0 + k] : 0.0f;
            for (int64_t t = 0; t < taps; t++)
                a += xs[p * step + off[t]] * w[t * f + f0 + k];
            y[p * f + f0 + k] = a;
        }
}

/* The filters of the next block from f0: 32 (wide builds), 16, 8, or what is left. */
static int64_t
s_filter_block(int64_t f, int64_t f0, bool wide)
{
    int64_t left = f - f0;
    return wide && left >= 32 ? 32 : left >= 16 ? 16 : left >= 8 ? 8 : left;
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
    float *xp, *y, *dw, *db; /* dw, db: this share's own sums (thread 0: the caller's; db NULL: not wanted) */
    float *dx;
    const float *u; /* Winograd's transformed kernel (NULL: the direct tiles) */
    int64_t n0, n1;
    bool wide; /* the AVX-512 build runs: tiles for 32 vector registers */
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
    layer_wino_t wa = {.x = xp, .ex = hp * wp * c, .row = wp * c, .hx = hp, .wx = wp, .c = c, .n = n, .oh = g->oh,
                       .ow = g->ow, .f = f, .u = a->u, .b = a->b, .y = y, .wide = a->wide};
    if (a->u && layer_winograd_run(&wa) == 0)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        for (int64_t oy = 0; oy < g->oh; oy++) {
            const float *row = xp + (i * hp + oy * g->sh) * wp * c;
            float *yr = y + (i * g->oh + oy) * g->ow * f;
            for (int64_t f0 = 0, fb; f0 < f; f0 += fb) {
                fb = s_filter_block(f, f0, a->wide);
                s_fwd_block(row, g->sw * c, off, taps, a->w, f, f0, fb, (int)g->ow, a->wide, a->b, yr);
            }
        }
    return NULL;
}

/* Runs fn over the batch cut into as many shares as BLAS has threads (the session's choice of threads per
   replica), share 0 on this thread; extra[s - 1] gets share s's dw and db (taps * filters floats, then
   filters) when dw_floats (their sum) > 0 (the caller adds and frees them). A share whose thread cannot
   start runs here; without memory for the extra sums the batch is one share. Returns the shares. */
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
        if (k > 0 && dw_floats > 0) {
            shares[k].dw = extra[k - 1];
            shares[k].db = base->db ? extra[k - 1] + dw_floats - base->g->filters : NULL;
        }
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
layer_conv2d_direct_rows(const float *xs, int64_t step, const int64_t *off, int64_t taps, const float *w, int64_t f,
                         int np, bool wide, float *y)
{
    for (int64_t f0 = 0, fb; f0 < f; f0 += fb) {
        fb = s_filter_block(f, f0, wide);
        s_fwd_block(xs, step, off, taps, w, f, f0, fb, np, wide, NULL, y);
    }
}

/* The forward pass, by Winograd's tiles when wino (and the kernel's transform finds memory). */
static void
s_forward(const layer_window_t *g, const float *x, int64_t n, const float *w, const float *b, float *xp, float *y,
          bool wino)
{
    float *u = wino && s_wino_shape(g) ? malloc((size_t)(16 * g->c * g->filters) * sizeof *u) : NULL;
    if (u)
        layer_winograd_kernel(w, g->c, g->filters, u);
    s_share_t base = {.g = g, .x = x, .w = w, .b = b, .xp = xp, .y = y, .u = u, .wide = LAYER_WIDE()};
    s_share_t shares[S_MAX_SHARES];
    float *extra[S_MAX_SHARES];
    s_split(&base, n, 0, s_forward_share, shares, extra);
    free(u);
}

void
layer_conv2d_direct_forward(const layer_window_t *g, const float *x, int64_t n, const float *w, const float *b,
                            float *xp, float *y)
{
    s_forward(g, x, n, w, b, xp, y, false);
}

void
layer_conv2d_winograd_forward(const layer_window_t *g, const float *x, int64_t n, const float *w, const float *b,
                              float *xp, float *y)
{
    s_forward(g, x, n, w, b, xp, y, true);
}

/* One example's windows as a kernel-gradient tile reads them: oh rows of ow pixels, the pixels step floats
   apart in the padded input xs, the rows `row` floats apart; dy its output gradient [oh, ow, f]. */
typedef struct {
    const float *xs, *dy;
    int64_t oh, ow, f, step, row;
} s_rows_t;

/* dw[t][f0 + 16 v + k] += the sum over the example's pixels of x[off[t]] dy[f0 + 16 v + k], for nt taps
   (dw and off at the first) and nv vectors of 16 filters, in registers until the last pixel. */
S_INLINE void
s_dw_tile(const s_rows_t *r, const int64_t *off, int64_t f0, float *dw, const int nt, const int nv)
{
    layer_v16 acc[S_TB][2];
    int64_t o[S_TB];
    for (int t = 0; t < nt; t++) {
        o[t] = off[t];
        acc[t][0] = acc[t][1] = (layer_v16){0};
    }
    for (int64_t oy = 0; oy < r->oh; oy++) {
        const float *xs = r->xs + oy * r->row, *d = r->dy + oy * r->ow * r->f + f0;
        for (int64_t p = 0; p < r->ow; p++) {
            const float *xpix = xs + p * r->step, *dp = d + p * r->f;
            layer_v16 d0 = *(const layer_vu16 *)dp, d1 = nv > 1 ? *(const layer_vu16 *)(dp + 16) : d0;
            for (int t = 0; t < nt; t++) {
                float xv = xpix[o[t]];
                acc[t][0] += xv * d0;
                if (nv > 1)
                    acc[t][1] += xv * d1;
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int v = 0; v < nv; v++)
            *(layer_vu16 *)(dw + t * r->f + f0 + 16 * v) += acc[t][v];
}

/* The same for one vector of 8 filters. */
S_INLINE void
s_dw_tile8(const s_rows_t *r, const int64_t *off, int64_t f0, float *dw, const int nt)
{
    layer_v8 acc[S_TB];
    int64_t o[S_TB];
    for (int t = 0; t < nt; t++) {
        o[t] = off[t];
        acc[t] = (layer_v8){0};
    }
    for (int64_t oy = 0; oy < r->oh; oy++) {
        const float *xs = r->xs + oy * r->row, *d = r->dy + oy * r->ow * r->f + f0;
        for (int64_t p = 0; p < r->ow; p++) {
            const float *xpix = xs + p * r->step;
            layer_v8 d0 = *(const layer_vu8 *)(d + p * r->f);
            for (int t = 0; t < nt; t++)
                acc[t] += xpix[o[t]] * d0;
        }
    }
    for (int t = 0; t < nt; t++)
        *(layer_vu8 *)(dw + t * r->f + f0) += acc[t];
}

/* One tile of nt taps (1-8) by nv vectors of 16 filters (0: one of 8), each count its own code so that its
   accumulators stay in registers. */
S_INLINE void
s_dw_tile_n(const s_rows_t *r, const int64_t *off, int64_t f0, float *dw, int nt, int nv)
{
#define S_CASE(k)                                                                                                      \
    case k:                                                                                                            \
        if (nv == 2)                                                                                                   \
            s_dw_tile(r, off, f0, dw, k, 2);                                                                           \
        else if (nv == 1)                                                                                              \
            s_dw_tile(r, off, f0, dw, k, 1);                                                                           \
        else                                                                                                           \
            s_dw_tile8(r, off, f0, dw, k);                                                                             \
        break;
    switch (nt) {
        S_CASE(1) S_CASE(2) S_CASE(3) S_CASE(4) S_CASE(5) S_CASE(6) S_CASE(7) S_CASE(8)
    }
#undef S_CASE
}

/* One example's share of dw[taps][f0 .. f0 + fb) (fb as s_filter_block gives it): the taps in as few tiles
   of at most 8 (4 for 16 filters when not wide: 8 AVX registers) as they fill, of even sizes (25 taps:
   7, 6, 6, 6), so that no tile is left with too few accumulators to hide the FMAs' latency; the last few
   filters element by element. */
LAYER_CLONES static void
s_dw_block(const s_rows_t *r, const int64_t *off, int64_t taps, int64_t f0, int64_t fb, bool wide, float *dw)
{
    int64_t t = 0;
    if (fb == 32 || fb == 16 || fb == 8) {
        int big = fb == 16 && !wide ? 4 : 8;
        for (int64_t tiles = (taps + big - 1) / big; tiles > 0; tiles--) {
            int nt = (int)((taps - t + tiles - 1) / tiles);
            s_dw_tile_n(r, off + t, f0, dw + t * r->f, nt, (int)fb / 16);
            t += nt;
        }
        return;
    }
    for (; t < taps; t++)
        for (int64_t k = f0; k < f0 + fb; k++) {
            float a = 0;
            for (int64_t oy = 0; oy < r->oh; oy++)
                for (int64_t p = 0; p < r->ow; p++)
                    a += r->xs[oy * r->row + p * r->step + off[t]] * r->dy[(oy * r->ow + p) * r->f + k];
            dw[t * r->f + k] += a;
        }
}

/* dxp[tap of each pixel] += dy . w[tap]: the padded input's gradient, pixel by pixel (rarely wanted: a
   layer with few input channels is most often the first). */
static void
s_dx_pixels(const layer_window_t *g, const float *dy, int64_t n, const float *w, const int64_t *off, int64_t taps,
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
    if (a->db)
        memset(a->db, 0, (size_t)f * sizeof *a->db);
    for (int64_t i = a->n0; i < a->n1; i++) {
        s_rows_t r = {.xs = a->xp + i * hp * wp * c, .dy = a->dy + i * g->oh * g->ow * f, .oh = g->oh,
                      .ow = g->ow, .f = f, .step = g->sw * c, .row = g->sh * wp * c};
        for (int64_t f0 = 0, fb; f0 < f; f0 += fb) {
            fb = s_filter_block(f, f0, a->wide);
            s_dw_block(&r, off, taps, f0, fb, a->wide, a->dw);
        }
        if (a->db) /* while the example's dy is in cache */
            layer_colsum_add(r.dy, g->oh * g->ow, f, a->db);
    }
    return NULL;
}

/* Examples [n0, n1) of the input's gradient as a convolution of its own: the grid (s_grid, in a->xp) holds
   dy at each window's corner, shifted by kh - 1 rows and kw - 1 columns; dx[iy][ix] is then the grid's
   window at (iy + pad_top, ix + pad_left) times the kernel turned around (a->w: taps (a, b, k) of
   w[kh-1-a][kw-1-b][.][k], c "filters"), which the forward tiles compute, every element of dx written. */
static void *
s_dx_share(void *arg)
{
    const s_share_t *a = arg;
    const layer_window_t *g = a->g;
    int64_t hd, wd, f = g->filters, c = g->c, n = a->n1 - a->n0, t = 0;
    s_grid(g, &hd, &wd);
    int64_t off[LAYER_MAX_TAPS];
    for (int64_t ky = 0; ky < g->kh; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++)
            for (int64_t k = 0; k < f; k++)
                off[t++] = (ky * wd + kx) * f + k;
    float *grid = a->xp + a->n0 * hd * wd * f;
    const float *dy = a->dy + a->n0 * g->oh * g->ow * f;
    memset(grid, 0, (size_t)(n * hd * wd * f) * sizeof *grid);
    for (int64_t i = 0; i < n; i++)
        for (int64_t oy = 0; oy < g->oh; oy++) {
            float *row = grid + ((i * hd + oy * g->sh + g->kh - 1) * wd + g->kw - 1) * f;
            const float *d = dy + (i * g->oh + oy) * g->ow * f;
            if (g->sw == 1)
                memcpy(row, d, (size_t)(g->ow * f) * sizeof *row);
            else
                for (int64_t ox = 0; ox < g->ow; ox++)
                    memcpy(row + ox * g->sw * f, d + ox * f, (size_t)f * sizeof *row);
        }
    layer_wino_t wa = {.x = grid + (g->pad_top * wd + g->pad_left) * f, .ex = hd * wd * f, .row = wd * f,
                       .hx = hd - g->pad_top, .wx = wd - g->pad_left, .c = f, .n = n, .oh = g->h, .ow = g->w,
                       .f = c, .u = a->u, .y = a->dx + a->n0 * g->h * g->w * c, .wide = a->wide};
    if (a->u && layer_winograd_run(&wa) == 0)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        for (int64_t iy = 0; iy < g->h; iy++) {
            const float *row = grid + ((i * hd + iy + g->pad_top) * wd + g->pad_left) * f;
            float *dxr = a->dx + ((a->n0 + i) * g->h + iy) * g->w * c;
            for (int64_t c0 = 0, cb; c0 < c; c0 += cb) {
                cb = s_filter_block(c, c0, a->wide);
                s_fwd_block(row, f, off, t, a->w, c, c0, cb, (int)g->w, a->wide, NULL, dxr);
            }
        }
    return NULL;
}

/* dx by s_dx_share over the batch's shares (by Winograd's tiles when wino and there is memory for them), or
   without memory for the turned kernel pixel by pixel. */
static void
s_dx(const layer_window_t *g, const float *dy, int64_t n, const float *w, float *xp, float *dx, bool wino)
{
    int64_t hp, wp, f = g->filters, c = g->c, kk = g->kh * g->kw;
    s_padded(g, &hp, &wp);
    float *wt = s_dx_transposed(g) ? malloc((size_t)(kk * f * c) * sizeof *wt) : NULL;
    if (wt) {
        for (int64_t t = 0; t < kk; t++)
            for (int64_t ch = 0; ch < c; ch++)
                for (int64_t k = 0; k < f; k++)
                    wt[((kk - 1 - t) * f + k) * c + ch] = w[(t * c + ch) * f + k];
        float *u = wino && s_wino_shape(g) ? malloc((size_t)(16 * f * c) * sizeof *u) : NULL;
        if (u) /* the turned kernel has f input channels and c filters */
            layer_winograd_kernel(wt, f, c, u);
        s_share_t base = {.g = g, .dy = dy, .w = wt, .xp = xp, .dx = dx, .u = u, .wide = LAYER_WIDE()};
        s_share_t shares[S_MAX_SHARES];
        float *extra[S_MAX_SHARES];
        s_split(&base, n, 0, s_dx_share, shares, extra);
        free(u);
        free(wt);
        return;
    }
    /* xp takes the padded input's gradient, cropped into dx */
    int64_t off[LAYER_MAX_TAPS];
    int64_t taps = s_offsets(g, wp, off);
    s_dx_pixels(g, dy, n, w, off, taps, xp);
    int64_t cols = g->w < wp - g->pad_left ? g->w : wp - g->pad_left;
    memset(dx, 0, (size_t)(n * g->h * g->w * c) * sizeof *dx);
    for (int64_t i = 0; i < n; i++)
        for (int64_t y = 0; y < g->h && y + g->pad_top < hp; y++)
            memcpy(dx + (i * g->h + y) * g->w * c, xp + ((i * hp + y + g->pad_top) * wp + g->pad_left) * c,
                   (size_t)(cols * c) * sizeof *dx);
}

/* The kernel's gradient by the direct tiles, then the input's (by Winograd's tiles when wino). */
static void
s_backward(const layer_window_t *g, const float *dy, int64_t n, const float *w, float *xp, float *dw, float *db,
           float *dx, bool wino)
{
    int64_t hp, wp, f = g->filters;
    s_padded(g, &hp, &wp);
    int64_t taps = g->kh * g->kw * g->c;
    s_share_t base = {.g = g, .dy = dy, .xp = xp, .dw = dw, .db = db, .wide = LAYER_WIDE()}, shares[S_MAX_SHARES];
    float *extra[S_MAX_SHARES];
    int k = s_split(&base, n, taps * f + f, s_dw_share, shares, extra);
    for (int s = 1; s < k; s++) {
        for (int64_t j = 0; j < taps * f; j++)
            dw[j] += extra[s - 1][j];
        for (int64_t j = 0; db && j < f; j++)
            db[j] += extra[s - 1][taps * f + j];
        free(extra[s - 1]);
    }
    if (dx) /* xp is spent */
        s_dx(g, dy, n, w, xp, dx, wino);
}

void
layer_conv2d_direct_backward(const layer_window_t *g, const float *dy, int64_t n, const float *w, float *xp,
                             float *dw, float *db, float *dx)
{
    s_backward(g, dy, n, w, xp, dw, db, dx, false);
}

void
layer_conv2d_winograd_backward(const layer_window_t *g, const float *dy, int64_t n, const float *w, float *xp,
                               float *dw, float *db, float *dx)
{
    s_backward(g, dy, n, w, xp, dw, db, dx, true);
}
