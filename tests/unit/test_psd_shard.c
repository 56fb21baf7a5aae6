/* CUnit suite: psd_shard store (create, reads, writes, exactly-once, concurrency) and psd_init. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/init.h"
#include "zdist/partition.h"
#include "psd_store.h"
#include "psd_write.h"
#include "testutil.h"

static psd_shard_spec_t
s_spec(const char *name, int64_t d0, int64_t d1, zdist_dtype_t dtype, int index, int64_t off,
       int64_t rows)
{
    psd_shard_spec_t s = {
        .name = name,
        .shape = {.rank = 2, .dims = {d0, d1}},
        .dtype = dtype,
        .shard_index = index,
        .row_offset = off,
        .rows = rows,
        .init = {.kind = ZDIST_INIT_ZEROS},
        .seed = 42,
    };
    return s;
}

static int
s_write(psd_shard_t *sh, psd_op_t op, uint64_t client, uint64_t seq, zdist_dtype_t dtype,
        int64_t start, int64_t nrows, const int64_t *ids, size_t nids, const void *data,
        size_t nbytes, zdist_error_t *err)
{
    psd_write_t w = {.op = op, .client_id = client, .sequence = seq, .dtype = dtype,
                     .row_start = start, .nrows = nrows, .ids = ids, .nids = nids,
                     .data = data, .nbytes = nbytes};
    return psd_shard_write(sh, &w, err);
}

/* Sets a float32 [rows, width] shard to value(r, c) = 10 * global row + c. */
static void
s_fill_pattern(psd_shard_t *sh)
{
    const psd_shard_spec_t *s = psd_shard_spec(sh);
    int64_t width = psd_shard_row_width(sh);
    float *v = calloc((size_t) (s->rows * width), sizeof *v);
    for (int64_t r = 0; r < s->rows; r++)
        for (int64_t c = 0; c < width; c++)
            v[r * width + c] = (float) (10 * (s->row_offset + r) + c);
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN, 0, 0, s->dtype, 0, PSD_WHOLE_SHARD, NULL, 0, v,
                            (size_t) (s->rows * width) * sizeof *v, NULL), 0);
    free(v);
}

static void
test_create_idempotent(void)
{
    psd_store_t *store = psd_store_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(store);
    zdist_error_t err = {0};
    psd_shard_spec_t a = s_spec("dense/kernel", 13, 4, ZDIST_DTYPE_FLOAT32, 0, 0, 5);
    psd_shard_t *s1 = NULL, *s2 = NULL;
    CU_ASSERT_EQUAL(psd_store_create(store, &a, &s1, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(s1);
    CU_ASSERT_EQUAL(psd_store_create(store, &a, &s2, &err), 0);
    CU_ASSERT_PTR_EQUAL(s1, s2);
    CU_ASSERT_PTR_EQUAL(psd_store_find(store, "dense/kernel", 0), s1);
    CU_ASSERT_PTR_NULL(psd_store_find(store, "dense/kernel", 1));
    CU_ASSERT_PTR_NULL(psd_store_find(store, "dense", 0));

    /* same key, other spec */
    psd_shard_spec_t b = a;
    b.init.kind = ZDIST_INIT_ONES;
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EEXIST);
    CU_ASSERT_EQUAL(zdist_status_from_errno(-EEXIST), ZDIST_STATUS_ALREADY_EXISTS);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "already exists"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "ones"));
    b = a;
    b.rows = 4;
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EEXIST);
    b = a;
    b.seed = 43;
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EEXIST);
    /* another shard with another full shape or dtype */
    b = s_spec("dense/kernel", 13, 5, ZDIST_DTYPE_FLOAT32, 1, 5, 4);
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EEXIST);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "another dtype or shape"));
    b = s_spec("dense/kernel", 13, 4, ZDIST_DTYPE_FLOAT64, 1, 5, 4);
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EEXIST);
    /* overlapping rows */
    b = s_spec("dense/kernel", 13, 4, ZDIST_DTYPE_FLOAT32, 1, 4, 4);
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EEXIST);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "overlap"));
    /* bad specs */
    b = s_spec("dense/kernel", 13, 4, ZDIST_DTYPE_FLOAT32, 1, 10, 4);
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "outside its 13 rows"));
    b = s_spec("", 13, 4, ZDIST_DTYPE_FLOAT32, 0, 0, 4);
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EINVAL);
    b = s_spec("x", 13, 4, ZDIST_DTYPE_STRING, 0, 0, 4);
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EINVAL);
    b = s_spec("x", 13, 4, ZDIST_DTYPE_INT32, 0, 0, 4);
    b.init.kind = ZDIST_INIT_RANDOM_NORMAL;
    b.init.stddev = 1;
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "float32 or float64"));
    b = s_spec("x", 13, 4, ZDIST_DTYPE_FLOAT32, -1, 0, 4);
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EINVAL);
    char longname[PSD_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    b = s_spec(longname, 13, 4, ZDIST_DTYPE_FLOAT32, 0, 0, 4);
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), -EINVAL);

    /* a second, non-overlapping shard of the variable is fine */
    b = s_spec("dense/kernel", 13, 4, ZDIST_DTYPE_FLOAT32, 2, 9, 4);
    CU_ASSERT_EQUAL(psd_store_create(store, &b, NULL, &err), 0);
    psd_shard_spec_t c = s_spec("bias", 4, 1, ZDIST_DTYPE_FLOAT64, 0, 0, 4);
    c.shape.rank = 1;
    CU_ASSERT_EQUAL(psd_store_create(store, &c, NULL, &err), 0);

    psd_store_stats_t st;
    psd_store_stats(store, &st);
    CU_ASSERT_EQUAL(st.variables, 2);
    CU_ASSERT_EQUAL(st.shards, 3);
    CU_ASSERT_EQUAL(st.value_bytes, 5 * 4 * 4 + 4 * 4 * 4 + 4 * 8);
    CU_ASSERT_EQUAL(st.slot_bytes, 0);
    psd_shard_t *list[8];
    CU_ASSERT_EQUAL(psd_store_list(store, list, 8), 3);
    CU_ASSERT_EQUAL(psd_store_list(store, NULL, 0), 3);
    CU_ASSERT_EQUAL(psd_store_list(store, list, 2), 2); /* never more than max */
    CU_ASSERT_STRING_EQUAL(psd_shard_spec(list[0])->name, "bias");
    CU_ASSERT_EQUAL(psd_shard_spec(list[2])->shard_index, 2);
    psd_store_destroy(&store);
    CU_ASSERT_PTR_NULL(store);
    psd_store_destroy(&store); /* idempotent */
    psd_store_destroy(NULL);
}

static void
test_reads(void)
{
    psd_store_t *store = psd_store_new();
    zdist_error_t err = {0};
    psd_shard_spec_t a = s_spec("emb", 10, 3, ZDIST_DTYPE_FLOAT32, 1, 4, 4); /* rows [4, 8) */
    psd_shard_t *sh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &a, &sh, &err), 0);
    s_fill_pattern(sh);

    float buf[16 * 3];
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, PSD_WHOLE_SHARD, buf, sizeof buf, &err), 0);
    CU_ASSERT_EQUAL(buf[0], 40.0f);
    CU_ASSERT_EQUAL(buf[3 * 3 + 2], 72.0f);
    CU_ASSERT_EQUAL(psd_shard_read(sh, 5, 2, buf, 6 * sizeof(float), &err), 0);
    CU_ASSERT_EQUAL(buf[0], 50.0f);
    CU_ASSERT_EQUAL(buf[5], 62.0f);
    CU_ASSERT_EQUAL(psd_shard_read(sh, 6, 3, buf, sizeof buf, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "[4, 8)"));
    CU_ASSERT_EQUAL(psd_shard_read(sh, 3, 1, buf, sizeof buf, &err), -EINVAL);
    CU_ASSERT_EQUAL(psd_shard_read(sh, 4, 2, buf, 5 * sizeof(float), &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "too small"));

    int64_t ids[] = {7, 4, 7, 5};
    CU_ASSERT_EQUAL(psd_shard_read_ids(sh, ids, 4, buf, 12 * sizeof(float), &err), 0);
    CU_ASSERT_EQUAL(buf[0], 70.0f);
    CU_ASSERT_EQUAL(buf[3], 40.0f);
    CU_ASSERT_EQUAL(buf[6], 70.0f);
    CU_ASSERT_EQUAL(buf[8], 72.0f);
    CU_ASSERT_EQUAL(buf[11], 52.0f);

    int64_t bad[] = {5, 8};
    buf[0] = -1;
    CU_ASSERT_EQUAL(psd_shard_read_ids(sh, bad, 2, buf, sizeof buf, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "id 8"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "[4, 8)"));
    CU_ASSERT_EQUAL(buf[0], -1.0f); /* nothing copied */
    int64_t neg[] = {-1};
    CU_ASSERT_EQUAL(psd_shard_read_ids(sh, neg, 1, buf, sizeof buf, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "id -1"));

    /* the same variable's part 3 on this ps; part 2 is elsewhere */
    psd_shard_spec_t p3 = s_spec("emb", 10, 3, ZDIST_DTYPE_FLOAT32, 3, 9, 1);
    psd_shard_t *sh3 = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &p3, &sh3, &err), 0);
    s_fill_pattern(sh3);
    CU_ASSERT_PTR_EQUAL(psd_store_find_row(store, "emb", 6), sh);
    CU_ASSERT_PTR_EQUAL(psd_store_find_row(store, "emb", 9), sh3);
    CU_ASSERT_PTR_NULL(psd_store_find_row(store, "emb", 8));
    CU_ASSERT_PTR_NULL(psd_store_find_row(store, "nope", 0));
    int64_t across[] = {9, 4, 9};
    CU_ASSERT_EQUAL(psd_store_read_ids(store, "emb", across, 3, buf, 9 * sizeof(float), &err), 0);
    CU_ASSERT_EQUAL(buf[0], 90.0f);
    CU_ASSERT_EQUAL(buf[4], 41.0f);
    CU_ASSERT_EQUAL(buf[8], 92.0f);
    int64_t missing[] = {4, 8};
    CU_ASSERT_EQUAL(psd_store_read_ids(store, "emb", missing, 2, buf, sizeof buf, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "id 8"));
    CU_ASSERT_EQUAL(psd_store_read_ids(store, "nope", missing, 1, buf, sizeof buf, &err), -ENOENT);
    psd_store_destroy(&store);
}

