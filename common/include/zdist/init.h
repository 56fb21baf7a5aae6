/* zdist init: variable initializers whose values depend only on (seed, variable, global row, column). */
#ifndef ZDIST_INIT_H
#define ZDIST_INIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The initializers of tf.keras.initializers, the names job JSON and the ps
   protocol use. One type for models (zdist/step.h), the ps client and psd:
   values depend only on (seed, variable name, global row, column), so a
   variable is the same whatever its partitioning or strategy. */
typedef enum {
    ZDIST_INIT_ZEROS = 0,
    ZDIST_INIT_ONES,
    ZDIST_INIT_CONSTANT,         /* value */
    ZDIST_INIT_RANDOM_UNIFORM,   /* [minval, maxval) */
    ZDIST_INIT_RANDOM_NORMAL,    /* mean, stddev */
    ZDIST_INIT_TRUNCATED_NORMAL, /* mean, stddev; redrawn beyond 2 stddev as TF */
    ZDIST_INIT_GLOROT_UNIFORM,   /* U(-limit, limit), limit = sqrt(6/(fan_in+fan_out)) */
} zdist_init_kind_t;

/* Fields not used by `kind` are ignored (and not compared). */
typedef struct {
    zdist_init_kind_t kind;
    double value;
    double minval, maxval;
    double mean, stddev;
} zdist_initializer_t;

/* "zeros", "ones", "constant", "random_uniform", "random_normal",
   "truncated_normal", "glorot_uniform"; "invalid" otherwise. */
ZDIST_EXPORT const char *zdist_init_kind_name(zdist_init_kind_t kind);
/* Name -> kind; -EINVAL for an unknown name. ret written only on success. */
ZDIST_EXPORT int zdist_init_kind_from_name(const char *name, zdist_init_kind_t *ret_kind);

/* Checks parameters and dtype: random initializers need float32/float64,
   stddev >= 0, minval <= maxval, finite numbers. -EINVAL with a message. */
ZDIST_EXPORT int zdist_init_validate(const zdist_initializer_t *init, zdist_dtype_t dtype, zdist_error_t *err);
/* Same kind and same parameters for that kind. */
ZDIST_EXPORT bool zdist_init_equal(const zdist_initializer_t *a, const zdist_initializer_t *b);

/* TF's _compute_fans on the FULL variable shape: rank 0 -> 1,1; rank 1 ->
   d0,d0; rank 2 -> d0,d1; rank > 2 -> d[-2]*rf, d[-1]*rf with rf the product
   of the leading dims. */
ZDIST_EXPORT void zdist_init_compute_fans(const zdist_shape_t *shape, double *ret_fan_in, double *ret_fan_out);
/* glorot_uniform's limit: sqrt(3 / max(1, (fan_in + fan_out) / 2)). */
ZDIST_EXPORT double zdist_init_glorot_limit(const zdist_shape_t *shape);

/* Fills rows [row_offset, row_offset + rows) of a variable of full shape
   `shape` (row = slice along dim 0; a scalar is one row) into buf, row-major.
   buf_bytes must equal rows x row elements x dtype size. Values depend only
   on (seed, name, global row, column), so any sharding yields the same
   variable. -EINVAL (message) for bad dtype/parameters/ranges/sizes. */
ZDIST_EXPORT int zdist_init_fill(const zdist_initializer_t *init, uint64_t seed, const char *name, zdist_dtype_t dtype,
                  const zdist_shape_t *shape, int64_t row_offset, int64_t rows, void *buf,
                  size_t buf_bytes, zdist_error_t *err);

/* One row of a table without a fixed row count (a dynamic embedding on
   the psd): the row zdist_init_fill would write for global row `row`, for
   any int64 row (a row in [0, shape->dims[0]) gets bitwise the values
   zdist_init_fill gives it; outside that range the same formula goes on,
   the row taken as a uint64). shape gives the row's width (dims 1..) and
   glorot_uniform's fans; its dims[0] bounds nothing. So a row's initial
   values depend only on (seed, name, row): the same on any ps task and
   each time the row is created again. buf_bytes must equal the row's
   elements x dtype size. 0, or -EINVAL/-EOVERFLOW with a message. */
ZDIST_EXPORT int zdist_init_fill_row(const zdist_initializer_t *init, uint64_t seed, const char *name,
                                     zdist_dtype_t dtype, const zdist_shape_t *shape, int64_t row,
                                     void *buf, size_t buf_bytes, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
