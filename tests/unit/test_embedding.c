/* CUnit suite: embedding_lookup_sparse / safe_embedding_lookup_sparse (TF's docstring examples), over a local
 * table and over a table sharded on two real psd servers (psd_server_actor in this process). */
#include <czmq.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "testutil.h"
#include "zdist/embedding.h"
#include "zdist/ps_client.h"

enum { S_VOCAB = 10, S_DIM = 20 };

/* params[r][j] = r + j / 100: every row different, every value exact enough. */
static void
s_params(float *p, int64_t vocab, int64_t dim)
{
    for (int64_t r = 0; r < vocab; r++)
        for (int64_t j = 0; j < dim; j++)
            p[r * dim + j] = (float) r + (float) j / 100.0f;
}

/* TF's docstring: a 10x20 params and
     [0, 0]: id 1, weight 2.0
     [0, 1]: id 3, weight 0.5
     [1, 0]: id 0, weight 1.0
     [2, 3]: id 1, weight 3.0 */
static const int64_t s_doc_offsets[] = {0, 2, 3, 4};
static const int64_t s_doc_ids[] = {1, 3, 0, 1};
static const float s_doc_weights[] = {2.0f, 0.5f, 1.0f, 3.0f};

static void
s_expect_row(const float *got, const float *want, int64_t dim)
{
    for (int64_t j = 0; j < dim; j++)
        CU_ASSERT_DOUBLE_EQUAL(got[j], want[j], 1e-5);
}

static void
test_docstring_combiners(void)
{
    float p[S_VOCAB * S_DIM], out[3 * S_DIM], want[S_DIM];
    s_params(p, S_VOCAB, S_DIM);
    zdist_sparse_ids_t sp = {
        .n = 3, .row_offsets = s_doc_offsets, .ids = s_doc_ids, .weights = s_doc_weights};
    zdist_error_t err = {0};
    const float *p0 = p, *p1 = p + S_DIM, *p3 = p + 3 * S_DIM;

    /* mean: output[0] = (params[1] * 2.0 + params[3] * 0.5) / (2.0 + 0.5),
       output[1] = params[0] * 1.0 / 1.0, output[2] = params[1] * 3.0 / 3.0 */
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &sp, ZDIST_COMBINER_MEAN, out, &err), 0);
    for (int j = 0; j < S_DIM; j++)
        want[j] = (p1[j] * 2.0f + p3[j] * 0.5f) / 2.5f;
    s_expect_row(out, want, S_DIM);
    s_expect_row(out + S_DIM, p0, S_DIM);
    s_expect_row(out + 2 * S_DIM, p1, S_DIM);
    CU_ASSERT_DOUBLE_EQUAL(out[0], (2.0 + 1.5) / 2.5, 1e-6); /* row 1 at j=0 is 1, row 3 is 3 */

    /* sum: the weighted rows added */
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &sp, ZDIST_COMBINER_SUM, out, &err), 0);
    for (int j = 0; j < S_DIM; j++)
        want[j] = p1[j] * 2.0f + p3[j] * 0.5f;
    s_expect_row(out, want, S_DIM);
    CU_ASSERT_DOUBLE_EQUAL(out[2 * S_DIM], 3.0, 1e-6);

    /* sqrtn: divided by sqrt(sum of the squared weights) */
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &sp, ZDIST_COMBINER_SQRTN, out, &err), 0);
    for (int j = 0; j < S_DIM; j++)
        want[j] = (p1[j] * 2.0f + p3[j] * 0.5f) / sqrtf(4.0f + 0.25f);
    s_expect_row(out, want, S_DIM);
    s_expect_row(out + S_DIM, p0, S_DIM);
    s_expect_row(out + 2 * S_DIM, p1, S_DIM); /* 3 * p1 / sqrt(9) */

    /* No weights: mean is the plain average, sqrtn the sum over sqrt(count). */
    sp.weights = NULL;
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &sp, ZDIST_COMBINER_MEAN, out, &err), 0);
    CU_ASSERT_DOUBLE_EQUAL(out[0], 2.0, 1e-6); /* (1 + 3) / 2 */
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &sp, ZDIST_COMBINER_SQRTN, out, &err), 0);
    CU_ASSERT_DOUBLE_EQUAL(out[0], 4.0 / sqrt(2.0), 1e-6);

    /* Weights summing to 0: div_no_nan gives zeros, not NaN; sum still adds. */
    const int64_t offs[] = {0, 2};
    const int64_t ids[] = {1, 3};
    const float ws[] = {1.0f, -1.0f};
    zdist_sparse_ids_t z = {.n = 1, .row_offsets = offs, .ids = ids, .weights = ws};
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &z, ZDIST_COMBINER_MEAN, out, &err), 0);
    CU_ASSERT_EQUAL(out[0], 0.0f);
    CU_ASSERT_EQUAL(out[5], 0.0f);
    CU_ASSERT_EQUAL_FATAL(zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &z, ZDIST_COMBINER_SUM, out, &err),
                          0);
    CU_ASSERT_DOUBLE_EQUAL(out[0], -2.0, 1e-6);
}

