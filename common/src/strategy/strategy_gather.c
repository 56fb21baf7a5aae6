/* zdist strategy: the replica context's all_gather around the collective itself — its gradient
   (distribute_lib.py's custom_gradient) and TF's refusal of sparse values — over the public replica calls. */
#include <errno.h>
#include <stdlib.h>

#include "zdist/strategy.h"

int
zdist_strategy_replica_all_gather_indexed_slices(zdist_strategy_replica_t *ctx,
                                                 const zdist_indexed_slices_t *value, int axis,
                                                 zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) ctx, (void) value, (void) axis, (void) ret;
    /* ReplicaContext.all_gather raises before anything else, so no replica
       waits in a collective for this one. */
    return zdist_error_set(err, -ENOTSUP, "all_gather does not support IndexedSlices");
}

int
zdist_strategy_replica_all_gather_grad(zdist_strategy_replica_t *ctx, const zdist_tensor_t *dy,
                                       const zdist_tensor_t *value, int axis, zdist_tensor_t *ret,
                                       zdist_error_t *err)
{
    if (!dy || !value || !ret)
        return zdist_error_set(err, -EINVAL, "all_gather's gradient: dy, value and ret are required");
    int rank = value->shape.rank;
    if (axis < -rank || axis >= rank)
        return zdist_error_set(err, -EINVAL, "all_gather's gradient: axis %d is outside the value's rank %d",
                               axis, rank);
    int a = axis < 0 ? axis + rank : axis;
    /* distribute_lib.py's grad: grads = all_reduce(SUM, dy); d = all_gather
       of every replica's input_shape[axis]; this replica's rows begin at
       reduce_sum(d[:replica_id_in_sync_group]). */
    zdist_tensor_t sum = {0}, dims = {0};
    int64_t mine = value->shape.dims[a];
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_INT64, .shape = {1, {1}}, .data = &mine, .nbytes = sizeof mine};
    int rc = zdist_strategy_replica_all_reduce(ctx, ZDIST_REDUCE_SUM, dy, &sum, err);
    if (rc == 0)
        rc = zdist_strategy_replica_all_gather(ctx, &t, 0, &dims, err);
    if (rc == 0) {
        int id = zdist_strategy_replica_id(ctx);
        int64_t begin = 0;
        for (int r = 0; r < id && (size_t) r < dims.nbytes / sizeof begin; r++)
            begin += ((const int64_t *) dims.data)[r];
        rc = zdist_distribute_slice(&sum, a, begin, mine, ret, err);
    }
    free(sum.data);
    free(dims.data);
    return rc;
}
