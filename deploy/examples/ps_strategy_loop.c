/* ps_strategy_loop: a TensorFlow custom training loop under ParameterServerStrategy with its ClusterCoordinator,
   written with zdist/strategy.h, on real zdist-worker and zdist-psd tasks.

       strategy = tf.distribute.experimental.ParameterServerStrategy(     zdist_strategy_new (parameter_server,
           resolver, variable_partitioner=FixedShardsPartitioner(2))        .coordinator = job, workers, ps)
       coordinator = ClusterCoordinator(strategy)
       with strategy.scope():                                             zdist_strategy_scope_enter
           kernel = tf.Variable(zeros); bias = tf.Variable(zeros)         zdist_strategy_variable_new (on the psds)
           with strategy.extended.colocate_vars_with(kernel):             ..._colocate_vars_with_begin
               seen = tf.Variable(0.)                                     (unpartitioned, on kernel's ps task)
       for c in range(CLOSURES):
           rv = coordinator.schedule(worker_fn)   # strategy.run(train_step) STEPS times on a free worker
       coordinator.join()                                                 zdist_strategy_join
       loss = strategy.reduce(MEAN, rv.fetch(), axis=None)                zdist_strategy_fetch + _reduce
       seen.assign_add(STEPS)                                             zdist_strategy_variable_assign

   kernel and bias are the job's linear_regression model's variables (its names, shapes and order): created
   under the scope, the workers train them instead of creating their own. The job's partitioner splits kernel
   over the ps tasks (Div rows); `seen` stays whole beside kernel's first shard.

   usage: ps_strategy_loop JOB.json CLOSURES STEPS_PER_CLOSURE tcp://WORKER... -- tcp://PS...
   The job must be a parameter_server job of linear_regression on synthetic regression data. Prints where each
   variable lives, the mean loss of the first and last closures, and exits 0 when the learnt weights are within
   0.05 of the synthetic teacher's and `seen` counted every step, 1 otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/strategy.h"

#define MAX_DIM 64

static void
s_where(const zdist_strategy_var_t *v)
{
    int tasks[16];
    int n = zdist_strategy_variable_ps_tasks(v, tasks, 16);
    printf("%s: %d shard%s on ps", zdist_strategy_variable_name(v), n, n == 1 ? "" : "s");
    for (int i = 0; i < n && i < 16; i++)
        printf(" %d", tasks[i]);
    printf("\n");
}

/* What the command line and the job give the loop. */
typedef struct {
    int closures, steps;
    int64_t dim;
    uint64_t data_seed; /* the teacher of the job's synthetic regression data */
} s_loop_t;

/* ParameterServerStrategy over the job, its workers and ps tasks from argv. 0, or 2 after saying why. */
static int
s_make_strategy(int argc, char **argv, s_loop_t *loop, zdist_strategy_object_t **ret)
{
    zdist_job_t job;
    zdist_error_t err = {0};
    if (zdist_job_load(argv[1], &job, &err) < 0) {
        fprintf(stderr, "ps_strategy_loop: %s: %s\n", argv[1], err.text);
        return 2;
    }
    *loop = (s_loop_t){.closures = atoi(argv[2]), .steps = atoi(argv[3]), .dim = job.synthetic_dim,
                       .data_seed = job.synthetic_seed};
    if (loop->closures < 1 || loop->steps < 1 || loop->dim < 1 || loop->dim > MAX_DIM) {
        fprintf(stderr, "ps_strategy_loop: CLOSURES and STEPS must be >= 1, the job's synthetic dim 1..%d\n",
                MAX_DIM);
        zdist_job_release(&job);
        return 2;
    }
    const char *workers[64], *ps[64];
    size_t nw = 0, nps = 0;
    int i = 4;
    for (; i < argc && strcmp(argv[i], "--") != 0 && nw < 64; i++)
        workers[nw++] = argv[i];
    for (i++; i < argc && nps < 64; i++)
        ps[nps++] = argv[i];

    zdist_coordinator_options_t opts;
    zdist_coordinator_options_default(&opts);
    opts.job = &job;
    opts.workers = workers;
    opts.num_workers = nw;
    opts.ps = ps;
    opts.num_ps = nps;
    opts.variable_prefix = "ps_strategy_loop/";
    opts.repeat_input = true; /* this loop counts the steps */
    zdist_strategy_spec_t spec = {.kind = ZDIST_STRATEGY_PARAMETER_SERVER, .coordinator = &opts};
    int rc = zdist_strategy_new(&spec, ret, &err);
    zdist_job_release(&job); /* the strategy copied it */
    if (rc < 0) {
        fprintf(stderr, "ps_strategy_loop: %s\n", err.text);
        return 2;
    }
    return 0;
}