static void
test_empty_rows_and_errors(void)
{
    float p[S_VOCAB * S_DIM], out[3 * S_DIM];
    s_params(p, S_VOCAB, S_DIM);
    zdist_error_t err = {0};
    /* rows 0 and 2 empty: zeros */
    const int64_t offs[] = {0, 0, 1, 1};
    const int64_t ids[] = {4};
    zdist_sparse_ids_t sp = {.n = 3, .row_offsets = offs, .ids = ids};
    memset(out, 0x7f, sizeof out);
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &sp, ZDIST_COMBINER_MEAN, out, &err), 0);
    CU_ASSERT_EQUAL(out[0], 0.0f);
    CU_ASSERT_EQUAL(out[S_DIM - 1], 0.0f);
    CU_ASSERT_DOUBLE_EQUAL(out[S_DIM], 4.0, 1e-6);
    CU_ASSERT_EQUAL(out[2 * S_DIM + 7], 0.0f);

    /* ids outside the table: refused, naming the entry */
    const int64_t bad[] = {-1};
    const int64_t big[] = {10};
    const int64_t one[] = {0, 1};
    zdist_sparse_ids_t b = {.n = 1, .row_offsets = one, .ids = bad};
    CU_ASSERT_EQUAL(zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &b, ZDIST_COMBINER_SUM, out, &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "entry 0 has id -1"));
    b.ids = big;
    CU_ASSERT_EQUAL(zdist_embedding_safe_lookup_sparse(p, S_VOCAB, S_DIM, &b, ZDIST_COMBINER_SUM,
                                                       ZDIST_EMBEDDING_NO_DEFAULT, out, &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "outside the table's rows 0..9"));
    /* decreasing offsets, bad combiner, bad default_id */
    const int64_t dec[] = {0, 2, 1};
    zdist_sparse_ids_t d = {.n = 2, .row_offsets = dec, .ids = ids};
    CU_ASSERT_EQUAL(zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &d, ZDIST_COMBINER_SUM, out, &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "must not decrease"));
    CU_ASSERT_EQUAL(zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &sp, (zdist_combiner_t) 7, out, &err),
                    -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "combiner must be one of 'mean', 'sqrtn' or 'sum'");
    CU_ASSERT_EQUAL(
        zdist_embedding_safe_lookup_sparse(p, S_VOCAB, S_DIM, &sp, ZDIST_COMBINER_SUM, 10, out, &err),
        -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "default_id 10"));

    zdist_combiner_t c;
    CU_ASSERT_EQUAL(zdist_combiner_from_name("sqrtn", &c, &err), 0);
    CU_ASSERT_EQUAL(c, ZDIST_COMBINER_SQRTN);
    CU_ASSERT_STRING_EQUAL(zdist_combiner_name(c), "sqrtn");
    CU_ASSERT_EQUAL(zdist_combiner_from_name("max", &c, &err), -EINVAL);
    CU_ASSERT_DOUBLE_EQUAL(zdist_combiner_scale(ZDIST_COMBINER_SQRTN, (float[]){3, 4}, 0, 2), 0.2, 1e-12);
    CU_ASSERT_EQUAL(zdist_combiner_scale(ZDIST_COMBINER_MEAN, NULL, 3, 3), 0.0);
}

