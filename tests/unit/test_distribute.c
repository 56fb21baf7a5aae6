/* CUnit suite: tf.distribute semantics (reduce, gather, ValueContext, StrategyExtended, variable aggregation) against TF's documented examples. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zdist/distribute.h"

static zdist_tensor_t
s_f32(float *data, int rank, int64_t d0, int64_t d1)
{
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {.rank = rank, .dims = {d0, d1}}, .data = data};
    int64_t n = 0;
    zdist_shape_num_elements(&t.shape, &n);
    t.nbytes = (size_t)n * 4;
    return t;
}

/* Strategy.reduce docs: a dataset of 6 elements batched by 4 over 2
   replicas gives [0,1,2,3] and [4,5]; reduce(MEAN, axis=0) = 15/6 = 2.5,
   reduce(SUM, axis=0) = 15. */
static void
test_reduce_partial_batch_axis(void)
{
    float a[] = {0, 1, 2, 3}, b[] = {4, 5};
    zdist_tensor_t v[2] = {s_f32(a, 1, 4, 0), s_f32(b, 1, 2, 0)};
    zdist_tensor_t out;
    zdist_error_t err;
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, v, 2, 0, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.rank, 0);
    CU_ASSERT_EQUAL(((float *)out.data)[0], 2.5f);
    free(out.data);
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_SUM, v, 2, -1, &out, &err), 0);
    CU_ASSERT_EQUAL(((float *)out.data)[0], 15.0f);
    free(out.data);

    /* rank 2, axis 0: per-column mean over all 3 rows */
    float c[] = {1, 10, 2, 20}, d[] = {3, 30};
    zdist_tensor_t w[2] = {s_f32(c, 2, 2, 2), s_f32(d, 2, 1, 2)};
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, w, 2, 0, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.rank, 1);
    CU_ASSERT_EQUAL(out.shape.dims[0], 2);
    CU_ASSERT_EQUAL(((float *)out.data)[0], 2.0f);
    CU_ASSERT_EQUAL(((float *)out.data)[1], 20.0f);
    free(out.data);
    /* axis 1: row sums, the rows may not differ then */
    CU_ASSERT_EQUAL(zdist_distribute_reduce(ZDIST_REDUCE_SUM, w, 2, 1, &out, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "only along axis"));

    /* distribute_lib.py's example with int32 values: reduce(MEAN, axis=0)
       casts the count to int32 and truediv gives a float64 2.5; SUM stays
       int32 15. int64 alike. */
    int32_t ia[] = {0, 1, 2, 3}, ib[] = {4, 5};
    zdist_tensor_t iv[2] = {{.dtype = ZDIST_DTYPE_INT32, .shape = {1, {4}}, .data = ia, .nbytes = 16},
                            {.dtype = ZDIST_DTYPE_INT32, .shape = {1, {2}}, .data = ib, .nbytes = 8}};
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, iv, 2, 0, &out, &err), 0);
    CU_ASSERT_EQUAL(out.dtype, ZDIST_DTYPE_FLOAT64);
    CU_ASSERT_EQUAL(out.shape.rank, 0);
    CU_ASSERT_EQUAL(out.nbytes, 8);
    CU_ASSERT_EQUAL(((double *)out.data)[0], 2.5);
    free(out.data);
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_SUM, iv, 2, 0, &out, &err), 0);
    CU_ASSERT_EQUAL(out.dtype, ZDIST_DTYPE_INT32);
    CU_ASSERT_EQUAL(((int32_t *)out.data)[0], 15);
    free(out.data);
    int64_t la[] = {1, 2, 3, 4}, lb[] = {6, 8};
    zdist_tensor_t lv[2] = {{.dtype = ZDIST_DTYPE_INT64, .shape = {2, {2, 2}}, .data = la, .nbytes = 32},
                            {.dtype = ZDIST_DTYPE_INT64, .shape = {2, {1, 2}}, .data = lb, .nbytes = 16}};
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, lv, 2, 0, &out, &err), 0);
    CU_ASSERT_EQUAL(out.dtype, ZDIST_DTYPE_FLOAT64);
    CU_ASSERT_EQUAL(out.shape.rank, 1);
    CU_ASSERT_EQUAL(((double *)out.data)[0], 10.0 / 3);
    CU_ASSERT_EQUAL(((double *)out.data)[1], 14.0 / 3);
    free(out.data);
    /* reduce_to keeps the destinations' dtype: MEAN of ints still refused */
    int32_t dst[4];
    zdist_tensor_t dt = {.dtype = ZDIST_DTYPE_INT32, .shape = {1, {4}}, .data = dst, .nbytes = 16};
    zdist_tensor_t same[2] = {iv[0], iv[0]};
    CU_ASSERT_EQUAL(zdist_distribute_reduce_to(ZDIST_REDUCE_MEAN, same, 2, &dt, 1, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "MEAN of int32"));

    /* every replica empty: MEAN is 0/0 */
    zdist_tensor_t e[2] = {s_f32(NULL, 1, 0, 0), s_f32(NULL, 1, 0, 0)};
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, e, 2, 0, &out, &err), 0);
    CU_ASSERT_TRUE(isnan(((float *)out.data)[0]));
    free(out.data);
}

