/* psd_ckpt: checkpoint save (temp + fsync + rename, manifest last) and resharding restore. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "psd_buffer.h"
#include "psd_ckpt.h"
#include "psd_ckpt_dyn.h"
#include "psd_ckpt_state.h"
#include "zdist/file.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint files are raw little-endian: port the save and s_read_entry before using a big-endian host"
#endif

#define S_FORMAT "zdist-psd-checkpoint"
#define S_VERSION 1
#define S_IO_CHUNK ((size_t) 1 << 20)
#define S_PATH_MAX 4096

/* ---------------------------------------------------------------- helpers */

/* Reads exactly len bytes; -EBADMSG if the file ends first. */
static int
s_read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EBADMSG;
        p += n;
        len -= (size_t) n;
    }
    return 0;
}

static uint64_t
s_fnv(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) {
        h ^= (unsigned char) *s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* File-name-safe form of a variable name. */
static void
s_encode_name(const char *name, char *out, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *) name; *p && o + 4 < size; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')
            || *p == '.' || *p == '_' || *p == '-') {
            if (o == 0 && *p == '.') { /* never a hidden file or "." / ".." */
                out[o++] = '%';
                out[o++] = '2';
                out[o++] = 'E';
            } else {
                out[o++] = (char) *p;
            }
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = 0;
    if (o > 120) /* keep file names well below NAME_MAX */
        snprintf(out + 100, size - 100, "~%016" PRIx64, s_fnv(name));
}

static json_t *
s_shape_json(const zdist_shape_t *shape)
{
    json_t *a = json_array();
    for (int i = 0; a && i < shape->rank; i++)
        json_array_append_new(a, json_integer(shape->dims[i]));
    return a;
}

static json_t *
s_optim_config_json(const zdist_optim_config_t *c)
{
    switch (c->kind) {
    case ZDIST_OPTIM_MOMENTUM:
        return json_pack("{s:f, s:f, s:b}", "learning_rate", c->learning_rate, "momentum",
                         c->momentum, "nesterov", c->nesterov);
    case ZDIST_OPTIM_ADAGRAD:
        return json_pack("{s:f, s:f, s:f}", "learning_rate", c->learning_rate,
                         "initial_accumulator_value", c->initial_accumulator_value, "epsilon",
                         c->epsilon);
    case ZDIST_OPTIM_ADAM:
        return json_pack("{s:f, s:f, s:f, s:f, s:b}", "learning_rate", c->learning_rate, "beta_1",
                         c->beta1, "beta_2", c->beta2, "epsilon", c->epsilon, "lazy", c->lazy);
    case ZDIST_OPTIM_FTRL:
        return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "learning_rate", c->learning_rate,
                         "learning_rate_power", c->learning_rate_power, "initial_accumulator_value",
                         c->initial_accumulator_value, "l1_regularization_strength", c->l1,
                         "l2_regularization_strength", c->l2, "l2_shrinkage_regularization_strength",
                         c->l2_shrinkage, "beta", c->beta);
    default:
        return json_pack("{s:f}", "learning_rate", c->learning_rate);
    }
}

/* Files named by an existing manifest (for removal once superseded). */
static json_t *
s_old_files(const char *path)
{
    json_t *root = json_load_file(path, 0, NULL);
    json_t *names = json_array();
    json_t *vars = root ? json_object_get(root, "variables") : NULL;
    size_t i, j;
    json_t *v, *f;
    json_array_foreach(vars, i, v) {
        json_array_foreach(json_object_get(v, "files"), j, f) {
            json_t *name = json_object_get(f, "file");
            if (json_is_string(name))
                json_array_append(names, name);
        }
    }
    json_decref(root);
    return names;
}

/* ---------------------------------------------------------------- save */

/* The store's fixed shards of `job` (every one for NULL or ""). A
   dynamic embedding table's part is left out: it has no rows of its own,
   only its psd_dyntable, saved and restored by psd_ckpt_dyn (full and
   incremental files) after the fixed shards. */
