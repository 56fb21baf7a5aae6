/* CUnit suite: zdist/strategy.h, the Strategy object of the local strategies, against TF's documented
   examples (docstring values) and TF's messages for calls made in the wrong context. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zdist/collective.h"
#include "zdist/job.h"
#include "zdist/strategy.h"
#include "zdist/sys.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

static const char s_cross_text[] =
    "Method requires being in cross-replica context, use get_replica_context().merge_call()";
static const char s_gather_text[] = "tf.distribute.Strategy.gather method requires cross-replica context, "
                                    "use get_replica_context().all_gather() "
                                    "instead";

static zdist_strategy_object_t *
s_new(zdist_strategy_t kind, int n)
{
    zdist_strategy_spec_t spec = {.kind = kind, .num_replicas = n};
    zdist_strategy_object_t *s = NULL;
    zdist_error_t err;
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_new(&spec, &s, &err), 0);
    return s;
}

static zdist_tensor_t
s_scalar_f32(float v)
{
    float *p = malloc(sizeof *p);
    *p = v;
    return (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = {.rank = 0}, .data = p, .nbytes = 4};
}

static float
s_f(const zdist_tensor_t *t, int i)
{
    return ((const float *) t->data)[i];
}

/* ------------------------------------------------------------------------ */

static void
test_new_and_specs(void)
{
    zdist_strategy_spec_t spec;
    zdist_error_t err;
    CU_ASSERT_EQUAL(zdist_strategy_spec_parse("mirrored:4", &spec, &err), 0);
    CU_ASSERT_EQUAL(spec.kind, ZDIST_STRATEGY_MIRRORED);
    CU_ASSERT_EQUAL(spec.num_replicas, 4);
    CU_ASSERT_EQUAL(zdist_strategy_spec_parse("one_device", &spec, &err), 0);
    CU_ASSERT_EQUAL(spec.kind, ZDIST_STRATEGY_ONE_DEVICE);
    CU_ASSERT_EQUAL(spec.num_replicas, 1);
    CU_ASSERT_EQUAL(zdist_strategy_spec_parse("mirrored:0", &spec, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "replica count"));
    CU_ASSERT_EQUAL(zdist_strategy_spec_parse("mirorred", &spec, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "unknown strategy \"mirorred\""));

    zdist_strategy_object_t *s = NULL;
    spec = (zdist_strategy_spec_t){.kind = ZDIST_STRATEGY_ONE_DEVICE, .num_replicas = 2};
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &s, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "one_device runs exactly 1 replica"));
    CU_ASSERT_PTR_NULL(s);
    /* multi_worker_mirrored needs its place and ring; parameter_server is refused, saying where it runs */
    spec = (zdist_strategy_spec_t){.kind = ZDIST_STRATEGY_MULTI_WORKER_MIRRORED, .num_replicas = 1};
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &s, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "needs num_workers >= 1 and worker_index in 0..num_workers-1"));
    spec.num_workers = 2;
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &s, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "needs comm, a connected zdist/collective.h ring"));
    spec.kind = ZDIST_STRATEGY_PARAMETER_SERVER;
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &s, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "parameter_server needs coordinator, the ClusterCoordinator's options"));
    CU_ASSERT_PTR_NULL(s);

    s = s_new(ZDIST_STRATEGY_MIRRORED, 0);
    CU_ASSERT_EQUAL(zdist_strategy_num_replicas_in_sync(s), 1);
    CU_ASSERT_STRING_EQUAL(zdist_strategy_class_name(s), "MirroredStrategy");
    zdist_strategy_destroy(&s);
    CU_ASSERT_PTR_NULL(s);
    zdist_strategy_destroy(&s);
    s = s_new(ZDIST_STRATEGY_CENTRAL_STORAGE, 3);
    CU_ASSERT_EQUAL(zdist_strategy_num_replicas_in_sync(s), 3);
    CU_ASSERT_STRING_EQUAL(zdist_strategy_class_name(s), "CentralStorageStrategy");
    zdist_strategy_destroy(&s);
}

/* ------------------------------------------------------------------------ */
/* Contexts (get_replica_context's docstring)                                 */

typedef struct {
    zdist_strategy_object_t *s;
    int ok[4];
} ctx_probe_t;

static int
s_probe_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) err;
    ctx_probe_t *p = arg;
    int id = zdist_strategy_replica_id(ctx);
    p->ok[id] = zdist_strategy_get_replica_context() == ctx && !zdist_strategy_in_cross_replica_context() &&
                zdist_strategy_current() == p->s && zdist_strategy_replica_strategy(ctx) == p->s &&
                zdist_strategy_replica_num_replicas_in_sync(ctx) == 2;
    /* Strategy.reduce's docstring: step_fn returns replica_id_in_sync_group */
    *ret = s_scalar_f32((float) id);
    return 0;
}

static void
test_contexts_and_reduce_docstring(void)
{
    zdist_strategy_object_t *s = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    zdist_strategy_object_t *other = s_new(ZDIST_STRATEGY_ONE_DEVICE, 1);
    zdist_error_t err;
    /* assert tf.distribute.get_replica_context() is not None  # default */
    CU_ASSERT_FALSE(zdist_strategy_in_cross_replica_context());
    CU_ASSERT_PTR_NULL(zdist_strategy_current());
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_scope_enter(s, &err), 0);
    CU_ASSERT_TRUE(zdist_strategy_in_cross_replica_context());
    CU_ASSERT_PTR_NULL(zdist_strategy_get_replica_context());
    CU_ASSERT_PTR_EQUAL(zdist_strategy_current(), s);
    /* the same scope again nests */
    CU_ASSERT_EQUAL(zdist_strategy_scope_enter(s, &err), 0);
    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(s, &err), 0);
    CU_ASSERT_TRUE(zdist_strategy_in_cross_replica_context());
    /* another strategy's scope inside it: TF's text */
    CU_ASSERT_EQUAL(zdist_strategy_scope_enter(other, &err), -EPERM);
    CU_ASSERT_STRING_EQUAL(
        err.text,
        "Mixing different tf.distribute.Strategy objects: MirroredStrategy is not OneDeviceStrategy");
    zdist_tensor_t one = s_scalar_f32(1), out;
    CU_ASSERT_EQUAL(zdist_strategy_reduce(other, ZDIST_REDUCE_SUM, &one, 1, ZDIST_AXIS_NONE, &out, &err),
                    -EPERM);
    CU_ASSERT_STRING_EQUAL(
        err.text,
        "Mixing different tf.distribute.Strategy objects: MirroredStrategy is not OneDeviceStrategy");

    ctx_probe_t probe = {.s = s};
    zdist_tensor_t r[2];
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(s, s_probe_fn, &probe, NULL, r, &err), 0);
    CU_ASSERT_TRUE(probe.ok[0]);
    CU_ASSERT_TRUE(probe.ok[1]);
    CU_ASSERT_EQUAL(s_f(&r[0], 0), 0.0f);
    CU_ASSERT_EQUAL(s_f(&r[1], 0), 1.0f);
    /* total = strategy.reduce("SUM", per_replica_result, axis=None) -> 1 */
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_reduce(s, ZDIST_REDUCE_SUM, r, 2, ZDIST_AXIS_NONE, &out, &err), 0);
    CU_ASSERT_EQUAL(s_f(&out, 0), 1.0f);
    free(out.data);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_reduce(s, ZDIST_REDUCE_MEAN, r, 2, ZDIST_AXIS_NONE, &out, &err), 0);
    CU_ASSERT_EQUAL(s_f(&out, 0), 0.5f);
    free(out.data);
    /* a value that is not distributed (reduce_non_distributed_value): MEAN is
       the value, SUM over 2 replicas TF's ValueError, zeros stay zeros */
    zdist_tensor_t five = s_scalar_f32(5), zero = s_scalar_f32(0);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_reduce(s, ZDIST_REDUCE_MEAN, &five, 1, ZDIST_AXIS_NONE, &out, &err),
                          0);
    CU_ASSERT_EQUAL(s_f(&out, 0), 5.0f);
    free(out.data);
    CU_ASSERT_EQUAL(zdist_strategy_reduce(s, ZDIST_REDUCE_SUM, &five, 1, ZDIST_AXIS_NONE, &out, &err),
                    -EINVAL);
    CU_ASSERT_STRING_EQUAL(
        err.text,
        "A non-DistributedValues value 5.0 cannot be reduced with the given reduce op ReduceOp.SUM.");
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_reduce(s, ZDIST_REDUCE_SUM, &zero, 1, ZDIST_AXIS_NONE, &out, &err),
                          0);
    CU_ASSERT_EQUAL(s_f(&out, 0), 0.0f);
    free(out.data);
    free(five.data);
    free(zero.data);
    /* local results of a local strategy: every replica's value */
    const zdist_tensor_t *local = NULL;
    int nlocal = 0;
    CU_ASSERT_EQUAL(zdist_strategy_experimental_local_results(s, r, 2, &local, &nlocal, &err), 0);
    CU_ASSERT_EQUAL(nlocal, 2);
    CU_ASSERT_PTR_EQUAL(local, r);
    /* bad arguments name the fix */
    CU_ASSERT_EQUAL(zdist_strategy_gather(s, r, 3, 0, &out, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "3 values for a MirroredStrategy of 2 replicas"));
    CU_ASSERT_EQUAL(zdist_strategy_run(s, NULL, NULL, NULL, NULL, &err), -EINVAL);
    zdist_strategy_values_free(r, 2);
    CU_ASSERT_PTR_NULL(r[0].data);

    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(s, &err), 0);
    CU_ASSERT_FALSE(zdist_strategy_in_cross_replica_context());
    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(s, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "exit without enter"));
    /* the default context allows the cross-replica methods (TF's default replica mode) */
    CU_ASSERT_EQUAL(zdist_strategy_reduce(other, ZDIST_REDUCE_SUM, &one, 1, ZDIST_AXIS_NONE, &out, &err), 0);
    CU_ASSERT_EQUAL(s_f(&out, 0), 1.0f);
    free(out.data);
    free(one.data);
    zdist_strategy_destroy(&other);
    zdist_strategy_destroy(&s);
}

/* ------------------------------------------------------------------------ */
/* Wrong context: TF's messages from inside run                               */

typedef struct {
    zdist_strategy_object_t *s;
    int rc[6];
    char text[6][ZDIST_ERROR_TEXT_MAX];
} wrong_ctx_t;

static int
s_wrong_ctx_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) ret;
    (void) err;
    wrong_ctx_t *w = arg;
    if (zdist_strategy_replica_id(ctx) != 0)
        return 0;
    zdist_error_t e;
    float one = 1;
    zdist_tensor_t v[1] = {{.dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {1}}, .data = &one, .nbytes = 4}};
    zdist_tensor_t out;
#define W(i, call)                                                                                           \
    do {                                                                                                     \
        memset(&e, 0, sizeof e);                                                                             \
        w->rc[i] = (call);                                                                                   \
        memcpy(w->text[i], e.text, sizeof e.text);                                                           \
    } while (0)
    W(0, zdist_strategy_gather(w->s, v, 1, 0, &out, &e));
    W(1, zdist_strategy_reduce(w->s, ZDIST_REDUCE_SUM, v, 1, ZDIST_AXIS_NONE, &out, &e));
    W(2, zdist_strategy_run(w->s, s_wrong_ctx_fn, arg, NULL, NULL, &e));
    W(3, zdist_strategy_scope_enter(w->s, &e));
    zdist_strategy_var_def_t def = {.name = "late", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {1}}};
    zdist_strategy_var_t *var = NULL;
    W(4, zdist_strategy_variable_new(w->s, &def, &var, &e));
    zdist_tensor_t d = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {1}}, .data = &one, .nbytes = 4};
    W(5, zdist_strategy_extended_reduce_to(w->s, ZDIST_REDUCE_SUM, v, 1, NULL, &d, 1, &e));
#undef W
    return 0;
}

static zdist_strategy_replica_t *s_leaked_ctx;

static int
s_leak_ctx_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) arg;
    (void) ret;
    (void) err;
    if (zdist_strategy_replica_id(ctx) == 0)
        s_leaked_ctx = ctx;
    return 0;
}

static void
test_wrong_context_messages(void)
{
    zdist_strategy_object_t *s = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    zdist_error_t err;
    wrong_ctx_t w = {.s = s};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(s, s_wrong_ctx_fn, &w, NULL, NULL, &err), 0);
    CU_ASSERT_EQUAL(w.rc[0], -EPERM);
    CU_ASSERT_STRING_EQUAL(w.text[0], s_gather_text);
    for (int i = 1; i < 6; i++) {
        CU_ASSERT_EQUAL(w.rc[i], -EPERM);
        CU_ASSERT_STRING_EQUAL(w.text[i], s_cross_text);
    }
    /* a variable outside every scope */
    zdist_strategy_var_def_t def = {.name = "w", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}};
    zdist_strategy_var_t *var = NULL;
    CU_ASSERT_EQUAL(zdist_strategy_variable_new(s, &def, &var, &err), -EPERM);
    CU_ASSERT_STRING_EQUAL(err.text, "Need to be inside \"with strategy.scope()\" for MirroredStrategy");
    CU_ASSERT_PTR_NULL(var);
    /* a ReplicaContext method called outside run */
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(s, s_leak_ctx_fn, NULL, NULL, NULL, &err), 0);
    float one = 1;
    zdist_tensor_t v = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &one, .nbytes = 4}, out;
    CU_ASSERT_EQUAL(zdist_strategy_replica_all_reduce(s_leaked_ctx, ZDIST_REDUCE_SUM, &v, &out, &err),
                    -EPERM);
    CU_ASSERT_STRING_EQUAL(err.text, "Need to be inside `call_for_each_replica()`");
    CU_ASSERT_EQUAL(zdist_strategy_replica_all_gather(NULL, &v, 0, &out, &err), -EPERM);
    CU_ASSERT_STRING_EQUAL(err.text, "Need to be inside `call_for_each_replica()`");
    zdist_strategy_destroy(&s);
}

