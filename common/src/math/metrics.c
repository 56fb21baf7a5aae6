/* zdist metrics: Keras's thresholded ROC AUC, the exact AUC, log loss. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/metrics.h"

#define S_KERAS_EPSILON 1e-7

struct zdist_auc_t {
    int num_thresholds; /* 0: exact */
    /* Thresholded: hist_pos[k] / hist_neg[k] count the positives and
       negatives that are above exactly the k lowest thresholds; the
       confusion counts at threshold t are the sums over k > t. */
    double *tp, *fp;
    double positives, negatives;
    /* Exact: every (prediction, label). */
    float *pred;
    uint8_t *label;
    int64_t n, cap;
};

zdist_auc_t *
zdist_auc_new(int num_thresholds, zdist_error_t *err)
{
    if (num_thresholds == 1 || num_thresholds < 0) {
        zdist_error_set(err, -EINVAL, "Argument `num_thresholds` must be an integer > 1. Received: num_thresholds=%d",
                        num_thresholds);
        return NULL;
    }
    zdist_auc_t *self = calloc(1, sizeof *self);
    if (self) {
        self->num_thresholds = num_thresholds;
        if (num_thresholds) {
            self->tp = calloc((size_t) num_thresholds + 1, sizeof *self->tp);
            self->fp = calloc((size_t) num_thresholds + 1, sizeof *self->fp);
        }
    }
    if (!self || (num_thresholds && (!self->tp || !self->fp))) {
        zdist_auc_destroy(&self);
        zdist_error_set(err, -ENOMEM, "out of memory");
    }
    return self;
}

void
zdist_auc_destroy(zdist_auc_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_auc_t *self = *self_p;
    free(self->tp);
    free(self->fp);
    free(self->pred);
    free(self->label);
    free(self);
    *self_p = NULL;
}

/* How many of the thresholds [-eps, 1/(n-1), ..., (n-2)/(n-1), 1+eps] lie
   below p: Keras's bucketing for evenly spaced thresholds,
   ceil(p * (n - 1)), counting the -eps one. */
static int
s_above(const zdist_auc_t *self, float p)
{
    double x = p < 0 ? 0 : p > 1 ? 1 : p;
    int k = (int) ceil(x * (self->num_thresholds - 1));
    return k < 1 ? 1 : k;
}

static int
s_keep(zdist_auc_t *self, int64_t more)
{
    if (self->n + more <= self->cap)
        return 0;
    int64_t cap = self->cap ? self->cap : 1024;
    while (cap < self->n + more)
        cap *= 2;
    float *p = realloc(self->pred, (size_t) cap * sizeof *p);
    if (p)
        self->pred = p;
    uint8_t *l = realloc(self->label, (size_t) cap);
    if (l)
        self->label = l;
    if (!p || !l)
        return -ENOMEM;
    self->cap = cap;
    return 0;
}

int
zdist_auc_update(zdist_auc_t *self, const float *labels, const float *predictions, int64_t n)
{
    if (!self->num_thresholds) {
        if (s_keep(self, n) < 0)
            return -ENOMEM;
        for (int64_t i = 0; i < n; i++) {
            float p = predictions[i];
            self->pred[self->n + i] = p < 0 ? 0 : p > 1 ? 1 : p;
            self->label[self->n + i] = labels[i] != 0;
        }
        self->n += n;
        return 0;
    }
    for (int64_t i = 0; i < n; i++) {
        int k = s_above(self, predictions[i]); /* above thresholds 0..k-1 */
        (labels[i] != 0 ? self->tp : self->fp)[k] += 1;
        if (labels[i] != 0)
            self->positives += 1;
        else
            self->negatives += 1;
    }
    self->n += n;
    return 0;
}

