/* coord_table: the coordinator's job table, kept under the state dir, and its rows as replies. */
#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coord_job.h"
#include "coord_run.h"
#include "coord_state.h"
#include "coord_table.h"
#include "zdist/file.h"
#include "zdist/job.h"
#include "zdist/sys.h"

/* ---- persistence ----

   A job lives in STATE/jobs/ID: job.json, the document as submitted, and
   state.json, its row of the table. Both are written crash-safe through
   zdist/file.h. state.json carries "crc32", the CRC-32 of the rest of it in
   its canonical form (compact, keys sorted), and "job_crc32", that of
   job.json: a damaged job is refused at the next start, naming the file,
   instead of resumed from wrong values. */

void
coord_table_dir(const coord_table_t *t, const coord_row_t *j, char *buf, size_t size)
{
    if (snprintf(buf, size, "%s/jobs/%s", t->state_dir, j->id) >= (int)size)
        buf[0] = '\0'; /* main keeps state_dir short enough */
}

void
coord_table_persist(coord_table_t *t, coord_row_t *j)
{
    char dir[1100], path[1200];
    coord_table_dir(t, j, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/state.json", dir);
    json_t *detail = j->detail ? json_loads(j->detail, 0, NULL) : NULL;
    json_t *st = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:I, s:o, s:I, s:b}", "job_id", j->id, "name",
                           j->name, "state", j->state, "step", (json_int_t)j->step, "steps", (json_int_t)j->steps,
                           "error", j->error ? j->error : "", "base_dir", j->base_dir, "seq", (json_int_t)j->seq,
                           "detail", detail ? detail : json_object(), "job_crc32", (json_int_t)j->text_crc,
                           "variables_dropped", j->vars_dropped);
    zdist_error_t err = {0};
    if (!st)
        zsys_warning("job %s: cannot write '%s': out of memory, ignoring", j->id, path);
    else if (zdist_json_write_sealed(path, st, "crc32", &err) < 0)
        zsys_warning("job %s: %s, ignoring", j->id, err.text);
    json_decref(st);
}

static void
s_job_free(coord_row_t **jp)
{
    if (!*jp)
        return;
    free((*jp)->name);
    free((*jp)->text);
    free((*jp)->base_dir);
    free((*jp)->error);
    free((*jp)->detail);
    free(*jp);
    *jp = NULL;
}

coord_row_t *
coord_table_find(coord_table_t *t, const char *id)
{
    if (!id || !*id) {
        coord_row_t *latest = NULL;
        for (size_t i = 0; i < t->n; i++)
            if (!latest || t->rows[i]->seq > latest->seq)
                latest = t->rows[i];
        return latest;
    }
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i]->id, id) == 0)
            return t->rows[i];
    return NULL;
}

static int
s_add(coord_table_t *t, coord_row_t *j)
{
    coord_row_t **n = realloc(t->rows, (t->n + 1) * sizeof *n);
    if (!n)
        return -ENOMEM;
    t->rows = n;
    t->rows[t->n++] = j;
    if (j->seq >= t->next_seq)
        t->next_seq = j->seq + 1;
    return 0;
}

/* The job's priority and whether it runs alone, from its document (a
   document that no longer parses fails when it is started). */
static void
s_job_kind(coord_row_t *j)
{
    zdist_job_t spec;
    if (zdist_job_parse(j->text, NULL, &spec, NULL) < 0)
        return;
    j->priority = spec.priority;
    j->mwm = zdist_strategy_syncs_workers(spec.strategy);
    j->ps = spec.strategy == ZDIST_STRATEGY_PARAMETER_SERVER;
    zdist_job_release(&spec);
}

/* One job of an earlier run from STATE/jobs/<name>: -errno with err naming
   the file that is missing or damaged. */