/* distribute_lib.py require_replica_context's last case: a ReplicaContext
   used from a replica thread of another strategy, "Mismatching
   tf.distribute.Strategy objects: %s is not %s." (the thread's strategy,
   then the context's). The one_device run holds its context open while a
   mirrored run's replica calls all_reduce on it. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    zdist_strategy_replica_t *held; /* the one_device run's context, while it waits */
    bool done;
    int rc;
    char text[ZDIST_ERROR_TEXT_MAX];
} mismatch_t;

static int
s_hold_ctx_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) ret;
    (void) err;
    mismatch_t *m = arg;
    pthread_mutex_lock(&m->mu);
    m->held = ctx;
    pthread_cond_broadcast(&m->cv);
    while (!m->done)
        pthread_cond_wait(&m->cv, &m->mu);
    pthread_mutex_unlock(&m->mu);
    return 0;
}

static void *
s_hold_main(void *arg)
{
    mismatch_t *m = arg;
    zdist_strategy_spec_t spec = {.kind = ZDIST_STRATEGY_ONE_DEVICE};
    zdist_strategy_object_t *one = NULL;
    zdist_error_t err;
    if (zdist_strategy_new(&spec, &one, &err) == 0)
        (void) zdist_strategy_run(one, s_hold_ctx_fn, m, NULL, NULL, &err);
    zdist_strategy_destroy(&one);
    return NULL;
}

static int
s_use_other_ctx_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) ret;
    (void) err;
    mismatch_t *m = arg;
    if (zdist_strategy_replica_id(ctx) != 0)
        return 0;
    float one = 1;
    zdist_tensor_t v = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &one, .nbytes = 4}, out;
    zdist_error_t e = {0};
    m->rc = zdist_strategy_replica_all_reduce(m->held, ZDIST_REDUCE_SUM, &v, &out, &e);
    snprintf(m->text, sizeof m->text, "%s", e.text);
    return 0;
}

static void
test_mismatching_strategy_objects(void)
{
    mismatch_t m = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, s_hold_main, &m), 0);
    pthread_mutex_lock(&m.mu);
    while (!m.held)
        pthread_cond_wait(&m.cv, &m.mu);
    pthread_mutex_unlock(&m.mu);
    zdist_strategy_object_t *s = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    zdist_error_t err;
    CU_ASSERT_EQUAL(zdist_strategy_run(s, s_use_other_ctx_fn, &m, NULL, NULL, &err), 0);
    CU_ASSERT_EQUAL(m.rc, -EPERM);
    CU_ASSERT_STRING_EQUAL(m.text, "Mismatching tf.distribute.Strategy objects: MirroredStrategy is not "
                                   "OneDeviceStrategy.");
    zdist_strategy_destroy(&s);
    pthread_mutex_lock(&m.mu);
    m.done = true;
    pthread_cond_broadcast(&m.cv);
    pthread_mutex_unlock(&m.mu);
    pthread_join(th, NULL);
}

/* ------------------------------------------------------------------------ */
/* Values from function, gather, all_gather, all_reduce                       */

static int
s_value_fn(const zdist_value_ctx_t *ctx, void *arg, zdist_tensor_t *ret)
{
    float *vals = arg;
    /* value_fn(ctx): ctx.replica_id_in_sync_group / ctx.num_replicas_in_sync */
    vals[ctx->replica_id_in_sync_group] =
        (float) ctx->replica_id_in_sync_group / (float) ctx->num_replicas_in_sync;
    *ret = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32,
                            .shape = {0},
                            .data = &vals[ctx->replica_id_in_sync_group],
                            .nbytes = 4};
    return 0;
}

static int32_t s_col[2] = {1, 2};

static int
s_const_fn(const zdist_value_ctx_t *ctx, void *arg, zdist_tensor_t *ret)
{
    (void) ctx;
    (void) arg;
    /* lambda _: tf.identity(tf.constant([[1], [2]])) */
    *ret = (zdist_tensor_t){.dtype = ZDIST_DTYPE_INT32, .shape = {2, {2, 1}}, .data = s_col, .nbytes = 8};
    return 0;
}

static int
s_collectives_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    const zdist_tensor_t *in = arg; /* this replica's distributed value */
    float x = ((const float *) in->data)[0];
    float mine[2] = {x, (float) zdist_strategy_replica_id(ctx) + 1};
    zdist_tensor_t v = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {2}}, .data = mine, .nbytes = 8};
    zdist_tensor_t sum, all;
    int rc = zdist_strategy_replica_all_reduce(ctx, ZDIST_REDUCE_SUM, &v, &sum, err);
    if (rc < 0)
        return rc;
    rc = zdist_strategy_replica_all_gather(ctx, &v, 0, &all, err);
    if (rc < 0) {
        free(sum.data);
        return rc;
    }
    /* ret = [sum0, sum1, gathered...] */
    float *o = malloc(6 * sizeof *o);
    o[0] = s_f(&sum, 0);
    o[1] = s_f(&sum, 1);
    for (int i = 0; i < 4; i++)
        o[2 + i] = s_f(&all, i);
    free(sum.data);
    free(all.data);
    *ret = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {6}}, .data = o, .nbytes = 24};
    return 0;
}

static void
test_values_gather_collectives(void)
{
    zdist_strategy_object_t *s = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    zdist_error_t err;
    /* experimental_distribute_values_from_function's docstring: 0.0 and 0.5 */
    float vals[2];
    zdist_tensor_t dv[2];
    CU_ASSERT_EQUAL_FATAL(
        zdist_strategy_experimental_distribute_values_from_function(s, s_value_fn, vals, dv, &err), 0);
    const zdist_tensor_t *local = NULL;
    int n = 0;
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_experimental_local_results(s, dv, 2, &local, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(s_f(&local[0], 0), 0.0f);
    CU_ASSERT_EQUAL(s_f(&local[1], 0), 0.5f);

    /* run(fn, args=(distributed_values,)): replica r gets its own component */
    void *args[2] = {&dv[0], &dv[1]};
    zdist_tensor_t r[2];
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(s, s_collectives_fn, NULL, args, r, &err), 0);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(s_f(&r[i], 0), 0.5f); /* all_reduce SUM of 0.0 and 0.5 */
        CU_ASSERT_EQUAL(s_f(&r[i], 1), 3.0f); /* 1 + 2 */
        CU_ASSERT_EQUAL(s_f(&r[i], 2), 0.0f); /* all_gather: [0, 1, 0.5, 2] on both */
        CU_ASSERT_EQUAL(s_f(&r[i], 3), 1.0f);
        CU_ASSERT_EQUAL(s_f(&r[i], 4), 0.5f);
        CU_ASSERT_EQUAL(s_f(&r[i], 5), 2.0f);
    }
    zdist_strategy_values_free(r, 2);

    /* Strategy.gather's docstring: [[1],[2]] on each of 2 replicas,
       axis 0 -> shape (4, 1) [[1],[2],[1],[2]]; axis 1 -> (2, 2) [[1,1],[2,2]] */
    zdist_tensor_t cv[2], out;
    CU_ASSERT_EQUAL_FATAL(
        zdist_strategy_experimental_distribute_values_from_function(s, s_const_fn, NULL, cv, &err), 0);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_gather(s, cv, 2, 0, &out, &err), 0);
    CU_ASSERT_EQUAL(out.dtype, ZDIST_DTYPE_INT32);
    CU_ASSERT_EQUAL(out.shape.rank, 2);
    CU_ASSERT_EQUAL(out.shape.dims[0], 4);
    CU_ASSERT_EQUAL(out.shape.dims[1], 1);
    int32_t want0[] = {1, 2, 1, 2};
    CU_ASSERT_EQUAL(memcmp(out.data, want0, sizeof want0), 0);
    free(out.data);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_gather(s, cv, 2, 1, &out, &err), 0);
    CU_ASSERT_EQUAL(out.shape.dims[0], 2);
    CU_ASSERT_EQUAL(out.shape.dims[1], 2);
    int32_t want1[] = {1, 1, 2, 2};
    CU_ASSERT_EQUAL(memcmp(out.data, want1, sizeof want1), 0);
    free(out.data);
    zdist_strategy_destroy(&s);
}

/* The gradient of ReplicaContext.all_gather (distribute_lib.py's
   grad_wrapper): all_reduce(SUM, dy), all_gather of input_shape[axis],
   then array_ops.gather(grad, range(begin, end), axis); as
   strategy_gather_test.py's testAllGatherGradient, with replicas of
   different sizes (replica r's value has r + 1 rows). */
static int
s_gather_grad_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) arg;
    int id = zdist_strategy_replica_id(ctx);
    float x[4] = {0};
    zdist_tensor_t v = {.dtype = ZDIST_DTYPE_FLOAT32,
                        .shape = {2, {id + 1, 2}},
                        .data = x,
                        .nbytes = (size_t) (id + 1) * 2 * sizeof(float)};
    zdist_tensor_t all;
    int rc = zdist_strategy_replica_all_gather(ctx, &v, 0, &all, err);
    if (rc < 0)
        return rc;
    /* dy of the gathered [3, 2]: replica r's is (r + 1) * [1..6] */
    float dy[6];
    for (int i = 0; i < 6; i++)
        dy[i] = (float) ((id + 1) * (i + 1));
    zdist_tensor_t g = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = all.shape, .data = dy, .nbytes = sizeof dy};
    rc = zdist_strategy_replica_all_gather_grad(ctx, &g, &v, 0, ret, err);
    free(all.data);
    return rc;
}

static int
s_gather_sparse_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) arg;
    float vals[2] = {1, 2};
    int64_t idx[1] = {2};
    zdist_indexed_slices_t t0 = {
        .values = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {1, 2}}, .data = vals, .nbytes = sizeof vals},
        .indices = idx,
        .dense_shape = {2, {5, 2}}};
    return zdist_strategy_replica_all_gather_indexed_slices(ctx, &t0, 0, ret, err);
}

/* strategy_gather_test.py testGatherRaiseSparse / testAllGatherRaiseSparse:
   NotImplementedError with distribute_lib.py's texts (Strategy.gather,
   ReplicaContext.all_gather) and cross_device_ops.py's (the lower layer). */
static void
test_all_gather_grad_and_sparse(void)
{
    zdist_strategy_object_t *s = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    zdist_error_t err = {0};
    zdist_tensor_t r[2] = {{0}, {0}};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(s, s_gather_grad_fn, NULL, NULL, r, &err), 0);
    /* the summed dy is 3 * [1..6]; replica 0 owns row 0, replica 1 rows 1..2 */
    CU_ASSERT_EQUAL(r[0].shape.rank, 2);
    CU_ASSERT_EQUAL(r[0].shape.dims[0], 1);
    CU_ASSERT_EQUAL(r[1].shape.dims[0], 2);
    CU_ASSERT_EQUAL(memcmp(r[0].data, ((float[]){3, 6}), 8), 0);
    CU_ASSERT_EQUAL(memcmp(r[1].data, ((float[]){9, 12, 15, 18}), 16), 0);
    zdist_strategy_values_free(r, 2);

    CU_ASSERT_EQUAL(zdist_strategy_run(s, s_gather_sparse_fn, NULL, NULL, r, &err), -ENOTSUP);
    CU_ASSERT_STRING_EQUAL(err.text, "all_gather does not support IndexedSlices");
    float vals[2] = {1, 2};
    int64_t idx[1] = {2};
    zdist_indexed_slices_t t0[2] = {
        {.values = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {1, 2}}, .data = vals, .nbytes = sizeof vals},
         .indices = idx,
         .dense_shape = {2, {5, 2}}}};
    t0[1] = t0[0];
    zdist_tensor_t out;
    CU_ASSERT_EQUAL(zdist_strategy_gather_indexed_slices(s, t0, 2, 0, &out, &err), -ENOTSUP);
    CU_ASSERT_STRING_EQUAL(err.text, "gather does not support IndexedSlices");
    CU_ASSERT_EQUAL(zdist_distribute_gather_indexed_slices(t0, 2, 0, &out, &err), -ENOTSUP);
    CU_ASSERT_STRING_EQUAL(err.text, "gather/all_gather does not support IndexedSlices");
    /* Strategy.gather checks its context first: another strategy's scope wins */
    zdist_strategy_object_t *other = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_scope_enter(other, &err), 0);
    CU_ASSERT_EQUAL(zdist_strategy_gather_indexed_slices(s, t0, 2, 0, &out, &err), -EPERM);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "Mixing different tf.distribute.Strategy objects"));
    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(other, &err), 0);
    zdist_strategy_destroy(&other);
    zdist_strategy_destroy(&s);
}

/* A replica that leaves while the other waits in a collective: an error, not a hang. */
static int
s_desert_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) arg;
    (void) ret;
    if (zdist_strategy_replica_id(ctx) == 1)
        return 0;
    float x = 1;
    zdist_tensor_t v = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &x, .nbytes = 4}, out;
    return zdist_strategy_replica_all_reduce(ctx, ZDIST_REDUCE_SUM, &v, &out, err);
}

