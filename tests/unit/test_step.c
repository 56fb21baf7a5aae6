/* CUnit suite: the replica context under local strategies — collectives, empty replicas, ON_READ, mirrored copies, plugins. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "models/models.h"
#include "testutil.h"
#include "zdist/collective.h"
#include "worker_registry.h"
#include "worker_trainer.h"

/* ---- a probe model: one variable per sync/aggregation kind; its train
   step runs the collective chosen by s_mode and reports "ok" = 1 when what
   it saw was right (SUM over replicas, so ok == num_replicas). ---- */

enum { M_ALL_REDUCE, M_ALL_GATHER, M_MERGE, M_ON_READ, M_ON_WRITE_SUM, M_ASSIGN_NONE, M_FAIL, M_READ_ROWS, M_CROSS };
static int s_mode;

typedef struct {
    int w, rd_sum, rd_mean, rd_first, rd_none, wr_sum, wr_none;
} s_probe_t;
static s_probe_t s_probe;

static int
s_probe_build(void *state, zdist_model_builder_t *b, zdist_error_t *err)
{
    (void)state;
    zdist_var_spec_t specs[] = {
        {.name = "w", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {6, 3}},
         .init = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -1, .maxval = 1}, .trainable = true},
        {.name = "rd_sum", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}, .synchronization = ZDIST_SYNC_ON_READ,
         .aggregation = ZDIST_AGG_SUM},
        {.name = "rd_mean", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}, .synchronization = ZDIST_SYNC_ON_READ,
         .aggregation = ZDIST_AGG_MEAN},
        {.name = "rd_first", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}, .synchronization = ZDIST_SYNC_ON_READ,
         .aggregation = ZDIST_AGG_ONLY_FIRST_REPLICA},
        {.name = "rd_none", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}, .synchronization = ZDIST_SYNC_ON_READ},
        {.name = "wr_sum", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}, .aggregation = ZDIST_AGG_SUM},
        {.name = "wr_none", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}},
    };
    int *h[] = {&s_probe.w, &s_probe.rd_sum, &s_probe.rd_mean, &s_probe.rd_first, &s_probe.rd_none,
                &s_probe.wr_sum, &s_probe.wr_none};
    for (int i = 0; i < 7; i++)
        if ((*h[i] = zdist_builder_add_variable(b, &specs[i], err)) < 0)
            return *h[i];
    return 0;
}

/* merge_call_values' argument: what replica `id` passes. */
typedef struct {
    int64_t id;
    double half;
} s_mcv_arg_t;

/* Sum of ids + 1000 per argument when every args[i] is replica i's. */
static int
s_check_mcv(void *const *args, int n)
{
    int sum = 0;
    for (int i = 0; i < n; i++) {
        const s_mcv_arg_t *a = args[i];
        if (a->id != i || a->half != i * 0.5 || ((uintptr_t)a & 7) != 0)
            return -EPROTO;
        sum += (int)a->id + 1000;
    }
    return sum;
}

static int
s_sum_ints(void *const *args, int n)
{
    int sum = 0;
    for (int i = 0; i < n; i++)
        sum += *(int *)args[i];
    return sum;
}

