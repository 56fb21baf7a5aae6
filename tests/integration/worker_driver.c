/* worker_driver: drives real zdist-worker and zdist-psd processes through libzdist's worker client for test_worker.sh.

   usage: worker_driver CASE ARGS...   (exit 0 when every check passed, 1 otherwise)
     train WORKER PS0 PS1 [FMNIST_DIR]   bad input first (no job, a missing or invalid
                                         job, unknown method...), then softmax_regression on
                                         synthetic data with parameter_server over the
                                         two psds: loss decreases, psd values change,
                                         evaluation above chance, stop; then a short
                                         Fashion-MNIST job when FMNIST_DIR is given
     two WORKER0 WORKER1 PS0 PS1         one job on two workers (input pipelines 0
                                         and 1) sharing the psd variables
     unreachable WORKER PS0 DEAD         a ps task nobody serves: UNAVAILABLE naming it
     sparse WORKER PS0 PS1 SVM_FILE      sparse_logreg on a libsvm file: embedding rows
                                         pulled by id, sparse pushes, across 3 shards
     mwm WORKER0 WORKER1 [SVM_FILE]      multi_worker_mirrored over two workers: ring set
                                         up, lockstep steps, copies bitwise identical,
                                         state get/set, bad requests, a collective whose
                                         peer never comes failing within its deadline;
                                         with SVM_FILE, sparse_logreg too (sparse
                                         gradients gathered across the workers)
     start WORKER JOB.json               START_JOB of the job (input pipeline 0 of 1, no
                                         ps) as the chief would send it: prints the
                                         status and message; exit 0 when started
                                         (then stopped), 3 when refused
     max_jobs WORKER PS0 PS1             (worker started with --max-jobs 1) a second
                                         parameter_server job refused naming --max-jobs;
                                         once the first stops, it starts */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/endpoint.h"
#include "zdist/job.h"
#include "zdist/ps_client.h"
#include "zdist/worker_service.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"
#include "zdist/worker_client.h"

static int s_failures;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            s_failures++;                                                   \
        }                                                                   \
    } while (0)

static void
s_ok(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("ok: ");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

static char *
s_ep(const char *addr)
{
    static char bufs[8][300];
    static int next;
    char *b = bufs[next++ % 8];
    zdist_error_t err = {0};
    if (zdist_endpoint_normalize(addr, b, 300, &err) < 0) {
        fprintf(stderr, "worker_driver: %s\n", err.text);
        exit(2);
    }
    return b;
}

static zdist_worker_client_t *
s_worker(const char *addr)
{
    zdist_error_t err = {0};
    zdist_worker_client_t *c = zdist_worker_client_new(s_ep(addr), NULL, &err);
    if (!c) {
        fprintf(stderr, "worker_driver: %s\n", err.text);
        exit(2);
    }
    return c;
}

/* Waits for call *id (sent with result rc; a pointer: the argument that
   sends is evaluated in any order with the others): status and message into
   msg; the reply into *ret (the caller releases it) or dropped when ret is
   NULL. */
static int
s_finish(zdist_worker_client_t *c, int rc, const uint64_t *id, zdist_worker_reply_t *ret, char *msg, size_t msg_size)
{
    zdist_worker_reply_t tmp, *r = ret ? ret : &tmp;
    memset(r, 0, sizeof *r);
    if (rc == 0)
        rc = zdist_worker_client_wait(c, *id, r);
    if (rc < 0) {
        snprintf(msg, msg_size, "send: %s", strerror(-rc));
        r->status = -1; /* no reply: not OK either */
        return -1;
    }
    snprintf(msg, msg_size, "%s", r->message);
    int status = r->status;
    if (!ret)
        zdist_worker_reply_release(r);
    return status;
}

/* ---- requests ---- */

/* variable_prefix of the next START_JOBs. */
static const char *s_prefix = "";

static int
s_start_job(zdist_worker_client_t *c, const zdist_job_t *job, int index, int count, const char *const *ps, int nps,
            bool create, int64_t ps_timeout_ms, zdist_worker_reply_t *ret, char *msg, size_t size)
{
    const char *eps[8];
    for (int i = 0; i < nps; i++)
        eps[i] = s_ep(ps[i]);
    zdist_worker_start_t req = {
        .job = job,
        .worker_index = index,
        .num_workers = count,
        .ps_endpoints = eps,
        .num_ps = (size_t)nps,
        .create_variables = create,
        .ps_timeout_ms = ps_timeout_ms,
        .variable_prefix = s_prefix,
    };
    uint64_t id = 0;
    return s_finish(c, zdist_worker_client_start_job(c, &req, 120000, &id), &id, ret, msg, size);
}

/* START_JOB of a job document (parsed here, as the coordinator does). */
static int
s_start(zdist_worker_client_t *c, const char *json, int index, int count, const char *const *ps, int nps, bool create,
        int64_t ps_timeout_ms, zdist_worker_reply_t *ret, char *msg, size_t size)
{
    zdist_job_t job;
    zdist_error_t err = {0};
    if (ret) {
        memset(ret, 0, sizeof *ret);
        ret->status = -1;
    }
    if (zdist_job_parse(json, NULL, &job, &err) < 0) {
        snprintf(msg, size, "job: %s", err.text);
        return -1;
    }
    int st = s_start_job(c, &job, index, count, ps, nps, create, ps_timeout_ms, ret, msg, size);
    zdist_job_release(&job);
    return st;
}

static int
s_run(zdist_worker_client_t *c, const char *job, int64_t steps, zdist_worker_reply_t *ret, char *msg, size_t size)
{
    zdist_worker_run_t req = {.job = job, .steps = steps};
    uint64_t id = 0;
    return s_finish(c, zdist_worker_client_run_steps(c, &req, 120000, &id), &id, ret, msg, size);
}

static int
s_eval(zdist_worker_client_t *c, const char *job, zdist_worker_reply_t *ret, char *msg, size_t size)
{
    uint64_t id = 0;
    return s_finish(c, zdist_worker_client_evaluate(c, job, 120000, &id), &id, ret, msg, size);
}

static int
s_stop(zdist_worker_client_t *c, const char *job, char *msg, size_t size)
{
    uint64_t id = 0;
    return s_finish(c, zdist_worker_client_stop_job(c, job, 120000, &id), &id, NULL, msg, size);
}

static double
s_output(const zdist_worker_step_t *r, const char *name)
{
    for (int k = 0; k < r->num_outputs; k++)
        if (strcmp(r->names[k], name) == 0)
            return r->values[k];
    return NAN;
}

/* Mean loss of a RUN_STEPS reply. */
static double
s_mean_loss(const zdist_worker_reply_t *r)
{
    return r->ran.num_steps ? r->ran.loss_sum / (double)r->ran.num_steps : NAN;
}

/* Every shard of every variable on the psds, concatenated (stats order). */
static size_t
s_snapshot(const char *const *ps, int nps, float *out, size_t cap)
{
    size_t n = 0;
    for (int p = 0; p < nps; p++) {
        zdist_error_t err = {0};
        zdist_ps_client_t *c = zdist_ps_client_new(s_ep(ps[p]), NULL, &err);
        zdist_ps_stats_t *st = NULL;
        CHECK(c && zdist_ps_client_stats(c, &st, &err) == 0, "stats of %s: %s", ps[p], err.text);
        for (size_t i = 0; st && i < st->nshard_info; i++) {
            const zdist_ps_shard_info_t *si = &st->shard_info[i];
            zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = out + n, .nbytes = (cap - n) * sizeof(float)};
            int rc = zdist_ps_client_pull(c, si->name, si->shard_index, 0, 0, &t, &err);
            CHECK(rc == 0, "pull '%s' shard %d: %s", si->name, si->shard_index, err.text);
            if (rc == 0)
                n += t.nbytes / sizeof(float);
        }
        zdist_ps_stats_destroy(&st);
        zdist_ps_client_destroy(&c);
    }
    return n;
}

