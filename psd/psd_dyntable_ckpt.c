/* psd_dyntable_ckpt: chains of full and delta files (psd_dyntable_file), manifests, a resharding restore. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "psd_dyntable_ckpt.h"
#include "psd_dyntable_file.h"
#include "zdist/file.h"

#define S_FORMAT "zdist-psd-dynamic"
#define S_VERSION 1
#define S_PATH_MAX 4096

/* One file of a chain: its dir as given when saving, resolved when restoring. */
typedef psd_dyntable_file_t s_link_t;

/* A table's full and the deltas after it. */
typedef struct {
    char *name;
    const psd_dyntable_t *table; /* the table the chain was saved from */
    s_link_t *links;
    size_t nlinks;
} s_chain_t;

struct psd_dyntable_ckpt_t {
    int full_every;
    int ps_task;
    s_chain_t *chains;
    size_t nchains;
};

/* ---------------------------------------------------------------- chains */

static void
s_chains_free(s_chain_t *chains, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < chains[i].nlinks; k++)
            psd_dyntable_file_clear(&chains[i].links[k]);
        free(chains[i].links);
        free(chains[i].name);
    }
    free(chains);
}

psd_dyntable_ckpt_t *
psd_dyntable_ckpt_new(int full_every)
{
    if (full_every < 1)
        return NULL;
    psd_dyntable_ckpt_t *self = calloc(1, sizeof *self);
    if (self)
        self->full_every = full_every;
    return self;
}

void
psd_dyntable_ckpt_set_full_every(psd_dyntable_ckpt_t *self, int full_every)
{
    if (full_every >= 1)
        self->full_every = full_every;
}

void
psd_dyntable_ckpt_destroy(psd_dyntable_ckpt_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    s_chains_free((*self_p)->chains, (*self_p)->nchains);
    free(*self_p);
    *self_p = NULL;
}

/* ---------------------------------------------------------------- paths */

/* dir without trailing slashes, in out (S_PATH_MAX). */
static int
s_trim(const char *dir, char *out, zdist_error_t *err)
{
    size_t len = dir ? strlen(dir) : 0;
    while (len > 1 && dir[len - 1] == '/')
        len--;
    if (len == 0 || len >= S_PATH_MAX)
        return zdist_error_set(err, -EINVAL, "'%s' is not a checkpoint directory", dir ? dir : "");
    memcpy(out, dir, len);
    out[len] = 0;
    return 0;
}

/* The directory holding dir (trimmed), into parent (S_PATH_MAX); its base name returned. */
static const char *
s_parent(const char *dir, char *parent)
{
    const char *slash = strrchr(dir, '/');
    if (!slash) {
        strcpy(parent, ".");
        return dir;
    }
    size_t len = slash == dir ? 1 : (size_t) (slash - dir);
    memcpy(parent, dir, len);
    parent[len] = 0;
    return slash + 1;
}

/* How a manifest in dir names the directory `other`: "." or the name of
   a directory beside dir; NULL when it is neither. */
static const char *
s_rel_dir(const char *other, const char *dir)
{
    if (strcmp(other, dir) == 0)
        return ".";
    char p1[S_PATH_MAX], p2[S_PATH_MAX];
    const char *base = s_parent(other, p1);
    s_parent(dir, p2);
    return strcmp(p1, p2) == 0 && base[0] && strcmp(base, "..") != 0 && strcmp(base, ".") != 0 ? base : NULL;
}

/* A name a manifest may give a directory or file: one path component. */
static bool
s_plain_name(const char *name, bool dot_ok)
{
    if (!name || !name[0] || strchr(name, '/') || strcmp(name, "..") == 0)
        return false;
    return dot_ok || strcmp(name, ".") != 0;
}

/* ---------------------------------------------------------------- save */

static const s_chain_t *
s_chain_of(const psd_dyntable_ckpt_t *self, const char *name)
{
    for (size_t i = 0; i < self->nchains; i++)
        if (strcmp(self->chains[i].name, name) == 0)
            return &self->chains[i];
    return NULL;
}

