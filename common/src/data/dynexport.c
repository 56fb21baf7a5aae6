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
#include "zdist/dynfile.h"
#include "zdist/file.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint and .npy files are little-endian: a big-endian host must swap"
#endif

/* The data files are read by zdist_dynfile (zdist/dynfile.h), as the psd reads them. */

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

/* One file replayed onto cur as it is read: a full replaces cur; a
   delta's tombstones (read first, ascending) and rows (ascending) merge
   with cur in one pass into out. */
typedef struct {
    s_rows_t *cur, out;
    int kind;
    const char *name;
    int64_t dim;
    int64_t *tomb;
    size_t ntomb, i, t;
} s_merge_t;

static int
s_merge_head(void *arg, const zdist_dynfile_head_t *h, const char *name)
{
    s_merge_t *m = arg;
    if (h->kind != m->kind || h->dim != (uint64_t) m->dim || h->name_len != strlen(m->name) ||
        memcmp(name, m->name, h->name_len) != 0)
        return -EBADMSG;
    size_t n = (m->kind == ZDIST_DYNFILE_FULL ? 0 : m->cur->n) + h->rows + 1;
    m->out.ids = malloc(n * sizeof *m->out.ids);
    m->out.vals = malloc(n * (size_t) m->dim * sizeof(float));
    m->tomb = malloc((h->tombstones + 1) * sizeof *m->tomb);
    if (!m->out.ids || !m->out.vals || !m->tomb)
        return -ENOMEM;
    m->i = m->kind == ZDIST_DYNFILE_FULL ? m->cur->n : 0;
    return 0;
}

static int
s_merge_tombstone(void *arg, int64_t id)
{
    s_merge_t *m = arg;
    m->tomb[m->ntomb++] = id;
    return 0;
}

/* cur's rows below `below` (all when `all`) into out, unless tombstoned. */
static void
s_merge_upto(s_merge_t *m, int64_t below, bool all)
{
    size_t vb = (size_t) m->dim * sizeof(float);
    for (; m->i < m->cur->n && (all || m->cur->ids[m->i] < below); m->i++) {
        int64_t id = m->cur->ids[m->i];
        while (m->t < m->ntomb && m->tomb[m->t] < id)
            m->t++;
        if (m->t < m->ntomb && m->tomb[m->t] == id)
            continue;
        m->out.ids[m->out.n] = id;
        memcpy(m->out.vals + m->out.n++ * (size_t) m->dim, m->cur->vals + m->i * (size_t) m->dim, vb);
    }
}

static int
s_merge_row(void *arg, const zdist_dynfile_row_t *row)
{
    s_merge_t *m = arg;
    s_merge_upto(m, row->id, false);
    if (m->i < m->cur->n && m->cur->ids[m->i] == row->id)
        m->i++; /* the file's row replaces it */
    m->out.ids[m->out.n] = row->id;
    memcpy(m->out.vals + m->out.n++ * (size_t) m->dim, row->values, (size_t) m->dim * sizeof(float));
    return 0;
}

