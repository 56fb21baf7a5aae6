/* dynopt_driver: FTRL on dynamic and fixed tables of real zdist-psds, checked against TF's formula, for test_dynamic_ftrl.sh.

   usage: dynopt_driver ftrl|default ADDR0 ADDR1   (exit 0 when every check passed, 1 otherwise)

   default: a dynamic table over both psds with min_count 3 and a default
   of -0.5: lookups of ids never seen and of ids counted once or twice
   read -0.5 in every element (their gradients dropped, counted); at the
   third occurrence the row exists (initializer 0.25, then the update);
   a table without a default reads zeros.

   ftrl:

   Three jobs, each with its own FTRL (set_optimizer naming the job, as a
   worker does): Keras's defaults but a larger rate; every field set
   (l1, l2, l2_shrinkage, beta, learning_rate_power -0.3); and
   learning_rate_power 0 with initial_accumulator_value 0 (zeros the
   protocol once read as "the Keras default"). Each job has a dynamic
   table spread over both psds (ids from all of int64, placed by
   zdist_partition_id_ps) and a fixed table on ps 0; three sparse pushes
   (one with an id twice: summed first, as TF's sparse apply) are checked
   row by row against TF's ApplyFtrlV2 computed here in double from the
   rows' known start (constant 0.25, accumulator initial_accumulator_value,
   linear 0). An id never pushed reads the table's default (zeros). */
#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/endpoint.h"
#include "zdist/partition.h"
#include "zdist/ps_client.h"

#define DIM 3
#define NIDS 4
#define STEPS 3
#define W0 0.25

static int s_failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            s_failures++;                                                      \
        }                                                                      \
    } while (0)

static zdist_error_t s_err;

#define OK(call)                                                               \
    do {                                                                       \
        int rc_ = (call);                                                      \
        CHECK(rc_ == 0, "rc %d: %s", rc_, s_err.text);                         \
    } while (0)

static zdist_ps_client_t *
s_client(const char *addr)
{
    char ep[300];
    zdist_error_t err = {0};
    if (zdist_endpoint_normalize(addr, ep, sizeof ep, &err) < 0) {
        fprintf(stderr, "dynopt_driver: %s\n", err.text);
        exit(2);
    }
    zdist_ps_client_options_t opts;
    zdist_ps_client_options_default(&opts);
    opts.timeout_ms = 20000;
    opts.retries = 3;
    zdist_ps_client_t *c = zdist_ps_client_new(ep, &opts, &err);
    if (!c) {
        fprintf(stderr, "dynopt_driver: %s\n", err.text);
        exit(2);
    }
    return c;
}

static zdist_tensor_t
s_f32(float *data, int64_t rows)
{
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = data, .nbytes = (size_t) (rows * DIM) * sizeof(float)};
    t.shape.rank = 2;
    t.shape.dims[0] = rows;
    t.shape.dims[1] = DIM;
    return t;
}

/* TF's ApplyFtrlV2 (training_ops.cc, multiply_linear_by_lr false) on one
   element, in double, with Keras's beta folded into l2 as
   tf.keras.optimizers.Ftrl does (l2 + beta / (2 * lr)). */
static void
s_ftrl_ref(const zdist_optim_config_t *c, double *w, double *accum, double *linear, double g)
{
    double lr = c->learning_rate, p = c->learning_rate_power;
    double l2 = c->l2 + c->beta / (2.0 * lr);
    double gs = g + 2.0 * c->l2_shrinkage * *w;
    double na = *accum + g * g;
    *linear += gs - (pow(na, -p) - pow(*accum, -p)) / lr * *w;
    double quadratic = pow(na, -p) / lr + 2.0 * l2;
    *w = fabs(*linear) > c->l1 ? ((*linear > 0 ? c->l1 : -c->l1) - *linear) / quadratic : 0.0;
    *accum = na;
}

