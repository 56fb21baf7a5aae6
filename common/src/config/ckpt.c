/* zdist ckpt: a checkpoint's variables read whole — psd shards gathered by row range, or a worker's state. */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdist/ckpt.h"
#include "zdist/file.h"
#include "zdist/wstate.h"

#define S_PSD_FORMAT "zdist-psd-checkpoint"
#define S_WSTATE_FORMAT "zdist-worker-state"
#define S_MAX_TEXT ((size_t)64 << 20)
#define S_MAX_SHARD_BYTES (UINT64_C(1) << 36)
#define S_MAX_VARS 65536

void
zdist_ckpt_release(zdist_ckpt_t *ckpt)
{
    if (!ckpt)
        return;
    for (size_t i = 0; ckpt->vars && i < ckpt->n; i++) {
        free(ckpt->vars[i].name);
        free(ckpt->vars[i].values);
    }
    free(ckpt->vars);
    free(ckpt->job_id);
    memset(ckpt, 0, sizeof *ckpt);
}

const zdist_ckpt_var_t *
zdist_ckpt_find(const zdist_ckpt_t *ckpt, const char *name)
{
    for (size_t i = 0; i < ckpt->n; i++)
        if (strcmp(ckpt->vars[i].name, name) == 0)
            return &ckpt->vars[i];
    return NULL;
}

static int
s_cmp_step(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int
zdist_ckpt_list(const char *root, bool complete, int64_t *steps, int max)
{
    DIR *d = opendir(root);
    if (!d)
        return -errno;
    int64_t *all = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "ckpt-", 5) != 0)
            continue;
        char *end = NULL, m[PATH_MAX];
        errno = 0;
        long long step = strtoll(e->d_name + 5, &end, 10);
        if (errno || !end || *end || end == e->d_name + 5 || step < 0)
            continue; /* ckpt-N.damaged, temporaries */
        int len = snprintf(m, sizeof m, "%s/%s/manifest.json", root, e->d_name);
        struct stat st;
        if (complete && (len < 0 || (size_t)len >= sizeof m || stat(m, &st) < 0))
            continue; /* incomplete: the manifest is written last */
        if (n == cap) {
            size_t c = cap ? 2 * cap : 64;
            int64_t *grown = realloc(all, c * sizeof *all);
            if (!grown) {
                rc = -ENOMEM;
                break;
            }
            all = grown, cap = c;
        }
        all[n++] = step;
    }
    closedir(d);
    if (rc == 0 && n > INT_MAX)
        rc = -EOVERFLOW;
    if (rc == 0) {
        if (n)
            qsort(all, n, sizeof *all, s_cmp_step);
        size_t keep = max > 0 && n > (size_t)max ? (size_t)max : n;
        if (max > 0 && keep)
            memcpy(steps, all + (n - keep), keep * sizeof *all);
        rc = (int)n;
    }
    free(all);
    return rc;
}

int64_t
zdist_ckpt_newest(const char *root)
{
    int64_t step;
    int n = zdist_ckpt_list(root, true, &step, 1);
    return n > 0 ? step : -ENOENT;
}

int
zdist_ckpt_locate(const char *path, char *ret, size_t size, zdist_error_t *err)
{
    char p[PATH_MAX];
    static const char *const names[] = {"manifest.json", "manifest-workers.json", "manifest-ps0.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int n = snprintf(p, sizeof p, "%s/%s", path, names[i]);
        if (n > 0 && (size_t)n < sizeof p && access(p, F_OK) == 0) {
            if ((size_t)snprintf(ret, size, "%s", path) >= size)
                return zdist_error_set(err, -ENAMETOOLONG, "%s: path too long", path);
            return 0;
        }
    }
    int64_t step = zdist_ckpt_newest(path);
    if (step < 0)
        return zdist_error_set(err, -ENOENT, "%s: no checkpoint here (neither a ckpt-STEP directory nor one holding "
                               "a complete ckpt-STEP/)", path);
    int n = snprintf(ret, size, "%s/ckpt-%lld", path, (long long)step);
    if (n < 0 || (size_t)n >= size)
        return zdist_error_set(err, -ENAMETOOLONG, "%s: path too long", path);
    return 0;
}