static int
s_probe_train(void *state, zdist_replica_ctx_t *ctx)
{
    (void)state;
    int r = zdist_ctx_replica_id(ctx), n = zdist_ctx_num_replicas(ctx);
    const zdist_step_batch_t *batch;
    if (zdist_ctx_next_batch(ctx, &batch) != 1 || zdist_ctx_next_batch(ctx, &batch) != 0)
        return -EPROTO;
    bool ok = true;
    int rc = 0;
    if (s_mode == M_ALL_REDUCE) {
        float a[3] = {(float)(r + 1), (float)(2 * (r + 1)), 0.5f}, b[1] = {(float)(10 * r)};
        float c[3], d[1];
        memcpy(c, a, sizeof a);
        memcpy(d, b, sizeof b);
        float *bufs[2] = {a, b}, *bufs2[2] = {c, d};
        int64_t lens[2] = {3, 1};
        if ((rc = zdist_ctx_all_reduce(ctx, ZDIST_REDUCE_SUM, bufs, lens, 2)) < 0 ||
            (rc = zdist_ctx_all_reduce(ctx, ZDIST_REDUCE_MEAN, bufs2, lens, 2)) < 0)
            return rc;
        double s1 = n * (n + 1) / 2.0, s10 = 10.0 * n * (n - 1) / 2;
        ok = a[0] == s1 && a[1] == 2 * s1 && a[2] == 0.5f * n && b[0] == s10;
        ok = ok && fabsf(c[0] - (float)(s1 / n)) < 1e-6f && fabsf(c[1] - (float)(2 * s1 / n)) < 1e-6f &&
             c[2] == 0.5f && fabsf(d[0] - (float)(s10 / n)) < 1e-5f;
    } else if (s_mode == M_ALL_GATHER) {
        /* Replica r has r+1 rows of [r*100 + i*10 + j]. */
        float in[8 * 2];
        for (int i = 0; i <= r; i++)
            for (int j = 0; j < 2; j++)
                in[i * 2 + j] = (float)(r * 100 + i * 10 + j);
        zdist_shape_t sh = {2, {r + 1, 2}}, out_shape;
        const float *out;
        if ((rc = zdist_ctx_all_gather(ctx, in, &sh, 0, &out, &out_shape)) < 0)
            return rc;
        ok = out_shape.rank == 2 && out_shape.dims[0] == n * (n + 1) / 2 && out_shape.dims[1] == 2;
        int at = 0;
        for (int q = 0; q < n && ok; q++)
            for (int i = 0; i <= q; i++, at++)
                ok = ok && out[at * 2] == q * 100 + i * 10 && out[at * 2 + 1] == q * 100 + i * 10 + 1;
        /* its gradient (distribute_lib.py's custom_gradient): dy of replica q
           is (q + 1) * [1, 2, ...]; summed that is n(n+1)/2 * k, and replica r
           keeps its r + 1 rows, which start after r(r+1)/2 rows */
        if (ok && out_shape.dims[0] <= 36) {
            float dy[36 * 2], grad[8 * 2];
            int64_t cnt = out_shape.dims[0] * 2, begin = (int64_t)r * (r + 1) / 2;
            for (int64_t k = 0; k < cnt; k++)
                dy[k] = (float)((r + 1) * (k + 1));
            if ((rc = zdist_ctx_all_gather_grad(ctx, dy, &out_shape, &sh, 0, grad)) < 0)
                return rc;
            for (int64_t k = 0; k < (r + 1) * 2 && ok; k++)
                ok = grad[k] == (float)(n * (n + 1) / 2 * (begin * 2 + k + 1));
        }
        /* Along axis 1: [2, 1] from each replica -> [2, n]. */
        float col[2] = {(float)r, (float)(r + 50)};
        zdist_shape_t csh = {2, {2, 1}};
        if ((rc = zdist_ctx_all_gather(ctx, col, &csh, 1, &out, &out_shape)) < 0)
            return rc;
        ok = ok && out_shape.dims[0] == 2 && out_shape.dims[1] == n;
        for (int q = 0; q < n && ok; q++)
            ok = out[q] == q && out[n + q] == q + 50;
        /* Shapes that differ outside the axis are refused on every replica. */
        zdist_shape_t bad = {2, {1, r + 1}};
        if (n > 1)
            ok = ok && zdist_ctx_all_gather(ctx, in, &bad, 0, &out, &out_shape) == -EINVAL;
    } else if (s_mode == M_MERGE) {
        int mine = r + 1;
        rc = zdist_ctx_merge_call(ctx, s_sum_ints, &mine);
        ok = rc == n * (n + 1) / 2;
    } else if (s_mode == M_ON_READ) {
        float v[2] = {(float)(r + 1), 1};
        const float *mine;
        if ((rc = zdist_ctx_read(ctx, s_probe.rd_sum, &mine)) < 0)
            return rc;
        float before = mine[0];
        if ((rc = zdist_ctx_assign_add(ctx, s_probe.rd_sum, v)) < 0 ||
            (rc = zdist_ctx_assign_add(ctx, s_probe.rd_mean, v)) < 0 ||
            (rc = zdist_ctx_assign(ctx, s_probe.rd_first, v)) < 0 ||
            (rc = zdist_ctx_assign(ctx, s_probe.rd_none, v)) < 0)
            return rc;
        /* In a replica context an ON_READ variable reads as this replica's copy. */
        if ((rc = zdist_ctx_read(ctx, s_probe.rd_sum, &mine)) < 0)
            return rc;
        ok = mine[0] == before + (float)(r + 1);
    } else if (s_mode == M_ON_WRITE_SUM) {
        float v[2] = {(float)(r + 1), 2};
        if ((rc = zdist_ctx_assign_add(ctx, s_probe.wr_sum, v)) < 0)
            return rc;
        const float *mine;
        if ((rc = zdist_ctx_read(ctx, s_probe.wr_sum, &mine)) < 0)
            return rc;
        ok = mine[0] == (float)(n * (n + 1) / 2) && mine[1] == (float)(2 * n);
    } else if (s_mode == M_ASSIGN_NONE) {
        float v[2] = {1, 2};
        return zdist_ctx_assign(ctx, s_probe.wr_none, v);
    } else if (s_mode == M_FAIL) {
        if (r == 1) {
            zdist_ctx_set_error(ctx, -EIO, "replica one gives up");
            return -EIO;
        }
        float a[1] = {1};
        float *bufs[1] = {a};
        int64_t lens[1] = {1};
        return zdist_ctx_all_reduce(ctx, ZDIST_REDUCE_SUM, bufs, lens, 1);
    } else if (s_mode == M_READ_ROWS) {
        const float *w;
        int64_t ids[] = {3, 1, 3, 0, 5, 1};
        float rows[6 * 3];
        if ((rc = zdist_ctx_read(ctx, s_probe.w, &w)) < 0 ||
            (rc = zdist_ctx_read_rows(ctx, s_probe.w, ids, 6, rows)) < 0)
            return rc;
        for (int i = 0; i < 6; i++)
            ok = ok && memcmp(rows + i * 3, w + ids[i] * 3, 3 * sizeof(float)) == 0;
        int64_t bad = 6;
        ok = ok && zdist_ctx_read_rows(ctx, s_probe.w, &bad, 1, rows) == -ERANGE;
        ok = ok && zdist_ctx_variable(ctx, "rd_mean") == s_probe.rd_mean && zdist_ctx_variable(ctx, "x") == -ENOENT;
    } else if (s_mode == M_CROSS) {
        /* merge_call_values: every replica in sync, in order */
        s_mcv_arg_t a = {.id = r, .half = r * 0.5};
        rc = zdist_ctx_merge_call_values(ctx, s_check_mcv, &a, sizeof a);
        ok = rc == n * (n - 1) / 2 + 1000 * n;
        if (n > 1) /* sizes that differ are refused on every replica */
            ok = ok && zdist_ctx_merge_call_values(ctx, s_check_mcv, &a, r % 2 ? 16 : 8) == -EINVAL;
        /* ON_READ copies written per replica, then read across replicas */
        float sum[2] = {(float)(r + 1), 1}, mean[2] = {(float)(r + 1), 2}, first[2] = {(float)(r + 1), 3};
        if ((rc = zdist_ctx_assign(ctx, s_probe.rd_sum, sum)) < 0 ||
            (rc = zdist_ctx_assign(ctx, s_probe.rd_mean, mean)) < 0 ||
            (rc = zdist_ctx_assign(ctx, s_probe.rd_first, first)) < 0)
            return rc;
        float out[2];
        if ((rc = zdist_ctx_read_cross_replica(ctx, s_probe.rd_sum, out)) < 0)
            return rc;
        ok = ok && out[0] == (float)(n * (n + 1) / 2) && out[1] == (float)n;
        if ((rc = zdist_ctx_read_cross_replica(ctx, s_probe.rd_mean, out)) < 0)
            return rc;
        ok = ok && out[0] == (float)(n + 1) / 2 && out[1] == 2;
        /* ONLY_FIRST_REPLICA: this worker's replica 0 (global id <= r) */
        if ((rc = zdist_ctx_read_cross_replica(ctx, s_probe.rd_first, out)) < 0)
            return rc;
        ok = ok && out[0] >= 1 && out[0] <= (float)(r + 1) && out[0] == floorf(out[0]) && out[1] == 3;
        ok = ok && zdist_ctx_read_cross_replica(ctx, s_probe.rd_none, out) == -EINVAL;
        /* ON_WRITE: the variable itself */
        const float *mine;
        if ((rc = zdist_ctx_read(ctx, s_probe.wr_sum, &mine)) < 0 ||
            (rc = zdist_ctx_read_cross_replica(ctx, s_probe.wr_sum, out)) < 0)
            return rc;
        ok = ok && memcmp(out, mine, sizeof out) == 0;
    }
    return zdist_ctx_output(ctx, "ok", ok ? 1 : 0, ZDIST_REDUCE_SUM);
}

