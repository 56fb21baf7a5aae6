/* job: a job document parsed once, strictly, into zdist_job_t (the fields, their ranges and the messages naming them). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_elastic.h"
#include "job_tfrecord.h"
#include "zdist/file.h"
#include "zdist/job.h"
#include "zdist/model_spec.h"
#include "zdist/partition.h"
#include "zdist/sys.h"

#define S_MAX_BATCH ZDIST_JOB_MAX_BATCH
#define S_MAX_JOB_BYTES (16 << 20)

/* "got 128 (an integer)" style description of a value, for messages. */
static const char *
s_got(json_t *v, char *buf, size_t size)
{
    const char *kind = json_is_string(v) ? "a string" : json_is_integer(v) ? "an integer" : json_is_real(v) ? "a number"
                       : json_is_boolean(v) ? "a boolean" : json_is_object(v) ? "an object" : json_is_array(v) ? "a list"
                                                                                                            : "null";
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(buf, size, "%.60s%s (%s)", text ? text : "?", text && strlen(text) > 60 ? "..." : "", kind);
    free(text);
    return buf;
}

static int
s_keys(json_t *obj, const char *where, const char *const *allowed, zdist_error_t *err)
{
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        bool ok = strcmp(key, "comment") == 0;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(*a, key) == 0;
        if (!ok) {
            char known[400] = "";
            for (const char *const *a = allowed; *a; a++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", a == allowed ? "" : ", ", *a);
            return zdist_error_set(err, -EINVAL, "%s%s%s: unknown field; known fields here: %s (and comment)", where,
                                   *where ? "." : "", key, known);
        }
    }
    return 0;
}

static int
s_missing(const char *where, const char *key, const char *what, zdist_error_t *err)
{
    return zdist_error_set(err, -EINVAL, "%s%s%s: missing; add %s", where, *where ? "." : "", key, what);
}

static int
s_obj(json_t *obj, const char *where, const char *key, bool required, json_t **ret, zdist_error_t *err)
{
    json_t *v = json_object_get(obj, key);
    char got[128];
    *ret = NULL;
    if (!v)
        return required ? s_missing(where, key, "an object { ... }", err) : 0;
    if (!json_is_object(v))
        return zdist_error_set(err, -EINVAL, "%s%s%s: must be an object { ... }, got %s", where, *where ? "." : "",
                               key, s_got(v, got, sizeof got));
    *ret = v;
    return 0;
}

static int
s_str(json_t *obj, const char *where, const char *key, bool required, char **ret, zdist_error_t *err)
{
    json_t *v = json_object_get(obj, key);
    char got[128];
    if (!v)
        return required ? s_missing(where, key, "a string", err) : 0;
    if (!json_is_string(v) || json_string_length(v) == 0 || strlen(json_string_value(v)) != json_string_length(v))
        return zdist_error_set(err, -EINVAL, "%s%s%s: must be a non-empty string, got %s", where, *where ? "." : "",
                               key, s_got(v, got, sizeof got));
    free(*ret);
    *ret = strdup(json_string_value(v));
    return *ret ? 0 : -ENOMEM;
}

static int
s_int(json_t *obj, const char *where, const char *key, bool required, int64_t min, int64_t max, int64_t *ret,
      zdist_error_t *err)
{
    json_t *v = json_object_get(obj, key);
    char got[128];
    if (!v)
        return required ? s_missing(where, key, "an integer", err) : 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return zdist_error_set(err, -EINVAL, "%s%s%s: must be an integer in %lld..%lld, got %s", where,
                               *where ? "." : "", key, (long long)min, (long long)max, s_got(v, got, sizeof got));
    *ret = json_integer_value(v);
    return 0;
}

static int
s_num(json_t *obj, const char *where, const char *key, double *ret, zdist_error_t *err)
{
    json_t *v = json_object_get(obj, key);
    char got[128];
    if (!v)
        return 0;
    if (!json_is_number(v))
        return zdist_error_set(err, -EINVAL, "%s.%s: must be a number, got %s", where, key, s_got(v, got, sizeof got));
    *ret = json_number_value(v);
    return 0;
}

static int
s_bool(json_t *obj, const char *where, const char *key, bool *ret, zdist_error_t *err)
{
    json_t *v = json_object_get(obj, key);
    char got[128];
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return zdist_error_set(err, -EINVAL, "%s.%s: must be true or false, got %s", where, key,
                               s_got(v, got, sizeof got));
    *ret = json_is_true(v);
    return 0;
}

static int
s_resolve(char **path, const char *base_dir)
{
    if (!*path || !base_dir || (*path)[0] == '/')
        return 0;
    char *full;
    if (asprintf(&full, "%s/%s", base_dir, *path) < 0)
        return -ENOMEM;
    free(*path);
    *path = full;
    return 0;
}

/* Each entry of a colon-separated path list, resolved like s_resolve. */
static int
s_resolve_list(char **list, const char *base_dir)
{
    if (!*list || !base_dir)
        return 0;
    size_t cap = strlen(*list) * 2 + 1;
    char *copy = strdup(*list), *save = NULL;
    char *out = NULL;
    size_t len = 0;
    if (!copy)
        return -ENOMEM;
    for (char *e = strtok_r(copy, ":", &save); e; e = strtok_r(NULL, ":", &save)) {
        size_t need = len + strlen(base_dir) + strlen(e) + 3;
        if (!out || need > cap) {
            cap = need > cap ? need * 2 : cap;
            char *no = realloc(out, cap);
            if (!no) {
                free(out);
                free(copy);
                return -ENOMEM;
            }
            out = no;
        }
        len += (size_t)sprintf(out + len, "%s%s%s%s", len ? ":" : "", e[0] == '/' ? "" : base_dir,
                               e[0] == '/' ? "" : "/", e);
    }
    free(copy);
    if (!out)
        return 0;
    free(*list);
    *list = out;
    return 0;
}

