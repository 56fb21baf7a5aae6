/* CUnit suite: partitioners (TF's Fixed/MinSize/MaxSize), Div split, ps placement, row lookups. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "zdist/partition.h"

#define HAS(text, sub) CU_ASSERT_PTR_NOT_NULL(strstr((text), (sub)))

static zdist_shape_t
s_shape(int rank, int64_t d0, int64_t d1, int64_t d2)
{
    zdist_shape_t s = {.rank = rank, .dims = {d0, d1, d2}};
    return s;
}

static zdist_partitioner_t
s_parse_ok(const char *text)
{
    zdist_partitioner_t p;
    memset(&p, 0xab, sizeof p);
    zdist_error_t err = {0};
    int rc = zdist_partitioner_parse(text, &p, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0)
        fprintf(stderr, "\nparse '%s': %s\n", text, err.text);
    return p;
}

/* Partitions of `spec` on shape along axis; asserts success. */
static void
s_parts(const char *spec, zdist_shape_t shape, zdist_dtype_t dtype, int axis, int64_t *out)
{
    zdist_partitioner_t p = s_parse_ok(spec);
    zdist_error_t err = {0};
    int rc = zdist_partitioner_partitions(&p, &shape, dtype, axis, out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc != 0)
        fprintf(stderr, "\npartitions '%s': %s\n", spec, err.text);
}

static void
test_parse_specs(void)
{
    zdist_partitioner_t p = s_parse_ok("none");
    CU_ASSERT_EQUAL(p.kind, ZDIST_PARTITIONER_NONE);

    p = s_parse_ok("fixed:3");
    CU_ASSERT_EQUAL(p.kind, ZDIST_PARTITIONER_FIXED);
    CU_ASSERT_EQUAL(p.num_shards, 3);

    p = s_parse_ok("min_size");
    CU_ASSERT_EQUAL(p.kind, ZDIST_PARTITIONER_MIN_SIZE);
    CU_ASSERT_EQUAL(p.min_shard_bytes, 262144);
    CU_ASSERT_EQUAL(p.max_shards, 1);
    CU_ASSERT_EQUAL(p.bytes_per_string, 16);

    p = s_parse_ok("min_size:4:10");
    CU_ASSERT_EQUAL(p.min_shard_bytes, 4);
    CU_ASSERT_EQUAL(p.max_shards, 10);
    CU_ASSERT_EQUAL(p.bytes_per_string, 16);

    p = s_parse_ok("min_size:64:8:100");
    CU_ASSERT_EQUAL(p.bytes_per_string, 100);

    p = s_parse_ok("max_size:1024");
    CU_ASSERT_EQUAL(p.kind, ZDIST_PARTITIONER_MAX_SIZE);
    CU_ASSERT_EQUAL(p.max_shard_bytes, 1024);
    CU_ASSERT_EQUAL(p.max_shards, 0);
    CU_ASSERT_EQUAL(p.bytes_per_string, 16);

    p = s_parse_ok("max_size:4:none:32");
    CU_ASSERT_EQUAL(p.max_shards, 0);
    CU_ASSERT_EQUAL(p.bytes_per_string, 32);
    p = s_parse_ok("max_size:4:2");
    CU_ASSERT_EQUAL(p.max_shards, 2);

    /* format is canonical and parses back to the same thing */
    const char *specs[] = {"none", "fixed:2", "min_size", "min_size:4:10:3", "max_size:4", "max_size:7:2:9"};
    const char *canon[] = {"none", "fixed:2", "min_size:262144:1:16", "min_size:4:10:3", "max_size:4:0:16",
                           "max_size:7:2:9"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        char buf[64];
        zdist_partitioner_t a = s_parse_ok(specs[i]);
        CU_ASSERT_STRING_EQUAL(zdist_partitioner_format(&a, buf, sizeof buf), canon[i]);
        zdist_partitioner_t b = s_parse_ok(buf);
        CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
    }
}

static void
s_parse_fails(const char *text, const char *sub)
{
    zdist_partitioner_t p = {.kind = ZDIST_PARTITIONER_FIXED, .num_shards = 77};
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_partitioner_parse(text, &p, &err), -EINVAL);
    CU_ASSERT_EQUAL(err.code, -EINVAL);
    HAS(err.text, sub);
    if (!strstr(err.text, sub))
        fprintf(stderr, "\n'%s' -> '%s' (wanted '%s')\n", text ? text : "(null)", err.text, sub);
    /* untouched on failure */
    CU_ASSERT_EQUAL(p.kind, ZDIST_PARTITIONER_FIXED);
    CU_ASSERT_EQUAL(p.num_shards, 77);
}

static void
test_parse_errors(void)
{
    s_parse_fails(NULL, "partitioner spec is empty");
    s_parse_fails("", "partitioner spec is empty");
    s_parse_fails("round_robin:2", "unknown kind 'round_robin'");
    s_parse_fails("fixed", "fixed takes exactly 1 argument: fixed:NUM_SHARDS");
    s_parse_fails("fixed:2:3", "fixed takes exactly 1 argument");
    s_parse_fails("none:1", "none takes exactly 0 arguments");
    s_parse_fails("max_size", "max_size:MAX_SHARD_BYTES");
    s_parse_fails("min_size:1:2:3:4", "min_size takes at most 3 arguments");
    s_parse_fails("fixed:two", "fixed: num_shards 'two' is not an integer");
    s_parse_fails("fixed:", "fixed: num_shards '' is not an integer");
    s_parse_fails("fixed:99999999999999999999", "fixed: num_shards '99999999999999999999' is out of range");
    s_parse_fails("fixed:0", "fixed: num_shards must be positive, got 0");
    s_parse_fails("fixed:-2", "fixed: num_shards must be positive, got -2");
    s_parse_fails("min_size:0", "min_size: min_shard_bytes must be positive, got 0");
    s_parse_fails("min_size:4:0", "min_size: max_shards must be positive, got 0");
    s_parse_fails("min_size:4:none", "min_size: max_shards 'none' is not an integer");
    s_parse_fails("min_size:4:2:0", "min_size: bytes_per_string must be positive, got 0");
    s_parse_fails("max_size:0", "max_size: max_shard_bytes must be positive, got 0");
    s_parse_fails("max_size:4:-1", "max_size: max_shards must be positive (or 0 for no limit), got -1");
    s_parse_fails("max_size:4:2:-5", "max_size: bytes_per_string must be positive, got -5");
    s_parse_fails("max_size:4:x", "max_size: max_shards 'x' is not an integer (or none)");

    /* hand-built specs are validated too */
    zdist_error_t err = {0};
    zdist_partitioner_t bad = {.kind = ZDIST_PARTITIONER_FIXED, .num_shards = 0};
    CU_ASSERT_EQUAL(zdist_partitioner_validate(&bad, &err), -EINVAL);
    HAS(err.text, "fixed: num_shards must be positive, got 0");
    zdist_shape_t s = s_shape(1, 10, 0, 0);
    int64_t out[1] = {42};
    CU_ASSERT_EQUAL(zdist_partitioner_partitions(&bad, &s, ZDIST_DTYPE_FLOAT32, 0, out, &err), -EINVAL);
    CU_ASSERT_EQUAL(out[0], 42);
    zdist_partitioner_t weird = {.kind = (zdist_partitioner_kind_t) 9};
    CU_ASSERT_EQUAL(zdist_partitioner_validate(&weird, &err), -EINVAL);
    HAS(err.text, "partitioner kind 9 is unknown");
}

