/* coord_run: what every way of running a job shares — status, metrics, checkpoint bookkeeping, the pipe. */
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
#include "zdist/ckpt.h"
#include "zdist/file.h"
#include "zdist/ps_client.h"
#include "zdist/sys.h"


void
coord_run_config_destroy(coord_run_config_t **self_p)
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

/* The job's dynamic tables' parts of a psd's stats ("JOB/TABLE" names). */
static json_t *
s_ps_embeddings(const coord_run_t *r, const zdist_ps_stats_t *st)
{
    json_t *out = json_array();
    size_t jl = strlen(r->cfg->job_id);
    for (size_t e = 0; out && e < st->nembeddings; e++) {
        const zdist_ps_embedding_info_t *em = &st->embeddings[e];
        if (!em->name || strncmp(em->name, r->cfg->job_id, jl) != 0 || em->name[jl] != '/')
            continue;
        json_array_append_new(out, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "table", em->name + jl + 1,
                                             "rows", (json_int_t) em->rows, "admitted", (json_int_t) em->admitted,
                                             "refused", (json_int_t) em->refused, "evicted", (json_int_t) em->evicted,
                                             "pending", (json_int_t) em->pending, "bytes", (json_int_t) em->bytes));
    }
    return out;
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
            json_decref(r->ps_embeddings[i]);
            r->ps_embeddings[i] = s_ps_embeddings(r, st);
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

double
coord_run_lower_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof v[0], s_cmp_double);
    return v[(n - 1) / 2];
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
        if (!isnan(r->test_auc))
            json_object_set_new(metrics, "test_auc", json_real(r->test_auc));
    }
    json_t *workers = json_array();
    json_t *ps = json_array();
    for (int i = 0; i < r->cfg->num_ps; i++)
        json_array_append_new(ps, json_pack("{s:i, s:s, s:I, s:I, s:O, s:O}", "task", i, "endpoint", r->cfg->ps[i],
                                            "bytes", (json_int_t)r->ps_bytes[i], "requests",
                                            (json_int_t)r->ps_requests[i], "methods",
                                            r->ps_methods[i] ? r->ps_methods[i] : json_array(), "embeddings",
                                            r->ps_embeddings[i] ? r->ps_embeddings[i] : json_array()));
    json_t *detail = json_pack("{s:o, s:o, s:o, s:I, s:f, s:i, s:s}", "metrics", metrics, "workers", workers, "ps",
                               ps, "checkpoint_step", (json_int_t)r->ckpt_step, "elapsed_s",
                               (double)(now - r->started_ms) / 1000.0, "psd_recoveries", 0,
                               "dir", r->cfg->job_dir);
    json_object_set_new(detail, "checkpoint_dir", json_string(r->cfg->ckpt_root));
    if (r->membership)
        json_object_set(detail, "membership_history", r->membership);
    json_object_set_new(detail, "checkpoints_damaged", json_integer(r->ckpt_damaged));
    json_object_set_new(detail, "checkpoints_failed", json_integer(r->ckpt_failed));
    if (detail)
        r->ops->status(r, detail, now); /* its workers, and psd_recoveries or why the ring was re-formed */
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

void
coord_run_end(coord_run_t *r)
{
    s_status_as(r, true, "END");
}

/* ---- metrics ---- */

void
coord_run_svg(coord_run_t *r)
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
            W, H, M, r->cfg->job.spec.name, M, H - M, W - 10, H - M, M, H - M, M, 30, M, H - M + 15, W - 10, H - M + 15,
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
    if (i < 0 || i >= r->cfg->num_workers)
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
    int64_t every = r->cfg->job.spec.log_every > 0 ? r->cfg->job.spec.log_every : (r->steps > 200 ? r->steps / 100 : 1);
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
    int64_t step = zdist_ckpt_newest(job_dir);
    return step >= 0 ? step : -1;
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
    int64_t every = r->cfg->job.spec.ckpt_every;
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

/* True when a kept checkpoint's dynamic tables (a ps task's
   dynamic-ps<N>.json, psd_dyntable_ckpt.h) name directory ckpt-`step`
   in their "needs": their incremental chain starts there, so pruning it
   would leave the kept one unrestorable. */
