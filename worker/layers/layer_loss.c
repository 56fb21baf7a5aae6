/* layer_loss: sparse softmax cross-entropy, sigmoid binary cross-entropy and squared error, each turning the output into its gradient. */
#include <errno.h>
#include <math.h>

#include "layers.h"

int
layer_loss_sparse_xent(float *logits, const int32_t *labels, int64_t n, int classes, float scale, double *ret_loss,
                       int64_t *ret_correct)
{
    double loss = 0;
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++) {
        float *z = logits + i * classes;
        int32_t y = labels[i];
        if (y < 0 || y >= classes)
            return -ERANGE;
        int arg = 0;
        for (int c = 1; c < classes; c++)
            if (z[c] > z[arg])
                arg = c;
        float zmax = z[arg];
        double zy = (double)z[y] - zmax;
        double sum = 0;
        for (int c = 0; c < classes; c++) {
            z[c] = expf(z[c] - zmax);
            sum += z[c];
        }
        loss += log(sum) - zy; /* -log softmax_y */
        correct += arg == y;
        float inv = (float)(1.0 / sum);
        for (int c = 0; c < classes; c++)
            z[c] = z[c] * inv * scale;
        z[y] -= scale;
    }
    *ret_loss = loss;
    *ret_correct = correct;
    return 0;
}

/* Example i's label as a float; NAN when it is not a number in [0, 1]
   (binary) or not finite. */
static double
s_label(zdist_dtype_t dtype, const void *labels, int64_t i)
{
    double y = dtype == ZDIST_DTYPE_INT32 ? (double)((const int32_t *)labels)[i] : (double)((const float *)labels)[i];
    return isfinite(y) ? y : NAN;
}

int
layer_loss_sigmoid_xent(float *logits, zdist_dtype_t label_dtype, const void *labels, int64_t n, float scale,
                        double *ret_loss, int64_t *ret_correct)
{
    double loss = 0;
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++) {
        double z = logits[i], y = s_label(label_dtype, labels, i);
        if (!(y >= 0 && y <= 1))
            return -ERANGE;
        /* max(z, 0) - z y + log(1 + exp(-|z|)), stable for any z */
        loss += (z > 0 ? z : 0) - z * y + log1p(exp(-fabs(z)));
        double p = z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z));
        correct += (p >= 0.5) == (y >= 0.5);
        logits[i] = (float)((p - y) * scale);
    }
    *ret_loss = loss;
    *ret_correct = correct;
    return 0;
}

int
layer_loss_mse(float *pred, zdist_dtype_t label_dtype, const void *labels, int64_t n, float scale, double *ret_loss)
{
    double loss = 0;
    for (int64_t i = 0; i < n; i++) {
        double y = s_label(label_dtype, labels, i);
        if (isnan(y))
            return -ERANGE;
        double r = pred[i] - y;
        loss += r * r;
        pred[i] = (float)(2 * r * scale);
    }
    *ret_loss = loss;
    return 0;
}
