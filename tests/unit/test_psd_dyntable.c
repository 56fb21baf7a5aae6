/* CUnit suite: psd_dyntable: ids over all of int64, admission at N, eviction, the memory budget,
   per-row init, lazy adam, ftrl, checkpoint order and marks. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "psd_dyntable.h"
#include "testutil.h"
#include "zdist/init.h"

#define DIM 4

static psd_dyntable_config_t
s_config(zdist_optim_kind_t kind)
{
    psd_dyntable_config_t c = {
        .name = "emb",
        .dim = DIM,
        .seed = 42,
        .init = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -0.05, .maxval = 0.05},
        .min_count = 1,
    };
    zdist_optim_config_default(&c.optim, kind);
    c.optim.learning_rate = 0.1;
    return c;
}

static psd_dyntable_t *
s_table(const psd_dyntable_config_t *c)
{
    zdist_error_t err = {0};
    psd_dyntable_t *t = psd_dyntable_new(c, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    return t;
}

static psd_dyntable_stats_t
s_stats(const psd_dyntable_t *t)
{
    psd_dyntable_stats_t st;
    psd_dyntable_stats(t, &st);
    return st;
}

/* The values a row of table `emb` (seed 42) must start with. */
static void
s_expected_init(const psd_dyntable_config_t *c, int64_t id, float *out)
{
    zdist_shape_t shape = {.rank = 2, .dims = {c->dim, c->dim}};
    CU_ASSERT_EQUAL(zdist_init_fill_row(&c->init, c->seed, c->name, ZDIST_DTYPE_FLOAT32, &shape, id, out,
                                        (size_t) c->dim * sizeof(float), NULL), 0);
}

static uint64_t
s_rand64(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

static void
test_init_fill_row(void)
{
    zdist_initializer_t u = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -1, .maxval = 1};
    zdist_shape_t shape = {.rank = 2, .dims = {10, 3}};
    float all[10 * 3], row[3];
    CU_ASSERT_EQUAL(zdist_init_fill(&u, 5, "t", ZDIST_DTYPE_FLOAT32, &shape, 0, 10, all, sizeof all, NULL), 0);
    for (int64_t r = 0; r < 10; r++) { /* in range: bitwise zdist_init_fill's row */
        CU_ASSERT_EQUAL(zdist_init_fill_row(&u, 5, "t", ZDIST_DTYPE_FLOAT32, &shape, r, row, sizeof row, NULL), 0);
        CU_ASSERT_EQUAL(memcmp(row, all + r * 3, sizeof row), 0);
    }
    /* Any int64, deterministic, distinct rows differ, the seed and name count. */
    const int64_t ids[] = {INT64_MIN, -1, 10, 1000000007, INT64_MAX};
    float a[3], b[3];
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        CU_ASSERT_EQUAL(zdist_init_fill_row(&u, 5, "t", ZDIST_DTYPE_FLOAT32, &shape, ids[i], a, sizeof a, NULL), 0);
        CU_ASSERT_EQUAL(zdist_init_fill_row(&u, 5, "t", ZDIST_DTYPE_FLOAT32, &shape, ids[i], b, sizeof b, NULL), 0);
        CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
        for (int k = 0; k < 3; k++)
            CU_ASSERT(a[k] >= -1 && a[k] < 1);
        CU_ASSERT_NOT_EQUAL(memcmp(a, all + 9 * 3, sizeof a), 0);
        CU_ASSERT_EQUAL(zdist_init_fill_row(&u, 6, "t", ZDIST_DTYPE_FLOAT32, &shape, ids[i], b, sizeof b, NULL), 0);
        CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
        CU_ASSERT_EQUAL(zdist_init_fill_row(&u, 5, "t2", ZDIST_DTYPE_FLOAT32, &shape, ids[i], b, sizeof b, NULL), 0);
        CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
    }
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_init_fill_row(&u, 5, "t", ZDIST_DTYPE_FLOAT32, &shape, 3, a, 8, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "expected 12"));
}

