/* coord_job: the coordinator's view of a job — zdist/job.h's struct, restricted to the strategies a chief runs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coord_job.h"
#include "zdist/job.h"

void
coord_job_release(coord_job_t *job)
{
    if (!job)
        return;
    zdist_job_release(&job->spec);
    memset(job, 0, sizeof *job);
}

int
coord_job_check(const zdist_job_t *job, zdist_error_t *err)
{
    if (job->strategy != ZDIST_STRATEGY_PARAMETER_SERVER && !zdist_strategy_syncs_workers(job->strategy))
        return zdist_error_set(err, -EINVAL,
                               "strategy.type: zdist-coordinator runs parameter_server, multi_worker_mirrored and "
                               "tpu jobs, got '%s'; use one of those (or 'zdist run' for %s)",
                               zdist_strategy_name(job->strategy), zdist_strategy_name(job->strategy));
    /* A job names code and data, never places: workers load plugins from
       their operator's --plugin-dir only (and refuse plugin_path too). */
    if (job->plugin_path && *job->plugin_path)
        return zdist_error_set(err, -EACCES,
                               "plugin_path: '%.200s': a job submitted to a cluster names its model by name only "
                               "(model.name), never a place to load code from; the workers load plugins from the "
                               "directories their operator gave them (zdist-worker --plugin-dir): remove plugin_path",
                               job->plugin_path);
    return 0;
}

int
coord_job_parse(const char *text, const char *base_dir, coord_job_t *ret, zdist_error_t *err)
{
    memset(ret, 0, sizeof *ret);
    zdist_job_t job;
    int rc = zdist_job_parse(text, base_dir, &job, err);
    if (rc < 0)
        return rc;
    if ((rc = coord_job_check(&job, err)) < 0)
        goto out;
    ret->spec = job; /* taken */
    memset(&job, 0, sizeof job);
out:
    zdist_job_release(&job);
    if (rc < 0)
        coord_job_release(ret);
    return rc;
}
