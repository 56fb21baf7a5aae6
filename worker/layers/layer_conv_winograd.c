/* layer_conv_winograd: 3x3 stride-1 convolutions by Winograd's F(2x2, 3x3), for the direct path's
   channel-rich shapes (forward, and the input's gradient as a convolution of its own). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

/* Tiles transformed and multiplied together: their transforms (16 x S_TILES x c, then x f floats) stay
   in L2, and each of the 16 products is S_TILES rows of the direct path's register tiles. */
enum { S_TILES = 64 };

/* F(2x2, 3x3) (Lavin and Gray, 2016): a 2x2 output tile is A^T [(G g G^T) . (B^T d B)] A over the 4x4
   input patch d at its corner, 16 multiplications per input channel and filter instead of 36; with
   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
   A^T = [1 1 1 0; 0 1 -1 -1]. Every coefficient is exact in float32, and the transforms add at most
   three numbers, so the results differ from the direct sums by rounding only. */
void
layer_winograd_kernel(const float *w, int64_t c, int64_t f, float *u)
{
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t k = 0; k < f; k++) {
            float g[3][3], t[4][3];
            for (int y = 0; y < 3; y++)
                for (int x = 0; x < 3; x++)
                    g[y][x] = w[((y * 3 + x) * c + ch) * f + k];
            for (int x = 0; x < 3; x++) {
                t[0][x] = g[0][x];
                t[1][x] = 0.5f * (g[0][x] + g[1][x] + g[2][x]);
                t[2][x] = 0.5f * (g[0][x] - g[1][x] + g[2][x]);
                t[3][x] = g[2][x];
            }
            for (int r = 0; r < 4; r++) {
                float *ur = u + (4 * r * c + ch) * f + k;
                ur[0] = t[r][0];
                ur[c * f] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
                ur[2 * c * f] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
                ur[3 * c * f] = t[r][2];
            }
        }
}

/* B^T d B of one patch (rows `row` floats apart, pixels c apart) for channels [ch, ch + width) as T, a
   vector of them or one float, into v[xi * vs + ch]. */
#define S_IN_TILE(T, d, row, c, ch, v, vs)                                                                            \
    do {                                                                                                               \
        T t_[4][4];                                                                                                    \
        for (int k_ = 0; k_ < 4; k_++) {                                                                               \
            const float *p_ = (d) + k_ * (c) + (ch);                                                                   \
            T d0 = *(const T *)p_, d1 = *(const T *)(p_ + (row)), d2 = *(const T *)(p_ + 2 * (row));                   \
            T d3 = *(const T *)(p_ + 3 * (row));                                                                       \
            t_[0][k_] = d0 - d2;                                                                                       \
            t_[1][k_] = d1 + d2;                                                                                       \
            t_[2][k_] = d2 - d1;                                                                                       \
            t_[3][k_] = d1 - d3;                                                                                       \
        }                                                                                                              \
        for (int r_ = 0; r_ < 4; r_++) {                                                                               \
            *(T *)((v) + (4 * r_) * (vs) + (ch)) = t_[r_][0] - t_[r_][2];                                              \
            *(T *)((v) + (4 * r_ + 1) * (vs) + (ch)) = t_[r_][1] + t_[r_][2];                                          \
            *(T *)((v) + (4 * r_ + 2) * (vs) + (ch)) = t_[r_][2] - t_[r_][1];                                          \
            *(T *)((v) + (4 * r_ + 3) * (vs) + (ch)) = t_[r_][1] - t_[r_][3];                                          \
        }                                                                                                              \
    } while (0)

/* The transform of one patch, 16 channels at a time, then 8, then one. */
static inline __attribute__((always_inline)) void
s_in_tile(const float *d, int64_t row, int64_t c, float *v, int64_t vs)
{
    int64_t ch = 0;
    for (; ch + 16 <= c; ch += 16)
        S_IN_TILE(layer_vu16, d, row, c, ch, v, vs);
    for (; ch + 8 <= c; ch += 8)
        S_IN_TILE(layer_vu8, d, row, c, ch, v, vs);
    for (; ch < c; ch++)
        S_IN_TILE(float, d, row, c, ch, v, vs);
}

/* Tile k of the pass: its example, and its output corner (2 ty, 2 tx). */
static void
s_tile(const layer_wino_t *a, int64_t k, int64_t *i, int64_t *oy, int64_t *ox)
{
    int64_t th = (a->oh + 1) / 2, tw = (a->ow + 1) / 2;
    *i = k / (th * tw);
    *oy = 2 * (k % (th * tw) / tw);
    *ox = 2 * (k % tw);
}

/* The transforms of tiles [k0, k0 + nt) into v; a patch that reaches past the rows or columns x has is
   copied into patch (16 c floats) with zeros there first. */