/* The gradient of id slot i, element j at step s: varied, both signs. */
static float
s_grad(int s, int i, int j)
{
    return (float) (0.3 * sin(1.7 * s + 2.3 * i + 0.9 * j) + 0.05 * (i - 1));
}

/* One job: its optimizer on both psds, a dynamic table over both and a
   fixed [NIDS, DIM] table on ps 0, STEPS sparse pushes, rows checked. */
static void
s_job(zdist_ps_client_t **ps, const char *job, const zdist_optim_config_t *cfg, const int64_t *ids)
{
    char dyn[64], fixed[64];
    snprintf(dyn, sizeof dyn, "%s/emb/embeddings", job);
    snprintf(fixed, sizeof fixed, "%s/fixed/embeddings", job);
    for (int p = 0; p < 2; p++)
        OK(zdist_ps_client_set_optimizer_job(ps[p], cfg, job, &s_err));
    for (int p = 0; p < 2; p++) {
        zdist_ps_var_spec_t s = {.name = dyn, .dtype = ZDIST_DTYPE_FLOAT32, .shard_index = p, .seed = 3};
        s.shape.rank = 2;
        s.shape.dims[0] = 0;
        s.shape.dims[1] = DIM;
        s.init.kind = ZDIST_INIT_CONSTANT;
        s.init.value = W0;
        s.dynamic = (zdist_ps_dynamic_t){.enabled = true, .min_count = 1, .num_ps = 2};
        OK(zdist_ps_client_create(ps[p], &s, NULL, &s_err));
    }
    zdist_ps_var_spec_t f = {.name = fixed, .dtype = ZDIST_DTYPE_FLOAT32, .row_count = NIDS, .seed = 3};
    f.shape.rank = 2;
    f.shape.dims[0] = NIDS;
    f.shape.dims[1] = DIM;
    f.init.kind = ZDIST_INIT_CONSTANT;
    f.init.value = W0;
    OK(zdist_ps_client_create(ps[0], &f, NULL, &s_err));

    double w[NIDS][DIM], a[NIDS][DIM], z[NIDS][DIM];
    for (int i = 0; i < NIDS; i++)
        for (int j = 0; j < DIM; j++)
            w[i][j] = W0, a[i][j] = cfg->initial_accumulator_value, z[i][j] = 0;
    for (int s = 0; s < STEPS; s++) {
        /* Step 1 pushes id slot 0 twice (summed before the update). */
        double gsum[NIDS][DIM] = {{0}};
        for (int p = 0; p < 2; p++) {
            int64_t pid[NIDS + 1];
            float g[(NIDS + 1) * DIM];
            size_t n = 0;
            for (int k = 0; k < NIDS + (s == 1); k++) {
                int i = k % NIDS;
                if (zdist_partition_id_ps(ids[i], 2) != p)
                    continue;
                for (int j = 0; j < DIM; j++) {
                    g[n * DIM + j] = s_grad(s + k / NIDS, i, j);
                    gsum[i][j] += (double) g[n * DIM + j];
                }
                pid[n++] = ids[i];
            }
            zdist_tensor_t gt = s_f32(g, (int64_t) n);
            OK(zdist_ps_client_push_sparse(ps[p], dyn, p, pid, n, &gt, NULL, &s_err));
        }
        /* The fixed table gets the same gradients by row: id slot i is row i. */
        int64_t rows[NIDS];
        float gf[NIDS * DIM];
        for (int i = 0; i < NIDS; i++) {
            rows[i] = i;
            for (int j = 0; j < DIM; j++)
                gf[i * DIM + j] = (float) gsum[i][j];
        }
        zdist_tensor_t gt = s_f32(gf, NIDS);
        OK(zdist_ps_client_push_sparse(ps[0], fixed, 0, rows, NIDS, &gt, NULL, &s_err));
        for (int i = 0; i < NIDS; i++)
            for (int j = 0; j < DIM; j++)
                s_ftrl_ref(cfg, &w[i][j], &a[i][j], &z[i][j], gsum[i][j]);
    }

    int64_t fixed_rows[NIDS] = {0, 1, 2, 3};
    float got[NIDS * DIM];
    zdist_tensor_t out = s_f32(got, NIDS);
    OK(zdist_ps_client_pull_rows(ps[0], fixed, fixed_rows, NIDS, &out, &s_err));
    for (int i = 0; i < NIDS; i++)
        for (int j = 0; j < DIM; j++)
            CHECK(fabs(got[i * DIM + j] - w[i][j]) <= 1e-5 * (1 + fabs(w[i][j])),
                  "%s fixed row %d[%d]: %.8g, TF's formula %.8g", job, i, j, got[i * DIM + j], w[i][j]);
    for (int i = 0; i < NIDS; i++) {
        int p = zdist_partition_id_ps(ids[i], 2);
        float row[DIM];
        zdist_tensor_t r = s_f32(row, 1);
        OK(zdist_ps_client_pull_rows(ps[p], dyn, &ids[i], 1, &r, &s_err));
        for (int j = 0; j < DIM; j++)
            CHECK(fabs(row[j] - w[i][j]) <= 1e-5 * (1 + fabs(w[i][j])),
                  "%s id %" PRId64 "[%d] on ps %d: %.8g, TF's formula %.8g", job, ids[i], j, p, row[j], w[i][j]);
    }
    /* An id never trained: the default, and no row made by the lookup. */
    int64_t unseen = 123456789;
    int p = zdist_partition_id_ps(unseen, 2);
    float row[DIM] = {1, 1, 1};
    zdist_tensor_t r = s_f32(row, 1);
    OK(zdist_ps_client_pull_rows(ps[p], dyn, &unseen, 1, &r, &s_err));
    for (int j = 0; j < DIM; j++)
        CHECK(row[j] == 0.0f, "%s unseen id [%d]: %g, not the default 0", job, j, row[j]);
    printf("ok: %s: ftrl (lr %g, power %g, acc0 %g, l1 %g, l2 %g, shrinkage %g, beta %g): %d dynamic rows over "
           "2 psds and %d fixed rows match TF's ApplyFtrlV2 after %d pushes (w[0][0] %.6f)\n",
           job, cfg->learning_rate, cfg->learning_rate_power, cfg->initial_accumulator_value, cfg->l1, cfg->l2,
           cfg->l2_shrinkage, cfg->beta, NIDS, NIDS, STEPS, w[0][0]);
}