static void
test_fixed(void)
{
    int64_t out[3];
    /* TF's docs: FixedShardsPartitioner(2) on [10, 3] -> [2, 1] */
    s_parts("fixed:2", s_shape(2, 10, 3, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 2);
    CU_ASSERT_EQUAL(out[1], 1);
    /* fewer rows than shards: min(num_shards, dim) */
    s_parts("fixed:5", s_shape(2, 3, 4, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 3);
    /* dimension 1 */
    s_parts("fixed:4", s_shape(2, 1, 8, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 1);
    CU_ASSERT_EQUAL(out[1], 1);
    /* dimension 0: TF answers 0 (placement then refuses it) */
    s_parts("fixed:4", s_shape(2, 0, 8, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 0);
    /* non-zero axis */
    s_parts("fixed:3", s_shape(3, 4, 10, 2), ZDIST_DTYPE_FLOAT32, 1, out);
    CU_ASSERT_EQUAL(out[0], 1);
    CU_ASSERT_EQUAL(out[1], 3);
    CU_ASSERT_EQUAL(out[2], 1);
    /* dtype is ignored, as TF's `del dtype` */
    s_parts("fixed:3", s_shape(1, 10, 0, 0), ZDIST_DTYPE_INVALID, 0, out);
    CU_ASSERT_EQUAL(out[0], 3);
    /* none: all ones */
    s_parts("none", s_shape(3, 100, 10, 2), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 1);
    CU_ASSERT_EQUAL(out[1], 1);
    CU_ASSERT_EQUAL(out[2], 1);
}

static void
test_min_size(void)
{
    int64_t out[3];
    /* TF's docs: MinSizePartitioner(min_shard_bytes=4, max_shards=2) on [6, 1] float32 -> [2, 1] */
    s_parts("min_size:4:2", s_shape(2, 6, 1, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 2);
    CU_ASSERT_EQUAL(out[1], 1);
    /* ... max_shards=10 -> [6, 1] */
    s_parts("min_size:4:10", s_shape(2, 6, 1, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 6);
    /* min_max_variable_partitioner's docs: [1024, 1024] float32, 256K: 16 when max >= 16 */
    s_parts("min_size:262144:100", s_shape(2, 1024, 1024, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 16);
    s_parts("min_size:262144:5", s_shape(2, 1024, 1024, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 5);
    /* ParameterServerStrategy docs: Embedding(1024, 1024), MinSize(256 << 10, max_shards=2) -> 2 */
    s_parts("min_size:262144:2", s_shape(2, 1024, 1024, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 2);
    /* default max_shards is 1 */
    s_parts("min_size", s_shape(2, 1024, 1024, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 1);
    /* ceil, not floor: 25 bytes / 4 = 6.25 -> 7 */
    s_parts("min_size:4:100", s_shape(1, 25, 0, 0), ZDIST_DTYPE_UINT8, 0, out);
    CU_ASSERT_EQUAL(out[0], 7);
    /* small variable: at least one shard */
    s_parts("min_size:262144:8", s_shape(2, 10, 10, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 1);
    /* fewer rows than wanted shards: capped by dim */
    s_parts("min_size:4:100", s_shape(2, 3, 100, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 3);
    /* dimension 1 and dimension 0 */
    s_parts("min_size:4:100", s_shape(2, 1, 100, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 1);
    s_parts("min_size:4:100", s_shape(2, 0, 100, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 1);
    /* string: [10, 2] with 16 bytes per string = 320 bytes / 64 = 5 */
    s_parts("min_size:64:10", s_shape(2, 10, 2, 0), ZDIST_DTYPE_STRING, 0, out);
    CU_ASSERT_EQUAL(out[0], 5);
    /* ... with 100 bytes per string = 2000 / 64 = 31.25 -> 32, capped by dim 10 */
    s_parts("min_size:64:10:100", s_shape(2, 10, 2, 0), ZDIST_DTYPE_STRING, 0, out);
    CU_ASSERT_EQUAL(out[0], 10);
    /* bytes_per_string only matters for strings */
    s_parts("min_size:64:10:100", s_shape(2, 10, 2, 0), ZDIST_DTYPE_INT64, 0, out);
    CU_ASSERT_EQUAL(out[0], 3); /* 160 / 64 = 2.5 -> 3 */
    /* non-zero axis: [4, 10] float32 = 160 bytes / 16 = 10, max 8 */
    s_parts("min_size:16:8", s_shape(2, 4, 10, 0), ZDIST_DTYPE_FLOAT32, 1, out);
    CU_ASSERT_EQUAL(out[0], 1);
    CU_ASSERT_EQUAL(out[1], 8);
    /* sizing-only dtypes */
    s_parts("min_size:16:100", s_shape(1, 10, 0, 0), ZDIST_DTYPE_COMPLEX128, 0, out);
    CU_ASSERT_EQUAL(out[0], 10);
    /* huge shapes do not overflow: bytes far past int64 */
    zdist_shape_t huge = {.rank = 3, .dims = {INT64_MAX, INT64_MAX, INT64_MAX}};
    s_parts("min_size:1:7", huge, ZDIST_DTYPE_COMPLEX128, 0, out);
    CU_ASSERT_EQUAL(out[0], 7);
}

static void
test_max_size(void)
{
    int64_t out[3];
    /* TF's docs on [6, 1] float32: max_shard_bytes=4 -> [6, 1]; +max_shards=2 -> [2, 1]; 1024 -> [1, 1] */
    s_parts("max_size:4", s_shape(2, 6, 1, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 6);
    CU_ASSERT_EQUAL(out[1], 1);
    s_parts("max_size:4:2", s_shape(2, 6, 1, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 2);
    s_parts("max_size:1024", s_shape(2, 6, 1, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 1);
    /* a slice bigger than a shard still takes one shard per slice */
    s_parts("max_size:3", s_shape(2, 6, 1, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 6);
    /* [10, 3] float32: 12 bytes a slice, 40 -> 3 slices a shard -> ceil(10 / 3) = 4 */
    s_parts("max_size:40", s_shape(2, 10, 3, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 4);
    s_parts("max_size:40:none", s_shape(2, 10, 3, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 4);
    s_parts("max_size:40:3", s_shape(2, 10, 3, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 3);
    /* a cap above the answer changes nothing */
    s_parts("max_size:40:50", s_shape(2, 10, 3, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 4);
    /* dimension 1 */
    s_parts("max_size:1", s_shape(2, 1, 100, 0), ZDIST_DTYPE_FLOAT32, 0, out);
    CU_ASSERT_EQUAL(out[0], 1);
    /* string: [10, 2], 16 bytes each -> 32 a slice, 100 -> 3 a shard -> 4; 50 bytes each -> 100 -> 10 */
    s_parts("max_size:100", s_shape(2, 10, 2, 0), ZDIST_DTYPE_STRING, 0, out);
    CU_ASSERT_EQUAL(out[0], 4);
    s_parts("max_size:100:0:50", s_shape(2, 10, 2, 0), ZDIST_DTYPE_STRING, 0, out);
    CU_ASSERT_EQUAL(out[0], 10);
    /* non-zero axis: [4, 10] float32 along 1: 16 bytes a slice, 40 -> 2 a shard -> 5 */
    s_parts("max_size:40", s_shape(2, 4, 10, 0), ZDIST_DTYPE_FLOAT32, 1, out);
    CU_ASSERT_EQUAL(out[0], 1);
    CU_ASSERT_EQUAL(out[1], 5);
    /* huge slices saturate: one slice a shard */
    zdist_shape_t huge = {.rank = 3, .dims = {5, INT64_MAX, INT64_MAX}};
    s_parts("max_size:4", huge, ZDIST_DTYPE_FLOAT64, 0, out);
    CU_ASSERT_EQUAL(out[0], 5);
}

static void
s_parts_fail(const char *spec, zdist_shape_t shape, zdist_dtype_t dtype, int axis, const char *sub)
{
    zdist_partitioner_t p = s_parse_ok(spec);
    zdist_error_t err = {0};
    int64_t out[3] = {42, 42, 42};
    CU_ASSERT_EQUAL(zdist_partitioner_partitions(&p, &shape, dtype, axis, out, &err), -EINVAL);
    CU_ASSERT_EQUAL(err.code, -EINVAL);
    HAS(err.text, sub);
    if (!strstr(err.text, sub))
        fprintf(stderr, "\n'%s' -> '%s' (wanted '%s')\n", spec, err.text, sub);
    CU_ASSERT_EQUAL(out[0], 42);
}

static void
test_partition_errors(void)
{
    s_parts_fail("fixed:2", s_shape(2, 10, 3, 0), ZDIST_DTYPE_FLOAT32, 2, "axis 2 is out of range for shape [10,3]: use 0..1");
    s_parts_fail("none", s_shape(2, 10, 3, 0), ZDIST_DTYPE_FLOAT32, -1, "axis -1 is out of range");
    s_parts_fail("min_size", s_shape(0, 0, 0, 0), ZDIST_DTYPE_FLOAT32, 0, "cannot partition a rank-0");
    s_parts_fail("max_size:4", s_shape(2, 0, 3, 0), ZDIST_DTYPE_FLOAT32, 0,
                 "max_size: cannot size shards of shape [0,3]: it has no elements");
    s_parts_fail("max_size:4", s_shape(2, 6, 0, 0), ZDIST_DTYPE_FLOAT32, 0, "it has no elements");
    s_parts_fail("min_size", s_shape(1, 6, 0, 0), ZDIST_DTYPE_INVALID, 0, "min_size: dtype 0 is not valid");
    s_parts_fail("max_size:4", s_shape(1, 6, 0, 0), ZDIST_DTYPE_INVALID, 0, "max_size: dtype 0 is not valid");
    s_parts_fail("fixed:2", s_shape(2, 6, -3, 0), ZDIST_DTYPE_FLOAT32, 0, "shape dimension 1 is negative");
}

static void
test_div_split(void)
{
    int64_t off, rows;
    /* TF's example: 13 rows over 5 shards -> [[0,1,2],[3,4,5],[6,7,8],[9,10],[11,12]] */
    const int64_t want13[5][2] = {{0, 3}, {3, 3}, {6, 3}, {9, 2}, {11, 2}};
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(zdist_partition_div(13, 5, i, &off, &rows), 0);
        CU_ASSERT_EQUAL(off, want13[i][0]);
        CU_ASSERT_EQUAL(rows, want13[i][1]);
    }
    /* TF's comment: 10 over 4 -> [3, 3, 2, 2], offsets [0, 3, 6, 8] */
    const int64_t want10[4][2] = {{0, 3}, {3, 3}, {6, 2}, {8, 2}};
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(zdist_partition_div(10, 4, i, &off, &rows), 0);
        CU_ASSERT_EQUAL(off, want10[i][0]);
        CU_ASSERT_EQUAL(rows, want10[i][1]);
    }
    /* even split, and one shard */
    CU_ASSERT_EQUAL(zdist_partition_div(12, 4, 3, &off, &rows), 0);
    CU_ASSERT_EQUAL(off, 9);
    CU_ASSERT_EQUAL(rows, 3);
    CU_ASSERT_EQUAL(zdist_partition_div(7, 1, 0, &off, &rows), 0);
    CU_ASSERT_EQUAL(off, 0);
    CU_ASSERT_EQUAL(rows, 7);
    /* no overflow near INT64_MAX */
    CU_ASSERT_EQUAL(zdist_partition_div(INT64_MAX, 2, 1, &off, &rows), 0);
    CU_ASSERT_EQUAL(off, INT64_MAX / 2 + 1);
    CU_ASSERT_EQUAL(rows, INT64_MAX / 2);
    off = rows = 99;
    CU_ASSERT_EQUAL(zdist_partition_div(10, 0, 0, &off, &rows), -EINVAL);
    CU_ASSERT_EQUAL(zdist_partition_div(10, 4, 4, &off, &rows), -EINVAL);
    CU_ASSERT_EQUAL(zdist_partition_div(10, 4, -1, &off, &rows), -EINVAL);
    CU_ASSERT_EQUAL(zdist_partition_div(-1, 4, 0, &off, &rows), -EINVAL);
    CU_ASSERT_EQUAL(off, 99);
    CU_ASSERT_EQUAL(rows, 99);
}

static void
test_check_ps(void)
{
    zdist_error_t err = {0};
    const int64_t ok1[2] = {5, 1}, ok2[1] = {1};
    CU_ASSERT_EQUAL(zdist_partitions_check_ps(ok1, 2, &err), 0);
    CU_ASSERT_EQUAL(zdist_partitions_check_ps(ok2, 1, &err), 0);
    const int64_t axis1[2] = {1, 3};
    CU_ASSERT_EQUAL(zdist_partitions_check_ps(axis1, 2, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "variable_partitioner must return a list/tuple whose elements are 1 besides "
                                     "the first element (non-zero), got: [1, 3]");
    const int64_t zero[3] = {0, 1, 1};
    CU_ASSERT_EQUAL(zdist_partitions_check_ps(zero, 3, &err), -EINVAL);
    HAS(err.text, "(non-zero), got: [0, 1, 1]");
    const int64_t neg[1] = {-2};
    CU_ASSERT_EQUAL(zdist_partitions_check_ps(neg, 1, &err), -EINVAL);
    HAS(err.text, "got: [-2]");
    CU_ASSERT_EQUAL(zdist_partitions_check_ps(ok1, 0, &err), -EINVAL);
    HAS(err.text, "got: []");
}

static void
s_assert_shard(const zdist_layout_t *l, int i, const char *name, int ps, int64_t offset, int64_t rows)
{
    CU_ASSERT_FATAL(i < l->num_shards);
    CU_ASSERT_STRING_EQUAL(l->shards[i].name, name);
    CU_ASSERT_EQUAL(l->shards[i].ps, ps);
    CU_ASSERT_EQUAL(l->shards[i].offset, offset);
    CU_ASSERT_EQUAL(l->shards[i].rows, rows);
}

static void
test_place_div(void)
{
    zdist_placement_t *ctx = zdist_placement_new(3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_EQUAL(zdist_placement_num_ps(ctx), 3);
    zdist_error_t err = {0};
    zdist_layout_t *l = NULL;
    zdist_shape_t s = s_shape(2, 13, 4, 0);
    const int64_t p5[2] = {5, 1};
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "emb", &s, p5, &l, &err), 0);
    CU_ASSERT_STRING_EQUAL(l->name, "emb");
    CU_ASSERT_TRUE(l->sharded);
    CU_ASSERT_EQUAL(l->num_shards, 5);
    CU_ASSERT_TRUE(zdist_shape_equal(&l->shape, &s));
    s_assert_shard(l, 0, "emb/part_0", 0, 0, 3);
    s_assert_shard(l, 1, "emb/part_1", 1, 3, 3);
    s_assert_shard(l, 2, "emb/part_2", 2, 6, 3);
    s_assert_shard(l, 3, "emb/part_3", 0, 9, 2);
    s_assert_shard(l, 4, "emb/part_4", 1, 11, 2);
    CU_ASSERT_EQUAL(zdist_placement_count(ctx), 5);
    zdist_layout_destroy(&l);
    CU_ASSERT_PTR_NULL(l);
    zdist_layout_destroy(&l); /* idempotent */

    /* fewer rows than shards: k = min(partitions[0], shape[0]) */
    zdist_shape_t few = s_shape(2, 3, 4, 0);
    const int64_t p8[2] = {8, 1};
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "few", &few, p8, &l, &err), 0);
    CU_ASSERT_EQUAL(l->num_shards, 3);
    s_assert_shard(l, 0, "few/part_0", 2, 0, 1); /* count was 5 -> 5 % 3 = 2 */
    s_assert_shard(l, 1, "few/part_1", 0, 1, 1);
    s_assert_shard(l, 2, "few/part_2", 1, 2, 1);
    zdist_layout_destroy(&l);

    /* dimension 1: min(4, 1) = 1 -> unsharded, plain name */
    zdist_shape_t one = s_shape(2, 1, 8, 0);
    const int64_t p4[2] = {4, 1};
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "one", &one, p4, &l, &err), 0);
    CU_ASSERT_FALSE(l->sharded);
    CU_ASSERT_EQUAL(l->num_shards, 1);
    s_assert_shard(l, 0, "one", 2, 0, 1);
    zdist_layout_destroy(&l);
    CU_ASSERT_EQUAL(zdist_placement_count(ctx), 9);
    zdist_placement_destroy(&ctx);
    CU_ASSERT_PTR_NULL(ctx);
    zdist_placement_destroy(&ctx);
    CU_ASSERT_PTR_NULL(zdist_placement_new(0));
    CU_ASSERT_PTR_NULL(zdist_placement_new(-1));
}

static void
test_place_round_robin(void)
{
    /* TF's _variable_count % num_ps, shared by every variable in creation order */
    zdist_placement_t *ctx = zdist_placement_new(2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    zdist_error_t err = {0};
    zdist_layout_t *l = NULL;
    zdist_partitioner_t fixed5 = s_parse_ok("fixed:5");
    zdist_partitioner_t none = s_parse_ok("none");

    zdist_shape_t a = s_shape(2, 13, 4, 0);
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place_variable(ctx, "a", &a, ZDIST_DTYPE_FLOAT32, &fixed5, &l, &err), 0);
    CU_ASSERT_EQUAL(l->num_shards, 5);
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(l->shards[i].ps, i % 2);
    zdist_layout_destroy(&l);

    /* a scalar is never partitioned; takes the next ps */
    zdist_shape_t scalar = s_shape(0, 0, 0, 0);
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place_variable(ctx, "step", &scalar, ZDIST_DTYPE_INT64, &fixed5, &l, &err), 0);
    CU_ASSERT_FALSE(l->sharded);
    s_assert_shard(l, 0, "step", 1, 0, 0);
    zdist_layout_destroy(&l);

    /* no partitioner */
    zdist_shape_t c = s_shape(1, 10, 0, 0);
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place_variable(ctx, "c", &c, ZDIST_DTYPE_FLOAT32, &none, &l, &err), 0);
    s_assert_shard(l, 0, "c", 0, 0, 10);
    zdist_layout_destroy(&l);
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place_variable(ctx, "c2", &c, ZDIST_DTYPE_FLOAT32, NULL, &l, &err), 0);
    s_assert_shard(l, 0, "c2", 1, 0, 10);
    zdist_layout_destroy(&l);

    /* a failed placement does not advance the counter */
    zdist_partitioner_t fixed3 = {.kind = ZDIST_PARTITIONER_FIXED, .num_shards = 3};
    zdist_shape_t empty = s_shape(2, 0, 4, 0);
    l = (zdist_layout_t *) &err; /* must stay untouched */
    CU_ASSERT_EQUAL(zdist_placement_place_variable(ctx, "e", &empty, ZDIST_DTYPE_FLOAT32, &fixed3, &l, &err), -EINVAL);
    HAS(err.text, "(non-zero), got: [0, 1]");
    CU_ASSERT_PTR_EQUAL(l, (zdist_layout_t *) &err);
    l = NULL;
    CU_ASSERT_EQUAL(zdist_placement_count(ctx), 8);

    /* 10 rows over 4: 3,3,2,2 starting at ps 8 % 2 = 0 */
    zdist_shape_t d = s_shape(2, 10, 2, 0);
    const int64_t p4[2] = {4, 1};
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "d", &d, p4, &l, &err), 0);
    s_assert_shard(l, 0, "d/part_0", 0, 0, 3);
    s_assert_shard(l, 1, "d/part_1", 1, 3, 3);
    s_assert_shard(l, 2, "d/part_2", 0, 6, 2);
    s_assert_shard(l, 3, "d/part_3", 1, 8, 2);
    zdist_layout_destroy(&l);
    CU_ASSERT_EQUAL(zdist_placement_count(ctx), 12);

    /* min_size through place_variable: [1024, 1024] float32, 256K, max 2 -> 512 + 512 */
    zdist_partitioner_t ms = s_parse_ok("min_size:262144:2");
    zdist_shape_t emb = s_shape(2, 1024, 1024, 0);
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place_variable(ctx, "embedding", &emb, ZDIST_DTYPE_FLOAT32, &ms, &l, &err), 0);
    s_assert_shard(l, 0, "embedding/part_0", 0, 0, 512);
    s_assert_shard(l, 1, "embedding/part_1", 1, 512, 512);
    zdist_layout_destroy(&l);
    zdist_placement_destroy(&ctx);
}

static void
test_place_errors(void)
{
    zdist_placement_t *ctx = zdist_placement_new(2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    zdist_error_t err = {0};
    zdist_layout_t *l = NULL;
    zdist_shape_t s = s_shape(2, 10, 4, 0);

    const int64_t axis1[2] = {1, 2};
    CU_ASSERT_EQUAL(zdist_placement_place(ctx, "v", &s, axis1, &l, &err), -EINVAL);
    HAS(err.text, "variable_partitioner must return a list/tuple whose elements are 1 besides the first element "
                  "(non-zero), got: [1, 2]");
    /* partitioning axis 1 through a partitioner, as plan --axis 1 would */
    zdist_partitioner_t f = s_parse_ok("fixed:2");
    int64_t parts[2];
    CU_ASSERT_EQUAL(zdist_partitioner_partitions(&f, &s, ZDIST_DTYPE_FLOAT32, 1, parts, &err), 0);
    CU_ASSERT_EQUAL(zdist_placement_place(ctx, "v", &s, parts, &l, &err), -EINVAL);
    HAS(err.text, "got: [1, 2]");

    const int64_t p2[2] = {2, 1};
    CU_ASSERT_EQUAL(zdist_placement_place(ctx, NULL, &s, p2, &l, &err), -EINVAL);
    HAS(err.text, "variable name is empty");
    CU_ASSERT_EQUAL(zdist_placement_place(ctx, "", &s, p2, &l, &err), -EINVAL);
    HAS(err.text, "variable name is empty");

    zdist_shape_t empty = s_shape(2, 0, 4, 0);
    CU_ASSERT_EQUAL(zdist_placement_place(ctx, "z", &empty, p2, &l, &err), -EINVAL);
    HAS(err.text, "variable 'z' has no rows along axis 0; it cannot be split into 2 shards");

    zdist_shape_t big = s_shape(1, 1000000, 0, 0);
    const int64_t many[1] = {ZDIST_PARTITION_MAX_SHARDS + 1};
    CU_ASSERT_EQUAL(zdist_placement_place(ctx, "big", &big, many, &l, &err), -E2BIG);
    HAS(err.text, "variable 'big' would have 65537 shards; at most 65536 are supported");

    /* partitioner errors come through place_variable */
    zdist_partitioner_t mx = s_parse_ok("max_size:4");
    CU_ASSERT_EQUAL(zdist_placement_place_variable(ctx, "m", &empty, ZDIST_DTYPE_FLOAT32, &mx, &l, &err), -EINVAL);
    HAS(err.text, "max_size: cannot size shards of shape [0,4]");

    CU_ASSERT_PTR_NULL(l);
    CU_ASSERT_EQUAL(zdist_placement_count(ctx), 0);

    /* an empty variable with no partitioner is fine: one shard of 0 rows */
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "z", &empty, NULL, &l, &err), 0);
    s_assert_shard(l, 0, "z", 0, 0, 0);
    int shard = 9;
    int64_t row = 9;
    CU_ASSERT_EQUAL(zdist_layout_lookup(l, 0, &shard, &row, &err), -ERANGE);
    HAS(err.text, "row id 0 is out of range: variable 'z' has no rows");
    zdist_layout_destroy(&l);
    zdist_placement_destroy(&ctx);
}

static void
test_lookup(void)
{
    zdist_placement_t *ctx = zdist_placement_new(4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    zdist_error_t err = {0};
    zdist_layout_t *l = NULL;
    zdist_shape_t s = s_shape(2, 13, 4, 0);
    const int64_t p5[2] = {5, 1};
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "emb", &s, p5, &l, &err), 0);
    /* every id, against the Div split [[0,1,2],[3,4,5],[6,7,8],[9,10],[11,12]] */
    const int want_shard[13] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4};
    const int64_t want_row[13] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 0, 1};
    for (int64_t id = 0; id < 13; id++) {
        int shard = -1;
        int64_t row = -1;
        CU_ASSERT_EQUAL(zdist_layout_lookup(l, id, &shard, &row, &err), 0);
        CU_ASSERT_EQUAL(shard, want_shard[id]);
        CU_ASSERT_EQUAL(row, want_row[id]);
    }
    int shard = 77;
    int64_t row = 77;
    CU_ASSERT_EQUAL(zdist_layout_lookup(l, 13, &shard, &row, &err), -ERANGE);
    CU_ASSERT_EQUAL(err.code, -ERANGE);
    HAS(err.text, "row id 13 is out of range: valid ids of variable 'emb' are 0..12");
    CU_ASSERT_EQUAL(zdist_layout_lookup(l, -1, &shard, &row, &err), -ERANGE);
    HAS(err.text, "row id -1 is out of range");
    CU_ASSERT_EQUAL(zdist_layout_lookup(l, INT64_MAX, &shard, &row, &err), -ERANGE);
    CU_ASSERT_EQUAL(shard, 77);
    CU_ASSERT_EQUAL(row, 77);
    zdist_layout_destroy(&l);

    /* unsharded: shard 0, row = id */
    zdist_shape_t v = s_shape(1, 6, 0, 0);
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "v", &v, NULL, &l, &err), 0);
    CU_ASSERT_EQUAL(zdist_layout_lookup(l, 5, &shard, &row, &err), 0);
    CU_ASSERT_EQUAL(shard, 0);
    CU_ASSERT_EQUAL(row, 5);
    zdist_layout_destroy(&l);

    /* scalar: no rows */
    zdist_shape_t sc = s_shape(0, 0, 0, 0);
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "s", &sc, NULL, &l, &err), 0);
    CU_ASSERT_EQUAL(zdist_layout_lookup(l, 0, &shard, &row, &err), -ERANGE);
    HAS(err.text, "variable 's' is a scalar");
    zdist_layout_destroy(&l);

    /* many shards: boundaries of 100003 rows over 997 shards agree with the Div split */
    zdist_shape_t big = s_shape(1, 100003, 0, 0);
    const int64_t p997[1] = {997};
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "big", &big, p997, &l, &err), 0);
    CU_ASSERT_EQUAL(l->num_shards, 997);
    int bad = 0;
    for (int i = 0; i < l->num_shards; i++) {
        int64_t off, rows;
        zdist_partition_div(100003, 997, i, &off, &rows);
        int64_t ids[2] = {off, off + rows - 1};
        for (int j = 0; j < 2; j++)
            if (zdist_layout_lookup(l, ids[j], &shard, &row, &err) != 0 || shard != i || row != ids[j] - off)
                bad++;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(l->shards[996].offset + l->shards[996].rows, 100003);
    zdist_layout_destroy(&l);
    zdist_placement_destroy(&ctx);
}

/* colocate_vars_with (runner.ParameterServerStrategy): a colocated variable
   is one unsharded shard on its anchor's ps task, whatever its size, and
   takes no turn of the round robin. */
static void
test_colocate(void)
{
    zdist_placement_t *ctx = zdist_placement_new(3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    zdist_error_t err = {0};
    zdist_layout_t *emb = NULL, *bias = NULL, *slot = NULL, *acc = NULL, *next = NULL;
    zdist_shape_t big = s_shape(2, 1000000, 64, 0), row = s_shape(1, 64, 0, 0);
    const int64_t p3[2] = {3, 1};
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "emb", &big, p3, &emb, &err), 0); /* ps 0, 1, 2 */
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "bias", &row, NULL, &bias, &err), 0); /* ps 0 */
    CU_ASSERT_EQUAL(bias->shards[0].ps, 0);
    CU_ASSERT_EQUAL(zdist_placement_count(ctx), 4);
    /* 256 MB beside a 256-byte anchor: still one shard, on ps 0 */
    CU_ASSERT_EQUAL_FATAL(zdist_placement_colocate(ctx, "bias/slot", &big, bias, &slot, &err), 0);
    CU_ASSERT_FALSE(slot->sharded);
    CU_ASSERT_EQUAL(slot->num_shards, 1);
    CU_ASSERT_STRING_EQUAL(slot->shards[0].name, "bias/slot");
    CU_ASSERT_EQUAL(slot->shards[0].ps, 0);
    CU_ASSERT_EQUAL(slot->shards[0].rows, 1000000);
    CU_ASSERT_EQUAL(zdist_placement_count(ctx), 4); /* no turn taken */
    /* a sharded anchor: its first shard's task */
    CU_ASSERT_EQUAL_FATAL(zdist_placement_colocate(ctx, "emb/acc", &row, emb, &acc, &err), 0);
    CU_ASSERT_EQUAL(acc->shards[0].ps, emb->shards[0].ps);
    /* the next plain variable takes the turn the colocated ones did not */
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place(ctx, "next", &row, NULL, &next, &err), 0);
    CU_ASSERT_EQUAL(next->shards[0].ps, 1);
    zdist_layout_t *none = NULL;
    CU_ASSERT_EQUAL(zdist_placement_colocate(ctx, "x", &row, NULL, &none, &err), -EINVAL);
    HAS(err.text, "colocate_vars_with needs a placed anchor");
    CU_ASSERT_EQUAL(zdist_placement_colocate(ctx, "", &row, bias, &none, &err), -EINVAL);
    CU_ASSERT_PTR_NULL(none);
    CU_ASSERT_EQUAL(zdist_placement_count(ctx), 5);
    zdist_layout_destroy(&emb);
    zdist_layout_destroy(&bias);
    zdist_layout_destroy(&slot);
    zdist_layout_destroy(&acc);
    zdist_layout_destroy(&next);
    zdist_placement_destroy(&ctx);
}