LAYER_CLONES static void
s_in_block(const layer_wino_t *a, int64_t k0, int nt, float *v, float *patch)
{
    int64_t c = a->c;
    for (int t = 0; t < nt; t++) {
        int64_t i, oy, ox;
        s_tile(a, k0 + t, &i, &oy, &ox);
        const float *d = a->x + i * a->ex + oy * a->row + ox * c;
        if (oy + 4 <= a->hx && ox + 4 <= a->wx) {
            s_in_tile(d, a->row, c, v + t * c, S_TILES * c);
            continue;
        }
        int64_t cols = a->wx - ox < 4 ? a->wx - ox : 4;
        memset(patch, 0, (size_t)(16 * c) * sizeof *patch);
        for (int y = 0; y < 4 && oy + y < a->hx; y++)
            memcpy(patch + y * 4 * c, d + y * a->row, (size_t)(cols * c) * sizeof *patch);
        s_in_tile(patch, 4 * c, c, v + t * c, S_TILES * c);
    }
}

/* A^T m A of one tile for filters [k, k + width) as T (m[xi * ms + k]), plus the bias, into y (f floats a
   pixel, rows ow pixels apart; the pixels right of or below the output left out). */
#define S_OUT_TILE(T, m, ms, k, bias, y, f, ow, right, down)                                                          \
    do {                                                                                                               \
        T u_[2][4];                                                                                                    \
        for (int x_ = 0; x_ < 4; x_++) {                                                                               \
            T m0 = *(const T *)((m) + x_ * (ms) + (k)), m1 = *(const T *)((m) + (4 + x_) * (ms) + (k));                \
            T m2 = *(const T *)((m) + (8 + x_) * (ms) + (k)), m3 = *(const T *)((m) + (12 + x_) * (ms) + (k));         \
            u_[0][x_] = m0 + m1 + m2;                                                                                  \
            u_[1][x_] = m1 - m2 - m3;                                                                                  \
        }                                                                                                              \
        *(T *)((y) + (k)) = u_[0][0] + u_[0][1] + u_[0][2] + (bias);                                                   \
        if (right)                                                                                                     \
            *(T *)((y) + (f) + (k)) = u_[0][1] - u_[0][2] - u_[0][3] + (bias);                                         \
        if (down)                                                                                                      \
            *(T *)((y) + (ow) * (f) + (k)) = u_[1][0] + u_[1][1] + u_[1][2] + (bias);                                  \
        if ((down) && (right))                                                                                         \
            *(T *)((y) + ((ow) + 1) * (f) + (k)) = u_[1][1] - u_[1][2] - u_[1][3] + (bias);                            \
    } while (0)

/* The outputs of tiles [k0, k0 + nt) from their products m[xi * S_TILES * f + t * f + k], 16 filters at a
   time, then 8, then one. */
LAYER_CLONES static void
s_out_block(const layer_wino_t *a, int64_t k0, int nt, const float *m)
{
    int64_t f = a->f, ms = S_TILES * f, ow = a->ow;
    for (int t = 0; t < nt; t++) {
        int64_t i, oy, ox, k = 0;
        s_tile(a, k0 + t, &i, &oy, &ox);
        float *y = a->y + ((i * a->oh + oy) * ow + ox) * f;
        bool down = oy + 1 < a->oh, right = ox + 1 < ow;
        const float *mt = m + t * f;
        for (; k + 16 <= f; k += 16) {
            layer_v16 bias = a->b ? (layer_v16) * (const layer_vu16 *)(a->b + k) : (layer_v16){0};
            S_OUT_TILE(layer_vu16, mt, ms, k, bias, y, f, ow, right, down);
        }
        for (; k + 8 <= f; k += 8) {
            layer_v8 bias = a->b ? (layer_v8) * (const layer_vu8 *)(a->b + k) : (layer_v8){0};
            S_OUT_TILE(layer_vu8, mt, ms, k, bias, y, f, ow, right, down);
        }
        for (; k < f; k++) {
            float bias = a->b ? a->b[k] : 0.0f;
            S_OUT_TILE(float, mt, ms, k, bias, y, f, ow, right, down);
        }
    }
}

int
layer_winograd_run(const layer_wino_t *a)
{
    int64_t c = a->c, f = a->f, tiles = a->n * ((a->oh + 1) / 2) * ((a->ow + 1) / 2);
    if (c > LAYER_MAX_TAPS)
        return -EINVAL;
    float *v = malloc((size_t)(16 * S_TILES * (c + f) + 16 * c) * sizeof *v);
    if (!v)
        return -ENOMEM;
    float *m = v + 16 * S_TILES * c, *patch = m + 16 * S_TILES * f;
    int64_t off[LAYER_MAX_TAPS];
    for (int64_t ch = 0; ch < c; ch++)
        off[ch] = ch;
    for (int64_t k0 = 0; k0 < tiles; k0 += S_TILES) {
        int nt = (int)(tiles - k0 < S_TILES ? tiles - k0 : S_TILES);
        s_in_block(a, k0, nt, v, patch);
        /* the 16 products m[xi] = v[xi] u[xi], each nt tiles x c by c x f, as convolutions of c taps */
        for (int xi = 0; xi < 16; xi++)
            layer_conv2d_direct_rows(v + xi * S_TILES * c, c, off, c, a->u + xi * c * f, f, nt, a->wide,
                                     m + xi * S_TILES * f);
        s_out_block(a, k0, nt, m);
    }
    free(v);
    return 0;
}
