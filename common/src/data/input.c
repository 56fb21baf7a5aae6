/* zdist input pipelines: datasets in memory, sharding, specs, InputContext, random numbers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <zlib.h>

#include "input_private.h"

/* ---------------------------------------------------------------- InputContext */

struct zdist_input_context_t {
    int num_input_pipelines;
    int input_pipeline_id;
    int num_replicas_in_sync;
};

zdist_input_context_t *
zdist_input_context_new(int num_input_pipelines, int input_pipeline_id, int num_replicas_in_sync,
                        zdist_error_t *err)
{
    if (num_input_pipelines < 1) {
        zdist_error_set(err, -EINVAL, "num_input_pipelines is %d: it must be at least 1", num_input_pipelines);
        return NULL;
    }
    if (input_pipeline_id < 0 || input_pipeline_id >= num_input_pipelines) {
        zdist_error_set(err, -EINVAL, "input_pipeline_id is %d: it must be in 0..%d (num_input_pipelines %d)",
                        input_pipeline_id, num_input_pipelines - 1, num_input_pipelines);
        return NULL;
    }
    if (num_replicas_in_sync < 1) {
        zdist_error_set(err, -EINVAL, "num_replicas_in_sync is %d: it must be at least 1", num_replicas_in_sync);
        return NULL;
    }
    zdist_input_context_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->num_input_pipelines = num_input_pipelines;
    self->input_pipeline_id = input_pipeline_id;
    self->num_replicas_in_sync = num_replicas_in_sync;
    return self;
}

void
zdist_input_context_destroy(zdist_input_context_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free(*self_p);
    *self_p = NULL;
}

int
zdist_input_context_num_input_pipelines(const zdist_input_context_t *self)
{
    return self->num_input_pipelines;
}

int
zdist_input_context_input_pipeline_id(const zdist_input_context_t *self)
{
    return self->input_pipeline_id;
}

int
zdist_input_context_num_replicas_in_sync(const zdist_input_context_t *self)
{
    return self->num_replicas_in_sync;
}

char *
zdist_input_context_format(const zdist_input_context_t *self, char *buf, size_t size)
{
    /* distribute_lib.py's InputContext.__str__ */
    if (size > 0)
        snprintf(buf, size, "tf.distribute.InputContext(input pipeline id %d, total: %d)",
                 self->input_pipeline_id, self->num_input_pipelines);
    return buf;
}

int
zdist_input_context_get_per_replica_batch_size(const zdist_input_context_t *self, int64_t global_batch_size,
                                               int64_t *ret, zdist_error_t *err)
{
    if (global_batch_size < 0)
        return zdist_error_set(err, -EINVAL, "global_batch_size is %lld: it must be 0 or more",
                               (long long) global_batch_size);
    if (global_batch_size % self->num_replicas_in_sync != 0)
        /* TensorFlow's text, trailing space and all. */
        return zdist_error_set(err, -EINVAL, "The `global_batch_size` %lld is not divisible by "
                               "`num_replicas_in_sync` %d ",
                               (long long) global_batch_size, self->num_replicas_in_sync);
    *ret = global_batch_size / self->num_replicas_in_sync;
    return 0;
}

