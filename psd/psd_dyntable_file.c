/* psd_dyntable_file: one dynamic table's full or delta checkpoint file, written in one pass, read or checked.

   The format (version 2: a file holds the table's admission counters
   too) and its one reader are libzdist's zdist_dynfile (zdist/dynfile.h),
   which `zdist export-embedding` reads through as well. Its length and
   CRC-32 are kept by whoever names it (psd_dyntable_ckpt's manifests). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "psd_dyntable_file.h"
#include "zdist/dynfile.h"
#include "zdist/file.h"
#include "zdist/partition.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dynamic checkpoint files are raw little-endian: port the writer first"
#endif

#define S_PATH_MAX 4096

void
psd_dyntable_file_clear(psd_dyntable_file_t *f)
{
    free(f->dir);
    free(f->file);
    *f = (psd_dyntable_file_t){0};
}

typedef struct {
    zdist_file_out_t *out;
    char *rec;
    size_t rec_bytes, value_bytes;
    int nslots;
    uint64_t rows;
} s_writer_t;

static int
s_write_row(const psd_dyntable_row_t *row, void *arg)
{
    s_writer_t *w = arg;
    uint32_t steps[2] = {row->opt_step, 0};
    memcpy(w->rec, &row->id, 8);
    memcpy(w->rec + 8, &row->last_step, 8);
    memcpy(w->rec + 16, steps, 8);
    memcpy(w->rec + 24, row->values, w->value_bytes);
    for (int k = 0; k < w->nslots; k++)
        memcpy(w->rec + 24 + w->value_bytes * (size_t) (k + 1), row->slots[k], w->value_bytes);
    w->rows++;
    return zdist_file_out_write(w->out, w->rec, w->rec_bytes);
}

int
psd_dyntable_file_write(psd_dyntable_t *table, const char *name, const char *dir, const char *file, bool full,
                        int64_t step, int ps_task, int num_ps, psd_dyntable_file_t *ret, zdist_error_t *err)
{
    zdist_error_t spare;
    err = err ? err : &spare; /* codes are read back from it */
    const zdist_optim_config_t *optim = psd_dyntable_optim(table);
    zdist_dynfile_head_t h = {
        .kind = full ? PSD_DYNTABLE_FILE_FULL : PSD_DYNTABLE_FILE_DELTA,
        .step = step,
        .dim = (uint32_t) psd_dyntable_dim(table),
        .nslots = (uint32_t) zdist_optim_num_slots(optim->kind),
        .optim = (uint32_t) optim->kind,
        .ps_task = (uint32_t) ps_task,
        .num_ps = (uint32_t) num_ps,
        .name_len = (uint32_t) strlen(name),
    };
    size_t ntomb = 0;
    const int64_t *tomb = full ? NULL : psd_dyntable_evicted(table, &ntomb);
    h.tombstones = ntomb;
    char path[2 * S_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t npend = 0;
    psd_dyntable_pending_t *pend = psd_dyntable_pending(table, !full, &npend);
    h.pending = npend;
    s_writer_t w = {.value_bytes = (size_t) h.dim * sizeof(float), .nslots = (int) h.nslots};
    w.rec_bytes = zdist_dynfile_row_bytes(h.dim, h.nslots);
    if (!pend || !(w.rec = malloc(w.rec_bytes))) {
        free(pend);
        return zdist_error_set(err, -ENOMEM, "out of memory writing %s", path);
    }
    if (!(w.out = zdist_file_out_new(path, 0644, err))) {
        free(w.rec);
        free(pend);
        return err->code;
    }
    unsigned char head[ZDIST_DYNFILE_HEAD_BYTES], pad[8] = {0};
    zdist_dynfile_head_pack(&h, head);
    zdist_file_out_write(w.out, head, sizeof head);
    zdist_file_out_write(w.out, name, h.name_len);
    zdist_file_out_write(w.out, pad, (8 - h.name_len % 8) % 8);
    zdist_file_out_write(w.out, tomb, ntomb * sizeof *tomb);
    int rc = psd_dyntable_iterate(table, !full, s_write_row, &w);
    for (size_t i = 0; rc == 0 && i < npend; i++) {
        unsigned char p[ZDIST_DYNFILE_PENDING_BYTES] = {0};
        memcpy(p, &pend[i].id, 8);
        memcpy(p + 8, &pend[i].count, 4);
        memcpy(p + 16, &pend[i].last_seen, 8);
        rc = zdist_file_out_write(w.out, p, sizeof p);
    }
    unsigned char foot[ZDIST_DYNFILE_FOOT_BYTES];
    memcpy(foot, &w.rows, 8);
    memcpy(foot + 8, ZDIST_DYNFILE_END, 8);
    if (rc == 0)
        rc = zdist_file_out_write(w.out, foot, sizeof foot);
    free(w.rec);
    free(pend);
    if (rc < 0) {
        zdist_file_out_destroy(&w.out);
        return zdist_error_set(err, rc, "cannot write %s: %s", path, strerror(-rc));
    }
    *ret = (psd_dyntable_file_t){.kind = h.kind, .step = step, .rows = w.rows, .tombstones = ntomb};
    if ((rc = zdist_file_out_commit(&w.out, &ret->crc, &ret->bytes, err)) < 0)
        return rc;
    ret->dir = strdup(dir);
    ret->file = strdup(file);
    if (!ret->dir || !ret->file) {
        unlink(path);
        psd_dyntable_file_clear(ret);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

/* The manifest's file (l) read into into->table through zdist_dynfile_read. */
typedef struct {
    const psd_dyntable_file_t *l;
    psd_dyntable_file_into_t *into;
    bool slots_ok;
} s_reader_t;

static int
s_on_head(void *arg, const zdist_dynfile_head_t *h, const char *name)
{
    s_reader_t *r = arg;
    const psd_dyntable_file_t *l = r->l;
    if (h->kind != l->kind || h->step != l->step || h->dim != (uint64_t) r->into->dim ||
        h->tombstones != l->tombstones || h->rows != l->rows || h->name_len != strlen(r->into->name) ||
        memcmp(name, r->into->name, h->name_len) != 0)
        return -EBADMSG;
    const zdist_optim_config_t *optim = r->into->table ? psd_dyntable_optim(r->into->table) : NULL;
    r->slots_ok = optim && (uint32_t) optim->kind == h->optim && (int) h->nslots == zdist_optim_num_slots(optim->kind);
    return 0;
}

static int
s_on_tombstone(void *arg, int64_t id)
{
    s_reader_t *r = arg;
    if (r->into->table)
        psd_dyntable_remove(r->into->table, id);
    return 0;
}

static int
s_on_row(void *arg, const zdist_dynfile_row_t *row)
{
    s_reader_t *r = arg;
    psd_dyntable_file_into_t *into = r->into;
    if (!into->table)
        return 0;
    if (zdist_partition_id_ps(row->id, into->num_ps) != into->ps_task) {
        into->skipped++;
        return 0;
    }
    int nslots = r->slots_ok ? zdist_optim_num_slots(psd_dyntable_optim(into->table)->kind) : 0;
    int rc = psd_dyntable_put(into->table, row->id, row->values, r->slots_ok ? row->slots : NULL, nslots,
                              row->opt_step, row->last_step);
    return rc == -EINVAL ? -EBADMSG : rc;
}

static int
s_on_pending(void *arg, int64_t id, uint32_t count, uint64_t last_seen)
{
    s_reader_t *r = arg;
    psd_dyntable_file_into_t *into = r->into;
    if (!into->table || zdist_partition_id_ps(id, into->num_ps) != into->ps_task)
        return 0;
    return psd_dyntable_put_pending(into->table, id, count, last_seen);
}

int
psd_dyntable_file_read(const psd_dyntable_file_t *l, const char *manifest, psd_dyntable_file_into_t *into,
                       zdist_error_t *err)
{
    zdist_error_t spare;
    err = err ? err : &spare;
    char path[2 * S_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", l->dir, l->file);
    s_reader_t r = {.l = l, .into = into};
    zdist_dynfile_visitor_t v = {&r, s_on_head, s_on_tombstone, s_on_row, s_on_pending};
    memset(err, 0, sizeof *err);
    int rc = zdist_dynfile_read(path, manifest, l->bytes, l->crc, &v, err);
    if (rc == -ENOSPC)
        return zdist_error_set(err, rc, "dynamic table '%s' does not fit its memory budget (restoring %s)",
                               into->name, path);
    if (rc < 0 && !err->text[0]) /* a callback's: the file is not what its manifest says */
        return zdist_error_set(err, rc == -ENOMEM ? rc : -EBADMSG,
                               "dynamic checkpoint file %s is corrupt: not what its manifest (%s) describes", path,
                               manifest);
    return rc;
}