static void
test_deserting_replica(void)
{
    zdist_strategy_object_t *s = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    zdist_error_t err;
    zdist_tensor_t r[2] = {{0}, {0}};
    CU_ASSERT_EQUAL(zdist_strategy_run(s, s_desert_fn, NULL, NULL, r, &err), -EPIPE);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err.text, "replica 0: all_reduce: replica 1 returned from the step function"));
    CU_ASSERT_PTR_NULL(r[0].data);
    /* the strategy is usable afterwards */
    ctx_probe_t probe = {.s = s};
    CU_ASSERT_EQUAL(zdist_strategy_run(s, s_probe_fn, &probe, NULL, r, &err), 0);
    CU_ASSERT_TRUE(probe.ok[1]);
    zdist_strategy_values_free(r, 2);
    zdist_strategy_destroy(&s);
}

/* ------------------------------------------------------------------------ */
/* Variables: placement, replica writes, ON_READ                              */

typedef struct {
    zdist_strategy_var_t *var;
    zdist_var_op_t op;
    int rc[4];
    char text[4][64];
    float seen[4];
} assign_t;

static int
s_assign_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) ret;
    (void) err;
    assign_t *a = arg;
    int id = zdist_strategy_replica_id(ctx);
    float v = (float) id + 1;
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &v, .nbytes = 4};
    zdist_error_t e = {0};
    a->rc[id] = zdist_strategy_replica_assign(ctx, a->var, a->op, &t, &e);
    memcpy(a->text[id], e.text, sizeof a->text[id] - 1);
    const zdist_tensor_t *mine = NULL;
    if (zdist_strategy_replica_read(ctx, a->var, &mine, &e) == 0)
        a->seen[id] = s_f(mine, 0);
    return 0;
}

static zdist_strategy_var_t *
s_var(zdist_strategy_object_t *s, const char *name, float init, zdist_var_sync_t sync, zdist_var_agg_t agg)
{
    zdist_strategy_var_def_t def = {.name = name,
                                    .dtype = ZDIST_DTYPE_FLOAT32,
                                    .shape = {0},
                                    .initial_value = &init,
                                    .synchronization = sync,
                                    .aggregation = agg};
    zdist_strategy_var_t *v = NULL;
    zdist_error_t err;
    CU_ASSERT_EQUAL(zdist_strategy_variable_new(s, &def, &v, &err), 0);
    return v;
}

static void
test_variables(void)
{
    zdist_error_t err;
    zdist_strategy_object_t *m = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    zdist_strategy_object_t *c = s_new(ZDIST_STRATEGY_CENTRAL_STORAGE, 2);
    zdist_strategy_object_t *o = s_new(ZDIST_STRATEGY_ONE_DEVICE, 1);

    CU_ASSERT_EQUAL_FATAL(zdist_strategy_scope_enter(m, &err), 0);
    zdist_strategy_var_t *msum = s_var(m, "sum", 0, ZDIST_SYNC_ON_WRITE, ZDIST_AGG_SUM);
    zdist_strategy_var_t *mmean = s_var(m, "mean", 0, ZDIST_SYNC_ON_WRITE, ZDIST_AGG_MEAN);
    zdist_strategy_var_t *mnone = s_var(m, "none", 0, ZDIST_SYNC_ON_WRITE, ZDIST_AGG_NONE);
    /* variable_sync_on_read_context's docstring: tf.Variable(1.0, ON_READ, SUM) */
    zdist_strategy_var_t *mread = s_var(m, "on_read", 1, ZDIST_SYNC_ON_READ, ZDIST_AGG_SUM);
    CU_ASSERT_EQUAL(zdist_strategy_variable_num_copies(msum), 2);
    zdist_strategy_var_def_t dup = {.name = "sum", .dtype = ZDIST_DTYPE_FLOAT32};
    zdist_strategy_var_t *bad = NULL;
    CU_ASSERT_EQUAL(zdist_strategy_variable_new(m, &dup, &bad, &err), -EEXIST);
    dup = (zdist_strategy_var_def_t){.name = "u8", .dtype = ZDIST_DTYPE_UINT8};
    CU_ASSERT_EQUAL(zdist_strategy_variable_new(m, &dup, &bad, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "variable u8: dtype uint8"));
    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(m, &err), 0);

    CU_ASSERT_EQUAL_FATAL(zdist_strategy_scope_enter(c, &err), 0);
    zdist_strategy_var_t *csum = s_var(c, "sum", 0, ZDIST_SYNC_ON_WRITE, ZDIST_AGG_SUM);
    zdist_strategy_var_t *cread = s_var(c, "on_read", 0, ZDIST_SYNC_ON_READ, ZDIST_AGG_SUM);
    CU_ASSERT_EQUAL(zdist_strategy_variable_num_copies(csum), 1);  /* held once */
    CU_ASSERT_EQUAL(zdist_strategy_variable_num_copies(cread), 2); /* per replica */
    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(c, &err), 0);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_scope_enter(o, &err), 0);
    zdist_strategy_var_t *ov = s_var(o, "v", 0, ZDIST_SYNC_ON_WRITE, ZDIST_AGG_NONE);
    CU_ASSERT_EQUAL(zdist_strategy_variable_num_copies(ov), 1);
    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(o, &err), 0);

    /* assign_add in replica context: replicas add 1 and 2; SUM adds 3 to every copy, MEAN 1.5 */
    assign_t a = {.var = msum, .op = ZDIST_VAR_ASSIGN_ADD};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(m, s_assign_fn, &a, NULL, NULL, &err), 0);
    CU_ASSERT_EQUAL(a.rc[0], 0);
    CU_ASSERT_EQUAL(a.seen[0], 3.0f);
    CU_ASSERT_EQUAL(a.seen[1], 3.0f);
    a = (assign_t){.var = mmean, .op = ZDIST_VAR_ASSIGN_ADD};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(m, s_assign_fn, &a, NULL, NULL, &err), 0);
    CU_ASSERT_EQUAL(a.seen[0], 1.5f);
    CU_ASSERT_EQUAL(a.seen[1], 1.5f);
    /* NONE over 2 replicas: TF's error on every replica, nothing written */
    a = (assign_t){.var = mnone, .op = ZDIST_VAR_ASSIGN};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(m, s_assign_fn, &a, NULL, NULL, &err), 0);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(a.rc[i], -EINVAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(a.text[i], "You must specify an aggregation method to update a"));
        CU_ASSERT_EQUAL(a.seen[i], 0.0f);
    }
    /* central_storage: the one copy gets the aggregated write once */
    a = (assign_t){.var = csum, .op = ZDIST_VAR_ASSIGN_ADD};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(c, s_assign_fn, &a, NULL, NULL, &err), 0);
    CU_ASSERT_EQUAL(a.seen[0], 3.0f);
    CU_ASSERT_EQUAL(a.seen[1], 3.0f);
    CU_ASSERT_EQUAL(s_f(zdist_strategy_variable_copy(csum, 0), 0), 3.0f);
    /* ON_READ: each replica its own; the cross-replica read sums */
    a = (assign_t){.var = cread, .op = ZDIST_VAR_ASSIGN};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(c, s_assign_fn, &a, NULL, NULL, &err), 0);
    CU_ASSERT_EQUAL(a.seen[0], 1.0f);
    CU_ASSERT_EQUAL(a.seen[1], 2.0f);
    float x = 0;
    zdist_tensor_t rd = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &x, .nbytes = 4};
    CU_ASSERT_EQUAL(zdist_strategy_variable_read(c, cread, &rd, &err), 0);
    CU_ASSERT_EQUAL(x, 3.0f);
    /* the docstring's v = 1.0 ON_READ SUM on 2 replicas: each replica reads
       its own 1.0 (v + 10 = 11), the aggregated read is 2.0 (v + 10 = 12) */
    CU_ASSERT_EQUAL(s_f(zdist_strategy_variable_copy(mread, 0), 0) + 10.0f, 11.0f);
    CU_ASSERT_EQUAL(s_f(zdist_strategy_variable_copy(mread, 1), 0) + 10.0f, 11.0f);
    CU_ASSERT_EQUAL(zdist_strategy_variable_read(m, mread, &rd, &err), 0);
    CU_ASSERT_EQUAL(x + 10.0f, 12.0f);
    /* cross-replica assign of a SUM ON_READ variable: value / replicas per copy */
    float seven = 7;
    zdist_tensor_t sv = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &seven, .nbytes = 4};
    CU_ASSERT_EQUAL(zdist_strategy_variable_assign(m, mread, ZDIST_VAR_ASSIGN, &sv, &err), 0);
    CU_ASSERT_EQUAL(s_f(zdist_strategy_variable_copy(mread, 1), 0), 3.5f);
    /* a variable of another strategy */
    CU_ASSERT_EQUAL(zdist_strategy_variable_read(m, csum, &rd, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "another strategy's scope"));

    zdist_strategy_destroy(&m);
    zdist_strategy_destroy(&c);
    zdist_strategy_destroy(&o);
}

/* ------------------------------------------------------------------------ */
/* extended                                                                   */

static int
s_assign_one(zdist_tensor_t *copy, int replica, void *arg)
{
    (void) replica;
    (void) arg;
    ((float *) copy->data)[0] = 1.0f; /* update_fn(v): v.assign(1.0) */
    return 0;
}

static int
s_times_two_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) ctx;
    (void) err;
    const zdist_tensor_t *in = arg;
    *ret = s_scalar_f32(s_f(in, 0) * 2.0f);
    return 0;
}

static int
s_one_fn(const zdist_value_ctx_t *ctx, void *arg, zdist_tensor_t *ret)
{
    (void) ctx;
    static float one = 1.0f;
    (void) arg;
    *ret = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &one, .nbytes = 4};
    return 0;
}

static void
test_extended(void)
{
    zdist_error_t err;
    zdist_strategy_object_t *s = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    zdist_strategy_object_t *o = s_new(ZDIST_STRATEGY_ONE_DEVICE, 1);
    /* variable_created_in_scope's docstring: v1 outside the scope, v2 inside */
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_scope_enter(o, &err), 0);
    zdist_strategy_var_t *v1 = s_var(o, "v1", 1, ZDIST_SYNC_ON_WRITE, ZDIST_AGG_NONE);
    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(o, &err), 0);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_scope_enter(s, &err), 0);
    /* update's docstring: tf.Variable(5.0, aggregation=SUM) */
    zdist_strategy_var_t *v2 = s_var(s, "v2", 5, ZDIST_SYNC_ON_WRITE, ZDIST_AGG_SUM);
    CU_ASSERT_FALSE(zdist_strategy_extended_variable_created_in_scope(s, v1));
    CU_ASSERT_TRUE(zdist_strategy_extended_variable_created_in_scope(s, v2));

    /* colocate_vars_with: a companion records its anchor; a foreign anchor is TF's ValueError */
    CU_ASSERT_EQUAL(zdist_strategy_extended_colocate_vars_with_begin(s, v1, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text,
                           "`colocate_vars_with` must only be passed a variable created in this "
                           "tf.distribute.Strategy.scope(), not v1 created in scope: OneDeviceStrategy");
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_extended_colocate_vars_with_begin(s, v2, &err), 0);
    CU_ASSERT_EQUAL(zdist_strategy_extended_colocate_vars_with_begin(s, v2, &err), -EBUSY);
    zdist_strategy_var_t *slot = s_var(s, "v2/slot", 0, ZDIST_SYNC_ON_WRITE, ZDIST_AGG_SUM);
    CU_ASSERT_EQUAL(zdist_strategy_extended_colocate_vars_with_end(s, &err), 0);
    zdist_strategy_var_t *free_var = s_var(s, "free", 0, ZDIST_SYNC_ON_WRITE, ZDIST_AGG_SUM);
    CU_ASSERT_PTR_EQUAL(zdist_strategy_variable_colocated_with(slot), v2);
    CU_ASSERT_PTR_NULL(zdist_strategy_variable_colocated_with(free_var));
    CU_ASSERT_EQUAL(zdist_strategy_extended_colocate_vars_with_end(s, &err), -EINVAL);
    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(s, &err), 0);
    CU_ASSERT_EQUAL(zdist_strategy_extended_colocate_vars_with_begin(s, v2, &err), -EPERM);
    CU_ASSERT_STRING_EQUAL(err.text, "Need to be inside \"with strategy.scope()\" for MirroredStrategy");

    /* update: result Mirrored {0: 1.0, 1: 1.0} */
    CU_ASSERT_EQUAL(zdist_strategy_extended_update(s, v2, s_assign_one, NULL, &err), 0);
    CU_ASSERT_EQUAL(s_f(zdist_strategy_variable_copy(v2, 0), 0), 1.0f);
    CU_ASSERT_EQUAL(s_f(zdist_strategy_variable_copy(v2, 1), 0), 1.0f);
    CU_ASSERT_EQUAL(zdist_strategy_extended_update(s, v1, s_assign_one, NULL, &err), -EINVAL);

    /* reduce_to(SUM, per_replica(2.0, 2.0), destinations=v2) -> 4.0 on both devices */
    zdist_tensor_t ones[2], twos[2];
    CU_ASSERT_EQUAL_FATAL(
        zdist_strategy_experimental_distribute_values_from_function(s, s_one_fn, NULL, ones, &err), 0);
    void *args[2] = {&ones[0], &ones[1]};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(s, s_times_two_fn, NULL, args, twos, &err), 0);
    float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    zdist_tensor_t dests[2] = {{.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &d0, .nbytes = 4},
                               {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &d1, .nbytes = 4}};
    CU_ASSERT_EQUAL(zdist_strategy_extended_reduce_to(s, ZDIST_REDUCE_SUM, twos, 2, v2, dests, 2, &err), 0);
    CU_ASSERT_EQUAL(d0, 4.0f);
    CU_ASSERT_EQUAL(d1, 4.0f);
    CU_ASSERT_EQUAL(zdist_strategy_extended_reduce_to(s, ZDIST_REDUCE_SUM, twos, 2, v2, dests, 1, &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "destination v2 has 2 copies"));
    /* batch_reduce_to: SUM and the MEAN of the same pair */
    zdist_tensor_t dests2[2] = {{.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &d2, .nbytes = 4},
                                {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &d3, .nbytes = 4}};
    zdist_reduce_pair_t pairs[2] = {{twos, 2, dests, 2}, {ones, 2, dests2, 2}};
    CU_ASSERT_EQUAL(zdist_strategy_extended_batch_reduce_to(s, ZDIST_REDUCE_MEAN, pairs, 2, &err), 0);
    CU_ASSERT_EQUAL(d0, 2.0f);
    CU_ASSERT_EQUAL(d3, 1.0f);
    pairs[1].num_replicas = 1;
    d2 = -1;
    CU_ASSERT_EQUAL(zdist_strategy_extended_batch_reduce_to(s, ZDIST_REDUCE_SUM, pairs, 2, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "pair 1"));
    CU_ASSERT_EQUAL(d2, -1.0f);
    zdist_strategy_values_free(twos, 2);
    zdist_strategy_destroy(&s);
    zdist_strategy_destroy(&o);
}

