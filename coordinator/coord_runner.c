/* coord_runner: a job from start to end — variables, closures, checkpoints, psd recovery, evaluation, metrics. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coord_run.h"
#include "zdist/coordinator.h"
#include "zdist/file.h"
#include "zdist/ps_client.h"
#include "zdist/sys.h"


void
coord_runner_config_destroy(coord_runner_config_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->base_dir);
    coord_job_release(&(*self_p)->job);
    free(*self_p);
    *self_p = NULL;
}

/* ---- status ---- */

/* Requests of `method` in an earlier s_ps_stats list; -1 when absent. */
static int64_t
s_prev_requests(json_t *prev, const char *method)
{
    size_t k;
    json_t *m;
    json_array_foreach(prev, k, m) {
        if (strcmp(json_string_value(json_object_get(m, "method")), method) == 0)
            return json_integer_value(json_object_get(m, "requests"));
    }
    return -1;
}

static void
s_ps_stats(coord_run_t *r)
{
    int64_t now = zdist_clock_now_ms();
    for (int i = 0; i < r->cfg->num_ps; i++) {
        zdist_ps_stats_t *st = NULL;
        if (zdist_ps_client_stats(r->ps[i], &st, NULL) == 0) {
            uint64_t req = 0;
            json_t *methods = json_array();
            double dt = r->ps_stats_ms[i] ? (double)(now - r->ps_stats_ms[i]) / 1000.0 : 0;
            for (size_t m = 0; m < st->nmethods; m++) {
                const zdist_ps_method_stats_t *ms = &st->methods[m];
                req += ms->requests;
                if (strcmp(ms->name, "stats") == 0)
                    continue; /* the coordinator's own polling is not the job's traffic */
                int64_t prev = s_prev_requests(r->ps_methods[i], ms->name);
                /* Between the last two looks; at the first, over the psd's uptime. */
                double per_s = dt > 0 && prev >= 0 && (int64_t)ms->requests >= prev
                                   ? (double)((int64_t)ms->requests - prev) / dt
                               : st->uptime_ms > 0 ? (double)ms->requests / ((double)st->uptime_ms / 1000.0)
                                                   : 0;
                json_array_append_new(methods, json_pack("{s:s, s:I, s:f, s:I, s:I, s:I}", "method", ms->name,
                                                         "requests", (json_int_t)ms->requests, "per_s", per_s,
                                                         "p50_us", (json_int_t)ms->p50_us, "p99_us",
                                                         (json_int_t)ms->p99_us, "errors", (json_int_t)ms->errors));
            }
            json_decref(r->ps_methods[i]);
            r->ps_methods[i] = methods;
            r->ps_stats_ms[i] = now;
            r->ps_bytes[i] = st->value_bytes + st->slot_bytes;
            r->ps_requests[i] = req;
            zdist_ps_stats_destroy(&st);
        }
    }
}

/* Seconds since the epoch, for a time an operator reads. */
static double
s_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p50 and p99 of worker i's step times of the last minute; false without any. */
static bool
s_step_percentiles(coord_run_t *r, int i, int64_t now, double *p50, double *p99, int *count)
{
    coord_steptime_t *st = &r->steptime[i];
    static double buf[COORD_STEP_SAMPLES]; /* the runner's thread only */
    int n = 0;
    for (int k = 0; k < st->n; k++) {
        int at = (st->head - 1 - k + COORD_STEP_SAMPLES) % COORD_STEP_SAMPLES;
        if (now - st->t_ms[at] > 60000)
            break;
        buf[n++] = st->sec[at];
    }
    *count = n;
    if (n == 0)
        return false;
    qsort(buf, (size_t)n, sizeof buf[0], s_cmp_double);
    *p50 = buf[(int)ceil(0.50 * n) - 1];
    *p99 = buf[(int)ceil(0.99 * n) - 1];
    return true;
}

static json_t *
s_histogram_json(const zdist_prom_histogram_t *h)
{
    json_t *counts = json_array();
    for (int b = 0; b <= h->n; b++)
        json_array_append_new(counts, json_integer((json_int_t)h->counts[b]));
    return json_pack("{s:o, s:f, s:I}", "counts", counts, "sum", h->sum, "count", (json_int_t)h->count);
}

bool
coord_run_step_json(coord_run_t *r, int i, int64_t now, json_t *w, double *p50)
{
    double p50_, p99;
    int count;
    bool has = s_step_percentiles(r, i, now, &p50_, &p99, &count);
    if (has) {
        json_object_set_new(w, "step_time_p50_s", json_real(p50_));
        json_object_set_new(w, "step_time_p99_s", json_real(p99));
        json_object_set_new(w, "step_time_samples", json_integer(count));
        if (p50)
            *p50 = p50_;
    }
    json_object_set_new(w, "step_seconds", s_histogram_json(&r->steptime[i].hist));
    return has;
}