/* axis None: element-wise across replicas; MEAN divides by the replicas. */
static void
test_reduce_axis_none(void)
{
    float a[] = {1, 2, 3}, b[] = {4, 5, 7};
    zdist_tensor_t v[2] = {s_f32(a, 1, 3, 0), s_f32(b, 1, 3, 0)};
    zdist_tensor_t out;
    zdist_error_t err;
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_SUM, v, 2, ZDIST_AXIS_NONE, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.dims[0], 3);
    CU_ASSERT_EQUAL(memcmp(out.data, (float[]){5, 7, 10}, 12), 0);
    free(out.data);
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, v, 2, ZDIST_AXIS_NONE, &out, &err), 0);
    CU_ASSERT_EQUAL(memcmp(out.data, (float[]){2.5f, 3.5f, 5}, 12), 0);
    free(out.data);

    /* partial batches need an axis */
    zdist_tensor_t p[2] = {s_f32(a, 1, 3, 0), s_f32(b, 1, 2, 0)};
    CU_ASSERT_EQUAL(zdist_distribute_reduce(ZDIST_REDUCE_SUM, p, 2, ZDIST_AXIS_NONE, &out, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "replica 1 has shape [2]"));

    /* int SUM wraps as TF's; int MEAN refused */
    int32_t i1[] = {2147483647, 5}, i2[] = {1, 6};
    zdist_tensor_t iv[2] = {{.dtype = ZDIST_DTYPE_INT32, .shape = {1, {2}}, .data = i1, .nbytes = 8},
                            {.dtype = ZDIST_DTYPE_INT32, .shape = {1, {2}}, .data = i2, .nbytes = 8}};
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_SUM, iv, 2, ZDIST_AXIS_NONE, &out, &err), 0);
    CU_ASSERT_EQUAL(((int32_t *)out.data)[0], INT32_MIN);
    CU_ASSERT_EQUAL(((int32_t *)out.data)[1], 11);
    free(out.data);
    /* int MEAN: the wrapped int32 sum, truediv -> float64 (distribute_lib.py) */
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, iv, 2, ZDIST_AXIS_NONE, &out, &err), 0);
    CU_ASSERT_EQUAL(out.dtype, ZDIST_DTYPE_FLOAT64);
    CU_ASSERT_EQUAL(out.nbytes, 16);
    CU_ASSERT_EQUAL(((double *)out.data)[0], (double)INT32_MIN / 2);
    CU_ASSERT_EQUAL(((double *)out.data)[1], 5.5);
    free(out.data);

    /* bad axis, bad sizes, no replicas */
    /* Formerly zdist's "axis 1 is out of range for rank 1 (valid: -1..0)":
       now TF's texts (test_reduce_axes_tf_errors). */
    CU_ASSERT_EQUAL(zdist_distribute_reduce(ZDIST_REDUCE_SUM, v, 2, 1, &out, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "Invalid reduction dimension 1 for input with 1 dimensions.");
    zdist_tensor_t bad = s_f32(a, 1, 3, 0);
    bad.nbytes = 8;
    CU_ASSERT_EQUAL(zdist_distribute_reduce(ZDIST_REDUCE_SUM, &bad, 1, ZDIST_AXIS_NONE, &out, &err), -EINVAL);
    CU_ASSERT_EQUAL(zdist_distribute_reduce(ZDIST_REDUCE_SUM, v, 0, ZDIST_AXIS_NONE, &out, &err), -EINVAL);

    zdist_reduce_op_t op;
    CU_ASSERT_EQUAL(zdist_reduce_op_from_name("mean", &op), 0);
    CU_ASSERT_EQUAL(op, ZDIST_REDUCE_MEAN);
    CU_ASSERT_EQUAL(zdist_reduce_op_from_name("MAX", &op), -EINVAL);
    CU_ASSERT_STRING_EQUAL(zdist_reduce_op_name(ZDIST_REDUCE_SUM), "SUM");
}

/* distribute_lib.py Strategy.reduce takes axis as an int, a tuple or a
   list: SUM is reduce_sum(v, axis) per replica then a SUM over replicas;
   MEAN's mean_reduce_helper gives numer = reduce_sum(v, axes) and denom =
   reduce_prod([dimension(a) for a in axes]) per replica, both SUM-reduced,
   then truediv: distribute_lib_test.py's testReduceMeanAxis and
   testReduceSumAxis ([[1., 2.], [3., 4.]], axis (0, 1): MEAN 2.5, SUM 10),
   then the docstring's partial batch over two axes. */
