/* CUnit suite: input pipelines — readers, InputContext, auto-shard, TF rebatching, shuffle, prefetch. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "testutil.h"
#include "zdist/input.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* ------------------------------------------------------------------ helpers */

static char *
s_path(const char *dir, const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        abort();
    return p;
}

static void
s_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void
s_write_gz(const char *path, const void *data, size_t len)
{
    gzFile gz = gzopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(gz);
    CU_ASSERT_EQUAL(gzwrite(gz, data, (unsigned) len), (int) len);
    gzclose(gz);
}

static void
s_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char) (v >> 24);
    p[1] = (unsigned char) (v >> 16);
    p[2] = (unsigned char) (v >> 8);
    p[3] = (unsigned char) v;
}

/* An idx3 image file of n images rows x cols with pixel (i, k) = f(i, k),
   into buf (caller frees); returns its length. */
static size_t
s_idx_images(unsigned char **ret, uint32_t n, uint32_t rows, uint32_t cols)
{
    size_t len = 16 + (size_t) n * rows * cols;
    unsigned char *b = malloc(len);
    s_be32(b, 0x803);
    s_be32(b + 4, n);
    s_be32(b + 8, rows);
    s_be32(b + 12, cols);
    for (size_t k = 16; k < len; k++)
        b[k] = (unsigned char) ((k - 16) * 51 % 256);
    *ret = b;
    return len;
}

static size_t
s_idx_labels(unsigned char **ret, uint32_t n)
{
    size_t len = 8 + n;
    unsigned char *b = malloc(len);
    s_be32(b, 0x801);
    s_be32(b + 4, n);
    for (uint32_t i = 0; i < n; i++)
        b[8 + i] = (unsigned char) (i % 10);
    *ret = b;
    return len;
}

/* A dense dataset of n examples whose single feature is the row number, from
   a CSV file; label = row % 3. */
static zdist_dataset_t *
s_rows_dataset(const char *dir, int n)
{
    char *path = s_path(dir, "rows.csv");
    FILE *f = fopen(path, "w");
    for (int i = 0; i < n; i++)
        fprintf(f, "%d,%d\n", i % 3, i);
    fclose(f);
    zdist_csv_options_t o = {.label_column = 0, .label_dtype = ZDIST_DTYPE_INT32};
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_dataset_read_csv(path, &o, &ds, &err), 0);
    free(path);
    return ds;
}

/* Steps of an input as text: "0,1|2,3;4,5|6,7" (replicas split by '|',
   steps by ';'), built from the example indices. */
static void
s_trace(zdist_input_t *in, char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = '\0';
    const zdist_input_step_t *st;
    int r, steps = 0;
    while ((r = zdist_input_next(in, &st)) == 1) {
        if (steps++)
            at += (size_t) snprintf(buf + at, size - at, ";");
        for (int k = 0; k < st->num_replicas; k++) {
            if (k)
                at += (size_t) snprintf(buf + at, size - at, "|");
            for (int64_t i = 0; i < st->replicas[k].size; i++)
                at += (size_t) snprintf(buf + at, size - at, i ? ",%lld" : "%lld",
                                        (long long) st->replicas[k].indices[i]);
        }
    }
    CU_ASSERT_EQUAL(r, 0);
}

static void
s_expect_trace_of(const zdist_dataset_t *ds, int pipelines, int id, int replicas, int64_t G,
                  zdist_auto_shard_policy_t policy, bool drop, bool whole, const char *want, int64_t want_steps)
{
    zdist_error_t err = {0};
    zdist_input_context_t *ctx = zdist_input_context_new(pipelines, id, replicas, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    zdist_input_options_t o;
    zdist_input_options_init(&o, G);
    o.shard_policy = policy;
    o.drop_remainder = drop;
    o.whole_batches = whole;
    zdist_input_t *in = zdist_input_new(ds, ctx, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    CU_ASSERT_EQUAL(zdist_input_steps_per_epoch(in), want_steps);
    char buf[1024];
    s_trace(in, buf, sizeof buf);
    if (strcmp(buf, want) != 0)
        fprintf(stderr, "\n  W=%d w=%d R=%d G=%lld policy=%s: got '%s', want '%s'\n", pipelines, id, replicas,
                (long long) G, zdist_auto_shard_policy_name(policy), buf, want);
    CU_ASSERT_STRING_EQUAL(buf, want);
    zdist_input_destroy(&in);
    CU_ASSERT_PTR_NULL(in);
    zdist_input_destroy(&in);
    zdist_input_context_destroy(&ctx);
}

static void
s_expect_trace(const zdist_dataset_t *ds, int pipelines, int id, int replicas, int64_t G,
               zdist_auto_shard_policy_t policy, bool drop, const char *want, int64_t want_steps)
{
    s_expect_trace_of(ds, pipelines, id, replicas, G, policy, drop, false, want, want_steps);
}

/* ------------------------------------------------------------- rebatching */

static void
test_batch_sizes_for_worker(void)
{
    int64_t s[8];
    /* Even: 8 over 4 replicas of one worker. */
    CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(8, 1, 4, 0, s), 0);
    CU_ASSERT(s[0] == 2 && s[1] == 2 && s[2] == 2 && s[3] == 2);
    /* TF's docstring: G=7, W=2, R=2 -> worker 0 [2,2,2,1], worker 1 [2,1,2,2]. */
    CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(7, 2, 2, 0, s), 0);
    CU_ASSERT(s[0] == 2 && s[1] == 2 && s[2] == 2 && s[3] == 1);
    CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(7, 2, 2, 1, s), 0);
    CU_ASSERT(s[0] == 2 && s[1] == 1 && s[2] == 2 && s[3] == 2);
    /* Uneven: 10 over 4 -> the first 10 mod 4 = 2 get one more. */
    CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(10, 1, 4, 0, s), 0);
    CU_ASSERT(s[0] == 3 && s[1] == 3 && s[2] == 2 && s[3] == 2);
    /* Smaller than the replicas: 2 over 4 -> 1,1,0,0 (empty replicas). */
    CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(2, 1, 4, 0, s), 0);
    CU_ASSERT(s[0] == 1 && s[1] == 1 && s[2] == 0 && s[3] == 0);
    /* Three workers of two: 13 over 6 -> worker 0's list 3,2,2,2,2,2; worker 2
       is that rotated by 4. */
    CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(13, 3, 2, 2, s), 0);
    CU_ASSERT(s[0] == 2 && s[1] == 2 && s[2] == 3 && s[3] == 2 && s[4] == 2 && s[5] == 2);
    CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(0, 1, 1, 0, s), -EINVAL);
    /* Formerly -EINVAL: TF takes any worker_index (below). */
    CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(4, 2, 1, 2, s), 0);
    CU_ASSERT(s[0] == 2 && s[1] == 2);
}

/* tensorflow/python/data/experimental/ops/distribute.py batch_sizes_for_worker
   returns worker_0[offset:] + worker_0[:offset], offset = worker_index * R,
   with Python's clamped slices; rebatch_dataset_test.py's
   ComputeBatchSizeTest-style helper calls it for worker_index 0..3 of 2
   workers. An offset at or past the end is worker 0's list unrotated (a
   rotation modulo W*R would differ), a negative one counts from the end. */
static void
test_batch_sizes_for_any_worker_index(void)
{
    int64_t s[8];
    /* G=7, W=2, R=2: worker_0 = [2, 2, 2, 1]. */
    static const int64_t want[][4] = {
        {2, 2, 2, 1}, /* index 0: offset 0 */
        {2, 1, 2, 2}, /* index 1: offset 2 */
        {2, 2, 2, 1}, /* index 2: offset 4 == len -> [] + all */
        {2, 2, 2, 1}, /* index 3: offset 6 > len -> unrotated (modulo would give [2, 1, 2, 2]) */
    };
    for (int w = 0; w < 4; w++) {
        CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(7, 2, 2, w, s), 0);
        CU_ASSERT(memcmp(s, want[w], sizeof want[w]) == 0);
    }
    /* G=5, W=2, R=1: worker_0 = [3, 2]; index 3 (offset 3) -> [3, 2]. */
    CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(5, 2, 1, 3, s), 0);
    CU_ASSERT(s[0] == 3 && s[1] == 2);
    /* Negative offsets as Python's: index -1, R=1 of [3, 2] -> [2] + [3];
       -5 is clamped to the start -> [3, 2]. */
    CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(5, 2, 1, -1, s), 0);
    CU_ASSERT(s[0] == 2 && s[1] == 3);
    CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(5, 2, 1, -5, s), 0);
    CU_ASSERT(s[0] == 3 && s[1] == 2);
    /* The sums stay G whatever the index (constraint (B)). */
    for (int w = 0; w < 6; w++) {
        CU_ASSERT_EQUAL(zdist_input_batch_sizes_for_worker(13, 3, 2, w, s), 0);
        CU_ASSERT_EQUAL(s[0] + s[1] + s[2] + s[3] + s[4] + s[5], 13);
    }
}

