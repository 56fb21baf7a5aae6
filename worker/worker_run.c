/* worker_run: `zdist-worker run JOB` (what `zdist run` executes) — a job trained in this process through the same session a worker serves. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "worker_run.h"
#include "worker_run_out.h"
#include "worker_session.h"
#include "zdist/defs.h"
#include "zdist/input.h"
#include "zdist/job.h"
#include "zdist/model_spec.h"
#include "zdist/parse.h"

static void
s_usage(FILE *out)
{
    fprintf(out,
            "usage: zdist run JOB.json [--json] [--steps N] [--quiet] [--dump-losses FILE] [--save DIR]\n"
            "                 [--dump-predictions FILE]\n"
            "       zdist run --evaluate CHECKPOINT JOB.json [--json] [--dump-predictions FILE]\n"
            "       zdist run --summary JOB.json\n\n"
            "Trains the job in this process: strategy one_device, mirrored, central_storage or tpu with\n"
            "num_replicas threads (tpu: times logical_devices_per_replica), running the same step\n"
            "functions a cluster runs, steps_per_execution steps per dispatch. Shows a progress bar on\n"
            "a terminal (plain lines otherwise) and the final test accuracy.\n\n"
            "  --json      print one JSON object with the final metrics on stdout (warm_examples_per_sec:\n"
            "              examples/s after the first 5 steps)\n"
            "  --dump-losses FILE  write each step's loss to FILE, one \"STEP LOSS\" line per step\n"
            "  --save DIR  after training, save the variables as checkpoint DIR/ckpt-STEP/ (with the job's\n"
            "              job.json), which 'zdist export' reads\n"
            "  --dump-predictions FILE  write each test example's prediction (the last layer's output with\n"
            "              the loss's softmax or sigmoid) to FILE, one line of numbers per example, in the\n"
            "              test set's order (built-in models)\n"
            "  --steps N   stop after N steps (at most the job's length)\n"
            "  --quiet     no progress output\n"
            "  --evaluate CHECKPOINT  train nothing: evaluate the checkpoint (any strategy's: a ckpt-STEP/\n"
            "              directory or one holding them) on the job's test set, on one device\n"
            "  --summary   print a sequential or functional model's layers as Keras's model.summary() and exit\n\n"
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

static void
s_json_num(json_t *o, const char *key, double v)
{
    json_object_set_new(o, key, isfinite(v) ? json_real(v) : json_null());
}

/* "zdist run: --steps: ..." on stderr; the usage exit status. */
static int
s_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int
s_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "zdist run: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return WORKER_RUN_USAGE;
}

/* --summary: a sequential or functional model's layers as Keras prints them; takes the job. */
static int
s_summary(const char *job_path, zdist_job_t *job)
{
    int status = WORKER_RUN_USAGE;
    bool graph = strcmp(job->model, ZDIST_MODEL_FUNCTIONAL) == 0;
    if (strcmp(job->model, ZDIST_MODEL_SEQUENTIAL) != 0 && !graph) {
        fprintf(stderr, "zdist run: %s: --summary describes sequential and functional models (model.name "
                "\"sequential\" or \"functional\" with its layers); this job's model is '%s'\n", job_path,
                job->model);
        zdist_job_release(job);
        return status;
    }
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    char *text = NULL;
    /* the job was checked on load: the spec parses */
    int rc = graph ? zdist_model_graph_parse(job->model_params, &spec, &err)
                   : zdist_model_spec_parse(job->model_params, job->format == ZDIST_INPUT_FORMAT_LIBSVM, &spec, &err);
    if (rc < 0) {
        fprintf(stderr, "zdist run: %s: %s\n", job_path, err.text);
    } else if (zdist_model_spec_summary(&spec, job->model, &text) < 0) {
        fprintf(stderr, "zdist run: out of memory\n");
        status = WORKER_RUN_FAILED;
    } else {
        fputs(text, stdout);
        status = WORKER_RUN_OK;
    }
    free(text);
    zdist_model_spec_release(&spec);
    zdist_job_release(job);
    return status;
}

/* The command line. */
typedef struct {
    s_out_t o;
    bool summary;
    int64_t max_steps;
    const char *dump_path;
    const char *save_dir, *predictions_path, *evaluate;
    const char *job_path;
} s_args_t;

