/* zdist optim: optimizer configs and update kernels (Keras/TF semantics), one for psd shards and local copies. */
#ifndef ZDIST_OPTIM_H
#define ZDIST_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZDIST_OPTIM_MAX_SLOTS 2

/* Update rules, per element, with g the gradient and t the step counter
   after its increment (1 on the first apply):
     sgd       w -= lr*g
     momentum  v = momentum*v - lr*g;  w += v  (nesterov: w += momentum*v - lr*g)
               (tf.keras SGD(momentum>0), ResourceApplyKerasMomentum)
     adagrad   a += g*g;  w -= lr*g / (sqrt(a) + epsilon)
               a starts at initial_accumulator_value (tf.keras Adagrad,
               ResourceApplyAdagradV2; Keras 3 uses sqrt(a + epsilon) instead)
     adam      lr_t = lr*sqrt(1-b2^t)/(1-b1^t); m = b1*m + (1-b1)*g;
               v = b2*v + (1-b2)*g*g;  w -= lr_t*m / (sqrt(v) + epsilon)
   Sparse gradients: duplicate ids are summed first, then sgd, momentum and
   adagrad update only the touched rows (as TF's sparse apply ops). For adam,
   TF's Keras optimizer (_resource_apply_sparse) decays m and v of EVERY row
   and updates every row of w, i.e. exactly the dense update with zero
   gradient rows; that is the default here. `lazy` gives LazyAdam semantics
   instead: only touched rows' m, v and w change (cheaper for big tables).
     ftrl      TF's Ftrl (ApplyFtrlV2, multiply_linear_by_lr=false), with
               p = learning_rate_power, l2' = l2 + beta/(2*lr) (Keras's beta):
               gs = g + 2*l2_shrinkage*w;  n = a + g*g;
               z += gs - (n^-p - a^-p)/lr * w   (sqrt when p == -0.5, as TF)
               w = (clamp(z, -l1, l1) - z) / (n^-p/lr + 2*l2');  a = n
               a starts at initial_accumulator_value, z ("linear") at 0;
               a zero gradient (g NULL) changes nothing, as for sgd.
               The job file names its fields as tf.keras.optimizers.Ftrl
               (l1_regularization_strength, ...); the ps protocol carries
               them in its Optimizer message. */
typedef enum {
    ZDIST_OPTIM_SGD = 1,
    ZDIST_OPTIM_MOMENTUM,
    ZDIST_OPTIM_ADAGRAD,
    ZDIST_OPTIM_ADAM,
    ZDIST_OPTIM_FTRL,
} zdist_optim_kind_t;

typedef struct {
    zdist_optim_kind_t kind;
    double learning_rate;
    double momentum; /* momentum */
    bool nesterov;   /* momentum */
    double initial_accumulator_value; /* adagrad, ftrl */
    double beta1, beta2;              /* adam */
    double epsilon;                   /* adagrad, adam */
    bool lazy;                        /* adam: sparse updates touch only their rows */
    double learning_rate_power;       /* ftrl, <= 0 */
    double l1, l2, l2_shrinkage;      /* ftrl, >= 0 */
    double beta;                      /* ftrl (Keras), >= 0 */
} zdist_optim_config_t;

/* Keras defaults: sgd lr 0.01; momentum lr 0.01 momentum 0.9; adagrad
   lr 0.001, initial accumulator 0.1, epsilon 1e-7; adam lr 0.001, beta1 0.9,
   beta2 0.999, epsilon 1e-7; ftrl lr 0.001, learning_rate_power -0.5,
   initial accumulator 0.1, l1 l2 l2_shrinkage beta 0. An unknown kind
   yields sgd. */
ZDIST_EXPORT void zdist_optim_config_default(zdist_optim_config_t *ret_cfg, zdist_optim_kind_t kind);
/* -EINVAL with a message naming the field: lr > 0 finite, momentum in
   [0, 1], betas in [0, 1), epsilon >= 0, accumulator >= 0; ftrl:
   learning_rate_power <= 0, l1, l2, l2_shrinkage, beta >= 0. */