/* distribute_lib.py InputContext.__str__, as distribute_lib_test.py's
   InputContextTest.testStr asserts it. */
static void
test_input_context_str(void)
{
    zdist_error_t err = {0};
    char buf[96];
    zdist_input_context_t *ctx = zdist_input_context_new(1, 0, 42, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_STRING_EQUAL(zdist_input_context_format(ctx, buf, sizeof buf),
                           "tf.distribute.InputContext(input pipeline id 0, total: 1)");
    zdist_input_context_destroy(&ctx);
    ctx = zdist_input_context_new(3, 1, 42, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_STRING_EQUAL(zdist_input_context_format(ctx, buf, sizeof buf),
                           "tf.distribute.InputContext(input pipeline id 1, total: 3)");
    char small[16];
    zdist_input_context_format(ctx, small, sizeof small);
    CU_ASSERT_STRING_EQUAL(small, "tf.distribute.I");
    zdist_input_context_destroy(&ctx);
}

static void
test_rebatch_legacy(void)
{
    int64_t off[5], sz[5];
    /* Even. */
    CU_ASSERT_EQUAL(zdist_input_rebatch_legacy(8, 4, off, sz), 0);
    CU_ASSERT(sz[0] == 2 && sz[1] == 2 && sz[2] == 2 && sz[3] == 2);
    CU_ASSERT(off[0] == 0 && off[1] == 2 && off[2] == 4 && off[3] == 6);
    /* Uneven: interval ceil(7/4) = 2. */
    CU_ASSERT_EQUAL(zdist_input_rebatch_legacy(7, 4, off, sz), 0);
    CU_ASSERT(sz[0] == 2 && sz[1] == 2 && sz[2] == 2 && sz[3] == 1);
    /* A full batch of 6 over 4 already leaves the last replica empty. */
    CU_ASSERT_EQUAL(zdist_input_rebatch_legacy(6, 4, off, sz), 0);
    CU_ASSERT(sz[0] == 2 && sz[1] == 2 && sz[2] == 2 && sz[3] == 0);
    CU_ASSERT_EQUAL(off[3], 6);
    /* TF's docstring: range(8).batch(4) over 3 -> [0,1],[2,3],[]. */
    CU_ASSERT_EQUAL(zdist_input_rebatch_legacy(4, 3, off, sz), 0);
    CU_ASSERT(sz[0] == 2 && sz[1] == 2 && sz[2] == 0);
    /* Partial batches. */
    CU_ASSERT_EQUAL(zdist_input_rebatch_legacy(5, 4, off, sz), 0);
    CU_ASSERT(sz[0] == 2 && sz[1] == 2 && sz[2] == 1 && sz[3] == 0);
    CU_ASSERT_EQUAL(zdist_input_rebatch_legacy(1, 5, off, sz), 0);
    CU_ASSERT(sz[0] == 1 && sz[1] == 0 && sz[2] == 0 && sz[3] == 0 && sz[4] == 0);
    CU_ASSERT_EQUAL(zdist_input_rebatch_legacy(4, 5, NULL, sz), 0);
    CU_ASSERT(sz[0] == 1 && sz[1] == 1 && sz[2] == 1 && sz[3] == 1 && sz[4] == 0);
    CU_ASSERT_EQUAL(zdist_input_rebatch_legacy(3, 0, off, sz), -EINVAL);
}

static void
test_rebatch_steps(void)
{
    char *dir = zdist_test_tmpdir("input");
    zdist_dataset_t *ds = s_rows_dataset(dir, 10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    /* One pipeline, even split, partial last batch: the last step's second
       replica is empty. */
    s_expect_trace(ds, 1, 0, 2, 4, ZDIST_AUTO_SHARD_OFF, false, "0,1|2,3;4,5|6,7;8,9|", 3);
    /* Uneven split, V2 (OFF/FILE): sizes 2,1,1 cycle. */
    s_expect_trace(ds, 1, 0, 3, 4, ZDIST_AUTO_SHARD_OFF, false, "0,1|2|3;4,5|6|7;8,9||", 3);
    /* G=7 over 3: V2 sizes 3,2,2; the partial batch of 3 fills replica 0. */
    s_expect_trace(ds, 1, 0, 3, 7, ZDIST_AUTO_SHARD_OFF, false, "0,1,2|3,4|5,6;7,8,9||", 2);
    /* Same under DATA (legacy rebatch): 7 -> 3,3,1 and the partial 3 -> 1,1,1. */
    s_expect_trace(ds, 1, 0, 3, 7, ZDIST_AUTO_SHARD_DATA, false, "0,1,2|3,4,5|6;7|8|9", 2);
    /* AUTO in memory behaves as DATA. */
    s_expect_trace(ds, 1, 0, 3, 7, ZDIST_AUTO_SHARD_AUTO, false, "0,1,2|3,4,5|6;7|8|9", 2);
    /* drop_remainder drops the partial batch. */
    s_expect_trace(ds, 1, 0, 2, 4, ZDIST_AUTO_SHARD_OFF, true, "0,1|2,3;4,5|6,7", 2);
    /* A batch smaller than the replicas: G=2 over 4 -> 1,1,0,0. */
    s_expect_trace(ds, 1, 0, 4, 2, ZDIST_AUTO_SHARD_OFF, false, "0|1||;2|3||;4|5||;6|7||;8|9||", 5);
    /* TF's rebatch_dataset_test, testEmptyFirstSplits: batch sizes [0, 1]
       (G=1 over 2 pipelines of 1 replica, pipeline 1's rotation) emit an empty
       batch before every example and a trailing empty one before they read
       the end of input: 21 steps over 10 examples. testEmptyLastSplits: [1, 0]
       (pipeline 0) ends with its empty batch too: 20 steps. */
    s_expect_trace(ds, 2, 1, 2, 1, ZDIST_AUTO_SHARD_OFF, false, ";0;;1;;2;;3;;4;;5;;6;;7;;8;;9;", 21);
    s_expect_trace(ds, 2, 0, 2, 1, ZDIST_AUTO_SHARD_OFF, false, "0;;1;;2;;3;;4;;5;;6;;7;;8;;9;", 20);
    /* G=3 over 4 replicas: sizes 1,1,1,0; after 9 the next size-1 sub-batch
       sees the end, the step's other replicas are padding. */
    s_expect_trace(ds, 1, 0, 4, 3, ZDIST_AUTO_SHARD_OFF, false, "0|1|2|;3|4|5|;6|7|8|;9|||", 4);
    /* One replica: plain batching. */
    s_expect_trace(ds, 1, 0, 1, 4, ZDIST_AUTO_SHARD_OFF, false, "0,1,2,3;4,5,6,7;8,9", 3);
    zdist_dataset_destroy(&ds);
    zdist_test_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------------------- sharding */

static void
test_shard_data_and_off(void)
{
    char *dir = zdist_test_tmpdir("input");
    zdist_dataset_t *ds = s_rows_dataset(dir, 10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    /* DATA, 2 pipelines x 2 replicas, G=8: batch 0..7 cut into 4 slices of 2,
       pipeline w takes slices w and w+2; the partial batch 8,9 gives 1,1,0,0. */
    s_expect_trace(ds, 2, 0, 4, 8, ZDIST_AUTO_SHARD_DATA, false, "0,1|4,5;8|", 2);
    s_expect_trace(ds, 2, 1, 4, 8, ZDIST_AUTO_SHARD_DATA, false, "2,3|6,7;9|", 2);
    /* DATA, 2 pipelines x 1 replica, G=4: element i of the rebatched stream goes
       to pipeline i % 2. */
    s_expect_trace(ds, 2, 0, 2, 4, ZDIST_AUTO_SHARD_DATA, false, "0,1;4,5;8", 3);
    s_expect_trace(ds, 2, 1, 2, 4, ZDIST_AUTO_SHARD_DATA, false, "2,3;6,7;9", 3);
    /* OFF, 2 pipelines x 1 replica, G=7: each sees everything; worker 0 cuts
       4,3,..., worker 1 cuts 3,4,... (TF's rotation). */
    s_expect_trace(ds, 2, 0, 2, 7, ZDIST_AUTO_SHARD_OFF, false, "0,1,2,3;4,5,6;7,8,9", 3);
    s_expect_trace(ds, 2, 1, 2, 7, ZDIST_AUTO_SHARD_OFF, false, "0,1,2;3,4,5,6;7,8,9", 3);

    /* Whole batches (parameter_server: a worker's step is the global batch).
       DATA, 2 pipelines x 1 replica each, G=4: pipeline w takes batches w, w+2
       of the common order, whole; the epoch is shared out (3 batches: 2 + 1). */
    s_expect_trace_of(ds, 2, 0, 2, 4, ZDIST_AUTO_SHARD_DATA, false, true, "0,1,2,3;8,9", 2);
    s_expect_trace_of(ds, 2, 1, 2, 4, ZDIST_AUTO_SHARD_DATA, false, true, "4,5,6,7", 1);
    /* 3 pipelines, 4 batches of 3 with drop_remainder off: 2, 1, 1 steps. */
    s_expect_trace_of(ds, 3, 2, 3, 3, ZDIST_AUTO_SHARD_DATA, false, true, "6,7,8", 1);
    s_expect_trace_of(ds, 3, 0, 3, 3, ZDIST_AUTO_SHARD_DATA, false, true, "0,1,2;9", 2);
    /* 2 pipelines of 2 replicas, G=4: the pipeline's batch splits over its own replicas. */
    s_expect_trace_of(ds, 2, 1, 4, 4, ZDIST_AUTO_SHARD_DATA, false, true, "4,5|6,7", 1);
    /* More pipelines than batches: the last ones get none. */
    s_expect_trace_of(ds, 4, 3, 4, 8, ZDIST_AUTO_SHARD_DATA, false, true, "", 0);
    /* OFF: every pipeline walks all the data in whole batches. */
    s_expect_trace_of(ds, 2, 1, 2, 4, ZDIST_AUTO_SHARD_OFF, false, true, "0,1,2,3;4,5,6,7;8,9", 3);

    /* tf.data shard: every third from 1. */
    zdist_dataset_t *sh = NULL;
    CU_ASSERT_EQUAL(zdist_dataset_shard(ds, 3, 1, &sh), 0);
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_size(sh), 3);
    const float *x = zdist_dataset_features(sh);
    const int32_t *y = zdist_dataset_labels(sh);
    CU_ASSERT(x[0] == 1.0f && x[1] == 4.0f && x[2] == 7.0f);
    CU_ASSERT(y[0] == 1 && y[1] == 1 && y[2] == 1);
    zdist_dataset_destroy(&sh);
    CU_ASSERT_EQUAL(zdist_dataset_shard(ds, 3, 3, &sh), -EINVAL);
    zdist_dataset_destroy(&ds);
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_shard_file(void)
{
    char *dir = zdist_test_tmpdir("input");
    char *paths[3];
    for (int k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "part%d.csv", k);
        paths[k] = s_path(dir, name);
        FILE *f = fopen(paths[k], "w");
        /* file k: k+1 rows, feature 10k + row, label k */
        for (int i = 0; i <= k; i++)
            fprintf(f, "%d,%d\n", 10 * k + i, k);
        fclose(f);
    }
    zdist_input_spec_t spec = {.format = ZDIST_INPUT_FORMAT_CSV,
                               .paths = (const char *const *) paths,
                               .n_paths = 3,
                               .csv = {.label_column = -1, .label_dtype = ZDIST_DTYPE_INT32}};
    zdist_error_t err = {0};
    zdist_input_context_t *c0 = zdist_input_context_new(2, 0, 2, &err);
    zdist_input_context_t *c1 = zdist_input_context_new(2, 1, 2, &err);
    zdist_dataset_t *ds = NULL;
    zdist_auto_shard_policy_t applied = ZDIST_AUTO_SHARD_AUTO;
    /* Pipeline 0 reads files 0 and 2 (1 + 3 rows), pipeline 1 file 1 (2 rows). */
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, c0, ZDIST_AUTO_SHARD_FILE, &ds, &applied, &err), 0);
    CU_ASSERT_EQUAL(applied, ZDIST_AUTO_SHARD_FILE);
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_size(ds), 4);
    const float *x = zdist_dataset_features(ds);
    const int32_t *y = zdist_dataset_labels(ds);
    CU_ASSERT(x[0] == 0.0f && x[1] == 20.0f && x[2] == 21.0f && x[3] == 22.0f);
    CU_ASSERT(y[0] == 0 && y[1] == 2 && y[3] == 2);
    CU_ASSERT_EQUAL(zdist_dataset_num_classes(ds), 3);
    zdist_dataset_destroy(&ds);
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, c1, ZDIST_AUTO_SHARD_AUTO, &ds, &applied, &err), 0);
    CU_ASSERT_EQUAL(applied, ZDIST_AUTO_SHARD_FILE);
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_size(ds), 2);
    x = zdist_dataset_features(ds);
    CU_ASSERT(x[0] == 10.0f && x[1] == 11.0f);
    zdist_dataset_destroy(&ds);
    /* OFF and DATA: every pipeline reads every file, in order. */
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, c1, ZDIST_AUTO_SHARD_OFF, &ds, &applied, &err), 0);
    CU_ASSERT_EQUAL(applied, ZDIST_AUTO_SHARD_OFF);
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_size(ds), 6);
    CU_ASSERT_EQUAL(zdist_dataset_features(ds)[5], 22.0f);
    zdist_dataset_destroy(&ds);
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, c0, ZDIST_AUTO_SHARD_DATA, &ds, &applied, &err), 0);
    CU_ASSERT_EQUAL(applied, ZDIST_AUTO_SHARD_DATA);
    CU_ASSERT_EQUAL(zdist_dataset_size(ds), 6);
    zdist_dataset_destroy(&ds);

    /* FILE with fewer files than pipelines is an error naming both counts,
       under AUTO too (TF only falls back to DATA when there is no reader). */
    spec.n_paths = 1;
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, c1, ZDIST_AUTO_SHARD_FILE, &ds, NULL, &err), -EINVAL);
    CU_ASSERT_PTR_NULL(ds);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "Could not apply FILE based sharding: the dataset only has 1 "
                                            "file(s), which is not enough for the required 2 shards/workers"));
    /* the whole of shard_dataset_op.cc's text (formerly zdist's own advice after "shards/workers") */
    CU_ASSERT_STRING_EQUAL(
        err.text, "Could not apply FILE based sharding: the dataset only has 1 file(s), which is not "
                  "enough for the required 2 shards/workers.If you are using datasets with distribution "
                  "strategy, consider setting the auto sharding policy to either DATA or OFF using the "
                  "`experimental_distribute.auto_shard_policy` optionof `tf.data.Options()`. Or, split "
                  "your input files into a larger number of small files such that number of files is "
                  "greater than number of shards/workers.");
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, c0, ZDIST_AUTO_SHARD_AUTO, &ds, NULL, &err), -EINVAL);
    /* One pipeline: FILE takes the only file. */
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, NULL, ZDIST_AUTO_SHARD_FILE, &ds, &applied, &err), 0);
    CU_ASSERT_EQUAL(zdist_dataset_size(ds), 1);
    zdist_dataset_destroy(&ds);

    /* Synthetic data has no files: AUTO means DATA, FILE is refused. */
    zdist_input_spec_t syn = {.format = ZDIST_INPUT_FORMAT_SYNTHETIC,
                              .synthetic_n = 5,
                              .synthetic_dim = 2,
                              .synthetic_classes = 3,
                              .synthetic_seed = 1};
    CU_ASSERT_EQUAL(zdist_dataset_load(&syn, c0, ZDIST_AUTO_SHARD_AUTO, &ds, &applied, &err), 0);
    CU_ASSERT_EQUAL(applied, ZDIST_AUTO_SHARD_DATA);
    CU_ASSERT_EQUAL(zdist_dataset_size(ds), 5);
    zdist_dataset_destroy(&ds);
    CU_ASSERT_EQUAL(zdist_dataset_load(&syn, c0, ZDIST_AUTO_SHARD_FILE, &ds, NULL, &err), -EINVAL);

    zdist_auto_shard_policy_t p;
    CU_ASSERT_EQUAL(zdist_auto_shard_policy_from_name("DATA", &p), 0);
    CU_ASSERT_EQUAL(p, ZDIST_AUTO_SHARD_DATA);
    CU_ASSERT_EQUAL(zdist_auto_shard_policy_from_name("off", &p), 0);
    CU_ASSERT_EQUAL(p, ZDIST_AUTO_SHARD_OFF);
    CU_ASSERT_EQUAL(zdist_auto_shard_policy_from_name("hint", &p), -EINVAL);
    CU_ASSERT_EQUAL(zdist_input_format_from_name("libsvm"), ZDIST_INPUT_FORMAT_LIBSVM);
    CU_ASSERT_EQUAL(zdist_input_format_from_name("tfrecord"), ZDIST_INPUT_FORMAT_TFRECORD);
    CU_ASSERT_EQUAL(zdist_input_format_from_name("parquet"), ZDIST_INPUT_FORMAT_INVALID);

    zdist_input_context_destroy(&c0);
    zdist_input_context_destroy(&c1);
    for (int k = 0; k < 3; k++)
        free(paths[k]);
    zdist_test_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------------------- InputContext */

