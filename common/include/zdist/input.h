/* zdist input pipelines: readers, in-memory datasets, InputContext, auto-shard,
   TensorFlow's rebatching of a global batch into per-replica batches, prefetch. */
#ifndef ZDIST_INPUT_H
#define ZDIST_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/example.h"
#include "zdist/step.h" /* zdist_step_column_t: a batch's named features */
#include "zdist/tensor.h"
#include "zdist/tfrecord.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Thread rules for this header: every object is used by one thread at a time
   (the caller's). The prefetch thread inside a zdist_input_t is private: it
   only reads the dataset, which must stay alive and unchanged until the input
   is destroyed. Functions return 0 or a negative errno unless said otherwise;
   those taking `zdist_error_t *err` (may be NULL) also fill a message for a
   person. */

/* ------------------------------------------------------------------------ */
/* InputContext (tf.distribute.InputContext)                                  */

typedef struct zdist_input_context_t zdist_input_context_t;

/* num_input_pipelines >= 1, 0 <= input_pipeline_id < num_input_pipelines,
   num_replicas_in_sync >= 1 (TF's defaults are 1, 0, 1). NULL with err filled
   (-EINVAL) when out of range, or -ENOMEM. */
ZDIST_EXPORT zdist_input_context_t *zdist_input_context_new(int num_input_pipelines, int input_pipeline_id,
                                                            int num_replicas_in_sync, zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. */
ZDIST_EXPORT void zdist_input_context_destroy(zdist_input_context_t **self_p);
ZDIST_EXPORT int zdist_input_context_num_input_pipelines(const zdist_input_context_t *self);
ZDIST_EXPORT int zdist_input_context_input_pipeline_id(const zdist_input_context_t *self);
ZDIST_EXPORT int zdist_input_context_num_replicas_in_sync(const zdist_input_context_t *self);
/* global_batch_size / num_replicas_in_sync. -EINVAL when it does not divide,
   with TensorFlow's message: "The `global_batch_size` 7 is not divisible by
   `num_replicas_in_sync` 2 " (trailing space included, as TF). 0 gives 0,
   as TensorFlow's (0 % n == 0). A negative size is -EINVAL (TensorFlow would
   floor-divide it; no batch has a negative size). ret written only on
   success. */
/* str(InputContext): TF's "tf.distribute.InputContext(input pipeline id 1,
   total: 3)" into buf (truncated to size, NUL-terminated when size > 0);
   returns buf. */
ZDIST_EXPORT char *zdist_input_context_format(const zdist_input_context_t *self, char *buf, size_t size);
ZDIST_EXPORT int zdist_input_context_get_per_replica_batch_size(const zdist_input_context_t *self,
                                                                int64_t global_batch_size, int64_t *ret,
                                                                zdist_error_t *err);

/* ------------------------------------------------------------------------ */
/* Datasets: examples held in memory                                          */

/* A dataset is either dense (float32 features [n, dim], row-major) or sparse
   (CSR: example i has entries row_offsets[i] .. row_offsets[i+1]-1 of
   feature_ids (int64, in [0, dim)) and feature_values (float32)). Labels are
   int32 (classes) or float32 (regression), one per example. A dataset is
   immutable once made; several inputs may read it concurrently. */
typedef struct zdist_dataset_t zdist_dataset_t;

ZDIST_EXPORT void zdist_dataset_destroy(zdist_dataset_t **self_p);
ZDIST_EXPORT int64_t zdist_dataset_size(const zdist_dataset_t *self);
/* Features per example: dense width, or the hashed dimension when sparse. */
ZDIST_EXPORT int64_t zdist_dataset_dim(const zdist_dataset_t *self);
ZDIST_EXPORT bool zdist_dataset_is_sparse(const zdist_dataset_t *self);
/* ZDIST_DTYPE_INT32 or ZDIST_DTYPE_FLOAT32. */
ZDIST_EXPORT zdist_dtype_t zdist_dataset_label_dtype(const zdist_dataset_t *self);
/* For int32 labels: 1 + the largest label (labels are >= 0); 0 for float32. */
ZDIST_EXPORT int zdist_dataset_num_classes(const zdist_dataset_t *self);
/* Borrowed views, valid while the dataset lives. Dense: features non-NULL and
   the three sparse arrays NULL; sparse: the reverse. */
ZDIST_EXPORT const float *zdist_dataset_features(const zdist_dataset_t *self);
ZDIST_EXPORT const void *zdist_dataset_labels(const zdist_dataset_t *self);
ZDIST_EXPORT const int64_t *zdist_dataset_row_offsets(const zdist_dataset_t *self);
ZDIST_EXPORT const int64_t *zdist_dataset_feature_ids(const zdist_dataset_t *self);
ZDIST_EXPORT const float *zdist_dataset_feature_values(const zdist_dataset_t *self);
/* Largest number of entries in one sparse example (0 when dense). */
ZDIST_EXPORT int64_t zdist_dataset_max_row_nnz(const zdist_dataset_t *self);
/* Named feature columns (TFRecord datasets: the spec's features, the label
   excluded), in spec order; 0 otherwise. Column i as a batch carries it,
   over all n examples (borrowed). */
ZDIST_EXPORT int zdist_dataset_num_columns(const zdist_dataset_t *self);
ZDIST_EXPORT const zdist_step_column_t *zdist_dataset_column(const zdist_dataset_t *self, int i);
/* Where example i came from, for counting what an epoch read: (k << 40) |
   r for record r of file k of the whole (unsharded) sorted file list; NULL
   when the reader does not say (every format but TFRecord). */
ZDIST_EXPORT const int64_t *zdist_dataset_origins(const zdist_dataset_t *self);

/* tf.data.Dataset.shard: a new dataset of the examples i with
   i % num_shards == index, in order. -EINVAL for bad arguments, -ENOTSUP
   for a dataset with named columns (TFRecord: shard it as it is loaded). */
ZDIST_EXPORT int zdist_dataset_shard(const zdist_dataset_t *self, int64_t num_shards, int64_t index,
                                     zdist_dataset_t **ret);

/* Readers. Each returns 0 and *ret (the caller's, free with
   zdist_dataset_destroy), or: -ENOENT / -EACCES (cannot open: message names
   the file), -EBADMSG (corrupt or truncated: message names the file and the
   byte offset, in the decompressed stream for gzip'd files), -EINVAL (the
   content is well formed but not acceptable, e.g. a non-binary libsvm label),
   -ENOMEM, -EFBIG (bigger than the reader's limits). Every reader accepts gzip'd
   or plain files: gzip is recognised by its magic bytes 1f 8b, not the name. */

/* IDX (MNIST, Fashion-MNIST): images idx3 (magic 0x00000803, uint8
   [n, rows, cols]) and labels idx1 (magic 0x00000801, uint8 [n]). Features are
   float32 pixel/255 in [0,1], dim = rows*cols; labels int32. The counts must
   agree. Example message: "'/x/train-images.gz': truncated at byte 123456:
   expected 47040000 bytes of pixels after the 16-byte header". */
ZDIST_EXPORT int zdist_dataset_read_idx(const char *images_path, const char *labels_path,
                                        zdist_dataset_t **ret, zdist_error_t *err);

typedef struct {
    /* 0-based column of the label; negative counts from the end (-1 = last). */
    int label_column;
    /* Skip the first line. */
    bool header;
    /* ZDIST_DTYPE_INT32 (classes: integral values >= 0) or ZDIST_DTYPE_FLOAT32. */
    zdist_dtype_t label_dtype;
} zdist_csv_options_t;

/* CSV, numeric only: every field a number (zdist_parse_double, so no spaces
   around it); all rows as wide as the first; blank lines skipped; "\r\n"
   accepted. The other columns, in order, are the float32 features. A bad field
   gives -EBADMSG: "'/x/a.csv': line 3, column 2 (byte 41): 'abc' is not a
   number", with err->line and err->column set. */
ZDIST_EXPORT int zdist_dataset_read_csv(const char *path, const zdist_csv_options_t *opts,
                                        zdist_dataset_t **ret, zdist_error_t *err);

/* LIBSVM: "label idx:value idx:value ... [# comment]" per line. Labels must be
   binary: -1, 0, +1 or 1 (as numbers, so "-1.0" too); mapped to int32 0 (for
   <= 0) and 1. Feature indices are integers >= 0 (1-based in most files) and
   are hashed to the fixed dimension by `index mod dim` — the identity when dim
   exceeds the largest index, so a dim of max_index + 1 keeps features apart.
   Entries keep their file order; two indices that fold onto the same id stay
   two entries (a linear model sums them, which is what folding means).
   dim >= 1. A bad token: -EBADMSG "'/x/a.svm': line 2 (byte 17): bad feature
   'abc', expected index:value". */
ZDIST_EXPORT int zdist_dataset_read_libsvm(const char *path, int64_t dim, zdist_dataset_t **ret,
                                           zdist_error_t *err);
/* The same; raw_ids: an index is any int64 ("-7:1", up to the int64
   range) and is kept as it is, not folded by `mod dim`: the ids a dynamic
   embedding table (issue 29) looks up, which no dimension bounds. The
   dataset's feature ids are then not in [0, dim). */
ZDIST_EXPORT int zdist_dataset_read_libsvm_ids(const char *path, int64_t dim, bool raw_ids, zdist_dataset_t **ret,
                                               zdist_error_t *err);

/* Synthetic regression: x ~ N(0,1)^dim, y = w.x + b + noise_std * N(0,1), with
   w ~ N(0,1)^dim and b ~ N(0,1) fixed by the seed. Example i depends only on
   (seed, i): a bigger n extends a smaller one. Labels float32. */
ZDIST_EXPORT int zdist_dataset_synthetic_regression(int64_t n, int64_t dim, uint64_t seed, double noise_std,
                                                    zdist_dataset_t **ret, zdist_error_t *err);
/* The teacher of zdist_dataset_synthetic_regression: w[dim] and *b. */
ZDIST_EXPORT void zdist_dataset_synthetic_teacher(int64_t dim, uint64_t seed, float *w, float *b);
/* Synthetic classification: `classes` (>= 2) Gaussian blobs. Centres
   ~ N(0, 3^2)^dim fixed by the seed; example i has label ~ U{0..classes-1} and
   x = centre[label] + N(0,1)^dim, depending only on (seed, i). Labels int32. */
ZDIST_EXPORT int zdist_dataset_synthetic_classification(int64_t n, int64_t dim, int classes, uint64_t seed,
                                                        zdist_dataset_t **ret, zdist_error_t *err);

/* ------------------------------------------------------------------------ */
/* Dataset specs and auto-shard (tf.data.experimental.AutoShardPolicy)        */

typedef enum {
    ZDIST_INPUT_FORMAT_INVALID = 0,
    ZDIST_INPUT_FORMAT_IDX,
    ZDIST_INPUT_FORMAT_CSV,
    ZDIST_INPUT_FORMAT_LIBSVM,
    ZDIST_INPUT_FORMAT_SYNTHETIC,
    ZDIST_INPUT_FORMAT_TFRECORD,
} zdist_input_format_t;

/* Values as TensorFlow's enum. */
typedef enum {
    ZDIST_AUTO_SHARD_OFF = -1,
    ZDIST_AUTO_SHARD_AUTO = 0,
    ZDIST_AUTO_SHARD_FILE = 1,
    ZDIST_AUTO_SHARD_DATA = 2,
} zdist_auto_shard_policy_t;

/* "idx", "csv", "libsvm", "synthetic", "tfrecord" -> format; INVALID when unknown. */
ZDIST_EXPORT zdist_input_format_t zdist_input_format_from_name(const char *name);
ZDIST_EXPORT const char *zdist_input_format_name(zdist_input_format_t format);
/* "auto", "file", "data", "off" (any case) -> 0 and *ret; -EINVAL otherwise. */
ZDIST_EXPORT int zdist_auto_shard_policy_from_name(const char *name, zdist_auto_shard_policy_t *ret);
ZDIST_EXPORT const char *zdist_auto_shard_policy_name(zdist_auto_shard_policy_t policy);

/* What to load. Strings are borrowed for the duration of the call. */
typedef struct {
    zdist_input_format_t format;
    /* The files. For idx: pairs, images then labels (paths[2k], paths[2k+1]);
       one pair counts as one file for FILE sharding. Synthetic: none. */
    const char *const *paths;
    size_t n_paths;
    zdist_csv_options_t csv;
    int64_t libsvm_dim;
    bool libsvm_raw_ids; /* zdist_dataset_read_libsvm_ids's raw_ids */
    /* Synthetic: n examples of dim features; classes == 0 means regression
       (with noise_std), classes >= 2 classification. */
    int64_t synthetic_n;
    int64_t synthetic_dim;
    int synthetic_classes;
    uint64_t synthetic_seed;
    double synthetic_noise_std;
    /* TFRecord files of tf.train.Example: every path a file (globs are the
       job's to expand), their compression, the feature spec (as
       tf.io.parse_example's) and the name of its label feature (a fixed
       scalar: int64 classes, e.g. 0/1, become int32 labels; float32 stays
       float32). The label is not a column; every other feature is, and the
       fixed float32 ones, concatenated in spec order, are also the dense
       features [n, dim] (dim 0 when there are none). */
    zdist_tfrecord_compression_t compression;
    const zdist_feature_spec_t *features;
    int n_features;
    const char *label;
} zdist_input_spec_t;

/* A TFRecord spec's checks, made before any file is read: the specs as
   zdist_example_parser_new checks them, and the label among them, a fixed
   scalar of int64 or float32. -EINVAL naming the feature. */
ZDIST_EXPORT int zdist_input_spec_check_features(const zdist_feature_spec_t *features, int n, const char *label,
                                                 zdist_error_t *err);

/* Loads what this input pipeline reads under `policy` (ctx NULL means one
   pipeline), as TensorFlow's auto-shard does for experimental_distribute_dataset:
   - FILE: the files are sharded across pipelines: file k (a pair for idx) goes
     to pipeline k % num_input_pipelines, in order. Fewer files than pipelines
     is -EINVAL with TF's whole text (shard_dataset_op.cc: "Could not apply
     FILE based sharding: the dataset only has 1 file(s), which is not enough
     for the required 2 shards/workers.If you are using datasets with
     distribution strategy, consider setting ..." and its advice, words run
     together as TF's). One pipeline: everything. Synthetic data has no files:
     -EINVAL.
   - DATA and OFF: every pipeline loads everything (DATA shards later, inside
     zdist_input_t, on the per-replica batches, as TF does).
   - AUTO: FILE for file formats (and, like TF, the FILE error when there are
     too few files: AUTO only falls back when no file reader exists), DATA for
     synthetic data. TFRecord: FILE when there are at least as many files as
     pipelines, else DATA (tf.data's AUTO over a TFRecordDataset of a file
     list falls back to DATA when FILE cannot be applied).
   TFRecord errors name the file: a bad record also its offset ("'/d/a.tfrecord':
   corrupted record at 1234"), a record that does not parse its index and
   TensorFlow's text ("'/d/a.tfrecord': record 7 (offset 980): Name: <unknown>,
   Feature: I1 (data type: float) is required but could not be found.").
   *ret_applied (may be NULL) gets the policy actually applied (never AUTO), to
   pass on in zdist_input_options_t. */
ZDIST_EXPORT int zdist_dataset_load(const zdist_input_spec_t *spec, const zdist_input_context_t *ctx,
                                    zdist_auto_shard_policy_t policy, zdist_dataset_t **ret,
                                    zdist_auto_shard_policy_t *ret_applied, zdist_error_t *err);

/* ------------------------------------------------------------------------ */
/* Rebatching (tf.distribute experimental_distribute_dataset)                 */

/* distribute.batch_sizes_for_worker: the W*R sub-batch sizes (W = workers,
   R = replicas per worker) worker `worker_index` cuts its stream into, in
   cycle order. Sizes are floor(G/(W*R)) or one more; the first G mod (W*R) of
   worker 0's list are the bigger ones, and worker w's list is TF's
   worker_0[offset:] + worker_0[:offset] with offset = w*R and Python's
   slices, so the R replicas of all workers together take exactly G examples
   per step. Any worker_index is taken, as TF takes it: the slices clamp at
   the list's ends, so an offset at or past W*R gives worker 0's list
   unrotated (G=4, W=2, R=1: index 2 -> [2, 2], index 3 -> [2, 2]) and a
   negative one counts from the end. -EINVAL for G < 1, W < 1, R < 1 or
   ret_sizes NULL. ret_sizes has W*R slots. */
ZDIST_EXPORT int zdist_input_batch_sizes_for_worker(int64_t global_batch_size, int num_workers,
                                                    int replicas_per_worker, int worker_index,
                                                    int64_t *ret_sizes);
/* The legacy RebatchDataset split of one batch of `batch_size` examples into
   num_replicas slices: interval = ceil(batch_size / num_replicas), slice j is
   [j*interval, min((j+1)*interval, batch_size)), empty past the end. So 4 over
   3 gives 2,2,0 and 5 over 4 gives 2,2,1,0. ret_offsets/ret_sizes have
   num_replicas slots (offsets may be NULL). */
ZDIST_EXPORT int zdist_input_rebatch_legacy(int64_t batch_size, int num_replicas, int64_t *ret_offsets,
                                            int64_t *ret_sizes);

/* ------------------------------------------------------------------------ */
/* Inputs: the per-step iterator of one input pipeline                         */

#define ZDIST_INPUT_REPEAT_FOREVER (-1)

typedef struct {
    int64_t global_batch_size; /* G, >= 1 */
    bool drop_remainder;       /* false (default): the last partial batch is kept */
    bool shuffle;
    uint64_t shuffle_seed;     /* epoch e is shuffled from (seed, e) */
    int64_t epochs;            /* >= 1, or ZDIST_INPUT_REPEAT_FOREVER */
    /* The policy zdist_dataset_load applied (AUTO is taken as DATA, TF's choice
       for data already in memory). */
    zdist_auto_shard_policy_t shard_policy;
    int prefetch; /* steps prepared ahead by a background thread; 0 = none */
    /* ParameterServerStrategy: a worker's step is the whole global batch (TF's
       InputContext there has one pipeline in sync and the worker's replicas:
       "no synchronization beyond a worker"). The workers share out the epoch:
       under DATA, pipeline w of W takes global batches w, w + W, ... of the
       common order; under FILE or OFF it walks its own data. The batch is
       split over the pipeline's own replicas only. */
    bool whole_batches;
} zdist_input_options_t;

/* TF's defaults: drop_remainder false, no shuffle, 1 epoch, AUTO, no prefetch. */
ZDIST_EXPORT void zdist_input_options_init(zdist_input_options_t *opts, int64_t global_batch_size);

/* One replica's batch. Pointers are into the input's own buffers. */
typedef struct {
    int64_t size;            /* examples; may be 0 (an empty replica) */
    const int64_t *indices;  /* [size] rows of the dataset, for tracing and eval */
    const float *features;   /* dense: [size, dim]; NULL when sparse */
    const void *labels;      /* [size], the dataset's label dtype */
    const int64_t *row_offsets; /* sparse: [size+1], from 0; NULL when dense */
    const int64_t *feature_ids;
    const float *feature_values;
    /* The dataset's named columns for these examples (zdist_dataset_column),
       into the input's own buffers; 0 and NULL without them. */
    int ncolumns;
    const zdist_step_column_t *columns;
} zdist_batch_t;

/* One step of this pipeline: a batch for each of its local replicas. */
typedef struct {
    int64_t step;        /* 0-based, counted over all epochs */
    int64_t epoch;       /* 0-based */
    int64_t step_in_epoch;
    int num_replicas;    /* local replicas: num_replicas_in_sync / num_input_pipelines */
    int64_t size;        /* examples over the local replicas */
    const zdist_batch_t *replicas; /* [num_replicas] */
} zdist_input_step_t;

typedef struct zdist_input_t zdist_input_t;

/* A step iterator over `dataset` (borrowed: it must outlive the input) for the
   pipeline described by ctx (NULL = one pipeline, one replica). Per epoch:
   shuffle (a full permutation) -> batch(G, drop_remainder) -> rebatch to
   per-replica batches -> (DATA only) shard:
   - OFF and FILE (TF's RebatchDatasetV2): the epoch's examples are cut into
     sub-batches whose sizes cycle through
     zdist_input_batch_sizes_for_worker(G, W, R, w); a step takes the next R.
     When the data runs out a replica gets what is left, later ones nothing.
     As TF's RebatchDatasetV2, a sub-batch of size 0 is still emitted after
     the data ran out exactly (no read has seen the end yet): sizes [0, 1]
     over 8 examples give 17 sub-batches, the last one empty.
   - DATA (TF rewrites to the legacy RebatchDataset and shards its output):
     every pipeline walks the same global batches (same seed, same order); each
     batch (G, or the partial last one) is split by zdist_input_rebatch_legacy
     into W*R slices and replica r of pipeline w gets slice w + r*W.
   Every pipeline's step count is its own; under FILE and OFF pipelines can
   differ by a step, and TF gives the replicas of a finished pipeline empty
   batches until all are done — the caller that drives steps decides that.
   NULL with err filled: -EINVAL (bad options, or num_replicas_in_sync not a
   multiple of num_input_pipelines, with TF's message), -ENOMEM, or the
   thread's error. With prefetch > 0 a thread starts now and fills up to
   `prefetch` steps ahead; all buffers are allocated here, none per step. */
ZDIST_EXPORT zdist_input_t *zdist_input_new(const zdist_dataset_t *dataset, const zdist_input_context_t *ctx,
                                            const zdist_input_options_t *opts, zdist_error_t *err);
/* Stops and joins the prefetch thread, frees everything. NULL-safe,
   idempotent; nulls *self_p. Steps returned earlier become invalid. */
ZDIST_EXPORT void zdist_input_destroy(zdist_input_t **self_p);
/* The next step: 1 and *ret_step (borrowed: valid until the next call of
   zdist_input_next or zdist_input_destroy), 0 after the last epoch's last step,
   or a negative errno. Blocks while the prefetch thread catches up. */
ZDIST_EXPORT int zdist_input_next(zdist_input_t *self, const zdist_input_step_t **ret_step);
/* The next zdist_input_next returns step `step_in_epoch` of epoch `epoch`
   (both from 0) and goes on from there: a parameter_server closure names the
   batches it reads (dataset.visitation exactly_once). Prefetched steps that
   are not those are dropped. Only for whole_batches inputs that repeat for
   ever; -EINVAL otherwise or past the epoch's steps. */
ZDIST_EXPORT int zdist_input_seek(zdist_input_t *self, int64_t epoch, int64_t step_in_epoch);
/* Steps in one epoch of this pipeline. */
ZDIST_EXPORT int64_t zdist_input_steps_per_epoch(const zdist_input_t *self);

#ifdef __cplusplus
}
#endif
#endif
