/* zdist distribute: tf.distribute's value semantics (reduce, gather, ValueContext, StrategyExtended, variable aggregation). */
#ifndef ZDIST_DISTRIBUTE_H
#define ZDIST_DISTRIBUTE_H

#include <limits.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/step.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A per-replica value (tf.distribute.DistributedValues / PerReplica) is an
   array `values[num_replicas]` of tensor views in replica order. Tensors may
   differ in their size along an axis (a partial last batch); everything else
   (dtype, rank, other dims) must agree. Dtypes: float32, float64, int32,
   int64 (reduce's MEAN of integers is a float64, as distribute_lib.py's
   truediv; reduce_to and variable writes average floats only).

   Pure functions: no threads, no I/O, nothing kept. Functions that return a
   new tensor in `ret` malloc ret->data (the caller frees it with free());
   ret->name is NULL. Nothing is written to `ret` on failure. Errors are
   negative errno with err (may be NULL) filled; where TensorFlow raises,
   the text is TensorFlow's. */

/* `axis` argument meaning "no axis" (tf.distribute.Strategy.reduce(axis=None)). */
#define ZDIST_AXIS_NONE INT_MIN

/* "SUM"/"MEAN" (case-insensitive) -> op; -EINVAL otherwise. */
ZDIST_EXPORT int zdist_reduce_op_from_name(const char *name, zdist_reduce_op_t *ret_op);
ZDIST_EXPORT const char *zdist_reduce_op_name(zdist_reduce_op_t op);

/* tf.distribute.Strategy.reduce(op, value, axis).
   axis == ZDIST_AXIS_NONE: element-wise across replicas (shapes equal);
   SUM adds, MEAN divides by num_replicas.
   Otherwise (negative counts from the end): each replica's tensor is summed
   along `axis` first, the result has that dim removed; MEAN divides by the
   total size of `axis` over all replicas, so [0,1,2,3] and [4,5] -> 2.5
   (not the mean of 1.5 and 4.5). All replicas empty along axis: MEAN is NaN.
   MEAN of int32/int64 values follows distribute_lib.py: the sum in the
   values' dtype (wrapping), then truediv by the count -> ret is float64
   (int32 [0,1,2,3] and [4,5], axis 0 -> 2.5). Replicas are added in replica
   order (deterministic). An axis outside -rank..rank-1 is TF's text: for
   MEAN distribute_lib.py's "`axis` = 2 out of range for `value` with rank
   1", for SUM the one reduce_sum raises there, "Invalid reduction
   dimension 2 for input with 1 dimensions." (-EINVAL). */
ZDIST_EXPORT int zdist_distribute_reduce(zdist_reduce_op_t op, const zdist_tensor_t *values, int num_replicas,
                                         int axis, zdist_tensor_t *ret, zdist_error_t *err);
/* Strategy.reduce(op, value, axis=(a, b, ...)) (distribute_lib.py takes an
   int, a tuple or a list): axes[num_axes]; axes NULL is axis None (as
   zdist_distribute_reduce with ZDIST_AXIS_NONE). Each replica's tensor is
   summed over every named axis (those dims removed; replicas may differ
   along them only); SUM adds those sums over replicas; MEAN divides that by
   the sum over replicas of the product of each replica's reduced
   dimensions (mean_reduce_helper's numerator and denominator, each
   SUM-reduced): [[0,1],[2,3]] and [[4,5]], axes (0, 1) -> 15 / 6 = 2.5.
   An empty list reduces no axis (MEAN divides by num_replicas). As
   zdist_distribute_reduce otherwise: one axis {a} gives bitwise its
   result; integers' MEAN is float64. Errors (-EINVAL, TF's texts): an
   axis out of range as above (the first such axis); a dimension named
   twice, reduce_sum's "Invalid reduction arguments: Axes contains
   duplicate dimension: 0" (the dimension after adding rank to a negative
   axis); num_axes < 0; an op neither SUM nor MEAN, Strategy.reduce's
   TypeError "Expected `reduce_op` to be a `tf.distribute.ReduceOp`, not:
   7" (the op's number), before anything else. */
