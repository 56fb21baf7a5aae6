/* layer_conv: conv2d as im2col + one GEMM per batch (col2im for the input's gradient), or direct for few input channels (layer_conv_direct.c); max (with or without its argmax kept) and average pooling, NHWC. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "layers.h"

void
layer_window_from_spec(const zdist_layer_spec_t *l, layer_window_t *ret)
{
    *ret = (layer_window_t){.h = l->in.dims[0], .w = l->in.dims[1], .c = l->in.dims[2],
                            .kh = l->kernel[0], .kw = l->kernel[1], .sh = l->strides[0], .sw = l->strides[1],
                            .pad_top = l->pad_top, .pad_left = l->pad_left,
                            .oh = l->out.dims[0], .ow = l->out.dims[1],
                            .filters = l->kind == ZDIST_LAYER_CONV2D ? l->filters : 0};
}

int64_t
layer_conv2d_cols(const layer_window_t *g, int64_t n)
{
    return layer_conv2d_is_direct(g) ? layer_conv2d_direct_floats(g, n) : n * g->oh * g->ow * g->kh * g->kw * g->c;
}

/* Row (i, oy, ox) of the im2col matrix: the window's kh x kw x c inputs,
   zeros where it hangs over the padding. */
static void
s_im2col(const layer_window_t *g, const float *x, int64_t n, float *cols)
{
    size_t chunk = (size_t)g->c * sizeof(float);
    int64_t k = g->kh * g->kw * g->c;
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * g->h * g->w * g->c;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                float *row = cols + ((i * g->oh + oy) * g->ow + ox) * k;
                for (int64_t ky = 0; ky < g->kh; ky++) {
                    int64_t iy = oy * g->sh - g->pad_top + ky;
                    float *dst = row + ky * g->kw * g->c;
                    if (iy < 0 || iy >= g->h) {
                        memset(dst, 0, chunk * (size_t)g->kw);
                        continue;
                    }
                    int64_t ix0 = ox * g->sw - g->pad_left;
                    if (ix0 >= 0 && ix0 + g->kw <= g->w) {
                        memcpy(dst, xi + (iy * g->w + ix0) * g->c, chunk * (size_t)g->kw);
                        continue;
                    }
                    for (int64_t kx = 0; kx < g->kw; kx++) {
                        int64_t ix = ix0 + kx;
                        if (ix < 0 || ix >= g->w)
                            memset(dst + kx * g->c, 0, chunk);
                        else
                            memcpy(dst + kx * g->c, xi + (iy * g->w + ix) * g->c, chunk);
                    }
                }
            }
    }
}

/* The adjoint of s_im2col: every row's values added back where they came from. */
static void
s_col2im(const layer_window_t *g, const float *cols, int64_t n, float *dx)
{
    int64_t k = g->kh * g->kw * g->c;
    memset(dx, 0, (size_t)(n * g->h * g->w * g->c) * sizeof *dx);
    for (int64_t i = 0; i < n; i++) {
        float *di = dx + i * g->h * g->w * g->c;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const float *row = cols + ((i * g->oh + oy) * g->ow + ox) * k;
                for (int64_t ky = 0; ky < g->kh; ky++) {
                    int64_t iy = oy * g->sh - g->pad_top + ky;
                    if (iy < 0 || iy >= g->h)
                        continue;
                    for (int64_t kx = 0; kx < g->kw; kx++) {
                        int64_t ix = ox * g->sw - g->pad_left + kx;
                        if (ix < 0 || ix >= g->w)
                            continue;
                        const float *src = row + (ky * g->kw + kx) * g->c;
                        float *dst = di + (iy * g->w + ix) * g->c;
                        for (int64_t ch = 0; ch < g->c; ch++)
                            dst[ch] += src[ch];
                    }
                }
            }
    }
}

void
layer_conv2d_forward(const layer_window_t *g, const float *x, int64_t n, const float *w, const float *b, float *cols,
                     float *y)
{
    if (layer_conv2d_is_winograd(g))
        layer_conv2d_winograd_forward(g, x, n, w, b, cols, y);
    else if (layer_conv2d_is_direct(g))
        layer_conv2d_direct_forward(g, x, n, w, b, cols, y);
    else
        layer_conv2d_gemm_forward(g, x, n, w, b, cols, y);
}