static void
test_reduce_axes_tuple(void)
{
    zdist_tensor_t out;
    zdist_error_t err = {0};
    float x[] = {1, 2, 3, 4};
    zdist_tensor_t xv = s_f32(x, 2, 2, 2);
    CU_ASSERT_EQUAL_FATAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_MEAN, &xv, 1, (const int[]){0, 1}, 2, &out, &err), 0);
    CU_ASSERT_EQUAL(((float *) out.data)[0], 2.5f);
    free(out.data);
    CU_ASSERT_EQUAL_FATAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_SUM, &xv, 1, (const int[]){0, 1}, 2, &out, &err), 0);
    CU_ASSERT_EQUAL(((float *) out.data)[0], 10.0f);
    free(out.data);
    /* [[0,1],[2,3]] and [[4,5]] (a partial batch): over (0, 1) SUM 15, MEAN 15 / (4 + 2) */
    float a[] = {0, 1, 2, 3}, b[] = {4, 5};
    zdist_tensor_t v[2] = {s_f32(a, 2, 2, 2), s_f32(b, 2, 1, 2)};
    CU_ASSERT_EQUAL_FATAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_SUM, v, 2, (const int[]){0, 1}, 2, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.rank, 0);
    CU_ASSERT_EQUAL(((float *) out.data)[0], 15.0f);
    free(out.data);
    CU_ASSERT_EQUAL_FATAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_MEAN, v, 2, (const int[]){1, 0}, 2, &out, &err), 0);
    CU_ASSERT_EQUAL(((float *) out.data)[0], 2.5f);
    free(out.data);
    /* negative axes count from the end: (-2, -1) is (0, 1) */
    CU_ASSERT_EQUAL_FATAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_MEAN, v, 2, (const int[]){-2, -1}, 2, &out, &err), 0);
    CU_ASSERT_EQUAL(((float *) out.data)[0], 2.5f);
    free(out.data);
    /* one axis in a list is bitwise the int axis's result */
    zdist_tensor_t one;
    CU_ASSERT_EQUAL_FATAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_MEAN, v, 2, (const int[]){0}, 1, &out, &err), 0);
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, v, 2, 0, &one, &err), 0);
    CU_ASSERT_EQUAL(out.shape.rank, 1);
    CU_ASSERT_EQUAL(out.nbytes, one.nbytes);
    CU_ASSERT_EQUAL(memcmp(out.data, one.data, one.nbytes), 0);
    CU_ASSERT_EQUAL(((float *) out.data)[0], 2.0f); /* (0 + 2 + 4) / 3 */
    CU_ASSERT_EQUAL(((float *) out.data)[1], 3.0f); /* (1 + 3 + 5) / 3 */
    free(out.data);
    free(one.data);

    /* rank 3 [r, 2, 3] over (0, 2): keeps the middle axis; MEAN divides by
       sum_r r_rows * 3 = (1 + 2) * 3 = 9 */
    float c[6], d[12];
    for (int i = 0; i < 6; i++)
        c[i] = (float) i;
    for (int i = 0; i < 12; i++)
        d[i] = (float) (10 + i);
    zdist_tensor_t w[2] = {
        {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {3, {1, 2, 3}}, .data = c, .nbytes = sizeof c},
        {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {3, {2, 2, 3}}, .data = d, .nbytes = sizeof d}};
    CU_ASSERT_EQUAL_FATAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_SUM, w, 2, (const int[]){0, 2}, 2, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.rank, 1);
    CU_ASSERT_EQUAL(out.shape.dims[0], 2);
    /* middle index 0: c 0+1+2, d (10+11+12) + (16+17+18); index 1: c 3+4+5, d (13+14+15) + (19+20+21) */
    CU_ASSERT_EQUAL(((float *) out.data)[0], 3.0f + 33.0f + 51.0f);
    CU_ASSERT_EQUAL(((float *) out.data)[1], 12.0f + 42.0f + 60.0f);
    free(out.data);
    CU_ASSERT_EQUAL_FATAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_MEAN, w, 2, (const int[]){2, 0}, 2, &out, &err), 0);
    CU_ASSERT_EQUAL(((float *) out.data)[0], (float) (87.0 / 9.0));
    CU_ASSERT_EQUAL(((float *) out.data)[1], (float) (114.0 / 9.0));
    free(out.data);
    double count = 0;
    CU_ASSERT_EQUAL(
        zdist_distribute_reduce_count(ZDIST_REDUCE_MEAN, w, 2, (const int[]){2, 0}, 2, &count, &err), 0);
    CU_ASSERT_EQUAL(count, 9.0);
    /* the replicas may differ only along the reduced axes */
    CU_ASSERT_EQUAL(zdist_distribute_reduce_axes(ZDIST_REDUCE_SUM, w, 2, (const int[]){1, 2}, 2, &out, &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "only along the reduced axes"));

    /* int32 MEAN over a tuple: int32 sum, truediv -> float64 */
    int32_t ia[] = {0, 1, 2, 3}, ib[] = {4, 5};
    zdist_tensor_t iv[2] = {{.dtype = ZDIST_DTYPE_INT32, .shape = {2, {2, 2}}, .data = ia, .nbytes = 16},
                            {.dtype = ZDIST_DTYPE_INT32, .shape = {2, {1, 2}}, .data = ib, .nbytes = 8}};
    CU_ASSERT_EQUAL_FATAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_MEAN, iv, 2, (const int[]){0, 1}, 2, &out, &err), 0);
    CU_ASSERT_EQUAL(out.dtype, ZDIST_DTYPE_FLOAT64);
    CU_ASSERT_EQUAL(((double *) out.data)[0], 2.5);
    free(out.data);

    /* an empty list reduces no axis: MEAN divides by the replicas (denominator
       reduce_prod([]) = 1 each); the shapes must then agree */
    float e1[] = {1, 2}, e2[] = {3, 6};
    zdist_tensor_t ev[2] = {s_f32(e1, 1, 2, 0), s_f32(e2, 1, 2, 0)};
    CU_ASSERT_EQUAL_FATAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_MEAN, ev, 2, (const int[]){0}, 0, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.rank, 1);
    CU_ASSERT_EQUAL(((float *) out.data)[0], 2.0f);
    CU_ASSERT_EQUAL(((float *) out.data)[1], 4.0f);
    free(out.data);
    CU_ASSERT_EQUAL(zdist_distribute_reduce_count(ZDIST_REDUCE_MEAN, ev, 2, NULL, 0, &count, &err), 0);
    CU_ASSERT_EQUAL(count, 2.0);
    /* axes NULL is axis None */
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce_axes(ZDIST_REDUCE_SUM, ev, 2, NULL, 0, &out, &err), 0);
    CU_ASSERT_EQUAL(((float *) out.data)[1], 8.0f);
    free(out.data);
    CU_ASSERT_EQUAL(zdist_distribute_reduce_axes(ZDIST_REDUCE_SUM, ev, 2, (const int[]){0}, -1, &out, &err),
                    -EINVAL);
}

