/* psd_dyntable_file: one dynamic table's full or delta checkpoint file, written in one pass, read or checked.

   A data file (version 1), raw little-endian:
     header, 64 bytes:
       0  "ZDDYNTB1"         8  u32 version (1)     12 u32 kind (1 full, 2 delta)
       16 i64 step           24 u32 dim             28 u32 slots per row
       32 u32 optimizer kind (zdist_optim_kind_t)   36 u32 saving ps task
       40 u32 its num_ps     44 u32 name length     48 u64 tombstones
       56 8 bytes of zeros
     the table's name, zero-padded to a multiple of 8;
     tombstones: that many i64 ids, ascending (a delta's evicted ids;
       none in a full);
     rows, ascending by id, each: i64 id, u64 last update step,
       u32 optimizer step, u32 zero, f32 values[dim], then each slot's
       f32[dim];
     footer, 16 bytes: u64 rows, "ZDDYNEND".
   Its length and CRC-32 are kept by whoever names it (psd_dyntable_ckpt's
   manifests). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "psd_dyntable_file.h"
#include "zdist/file.h"
#include "zdist/partition.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dynamic checkpoint files are raw little-endian: port s_head_pack and the reader first"
#endif

#define S_MAGIC "ZDDYNTB1"
#define S_END "ZDDYNEND"
#define S_HEAD_BYTES 64
#define S_FOOT_BYTES 16
#define S_VERSION 1
#define S_PATH_MAX 4096
#define S_IO_CHUNK ((size_t) 1 << 20)

void
psd_dyntable_file_clear(psd_dyntable_file_t *f)
{
    free(f->dir);
    free(f->file);
    *f = (psd_dyntable_file_t){0};
}

typedef struct {
    int kind;
    int64_t step;
    uint32_t dim, nslots, optim, ps_task, num_ps, name_len;
    uint64_t tombstones;
} s_head_t;

static void
s_head_pack(const s_head_t *h, unsigned char *out)
{
    uint32_t version = S_VERSION, kind = (uint32_t) h->kind;
    memset(out, 0, S_HEAD_BYTES);
    memcpy(out, S_MAGIC, 8);
    memcpy(out + 8, &version, 4);
    memcpy(out + 12, &kind, 4);
    memcpy(out + 16, &h->step, 8);
    memcpy(out + 24, &h->dim, 4);
    memcpy(out + 28, &h->nslots, 4);
    memcpy(out + 32, &h->optim, 4);
    memcpy(out + 36, &h->ps_task, 4);
    memcpy(out + 40, &h->num_ps, 4);
    memcpy(out + 44, &h->name_len, 4);
    memcpy(out + 48, &h->tombstones, 8);
}

static size_t
s_rec_bytes(uint32_t dim, uint32_t nslots)
{
    return 24 + (size_t) dim * sizeof(float) * (1 + nslots);
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
    s_head_t h = {
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
    s_writer_t w = {.value_bytes = (size_t) h.dim * sizeof(float), .nslots = (int) h.nslots};
    w.rec_bytes = s_rec_bytes(h.dim, h.nslots);
    if (!(w.rec = malloc(w.rec_bytes)))
        return zdist_error_set(err, -ENOMEM, "out of memory writing %s", path);
    if (!(w.out = zdist_file_out_new(path, 0644, err))) {
        free(w.rec);
        return err->code;
    }
    unsigned char head[S_HEAD_BYTES], pad[8] = {0};
    s_head_pack(&h, head);
    zdist_file_out_write(w.out, head, sizeof head);
    zdist_file_out_write(w.out, name, h.name_len);
    zdist_file_out_write(w.out, pad, (8 - h.name_len % 8) % 8);
    zdist_file_out_write(w.out, tomb, ntomb * sizeof *tomb);
    int rc = psd_dyntable_iterate(table, !full, s_write_row, &w);
    unsigned char foot[S_FOOT_BYTES];
    memcpy(foot, &w.rows, 8);
    memcpy(foot + 8, S_END, 8);
    if (rc == 0)
        rc = zdist_file_out_write(w.out, foot, sizeof foot);
    free(w.rec);
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

/* A data file read in chunks, its CRC-32 taken as it goes. */
typedef struct {
    int fd;
    char *buf;
    size_t len, pos;
    uint64_t left;
    uint32_t crc;
} s_in_t;

static int
s_in_read(s_in_t *in, void *dst, size_t n)
{
    char *p = dst;
    while (n > 0) {
        if (in->pos == in->len) {
            size_t want = in->left < S_IO_CHUNK ? (size_t) in->left : S_IO_CHUNK;
            if (want == 0)
                return -EBADMSG;
            ssize_t got = read(in->fd, in->buf, want);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                return got < 0 ? -errno : -EBADMSG;
            in->crc = zdist_crc32(in->crc, in->buf, (size_t) got);
            in->len = (size_t) got;
            in->pos = 0;
            in->left -= (uint64_t) got;
        }
        size_t k = n < in->len - in->pos ? n : in->len - in->pos;
        memcpy(p, in->buf + in->pos, k);
        in->pos += k;
        p += k;
        n -= k;
    }
    return 0;
}