static void
test_input_context(void)
{
    zdist_error_t err = {0};
    zdist_input_context_t *ctx = zdist_input_context_new(1, 0, 1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_EQUAL(zdist_input_context_num_input_pipelines(ctx), 1);
    CU_ASSERT_EQUAL(zdist_input_context_input_pipeline_id(ctx), 0);
    CU_ASSERT_EQUAL(zdist_input_context_num_replicas_in_sync(ctx), 1);
    zdist_input_context_destroy(&ctx);
    CU_ASSERT_PTR_NULL(ctx);
    zdist_input_context_destroy(&ctx);

    ctx = zdist_input_context_new(2, 1, 4, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    CU_ASSERT_EQUAL(zdist_input_context_input_pipeline_id(ctx), 1);
    int64_t per = 0;
    CU_ASSERT_EQUAL(zdist_input_context_get_per_replica_batch_size(ctx, 64, &per, &err), 0);
    CU_ASSERT_EQUAL(per, 16);
    /* TF: 0 % 4 == 0, so 0 // 4 = 0 */
    per = -5;
    CU_ASSERT_EQUAL(zdist_input_context_get_per_replica_batch_size(ctx, 0, &per, &err), 0);
    CU_ASSERT_EQUAL(per, 0);
    per = -5;
    CU_ASSERT_EQUAL(zdist_input_context_get_per_replica_batch_size(ctx, -4, &per, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "global_batch_size is -4"));
    CU_ASSERT_EQUAL(per, -5);
    CU_ASSERT_EQUAL(zdist_input_context_get_per_replica_batch_size(ctx, 10, &per, &err), -EINVAL);
    CU_ASSERT_EQUAL(per, -5);
    CU_ASSERT_EQUAL(err.code, -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "The `global_batch_size` 10 is not divisible by `num_replicas_in_sync` 4 ");
    zdist_input_context_destroy(&ctx);

    CU_ASSERT_PTR_NULL(zdist_input_context_new(2, 2, 4, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "input_pipeline_id is 2"));
    CU_ASSERT_PTR_NULL(zdist_input_context_new(0, 0, 1, &err));
    CU_ASSERT_PTR_NULL(zdist_input_context_new(1, 0, 0, &err));

    /* Replicas must split evenly over the pipelines (TF's input_lib check). */
    zdist_dataset_t *ds = NULL;
    CU_ASSERT_EQUAL(zdist_dataset_synthetic_regression(4, 2, 1, 0.0, &ds, &err), 0);
    ctx = zdist_input_context_new(2, 0, 3, &err);
    zdist_input_options_t o;
    zdist_input_options_init(&o, 6);
    CU_ASSERT_PTR_NULL(zdist_input_new(ds, ctx, &o, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "encountered `num_replicas_in_sync` (3) that cannot be divided by "
                                            "`num_workers` (2)"));
    o.global_batch_size = 0;
    CU_ASSERT_PTR_NULL(zdist_input_new(ds, NULL, &o, &err));
    CU_ASSERT_EQUAL(err.code, -EINVAL);
    zdist_input_context_destroy(&ctx);
    zdist_dataset_destroy(&ds);
}

/* ----------------------------------------------------------------- readers */

static void
test_idx_good(void)
{
    char *dir = zdist_test_tmpdir("input");
    unsigned char *img, *lab;
    size_t ilen = s_idx_images(&img, 3, 2, 2), llen = s_idx_labels(&lab, 3);
    char *ip = s_path(dir, "img.idx"), *lp = s_path(dir, "lab.idx.gz");
    s_write(ip, img, ilen);   /* raw */
    s_write_gz(lp, lab, llen); /* gzip'd */
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_read_idx(ip, lp, &ds, &err), 0);
    CU_ASSERT_EQUAL(zdist_dataset_size(ds), 3);
    CU_ASSERT_EQUAL(zdist_dataset_dim(ds), 4);
    CU_ASSERT_FALSE(zdist_dataset_is_sparse(ds));
    CU_ASSERT_EQUAL(zdist_dataset_label_dtype(ds), ZDIST_DTYPE_INT32);
    CU_ASSERT_EQUAL(zdist_dataset_num_classes(ds), 3);
    const float *x = zdist_dataset_features(ds);
    /* pixel k = 51k mod 256: 0, 51, 102, 153, 204, 255, 50 (306 mod 256) */
    CU_ASSERT_DOUBLE_EQUAL(x[0], 0.0, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(x[1], 0.2, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(x[4], 0.8, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(x[5], 1.0, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(x[6], 50.0 / 255.0, 1e-6);
    const int32_t *y = zdist_dataset_labels(ds);
    CU_ASSERT(y[0] == 0 && y[1] == 1 && y[2] == 2);
    zdist_dataset_destroy(&ds);
    CU_ASSERT_PTR_NULL(ds);
    free(img);
    free(lab);
    free(ip);
    free(lp);
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_idx_corrupt(void)
{
    char *dir = zdist_test_tmpdir("input");
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    char want[512];
    unsigned char *img, *lab;
    size_t ilen = s_idx_images(&img, 3, 2, 2), llen = s_idx_labels(&lab, 3);
    char *ip = s_path(dir, "img"), *lp = s_path(dir, "lab"), *missing = s_path(dir, "nope.gz");
    s_write(lp, lab, llen);

    /* Missing file. */
    CU_ASSERT_EQUAL(zdist_dataset_read_idx(missing, lp, &ds, &err), -ENOENT);
    snprintf(want, sizeof want, "'%s': cannot open: No such file or directory", missing);
    CU_ASSERT_STRING_EQUAL(err.text, want);

    /* Bad magic. */
    unsigned char zeros[64] = {0};
    s_write(ip, zeros, sizeof zeros);
    CU_ASSERT_EQUAL(zdist_dataset_read_idx(ip, lp, &ds, &err), -EBADMSG);
    snprintf(want, sizeof want, "'%s': bad idx magic 0x00000000 at byte 0, expected 0x00000803 (idx3 images)", ip);
    CU_ASSERT_STRING_EQUAL(err.text, want);
    CU_ASSERT_PTR_NULL(ds);
    /* Labels and images swapped: the labels file has the images' magic. */
    s_write(ip, img, ilen);
    CU_ASSERT_EQUAL(zdist_dataset_read_idx(ip, ip, &ds, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "bad idx magic 0x00000803 at byte 0, expected 0x00000801"));

    /* Raw file, 2 of 12 pixel bytes missing: ends at byte 16 + 10. */
    s_write(ip, img, ilen - 2);
    CU_ASSERT_EQUAL(zdist_dataset_read_idx(ip, lp, &ds, &err), -EBADMSG);
    snprintf(want, sizeof want, "'%s': truncated at byte 26: expected 12 bytes of pixels after the 16-byte header",
             ip);
    CU_ASSERT_STRING_EQUAL(err.text, want);

    /* Truncated header. */
    s_write(ip, img, 10);
    CU_ASSERT_EQUAL(zdist_dataset_read_idx(ip, lp, &ds, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "truncated at byte 10: expected a 16-byte idx header"));

    /* Trailing bytes after the last example. */
    unsigned char *longer = calloc(1, ilen + 3);
    memcpy(longer, img, ilen);
    s_write(ip, longer, ilen + 3);
    CU_ASSERT_EQUAL(zdist_dataset_read_idx(ip, lp, &ds, &err), -EBADMSG);
    snprintf(want, sizeof want, "'%s': unexpected data at byte 28, after the last example", ip);
    CU_ASSERT_STRING_EQUAL(err.text, want);
    free(longer);

    /* Counts disagree. */
    unsigned char *lab2;
    size_t llen2 = s_idx_labels(&lab2, 2);
    s_write(lp, lab2, llen2);
    s_write(ip, img, ilen);
    CU_ASSERT_EQUAL(zdist_dataset_read_idx(ip, lp, &ds, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "has 3 images but"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "has 2 labels"));
    free(lab2);

    /* A truncated gzip stream: 2000 images of 28x28 of noise-like pixels, the
       compressed file cut in half. The message names the decompressed offset
       where the data stopped and the pixel bytes expected. */
    unsigned char *big;
    size_t blen = s_idx_images(&big, 2000, 28, 28);
    for (size_t k = 16; k < blen; k++)
        big[k] = (unsigned char) ((k * 2654435761u) >> 13);
    char *gp = s_path(dir, "big.gz");
    s_write_gz(gp, big, blen);
    struct stat st;
    CU_ASSERT_EQUAL_FATAL(stat(gp, &st), 0);
    CU_ASSERT_EQUAL(truncate(gp, st.st_size / 2), 0);
    unsigned char *lab3;
    size_t llen3 = s_idx_labels(&lab3, 2000);
    s_write(lp, lab3, llen3);
    CU_ASSERT_EQUAL(zdist_dataset_read_idx(gp, lp, &ds, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "': truncated at byte "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, ": expected 1568000 bytes of pixels after the 16-byte header"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "header (gzip stream: unexpected end of file)"));
    long long at = 0;
    const char *p = strstr(err.text, "truncated at byte ");
    if (p)
        at = atoll(p + strlen("truncated at byte "));
    CU_ASSERT(at > 16 && at < (long long) blen);
    CU_ASSERT_PTR_NULL(ds);
    free(lab3);
    free(big);
    free(gp);

    free(img);
    free(lab);
    free(ip);
    free(lp);
    free(missing);
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_csv(void)
{
    char *dir = zdist_test_tmpdir("input");
    char *p = s_path(dir, "a.csv");
    const char *good = "label,a,b\n1,0.5,2\n0,-1,3e2\r\n\n2,4,5\n";
    s_write(p, good, strlen(good));
    zdist_csv_options_t o = {.label_column = 0, .header = true, .label_dtype = ZDIST_DTYPE_INT32};
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_read_csv(p, &o, &ds, &err), 0);
    CU_ASSERT_EQUAL(zdist_dataset_size(ds), 3);
    CU_ASSERT_EQUAL(zdist_dataset_dim(ds), 2);
    CU_ASSERT_EQUAL(zdist_dataset_num_classes(ds), 3);
    const float *x = zdist_dataset_features(ds);
    CU_ASSERT(x[0] == 0.5f && x[1] == 2.0f && x[2] == -1.0f && x[3] == 300.0f && x[4] == 4.0f && x[5] == 5.0f);
    const int32_t *y = zdist_dataset_labels(ds);
    CU_ASSERT(y[0] == 1 && y[1] == 0 && y[2] == 2);
    zdist_dataset_destroy(&ds);

    /* Last column as a float label (regression), gzip'd, no header. */
    char *pg = s_path(dir, "r.csv.gz");
    const char *reg = "1,2,0.25\n3,4,-1.5\n";
    s_write_gz(pg, reg, strlen(reg));
    zdist_csv_options_t of = {.label_column = -1, .label_dtype = ZDIST_DTYPE_FLOAT32};
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_read_csv(pg, &of, &ds, &err), 0);
    CU_ASSERT_EQUAL(zdist_dataset_dim(ds), 2);
    const float *yf = zdist_dataset_labels(ds);
    x = zdist_dataset_features(ds);
    CU_ASSERT(yf[0] == 0.25f && yf[1] == -1.5f);
    CU_ASSERT(x[0] == 1.0f && x[1] == 2.0f && x[2] == 3.0f && x[3] == 4.0f);
    CU_ASSERT_EQUAL(zdist_dataset_num_classes(ds), 0);
    zdist_dataset_destroy(&ds);

    /* A bad number: line 2, column 2, at byte 6 ("1,2\n" is 4 bytes, "3," 2). */
    char want[512];
    const char *bad = "1,2\n3,x4\n";
    s_write(p, bad, strlen(bad));
    CU_ASSERT_EQUAL(zdist_dataset_read_csv(p, &of, &ds, &err), -EBADMSG);
    snprintf(want, sizeof want, "'%s': line 2, column 2 (byte 6): 'x4' is not a number", p);
    CU_ASSERT_STRING_EQUAL(err.text, want);
    CU_ASSERT_EQUAL(err.line, 2);
    CU_ASSERT_EQUAL(err.column, 2);
    CU_ASSERT_PTR_NULL(ds);
    /* An empty field. */
    const char *empty = "1,2,3\n4,,6\n";
    s_write(p, empty, strlen(empty));
    CU_ASSERT_EQUAL(zdist_dataset_read_csv(p, &of, &ds, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "line 2, column 2 (byte 8): '' is not a number"));
    /* A short row. */
    const char *ragged = "1,2,3\n4,5\n";
    s_write(p, ragged, strlen(ragged));
    CU_ASSERT_EQUAL(zdist_dataset_read_csv(p, &of, &ds, &err), -EBADMSG);
    snprintf(want, sizeof want, "'%s': line 2 (byte 6): 2 columns, but the first row has 3", p);
    CU_ASSERT_STRING_EQUAL(err.text, want);
    /* A class label that is not an integer. */
    const char *frac = "1,2\n0.5,3\n";
    s_write(p, frac, strlen(frac));
    o.header = false;
    CU_ASSERT_EQUAL(zdist_dataset_read_csv(p, &o, &ds, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "line 2, column 1 (byte 4): label '0.5' is not a class number"));
    /* Missing file. */
    char *missing = s_path(dir, "none.csv");
    CU_ASSERT_EQUAL(zdist_dataset_read_csv(missing, &o, &ds, &err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, missing));
    free(missing);
    free(pg);
    free(p);
    zdist_test_rmtree(dir);
    free(dir);
}

/* raw_ids: indices any int64, kept as they are (a dynamic embedding's ids). */
static void
test_libsvm_raw_ids(void)
{
    char *dir = zdist_test_tmpdir("input");
    char *p = s_path(dir, "raw.svm");
    const char *text = "1 -9223372036854775808:1 9223372036854775807:0.5 7:2\n0 -1:1\n";
    s_write(p, text, strlen(text));
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_read_libsvm_ids(p, 4, true, &ds, &err), 0);
    const int64_t *ids = zdist_dataset_feature_ids(ds);
    CU_ASSERT(ids[0] == INT64_MIN && ids[1] == INT64_MAX && ids[2] == 7 && ids[3] == -1);
    zdist_dataset_destroy(&ds);
    /* Without raw_ids a negative index is still a bad feature. */
    CU_ASSERT_EQUAL(zdist_dataset_read_libsvm_ids(p, 4, false, &ds, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "bad feature '-9223372036854775808:1'"));
    free(p);
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_libsvm(void)
{
    char *dir = zdist_test_tmpdir("input");
    char *p = s_path(dir, "a.svm");
    const char *good = "+1 1:0.5 3:2\n-1 2:1 # comment\n\n# only a comment\n0 7:1.5\t8:-2\n1\n";
    s_write(p, good, strlen(good));
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_read_libsvm(p, 4, &ds, &err), 0);
    CU_ASSERT_TRUE(zdist_dataset_is_sparse(ds));
    CU_ASSERT_EQUAL(zdist_dataset_size(ds), 4);
    CU_ASSERT_EQUAL(zdist_dataset_dim(ds), 4);
    CU_ASSERT_EQUAL(zdist_dataset_max_row_nnz(ds), 2);
    CU_ASSERT_PTR_NULL(zdist_dataset_features(ds));
    const int64_t *ro = zdist_dataset_row_offsets(ds), *ids = zdist_dataset_feature_ids(ds);
    const float *v = zdist_dataset_feature_values(ds);
    const int32_t *y = zdist_dataset_labels(ds);
    CU_ASSERT(ro[0] == 0 && ro[1] == 2 && ro[2] == 3 && ro[3] == 5 && ro[4] == 5);
    /* 1, 3 | 2 | 7 mod 4 = 3, 8 mod 4 = 0 | (none) */
    CU_ASSERT(ids[0] == 1 && ids[1] == 3 && ids[2] == 2 && ids[3] == 3 && ids[4] == 0);
    CU_ASSERT(v[0] == 0.5f && v[1] == 2.0f && v[2] == 1.0f && v[3] == 1.5f && v[4] == -2.0f);
    CU_ASSERT(y[0] == 1 && y[1] == 0 && y[2] == 0 && y[3] == 1);

    /* Batches carry the CSR slices. */
    zdist_input_options_t o;
    zdist_input_options_init(&o, 2);
    zdist_input_t *in = zdist_input_new(ds, NULL, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    const zdist_input_step_t *st;
    CU_ASSERT_EQUAL(zdist_input_next(in, &st), 1);
    CU_ASSERT_EQUAL(zdist_input_next(in, &st), 1);
    const zdist_batch_t *b = &st->replicas[0];
    CU_ASSERT_EQUAL_FATAL(b->size, 2);
    CU_ASSERT(b->row_offsets[0] == 0 && b->row_offsets[1] == 2 && b->row_offsets[2] == 2);
    CU_ASSERT(b->feature_ids[0] == 3 && b->feature_ids[1] == 0 && b->feature_values[1] == -2.0f);
    CU_ASSERT_PTR_NULL(b->features);
    CU_ASSERT_EQUAL(zdist_input_next(in, &st), 0);
    zdist_input_destroy(&in);
    zdist_dataset_destroy(&ds);

    char want[512];
    const char *bad = "1 2:x\n";
    s_write(p, bad, strlen(bad));
    CU_ASSERT_EQUAL(zdist_dataset_read_libsvm(p, 4, &ds, &err), -EBADMSG);
    snprintf(want, sizeof want, "'%s': line 1 (byte 2): bad feature '2:x', expected index:value", p);
    CU_ASSERT_STRING_EQUAL(err.text, want);
    const char *nocolon = "1 1:1\n0 5\n";
    s_write(p, nocolon, strlen(nocolon));
    CU_ASSERT_EQUAL(zdist_dataset_read_libsvm(p, 4, &ds, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "line 2 (byte 8): bad feature '5', expected index:value"));
    const char *badlabel = "yes 1:1\n";
    s_write(p, badlabel, strlen(badlabel));
    CU_ASSERT_EQUAL(zdist_dataset_read_libsvm(p, 4, &ds, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "line 1 (byte 0): bad label 'yes', expected a number"));
    const char *multi = "1 1:1\n3 2:1\n";
    s_write(p, multi, strlen(multi));
    CU_ASSERT_EQUAL(zdist_dataset_read_libsvm(p, 4, &ds, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "line 2 (byte 6): label '3' is not binary"));
    const char *negidx = "1 -3:1\n";
    s_write(p, negidx, strlen(negidx));
    CU_ASSERT_EQUAL(zdist_dataset_read_libsvm(p, 4, &ds, &err), -EBADMSG);
    CU_ASSERT_EQUAL(zdist_dataset_read_libsvm(p, 0, &ds, &err), -EINVAL);
    CU_ASSERT_PTR_NULL(ds);
    free(p);
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_synthetic(void)
{
    zdist_dataset_t *a = NULL, *b = NULL;
    zdist_error_t err = {0};
    /* Without noise every label is exactly the teacher's w.x + b. */
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_regression(50, 3, 7, 0.0, &a, &err), 0);
    float w[3], bias;
    zdist_dataset_synthetic_teacher(3, 7, w, &bias);
    const float *x = zdist_dataset_features(a);
    const float *y = zdist_dataset_labels(a);
    for (int i = 0; i < 50; i++) {
        double t = bias + w[0] * x[3 * i] + w[1] * x[3 * i + 1] + w[2] * x[3 * i + 2];
        CU_ASSERT_DOUBLE_EQUAL(y[i], t, 1e-4);
    }
    CU_ASSERT_EQUAL(zdist_dataset_label_dtype(a), ZDIST_DTYPE_FLOAT32);
    /* Example i depends on (seed, i) only: 20 examples are a prefix of 50. */
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_regression(20, 3, 7, 0.0, &b, &err), 0);
    CU_ASSERT_EQUAL(memcmp(zdist_dataset_features(a), zdist_dataset_features(b), 20 * 3 * sizeof(float)), 0);
    zdist_dataset_destroy(&b);
    /* Another seed, other data. */
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_regression(20, 3, 8, 0.0, &b, &err), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(zdist_dataset_features(a), zdist_dataset_features(b), 20 * 3 * sizeof(float)), 0);
    zdist_dataset_destroy(&b);
    /* Noise of 0.1: residuals have a standard deviation near 0.1. */
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_regression(2000, 3, 7, 0.1, &b, &err), 0);
    x = zdist_dataset_features(b);
    y = zdist_dataset_labels(b);
    double ss = 0;
    for (int i = 0; i < 2000; i++) {
        double t = bias + w[0] * x[3 * i] + w[1] * x[3 * i + 1] + w[2] * x[3 * i + 2];
        ss += (y[i] - t) * (y[i] - t);
    }
    CU_ASSERT(sqrt(ss / 2000) > 0.09 && sqrt(ss / 2000) < 0.11);
    zdist_dataset_destroy(&b);
    zdist_dataset_destroy(&a);

    /* Classification: labels in range, every class present, and examples sit
       nearer their own class mean than another's (blobs 3 sigma apart). */
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_classification(600, 4, 3, 11, &a, &err), 0);
    CU_ASSERT_EQUAL(zdist_dataset_num_classes(a), 3);
    const int32_t *c = zdist_dataset_labels(a);
    x = zdist_dataset_features(a);
    double mean[3][4] = {{0}};
    int count[3] = {0};
    for (int i = 0; i < 600; i++) {
        CU_ASSERT_FATAL(c[i] >= 0 && c[i] < 3);
        count[c[i]]++;
        for (int j = 0; j < 4; j++)
            mean[c[i]][j] += x[4 * i + j];
    }
    for (int k = 0; k < 3; k++) {
        CU_ASSERT(count[k] > 150);
        for (int j = 0; j < 4; j++)
            mean[k][j] /= count[k];
    }
    int nearest_own = 0;
    for (int i = 0; i < 600; i++) {
        int best = 0;
        double bd = 1e300;
        for (int k = 0; k < 3; k++) {
            double d = 0;
            for (int j = 0; j < 4; j++)
                d += (x[4 * i + j] - mean[k][j]) * (x[4 * i + j] - mean[k][j]);
            if (d < bd) {
                bd = d;
                best = k;
            }
        }
        nearest_own += best == c[i];
    }
    CU_ASSERT(nearest_own > 540);
    zdist_dataset_destroy(&a);
    CU_ASSERT_EQUAL(zdist_dataset_synthetic_classification(10, 4, 1, 11, &a, &err), -EINVAL);
    CU_ASSERT_EQUAL(zdist_dataset_synthetic_regression(10, 0, 1, 0, &a, &err), -EINVAL);
}

static void
test_fashion_mnist(void)
{
    const char *paths[4] = {FMNIST_DIR "/train-images-idx3-ubyte.gz", FMNIST_DIR "/train-labels-idx1-ubyte.gz",
                            FMNIST_DIR "/t10k-images-idx3-ubyte.gz", FMNIST_DIR "/t10k-labels-idx1-ubyte.gz"};
    if (access(paths[0], R_OK) != 0) {
        fprintf(stderr, "\n  dataset-fashion-mnist not installed; skipped\n");
        CU_PASS("fashion-mnist absent");
        return;
    }
    static const int64_t sizes[2] = {60000, 10000};
    for (int s = 0; s < 2; s++) {
        zdist_dataset_t *ds = NULL;
        zdist_error_t err = {0};
        int r = zdist_dataset_read_idx(paths[2 * s], paths[2 * s + 1], &ds, &err);
        if (r < 0)
            fprintf(stderr, "\n  %s\n", err.text);
        CU_ASSERT_EQUAL_FATAL(r, 0);
        CU_ASSERT_EQUAL(zdist_dataset_size(ds), sizes[s]);
        CU_ASSERT_EQUAL(zdist_dataset_dim(ds), 28 * 28);
        CU_ASSERT_EQUAL(zdist_dataset_num_classes(ds), 10);
        const int32_t *y = zdist_dataset_labels(ds);
        int64_t count[10] = {0};
        for (int64_t i = 0; i < sizes[s]; i++) {
            CU_ASSERT_FATAL(y[i] >= 0 && y[i] <= 9);
            count[y[i]]++;
        }
        /* Fashion-MNIST is balanced: 6000 (train) or 1000 (test) per class. */
        for (int k = 0; k < 10; k++)
            CU_ASSERT_EQUAL(count[k], sizes[s] / 10);
        /* The first example of both sets is an ankle boot (class 9). */
        CU_ASSERT_EQUAL(y[0], 9);
        const float *x = zdist_dataset_features(ds);
        float lo = 1, hi = 0;
        for (int64_t i = 0; i < sizes[s] * 784; i++) {
            if (x[i] < lo)
                lo = x[i];
            if (x[i] > hi)
                hi = x[i];
        }
        CU_ASSERT_EQUAL(lo, 0.0f);
        CU_ASSERT_EQUAL(hi, 1.0f);
        zdist_dataset_destroy(&ds);
    }
    /* Through a spec: one file pair, so FILE over 2 pipelines is refused. */
    zdist_input_spec_t spec = {.format = ZDIST_INPUT_FORMAT_IDX, .paths = paths + 2, .n_paths = 2};
    zdist_error_t err = {0};
    zdist_input_context_t *ctx = zdist_input_context_new(2, 0, 2, &err);
    zdist_dataset_t *ds = NULL;
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, ctx, ZDIST_AUTO_SHARD_FILE, &ds, NULL, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "only has 1 file(s), which is not enough for the required 2"));
    zdist_input_context_destroy(&ctx);
}