/* ------------------------------------------------------------------------ */
/* merge_call (ReplicaContext.merge_call's docstring) and update from a replica */

typedef struct {
    zdist_strategy_object_t *s;
    int cross[4];
    int fail;
    int nested_rc;
} merge_arg_t;

/* merge_fn(distribution, three_plus_replica_id):
     return sum(distribution.experimental_local_results(three_plus_replica_id)) */
static int
s_merge_fn(zdist_strategy_object_t *s, const zdist_tensor_t *values, int n, void *arg, zdist_tensor_t *ret,
           zdist_error_t *err)
{
    merge_arg_t *m = arg;
    m->cross[0] = zdist_strategy_in_cross_replica_context() && zdist_strategy_get_replica_context() == NULL &&
                  s == m->s && n == 2;
    zdist_error_t e;
    m->nested_rc = zdist_strategy_run(s, s_leak_ctx_fn, NULL, NULL, NULL, &e);
    if (m->fail)
        return zdist_error_set(err, -EDOM, "merge_fn refuses");
    const zdist_tensor_t *local = NULL;
    int nl = 0;
    int rc = zdist_strategy_experimental_local_results(s, values, n, &local, &nl, err);
    if (rc < 0)
        return rc;
    zdist_tensor_t sum;
    rc = zdist_strategy_reduce(s, ZDIST_REDUCE_SUM, local, nl, ZDIST_AXIS_NONE, &sum, err);
    if (rc < 0)
        return rc;
    *ret = sum;
    return 0;
}

typedef struct {
    merge_arg_t *m;
    int rc[4];
    float got[4];
    char text[4][64];
} merge_run_t;

static int
s_merge_replica_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) ret;
    (void) err;
    merge_run_t *mr = arg;
    int id = zdist_strategy_replica_id(ctx);
    float v = 3.0f + (float) id; /* replica_id + 3 */
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &v, .nbytes = 4}, out = {0};
    zdist_error_t e = {0};
    mr->rc[id] = zdist_strategy_replica_merge_call(ctx, s_merge_fn, mr->m, &t, &out, &e);
    memcpy(mr->text[id], e.text, sizeof mr->text[id] - 1);
    /* back in the replica context */
    if (zdist_strategy_get_replica_context() != ctx)
        mr->rc[id] = -999;
    if (mr->rc[id] == 0) {
        mr->got[id] = s_f(&out, 0);
        free(out.data);
    }
    return 0;
}

static int
s_add_arg(zdist_tensor_t *copy, int replica, void *arg)
{
    (void) replica;
    ((float *) copy->data)[0] += *(const float *) arg;
    return 0;
}

typedef struct {
    zdist_strategy_var_t *var;
    int rc[4];
} update_run_t;

static int
s_update_replica_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) ret;
    update_run_t *u = arg;
    int id = zdist_strategy_replica_id(ctx);
    float add = 10.0f * (float) (id + 1);
    u->rc[id] =
        zdist_strategy_extended_update(zdist_strategy_replica_strategy(ctx), u->var, s_add_arg, &add, err);
    return 0;
}

static void
test_merge_call_and_replica_update(void)
{
    zdist_error_t err;
    zdist_strategy_object_t *s = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    merge_arg_t m = {.s = s};
    merge_run_t mr = {.m = &m};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(s, s_merge_replica_fn, &mr, NULL, NULL, &err), 0);
    CU_ASSERT_TRUE(m.cross[0]);
    CU_ASSERT_EQUAL(m.nested_rc, -EBUSY); /* run from merge_fn is refused, not corrupting the running one */
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(mr.rc[i], 0);
        CU_ASSERT_EQUAL(mr.got[i], 7.0f); /* 3 + 4 on every replica */
    }
    /* merge_fn's error reaches every replica */
    m.fail = 1;
    mr = (merge_run_t){.m = &m};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(s, s_merge_replica_fn, &mr, NULL, NULL, &err), 0);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(mr.rc[i], -EDOM);
        CU_ASSERT_STRING_EQUAL(mr.text[i], "merge_fn refuses");
    }
    /* merge_call outside run */
    float x = 0;
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &x, .nbytes = 4};
    CU_ASSERT_EQUAL(zdist_strategy_replica_merge_call(NULL, s_merge_fn, &m, &t, NULL, &err), -EPERM);
    CU_ASSERT_STRING_EQUAL(err.text, "Need to be inside `call_for_each_replica()`");

    /* update from a replica context: copy r gets replica r's argument */
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_scope_enter(s, &err), 0);
    zdist_strategy_var_t *v = s_var(s, "v", 1, ZDIST_SYNC_ON_WRITE, ZDIST_AGG_SUM);
    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(s, &err), 0);
    update_run_t u = {.var = v};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(s, s_update_replica_fn, &u, NULL, NULL, &err), 0);
    CU_ASSERT_EQUAL(u.rc[0], 0);
    CU_ASSERT_EQUAL(u.rc[1], 0);
    CU_ASSERT_EQUAL(s_f(zdist_strategy_variable_copy(v, 0), 0), 11.0f);
    CU_ASSERT_EQUAL(s_f(zdist_strategy_variable_copy(v, 1), 0), 21.0f);
    zdist_strategy_destroy(&s);

    /* central_storage: one copy, updated once with replica 0's argument */
    zdist_strategy_object_t *c = s_new(ZDIST_STRATEGY_CENTRAL_STORAGE, 2);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_scope_enter(c, &err), 0);
    zdist_strategy_var_t *cv = s_var(c, "v", 1, ZDIST_SYNC_ON_WRITE, ZDIST_AGG_SUM);
    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(c, &err), 0);
    u = (update_run_t){.var = cv};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_run(c, s_update_replica_fn, &u, NULL, NULL, &err), 0);
    CU_ASSERT_EQUAL(s_f(zdist_strategy_variable_copy(cv, 0), 0), 11.0f);
    zdist_strategy_destroy(&c);
}

/* ------------------------------------------------------------------------ */
/* Datasets                                                                   */

/* dataset_fn(ctx): range(14).batch(ctx.get_per_replica_batch_size(10)).shard(ctx.num_input_pipelines,
   ctx.input_pipeline_id) — TF's documented distribute_datasets_from_function example. */
typedef struct {
    int64_t per_replica, pipelines, id, next_batch;
    float buf[16];
    int calls; /* of the function, counted by the test through arg */
} range_ds_t;

static int
s_range_next(void *state, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) err;
    range_ds_t *d = state;
    /* batches k with k % pipelines == id */
    while (d->next_batch % d->pipelines != d->id)
        d->next_batch++;
    int64_t lo = d->next_batch * d->per_replica;
    if (lo >= 14)
        return 0;
    int64_t hi = lo + d->per_replica < 14 ? lo + d->per_replica : 14;
    for (int64_t i = lo; i < hi; i++)
        d->buf[i - lo] = (float) i;
    *ret = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32,
                            .shape = {1, {hi - lo}},
                            .data = d->buf,
                            .nbytes = (size_t) (hi - lo) * 4};
    d->next_batch++;
    return 1;
}

static int
s_range_fn(const zdist_input_context_t *ctx, void *arg, zdist_strategy_dataset_t *ret, zdist_error_t *err)
{
    int *calls = arg;
    range_ds_t *d = calloc(1, sizeof *d);
    int rc = zdist_input_context_get_per_replica_batch_size(ctx, 10, &d->per_replica, err);
    if (rc < 0) {
        free(d);
        return rc;
    }
    d->pipelines = zdist_input_context_num_input_pipelines(ctx);
    d->id = zdist_input_context_input_pipeline_id(ctx);
    (*calls)++;
    *ret = (zdist_strategy_dataset_t){.next = s_range_next, .destroy = free, .state = d};
    return 0;
}

static void
s_expect_range(const zdist_tensor_t *t, int lo, int n)
{
    CU_ASSERT_EQUAL(t->shape.rank, 1);
    CU_ASSERT_EQUAL(t->shape.dims[0], n);
    for (int i = 0; i < n && t->data; i++)
        CU_ASSERT_EQUAL(s_f(t, i), (float) (lo + i));
}

static void
test_datasets_from_function(void)
{
    zdist_error_t err;
    zdist_strategy_object_t *s = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    const zdist_tensor_t *v = NULL;

    /* PER_REPLICA: 2 pipelines for 2 replicas, global batch 10 over range(14):
       pipeline 0's first batch is [0..4], pipeline 1's is [5..9]; then
       pipeline 0 has [10..13] and pipeline 1 nothing (an empty batch). */
    int calls = 0;
    zdist_strategy_dist_dataset_t *dd = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_distribute_datasets_from_function(
                              s, s_range_fn, &calls, ZDIST_INPUT_PER_REPLICA, &dd, &err),
                          0);
    CU_ASSERT_EQUAL(calls, 2);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_dist_dataset_next(dd, &v, &err), 1);
    s_expect_range(&v[0], 0, 5);
    s_expect_range(&v[1], 5, 5);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_dist_dataset_next(dd, &v, &err), 1);
    s_expect_range(&v[0], 10, 4);
    s_expect_range(&v[1], 0, 0);
    CU_ASSERT_EQUAL(zdist_strategy_dist_dataset_next(dd, &v, &err), 0);
    zdist_strategy_dist_dataset_destroy(&dd);
    CU_ASSERT_PTR_NULL(dd);

    /* PER_WORKER: one pipeline (InputContext(1, 0, 2)), its replicas take
       successive per-replica batches, not rebatched: [0..4], [5..9], then [10..13] */
    calls = 0;
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_distribute_datasets_from_function(s, s_range_fn, &calls,
                                                                           ZDIST_INPUT_PER_WORKER, &dd, &err),
                          0);
    CU_ASSERT_EQUAL(calls, 1);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_dist_dataset_next(dd, &v, &err), 1);
    s_expect_range(&v[0], 0, 5);
    s_expect_range(&v[1], 5, 5);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_dist_dataset_next(dd, &v, &err), 1);
    s_expect_range(&v[0], 10, 4);
    CU_ASSERT_EQUAL(v[1].shape.dims[0], 0);
    CU_ASSERT_EQUAL(zdist_strategy_dist_dataset_next(dd, &v, &err), 0);
    zdist_strategy_dist_dataset_destroy(&dd);

    /* PER_REPLICA under another strategy: refused */
    zdist_strategy_object_t *c = s_new(ZDIST_STRATEGY_CENTRAL_STORAGE, 2);
    CU_ASSERT_EQUAL(zdist_strategy_distribute_datasets_from_function(c, s_range_fn, &calls,
                                                                     ZDIST_INPUT_PER_REPLICA, &dd, &err),
                    -ENOTSUP);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "InputReplicationMode.PER_REPLICA is only supported with "
                                            "tf.distribute.MirroredStrategy"));
    zdist_strategy_destroy(&c);
    /* a global batch the replicas do not divide: the function's error (TF's text) comes back */
    zdist_strategy_object_t *three = s_new(ZDIST_STRATEGY_MIRRORED, 3);
    CU_ASSERT_EQUAL(zdist_strategy_distribute_datasets_from_function(three, s_range_fn, &calls,
                                                                     ZDIST_INPUT_PER_WORKER, &dd, &err),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err.text, "The `global_batch_size` 10 is not divisible by `num_replicas_in_sync` 3"));
    CU_ASSERT_PTR_NULL(dd);
    zdist_strategy_destroy(&three);
    zdist_strategy_destroy(&s);
}