void
coord_run_lost_json(json_t *w, int64_t now, int64_t lost_since_ms, const char *why)
{
    json_object_set_new(w, "lost_ms_ago", json_integer(now - lost_since_ms));
    json_object_set_new(w, "lost_since", json_real(s_wall_s() - (double)(now - lost_since_ms) / 1000.0));
    json_object_set_new(w, "lost_why", json_string(why ? why : ""));
}

/* The workers of a parameter_server job: state (running, idle, lost,
   rejoining, starting), step-time p50/p99 of the last minute, straggler. */
static void
s_ps_workers_json(coord_run_t *r, json_t *workers, int64_t now)
{
    size_t nw = r->coord ? zdist_coordinator_num_workers(r->coord) : 0;
    if (nw > COORD_MAX_TASKS)
        nw = COORD_MAX_TASKS;
    double p50[COORD_MAX_TASKS], p99[COORD_MAX_TASKS], sorted[COORD_MAX_TASKS];
    int count[COORD_MAX_TASKS], nsorted = 0;
    bool has[COORD_MAX_TASKS];
    for (size_t i = 0; i < nw; i++) {
        has[i] = s_step_percentiles(r, (int)i, now, &p50[i], &p99[i], &count[i]);
        if (has[i])
            sorted[nsorted++] = p50[i];
    }
    /* The lower median: with two workers, the faster one is the yardstick. */
    qsort(sorted, (size_t)nsorted, sizeof sorted[0], s_cmp_double);
    double median = nsorted ? sorted[(nsorted - 1) / 2] : 0;
    bool final = strcmp(r->state, "running") != 0;
    for (size_t i = 0; i < nw; i++) {
        zdist_coordinator_worker_info_t wi;
        if (zdist_coordinator_worker_info(r->coord, i, &wi) < 0)
            continue;
        const char *state;
        if (wi.lost_since_ms && !wi.up)
            state = wi.rejoining ? "rejoining" : "lost";
        else if (final)
            state = "idle"; /* the job ended and STOP_JOB went out: it holds nothing */
        else if (wi.up)
            state = "running";
        else
            state = "starting";
        bool up = strcmp(state, "running") == 0 || strcmp(state, "idle") == 0;
        json_t *w = json_pack("{s:i, s:s, s:s, s:b, s:I, s:i, s:I, s:I, s:i}", "task", (int)i, "endpoint",
                              wi.endpoint, "state", state, "up", up, "closures_done",
                              (json_int_t)(wi.closures_done + r->worker_closures[i]), "in_flight", wi.in_flight,
                              "in_flight_ms", (json_int_t)wi.oldest_in_flight_ms, "last_heartbeat_ms_ago",
                              (json_int_t)(wi.last_heard_ms ? now - wi.last_heard_ms : -1), "restarts",
                              (int)(wi.restarts + r->worker_restarts[i]));
        if (!w)
            continue;
        if (strcmp(state, "running") == 0)
            json_object_set_new(w, "job", json_string(r->cfg->job_id));
        if (wi.lost_since_ms && !wi.up)
            coord_run_lost_json(w, now, wi.lost_since_ms, wi.lost_why);
        coord_run_step_json(r, (int)i, now, w, NULL);
        json_object_set_new(w, "straggler", json_boolean(has[i] && nsorted >= 2 && p50[i] >= 2 * median));
        json_array_append_new(workers, w);
    }
}

static void
s_status_as(coord_run_t *r, bool force, const char *kind)
{
    int64_t now = zdist_clock_now_ms();
    if (!force && now - r->last_status_ms < 250)
        return;
    r->last_status_ms = now;
    if (now - r->last_stats_ms > 2000 || force) {
        r->last_stats_ms = now;
        s_ps_stats(r);
    }
    json_t *metrics = json_object();
    if (!isnan(r->loss))
        json_object_set_new(metrics, "loss", json_real(r->loss));
    json_object_set_new(metrics, "examples_per_sec", json_real(r->ex_per_s));
    json_object_set_new(metrics, "examples", json_integer(r->examples_total));
    if (r->evaluated) {
        json_object_set_new(metrics, "test_accuracy", json_real(r->test_accuracy));
        json_object_set_new(metrics, "test_loss", json_real(r->test_loss));
    }
    json_t *workers = r->mwm ? coord_mwm_workers_json(r) : json_array();
    s_ps_workers_json(r, workers, now);
    json_t *ps = json_array();
    for (int i = 0; i < r->cfg->num_ps; i++)
        json_array_append_new(ps, json_pack("{s:i, s:s, s:I, s:I, s:O}", "task", i, "endpoint", r->cfg->ps[i], "bytes",
                                            (json_int_t)r->ps_bytes[i], "requests", (json_int_t)r->ps_requests[i],
                                            "methods", r->ps_methods[i] ? r->ps_methods[i] : json_array()));
    json_t *detail = json_pack("{s:o, s:o, s:o, s:I, s:f, s:i, s:s}", "metrics", metrics, "workers", workers, "ps",
                               ps, "checkpoint_step", (json_int_t)r->ckpt_step, "elapsed_s",
                               (double)(now - r->started_ms) / 1000.0, "psd_recoveries", (int)r->psd_recoveries,
                               "dir", r->cfg->job_dir);
    json_object_set_new(detail, "checkpoint_dir", json_string(r->cfg->ckpt_root));
    json_object_set_new(detail, "checkpoints_damaged", json_integer(r->ckpt_damaged));
    json_object_set_new(detail, "checkpoints_failed", json_integer(r->ckpt_failed));
    if (r->mwm)
        json_object_set_new(detail, "ring_reformed_because", json_string(coord_mwm_last_failure(r)));
    json_t *st = json_pack("{s:s, s:I, s:I, s:s, s:o}", "state", r->state, "step", (json_int_t)r->step, "steps",
                           (json_int_t)r->steps, "error", r->error, "detail", detail);
    char *text = st ? json_dumps(st, JSON_COMPACT) : NULL;
    json_decref(st);
    if (text)
        zstr_sendm(r->pipe, kind);
    if (text)
        zstr_send(r->pipe, text);
    free(text);
}

