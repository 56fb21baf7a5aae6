/* CUnit suite: metrics — Keras's thresholded ROC AUC, the exact AUC and log loss (zdist/metrics.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "testutil.h"
#include "zdist/metrics.h"

static double
s_auc(int thresholds, const float *y, const float *p, int n)
{
    zdist_error_t err = {0};
    zdist_auc_t *a = zdist_auc_new(thresholds, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(zdist_auc_update(a, y, p, n), 0);
    double r = -1;
    CU_ASSERT_EQUAL(zdist_auc_result(a, &r), 0);
    zdist_auc_destroy(&a);
    CU_ASSERT_PTR_NULL(a);
    return r;
}

static void
test_keras_examples(void)
{
    /* tf.keras.metrics.AUC's docstring (tf_keras/src/metrics/confusion_metrics.py):
       AUC(num_thresholds=3), update_state([0, 0, 1, 1], [0, 0.5, 0.3, 0.9]) -> 0.75. */
    const float y[] = {0, 0, 1, 1}, p[] = {0, 0.5f, 0.3f, 0.9f};
    CU_ASSERT_DOUBLE_EQUAL(s_auc(3, y, p, 4), 0.75, 1e-12);
    /* The same data, exact: 3 of the 4 positive-negative pairs are ordered. */
    CU_ASSERT_DOUBLE_EQUAL(s_auc(0, y, p, 4), 0.75, 1e-12);
    /* Perfect and reversed; ties count half; one class absent gives 0. */
    const float y2[] = {0, 0, 1, 1}, up[] = {0.1f, 0.2f, 0.8f, 0.9f}, down[] = {0.9f, 0.8f, 0.2f, 0.1f};
    CU_ASSERT_DOUBLE_EQUAL(s_auc(200, y2, up, 4), 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s_auc(0, y2, up, 4), 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s_auc(0, y2, down, 4), 0.0, 1e-12);
    const float tie_y[] = {0, 1, 0, 1}, tie_p[] = {0.5f, 0.5f, 0.2f, 0.7f};
    /* pairs (pos, neg): (0.5, 0.5) half, (0.5, 0.2) 1, (0.7, 0.5) 1, (0.7, 0.2) 1 -> 3.5 / 4 */
    CU_ASSERT_DOUBLE_EQUAL(s_auc(0, tie_y, tie_p, 4), 0.875, 1e-12);
    const float ones[] = {1, 1};
    CU_ASSERT_DOUBLE_EQUAL(s_auc(0, ones, up, 2), 0.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s_auc(200, ones, up, 2), 0.0, 1e-12);
}

static void
test_thresholded_converges(void)
{
    /* On 20,000 scores spread over [0, 1], 200 thresholds land within
       1e-3 of the exact value, and the exact value is the pair count
       worked out directly. */
    enum { N = 20000 };
    float *y = malloc(N * sizeof *y), *p = malloc(N * sizeof *p);
    uint64_t seed = 7;
    for (int i = 0; i < N; i++) {
        y[i] = zdist_test_uniform(&seed) < 0.3 ? 1.0f : 0.0f;
        double noise = zdist_test_uniform(&seed);
        p[i] = (float) (0.6 * noise + 0.4 * y[i] * zdist_test_uniform(&seed));
    }
    double exact = s_auc(0, y, p, N), keras = s_auc(200, y, p, N);
    double num = 0, pos = 0, neg = 0;
    for (int i = 0; i < N; i++) {
        if (y[i] == 0)
            continue;
        pos++;
        for (int j = 0; j < N; j++)
            if (y[j] == 0)
                num += p[i] > p[j] ? 1.0 : p[i] == p[j] ? 0.5 : 0.0;
    }
    for (int j = 0; j < N; j++)
        neg += y[j] == 0;
    CU_ASSERT_DOUBLE_EQUAL(exact, num / (pos * neg), 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(keras, exact, 1e-3);
    CU_ASSERT_TRUE(exact > 0.6 && exact < 0.95);
    free(y);
    free(p);
}

static void
test_merge(void)
{
    /* Three parts merged give what the whole gives, both modes. */
    enum { N = 3000 };
    float y[N], p[N];
    uint64_t seed = 11;
    for (int i = 0; i < N; i++) {
        y[i] = zdist_test_uniform(&seed) < 0.25 ? 1.0f : 0.0f;
        p[i] = (float) zdist_test_uniform(&seed) * 0.7f + 0.3f * y[i];
    }
    for (int mode = 0; mode < 2; mode++) {
        int t = mode ? 200 : 0;
        zdist_error_t err = {0};
        zdist_auc_t *whole = zdist_auc_new(t, &err), *parts[3];
        zdist_auc_update(whole, y, p, N);
        for (int k = 0; k < 3; k++) {
            parts[k] = zdist_auc_new(t, &err);
            zdist_auc_update(parts[k], y + k * 1000, p + k * 1000, 1000);
        }
        CU_ASSERT_EQUAL(zdist_auc_merge(parts[0], parts[1]), 0);
        CU_ASSERT_EQUAL(zdist_auc_merge(parts[0], parts[2]), 0);
        CU_ASSERT_EQUAL(zdist_auc_count(parts[0]), N);
        double a = 0, b = 1;
        zdist_auc_result(whole, &a);
        zdist_auc_result(parts[0], &b);
        CU_ASSERT_DOUBLE_EQUAL(a, b, 1e-12);
        zdist_auc_t *other = zdist_auc_new(mode ? 0 : 200, &err);
        CU_ASSERT_EQUAL(zdist_auc_merge(whole, other), -EINVAL);
        zdist_auc_destroy(&other);
        zdist_auc_destroy(&whole);
        for (int k = 0; k < 3; k++)
            zdist_auc_destroy(&parts[k]);
    }
}

static void
test_refusals_and_logloss(void)
{
    zdist_error_t err = {0};
    CU_ASSERT_PTR_NULL(zdist_auc_new(1, &err));
    CU_ASSERT_STRING_EQUAL(err.text, "Argument `num_thresholds` must be an integer > 1. Received: num_thresholds=1");
    /* Keras's BinaryCrossentropy: y=1, p=0.8 -> -log(0.8 + 1e-7); y=0, p=0
       clipped to 1e-7 -> -log(1 - 1e-7 + 1e-7) = 0. */
    zdist_logloss_t l = {0};
    const float y[] = {1, 0}, p[] = {0.8f, 0.0f};
    zdist_logloss_update(&l, y, p, 2);
    CU_ASSERT_EQUAL(l.count, 2);
    CU_ASSERT_DOUBLE_EQUAL(zdist_logloss_result(&l), -log((double) 0.8f + 1e-7) / 2, 1e-9);
    zdist_logloss_t none = {0};
    CU_ASSERT_EQUAL(zdist_logloss_result(&none), 0);
}

void
zdist_test_metrics_register(void)
{
    ZDIST_SUITE("metrics", {"Keras's docstring example and the exact AUC", test_keras_examples},
                {"200 thresholds within 1e-3 of exact; exact is the pair count", test_thresholded_converges},
                {"parts merged equal the whole", test_merge},
                {"num_thresholds refused with Keras's text; log loss", test_refusals_and_logloss});
}
