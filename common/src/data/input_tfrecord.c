/* zdist TFRecord reader: files of tf.train.Example parsed against a feature
   spec into a dataset with named columns, the label, and the fixed float32
   features as the dense features. One file at a time goes through the
   parser and is appended, so at most one file's columns are held twice. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"

int
zdist_input_spec_check_features(const zdist_feature_spec_t *features, int n, const char *label,
                                zdist_error_t *err)
{
    if (!features || n < 1 || n > ZDIST_FEATURE_MAX)
        return zdist_error_set(err, -EINVAL, "features: give 1..%d features", ZDIST_FEATURE_MAX);
    zdist_example_parser_t *p = zdist_example_parser_new(features, n, err);
    if (!p)
        return err && err->code ? err->code : -EINVAL;
    int i = label ? zdist_example_parser_find(p, label) : -1;
    zdist_example_parser_destroy(&p);
    if (i < 0)
        return zdist_error_set(err, -EINVAL, "label: '%.200s' is not among the features; name the label's feature "
                               "(and declare it in features)", label ? label : "");
    const zdist_feature_spec_t *l = &features[i];
    if (l->kind != ZDIST_FEATURE_FIXED || l->rank != 0)
        return zdist_error_set(err, -EINVAL, "features.%s: the label must be {\"kind\": \"fixed\", \"shape\": []}, "
                               "one value per example", l->name);
    return 0;
}

/* The dataset's shape before the first row: a column per feature but the
   label, dim the fixed float32 widths' sum. */
static int
s_layout(const zdist_input_spec_t *spec, int label, zdist_dataset_t **ret)
{
    const zdist_feature_spec_t *l = &spec->features[label];
    zdist_dtype_t ldt = l->dtype == ZDIST_DTYPE_INT64 ? ZDIST_DTYPE_INT32 : ZDIST_DTYPE_FLOAT32;
    int64_t dim = 0;
    for (int i = 0; i < spec->n_features; i++) {
        const zdist_feature_spec_t *f = &spec->features[i];
        if (i == label || f->kind != ZDIST_FEATURE_FIXED || f->dtype != ZDIST_DTYPE_FLOAT32)
            continue;
        int64_t w = 1;
        for (int d = 0; d < f->rank; d++)
            w *= f->shape[d];
        dim += w;
    }
    if (dim > S_INPUT_MAX_DIM)
        return -EFBIG;
    zdist_dataset_t *ds = zdist_dataset_alloc_(0, dim, false, ldt);
    if (!ds)
        return -ENOMEM;
    ds->ncols = spec->n_features - 1;
    ds->cols = calloc((size_t) ds->ncols + 1, sizeof *ds->cols);
    ds->col_max_row = calloc((size_t) ds->ncols + 1, sizeof(int64_t));
    for (int i = 0, c = 0; ds->cols && ds->col_max_row && i < spec->n_features; i++) {
        const zdist_feature_spec_t *f = &spec->features[i];
        if (i == label)
            continue;
        zdist_step_column_t *col = &ds->cols[c++];
        col->name = strdup(f->name);
        col->dtype = f->dtype;
        col->width = 0;
        if (f->kind == ZDIST_FEATURE_FIXED) {
            col->width = 1;
            for (int d = 0; d < f->rank; d++)
                col->width *= f->shape[d];
        } else if (!(col->row_offsets = calloc(1, sizeof(int64_t)))) {
            break;
        }
        if (!col->name)
            break;
    }
    for (int c = 0; ds->cols && c < ds->ncols; c++)
        if (!ds->cols[c].name || (!ds->cols[c].width && !ds->cols[c].row_offsets)) {
            zdist_dataset_destroy(&ds);
            return -ENOMEM;
        }
    if (!ds->cols || !ds->col_max_row) {
        zdist_dataset_destroy(&ds);
        return -ENOMEM;
    }
    *ret = ds;
    return 0;
}

/* realloc of *p to n elements of size bytes; -ENOMEM leaves it. */
static int
s_grow(void *p, size_t n, size_t size)
{
    void **pp = p;
    void *q = realloc(*pp, n * size + 1);
    if (!q)
        return -ENOMEM;
    *pp = q;
    return 0;
}

/* Appends the parser's rows (one file's) to ds: the label, the columns,
   the dense features and the origins (file k, records from 0). */