/* Whether this save may write deltas on the chain: the same tables and
   task, fewer than full_every saves since the full, and every file of it
   still where it was, as long as it was, in dir or beside it. */
static bool
s_chain_continues(const psd_dyntable_ckpt_t *self, const psd_dyntable_ckpt_table_t *tables, size_t n,
                  const char *dir, int ps_task)
{
    if (self->nchains != n || n == 0 || self->ps_task != ps_task)
        return false;
    for (size_t i = 0; i < n; i++) {
        const s_chain_t *c = s_chain_of(self, tables[i].name);
        if (!c || c->table != tables[i].table || c->nlinks == 0 || c->nlinks >= (size_t) self->full_every)
            return false;
        for (size_t k = 0; k < c->nlinks; k++) {
            char path[2 * S_PATH_MAX];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", c->links[k].dir, c->links[k].file);
            if (!s_rel_dir(c->links[k].dir, dir) || stat(path, &st) < 0 ||
                (uint64_t) st.st_size != c->links[k].bytes)
                return false;
        }
    }
    return true;
}

/* The chains after this save: each table's earlier chain (unless full)
   with its new link appended. Takes the links' strings. */
static int
s_chains_next(const psd_dyntable_ckpt_t *self, const psd_dyntable_ckpt_table_t *tables, size_t n, bool full,
              s_link_t *links, s_chain_t **ret)
{
    s_chain_t *chains = calloc(n ? n : 1, sizeof *chains);
    if (!chains)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const s_chain_t *old = full ? NULL : s_chain_of(self, tables[i].name);
        size_t nold = old ? old->nlinks : 0;
        s_chain_t *c = &chains[i];
        c->table = tables[i].table;
        c->name = strdup(tables[i].name);
        c->links = calloc(nold + 1, sizeof *c->links);
        if (!c->name || !c->links) {
            s_chains_free(chains, i + 1);
            return -ENOMEM;
        }
        for (size_t k = 0; k < nold; k++) {
            s_link_t *l = &c->links[c->nlinks++];
            *l = old->links[k];
            l->dir = strdup(old->links[k].dir);
            l->file = strdup(old->links[k].file);
            if (!l->dir || !l->file) {
                s_chains_free(chains, i + 1);
                return -ENOMEM;
            }
        }
        c->links[c->nlinks++] = links[i];
        links[i] = (s_link_t){0};
    }
    *ret = chains;
    return 0;
}

static json_t *
s_manifest(const s_chain_t *chains, size_t n, const psd_dyntable_ckpt_table_t *tables, const char *dir,
           int64_t step, int ps_task, int num_ps)
{
    json_t *jtables = json_array(), *needs = json_array();
    json_t *root =
        json_pack("{s:s, s:i, s:I, s:i, s:i, s:o, s:o}", "format", S_FORMAT, "version", S_VERSION, "step",
                  (json_int_t) step, "ps_task", ps_task, "num_ps", num_ps, "needs", needs, "tables", jtables);
    for (size_t i = 0; root && i < n; i++) {
        const zdist_optim_config_t *optim = psd_dyntable_optim(tables[i].table);
        json_t *chain = json_array();
        json_t *entry = json_pack("{s:s, s:I, s:s, s:i, s:o}", "name", chains[i].name, "dim",
                                  (json_int_t) psd_dyntable_dim(tables[i].table), "optimizer",
                                  zdist_optim_kind_name(optim->kind), "slots",
                                  zdist_optim_num_slots(optim->kind), "chain", chain);
        if (entry && tables[i].state)
            json_object_set(entry, "state", tables[i].state);
        json_array_append_new(jtables, entry);
        for (size_t k = 0; k < chains[i].nlinks; k++) {
            const s_link_t *l = &chains[i].links[k];
            const char *rel = s_rel_dir(l->dir, dir);
            json_array_append_new(
                chain,
                json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "dir", rel, "file", l->file, "kind",
                          l->kind == PSD_DYNTABLE_FILE_FULL ? "full" : "delta", "step", (json_int_t) l->step,
                          "bytes", (json_int_t) l->bytes, "crc32", (json_int_t) l->crc, "rows",
                          (json_int_t) l->rows, "tombstones", (json_int_t) l->tombstones));
            bool listed = strcmp(rel, ".") == 0;
            for (size_t j = 0; !listed && j < json_array_size(needs); j++)
                listed = strcmp(json_string_value(json_array_get(needs, j)), rel) == 0;
            if (!listed)
                json_array_append_new(needs, json_string(rel));
        }
    }
    return root;
}

