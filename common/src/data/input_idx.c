/* zdist input pipelines: the IDX reader (MNIST, Fashion-MNIST), gzip'd or raw. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset.h"

#define S_IDX_IMAGES_MAGIC 0x00000803u /* ubyte, 3 dimensions */
#define S_IDX_LABELS_MAGIC 0x00000801u /* ubyte, 1 dimension */

typedef struct {
    const char *path;
    gzFile gz;
    bool gzipped;
    int64_t pos; /* bytes read so far, of the decompressed stream */
} s_idx_file_t;

static int
s_idx_open(s_idx_file_t *f, const char *path, zdist_error_t *err)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return zdist_error_set(err, -e, "'%s': cannot open: %s", path, strerror(e));
    }
    unsigned char magic[2] = {0, 0};
    ssize_t got = pread(fd, magic, 2, 0);
    f->gzipped = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    /* zlib reads plain files through the same calls ("transparent" mode). */
    f->gz = gzdopen(fd, "rb");
    if (!f->gz) {
        close(fd);
        return zdist_error_set(err, -ENOMEM, "'%s': out of memory", path);
    }
    gzbuffer(f->gz, 1 << 17);
    return 0;
}

static void
s_idx_close(s_idx_file_t *f)
{
    if (f->gz)
        gzclose(f->gz);
    f->gz = NULL;
}

/* Reads up to len bytes; returns the count (short only at the end or on a
   corrupt stream), or -EBADMSG with the message filled for a corrupt stream. */
static int64_t
s_idx_read(s_idx_file_t *f, void *buf, size_t len, const char **ret_why)
{
    size_t done = 0;
    *ret_why = NULL;
    while (done < len) {
        size_t chunk = len - done > (1u << 30) ? (1u << 30) : len - done;
        int got = gzread(f->gz, (char *) buf + done, (unsigned) chunk);
        if (got <= 0) {
            int zerr = Z_OK;
            const char *msg = zdist_dataset_gz_why_(gzerror(f->gz, &zerr));
            if (zerr != Z_OK && zerr != Z_STREAM_END)
                *ret_why = msg;
            break;
        }
        done += (size_t) got;
    }
    f->pos += (int64_t) done;
    return (int64_t) done;
}