/* --------------------------------------------------------- shuffle, prefetch */

static int64_t
s_epoch_orders(uint64_t seed, int64_t n, int epochs, int64_t *orders)
{
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_dataset_synthetic_regression(n, 1, 3, 0.0, &ds, &err), 0);
    zdist_input_options_t o;
    zdist_input_options_init(&o, 7);
    o.shuffle = true;
    o.shuffle_seed = seed;
    o.epochs = epochs;
    zdist_input_t *in = zdist_input_new(ds, NULL, &o, &err);
    const zdist_input_step_t *st;
    int64_t k = 0;
    while (zdist_input_next(in, &st) == 1) {
        const zdist_batch_t *b = &st->replicas[0];
        for (int64_t i = 0; i < b->size; i++) {
            CU_ASSERT_EQUAL(st->epoch, k / n);
            /* the features follow the index */
            CU_ASSERT_EQUAL(b->features[i], zdist_dataset_features(ds)[b->indices[i]]);
            orders[k++] = b->indices[i];
        }
    }
    zdist_input_destroy(&in);
    zdist_dataset_destroy(&ds);
    return k;
}

static void
test_shuffle(void)
{
    enum { N = 100, E = 3 };
    int64_t a[N * E], b[N * E], c[N * E];
    CU_ASSERT_EQUAL_FATAL(s_epoch_orders(42, N, E, a), N * E);
    CU_ASSERT_EQUAL_FATAL(s_epoch_orders(42, N, E, b), N * E);
    CU_ASSERT_EQUAL_FATAL(s_epoch_orders(43, N, E, c), N * E);
    /* Same seed, same orders. */
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    /* Another seed, another order. */
    CU_ASSERT_NOT_EQUAL(memcmp(a, c, N * sizeof(int64_t)), 0);
    for (int e = 0; e < E; e++) {
        /* Every example exactly once per epoch. */
        int seen[N] = {0};
        for (int i = 0; i < N; i++)
            seen[a[e * N + i]]++;
        for (int i = 0; i < N; i++)
            CU_ASSERT_EQUAL(seen[i], 1);
        /* Epochs differ from each other and from the file order. */
        if (e > 0)
            CU_ASSERT_NOT_EQUAL(memcmp(a + e * N, a + (e - 1) * N, N * sizeof(int64_t)), 0);
        int in_order = 0;
        for (int i = 0; i < N; i++)
            in_order += a[e * N + i] == i;
        CU_ASSERT(in_order < 10);
    }
    /* Epoch e's order depends on (seed, e) only: a 1-epoch run is epoch 0. */
    int64_t one[N];
    CU_ASSERT_EQUAL(s_epoch_orders(42, N, 1, one), N);
    CU_ASSERT_EQUAL(memcmp(one, a, sizeof one), 0);
}

