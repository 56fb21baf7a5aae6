/* zdist job: a job document (ARCHITECTURE.md, "How a job travels") parsed once, strictly, into a plain C struct.

   The one job class: `zdist submit` sends the text to the coordinator, which
   parses it here (refusing bad specs with a message naming the field and
   the fix), keeps the struct, and sends it to every worker as a typed
   message (zdist/worker_client.h); the worker and `zdist run` train from
   the same struct. */
#ifndef ZDIST_JOB_H
#define ZDIST_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "zdist/cluster.h"
#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/example.h"
#include "zdist/input.h"
#include "zdist/optim.h"

typedef struct {
    /* idx: images + labels; csv / libsvm: path; tfrecord: path is the glob
       of "files". NULL when absent. */
    char *images, *labels, *path;
    /* tfrecord: the files the glob matched, sorted and resolved, as
       zdist_job_confine_data checked them (never carried in the job's
       message: each reader expands its own). NULL until then. */
    char **matched;
    size_t n_matched;
} zdist_job_files_t;

typedef struct {
    char *name;
    zdist_strategy_t strategy;
    int num_replicas;
    char *partitioner; /* strategy.partitioner, NULL when absent */
    /* multi_worker_mirrored (strategy.*): deadline of one collective, the
       all-reduce's packing (TF's CommunicationOptions.bytes_per_pack; 0:
       the communicator's default) and how long the coordinator waits for a
       lost worker before going on with the others (-1: for ever). */
    int64_t collective_timeout_ms;
    int64_t bytes_per_pack;
    int64_t lost_worker_wait_ms;
    /* multi_worker_mirrored and tpu (strategy.min_workers/max_workers, as
       TorchElastic's --nnodes MIN:MAX; both 0 when absent): the ring is
       re-formed with the workers present, min..max of them, from the last
       checkpoint, the global batch kept (it divides by every size's
       replicas, checked at submit), and grown back at a checkpoint boundary. */
    int min_workers, max_workers;
    /* tpu (strategy.*): each replica runs on logical_devices_per_replica
       threads (1 elsewhere); spmd refuses per-layer logical_device (TF's
       experimental_spmd_xla_partitioning); oversubscribe admits more
       logical devices than the worker's cores. */
    int logical_devices_per_replica;
    bool spmd, oversubscribe;
    char *model;
    /* JSON text, "{}" when absent; sequential and functional: the model
       section but its name (functional: plus "features", the dataset's
       feature spec without the label, zdist_model_graph_parse's input) */
    char *model_params;
    zdist_optim_config_t optimizer;
    /* dataset */
    zdist_input_format_t format;
    zdist_job_files_t train, test;
    /* dataset.pipelines instead of dataset.train (distribute_datasets_from_
       function as a file list): pipelines[i] is what input pipeline i (the
       worker of that index) reads, whole and in order, batched by the
       per-replica batch size (global_batch_size / num_replicas_in_sync, which
       must divide it), a step taking the next batch for each local replica:
       neither sharded (shard_policy is off) nor rebatched. num_pipelines 0:
       dataset.train. */
    zdist_job_files_t *pipelines;
    size_t num_pipelines;
    bool has_test;
    int64_t global_batch_size;
    bool shuffle;
    uint64_t shuffle_seed;
    zdist_auto_shard_policy_t shard_policy;
    int prefetch;
    bool drop_remainder;
    /* dataset.visitation (parameter_server): false, "at_least_once" (the
       default, TensorFlow's): each worker repeats its own shard and a
       closure is "run N steps"; true, "exactly_once": every epoch visits
       each example exactly once through lost, frozen, joining and leaving
       workers (a closure's step numbers name the batches it reads). */
    bool exactly_once;
    zdist_csv_options_t csv;
    int64_t libsvm_dim;
    bool libsvm_raw_ids; /* dataset.raw_ids: indices any int64, kept as they are (a dynamic embedding's ids) */
    /* tfrecord: dataset.compression, dataset.features (tf.io.parse_example's
       spec, in the document's order; names owned) and dataset.label, the
       feature that is the label. */
    zdist_tfrecord_compression_t compression;
    zdist_feature_spec_t *features;
    int n_features;
    char *label;
    int64_t synthetic_n, synthetic_test_n, synthetic_dim;
    int synthetic_classes;
    double synthetic_noise_std;
    uint64_t synthetic_seed;
    /* length: exactly one of steps / epochs is > 0 */
    int64_t steps, epochs;
    int64_t steps_per_execution;
    uint64_t seed;
    char *plugin_path;
    int64_t log_every; /* 0: the CLI chooses */
    /* checkpoint: every N steps (0: only step 0 and the final one), keep K
       complete ones (default 3) besides the final one. */
    int64_t ckpt_every, ckpt_keep;
    /* checkpoint.full_every: the psds save a dynamic table's full every
       this many saves, deltas between (0: the psd's default, 10). */
    int64_t ckpt_full_every;
    /* checkpoint.dir: where the coordinator keeps the job's checkpoints
       (ckpt-STEP/ under DIR/ID/); absolute, without "..". NULL: under its
       --state-dir. */
    char *ckpt_dir;
    /* priority: a worker running closures of several jobs runs the higher
       one's first; equal ones share it round robin (default 0). */
    int priority;
    /* evaluation.at_end: on the test set at the end (default: when the
       job has a test set; true without one is refused). */
    bool evaluate;
} zdist_job_t;

#define ZDIST_JOB_PRIORITY_MIN (-1000)
#define ZDIST_JOB_PRIORITY_MAX 1000
/* checkpoint.full_every's largest value. */
#define ZDIST_JOB_FULL_EVERY_MAX 1000000
#define ZDIST_JOB_CKPT_DIR_MAX 900
#define ZDIST_JOB_MAX_PIPELINES 256 /* entries of dataset.pipelines */
#define ZDIST_JOB_MAX_WORKERS 1024  /* strategy.max_workers: a cluster's workers, at most */
#define ZDIST_JOB_MAX_BATCH (INT64_C(1) << 24) /* dataset.global_batch_size, at most */