void
layer_conv2d_backward(const layer_window_t *g, const float *dy, int64_t n, const float *w, float *cols, float *dw,
                      float *db, float *dx)
{
    if (layer_conv2d_is_winograd_dx(g))
        layer_conv2d_winograd_backward(g, dy, n, w, cols, dw, db, dx);
    else if (layer_conv2d_is_direct(g))
        layer_conv2d_direct_backward(g, dy, n, w, cols, dw, db, dx);
    else
        layer_conv2d_gemm_backward(g, dy, n, w, cols, dw, db, dx);
}

void
layer_conv2d_gemm_forward(const layer_window_t *g, const float *x, int64_t n, const float *w, const float *b,
                          float *cols, float *y)
{
    int64_t m = n * g->oh * g->ow, k = g->kh * g->kw * g->c, f = g->filters;
    if (m == 0)
        return;
    s_im2col(g, x, n, cols);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)f, (int)k, 1.0f, cols, (int)k, w, (int)f, 0.0f,
                y, (int)f);
    if (b)
        layer_add_bias(y, m, f, b);
}

void
layer_conv2d_gemm_backward(const layer_window_t *g, const float *dy, int64_t n, const float *w, float *cols,
                           float *dw, float *db, float *dx)
{
    int64_t m = n * g->oh * g->ow, k = g->kh * g->kw * g->c, f = g->filters;
    if (m == 0) {
        memset(dw, 0, (size_t)(k * f) * sizeof *dw);
        if (db)
            memset(db, 0, (size_t)f * sizeof *db);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)k, (int)f, (int)m, 1.0f, cols, (int)k, dy, (int)f, 0.0f,
                dw, (int)f);
    if (db)
        layer_colsum(dy, m, f, db);
    if (!dx)
        return;
    /* cols is spent: it takes d(cols) = dy w^T, scattered back by col2im. */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)k, (int)f, 1.0f, dy, (int)f, w, (int)f, 0.0f,
                cols, (int)k);
    s_col2im(g, cols, n, dx);
}

void
layer_block(layer_block_op_t op, float *t, int64_t h, int64_t w, int64_t c, float *part, int64_t n, int64_t y0,
            int64_t rows, int64_t x0, int64_t cols)
{
    size_t row_bytes = (size_t)(cols * c) * sizeof(float);
    for (int64_t i = 0; i < n; i++)
        for (int64_t y = 0; y < rows; y++) {
            float *big = t + ((i * h + y0 + y) * w + x0) * c, *small = part + (i * rows + y) * cols * c;
            if (op == LAYER_BLOCK_GATHER)
                memcpy(small, big, row_bytes);
            else if (op == LAYER_BLOCK_SCATTER)
                memcpy(big, small, row_bytes);
            else
                for (int64_t k = 0; k < cols * c; k++)
                    big[k] += small[k];
        }
}

/* Output range [o0, o1) of part p of `parts` along one axis, the input
   range [i0, i1) it reads clipped to [0, in), and the padding before it. */
static void
s_axis_part(int64_t out, int64_t in, int64_t k, int64_t stride, int64_t pad, int parts, int p, int64_t *o0,
            int64_t *o1, int64_t *i0, int64_t *i1, int64_t *ret_pad)
{
    *o0 = out * p / parts;
    *o1 = out * (p + 1) / parts;
    int64_t lo = *o0 * stride - pad, hi = (*o1 - 1) * stride - pad + k;
    *i0 = lo > 0 ? lo : 0;
    *i1 = hi < in ? hi : in;
    if (*o1 <= *o0)
        *i1 = *i0;
    *ret_pad = *i0 - lo;
}