/* TF's texts for a bad axis of Strategy.reduce:
   - MEAN: distribute_lib.py mean_reduce_helper's ValueError
     "`axis` = %r out of range for `value` with rank %d";
   - SUM: reduce_sum's shape function, which Strategy.reduce's tf.function
     runs (core/framework/common_shape_fns.cc ReductionShape: "Invalid
     reduction dimension 2 for input with 1 dimensions.");
   - an axis twice: the Sum kernel's (core/kernels/reduction_ops_common.cc;
     kernel_tests/math_ops/reduction_ops_test.py's reduce_sum of [1., 2.]
     over [0, 0] expects "Axes contains duplicate dimension: 0"). */
static void
test_reduce_axes_tf_errors(void)
{
    float a[] = {0, 1, 2, 3}, b[] = {4, 5};
    zdist_tensor_t v[2] = {s_f32(a, 1, 4, 0), s_f32(b, 1, 2, 0)};
    zdist_tensor_t out = {0};
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, v, 2, 2, &out, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "`axis` = 2 out of range for `value` with rank 1");
    CU_ASSERT_EQUAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, v, 2, -2, &out, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "`axis` = -2 out of range for `value` with rank 1");
    CU_ASSERT_EQUAL(zdist_distribute_reduce(ZDIST_REDUCE_SUM, v, 2, 2, &out, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "Invalid reduction dimension 2 for input with 1 dimensions.");
    CU_ASSERT_EQUAL(zdist_distribute_reduce_axes(ZDIST_REDUCE_MEAN, v, 2, (const int[]){0, 3}, 2, &out, &err),
                    -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "`axis` = 3 out of range for `value` with rank 1");
    /* a scalar has no axis 0 */
    float s0 = 1;
    zdist_tensor_t sc = s_f32(&s0, 0, 0, 0);
    CU_ASSERT_EQUAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, &sc, 1, 0, &out, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "`axis` = 0 out of range for `value` with rank 0");
    /* duplicates, after negative axes are made positive; out of range is checked first */
    CU_ASSERT_EQUAL(zdist_distribute_reduce_axes(ZDIST_REDUCE_SUM, v, 2, (const int[]){0, 0}, 2, &out, &err),
                    -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "Invalid reduction arguments: Axes contains duplicate dimension: 0");
    CU_ASSERT_EQUAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_MEAN, v, 2, (const int[]){-1, 0}, 2, &out, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "Invalid reduction arguments: Axes contains duplicate dimension: 0");
    CU_ASSERT_EQUAL(
        zdist_distribute_reduce_axes(ZDIST_REDUCE_SUM, v, 2, (const int[]){0, 0, 5}, 3, &out, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "Invalid reduction dimension 5 for input with 1 dimensions.");
    /* an op that is neither SUM nor MEAN, with an axis: Strategy.reduce's TypeError, first */
    CU_ASSERT_EQUAL(
        zdist_distribute_reduce_axes((zdist_reduce_op_t) 7, v, 2, (const int[]){9}, 1, &out, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "Expected `reduce_op` to be a `tf.distribute.ReduceOp`, not: 7");
    CU_ASSERT_PTR_NULL(out.data);
}

/* distribute_lib.py ReplicaContext.all_gather's custom gradient:
   grads = all_reduce(SUM, dy); replica r keeps rows [sum(d[:r]),
   sum(d[:r]) + d[r]) along axis (strategy_gather_test.py
   testAllGatherGradient with replicas of different sizes). */
static void
test_all_gather_grad(void)
{
    zdist_error_t err = {0};
    zdist_tensor_t out;
    /* gathered [3, 2] from replicas of 1 and 2 rows along axis 0 */
    float d0[] = {1, 2, 3, 4, 5, 6}, d1[] = {10, 20, 30, 40, 50, 60};
    zdist_tensor_t dys[2] = {s_f32(d0, 2, 3, 2), s_f32(d1, 2, 3, 2)};
    int64_t dims[2] = {1, 2};
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_all_gather_grad(dys, 2, dims, 0, 0, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.dims[0], 1);
    CU_ASSERT_EQUAL(out.shape.dims[1], 2);
    CU_ASSERT_EQUAL(memcmp(out.data, ((float[]){11, 22}), 8), 0);
    free(out.data);
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_all_gather_grad(dys, 2, dims, 0, 1, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.dims[0], 2);
    CU_ASSERT_EQUAL(memcmp(out.data, ((float[]){33, 44, 55, 66}), 16), 0);
    free(out.data);
    /* along axis 1 (-1): gathered [2, 3] of column blocks 1 and 2 */
    zdist_tensor_t cy[2] = {s_f32(d0, 2, 2, 3), s_f32(d1, 2, 2, 3)};
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_all_gather_grad(cy, 2, dims, -1, 1, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.dims[0], 2);
    CU_ASSERT_EQUAL(out.shape.dims[1], 2);
    CU_ASSERT_EQUAL(memcmp(out.data, ((float[]){22, 33, 55, 66}), 16), 0);
    free(out.data);
    /* slices past the gathered axis, and a replica outside the group */
    int64_t big[2] = {2, 2};
    CU_ASSERT_EQUAL(zdist_distribute_all_gather_grad(dys, 2, big, 0, 1, &out, &err), -EINVAL);
    CU_ASSERT_EQUAL(zdist_distribute_all_gather_grad(dys, 2, dims, 0, 2, &out, &err), -EINVAL);
    /* zdist_distribute_slice alone: rows 1..2 of axis 0 */
    zdist_tensor_t m = s_f32(d0, 2, 3, 2);
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_slice(&m, 0, 1, 2, &out, &err), 0);
    CU_ASSERT_EQUAL(memcmp(out.data, ((float[]){3, 4, 5, 6}), 16), 0);
    free(out.data);
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_slice(&m, 0, 3, 0, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.dims[0], 0);
    free(out.data);
}

/* Strategy.gather docs: replicas' [[1,2]] / [[3,4]]... axis 0 stacks rows,
   axis 1 joins columns; partial batches along the gathered axis. */
