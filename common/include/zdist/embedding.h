/* zdist embedding: tf.nn.embedding_lookup_sparse and tf.nn.safe_embedding_lookup_sparse, over a local table
   or a table partitioned over ps tasks. */
#ifndef ZDIST_EMBEDDING_H
#define ZDIST_EMBEDDING_H

#include <stdbool.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/model_spec.h"
#include "zdist/partition.h"
#include "zdist/ps_client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TensorFlow's combiners (zdist_combiner_t, zdist/model_spec.h), per batch row
   i with entries k (id_k, weight w_k; w_k = 1 when there are no weights):
     sum    sum_k w_k * params[id_k]
     mean   sum_k w_k * params[id_k] / sum_k w_k
     sqrtn  sum_k w_k * params[id_k] / sqrt(sum_k w_k^2)
   A row whose denominator is 0, or with no entries, is all zeros (TF's
   div_no_nan; an empty row of a SparseTensor combines to zeros). */

/* "sum", "mean", "sqrtn" -> combiner; -EINVAL with TF's text "combiner must
   be one of 'mean', 'sqrtn' or 'sum'" otherwise. */
ZDIST_EXPORT int zdist_combiner_from_name(const char *name, zdist_combiner_t *ret, zdist_error_t *err);
ZDIST_EXPORT const char *zdist_combiner_name(zdist_combiner_t combiner);

/* The factor entries [lo, hi) of one row are multiplied by, after their own
   weight: 1 (sum), 1 / sum(w) (mean), 1 / sqrt(sum(w^2)) (sqrtn); 0 for an
   empty range or a zero denominator. weights NULL: every weight 1. The
   weights are summed in double, in order. */
ZDIST_EXPORT double zdist_combiner_scale(zdist_combiner_t combiner, const float *weights, int64_t lo,
                                         int64_t hi);

/* A rank-2 SparseTensor of ids [n, ?] in CSR form (TF's sp_ids with its
   sp_weights: same indices): row i's entries are [row_offsets[i],
   row_offsets[i + 1]), in order. */
typedef struct {
    int64_t n;                  /* rows (d_0, typically the batch size) */
    const int64_t *row_offsets; /* [n + 1], row_offsets[0] == 0, non-decreasing */
    const int64_t *ids;         /* [row_offsets[n]] */
    const float *weights;       /* [row_offsets[n]], or NULL: every weight 1 */
} zdist_sparse_ids_t;

/* No default_id: an empty row of the safe lookup is zeros. */
#define ZDIST_EMBEDDING_NO_DEFAULT (-1)

typedef struct {
    zdist_combiner_t combiner;
    /* safe_embedding_lookup_sparse: ids < 0 are pruned with their weights,
       and so (combiner != sum, as TF) are entries with weight <= 0; a row
       left empty takes default_id with weight 1 (or is zeros with
       ZDIST_EMBEDDING_NO_DEFAULT). Without safe, an id < 0 is an error,
       as TF's gather. */
    bool safe;
    int64_t default_id; /* safe only: ZDIST_EMBEDDING_NO_DEFAULT or 0..vocab-1 */
    /* The ps lookup only: how an id finds its shard. By default TF's
       embedding_lookup does it (partition_strategy DIV, the zero value, or
       MOD; zdist_partition_assign_ids): from the shards' sizes alone, so a
       layout whose shards are not of the strategy's sizes fails with TF's
       gather error when an id falls past its shard. by_offsets: zdist's own
       lookup by the layout's shard offsets instead (zdist_layout_lookup),
       which answers for any layout and ignores partition_strategy. For a
       layout zdist_placement_place made (a Div split), DIV and by_offsets
       agree. */
    zdist_partition_strategy_t partition_strategy;
    bool by_offsets;
} zdist_embedding_options_t;

/* tf.nn.embedding_lookup_sparse(params, sp_ids, sp_weights, combiner) on a
   local float32 table params[vocab, dim] (row-major): out[n, dim] (the
   caller's). Ids must be in 0..vocab-1: otherwise -EINVAL naming the entry
   and the id, nothing written. */
ZDIST_EXPORT int zdist_embedding_lookup_sparse(const float *params, int64_t vocab, int64_t dim,
                                               const zdist_sparse_ids_t *sp, zdist_combiner_t combiner,
                                               float *out, zdist_error_t *err);
/* tf.nn.safe_embedding_lookup_sparse(params, sparse_ids, sparse_weights,
   combiner, default_id): see zdist_embedding_options_t.safe. An id >= vocab
   is still -EINVAL. */
ZDIST_EXPORT int zdist_embedding_safe_lookup_sparse(const float *params, int64_t vocab, int64_t dim,
                                                    const zdist_sparse_ids_t *sp, zdist_combiner_t combiner,
                                                    int64_t default_id, float *out, zdist_error_t *err);

/* tf.compat.v1.nn.embedding_lookup(params, ids, partition_strategy) over
   num_shards local float32 shards params[s] of rows[s] x dim (row-major):
   out[n, dim] (the caller's) gets each id's row, the shard and row chosen
   by zdist_partition_assign_ids (zdist/partition.h): MOD (TF 1's default)
   or DIV. Errors are TF's texts from there (-EINVAL; out then undefined). */
ZDIST_EXPORT int zdist_embedding_lookup(const float *const *params, const int64_t *rows, int num_shards,
                                        int64_t dim, const int64_t *ids, int64_t n,
                                        zdist_partition_strategy_t strategy, float *out, zdist_error_t *err);

/* Either lookup over a table partitioned along rows and placed on ps tasks
   (zdist/partition.h's layout; every shard a float32 [rows, dim] shard of
   layout->name), each id's shard and row found as opts says (TF's
   partition_strategy, default DIV, or the layout's offsets): the distinct
   ids of each shard holding any are pulled with one pull_rows per such
   shard, all sent at once through
   clients[shard.ps] (clients[num_clients], one per ps task, the caller's
   thread's), then combined as above. Ids outside the layout's rows are
   -EINVAL before anything is sent, and so is TF's error for an id whose
   row lies past its shard (zdist_partition_assign_ids, counting distinct
   ids as embedding_lookup_sparse's unique does); a pull that fails returns its errno
   with err naming the shard, its ps task and the psd's message; out is
   then undefined. */
ZDIST_EXPORT int zdist_embedding_lookup_sparse_ps(zdist_ps_client_t *const *clients, int num_clients,
                                                  const zdist_layout_t *layout, const zdist_sparse_ids_t *sp,
                                                  const zdist_embedding_options_t *opts, float *out,
                                                  zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
