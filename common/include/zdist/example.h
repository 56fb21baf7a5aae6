/* zdist tf.train.Example records parsed into columns, as tf.io.parse_example
   does with FixedLenFeature and RaggedFeature / VarLenFeature specs. */
#ifndef ZDIST_EXAMPLE_H
#define ZDIST_EXAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The record is TensorFlow's example.proto and feature.proto:
     Example { Features features = 1; }
     Features { map<string, Feature> feature = 1; }
     Feature { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                            Int64List int64_list = 3; } }
     FloatList { repeated float value = 1 [packed = true]; }
     Int64List { repeated int64 value = 1 [packed = true]; }
   decoded without a protobuf library and without allocating per record;
   packed and unpacked lists are both read, unknown fields skipped, and a
   key that occurs twice takes its last value (protobuf's map rule, as
   TensorFlow's parser does).

   Thread rules: a parser is used by one thread at a time. */

typedef enum {
    ZDIST_FEATURE_FIXED = 0, /* tf.io.FixedLenFeature(shape, dtype, default_value) */
    ZDIST_FEATURE_VAR = 1,   /* tf.io.RaggedFeature(dtype) / VarLenFeature: any count per row */
} zdist_feature_kind_t;

#define ZDIST_FEATURE_MAX_RANK 4
#define ZDIST_FEATURE_MAX 1024      /* features in one spec */
#define ZDIST_FEATURE_NAME_MAX 256  /* bytes of a feature's name */

typedef struct {
    const char *name; /* copied by zdist_example_parser_new */
    zdist_feature_kind_t kind;
    zdist_dtype_t dtype; /* ZDIST_DTYPE_FLOAT32 or ZDIST_DTYPE_INT64 */
    /* FIXED only: */
    int rank; /* 0 (a scalar) .. ZDIST_FEATURE_MAX_RANK */
    int64_t shape[ZDIST_FEATURE_MAX_RANK];
    bool has_default;      /* without one, a record lacking the feature is an error */
    double default_float;  /* the default, every element (FLOAT32) */
    int64_t default_int;   /* the default, every element (INT64) */
} zdist_feature_spec_t;

/* One feature's values for the rows parsed so far. FIXED: `values` holds
   rows x elems values, row-major (float or int64_t by dtype), row_splits
   NULL. VAR: `values` holds row_splits[rows] values and row i's are
   values[row_splits[i] .. row_splits[i+1]) (tf.RaggedTensor's row_splits). */
typedef struct {
    zdist_dtype_t dtype;
    zdist_feature_kind_t kind;
    int64_t elems; /* FIXED: values per row, the product of the shape */
    void *values;
    int64_t *row_splits;
} zdist_feature_column_t;

typedef struct zdist_example_parser_t zdist_example_parser_t;

/* A parser for n specs (1 .. ZDIST_FEATURE_MAX). Refused (-EINVAL, err
   names the feature and the field) for an empty or repeated name, a
   dtype other than float32/int64, a negative dimension or rank out of
   range, or a product of dimensions over 2^24. NULL with err filled. */
ZDIST_EXPORT zdist_example_parser_t *zdist_example_parser_new(const zdist_feature_spec_t *specs, int n,
                                                              zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. */
ZDIST_EXPORT void zdist_example_parser_destroy(zdist_example_parser_t **self_p);

/* Empties the batch (rows = 0), keeping the memory for the next. */
ZDIST_EXPORT void zdist_example_parser_clear(zdist_example_parser_t *self);

/* Parses one serialized Example and appends it as the next row of every
   column. -EINVAL with TensorFlow's text, the row index being the row it
   would have been, and nothing appended:
     "Name: <unknown>, Feature: C1 (data type: int64) is required but could not be found."
     "Name: <unknown>, Key: I1, Index: 3.  Data types don't match. Data type: int64 but expected type: float"
     "Name: <unknown>, Key: I1, Index: 3.  Number of float values != expected.  Values size: 2 but output shape: []"
     "Name: <unknown>, Key: C1, Index: 3.  Data types don't match. Expected type: int64, Actual type: float" (VAR)
     "Name: <unknown>, Key: I1, Index: 3.  Can't parse serialized Example."
     "Could not parse example input" (the Example itself is not protobuf)
   A FIXED feature whose Feature is empty (no list) counts as missing, as
   in TensorFlow. -ENOMEM when the batch cannot grow. */
ZDIST_EXPORT int zdist_example_parser_add(zdist_example_parser_t *self, const uint8_t *data, size_t len,
                                          zdist_error_t *err);

ZDIST_EXPORT int64_t zdist_example_parser_rows(const zdist_example_parser_t *self);
ZDIST_EXPORT int zdist_example_parser_count(const zdist_example_parser_t *self);
/* Column i (0 <= i < count), in spec order; borrowed, valid until the next
   add, clear or destroy. */
ZDIST_EXPORT const zdist_feature_column_t *zdist_example_parser_column(const zdist_example_parser_t *self, int i);
/* The index of the feature named `name`, or -1. */
ZDIST_EXPORT int zdist_example_parser_find(const zdist_example_parser_t *self, const char *name);

/* ------------------------------------------------------------------------ */
/* Writing                                                                    */

/* One feature of an Example to write: count values of dtype (FLOAT32 or
   INT64) as a packed FloatList / Int64List (count 0: an empty list). */
typedef struct {
    const char *name;
    zdist_dtype_t dtype;
    const void *values;
    int64_t count;
} zdist_example_feature_t;

/* Serializes an Example holding the n features, in that order, into buf
   (cap bytes): what tf.train.Example(...).SerializeToString() holds for the
   same features (a writer may order map entries differently; a reader
   does not care). Returns the byte count, or -ENOSPC when it does not fit
   (*ret_needed then says how many it takes; may be NULL), -EINVAL for a
   dtype other than float32/int64. */
ZDIST_EXPORT int64_t zdist_example_encode(const zdist_example_feature_t *features, int n, uint8_t *buf, size_t cap,
                                          size_t *ret_needed);

#ifdef __cplusplus
}
#endif

#endif