static int
s_append(zdist_dataset_t *ds, const zdist_example_parser_t *p, int label, int64_t file_k)
{
    int64_t add = zdist_example_parser_rows(p), n0 = ds->n, n = n0 + add;
    if (n > S_INPUT_MAX_EXAMPLES)
        return -EFBIG;
    if (s_grow(&ds->labels, (size_t) n, 4) < 0 || s_grow(&ds->origin, (size_t) n, sizeof(int64_t)) < 0 ||
        s_grow(&ds->features, (size_t) n * (size_t) ds->dim, sizeof(float)) < 0)
        return -ENOMEM;
    const zdist_feature_column_t *lc = zdist_example_parser_column(p, label);
    for (int64_t i = 0; i < add; i++) {
        ds->origin[n0 + i] = (file_k << 40) | i;
        if (ds->label_dtype == ZDIST_DTYPE_INT32) {
            int64_t v = ((const int64_t *) lc->values)[i];
            if (v < 0 || v > INT32_MAX)
                return -ERANGE; /* classes are 0..2^31-1 */
            ((int32_t *) ds->labels)[n0 + i] = (int32_t) v;
        } else
            ((float *) ds->labels)[n0 + i] = ((const float *) lc->values)[i];
    }
    int64_t off = 0; /* where the next float feature goes in a dense row */
    for (int i = 0, c = 0; i < zdist_example_parser_count(p); i++) {
        if (i == label)
            continue;
        const zdist_feature_column_t *pc = zdist_example_parser_column(p, i);
        zdist_step_column_t *col = &ds->cols[c];
        size_t es = col->dtype == ZDIST_DTYPE_INT64 ? 8 : 4;
        if (col->width > 0) {
            if (s_grow(&col->values, (size_t) n * (size_t) col->width, es) < 0)
                return -ENOMEM;
            memcpy((char *) col->values + (size_t) n0 * col->width * es, pc->values, (size_t) add * col->width * es);
            if (col->dtype == ZDIST_DTYPE_FLOAT32) {
                const float *in = pc->values;
                float *d = ds->features + (size_t) n0 * ds->dim + off;
                if (col->width == 1) /* a scalar: by assignment, a call per value costs as much as the parse */
                    for (int64_t r = 0; r < add; r++)
                        d[(size_t) r * ds->dim] = in[r];
                else
                    for (int64_t r = 0; r < add; r++)
                        memcpy(d + (size_t) r * ds->dim, in + (size_t) r * col->width, (size_t) col->width * 4);
                off += col->width;
            }
        } else {
            int64_t have = col->row_offsets[n0], more = pc->row_splits[add];
            if (s_grow(&col->row_offsets, (size_t) n + 1, sizeof(int64_t)) < 0 ||
                s_grow(&col->values, (size_t) (have + more), es) < 0)
                return -ENOMEM;
            int64_t *ro = (int64_t *) col->row_offsets;
            for (int64_t r = 0; r < add; r++) {
                ro[n0 + r + 1] = have + pc->row_splits[r + 1];
                int64_t len = pc->row_splits[r + 1] - pc->row_splits[r];
                if (len > ds->col_max_row[c])
                    ds->col_max_row[c] = len;
            }
            memcpy((char *) col->values + (size_t) have * es, pc->values, (size_t) more * es);
        }
        c++;
    }
    ds->n = n;
    return 0;
}

/* Every record of one file into the parser (cleared first). */
static int
s_parse_file(const zdist_input_spec_t *spec, size_t k, zdist_example_parser_t *p, zdist_error_t *err)
{
    const char *path = spec->paths[k];
    zdist_tfrecord_reader_t *rd = zdist_tfrecord_reader_open(path, spec->compression, err);
    if (!rd)
        return err && err->code ? err->code : -EIO;
    zdist_example_parser_clear(p);
    int rc;
    for (;;) {
        const uint8_t *data;
        size_t len;
        uint64_t at = zdist_tfrecord_reader_offset(rd);
        rc = zdist_tfrecord_reader_next(rd, &data, &len, err);
        if (rc <= 0)
            break; /* the reader's message names the file and the offset */
        if ((rc = zdist_example_parser_add(p, data, len, err)) < 0) {
            zdist_error_prefix(err, "'%s': record %lld (offset %llu)", path,
                               (long long) zdist_tfrecord_reader_count(rd) - 1, (unsigned long long) at);
            break;
        }
        if (zdist_example_parser_rows(p) > S_INPUT_MAX_EXAMPLES) {
            rc = zdist_error_set(err, -EFBIG, "'%s': more than %lld examples", path,
                                 (long long) S_INPUT_MAX_EXAMPLES);
            break;
        }
    }
    zdist_tfrecord_reader_destroy(&rd);
    return rc;
}

int
zdist_dataset_read_tfrecord_(const zdist_input_spec_t *spec, const bool *keep, zdist_dataset_t **ret,
                             zdist_error_t *err)
{
    int rc = zdist_input_spec_check_features(spec->features, spec->n_features, spec->label, err);
    if (rc < 0)
        return rc;
    zdist_example_parser_t *p = zdist_example_parser_new(spec->features, spec->n_features, err);
    if (!p)
        return err && err->code ? err->code : -EINVAL;
    int label = zdist_example_parser_find(p, spec->label);
    zdist_dataset_t *ds = NULL;
    if ((rc = s_layout(spec, label, &ds)) < 0) {
        zdist_example_parser_destroy(&p);
        return zdist_error_set(err, rc, rc == -EFBIG ? "features: more than %lld float32 values per example"
                                                     : "out of memory", (long long) S_INPUT_MAX_DIM);
    }
    for (size_t k = 0; k < spec->n_paths && rc == 0; k++) {
        if (keep && !keep[k])
            continue;
        if ((rc = s_parse_file(spec, k, p, err)) < 0)
            break;
        if ((rc = s_append(ds, p, label, (int64_t) k)) < 0)
            zdist_error_set(err, rc, "'%s': %s", spec->paths[k],
                            rc == -EFBIG   ? "too many examples"
                            : rc == -ERANGE ? "a label is not a class (0 .. 2^31-1); an int64 label holds classes"
                                            : "out of memory for its examples");
    }
    zdist_example_parser_destroy(&p);
    if (rc == 0 && ds->label_dtype == ZDIST_DTYPE_INT32)
        rc = zdist_dataset_finish_labels_(ds, spec->label, err);
    if (rc < 0) {
        zdist_dataset_destroy(&ds);
        return rc;
    }
    *ret = ds;
    return 0;
}