static psd_shard_t **
s_job_shards(psd_store_t *store, const char *job, size_t *ret_n)
{
    return psd_store_list_job(store, job, false, ret_n);
}

/* Removes the files the old manifest named (old: an array of names) that
   the new one's variables (vars) no longer name. */
static void
s_remove_stale(int dirfd, json_t *old, json_t *vars)
{
    size_t k;
    json_t *f;
    json_array_foreach(old, k, f) {
        const char *name = json_string_value(f);
        bool kept = false;
        size_t vi, fi;
        json_t *v, *e;
        json_array_foreach(vars, vi, v) {
            json_array_foreach(json_object_get(v, "files"), fi, e) {
                if (strcmp(json_string_value(json_object_get(e, "file")), name) == 0)
                    kept = true;
            }
        }
        if (!kept && !strchr(name, '/') && name[0] != '.')
            unlinkat(dirfd, name, 0);
    }
}

int
psd_ckpt_save(psd_store_t *store, const char *dir, int64_t step, int ps_task, zdist_error_t *err)
{
    return psd_ckpt_save_job(store, dir, step, ps_task, NULL, 0, NULL, err);
}

int
psd_ckpt_save_job(psd_store_t *store, const char *dir, int64_t step, int ps_task, const char *job,
                  int full_every, uint64_t *ret_bytes, zdist_error_t *err)
{
    uint64_t bytes = 0;
    if (ps_task < 0)
        return zdist_error_set(err, -EINVAL, "ps task %d is negative", ps_task);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return zdist_error_set(err, -errno, "cannot create checkpoint directory %s: %s", dir,
                               strerror(errno));
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return zdist_error_set(err, -errno, "cannot open checkpoint directory %s: %s", dir,
                               strerror(errno));
    int rc = 0;
    json_t *root = NULL, *old = NULL;
    size_t n = 0;
    psd_shard_t **shards = s_job_shards(store, job, &n);
    if (!shards) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }

    uint32_t nonce;
    if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != sizeof nonce)
        nonce = (uint32_t) getpid() ^ (uint32_t) time(NULL);

    json_t *vars = json_array();
    root = json_pack("{s:s, s:i, s:I, s:i, s:o}", "format", S_FORMAT, "version", S_VERSION, "step",
                     (json_int_t) step, "ps_task", ps_task, "variables", vars);
    if (!root) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    json_t *files = NULL;
    for (size_t i = 0; i < n; i++) {
        const psd_shard_spec_t *s = psd_shard_spec(shards[i]);
        if (i == 0 || strcmp(psd_shard_spec(shards[i - 1])->name, s->name) != 0) {
            files = json_array();
            json_array_append_new(vars, json_pack("{s:s, s:s, s:o, s:o}", "name", s->name,
                                                  "dtype", zdist_dtype_name(s->dtype), "shape",
                                                  s_shape_json(&s->shape), "files", files));
        }
        char enc[200], fname[400];
        s_encode_name(s->name, enc, sizeof enc);
        snprintf(fname, sizeof fname, "%s__rows_%" PRId64 "_%" PRId64 "__step_%" PRId64 "_%08" PRIx32 ".bin",
                 enc, s->row_offset, s->row_offset + s->rows, step, nonce);

        psd_shard_view_t view;
        psd_shard_view_begin(shards[i], &view);
        zdist_file_piece_t pieces[1 + ZDIST_OPTIM_MAX_SLOTS] = {{view.values, view.value_bytes}};
        for (int k = 0; k < view.nslots; k++)
            pieces[1 + k] = (zdist_file_piece_t){view.slots[k], view.value_bytes};
        uint32_t crc = 0;
        char fpath[S_PATH_MAX];
        snprintf(fpath, sizeof fpath, "%s/%s", dir, fname);
        rc = zdist_file_write(fpath, pieces, 1 + view.nslots, 0644, &crc, err);
        /* The exactly-once table as of these values, under the same lock. */
        json_t *dedup = psd_ckpt_state_dedup_json(shards[i], &view, rc == 0);
        json_t *ledger = rc == 0 ? psd_ckpt_state_ledger_json(view.ledger) : NULL;
        psd_shard_view_end(shards[i]);
        if (rc < 0) {
            json_decref(dedup);
            goto out;
        }
        bytes += view.value_bytes * (uint64_t) (1 + view.nslots);

        json_t *slots = json_array();
        for (int k = 0; k < view.nslots; k++)
            json_array_append_new(slots, json_string(zdist_optim_slot_name(view.optim.kind, k)));
        json_t *entry = json_pack(
            "{s:s, s:i, s:I, s:I, s:I, s:I, s:{s:s, s:I, s:o, s:o}, s:o}", "file", fname, "shard_index",
            (int) s->shard_index, "row_start", (json_int_t) s->row_offset, "row_end",
            (json_int_t) (s->row_offset + s->rows), "bytes",
            (json_int_t) (view.value_bytes * (size_t) (1 + view.nslots)), "crc32", (json_int_t) crc,
            "optimizer", "kind", zdist_optim_kind_name(view.optim.kind), "step", (json_int_t) view.step,
            "slots", slots, "config", s_optim_config_json(&view.optim), "dedup", dedup);
        if (entry && ledger)
            json_object_set_new(entry, "steps", ledger);
        if (!entry || json_array_append_new(files, entry) < 0) {
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
    char mname[64], mpath[S_PATH_MAX];
    snprintf(mname, sizeof mname, "manifest-ps%d.json", ps_task);
    snprintf(mpath, sizeof mpath, "%s/%s", dir, mname);
    old = s_old_files(mpath);
    /* Written last, after every shard file is durable: a manifest names
       only complete files. "crc32" seals it (zdist/file.h). */
    if ((rc = zdist_json_write_sealed(mpath, root, "crc32", err)) < 0)
        goto out;
    /* The new manifest is durable: files only the old one named can go. */
    s_remove_stale(dirfd, old, vars);
    /* The job's dynamic tables: their own manifest, dynamic-ps<N>.json. */
    uint64_t dyn_bytes = 0;
    if ((rc = psd_ckpt_dyn_save(store, dir, step, ps_task, job, full_every, &dyn_bytes, err)) < 0)
        goto out;
    if (ret_bytes)
        *ret_bytes = bytes + dyn_bytes;
out:
    json_decref(old);
    json_decref(root);
    free(shards);
    close(dirfd);
    return rc;
}

/* ---------------------------------------------------------------- restore */

typedef struct {
    const char *var; /* borrowed from a manifest tree */
    const char *manifest;
    const char *file;
    zdist_dtype_t dtype;
    zdist_shape_t shape;
    int64_t row_start, row_end;
    uint64_t bytes;
    uint32_t crc;
    zdist_optim_kind_t kind; /* 0 when the file has no slots */
    int nslots;
    int64_t opt_step;
    psd_ckpt_state_t st; /* the shard's exactly-once table and steps applied at the save */
} s_entry_t;

/* What one store shard receives. */
typedef struct {
    psd_shard_t *shard;
    const psd_shard_spec_t *spec;
    zdist_optim_config_t optim;
    size_t row_bytes, value_bytes;
    void *values;
    void *slots[ZDIST_OPTIM_MAX_SLOTS];
    int nslots; /* allocated slot buffers (the optimizer's count) or 0 */
    bool got_slots;
    int64_t step;
    psd_dedup_table_t *dedup;
} s_target_t;

typedef struct {
    const char *dir;
    json_t **roots;
    char **names;
    size_t nmanifests;
    s_entry_t *entries;
    size_t nentries, cap;
    s_target_t *targets;
    size_t ntargets;
} s_restore_t;

static void
s_restore_free(s_restore_t *r)
{
    for (size_t i = 0; i < r->nmanifests; i++) {
        json_decref(r->roots[i]);
        free(r->names[i]);
    }
    free(r->roots);
    free(r->names);
    for (size_t i = 0; i < r->nentries; i++)
        psd_ckpt_state_clear(&r->entries[i].st);
    free(r->entries);
    for (size_t i = 0; i < r->ntargets; i++) {
        psd_dedup_table_destroy(&r->targets[i].dedup);
        free(r->targets[i].values);
        for (int k = 0; k < ZDIST_OPTIM_MAX_SLOTS; k++)
            free(r->targets[i].slots[k]);
    }
    free(r->targets);
}

static int
s_bad(zdist_error_t *err, const char *dir, const char *manifest, const char *what)
{
    return zdist_error_set(err, -EBADMSG, "checkpoint manifest %s/%s is damaged: %s", dir,
                           manifest, what);
}


static int
s_parse_manifest(s_restore_t *r, size_t mi, int64_t *ret_step, zdist_error_t *err)
{
    int rc;
    const char *mname = r->names[mi];
    json_t *root = r->roots[mi];
    json_error_t jerr;
    const char *format;
    int version, ps_task;
    json_int_t step;
    json_t *vars;
    if (json_unpack_ex(root, &jerr, 0, "{s:s, s:i, s:I, s:i, s:o}", "format", &format, "version",
                       &version, "step", &step, "ps_task", &ps_task, "variables", &vars) < 0)
        return s_bad(err, r->dir, mname, jerr.text);
    if (strcmp(format, S_FORMAT) != 0 || version != S_VERSION)
        return s_bad(err, r->dir, mname, "not a version 1 zdist-psd-checkpoint manifest");
    /* Manifests since exactly-once state is saved carry their CRC-32. */
    char what[S_PATH_MAX + 64];
    snprintf(what, sizeof what, "checkpoint manifest %s/%s", r->dir, mname);
    if ((rc = zdist_json_crc_check(root, "crc32", false, what, err)) < 0)
        return rc;
    if (!json_is_array(vars))
        return s_bad(err, r->dir, mname, "'variables' is not an array");
    *ret_step = step;
    size_t vi, fi;
    json_t *v, *f;
    json_array_foreach(vars, vi, v) {
        const char *name, *dtype_name;
        json_t *shape_j, *files;
        if (json_unpack_ex(v, &jerr, 0, "{s:s, s:s, s:o, s:o}", "name", &name, "dtype",
                           &dtype_name, "shape", &shape_j, "files", &files) < 0)
            return s_bad(err, r->dir, mname, jerr.text);
        zdist_dtype_t dtype = zdist_dtype_from_name(dtype_name);
        zdist_shape_t shape = {0};
        size_t si;
        json_t *d;
        if (!zdist_dtype_is_data(dtype))
            return s_bad(err, r->dir, mname, "unknown dtype");
        if (!json_is_array(shape_j) || json_array_size(shape_j) > ZDIST_MAX_RANK
            || !json_is_array(files))
            return s_bad(err, r->dir, mname, "bad 'shape' or 'files'");
        shape.rank = (int) json_array_size(shape_j);
        json_array_foreach(shape_j, si, d) {
            if (!json_is_integer(d) || json_integer_value(d) < 0)
                return s_bad(err, r->dir, mname, "bad dimension in 'shape'");
            shape.dims[si] = json_integer_value(d);
        }
        size_t total_bytes;
        if (zdist_tensor_byte_size(dtype, &shape, &total_bytes) < 0)
            return s_bad(err, r->dir, mname, "shape too large");
        int64_t total_rows = shape.rank > 0 ? shape.dims[0] : 1;
        uint64_t row_bytes = zdist_dtype_size(dtype);
        for (int k = 1; k < shape.rank; k++)
            row_bytes *= (uint64_t) shape.dims[k];
        json_array_foreach(files, fi, f) {
            s_entry_t e = {.var = name, .manifest = mname, .dtype = dtype, .shape = shape};
            int shard_index;
            json_int_t rs, re, bytes, crc, ostep;
            const char *kind_name;
            json_t *slots;
            if (json_unpack_ex(f, &jerr, 0, "{s:s, s:i, s:I, s:I, s:I, s:I, s:{s:s, s:I, s:o}}",
                               "file", &e.file, "shard_index", &shard_index, "row_start", &rs,
                               "row_end", &re, "bytes", &bytes, "crc32", &crc, "optimizer",
                               "kind", &kind_name, "step", &ostep, "slots", &slots) < 0)
                return s_bad(err, r->dir, mname, jerr.text);
            if (!e.file[0] || strchr(e.file, '/') || e.file[0] == '.')
                return s_bad(err, r->dir, mname, "file name outside the checkpoint directory");
            if (rs < 0 || re < rs || re > total_rows)
                return s_bad(err, r->dir, mname, "row range outside the variable");
            if (crc < 0 || crc > UINT32_MAX || bytes < 0 || ostep < 0 || !json_is_array(slots))
                return s_bad(err, r->dir, mname, "bad crc32, bytes, step or slots");
            e.row_start = rs;
            e.row_end = re;
            e.crc = (uint32_t) crc;
            e.bytes = (uint64_t) bytes;
            e.opt_step = ostep;
            e.nslots = (int) json_array_size(slots);
            if (zdist_optim_kind_from_name(kind_name, &e.kind) < 0)
                return s_bad(err, r->dir, mname, "unknown optimizer kind");
            if (e.nslots != 0 && e.nslots != zdist_optim_num_slots(e.kind))
                return s_bad(err, r->dir, mname, "slot count does not match the optimizer");
            if (e.bytes != (uint64_t) (re - rs) * row_bytes * (uint64_t) (1 + e.nslots))
                return s_bad(err, r->dir, mname, "'bytes' does not match rows and slots");
            for (size_t k = 0; k < r->nentries; k++) {
                const s_entry_t *o = &r->entries[k];
                if (strcmp(o->var, name) == 0 && e.row_start < o->row_end
                    && o->row_start < e.row_end && e.row_end > e.row_start)
                    return zdist_error_set(err, -EBADMSG, "checkpoint %s: rows of '%s' are in "
                                           "both %s (%s) and %s (%s)", r->dir, name, o->file,
                                           o->manifest, e.file, mname);
                if (strcmp(o->var, name) == 0
                    && (o->dtype != dtype || !zdist_shape_equal(&o->shape, &shape)))
                    return zdist_error_set(err, -EBADMSG, "checkpoint %s: manifests %s and %s "
                                           "disagree on the dtype or shape of '%s'", r->dir,
                                           o->manifest, mname, name);
            }
            char where[S_PATH_MAX + 64];
            snprintf(where, sizeof where, "%s/%s", r->dir, mname);
            if ((rc = psd_ckpt_state_parse(json_object_get(f, "dedup"), json_object_get(f, "steps"), &e.st,
                                           where, err)) < 0)
                return rc;
            if (r->nentries == r->cap) {
                size_t cap = r->cap ? r->cap * 2 : 32;
                s_entry_t *p = realloc(r->entries, cap * sizeof *p);
                if (!p) {
                    psd_ckpt_state_clear(&e.st);
                    return zdist_error_set(err, -ENOMEM, "out of memory");
                }
                r->entries = p;
                r->cap = cap;
            }
            r->entries[r->nentries++] = e;
        }
    }
    return 0;
}

static int
s_load_manifests(s_restore_t *r, int dirfd, int64_t *ret_step, zdist_error_t *err)
{
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return zdist_error_set(err, -errno, "cannot list %s: %s", r->dir, strerror(errno));
    }
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= strlen("manifest-ps.json") || strncmp(de->d_name, "manifest-ps", 11) != 0
            || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        size_t cap = r->nmanifests + 1;
        json_t **roots = realloc(r->roots, cap * sizeof *roots);
        if (roots)
            r->roots = roots;
        char **names = realloc(r->names, cap * sizeof *names);
        if (names)
            r->names = names;
        char *name = strdup(de->d_name);
        if (!roots || !names || !name) {
            free(name);
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
            break;
        }
        r->names[r->nmanifests] = name;
        r->roots[r->nmanifests] = NULL;
        r->nmanifests++;
    }
    closedir(d);
    if (rc < 0)
        return rc;
    if (r->nmanifests == 0)
        return zdist_error_set(err, -ENOENT, "no checkpoint in %s: no manifest-ps*.json there",
                               r->dir);
    int64_t step = 0;
    const char *step_from = NULL;
    for (size_t i = 0; i < r->nmanifests; i++) {
        int mfd = openat(dirfd, r->names[i], O_RDONLY | O_CLOEXEC);
        if (mfd < 0)
            return zdist_error_set(err, -errno, "cannot open %s/%s: %s", r->dir, r->names[i],
                                   strerror(errno));
        FILE *fp = fdopen(mfd, "r");
        if (!fp) {
            close(mfd);
            return zdist_error_set(err, -ENOMEM, "out of memory");
        }
        json_error_t jerr;
        r->roots[i] = json_loadf(fp, JSON_REJECT_DUPLICATES, &jerr);
        fclose(fp);
        if (!r->roots[i])
            return zdist_error_set(err, -EBADMSG, "checkpoint manifest %s/%s does not parse: "
                                   "line %d: %s", r->dir, r->names[i], jerr.line, jerr.text);
        int64_t s = 0;
        if ((rc = s_parse_manifest(r, i, &s, err)) < 0)
            return rc;
        if (step_from && s != step)
            return zdist_error_set(err, -EBADMSG, "checkpoint %s is incomplete: %s is at step %"
                                   PRId64 " but %s is at step %" PRId64, r->dir, step_from, step,
                                   r->names[i], s);
        step = s;
        step_from = r->names[i];
    }
    *ret_step = step;
    return 0;
}


