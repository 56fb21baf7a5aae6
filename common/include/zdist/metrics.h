/* zdist metrics a recommender is judged by: ROC AUC (Keras's thresholded
   AUC, or exact) and log loss, accumulated in parts and merged, so that
   evaluators each see a share of the test split and the whole is exact. */
#ifndef ZDIST_METRICS_H
#define ZDIST_METRICS_H

#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Thread rules: an accumulator is used by one thread at a time. */

typedef struct zdist_auc_t zdist_auc_t;

/* num_thresholds > 1: tf.keras.metrics.AUC(num_thresholds) with its
   defaults (curve="ROC", summation_method="interpolation"): thresholds
   [-1e-7, 1/(n-1), ..., (n-2)/(n-1), 1 + 1e-7], a prediction above a
   threshold counted positive, the area a sum of trapezoids of recall over
   the false positive rate. Keras's default is 200.
   num_thresholds 0: exact, the Mann-Whitney statistic: the chance that a
   positive scores above a negative, ties counted half (every prediction
   kept: 8 bytes an example).
   Refused with Keras's text for 1 or a negative: "Argument
   `num_thresholds` must be an integer > 1. Received: num_thresholds=1".
   NULL with err filled. */
ZDIST_EXPORT zdist_auc_t *zdist_auc_new(int num_thresholds, zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. */
ZDIST_EXPORT void zdist_auc_destroy(zdist_auc_t **self_p);
/* n predictions in [0, 1] (probabilities, not logits; clipped into [0, 1]
   as Keras's bucketing does) and their labels (non-zero: positive).
   -ENOMEM (exact mode, when the predictions cannot be kept). */
ZDIST_EXPORT int zdist_auc_update(zdist_auc_t *self, const float *labels, const float *predictions, int64_t n);
/* The same with labels as bytes (non-zero: positive), as
   zdist_auc_exact_parts hands them out. */
ZDIST_EXPORT int zdist_auc_update_u8(zdist_auc_t *self, const uint8_t *labels, const float *predictions, int64_t n);
/* Exact mode: every (prediction, label) kept so far, borrowed until the next
   update or merge (predictions clipped into [0, 1], labels 0/1), and their
   count: what one evaluator sends another to merge exactly. -1 for a
   thresholded AUC. */
ZDIST_EXPORT int64_t zdist_auc_exact_parts(const zdist_auc_t *self, const float **ret_predictions,
                                           const uint8_t **ret_labels);
/* Adds other's examples to self (same num_thresholds, else -EINVAL). */
ZDIST_EXPORT int zdist_auc_merge(zdist_auc_t *self, const zdist_auc_t *other);
/* The AUC of every example seen; 0 while either class is absent (Keras's
   divide_no_nan gives that). -ENOMEM in exact mode when the sort's copy
   cannot be made: *ret untouched. */
ZDIST_EXPORT int zdist_auc_result(const zdist_auc_t *self, double *ret);
ZDIST_EXPORT int64_t zdist_auc_count(const zdist_auc_t *self);
ZDIST_EXPORT int zdist_auc_num_thresholds(const zdist_auc_t *self);

/* Binary cross-entropy of probabilities, as tf.keras.losses.
   BinaryCrossentropy() computes it: p clipped to [1e-7, 1 - 1e-7], then
   -(y log(p + 1e-7) + (1 - y) log(1 - p + 1e-7)), averaged. A plain sum and
   count, so parts merge by adding. */
typedef struct {
    double sum;
    int64_t count;
} zdist_logloss_t;

ZDIST_EXPORT void zdist_logloss_update(zdist_logloss_t *self, const float *labels, const float *predictions,
                                       int64_t n);
/* sum / count; 0 for no examples. */
ZDIST_EXPORT double zdist_logloss_result(const zdist_logloss_t *self);

#ifdef __cplusplus
}
#endif

#endif