/* Malformed input the client would not send, on a raw RPC client: the
   request req (taken); status and message into msg. */
static int
s_raw(const char *addr, zdist_msg_t *req, char *msg, size_t size)
{
    zdist_error_t err = {0};
    zdist_rpc_client_t *c = zdist_rpc_client_new(s_ep(addr), NULL, &err);
    zdist_msg_t *reply = NULL;
    if (!c || !req || zdist_rpc_client_call(c, &req, 60000, &reply) < 0) {
        snprintf(msg, size, "cannot call %s: %s", addr, err.text);
        zdist_msg_destroy(&req);
        zdist_rpc_client_destroy(&c);
        return -1;
    }
    int status = zdist_msg_status(reply);
    snprintf(msg, size, "%s", zdist_msg_status_message(reply));
    zdist_msg_destroy(&reply);
    zdist_rpc_client_destroy(&c);
    return status;
}

#define MSG_MAX 2048
#define EXPECT_STATUS(want, substr, call)                                                              \
    do {                                                                                               \
        msg[0] = '\0';                                                                                 \
        int st_ = (call);                                                                              \
        CHECK(st_ == (want), "status %s (%s), wanted %s", zdist_status_name(st_), msg,                 \
              zdist_status_name(want));                                                                \
        CHECK(strstr(msg, (substr)) != NULL, "message '%s' lacks '%s'", msg, (substr));               \
    } while (0)

static const char s_syn_job[] =
    "{\"name\": \"syn-ps\", \"strategy\": {\"type\": \"parameter_server\", \"partitioner\": \"fixed:2\"},"
    " \"model\": {\"name\": \"softmax_regression\"}, \"optimizer\": {\"type\": \"sgd\", \"learning_rate\": 0.1},"
    " \"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 2048, \"test_n\": 512, \"dim\": 12,"
    " \"classes\": 3, \"seed\": 4}, \"global_batch_size\": 32}, \"epochs\": 3, \"steps_per_execution\": 8, \"seed\": 1}";

/* ---- train ---- */

static void
s_bad_input(zdist_worker_client_t *w, const char *waddr, const char *const *ps)
{
    char msg[MSG_MAX];
    EXPECT_STATUS(ZDIST_STATUS_FAILED_PRECONDITION, "START_JOB first", s_run(w, "syn-ps", 1, NULL, msg, sizeof msg));
    EXPECT_STATUS(ZDIST_STATUS_FAILED_PRECONDITION, "no job", s_stop(w, "syn-ps", msg, sizeof msg));
    EXPECT_STATUS(ZDIST_STATUS_FAILED_PRECONDITION, "no job", s_eval(w, "syn-ps", NULL, msg, sizeof msg));
    /* A START_JOB without a job (the client refuses to send one). */
    zdist_worker_start_t nojob = {0};
    CHECK(zdist_worker_client_start_job(w, &nojob, 1000, NULL) == -EINVAL, "the client sent a START_JOB without a job");
    EXPECT_STATUS(ZDIST_STATUS_INVALID_ARGUMENT, "job: missing",
                  s_raw(waddr, zdist_worker_request_start_job(&nojob), msg, sizeof msg));
    /* A job the parser would refuse is held to its rules on arrival, naming the field. */
    zdist_job_t job;
    zdist_error_t err = {0};
    CHECK(zdist_job_parse(s_syn_job, NULL, &job, &err) == 0, "%s", err.text);
    job.global_batch_size = 0;
    EXPECT_STATUS(ZDIST_STATUS_INVALID_ARGUMENT, "job: dataset.global_batch_size",
                  s_start_job(w, &job, 0, 1, ps, 2, true, 0, NULL, msg, sizeof msg));
    job.global_batch_size = 32;
    job.epochs = 0; /* and no steps either */
    EXPECT_STATUS(ZDIST_STATUS_INVALID_ARGUMENT, "give exactly one",
                  s_start_job(w, &job, 0, 1, ps, 2, true, 0, NULL, msg, sizeof msg));
    zdist_job_release(&job);
    EXPECT_STATUS(ZDIST_STATUS_INVALID_ARGUMENT, "worker_index",
                  s_start(w, s_syn_job, 2, 2, ps, 2, true, 0, NULL, msg, sizeof msg));
    EXPECT_STATUS(ZDIST_STATUS_UNIMPLEMENTED, "", s_raw(waddr, zdist_msg_new(299), msg, sizeof msg));
    s_ok("bad input: no job (FAILED_PRECONDITION), a missing or invalid job and bad fields (INVALID_ARGUMENT "
         "naming them), unknown method (UNIMPLEMENTED)");
}

