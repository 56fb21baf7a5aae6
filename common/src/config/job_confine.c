/* job_confine: a job's dataset files and checkpoint.dir held to the operator's roots (no "..", no symlink out). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/file.h"
#include "zdist/job.h"

static void
s_roots_text(const char *flag, const char *const *roots, size_t n, char *buf, size_t size)
{
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s %s", i ? ", " : "", flag, roots[i]);
    }
}

static bool s_at_or_under(const char *path, const char *root);

/* path under one of the roots (or one of them itself, with or_root). */
static bool
s_in_roots(const char *path, const char *const *roots, size_t n, bool or_root)
{
    for (size_t i = 0; i < n; i++)
        if (or_root ? s_at_or_under(path, roots[i]) : zdist_path_under(path, roots[i]))
            return true;
    return false;
}

static int
s_confine(char **path, const char *field, const char *const *roots, size_t n, zdist_error_t *err)
{
    if (!*path)
        return 0;
    char rtext[1024];
    s_roots_text("--data-root", roots, n, rtext, sizeof rtext);
    if (n == 0)
        snprintf(rtext, sizeof rtext, "none: this worker reads no data files, only synthetic data");
    const char *p = *path;
    if (p[0] != '/')
        return zdist_error_set(err, -EACCES,
                               "%s: '%.200s' is a relative path; a worker reads data only under its data roots (%s): "
                               "give the absolute path of a file there", field, p, rtext);
    if (zdist_path_has_dotdot(p))
        return zdist_error_set(err, -EACCES,
                               "%s: '%.200s' contains '..'; name the file under the data roots (%s) without '..'",
                               field, p, rtext);
    if (!s_in_roots(p, roots, n, false))
        return zdist_error_set(err, -EACCES,
                               "%s: '%.200s' is outside the data roots (%s); copy the data under one of them or ask "
                               "the operator to add a root", field, p, rtext);
    char real[PATH_MAX];
    if (!realpath(p, real)) {
        int e = errno;
        return zdist_error_set(err, e == ENOENT || e == ENOTDIR ? -ENOENT : -EACCES, "%s: '%.200s': %s", field, p,
                               strerror(e));
    }
    if (!s_in_roots(real, roots, n, false))
        return zdist_error_set(err, -EACCES,
                               "%s: '%.200s' resolves to '%.200s' (a symbolic link), outside the data roots (%s); "
                               "name a file that is under one of them", field, p, real, rtext);
    char *copy = strdup(real);
    if (!copy)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    free(*path);
    *path = copy;
    return 0;
}

/* A tfrecord glob: the pattern as written confined as a path is (absolute,
   no "..", under a root), then every file it matches, each resolved; the
   resolved list replaces any earlier one. */
static int
s_confine_glob(zdist_job_files_t *f, const char *field, const char *const *roots, size_t n, zdist_error_t *err)
{
    if (!f->path)
        return 0;
    char rtext[1024];
    s_roots_text("--data-root", roots, n, rtext, sizeof rtext);
    if (f->path[0] != '/' || zdist_path_has_dotdot(f->path) || !s_in_roots(f->path, roots, n, false))
        return zdist_error_set(err, -EACCES,
                               "%s: '%.200s' must be an absolute glob without '..' under the data roots (%s)",
                               field, f->path, n ? rtext : "none: this worker reads no data files");
    char **list = NULL;
    size_t count = 0;
    int rc = zdist_job_glob(f->path, field, &list, &count, err);
    for (size_t i = 0; rc == 0 && i < count; i++)
        rc = s_confine(&list[i], field, roots, n, err);
    if (rc < 0) {
        for (size_t i = 0; i < count; i++)
            free(list[i]);
        free(list);
        return rc;
    }
    for (size_t i = 0; f->matched && i < f->n_matched; i++)
        free(f->matched[i]);
    free(f->matched);
    f->matched = list;
    f->n_matched = count;
    return 0;
}

int
zdist_job_confine_data(zdist_job_t *job, const char *const *roots, size_t n, zdist_error_t *err)
{
    if (job->format == ZDIST_INPUT_FORMAT_TFRECORD) {
        int rc;
        if ((rc = s_confine_glob(&job->train, "dataset.train.files", roots, n, err)) < 0 ||
            (rc = s_confine_glob(&job->test, "dataset.test.files", roots, n, err)) < 0)
            return rc;
        for (size_t i = 0; job->pipelines && i < job->num_pipelines; i++) {
            char field[64];
            snprintf(field, sizeof field, "dataset.pipelines[%zu].files", i);
            if ((rc = s_confine_glob(&job->pipelines[i], field, roots, n, err)) < 0)
                return rc;
        }
        return 0;
    }
    struct {
        char **path;
        const char *field;
    } files[] = {
        {&job->train.images, "dataset.train.images"}, {&job->train.labels, "dataset.train.labels"},
        {&job->train.path, "dataset.train.path"},     {&job->test.images, "dataset.test.images"},
        {&job->test.labels, "dataset.test.labels"},   {&job->test.path, "dataset.test.path"},
    };
    int rc;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if ((rc = s_confine(files[i].path, files[i].field, roots, n, err)) < 0)
            return rc;
    for (size_t i = 0; job->pipelines && i < job->num_pipelines; i++) {
        char field[3][64];
        snprintf(field[0], sizeof field[0], "dataset.pipelines[%zu].images", i);
        snprintf(field[1], sizeof field[1], "dataset.pipelines[%zu].labels", i);
        snprintf(field[2], sizeof field[2], "dataset.pipelines[%zu].path", i);
        if ((rc = s_confine(&job->pipelines[i].images, field[0], roots, n, err)) < 0 ||
            (rc = s_confine(&job->pipelines[i].labels, field[1], roots, n, err)) < 0 ||
            (rc = s_confine(&job->pipelines[i].path, field[2], roots, n, err)) < 0)
            return rc;
    }
    return 0;
}

