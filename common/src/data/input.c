/* zdist input pipelines: InputContext, specs, loading a spec's files through the readers. */
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

#include "dataset.h"

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

/* ----------------------------------------------------------- specs and sharding */

zdist_input_format_t
zdist_input_format_from_name(const char *name)
{
    if (!name)
        return ZDIST_INPUT_FORMAT_INVALID;
    static const char *names[] = {"idx", "csv", "libsvm", "synthetic", "tfrecord"};
    for (int i = 0; i < 5; i++)
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
    case ZDIST_INPUT_FORMAT_TFRECORD:
        return "tfrecord";
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
        return zdist_dataset_read_libsvm_ids(spec->paths[k], spec->libsvm_dim, spec->libsvm_raw_ids, ret, err);
    default:
        return zdist_error_set(err, -EINVAL, "unknown dataset format %d", (int) spec->format);
    }
}

/* TF's text when FILE sharding has too few files (core/kernels/data/
   shard_dataset_op.cc), its run-together "workers.If" and "optionof" included. */
static int
s_too_few_files(size_t n_files, int pipelines, zdist_error_t *err)
{
    return zdist_error_set(
        err, -EINVAL,
        "Could not apply FILE based sharding: the dataset only has %zu file(s), which is "
        "not enough for the required %d shards/workers.If you are using datasets with "
        "distribution strategy, consider setting the auto sharding policy to either DATA or "
        "OFF using the `experimental_distribute.auto_shard_policy` optionof "
        "`tf.data.Options()`. Or, split your input files into a larger number of small files "
        "such that number of files is greater than number of shards/workers.",
        n_files, pipelines);
}

/* TFRecord: AUTO is FILE when every pipeline gets a file, else DATA
   (tf.data's AUTO falls back to DATA when FILE cannot be applied). */
static int
s_load_tfrecord(const zdist_input_spec_t *spec, int pipelines, int id, zdist_auto_shard_policy_t policy,
                zdist_dataset_t **ret, zdist_auto_shard_policy_t *ret_applied, zdist_error_t *err)
{
    if (spec->n_paths == 0 || !spec->paths)
        return zdist_error_set(err, -EINVAL, "tfrecord dataset without files");
    zdist_auto_shard_policy_t applied = policy;
    if (policy == ZDIST_AUTO_SHARD_AUTO)
        applied = spec->n_paths >= (size_t) pipelines ? ZDIST_AUTO_SHARD_FILE : ZDIST_AUTO_SHARD_DATA;
    bool by_file = applied == ZDIST_AUTO_SHARD_FILE && pipelines > 1;
    if (by_file && spec->n_paths < (size_t) pipelines)
        return s_too_few_files(spec->n_paths, pipelines, err);
    bool *keep = calloc(spec->n_paths, sizeof *keep);
    if (!keep)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    for (size_t k = 0; k < spec->n_paths; k++)
        keep[k] = !by_file || k % (size_t) pipelines == (size_t) id;
    int rc = zdist_dataset_read_tfrecord_(spec, keep, ret, err);
    free(keep);
    if (rc == 0 && ret_applied)
        *ret_applied = applied;
    return rc;
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
    if (spec->format == ZDIST_INPUT_FORMAT_TFRECORD)
        return s_load_tfrecord(spec, pipelines, id, policy, ret, ret_applied, err);
    if (spec->format != ZDIST_INPUT_FORMAT_IDX && spec->format != ZDIST_INPUT_FORMAT_CSV &&
        spec->format != ZDIST_INPUT_FORMAT_LIBSVM)
        return zdist_error_set(err, -EINVAL, "unknown dataset format %d: use idx, csv, libsvm, synthetic or tfrecord",
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
        return s_too_few_files(n_files, pipelines, err);
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
