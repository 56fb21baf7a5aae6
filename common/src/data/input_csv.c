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

static int
s_oom(const char *path, zdist_error_t *err)
{
    return zdist_error_set(err, -ENOMEM, "'%s': out of memory", path);
}

/* A CSV file being read: the columns so far, and where the label is. */
typedef struct {
    const char *path;
    const zdist_csv_options_t *opts;
    s_vec_t feats, labels;
    int64_t ncols, label_col; /* -1 until the first row fixes them */
} s_csv_t;

/* The fields of one line [b, e) into c's columns; *ret_col: how many. */
static int
s_csv_fields(s_csv_t *c, const char *text, size_t b, size_t e, int line, int64_t *ret_col, zdist_error_t *err)
{
    char field[128];
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
            int r = zdist_error_set(err, -EBADMSG, "'%s': line %d, column %lld (byte %zu): '%.*s' is not a number",
                                    c->path, line, (long long) col + 1, fb, (int) (flen > 40 ? 40 : flen), text + fb);
            if (err) {
                err->line = line;
                err->column = (int) col + 1;
            }
            return r;
        }
        if (c->ncols < 0 || col != c->label_col) {
            /* ncols < 0: first row, label column not known yet; fixed up by s_csv_first_row. */
            float f = (float) v;
            if (s_vec_push(&c->feats, &f) < 0)
                return s_oom(c->path, err);
        } else {
            char lab[4];
            if (s_label(v, c->opts->label_dtype, lab) < 0)
                return zdist_error_set(err, -EINVAL, "'%s': line %d, column %lld (byte %zu): label '%s' is not a "
                                       "class number (an integer >= 0); use float32 labels for regression",
                                       c->path, line, (long long) col + 1, fb, field);
            if (s_vec_push(&c->labels, lab) < 0)
                return s_oom(c->path, err);
        }
        col++;
        if (fe >= e)
            break;
        fb = fe + 1;
    }
    *ret_col = col;
    return 0;
}

/* The first row (ncols columns, all taken as features) fixes the width and
   where the label is: its label moves from the features to the labels. */