void
coord_run_status(coord_run_t *r, bool force)
{
    s_status_as(r, force, "STATUS");
}

/* ---- metrics ---- */

static void
s_svg(coord_run_t *r)
{
    if (r->npoints < 1)
        return;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return;
    double maxs = r->pt_step[r->npoints - 1] > 0 ? r->pt_step[r->npoints - 1] : 1, maxl = 0;
    for (int i = 0; i < r->npoints; i++)
        if (r->pt_loss[i] > maxl)
            maxl = r->pt_loss[i];
    if (maxl <= 0)
        maxl = 1;
    const int W = 640, H = 360, M = 50;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%d\" y=\"20\">%s: training loss by step</text>\n"
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
            "<text x=\"%d\" y=\"%d\">0</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f</text>\n"
            "<text x=\"5\" y=\"%d\">%.3g</text><text x=\"5\" y=\"%d\">0</text>\n<polyline fill=\"none\" "
            "stroke=\"steelblue\" stroke-width=\"1.5\" points=\"",
            W, H, M, r->cfg->job.name, M, H - M, W - 10, H - M, M, H - M, M, 30, M, H - M + 15, W - 10, H - M + 15,
            maxs, 35, maxl, H - M);
    for (int i = 0; i < r->npoints; i++)
        fprintf(f, "%.1f,%.1f ", M + (W - 10 - M) * r->pt_step[i] / maxs,
                (H - M) - (H - M - 30) * r->pt_loss[i] / maxl);
    fprintf(f, "\"/>\n</svg>\n");
    if (fclose(f) == 0) {
        char path[1100];
        snprintf(path, sizeof path, "%s/loss.svg", r->cfg->job_dir);
        zdist_error_t err = {0};
        if (zdist_file_write_text(path, text, &err) < 0)
            zsys_warning("job %s: %s, ignoring", r->cfg->job_id, err.text);
    }
    free(text);
}

void
coord_run_step_time(coord_run_t *r, int i, double sec, int64_t steps)
{
    if (i < 0 || i >= COORD_MAX_TASKS)
        return;
    coord_steptime_t *st = &r->steptime[i];
    st->t_ms[st->head] = zdist_clock_now_ms();
    st->sec[st->head] = sec;
    st->head = (st->head + 1) % COORD_STEP_SAMPLES;
    if (st->n < COORD_STEP_SAMPLES)
        st->n++;
    for (int64_t k = 0; k < steps; k++)
        zdist_prom_histogram_observe(&st->hist, sec);
}

void
coord_run_account(coord_run_t *r, const zdist_closure_result_t *res)
{
    r->step += res->steps;
    r->examples_total += (int64_t)res->examples;
    if (res->worker >= 0 && res->steps > 0 && res->run_us >= 0)
        coord_run_step_time(r, res->worker, (double)res->run_us / 1e6 / (double)res->steps, res->steps);
    r->win_steps += res->steps;
    r->win_loss += res->loss_sum;
    r->win_examples += res->examples;
    int64_t now = zdist_clock_now_ms();
    int64_t every = r->cfg->job.log_every > 0 ? r->cfg->job.log_every : (r->steps > 200 ? r->steps / 100 : 1);
    if (r->step - r->last_line_step < every && r->step < r->steps)
        return;
    double dt = (double)(now - r->win_start_ms) / 1000.0;
    r->loss = r->win_steps ? r->win_loss / (double)r->win_steps : NAN;
    r->ex_per_s = dt > 0 ? r->win_examples / dt : 0;
    if (r->metrics) {
        fprintf(r->metrics, "{\"step\": %lld, \"loss\": %.6g, \"examples_per_sec\": %.1f, \"time\": %.3f}\n",
                (long long)r->step, r->loss, r->ex_per_s, (double)now / 1000.0);
        fflush(r->metrics);
    }
    if (r->npoints < S_MAX_POINTS && !isnan(r->loss)) {
        r->pt_step[r->npoints] = (double)r->step;
        r->pt_loss[r->npoints++] = r->loss;
    }
    r->last_line_step = r->step;
    r->win_start_ms = now;
    r->win_steps = 0;
    r->win_loss = r->win_examples = 0;
}