static int
s_train(const char *waddr, const char *const *ps, const char *fmnist)
{
    zdist_worker_client_t *w = s_worker(waddr);
    char msg[MSG_MAX];
    s_bad_input(w, waddr, ps);
    s_prefix = ""; /* the model's own names: w [12,3] and b [3] */

    static float before[1 << 16], after[1 << 16];
    zdist_worker_reply_t sr;
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_start(w, s_syn_job, 0, 1, ps, 2, true, 0, &sr, msg, sizeof msg));
    if (sr.status != ZDIST_STATUS_OK)
        return 1;
    CHECK(strcmp(sr.started.strategy, "parameter_server") == 0 && sr.started.num_replicas == 1, "%s %d",
          sr.started.strategy, sr.started.num_replicas);
    CHECK(sr.started.steps_per_epoch == 64 && sr.started.created && sr.started.num_shards >= 3,
          "steps/epoch %" PRId64 " created %d shards %d", sr.started.steps_per_epoch, sr.started.created,
          sr.started.num_shards);
    s_ok("START_JOB: parameter_server, %d variables in %d shards created on 2 psds", sr.started.num_variables,
         sr.started.num_shards);
    zdist_worker_reply_release(&sr);
    /* The same start again is a no-op; another parameter_server job runs
       beside it (its own session), a multi_worker_mirrored one is refused
       (it holds a worker alone). */
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_start(w, s_syn_job, 0, 1, ps, 2, true, 0, NULL, msg, sizeof msg));
    char other[sizeof s_syn_job + 64];
    snprintf(other, sizeof other, "%s", s_syn_job);
    memcpy(strstr(other, "syn-ps"), "syn-px", 6);
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_start(w, other, 0, 1, ps, 2, false, 0, NULL, msg, sizeof msg));
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_stop(w, "syn-px", msg, sizeof msg));
    const char *ps_type = strstr(s_syn_job, "\"parameter_server\", \"partitioner\": \"fixed:2\"");
    snprintf(other, sizeof other, "%.*s\"multi_worker_mirrored\"%s", (int)(ps_type - s_syn_job), s_syn_job,
             ps_type + strlen("\"parameter_server\", \"partitioner\": \"fixed:2\""));
    memcpy(strstr(other, "syn-ps"), "syn-mw", 6);
    EXPECT_STATUS(ZDIST_STATUS_FAILED_PRECONDITION, "shares a worker with no other",
                  s_start(w, other, 0, 1, ps, 2, false, 0, NULL, msg, sizeof msg));
    size_t nb = s_snapshot(ps, 2, before, sizeof before / sizeof *before);
    CHECK(nb == 12 * 3 + 3, "%zu values on the psds, wanted 39 (w [12,3] + b [3])", nb);

    double first = NAN, last = NAN;
    int64_t step = 0;
    for (int call = 0; call < 12; call++) {
        zdist_worker_reply_t rr;
        EXPECT_STATUS(ZDIST_STATUS_OK, "", s_run(w, "syn-ps", call == 0 ? 0 : 10, &rr, msg, sizeof msg));
        if (rr.status != ZDIST_STATUS_OK)
            return 1;
        CHECK(rr.ran.num_steps == (call == 0 ? 8u : 10u), "call %d: %zu steps", call, rr.ran.num_steps);
        step += (int64_t)rr.ran.num_steps;
        CHECK(rr.ran.worker_step == step, "worker_step %" PRId64 ", wanted %" PRId64, rr.ran.worker_step, step);
        for (size_t i = 0; i < rr.ran.num_steps; i++)
            CHECK(s_output(&rr.ran.steps[i], "examples") == 32 && isfinite(s_output(&rr.ran.steps[i], "loss")),
                  "step %zu: examples %g loss %g", i, s_output(&rr.ran.steps[i], "examples"),
                  s_output(&rr.ran.steps[i], "loss"));
        if (call == 0)
            first = s_mean_loss(&rr);
        last = s_mean_loss(&rr);
        zdist_worker_reply_release(&rr);
    }
    CHECK(last < first * 0.7, "loss %g -> %g did not decrease", first, last);
    s_ok("RUN_STEPS: %" PRId64 " steps (steps_per_execution 8, then 10 at a time), loss %.4f -> %.4f", step, first,
         last);
    size_t na = s_snapshot(ps, 2, after, sizeof after / sizeof *after);
    size_t changed = 0;
    for (size_t i = 0; i < na && i < nb; i++)
        changed += before[i] != after[i];
    CHECK(na == nb && changed > nb / 2, "%zu of %zu values changed on the psds", changed, nb);
    s_ok("psd variables changed (%zu of %zu values)", changed, nb);

    zdist_worker_reply_t er;
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_eval(w, "syn-ps", &er, msg, sizeof msg));
    if (er.status != ZDIST_STATUS_OK)
        return 1;
    const zdist_evaluation_t *ev = &er.evaluation;
    double acc = ev->total ? (double)ev->correct / (double)ev->total : 0;
    CHECK(ev->has_correct && ev->total == 512 && acc > 0.6, "accuracy %g on %" PRId64 " examples", acc, ev->total);
    s_ok("EVALUATE: accuracy %.3f on %" PRId64 " examples (chance 0.333), mean loss %.4f", acc, ev->total,
         ev->loss_sum / (double)ev->total);
    zdist_worker_reply_release(&er);

    EXPECT_STATUS(ZDIST_STATUS_NOT_FOUND, "unknown job 'nope'", s_run(w, "nope", 1, NULL, msg, sizeof msg));
    EXPECT_STATUS(ZDIST_STATUS_INVALID_ARGUMENT, "steps", s_run(w, "syn-ps", -1, NULL, msg, sizeof msg));
    /* Past the end of the data (3 epochs = 192 steps): end_of_data. */
    zdist_worker_reply_t rr;
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_run(w, "syn-ps", 100, &rr, msg, sizeof msg));
    if (rr.status == ZDIST_STATUS_OK)
        CHECK(rr.ran.end_of_data && rr.ran.num_steps == (size_t)(192 - step) && rr.ran.worker_step == 192,
              "end %d steps %zu worker %" PRId64, rr.ran.end_of_data, rr.ran.num_steps, rr.ran.worker_step);
    zdist_worker_reply_release(&rr);
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_stop(w, "syn-ps", msg, sizeof msg));
    EXPECT_STATUS(ZDIST_STATUS_FAILED_PRECONDITION, "START_JOB first", s_run(w, "syn-ps", 1, NULL, msg, sizeof msg));
    s_ok("unknown job NOT_FOUND, bad steps INVALID_ARGUMENT, end of data, STOP_JOB, then FAILED_PRECONDITION");

    if (fmnist && *fmnist) {
        char job[2048];
        snprintf(job, sizeof job,
                 "{\"name\": \"fmnist-ps\", \"strategy\": {\"type\": \"parameter_server\", \"partitioner\": \"fixed:2\"},"
                 " \"model\": {\"name\": \"softmax_regression\"}, \"optimizer\": {\"type\": \"adam\", \"learning_rate\": 0.003},"
                 " \"dataset\": {\"format\": \"idx\", \"train\": {\"images\": \"%s/train-images-idx3-ubyte.gz\","
                 " \"labels\": \"%s/train-labels-idx1-ubyte.gz\"}, \"test\": {\"images\": \"%s/t10k-images-idx3-ubyte.gz\","
                 " \"labels\": \"%s/t10k-labels-idx1-ubyte.gz\"}, \"global_batch_size\": 128, \"shuffle_seed\": 42},"
                 " \"steps\": 150, \"steps_per_execution\": 50, \"seed\": 1}",
                 fmnist, fmnist, fmnist, fmnist);
        s_prefix = "fmnist/"; /* beside the synthetic job's variables */
        EXPECT_STATUS(ZDIST_STATUS_OK, "", s_start(w, job, 0, 1, ps, 2, true, 0, NULL, msg, sizeof msg));
        double f0 = NAN, f1 = NAN;
        for (int call = 0; call < 3; call++) {
            EXPECT_STATUS(ZDIST_STATUS_OK, "", s_run(w, "fmnist-ps", 0, &rr, msg, sizeof msg));
            if (rr.status != ZDIST_STATUS_OK)
                return 1;
            if (call == 0)
                f0 = s_output(&rr.ran.steps[0], "loss");
            f1 = s_mean_loss(&rr);
            zdist_worker_reply_release(&rr);
        }
        EXPECT_STATUS(ZDIST_STATUS_OK, "", s_eval(w, "fmnist-ps", &er, msg, sizeof msg));
        if (er.status != ZDIST_STATUS_OK)
            return 1;
        acc = ev->total ? (double)ev->correct / (double)ev->total : 0;
        CHECK(f1 < f0 && ev->total == 10000 && acc > 0.7, "loss %g -> %g, accuracy %g on %" PRId64, f0, f1, acc,
              ev->total);
        s_ok("Fashion-MNIST softmax_regression, 150 steps over 2 psds: loss %.3f -> %.3f, test accuracy %.3f", f0, f1,
             acc);
        zdist_worker_reply_release(&er);
        EXPECT_STATUS(ZDIST_STATUS_OK, "", s_stop(w, "fmnist-ps", msg, sizeof msg));
    }
    zdist_worker_client_destroy(&w);
    return s_failures ? 1 : 0;
}

