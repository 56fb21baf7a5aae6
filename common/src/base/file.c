/* file: crash-safe writes (temp, fsync, rename, dir fsync) with a CRC-32, bounded reads, sealed JSON. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "zdist/file.h"

#define S_PATH_MAX 4096
/* write(2) moves at most this much at once on Linux anyway. */
#define S_IO_CHUNK ((size_t)1 << 30)

uint32_t
zdist_crc32(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    while (len > 0) {
        uInt n = len > S_IO_CHUNK ? (uInt)S_IO_CHUNK : (uInt)len;
        crc = (uint32_t)crc32(crc, p, n);
        p += n;
        len -= n;
    }
    return crc;
}

static int
s_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len > S_IO_CHUNK ? S_IO_CHUNK : len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Splits path into its directory and base name (into caller buffers). */
static int
s_split(const char *path, char *dir, char *base, zdist_error_t *err)
{
    size_t len = path ? strlen(path) : 0;
    if (len == 0 || len >= S_PATH_MAX || path[len - 1] == '/')
        return zdist_error_set(err, -EINVAL, "'%s': not a file path", path ? path : "");
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
        strcpy(base, path);
    } else {
        size_t dlen = slash == path ? 1 : (size_t)(slash - path);
        memcpy(dir, path, dlen);
        dir[dlen] = 0;
        strcpy(base, slash + 1);
    }
    return 0;
}

int
zdist_file_sync_dir(const char *dir, zdist_error_t *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return zdist_error_set(err, -errno, "cannot open directory %s: %s", dir, strerror(errno));
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    if (rc < 0)
        return zdist_error_set(err, rc, "cannot fsync directory %s: %s", dir, strerror(-rc));
    return 0;
}

/* Writes below this size are gathered first (one write(2) per buffer). */
#define S_OUT_BUFFER ((size_t)1 << 20)

struct zdist_file_out_t {
    char path[S_PATH_MAX], dir[S_PATH_MAX], tmp[2 * S_PATH_MAX + 64];
    int fd;
    int rc; /* the first error, sticky */
    uint32_t crc;
    uint64_t bytes;
    char *buf;
    size_t used;
};

void
zdist_file_out_destroy(zdist_file_out_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_file_out_t *self = *self_p;
    if (self->fd >= 0) {
        close(self->fd);
        unlink(self->tmp);
    }
    free(self->buf);
    free(self);
    *self_p = NULL;
}

