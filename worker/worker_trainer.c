/* worker_trainer: a model's replicas on libzdist's replica runtime (zdist/replicas.h) — step.h replica contexts
   over a strategy backend, the local one being zdist/mirror.h — one call per step. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_trainer.h"
#include "worker_trainer_rows.h"
#include "zdist/distribute.h"
#include "zdist/mirror.h"
#include "zdist/replicas.h"

typedef struct {
    char name[WORKER_OUTPUT_NAME_MAX];
    double value;
    zdist_reduce_op_t op;
} s_output_t;

typedef struct {
    zdist_replica_ctx_t base;
    worker_trainer_t *trainer;
    int replica;
    /* This step */
    zdist_step_batch_t batch;
    bool batch_given;
    int rc;
    char error[ZDIST_ERROR_TEXT_MAX];
    s_output_t outputs[WORKER_MAX_OUTPUTS];
    int nout;
    /* Survives steps */
    void *scratch[ZDIST_SCRATCH_SLOTS];
    size_t scratch_size[ZDIST_SCRATCH_SLOTS];
    worker_rows_t rows; /* read_rows' scratch */
    /* An eval step's predictions (zdist_ctx_predictions): npred of them,
       -1 when the step gave none. */
    float *pred;
    int64_t pred_cap, npred;
} s_replica_t;

struct worker_trainer_t {
    const zdist_model_t *model;
    void *state;
    bool state_made;
    worker_vars_t vars;
    worker_backend_t *backend;
    int n;
    int num_workers, worker_index;
    int ndev;      /* logical devices per replica */
    bool pin;      /* replica 0 runs on a runtime thread too, every thread pinned */
    int cpus[CPU_SETSIZE], ncpus; /* the process's affinity when pinning */
    atomic_bool pin_warned;
    s_replica_t *replicas;
    zdist_replicas_t *rt; /* the replica runtime: threads, barrier, logical devices */
    /* The step the replica threads run */
    bool eval;
    const zdist_input_step_t *step;
    int64_t dim;
    zdist_dtype_t label_dtype;
    bool failed;
};

double
worker_outputs_get(const worker_outputs_t *out, const char *name, double dflt)
{
    for (int i = 0; i < out->n; i++)
        if (strcmp(out->names[i], name) == 0)
            return out->values[i];
    return dflt;
}

/* ---- the replica context (step.h operations) ---- */

static s_replica_t *
s_rep(zdist_replica_ctx_t *ctx)
{
    return (s_replica_t *)ctx;
}