static void
test_experimental_distribute_dataset(void)
{
    zdist_error_t err;
    zdist_strategy_object_t *s = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    zdist_dataset_t *ds = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_synthetic_regression(10, 3, 7, 0.0, &ds, &err), 0);
    zdist_input_options_t opts;
    zdist_input_options_init(&opts, 4);
    zdist_input_t *in = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_experimental_distribute_dataset(s, ds, &opts, &in, &err), 0);
    const zdist_input_step_t *step = NULL;
    int64_t seen = 0, next = 0;
    int steps = 0;
    while (zdist_input_next(in, &step) == 1) {
        CU_ASSERT_EQUAL(step->num_replicas, 2);
        if (steps == 0) {
            CU_ASSERT_EQUAL(step->replicas[0].size, 2);
            CU_ASSERT_EQUAL(step->replicas[1].size, 2);
        }
        for (int r = 0; r < step->num_replicas; r++)
            for (int64_t i = 0; i < step->replicas[r].size; i++)
                CU_ASSERT_EQUAL(step->replicas[r].indices[i], next++);
        seen += step->size;
        steps++;
    }
    CU_ASSERT_EQUAL(seen, 10);
    CU_ASSERT_EQUAL(steps, 3);
    zdist_input_destroy(&in);
    zdist_dataset_destroy(&ds);
    zdist_strategy_destroy(&s);
}

/* ------------------------------------------------------------------------ */
/* multi_worker_mirrored: two workers (threads here, each its own strategy    */
/* object and ring rank over loopback), as two processes would be            */

typedef struct {
    zdist_comm_t *comm;
    int index;
    int local;
    /* results, asserted by the main thread */
    int rc;
    char text[ZDIST_ERROR_TEXT_MAX];
    int total, ids[2];
    float sum_ids, mean_ids, all_reduce[2], gathered[2][4], merged[2];
    float var_sum[2], var_first[2], on_read, cross_gather[4];
    int64_t gather_rows;
    float values_fn[2];
    float init[2];
    float first_batch[5];
    int64_t first_batch_n;
    int steps;
    zdist_strategy_var_t *vsum, *vfirst, *vread;
} mw_worker_t;

#define MW_CHECK(call)                                                                                       \
    do {                                                                                                     \
        int rc_ = (call);                                                                                    \
        if (rc_ < 0) {                                                                                       \
            w->rc = rc_;                                                                                     \
            memcpy(w->text, err.text, sizeof w->text);                                                       \
            goto out;                                                                                        \
        }                                                                                                    \
    } while (0)

static int
s_mw_merge(zdist_strategy_object_t *s, const zdist_tensor_t *values, int n, void *arg, zdist_tensor_t *ret,
           zdist_error_t *err)
{
    (void) arg;
    /* TF's merge_fn under MultiWorkerMirroredStrategy: this worker's replicas' values;
       strategy.reduce then combines every worker's */
    return zdist_strategy_reduce(s, ZDIST_REDUCE_SUM, values, n, ZDIST_AXIS_NONE, ret, err);
}

static int
s_mw_replica(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    mw_worker_t *w = arg;
    int local = zdist_strategy_replica_id(ctx) - w->index * w->local;
    int id = zdist_strategy_replica_id(ctx);
    w->ids[local] = id;
    float v = (float) id + 1;
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &v, .nbytes = 4};
    zdist_tensor_t out;
    int rc = zdist_strategy_replica_all_reduce(ctx, ZDIST_REDUCE_SUM, &t, &out, err);
    if (rc < 0)
        return rc;
    w->all_reduce[local] = s_f(&out, 0);
    free(out.data);
    zdist_tensor_t row = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {1, {1}}, .data = &v, .nbytes = 4};
    if ((rc = zdist_strategy_replica_all_gather(ctx, &row, 0, &out, err)) < 0)
        return rc;
    for (int i = 0; i < 4 && i < out.shape.dims[0]; i++)
        w->gathered[local][i] = s_f(&out, i);
    free(out.data);
    float three = (float) id + 3; /* merge_call's docstring: replica_id + 3 */
    zdist_tensor_t m = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &three, .nbytes = 4};
    if ((rc = zdist_strategy_replica_merge_call(ctx, s_mw_merge, NULL, &m, &out, err)) < 0)
        return rc;
    w->merged[local] = s_f(&out, 0);
    free(out.data);
    if ((rc = zdist_strategy_replica_assign(ctx, w->vsum, ZDIST_VAR_ASSIGN_ADD, &t, err)) < 0)
        return rc;
    float first = 100.0f + (float) id;
    zdist_tensor_t f = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &first, .nbytes = 4};
    if ((rc = zdist_strategy_replica_assign(ctx, w->vfirst, ZDIST_VAR_ASSIGN, &f, err)) < 0)
        return rc;
    if ((rc = zdist_strategy_replica_assign(ctx, w->vread, ZDIST_VAR_ASSIGN, &t, err)) < 0)
        return rc;
    const zdist_tensor_t *mine;
    if ((rc = zdist_strategy_replica_read(ctx, w->vsum, &mine, err)) < 0)
        return rc;
    w->var_sum[local] = s_f(mine, 0);
    if ((rc = zdist_strategy_replica_read(ctx, w->vfirst, &mine, err)) < 0)
        return rc;
    w->var_first[local] = s_f(mine, 0);
    *ret = s_scalar_f32((float) id);
    return 0;
}

static int
s_mw_value_fn(const zdist_value_ctx_t *ctx, void *arg, zdist_tensor_t *ret)
{
    float *vals = arg;
    int i = ctx->replica_id_in_sync_group % 2;
    vals[i] = (float) ctx->replica_id_in_sync_group / (float) ctx->num_replicas_in_sync;
    *ret = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &vals[i], .nbytes = 4};
    return 0;
}

static void *
s_mw_worker(void *p)
{
    mw_worker_t *w = p;
    zdist_error_t err = {0};
    zdist_strategy_object_t *s = NULL;
    zdist_strategy_dist_dataset_t *dd = NULL;
    zdist_tensor_t r[2] = {{0}, {0}};
    zdist_strategy_spec_t spec = {.kind = ZDIST_STRATEGY_MULTI_WORKER_MIRRORED,
                                  .num_replicas = w->local,
                                  .num_workers = 2,
                                  .worker_index = w->index,
                                  .comm = w->comm};
    MW_CHECK(zdist_strategy_new(&spec, &s, &err));
    w->total = zdist_strategy_num_replicas_in_sync(s);
    if (w->local == 2) {
        MW_CHECK(zdist_strategy_scope_enter(s, &err));
        float zero = 0;
        zdist_strategy_var_def_t d1 = {.name = "sum",
                                       .dtype = ZDIST_DTYPE_FLOAT32,
                                       .initial_value = &zero,
                                       .aggregation = ZDIST_AGG_SUM};
        zdist_strategy_var_def_t d2 = {.name = "first",
                                       .dtype = ZDIST_DTYPE_FLOAT32,
                                       .initial_value = &zero,
                                       .aggregation = ZDIST_AGG_ONLY_FIRST_REPLICA};
        zdist_strategy_var_def_t d3 = {.name = "on_read",
                                       .dtype = ZDIST_DTYPE_FLOAT32,
                                       .initial_value = &zero,
                                       .synchronization = ZDIST_SYNC_ON_READ,
                                       .aggregation = ZDIST_AGG_SUM};
        MW_CHECK(zdist_strategy_variable_new(s, &d1, &w->vsum, &err));
        MW_CHECK(zdist_strategy_variable_new(s, &d2, &w->vfirst, &err));
        MW_CHECK(zdist_strategy_variable_new(s, &d3, &w->vread, &err));
        /* every worker starts from worker 0's initial value */
        float mine = 7.0f + (float) w->index;
        zdist_strategy_var_def_t d4 = {.name = "init", .dtype = ZDIST_DTYPE_FLOAT32, .initial_value = &mine};
        zdist_strategy_var_t *vinit = NULL;
        MW_CHECK(zdist_strategy_variable_new(s, &d4, &vinit, &err));
        w->init[0] = s_f(zdist_strategy_variable_copy(vinit, 0), 0);
        w->init[1] = s_f(zdist_strategy_variable_copy(vinit, 1), 0);
        MW_CHECK(zdist_strategy_scope_exit(s, &err));
        MW_CHECK(zdist_strategy_run(s, s_mw_replica, w, NULL, r, &err));
        zdist_tensor_t out;
        MW_CHECK(zdist_strategy_reduce(s, ZDIST_REDUCE_SUM, r, 2, ZDIST_AXIS_NONE, &out, &err));
        w->sum_ids = s_f(&out, 0);
        free(out.data);
        MW_CHECK(zdist_strategy_reduce(s, ZDIST_REDUCE_MEAN, r, 2, ZDIST_AXIS_NONE, &out, &err));
        w->mean_ids = s_f(&out, 0);
        free(out.data);
        /* ids as rows [1] each: gather along axis 0 over every worker */
        for (int i = 0; i < 2; i++)
            r[i].shape = (zdist_shape_t){1, {1}};
        MW_CHECK(zdist_strategy_gather(s, r, 2, 0, &out, &err));
        w->gather_rows = out.shape.dims[0];
        for (int i = 0; i < 4 && i < out.shape.dims[0]; i++)
            w->cross_gather[i] = s_f(&out, i);
        free(out.data);
        float x = 0;
        zdist_tensor_t rd = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &x, .nbytes = 4};
        MW_CHECK(zdist_strategy_variable_read(s, w->vread, &rd, &err));
        w->on_read = x;
        float vals[2];
        zdist_tensor_t dv[2];
        MW_CHECK(
            zdist_strategy_experimental_distribute_values_from_function(s, s_mw_value_fn, vals, dv, &err));
        w->values_fn[0] = s_f(&dv[0], 0);
        w->values_fn[1] = s_f(&dv[1], 0);
    } else {
        /* TF's documented distribute_datasets_from_function case: 2 pipelines (workers), 2 replicas,
           global batch 10 over range(14) */
        int calls = 0;
        const zdist_tensor_t *v = NULL;
        MW_CHECK(zdist_strategy_distribute_datasets_from_function(s, s_range_fn, &calls,
                                                                  ZDIST_INPUT_PER_WORKER, &dd, &err));
        int got;
        while ((got = zdist_strategy_dist_dataset_next(dd, &v, &err)) == 1) {
            if (w->steps == 0) {
                w->first_batch_n = v[0].shape.dims[0];
                for (int i = 0; i < 5 && i < w->first_batch_n; i++)
                    w->first_batch[i] = s_f(&v[0], i);
            }
            w->steps++;
        }
        MW_CHECK(got);
    }
out:
    zdist_strategy_values_free(r, 2);
    zdist_strategy_dist_dataset_destroy(&dd);
    zdist_strategy_destroy(&s);
    return NULL;
}

/* Two ring ranks over loopback, connected to each other (one per worker thread). */
static void
s_loopback_ring(zdist_comm_t *comm[2])
{
    zdist_error_t err;
    const char *eps[2];
    for (int i = 0; i < 2; i++) {
        zdist_comm_config_t cc = {.rank = i, .size = 2, .bind = "tcp://127.0.0.1:*", .timeout_ms = 20000};
        comm[i] = zdist_comm_new(&cc, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(comm[i]);
        eps[i] = zdist_comm_endpoint(comm[i]);
    }
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(zdist_comm_connect(comm[i], eps, &err), 0);
}

static void
s_mw_run(mw_worker_t *w, int local)
{
    zdist_comm_t *comm[2];
    s_loopback_ring(comm);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].comm = comm[i];
        w[i].index = i;
        w[i].local = local;
        pthread_create(&th[i], NULL, s_mw_worker, &w[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++)
        zdist_comm_destroy(&comm[i]);
}

static void
test_multi_worker_mirrored(void)
{
    mw_worker_t w[2];
    s_mw_run(w, 2);
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(w[k].rc, 0);
        if (w[k].rc)
            fprintf(stderr, "worker %d: %s\n", k, w[k].text);
        CU_ASSERT_EQUAL(w[k].total, 4);
        CU_ASSERT_EQUAL(w[k].ids[0], 2 * k);
        CU_ASSERT_EQUAL(w[k].ids[1], 2 * k + 1);
        CU_ASSERT_EQUAL(w[k].sum_ids, 6.0f); /* reduce(SUM) of replica ids 0..3 */
        CU_ASSERT_EQUAL(w[k].mean_ids, 1.5f);
        CU_ASSERT_EQUAL(w[k].gather_rows, 4);
        for (int l = 0; l < 2; l++) {
            CU_ASSERT_EQUAL(w[k].all_reduce[l], 10.0f); /* 1+2+3+4 */
            for (int i = 0; i < 4; i++) {
                CU_ASSERT_EQUAL(w[k].gathered[l][i], (float) (i + 1));
                CU_ASSERT_EQUAL(w[k].cross_gather[i], (float) i);
            }
            CU_ASSERT_EQUAL(w[k].merged[l], 18.0f);  /* 3+4+5+6 */
            CU_ASSERT_EQUAL(w[k].var_sum[l], 10.0f); /* assign_add SUM of every replica's */
            /* ONLY_FIRST_REPLICA: as values_util.apply_aggregation, this worker's first local replica's value
             */
            CU_ASSERT_EQUAL(w[k].var_first[l], 100.0f + (float) (2 * k));
        }
        CU_ASSERT_EQUAL(w[k].on_read, 10.0f); /* ON_READ SUM read over every worker */
        CU_ASSERT_EQUAL(w[k].init[0], 7.0f);
        CU_ASSERT_EQUAL(w[k].init[1], 7.0f);
        CU_ASSERT_EQUAL(w[k].values_fn[0], (float) (2 * k) / 4.0f);
        CU_ASSERT_EQUAL(w[k].values_fn[1], (float) (2 * k + 1) / 4.0f);
    }
    /* 2 workers of 1 replica: pipeline 0's first batch is [0..4], pipeline 1's [5..9] */
    s_mw_run(w, 1);
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(w[k].rc, 0);
        if (w[k].rc)
            fprintf(stderr, "worker %d: %s\n", k, w[k].text);
        CU_ASSERT_EQUAL(w[k].first_batch_n, 5);
        for (int i = 0; i < 5; i++)
            CU_ASSERT_EQUAL(w[k].first_batch[i], (float) (5 * k + i));
    }
    CU_ASSERT_EQUAL(w[0].steps, 2); /* [0..4], [10..13] */
    CU_ASSERT_EQUAL(w[1].steps, 1); /* [5..9] */
}

