/* CUnit suite: psd_optim through shards: sgd, momentum (nesterov), adagrad, adam, sparse applies. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/optim.h"
#include "psd_store.h"
#include "psd_write.h"
#include "testutil.h"

/* A store with one [rows, cols] shard at row_offset, constant-initialized. */
static psd_store_t *
s_store(const zdist_optim_config_t *cfg, zdist_dtype_t dtype, int64_t total_rows, int64_t cols,
        int64_t off, int64_t rows, double init, psd_shard_t **ret_shard)
{
    psd_store_t *store = psd_store_new();
    CU_ASSERT_EQUAL(psd_store_set_optimizer(store, cfg, NULL), 0);
    psd_shard_spec_t s = {
        .name = "w",
        .shape = {.rank = 2, .dims = {total_rows, cols}},
        .dtype = dtype,
        .row_offset = off,
        .rows = rows,
        .init = {.kind = ZDIST_INIT_CONSTANT, .value = init},
    };
    CU_ASSERT_EQUAL(psd_store_create(store, &s, ret_shard, NULL), 0);
    return store;
}

static int
s_apply(psd_shard_t *sh, const double *g, size_t n)
{
    psd_write_t w = {.op = PSD_OP_APPLY_DENSE, .dtype = ZDIST_DTYPE_FLOAT64,
                     .nrows = PSD_WHOLE_SHARD, .data = g, .nbytes = n * sizeof *g};
    return psd_shard_write(sh, &w, NULL);
}

static int
s_apply_sparse(psd_shard_t *sh, zdist_dtype_t dtype, const int64_t *ids, size_t nids,
               const void *g, size_t nbytes, zdist_error_t *err)
{
    psd_write_t w = {.op = PSD_OP_APPLY_SPARSE, .dtype = dtype, .ids = ids, .nids = nids,
                     .data = g, .nbytes = nbytes};
    return psd_shard_write(sh, &w, err);
}

static double
s_value(psd_shard_t *sh, int64_t row, int col)
{
    double row_buf[16];
    CU_ASSERT_EQUAL(psd_shard_read(sh, row, 1, row_buf, sizeof row_buf, NULL), 0);
    return row_buf[col];
}

static double
s_slot(psd_shard_t *sh, int slot, int64_t row, int col)
{
    double row_buf[16];
    CU_ASSERT_EQUAL(psd_shard_read_slot(sh, slot, row, 1, row_buf, sizeof row_buf, NULL), 0);
    return row_buf[col];
}

