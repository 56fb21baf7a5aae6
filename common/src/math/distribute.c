/* zdist distribute: tf.distribute's reduce/gather/ValueContext/StrategyExtended and variable aggregation, as pure functions. */
#include "zdist/distribute.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* TensorFlow's values_util.aggregation_error_msg, formatted with
   variable_type = "MirroredVariable" (string concatenation kept as TF's). */
#define S_MIRRORED "MirroredVariable"
static const char s_aggregation_error_msg[] =
    "You must specify an aggregation method to update a " S_MIRRORED " in Replica Context. You can do so by passing "
    "an explicit value for argument `aggregation` to tf.Variable(..)."
    "e.g. `tf.Variable(..., aggregation=tf.VariableAggregation.SUM)`"
    "`tf.VariableAggregation` lists the possible aggregation methods."
    "This is required because " S_MIRRORED " should always be "
    "kept in sync. When updating them or assigning to them in a "
    "replica context, we automatically try to aggregate the values "
    "before updating the variable. For this aggregation, we need to "
    "know the aggregation method. "
    "Another alternative is to not try to update such " S_MIRRORED " in replica context, but in cross replica "
    "context. You can enter cross replica context by calling "
    "`tf.distribute.get_replica_context().merge_call(merge_fn, ..)`."
    "Inside `merge_fn`, you can then update the " S_MIRRORED " using `tf.distribute.StrategyExtended.update()`.";

static bool
s_is_float(zdist_dtype_t d)
{
    return d == ZDIST_DTYPE_FLOAT32 || d == ZDIST_DTYPE_FLOAT64;
}

static bool
s_is_arith(zdist_dtype_t d)
{
    return s_is_float(d) || d == ZDIST_DTYPE_INT32 || d == ZDIST_DTYPE_INT64;
}

/* Element i as double (floats) or int64 (ints); memcpy keeps UBSAN quiet on
   views whose data is not aligned for the dtype. */
static double
s_getf(const zdist_tensor_t *t, int64_t i)
{
    if (t->dtype == ZDIST_DTYPE_FLOAT32) {
        float f;
        memcpy(&f, (const char *)t->data + i * 4, 4);
        return f;
    }
    double d;
    memcpy(&d, (const char *)t->data + i * 8, 8);
    return d;
}

static int64_t
s_geti(const zdist_tensor_t *t, int64_t i)
{
    if (t->dtype == ZDIST_DTYPE_INT32) {
        int32_t v;
        memcpy(&v, (const char *)t->data + i * 4, 4);
        return v;
    }
    int64_t v;
    memcpy(&v, (const char *)t->data + i * 8, 8);
    return v;
}

static void
s_putf(zdist_dtype_t dtype, void *data, int64_t i, double v)
{
    if (dtype == ZDIST_DTYPE_FLOAT32) {
        float f = (float)v;
        memcpy((char *)data + i * 4, &f, 4);
    } else
        memcpy((char *)data + i * 8, &v, 8);
}

static void
s_puti(zdist_dtype_t dtype, void *data, int64_t i, int64_t v)
{
    if (dtype == ZDIST_DTYPE_INT32) {
        int32_t w = (int32_t)(uint32_t)(uint64_t)v; /* wraps as TF's int32 add */
        memcpy((char *)data + i * 4, &w, 4);
    } else
        memcpy((char *)data + i * 8, &v, 8);
}

/* Wrapping int64 add (TF's integer adds wrap; C's signed overflow is UB). */
static int64_t
s_addi(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* An int64 accumulator as the dtype's wrapped value (int32 keeps its low 32 bits). */
static int64_t
s_wrap_int(zdist_dtype_t dtype, int64_t v)
{
    return dtype == ZDIST_DTYPE_INT32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)v : v;
}

int
zdist_reduce_op_from_name(const char *name, zdist_reduce_op_t *ret_op)
{
    if (!name)
        return -EINVAL;
    if (strcasecmp(name, "SUM") == 0)
        *ret_op = ZDIST_REDUCE_SUM;
    else if (strcasecmp(name, "MEAN") == 0)
        *ret_op = ZDIST_REDUCE_MEAN;
    else
        return -EINVAL;
    return 0;
}

const char *
zdist_reduce_op_name(zdist_reduce_op_t op)
{
    return op == ZDIST_REDUCE_SUM ? "SUM" : op == ZDIST_REDUCE_MEAN ? "MEAN" : "invalid";
}

static const char *
s_agg_name(zdist_var_agg_t agg)
{
    switch (agg) {
    case ZDIST_AGG_NONE: return "VariableAggregation.NONE";
    case ZDIST_AGG_SUM: return "VariableAggregation.SUM";
    case ZDIST_AGG_MEAN: return "VariableAggregation.MEAN";
    case ZDIST_AGG_ONLY_FIRST_REPLICA: return "VariableAggregation.ONLY_FIRST_REPLICA";
    }
    return "VariableAggregation.?";
}

int
zdist_reduce_op_from_aggregation(zdist_var_agg_t agg, zdist_reduce_op_t *ret_op, zdist_error_t *err)
{
    if (agg == ZDIST_AGG_SUM)
        *ret_op = ZDIST_REDUCE_SUM;
    else if (agg == ZDIST_AGG_MEAN)
        *ret_op = ZDIST_REDUCE_MEAN;
    else /* TF's reduce_util text, its missing space included */
        return zdist_error_set(err, -EINVAL,
                               "Could not convert from `tf.VariableAggregation` %s to`tf.distribute.ReduceOp` type",
                               s_agg_name(agg));
    return 0;
}

/* Checks one tensor view: a dtype we compute with, a valid shape, and
   nbytes equal to the shape's size. */
static int
s_check_tensor(const zdist_tensor_t *t, int replica, bool need_arith, zdist_error_t *err)
{
    if (need_arith ? !s_is_arith(t->dtype) : !zdist_dtype_is_data(t->dtype))
        return zdist_error_set(err, -EINVAL, "replica %d: dtype %s is not supported here", replica,
                               zdist_dtype_name(t->dtype));
    if (t->shape.rank < 0 || t->shape.rank > ZDIST_MAX_RANK)
        return zdist_error_set(err, -EINVAL, "replica %d: rank %d is outside 0..%d", replica, t->shape.rank,
                               ZDIST_MAX_RANK);
    size_t bytes;
    int rc = zdist_tensor_byte_size(t->dtype, &t->shape, &bytes);
    if (rc < 0)
        return zdist_error_set(err, rc, "replica %d: shape has a negative or too large dimension", replica);
    if (bytes != t->nbytes)
        return zdist_error_set(err, -EINVAL, "replica %d: %zu bytes of data for shape %s (%zu expected)", replica,
                               t->nbytes, zdist_shape_format(&t->shape, (char[128]){0}, 128), bytes);
    if (bytes > 0 && !t->data)
        return zdist_error_set(err, -EINVAL, "replica %d: no data", replica);
    return 0;
}

/* All replicas: same dtype and rank, same dims except along the axes set
   in `differ` (NULL: none may differ). */
static int
s_check_values_mask(const zdist_tensor_t *values, int n, const bool *differ, bool need_arith,
                    zdist_error_t *err)
{
    if (n < 1 || !values)
        return zdist_error_set(err, -EINVAL, "a per-replica value needs at least one replica (got %d)", n);
    int ndiffer = 0;
    for (int d = 0; differ && d < values[0].shape.rank && d < ZDIST_MAX_RANK; d++)
        ndiffer += differ[d];
    for (int r = 0; r < n; r++) {
        int rc = s_check_tensor(&values[r], r, need_arith, err);
        if (rc < 0)
            return rc;
        if (values[r].dtype != values[0].dtype)
            return zdist_error_set(err, -EINVAL, "replica %d has dtype %s, replica 0 has %s", r,
                                   zdist_dtype_name(values[r].dtype), zdist_dtype_name(values[0].dtype));
        if (values[r].shape.rank != values[0].shape.rank)
            return zdist_error_set(err, -EINVAL, "replica %d has rank %d, replica 0 has rank %d", r,
                                   values[r].shape.rank, values[0].shape.rank);
        for (int d = 0; d < values[0].shape.rank; d++)
            if (!(differ && differ[d]) && values[r].shape.dims[d] != values[0].shape.dims[d]) {
                char a[128], b[128];
                return zdist_error_set(err, -EINVAL,
                                       "replica %d has shape %s, replica 0 has %s (they may differ %s)", r,
                                       zdist_shape_format(&values[r].shape, a, sizeof a),
                                       zdist_shape_format(&values[0].shape, b, sizeof b),
                                       ndiffer == 1  ? "only along axis"
                                       : ndiffer > 1 ? "only along the reduced axes"
                                                     : "in no dimension when axis is None");
            }
    }
    return 0;
}

/* All replicas: same dtype and rank, same dims except (when axis >= 0) along axis. */
static int
s_check_values(const zdist_tensor_t *values, int n, int axis, bool need_arith, zdist_error_t *err)
{
    bool differ[ZDIST_MAX_RANK] = {false};
    if (axis >= 0 && axis < ZDIST_MAX_RANK)
        differ[axis] = true;
    return s_check_values_mask(values, n, axis >= 0 ? differ : NULL, need_arith, err);
}

/* Python-style axis into 0..rank-1. */
static int
s_norm_axis(int axis, int rank, int *ret_axis, zdist_error_t *err)
{
    if (rank < 1)
        return zdist_error_set(err, -EINVAL, "axis %d given for a scalar (rank 0) value", axis);
    int a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
        return zdist_error_set(err, -EINVAL, "axis %d is out of range for rank %d (valid: %d..%d)", axis, rank,
                               -rank, rank - 1);
    *ret_axis = a;
    return 0;
}

static int
s_alloc(zdist_dtype_t dtype, const zdist_shape_t *shape, zdist_tensor_t *out, zdist_error_t *err)
{
    size_t bytes;
    int rc = zdist_tensor_byte_size(dtype, shape, &bytes);
    if (rc < 0)
        return zdist_error_set(err, rc, "result too large");
    void *data = calloc(1, bytes ? bytes : 1);
    if (!data)
        return zdist_error_set(err, -ENOMEM, "out of memory for a %zu-byte result", bytes);
    *out = (zdist_tensor_t){.dtype = dtype, .shape = *shape, .data = data, .nbytes = bytes};
    return 0;
}

static int
s_mean_dtype_check(zdist_reduce_op_t op, zdist_dtype_t dtype, zdist_error_t *err)
{
    if (op != ZDIST_REDUCE_SUM && op != ZDIST_REDUCE_MEAN)
        return zdist_error_set(err, -EINVAL, "reduce_op must be SUM or MEAN (got %d)", (int)op);
    if (op == ZDIST_REDUCE_MEAN && !s_is_float(dtype))
        return zdist_error_set(err, -EINVAL, "MEAN of %s values: only float32 and float64 can be averaged",
                               zdist_dtype_name(dtype));
    return 0;
}

/* Element-wise reduce of values (already checked) into out (shape of values[0]). */
static void
s_reduce_elementwise(zdist_reduce_op_t op, const zdist_tensor_t *values, int n, zdist_tensor_t *out)
{
    int64_t count = 0;
    (void)zdist_shape_num_elements(&values[0].shape, &count);
    zdist_dtype_t dt = values[0].dtype;
    for (int64_t i = 0; i < count; i++) {
        if (dt == ZDIST_DTYPE_FLOAT32) {
            /* float32 adds in float32, in replica order: the runtime's kernel. */
            float acc = (float)s_getf(&values[0], i);
            for (int r = 1; r < n; r++)
                acc += (float)s_getf(&values[r], i);
            if (op == ZDIST_REDUCE_MEAN)
                acc /= (float)n;
            s_putf(dt, out->data, i, acc);
        } else if (s_is_float(dt)) {
            double acc = 0;
            for (int r = 0; r < n; r++)
                acc += s_getf(&values[r], i);
            if (op == ZDIST_REDUCE_MEAN)
                acc /= n;
            s_putf(dt, out->data, i, acc);
        } else {
            int64_t acc = 0;
            for (int r = 0; r < n; r++)
                acc = s_addi(acc, s_geti(&values[r], i));
            s_puti(dt, out->data, i, acc);
        }
    }
}

/* Strategy.reduce's axes, checked where TF checks them: first each axis in
   -rank..rank-1, then no dimension twice. An axis out of range is, for
   MEAN, mean_reduce_helper's ValueError (distribute_lib.py), and for SUM
   the one reduce_sum's shape function raises when Strategy.reduce traces
   it (common_shape_fns.cc ReductionShape, without the graph node TF
   appends); a repeated one is the Sum kernel's (reduction_ops_common.cc,
   as reduction_ops_test.py expects it: "Axes contains duplicate
   dimension: 0"). reduced[d] is set for every reduced dimension. */
static int
s_reduce_axes_mask(zdist_reduce_op_t op, const int *axes, int num_axes, int rank, bool *reduced,
                   zdist_error_t *err)
{
    memset(reduced, 0, ZDIST_MAX_RANK * sizeof *reduced);
    if (num_axes < 0)
        return zdist_error_set(err, -EINVAL, "num_axes is %d: it must be 0 or more", num_axes);
    for (int i = 0; i < num_axes; i++)
        if (axes[i] < -rank || axes[i] >= rank) {
            if (op == ZDIST_REDUCE_MEAN)
                return zdist_error_set(err, -EINVAL, "`axis` = %d out of range for `value` with rank %d",
                                       axes[i], rank);
            return zdist_error_set(
                err, -EINVAL, "Invalid reduction dimension %d for input with %d dimensions.", axes[i], rank);
        }
    for (int i = 0; i < num_axes; i++) {
        int d = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (reduced[d])
            return zdist_error_set(err, -EINVAL,
                                   "Invalid reduction arguments: Axes contains duplicate dimension: %d", d);
        reduced[d] = true;
    }
    return 0;
}

/* Element-wise reduce (axis None) of checked values into a new out. */
static int
s_reduce_none(zdist_reduce_op_t op, const zdist_tensor_t *values, int num_replicas, zdist_dtype_t odt,
              zdist_tensor_t *ret, zdist_error_t *err)
{
    zdist_tensor_t out;
    int rc = s_alloc(odt, &values[0].shape, &out, err);
    if (rc < 0)
        return rc;
    zdist_dtype_t dt = values[0].dtype;
    if (odt != dt) { /* MEAN of integers */
        int64_t count = 0;
        (void) zdist_shape_num_elements(&values[0].shape, &count);
        for (int64_t i = 0; i < count; i++) {
            int64_t acc = 0;
            for (int r = 0; r < num_replicas; r++)
                acc = s_addi(acc, s_geti(&values[r], i));
            s_putf(odt, out.data, i, (double) s_wrap_int(dt, acc) / (double) num_replicas);
        }
    } else
        s_reduce_elementwise(op, values, num_replicas, &out);
    *ret = out;
    return 0;
}

/* Sum over the reduced dimensions within each replica and across replicas:
   every output element adds its contributions in replica order, then in
   row-major order within a replica, in double (int64 for integers). MEAN
   divides by the sum over replicas of the product of their reduced
   dimensions (mean_reduce_helper's denominators, summed). */
static int
s_reduce_over_axes(zdist_reduce_op_t op, const zdist_tensor_t *values, int num_replicas, const bool *reduced,
                   zdist_dtype_t odt, zdist_tensor_t *ret, zdist_error_t *err)
{
    int rank = values[0].shape.rank;
    zdist_dtype_t dt = values[0].dtype;
    zdist_shape_t oshape = {.rank = 0};
    for (int d = 0; d < rank; d++)
        if (!reduced[d])
            oshape.dims[oshape.rank++] = values[0].shape.dims[d];
    zdist_tensor_t out;
    int rc = s_alloc(odt, &oshape, &out, err);
    if (rc < 0)
        return rc;
    int64_t count = 0;
    (void) zdist_shape_num_elements(&oshape, &count);
    double *accf = calloc((size_t) (count ? count : 1), sizeof *accf);
    int64_t *acci = calloc((size_t) (count ? count : 1), sizeof *acci);
    if (!accf || !acci) {
        free(accf);
        free(acci);
        free(out.data);
        return zdist_error_set(err, -ENOMEM, "out of memory for a reduce of %lld elements",
                               (long long) count);
    }
    double denom = 0;
    for (int r = 0; r < num_replicas; r++) {
        const zdist_shape_t *sh = &values[r].shape;
        int64_t n = 0, prod = 1;
        (void) zdist_shape_num_elements(sh, &n);
        for (int d = 0; d < rank; d++)
            if (reduced[d])
                prod *= sh->dims[d];
        denom += (double) prod;
        for (int64_t i = 0; i < n; i++) {
            /* i's output element: its indices along the kept dimensions */
            int64_t rest = i, oi = 0, ostride = 1;
            for (int d = rank - 1; d >= 0; d--) {
                int64_t k = rest % sh->dims[d];
                rest /= sh->dims[d];
                if (!reduced[d]) {
                    oi += k * ostride;
                    ostride *= sh->dims[d];
                }
            }
            if (s_is_float(dt))
                accf[oi] += s_getf(&values[r], i);
            else
                acci[oi] = s_addi(acci[oi], s_geti(&values[r], i));
        }
    }
    for (int64_t oi = 0; oi < count; oi++) {
        if (s_is_float(dt))
            s_putf(dt, out.data, oi, op == ZDIST_REDUCE_MEAN ? accf[oi] / denom : accf[oi]);
        else if (odt != dt)
            s_putf(odt, out.data, oi, (double) s_wrap_int(dt, acci[oi]) / denom);
        else
            s_puti(dt, out.data, oi, acci[oi]);
    }
    free(accf);
    free(acci);
    *ret = out;
    return 0;
}

int
zdist_distribute_reduce_axes(zdist_reduce_op_t op, const zdist_tensor_t *values, int num_replicas,
                             const int *axes, int num_axes, zdist_tensor_t *ret, zdist_error_t *err)
{
    bool reduced[ZDIST_MAX_RANK];
    int rc;
    if (axes && op != ZDIST_REDUCE_SUM &&
        op != ZDIST_REDUCE_MEAN) /* Strategy.reduce's TypeError, checked first */
        return zdist_error_set(err, -EINVAL, "Expected `reduce_op` to be a `tf.distribute.ReduceOp`, not: %d",
                               (int) op);
    if (axes) {
        if (num_replicas < 1 || !values)
            return zdist_error_set(err, -EINVAL, "a per-replica value needs at least one replica (got %d)",
                                   num_replicas);
        rc = s_reduce_axes_mask(op, axes, num_axes, values[0].shape.rank, reduced, err);
        if (rc < 0)
            return rc;
    }
    rc = s_check_values_mask(values, num_replicas, axes ? reduced : NULL, true, err);
    if (rc < 0)
        return rc;
    zdist_dtype_t dt = values[0].dtype;
    if (op != ZDIST_REDUCE_SUM && op != ZDIST_REDUCE_MEAN)
        return zdist_error_set(err, -EINVAL, "reduce_op must be SUM or MEAN (got %d)", (int)op);
    /* distribute_lib.py's MEAN of integers: the sum in the values' dtype
       (wrapping as TF's int adds), then math_ops.truediv by the count cast
       to that dtype -> float64. */
    zdist_dtype_t odt = op == ZDIST_REDUCE_MEAN && !s_is_float(dt) ? ZDIST_DTYPE_FLOAT64 : dt;
    if (!axes)
        return s_reduce_none(op, values, num_replicas, odt, ret, err);
    return s_reduce_over_axes(op, values, num_replicas, reduced, odt, ret, err);
}

int
zdist_distribute_reduce_count(zdist_reduce_op_t op, const zdist_tensor_t *values, int num_replicas,
                              const int *axes, int num_axes, double *ret_count, zdist_error_t *err)
{
    bool reduced[ZDIST_MAX_RANK];
    if (num_replicas < 1 || !values)
        return zdist_error_set(err, -EINVAL, "a per-replica value needs at least one replica (got %d)",
                               num_replicas);
    int rank = values[0].shape.rank, rc = 0;
    if (axes)
        rc = s_reduce_axes_mask(op, axes, num_axes, rank, reduced, err);
    if (rc == 0)
        rc = s_check_values_mask(values, num_replicas, axes ? reduced : NULL, true, err);
    if (rc < 0)
        return rc;
    double count = 0;
    for (int r = 0; r < num_replicas; r++) {
        int64_t prod = 1;
        for (int d = 0; axes && d < rank; d++)
            if (reduced[d])
                prod *= values[r].shape.dims[d];
        count += (double) prod;
    }
    *ret_count = count;
    return 0;
}

int
zdist_distribute_reduce(zdist_reduce_op_t op, const zdist_tensor_t *values, int num_replicas, int axis,
                        zdist_tensor_t *ret, zdist_error_t *err)
{
    if (axis == ZDIST_AXIS_NONE)
        return zdist_distribute_reduce_axes(op, values, num_replicas, NULL, 0, ret, err);
    return zdist_distribute_reduce_axes(op, values, num_replicas, &axis, 1, ret, err);
}

/* Checks a gather and computes its shape; 0 or -EINVAL with err. */
static int
s_gather_shape(const zdist_tensor_t *values, int num_replicas, int axis, int *ret_axis, zdist_shape_t *ret_shape,
               zdist_error_t *err)
{
    if (num_replicas < 1 || !values)
        return zdist_error_set(err, -EINVAL, "a per-replica value needs at least one replica (got %d)", num_replicas);
    int a = 0, rc = s_norm_axis(axis, values[0].shape.rank, &a, err);
    if (rc < 0)
        return rc;
    rc = s_check_values(values, num_replicas, a, false, err);
    if (rc < 0)
        return rc;
    *ret_shape = values[0].shape;
    ret_shape->dims[a] = 0;
    for (int r = 0; r < num_replicas; r++)
        ret_shape->dims[a] += values[r].shape.dims[a];
    *ret_axis = a;
    return 0;
}

/* [outer, along, inner]: for each outer index, the replicas' blocks in order. */
static void
s_gather_copy(const zdist_tensor_t *values, int num_replicas, int a, const zdist_shape_t *oshape, void *dst)
{
    int64_t outer = 1, inner_bytes = (int64_t)zdist_dtype_size(values[0].dtype);
    for (int d = 0; d < a; d++)
        outer *= oshape->dims[d];
    for (int d = a + 1; d < oshape->rank; d++)
        inner_bytes *= oshape->dims[d];
    char *p = dst;
    for (int64_t o = 0; o < outer; o++)
        for (int r = 0; r < num_replicas; r++) {
            size_t block = (size_t)(values[r].shape.dims[a] * inner_bytes);
            if (block) {
                memcpy(p, (const char *)values[r].data + (size_t)o * block, block);
                p += block;
            }
        }
}

int
zdist_distribute_gather(const zdist_tensor_t *values, int num_replicas, int axis, zdist_tensor_t *ret,
                        zdist_error_t *err)
{
    zdist_shape_t oshape;
    int a = 0, rc = s_gather_shape(values, num_replicas, axis, &a, &oshape, err);
    if (rc < 0)
        return rc;
    zdist_tensor_t out;
    rc = s_alloc(values[0].dtype, &oshape, &out, err);
    if (rc < 0)
        return rc;
    s_gather_copy(values, num_replicas, a, &oshape, out.data);
    *ret = out;
    return 0;
}

int
zdist_distribute_gather_into(const zdist_tensor_t *values, int num_replicas, int axis, zdist_tensor_t *ret,
                             zdist_error_t *err)
{
    zdist_shape_t oshape;
    int a = 0, rc = s_gather_shape(values, num_replicas, axis, &a, &oshape, err);
    if (rc < 0)
        return rc;
    size_t bytes;
    if (zdist_tensor_byte_size(values[0].dtype, &oshape, &bytes) < 0 || !ret || bytes > ret->nbytes ||
        (bytes && !ret->data))
        return zdist_error_set(err, -ENOSPC, "gather: the %s result does not fit the %zu-byte buffer",
                               zdist_shape_format(&oshape, (char[128]){0}, 128), ret ? ret->nbytes : 0);
    s_gather_copy(values, num_replicas, a, &oshape, ret->data);
    ret->dtype = values[0].dtype;
    ret->shape = oshape;
    ret->nbytes = bytes;
    return 0;
}

int
zdist_distribute_all_gather(const zdist_tensor_t *values, int num_replicas, int axis, zdist_tensor_t *ret,
                            zdist_error_t *err)
{
    return zdist_distribute_gather(values, num_replicas, axis, ret, err);
}

int
zdist_distribute_gather_indexed_slices(const zdist_indexed_slices_t *values, int num_replicas, int axis,
                                       zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) values, (void) num_replicas, (void) axis, (void) ret;
    /* cross_device_ops.py CrossDeviceOps._gather's NotImplementedError */
    return zdist_error_set(err, -ENOTSUP, "gather/all_gather does not support IndexedSlices");
}

