/* zdist datasets (internal): the dataset's layout and what the readers
   build one with. dataset.c owns them; the readers (input_idx.c,
   input_csv.c, input_synthetic.c) and the pipeline (input.c,
   input_rebatch.c) use them, and dataset.c calls none of those. */
#ifndef ZDIST_DATASET_H
#define ZDIST_DATASET_H

#include <stdint.h>

#include "zdist/input.h"

struct zdist_dataset_t {
    int64_t n;
    int64_t dim;
    bool sparse;
    zdist_dtype_t label_dtype; /* INT32 or FLOAT32 */
    int num_classes;
    float *features;      /* dense [n * dim] */
    void *labels;         /* [n] int32_t or float */
    int64_t *row_offsets; /* sparse [n + 1] */
    int64_t *feature_ids; /* sparse [nnz] */
    float *feature_values;
    int64_t max_row_nnz;
    /* TFRecord: named columns over all n examples (names and arrays owned),
       the longest ragged row of each (0 for fixed ones), and each example's
       origin (zdist_dataset_origins). */
    int ncols;
    zdist_step_column_t *cols;
    int64_t *col_max_row;
    int64_t *origin;
};

/* Limits on what a reader accepts: a corrupt header must not make us
   allocate without bound. */
#define S_INPUT_MAX_EXAMPLES (INT64_C(1) << 31)
#define S_INPUT_MAX_DIM (INT64_C(1) << 24)
#define S_INPUT_MAX_FILE_BYTES (INT64_C(4) << 30)

/* An empty dataset with arrays for n examples (dense: n*dim features;
   sparse: row_offsets only, entries added by the reader). NULL on ENOMEM or
   overflow. */
zdist_dataset_t *zdist_dataset_alloc_(int64_t n, int64_t dim, bool sparse, zdist_dtype_t label_dtype);
/* Sets num_classes from int32 labels; -EINVAL (message names `what`) when a
   label is negative. */
int zdist_dataset_finish_labels_(zdist_dataset_t *ds, const char *what, zdist_error_t *err);
/* Appends b's examples to a (same kind, dim, label dtype). */
int zdist_dataset_concat_(zdist_dataset_t *a, const zdist_dataset_t *b);

/* TFRecord files (input_tfrecord.c): the files of spec->paths whose index
   k has keep[k] (NULL: all), parsed against spec's features into one
   dataset with columns. */
int zdist_dataset_read_tfrecord_(const zdist_input_spec_t *spec, const bool *keep, zdist_dataset_t **ret,
                                 zdist_error_t *err);

/* zlib's message without the "<fd:N>: " it prefixes for gzdopen'd files. */
const char *zdist_dataset_gz_why_(const char *msg);

/* Reads a whole file, gunzipping when it starts with 1f 8b, into a
   NUL-terminated buffer (*ret, caller frees; *ret_len excludes the NUL). */
int zdist_dataset_slurp_(const char *path, char **ret, size_t *ret_len, zdist_error_t *err);

#endif
