/* zdist_dynexport: a dynamic table's chain of full and delta files replayed from a checkpoint into a .npy
 * pair. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/dynexport.h"
#include "zdist/file.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint and .npy files are little-endian: a big-endian host must swap"
#endif

/* The data file's format (psd/psd_dyntable_file.c, version 1). */
#define S_HEADER 64
#define S_FOOTER 16
#define S_KIND_FULL 1
#define S_KIND_DELTA 2
#define S_MAX_FILE ((size_t) 1 << 40)

/* Rows ascending by id, dim floats each. */
typedef struct {
    int64_t *ids;
    float *vals;
    size_t n;
} s_rows_t;

static void
s_rows_free(s_rows_t *r)
{
    free(r->ids);
    free(r->vals);
    *r = (s_rows_t){0};
}

size_t
zdist_npy_header(char *out, const char *descr, uint64_t rows, int64_t dim)
{
    char dict[160];
    int len =
        dim > 0 ? snprintf(dict, sizeof dict,
                           "{'descr': '%s', 'fortran_order': False, 'shape': (%" PRIu64 ", %" PRId64 "), }",
                           descr, rows, dim)
                : snprintf(dict, sizeof dict,
                           "{'descr': '%s', 'fortran_order': False, 'shape': (%" PRIu64 ",), }", descr, rows);
    size_t total = (10 + (size_t) len + 1 + 63) & ~(size_t) 63;
    uint16_t hlen = (uint16_t) (total - 10);
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    memcpy(out + 8, &hlen, 2);
    memset(out + 10, ' ', total - 10);
    memcpy(out + 10, dict, (size_t) len);
    out[total - 1] = '\n';
    return total;
}

static uint32_t
s_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t
s_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static int
s_bad(zdist_error_t *err, const char *path, const char *what)
{
    return zdist_error_set(err, -EBADMSG, "dynamic table file %s is damaged: %s", path, what);
}

/* Replays one file (buf, len) onto cur: a full replaces it; a delta
   removes its tombstones and puts its rows (both ascending: one merge). */
static int
s_apply(s_rows_t *cur, const uint8_t *buf, size_t len, int kind, const char *name, int64_t dim,
        const char *path, zdist_error_t *err)
{
    if (len < S_HEADER + S_FOOTER || memcmp(buf, "ZDDYNTB1", 8) != 0 || s_u32(buf + 8) != 1)
        return s_bad(err, path, "not a version 1 dynamic table file");
    uint64_t namelen = s_u32(buf + 44), ntomb = s_u64(buf + 48), slots = s_u32(buf + 28);
    uint64_t nrows = s_u64(buf + len - S_FOOTER);
    if ((int) s_u32(buf + 12) != kind || s_u32(buf + 24) != (uint64_t) dim ||
        memcmp(buf + len - 8, "ZDDYNEND", 8) != 0)
        return s_bad(err, path, "its kind, dim or footer is not what its manifest says");
    uint64_t off = S_HEADER + ((namelen + 7) & ~(uint64_t) 7), stride = 24 + 4 * (uint64_t) dim * (1 + slots);
    if (namelen != strlen(name) || off > len || memcmp(buf + S_HEADER, name, namelen) != 0)
        return s_bad(err, path, "it holds another table");
    if (ntomb > len / 8 || nrows > len / stride || off + ntomb * 8 + nrows * stride + S_FOOTER != len)
        return s_bad(err, path, "its length does not match its rows and tombstones");
    const uint8_t *tomb = buf + off, *rows = tomb + ntomb * 8;
    s_rows_t out = {.ids = malloc((cur->n + nrows + 1) * sizeof *out.ids),
                    .vals = malloc((cur->n + nrows + 1) * (size_t) dim * sizeof(float))};
    if (!out.ids || !out.vals) {
        s_rows_free(&out);
        return zdist_error_set(err, -ENOMEM, "out of memory reading %s", path);
    }
    size_t i = kind == S_KIND_FULL ? cur->n : 0, t = 0, vb = (size_t) dim * sizeof(float);
    for (uint64_t j = 0; i < cur->n || j < nrows;) {
        int64_t fid = j < nrows ? (int64_t) s_u64(rows + j * stride) : 0;
        if (i < cur->n && (j == nrows || cur->ids[i] < fid)) {
            while (t < ntomb && (int64_t) s_u64(tomb + 8 * t) < cur->ids[i])
                t++;
            if (!(t < ntomb && (int64_t) s_u64(tomb + 8 * t) == cur->ids[i])) {
                out.ids[out.n] = cur->ids[i];
                memcpy(out.vals + out.n++ * (size_t) dim, cur->vals + i * (size_t) dim, vb);
            }
            i++;
            continue;
        }
        if (i < cur->n && cur->ids[i] == fid)
            i++; /* the file's row replaces it */
        out.ids[out.n] = fid;
        memcpy(out.vals + out.n++ * (size_t) dim, rows + j * stride + 24, vb);
        j++;
    }
    s_rows_free(cur);
    *cur = out;
    return 0;
}

