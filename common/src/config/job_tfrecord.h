/* job_tfrecord (internal): what job.c, job_confine.c and job_wire.c call
   for a tfrecord dataset's fields. */
#ifndef ZDIST_JOB_TFRECORD_H
#define ZDIST_JOB_TFRECORD_H

#include <jansson.h>

#include "zdist/job.h"

/* dataset.compression, dataset.features and dataset.label from the
   dataset object; -EINVAL naming the field ("dataset.features.I1.dtype:
   must be \"float32\" or \"int64\", got \"int32\""). */
int zdist_job_tfrecord_parse_(json_t *ds, zdist_job_t *job, zdist_error_t *err);
/* The same checks on the struct (a job received as a message). */
int zdist_job_tfrecord_validate_(const zdist_job_t *job, zdist_error_t *err);
/* Frees the features and the label; the matched lists are job.c's. */
void zdist_job_tfrecord_release_(zdist_job_t *job);

#endif
