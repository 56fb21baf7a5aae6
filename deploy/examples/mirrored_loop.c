/* mirrored_loop: a TensorFlow custom training loop under MirroredStrategy, written with zdist/strategy.h.

       strategy = tf.distribute.MirroredStrategy()            zdist_strategy_new (mirrored:N)
       with strategy.scope():                                 zdist_strategy_scope_enter
           w = tf.Variable(zeros, aggregation=SUM); b = ...   zdist_strategy_variable_new
       dist = strategy.experimental_distribute_dataset(ds)    zdist_strategy_experimental_distribute_dataset
       for x in dist:
           per_replica_loss = strategy.run(train_step, (x,))  zdist_strategy_run
           loss = strategy.reduce(SUM, per_replica_loss)      zdist_strategy_reduce

   train_step computes each replica's gradient of the mean squared error scaled by the GLOBAL batch size (as
   tf.nn.compute_average_loss does) and applies it with w.assign_sub(lr * grad) in the replica context: the
   variables' SUM aggregation adds the replicas' updates, so every copy takes the same step as one replica
   over the whole batch would.

   usage: mirrored_loop [SPEC] [EPOCHS]     SPEC: mirrored:N (default mirrored:4), central_storage:N,
   one_device, or multi_worker_mirrored:N. multi_worker_mirrored:N is one worker of a
   MultiWorkerMirroredStrategy with N replicas: start one process per chief and worker task of a cluster, each
   with TF_CONFIG naming its task, as for TensorFlow; the strategy forms their ring (zdist/collective.h) from
   TF_CONFIG and they train in lockstep, every worker reading its share of each global batch
   (InputContext(workers, id_in_cluster, ...)). Linear regression on synthetic data
   (zdist_dataset_synthetic_regression); exits 0 when the learnt weights are within 0.05 of the teacher's and
   every replica's copy is identical, 1 otherwise; the last lines print the weights' bytes in hex, so that
   workers can be compared bitwise, and their values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/cluster.h"
#include "zdist/strategy.h"

#define DIM 8
#define N 1024
#define GLOBAL_BATCH 64
#define LR 0.1f
#define SEED 11

typedef struct {
    zdist_strategy_var_t *w, *b;
    const zdist_batch_t *batch; /* this replica's per-replica batch */
} step_arg_t;

/* One replica's step: loss and gradients on its batch, update in replica context. */
static int
train_step(zdist_strategy_replica_t *ctx, void *p, zdist_tensor_t *ret_loss, zdist_error_t *err)
{
    step_arg_t *a = p;
    const zdist_tensor_t *w = NULL, *b = NULL;
    int rc;
    /* the step's global batch: every replica's examples (of every worker), an all_reduce */
    float mine = (float) a->batch->size;
    zdist_tensor_t n = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &mine, .nbytes = sizeof mine},
                   global;
    if ((rc = zdist_strategy_replica_all_reduce(ctx, ZDIST_REDUCE_SUM, &n, &global, err)) < 0)
        return rc;
    float global_batch = *(float *) global.data;
    free(global.data);
    if ((rc = zdist_strategy_replica_read(ctx, a->w, &w, err)) < 0 ||
        (rc = zdist_strategy_replica_read(ctx, a->b, &b, err)) < 0)
        return rc;
    const float *wv = w->data, bv = *(const float *) b->data;
    float gw[DIM] = {0}, gb = 0, loss = 0;
    const float *x = a->batch->features, *y = a->batch->labels;
    float scale = global_batch > 0 ? 1.0f / global_batch : 0.0f;
    for (int64_t i = 0; i < a->batch->size; i++) {
        float pred = bv;
        for (int j = 0; j < DIM; j++)
            pred += wv[j] * x[i * DIM + j];
        float e = pred - y[i];
        loss += e * e * scale;
        for (int j = 0; j < DIM; j++)
            gw[j] += 2.0f * e * x[i * DIM + j] * scale * LR;
        gb += 2.0f * e * scale * LR;
    }
    /* optimizer.apply_gradients in replica context: every replica calls it */
    zdist_tensor_t dw = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {DIM}}, .data = gw, .nbytes = sizeof gw};
    zdist_tensor_t db = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &gb, .nbytes = sizeof gb};
    if ((rc = zdist_strategy_replica_assign(ctx, a->w, ZDIST_VAR_ASSIGN_SUB, &dw, err)) < 0 ||
        (rc = zdist_strategy_replica_assign(ctx, a->b, ZDIST_VAR_ASSIGN_SUB, &db, err)) < 0)
        return rc;
    float *l = malloc(sizeof *l);
    if (!l)
        return -1;
    *l = loss;
    *ret_loss = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = l, .nbytes = sizeof *l};
    return 0;
}

