/* parity_driver: trains a one_device job for test_torch_parity.sh and writes what a PyTorch twin needs to
   repeat it exactly: the initial variables, each step's batch (dataset rows, in order) and each step's loss.

   usage: parity_driver JOB.json OUTDIR STEPS [ORDER_STEPS]   (exit 0, or 1 after saying why on stderr)
     OUTDIR/vars.txt      one line per variable: NAME RANK DIM... (in the order of init.f32)
     OUTDIR/init.f32      the variables' initial values, raw float32, one after the other
     OUTDIR/final.f32     their values after the last step, the same layout
     OUTDIR/batches.txt   one line per step: the dataset rows of its batch, in order
     OUTDIR/x.f32, y.i32  the batches' features (float32) and int32 labels, step after step
     OUTDIR/losses.txt    one line per step: its loss (the batch's mean), %.9g
     OUTDIR/order.txt     with ORDER_STEPS: the rows of that many steps (no training), the same format as
                          batches.txt, so the twin can check the order over epochs a step-by-step loss
                          comparison cannot reach (each epoch a permutation, reshuffled every epoch)

   The session is the one `zdist run` trains with (worker_session.h); the batches come from a second input
   pipeline over the same dataset with the job's options, which walks the same order (the shuffle is a
   function of the seed and the epoch). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_session.h"
#include "zdist/input.h"
#include "zdist/job.h"

static int
s_fail(const char *what, const char *why)
{
    fprintf(stderr, "parity_driver: %s: %s\n", what, why);
    return 1;
}

/* Appends every variable's current values to f (and its shape to names when not NULL). */
static int
s_dump_vars(worker_session_t *sess, FILE *f, FILE *names)
{
    worker_trainer_t *tr = worker_session_trainer(sess);
    const worker_vars_t *vars = worker_trainer_vars(tr);
    for (int i = 0; i < vars->n; i++) {
        const worker_var_t *v = &vars->vars[i];
        float *buf = malloc((size_t)v->n * sizeof *buf + 1);
        zdist_error_t err = {0};
        if (!buf || worker_trainer_read_variable(tr, v->name, buf, &err) < 0) {
            free(buf);
            return s_fail(v->name, err.text[0] ? err.text : "out of memory");
        }
        fwrite(buf, sizeof *buf, (size_t)v->n, f);
        free(buf);
        if (!names)
            continue;
        fprintf(names, "%s %d", v->name, v->shape.rank);
        for (int d = 0; d < v->shape.rank; d++)
            fprintf(names, " %lld", (long long)v->shape.dims[d]);
        fputc('\n', names);
    }
    return 0;
}

/* The job's training batches, in the session's order: one line of rows per step, their features and labels
   (not when xf is NULL: the order alone). */
static int
s_dump_batches(const char *job_path, int64_t steps, FILE *f, FILE *xf, FILE *yf)
{
    zdist_job_t job;
    zdist_error_t err = {0};
    if (zdist_job_load(job_path, &job, &err) < 0)
        return s_fail(job_path, err.text);
    zdist_dataset_t *ds = NULL;
    zdist_input_t *in = NULL;
    zdist_auto_shard_policy_t applied = ZDIST_AUTO_SHARD_DATA;
    int rc = zdist_job_load_dataset(&job, false, NULL, job.shard_policy, &ds, &applied, &err);
    if (rc == 0) {
        zdist_input_options_t opts;
        zdist_input_options_init(&opts, job.global_batch_size);
        opts.shuffle = job.shuffle;
        opts.shuffle_seed = job.shuffle_seed;
        opts.drop_remainder = job.drop_remainder;
        opts.epochs = job.epochs > 0 ? job.epochs : ZDIST_INPUT_REPEAT_FOREVER;
        opts.shard_policy = applied;
        in = zdist_input_new(ds, NULL, &opts, &err);
        rc = in ? 0 : -EINVAL;
    }
    const zdist_input_step_t *st;
    for (int64_t s = 0; rc == 0 && s < steps && zdist_input_next(in, &st) == 1; s++) {
        const zdist_batch_t *b = &st->replicas[0];
        for (int64_t i = 0; i < b->size; i++)
            fprintf(f, i ? " %lld" : "%lld", (long long)b->indices[i]);
        fputc('\n', f);
        if (!xf)
            continue;
        if (!b->features || zdist_dataset_label_dtype(ds) != ZDIST_DTYPE_INT32) {
            rc = zdist_error_set(&err, -EINVAL, "dense features and int32 labels wanted");
            break;
        }
        fwrite(b->features, sizeof(float), (size_t)(b->size * zdist_dataset_dim(ds)), xf);
        fwrite(b->labels, sizeof(int32_t), (size_t)b->size, yf);
    }
    zdist_input_destroy(&in);
    zdist_dataset_destroy(&ds);
    zdist_job_release(&job);
    return rc < 0 ? s_fail("dataset", err.text) : 0;
}

static FILE *
s_open(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "parity_driver: %s: %s\n", path, strerror(errno));
    return f;
}

int
main(int argc, char **argv)
{
    if (argc != 4 && argc != 5)
        return s_fail("usage", "parity_driver JOB.json OUTDIR STEPS [ORDER_STEPS]");
    const char *job_path = argv[1], *dir = argv[2];
    int64_t steps = strtoll(argv[3], NULL, 10), order_steps = argc == 5 ? strtoll(argv[4], NULL, 10) : 0;
    zdist_job_t job;
    zdist_error_t err = {0};
    if (zdist_job_load(job_path, &job, &err) < 0)
        return s_fail(job_path, err.text);
    if (job.strategy != ZDIST_STRATEGY_ONE_DEVICE) {
        zdist_job_release(&job);
        return s_fail(job_path, "strategy.type must be one_device");
    }
    worker_session_config_t cfg = {.num_workers = 1};
    worker_session_t *sess = worker_session_new(&job, &cfg, NULL, &err);
    if (!sess)
        return s_fail(job_path, err.text);
    FILE *names = s_open(dir, "vars.txt"), *init = s_open(dir, "init.f32"), *batches = s_open(dir, "batches.txt");
    FILE *losses = s_open(dir, "losses.txt"), *final = s_open(dir, "final.f32"), *xf = s_open(dir, "x.f32");
    FILE *yf = s_open(dir, "y.i32");
    int rc = names && init && batches && losses && final && xf && yf ? 0 : 1;
    if (rc == 0)
        rc = s_dump_vars(sess, init, names);
    if (rc == 0)
        rc = s_dump_batches(job_path, steps, batches, xf, yf);
    if (rc == 0 && order_steps > 0) {
        FILE *order = s_open(dir, "order.txt");
        rc = order ? s_dump_batches(job_path, order_steps, order, NULL, NULL) : 1;
        if (order && fclose(order) != 0)
            rc = s_fail(dir, "a write failed");
    }
    for (int64_t s = 0; rc == 0 && s < steps; s++) {
        worker_outputs_t out;
        int64_t epoch;
        int more = worker_session_step(sess, &out, &epoch, &err);
        if (more < 0)
            rc = s_fail("step", err.text);
        if (more <= 0)
            break;
        fprintf(losses, "%.9g\n", worker_outputs_get(&out, ZDIST_OUTPUT_LOSS, 0));
    }
    if (rc == 0)
        rc = s_dump_vars(sess, final, NULL);
    FILE *files[] = {names, init, batches, losses, final, xf, yf};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (files[i] && fclose(files[i]) != 0)
            rc = s_fail(dir, "a write failed");
    worker_session_destroy(&sess);
    return rc;
}
