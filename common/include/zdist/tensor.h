/* zdist tensors: dtypes, shapes (rank <= 8), overflow-checked byte sizes. */
#ifndef ZDIST_TENSOR_H
#define ZDIST_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZDIST_MAX_RANK 8

/* Data dtypes travel on the wire (values match proto/common.proto DType).
   The others exist for partition sizing only, as TensorFlow's dtype sizes. */
typedef enum {
    ZDIST_DTYPE_INVALID = 0,
    ZDIST_DTYPE_FLOAT32 = 1,
    ZDIST_DTYPE_FLOAT64 = 2,
    ZDIST_DTYPE_INT32 = 3,
    ZDIST_DTYPE_INT64 = 4,
    ZDIST_DTYPE_UINT8 = 5,
    /* sizing-only dtypes */
    ZDIST_DTYPE_FLOAT16 = 100,
    ZDIST_DTYPE_BFLOAT16,
    ZDIST_DTYPE_INT8,
    ZDIST_DTYPE_INT16,
    ZDIST_DTYPE_UINT16,
    ZDIST_DTYPE_UINT32,
    ZDIST_DTYPE_UINT64,
    ZDIST_DTYPE_BOOL,
    ZDIST_DTYPE_COMPLEX64,
    ZDIST_DTYPE_COMPLEX128,
    ZDIST_DTYPE_STRING,
} zdist_dtype_t;

/* TensorFlow's name ("float32", also "float", "double", "half") -> dtype;
   ZDIST_DTYPE_INVALID when unknown. */
ZDIST_EXPORT zdist_dtype_t zdist_dtype_from_name(const char *name);
/* Canonical TensorFlow name, "invalid" for anything else. */
ZDIST_EXPORT const char *zdist_dtype_name(zdist_dtype_t dtype);
/* Bytes per element; 0 for STRING (use bytes_per_string) and INVALID. */
ZDIST_EXPORT size_t zdist_dtype_size(zdist_dtype_t dtype);
/* Bytes per element, strings counted as bytes_per_string. 0 if invalid. */
ZDIST_EXPORT size_t zdist_dtype_size_for_sizing(zdist_dtype_t dtype, int64_t bytes_per_string);
/* True for the five dtypes that carry data (on the wire, in shards). */
ZDIST_EXPORT bool zdist_dtype_is_data(zdist_dtype_t dtype);
/* Comma-separated list of accepted names, for error messages. */
ZDIST_EXPORT const char *zdist_dtype_names(void);

typedef struct {
    int rank;
    int64_t dims[ZDIST_MAX_RANK];
} zdist_shape_t;

/* Fills shape from dims; -EINVAL if rank is outside 0..8 or a dim is negative. */
ZDIST_EXPORT int zdist_shape_init(zdist_shape_t *shape, int rank, const int64_t *dims);
/* Number of elements (1 for rank 0); -EOVERFLOW if it does not fit int64. */
ZDIST_EXPORT int zdist_shape_num_elements(const zdist_shape_t *shape, int64_t *ret_n);
ZDIST_EXPORT bool zdist_shape_equal(const zdist_shape_t *a, const zdist_shape_t *b);
/* "[3,4]" into buf; returns buf. */
ZDIST_EXPORT char *zdist_shape_format(const zdist_shape_t *shape, char *buf, size_t size);
/* Parses "D0[,D1,...]" (non-negative integers); fills err naming the problem. */
ZDIST_EXPORT int zdist_shape_parse(const char *text, zdist_shape_t *ret_shape, zdist_error_t *err);

/* Bytes of a dense tensor: elements x dtype size; -EOVERFLOW when it does not
   fit size_t, -EINVAL for a dtype without a fixed size (string, invalid). */
ZDIST_EXPORT int zdist_tensor_byte_size(zdist_dtype_t dtype, const zdist_shape_t *shape, size_t *ret_bytes);

/* A view of a dense, contiguous, little-endian tensor. It does not own data. */
typedef struct {
    const char *name; /* borrowed; may be NULL */
    zdist_dtype_t dtype;
    zdist_shape_t shape;
    void *data;
    size_t nbytes;
} zdist_tensor_t;

#ifdef __cplusplus
}
#endif
#endif