int
zdist_distribute_slice(const zdist_tensor_t *value, int axis, int64_t begin, int64_t size,
                       zdist_tensor_t *ret, zdist_error_t *err)
{
    if (!value)
        return zdist_error_set(err, -EINVAL, "slice: no value");
    int a = 0, rc = s_norm_axis(axis, value->shape.rank, &a, err);
    if (rc == 0)
        rc = s_check_tensor(value, 0, false, err);
    if (rc < 0)
        return rc;
    int64_t along = value->shape.dims[a];
    if (begin < 0 || size < 0 || begin > along || size > along - begin)
        return zdist_error_set(err, -EINVAL, "slice: rows [%lld, %lld) of axis %d are outside its %lld",
                               (long long) begin, (long long) begin + (long long) size, axis,
                               (long long) along);
    zdist_shape_t oshape = value->shape;
    oshape.dims[a] = size;
    zdist_tensor_t out;
    if ((rc = s_alloc(value->dtype, &oshape, &out, err)) < 0)
        return rc;
    int64_t outer = 1, inner = (int64_t) zdist_dtype_size(value->dtype);
    for (int d = 0; d < a; d++)
        outer *= value->shape.dims[d];
    for (int d = a + 1; d < value->shape.rank; d++)
        inner *= value->shape.dims[d];
    for (int64_t o = 0; o < outer && size > 0; o++)
        memcpy((char *) out.data + (size_t) (o * size * inner),
               (const char *) value->data + (size_t) ((o * along + begin) * inner), (size_t) (size * inner));
    *ret = out;
    return 0;
}

