/* layer_embed: embedding lookups of sparse (CSR) examples with sum / mean / sqrtn combiners, and concat of their dense features. */
#include <math.h>
#include <string.h>

#include "layers.h"
#include "zdist/embedding.h"

int64_t
layer_embedding_lookups(const int64_t *row_offsets, const int64_t *feature_ids, const float *values, int64_t n,
                        int64_t first_id, int64_t input_dim, int64_t *ids, float *weights, int64_t *offsets)
{
    int64_t m = 0;
    offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t k = row_offsets[i]; k < row_offsets[i + 1]; k++)
            if (input_dim == 0) { /* a dynamic table: the id as it is, any int64 */
                ids[m] = feature_ids[k];
                weights[m++] = values[k];
            } else if (feature_ids[k] >= first_id) {
                ids[m] = (feature_ids[k] - first_id) % input_dim;
                weights[m++] = values[k];
            }
        offsets[i + 1] = m;
    }
    return m;
}

/* What an example's weighted rows are multiplied by: libzdist's combiner
   factor (1 for sum, 1 / sum(w) for mean, 1 / sqrt(sum(w^2)) for sqrtn; 0
   when the example has no lookups or the denominator is 0). */
static float
s_scale(const float *weights, int64_t lo, int64_t hi, zdist_combiner_t combiner)
{
    return (float)zdist_combiner_scale(combiner, weights, lo, hi);
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