static bool
s_ckpt_needed(const char *job_dir, const int64_t *kept, int nkept, int64_t step)
{
    char want[64];
    snprintf(want, sizeof want, "ckpt-%lld", (long long) step);
    for (int i = 0; i < nkept; i++) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/ckpt-%lld", job_dir, (long long) kept[i]);
        DIR *d = opendir(dir);
        struct dirent *e;
        bool needed = false;
        while (d && !needed && (e = readdir(d))) {
            size_t len = strlen(e->d_name);
            if (strncmp(e->d_name, "dynamic-ps", 10) != 0 || len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
                continue;
            char path[PATH_MAX + 300];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            json_t *root = json_load_file(path, 0, NULL);
            size_t k;
            json_t *need;
            json_array_foreach(json_object_get(root, "needs"), k, need) {
                if (json_is_string(need) && strcmp(json_string_value(need), want) == 0)
                    needed = true;
            }
            json_decref(root);
        }
        if (d)
            closedir(d);
        if (needed)
            return true;
    }
    return false;
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
    int64_t steps[1024], done[1024];
    int n = zdist_ckpt_list(r->cfg->ckpt_root, false, steps, 1024);
    int nd = zdist_ckpt_list(r->cfg->ckpt_root, true, done, 1024);
    n = n < 0 ? 0 : n > 1024 ? 1024 : n; /* past 1,024: the newest, pruned over the next saves */
    nd = nd < 0 ? 0 : nd > 1024 ? 1024 : nd;
    int64_t keep_from = nd > r->cfg->job.spec.ckpt_keep ? done[nd - r->cfg->job.spec.ckpt_keep] : -1;
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
        /* The kept complete ones: done[] from keep_from on. */
        int first = 0;
        while (first < nd && done[first] < keep_from)
            first++;
        if (s_ckpt_needed(r->cfg->ckpt_root, done + first, nd - first, steps[i]))
            continue;
        char old[1100];
        snprintf(old, sizeof old, "%s/ckpt-%lld", r->cfg->ckpt_root, (long long)steps[i]);
        nftw(old, s_rm, 8, FTW_DEPTH | FTW_PHYS);
    }
    s_prune_damaged(r->cfg->ckpt_root, keep_from >= 0 ? keep_from : (nd ? done[0] : 0));
    zsys_info("job %s: checkpoint at step %lld (%llu bytes %s)", r->cfg->job_id, (long long)step,
              (unsigned long long)bytes, where);
    coord_run_svg(r);
    return 0;
}

/* ---- control ---- */