/* The parameter_server default (one helper for the workers and the Strategy object), and the rows a psd
   holds per shard: a rank-0 variable's one shard has no axis 0 but one stored row. */
static void
test_ps_default_and_stored_rows(void)
{
    zdist_partitioner_t d = zdist_partitioner_default_ps(3);
    char buf[64];
    CU_ASSERT_STRING_EQUAL(zdist_partitioner_format(&d, buf, sizeof buf), "min_size:262144:3:16");
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_partitioner_validate(&d, &err), 0);
    d = zdist_partitioner_default_ps(2);
    zdist_placement_t *ctx = zdist_placement_new(2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    zdist_layout_t *scalar = NULL, *rows = NULL;
    zdist_shape_t s0 = s_shape(0, 0, 0, 0), big = s_shape(2, 4096, 64, 0);
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place_variable(ctx, "step", &s0, ZDIST_DTYPE_FLOAT32, &d, &scalar, &err), 0);
    CU_ASSERT_EQUAL(scalar->num_shards, 1);
    CU_ASSERT_EQUAL(scalar->shards[0].rows, 0);
    CU_ASSERT_EQUAL(zdist_layout_shard_rows(scalar, 0), 1);
    /* 1 MiB over 2 ps by the default: 2 shards of 2048 rows */
    CU_ASSERT_EQUAL_FATAL(zdist_placement_place_variable(ctx, "emb", &big, ZDIST_DTYPE_FLOAT32, &d, &rows, &err), 0);
    CU_ASSERT_EQUAL(rows->num_shards, 2);
    CU_ASSERT_EQUAL(zdist_layout_shard_rows(rows, 1), 2048);
    zdist_layout_destroy(&scalar);
    zdist_layout_destroy(&rows);
    zdist_placement_destroy(&ctx);
}

