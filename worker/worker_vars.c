/* worker_vars: a model's declared variables (its build hook run against a builder) and their initial values. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/init.h"
#include "worker_vars.h"
#include "zdist/partition.h"

typedef struct {
    zdist_model_builder_t base;
    worker_vars_t *vars;
    int anchor; /* colocate_vars_with's current anchor, or ZDIST_NO_COLOCATION */
} s_builder_t;

static bool
s_name_ok(const char *name)
{
    if (!name || !*name || strlen(name) > 200)
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '.' || *p == '/' || *p == '-'))
            return false;
    return true;
}

/* A dynamic table's own rules (the rest are every variable's). */
static int
s_check_dynamic(const s_builder_t *b, const zdist_var_spec_t *spec, zdist_error_t *err)
{
    if (spec->shape.rank != 2 || spec->shape.dims[0] != 0 || spec->shape.dims[1] < 1 || spec->shape.dims[1] > 65536)
        return zdist_error_set(err, -EINVAL, "dynamic table '%s': shape must be [0, dim] with dim in 1..65536",
                               spec->name);
    if (!spec->trainable || spec->partitioner || b->anchor != ZDIST_NO_COLOCATION ||
        spec->synchronization != ZDIST_SYNC_ON_WRITE)
        return zdist_error_set(err, -EINVAL, "dynamic table '%s': it is trainable, ON_WRITE, without a partitioner "
                               "and not colocated (its rows spread over the ps tasks by id)", spec->name);
    return 0;
}

static int s_add(s_builder_t *b, const zdist_var_spec_t *spec, const zdist_dynamic_spec_t *dyn, zdist_error_t *err);

static int
s_add_variable(zdist_model_builder_t *b, const zdist_var_spec_t *spec, zdist_error_t *err)
{
    return s_add((s_builder_t *) b, spec, NULL, err);
}

static int
s_add_dynamic_variable(zdist_model_builder_t *b, const zdist_var_spec_t *spec, const zdist_dynamic_spec_t *dyn,
                       zdist_error_t *err)
{
    if (!dyn)
        return zdist_error_set(err, -EINVAL, "add_dynamic_variable: no dynamic spec");
    return s_add((s_builder_t *) b, spec, dyn, err);
}