static int
s_load_job(coord_table_t *t, const char *dir, const char *name, zdist_error_t *err)
{
    if (strlen(name) >= sizeof((coord_row_t *)0)->id)
        return zdist_error_set(err, -EINVAL, "%s/%s: the name is too long for a job id", dir, name);
    char path[1400];
    snprintf(path, sizeof path, "%s/%s/state.json", dir, name);
    coord_state_row_t row;
    int rc = coord_state_read(path, &row, err);
    if (rc < 0)
        return rc;
    snprintf(path, sizeof path, "%s/%s/job.json", dir, name);
    void *text = NULL;
    size_t text_len = 0;
    coord_row_t *j = NULL;
    rc = zdist_file_read(path, ZDIST_COORD_MAX_JOB_BYTES, &text, &text_len, err);
    if (rc < 0)
        goto out;
    if (zdist_crc32(0, text, text_len) != row.job_crc) {
        rc = zdist_error_set(err, -EBADMSG, "%s: damaged (its CRC-32 is not state.json's job_crc32)", path);
        goto out;
    }
    j = calloc(1, sizeof *j);
    if (!j) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    /* Length checked above; memcpy says so to gcc's truncation check. */
    memcpy(j->id, name, strlen(name) + 1);
    j->name = row.name;
    row.name = NULL;
    j->text = text;
    text = NULL;
    j->text_crc = row.job_crc;
    j->base_dir = row.base_dir;
    row.base_dir = NULL;
    bool unfinished = strcmp(row.state, "queued") == 0 || strcmp(row.state, "running") == 0;
    snprintf(j->state, sizeof j->state, "%s", unfinished ? "queued" : row.state);
    j->step = row.step;
    j->steps = row.steps;
    j->error = row.error;
    row.error = NULL;
    j->detail = row.detail;
    row.detail = NULL;
    j->seq = row.seq;
    j->vars_dropped = row.variables_dropped;
    s_job_kind(j);
    if (s_add(t, j) < 0) {
        s_job_free(&j);
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (unfinished) { /* state.json's step lags: name the checkpoint's */
        char jd[1100];
        coord_table_dir(t, j, jd, sizeof jd);
        char root[1200];
        int64_t from = coord_job_ckpt_root(j->text, j->base_dir, jd, j->id, root, sizeof root) == 0
                           ? coord_run_ckpt_last(root)
                           : -1;
        zsys_info("job %s ('%s') was %s, its last checkpoint at step %lld: resuming it from its last checkpoint",
                  j->id, j->name, row.state, (long long)(from > 0 ? from : 0));
    }
out:
    free(text);
    coord_state_row_release(&row);
    return rc;
}

void
coord_table_load(coord_table_t *t)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/jobs", t->state_dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        zdist_error_t err = {0};
        if (e->d_name[0] != '.' && s_load_job(t, dir, e->d_name, &err) < 0)
            zsys_warning("state dir: '%s/%s' is not a job I can read: %s, ignoring", dir, e->d_name, err.text);
    }
    closedir(d);
}

