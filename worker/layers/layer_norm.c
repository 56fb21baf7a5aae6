/* layer_norm: batch normalization over the last axis, its statistics as sums that replicas all-reduce (global-batch statistics). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

/* Per-channel double accumulators live on the stack up to this many channels. */
#define S_STACK_CHANNELS 512

void
layer_bn_sums(const float *x, int64_t rows, int64_t c, const float *shift, float *sums)
{
    double stack[2 * S_STACK_CHANNELS];
    double *acc = c <= S_STACK_CHANNELS ? stack : calloc((size_t)(2 * c), sizeof *acc);
    if (!acc) {
        /* float accumulation: less accurate, never wrong by a lot at these sizes */
        memset(sums, 0, (size_t)(2 * c) * sizeof *sums);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t ch = 0; ch < c; ch++) {
                float d = x[r * c + ch] - shift[ch];
                sums[ch] += d;
                sums[c + ch] += d * d;
            }
        return;
    }
    memset(acc, 0, (size_t)(2 * c) * sizeof *acc);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        for (int64_t ch = 0; ch < c; ch++) {
            double d = (double)xr[ch] - shift[ch];
            acc[ch] += d;
            acc[c + ch] += d * d;
        }
    }
    for (int64_t j = 0; j < 2 * c; j++)
        sums[j] = (float)acc[j];
    if (acc != stack)
        free(acc);
}

void
layer_bn_moments(const float *sums, const float *shift, int64_t c, double count, float *mean, float *var)
{
    for (int64_t ch = 0; ch < c; ch++) {
        double m = count > 0 ? sums[ch] / count : 0;
        double v = count > 0 ? sums[c + ch] / count - m * m : 0;
        mean[ch] = (float)(shift[ch] + m);
        var[ch] = (float)(v > 0 ? v : 0);
    }
}

void
layer_bn_forward(const float *x, int64_t rows, int64_t c, const float *mean, const float *var, double eps,
                 const float *gamma, const float *beta, float *xhat, float *y)
{
    float inv_stack[S_STACK_CHANNELS];
    for (int64_t c0 = 0; c0 < c; c0 += S_STACK_CHANNELS) {
        int64_t c1 = c0 + S_STACK_CHANNELS < c ? c0 + S_STACK_CHANNELS : c;
        for (int64_t ch = c0; ch < c1; ch++)
            inv_stack[ch - c0] = (float)(1.0 / sqrt((double)var[ch] + eps));
        for (int64_t r = 0; r < rows; r++)
            for (int64_t ch = c0; ch < c1; ch++) {
                float h = (x[r * c + ch] - mean[ch]) * inv_stack[ch - c0];
                if (xhat)
                    xhat[r * c + ch] = h;
                y[r * c + ch] = (gamma ? gamma[ch] : 1.0f) * h + (beta ? beta[ch] : 0.0f);
            }
    }
}

void
layer_bn_backward_sums(const float *dy, const float *xhat, int64_t rows, int64_t c, float *dsums)
{
    memset(dsums, 0, (size_t)(2 * c) * sizeof *dsums);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t ch = 0; ch < c; ch++) {
            dsums[ch] += dy[r * c + ch];
            dsums[c + ch] += dy[r * c + ch] * xhat[r * c + ch];
        }
}

void
layer_bn_backward(const float *dy, const float *xhat, int64_t rows, int64_t c, const float *var, double eps,
                  const float *gamma, const float *dsums, double count, float *dx)
{
    /* dx = gamma / sigma * (dy - mean(dy) - xhat * mean(dy * xhat)), the
       means over every row the statistics came from. */
    float k[S_STACK_CHANNELS], mdy[S_STACK_CHANNELS], mdyx[S_STACK_CHANNELS];
    for (int64_t c0 = 0; c0 < c; c0 += S_STACK_CHANNELS) {
        int64_t c1 = c0 + S_STACK_CHANNELS < c ? c0 + S_STACK_CHANNELS : c;
        for (int64_t ch = c0; ch < c1; ch++) {
            k[ch - c0] = (float)((gamma ? gamma[ch] : 1.0) / sqrt((double)var[ch] + eps));
            mdy[ch - c0] = count > 0 ? (float)(dsums[ch] / count) : 0;
            mdyx[ch - c0] = count > 0 ? (float)(dsums[c + ch] / count) : 0;
        }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t ch = c0; ch < c1; ch++) {
                int64_t j = r * c + ch;
                dx[j] = k[ch - c0] * (dy[j] - mdy[ch - c0] - xhat[j] * mdyx[ch - c0]);
            }
    }
}
