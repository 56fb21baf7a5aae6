/* zdist mirror: mirrored variables on the replica runtime — a float32 copy
   of every variable per replica (one_device, mirrored, tpu,
   multi_worker_mirrored) or one central copy (central_storage), each
   replica's gradients reduced then applied so that every copy stays bitwise
   identical, locally and across workers over a zdist/collective.h ring. */
#ifndef ZDIST_MIRROR_H
#define ZDIST_MIRROR_H

#include <stdbool.h>
#include <stdint.h>

#include "zdist/cluster.h"
#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/optim.h"
#include "zdist/replicas.h"
#include "zdist/step.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Replicas a mirror serves (its reductions use stack arrays). */
#define ZDIST_MIRROR_MAX_REPLICAS 64

/* One variable: rows = dim 0 (1 for a scalar), width = elements per row,
   n = rows * width. name is borrowed. */
typedef struct {
    const char *name;
    zdist_shape_t shape;
    zdist_var_sync_t synchronization;
    zdist_var_agg_t aggregation;
    bool trainable;
    int64_t rows, width, n;
} zdist_mirror_var_t;

/* Fills buf (vars[var].n floats) with variable var's initial value: 0 or a
   negative errno with err. */
typedef int (*zdist_mirror_init_fn)(void *arg, int var, float *buf, zdist_error_t *err);

typedef struct zdist_comm_t zdist_comm_t;
typedef struct zdist_mirror_t zdist_mirror_t;

/* The copies of vars[nvars] (borrowed, must outlive the mirror), every copy
   from init's value (MirroredVariable's initial broadcast), optimizer slots
   for the trainable ones. kind: ONE_DEVICE (1 replica), MIRRORED,
   CENTRAL_STORAGE, MULTI_WORKER_MIRRORED or TPU; the replicas are rt's
   (borrowed, must outlive the mirror), whose barrier the collectives meet
   at. NULL with err (-EINVAL, -ENOMEM or init's error). */
ZDIST_EXPORT zdist_mirror_t *zdist_mirror_new(zdist_strategy_t kind, zdist_replicas_t *rt,
                                              const zdist_mirror_var_t *vars, int nvars,
                                              const zdist_optim_config_t *optim, zdist_mirror_init_fn init,
                                              void *init_arg, zdist_error_t *err);
/* NULL-safe; nulls *self_p. */
ZDIST_EXPORT void zdist_mirror_destroy(zdist_mirror_t **self_p);

/* multi_worker_mirrored: comm (borrowed, connected; NULL detaches) joins
   this worker's replicas to num_workers workers. Every reduction (apply,
   all_reduce, all_gather, ON_WRITE assign) then also runs across workers
   with a deadline of timeout_ms; a failure fails the step on every local
   replica before any copy changed, and zdist_mirror_last_error says why.
   merge_call and cross-replica reads of ON_READ variables stay local. */
ZDIST_EXPORT void zdist_mirror_set_comm(zdist_mirror_t *self, zdist_comm_t *comm, int num_workers,
                                        int64_t timeout_ms);
/* The last cross-worker failure's text ("" when none); borrowed. */
ZDIST_EXPORT const char *zdist_mirror_last_error(const zdist_mirror_t *self);

/* Replica-context operations, called from replica `replica`'s thread
   during a zdist_replicas_run; var and ids are checked by the caller (in
   range, ids unique). Collectives (apply, ON_WRITE assign, all_reduce,
   all_gather, merge_call) are called by every replica in the same order;
   they return 0 or a negative errno: -EINVAL when the replicas' calls
   disagree, -EPIPE when a replica has left the run (zdist/replicas.h),
   the ring's error across workers. */
/* *ret: this replica's copy (the central one under central_storage for
   ON_WRITE variables), valid until the next collective. */
ZDIST_EXPORT int zdist_mirror_read(zdist_mirror_t *self, int replica, int var, const float **ret);
/* Rows ids[n] of the copy into out [n, width]. */
ZDIST_EXPORT int zdist_mirror_read_rows(zdist_mirror_t *self, int replica, int var, const int64_t *ids, int64_t n,
                                        float *out);
/* The replicas' gradients SUM-reduced (in replica order, the same sum on
   every copy) and applied with the optimizer. */
ZDIST_EXPORT int zdist_mirror_apply(zdist_mirror_t *self, int replica, const zdist_grad_t *grads, int n);
/* ON_READ: this replica's copy, locally. ON_WRITE: every replica's values
   aggregated by the variable's aggregation, written (add: added) to every
   copy. */
ZDIST_EXPORT int zdist_mirror_assign(zdist_mirror_t *self, int replica, int var, const float *values, bool add);
ZDIST_EXPORT int zdist_mirror_all_reduce(zdist_mirror_t *self, int replica, zdist_reduce_op_t op,
                                         float *const *bufs, const int64_t *lens, int n);
/* *ret (the mirror's buffer, valid until this replica's next call) and
   *ret_shape: every replica's `in` concatenated along axis. */
ZDIST_EXPORT int zdist_mirror_all_gather(zdist_mirror_t *self, int replica, const float *in,
                                         const zdist_shape_t *shape, int axis, const float **ret,
                                         zdist_shape_t *ret_shape);
/* fn(args of every replica, n) once, on replica 0's thread; its return to all. */
ZDIST_EXPORT int zdist_mirror_merge_call(zdist_mirror_t *self, int replica, zdist_merge_fn fn, void *arg);
/* Replica `replica` fails the run's later collectives (copies would diverge). */
ZDIST_EXPORT void zdist_mirror_abort(zdist_mirror_t *self, int replica);

/* Outside runs. Cross-replica read: ON_READ variables aggregated by their
   aggregation, ON_WRITE ones the primary copy, into out (var's n floats). */
ZDIST_EXPORT int zdist_mirror_read_cross_replica(zdist_mirror_t *self, int var, float *out, zdist_error_t *err);
/* Replica r's copy of var (the one copy under central storage); NULL out of range. */
ZDIST_EXPORT const float *zdist_mirror_copy(const zdist_mirror_t *self, int replica, int var);
/* Checkpoint state: copy 0's values (zdist_mirror_copy), its slots and the
   optimizer's apply count (Keras optimizer.iterations); set_state writes
   every copy. slot: NULL for a non-trainable variable or out of range. */
ZDIST_EXPORT int zdist_mirror_num_slots(const zdist_mirror_t *self);
ZDIST_EXPORT int64_t zdist_mirror_iterations(const zdist_mirror_t *self);
ZDIST_EXPORT const float *zdist_mirror_slot(const zdist_mirror_t *self, int var, int slot);
/* -EINVAL for a var out of range. slots may be NULL (values only). */
ZDIST_EXPORT int zdist_mirror_set_state(zdist_mirror_t *self, int var, const float *values,
                                        const float *const *slots);
ZDIST_EXPORT void zdist_mirror_set_iterations(zdist_mirror_t *self, int64_t iterations);

#ifdef __cplusplus
}
#endif

#endif
