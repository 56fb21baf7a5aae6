/* zdist datasets: the examples in memory, their accessors and shards, and
   what the readers (input_idx.c, input_csv.c, input_synthetic.c) build
   them with: allocation, labels, concatenation, reading a whole file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset.h"

zdist_dataset_t *
zdist_dataset_alloc_(int64_t n, int64_t dim, bool sparse, zdist_dtype_t label_dtype)
{
    if (n < 0 || dim < 0 || n > S_INPUT_MAX_EXAMPLES || dim > S_INPUT_MAX_DIM)
        return NULL;
    zdist_dataset_t *ds = calloc(1, sizeof *ds);
    if (!ds)
        return NULL;
    ds->n = n;
    ds->dim = dim;
    ds->sparse = sparse;
    ds->label_dtype = label_dtype;
    size_t nn = (size_t) n;
    ds->labels = malloc(nn * 4 + 1);
    if (sparse)
        ds->row_offsets = calloc(nn + 1, sizeof(int64_t));
    else {
        if (dim && nn > SIZE_MAX / sizeof(float) / (size_t) dim) {
            zdist_dataset_destroy(&ds);
            return NULL;
        }
        ds->features = malloc(nn * (size_t) dim * sizeof(float) + 1);
    }
    if (!ds->labels || (sparse ? !ds->row_offsets : !ds->features))
        zdist_dataset_destroy(&ds);
    return ds;
}

void
zdist_dataset_destroy(zdist_dataset_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_dataset_t *self = *self_p;
    free(self->features);
    free(self->labels);
    free(self->row_offsets);
    free(self->feature_ids);
    free(self->feature_values);
    for (int i = 0; self->cols && i < self->ncols; i++) {
        free((char *) self->cols[i].name);
        free((void *) self->cols[i].values);
        free((void *) self->cols[i].row_offsets);
    }
    free(self->cols);
    free(self->col_max_row);
    free(self->origin);
    free(self);
    *self_p = NULL;
}

int
zdist_dataset_finish_labels_(zdist_dataset_t *ds, const char *what, zdist_error_t *err)
{
    ds->num_classes = 0;
    if (ds->label_dtype != ZDIST_DTYPE_INT32)
        return 0;
    const int32_t *y = ds->labels;
    int32_t max = -1;
    for (int64_t i = 0; i < ds->n; i++) {
        if (y[i] < 0)
            return zdist_error_set(err, -EINVAL, "%s: example %lld has label %d: class labels must be >= 0",
                                   what, (long long) i, (int) y[i]);
        if (y[i] > max)
            max = y[i];
    }
    ds->num_classes = max + 1;
    return 0;
}

int
zdist_dataset_concat_(zdist_dataset_t *a, const zdist_dataset_t *b)
{
    if (a->sparse != b->sparse || a->dim != b->dim || a->label_dtype != b->label_dtype)
        return -EINVAL;
    size_t n = (size_t) (a->n + b->n);
    void *labels = realloc(a->labels, n * 4 + 1);
    if (!labels)
        return -ENOMEM;
    a->labels = labels;
    memcpy((char *) a->labels + (size_t) a->n * 4, b->labels, (size_t) b->n * 4);
    if (!a->sparse) {
        size_t d = (size_t) a->dim;
        float *f = realloc(a->features, n * d * sizeof(float) + 1);
        if (!f)
            return -ENOMEM;
        a->features = f;
        memcpy(a->features + (size_t) a->n * d, b->features, (size_t) b->n * d * sizeof(float));
    } else {
        int64_t nnz_a = a->row_offsets[a->n], nnz_b = b->row_offsets[b->n];
        size_t nnz = (size_t) (nnz_a + nnz_b);
        int64_t *ro = realloc(a->row_offsets, (n + 1) * sizeof(int64_t));
        if (!ro)
            return -ENOMEM;
        a->row_offsets = ro;
        int64_t *ids = realloc(a->feature_ids, nnz ? nnz * sizeof(int64_t) : 1);
        if (!ids)
            return -ENOMEM;
        a->feature_ids = ids;
        float *vals = realloc(a->feature_values, nnz ? nnz * sizeof(float) : 1);
        if (!vals)
            return -ENOMEM;
        a->feature_values = vals;
        for (int64_t i = 1; i <= b->n; i++)
            a->row_offsets[a->n + i] = nnz_a + b->row_offsets[i];
        memcpy(a->feature_ids + nnz_a, b->feature_ids, (size_t) nnz_b * sizeof(int64_t));
        memcpy(a->feature_values + nnz_a, b->feature_values, (size_t) nnz_b * sizeof(float));
        if (b->max_row_nnz > a->max_row_nnz)
            a->max_row_nnz = b->max_row_nnz;
    }
    a->n = (int64_t) n;
    if (b->num_classes > a->num_classes)
        a->num_classes = b->num_classes;
    return 0;
}

int64_t
zdist_dataset_size(const zdist_dataset_t *self)
{
    return self->n;
}

int64_t
zdist_dataset_dim(const zdist_dataset_t *self)
{
    return self->dim;
}

bool
zdist_dataset_is_sparse(const zdist_dataset_t *self)
{
    return self->sparse;
}

zdist_dtype_t
zdist_dataset_label_dtype(const zdist_dataset_t *self)
{
    return self->label_dtype;
}

int
zdist_dataset_num_classes(const zdist_dataset_t *self)
{
    return self->num_classes;
}

const float *
zdist_dataset_features(const zdist_dataset_t *self)
{
    return self->sparse ? NULL : self->features;
}

const void *
zdist_dataset_labels(const zdist_dataset_t *self)
{
    return self->labels;
}

const int64_t *
zdist_dataset_row_offsets(const zdist_dataset_t *self)
{
    return self->sparse ? self->row_offsets : NULL;
}

const int64_t *
zdist_dataset_feature_ids(const zdist_dataset_t *self)
{
    return self->sparse ? self->feature_ids : NULL;
}

const float *
zdist_dataset_feature_values(const zdist_dataset_t *self)
{
    return self->sparse ? self->feature_values : NULL;
}

int64_t
zdist_dataset_max_row_nnz(const zdist_dataset_t *self)
{
    return self->sparse ? self->max_row_nnz : 0;
}

int
zdist_dataset_num_columns(const zdist_dataset_t *self)
{
    return self->ncols;
}

const zdist_step_column_t *
zdist_dataset_column(const zdist_dataset_t *self, int i)
{
    return i >= 0 && i < self->ncols ? &self->cols[i] : NULL;
}

const int64_t *
zdist_dataset_origins(const zdist_dataset_t *self)
{
    return self->origin;
}

int
zdist_dataset_shard(const zdist_dataset_t *self, int64_t num_shards, int64_t index, zdist_dataset_t **ret)
{
    if (!self || !ret || num_shards < 1 || index < 0 || index >= num_shards)
        return -EINVAL;
    if (self->ncols > 0)
        return -ENOTSUP; /* named columns are sharded as files are read (zdist_dataset_load) */
    int64_t n = self->n > index ? (self->n - index + num_shards - 1) / num_shards : 0;
    zdist_dataset_t *out = zdist_dataset_alloc_(n, self->dim, self->sparse, self->label_dtype);
    if (!out)
        return -ENOMEM;
    int64_t nnz = 0;
    if (self->sparse) {
        for (int64_t i = index; i < self->n; i += num_shards)
            nnz += self->row_offsets[i + 1] - self->row_offsets[i];
        out->feature_ids = malloc(nnz ? (size_t) nnz * sizeof(int64_t) : 1);
        out->feature_values = malloc(nnz ? (size_t) nnz * sizeof(float) : 1);
        if (!out->feature_ids || !out->feature_values) {
            zdist_dataset_destroy(&out);
            return -ENOMEM;
        }
    }
    size_t d = (size_t) self->dim;
    int64_t k = 0, at = 0;
    for (int64_t i = index; i < self->n; i += num_shards, k++) {
        memcpy((char *) out->labels + k * 4, (const char *) self->labels + i * 4, 4);
        if (!self->sparse) {
            memcpy(out->features + (size_t) k * d, self->features + (size_t) i * d, d * sizeof(float));
        } else {
            int64_t b = self->row_offsets[i], e = self->row_offsets[i + 1];
            memcpy(out->feature_ids + at, self->feature_ids + b, (size_t) (e - b) * sizeof(int64_t));
            memcpy(out->feature_values + at, self->feature_values + b, (size_t) (e - b) * sizeof(float));
            at += e - b;
            out->row_offsets[k + 1] = at;
            if (e - b > out->max_row_nnz)
                out->max_row_nnz = e - b;
        }
    }
    out->num_classes = self->num_classes;
    *ret = out;
    return 0;
}

