/* cli_coord: the coordinator's address, STATUS calls and printing, shared by zdist submit, status and cancel. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_coord.h"
#include "zdist/auth.h"
#include "zdist/cluster.h"
#include "zdist/endpoint.h"
#include "zdist/sys.h"

/* --coordinator ADDR, else the chief of --cluster FILE / TF_CONFIG, as
   "tcp://host:port" in buf. Prints the error and returns CLI_EXIT_USAGE. */
static int
s_address(const char *sub, const char *addr, const char *cluster_file, char *buf, size_t size)
{
    zdist_error_t err = {0};
    if (addr) {
        if (zdist_endpoint_normalize(addr, buf, size, &err) < 0)
            return cli_usage_error(sub, "--coordinator: %s", err.text);
        return 0;
    }
    zdist_cluster_t *cluster = zdist_cluster_from_env_or_file(cluster_file, &err);
    if (!cluster)
        return cli_usage_error(sub, "%s; or pass --coordinator HOST:PORT", err.text);
    int rc = zdist_cluster_num_tasks(cluster, "chief") > 0 ? zdist_cluster_endpoint(cluster, "chief", 0, buf, size)
                                                           : -ENOENT;
    zdist_cluster_destroy(&cluster);
    if (rc < 0)
        return cli_usage_error(sub, "no chief task in %s; pass --coordinator HOST:PORT",
                               cluster_file ? cluster_file : "TF_CONFIG");
    return 0;
}

/* A client of the coordinator at endpoint; NULL after printing why. */
static zdist_coord_client_t *
s_connect(const char *sub, const char *endpoint)
{
    zdist_error_t err = {0};
    zdist_rpc_client_options_t o;
    zdist_rpc_client_options_default(&o);
    if (o.keys && !zdist_keys_name_at(o.keys, endpoint))
        o.server_name = "chief-0"; /* --coordinator HOST:PORT: the chief */
    if (!o.keys && strncmp(endpoint, "tcp://127.", 10) != 0 && strncmp(endpoint, "tcp://[::1]", 11) != 0)
        fprintf(stderr, "zdist %s: warning: talking to %s in plain text (no --keys): not encrypted, not "
                        "authenticated\n", sub, endpoint);
    zdist_coord_client_t *c = zdist_coord_client_new(endpoint, &o, &err);
    if (!c)
        fprintf(stderr, "zdist %s: %s\n", sub, err.text);
    return c;
}

int
cli_coord_getopt(int argc, char **argv, const struct option *longopts, cli_coord_options_t *o)
{
    for (;;) {
        int opt = getopt_long(argc, argv, "", longopts, NULL);
        if (opt == CLI_OPT_COORDINATOR)
            o->addr = optarg;
        else if (opt == CLI_OPT_CLUSTER)
            o->cluster = optarg;
        else
            return opt;
    }
}

