/* zdist TFRecord files: CRC-32C, the record reader (mapped or buffered,
   plain or GZIP) and the atomic writer. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "zdist/tfrecord.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

/* ------------------------------------------------------------------------ */
/* CRC-32C                                                                    */

#define S_CRC32C_POLY 0x82f63b78u /* Castagnoli, reflected */
#define S_MASK_DELTA 0xa282ead8u

static uint32_t s_crc_table[8][256];
static uint32_t (*s_crc_impl)(uint32_t, const uint8_t *, size_t);
static pthread_once_t s_crc_once = PTHREAD_ONCE_INIT;

/* Slicing-by-8: eight bytes a step through eight tables. */
static uint32_t
s_crc_sw(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t) p & 7)) {
        crc = s_crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = s_crc_table[7][w & 0xff] ^ s_crc_table[6][(w >> 8) & 0xff] ^ s_crc_table[5][(w >> 16) & 0xff] ^
              s_crc_table[4][(w >> 24) & 0xff] ^ s_crc_table[3][(w >> 32) & 0xff] ^
              s_crc_table[2][(w >> 40) & 0xff] ^ s_crc_table[1][(w >> 48) & 0xff] ^ s_crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = s_crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
s_crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = crc;
    while (n && ((uintptr_t) p & 7)) {
        c = _mm_crc32_u8((uint32_t) c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = _mm_crc32_u8((uint32_t) c, *p++);
    return (uint32_t) c;
}
#endif

static void
s_crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ S_CRC32C_POLY : c >> 1;
        s_crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            s_crc_table[t][i] = (s_crc_table[t - 1][i] >> 8) ^ s_crc_table[0][s_crc_table[t - 1][i] & 0xff];
    s_crc_impl = s_crc_sw;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2"))
        s_crc_impl = s_crc_hw;
#endif
}

uint32_t
zdist_crc32c_extend(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&s_crc_once, s_crc_init);
    return ~s_crc_impl(~crc, data, n);
}

uint32_t
zdist_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + S_MASK_DELTA;
}

uint32_t
zdist_crc32c_unmask(uint32_t masked)
{
    uint32_t rot = masked - S_MASK_DELTA;
    return (rot >> 17) | (rot << 15);
}

int
zdist_tfrecord_compression_parse(const char *text, zdist_tfrecord_compression_t *ret, zdist_error_t *err)
{
    if (!text || !*text || !strcasecmp(text, "none")) {
        *ret = ZDIST_TFRECORD_NONE;
        return 0;
    }
    if (!strcasecmp(text, "gzip")) {
        *ret = ZDIST_TFRECORD_GZIP;
        return 0;
    }
    return zdist_error_set(err, -EINVAL, "compression '%.40s' is not one of \"none\", \"gzip\"", text);
}

/* ------------------------------------------------------------------------ */
/* Reader                                                                     */

#define S_HEADER_BYTES 12 /* length + its CRC */
#define S_FOOTER_BYTES 4
#define S_STREAM_BUFFER (1u << 20)

struct zdist_tfrecord_reader_t {
    char *path;
    int fd;
    /* Mapped: the whole file. */
    const uint8_t *map;
    size_t map_len;
    /* Buffered: buf[pos..end) not yet consumed. */
    gzFile gz;
    uint8_t *buf;
    size_t cap, pos, end;
    bool eof;
    uint64_t offset; /* of buf[pos] (or map[offset]) in the uncompressed stream */
    int64_t count;
    int failed; /* the error every later call repeats */
    char failed_text[ZDIST_ERROR_TEXT_MAX];
};

static int
s_fail(zdist_tfrecord_reader_t *self, zdist_error_t *err, int code, const char *fmt, uint64_t offset)
{
    char what[160];
    snprintf(what, sizeof what, fmt, (unsigned long long) offset);
    self->failed = code;
    snprintf(self->failed_text, sizeof self->failed_text, "'%s': %s%s", self->path, what,
             offset == 0 && code == -EBADMSG ? " (Is this even a TFRecord file?)" : "");
    return zdist_error_set(err, code, "%s", self->failed_text);
}