/* ---- two workers, one job ---- */

static const char s_two_job[] =
    "{\"name\": \"syn-two\", \"strategy\": {\"type\": \"parameter_server\"},"
    " \"model\": {\"name\": \"softmax_regression\"}, \"optimizer\": {\"type\": \"adagrad\", \"learning_rate\": 0.3},"
    " \"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 2048, \"test_n\": 512, \"dim\": 12,"
    " \"classes\": 3, \"seed\": 5}, \"global_batch_size\": 32}, \"steps\": 200, \"steps_per_execution\": 10, \"seed\": 3}";

static int
s_two(const char *w0addr, const char *w1addr, const char *const *ps)
{
    zdist_worker_client_t *w[2] = {s_worker(w0addr), s_worker(w1addr)};
    char msg[MSG_MAX];
    /* Worker 0 creates the variables; worker 1 uses them. */
    s_prefix = "syn-two/";
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_start(w[0], s_two_job, 0, 2, ps, 2, true, 0, NULL, msg, sizeof msg));
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_start(w[1], s_two_job, 1, 2, ps, 2, false, 0, NULL, msg, sizeof msg));
    double first[2] = {NAN, NAN}, last[2] = {NAN, NAN};
    for (int round = 0; round < 6; round++)
        for (int i = 0; i < 2; i++) {
            zdist_worker_reply_t rr;
            EXPECT_STATUS(ZDIST_STATUS_OK, "", s_run(w[i], "syn-two", 0, &rr, msg, sizeof msg));
            if (rr.status != ZDIST_STATUS_OK)
                return 1;
            /* Each worker's step is the whole global batch (TF's ParameterServerStrategy: one
               input pipeline in sync per worker); the workers share out the epoch's batches. */
            CHECK(rr.ran.num_steps == 10 && s_output(&rr.ran.steps[0], "examples") == 32, "worker %d: %zu steps, %g examples",
                  i, rr.ran.num_steps, s_output(&rr.ran.steps[0], "examples"));
            if (round == 0)
                first[i] = s_mean_loss(&rr);
            last[i] = s_mean_loss(&rr);
            zdist_worker_reply_release(&rr);
        }
    CHECK(last[0] < first[0] && last[1] < first[1], "loss w0 %g -> %g, w1 %g -> %g", first[0], last[0], first[1],
          last[1]);
    int64_t correct = 0, total = 0;
    for (int i = 0; i < 2; i++) {
        zdist_worker_reply_t er;
        EXPECT_STATUS(ZDIST_STATUS_OK, "", s_eval(w[i], "syn-two", &er, msg, sizeof msg));
        if (er.status != ZDIST_STATUS_OK)
            return 1;
        correct += er.evaluation.correct;
        total += er.evaluation.total;
        zdist_worker_reply_release(&er);
    }
    double acc = total ? (double)correct / (double)total : 0;
    CHECK(total == 512 && acc > 0.6, "accuracy %g on %" PRId64 " examples over both workers", acc, total);
    for (int i = 0; i < 2; i++) {
        EXPECT_STATUS(ZDIST_STATUS_OK, "", s_stop(w[i], "syn-two", msg, sizeof msg));
        zdist_worker_client_destroy(&w[i]);
    }
    s_ok("two workers on one job: loss %.3f -> %.3f and %.3f -> %.3f, test accuracy %.3f over %" PRId64
         " examples split between them",
         first[0], last[0], first[1], last[1], acc, total);
    return s_failures ? 1 : 0;
}