static void
test_writes(void)
{
    psd_store_t *store = psd_store_new();
    zdist_error_t err = {0};
    psd_shard_spec_t a = s_spec("w", 6, 2, ZDIST_DTYPE_FLOAT32, 0, 0, 6);
    a.init = (zdist_initializer_t){.kind = ZDIST_INIT_CONSTANT, .value = 1.5};
    psd_shard_t *sh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &a, &sh, &err), 0);
    float v[12];
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, PSD_WHOLE_SHARD, v, sizeof v, &err), 0);
    CU_ASSERT_EQUAL(v[0], 1.5f);
    CU_ASSERT_EQUAL(v[11], 1.5f);

    float two[4] = {1, 2, 3, 4};
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN, 0, 0, ZDIST_DTYPE_FLOAT32, 2, 2, NULL, 0, two,
                            sizeof two, &err), 0);
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 3, 2, NULL, 0, two,
                            sizeof two, &err), 0);
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_SUB, 0, 0, ZDIST_DTYPE_FLOAT32, 0, 1, NULL, 0, two,
                            2 * sizeof(float), &err), 0);
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, PSD_WHOLE_SHARD, v, sizeof v, &err), 0);
    float expect1[12] = {0.5f, -0.5f, 1.5f, 1.5f, 1, 2, 4, 6, 4.5f, 5.5f, 1.5f, 1.5f};
    CU_ASSERT_EQUAL(memcmp(v, expect1, sizeof v), 0);

    int64_t ids[] = {5, 1, 5};
    float rows[6] = {1, 1, 2, 2, 10, 20};
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_SCATTER_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 0, 0, ids, 3, rows,
                            sizeof rows, &err), 0);
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, PSD_WHOLE_SHARD, v, sizeof v, &err), 0);
    CU_ASSERT_EQUAL(v[10], 12.5f); /* 1.5 + 1 + 10 */
    CU_ASSERT_EQUAL(v[11], 22.5f);
    CU_ASSERT_EQUAL(v[2], 3.5f);
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_SCATTER_UPDATE, 0, 0, ZDIST_DTYPE_FLOAT32, 0, 0, ids, 3,
                            rows, sizeof rows, &err), 0);
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, PSD_WHOLE_SHARD, v, sizeof v, &err), 0);
    CU_ASSERT_EQUAL(v[10], 10.0f); /* the later duplicate wins */
    CU_ASSERT_EQUAL(v[2], 2.0f);

    /* refusals change nothing */
    float before[12];
    memcpy(before, v, sizeof v);
    double d[4] = {9, 9, 9, 9};
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN, 0, 0, ZDIST_DTYPE_FLOAT64, 0, 2, NULL, 0, d,
                            sizeof d, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "expected dtype float32, got float64"));
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 0, 2, NULL, 0, two,
                            3 * sizeof(float), &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "expected [2,2] float32 = 16 bytes, got 12 bytes"));
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN, 0, 0, ZDIST_DTYPE_FLOAT32, 5, 2, NULL, 0, two,
                            sizeof two, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "[0, 6)"));
    int64_t bad_ids[] = {1, 6, 2};
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_SCATTER_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 0, 0, bad_ids, 3,
                            rows, sizeof rows, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "id 6"));
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_SCATTER_UPDATE, 0, 0, ZDIST_DTYPE_FLOAT32, 0, 0, ids, 3,
                            rows, sizeof rows - 1, &err), -EINVAL);
    CU_ASSERT_EQUAL(s_write(sh, (psd_op_t) 99, 0, 0, ZDIST_DTYPE_FLOAT32, 0, 1, NULL, 0, two,
                            8, &err), -EINVAL);
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, PSD_WHOLE_SHARD, v, sizeof v, &err), 0);
    CU_ASSERT_EQUAL(memcmp(v, before, sizeof v), 0);

    /* integer shards wrap like TF and refuse optimizers */
    psd_shard_spec_t ci = s_spec("counts", 2, 2, ZDIST_DTYPE_INT32, 0, 0, 2);
    ci.init = (zdist_initializer_t){.kind = ZDIST_INIT_CONSTANT, .value = 2147483647.0};
    psd_shard_t *si = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &ci, &si, &err), 0);
    int32_t one[4] = {1, 1, 1, -1};
    CU_ASSERT_EQUAL(s_write(si, PSD_OP_ASSIGN_ADD, 0, 0, ZDIST_DTYPE_INT32, 0, PSD_WHOLE_SHARD,
                            NULL, 0, one, sizeof one, &err), 0);
    int32_t iv[4];
    CU_ASSERT_EQUAL(psd_shard_read(si, 0, PSD_WHOLE_SHARD, iv, sizeof iv, &err), 0);
    CU_ASSERT_EQUAL(iv[0], INT32_MIN);
    CU_ASSERT_EQUAL(iv[3], 2147483646);
    CU_ASSERT_EQUAL(s_write(si, PSD_OP_APPLY_DENSE, 0, 0, ZDIST_DTYPE_INT32, 0, PSD_WHOLE_SHARD,
                            NULL, 0, one, sizeof one, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "optimizers need"));
    ci.init.value = 2147483648.0;
    ci.name = "counts2";
    CU_ASSERT_EQUAL(psd_store_create(store, &ci, NULL, &err), -EINVAL);
    psd_store_destroy(&store);
}

static void
test_exactly_once(void)
{
    psd_store_t *store = psd_store_new();
    zdist_error_t err = {0};
    psd_shard_spec_t a = s_spec("w", 1, 1, ZDIST_DTYPE_FLOAT64, 0, 0, 1);
    psd_shard_t *sh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &a, &sh, &err), 0);
    double one = 1, v = 0;
#define ADD(client, seq) \
    s_write(sh, PSD_OP_ASSIGN_ADD, client, seq, ZDIST_DTYPE_FLOAT64, 0, 1, NULL, 0, &one, 8, &err)
#define VALUE() (psd_shard_read(sh, 0, 1, &v, 8, NULL), v)
    CU_ASSERT_EQUAL(ADD(7, 1), 0);
    CU_ASSERT_EQUAL(ADD(7, 1), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(VALUE(), 1.0);
    CU_ASSERT_EQUAL(ADD(7, 3), 0);
    CU_ASSERT_EQUAL(ADD(7, 2), 0); /* late, but never applied: applied now */
    CU_ASSERT_EQUAL(ADD(7, 2), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(ADD(7, 3), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(ADD(8, 1), 0); /* another client has its own sequence */
    CU_ASSERT_EQUAL(VALUE(), 4.0);
    /* a refused write is not recorded, so its retry applies */
    double bad[2] = {1, 1};
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 7, 4, ZDIST_DTYPE_FLOAT64, 0, 1, NULL, 0, bad,
                            16, &err), -EINVAL);
    CU_ASSERT_EQUAL(ADD(7, 4), 0);
    CU_ASSERT_EQUAL(VALUE(), 5.0);
    /* a jump beyond the window: everything older counts as applied */
    CU_ASSERT_EQUAL(ADD(7, 4 + PSD_DEDUP_WINDOW + 10), 0);
    CU_ASSERT_EQUAL(ADD(7, 5), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(ADD(7, 4 + PSD_DEDUP_WINDOW + 9), 0); /* inside the window, unseen */
    CU_ASSERT_EQUAL(VALUE(), 7.0);
    /* client 0 is not deduplicated */
    CU_ASSERT_EQUAL(ADD(0, 1), 0);
    CU_ASSERT_EQUAL(ADD(0, 1), 0);
    CU_ASSERT_EQUAL(VALUE(), 9.0);
    /* dedup also covers optimizer applies; the step counts applies only */
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_APPLY_DENSE, 9, 1, ZDIST_DTYPE_FLOAT64, 0, 1, NULL, 0, &one,
                            8, &err), 0);
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_APPLY_DENSE, 9, 1, ZDIST_DTYPE_FLOAT64, 0, 1, NULL, 0, &one,
                            8, &err), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(psd_shard_step(sh), 1);
    CU_ASSERT_DOUBLE_EQUAL(VALUE(), 9.0 - 0.01, 1e-12); /* default sgd, lr 0.01 */
    /* many clients: the least recently used is evicted, the others kept */
    for (uint64_t c = 100; c < 100 + PSD_DEDUP_MAX_CLIENTS + 5; c++)
        CU_ASSERT_EQUAL(ADD(c, 1), 0);
    CU_ASSERT_EQUAL(ADD(100 + PSD_DEDUP_MAX_CLIENTS + 4, 1), PSD_DUPLICATE);
#undef ADD
#undef VALUE
    psd_store_destroy(&store);
}

/* Writes deduplicated by the job's step: whoever sends a step (another
   client: a closure re-run on another worker), a shard applies it once; a
   step that never arrived is applied; a second write of one step to the
   shard is its own key. */
static void
test_exactly_once_by_step(void)
{
    psd_store_t *store = psd_store_new();
    zdist_error_t err = {0};
    psd_shard_spec_t a = s_spec("w", 1, 1, ZDIST_DTYPE_FLOAT64, 0, 0, 1);
    psd_shard_t *sh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &a, &sh, &err), 0);
    double one = 1, v = 0;