/* Parses the job file at `path` (relative data paths are taken from the
   file's directory). Strict: unknown fields, wrong types and bad values are
   refused with -EINVAL and err naming the field ("dataset.global_batch_size:
   must be an integer >= 1, got \"128\""), and line/column for JSON syntax
   errors; -ENOENT when the file cannot be read. *ret is zeroed first and
   released on error. */
ZDIST_EXPORT int zdist_job_load(const char *path, zdist_job_t *ret, zdist_error_t *err);
/* The same from JSON text; base_dir resolves relative paths (NULL: as given).
   The text first passes zdist_job_check_size. */
ZDIST_EXPORT int zdist_job_parse(const char *text, const char *base_dir, zdist_job_t *ret, zdist_error_t *err);
ZDIST_EXPORT void zdist_job_release(zdist_job_t *job);
/* A job document's size in JSON values, scanned before a tree is built (a
   peer's 16 MiB of "[1,1,..." would take hundreds of MiB as one): at most
   ZDIST_JOB_MAX_ENTRIES in one list or object, ZDIST_JOB_MAX_VALUES in
   all. -EINVAL naming the field ("model.params.hidden: more than 65536
   entries; ..."). */
#define ZDIST_JOB_MAX_ENTRIES 65536
#define ZDIST_JOB_MAX_VALUES 262144
ZDIST_EXPORT int zdist_job_check_size(const char *text, zdist_error_t *err);
/* A deep copy of a valid job into *ret (zeroed first, released on error):
   0, or -ENOMEM / -EINVAL with err. */
ZDIST_EXPORT int zdist_job_copy(const zdist_job_t *src, zdist_job_t *ret, zdist_error_t *err);
/* Checks a job struct as the parser does (ranges, one of steps/epochs, the
   optimizer, the dataset's files, evaluation with a test set): every job
   parsed or received as a message passes it. -EINVAL naming the field. */
ZDIST_EXPORT int zdist_job_validate(const zdist_job_t *job, zdist_error_t *err);
/* TPUStrategy's device assignment must fit the machine (TF refuses more
   logical devices than the topology has): num_replicas x
   logical_devices_per_replica (0 means 1) against zdist_sys_cores ();
   oversubscribe admits more. -EINVAL naming both numbers and the fix. The
   check a tpu job's worker makes, and zdist_strategy_new for a tpu spec. */
ZDIST_EXPORT int zdist_job_check_logical_devices(int num_replicas, int logical_devices_per_replica,
                                                 bool oversubscribe, zdist_error_t *err);
/* Confines the job's dataset files (train and test: images, labels, path;
   tfrecord: every file its glob matches, and the glob itself as written)
   to the directories `roots` (n of them, absolute and canonical, as
   realpath() gives them): each path must be absolute, have no ".."
   component, lie under a root as written (nothing outside the roots is
   touched, not even stat'ed), and still lie under one once resolved
   (realpath: symlinks followed). Each path of *job is then replaced by its
   resolved form, so what is read is what was checked. n == 0 admits no
   file at all (synthetic data only). 0; -EACCES naming the field and the roots ("dataset.train.images:
   '/etc/shadow' is outside the data roots (--data-root /srv/data); ..."),
   -ENOENT when a path under a root does not resolve, -ENOMEM. */
ZDIST_EXPORT int zdist_job_confine_data(zdist_job_t *job, const char *const *roots, size_t n, zdist_error_t *err);
/* Confines checkpoint.dir (when set) to the directories `roots` (n, absolute
   and canonical): absolute, no "..", at or under a root as written, and
   still so once resolved: the realpath of its nearest existing ancestor
   plus the rest as written, so nothing is created through a symbolic link
   out of the roots. Call before creating any of it. n == 0 admits any
   directory. 0, or -EACCES with err naming checkpoint.dir, the roots and
   the flag (--checkpoint-root). */
ZDIST_EXPORT int zdist_job_confine_checkpoint(const zdist_job_t *job, const char *const *roots, size_t n,
                                              zdist_error_t *err);
/* Loads the job's train (test = false) or test set, sharded for ictx (may
   be NULL: one pipeline) by `policy`. With dataset.pipelines the train set
   is pipeline ictx->input_pipeline_id's files, unsharded (applied OFF):
   -EINVAL naming dataset.pipelines when their number is not the number of
   input pipelines, and TF's "The `global_batch_size` G is not divisible by
   `num_replicas_in_sync` R" when the per-replica batch is not whole. Synthetic data: example i depends only
   on (seed, i), so the test set is generated as the test_n examples after
   the training set's n (evaluation skips the first n); applied is DATA.
   ret_applied may be NULL. TFRecord: the files its glob matched at
   confinement, else the glob expanded now (sorted by name; none is an
   error naming the field). Negative errno with err naming the file. */
ZDIST_EXPORT int zdist_job_load_dataset(const zdist_job_t *job, bool test, const zdist_input_context_t *ictx,
                            zdist_auto_shard_policy_t policy, zdist_dataset_t **ret,
                            zdist_auto_shard_policy_t *ret_applied, zdist_error_t *err);
/* A glob's files sorted by name (strcmp), as dataset.train.files names
   them: 0 and *ret (n strings, free each and the array), -ENOENT naming
   `field` when nothing matches, -EINVAL for a bad pattern. */
ZDIST_EXPORT int zdist_job_glob(const char *pattern, const char *field, char ***ret, size_t *ret_n,
                                zdist_error_t *err);

#endif
