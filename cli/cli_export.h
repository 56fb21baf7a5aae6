/* zdist export's parts (cli_export.c: the command, sequential models and the shared node helpers;
   cli_export_graph.c: functional models; cli_export_dyn.c: dynamic embedding tables). Private to cli/. */
#ifndef CLI_EXPORT_H
#define CLI_EXPORT_H

#include <stdbool.h>

#include "zdist/ckpt.h"
#include "zdist/error.h"
#include "zdist/model_spec.h"
#include "zdist/onnx.h"

/* An ONNX tensor name: a layer name (ZDIST_LAYER_NAME_MAX) with "/" and a suffix. */
#define CLI_EXPORT_NAME (ZDIST_LAYER_NAME_MAX + 64)

/* The graph being built: the tensor the next layer reads, its per-example
   rank and, for images, whether it is NCHW (ONNX's Conv and pools) or
   zdist's own NHWC. */
typedef struct {
    zdist_onnx_t *g;
    const zdist_ckpt_t *ck;
    const char *ckpt_dir; /* the checkpoint's directory: dynamic tables' files */
    const char *model;    /* the job's model name, for messages */
    char cur[CLI_EXPORT_NAME];
    int rank;             /* per example: 1 (features) or 3 (height, width, channels) */
    bool nchw;
    int seq;
    bool logits;
    bool sparse;          /* the inputs are "ids" and "values" [N, K] (libsvm examples, padded with value 0) */
    zdist_error_t *err;
} cli_export_t;

/* One node of named inputs to a fresh tensor (into out, CLI_EXPORT_NAME bytes). */
int cli_export_op(cli_export_t *x, const char *op, const char *const *in, int nin, const zdist_onnx_attr_t *attrs,
                  int nattrs, char *out);
/* A float32 initializer "LAYER/WHAT" from data; its name into ret_name. */
int cli_export_const(cli_export_t *x, const char *layer, const char *what, const int64_t *dims, int rank,
                     const float *data, char *ret_name);
/* An int64 constant (rank 0 or [1]) "LAYER/WHAT". */
int cli_export_const_i64(cli_export_t *x, const char *layer, const char *what, int64_t v, int rank, char *ret_name);
/* The checkpoint's variable LAYER/WHAT of n elements, or NULL with x->err set. */
const zdist_ckpt_var_t *cli_export_var(cli_export_t *x, const char *layer, const char *what, int64_t n);
/* An activation of x->cur (which becomes its result). */
int cli_export_activation(cli_export_t *x, zdist_activation_t act);
/* w [N, K] times rows [N, K, E] summed over K: [N, E]. */
int cli_export_weighted_sum(cli_export_t *x, const char *layer, const char *w, const char *rows, char *out);
/* The combiner's factor [N, 1] of each example's weights w [N, K]. */
int cli_export_combiner_scale(cli_export_t *x, const zdist_layer_spec_t *l, const char *w, char *out);
/* The activation the loss applies to the model's output. */
zdist_activation_t cli_export_output_activation(const zdist_model_spec_t *spec);
/* The graph's output from x->cur: "predictions" (or "logits"), [N, out...]. */
int cli_export_finish(cli_export_t *x, zdist_activation_t out_act, const zdist_shape_t *out);

/* Dynamic table l (an embedding with "dynamic") of the checkpoint: its
   rows and a zeros row after them as initializer "LAYER/embeddings"
   (name into ret_table), and ids (int64, any shape) mapped to their row
   by ai.onnx.ml's LabelEncoder, an id the table does not hold to the
   zeros row (what the psd looks up for an id never admitted or evicted):
   the row indices into ret_rows. */
int cli_export_dynamic_rows(cli_export_t *x, const zdist_layer_spec_t *l, const char *ids, char *ret_table,
                            char *ret_rows);

/* A functional model (zdist_model_graph_parse of params_json). */
int cli_export_graph(cli_export_t *x, const char *params_json);

#endif
