/* zdist strategy, parameter_server flavour (private to src/strategy): the
   ClusterCoordinator the Strategy object drives and the variables it
   creates on the psds. */
#ifndef ZDIST_STRATEGY_PS_H
#define ZDIST_STRATEGY_PS_H

#include "zdist/coordinator.h"
#include "zdist/distribute.h"
#include "zdist/error.h"
#include "zdist/tensor.h"

typedef struct strategy_ps_t strategy_ps_t;
typedef struct strategy_ps_var_t strategy_ps_var_t;

/* Checks the options and connects a ps client per ps task; the
   coordinator is made and started at the first schedule. */
int strategy_ps_new(const zdist_coordinator_options_t *opts, strategy_ps_t **ret, zdist_error_t *err);
void strategy_ps_destroy(strategy_ps_t **self_p);

/* A variable on the psds, placed as a job's workers place it: the job's
   partitioner (Div rows, round robin), or beside anchor unpartitioned.
   initial (nbytes) may be NULL: zeros. */
int strategy_ps_var_new(strategy_ps_t *self, const char *name, zdist_dtype_t dtype, const zdist_shape_t *shape,
                        const void *initial, size_t nbytes, const strategy_ps_var_t *anchor,
                        strategy_ps_var_t **ret, zdist_error_t *err);
void strategy_ps_var_destroy(strategy_ps_var_t **self_p);
/* The ps task of shard i, and the number of shards. */
int strategy_ps_var_num_shards(const strategy_ps_var_t *var);
int strategy_ps_var_shard_task(const strategy_ps_var_t *var, int i);
/* The whole variable from its shards into buf[nbytes]. */
int strategy_ps_var_read(strategy_ps_t *self, const strategy_ps_var_t *var, void *buf, size_t nbytes,
                         zdist_error_t *err);
/* assign / assign_add / assign_sub of value[nbytes] on every shard. */
int strategy_ps_var_write(strategy_ps_t *self, const strategy_ps_var_t *var, zdist_var_op_t op, const void *value,
                          size_t nbytes, zdist_error_t *err);

int strategy_ps_schedule(strategy_ps_t *self, int64_t steps, zdist_remote_value_t **ret, zdist_error_t *err);
int strategy_ps_join(strategy_ps_t *self, zdist_error_t *err);
zdist_coordinator_t *strategy_ps_coordinator(strategy_ps_t *self);

#endif