/* embedding_ops.py's partition_strategy, as the embedding_lookup docstring
   lists 13 ids over 5 shards and embedding_ops_test.py's
   testShardedModPartitioningInt32Ids (and its div counterparts) builds
   its shards: mod [[0,5,10],[1,6,11],[2,7,12],[3,8],[4,9]], div
   [[0,1,2],[3,4,5],[6,7,8],[9,10],[11,12]]. */
static void
test_assign_ids_mod_div(void)
{
    zdist_error_t err = {0};
    int64_t ids[13], rows[5] = {3, 3, 3, 2, 2}, row[13];
    int shard[13];
    for (int i = 0; i < 13; i++)
        ids[i] = i;
    CU_ASSERT_EQUAL_FATAL(
        zdist_partition_assign_ids(ZDIST_PARTITION_STRATEGY_MOD, rows, 5, ids, 13, false, shard, row, &err),
        0);
    for (int i = 0; i < 13; i++) {
        CU_ASSERT_EQUAL(shard[i], i % 5);
        CU_ASSERT_EQUAL(row[i], i / 5);
    }
    CU_ASSERT_EQUAL_FATAL(
        zdist_partition_assign_ids(ZDIST_PARTITION_STRATEGY_DIV, rows, 5, ids, 13, false, shard, row, &err),
        0);
    static const int want_shard[13] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4};
    static const int64_t want_row[13] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 0, 1};
    for (int i = 0; i < 13; i++) {
        CU_ASSERT_EQUAL(shard[i], want_shard[i]);
        CU_ASSERT_EQUAL(row[i], want_row[i]);
    }
    /* div agrees with zdist_partition_div's split, so with a placed layout */
    for (int s = 0; s < 5; s++) {
        int64_t off, n;
        CU_ASSERT_EQUAL(zdist_partition_div(13, 5, s, &off, &n), 0);
        CU_ASSERT_EQUAL(n, rows[s]);
        CU_ASSERT_EQUAL(want_shard[off], s);
    }
    /* one shard: every id at its own row, either strategy */
    int64_t one[1] = {13};
    CU_ASSERT_EQUAL(
        zdist_partition_assign_ids(ZDIST_PARTITION_STRATEGY_MOD, one, 1, ids, 13, false, shard, row, &err),
        0);
    CU_ASSERT_EQUAL(shard[12], 0);
    CU_ASSERT_EQUAL(row[12], 12);

    zdist_partition_strategy_t ps;
    CU_ASSERT_EQUAL(zdist_partition_strategy_from_name("mod", &ps, &err), 0);
    CU_ASSERT_EQUAL(ps, ZDIST_PARTITION_STRATEGY_MOD);
    CU_ASSERT_EQUAL(zdist_partition_strategy_from_name("div", &ps, &err), 0);
    CU_ASSERT_EQUAL(ps, ZDIST_PARTITION_STRATEGY_DIV);
    CU_ASSERT_STRING_EQUAL(zdist_partition_strategy_name(ZDIST_PARTITION_STRATEGY_MOD), "mod");
    /* embedding_ops.py's ValueError, "." and "Must" run together as in TF */
    CU_ASSERT_EQUAL(zdist_partition_strategy_from_name("DIV", &ps, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text,
                           "Unrecognized partition strategy: DIV.Must be one of either `mod` or `div`.");
}

