/* coord_job: the coordinator's view of a job document (checkpoint, evaluation) over worker_job's strict parser. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "coord_job.h"
#include "worker_job.h"

static int
s_int(json_t *o, const char *where, const char *key, int64_t min, int64_t max, int64_t *ret, zdist_error_t *err)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return zdist_error_set(err, -EINVAL, "%s.%s: must be an integer in %lld..%lld", where, key, (long long)min,
                               (long long)max);
    *ret = json_integer_value(v);
    return 0;
}

static int
s_only(json_t *o, const char *where, const char *const *allowed, zdist_error_t *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        bool ok = strcmp(key, "comment") == 0;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(*a, key) == 0;
        if (!ok)
            return zdist_error_set(err, -EINVAL, "%s.%s: unknown field; remove it (known: %s%s%s)", where, key,
                                   allowed[0], allowed[1] ? ", " : "", allowed[1] ? allowed[1] : "");
    }
    return 0;
}

void
coord_job_release(coord_job_t *job)
{
    if (!job)
        return;
    free(job->name);
    free(job->worker_json);
    memset(job, 0, sizeof *job);
}

int
coord_job_parse(const char *text, const char *base_dir, coord_job_t *ret, zdist_error_t *err)
{
    memset(ret, 0, sizeof *ret);
    json_error_t jerr;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        zdist_error_set(err, -EINVAL, "job: line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        if (err) {
            err->line = jerr.line;
            err->column = jerr.column;
        }
        return -EINVAL;
    }
    int rc = 0;
    worker_job_t wj = {0};
    if (!json_is_object(root)) {
        rc = zdist_error_set(err, -EINVAL, "job: must be a JSON object { \"name\": ..., ... }");
        goto out;
    }
    ret->ckpt_keep = 3;
    json_t *ck = json_object_get(root, "checkpoint");
    if (ck) {
        static const char *const allowed[] = {"every_steps", "keep", NULL};
        if (!json_is_object(ck)) {
            rc = zdist_error_set(err, -EINVAL, "checkpoint: must be an object {\"every_steps\": N, \"keep\": K}");
            goto out;
        }
        if ((rc = s_only(ck, "checkpoint", allowed, err)) < 0 ||
            (rc = s_int(ck, "checkpoint", "every_steps", 1, INT64_C(1) << 40, &ret->ckpt_every, err)) < 0 ||
            (rc = s_int(ck, "checkpoint", "keep", 1, 1000, &ret->ckpt_keep, err)) < 0)
            goto out;
    }
    int eval = -1;
    json_t *ev = json_object_get(root, "evaluation");
    if (ev) {
        static const char *const allowed[] = {"at_end", NULL};
        if (!json_is_object(ev)) {
            rc = zdist_error_set(err, -EINVAL, "evaluation: must be an object {\"at_end\": true}");
            goto out;
        }
        if ((rc = s_only(ev, "evaluation", allowed, err)) < 0)
            goto out;
        json_t *a = json_object_get(ev, "at_end");
        if (a && !json_is_boolean(a)) {
            rc = zdist_error_set(err, -EINVAL, "evaluation.at_end: must be true or false");
            goto out;
        }
        eval = a ? json_is_true(a) : 1;
    }
    json_object_del(root, "checkpoint");
    json_object_del(root, "evaluation");
    char *stripped = json_dumps(root, JSON_COMPACT);
    if (!stripped) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    rc = worker_job_parse(stripped, base_dir, &wj, err);
    free(stripped);
    if (rc < 0)
        goto out;
    if (wj.strategy != ZDIST_STRATEGY_PARAMETER_SERVER && wj.strategy != ZDIST_STRATEGY_MULTI_WORKER_MIRRORED) {
        rc = zdist_error_set(err, -EINVAL,
                             "strategy.type: zdist-coordinator runs parameter_server and multi_worker_mirrored "
                             "jobs, got '%s'; use one of those (or 'zdist run' for %s)",
                             zdist_strategy_name(wj.strategy), zdist_strategy_name(wj.strategy));
        goto out;
    }
    ret->strategy = wj.strategy;
    ret->collective_timeout_ms = wj.collective_timeout_ms;
    ret->lost_worker_wait_ms = wj.lost_worker_wait_ms;
    ret->has_test = wj.has_test || (wj.format == ZDIST_INPUT_FORMAT_SYNTHETIC && wj.synthetic_test_n > 0);
    if (eval == 1 && !ret->has_test) {
        rc = zdist_error_set(err, -EINVAL,
                             "evaluation.at_end: the job has no test set; add dataset.test (or "
                             "dataset.synthetic.test_n) or set it to false");
        goto out;
    }
    ret->evaluate = eval < 0 ? ret->has_test : eval == 1;
    ret->steps = wj.steps;
    ret->epochs = wj.epochs;
    ret->steps_per_execution = wj.steps_per_execution;
    ret->log_every = wj.log_every;
    /* Workers' input repeats forever: the coordinator counts the steps. */
    if (wj.epochs > 0) {
        json_object_del(root, "epochs");
        json_object_set_new(root, "steps", json_integer(1));
    }
    ret->name = strdup(wj.name);
    ret->worker_json = json_dumps(root, JSON_COMPACT);
    if (!ret->name || !ret->worker_json)
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
out:
    worker_job_release(&wj);
    json_decref(root);
    if (rc < 0)
        coord_job_release(ret);
    return rc;
}