/* Files in dir that its manifest at `path` names (its "." entries). */
static json_t *
s_local_files(const char *path)
{
    json_t *root = json_load_file(path, 0, NULL), *names = json_array(), *t, *l;
    size_t i, k;
    json_array_foreach(json_object_get(root, "tables"), i, t)
    {
        json_array_foreach(json_object_get(t, "chain"), k, l)
        {
            const char *d = json_string_value(json_object_get(l, "dir"));
            json_t *f = json_object_get(l, "file");
            if (d && strcmp(d, ".") == 0 && json_is_string(f) && s_plain_name(json_string_value(f), false))
                json_array_append(names, f);
        }
    }
    json_decref(root);
    return names;
}

/* Removes the files of `old` (names in dir) that `now` does not name. */
static void
s_remove_stale(const char *dir, json_t *old, json_t *now)
{
    size_t i, j;
    json_t *f, *g;
    json_array_foreach(old, i, f)
    {
        bool kept = false;
        json_array_foreach(now, j, g)
        {
            kept = kept || json_equal(f, g);
        }
        char path[2 * S_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, json_string_value(f));
        if (!kept)
            unlink(path);
    }
}

static void
s_unlink_links(s_link_t *links, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char path[2 * S_PATH_MAX];
        if (links[i].file) {
            snprintf(path, sizeof path, "%s/%s", links[i].dir, links[i].file);
            unlink(path);
        }
        psd_dyntable_file_clear(&links[i]);
    }
}

static int
s_check_tables(const psd_dyntable_ckpt_table_t *tables, size_t n, zdist_error_t *err)
{
    for (size_t i = 0; i < n; i++) {
        if (!tables[i].name || !tables[i].table || strlen(tables[i].name) > PSD_DYNTABLE_FILE_NAME_MAX)
            return zdist_error_set(err, -EINVAL, "dynamic table %zu has no name or table", i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(tables[i].name, tables[j].name) == 0)
                return zdist_error_set(err, -EINVAL, "dynamic table '%s' is named twice", tables[i].name);
    }
    return 0;
}

/* Writes the manifest of the new chains and, once it is in place, makes
   them self's, marks the tables and removes superseded files. */
