/* zdist run: trains a job in this process (one_device, mirrored or central_storage replica threads) with the same step code as a cluster. */
#include <cblas.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "zdist/job.h"
#include "worker_registry.h"
#include "worker_trainer.h"
#include "zdist/defs.h"
#include "zdist/input.h"
#include "zdist/parse.h"

static void
s_usage(FILE *out)
{
    fprintf(out,
            "usage: zdist run JOB.json [--json] [--steps N] [--quiet]\n\n"
            "Trains the job in this process: strategy one_device, mirrored or central_storage with\n"
            "num_replicas threads, running the same step functions a cluster runs. Shows a progress\n"
            "bar on a terminal (plain lines otherwise) and the final test accuracy.\n\n"
            "  --json      print one JSON object with the final metrics on stdout\n"
            "  --steps N   stop after N steps (at most the job's length)\n"
            "  --quiet     no progress output\n\n"
            "Models: built-ins, or plugins from the job's plugin_path and ZDIST_PLUGIN_PATH.\n");
}

static double
s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
s_hms(double secs, char *buf, size_t size)
{
    if (!isfinite(secs) || secs < 0)
        secs = 0;
    long s = (long)(secs + 0.5);
    if (s >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
}

typedef struct {
    bool json, quiet, tty;
    double last_draw;
} s_out_t;

static void
s_progress(s_out_t *o, int64_t step, int64_t total, double loss, double eps, double eta, bool force)
{
    if (o->quiet)
        return;
    char etab[32];
    s_hms(eta, etab, sizeof etab);
    if (o->tty) {
        double now = s_now();
        if (!force && now - o->last_draw < 0.1)
            return;
        o->last_draw = now;
        int width = 24, fill = total > 0 ? (int)(width * step / total) : 0;
        char bar[32];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r%*lld/%lld [%s] loss %.4f  %.0f examples/s  ETA %s \033[K", (int)snprintf(NULL, 0, "%lld",
                (long long)total), (long long)step, (long long)total, bar, loss, eps, etab);
        if (step == total)
            fputc('\n', stderr);
        fflush(stderr);
    } else {
        fprintf(stderr, "step %lld/%lld loss %.4f examples/s %.0f eta %s\n", (long long)step, (long long)total, loss,
                eps, etab);
    }
}

static int64_t
s_gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Runs eval_step over a dataset (one epoch, no shuffle), skipping its first
   `skip` examples (the synthetic training set). */
static int
s_evaluate(worker_trainer_t *tr, const zdist_job_t *job, const zdist_dataset_t *ds, int64_t skip,
           double *ret_loss, double *ret_acc, int64_t *ret_n, zdist_error_t *err)
{
    /* A batch that divides skip, so skipped steps end exactly at it. */
    int64_t batch = skip > 0 ? s_gcd(skip, job->global_batch_size) : job->global_batch_size;
    zdist_input_context_t *ictx = zdist_input_context_new(1, 0, job->num_replicas, err);
    if (!ictx)
        return err ? err->code : -ENOMEM;
    zdist_input_options_t opts;
    zdist_input_options_init(&opts, batch);
    opts.shard_policy = ZDIST_AUTO_SHARD_OFF;
    opts.prefetch = job->prefetch;
    zdist_input_t *in = zdist_input_new(ds, ictx, &opts, err);
    int rc = in ? 0 : (err ? err->code : -ENOMEM);
    double loss = 0, correct = 0, n = 0;
    bool has_correct = false;
    const zdist_input_step_t *st;
    while (rc == 0) {
        int more = zdist_input_next(in, &st);
        if (more < 0) {
            rc = zdist_error_set(err, more, "reading the test set: %s", strerror(-more));
            break;
        }
        if (more == 0)
            break;
        if (skip > 0) {
            skip -= st->size;
            continue;
        }
        worker_outputs_t out;
        if ((rc = worker_trainer_step(tr, st, true, &out, err)) < 0)
            break;
        double ex = worker_outputs_get(&out, ZDIST_OUTPUT_EXAMPLES, (double)st->size);
        loss += worker_outputs_get(&out, ZDIST_OUTPUT_LOSS, 0) * ex;
        double c = worker_outputs_get(&out, ZDIST_OUTPUT_CORRECT, NAN);
        if (!isnan(c)) {
            has_correct = true;
            correct += c;
        }
        n += ex;
    }
    zdist_input_destroy(&in);
    zdist_input_context_destroy(&ictx);
    if (rc < 0)
        return rc;
    *ret_loss = n > 0 ? loss / n : NAN;
    *ret_acc = has_correct && n > 0 ? correct / n : NAN;
    *ret_n = (int64_t)n;
    return 0;
}

static void
s_json_num(json_t *o, const char *key, double v)
{
    json_object_set_new(o, key, isfinite(v) ? json_real(v) : json_null());
}

