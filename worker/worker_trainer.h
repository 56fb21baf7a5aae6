/* worker_trainer: a model's replicas on libzdist's replica runtime — step.h replica contexts over a strategy backend, one call per step. */
#ifndef WORKER_TRAINER_H
#define WORKER_TRAINER_H

#include <stdbool.h>
#include <stdint.h>

#include "zdist/optim.h"
#include "worker_strategy.h"
#include "worker_vars.h"
#include "zdist/error.h"
#include "zdist/input.h"
#include "zdist/step.h"

/* Makes a backend other than the local one (parameter_server: worker_psd)
   from the model's built variables, which outlive it. NULL with err. */
typedef worker_backend_t *(worker_backend_factory_fn)(const worker_vars_t *vars, void *arg, zdist_error_t *err);

typedef struct {
    zdist_strategy_t strategy; /* one_device, mirrored, central_storage */
    int num_replicas;
    zdist_optim_config_t optim;
    uint64_t seed; /* variables' initial values */
    /* multi_worker_mirrored: this worker's replicas are global replicas
       worker_index * num_replicas + r of num_workers * num_replicas, and a
       training step's loss is scaled by the batch of all workers (local
       examples x num_workers, as tf.nn.compute_average_loss). 0 means 1. */
    int num_workers, worker_index;
    /* tpu: each replica runs on logical_devices threads (0 means 1) and
       every replica's threads, replica 0's too, are this trainer's, pinned
       one to a core of the process's affinity when pin (a failure to pin
       is logged once). */
    int logical_devices;
    bool pin;
    worker_backend_factory_fn *make_backend; /* NULL: the local backend (zdist/mirror.h) */
    void *make_backend_arg;
} worker_trainer_config_t;

#define WORKER_MAX_OUTPUTS 16
#define WORKER_OUTPUT_NAME_MAX 32

/* A step's named outputs, reduced over replicas by each output's op. */
typedef struct {
    int n;
    char names[WORKER_MAX_OUTPUTS][WORKER_OUTPUT_NAME_MAX];
    double values[WORKER_MAX_OUTPUTS];
} worker_outputs_t;

/* value of `name`, or dflt when the step did not report it. */
double worker_outputs_get(const worker_outputs_t *out, const char *name, double dflt);

typedef struct worker_trainer_t worker_trainer_t;

/* Makes the model (init with params_json, may be NULL for "{}"), builds its
   variables, creates the backend and starts the replica runtime's threads:
   num_replicas - 1 (replica 0 runs on the caller's thread), or num_replicas
   when cfg->pin, plus the logical devices'. The model is borrowed and must
   outlive the trainer. NULL with err. */
worker_trainer_t *worker_trainer_new(const zdist_model_t *model, const char *params_json,
                                     const zdist_model_info_t *info, const worker_trainer_config_t *cfg,
                                     zdist_error_t *err);
/* Stops the threads, destroys the model state. NULL-safe; nulls *self_p. */
void worker_trainer_destroy(worker_trainer_t **self_p);

/* One step over an input step whose num_replicas matches: every replica runs
   train_step (eval false) or eval_step on its batch. 0 and *ret (may be
   NULL), or the first replica's error (not counting the -EPIPE or
   -ECANCELED of replicas released because of it) with err saying which replica failed
   and why. After a failure the trainer refuses further steps (-ECANCELED). */
int worker_trainer_step(worker_trainer_t *self, const zdist_input_step_t *step, bool eval,
                        worker_outputs_t *ret, zdist_error_t *err);

int worker_trainer_num_replicas(const worker_trainer_t *self);
/* Replica `replica`'s predictions of the last eval step (the model's
   zdist_ctx_predictions): their count and *ret (borrowed, until the next
   step), or -1 when it gave none. */
int64_t worker_trainer_predictions(const worker_trainer_t *self, int replica, const float **ret);
const worker_vars_t *worker_trainer_vars(const worker_trainer_t *self);
worker_backend_t *worker_trainer_backend(worker_trainer_t *self);
/* Cross-replica value of a variable (ON_READ aggregated) into out (var->n
   floats). -ENOENT for an unknown name. */
int worker_trainer_read_variable(worker_trainer_t *self, const char *name, float *out, zdist_error_t *err);

#endif
