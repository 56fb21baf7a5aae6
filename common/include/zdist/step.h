/* zdist step-function ABI: models (variables + train/eval steps) and the replica context they run in. */
#ifndef ZDIST_STEP_H
#define ZDIST_STEP_H

/* A model is C code that runs unchanged under every strategy (ARCHITECTURE.md, "Strategies").
   It declares its variables in `build` (the equivalent of creating variables
   under strategy.scope()), and its steps talk to a replica context
   (tf.distribute.ReplicaContext) that turns reads, gradient applies and
   collectives into whatever the strategy needs: in-process reductions
   between replica threads (one_device, mirrored, central_storage), psd RPCs
   (parameter_server), or peer collectives.

   This header is the whole ABI. It is self-contained on purpose: a plugin
   includes it (plus zdist/tensor.h, zdist/error.h and zdist/init.h for plain types) and
   needs no symbol from libzdist or from the process that loads it — every
   call into the host goes through the function tables below, wrapped in
   static inline accessors.

   Stability rules (ABI version ZDIST_STEP_ABI_VERSION):
   - zdist_step_plugin_t.abi_version stays the first member forever, so any
     host can read it and refuse a plugin built for another version.
   - Incompatible changes (a changed member, a changed meaning) bump the
     version. New context operations are appended to the end of the ops
     tables, whose `size` member tells a model what its host offers
     (zdist_ctx_has). A model built for an older minor layout keeps working.

   Thread rules: the host calls init/destroy/build once, from one thread.
   train_step/eval_step run concurrently, one call per replica, each on its
   own thread with its own context: a model's state must be read-only during
   steps (keep per-replica scratch in the context: zdist_ctx_scratch). Every
   replica of a step must make the same collective calls (all_reduce,
   all_gather, merge_call, apply_gradients, assign*) in the same order, as in
   TensorFlow; an empty replica (batch size 0) still makes them, with zero
   gradients. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "zdist/error.h"
#include "zdist/init.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZDIST_STEP_ABI_VERSION 1
/* The symbol a plugin shared object exports (a zdist_step_plugin_t). */
#define ZDIST_STEP_PLUGIN_SYMBOL "zdist_step_plugin"

/* ------------------------------------------------------------------------ */
/* Variables                                                                  */

/* tf.VariableSynchronization: ON_WRITE (AUTO in TF) keeps replicas' copies in
   sync on every write; ON_READ lets each replica write its own copy and
   aggregates only when read across replicas (metrics, batch-norm moments). */
typedef enum {
    ZDIST_SYNC_ON_WRITE = 0,
    ZDIST_SYNC_ON_READ = 1,
} zdist_var_sync_t;

/* tf.VariableAggregation: how replicas' writes (assign / assign_add of an
   ON_WRITE variable in a replica context) or copies (reading an ON_READ
   variable across replicas) are combined. Gradients applied through
   apply_gradients are always summed (TF's SUM all-reduce). */
typedef enum {
    ZDIST_AGG_NONE = 0,
    ZDIST_AGG_SUM = 1,
    ZDIST_AGG_MEAN = 2,
    ZDIST_AGG_ONLY_FIRST_REPLICA = 3,
} zdist_var_agg_t;

/* Initializers (zdist_initializer_t): zdist/init.h. */

/* One variable, declared in `build`. Strings are copied by the host. */
typedef struct {
    const char *name;      /* unique within the model, [A-Za-z0-9_./-] */
    zdist_dtype_t dtype;   /* ZDIST_DTYPE_FLOAT32 (the only one steps use today) */
    zdist_shape_t shape;   /* rank >= 1; dim 0 is the row dimension */
    zdist_initializer_t init;
    const char *partitioner; /* NULL: the job's; else a partition.h spec ("fixed:4") */
    zdist_var_sync_t synchronization;
    zdist_var_agg_t aggregation;
    bool trainable; /* false: no optimizer slots; written with assign* only */
} zdist_var_spec_t;

/* A dynamic embedding table's admission and eviction (issue 29): a table
   without a vocabulary, its rows keyed by any int64 id, each created once
   its id has occurred min_count times in training batches (TF Recommenders-
   Addons' dynamic_embedding, DeepRec's EmbeddingVariable). */