static int
s_probe_eval(void *state, zdist_replica_ctx_t *ctx)
{
    (void)state;
    zdist_grad_t g = {.var = 0, .values = (float[18]){0}};
    return zdist_ctx_apply_gradients(ctx, &g, 1) == -EPERM ? zdist_ctx_output(ctx, "ok", 1, ZDIST_REDUCE_SUM) : -EPROTO;
}

static const zdist_model_t s_probe_model = {
    .name = "probe", .build = s_probe_build, .train_step = s_probe_train, .eval_step = s_probe_eval};

/* An input step with the given per-replica sizes (no data). */
static zdist_input_step_t
s_fake_step(zdist_batch_t *reps, int n, const int64_t *sizes)
{
    zdist_input_step_t st = {.num_replicas = n, .replicas = reps};
    for (int r = 0; r < n; r++) {
        reps[r] = (zdist_batch_t){.size = sizes ? sizes[r] : 1};
        st.size += reps[r].size;
    }
    return st;
}

static worker_trainer_t *
s_probe_trainer(zdist_strategy_t kind, int n)
{
    worker_trainer_config_t cfg = {.strategy = kind, .num_replicas = n, .seed = 3};
    zdist_optim_config_default(&cfg.optim, ZDIST_OPTIM_SGD);
    zdist_model_info_t info = {.input_dim = 1, .label_dtype = ZDIST_DTYPE_INT32};
    zdist_error_t err = {0};
    worker_trainer_t *t = worker_trainer_new(&s_probe_model, NULL, &info, &cfg, &err);
    CU_ASSERT_PTR_NOT_NULL(t);
    return t;
}

static double
s_run_probe(worker_trainer_t *t, int mode, bool eval, int *ret_rc, zdist_error_t *err)
{
    zdist_batch_t reps[4];
    zdist_input_step_t st = s_fake_step(reps, worker_trainer_num_replicas(t), NULL);
    worker_outputs_t out;
    s_mode = mode;
    *ret_rc = worker_trainer_step(t, &st, eval, &out, err);
    return *ret_rc < 0 ? -1 : worker_outputs_get(&out, "ok", -1);
}