static int
s_csv_first_row(s_csv_t *c, int64_t ncols, int line, zdist_error_t *err)
{
    c->ncols = ncols;
    c->label_col = c->opts->label_column < 0 ? ncols + c->opts->label_column : c->opts->label_column;
    int64_t label_col = c->label_col;
    if (ncols < 2 || label_col < 0 || label_col >= ncols)
        return zdist_error_set(err, -EINVAL, "'%s': line %d has %lld columns: no column %d for the label, "
                               "and at least one feature column is needed",
                               c->path, line, (long long) ncols, c->opts->label_column);
    float *row = c->feats.data;
    double v = row[label_col];
    char lab[4];
    if (s_label(v, c->opts->label_dtype, lab) < 0)
        return zdist_error_set(err, -EINVAL, "'%s': line %d, column %lld: label '%g' is not a class number "
                               "(an integer >= 0); use float32 labels for regression",
                               c->path, line, (long long) label_col + 1, v);
    memmove(row + label_col, row + label_col + 1, (size_t) (ncols - label_col - 1) * sizeof(float));
    c->feats.len--;
    return s_vec_push(&c->labels, lab) < 0 ? s_oom(c->path, err) : 0;
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

    s_csv_t c = {.path = path, .opts = opts, .feats = {.item = sizeof(float)}, .labels = {.item = 4},
                 .ncols = -1, .label_col = -1};
    int64_t nrows = 0;
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
        if ((r = s_csv_fields(&c, text, b, e, line, &col, err)) < 0)
            goto out;
        if (c.ncols < 0) {
            if ((r = s_csv_first_row(&c, col, line, err)) < 0)
                goto out;
        } else if (col != c.ncols) {
            r = zdist_error_set(err, -EBADMSG, "'%s': line %d (byte %zu): %lld columns, but the first row has %lld",
                                path, line, b, (long long) col, (long long) c.ncols);
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
    if (!ds) {
        r = s_oom(path, err);
        goto out;
    }
    ds->n = nrows;
    ds->dim = c.ncols - 1;
    ds->label_dtype = opts->label_dtype;
    ds->features = c.feats.data;
    ds->labels = c.labels.data;
    c.feats.data = c.labels.data = NULL;
    if ((r = zdist_dataset_finish_labels_(ds, path, err)) < 0) {
        zdist_dataset_destroy(&ds);
        goto out;
    }
    *ret = ds;
    r = 0;
out:
    free(c.feats.data);
    free(c.labels.data);
    free(text);
    return r;
}

/* ---------------------------------------------------------------------- libsvm */

static bool
s_space(char c)
{
    return c == ' ' || c == '\t';
}

/* A LIBSVM file being read: CSR rows of index:value pairs, binary labels. */
typedef struct {
    const char *path;
    int64_t dim;
    bool raw; /* indices any int64, kept as they are */
    s_vec_t offsets, ids, vals, labels;
    int64_t max_nnz;
} s_svm_t;

/* One token at [tb, tb + tlen): the label first, then index:value pairs.
   -EBADMSG (nothing set: the caller names the token), or an error set. */
static int
s_svm_token(s_svm_t *l, const char *text, size_t tb, size_t tlen, bool first, int line, int64_t *nnz,
            zdist_error_t *err)
{
    char tok[128];
    if (tlen >= sizeof tok)
        return -EBADMSG;
    memcpy(tok, text + tb, tlen);
    tok[tlen] = '\0';
    double v;
    if (first) {
        if (zdist_parse_double(tok, &v) < 0)
            return -EBADMSG;
        if (v != -1.0 && v != 0.0 && v != 1.0) {
            int r = zdist_error_set(err, -EINVAL, "'%s': line %d (byte %zu): label '%s' is not binary: only "
                                    "-1/+1 or 0/1 labels are supported",
                                    l->path, line, tb, tok);
            if (err)
                err->line = line;
            return r;
        }
        int32_t y = v > 0 ? 1 : 0;
        return s_vec_push(&l->labels, &y) < 0 ? s_oom(l->path, err) : 0;
    }
    char *colon = strchr(tok, ':');
    int64_t idx;
    if (!colon)
        return -EBADMSG;
    *colon = '\0';
    if (zdist_parse_int64(tok, l->raw ? INT64_MIN : 0, INT64_MAX, &idx) < 0 || zdist_parse_double(colon + 1, &v) < 0)
        return -EBADMSG;
    int64_t id = l->raw ? idx : idx % l->dim;
    float f = (float) v;
    if (s_vec_push(&l->ids, &id) < 0 || s_vec_push(&l->vals, &f) < 0)
        return s_oom(l->path, err);
    (*nnz)++;
    return 0;
}

/* One line's tokens [p, e) (its comment cut off), then the row's end offset. */
static int
s_svm_line(s_svm_t *l, const char *text, size_t p, size_t e, int line, zdist_error_t *err)
{
    bool first = true;
    int64_t nnz = 0;
    while (p < e) {
        size_t tb = p;
        while (p < e && !s_space(text[p]))
            p++;
        size_t tlen = p - tb;
        int r = s_svm_token(l, text, tb, tlen, first, line, &nnz, err);
        if (r == -EBADMSG) {
            r = zdist_error_set(err, -EBADMSG, "'%s': line %d (byte %zu): bad %s '%.*s', expected %s", l->path, line,
                                tb, first ? "label" : "feature", (int) (tlen > 40 ? 40 : tlen), text + tb,
                                first ? "a number" : "index:value");
            if (err)
                err->line = line;
        }
        if (r < 0)
            return r;
        first = false;
        while (p < e && s_space(text[p]))
            p++;
    }
    int64_t end = (int64_t) l->ids.len;
    if (s_vec_push(&l->offsets, &end) < 0)
        return s_oom(l->path, err);
    if (nnz > l->max_nnz)
        l->max_nnz = nnz;
    return 0;
}

int
zdist_dataset_read_libsvm(const char *path, int64_t dim, zdist_dataset_t **ret, zdist_error_t *err)
{
    return zdist_dataset_read_libsvm_ids(path, dim, false, ret, err);
}

int
zdist_dataset_read_libsvm_ids(const char *path, int64_t dim, bool raw_ids, zdist_dataset_t **ret, zdist_error_t *err)
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
    s_svm_t l = {.path = path, .dim = dim, .raw = raw_ids, .offsets = {.item = sizeof(int64_t)}, .ids = {.item = sizeof(int64_t)},
                 .vals = {.item = sizeof(float)}, .labels = {.item = 4}};
    int64_t zero = 0;
    if (s_vec_push(&l.offsets, &zero) < 0) {
        r = s_oom(path, err);
        goto out;
    }
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
        if ((r = s_svm_line(&l, text, p, e, line, err)) < 0)
            goto out;
        if ((int64_t) l.labels.len > S_INPUT_MAX_EXAMPLES) {
            r = zdist_error_set(err, -EFBIG, "'%s': more than %lld rows", path, (long long) S_INPUT_MAX_EXAMPLES);
            goto out;
        }
    }
    if (l.labels.len == 0) {
        r = zdist_error_set(err, -EBADMSG, "'%s': no data rows", path);
        goto out;
    }
    zdist_dataset_t *ds = calloc(1, sizeof *ds);
    if (!ds) {
        r = s_oom(path, err);
        goto out;
    }
    ds->n = (int64_t) l.labels.len;
    ds->dim = dim;
    ds->sparse = true;
    ds->label_dtype = ZDIST_DTYPE_INT32;
    ds->num_classes = 2;
    ds->max_row_nnz = l.max_nnz;
    ds->labels = l.labels.data;
    ds->row_offsets = l.offsets.data;
    /* Keep non-NULL arrays even with no entries. */
    ds->feature_ids = l.ids.data ? l.ids.data : malloc(sizeof(int64_t));
    ds->feature_values = l.vals.data ? l.vals.data : malloc(sizeof(float));
    l.labels.data = l.offsets.data = l.ids.data = l.vals.data = NULL;
    if (!ds->feature_ids || !ds->feature_values) {
        zdist_dataset_destroy(&ds);
        r = s_oom(path, err);
        goto out;
    }
    *ret = ds;
    r = 0;
out:
    free(l.offsets.data);
    free(l.ids.data);
    free(l.vals.data);
    free(l.labels.data);
    free(text);
    return r;
}