void
coord_run_init(coord_run_t *r, coord_run_config_t *cfg, zsock_t *pipe, const coord_run_ops_t *ops)
{
    r->cfg = cfg;
    r->pipe = pipe;
    r->ops = ops;
    r->state = "running";
    r->loss = NAN;
    r->test_auc = NAN;
    r->ckpt_step = -1;
    r->ckpt_tried = -1;
    r->started_ms = zdist_clock_now_ms();
    r->steps = cfg->job.spec.steps;
    for (int i = 0; i < cfg->num_workers; i++) /* only the slots in use: the others stay unmapped */
        zdist_prom_histogram_init_seconds(&r->steptime[i].hist);
    zdist_ps_client_options_t po;
    zdist_ps_client_options_default(&po);
    po.timeout_ms = 5000;
    po.retries = 0;
    if (cfg->cluster_ps < cfg->num_ps)
        cfg->cluster_ps = cfg->num_ps;
    for (int i = 0; i < cfg->cluster_ps; i++)
        r->ps[i] = zdist_ps_client_new(cfg->ps[i], &po, NULL);
    char path[1200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", cfg->job_dir);
    r->metrics = fopen(path, "ae");
}

void
coord_run_eval_line(coord_run_t *r)
{
    if (!r->metrics)
        return;
    json_t *line = json_pack("{s:I, s:o, s:o, s:o, s:I, s:f}", "step", (json_int_t)r->step, "test_loss",
                             isfinite(r->test_loss) ? json_real(r->test_loss) : json_null(), "test_accuracy",
                             isfinite(r->test_accuracy) ? json_real(r->test_accuracy) : json_null(), "test_auc",
                             isfinite(r->test_auc) ? json_real(r->test_auc) : json_null(), "test_examples",
                             (json_int_t)r->test_examples, "time", (double)zdist_clock_now_ms() / 1000.0);
    char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    if (text) {
        fprintf(r->metrics, "%s\n", text);
        fflush(r->metrics);
    }
    free(text);
    json_decref(line);
}

void
coord_run_release(coord_run_t *r)
{
    if (r->ops->destroy)
        r->ops->destroy(r);
    json_decref(r->membership);
    r->membership = NULL;
    if (r->metrics)
        fclose(r->metrics);
    r->metrics = NULL;
    for (int i = 0; i < r->cfg->cluster_ps; i++) {
        zdist_ps_client_destroy(&r->ps[i]);
        json_decref(r->ps_methods[i]);
        r->ps_methods[i] = NULL;
        json_decref(r->ps_embeddings[i]);
        r->ps_embeddings[i] = NULL;
    }
    coord_run_config_destroy(&r->cfg);
}

void
coord_run_window(coord_run_t *r)
{
    r->win_start_ms = zdist_clock_now_ms();
    r->win_steps = 0;
    r->win_loss = r->win_examples = 0;
    r->last_line_step = r->step;
}

void
coord_run_wait_pipe(coord_run_t *r, int64_t ms)
{
    zmq_pollitem_t item = {zsock_resolve(r->pipe), 0, ZMQ_POLLIN, 0};
    zmq_poll(&item, 1, (long)ms);
    coord_run_check_pipe(r);
}

/* "JOIN INDEX ENDPOINT" (a worker joined through the chief) or "DRAIN
   INDEX" (it leaves): the config's workers and the membership's history. */
static void
s_member(coord_run_t *r, const char *cmd)
{
    coord_run_config_t *cfg = r->cfg;
    bool join = cmd[0] == 'J';
    int index = -1, at = 0;
    if (sscanf(cmd + (join ? 5 : 6), "%d %n", &index, &at) < 1 || index < 0 || index >= COORD_MAX_WORKERS ||
        index > cfg->num_workers || (!join && index >= cfg->num_workers))
        return;
    if (join) {
        snprintf(cfg->workers[index], sizeof cfg->workers[index], "%s", cmd + 5 + at);
        cfg->joined[index] = true;
        cfg->left[index] = false;
        if (index == cfg->num_workers)
            zdist_prom_histogram_init_seconds(&r->steptime[cfg->num_workers++].hist);
    } else {
        cfg->left[index] = true;
    }
    r->members_changed = true;
    if (!r->membership && !(r->membership = json_array()))
        return;
    if (json_array_size(r->membership) >= 100)
        json_array_remove(r->membership, 0);
    json_array_append_new(r->membership,
                          json_pack("{s:f, s:s, s:i, s:s}", "time", s_wall_s(), "event",
                                    join ? "joined" : "drained", "task", index, "endpoint", cfg->workers[index]));
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
        else if (strncmp(cmd, "JOIN ", 5) == 0 || strncmp(cmd, "DRAIN ", 6) == 0)
            s_member(r, cmd);
        else if (strncmp(cmd, "RESHARD ", 8) == 0 && sscanf(cmd + 8, "%d", &r->reshard) == 1)
            zsys_info("job %s: moving from %d to %d ps tasks at the next step boundary (step %lld now)",
                      r->cfg->job_id, r->cfg->num_ps, r->reshard, (long long)r->step);
        else if (strncmp(cmd, "PREEMPT ", 8) == 0 && r->npreempt < (int)(sizeof r->preempt / sizeof r->preempt[0])) {
            char type[8];
            int index;
            if (sscanf(cmd + 8, "%7s %d", type, &index) == 2) {
                snprintf(r->preempt[r->npreempt].type, sizeof r->preempt[0].type, "%s", type);
                r->preempt[r->npreempt++].index = index;
                zsys_info("job %s: %s:%d got SIGTERM: checkpointing at the next step boundary (step %lld now)",
                          r->cfg->job_id, type, index, (long long)r->step);
            }
        }
        zstr_free(&cmd);
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


void
coord_run_preempt_answer(coord_run_t *r, const char *line)
{
    if (r->npreempt == 0)
        return;
    char text[1200];
    snprintf(text, sizeof text, "job %s: %s", r->cfg->job_id, line);
    zsys_info("%s", text);
    coord_run_event(r, "preempted", text);
    if (zstr_sendm(r->pipe, "PREEMPTED") == 0)
        zstr_send(r->pipe, text);
    r->npreempt = 0;
}

void
coord_run_preempt_saved(coord_run_t *r, int rc)
{
    char line[200];
    if (rc == 0)
        snprintf(line, sizeof line, "checkpoint at step %lld", (long long)r->ckpt_step);
    else
        snprintf(line, sizeof line, "the checkpoint at step %lld failed: it resumes from step %lld",
                 (long long)r->step, (long long)r->ckpt_step);
    coord_run_preempt_answer(r, line);
}

void
coord_run_preempt_idle(coord_run_t *r)
{
    if (r->npreempt == 0)
        return;
    char line[160];
    snprintf(line, sizeof line, "not training now: it resumes from its checkpoint at step %lld",
             (long long)r->ckpt_step);
    coord_run_preempt_answer(r, line);
}

void
coord_run_reshard_answer(coord_run_t *r, bool ok, const char *line)
{
    if (r->reshard == 0)
        return;
    r->reshard = 0;
    char text[1200];
    snprintf(text, sizeof text, "job %s: %s", r->cfg->job_id, line);
    if (ok)
        zsys_info("%s", text);
    else
        zsys_warning("%s", text);
    coord_run_event(r, ok ? "resharded" : "reshard failed", text);
    json_t *a = json_pack("{s:b, s:i, s:s}", "ok", ok, "num_ps", r->cfg->num_ps, "detail", text);
    char *dump = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    if (dump && zstr_sendm(r->pipe, "RESHARDED") == 0)
        zstr_send(r->pipe, dump);
    free(dump);
}

bool
coord_run_preempted(const coord_run_t *r, const char *type, int index)
{
    for (int i = 0; i < r->npreempt; i++)
        if (r->preempt[i].index == index && strcmp(r->preempt[i].type, type) == 0)
            return true;
    return false;
}