/* One files object ({"path"} or idx's {"images", "labels"}) at `where`. */
static int
s_files_obj(json_t *o, const char *where, zdist_input_format_t format, zdist_job_files_t *ret, const char *base_dir,
            zdist_error_t *err)
{
    int rc;
    if (format == ZDIST_INPUT_FORMAT_IDX) {
        static const char *const allowed[] = {"images", "labels", NULL};
        if ((rc = s_keys(o, where, allowed, err)) < 0 || (rc = s_str(o, where, "images", true, &ret->images, err)) < 0 ||
            (rc = s_str(o, where, "labels", true, &ret->labels, err)) < 0)
            return rc;
    } else if (format == ZDIST_INPUT_FORMAT_TFRECORD) {
        static const char *const allowed[] = {"files", NULL};
        if ((rc = s_keys(o, where, allowed, err)) < 0 || (rc = s_str(o, where, "files", true, &ret->path, err)) < 0)
            return rc;
    } else {
        static const char *const allowed[] = {"path", NULL};
        if ((rc = s_keys(o, where, allowed, err)) < 0 || (rc = s_str(o, where, "path", true, &ret->path, err)) < 0)
            return rc;
    }
    if ((rc = s_resolve(&ret->images, base_dir)) < 0 || (rc = s_resolve(&ret->labels, base_dir)) < 0 ||
        (rc = s_resolve(&ret->path, base_dir)) < 0)
        return rc;
    return 1;
}

static int
s_files(json_t *ds, const char *key, bool required, zdist_input_format_t format, zdist_job_files_t *ret,
        const char *base_dir, zdist_error_t *err)
{
    json_t *o;
    char where[32];
    snprintf(where, sizeof where, "dataset.%s", key);
    int rc = s_obj(ds, "dataset", key, required, &o, err);
    if (rc < 0 || !o)
        return rc;
    return s_files_obj(o, where, format, ret, base_dir, err);
}