/* The header and name of a file: what its manifest says it is. */
static int
s_read_head(s_in_t *in, const psd_dyntable_file_t *l, const psd_dyntable_file_into_t *into, s_head_t *h)
{
    unsigned char b[S_HEAD_BYTES];
    uint32_t version = 0, kind = 0;
    int rc = s_in_read(in, b, sizeof b);
    if (rc < 0)
        return rc;
    memcpy(&version, b + 8, 4);
    memcpy(&kind, b + 12, 4);
    memcpy(&h->step, b + 16, 8);
    memcpy(&h->dim, b + 24, 4);
    memcpy(&h->nslots, b + 28, 4);
    memcpy(&h->optim, b + 32, 4);
    memcpy(&h->name_len, b + 44, 4);
    memcpy(&h->tombstones, b + 48, 8);
    if (memcmp(b, S_MAGIC, 8) != 0 || version != S_VERSION || (int) kind != l->kind || h->step != l->step ||
        h->dim != (uint64_t) into->dim || h->nslots > ZDIST_OPTIM_MAX_SLOTS ||
        h->tombstones != l->tombstones || h->name_len != strlen(into->name))
        return -EBADMSG;
    char name[PSD_DYNTABLE_FILE_NAME_MAX + 8];
    size_t padded = (h->name_len + 7) & ~(size_t) 7;
    if ((rc = s_in_read(in, name, padded)) < 0)
        return rc;
    return memcmp(name, into->name, h->name_len) == 0 ? 0 : -EBADMSG;
}

/* Reads the tombstones and rows after the header into into->table. */
static int
s_read_body(s_in_t *in, const psd_dyntable_file_t *l, const s_head_t *h, psd_dyntable_file_into_t *into,
            char *rec)
{
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < h->tombstones; i++) {
        int64_t id;
        if ((rc = s_in_read(in, &id, sizeof id)) == 0 && into->table)
            psd_dyntable_remove(into->table, id);
    }
    const zdist_optim_config_t *optim = into->table ? psd_dyntable_optim(into->table) : NULL;
    bool slots_ok = optim && (uint32_t) optim->kind == h->optim;
    size_t value_bytes = (size_t) h->dim * sizeof(float), rec_bytes = s_rec_bytes(h->dim, h->nslots);
    const float *slots[ZDIST_OPTIM_MAX_SLOTS] = {0};
    for (uint32_t k = 0; k < h->nslots; k++)
        slots[k] = (const float *) (rec + 24 + value_bytes * (k + 1));
    for (uint64_t r = 0; rc == 0 && r < l->rows; r++) {
        if ((rc = s_in_read(in, rec, rec_bytes)) < 0 || !into->table)
            continue;
        int64_t id;
        uint64_t last_step;
        uint32_t opt_step;
        memcpy(&id, rec, 8);
        memcpy(&last_step, rec + 8, 8);
        memcpy(&opt_step, rec + 16, 4);
        if (zdist_partition_id_ps(id, into->num_ps) != into->ps_task) {
            into->skipped++;
            continue;
        }
        rc = psd_dyntable_put(into->table, id, (const float *) (rec + 24), slots_ok ? slots : NULL,
                              (int) h->nslots, opt_step, last_step);
        if (rc < 0)
            return rc == -EINVAL ? -EBADMSG : rc;
    }
    unsigned char foot[S_FOOT_BYTES];
    uint64_t rows = 0;
    if (rc == 0 && (rc = s_in_read(in, foot, sizeof foot)) == 0)
        memcpy(&rows, foot, 8);
    if (rc == 0 &&
        (rows != l->rows || memcmp(foot + 8, S_END, 8) != 0 || in->left != 0 || in->pos != in->len))
        rc = -EBADMSG;
    return rc;
}

int
psd_dyntable_file_read(const psd_dyntable_file_t *l, const char *manifest, psd_dyntable_file_into_t *into,
                       zdist_error_t *err)
{
    zdist_error_t spare;
    err = err ? err : &spare;
    char path[2 * S_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", l->dir, l->file);
    s_in_t in = {.fd = open(path, O_RDONLY | O_CLOEXEC), .left = l->bytes};
    if (in.fd < 0)
        return zdist_error_set(err, errno == ENOENT ? -EBADMSG : -errno,
                               "dynamic checkpoint file %s (listed in %s) cannot be opened: %s", path,
                               manifest, strerror(errno));
    struct stat st;
    int rc = 0;
    char *rec = NULL;
    if (fstat(in.fd, &st) < 0 || (uint64_t) st.st_size != l->bytes) {
        rc = zdist_error_set(err, -EBADMSG,
                             "dynamic checkpoint file %s is truncated or damaged: %lld bytes, "
                             "manifest %s says %" PRIu64,
                             path, (long long) st.st_size, manifest, l->bytes);
        goto out;
    }
    s_head_t h = {0};
    if (!(in.buf = malloc(S_IO_CHUNK)) ||
        !(rec = malloc(s_rec_bytes((uint32_t) into->dim, ZDIST_OPTIM_MAX_SLOTS)))) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory reading %s", path);
        goto out;
    }
    if ((rc = s_read_head(&in, l, into, &h)) == 0)
        rc = s_read_body(&in, l, &h, into, rec);
    if (rc == -ENOSPC)
        rc = zdist_error_set(err, rc, "dynamic table '%s' does not fit its memory budget (restoring %s)",
                             into->name, path);
    else if (rc < 0 || in.crc != l->crc) /* a CRC-32 mismatch can only show once all is read */
        rc = zdist_error_set(err, rc < 0 && rc != -EBADMSG ? rc : -EBADMSG,
                             "dynamic checkpoint file %s is "
                             "corrupt: %s",
                             path, rc < 0 ? "not what its manifest describes" : "CRC-32 mismatch");
out:
    free(in.buf);
    free(rec);
    close(in.fd);
    return rc;
}