/* MirroredStrategy(...) from SPEC; multi_worker_mirrored forms its ring from TF_CONFIG. 0, or 2 after saying why. */
static int
make_strategy(const char *spec_text, zdist_strategy_object_t **ret)
{
    zdist_error_t err = {0};
    zdist_strategy_spec_t spec;
    if (zdist_strategy_spec_parse(spec_text, &spec, &err) < 0) {
        fprintf(stderr, "mirrored_loop: %s\n", err.text);
        return 2;
    }
    zdist_cluster_t *cluster = NULL;
    if (spec.kind == ZDIST_STRATEGY_MULTI_WORKER_MIRRORED) {
        /* one worker of the cluster TF_CONFIG describes: the strategy forms the ring among its chief and
           workers itself, as MultiWorkerMirroredStrategy() does from TFConfigClusterResolver */
        if (!(cluster = zdist_cluster_from_env_or_file(NULL, &err))) {
            fprintf(stderr, "mirrored_loop: %s\n", err.text);
            return 2;
        }
        spec.cluster = cluster;
        spec.collective_timeout_ms = 60000;
    }
    int rc = zdist_strategy_new(&spec, ret, &err);
    zdist_cluster_destroy(&cluster); /* the strategy keeps what it needs: its ring */
    if (rc < 0) {
        fprintf(stderr, "mirrored_loop: %s\n", err.text);
        return 2;
    }
    return 0;
}

/* with strategy.scope(): the model's variables. 0, or 2 after saying why. */
static int
make_variables(zdist_strategy_object_t *strategy, zdist_strategy_var_t **w, zdist_strategy_var_t **b)
{
    zdist_error_t err = {0};
    zdist_strategy_var_def_t wdef = {.name = "dense/kernel",
                                     .dtype = ZDIST_DTYPE_FLOAT32,
                                     .shape = {1, {DIM}},
                                     .aggregation = ZDIST_AGG_SUM};
    zdist_strategy_var_def_t bdef = {
        .name = "dense/bias", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .aggregation = ZDIST_AGG_SUM};
    if (zdist_strategy_scope_enter(strategy, &err) < 0 ||
        zdist_strategy_variable_new(strategy, &wdef, w, &err) < 0 ||
        zdist_strategy_variable_new(strategy, &bdef, b, &err) < 0 ||
        zdist_strategy_scope_exit(strategy, &err) < 0) {
        fprintf(stderr, "mirrored_loop: %s\n", err.text);
        return 2;
    }
    return 0;
}

/* for x in dist: strategy.run(train_step), strategy.reduce(SUM) of the losses, printed per epoch. 0 or 2. */
static int
train(zdist_strategy_object_t *strategy, zdist_input_t *dist, zdist_strategy_var_t *w, zdist_strategy_var_t *b)
{
    int R = 0; /* this worker's replicas: the length of every per-replica array */
    zdist_strategy_worker_place(strategy, NULL, NULL, &R);
    zdist_error_t err = {0};
    step_arg_t *args = calloc((size_t) R, sizeof *args);
    void **argp = calloc((size_t) R, sizeof *argp);
    zdist_tensor_t *losses = calloc((size_t) R, sizeof *losses);
    int status = 0;
    const zdist_input_step_t *step = NULL;
    double epoch_loss = 0;
    int64_t epoch = 0, epoch_steps = 0;
    int got;
    while (args && argp && losses && (got = zdist_input_next(dist, &step)) == 1) {
        if (step->epoch != epoch) {
            printf("epoch %lld: loss %.6f\n", (long long) epoch, epoch_loss / (double) epoch_steps);
            epoch = step->epoch;
            epoch_loss = 0;
            epoch_steps = 0;
        }
        for (int r = 0; r < R; r++) {
            args[r] = (step_arg_t){.w = w, .b = b, .batch = &step->replicas[r]};
            argp[r] = &args[r];
        }
        zdist_tensor_t total;
        if (zdist_strategy_run(strategy, train_step, NULL, argp, losses, &err) < 0 ||
            zdist_strategy_reduce(strategy, ZDIST_REDUCE_SUM, losses, R, ZDIST_AXIS_NONE, &total, &err) < 0) {
            fprintf(stderr, "mirrored_loop: step %lld: %s\n", (long long) step->step, err.text);
            zdist_strategy_values_free(losses, R);
            status = 2;
            break;
        }
        epoch_loss += *(float *) total.data;
        epoch_steps++;
        free(total.data);
        zdist_strategy_values_free(losses, R);
    }
    if (status == 0 && epoch_steps)
        printf("epoch %lld: loss %.6f\n", (long long) epoch, epoch_loss / (double) epoch_steps);
    free(args);
    free(argp);
    free(losses);
    return status;
}