/* dataset.pipelines: a list of files objects, one per input pipeline. */
static int
s_pipelines(json_t *ds, zdist_input_format_t format, zdist_job_t *job, const char *base_dir, zdist_error_t *err)
{
    json_t *list = json_object_get(ds, "pipelines");
    const char *how = format == ZDIST_INPUT_FORMAT_IDX        ? "{\"images\": ..., \"labels\": ...}"
                      : format == ZDIST_INPUT_FORMAT_TFRECORD ? "{\"files\": GLOB}"
                                                              : "{\"path\": ...}";
    char got[128];
    if (!json_is_array(list) || json_array_size(list) < 1 || json_array_size(list) > ZDIST_JOB_MAX_PIPELINES)
        return zdist_error_set(err, -EINVAL,
                               "dataset.pipelines: must be a list of 1..%d files objects (%s), one per input "
                               "pipeline (worker), got %s",
                               ZDIST_JOB_MAX_PIPELINES, how, s_got(list, got, sizeof got));
    job->num_pipelines = json_array_size(list);
    if (!(job->pipelines = calloc(job->num_pipelines, sizeof *job->pipelines)))
        return zdist_error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < job->num_pipelines; i++) {
        char where[48];
        snprintf(where, sizeof where, "dataset.pipelines[%zu]", i);
        json_t *o = json_array_get(list, i);
        if (!json_is_object(o))
            return zdist_error_set(err, -EINVAL, "%s: must be an object %s, got %s", where, how,
                                   s_got(o, got, sizeof got));
        int rc = s_files_obj(o, where, format, &job->pipelines[i], base_dir, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int
s_optimizer(json_t *root, zdist_job_t *job, zdist_error_t *err)
{
    json_t *o;
    int rc = s_obj(root, "", "optimizer", true, &o, err);
    if (rc < 0)
        return rc;
    char *type = NULL;
    if ((rc = s_str(o, "optimizer", "type", true, &type, err)) < 0)
        return rc;
    zdist_optim_kind_t kind;
    if (zdist_optim_kind_from_name(type, &kind) < 0) {
        rc = zdist_error_set(err, -EINVAL, "optimizer.type: unknown optimizer '%s'; use sgd, momentum, adagrad, adam or ftrl",
                             type);
        free(type);
        return rc;
    }
    free(type);
    static const char *const sgd[] = {"type", "learning_rate", NULL};
    static const char *const momentum[] = {"type", "learning_rate", "momentum", "nesterov", NULL};
    static const char *const adagrad[] = {"type", "learning_rate", "initial_accumulator_value", "epsilon", NULL};
    static const char *const adam[] = {"type", "learning_rate", "beta_1", "beta_2", "epsilon", "lazy", NULL};
    /* tf.keras.optimizers.Ftrl's arguments, by their names. */
    static const char *const ftrl[] = {"type", "learning_rate", "learning_rate_power", "initial_accumulator_value",
                                       "l1_regularization_strength", "l2_regularization_strength",
                                       "l2_shrinkage_regularization_strength", "beta", NULL};
    const char *const *allowed = kind == ZDIST_OPTIM_SGD ? sgd : kind == ZDIST_OPTIM_MOMENTUM ? momentum
                                 : kind == ZDIST_OPTIM_ADAGRAD ? adagrad : kind == ZDIST_OPTIM_FTRL ? ftrl : adam;
    if ((rc = s_keys(o, "optimizer", allowed, err)) < 0)
        return rc;
    zdist_optim_config_t *c = &job->optimizer;
    zdist_optim_config_default(c, kind);
    if ((rc = s_num(o, "optimizer", "learning_rate", &c->learning_rate, err)) < 0 ||
        (rc = s_num(o, "optimizer", "momentum", &c->momentum, err)) < 0 ||
        (rc = s_bool(o, "optimizer", "nesterov", &c->nesterov, err)) < 0 ||
        (rc = s_num(o, "optimizer", "initial_accumulator_value", &c->initial_accumulator_value, err)) < 0 ||
        (rc = s_num(o, "optimizer", "beta_1", &c->beta1, err)) < 0 ||
        (rc = s_num(o, "optimizer", "beta_2", &c->beta2, err)) < 0 ||
        (rc = s_num(o, "optimizer", "epsilon", &c->epsilon, err)) < 0 ||
        (rc = s_bool(o, "optimizer", "lazy", &c->lazy, err)) < 0 ||
        (rc = s_num(o, "optimizer", "learning_rate_power", &c->learning_rate_power, err)) < 0 ||
        (rc = s_num(o, "optimizer", "l1_regularization_strength", &c->l1, err)) < 0 ||
        (rc = s_num(o, "optimizer", "l2_regularization_strength", &c->l2, err)) < 0 ||
        (rc = s_num(o, "optimizer", "l2_shrinkage_regularization_strength", &c->l2_shrinkage, err)) < 0 ||
        (rc = s_num(o, "optimizer", "beta", &c->beta, err)) < 0)
        return rc;
    if (zdist_optim_config_validate(c, err) < 0) {
        zdist_error_prefix(err, "optimizer");
        return -EINVAL;
    }
    return 0;
}

/* dataset.visitation: at_least_once (the default) or exactly_once. */
static int
s_visitation(json_t *ds, zdist_job_t *job, zdist_error_t *err)
{
    char *visit = NULL;
    int rc = s_str(ds, "dataset", "visitation", false, &visit, err);
    if (rc < 0 || !visit)
        return rc;
    job->exactly_once = strcmp(visit, "exactly_once") == 0;
    rc = job->exactly_once || strcmp(visit, "at_least_once") == 0
             ? 0
             : zdist_error_set(err, -EINVAL, "dataset.visitation: unknown '%.100s'; use at_least_once (the default) "
                               "or exactly_once", visit);
    free(visit);
    return rc;
}

static int
s_dataset(json_t *root, const char *base_dir, zdist_job_t *job, zdist_error_t *err)
{
    json_t *ds;
    int rc = s_obj(root, "", "dataset", true, &ds, err);
    if (rc < 0)
        return rc;
    char *format = NULL;
    if ((rc = s_str(ds, "dataset", "format", true, &format, err)) < 0)
        return rc;
    job->format = zdist_input_format_from_name(format);
    if (job->format == ZDIST_INPUT_FORMAT_INVALID) {
        rc = zdist_error_set(err, -EINVAL,
                             "dataset.format: unknown format '%s'; use idx, csv, libsvm, synthetic or tfrecord", format);
        free(format);
        return rc;
    }
    free(format);
    static const char *const common[] = {"format", "train", "pipelines", "test", "global_batch_size", "shuffle",
                                         "shuffle_seed", "shard_policy", "prefetch", "drop_remainder", "visitation", NULL};
    static const char *const tfrecord[] = {"format", "train", "pipelines", "test", "global_batch_size", "shuffle",
                                           "shuffle_seed", "shard_policy", "auto_shard_policy", "prefetch",
                                           "drop_remainder", "visitation", "compression", "features", "label", NULL};
    static const char *const csv[] = {"format", "train", "pipelines", "test", "global_batch_size", "shuffle",
                                      "shuffle_seed", "shard_policy", "prefetch", "drop_remainder", "visitation", "label_column",
                                      "header", "label_dtype", NULL};
    static const char *const libsvm[] = {"format", "train", "pipelines", "test", "global_batch_size", "shuffle",
                                         "shuffle_seed", "shard_policy", "prefetch", "drop_remainder", "visitation", "dim", "raw_ids", NULL};
    static const char *const synthetic[] = {"format", "synthetic", "global_batch_size", "shuffle", "shuffle_seed",
                                            "shard_policy", "prefetch", "drop_remainder", "visitation", NULL};
    const char *const *allowed = job->format == ZDIST_INPUT_FORMAT_CSV ? csv
                                 : job->format == ZDIST_INPUT_FORMAT_LIBSVM ? libsvm
                                 : job->format == ZDIST_INPUT_FORMAT_SYNTHETIC ? synthetic
                                 : job->format == ZDIST_INPUT_FORMAT_TFRECORD  ? tfrecord
                                                                               : common;
    if ((rc = s_keys(ds, "dataset", allowed, err)) < 0)
        return rc;
    if (job->format == ZDIST_INPUT_FORMAT_SYNTHETIC) {
        json_t *syn;
        static const char *const sallowed[] = {"n", "test_n", "dim", "classes", "noise_std", "seed", NULL};
        job->synthetic_test_n = 0;
        job->synthetic_noise_std = 0.1;
        job->synthetic_seed = 1;
        int64_t classes = 0, seed = 1;
        if ((rc = s_obj(ds, "dataset", "synthetic", true, &syn, err)) < 0 ||
            (rc = s_keys(syn, "dataset.synthetic", sallowed, err)) < 0 ||
            (rc = s_int(syn, "dataset.synthetic", "n", true, 1, INT64_C(1) << 26, &job->synthetic_n, err)) < 0 ||
            (rc = s_int(syn, "dataset.synthetic", "test_n", false, 0, INT64_C(1) << 26, &job->synthetic_test_n, err)) < 0 ||
            (rc = s_int(syn, "dataset.synthetic", "dim", true, 1, 1 << 20, &job->synthetic_dim, err)) < 0 ||
            (rc = s_int(syn, "dataset.synthetic", "classes", false, 0, 1 << 16, &classes, err)) < 0 ||
            (rc = s_num(syn, "dataset.synthetic", "noise_std", &job->synthetic_noise_std, err)) < 0 ||
            (rc = s_int(syn, "dataset.synthetic", "seed", false, 0, INT64_MAX, &seed, err)) < 0)
            return rc;
        if (classes == 1)
            return zdist_error_set(err, -EINVAL, "dataset.synthetic.classes: 0 for regression, >= 2 for classification");
        if (job->synthetic_noise_std < 0)
            return zdist_error_set(err, -EINVAL, "dataset.synthetic.noise_std: must be >= 0");
        job->synthetic_classes = (int)classes;
        job->synthetic_seed = (uint64_t)seed;
        job->has_test = job->synthetic_test_n > 0;
    } else {
        bool has_train = json_object_get(ds, "train") != NULL, has_pipes = json_object_get(ds, "pipelines") != NULL;
        if (has_train && has_pipes)
            return zdist_error_set(err, -EINVAL,
                                   "dataset.pipelines: give either dataset.train (one dataset the strategy shards "
                                   "and rebatches) or dataset.pipelines (a dataset per input pipeline), not both");
        if (has_pipes ? (rc = s_pipelines(ds, job->format, job, base_dir, err)) < 0
                      : (rc = s_files(ds, "train", true, job->format, &job->train, base_dir, err)) < 0)
            return rc;
        if ((rc = s_files(ds, "test", false, job->format, &job->test, base_dir, err)) < 0)
            return rc;
        job->has_test = rc > 0;
    }
    if (job->format == ZDIST_INPUT_FORMAT_CSV) {
        int64_t col = -1;
        char *ldt = NULL;
        job->csv.label_dtype = ZDIST_DTYPE_INT32;
        if ((rc = s_int(ds, "dataset", "label_column", false, -4096, 4095, &col, err)) < 0 ||
            (rc = s_bool(ds, "dataset", "header", &job->csv.header, err)) < 0 ||
            (rc = s_str(ds, "dataset", "label_dtype", false, &ldt, err)) < 0)
            return rc;
        job->csv.label_column = (int)col;
        if (ldt) {
            zdist_dtype_t dt = zdist_dtype_from_name(ldt);
            free(ldt);
            if (dt != ZDIST_DTYPE_INT32 && dt != ZDIST_DTYPE_FLOAT32)
                return zdist_error_set(err, -EINVAL, "dataset.label_dtype: use int32 (classes) or float32 (regression)");
            job->csv.label_dtype = dt;
        }
    }
    if (job->format == ZDIST_INPUT_FORMAT_LIBSVM &&
        ((rc = s_int(ds, "dataset", "dim", true, 1, INT64_C(1) << 32, &job->libsvm_dim, err)) < 0 ||
         (rc = s_bool(ds, "dataset", "raw_ids", &job->libsvm_raw_ids, err)) < 0))
        return rc;
    if (job->format == ZDIST_INPUT_FORMAT_TFRECORD && (rc = zdist_job_tfrecord_parse_(ds, job, err)) < 0)
        return rc;
    const char *policy_key = json_object_get(ds, "auto_shard_policy") ? "auto_shard_policy" : "shard_policy";
    if (json_object_get(ds, "auto_shard_policy") && json_object_get(ds, "shard_policy"))
        return zdist_error_set(err, -EINVAL, "dataset.auto_shard_policy: give it or dataset.shard_policy, not both");
    int64_t shuffle_seed = (int64_t)(job->seed & INT64_MAX), prefetch = 2;
    char *policy = NULL;
    job->shuffle = true;
    if ((rc = s_int(ds, "dataset", "global_batch_size", true, 1, S_MAX_BATCH, &job->global_batch_size, err)) < 0 ||
        (rc = s_bool(ds, "dataset", "shuffle", &job->shuffle, err)) < 0 ||
        (rc = s_int(ds, "dataset", "shuffle_seed", false, 0, INT64_MAX, &shuffle_seed, err)) < 0 ||
        (rc = s_int(ds, "dataset", "prefetch", false, 0, 64, &prefetch, err)) < 0 ||
        (rc = s_bool(ds, "dataset", "drop_remainder", &job->drop_remainder, err)) < 0 ||
        (rc = s_str(ds, "dataset", policy_key, false, &policy, err)) < 0)
        return rc;
    job->shuffle_seed = (uint64_t)shuffle_seed;
    job->prefetch = (int)prefetch;
    job->shard_policy = job->num_pipelines ? ZDIST_AUTO_SHARD_OFF : ZDIST_AUTO_SHARD_AUTO;
    if (policy) {
        rc = zdist_auto_shard_policy_from_name(policy, &job->shard_policy);
        free(policy);
        if (rc < 0)
            return zdist_error_set(err, -EINVAL, "dataset.%s: use auto, file, data or off", policy_key);
    }
    return s_visitation(ds, job, err);
}

/* checkpoint {every_steps, keep} and evaluation {at_end}: what the coordinator does around the steps. */
static int
s_checkpoint(json_t *root, zdist_job_t *job, zdist_error_t *err)
{
    json_t *ck, *ev;
    static const char *const callowed[] = {"every_steps", "keep", "dir", "full_every", NULL};
    static const char *const eallowed[] = {"at_end", NULL};
    int rc;
    job->ckpt_keep = 3;
    if ((rc = s_obj(root, "", "checkpoint", false, &ck, err)) < 0)
        return rc;
    if (ck && ((rc = s_keys(ck, "checkpoint", callowed, err)) < 0 ||
               (rc = s_int(ck, "checkpoint", "every_steps", false, 1, INT64_C(1) << 40, &job->ckpt_every, err)) < 0 ||
               (rc = s_int(ck, "checkpoint", "keep", false, 1, 1000, &job->ckpt_keep, err)) < 0 ||
               (rc = s_int(ck, "checkpoint", "full_every", false, 1, ZDIST_JOB_FULL_EVERY_MAX, &job->ckpt_full_every,
                           err)) < 0 ||
               (rc = s_str(ck, "checkpoint", "dir", false, &job->ckpt_dir, err)) < 0))
        return rc;
    job->evaluate = job->has_test;
    if ((rc = s_obj(root, "", "evaluation", false, &ev, err)) < 0)
        return rc;
    if (ev && ((rc = s_keys(ev, "evaluation", eallowed, err)) < 0 ||
               (rc = s_bool(ev, "evaluation", "at_end", &job->evaluate, err)) < 0))
        return rc;
    if (job->evaluate && !job->has_test)
        return zdist_error_set(err, -EINVAL, "evaluation.at_end: the job has no test set; add dataset.test (or "
                               "dataset.synthetic.test_n) or set it to false");
    return 0;
}

/* strategy {type, num_replicas, partitioner, the ring's and tpu's fields}: each only where its strategy has it. */
static int
s_strategy(json_t *root, zdist_job_t *job, zdist_error_t *err)
{
    int rc;
    json_t *st;
    char *type = NULL;
    static const char *const sallowed[] = {"type", "num_replicas", "partitioner", "collective_timeout_ms",
                                           "bytes_per_pack", "lost_worker_wait_ms", "logical_devices_per_replica",
                                           "spmd", "oversubscribe", "min_workers", "max_workers", NULL};
    static const char *const mwm_only[] = {"collective_timeout_ms", "bytes_per_pack", "lost_worker_wait_ms",
                                           "min_workers", "max_workers", NULL};
    static const char *const tpu_only[] = {"logical_devices_per_replica", "spmd", "oversubscribe", NULL};
    if ((rc = s_obj(root, "", "strategy", true, &st, err)) < 0 || (rc = s_keys(st, "strategy", sallowed, err)) < 0 ||
        (rc = s_str(st, "strategy", "type", true, &type, err)) < 0)
        return rc;
    job->strategy = zdist_strategy_from_name(type);
    rc = job->strategy == ZDIST_STRATEGY_INVALID ? -EINVAL : 0;
    if (rc < 0)
        zdist_error_set(err, -EINVAL, "strategy.type: unknown strategy '%s'; use one_device, mirrored, "
                        "central_storage, parameter_server, multi_worker_mirrored or tpu", type);
    free(type);
    if (rc < 0)
        return rc;
    int64_t nrep = 1;
    if ((rc = s_int(st, "strategy", "num_replicas", false, 1, 64, &nrep, err)) < 0)
        return rc;
    job->num_replicas = (int)nrep;
    if (job->strategy == ZDIST_STRATEGY_ONE_DEVICE && nrep != 1) {
        rc = zdist_error_set(err, -EINVAL, "strategy.num_replicas: one_device has exactly 1 replica; use mirrored "
                             "for %lld", (long long)nrep);
        return rc;
    }
    if ((rc = s_str(st, "strategy", "partitioner", false, &job->partitioner, err)) < 0)
        return rc;
    job->collective_timeout_ms = 30000;
    job->lost_worker_wait_ms = 60000;
    if ((rc = s_int(st, "strategy", "collective_timeout_ms", false, 100, INT64_C(86400000),
                    &job->collective_timeout_ms, err)) < 0 ||
        (rc = s_int(st, "strategy", "bytes_per_pack", false, 0, INT64_C(1) << 30, &job->bytes_per_pack, err)) < 0 ||
        (rc = s_int(st, "strategy", "lost_worker_wait_ms", false, -1, INT64_C(86400000), &job->lost_worker_wait_ms,
                    err)) < 0 ||
        (rc = zdist_job_elastic_parse_(st, job, err)) < 0)
        return rc;
    if (!zdist_strategy_syncs_workers(job->strategy))
        for (const char *const *k = mwm_only; *k; k++)
            if (json_object_get(st, *k)) {
                rc = zdist_error_set(err, -EINVAL, "strategy.%s: only multi_worker_mirrored and tpu have it; remove "
                                     "it", *k);
                return rc;
            }
    if (job->strategy != ZDIST_STRATEGY_TPU)
        for (const char *const *k = tpu_only; *k; k++)
            if (json_object_get(st, *k)) {
                rc = zdist_error_set(err, -EINVAL, "strategy.%s: only tpu has it; remove it or use \"type\": "
                                     "\"tpu\"", *k);
                return rc;
            }
    int64_t ldev = 1;
    if ((rc = s_int(st, "strategy", "logical_devices_per_replica", false, 1, ZDIST_MAX_LOGICAL_DEVICES, &ldev,
                    err)) < 0 ||
        (rc = s_bool(st, "strategy", "spmd", &job->spmd, err)) < 0 ||
        (rc = s_bool(st, "strategy", "oversubscribe", &job->oversubscribe, err)) < 0)
        return rc;
    job->logical_devices_per_replica = (int)ldev;
    if (job->partitioner) {
        zdist_partitioner_t p;
        if ((rc = zdist_partitioner_parse(job->partitioner, &p, err)) < 0) {
            zdist_error_prefix(err, "strategy.partitioner");
            return rc;
        }
    }
    return 0;
}

/* model {name, params}: the params kept as JSON text (a sequential model's whole object but its name). */
static int
s_model(json_t *root, zdist_job_t *job, zdist_error_t *err)
{
    int rc;
    json_t *m;
    static const char *const mallowed[] = {"name", "params", NULL};
    /* sequential: the layers are the model's params (zdist/model_spec.h),
       checked with the rest of the job in zdist_job_validate. */
    static const char *const sequential[] = {"name", "input_shape", "layers", "loss", NULL};
    /* functional: its graph (zdist/model_spec.h), and the dataset's
       features (the label's left out) put beside it, so the model's params
       carry the dtypes and shapes its inputs have. */
    static const char *const functional[] = {"name", "inputs", "layers", "output", "loss", NULL};
    if ((rc = s_obj(root, "", "model", true, &m, err)) < 0 ||
        (rc = s_str(m, "model", "name", true, &job->model, err)) < 0)
        return rc;
    bool seq = strcmp(job->model, ZDIST_MODEL_SEQUENTIAL) == 0, fun = strcmp(job->model, ZDIST_MODEL_FUNCTIONAL) == 0;
    if ((rc = s_keys(m, "model", seq ? sequential : fun ? functional : mallowed, err)) < 0)
        return rc;
    json_t *params;
    if ((rc = s_obj(m, "model", "params", false, &params, err)) < 0)
        return rc;
    if (seq || fun) {
        json_t *copy = json_copy(m), *ds = json_object_get(root, "dataset");
        json_t *features = json_deep_copy(json_object_get(ds, "features"));
        const char *label = json_string_value(json_object_get(ds, "label"));
        if (copy)
            json_object_del(copy, "name");
        if (copy && fun && json_is_object(features)) {
            json_object_del(features, label ? label : "label");
            json_object_set(copy, "features", features);
        }
        json_decref(features);
        job->model_params = copy ? json_dumps(copy, JSON_COMPACT) : NULL;
        json_decref(copy);
    } else {
        job->model_params = params ? json_dumps(params, JSON_COMPACT) : strdup("{}");
    }
    if (!job->model_params) {
        return -ENOMEM;
    }
    return 0;
}

int
zdist_job_parse(const char *text, const char *base_dir, zdist_job_t *job, zdist_error_t *err)
{
    memset(job, 0, sizeof *job);
    int rc = zdist_job_check_size(text, err);
    if (rc < 0)
        return rc;
    json_error_t jerr;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        zdist_error_set(err, -EINVAL, "not valid JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        if (err) {
            err->line = jerr.line;
            err->column = jerr.column;
        }
        return -EINVAL;
    }
    rc = -EINVAL;
    if (!json_is_object(root)) {
        zdist_error_set(err, -EINVAL, "a job is a JSON object { \"name\": ..., \"model\": ..., ... }");
        goto out;
    }
    static const char *const top[] = {"name", "strategy", "model", "optimizer", "dataset", "steps", "epochs",
                                      "steps_per_execution", "seed", "plugin_path", "log_every", "checkpoint",
                                      "evaluation", "priority", NULL};
    if ((rc = s_keys(root, "", top, err)) < 0 || (rc = s_str(root, "", "name", true, &job->name, err)) < 0)
        goto out;
    int64_t seed = 1;
    if ((rc = s_int(root, "", "seed", false, 0, INT64_MAX, &seed, err)) < 0)
        goto out;
    job->seed = (uint64_t)seed;

    if ((rc = s_strategy(root, job, err)) < 0)
        goto out;

    if ((rc = s_model(root, job, err)) < 0)
        goto out;
    if ((rc = s_optimizer(root, job, err)) < 0 || (rc = s_dataset(root, base_dir, job, err)) < 0)
        goto out;

    bool has_steps = json_object_get(root, "steps") != NULL, has_epochs = json_object_get(root, "epochs") != NULL;
    if (has_steps == has_epochs) {
        rc = zdist_error_set(err, -EINVAL, "steps / epochs: give exactly one of them (\"epochs\": 2 or \"steps\": 1000)");
        goto out;
    }
    job->steps_per_execution = 1;
    int64_t priority = 0;
    if ((rc = s_int(root, "", "steps", false, 1, INT64_C(1) << 40, &job->steps, err)) < 0 ||
        (rc = s_int(root, "", "epochs", false, 1, 1 << 20, &job->epochs, err)) < 0 ||
        (rc = s_int(root, "", "steps_per_execution", false, 1, 1 << 20, &job->steps_per_execution, err)) < 0 ||
        (rc = s_int(root, "", "log_every", false, 1, INT64_C(1) << 40, &job->log_every, err)) < 0 ||
        (rc = s_int(root, "", "priority", false, ZDIST_JOB_PRIORITY_MIN, ZDIST_JOB_PRIORITY_MAX, &priority, err)) < 0 ||
        (rc = s_str(root, "", "plugin_path", false, &job->plugin_path, err)) < 0 ||
        (rc = s_resolve_list(&job->plugin_path, base_dir)) < 0 || (rc = s_checkpoint(root, job, err)) < 0)
        goto out;
    job->priority = (int)priority;
    /* The same rules a job received as a message is held to. */
    rc = zdist_job_validate(job, err);
out:
    json_decref(root);
    if (rc < 0)
        zdist_job_release(job);
    return rc;
}

int
zdist_job_load(const char *path, zdist_job_t *ret, zdist_error_t *err)
{
    memset(ret, 0, sizeof *ret);
    void *text = NULL;
    size_t len = 0;
    int rc = zdist_file_read(path, S_MAX_JOB_BYTES, &text, &len, err);
    if (rc == -EFBIG)
        return zdist_error_set(err, rc, "'%s': a job file is at most %d MiB", path, S_MAX_JOB_BYTES >> 20);
    if (rc < 0)
        return zdist_error_set(err, rc, "cannot read '%s': %s", path, strerror(-rc));
    char *dir = strdup(path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash)
        *slash = '\0';
    rc = zdist_job_parse(text, slash ? dir : ".", ret, err);
    free(dir);
    free(text);
    return rc;
}

static void
s_files_release(zdist_job_files_t *f)
{
    free(f->images);
    free(f->labels);
    free(f->path);
    for (size_t i = 0; f->matched && i < f->n_matched; i++)
        free(f->matched[i]);
    free(f->matched);
}

/* One range check of zdist_job_validate: -EINVAL naming the field. */
static int
s_range(const char *field, int64_t v, int64_t min, int64_t max, zdist_error_t *err)
{
    if (v < min || v > max)
        return zdist_error_set(err, -EINVAL, "%s: must be in %lld..%lld, got %lld", field, (long long)min,
                               (long long)max, (long long)v);
    return 0;
}

/* The sequential model's layers and shapes; on libsvm data its input is
   the data's dimension. */
static int
s_sequential(const zdist_job_t *job, zdist_error_t *err)
{
    zdist_model_spec_t spec;
    bool sparse = job->format == ZDIST_INPUT_FORMAT_LIBSVM;
    int rc = zdist_model_spec_parse(job->model_params, sparse, &spec, err);
    if (rc == 0)
        rc = zdist_model_spec_check_devices(&spec, job->strategy != ZDIST_STRATEGY_TPU ? 0
                                                   : job->logical_devices_per_replica > 1 ? job->logical_devices_per_replica
                                                                                           : 1,
                                            job->spmd, err);
    if (rc == 0 && sparse && zdist_model_spec_input_size(&spec) != job->libsvm_dim)
        rc = zdist_error_set(err, -EINVAL, "model.input_shape: [%lld] differs from dataset.dim %lld; give the data's "
                             "dimension", (long long)zdist_model_spec_input_size(&spec), (long long)job->libsvm_dim);
    zdist_model_spec_release(&spec);
    return rc;
}

int
zdist_job_check_logical_devices(int num_replicas, int logical_devices_per_replica, bool oversubscribe,
                                zdist_error_t *err)
{
    int ldev = logical_devices_per_replica > 1 ? logical_devices_per_replica : 1;
    int need = num_replicas * ldev, cores = zdist_sys_cores();
    if (need > cores && !oversubscribe)
        return zdist_error_set(err, -EINVAL, "strategy: num_replicas %d x logical_devices_per_replica %d = %d logical "
                               "devices do not fit the %d cores this worker was given (its CPU affinity); lower "
                               "them or set strategy.oversubscribe to true", num_replicas, ldev, need, cores);
    return 0;
}

/* dataset.pipelines: a dataset per input pipeline, never sharded, for the synchronous strategies. */
static int
s_validate_pipelines(const zdist_job_t *job, zdist_error_t *err)
{
    if (job->num_pipelines > ZDIST_JOB_MAX_PIPELINES || !job->pipelines)
        return zdist_error_set(err, -EINVAL, "dataset.pipelines: 1..%d entries", ZDIST_JOB_MAX_PIPELINES);
    if (job->shard_policy != ZDIST_AUTO_SHARD_OFF)
        return zdist_error_set(err, -EINVAL,
                               "dataset.shard_policy: a dataset per pipeline is never sharded (as TF's "
                               "distribute_datasets_from_function); remove shard_policy or set it to off");
    if (job->strategy == ZDIST_STRATEGY_PARAMETER_SERVER)
        return zdist_error_set(err, -EINVAL,
                               "dataset.pipelines: parameter_server shares one dataset out in closures; a "
                               "dataset per pipeline is for the synchronous strategies (mirrored, "
                               "central_storage, one_device, multi_worker_mirrored, tpu): use dataset.train");
    if (job->format == ZDIST_INPUT_FORMAT_SYNTHETIC)
        return zdist_error_set(err, -EINVAL, "dataset.pipelines: synthetic data has no files; use dataset.train");
    for (size_t i = 0; i < job->num_pipelines; i++) {
        const zdist_job_files_t *f = &job->pipelines[i];
        if (job->format == ZDIST_INPUT_FORMAT_IDX ? !f->images || !f->labels : !f->path)
            return zdist_error_set(err, -EINVAL, "dataset.pipelines[%zu]: %s", i,
                                   job->format == ZDIST_INPUT_FORMAT_IDX ? "idx data needs images and labels"
                                                                         : "path is missing; add the data file");
    }
    return 0;
}

/* The dataset's fields its format needs. */
static int
s_validate_format(const zdist_job_t *job, zdist_error_t *err)
{
    int rc;
    switch (job->format) {
    case ZDIST_INPUT_FORMAT_SYNTHETIC:
        if ((rc = s_range("dataset.synthetic.n", job->synthetic_n, 1, INT64_C(1) << 26, err)) < 0 ||
            (rc = s_range("dataset.synthetic.test_n", job->synthetic_test_n, 0, INT64_C(1) << 26, err)) < 0 ||
            (rc = s_range("dataset.synthetic.dim", job->synthetic_dim, 1, 1 << 20, err)) < 0 ||
            (rc = s_range("dataset.synthetic.classes", job->synthetic_classes, 0, 1 << 16, err)) < 0)
            return rc;
        if (job->synthetic_classes == 1)
            return zdist_error_set(err, -EINVAL, "dataset.synthetic.classes: 0 for regression, >= 2 for classification");
        if (!(job->synthetic_noise_std >= 0))
            return zdist_error_set(err, -EINVAL, "dataset.synthetic.noise_std: must be >= 0");
        if (job->has_test != (job->synthetic_test_n > 0))
            return zdist_error_set(err, -EINVAL, "dataset.synthetic.test_n: disagrees with the job's test set");
        break;
    case ZDIST_INPUT_FORMAT_IDX:
        if ((!job->num_pipelines && (!job->train.images || !job->train.labels)) ||
            (job->has_test && (!job->test.images || !job->test.labels)))
            return zdist_error_set(err, -EINVAL, "dataset.train: idx data needs images and labels");
        break;
    case ZDIST_INPUT_FORMAT_CSV:
    case ZDIST_INPUT_FORMAT_LIBSVM:
        if ((!job->num_pipelines && !job->train.path) || (job->has_test && !job->test.path))
            return zdist_error_set(err, -EINVAL, "dataset.train.path: missing; add the data file");
        if (job->format == ZDIST_INPUT_FORMAT_CSV && job->csv.label_dtype != ZDIST_DTYPE_INT32 &&
            job->csv.label_dtype != ZDIST_DTYPE_FLOAT32)
            return zdist_error_set(err, -EINVAL, "dataset.label_dtype: use int32 (classes) or float32 (regression)");
        if (job->format == ZDIST_INPUT_FORMAT_LIBSVM &&
            (rc = s_range("dataset.dim", job->libsvm_dim, 1, INT64_C(1) << 32, err)) < 0)
            return rc;
        break;
    case ZDIST_INPUT_FORMAT_TFRECORD:
        if ((!job->num_pipelines && !job->train.path) || (job->has_test && !job->test.path))
            return zdist_error_set(err, -EINVAL, "dataset.train.files: missing; add the files' glob");
        return zdist_job_tfrecord_validate_(job, err);
    default:
        return zdist_error_set(err, -EINVAL,
                               "dataset.format: unknown format; use idx, csv, libsvm, synthetic or tfrecord");
    }
    return 0;
}

int
zdist_job_validate(const zdist_job_t *job, zdist_error_t *err)
{
    int rc;
    if (!job->name || !*job->name)
        return zdist_error_set(err, -EINVAL, "name: missing; add a string");
    if (!zdist_strategy_name(job->strategy))
        return zdist_error_set(err, -EINVAL, "strategy.type: unknown strategy; use one_device, mirrored, "
                               "central_storage, parameter_server, multi_worker_mirrored or tpu");
    if (!job->model || !*job->model || !job->model_params)
        return zdist_error_set(err, -EINVAL, "model.name: missing; add a string");
    if ((rc = s_range("strategy.num_replicas", job->num_replicas, 1, 64, err)) < 0 ||
        (rc = s_range("strategy.collective_timeout_ms", job->collective_timeout_ms, 100, INT64_C(86400000), err)) < 0 ||
        (rc = s_range("strategy.bytes_per_pack", job->bytes_per_pack, 0, INT64_C(1) << 30, err)) < 0 ||
        (rc = s_range("strategy.lost_worker_wait_ms", job->lost_worker_wait_ms, -1, INT64_C(86400000), err)) < 0 ||
        (rc = s_range("dataset.global_batch_size", job->global_batch_size, 1, S_MAX_BATCH, err)) < 0 ||
        (rc = s_range("dataset.prefetch", job->prefetch, 0, 64, err)) < 0 ||
        (rc = s_range("steps", job->steps, 0, INT64_C(1) << 40, err)) < 0 ||
        (rc = s_range("epochs", job->epochs, 0, 1 << 20, err)) < 0 ||
        (rc = s_range("steps_per_execution", job->steps_per_execution, 1, 1 << 20, err)) < 0 ||
        (rc = s_range("log_every", job->log_every, 0, INT64_C(1) << 40, err)) < 0 ||
        (rc = s_range("checkpoint.every_steps", job->ckpt_every, 0, INT64_C(1) << 40, err)) < 0 ||
        (rc = s_range("checkpoint.keep", job->ckpt_keep, 1, 1000, err)) < 0 ||
        (rc = s_range("checkpoint.full_every", job->ckpt_full_every, 0, ZDIST_JOB_FULL_EVERY_MAX, err)) < 0 ||
        (rc = s_range("priority", job->priority, ZDIST_JOB_PRIORITY_MIN, ZDIST_JOB_PRIORITY_MAX, err)) < 0)
        return rc;
    if (job->ckpt_dir) {
        if (job->ckpt_dir[0] != '/')
            return zdist_error_set(err, -EINVAL, "checkpoint.dir: '%.200s' is a relative path; give an absolute "
                                   "directory (the psds write there too)", job->ckpt_dir);
        if (zdist_path_has_dotdot(job->ckpt_dir))
            return zdist_error_set(err, -EINVAL, "checkpoint.dir: '%.200s' contains '..'; give the directory "
                                   "without it", job->ckpt_dir);
        if (strlen(job->ckpt_dir) > ZDIST_JOB_CKPT_DIR_MAX)
            return zdist_error_set(err, -EINVAL, "checkpoint.dir: longer than %d bytes; use a shorter path",
                                   ZDIST_JOB_CKPT_DIR_MAX);
    }
    if (job->strategy == ZDIST_STRATEGY_ONE_DEVICE && job->num_replicas != 1)
        return zdist_error_set(err, -EINVAL, "strategy.num_replicas: one_device has exactly 1 replica; use mirrored "
                               "for %d", job->num_replicas);
    /* 0: a job made in C without the field, read as 1 */
    if ((rc = s_range("strategy.logical_devices_per_replica", job->logical_devices_per_replica, 0,
                      ZDIST_MAX_LOGICAL_DEVICES, err)) < 0)
        return rc;
    if (job->strategy != ZDIST_STRATEGY_TPU && (job->logical_devices_per_replica > 1 || job->spmd ||
                                                job->oversubscribe))
        return zdist_error_set(err, -EINVAL, "strategy.logical_devices_per_replica: only tpu has logical devices, "
                               "spmd and oversubscribe; remove them or use \"type\": \"tpu\"");
    if (job->partitioner) {
        zdist_partitioner_t p;
        if (zdist_partitioner_parse(job->partitioner, &p, err) < 0) {
            zdist_error_prefix(err, "strategy.partitioner");
            return -EINVAL;
        }
    }
    if (zdist_optim_config_validate(&job->optimizer, err) < 0) {
        zdist_error_prefix(err, "optimizer");
        return -EINVAL;
    }
    if (job->shard_policy < ZDIST_AUTO_SHARD_OFF || job->shard_policy > ZDIST_AUTO_SHARD_DATA)
        return zdist_error_set(err, -EINVAL, "dataset.shard_policy: use auto, file, data or off");
    if (job->num_pipelines && (rc = s_validate_pipelines(job, err)) < 0)
        return rc;
    if (job->exactly_once && job->strategy != ZDIST_STRATEGY_PARAMETER_SERVER)
        return zdist_error_set(err, -EINVAL, "dataset.visitation: exactly_once is for parameter_server, whose closures "
                               "share one dataset out; %s steps every worker's shard in lockstep: remove it",
                               zdist_strategy_name(job->strategy));
    if ((job->steps > 0) == (job->epochs > 0))
        return zdist_error_set(err, -EINVAL, "steps / epochs: give exactly one of them (\"epochs\": 2 or \"steps\": 1000)");
    if ((rc = s_validate_format(job, err)) < 0 || (rc = zdist_job_elastic_validate_(job, err)) < 0)
        return rc;
    if (job->evaluate && !job->has_test)
        return zdist_error_set(err, -EINVAL, "evaluation.at_end: the job has no test set; add dataset.test (or "
                               "dataset.synthetic.test_n) or set it to false");
    if (strcmp(job->model, ZDIST_MODEL_FUNCTIONAL) == 0) {
        zdist_model_spec_t spec;
        if ((rc = zdist_model_graph_parse(job->model_params, &spec, err)) == 0)
            zdist_model_spec_release(&spec);
        return rc;
    }
    return strcmp(job->model, ZDIST_MODEL_SEQUENTIAL) == 0 ? s_sequential(job, err) : 0;
}

void
zdist_job_release(zdist_job_t *job)
{
    if (!job)
        return;
    free(job->name);
    free(job->partitioner);
    free(job->model);
    free(job->model_params);
    free(job->plugin_path);
    free(job->ckpt_dir);
    s_files_release(&job->train);
    s_files_release(&job->test);
    for (size_t i = 0; job->pipelines && i < job->num_pipelines; i++)
        s_files_release(&job->pipelines[i]);
    free(job->pipelines);
    zdist_job_tfrecord_release_(job);
    memset(job, 0, sizeof *job);
}

/* The files confinement matched, else the glob expanded now. */
static int
s_load_tfrecord(const zdist_job_t *job, const zdist_job_files_t *f, bool test, const zdist_input_context_t *ictx,
                zdist_auto_shard_policy_t policy, zdist_dataset_t **ret, zdist_auto_shard_policy_t *ret_applied,
                zdist_error_t *err)
{
    char **mine = NULL;
    size_t n = f->n_matched;
    int rc = 0;
    if (!f->matched && (rc = zdist_job_glob(f->path ? f->path : "", test ? "dataset.test.files" : "dataset.train.files",
                                            &mine, &n, err)) < 0)
        return rc;
    zdist_input_spec_t spec = {.format = ZDIST_INPUT_FORMAT_TFRECORD,
                               .paths = (const char *const *)(mine ? mine : f->matched),
                               .n_paths = n,
                               .compression = job->compression,
                               .features = job->features,
                               .n_features = job->n_features,
                               .label = job->label};
    rc = zdist_dataset_load(&spec, ictx, policy, ret, ret_applied, err);
    for (size_t i = 0; mine && i < n; i++)
        free(mine[i]);
    free(mine);
    return rc;
}

int
zdist_job_load_dataset(const zdist_job_t *job, bool test, const zdist_input_context_t *ictx,
                        zdist_auto_shard_policy_t policy, zdist_dataset_t **ret,
                        zdist_auto_shard_policy_t *ret_applied, zdist_error_t *err)
{
    const zdist_job_files_t *f = test ? &job->test : &job->train;
    if (!test && job->num_pipelines) {
        /* distribute_datasets_from_function: this pipeline's own files, unsharded */
        int pipes = ictx ? zdist_input_context_num_input_pipelines(ictx) : 1;
        int id = ictx ? zdist_input_context_input_pipeline_id(ictx) : 0;
        int replicas = ictx ? zdist_input_context_num_replicas_in_sync(ictx) : 1;
        if ((size_t) pipes != job->num_pipelines)
            return zdist_error_set(err, -EINVAL,
                                   "dataset.pipelines: %zu given, but the job runs %d input pipeline%s (one per "
                                   "worker); give one per worker",
                                   job->num_pipelines, pipes, pipes == 1 ? "" : "s");
        if (job->global_batch_size % replicas != 0)
            return zdist_error_set(err, -EINVAL,
                                   "dataset.global_batch_size: The `global_batch_size` %lld is not divisible by "
                                   "`num_replicas_in_sync` %d",
                                   (long long) job->global_batch_size, replicas);
        f = &job->pipelines[id];
        policy = ZDIST_AUTO_SHARD_OFF;
        ictx = NULL; /* one pipeline's data: nothing to shard */
    }
    const char *paths[2];
    zdist_input_spec_t spec = {.format = job->format, .paths = paths, .csv = job->csv, .libsvm_dim = job->libsvm_dim,
                               .libsvm_raw_ids = job->libsvm_raw_ids};
    if (job->format == ZDIST_INPUT_FORMAT_SYNTHETIC) {
        int64_t n = job->synthetic_n + (test ? job->synthetic_test_n : 0);
        if (ret_applied)
            *ret_applied = ZDIST_AUTO_SHARD_DATA;
        return job->synthetic_classes
                   ? zdist_dataset_synthetic_classification(n, job->synthetic_dim, job->synthetic_classes,
                                                            job->synthetic_seed, ret, err)
                   : zdist_dataset_synthetic_regression(n, job->synthetic_dim, job->synthetic_seed,
                                                        job->synthetic_noise_std, ret, err);
    }
    if (job->format == ZDIST_INPUT_FORMAT_TFRECORD)
        return s_load_tfrecord(job, f, test, ictx, policy, ret, ret_applied, err);
    if (job->format == ZDIST_INPUT_FORMAT_IDX) {
        paths[0] = f->images;
        paths[1] = f->labels;
        spec.n_paths = 2;
    } else {
        paths[0] = f->path;
        spec.n_paths = 1;
    }
    return zdist_dataset_load(&spec, ictx, policy, ret, ret_applied, err);
}