/* -------------------------------------------------------------------- datasets */

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
zdist_dataset_shard(const zdist_dataset_t *self, int64_t num_shards, int64_t index, zdist_dataset_t **ret)
{
    if (!self || !ret || num_shards < 1 || index < 0 || index >= num_shards)
        return -EINVAL;
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
zdist_input_gz_why_(const char *msg)
{
    if (msg && strncmp(msg, "<fd:", 4) == 0) {
        const char *colon = strstr(msg, ": ");
        if (colon)
            return colon + 2;
    }
    return msg;
}

int
zdist_input_slurp_(const char *path, char **ret, size_t *ret_len, zdist_error_t *err)
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
            const char *msg = zdist_input_gz_why_(gzerror(gz, &zerr));
            r = zdist_error_set(err, -EBADMSG, "'%s': corrupt gzip data at byte %zu: %s", path, len, msg);
            break;
        }
        if (got == 0) {
            /* A truncated gzip stream reads as a short file: zlib says so here. */
            int zerr;
            const char *msg = zdist_input_gz_why_(gzerror(gz, &zerr));
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

/* ----------------------------------------------------------- specs and sharding */

zdist_input_format_t
zdist_input_format_from_name(const char *name)
{
    if (!name)
        return ZDIST_INPUT_FORMAT_INVALID;
    static const char *names[] = {"idx", "csv", "libsvm", "synthetic"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0)
            return (zdist_input_format_t) (i + 1);
    return ZDIST_INPUT_FORMAT_INVALID;
}

const char *
zdist_input_format_name(zdist_input_format_t format)
{
    switch (format) {
    case ZDIST_INPUT_FORMAT_IDX:
        return "idx";
    case ZDIST_INPUT_FORMAT_CSV:
        return "csv";
    case ZDIST_INPUT_FORMAT_LIBSVM:
        return "libsvm";
    case ZDIST_INPUT_FORMAT_SYNTHETIC:
        return "synthetic";
    default:
        return "invalid";
    }
}

int
zdist_auto_shard_policy_from_name(const char *name, zdist_auto_shard_policy_t *ret)
{
    static const struct {
        const char *name;
        zdist_auto_shard_policy_t policy;
    } t[] = {{"auto", ZDIST_AUTO_SHARD_AUTO},
             {"file", ZDIST_AUTO_SHARD_FILE},
             {"data", ZDIST_AUTO_SHARD_DATA},
             {"off", ZDIST_AUTO_SHARD_OFF}};
    for (size_t i = 0; name && i < sizeof t / sizeof t[0]; i++)
        if (strcasecmp(name, t[i].name) == 0) {
            *ret = t[i].policy;
            return 0;
        }
    return -EINVAL;
}

const char *
zdist_auto_shard_policy_name(zdist_auto_shard_policy_t policy)
{
    switch (policy) {
    case ZDIST_AUTO_SHARD_OFF:
        return "OFF";
    case ZDIST_AUTO_SHARD_AUTO:
        return "AUTO";
    case ZDIST_AUTO_SHARD_FILE:
        return "FILE";
    case ZDIST_AUTO_SHARD_DATA:
        return "DATA";
    }
    return "invalid";
}

static int
s_load_file(const zdist_input_spec_t *spec, size_t k, zdist_dataset_t **ret, zdist_error_t *err)
{
    switch (spec->format) {
    case ZDIST_INPUT_FORMAT_IDX:
        return zdist_dataset_read_idx(spec->paths[2 * k], spec->paths[2 * k + 1], ret, err);
    case ZDIST_INPUT_FORMAT_CSV:
        return zdist_dataset_read_csv(spec->paths[k], &spec->csv, ret, err);
    case ZDIST_INPUT_FORMAT_LIBSVM:
        return zdist_dataset_read_libsvm(spec->paths[k], spec->libsvm_dim, ret, err);
    default:
        return zdist_error_set(err, -EINVAL, "unknown dataset format %d", (int) spec->format);
    }
}

int
zdist_dataset_load(const zdist_input_spec_t *spec, const zdist_input_context_t *ctx,
                   zdist_auto_shard_policy_t policy, zdist_dataset_t **ret,
                   zdist_auto_shard_policy_t *ret_applied, zdist_error_t *err)
{
    if (!spec || !ret)
        return zdist_error_set(err, -EINVAL, "no dataset spec");
    int pipelines = ctx ? ctx->num_input_pipelines : 1;
    int id = ctx ? ctx->input_pipeline_id : 0;
    if (policy != ZDIST_AUTO_SHARD_OFF && policy != ZDIST_AUTO_SHARD_AUTO && policy != ZDIST_AUTO_SHARD_FILE &&
        policy != ZDIST_AUTO_SHARD_DATA)
        return zdist_error_set(err, -EINVAL, "shard policy %d: use auto, file, data or off", (int) policy);

    if (spec->format == ZDIST_INPUT_FORMAT_SYNTHETIC) {
        if (policy == ZDIST_AUTO_SHARD_FILE)
            return zdist_error_set(err, -EINVAL, "shard policy FILE needs files, and synthetic data has none: "
                                   "use DATA or OFF");
        int r = spec->synthetic_classes == 0
                    ? zdist_dataset_synthetic_regression(spec->synthetic_n, spec->synthetic_dim,
                                                         spec->synthetic_seed, spec->synthetic_noise_std, ret, err)
                    : zdist_dataset_synthetic_classification(spec->synthetic_n, spec->synthetic_dim,
                                                             spec->synthetic_classes, spec->synthetic_seed, ret, err);
        if (r == 0 && ret_applied)
            *ret_applied = policy == ZDIST_AUTO_SHARD_AUTO ? ZDIST_AUTO_SHARD_DATA : policy;
        return r;
    }
    if (spec->format != ZDIST_INPUT_FORMAT_IDX && spec->format != ZDIST_INPUT_FORMAT_CSV &&
        spec->format != ZDIST_INPUT_FORMAT_LIBSVM)
        return zdist_error_set(err, -EINVAL, "unknown dataset format %d: use idx, csv, libsvm or synthetic",
                               (int) spec->format);
    if (spec->n_paths == 0 || !spec->paths)
        return zdist_error_set(err, -EINVAL, "%s dataset without files", zdist_input_format_name(spec->format));
    if (spec->format == ZDIST_INPUT_FORMAT_IDX && spec->n_paths % 2 != 0)
        return zdist_error_set(err, -EINVAL, "idx dataset with %zu paths: give images and labels in pairs",
                               spec->n_paths);
    size_t n_files = spec->format == ZDIST_INPUT_FORMAT_IDX ? spec->n_paths / 2 : spec->n_paths;

    zdist_auto_shard_policy_t applied = policy == ZDIST_AUTO_SHARD_AUTO ? ZDIST_AUTO_SHARD_FILE : policy;
    bool by_file = applied == ZDIST_AUTO_SHARD_FILE && pipelines > 1;
    if (by_file && n_files < (size_t) pipelines)
        /* TF's text (core/kernels/data/shard_dataset_op.cc), its run-together
           "workers.If" and "optionof" included */
        return zdist_error_set(
            err, -EINVAL,
            "Could not apply FILE based sharding: the dataset only has %zu file(s), which is "
            "not enough for the required %d shards/workers.If you are using datasets with "
            "distribution strategy, consider setting the auto sharding policy to either DATA or "
            "OFF using the `experimental_distribute.auto_shard_policy` optionof "
            "`tf.data.Options()`. Or, split your input files into a larger number of small files "
            "such that number of files is greater than number of shards/workers.",
            n_files, pipelines);
    zdist_dataset_t *all = NULL;
    for (size_t k = 0; k < n_files; k++) {
        if (by_file && k % (size_t) pipelines != (size_t) id)
            continue;
        zdist_dataset_t *one = NULL;
        int r = s_load_file(spec, k, &one, err);
        if (r < 0) {
            zdist_dataset_destroy(&all);
            return r;
        }
        if (!all) {
            all = one;
            continue;
        }
        r = zdist_dataset_concat_(all, one);
        zdist_dataset_destroy(&one);
        if (r < 0) {
            zdist_dataset_destroy(&all);
            return r == -ENOMEM ? zdist_error_set(err, r, "out of memory")
                                : zdist_error_set(err, r, "file %zu of the dataset does not have the same "
                                                  "features or label type as the first", k + 1);
        }
    }
    *ret = all;
    if (ret_applied)
        *ret_applied = applied;
    return 0;
}

/* ---------------------------------------------------------------------- random */

static uint64_t
s_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void
zdist_rng_seed_(zdist_rng_t *rng, uint64_t seed, uint64_t stream, uint64_t index)
{
    uint64_t x = seed;
    uint64_t a = s_splitmix64(&x) ^ stream;
    a = s_splitmix64(&a) ^ index;
    for (int i = 0; i < 4; i++)
        rng->s[i] = s_splitmix64(&a);
}

static uint64_t
s_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t
zdist_rng_next_(zdist_rng_t *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = s_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s_rotl(s[3], 45);
    return result;
}

uint64_t
zdist_rng_below_(zdist_rng_t *rng, uint64_t bound)
{
    /* Lemire's multiply-and-reject: unbiased without a division per draw. */
    __uint128_t m = (__uint128_t) zdist_rng_next_(rng) * bound;
    uint64_t low = (uint64_t) m;
    if (low < bound) {
        uint64_t threshold = -bound % bound;
        while (low < threshold) {
            m = (__uint128_t) zdist_rng_next_(rng) * bound;
            low = (uint64_t) m;
        }
    }
    return (uint64_t) (m >> 64);
}

double
zdist_rng_normal_(zdist_rng_t *rng)
{
    /* Box-Muller; u1 in (0, 1] so the log is finite. */
    double u1 = ((double) (zdist_rng_next_(rng) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (double) (zdist_rng_next_(rng) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