typedef struct {
    uint32_t min_count;         /* occurrences that admit an id; 0 or 1: the first */
    uint64_t evict_after_steps; /* rows not updated for more steps go at checkpoints; 0: never */
    double evict_l2_below;      /* rows whose L2 norm is below this go at checkpoints; 0: never */
    /* Every element of what a lookup of an id without a row reads (not
       yet admitted, or never trained; its gradients are dropped): 0 zeros. */
    double default_value;
} zdist_dynamic_spec_t;

typedef struct zdist_model_builder_t zdist_model_builder_t;

/* colocate_vars_with's anchor meaning "leave the colocation scope". */
#define ZDIST_NO_COLOCATION (-1)

typedef struct {
    uint32_t size; /* sizeof the table the host filled */
    /* Declares a variable; returns its handle (>= 0) or a negative errno
       (-EEXIST duplicate name, -EINVAL bad spec) with err filled. */
    int (*add_variable)(zdist_model_builder_t *b, const zdist_var_spec_t *spec, zdist_error_t *err);
    /* strategy.extended.colocate_vars_with(anchor) (appended in ABI 1):
       the variables declared after this call, until it is called again
       (with another anchor, or ZDIST_NO_COLOCATION to leave), live with the
       variable of handle `anchor`: under parameter_server they are never
       partitioned and are created on the ps task of the anchor (of its
       first shard, if the anchor is sharded), and checkpoints restore them
       there; under the other strategies every variable is local anyway. A
       colocated variable must not name a partitioner (-EINVAL). 0, or
       -EINVAL for an anchor that is not a declared variable. */
    int (*colocate_vars_with)(zdist_model_builder_t *b, int anchor, zdist_error_t *err);
    /* A dynamic embedding table (appended in ABI 1): spec->shape is [0,
       dim] (dim 1..65536, no rows until ids are admitted), float32,
       trainable, no partitioner (its rows spread over the ps tasks by
       zdist_partition_id_ps), not colocated. read_rows takes any int64 ids
       (the default, zeros, for one not yet admitted); apply_gradients takes
       its gradient by ids only; a whole read is refused. Only the
       parameter_server strategy serves one: other hosts refuse it when the
       model is set up. Returns the handle, or -EINVAL naming the field. */
    int (*add_dynamic_variable)(zdist_model_builder_t *b, const zdist_var_spec_t *spec,
                                const zdist_dynamic_spec_t *dynamic, zdist_error_t *err);
} zdist_builder_ops_t;

struct zdist_model_builder_t {
    const zdist_builder_ops_t *ops;
};

/* True when the host's builder table has operation `member`. */
#define zdist_builder_has(b, member)                                                        \
    ((b)->ops->size >= offsetof(zdist_builder_ops_t, member) + sizeof((b)->ops->member) && \
     (b)->ops->member != NULL)

static inline int
zdist_builder_add_variable(zdist_model_builder_t *b, const zdist_var_spec_t *spec, zdist_error_t *err)
{
    return b->ops->add_variable(b, spec, err);
}
/* -ENOSYS (err filled when err is not NULL) from a host that predates it. */
static inline int
zdist_builder_add_dynamic_variable(zdist_model_builder_t *b, const zdist_var_spec_t *spec,
                                   const zdist_dynamic_spec_t *dynamic, zdist_error_t *err)
{
    if (!zdist_builder_has(b, add_dynamic_variable)) {
        static const char text[] = "this host's builder has no add_dynamic_variable";
        if (err) {
            err->code = -ENOSYS;
            memcpy(err->text, text, sizeof text < sizeof err->text ? sizeof text : sizeof err->text - 1);
            err->text[sizeof err->text - 1] = '\0';
        }
        return -ENOSYS;
    }
    return b->ops->add_dynamic_variable(b, spec, dynamic, err);
}
/* -ENOSYS (err filled when err is not NULL) from a host that predates it. */
static inline int
zdist_builder_colocate_vars_with(zdist_model_builder_t *b, int anchor, zdist_error_t *err)
{
    if (!zdist_builder_has(b, colocate_vars_with)) {
        static const char text[] = "this host's builder has no colocate_vars_with";
        if (err) {
            err->code = -ENOSYS;
            memcpy(err->text, text, sizeof text < sizeof err->text ? sizeof text : sizeof err->text - 1);
            err->text[sizeof err->text - 1] = '\0';
        }
        return -ENOSYS;
    }
    return b->ops->colocate_vars_with(b, anchor, err);
}

