/* zdist's Criteo-schema generator: rows as functions of (seed, row), a
   teacher model for the labels, files written in parallel. */
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zdist/criteo.h"
#include "zdist/example.h"
#include "zdist/metrics.h"

#define S_FEATURES (1 + ZDIST_CRITEO_DENSE + ZDIST_CRITEO_SPARSE)
#define S_LATENT 4
#define S_MAX_FILES 4096
#define S_GOLDEN 0x9e3779b97f4a7c15u

/* Criteo Kaggle (Display Advertising Challenge) ids per categorical column. */
static const int64_t s_cardinality[ZDIST_CRITEO_SPARSE] = {
    1460,    583,   10131227, 2202608, 305,  24,      12517, 633, 3,      93145, 5683,   8351593, 3194,
    27,      14992, 5461306,  10,      5652, 2173,    4,     7046547, 18, 15,     286181, 105,     142572,
};

const int64_t *
zdist_criteo_cardinalities(void)
{
    return s_cardinality;
}

zdist_criteo_options_t
zdist_criteo_defaults(int64_t rows)
{
    return (zdist_criteo_options_t){.rows = rows,
                                    .files = 1,
                                    .seed = 1,
                                    .test_fraction = 0.1,
                                    .max_cardinality = 10000000,
                                    .compression = ZDIST_TFRECORD_NONE};
}

/* splitmix64's finalizer: a bijection of 64-bit words. */
static inline uint64_t
s_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9u;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* Uniform in [0, 1) from a hash. */
static inline double
s_unit(uint64_t h)
{
    return (double) (h >> 11) * 0x1.0p-53;
}

/* Zero mean, unit variance, from a hash: a uniform on [-sqrt 3, sqrt 3]. */
static inline double
s_centered(uint64_t h)
{
    return (s_unit(h) - 0.5) * 3.4641016151377544;
}

typedef struct {
    uint64_t state;
} s_rng_t;

static inline double
s_next(s_rng_t *r)
{
    r->state += S_GOLDEN;
    return s_unit(s_mix(r->state));
}

typedef struct {
    uint64_t seed;
    int64_t n[ZDIST_CRITEO_SPARSE]; /* ranks per feature */
    double s[ZDIST_CRITEO_SPARSE];  /* Zipf exponents */
    double a[ZDIST_CRITEO_SPARSE];  /* (n + 1)^(1 - s) - 1, for the inverse CDF */
    uint64_t key[ZDIST_CRITEO_SPARSE];
    double w[ZDIST_CRITEO_SPARSE];  /* bias weights */
    double mu[ZDIST_CRITEO_DENSE], beta[ZDIST_CRITEO_DENSE];
    double b0;
} s_model_t;

static void
s_model_init(s_model_t *m, const zdist_criteo_options_t *o)
{
    m->seed = o->seed;
    for (int j = 0; j < ZDIST_CRITEO_SPARSE; j++) {
        m->n[j] = s_cardinality[j] < o->max_cardinality ? s_cardinality[j] : o->max_cardinality;
        m->s[j] = 1.05 + 0.05 * (j % 5);
        m->a[j] = pow((double) m->n[j] + 1, 1 - m->s[j]) - 1;
        m->key[j] = s_mix(o->seed * S_GOLDEN + (uint64_t) j + 1);
        m->w[j] = 0.35 * (0.25 + 0.75 * fmod(0.6180339887 * (j + 1), 1.0));
    }
    for (int k = 0; k < ZDIST_CRITEO_DENSE; k++) {
        m->mu[k] = 0.5 + 2.5 * fmod(0.7548776662 * (k + 1), 1.0);
        m->beta[k] = (k % 2 ? -0.15 : 0.15) * (0.5 + fmod(0.5698402910 * (k + 1), 1.0));
    }
    m->b0 = -1.5;
}