static int
s_fail(s_replica_t *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int
s_fail(s_replica_t *r, int code, const char *fmt, ...)
{
    if (!r->error[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->error, sizeof r->error, fmt, ap);
        va_end(ap);
    }
    return code;
}

static int
s_replica_id(zdist_replica_ctx_t *ctx)
{
    s_replica_t *r = s_rep(ctx);
    return r->trainer->worker_index * r->trainer->n + r->replica;
}

static int
s_num_replicas(zdist_replica_ctx_t *ctx)
{
    return s_rep(ctx)->trainer->n * s_rep(ctx)->trainer->num_workers;
}

static int
s_next_batch(zdist_replica_ctx_t *ctx, const zdist_step_batch_t **ret)
{
    s_replica_t *r = s_rep(ctx);
    if (r->batch_given)
        return 0;
    r->batch_given = true;
    *ret = &r->batch;
    return 1;
}

static int
s_variable(zdist_replica_ctx_t *ctx, const char *name)
{
    return worker_vars_find(&s_rep(ctx)->trainer->vars, name);
}

static int
s_check_var(s_replica_t *r, int var)
{
    if (var < 0 || var >= r->trainer->vars.n)
        return s_fail(r, -EINVAL, "variable handle %d is not one of the model's %d", var, r->trainer->vars.n);
    return 0;
}

static int
s_read(zdist_replica_ctx_t *ctx, int var, const float **ret)
{
    s_replica_t *r = s_rep(ctx);
    int rc = s_check_var(r, var);
    if (rc < 0)
        return rc;
    worker_backend_t *be = r->trainer->backend;
    return be->ops->read(be, r->replica, var, ret);
}

/* read_rows and read_rows_many: worker_trainer_rows.c. */
static int
s_read_rows_many(zdist_replica_ctx_t *ctx, int n, const int *vars, const int64_t *const *ids, const int64_t *counts,
                 float *const *outs)
{
    s_replica_t *r = s_rep(ctx);
    zdist_error_t err = {0};
    int rc = worker_rows_read(&r->rows, r->trainer->backend, r->replica, &r->trainer->vars, n, vars, ids, counts,
                              outs, &err);
    return rc < 0 && err.text[0] ? s_fail(r, rc, "%s", err.text) : rc;
}

static int
s_read_rows(zdist_replica_ctx_t *ctx, int var, const int64_t *ids, int64_t n, float *out)
{
    return s_read_rows_many(ctx, 1, &var, &ids, &n, &out);
}

static int
s_apply_gradients(zdist_replica_ctx_t *ctx, const zdist_grad_t *grads, int n)
{
    s_replica_t *r = s_rep(ctx);
    if (r->trainer->eval)
        return s_fail(r, -EPERM, "apply_gradients in an eval step");
    if (n < 0 || (n > 0 && !grads))
        return s_fail(r, -EINVAL, "apply_gradients: bad gradient list");
    for (int i = 0; i < n; i++) {
        int rc = s_check_var(r, grads[i].var);
        if (rc < 0)
            return rc;
        const worker_var_t *v = &r->trainer->vars.vars[grads[i].var];
        if (!v->trainable)
            return s_fail(r, -EINVAL, "apply_gradients: variable '%s' is not trainable", v->name);
        for (int j = 0; j < i; j++)
            if (grads[j].var == grads[i].var)
                return s_fail(r, -EINVAL, "apply_gradients: variable '%s' appears twice", v->name);
        if (grads[i].ids) {
            if (grads[i].nids < 0 || (grads[i].nids > 0 && !grads[i].values))
                return s_fail(r, -EINVAL, "apply_gradients: '%s': bad sparse gradient", v->name);
            for (int64_t k = 0; k < grads[i].nids && !v->dynamic; k++)
                if (grads[i].ids[k] < 0 || grads[i].ids[k] >= v->rows)
                    return s_fail(r, -ERANGE, "apply_gradients: id %lld is outside variable '%s' (%lld rows)",
                                  (long long)grads[i].ids[k], v->name, (long long)v->rows);
        } else if (v->dynamic) {
            return s_fail(r, -EINVAL, "apply_gradients: '%s' is a dynamic table: give its gradient by ids", v->name);
        } else if (!grads[i].values) {
            return s_fail(r, -EINVAL, "apply_gradients: '%s': no values", v->name);
        }
    }
    worker_backend_t *be = r->trainer->backend;
    int rc = be->ops->apply(be, r->replica, grads, n);
    if (rc == -EINVAL)
        return s_fail(r, rc, "apply_gradients: replicas passed different variable lists");
    return rc;
}

static int
s_all_reduce(zdist_replica_ctx_t *ctx, zdist_reduce_op_t op, float *const *bufs, const int64_t *lens, int n)
{
    s_replica_t *r = s_rep(ctx);
    if (op != ZDIST_REDUCE_SUM && op != ZDIST_REDUCE_MEAN)
        return s_fail(r, -EINVAL, "all_reduce: unknown reduce op %d", (int)op);
    if (n < 0 || (n > 0 && (!bufs || !lens)))
        return s_fail(r, -EINVAL, "all_reduce: bad tensor list");
    for (int i = 0; i < n; i++)
        if (lens[i] < 0 || (lens[i] > 0 && !bufs[i]))
            return s_fail(r, -EINVAL, "all_reduce: tensor %d: bad buffer or length", i);
    worker_backend_t *be = r->trainer->backend;
    int rc = be->ops->all_reduce(be, r->replica, op, bufs, lens, n);
    if (rc == -EINVAL)
        return s_fail(r, rc, "all_reduce: replicas passed different tensor counts or lengths");
    return rc;
}

static int
s_all_gather(zdist_replica_ctx_t *ctx, const float *in, const zdist_shape_t *shape, int axis, const float **ret,
             zdist_shape_t *ret_shape)
{
    s_replica_t *r = s_rep(ctx);
    if (!shape || shape->rank < 1 || shape->rank > ZDIST_MAX_RANK || axis < 0 || axis >= shape->rank)
        return s_fail(r, -EINVAL, "all_gather: axis %d is outside the tensor's rank", axis);
    int64_t n;
    if (zdist_shape_num_elements(shape, &n) < 0 || (n > 0 && !in))
        return s_fail(r, -EINVAL, "all_gather: bad tensor");
    worker_backend_t *be = r->trainer->backend;
    int rc = be->ops->all_gather(be, r->replica, in, shape, axis, ret, ret_shape);
    if (rc == -EINVAL)
        return s_fail(r, rc, "all_gather: replicas' shapes differ outside axis %d", axis);
    return rc;
}

static int
s_merge_call(zdist_replica_ctx_t *ctx, zdist_merge_fn fn, void *arg)
{
    s_replica_t *r = s_rep(ctx);
    if (!fn)
        return s_fail(r, -EINVAL, "merge_call: no function");
    worker_backend_t *be = r->trainer->backend;
    return be->ops->merge_call(be, r->replica, fn, arg);
}

/* merge_call_values: every replica's bytes, gathered (across workers too)
   as float32 rows of a [1, k] tensor along axis 0; the backend's merge_call
   then runs fn on one replica per worker with pointers into the gathered
   rows (the same on every replica of every worker). */
typedef struct {
    zdist_merge_fn fn;
    const char *all; /* [n * stride] */
    size_t stride;
    int n;
} s_mcv_t;

#define S_MCV_MAX_BYTES (1u << 20)

static int
s_mcv_trampoline(void *const *args, int num_local)
{
    (void)num_local;
    const s_mcv_t *m = args[0];
    void **ptrs = malloc((size_t)m->n * sizeof *ptrs);
    if (!ptrs)
        return -ENOMEM;
    for (int i = 0; i < m->n; i++)
        ptrs[i] = (void *)(m->all + (size_t)i * m->stride);
    int rc = m->fn(ptrs, m->n);
    free(ptrs);
    return rc;
}

static int
s_merge_call_values(zdist_replica_ctx_t *ctx, zdist_merge_fn fn, const void *arg, size_t size)
{
    s_replica_t *r = s_rep(ctx);
    if (!fn || !arg || size < 1 || size > S_MCV_MAX_BYTES)
        return s_fail(r, -EINVAL, "merge_call_values: a function and 1..%u bytes of argument are needed (got %zu)",
                      S_MCV_MAX_BYTES, size);
    /* 8-byte rows: k float32 slots, k even. */
    size_t k = (size + 7) / 8 * 2, stride = k * sizeof(float);
    float *row = calloc(k, sizeof *row);
    if (!row)
        return -ENOMEM;
    memcpy(row, arg, size);
    worker_backend_t *be = r->trainer->backend;
    zdist_shape_t shape = {2, {1, (int64_t)k}}, out_shape;
    const float *all = NULL;
    int rc = be->ops->all_gather(be, r->replica, row, &shape, 0, &all, &out_shape);
    free(row);
    if (rc == -EINVAL)
        return s_fail(r, rc, "merge_call_values: replicas passed arguments of different sizes");
    if (rc < 0)
        return rc;
    if (out_shape.dims[0] != s_num_replicas(ctx))
        return s_fail(r, -EPROTO, "merge_call_values: gathered %lld arguments for %d replicas",
                      (long long)out_shape.dims[0], s_num_replicas(ctx));
    s_mcv_t m = {.fn = fn, .all = (const char *)all, .stride = stride, .n = s_num_replicas(ctx)};
    return be->ops->merge_call(be, r->replica, s_mcv_trampoline, &m);
}

/* read_cross_replica of ONLY_FIRST_REPLICA: inside a merge_call, so replica
   0's copy is read while no replica writes. */
typedef struct {
    worker_backend_t *be;
    int var;
    int64_t n;
    float *out;
} s_rcr_t;

static int
s_read_first(void *const *args, int num_local)
{
    const s_rcr_t *a0 = args[0];
    const float *w = NULL;
    int rc = a0->be->ops->read(a0->be, 0, a0->var, &w);
    for (int q = 0; q < num_local && rc == 0; q++)
        memcpy(((const s_rcr_t *)args[q])->out, w, (size_t)a0->n * sizeof(float));
    return rc;
}

static int
s_read_cross_replica(zdist_replica_ctx_t *ctx, int var, float *out)
{
    s_replica_t *r = s_rep(ctx);
    int rc = s_check_var(r, var);
    if (rc < 0)
        return rc;
    const worker_var_t *v = &r->trainer->vars.vars[var];
    if (!out)
        return s_fail(r, -EINVAL, "read_cross_replica: '%s': no output buffer", v->name);
    worker_backend_t *be = r->trainer->backend;
    const float *w = NULL;
    if (v->synchronization == ZDIST_SYNC_ON_WRITE || v->aggregation == ZDIST_AGG_SUM ||
        v->aggregation == ZDIST_AGG_MEAN) {
        if ((rc = be->ops->read(be, r->replica, var, &w)) < 0)
            return rc;
        memcpy(out, w, (size_t)v->n * sizeof *out);
        if (v->synchronization == ZDIST_SYNC_ON_WRITE)
            return 0;
        /* Every replica of every worker: the backend's all-reduce (the ring
           under multi_worker_mirrored). */
        float *bufs[1] = {out};
        int64_t lens[1] = {v->n};
        return be->ops->all_reduce(be, r->replica, v->aggregation == ZDIST_AGG_SUM ? ZDIST_REDUCE_SUM : ZDIST_REDUCE_MEAN,
                                   bufs, lens, 1);
    }
    if (v->aggregation == ZDIST_AGG_ONLY_FIRST_REPLICA) {
        s_rcr_t a = {.be = be, .var = var, .n = v->n, .out = out};
        return be->ops->merge_call(be, r->replica, s_read_first, &a);
    }
    zdist_reduce_op_t op;
    zdist_error_t why = {0};
    zdist_reduce_op_from_aggregation(v->aggregation, &op, &why);
    return s_fail(r, -EINVAL, "read_cross_replica: variable '%s': %s", v->name, why.text);
}

static int
s_assign_any(zdist_replica_ctx_t *ctx, int var, const float *values, bool add)
{
    s_replica_t *r = s_rep(ctx);
    int rc = s_check_var(r, var);
    if (rc < 0)
        return rc;
    const worker_var_t *v = &r->trainer->vars.vars[var];
    if (!values)
        return s_fail(r, -EINVAL, "assign: '%s': no values", v->name);
    zdist_error_t why = {0};
    if (zdist_distribute_check_replica_write(v->synchronization, v->aggregation, ZDIST_DTYPE_FLOAT32,
                                             s_num_replicas(ctx), &why) < 0)
        return s_fail(r, -EINVAL, "assign: variable '%s' has aggregation NONE: %s", v->name, why.text);
    worker_backend_t *be = r->trainer->backend;
    return be->ops->assign(be, r->replica, var, values, add);
}

static int
s_assign(zdist_replica_ctx_t *ctx, int var, const float *values)
{
    return s_assign_any(ctx, var, values, false);
}

static int
s_assign_add(zdist_replica_ctx_t *ctx, int var, const float *delta)
{
    return s_assign_any(ctx, var, delta, true);
}

static int
s_output(zdist_replica_ctx_t *ctx, const char *name, double value, zdist_reduce_op_t op)
{
    s_replica_t *r = s_rep(ctx);
    if (!name || !*name || strlen(name) >= WORKER_OUTPUT_NAME_MAX)
        return s_fail(r, -EINVAL, "output: a name of 1..%d characters is needed", WORKER_OUTPUT_NAME_MAX - 1);
    if (op != ZDIST_REDUCE_SUM && op != ZDIST_REDUCE_MEAN)
        return s_fail(r, -EINVAL, "output '%s': unknown reduce op %d", name, (int)op);
    for (int i = 0; i < r->nout; i++)
        if (strcmp(r->outputs[i].name, name) == 0) {
            r->outputs[i].value = value;
            r->outputs[i].op = op;
            return 0;
        }
    if (r->nout == WORKER_MAX_OUTPUTS)
        return s_fail(r, -E2BIG, "output '%s': at most %d outputs per step", name, WORKER_MAX_OUTPUTS);
    s_output_t *o = &r->outputs[r->nout++];
    snprintf(o->name, sizeof o->name, "%s", name);
    o->value = value;
    o->op = op;
    return 0;
}

static int
s_predictions(zdist_replica_ctx_t *ctx, const float *probabilities, int64_t n)
{
    s_replica_t *r = s_rep(ctx);
    if (n != r->batch.size || (n > 0 && !probabilities))
        return s_fail(r, -EINVAL, "predictions: %lld given for a batch of %lld examples", (long long)n,
                      (long long)r->batch.size);
    if (n > r->pred_cap) { /* grows to the largest batch once */
        float *p = realloc(r->pred, (size_t)n * sizeof *p);
        if (!p)
            return s_fail(r, -ENOMEM, "predictions: out of memory for %lld", (long long)n);
        r->pred = p;
        r->pred_cap = n;
    }
    if (n > 0)
        memcpy(r->pred, probabilities, (size_t)n * sizeof *r->pred);
    r->npred = n;
    return 0;
}

static void *
s_scratch(zdist_replica_ctx_t *ctx, int slot, size_t bytes)
{
    s_replica_t *r = s_rep(ctx);
    if (slot < 0 || slot >= ZDIST_SCRATCH_SLOTS)
        return NULL;
    if (bytes > r->scratch_size[slot] || !r->scratch[slot]) {
        void *p = NULL;
        if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
            return NULL;
        memset(p, 0, bytes);
        if (r->scratch[slot])
            memcpy(p, r->scratch[slot], r->scratch_size[slot]);
        free(r->scratch[slot]);
        r->scratch[slot] = p;
        r->scratch_size[slot] = bytes;
    }
    return r->scratch[slot];
}

static void
s_set_error(zdist_replica_ctx_t *ctx, int code, const char *text)
{
    s_replica_t *r = s_rep(ctx);
    (void)code;
    snprintf(r->error, sizeof r->error, "%s", text ? text : "");
}

static int
s_num_logical_devices(zdist_replica_ctx_t *ctx)
{
    return s_rep(ctx)->trainer->ndev;
}

static int
s_run_on_logical_devices(zdist_replica_ctx_t *ctx, int device, zdist_device_fn fn, void *arg)
{
    s_replica_t *r = s_rep(ctx);
    int ndev = r->trainer->ndev;
    if (!fn || device < -1 || device >= ndev)
        return s_fail(r, -EINVAL, "run_on_logical_devices: device %d is outside -1..%d (%d logical devices per "
                      "replica)", device, ndev - 1, ndev);
    return zdist_replicas_run_on_devices(r->trainer->rt, r->replica, device, fn, arg);
}

static const zdist_replica_ops_t s_replica_ops = {
    .size = sizeof(zdist_replica_ops_t),
    .replica_id_in_sync_group = s_replica_id,
    .num_replicas_in_sync = s_num_replicas,
    .next_batch = s_next_batch,
    .variable = s_variable,
    .read = s_read,
    .read_rows = s_read_rows,
    .apply_gradients = s_apply_gradients,
    .all_reduce = s_all_reduce,
    .all_gather = s_all_gather,
    .merge_call = s_merge_call,
    .assign = s_assign,
    .assign_add = s_assign_add,
    .output = s_output,
    .scratch = s_scratch,
    .set_error = s_set_error,
    .merge_call_values = s_merge_call_values,
    .read_cross_replica = s_read_cross_replica,
    .num_logical_devices = s_num_logical_devices,
    .run_on_logical_devices = s_run_on_logical_devices,
    .predictions = s_predictions,
    .read_rows_many = s_read_rows_many,
};

/* ---- the local backend: the step.h backend ops onto libzdist's mirrored variables (zdist/mirror.h) ---- */

typedef struct {
    worker_backend_t base;
    zdist_mirror_t *m;
    const worker_vars_t *vars; /* borrowed, for the initial values */
    zdist_mirror_var_t *mvars; /* [vars->n], names borrowed from vars */
    uint64_t seed;
} s_local_t;

static const worker_backend_ops_t s_local_ops;

static zdist_mirror_t *
s_mirror(worker_backend_t *be)
{
    return ((s_local_t *)be)->m;
}

static int
s_local_read(worker_backend_t *be, int replica, int var, const float **ret)
{
    return zdist_mirror_read(s_mirror(be), replica, var, ret);
}

static int
s_local_read_rows(worker_backend_t *be, int replica, int var, const int64_t *ids, int64_t n, float *out)
{
    return zdist_mirror_read_rows(s_mirror(be), replica, var, ids, n, out);
}

static int
s_local_apply(worker_backend_t *be, int replica, const zdist_grad_t *grads, int n)
{
    return zdist_mirror_apply(s_mirror(be), replica, grads, n);
}

static int
s_local_assign(worker_backend_t *be, int replica, int var, const float *values, bool add)
{
    return zdist_mirror_assign(s_mirror(be), replica, var, values, add);
}

static int
s_local_all_reduce(worker_backend_t *be, int replica, zdist_reduce_op_t op, float *const *bufs,
                   const int64_t *lens, int n)
{
    return zdist_mirror_all_reduce(s_mirror(be), replica, op, bufs, lens, n);
}

static int
s_local_all_gather(worker_backend_t *be, int replica, const float *in, const zdist_shape_t *shape, int axis,
                   const float **ret, zdist_shape_t *ret_shape)
{
    return zdist_mirror_all_gather(s_mirror(be), replica, in, shape, axis, ret, ret_shape);
}

static int
s_local_merge_call(worker_backend_t *be, int replica, zdist_merge_fn fn, void *arg)
{
    return zdist_mirror_merge_call(s_mirror(be), replica, fn, arg);
}

static int
s_local_read_cross_replica(worker_backend_t *be, int var, float *out, zdist_error_t *err)
{
    return zdist_mirror_read_cross_replica(s_mirror(be), var, out, err);
}

/* Nothing to do: a replica that returns from its step departs from the
   runtime's barrier, which releases the others (-EPIPE). */
static void
s_local_abort(worker_backend_t *be)
{
    (void)be;
}

static void
s_local_destroy(worker_backend_t **be_p)
{
    if (!be_p || !*be_p)
        return;
    s_local_t *self = (s_local_t *)*be_p;
    zdist_mirror_destroy(&self->m);
    free(self->mvars);
    free(self);
    *be_p = NULL;
}

static const worker_backend_ops_t s_local_ops = {
    .name = "local",
    .read = s_local_read,
    .read_rows = s_local_read_rows,
    .apply = s_local_apply,
    .assign = s_local_assign,
    .all_reduce = s_local_all_reduce,
    .all_gather = s_local_all_gather,
    .merge_call = s_local_merge_call,
    .read_cross_replica = s_local_read_cross_replica,
    .abort = s_local_abort,
    .destroy = s_local_destroy,
};

static int
s_local_init(void *arg, int var, float *buf, zdist_error_t *err)
{
    s_local_t *self = arg;
    return worker_vars_init_values(&self->vars->vars[var], self->seed, buf, err);
}

static worker_backend_t *
s_local_new(zdist_strategy_t kind, zdist_replicas_t *rt, const worker_vars_t *vars,
            const zdist_optim_config_t *optim, uint64_t seed, zdist_error_t *err)
{
    s_local_t *self = calloc(1, sizeof *self);
    if (self)
        self->mvars = calloc((size_t)(vars->n > 0 ? vars->n : 1), sizeof *self->mvars);
    if (!self || !self->mvars) {
        free(self);
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->base.ops = &s_local_ops;
    self->vars = vars;
    self->seed = seed;
    for (int v = 0; v < vars->n; v++) {
        const worker_var_t *w = &vars->vars[v];
        if (w->dynamic) {
            zdist_error_set(err, -EINVAL, "variable '%s' is a dynamic embedding table (no input_dim): only strategy "
                            "parameter_server serves one; use it, or give the embedding an input_dim", w->name);
            worker_backend_t *be = &self->base;
            s_local_destroy(&be);
            return NULL;
        }
        self->mvars[v] = (zdist_mirror_var_t){.name = w->name, .shape = w->shape,
                                              .synchronization = w->synchronization,
                                              .aggregation = w->aggregation, .trainable = w->trainable,
                                              .rows = w->rows, .width = w->width, .n = w->n};
    }
    self->m = zdist_mirror_new(kind, rt, self->mvars, vars->n, optim, s_local_init, self, err);
    if (!self->m) {
        worker_backend_t *be = &self->base;
        s_local_destroy(&be);
        return NULL;
    }
    return &self->base;
}

bool
worker_local_is(const worker_backend_t *be)
{
    return be && be->ops == &s_local_ops;
}

const float *
worker_local_copy(worker_backend_t *be, int replica, int var)
{
    return worker_local_is(be) ? zdist_mirror_copy(s_mirror(be), replica, var) : NULL;
}

void
worker_local_set_comm(worker_backend_t *be, zdist_comm_t *comm, int num_workers, int64_t timeout_ms)
{
    zdist_mirror_set_comm(s_mirror(be), comm, num_workers, timeout_ms);
}

const char *
worker_local_last_error(worker_backend_t *be)
{
    return worker_local_is(be) ? zdist_mirror_last_error(s_mirror(be)) : "";
}

int
worker_local_num_slots(const worker_backend_t *be)
{
    return zdist_mirror_num_slots(((const s_local_t *)be)->m);
}

int64_t
worker_local_iterations(const worker_backend_t *be)
{
    return zdist_mirror_iterations(((const s_local_t *)be)->m);
}

const float *
worker_local_slot(worker_backend_t *be, int var, int slot)
{
    return zdist_mirror_slot(s_mirror(be), var, slot);
}

int
worker_local_set_state(worker_backend_t *be, int var, const float *values, const float *const *slots)
{
    return zdist_mirror_set_state(s_mirror(be), var, values, slots);
}

void
worker_local_set_iterations(worker_backend_t *be, int64_t iterations)
{
    zdist_mirror_set_iterations(s_mirror(be), iterations);
}

/* ---- running replicas ---- */

static void
s_run_replica(worker_trainer_t *self, s_replica_t *r)
{
    const zdist_batch_t *b = &self->step->replicas[r->replica];
    r->batch = (zdist_step_batch_t){
        .size = b->size,
        .dim = self->dim,
        .global_size = self->eval ? self->step->size : self->step->size * self->num_workers,
        .features = b->features,
        .row_offsets = b->row_offsets,
        .feature_ids = b->feature_ids,
        .feature_values = b->feature_values,
        .label_dtype = self->label_dtype,
        .labels = b->labels,
        .ncolumns = b->ncolumns,
        .columns = b->columns,
    };
    r->batch_given = false;
    r->nout = 0;
    r->npred = -1;
    r->error[0] = '\0';
    r->rc = self->eval ? self->model->eval_step(self->state, &r->base)
                       : self->model->train_step(self->state, &r->base);
    if (r->rc < 0)
        self->backend->ops->abort(self->backend);
}

/* Pins the calling thread, logical device `slot` of the trainer, to a core
   of the process's affinity (round robin when oversubscribed). */
static void
s_pin(void *arg, int slot)
{
    worker_trainer_t *self = arg;
    if (!self->pin || self->ncpus < 1)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(self->cpus[slot % self->ncpus], &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (rc != 0 && !atomic_exchange(&self->pin_warned, true))
        fprintf(stderr, "zdist-worker: cannot pin logical device threads to cores (%s); they run unpinned\n",
                strerror(rc));
}

/* Replica r's turn of a step, on its runtime thread (replica 0: maybe the
   caller's). */
static void
s_replica_main(void *arg, int replica)
{
    worker_trainer_t *self = arg;
    s_run_replica(self, &self->replicas[replica]);
}

void
worker_trainer_destroy(worker_trainer_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    worker_trainer_t *self = *self_p;
    zdist_replicas_destroy(&self->rt);
    if (self->replicas) {
        for (int i = 0; i < self->n; i++) {
            s_replica_t *r = &self->replicas[i];
            for (int s = 0; s < ZDIST_SCRATCH_SLOTS; s++)
                free(r->scratch[s]);
            worker_rows_free(&r->rows);
            free(r->pred);
        }
        free(self->replicas);
    }
    if (self->backend)
        self->backend->ops->destroy(&self->backend);
    worker_vars_release(&self->vars);
    if (self->state_made && self->model->destroy)
        self->model->destroy(self->state);
    free(self);
    *self_p = NULL;
}

worker_trainer_t *
worker_trainer_new(const zdist_model_t *model, const char *params_json, const zdist_model_info_t *info,
                   const worker_trainer_config_t *cfg, zdist_error_t *err)
{
    if (!model || !model->build || !model->train_step || !model->eval_step) {
        zdist_error_set(err, -EINVAL, "model '%s' lacks a build, train_step or eval_step hook",
                        model && model->name ? model->name : "(null)");
        return NULL;
    }
    worker_trainer_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->model = model;
    self->n = cfg->num_replicas;
    self->ndev = cfg->logical_devices > 1 ? cfg->logical_devices : 1;
    self->pin = cfg->pin;
    if (self->pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof set, &set) == 0)
            for (int c = 0; c < CPU_SETSIZE; c++)
                if (CPU_ISSET(c, &set))
                    self->cpus[self->ncpus++] = c;
    }
    self->num_workers = cfg->num_workers > 0 ? cfg->num_workers : 1;
    self->worker_index = cfg->worker_index;
    self->dim = info->input_dim;
    self->label_dtype = info->label_dtype;
    if (model->init) {
        if (model->init(params_json ? params_json : "{}", info, &self->state, err) < 0) {
            zdist_error_prefix(err, "model '%s'", model->name);
            goto fail;
        }
        self->state_made = true;
    }
    if (worker_vars_build(model, self->state, &self->vars, err) < 0) {
        zdist_error_prefix(err, "model '%s'", model->name);
        goto fail;
    }
    /* With pinning every replica's thread is the runtime's, replica 0's too. */
    zdist_replicas_config_t rt_cfg = {.replicas = self->n, .devices = self->ndev, .caller_runs_first = !self->pin,
                                      .on_thread_start = s_pin, .on_thread_arg = self};
    if (zdist_replicas_new(&rt_cfg, &self->rt, err) < 0)
        goto fail;
    self->backend = cfg->make_backend
                        ? cfg->make_backend(&self->vars, cfg->make_backend_arg, err)
                        : s_local_new(cfg->strategy, self->rt, &self->vars, &cfg->optim, cfg->seed, err);
    if (!self->backend)
        goto fail;
    self->replicas = calloc((size_t)self->n, sizeof *self->replicas);
    if (!self->replicas) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < self->n; i++) {
        s_replica_t *r = &self->replicas[i];
        r->base.ops = &s_replica_ops;
        r->trainer = self;
        r->replica = i;
    }
    return self;
fail:
    worker_trainer_destroy(&self);
    return NULL;
}


