/* Built-in models (worker/models/): dense linear_regression, softmax_regression, mlp; sparse_logreg; sequential; functional. */
#ifndef WORKER_MODELS_H
#define WORKER_MODELS_H

#include <jansson.h>

#include "zdist/error.h"
#include "zdist/model_spec.h"
#include "zdist/step.h"

extern const zdist_model_t worker_model_linear_regression;
extern const zdist_model_t worker_model_softmax_regression;
extern const zdist_model_t worker_model_mlp;
extern const zdist_model_t worker_model_sparse_logreg;
extern const zdist_model_t worker_model_sequential;
extern const zdist_model_t worker_model_functional;

/* Parses a model's params JSON: an object whose keys are all in `allowed`
   (NULL-terminated). 0 and *ret (the caller's, json_decref), or -EINVAL with
   err naming the model and the field. */
int model_params_parse(const char *model, const char *params_json, const char *const *allowed, json_t **ret,
                       zdist_error_t *err);
/* Optional positive integer param `key` (<= max) into *ret (left alone when
   absent). -EINVAL with err. */
int model_params_int(const char *model, json_t *params, const char *key, int64_t max, int64_t *ret,
                     zdist_error_t *err);

/* Declares layer sp's embedding table "NAME/embeddings" with init: a
   fixed [input_dim, output_dim] variable, or, for an embedding without
   input_dim (sp->dynamic), a dynamic table [0, output_dim] with the
   layer's admission and eviction (zdist_builder_add_dynamic_variable).
   *ret gets its handle; 0 or the builder's negative errno with err. */
int model_add_embedding(zdist_model_builder_t *b, const zdist_layer_spec_t *sp, zdist_initializer_t init, int *ret,
                        zdist_error_t *err);

/* The standard outputs of a step on n examples: the loss (loss_sum over
   global_size, so the replicas' SUM is the global batch's mean), the rows
   classified right (when correct >= 0) and the examples. 0 or the first
   failure. */
int model_outputs(zdist_replica_ctx_t *ctx, double loss_sum, int64_t global_size, int64_t correct, int64_t n);

/* The loss of a model's output out[n, units] against the batch's labels,
   in place: out becomes the loss's gradient over global_size (Keras's
   losses fused with a last softmax / sigmoid: out holds logits). Sum of
   the losses and (classification) the rows right. -ERANGE with the
   context's error set ("MODEL: a label does not fit ...") for a label the
   loss cannot take. */
int model_loss(zdist_replica_ctx_t *ctx, const char *model, zdist_loss_t loss, float *out, int64_t units,
               const zdist_step_batch_t *batch, double *ret_loss, int64_t *ret_correct);

/* An eval step's per-example probabilities for the exact test AUC: a
   binary classifier's logits[n] through the sigmoid, into the replica's
   scratch `slot`, given to zdist_ctx_predictions. Other losses, and a host
   without the op, give nothing: 0. */
int model_predictions(zdist_replica_ctx_t *ctx, int slot, zdist_loss_t loss, const float *logits, int64_t n);

/* `zdist run --dump-predictions`: where the built-in models' evaluation
   steps hand each example's prediction (the last layer's output with the
   loss's activation applied: softmax, sigmoid, or none for mean squared
   error; what `zdist export` writes as "predictions"). Set on the thread
   that starts the evaluation, before it starts; NULL: nowhere (the
   default: eval steps then do nothing more). fn may run on any replica's
   thread, several at once; every replica's eval step calls it once per
   step, n 0 included, so the caller can put the replicas' parts of a step
   back in order. */
typedef void (*model_predictions_fn)(void *arg, int replica, const float *rows, int64_t n, int64_t width);
void model_predictions_sink(model_predictions_fn fn, void *arg);
/* Hands out[n, width] (the last layer's output) to the sink with act
   applied to a copy. 0, or -ENOMEM. */
int model_predictions_emit(zdist_replica_ctx_t *ctx, const float *out, int64_t n, int64_t width,
                           zdist_activation_t act);

/* The dense network behind softmax_regression (no hidden layer) and mlp:
   ReLU hidden layers, glorot_uniform kernels, zero biases, softmax
   cross-entropy on int32 class labels. */
#define MODEL_DENSE_MAX_LAYERS (ZDIST_MODEL_MAX_HIDDEN + 1)
typedef struct {
    const char *model; /* registry name, for messages */
    int nlayers;       /* hidden layers + 1 */
    int64_t sizes[MODEL_DENSE_MAX_LAYERS + 1]; /* [0] input dim ... [nlayers] classes */
    bool layer_names;  /* "dense_<l>/kernel" (mlp) or "kernel" (softmax_regression) */
    int kernel[MODEL_DENSE_MAX_LAYERS], bias[MODEL_DENSE_MAX_LAYERS];
} model_dense_t;

/* params: "num_classes" (default: the data's), and "hidden" (a list of layer
   widths) when hidden_allowed. */
int model_dense_init(const char *model, bool hidden_allowed, const char *params_json,
                     const zdist_model_info_t *info, void **ret_state, zdist_error_t *err);
void model_dense_destroy(void *state);
int model_dense_build(void *state, zdist_model_builder_t *b, zdist_error_t *err);
int model_dense_train_step(void *state, zdist_replica_ctx_t *ctx);
int model_dense_eval_step(void *state, zdist_replica_ctx_t *ctx);

#endif
