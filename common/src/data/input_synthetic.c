/* zdist input pipelines: seeded synthetic regression and classification data. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "dataset.h"
#include "rng.h"

/* Random streams, so that the teacher, the centres and each example draw from
   independent sequences and example i depends only on (seed, i). */
enum { S_STREAM_TEACHER = 1, S_STREAM_CENTRES = 2, S_STREAM_EXAMPLE = 3 };

static int
s_check(int64_t n, int64_t dim, zdist_error_t *err)
{
    if (n < 0 || n > S_INPUT_MAX_EXAMPLES)
        return zdist_error_set(err, -EINVAL, "synthetic: %lld examples: use 0..%lld", (long long) n,
                               (long long) S_INPUT_MAX_EXAMPLES);
    if (dim < 1 || dim > S_INPUT_MAX_DIM)
        return zdist_error_set(err, -EINVAL, "synthetic: dimension %lld: use 1..%lld", (long long) dim,
                               (long long) S_INPUT_MAX_DIM);
    return 0;
}

void
zdist_dataset_synthetic_teacher(int64_t dim, uint64_t seed, float *w, float *b)
{
    zdist_rng_t rng;
    zdist_rng_seed_(&rng, seed, S_STREAM_TEACHER, 0);
    for (int64_t j = 0; j < dim; j++)
        w[j] = (float) zdist_rng_normal_(&rng);
    *b = (float) zdist_rng_normal_(&rng);
}

int
zdist_dataset_synthetic_regression(int64_t n, int64_t dim, uint64_t seed, double noise_std,
                                   zdist_dataset_t **ret, zdist_error_t *err)
{
    int r = s_check(n, dim, err);
    if (r < 0)
        return r;
    if (!(noise_std >= 0) || !isfinite(noise_std))
        return zdist_error_set(err, -EINVAL, "synthetic: noise_std %g: it must be finite and >= 0", noise_std);
    zdist_dataset_t *ds = zdist_dataset_alloc_(n, dim, false, ZDIST_DTYPE_FLOAT32);
    float *w = malloc((size_t) dim * sizeof(float));
    if (!ds || !w) {
        zdist_dataset_destroy(&ds);
        free(w);
        return zdist_error_set(err, -ENOMEM, "synthetic: out of memory for %lld x %lld", (long long) n,
                               (long long) dim);
    }
    float b;
    zdist_dataset_synthetic_teacher(dim, seed, w, &b);
    float *y = ds->labels;
    for (int64_t i = 0; i < n; i++) {
        zdist_rng_t rng;
        zdist_rng_seed_(&rng, seed, S_STREAM_EXAMPLE, (uint64_t) i);
        float *x = ds->features + i * dim;
        double acc = b;
        for (int64_t j = 0; j < dim; j++) {
            x[j] = (float) zdist_rng_normal_(&rng);
            acc += (double) w[j] * x[j];
        }
        y[i] = (float) (acc + noise_std * zdist_rng_normal_(&rng));
    }
    free(w);
    *ret = ds;
    return 0;
}

int
zdist_dataset_synthetic_classification(int64_t n, int64_t dim, int classes, uint64_t seed, zdist_dataset_t **ret,
                                       zdist_error_t *err)
{
    int r = s_check(n, dim, err);
    if (r < 0)
        return r;
    if (classes < 2 || classes > 65536)
        return zdist_error_set(err, -EINVAL, "synthetic: %d classes: use 2..65536", classes);
    zdist_dataset_t *ds = zdist_dataset_alloc_(n, dim, false, ZDIST_DTYPE_INT32);
    float *centres = malloc((size_t) classes * (size_t) dim * sizeof(float));
    if (!ds || !centres) {
        zdist_dataset_destroy(&ds);
        free(centres);
        return zdist_error_set(err, -ENOMEM, "synthetic: out of memory for %lld x %lld", (long long) n,
                               (long long) dim);
    }
    zdist_rng_t rng;
    zdist_rng_seed_(&rng, seed, S_STREAM_CENTRES, 0);
    for (int64_t k = 0; k < (int64_t) classes * dim; k++)
        centres[k] = (float) (3.0 * zdist_rng_normal_(&rng));
    int32_t *y = ds->labels;
    for (int64_t i = 0; i < n; i++) {
        zdist_rng_seed_(&rng, seed, S_STREAM_EXAMPLE, (uint64_t) i);
        int32_t label = (int32_t) zdist_rng_below_(&rng, (uint64_t) classes);
        y[i] = label;
        const float *c = centres + (int64_t) label * dim;
        float *x = ds->features + i * dim;
        for (int64_t j = 0; j < dim; j++)
            x[j] = c[j] + (float) zdist_rng_normal_(&rng);
    }
    free(centres);
    ds->num_classes = classes;
    *ret = ds;
    return 0;
}