int
zdist_distribute_all_gather_grad(const zdist_tensor_t *dys, int num_replicas, const int64_t *dims, int axis,
                                 int replica, zdist_tensor_t *ret, zdist_error_t *err)
{
    if (!dims || replica < 0 || replica >= num_replicas)
        return zdist_error_set(err, -EINVAL, "all_gather's gradient: replica %d of %d, or no dims", replica,
                               num_replicas);
    int64_t begin = 0;
    for (int r = 0; r < replica; r++)
        begin += dims[r];
    /* the all_reduce(SUM, dy) of distribute_lib.py's grad, then this
       replica's rows: array_ops.gather(grad, range(begin, end), axis) */
    zdist_tensor_t sum;
    int rc = zdist_distribute_reduce(ZDIST_REDUCE_SUM, dys, num_replicas, ZDIST_AXIS_NONE, &sum, err);
    if (rc < 0)
        return rc;
    rc = zdist_distribute_slice(&sum, axis, begin, dims[replica], ret, err);
    free(sum.data);
    return rc;
}

int
zdist_distribute_local_results(const zdist_tensor_t *values, int num_replicas, int first_local, int num_local,
                               const zdist_tensor_t **ret_values, int *ret_n, zdist_error_t *err)
{
    if (!values || num_replicas < 1)
        return zdist_error_set(err, -EINVAL, "a per-replica value needs at least one replica (got %d)", num_replicas);
    if (num_replicas == 1) {
        *ret_values = values;
        *ret_n = 1;
        return 0;
    }
    if (first_local < 0 || num_local < 0 || first_local > num_replicas - num_local)
        return zdist_error_set(err, -EINVAL, "local replicas [%d, %d) are outside the %d replicas in sync", first_local,
                               first_local + num_local, num_replicas);
    *ret_values = values + first_local;
    *ret_n = num_local;
    return 0;
}