int
zdist_auc_update_u8(zdist_auc_t *self, const uint8_t *labels, const float *predictions, int64_t n)
{
    float y[256];
    for (int64_t at = 0; at < n; at += 256) { /* in chunks: no allocation */
        int64_t k = n - at < 256 ? n - at : 256;
        for (int64_t i = 0; i < k; i++)
            y[i] = labels[at + i] != 0;
        int rc = zdist_auc_update(self, y, predictions + at, k);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int64_t
zdist_auc_exact_parts(const zdist_auc_t *self, const float **ret_predictions, const uint8_t **ret_labels)
{
    if (self->num_thresholds)
        return -1;
    *ret_predictions = self->pred;
    *ret_labels = self->label;
    return self->n;
}

int
zdist_auc_merge(zdist_auc_t *self, const zdist_auc_t *other)
{
    if (self->num_thresholds != other->num_thresholds)
        return -EINVAL;
    if (!self->num_thresholds) {
        if (s_keep(self, other->n) < 0)
            return -ENOMEM;
        memcpy(self->pred + self->n, other->pred, (size_t) other->n * sizeof *self->pred);
        memcpy(self->label + self->n, other->label, (size_t) other->n);
        self->n += other->n;
        return 0;
    }
    for (int t = 0; t <= self->num_thresholds; t++) {
        self->tp[t] += other->tp[t];
        self->fp[t] += other->fp[t];
    }
    self->positives += other->positives;
    self->negatives += other->negatives;
    self->n += other->n;
    return 0;
}

static double
s_div_no_nan(double a, double b)
{
    return b == 0 ? 0 : a / b;
}

static double
s_thresholded(const zdist_auc_t *self)
{
    double auc = 0;
    int n = self->num_thresholds;
    /* tp, fp at threshold t: those above more than t thresholds; every
       prediction is above the first (-1e-7). */
    double tp_t = self->positives, fp_t = self->negatives;
    for (int t = 0; t + 1 < n; t++) {
        double tp_next = tp_t - self->tp[t + 1], fp_next = fp_t - self->fp[t + 1];
        /* recall = tp / (tp + fn), fp_rate = fp / (fp + tn) */
        double y0 = s_div_no_nan(tp_t, self->positives), y1 = s_div_no_nan(tp_next, self->positives);
        double x0 = s_div_no_nan(fp_t, self->negatives), x1 = s_div_no_nan(fp_next, self->negatives);
        auc += (x0 - x1) * (y0 + y1) / 2.0;
        tp_t = tp_next, fp_t = fp_next;
    }
    return auc;
}

/* Predictions sort by their value; a key of the float's bits ordered as
   the values are (all are in [0, 1], so non-negative: the bits order them)
   and the label in the low bit. */
static int
s_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

static int
s_exact(const zdist_auc_t *self, double *ret)
{
    uint64_t *keys = malloc((size_t) (self->n ? self->n : 1) * sizeof *keys);
    if (!keys)
        return -ENOMEM;
    for (int64_t i = 0; i < self->n; i++) {
        uint32_t bits;
        float p = self->pred[i] == 0 ? 0.0f : self->pred[i]; /* -0 is 0 */
        memcpy(&bits, &p, 4);
        keys[i] = (uint64_t) bits << 1 | self->label[i];
    }
    qsort(keys, (size_t) self->n, sizeof *keys, s_cmp_u64);
    double neg_below = 0, pos = 0, num = 0;
    for (int64_t i = 0; i < self->n;) {
        uint64_t v = keys[i] >> 1;
        double np = 0, nn = 0;
        for (; i < self->n && keys[i] >> 1 == v; i++) {
            if (keys[i] & 1)
                np += 1;
            else
                nn += 1;
        }
        num += np * (neg_below + nn / 2.0);
        neg_below += nn;
        pos += np;
    }
    free(keys);
    *ret = s_div_no_nan(num, pos * neg_below);
    return 0;
}

int
zdist_auc_result(const zdist_auc_t *self, double *ret)
{
    if (self->num_thresholds) {
        *ret = s_thresholded(self);
        return 0;
    }
    return s_exact(self, ret);
}

int64_t
zdist_auc_count(const zdist_auc_t *self)
{
    return self->n;
}

int
zdist_auc_num_thresholds(const zdist_auc_t *self)
{
    return self->num_thresholds;
}

void
zdist_logloss_update(zdist_logloss_t *self, const float *labels, const float *predictions, int64_t n)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double p = predictions[i], y = labels[i];
        p = p < S_KERAS_EPSILON ? S_KERAS_EPSILON : p > 1 - S_KERAS_EPSILON ? 1 - S_KERAS_EPSILON : p;
        sum -= y * log(p + S_KERAS_EPSILON) + (1 - y) * log(1 - p + S_KERAS_EPSILON);
    }
    self->sum += sum;
    self->count += n;
}

double
zdist_logloss_result(const zdist_logloss_t *self)
{
    return self->count ? self->sum / (double) self->count : 0;
}
