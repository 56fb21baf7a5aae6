/* job_confine: a job's dataset files held to the operator's data roots (no "..", no symlink out, nothing elsewhere). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/job.h"

/* path lies under root (both absolute; root canonical, no trailing slash
   unless it is "/"), compared component-wise after dropping "." and
   repeated slashes from path. */
static bool
s_under(const char *path, const char *root)
{
    size_t rl = strlen(root);
    if (rl == 1 && root[0] == '/')
        return path[0] == '/';
    const char *p = path, *r = root;
    /* Walk both, path's "//" and "/./" skipped. */
    while (*r) {
        if (*p != '/' || *r != '/')
            return false;
        while (*p == '/' || (p[0] == '.' && (p[1] == '/' || p[1] == 0) && p[-1] == '/'))
            p++;
        r++;
        size_t rn = strcspn(r, "/"), pn = strcspn(p, "/");
        if (rn != pn || memcmp(r, p, rn) != 0)
            return false;
        r += rn;
        p += pn;
    }
    /* The root is used up: what follows in path must be below it. */
    while (*p == '/' || (p[0] == '.' && (p[1] == '/' || p[1] == 0) && p[-1] == '/'))
        p++;
    return *p != 0;
}

static bool
s_has_dotdot(const char *path)
{
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return true;
        p += n;
        while (*p == '/')
            p++;
    }
    return false;
}

static void
s_roots_text(const char *const *roots, size_t n, char *buf, size_t size)
{
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s--data-root %s", i ? ", " : "", roots[i]);
    }
}

static int
s_confine(char **path, const char *field, const char *const *roots, size_t n, zdist_error_t *err)
{
    if (!*path)
        return 0;
    char rtext[1024];
    s_roots_text(roots, n, rtext, sizeof rtext);
    if (n == 0)
        snprintf(rtext, sizeof rtext, "none: this worker reads no data files, only synthetic data");
    const char *p = *path;
    if (p[0] != '/')
        return zdist_error_set(err, -EACCES,
                               "%s: '%.200s' is a relative path; a worker reads data only under its data roots (%s): "
                               "give the absolute path of a file there", field, p, rtext);
    if (s_has_dotdot(p))
        return zdist_error_set(err, -EACCES,
                               "%s: '%.200s' contains '..'; name the file under the data roots (%s) without '..'",
                               field, p, rtext);
    bool inside = false;
    for (size_t i = 0; i < n && !inside; i++)
        inside = s_under(p, roots[i]);
    if (!inside)
        return zdist_error_set(err, -EACCES,
                               "%s: '%.200s' is outside the data roots (%s); copy the data under one of them or ask "
                               "the operator to add a root", field, p, rtext);
    char real[PATH_MAX];
    if (!realpath(p, real)) {
        int e = errno;
        return zdist_error_set(err, e == ENOENT || e == ENOTDIR ? -ENOENT : -EACCES, "%s: '%.200s': %s", field, p,
                               strerror(e));
    }
    inside = false;
    for (size_t i = 0; i < n && !inside; i++)
        inside = s_under(real, roots[i]);
    if (!inside)
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

int
zdist_job_confine_data(zdist_job_t *job, const char *const *roots, size_t n, zdist_error_t *err)
{
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
    return 0;
}