/* -1 to go on, or the exit status (--help, --version, a usage error). */
static int
s_parse_args(int argc, char **argv, s_args_t *a)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},    {"steps", required_argument, NULL, 's'},
        {"quiet", no_argument, NULL, 'q'},   {"summary", no_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},    {"version", no_argument, NULL, 'V'},
        {"dump-losses", required_argument, NULL, 'L'}, {"save", required_argument, NULL, 'D'},
        {"dump-predictions", required_argument, NULL, 'P'}, {"evaluate", required_argument, NULL, 'E'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "js:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            a->o.json = true;
            break;
        case 's':
            if (zdist_parse_int64(optarg, 1, INT64_C(1) << 40, &a->max_steps) < 0)
                return s_usage_error("--steps: '%s' is not a step count >= 1", optarg);
            break;
        case 'q':
            a->o.quiet = true;
            break;
        case 'S':
            a->summary = true;
            break;
        case 'L':
            a->dump_path = optarg;
            break;
        case 'D':
            a->save_dir = optarg;
            break;
        case 'P':
            a->predictions_path = optarg;
            break;
        case 'E':
            a->evaluate = optarg;
            break;
        case 'h':
            s_usage(stdout);
            return WORKER_RUN_OK;
        case 'V':
            printf("zdist %s (step ABI %d)\n", ZDIST_VERSION_STRING, ZDIST_STEP_ABI_VERSION);
            return WORKER_RUN_OK;
        default:
            s_usage(stderr);
            return WORKER_RUN_USAGE;
        }
    }
    if (optind != argc - 1)
        return s_usage_error("expected one job file, e.g. zdist run deploy/examples/fmnist-mlp-run.json");
    a->job_path = argv[optind];
    a->o.tty = isatty(STDERR_FILENO);
    return -1;
}

/* What the training loop measured. */
typedef struct {
    int64_t step;
    double examples, last_loss, train_secs;
    /* after the first S_WARM_STEPS steps (allocations, caches): for benchmarks' equal, warmed runs */
    double warm_t0, warm_examples, train_t1;
} s_train_t;

#define S_WARM_STEPS 5

/* steps_per_execution steps per dispatch (the device loop), each step's
   outputs reported when the dispatch returns; each step's loss to dump
   (may be NULL). 0, or -1 after saying why on stderr. */
static int
s_train_steps(worker_session_t *sess, s_args_t *a, int64_t total, int64_t log_every, FILE *dump, s_train_t *tr)
{
    const zdist_job_t *jb = worker_session_job(sess);
    zdist_error_t err = {0};
    double train_t0 = s_now(), epoch_loss = 0, epoch_ex = 0;
    int64_t cur_epoch = -1;
    *tr = (s_train_t){.last_loss = NAN};
    int64_t spe = jb->steps_per_execution > 0 ? jb->steps_per_execution : 1;
    worker_outputs_t *outs = calloc((size_t)spe, sizeof *outs);
    int64_t *epochs = calloc((size_t)spe, sizeof *epochs);
    int rc = 0;
    if (!outs || !epochs) {
        fprintf(stderr, "zdist run: out of memory for %lld steps' outputs\n", (long long)spe);
        rc = -1;
    }
    for (bool more_data = true; rc == 0 && tr->step < total && more_data;) {
        int64_t want = total - tr->step < spe ? total - tr->step : spe, ran = 0;
        for (; ran < want; ran++) {
            int more = worker_session_step(sess, &outs[ran], &epochs[ran], &err);
            if (more < 0) {
                fprintf(stderr, "%szdist run: %s: step %lld: %s\n", a->o.tty && !a->o.quiet ? "\n" : "",
                        a->job_path, (long long)(tr->step + ran + 1), err.text);
                rc = -1;
                break;
            }
            if (more == 0)
                break;
        }
        if (rc < 0)
            break;
        more_data = ran == want;
        for (int64_t k = 0; k < ran; k++) {
            if (epochs[k] != cur_epoch) {
                cur_epoch = epochs[k];
                epoch_loss = epoch_ex = 0;
            }
            int64_t step = ++tr->step;
            double ex = worker_outputs_get(&outs[k], ZDIST_OUTPUT_EXAMPLES, 0);
            double loss = worker_outputs_get(&outs[k], ZDIST_OUTPUT_LOSS, NAN);
            tr->examples += ex;
            if (step == S_WARM_STEPS)
                tr->warm_t0 = s_now();
            else if (step > S_WARM_STEPS)
                tr->warm_examples += ex;
            epoch_loss += loss * ex;
            epoch_ex += ex;
            tr->last_loss = epoch_ex > 0 ? epoch_loss / epoch_ex : loss;
            double el = s_now() - train_t0;
            double eps = el > 0 ? tr->examples / el : 0;
            double eta = step > 0 ? el / step * (total - step) : 0;
            if (dump)
                fprintf(dump, "%lld %.9g\n", (long long)step, loss);
            if (!a->o.json && (a->o.tty || step % log_every == 0 || step == total))
                s_progress(&a->o, step, total, tr->last_loss, eps, eta, step == total);
        }
    }
    free(outs);
    free(epochs);
    tr->train_t1 = s_now();
    tr->train_secs = tr->train_t1 - train_t0;
    return rc;
}