#define STEP(client, seq, step, ord)                                                                      \
    psd_shard_write(sh,                                                                                  \
                    &(psd_write_t){.op = PSD_OP_APPLY_DENSE, .client_id = client, .sequence = seq,      \
                                   .job_step = step, .step_write = ord, .dtype = ZDIST_DTYPE_FLOAT64,   \
                                   .nrows = PSD_WHOLE_SHARD, .data = &one, .nbytes = 8},                \
                    &err)
    /* worker A runs steps 1..5 and is lost after pushing 1..3 */
    for (uint64_t s = 1; s <= 3; s++)
        CU_ASSERT_EQUAL(STEP(0xA, s, s, 0), 0);
    /* worker B runs the next closure meanwhile, then the re-run of A's */
    for (uint64_t s = 6; s <= 10; s++)
        CU_ASSERT_EQUAL(STEP(0xB, s, s, 0), 0);
    for (uint64_t s = 1; s <= 5; s++)
        CU_ASSERT_EQUAL(STEP(0xB, 10 + s, s, 0), s <= 3 ? PSD_DUPLICATE : 0);
    CU_ASSERT_EQUAL(psd_shard_step(sh), 10);
    /* A wakes up (frozen, not dead) and pushes its steps 4 and 5 late */
    CU_ASSERT_EQUAL(STEP(0xA, 4, 4, 0), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(STEP(0xA, 5, 5, 0), PSD_DUPLICATE);
    /* a step writing the shard twice: two keys; each once */
    CU_ASSERT_EQUAL(STEP(0xB, 20, 11, 0), 0);
    CU_ASSERT_EQUAL(STEP(0xB, 21, 11, 1), 0);
    CU_ASSERT_EQUAL(STEP(0xA, 30, 11, 1), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(psd_shard_step(sh), 12);
    /* the step identity decides, not the sequence: a fresh sequence of a
       client that sent the step is still a duplicate, and a sequence the
       client used before does not hide a new step */
    CU_ASSERT_EQUAL(STEP(0xB, 99, 7, 0), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(STEP(0xB, 6, 12, 0), 0);
    CU_ASSERT_EQUAL(psd_shard_step(sh), 13);
    /* steps applied without a gap keep the ledger at a word or two */
    for (uint64_t s = 13; s <= 20000; s++)
        CU_ASSERT_EQUAL(STEP(0xC, s, s, 0), 0);
    psd_shard_view_t view;
    psd_shard_view_begin(sh, &view);
    CU_ASSERT(view.ledger->nwords <= 1);
    CU_ASSERT_EQUAL(psd_ledger_floor(view.ledger), 20001);
    psd_shard_view_end(sh);
    CU_ASSERT_EQUAL(STEP(0xC, 1, 19999, 0), PSD_DUPLICATE);
    (void) v;
#undef STEP
    psd_store_destroy(&store);
}

/* The ledger alone: gaps (steps that skip the shard) within the window are
   exact, older ones count as applied; an intersection keeps what every
   source applied. */
static void
test_ledger(void)
{
    psd_ledger_t l = {0};
    CU_ASSERT_FALSE(psd_ledger_seen(&l, 1, 0));
    CU_ASSERT_FALSE(psd_ledger_seen(&l, 0, 0)); /* step 0 is never tracked */
    CU_ASSERT_EQUAL(psd_ledger_record(&l, 0, 0), 0);
    CU_ASSERT_FALSE(psd_ledger_seen(&l, 0, 0));
    for (uint64_t s = 1; s <= 1000; s += 2) /* every other step skips the shard */
        CU_ASSERT_EQUAL(psd_ledger_record(&l, s, 0), 0);
    CU_ASSERT_TRUE(psd_ledger_seen(&l, 999, 0));
    CU_ASSERT_FALSE(psd_ledger_seen(&l, 998, 0));
    CU_ASSERT_FALSE(psd_ledger_seen(&l, 2, 0));
    CU_ASSERT_EQUAL(psd_ledger_floor(&l), 2); /* the first gap */
    /* a jump past the window: older gaps count as applied */
    CU_ASSERT_EQUAL(psd_ledger_record(&l, 1000 + PSD_LEDGER_WINDOW + 64, 0), 0);
    CU_ASSERT_TRUE(psd_ledger_seen(&l, 2, 0));
    CU_ASSERT_TRUE(psd_ledger_seen(&l, 998, 0));
    CU_ASSERT_FALSE(psd_ledger_seen(&l, 1000 + PSD_LEDGER_WINDOW + 63, 0));
    CU_ASSERT(l.nwords <= PSD_LEDGER_WINDOW / 64);
    /* second writes of a step within the window */
    CU_ASSERT_EQUAL(psd_ledger_record(&l, 1000 + PSD_LEDGER_WINDOW, 2), 0);
    CU_ASSERT_TRUE(psd_ledger_seen(&l, 1000 + PSD_LEDGER_WINDOW, 2));
    CU_ASSERT_FALSE(psd_ledger_seen(&l, 1000 + PSD_LEDGER_WINDOW, 1));
    psd_ledger_clear(&l);

    psd_ledger_t a = {0}, b = {0}, both = {0};
    for (uint64_t s = 1; s <= 300; s++) {
        if (s != 7)
            psd_ledger_record(&a, s, 0);
        if (s != 200)
            psd_ledger_record(&b, s, 0);
    }
    psd_ledger_record(&a, 50, 1);
    psd_ledger_record(&b, 50, 1);
    psd_ledger_record(&a, 60, 1);
    const psd_ledger_t *srcs[2] = {&a, &b};
    CU_ASSERT_EQUAL(psd_ledger_intersect(&both, srcs, 2), 0);
    CU_ASSERT_FALSE(psd_ledger_seen(&both, 7, 0));
    CU_ASSERT_FALSE(psd_ledger_seen(&both, 200, 0));
    CU_ASSERT_TRUE(psd_ledger_seen(&both, 8, 0));
    CU_ASSERT_TRUE(psd_ledger_seen(&both, 300, 0));
    CU_ASSERT_FALSE(psd_ledger_seen(&both, 301, 0));
    CU_ASSERT_TRUE(psd_ledger_seen(&both, 50, 1));
    CU_ASSERT_FALSE(psd_ledger_seen(&both, 60, 1));
    CU_ASSERT_EQUAL(psd_ledger_floor(&both), 7);
    psd_ledger_clear(&a);
    psd_ledger_clear(&b);
    psd_ledger_clear(&both);
}

/* ---- concurrency ---- */

typedef struct {
    psd_shard_t *shard;
    uint64_t client;
    int iterations;
    volatile int *stop;
    int torn;
    int reads;
} s_worker_t;

#define S_ROWS 4
#define S_COLS 64

static void *
s_adder(void *arg)
{
    s_worker_t *w = arg;
    float ones[S_ROWS * S_COLS];
    for (int i = 0; i < S_ROWS * S_COLS; i++)
        ones[i] = 1.0f;
    for (int i = 0; i < w->iterations; i++)
        if (s_write(w->shard, PSD_OP_ASSIGN_ADD, w->client, (uint64_t) i + 1, ZDIST_DTYPE_FLOAT32,
                    0, PSD_WHOLE_SHARD, NULL, 0, ones, sizeof ones, NULL) != 0)
            w->torn++;
    return NULL;
}

static void *
s_reader(void *arg)
{
    s_worker_t *w = arg;
    float buf[S_ROWS * S_COLS];
    while (!*w->stop) {
        int64_t r = w->reads % S_ROWS;
        if (psd_shard_read(w->shard, r, 1, buf, S_COLS * sizeof(float), NULL) != 0)
            w->torn++;
        for (int c = 1; c < S_COLS; c++)
            if (buf[c] != buf[0])
                w->torn++;
        if (psd_shard_read(w->shard, 0, PSD_WHOLE_SHARD, buf, sizeof buf, NULL) != 0)
            w->torn++;
        for (int c = 1; c < S_ROWS * S_COLS; c++)
            if (buf[c] != buf[0])
                w->torn++;
        w->reads++;
    }
    return NULL;
}

static void
test_concurrent_assign_add(void)
{
    psd_store_t *store = psd_store_new();
    psd_shard_spec_t a = s_spec("counter", S_ROWS, S_COLS, ZDIST_DTYPE_FLOAT32, 0, 0, S_ROWS);
    psd_shard_t *sh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &a, &sh, NULL), 0);
    volatile int stop = 0;
    pthread_t adders[8], readers[2];
    s_worker_t aw[8], rw[2];
    for (int i = 0; i < 2; i++) {
        rw[i] = (s_worker_t){.shard = sh, .stop = &stop};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&readers[i], NULL, s_reader, &rw[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        aw[i] = (s_worker_t){.shard = sh, .client = (uint64_t) i + 1, .iterations = 10000};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&adders[i], NULL, s_adder, &aw[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(adders[i], NULL);
        CU_ASSERT_EQUAL(aw[i].torn, 0);
    }
    stop = 1;
    for (int i = 0; i < 2; i++) {
        pthread_join(readers[i], NULL);
        CU_ASSERT_EQUAL(rw[i].torn, 0);
        CU_ASSERT(rw[i].reads > 0);
    }
    float buf[S_ROWS * S_COLS];
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, PSD_WHOLE_SHARD, buf, sizeof buf, NULL), 0);
    int wrong = 0;
    for (int i = 0; i < S_ROWS * S_COLS; i++)
        wrong += buf[i] != 80000.0f;
    CU_ASSERT_EQUAL(wrong, 0);
    psd_store_destroy(&store);
}

/* ---- initializers ---- */

/* Fills a [rows, cols] float64 variable through a Div partition into n shards. */
static void
s_fill_sharded(const zdist_initializer_t *init, const char *name, int64_t rows, int64_t cols, int nshards,
               double *out)
{
    psd_store_t *store = psd_store_new();
    int64_t off = 0;
    for (int i = 0; i < nshards; i++) {
        int64_t n = rows / nshards + (i < rows % nshards ? 1 : 0);
        psd_shard_spec_t s = s_spec(name, rows, cols, ZDIST_DTYPE_FLOAT64, i, off, n);
        s.init = *init;
        s.seed = 1234;
        psd_shard_t *sh = NULL;
        CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &s, &sh, NULL), 0);
        CU_ASSERT_EQUAL(psd_shard_read(sh, off, n, out + off * cols,
                                       (size_t) (n * cols) * sizeof(double), NULL), 0);
        off += n;
    }
    CU_ASSERT_EQUAL(off, rows);
    psd_store_destroy(&store);
}