/* A rank in [1, n] with P(r) ~ r^-s (the continuous law's inverse CDF, floored). */
static inline int64_t
s_zipf(const s_model_t *m, int j, double u)
{
    double r = floor(pow(m->a[j] * u + 1, 1 / (1 - m->s[j])));
    return r < 1 ? 1 : r > (double) m->n[j] ? m->n[j] : (int64_t) r;
}

typedef struct {
    int64_t label;
    float dense[ZDIST_CRITEO_DENSE];
    int64_t ids[ZDIST_CRITEO_SPARSE];
    double p; /* the teacher's probability */
} s_row_t;

static void
s_row(const s_model_t *m, int64_t i, s_row_t *row)
{
    s_rng_t r = {.state = s_mix(m->seed ^ s_mix((uint64_t) i * S_GOLDEN + 0x5eed))};
    double logit = m->b0, sum[S_LATENT] = {0}, sq = 0;
    for (int k = 0; k < ZDIST_CRITEO_DENSE; k++) {
        double u1 = s_next(&r), u2 = s_next(&r);
        double z = sqrt(-2 * log(1 - u1)) * cos(6.283185307179586 * u2);
        double count = floor(exp(m->mu[k] + 1.2 * z)) - 1;
        row->dense[k] = (float) log1p(count < 0 ? 0 : count);
        logit += m->beta[k] * (row->dense[k] - m->mu[k]);
    }
    uint64_t h2 = 0;
    for (int j = 0; j < ZDIST_CRITEO_SPARSE; j++) {
        int64_t rank = s_zipf(m, j, s_next(&r));
        uint64_t h = s_mix((uint64_t) rank ^ m->key[j]);
        row->ids[j] = (int64_t) h;
        logit += m->w[j] * s_centered(s_mix(h + 1));
        for (int d = 0; d < S_LATENT; d++) {
            double v = 0.12 * s_centered(s_mix(h + 2 + (uint64_t) d));
            sum[d] += v;
            sq += v * v;
        }
        if (j == 2)
            h2 = h;
    }
    for (int d = 0; d < S_LATENT; d++)
        logit += 0.5 * sum[d] * sum[d];
    logit -= 0.5 * sq;
    /* A count feature that matters only together with an id. */
    logit += 0.3 * tanh(row->dense[1] - m->mu[1]) * s_centered(s_mix(h2 + 9));
    row->p = 1 / (1 + exp(-logit));
    row->label = s_next(&r) < row->p;
}

static const char *s_names[S_FEATURES] = {
    "label", "I1",  "I2",  "I3",  "I4",  "I5",  "I6",  "I7",  "I8",  "I9",  "I10", "I11", "I12", "I13",
    "C1",    "C2",  "C3",  "C4",  "C5",  "C6",  "C7",  "C8",  "C9",  "C10", "C11", "C12", "C13", "C14",
    "C15",   "C16", "C17", "C18", "C19", "C20", "C21", "C22", "C23", "C24", "C25", "C26",
};

void
zdist_criteo_feature_specs(zdist_feature_spec_t *ret)
{
    for (int i = 0; i < S_FEATURES; i++)
        ret[i] = (zdist_feature_spec_t){.name = s_names[i],
                                        .kind = ZDIST_FEATURE_FIXED,
                                        .dtype = i >= 1 && i <= ZDIST_CRITEO_DENSE ? ZDIST_DTYPE_FLOAT32
                                                                                   : ZDIST_DTYPE_INT64};
}

/* One file's worth of rows. */
typedef struct {
    char path[4096];
    int64_t first, count;
    bool test;
} s_job_t;

typedef struct {
    const s_model_t *model;
    const zdist_criteo_options_t *o;
    s_job_t *jobs;
    int njobs;
    atomic_int next;
    int64_t test_first;
    float *test_p, *test_y; /* by test row */
    atomic_llong bytes, positives;
    pthread_mutex_t lock;
    atomic_int rc;
    zdist_error_t err;
} s_gen_t;