/* safe_embedding_lookup_sparse's docstring: row 1's only id is -1 (invalid):
   pruned, the row is empty, default_id 0 fills it with weight 1. */
static void
test_safe_docstring(void)
{
    float p[S_VOCAB * S_DIM], out[3 * S_DIM], want[S_DIM];
    s_params(p, S_VOCAB, S_DIM);
    const int64_t ids[] = {1, 3, -1, 1};
    zdist_sparse_ids_t sp = {.n = 3, .row_offsets = s_doc_offsets, .ids = ids, .weights = s_doc_weights};
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_safe_lookup_sparse(p, S_VOCAB, S_DIM, &sp, ZDIST_COMBINER_MEAN, 0, out, &err), 0);
    for (int j = 0; j < S_DIM; j++)
        want[j] = (p[S_DIM + j] * 2.0f + p[3 * S_DIM + j] * 0.5f) / 2.5f;
    s_expect_row(out, want, S_DIM);
    s_expect_row(out + S_DIM, p, S_DIM);
    s_expect_row(out + 2 * S_DIM, p + S_DIM, S_DIM);
    /* default_id 2 fills row 1 with params[2]; none: zeros */
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_safe_lookup_sparse(p, S_VOCAB, S_DIM, &sp, ZDIST_COMBINER_MEAN, 2, out, &err), 0);
    s_expect_row(out + S_DIM, p + 2 * S_DIM, S_DIM);
    CU_ASSERT_EQUAL_FATAL(zdist_embedding_safe_lookup_sparse(p, S_VOCAB, S_DIM, &sp, ZDIST_COMBINER_MEAN,
                                                             ZDIST_EMBEDDING_NO_DEFAULT, out, &err),
                          0);
    CU_ASSERT_EQUAL(out[S_DIM], 0.0f);
    CU_ASSERT_EQUAL(out[2 * S_DIM - 1], 0.0f);

    /* Non-positive weights are pruned for mean and sqrtn, kept for sum (TF
       prunes weights only when combiner != "sum"). Row 0: id 1 w 2, id 3 w 0,
       id 5 w -1; row 1: id 4 w -2 only. */
    const int64_t offs[] = {0, 3, 4};
    const int64_t ids2[] = {1, 3, 5, 4};
    const float ws[] = {2.0f, 0.0f, -1.0f, -2.0f};
    zdist_sparse_ids_t w = {.n = 2, .row_offsets = offs, .ids = ids2, .weights = ws};
    CU_ASSERT_EQUAL_FATAL(zdist_embedding_safe_lookup_sparse(p, S_VOCAB, S_DIM, &w, ZDIST_COMBINER_MEAN,
                                                             ZDIST_EMBEDDING_NO_DEFAULT, out, &err),
                          0);
    s_expect_row(out, p + S_DIM, S_DIM); /* 2 * p1 / 2 */
    CU_ASSERT_EQUAL(out[S_DIM], 0.0f);   /* row 1 pruned empty, no default: zeros */
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_safe_lookup_sparse(p, S_VOCAB, S_DIM, &w, ZDIST_COMBINER_SQRTN, 7, out, &err), 0);
    s_expect_row(out, p + S_DIM, S_DIM);             /* 2 * p1 / sqrt(4) */
    s_expect_row(out + S_DIM, p + 7 * S_DIM, S_DIM); /* the default, weight 1 */
    CU_ASSERT_EQUAL_FATAL(zdist_embedding_safe_lookup_sparse(p, S_VOCAB, S_DIM, &w, ZDIST_COMBINER_SUM,
                                                             ZDIST_EMBEDDING_NO_DEFAULT, out, &err),
                          0);
    CU_ASSERT_DOUBLE_EQUAL(out[0], 2.0 * 1 + 0.0 * 3 - 1.0 * 5, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(out[S_DIM], -2.0 * 4, 1e-6);
}

/* ---- over two psd servers ---- */

typedef struct {
    zactor_t *psd[2];
    zdist_ps_client_t *client[2];
    zdist_layout_t *layout;
} s_cluster_t;

/* 'emb' [10, 20] in 3 Div shards (rows 0-3, 4-6, 7-9) placed round-robin on
   2 ps tasks (0, 1, 0), holding s_params's values. */