/* ------------------------------------------------------------------ file input */

const char *
zdist_dataset_gz_why_(const char *msg)
{
    if (msg && strncmp(msg, "<fd:", 4) == 0) {
        const char *colon = strstr(msg, ": ");
        if (colon)
            return colon + 2;
    }
    return msg;
}

int
zdist_dataset_slurp_(const char *path, char **ret, size_t *ret_len, zdist_error_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return zdist_error_set(err, -e, "'%s': cannot open: %s", path, strerror(e));
    }
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return zdist_error_set(err, -ENOMEM, "'%s': out of memory", path);
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    int r = 0;
    while (buf) {
        if (cap - len < (1u << 15) + 1) {
            if (cap >= (size_t) S_INPUT_MAX_FILE_BYTES) {
                r = zdist_error_set(err, -EFBIG, "'%s': bigger than %lld bytes", path,
                                    (long long) S_INPUT_MAX_FILE_BYTES);
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        int got = gzread(gz, buf + len, 1u << 15);
        if (got < 0) {
            int zerr;
            const char *msg = zdist_dataset_gz_why_(gzerror(gz, &zerr));
            r = zdist_error_set(err, -EBADMSG, "'%s': corrupt gzip data at byte %zu: %s", path, len, msg);
            break;
        }
        if (got == 0) {
            /* A truncated gzip stream reads as a short file: zlib says so here. */
            int zerr;
            const char *msg = zdist_dataset_gz_why_(gzerror(gz, &zerr));
            if (zerr != Z_OK && zerr != Z_STREAM_END)
                r = zdist_error_set(err, -EBADMSG, "'%s': truncated gzip data at byte %zu: %s", path, len, msg);
            break;
        }
        len += (size_t) got;
    }
    gzclose(gz);
    if (!buf)
        return zdist_error_set(err, -ENOMEM, "'%s': out of memory", path);
    if (r < 0) {
        free(buf);
        return r;
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    return 0;
}