/* What TF raises when the ids do not fit the shards (the ops
   embedding_lookup runs: dynamic_partition, then gather per shard,
   core/kernels/dynamic_partition_op.cc and gather_op.cc's texts). */
static void
test_assign_ids_tf_errors(void)
{
    zdist_error_t err = {0};
    int shard[4];
    int64_t row[4];
    /* div over shards of [3, 1] rows, not the div shape [2, 2]: TF takes
       T = 4, per = 2 from the sizes alone, so id 3 is row 1 of shard 1,
       which has one row: gather's error (id 3 is shard 1's first id) */
    int64_t uneven[2] = {3, 1}, ids[4] = {0, 3, 1, 2};
    CU_ASSERT_EQUAL(
        zdist_partition_assign_ids(ZDIST_PARTITION_STRATEGY_DIV, uneven, 2, ids, 4, false, shard, row, &err),
        -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "indices[0] = 1 is not in [0, 1)");
    /* the lowest failing shard is reported, at the id's place among its
       shard's ids: [1, 3] on [1, 3]-row shards: id 1 is row 1 of shard 0 */
    int64_t small_first[2] = {1, 3}, ids2[3] = {2, 1, 3};
    CU_ASSERT_EQUAL(zdist_partition_assign_ids(ZDIST_PARTITION_STRATEGY_DIV, small_first, 2, ids2, 3, false,
                                               shard, row, &err),
                    -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "indices[0] = 1 is not in [0, 1)");
    /* mod past the rows: id 9 over 2 shards of [3, 2] is row 4 of shard 1 */
    int64_t m[2] = {3, 2}, ids3[3] = {1, 3, 9};
    CU_ASSERT_EQUAL(
        zdist_partition_assign_ids(ZDIST_PARTITION_STRATEGY_MOD, m, 2, ids3, 3, false, shard, row, &err),
        -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "indices[2] = 4 is not in [0, 2)");
    /* unique (embedding_lookup_sparse): a repeated id counts once */
    int64_t ids4[4] = {1, 1, 3, 9};
    CU_ASSERT_EQUAL(
        zdist_partition_assign_ids(ZDIST_PARTITION_STRATEGY_MOD, m, 2, ids4, 4, true, shard, row, &err),
        -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "indices[2] = 4 is not in [0, 2)");
    /* div past the last shard, and a negative id: dynamic_partition's error */
    int64_t d[2] = {2, 2}, ids5[3] = {0, 3, 4};
    CU_ASSERT_EQUAL(
        zdist_partition_assign_ids(ZDIST_PARTITION_STRATEGY_DIV, d, 2, ids5, 3, false, shard, row, &err),
        -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "partitions[2] = 2 is not in [0, 2)");
    int64_t neg[2] = {1, -1};
    CU_ASSERT_EQUAL(
        zdist_partition_assign_ids(ZDIST_PARTITION_STRATEGY_DIV, d, 2, neg, 2, false, shard, row, &err),
        -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "partitions[1] = -1 is not in [0, 2)");
    /* mod of a negative id: floormod puts it on shard 1 (after id 1) at row -1 */
    CU_ASSERT_EQUAL(
        zdist_partition_assign_ids(ZDIST_PARTITION_STRATEGY_MOD, d, 2, neg, 2, false, shard, row, &err),
        -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "indices[1] = -1 is not in [0, 2)");
    /* div over fewer rows than shards divides by zero */
    int64_t tiny[2] = {1, 0};
    CU_ASSERT_EQUAL(
        zdist_partition_assign_ids(ZDIST_PARTITION_STRATEGY_DIV, tiny, 2, ids, 1, false, shard, row, &err),
        -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "Integer division by zero");
}