/* The exactly-once table of a target from the files it is restored from.
   One file: its table. Several (a reshard): a client's write counts as
   applied only when every file counts it (a write seen by only some of
   the rows is applied again rather than half lost). */
static int
s_target_dedup(s_restore_t *r, s_target_t *t, zdist_error_t *err)
{
    const psd_shard_spec_t *s = t->spec;
    const psd_ckpt_state_t *src[PSD_CKPT_STATE_MAX_SOURCES];
    size_t nsrc = 0;
    bool many = false;
    for (size_t k = 0; k < r->nentries; k++) {
        const s_entry_t *e = &r->entries[k];
        if (strcmp(e->var, s->name) != 0 || e->row_start >= s->row_offset + s->rows ||
            s->row_offset >= e->row_end)
            continue;
        if (nsrc == PSD_CKPT_STATE_MAX_SOURCES)
            many = true;
        else
            src[nsrc++] = &e->st;
    }
    return psd_ckpt_state_intersect(src, many ? 0 : nsrc, &t->dedup, err);
}

/* Prepares a target per store shard: checks the checkpoint covers it. */
static int
s_plan_targets(s_restore_t *r, psd_store_t *store, const char *job, zdist_error_t *err)
{
    size_t n = 0;
    psd_shard_t **shards = s_job_shards(store, job, &n);
    r->targets = calloc(n ? n : 1, sizeof *r->targets);
    if (!shards || !r->targets) {
        free(shards);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        s_target_t *t = &r->targets[r->ntargets++];
        t->shard = shards[i];
        t->spec = psd_shard_spec(shards[i]);
        t->row_bytes = psd_shard_row_bytes(shards[i]);
        t->value_bytes = psd_shard_value_bytes(shards[i]);
        psd_shard_get_optimizer(shards[i], &t->optim);
        const psd_shard_spec_t *s = t->spec;
        int64_t covered = 0;
        bool known = false;
        for (size_t k = 0; k < r->nentries; k++) {
            const s_entry_t *e = &r->entries[k];
            if (strcmp(e->var, s->name) != 0)
                continue;
            if (!known && (e->dtype != s->dtype || !zdist_shape_equal(&e->shape, &s->shape))) {
                char a[160], b[160];
                zdist_shape_format(&e->shape, a, sizeof a);
                zdist_shape_format(&s->shape, b, sizeof b);
                rc = zdist_error_set(err, -EINVAL, "checkpoint %s holds '%s' as %s %s, but this ps "
                                     "holds it as %s %s", r->dir, s->name, zdist_dtype_name(e->dtype),
                                     a, zdist_dtype_name(s->dtype), b);
                break;
            }
            known = true;
            int64_t lo = e->row_start > s->row_offset ? e->row_start : s->row_offset;
            int64_t hi = e->row_end < s->row_offset + s->rows ? e->row_end : s->row_offset + s->rows;
            if (hi > lo)
                covered += hi - lo;
            if (hi > lo && e->nslots > 0 && e->kind == t->optim.kind) {
                t->got_slots = true;
                if (e->opt_step > t->step)
                    t->step = e->opt_step;
            }
        }
        if (rc < 0)
            break;
        if (!known) {
            rc = zdist_error_set(err, -ENOENT, "variable '%s' is not in checkpoint %s", s->name,
                                 r->dir);
            break;
        }
        if (covered != s->rows) {
            rc = zdist_error_set(err, -ENOENT, "checkpoint %s lacks some of rows [%" PRId64 ", %"
                                 PRId64 ") of '%s'", r->dir, s->row_offset,
                                 s->row_offset + s->rows, s->name);
            break;
        }
        if ((rc = s_target_dedup(r, t, err)) < 0)
            break;
        size_t alloc = t->value_bytes ? t->value_bytes : 1;
        t->values = psd_buffer_alloc(alloc);
        if (!t->values) {
            rc = zdist_error_set(err, -ENOMEM, "out of memory restoring '%s'", s->name);
            break;
        }
        if (t->got_slots) {
            t->nslots = zdist_optim_num_slots(t->optim.kind);
            for (int k = 0; k < t->nslots; k++) {
                t->slots[k] = psd_buffer_alloc(alloc);
                if (!t->slots[k]) {
                    rc = zdist_error_set(err, -ENOMEM, "out of memory restoring '%s'", s->name);
                    break;
                }
                /* rows from files without matching slots keep fresh values */
                zdist_optim_slot_fill(&t->optim, k, s->dtype, t->slots[k],
                                    t->value_bytes / zdist_dtype_size(s->dtype));
            }
        }
    }
    free(shards);
    return rc;
}