/* ------------------------------------------------------------------------ */
/* The replica context                                                        */

/* One named feature of a batch, as the job's "features" spec declares it
   (tf.io.parse_example's FixedLenFeature / VarLenFeature). Fixed: `values`
   holds [size, width] elements (width = the product of the feature's shape,
   1 for a scalar) and row_offsets is NULL. Var (a ragged row per example):
   row_offsets [size+1] from 0 index `values`, width is 0. Borrowed, like the
   batch. */
typedef struct {
    const char *name;
    zdist_dtype_t dtype; /* ZDIST_DTYPE_FLOAT32 or ZDIST_DTYPE_INT64 */
    int64_t width;
    const int64_t *row_offsets;
    const void *values; /* float or int64_t, as dtype says */
} zdist_step_column_t;

/* One replica's share of a step. Borrowed: valid until the step returns. */
typedef struct {
    int64_t size;   /* examples for this replica; 0 for an empty replica */
    int64_t dim;    /* features per example (hashed dimension when sparse) */
    /* The examples of the whole step over all replicas in sync (partial last
       batch included): the denominator of tf.nn.compute_average_loss, so
       that a replica's loss is sum(per-example loss) / global_size and the
       SUM of replicas' gradients is the mean gradient of the global batch. */
    int64_t global_size;
    const float *features;    /* dense [size, dim]; NULL when sparse */
    const int64_t *row_offsets; /* sparse CSR [size+1] from 0; NULL when dense */
    const int64_t *feature_ids; /* in [0, dim) */
    const float *feature_values;
    zdist_dtype_t label_dtype; /* INT32 (classes) or FLOAT32 (regression) */
    const void *labels;        /* [size] */
    /* Named features (datasets with a "features" spec, such as TFRecord files
       of tf.train.Example): ncolumns of them, the label excluded; 0 and NULL
       otherwise. Appended to the layout: a model built before them never
       reads past `labels`. */
    int ncolumns;
    const zdist_step_column_t *columns;
} zdist_step_batch_t;

/* The batch's column named `name`, or NULL. */
static inline const zdist_step_column_t *
zdist_step_batch_column(const zdist_step_batch_t *batch, const char *name)
{
    for (int i = 0; batch && i < batch->ncolumns; i++)
        if (strcmp(batch->columns[i].name, name) == 0)
            return &batch->columns[i];
    return NULL;
}

typedef enum {
    ZDIST_REDUCE_SUM = 0,
    ZDIST_REDUCE_MEAN = 1,
} zdist_reduce_op_t;

/* A gradient for apply_gradients. Dense: ids NULL, values has the variable's
   element count. Sparse (tf.IndexedSlices): nids rows of the variable's row
   width, ids in [0, rows); duplicates allowed (summed). The host may
   overwrite `values` (it reduces in place). */
typedef struct {
    int var;
    float *values;
    const int64_t *ids;
    int64_t nids;
} zdist_grad_t;

/* merge_call's function: runs once, on one replica's thread, while every
   replica waits (tf.distribute.ReplicaContext.merge_call). args[r] is what
   replica r passed. Its return value is returned to every replica. Under
   multi_worker_mirrored merge_call's pointers cannot leave the worker: fn
   runs on every worker with that worker's replicas' args only; pass values
   with merge_call_values to see every replica of every worker. */
typedef int (*zdist_merge_fn)(void *const *args, int num_replicas);

typedef struct zdist_replica_ctx_t zdist_replica_ctx_t;

/* run_on_logical_devices's function: runs on logical device `device` of
   the calling replica (its own thread, strategy tpu). 0 or a negative errno. */
typedef int (*zdist_device_fn)(void *arg, int device);

/* Every operation returns 0 (or a count/handle >= 0) or a negative errno;
   on a collective, a failure of any replica makes the others' calls return
   -ECANCELED. Pointers a context returns are borrowed until the step
   returns (or, for variable reads, until the next apply/assign). */
