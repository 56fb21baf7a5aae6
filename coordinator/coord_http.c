/* coord_http: the jobs' Prometheus families, from the runners' STATUS details. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "coord_http.h"
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
