/* worker_job: a job JSON (DESIGN.md §4) parsed strictly into a plain struct, for `zdist run` and the worker. */
#ifndef WORKER_JOB_H
#define WORKER_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "zdist/optim.h"
#include "worker_strategy.h"
#include "zdist/error.h"
#include "zdist/input.h"

typedef struct {
    /* idx: images + labels; csv / libsvm: path. NULL when absent. */
    char *images, *labels, *path;
} worker_job_files_t;

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
    char *model;
    char *model_params; /* JSON text, "{}" when absent */
    zdist_optim_config_t optimizer;
    /* dataset */
    zdist_input_format_t format;
    worker_job_files_t train, test;
    bool has_test;
    int64_t global_batch_size;
    bool shuffle;
    uint64_t shuffle_seed;
    zdist_auto_shard_policy_t shard_policy;
    int prefetch;
    bool drop_remainder;
    zdist_csv_options_t csv;
    int64_t libsvm_dim;
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
} worker_job_t;

/* Parses the job file at `path` (relative data paths are taken from the
   file's directory). Strict: unknown fields, wrong types and bad values are
   refused with -EINVAL and err naming the field ("dataset.global_batch_size:
   must be an integer >= 1, got \"128\""), and line/column for JSON syntax
   errors; -ENOENT when the file cannot be read. *ret is zeroed first and
   released on error. */
int worker_job_load(const char *path, worker_job_t *ret, zdist_error_t *err);
/* The same from JSON text; base_dir resolves relative paths (NULL: as given). */
int worker_job_parse(const char *text, const char *base_dir, worker_job_t *ret, zdist_error_t *err);
void worker_job_release(worker_job_t *job);
/* Loads the job's train (test = false) or test set, sharded for ictx (may
   be NULL: one pipeline) by `policy`. Synthetic data: example i depends only
   on (seed, i), so the test set is generated as the test_n examples after
   the training set's n (evaluation skips the first n); applied is DATA.
   ret_applied may be NULL. Negative errno with err naming the file. */
int worker_job_load_dataset(const worker_job_t *job, bool test, const zdist_input_context_t *ictx,
                            zdist_auto_shard_policy_t policy, zdist_dataset_t **ret,
                            zdist_auto_shard_policy_t *ret_applied, zdist_error_t *err);

#endif