static int
s_unreachable(const char *waddr, const char *ps0, const char *dead)
{
    zdist_worker_client_t *w = s_worker(waddr);
    char msg[MSG_MAX];
    const char *ps[2] = {ps0, dead};
    /* fixed:2 puts one shard of w on each ps task: ps task 1 must be reached. */
    char job[sizeof s_syn_job];
    snprintf(job, sizeof job, "%s", s_syn_job);
    memcpy(strstr(job, "syn-ps"), "syn-un", 6);
    char want[400];
    snprintf(want, sizeof want, "ps task 1 at %s is unreachable", s_ep(dead));
    EXPECT_STATUS(ZDIST_STATUS_UNAVAILABLE, want, s_start(w, job, 0, 1, ps, 2, true, 300, NULL, msg, sizeof msg));
    EXPECT_STATUS(ZDIST_STATUS_FAILED_PRECONDITION, "START_JOB first", s_run(w, "syn-un", 1, NULL, msg, sizeof msg));
    zdist_worker_client_destroy(&w);
    s_ok("an unreachable ps task: UNAVAILABLE naming it, no job left behind");
    return s_failures ? 1 : 0;
}

static int
s_sparse(const char *waddr, const char *const *ps, const char *svm)
{
    zdist_worker_client_t *w = s_worker(waddr);
    char msg[MSG_MAX], job[2048];
    snprintf(job, sizeof job,
             "{\"name\": \"svm-ps\", \"strategy\": {\"type\": \"parameter_server\", \"partitioner\": \"fixed:3\"},"
             " \"model\": {\"name\": \"sparse_logreg\"}, \"optimizer\": {\"type\": \"adagrad\", \"learning_rate\": 0.5},"
             " \"dataset\": {\"format\": \"libsvm\", \"dim\": 2048, \"train\": {\"path\": \"%s\"},"
             " \"test\": {\"path\": \"%s\"}, \"global_batch_size\": 64}, \"epochs\": 2, \"steps_per_execution\": 19}",
             svm, svm);
    s_prefix = "svm-ps/";
    zdist_worker_reply_t sr;
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_start(w, job, 0, 1, ps, 2, true, 0, &sr, msg, sizeof msg));
    if (sr.status != ZDIST_STATUS_OK)
        return 1;
    CHECK(sr.started.num_shards >= 3, "%d shards", sr.started.num_shards);
    zdist_worker_reply_release(&sr);
    double first = NAN, last = NAN;
    for (int call = 0; call < 2; call++) {
        zdist_worker_reply_t rr;
        EXPECT_STATUS(ZDIST_STATUS_OK, "", s_run(w, "svm-ps", 0, &rr, msg, sizeof msg));
        if (rr.status != ZDIST_STATUS_OK)
            return 1;
        if (call == 0)
            first = s_mean_loss(&rr);
        last = s_mean_loss(&rr);
        zdist_worker_reply_release(&rr);
    }
    zdist_worker_reply_t er;
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_eval(w, "svm-ps", &er, msg, sizeof msg));
    if (er.status != ZDIST_STATUS_OK)
        return 1;
    double acc = er.evaluation.total ? (double)er.evaluation.correct / (double)er.evaluation.total : 0;
    CHECK(last < first && acc > 0.9, "loss %g -> %g, accuracy %g", first, last, acc);
    zdist_worker_reply_release(&er);
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_stop(w, "svm-ps", msg, sizeof msg));
    zdist_worker_client_destroy(&w);
    s_ok("sparse_logreg (rows by id, sparse pushes, 3 shards): loss %.3f -> %.3f, accuracy %.3f", first, last, acc);
    return s_failures ? 1 : 0;
}

/* ---- multi_worker_mirrored ---- */

/* A worker's state: its tensors copied out of a GET_STATE reply. */
typedef struct {
    int n;
    char names[64][128];
    float *data[64];
    size_t bytes[64];
    int64_t step, iterations;
} s_state_t;

static void
s_state_free(s_state_t *st)
{
    for (int i = 0; i < st->n; i++)
        free(st->data[i]);
    memset(st, 0, sizeof *st);
}

static int
s_get_state(zdist_worker_client_t *c, const char *job, s_state_t *ret, char *msg, size_t size)
{
    memset(ret, 0, sizeof *ret);
    zdist_worker_reply_t r;
    uint64_t id = 0;
    int status = s_finish(c, zdist_worker_client_get_state(c, job, 60000, &id), &id, &r, msg, size);
    if (status == ZDIST_STATUS_OK) {
        ret->step = r.state.step;
        ret->iterations = r.state.iterations;
        for (size_t i = 0; i < zdist_worker_reply_tensor_count(&r) && i < 64; i++) {
            const zdist_tensor_t *t = zdist_worker_reply_tensor(&r, i);
            snprintf(ret->names[i], sizeof ret->names[i], "%s", t->name ? t->name : "");
            ret->data[i] = malloc(t->nbytes + 1);
            memcpy(ret->data[i], t->data, t->nbytes);
            ret->bytes[i] = t->nbytes;
            ret->n++;
        }
    }
    zdist_worker_reply_release(&r);
    return status;
}

/* SET_STATE from st, leaving out tensor `skip` (-1: none). */
static int
s_set_state(zdist_worker_client_t *c, const char *job, const s_state_t *st, int skip, char *msg, size_t size)
{
    zdist_tensor_t ts[64];
    size_t n = 0;
    for (int i = 0; i < st->n; i++) {
        zdist_shape_t shape = {.rank = 1, .dims = {(int64_t)(st->bytes[i] / sizeof(float))}};
        if (i != skip)
            ts[n++] = (zdist_tensor_t){st->names[i], ZDIST_DTYPE_FLOAT32, shape, st->data[i], st->bytes[i]};
    }
    zdist_worker_state_t state = {job, st->step, st->iterations, 0};
    uint64_t id = 0;
    return s_finish(c, zdist_worker_client_set_state(c, &state, ts, n, 60000, &id), &id, NULL, msg, size);
}

/* -1 when a and b hold the same tensors bitwise, else the first that differs. */
static int
s_state_diff(const s_state_t *a, const s_state_t *b)
{
    if (a->n != b->n || a->n == 0)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->names[i], b->names[i]) != 0 || a->bytes[i] != b->bytes[i] ||
            memcmp(a->data[i], b->data[i], a->bytes[i]) != 0)
            return i;
    return -1;
}

