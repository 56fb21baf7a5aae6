/* job_wire: a job as a typed message between coordinator and workers, checked on arrival like a parsed one. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/job_wire.h"
#include "zdist/partition.h"

static char *
s_str(const char *s)
{
    return s && *s ? (char *)s : NULL;
}

static void
s_files_to_pb(const zdist_job_files_t *f, Zdist__Job__Files *pb)
{
    zdist__job__files__init(pb);
    pb->images = f->images ? f->images : "";
    pb->labels = f->labels ? f->labels : "";
    pb->path = f->path ? f->path : "";
}

static char *s_dup(const char *s, int *rc);

/* tfrecord: compression, the features (borrowing names and shapes), the label. */
static void
s_features_to_pb(const zdist_job_t *job, zdist_job_pb_t *ret)
{
    Zdist__Job__Job *pb = &ret->job;
    pb->compression = job->compression == ZDIST_TFRECORD_GZIP ? "gzip" : "none";
    pb->label = job->label ? job->label : "";
    size_t n = job->n_features > 0 && job->n_features <= ZDIST_FEATURE_MAX ? (size_t)job->n_features : 0;
    for (size_t i = 0; i < n; i++) {
        const zdist_feature_spec_t *f = &job->features[i];
        Zdist__Job__Feature *q = &ret->features[i];
        zdist__job__feature__init(q);
        q->name = (char *)f->name;
        q->kind = f->kind == ZDIST_FEATURE_VAR ? "var" : "fixed";
        q->dtype = (char *)zdist_dtype_name(f->dtype);
        q->n_shape = f->kind == ZDIST_FEATURE_FIXED ? (size_t)f->rank : 0;
        q->shape = q->n_shape ? (int64_t *)f->shape : NULL;
        q->has_default = f->has_default;
        q->default_float = f->default_float;
        q->default_int = f->default_int;
        ret->feature_ptrs[i] = q;
    }
    pb->n_features = n;
    pb->features = n ? ret->feature_ptrs : NULL;
}

static void
s_features_from_pb(const Zdist__Job__Job *pb, zdist_job_t *ret, int *rc)
{
    if (zdist_tfrecord_compression_parse(pb->compression ? pb->compression : "", &ret->compression, NULL) < 0)
        ret->compression = (zdist_tfrecord_compression_t)-1; /* refused by validate, naming the field */
    ret->label = s_dup(pb->label, rc);
    if (!pb->n_features)
        return;
    size_t n = pb->n_features <= ZDIST_FEATURE_MAX ? pb->n_features : ZDIST_FEATURE_MAX + 1;
    if (!(ret->features = calloc(n, sizeof *ret->features))) {
        *rc = -ENOMEM;
        return;
    }
    ret->n_features = (int)n; /* more than the most: refused by validate */
    for (size_t i = 0; i < n && i < pb->n_features; i++) {
        const Zdist__Job__Feature *q = pb->features[i];
        zdist_feature_spec_t *f = &ret->features[i];
        f->name = s_dup(q->name, rc);
        f->kind = q->kind && strcmp(q->kind, "var") == 0 ? ZDIST_FEATURE_VAR : ZDIST_FEATURE_FIXED;
        f->dtype = zdist_dtype_from_name(q->dtype);
        f->rank = q->n_shape <= ZDIST_FEATURE_MAX_RANK ? (int)q->n_shape : ZDIST_FEATURE_MAX_RANK + 1;
        for (size_t d = 0; d < q->n_shape && d < ZDIST_FEATURE_MAX_RANK; d++)
            f->shape[d] = q->shape[d];
        f->has_default = q->has_default;
        f->default_float = q->default_float;
        f->default_int = q->default_int;
    }
}

