/* coord_http: what zdist-coordinator serves over --http — the dashboard, its JSON (/api/status), and /metrics
   with the jobs' Prometheus families from the runners' STATUS details. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord_http.h"
#include "zdist/coord_service.h"
#include "zdist/prom.h"

static double
s_num(json_t *o, const char *key, double dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* A job-level gauge or counter: value from fn, skipped when it is NaN. */
typedef double (*s_job_value_fn)(const coord_http_job_t *j);

static double
s_step(const coord_http_job_t *j)
{
    return (double) j->step;
}
static double
s_steps(const coord_http_job_t *j)
{
    return (double) j->steps;
}
static double
s_loss(const coord_http_job_t *j)
{
    return s_num(json_object_get(j->detail, "metrics"), "loss", NAN);
}
static double
s_examples(const coord_http_job_t *j)
{
    return s_num(json_object_get(j->detail, "metrics"), "examples", NAN);
}
static double
s_eps(const coord_http_job_t *j)
{
    return s_num(json_object_get(j->detail, "metrics"), "examples_per_sec", NAN);
}
static double
s_acc(const coord_http_job_t *j)
{
    return s_num(json_object_get(j->detail, "metrics"), "test_accuracy", NAN);
}
static double
s_test_loss(const coord_http_job_t *j)
{
    return s_num(json_object_get(j->detail, "metrics"), "test_loss", NAN);
}
static double
s_auc(const coord_http_job_t *j)
{
    return s_num(json_object_get(j->detail, "metrics"), "test_auc", NAN);
}
static double
s_ckpt(const coord_http_job_t *j)
{
    return s_num(j->detail, "checkpoint_step", NAN);
}
static double
s_recov(const coord_http_job_t *j)
{
    return s_num(j->detail, "psd_recoveries", NAN);
}

static void
s_job_family(FILE *out, const coord_http_job_t *jobs, size_t n, const char *name, const char *type,
             const char *help, s_job_value_fn fn)
{
    bool header = false;
    for (size_t i = 0; i < n; i++) {
        double v = fn(&jobs[i]);
        if (isnan(v))
            continue;
        if (!header)
            zdist_prom_family(out, name, type, help);
        header = true;
        zdist_prom_sample(out, name, v, "job_id", jobs[i].id, "name", jobs[i].name, NULL);
    }
}

/* Per task of a kind ("workers" or "ps"): the member `key` of each. */
static void
s_task_family(FILE *out, const coord_http_job_t *jobs, size_t n, const char *kind, const char *label,
              const char *name, const char *type, const char *help, const char *key)
{
    bool header = false;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        json_t *t;
        json_array_foreach(json_object_get(jobs[i].detail, kind), k, t)
        {
            json_t *v = json_object_get(t, key);
            if (!json_is_number(v) && !json_is_boolean(v))
                continue;
            if (!header)
                zdist_prom_family(out, name, type, help);
            header = true;
            char task[32];
            snprintf(task, sizeof task, "%lld", (long long) json_integer_value(json_object_get(t, "task")));
            zdist_prom_sample(out, name, json_is_boolean(v) ? json_is_true(v) : json_number_value(v),
                              "job_id", jobs[i].id, label, task, NULL);
        }
    }
}