static int
s_connect(zdist_worker_client_t *c, const char *job, const char *const *eps, size_t n, char *msg, size_t size)
{
    zdist_worker_connect_t req = {job, eps, n};
    uint64_t id = 0;
    return s_finish(c, zdist_worker_client_connect(c, &req, 120000, &id), &id, NULL, msg, size);
}

/* RUN_STEPS on both workers at once (each blocks in the ring until the other
   joins); the summed loss into *ret_loss. */
static int
s_run_both(zdist_worker_client_t *const *w, const char *job, int64_t steps, double *ret_loss, char *msg, size_t size)
{
    zdist_worker_run_t req = {.job = job, .steps = steps};
    uint64_t ids[2];
    for (int i = 0; i < 2; i++)
        if (zdist_worker_client_run_steps(w[i], &req, 120000, &ids[i]) < 0)
            return -1;
    int status = ZDIST_STATUS_OK;
    *ret_loss = 0;
    for (int i = 0; i < 2; i++) {
        zdist_worker_reply_t r;
        if (zdist_worker_client_wait(w[i], ids[i], &r) < 0)
            return -1;
        if (r.status != ZDIST_STATUS_OK) {
            status = r.status;
            snprintf(msg, size, "worker %d: %s", i, r.message);
        } else {
            *ret_loss += s_mean_loss(&r);
        }
        zdist_worker_reply_release(&r);
    }
    return status;
}

/* sparse_logreg on a libsvm file over both workers: the embedding's sparse
   gradients gathered from both, copies identical. */
static void
s_mwm_sparse(zdist_worker_client_t *const *w, const char *svm)
{
    char job[2048], msg[2048];
    snprintf(job, sizeof job,
             "{\"name\": \"mwm-svm\", \"strategy\": {\"type\": \"multi_worker_mirrored\", \"num_replicas\": 2},"
             " \"model\": {\"name\": \"sparse_logreg\"}, \"optimizer\": {\"type\": \"adagrad\", \"learning_rate\": 0.5},"
             " \"dataset\": {\"format\": \"libsvm\", \"dim\": 2048, \"train\": {\"path\": \"%s\"},"
             " \"global_batch_size\": 64, \"shard_policy\": \"data\"}, \"steps\": 1, \"steps_per_execution\": 5}", svm);
    zdist_worker_reply_t sr[2];
    const char *eps[2];
    for (int i = 0; i < 2; i++) {
        int st = s_start(w[i], job, i, 2, NULL, 0, false, 0, &sr[i], msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK, "sparse START_JOB worker %d: %s", i, msg);
        if (st != ZDIST_STATUS_OK)
            return;
        eps[i] = sr[i].started.collective_endpoint;
    }
    for (int i = 0; i < 2; i++)
        CHECK(s_connect(w[i], "mwm-svm", eps, 2, msg, sizeof msg) == ZDIST_STATUS_OK, "sparse CONNECT: %s", msg);
    double first = 0, last = 0, loss;
    for (int k = 0; k < 12; k++) {
        int st = s_run_both(w, "mwm-svm", 0, &loss, msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK, "sparse round %d: %s", k, msg);
        if (st != ZDIST_STATUS_OK)
            return;
        if (k == 0)
            first = loss;
        last = loss;
    }
    s_state_t a, b;
    s_get_state(w[0], "mwm-svm", &a, msg, sizeof msg);
    s_get_state(w[1], "mwm-svm", &b, msg, sizeof msg);
    CHECK(s_state_diff(&a, &b) < 0, "sparse_logreg: the workers' copies differ");
    CHECK(last < first, "sparse_logreg loss did not fall: %.4f -> %.4f", first, last);
    s_ok("sparse_logreg over 2 workers x 2 replicas: loss %.3f -> %.3f, copies bitwise identical (%d tensors)", first,
         last, a.n);
    s_state_free(&a);
    s_state_free(&b);
    for (int i = 0; i < 2; i++) {
        s_stop(w[i], "mwm-svm", msg, sizeof msg);
        zdist_worker_reply_release(&sr[i]);
    }
}