static void
test_collectives(void)
{
    for (int n = 1; n <= 3; n++) {
        worker_trainer_t *t = s_probe_trainer(n == 1 ? ZDIST_STRATEGY_ONE_DEVICE : ZDIST_STRATEGY_MIRRORED, n);
        if (!t)
            return;
        int rc;
        zdist_error_t err = {0};
        CU_ASSERT_EQUAL(s_run_probe(t, M_ALL_REDUCE, false, &rc, &err), n);
        CU_ASSERT_EQUAL(s_run_probe(t, M_ALL_GATHER, false, &rc, &err), n);
        CU_ASSERT_EQUAL(s_run_probe(t, M_MERGE, false, &rc, &err), n);
        CU_ASSERT_EQUAL(s_run_probe(t, M_READ_ROWS, false, &rc, &err), n);
        CU_ASSERT_EQUAL(s_run_probe(t, M_ON_WRITE_SUM, false, &rc, &err), n);
        CU_ASSERT_EQUAL(s_run_probe(t, M_CROSS, false, &rc, &err), n);
        if (rc != 0)
            fprintf(stderr, "\nM_CROSS on %d replicas: rc %d %s\n", n, rc, err.text);
        CU_ASSERT_EQUAL(s_run_probe(t, 0, true, &rc, &err), n); /* eval refuses apply */
        worker_trainer_destroy(&t);
    }
    /* central_storage keeps a copy of each ON_READ variable per replica too */
    worker_trainer_t *t = s_probe_trainer(ZDIST_STRATEGY_CENTRAL_STORAGE, 2);
    if (!t)
        return;
    int rc;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(s_run_probe(t, M_CROSS, false, &rc, &err), 2);
    worker_trainer_destroy(&t);
}

static void
test_on_read_aggregation(void)
{
    worker_trainer_t *t = s_probe_trainer(ZDIST_STRATEGY_MIRRORED, 3);
    if (!t)
        return;
    int rc;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(s_run_probe(t, M_ON_READ, false, &rc, &err), 3);
    CU_ASSERT_EQUAL(s_run_probe(t, M_ON_READ, false, &rc, &err), 3);
    float v[2];
    /* Two steps of assign_add (r+1, 1) on replicas 0..2. */
    CU_ASSERT_EQUAL(worker_trainer_read_variable(t, "rd_sum", v, &err), 0);
    CU_ASSERT_EQUAL(v[0], 12);
    CU_ASSERT_EQUAL(v[1], 6);
    CU_ASSERT_EQUAL(worker_trainer_read_variable(t, "rd_mean", v, &err), 0);
    CU_ASSERT_EQUAL(v[0], 4);
    CU_ASSERT_EQUAL(v[1], 2);
    CU_ASSERT_EQUAL(worker_trainer_read_variable(t, "rd_first", v, &err), 0);
    CU_ASSERT_EQUAL(v[0], 1);
    CU_ASSERT_EQUAL(worker_trainer_read_variable(t, "rd_none", v, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "aggregation NONE"));
    CU_ASSERT_EQUAL(worker_trainer_read_variable(t, "nope", v, &err), -ENOENT);
    /* ON_WRITE with NONE cannot be written in a replica context (TF's ValueError). */
    CU_ASSERT_EQUAL(s_run_probe(t, M_ASSIGN_NONE, false, &rc, &err), -1);
    CU_ASSERT_EQUAL(rc, -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "aggregation NONE"));
    worker_trainer_destroy(&t);
}

static void
test_failure_releases_replicas(void)
{
    worker_trainer_t *t = s_probe_trainer(ZDIST_STRATEGY_MIRRORED, 3);
    if (!t)
        return;
    int rc;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(s_run_probe(t, M_FAIL, false, &rc, &err), -1);
    CU_ASSERT_EQUAL(rc, -EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "replica 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "replica one gives up"));
    /* The replicas are out of step now: further steps are refused. */
    CU_ASSERT_EQUAL(s_run_probe(t, M_MERGE, false, &rc, &err), -1);
    CU_ASSERT_EQUAL(rc, -ECANCELED);
    worker_trainer_destroy(&t);
}

static const zdist_var_spec_t *s_one_spec;

static int
s_one_build(void *state, zdist_model_builder_t *b, zdist_error_t *err)
{
    (void)state;
    int rc = zdist_builder_add_variable(b, s_one_spec, err);
    return rc < 0 ? rc : 0;
}

static void
test_bad_variables(void)
{
    static const zdist_model_t one = {.name = "one", .build = s_one_build, .train_step = s_probe_train,
                                      .eval_step = s_probe_eval};
    struct {
        zdist_var_spec_t spec;
        const char *want;
    } cases[] = {
        {{.name = "m", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}, .synchronization = ZDIST_SYNC_ON_READ,
          .trainable = true}, "only for non-trainable"},
        {{.name = "bad name!", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}}, "is not valid"},
        {{.name = "i", .dtype = ZDIST_DTYPE_INT32, .shape = {1, {2}}}, "use float32"},
        {{.name = "p", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}, .partitioner = "fixed:0"}, "partitioner"},
        {{.name = "r", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}},
          .init = {.kind = ZDIST_INIT_RANDOM_NORMAL, .stddev = -1}}, "variable 'r'"},
        {{.name = "z", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {0, 2}}}, "shape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        worker_vars_t vars;
        zdist_error_t err = {0};
        s_one_spec = &cases[i].spec;
        CU_ASSERT(worker_vars_build(&one, NULL, &vars, &err) < 0);
        CU_ASSERT_EQUAL(vars.n, 0);
        if (!strstr(err.text, cases[i].want))
            fprintf(stderr, "\n  case %zu: '%s' lacks '%s'", i, err.text, cases[i].want);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, cases[i].want));
    }
}

/* ---- real models through real inputs ---- */