/* -EPROTO naming the file when m is not `format` version 1. */
static int
s_check_format(const json_t *m, const char *format, const char *path, zdist_error_t *err)
{
    const char *f = json_string_value(json_object_get(m, "format"));
    json_t *v = json_object_get(m, "version");
    if (!f || strcmp(f, format) != 0)
        return zdist_error_set(err, -EPROTO, "%s: format '%s', expected '%s': not a zdist checkpoint of this kind",
                               path, f ? f : "(none)", format);
    if (!json_is_integer(v) || json_integer_value(v) != ZDIST_CKPT_FORMAT_VERSION)
        return zdist_error_set(err, -EPROTO, "%s: checkpoint format version %lld was written by another zdist "
                               "version; zdist %s reads version %d", path, (long long)json_integer_value(v),
                               ZDIST_VERSION_STRING, ZDIST_CKPT_FORMAT_VERSION);
    return 0;
}

/* Appends a variable (name copied, shape from a JSON list). */
static zdist_ckpt_var_t *
s_add(zdist_ckpt_t *ck, const char *name, const zdist_shape_t *shape, zdist_error_t *err)
{
    int64_t n = 0;
    if (ck->n >= S_MAX_VARS || zdist_shape_num_elements(shape, &n) < 0 || (uint64_t)n > S_MAX_SHARD_BYTES / 4) {
        zdist_error_set(err, -EBADMSG, "variable '%s': too many variables or elements", name);
        return NULL;
    }
    zdist_ckpt_var_t *vars = realloc(ck->vars, (ck->n + 1) * sizeof *vars);
    if (!vars) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    ck->vars = vars;
    zdist_ckpt_var_t *v = &vars[ck->n];
    *v = (zdist_ckpt_var_t){.name = strdup(name), .shape = *shape, .n = n,
                            .values = calloc((size_t)(n ? n : 1), sizeof(float))};
    if (!v->name || !v->values) {
        free(v->name);
        free(v->values);
        zdist_error_set(err, -ENOMEM, "out of memory for variable '%s'", name);
        return NULL;
    }
    ck->n++;
    return v;
}

/* One shard file of a psd variable into v's rows [rs, re). */
static int
s_read_shard(const char *dir, const json_t *f, zdist_ckpt_var_t *v, int64_t width, int64_t *covered,
             zdist_error_t *err)
{
    const char *file = json_string_value(json_object_get(f, "file"));
    int64_t rs = json_integer_value(json_object_get(f, "row_start"));
    int64_t re = json_integer_value(json_object_get(f, "row_end"));
    uint64_t bytes = (uint64_t)json_integer_value(json_object_get(f, "bytes"));
    uint32_t crc = (uint32_t)json_integer_value(json_object_get(f, "crc32"));
    size_t nslots = json_array_size(json_object_get(json_object_get(f, "optimizer"), "slots"));
    int64_t rows = v->shape.rank ? v->shape.dims[0] : 1;
    uint64_t values = re > rs ? (uint64_t)(re - rs) * (uint64_t)width * sizeof(float) : 0;
    if (!file || strchr(file, '/') || rs < 0 || re <= rs || re > rows || bytes != values * (1 + nslots) ||
        bytes > S_MAX_SHARD_BYTES)
        return zdist_error_set(err, -EBADMSG, "%s: variable '%s': a file entry is inconsistent (file, "
                               "row_start/row_end, bytes)", dir, v->name);
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= sizeof path)
        return zdist_error_set(err, -ENAMETOOLONG, "%s/%s: path too long", dir, file);
    void *buf = NULL;
    size_t len = 0;
    int rc = zdist_file_read(path, (size_t)bytes, &buf, &len, err);
    if (rc == -EFBIG || (rc == 0 && (len != bytes || zdist_crc32(0, buf, len) != crc)))
        rc = zdist_error_set(err, -EBADMSG, "checkpoint file %s is truncated or corrupt (its bytes or CRC-32 "
                             "differ from its manifest)", path);
    if (rc == 0) {
        memcpy(v->values + rs * width, buf, (size_t)values);
        *covered += re - rs;
    }
    free(buf);
    return rc;
}

