/* layer_embed: embedding lookups of sparse (CSR) examples with sum / mean combiners, and concat of their dense features. */
#include <math.h>
#include <string.h>

#include "layers.h"

int64_t
layer_embedding_lookups(const int64_t *row_offsets, const int64_t *feature_ids, const float *values, int64_t n,
                        int64_t first_id, int64_t input_dim, int64_t *ids, float *weights, int64_t *offsets)
{
    int64_t m = 0;
    offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t k = row_offsets[i]; k < row_offsets[i + 1]; k++)
            if (feature_ids[k] >= first_id) {
                ids[m] = (feature_ids[k] - first_id) % input_dim;
                weights[m++] = values[k];
            }
        offsets[i + 1] = m;
    }
    return m;
}

/* What an example's weighted rows are divided by: 1 (sum), or the sum of
   its weights (mean); 0 when it has no lookups (its output is 0). */
static float
s_scale(const float *weights, int64_t lo, int64_t hi, zdist_combiner_t combiner)
{
    if (lo == hi)
        return 0;
    if (combiner == ZDIST_COMBINER_SUM)
        return 1;
    double sum = 0;
    for (int64_t k = lo; k < hi; k++)
        sum += weights[k];
    return fabs(sum) > 1e-30 ? (float)(1.0 / sum) : 0;
}

void
layer_embedding_forward(const float *rows, const float *weights, const int64_t *offsets, int64_t n, int64_t e,
                        zdist_combiner_t combiner, float *y)
{
    for (int64_t i = 0; i < n; i++) {
        float *yi = y + i * e;
        memset(yi, 0, (size_t)e * sizeof *yi);
        float s = s_scale(weights, offsets[i], offsets[i + 1], combiner);
        for (int64_t k = offsets[i]; k < offsets[i + 1]; k++) {
            float wk = weights[k] * s;
            const float *r = rows + k * e;
            for (int64_t j = 0; j < e; j++)
                yi[j] += wk * r[j];
        }
    }
}

void
layer_embedding_backward(const float *dy, const float *weights, const int64_t *offsets, int64_t n, int64_t e,
                         zdist_combiner_t combiner, float *drows)
{
    for (int64_t i = 0; i < n; i++) {
        const float *dyi = dy + i * e;
        float s = s_scale(weights, offsets[i], offsets[i + 1], combiner);
        for (int64_t k = offsets[i]; k < offsets[i + 1]; k++) {
            float wk = weights[k] * s;
            float *d = drows + k * e;
            for (int64_t j = 0; j < e; j++)
                d[j] = wk * dyi[j];
        }
    }
}

void
layer_concat_forward(const float *x, int64_t n, int64_t p, const int64_t *row_offsets, const int64_t *feature_ids,
                     const float *values, int64_t k, float *y)
{
    for (int64_t i = 0; i < n; i++) {
        float *yi = y + i * (p + k);
        memcpy(yi, x + i * p, (size_t)p * sizeof *yi);
        memset(yi + p, 0, (size_t)k * sizeof *yi);
        for (int64_t f = row_offsets[i]; f < row_offsets[i + 1]; f++)
            if (feature_ids[f] >= 0 && feature_ids[f] < k)
                yi[p + feature_ids[f]] += values[f];
    }
}

void
layer_concat_backward(const float *dy, int64_t n, int64_t p, int64_t k, float *dx)
{
    for (int64_t i = 0; i < n; i++)
        memmove(dx + i * p, dy + i * (p + k), (size_t)p * sizeof *dx);
}
