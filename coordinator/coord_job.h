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
   plugin_path (-EACCES naming it: a job names code, never a place). */
int coord_job_check(const zdist_job_t *job, zdist_error_t *err);

#endif