static int
s_commit(psd_dyntable_ckpt_t *self, const psd_dyntable_ckpt_table_t *tables, size_t n, s_chain_t *chains,
         const char *dir, int64_t step, int ps_task, int num_ps, zdist_error_t *err)
{
    char path[S_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/dynamic-ps%d.json", dir, ps_task);
    json_t *old = s_local_files(path);
    json_t *root = s_manifest(chains, n, tables, dir, step, ps_task, num_ps);
    int rc = root ? zdist_json_write_sealed(path, root, "crc32", err)
                  : zdist_error_set(err, -ENOMEM, "out of memory");
    json_decref(root);
    if (rc == 0) {
        s_chains_free(self->chains, self->nchains);
        self->chains = chains;
        self->nchains = n;
        self->ps_task = ps_task;
        for (size_t i = 0; i < n; i++)
            psd_dyntable_mark(tables[i].table);
        json_t *now = s_local_files(path);
        s_remove_stale(dir, old, now);
        json_decref(now);
    }
    json_decref(old);
    return rc;
}

int
psd_dyntable_ckpt_save(psd_dyntable_ckpt_t *self, const psd_dyntable_ckpt_table_t *tables, size_t n,
                       const char *dir, int64_t step, int ps_task, int num_ps, psd_dyntable_ckpt_saved_t *ret,
                       zdist_error_t *err)
{
    zdist_error_t spare;
    err = err ? err : &spare; /* codes are read back from it */
    char d[S_PATH_MAX];
    int rc = s_trim(dir, d, err);
    if (rc < 0 || (rc = s_check_tables(tables, n, err)) < 0)
        return rc;
    if (step < 0 || num_ps < 1 || ps_task < 0 || ps_task >= num_ps)
        return zdist_error_set(err, -EINVAL,
                               "dynamic tables: step %" PRId64 ", ps task %d of %d is not a save", step,
                               ps_task, num_ps);
    if (mkdir(d, 0755) < 0 && errno != EEXIST)
        return zdist_error_set(err, -errno, "cannot create checkpoint directory %s: %s", d, strerror(errno));
    psd_dyntable_ckpt_saved_t saved = {0};
    for (size_t i = 0; i < n; i++)
        saved.evicted += psd_dyntable_evict(tables[i].table, (uint64_t) step);
    saved.full = !s_chain_continues(self, tables, n, d, ps_task);
    uint32_t nonce;
    if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != sizeof nonce)
        nonce = (uint32_t) getpid() ^ (uint32_t) time(NULL);
    s_link_t *links = calloc(n ? n : 1, sizeof *links);
    if (!links)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n && rc == 0; i++) {
        char file[160];
        snprintf(file, sizeof file, "dyn-ps%d-t%zu-%" PRId64 "-%s-%08" PRIx32 ".bin", ps_task, i, step,
                 saved.full ? "full" : "delta", nonce);
        rc = psd_dyntable_file_write(tables[i].table, tables[i].name, d, file, saved.full, step, ps_task,
                                     num_ps, &links[i], err);
        saved.rows += links[i].rows;
        saved.tombstones += links[i].tombstones;
        saved.bytes += links[i].bytes;
    }
    s_chain_t *chains = NULL;
    if (rc == 0 && s_chains_next(self, tables, n, saved.full, links, &chains) < 0)
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
    if (rc == 0 && (rc = s_commit(self, tables, n, chains, d, step, ps_task, num_ps, err)) < 0) {
        for (size_t i = 0; i < n; i++) /* this save's files: the last link of each chain */
            s_unlink_links(&chains[i].links[chains[i].nlinks - 1], 1);
        s_chains_free(chains, n);
    }
    if (rc < 0)
        s_unlink_links(links, n);
    free(links);
    if (rc == 0 && ret)
        *ret = saved;
    return rc;
}

/* ---------------------------------------------------------------- restore */

/* One saving task's manifest. */
typedef struct {
    char *path;
    json_t *root;
    int ps_task;
} s_man_t;

/* A checkpoint directory's manifests, by ps task. */
typedef struct {
    char dir[S_PATH_MAX], parent[S_PATH_MAX];
    s_man_t *mans;
    size_t nmans;
    int64_t step;
} s_ckpt_t;

static void
s_ckpt_free(s_ckpt_t *c)
{
    for (size_t i = 0; i < c->nmans; i++) {
        free(c->mans[i].path);
        json_decref(c->mans[i].root);
    }
    free(c->mans);
    c->mans = NULL;
    c->nmans = 0;
}

static int
s_man_cmp(const void *a, const void *b)
{
    return ((const s_man_t *) a)->ps_task - ((const s_man_t *) b)->ps_task;
}

/* Parses and checks one manifest (its path already in m). */
static int
s_man_load(s_man_t *m, zdist_error_t *err)
{
    json_error_t jerr;
    if (!(m->root = json_load_file(m->path, JSON_REJECT_DUPLICATES, &jerr)))
        return zdist_error_set(err, -EBADMSG, "dynamic checkpoint manifest %s does not parse: line %d: %s",
                               m->path, jerr.line, jerr.text);
    int rc = zdist_json_crc_check(m->root, "crc32", true, m->path, err);
    if (rc < 0)
        return rc;
    const char *format = NULL;
    int version = 0;
    json_int_t step = -1;
    if (json_unpack(m->root, "{s:s, s:i, s:I, s:i, s:o}", "format", &format, "version", &version, "step",
                    &step, "ps_task", &m->ps_task, "tables", &(json_t *){NULL}) < 0 ||
        strcmp(format, S_FORMAT) != 0 || version != S_VERSION || step < 0 || m->ps_task < 0)
        return zdist_error_set(err, -EBADMSG, "%s is not a version %d dynamic checkpoint manifest", m->path,
                               S_VERSION);
    return 0;
}

