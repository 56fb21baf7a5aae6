/* strategy_internal: what the Strategy object's files share — the object,
   its variables and replica contexts, the calling thread's context, and
   the checks and collectives more than one file calls. Not installed. */
#ifndef ZDIST_STRATEGY_INTERNAL_H
#define ZDIST_STRATEGY_INTERNAL_H

#include "zdist/strategy.h"

#include "zdist/collective.h"
#include "zdist/job.h"
#include "zdist/model_spec.h"
#include "zdist/replicas.h"

#define STRATEGY_MAX_REPLICAS 256

struct zdist_strategy_var_t {
    zdist_strategy_object_t *strategy;
    char *name;
    zdist_dtype_t dtype;
    zdist_shape_t shape;
    size_t nbytes;
    zdist_var_sync_t sync;
    zdist_var_agg_t agg;
    int ncopies;
    zdist_tensor_t *copies;
    const zdist_strategy_var_t *anchor;
    struct strategy_ps_var_t *ps; /* parameter_server: where it lives (strategy_ps.h) */
    zdist_strategy_var_t *next;
};

struct zdist_strategy_replica_t {
    zdist_strategy_object_t *strategy;
    int id;
    zdist_strategy_fn fn;
    void *arg;
    zdist_tensor_t ret;
    int rc;
    zdist_error_t err;
};

struct zdist_strategy_object_t {
    zdist_strategy_t kind;
    int ldev; /* tpu: logical devices per replica; 1 otherwise */
    zdist_replicas_t *rt; /* run's replica threads, their barrier, the logical devices (not parameter_server) */
    int replicas; /* this process's (local) replicas: run's threads */
    int workers;  /* multi_worker_mirrored: the ring's ranks; 1 otherwise */
    int rank;
    int total; /* num_replicas_in_sync = workers x replicas */
    zdist_comm_t *comm;
    zdist_comm_t *own_comm; /* the ring formed from spec.cluster (comm then), destroyed with the strategy */
    struct strategy_ps_t *ps; /* parameter_server: the psds and the ClusterCoordinator (strategy_ps.h) */
    zdist_strategy_var_t *vars;
    zdist_strategy_var_t **vars_tail;
    /* run's collectives */
    zdist_tensor_t *slots; /* [replicas]: each replica's operand */
    void **uargs;          /* [replicas]: each replica's update argument */
    zdist_tensor_t merged; /* merge_call's result, copied by every replica */
    int coll_rc;
    zdist_error_t coll_err;
    int running; /* a run is under way (its replicas share the fields above) */
};

/* The calling thread's mode (distribute_lib's _ThreadMode): the current
   strategy (NULL: default), how many times its scope is entered, the
   replica context when on one of run's threads, an open
   colocate_vars_with, and a logical device thread's index (>= 1; 0
   elsewhere). Defined in strategy.c. */
extern _Thread_local zdist_strategy_object_t *strategy_tl_strategy;
extern _Thread_local int strategy_tl_depth;
extern _Thread_local zdist_strategy_replica_t *strategy_tl_replica;
extern _Thread_local const zdist_strategy_var_t *strategy_tl_anchor;
extern _Thread_local zdist_strategy_object_t *strategy_tl_anchor_strategy;
extern _Thread_local int strategy_tl_device;

/* Context checks (strategy.c), with TensorFlow's texts: 0 or -EPERM.
   msg NULL: distribute_lib's "requires cross-replica context". */
int strategy_require_cross(const zdist_strategy_object_t *self, const char *msg, zdist_error_t *err);
int strategy_require_scope(const zdist_strategy_object_t *self, zdist_error_t *err);
int strategy_require_replica(const zdist_strategy_replica_t *ctx, zdist_error_t *err);

/* Variables (strategy_var.c). */
void strategy_var_free(zdist_strategy_var_t *v);
/* -EINVAL unless var was created under self's scope. */
int strategy_check_own_var(const zdist_strategy_object_t *self, const zdist_strategy_var_t *var,
                           zdist_error_t *err);

/* Every local replica meets here (strategy_run.c); -EPIPE when one has
   returned from the step function and so never will. */
int strategy_barrier(zdist_strategy_replica_t *ctx, const char *what, zdist_error_t *err);

/* multi_worker_mirrored (strategy_mwm.c). The ring from spec->cluster. */
int strategy_ring_from_cluster(zdist_strategy_object_t *self, const zdist_strategy_spec_t *spec,
                               zdist_error_t *err);
/* -ENOTSUP unless float32, the ring's dtype. */
int strategy_ring_dtype(const char *what, zdist_dtype_t dtype, zdist_error_t *err);
/* reduce and gather of values[n], this worker's replicas', over every worker;
   *ret's data is the caller's. */
int strategy_mw_reduce(zdist_strategy_object_t *s, zdist_reduce_op_t op, const zdist_tensor_t *values, int n,
                       const int *axes, int num_axes, zdist_tensor_t *ret, zdist_error_t *err);
int strategy_mw_gather(zdist_strategy_object_t *s, const zdist_tensor_t *values, int n, int axis,
                       zdist_tensor_t *ret, zdist_error_t *err);
/* The one value an ON_WRITE variable takes from every replica's write
   (s->slots), over every worker. */
int strategy_mw_combine_write(zdist_strategy_object_t *s, const zdist_strategy_var_t *var, zdist_tensor_t *ret,
                              zdist_error_t *err);
int strategy_mw_batch_reduce_to(zdist_strategy_object_t *s, zdist_reduce_op_t op,
                                const zdist_reduce_pair_t *pairs, int n, zdist_error_t *err);

#endif
