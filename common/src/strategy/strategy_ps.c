/* zdist strategy, parameter_server flavour: the variables a Strategy's scope
   creates on the psds (placed as a job's workers place them) and the
   ClusterCoordinator its schedule drives. */
#include "strategy_internal.h"
#include "strategy_ps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/endpoint.h"
#include "zdist/partition.h"
#include "zdist/ps_client.h"

#define S_MAX_PS 64

struct strategy_ps_t {
    zdist_coordinator_t *coord;
    bool started;
    bool created_vars; /* scope created variables: the workers create none */
    int nps;
    zdist_ps_client_t **ps;
    zdist_placement_t *pl; /* ParameterServerStrategyV2's round-robin counter */
    zdist_partitioner_t part;
    char *prefix;   /* the job's variable prefix, "JOB/" */
    char *ns;       /* its namespace on the psds, "JOB" ("" for none) */
    zdist_optim_config_t optimizer;
};

struct strategy_ps_var_t {
    char *name; /* prefix + name: its name on the psds */
    zdist_layout_t *layout;
    zdist_dtype_t dtype;
    size_t row_bytes; /* bytes of one row along axis 0 (the whole value for rank 0) */
};

void
strategy_ps_destroy(strategy_ps_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    strategy_ps_t *self = *self_p;
    if (self->coord && self->started)
        zdist_coordinator_stop_job(self->coord, 2000);
    zdist_coordinator_destroy(&self->coord);
    for (int p = 0; self->ps && p < self->nps; p++)
        zdist_ps_client_destroy(&self->ps[p]);
    free(self->ps);
    zdist_placement_destroy(&self->pl);
    free(self->prefix);
    free(self->ns);
    free(self);
    *self_p = NULL;
}

int
strategy_ps_new(const zdist_coordinator_options_t *opts, strategy_ps_t **ret, zdist_error_t *err)
{
    if (!opts || !opts->job)
        return zdist_error_set(err, -EINVAL,
                               "strategy spec: parameter_server needs coordinator, the ClusterCoordinator's "
                               "options (zdist/coordinator.h: the job, the workers and the ps tasks)");
    if (opts->job->strategy != ZDIST_STRATEGY_PARAMETER_SERVER)
        return zdist_error_set(err, -EINVAL,
                               "strategy spec: parameter_server: the coordinator's job '%s' is a %s job; its "
                               "strategy.type must be parameter_server",
                               opts->job->name ? opts->job->name : "", zdist_strategy_name(opts->job->strategy));
    if (opts->num_ps < 1 || opts->num_ps > S_MAX_PS || !opts->ps)
        return zdist_error_set(err, -EINVAL,
                               "strategy spec: parameter_server: coordinator.ps must list the ps tasks' "
                               "endpoints (1..%d; %zu given): the strategy creates its variables on them",
                               S_MAX_PS, opts->num_ps);
    strategy_ps_t *self = calloc(1, sizeof *self);
    if (!self)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    int rc = 0;
    const char *prefix = opts->variable_prefix ? opts->variable_prefix : "";
    size_t plen = strlen(prefix);
    self->prefix = strdup(prefix);
    self->ns = strndup(prefix, plen && prefix[plen - 1] == '/' ? plen - 1 : plen);
    self->nps = (int) opts->num_ps;
    self->ps = calloc(opts->num_ps, sizeof *self->ps);
    self->pl = zdist_placement_new(self->nps);
    self->optimizer = opts->job->optimizer;
    if (!self->prefix || !self->ns || !self->ps || !self->pl) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    /* the partitioner a job's workers use: the job's, or the default */
    self->part = zdist_partitioner_default_ps(self->nps);
    if (opts->job->partitioner && (rc = zdist_partitioner_parse(opts->job->partitioner, &self->part, err)) < 0) {
        zdist_error_prefix(err, "strategy spec: parameter_server: the job's strategy.partitioner");
        goto fail;
    }
    zdist_ps_client_options_t po;
    zdist_ps_client_options_default(&po);
    for (int p = 0; p < self->nps; p++) {
        char ep[300];
        if ((rc = zdist_endpoint_normalize(opts->ps[p], ep, sizeof ep, err)) < 0 ||
            !(self->ps[p] = zdist_ps_client_new(ep, &po, err))) {
            rc = rc < 0 ? rc : -EINVAL;
            zdist_error_prefix(err, "strategy spec: parameter_server: coordinator.ps[%d]", p);
            goto fail;
        }
    }
    if (!(self->coord = zdist_coordinator_new(opts, err))) {
        rc = err && err->code ? err->code : -EINVAL;
        zdist_error_prefix(err, "strategy spec: parameter_server: coordinator");
        goto fail;
    }
    *ret = self;
    return 0;
fail:
    strategy_ps_destroy(&self);
    return rc < 0 ? rc : -EINVAL;
}