/* One variable entry of a ps task's manifest: added on first sight, its rows filled. */
static int
s_psd_var(zdist_ckpt_t *ck, const char *dir, const json_t *e, int64_t *covered, zdist_error_t *err)
{
    const char *name = json_string_value(json_object_get(e, "name"));
    const char *dtype = json_string_value(json_object_get(e, "dtype"));
    json_t *shape = json_object_get(e, "shape"), *d;
    zdist_shape_t sh = {0};
    size_t k;
    if (!name || !json_is_array(shape) || json_array_size(shape) > ZDIST_MAX_RANK)
        return zdist_error_set(err, -EBADMSG, "%s: a variable entry without a name or shape", dir);
    if (!dtype || strcmp(dtype, "float32") != 0)
        return zdist_error_set(err, -ENOTSUP, "%s: variable '%s' is %s; only float32 variables are read", dir,
                               name, dtype ? dtype : "(no dtype)");
    json_array_foreach(shape, k, d) {
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return zdist_error_set(err, -EBADMSG, "%s: variable '%s': a bad shape", dir, name);
        sh.dims[sh.rank++] = json_integer_value(d);
    }
    size_t idx = 0;
    while (idx < ck->n && strcmp(ck->vars[idx].name, name) != 0)
        idx++;
    zdist_ckpt_var_t *v = idx < ck->n ? &ck->vars[idx] : NULL;
    if (!v) {
        idx = ck->n;
        if (!(v = s_add(ck, name, &sh, err)))
            return err && err->code ? err->code : -ENOMEM;
    } else if (memcmp(&v->shape, &sh, sizeof sh) != 0) {
        return zdist_error_set(err, -EBADMSG, "%s: the ps tasks disagree on the shape of variable '%s'", dir, name);
    }
    int64_t rows = sh.rank ? sh.dims[0] : 1, width = rows > 0 ? v->n / rows : 0;
    json_t *f;
    int rc = 0;
    json_array_foreach(json_object_get(e, "files"), k, f) {
        if ((rc = s_read_shard(dir, f, v, width, &covered[idx], err)) < 0)
            return rc;
    }
    return 0;
}

/* The ps tasks' shards: every manifest-ps*.json, rows merged. */
static int
s_load_psd(const char *dir, zdist_ckpt_t *ck, zdist_error_t *err)
{
    char pattern[PATH_MAX];
    int n = snprintf(pattern, sizeof pattern, "%s/manifest-ps*.json", dir);
    if (n < 0 || (size_t)n >= sizeof pattern)
        return zdist_error_set(err, -ENAMETOOLONG, "%s: path too long", dir);
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc != 0) {
        if (rc != GLOB_NOMATCH)
            globfree(&g);
        return zdist_error_set(err, -ENOENT, "%s: not a checkpoint: no manifest-workers.json nor manifest-ps*.json "
                               "(give a ckpt-STEP directory, or the directory holding them)", dir);
    }
    int64_t *covered = calloc(S_MAX_VARS, sizeof *covered);
    rc = covered ? 0 : zdist_error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < g.gl_pathc && rc == 0; i++) {
        json_t *m = zdist_json_read(g.gl_pathv[i], S_MAX_TEXT, "crc32", err), *e;
        rc = !m ? (err && err->code ? err->code : -EBADMSG) : s_check_format(m, S_PSD_FORMAT, g.gl_pathv[i], err);
        if (rc == 0 && i == 0)
            ck->step = json_integer_value(json_object_get(m, "step"));
        else if (rc == 0 && json_integer_value(json_object_get(m, "step")) != ck->step)
            rc = zdist_error_set(err, -EBADMSG, "%s: step %lld, another ps task's manifest says %lld", g.gl_pathv[i],
                                 (long long)json_integer_value(json_object_get(m, "step")), (long long)ck->step);
        size_t k;
        json_array_foreach(json_object_get(m, "variables"), k, e) {
            if (rc == 0)
                rc = s_psd_var(ck, dir, e, covered, err);
        }
        json_decref(m);
    }
    for (size_t v = 0; rc == 0 && v < ck->n; v++) {
        int64_t rows = ck->vars[v].shape.rank ? ck->vars[v].shape.dims[0] : 1;
        if (covered[v] != rows)
            rc = zdist_error_set(err, -ENOENT, "%s: variable '%s': %lld of its %lld rows are in the checkpoint "
                                 "(a ps task's manifest missing?)", dir, ck->vars[v].name, (long long)covered[v],
                                 (long long)rows);
    }
    free(covered);
    globfree(&g);
    return rc;
}

