/* zdist embedding over ps tasks: a sparse lookup of a partitioned table, one pull_rows per shard that holds
 * ids. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "math/embedding_private.h"

typedef struct {
    int shard;
    int64_t id;
    int64_t entry;
} s_key_t;

static int
s_key_cmp(const void *a, const void *b)
{
    const s_key_t *x = a, *y = b;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->entry > y->entry) - (x->entry < y->entry);
}

/* Each entry's shard and the global row the psd holds its value at: TF's
   partition_strategy over the shards' sizes (the distinct ids counted as
   embedding_lookup_sparse's unique does, for TF's error), or the layout's
   offsets. */
static int
s_place(const zdist_layout_t *layout, const zdist_embedding_options_t *opts, const int64_t *ids, int64_t m,
        int64_t *ret_shard, int64_t *ret_global, zdist_error_t *err)
{
    int *shard = malloc((size_t) (m ? m : 1) * sizeof *shard);
    int64_t *rows = malloc((size_t) layout->num_shards * sizeof *rows);
    int rc = !shard || !rows ? zdist_error_set(err, -ENOMEM, "embedding lookup on ps: out of memory") : 0;
    for (int s = 0; rc == 0 && s < layout->num_shards; s++)
        rows[s] = layout->shards[s].rows;
    if (rc == 0 && !opts->by_offsets)
        rc = zdist_partition_assign_ids(opts->partition_strategy, rows, layout->num_shards, ids, m, true,
                                        shard, ret_global, err);
    for (int64_t k = 0; rc == 0 && k < m; k++) {
        if (opts->by_offsets)
            rc = zdist_layout_lookup(layout, ids[k], &shard[k], &ret_global[k], err);
        if (rc == 0) {
            ret_shard[k] = shard[k];
            ret_global[k] += layout->shards[shard[k]].offset;
        }
    }
    free(shard);
    free(rows);
    return rc;
}

/* The table's layout against the clients; *ret_dim: a row's floats. */
static int
s_check(zdist_ps_client_t *const *clients, int num_clients, const zdist_layout_t *layout,
        const zdist_sparse_ids_t *sp, const float *out, int64_t *ret_dim, zdist_error_t *err)
{
    if (!clients || num_clients < 1 || !layout || !layout->shards || layout->num_shards < 1)
        return zdist_error_set(err, -EINVAL,
                               "embedding lookup on ps: give the table's layout and one client per "
                               "ps task");
    if (layout->shape.rank < 2)
        return zdist_error_set(err, -EINVAL,
                               "embedding lookup on ps: '%s' has rank %d; a table is [rows, dim]",
                               layout->name, layout->shape.rank);
    int64_t dim = 1;
    for (int d = 1; d < layout->shape.rank; d++)
        dim *= layout->shape.dims[d];
    for (int s = 0; s < layout->num_shards; s++)
        if (layout->shards[s].ps < 0 || layout->shards[s].ps >= num_clients || !clients[layout->shards[s].ps])
            return zdist_error_set(err, -EINVAL,
                                   "embedding lookup on ps: shard %d of '%s' is on ps task %d, but "
                                   "there are clients for %d ps tasks",
                                   s, layout->name, layout->shards[s].ps, num_clients);
    if (dim < 1 || (sp && sp->n > 0 && !out))
        return zdist_error_set(err, -EINVAL, "embedding lookup on ps: '%s' has no columns, or out is missing",
                               layout->name);
    *ret_dim = dim;
    return 0;
}