static void
test_init_sharding_determinism(void)
{
    zdist_initializer_t inits[] = {
        {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -2, .maxval = 3},
        {.kind = ZDIST_INIT_RANDOM_NORMAL, .mean = 1, .stddev = 0.5},
        {.kind = ZDIST_INIT_TRUNCATED_NORMAL, .mean = 0, .stddev = 2},
        {.kind = ZDIST_INIT_GLOROT_UNIFORM},
        {.kind = ZDIST_INIT_CONSTANT, .value = 0.25},
    };
    enum { R = 13, C = 7 };
    for (size_t k = 0; k < sizeof inits / sizeof inits[0]; k++) {
        double one[R * C], three[R * C], five[R * C];
        s_fill_sharded(&inits[k], "layer/kernel", R, C, 1, one);
        s_fill_sharded(&inits[k], "layer/kernel", R, C, 3, three);
        s_fill_sharded(&inits[k], "layer/kernel", R, C, 5, five);
        CU_ASSERT_EQUAL(memcmp(one, three, sizeof one), 0);
        CU_ASSERT_EQUAL(memcmp(one, five, sizeof one), 0);
        if (inits[k].kind != ZDIST_INIT_CONSTANT) {
            /* random: elements differ from each other, and by name */
            int same = 0;
            for (int i = 1; i < R * C; i++)
                same += one[i] == one[0];
            CU_ASSERT(same < 2);
            double other[R * C];
            s_fill_sharded(&inits[k], "layer/bias", R, C, 1, other);
            CU_ASSERT_NOT_EQUAL(memcmp(one, other, sizeof one), 0);
        }
    }
    /* another seed gives other values */
    zdist_shape_t shape = {.rank = 2, .dims = {4, 4}};
    zdist_initializer_t u = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = 0, .maxval = 1};
    double a[16], b[16];
    CU_ASSERT_EQUAL(zdist_init_fill(&u, 1, "v", ZDIST_DTYPE_FLOAT64, &shape, 0, 4, a, sizeof a, NULL), 0);
    CU_ASSERT_EQUAL(zdist_init_fill(&u, 2, "v", ZDIST_DTYPE_FLOAT64, &shape, 0, 4, b, sizeof b, NULL), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
    /* float32 is the float64 value rounded */
    float f[16];
    CU_ASSERT_EQUAL(zdist_init_fill(&u, 1, "v", ZDIST_DTYPE_FLOAT32, &shape, 0, 4, f, sizeof f, NULL), 0);
    CU_ASSERT_EQUAL(f[5], (float) a[5]);
}

static void
test_init_distributions(void)
{
    enum { N = 20000 };
    zdist_shape_t shape = {.rank = 2, .dims = {N, 1}};
    double *x = malloc(N * sizeof *x);
    zdist_error_t err = {0};

    zdist_initializer_t u = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -2, .maxval = 3};
    CU_ASSERT_EQUAL(zdist_init_fill(&u, 7, "u", ZDIST_DTYPE_FLOAT64, &shape, 0, N, x, N * 8, &err), 0);
    double sum = 0, sq = 0;
    int out = 0;
    for (int i = 0; i < N; i++) {
        out += x[i] < -2 || x[i] >= 3;
        sum += x[i];
    }
    CU_ASSERT_EQUAL(out, 0);
    CU_ASSERT_DOUBLE_EQUAL(sum / N, 0.5, 0.05); /* sd of the mean ~ 0.01 */

    zdist_initializer_t nrm = {.kind = ZDIST_INIT_RANDOM_NORMAL, .mean = 1, .stddev = 2};
    CU_ASSERT_EQUAL(zdist_init_fill(&nrm, 7, "n", ZDIST_DTYPE_FLOAT64, &shape, 0, N, x, N * 8, &err), 0);
    sum = sq = 0;
    int beyond = 0;
    for (int i = 0; i < N; i++) {
        sum += x[i];
        beyond += fabs(x[i] - 1) > 4;
    }
    double mean = sum / N;
    for (int i = 0; i < N; i++)
        sq += (x[i] - mean) * (x[i] - mean);
    CU_ASSERT_DOUBLE_EQUAL(mean, 1.0, 0.1);
    CU_ASSERT_DOUBLE_EQUAL(sqrt(sq / N), 2.0, 0.1);
    CU_ASSERT(beyond > N / 50); /* ~4.6% lie beyond 2 sd */

    zdist_initializer_t tn = {.kind = ZDIST_INIT_TRUNCATED_NORMAL, .mean = 1, .stddev = 2};
    CU_ASSERT_EQUAL(zdist_init_fill(&tn, 7, "t", ZDIST_DTYPE_FLOAT64, &shape, 0, N, x, N * 8, &err), 0);
    beyond = 0;
    sum = sq = 0;
    for (int i = 0; i < N; i++) {
        beyond += fabs(x[i] - 1) > 4;
        sum += x[i];
    }
    mean = sum / N;
    for (int i = 0; i < N; i++)
        sq += (x[i] - mean) * (x[i] - mean);
    CU_ASSERT_EQUAL(beyond, 0);
    CU_ASSERT_DOUBLE_EQUAL(mean, 1.0, 0.1);
    CU_ASSERT_DOUBLE_EQUAL(sqrt(sq / N), 2.0 * 0.8796, 0.1); /* sd of N(0,1) cut at +-2 */

    /* glorot: limit from the FULL shape, values within it */
    zdist_shape_t s2 = {.rank = 2, .dims = {3, 5}};
    zdist_shape_t s1 = {.rank = 1, .dims = {7}};
    zdist_shape_t s4 = {.rank = 4, .dims = {3, 3, 4, 8}};
    zdist_shape_t s0 = {.rank = 0};
    double fi, fo;
    zdist_init_compute_fans(&s4, &fi, &fo);
    CU_ASSERT_EQUAL(fi, 36);
    CU_ASSERT_EQUAL(fo, 72);
    zdist_init_compute_fans(&s1, &fi, &fo);
    CU_ASSERT_EQUAL(fi, 7);
    CU_ASSERT_EQUAL(fo, 7);
    CU_ASSERT_DOUBLE_EQUAL(zdist_init_glorot_limit(&s2), sqrt(6.0 / 8), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(zdist_init_glorot_limit(&s1), sqrt(6.0 / 14), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(zdist_init_glorot_limit(&s4), sqrt(6.0 / 108), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(zdist_init_glorot_limit(&s0), sqrt(3.0), 1e-15);
    zdist_shape_t big = {.rank = 2, .dims = {400, 100}};
    double *g = malloc(400 * 100 * sizeof *g);
    zdist_initializer_t gl = {.kind = ZDIST_INIT_GLOROT_UNIFORM};
    /* rows 100..300 only: the limit still comes from [400, 100] */
    CU_ASSERT_EQUAL(zdist_init_fill(&gl, 3, "g", ZDIST_DTYPE_FLOAT64, &big, 100, 200, g,
                                  200 * 100 * 8, &err), 0);
    double lim = sqrt(6.0 / 500), maxabs = 0;
    for (int i = 0; i < 200 * 100; i++)
        maxabs = fmax(maxabs, fabs(g[i]));
    CU_ASSERT(maxabs <= lim);
    CU_ASSERT(maxabs > 0.99 * lim);
    free(g);

    /* refusals */
    CU_ASSERT_EQUAL(zdist_init_fill(&gl, 3, "g", ZDIST_DTYPE_INT64, &big, 0, 1, x, 800, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "glorot_uniform needs a float32 or float64"));
    zdist_initializer_t badu = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = 2, .maxval = 1};
    CU_ASSERT_EQUAL(zdist_init_validate(&badu, ZDIST_DTYPE_FLOAT32, &err), -EINVAL);
    zdist_initializer_t badn = {.kind = ZDIST_INIT_RANDOM_NORMAL, .stddev = -1};
    CU_ASSERT_EQUAL(zdist_init_validate(&badn, ZDIST_DTYPE_FLOAT32, &err), -EINVAL);
    CU_ASSERT_EQUAL(zdist_init_fill(&u, 7, "u", ZDIST_DTYPE_FLOAT64, &shape, N - 1, 2, x, 16, &err), -EINVAL);
    CU_ASSERT_EQUAL(zdist_init_fill(&u, 7, "u", ZDIST_DTYPE_FLOAT64, &shape, 0, 2, x, 8, &err), -EINVAL);
    zdist_init_kind_t kind;
    CU_ASSERT_EQUAL(zdist_init_kind_from_name("truncated_normal", &kind), 0);
    CU_ASSERT_EQUAL(kind, ZDIST_INIT_TRUNCATED_NORMAL);
    CU_ASSERT_EQUAL(zdist_init_kind_from_name("he_normal", &kind), -EINVAL);
    /* ones/constant fill int dtypes */
    int64_t iv[4];
    zdist_initializer_t c = {.kind = ZDIST_INIT_CONSTANT, .value = -3};
    zdist_shape_t s22 = {.rank = 2, .dims = {2, 2}};
    CU_ASSERT_EQUAL(zdist_init_fill(&c, 0, "c", ZDIST_DTYPE_INT64, &s22, 0, 2, iv, sizeof iv, &err), 0);
    CU_ASSERT_EQUAL(iv[3], -3);
    free(x);
}

/* A job's variables carry its prefix on the psds; their values are drawn for the
   model's own name (init_name), so every submission of a job starts alike. */
static void
test_init_name(void)
{
    psd_store_t *store = psd_store_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(store);
    zdist_error_t err = {0};
    psd_shard_spec_t plain = s_spec("dense/kernel", 6, 3, ZDIST_DTYPE_FLOAT32, 0, 0, 6);
    plain.init = (zdist_initializer_t){.kind = ZDIST_INIT_GLOROT_UNIFORM};
    psd_shard_spec_t j1 = plain, j2 = plain, bare = plain;
    j1.name = "j1/dense/kernel";
    j1.init_name = "dense/kernel";
    j2.name = "j2/dense/kernel";
    j2.init_name = "dense/kernel";
    bare.name = "j3/dense/kernel"; /* no init_name: drawn for its own name */
    psd_shard_t *sh[4] = {0};
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &plain, &sh[0], &err), 0);
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &j1, &sh[1], &err), 0);
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &j2, &sh[2], &err), 0);
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &bare, &sh[3], &err), 0);
    float v[4][18];
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(psd_shard_read(sh[i], 0, PSD_WHOLE_SHARD, v[i], sizeof v[i], &err), 0);
    CU_ASSERT_EQUAL(memcmp(v[0], v[1], sizeof v[0]), 0);
    CU_ASSERT_EQUAL(memcmp(v[0], v[2], sizeof v[0]), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(v[0], v[3], sizeof v[0]), 0);
    CU_ASSERT_PTR_NULL(psd_shard_spec(sh[1])->init_name); /* not kept: it was borrowed */
    psd_store_destroy(&store);
}

/* Dropping a job: its shards (and their slots, exactly-once tables and the
   job's optimizer) go, their bytes leave the stats, another job's shards
   and a name that only begins like it ("j1x/...") stay untouched. */