static int
s_write_file(s_gen_t *g, const s_job_t *job)
{
    zdist_error_t err = {0};
    zdist_tfrecord_writer_t *w = zdist_tfrecord_writer_open(job->path, g->o->compression, &err);
    if (!w)
        goto failed;
    uint8_t buf[2048];
    s_row_t row;
    zdist_example_feature_t f[S_FEATURES];
    f[0] = (zdist_example_feature_t){s_names[0], ZDIST_DTYPE_INT64, &row.label, 1};
    for (int k = 0; k < ZDIST_CRITEO_DENSE; k++)
        f[1 + k] = (zdist_example_feature_t){s_names[1 + k], ZDIST_DTYPE_FLOAT32, &row.dense[k], 1};
    for (int j = 0; j < ZDIST_CRITEO_SPARSE; j++)
        f[1 + ZDIST_CRITEO_DENSE + j] =
            (zdist_example_feature_t){s_names[1 + ZDIST_CRITEO_DENSE + j], ZDIST_DTYPE_INT64, &row.ids[j], 1};
    int64_t bytes = 0, positives = 0;
    for (int64_t i = job->first; i < job->first + job->count; i++) {
        s_row(g->model, i, &row);
        int64_t len = zdist_example_encode(f, S_FEATURES, buf, sizeof buf, NULL);
        int rc = len < 0 ? (int) len : zdist_tfrecord_writer_write(w, buf, (size_t) len);
        if (rc < 0) {
            zdist_error_set(&err, rc, "'%s': cannot write: %s", job->path, strerror(-rc));
            zdist_tfrecord_writer_destroy(&w);
            goto failed;
        }
        bytes += len + 16;
        positives += row.label;
        if (job->test) {
            g->test_p[i - g->test_first] = (float) row.p;
            g->test_y[i - g->test_first] = (float) row.label;
        }
    }
    if (zdist_tfrecord_writer_close(&w, &err) < 0)
        goto failed;
    g->bytes += bytes;
    g->positives += positives;
    return 0;
failed:
    pthread_mutex_lock(&g->lock);
    if (!g->rc) {
        g->rc = err.code ? err.code : -EIO;
        g->err = err;
    }
    pthread_mutex_unlock(&g->lock);
    return -1;
}

static void *
s_worker(void *arg)
{
    s_gen_t *g = arg;
    for (int j; (j = atomic_fetch_add(&g->next, 1)) < g->njobs && !g->rc;)
        if (s_write_file(g, &g->jobs[j]) < 0)
            break;
    return NULL;
}

static int
s_check(const char *dir, const zdist_criteo_options_t *o, zdist_error_t *err)
{
    if (!dir || !*dir)
        return zdist_error_set(err, -EINVAL, "an output directory is required (--out DIR)");
    if (o->rows < 2 || o->rows > (INT64_C(1) << 40))
        return zdist_error_set(err, -EINVAL, "rows must be from 2 to 2^40 (got %lld)", (long long) o->rows);
    if (o->files < 1 || o->files > S_MAX_FILES)
        return zdist_error_set(err, -EINVAL, "files must be from 1 to %d (got %d)", S_MAX_FILES, o->files);
    if (!(o->test_fraction > 0 && o->test_fraction < 1))
        return zdist_error_set(err, -EINVAL, "the test fraction must be in (0, 1) (got %g)", o->test_fraction);
    if (o->max_cardinality < 1)
        return zdist_error_set(err, -EINVAL, "the largest cardinality must be at least 1");
    return 0;
}

static int
s_mkdir(const char *path, zdist_error_t *err)
{
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return zdist_error_set(err, -errno, "'%s': cannot create: %s", path, strerror(errno));
    char pattern[4300];
    if ((size_t) snprintf(pattern, sizeof pattern, "%s/part-*", path) >= sizeof pattern)
        return zdist_error_set(err, -ENAMETOOLONG, "'%s': the path is too long", path);
    glob_t g;
    int found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    globfree(&g);
    if (found)
        return zdist_error_set(err, -EEXIST, "'%s' already holds part files: choose another --out or remove them",
                               path);
    return 0;
}

