/* zdist model_spec: a Keras-like `sequential` or `functional` model (its layers, their shapes and parameter counts) parsed from a job. */
#ifndef ZDIST_MODEL_SPEC_H
#define ZDIST_MODEL_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The job's model section for the built-in `sequential` model:

       "model": {"name": "sequential", "input_shape": [28, 28, 1],
                 "layers": [{"conv2d": {"filters": 32, "kernel": 3, "activation": "relu"}},
                            {"max_pool2d": {"pool": 2}}, "flatten",
                            {"dense": {"units": 10}}],
                 "loss": "sparse_categorical_crossentropy"}

   This class knows the layers' fields, ranges and shapes (what the
   coordinator checks at submit and `zdist run --summary` prints); the
   worker's layer library (worker/layers/) computes them. Shapes are per
   example (Keras's batch dimension `None` left out), channels last. */

#define ZDIST_MODEL_SEQUENTIAL "sequential"
#define ZDIST_MODEL_FUNCTIONAL "functional"
#define ZDIST_MODEL_MAX_LAYERS 64
#define ZDIST_GRAPH_MAX_LAYERS 256 /* functional: layers */
#define ZDIST_GRAPH_MAX_INPUTS 256 /* functional: named inputs */
#define ZDIST_LAYER_MAX_INPUTS 64  /* functional: what one layer reads */
#define ZDIST_LAYER_NAME_MAX 64
#define ZDIST_MAX_LOGICAL_DEVICES 64 /* per replica, strategy tpu */

typedef enum {
    ZDIST_LAYER_DENSE = 0,  /* units, activation, use_bias */
    ZDIST_LAYER_CONV2D,     /* filters, kernel, strides, padding, activation, use_bias */
    ZDIST_LAYER_MAX_POOL2D, /* pool, strides, padding */
    ZDIST_LAYER_AVG_POOL2D, /* pool, strides, padding */
    ZDIST_LAYER_FLATTEN,
    ZDIST_LAYER_DROPOUT,    /* rate */
    ZDIST_LAYER_ACTIVATION, /* relu, tanh, sigmoid, softmax as layers of their own */
    ZDIST_LAYER_BATCH_NORM, /* momentum, epsilon, center, scale */
    ZDIST_LAYER_EMBEDDING,  /* input_dim, output_dim, combiner, first_id, dynamic: sparse input only */
    ZDIST_LAYER_CONCAT,     /* sequential: dense_features appended; functional: its inputs along the last axis */
    /* functional models only: */
    ZDIST_LAYER_HASHING,         /* num_bins (Keras's Hashing: FarmHash64 of the id's decimal text) */
    ZDIST_LAYER_DOT_INTERACTION, /* self_interaction, skip_gather, concat_dense (TFRS's DotInteraction) */
    ZDIST_LAYER_CROSS,           /* use_bias, diag_scale (TFRS's dcn.Cross, full rank) */
    ZDIST_LAYER_ADD,             /* Keras's Add */
} zdist_layer_kind_t;

typedef enum {
    ZDIST_ACT_LINEAR = 0,
    ZDIST_ACT_RELU,
    ZDIST_ACT_TANH,
    ZDIST_ACT_SIGMOID,
    ZDIST_ACT_SOFTMAX, /* over the last axis */
} zdist_activation_t;

typedef enum {
    ZDIST_PADDING_VALID = 0,
    ZDIST_PADDING_SAME, /* output = ceil(input / stride), TF's split (extra row/column at the end) */
} zdist_padding_t;

typedef enum {
    ZDIST_COMBINER_MEAN = 0, /* sum(value * row) / sum(value), tf.nn.embedding_lookup_sparse */
    ZDIST_COMBINER_SUM,      /* sum(value * row) */
    ZDIST_COMBINER_SQRTN,    /* sum(value * row) / sqrt(sum(value^2)) */
} zdist_combiner_t;

typedef enum {
    /* int32 class labels; the last layer gives logits (no activation) or
       softmax probabilities: either way the loss is computed from logits. */
    ZDIST_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY = 0,
    /* labels 0/1 (int32) or in [0, 1] (float32); one output unit, logits or sigmoid. */
    ZDIST_LOSS_BINARY_CROSSENTROPY,
    /* float32 (or int32) labels; one output unit. */
    ZDIST_LOSS_MEAN_SQUARED_ERROR,
} zdist_loss_t;

typedef struct {
    zdist_layer_kind_t kind;
    char name[ZDIST_LAYER_NAME_MAX]; /* Keras's: "conv2d", "conv2d_1", ... or the layer's "name" */
    zdist_activation_t activation;   /* dense, conv2d (applied after), activation layers */
    bool use_bias;                   /* dense, conv2d */
    int64_t units;                   /* dense */
    int64_t filters;                 /* conv2d */
    int64_t kernel[2];               /* conv2d: the kernel; pools: the pool (height, width) */
    int64_t strides[2];
    zdist_padding_t padding;
    int64_t pad_top, pad_left;       /* padding same: rows / columns added before */
    double rate;                     /* dropout */
    double momentum, epsilon;        /* batch_norm */
    bool center, scale;              /* batch_norm: beta, gamma */
    int64_t input_dim, output_dim;   /* embedding: rows (hash buckets) and width */
    int64_t first_id;                /* embedding: feature ids below it are not ids */
    zdist_combiner_t combiner;       /* embedding */
    /* embedding "dynamic" (no input_dim): a table without a vocabulary,
       its rows keyed by the ids as they are (zdist/step.h's
       zdist_dynamic_spec_t) */
    bool dynamic;
    uint32_t min_count;
    uint64_t evict_after_steps;
    double evict_l2_below;
    double dyn_default;              /* dynamic.default: every element an id without a row reads */
    int64_t dense_features;          /* concat */
    int64_t num_bins;                /* hashing */
    bool self_interaction, skip_gather, concat_dense; /* dot_interaction */
    double diag_scale;               /* cross */
    /* Functional models: what the layer reads (ninputs of them, in order:
       >= 0 a layer's index in `layers`, < 0 the model input -1 - i) and
       what it gives: float32 values, or int64 ids (a categorical input, a
       hashing), ragged when a var feature's (a row of ids per example,
       `out` then the shape of one id: ()). Sequential: 0, float32. */
    int ninputs;
    int inputs[ZDIST_LAYER_MAX_INPUTS];
    zdist_dtype_t dtype;
    bool ragged;
    zdist_shape_t in, out;           /* per-example shapes */
    int64_t params;                  /* Keras's "Param #" */
    int64_t non_trainable;           /* of which non-trainable (batch_norm's moving statistics) */
    /* Strategy tpu: the logical device the layer runs on (-1: replicated,
       TF's experimental_assign_to_logical_device), or its split over the
       logical devices (num_split 0: none; dense [units parts], conv2d
       [height parts, width parts] of its input; TF's
       experimental_split_to_logical_devices). */
    int logical_device;
    int split[2];
    int num_split;
} zdist_layer_spec_t;

/* A functional model's named input: one feature of the batch, or a group
   of fixed features of one dtype concatenated along their last axis. */
typedef struct {
    char name[ZDIST_LAYER_NAME_MAX];
    int nfeatures;
    char (*features)[ZDIST_LAYER_NAME_MAX]; /* the batch's column names */
    int64_t *widths;                        /* each one's values per example (0: var) */
    zdist_dtype_t dtype;                    /* float32 or int64 */
    bool ragged;                            /* one var feature */
    zdist_shape_t shape;                    /* per example: the feature's shape, or [sum of widths] */
} zdist_model_input_t;

typedef struct {
    zdist_shape_t input_shape;
    bool sparse_input; /* CSR examples (libsvm): the first layer is an embedding */
    int num_layers;
    zdist_layer_spec_t *layers; /* functional: in an order where a layer follows what it reads */
    zdist_loss_t loss;
    int64_t total_params, non_trainable_params;
    /* functional (zdist_model_graph_parse): its inputs; the output is the
       last layer */
    bool graph;
    int num_inputs;
    zdist_model_input_t *inputs;
} zdist_model_spec_t;

/* Parses a sequential model: a JSON object with "input_shape", "layers" and
   "loss" (the job's model section without its name; `comment` allowed),
   strictly. sparse_input: the data is CSR (libsvm). Every error is -EINVAL
   with err naming the layer and field ("model.layers[2].conv2d.kernel:
   must be an integer in 1..15 or [height, width], got 0 (an integer)"),
   shape errors included. *ret is zeroed first and released on error. */
ZDIST_EXPORT int zdist_model_spec_parse(const char *json_text, bool sparse_input, zdist_model_spec_t *ret,
                                        zdist_error_t *err);
/* A functional model (Keras's functional API): named inputs, layers that
   name what they read, one output, as a DAG:

       "model": {"name": "functional",
                 "inputs": [{"name": "dense_in", "features": ["I1", "I2", "I3"]}],
                 "layers": [{"name": "bottom", "dense": {"units": 16, "activation": "relu"},
                             "inputs": ["dense_in"]},
                            {"name": "h_C1", "hashing": {"num_bins": 1000}, "inputs": ["C1"]},
                            {"name": "emb_C1", "embedding": {"input_dim": 1000, "output_dim": 16},
                             "inputs": ["h_C1"]},
                            {"name": "interact", "dot_interaction": {"concat_dense": true},
                             "inputs": ["bottom", "emb_C1"]},
                            {"name": "top", "dense": {"units": 1}, "inputs": ["interact"]}],
                 "output": "top",
                 "loss": "binary_crossentropy"}

   json_text is that object without its name, plus "features": the
   dataset's feature spec without the label ({"I1": {"kind": "fixed",
   "dtype": "float32", "shape": []}, "C1": {"kind": "var", "dtype":
   "int64"}, ...}; zdist_job_parse puts it there).

   The contract:
   - "inputs" (optional): each {"name", "features": [names]}: one feature
     (its shape: () for shape [], ragged for a var one), or several fixed
     features of one dtype concatenated along the last axis into
     [sum of widths] (each of shape [] or [k]). A layer may also name a
     feature directly: that is an input of that feature alone.
   - "layers" (1..256): each {"name", "TYPE": {fields}, "inputs": [names]};
     names are unique across inputs and layers ([A-Za-z0-9_.-], 1..40
     characters); TYPE is dense, relu, tanh, sigmoid, softmax, flatten,
     concat, add, hashing, embedding, dot_interaction or cross; the layers
     may come in any order: each reads inputs or other layers, and the
     whole is a DAG (a cycle is refused, named along its path). Every input
     and layer leads to the output (else refused: it would not be trained).
   - "output": the layer whose value is the model's output (float32, flat),
     checked against the loss as sequential's last layer.
   - Shapes and dtypes: dense and cross read one float32 vector; add reads
     two or more float32 tensors of one shape; concat two or more of one
     rank, equal but for the last axis; hashing reads int64 ids (fixed or
     ragged) and gives the same shape of ids in [0, num_bins) (Keras's
     Hashing on integers: FarmHash's Fingerprint64 of the id's decimal
     text, tf.as_string's, modulo num_bins, as tf.strings.
     to_hash_bucket_fast; any int64 id); embedding
     reads int64 ids in [0, input_dim): shape () gives (output_dim,), [k]
     gives (k, output_dim), ragged rows are combined (combiner: mean, sum,
     sqrtn) into (output_dim,); dot_interaction reads two or more float32
     vectors of one width d: the dot products x_i . x_j for j < i (j <= i
     with self_interaction), in that order (TFRS's DotInteraction: the
     lower triangle, row by row; skip_gather: the whole F x F matrix with
     the rest zero), after input 0 itself with concat_dense (DLRM's
     interaction: the bottom MLP's output first); cross reads x0, or x0 and
     x, of one width d: x0 * (x W + b + diag_scale * x) + x, W [d, d]
     (TFRS's dcn.Cross, full rank).
   Errors are -EINVAL naming the layer and field ("model.layers[3] (top).
   inputs[0]: 'interact' is not an input, a layer or a feature of
   dataset.features"); a model without "features" is refused (it reads
   named features only). *ret is zeroed first and released on error. */
ZDIST_EXPORT int zdist_model_graph_parse(const char *json_text, zdist_model_spec_t *ret, zdist_error_t *err);

/* Frees what parse allocated; safe on a zeroed spec. */
ZDIST_EXPORT void zdist_model_spec_release(zdist_model_spec_t *spec);

/* Elements of one example's input (the product of input_shape). */
ZDIST_EXPORT int64_t zdist_model_spec_input_size(const zdist_model_spec_t *spec);
/* Checks the model against the data: input size == the data's features per
   example, class count and label dtype fit the loss. -EINVAL naming the field. */
ZDIST_EXPORT int zdist_model_spec_check_data(const zdist_model_spec_t *spec, int64_t input_dim, int num_classes,
                                             zdist_dtype_t label_dtype, zdist_error_t *err);

/* The layers' placement against the strategy: logical_devices per
   replica (0: not strategy tpu, where any placement is refused), spmd
   (logical_device refused). -EINVAL naming the layer with TensorFlow's
   ValueError text ("model.layers[2].conv2d.split: The product of
   `partition_dimensions` should be the same as ..."). */
ZDIST_EXPORT int zdist_model_spec_check_devices(const zdist_model_spec_t *spec, int logical_devices, bool spmd,
                                                zdist_error_t *err);

/* Keras's model.summary() as text (Layer (type), Output Shape, Param #,
   Total / Trainable / Non-trainable params; a functional model also its
   InputLayers and each layer's "Connected to"). *ret_text is the caller's
   to free. -ENOMEM. */
ZDIST_EXPORT int zdist_model_spec_summary(const zdist_model_spec_t *spec, const char *model_name, char **ret_text);

/* The params of the built-in dense and sparse models (linear_regression,
   softmax_regression, mlp: "hidden" at most ZDIST_MODEL_MAX_HIDDEN widths
   in 1..ZDIST_MODEL_MAX_WIDTH, "num_classes"; sparse_logreg: "dim"),
   strictly, as the worker takes them: the coordinator refuses at submit
   what a worker would refuse at START_JOB. params_json: the job's
   model.params text (NULL: "{}"). Any other model name: 0 (sequential's
   layers are zdist_model_spec_parse's; a plugin checks its own). -EINVAL
   with err naming the field ("model.params.hidden[0]: ..."). */
#define ZDIST_MODEL_MAX_HIDDEN 15
#define ZDIST_MODEL_MAX_WIDTH 65536
ZDIST_EXPORT int zdist_model_params_check(const char *model, const char *params_json, zdist_error_t *err);

/* "relu" ... ; "linear" for ZDIST_ACT_LINEAR. */
ZDIST_EXPORT const char *zdist_activation_name(zdist_activation_t act);
ZDIST_EXPORT const char *zdist_loss_name(zdist_loss_t loss);

#ifdef __cplusplus
}
#endif
#endif