static void
s_compare_sync_prefetch(const zdist_dataset_t *ds, const zdist_input_context_t *ctx, zdist_input_options_t o)
{
    zdist_error_t err = {0};
    o.prefetch = 0;
    zdist_input_t *sync = zdist_input_new(ds, ctx, &o, &err);
    o.prefetch = 3;
    zdist_input_t *pre = zdist_input_new(ds, ctx, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sync);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pre);
    int64_t d = zdist_dataset_dim(ds), steps = 0;
    const zdist_input_step_t *a, *b;
    int ra, rb;
    const void *seen_buffers[8] = {0};
    int nseen = 0;
    while ((ra = zdist_input_next(sync, &a)) == 1) {
        rb = zdist_input_next(pre, &b);
        CU_ASSERT_EQUAL_FATAL(rb, 1);
        CU_ASSERT_EQUAL(a->step, b->step);
        CU_ASSERT_EQUAL(a->epoch, b->epoch);
        CU_ASSERT_EQUAL(a->size, b->size);
        CU_ASSERT_EQUAL_FATAL(a->num_replicas, b->num_replicas);
        for (int r = 0; r < a->num_replicas; r++) {
            const zdist_batch_t *x = &a->replicas[r], *y = &b->replicas[r];
            CU_ASSERT_EQUAL_FATAL(x->size, y->size);
            CU_ASSERT_EQUAL(memcmp(x->indices, y->indices, (size_t) x->size * sizeof(int64_t)), 0);
            CU_ASSERT_EQUAL(memcmp(x->labels, y->labels, (size_t) x->size * 4), 0);
            if (!zdist_dataset_is_sparse(ds)) {
                CU_ASSERT_EQUAL(memcmp(x->features, y->features, (size_t) (x->size * d) * sizeof(float)), 0);
            } else {
                CU_ASSERT_EQUAL(memcmp(x->row_offsets, y->row_offsets, (size_t) (x->size + 1) * sizeof(int64_t)), 0);
                int64_t nnz = x->row_offsets[x->size];
                CU_ASSERT_EQUAL(memcmp(x->feature_ids, y->feature_ids, (size_t) nnz * sizeof(int64_t)), 0);
                CU_ASSERT_EQUAL(memcmp(x->feature_values, y->feature_values, (size_t) nnz * sizeof(float)), 0);
            }
        }
        /* The prefetching input cycles through a fixed set of buffers (K+1). */
        const void *buf = b->replicas[0].indices;
        bool known = false;
        for (int i = 0; i < nseen; i++)
            known |= seen_buffers[i] == buf;
        if (!known && nseen < 8)
            seen_buffers[nseen++] = buf;
        steps++;
    }
    CU_ASSERT_EQUAL(ra, 0);
    CU_ASSERT_EQUAL(zdist_input_next(pre, &b), 0);
    CU_ASSERT_EQUAL(zdist_input_next(pre, &b), 0);
    CU_ASSERT_EQUAL(steps, zdist_input_steps_per_epoch(sync) * o.epochs);
    CU_ASSERT(nseen <= 4);
    zdist_input_destroy(&sync);
    zdist_input_destroy(&pre);
}