void
coord_http_jobs_metrics(FILE *out, const coord_http_job_t *jobs, size_t n)
{
    s_job_family(out, jobs, n, "zdist_coordinator_job_step", "gauge",
                 "The job's current step (goes back to a checkpoint's step after a recovery).", s_step);
    s_job_family(out, jobs, n, "zdist_coordinator_job_steps", "gauge",
                 "The job's planned steps (0 while unknown).", s_steps);
    s_job_family(out, jobs, n, "zdist_coordinator_job_loss", "gauge",
                 "Mean training loss of the latest window.", s_loss);
    s_job_family(out, jobs, n, "zdist_coordinator_job_examples_total", "counter",
                 "Training examples the job's closures consumed (since the coordinator started it).",
                 s_examples);
    s_job_family(out, jobs, n, "zdist_coordinator_job_examples_per_second", "gauge",
                 "Training throughput of the latest window.", s_eps);
    s_job_family(out, jobs, n, "zdist_coordinator_job_test_accuracy", "gauge",
                 "Accuracy of the final evaluation.", s_acc);
    s_job_family(out, jobs, n, "zdist_coordinator_job_test_loss", "gauge",
                 "Mean loss over the test split of the final evaluation (log loss for a binary classifier).",
                 s_test_loss);
    s_job_family(out, jobs, n, "zdist_coordinator_job_test_auc", "gauge",
                 "Exact ROC AUC over the whole test split of the final evaluation (binary classifiers).", s_auc);
    s_job_family(out, jobs, n, "zdist_coordinator_job_checkpoint_step", "gauge",
                 "Step of the job's newest complete checkpoint (-1 none).", s_ckpt);
    s_job_family(out, jobs, n, "zdist_coordinator_job_psd_recoveries_total", "counter",
                 "Times the job restored every ps from a checkpoint after losing one.", s_recov);
    s_task_family(out, jobs, n, "workers", "worker", "zdist_coordinator_worker_up", "gauge",
                  "1 when the worker takes the job's closures (or is idle after it), 0 when lost.", "up");
    s_task_family(out, jobs, n, "workers", "worker", "zdist_coordinator_worker_restarts_total", "counter",
                  "Times the worker rejoined the job after being lost.", "restarts");
    s_task_family(out, jobs, n, "workers", "worker", "zdist_coordinator_worker_closures_total", "counter",
                  "Closures (RUN_STEPS) the worker completed for the job.", "closures_done");
    s_task_family(out, jobs, n, "workers", "worker", "zdist_coordinator_worker_straggler", "gauge",
                  "1 when the worker's median step time of the last minute is >= 2x the workers' median.",
                  "straggler");
    s_task_family(out, jobs, n, "ps", "ps", "zdist_coordinator_ps_held_bytes", "gauge",
                  "Bytes of values and optimizer slots the ps task holds.", "bytes");
    /* Step-time histograms, with the bounds of zdist_prom_histogram_init_seconds. */
    zdist_prom_histogram_t h;
    zdist_prom_histogram_init_seconds(&h);
    bool header = false;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        json_t *w;
        json_array_foreach(json_object_get(jobs[i].detail, "workers"), k, w)
        {
            json_t *hs = json_object_get(w, "step_seconds");
            json_t *counts = json_object_get(hs, "counts");
            if (!json_is_array(counts) || json_array_size(counts) != (size_t) h.n + 1)
                continue;
            for (int b = 0; b <= h.n; b++)
                h.counts[b] = (uint64_t) json_integer_value(json_array_get(counts, (size_t) b));
            h.sum = s_num(hs, "sum", 0);
            h.count = (uint64_t) json_integer_value(json_object_get(hs, "count"));
            if (!header)
                zdist_prom_family(
                    out, "zdist_coordinator_worker_step_seconds", "histogram",
                    "Step time on each worker as the coordinator sees it (a closure's time on the "
                    "worker over its steps).");
            header = true;
            char task[32];
            snprintf(task, sizeof task, "%lld", (long long) json_integer_value(json_object_get(w, "task")));
            const char *labels[4] = {"job_id", jobs[i].id, "worker", task};
            zdist_prom_histogram_write(out, "zdist_coordinator_worker_step_seconds", labels, 2, &h);
        }
    }
    /* Per ps and method: request rate and p99 latency. */
    static const struct {
        const char *name, *help, *key;
        double scale;
    } pm[] = {
        {"zdist_coordinator_ps_requests_per_second",
         "Requests per second to the ps task, by method (between the "
         "coordinator's last two looks).",
         "per_s", 1},
        {"zdist_coordinator_ps_latency_p99_seconds",
         "99th percentile of the ps task's handling time, by method.", "p99_us", 1e-6},
    };
    for (size_t f = 0; f < sizeof pm / sizeof pm[0]; f++) {
        header = false;
        for (size_t i = 0; i < n; i++) {
            size_t k;
            json_t *p;
            json_array_foreach(json_object_get(jobs[i].detail, "ps"), k, p)
            {
                size_t q;
                json_t *m;
                json_array_foreach(json_object_get(p, "methods"), q, m)
                {
                    const char *method = json_string_value(json_object_get(m, "method"));
                    if (!method)
                        continue;
                    if (!header)
                        zdist_prom_family(out, pm[f].name, "gauge", pm[f].help);
                    header = true;
                    char task[32];
                    snprintf(task, sizeof task, "%lld",
                             (long long) json_integer_value(json_object_get(p, "task")));
                    zdist_prom_sample(out, pm[f].name, s_num(m, pm[f].key, 0) * pm[f].scale, "job_id",
                                      jobs[i].id, "ps", task, "method", method, NULL);
                }
            }
        }
    }
}

/* ---- the pages ---- */

#define S_CURVE_POINTS 2000 /* loss points per job sent to the dashboard */

/* The jobs the dashboard and /metrics show: running and queued ones, and
   the newest S_SHOWN of the rest, newest first. */
#define S_SHOWN 10
static size_t
s_shown_jobs(coord_http_view_t *v, coord_row_t **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < v->table->n; i++)
        if (!zdist_coord_state_final(v->table->rows[i]->state) && n < max)
            out[n++] = v->table->rows[i];
    for (size_t i = 0; i < v->table->n; i++)
        if (zdist_coord_state_final(v->table->rows[i]->state) && n < max)
            out[n++] = v->table->rows[i];
    /* newest first */
    for (size_t a = 1; a < n; a++)
        for (size_t b = a; b > 0 && out[b - 1]->seq < out[b]->seq; b--) {
            coord_row_t *t = out[b];
            out[b] = out[b - 1];
            out[b - 1] = t;
        }
    size_t keep = 0, finals = 0;
    for (size_t i = 0; i < n; i++) {
        bool final = zdist_coord_state_final(out[i]->state);
        if (final && finals >= S_SHOWN)
            continue;
        finals += final;
        out[keep++] = out[i];
    }
    return keep;
}