/* The final numbers: one JSON object (--json) or a line. */
static void
s_report(const zdist_job_t *jb, const s_out_t *o, const s_train_t *tr, bool has_test, const worker_eval_t *ev,
         double wall)
{
    double test_loss = has_test && ev->total > 0 ? ev->loss_sum / ev->total : NAN;
    double test_acc = has_test && ev->has_correct && ev->total > 0 ? ev->correct / ev->total : NAN;
    int64_t test_n = has_test ? (int64_t)ev->total : 0;
    double test_auc = NAN;
    if (has_test && ev->auc && zdist_auc_result(ev->auc, &test_auc) < 0)
        test_auc = NAN;
    double eps = tr->train_secs > 0 ? tr->examples / tr->train_secs : 0;
    if (!o->json) {
        printf("%s: %lld steps, final loss %.4f", jb->name, (long long)tr->step, tr->last_loss);
        if (has_test && !isnan(test_auc))
            printf(", test AUC %.4f, log loss %.4f", test_auc, test_loss);
        if (has_test && !isnan(test_acc))
            printf(", test accuracy %.4f (%lld examples)", test_acc, (long long)test_n);
        else if (has_test)
            printf(", test loss %.4f (%lld examples)", test_loss, (long long)test_n);
        printf(", %.0f examples/s, %.1f s\n", eps, wall);
        return;
    }
    json_t *j = json_object();
    json_object_set_new(j, "job", json_string(jb->name));
    json_object_set_new(j, "model", json_string(jb->model));
    json_object_set_new(j, "strategy", json_string(zdist_strategy_name(jb->strategy)));
    json_object_set_new(j, "num_replicas", json_integer(jb->num_replicas));
    if (jb->strategy == ZDIST_STRATEGY_TPU)
        json_object_set_new(j, "logical_devices_per_replica", json_integer(jb->logical_devices_per_replica));
    json_object_set_new(j, "steps", json_integer(tr->step));
    json_object_set_new(j, "examples", json_integer((json_int_t)tr->examples));
    s_json_num(j, "final_loss", tr->last_loss);
    s_json_num(j, "test_loss", test_loss);
    s_json_num(j, "test_accuracy", test_acc);
    if (!isnan(test_auc))
        s_json_num(j, "test_auc", test_auc);
    json_object_set_new(j, "test_examples", json_integer(test_n));
    s_json_num(j, "examples_per_sec", eps);
    if (tr->step > S_WARM_STEPS && tr->warm_t0 > 0)
        s_json_num(j, "warm_examples_per_sec", tr->warm_examples / (tr->train_t1 - tr->warm_t0));
    s_json_num(j, "train_seconds", tr->train_secs);
    s_json_num(j, "wall_seconds", wall);
    char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6));
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(j);
}

/* The job's session, or NULL after saying why (*status: the exit status). */
static worker_session_t *
s_open_session(const char *job_path, zdist_job_t *job, int *status)
{
    if (job->strategy != ZDIST_STRATEGY_ONE_DEVICE && job->strategy != ZDIST_STRATEGY_MIRRORED &&
        job->strategy != ZDIST_STRATEGY_CENTRAL_STORAGE && job->strategy != ZDIST_STRATEGY_TPU) {
        fprintf(stderr, "zdist run: %s: strategy.type: '%s' needs a cluster: use 'zdist submit', or one_device, "
                "mirrored, central_storage or tpu here\n", job_path, zdist_strategy_name(job->strategy));
        *status = WORKER_RUN_USAGE;
        return NULL;
    }
    zdist_error_t err = {0};
    worker_session_config_t cfg = {.num_workers = 1};
    worker_session_stage_t stage;
    worker_session_t *sess = worker_session_new(job, &cfg, &stage, &err);
    if (!sess) {
        fprintf(stderr, "zdist run: %s: %s\n", job_path, err.text);
        *status = stage == WORKER_SESSION_DATASET || (stage == WORKER_SESSION_TRAINER && err.code != -EINVAL)
                      ? WORKER_RUN_FAILED
                      : WORKER_RUN_USAGE;
    }
    return sess;
}