static void
test_prefetch(void)
{
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_classification(1003, 5, 4, 9, &ds, &err), 0);
    zdist_input_context_t *ctx = zdist_input_context_new(2, 1, 6, &err);
    zdist_input_options_t o;
    zdist_input_options_init(&o, 64);
    o.shuffle = true;
    o.shuffle_seed = 5;
    o.epochs = 3;
    o.shard_policy = ZDIST_AUTO_SHARD_OFF;
    s_compare_sync_prefetch(ds, ctx, o);
    o.shard_policy = ZDIST_AUTO_SHARD_DATA;
    s_compare_sync_prefetch(ds, ctx, o);
    s_compare_sync_prefetch(ds, NULL, o);

    /* Destroying while the thread waits for a free buffer, and before any
       step was taken, shuts down cleanly. */
    o.prefetch = 2;
    o.epochs = ZDIST_INPUT_REPEAT_FOREVER;
    zdist_input_t *in = zdist_input_new(ds, ctx, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    const zdist_input_step_t *st;
    for (int i = 0; i < 50; i++)
        CU_ASSERT_EQUAL(zdist_input_next(in, &st), 1);
    CU_ASSERT_EQUAL(st->step, 49);
    zdist_input_destroy(&in);
    in = zdist_input_new(ds, ctx, &o, &err);
    zdist_input_destroy(&in);
    CU_ASSERT_PTR_NULL(in);
    zdist_input_context_destroy(&ctx);
    zdist_dataset_destroy(&ds);

    /* Sparse data through the thread. */
    char *dir = zdist_test_tmpdir("input");
    char *p = s_path(dir, "s.svm");
    FILE *f = fopen(p, "w");
    for (int i = 0; i < 97; i++) {
        fprintf(f, "%d", i % 2 ? 1 : -1);
        for (int j = 0; j <= i % 5; j++)
            fprintf(f, " %d:%d.5", 1 + (i * 7 + j * 13) % 50, j);
        fprintf(f, "\n");
    }
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_read_libsvm(p, 32, &ds, &err), 0);
    CU_ASSERT_EQUAL(zdist_dataset_max_row_nnz(ds), 5);
    zdist_input_options_init(&o, 10);
    o.shuffle = true;
    o.epochs = 2;
    ctx = zdist_input_context_new(1, 0, 3, &err);
    s_compare_sync_prefetch(ds, ctx, o);
    zdist_input_context_destroy(&ctx);
    zdist_dataset_destroy(&ds);
    free(p);
    zdist_test_rmtree(dir);
    free(dir);
}