static void
test_sgd(void)
{
    zdist_optim_config_t c;
    zdist_optim_config_default(&c, ZDIST_OPTIM_SGD);
    CU_ASSERT_EQUAL(c.learning_rate, 0.01);
    c.learning_rate = 0.1;
    psd_shard_t *sh;
    psd_store_t *store = s_store(&c, ZDIST_DTYPE_FLOAT64, 1, 2, 0, 1, 0, &sh);
    double w0[2] = {1, 2};
    psd_write_t a = {.op = PSD_OP_ASSIGN, .dtype = ZDIST_DTYPE_FLOAT64, .nrows = PSD_WHOLE_SHARD,
                     .data = w0, .nbytes = sizeof w0};
    CU_ASSERT_EQUAL(psd_shard_write(sh, &a, NULL), 0);
    double g[2] = {0.5, -1};
    CU_ASSERT_EQUAL(s_apply(sh, g, 2), 0);
    CU_ASSERT_DOUBLE_EQUAL(s_value(sh, 0, 0), 0.95, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(s_value(sh, 0, 1), 2.1, 1e-15);
    CU_ASSERT_EQUAL(s_apply(sh, g, 2), 0);
    CU_ASSERT_DOUBLE_EQUAL(s_value(sh, 0, 0), 0.9, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(s_value(sh, 0, 1), 2.2, 1e-15);
    CU_ASSERT_EQUAL(psd_shard_step(sh), 2);
    psd_store_stats_t st;
    psd_store_stats(store, &st);
    CU_ASSERT_EQUAL(st.slot_bytes, 0); /* sgd has no slots */
    psd_store_destroy(&store);
}

static void
test_momentum(void)
{
    /* w0 = 1, g = 1 three times, lr 0.1, momentum 0.9:
       plain     v: -0.1, -0.19, -0.271    w: 0.9, 0.71, 0.439
       nesterov  w += 0.9 v - 0.1:          w: 0.81, 0.539, 0.1951 */
    const double plain[3] = {0.9, 0.71, 0.439};
    const double nest[3] = {0.81, 0.539, 0.1951};
    const double vel[3] = {-0.1, -0.19, -0.271};
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        zdist_optim_config_t c;
        zdist_optim_config_default(&c, ZDIST_OPTIM_MOMENTUM);
        c.learning_rate = 0.1;
        c.momentum = 0.9;
        c.nesterov = nesterov;
        psd_shard_t *sh;
        psd_store_t *store = s_store(&c, ZDIST_DTYPE_FLOAT64, 1, 1, 0, 1, 1.0, &sh);
        CU_ASSERT_EQUAL(s_slot(sh, 0, 0, 0), 0.0); /* not yet allocated: reads initial */
        double g = 1;
        for (int t = 0; t < 3; t++) {
            CU_ASSERT_EQUAL(s_apply(sh, &g, 1), 0);
            CU_ASSERT_DOUBLE_EQUAL(s_value(sh, 0, 0), nesterov ? nest[t] : plain[t], 1e-14);
            CU_ASSERT_DOUBLE_EQUAL(s_slot(sh, 0, 0, 0), vel[t], 1e-14);
        }
        psd_store_stats_t st;
        psd_store_stats(store, &st);
        CU_ASSERT_EQUAL(st.slot_bytes, 8);
        psd_store_destroy(&store);
    }
}

static void
test_adagrad(void)
{
    zdist_optim_config_t c;
    zdist_optim_config_default(&c, ZDIST_OPTIM_ADAGRAD);
    CU_ASSERT_EQUAL(c.initial_accumulator_value, 0.1);
    CU_ASSERT_EQUAL(c.epsilon, 1e-7);
    c.learning_rate = 0.1;
    psd_shard_t *sh;
    psd_store_t *store = s_store(&c, ZDIST_DTYPE_FLOAT64, 1, 1, 0, 1, 1.0, &sh);
    CU_ASSERT_DOUBLE_EQUAL(s_slot(sh, 0, 0, 0), 0.1, 1e-15);
    /* a = 0.1 + g^2 ; w -= 0.1 g / (sqrt(a) + 1e-7), by hand:
       g=1:  a=1.1  w = 1 - 0.1/1.0488089  = 0.90465375
       g=2:  a=5.1  w -= 0.2/2.2583180     -> 0.81609227
       g=-1: a=6.1  w += 0.1/2.4698178     -> 0.85658108 */
    const double gs[3] = {1, 2, -1}, acc[3] = {1.1, 5.1, 6.1};
    const double ws[3] = {0.90465375, 0.81609227, 0.85658108};
    for (int t = 0; t < 3; t++) {
        CU_ASSERT_EQUAL(s_apply(sh, &gs[t], 1), 0);
        CU_ASSERT_DOUBLE_EQUAL(s_slot(sh, 0, 0, 0), acc[t], 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(s_value(sh, 0, 0), ws[t], 1e-8);
    }
    psd_store_destroy(&store);
}

static void
test_adam(void)
{
    zdist_optim_config_t c;
    zdist_optim_config_default(&c, ZDIST_OPTIM_ADAM);
    CU_ASSERT_EQUAL(c.beta1, 0.9);
    CU_ASSERT_EQUAL(c.beta2, 0.999);
    CU_ASSERT_EQUAL(c.epsilon, 1e-7);
    c.learning_rate = 0.1;
    /* w0 = 1, g = 0.5, -0.25, 1. By hand:
       t=1 lr_t = 0.1 sqrt(0.001)/0.1 = 0.031622777; m = 0.05; v = 0.00025
           w = 1 - 0.031622777 * 0.05 / (0.015811388 + 1e-7) = 0.90000063
       t=2 lr_t = 0.1 sqrt(1-0.998001)/(1-0.81) = 0.023531674; m = 0.02; v = 0.00031225
           w = 0.90000063 - 0.023531674 * 0.02 / 0.017670597 = 0.87336708
       t=3 lr_t = 0.1 sqrt(1-0.997002999)/(1-0.729) = 0.020200434;
           m = 0.018 + 0.1 = 0.118; v = 0.00031193775 + 0.001 = 0.00131193775
           w = 0.87336708 - 0.020200434 * 0.118 / 0.036220681 = 0.80755610 */
    const double gs[3] = {0.5, -0.25, 1.0};
    const double ms[3] = {0.05, 0.02, 0.118};
    const double vs[3] = {0.00025, 0.00031225, 0.00131193775};
    const double ws[3] = {0.90000063, 0.87336708, 0.80755610};
    for (int dt = 0; dt < 2; dt++) {
        zdist_dtype_t dtype = dt ? ZDIST_DTYPE_FLOAT32 : ZDIST_DTYPE_FLOAT64;
        double tol = dt ? 2e-6 : 1e-8;
        psd_shard_t *sh;
        psd_store_t *store = s_store(&c, dtype, 1, 1, 0, 1, 1.0, &sh);
        for (int t = 0; t < 3; t++) {
            int rc;
            if (dt) {
                float g = (float) gs[t];
                psd_write_t w = {.op = PSD_OP_APPLY_DENSE, .dtype = dtype, .nrows = 1,
                                 .data = &g, .nbytes = 4};
                rc = psd_shard_write(sh, &w, NULL);
                float wv, mv, vv;
                CU_ASSERT_EQUAL(psd_shard_read(sh, 0, 1, &wv, 4, NULL), 0);
                CU_ASSERT_EQUAL(psd_shard_read_slot(sh, 0, 0, 1, &mv, 4, NULL), 0);
                CU_ASSERT_EQUAL(psd_shard_read_slot(sh, 1, 0, 1, &vv, 4, NULL), 0);
                CU_ASSERT_DOUBLE_EQUAL(wv, ws[t], tol);
                /* float32 coefficients (0.999f, 1 - 0.999f) are off by ~1e-5 relative */
                CU_ASSERT_DOUBLE_EQUAL(mv, ms[t], 1e-7);
                CU_ASSERT_DOUBLE_EQUAL(vv, vs[t], vs[t] * 1e-4);
            } else {
                rc = s_apply(sh, &gs[t], 1);
                CU_ASSERT_DOUBLE_EQUAL(s_value(sh, 0, 0), ws[t], tol);
                CU_ASSERT_DOUBLE_EQUAL(s_slot(sh, 0, 0, 0), ms[t], 1e-15);
                CU_ASSERT_DOUBLE_EQUAL(s_slot(sh, 1, 0, 0), vs[t], 1e-15);
            }
            CU_ASSERT_EQUAL(rc, 0);
            CU_ASSERT_EQUAL(psd_shard_step(sh), t + 1);
        }
        psd_store_stats_t st;
        psd_store_stats(store, &st);
        CU_ASSERT_EQUAL(st.slot_bytes, 2 * st.value_bytes);
        /* changing the kind drops slots and the step counter */
        zdist_optim_config_t sgd;
        zdist_optim_config_default(&sgd, ZDIST_OPTIM_SGD);
        CU_ASSERT_EQUAL(psd_store_set_optimizer(store, &sgd, NULL), 0);
        CU_ASSERT_EQUAL(psd_shard_step(sh), 0);
        psd_store_stats(store, &st);
        CU_ASSERT_EQUAL(st.slot_bytes, 0);
        psd_store_destroy(&store);
    }
}

static void
test_dense_row_range(void)
{
    zdist_optim_config_t c;
    zdist_optim_config_default(&c, ZDIST_OPTIM_MOMENTUM);
    c.learning_rate = 1;
    c.momentum = 0.5;
    psd_shard_t *sh;
    /* rows [10, 14) of a 20-row variable, 2 columns */
    psd_store_t *store = s_store(&c, ZDIST_DTYPE_FLOAT64, 20, 2, 10, 4, 0.0, &sh);
    double g[4] = {1, 2, 3, 4};
    psd_write_t w = {.op = PSD_OP_APPLY_DENSE, .dtype = ZDIST_DTYPE_FLOAT64, .row_start = 11,
                     .nrows = 2, .data = g, .nbytes = sizeof g};
    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, NULL), 0);
    CU_ASSERT_EQUAL(s_value(sh, 10, 0), 0.0);
    CU_ASSERT_EQUAL(s_value(sh, 11, 1), -2.0);
    CU_ASSERT_EQUAL(s_value(sh, 12, 0), -3.0);
    CU_ASSERT_EQUAL(s_slot(sh, 0, 12, 1), -4.0);
    CU_ASSERT_EQUAL(s_value(sh, 13, 1), 0.0);
    CU_ASSERT_EQUAL(s_slot(sh, 0, 13, 1), 0.0);
    /* wrong gradient size or dtype: nothing changes, the step stays */
    zdist_error_t err = {0};
    w.nbytes = 3 * sizeof(double);
    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "expected [2,2] float64 = 32 bytes, got 24 bytes"));
    w.nbytes = sizeof g;
    w.dtype = ZDIST_DTYPE_FLOAT32;
    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, &err), -EINVAL);
    CU_ASSERT_EQUAL(psd_shard_step(sh), 1);
    CU_ASSERT_EQUAL(s_value(sh, 12, 0), -3.0);
    psd_store_destroy(&store);
}