static int
s_out_open(const char *path, unsigned mode, zdist_file_out_t **ret_out, zdist_error_t *err)
{
    zdist_file_out_t *self = calloc(1, sizeof *self);
    if (!self || !(self->buf = malloc(S_OUT_BUFFER))) {
        free(self);
        return zdist_error_set(err, -ENOMEM, "%s: out of memory", path ? path : "");
    }
    self->fd = -1;
    char base[S_PATH_MAX];
    int rc = s_split(path, self->dir, base, err);
    if (rc < 0) {
        zdist_file_out_destroy(&self);
        return rc;
    }
    snprintf(self->path, sizeof self->path, "%s", path);
    snprintf(self->tmp, sizeof self->tmp, "%s/.%s.tmp-%ld", self->dir, base, (long)getpid());
    self->fd = open(self->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (self->fd < 0) {
        rc = zdist_error_set(err, -errno, "cannot create %s: %s", self->tmp, strerror(errno));
        zdist_file_out_destroy(&self);
        return rc;
    }
    *ret_out = self;
    return 0;
}

zdist_file_out_t *
zdist_file_out_new(const char *path, unsigned mode, zdist_error_t *err)
{
    zdist_file_out_t *self = NULL;
    s_out_open(path, mode, &self, err);
    return self;
}

static int
s_out_flush(zdist_file_out_t *self)
{
    if (self->rc == 0 && self->used > 0)
        self->rc = s_write_all(self->fd, self->buf, self->used);
    self->used = 0;
    return self->rc;
}

int
zdist_file_out_write(zdist_file_out_t *self, const void *buf, size_t len)
{
    if (self->rc < 0 || len == 0)
        return self->rc;
    self->crc = zdist_crc32(self->crc, buf, len);
    self->bytes += len;
    if (self->used + len > S_OUT_BUFFER && s_out_flush(self) < 0)
        return self->rc;
    if (len >= S_OUT_BUFFER) /* a big piece goes straight out */
        return self->rc = s_write_all(self->fd, buf, len);
    memcpy(self->buf + self->used, buf, len);
    self->used += len;
    return 0;
}

int
zdist_file_out_commit(zdist_file_out_t **self_p, uint32_t *ret_crc, uint64_t *ret_bytes, zdist_error_t *err)
{
    zdist_file_out_t *self = *self_p;
    int rc = s_out_flush(self);
    if (rc == 0 && fsync(self->fd) < 0)
        rc = -errno;
    if (close(self->fd) < 0 && rc == 0)
        rc = -errno;
    self->fd = -1;
    if (rc == 0 && rename(self->tmp, self->path) < 0)
        rc = -errno;
    if (rc < 0) {
        unlink(self->tmp);
        zdist_error_set(err, rc, "cannot write %s: %s", self->path, strerror(-rc));
    } else if ((rc = zdist_file_sync_dir(self->dir, err)) == 0) {
        if (ret_crc)
            *ret_crc = self->crc;
        if (ret_bytes)
            *ret_bytes = self->bytes;
    }
    zdist_file_out_destroy(self_p);
    return rc;
}

int
zdist_file_write(const char *path, const zdist_file_piece_t *pieces, int npieces, unsigned mode, uint32_t *ret_crc,
                 zdist_error_t *err)
{
    if (npieces < 0 || (npieces > 0 && !pieces))
        return zdist_error_set(err, -EINVAL, "%s: no contents given", path ? path : "");
    zdist_file_out_t *out = NULL;
    int rc = s_out_open(path, mode, &out, err);
    for (int i = 0; rc == 0 && i < npieces; i++)
        zdist_file_out_write(out, pieces[i].buf, pieces[i].len);
    return rc < 0 ? rc : zdist_file_out_commit(&out, ret_crc, NULL, err);
}

int
zdist_file_write_text(const char *path, const char *text, zdist_error_t *err)
{
    zdist_file_piece_t piece = {text, text ? strlen(text) : 0};
    return zdist_file_write(path, &piece, 1, 0644, NULL, err);
}

int
zdist_file_read(const char *path, size_t max_bytes, void **ret_buf, size_t *ret_len, zdist_error_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return zdist_error_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        int e = errno;
        close(fd);
        return zdist_error_set(err, -e, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return zdist_error_set(err, -EINVAL, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > (uint64_t)max_bytes) {
        close(fd);
        return zdist_error_set(err, -EFBIG, "%s: %lld bytes, more than the %zu allowed", path,
                               (long long)sb.st_size, max_bytes);
    }
    size_t len = (size_t)sb.st_size;
    char *buf = malloc(len + 1);
    if (!buf) {
        close(fd);
        return zdist_error_set(err, -ENOMEM, "%s: out of memory for %zu bytes", path, len);
    }
    size_t got = 0;
    int rc = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        if (n == 0) {
            rc = -EBADMSG; /* shrank while read */
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    if (rc < 0) {
        free(buf);
        return zdist_error_set(err, rc, "cannot read %s: %s", path, strerror(-rc));
    }
    buf[len] = 0;
    *ret_buf = buf;
    *ret_len = len;
    return 0;
}

/* CRC-32 of doc's canonical text without its `field`; -ENOMEM. */
static int
s_json_crc(json_t *doc, const char *field, uint32_t *ret)
{
    json_t *copy = json_copy(doc); /* shallow: only the top level is new */
    if (!copy)
        return -ENOMEM;
    json_object_del(copy, field);
    char *canon = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(copy);
    if (!canon)
        return -ENOMEM;
    *ret = zdist_crc32(0, canon, strlen(canon));
    free(canon);
    return 0;
}

int
zdist_json_crc_seal(json_t *doc, const char *field, zdist_error_t *err)
{
    if (!json_is_object(doc))
        return zdist_error_set(err, -EINVAL, "cannot seal \"%s\" into a JSON value that is not an object",
                               field);
    uint32_t crc = 0;
    if (s_json_crc(doc, field, &crc) < 0 ||
        json_object_set_new(doc, field, json_integer((json_int_t) crc)) < 0)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    return 0;
}

int
zdist_json_crc_check(json_t *doc, const char *field, bool required, const char *name, zdist_error_t *err)
{
    if (!json_is_object(doc))
        return zdist_error_set(err, -EBADMSG, "%s is damaged (not a JSON object)", name);
    json_t *want = json_object_get(doc, field);
    if (!want)
        return required ? zdist_error_set(err, -EBADMSG, "%s is damaged (no \"%s\")", name, field) : 0;
    if (!json_is_integer(want))
        return zdist_error_set(err, -EBADMSG, "%s is damaged (\"%s\" is not an integer)", name, field);
    uint32_t crc = 0;
    if (s_json_crc(doc, field, &crc) < 0)
        return zdist_error_set(err, -ENOMEM, "%s: out of memory", name);
    if ((json_int_t) crc != json_integer_value(want))
        return zdist_error_set(err, -EBADMSG, "%s is damaged (CRC-32 %08" PRIx32 ", \"%s\" says %08llx)",
                               name, crc, field, (unsigned long long) json_integer_value(want));
    json_object_del(doc, field);
    return 0;
}

int
zdist_json_write_sealed(const char *path, json_t *doc, const char *field, zdist_error_t *err)
{
    int rc = zdist_json_crc_seal(doc, field, err);
    if (rc < 0)
        return rc;
    char *text = json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS);
    if (!text)
        return zdist_error_set(err, -ENOMEM, "cannot write '%s': out of memory", path);
    rc = zdist_file_write_text(path, text, err);
    free(text);
    return rc;
}

bool
zdist_path_under(const char *path, const char *root)
{
    if (root[0] == '/' && root[1] == 0)
        return path[0] == '/';
    const char *p = path, *r = root;
    while (*r) {
        if (*p != '/' || *r != '/')
            return false;
        while (*p == '/' || (p[0] == '.' && (p[1] == '/' || p[1] == 0) && p[-1] == '/'))
            p++;
        r++;
        size_t rn = strcspn(r, "/"), pn = strcspn(p, "/");
        if (rn != pn || memcmp(r, p, rn) != 0)
            return false;
        r += rn;
        p += pn;
    }
    /* The root is used up: what follows in path must be below it. */
    while (*p == '/' || (p[0] == '.' && (p[1] == '/' || p[1] == 0) && p[-1] == '/'))
        p++;
    return *p != 0;
}

bool
zdist_path_has_dotdot(const char *path)
{
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return true;
        p += n;
        while (*p == '/')
            p++;
    }
    return false;
}

json_t *
zdist_json_read(const char *path, size_t max_bytes, const char *crc_field, zdist_error_t *err)
{
    void *buf = NULL;
    size_t len = 0;
    if (zdist_file_read(path, max_bytes, &buf, &len, err) < 0)
        return NULL;
    json_error_t jerr;
    json_t *o = json_loadb(buf, len, 0, &jerr);
    free(buf);
    if (!o) {
        zdist_error_set(err, -EBADMSG, "%s is damaged: not JSON (%s, line %d)", path, jerr.text, jerr.line);
        return NULL;
    }
    if (crc_field && zdist_json_crc_check(o, crc_field, false, path, err) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}