/* zdist_input_seek (dataset.visitation exactly_once): after a seek to (e, s)
   the next step is the one a straight walk meets there, for whole batches
   with and without the prefetch thread, over the partial last batch and the
   epoch boundary; refused off whole batches, for a finite input and past the
   epoch. */
static void
s_seek_matches(const zdist_dataset_t *ds, const zdist_input_context_t *ctx, zdist_input_options_t o)
{
    zdist_error_t err = {0};
    o.epochs = ZDIST_INPUT_REPEAT_FOREVER;
    o.whole_batches = true;
    zdist_input_t *walk = zdist_input_new(ds, ctx, &o, &err), *in = zdist_input_new(ds, ctx, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(walk);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    int64_t spe = zdist_input_steps_per_epoch(walk), n = 3 * spe;
    int64_t *first = calloc((size_t)n, sizeof *first), *size = calloc((size_t)n, sizeof *size);
    const zdist_input_step_t *st;
    for (int64_t k = 0; k < n; k++) {
        CU_ASSERT_EQUAL_FATAL(zdist_input_next(walk, &st), 1);
        first[k] = st->replicas[0].size ? st->replicas[0].indices[0] : -1;
        size[k] = st->size;
    }
    /* Closures of 1..3 steps in a scrambled order, some the walk's next. */
    static const int64_t order[] = {5, 0, 1, 2, 9, 4, 3, 10, 11, 6, 7, 8, 12};
    for (size_t c = 0; c < sizeof order / sizeof *order; c++) {
        int64_t g = (order[c] * 7) % n, len = 1 + (int64_t)(c % 3);
        for (int64_t k = g; k < g + len && k < n; k++) {
            CU_ASSERT_EQUAL(zdist_input_seek(in, k / spe, k % spe), 0);
            CU_ASSERT_EQUAL_FATAL(zdist_input_next(in, &st), 1);
            CU_ASSERT_EQUAL(st->epoch, k / spe);
            CU_ASSERT_EQUAL(st->step_in_epoch, k % spe);
            CU_ASSERT_EQUAL(st->size, size[k]);
            CU_ASSERT_EQUAL(st->replicas[0].size ? st->replicas[0].indices[0] : -1, first[k]);
        }
    }
    CU_ASSERT_EQUAL(zdist_input_seek(in, 0, spe), -EINVAL);
    CU_ASSERT_EQUAL(zdist_input_seek(in, -1, 0), -EINVAL);
    free(first);
    free(size);
    zdist_input_destroy(&walk);
    zdist_input_destroy(&in);
}

static void
test_seek(void)
{
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_classification(103, 3, 4, 9, &ds, &err), 0);
    zdist_input_context_t *ctx = zdist_input_context_new(1, 0, 2, &err);
    zdist_input_options_t o;
    zdist_input_options_init(&o, 8); /* 13 batches, the last one of 7 */
    o.shuffle = true;
    o.shuffle_seed = 3;
    for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
        o.prefetch = prefetch;
        o.shard_policy = ZDIST_AUTO_SHARD_DATA;
        s_seek_matches(ds, ctx, o);
        o.shard_policy = ZDIST_AUTO_SHARD_OFF;
        s_seek_matches(ds, ctx, o);
    }
    o.epochs = 2; /* not for ever */
    o.whole_batches = true;
    zdist_input_t *in = zdist_input_new(ds, ctx, &o, &err);
    CU_ASSERT_EQUAL(zdist_input_seek(in, 0, 1), -EINVAL);
    zdist_input_destroy(&in);
    o.epochs = ZDIST_INPUT_REPEAT_FOREVER;
    o.whole_batches = false;
    in = zdist_input_new(ds, ctx, &o, &err);
    CU_ASSERT_EQUAL(zdist_input_seek(in, 0, 1), -EINVAL);
    zdist_input_destroy(&in);
    zdist_input_context_destroy(&ctx);
    zdist_dataset_destroy(&ds);
}

void
zdist_test_input_register(void)
{
    ZDIST_SUITE("input",
                {"libsvm raw_ids: any int64 index, kept as it is", test_libsvm_raw_ids},
                {"batch sizes for worker", test_batch_sizes_for_worker},
                {"batch sizes for any worker index", test_batch_sizes_for_any_worker_index},
                {"input context str", test_input_context_str},
                {"legacy rebatch split", test_rebatch_legacy},
                {"rebatch steps", test_rebatch_steps},
                {"shard DATA and OFF", test_shard_data_and_off},
                {"shard FILE", test_shard_file},
                {"input context", test_input_context},
                {"idx good", test_idx_good},
                {"idx corrupt", test_idx_corrupt},
                {"csv", test_csv},
                {"libsvm", test_libsvm},
                {"synthetic", test_synthetic},
                {"fashion-mnist", test_fashion_mnist},
                {"shuffle", test_shuffle},
                {"prefetch", test_prefetch},
                {"seek: a closure's batches, with and without prefetch", test_seek});
}