static void
test_sparse_duplicates_summed(void)
{
    /* sgd lr 1 on rows [10, 14) x 2: ids 11, 13, 11 */
    zdist_optim_config_t c;
    zdist_optim_config_default(&c, ZDIST_OPTIM_SGD);
    c.learning_rate = 1;
    psd_shard_t *sh;
    psd_store_t *store = s_store(&c, ZDIST_DTYPE_FLOAT64, 14, 2, 10, 4, 0.0, &sh);
    int64_t ids[3] = {11, 13, 11};
    double g[6] = {1, 1, 2, 2, 3, 30};
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(s_apply_sparse(sh, ZDIST_DTYPE_FLOAT64, ids, 3, g, sizeof g, &err), 0);
    CU_ASSERT_EQUAL(s_value(sh, 11, 0), -4.0);
    CU_ASSERT_EQUAL(s_value(sh, 11, 1), -31.0);
    CU_ASSERT_EQUAL(s_value(sh, 13, 0), -2.0);
    CU_ASSERT_EQUAL(s_value(sh, 10, 0), 0.0);
    CU_ASSERT_EQUAL(s_value(sh, 12, 1), 0.0);
    CU_ASSERT_EQUAL(psd_shard_step(sh), 1);
    /* an id outside the shard refuses the whole push */
    int64_t bad[2] = {12, 14};
    CU_ASSERT_EQUAL(s_apply_sparse(sh, ZDIST_DTYPE_FLOAT64, bad, 2, g, 4 * sizeof(double), &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "id 14"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "[10, 14)"));
    CU_ASSERT_EQUAL(s_value(sh, 12, 0), 0.0);
    CU_ASSERT_EQUAL(psd_shard_step(sh), 1);
    psd_store_destroy(&store);

    /* adagrad: summing first differs from applying twice.
       a = 0.1 + (1 + 2)^2 = 9.1; w = 1 - 0.1 * 3 / (sqrt(9.1) + 1e-7) = 0.90055141 */
    zdist_optim_config_default(&c, ZDIST_OPTIM_ADAGRAD);
    c.learning_rate = 0.1;
    store = s_store(&c, ZDIST_DTYPE_FLOAT32, 4, 1, 0, 4, 1.0, &sh);
    int64_t dup[2] = {2, 2};
    float gf[2] = {1, 2};
    CU_ASSERT_EQUAL(s_apply_sparse(sh, ZDIST_DTYPE_FLOAT32, dup, 2, gf, sizeof gf, &err), 0);
    float v[4], acc[4];
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, PSD_WHOLE_SHARD, v, sizeof v, NULL), 0);
    CU_ASSERT_EQUAL(psd_shard_read_slot(sh, 0, 0, PSD_WHOLE_SHARD, acc, sizeof acc, NULL), 0);
    CU_ASSERT_DOUBLE_EQUAL(v[2], 0.90055141, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(acc[2], 9.1, 1e-6);
    CU_ASSERT_EQUAL(v[1], 1.0f);            /* untouched rows keep their values */
    CU_ASSERT_DOUBLE_EQUAL(acc[1], 0.1, 1e-7); /* ... and their accumulators */
    psd_store_destroy(&store);
}

