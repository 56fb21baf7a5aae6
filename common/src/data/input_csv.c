/* zdist input pipelines: the numeric CSV and the LIBSVM readers. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "zdist/parse.h"

/* A growable array of fixed-size items. */
typedef struct {
    void *data;
    size_t len, cap, item;
} s_vec_t;

static int
s_vec_push(s_vec_t *v, const void *item)
{
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 1024;
        void *d = realloc(v->data, cap * v->item);
        if (!d)
            return -ENOMEM;
        v->data = d;
        v->cap = cap;
    }
    memcpy((char *) v->data + v->len * v->item, item, v->item);
    v->len++;
    return 0;
}

/* Labels: int32 must hold an integral value >= 0 and < 2^31. */
static int
s_label(double v, zdist_dtype_t dtype, void *out)
{
    if (dtype == ZDIST_DTYPE_FLOAT32) {
        float f = (float) v;
        memcpy(out, &f, 4);
        return 0;
    }
    if (v < 0 || v > 2147483647.0 || floor(v) != v)
        return -EINVAL;
    int32_t i = (int32_t) v;
    memcpy(out, &i, 4);
    return 0;
}

/* The next line of text[0..len): [*b, *e) without its "\r\n" or "\n";
   returns the start of the following line. */
static size_t
s_next_line(const char *text, size_t len, size_t at, size_t *b, size_t *e)
{
    size_t i = at;
    while (i < len && text[i] != '\n')
        i++;
    *b = at;
    *e = i;
    if (*e > *b && text[*e - 1] == '\r')
        (*e)--;
    return i < len ? i + 1 : len;
}