/* ------------------------------------------------------------------------ */
/* multi_worker_mirrored forming its ring from TF_CONFIG                      */

/* A loopback port free now (bound to port 0, then released). */
static int
s_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *) &a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *) &a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

typedef struct {
    char tf_config[512];
    int rc, workers, index, total;
    float init, sum_ids;
    char text[512];
} tfc_worker_t;

static int
s_tfc_id_fn(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) arg;
    (void) err;
    *ret = s_scalar_f32((float) zdist_strategy_replica_id(ctx));
    return 0;
}

static void *
s_tfc_worker(void *p)
{
    tfc_worker_t *w = p;
    zdist_error_t err = {0};
    zdist_cluster_t *cl = zdist_cluster_parse(w->tf_config, NULL, &err);
    zdist_strategy_object_t *s = NULL;
    zdist_tensor_t ids[2] = {{0}, {0}}, sum = {0};
    zdist_strategy_spec_t spec = {.kind = ZDIST_STRATEGY_MULTI_WORKER_MIRRORED,
                                  .num_replicas = 2,
                                  .cluster = cl,
                                  .collective_timeout_ms = 20000};
    w->rc = cl ? zdist_strategy_new(&spec, &s, &err) : -EINVAL;
    zdist_cluster_destroy(&cl); /* the strategy needs it only to be made */
    if (w->rc == 0) {
        zdist_strategy_worker_place(s, &w->workers, &w->index, NULL);
        w->total = zdist_strategy_num_replicas_in_sync(s);
        /* each worker's initial value differs: every worker starts from the chief's (rank 0) */
        float init = w->index == 0 ? 7.0f : -1.0f;
        zdist_strategy_var_def_t def = {.name = "v", .dtype = ZDIST_DTYPE_FLOAT32, .initial_value = &init};
        zdist_strategy_var_t *v = NULL;
        if ((w->rc = zdist_strategy_scope_enter(s, &err)) == 0 &&
            (w->rc = zdist_strategy_variable_new(s, &def, &v, &err)) == 0 &&
            (w->rc = zdist_strategy_scope_exit(s, &err)) == 0 &&
            (w->rc = zdist_strategy_run(s, s_tfc_id_fn, NULL, NULL, ids, &err)) == 0 &&
            (w->rc = zdist_strategy_reduce(s, ZDIST_REDUCE_SUM, ids, 2, ZDIST_AXIS_NONE, &sum, &err)) == 0) {
            w->init = s_f(zdist_strategy_variable_copy(v, 1), 0);
            w->sum_ids = s_f(&sum, 0);
        }
    }
    if (w->rc)
        snprintf(w->text, sizeof w->text, "%s", err.text);
    free(sum.data);
    zdist_strategy_values_free(ids, 2);
    zdist_strategy_destroy(&s);
    return NULL;
}

static void
test_multi_worker_mirrored_from_tf_config(void)
{
    /* chief + worker: ranks 0 and 1 (id_in_cluster), each binding its task's address */
    char cluster[256];
    snprintf(cluster, sizeof cluster, "{\"chief\": [\"127.0.0.1:%d\"], \"worker\": [\"localhost:%d\"]}",
             s_free_port(), s_free_port());
    tfc_worker_t w[2];
    memset(w, 0, sizeof w);
    snprintf(w[0].tf_config, sizeof w[0].tf_config,
             "{\"cluster\": %s, \"task\": {\"type\": \"chief\", \"index\": 0}}", cluster);
    snprintf(w[1].tf_config, sizeof w[1].tf_config,
             "{\"cluster\": %s, \"task\": {\"type\": \"worker\", \"index\": 0}}", cluster);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, s_tfc_worker, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(w[k].rc, 0);
        if (w[k].rc)
            fprintf(stderr, "task %d: %s\n", k, w[k].text);
        CU_ASSERT_EQUAL(w[k].workers, 2);
        CU_ASSERT_EQUAL(w[k].index, k);
        CU_ASSERT_EQUAL(w[k].total, 4);
        CU_ASSERT_EQUAL(w[k].init, 7.0f);    /* the chief's initial value, broadcast */
        CU_ASSERT_EQUAL(w[k].sum_ids, 6.0f); /* reduce(SUM) of replica ids 0..3 over the ring */
    }

    /* a one-worker cluster needs no ring; a ps task and a cluster without workers are refused */
    zdist_error_t err;
    zdist_strategy_object_t *s = NULL;
    char text[512];
    snprintf(text, sizeof text, "{\"cluster\": {\"worker\": [\"127.0.0.1:%d\"]}, \"task\": {\"type\": \"worker\", "
             "\"index\": 0}}", s_free_port());
    zdist_cluster_t *cl = zdist_cluster_parse(text, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cl);
    zdist_strategy_spec_t spec = {.kind = ZDIST_STRATEGY_MULTI_WORKER_MIRRORED, .num_replicas = 3, .cluster = cl};
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &s, &err), 0);
    CU_ASSERT_EQUAL(zdist_strategy_num_replicas_in_sync(s), 3);
    zdist_strategy_destroy(&s);
    zdist_cluster_destroy(&cl);
    snprintf(text, sizeof text, "{\"cluster\": {\"worker\": [\"127.0.0.1:%d\"], \"ps\": [\"127.0.0.1:%d\"]}, "
             "\"task\": {\"type\": \"ps\", \"index\": 0}}", s_free_port(), s_free_port());
    cl = zdist_cluster_parse(text, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cl);
    spec.cluster = cl;
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &s, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "to be the chief or a worker, not ps"));
    CU_ASSERT_PTR_NULL(s);
    zdist_cluster_destroy(&cl);
    cl = zdist_cluster_parse("{\"cluster\": {\"chief\": [\"127.0.0.1:1\"], \"ps\": [\"127.0.0.1:2\"]}, \"task\": "
                             "{\"type\": \"chief\", \"index\": 0}}", NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cl);
    spec.cluster = cl;
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &s, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "strategy spec: cluster"));
    CU_ASSERT_PTR_NULL(s);
    zdist_cluster_destroy(&cl);
}

/* ------------------------------------------------------------------------ */
/* parameter_server: spec checks, run refused, schedule only there           */

static void
test_parameter_server_object(void)
{
    zdist_error_t err;
    zdist_job_t job, mwm_job;
    CU_ASSERT_EQUAL_FATAL(
        zdist_job_parse("{\"name\": \"ps\", \"strategy\": {\"type\": \"parameter_server\", \"partitioner\": "
                        "\"fixed:2\"}, \"model\": {\"name\": \"linear_regression\"}, \"optimizer\": "
                        "{\"type\": \"sgd\"}, \"dataset\": {\"format\": "
                        "\"synthetic\", \"synthetic\": {\"n\": 64, \"dim\": 4}, \"global_batch_size\": 8}, "
                        "\"steps\": 1}",
                        NULL, &job, &err),
        0);
    CU_ASSERT_EQUAL_FATAL(
        zdist_job_parse("{\"name\": \"m\", \"strategy\": {\"type\": \"multi_worker_mirrored\"}, \"model\": "
                        "{\"name\": \"linear_regression\"}, \"optimizer\": {\"type\": \"sgd\"}, "
                        "\"dataset\": {\"format\": \"synthetic\", "
                        "\"synthetic\": {\"n\": 64, \"dim\": 4}, \"global_batch_size\": 8}, \"steps\": 1}",
                        NULL, &mwm_job, &err),
        0);
    /* nothing listens there: the clients connect asynchronously and nothing is sent before a schedule */
    const char *workers[] = {"tcp://127.0.0.1:1"}, *ps[] = {"tcp://127.0.0.1:2", "tcp://127.0.0.1:3"};
    zdist_coordinator_options_t opts;
    zdist_coordinator_options_default(&opts);
    opts.job = &mwm_job;
    opts.workers = workers;
    opts.num_workers = 1;
    zdist_strategy_spec_t spec = {.kind = ZDIST_STRATEGY_PARAMETER_SERVER, .coordinator = &opts};
    zdist_strategy_object_t *s = NULL;
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &s, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "the coordinator's job 'm' is a multi_worker_mirrored job; its "
                                            "strategy.type must be parameter_server"));
    opts.job = &job;
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &s, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "coordinator.ps must list the ps tasks' endpoints (1..64; 0 given)"));
    opts.ps = ps;
    opts.num_ps = 2;
    spec.num_replicas = 2;
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &s, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "parameter_server runs 1 replica per worker, not num_replicas 2"));
    CU_ASSERT_PTR_NULL(s);
    spec.num_replicas = 0;
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_new(&spec, &s, &err), 0);
    zdist_job_release(&job); /* copied */
    CU_ASSERT_STRING_EQUAL(zdist_strategy_class_name(s), "ParameterServerStrategy");
    CU_ASSERT_EQUAL(zdist_strategy_num_replicas_in_sync(s), 1);
    CU_ASSERT_PTR_NOT_NULL(zdist_strategy_coordinator(s));
    CU_ASSERT_EQUAL(zdist_strategy_join(s, &err), 0); /* nothing scheduled */
    /* strategy.run of a C function cannot go to a worker */
    CU_ASSERT_EQUAL(zdist_strategy_run(s, s_probe_fn, NULL, NULL, NULL, &err), -ENOTSUP);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "the step function is the job's model's train_step (zdist/step.h); "
                                            "schedule it with zdist_strategy_schedule"));
    zdist_remote_value_t *rv = NULL;
    CU_ASSERT_EQUAL(zdist_strategy_schedule(s, 0, &rv, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "steps must be >= 1"));
    /* reduce and experimental_local_results over the one replica's value, as on what fetch returns */
    zdist_tensor_t v = s_scalar_f32(0.25f), r = {0};
    const zdist_tensor_t *local = NULL;
    int nlocal = 0;
    CU_ASSERT_EQUAL(zdist_strategy_experimental_local_results(s, &v, 1, &local, &nlocal, &err), 0);
    CU_ASSERT_EQUAL(nlocal, 1);
    CU_ASSERT_EQUAL(zdist_strategy_reduce(s, ZDIST_REDUCE_SUM, local, nlocal, ZDIST_AXIS_NONE, &r, &err), 0);
    CU_ASSERT_EQUAL(s_f(&r, 0), 0.25f);
    free(r.data);
    free(v.data);
    zdist_strategy_destroy(&s);
    zdist_job_release(&mwm_job);

    /* schedule, join, fetch and coordinator belong to parameter_server */
    s = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    CU_ASSERT_EQUAL(zdist_strategy_schedule(s, 1, &rv, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "schedule: a MirroredStrategy has no ClusterCoordinator"));
    CU_ASSERT_PTR_NULL(zdist_strategy_coordinator(s));
    zdist_strategy_destroy(&s);
}

/* ------------------------------------------------------------------------ */
/* multi_worker_mirrored: other dtypes and gather axes across workers         */

/* What one program sees; the same under 2 workers x 2 replicas as under mirrored:4. */
typedef struct {
    zdist_comm_t *comm; /* NULL: mirrored:4 */
    int index;
    int rc;
    char text[512];
    int32_t sum_i32[2];
    double mean_i32[2], mean_axis0;
    int64_t gather_i64_axis1[8];
    float gather_f32_axis1[8];
    int gather_dims[2];
    float all_gather_axis1[2][8]; /* each local replica's */
    int32_t merged[2];            /* merge_fn's int32 reduce over every worker, each local replica's copy */
    float f32_axes01[2];          /* reduce of float32 with axis=(0, 1): SUM, MEAN */
    double i32_mean_empty[2];     /* reduce of int32 with axis=[]: MEAN */
    char bad_axis_text[512];      /* MEAN with axis=(0, 2) */
} dt_prog_t;

static int
s_dt_merge(zdist_strategy_object_t *s, const zdist_tensor_t *values, int n, void *arg, zdist_tensor_t *ret,
           zdist_error_t *err)
{
    (void) arg;
    return zdist_strategy_reduce(s, ZDIST_REDUCE_SUM, values, n, ZDIST_AXIS_NONE, ret, err);
}

/* Replica r: all_gather along axis 1 of {{r}, {r + 10}}, then merge_call with int32 {r, 10 r}. */
static int
s_dt_replica(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    dt_prog_t *p = arg;
    int id = zdist_strategy_replica_id(ctx), local = id % 2;
    if (p->comm == NULL)
        local = id; /* mirrored:4 records replicas 0 and 1 */
    float col[2] = {(float) id, (float) id + 10};
    zdist_tensor_t v = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {2, 1}}, .data = col, .nbytes = sizeof col},
                   g = {0}, m = {0};
    int rc = zdist_strategy_replica_all_gather(ctx, &v, 1, &g, err);
    if (rc < 0)
        return rc;
    if (local < 2 && g.nbytes == sizeof p->all_gather_axis1[0])
        memcpy(p->all_gather_axis1[local], g.data, g.nbytes);
    free(g.data);
    int32_t iv[2] = {id, 10 * id};
    zdist_tensor_t it = {.dtype = ZDIST_DTYPE_INT32, .shape = {1, {2}}, .data = iv, .nbytes = sizeof iv};
    if ((rc = zdist_strategy_replica_merge_call(ctx, s_dt_merge, NULL, &it, &m, err)) < 0)
        return rc;
    if (local < 2)
        p->merged[local] = ((int32_t *) m.data)[1];
    free(m.data);
    return 0;
}