/* Replays the file at path (bytes long, CRC-32 crc, as mpath says) onto cur. */
static int
s_apply(s_rows_t *cur, const char *path, const char *mpath, uint64_t bytes, uint32_t crc, int kind,
        const char *name, int64_t dim, zdist_error_t *err)
{
    zdist_error_t spare;
    err = err ? err : &spare;
    s_merge_t m = {.cur = cur, .kind = kind, .name = name, .dim = dim};
    zdist_dynfile_visitor_t v = {&m, s_merge_head, s_merge_tombstone, s_merge_row, NULL};
    memset(err, 0, sizeof *err);
    int rc = zdist_dynfile_read(path, mpath, bytes, crc, &v, err);
    if (rc == -ENOMEM && !err->text[0])
        rc = zdist_error_set(err, rc, "out of memory reading %s", path);
    else if (rc < 0 && !err->text[0])
        rc = zdist_error_set(err, -EBADMSG, "dynamic table file %s is damaged: its kind, dim or table is not "
                             "what %s says", path, mpath);
    if (rc == 0) {
        s_merge_upto(&m, 0, true);
        s_rows_free(cur);
        *cur = m.out;
    } else {
        s_rows_free(&m.out);
    }
    free(m.tomb);
    return rc;
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
        if (bytes < 0 || crc < 0 || crc > UINT32_MAX)
            return zdist_error_set(err, -EBADMSG, "%s: a chain entry of '%s' has a bad bytes or crc32", mpath,
                                   name);
        rc = s_apply(ret, path, mpath, (uint64_t) bytes, (uint32_t) crc,
                     strcmp(kind, "full") == 0 ? ZDIST_DYNFILE_FULL : ZDIST_DYNFILE_DELTA, name, dim, err);
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

/* all's rows ascending by id (the tasks' sets are disjoint), in place. */
static int
s_sort(s_rows_t *all, int64_t dim, zdist_error_t *err)
{
    const int64_t **order = malloc((all->n + 1) * sizeof *order);
    s_rows_t sorted = {.ids = malloc((all->n + 1) * sizeof(int64_t)),
                       .vals = malloc((all->n + 1) * (size_t) dim * sizeof(float)), .n = all->n};
    if (!order || !sorted.ids || !sorted.vals) {
        free(order);
        s_rows_free(&sorted);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < all->n; i++)
        order[i] = &all->ids[i];
    qsort(order, all->n, sizeof *order, s_cmp_id);
    for (size_t i = 0; i < all->n; i++) {
        size_t at = (size_t) (order[i] - all->ids);
        sorted.ids[i] = all->ids[at];
        memcpy(sorted.vals + i * (size_t) dim, all->vals + at * (size_t) dim, (size_t) dim * sizeof(float));
    }
    free(order);
    s_rows_free(all);
    *all = sorted;
    return 0;
}

/* Writes rows (ascending) as the .npy pair. */
static int
s_write(const s_rows_t *all, int64_t dim, const char *ids_path, const char *vectors_path, zdist_error_t *err)
{
    zdist_file_out_t *ids = zdist_file_out_new(ids_path, 0644, err);
    zdist_file_out_t *vec = ids ? zdist_file_out_new(vectors_path, 0644, err) : NULL;
    int rc = vec ? 0 : (err && err->code ? err->code : -EIO);
    char head[256];
    if (rc == 0 && ((rc = zdist_file_out_write(ids, head, zdist_npy_header(head, "<i8", all->n, 0))) < 0 ||
                    (rc = zdist_file_out_write(vec, head, zdist_npy_header(head, "<f4", all->n, dim))) < 0 ||
                    (rc = zdist_file_out_write(ids, all->ids, all->n * sizeof(int64_t))) < 0 ||
                    (rc = zdist_file_out_write(vec, all->vals, all->n * (size_t) dim * sizeof(float))) < 0))
        zdist_error_set(err, rc, "cannot write %s and %s: %s", ids_path, vectors_path, strerror(-rc));
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

/* Every saving task's rows of `table` in dir, ascending by id. */
static int
s_collect(const char *dir, const char *table, s_rows_t *all, int64_t *ret_dim, zdist_error_t *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return zdist_error_set(err, -errno, "cannot open checkpoint directory %s: %s", dir, strerror(errno));
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
        rc = s_manifest(dir, mpath, table, &step, &dim, all, &found, err);
    }
    closedir(d);
    if (rc == 0 && manifests == 0)
        rc = zdist_error_set(err, -ENOENT, "%s holds no dynamic tables (no dynamic-ps*.json)", dir);
    else if (rc == 0 && !found)
        rc = zdist_error_set(err, -ENOENT, "checkpoint %s has no dynamic table '%s'", dir, table);
    if (rc == 0)
        rc = s_sort(all, dim, err);
    *ret_dim = dim;
    return rc;
}

int
zdist_dynexport_read(const char *dir, const char *table, int64_t **ret_ids, float **ret_vectors,
                     uint64_t *ret_rows, int64_t *ret_dim, zdist_error_t *err)
{
    s_rows_t all = {0};
    int64_t dim = 0;
    int rc = s_collect(dir, table, &all, &dim, err);
    if (rc < 0) {
        s_rows_free(&all);
        return rc;
    }
    *ret_ids = all.ids;
    *ret_vectors = all.vals;
    *ret_rows = all.n;
    if (ret_dim)
        *ret_dim = dim;
    return 0;
}

int
zdist_dynexport_npy(const char *dir, const char *table, const char *ids_path, const char *vectors_path,
                    uint64_t *ret_rows, zdist_error_t *err)
{
    s_rows_t all = {0};
    int64_t dim = 0;
    int rc = s_collect(dir, table, &all, &dim, err);
    if (rc == 0)
        rc = s_write(&all, dim, ids_path, vectors_path, err);
    if (rc == 0 && ret_rows)
        *ret_rows = all.n;
    s_rows_free(&all);
    return rc;
}