static int
s_reader_open_stream(zdist_tfrecord_reader_t *self, bool gzip, zdist_error_t *err)
{
    if (gzip) {
        uint8_t magic[2] = {0, 0};
        if (pread(self->fd, magic, 2, 0) != 2 || magic[0] != 0x1f || magic[1] != 0x8b)
            return zdist_error_set(err, -EINVAL,
                                   "'%s': not a gzip file, but read with compression \"gzip\" (set "
                                   "\"compression\": \"none\" for plain TFRecord files)",
                                   self->path);
    }
    int fd = dup(self->fd);
    if (fd < 0)
        return zdist_error_set(err, -errno, "'%s': %s", self->path, strerror(errno));
    /* Plain streams (a pipe, say) go through zlib's transparent mode. */
    self->gz = gzdopen(fd, "rb");
    if (!self->gz) {
        close(fd);
        return zdist_error_set(err, -ENOMEM, "'%s': out of memory", self->path);
    }
    gzbuffer(self->gz, 1 << 18);
    self->cap = S_STREAM_BUFFER;
    self->buf = malloc(self->cap);
    if (!self->buf)
        return zdist_error_set(err, -ENOMEM, "'%s': out of memory", self->path);
    return 0;
}

zdist_tfrecord_reader_t *
zdist_tfrecord_reader_open(const char *path, zdist_tfrecord_compression_t compression, zdist_error_t *err)
{
    zdist_tfrecord_reader_t *self = calloc(1, sizeof *self);
    if (!self || !(self->path = strdup(path))) {
        free(self);
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (self->fd < 0) {
        int e = errno;
        zdist_error_set(err, -e, "'%s': cannot open: %s", path, strerror(e));
        zdist_tfrecord_reader_destroy(&self);
        return NULL;
    }
    struct stat st;
    if (compression == ZDIST_TFRECORD_NONE && fstat(self->fd, &st) == 0 && S_ISREG(st.st_mode)) {
        self->map_len = (size_t) st.st_size;
        if (self->map_len == 0)
            return self;
        void *m = mmap(NULL, self->map_len, PROT_READ, MAP_PRIVATE, self->fd, 0);
        if (m != MAP_FAILED) {
            self->map = m;
            madvise(m, self->map_len, MADV_SEQUENTIAL);
            return self;
        }
        self->map_len = 0;
    }
    if (s_reader_open_stream(self, compression == ZDIST_TFRECORD_GZIP, err) < 0)
        zdist_tfrecord_reader_destroy(&self);
    return self;
}

void
zdist_tfrecord_reader_destroy(zdist_tfrecord_reader_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_tfrecord_reader_t *self = *self_p;
    if (self->map)
        munmap((void *) self->map, self->map_len);
    if (self->gz)
        gzclose(self->gz);
    if (self->fd >= 0)
        close(self->fd);
    free(self->buf);
    free(self->path);
    free(self);
    *self_p = NULL;
}

/* Makes at least `need` bytes available at buf[pos] unless the stream ends
   first; returns how many are available (possibly fewer), or a negative
   errno for a failed read. */
static int64_t
s_fill(zdist_tfrecord_reader_t *self, size_t need, zdist_error_t *err)
{
    if (self->end - self->pos >= need || self->eof)
        return (int64_t) (self->end - self->pos);
    if (self->pos > 0) {
        memmove(self->buf, self->buf + self->pos, self->end - self->pos);
        self->end -= self->pos;
        self->pos = 0;
    }
    if (need > self->cap) {
        size_t cap = self->cap;
        while (cap < need)
            cap *= 2;
        uint8_t *b = realloc(self->buf, cap);
        if (!b)
            return zdist_error_set(err, -ENOMEM, "'%s': out of memory for a record of %zu bytes", self->path, need);
        self->buf = b;
        self->cap = cap;
    }
    while (self->end < need) {
        int got = gzread(self->gz, self->buf + self->end, (unsigned) (self->cap - self->end));
        if (got < 0) {
            int zerr = 0;
            const char *msg = gzerror(self->gz, &zerr);
            self->failed = zerr == Z_ERRNO ? -EIO : -EBADMSG;
            snprintf(self->failed_text, sizeof self->failed_text, "'%s': cannot read near offset %llu: %s",
                     self->path, (unsigned long long) (self->offset + self->end), msg);
            return zdist_error_set(err, self->failed, "%s", self->failed_text);
        }
        if (got == 0) {
            self->eof = true;
            break;
        }
        self->end += (size_t) got;
    }
    return (int64_t) (self->end - self->pos);
}

/* Points *ret at `need` contiguous bytes of the record starting at the
   current offset; returns the count available (short at the end). */
static int64_t
s_window(zdist_tfrecord_reader_t *self, size_t need, const uint8_t **ret, zdist_error_t *err)
{
    if (!self->gz) {
        if (!self->map)
            return 0; /* an empty file */
        size_t left = self->map_len - (size_t) self->offset;
        *ret = self->map + self->offset;
        return (int64_t) (left < need ? left : need);
    }
    int64_t got = s_fill(self, need, err);
    *ret = self->buf + self->pos;
    return got < 0 ? got : (got < (int64_t) need ? got : (int64_t) need);
}

static void
s_advance(zdist_tfrecord_reader_t *self, size_t n)
{
    if (self->gz)
        self->pos += n;
    self->offset += n;
}

static inline uint32_t
s_le32(const uint8_t *p)
{
    return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static inline uint64_t
s_le64(const uint8_t *p)
{
    return (uint64_t) s_le32(p) | (uint64_t) s_le32(p + 4) << 32;
}

int
zdist_tfrecord_reader_next(zdist_tfrecord_reader_t *self, const uint8_t **ret_data, size_t *ret_len,
                           zdist_error_t *err)
{
    if (self->failed)
        return zdist_error_set(err, self->failed, "%s", self->failed_text);
    const uint8_t *p;
    int64_t got = s_window(self, S_HEADER_BYTES, &p, err);
    if (got <= 0)
        return (int) got; /* 0: the end, between records */
    uint64_t at = self->offset;
    if (got < S_HEADER_BYTES)
        return s_fail(self, err, -EBADMSG, "truncated record at %llu", at);
    if (zdist_crc32c_unmask(s_le32(p + 8)) != zdist_crc32c_extend(0, p, 8))
        return s_fail(self, err, -EBADMSG, "corrupted record at %llu", at);
    uint64_t len = s_le64(p);
    if (len > (uint64_t) ZDIST_TFRECORD_MAX_RECORD)
        return s_fail(self, err, -EFBIG, "record at %llu is over the reader's limit of 1 GiB", at);
    size_t whole = S_HEADER_BYTES + (size_t) len + S_FOOTER_BYTES;
    got = s_window(self, whole, &p, err);
    if (got < 0)
        return (int) got;
    if ((size_t) got < whole)
        return s_fail(self, err, -EBADMSG, "truncated record at %llu", at);
    const uint8_t *data = p + S_HEADER_BYTES;
    if (zdist_crc32c_unmask(s_le32(data + len)) != zdist_crc32c_extend(0, data, (size_t) len))
        return s_fail(self, err, -EBADMSG, "corrupted record at %llu", at);
    s_advance(self, whole);
    self->count++;
    *ret_data = data;
    *ret_len = (size_t) len;
    return 1;
}

uint64_t
zdist_tfrecord_reader_offset(const zdist_tfrecord_reader_t *self)
{
    return self->offset;
}

int64_t
zdist_tfrecord_reader_count(const zdist_tfrecord_reader_t *self)
{
    return self->count;
}

const char *
zdist_tfrecord_reader_path(const zdist_tfrecord_reader_t *self)
{
    return self->path;
}

/* ------------------------------------------------------------------------ */
/* Writer                                                                     */

struct zdist_tfrecord_writer_t {
    char *path;
    char *tmp;
    FILE *plain;
    gzFile gz;
    int failed;
};

zdist_tfrecord_writer_t *
zdist_tfrecord_writer_open(const char *path, zdist_tfrecord_compression_t compression, zdist_error_t *err)
{
    zdist_tfrecord_writer_t *self = calloc(1, sizeof *self);
    if (!self || !(self->path = strdup(path)) || asprintf(&self->tmp, "%s.tmp.%ld", path, (long) getpid()) < 0) {
        if (self)
            free(self->path);
        free(self);
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    int fd = open(self->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        zdist_error_set(err, -e, "'%s': cannot create: %s", self->tmp, strerror(e));
        free(self->tmp);
        self->tmp = NULL; /* nothing to remove */
        zdist_tfrecord_writer_destroy(&self);
        return NULL;
    }
    if (compression == ZDIST_TFRECORD_GZIP) {
        self->gz = gzdopen(fd, "wb6");
        if (self->gz)
            gzbuffer(self->gz, 1 << 18);
    } else {
        self->plain = fdopen(fd, "wb");
    }
    if (!self->gz && !self->plain) {
        close(fd);
        zdist_error_set(err, -ENOMEM, "'%s': out of memory", self->tmp);
        zdist_tfrecord_writer_destroy(&self);
    }
    return self;
}

static int
s_put(zdist_tfrecord_writer_t *self, const void *data, size_t len)
{
    if (self->gz) {
        while (len) {
            unsigned chunk = len > (1u << 30) ? 1u << 30 : (unsigned) len;
            if (gzwrite(self->gz, data, chunk) != (int) chunk)
                return -EIO;
            data = (const uint8_t *) data + chunk;
            len -= chunk;
        }
        return 0;
    }
    return fwrite(data, 1, len, self->plain) == len ? 0 : -errno ? -errno : -EIO;
}

int
zdist_tfrecord_writer_write(zdist_tfrecord_writer_t *self, const void *data, size_t len)
{
    if (self->failed)
        return self->failed;
    if ((uint64_t) len > (uint64_t) ZDIST_TFRECORD_MAX_RECORD)
        return -EFBIG;
    uint8_t head[S_HEADER_BYTES], foot[S_FOOTER_BYTES];
    uint64_t l = len;
    for (int i = 0; i < 8; i++)
        head[i] = (uint8_t) (l >> (8 * i));
    uint32_t c = zdist_crc32c_mask(zdist_crc32c_extend(0, head, 8));
    for (int i = 0; i < 4; i++)
        head[8 + i] = (uint8_t) (c >> (8 * i));
    c = zdist_crc32c_mask(zdist_crc32c_extend(0, data, len));
    for (int i = 0; i < 4; i++)
        foot[i] = (uint8_t) (c >> (8 * i));
    int rc = s_put(self, head, sizeof head);
    if (rc == 0)
        rc = s_put(self, data, len);
    if (rc == 0)
        rc = s_put(self, foot, sizeof foot);
    if (rc < 0)
        self->failed = rc;
    return rc;
}

/* Flushes and syncs the temporary file and closes it; 0 or -errno. */
static int
s_finish(zdist_tfrecord_writer_t *self)
{
    int rc = self->failed;
    if (self->gz) {
        /* gzclose finishes the stream and closes the descriptor, so the
           file is synced through a descriptor of its own. */
        if (gzclose(self->gz) != Z_OK && rc == 0)
            rc = -EIO;
        self->gz = NULL;
        if (rc == 0) {
            int fd = open(self->tmp, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || fsync(fd) < 0)
                rc = -errno;
            if (fd >= 0)
                close(fd);
        }
    } else if (self->plain) {
        if (rc == 0 && (fflush(self->plain) != 0 || fsync(fileno(self->plain)) < 0))
            rc = -errno;
        if (fclose(self->plain) != 0 && rc == 0)
            rc = -errno;
        self->plain = NULL;
    }
    return rc;
}

int
zdist_tfrecord_writer_close(zdist_tfrecord_writer_t **self_p, zdist_error_t *err)
{
    if (!self_p || !*self_p)
        return 0;
    zdist_tfrecord_writer_t *self = *self_p;
    int rc = s_finish(self);
    if (rc == 0 && rename(self->tmp, self->path) < 0)
        rc = -errno;
    if (rc == 0) {
        free(self->tmp);
        self->tmp = NULL;
    } else {
        zdist_error_set(err, rc, "'%s': cannot write: %s", self->path, strerror(-rc));
    }
    zdist_tfrecord_writer_destroy(self_p);
    return rc;
}

void
zdist_tfrecord_writer_destroy(zdist_tfrecord_writer_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_tfrecord_writer_t *self = *self_p;
    if (self->gz)
        gzclose(self->gz);
    if (self->plain)
        fclose(self->plain);
    if (self->tmp) {
        unlink(self->tmp);
        free(self->tmp);
    }
    free(self->path);
    free(self);
    *self_p = NULL;
}