int
zdist_distribute_values_from_function(int num_replicas_in_sync, int first_local, int num_local, zdist_value_fn fn,
                                      void *arg, zdist_tensor_t *ret_values, zdist_error_t *err)
{
    if (!fn || !ret_values || num_replicas_in_sync < 1 || first_local < 0 || num_local < 0 ||
        first_local > num_replicas_in_sync - num_local)
        return zdist_error_set(err, -EINVAL, "local replicas [%d, %d) are outside the %d replicas in sync", first_local,
                               first_local + num_local, num_replicas_in_sync);
    for (int i = 0; i < num_local; i++) {
        zdist_value_ctx_t ctx = {.replica_id_in_sync_group = first_local + i,
                                 .num_replicas_in_sync = num_replicas_in_sync};
        zdist_tensor_t v = {0};
        int rc = fn(&ctx, arg, &v);
        if (rc < 0)
            return zdist_error_set(err, rc, "value function failed for replica %d", ctx.replica_id_in_sync_group);
        ret_values[i] = v;
    }
    return 0;
}

/* Checks that dest can hold a tensor of src's dtype and shape. */
static int
s_check_dest(const zdist_tensor_t *dest, zdist_dtype_t dtype, const zdist_shape_t *shape, const char *what, int i,
             zdist_error_t *err)
{
    size_t bytes;
    if (dest->dtype != dtype || !zdist_shape_equal(&dest->shape, shape) ||
        zdist_tensor_byte_size(dtype, shape, &bytes) < 0 || dest->nbytes != bytes || (bytes && !dest->data)) {
        char a[128], b[128];
        return zdist_error_set(err, -EINVAL, "%s %d is %s %s, the value is %s %s", what, i,
                               zdist_dtype_name(dest->dtype), zdist_shape_format(&dest->shape, a, sizeof a),
                               zdist_dtype_name(dtype), zdist_shape_format(shape, b, sizeof b));
    }
    return 0;
}