void
layer_window_part(const layer_window_t *g, int hp, int wp, int ph, int pw, layer_window_t *ret, int64_t *iy0,
                  int64_t *ix0, int64_t *oy0, int64_t *ox0)
{
    int64_t oy1, ox1, iy1, ix1, pad_top, pad_left;
    s_axis_part(g->oh, g->h, g->kh, g->sh, g->pad_top, hp, ph, oy0, &oy1, iy0, &iy1, &pad_top);
    s_axis_part(g->ow, g->w, g->kw, g->sw, g->pad_left, wp, pw, ox0, &ox1, ix0, &ix1, &pad_left);
    *ret = *g;
    ret->h = iy1 - *iy0;
    ret->w = ix1 - *ix0;
    ret->pad_top = pad_top;
    ret->pad_left = pad_left;
    ret->oh = oy1 - *oy0;
    ret->ow = ox1 - *ox0;
}

/* The window of output (oy, ox) clipped to the input: [y0, y1) x [x0, x1). */
static inline void
s_clip(const layer_window_t *g, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1, int64_t *x0, int64_t *x1)
{
    *y0 = oy * g->sh - g->pad_top;
    *x0 = ox * g->sw - g->pad_left;
    *y1 = *y0 + g->kh < g->h ? *y0 + g->kh : g->h;
    *x1 = *x0 + g->kw < g->w ? *x0 + g->kw : g->w;
    *y0 = *y0 > 0 ? *y0 : 0;
    *x0 = *x0 > 0 ? *x0 : 0;
}

/* Both pools' forward pass: each window's maximum, or its mean over the
   elements inside the input. The loops over channels are branch-free, so
   they vectorize. */
static void
s_pool_forward(const layer_window_t *g, const float *x, int64_t n, float *y, bool max)
{
    int64_t c = g->c, in_size = g->h * g->w * c;
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * in_size;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t y0, y1, x0, x1;
                float *yo = y + ((i * g->oh + oy) * g->ow + ox) * c;
                s_clip(g, oy, ox, &y0, &y1, &x0, &x1);
                memcpy(yo, xi + (y0 * g->w + x0) * c, (size_t)c * sizeof *yo);
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = iy == y0 ? x0 + 1 : x0; ix < x1; ix++) {
                        const float *xp = xi + (iy * g->w + ix) * c;
                        if (max)
                            for (int64_t ch = 0; ch < c; ch++)
                                yo[ch] = xp[ch] > yo[ch] ? xp[ch] : yo[ch];
                        else
                            for (int64_t ch = 0; ch < c; ch++)
                                yo[ch] += xp[ch];
                    }
                if (max)
                    continue;
                float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
                for (int64_t ch = 0; ch < c; ch++)
                    yo[ch] *= inv;
            }
    }
}

void
layer_max_pool_forward(const layer_window_t *g, const float *x, int64_t n, float *y)
{
    s_pool_forward(g, x, n, y, true);
}

void
layer_avg_pool_forward(const layer_window_t *g, const float *x, int64_t n, float *y)
{
    s_pool_forward(g, x, n, y, false);
}

/* One output pixel of a max pool's backward pass: each channel's gradient dyo goes to the first element
   of the window [y0, y1) x [x0, x1) equal to its maximum yo, 16 (then 8) channels at a time with the found
   ones' mask in registers. add: windows overlap, so the gradients are added to what is there; else each
   element is written once (the others' zeros too). */