typedef struct {
    uint32_t size; /* sizeof the table the host filled: see zdist_ctx_has */
    int (*replica_id_in_sync_group)(zdist_replica_ctx_t *ctx);
    int (*num_replicas_in_sync)(zdist_replica_ctx_t *ctx);
    /* This replica's batch of the step: 1 and *ret, or 0 when the input is
       exhausted (not in train_step: the host only steps while data lasts). */
    int (*next_batch)(zdist_replica_ctx_t *ctx, const zdist_step_batch_t **ret);
    /* Handle of a declared variable by name; -ENOENT. */
    int (*variable)(zdist_replica_ctx_t *ctx, const char *name);
    /* Dense read of a whole variable (this replica's copy, or pulled). */
    int (*read)(zdist_replica_ctx_t *ctx, int var, const float **ret);
    /* Rows by id into out [n, row width], in the order asked. Ids are
       deduplicated before they travel. -ERANGE for an id outside the rows. */
    int (*read_rows)(zdist_replica_ctx_t *ctx, int var, const int64_t *ids, int64_t n, float *out);
    /* optimizer.apply_gradients: reduces (SUM) across replicas and updates
       every copy (or the one copy) through the job's optimizer. -EPERM in
       an eval step. */
    int (*apply_gradients)(zdist_replica_ctx_t *ctx, const zdist_grad_t *grads, int n);
    /* In-place all-reduce of n float32 tensors in one call (bufs[i] holds
       lens[i] elements, same lens on every replica). */
    int (*all_reduce)(zdist_replica_ctx_t *ctx, zdist_reduce_op_t op, float *const *bufs,
                      const int64_t *lens, int n);
    /* Concatenates every replica's float32 tensor along `axis` in replica
       order. Shapes must agree except along axis. *ret (borrowed) and
       *ret_shape get the result. */
    int (*all_gather)(zdist_replica_ctx_t *ctx, const float *in, const zdist_shape_t *shape, int axis,
                      const float **ret, zdist_shape_t *ret_shape);
    int (*merge_call)(zdist_replica_ctx_t *ctx, zdist_merge_fn fn, void *arg);
    /* Writes of non-trainable variables (tf.Variable.assign / assign_add in
       a replica context): ON_WRITE variables combine the replicas' values by
       their aggregation (NONE is refused with -EINVAL, as TF's ValueError);
       ON_READ variables write this replica's copy only. */
    int (*assign)(zdist_replica_ctx_t *ctx, int var, const float *values);
    int (*assign_add)(zdist_replica_ctx_t *ctx, int var, const float *delta);
    /* A named output of the step ("loss", "correct", "examples", ...),
       reduced over replicas with op. At most 16 names per step. */
    int (*output)(zdist_replica_ctx_t *ctx, const char *name, double value, zdist_reduce_op_t op);
    /* Per-replica scratch that survives across steps: at least `bytes`,
       64-byte aligned, contents kept while the size does not grow. */
    void *(*scratch)(zdist_replica_ctx_t *ctx, int slot, size_t bytes);
    /* Fills the error message the host reports when the step fails. */
    void (*set_error)(zdist_replica_ctx_t *ctx, int code, const char *text);
    /* Appended in ABI 1 (zdist_ctx_has tells whether a host has them). */
    /* merge_call whose arguments are values: `size` bytes (1..1 MiB, the
       same on every replica) at arg. fn gets args[num_replicas_in_sync],
       args[i] pointing at a copy of replica i's bytes (8-byte aligned), in
       replica_id_in_sync_group order — under multi_worker_mirrored those of
       every replica of every worker, gathered through the ring, so fn sees
       what one worker with all the replicas would see. fn runs once per
       worker (on one replica's thread, the others waiting); its return
       value goes to every replica. -EINVAL when the replicas' sizes differ. */
    int (*merge_call_values)(zdist_replica_ctx_t *ctx, zdist_merge_fn fn, const void *arg, size_t size);
    /* A cross-replica read inside a step (TF reading a variable in
       cross-replica context, e.g. in merge_fn). Every replica calls it and
       gets the same values in out (the variable's element count):
       ON_WRITE: the variable (its copies agree); ON_READ: SUM or MEAN of
       the copies of every replica in sync (across workers through the ring
       under multi_worker_mirrored), ONLY_FIRST_REPLICA: this worker's
       replica 0's copy (TF's _get_replica(0)), NONE: -EINVAL with TF's
       "Could not convert from `tf.VariableAggregation` ..." text. */
    int (*read_cross_replica)(zdist_replica_ctx_t *ctx, int var, float *out);
    /* Strategy tpu (TPUStrategy's logical devices; appended in ABI 1): the
       replica's logical devices per replica (1 under the other strategies),
       and fn run on one of them (device >= 0) or on every one at once
       (device -1), each on its own thread (device 0: the replica's), the
       call returning when all have: model parallelism inside a replica.
       Returns the first device's error. While fn runs, the replica's thread
       waits, so fn may use this context (its collectives included) from any
       one device, never from several at once. */
    int (*num_logical_devices)(zdist_replica_ctx_t *ctx);
    int (*run_on_logical_devices)(zdist_replica_ctx_t *ctx, int device, zdist_device_fn fn, void *arg);
    /* An eval step's predicted probabilities of the positive class, one per
       example of this replica's batch (n == batch size), in [0, 1]: a binary
       classifier (a sigmoid output) gives them so the host can compute the
       exact AUC over the test split (appended in ABI 1; the host copies
       them before the call returns). -EINVAL when n is not the batch size. */
    int (*predictions)(zdist_replica_ctx_t *ctx, const float *probabilities, int64_t n);
    /* read_rows of n variables at once (appended in ABI 1): variable
       vars[i]'s rows ids[i][0..counts[i]) into outs[i], in the order
       asked, what n read_rows calls would read, in one exchange with the
       variables' hosts (parameter_server: one pull_rows per ps task
       carrying every variable's ids, all sent at once; one wait instead of
       one per variable). Every id of every variable is checked before any
       is read: -ERANGE (nothing read) for an id outside a fixed variable. */
    int (*read_rows_many)(zdist_replica_ctx_t *ctx, int n, const int *vars, const int64_t *const *ids,
                          const int64_t *counts, float *const *outs);
} zdist_replica_ops_t;