void
zdist_job_to_pb(const zdist_job_t *job, zdist_job_pb_t *ret)
{
    Zdist__Job__Job *pb = &ret->job;
    zdist__job__job__init(pb);
    zdist__job__optimizer__init(&ret->optimizer);
    s_files_to_pb(&job->train, &ret->train);
    s_files_to_pb(&job->test, &ret->test);
    size_t np = job->num_pipelines < ZDIST_JOB_MAX_PIPELINES ? job->num_pipelines : ZDIST_JOB_MAX_PIPELINES;
    for (size_t i = 0; i < np; i++) {
        s_files_to_pb(&job->pipelines[i], &ret->pipelines[i]);
        ret->pipeline_ptrs[i] = &ret->pipelines[i];
    }
    pb->name = job->name;
    pb->strategy = (char *)zdist_strategy_name(job->strategy);
    pb->num_replicas = job->num_replicas;
    pb->partitioner = job->partitioner ? job->partitioner : "";
    pb->collective_timeout_ms = job->collective_timeout_ms;
    pb->bytes_per_pack = job->bytes_per_pack;
    pb->lost_worker_wait_ms = job->lost_worker_wait_ms;
    pb->min_workers = job->min_workers;
    pb->max_workers = job->max_workers;
    pb->model = job->model;
    pb->model_params = job->model_params;
    const zdist_optim_config_t *o = &job->optimizer;
    ret->optimizer.kind = (char *)zdist_optim_kind_name(o->kind);
    ret->optimizer.learning_rate = o->learning_rate;
    ret->optimizer.momentum = o->momentum;
    ret->optimizer.nesterov = o->nesterov;
    ret->optimizer.initial_accumulator_value = o->initial_accumulator_value;
    ret->optimizer.beta1 = o->beta1;
    ret->optimizer.beta2 = o->beta2;
    ret->optimizer.epsilon = o->epsilon;
    ret->optimizer.lazy = o->lazy;
    ret->optimizer.learning_rate_power = o->learning_rate_power;
    ret->optimizer.l1_regularization_strength = o->l1;
    ret->optimizer.l2_regularization_strength = o->l2;
    ret->optimizer.l2_shrinkage_regularization_strength = o->l2_shrinkage;
    ret->optimizer.beta = o->beta;
    pb->optimizer = &ret->optimizer;
    pb->format = (char *)zdist_input_format_name(job->format);
    pb->train = &ret->train;
    pb->test = &ret->test;
    pb->n_pipelines = np;
    pb->pipelines = np ? ret->pipeline_ptrs : NULL;
    pb->has_test = job->has_test;
    pb->global_batch_size = job->global_batch_size;
    pb->shuffle = job->shuffle;
    pb->shuffle_seed = job->shuffle_seed;
    pb->shard_policy = (char *)zdist_auto_shard_policy_name(job->shard_policy);
    pb->prefetch = job->prefetch;
    pb->drop_remainder = job->drop_remainder;
    pb->exactly_once = job->exactly_once;
    pb->csv_label_column = job->csv.label_column;
    pb->csv_header = job->csv.header;
    pb->csv_label_dtype = (char *)zdist_dtype_name(job->csv.label_dtype);
    pb->libsvm_dim = job->libsvm_dim;
    pb->libsvm_raw_ids = job->libsvm_raw_ids;
    pb->synthetic_n = job->synthetic_n;
    pb->synthetic_test_n = job->synthetic_test_n;
    pb->synthetic_dim = job->synthetic_dim;
    pb->synthetic_classes = job->synthetic_classes;
    pb->synthetic_noise_std = job->synthetic_noise_std;
    pb->synthetic_seed = job->synthetic_seed;
    pb->steps = job->steps;
    pb->epochs = job->epochs;
    pb->steps_per_execution = job->steps_per_execution;
    pb->logical_devices_per_replica = job->logical_devices_per_replica;
    pb->spmd = job->spmd;
    pb->oversubscribe = job->oversubscribe;
    pb->seed = job->seed;
    pb->plugin_path = job->plugin_path ? job->plugin_path : "";
    pb->log_every = job->log_every;
    pb->ckpt_every = job->ckpt_every;
    pb->ckpt_keep = job->ckpt_keep;
    pb->ckpt_full_every = job->ckpt_full_every;
    pb->evaluate = job->evaluate;
    pb->ckpt_dir = job->ckpt_dir ? job->ckpt_dir : "";
    pb->priority = job->priority;
    s_features_to_pb(job, ret);
}