static int
s_mwm(const char *w0addr, const char *w1addr, const char *svm)
{
    zdist_worker_client_t *w[2] = {s_worker(w0addr), s_worker(w1addr)};
    const char *job = "{\"name\": \"mwm\", \"strategy\": {\"type\": \"multi_worker_mirrored\", "
                      "\"collective_timeout_ms\": 2000, \"bytes_per_pack\": 4096},"
                      " \"model\": {\"name\": \"mlp\", \"params\": {\"hidden\": [32, 16]}},"
                      " \"optimizer\": {\"type\": \"adam\", \"learning_rate\": 0.01},"
                      " \"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 4096, \"test_n\": 512,"
                      " \"dim\": 24, \"classes\": 4, \"seed\": 5}, \"global_batch_size\": 64},"
                      " \"steps\": 1, \"steps_per_execution\": 3, \"seed\": 9}";
    char msg[2048];
    int st;
    zdist_worker_reply_t sr[2];
    const char *eps[2];
    for (int i = 0; i < 2; i++) {
        st = s_start(w[i], job, i, 2, NULL, 0, false, 0, &sr[i], msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK, "START_JOB on worker %d: %s", i, msg);
        if (st != ZDIST_STATUS_OK)
            return 1;
        CHECK(strcmp(sr[i].started.strategy, "multi_worker_mirrored") == 0 &&
                  strncmp(sr[i].started.collective_endpoint, "tcp://", 6) == 0,
              "worker %d: strategy '%s', ring endpoint '%s'", i, sr[i].started.strategy,
              sr[i].started.collective_endpoint);
        eps[i] = sr[i].started.collective_endpoint;
    }
    s_ok("started on two workers; their ends of the ring: %s, %s", eps[0], eps[1]);

    double loss;
    st = s_run_both(w, "mwm", 1, &loss, msg, sizeof msg);
    CHECK(st == ZDIST_STATUS_FAILED_PRECONDITION && strstr(msg, "CONNECT the ring before RUN_STEPS"),
          "RUN_STEPS before CONNECT: %s %s", zdist_status_name(st), msg);
    st = s_connect(w[0], "mwm", eps, 1, msg, sizeof msg);
    CHECK(st == ZDIST_STATUS_INVALID_ARGUMENT && strstr(msg, "1 given, the job was started over 2 workers"),
          "CONNECT with one endpoint: %s %s", zdist_status_name(st), msg);
    const char *bad[2] = {eps[0], "tcp://*:5"};
    st = s_connect(w[0], "mwm", bad, 2, msg, sizeof msg);
    CHECK(st == ZDIST_STATUS_INVALID_ARGUMENT && strstr(msg, "endpoints[1]"), "CONNECT with a wildcard: %s %s",
          zdist_status_name(st), msg);
    st = s_connect(w[0], "other", eps, 2, msg, sizeof msg);
    CHECK(st == ZDIST_STATUS_NOT_FOUND, "CONNECT for another job: %s %s", zdist_status_name(st), msg);
    s_ok("refused: RUN_STEPS before CONNECT, CONNECT with a wrong count, a wildcard host, another job");

    for (int i = 0; i < 2; i++) {
        st = s_connect(w[i], "mwm", eps, 2, msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK, "CONNECT worker %d: %s", i, msg);
    }
    s_state_t init[2], after[2];
    for (int i = 0; i < 2; i++) {
        st = s_get_state(w[i], "mwm", &init[i], msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK && init[i].n > 0, "GET_STATE worker %d: %s", i, msg);
    }
    /* mlp [32, 16]: 3 kernels + 3 biases, each with Adam's m and v. */
    CHECK(init[0].n == 18, "initial state: %d tensors, want 18 (6 variables + 12 Adam slots)", init[0].n);
    CHECK(s_state_diff(&init[0], &init[1]) < 0, "the workers start from different values");

    double first = 0, last = 0;
    const int rounds = 40;
    for (int k = 0; k < rounds; k++) {
        st = s_run_both(w, "mwm", 0, &loss, msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK && isfinite(loss), "round %d: %s %s", k, zdist_status_name(st), msg);
        if (st != ZDIST_STATUS_OK)
            return 1;
        if (k < 3)
            first += loss / 3;
        if (k >= rounds - 3)
            last += loss / 3;
    }
    CHECK(last < 0.7 * first, "loss did not fall: %.4f -> %.4f", first, last);
    for (int i = 0; i < 2; i++) {
        st = s_get_state(w[i], "mwm", &after[i], msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK, "GET_STATE worker %d: %s", i, msg);
    }
    int d = s_state_diff(&after[0], &after[1]);
    CHECK(d < 0, "after %d steps the workers' copies differ, first in '%s'", rounds * 3, d >= 0 ? after[0].names[d] : "?");
    CHECK(after[0].iterations == rounds * 3 && after[1].iterations == rounds * 3 && after[0].step == rounds * 3,
          "iterations %lld / %lld, step %lld; want %d", (long long)after[0].iterations,
          (long long)after[1].iterations, (long long)after[0].step, rounds * 3);
    CHECK(s_state_diff(&init[0], &after[0]) >= 0, "training changed no variable");
    size_t bytes = 0;
    for (int i = 0; i < after[0].n; i++)
        bytes += after[0].bytes[i];
    s_ok("%d lockstep steps over 2 worker processes: loss %.3f -> %.3f, both copies bitwise identical (%d tensors, "
         "%zu bytes, %lld optimizer iterations)", rounds * 3, first, last, after[0].n, bytes,
         (long long)after[0].iterations);

    /* A state missing one tensor is refused whole; the variables stay. */
    st = s_set_state(w[0], "mwm", &init[0], 3, msg, sizeof msg);
    CHECK(st == ZDIST_STATUS_INVALID_ARGUMENT && strstr(msg, "missing in the state"), "SET_STATE without '%s': %s %s",
          init[0].names[3], zdist_status_name(st), msg);
    s_state_t now;
    st = s_get_state(w[0], "mwm", &now, msg, sizeof msg);
    CHECK(st == ZDIST_STATUS_OK && s_state_diff(&now, &after[0]) < 0, "a refused SET_STATE changed the variables");
    s_state_free(&now);
    /* Both back to the initial values: then equal to them, and in step. */
    for (int i = 0; i < 2; i++) {
        st = s_set_state(w[i], "mwm", &init[0], -1, msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK, "SET_STATE worker %d: %s", i, msg);
        st = s_get_state(w[i], "mwm", &now, msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK && s_state_diff(&now, &init[0]) < 0, "worker %d: state not restored", i);
        s_state_free(&now);
    }
    st = s_run_both(w, "mwm", 2, &loss, msg, sizeof msg);
    CHECK(st == ZDIST_STATUS_OK, "a round after SET_STATE: %s", msg);
    s_state_t b[2];
    for (int i = 0; i < 2; i++)
        s_get_state(w[i], "mwm", &b[i], msg, sizeof msg);
    CHECK(s_state_diff(&b[0], &b[1]) < 0 && s_state_diff(&b[0], &init[0]) >= 0,
          "after SET_STATE and 2 steps the copies are not identical (or did not move)");
    s_ok("SET_STATE: a state missing '%s' refused with nothing changed; the initial state restored on both, "
         "copies identical after 2 more steps", init[0].names[3]);

    /* Worker 1 never joins: worker 0's step fails within the deadline,
       naming rank 1 and its endpoint. */
    int64_t t0 = zdist_clock_now_ms();
    st = s_run(w[0], "mwm", 1, NULL, msg, sizeof msg);
    int64_t took = zdist_clock_now_ms() - t0;
    CHECK(st == ZDIST_STATUS_DEADLINE_EXCEEDED && strstr(msg, "rank 1") && strstr(msg, eps[1]),
          "a step without worker 1: %s %s", zdist_status_name(st), msg);
    CHECK(took >= 1500 && took < 60000, "failed after %lld ms with a 2000 ms deadline", (long long)took);
    s_ok("a step without worker 1 failed after %lld ms (deadline 2000 ms): %s", (long long)took, msg);
    st = s_run(w[0], "mwm", 1, NULL, msg, sizeof msg);
    CHECK(st == ZDIST_STATUS_FAILED_PRECONDITION && strstr(msg, "STOP_JOB and START_JOB"),
          "a step after the failure: %s %s", zdist_status_name(st), msg);
    for (int i = 0; i < 2; i++) {
        st = s_stop(w[i], "mwm", msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK, "STOP_JOB worker %d: %s", i, msg);
    }
    if (svm)
        s_mwm_sparse(w, svm);
    for (int i = 0; i < 2; i++) {
        s_state_free(&init[i]);
        s_state_free(&after[i]);
        s_state_free(&b[i]);
        zdist_worker_reply_release(&sr[i]);
        zdist_worker_client_destroy(&w[i]);
    }
    return s_failures ? 1 : 0;
}