static inline __attribute__((always_inline)) void
s_max_pool_pixel(const layer_window_t *g, const float *xi, const float *yo, const float *dyo, int64_t y0,
                 int64_t y1, int64_t x0, int64_t x1, bool add, float *di)
{
    int64_t c = g->c, ch = 0;
    for (; ch + 16 <= c; ch += 16) {
        layer_vu16 yv = *(const layer_vu16 *)(yo + ch), dv = *(const layer_vu16 *)(dyo + ch);
        layer_mu16 done = {0};
        for (int64_t iy = y0; iy < y1; iy++)
            for (int64_t ix = x0; ix < x1; ix++) {
                int64_t k = (iy * g->w + ix) * c + ch;
                layer_mu16 hit = (*(const layer_vu16 *)(xi + k) == yv) & ~done;
                done |= hit;
                layer_vu16 part = (layer_vu16)((layer_mu16)dv & hit);
                *(layer_vu16 *)(di + k) = add ? *(layer_vu16 *)(di + k) + part : part;
            }
    }
    for (; ch + 8 <= c; ch += 8) {
        layer_vu8 yv = *(const layer_vu8 *)(yo + ch), dv = *(const layer_vu8 *)(dyo + ch);
        layer_mu8 done = {0};
        for (int64_t iy = y0; iy < y1; iy++)
            for (int64_t ix = x0; ix < x1; ix++) {
                int64_t k = (iy * g->w + ix) * c + ch;
                layer_mu8 hit = (*(const layer_vu8 *)(xi + k) == yv) & ~done;
                done |= hit;
                layer_vu8 part = (layer_vu8)((layer_mu8)dv & hit);
                *(layer_vu8 *)(di + k) = add ? *(layer_vu8 *)(di + k) + part : part;
            }
    }
    for (; ch < c; ch++) {
        bool found = false;
        for (int64_t iy = y0; iy < y1; iy++)
            for (int64_t ix = x0; ix < x1; ix++) {
                int64_t k = (iy * g->w + ix) * c + ch;
                bool hit = !found && xi[k] == yo[ch];
                found |= hit;
                di[k] = (add ? di[k] : 0.0f) + (hit ? dyo[ch] : 0.0f);
            }
    }
}

/* One example's max pool backward pass, pixel by pixel (one call of the CPU's build per example, not per
   pixel). */
LAYER_CLONES static void
s_max_pool_example(const layer_window_t *g, const float *xi, const float *yi, const float *dyi, bool add, float *di)
{
    for (int64_t oy = 0; oy < g->oh; oy++)
        for (int64_t ox = 0; ox < g->ow; ox++) {
            int64_t o = (oy * g->ow + ox) * g->c, y0, y1, x0, x1;
            s_clip(g, oy, ox, &y0, &y1, &x0, &x1);
            s_max_pool_pixel(g, xi, yi + o, dyi + o, y0, y1, x0, x1, add, di);
        }
}

void
layer_max_pool_backward(const layer_window_t *g, const float *x, const float *y, const float *dy, int64_t n,
                        float *dx)
{
    int64_t c = g->c, in_size = g->h * g->w * c;
    /* Windows that do not overlap write each element of theirs once; when they also tile the input (a
       pool's usual stride = size), nothing is left to clear beforehand. */
    bool add = g->sh < g->kh || g->sw < g->kw;
    bool tiles = g->sh == g->kh && g->sw == g->kw && g->oh * g->kh - g->pad_top >= g->h &&
                 g->ow * g->kw - g->pad_left >= g->w;
    if (!tiles)
        memset(dx, 0, (size_t)(n * in_size) * sizeof *dx);
    for (int64_t i = 0; i < n; i++) {
        int64_t o = i * g->oh * g->ow * c;
        s_max_pool_example(g, x + i * in_size, y + o, dy + o, add, dx + i * in_size);
    }
}

/* Byte vectors of the window positions, 16 and 8 of them, and their comparisons' masks (moved to and
   from memory by memcpy: any alignment, one instruction). */
typedef uint8_t s_b16 __attribute__((vector_size(16)));
typedef uint8_t s_b8 __attribute__((vector_size(8)));
typedef int8_t s_m16 __attribute__((vector_size(16)));
typedef int8_t s_m8 __attribute__((vector_size(8)));

/* Channels [ch, ch + width) of one output pixel as vectors VT (masks MT, positions BT): the maximum of the
   window [y0, y1) x [x0, x1) into yo and the position (from the unclipped corner (wy, wx)) of its first
   element that holds it into ao. The selects are bitwise, so they stay in registers. */