json_t *
coord_table_jsonl(const coord_table_t *t, const coord_row_t *j, const char *file, size_t keep,
                  coord_table_pick_fn *pick)
{
    char dir[1100], path[1200];
    coord_table_dir(t, j, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    json_t *kept = json_array();
    FILE *f = fopen(path, "re");
    if (!f || !kept) {
        if (f)
            fclose(f);
        return kept;
    }
    char line[1024];
    size_t read = 0;
    while (fgets(line, sizeof line, f) && read < COORD_TABLE_READ_BYTES) {
        read += strlen(line);
        json_t *o = json_loads(line, 0, NULL);
        json_t *v = o ? pick(o) : NULL;
        if (v) {
            if (json_array_size(kept) >= keep)
                json_array_remove(kept, 0);
            json_array_append_new(kept, v);
        }
        json_decref(o);
    }
    fclose(f);
    return kept;
}

/* An evaluation line as it is (one with its eval_step). */
static json_t *
s_pick_evaluation(json_t *line)
{
    return json_is_integer(json_object_get(line, "eval_step")) ? json_incref(line) : NULL;
}

json_t *
coord_table_evaluations(const coord_table_t *t, const coord_row_t *j)
{
    return coord_table_jsonl(t, j, "evaluations.jsonl", COORD_TABLE_EVALS, s_pick_evaluation);
}

/* The job's detail with "evaluations" when the evaluator wrote any (a new
   string), else NULL (use j->detail as it is). */
static char *
s_detail_with_evaluations(const coord_table_t *t, const coord_row_t *j)
{
    json_t *evals = coord_table_evaluations(t, j);
    if (!evals || json_array_size(evals) == 0) {
        json_decref(evals);
        return NULL;
    }
    json_t *detail = j->detail ? json_loads(j->detail, 0, NULL) : NULL;
    if (!json_is_object(detail)) {
        json_decref(detail);
        detail = json_object();
    }
    json_object_set_new(detail, "evaluations", evals);
    char *text = detail ? json_dumps(detail, JSON_COMPACT) : NULL;
    json_decref(detail);
    return text;
}

int
coord_table_reply(const coord_table_t *t, zdist_rpc_call_t *call, coord_row_t *const *jobs, size_t n, bool detail)
{
    zdist_coord_job_t *v = calloc(n ? n : 1, sizeof *v);
    char **own = calloc(n ? n : 1, sizeof *own);
    if (!v || !own) {
        free(v);
        free(own);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(v[i].job_id, jobs[i]->id, sizeof v[i].job_id);
        memcpy(v[i].state, jobs[i]->state, sizeof v[i].state);
        v[i].name = jobs[i]->name;
        v[i].step = jobs[i]->step;
        v[i].steps = jobs[i]->steps;
        v[i].error = jobs[i]->error;
        if (detail)
            own[i] = s_detail_with_evaluations(t, jobs[i]);
        v[i].detail_json = detail ? (own[i] ? own[i] : jobs[i]->detail) : NULL;
    }
    int rc = zdist_coord_reply_jobs(call, v, n);
    for (size_t i = 0; i < n; i++)
        free(own[i]);
    free(own);
    free(v);
    return rc;
}

int
coord_table_submit(coord_table_t *t, const zdist_coord_submit_request_t *req, coord_row_t **ret, zdist_error_t *err)
{
    err->code = 0;
    coord_row_t *j = calloc(1, sizeof *j);
    if (!j)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    char dir[1100];
    do {
        snprintf(j->id, sizeof j->id, "j%08llx", (unsigned long long)(zdist_random_u64() & 0xffffffffu));
        coord_table_dir(t, j, dir, sizeof dir);
    } while (access(dir, F_OK) == 0);
    j->name = strdup(req->job.name);
    j->text = strdup(req->job_json);
    j->base_dir = strdup(req->base_dir ? req->base_dir : "");
    snprintf(j->state, sizeof j->state, "queued");
    j->steps = req->job.steps;
    j->error = strdup("");
    j->detail = strdup("{}");
    j->seq = t->next_seq;
    j->priority = req->job.priority;
    j->mwm = zdist_strategy_syncs_workers(req->job.strategy);
    j->ps = req->job.strategy == ZDIST_STRATEGY_PARAMETER_SERVER;
    char path[1200];
    snprintf(path, sizeof path, "%s/job.json", dir);
    zdist_file_piece_t doc = {j->text, j->text ? strlen(j->text) : 0};
    if (!j->name || !j->text || !j->base_dir || !j->error || !j->detail)
        zdist_error_set(err, -ENOMEM, "out of memory");
    else if (mkdir(dir, 0755) < 0)
        zdist_error_set(err, -errno, "cannot create '%s': %s", dir, strerror(errno));
    else if (zdist_file_write(path, &doc, 1, 0644, &j->text_crc, err) == 0 && s_add(t, j) < 0)
        zdist_error_set(err, -ENOMEM, "out of memory");
    if (err->code < 0) {
        s_job_free(&j);
        return err->code;
    }
    if (req->job.ckpt_dir) {
        char ckpt[1100];
        snprintf(ckpt, sizeof ckpt, "%s/%s", req->job.ckpt_dir, j->id);
        if (mkdir(ckpt, 0755) < 0 && errno != EEXIST)
            zsys_warning("job %s: cannot create %s: %s (tried again when it starts)", j->id, ckpt, strerror(errno));
    }
    coord_table_persist(t, j);
    *ret = j;
    return 0;
}

size_t
coord_table_unfinished(const coord_table_t *t)
{
    size_t unfinished = 0;
    for (size_t i = 0; i < t->n; i++)
        unfinished += !zdist_coord_state_final(t->rows[i]->state);
    return unfinished;
}

void
coord_table_init(coord_table_t *t, const char *state_dir)
{
    memset(t, 0, sizeof *t);
    snprintf(t->state_dir, sizeof t->state_dir, "%s", state_dir);
}

void
coord_table_release(coord_table_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        s_job_free(&t->rows[i]);
    free(t->rows);
    t->rows = NULL;
    t->n = 0;
}
