/* job_wire: zdist_job_t <-> its typed protobuf message (proto/job.proto), private to libzdist. */
#ifndef ZDIST_JOB_WIRE_H
#define ZDIST_JOB_WIRE_H

#include "job.pb-c.h"
#include "zdist/job.h"

/* The message for a job and its nested parts, borrowing the job's strings:
   valid while the job is. */
typedef struct {
    Zdist__Job__Job job;
    Zdist__Job__Optimizer optimizer;
    Zdist__Job__Files train, test;
    Zdist__Job__Files pipelines[ZDIST_JOB_MAX_PIPELINES];
    Zdist__Job__Files *pipeline_ptrs[ZDIST_JOB_MAX_PIPELINES];
    Zdist__Job__Feature features[ZDIST_FEATURE_MAX];
    Zdist__Job__Feature *feature_ptrs[ZDIST_FEATURE_MAX];
} zdist_job_pb_t;

void zdist_job_to_pb(const zdist_job_t *job, zdist_job_pb_t *ret);
/* Copies a received job into *ret (released on error) and checks it as the
   parser would: -EINVAL with err naming the field. */
int zdist_job_from_pb(const Zdist__Job__Job *pb, zdist_job_t *ret, zdist_error_t *err);

#endif