static void
test_int64_range(void)
{
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_SGD);
    psd_dyntable_t *t = s_table(&c);
    enum { N = 3000 };
    int64_t *ids = malloc(N * sizeof *ids);
    float *out = malloc(N * DIM * sizeof *out), *again = malloc(N * DIM * sizeof *again);
    const int64_t edges[] = {INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX};
    uint64_t x = 2026;
    for (size_t i = 0; i < N; i++)
        ids[i] = i < 7 ? edges[i] : (int64_t) s_rand64(&x);
    /* in batches, the last holding ids seen before */
    CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t, ids, 1000, 1, out), 0);
    CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t, ids + 1000, N - 1000, 1, out + 1000 * DIM), 0);
    psd_dyntable_stats_t st = s_stats(t);
    CU_ASSERT_EQUAL(st.rows, N);
    CU_ASSERT_EQUAL(st.admitted, N);
    CU_ASSERT_EQUAL(st.refused, 0);
    for (size_t i = 0; i < N; i++) {
        float want[DIM];
        s_expected_init(&c, ids[i], want);
        CU_ASSERT_EQUAL(memcmp(out + i * DIM, want, sizeof want), 0);
        psd_dyntable_row_t row;
        CU_ASSERT_TRUE(psd_dyntable_find(t, ids[i], &row));
        CU_ASSERT_EQUAL(row.id, ids[i]);
    }
    CU_ASSERT_EQUAL(psd_dyntable_lookup_eval(t, ids, N, again), 0);
    CU_ASSERT_EQUAL(memcmp(out, again, N * DIM * sizeof *out), 0);
    /* Removing every other id leaves the others findable (the index's backward shift). */
    for (size_t i = 0; i < N; i += 2)
        CU_ASSERT_TRUE(psd_dyntable_remove(t, ids[i]));
    CU_ASSERT_FALSE(psd_dyntable_remove(t, ids[0]));
    for (size_t i = 0; i < N; i++) {
        psd_dyntable_row_t row;
        CU_ASSERT_EQUAL(psd_dyntable_find(t, ids[i], &row), i % 2 == 1);
    }
    CU_ASSERT_EQUAL(s_stats(t).rows, N / 2);
    free(ids);
    free(out);
    free(again);
    psd_dyntable_destroy(&t);
    psd_dyntable_destroy(&t);
    CU_ASSERT_PTR_NULL(t);
}

static void
test_admission(void)
{
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_SGD);
    const float def[DIM] = {9, 8, 7, 6};
    c.min_count = 3;
    c.default_value = def;
    psd_dyntable_t *t = s_table(&c);
    float out[3 * DIM], want[DIM];
    int64_t id = -77;
    /* N-1 occurrences in separate lookups: no row, the default. */
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t, &id, 1, 1, out), 1);
        CU_ASSERT_EQUAL(memcmp(out, def, sizeof def), 0);
        CU_ASSERT_EQUAL(s_stats(t).rows, 0);
        CU_ASSERT_EQUAL(s_stats(t).pending, 1);
    }
    /* Its gradients meanwhile are dropped and counted. */
    const float g[DIM] = {1, 1, 1, 1};
    CU_ASSERT_EQUAL(psd_dyntable_apply(t, &id, 1, g, 2), 0);
    CU_ASSERT_EQUAL(s_stats(t).dropped_grads, 1);
    /* The Nth creates the row. */
    CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t, &id, 1, 3, out), 0);
    s_expected_init(&c, id, want);
    CU_ASSERT_EQUAL(memcmp(out, want, sizeof want), 0);
    psd_dyntable_stats_t st = s_stats(t);
    CU_ASSERT_EQUAL(st.rows, 1);
    CU_ASSERT_EQUAL(st.pending, 0);
    CU_ASSERT_EQUAL(st.admitted, 1);
    psd_dyntable_row_t row;
    CU_ASSERT_TRUE(psd_dyntable_find(t, id, &row));
    CU_ASSERT_EQUAL(row.last_step, 3);

    /* Two occurrences in one lookup count two. */
    int64_t two[2] = {5, 5};
    CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t, two, 2, 4, out), 2);
    CU_ASSERT_FALSE(psd_dyntable_find(t, 5, &row));
    CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t, two, 1, 5, out), 0);
    CU_ASSERT_TRUE(psd_dyntable_find(t, 5, &row));
    /* Three in one lookup: created, and every occurrence gets the row. */
    int64_t three[3] = {6, 6, 6};
    CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t, three, 3, 6, out), 0);
    s_expected_init(&c, 6, want);
    for (int k = 0; k < 3; k++)
        CU_ASSERT_EQUAL(memcmp(out + k * DIM, want, sizeof want), 0);

    /* Evaluation lookups neither count nor create. */
    int64_t fresh[3] = {100, 100, 100};
    for (int k = 0; k < 5; k++)
        CU_ASSERT_EQUAL(psd_dyntable_lookup_eval(t, fresh, 3, out), 3);
    CU_ASSERT_EQUAL(memcmp(out + 2 * DIM, def, sizeof def), 0);
    st = s_stats(t);
    CU_ASSERT_EQUAL(st.rows, 3);
    CU_ASSERT_EQUAL(st.pending, 0);
    CU_ASSERT_EQUAL(st.admitted, 3);
    psd_dyntable_destroy(&t);

    /* min_count 1 (and 0): admitted at first sight; the default default is zeros. */
    c.min_count = 0;
    c.default_value = NULL;
    t = s_table(&c);
    CU_ASSERT_EQUAL(psd_dyntable_lookup_eval(t, &id, 1, out), 1);
    for (int k = 0; k < DIM; k++)
        CU_ASSERT_EQUAL(out[k], 0.0f);
    CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t, &id, 1, 1, out), 0);
    CU_ASSERT_EQUAL(s_stats(t).rows, 1);
    psd_dyntable_destroy(&t);
}

