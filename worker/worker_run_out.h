/* worker_run_out: what `zdist run` writes besides its report — a checkpoint (--save) and the test set's predictions (--dump-predictions). */
#ifndef WORKER_RUN_OUT_H
#define WORKER_RUN_OUT_H

#include <stdint.h>

#include "worker_session.h"
#include "zdist/error.h"

/* Saves the session's variables (replica 0's copy; no optimizer slots: the
   checkpoint is for export and evaluation, not to resume training) as a
   worker-state checkpoint (zdist/wstate.h) in DIR/ckpt-STEP/, with the job
   file's text as job.json and a sealed manifest.json written last (the
   coordinator's completion mark), so `zdist export DIR` finds it. DIR is
   created (one level) when missing. Negative errno with err naming the path. */
int worker_run_save(worker_session_t *sess, const char *job_path, const char *dir, int64_t step, zdist_error_t *err);

/* The built-in models' per-example predictions during one evaluation
   (worker/models/models.h's sink), put back in the test set's order: each
   step's replicas' parts in replica order. Only one at a time per process. */
typedef struct worker_predictions_t worker_predictions_t;
/* Starts collecting; NULL when out of memory. */
worker_predictions_t *worker_predictions_start(int num_replicas);
/* Writes what was collected to path (crash-safe, zdist_file_write): one
   line per example, its outputs as %.9g separated by spaces. -ENODATA when
   the model handed none (not a built-in model). */
int worker_predictions_write(worker_predictions_t *self, const char *path, zdist_error_t *err);
/* Stops collecting and frees; NULL-safe. */
void worker_predictions_stop(worker_predictions_t **self_p);

#endif
