/* worker_vars: a model's declared variables (its build hook run against a builder) and their initial values. */
#ifndef WORKER_VARS_H
#define WORKER_VARS_H

#include <stdint.h>

#include "zdist/error.h"
#include "zdist/step.h"

/* One declared variable, strings owned. rows = dim 0 (1 for a scalar),
   width = elements per row, n = rows * width. */
typedef struct {
    char *name;
    zdist_dtype_t dtype;
    zdist_shape_t shape;
    zdist_initializer_t init;
    char *partitioner; /* NULL: the job's */
    zdist_var_sync_t synchronization;
    zdist_var_agg_t aggregation;
    bool trainable;
    int64_t rows, width, n;
    /* Declared under colocate_vars_with: never partitioned, placed with
       variable `anchor` (an index below its own; zeroed: not colocated). */
    bool colocated;
    int anchor;
    /* A dynamic embedding table (add_dynamic_variable): shape [0, width],
       rows and n 0, its rows by int64 id on the ps tasks. */
    bool dynamic;
    zdist_dynamic_spec_t dyn;
} worker_var_t;

typedef struct {
    worker_var_t *vars;
    int n;
    int cap;
} worker_vars_t;

/* Runs model->build(state) and collects the variables into *ret (zeroed
   first). Specs are checked: unique names, float32, a valid initializer and
   partitioner spec, ON_READ only for non-trainable variables (as TF), no
   partitioner on a variable declared under colocate_vars_with. 0 or a
   negative errno with err naming the variable; *ret is left empty on error. */
int worker_vars_build(const zdist_model_t *model, void *state, worker_vars_t *ret, zdist_error_t *err);
/* Frees the table; safe on a zeroed or half-built one. */
void worker_vars_release(worker_vars_t *vars);
/* Index by name, -ENOENT. */
int worker_vars_find(const worker_vars_t *vars, const char *name);
/* Fills buf (var->n floats) with the variable's initial values for seed:
   the psd's initializer (zdist_init_fill), so every strategy starts alike. */
int worker_vars_init_values(const worker_var_t *var, uint64_t seed, float *buf, zdist_error_t *err);

#endif