static void
test_eviction(void)
{
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_SGD);
    c.evict_after_steps = 10;
    c.min_count = 2;
    psd_dyntable_t *t = s_table(&c);
    int64_t ids[10], dup[20];
    float out[20 * DIM], g[10 * DIM];
    for (int i = 0; i < 10; i++)
        ids[i] = dup[2 * i] = dup[2 * i + 1] = (int64_t) i * 1000003 - 4000000;
    CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t, dup, 20, 1, out), 0); /* step 1: 10 rows */
    for (int i = 0; i < 10 * DIM; i++)
        g[i] = 0.5f;
    CU_ASSERT_EQUAL(psd_dyntable_apply(t, ids, 5, g, 5), 0); /* rows 0..4 updated at step 5 */
    int64_t once = 123; /* a counter seen at step 3, never admitted */
    psd_dyntable_lookup_train(t, &once, 1, 3, out);
    CU_ASSERT_EQUAL(s_stats(t).pending, 1);

    CU_ASSERT_EQUAL(psd_dyntable_evict(t, 11), 0); /* step - last == 10: not more than 10 */
    CU_ASSERT_EQUAL(psd_dyntable_evict(t, 12), 5); /* rows 5..9: 11 steps */
    psd_dyntable_row_t row;
    for (int i = 0; i < 10; i++)
        CU_ASSERT_EQUAL(psd_dyntable_find(t, ids[i], &row), i < 5);
    CU_ASSERT_EQUAL(s_stats(t).pending, 1);
    CU_ASSERT_EQUAL(psd_dyntable_evict(t, 14), 0);
    CU_ASSERT_EQUAL(s_stats(t).pending, 0); /* the counter's 11 steps */
    CU_ASSERT_EQUAL(psd_dyntable_evict(t, 16), 5);
    psd_dyntable_stats_t st = s_stats(t);
    CU_ASSERT_EQUAL(st.rows, 0);
    CU_ASSERT_EQUAL(st.evicted, 10);
    size_t n;
    const int64_t *ev = psd_dyntable_evicted(t, &n);
    /* The 10 rows and the evicted counter (a delta's tombstone removes a
       counter it once saved), ascending. */
    CU_ASSERT_EQUAL_FATAL(n, 11);
    for (size_t i = 0, k = 0; i < n; i++) {
        int64_t want = k < 10 && (ids[k] < once || i > k) ? ids[k++] : once;
        CU_ASSERT_EQUAL(ev[i], want);
    }
    psd_dyntable_destroy(&t);

    /* By norm: exactly the rows under the threshold, strictly. */
    c = s_config(ZDIST_OPTIM_SGD);
    c.evict_l2_below = 1.0;
    t = s_table(&c);
    const float v_small[DIM] = {0.5f, 0.5f, 0.5f, 0.49f}; /* norm < 1 */
    const float v_one[DIM] = {0.5f, 0.5f, 0.5f, 0.5f};    /* norm == 1 */
    const float v_big[DIM] = {3, 0, 0, 0};
    const float *vals[] = {v_small, v_one, v_big, v_small};
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(psd_dyntable_put(t, 10 - i, vals[i], NULL, 0, 0, 1), 0);
    CU_ASSERT_EQUAL(psd_dyntable_evict(t, 1000000), 2);
    CU_ASSERT_FALSE(psd_dyntable_find(t, 10, &row));
    CU_ASSERT_TRUE(psd_dyntable_find(t, 9, &row));
    CU_ASSERT_TRUE(psd_dyntable_find(t, 8, &row));
    CU_ASSERT_FALSE(psd_dyntable_find(t, 7, &row));
    CU_ASSERT_EQUAL(psd_dyntable_evict(t, 1000000), 0);
    psd_dyntable_destroy(&t);
}

static void
test_budget(void)
{
    psd_dyntable_budget_t budget = {.max_bytes = 300 << 10};
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_ADAGRAD);
    c.dim = 64;
    c.budget = &budget;
    psd_dyntable_t *t = s_table(&c);
    enum { N = 4000 };
    float *out = malloc(N * 64 * sizeof *out);
    int64_t *ids = malloc(N * sizeof *ids);
    for (int i = 0; i < N; i++)
        ids[i] = -(int64_t) i * 7919;
    size_t defaults = psd_dyntable_lookup_train(t, ids, N, 1, out);
    psd_dyntable_stats_t st = s_stats(t);
    CU_ASSERT(st.rows > 100 && st.rows < N); /* some admitted, then refused */
    CU_ASSERT_EQUAL(st.refused, N - st.rows);
    CU_ASSERT_EQUAL(defaults, N - st.rows);
    CU_ASSERT(budget.used <= budget.max_bytes);
    CU_ASSERT_EQUAL(budget.used, st.bytes);
    /* Every admitted row is still there, and answered; refused ones get zeros. */
    uint64_t held = 0;
    for (int i = 0; i < N; i++) {
        psd_dyntable_row_t row;
        if (psd_dyntable_find(t, ids[i], &row)) {
            held++;
            CU_ASSERT_EQUAL(memcmp(out + (size_t) i * 64, row.values, 64 * sizeof(float)), 0);
        } else {
            CU_ASSERT_EQUAL(out[(size_t) i * 64], 0.0f);
        }
    }
    CU_ASSERT_EQUAL(held, st.rows);
    /* A second table under the same budget gets nothing new; the first keeps its rows. */
    psd_dyntable_t *t2 = s_table(&c);
    CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t2, ids, 10, 2, out), 10);
    CU_ASSERT_EQUAL(s_stats(t2).refused, 10);
    CU_ASSERT_EQUAL(psd_dyntable_put(t2, 1, out, NULL, 0, 0, 2), -ENOSPC);
    CU_ASSERT_EQUAL(psd_dyntable_lookup_eval(t, ids, N, out), N - st.rows);
    CU_ASSERT_EQUAL(s_stats(t).rows, st.rows);
    psd_dyntable_destroy(&t2);
    /* Eviction frees row slots for new ids without more memory. */
    psd_dyntable_remove(t, ids[0]);
    int64_t fresh = 5;
    CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t, &fresh, 1, 3, out), 0);
    psd_dyntable_destroy(&t);
    CU_ASSERT_EQUAL(budget.used, 0);
    free(out);
    free(ids);
}