static void
test_drop_job(void)
{
    psd_store_t *store = psd_store_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(store);
    zdist_error_t err = {0};
    zdist_optim_config_t adam;
    zdist_optim_config_default(&adam, ZDIST_OPTIM_ADAM);
    CU_ASSERT_EQUAL(psd_store_set_optimizer_job(store, "j1", &adam, &err), 0);
    const char *names[] = {"j1/a", "j1/b", "j1x/a", "j2/a", "j2/b"};
    psd_shard_t *sh[5][2] = {{0}};
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 2; k++) {
            psd_shard_spec_t sp = s_spec(names[i], 8, 4, ZDIST_DTYPE_FLOAT32, k, 4 * k, 4);
            CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &sp, &sh[i][k], &err), 0);
        }
    /* An apply allocates j1's adam slots and records a client for exactly-once. */
    float g[16];
    for (int i = 0; i < 16; i++)
        g[i] = 0.5f;
    CU_ASSERT_EQUAL(s_write(sh[0][0], PSD_OP_APPLY_DENSE, 7, 1, ZDIST_DTYPE_FLOAT32, 0, PSD_WHOLE_SHARD, NULL, 0, g,
                            sizeof g, &err), 0);
    s_fill_pattern(sh[3][1]);
    psd_store_stats_t before, after;
    psd_store_stats(store, &before);
    CU_ASSERT_EQUAL(before.shards, 10);
    CU_ASSERT_EQUAL(before.slot_bytes, 2 * 64); /* adam: m and v of one 4x4 shard */

    uint64_t bytes = 0;
    CU_ASSERT_EQUAL(psd_store_drop_job(store, "j1", &bytes), 4);
    CU_ASSERT_EQUAL(bytes, 4 * 64 + 2 * 64); /* 4 shards of 4x4 floats, and the slots */
    psd_store_stats(store, &after);
    CU_ASSERT_EQUAL(after.shards, 6);
    CU_ASSERT_EQUAL(after.variables, 3);
    CU_ASSERT_EQUAL(after.value_bytes + after.slot_bytes + bytes, before.value_bytes + before.slot_bytes);
    CU_ASSERT_PTR_NULL(psd_store_find(store, "j1/a", 0));
    CU_ASSERT_PTR_NULL(psd_store_find(store, "j1/b", 1));
    CU_ASSERT_PTR_EQUAL(psd_store_find(store, "j1x/a", 1), sh[2][1]);
    CU_ASSERT_PTR_EQUAL(psd_store_find_row(store, "j2/a", 5), sh[3][1]);
    float v[16];
    CU_ASSERT_EQUAL(psd_shard_read(sh[3][1], 4, PSD_WHOLE_SHARD, v, sizeof v, &err), 0);
    CU_ASSERT_EQUAL(v[5], 10.0f * 5 + 1); /* row 5, column 1: untouched */
    /* The list stays ordered: binary searches still find every kept shard. */
    psd_shard_t *all[8];
    CU_ASSERT_EQUAL(psd_store_list(store, all, 8), 6);
    for (int i = 1; i < 6; i++)
        CU_ASSERT_TRUE(strcmp(psd_shard_spec(all[i - 1])->name, psd_shard_spec(all[i])->name) <= 0);

    /* Idempotent; an unknown job drops nothing; "" would be every shard. */
    CU_ASSERT_EQUAL(psd_store_drop_job(store, "j1", &bytes), 0);
    CU_ASSERT_EQUAL(bytes, 0);
    CU_ASSERT_EQUAL(psd_store_drop_job(store, "nope", NULL), 0);
    CU_ASSERT_EQUAL(psd_store_drop_job(store, "", NULL), -EINVAL);
    CU_ASSERT_EQUAL(psd_store_drop_job(store, NULL, NULL), -EINVAL);
    psd_store_stats(store, &after);
    CU_ASSERT_EQUAL(after.shards, 6);

    /* j1 again: its old optimizer is forgotten, the store's default (sgd) applies; a
       client's old sequence is not taken for a duplicate. */
    psd_shard_spec_t sp = s_spec("j1/a", 8, 4, ZDIST_DTYPE_FLOAT32, 0, 0, 4);
    psd_shard_t *fresh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &sp, &fresh, &err), 0);
    zdist_optim_config_t got;
    psd_shard_get_optimizer(fresh, &got);
    CU_ASSERT_EQUAL(got.kind, ZDIST_OPTIM_SGD);
    CU_ASSERT_EQUAL(s_write(fresh, PSD_OP_APPLY_DENSE, 7, 1, ZDIST_DTYPE_FLOAT32, 0, PSD_WHOLE_SHARD, NULL, 0, g,
                            sizeof g, &err), 0);
    CU_ASSERT_EQUAL(psd_store_drop_job(store, "j2", NULL), 4);
    CU_ASSERT_EQUAL(psd_store_drop_job(store, "j1x", NULL), 2);
    CU_ASSERT_EQUAL(psd_store_drop_job(store, "j1", NULL), 1);
    psd_store_stats(store, &after);
    CU_ASSERT_EQUAL(after.shards, 0);
    CU_ASSERT_EQUAL(after.value_bytes + after.slot_bytes, 0);
    psd_store_destroy(&store);
}

/* A pinned range (a pull answered zero-copy) keeps the values it had while
   writes, a replace and the store's end go on; unpinning frees it. */
static void
test_pin_copy_on_write(void)
{
    psd_store_t *store = psd_store_new();
    zdist_error_t err = {0};
    psd_shard_spec_t a = s_spec("w", 4, 3, ZDIST_DTYPE_FLOAT32, 0, 0, 4);
    psd_shard_t *sh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &a, &sh, &err), 0);
    s_fill_pattern(sh);
    void *data = NULL, *pin = NULL;
    size_t bytes = 0;
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 1, 2, &data, &bytes, &pin, &err), 0);
    CU_ASSERT_EQUAL(bytes, 6 * sizeof(float));
    const float *p = data;
    CU_ASSERT_EQUAL(p[0], 10.0f);
    CU_ASSERT_EQUAL(p[5], 22.0f);
    float ones[12];
    for (int i = 0; i < 12; i++)
        ones[i] = 1;
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 7, 1, ZDIST_DTYPE_FLOAT32, 0, PSD_WHOLE_SHARD, NULL, 0, ones,
                            sizeof ones, &err), 0);
    float now[12];
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, PSD_WHOLE_SHARD, now, sizeof now, &err), 0);
    CU_ASSERT_EQUAL(now[3], 11.0f);
    CU_ASSERT_EQUAL(p[0], 10.0f); /* the pinned copy did not move */
    CU_ASSERT_EQUAL(p[5], 22.0f);
    /* A second pin, then a replace and the store's end: both pins still read. */
    void *data2 = NULL, *pin2 = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &data2, &bytes, &pin2, &err), 0);
    CU_ASSERT_EQUAL(bytes, sizeof now);
    void *fresh = calloc(12, sizeof(float));
    psd_shard_replace(sh, &fresh, NULL, 0, ZDIST_OPTIM_SGD, 0, NULL);
    CU_ASSERT_PTR_NULL(fresh);
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, PSD_WHOLE_SHARD, now, sizeof now, &err), 0);
    CU_ASSERT_EQUAL(now[3], 0.0f);
    CU_ASSERT_EQUAL(((const float *) data2)[3], 11.0f);
    void *data3 = NULL, *pin3 = NULL;
    CU_ASSERT_EQUAL(psd_shard_pin(sh, 3, 2, &data3, &bytes, &pin3, &err), -EINVAL); /* outside [0, 4) */
    CU_ASSERT_PTR_NULL(pin3);
    psd_store_destroy(&store);
    CU_ASSERT_EQUAL(p[0], 10.0f);
    CU_ASSERT_EQUAL(((const float *) data2)[11], 33.0f); /* 10 * 3 + 2, plus the 1 */
    psd_shard_unpin(data2, pin2);
    psd_shard_unpin((void *) p, pin); /* the last reference: freed (ASan checks) */
}

/* A table of two shards here (one over 2 MiB, on a huge-page boundary, one
   under): gathers by id that hop between them and a sparse momentum apply
   with repeated ids, over a thousand ids each, give exactly what row-by-row
   arithmetic gives. */
static void
test_big_table(void)
{
    enum { WIDTH = 64, NIDS = 1000 };
    psd_store_t *store = psd_store_new();
    zdist_error_t err = {0};
    zdist_optim_config_t mom = {.kind = ZDIST_OPTIM_MOMENTUM, .learning_rate = 0.5, .momentum = 0.5};
    CU_ASSERT_EQUAL_FATAL(psd_store_set_optimizer(store, &mom, &err), 0);
    psd_shard_spec_t a = s_spec("big", 16000, WIDTH, ZDIST_DTYPE_FLOAT32, 0, 0, 9000); /* 2.2 MiB */
    psd_shard_spec_t b = s_spec("big", 16000, WIDTH, ZDIST_DTYPE_FLOAT32, 2, 12000, 4000); /* rows 9000..12000 elsewhere */
    psd_shard_t *sa = NULL, *sb = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &a, &sa, &err), 0);
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &b, &sb, &err), 0);
    CU_ASSERT_PTR_EQUAL(psd_store_first(store, "big"), sa);
    CU_ASSERT_PTR_NULL(psd_store_first(store, "bi"));
    psd_shard_t *parts[] = {sa, sb};
    for (int k = 0; k < 2; k++) {
        const psd_shard_spec_t *sp = psd_shard_spec(parts[k]);
        float *v = malloc((size_t) sp->rows * WIDTH * sizeof *v);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        for (int64_t r = 0; r < sp->rows; r++)
            for (int c = 0; c < WIDTH; c++)
                v[r * WIDTH + c] = (float) (100 * (sp->row_offset + r) + c);
        CU_ASSERT_EQUAL(s_write(parts[k], PSD_OP_ASSIGN, 0, 0, ZDIST_DTYPE_FLOAT32, 0, PSD_WHOLE_SHARD, NULL, 0, v,
                                (size_t) sp->rows * WIDTH * sizeof *v, &err), 0);
        free(v);
    }
    void *data = NULL, *pin = NULL;
    size_t bytes = 0;
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sa, 0, PSD_WHOLE_SHARD, &data, &bytes, &pin, &err), 0);
    CU_ASSERT_EQUAL((uintptr_t) data % ((uintptr_t) 2 << 20), 0); /* a huge-page boundary */
    psd_shard_unpin(data, pin);

    int64_t *ids = malloc(NIDS * sizeof *ids);
    float *buf = malloc((size_t) NIDS * WIDTH * sizeof *buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    uint64_t x = 7;
    for (int i = 0; i < NIDS; i++) { /* runs in either shard, with repeats */
        x = x * 6364136223846793005u + 1442695040888963407u;
        int64_t r = (int64_t) ((x >> 33) % 13000);
        ids[i] = r < 9000 ? r : r - 9000 + 12000;
    }
    ids[NIDS - 1] = ids[0];
    CU_ASSERT_EQUAL_FATAL(psd_store_read_ids(store, "big", ids, NIDS, buf, (size_t) NIDS * WIDTH * sizeof *buf,
                                             &err), 0);
    int wrong = 0;
    for (int i = 0; i < NIDS; i++)
        for (int c = 0; c < WIDTH; c++)
            wrong += buf[i * WIDTH + c] != (float) (100 * ids[i] + c);
    CU_ASSERT_EQUAL(wrong, 0);

    /* Sparse momentum on the big shard: ids below 9000 only, repeats summed. */
    int n = 0;
    for (int i = 0; i < NIDS; i++)
        if (ids[i] < 9000)
            ids[n++] = ids[i];
    for (int i = 0; i < n; i++)
        for (int c = 0; c < WIDTH; c++)
            buf[i * WIDTH + c] = 0.25f * (float) (i % 7 + 1);
    CU_ASSERT_EQUAL(s_write(sa, PSD_OP_APPLY_SPARSE, 3, 1, ZDIST_DTYPE_FLOAT32, 0, 0, ids, (size_t) n, buf,
                            (size_t) n * WIDTH * sizeof *buf, &err), 0);
    float row[WIDTH], slot[WIDTH];
    wrong = 0;
    for (int i = 0; i < n; i++) {
        float sum = 0;
        for (int k = 0; k < n; k++)
            if (ids[k] == ids[i])
                sum += 0.25f * (float) (k % 7 + 1);
        CU_ASSERT_EQUAL(psd_shard_read(sa, ids[i], 1, row, sizeof row, &err), 0);
        CU_ASSERT_EQUAL(psd_shard_read_slot(sa, 0, ids[i], 1, slot, sizeof slot, &err), 0);
        for (int c = 0; c < WIDTH; c++) /* v = -lr g; w += v */
            wrong += row[c] != (float) (100 * ids[i] + c) - 0.5f * sum || slot[c] != -0.5f * sum;
    }
    CU_ASSERT_EQUAL(wrong, 0);
    free(ids);
    free(buf);
    psd_store_destroy(&store);
}