/* ---- checkpoints ---- */

static int
s_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Steps of complete checkpoints (with a manifest), ascending; returns how many. */
static int
s_ckpt_list(const char *job_dir, int64_t *steps, int max, bool complete)
{
    DIR *d = opendir(job_dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        char *end;
        if (strncmp(e->d_name, "ckpt-", 5) != 0)
            continue;
        long long s = strtoll(e->d_name + 5, &end, 10);
        if (*end || s < 0)
            continue;
        char m[1200];
        snprintf(m, sizeof m, "%s/%s/manifest.json", job_dir, e->d_name);
        if (complete && access(m, R_OK) != 0)
            continue;
        steps[n++] = s;
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && steps[j - 1] > steps[j]; j--) {
            int64_t t = steps[j];
            steps[j] = steps[j - 1];
            steps[j - 1] = t;
        }
    return n;
}

int
coord_run_ckpt_all_damaged(coord_run_t *r)
{
    snprintf(r->error, sizeof r->error,
             "every checkpoint of the job is damaged (set aside as ckpt-*.damaged in %s; see the coordinator's "
             "log for why)",
             r->cfg->ckpt_root);
    return -EBADMSG;
}

int64_t
coord_run_ckpt_last(const char *job_dir)
{
    int64_t steps[1024];
    int n = s_ckpt_list(job_dir, steps, 1024, true);
    return n ? steps[n - 1] : -1;
}

void
coord_run_ckpt_dir(const coord_run_t *r, int64_t step, char *dir, size_t size)
{
    snprintf(dir, size, "%s/ckpt-%lld", r->cfg->ckpt_root, (long long)step);
    mkdir(dir, 0755);
}

int
coord_run_ckpt_check(const coord_run_t *r, int64_t step, char *why, size_t size)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/ckpt-%lld/manifest.json", r->cfg->ckpt_root, (long long) step);
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        snprintf(why, size, "%s does not parse: line %d: %s", path, jerr.line, jerr.text);
        return -EBADMSG;
    }
    json_int_t got_step = -1;
    json_unpack(root, "{s:I}", "step", &got_step);
    zdist_error_t err = {0};
    int rc = 0;
    if (got_step != step) {
        snprintf(why, size, "%s names step %lld", path, (long long) got_step);
        rc = -EBADMSG;
    } else if ((rc = zdist_json_crc_check(root, "crc32", false, path, &err)) < 0) {
        snprintf(why, size, "%s", err.text);
    }
    json_decref(root);
    return rc;
}

void
coord_run_ckpt_reject(coord_run_t *r, int64_t step, const char *why)
{
    char dir[1100], aside[1200];
    snprintf(dir, sizeof dir, "%s/ckpt-%lld", r->cfg->ckpt_root, (long long) step);
    snprintf(aside, sizeof aside, "%s.damaged", dir);
    nftw(aside, s_rm, 8, FTW_DEPTH | FTW_PHYS); /* an older one of the same step */
    if (rename(dir, aside) < 0) {
        zsys_error("job %s: cannot set the damaged checkpoint %s aside: %s; removing it", r->cfg->job_id, dir,
                   strerror(errno));
        nftw(dir, s_rm, 8, FTW_DEPTH | FTW_PHYS);
    }
    r->ckpt_damaged++;
    int64_t before = coord_run_ckpt_last(r->cfg->ckpt_root);
    char next[64];
    if (before >= 0)
        snprintf(next, sizeof next, "resuming from the one at step %lld", (long long) before);
    else
        snprintf(next, sizeof next, "no older checkpoint is left");
    zsys_warning("job %s: the checkpoint at step %lld is damaged (%s): set aside as %s; %s", r->cfg->job_id,
                 (long long) step, why, aside, next);
}

void
coord_run_ckpt_failed(coord_run_t *r, int64_t step, const char *why)
{
    snprintf(r->ckpt_why, sizeof r->ckpt_why, "%s", why);
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/ckpt-%lld", r->cfg->ckpt_root, (long long) step);
    if (step != r->ckpt_step) /* never the complete one */
        nftw(dir, s_rm, 8, FTW_DEPTH | FTW_PHYS);
    r->ckpt_failed++;
    r->ckpt_tried = step;
    int64_t every = r->cfg->job.ckpt_every;
    char when[96];
    if (every > 0)
        snprintf(when, sizeof when, "retrying at step %lld", (long long) coord_run_ckpt_next(r, every));
    else
        snprintf(when, sizeof when, "retrying at the end");
    zsys_warning(
        "job %s: the checkpoint at step %lld failed (%s); the one at step %lld stays, the job goes on, %s",
        r->cfg->job_id, (long long) step, why, (long long) r->ckpt_step, when);
}

int64_t
coord_run_ckpt_next(const coord_run_t *r, int64_t every)
{
    int64_t from = r->ckpt_tried > r->ckpt_step ? r->ckpt_tried : r->ckpt_step;
    return (from / every + 1) * every;
}