/* Dynamic tables' placement is a stored format: these values were computed
   once, independently of the C code, with
     python3 -c "M=(1<<64)-1
     def h(i):
         z=(i+0x9e3779b97f4a7c15)&M; z=((z^(z>>30))*0xbf58476d1ce4e5b9)&M
         z=((z^(z>>27))*0x94d049bb133111eb)&M; return z^(z>>31)
     [print(i, hex(h(i&M)), h(i&M)%2, h(i&M)%3, h(i&M)%7) for i in
      [0,1,-1,-2**63,2**63-1,123456789,-987654321]]"
   (0's hash is splitmix64's well-known first output from state 0). A
   change here breaks every checkpoint of a dynamic table. */
static void
test_id_placement(void)
{
    static const struct {
        int64_t id;
        uint64_t hash;
        int ps2, ps3, ps7;
    } cases[] = {
        {0, 0xe220a8397b1dcdafULL, 1, 1, 2},
        {1, 0x910a2dec89025cc1ULL, 1, 2, 2},
        {-1, 0xe4d971771b652c20ULL, 0, 2, 0},
        {INT64_MIN, 0x481ec0a212a9f3dbULL, 1, 1, 6},
        {INT64_MAX, 0x2a67d7552e039ea7ULL, 1, 0, 2},
        {123456789, 0x223c74d93deb7679ULL, 1, 2, 5},
        {-987654321, 0x8e18496f7cf530ddULL, 1, 1, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CU_ASSERT_EQUAL(zdist_partition_id_hash(cases[i].id), cases[i].hash);
        CU_ASSERT_EQUAL(zdist_partition_id_ps(cases[i].id, 1), 0);
        CU_ASSERT_EQUAL(zdist_partition_id_ps(cases[i].id, 2), cases[i].ps2);
        CU_ASSERT_EQUAL(zdist_partition_id_ps(cases[i].id, 3), cases[i].ps3);
        CU_ASSERT_EQUAL(zdist_partition_id_ps(cases[i].id, 7), cases[i].ps7);
    }
    CU_ASSERT_EQUAL(zdist_partition_id_ps(5, 0), 0);
    /* Consecutive ids spread evenly: 4,000 over 4 tasks, each within 10%. */
    int count[4] = {0};
    for (int64_t id = 0; id < 4000; id++)
        count[zdist_partition_id_ps(id, 4)]++;
    for (int t = 0; t < 4; t++)
        CU_ASSERT(count[t] > 900 && count[t] < 1100);
}

void
zdist_test_partition_register(void)
{
    ZDIST_SUITE("partition",
                {"parse specs", test_parse_specs},
                {"parse errors", test_parse_errors},
                {"fixed shards", test_fixed},
                {"min size", test_min_size},
                {"max size", test_max_size},
                {"partition errors", test_partition_errors},
                {"div split", test_div_split},
                {"ps check", test_check_ps},
                {"place div", test_place_div},
                {"place round robin", test_place_round_robin},
                {"place errors", test_place_errors},
                {"lookup", test_lookup},
                {"colocate_vars_with", test_colocate},
                {"parameter_server default, rows a psd holds (rank 0: 1)", test_ps_default_and_stored_rows},
                {"embedding_lookup's mod and div assignment", test_assign_ids_mod_div},
                {"embedding_lookup's assignment: TF's errors", test_assign_ids_tf_errors},
                {"dynamic tables: id -> ps task, fixed values", test_id_placement});
}