#define S_MAX_ARG(VT, MT, BT, xi, g, c, ch, y0, y1, x0, x1, wy, wx, yo, ao)                                          \
    do {                                                                                                               \
        VT best_ = *(const VT *)((xi) + ((y0) * (g)->w + (x0)) * (c) + (ch));                                          \
        MT at_ = (MT){0} + (int32_t)(((y0) - (wy)) * (g)->kw + (x0) - (wx));                                             \
        for (int64_t iy_ = (y0); iy_ < (y1); iy_++)                                                                    \
            for (int64_t ix_ = (x0); ix_ < (x1); ix_++) {                                                              \
                VT v_ = *(const VT *)((xi) + (iy_ * (g)->w + ix_) * (c) + (ch));                                       \
                MT m_ = (MT)(v_ > best_), k_ = (MT){0} + (int32_t)((iy_ - (wy)) * (g)->kw + ix_ - (wx));                     \
                best_ = (VT)(((MT)v_ & m_) | ((MT)best_ & ~m_));                                                       \
                at_ = (k_ & m_) | (at_ & ~m_);                                                                         \
            }                                                                                                          \
        *(VT *)((yo) + (ch)) = best_;                                                                                  \
        BT b_ = __builtin_convertvector(at_, BT);                                                                      \
        memcpy((ao) + (ch), &b_, sizeof b_);                                                                           \
    } while (0)

/* One example of layer_max_pool_forward_arg. */
LAYER_CLONES static void
s_max_pool_arg_example(const layer_window_t *g, const float *xi, float *yi, uint8_t *ai)
{
    int64_t c = g->c;
    for (int64_t oy = 0; oy < g->oh; oy++)
        for (int64_t ox = 0; ox < g->ow; ox++) {
            int64_t o = (oy * g->ow + ox) * c, y0, y1, x0, x1, ch = 0;
            int64_t wy = oy * g->sh - g->pad_top, wx = ox * g->sw - g->pad_left;
            s_clip(g, oy, ox, &y0, &y1, &x0, &x1);
            float *yo = yi + o;
            uint8_t *ao = ai + o;
            for (; ch + 16 <= c; ch += 16)
                S_MAX_ARG(layer_vu16, layer_mu16, s_b16, xi, g, c, ch, y0, y1, x0, x1, wy, wx, yo, ao);
            for (; ch + 8 <= c; ch += 8)
                S_MAX_ARG(layer_vu8, layer_mu8, s_b8, xi, g, c, ch, y0, y1, x0, x1, wy, wx, yo, ao);
            for (; ch < c; ch++) {
                float best = xi[(y0 * g->w + x0) * c + ch];
                int64_t at = (y0 - wy) * g->kw + x0 - wx;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++)
                        if (xi[(iy * g->w + ix) * c + ch] > best) {
                            best = xi[(iy * g->w + ix) * c + ch];
                            at = (iy - wy) * g->kw + ix - wx;
                        }
                yo[ch] = best;
                ao[ch] = (uint8_t)at;
            }
        }
}

void
layer_max_pool_forward_arg(const layer_window_t *g, const float *x, int64_t n, float *y, uint8_t *arg)
{
    int64_t in_size = g->h * g->w * g->c, out_size = g->oh * g->ow * g->c;
    for (int64_t i = 0; i < n; i++)
        s_max_pool_arg_example(g, x + i * in_size, y + i * out_size, arg + i * out_size);
}

/* The outputs whose windows hold input row iy (or column): [o0, o1). */
static void
s_covering(int64_t i, int64_t k, int64_t s, int64_t pad, int64_t out, int64_t *o0, int64_t *o1)
{
    int64_t lo = i + pad - k + 1;
    *o0 = lo <= 0 ? 0 : (lo + s - 1) / s;
    *o1 = (i + pad) / s + 1;
    *o1 = *o1 < out ? *o1 : out;
}

/* Channels [ch, ch + width) of input pixel (iy, ix): the sum of dy over the windows [oy0, oy1) x [ox0, ox1)
   that hold it whose maximum it is, written into di. */