/* A worker under a systemd watchdog shorter than the job's collective
   deadline refuses the job, naming both. */
static int
s_mwm_watchdog(const char *waddr)
{
    zdist_worker_client_t *w = s_worker(waddr);
    const char *job = "{\"name\": \"mwm-wd\", \"strategy\": {\"type\": \"multi_worker_mirrored\"},"
                      " \"model\": {\"name\": \"softmax_regression\"}, \"optimizer\": {\"type\": \"sgd\"},"
                      " \"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 256, \"dim\": 4,"
                      " \"classes\": 2}, \"global_batch_size\": 8}, \"steps\": 1}";
    char msg[2048];
    int st = s_start(w, job, 0, 2, NULL, 0, false, 0, NULL, msg, sizeof msg);
    CHECK(st == ZDIST_STATUS_INVALID_ARGUMENT && strstr(msg, "collective_timeout_ms 30000") &&
              strstr(msg, "watchdog interval (20000 ms"),
          "START_JOB under a 20 s watchdog: %s %s", zdist_status_name(st), msg);
    /* A deadline well under the watchdog is taken. */
    const char *ok = "{\"name\": \"mwm-wd\", \"strategy\": {\"type\": \"multi_worker_mirrored\","
                     " \"collective_timeout_ms\": 5000}, \"model\": {\"name\": \"softmax_regression\"},"
                     " \"optimizer\": {\"type\": \"sgd\"}, \"dataset\": {\"format\": \"synthetic\","
                     " \"synthetic\": {\"n\": 256, \"dim\": 4, \"classes\": 2}, \"global_batch_size\": 8},"
                     " \"steps\": 1}";
    st = s_start(w, ok, 0, 2, NULL, 0, false, 0, NULL, msg, sizeof msg);
    CHECK(st == ZDIST_STATUS_OK, "START_JOB with a 5 s deadline: %s %s", zdist_status_name(st), msg);
    s_stop(w, "mwm-wd", msg, sizeof msg);
    if (!s_failures)
        s_ok("under a 20 s watchdog: a 30 s collective deadline refused naming both, 5 s taken");
    zdist_worker_client_destroy(&w);
    return s_failures ? 1 : 0;
}

/* max_jobs WORKER PS0 PS1: the worker holds one job at most. */
static int
s_max_jobs(const char *waddr, const char *const *ps)
{
    zdist_worker_client_t *w = s_worker(waddr);
    char msg[MSG_MAX];
    char other[sizeof s_syn_job + 64];
    snprintf(other, sizeof other, "%s", s_syn_job);
    memcpy(strstr(other, "syn-ps"), "syn-px", 6);
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_start(w, s_syn_job, 0, 1, ps, 2, true, 0, NULL, msg, sizeof msg));
    EXPECT_STATUS(ZDIST_STATUS_RESOURCE_EXHAUSTED, "holds 1 jobs ('syn-ps'), its limit (zdist-worker --max-jobs 1)",
                  s_start(w, other, 0, 1, ps, 2, false, 0, NULL, msg, sizeof msg));
    printf("refused: %s\n", msg);
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_stop(w, "syn-ps", msg, sizeof msg));
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_start(w, other, 0, 1, ps, 2, false, 0, NULL, msg, sizeof msg));
    EXPECT_STATUS(ZDIST_STATUS_OK, "", s_stop(w, "syn-px", msg, sizeof msg));
    zdist_worker_client_destroy(&w);
    if (!s_failures)
        s_ok("--max-jobs 1: a second job refused naming the flag, started once the first stopped");
    return s_failures ? 1 : 0;
}

/* start WORKER JOB.json: one START_JOB, its answer printed. */
static int
s_start_file(const char *addr, const char *path)
{
    zdist_job_t job;
    zdist_error_t err = {0};
    if (zdist_job_load(path, &job, &err) < 0) {
        fprintf(stderr, "worker_driver: %s: %s\n", path, err.text);
        return 2;
    }
    zdist_worker_client_t *w = s_worker(addr);
    char msg[2048];
    int st = s_start_job(w, &job, 0, 1, NULL, 0, false, 0, NULL, msg, sizeof msg);
    printf("%s: %s\n", st < 0 ? "NO_REPLY" : zdist_status_name(st), msg);
    if (st == ZDIST_STATUS_OK)
        s_stop(w, job.name, msg, sizeof msg);
    zdist_job_release(&job);
    zdist_worker_client_destroy(&w);
    return st == ZDIST_STATUS_OK ? 0 : 3;
}

int
main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "sparse") == 0) {
        const char *ps[2] = {argv[3], argv[4]};
        return s_sparse(argv[2], ps, argv[5]);
    }
    if (argc >= 5 && strcmp(argv[1], "train") == 0) {
        const char *ps[2] = {argv[3], argv[4]};
        return s_train(argv[2], ps, argc > 5 ? argv[5] : NULL);
    }
    if (argc == 6 && strcmp(argv[1], "two") == 0) {
        const char *ps[2] = {argv[4], argv[5]};
        return s_two(argv[2], argv[3], ps);
    }
    if (argc == 5 && strcmp(argv[1], "unreachable") == 0)
        return s_unreachable(argv[2], argv[3], argv[4]);
    if (argc == 4 && strcmp(argv[1], "start") == 0)
        return s_start_file(argv[2], argv[3]);
    if (argc == 5 && strcmp(argv[1], "max_jobs") == 0) {
        const char *ps[2] = {argv[3], argv[4]};
        return s_max_jobs(argv[2], ps);
    }
    if (argc == 3 && strcmp(argv[1], "mwm_watchdog") == 0)
        return s_mwm_watchdog(argv[2]);
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "mwm") == 0)
        return s_mwm(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
    fprintf(stderr, "usage: worker_driver train WORKER PS0 PS1 [FMNIST_DIR] | two W0 W1 PS0 PS1 | "
                    "unreachable WORKER PS0 DEAD_ADDR | mwm W0 W1 [SVM_FILE]\n");
    return 2;
}