static worker_trainer_t *
s_trainer(const zdist_model_t *model, const char *params, const zdist_dataset_t *ds, zdist_strategy_t kind,
          int n, zdist_optim_kind_t opt)
{
    worker_trainer_config_t cfg = {.strategy = kind, .num_replicas = n, .seed = 11};
    zdist_optim_config_default(&cfg.optim, opt);
    cfg.optim.learning_rate = 0.05;
    zdist_model_info_t info = {.input_dim = zdist_dataset_dim(ds), .num_classes = zdist_dataset_num_classes(ds),
                               .sparse = zdist_dataset_is_sparse(ds), .label_dtype = zdist_dataset_label_dtype(ds),
                               .seed = 11};
    zdist_error_t err = {0};
    worker_trainer_t *t = worker_trainer_new(model, params, &info, &cfg, &err);
    if (!t)
        fprintf(stderr, "\n  trainer: %s", err.text);
    CU_ASSERT_PTR_NOT_NULL(t);
    return t;
}

/* Runs `steps` steps of batch G over ds (no shuffle) on n replicas. */
static int
s_train(worker_trainer_t *t, const zdist_dataset_t *ds, int64_t G, int64_t steps, double *ret_loss)
{
    zdist_error_t err = {0};
    zdist_input_context_t *ictx = zdist_input_context_new(1, 0, worker_trainer_num_replicas(t), &err);
    zdist_input_options_t opts;
    zdist_input_options_init(&opts, G);
    opts.epochs = ZDIST_INPUT_REPEAT_FOREVER;
    opts.shard_policy = ZDIST_AUTO_SHARD_OFF;
    zdist_input_t *in = zdist_input_new(ds, ictx, &opts, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    int rc = 0;
    for (int64_t s = 0; s < steps && rc == 0; s++) {
        const zdist_input_step_t *st;
        CU_ASSERT_EQUAL(zdist_input_next(in, &st), 1);
        worker_outputs_t out;
        rc = worker_trainer_step(t, st, false, &out, &err);
        if (rc < 0)
            fprintf(stderr, "\n  step: %s", err.text);
        if (ret_loss)
            *ret_loss = worker_outputs_get(&out, ZDIST_OUTPUT_LOSS, NAN);
    }
    zdist_input_destroy(&in);
    zdist_input_context_destroy(&ictx);
    return rc;
}

/* TF's loss scaling: with loss = sum / global batch and a SUM all-reduce,
   N replicas (some empty, when G does not fill them) train exactly as one
   device on the whole batch, up to float rounding. */
static void
test_mirrored_matches_one_device(void)
{
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_classification(50, 6, 3, 5, &ds, &err), 0);
    /* Batch 4 over 3 replicas: 2,1,1 -- and the last partial batch of 2 (50 = 12*4 + 2) gives 1,1,0. */
    worker_trainer_t *one = s_trainer(&worker_model_mlp, "{\"hidden\": [5]}", ds, ZDIST_STRATEGY_ONE_DEVICE, 1,
                                      ZDIST_OPTIM_SGD);
    worker_trainer_t *mir = s_trainer(&worker_model_mlp, "{\"hidden\": [5]}", ds, ZDIST_STRATEGY_MIRRORED, 3,
                                      ZDIST_OPTIM_SGD);
    if (one && mir) {
        double l1, l3;
        CU_ASSERT_EQUAL(s_train(one, ds, 4, 13, &l1), 0);
        CU_ASSERT_EQUAL(s_train(mir, ds, 4, 13, &l3), 0);
        CU_ASSERT_DOUBLE_EQUAL(l1, l3, 1e-5);
        const worker_vars_t *vars = worker_trainer_vars(one);
        double worst = 0;
        for (int v = 0; v < vars->n; v++) {
            const float *a = worker_local_copy(worker_trainer_backend(one), 0, v);
            const float *b = worker_local_copy(worker_trainer_backend(mir), 2, v);
            for (int64_t j = 0; j < vars->vars[v].n; j++)
                worst = fmax(worst, fabs((double)a[j] - b[j]));
        }
        CU_ASSERT(worst < 1e-5);
    }
    worker_trainer_destroy(&one);
    worker_trainer_destroy(&mir);
    zdist_dataset_destroy(&ds);
}

/* Every replica's copy of every variable (and so every optimizer slot's
   effect) is bitwise the same after many adam steps; central storage's one
   copy is bitwise mirrored's. */
static void
test_mirrored_copies_identical(void)
{
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_classification(200, 8, 4, 9, &ds, &err), 0);
    worker_trainer_t *mir = s_trainer(&worker_model_mlp, "{\"hidden\": [16, 8]}", ds, ZDIST_STRATEGY_MIRRORED, 3,
                                      ZDIST_OPTIM_ADAM);
    worker_trainer_t *cen = s_trainer(&worker_model_mlp, "{\"hidden\": [16, 8]}", ds,
                                      ZDIST_STRATEGY_CENTRAL_STORAGE, 3, ZDIST_OPTIM_ADAM);
    if (mir && cen) {
        double first, last;
        CU_ASSERT_EQUAL(s_train(mir, ds, 10, 1, &first), 0);
        CU_ASSERT_EQUAL(s_train(mir, ds, 10, 39, &last), 0);
        CU_ASSERT(last < first);
        CU_ASSERT_EQUAL(s_train(cen, ds, 10, 1, NULL), 0);
        CU_ASSERT_EQUAL(s_train(cen, ds, 10, 39, NULL), 0);
        const worker_vars_t *vars = worker_trainer_vars(mir);
        worker_backend_t *be = worker_trainer_backend(mir);
        for (int v = 0; v < vars->n; v++) {
            size_t bytes = (size_t)vars->vars[v].n * sizeof(float);
            for (int r = 1; r < 3; r++)
                CU_ASSERT_EQUAL(memcmp(worker_local_copy(be, 0, v), worker_local_copy(be, r, v), bytes), 0);
            CU_ASSERT_EQUAL(memcmp(worker_local_copy(be, 0, v), worker_local_copy(worker_trainer_backend(cen), 0, v),
                                   bytes), 0);
        }
    }
    worker_trainer_destroy(&mir);
    worker_trainer_destroy(&cen);
    zdist_dataset_destroy(&ds);
}