static void
s_cluster_new(s_cluster_t *c, const float *params)
{
    zdist_error_t err = {0};
    for (int i = 0; i < 2; i++) {
        char endpoint[256];
        c->psd[i] = zdist_test_psd_start(i, endpoint, sizeof endpoint);
        c->client[i] = zdist_ps_client_new(endpoint, NULL, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c->client[i]);
    }
    zdist_placement_t *pl = zdist_placement_new(2);
    zdist_partitioner_t part = {.kind = ZDIST_PARTITIONER_FIXED, .num_shards = 3};
    zdist_shape_t shape = {2, {S_VOCAB, S_DIM}};
    CU_ASSERT_EQUAL_FATAL(
        zdist_placement_place_variable(pl, "emb", &shape, ZDIST_DTYPE_FLOAT32, &part, &c->layout, &err), 0);
    zdist_placement_destroy(&pl);
    CU_ASSERT_EQUAL_FATAL(c->layout->num_shards, 3);
    for (int s = 0; s < 3; s++) {
        const zdist_shard_t *sh = &c->layout->shards[s];
        zdist_ps_var_spec_t spec = {.name = "emb",
                                    .dtype = ZDIST_DTYPE_FLOAT32,
                                    .shape = shape,
                                    .shard_index = s,
                                    .row_offset = sh->offset,
                                    .row_count = sh->rows};
        CU_ASSERT_EQUAL_FATAL(zdist_ps_client_create(c->client[sh->ps], &spec, NULL, &err), 0);
        zdist_tensor_t v = {.dtype = ZDIST_DTYPE_FLOAT32,
                            .shape = {2, {sh->rows, S_DIM}},
                            .data = (void *) (params + sh->offset * S_DIM),
                            .nbytes = (size_t) (sh->rows * S_DIM) * sizeof(float)};
        CU_ASSERT_EQUAL_FATAL(zdist_ps_client_assign(c->client[sh->ps], "emb", s, 0, 0, &v, NULL, &err), 0);
    }
}

static void
s_cluster_destroy(s_cluster_t *c)
{
    zdist_layout_destroy(&c->layout);
    for (int i = 0; i < 2; i++) {
        zdist_ps_client_destroy(&c->client[i]);
        zactor_destroy(&c->psd[i]);
    }
}