/* A worker's state (zdist/wstate.h): float32 tensors that are not optimizer slots ("NAME/slotK"). */
static int
s_load_wstate(const char *dir, const char *manifest, zdist_ckpt_t *ck, zdist_error_t *err)
{
    json_t *m = zdist_json_read(manifest, S_MAX_TEXT, "manifest_crc32", err);
    int rc = !m ? (err && err->code ? err->code : -EBADMSG) : s_check_format(m, S_WSTATE_FORMAT, manifest, err);
    json_decref(m);
    zdist_wstate_t st = {0};
    if (rc == 0)
        rc = zdist_wstate_load(dir, &st, err);
    ck->step = st.step;
    for (size_t i = 0; rc == 0 && i < st.n; i++) {
        const zdist_tensor_t *t = &st.tensors[i];
        const char *slot = strrchr(t->name, '/');
        size_t digits = slot && strncmp(slot, "/slot", 5) == 0 ? strspn(slot + 5, "0123456789") : 0;
        if (t->dtype != ZDIST_DTYPE_FLOAT32 || (digits > 0 && slot[5 + digits] == '\0'))
            continue; /* an optimizer slot, "NAME/slotK" (worker_agent's GET_STATE) */
        zdist_ckpt_var_t *v = s_add(ck, t->name, &t->shape, err);
        if (!v || t->nbytes != (size_t)v->n * sizeof(float))
            rc = v ? zdist_error_set(err, -EBADMSG, "%s: tensor '%s' size disagrees with its shape", manifest,
                                     t->name)
                   : (err && err->code ? err->code : -ENOMEM);
        else
            memcpy(v->values, t->data, t->nbytes);
    }
    zdist_wstate_release(&st);
    return rc;
}

/* Takes the job's namespace "JOB_ID/" off every name when each has it. */
static void
s_strip_namespace(zdist_ckpt_t *ck)
{
    size_t plen = ck->job_id ? strlen(ck->job_id) : 0;
    if (plen == 0)
        return;
    for (size_t i = 0; i < ck->n; i++)
        if (strncmp(ck->vars[i].name, ck->job_id, plen) != 0 || ck->vars[i].name[plen] != '/' ||
            !ck->vars[i].name[plen + 1])
            return;
    for (size_t i = 0; i < ck->n; i++)
        memmove(ck->vars[i].name, ck->vars[i].name + plen + 1, strlen(ck->vars[i].name + plen + 1) + 1);
}

int
zdist_ckpt_load(const char *dir, zdist_ckpt_t *ret, zdist_error_t *err)
{
    memset(ret, 0, sizeof *ret);
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (n < 0 || (size_t)n >= sizeof path)
        return zdist_error_set(err, -ENAMETOOLONG, "%s: path too long", dir);
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return zdist_error_set(err, -ENOENT, "%s: no such checkpoint directory", dir);
    if (access(path, F_OK) == 0) { /* the coordinator's: names the job whose namespace the psd used */
        json_t *m = zdist_json_read(path, S_MAX_TEXT, "crc32", err);
        if (!m)
            return err && err->code ? err->code : -EBADMSG;
        const char *id = json_string_value(json_object_get(m, "job_id"));
        ret->job_id = id ? strdup(id) : NULL;
        json_decref(m);
    }
    snprintf(path, sizeof path, "%s/manifest-workers.json", dir);
    bool wstate = access(path, F_OK) == 0;
    int rc = wstate ? s_load_wstate(dir, path, ret, err) : s_load_psd(dir, ret, err);
    if (rc < 0)
        zdist_ckpt_release(ret);
    else if (!wstate) /* a worker's state is saved without the namespace */
        s_strip_namespace(ret);
    return rc;
}
