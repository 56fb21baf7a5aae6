/* layer_dense: activations, the dense layer (one GEMM per batch) and inverted dropout. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "layers.h"

void
layer_act_forward(zdist_activation_t act, float *y, int64_t rows, int64_t cols)
{
    int64_t n = rows * cols;
    switch (act) {
    case ZDIST_ACT_LINEAR:
        break;
    case ZDIST_ACT_RELU:
        for (int64_t j = 0; j < n; j++)
            y[j] = y[j] > 0 ? y[j] : 0;
        break;
    case ZDIST_ACT_TANH:
        for (int64_t j = 0; j < n; j++)
            y[j] = tanhf(y[j]);
        break;
    case ZDIST_ACT_SIGMOID:
        for (int64_t j = 0; j < n; j++)
            y[j] = y[j] >= 0 ? 1.0f / (1.0f + expf(-y[j])) : expf(y[j]) / (1.0f + expf(y[j]));
        break;
    case ZDIST_ACT_SOFTMAX:
        for (int64_t r = 0; r < rows; r++) {
            float *z = y + r * cols, zmax = z[0];
            for (int64_t c = 1; c < cols; c++)
                zmax = z[c] > zmax ? z[c] : zmax;
            double sum = 0;
            for (int64_t c = 0; c < cols; c++) {
                z[c] = expf(z[c] - zmax);
                sum += z[c];
            }
            float inv = (float)(1.0 / sum);
            for (int64_t c = 0; c < cols; c++)
                z[c] *= inv;
        }
        break;
    }
}

void
layer_act_backward(zdist_activation_t act, const float *y, float *dy, int64_t rows, int64_t cols)
{
    int64_t n = rows * cols;
    switch (act) {
    case ZDIST_ACT_LINEAR:
        break;
    case ZDIST_ACT_RELU:
        for (int64_t j = 0; j < n; j++)
            dy[j] = y[j] > 0 ? dy[j] : 0;
        break;
    case ZDIST_ACT_TANH:
        for (int64_t j = 0; j < n; j++)
            dy[j] *= 1 - y[j] * y[j];
        break;
    case ZDIST_ACT_SIGMOID:
        for (int64_t j = 0; j < n; j++)
            dy[j] *= y[j] * (1 - y[j]);
        break;
    case ZDIST_ACT_SOFTMAX:
        /* dx = y * (dy - sum(dy * y)) per row */
        for (int64_t r = 0; r < rows; r++) {
            const float *s = y + r * cols;
            float *d = dy + r * cols;
            double dot = 0;
            for (int64_t c = 0; c < cols; c++)
                dot += (double)d[c] * s[c];
            for (int64_t c = 0; c < cols; c++)
                d[c] = s[c] * (d[c] - (float)dot);
        }
        break;
    }
}

void
layer_dense_forward(const float *x, int64_t n, int64_t in, int64_t out, const float *w, const float *b, float *y)
{
    layer_dense_forward_cols(x, n, in, out, 0, out, w, b, y);
}

void
layer_dense_forward_cols(const float *x, int64_t n, int64_t in, int64_t out, int64_t u0, int64_t u1, const float *w,
                         const float *b, float *y)
{
    if (n == 0 || u1 <= u0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)(u1 - u0), (int)in, 1.0f, x, (int)in, w + u0,
                (int)out, 0.0f, y + u0, (int)out);
    if (b)
        for (int64_t r = 0; r < n; r++) {
            float *yr = y + r * out;
            for (int64_t c = u0; c < u1; c++)
                yr[c] += b[c];
        }
}

void
layer_add_bias(float *y, int64_t rows, int64_t cols, const float *b)
{
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * cols;
        for (int64_t c = 0; c < cols; c++)
            yr[c] += b[c];
    }
}

/* 16 or 8 columns at a time over 4 rows' separate sums: a column's sum is not one chain of dependent adds
   through memory (a conv2d's bias gradient sums 10^5 rows). */
LAYER_CLONES void
layer_colsum_add(const float *m, int64_t rows, int64_t f, float *out)
{
    int64_t k = 0;
    for (; k + 16 <= f; k += 16) {
        layer_v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        int64_t r = 0;
        for (; r + 4 <= rows; r += 4) {
            a0 += *(const layer_vu16 *)(m + r * f + k);
            a1 += *(const layer_vu16 *)(m + (r + 1) * f + k);
            a2 += *(const layer_vu16 *)(m + (r + 2) * f + k);
            a3 += *(const layer_vu16 *)(m + (r + 3) * f + k);
        }
        for (; r < rows; r++)
            a0 += *(const layer_vu16 *)(m + r * f + k);
        *(layer_vu16 *)(out + k) += (a0 + a1) + (a2 + a3);
    }
    for (; k + 8 <= f; k += 8) {
        layer_v8 a0 = {0}, a1 = {0};
        int64_t r = 0;
        for (; r + 2 <= rows; r += 2) {
            a0 += *(const layer_vu8 *)(m + r * f + k);
            a1 += *(const layer_vu8 *)(m + (r + 1) * f + k);
        }
        for (; r < rows; r++)
            a0 += *(const layer_vu8 *)(m + r * f + k);
        *(layer_vu8 *)(out + k) += a0 + a1;
    }
    for (; k < f; k++) {
        float a = 0;
        for (int64_t r = 0; r < rows; r++)
            a += m[r * f + k];
        out[k] += a;
    }
}

void
layer_colsum(const float *m, int64_t rows, int64_t cols, float *out)
{
    memset(out, 0, (size_t)cols * sizeof *out);
    layer_colsum_add(m, rows, cols, out);
}

void
layer_dense_backward(const float *x, const float *dy, int64_t n, int64_t in, int64_t out, const float *w, float *dw,
                     float *db, float *dx)
{
    layer_dense_backward_cols(x, dy, n, in, out, 0, out, w, dw, db, dx);
}

void
layer_dense_backward_cols(const float *x, const float *dy, int64_t n, int64_t in, int64_t out, int64_t u0, int64_t u1,
                          const float *w, float *dw, float *db, float *dx)
{
    int64_t u = u1 - u0;
    if (u <= 0)
        return;
    if (n == 0) {
        for (int64_t r = 0; r < in; r++)
            memset(dw + r * out + u0, 0, (size_t)u * sizeof *dw);
        if (db)
            memset(db + u0, 0, (size_t)u * sizeof *db);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)in, (int)u, (int)n, 1.0f, x, (int)in, dy + u0, (int)out,
                0.0f, dw + u0, (int)out);
    if (db) {
        memset(db + u0, 0, (size_t)u * sizeof *db);
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = u0; c < u1; c++)
                db[c] += dy[i * out + c];
    }
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)in, (int)u, 1.0f, dy + u0, (int)out, w + u0,
                    (int)out, 0.0f, dx, (int)in);
}

/* splitmix64's finalizer: element i's uniform draw for a seed. */
static inline uint64_t
s_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void
layer_dropout(float *x, int64_t count, double rate, uint64_t seed)
{
    if (rate <= 0)
        return;
    /* keep when the draw's top 24 bits, as a fraction, are >= rate */
    uint32_t cut = (uint32_t)(rate * (double)(1u << 24));
    float scale = (float)(1.0 / (1.0 - rate));
    uint64_t base = s_mix(seed);
    for (int64_t i = 0; i < count; i++) {
        uint32_t u = (uint32_t)(s_mix(base + (uint64_t)i * 0x9e3779b97f4a7c15ull) >> 40);
        x[i] = u >= cut ? x[i] * scale : 0;
    }
}