static uint32_t
s_be32(const unsigned char *p)
{
    return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

static int
s_truncated(zdist_error_t *err, const s_idx_file_t *f, int64_t expected, const char *what, int64_t header,
            const char *why)
{
    char extra[160] = "";
    if (why)
        snprintf(extra, sizeof extra, " (gzip stream: %s)", why);
    return zdist_error_set(err, -EBADMSG, "'%s': truncated at byte %lld: expected %lld bytes of %s after the "
                           "%lld-byte header%s",
                           f->path, (long long) f->pos, (long long) expected, what, (long long) header, extra);
}

/* Reads and checks a header of 4 + 4*ndims bytes. */
static int
s_idx_header(s_idx_file_t *f, uint32_t want_magic, int ndims, uint32_t *dims, zdist_error_t *err)
{
    unsigned char h[16];
    size_t len = 4 + 4 * (size_t) ndims;
    const char *why;
    int64_t got = s_idx_read(f, h, len, &why);
    if (got >= 4 && s_be32(h) != want_magic)
        return zdist_error_set(err, -EBADMSG, "'%s': bad idx magic 0x%08x at byte 0, expected 0x%08x%s", f->path,
                               s_be32(h), want_magic,
                               want_magic == S_IDX_IMAGES_MAGIC ? " (idx3 images)" : " (idx1 labels)");
    if (got < (int64_t) len) {
        char extra[160] = "";
        if (why)
            snprintf(extra, sizeof extra, " (gzip stream: %s)", why);
        return zdist_error_set(err, -EBADMSG, "'%s': truncated at byte %lld: expected a %zu-byte idx header%s",
                               f->path, (long long) got, len, extra);
    }
    for (int i = 0; i < ndims; i++)
        dims[i] = s_be32(h + 4 + 4 * i);
    return 0;
}

/* After the payload the stream must end. */
static int
s_idx_expect_end(s_idx_file_t *f, zdist_error_t *err)
{
    unsigned char c;
    const char *why;
    int64_t at = f->pos;
    int64_t got = s_idx_read(f, &c, 1, &why);
    if (got == 1)
        return zdist_error_set(err, -EBADMSG, "'%s': unexpected data at byte %lld, after the last example",
                               f->path, (long long) at);
    if (why)
        return zdist_error_set(err, -EBADMSG, "'%s': corrupt gzip stream at byte %lld: %s", f->path,
                               (long long) at, why);
    return 0;
}

int
zdist_dataset_read_idx(const char *images_path, const char *labels_path, zdist_dataset_t **ret,
                       zdist_error_t *err)
{
    if (!images_path || !labels_path || !ret)
        return zdist_error_set(err, -EINVAL, "idx dataset needs an images file and a labels file");
    s_idx_file_t fi, fl;
    zdist_dataset_t *ds = NULL;
    unsigned char *chunk = NULL;
    memset(&fl, 0, sizeof fl);
    int r = s_idx_open(&fi, images_path, err);
    if (r < 0)
        return r;
    r = s_idx_open(&fl, labels_path, err);
    if (r < 0)
        goto out;

    uint32_t idims[3] = {0}, ldims[1] = {0};
    if ((r = s_idx_header(&fi, S_IDX_IMAGES_MAGIC, 3, idims, err)) < 0)
        goto out;
    if ((r = s_idx_header(&fl, S_IDX_LABELS_MAGIC, 1, ldims, err)) < 0)
        goto out;
    int64_t n = idims[0], rows = idims[1], cols = idims[2];
    /* rows x cols checked by division: each is up to 2^32 - 1, their product overflows int64. */
    if (n > S_INPUT_MAX_EXAMPLES || rows == 0 || cols == 0 || rows > S_INPUT_MAX_DIM / cols) {
        r = zdist_error_set(err, -EBADMSG, "'%s': implausible idx dimensions %lld x %lld x %lld at byte 4",
                            images_path, (long long) n, (long long) rows, (long long) cols);
        goto out;
    }
    if ((int64_t) ldims[0] != n) {
        r = zdist_error_set(err, -EBADMSG, "'%s' has %lld images but '%s' has %lld labels", images_path,
                            (long long) n, labels_path, (long long) ldims[0]);
        goto out;
    }
    int64_t dim = rows * cols;
    /* The arrays grow with the bytes that do arrive: the header may claim
       2^31 images of 2^24 pixels in a file of a few bytes (and a gzip'd
       file's length says nothing of its content's), which must not make
       the reader ask for that much memory. */
    ds = zdist_dataset_alloc_(0, dim, false, ZDIST_DTYPE_INT32);
    chunk = malloc(1 << 16);
    if (!ds || !chunk) {
        r = zdist_error_set(err, -ENOMEM, "'%s': out of memory for %lld examples of %lld pixels", images_path,
                            (long long) n, (long long) dim);
        goto out;
    }

    /* Pixels: stream through a small buffer straight into float32. */
    int64_t total = n * dim, done = 0, cap = 0;
    while (done < total) {
        size_t want = total - done > (1 << 16) ? (1 << 16) : (size_t) (total - done);
        const char *why;
        int64_t got = s_idx_read(&fi, chunk, want, &why);
        if (done + got > cap) {
            int64_t grown = cap ? cap * 2 : (1 << 20);
            grown = grown < done + got ? done + got : grown > total ? total : grown;
            float *more = realloc(ds->features, (size_t) grown * sizeof(float));
            if (!more) {
                r = zdist_error_set(err, -ENOMEM, "'%s': out of memory for %lld pixels", images_path,
                                    (long long) grown);
                goto out;
            }
            ds->features = more;
            cap = grown;
        }
        for (int64_t i = 0; i < got; i++)
            ds->features[done + i] = (float) chunk[i] / 255.0f;
        done += got;
        if (got < (int64_t) want) {
            r = s_truncated(err, &fi, total, "pixels", 16, why);
            goto out;
        }
    }
    if ((r = s_idx_expect_end(&fi, err)) < 0)
        goto out;

    int32_t *y = realloc(ds->labels, (size_t) n * sizeof(int32_t) + 1); /* n images arrived */
    if (!y) {
        r = zdist_error_set(err, -ENOMEM, "'%s': out of memory for %lld labels", labels_path, (long long) n);
        goto out;
    }
    ds->labels = y;
    ds->n = n;
    done = 0;
    while (done < n) {
        size_t want = n - done > (1 << 16) ? (1 << 16) : (size_t) (n - done);
        const char *why;
        int64_t got = s_idx_read(&fl, chunk, want, &why);
        for (int64_t i = 0; i < got; i++)
            y[done + i] = chunk[i];
        done += got;
        if (got < (int64_t) want) {
            r = s_truncated(err, &fl, n, "labels", 8, why);
            goto out;
        }
    }
    if ((r = s_idx_expect_end(&fl, err)) < 0)
        goto out;
    r = zdist_dataset_finish_labels_(ds, labels_path, err);
out:
    free(chunk);
    s_idx_close(&fi);
    s_idx_close(&fl);
    if (r < 0) {
        zdist_dataset_destroy(&ds);
        return r;
    }
    *ret = ds;
    return 0;
}