ZDIST_EXPORT int zdist_distribute_reduce_axes(zdist_reduce_op_t op, const zdist_tensor_t *values,
                                              int num_replicas, const int *axes, int num_axes,
                                              zdist_tensor_t *ret, zdist_error_t *err);
/* The denominator zdist_distribute_reduce_axes's MEAN divides by: the
   sum over the replicas of the product of their reduced dimensions
   (num_replicas when axes is NULL or empty), after the same checks with the
   same texts (for a reduce split between processes, each counting its own
   replicas). */
ZDIST_EXPORT int zdist_distribute_reduce_count(zdist_reduce_op_t op, const zdist_tensor_t *values,
                                               int num_replicas, const int *axes, int num_axes,
                                               double *ret_count, zdist_error_t *err);

/* tf.distribute.Strategy.gather(value, axis): concatenation along `axis` in
   replica order (rank >= 1; any data dtype). */
ZDIST_EXPORT int zdist_distribute_gather(const zdist_tensor_t *values, int num_replicas, int axis,
                                         zdist_tensor_t *ret, zdist_error_t *err);
/* ReplicaContext.all_gather(value, axis): every replica receives what
   gather returns; the one result in ret is that common value. */
ZDIST_EXPORT int zdist_distribute_all_gather(const zdist_tensor_t *values, int num_replicas, int axis,
                                             zdist_tensor_t *ret, zdist_error_t *err);

/* tf.IndexedSlices: rows `indices` of a tensor of dense_shape, their
   values [n, dense_shape[1:]] (a sparse gradient: zdist/step.h's
   zdist_grad_t ids and values). Borrowed views. */
typedef struct {
    zdist_tensor_t values;
    const int64_t *indices; /* [values.shape.dims[0]] */
    zdist_shape_t dense_shape;
} zdist_indexed_slices_t;

/* The gather of sparse per-replica values: TF's NotImplementedError
   "gather/all_gather does not support IndexedSlices" (-ENOTSUP), the text
   of cross_device_ops.py's CrossDeviceOps._gather (strategy.h's gather and
   all_gather raise their own first). Nothing is read. */
ZDIST_EXPORT int zdist_distribute_gather_indexed_slices(const zdist_indexed_slices_t *values,
                                                        int num_replicas, int axis, zdist_tensor_t *ret,
                                                        zdist_error_t *err);

/* Rows [begin, begin + size) of `value` along axis (negative counts from
   the end), every other axis whole: array_ops.gather(value, axis=axis,
   indices=range(begin, begin + size)). malloc'd ret->data. -EINVAL for a
   bad axis or rows outside the axis. */
ZDIST_EXPORT int zdist_distribute_slice(const zdist_tensor_t *value, int axis, int64_t begin, int64_t size,
                                        zdist_tensor_t *ret, zdist_error_t *err);

/* The gradient of ReplicaContext.all_gather(value, axis) (its
   custom_gradient in distribute_lib.py), for replica `replica`: the
   all-reduce SUM of the upstream gradients dys[num_replicas] (each
   replica's, of the gathered shape), then that replica's own slice along
   axis, [begin, begin + dims[replica]) with begin = dims[0] + ... +
   dims[replica - 1], dims[r] being replica r's input size along axis
   (which TF all-gathers). Replicas of different sizes along axis (a partial
   batch) each get their own rows. malloc'd ret. A layer that gathers
   inside run uses zdist_strategy_replica_all_gather_grad (zdist/strategy.h). */
ZDIST_EXPORT int zdist_distribute_all_gather_grad(const zdist_tensor_t *dys, int num_replicas,
                                                  const int64_t *dims, int axis, int replica,
                                                  zdist_tensor_t *ret, zdist_error_t *err);

/* Strategy.experimental_local_results: the values held by this process.
   A per-replica value of num_replicas_in_sync replicas spread over workers
   holds, on a worker, replicas [first_local, first_local + num_local);
   *ret_values (borrowed from `values`) and *ret_n get them. A
   non-distributed value (num_replicas == 1) is its own one local result. */
