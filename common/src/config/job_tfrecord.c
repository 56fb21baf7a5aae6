/* job_tfrecord: a tfrecord job's dataset fields — compression, the feature
   spec (tf.io.parse_example's FixedLenFeature / VarLenFeature), the label —
   parsed and checked with messages naming the field, and its file globs
   expanded, sorted. */
#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_tfrecord.h"

/* "dataset.features.I1.shape: must be ..., got [1, \"a\"]" */
static int
s_bad(zdist_error_t *err, const char *name, const char *key, const char *what, json_t *got)
{
    char *text = got ? json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    int rc = zdist_error_set(err, -EINVAL, "dataset.features.%.200s%s%s: %s%s%.60s", name, key ? "." : "",
                             key ? key : "", what, text ? ", got " : "", text ? text : "");
    free(text);
    return rc;
}

static int
s_shape(json_t *v, const char *name, zdist_feature_spec_t *f, zdist_error_t *err)
{
    if (!v)
        return s_bad(err, name, "shape", "missing; a fixed feature needs its shape ([] for one value per example)",
                     NULL);
    if (!json_is_array(v) || json_array_size(v) > ZDIST_FEATURE_MAX_RANK)
        return s_bad(err, name, "shape", "must be a list of at most 4 dimensions ([] for a scalar)", v);
    f->rank = (int)json_array_size(v);
    int64_t elems = 1;
    for (int d = 0; d < f->rank; d++) {
        json_t *x = json_array_get(v, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (1 << 24))
            return s_bad(err, name, "shape", "every dimension must be an integer in 0..16777216", v);
        f->shape[d] = json_integer_value(x);
        elems *= f->shape[d];
        if (elems > (1 << 24))
            return s_bad(err, name, "shape", "more than 16777216 values per example", v);
    }
    return 0;
}

static int
s_default(json_t *v, const char *name, zdist_feature_spec_t *f, zdist_error_t *err)
{
    if (!v)
        return 0;
    if (f->dtype == ZDIST_DTYPE_INT64 ? !json_is_integer(v) : !json_is_number(v))
        return s_bad(err, name, "default", f->dtype == ZDIST_DTYPE_INT64 ? "must be an integer (the dtype is int64)"
                                                                         : "must be a number",
                     v);
    f->has_default = true;
    if (f->dtype == ZDIST_DTYPE_INT64)
        f->default_int = json_integer_value(v);
    else
        f->default_float = json_number_value(v);
    return 0;
}

/* One feature: {"kind": "fixed", "dtype", "shape", "default"?} or {"kind": "var", "dtype"}. */
static int
s_feature(const char *name, json_t *o, zdist_feature_spec_t *f, zdist_error_t *err)
{
    if (!json_is_object(o))
        return s_bad(err, name, NULL, "must be an object {\"kind\": \"fixed\"|\"var\", \"dtype\": ...}", o);
    json_t *kind = json_object_get(o, "kind"), *dtype = json_object_get(o, "dtype");
    bool fixed = json_is_string(kind) && strcmp(json_string_value(kind), "fixed") == 0;
    bool var = json_is_string(kind) && strcmp(json_string_value(kind), "var") == 0;
    if (!fixed && !var)
        return s_bad(err, name, "kind", "must be \"fixed\" or \"var\"", kind);
    const char *key;
    json_t *val;
    json_object_foreach(o, key, val) {
        bool ok = !strcmp(key, "kind") || !strcmp(key, "dtype") || !strcmp(key, "comment") ||
                  (fixed && (!strcmp(key, "shape") || !strcmp(key, "default")));
        if (!ok)
            return s_bad(err, name, key, fixed ? "unknown field; a fixed feature has kind, dtype, shape, default"
                                               : "unknown field; a var feature has kind and dtype",
                         NULL);
    }
    const char *dt = json_is_string(dtype) ? json_string_value(dtype) : "";
    f->dtype = !strcmp(dt, "float32") ? ZDIST_DTYPE_FLOAT32 : !strcmp(dt, "int64") ? ZDIST_DTYPE_INT64 : 0;
    if (!f->dtype)
        return s_bad(err, name, "dtype", "must be \"float32\" or \"int64\"", dtype);
    f->kind = fixed ? ZDIST_FEATURE_FIXED : ZDIST_FEATURE_VAR;
    int rc;
    if (fixed && ((rc = s_shape(json_object_get(o, "shape"), name, f, err)) < 0 ||
                  (rc = s_default(json_object_get(o, "default"), name, f, err)) < 0))
        return rc;
    return 0;
}