/* Loads every dynamic-ps*.json of dir, sorted by ps task, all of one step. */
static int
s_ckpt_load(const char *dir, s_ckpt_t *c, zdist_error_t *err)
{
    int rc = s_trim(dir, c->dir, err);
    if (rc < 0)
        return rc;
    s_parent(c->dir, c->parent);
    DIR *d = opendir(c->dir);
    if (!d)
        return zdist_error_set(err, errno == ENOENT ? -ENOENT : -errno,
                               "cannot open checkpoint directory %s: %s", c->dir, strerror(errno));
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "dynamic-ps", 10) != 0 || len < 16 ||
            strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        s_man_t *mans = realloc(c->mans, (c->nmans + 1) * sizeof *mans);
        char *path = malloc(strlen(c->dir) + len + 2);
        if (mans)
            c->mans = mans;
        if (!mans || !path) {
            free(path);
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
            break;
        }
        sprintf(path, "%s/%s", c->dir, e->d_name);
        c->mans[c->nmans++] = (s_man_t){.path = path};
    }
    closedir(d);
    if (rc == 0 && c->nmans == 0)
        rc = zdist_error_set(err, -ENOENT, "no dynamic tables in checkpoint %s: no dynamic-ps*.json there",
                             c->dir);
    for (size_t i = 0; rc == 0 && i < c->nmans; i++)
        rc = s_man_load(&c->mans[i], err);
    if (rc < 0)
        return rc;
    qsort(c->mans, c->nmans, sizeof *c->mans, s_man_cmp);
    for (size_t i = 0; i < c->nmans; i++) {
        int64_t step = json_integer_value(json_object_get(c->mans[i].root, "step"));
        if (i > 0 && step != c->step)
            return zdist_error_set(err, -EBADMSG,
                                   "dynamic checkpoint %s is incomplete: %s is at step %" PRId64
                                   " but %s is at step %" PRId64,
                                   c->dir, c->mans[0].path, c->step, c->mans[i].path, step);
        c->step = step;
    }
    return 0;
}

/* Table `name` of manifest m: its entry, or NULL. */
static json_t *
s_man_table(const s_man_t *m, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(m->root, "tables"), i, t)
    {
        const char *tn = json_string_value(json_object_get(t, "name"));
        if (tn && strcmp(tn, name) == 0)
            return t;
    }
    return NULL;
}

/* The chain of table `name` in manifest m (none: nlinks 0), its
   directories resolved against the checkpoint's; its dim must be dim. */
