/* zdist_dynfile: a dynamic table's checkpoint data file read in one streaming pass, its CRC-32 taken as it goes. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zdist/dynfile.h"
#include "zdist/file.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dynamic checkpoint files are raw little-endian: a big-endian host must swap"
#endif

#define S_IO_CHUNK ((size_t) 1 << 20)
#define S_DIM_MAX 65536

void
zdist_dynfile_head_pack(const zdist_dynfile_head_t *h, unsigned char *out)
{
    uint32_t version = ZDIST_DYNFILE_VERSION, kind = (uint32_t) h->kind;
    memset(out, 0, ZDIST_DYNFILE_HEAD_BYTES);
    memcpy(out, ZDIST_DYNFILE_MAGIC, 8);
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
    memcpy(out + 56, &h->pending, 8);
}

size_t
zdist_dynfile_row_bytes(uint32_t dim, uint32_t nslots)
{
    return 24 + (size_t) dim * sizeof(float) * (1 + nslots);
}

typedef struct {
    int fd;
    char *buf;
    size_t len, pos;
    uint64_t left;
    uint32_t crc;
    bool stopped; /* a callback returned an error */
} s_in_t;

/* A callback's return: an error stops the read as it is. */
static int
s_cb(s_in_t *in, int rc)
{
    if (rc < 0)
        in->stopped = true;
    return rc;
}

static int
s_read(s_in_t *in, void *dst, size_t n)
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

/* The header: a version 1 or 2 file whose parts add up to `bytes`. */
static int
s_head(s_in_t *in, uint64_t bytes, zdist_dynfile_head_t *h, const char **why)
{
    unsigned char b[ZDIST_DYNFILE_HEAD_BYTES];
    uint32_t kind = 0;
    int rc = s_read(in, b, sizeof b);
    if (rc < 0)
        return rc;
    memcpy(&h->version, b + 8, 4);
    memcpy(&kind, b + 12, 4);
    memcpy(&h->step, b + 16, 8);
    memcpy(&h->dim, b + 24, 4);
    memcpy(&h->nslots, b + 28, 4);
    memcpy(&h->optim, b + 32, 4);
    memcpy(&h->ps_task, b + 36, 4);
    memcpy(&h->num_ps, b + 40, 4);
    memcpy(&h->name_len, b + 44, 4);
    memcpy(&h->tombstones, b + 48, 8);
    memcpy(&h->pending, b + 56, 8);
    h->kind = (int) kind;
    if (memcmp(b, ZDIST_DYNFILE_MAGIC, 8) != 0 || h->version < 1 || h->version > 2) {
        *why = "not a dynamic table file of version 1 or 2";
        return -EBADMSG;
    }
    if (h->version == 1)
        h->pending = 0; /* those 8 bytes were zeros */
    if ((kind != ZDIST_DYNFILE_FULL && kind != ZDIST_DYNFILE_DELTA) || h->dim < 1 || h->dim > S_DIM_MAX ||
        h->nslots > ZDIST_OPTIM_MAX_SLOTS || h->name_len > ZDIST_DYNFILE_NAME_MAX) {
        *why = "its kind, dim, slots or name length is out of range";
        return -EBADMSG;
    }
    uint64_t fixed = ZDIST_DYNFILE_HEAD_BYTES + ((h->name_len + 7) & ~(uint64_t) 7) + ZDIST_DYNFILE_FOOT_BYTES;
    uint64_t stride = zdist_dynfile_row_bytes(h->dim, h->nslots);
    if (bytes < fixed || h->tombstones > (bytes - fixed) / 8 ||
        h->pending > (bytes - fixed - h->tombstones * 8) / ZDIST_DYNFILE_PENDING_BYTES) {
        *why = "its length does not hold its tombstones and pending counters";
        return -EBADMSG;
    }
    uint64_t rows_bytes = bytes - fixed - h->tombstones * 8 - h->pending * ZDIST_DYNFILE_PENDING_BYTES;
    if (rows_bytes % stride != 0) {
        *why = "its length is not a whole number of rows";
        return -EBADMSG;
    }
    h->rows = rows_bytes / stride;
    return 0;
}