static int
s_ftrl(char **addrs)
{
    zdist_ps_client_t *ps[2] = {s_client(addrs[0]), s_client(addrs[1])};
    /* Ids from all of int64 with its extremes; both psds get some (checked). */
    const int64_t ids[NIDS] = {INT64_MIN, INT64_MAX, -7046029254386353131, 4611686018427387913};
    int on[2] = {0, 0};
    for (int i = 0; i < NIDS; i++)
        on[zdist_partition_id_ps(ids[i], 2)]++;
    CHECK(on[0] > 0 && on[1] > 0, "ids all on one ps (%d, %d): pick others", on[0], on[1]);

    zdist_optim_config_t keras;
    zdist_optim_config_default(&keras, ZDIST_OPTIM_FTRL);
    keras.learning_rate = 0.5;
    s_job(ps, "ftrl-keras", &keras, ids);

    zdist_optim_config_t all = keras;
    all.learning_rate = 0.2;
    all.learning_rate_power = -0.3;
    all.initial_accumulator_value = 0.4;
    all.l1 = 0.01;
    all.l2 = 0.05;
    all.l2_shrinkage = 0.1;
    all.beta = 0.3;
    s_job(ps, "ftrl-all", &all, ids);

    zdist_optim_config_t zero = keras;
    zero.learning_rate = 0.1;
    zero.learning_rate_power = 0;
    zero.initial_accumulator_value = 0;
    zero.l2 = 0.5;
    s_job(ps, "ftrl-zero", &zero, ids);

    for (int p = 0; p < 2; p++)
        zdist_ps_client_destroy(&ps[p]);
    return s_failures ? 1 : 0;
}