int
zdist_job_tfrecord_parse_(json_t *ds, zdist_job_t *job, zdist_error_t *err)
{
    json_t *comp = json_object_get(ds, "compression"), *feats = json_object_get(ds, "features");
    json_t *label = json_object_get(ds, "label");
    job->compression = ZDIST_TFRECORD_NONE;
    if (comp && (!json_is_string(comp) ||
                 zdist_tfrecord_compression_parse(json_string_value(comp), &job->compression, NULL) < 0))
        return zdist_error_set(err, -EINVAL, "dataset.compression: use \"gzip\" or \"none\"");
    if (!json_is_object(feats) || json_object_size(feats) < 1 || json_object_size(feats) > ZDIST_FEATURE_MAX)
        return zdist_error_set(err, -EINVAL, "dataset.features: must be an object of 1..%d features, each "
                               "{\"kind\": \"fixed\", \"dtype\": \"float32\"|\"int64\", \"shape\": [...], "
                               "\"default\": v} or {\"kind\": \"var\", \"dtype\": ...}", ZDIST_FEATURE_MAX);
    if (!json_is_string(label) || json_string_length(label) == 0)
        return zdist_error_set(err, -EINVAL, "dataset.label: missing; name the feature that is the label "
                               "(\"label\": \"label\")");
    if (!(job->label = strdup(json_string_value(label))))
        return zdist_error_set(err, -ENOMEM, "out of memory");
    size_t n = json_object_size(feats);
    if (!(job->features = calloc(n, sizeof *job->features)))
        return zdist_error_set(err, -ENOMEM, "out of memory");
    const char *name;
    json_t *o;
    json_object_foreach(feats, name, o) { /* jansson keeps the document's order */
        zdist_feature_spec_t *f = &job->features[job->n_features];
        if (strlen(name) == 0 || strlen(name) > ZDIST_FEATURE_NAME_MAX)
            return zdist_error_set(err, -EINVAL, "dataset.features: a feature's name must be 1..%d bytes",
                                   ZDIST_FEATURE_NAME_MAX);
        if (!(f->name = strdup(name)))
            return zdist_error_set(err, -ENOMEM, "out of memory");
        job->n_features++;
        int rc = s_feature(name, o, f, err);
        if (rc < 0)
            return rc;
    }
    return zdist_job_tfrecord_validate_(job, err);
}

int
zdist_job_tfrecord_validate_(const zdist_job_t *job, zdist_error_t *err)
{
    if (job->compression != ZDIST_TFRECORD_NONE && job->compression != ZDIST_TFRECORD_GZIP)
        return zdist_error_set(err, -EINVAL, "dataset.compression: use \"gzip\" or \"none\"");
    if (!job->label || !*job->label)
        return zdist_error_set(err, -EINVAL, "dataset.label: missing; name the feature that is the label");
    zdist_error_t e = {0};
    if (zdist_input_spec_check_features(job->features, job->n_features, job->label, &e) < 0) {
        /* "features.I1: ..." / "label: ..." / the parser's "feature 'I1': ..." under dataset */
        bool field = strncmp(e.text, "features", 8) == 0 || strncmp(e.text, "label", 5) == 0;
        return zdist_error_set(err, -EINVAL, "dataset%s%s", field ? "." : ".features: ", e.text);
    }
    return 0;
}

void
zdist_job_tfrecord_release_(zdist_job_t *job)
{
    for (int i = 0; job->features && i < job->n_features; i++)
        free((char *)job->features[i].name);
    free(job->features);
    free(job->label);
    job->features = NULL;
    job->label = NULL;
    job->n_features = 0;
}

static int
s_strcmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int
zdist_job_glob(const char *pattern, const char *field, char ***ret, size_t *ret_n, zdist_error_t *err)
{
    glob_t g;
    int r = glob(pattern, GLOB_NOSORT, NULL, &g);
    if (r == GLOB_NOMATCH || (r == 0 && g.gl_pathc == 0)) {
        if (r == 0)
            globfree(&g);
        return zdist_error_set(err, -ENOENT, "%s: '%.200s' matches no file", field, pattern);
    }
    if (r != 0)
        return zdist_error_set(err, r == GLOB_NOSPACE ? -ENOMEM : -EIO, "%s: '%.200s': %s", field, pattern,
                               r == GLOB_NOSPACE ? "out of memory" : "a directory could not be read");
    char **out = calloc(g.gl_pathc, sizeof *out);
    for (size_t i = 0; out && i < g.gl_pathc; i++)
        if (!(out[i] = strdup(g.gl_pathv[i]))) {
            while (i > 0)
                free(out[--i]);
            free(out);
            out = NULL;
        }
    size_t n = g.gl_pathc;
    globfree(&g);
    if (!out)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    /* by name, bytewise: the order every reader of the job sees, whatever its locale */
    qsort(out, n, sizeof *out, s_strcmp);
    *ret = out;
    *ret_n = n;
    return 0;
}