/* strdup of a non-empty string, NULL for "" or NULL; -ENOMEM through *rc. */
static char *
s_dup(const char *s, int *rc)
{
    if (!s || !*s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *rc = -ENOMEM;
    return d;
}

static void
s_files_from_pb(const Zdist__Job__Files *pb, zdist_job_files_t *f, int *rc)
{
    if (!pb)
        return;
    f->images = s_dup(pb->images, rc);
    f->labels = s_dup(pb->labels, rc);
    f->path = s_dup(pb->path, rc);
}

int
zdist_job_from_pb(const Zdist__Job__Job *pb, zdist_job_t *ret, zdist_error_t *err)
{
    memset(ret, 0, sizeof *ret);
    if (!pb || !pb->optimizer)
        return zdist_error_set(err, -EINVAL, "job: incomplete message (no optimizer)");
    int rc = 0;
    ret->name = s_dup(pb->name, &rc);
    ret->strategy = zdist_strategy_from_name(pb->strategy);
    ret->num_replicas = pb->num_replicas;
    ret->partitioner = s_dup(pb->partitioner, &rc);
    ret->collective_timeout_ms = pb->collective_timeout_ms;
    ret->bytes_per_pack = pb->bytes_per_pack;
    ret->lost_worker_wait_ms = pb->lost_worker_wait_ms;
    ret->min_workers = pb->min_workers;
    ret->max_workers = pb->max_workers;
    ret->model = s_dup(pb->model, &rc);
    ret->model_params = s_dup(pb->model_params && *pb->model_params ? pb->model_params : "{}", &rc);
    zdist_optim_config_t *o = &ret->optimizer;
    if (zdist_optim_kind_from_name(s_str(pb->optimizer->kind), &o->kind) < 0)
        o->kind = 0; /* refused by validate, naming the field */
    o->learning_rate = pb->optimizer->learning_rate;
    o->momentum = pb->optimizer->momentum;
    o->nesterov = pb->optimizer->nesterov;
    o->initial_accumulator_value = pb->optimizer->initial_accumulator_value;
    o->beta1 = pb->optimizer->beta1;
    o->beta2 = pb->optimizer->beta2;
    o->epsilon = pb->optimizer->epsilon;
    o->lazy = pb->optimizer->lazy;
    o->learning_rate_power = pb->optimizer->learning_rate_power;
    o->l1 = pb->optimizer->l1_regularization_strength;
    o->l2 = pb->optimizer->l2_regularization_strength;
    o->l2_shrinkage = pb->optimizer->l2_shrinkage_regularization_strength;
    o->beta = pb->optimizer->beta;
    ret->format = zdist_input_format_from_name(pb->format);
    s_files_from_pb(pb->train, &ret->train, &rc);
    s_files_from_pb(pb->test, &ret->test, &rc);
    if (pb->n_pipelines > ZDIST_JOB_MAX_PIPELINES) {
        zdist_job_release(ret);
        return zdist_error_set(err, -EINVAL, "dataset.pipelines: %zu entries; at most %d", pb->n_pipelines,
                               ZDIST_JOB_MAX_PIPELINES);
    }
    if (pb->n_pipelines) {
        ret->num_pipelines = pb->n_pipelines;
        if (!(ret->pipelines = calloc(pb->n_pipelines, sizeof *ret->pipelines)))
            rc = -ENOMEM;
        for (size_t i = 0; ret->pipelines && i < pb->n_pipelines; i++)
            s_files_from_pb(pb->pipelines[i], &ret->pipelines[i], &rc);
    }
    ret->has_test = pb->has_test;
    ret->global_batch_size = pb->global_batch_size;
    ret->shuffle = pb->shuffle;
    ret->shuffle_seed = pb->shuffle_seed;
    if (zdist_auto_shard_policy_from_name(pb->shard_policy, &ret->shard_policy) < 0)
        ret->shard_policy = (zdist_auto_shard_policy_t)-1;
    ret->prefetch = pb->prefetch;
    ret->drop_remainder = pb->drop_remainder;
    ret->exactly_once = pb->exactly_once;
    ret->csv.label_column = pb->csv_label_column;
    ret->csv.header = pb->csv_header;
    ret->csv.label_dtype = zdist_dtype_from_name(pb->csv_label_dtype);
    ret->libsvm_dim = pb->libsvm_dim;
    ret->libsvm_raw_ids = pb->libsvm_raw_ids;
    ret->synthetic_n = pb->synthetic_n;
    ret->synthetic_test_n = pb->synthetic_test_n;
    ret->synthetic_dim = pb->synthetic_dim;
    ret->synthetic_classes = pb->synthetic_classes;
    ret->synthetic_noise_std = pb->synthetic_noise_std;
    ret->synthetic_seed = pb->synthetic_seed;
    ret->steps = pb->steps;
    ret->epochs = pb->epochs;
    ret->steps_per_execution = pb->steps_per_execution;
    ret->logical_devices_per_replica = pb->logical_devices_per_replica > 0 ? pb->logical_devices_per_replica : 1;
    ret->spmd = pb->spmd;
    ret->oversubscribe = pb->oversubscribe;
    ret->seed = pb->seed;
    ret->plugin_path = s_dup(pb->plugin_path, &rc);
    ret->log_every = pb->log_every;
    ret->ckpt_every = pb->ckpt_every;
    ret->ckpt_keep = pb->ckpt_keep;
    ret->ckpt_full_every = pb->ckpt_full_every;
    ret->evaluate = pb->evaluate;
    ret->ckpt_dir = s_dup(pb->ckpt_dir, &rc);
    ret->priority = pb->priority;
    s_features_from_pb(pb, ret, &rc);
    if (rc == 0)
        rc = zdist_job_validate(ret, err);
    else
        zdist_error_set(err, rc, "out of memory");
    if (rc < 0)
        zdist_job_release(ret);
    return rc;
}

int
zdist_job_copy(const zdist_job_t *src, zdist_job_t *ret, zdist_error_t *err)
{
    /* Through the message form: one place lists every field. */
    zdist_job_pb_t pb;
    zdist_job_to_pb(src, &pb);
    return zdist_job_from_pb(&pb.job, ret, err);
}