int
cli_coord_one_operand(int argc, char **argv, const char *sub, const char *operand_name, const char *help,
                      cli_coord_options_t *conn, const char **ret_operand)
{
    static const struct option longopts[] = {
        CLI_COORD_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    int opt;
    optind = 1;
    while ((opt = cli_coord_getopt(argc, argv, longopts, conn)) != -1) {
        if (opt != 'h')
            return cli_usage_error(sub, "see --help");
        printf("usage: zdist %s %s " CLI_COORD_USAGE "\n%s", sub, operand_name, help);
        return CLI_EXIT_OK;
    }
    if (argc - optind != 1)
        return cli_usage_error(sub, "give one %s (zdist %s %s)", operand_name, sub, operand_name);
    *ret_operand = argv[optind];
    return -1;
}

zdist_coord_client_t *
cli_coord_open(const char *sub, const cli_coord_options_t *o, char *endpoint, size_t size, int *ret_exit)
{
    *ret_exit = s_address(sub, o->addr, o->cluster, endpoint, size);
    if (*ret_exit)
        return NULL;
    zdist_coord_client_t *c = s_connect(sub, endpoint);
    if (!c)
        *ret_exit = CLI_EXIT_FAILED;
    return c;
}

int
cli_coord_failure(const char *sub, zdist_coord_client_t *c, int rc, const zdist_error_t *err)
{
    if (rc == -ETIMEDOUT)
        fprintf(stderr, "zdist %s: coordinator %s: no answer (is zdist-coordinator running?)\n", sub,
                zdist_coord_client_endpoint(c));
    else if (rc == -EINTR)
        fprintf(stderr, "zdist %s: interrupted\n", sub);
    else if (rc == -EPROTO)
        fprintf(stderr, "zdist %s: coordinator %s: its reply does not decode: %s\n", sub,
                zdist_coord_client_endpoint(c), err->text);
    else
        fprintf(stderr, "zdist %s: coordinator %s: %s: %s\n", sub, zdist_coord_client_endpoint(c),
                zdist_status_name(zdist_status_from_errno(rc)), err->text);
    return rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
}

/* A job's status as the one JSON object of cli_coord_status: its detail
   with the job's fields beside; NULL when out of memory. */
static json_t *
s_job_json(const zdist_coord_job_t *j)
{
    json_t *detail = json_loads(j->detail_json, 0, NULL);
    json_t *out = json_is_object(detail) ? detail : json_object();
    if (out != detail)
        json_decref(detail);
    if (!out)
        return NULL;
    json_object_set_new(out, "job_id", json_string(j->job_id));
    json_object_set_new(out, "name", json_string(j->name));
    json_object_set_new(out, "state", json_string(j->state));
    json_object_set_new(out, "step", json_integer(j->step));
    json_object_set_new(out, "steps", json_integer(j->steps));
    json_object_set_new(out, "error", json_string(j->error));
    if (!json_object_get(out, "metrics"))
        json_object_set_new(out, "metrics", json_object());
    return out;
}

json_t *
cli_coord_status(const char *sub, zdist_coord_client_t *c, const char *job_id, int64_t timeout_ms, int *ret_exit)
{
    zdist_coord_job_t job;
    zdist_error_t err = {0};
    int rc = zdist_coord_client_status(c, job_id, timeout_ms, &job, &err);
    if (rc < 0) {
        *ret_exit = cli_coord_failure(sub, c, rc, &err);
        return NULL;
    }
    json_t *out = s_job_json(&job);
    zdist_coord_job_release(&job);
    *ret_exit = out ? CLI_EXIT_OK : CLI_EXIT_FAILED;
    if (!out)
        fprintf(stderr, "zdist %s: out of memory\n", sub);
    return out;
}

void
cli_coord_progress(json_t *st, bool tty, cli_coord_progress_t *p)
{
    int64_t step = json_integer_value(json_object_get(st, "step"));
    int64_t steps = json_integer_value(json_object_get(st, "steps"));
    json_t *m = json_object_get(st, "metrics");
    json_t *loss_j = json_object_get(m, "loss");
    double eps = json_number_value(json_object_get(m, "examples_per_sec"));
    const char *state = json_string_value(json_object_get(st, "state"));
    /* Nothing to say before the job runs, knows its steps and has done
       one, nor once it ended (the caller prints the final status). */
    if (!state || strcmp(state, "running") != 0 || steps <= 0 || step <= 0)
        return;
    int64_t now = zdist_clock_now_ms();
    if (!p->running_ms)
        p->running_ms = now;
    if (p->first_step < 0 || step < p->first_step)
        p->first_step = step, p->running_ms = now; /* a resumed job's ETA counts from where it resumed */
    double el = (double)(now - p->running_ms) / 1000.0;
    int64_t done = step - p->first_step;
    char loss[32], eta[32];
    if (json_is_number(loss_j))
        snprintf(loss, sizeof loss, "%.4f", json_number_value(loss_j));
    else
        snprintf(loss, sizeof loss, "-");
    if (done > 0 && steps >= step)
        snprintf(eta, sizeof eta, "%.0fs", el * (double)(steps - step) / (double)done);
    else
        snprintf(eta, sizeof eta, "-");
    if (tty) {
        int width = 30, fill = (int)(width * step / steps);
        char bar[64];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = '\0';
        fprintf(stderr, "\r[%s] %lld/%lld loss %s %.0f ex/s ETA %s %s   ", bar, (long long)step, (long long)steps, loss,
                eps, eta, state);
        fflush(stderr);
    } else if (!p->printed || now - p->last_ms >= 5000 || (step - p->last_step) * 10 >= steps) {
        printf("step %lld/%lld loss %s examples/s %.0f eta %s (%s)\n", (long long)step, (long long)steps, loss, eps,
               eta, state);
        fflush(stdout);
        p->printed = true;
        p->last_ms = now;
        p->last_step = step;
    }
}

/* What the follow hooks print with. */
typedef struct {
    const char *sub;
    zdist_coord_client_t *c;
    bool show, tty;
    cli_coord_progress_t prog;
} s_follow_t;

static void
s_on_status(const zdist_coord_job_t *job, void *arg)
{
    s_follow_t *f = arg;
    json_t *st = f->show ? s_job_json(job) : NULL;
    if (st)
        cli_coord_progress(st, f->tty, &f->prog);
    json_decref(st);
}

static void
s_on_lost(const char *why, void *arg)
{
    s_follow_t *f = arg;
    if (!f->tty)
        fprintf(stderr, "zdist %s: coordinator %s: %s; waiting for it (up to 3 minutes)\n", f->sub,
                zdist_coord_client_endpoint(f->c), why);
}

json_t *
cli_coord_follow(const char *sub, zdist_coord_client_t *c, const char *job_id, bool show, bool tty, int *ret_exit)
{
    s_follow_t f = {.sub = sub, .c = c, .show = show, .tty = tty, .prog = {.t0_ms = zdist_clock_now_ms(), .first_step = -1}};
    zdist_coord_follow_options_t opts;
    zdist_coord_follow_options_default(&opts);
    opts.on_status = s_on_status;
    opts.on_lost = s_on_lost;
    opts.arg = &f;
    zdist_coord_job_t last;
    zdist_error_t err = {0};
    int rc = zdist_coord_client_follow(c, job_id, &opts, &last, &err);
    json_t *status = NULL;
    if (rc == 0 || (rc == -ETIMEDOUT && *last.job_id))
        status = s_job_json(&last);
    if (rc == 0)
        *ret_exit = strcmp(last.state, "done") == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
    else if (rc == -ETIMEDOUT)
        fprintf(stderr, "zdist %s: coordinator %s: unreachable for 3 minutes, giving up\n", sub,
                zdist_coord_client_endpoint(c));
    if (rc < 0)
        *ret_exit = rc == -ETIMEDOUT ? CLI_EXIT_FAILED : cli_coord_failure(sub, c, rc, &err);
    zdist_coord_job_release(&last);
    return status;
}

static double
s_num(json_t *o, const char *key, double dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* A worker's state: "running (job J)", "idle", "lost since HH:MM:SS (N s
   ago): why", "rejoining (lost since ...)", "starting". */
static void
s_print_state(FILE *out, json_t *w)
{
    const char *state = json_string_value(json_object_get(w, "state"));
    if (!state) /* a status from before the states */
        state = json_is_true(json_object_get(w, "up")) ? "up" : "down";
    fputs(state, out);
    const char *job = json_string_value(json_object_get(w, "job"));
    if (job)
        fprintf(out, " (job %s)", job);
    if (json_object_get(w, "lost_since")) {
        time_t t = (time_t)s_num(w, "lost_since", 0);
        struct tm tm;
        char when[32] = "?";
        if (localtime_r(&t, &tm))
            strftime(when, sizeof when, "%H:%M:%S", &tm);
        const char *why = json_string_value(json_object_get(w, "lost_why"));
        fprintf(out, " (lost since %s, %.1f s ago%s%s)", when, s_num(w, "lost_ms_ago", 0) / 1000.0,
                why && *why ? ": " : "", why && *why ? why : "");
    }
}

void
cli_coord_print(FILE *out, json_t *st, bool tasks)
{
    json_t *m = json_object_get(st, "metrics");
    fprintf(out, "job %s (%s): %s, step %lld/%lld", json_string_value(json_object_get(st, "job_id")),
            json_string_value(json_object_get(st, "name")), json_string_value(json_object_get(st, "state")),
            (long long)json_integer_value(json_object_get(st, "step")),
            (long long)json_integer_value(json_object_get(st, "steps")));
    if (json_object_get(m, "loss"))
        fprintf(out, ", loss %.4f", s_num(m, "loss", 0));
    if (json_object_get(m, "examples_per_sec"))
        fprintf(out, ", %.0f examples/s", s_num(m, "examples_per_sec", 0));
    if (json_object_get(m, "test_accuracy"))
        fprintf(out, ", test accuracy %.4f", s_num(m, "test_accuracy", 0));
    if (json_object_get(m, "test_auc"))
        fprintf(out, ", test AUC %.4f, test loss %.4f", s_num(m, "test_auc", 0), s_num(m, "test_loss", NAN));
    fputc('\n', out);
    const char *e = json_string_value(json_object_get(st, "error"));
    if (e && *e)
        fprintf(out, "  error: %s\n", e);
    const char *waiting = json_string_value(json_object_get(st, "waiting"));
    if (waiting && *waiting)
        fprintf(out, "  queued: %s\n", waiting);
    json_t *evals = json_object_get(st, "evaluations"); /* zdist-worker --evaluator's */
    size_t ne = json_array_size(evals), i0 = ne > 10 ? ne - 10 : 0;
    if (ne > 0)
        fprintf(out, "  evaluations by the sidecar evaluator: %zu%s\n", ne, i0 ? " (the last 10 shown)" : "");
    for (size_t k = i0; k < ne; k++) {
        json_t *ev = json_array_get(evals, k);
        fprintf(out, "    eval_step %lld: test_loss %.4f", (long long)json_integer_value(json_object_get(ev, "eval_step")),
                s_num(ev, "test_loss", NAN));
        if (json_is_number(json_object_get(ev, "test_accuracy")))
            fprintf(out, ", test_accuracy %.4f", s_num(ev, "test_accuracy", 0));
        if (json_is_number(json_object_get(ev, "test_auc")))
            fprintf(out, ", test_auc %.4f", s_num(ev, "test_auc", 0));
        fputc('\n', out);
    }
    const char *rf = json_string_value(json_object_get(st, "ring_reformed_because"));
    if (rf && *rf && tasks)
        fprintf(out, "  ring last re-formed: %s\n", rf);
    if (json_object_get(st, "min_workers") && tasks) /* an elastic ring */
        fprintf(out, "  ring: %lld workers (min_workers %lld, max_workers %lld)\n",
                (long long)json_integer_value(json_object_get(st, "ring_size")),
                (long long)json_integer_value(json_object_get(st, "min_workers")),
                (long long)json_integer_value(json_object_get(st, "max_workers")));
    if (!tasks)
        return;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(st, "workers"), i, w) {
        if (json_object_get(w, "in_ring")) { /* multi_worker_mirrored */
            fprintf(out, "  worker %lld %s: ", (long long)json_integer_value(json_object_get(w, "task")),
                    json_string_value(json_object_get(w, "endpoint")));
            s_print_state(out, w);
            fprintf(out, ", ");
            if (json_is_true(json_object_get(w, "in_ring")))
                fprintf(out, "rank %lld of the ring at %s", (long long)json_integer_value(json_object_get(w, "rank")),
                        json_string_value(json_object_get(w, "ring_endpoint")));
            else
                fprintf(out, "not in the ring");
            fprintf(out, ", %lld restarts\n", (long long)json_integer_value(json_object_get(w, "restarts")));
            continue;
        }
        long long ago = (long long)json_integer_value(json_object_get(w, "last_heartbeat_ms_ago"));
        char heard[64];
        if (ago < 0)
            snprintf(heard, sizeof heard, "never");
        else
            snprintf(heard, sizeof heard, "%lld ms ago", ago);
        fprintf(out, "  worker %lld %s%s: ", (long long)json_integer_value(json_object_get(w, "task")),
                json_string_value(json_object_get(w, "endpoint")),
                json_is_true(json_object_get(w, "joined")) ? " (joined)" : "");
        s_print_state(out, w);
        if (json_object_get(w, "step_time_p50_s"))
            fprintf(out, ", step time p50 %.3g ms p99 %.3g ms over the last minute%s",
                    1000 * s_num(w, "step_time_p50_s", 0), 1000 * s_num(w, "step_time_p99_s", 0),
                    json_is_true(json_object_get(w, "straggler")) ? " (STRAGGLER: >= 2x the median)" : "");
        fprintf(out, ", %lld closures done, %lld in flight (oldest %lld ms), last heard %s, %lld rejoins\n",
                (long long)json_integer_value(json_object_get(w, "closures_done")),
                (long long)json_integer_value(json_object_get(w, "in_flight")),
                (long long)json_integer_value(json_object_get(w, "in_flight_ms")), heard,
                (long long)json_integer_value(json_object_get(w, "restarts")));
    }
    json_array_foreach(json_object_get(st, "membership_history"), i, w) /* elastic workers */
        fprintf(out, "  membership: worker %lld %s %s at %.3f\n", (long long)json_integer_value(json_object_get(w, "task")),
                json_string_value(json_object_get(w, "endpoint")), json_string_value(json_object_get(w, "event")),
                s_num(w, "time", 0));
    json_array_foreach(json_object_get(st, "ps"), i, w) {
        fprintf(out, "  ps %lld %s: %lld bytes held, %lld requests",
                (long long)json_integer_value(json_object_get(w, "task")),
                json_string_value(json_object_get(w, "endpoint")),
                (long long)json_integer_value(json_object_get(w, "bytes")),
                (long long)json_integer_value(json_object_get(w, "requests")));
        size_t k;
        json_t *pm;
        bool first = true;
        json_array_foreach(json_object_get(w, "methods"), k, pm) {
            if (s_num(pm, "requests", 0) <= 0)
                continue;
            fprintf(out, "%s %s %.1f/s p99 %.3g ms", first ? ";" : ",", json_string_value(json_object_get(pm, "method")),
                    s_num(pm, "per_s", 0), s_num(pm, "p99_us", 0) / 1000.0);
            first = false;
        }
        fputc('\n', out);
        json_array_foreach(json_object_get(w, "embeddings"), k, pm)
            fprintf(out, "    embedding %s: %.0f rows (%.0f admitted, %.0f refused, %.0f evicted, %.0f pending), %.0f bytes\n",
                    json_string_value(json_object_get(pm, "table")), s_num(pm, "rows", 0), s_num(pm, "admitted", 0),
                    s_num(pm, "refused", 0), s_num(pm, "evicted", 0), s_num(pm, "pending", 0), s_num(pm, "bytes", 0));
    }
}