ZDIST_EXPORT int zdist_distribute_local_results(const zdist_tensor_t *values, int num_replicas, int first_local,
                                                int num_local, const zdist_tensor_t **ret_values, int *ret_n,
                                                zdist_error_t *err);

/* tf.distribute.experimental.ValueContext. */
typedef struct {
    int replica_id_in_sync_group;
    int num_replicas_in_sync;
} zdist_value_ctx_t;

/* Fills *ret_value (a view; the function owns what it points to) for the
   replica in ctx; returns 0 or a negative errno. */
typedef int (*zdist_value_fn)(const zdist_value_ctx_t *ctx, void *arg, zdist_tensor_t *ret_value);

/* Strategy.experimental_distribute_values_from_function: calls fn once per
   local replica, in order, with replica_id_in_sync_group = first_local + i,
   and stores the results in ret_values[num_local]. Stops at fn's first
   error and returns it (ret_values then partly written). */
ZDIST_EXPORT int zdist_distribute_values_from_function(int num_replicas_in_sync, int first_local, int num_local,
                                                       zdist_value_fn fn, void *arg, zdist_tensor_t *ret_values,
                                                       zdist_error_t *err);

/* StrategyExtended.reduce_to(op, value, destinations): the axis-None reduce
   of values[num_replicas], written into every destination tensor
   (dests[num_dests], caller's buffers of the reduced shape and dtype) —
   a Mirrored value. */
ZDIST_EXPORT int zdist_distribute_reduce_to(zdist_reduce_op_t op, const zdist_tensor_t *values, int num_replicas,
                                            zdist_tensor_t *dests, int num_dests, zdist_error_t *err);

typedef struct {
    const zdist_tensor_t *values; /* [num_replicas] */
    int num_replicas;
    zdist_tensor_t *dests; /* [num_dests] */
    int num_dests;
} zdist_reduce_pair_t;

/* StrategyExtended.batch_reduce_to: reduce_to for every pair. All pairs are
   checked before any destination is written (no partial result). */
ZDIST_EXPORT int zdist_distribute_batch_reduce_to(zdist_reduce_op_t op, const zdist_reduce_pair_t *pairs, int n,
                                                  zdist_error_t *err);

/* StrategyExtended.update(var, fn, args): calls fn on every copy of a
   mirrored variable in replica order with the same arg; stops at the first
   error and returns it. */
typedef int (*zdist_update_fn)(zdist_tensor_t *copy, int replica, void *arg);
ZDIST_EXPORT int zdist_distribute_update(zdist_tensor_t *copies, int num_copies, zdist_update_fn fn, void *arg,
                                         zdist_error_t *err);

/* ------------------------------------------------------------------------ */
/* Distributed variables: copies[num_replicas] of one variable, one per     */
/* replica (MirroredVariable for ON_WRITE, SyncOnReadVariable for ON_READ). */

typedef enum {
    ZDIST_VAR_ASSIGN = 0,
    ZDIST_VAR_ASSIGN_ADD = 1,
    ZDIST_VAR_ASSIGN_SUB = 2,
} zdist_var_op_t;

/* tf.VariableAggregation -> ReduceOp (SUM, MEAN); -EINVAL with TF's "Could
   not convert from `tf.VariableAggregation` ..." text otherwise. */
ZDIST_EXPORT int zdist_reduce_op_from_aggregation(zdist_var_agg_t agg, zdist_reduce_op_t *ret_op,
                                                  zdist_error_t *err);

/* A write in replica context: replica i writes values[i] (each the
   variable's shape).
   ON_WRITE: the values are combined by the aggregation — SUM, MEAN (float
   only, else TF's "Cannot update non-float variables..." error), or
   ONLY_FIRST_REPLICA (replica 0's value) — and op is applied with that one
   value to every copy, so the copies stay identical. NONE with more than
   one replica is TF's ValueError "You must specify an aggregation method to
   update a MirroredVariable in Replica Context. ..." (-EINVAL; err->text
   holds TF's text cut to ZDIST_ERROR_TEXT_MAX), nothing
   written; with one replica it is a plain write. (Later TF releases write
   only the local copy there; zdist keeps the error, as step.h's assign.)
   ON_READ: each replica's copy takes its own value, nothing is combined. */