#define S_MAX_GATHER(VT, MT, BT, BM, g, c, ch, iy, ix, oy0, oy1, ox0, ox1, ai, dyi, di)                                  \
    do {                                                                                                               \
        VT sum_ = (VT){0};                                                                                             \
        for (int64_t oy_ = (oy0); oy_ < (oy1); oy_++)                                                                  \
            for (int64_t ox_ = (ox0); ox_ < (ox1); ox_++) {                                                            \
                int64_t o_ = (oy_ * (g)->ow + ox_) * (c) + (ch);                                                       \
                int64_t k_ = ((iy) - (oy_ * (g)->sh - (g)->pad_top)) * (g)->kw + (ix) - (ox_ * (g)->sw - (g)->pad_left); \
                BT a_;                                                                                                 \
                memcpy(&a_, (ai) + o_, sizeof a_);                                                                     \
                MT hit_ = __builtin_convertvector((BM)(a_ == (BT){0} + (uint8_t)k_), MT);                              \
                sum_ += (VT)((MT) * (const VT *)((dyi) + o_) & hit_);                                                  \
            }                                                                                                          \
        *(VT *)((di) + ((iy) * (g)->w + (ix)) * (c) + (ch)) = sum_;                                                    \
    } while (0)

/* One example of layer_max_pool_backward_arg, input pixel by input pixel. */
LAYER_CLONES static void
s_max_pool_gather_example(const layer_window_t *g, const uint8_t *ai, const float *dyi, float *di)
{
    int64_t c = g->c;
    for (int64_t iy = 0; iy < g->h; iy++) {
        int64_t oy0, oy1, ox0 = 0, ox1 = 0;
        s_covering(iy, g->kh, g->sh, g->pad_top, g->oh, &oy0, &oy1);
        for (int64_t ix = 0; ix < g->w; ix++) {
            int64_t ch = 0;
            /* the columns' windows move right with ix: no division per pixel */
            while (ox0 < g->ow && ox0 * g->sw - g->pad_left + g->kw <= ix)
                ox0++;
            while (ox1 < g->ow && ox1 * g->sw - g->pad_left <= ix)
                ox1++;
            for (; ch + 16 <= c; ch += 16)
                S_MAX_GATHER(layer_vu16, layer_mu16, s_b16, s_m16, g, c, ch, iy, ix, oy0, oy1, ox0, ox1, ai, dyi, di);
            for (; ch + 8 <= c; ch += 8)
                S_MAX_GATHER(layer_vu8, layer_mu8, s_b8, s_m8, g, c, ch, iy, ix, oy0, oy1, ox0, ox1, ai, dyi, di);
            for (; ch < c; ch++) {
                float sum = 0;
                for (int64_t oy = oy0; oy < oy1; oy++)
                    for (int64_t ox = ox0; ox < ox1; ox++) {
                        int64_t o = (oy * g->ow + ox) * c + ch;
                        int64_t k = (iy - (oy * g->sh - g->pad_top)) * g->kw + ix - (ox * g->sw - g->pad_left);
                        sum += ai[o] == k ? dyi[o] : 0.0f;
                    }
                di[(iy * g->w + ix) * c + ch] = sum;
            }
        }
    }
}

void
layer_max_pool_backward_arg(const layer_window_t *g, const uint8_t *arg, const float *dy, int64_t n, float *dx)
{
    int64_t in_size = g->h * g->w * g->c, out_size = g->oh * g->ow * g->c;
    for (int64_t i = 0; i < n; i++)
        s_max_pool_gather_example(g, arg + i * out_size, dy + i * out_size, dx + i * in_size);
}

void
layer_avg_pool_backward(const layer_window_t *g, const float *dy, int64_t n, float *dx)
{
    int64_t c = g->c, in_size = g->h * g->w * c;
    memset(dx, 0, (size_t)(n * in_size) * sizeof *dx);
    for (int64_t i = 0; i < n; i++) {
        float *di = dx + i * in_size;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t y0, y1, x0, x1;
                const float *dyo = dy + ((i * g->oh + oy) * g->ow + ox) * c;
                s_clip(g, oy, ox, &y0, &y1, &x0, &x1);
                float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) {
                        float *dp = di + (iy * g->w + ix) * c;
                        for (int64_t ch = 0; ch < c; ch++)
                            dp[ch] += dyo[ch] * inv;
                    }
            }
    }
}