/* A metrics line as a point of the loss curve, [step, loss]. */
static json_t *
s_pick_point(json_t *line)
{
    json_t *st = json_object_get(line, "step"), *lo = json_object_get(line, "loss");
    if (!json_is_integer(st) || !json_is_number(lo))
        return NULL;
    return json_pack("[I, f]", json_integer_value(st), json_number_value(lo));
}

/* A job's loss curve from its metrics.jsonl: [[step, loss], ...], the last
   S_CURVE_POINTS. */
static json_t *
s_curve(coord_http_view_t *v, coord_row_t *j)
{
    return coord_table_jsonl(v->table, j, "metrics.jsonl", S_CURVE_POINTS, s_pick_point);
}

static json_t *
s_api_status(coord_http_view_t *v)
{
    coord_row_t *shown[64];
    size_t n = s_shown_jobs(v, shown, 64);
    json_t *jobs = json_array();
    for (size_t i = 0; i < n; i++) {
        coord_row_t *j = shown[i];
        json_t *detail = j->detail ? json_loads(j->detail, 0, NULL) : NULL;
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:o, s:o, s:o}", "job_id", j->id, "name", j->name,
                              "state", j->state, "step", (json_int_t)j->step, "steps", (json_int_t)j->steps, "error",
                              j->error ? j->error : "", "detail", detail ? detail : json_object(), "loss_curve",
                              s_curve(v, j), "evaluations", coord_table_evaluations(v->table, j));
        json_array_append_new(jobs, o);
    }
    json_t *events = coord_events_json(v->events);
    json_t *members = json_array();
    for (int i = 0; i < v->num_workers && v->workers; i++)
        json_array_append_new(members, json_pack("{s:i, s:s, s:b, s:s}", "task", i, "endpoint", v->workers[i],
                                                 "joined", v->joined[i], "state", v->left[i] ? "left" : "member"));
    return json_pack("{s:f, s:s, s:i, s:i, s:o, s:o, s:o}", "time", coord_events_now_s(), "endpoint",
                     zdist_rpc_server_endpoint(v->rpc), "num_workers", v->num_workers, "num_ps", v->num_ps, "jobs",
                     jobs, "events", events, "members", members);
}

static void
s_metrics(void *arg, FILE *f)
{
    coord_http_view_t *v = arg;
    zdist_rpc_server_write_metrics(v->rpc, f, "zdist_coordinator");
    static const char *const states[] = {"queued", "running", "done", "failed", "cancelled"};
    zdist_prom_family(f, "zdist_coordinator_jobs", "gauge", "Jobs in the coordinator's table, by state.");
    for (size_t k = 0; k < sizeof states / sizeof states[0]; k++) {
        int count = 0;
        for (size_t i = 0; i < v->table->n; i++)
            count += strcmp(v->table->rows[i]->state, states[k]) == 0;
        zdist_prom_sample(f, "zdist_coordinator_jobs", count, "state", states[k], NULL);
    }
    coord_row_t *shown[64];
    size_t n = s_shown_jobs(v, shown, 64);
    coord_http_job_t hj[64] = {{0}};
    for (size_t i = 0; i < n; i++)
        hj[i] = (coord_http_job_t){shown[i]->id, shown[i]->name, shown[i]->state, shown[i]->step, shown[i]->steps,
                                  shown[i]->detail ? json_loads(shown[i]->detail, 0, NULL) : NULL};
    coord_http_jobs_metrics(f, hj, n);
    for (size_t i = 0; i < n; i++)
        json_decref(hj[i].detail);
}

void
coord_http_handle(void *arg, const char *path, zdist_http_reply_t *reply)
{
    coord_http_view_t *v = arg;
    if (strcmp(path, "/metrics") == 0) {
        zdist_http_reply_metrics(reply, s_metrics, v);
    } else if (strcmp(path, "/api/status") == 0) {
        json_t *st = s_api_status(v);
        reply->body = st ? json_dumps(st, JSON_COMPACT) : NULL;
        json_decref(st);
        reply->len = reply->body ? strlen(reply->body) : 0;
        reply->status = reply->body ? 200 : 500;
        reply->content_type = "application/json";
    } else if (strcmp(path, "/") == 0 || strcmp(path, "/index.html") == 0) {
        reply->body = strdup(coord_dashboard_html);
        reply->len = reply->body ? strlen(reply->body) : 0;
        reply->status = reply->body ? 200 : 500;
        reply->content_type = "text/html; charset=utf-8";
    } else {
        reply->status = 404;
        reply->body = strdup("not found: / (the dashboard), /api/status, /metrics\n");
        reply->len = reply->body ? strlen(reply->body) : 0;
    }
}
