/* worker_psd: the parameter_server strategy backend — variables live on psd tasks; reads are pulls, applies are pushes. */
#ifndef WORKER_PSD_H
#define WORKER_PSD_H

#include <stdint.h>

#include "zdist/optim.h"
#include "worker_strategy.h"
#include "worker_vars.h"
#include "zdist/error.h"
#include "zdist/partition.h"

/* How to reach the ps tasks and how to place the variables. Strings are
   borrowed for the duration of worker_psd_new. */
typedef struct {
    const char *const *endpoints; /* ps task i at endpoints[i] ("host:port" or "tcp://host:port") */
    int num_ps;
    const char *partitioner;      /* the job's spec (partition.h); NULL: none (TF's default) */
    const char *prefix;           /* prepended to every variable's name on the psds
                                     (e.g. "JOB/"); NULL: the model's names as they are */
    int64_t timeout_ms;           /* per psd call attempt; <= 0: 30000 */
    int retries;                  /* extra attempts after UNAVAILABLE / DEADLINE_EXCEEDED; < 0: 3 */
} worker_psd_config_t;

/* The backend over vars (borrowed; must outlive it). Variables are placed in
   declaration order with one placement counter (ParameterServerStrategyV2:
   round robin over the ps tasks, shard by shard; a variable's own
   partitioner overrides the job's). One replica: the backend and its ps
   clients belong to the thread that runs the steps (the one creating it).
   Connects asynchronously: an unreachable psd shows on the first call.
   NULL with err (-EINVAL naming the endpoint or the variable). */
worker_backend_t *worker_psd_new(const worker_vars_t *vars, const worker_psd_config_t *cfg, zdist_error_t *err);

/* Sets the optimizer on every psd, then creates every shard on its psd with
   its initializer and seed (values depend on (seed, name, global row) only,
   like the local backend's). Idempotent on the psd: the same shard again is
   not an error. *ret_created (may be NULL): whether any shard was new.
   -ENOTCONN when a psd does not answer (err names the task and endpoint),
   the psd's errno otherwise (e.g. -EEXIST for a shard with another spec). */
int worker_psd_create_variables(worker_backend_t *be, const zdist_optim_config_t *optim, uint64_t seed,
                                bool *ret_created, zdist_error_t *err);

/* Shards over all variables. */
int worker_psd_num_shards(const worker_backend_t *be);
/* The layout of variable var (borrowed), NULL when out of range. */
const zdist_layout_t *worker_psd_layout(const worker_backend_t *be, int var);
/* Why the latest failed call failed ("" when none): the step ABI carries
   only an errno, this names the psd and the variable. */
const char *worker_psd_last_error(const worker_backend_t *be);
/* Drops the values kept from the last push_pull (fresh for the next step's
   reads, as asynchronous training allows): the next reads pull. An
   evaluation calls it first, or it would score its first batch with this
   worker's values from before the other workers' last pushes. */
void worker_psd_forget(worker_backend_t *be);
/* The job's global step the next writes belong to (RUN_STEPS' first_step
   + k; 0: none). The psd applies a step's writes to a shard once, whoever
   sends them: a closure re-run on another worker after its first worker was
   lost pushes the same steps again and they are acknowledged as duplicates
   where they already landed. */
void worker_psd_set_job_step(worker_backend_t *be, uint64_t job_step);
/* True when be is a worker_psd backend. */
bool worker_psd_is(const worker_backend_t *be);

#endif