static int
s_chain_parse(const s_ckpt_t *c, const s_man_t *m, const char *name, int64_t dim, s_chain_t *ret,
              zdist_error_t *err)
{
    json_t *t = s_man_table(m, name), *chain = t ? json_object_get(t, "chain") : NULL, *l;
    if (!t)
        return 0;
    json_int_t tdim = json_integer_value(json_object_get(t, "dim"));
    if (tdim != dim)
        return zdist_error_set(err, -EINVAL, "dynamic table '%s' has dim %lld in %s, but %lld here", name,
                               (long long) tdim, m->path, (long long) dim);
    size_t n = json_array_size(chain), k;
    if (n == 0 || !(ret->links = calloc(n, sizeof *ret->links)))
        return n == 0 ? zdist_error_set(err, -EBADMSG, "%s: table '%s' has no files", m->path, name)
                      : zdist_error_set(err, -ENOMEM, "out of memory");
    json_array_foreach(chain, k, l)
    {
        const char *dir = NULL, *file = NULL, *kind = NULL;
        json_int_t step, bytes, crc, rows, tomb;
        if (json_unpack(l, "{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "dir", &dir, "file", &file, "kind",
                        &kind, "step", &step, "bytes", &bytes, "crc32", &crc, "rows", &rows, "tombstones",
                        &tomb) < 0 ||
            !s_plain_name(dir, true) || !s_plain_name(file, false) ||
            strcmp(kind, k == 0 ? "full" : "delta") != 0 || step < 0 || bytes < 0 || rows < 0 || tomb < 0 ||
            crc < 0 || crc > UINT32_MAX || (k > 0 && step < ret->links[k - 1].step))
            return zdist_error_set(err, -EBADMSG, "%s: file %zu of table '%s' is not a valid chain entry",
                                   m->path, k, name);
        s_link_t *link = &ret->links[ret->nlinks++];
        *link = (s_link_t){.kind = k == 0 ? PSD_DYNTABLE_FILE_FULL : PSD_DYNTABLE_FILE_DELTA,
                           .step = step,
                           .bytes = (uint64_t) bytes,
                           .rows = (uint64_t) rows,
                           .tombstones = (uint64_t) tomb,
                           .crc = (uint32_t) crc};
        size_t len = strlen(c->dir) + strlen(c->parent) + strlen(dir) + 2;
        link->file = strdup(file);
        if (!(link->dir = malloc(len)) || !link->file)
            return zdist_error_set(err, -ENOMEM, "out of memory");
        if (strcmp(dir, ".") == 0)
            snprintf(link->dir, len, "%s", c->dir);
        else
            snprintf(link->dir, len, "%s/%s", c->parent, dir);
    }
    return 0;
}

/* Each table's chain in each manifest: plan[i * nmans + m]. */
static int
s_plan(const s_ckpt_t *c, const psd_dyntable_ckpt_table_t *tables, size_t n, s_chain_t **ret,
       zdist_error_t *err)
{
    s_chain_t *plan = calloc(n * c->nmans + 1, sizeof *plan);
    if (!plan)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    *ret = plan;
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        for (size_t m = 0; m < c->nmans; m++) {
            int rc = s_chain_parse(c, &c->mans[m], tables[i].name, psd_dyntable_dim(tables[i].table),
                                   &plan[i * c->nmans + m], err);
            if (rc < 0)
                return rc;
            found = found || plan[i * c->nmans + m].nlinks > 0;
        }
        if (!found)
            return zdist_error_set(err, -ENOENT, "dynamic table '%s' is not in checkpoint %s", tables[i].name,
                                   c->dir);
    }
    return 0;
}

/* Checks every delta; on a broken one, *ret_full_dir names its chain's full's directory. */
static int
s_verify_deltas(const s_ckpt_t *c, const psd_dyntable_ckpt_table_t *tables, size_t n, const s_chain_t *plan,
                const char **ret_full_dir, zdist_error_t *err)
{
    for (size_t i = 0; i < n; i++)
        for (size_t m = 0; m < c->nmans; m++) {
            const s_chain_t *ch = &plan[i * c->nmans + m];
            psd_dyntable_file_into_t into = {.name = tables[i].name,
                                             .dim = psd_dyntable_dim(tables[i].table)};
            for (size_t k = 1; k < ch->nlinks; k++) {
                int rc = psd_dyntable_file_read(&ch->links[k], c->mans[m].path, &into, err);
                if (rc < 0) {
                    *ret_full_dir = ch->links[0].dir;
                    return rc;
                }
            }
        }
    return 0;
}