static void
test_deterministic_init(void)
{
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_SGD);
    c.init = (zdist_initializer_t){.kind = ZDIST_INIT_TRUNCATED_NORMAL, .mean = 0, .stddev = 0.1};
    c.evict_after_steps = 1;
    psd_dyntable_t *a = s_table(&c), *b = s_table(&c);
    int64_t ids[4] = {INT64_MAX, 3, -3, 12345678901LL}, rev[4] = {12345678901LL, -3, 3, INT64_MAX};
    float oa[4 * DIM], ob[4 * DIM], oc[4 * DIM];
    psd_dyntable_lookup_train(a, ids, 4, 1, oa);
    int64_t noise[3] = {1, 2, 4}; /* b holds other rows and got these in another order */
    psd_dyntable_lookup_train(b, noise, 3, 1, ob);
    psd_dyntable_lookup_train(b, rev, 4, 1, ob);
    psd_dyntable_lookup_eval(b, ids, 4, ob);
    CU_ASSERT_EQUAL(memcmp(oa, ob, sizeof oa), 0);
    /* Trained, evicted, created again: the first values again. */
    const float g[4 * DIM] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    CU_ASSERT_EQUAL(psd_dyntable_apply(a, ids, 4, g, 2), 0);
    psd_dyntable_lookup_eval(a, ids, 4, oc);
    CU_ASSERT_NOT_EQUAL(memcmp(oa, oc, sizeof oa), 0);
    CU_ASSERT_EQUAL(psd_dyntable_evict(a, 10), 4);
    psd_dyntable_lookup_train(a, ids, 4, 11, oc);
    CU_ASSERT_EQUAL(memcmp(oa, oc, sizeof oa), 0);
    psd_dyntable_row_t row;
    CU_ASSERT_TRUE(psd_dyntable_find(a, 3, &row));
    CU_ASSERT_EQUAL(row.opt_step, 0);
    psd_dyntable_destroy(&a);
    psd_dyntable_destroy(&b);
}

/* One adam step on one row from the header's formula, in double. */
static void
s_adam_ref(const zdist_optim_config_t *c, int t, double *w, double *m, double *v, double g)
{
    double lr_t = c->learning_rate * sqrt(1 - pow(c->beta2, t)) / (1 - pow(c->beta1, t));
    *m = c->beta1 * *m + (1 - c->beta1) * g;
    *v = c->beta2 * *v + (1 - c->beta2) * g * g;
    *w -= lr_t * *m / (sqrt(*v) + c->epsilon);
}