static void
test_ps_sharded(void)
{
    float p[S_VOCAB * S_DIM], local[4 * S_DIM], remote[4 * S_DIM];
    s_params(p, S_VOCAB, S_DIM);
    s_cluster_t c = {0};
    s_cluster_new(&c, p);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(c.layout->shards[0].ps, 0);
    CU_ASSERT_EQUAL(c.layout->shards[1].ps, 1);
    CU_ASSERT_EQUAL(c.layout->shards[2].ps, 0);

    /* Ids in shards 0 (1, 3) and 2 (8, twice) only: two pulls, both to ps 0. */
    const int64_t offs[] = {0, 2, 4, 5, 5};
    const int64_t ids[] = {1, 3, 8, 1, 8};
    const float ws[] = {2.0f, 0.5f, 1.0f, 3.0f, 0.25f};
    zdist_sparse_ids_t sp = {.n = 4, .row_offsets = offs, .ids = ids, .weights = ws};
    for (int comb = 0; comb < 3; comb++) {
        zdist_embedding_options_t o = {.combiner = (zdist_combiner_t) comb,
                                       .default_id = ZDIST_EMBEDDING_NO_DEFAULT};
        uint64_t before0 = zdist_test_psd_requests(c.client[0], "pull_rows"), before1 = zdist_test_psd_requests(c.client[1], "pull_rows");
        memset(remote, 0x7f, sizeof remote);
        CU_ASSERT_EQUAL_FATAL(zdist_embedding_lookup_sparse_ps(c.client, 2, c.layout, &sp, &o, remote, &err),
                              0);
        CU_ASSERT_EQUAL(zdist_test_psd_requests(c.client[0], "pull_rows"), before0 + 2);
        CU_ASSERT_EQUAL(zdist_test_psd_requests(c.client[1], "pull_rows"), before1);
        CU_ASSERT_EQUAL(zdist_embedding_lookup_sparse(p, S_VOCAB, S_DIM, &sp, o.combiner, local, &err), 0);
        CU_ASSERT_EQUAL(memcmp(local, remote, sizeof local), 0); /* the same rows, combined alike */
        CU_ASSERT_EQUAL(remote[3 * S_DIM], 0.0f);                /* the empty row */
    }

    /* The safe lookup over the shards: -1 pruned, row 1 (id 5, weight 0)
       empties under mean and takes default_id 4 (shard 1, on ps 1). */
    const int64_t offs2[] = {0, 3, 4};
    const int64_t ids2[] = {-1, 9, 0, 5};
    const float ws2[] = {1.0f, 1.0f, 3.0f, 0.0f};
    zdist_sparse_ids_t s2 = {.n = 2, .row_offsets = offs2, .ids = ids2, .weights = ws2};
    zdist_embedding_options_t so = {.combiner = ZDIST_COMBINER_MEAN, .safe = true, .default_id = 4};
    uint64_t before1 = zdist_test_psd_requests(c.client[1], "pull_rows");
    CU_ASSERT_EQUAL_FATAL(zdist_embedding_lookup_sparse_ps(c.client, 2, c.layout, &s2, &so, remote, &err), 0);
    CU_ASSERT_EQUAL(zdist_test_psd_requests(c.client[1], "pull_rows"), before1 + 1);
    CU_ASSERT_EQUAL(
        zdist_embedding_safe_lookup_sparse(p, S_VOCAB, S_DIM, &s2, ZDIST_COMBINER_MEAN, 4, local, &err), 0);
    CU_ASSERT_EQUAL(memcmp(local, remote, 2 * S_DIM * sizeof(float)), 0);
    CU_ASSERT_DOUBLE_EQUAL(remote[0], (9.0 + 0.0 * 3) / 4.0, 1e-6); /* (p9 + 3 p0) / 4 at j = 0 */
    CU_ASSERT_DOUBLE_EQUAL(remote[S_DIM], 4.0, 1e-6);

    /* A batch with no ids at all: zeros, and no pull is sent. */
    const int64_t none_offs[] = {0, 0, 0};
    zdist_sparse_ids_t empty = {.n = 2, .row_offsets = none_offs};
    zdist_embedding_options_t mo = {.combiner = ZDIST_COMBINER_MEAN, .default_id = ZDIST_EMBEDDING_NO_DEFAULT};
    uint64_t e0 = zdist_test_psd_requests(c.client[0], "pull_rows"), e1 = zdist_test_psd_requests(c.client[1], "pull_rows");
    memset(remote, 0x7f, sizeof remote);
    CU_ASSERT_EQUAL(zdist_embedding_lookup_sparse_ps(c.client, 2, c.layout, &empty, &mo, remote, &err), 0);
    CU_ASSERT_EQUAL(remote[0], 0.0f);
    CU_ASSERT_EQUAL(remote[2 * S_DIM - 1], 0.0f);
    CU_ASSERT_EQUAL(zdist_test_psd_requests(c.client[0], "pull_rows"), e0);
    CU_ASSERT_EQUAL(zdist_test_psd_requests(c.client[1], "pull_rows"), e1);

    /* An id past the table: refused before anything is sent. */
    const int64_t far[] = {10};
    const int64_t one[] = {0, 1};
    zdist_sparse_ids_t f = {.n = 1, .row_offsets = one, .ids = far};
    uint64_t before0 = zdist_test_psd_requests(c.client[0], "pull_rows");
    CU_ASSERT_EQUAL(zdist_embedding_lookup_sparse_ps(c.client, 2, c.layout, &f, &so, remote, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "entry 0 has id 10"));
    CU_ASSERT_EQUAL(zdist_test_psd_requests(c.client[0], "pull_rows"), before0);
    /* Too few clients for the layout. */
    CU_ASSERT_EQUAL(zdist_embedding_lookup_sparse_ps(c.client, 1, c.layout, &sp, &so, remote, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "on ps task 1, but there are clients for 1 ps tasks"));
    /* A psd that lost the table: the pull's refusal comes back by name. */
    zdist_layout_t renamed = *c.layout;
    renamed.name = "nothing";
    CU_ASSERT_EQUAL(zdist_embedding_lookup_sparse_ps(c.client, 2, &renamed, &sp, &so, remote, &err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "'nothing' shard 0 on ps task 0"));
    s_cluster_destroy(&c);
}

