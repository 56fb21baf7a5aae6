/* worker_strategy: the strategy backend a replica context calls into — where variables live, how replicas meet. */
#ifndef ZDIST_STRATEGY_H_GUARD
#define ZDIST_STRATEGY_H_GUARD

#include <stdbool.h>
#include <stdint.h>

#include "zdist/optim.h"
#include "worker_vars.h"
#include "zdist/cluster.h"
#include "zdist/error.h"
#include "zdist/mirror.h"
#include "zdist/step.h"

/* Replicas one worker may run: the local backend's bound (its reductions use stack arrays). */
#define WORKER_MAX_REPLICAS ZDIST_MIRROR_MAX_REPLICAS

/* A replica context (worker_trainer) does the strategy-independent work —
   id deduplication, outputs, scratch, argument checks — and calls a backend
   for the rest. One backend per strategy family:
     local  (zdist/mirror.h, adapted in worker_trainer.c): one_device, mirrored (a copy per replica thread,
            in-process all-reduce, every copy applies the same update) and
            central_storage (one copy, the reduced update applied once);
            multi_worker_mirrored is the mirrored backend given a ring
            communicator: each reduction runs locally, then across workers;
     psd    (worker_psd.c): parameter_server (reads are pulls, applies are
            pushes).
   Every function takes the calling replica's index; collectives are called
   by all replicas in the same order. They return 0 or a negative errno; a
   replica released because another left the step gets -EPIPE (the local
   backend: the replica runtime's barrier) or -ECANCELED (after `abort`). */

typedef struct worker_backend_t worker_backend_t;

typedef struct {
    const char *name;
    /* Whole variable: this replica's copy (ON_READ variables always). */
    int (*read)(worker_backend_t *be, int replica, int var, const float **ret);
    /* Rows by unique, in-range id into out [n, width]. */
    int (*read_rows)(worker_backend_t *be, int replica, int var, const int64_t *ids, int64_t n, float *out);
    /* Collective: reduce (SUM) the replicas' gradients and apply them. */
    int (*apply)(worker_backend_t *be, int replica, const zdist_grad_t *grads, int n);
    /* Collective for ON_WRITE variables, local for ON_READ ones. */
    int (*assign)(worker_backend_t *be, int replica, int var, const float *values, bool add);
    int (*all_reduce)(worker_backend_t *be, int replica, zdist_reduce_op_t op, float *const *bufs,
                      const int64_t *lens, int n);
    int (*all_gather)(worker_backend_t *be, int replica, const float *in, const zdist_shape_t *shape,
                      int axis, const float **ret, zdist_shape_t *ret_shape);
    int (*merge_call)(worker_backend_t *be, int replica, zdist_merge_fn fn, void *arg);
    /* Cross-replica read (outside steps): ON_READ variables aggregated by
       their aggregation, ON_WRITE ones the primary copy. out has var->n. */
    int (*read_cross_replica)(worker_backend_t *be, int var, float *out, zdist_error_t *err);
    /* Releases every replica blocked in a collective (-ECANCELED). */
    void (*abort)(worker_backend_t *be);
    void (*destroy)(worker_backend_t **be_p);
    /* Optional: read_rows of n variables in one exchange (ids[i]: counts[i]
       > 0 unique, in-range ids of vars[i], rows into outs[i]); NULL: the
       trainer calls read_rows once per variable. */
    int (*read_rows_many)(worker_backend_t *be, int replica, int n, const int *vars, const int64_t *const *ids,
                          const int64_t *counts, float *const *outs);
} worker_backend_ops_t;

struct worker_backend_t {
    const worker_backend_ops_t *ops;
};

/* The local backend (worker_trainer.c, on libzdist's zdist/mirror.h):
   made by the trainer for one_device, mirrored, central_storage, tpu and
   multi_worker_mirrored over its replica runtime. */
/* Test hook: replica r's copy of var (the one copy under central storage). */
const float *worker_local_copy(worker_backend_t *be, int replica, int var);
bool worker_local_is(const worker_backend_t *be);

/* multi_worker_mirrored: comm (borrowed, connected; NULL detaches) joins
   this worker's replicas to num_workers workers. Every reduction (apply,
   all_reduce, all_gather, ON_WRITE assign) then also runs across workers
   with a deadline of timeout_ms; a failure fails the step on every local
   replica before any copy changed, and worker_local_last_error says why.
   merge_call and cross-replica reads of ON_READ variables stay local. */
void worker_local_set_comm(worker_backend_t *be, zdist_comm_t *comm, int num_workers, int64_t timeout_ms);
/* The last collective failure's text ("" when none). */
const char *worker_local_last_error(worker_backend_t *be);

/* Checkpoint state: copy 0's values come from the read op; slots and the
   optimizer's apply count from these. set_state writes every copy. */
int worker_local_num_slots(const worker_backend_t *be);
int64_t worker_local_iterations(const worker_backend_t *be);
/* NULL for a non-trainable variable (no slots) or out of range. */
const float *worker_local_slot(worker_backend_t *be, int var, int slot);
int worker_local_set_state(worker_backend_t *be, int var, const float *values, const float *const *slots);
void worker_local_set_iterations(worker_backend_t *be, int64_t iterations);

#endif