int
zdist_dataset_read_csv(const char *path, const zdist_csv_options_t *opts, zdist_dataset_t **ret,
                       zdist_error_t *err)
{
    if (!path || !opts || !ret)
        return zdist_error_set(err, -EINVAL, "csv: no path or options");
    if (opts->label_dtype != ZDIST_DTYPE_INT32 && opts->label_dtype != ZDIST_DTYPE_FLOAT32)
        return zdist_error_set(err, -EINVAL, "csv: label dtype must be int32 or float32");
    char *text = NULL;
    size_t len = 0;
    int r = zdist_dataset_slurp_(path, &text, &len, err);
    if (r < 0)
        return r;

    s_vec_t feats = {.item = sizeof(float)}, labels = {.item = 4};
    int64_t ncols = -1, label_col = -1, nrows = 0;
    char field[128];
    size_t at = 0;
    int line = 0;
    while (at < len) {
        size_t b, e;
        at = s_next_line(text, len, at, &b, &e);
        line++;
        if (line == 1 && opts->header)
            continue;
        if (e == b)
            continue;
        int64_t col = 0;
        size_t fb = b;
        for (;;) {
            size_t fe = fb;
            while (fe < e && text[fe] != ',')
                fe++;
            size_t flen = fe - fb;
            double v = 0;
            int pr = -EINVAL;
            if (flen < sizeof field) {
                memcpy(field, text + fb, flen);
                field[flen] = '\0';
                pr = zdist_parse_double(field, &v);
            }
            if (pr < 0) {
                r = zdist_error_set(err, -EBADMSG, "'%s': line %d, column %lld (byte %zu): '%.*s' is not a number",
                                    path, line, (long long) col + 1, fb, (int) (flen > 40 ? 40 : flen), text + fb);
                if (err) {
                    err->line = line;
                    err->column = (int) col + 1;
                }
                goto out;
            }
            if (ncols < 0 || col != label_col) {
                /* ncols < 0: first row, label column not known yet; fixed up below. */
                float f = (float) v;
                if ((r = s_vec_push(&feats, &f)) < 0)
                    goto oom;
            } else {
                char lab[4];
                if (s_label(v, opts->label_dtype, lab) < 0) {
                    r = zdist_error_set(err, -EINVAL, "'%s': line %d, column %lld (byte %zu): label '%s' is not a "
                                        "class number (an integer >= 0); use float32 labels for regression",
                                        path, line, (long long) col + 1, fb, field);
                    goto out;
                }
                if ((r = s_vec_push(&labels, lab)) < 0)
                    goto oom;
            }
            col++;
            if (fe >= e)
                break;
            fb = fe + 1;
        }
        if (ncols < 0) {
            /* The first row fixes the width and where the label is. */
            ncols = col;
            label_col = opts->label_column < 0 ? ncols + opts->label_column : opts->label_column;
            if (ncols < 2 || label_col < 0 || label_col >= ncols) {
                r = zdist_error_set(err, -EINVAL, "'%s': line %d has %lld columns: no column %d for the label, "
                                    "and at least one feature column is needed",
                                    path, line, (long long) ncols, opts->label_column);
                goto out;
            }
            float *row = feats.data;
            double v = row[label_col];
            char lab[4];
            if (s_label(v, opts->label_dtype, lab) < 0) {
                r = zdist_error_set(err, -EINVAL, "'%s': line %d, column %lld: label '%g' is not a class number "
                                    "(an integer >= 0); use float32 labels for regression",
                                    path, line, (long long) label_col + 1, v);
                goto out;
            }
            memmove(row + label_col, row + label_col + 1, (size_t) (ncols - label_col - 1) * sizeof(float));
            feats.len--;
            if ((r = s_vec_push(&labels, lab)) < 0)
                goto oom;
        } else if (col != ncols) {
            r = zdist_error_set(err, -EBADMSG, "'%s': line %d (byte %zu): %lld columns, but the first row has %lld",
                                path, line, b, (long long) col, (long long) ncols);
            if (err)
                err->line = line;
            goto out;
        }
        nrows++;
        if (nrows > S_INPUT_MAX_EXAMPLES) {
            r = zdist_error_set(err, -EFBIG, "'%s': more than %lld rows", path, (long long) S_INPUT_MAX_EXAMPLES);
            goto out;
        }
    }
    if (nrows == 0) {
        r = zdist_error_set(err, -EBADMSG, "'%s': no data rows", path);
        goto out;
    }
    zdist_dataset_t *ds = calloc(1, sizeof *ds);
    if (!ds)
        goto oom;
    ds->n = nrows;
    ds->dim = ncols - 1;
    ds->label_dtype = opts->label_dtype;
    ds->features = feats.data;
    ds->labels = labels.data;
    feats.data = labels.data = NULL;
    if ((r = zdist_dataset_finish_labels_(ds, path, err)) < 0) {
        zdist_dataset_destroy(&ds);
        goto out;
    }
    *ret = ds;
    r = 0;
    goto out;
oom:
    r = zdist_error_set(err, -ENOMEM, "'%s': out of memory", path);
out:
    free(feats.data);
    free(labels.data);
    free(text);
    return r;
}

/* ---------------------------------------------------------------------- libsvm */

static bool
s_space(char c)
{
    return c == ' ' || c == '\t';
}