/* A reply answered from a shard's buffer is still being sent when its job
   is dropped: the values stay until libzmq's I/O thread unpins them. */
static void
test_pin_drop(void)
{
    psd_store_t *store = psd_store_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(store);
    zdist_error_t err = {0};
    psd_shard_spec_t sp = s_spec("j1/w", 8, 4, ZDIST_DTYPE_FLOAT32, 0, 0, 8);
    psd_shard_t *sh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &sp, &sh, &err), 0);
    s_fill_pattern(sh);
    void *data = NULL, *pin = NULL;
    size_t bytes = 0;
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 2, 3, &data, &bytes, &pin, &err), 0);
    CU_ASSERT_EQUAL(psd_store_drop_job(store, "j1", NULL), 1);
    CU_ASSERT_EQUAL(bytes, 3 * 4 * sizeof(float));
    const float *v = data;
    CU_ASSERT_EQUAL(v[0], 20.0f); /* row 2, column 0 (ASan: not freed) */
    CU_ASSERT_EQUAL(v[11], 10.0f * 4 + 3);
    psd_shard_unpin(data, pin); /* the last reference: freed here */
    psd_store_destroy(&store);
}

/* ---- writes while a reply holds the values ---- */

enum { S_OOP_ROWS = 9, S_OOP_WIDTH = 7, S_OOP_N = S_OOP_ROWS * S_OOP_WIDTH };

/* A store with one [9, 7] shard under optimizer cfg, values set to a
   pattern that differs per element. */
static psd_store_t *
s_oop_store(const zdist_optim_config_t *cfg, zdist_dtype_t dtype, psd_shard_t **ret_shard)
{
    psd_store_t *store = psd_store_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(store);
    if (cfg)
        CU_ASSERT_EQUAL(psd_store_set_optimizer(store, cfg, NULL), 0);
    psd_shard_spec_t sp = s_spec("w", S_OOP_ROWS, S_OOP_WIDTH, dtype, 0, 0, S_OOP_ROWS);
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &sp, ret_shard, NULL), 0);
    size_t es = zdist_dtype_size(dtype);
    char v[S_OOP_N * sizeof(double)];
    for (int i = 0; i < S_OOP_N; i++) {
        double x = 0.25 + 0.013 * i - (i % 5) * 0.07;
        if (dtype == ZDIST_DTYPE_FLOAT64)
            ((double *) v)[i] = x;
        else if (dtype == ZDIST_DTYPE_FLOAT32)
            ((float *) v)[i] = (float) x;
        else
            ((int32_t *) v)[i] = 3 * i - 50;
    }
    CU_ASSERT_EQUAL(s_write(*ret_shard, PSD_OP_ASSIGN, 0, 0, dtype, 0, PSD_WHOLE_SHARD, NULL, 0, v,
                            S_OOP_N * es, NULL), 0);
    return store;
}

/* A gradient (or operand) of n elements for round t. */
static void
s_oop_grad(zdist_dtype_t dtype, int t, size_t n, void *g)
{
    for (size_t i = 0; i < n; i++) {
        double x = ((int) (i * 3 + (size_t) t) % 11) * 0.09 - 0.4;
        if (dtype == ZDIST_DTYPE_FLOAT64)
            ((double *) g)[i] = x;
        else if (dtype == ZDIST_DTYPE_FLOAT32)
            ((float *) g)[i] = (float) x;
        else
            ((int32_t *) g)[i] = (int32_t) (i * 7 % 13) - 6 + t;
    }
}

/* The shard's values and every slot of a and b are bitwise equal. */
static void
s_oop_assert_same(psd_shard_t *a, psd_shard_t *b, const zdist_optim_config_t *cfg)
{
    size_t bytes = psd_shard_value_bytes(a);
    char va[S_OOP_N * sizeof(double)], vb[S_OOP_N * sizeof(double)];
    CU_ASSERT_EQUAL(psd_shard_read(a, 0, PSD_WHOLE_SHARD, va, sizeof va, NULL), 0);
    CU_ASSERT_EQUAL(psd_shard_read(b, 0, PSD_WHOLE_SHARD, vb, sizeof vb, NULL), 0);
    CU_ASSERT_EQUAL(memcmp(va, vb, bytes), 0);
    for (int i = 0; cfg && i < zdist_optim_num_slots(cfg->kind); i++) {
        CU_ASSERT_EQUAL(psd_shard_read_slot(a, i, 0, PSD_WHOLE_SHARD, va, sizeof va, NULL), 0);
        CU_ASSERT_EQUAL(psd_shard_read_slot(b, i, 0, PSD_WHOLE_SHARD, vb, sizeof vb, NULL), 0);
        CU_ASSERT_EQUAL(memcmp(va, vb, bytes), 0);
    }
    CU_ASSERT_EQUAL(psd_shard_step(a), psd_shard_step(b));
}

/* Runs 3 rounds of write `op` (kind 0: the whole shard, 1: rows [2, 6),
   2: ids by row) on two equal shards, the first pinned whole during each
   write: the pinned buffer keeps the values from before the write, and the
   shards stay bitwise equal (values, slots, step). */
static void
s_oop_run(const zdist_optim_config_t *cfg, zdist_dtype_t dtype, psd_op_t op, int kind)
{
    psd_shard_t *pinned = NULL, *plain = NULL;
    psd_store_t *sa = s_oop_store(cfg, dtype, &pinned), *sb = s_oop_store(cfg, dtype, &plain);
    size_t es = zdist_dtype_size(dtype), row = S_OOP_WIDTH * es;
    static const int64_t ids[] = {1, 4, 8, 4, 0};
    int64_t start = kind == 1 ? 2 : 0, nrows = kind == 0 ? PSD_WHOLE_SHARD : 4;
    size_t nids = kind == 2 ? 5 : 0;
    size_t n = kind == 0 ? S_OOP_N : kind == 1 ? 4 * S_OOP_WIDTH : nids * S_OOP_WIDTH;
    for (int t = 1; t <= 3; t++) {
        char g[S_OOP_N * sizeof(double)], before[S_OOP_N * sizeof(double)];
        s_oop_grad(dtype, t, n, g);
        void *data = NULL, *pin = NULL;
        size_t bytes = 0;
        CU_ASSERT_EQUAL_FATAL(psd_shard_pin(pinned, 0, PSD_WHOLE_SHARD, &data, &bytes, &pin, NULL), 0);
        CU_ASSERT_EQUAL(bytes, S_OOP_N * es);
        memcpy(before, data, bytes);
        CU_ASSERT_EQUAL(s_write(pinned, op, 0, 0, dtype, start, nrows, kind == 2 ? ids : NULL, nids, g,
                                n * es, NULL), 0);
        CU_ASSERT_EQUAL(s_write(plain, op, 0, 0, dtype, start, nrows, kind == 2 ? ids : NULL, nids, g,
                                n * es, NULL), 0);
        CU_ASSERT_EQUAL(memcmp(data, before, bytes), 0); /* the reply's values did not move */
        s_oop_assert_same(pinned, plain, cfg);
        /* and the write did change something the reply does not see */
        char now[S_OOP_N * sizeof(double)];
        CU_ASSERT_EQUAL(psd_shard_read(pinned, 0, PSD_WHOLE_SHARD, now, sizeof now, NULL), 0);
        CU_ASSERT_NOT_EQUAL(memcmp(now + (size_t) start * row, before + (size_t) start * row, row), 0);
        psd_shard_unpin(data, pin);
    }
    psd_store_destroy(&sa);
    psd_store_destroy(&sb);
}

/* Pushes while a reply holds the values: sgd, momentum, nesterov, adagrad
   and adam, float32 and float64, on the whole shard (computed out of place
   in one pass), a row range and ids (copied first): bitwise what the same
   pushes give unpinned, in place. */
static void
test_pin_apply_out_of_place(void)
{
    static const zdist_optim_kind_t kinds[] = {ZDIST_OPTIM_SGD, ZDIST_OPTIM_MOMENTUM, ZDIST_OPTIM_MOMENTUM,
                                               ZDIST_OPTIM_ADAGRAD, ZDIST_OPTIM_ADAM};
    for (int k = 0; k < 5; k++)
        for (int d = 0; d < 2; d++) {
            zdist_optim_config_t cfg;
            zdist_optim_config_default(&cfg, kinds[k]);
            cfg.nesterov = k == 2;
            zdist_dtype_t dtype = d ? ZDIST_DTYPE_FLOAT64 : ZDIST_DTYPE_FLOAT32;
            s_oop_run(&cfg, dtype, PSD_OP_APPLY_DENSE, 0);
            s_oop_run(&cfg, dtype, PSD_OP_APPLY_DENSE, 1);
            s_oop_run(&cfg, dtype, PSD_OP_APPLY_SPARSE, 2);
        }
}

