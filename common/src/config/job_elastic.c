/* job_elastic: an elastic ring's size in a job (strategy.min_workers / max_workers, as TorchElastic's
   --nnodes MIN:MAX). The ring keeps the global batch when it changes size, so each replica's batch is
   global_batch_size / (workers x num_replicas): a size it does not divide by is refused here, at submit,
   for every size in MIN..MAX — a ring may take any of them at any time, and a job refused after hours of
   training would lose them. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "job_elastic.h"
#include "zdist/cluster.h"

/* One of the two fields, absent 0; -EINVAL when it is not an integer in 1..ZDIST_JOB_MAX_WORKERS. */
static int
s_field(json_t *st, const char *key, int *ret, zdist_error_t *err)
{
    json_t *v = json_object_get(st, key);
    *ret = 0;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > ZDIST_JOB_MAX_WORKERS)
        return zdist_error_set(err, -EINVAL, "strategy.%s: must be an integer in 1..%d (workers in the ring)", key,
                               ZDIST_JOB_MAX_WORKERS);
    *ret = (int)json_integer_value(v);
    return 0;
}

int
zdist_job_elastic_parse_(json_t *st, zdist_job_t *job, zdist_error_t *err)
{
    int rc = s_field(st, "min_workers", &job->min_workers, err);
    return rc < 0 ? rc : s_field(st, "max_workers", &job->max_workers, err);
}

/* The first size in lo..hi whose replicas (size x per) do not divide g; 0 when every one does. */
static int
s_first_bad(int64_t g, int lo, int hi, int64_t per)
{
    for (int s = lo; s <= hi; s++)
        if (g % (s * per) != 0)
            return s;
    return 0;
}

/* Every size's replicas divide the global batch: -EINVAL naming the fields, the first size that does not,
   and the least global batch every size divides when there is one up to the largest batch a job takes (a
   multiple of the largest size's replicas, searched: the loop ends at the first size that fails, so it is
   short). */
static int
s_divides(const zdist_job_t *job, zdist_error_t *err)
{
    int64_t g = job->global_batch_size, per = job->num_replicas > 0 ? job->num_replicas : 1;
    int lo = job->min_workers, hi = job->max_workers, bad = s_first_bad(g, lo, hi, per);
    if (!bad)
        return 0;
    int64_t least = 0, step = hi * per;
    for (int64_t c = step; c <= ZDIST_JOB_MAX_BATCH && !least; c += step)
        least = s_first_bad(c, lo, hi, per) ? 0 : c;
    char fix[160] = "narrow strategy.min_workers..max_workers";
    if (least > 0)
        snprintf(fix, sizeof fix, "use a multiple of %lld (every size's replicas divide it) or narrow the range",
                 (long long)least);
    return zdist_error_set(err, -EINVAL,
                           "dataset.global_batch_size: %lld does not divide by %d workers x %lld replica%s "
                           "(strategy.min_workers %d .. strategy.max_workers %d, strategy.num_replicas %lld): the "
                           "ring keeps the global batch when it changes size and gives each replica "
                           "global_batch_size / (workers x num_replicas); %s",
                           (long long)g, bad, (long long)per, per == 1 ? "" : "s", lo, hi, (long long)per, fix);
}

int
zdist_job_elastic_validate_(const zdist_job_t *job, zdist_error_t *err)
{
    int lo = job->min_workers, hi = job->max_workers;
    if (lo == 0 && hi == 0)
        return 0;
    if (lo == 0 || hi == 0)
        return zdist_error_set(err, -EINVAL, "strategy.%s: give strategy.min_workers and strategy.max_workers "
                               "together (the ring's size, MIN..MAX)", lo == 0 ? "max_workers" : "min_workers");
    if (lo < 0 || hi > ZDIST_JOB_MAX_WORKERS || lo > hi)
        return zdist_error_set(err, -EINVAL, "strategy.min_workers: %d and strategy.max_workers %d: give "
                               "1 <= min_workers <= max_workers <= %d", lo, hi, ZDIST_JOB_MAX_WORKERS);
    if (!zdist_strategy_syncs_workers(job->strategy))
        return zdist_error_set(err, -EINVAL, "strategy.min_workers: only multi_worker_mirrored and tpu have it; "
                               "remove it");
    if (job->num_pipelines)
        return zdist_error_set(err, -EINVAL, "dataset.pipelines: one pipeline per worker cannot follow a ring "
                               "that changes size (strategy.min_workers/max_workers); give dataset.train");
    bool data = job->shard_policy == ZDIST_AUTO_SHARD_DATA ||
                (job->shard_policy == ZDIST_AUTO_SHARD_AUTO && job->format == ZDIST_INPUT_FORMAT_SYNTHETIC);
    if (!data)
        return zdist_error_set(err, -EINVAL, "dataset.shard_policy: an elastic ring (strategy.min_workers/"
                               "max_workers) needs \"data\", so that each step's global batch is the same examples "
                               "and an epoch the same steps whatever the ring's size; set it to \"data\"");
    return s_divides(job, err);
}