int
psd_dyntable_ckpt_restore(psd_dyntable_ckpt_t *self, const psd_dyntable_ckpt_table_t *tables, size_t n,
                          const char *dir, int ps_task, int num_ps, unsigned flags,
                          psd_dyntable_ckpt_restored_t *ret, zdist_error_t *err)
{
    zdist_error_t spare;
    err = err ? err : &spare; /* codes are read back from it */
    int rc = s_check_tables(tables, n, err);
    if (rc == 0 && (num_ps < 1 || ps_task < 0 || ps_task >= num_ps))
        rc = zdist_error_set(err, -EINVAL, "ps task %d of %d cannot restore", ps_task, num_ps);
    s_ckpt_t c = {0};
    s_chain_t *plan = NULL;
    if (rc == 0)
        rc = s_ckpt_load(dir, &c, err);
    if (rc == 0)
        rc = s_plan(&c, tables, n, &plan, err);
    const char *full_dir = NULL;
    if (rc == 0 && (rc = s_verify_deltas(&c, tables, n, plan, &full_dir, err)) == -EBADMSG) {
        char why[ZDIST_ERROR_TEXT_MAX], fdir[S_PATH_MAX];
        snprintf(why, sizeof why, "%s", err->text);
        snprintf(fdir, sizeof fdir, "%s", full_dir);
        if (flags & PSD_DYNTABLE_CKPT_FALLBACK && strcmp(fdir, c.dir) != 0) {
            s_chains_free(plan, n * c.nmans);
            s_ckpt_free(&c);
            rc = psd_dyntable_ckpt_restore(self, tables, n, fdir, ps_task, num_ps, 0, ret, err);
            if (rc == 0 && ret) {
                ret->fell_back = true;
                if (snprintf(ret->why, sizeof ret->why,
                             "%s; restored the previous full checkpoint, "
                             "step %" PRId64 " in %s, instead",
                             why, ret->step, fdir) >= (int) sizeof ret->why)
                    ret->why[sizeof ret->why - 2] = '.'; /* cut short: say so */
            }
            return rc;
        }
        zdist_error_set(err, rc, "%s (the chain's full is in %s)", why, fdir);
    }
    psd_dyntable_ckpt_restored_t got = {.step = c.step};
    snprintf(got.from, sizeof got.from, "%s", c.dir);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        psd_dyntable_file_into_t into = {.table = tables[i].table,
                                         .name = tables[i].name,
                                         .dim = psd_dyntable_dim(tables[i].table),
                                         .ps_task = ps_task,
                                         .num_ps = num_ps};
        for (size_t m = 0; rc == 0 && m < c.nmans; m++) {
            const s_chain_t *ch = &plan[i * c.nmans + m];
            for (size_t k = 0; rc == 0 && k < ch->nlinks; k++)
                rc = psd_dyntable_file_read(&ch->links[k], c.mans[m].path, &into, err);
        }
        psd_dyntable_stats_t st;
        psd_dyntable_stats(tables[i].table, &st);
        got.rows += st.rows;
        got.skipped += into.skipped;
        psd_dyntable_mark(tables[i].table);
    }
    if (plan)
        s_chains_free(plan, n * c.nmans);
    s_ckpt_free(&c);
    if (rc < 0)
        return rc;
    s_chains_free(self->chains, self->nchains); /* the next save is a full */
    self->chains = NULL;
    self->nchains = 0;
    if (ret)
        *ret = got;
    return 0;
}

/* ---------------------------------------------------------------- export */

int
psd_dyntable_ckpt_describe(const char *dir, const char *name, int64_t *ret_dim, json_t **ret_states,
                           zdist_error_t *err)
{
    s_ckpt_t c = {0};
    int rc = s_ckpt_load(dir, &c, err);
    json_t *states = json_array();
    json_int_t dim = 0;
    for (size_t m = 0; rc == 0 && m < c.nmans; m++) {
        json_t *t = s_man_table(&c.mans[m], name);
        if (t && !dim)
            dim = json_integer_value(json_object_get(t, "dim"));
        if (t)
            json_array_append(states,
                              json_object_get(t, "state") ? json_object_get(t, "state") : json_null());
    }
    if (rc == 0 && (dim < 1 || dim > 65536))
        rc = zdist_error_set(err, -ENOENT, "dynamic table '%s' is not in checkpoint %s", name, c.dir);
    s_ckpt_free(&c);
    if (rc == 0 && !states)
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
    if (rc == 0) {
        *ret_dim = dim;
        if (ret_states)
            *ret_states = json_incref(states);
    }
    json_decref(states);
    return rc;
}