/* Batch norm under mirrored and central storage: the statistics are the
   global batch's (the replicas all-reduce their sums), so the moving mean
   and variance, every replica's copy of them, and the trained weights are
   one device's on the same batches -- empty replicas included. */
static void
test_batch_norm_global_statistics(void)
{
    const char *bn = "{\"input_shape\": [6], \"layers\": [{\"dense\": {\"units\": 5}}, "
                     "{\"batch_norm\": {\"momentum\": 0.5}}, \"relu\", {\"dense\": {\"units\": 3}}], "
                     "\"loss\": \"sparse_categorical_crossentropy\"}";
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_classification(50, 6, 3, 5, &ds, &err), 0);
    /* Batch 4 over 3 replicas: 2,1,1, and the last partial batch of 2 gives 1,1,0. */
    worker_trainer_t *one = s_trainer(&worker_model_sequential, bn, ds, ZDIST_STRATEGY_ONE_DEVICE, 1,
                                      ZDIST_OPTIM_SGD);
    worker_trainer_t *mir = s_trainer(&worker_model_sequential, bn, ds, ZDIST_STRATEGY_MIRRORED, 3, ZDIST_OPTIM_SGD);
    worker_trainer_t *cen = s_trainer(&worker_model_sequential, bn, ds, ZDIST_STRATEGY_CENTRAL_STORAGE, 2,
                                      ZDIST_OPTIM_SGD);
    if (one && mir && cen) {
        double l1, l3, l2;
        CU_ASSERT_EQUAL(s_train(one, ds, 4, 13, &l1), 0);
        CU_ASSERT_EQUAL(s_train(mir, ds, 4, 13, &l3), 0);
        CU_ASSERT_EQUAL(s_train(cen, ds, 4, 13, &l2), 0);
        CU_ASSERT_DOUBLE_EQUAL(l1, l3, 1e-5);
        CU_ASSERT_DOUBLE_EQUAL(l1, l2, 1e-5);
        const worker_vars_t *vars = worker_trainer_vars(one);
        int mm = worker_vars_find(vars, "batch_normalization/moving_mean");
        int mv = worker_vars_find(vars, "batch_normalization/moving_variance");
        CU_ASSERT_FATAL(mm >= 0 && mv >= 0);
        double worst = 0, moved = 0;
        for (int v = 0; v < vars->n; v++) {
            const float *a = worker_local_copy(worker_trainer_backend(one), 0, v);
            for (int r = 0; r < 3; r++) {
                const float *b = worker_local_copy(worker_trainer_backend(mir), r, v);
                const float *c = worker_local_copy(worker_trainer_backend(cen), r % 2, v);
                for (int64_t j = 0; j < vars->vars[v].n; j++)
                    worst = fmax(worst, fmax(fabs((double)a[j] - b[j]), fabs((double)a[j] - c[j])));
            }
        }
        const float *m0 = worker_local_copy(worker_trainer_backend(one), 0, mm);
        const float *v0 = worker_local_copy(worker_trainer_backend(one), 0, mv);
        for (int j = 0; j < 5; j++)
            moved += fabs(m0[j]) + fabs(v0[j] - 1);
        CU_ASSERT(worst < 1e-5);
        CU_ASSERT(moved > 0.1); /* the statistics did move */
        /* Read across replicas (ON_READ, MEAN): the same value. */
        float agg[5];
        CU_ASSERT_EQUAL(worker_trainer_read_variable(mir, "batch_normalization/moving_variance", agg, &err), 0);
        for (int j = 0; j < 5; j++)
            CU_ASSERT_DOUBLE_EQUAL(agg[j], v0[j], 1e-5);
    }
    worker_trainer_destroy(&one);
    worker_trainer_destroy(&mir);
    worker_trainer_destroy(&cen);
    zdist_dataset_destroy(&ds);
}

/* Sparse gradients under mirrored: gathered, duplicates summed, identical copies. */
static void
test_sparse_mirrored(void)
{
    char *dir = zdist_test_tmpdir("step-svm");
    char path[512];
    snprintf(path, sizeof path, "%s/a.svm", dir);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < 60; i++)
        fprintf(f, "%d %d:1 %d:0.5 %d:1\n", i % 2 ? 1 : -1, i % 2 ? 1 : 2, 3 + i % 5, i % 2 ? 10 : 11);
    fclose(f);
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_read_libsvm(path, 16, &ds, &err), 0);
    worker_trainer_t *mir = s_trainer(&worker_model_sparse_logreg, "{\"dim\": 12}", ds, ZDIST_STRATEGY_MIRRORED, 2,
                                      ZDIST_OPTIM_ADAGRAD);
    if (mir) {
        double first, last;
        CU_ASSERT_EQUAL(s_train(mir, ds, 8, 1, &first), 0);
        CU_ASSERT_EQUAL(s_train(mir, ds, 8, 30, &last), 0);
        CU_ASSERT(last < first);
        worker_backend_t *be = worker_trainer_backend(mir);
        CU_ASSERT_EQUAL(memcmp(worker_local_copy(be, 0, 0), worker_local_copy(be, 1, 0), 12 * sizeof(float)), 0);
    }
    worker_trainer_destroy(&mir);
    zdist_dataset_destroy(&ds);
    zdist_test_rmtree(dir);
    free(dir);
}