/* Each named output reduced over the replicas that produced it, with its
   op (Strategy.reduce of a per-replica scalar, axis None). */
static void
s_reduce_outputs(const worker_trainer_t *self, worker_outputs_t *ret)
{
    memset(ret, 0, sizeof *ret);
    for (int i = 0; i < self->n; i++)
        for (int k = 0; k < self->replicas[i].nout; k++) {
            const char *name = self->replicas[i].outputs[k].name;
            int j = 0;
            while (j < ret->n && strcmp(ret->names[j], name) != 0)
                j++;
            if (j < ret->n || ret->n == WORKER_MAX_OUTPUTS)
                continue;
            snprintf(ret->names[ret->n++], WORKER_OUTPUT_NAME_MAX, "%s", name);
            zdist_tensor_t values[WORKER_MAX_REPLICAS];
            zdist_reduce_op_t op = ZDIST_REDUCE_SUM;
            int nv = 0;
            for (int q = i; q < self->n; q++)
                for (int m = 0; m < self->replicas[q].nout; m++)
                    if (nv < WORKER_MAX_REPLICAS && strcmp(self->replicas[q].outputs[m].name, name) == 0) {
                        values[nv++] = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT64,
                                                        .data = (void *)&self->replicas[q].outputs[m].value,
                                                        .nbytes = sizeof(double)};
                        op = self->replicas[q].outputs[m].op;
                    }
            zdist_tensor_t dest = {.dtype = ZDIST_DTYPE_FLOAT64, .data = &ret->values[j], .nbytes = sizeof(double)};
            (void)zdist_distribute_reduce_to(op, values, nv, &dest, 1, NULL); /* checked: scalars, SUM/MEAN */
        }
}

