/* coord_job: a job as the coordinator takes it — zdist/job.h's struct, restricted to the strategies a chief runs. */
#ifndef COORD_JOB_H
#define COORD_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "zdist/cluster.h"
#include "zdist/error.h"
#include "zdist/job.h"
#include "zdist/step.h" /* output names (loss, examples, correct) */

/* The job's fields are read from spec (name, strategy, steps, epochs,
   checkpoint and evaluation settings): one copy of each. */
typedef struct {
    zdist_job_t spec; /* the whole job, sent to the workers as it is */
} coord_job_t;

/* Parses text strictly (zdist_job_parse: checkpoint and evaluation
   included); parameter_server and multi_worker_mirrored jobs only. -EINVAL
   with err naming the field. */
int coord_job_parse(const char *text, const char *base_dir, coord_job_t *ret, zdist_error_t *err);
void coord_job_release(coord_job_t *job);
/* What a chief runs of a job parsed by zdist/job.h: parameter_server and
   multi_worker_mirrored (-EINVAL naming strategy.type otherwise), without a
   plugin_path (-EACCES naming it: a job names code, never a place), with
   the params a worker takes for its built-in model (zdist_model_params_check:
   -EINVAL naming the field) and its checkpoint.dir under the checkpoint
   roots (-EACCES). */
int coord_job_check(const zdist_job_t *job, zdist_error_t *err);

/* Where coord_job_check lets a job's checkpoint.dir lie: the chief's
   --checkpoint-root directories (absolute and canonical; the state dir
   when none is given). Set once by main before the server starts, read
   only after (coord_job_check then also refuses, -EACCES naming
   checkpoint.dir and the flag, a directory elsewhere, before the server
   creates any of it). -EINVAL past COORD_MAX_CKPT_ROOTS. */
/* Where an unfinished job's checkpoints are: checkpoint.dir/ID, else
   job_dir, into root[size]. -EINVAL when the stored text no longer parses.
   For the log line of a restart (coord_run_ckpt_last of it is the step the
   job resumes from). */
int coord_job_ckpt_root(const char *text, const char *base_dir, const char *job_dir, const char *id, char *root,
                        size_t size);

#define COORD_MAX_CKPT_ROOTS 16
int coord_job_set_checkpoint_roots(const char *const *roots, size_t n);

#endif