/* A name that stays in its directory (no '/', no "." or ".."). */
static bool
s_plain(const char *s)
{
    return s && s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Replays one task's chain (a manifest's table entry) onto a new row set. */
static int
s_chain(const char *dir, json_t *entry, const char *name, int64_t dim, const char *mpath, s_rows_t *ret,
        zdist_error_t *err)
{
    size_t k;
    json_t *link;
    int rc = 0;
    json_array_foreach(json_object_get(entry, "chain"), k, link)
    {
        const char *d = json_string_value(json_object_get(link, "dir"));
        const char *f = json_string_value(json_object_get(link, "file"));
        const char *kind = json_string_value(json_object_get(link, "kind"));
        json_int_t bytes = json_integer_value(json_object_get(link, "bytes"));
        json_int_t crc = json_integer_value(json_object_get(link, "crc32"));
        if (!d || !s_plain(f) || !kind || (strcmp(d, ".") != 0 && !s_plain(d)))
            return zdist_error_set(err, -EBADMSG, "%s: a chain entry of '%s' is not {dir, file, kind, ...}",
                                   mpath, name);
        char path[8192];
        if (strcmp(d, ".") == 0)
            snprintf(path, sizeof path, "%s/%s", dir, f);
        else
            snprintf(path, sizeof path, "%s/../%s/%s", dir, d, f);
        void *buf = NULL;
        size_t len = 0;
        if ((rc = zdist_file_read(path, S_MAX_FILE, &buf, &len, err)) < 0)
            return rc == -ENOENT ? zdist_error_set(err, -EBADMSG, "%s (listed in %s) is missing", path, mpath)
                                 : rc;
        if ((json_int_t) len != bytes || (json_int_t) zdist_crc32(0, buf, len) != crc)
            rc = zdist_error_set(
                err, -EBADMSG,
                "%s is truncated or corrupt: %zu bytes, CRC-32 %08" PRIx32 "; %s says %lld bytes, %08llx",
                path, len, zdist_crc32(0, buf, len), mpath, (long long) bytes, (long long) crc);
        else
            rc = s_apply(ret, buf, len, strcmp(kind, "full") == 0 ? S_KIND_FULL : S_KIND_DELTA, name, dim,
                         path, err);
        free(buf);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The table entry of manifest root that `want` names: exactly, or as the
   part after "JOB/"; -EINVAL when two tables end so. NULL: none. */
static json_t *
s_find(json_t *root, const char *want, const char *mpath, int *rc, zdist_error_t *err)
{
    size_t k, wl = strlen(want);
    json_t *t, *found = NULL;
    json_array_foreach(json_object_get(root, "tables"), k, t)
    {
        const char *n = json_string_value(json_object_get(t, "name"));
        size_t nl = n ? strlen(n) : 0;
        if (n && strcmp(n, want) == 0)
            return t;
        if (n && nl > wl && n[nl - wl - 1] == '/' && strcmp(n + nl - wl, want) == 0) {
            if (found) {
                *rc = zdist_error_set(err, -EINVAL,
                                      "%s: '%s' and '%s' both end in '%s': name the table as JOB/TABLE",
                                      mpath, json_string_value(json_object_get(found, "name")), n, want);
                return NULL;
            }
            found = t;
        }
    }
    return found;
}

static int
s_cmp_id(const void *a, const void *b)
{
    int64_t x = **(const int64_t *const *) a, y = **(const int64_t *const *) b;
    return (x > y) - (x < y);
}

/* Writes all's rows ascending by id (the tasks' sets are disjoint). */
static int
s_write(s_rows_t *all, int64_t dim, const char *ids_path, const char *vectors_path, zdist_error_t *err)
{
    const int64_t **order = malloc((all->n + 1) * sizeof *order);
    if (!order)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < all->n; i++)
        order[i] = &all->ids[i];
    qsort(order, all->n, sizeof *order, s_cmp_id);
    zdist_file_out_t *ids = zdist_file_out_new(ids_path, 0644, err);
    zdist_file_out_t *vec = ids ? zdist_file_out_new(vectors_path, 0644, err) : NULL;
    int rc = vec ? 0 : (err && err->code ? err->code : -EIO);
    char head[256];
    if (rc == 0) {
        zdist_file_out_write(ids, head, zdist_npy_header(head, "<i8", all->n, 0));
        zdist_file_out_write(vec, head, zdist_npy_header(head, "<f4", all->n, dim));
    }
    for (size_t i = 0; rc == 0 && i < all->n; i++) {
        size_t at = (size_t) (order[i] - all->ids);
        if ((rc = zdist_file_out_write(ids, order[i], sizeof(int64_t))) == 0)
            rc = zdist_file_out_write(vec, all->vals + at * (size_t) dim, (size_t) dim * sizeof(float));
        if (rc < 0)
            zdist_error_set(err, rc, "cannot write %s and %s: %s", ids_path, vectors_path, strerror(-rc));
    }
    free(order);
    /* The vectors first: a pair cut short by a crash has new vectors under old ids, told by their lengths. */
    if (rc == 0)
        rc = zdist_file_out_commit(&vec, NULL, NULL, err);
    if (rc == 0)
        rc = zdist_file_out_commit(&ids, NULL, NULL, err);
    zdist_file_out_destroy(&ids);
    zdist_file_out_destroy(&vec);
    return rc;
}

/* Adds task's rows to all (takes them). */
static int
s_gather(s_rows_t *all, s_rows_t *task, int64_t dim, zdist_error_t *err)
{
    int64_t *ids = realloc(all->ids, (all->n + task->n + 1) * sizeof *ids);
    if (ids)
        all->ids = ids;
    float *vals = realloc(all->vals, (all->n + task->n + 1) * (size_t) dim * sizeof *vals);
    if (vals)
        all->vals = vals;
    if (!ids || !vals)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    memcpy(all->ids + all->n, task->ids, task->n * sizeof *ids);
    memcpy(all->vals + all->n * (size_t) dim, task->vals, task->n * (size_t) dim * sizeof *vals);
    all->n += task->n;
    s_rows_free(task);
    return 0;
}

/* One manifest: its CRC, its step (as the others'), its chain of the table. */
static int
s_manifest(const char *dir, const char *mpath, const char *table, int64_t *step, int64_t *dim, s_rows_t *all,
           bool *found, zdist_error_t *err)
{
    json_error_t jerr;
    json_t *root = json_load_file(mpath, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return zdist_error_set(err, -EBADMSG, "%s does not parse: line %d: %s", mpath, jerr.line, jerr.text);
    int rc = zdist_json_crc_check(root, "crc32", true, mpath, err);
    json_int_t s = json_integer_value(json_object_get(root, "step"));
    if (rc == 0 && *step >= 0 && s != *step)
        rc = zdist_error_set(err, -EBADMSG, "%s is at step %lld, another manifest of %s at %lld", mpath,
                             (long long) s, dir, (long long) *step);
    *step = s;
    json_t *entry = rc == 0 ? s_find(root, table, mpath, &rc, err) : NULL;
    if (entry) {
        json_int_t d = json_integer_value(json_object_get(entry, "dim"));
        const char *name = json_string_value(json_object_get(entry, "name"));
        s_rows_t task = {0};
        if (d < 1 || (*dim > 0 && d != *dim))
            rc = zdist_error_set(err, -EBADMSG, "%s: table '%s' has dim %lld, another manifest's %lld", mpath,
                                 name, (long long) d, (long long) *dim);
        *dim = d;
        if (rc == 0 && (rc = s_chain(dir, entry, name, d, mpath, &task, err)) == 0)
            rc = s_gather(all, &task, d, err);
        s_rows_free(&task);
        *found = true;
    }
    json_decref(root);
    return rc;
}

int
zdist_dynexport_npy(const char *dir, const char *table, const char *ids_path, const char *vectors_path,
                    uint64_t *ret_rows, zdist_error_t *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return zdist_error_set(err, -errno, "cannot open checkpoint directory %s: %s", dir, strerror(errno));
    s_rows_t all = {0};
    int64_t step = -1, dim = 0;
    bool found = false;
    int rc = 0, manifests = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "dynamic-ps", 10) != 0 || len < 16 ||
            strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char mpath[8192];
        snprintf(mpath, sizeof mpath, "%s/%s", dir, e->d_name);
        manifests++;
        rc = s_manifest(dir, mpath, table, &step, &dim, &all, &found, err);
    }
    closedir(d);
    if (rc == 0 && manifests == 0)
        rc = zdist_error_set(err, -ENOENT, "%s holds no dynamic tables (no dynamic-ps*.json)", dir);
    else if (rc == 0 && !found)
        rc = zdist_error_set(err, -ENOENT, "checkpoint %s has no dynamic table '%s'", dir, table);
    if (rc == 0)
        rc = s_write(&all, dim, ids_path, vectors_path, err);
    if (rc == 0 && ret_rows)
        *ret_rows = all.n;
    s_rows_free(&all);
    return rc;
}