int
zdist_dataset_read_libsvm(const char *path, int64_t dim, zdist_dataset_t **ret, zdist_error_t *err)
{
    if (!path || !ret)
        return zdist_error_set(err, -EINVAL, "libsvm: no path");
    if (dim < 1 || dim > S_INPUT_MAX_DIM)
        return zdist_error_set(err, -EINVAL, "libsvm: dimension %lld: it must be in 1..%lld", (long long) dim,
                               (long long) S_INPUT_MAX_DIM);
    char *text = NULL;
    size_t len = 0;
    int r = zdist_dataset_slurp_(path, &text, &len, err);
    if (r < 0)
        return r;
    s_vec_t offsets = {.item = sizeof(int64_t)}, ids = {.item = sizeof(int64_t)}, vals = {.item = sizeof(float)},
            labels = {.item = 4};
    int64_t zero = 0, max_nnz = 0;
    if ((r = s_vec_push(&offsets, &zero)) < 0)
        goto oom;
    char tok[128];
    size_t at = 0;
    int line = 0;
    while (at < len) {
        size_t b, e;
        at = s_next_line(text, len, at, &b, &e);
        line++;
        for (size_t i = b; i < e; i++)
            if (text[i] == '#') {
                e = i;
                break;
            }
        size_t p = b;
        while (p < e && s_space(text[p]))
            p++;
        if (p == e)
            continue;
        bool first = true;
        int64_t nnz = 0;
        while (p < e) {
            size_t tb = p;
            while (p < e && !s_space(text[p]))
                p++;
            size_t tlen = p - tb;
            const char *what = first ? "label" : "feature";
            if (tlen >= sizeof tok)
                goto bad;
            memcpy(tok, text + tb, tlen);
            tok[tlen] = '\0';
            if (first) {
                double v;
                if (zdist_parse_double(tok, &v) < 0)
                    goto bad;
                if (v != -1.0 && v != 0.0 && v != 1.0) {
                    r = zdist_error_set(err, -EINVAL, "'%s': line %d (byte %zu): label '%s' is not binary: only "
                                        "-1/+1 or 0/1 labels are supported",
                                        path, line, tb, tok);
                    if (err)
                        err->line = line;
                    goto out;
                }
                int32_t y = v > 0 ? 1 : 0;
                if ((r = s_vec_push(&labels, &y)) < 0)
                    goto oom;
                first = false;
            } else {
                char *colon = strchr(tok, ':');
                int64_t idx;
                double v;
                if (!colon)
                    goto bad;
                *colon = '\0';
                if (zdist_parse_int64(tok, 0, INT64_MAX, &idx) < 0 || zdist_parse_double(colon + 1, &v) < 0) {
                    *colon = ':';
                    goto bad;
                }
                int64_t id = idx % dim;
                float f = (float) v;
                if ((r = s_vec_push(&ids, &id)) < 0 || (r = s_vec_push(&vals, &f)) < 0)
                    goto oom;
                nnz++;
            }
            while (p < e && s_space(text[p]))
                p++;
            continue;
        bad:
            r = zdist_error_set(err, -EBADMSG, "'%s': line %d (byte %zu): bad %s '%.*s', expected %s", path, line,
                                tb, what, (int) (tlen > 40 ? 40 : tlen), text + tb,
                                first ? "a number" : "index:value");
            if (err)
                err->line = line;
            goto out;
        }
        int64_t end = (int64_t) ids.len;
        if ((r = s_vec_push(&offsets, &end)) < 0)
            goto oom;
        if (nnz > max_nnz)
            max_nnz = nnz;
        if ((int64_t) labels.len > S_INPUT_MAX_EXAMPLES) {
            r = zdist_error_set(err, -EFBIG, "'%s': more than %lld rows", path, (long long) S_INPUT_MAX_EXAMPLES);
            goto out;
        }
    }
    if (labels.len == 0) {
        r = zdist_error_set(err, -EBADMSG, "'%s': no data rows", path);
        goto out;
    }
    zdist_dataset_t *ds = calloc(1, sizeof *ds);
    if (!ds)
        goto oom;
    ds->n = (int64_t) labels.len;
    ds->dim = dim;
    ds->sparse = true;
    ds->label_dtype = ZDIST_DTYPE_INT32;
    ds->num_classes = 2;
    ds->max_row_nnz = max_nnz;
    ds->labels = labels.data;
    ds->row_offsets = offsets.data;
    /* Keep non-NULL arrays even with no entries. */
    ds->feature_ids = ids.data ? ids.data : malloc(sizeof(int64_t));
    ds->feature_values = vals.data ? vals.data : malloc(sizeof(float));
    labels.data = offsets.data = ids.data = vals.data = NULL;
    if (!ds->feature_ids || !ds->feature_values) {
        zdist_dataset_destroy(&ds);
        goto oom;
    }
    *ret = ds;
    r = 0;
    goto out;
oom:
    r = zdist_error_set(err, -ENOMEM, "'%s': out of memory", path);
out:
    free(offsets.data);
    free(ids.data);
    free(vals.data);
    free(labels.data);
    free(text);
    return r;
}