/* tf.compat.v1.nn.embedding_lookup(params, ids, partition_strategy) over
   local shards, as embedding_ops_test.py's testShardedModPartitioningInt32Ids
   and its div counterparts build them: the table's rows dealt out by
   the strategy, every id found again. */
static void
test_lookup_mod_div_local(void)
{
    enum { V = 13, D = 3, P = 5 };
    float table[V * D], mod_shards[V * D], div_shards[V * D], out[V * D];
    int64_t rows[P] = {3, 3, 3, 2, 2}, ids[V];
    const float *mp[P], *dp[P];
    for (int i = 0; i < V * D; i++)
        table[i] = (float) i;
    /* mod: shard s holds ids s, s + 5, ...; div: contiguous 3,3,3,2,2 */
    for (int s = 0, off = 0; s < P; off += (int) rows[s], s++) {
        mp[s] = mod_shards + off * D;
        dp[s] = div_shards + off * D;
        for (int r = 0; r < rows[s]; r++) {
            memcpy(mod_shards + (off + r) * D, table + (s + r * P) * D, D * sizeof(float));
            memcpy(div_shards + (off + r) * D, table + (off + r) * D, D * sizeof(float));
        }
    }
    for (int i = 0; i < V; i++)
        ids[i] = (i * 7) % V; /* every id, out of order */
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_lookup(mp, rows, P, D, ids, V, ZDIST_PARTITION_STRATEGY_MOD, out, &err), 0);
    for (int i = 0; i < V; i++)
        CU_ASSERT_EQUAL(memcmp(out + i * D, table + ids[i] * D, D * sizeof(float)), 0);
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_lookup(dp, rows, P, D, ids, V, ZDIST_PARTITION_STRATEGY_DIV, out, &err), 0);
    for (int i = 0; i < V; i++)
        CU_ASSERT_EQUAL(memcmp(out + i * D, table + ids[i] * D, D * sizeof(float)), 0);
    /* the mod shards read as div give other rows: the strategy must match the table */
    CU_ASSERT_EQUAL_FATAL(
        zdist_embedding_lookup(mp, rows, P, D, ids, V, ZDIST_PARTITION_STRATEGY_DIV, out, &err), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(out + 2 * D, table + ids[2] * D, D * sizeof(float)), 0); /* id 1 reads id 5 */
    /* an id past the table under mod: gather's error on its shard (13: row 2 of shard 3) */
    int64_t far[1] = {13};
    CU_ASSERT_EQUAL(zdist_embedding_lookup(mp, rows, P, D, far, 1, ZDIST_PARTITION_STRATEGY_MOD, out, &err),
                    -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "indices[0] = 2 is not in [0, 2)");
}

/* The ps lookup by TF's partition strategy (the default) or the layout's
   offsets: mod over the 3 shards of 'emb' (4, 3, 3 rows, the mod sizes of
   10 over 3 too), and a layout whose shards are not the div shape, which
   TF refuses and zdist's offsets answer. */