/* assign, assign_add, assign_sub and the scatters while a reply holds the
   values: the same as unpinned, for floats and a wrapping integer type. */
static void
test_pin_assign_out_of_place(void)
{
    static const zdist_dtype_t dtypes[] = {ZDIST_DTYPE_FLOAT32, ZDIST_DTYPE_FLOAT64, ZDIST_DTYPE_INT32};
    for (int d = 0; d < 3; d++) {
        for (psd_op_t op = PSD_OP_ASSIGN; op <= PSD_OP_ASSIGN_SUB; op++) {
            s_oop_run(NULL, dtypes[d], op, 0);
            s_oop_run(NULL, dtypes[d], op, 1);
        }
        s_oop_run(NULL, dtypes[d], PSD_OP_SCATTER_ADD, 2);
        s_oop_run(NULL, dtypes[d], PSD_OP_SCATTER_UPDATE, 2);
    }
}

/* The buffer the last reply releases becomes the shard's spare, and the
   next write that must leave a pinned buffer alone takes it instead of
   new memory: whole-shard writes and row-range writes alike. */
static void
test_pin_spare_reused(void)
{
    psd_shard_t *sh = NULL;
    psd_store_t *store = s_oop_store(NULL, ZDIST_DTYPE_FLOAT32, &sh);
    float ones[S_OOP_N];
    for (int i = 0; i < S_OOP_N; i++)
        ones[i] = 1;
    void *p0 = NULL, *pin0 = NULL, *p1 = NULL, *pin1 = NULL, *p2 = NULL, *pin2 = NULL, *p3 = NULL, *pin3 = NULL;
    size_t bytes = 0;
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &p0, &bytes, &pin0, NULL), 0);
    void *p0b = NULL, *pin0b = NULL; /* a second reply of the same buffer */
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &p0b, &bytes, &pin0b, NULL), 0);
    CU_ASSERT_PTR_EQUAL(p0, p0b);
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 0, PSD_WHOLE_SHARD, NULL, 0, ones,
                            sizeof ones, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &p1, &bytes, &pin1, NULL), 0);
    CU_ASSERT_PTR_NOT_EQUAL(p1, p0); /* the write went elsewhere: no spare yet */
    psd_shard_unpin(p0, pin0);
    CU_ASSERT_EQUAL(((float *) p0b)[0], 0.25f); /* still held by the second reply */
    psd_store_stats_t st;
    psd_store_stats(store, &st);
    CU_ASSERT_EQUAL(st.spare_bytes, 0);
    psd_shard_unpin(p0b, pin0b); /* the last: p0 becomes the spare */
    psd_store_stats(store, &st);
    CU_ASSERT_EQUAL(st.spare_bytes, psd_shard_value_bytes(sh)); /* counted in the stats */
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 0, PSD_WHOLE_SHARD, NULL, 0, ones,
                            sizeof ones, NULL), 0);
    psd_store_stats(store, &st);
    CU_ASSERT_EQUAL(st.spare_bytes, 0); /* taken */
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &p2, &bytes, &pin2, NULL), 0);
    CU_ASSERT_PTR_EQUAL(p2, p0); /* the spare, reused */
    CU_ASSERT_EQUAL(((float *) p2)[0], 2.25f);
    CU_ASSERT_EQUAL(((float *) p1)[0], 1.25f);
    psd_shard_unpin(p1, pin1); /* p1 the spare */
    /* a row-range write copies into the spare */
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 3, 2, NULL, 0, ones,
                            2 * S_OOP_WIDTH * sizeof(float), NULL), 0);
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &p3, &bytes, &pin3, NULL), 0);
    CU_ASSERT_PTR_EQUAL(p3, p1);
    CU_ASSERT_EQUAL(((float *) p3)[0], 2.25f);                    /* row 0: copied */
    CU_ASSERT_EQUAL(((float *) p3)[3 * S_OOP_WIDTH], ((float *) p2)[3 * S_OOP_WIDTH] + 1); /* row 3: added */
    psd_shard_unpin(p2, pin2);
    psd_shard_unpin(p3, pin3);
    /* unpinned: in place, the spare stays unused */
    void *p4 = NULL, *pin4 = NULL;
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 0, PSD_WHOLE_SHARD, NULL, 0, ones,
                            sizeof ones, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &p4, &bytes, &pin4, NULL), 0);
    CU_ASSERT_PTR_EQUAL(p4, p1);
    CU_ASSERT_EQUAL(((float *) p4)[0], 3.25f);
    psd_shard_unpin(p4, pin4);
    psd_store_destroy(&store); /* frees the spare too (ASan: no leak) */
}

/* A shard over 64 MiB keeps no spare: the buffer its last reply releases is
   freed, not held beside the values for good. */
static void
test_pin_no_spare_when_big(void)
{
    psd_store_t *store = psd_store_new();
    zdist_error_t err = {0};
    psd_shard_spec_t a = s_spec("huge", 16640, 1024, ZDIST_DTYPE_FLOAT32, 0, 0, 16640); /* 65 MiB */
    psd_shard_t *sh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &a, &sh, &err), 0);
    size_t n = psd_shard_value_bytes(sh) / sizeof(float);
    float *ones = malloc(n * sizeof *ones);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ones);
    for (size_t i = 0; i < n; i++)
        ones[i] = 1;
    void *p = NULL, *pin = NULL;
    size_t bytes = 0;
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &p, &bytes, &pin, &err), 0);
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 0, PSD_WHOLE_SHARD, NULL, 0, ones,
                            n * sizeof *ones, &err), 0);
    CU_ASSERT_EQUAL(((float *) p)[n - 1], 0.0f); /* the reply's values did not move */
    psd_shard_unpin(p, pin);
    psd_store_stats_t st;
    psd_store_stats(store, &st);
    CU_ASSERT_EQUAL(st.spare_bytes, 0);
    CU_ASSERT_EQUAL(psd_shard_read(sh, 16639, 1, ones, 1024 * sizeof(float), &err), 0);
    CU_ASSERT_EQUAL(ones[1023], 1.0f);
    free(ones);
    psd_store_destroy(&store);
}

/* A replace, a drop and the store's end while replies hold buffers and a
   spare is kept: each reply still reads its values, and the last unpin
   after the shard is gone frees the buffer (ASan: no leak, no use after
   free). */
static void
test_pin_spare_shard_gone(void)
{
    psd_store_t *store = psd_store_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(store);
    psd_shard_spec_t sp = s_spec("j1/w", 8, 4, ZDIST_DTYPE_FLOAT32, 0, 0, 8);
    psd_shard_t *sh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &sp, &sh, NULL), 0);
    s_fill_pattern(sh);
    float ones[32];
    for (int i = 0; i < 32; i++)
        ones[i] = 1;
    void *pa = NULL, *pina = NULL, *pb = NULL, *pinb = NULL, *pc = NULL, *pinc = NULL;
    size_t bytes = 0;
    /* a replace while pinned; the unpin then leaves the old buffer as the spare */
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &pa, &bytes, &pina, NULL), 0);
    void *fresh = calloc(32, sizeof(float));
    psd_shard_replace(sh, &fresh, NULL, 0, ZDIST_OPTIM_SGD, 0, NULL);
    CU_ASSERT_EQUAL(((float *) pa)[4], 10.0f);
    psd_shard_unpin(pa, pina);
    /* pinned, a write takes that spare */
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &pb, &bytes, &pinb, NULL), 0);
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 0, PSD_WHOLE_SHARD, NULL, 0, ones,
                            sizeof ones, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &pc, &bytes, &pinc, NULL), 0);
    CU_ASSERT_PTR_EQUAL(pc, pa);
    CU_ASSERT_EQUAL(((float *) pc)[4], 1.0f);
    CU_ASSERT_EQUAL(((float *) pb)[4], 0.0f);
    /* the job dropped with two buffers pinned: both still read, and the
       unpins free them (one becomes the dead shard's spare first) */
    CU_ASSERT_EQUAL(psd_store_drop_job(store, "j1", NULL), 1);
    CU_ASSERT_EQUAL(((float *) pb)[31], 0.0f);
    CU_ASSERT_EQUAL(((float *) pc)[31], 1.0f);
    psd_shard_unpin(pb, pinb);
    psd_shard_unpin(pc, pinc);
    /* the store's end with a spare kept and a buffer pinned */
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &sp, &sh, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &pa, &bytes, &pina, NULL), 0);
    CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 0, PSD_WHOLE_SHARD, NULL, 0, ones,
                            sizeof ones, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(psd_shard_pin(sh, 0, PSD_WHOLE_SHARD, &pb, &bytes, &pinb, NULL), 0);
    psd_shard_unpin(pa, pina); /* the spare */
    psd_store_destroy(&store);
    CU_ASSERT_EQUAL(((float *) pb)[0], 1.0f);
    psd_shard_unpin(pb, pinb); /* the last reference to the shard's pool: frees it */
}

/* Replies released on other threads while writes go on: every reply reads
   the values of one write, whole, and the writes add up (ASan: no use
   after free of a buffer passed through the spare). */
typedef struct {
    psd_shard_t *sh;
    atomic_int stop;
    int bad;
} s_pinner_t;

static void *
s_pinner(void *arg)
{
    s_pinner_t *p = arg;
    while (!atomic_load(&p->stop)) {
        void *data = NULL, *pin = NULL;
        size_t bytes = 0;
        if (psd_shard_pin(p->sh, 0, PSD_WHOLE_SHARD, &data, &bytes, &pin, NULL) < 0) {
            p->bad++;
            break;
        }
        const float *v = data;
        for (size_t i = 1; i < bytes / sizeof *v; i++)
            if (v[i] != v[0])
                p->bad++;
        sched_yield();
        for (size_t i = 1; i < bytes / sizeof *v; i++)
            if (v[i] != v[0])
                p->bad++;
        psd_shard_unpin(data, pin);
    }
    return NULL;
}