int
cli_run_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},   {"steps", required_argument, NULL, 's'},
        {"quiet", no_argument, NULL, 'q'},  {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0},
    };
    s_out_t o = {0};
    int64_t max_steps = 0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "js:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            o.json = true;
            break;
        case 's':
            if (zdist_parse_int64(optarg, 1, INT64_C(1) << 40, &max_steps) < 0)
                return cli_usage_error("run", "--steps: '%s' is not a step count >= 1", optarg);
            break;
        case 'q':
            o.quiet = true;
            break;
        case 'h':
            s_usage(stdout);
            return CLI_EXIT_OK;
        case 'V':
            printf("zdist %s (step ABI %d)\n", ZDIST_VERSION_STRING, ZDIST_STEP_ABI_VERSION);
            return CLI_EXIT_OK;
        default:
            s_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("run", "expected one job file, e.g. zdist run deploy/examples/fmnist-mlp-run.json");
    const char *job_path = argv[optind];
    o.tty = isatty(STDERR_FILENO);
    double t0 = s_now();

    zdist_error_t err = {0};
    zdist_job_t job;
    if (zdist_job_load(job_path, &job, &err) < 0) {
        fprintf(stderr, "zdist run: %s: %s\n", job_path, err.text);
        return err.code == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    int status = CLI_EXIT_FAILED;
    zdist_dataset_t *train = NULL, *test = NULL;
    worker_registry_t *reg = NULL;
    worker_trainer_t *tr = NULL;
    zdist_input_context_t *ictx = NULL;
    zdist_input_t *in = NULL;
    char *plugin_path = NULL;

    if (job.strategy != ZDIST_STRATEGY_ONE_DEVICE && job.strategy != ZDIST_STRATEGY_MIRRORED &&
        job.strategy != ZDIST_STRATEGY_CENTRAL_STORAGE) {
        fprintf(stderr, "zdist run: %s: strategy.type: '%s' needs a cluster: use 'zdist submit', or one_device, "
                "mirrored or central_storage here\n", job_path, zdist_strategy_name(job.strategy));
        status = CLI_EXIT_USAGE;
        goto out;
    }
    zdist_auto_shard_policy_t applied;
    if (zdist_job_load_dataset(&job, false, NULL, job.shard_policy, &train, &applied, &err) < 0 ||
        (job.has_test && zdist_job_load_dataset(&job, true, NULL, job.shard_policy, &test, NULL, &err) < 0)) {
        fprintf(stderr, "zdist run: %s: dataset: %s\n", job_path, err.text);
        goto out;
    }
    const char *env = getenv("ZDIST_PLUGIN_PATH");
    if (asprintf(&plugin_path, "%s:%s", job.plugin_path ? job.plugin_path : "", env ? env : "") < 0)
        goto out;
    reg = worker_registry_new(plugin_path);
    const zdist_model_t *model = reg ? worker_registry_find(reg, job.model, &err) : NULL;
    if (!model) {
        fprintf(stderr, "zdist run: %s: model.name: %s\n", job_path, reg ? err.text : "out of memory");
        status = CLI_EXIT_USAGE;
        goto out;
    }
    zdist_model_info_t info = {
        .input_dim = zdist_dataset_dim(train),
        .num_classes = zdist_dataset_num_classes(train),
        .sparse = zdist_dataset_is_sparse(train),
        .label_dtype = zdist_dataset_label_dtype(train),
        .seed = job.seed,
    };
    if (test && zdist_dataset_num_classes(test) > info.num_classes)
        info.num_classes = zdist_dataset_num_classes(test);
    worker_trainer_config_t cfg = {.strategy = job.strategy, .num_replicas = job.num_replicas,
                                   .optim = job.optimizer, .seed = job.seed};
    /* Replica threads each run their own BLAS calls: OpenBLAS's own threads
       would only compete with them. */
    if (job.num_replicas > 1)
        openblas_set_num_threads(1);
    tr = worker_trainer_new(model, job.model_params, &info, &cfg, &err);
    if (!tr) {
        fprintf(stderr, "zdist run: %s: %s\n", job_path, err.text);
        status = err.code == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
        goto out;
    }
    ictx = zdist_input_context_new(1, 0, job.num_replicas, &err);
    zdist_input_options_t opts;
    zdist_input_options_init(&opts, job.global_batch_size);
    opts.shuffle = job.shuffle;
    opts.shuffle_seed = job.shuffle_seed;
    opts.drop_remainder = job.drop_remainder;
    opts.epochs = job.epochs > 0 ? job.epochs : ZDIST_INPUT_REPEAT_FOREVER;
    opts.shard_policy = applied;
    opts.prefetch = job.prefetch;
    in = ictx ? zdist_input_new(train, ictx, &opts, &err) : NULL;
    if (!in) {
        fprintf(stderr, "zdist run: %s: dataset: %s\n", job_path, err.text);
        status = CLI_EXIT_USAGE;
        goto out;
    }
    int64_t per_epoch = zdist_input_steps_per_epoch(in);
    int64_t total = job.steps > 0 ? job.steps : job.epochs * per_epoch;
    if (max_steps > 0 && max_steps < total)
        total = max_steps;
    int64_t log_every = job.log_every > 0 ? job.log_every : (total >= 10 ? total / 10 : 1);
    if (!o.quiet && !o.json)
        fprintf(stderr, "zdist run: %s: model %s, %s with %d replica%s, %lld steps (%lld per epoch), batch %lld\n",
                job.name, job.model, zdist_strategy_name(job.strategy), job.num_replicas,
                job.num_replicas == 1 ? "" : "s", (long long)total, (long long)per_epoch,
                (long long)job.global_batch_size);

    double train_t0 = s_now(), examples = 0, epoch_loss = 0, epoch_ex = 0, last_loss = NAN;
    int64_t step = 0, cur_epoch = -1;
    while (step < total) {
        const zdist_input_step_t *st;
        int more = zdist_input_next(in, &st);
        if (more < 0) {
            fprintf(stderr, "%szdist run: %s: reading the training data: %s\n", o.tty && !o.quiet ? "\n" : "",
                    job_path, strerror(-more));
            goto out;
        }
        if (more == 0)
            break;
        if (st->epoch != cur_epoch) {
            cur_epoch = st->epoch;
            epoch_loss = epoch_ex = 0;
        }
        worker_outputs_t out;
        if (worker_trainer_step(tr, st, false, &out, &err) < 0) {
            fprintf(stderr, "%szdist run: %s: step %lld: %s\n", o.tty && !o.quiet ? "\n" : "", job_path,
                    (long long)step + 1, err.text);
            goto out;
        }
        step++;
        double ex = worker_outputs_get(&out, ZDIST_OUTPUT_EXAMPLES, (double)st->size);
        double loss = worker_outputs_get(&out, ZDIST_OUTPUT_LOSS, NAN);
        examples += ex;
        epoch_loss += loss * ex;
        epoch_ex += ex;
        last_loss = epoch_ex > 0 ? epoch_loss / epoch_ex : loss;
        double el = s_now() - train_t0;
        double eps = el > 0 ? examples / el : 0;
        double eta = step > 0 ? el / step * (total - step) : 0;
        if (!o.json && (o.tty || step % log_every == 0 || step == total))
            s_progress(&o, step, total, last_loss, eps, eta, step == total);
    }
    double train_secs = s_now() - train_t0;
    double test_loss = NAN, test_acc = NAN;
    int64_t test_n = 0;
    if (test && s_evaluate(tr, &job, test, job.format == ZDIST_INPUT_FORMAT_SYNTHETIC ? job.synthetic_n : 0, &test_loss, &test_acc, &test_n, &err) < 0) {
        fprintf(stderr, "zdist run: %s: evaluation: %s\n", job_path, err.text);
        goto out;
    }
    double wall = s_now() - t0;
    double eps = train_secs > 0 ? examples / train_secs : 0;
    if (o.json) {
        json_t *j = json_object();
        json_object_set_new(j, "job", json_string(job.name));
        json_object_set_new(j, "model", json_string(job.model));
        json_object_set_new(j, "strategy", json_string(zdist_strategy_name(job.strategy)));
        json_object_set_new(j, "num_replicas", json_integer(job.num_replicas));
        json_object_set_new(j, "steps", json_integer(step));
        json_object_set_new(j, "examples", json_integer((json_int_t)examples));
        s_json_num(j, "final_loss", last_loss);
        s_json_num(j, "test_loss", test_loss);
        s_json_num(j, "test_accuracy", test_acc);
        json_object_set_new(j, "test_examples", json_integer(test_n));
        s_json_num(j, "examples_per_sec", eps);
        s_json_num(j, "train_seconds", train_secs);
        s_json_num(j, "wall_seconds", wall);
        char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6));
        printf("%s\n", text ? text : "{}");
        free(text);
        json_decref(j);
    } else {
        printf("%s: %lld steps, final loss %.4f", job.name, (long long)step, last_loss);
        if (test && !isnan(test_acc))
            printf(", test accuracy %.4f (%lld examples)", test_acc, (long long)test_n);
        else if (test)
            printf(", test loss %.4f (%lld examples)", test_loss, (long long)test_n);
        printf(", %.0f examples/s, %.1f s\n", eps, wall);
    }
    status = CLI_EXIT_OK;
out:
    zdist_input_destroy(&in);
    zdist_input_context_destroy(&ictx);
    worker_trainer_destroy(&tr);
    worker_registry_destroy(&reg);
    zdist_dataset_destroy(&train);
    zdist_dataset_destroy(&test);
    free(plugin_path);
    zdist_job_release(&job);
    return status;
}