void
strategy_ps_var_destroy(strategy_ps_var_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_layout_destroy(&(*self_p)->layout);
    free((*self_p)->name);
    free(*self_p);
    *self_p = NULL;
}

int
strategy_ps_var_num_shards(const strategy_ps_var_t *var)
{
    return var ? var->layout->num_shards : 0;
}

int
strategy_ps_var_shard_task(const strategy_ps_var_t *var, int i)
{
    return var && i >= 0 && i < var->layout->num_shards ? var->layout->shards[i].ps : -1;
}

/* Shard s's bytes within the whole variable's. */
static void
s_shard_span(const strategy_ps_var_t *var, int s, size_t nbytes, size_t *ret_off, size_t *ret_len)
{
    const zdist_layout_t *L = var->layout;
    if (L->shape.rank == 0 || L->num_shards == 1) {
        *ret_off = 0;
        *ret_len = nbytes;
        return;
    }
    *ret_off = (size_t) L->shards[s].offset * var->row_bytes;
    *ret_len = (size_t) L->shards[s].rows * var->row_bytes;
}

int
strategy_ps_var_write(strategy_ps_t *self, const strategy_ps_var_t *var, zdist_var_op_t op, const void *value,
                      size_t nbytes, zdist_error_t *err)
{
    const zdist_layout_t *L = var->layout;
    for (int s = 0; s < L->num_shards; s++) {
        size_t off, len;
        s_shard_span(var, s, nbytes, &off, &len);
        zdist_tensor_t t = {.dtype = var->dtype, .data = (char *) value + off, .nbytes = len};
        t.shape = L->shape;
        if (L->shape.rank > 0)
            t.shape.dims[0] = L->num_shards == 1 ? L->shape.dims[0] : L->shards[s].rows;
        zdist_ps_client_t *c = self->ps[L->shards[s].ps];
        int rc;
        switch (op) {
        case ZDIST_VAR_ASSIGN_ADD:
            rc = zdist_ps_client_assign_add(c, var->name, s, 0, 0, &t, NULL, err);
            break;
        case ZDIST_VAR_ASSIGN_SUB:
            rc = zdist_ps_client_assign_sub(c, var->name, s, 0, 0, &t, NULL, err);
            break;
        default:
            rc = zdist_ps_client_assign(c, var->name, s, 0, 0, &t, NULL, err);
            break;
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

int
strategy_ps_var_read(strategy_ps_t *self, const strategy_ps_var_t *var, void *buf, size_t nbytes,
                     zdist_error_t *err)
{
    const zdist_layout_t *L = var->layout;
    for (int s = 0; s < L->num_shards; s++) {
        size_t off, len;
        s_shard_span(var, s, nbytes, &off, &len);
        zdist_tensor_t out = {.dtype = var->dtype, .data = (char *) buf + off, .nbytes = len};
        int rc = zdist_ps_client_pull(self->ps[L->shards[s].ps], var->name, s, 0, 0, &out, err);
        if (rc < 0)
            return rc;
        if (out.nbytes != len)
            return zdist_error_set(err, -EPROTO, "variable '%s' shard %d: the psd sent %zu bytes, not %zu",
                                   var->name, s, out.nbytes, len);
    }
    return 0;
}

int
strategy_ps_var_new(strategy_ps_t *self, const char *name, zdist_dtype_t dtype, const zdist_shape_t *shape,
                    const void *initial, size_t nbytes, const strategy_ps_var_t *anchor, strategy_ps_var_t **ret,
                    zdist_error_t *err)
{
    if (self->started)
        return zdist_error_set(err, -EBUSY,
                               "variable %s: the workers already run the job (scheduled closures); under "
                               "parameter_server create every variable before the first schedule",
                               name);
    strategy_ps_var_t *v = calloc(1, sizeof *v);
    if (!v)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    int rc;
    if (asprintf(&v->name, "%s%s", self->prefix, name) < 0) {
        v->name = NULL;
        free(v);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    v->dtype = dtype;
    int64_t rows = shape->rank > 0 ? shape->dims[0] : 1;
    v->row_bytes = rows > 0 ? nbytes / (size_t) rows : 0;
    /* ParameterServerStrategyV2._create_variable; colocate_vars_with: unpartitioned, beside the anchor */
    rc = anchor ? zdist_placement_colocate(self->pl, v->name, shape, anchor->layout, &v->layout, err)
                : zdist_placement_place_variable(self->pl, v->name, shape, dtype, &self->part, &v->layout, err);
    if (rc < 0) {
        zdist_error_prefix(err, "variable %s", name);
        strategy_ps_var_destroy(&v);
        return rc;
    }
    for (int s = 0; s < v->layout->num_shards; s++) {
        const zdist_shard_t *sh = &v->layout->shards[s];
        zdist_ps_var_spec_t spec = {.name = v->name,
                                    .dtype = dtype,
                                    .shape = *shape,
                                    .shard_index = s,
                                    .row_offset = sh->offset,
                                    .row_count = zdist_layout_shard_rows(v->layout, s),
                                    .init_name = name};
        bool created = false;
        if ((rc = zdist_ps_client_create(self->ps[sh->ps], &spec, &created, err)) < 0) {
            zdist_error_prefix(err, "variable %s: creating shard %d on ps task %d", name, s, sh->ps);
            strategy_ps_var_destroy(&v);
            return rc;
        }
        /* an earlier run's shard: its psd remembers the steps applied to it and would skip ours */
        if (!created) {
            zdist_error_set(err, -EEXIST,
                            "variable %s: '%s' shard %d already exists on ps task %d (an earlier run's); "
                            "drop that job's variables (zdist ps drop ENDPOINT %s) or use another "
                            "variable_prefix",
                            name, v->name, s, sh->ps, self->ns[0] ? self->ns : "JOB");
            strategy_ps_var_destroy(&v);
            return -EEXIST;
        }
    }
    /* the initial value, over the zeros the shards start from */
    if (nbytes && initial) {
        rc = strategy_ps_var_write(self, v, ZDIST_VAR_ASSIGN, initial, nbytes, err);
        if (rc < 0) {
            zdist_error_prefix(err, "variable %s: its initial value", name);
            strategy_ps_var_destroy(&v);
            return rc;
        }
    }
    self->created_vars = true;
    *ret = v;
    return 0;
}

/* START_JOB on the workers, once. Variables created under the scope are
   the model's: the workers create none then, and the job's optimizer is
   set here, as a worker creating them would. */
static int
s_start(strategy_ps_t *self, zdist_error_t *err)
{
    if (self->started)
        return 0;
    int rc;
    if (self->created_vars)
        for (int p = 0; p < self->nps; p++)
            if ((rc = zdist_ps_client_set_optimizer_job(self->ps[p], &self->optimizer, self->ns, err)) < 0) {
                zdist_error_prefix(err, "setting the job's optimizer on ps task %d", p);
                return rc;
            }
    zdist_coordinator_set_create_variables(self->coord, !self->created_vars);
    if ((rc = zdist_coordinator_start(self->coord, true, err)) < 0)
        return rc;
    zdist_coordinator_set_step(self->coord, 0);
    self->started = true;
    return 0;
}

int
strategy_ps_schedule(strategy_ps_t *self, int64_t steps, zdist_remote_value_t **ret, zdist_error_t *err)
{
    if (steps < 1)
        return zdist_error_set(err, -EINVAL, "schedule: steps must be >= 1, not %lld", (long long) steps);
    int rc = s_start(self, err);
    if (rc < 0)
        return rc;
    zdist_remote_value_t *v = zdist_coordinator_schedule(self->coord, steps);
    if (!v)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    *ret = v;
    return 0;
}

int
strategy_ps_join(strategy_ps_t *self, zdist_error_t *err)
{
    if (!self->started)
        return 0;
    return zdist_coordinator_join(self->coord, err);
}

zdist_coordinator_t *
strategy_ps_coordinator(strategy_ps_t *self)
{
    return self ? self->coord : NULL;
}

/* ------------------------------------------------------------------------ */
/* parameter_server: the ClusterCoordinator                                   */

static int
s_require_ps(const zdist_strategy_object_t *self, const char *what, zdist_error_t *err)
{
    if (!self)
        return zdist_error_set(err, -EINVAL, "%s: strategy is NULL", what);
    if (!self->ps)
        return zdist_error_set(err, -EINVAL,
                               "%s: a %s has no ClusterCoordinator (parameter_server only); call "
                               "zdist_strategy_run",
                               what, zdist_strategy_class_name(self));
    return strategy_require_cross(self, NULL, err);
}

int
zdist_strategy_schedule(zdist_strategy_object_t *self, int64_t steps, zdist_remote_value_t **ret,
                        zdist_error_t *err)
{
    int rc = s_require_ps(self, "schedule", err);
    if (rc < 0)
        return rc;
    if (!ret)
        return zdist_error_set(err, -EINVAL, "schedule: ret is required");
    return strategy_ps_schedule(self->ps, steps, ret, err);
}

int
zdist_strategy_fetch(zdist_strategy_object_t *self, zdist_remote_value_t *value, zdist_tensor_t *ret_values,
                     zdist_error_t *err)
{
    int rc = s_require_ps(self, "fetch", err);
    if (rc < 0)
        return rc;
    if (!value || !ret_values)
        return zdist_error_set(err, -EINVAL, "fetch: value and ret_values are required");
    zdist_closure_result_t r;
    if ((rc = zdist_remote_value_fetch(value, &r, err)) < 0)
        return rc;
    float *loss = malloc(sizeof *loss);
    if (!loss)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    *loss = r.steps > 0 ? (float) (r.loss_sum / (double) r.steps) : 0.0f;
    ret_values[0] = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = {0}, .data = loss, .nbytes = sizeof *loss};
    return 0;
}

int
zdist_strategy_join(zdist_strategy_object_t *self, zdist_error_t *err)
{
    int rc = s_require_ps(self, "join", err);
    return rc < 0 ? rc : strategy_ps_join(self->ps, err);
}

zdist_coordinator_t *
zdist_strategy_coordinator(zdist_strategy_object_t *self)
{
    return self && self->ps ? strategy_ps_coordinator(self->ps) : NULL;
}

int
zdist_strategy_variable_ps_tasks(const zdist_strategy_var_t *var, int *ret_tasks, int max)
{
    if (!var || !var->ps)
        return 0;
    int n = strategy_ps_var_num_shards(var->ps);
    for (int i = 0; ret_tasks && i < n && i < max; i++)
        ret_tasks[i] = strategy_ps_var_shard_task(var->ps, i);
    return n;
}
