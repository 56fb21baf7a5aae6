/* zdist embedding: tf.nn.embedding_lookup_sparse / safe_embedding_lookup_sparse's combiners over a local
 * table. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "math/embedding_private.h"

int
zdist_combiner_from_name(const char *name, zdist_combiner_t *ret, zdist_error_t *err)
{
    if (name && strcmp(name, "mean") == 0)
        *ret = ZDIST_COMBINER_MEAN;
    else if (name && strcmp(name, "sum") == 0)
        *ret = ZDIST_COMBINER_SUM;
    else if (name && strcmp(name, "sqrtn") == 0)
        *ret = ZDIST_COMBINER_SQRTN;
    else /* TF's ValueError text */
        return zdist_error_set(err, -EINVAL, "combiner must be one of 'mean', 'sqrtn' or 'sum'");
    return 0;
}

const char *
zdist_combiner_name(zdist_combiner_t combiner)
{
    switch (combiner) {
    case ZDIST_COMBINER_MEAN:
        return "mean";
    case ZDIST_COMBINER_SUM:
        return "sum";
    case ZDIST_COMBINER_SQRTN:
        return "sqrtn";
    }
    return "invalid";
}

double
zdist_combiner_scale(zdist_combiner_t combiner, const float *weights, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return 0;
    if (combiner == ZDIST_COMBINER_SUM)
        return 1;
    double sum = 0;
    for (int64_t k = lo; k < hi; k++) {
        double w = weights ? weights[k] : 1.0;
        sum += combiner == ZDIST_COMBINER_SQRTN ? w * w : w;
    }
    if (combiner == ZDIST_COMBINER_SQRTN)
        sum = sqrt(sum);
    return sum != 0 ? 1.0 / sum : 0;
}

static bool
s_combiner_ok(zdist_combiner_t c)
{
    return c == ZDIST_COMBINER_MEAN || c == ZDIST_COMBINER_SUM || c == ZDIST_COMBINER_SQRTN;
}

void
zdist_emb_plan_free_(zdist_emb_plan_t *plan)
{
    free(plan->offsets);
    free(plan->ids);
    free(plan->weights);
    memset(plan, 0, sizeof *plan);
}

int
zdist_emb_plan_(const zdist_sparse_ids_t *sp, const zdist_embedding_options_t *opts, int64_t vocab,
                zdist_emb_plan_t *ret, zdist_error_t *err)
{
    if (!sp || !opts || !ret)
        return zdist_error_set(err, -EINVAL, "embedding lookup: no sparse ids or options");
    if (!s_combiner_ok(opts->combiner))
        return zdist_error_set(err, -EINVAL, "combiner must be one of 'mean', 'sqrtn' or 'sum'");
    if (sp->n < 0 || (sp->n > 0 && !sp->row_offsets) || (sp->row_offsets && sp->row_offsets[0] != 0))
        return zdist_error_set(err, -EINVAL, "sparse ids: row_offsets must hold n + 1 = %lld offsets from 0",
                               (long long) sp->n + 1);
    int64_t nnz = sp->n > 0 ? sp->row_offsets[sp->n] : 0;
    for (int64_t i = 0; i < sp->n; i++)
        if (sp->row_offsets[i + 1] < sp->row_offsets[i])
            return zdist_error_set(err, -EINVAL,
                                   "sparse ids: row_offsets[%lld] = %lld is below row_offsets[%lld] = %lld; "
                                   "the offsets must not decrease",
                                   (long long) i + 1, (long long) sp->row_offsets[i + 1], (long long) i,
                                   (long long) sp->row_offsets[i]);
    if (nnz > 0 && !sp->ids)
        return zdist_error_set(err, -EINVAL, "sparse ids: %lld entries but no ids", (long long) nnz);
    bool safe = opts->safe;
    if (safe && opts->default_id != ZDIST_EMBEDDING_NO_DEFAULT &&
        (opts->default_id < 0 || (vocab >= 0 && opts->default_id >= vocab)))
        return zdist_error_set(err, -EINVAL, "default_id %lld is outside the table's rows 0..%lld",
                               (long long) opts->default_id, (long long) vocab - 1);
    for (int64_t k = 0; k < nnz; k++) {
        int64_t id = sp->ids[k];
        if ((id < 0 && !safe) || (vocab >= 0 && id >= vocab))
            return zdist_error_set(err, -EINVAL,
                                   "sparse ids: entry %lld has id %lld, outside the table's rows "
                                   "0..%lld%s",
                                   (long long) k, (long long) id, (long long) vocab - 1,
                                   id < 0 ? " (the safe lookup prunes negative ids)" : "");
    }

    zdist_emb_plan_t p = {.n = sp->n};
    p.offsets = malloc((size_t) (sp->n + 1) * sizeof *p.offsets);
    /* at most one default entry per row more than the input's */
    size_t cap = (size_t) nnz + (safe ? (size_t) sp->n : 0);
    p.ids = malloc((cap ? cap : 1) * sizeof *p.ids);
    bool weighted = sp->weights || (safe && opts->default_id != ZDIST_EMBEDDING_NO_DEFAULT);
    if (weighted)
        p.weights = malloc((cap ? cap : 1) * sizeof *p.weights);
    if (!p.offsets || !p.ids || (weighted && !p.weights)) {
        zdist_emb_plan_free_(&p);
        return zdist_error_set(err, -ENOMEM, "embedding lookup: out of memory for %lld entries",
                               (long long) nnz);
    }
    int64_t m = 0;
    p.offsets[0] = 0;
    for (int64_t i = 0; i < sp->n; i++) {
        for (int64_t k = sp->row_offsets[i]; k < sp->row_offsets[i + 1]; k++) {
            float w = sp->weights ? sp->weights[k] : 1.0f;
            /* _prune_invalid_ids; _prune_invalid_weights unless the combiner is sum */
            if (safe && (sp->ids[k] < 0 || (sp->weights && opts->combiner != ZDIST_COMBINER_SUM && !(w > 0))))
                continue;
            p.ids[m] = sp->ids[k];
            if (weighted)
                p.weights[m] = w;
            m++;
        }
        /* sparse_fill_empty_rows(ids, default_id), weights filled with 1.0;
           without a default_id the row stays empty: zeros */
        if (safe && m == p.offsets[i] && opts->default_id != ZDIST_EMBEDDING_NO_DEFAULT) {
            p.ids[m] = opts->default_id;
            p.weights[m] = 1.0f;
            m++;
        }
        p.offsets[i + 1] = m;
    }
    p.m = m;
    *ret = p;
    return 0;
}