struct zdist_replica_ctx_t {
    const zdist_replica_ops_t *ops;
};

#define ZDIST_SCRATCH_SLOTS 8

/* True when the host's table has operation `member`. */
#define zdist_ctx_has(ctx, member)                                                       \
    ((ctx)->ops->size >= offsetof(zdist_replica_ops_t, member) + sizeof((ctx)->ops->member) && \
     (ctx)->ops->member != NULL)

/* zdist_replica_ops_t.predictions, or -ENOSYS when the host has none. */
static inline int
zdist_ctx_predictions(zdist_replica_ctx_t *c, const float *probabilities, int64_t n)
{
    return zdist_ctx_has(c, predictions) ? c->ops->predictions(c, probabilities, n) : -ENOSYS;
}

static inline int zdist_ctx_replica_id(zdist_replica_ctx_t *c) { return c->ops->replica_id_in_sync_group(c); }
static inline int zdist_ctx_num_replicas(zdist_replica_ctx_t *c) { return c->ops->num_replicas_in_sync(c); }
static inline int zdist_ctx_next_batch(zdist_replica_ctx_t *c, const zdist_step_batch_t **ret) { return c->ops->next_batch(c, ret); }
static inline int zdist_ctx_variable(zdist_replica_ctx_t *c, const char *name) { return c->ops->variable(c, name); }
static inline int zdist_ctx_read(zdist_replica_ctx_t *c, int var, const float **ret) { return c->ops->read(c, var, ret); }
static inline int
zdist_ctx_read_rows(zdist_replica_ctx_t *c, int var, const int64_t *ids, int64_t n, float *out)
{
    return c->ops->read_rows(c, var, ids, n, out);
}
/* zdist_replica_ops_t.read_rows_many; a host that predates it gets n
   read_rows calls (the same rows, a round trip each). */
