/* zdist strategy: a tf.distribute.Strategy object (one_device, mirrored,
   central_storage, multi_worker_mirrored, parameter_server, tpu): scope, run or
   schedule, reduce, gather, datasets, extended. */
#ifndef ZDIST_STRATEGY_H
#define ZDIST_STRATEGY_H

#include <stdbool.h>
#include <stdint.h>

#include "zdist/cluster.h"
#include "zdist/coordinator.h"
#include "zdist/defs.h"
#include "zdist/distribute.h"
#include "zdist/error.h"
#include "zdist/input.h"
#include "zdist/step.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What this header is. A C program writes what a TensorFlow custom training
   loop writes:

       with strategy.scope():            zdist_strategy_scope_enter (s, &err);
           v = tf.Variable(...)            zdist_strategy_variable_new (s, &def, &v, &err);
                                           zdist_strategy_scope_exit (s);
       r = strategy.run(fn, args=(x,))   zdist_strategy_run (s, fn, arg, NULL, r, &err);
       strategy.reduce(SUM, r, axis=None) zdist_strategy_reduce (s, ZDIST_REDUCE_SUM, r, n, ZDIST_AXIS_NONE, ...);

   `run` calls fn once per replica, each on its own thread, in a replica
   context (zdist_strategy_replica_t: TF's ReplicaContext) whose collectives
   (all_reduce, all_gather, merge_call, variable writes, update) meet the
   other replicas' calls in the same order. Values follow zdist/distribute.h (a per-replica value
   is zdist_tensor_t values[num_replicas_in_sync], replica order).

   Strategies served: one_device (1 replica), mirrored (N replicas, a copy
   of each variable per replica), central_storage (N replicas, ON_WRITE
   variables held once, the replicas' writes aggregated then applied once)
   and multi_worker_mirrored (one strategy object per worker process, N
   local replicas each, the workers joined by a zdist/collective.h ring the
   caller connected, or that the strategy forms from the cluster's TF_CONFIG
   (spec.cluster): num_replicas_in_sync = workers x N, replica ids
   worker_index * N + local, a variable copy per local replica).

   tpu (TPUStrategy, as on CPU cores: spec.num_replicas R and
   spec.logical_devices_per_replica L): R synchronous replicas exactly as
   mirrored:R (a variable copy per replica, all_reduce, merge_call, reduce,
   datasets: the same code and the same results), plus L logical devices
   per replica, each its own thread, for model parallelism inside a
   replica: zdist_strategy_replica_run_on_logical_device. R x L must fit
   the process's cores unless spec.oversubscribe (the check a tpu job's
   worker makes). TF's TPU-only parts have no C counterpart here: no XLA
   (a step function is plain C, so experimental_split_to_logical_devices
   and experimental_replicate_to_logical_devices are the function handing
   each device its share), no cluster resolver or topology
   (DeviceAssignment is R x L threads), one worker only (a tpu job runs
   across workers on multi_worker_mirrored's ring; the object does not).

   parameter_server (ParameterServerStrategy with its ClusterCoordinator,
   spec.coordinator): one object on the coordinator's side, over
   zdist-worker and zdist-psd tasks. As in TensorFlow,

       strategy = ParameterServerStrategy(resolver)   spec {.kind = parameter_server, .coordinator = &opts}
       coordinator = ClusterCoordinator(strategy)       (made by zdist_strategy_new; zdist_strategy_coordinator)
       with strategy.scope(): v = tf.Variable(...)     zdist_strategy_variable_new: on the psds
       rv = coordinator.schedule(worker_fn)           zdist_strategy_schedule (s, steps, &rv, &err)
       coordinator.join()                             zdist_strategy_join
       loss = rv.fetch()                              zdist_strategy_fetch (s, rv, loss, &err)
       strategy.reduce(SUM, loss, axis=None)          zdist_strategy_reduce (s, SUM, loss, 1, ...)

   where worker_fn runs strategy.run(train_step, args=(next(iterator),))
   `steps` times on whichever worker is free (1 replica per worker:
   num_replicas_in_sync is 1, as TF's on CPU workers). A C function cannot
   travel to a worker, so train_step is the job's model's (zdist/step.h,
   built in or a plugin): the worker runs it in its replica context on its
   input pipeline of the job's dataset. zdist_strategy_run is refused
   (-ENOTSUP, saying so).

   Variables created under the scope live on the psds, placed as
   ParameterServerStrategyV2 places them and as the job's workers do: the
   job's strategy.partitioner (default MinSizePartitioner(256 KiB, number of
   ps)), Div rows over shards, one round-robin counter over every variable
   in creation order; under colocate_vars_with(anchor) unpartitioned on the
   anchor's ps task. They are the model's variables: when any were created
   before the first schedule, the workers create none (TF builds the model
   under strategy.scope()) and look theirs up by name and placement, so
   create every variable the job's model declares, with its name, dtype
   and shape, in its order (a missing one fails the first closure with the
   psd's NOT_FOUND); the strategy sets the job's optimizer on the psds.
   With none created, the workers create the model's variables from its
   initializers, as for a job. A variable that already exists on a psd (an
   earlier run's) is refused (-EEXIST): its psd remembers the steps applied
   to it. Variables cannot be created once closures were scheduled.
   variable_read pulls the shards; variable_assign (assign, assign_add,
   assign_sub) writes them; extended.update is refused (-ENOTSUP).

   Under multi_worker_mirrored every worker's program makes the same calls
   in the same order: reduce, gather, reduce_to, batch_reduce_to, reading an
   ON_READ SUM/MEAN variable across replicas, and every collective inside
   run are collectives over the ring, with the results of one worker
   holding every replica: float32 reductions go round the ring's
   all-reduce (each worker's replicas summed first); other dtypes, and
   gathers along an axis other than 0, send every replica's value to every
   worker, which combines them in replica order as zdist/distribute.h does
   (so a MEAN of integers is a float64, as distribute_lib.py's). A
   per-replica value there holds this worker's local replicas (as
   experimental_local_results), and merge_fn of merge_call gets the local
   replicas' values, as TensorFlow's; a reduce or gather it makes covers
   every worker. A replica
   write of an ON_WRITE variable sums (SUM, MEAN) every worker's replicas'
   values; ONLY_FIRST_REPLICA takes this worker's first replica's value, as
   values_util.apply_aggregation does (experimental_local_results()[0]).
   Replicas per worker must be the same on every worker.

   Contexts, as distribute_lib.py tracks them per thread: a thread starts in
   the default context; scope_enter puts it in the strategy's cross-replica
   context; run's threads are in a replica context, and a merge_call's
   merge_fn is back in the cross-replica one. Methods that need the
   cross-replica context (run, reduce, gather, reduce_to, batch_reduce_to,
   variable_new) fail in a replica context with TensorFlow's RuntimeError
   text (-EPERM), and inside
   another strategy's scope with TF's "Mixing different
   tf.distribute.Strategy objects: A is not B" (-EPERM). Replica methods
   called outside run fail with "Need to be inside `call_for_each_replica()`".

   Errors are negative errno with err (may be NULL) filled. Not thread-safe
   across caller threads: one thread drives a strategy (run's replica
   threads are the strategy's own). */

typedef struct zdist_strategy_object_t zdist_strategy_object_t;
typedef struct zdist_strategy_replica_t zdist_strategy_replica_t;
typedef struct zdist_strategy_var_t zdist_strategy_var_t;

typedef struct zdist_comm_t zdist_comm_t; /* zdist/collective.h */

typedef struct {
    zdist_strategy_t kind;
    /* mirrored, central_storage: replicas (>= 1; 0 means 1);
       one_device: 0 or 1; multi_worker_mirrored: this worker's replicas. */
    int num_replicas;
    /* multi_worker_mirrored only: this worker's place among num_workers
       (>= 1) and a connected ring communicator of num_workers ranks whose
       rank is worker_index (borrowed: it must outlive the strategy, and
       nothing else may use it meanwhile). */
    int num_workers;
    int worker_index;
    zdist_comm_t *comm;
    /* multi_worker_mirrored without comm: the cluster (zdist/cluster.h, e.g.
       zdist_cluster_from_env_or_file: TF_CONFIG) whose current task is this
       worker, as TFConfigClusterResolver gives MultiWorkerMirroredStrategy.
       zdist_strategy_new then forms the ring itself: num_workers and
       worker_index come from the cluster (chief + workers,
       zdist_cluster_id_in_cluster: the chief is rank 0, worker i rank i +
       chiefs), this rank binds its own task's address
       (zdist_cluster_bind_endpoint) and connects to the next task's
       (zdist_comm_new + zdist_comm_connect, the calls a zdist-worker's
       session makes); the strategy owns that ring. Borrowed for
       zdist_strategy_new only. The first collective (the first variable's
       broadcast) waits for every worker up to collective_timeout_ms. */
    const zdist_cluster_t *cluster;
    int64_t collective_timeout_ms; /* the ring's deadline per collective; 0: 30 s */
    /* parameter_server only: the ClusterCoordinator's options
       (zdist/coordinator.h): the job (strategy.type parameter_server; its
       model's train_step is the step function, its partitioner and
       optimizer the variables'), the workers' and the ps tasks' endpoints
       (ps required here: the strategy creates variables on them), the
       variable prefix ("JOB/": the variables' names on the psds). Copied
       by zdist_strategy_new. num_replicas: 0 or 1. */
    const zdist_coordinator_options_t *coordinator;
    /* tpu only (TPUStrategy; num_replicas its replicas): the logical
       devices of each replica (DeviceAssignment.num_cores_per_replica;
       0 means 1, at most ZDIST_MAX_LOGICAL_DEVICES), and oversubscribe,
       as a tpu job's strategy fields: num_replicas x
       logical_devices_per_replica must fit this process's cores
       (zdist_job_check_logical_devices) unless oversubscribe. */
    int logical_devices_per_replica;
    bool oversubscribe;
} zdist_strategy_spec_t;

/* "one_device", "mirrored", "mirrored:N", "central_storage",
   "central_storage:N" (also "tpu[:N]": L 1) -> spec; -EINVAL naming the text otherwise. */
ZDIST_EXPORT int zdist_strategy_spec_parse(const char *text, zdist_strategy_spec_t *ret, zdist_error_t *err);

/* tf.distribute.OneDeviceStrategy / MirroredStrategy /
   experimental.CentralStorageStrategy / MultiWorkerMirroredStrategy /
   TPUStrategy (its logical device threads started here; a bad R or L, or
   R x L beyond the cores without oversubscribe: -EINVAL naming both).
   parameter_server: its coordinator options checked (-EINVAL naming
   what is missing) and a ps client made per ps task; the workers get the
   job at the first schedule. -EINVAL for a bad replica count,
   or a multi_worker_mirrored spec without its comm or cluster or with
   worker_index outside num_workers, or a cluster that
   zdist_cluster_validate refuses for multi_worker_mirrored or whose task
   is not the chief or a worker; a ring that cannot bind or connect: its
   error.
   *ret written only on success. */
ZDIST_EXPORT int zdist_strategy_new(const zdist_strategy_spec_t *spec, zdist_strategy_object_t **ret,
                                    zdist_error_t *err);
/* Frees the strategy and every variable created under it. The strategy must
   not be in any thread's scope. NULL-safe, idempotent; nulls *self_p. */
ZDIST_EXPORT void zdist_strategy_destroy(zdist_strategy_object_t **self_p);

/* TF's class name: "OneDeviceStrategy", "MirroredStrategy",
   "CentralStorageStrategy", "MultiWorkerMirroredStrategy",
   "ParameterServerStrategy", "TPUStrategy" (the %s of TF's messages). */
ZDIST_EXPORT const char *zdist_strategy_class_name(const zdist_strategy_object_t *self);
ZDIST_EXPORT zdist_strategy_t zdist_strategy_kind(const zdist_strategy_object_t *self);
/* Strategy.num_replicas_in_sync (every worker's replicas). */
ZDIST_EXPORT int zdist_strategy_num_replicas_in_sync(const zdist_strategy_object_t *self);
/* This process's place: workers (1 but under multi_worker_mirrored), its
   index, and its local replicas — the length of every per-replica array
   this header takes or returns (num_replicas_in_sync for the local
   strategies). Any pointer may be NULL. */
ZDIST_EXPORT void zdist_strategy_worker_place(const zdist_strategy_object_t *self, int *ret_num_workers,
                                              int *ret_worker_index, int *ret_local_replicas);

/* with strategy.scope(): enter / exit on the calling thread. Re-entering
   the same strategy nests (TF's same-scope-again count). Entering while
   another strategy is current: TF's "Mixing different
   tf.distribute.Strategy objects: A is not B"; from a replica context:
   TF's "Method requires being in cross-replica context, use
   get_replica_context().merge_call()". exit without enter: -EINVAL. */
ZDIST_EXPORT int zdist_strategy_scope_enter(zdist_strategy_object_t *self, zdist_error_t *err);
ZDIST_EXPORT int zdist_strategy_scope_exit(zdist_strategy_object_t *self, zdist_error_t *err);

/* tf.distribute.get_strategy(): the strategy current on this thread (its
   scope, or the replica context of its run), NULL for the default one. */
ZDIST_EXPORT zdist_strategy_object_t *zdist_strategy_current(void);
/* tf.distribute.in_cross_replica_context(). */
ZDIST_EXPORT bool zdist_strategy_in_cross_replica_context(void);
/* tf.distribute.get_replica_context(): run's replica context on its
   threads, NULL elsewhere (in TF's default context too: the default
   ReplicaContext has no C counterpart). */
ZDIST_EXPORT zdist_strategy_replica_t *zdist_strategy_get_replica_context(void);

/* ------------------------------------------------------------------------ */
/* Variables                                                                  */

typedef struct {
    const char *name; /* copied */
    zdist_dtype_t dtype; /* float32, float64, int32, int64 */
    zdist_shape_t shape;
    const void *initial_value; /* shape x dtype bytes, copied; NULL: zeros */
    zdist_var_sync_t synchronization;
    zdist_var_agg_t aggregation;
} zdist_strategy_var_def_t;

/* tf.Variable(...) under strategy.scope(): the variable follows the
   strategy's placement — one copy (one_device; central_storage ON_WRITE),
   a copy per replica (mirrored; central_storage ON_READ). Must be called
   in this strategy's cross-replica context (its scope entered on this
   thread): otherwise TF's 'Need to be inside "with strategy.scope()" for
   MirroredStrategy' (-EPERM) — a variable created outside every scope is a
   plain tf.Variable, which this header does not model. Inside
   colocate_vars_with(anchor) the variable is the anchor's companion.
   Under multi_worker_mirrored every worker creates its variables in the
   same order and each starts from worker 0's initial value (broadcast over
   the ring, as TF's). The strategy owns it. */
ZDIST_EXPORT int zdist_strategy_variable_new(zdist_strategy_object_t *self, const zdist_strategy_var_def_t *def,
                                             zdist_strategy_var_t **ret, zdist_error_t *err);
ZDIST_EXPORT const char *zdist_strategy_variable_name(const zdist_strategy_var_t *var);
/* Copies held (1 or num_replicas_in_sync). */
ZDIST_EXPORT int zdist_strategy_variable_num_copies(const zdist_strategy_var_t *var);
/* The copy `i` (a view into the variable; valid while the strategy lives).
   Under parameter_server the one copy is this process's: the initial value,
   then what zdist_strategy_variable_read last pulled from the psds. */
ZDIST_EXPORT const zdist_tensor_t *zdist_strategy_variable_copy(const zdist_strategy_var_t *var, int i);
/* parameter_server: the ps task of each of its shards into
   ret_tasks[max] (may be NULL), in row order; returns the number of
   shards (1 when unpartitioned). 0 under the other strategies. */
ZDIST_EXPORT int zdist_strategy_variable_ps_tasks(const zdist_strategy_var_t *var, int *ret_tasks, int max);
/* The anchor of colocate_vars_with it was created under, or NULL. */
ZDIST_EXPORT const zdist_strategy_var_t *zdist_strategy_variable_colocated_with(const zdist_strategy_var_t *var);
/* A read in cross-replica context into ret (caller's buffer of the
   variable's shape and dtype): zdist_distribute_var_read_cross_replica. */
ZDIST_EXPORT int zdist_strategy_variable_read(zdist_strategy_object_t *self, const zdist_strategy_var_t *var,
                                              zdist_tensor_t *ret, zdist_error_t *err);
/* variable.assign / assign_add / assign_sub in cross-replica context:
   zdist_distribute_var_write_cross_replica. */
ZDIST_EXPORT int zdist_strategy_variable_assign(zdist_strategy_object_t *self, zdist_strategy_var_t *var,
                                                zdist_var_op_t op, const zdist_tensor_t *value, zdist_error_t *err);

/* ------------------------------------------------------------------------ */
/* run and the replica context                                               */

/* A step function: runs on replica `zdist_strategy_replica_id(ctx)`'s
   thread. It may fill *ret_value (zeroed before the call) with a tensor
   whose data it malloc'd: the caller of run owns it then. Returns 0 or a
   negative errno (err, this replica's own, may be filled). */
typedef int (*zdist_strategy_fn)(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret_value,
                                 zdist_error_t *err);

/* Strategy.run(fn, args): fn on every replica, in replica order of ids,
   concurrently; ret_values[local replicas] (may be NULL) gets the
   per-replica results (free each .data with free(), or use
   zdist_strategy_values_free). args_per_replica (may be NULL) is
   experimental_distribute_values_from_function's output or a distributed
   dataset's step: replica r gets args_per_replica[r] as `arg` when given,
   `arg` otherwise (pass NULL for one or the other).
   A replica that returns while others wait for it in a collective makes
   those collectives fail (-EPIPE naming it) instead of hanging. The first
   failing replica's error (lowest id) is returned; on failure nothing is
   left in ret_values. Requires cross-replica or the default context. */
ZDIST_EXPORT int zdist_strategy_run(zdist_strategy_object_t *self, zdist_strategy_fn fn, void *arg,
                                    void *const *args_per_replica, zdist_tensor_t *ret_values, zdist_error_t *err);
/* free() of each values[i].data, then zeroes them. */
ZDIST_EXPORT void zdist_strategy_values_free(zdist_tensor_t *values, int n);

/* ReplicaContext.replica_id_in_sync_group / num_replicas_in_sync / strategy. */
ZDIST_EXPORT int zdist_strategy_replica_id(const zdist_strategy_replica_t *ctx);
ZDIST_EXPORT int zdist_strategy_replica_num_replicas_in_sync(const zdist_strategy_replica_t *ctx);
ZDIST_EXPORT zdist_strategy_object_t *zdist_strategy_replica_strategy(const zdist_strategy_replica_t *ctx);

/* TPUStrategy's model parallelism inside a replica (the C form of
   experimental_assign_to_logical_device / experimental_split_to_logical_
   devices: a C step has no graph to annotate, so it hands the work itself
   to a logical device). Logical device 0 of a replica is the replica's own
   thread (run's); devices 1..L-1 are threads of that replica, started by
   zdist_strategy_new and kept for the strategy's life (no BLAS thread
   count is set on them: libzdist does not link OpenBLAS; a caller that
   does may call openblas_set_num_threads itself). */
typedef int (*zdist_strategy_device_fn)(zdist_strategy_replica_t *ctx, int device, void *arg, zdist_error_t *err);
/* L, the logical devices per replica: spec.logical_devices_per_replica
   under tpu (DeviceAssignment.num_cores_per_replica), 1 for every other
   strategy. */
ZDIST_EXPORT int zdist_strategy_num_logical_devices_per_replica(const zdist_strategy_object_t *self);
/* Runs fn(ctx, device, arg, err) on logical device `device` of the calling
   replica and returns its result (its err copied to err), the replica
   waiting meanwhile. fn runs in that replica's context: the replica
   methods it calls (all_reduce, read, assign, ...) count as the replica's
   own. To split work over the devices, call it once per device from the
   step function (one device runs at a time per call; give device d its
   share). Requires the replica context of ctx: otherwise TF's "Need to be
   inside `call_for_each_replica()`" (-EPERM). A device outside 0..L-1:
   TF's ValueError "`logical_core_id` to assign must be lower then total
   number of logical devices per replica. Received logical device id D but
   there are only total of L logical devices in replica." (-EINVAL). Called
   from a device function: -EDEADLK (its replica's thread waits for it).
   Under the other local strategies L is 1: device 0 runs fn in place. */
ZDIST_EXPORT int zdist_strategy_replica_run_on_logical_device(zdist_strategy_replica_t *ctx, int device,
                                                             zdist_strategy_device_fn fn, void *arg,
                                                             zdist_error_t *err);

/* ReplicaContext.all_reduce(op, value): every replica calls it; each gets
   the axis-None reduce (malloc'd ret->data, identical on every replica). */
ZDIST_EXPORT int zdist_strategy_replica_all_reduce(zdist_strategy_replica_t *ctx, zdist_reduce_op_t op,
                                                   const zdist_tensor_t *value, zdist_tensor_t *ret,
                                                   zdist_error_t *err);
/* ReplicaContext.all_gather(value, axis): every replica gets the
   concatenation in replica order (malloc'd ret->data). */
ZDIST_EXPORT int zdist_strategy_replica_all_gather(zdist_strategy_replica_t *ctx, const zdist_tensor_t *value,
                                                   int axis, zdist_tensor_t *ret, zdist_error_t *err);
/* ReplicaContext.all_gather of IndexedSlices: TF's NotImplementedError
   "all_gather does not support IndexedSlices" (-ENOTSUP), raised before
   any collective, as TF raises it first. */
ZDIST_EXPORT int zdist_strategy_replica_all_gather_indexed_slices(zdist_strategy_replica_t *ctx,
                                                                  const zdist_indexed_slices_t *value,
                                                                  int axis, zdist_tensor_t *ret,
                                                                  zdist_error_t *err);
/* The gradient of all_gather (ReplicaContext.all_gather's custom_gradient
   in distribute_lib.py), for a layer that gathers inside run: every
   replica calls it with dy, the upstream gradient of the gathered value
   (its shape), and value, its own input to the all_gather; it all-reduces
   (SUM) dy, all-gathers the replicas' sizes along axis and returns in ret
   (malloc'd) this replica's rows of the sum: the gradient of its value
   (zdist_distribute_all_gather_grad for every replica at once). Two
   collectives, so every replica must call it; errors as all_reduce's and
   all_gather's. */
ZDIST_EXPORT int zdist_strategy_replica_all_gather_grad(zdist_strategy_replica_t *ctx,
                                                        const zdist_tensor_t *dy, const zdist_tensor_t *value,
                                                        int axis, zdist_tensor_t *ret, zdist_error_t *err);
/* Reading a variable in replica context: this replica's copy (the one copy
   of a central_storage ON_WRITE variable). A view, valid until the
   variable is next written. */
ZDIST_EXPORT int zdist_strategy_replica_read(zdist_strategy_replica_t *ctx, const zdist_strategy_var_t *var,
                                             const zdist_tensor_t **ret, zdist_error_t *err);
/* var.assign / assign_add / assign_sub(value) in replica context: every
   replica calls it with its value; zdist_distribute_var_write_replica's
   semantics (ON_WRITE aggregated by the variable's aggregation, TF's
   errors for NONE over several replicas and MEAN of integers; ON_READ each
   replica its own copy). Under central_storage the aggregated value is
   applied once to the one copy. Every replica gets the same result. */
ZDIST_EXPORT int zdist_strategy_replica_assign(zdist_strategy_replica_t *ctx, zdist_strategy_var_t *var,
                                               zdist_var_op_t op, const zdist_tensor_t *value, zdist_error_t *err);

/* ReplicaContext.merge_call(merge_fn, args=(value,)): every replica calls
   it with its value; merge_fn runs once (on replica 0's thread) in the
   strategy's cross-replica context with values[num_replicas_in_sync] (the
   per-replica value, replica order) and may fill *ret (zeroed before the
   call) with a malloc'd tensor; every replica gets its own malloc'd copy
   in *ret (may be NULL), or merge_fn's error. */
typedef int (*zdist_strategy_merge_fn)(zdist_strategy_object_t *strategy, const zdist_tensor_t *values, int n,
                                       void *arg, zdist_tensor_t *ret, zdist_error_t *err);
ZDIST_EXPORT int zdist_strategy_replica_merge_call(zdist_strategy_replica_t *ctx, zdist_strategy_merge_fn fn,
                                                   void *arg, const zdist_tensor_t *value, zdist_tensor_t *ret,
                                                   zdist_error_t *err);

/* ------------------------------------------------------------------------ */
/* Cross-replica methods                                                      */

/* Strategy.reduce(op, value, axis): values[n], n == local replicas
   (num_replicas_in_sync but under multi_worker_mirrored), reduced with
   zdist_distribute_reduce (over every worker under multi_worker_mirrored).
   n == 1 with several local replicas is a value that is not distributed:
   with axis ZDIST_AXIS_NONE, as cross_device_ops.
   reduce_non_distributed_value, zeros give zeros, MEAN gives the value and
   SUM is TF's ValueError "A non-DistributedValues value 5.0 cannot be
   reduced with the given reduce op ReduceOp.SUM." (-EINVAL; a scalar is
   printed, anything else as "<a tensor>"). */
ZDIST_EXPORT int zdist_strategy_reduce(zdist_strategy_object_t *self, zdist_reduce_op_t op,
                                       const zdist_tensor_t *values, int n, int axis, zdist_tensor_t *ret,
                                       zdist_error_t *err);
/* Strategy.reduce(op, value, axis=(a, b, ...)): as zdist_strategy_reduce
   with axes[num_axes] (axes NULL: axis None), reduced by
   zdist_distribute_reduce_axes (SUM over every named axis; MEAN divides
   by the sum over every replica, of every worker, of the product of its
   reduced dimensions), its TF errors included. */
ZDIST_EXPORT int zdist_strategy_reduce_axes(zdist_strategy_object_t *self, zdist_reduce_op_t op,
                                            const zdist_tensor_t *values, int n, const int *axes,
                                            int num_axes, zdist_tensor_t *ret, zdist_error_t *err);
/* Strategy.gather(value, axis); in a replica context TF's "tf.distribute.
   Strategy.gather method requires cross-replica context, use
   get_replica_context().all_gather() instead". */
ZDIST_EXPORT int zdist_strategy_gather(zdist_strategy_object_t *self, const zdist_tensor_t *values, int n,
                                       int axis, zdist_tensor_t *ret, zdist_error_t *err);
/* Strategy.gather of IndexedSlices: after the context check above, TF's
   NotImplementedError "gather does not support IndexedSlices" (-ENOTSUP). */
ZDIST_EXPORT int zdist_strategy_gather_indexed_slices(zdist_strategy_object_t *self,
                                                      const zdist_indexed_slices_t *values, int n, int axis,
                                                      zdist_tensor_t *ret, zdist_error_t *err);
/* Strategy.experimental_local_results: every replica of a local strategy
   is local, so the n values themselves (borrowed). */
ZDIST_EXPORT int zdist_strategy_experimental_local_results(zdist_strategy_object_t *self,
                                                           const zdist_tensor_t *values, int n,
                                                           const zdist_tensor_t **ret_values, int *ret_n,
                                                           zdist_error_t *err);
/* Strategy.experimental_distribute_values_from_function: fn once per
   local replica with its ValueContext (replica ids of this worker);
   ret_values[local replicas]. */
ZDIST_EXPORT int zdist_strategy_experimental_distribute_values_from_function(zdist_strategy_object_t *self,
                                                                             zdist_value_fn fn, void *arg,
                                                                             zdist_tensor_t *ret_values,
                                                                             zdist_error_t *err);

/* Strategy.experimental_distribute_dataset(dataset): this worker's input
   pipeline (InputContext(workers, worker_index, num_replicas_in_sync):
   InputContext(1, 0, R) for a local strategy) over an
   in-memory dataset, batched by opts->global_batch_size and rebatched
   into per-replica batches as zdist_input_new does; each
   zdist_input_next step holds one batch per replica. */
ZDIST_EXPORT int zdist_strategy_experimental_distribute_dataset(zdist_strategy_object_t *self,
                                                                const zdist_dataset_t *dataset,
                                                                const zdist_input_options_t *opts,
                                                                zdist_input_t **ret, zdist_error_t *err);

/* distribute_datasets_from_function: a dataset is a C iterator of
   per-replica batches. next returns 1 with *ret_batch (a view valid until
   the next call), 0 at the end, or a negative errno. */
typedef struct {
    int (*next)(void *state, zdist_tensor_t *ret_batch, zdist_error_t *err);
    void (*destroy)(void *state); /* may be NULL */
    void *state;
} zdist_strategy_dataset_t;
/* The dataset function, called once per input pipeline with its
   InputContext; fills *ret. */
typedef int (*zdist_strategy_dataset_fn)(const zdist_input_context_t *ctx, void *arg,
                                         zdist_strategy_dataset_t *ret, zdist_error_t *err);

/* tf.distribute.InputReplicationMode. */
typedef enum {
    ZDIST_INPUT_PER_WORKER = 0, /* one pipeline; its replicas take successive elements */
    ZDIST_INPUT_PER_REPLICA = 1, /* a pipeline per replica (mirrored only, as TF) */
} zdist_input_replication_t;

typedef struct zdist_strategy_dist_dataset_t zdist_strategy_dist_dataset_t;

/* Strategy.distribute_datasets_from_function(dataset_fn, options). PER_WORKER:
   fn called once with InputContext(workers, worker_index, R) (R =
   num_replicas_in_sync; one worker for a local strategy); local replica r
   of each step gets element k*L + r of it (L local replicas). PER_REPLICA: fn called once per replica r with
   InputContext(R, r, R); replica r gets pipeline r's elements. The
   batches are passed on as the function gives them: neither rebatched nor
   sharded (the function shards with its InputContext, as TF's example).
   When some pipelines end before others, the replicas without data get
   empty batches (their first dim 0, as TF's partial-batch handling) until
   all have ended. fn's error is returned (the pipelines made before it are
   destroyed). */
ZDIST_EXPORT int zdist_strategy_distribute_datasets_from_function(zdist_strategy_object_t *self,
                                                                  zdist_strategy_dataset_fn fn, void *arg,
                                                                  zdist_input_replication_t mode,
                                                                  zdist_strategy_dist_dataset_t **ret,
                                                                  zdist_error_t *err);
/* Next per-replica value: 1 and *ret_values (borrowed: [local replicas],
   each batch copied out of its pipeline, valid until the next call), 0 when every pipeline has ended, or a
   negative errno. */
ZDIST_EXPORT int zdist_strategy_dist_dataset_next(zdist_strategy_dist_dataset_t *self,
                                                  const zdist_tensor_t **ret_values, zdist_error_t *err);
ZDIST_EXPORT void zdist_strategy_dist_dataset_destroy(zdist_strategy_dist_dataset_t **self_p);

/* ------------------------------------------------------------------------ */
/* Strategy.extended                                                          */

/* reduce_to(op, value, destinations): dests[num_dests] are the caller's
   buffers; destination `var` (may be NULL) must then have num_dests
   copies (its devices). zdist_distribute_reduce_to. */
ZDIST_EXPORT int zdist_strategy_extended_reduce_to(zdist_strategy_object_t *self, zdist_reduce_op_t op,
                                                   const zdist_tensor_t *values, int n,
                                                   const zdist_strategy_var_t *destination, zdist_tensor_t *dests,
                                                   int num_dests, zdist_error_t *err);
/* batch_reduce_to: every pair checked before anything is written. */
ZDIST_EXPORT int zdist_strategy_extended_batch_reduce_to(zdist_strategy_object_t *self, zdist_reduce_op_t op,
                                                         const zdist_reduce_pair_t *pairs, int n,
                                                         zdist_error_t *err);
/* update(var, fn, args): fn on every copy of var in order. From a replica
   context of this strategy, as TF's _replica_ctx_update, it is a merge_call:
   every replica calls it with its own arg, then copy r is updated once with
   replica r's arg (a one-copy variable: once, with replica 0's), and every
   replica gets the result. */
ZDIST_EXPORT int zdist_strategy_extended_update(zdist_strategy_object_t *self, zdist_strategy_var_t *var,
                                                zdist_update_fn fn, void *arg, zdist_error_t *err);
/* with strategy.extended.colocate_vars_with(anchor): begin / end on this
   thread, inside the strategy's scope. The anchor must have been created
   under this strategy: otherwise TF's ValueError "`colocate_vars_with`
   must only be passed a variable created in this tf.distribute.Strategy.
   scope(), not NAME created in scope: CLASS" (-EINVAL). Outside the
   scope: 'Need to be inside "with strategy.scope()" for CLASS'. One open
   at a time per thread (-EBUSY). Local strategies place every variable on
   the same devices already; the companions record their anchor. */
ZDIST_EXPORT int zdist_strategy_extended_colocate_vars_with_begin(zdist_strategy_object_t *self,
                                                                  const zdist_strategy_var_t *anchor,
                                                                  zdist_error_t *err);
ZDIST_EXPORT int zdist_strategy_extended_colocate_vars_with_end(zdist_strategy_object_t *self, zdist_error_t *err);
/* variable_created_in_scope(v): whether v was created under this
   strategy's scope. */
ZDIST_EXPORT bool zdist_strategy_extended_variable_created_in_scope(const zdist_strategy_object_t *self,
                                                                    const zdist_strategy_var_t *var);

/* ------------------------------------------------------------------------ */
/* parameter_server: ClusterCoordinator.schedule / join / fetch              */

/* ClusterCoordinator.schedule(worker_fn): a closure of `steps` (>= 1)
   steps of strategy.run(train_step) on whichever worker is free (see
   above); returns at once with *ret (the coordinator's: valid while the
   strategy lives). The first call gives the workers the job (START_JOB;
   its refusal, or -ENOTCONN when no worker answered, is returned). Other
   strategies: -EINVAL. Requires the cross-replica or default context. */
ZDIST_EXPORT int zdist_strategy_schedule(zdist_strategy_object_t *self, int64_t steps, zdist_remote_value_t **ret,
                                         zdist_error_t *err);
/* ClusterCoordinator.join(): every scheduled closure done; the first
   closure error, once (zdist_coordinator_join). 0 before any schedule. */
ZDIST_EXPORT int zdist_strategy_join(zdist_strategy_object_t *self, zdist_error_t *err);
/* RemoteValue.fetch(), waiting for the closure: what its worker_fn
   returns, a per-replica value of the one replica that ran it:
   ret_values[0] gets a float32 scalar (malloc'd; zdist_strategy_values_free)
   holding the mean of its steps' losses, for zdist_strategy_reduce and
   experimental_local_results with n = 1. The closure's error otherwise.
   The closure's other numbers (examples, worker): zdist_remote_value_fetch. */
ZDIST_EXPORT int zdist_strategy_fetch(zdist_strategy_object_t *self, zdist_remote_value_t *value,
                                      zdist_tensor_t *ret_values, zdist_error_t *err);
/* The ClusterCoordinator (borrowed; NULL but under parameter_server): its
   poll, results, worker view and evaluate (zdist/coordinator.h). */
ZDIST_EXPORT zdist_coordinator_t *zdist_strategy_coordinator(zdist_strategy_object_t *self);

#ifdef __cplusplus
}
#endif
#endif