static int
s_dt_value(const zdist_value_ctx_t *ctx, void *arg, zdist_tensor_t *ret)
{
    (void) arg;
    int r = ctx->replica_id_in_sync_group;
    int32_t *v = malloc(2 * sizeof *v);
    v[0] = r;
    v[1] = 10 * r;
    *ret = (zdist_tensor_t){.dtype = ZDIST_DTYPE_INT32, .shape = {1, {2}}, .data = v, .nbytes = 2 * sizeof *v};
    return 0;
}

static int
s_dt_value_i64(const zdist_value_ctx_t *ctx, void *arg, zdist_tensor_t *ret)
{
    (void) arg;
    int64_t r = ctx->replica_id_in_sync_group;
    int64_t *v = malloc(2 * sizeof *v);
    v[0] = r;
    v[1] = 100 + r;
    *ret = (zdist_tensor_t){.dtype = ZDIST_DTYPE_INT64, .shape = {2, {2, 1}}, .data = v, .nbytes = 2 * sizeof *v};
    return 0;
}

static int
s_dt_value_f32(const zdist_value_ctx_t *ctx, void *arg, zdist_tensor_t *ret)
{
    (void) arg;
    float r = (float) ctx->replica_id_in_sync_group;
    float *v = malloc(2 * sizeof *v);
    v[0] = r;
    v[1] = 0.5f + r;
    *ret = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {2, 1}}, .data = v, .nbytes = 2 * sizeof *v};
    return 0;
}

static void *
s_dt_prog(void *arg)
{
    dt_prog_t *p = arg;
    zdist_error_t err = {0};
    zdist_strategy_spec_t spec = {.kind = ZDIST_STRATEGY_MIRRORED, .num_replicas = 4};
    if (p->comm)
        spec = (zdist_strategy_spec_t){.kind = ZDIST_STRATEGY_MULTI_WORKER_MIRRORED,
                                       .num_replicas = 2,
                                       .num_workers = 2,
                                       .worker_index = p->index,
                                       .comm = p->comm};
    zdist_strategy_object_t *s = NULL;
    zdist_tensor_t v[4] = {{0}}, r = {0};
    int L = p->comm ? 2 : 4;
    if ((p->rc = zdist_strategy_new(&spec, &s, &err)) < 0)
        goto out;
    /* reduce of int32 per-replica values {r, 10 r}: SUM int32, MEAN float64 (distribute_lib casts) */
    if ((p->rc = zdist_strategy_experimental_distribute_values_from_function(s, s_dt_value, NULL, v, &err)) < 0 ||
        (p->rc = zdist_strategy_reduce(s, ZDIST_REDUCE_SUM, v, L, ZDIST_AXIS_NONE, &r, &err)) < 0)
        goto out;
    CU_ASSERT_EQUAL(r.dtype, ZDIST_DTYPE_INT32);
    memcpy(p->sum_i32, r.data, sizeof p->sum_i32);
    free(r.data);
    if ((p->rc = zdist_strategy_reduce(s, ZDIST_REDUCE_MEAN, v, L, ZDIST_AXIS_NONE, &r, &err)) < 0)
        goto out;
    CU_ASSERT_EQUAL(r.dtype, ZDIST_DTYPE_FLOAT64);
    memcpy(p->mean_i32, r.data, sizeof p->mean_i32);
    free(r.data);
    if ((p->rc = zdist_strategy_reduce(s, ZDIST_REDUCE_MEAN, v, L, 0, &r, &err)) < 0)
        goto out;
    p->mean_axis0 = *(double *) r.data;
    free(r.data);
    /* an empty list (distribute_lib.py: int, tuple or list): mean_reduce_helper's
       denominator is reduce_prod([]) = 1 per replica, so int32 MEAN over no axis */
    if ((p->rc = zdist_strategy_reduce_axes(s, ZDIST_REDUCE_MEAN, v, L, (const int[]){0}, 0, &r, &err)) < 0)
        goto out;
    memcpy(p->i32_mean_empty, r.data, sizeof p->i32_mean_empty);
    free(r.data);
    zdist_strategy_values_free(v, 4);
    /* float32 over axis=(0, 1): across workers, the ring sums the sums and the counts */
    if ((p->rc = zdist_strategy_experimental_distribute_values_from_function(s, s_dt_value_f32, NULL, v,
                                                                             &err)) < 0 ||
        (p->rc = zdist_strategy_reduce_axes(s, ZDIST_REDUCE_SUM, v, L, (const int[]){0, 1}, 2, &r, &err)) < 0)
        goto out;
    p->f32_axes01[0] = *(float *) r.data;
    free(r.data);
    if ((p->rc = zdist_strategy_reduce_axes(s, ZDIST_REDUCE_MEAN, v, L, (const int[]){0, -1}, 2, &r, &err)) <
        0)
        goto out;
    p->f32_axes01[1] = *(float *) r.data;
    free(r.data);
    zdist_error_t bad = {0};
    CU_ASSERT_EQUAL(zdist_strategy_reduce_axes(s, ZDIST_REDUCE_MEAN, v, L, (const int[]){0, 2}, 2, &r, &bad),
                    -EINVAL);
    snprintf(p->bad_axis_text, sizeof p->bad_axis_text, "%s", bad.text);
    zdist_strategy_values_free(v, 4);
    /* gather along axis 1: int64 and float32 [2, 1] per replica -> [2, 4] */
    if ((p->rc = zdist_strategy_experimental_distribute_values_from_function(s, s_dt_value_i64, NULL, v, &err)) <
            0 ||
        (p->rc = zdist_strategy_gather(s, v, L, 1, &r, &err)) < 0)
        goto out;
    p->gather_dims[0] = (int) r.shape.dims[0];
    p->gather_dims[1] = (int) r.shape.dims[1];
    if (r.nbytes == sizeof p->gather_i64_axis1)
        memcpy(p->gather_i64_axis1, r.data, r.nbytes);
    free(r.data);
    zdist_strategy_values_free(v, 4);
    if ((p->rc = zdist_strategy_experimental_distribute_values_from_function(s, s_dt_value_f32, NULL, v, &err)) <
            0 ||
        (p->rc = zdist_strategy_gather(s, v, L, -1, &r, &err)) < 0)
        goto out;
    if (r.nbytes == sizeof p->gather_f32_axis1)
        memcpy(p->gather_f32_axis1, r.data, r.nbytes);
    free(r.data);
    /* in replica context: all_gather along axis 1 and merge_call whose merge_fn reduces int32 */
    p->rc = zdist_strategy_run(s, s_dt_replica, p, NULL, NULL, &err);
out:
    if (p->rc)
        snprintf(p->text, sizeof p->text, "%s", err.text);
    zdist_strategy_values_free(v, 4);
    zdist_strategy_destroy(&s);
    return NULL;
}

static void
test_multi_worker_dtypes_and_axes(void)
{
    dt_prog_t one = {0}, w[2];
    memset(w, 0, sizeof w);
    s_dt_prog(&one);
    CU_ASSERT_EQUAL_FATAL(one.rc, 0);
    /* the values one worker with every replica gets */
    CU_ASSERT_EQUAL(one.sum_i32[0], 6);
    CU_ASSERT_EQUAL(one.sum_i32[1], 60);
    CU_ASSERT_EQUAL(one.mean_i32[0], 1.5);
    CU_ASSERT_EQUAL(one.mean_i32[1], 15.0);
    CU_ASSERT_EQUAL(one.mean_axis0, 66.0 / 8.0);
    CU_ASSERT_EQUAL(one.gather_dims[0], 2);
    CU_ASSERT_EQUAL(one.gather_dims[1], 4);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(one.gather_i64_axis1[i], i);
        CU_ASSERT_EQUAL(one.gather_i64_axis1[4 + i], 100 + i);
        CU_ASSERT_EQUAL(one.gather_f32_axis1[i], (float) i);
        CU_ASSERT_EQUAL(one.gather_f32_axis1[4 + i], 0.5f + (float) i);
        CU_ASSERT_EQUAL(one.all_gather_axis1[0][i], (float) i);
        CU_ASSERT_EQUAL(one.all_gather_axis1[0][4 + i], (float) i + 10);
    }
    CU_ASSERT_EQUAL(one.merged[0], 60);
    /* tuple / list axes (distribute_lib.py Strategy.reduce): int32 {r, 10 r}
       over []: (6, 60) / 4 as float64; float32 [[r], [r + 0.5]] over (0, 1):
       SUM 14, MEAN 14 / 8; axis 2 of rank 2: MEAN's text */
    CU_ASSERT_EQUAL(one.i32_mean_empty[0], 1.5);
    CU_ASSERT_EQUAL(one.i32_mean_empty[1], 15.0);
    CU_ASSERT_EQUAL(one.f32_axes01[0], 14.0f);
    CU_ASSERT_EQUAL(one.f32_axes01[1], 1.75f);
    CU_ASSERT_STRING_EQUAL(one.bad_axis_text, "`axis` = 2 out of range for `value` with rank 2");

    zdist_comm_t *comm[2];
    s_loopback_ring(comm);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        w[i].comm = comm[i];
        w[i].index = i;
        pthread_create(&th[i], NULL, s_dt_prog, &w[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(w[k].rc, 0);
        if (w[k].rc)
            fprintf(stderr, "worker %d: %s\n", k, w[k].text);
        /* 2 workers x 2 replicas: exactly what one worker with the 4 replicas got */
        CU_ASSERT_EQUAL(memcmp(w[k].sum_i32, one.sum_i32, sizeof one.sum_i32), 0);
        CU_ASSERT_EQUAL(memcmp(w[k].mean_i32, one.mean_i32, sizeof one.mean_i32), 0);
        CU_ASSERT_EQUAL(w[k].mean_axis0, one.mean_axis0);
        CU_ASSERT_EQUAL(memcmp(w[k].i32_mean_empty, one.i32_mean_empty, sizeof one.i32_mean_empty), 0);
        CU_ASSERT_EQUAL(memcmp(w[k].f32_axes01, one.f32_axes01, sizeof one.f32_axes01), 0);
        CU_ASSERT_STRING_EQUAL(w[k].bad_axis_text, one.bad_axis_text);
        CU_ASSERT_EQUAL(memcmp(w[k].gather_dims, one.gather_dims, sizeof one.gather_dims), 0);
        CU_ASSERT_EQUAL(memcmp(w[k].gather_i64_axis1, one.gather_i64_axis1, sizeof one.gather_i64_axis1), 0);
        CU_ASSERT_EQUAL(memcmp(w[k].gather_f32_axis1, one.gather_f32_axis1, sizeof one.gather_f32_axis1), 0);
        for (int l = 0; l < 2; l++) {
            CU_ASSERT_EQUAL(memcmp(w[k].all_gather_axis1[l], one.all_gather_axis1[0], sizeof one.all_gather_axis1[0]),
                            0);
            CU_ASSERT_EQUAL(w[k].merged[l], 60); /* merge_fn's SUM of 10 r over replicas 0..3 of both workers */
        }
    }
    for (int i = 0; i < 2; i++)
        zdist_comm_destroy(&comm[i]);
}

/* ------------------------------------------------------------------------ */
/* tpu: TPUStrategy's replicas as mirrored's, plus logical devices            */

#define TPU_N 8 /* examples: y = 2x + 1, 4 per replica */
#define TPU_STEPS 20

typedef struct {
    zdist_strategy_var_t *w, *b;
    float x[TPU_N], y[TPU_N];
    /* per replica: its thread, each part's thread, and whether each part ran in the replica's context */
    pthread_t replica_tid[2], part_tid[2][2];
    int part_in_ctx[2][2];
    pthread_t first_part1_tid[2];
    int steps;
    float losses[TPU_STEPS];
} tpu_loop_t;

typedef struct {
    tpu_loop_t *L;
    zdist_strategy_replica_t *ctx;
    int replica, part;
    float w, b, grad, loss;
} tpu_part_t;

/* One part of the replica's gradient (part 0: dL/dw and the loss, part 1: dL/db): model parallelism, each part
   on a logical device. */
static int
s_tpu_part(zdist_strategy_replica_t *ctx, int device, void *arg, zdist_error_t *err)
{
    (void) device;
    (void) err;
    tpu_part_t *p = arg;
    p->L->part_tid[p->replica][p->part] = pthread_self();
    p->L->part_in_ctx[p->replica][p->part] = zdist_strategy_get_replica_context() == ctx && ctx == p->ctx;
    float g = 0, loss = 0;
    for (int i = p->replica * 4; i < p->replica * 4 + 4; i++) {
        float e = p->w * p->L->x[i] + p->b - p->L->y[i];
        g += p->part == 0 ? e * p->L->x[i] : e;
        loss += e * e;
    }
    p->grad = g / 2.0f; /* d(mean squared error)/dparam over the replica's 4 examples: 2/4 */
    p->loss = loss / 4.0f;
    return 0;
}