static inline int
zdist_ctx_read_rows_many(zdist_replica_ctx_t *c, int n, const int *vars, const int64_t *const *ids,
                         const int64_t *counts, float *const *outs)
{
    if (zdist_ctx_has(c, read_rows_many))
        return c->ops->read_rows_many(c, n, vars, ids, counts, outs);
    for (int i = 0; i < n; i++) {
        int rc = counts[i] != 0 ? c->ops->read_rows(c, vars[i], ids[i], counts[i], outs[i]) : 0;
        if (rc < 0)
            return rc;
    }
    return 0;
}
static inline int
zdist_ctx_apply_gradients(zdist_replica_ctx_t *c, const zdist_grad_t *grads, int n)
{
    return c->ops->apply_gradients(c, grads, n);
}
static inline int
zdist_ctx_all_reduce(zdist_replica_ctx_t *c, zdist_reduce_op_t op, float *const *bufs, const int64_t *lens, int n)
{
    return c->ops->all_reduce(c, op, bufs, lens, n);
}
static inline int
zdist_ctx_all_gather(zdist_replica_ctx_t *c, const float *in, const zdist_shape_t *shape, int axis,
                     const float **ret, zdist_shape_t *ret_shape)
{
    return c->ops->all_gather(c, in, shape, axis, ret, ret_shape);
}
/* The gradient of zdist_ctx_all_gather(in, shape, axis) for a layer that
   gathers: ReplicaContext.all_gather's custom_gradient (distribute_lib.py).
   Every replica calls it with dy, the upstream gradient of the gathered
   value (gathered_shape, as all_gather returned it), which is summed over
   the replicas in place (all_reduce SUM), and its own input's shape; out
   (shape's elements) gets this replica's rows of the sum along axis, at
   the offset of the replicas before it (all-gathered sizes). Two
   collectives; -EINVAL for an axis outside the rank or shapes that do not
   agree; a host whose gather does not span every replica: -ENOTSUP.
   zdist_distribute_all_gather_grad (zdist/distribute.h) is the same on
   per-replica values. */
static inline int
zdist_ctx_all_gather_grad(zdist_replica_ctx_t *c, float *dy, const zdist_shape_t *gathered_shape,
                          const zdist_shape_t *shape, int axis, float *out)
{
    if (axis < 0)
        axis += shape->rank;
    if (axis < 0 || axis >= shape->rank || gathered_shape->rank != shape->rank)
        return -EINVAL;
    int64_t outer = 1, inner = 1, n = 1;
    for (int d = 0; d < shape->rank; d++) {
        if (d != axis && gathered_shape->dims[d] != shape->dims[d])
            return -EINVAL;
        n *= gathered_shape->dims[d];
        if (d < axis)
            outer *= shape->dims[d];
        else if (d > axis)
            inner *= shape->dims[d];
    }
    float *bufs[1] = {dy};
    int64_t lens[1] = {n};
    int rc = zdist_ctx_all_reduce(c, ZDIST_REDUCE_SUM, bufs, lens, 1);
    if (rc < 0)
        return rc;
    float mine = (float) shape->dims[axis];
    zdist_shape_t one = {1, {1}}, got;
    const float *sizes;
    if ((rc = zdist_ctx_all_gather(c, &mine, &one, 0, &sizes, &got)) < 0)
        return rc;
    int id = zdist_ctx_replica_id(c);
    if (got.dims[0] != zdist_ctx_num_replicas(c))
        return -ENOTSUP;
    int64_t begin = 0, rows = shape->dims[axis], along = gathered_shape->dims[axis];
    for (int q = 0; q < id; q++)
        begin += (int64_t) sizes[q];
    if (begin + rows > along)
        return -EINVAL;
    for (int64_t o = 0; o < outer; o++)
        memcpy(out + o * rows * inner, dy + (o * along + begin) * inner,
               (size_t) (rows * inner) * sizeof *out);
    return 0;
}
static inline int zdist_ctx_merge_call(zdist_replica_ctx_t *c, zdist_merge_fn fn, void *arg) { return c->ops->merge_call(c, fn, arg); }
static inline int zdist_ctx_assign(zdist_replica_ctx_t *c, int var, const float *v) { return c->ops->assign(c, var, v); }
static inline int zdist_ctx_assign_add(zdist_replica_ctx_t *c, int var, const float *d) { return c->ops->assign_add(c, var, d); }
static inline int
zdist_ctx_output(zdist_replica_ctx_t *c, const char *name, double value, zdist_reduce_op_t op)
{
    return c->ops->output(c, name, value, op);
}
static inline void *zdist_ctx_scratch(zdist_replica_ctx_t *c, int slot, size_t bytes) { return c->ops->scratch(c, slot, bytes); }
static inline void zdist_ctx_set_error(zdist_replica_ctx_t *c, int code, const char *text) { c->ops->set_error(c, code, text); }
/* -ENOSYS from a host that predates them. */
static inline int
zdist_ctx_merge_call_values(zdist_replica_ctx_t *c, zdist_merge_fn fn, const void *arg, size_t size)
{
    return zdist_ctx_has(c, merge_call_values) ? c->ops->merge_call_values(c, fn, arg, size) : -ENOSYS;
}
static inline int
zdist_ctx_read_cross_replica(zdist_replica_ctx_t *c, int var, float *out)
{
    return zdist_ctx_has(c, read_cross_replica) ? c->ops->read_cross_replica(c, var, out) : -ENOSYS;
}