static void
test_pin_spare_threads(void)
{
    psd_store_t *store = psd_store_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(store);
    psd_shard_spec_t sp = s_spec("w", 64, 64, ZDIST_DTYPE_FLOAT32, 0, 0, 64);
    psd_shard_t *sh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &sp, &sh, NULL), 0);
    float *ones = malloc(64 * 64 * sizeof *ones);
    for (int i = 0; i < 64 * 64; i++)
        ones[i] = 1;
    s_pinner_t p[2] = {{.sh = sh}, {.sh = sh}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, s_pinner, &p[i]), 0);
    for (int k = 0; k < 2000; k++)
        CU_ASSERT_EQUAL(s_write(sh, PSD_OP_ASSIGN_ADD, 0, 0, ZDIST_DTYPE_FLOAT32, 0, PSD_WHOLE_SHARD, NULL, 0,
                                ones, 64 * 64 * sizeof *ones, NULL), 0);
    for (int i = 0; i < 2; i++) {
        atomic_store(&p[i].stop, 1);
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(p[i].bad, 0);
    }
    float v[64 * 64];
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, PSD_WHOLE_SHARD, v, sizeof v, NULL), 0);
    CU_ASSERT_EQUAL(v[0], 2000.0f);
    CU_ASSERT_EQUAL(v[64 * 64 - 1], 2000.0f);
    free(ones);
    psd_store_destroy(&store);
}

/* A dynamic table's part: lookups count nothing, a push counts its ids'
   occurrences, admits at min_count and applies, once per (step, ordinal). */
static void
test_dynamic_part(void)
{
    psd_store_t *store = psd_store_new();
    zdist_optim_config_t sgd;
    zdist_optim_config_default(&sgd, ZDIST_OPTIM_SGD);
    sgd.learning_rate = 0.5;
    CU_ASSERT_EQUAL_FATAL(psd_store_set_optimizer(store, &sgd, NULL), 0);
    psd_dyntable_budget_t budget = {0};
    psd_shard_spec_t spec = s_spec("j/t", 0, 4, ZDIST_DTYPE_FLOAT32, 0, 0, 0);
    spec.init = (zdist_initializer_t){.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -1, .maxval = 1};
    spec.dynamic = (zdist_ps_dynamic_t){.enabled = true, .min_count = 2, .num_ps = 1};
    spec.budget = &budget;
    psd_shard_t *sh = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &spec, &sh, &err), 0);
    CU_ASSERT_EQUAL(psd_store_create(store, &spec, NULL, &err), 0); /* the same part again */
    CU_ASSERT(psd_shard_is_dynamic(sh));

    const int64_t ids[3] = {INT64_MIN, INT64_MIN, INT64_MAX};
    float out[3 * 4], before[4], grads[3 * 4];
    for (int i = 0; i < 12; i++)
        grads[i] = 1.0f;
    CU_ASSERT_EQUAL(psd_shard_lookup(sh, ids, 3, out, sizeof out, &err), 0);
    for (int i = 0; i < 12; i++)
        CU_ASSERT_EQUAL(out[i], 0.0f); /* not admitted: the default, and nothing counted */
    psd_dyntable_stats_t st;
    psd_shard_dyn_stats(sh, &st);
    CU_ASSERT_EQUAL(st.pending + st.rows, 0);

    psd_write_t w = {.op = PSD_OP_APPLY_SPARSE, .job_step = 7, .dtype = ZDIST_DTYPE_FLOAT32, .ids = ids, .nids = 3,
                     .data = grads, .nbytes = sizeof grads};
    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, &err), 0);
    psd_shard_dyn_stats(sh, &st);
    CU_ASSERT_EQUAL(st.rows, 1); /* INT64_MIN twice: admitted at min_count 2 */
    CU_ASSERT_EQUAL(st.pending, 1);
    CU_ASSERT_EQUAL(st.admitted, 1);
    CU_ASSERT_EQUAL(st.dropped_grads, 1); /* INT64_MAX's */
    CU_ASSERT_EQUAL(psd_shard_lookup(sh, ids, 1, before, sizeof before, &err), 0);
    CU_ASSERT(before[0] != 0.0f || before[1] != 0.0f);

    /* The step again (a re-run elsewhere): acknowledged, nothing counted, created or applied. */
    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, &err), PSD_DUPLICATE);
    psd_shard_dyn_stats(sh, &st);
    CU_ASSERT(st.rows == 1 && st.pending == 1 && st.admitted == 1 && st.dropped_grads == 1);
    CU_ASSERT_EQUAL(psd_shard_lookup(sh, ids, 1, out, sizeof out, &err), 0);
    CU_ASSERT_EQUAL(memcmp(out, before, sizeof before), 0);
    CU_ASSERT_EQUAL(psd_shard_step(sh), 1);

    /* The next step: INT64_MAX reaches min_count; INT64_MIN's row moves by lr x 2. */
    w.job_step = 8;
    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, &err), 0);
    psd_shard_dyn_stats(sh, &st);
    CU_ASSERT(st.rows == 2 && st.pending == 0 && st.admitted == 2);
    CU_ASSERT_EQUAL(psd_shard_lookup(sh, ids, 1, out, sizeof out, &err), 0);
    CU_ASSERT(fabsf(out[0] - (before[0] - 1.0f)) < 1e-6f);

    /* Dense writes are refused; so are ids another ps task holds. */
    w.op = PSD_OP_ASSIGN;
    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "sparse pushes"));
    psd_shard_spec_t two = spec;
    two.name = "j/u";
    two.dynamic.num_ps = 2;
    psd_shard_t *half = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &two, &half, &err), 0);
    int64_t other = 0;
    while (zdist_partition_id_ps(other, 2) != 1)
        other++;
    CU_ASSERT_EQUAL(psd_shard_lookup(half, &other, 1, out, sizeof out, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "lives on ps task 1"));

    /* Past the budget: new ids refused and counted, existing rows kept. */
    budget.max_bytes = budget.used;
    int64_t fresh[64];
    float g64[64 * 4] = {0};
    for (int i = 0; i < 64; i++)
        fresh[i] = (i % 2 ? -1 : 1) * (INT64_C(1) << 40) * (i + 1);
    for (uint64_t step = 9; step < 12; step++) {
        psd_write_t f = {.op = PSD_OP_APPLY_SPARSE, .job_step = step, .dtype = ZDIST_DTYPE_FLOAT32, .ids = fresh,
                         .nids = 64, .data = g64, .nbytes = sizeof g64};
        CU_ASSERT_EQUAL(psd_shard_write(sh, &f, &err), 0);
    }
    psd_shard_dyn_stats(sh, &st);
    CU_ASSERT(st.refused > 0);
    CU_ASSERT(st.rows >= 2);
    CU_ASSERT(psd_shard_dyn_refusal_news(sh));
    CU_ASSERT(!psd_shard_dyn_refusal_news(sh)); /* told once */
    uint64_t held = budget.used;
    CU_ASSERT_EQUAL(psd_store_drop_job(store, "j", NULL), 2);
    CU_ASSERT(budget.used < held);
    CU_ASSERT_EQUAL(budget.used, 0);
    psd_store_destroy(&store);
}

/* A dynamic part evicts, at a checkpoint's step, the rows not updated for
   more than evict_after_steps steps. */
static void
test_dynamic_evict(void)
{
    psd_store_t *store = psd_store_new();
    psd_shard_spec_t spec = s_spec("j/e", 0, 2, ZDIST_DTYPE_FLOAT32, 0, 0, 0);
    spec.dynamic = (zdist_ps_dynamic_t){.enabled = true, .min_count = 1, .evict_after_steps = 5, .num_ps = 1};
    psd_shard_t *sh = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &spec, &sh, &err), 0);
    const int64_t ids[2] = {-5, 5};
    float g[4] = {0};
    psd_write_t w = {.op = PSD_OP_APPLY_SPARSE, .job_step = 1, .dtype = ZDIST_DTYPE_FLOAT32, .ids = ids, .nids = 2,
                     .data = g, .nbytes = sizeof g};
    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, &err), 0);
    w = (psd_write_t){.op = PSD_OP_APPLY_SPARSE, .job_step = 10, .dtype = ZDIST_DTYPE_FLOAT32, .ids = ids + 1,
                      .nids = 1, .data = g, .nbytes = 2 * sizeof *g};
    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, &err), 0);
    CU_ASSERT_EQUAL(psd_shard_dyn_evict(sh, 6), 0); /* 6 - 1 = 5: not more than 5 */
    CU_ASSERT_EQUAL(psd_shard_dyn_evict(sh, 10), 1); /* -5, last updated at step 1 */
    psd_dyntable_stats_t st;
    psd_shard_dyn_stats(sh, &st);
    CU_ASSERT(st.rows == 1 && st.evicted == 1);
    psd_store_destroy(&store);
}

void
zdist_test_psd_shard_register(void)
{
    ZDIST_SUITE("psd_shard",
                {"create is idempotent, conflicts are ALREADY_EXISTS", test_create_idempotent},
                {"reads by range and ids", test_reads},
                {"a big table: gathers across shards and a sparse apply, row by row", test_big_table},
                {"writes, and refusals change nothing", test_writes},
                {"exactly-once writes", test_exactly_once},
                {"exactly-once by the job's step: a re-run closure is applied once", test_exactly_once_by_step},
                {"the ledger of steps: gaps, window, intersection", test_ledger},
                {"8 threads x 10000 assign_add, readers see whole rows", test_concurrent_assign_add},
                {"initializers identical under 1, 3, 5 shards", test_init_sharding_determinism},
                {"initializer distributions and glorot limits", test_init_distributions},
                {"values drawn for init_name: a job's prefix changes nothing", test_init_name},
                {"drop_job removes one job's shards, slots and optimizer, idempotent", test_drop_job},
                {"a pinned range keeps its values through writes, replace and the store's end",
                 test_pin_copy_on_write},
                {"a pinned range keeps its values through its job's drop", test_pin_drop},
                {"applies while pinned: bitwise the unpinned apply, every optimizer", test_pin_apply_out_of_place},
                {"assigns and scatters while pinned: the same as unpinned", test_pin_assign_out_of_place},
                {"the buffer the last reply releases is the next write's", test_pin_spare_reused},
                {"a shard over 64 MiB keeps no spare", test_pin_no_spare_when_big},
                {"replace, drop and the store's end with a spare and pins", test_pin_spare_shard_gone},
                {"replies released on other threads while writes go on", test_pin_spare_threads},
                {"a dynamic table's part: counted at the push, once per step; refusals past the budget",
                 test_dynamic_part},
                {"a dynamic table's part evicts at a checkpoint's step", test_dynamic_evict});
}