static int
s_tpu_step(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    tpu_loop_t *L = arg;
    int r = zdist_strategy_replica_id(ctx);
    int ldev = zdist_strategy_num_logical_devices_per_replica(zdist_strategy_replica_strategy(ctx));
    L->replica_tid[r] = pthread_self();
    const zdist_tensor_t *w, *b;
    int rc;
    if ((rc = zdist_strategy_replica_read(ctx, L->w, &w, err)) < 0 ||
        (rc = zdist_strategy_replica_read(ctx, L->b, &b, err)) < 0)
        return rc;
    tpu_part_t part[2];
    for (int k = 0; k < 2; k++) {
        part[k] = (tpu_part_t){.L = L, .ctx = ctx, .replica = r, .part = k, .w = s_f(w, 0), .b = s_f(b, 0)};
        if ((rc = zdist_strategy_replica_run_on_logical_device(ctx, k % ldev, s_tpu_part, &part[k], err)) < 0)
            return rc;
    }
    /* synchronous SGD: every replica's step, aggregated by MEAN (the variables' aggregation) */
    float dw = 0.1f * part[0].grad, db = 0.1f * part[1].grad;
    zdist_tensor_t tw = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &dw, .nbytes = 4};
    zdist_tensor_t tb = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &db, .nbytes = 4};
    if ((rc = zdist_strategy_replica_assign(ctx, L->w, ZDIST_VAR_ASSIGN_SUB, &tw, err)) < 0 ||
        (rc = zdist_strategy_replica_assign(ctx, L->b, ZDIST_VAR_ASSIGN_SUB, &tb, err)) < 0)
        return rc;
    *ret = s_scalar_f32(part[0].loss);
    return 0;
}

/* The same custom loop under `s`: variables under its scope, run, reduce of the loss; final w, b out. */
static void
s_tpu_loop(zdist_strategy_object_t *s, tpu_loop_t *L, float *ret_w, float *ret_b)
{
    zdist_error_t err = {0};
    for (int i = 0; i < TPU_N; i++) {
        L->x[i] = (float) i / TPU_N;
        L->y[i] = 2.0f * L->x[i] + 1.0f;
    }
    float zero = 0;
    zdist_strategy_var_def_t dw = {.name = "w", .dtype = ZDIST_DTYPE_FLOAT32, .initial_value = &zero,
                                   .aggregation = ZDIST_AGG_MEAN};
    zdist_strategy_var_def_t db = dw;
    db.name = "b";
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_scope_enter(s, &err), 0);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_variable_new(s, &dw, &L->w, &err), 0);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_variable_new(s, &db, &L->b, &err), 0);
    CU_ASSERT_EQUAL(zdist_strategy_variable_num_copies(L->w), 2); /* mirrored: a copy per replica */
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_scope_exit(s, &err), 0);
    for (int step = 0; step < TPU_STEPS; step++) {
        zdist_tensor_t r[2] = {{0}, {0}}, loss = {0};
        int rc = zdist_strategy_run(s, s_tpu_step, L, NULL, r, &err);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        for (int k = 0; k < 2 && step == 0; k++)
            L->first_part1_tid[k] = L->part_tid[k][1];
        for (int k = 0; k < 2 && zdist_strategy_num_logical_devices_per_replica(s) > 1; k++) {
            /* device 0 is the replica's own thread; device 1 another, the same one every step */
            CU_ASSERT(pthread_equal(L->part_tid[k][0], L->replica_tid[k]));
            CU_ASSERT(!pthread_equal(L->part_tid[k][1], L->replica_tid[k]));
            CU_ASSERT(pthread_equal(L->part_tid[k][1], L->first_part1_tid[k]));
            CU_ASSERT(L->part_in_ctx[k][0] && L->part_in_ctx[k][1]);
        }
        CU_ASSERT_EQUAL(zdist_strategy_reduce(s, ZDIST_REDUCE_MEAN, r, 2, ZDIST_AXIS_NONE, &loss, &err), 0);
        L->losses[L->steps++] = s_f(&loss, 0);
        free(loss.data);
        zdist_strategy_values_free(r, 2);
    }
    *ret_w = s_f(zdist_strategy_variable_copy(L->w, 1), 0);
    *ret_b = s_f(zdist_strategy_variable_copy(L->b, 1), 0);
    CU_ASSERT_EQUAL(*ret_w, s_f(zdist_strategy_variable_copy(L->w, 0), 0)); /* the copies in sync */
}

static void
test_tpu_object(void)
{
    zdist_strategy_spec_t spec = {.kind = ZDIST_STRATEGY_TPU, .num_replicas = 2, .logical_devices_per_replica = 2,
                                  .oversubscribe = true};
    zdist_strategy_object_t *tpu = NULL, *mir = s_new(ZDIST_STRATEGY_MIRRORED, 2);
    zdist_error_t err = {0};
    zdist_strategy_spec_t parsed;
    CU_ASSERT_EQUAL(zdist_strategy_spec_parse("tpu:2", &parsed, &err), 0);
    CU_ASSERT(parsed.kind == ZDIST_STRATEGY_TPU && parsed.num_replicas == 2 && parsed.logical_devices_per_replica == 0);
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_new(&spec, &tpu, &err), 0);
    CU_ASSERT_STRING_EQUAL(zdist_strategy_class_name(tpu), "TPUStrategy");
    CU_ASSERT_EQUAL(zdist_strategy_num_replicas_in_sync(tpu), 2);
    CU_ASSERT_EQUAL(zdist_strategy_num_logical_devices_per_replica(tpu), 2);
    CU_ASSERT_EQUAL(zdist_strategy_num_logical_devices_per_replica(mir), 1);
    tpu_loop_t lt = {0}, lm = {0};
    float wt, bt, wm, bm;
    s_tpu_loop(tpu, &lt, &wt, &bt);
    s_tpu_loop(mir, &lm, &wm, &bm);
    /* R=2 L=2 trains exactly as mirrored:2: the same losses and weights, to the bit */
    CU_ASSERT_EQUAL(lt.steps, TPU_STEPS);
    CU_ASSERT_EQUAL(memcmp(lt.losses, lm.losses, sizeof lt.losses), 0);
    CU_ASSERT_EQUAL(wt, wm);
    CU_ASSERT_EQUAL(bt, bm);
    CU_ASSERT(lt.losses[TPU_STEPS - 1] < lt.losses[0] / 4);
    /* under mirrored both parts ran on the replica's own thread (L = 1) */
    CU_ASSERT(pthread_equal(lm.part_tid[0][1], lm.replica_tid[0]));
    zdist_strategy_destroy(&tpu);
    zdist_strategy_destroy(&mir);

    /* bad specs */
    spec.logical_devices_per_replica = -1;
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &tpu, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "logical_devices_per_replica -1 is out of range; use 0..64"));
    spec.logical_devices_per_replica = 65;
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &tpu, &err), -EINVAL);
    spec.num_replicas = -2;
    spec.logical_devices_per_replica = 2;
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &tpu, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "num_replicas -2 is out of range"));
    /* more logical devices than cores: the job's text, both numbers named */
    int cores = zdist_sys_cores();
    spec = (zdist_strategy_spec_t){.kind = ZDIST_STRATEGY_TPU, .num_replicas = cores, .logical_devices_per_replica = 2};
    CU_ASSERT_EQUAL(zdist_strategy_new(&spec, &tpu, &err), -EINVAL);
    char want[200];
    snprintf(want, sizeof want, "strategy: num_replicas %d x logical_devices_per_replica 2 = %d logical devices do "
             "not fit the %d cores", cores, 2 * cores, cores);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "set strategy.oversubscribe to true"));
    CU_ASSERT_PTR_NULL(tpu);
    zdist_error_t jerr = {0};
    CU_ASSERT_EQUAL(zdist_job_check_logical_devices(cores, 2, false, &jerr), -EINVAL);
    CU_ASSERT_STRING_EQUAL(jerr.text, err.text); /* one check for the job and the object */
}

/* Wrong context and wrong device. */
typedef struct {
    int rc_bad_device, rc_nested, rc_other_ctx;
    char bad_device[ZDIST_ERROR_TEXT_MAX], nested[ZDIST_ERROR_TEXT_MAX], other_ctx[ZDIST_ERROR_TEXT_MAX];
    zdist_strategy_replica_t *ctx[2];
} tpu_ctx_t;

static int
s_tpu_nested(zdist_strategy_replica_t *ctx, int device, void *arg, zdist_error_t *err)
{
    (void) device;
    (void) err;
    tpu_ctx_t *t = arg;
    zdist_error_t e = {0};
    t->rc_nested = zdist_strategy_replica_run_on_logical_device(ctx, 0, s_tpu_nested, t, &e);
    memcpy(t->nested, e.text, sizeof t->nested);
    return 0;
}

static int
s_tpu_ctx_step(zdist_strategy_replica_t *ctx, void *arg, zdist_tensor_t *ret, zdist_error_t *err)
{
    (void) ret;
    tpu_ctx_t *t = arg;
    int r = zdist_strategy_replica_id(ctx);
    t->ctx[r] = ctx;
    /* every replica's ctx stored before replica 1 uses replica 0's */
    float one = 1;
    zdist_tensor_t v = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = &one, .nbytes = 4}, out = {0};
    int rc = zdist_strategy_replica_all_reduce(ctx, ZDIST_REDUCE_SUM, &v, &out, err);
    free(out.data);
    if (rc < 0)
        return rc;
    zdist_error_t e = {0};
    if (r == 1) {
        t->rc_other_ctx = zdist_strategy_replica_run_on_logical_device(t->ctx[0], 1, s_tpu_nested, t, &e);
        memcpy(t->other_ctx, e.text, sizeof t->other_ctx);
        return 0;
    }
    t->rc_bad_device = zdist_strategy_replica_run_on_logical_device(ctx, 2, s_tpu_nested, t, &e);
    memcpy(t->bad_device, e.text, sizeof t->bad_device);
    return zdist_strategy_replica_run_on_logical_device(ctx, 1, s_tpu_nested, t, err);
}

static void
test_tpu_wrong_context(void)
{
    zdist_strategy_spec_t spec = {.kind = ZDIST_STRATEGY_TPU, .num_replicas = 2, .logical_devices_per_replica = 2,
                                  .oversubscribe = true};
    zdist_strategy_object_t *s = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_strategy_new(&spec, &s, &err), 0);
    tpu_ctx_t t = {0};
    CU_ASSERT_EQUAL(zdist_strategy_run(s, s_tpu_ctx_step, &t, NULL, NULL, &err), 0);
    CU_ASSERT_EQUAL(t.rc_bad_device, -EINVAL);
    CU_ASSERT_STRING_EQUAL(t.bad_device, "`logical_core_id` to assign must be lower then total number of logical "
                                         "devices per replica. Received logical device id 2 but there are only "
                                         "total of 2 logical devices in replica.");
    CU_ASSERT_EQUAL(t.rc_nested, -EDEADLK);
    CU_ASSERT_PTR_NOT_NULL(strstr(t.nested, "called from logical device 1's function"));
    CU_ASSERT_EQUAL(t.rc_other_ctx, -EPERM);
    CU_ASSERT_STRING_EQUAL(t.other_ctx, "Mismatching ReplicaContext.");
    /* outside run, from the cross-replica context: TF's replica-context text */
    CU_ASSERT_EQUAL(zdist_strategy_scope_enter(s, &err), 0);
    CU_ASSERT_EQUAL(zdist_strategy_replica_run_on_logical_device(NULL, 0, s_tpu_nested, &t, &err), -EPERM);
    CU_ASSERT_STRING_EQUAL(err.text, "Need to be inside `call_for_each_replica()`");
    CU_ASSERT_EQUAL(zdist_strategy_scope_exit(s, &err), 0);
    zdist_strategy_destroy(&s);
}

void
zdist_test_strategy_register(void)
{
    ZDIST_SUITE(
        "strategy", {"new: specs, replica counts, cluster strategies refused", test_new_and_specs},
        {"contexts, run, reduce (docstring: SUM of replica ids = 1)", test_contexts_and_reduce_docstring},
        {"wrong context: TF's messages", test_wrong_context_messages},
        {"another strategy's ReplicaContext: TF's Mismatching text", test_mismatching_strategy_objects},
        {"values from function, gather (docstring), all_reduce/all_gather", test_values_gather_collectives},
        {"all_gather's gradient; sparse gathers refused", test_all_gather_grad_and_sparse},
        {"a replica that leaves a collective: -EPIPE, no hang", test_deserting_replica},
        {"variables: placement and replica/cross-replica writes", test_variables},
        {"extended: update, reduce_to, batch_reduce_to, colocate_vars_with", test_extended},
        {"merge_call (docstring: 3 + 4 = 7), update from a replica context",
         test_merge_call_and_replica_update},
        {"distribute_datasets_from_function (2 pipelines, range(14))", test_datasets_from_function},
        {"experimental_distribute_dataset", test_experimental_distribute_dataset},
        {"multi_worker_mirrored: 2 workers over a loopback ring (2x2, and 2x1 datasets)",
         test_multi_worker_mirrored},
        {"multi_worker_mirrored: the ring formed from TF_CONFIG (chief + worker)",
         test_multi_worker_mirrored_from_tf_config},
        {"parameter_server: spec checks, run refused, schedule there only", test_parameter_server_object},
        {"multi_worker_mirrored: int32/int64 reduce and merge_call, gather along axis 1, as one worker",
         test_multi_worker_dtypes_and_axes},
        {"tpu: R=2 L=2 trains as mirrored:2, device 0 the replica's thread, 1 another; bad specs",
         test_tpu_object},
        {"tpu: a device outside 0..L-1, nested and outside run: TF's texts", test_tpu_wrong_context});
}