/* Reads id's row from its psd into row (DIM floats). */
static void
s_lookup(zdist_ps_client_t **ps, const char *name, int64_t id, float *row)
{
    zdist_tensor_t r = s_f32(row, 1);
    OK(zdist_ps_client_pull_rows(ps[zdist_partition_id_ps(id, 2)], name, &id, 1, &r, &s_err));
}

static int
s_default(char **addrs)
{
    zdist_ps_client_t *ps[2] = {s_client(addrs[0]), s_client(addrs[1])};
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 0.5};
    const char *name = "dflt/emb/embeddings", *plain = "dflt/plain/embeddings";
    for (int p = 0; p < 2; p++) {
        OK(zdist_ps_client_set_optimizer_job(ps[p], &sgd, "dflt", &s_err));
        for (int t = 0; t < 2; t++) {
            zdist_ps_var_spec_t s = {.name = t ? plain : name, .dtype = ZDIST_DTYPE_FLOAT32, .shard_index = p,
                                     .seed = 3};
            s.shape.rank = 2;
            s.shape.dims[1] = DIM;
            s.init.kind = ZDIST_INIT_CONSTANT;
            s.init.value = W0;
            s.dynamic = (zdist_ps_dynamic_t){.enabled = true, .min_count = 3, .num_ps = 2,
                                             .default_value = t ? 0.0 : -0.5};
            OK(zdist_ps_client_create(ps[p], &s, NULL, &s_err));
        }
    }
    const int64_t ids[2] = {INT64_MIN + 5, 8070450532247928832};
    float row[DIM];
    for (int push = 0; push <= 3; push++) {
        for (int i = 0; i < 2; i++) {
            s_lookup(ps, name, ids[i], row);
            for (int j = 0; j < DIM; j++) {
                if (push < 3)
                    CHECK(row[j] == -0.5f, "id %" PRId64 " after %d occurrences [%d]: %g, not the default -0.5",
                          ids[i], push, j, row[j]);
                else
                    CHECK(fabs(row[j] - (W0 - 0.5 * 0.1)) < 1e-6 || row[j] == (float) W0,
                          "id %" PRId64 " admitted [%d]: %g, not its row (0.25 less the update)", ids[i], j, row[j]);
            }
            s_lookup(ps, plain, ids[i], row);
            for (int j = 0; j < DIM && push < 3; j++)
                CHECK(row[j] == 0.0f, "table without a default: id %" PRId64 " [%d]: %g, not 0", ids[i], j, row[j]);
        }
        if (push == 3)
            break;
        for (int i = 0; i < 2; i++) { /* one occurrence of each id, gradient 0.1 */
            int p = zdist_partition_id_ps(ids[i], 2);
            float g[DIM] = {0.1f, 0.1f, 0.1f};
            zdist_tensor_t gt = s_f32(g, 1);
            OK(zdist_ps_client_push_sparse(ps[p], name, p, &ids[i], 1, &gt, NULL, &s_err));
            OK(zdist_ps_client_push_sparse(ps[p], plain, p, &ids[i], 1, &gt, NULL, &s_err));
        }
    }
    printf("ok: default -0.5 read by ids unseen and counted below min_count 3 on both psds; their rows once "
           "admitted; a table without a default reads zeros\n");
    for (int p = 0; p < 2; p++)
        zdist_ps_client_destroy(&ps[p]);
    return s_failures ? 1 : 0;
}

int
main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "ftrl") == 0)
        return s_ftrl(argv + 2);
    if (argc == 4 && strcmp(argv[1], "default") == 0)
        return s_default(argv + 2);
    fprintf(stderr, "usage: dynopt_driver ftrl|default ADDR0 ADDR1\n");
    return 2;
}