/* ---- plugins ---- */

#define S_PLUGIN_DIR ZDIST_BUILD_DIR "/tests/plugin"

static void
test_plugin_load_and_train(void)
{
    worker_registry_t *reg = worker_registry_new("/nonexistent:" S_PLUGIN_DIR "/good", NULL);
    zdist_error_t err = {0};
    const zdist_model_t *m = worker_registry_find(reg, "plugin_linear", &err);
    if (!m)
        fprintf(stderr, "\n  plugin: %s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    zdist_dataset_t *ds = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_regression(256, 4, 2, 0.01, &ds, &err), 0);
    worker_trainer_t *t = s_trainer(m, NULL, ds, ZDIST_STRATEGY_MIRRORED, 2, ZDIST_OPTIM_SGD);
    if (t) {
        double first, last;
        CU_ASSERT_EQUAL(s_train(t, ds, 16, 1, &first), 0);
        CU_ASSERT_EQUAL(s_train(t, ds, 16, 150, &last), 0);
        CU_ASSERT(last < first * 0.05);
        /* The plugin learned the teacher. */
        float w[4], b, learned[4];
        zdist_dataset_synthetic_teacher(4, 2, w, &b);
        CU_ASSERT_EQUAL(worker_trainer_read_variable(t, "plugin/w", learned, &err), 0);
        for (int j = 0; j < 4; j++)
            CU_ASSERT_DOUBLE_EQUAL(learned[j], w[j], 0.05);
    }
    worker_trainer_destroy(&t);
    zdist_dataset_destroy(&ds);
    /* Loading the same file again is a no-op; its model names are taken. */
    CU_ASSERT_EQUAL(worker_registry_load(reg, S_PLUGIN_DIR "/good/plugin_linear.so", &err), 0);
    worker_registry_destroy(&reg);
}

static void
test_plugin_abi_mismatch(void)
{
    worker_registry_t *reg = worker_registry_new(S_PLUGIN_DIR "/badabi", NULL);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(worker_registry_load(reg, S_PLUGIN_DIR "/badabi/plugin_linear.so", &err), -EPROTO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "badabi/plugin_linear.so"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "version 999"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "version 1"));
    /* Found through the path, the model is refused with the same reason. */
    memset(&err, 0, sizeof err);
    CU_ASSERT_PTR_NULL(worker_registry_find(reg, "plugin_linear", &err));
    CU_ASSERT_EQUAL(err.code, -EPROTO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "version 999"));
    /* Not a plugin at all, and no file. */
    CU_ASSERT_EQUAL(worker_registry_load(reg, "/nonexistent/x.so", &err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "/nonexistent/x.so"));
    worker_registry_destroy(&reg);
    /* A plugin may not shadow a built-in. */
    reg = worker_registry_new(NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL(worker_registry_find(reg, "mlp", &err));
    worker_registry_destroy(&reg);
}

/* ---- multi_worker_mirrored: two "workers" (trainers with their own ring
   ends, over loopback TCP) stepping together on threads ---- */

typedef struct {
    worker_trainer_t *t;
    int mode;
    double ok;
    int rc;
    zdist_error_t err;
} s_mw_t;

static void *
s_mw_step(void *arg)
{
    s_mw_t *w = arg;
    w->ok = s_run_probe(w->t, w->mode, false, &w->rc, &w->err);
    return NULL;
}

/* Runs probe mode on both workers at once; ok values into ok[2]. */
static void
s_mw_run(s_mw_t *w, int mode)
{
    pthread_t th;
    w[0].mode = w[1].mode = mode;
    pthread_create(&th, NULL, s_mw_step, &w[1]);
    s_mw_step(&w[0]);
    pthread_join(th, NULL);
}