static void
test_lazy_adam(void)
{
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_ADAM);
    c.init = (zdist_initializer_t){.kind = ZDIST_INIT_CONSTANT, .value = 0.25};
    psd_dyntable_t *t = s_table(&c);
    int64_t ids[3] = {-1, 0, 1};
    float out[3 * DIM];
    psd_dyntable_lookup_train(t, ids, 3, 1, out);
    /* -1 is touched on three steps, 0 once, 1 never (and 0 twice in one push: summed). */
    double w[2] = {0.25, 0.25}, m[2] = {0}, v[2] = {0};
    for (int step = 1; step <= 3; step++) {
        int64_t push[3] = {-1, 0, 0};
        float g[3 * DIM];
        for (int k = 0; k < 3 * DIM; k++)
            g[k] = k < DIM ? 0.1f * (float) step : 0.25f;
        size_t n = step == 2 ? 3 : 1;
        CU_ASSERT_EQUAL(psd_dyntable_apply(t, push, n, g, (uint64_t) step + 1), 0);
        s_adam_ref(&c.optim, step, &w[0], &m[0], &v[0], (double) (0.1f * (float) step));
        if (step == 2)
            s_adam_ref(&c.optim, 1, &w[1], &m[1], &v[1], 0.5); /* its first update: t = 1 */
    }
    psd_dyntable_row_t r;
    CU_ASSERT_TRUE_FATAL(psd_dyntable_find(t, -1, &r));
    CU_ASSERT_EQUAL(r.opt_step, 3);
    CU_ASSERT_EQUAL(r.last_step, 4);
    /* float32 against double: 1 - beta2 alone is 1.3e-5 off in float */
    CU_ASSERT_DOUBLE_EQUAL(r.values[0], w[0], 2e-5);
    CU_ASSERT_DOUBLE_EQUAL(r.slots[0][0], m[0], 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(r.slots[1][3], v[0], 1e-7);
    CU_ASSERT_TRUE_FATAL(psd_dyntable_find(t, 0, &r));
    CU_ASSERT_EQUAL(r.opt_step, 1);
    CU_ASSERT_EQUAL(r.last_step, 3);
    CU_ASSERT_DOUBLE_EQUAL(r.values[2], w[1], 2e-5);
    CU_ASSERT_DOUBLE_EQUAL(r.slots[0][2], m[1], 1e-6);
    CU_ASSERT_TRUE_FATAL(psd_dyntable_find(t, 1, &r)); /* untouched: as created */
    CU_ASSERT_EQUAL(r.opt_step, 0);
    CU_ASSERT_EQUAL(r.last_step, 1);
    for (int k = 0; k < DIM; k++) {
        CU_ASSERT_EQUAL(r.values[k], 0.25f);
        CU_ASSERT_EQUAL(r.slots[0][k], 0.0f);
        CU_ASSERT_EQUAL(r.slots[1][k], 0.0f);
    }
    psd_dyntable_destroy(&t);
}

/* One FTRL step on one element from TF's ApplyFtrlV2 (the header's formula), in double. */
static void
s_ftrl_ref(const zdist_optim_config_t *c, double *w, double *a, double *z, double g)
{
    double p = c->learning_rate_power, lr = c->learning_rate;
    double gs = g + 2 * c->l2_shrinkage * *w, an = *a + g * g;
    *z += gs - (pow(an, -p) - pow(*a, -p)) / lr * *w;
    double quad = pow(an, -p) / lr + 2 * (c->l2 + c->beta / (2 * lr));
    *w = fabs(*z) > c->l1 ? ((*z > 0 ? c->l1 : -c->l1) - *z) / quad : 0.0;
    *a = an;
}

static void
test_ftrl(void)
{
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_FTRL);
    c.optim.learning_rate = 0.05;
    c.optim.l1 = 0.001;
    c.optim.l2 = 0.01;
    c.optim.l2_shrinkage = 0.02;
    c.optim.learning_rate_power = -0.4;
    psd_dyntable_t *t = s_table(&c);
    int64_t id = INT64_MIN;
    float out[DIM];
    psd_dyntable_lookup_train(t, &id, 1, 1, out);
    double w[DIM], a[DIM], z[DIM];
    for (int k = 0; k < DIM; k++) {
        w[k] = out[k];
        a[k] = 0.1;
        z[k] = 0;
    }
    uint64_t x = 7;
    for (int step = 0; step < 20; step++) {
        float g[DIM];
        for (int k = 0; k < DIM; k++) {
            g[k] = (float) ((double) (s_rand64(&x) % 2001) / 1000.0 - 1.0);
            s_ftrl_ref(&c.optim, &w[k], &a[k], &z[k], g[k]);
        }
        CU_ASSERT_EQUAL(psd_dyntable_apply(t, &id, 1, g, (uint64_t) step + 2), 0);
    }
    psd_dyntable_row_t r;
    CU_ASSERT_TRUE_FATAL(psd_dyntable_find(t, id, &r));
    for (int k = 0; k < DIM; k++) {
        CU_ASSERT_DOUBLE_EQUAL(r.values[k], w[k], 1e-5);
        CU_ASSERT_DOUBLE_EQUAL(r.slots[0][k], a[k], 1e-5 * a[k]);
        CU_ASSERT_DOUBLE_EQUAL(r.slots[1][k], z[k], 1e-4);
    }
    CU_ASSERT_EQUAL(r.opt_step, 20);
    psd_dyntable_destroy(&t);
}

typedef struct {
    int64_t ids[64];
    int n;
} s_seen_t;

static int
s_collect(const psd_dyntable_row_t *row, void *arg)
{
    s_seen_t *s = arg;
    if (s->n < 64)
        s->ids[s->n] = row->id;
    s->n++;
    return 0;
}

static int
s_stop_at_two(const psd_dyntable_row_t *row, void *arg)
{
    (void) row;
    return ++*(int *) arg == 2 ? -ECANCELED : 0;
}