/* path (absolute, without "..") under root or root itself. */
static bool
s_at_or_under(const char *path, const char *root)
{
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    if (strncmp(path, root, n) == 0) {
        const char *rest = path + n;
        while (*rest == '/')
            rest++;
        if (*rest == 0)
            return true;
    }
    return zdist_path_under(path, root);
}

/* The resolved form of a directory that may not exist yet: realpath of its
   nearest existing ancestor, then the components below it as written, so a
   symbolic link anywhere on the way is followed before anything is made. */
static int
s_resolve_ahead(const char *dir, char *out, size_t size)
{
    char head[PATH_MAX];
    if (snprintf(head, sizeof head, "%s", dir) >= (int) sizeof head)
        return -ENAMETOOLONG;
    size_t len = strlen(head);
    for (;;) {
        char real[PATH_MAX];
        if (realpath(head, real)) {
            const char *tail = dir + len; /* "" or "/rest" */
            bool root = strcmp(real, "/") == 0 && *tail;
            return snprintf(out, size, "%s%s", root ? "" : real, tail) < (int) size ? 0 : -ENAMETOOLONG;
        }
        if (errno != ENOENT && errno != ENOTDIR)
            return -errno;
        char *slash = strrchr(head, '/');
        if (!slash || slash == head)
            return -ENOENT;
        *slash = 0;
        len = (size_t) (slash - head);
    }
}

int
zdist_job_confine_checkpoint(const zdist_job_t *job, const char *const *roots, size_t n, zdist_error_t *err)
{
    const char *dir = job->ckpt_dir;
    if (!dir || n == 0)
        return 0;
    char rtext[1200];
    s_roots_text("--checkpoint-root", roots, n, rtext, sizeof rtext);
    if (dir[0] != '/' || zdist_path_has_dotdot(dir))
        return zdist_error_set(err, -EACCES, "checkpoint.dir: '%.200s' must be an absolute directory without '..' "
                               "under the coordinator's checkpoint roots (%s)", dir, rtext);
    if (!s_in_roots(dir, roots, n, true))
        return zdist_error_set(err, -EACCES,
                               "checkpoint.dir: '%.200s' is outside the coordinator's checkpoint roots (%s); "
                               "checkpoint under one of them, or ask the operator to add a root "
                               "(zdist-coordinator --checkpoint-root DIR, and the psds' too)", dir, rtext);
    char real[PATH_MAX];
    int rc = s_resolve_ahead(dir, real, sizeof real);
    if (rc < 0)
        return zdist_error_set(err, -EACCES, "checkpoint.dir: '%.200s' does not resolve: %s", dir, strerror(-rc));
    if (!s_in_roots(real, roots, n, true))
        return zdist_error_set(err, -EACCES,
                               "checkpoint.dir: '%.200s' resolves to '%.200s' (a symbolic link), outside the "
                               "coordinator's checkpoint roots (%s); name a directory under one of them "
                               "(zdist-coordinator --checkpoint-root DIR)", dir, real, rtext);
    return 0;
}

/* ---- the document's size in values, before jansson builds its tree ---- */

#define S_SCAN_DEPTH 32

typedef struct {
    bool object;
    size_t count;  /* elements so far, less one */
    char key[64];  /* an object's current key */
} s_level_t;

/* The field a container at `depth` is, as the job's messages name fields
   ("model.params.hidden"). */
static void
s_scan_path(const s_level_t *levels, int depth, char *out, size_t size)
{
    out[0] = 0;
    for (int i = 0; i < depth && i < S_SCAN_DEPTH; i++) {
        size_t len = strlen(out);
        if (levels[i].object)
            snprintf(out + len, size - len, "%s%s", len ? "." : "", levels[i].key);
        else
            snprintf(out + len, size - len, "[%zu]", levels[i].count);
    }
}

int
zdist_job_check_size(const char *text, zdist_error_t *err)
{
    s_level_t levels[S_SCAN_DEPTH];
    int depth = 0;
    size_t total = 0;
    bool want_key = false;
    for (const char *p = text; *p; p++) {
        s_level_t *top = depth > 0 && depth <= S_SCAN_DEPTH ? &levels[depth - 1] : NULL;
        if (*p == '"') {
            const char *start = ++p;
            while (*p && *p != '"')
                p += p[0] == '\\' && p[1] ? 2 : 1;
            if (want_key && top)
                snprintf(top->key, sizeof top->key, "%.*s", (int) (p - start < 63 ? p - start : 63), start);
            want_key = false;
            if (!*p)
                break;
        } else if (*p == '{' || *p == '[') {
            if (depth < S_SCAN_DEPTH)
                levels[depth] = (s_level_t){.object = *p == '{'};
            depth++;
            want_key = *p == '{';
        } else if (*p == '}' || *p == ']') {
            depth -= depth > 0;
        } else if (*p == ',') {
            total++;
            want_key = top && top->object;
            if (top && ++top->count >= ZDIST_JOB_MAX_ENTRIES) {
                char path[512];
                s_scan_path(levels, depth - 1, path, sizeof path);
                return zdist_error_set(err, -EINVAL, "%s: more than %d %s; no job field takes that many",
                                       path[0] ? path : "the job", ZDIST_JOB_MAX_ENTRIES,
                                       top->object ? "fields" : "entries");
            }
            if (total >= ZDIST_JOB_MAX_VALUES)
                return zdist_error_set(err, -EINVAL, "the job: more than %d JSON values; no job needs that many",
                                       ZDIST_JOB_MAX_VALUES);
        }
    }
    return 0;
}