int
zdist_embedding_lookup_sparse_ps(zdist_ps_client_t *const *clients, int num_clients,
                                 const zdist_layout_t *layout, const zdist_sparse_ids_t *sp,
                                 const zdist_embedding_options_t *opts, float *out, zdist_error_t *err)
{
    int64_t dim = 0;
    int rc = s_check(clients, num_clients, layout, sp, out, &dim, err);
    if (rc < 0)
        return rc;
    int64_t vocab = layout->shape.dims[0];
    zdist_emb_plan_t plan;
    rc = zdist_emb_plan_(sp, opts, vocab, &plan, err);
    if (rc < 0)
        return rc;

    size_t m = (size_t) plan.m;
    s_key_t *keys = malloc((m ? m : 1) * sizeof *keys);
    int64_t *uids = malloc((m ? m : 1) * sizeof *uids);      /* distinct ids, grouped by shard */
    int64_t *uidx = malloc((m ? m : 1) * sizeof *uidx);      /* entry -> its distinct id */
    const float **rows = malloc((m ? m : 1) * sizeof *rows); /* entry -> its row in a reply */
    zdist_ps_op_t *ops = calloc((size_t) layout->num_shards, sizeof *ops);
    int *op_shard = calloc((size_t) layout->num_shards, sizeof *op_shard);
    int64_t *op_first = calloc((size_t) layout->num_shards + 1, sizeof *op_first);
    const float **urow = NULL;
    size_t nops = 0;
    if (!keys || !uids || !uidx || !rows || !ops || !op_shard || !op_first) {
        rc = zdist_error_set(err, -ENOMEM, "embedding lookup on ps: out of memory for %zu entries", m);
        goto done;
    }
    /* uidx and uids hold each entry's shard and global row until the dedup below */
    if ((rc = s_place(layout, opts, plan.ids, plan.m, uidx, uids, err)) < 0)
        goto done;
    for (size_t k = 0; k < m; k++)
        keys[k] = (s_key_t){.shard = (int) uidx[k], .id = uids[k], .entry = (int64_t) k};
    qsort(keys, m, sizeof *keys, s_key_cmp);
    int64_t nu = 0;
    for (size_t k = 0; k < m; k++) {
        bool fresh = k == 0 || keys[k].shard != keys[k - 1].shard || keys[k].id != keys[k - 1].id;
        if (fresh) {
            if (k == 0 || keys[k].shard != keys[k - 1].shard) {
                op_shard[nops] = keys[k].shard;
                op_first[nops++] = nu;
            }
            uids[nu++] = keys[k].id;
        }
        uidx[keys[k].entry] = nu - 1;
    }
    op_first[nops] = nu;
    for (size_t i = 0; i < nops; i++) {
        const zdist_shard_t *sh = &layout->shards[op_shard[i]];
        ops[i] = (zdist_ps_op_t){.client = clients[sh->ps], .request = {.method = ZDIST_PS_PULL_ROWS}};
        ops[i].request.pull_rows = (zdist_ps_pull_rows_t){
            .name = layout->name, .ids = uids + op_first[i], .nids = (size_t) (op_first[i + 1] - op_first[i])};
    }
    zdist_ps_client_run(ops, nops);
    /* Where each distinct id's row landed. */
    urow = malloc((nu ? (size_t) nu : 1) * sizeof *urow);
    if (!urow) {
        rc = zdist_error_set(err, -ENOMEM, "embedding lookup on ps: out of memory");
        goto done;
    }
    for (size_t i = 0; i < nops; i++) {
        const zdist_shard_t *sh = &layout->shards[op_shard[i]];
        size_t nids = (size_t) (op_first[i + 1] - op_first[i]);
        size_t want = nids * (size_t) dim * sizeof(float);
        zdist_error_t e = {0};
        zdist_tensor_t t = {0};
        int r = ops[i].rc;
        if (r < 0)
            zdist_error_set(&e, r, "cannot send: %s", r == -EINVAL ? "invalid request" : strerror(-r));
        else
            r = zdist_ps_reply_values(ops[i].reply, &t, &e);
        if (r == 0 && (t.dtype != ZDIST_DTYPE_FLOAT32 || t.nbytes != want))
            r = zdist_error_set(&e, -EPROTO, "%zu bytes of %s, wanted %zu of float32", t.nbytes,
                                zdist_dtype_name(t.dtype), want);
        if (r < 0) {
            if (rc == 0)
                rc = zdist_error_set(err, r,
                                     "embedding lookup: pull_rows of %zu ids from '%s' shard %d on ps task "
                                     "%d: %s",
                                     nids, layout->name, op_shard[i], sh->ps, e.text);
            continue;
        }
        for (size_t j = 0; j < nids; j++)
            urow[op_first[i] + (int64_t) j] = (const float *) t.data + j * (size_t) dim;
    }
    if (rc == 0) {
        for (size_t k = 0; k < m; k++)
            rows[k] = urow[uidx[k]];
        zdist_emb_combine_(&plan, opts->combiner, rows, dim, out);
    }
done:
    if (ops)
        zdist_ps_ops_release(ops, nops);
    free(ops);
    free(op_shard);
    free(op_first);
    free(keys);
    free(uids);
    free(uidx);
    free(rows);
    free(urow);
    zdist_emb_plan_free_(&plan);
    return rc;
}