/* 1 from a host without logical devices. */
static inline int
zdist_ctx_num_logical_devices(zdist_replica_ctx_t *c)
{
    return zdist_ctx_has(c, num_logical_devices) ? c->ops->num_logical_devices(c) : 1;
}
/* A host without logical devices runs device 0's (or -1's) fn on the
   caller's thread; -ENODEV for another device. */
static inline int
zdist_ctx_run_on_logical_devices(zdist_replica_ctx_t *c, int device, zdist_device_fn fn, void *arg)
{
    if (zdist_ctx_has(c, run_on_logical_devices))
        return c->ops->run_on_logical_devices(c, device, fn, arg);
    return device <= 0 ? fn(arg, 0) : -ENODEV;
}

/* ------------------------------------------------------------------------ */
/* Models and plugins                                                         */

/* What the host knows of the data when a model is made. */
typedef struct {
    int64_t input_dim;        /* features per example */
    int num_classes;          /* 0 for regression labels */
    bool sparse;              /* CSR batches */
    zdist_dtype_t label_dtype; /* INT32 or FLOAT32 */
    uint64_t seed;            /* the job's seed */
} zdist_model_info_t;

/* Standard output names (TF's metrics): the host shows loss and accuracy =
   correct / examples. */
#define ZDIST_OUTPUT_LOSS "loss"
#define ZDIST_OUTPUT_CORRECT "correct"
#define ZDIST_OUTPUT_EXAMPLES "examples"

typedef struct {
    const char *name;        /* registry name, e.g. "mlp" */
    const char *description; /* one line */
    /* Optional. params_json: the job's model.params as JSON text ("{}" when
       absent). *ret_state is passed to every other hook. -EINVAL with err
       naming the parameter for bad params. */
    int (*init)(const char *params_json, const zdist_model_info_t *info, void **ret_state,
                zdist_error_t *err);
    /* Optional: frees what init made. */
    void (*destroy)(void *state);
    /* Declares the variables. */
    int (*build)(void *state, zdist_model_builder_t *b, zdist_error_t *err);
    /* One training step on this replica: next_batch, forward, backward,
       apply_gradients, outputs (loss scaled by global_size: the replicas'
       SUM is the global batch's mean loss). 0 or a negative errno. */
    int (*train_step)(void *state, zdist_replica_ctx_t *ctx);
    /* One evaluation step: outputs only (loss, correct, examples). */
    int (*eval_step)(void *state, zdist_replica_ctx_t *ctx);
} zdist_model_t;

/* What a plugin exports as `zdist_step_plugin`:
       const zdist_step_plugin_t zdist_step_plugin = {
           ZDIST_STEP_ABI_VERSION, "my-plugin", 1, s_models};
   abi_version must stay the first member in every version of this ABI. */
typedef struct {
    uint32_t abi_version;
    const char *name;
    int num_models;
    const zdist_model_t *const *models;
} zdist_step_plugin_t;

#ifdef __cplusplus
}
#endif
#endif