/* Reads one file in chunks, checking length and CRC, copying overlapping
   rows of each section (values, slot 0, slot 1) into the targets. */
static int
s_read_entry(s_restore_t *r, int dirfd, const s_entry_t *e, void *chunk, zdist_error_t *err)
{
    int fd = openat(dirfd, e->file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int rc = errno == ENOENT ? -EBADMSG : -errno;
        return zdist_error_set(err, rc, "checkpoint file %s/%s (listed in %s) cannot be opened: %s",
                               r->dir, e->file, e->manifest, strerror(errno));
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        rc = zdist_error_set(err, -errno, "cannot stat %s/%s: %s", r->dir, e->file, strerror(errno));
        goto out;
    }
    if ((uint64_t) st.st_size != e->bytes) {
        rc = zdist_error_set(err, -EBADMSG, "checkpoint file %s/%s is truncated or damaged: %lld "
                             "bytes, manifest %s says %" PRIu64, r->dir, e->file,
                             (long long) st.st_size, e->manifest, e->bytes);
        goto out;
    }
    uint64_t rows = (uint64_t) (e->row_end - e->row_start);
    uint64_t row_bytes = rows ? e->bytes / (uint64_t) (1 + e->nslots) / rows : 0;
    uint64_t section = rows * row_bytes;
    uint32_t crc = 0;
    for (uint64_t pos = 0; pos < e->bytes;) {
        size_t len = e->bytes - pos > S_IO_CHUNK ? S_IO_CHUNK : (size_t) (e->bytes - pos);
        if ((rc = s_read_all(fd, chunk, len)) < 0) {
            rc = zdist_error_set(err, rc == -EBADMSG ? -EBADMSG : rc, "checkpoint file %s/%s: "
                                 "read failed: %s", r->dir, e->file, strerror(-rc));
            goto out;
        }
        crc = zdist_crc32(crc, chunk, len);
        for (size_t ti = 0; ti < r->ntargets; ti++) {
            s_target_t *t = &r->targets[ti];
            const psd_shard_spec_t *s = t->spec;
            if (strcmp(s->name, e->var) != 0)
                continue;
            int64_t lo = e->row_start > s->row_offset ? e->row_start : s->row_offset;
            int64_t hi = e->row_end < s->row_offset + s->rows ? e->row_end : s->row_offset + s->rows;
            if (hi <= lo)
                continue;
            for (int sec = 0; sec < 1 + e->nslots; sec++) {
                void *dst_base;
                if (sec == 0)
                    dst_base = t->values;
                else if (t->nslots && e->kind == t->optim.kind)
                    dst_base = t->slots[sec - 1];
                else
                    continue;
                /* file bytes [f0, f1) of this section land at dst_base + d0 */
                uint64_t f0 = (uint64_t) sec * section + (uint64_t) (lo - e->row_start) * row_bytes;
                uint64_t f1 = f0 + (uint64_t) (hi - lo) * row_bytes;
                uint64_t d0 = (uint64_t) (lo - s->row_offset) * row_bytes;
                uint64_t a = f0 > pos ? f0 : pos, b = f1 < pos + len ? f1 : pos + len;
                if (b > a)
                    memcpy((char *) dst_base + d0 + (a - f0), (char *) chunk + (a - pos), b - a);
            }
        }
        pos += len;
    }
    if (crc != e->crc)
        rc = zdist_error_set(err, -EBADMSG, "checkpoint file %s/%s is corrupt: CRC32 %08" PRIx32
                             ", manifest %s says %08" PRIx32, r->dir, e->file, crc, e->manifest,
                             e->crc);
out:
    close(fd);
    return rc;
}