static int
s_check_pair(zdist_reduce_op_t op, const zdist_reduce_pair_t *p, zdist_error_t *err)
{
    int rc = s_check_values(p->values, p->num_replicas, -1, true, err);
    if (rc < 0)
        return rc;
    rc = s_mean_dtype_check(op, p->values[0].dtype, err);
    if (rc < 0)
        return rc;
    if (p->num_dests < 1 || !p->dests)
        return zdist_error_set(err, -EINVAL, "reduce_to needs at least one destination");
    for (int d = 0; d < p->num_dests; d++) {
        rc = s_check_dest(&p->dests[d], p->values[0].dtype, &p->values[0].shape, "destination", d, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void
s_apply_pair(zdist_reduce_op_t op, const zdist_reduce_pair_t *p)
{
    /* A destination may alias a value: then reduce into a temporary, so
       everything is read before anything is written. */
    bool alias = false;
    for (int d = 0; d < p->num_dests; d++)
        for (int r = 0; r < p->num_replicas; r++)
            alias |= p->dests[d].nbytes && p->dests[d].data == p->values[r].data;
    zdist_tensor_t tmp = p->dests[0];
    if (alias && s_alloc(p->values[0].dtype, &p->values[0].shape, &tmp, NULL) < 0)
        abort(); /* out of memory: as a daemon, abort with a message */
    s_reduce_elementwise(op, p->values, p->num_replicas, &tmp);
    for (int d = alias ? 0 : 1; d < p->num_dests; d++)
        if (tmp.nbytes)
            memcpy(p->dests[d].data, tmp.data, tmp.nbytes);
    if (alias)
        free(tmp.data);
}

int
zdist_distribute_reduce_to(zdist_reduce_op_t op, const zdist_tensor_t *values, int num_replicas,
                           zdist_tensor_t *dests, int num_dests, zdist_error_t *err)
{
    zdist_reduce_pair_t p = {.values = values, .num_replicas = num_replicas, .dests = dests, .num_dests = num_dests};
    return zdist_distribute_batch_reduce_to(op, &p, 1, err);
}

int
zdist_distribute_batch_reduce_to(zdist_reduce_op_t op, const zdist_reduce_pair_t *pairs, int n, zdist_error_t *err)
{
    if (n < 0 || (n > 0 && !pairs))
        return zdist_error_set(err, -EINVAL, "batch_reduce_to: bad pair list");
    for (int i = 0; i < n; i++) {
        int rc = s_check_pair(op, &pairs[i], err);
        if (rc < 0) {
            zdist_error_prefix(err, "pair %d", i);
            return rc;
        }
    }
    for (int i = 0; i < n; i++)
        s_apply_pair(op, &pairs[i]);
    return 0;
}

int
zdist_distribute_update(zdist_tensor_t *copies, int num_copies, zdist_update_fn fn, void *arg, zdist_error_t *err)
{
    if (!copies || num_copies < 1 || !fn)
        return zdist_error_set(err, -EINVAL, "update needs a variable with at least one copy and a function");
    for (int r = 0; r < num_copies; r++) {
        int rc = fn(&copies[r], r, arg);
        if (rc < 0)
            return zdist_error_set(err, rc, "update function failed on replica %d", r);
    }
    return 0;
}

/* copy (op)= value, element-wise; both checked to have the same dtype and size. */
static void
s_apply_op(zdist_var_op_t op, zdist_tensor_t *copy, const zdist_tensor_t *value, double scale)
{
    int64_t count = 0;
    (void)zdist_shape_num_elements(&copy->shape, &count);
    zdist_dtype_t dt = copy->dtype;
    for (int64_t i = 0; i < count; i++) {
        if (s_is_float(dt)) {
            double v = s_getf(value, i) * scale, c = s_getf(copy, i);
            s_putf(dt, copy->data, i, op == ZDIST_VAR_ASSIGN ? v : op == ZDIST_VAR_ASSIGN_ADD ? c + v : c - v);
        } else {
            int64_t v = s_geti(value, i), c = s_geti(copy, i);
            s_puti(dt, copy->data, i,
                   op == ZDIST_VAR_ASSIGN ? v : op == ZDIST_VAR_ASSIGN_ADD ? s_addi(c, v) : s_addi(c, -v));
        }
    }
}

static int
s_check_var(zdist_var_sync_t sync, zdist_var_agg_t agg, zdist_var_op_t op, const zdist_tensor_t *copies, int n,
            zdist_error_t *err)
{
    if (sync != ZDIST_SYNC_ON_WRITE && sync != ZDIST_SYNC_ON_READ)
        return zdist_error_set(err, -EINVAL, "unknown synchronization %d", (int)sync);
    if (agg < ZDIST_AGG_NONE || agg > ZDIST_AGG_ONLY_FIRST_REPLICA)
        return zdist_error_set(err, -EINVAL, "unknown aggregation %d", (int)agg);
    if (op < ZDIST_VAR_ASSIGN || op > ZDIST_VAR_ASSIGN_SUB)
        return zdist_error_set(err, -EINVAL, "unknown variable operation %d", (int)op);
    int rc = s_check_values(copies, n, -1, true, err);
    if (rc < 0)
        zdist_error_prefix(err, "variable copies");
    return rc;
}

int
zdist_distribute_var_write_replica(zdist_var_sync_t sync, zdist_var_agg_t agg, zdist_var_op_t op,
                                   zdist_tensor_t *copies, const zdist_tensor_t *values, int num_replicas,
                                   zdist_error_t *err)
{
    int rc = s_check_var(sync, agg, op, copies, num_replicas, err);
    if (rc < 0)
        return rc;
    for (int r = 0; r < num_replicas; r++) {
        rc = s_check_dest(&values[r], copies[0].dtype, &copies[0].shape, "value of replica", r, err);
        if (rc < 0)
            return rc;
    }
    if (sync == ZDIST_SYNC_ON_READ) {
        for (int r = 0; r < num_replicas; r++)
            s_apply_op(op, &copies[r], &values[r], 1.0);
        return 0;
    }
    rc = zdist_distribute_check_replica_write(sync, agg, copies[0].dtype, num_replicas, err);
    if (rc < 0)
        return rc;
    zdist_tensor_t agg_value;
    if (agg == ZDIST_AGG_NONE || agg == ZDIST_AGG_ONLY_FIRST_REPLICA) {
        agg_value = values[0];
        agg_value.data = NULL;
        rc = s_alloc(values[0].dtype, &values[0].shape, &agg_value, err);
        if (rc < 0)
            return rc;
        if (agg_value.nbytes)
            memcpy(agg_value.data, values[0].data, agg_value.nbytes);
    } else {
        rc = zdist_distribute_reduce(agg == ZDIST_AGG_SUM ? ZDIST_REDUCE_SUM : ZDIST_REDUCE_MEAN, values, num_replicas,
                                     ZDIST_AXIS_NONE, &agg_value, err);
        if (rc < 0)
            return rc;
    }
    for (int r = 0; r < num_replicas; r++)
        s_apply_op(op, &copies[r], &agg_value, 1.0);
    free(agg_value.data);
    return 0;
}

int
zdist_distribute_var_write_cross_replica(zdist_var_sync_t sync, zdist_var_agg_t agg, zdist_var_op_t op,
                                         zdist_tensor_t *copies, int num_replicas, const zdist_tensor_t *value,
                                         zdist_error_t *err)
{
    int rc = s_check_var(sync, agg, op, copies, num_replicas, err);
    if (rc < 0)
        return rc;
    if (!value)
        return zdist_error_set(err, -EINVAL, "no value to write");
    rc = s_check_dest(value, copies[0].dtype, &copies[0].shape, "value", 0, err);
    if (rc < 0)
        return rc;
    double scale = 1.0;
    if (sync == ZDIST_SYNC_ON_READ && agg == ZDIST_AGG_SUM) {
        if (op != ZDIST_VAR_ASSIGN)
            return zdist_error_set(err, -EINVAL,
                                   "SyncOnReadVariable does not support `%s` in cross-replica context when "
                                   "aggregation is set to `tf.VariableAggregation.SUM`.",
                                   op == ZDIST_VAR_ASSIGN_ADD ? "assign_add" : "assign_sub");
        if (!s_is_float(copies[0].dtype))
            return zdist_error_set(err, -EINVAL,
                                   "assigning a SUM SyncOnReadVariable of %s divides by the %d replicas: float only",
                                   zdist_dtype_name(copies[0].dtype), num_replicas);
        scale = 1.0 / num_replicas; /* TF: tensor / len(var._devices), so the SUM read gives value back */
    }
    /* The value may alias a copy: apply to the others first, that copy last. */
    int alias = -1;
    for (int r = 0; r < num_replicas; r++)
        if (copies[r].data == value->data)
            alias = r;
    for (int r = 0; r < num_replicas; r++)
        if (r != alias)
            s_apply_op(op, &copies[r], value, scale);
    if (alias >= 0)
        s_apply_op(op, &copies[alias], value, scale);
    return 0;
}

int
zdist_distribute_var_read_cross_replica(zdist_var_sync_t sync, zdist_var_agg_t agg, const zdist_tensor_t *copies,
                                        int num_replicas, zdist_tensor_t *ret, zdist_error_t *err)
{
    int rc = s_check_var(sync, agg, ZDIST_VAR_ASSIGN, copies, num_replicas, err);
    if (rc < 0)
        return rc;
    if (!ret)
        return zdist_error_set(err, -EINVAL, "no destination to read into");
    rc = s_check_dest(ret, copies[0].dtype, &copies[0].shape, "destination", 0, err);
    if (rc < 0)
        return rc;
    if (sync == ZDIST_SYNC_ON_WRITE || agg == ZDIST_AGG_ONLY_FIRST_REPLICA) {
        if (ret->nbytes && ret->data != copies[0].data)
            memmove(ret->data, copies[0].data, ret->nbytes);
        return 0;
    }
    zdist_reduce_op_t op;
    rc = zdist_reduce_op_from_aggregation(agg, &op, err);
    if (rc < 0)
        return rc;
    return zdist_distribute_reduce_to(op, copies, num_replicas, ret, 1, err);
}

int
zdist_distribute_check_replica_write(zdist_var_sync_t sync, zdist_var_agg_t agg, zdist_dtype_t dtype,
                                     int num_replicas_in_sync, zdist_error_t *err)
{
    if (sync == ZDIST_SYNC_ON_READ)
        return 0;
    if (agg == ZDIST_AGG_NONE && num_replicas_in_sync > 1)
        return zdist_error_set(err, -EINVAL, "%s", s_aggregation_error_msg);
    if (agg == ZDIST_AGG_MEAN && !s_is_float(dtype))
        return zdist_error_set(err, -EINVAL,
                               "Cannot update non-float variables with tf.VariableAggregation.MEAN aggregation in "
                               "replica context. Either change the variable dtype to float or update it in "
                               "cross-replica context.");
    return 0;
}

void
zdist_distribute_reduce_f32(zdist_reduce_op_t op, float *const *bufs, int n, int64_t lo, int64_t hi)
{
    float *b0 = bufs[0];
    for (int q = 1; q < n; q++) {
        const float *bq = bufs[q];
        for (int64_t j = lo; j < hi; j++)
            b0[j] += bq[j];
    }
    if (op == ZDIST_REDUCE_MEAN && n > 1)
        for (int64_t j = lo; j < hi; j++)
            b0[j] /= (float)n;
}

void
zdist_distribute_aggregate_f32(zdist_var_agg_t agg, const float *const *values, int n, int64_t lo, int64_t hi,
                               float *out)
{
    if (out != values[0])
        memcpy(out + lo, values[0] + lo, (size_t)(hi - lo) * sizeof *out);
    if (agg != ZDIST_AGG_SUM && agg != ZDIST_AGG_MEAN)
        return;
    for (int q = 1; q < n; q++) {
        const float *vq = values[q];
        for (int64_t j = lo; j < hi; j++)
            out[j] += vq[j];
    }
    if (agg == ZDIST_AGG_MEAN && n > 1)
        for (int64_t j = lo; j < hi; j++)
            out[j] /= (float)n;
}