static void
test_gather(void)
{
    float a[] = {1, 2, 3, 4}, b[] = {5, 6};
    zdist_tensor_t v[2] = {s_f32(a, 2, 2, 2), s_f32(b, 2, 1, 2)};
    zdist_tensor_t out;
    zdist_error_t err;
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_gather(v, 2, 0, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.dims[0], 3);
    CU_ASSERT_EQUAL(out.shape.dims[1], 2);
    CU_ASSERT_EQUAL(memcmp(out.data, (float[]){1, 2, 3, 4, 5, 6}, 24), 0);
    free(out.data);
    CU_ASSERT_EQUAL(zdist_distribute_gather(v, 2, 1, &out, &err), -EINVAL);

    float c[] = {1, 2, 3, 4}, d[] = {5, 6};
    zdist_tensor_t w[2] = {s_f32(c, 2, 2, 2), s_f32(d, 2, 2, 1)};
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_all_gather(w, 2, -1, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.dims[0], 2);
    CU_ASSERT_EQUAL(out.shape.dims[1], 3);
    CU_ASSERT_EQUAL(memcmp(out.data, (float[]){1, 2, 5, 3, 4, 6}, 24), 0);
    free(out.data);

    zdist_tensor_t scalar = s_f32(a, 0, 0, 0);
    CU_ASSERT_EQUAL(zdist_distribute_gather(&scalar, 1, 0, &out, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "scalar"));
}

static int
s_value_fn(const zdist_value_ctx_t *ctx, void *arg, zdist_tensor_t *ret)
{
    float *store = arg;
    if (ctx->replica_id_in_sync_group == 99)
        return -EIO;
    store[ctx->replica_id_in_sync_group] = (float)(ctx->replica_id_in_sync_group * 10 + ctx->num_replicas_in_sync);
    *ret = s_f32(&store[ctx->replica_id_in_sync_group], 1, 1, 0);
    return 0;
}

/* experimental_distribute_values_from_function: value_fn(ctx) once per
   replica; experimental_local_results gives this worker's values back. */