static void
test_iteration_and_marks(void)
{
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_SGD);
    psd_dyntable_t *t = s_table(&c);
    int64_t ids[6] = {50, INT64_MIN, -7, INT64_MAX, 0, 3};
    float out[6 * DIM], g[6 * DIM] = {0};
    psd_dyntable_lookup_train(t, ids, 6, 1, out);
    s_seen_t s = {0};
    CU_ASSERT_EQUAL(psd_dyntable_iterate(t, false, s_collect, &s), 0);
    const int64_t sorted[6] = {INT64_MIN, -7, 0, 3, 50, INT64_MAX};
    CU_ASSERT_EQUAL_FATAL(s.n, 6);
    CU_ASSERT_EQUAL(memcmp(s.ids, sorted, sizeof sorted), 0);
    /* New rows count as changed; after the mark none does. */
    s = (s_seen_t){0};
    psd_dyntable_iterate(t, true, s_collect, &s);
    CU_ASSERT_EQUAL(s.n, 6);
    psd_dyntable_mark(t);
    s = (s_seen_t){0};
    psd_dyntable_iterate(t, true, s_collect, &s);
    CU_ASSERT_EQUAL(s.n, 0);
    /* An update, a creation, an eviction since the mark. */
    int64_t upd = 3, add = -100;
    CU_ASSERT_EQUAL(psd_dyntable_apply(t, &upd, 1, g, 2), 0);
    psd_dyntable_lookup_train(t, &add, 1, 2, out);
    psd_dyntable_lookup_eval(t, ids, 6, out); /* reads change nothing */
    CU_ASSERT_TRUE(psd_dyntable_remove(t, 50)); /* a restore's removal is not an eviction */
    s = (s_seen_t){0};
    psd_dyntable_iterate(t, true, s_collect, &s);
    CU_ASSERT_EQUAL_FATAL(s.n, 2);
    CU_ASSERT_EQUAL(s.ids[0], -100);
    CU_ASSERT_EQUAL(s.ids[1], 3);
    psd_dyntable_row_t r;
    CU_ASSERT_TRUE(psd_dyntable_find(t, 3, &r));
    CU_ASSERT_TRUE(r.changed);
    CU_ASSERT_TRUE(psd_dyntable_find(t, 0, &r));
    CU_ASSERT_FALSE(r.changed);
    size_t n;
    psd_dyntable_evicted(t, &n);
    CU_ASSERT_EQUAL(n, 0);
    /* The visitor stops the walk with its code. */
    int calls = 0;
    CU_ASSERT_EQUAL(psd_dyntable_iterate(t, false, s_stop_at_two, &calls), -ECANCELED);
    CU_ASSERT_EQUAL(calls, 2);
    psd_dyntable_destroy(&t);

    /* The evicted list since the mark, emptied by the mark. */
    c.evict_after_steps = 5;
    t = s_table(&c);
    psd_dyntable_lookup_train(t, ids, 6, 1, out);
    psd_dyntable_apply(t, &upd, 1, g, 4);
    CU_ASSERT_EQUAL(psd_dyntable_evict(t, 7), 5);
    const int64_t *ev = psd_dyntable_evicted(t, &n);
    const int64_t gone[5] = {INT64_MIN, -7, 0, 50, INT64_MAX};
    CU_ASSERT_EQUAL_FATAL(n, 5);
    CU_ASSERT_EQUAL(memcmp(ev, gone, sizeof gone), 0);
    psd_dyntable_mark(t);
    psd_dyntable_evicted(t, &n);
    CU_ASSERT_EQUAL(n, 0);
    psd_dyntable_destroy(&t);
}