/* with strategy.scope(): the model's variables, then a counter colocated with the kernel. 0 or 2. */
static int
s_make_variables(zdist_strategy_object_t *strategy, int64_t dim, zdist_strategy_var_t **kernel,
                 zdist_strategy_var_t **bias, zdist_strategy_var_t **seen)
{
    zdist_error_t err = {0};
    zdist_strategy_var_def_t kdef = {.name = "kernel", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {dim, 1}}};
    zdist_strategy_var_def_t bdef = {.name = "bias", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {1}}};
    zdist_strategy_var_def_t sdef = {.name = "kernel_steps_seen", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}};
    if (zdist_strategy_scope_enter(strategy, &err) < 0 ||
        zdist_strategy_variable_new(strategy, &kdef, kernel, &err) < 0 ||
        zdist_strategy_variable_new(strategy, &bdef, bias, &err) < 0 ||
        zdist_strategy_extended_colocate_vars_with_begin(strategy, *kernel, &err) < 0 ||
        zdist_strategy_variable_new(strategy, &sdef, seen, &err) < 0 ||
        zdist_strategy_extended_colocate_vars_with_end(strategy, &err) < 0 ||
        zdist_strategy_scope_exit(strategy, &err) < 0) {
        fprintf(stderr, "ps_strategy_loop: %s\n", err.text);
        return 2;
    }
    s_where(*kernel);
    s_where(*bias);
    s_where(*seen);
    return 0;
}

/* The closures scheduled, joined, fetched: each one's mean loss (the first and last kept), `seen` counting its
   steps. 0 or 2. */
static int
s_train(zdist_strategy_object_t *strategy, const s_loop_t *loop, zdist_strategy_var_t *seen, float *first,
        float *last)
{
    zdist_error_t err = {0};
    int status = 0;
    zdist_remote_value_t **rvs = calloc((size_t) loop->closures, sizeof *rvs);
    for (int c = 0; rvs && c < loop->closures && status == 0; c++)
        if (zdist_strategy_schedule(strategy, loop->steps, &rvs[c], &err) < 0) {
            fprintf(stderr, "ps_strategy_loop: schedule: %s\n", err.text);
            status = 2;
        }
    if (status == 0 && zdist_strategy_join(strategy, &err) < 0) {
        fprintf(stderr, "ps_strategy_loop: join: %s\n", err.text);
        status = 2;
    }
    for (int c = 0; rvs && status == 0 && c < loop->closures; c++) {
        zdist_tensor_t loss[1] = {{0}}, mean = {0};
        const zdist_tensor_t *local = NULL;
        int nlocal = 0;
        float one = (float) loop->steps;
        zdist_tensor_t add = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &one, .nbytes = sizeof one};
        if (zdist_strategy_fetch(strategy, rvs[c], loss, &err) < 0 ||
            zdist_strategy_experimental_local_results(strategy, loss, 1, &local, &nlocal, &err) < 0 ||
            zdist_strategy_reduce(strategy, ZDIST_REDUCE_MEAN, local, nlocal, ZDIST_AXIS_NONE, &mean, &err) < 0 ||
            zdist_strategy_variable_assign(strategy, seen, ZDIST_VAR_ASSIGN_ADD, &add, &err) < 0) {
            fprintf(stderr, "ps_strategy_loop: closure %d: %s\n", c, err.text);
            status = 2;
        } else {
            if (c == 0)
                *first = *(float *) mean.data;
            *last = *(float *) mean.data;
        }
        free(mean.data);
        zdist_strategy_values_free(loss, 1);
    }
    free(rvs);
    return status;
}