static void
test_ps_partition_strategies(void)
{
    float p[S_VOCAB * S_DIM], remote[S_VOCAB * S_DIM], local[S_VOCAB * S_DIM];
    s_params(p, S_VOCAB, S_DIM);
    s_cluster_t c = {0};
    s_cluster_new(&c, p);
    zdist_error_t err = {0};
    /* one id per row, SUM: the looked-up rows themselves */
    int64_t offs[S_VOCAB + 1], ids[S_VOCAB];
    for (int i = 0; i <= S_VOCAB; i++)
        offs[i] = i;
    for (int i = 0; i < S_VOCAB; i++)
        ids[i] = (i * 3) % S_VOCAB;
    zdist_sparse_ids_t sp = {.n = S_VOCAB, .row_offsets = offs, .ids = ids};
    zdist_embedding_options_t o = {.combiner = ZDIST_COMBINER_SUM,
                                   .default_id = ZDIST_EMBEDDING_NO_DEFAULT,
                                   .partition_strategy = ZDIST_PARTITION_STRATEGY_MOD};
    CU_ASSERT_EQUAL_FATAL(zdist_embedding_lookup_sparse_ps(c.client, 2, c.layout, &sp, &o, remote, &err), 0);
    /* the psds hold each shard's rows as stored: a mod table there is shard
       s's rows read as ids s, s + 3, ...; the local lookup over the same
       shards agrees */
    const float *shards[3];
    int64_t rows[3];
    for (int s = 0; s < 3; s++) {
        shards[s] = p + c.layout->shards[s].offset * S_DIM;
        rows[s] = c.layout->shards[s].rows;
    }
    CU_ASSERT_EQUAL_FATAL(zdist_embedding_lookup(shards, rows, 3, S_DIM, ids, S_VOCAB,
                                                 ZDIST_PARTITION_STRATEGY_MOD, local, &err),
                          0);
    CU_ASSERT_EQUAL(memcmp(local, remote, sizeof local), 0);
    /* id 4 is row 1 of shard 1, stored at global row 4 + 1 */
    CU_ASSERT_EQUAL(ids[8], 4);
    CU_ASSERT_EQUAL(remote[8 * S_DIM], p[5 * S_DIM]);
    /* DIV (the zero value) over this Div layout: the table's own rows */
    o.partition_strategy = ZDIST_PARTITION_STRATEGY_DIV;
    CU_ASSERT_EQUAL_FATAL(zdist_embedding_lookup_sparse_ps(c.client, 2, c.layout, &sp, &o, remote, &err), 0);
    for (int i = 0; i < S_VOCAB; i++)
        CU_ASSERT_EQUAL(memcmp(remote + i * S_DIM, p + ids[i] * S_DIM, S_DIM * sizeof(float)), 0);

    /* shards of 5, 2, 3 rows (offsets 0, 5, 7), not the div shape 4, 3, 3:
       TF assigns id 6 to row 2 of shard 1, which has 2 rows, and raises
       before anything is sent; by_offsets finds it at row 1 of shard 1 */
    zdist_shard_t sh[3];
    memcpy(sh, c.layout->shards, sizeof sh);
    sh[0].rows = 5;
    sh[1].offset = 5;
    sh[1].rows = 2;
    zdist_layout_t odd = *c.layout;
    odd.shards = sh;
    const int64_t two_offs[] = {0, 1, 2}, two_ids[] = {6, 1};
    zdist_sparse_ids_t two = {.n = 2, .row_offsets = two_offs, .ids = two_ids};
    uint64_t before0 = zdist_test_psd_requests(c.client[0], "pull_rows");
    uint64_t before1 = zdist_test_psd_requests(c.client[1], "pull_rows");
    CU_ASSERT_EQUAL(zdist_embedding_lookup_sparse_ps(c.client, 2, &odd, &two, &o, remote, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "indices[0] = 2 is not in [0, 2)");
    CU_ASSERT_EQUAL(zdist_test_psd_requests(c.client[0], "pull_rows"), before0);
    CU_ASSERT_EQUAL(zdist_test_psd_requests(c.client[1], "pull_rows"), before1);
    o.by_offsets = true;
    CU_ASSERT_EQUAL_FATAL(zdist_embedding_lookup_sparse_ps(c.client, 2, &odd, &two, &o, remote, &err), 0);
    CU_ASSERT_EQUAL(memcmp(remote, p + 6 * S_DIM, S_DIM * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(remote + S_DIM, p + 1 * S_DIM, S_DIM * sizeof(float)), 0);
    s_cluster_destroy(&c);
}

void
zdist_test_embedding_register(void)
{
    ZDIST_SUITE("embedding", {"embedding_lookup_sparse: the docstring's combiners", test_docstring_combiners},
                {"empty rows are zeros; bad ids, offsets, combiners refused", test_empty_rows_and_errors},
                {"safe_embedding_lookup_sparse: pruning and default_id", test_safe_docstring},
                {"over a table sharded on two psd servers", test_ps_sharded},
                {"embedding_lookup: mod and div over local shards", test_lookup_mod_div_local},
                {"over psds: TF's partition strategies, or the layout's offsets", test_ps_partition_strategies});
}