static void
test_apply_and_put(void)
{
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_ADAGRAD);
    psd_dyntable_t *a = s_table(&c), *b = s_table(&c);
    int64_t ids[3] = {9, -9, 9};
    float out[3 * DIM], g[3 * DIM], gsum[2 * DIM];
    for (int k = 0; k < 3 * DIM; k++)
        g[k] = 0.01f * (float) (k + 1);
    psd_dyntable_lookup_train(a, ids, 3, 1, out);
    psd_dyntable_lookup_train(b, ids, 3, 1, out);
    /* Duplicates are summed in request order before one update. */
    for (int k = 0; k < DIM; k++) {
        gsum[k] = g[k] + g[2 * DIM + k];
        gsum[DIM + k] = g[DIM + k];
    }
    CU_ASSERT_EQUAL(psd_dyntable_apply(a, ids, 3, g, 2), 0);
    CU_ASSERT_EQUAL(psd_dyntable_apply(b, ids, 2, gsum, 2), 0);
    psd_dyntable_row_t ra, rb;
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_TRUE(psd_dyntable_find(a, ids[i], &ra));
        CU_ASSERT_TRUE(psd_dyntable_find(b, ids[i], &rb));
        CU_ASSERT_EQUAL(memcmp(ra.values, rb.values, DIM * sizeof(float)), 0);
        CU_ASSERT_EQUAL(memcmp(ra.slots[0], rb.slots[0], DIM * sizeof(float)), 0);
        CU_ASSERT_EQUAL(ra.opt_step, 1);
    }
    /* A restore's put: values, slots and steps as given. */
    const float v[DIM] = {1, 2, 3, 4}, acc[DIM] = {5, 6, 7, 8};
    const float *slots[1] = {acc};
    CU_ASSERT_EQUAL(psd_dyntable_put(b, 77, v, slots, 1, 12, 30), 0);
    CU_ASSERT_EQUAL(psd_dyntable_put(b, 77, v, slots, 2, 12, 30), -EINVAL);
    CU_ASSERT_TRUE(psd_dyntable_find(b, 77, &rb));
    CU_ASSERT_EQUAL(memcmp(rb.values, v, sizeof v), 0);
    CU_ASSERT_EQUAL(memcmp(rb.slots[0], acc, sizeof acc), 0);
    CU_ASSERT_EQUAL(rb.opt_step, 12);
    CU_ASSERT_EQUAL(rb.last_step, 30);
    CU_ASSERT_EQUAL(psd_dyntable_put(b, 9, v, NULL, 0, 0, 31), 0); /* overwrite: slots initial */
    CU_ASSERT_TRUE(psd_dyntable_find(b, 9, &rb));
    CU_ASSERT_EQUAL(rb.slots[0][0], (float) c.optim.initial_accumulator_value);
    CU_ASSERT_EQUAL(s_stats(b).rows, 3);
    psd_dyntable_destroy(&a);
    psd_dyntable_destroy(&b);

    /* Bad configs name the field. */
    zdist_error_t err = {0};
    c.dim = 0;
    CU_ASSERT_PTR_NULL(psd_dyntable_new(&c, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dim"));
    c.dim = DIM;
    c.evict_l2_below = -1;
    CU_ASSERT_PTR_NULL(psd_dyntable_new(&c, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "evict_l2_below"));
    c.evict_l2_below = 0;
    c.optim.learning_rate = 0;
    CU_ASSERT_PTR_NULL(psd_dyntable_new(&c, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "learning_rate"));
}

/* The id whose psd_dyntable index hash (murmur3's fmix64) is h: fmix64
   run backwards (x ^= x >> 33 is its own inverse; each multiply is undone
   by its inverse mod 2^64, found by Newton's iteration). */
static uint64_t
s_inverse_mod64(uint64_t a)
{
    uint64_t x = a; /* right to 3 bits for odd a; each step doubles them */
    for (int i = 0; i < 5; i++)
        x *= 2 - a * x;
    return x;
}

static int64_t
s_id_of_hash(uint64_t h)
{
    h ^= h >> 33;
    h *= s_inverse_mod64(0xc4ceb9fe1a85ec53ULL);
    h ^= h >> 33;
    h *= s_inverse_mod64(0xff51afd7ed558ccdULL);
    h ^= h >> 33;
    return (int64_t) h;
}

/* Ids whose index tags (the hash's high 32 bits) collide: the lookup's
   first guess is the wrong row, and it must look further. */
static void
test_tag_collisions(void)
{
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_SGD);
    psd_dyntable_t *t = s_table(&c);
    int64_t ids[4];
    for (int i = 0; i < 4; i++)
        ids[i] = s_id_of_hash(0x1234567800000000ULL | (uint64_t) (i * 77 + 1));
    CU_ASSERT_NOT_EQUAL(ids[0], ids[1]);
    float out[4 * DIM], want[DIM];
    CU_ASSERT_EQUAL(psd_dyntable_lookup_train(t, ids, 3, 1, out), 0); /* ids[3] not yet */
    int64_t order[4] = {ids[2], ids[3], ids[1], ids[0]};
    CU_ASSERT_EQUAL(psd_dyntable_lookup_eval(t, order, 4, out), 1);
    for (int i = 0; i < 4; i++) {
        s_expected_init(&c, order[i], want);
        if (order[i] == ids[3]) {
            CU_ASSERT_EQUAL(out[i * DIM], 0.0f);
        } else {
            CU_ASSERT_EQUAL(memcmp(out + i * DIM, want, sizeof want), 0);
        }
    }
    /* Removing the first of the run keeps the others reachable. */
    CU_ASSERT_TRUE(psd_dyntable_remove(t, ids[0]));
    psd_dyntable_row_t r;
    CU_ASSERT_FALSE(psd_dyntable_find(t, ids[0], &r));
    CU_ASSERT_TRUE(psd_dyntable_find(t, ids[1], &r));
    CU_ASSERT_TRUE(psd_dyntable_find(t, ids[2], &r));
    const float g[2 * DIM] = {1, 1, 1, 1, 2, 2, 2, 2};
    int64_t push[2] = {ids[2], ids[3]};
    CU_ASSERT_EQUAL(psd_dyntable_apply(t, push, 2, g, 2), 0);
    CU_ASSERT_EQUAL(s_stats(t).dropped_grads, 1);
    CU_ASSERT_TRUE(psd_dyntable_find(t, ids[2], &r));
    s_expected_init(&c, ids[2], want);
    CU_ASSERT_DOUBLE_EQUAL(r.values[0], want[0] - 0.1f, 1e-7);
    psd_dyntable_destroy(&t);
}

/* The changed rows a delta reads (their list) against a walk over every row. */
typedef struct {
    int64_t *ids;
    size_t n, changed;
} s_all_t;

static int
s_collect_all(const psd_dyntable_row_t *row, void *arg)
{
    s_all_t *a = arg;
    a->ids[a->n++] = row->id;
    a->changed += row->changed;
    return 0;
}