int
psd_ckpt_restore(psd_store_t *store, const char *dir, int64_t *ret_step, zdist_error_t *err)
{
    return psd_ckpt_restore_job(store, dir, NULL, ret_step, err);
}

int
psd_ckpt_restore_job(psd_store_t *store, const char *dir, const char *job, int64_t *ret_step, zdist_error_t *err)
{
    s_restore_t r = {.dir = dir};
    void *chunk = NULL;
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return zdist_error_set(err, errno == ENOENT ? -ENOENT : -errno,
                               "cannot open checkpoint directory %s: %s", dir, strerror(errno));
    int64_t step = 0;
    int rc = s_load_manifests(&r, dirfd, &step, err);
    if (rc == 0)
        rc = s_plan_targets(&r, store, job, err);
    if (rc == 0 && !(chunk = malloc(S_IO_CHUNK)))
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
    for (size_t k = 0; rc == 0 && k < r.nentries; k++) {
        const s_entry_t *e = &r.entries[k];
        bool wanted = false;
        for (size_t ti = 0; ti < r.ntargets && !wanted; ti++) {
            const psd_shard_spec_t *s = r.targets[ti].spec;
            wanted = strcmp(s->name, e->var) == 0 && e->row_start < s->row_offset + s->rows
                     && s->row_offset < e->row_end;
        }
        if (wanted)
            rc = s_read_entry(&r, dirfd, e, chunk, err);
    }
    /* The dynamic tables, read into new ones as the fixed shards were. */
    psd_ckpt_dyn_restore_t *dyn = NULL;
    if (rc == 0)
        rc = psd_ckpt_dyn_prepare(store, dir, job, step, &dyn, err);
    /* Everything verified: swap in. Nothing below can fail. */
    psd_ckpt_dyn_commit(&dyn);
    for (size_t ti = 0; rc == 0 && ti < r.ntargets; ti++) {
        s_target_t *t = &r.targets[ti];
        psd_shard_replace(t->shard, &t->values, t->slots, t->nslots, t->optim.kind, t->step, &t->dedup);
    }
    if (rc == 0 && ret_step)
        *ret_step = step;
    free(chunk);
    s_restore_free(&r);
    close(dirfd);
    return rc;
}