static void
test_values_from_function_and_local_results(void)
{
    float store[4] = {0};
    zdist_tensor_t vals[2];
    zdist_error_t err;
    /* worker 1 of 2, two replicas each: global replicas 2 and 3 */
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_values_from_function(4, 2, 2, s_value_fn, store, vals, &err), 0);
    CU_ASSERT_EQUAL(((float *)vals[0].data)[0], 24.0f);
    CU_ASSERT_EQUAL(((float *)vals[1].data)[0], 34.0f);
    CU_ASSERT_EQUAL(zdist_distribute_values_from_function(4, 3, 2, s_value_fn, store, vals, &err), -EINVAL);

    float all[4] = {0, 1, 2, 3};
    zdist_tensor_t pr[4] = {s_f32(&all[0], 1, 1, 0), s_f32(&all[1], 1, 1, 0), s_f32(&all[2], 1, 1, 0),
                            s_f32(&all[3], 1, 1, 0)};
    const zdist_tensor_t *local;
    int n;
    CU_ASSERT_EQUAL(zdist_distribute_local_results(pr, 4, 2, 2, &local, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_PTR_EQUAL(local, &pr[2]);
    CU_ASSERT_EQUAL(zdist_distribute_local_results(pr, 1, 0, 0, &local, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_EQUAL(zdist_distribute_local_results(pr, 4, 3, 2, &local, &n, &err), -EINVAL);
}

static int
s_double_fn(zdist_tensor_t *copy, int replica, void *arg)
{
    (void)replica;
    int *calls = arg;
    ((float *)copy->data)[0] *= 2;
    return ++*calls == 3 ? -ERANGE : 0;
}

static void
test_reduce_to_batch_update(void)
{
    float a[] = {1, 2}, b[] = {3, 4}, d0[2], d1[2];
    zdist_tensor_t v[2] = {s_f32(a, 1, 2, 0), s_f32(b, 1, 2, 0)};
    zdist_tensor_t dst[2] = {s_f32(d0, 1, 2, 0), s_f32(d1, 1, 2, 0)};
    zdist_error_t err;
    CU_ASSERT_EQUAL(zdist_distribute_reduce_to(ZDIST_REDUCE_MEAN, v, 2, dst, 2, &err), 0);
    CU_ASSERT_EQUAL(memcmp(d0, (float[]){2, 3}, 8), 0);
    CU_ASSERT_EQUAL(memcmp(d1, (float[]){2, 3}, 8), 0);

    /* batch: the second pair is bad -> nothing written at all */
    float e[1] = {42}, f0[2] = {-1, -1}, g[3] = {9, 9, 9};
    zdist_tensor_t v2[1] = {s_f32(g, 1, 3, 0)};
    zdist_tensor_t dbad[1] = {s_f32(e, 1, 1, 0)};
    zdist_tensor_t dok[1] = {s_f32(f0, 1, 2, 0)};
    zdist_reduce_pair_t pairs[2] = {{v, 2, dok, 1}, {v2, 1, dbad, 1}};
    CU_ASSERT_EQUAL(zdist_distribute_batch_reduce_to(ZDIST_REDUCE_SUM, pairs, 2, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "pair 1: destination 0"));
    CU_ASSERT_EQUAL(f0[0], -1.0f);
    pairs[1].dests = NULL;
    pairs[1].num_dests = 0;
    CU_ASSERT_EQUAL(zdist_distribute_batch_reduce_to(ZDIST_REDUCE_SUM, pairs, 1, &err), 0);
    CU_ASSERT_EQUAL(memcmp(f0, (float[]){4, 6}, 8), 0);

    /* destination aliasing a value */
    CU_ASSERT_EQUAL(zdist_distribute_reduce_to(ZDIST_REDUCE_SUM, v, 2, &v[0], 1, &err), 0);
    CU_ASSERT_EQUAL(memcmp(a, (float[]){4, 6}, 8), 0);

    float c[4] = {1, 1, 1, 1};
    zdist_tensor_t copies[4] = {s_f32(&c[0], 1, 1, 0), s_f32(&c[1], 1, 1, 0), s_f32(&c[2], 1, 1, 0),
                                s_f32(&c[3], 1, 1, 0)};
    int calls = 0;
    CU_ASSERT_EQUAL(zdist_distribute_update(copies, 2, s_double_fn, &calls, &err), 0);
    CU_ASSERT_EQUAL(c[0], 2.0f);
    CU_ASSERT_EQUAL(c[1], 2.0f);
    CU_ASSERT_EQUAL(zdist_distribute_update(copies, 4, s_double_fn, &calls, &err), -ERANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "replica 0"));
}

/* MirroredVariable (ON_WRITE) written in replica context. */
static void
test_on_write_aggregation(void)
{
    float c0[1] = {10}, c1[1] = {10}, x0[1] = {1}, x1[1] = {3};
    zdist_tensor_t copies[2] = {s_f32(c0, 1, 1, 0), s_f32(c1, 1, 1, 0)};
    zdist_tensor_t vals[2] = {s_f32(x0, 1, 1, 0), s_f32(x1, 1, 1, 0)};
    zdist_error_t err;

    CU_ASSERT_EQUAL(zdist_distribute_var_write_replica(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_NONE, ZDIST_VAR_ASSIGN, copies,
                                                       vals, 2, &err),
                    -EINVAL);
    CU_ASSERT_EQUAL(strncmp(err.text,
                            "You must specify an aggregation method to update a MirroredVariable in Replica "
                            "Context. You can do so by passing an explicit value for argument `aggregation` to "
                            "tf.Variable(..).",
                            150),
                    0);
    /* TF's whole text is ~1,000 characters; err.text keeps its first 511 */
    CU_ASSERT_EQUAL(strlen(err.text), ZDIST_ERROR_TEXT_MAX - 1);
    CU_ASSERT_EQUAL(c0[0], 10.0f);

    CU_ASSERT_EQUAL(zdist_distribute_var_write_replica(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_SUM, ZDIST_VAR_ASSIGN_ADD,
                                                       copies, vals, 2, &err),
                    0);
    CU_ASSERT_EQUAL(c0[0], 14.0f);
    CU_ASSERT_EQUAL(c1[0], 14.0f);
    CU_ASSERT_EQUAL(zdist_distribute_var_write_replica(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_MEAN, ZDIST_VAR_ASSIGN, copies,
                                                       vals, 2, &err),
                    0);
    CU_ASSERT_EQUAL(c0[0], 2.0f);
    CU_ASSERT_EQUAL(c1[0], 2.0f);
    CU_ASSERT_EQUAL(zdist_distribute_var_write_replica(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_ONLY_FIRST_REPLICA,
                                                       ZDIST_VAR_ASSIGN_SUB, copies, vals, 2, &err),
                    0);
    CU_ASSERT_EQUAL(c0[0], 1.0f);
    CU_ASSERT_EQUAL(c1[0], 1.0f);
    /* one replica: NONE is a plain write */
    CU_ASSERT_EQUAL(zdist_distribute_var_write_replica(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_NONE, ZDIST_VAR_ASSIGN, copies,
                                                       &vals[1], 1, &err),
                    0);
    CU_ASSERT_EQUAL(c0[0], 3.0f);

    int64_t i0[1] = {1}, i1[1] = {1}, j0[1] = {2}, j1[1] = {5};
    zdist_tensor_t icopies[2] = {{.dtype = ZDIST_DTYPE_INT64, .shape = {1, {1}}, .data = i0, .nbytes = 8},
                                 {.dtype = ZDIST_DTYPE_INT64, .shape = {1, {1}}, .data = i1, .nbytes = 8}};
    zdist_tensor_t ivals[2] = {{.dtype = ZDIST_DTYPE_INT64, .shape = {1, {1}}, .data = j0, .nbytes = 8},
                               {.dtype = ZDIST_DTYPE_INT64, .shape = {1, {1}}, .data = j1, .nbytes = 8}};
    CU_ASSERT_EQUAL(zdist_distribute_var_write_replica(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_MEAN, ZDIST_VAR_ASSIGN,
                                                       icopies, ivals, 2, &err),
                    -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "Cannot update non-float variables with tf.VariableAggregation.MEAN aggregation "
                                     "in replica context. Either change the variable dtype to float or update it in "
                                     "cross-replica context.");
    CU_ASSERT_EQUAL(zdist_distribute_var_write_replica(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_SUM, ZDIST_VAR_ASSIGN_ADD,
                                                       icopies, ivals, 2, &err),
                    0);
    CU_ASSERT_EQUAL(i0[0], 8);
    CU_ASSERT_EQUAL(i1[0], 8);

    /* cross-replica read of ON_WRITE: the primary copy */
    float r[1];
    zdist_tensor_t rt = s_f32(r, 1, 1, 0);
    CU_ASSERT_EQUAL(zdist_distribute_var_read_cross_replica(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_NONE, copies, 2, &rt, &err),
                    0);
    CU_ASSERT_EQUAL(r[0], 3.0f);
}

/* SyncOnReadVariable: replicas write their own copy; a cross-replica read
   aggregates (a metric accumulator). */
static void
test_on_read_aggregation(void)
{
    float c[3] = {0, 0, 0}, x[3] = {1, 2, 6}, r[1];
    zdist_tensor_t copies[3] = {s_f32(&c[0], 1, 1, 0), s_f32(&c[1], 1, 1, 0), s_f32(&c[2], 1, 1, 0)};
    zdist_tensor_t vals[3] = {s_f32(&x[0], 1, 1, 0), s_f32(&x[1], 1, 1, 0), s_f32(&x[2], 1, 1, 0)};
    zdist_tensor_t rt = s_f32(r, 1, 1, 0);
    zdist_error_t err;
    /* NONE is fine for the write (each replica its own copy) */
    CU_ASSERT_EQUAL(zdist_distribute_var_write_replica(ZDIST_SYNC_ON_READ, ZDIST_AGG_NONE, ZDIST_VAR_ASSIGN_ADD, copies,
                                                       vals, 3, &err),
                    0);
    CU_ASSERT_EQUAL(c[0], 1.0f);
    CU_ASSERT_EQUAL(c[2], 6.0f);
    /* ... but not for a cross-replica read */
    CU_ASSERT_EQUAL(zdist_distribute_var_read_cross_replica(ZDIST_SYNC_ON_READ, ZDIST_AGG_NONE, copies, 3, &rt, &err),
                    -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "Could not convert from `tf.VariableAggregation` VariableAggregation.NONE "
                                     "to`tf.distribute.ReduceOp` type");
    CU_ASSERT_EQUAL(zdist_distribute_var_read_cross_replica(ZDIST_SYNC_ON_READ, ZDIST_AGG_SUM, copies, 3, &rt, &err), 0);
    CU_ASSERT_EQUAL(r[0], 9.0f);
    CU_ASSERT_EQUAL(zdist_distribute_var_read_cross_replica(ZDIST_SYNC_ON_READ, ZDIST_AGG_MEAN, copies, 3, &rt, &err),
                    0);
    CU_ASSERT_EQUAL(r[0], 3.0f);
    CU_ASSERT_EQUAL(zdist_distribute_var_read_cross_replica(ZDIST_SYNC_ON_READ, ZDIST_AGG_ONLY_FIRST_REPLICA, copies, 3,
                                                            &rt, &err),
                    0);
    CU_ASSERT_EQUAL(r[0], 1.0f);

    /* cross-replica writes */
    float nine[1] = {9};
    zdist_tensor_t v9 = s_f32(nine, 1, 1, 0);
    CU_ASSERT_EQUAL(zdist_distribute_var_write_cross_replica(ZDIST_SYNC_ON_READ, ZDIST_AGG_SUM, ZDIST_VAR_ASSIGN_ADD,
                                                             copies, 3, &v9, &err),
                    -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "SyncOnReadVariable does not support `assign_add` in cross-replica context when "
                                     "aggregation is set to `tf.VariableAggregation.SUM`.");
    CU_ASSERT_EQUAL(zdist_distribute_var_write_cross_replica(ZDIST_SYNC_ON_READ, ZDIST_AGG_SUM, ZDIST_VAR_ASSIGN_SUB,
                                                             copies, 3, &v9, &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "`assign_sub`"));
    /* assign of a SUM variable: value / replicas in each copy, read gives 9 back */
    CU_ASSERT_EQUAL(zdist_distribute_var_write_cross_replica(ZDIST_SYNC_ON_READ, ZDIST_AGG_SUM, ZDIST_VAR_ASSIGN,
                                                             copies, 3, &v9, &err),
                    0);
    CU_ASSERT_EQUAL(c[1], 3.0f);
    CU_ASSERT_EQUAL(zdist_distribute_var_read_cross_replica(ZDIST_SYNC_ON_READ, ZDIST_AGG_SUM, copies, 3, &rt, &err), 0);
    CU_ASSERT_EQUAL(r[0], 9.0f);
    /* MEAN: assign_add reaches every copy; reset a metric with assign(0) */
    CU_ASSERT_EQUAL(zdist_distribute_var_write_cross_replica(ZDIST_SYNC_ON_READ, ZDIST_AGG_MEAN, ZDIST_VAR_ASSIGN_ADD,
                                                             copies, 3, &v9, &err),
                    0);
    CU_ASSERT_EQUAL(c[0], 12.0f);
    CU_ASSERT_EQUAL(c[2], 12.0f);
    /* ON_WRITE cross-replica write: every copy, the value aliasing copy 0 */
    CU_ASSERT_EQUAL(zdist_distribute_var_write_cross_replica(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_NONE, ZDIST_VAR_ASSIGN_ADD,
                                                             copies, 3, &copies[0], &err),
                    0);
    CU_ASSERT_EQUAL(c[0], 24.0f);
    CU_ASSERT_EQUAL(c[1], 24.0f);
    CU_ASSERT_EQUAL(c[2], 24.0f);
    CU_ASSERT_EQUAL(zdist_distribute_var_write_cross_replica(ZDIST_SYNC_ON_WRITE, (zdist_var_agg_t)7, ZDIST_VAR_ASSIGN,
                                                             copies, 3, &v9, &err),
                    -EINVAL);
}

/* The runtime's kernels give what the checked functions give: the worker's
   replica threads each reduce a chunk [lo, hi) and nothing outside it. */
static void
test_runtime_kernels(void)
{
    float a[] = {1.5f, 2.25f, 3, 4, 5}, b[] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f}, c[] = {7, 8, 9, 10, 11};
    zdist_tensor_t v[3] = {s_f32(a, 1, 5, 0), s_f32(b, 1, 5, 0), s_f32(c, 1, 5, 0)};
    zdist_tensor_t ref;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_distribute_reduce(ZDIST_REDUCE_MEAN, v, 3, ZDIST_AXIS_NONE, &ref, &err), 0);
    float a2[5];
    memcpy(a2, a, sizeof a);
    float *bufs[3] = {a2, b, c};
    zdist_distribute_reduce_f32(ZDIST_REDUCE_MEAN, bufs, 3, 1, 3); /* one thread's chunk */
    CU_ASSERT_EQUAL(a2[0], 1.5f);                                 /* outside: untouched */
    CU_ASSERT_EQUAL(a2[3], 4.0f);
    zdist_distribute_reduce_f32(ZDIST_REDUCE_MEAN, bufs, 3, 0, 1);
    zdist_distribute_reduce_f32(ZDIST_REDUCE_MEAN, bufs, 3, 3, 5);
    CU_ASSERT_EQUAL(memcmp(a2, ref.data, sizeof a2), 0); /* bitwise what reduce gives */
    free(ref.data);

    /* aggregation: SUM, MEAN, ONLY_FIRST_REPLICA, in place over values[0] */
    const float *vals[3] = {a, b, c};
    float out[5] = {0};
    zdist_distribute_aggregate_f32(ZDIST_AGG_SUM, vals, 3, 0, 5, out);
    CU_ASSERT_EQUAL(out[4], 5 + 0.5f + 11);
    zdist_distribute_aggregate_f32(ZDIST_AGG_ONLY_FIRST_REPLICA, vals, 3, 0, 5, out);
    CU_ASSERT_EQUAL(out[1], 2.25f);
    float first[2] = {2, 4}, second[2] = {6, 8};
    const float *pair[2] = {first, second};
    zdist_distribute_aggregate_f32(ZDIST_AGG_MEAN, pair, 2, 0, 2, first);
    CU_ASSERT_EQUAL(first[0], 4.0f);
    CU_ASSERT_EQUAL(first[1], 6.0f);

    /* who may write in a replica context */
    CU_ASSERT_EQUAL(zdist_distribute_check_replica_write(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_NONE, ZDIST_DTYPE_FLOAT32, 1,
                                                         &err),
                    0);
    CU_ASSERT_EQUAL(zdist_distribute_check_replica_write(ZDIST_SYNC_ON_READ, ZDIST_AGG_NONE, ZDIST_DTYPE_FLOAT32, 4,
                                                         &err),
                    0);
    CU_ASSERT_EQUAL(zdist_distribute_check_replica_write(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_NONE, ZDIST_DTYPE_FLOAT32, 2,
                                                         &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "You must specify an aggregation method to update a MirroredVariable"));
    CU_ASSERT_EQUAL(zdist_distribute_check_replica_write(ZDIST_SYNC_ON_WRITE, ZDIST_AGG_MEAN, ZDIST_DTYPE_INT32, 2,
                                                         &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "Cannot update non-float variables"));

    /* gather into a caller's buffer; too small: -ENOSPC, nothing written */
    float g1[] = {1, 2, 3, 4}, g2[] = {5, 6};
    zdist_tensor_t parts[2] = {s_f32(g1, 2, 2, 2), s_f32(g2, 2, 1, 2)};
    float dst[6] = {0}, small[4] = {-1, -1, -1, -1};
    zdist_tensor_t into = {.data = dst, .nbytes = sizeof dst};
    CU_ASSERT_EQUAL(zdist_distribute_gather_into(parts, 2, 0, &into, &err), 0);
    CU_ASSERT_EQUAL(into.shape.rank, 2);
    CU_ASSERT_EQUAL(into.shape.dims[0], 3);
    CU_ASSERT_EQUAL(into.nbytes, sizeof dst);
    CU_ASSERT_EQUAL(dst[5], 6.0f);
    zdist_tensor_t tight = {.data = small, .nbytes = sizeof small};
    CU_ASSERT_EQUAL(zdist_distribute_gather_into(parts, 2, 0, &tight, &err), -ENOSPC);
    CU_ASSERT_EQUAL(small[0], -1.0f);
    CU_ASSERT_EQUAL(tight.nbytes, sizeof small);
    /* along axis 1: [[1,2,5],[3,4,6]] needs shapes equal outside it */
    zdist_tensor_t cols[2] = {s_f32(g1, 2, 2, 2), s_f32(g2, 2, 2, 1)};
    into = (zdist_tensor_t){.data = dst, .nbytes = sizeof dst};
    CU_ASSERT_EQUAL(zdist_distribute_gather_into(cols, 2, 1, &into, &err), 0);
    CU_ASSERT_EQUAL(dst[2], 5.0f);
    CU_ASSERT_EQUAL(dst[5], 6.0f);
    CU_ASSERT_EQUAL(zdist_distribute_gather_into(parts, 2, 1, &into, &err), -EINVAL);
}

void
zdist_test_distribute_register(void)
{
    ZDIST_SUITE("distribute", {"reduce with an axis: partial batch MEAN 2.5", test_reduce_partial_batch_axis},
                {"reduce without an axis: element-wise", test_reduce_axis_none},
                {"reduce over a tuple of axes", test_reduce_axes_tuple},
                {"reduce's axis errors in TF's text", test_reduce_axes_tf_errors},
                {"all_gather's gradient: summed, each replica its rows", test_all_gather_grad}, {"gather / all_gather", test_gather},
                {"values from function, local results", test_values_from_function_and_local_results},
                {"reduce_to, batch_reduce_to, update", test_reduce_to_batch_update},
                {"ON_WRITE aggregation (MirroredVariable)", test_on_write_aggregation},
                {"ON_READ aggregation (SyncOnReadVariable)", test_on_read_aggregation},
                {"the runtime's float32 kernels agree with reduce", test_runtime_kernels});
}