/* The learnt weights against the teacher's, every copy identical: 0, 1 (not learnt or copies differ) or 2. */
static int
check(zdist_strategy_object_t *strategy, const zdist_strategy_var_t *w, const zdist_strategy_var_t *b)
{
    zdist_error_t err = {0};
    float tw[DIM], tb;
    zdist_dataset_synthetic_teacher(DIM, SEED, tw, &tb);
    float lw[DIM], lb;
    zdist_tensor_t rw = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {DIM}}, .data = lw, .nbytes = sizeof lw};
    zdist_tensor_t rb = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &lb, .nbytes = sizeof lb};
    if (zdist_strategy_variable_read(strategy, w, &rw, &err) < 0 ||
        zdist_strategy_variable_read(strategy, b, &rb, &err) < 0) {
        fprintf(stderr, "mirrored_loop: %s\n", err.text);
        return 2;
    }
    double worst = fabs((double) lb - tb);
    for (int j = 0; j < DIM; j++)
        worst = fmax(worst, fabs((double) lw[j] - tw[j]));
    int same = 1;
    for (int c = 1; c < zdist_strategy_variable_num_copies(w); c++)
        same &= memcmp(zdist_strategy_variable_copy(w, c)->data, lw, sizeof lw) == 0;
    printf("%s, %d replicas: largest |w - teacher| %.5f, copies of %s %s\n", zdist_strategy_class_name(strategy),
           zdist_strategy_num_replicas_in_sync(strategy), worst, zdist_strategy_variable_name(w),
           same ? "identical" : "DIFFER");
    printf("weights:");
    for (size_t k = 0; k < sizeof lw; k++)
        printf("%02x", ((unsigned char *) lw)[k]);
    printf("%02x%02x%02x%02x\n", ((unsigned char *) &lb)[0], ((unsigned char *) &lb)[1],
           ((unsigned char *) &lb)[2], ((unsigned char *) &lb)[3]);
    printf("values:");
    for (int j = 0; j < DIM; j++)
        printf(" %.9g", (double) lw[j]);
    printf(" %.9g\n", (double) lb);
    return worst < 0.05 && same ? 0 : 1;
}

int
main(int argc, char **argv)
{
    const char *spec_text = argc > 1 ? argv[1] : "mirrored:4";
    int epochs = argc > 2 ? atoi(argv[2]) : 30;
    zdist_error_t err = {0};
    zdist_strategy_object_t *strategy = NULL;
    zdist_strategy_var_t *w = NULL, *b = NULL;
    int status = make_strategy(spec_text, &strategy);
    if (status == 0)
        status = make_variables(strategy, &w, &b);
    zdist_dataset_t *ds = NULL;
    if (status == 0 && zdist_dataset_synthetic_regression(N, DIM, SEED, 0.0, &ds, &err) < 0) {
        fprintf(stderr, "mirrored_loop: %s\n", err.text);
        status = 2;
    }
    zdist_input_t *dist = NULL;
    if (status == 0) {
        zdist_input_options_t opts;
        zdist_input_options_init(&opts, GLOBAL_BATCH);
        opts.shuffle = true;
        opts.shuffle_seed = SEED;
        opts.epochs = epochs;
        if (zdist_strategy_experimental_distribute_dataset(strategy, ds, &opts, &dist, &err) < 0) {
            fprintf(stderr, "mirrored_loop: %s\n", err.text);
            status = 2;
        }
    }
    if (status == 0)
        status = train(strategy, dist, w, b);
    if (status == 0)
        status = check(strategy, w, b);
    zdist_input_destroy(&dist);
    zdist_dataset_destroy(&ds);
    zdist_strategy_destroy(&strategy);
    return status;
}