/* Everything after the header and name, through the visitor. */
static int
s_body(s_in_t *in, const zdist_dynfile_head_t *h, const zdist_dynfile_visitor_t *v, char *rec, const char **why)
{
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < h->tombstones; i++) {
        int64_t id;
        if ((rc = s_read(in, &id, sizeof id)) == 0 && v->tombstone)
            rc = s_cb(in, v->tombstone(v->arg, id));
    }
    size_t value_bytes = (size_t) h->dim * sizeof(float), stride = zdist_dynfile_row_bytes(h->dim, h->nslots);
    zdist_dynfile_row_t row = {.values = (const float *) (rec + 24)};
    for (uint32_t k = 0; k < h->nslots; k++)
        row.slots[k] = (const float *) (rec + 24 + value_bytes * (k + 1));
    for (uint64_t r = 0; rc == 0 && r < h->rows; r++) {
        if ((rc = s_read(in, rec, stride)) < 0 || !v->row)
            continue;
        memcpy(&row.id, rec, 8);
        memcpy(&row.last_step, rec + 8, 8);
        memcpy(&row.opt_step, rec + 16, 4);
        rc = s_cb(in, v->row(v->arg, &row));
    }
    for (uint64_t i = 0; rc == 0 && i < h->pending; i++) {
        unsigned char p[ZDIST_DYNFILE_PENDING_BYTES];
        int64_t id;
        uint32_t count;
        uint64_t seen;
        if ((rc = s_read(in, p, sizeof p)) < 0 || !v->pending)
            continue;
        memcpy(&id, p, 8);
        memcpy(&count, p + 8, 4);
        memcpy(&seen, p + 16, 8);
        rc = s_cb(in, v->pending(v->arg, id, count, seen));
    }
    unsigned char foot[ZDIST_DYNFILE_FOOT_BYTES];
    uint64_t rows = 0;
    if (rc == 0 && (rc = s_read(in, foot, sizeof foot)) == 0)
        memcpy(&rows, foot, 8);
    if (rc == 0 && (rows != h->rows || memcmp(foot + 8, ZDIST_DYNFILE_END, 8) != 0 || in->left != 0 ||
                    in->pos != in->len)) {
        *why = "its footer does not match its rows";
        rc = -EBADMSG;
    }
    return rc;
}

int
zdist_dynfile_read(const char *path, const char *manifest, uint64_t bytes, uint32_t crc,
                   const zdist_dynfile_visitor_t *v, zdist_error_t *err)
{
    s_in_t in = {.fd = open(path, O_RDONLY | O_CLOEXEC), .left = bytes};
    if (in.fd < 0)
        return zdist_error_set(err, errno == ENOENT ? -EBADMSG : -errno,
                               "dynamic checkpoint file %s (listed in %s) cannot be opened: %s", path, manifest,
                               strerror(errno));
    struct stat st;
    int rc = 0;
    char *rec = NULL, name[ZDIST_DYNFILE_NAME_MAX + 8];
    const char *why = "it is cut short";
    zdist_dynfile_head_t h = {0};
    if (fstat(in.fd, &st) < 0 || (uint64_t) st.st_size != bytes) {
        rc = zdist_error_set(err, -EBADMSG,
                             "dynamic checkpoint file %s is truncated or damaged: %lld bytes, manifest %s says "
                             "%" PRIu64, path, (long long) st.st_size, manifest, bytes);
        goto out;
    }
    if (!(in.buf = malloc(S_IO_CHUNK))) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory reading %s", path);
        goto out;
    }
    if ((rc = s_head(&in, bytes, &h, &why)) == 0 &&
        (rc = s_read(&in, name, (h.name_len + 7) & ~(size_t) 7)) == 0 && v->head)
        rc = s_cb(&in, v->head(v->arg, &h, name));
    if (rc == 0 && !(rec = malloc(zdist_dynfile_row_bytes(h.dim, h.nslots)))) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory reading %s", path);
        goto out;
    }
    if (rc == 0)
        rc = s_body(&in, &h, v, rec, &why);
    if (in.stopped) /* a callback's error: the caller says why */
        goto out;
    if (rc < 0 && rc != -EBADMSG) {
        rc = zdist_error_set(err, rc, "cannot read %s: %s", path, strerror(-rc));
        goto out;
    }
    if (rc < 0 || in.crc != crc) /* a CRC-32 mismatch can only show once all is read */
        rc = zdist_error_set(err, -EBADMSG, "dynamic checkpoint file %s (listed in %s) is corrupt: %s", path,
                             manifest, rc < 0 ? why : "CRC-32 mismatch");
out:
    free(in.buf);
    free(rec);
    close(in.fd);
    return rc;
}
