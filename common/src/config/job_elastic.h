/* job_elastic (internal): strategy.min_workers / max_workers, what job.c calls for them. */
#ifndef ZDIST_JOB_ELASTIC_H
#define ZDIST_JOB_ELASTIC_H

#include <jansson.h>

#include "zdist/job.h"

/* The two fields from the strategy object (absent: 0); -EINVAL naming the field. */
int zdist_job_elastic_parse_(json_t *st, zdist_job_t *job, zdist_error_t *err);
/* Their rules on the struct (also a job received as a message): both or
   neither, 1 <= min <= max <= ZDIST_JOB_MAX_WORKERS, multi_worker_mirrored
   or tpu only, the dataset sharded by data, and dataset.global_batch_size
   divisible by every size's replicas (workers x strategy.num_replicas). */
int zdist_job_elastic_validate_(const zdist_job_t *job, zdist_error_t *err);

#endif