static void
test_multi_worker_collectives(void)
{
    for (int local = 1; local <= 2; local++) {
        s_mw_t w[2] = {0};
        zdist_comm_t *comm[2] = {0};
        const char *eps[2];
        for (int i = 0; i < 2; i++) {
            worker_trainer_config_t cfg = {.strategy = ZDIST_STRATEGY_MULTI_WORKER_MIRRORED, .num_replicas = local,
                                           .seed = 3, .num_workers = 2, .worker_index = i};
            zdist_optim_config_default(&cfg.optim, ZDIST_OPTIM_SGD);
            zdist_model_info_t info = {.input_dim = 1, .label_dtype = ZDIST_DTYPE_INT32};
            zdist_error_t err = {0};
            w[i].t = worker_trainer_new(&s_probe_model, NULL, &info, &cfg, &err);
            zdist_comm_config_t cc = {.rank = i, .size = 2, .bind = "tcp://127.0.0.1:*", .timeout_ms = 20000};
            comm[i] = zdist_comm_new(&cc, &err);
            CU_ASSERT_PTR_NOT_NULL_FATAL(w[i].t);
            CU_ASSERT_PTR_NOT_NULL_FATAL(comm[i]);
            eps[i] = zdist_comm_endpoint(comm[i]);
        }
        for (int i = 0; i < 2; i++) {
            CU_ASSERT_EQUAL(zdist_comm_connect(comm[i], eps, NULL), 0);
            worker_local_set_comm(worker_trainer_backend(w[i].t), comm[i], 2, 20000);
        }
        /* The probe checks against the global replicas (ids worker-major),
           so each worker's local sum of "ok" is its replica count. */
        int modes[] = {M_ALL_REDUCE, M_ALL_GATHER, M_ON_WRITE_SUM, M_READ_ROWS, M_CROSS};
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            s_mw_run(w, modes[m]);
            for (int i = 0; i < 2; i++) {
                CU_ASSERT_EQUAL(w[i].rc, 0);
                CU_ASSERT_EQUAL(w[i].ok, local);
                if (w[i].rc != 0 || w[i].ok != local)
                    fprintf(stderr, "\n%d local replicas, mode %d, worker %d: rc %d ok %g %s\n", local, modes[m], i,
                            w[i].rc, w[i].ok, w[i].err.text);
            }
        }
        /* ON_WRITE NONE cannot be assigned by more than one replica in all. */
        s_mw_run(w, M_ASSIGN_NONE);
        CU_ASSERT_EQUAL(w[0].rc, -EINVAL);
        CU_ASSERT_EQUAL(w[1].rc, -EINVAL);
        /* Copies of the ON_WRITE variable agree across the workers. */
        float a[2], b[2];
        CU_ASSERT_EQUAL(worker_trainer_read_variable(w[0].t, "wr_sum", a, NULL), 0);
        CU_ASSERT_EQUAL(worker_trainer_read_variable(w[1].t, "wr_sum", b, NULL), 0);
        CU_ASSERT(memcmp(a, b, sizeof a) == 0 && a[1] == (float)(4 * local));
        for (int i = 0; i < 2; i++) {
            worker_trainer_destroy(&w[i].t);
            zdist_comm_destroy(&comm[i]);
        }
    }
}

/* A worker whose peer never steps: the step fails within the deadline on
   every local replica, naming the missing rank, and nothing is applied. */
static void
test_multi_worker_peer_missing(void)
{
    worker_trainer_config_t cfg = {.strategy = ZDIST_STRATEGY_MULTI_WORKER_MIRRORED, .num_replicas = 2, .seed = 3,
                                   .num_workers = 2, .worker_index = 0};
    zdist_optim_config_default(&cfg.optim, ZDIST_OPTIM_SGD);
    zdist_model_info_t info = {.input_dim = 1, .label_dtype = ZDIST_DTYPE_INT32};
    zdist_error_t err = {0};
    worker_trainer_t *t = worker_trainer_new(&s_probe_model, NULL, &info, &cfg, &err);
    zdist_comm_config_t c0 = {.rank = 0, .size = 2, .bind = "tcp://127.0.0.1:*", .timeout_ms = 300};
    zdist_comm_config_t c1 = {.rank = 1, .size = 2, .bind = "tcp://127.0.0.1:*", .timeout_ms = 300};
    zdist_comm_t *comm = zdist_comm_new(&c0, &err), *peer = zdist_comm_new(&c1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(comm);
    CU_ASSERT_PTR_NOT_NULL_FATAL(peer);
    const char *eps[2] = {zdist_comm_endpoint(comm), zdist_comm_endpoint(peer)};
    CU_ASSERT_EQUAL(zdist_comm_connect(comm, eps, NULL), 0);
    worker_local_set_comm(worker_trainer_backend(t), comm, 2, 300);
    float before[2];
    CU_ASSERT_EQUAL(worker_trainer_read_variable(t, "wr_sum", before, NULL), 0);
    int rc;
    s_run_probe(t, M_ON_WRITE_SUM, false, &rc, &err);
    CU_ASSERT_EQUAL(rc, -ETIMEDOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(worker_local_last_error(worker_trainer_backend(t)), "rank 1"));
    float after[2];
    CU_ASSERT_EQUAL(worker_trainer_read_variable(t, "wr_sum", after, NULL), 0);
    CU_ASSERT(memcmp(before, after, sizeof before) == 0);
    worker_trainer_destroy(&t);
    zdist_comm_destroy(&comm);
    zdist_comm_destroy(&peer);
}

void
zdist_test_step_register(void)
{
    ZDIST_SUITE("step",
                {"all_reduce, all_gather, merge_call, read_rows on 1-3 replicas", test_collectives},
                {"ON_READ aggregation and ON_WRITE NONE", test_on_read_aggregation},
                {"a failing replica releases the others", test_failure_releases_replicas},
                {"bad variable specs", test_bad_variables},
                {"mirrored (with empty replicas) trains as one device", test_mirrored_matches_one_device},
                {"mirrored copies bitwise identical; central storage the same", test_mirrored_copies_identical},
                {"sparse gradients under mirrored", test_sparse_mirrored},
                {"batch norm: global-batch statistics under mirrored and central storage",
                 test_batch_norm_global_statistics},
                {"multi_worker_mirrored: reductions across two workers (1 and 2 local replicas)",
                 test_multi_worker_collectives},
                {"multi_worker_mirrored: a missing peer fails the step within the deadline",
                 test_multi_worker_peer_missing},
                {"plugin loaded from a path and trained", test_plugin_load_and_train},
                {"plugin with another ABI version refused", test_plugin_abi_mismatch});
}
