/* coord_job: the coordinator's view of a job — zdist/job.h's struct, restricted to the strategies a chief runs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord_job.h"
#include "zdist/job.h"
#include "zdist/model_spec.h"

/* --checkpoint-root: written by main before any thread, read-only after. */
static char *s_ckpt_roots[COORD_MAX_CKPT_ROOTS];
static size_t s_num_ckpt_roots;

int
coord_job_set_checkpoint_roots(const char *const *roots, size_t n)
{
    if (n > COORD_MAX_CKPT_ROOTS)
        return -EINVAL;
    for (size_t i = 0; i < s_num_ckpt_roots; i++)
        free(s_ckpt_roots[i]);
    s_num_ckpt_roots = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(s_ckpt_roots[i] = strdup(roots[i])))
            return -ENOMEM;
        s_num_ckpt_roots = i + 1;
    }
    return 0;
}

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
    /* What the workers would refuse at START_JOB is refused here, before
       the job is stored (one validator: libzdist's). */
    int rc = zdist_model_params_check(job->model, job->model_params, err);
    if (rc < 0)
        return rc;
    return zdist_job_confine_checkpoint(job, (const char *const *) s_ckpt_roots, s_num_ckpt_roots, err);
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

int
coord_job_ckpt_root(const char *text, const char *base_dir, const char *job_dir, const char *id, char *root,
                    size_t size)
{
    zdist_job_t job;
    zdist_error_t err = {0};
    if (zdist_job_parse(text, base_dir && *base_dir ? base_dir : NULL, &job, &err) < 0)
        return -EINVAL;
    if (job.ckpt_dir)
        snprintf(root, size, "%s/%s", job.ckpt_dir, id);
    else
        snprintf(root, size, "%s", job_dir);
    zdist_job_release(&job);
    return 0;
}