/* The learnt weights against the teacher's, `seen` against every step: 0, 1, or 2. */
static int
s_check(zdist_strategy_object_t *strategy, const s_loop_t *loop, const zdist_strategy_var_t *kernel,
        const zdist_strategy_var_t *bias, const zdist_strategy_var_t *seen, float first, float last)
{
    zdist_error_t err = {0};
    int64_t dim = loop->dim;
    float kw[MAX_DIM], b, n_seen, tw[MAX_DIM], tb;
    zdist_tensor_t rk = {.dtype = ZDIST_DTYPE_FLOAT32, .data = kw, .nbytes = (size_t) dim * sizeof(float)};
    rk.shape = (zdist_shape_t){2, {dim, 1}};
    zdist_tensor_t rb = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {1}}, .data = &b, .nbytes = sizeof b};
    zdist_tensor_t rs = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &n_seen, .nbytes = sizeof n_seen};
    if (zdist_strategy_variable_read(strategy, kernel, &rk, &err) < 0 ||
        zdist_strategy_variable_read(strategy, bias, &rb, &err) < 0 ||
        zdist_strategy_variable_read(strategy, seen, &rs, &err) < 0) {
        fprintf(stderr, "ps_strategy_loop: %s\n", err.text);
        return 2;
    }
    zdist_dataset_synthetic_teacher(dim, loop->data_seed, tw, &tb);
    double worst = fabs((double) b - tb);
    for (int64_t j = 0; j < dim; j++)
        worst = fmax(worst, fabs((double) kw[j] - tw[j]));
    printf("largest |weight - teacher| %.5f\n", worst);
    int status = worst < 0.05 && n_seen == (float) loop->closures * (float) loop->steps ? 0 : 1;
    printf("closure 0: mean loss %.6f; closure %d: mean loss %.6f\n", first, loop->closures - 1, last);
    printf("steps seen: %.0f\n", n_seen);
    printf("kernel:");
    for (int64_t j = 0; j < dim; j++)
        printf(" %.5f", kw[j]);
    printf("\nbias: %.5f\n", b);
    return status;
}

int
main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: ps_strategy_loop JOB.json CLOSURES STEPS_PER_CLOSURE tcp://WORKER... -- "
                        "tcp://PS...\n");
        return 2;
    }
    s_loop_t loop;
    zdist_strategy_object_t *strategy = NULL;
    int status = s_make_strategy(argc, argv, &loop, &strategy);
    if (status != 0)
        return status;
    printf("%s, %d replica in sync per step\n", zdist_strategy_class_name(strategy),
           zdist_strategy_num_replicas_in_sync(strategy));
    zdist_strategy_var_t *kernel = NULL, *bias = NULL, *seen = NULL;
    status = s_make_variables(strategy, loop.dim, &kernel, &bias, &seen);
    /* strategy.run of a C function cannot go to a worker: refused, saying what to do */
    zdist_error_t err = {0};
    if (status == 0 && zdist_strategy_run(strategy, NULL, NULL, NULL, NULL, &err) == 0) {
        fprintf(stderr, "ps_strategy_loop: run was not refused\n");
        status = 1;
    }
    float first = 0, last = 0;
    if (status == 0)
        status = s_train(strategy, &loop, seen, &first, &last);
    if (status == 0)
        status = s_check(strategy, &loop, kernel, bias, seen, first, last);
    zdist_strategy_destroy(&strategy);
    return status;
}