void
zdist_emb_combine_(const zdist_emb_plan_t *plan, zdist_combiner_t combiner, const float *const *rows,
                   int64_t dim, float *out)
{
    for (int64_t i = 0; i < plan->n; i++) {
        float *y = out + i * dim;
        memset(y, 0, (size_t) dim * sizeof *y);
        int64_t lo = plan->offsets[i], hi = plan->offsets[i + 1];
        float den = 0;
        for (int64_t k = lo; k < hi; k++) {
            float w = plan->weights ? plan->weights[k] : 1.0f;
            den += combiner == ZDIST_COMBINER_SQRTN ? w * w : w;
            const float *r = rows[k];
            for (int64_t j = 0; j < dim; j++)
                y[j] += w * r[j];
        }
        if (combiner == ZDIST_COMBINER_SUM || hi == lo)
            continue;
        if (combiner == ZDIST_COMBINER_SQRTN)
            den = sqrtf(den);
        for (int64_t j = 0; j < dim; j++)
            y[j] = den != 0 ? y[j] / den : 0; /* div_no_nan */
    }
}

static int
s_local(const float *params, int64_t vocab, int64_t dim, const zdist_sparse_ids_t *sp,
        const zdist_embedding_options_t *opts, float *out, zdist_error_t *err)
{
    if (vocab < 0 || dim < 1 || (vocab > 0 && !params) || (sp && sp->n > 0 && !out))
        return zdist_error_set(err, -EINVAL,
                               "embedding lookup: the table needs vocab >= 0 rows of dim >= 1 "
                               "(got %lld x %lld) and data, and out a buffer",
                               (long long) vocab, (long long) dim);
    zdist_emb_plan_t plan;
    int rc = zdist_emb_plan_(sp, opts, vocab, &plan, err);
    if (rc < 0)
        return rc;
    const float **rows = malloc((plan.m ? (size_t) plan.m : 1) * sizeof *rows);
    if (!rows) {
        zdist_emb_plan_free_(&plan);
        return zdist_error_set(err, -ENOMEM, "embedding lookup: out of memory");
    }
    for (int64_t k = 0; k < plan.m; k++)
        rows[k] = params + plan.ids[k] * dim;
    zdist_emb_combine_(&plan, opts->combiner, rows, dim, out);
    free(rows);
    zdist_emb_plan_free_(&plan);
    return 0;
}

int
zdist_embedding_lookup_sparse(const float *params, int64_t vocab, int64_t dim, const zdist_sparse_ids_t *sp,
                              zdist_combiner_t combiner, float *out, zdist_error_t *err)
{
    zdist_embedding_options_t o = {.combiner = combiner, .default_id = ZDIST_EMBEDDING_NO_DEFAULT};
    return s_local(params, vocab, dim, sp, &o, out, err);
}

int
zdist_embedding_safe_lookup_sparse(const float *params, int64_t vocab, int64_t dim,
                                   const zdist_sparse_ids_t *sp, zdist_combiner_t combiner,
                                   int64_t default_id, float *out, zdist_error_t *err)
{
    zdist_embedding_options_t o = {.combiner = combiner, .safe = true, .default_id = default_id};
    return s_local(params, vocab, dim, sp, &o, out, err);
}

int
zdist_embedding_lookup(const float *const *params, const int64_t *rows, int num_shards, int64_t dim,
                       const int64_t *ids, int64_t n, zdist_partition_strategy_t strategy, float *out,
                       zdist_error_t *err)
{
    if (!params || !rows || num_shards < 1 || dim < 1 || n < 0 || (n > 0 && (!ids || !out)))
        return zdist_error_set(err, -EINVAL,
                               "embedding_lookup: give at least one shard of dim >= 1 (got %d of %lld), "
                               "the ids and out",
                               num_shards, (long long) dim);
    int *shard = malloc((size_t) (n ? n : 1) * sizeof *shard);
    int64_t *row = malloc((size_t) (n ? n : 1) * sizeof *row);
    int rc = !shard || !row
                 ? zdist_error_set(err, -ENOMEM, "embedding_lookup: out of memory")
                 : zdist_partition_assign_ids(strategy, rows, num_shards, ids, n, false, shard, row, err);
    for (int64_t k = 0; rc == 0 && k < n; k++)
        memcpy(out + k * dim, params[shard[k]] + row[k] * dim, (size_t) dim * sizeof *out);
    free(shard);
    free(row);
    return rc;
}