/* Trains and evaluates the session's job: the exit status. */
static int
s_run(worker_session_t *sess, s_args_t *a, double t0)
{
    const zdist_job_t *jb = worker_session_job(sess);
    zdist_input_t *in = worker_session_input(sess);
    int64_t per_epoch = zdist_input_steps_per_epoch(in);
    int64_t total = jb->steps > 0 ? jb->steps : jb->epochs * per_epoch;
    if (a->max_steps > 0 && a->max_steps < total)
        total = a->max_steps;
    int64_t log_every = jb->log_every > 0 ? jb->log_every : (total >= 10 ? total / 10 : 1);
    char ldev[48] = "";
    if (jb->strategy == ZDIST_STRATEGY_TPU)
        snprintf(ldev, sizeof ldev, " x %d logical devices", jb->logical_devices_per_replica);
    if (!a->o.quiet && !a->o.json)
        fprintf(stderr, "zdist run: %s: model %s, %s with %d replica%s%s, %lld steps (%lld per epoch), batch %lld\n",
                jb->name, jb->model, zdist_strategy_name(jb->strategy), jb->num_replicas,
                jb->num_replicas == 1 ? "" : "s", ldev, (long long)total, (long long)per_epoch,
                (long long)jb->global_batch_size);
    FILE *dump = NULL;
    if (a->dump_path && !(dump = fopen(a->dump_path, "w"))) {
        fprintf(stderr, "zdist run: --dump-losses: cannot write '%s': %s\n", a->dump_path, strerror(errno));
        return WORKER_RUN_FAILED;
    }
    s_train_t tr = {.last_loss = NAN};
    int rc = 0;
    zdist_error_t err = {0};
    if (a->evaluate && worker_session_restore(sess, a->evaluate, &tr.step, &err) < 0) {
        fprintf(stderr, "zdist run: --evaluate: %s\n", err.text);
        rc = -1;
    } else if (!a->evaluate) {
        rc = s_train_steps(sess, a, total, log_every, dump, &tr);
    }
    if (dump) {
        int bad = ferror(dump);
        if (fclose(dump) != 0 || bad) {
            if (rc == 0)
                fprintf(stderr, "zdist run: --dump-losses: writing '%s' failed\n", a->dump_path);
            rc = -1;
        }
    }
    if (rc == 0 && a->save_dir && worker_run_save(sess, a->job_path, a->save_dir, tr.step, &err) < 0) {
        fprintf(stderr, "zdist run: --save: %s\n", err.text);
        rc = -1;
    }
    if (rc < 0)
        return WORKER_RUN_FAILED;
    worker_eval_t ev = {0};
    bool has_test = worker_session_has_test(sess);
    if (a->predictions_path && !has_test) {
        fprintf(stderr, "zdist run: --dump-predictions: job '%s' has no test set\n", jb->name);
        return WORKER_RUN_USAGE;
    }
    worker_predictions_t *preds = a->predictions_path ? worker_predictions_start(jb->num_replicas) : NULL;
    if (a->predictions_path && !preds) {
        fprintf(stderr, "zdist run: out of memory\n");
        return WORKER_RUN_FAILED;
    }
    rc = has_test ? worker_session_evaluate(sess, &ev, &err) : 0;
    if (rc < 0)
        fprintf(stderr, "zdist run: %s: evaluation: %s\n", a->job_path, err.text);
    if (preds && rc == 0 && (rc = worker_predictions_write(preds, a->predictions_path, &err)) < 0)
        fprintf(stderr, "zdist run: --dump-predictions: %s\n", err.text);
    worker_predictions_stop(&preds);
    if (rc < 0) {
        worker_eval_release(&ev);
        return WORKER_RUN_FAILED;
    }
    s_report(jb, &a->o, &tr, has_test, &ev, s_now() - t0);
    worker_eval_release(&ev);
    return WORKER_RUN_OK;
}

int
worker_run_main(int argc, char **argv)
{
    s_args_t a = {0};
    int status = s_parse_args(argc, argv, &a);
    if (status >= 0)
        return status;
    double t0 = s_now();
    zdist_error_t err = {0};
    zdist_job_t job;
    if (zdist_job_load(a.job_path, &job, &err) < 0) {
        fprintf(stderr, "zdist run: %s: %s\n", a.job_path, err.text);
        return err.code == -EINVAL ? WORKER_RUN_USAGE : WORKER_RUN_FAILED;
    }
    if (a.summary)
        return s_summary(a.job_path, &job);
    if (a.evaluate) {
        /* as the sidecar evaluator: the checkpoint of any strategy on one device */
        job.strategy = ZDIST_STRATEGY_ONE_DEVICE;
        job.num_replicas = 1;
        job.logical_devices_per_replica = 1;
        job.spmd = job.oversubscribe = false;
    }
    status = WORKER_RUN_FAILED;
    worker_session_t *sess = s_open_session(a.job_path, &job, &status);
    if (sess)
        status = s_run(sess, &a, t0);
    worker_session_destroy(&sess);
    zdist_job_release(&job);
    return status;
}