ZDIST_EXPORT int zdist_optim_config_validate(const zdist_optim_config_t *cfg, zdist_error_t *err);
/* Same kind and same values of the fields that kind uses. */
ZDIST_EXPORT bool zdist_optim_config_equal(const zdist_optim_config_t *a, const zdist_optim_config_t *b);

/* "sgd", "momentum", "adagrad", "adam", "ftrl"; "invalid" otherwise. */
ZDIST_EXPORT const char *zdist_optim_kind_name(zdist_optim_kind_t kind);
/* Name -> kind; -EINVAL if unknown. */
ZDIST_EXPORT int zdist_optim_kind_from_name(const char *name, zdist_optim_kind_t *ret_kind);

/* Slot variables beside the values, same shape and dtype: momentum has
   "momentum", adagrad "accumulator", adam "m" and "v", ftrl "accumulator"
   and "linear"; sgd none. */
ZDIST_EXPORT int zdist_optim_num_slots(zdist_optim_kind_t kind);
/* Slot name (Keras's), NULL when i is out of range. */
ZDIST_EXPORT const char *zdist_optim_slot_name(zdist_optim_kind_t kind, int i);
/* Value a fresh slot holds: adagrad's and ftrl's initial accumulator, else 0. */
ZDIST_EXPORT double zdist_optim_slot_initial(const zdist_optim_config_t *cfg, int i);
/* Fills n elements of a slot with its initial value. */
ZDIST_EXPORT void zdist_optim_slot_fill(const zdist_optim_config_t *cfg, int i, zdist_dtype_t dtype, void *slot,
                         size_t n);

/* Dense apply on n contiguous elements: w and slots[i] point at the same
   element offset. dtype float32 or float64 (-EINVAL otherwise). step is the
   step counter after its increment. g NULL means a zero gradient. */
ZDIST_EXPORT int zdist_optim_apply_dense(const zdist_optim_config_t *cfg, zdist_dtype_t dtype, int64_t step,
                          void *w, void *const *slots, const void *g, size_t n);
/* The same apply with the new values written to dst and w left as it was,
   in one pass: dst[i] = update(w[i]); the slots are still updated in place.
   For values that must not change under a reader (a psd shard a reply
   still holds). dst == w is the in-place apply; otherwise dst and w must not
   overlap. The results are bitwise those of the in-place apply. */
ZDIST_EXPORT int zdist_optim_apply_dense_to(const zdist_optim_config_t *cfg, zdist_dtype_t dtype, int64_t step,
                                            void *dst, const void *w, void *const *slots, const void *g,
                                            size_t n);

/* Growable scratch for summing duplicate ids; one per shard, used under
   the shard's write lock. Zero-initialize; free with _release. */
typedef struct {
    void *pairs;
    size_t pairs_cap;
    void *grad;
    size_t grad_cap;
} zdist_optim_scratch_t;
ZDIST_EXPORT void zdist_optim_scratch_release(zdist_optim_scratch_t *scratch);

/* Sparse apply on a shard of `rows` rows x `width` elements starting at
   global row `row_offset`: ids are global and must lie in the shard
   (checked by the caller), g holds nids rows. Duplicate ids are summed (in
   request order) before the update. -ENOMEM before anything changes if the
   scratch cannot grow; -EINVAL for a non-float dtype. */
ZDIST_EXPORT int zdist_optim_apply_sparse(const zdist_optim_config_t *cfg, zdist_dtype_t dtype, int64_t step,
                           void *w, void *const *slots, int64_t row_offset, int64_t rows,
                           int64_t width, const int64_t *ids, size_t nids, const void *g,
                           zdist_optim_scratch_t *scratch);

#ifdef __cplusplus
}
#endif
#endif