static int
s_collect_flagged(const psd_dyntable_row_t *row, void *arg)
{
    s_all_t *a = arg;
    if (row->changed)
        a->ids[a->n++] = row->id;
    return 0;
}

static void
s_assert_changed_agree(psd_dyntable_t *t, size_t want)
{
    size_t rows = s_stats(t).rows;
    s_all_t listed = {.ids = calloc(rows + 1, sizeof(int64_t))}, walked = {.ids = calloc(rows + 1, sizeof(int64_t))};
    CU_ASSERT_PTR_NOT_NULL_FATAL(listed.ids);
    CU_ASSERT_PTR_NOT_NULL_FATAL(walked.ids);
    CU_ASSERT_EQUAL(psd_dyntable_iterate(t, true, s_collect_all, &listed), 0);
    CU_ASSERT_EQUAL(psd_dyntable_iterate(t, false, s_collect_flagged, &walked), 0);
    CU_ASSERT_EQUAL(listed.n, want);
    CU_ASSERT_EQUAL(listed.changed, want);
    CU_ASSERT_EQUAL_FATAL(walked.n, listed.n);
    CU_ASSERT_EQUAL(memcmp(listed.ids, walked.ids, listed.n * sizeof(int64_t)), 0); /* both ascending */
    free(listed.ids);
    free(walked.ids);
}

static void
test_changed_list(void)
{
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_ADAGRAD);
    c.evict_after_steps = 10;
    psd_dyntable_t *t = s_table(&c);
    enum { N = 20000 };
    int64_t *ids = malloc(N * sizeof *ids);
    float *out = malloc(N * DIM * sizeof *out), *g = calloc(N * DIM, sizeof *g);
    CU_ASSERT_FATAL(ids && out && g);
    uint64_t x = 77;
    for (int i = 0; i < N; i++)
        ids[i] = (int64_t) s_rand64(&x);
    psd_dyntable_lookup_train(t, ids, N, 1, out);
    s_assert_changed_agree(t, N); /* every row new: the list was dropped past an eighth */
    psd_dyntable_mark(t);
    s_assert_changed_agree(t, 0);
    /* A few updated (some twice), one updated then evicted, slots freed and reused by new ids. */
    CU_ASSERT_EQUAL(psd_dyntable_apply(t, ids + N - 10, 10, g, 2), 0); /* listed, evicted, their slots reused first */
    CU_ASSERT_EQUAL(psd_dyntable_apply(t, ids, 100, g, 20), 0);
    CU_ASSERT_EQUAL(psd_dyntable_apply(t, ids + 50, 100, g, 20), 0); /* 50 .. 99 again */
    CU_ASSERT_EQUAL(psd_dyntable_evict(t, 25), N - 150);          /* idle since 1 */
    int64_t fresh[300];
    for (int i = 0; i < 300; i++)
        fresh[i] = (int64_t) s_rand64(&x);
    psd_dyntable_lookup_train(t, fresh, 300, 25, out); /* into the freed slots, some listed already */
    float v[DIM] = {1, 2, 3, 4};
    CU_ASSERT_EQUAL(psd_dyntable_put(t, fresh[0], v, NULL, 0, 0, 25), 0); /* changed twice: listed once */
    CU_ASSERT_TRUE(psd_dyntable_remove(t, fresh[1]));
    s_assert_changed_agree(t, 150 + 299);
    /* Past an eighth of the rows: dropped, the walk gives the same. */
    psd_dyntable_mark(t);
    CU_ASSERT_EQUAL(psd_dyntable_apply(t, fresh + 2, 298, g, 26), 0);
    s_assert_changed_agree(t, 298);
    psd_dyntable_mark(t);
    s_assert_changed_agree(t, 0);
    psd_dyntable_stats_t st = s_stats(t);
    CU_ASSERT_EQUAL(st.rows, 449);
    psd_dyntable_destroy(&t);
    free(ids);
    free(out);
    free(g);
}

void
zdist_test_psd_dyntable_register(void)
{
    ZDIST_SUITE("psd_dyntable",
                {"init: one row for any int64, bitwise zdist_init_fill's in range", test_init_fill_row},
                {"ids over all of int64: created, found, removed", test_int64_range},
                {"admission at exactly min_count occurrences; eval lookups create nothing", test_admission},
                {"eviction of exactly the rows that qualify (age, norm), counters too", test_eviction},
                {"memory budget: new ids refused, existing rows kept", test_budget},
                {"initial values: equal across tables and after evict + re-create", test_deterministic_init},
                {"lazy adam: only touched rows and their own step advance", test_lazy_adam},
                {"ftrl against TF's ApplyFtrlV2", test_ftrl},
                {"iteration by id, changed since the mark, evicted list", test_iteration_and_marks},
                {"apply sums duplicates; put for restores; bad configs", test_apply_and_put},
                {"index tags that collide: rows found, removed, updated", test_tag_collisions},
                {"changed rows: their list and a walk over every row agree", test_changed_list});
}