static int
s_add(s_builder_t *b, const zdist_var_spec_t *spec, const zdist_dynamic_spec_t *dyn, zdist_error_t *err)
{
    worker_vars_t *vars = b->vars;
    int anchor = b->anchor;
    if (!spec || !s_name_ok(spec->name))
        return zdist_error_set(err, -EINVAL, "variable name '%s' is not valid: use 1-200 of [A-Za-z0-9_./-]",
                               spec && spec->name ? spec->name : "(null)");
    if (worker_vars_find(vars, spec->name) >= 0)
        return zdist_error_set(err, -EEXIST, "variable '%s' is declared twice", spec->name);
    if (spec->dtype != ZDIST_DTYPE_FLOAT32)
        return zdist_error_set(err, -EINVAL, "variable '%s': dtype %s is not supported, use float32",
                               spec->name, zdist_dtype_name(spec->dtype));
    int64_t n = 0;
    if (dyn && s_check_dynamic(b, spec, err) < 0)
        return -EINVAL;
    if (!dyn && (spec->shape.rank < 0 || spec->shape.rank > ZDIST_MAX_RANK || zdist_shape_init(&(zdist_shape_t){0}, spec->shape.rank, spec->shape.dims) < 0 ||
        zdist_shape_num_elements(&spec->shape, &n) < 0 || n < 1 || n > (INT64_C(1) << 34)))
        return zdist_error_set(err, -EINVAL, "variable '%s': shape must have 1 to 2^34 elements and no negative dim",
                               spec->name);
    if ((unsigned)spec->init.kind > (unsigned)ZDIST_INIT_GLOROT_UNIFORM)
        return zdist_error_set(err, -EINVAL, "variable '%s': unknown initializer %d", spec->name, (int)spec->init.kind);
    if (zdist_init_validate(&spec->init, spec->dtype, err) < 0) {
        zdist_error_prefix(err, "variable '%s'", spec->name);
        return -EINVAL;
    }
    if (spec->partitioner && anchor != ZDIST_NO_COLOCATION)
        return zdist_error_set(err, -EINVAL,
                               "variable '%s': declared under colocate_vars_with('%s'), it is never partitioned; "
                               "drop its partitioner \"%s\" or declare it outside the colocation",
                               spec->name, vars->vars[anchor].name, spec->partitioner);
    if (spec->partitioner) {
        zdist_partitioner_t p;
        if (zdist_partitioner_parse(spec->partitioner, &p, err) < 0) {
            zdist_error_prefix(err, "variable '%s': partitioner", spec->name);
            return -EINVAL;
        }
    }
    if (spec->synchronization != ZDIST_SYNC_ON_WRITE && spec->synchronization != ZDIST_SYNC_ON_READ)
        return zdist_error_set(err, -EINVAL, "variable '%s': unknown synchronization %d", spec->name,
                               (int)spec->synchronization);
    if ((unsigned)spec->aggregation > (unsigned)ZDIST_AGG_ONLY_FIRST_REPLICA)
        return zdist_error_set(err, -EINVAL, "variable '%s': unknown aggregation %d", spec->name,
                               (int)spec->aggregation);
    if (spec->synchronization == ZDIST_SYNC_ON_READ && spec->trainable)
        return zdist_error_set(err, -EINVAL,
                               "variable '%s': synchronization ON_READ is only for non-trainable variables "
                               "(set trainable = false)", spec->name);
    if (vars->n == vars->cap) {
        int cap = vars->cap ? vars->cap * 2 : 8;
        worker_var_t *nv = realloc(vars->vars, (size_t)cap * sizeof *nv);
        if (!nv)
            return zdist_error_set(err, -ENOMEM, "out of memory");
        vars->vars = nv;
        vars->cap = cap;
    }
    worker_var_t *v = &vars->vars[vars->n];
    memset(v, 0, sizeof *v);
    v->name = strdup(spec->name);
    v->partitioner = spec->partitioner ? strdup(spec->partitioner) : NULL;
    if (!v->name || (spec->partitioner && !v->partitioner)) {
        free(v->name);
        free(v->partitioner);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    v->dtype = spec->dtype;
    v->shape = spec->shape;
    v->init = spec->init;
    v->synchronization = spec->synchronization;
    v->aggregation = spec->aggregation;
    v->trainable = spec->trainable;
    v->rows = spec->shape.rank == 0 ? 1 : spec->shape.dims[0];
    v->n = n;
    v->width = dyn ? spec->shape.dims[1] : v->rows ? n / v->rows : 0;
    v->dynamic = dyn != NULL;
    if (dyn)
        v->dyn = *dyn;
    v->colocated = anchor != ZDIST_NO_COLOCATION;
    v->anchor = v->colocated ? anchor : 0;
    return vars->n++;
}

static int
s_colocate_vars_with(zdist_model_builder_t *b, int anchor, zdist_error_t *err)
{
    s_builder_t *self = (s_builder_t *)b;
    if (anchor != ZDIST_NO_COLOCATION && (anchor < 0 || anchor >= self->vars->n))
        return zdist_error_set(err, -EINVAL,
                               "colocate_vars_with: %d is not a declared variable's handle (0..%d), nor "
                               "ZDIST_NO_COLOCATION",
                               anchor, self->vars->n - 1);
    /* An anchor that is itself colocated: its variables live with its own
       anchor, the same ps task. */
    if (anchor != ZDIST_NO_COLOCATION && self->vars->vars[anchor].colocated)
        anchor = self->vars->vars[anchor].anchor;
    self->anchor = anchor;
    return 0;
}

static const zdist_builder_ops_t s_builder_ops = {
    .size = sizeof(zdist_builder_ops_t),
    .add_variable = s_add_variable,
    .colocate_vars_with = s_colocate_vars_with,
    .add_dynamic_variable = s_add_dynamic_variable,
};

int
worker_vars_build(const zdist_model_t *model, void *state, worker_vars_t *ret, zdist_error_t *err)
{
    memset(ret, 0, sizeof *ret);
    s_builder_t b = {.base = {.ops = &s_builder_ops}, .vars = ret, .anchor = ZDIST_NO_COLOCATION};
    int rc = model->build(state, &b.base, err);
    if (rc >= 0 && ret->n == 0)
        rc = zdist_error_set(err, -EINVAL, "model '%s' declared no variables", model->name);
    if (rc < 0) {
        if (err && !err->text[0])
            zdist_error_set(err, rc, "model '%s': build failed (%s)", model->name, strerror(-rc));
        worker_vars_release(ret);
        return rc;
    }
    return 0;
}

void
worker_vars_release(worker_vars_t *vars)
{
    if (!vars)
        return;
    for (int i = 0; i < vars->n; i++) {
        free(vars->vars[i].name);
        free(vars->vars[i].partitioner);
    }
    free(vars->vars);
    memset(vars, 0, sizeof *vars);
}

int
worker_vars_find(const worker_vars_t *vars, const char *name)
{
    if (!name)
        return -ENOENT;
    for (int i = 0; i < vars->n; i++)
        if (strcmp(vars->vars[i].name, name) == 0)
            return i;
    return -ENOENT;
}

int
worker_vars_init_values(const worker_var_t *var, uint64_t seed, float *buf, zdist_error_t *err)
{
    return zdist_init_fill(&var->init, seed, var->name, var->dtype, &var->shape, 0, var->rows, buf,
                         (size_t)var->n * sizeof(float), err);
}