/* Plans the files: train rows [0, train) and test rows [train, rows), each
   split into o->files contiguous parts. */
static int
s_plan(const char *dir, const zdist_criteo_options_t *o, int64_t train, s_job_t **ret, zdist_error_t *err)
{
    s_job_t *jobs = calloc(2 * (size_t) o->files, sizeof *jobs);
    if (!jobs)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    const char *ext = o->compression == ZDIST_TFRECORD_GZIP ? ".tfrecord.gz" : ".tfrecord";
    for (int split = 0; split < 2; split++) {
        int64_t first = split ? train : 0, n = split ? o->rows - train : train;
        for (int f = 0; f < o->files; f++) {
            s_job_t *j = &jobs[split * o->files + f];
            j->first = first + n * f / o->files;
            j->count = first + n * (f + 1) / o->files - j->first;
            j->test = split;
            snprintf(j->path, sizeof j->path, "%s/%s/part-%05d%s", dir, split ? "test" : "train", f, ext);
        }
    }
    *ret = jobs;
    return 0;
}

int
zdist_criteo_generate(const char *dir, const zdist_criteo_options_t *o, zdist_criteo_report_t *ret,
                      zdist_error_t *err)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = s_check(dir, o, err);
    char sub[4200];
    if (rc == 0 && mkdir(dir, 0755) < 0 && errno != EEXIST)
        rc = zdist_error_set(err, -errno, "'%s': cannot create: %s", dir, strerror(errno));
    for (int split = 0; rc == 0 && split < 2; split++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, split ? "test" : "train");
        rc = s_mkdir(sub, err);
    }
    if (rc < 0)
        return rc;
    int64_t test = (int64_t) ceil((double) o->rows * o->test_fraction);
    test = test < 1 ? 1 : test >= o->rows ? o->rows - 1 : test;
    s_model_t model;
    s_model_init(&model, o);
    s_gen_t g = {.model = &model, .o = o, .njobs = 2 * o->files, .test_first = o->rows - test};
    pthread_mutex_init(&g.lock, NULL);
    g.test_p = malloc((size_t) test * sizeof *g.test_p);
    g.test_y = malloc((size_t) test * sizeof *g.test_y);
    if (!g.test_p || !g.test_y)
        rc = zdist_error_set(err, -ENOMEM, "out of memory for %lld test rows", (long long) test);
    if (rc == 0)
        rc = s_plan(dir, o, o->rows - test, &g.jobs, err);
    if (rc == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        int nthreads = cores < 1 ? 1 : cores > 16 ? 16 : (int) cores;
        pthread_t th[16];
        int started = 0;
        for (; started < nthreads - 1 && pthread_create(&th[started], NULL, s_worker, &g) == 0; started++)
            ;
        s_worker(&g);
        for (int t = 0; t < started; t++)
            pthread_join(th[t], NULL);
        if (g.rc) {
            rc = g.rc;
            if (err)
                *err = g.err;
        }
    }
    zdist_criteo_report_t report = {.train_rows = o->rows - test, .test_rows = test, .bytes = g.bytes};
    if (rc == 0) {
        zdist_auc_t *auc = zdist_auc_new(0, err);
        zdist_logloss_t ll = {0};
        if (!auc || zdist_auc_update(auc, g.test_y, g.test_p, test) < 0 ||
            zdist_auc_result(auc, &report.teacher_auc) < 0)
            rc = zdist_error_set(err, -ENOMEM, "out of memory for the teacher's AUC");
        zdist_auc_destroy(&auc);
        zdist_logloss_update(&ll, g.test_y, g.test_p, test);
        report.teacher_logloss = zdist_logloss_result(&ll);
        report.positive_rate = (double) g.positives / (double) o->rows;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    report.seconds = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
    free(g.jobs);
    free(g.test_p);
    free(g.test_y);
    pthread_mutex_destroy(&g.lock);
    if (rc == 0 && ret)
        *ret = report;
    return rc;
}
