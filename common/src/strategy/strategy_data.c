/* zdist strategy: distribute_datasets_from_function — a C dataset function
   called once per input pipeline, its per-replica batches passed on as they
   are (no rebatching, no sharding). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/strategy.h"

struct zdist_strategy_dist_dataset_t {
    int replicas;
    int pipelines;
    zdist_input_replication_t mode;
    zdist_input_context_t **ctxs;   /* [pipelines]: alive as long as the datasets */
    zdist_strategy_dataset_t *sets; /* [pipelines] */
    bool *ended;                    /* [pipelines] */
    zdist_tensor_t *values;         /* [replicas]: the current step */
    zdist_tensor_t *last;           /* [replicas]: each replica's last batch (shape of its empty ones) */
    void **bufs;  /* [replicas]: the step's batches, copied (a pipeline's view lasts one next) */
    size_t *caps; /* [replicas] */
};

void
zdist_strategy_dist_dataset_destroy(zdist_strategy_dist_dataset_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_strategy_dist_dataset_t *self = *self_p;
    for (int p = 0; p < self->pipelines; p++) {
        if (self->sets && self->sets[p].destroy)
            self->sets[p].destroy(self->sets[p].state);
        if (self->ctxs)
            zdist_input_context_destroy(&self->ctxs[p]);
    }
    free(self->ctxs);
    free(self->sets);
    free(self->ended);
    free(self->values);
    free(self->last);
    for (int r = 0; self->bufs && r < self->replicas; r++)
        free(self->bufs[r]);
    free(self->bufs);
    free(self->caps);
    free(self);
    *self_p = NULL;
}

int
zdist_strategy_distribute_datasets_from_function(zdist_strategy_object_t *strategy,
                                                 zdist_strategy_dataset_fn fn, void *arg,
                                                 zdist_input_replication_t mode,
                                                 zdist_strategy_dist_dataset_t **ret, zdist_error_t *err)
{
    if (!strategy || !fn || !ret)
        return zdist_error_set(err, -EINVAL,
                               "distribute_datasets_from_function: strategy, dataset_fn and ret are "
                               "required");
    if (mode != ZDIST_INPUT_PER_WORKER && mode != ZDIST_INPUT_PER_REPLICA)
        return zdist_error_set(
            err, -EINVAL,
            "distribute_datasets_from_function: replication mode %d is unknown; use PER_WORKER "
            "or PER_REPLICA",
            (int) mode);
    if (mode == ZDIST_INPUT_PER_REPLICA && zdist_strategy_kind(strategy) != ZDIST_STRATEGY_MIRRORED)
        return zdist_error_set(err, -ENOTSUP,
                               "InputReplicationMode.PER_REPLICA is only supported with "
                               "tf.distribute.MirroredStrategy, not %s",
                               zdist_strategy_class_name(strategy));
    /* R: every worker's replicas; this process reads one pipeline per
       worker (PER_WORKER) for its local replicas */
    int R = zdist_strategy_num_replicas_in_sync(strategy), workers = 1, worker_index = 0, local = R;
    zdist_strategy_worker_place(strategy, &workers, &worker_index, &local);
    zdist_strategy_dist_dataset_t *self = calloc(1, sizeof *self);
    if (!self)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    self->replicas = local;
    self->mode = mode;
    self->pipelines = mode == ZDIST_INPUT_PER_REPLICA ? R : 1;
    self->ctxs = calloc((size_t) self->pipelines, sizeof *self->ctxs);
    self->sets = calloc((size_t) self->pipelines, sizeof *self->sets);
    self->ended = calloc((size_t) self->pipelines, sizeof *self->ended);
    self->values = calloc((size_t) local, sizeof *self->values);
    self->last = calloc((size_t) local, sizeof *self->last);
    self->bufs = calloc((size_t) local, sizeof *self->bufs);
    self->caps = calloc((size_t) local, sizeof *self->caps);
    if (!self->ctxs || !self->sets || !self->ended || !self->values || !self->last || !self->bufs ||
        !self->caps) {
        zdist_strategy_dist_dataset_destroy(&self);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    for (int p = 0; p < self->pipelines; p++) {
        self->ctxs[p] = mode == ZDIST_INPUT_PER_REPLICA
                            ? zdist_input_context_new(R, p, R, err)
                            : zdist_input_context_new(workers, worker_index, R, err);
        if (!self->ctxs[p]) {
            zdist_strategy_dist_dataset_destroy(&self);
            return err && err->code < 0 ? err->code : -ENOMEM;
        }
        zdist_strategy_dataset_t ds = {0};
        int rc = fn(self->ctxs[p], arg, &ds, err);
        if (rc == 0 && !ds.next)
            rc = zdist_error_set(err, -EINVAL,
                                 "dataset_fn for input pipeline %d returned a dataset without next", p);
        if (rc < 0) {
            if (ds.destroy)
                ds.destroy(ds.state);
            zdist_strategy_dist_dataset_destroy(&self);
            return rc;
        }
        self->sets[p] = ds;
    }
    *ret = self;
    return 0;
}

int
zdist_strategy_dist_dataset_next(zdist_strategy_dist_dataset_t *self, const zdist_tensor_t **ret_values,
                                 zdist_error_t *err)
{
    if (!self || !ret_values)
        return zdist_error_set(err, -EINVAL, "dist_dataset_next: dataset and ret_values are required");
    int got = 0;
    for (int r = 0; r < self->replicas; r++) {
        int p = self->mode == ZDIST_INPUT_PER_REPLICA ? r : 0;
        zdist_tensor_t *v = &self->values[r];
        if (!self->ended[p]) {
            zdist_tensor_t b = {0};
            int rc = self->sets[p].next(self->sets[p].state, &b, err);
            if (rc < 0)
                return rc;
            if (rc > 0) {
                if (b.nbytes > self->caps[r]) {
                    void *nb = realloc(self->bufs[r], b.nbytes);
                    if (!nb)
                        return zdist_error_set(err, -ENOMEM, "out of memory");
                    self->bufs[r] = nb;
                    self->caps[r] = b.nbytes;
                }
                if (b.nbytes)
                    memcpy(self->bufs[r], b.data, b.nbytes);
                b.data = b.nbytes ? self->bufs[r] : NULL;
                *v = b;
                self->last[r] = b;
                got++;
                continue;
            }
            self->ended[p] = true;
        }
        /* No data left for this replica: an empty batch shaped as its last
           one (a rank-1 float32 [0] if it never had one). */
        zdist_tensor_t e = self->last[r];
        if (e.shape.rank == 0 && e.dtype == ZDIST_DTYPE_INVALID) {
            e.dtype = ZDIST_DTYPE_FLOAT32;
            e.shape.rank = 1;
        }
        if (e.shape.rank > 0)
            e.shape.dims[0] = 0;
        e.data = NULL;
        e.nbytes = 0;
        *v = e;
    }
    if (got == 0)
        return 0;
    *ret_values = self->values;
    return 1;
}
