/* libzdist-private: the prepared entries of a sparse embedding lookup, shared by the local and the ps
 * lookups. */
#ifndef ZDIST_EMBEDDING_PRIVATE_H
#define ZDIST_EMBEDDING_PRIVATE_H

#include "zdist/embedding.h"

/* The entries that take part, after a safe lookup's pruning and default
   fill: row i's are [offsets[i], offsets[i + 1]). Weights are NULL when the
   input had none and nothing was filled (every weight 1). */
typedef struct {
    int64_t n, m;
    int64_t *offsets; /* [n + 1] */
    int64_t *ids;     /* [m] */
    float *weights;   /* [m] or NULL */
} zdist_emb_plan_t;

/* Checks sp (and opts, vocab) and builds the plan; -EINVAL naming the
   field, -ENOMEM. vocab < 0: ids are checked against nothing above. */
int zdist_emb_plan_(const zdist_sparse_ids_t *sp, const zdist_embedding_options_t *opts, int64_t vocab,
                    zdist_emb_plan_t *ret, zdist_error_t *err);
void zdist_emb_plan_free_(zdist_emb_plan_t *plan);
/* out[n, dim] from rows[k] (the row of entry k, dim floats) by the combiner,
   TF's order of operations: weighted rows summed in float32, then divided
   (div_no_nan) by the float32 weight sum or its square root. */
void zdist_emb_combine_(const zdist_emb_plan_t *plan, zdist_combiner_t combiner, const float *const *rows,
                        int64_t dim, float *out);

#endif
