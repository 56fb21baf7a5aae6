/* zdist onnx: an ONNX model (graph, initializers, typed inputs and outputs) built in memory and written atomically. */
#ifndef ZDIST_ONNX_H
#define ZDIST_ONNX_H

#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ONNX protobuf schema (proto/onnx.proto, the subset zdist writes) stays
   inside libzdist's wire layer like every generated type: callers describe
   the graph with these calls and never see the messages.

   The builder records the first failure (-ENOMEM, -EINVAL for a bad
   argument) and every later call returns it; zdist_onnx_write reports it.
   Names are copied; tensors' data is copied. */

#define ZDIST_ONNX_IR_VERSION 8 /* ONNX 1.10 .. 1.12 read it; opset up to 17 */
#define ZDIST_ONNX_BATCH (-1)   /* a dimension written as the symbol "N" (dynamic batch) */
#define ZDIST_ONNX_WIDTH (-2)   /* one written as "K" (a sparse example's features, padded) */

typedef struct zdist_onnx_t zdist_onnx_t;

typedef enum {
    ZDIST_ONNX_ATTR_INT = 0,
    ZDIST_ONNX_ATTR_FLOAT,
    ZDIST_ONNX_ATTR_INTS,
} zdist_onnx_attr_kind_t;

/* One attribute of a node: i (INT), f (FLOAT) or ints[n] (INTS, borrowed). */
typedef struct {
    const char *name;
    zdist_onnx_attr_kind_t kind;
    int64_t i;
    float f;
    const int64_t *ints;
    int n;
} zdist_onnx_attr_t;

/* A model importing the default domain at `opset`; graph_name and
   doc (may be NULL) describe it. NULL when out of memory. */
ZDIST_EXPORT zdist_onnx_t *zdist_onnx_new(const char *graph_name, int64_t opset, const char *doc);
ZDIST_EXPORT void zdist_onnx_destroy(zdist_onnx_t **self_p);

/* A graph input or output: a tensor of dtype (FLOAT32, INT32 or INT64)
   with rank dims, ZDIST_ONNX_BATCH for the dynamic batch dimension,
   ZDIST_ONNX_WIDTH for a dynamic second one. */
ZDIST_EXPORT int zdist_onnx_input(zdist_onnx_t *self, const char *name, zdist_dtype_t dtype, const int64_t *dims,
                                  int rank);
ZDIST_EXPORT int zdist_onnx_output(zdist_onnx_t *self, const char *name, zdist_dtype_t dtype, const int64_t *dims,
                                   int rank);
/* A constant (an initializer): rank dims (none negative), data the
   elements in row-major order (copied). */
ZDIST_EXPORT int zdist_onnx_initializer(zdist_onnx_t *self, const char *name, zdist_dtype_t dtype,
                                        const int64_t *dims, int rank, const void *data);
/* A node of the default domain: op_type, its input and output names in
   order (an empty string: an optional input left out), attributes. */
ZDIST_EXPORT int zdist_onnx_node(zdist_onnx_t *self, const char *op_type, const char *const *inputs, int nin,
                                 const char *const *outputs, int nout, const zdist_onnx_attr_t *attrs, int nattrs);
/* Imports operator set `domain` (not "": the default one is
   zdist_onnx_new's) at version, e.g. "ai.onnx.ml" 2 for LabelEncoder;
   once per domain (again at the same version: nothing). */
ZDIST_EXPORT int zdist_onnx_import(zdist_onnx_t *self, const char *domain, int64_t version);
/* zdist_onnx_node of an imported domain's operator ("": the default one). */
ZDIST_EXPORT int zdist_onnx_node_domain(zdist_onnx_t *self, const char *domain, const char *op_type,
                                        const char *const *inputs, int nin, const char *const *outputs, int nout,
                                        const zdist_onnx_attr_t *attrs, int nattrs);
/* The first failure so far (0: none). */
ZDIST_EXPORT int zdist_onnx_status(const zdist_onnx_t *self);

/* The model serialized (ModelProto): *ret_buf is the caller's to free. */
ZDIST_EXPORT int zdist_onnx_encode(zdist_onnx_t *self, uint8_t **ret_buf, size_t *ret_len, zdist_error_t *err);
/* Writes the model to path crash-safe (zdist_file_write: a temp file
   beside it, fsync, rename): path holds the whole model or what it held
   before, never part of one. Negative errno with err naming the path. */
ZDIST_EXPORT int zdist_onnx_write(zdist_onnx_t *self, const char *path, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