static void
test_sparse_adam(void)
{
    /* Step 1 dense g = 1 on both rows; step 2 sparse g = 1 on row 1 only.
       After step 1: m = 0.1, v = 0.001 (both rows).
       TF semantics, step 2 (t = 2, lr_t = lr sqrt(0.001999)/0.19):
         row 0: m = 0.09, v = 0.000999      w -= lr_t 0.09/(sqrt(0.000999)+eps)
         row 1: m = 0.19, v = 0.001999      w -= lr_t 0.19/(sqrt(0.001999)+eps)
       lazy: row 0 unchanged after step 1 (m 0.1, v 0.001). */
    for (int lazy = 0; lazy < 2; lazy++) {
        zdist_optim_config_t c;
        zdist_optim_config_default(&c, ZDIST_OPTIM_ADAM);
        c.learning_rate = 0.01;
        c.lazy = lazy;
        psd_shard_t *sh;
        psd_store_t *store = s_store(&c, ZDIST_DTYPE_FLOAT64, 2, 1, 0, 2, 0.0, &sh);
        double g2[2] = {1, 1};
        CU_ASSERT_EQUAL(s_apply(sh, g2, 2), 0);
        double w1 = s_value(sh, 0, 0);
        /* t=1: lr_t = 0.01 sqrt(0.001)/0.1 = 0.0031622777;
           w = -lr_t 0.1/(0.031622777 + 1e-7) = -0.0099999684 */
        double lr1 = 0.01 * sqrt(0.001) / 0.1;
        CU_ASSERT_DOUBLE_EQUAL(w1, -lr1 * 0.1 / (sqrt(0.001) + 1e-7), 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(w1, -0.0099999684, 1e-10);
        int64_t id = 1;
        double one = 1;
        CU_ASSERT_EQUAL(s_apply_sparse(sh, ZDIST_DTYPE_FLOAT64, &id, 1, &one, 8, NULL), 0);
        double lr2 = 0.01 * sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
        double w_row1 = w1 - lr2 * 0.19 / (sqrt(0.001999) + 1e-7);
        CU_ASSERT_DOUBLE_EQUAL(s_value(sh, 1, 0), w_row1, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(s_slot(sh, 0, 1, 0), 0.19, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(s_slot(sh, 1, 1, 0), 0.001999, 1e-15);
        if (lazy) {
            CU_ASSERT_EQUAL(s_value(sh, 0, 0), w1);
            CU_ASSERT_DOUBLE_EQUAL(s_slot(sh, 0, 0, 0), 0.1, 1e-15);
            CU_ASSERT_DOUBLE_EQUAL(s_slot(sh, 1, 0, 0), 0.001, 1e-15);
        } else {
            double w_row0 = w1 - lr2 * 0.09 / (sqrt(0.000999) + 1e-7);
            CU_ASSERT_DOUBLE_EQUAL(s_value(sh, 0, 0), w_row0, 1e-15);
            CU_ASSERT(s_value(sh, 0, 0) < w1 - 0.005); /* it really moved */
            CU_ASSERT_DOUBLE_EQUAL(s_slot(sh, 0, 0, 0), 0.09, 1e-15);
            CU_ASSERT_DOUBLE_EQUAL(s_slot(sh, 1, 0, 0), 0.000999, 1e-15);
        }
        CU_ASSERT_EQUAL(psd_shard_step(sh), 2);
        psd_store_destroy(&store);
    }
}

static void
test_sparse_matches_dense(void)
{
    /* For momentum, a sparse push touching every row once equals the dense push. */
    zdist_optim_config_t c;
    zdist_optim_config_default(&c, ZDIST_OPTIM_MOMENTUM);
    c.nesterov = true;
    psd_shard_t *d, *s;
    psd_store_t *sd = s_store(&c, ZDIST_DTYPE_FLOAT32, 64, 8, 0, 64, 0.5, &d);
    psd_store_t *ss = s_store(&c, ZDIST_DTYPE_FLOAT32, 64, 8, 0, 64, 0.5, &s);
    float *g = malloc(64 * 8 * sizeof *g), *gp = malloc(64 * 8 * sizeof *gp);
    int64_t ids[64];
    for (int step = 0; step < 3; step++) {
        for (int r = 0; r < 64; r++) {
            ids[r] = (r * 37 + step) % 64; /* a permutation */
            for (int k = 0; k < 8; k++)
                g[r * 8 + k] = (float) sin(r + 0.1 * k + step);
        }
        for (int r = 0; r < 64; r++)
            memcpy(gp + r * 8, g + ids[r] * 8, 8 * sizeof *g);
        psd_write_t w = {.op = PSD_OP_APPLY_DENSE, .dtype = ZDIST_DTYPE_FLOAT32,
                         .nrows = PSD_WHOLE_SHARD, .data = g, .nbytes = 64 * 8 * 4};
        CU_ASSERT_EQUAL(psd_shard_write(d, &w, NULL), 0);
        CU_ASSERT_EQUAL(s_apply_sparse(s, ZDIST_DTYPE_FLOAT32, ids, 64, gp, 64 * 8 * 4, NULL), 0);
    }
    float a[64 * 8], b[64 * 8];
    CU_ASSERT_EQUAL(psd_shard_read(d, 0, PSD_WHOLE_SHARD, a, sizeof a, NULL), 0);
    CU_ASSERT_EQUAL(psd_shard_read(s, 0, PSD_WHOLE_SHARD, b, sizeof b, NULL), 0);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    CU_ASSERT_NOT_EQUAL(a[0], 0.5f);
    free(g);
    free(gp);
    psd_store_destroy(&sd);
    psd_store_destroy(&ss);
}

/* Many ids, most repeated, over a table whose rows span more than one radix
   pass: each row's gradients are summed in request order, as a dense push of
   the summed gradient gives bit for bit (SGD leaves untouched rows alone). */
static void
test_sparse_many_duplicates(void)
{
    enum { ROWS = 5000, W = 4, N = 3000 };
    zdist_optim_config_t c;
    zdist_optim_config_default(&c, ZDIST_OPTIM_SGD);
    psd_shard_t *d, *s;
    psd_store_t *sd = s_store(&c, ZDIST_DTYPE_FLOAT32, ROWS, W, 0, ROWS, 0.5, &d);
    psd_store_t *ss = s_store(&c, ZDIST_DTYPE_FLOAT32, ROWS, W, 0, ROWS, 0.5, &s);
    float *g = malloc(N * W * sizeof *g), *sum = calloc(ROWS * W, sizeof *sum);
    int64_t *ids = malloc(N * sizeof *ids);
    bool *seen = calloc(ROWS, sizeof *seen);
    uint64_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        ids[i] = i % 3 == 0 ? (int64_t) ((x >> 33) % ROWS) : (int64_t) ((x >> 33) % 40) * 97; /* hot rows */
        for (int k = 0; k < W; k++) {
            g[i * W + k] = (float) sin(i + 0.3 * k);
            float *t = &sum[ids[i] * W + k];
            *t = seen[ids[i]] ? *t + g[i * W + k] : g[i * W + k];
        }
        seen[ids[i]] = true;
    }
    CU_ASSERT_EQUAL(s_apply_sparse(s, ZDIST_DTYPE_FLOAT32, ids, N, g, N * W * sizeof *g, NULL), 0);
    psd_write_t w = {.op = PSD_OP_APPLY_DENSE, .dtype = ZDIST_DTYPE_FLOAT32,
                     .nrows = PSD_WHOLE_SHARD, .data = sum, .nbytes = ROWS * W * sizeof *sum};
    CU_ASSERT_EQUAL(psd_shard_write(d, &w, NULL), 0);
    float *a = malloc(ROWS * W * sizeof *a), *b = malloc(ROWS * W * sizeof *b);
    CU_ASSERT_EQUAL(psd_shard_read(d, 0, PSD_WHOLE_SHARD, a, ROWS * W * sizeof *a, NULL), 0);
    CU_ASSERT_EQUAL(psd_shard_read(s, 0, PSD_WHOLE_SHARD, b, ROWS * W * sizeof *b, NULL), 0);
    CU_ASSERT_EQUAL(memcmp(a, b, ROWS * W * sizeof *a), 0);
    CU_ASSERT_NOT_EQUAL(a[97 * W], 0.5f);
    free(a);
    free(b);
    free(g);
    free(sum);
    free(ids);
    free(seen);
    psd_store_destroy(&sd);
    psd_store_destroy(&ss);
}

/* Five optimizers: sgd, momentum, nesterov, adagrad, adam. */
static void
s_config_nth(int k, zdist_optim_config_t *ret)
{
    static const zdist_optim_kind_t kinds[] = {ZDIST_OPTIM_SGD, ZDIST_OPTIM_MOMENTUM, ZDIST_OPTIM_MOMENTUM,
                                               ZDIST_OPTIM_ADAGRAD, ZDIST_OPTIM_ADAM};
    zdist_optim_config_default(ret, kinds[k]);
    ret->nesterov = k == 2;
}

/* apply_dense_to writes what the in-place apply gives, bit for bit, and
   leaves w alone: every optimizer, both float types, a length that is no
   multiple of a vector and a destination at another alignment than w, a
   zero gradient (adam's values move, the others' are copied), and dst == w. */
static void
test_apply_dense_to(void)
{
    enum { N = 37, STEPS = 3 };
    for (int k = 0; k < 5; k++)
        for (int d = 0; d < 2; d++) {
            zdist_optim_config_t c;
            s_config_nth(k, &c);
            zdist_dtype_t dtype = d ? ZDIST_DTYPE_FLOAT64 : ZDIST_DTYPE_FLOAT32;
            size_t es = zdist_dtype_size(dtype), bytes = N * es;
            int nslots = zdist_optim_num_slots(c.kind);
            /* in place: a; out of place: from b into dst + es (another alignment) */
            char *a = malloc(bytes), *b = malloc(bytes), *dst = malloc(bytes + es), *g = malloc(bytes);
            char *sa[ZDIST_OPTIM_MAX_SLOTS] = {0}, *sb[ZDIST_OPTIM_MAX_SLOTS] = {0};
            for (int i = 0; i < nslots; i++) {
                sa[i] = malloc(bytes);
                sb[i] = malloc(bytes);
                zdist_optim_slot_fill(&c, i, dtype, sa[i], N);
                zdist_optim_slot_fill(&c, i, dtype, sb[i], N);
            }
            for (int i = 0; i < N; i++) {
                double wv = 0.5 - 0.03 * i, gv = (i % 7) * 0.11 - 0.3;
                if (d) {
                    ((double *) a)[i] = wv;
                    ((double *) g)[i] = gv;
                } else {
                    ((float *) a)[i] = (float) wv;
                    ((float *) g)[i] = (float) gv;
                }
            }
            memcpy(b, a, bytes);
            for (int t = 1; t <= STEPS + 1; t++) {
                const void *gt = t <= STEPS ? g : NULL; /* the last: a zero gradient */
                char keep[N * sizeof(double)];
                memcpy(keep, b, bytes);
                CU_ASSERT_EQUAL(zdist_optim_apply_dense(&c, dtype, t, a, (void *const *) sa, gt, N), 0);
                CU_ASSERT_EQUAL(zdist_optim_apply_dense_to(&c, dtype, t, dst + es, b, (void *const *) sb, gt,
                                                           N), 0);
                CU_ASSERT_EQUAL(memcmp(b, keep, bytes), 0); /* w untouched */
                CU_ASSERT_EQUAL(memcmp(dst + es, a, bytes), 0);
                for (int i = 0; i < nslots; i++)
                    CU_ASSERT_EQUAL(memcmp(sa[i], sb[i], bytes), 0);
                memcpy(b, dst + es, bytes);
            }
            /* dst == w: in place */
            CU_ASSERT_EQUAL(zdist_optim_apply_dense(&c, dtype, STEPS + 2, a, (void *const *) sa, g, N), 0);
            CU_ASSERT_EQUAL(zdist_optim_apply_dense_to(&c, dtype, STEPS + 2, b, b, (void *const *) sb, g, N), 0);
            CU_ASSERT_EQUAL(memcmp(a, b, bytes), 0);
            for (int i = 0; i < nslots; i++) {
                free(sa[i]);
                free(sb[i]);
            }
            free(a);
            free(b);
            free(dst);
            free(g);
        }
}

static void
test_config(void)
{
    zdist_error_t err = {0};
    zdist_optim_config_t c;
    zdist_optim_config_default(&c, ZDIST_OPTIM_ADAM);
    CU_ASSERT_EQUAL(zdist_optim_config_validate(&c, &err), 0);
    c.beta1 = 1.0;
    CU_ASSERT_EQUAL(zdist_optim_config_validate(&c, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "beta_1"));
    zdist_optim_config_default(&c, ZDIST_OPTIM_SGD);
    c.learning_rate = -1;
    CU_ASSERT_EQUAL(zdist_optim_config_validate(&c, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "learning_rate"));
    c.learning_rate = NAN;
    CU_ASSERT_EQUAL(zdist_optim_config_validate(&c, &err), -EINVAL);
    zdist_optim_config_default(&c, ZDIST_OPTIM_MOMENTUM);
    c.momentum = 1.5;
    CU_ASSERT_EQUAL(zdist_optim_config_validate(&c, &err), -EINVAL);
    psd_store_t *store = psd_store_new();
    CU_ASSERT_EQUAL(psd_store_set_optimizer(store, &c, &err), -EINVAL);
    zdist_optim_config_t got;
    psd_store_get_optimizer(store, &got);
    CU_ASSERT_EQUAL(got.kind, ZDIST_OPTIM_SGD); /* unchanged */
    psd_store_destroy(&store);
    c.kind = (zdist_optim_kind_t) 77;
    CU_ASSERT_EQUAL(zdist_optim_config_validate(&c, &err), -EINVAL);
    zdist_optim_kind_t k;
    CU_ASSERT_EQUAL(zdist_optim_kind_from_name("adagrad", &k), 0);
    CU_ASSERT_EQUAL(k, ZDIST_OPTIM_ADAGRAD);
    CU_ASSERT_EQUAL(zdist_optim_kind_from_name("rmsprop", &k), -EINVAL);
    CU_ASSERT_STRING_EQUAL(zdist_optim_slot_name(ZDIST_OPTIM_ADAM, 1), "v");
    CU_ASSERT_STRING_EQUAL(zdist_optim_slot_name(ZDIST_OPTIM_ADAGRAD, 0), "accumulator");
    CU_ASSERT_PTR_NULL(zdist_optim_slot_name(ZDIST_OPTIM_SGD, 0));
    CU_ASSERT_EQUAL(zdist_optim_num_slots(ZDIST_OPTIM_MOMENTUM), 1);
    zdist_optim_config_t a, b;
    zdist_optim_config_default(&a, ZDIST_OPTIM_ADAM);
    b = a;
    b.momentum = 0.3; /* a field adam does not use */
    CU_ASSERT_TRUE(zdist_optim_config_equal(&a, &b));
    b.lazy = true;
    CU_ASSERT_FALSE(zdist_optim_config_equal(&a, &b));
    /* the kernels refuse integer dtypes */
    int32_t wi = 0, gi = 1;
    CU_ASSERT_EQUAL(zdist_optim_apply_dense(&a, ZDIST_DTYPE_INT32, 1, &wi, NULL, &gi, 1), -EINVAL);
}

/* The float32 kernels against each element's formula done one IEEE
   operation at a time (volatile keeps the compiler from vectorizing or
   fusing it): whichever build of the kernels the CPU gets (AVX2 or the
   baseline), the results must be bitwise these. N is odd, so vector
   bodies and scalar tails both run. */
#define S_KN 1003

static float
s_rnd(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return (float) ((double) (*x % 2000001) / 1e6 - 1.0);
}

/* w - num / (sqrt(acc) + eps), one rounded operation at a time. */
static float
s_ref_div_step(float w, float num, float acc, float eps)
{
    volatile float d = sqrtf(acc);
    d = d + eps;
    volatile float q = num / d;
    return w - q;
}

static void
test_kernels_bitwise(void)
{
    uint64_t x = 12345;
    static float w[S_KN], g[S_KN], s0[S_KN], s1[S_KN], rw[S_KN], r0[S_KN], r1[S_KN];
    zdist_optim_kind_t kinds[] = {ZDIST_OPTIM_SGD, ZDIST_OPTIM_MOMENTUM, ZDIST_OPTIM_ADAGRAD, ZDIST_OPTIM_ADAM};
    for (size_t k = 0; k < 4; k++) {
        zdist_optim_config_t c;
        zdist_optim_config_default(&c, kinds[k]);
        c.learning_rate = 0.0123;
        for (size_t i = 0; i < S_KN; i++) {
            rw[i] = w[i] = s_rnd(&x);
            r0[i] = s0[i] = kinds[k] == ZDIST_OPTIM_ADAGRAD ? 0.1f : 0.5f * s_rnd(&x);
            r1[i] = s1[i] = 0.25f * s_rnd(&x) * s_rnd(&x) + 0.25f; /* adam's v: positive */
        }
        void *slots[2] = {s0, s1};
        for (int64_t t = 1; t <= 3; t++) {
            for (size_t i = 0; i < S_KN; i++)
                g[i] = s_rnd(&x);
            CU_ASSERT_EQUAL_FATAL(zdist_optim_apply_dense(&c, ZDIST_DTYPE_FLOAT32, t, w, slots, g, S_KN), 0);
            volatile float lr = (float) c.learning_rate, eps = (float) c.epsilon, a, b;
            volatile float b1 = (float) c.beta1, b2 = (float) c.beta2, mu = (float) c.momentum;
            volatile float lr_t = (float) (c.learning_rate * sqrt(1.0 - pow(c.beta2, (double) t)) /
                                           (1.0 - pow(c.beta1, (double) t)));
            for (size_t i = 0; i < S_KN; i++) {
                switch (kinds[k]) {
                case ZDIST_OPTIM_SGD:
                    a = lr * g[i];
                    rw[i] = rw[i] - a;
                    break;
                case ZDIST_OPTIM_MOMENTUM:
                    a = mu * r0[i];
                    b = lr * g[i];
                    r0[i] = a - b;
                    rw[i] = rw[i] + r0[i];
                    break;
                case ZDIST_OPTIM_ADAGRAD:
                    a = g[i] * g[i];
                    r0[i] = r0[i] + a;
                    a = lr * g[i];
                    rw[i] = s_ref_div_step(rw[i], a, r0[i], eps);
                    break;
                default:
                    a = b1 * r0[i];
                    b = (1.0f - b1);
                    b = b * g[i];
                    r0[i] = a + b;
                    a = b2 * r1[i];
                    b = (1.0f - b2);
                    b = b * g[i];
                    b = b * g[i];
                    r1[i] = a + b;
                    a = lr_t * r0[i];
                    rw[i] = s_ref_div_step(rw[i], a, r1[i], eps);
                    break;
                }
            }
        }
        CU_ASSERT_EQUAL(memcmp(w, rw, sizeof w), 0);
        CU_ASSERT_EQUAL(memcmp(s0, r0, sizeof s0), 0);
        if (kinds[k] == ZDIST_OPTIM_ADAM)
            CU_ASSERT_EQUAL(memcmp(s1, r1, sizeof s1), 0);
    }
}

/* TF's Ftrl in float64, written from ApplyFtrlV2's dense form (the
   l1*sign(linear) - linear numerator and the |linear| > l1 select), not
   the kernel's clamp: one element, one step. */
static void
s_ftrl_ref(const zdist_optim_config_t *c, double *w, double *acc, double *lin, double g)
{
    double p = c->learning_rate_power, lr = c->learning_rate;
    double l2 = c->l2 + c->beta / (2.0 * lr);
    double gs = g + 2.0 * c->l2_shrinkage * *w;
    double an = *acc + g * g;
    *lin += gs - (pow(an, -p) - pow(*acc, -p)) / lr * *w;
    double sign = *lin > 0 ? 1.0 : *lin < 0 ? -1.0 : 0.0;
    double quadratic = pow(an, -p) / lr + 2.0 * l2;
    *w = fabs(*lin) > c->l1 ? (c->l1 * sign - *lin) / quadratic : 0.0;
    *acc = an;
}

static void
test_ftrl(void)
{
    enum { N = 37, STEPS = 6 };
    struct {
        double power, l1, l2, shrink, beta, acc0;
    } cases[] = {
        {-0.5, 0, 0, 0, 0, 0.1},      /* Keras defaults: the sqrt path */
        {-0.5, 0.5, 0.1, 0, 0, 0.1},  /* l1 zeroes the small weights */
        {-0.3, 0.01, 0.05, 0.2, 0.5, 0.5}, /* pow path, shrinkage, beta */
        {0.0, 0.001, 0, 0.1, 0, 1.0}, /* a fixed learning rate */
    };
    uint64_t x = 99;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        zdist_optim_config_t c;
        zdist_optim_config_default(&c, ZDIST_OPTIM_FTRL);
        CU_ASSERT_STRING_EQUAL(zdist_optim_kind_name(c.kind), "ftrl");
        c.learning_rate = 0.05;
        c.learning_rate_power = cases[k].power;
        c.l1 = cases[k].l1;
        c.l2 = cases[k].l2;
        c.l2_shrinkage = cases[k].shrink;
        c.beta = cases[k].beta;
        c.initial_accumulator_value = cases[k].acc0;
        CU_ASSERT_EQUAL_FATAL(zdist_optim_config_validate(&c, NULL), 0);
        double w[N], acc[N], lin[N], rw[N], racc[N], rlin[N], g[N];
        float wf[N], accf[N], linf[N], gf[N];
        zdist_optim_slot_fill(&c, 0, ZDIST_DTYPE_FLOAT64, acc, N);
        zdist_optim_slot_fill(&c, 1, ZDIST_DTYPE_FLOAT64, lin, N);
        zdist_optim_slot_fill(&c, 0, ZDIST_DTYPE_FLOAT32, accf, N);
        zdist_optim_slot_fill(&c, 1, ZDIST_DTYPE_FLOAT32, linf, N);
        for (int i = 0; i < N; i++) {
            w[i] = rw[i] = s_rnd(&x) * 0.5;
            wf[i] = (float) w[i];
            racc[i] = cases[k].acc0;
            rlin[i] = 0;
            CU_ASSERT_EQUAL(acc[i], cases[k].acc0);
            CU_ASSERT_EQUAL(lin[i], 0);
        }
        void *slots[2] = {acc, lin}, *slotsf[2] = {accf, linf};
        for (int t = 1; t <= STEPS; t++) {
            for (int i = 0; i < N; i++) {
                g[i] = s_rnd(&x);
                gf[i] = (float) g[i];
                s_ftrl_ref(&c, &rw[i], &racc[i], &rlin[i], g[i]);
            }
            CU_ASSERT_EQUAL(zdist_optim_apply_dense(&c, ZDIST_DTYPE_FLOAT64, t, w, slots, g, N), 0);
            CU_ASSERT_EQUAL(zdist_optim_apply_dense(&c, ZDIST_DTYPE_FLOAT32, t, wf, slotsf, gf, N), 0);
        }
        int zeros = 0;
        for (int i = 0; i < N; i++) {
            CU_ASSERT_DOUBLE_EQUAL(w[i], rw[i], 1e-12 * (1 + fabs(rw[i])));
            CU_ASSERT_DOUBLE_EQUAL(acc[i], racc[i], 1e-12 * racc[i]);
            CU_ASSERT_DOUBLE_EQUAL(lin[i], rlin[i], 1e-12 * (1 + fabs(rlin[i])));
            CU_ASSERT_DOUBLE_EQUAL(wf[i], rw[i], 1e-4 * (1 + fabs(rw[i])));
            zeros += w[i] == 0.0;
        }
        if (cases[k].l1 >= 0.5)
            CU_ASSERT(zeros > 0); /* the case exercises the l1 cut */
        /* A zero gradient changes nothing, as TF's sparse apply leaves a row alone. */
        double before = w[0];
        CU_ASSERT_EQUAL(zdist_optim_apply_dense(&c, ZDIST_DTYPE_FLOAT64, STEPS + 1, w, slots, NULL, N), 0);
        CU_ASSERT_EQUAL(w[0], before);
    }
    /* The sparse apply runs FTRL on the touched rows only. */
    zdist_optim_config_t c;
    zdist_optim_config_default(&c, ZDIST_OPTIM_FTRL);
    c.learning_rate = 0.1;
    double w[3 * 2] = {1, 1, 1, 1, 1, 1}, acc[6], lin[6] = {0}, g[2] = {0.5, -0.25};
    zdist_optim_slot_fill(&c, 0, ZDIST_DTYPE_FLOAT64, acc, 6);
    void *slots[2] = {acc, lin};
    int64_t ids[1] = {1};
    zdist_optim_scratch_t scratch = {0};
    CU_ASSERT_EQUAL(zdist_optim_apply_sparse(&c, ZDIST_DTYPE_FLOAT64, 1, w, slots, 0, 3, 2, ids, 1, g,
                                             &scratch), 0);
    double rw = 1, racc = 0.1, rlin = 0;
    s_ftrl_ref(&c, &rw, &racc, &rlin, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(w[2], rw, 1e-12);
    CU_ASSERT_EQUAL(w[0], 1.0);
    CU_ASSERT_EQUAL(w[4], 1.0);
    CU_ASSERT_EQUAL(acc[0], 0.1);
    zdist_optim_scratch_release(&scratch);
    /* Validation names the field; the name stays unknown to job files for now. */
    zdist_error_t err = {0};
    c.learning_rate_power = 0.5;
    CU_ASSERT_EQUAL(zdist_optim_config_validate(&c, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "learning_rate_power"));
    c.learning_rate_power = -0.5;
    c.l1 = -1;
    CU_ASSERT_EQUAL(zdist_optim_config_validate(&c, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "l1_regularization_strength"));
    zdist_optim_kind_t kind;
    CU_ASSERT_EQUAL(zdist_optim_kind_from_name("ftrl", &kind), 0);
    CU_ASSERT_EQUAL(kind, ZDIST_OPTIM_FTRL);
    CU_ASSERT_STRING_EQUAL(zdist_optim_slot_name(ZDIST_OPTIM_FTRL, 1), "linear");
}

void
zdist_test_optim_register(void)
{
    ZDIST_SUITE("optim",
                {"sgd", test_sgd},
                {"momentum and nesterov (Keras)", test_momentum},
                {"adagrad (Keras defaults)", test_adagrad},
                {"adam with bias correction, float64 and float32", test_adam},
                {"dense apply on a row range", test_dense_row_range},
                {"sparse duplicate ids summed before applying", test_sparse_duplicates_summed},
                {"sparse adam: TF semantics and lazy", test_sparse_adam},
                {"sparse over every row equals dense", test_sparse_matches_dense},
                {"sparse: many ids, most repeated, summed in request order", test_sparse_many_duplicates},
                {"configs and validation", test_config},
                {"apply_dense_to: out of place, bitwise the in-place apply", test_apply_dense_to},
                {"float32 kernels: bitwise each element's formula, one operation at a time", test_kernels_bitwise},
                {"ftrl: TF's ApplyFtrlV2 (sqrt and pow paths, l1, l2, shrinkage, beta), dense and sparse", test_ftrl});
}