/* Removes checkpoints set aside as damaged at steps below `below`. */
static void
s_prune_damaged(const char *job_dir, int64_t below)
{
    DIR *d = opendir(job_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        if (strncmp(e->d_name, "ckpt-", 5) != 0)
            continue;
        long long s = strtoll(e->d_name + 5, &end, 10);
        if (strcmp(end, ".damaged") != 0 || s >= below)
            continue;
        char path[PATH_MAX];
        int n = snprintf(path, sizeof path, "%s/%s", job_dir, e->d_name);
        if (n > 0 && (size_t)n < sizeof path) /* never a path cut short */
            nftw(path, s_rm, 8, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

int
coord_run_ckpt_commit(coord_run_t *r, int64_t step, const char *fields, uint64_t bytes, const char *where)
{
    char dir[1100], manifest[1024], path[1200];
    coord_run_ckpt_dir(r, step, dir, sizeof dir);
    snprintf(manifest, sizeof manifest, "{\"job_id\": \"%s\", \"step\": %lld, %s, \"bytes\": %llu, \"time\": %.3f}\n",
             r->cfg->job_id, (long long)step, fields, (unsigned long long)bytes, (double)zdist_clock_now_ms() / 1000.0);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    zdist_error_t err = {0};
    json_t *root = json_loads(manifest, 0, NULL);
    int rc = root ? zdist_json_write_sealed(path, root, "crc32", &err)
                  : zdist_error_set(&err, -ENOMEM, "out of memory");
    json_decref(root);
    if (rc < 0) {
        coord_run_ckpt_failed(r, step, err.text);
        return rc;
    }
    r->ckpt_step = step;
    r->ckpt_tried = step;
    /* Keep the newest K complete ones; drop older and incomplete ones. */
    int64_t steps[1024];
    int n = s_ckpt_list(r->cfg->ckpt_root, steps, 1024, false);
    int64_t done[1024];
    int nd = s_ckpt_list(r->cfg->ckpt_root, done, 1024, true);
    int64_t keep_from = nd > r->cfg->job.ckpt_keep ? done[nd - r->cfg->job.ckpt_keep] : -1;
    for (int i = 0; i < n; i++) {
        if (steps[i] >= keep_from && steps[i] <= step) {
            bool complete = false;
            for (int j = 0; j < nd; j++)
                complete = complete || done[j] == steps[i];
            if (complete)
                continue;
        }
        if (steps[i] > step)
            continue;
        char old[1100];
        snprintf(old, sizeof old, "%s/ckpt-%lld", r->cfg->ckpt_root, (long long)steps[i]);
        nftw(old, s_rm, 8, FTW_DEPTH | FTW_PHYS);
    }
    s_prune_damaged(r->cfg->ckpt_root, keep_from >= 0 ? keep_from : (nd ? done[0] : 0));
    zsys_info("job %s: checkpoint at step %lld (%llu bytes %s)", r->cfg->job_id, (long long)step,
              (unsigned long long)bytes, where);
    s_svg(r);
    return 0;
}

static int
s_ckpt_save(coord_run_t *r, int64_t step)
{
    char dir[1100];
    coord_run_ckpt_dir(r, step, dir, sizeof dir);
    uint64_t total = 0;
    for (int i = 0; i < r->cfg->num_ps; i++) {
        uint64_t bytes = 0;
        zdist_error_t err = {0};
        int rc = zdist_ps_client_save_job(r->ps[i], dir, step, i, r->cfg->job_id, &bytes, &err);
        if (rc < 0) {
            char why[ZDIST_ERROR_TEXT_MAX + 32];
            snprintf(why, sizeof why, "ps %d: %s", i, err.text);
            coord_run_ckpt_failed(r, step, why);
            return rc;
        }
        total += bytes;
    }
    char fields[64], where[64];
    snprintf(fields, sizeof fields, "\"num_ps\": %d", r->cfg->num_ps);
    snprintf(where, sizeof where, "over %d ps", r->cfg->num_ps);
    return coord_run_ckpt_commit(r, step, fields, total, where);
}

static int
s_ckpt_restore(coord_run_t *r, int64_t step, zdist_error_t *err)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/ckpt-%lld", r->cfg->ckpt_root, (long long)step);
    for (int i = 0; i < r->cfg->num_ps; i++) {
        int64_t got;
        int rc = zdist_ps_client_restore_job(r->ps[i], dir, r->cfg->job_id, &got, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- ps health ---- */

static bool
s_ps_changed(coord_run_t *r)
{
    for (int i = 0; i < r->cfg->num_ps; i++) {
        zdist_ps_stats_t *st = NULL;
        if (zdist_ps_client_stats(r->ps[i], &st, NULL) < 0)
            return true;
        bool changed = st->incarnation != r->ps_inc[i];
        zdist_ps_stats_destroy(&st);
        if (changed)
            return true;
    }
    return false;
}

static void
s_ps_record(coord_run_t *r)
{
    for (int i = 0; i < r->cfg->num_ps; i++) {
        zdist_ps_stats_t *st = NULL;
        if (zdist_ps_client_stats(r->ps[i], &st, NULL) == 0) {
            r->ps_inc[i] = st->incarnation;
            zdist_ps_stats_destroy(&st);
        }
    }
}

/* ---- control ---- */

void
coord_run_wait_pipe(coord_run_t *r, int64_t ms)
{
    zmq_pollitem_t item = {zsock_resolve(r->pipe), 0, ZMQ_POLLIN, 0};
    zmq_poll(&item, 1, (long)ms);
    coord_run_check_pipe(r);
}

void
coord_run_check_pipe(coord_run_t *r)
{
    while (zsock_events(r->pipe) & ZMQ_POLLIN) {
        char *cmd = zstr_recv(r->pipe);
        if (!cmd)
            break;
        if (strcmp(cmd, "CANCEL") == 0)
            r->cancel = true;
        else if (strcmp(cmd, "$TERM") == 0)
            r->term = true;
        zstr_free(&cmd);
    }
}

/* Waits until every ps answers; false when cancelled or stopped meanwhile. */
static bool
s_wait_ps(coord_run_t *r)
{
    for (;;) {
        coord_run_check_pipe(r);
        if (r->cancel || r->term)
            return false;
        bool all = true;
        for (int i = 0; i < r->cfg->num_ps && all; i++) {
            zdist_ps_stats_t *st = NULL;
            if (zdist_ps_client_stats(r->ps[i], &st, NULL) < 0)
                all = false;
            zdist_ps_stats_destroy(&st);
        }
        if (all)
            return true;
        coord_run_status(r, false);
        /* The stats calls wait for the psds themselves (a request reaches a
           psd as soon as it is back); between rounds only the pipe. */
        coord_run_wait_pipe(r, 200);
    }
}

void
coord_run_event(coord_run_t *r, const char *kind, const char *line)
{
    json_t *ev = json_pack("{s:s, s:s}", "kind", kind, "text", line);
    char *text = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (text && zstr_sendm(r->pipe, "EVENT") == 0)
        zstr_send(r->pipe, text);
    free(text);
}

static void
s_worker_event(void *arg, bool problem, const char *line)
{
    coord_run_t *r = arg;
    if (problem)
        zsys_warning("job %s: %s", r->cfg->job_id, line);
    else
        zsys_info("job %s: %s", r->cfg->job_id, line);
    coord_run_event(r, problem ? "lost" : "back", line);
}

/* One attempt: start the workers, restore the last checkpoint, train until
   the steps are done. 0 done, -EAGAIN a psd was lost (try again), other
   negative errno failed (error set), 1 stopped (cancel or term). */
/* The attempt ends because a psd restarted or went away: why, for the log line. */
static int
s_ps_lost(coord_run_t *r, const char *when, const zdist_error_t *err)
{
    snprintf(r->lost_why, sizeof r->lost_why, "%s%s%s", when, err && err->text[0] ? ": " : "",
             err && err->text[0] ? err->text : "");
    return -EAGAIN;
}

static int
s_attempt(coord_run_t *r)
{
    coord_runner_config_t *cfg = r->cfg;
    zdist_error_t err = {0};
    zdist_coordinator_options_t o;
    zdist_coordinator_options_default(&o);
    const char *wp[COORD_MAX_TASKS], *pp[COORD_MAX_TASKS];
    for (int i = 0; i < cfg->num_workers; i++)
        wp[i] = cfg->workers[i];
    for (int i = 0; i < cfg->num_ps; i++)
        pp[i] = cfg->ps[i];
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s/", cfg->job_id);
    o.job = &cfg->job.spec;
    o.repeat_input = true; /* the coordinator counts the steps of epochs */
    o.workers = wp;
    o.num_workers = (size_t)cfg->num_workers;
    o.ps = pp;
    o.num_ps = (size_t)cfg->num_ps;
    o.variable_prefix = prefix;
    if (cfg->closure_timeout_ms > 0)
        o.closure_timeout_ms = cfg->closure_timeout_ms;
    /* A new ClusterCoordinator per attempt: keep the workers' totals. */
    for (size_t i = 0; r->coord && i < zdist_coordinator_num_workers(r->coord) && i < COORD_MAX_TASKS; i++) {
        zdist_coordinator_worker_info_t wi;
        if (zdist_coordinator_worker_info(r->coord, i, &wi) == 0) {
            r->worker_restarts[i] += wi.restarts;
            r->worker_closures[i] += wi.closures_done;
        }
    }
    zdist_coordinator_destroy(&r->coord);
    o.on_event = s_worker_event;
    o.on_event_arg = r;
    r->coord = zdist_coordinator_new(&o, &err);
    if (!r->coord) {
        snprintf(r->error, sizeof r->error, "%s", err.text);
        return -EINVAL;
    }
    s_ps_record(r);
    int rc = zdist_coordinator_start(r->coord, true, &err);
    if (rc < 0) {
        if (s_ps_changed(r))
            return s_ps_lost(r, "while starting the job", &err);
        snprintf(r->error, sizeof r->error, "starting the job: %s", err.text);
        return rc;
    }
    if (r->steps == 0)
        r->steps = cfg->job.epochs * zdist_coordinator_steps_per_epoch(r->coord);
    if (r->steps <= 0) {
        snprintf(r->error, sizeof r->error, "dataset: no steps per epoch (too few examples for the batch size?)");
        return -EINVAL;
    }
    int64_t last;
    /* The newest checkpoint that restores: a damaged one is set aside and
       the one before it tried. */
    while ((last = coord_run_ckpt_last(cfg->ckpt_root)) >= 0) {
        char why[ZDIST_ERROR_TEXT_MAX + 1300];
        if (coord_run_ckpt_check(r, last, why, sizeof why) < 0) {
            coord_run_ckpt_reject(r, last, why);
            continue;
        }
        if ((rc = s_ckpt_restore(r, last, &err)) == 0)
            break;
        if (s_ps_changed(r))
            return s_ps_lost(r, "while restoring the checkpoint", &err);
        if (rc == -EBADMSG) { /* DATA_LOSS: a file fails its CRC, is cut short or missing */
            coord_run_ckpt_reject(r, last, err.text);
            continue;
        }
        snprintf(r->error, sizeof r->error, "restoring checkpoint step %lld: %s", (long long) last, err.text);
        return rc;
    }
    if (last < 0 && r->ckpt_damaged > 0)
        return coord_run_ckpt_all_damaged(r);
    if (last >= 0) {
        zsys_info("job %s: restored every ps from the checkpoint at step %lld", cfg->job_id, (long long)last);
        if (r->psd_recoveries > 0) {
            char line[160];
            snprintf(line, sizeof line, "every ps restored from the checkpoint at step %lld; training resumes",
                     (long long)last);
            coord_run_event(r, "recovered", line);
        }
        r->step = last;
        r->ckpt_step = r->ckpt_tried = last;
    } else {
        r->step = 0;
        if ((rc = s_ckpt_save(r, 0)) < 0) {
            snprintf(r->error, sizeof r->error, "checkpoint at step 0 into %s failed: %s (every ps task must be "
                     "able to write there: the psds' --checkpoint-root must hold it)", cfg->ckpt_root,
                     r->ckpt_why[0] ? r->ckpt_why : "see the coordinator's log");
            return s_ps_changed(r) ? s_ps_lost(r, "during the checkpoint at step 0", NULL) : rc;
        }
    }
    s_ps_record(r);
    r->last_stats_ms = 0; /* the psds' figures at the next status hold the job's variables */
    r->scheduled = r->step;
    zdist_coordinator_set_step(r->coord, r->step); /* closures carry the job's step numbers from here */
    r->win_start_ms = zdist_clock_now_ms();
    r->win_steps = 0;
    r->win_loss = r->win_examples = 0;
    r->last_line_step = r->step;
    int64_t spe = cfg->job.steps_per_execution > 0 ? cfg->job.steps_per_execution : 1;
    int64_t every = cfg->job.ckpt_every;
    while (r->step < r->steps) {
        coord_run_check_pipe(r);
        if (r->cancel || r->term)
            break;
        int64_t target = r->steps;
        if (every > 0) {
            int64_t next = coord_run_ckpt_next(r, every);
            if (next < target)
                target = next;
        }
        /* Keep enough closures queued for every worker to have its RUN_STEPS
           in flight, short closures several to a message. */
        size_t want = 8 * (size_t)cfg->num_workers;
        while (r->scheduled < target && zdist_coordinator_queued(r->coord) < want) {
            int64_t n = target - r->scheduled < spe ? target - r->scheduled : spe;
            if (!zdist_coordinator_schedule(r->coord, n)) {
                snprintf(r->error, sizeof r->error, "out of memory");
                return -ENOMEM;
            }
            r->scheduled += n;
        }
        zdist_coordinator_poll(r->coord, 20);
        zdist_closure_result_t res;
        while (zdist_coordinator_next_result(r->coord, &res))
            coord_run_account(r, &res);
        if (zdist_coordinator_error(r->coord, &err) < 0) {
            zdist_coordinator_join(r->coord, &err);
            if (s_ps_changed(r) || err.code == -ENOENT) /* NOT_FOUND: its variables gone, as a lost psd's */
                return s_ps_lost(r, "during a step", &err);
            snprintf(r->error, sizeof r->error, "%s", err.text);
            return -EIO;
        }
        if (r->step >= target && target < r->steps && zdist_coordinator_done(r->coord)) {
            if (s_ckpt_save(r, r->step) < 0 && s_ps_changed(r))
                return s_ps_lost(r, "during a checkpoint", NULL);
            /* A failed save keeps the previous one as the last complete
               and is tried again an interval later (ckpt_tried). */
        }
        coord_run_status(r, false);
    }
    if (r->cancel || r->term) {
        zdist_coordinator_cancel_queued(r->coord);
        zdist_coordinator_pause(r->coord, true);
        int64_t until = zdist_clock_now_ms() + 30000;
        while (zdist_coordinator_in_flight(r->coord) > 0 && zdist_clock_now_ms() < until)
            zdist_coordinator_poll(r->coord, 50);
        zdist_closure_result_t res;
        while (zdist_coordinator_next_result(r->coord, &res))
            coord_run_account(r, &res);
        /* Only at a consistent point: with a closure still out, r->step
           counts steps that are not the first r->step ones, and a resume
           would number them again (the psds would take the re-run for the
           steps already applied). The last checkpoint then stays. */
        if (r->term && !r->cancel && zdist_coordinator_in_flight(r->coord) == 0)
            s_ckpt_save(r, r->step);
        return 1;
    }
    return 0;
}

void
coord_runner_actor(zsock_t *pipe, void *args)
{
    coord_run_t *r = calloc(1, sizeof *r);
    coord_runner_config_t *cfg = args;
    zsock_signal(pipe, 0);
    if (!r) {
        coord_runner_config_destroy(&cfg);
        return;
    }
    r->cfg = cfg;
    r->pipe = pipe;
    r->state = "running";
    r->loss = NAN;
    r->ckpt_step = -1;
    r->ckpt_tried = -1;
    r->started_ms = zdist_clock_now_ms();
    r->steps = cfg->job.steps;
    if (cfg->job.strategy == ZDIST_STRATEGY_PARAMETER_SERVER) {
        /* Workers hold several jobs' sessions, by name: NAME@ID tells two
           submissions of one job file apart. */
        char *unique = NULL;
        if (asprintf(&unique, "%s@%s", cfg->job.spec.name, cfg->job_id) >= 0) {
            free(cfg->job.spec.name);
            cfg->job.spec.name = unique;
        }
    }
    for (int i = 0; i < COORD_MAX_TASKS; i++)
        zdist_prom_histogram_init_seconds(&r->steptime[i].hist);
    zdist_ps_client_options_t po;
    zdist_ps_client_options_default(&po);
    po.timeout_ms = 5000;
    po.retries = 0;
    for (int i = 0; i < cfg->num_ps; i++)
        r->ps[i] = zdist_ps_client_new(cfg->ps[i], &po, NULL);
    char path[1200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", cfg->job_dir);
    r->metrics = fopen(path, "ae");
    coord_run_status(r, true);
    int rc;
    bool mwm = zdist_strategy_syncs_workers(cfg->job.strategy); /* tpu: whole replicas per worker, as mwm */
    for (;;) {
        rc = mwm ? coord_mwm_attempt(r) : s_attempt(r);
        if (rc != -EAGAIN)
            break;
        if (!mwm) {
            r->psd_recoveries++;
            zsys_warning("job %s: a ps task was lost (%s); waiting for it, then restoring step %lld", cfg->job_id,
                         r->lost_why, (long long)r->ckpt_step);
            char line[1200];
            snprintf(line, sizeof line, "a ps task was lost (%s); waiting for it, then restoring step %lld",
                     r->lost_why, (long long)r->ckpt_step);
            coord_run_event(r, "lost", line);
        }
        coord_run_status(r, true);
        if (!(mwm ? coord_mwm_wait(r) : s_wait_ps(r))) {
            rc = 1;
            break;
        }
    }
    if (rc == 0 && cfg->job.evaluate) {
        zdist_evaluation_t ev;
        zdist_error_t err = {0};
        if ((mwm ? coord_mwm_evaluate(r, &ev, &err) : zdist_coordinator_evaluate(r->coord, &ev, &err)) == 0 &&
            ev.total > 0) {
            r->evaluated = true;
            r->test_accuracy = ev.has_correct ? (double)ev.correct / (double)ev.total : NAN;
            r->test_loss = ev.loss_sum / (double)ev.total;
            zsys_info("job %s: test accuracy %.4f, loss %.4f over %lld examples", cfg->job_id, r->test_accuracy,
                      r->test_loss, (long long)ev.total);
        } else {
            zsys_warning("job %s: evaluation failed: %s", cfg->job_id, err.text);
        }
    }
    if (rc == 0) {
        if (!mwm && r->ckpt_step != r->step)
            s_ckpt_save(r, r->step); /* multi_worker_mirrored saved its own */
        r->state = "done";
    } else if (rc == 1) {
        r->state = r->cancel ? "cancelled" : "running";
    } else {
        r->state = "failed";
    }
    if (r->coord && !(rc == 1 && !r->cancel))
        zdist_coordinator_stop_job(r->coord, 2000);
    if (r->mwm && !(rc == 1 && !r->cancel))
        coord_mwm_stop(r);
    s_svg(r);
    if (r->metrics)
        fclose(r->metrics);
    s_status_as(r, true, "END");
    zdist_coordinator_destroy(&r->coord);
    coord_mwm_destroy(r);
    for (int i = 0; i < cfg->num_ps; i++) {
        zdist_ps_client_destroy(&r->ps[i]);
        json_decref(r->ps_methods[i]);
    }
    free(r);
    coord_runner_config_destroy(&cfg);
    /* zactor_destroy's $TERM may be pending: wait for it when asked to stop. */
}