ZDIST_EXPORT int zdist_distribute_var_write_replica(zdist_var_sync_t sync, zdist_var_agg_t agg, zdist_var_op_t op,
                                                    zdist_tensor_t *copies, const zdist_tensor_t *values,
                                                    int num_replicas, zdist_error_t *err);

/* A write in cross-replica context (one value for the variable).
   ON_WRITE: every copy gets op with value.
   ON_READ (SyncOnReadVariable): assign of a SUM variable stores
   value / num_replicas in each copy (so that the SUM read gives value back);
   assign_add / assign_sub of a SUM variable is TF's ValueError
   "SyncOnReadVariable does not support `assign_add` in cross-replica
   context when aggregation is set to `tf.VariableAggregation.SUM`.";
   otherwise every copy gets op with value. */
ZDIST_EXPORT int zdist_distribute_var_write_cross_replica(zdist_var_sync_t sync, zdist_var_agg_t agg,
                                                          zdist_var_op_t op, zdist_tensor_t *copies,
                                                          int num_replicas, const zdist_tensor_t *value,
                                                          zdist_error_t *err);

/* A read in cross-replica context into ret (caller's buffer of the
   variable's shape and dtype).
   ON_WRITE: the primary copy (replica 0).
   ON_READ: ONLY_FIRST_REPLICA -> replica 0's copy; SUM / MEAN -> the
   element-wise reduce of the copies; NONE -> TF's "Could not convert from
   `tf.VariableAggregation` ..." (-EINVAL). */
ZDIST_EXPORT int zdist_distribute_var_read_cross_replica(zdist_var_sync_t sync, zdist_var_agg_t agg,
                                                         const zdist_tensor_t *copies, int num_replicas,
                                                         zdist_tensor_t *ret, zdist_error_t *err);

/* ------------------------------------------------------------------------ */
/* The runtime's kernels: the semantics above on float32 buffers, for the   */
/* replica threads of one worker that split a reduction between them. The  */
/* caller has checked shapes once; nothing is allocated; replicas are       */
/* combined in replica order, so every thread gets bitwise the same value.  */

/* bufs[0][lo, hi) = SUM (or MEAN) of bufs[q][lo, hi) over q = 0..n-1, added
   in replica order in float32 (as tf.add_n on float32 values). */
ZDIST_EXPORT void zdist_distribute_reduce_f32(zdist_reduce_op_t op, float *const *bufs, int n, int64_t lo,
                                              int64_t hi);

/* Whether a write in replica context to a variable of this synchronization,
   aggregation and dtype may go ahead with num_replicas_in_sync replicas:
   0, or -EINVAL with TensorFlow's text (NONE over several replicas; MEAN of
   a non-float variable). ON_READ writes are always allowed. */
ZDIST_EXPORT int zdist_distribute_check_replica_write(zdist_var_sync_t sync, zdist_var_agg_t agg, zdist_dtype_t dtype,
                                                      int num_replicas_in_sync, zdist_error_t *err);

/* out[lo, hi) = the value an ON_WRITE variable takes from the replicas'
   values[n] under its aggregation: their SUM, their MEAN, or values[0]
   (ONLY_FIRST_REPLICA, and NONE, which the check above allows with one
   replica only). out may be values[0]. */
ZDIST_EXPORT void zdist_distribute_aggregate_f32(zdist_var_agg_t agg, const float *const *values, int n, int64_t lo,
                                                 int64_t hi, float *out);

/* gather into the caller's buffer: ret->data holds ret->nbytes bytes; on
   success ret's dtype, shape and nbytes describe the concatenation. -ENOSPC
   (nothing written) when it does not fit. */
ZDIST_EXPORT int zdist_distribute_gather_into(const zdist_tensor_t *values, int num_replicas, int axis,
                                              zdist_tensor_t *ret, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