/* A replica released from a collective because another left the step: the
   runtime's barrier (-EPIPE) or the psd backend's abort (-ECANCELED). */
static bool
s_released(int rc)
{
    return rc == -EPIPE || rc == -ECANCELED;
}

int
worker_trainer_step(worker_trainer_t *self, const zdist_input_step_t *step, bool eval, worker_outputs_t *ret,
                    zdist_error_t *err)
{
    if (self->failed)
        return zdist_error_set(err, -ECANCELED, "an earlier step failed: the replicas are out of step");
    if (step->num_replicas != self->n)
        return zdist_error_set(err, -EINVAL, "the input gives %d replica batches, the strategy has %d replicas",
                               step->num_replicas, self->n);
    self->step = step;
    self->eval = eval;
    zdist_replicas_run(self->rt, s_replica_main, self);

    /* The root cause is a failure other than a released replica's. */
    int first = -1;
    for (int i = 0; i < self->n; i++)
        if (self->replicas[i].rc < 0 && (first < 0 || (s_released(self->replicas[first].rc) &&
                                                       !s_released(self->replicas[i].rc))))
            first = i;
    if (first >= 0) {
        s_replica_t *r = &self->replicas[first];
        self->failed = true;
        return zdist_error_set(err, r->rc, "model '%s': %s step failed on replica %d: %s", self->model->name,
                               eval ? "eval" : "train", first, r->error[0] ? r->error : strerror(-r->rc));
    }
    if (ret)
        s_reduce_outputs(self, ret);
    return 0;
}

int64_t
worker_trainer_predictions(const worker_trainer_t *self, int replica, const float **ret)
{
    if (replica < 0 || replica >= self->n || self->replicas[replica].npred < 0)
        return -1;
    *ret = self->replicas[replica].pred;
    return self->replicas[replica].npred;
}

int
worker_trainer_num_replicas(const worker_trainer_t *self)
{
    return self->n;
}

const worker_vars_t *
worker_trainer_vars(const worker_trainer_t *self)
{
    return &self->vars;
}

worker_backend_t *
worker_trainer_backend(worker_trainer_t *self)
{
    return self->backend;
}

int
worker_trainer_read_variable(worker_trainer_t *self, const char *name, float *out, zdist_error_t *err)
{
    int v = worker_vars_find(&self->vars, name);
    if (v < 0)
        return zdist_error_set(err, -ENOENT, "no variable '%s' in model '%s'", name ? name : "(null)",
                               self->model->name);
    return self->backend->ops->read_cross_replica(self->backend, v, out, err);
}
