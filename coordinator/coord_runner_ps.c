/* coord_runner_ps: a parameter_server job — libzdist's ClusterCoordinator schedules closures of N steps to
   any free worker, every ps saves and restores its shards, and a lost psd means a restore from the last
   checkpoint. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord_runner_ps.h"
#include "zdist/coordinator.h"
#include "zdist/ps_client.h"
#include "zdist/sys.h"

typedef struct {
    zdist_coordinator_t *coord; /* this attempt's */
    /* The job's spec under a name unique to this submission, NAME@ID
       (workers hold several jobs' sessions by name): a shallow copy of
       cfg->job.spec, only its name its own. */
    zdist_job_t job;
    char *name;
    uint64_t ps_inc[COORD_MAX_PS]; /* the psds' incarnations when the attempt began */
    /* A preempted psd's incarnation (0: none): training waits until it has
       restarted (another incarnation), then restores the checkpoint saved for it. */
    uint64_t ps_preempted[COORD_MAX_PS];
    int64_t scheduled;                /* steps handed to the ClusterCoordinator */
    unsigned psd_recoveries;
    /* Per worker, over the ClusterCoordinators of earlier attempts. */
    unsigned worker_restarts[COORD_MAX_WORKERS];
    int64_t worker_closures[COORD_MAX_WORKERS];
    char lost_why[1024]; /* why the attempt ended with -EAGAIN */
    uint64_t saved_bytes; /* the last checkpoint's, over its ps tasks */
    /* A move under way (zdist reshard): from how many ps, at which step,
       when it began and when its checkpoint was done; answered once the
       new layout holds that checkpoint. */
    struct {
        int from;
        int64_t step, t0_ms, saved_ms;
        uint64_t bytes;
    } move;
    /* dataset.visitation exactly_once: batches an epoch (every worker's
       pipeline is the whole dataset). Closure step g reads batch (g - 1) %
       spe of epoch (g - 1) / spe, so the steps the psds applied are the
       acknowledged positions: a checkpoint at step S has visited exactly
       the first S batches. 0: at_least_once. */
    int64_t spe;
} s_ps_t;

/* A save or restore's deadline on each psd: gigabytes of shards written or
   read (with fsync) take longer than the 5 s of the runner's other calls,
   after which a psd counts as lost; a psd that dies meanwhile is still
   noticed at once (its connection's heartbeats fail the call). */
#define S_CKPT_TIMEOUT_MS (10 * 60 * 1000)

/* s_train's: the job moved to another number of ps tasks; the attempt starts again on them. */
#define S_RESHARDED 2

/* ---- visitation (exactly_once) ---- */

/* Where the epochs stand after `step` acknowledged steps, as JSON fields. */
static void
s_visitation_fields(const s_ps_t *p, int64_t step, char *buf, size_t size)
{
    if (p->spe <= 0) {
        snprintf(buf, size, "\"visitation\": \"at_least_once\"");
        return;
    }
    snprintf(buf, size, "\"visitation\": \"exactly_once\", \"steps_per_epoch\": %lld, \"epoch\": %lld, "
             "\"epoch_batches_done\": %lld", (long long)p->spe, (long long)(step / p->spe),
             (long long)(step % p->spe));
}

/* The status's "visitation": the mode, and under exactly_once the epoch
   and the batches of it whose steps the psds applied. */
static void
s_visitation_status(coord_run_t *r, json_t *detail)
{
    s_ps_t *p = r->impl;
    json_t *v = p->spe <= 0 ? json_pack("{s:s}", "mode", "at_least_once")
                            : json_pack("{s:s, s:I, s:I, s:I}", "mode", "exactly_once", "steps_per_epoch",
                                        (json_int_t)p->spe, "epoch", (json_int_t)(r->step / p->spe),
                                        "epoch_batches_done", (json_int_t)(r->step % p->spe));
    if (v)
        json_object_set_new(detail, "visitation", v);
}

/* Resuming from the checkpoint at `step`: its manifest's batches an epoch
   must be the workers' (else the data changed under the job, and step
   numbers would name other batches). 0, or -EINVAL with r->error. */
static int
s_visitation_resume(coord_run_t *r, int64_t step)
{
    s_ps_t *p = r->impl;
    if (p->spe <= 0)
        return 0;
    char path[1200];
    snprintf(path, sizeof path, "%s/ckpt-%lld/manifest.json", r->cfg->ckpt_root, (long long)step);
    json_t *m = json_load_file(path, 0, NULL);
    json_int_t spe = m ? json_integer_value(json_object_get(m, "steps_per_epoch")) : 0;
    json_decref(m);
    if (step > 0 && spe != p->spe) {
        snprintf(r->error, sizeof r->error, "dataset.visitation exactly_once: the checkpoint at step %lld was taken "
                 "at %lld batches an epoch, the workers now read %lld: the dataset or its batch size changed",
                 (long long)step, (long long)spe, (long long)p->spe);
        return -EINVAL;
    }
    zsys_info("job %s: exactly-once visitation resumes epoch %lld after its first %lld of %lld batches",
              r->cfg->job_id, (long long)(step / p->spe), (long long)(step % p->spe), (long long)p->spe);
    return 0;
}

/* ---- status ---- */

/* The state of worker i as the status shows it. */
static const char *
s_worker_state(coord_run_t *r, const zdist_coordinator_worker_info_t *wi)
{
    if (wi->left)
        return "left";
    if (wi->draining)
        return "draining";
    if (wi->lost_since_ms && !wi->up)
        return wi->rejoining ? "rejoining" : "lost";
    if (strcmp(r->state, "running") != 0)
        return "idle"; /* the job ended and STOP_JOB went out: it holds nothing */
    return wi->up ? "running" : "starting";
}

/* The workers: state (running, idle, lost, rejoining, starting), step-time
   p50/p99 of the last minute, straggler. */
static void
s_status(coord_run_t *r, json_t *detail, int64_t now)
{
    s_ps_t *p = r->impl;
    json_object_set_new(detail, "psd_recoveries", json_integer(p ? (int)p->psd_recoveries : 0));
    if (p)
        s_visitation_status(r, detail);
    size_t nw = p && p->coord ? zdist_coordinator_num_workers(p->coord) : 0;
    if (nw > COORD_MAX_WORKERS)
        nw = COORD_MAX_WORKERS;
    json_t *workers = json_object_get(detail, "workers");
    json_t *shown[COORD_MAX_WORKERS] = {0};
    double p50[COORD_MAX_WORKERS], sorted[COORD_MAX_WORKERS];
    bool has[COORD_MAX_WORKERS] = {0};
    int nsorted = 0;
    for (size_t i = 0; i < nw; i++) {
        zdist_coordinator_worker_info_t wi;
        if (zdist_coordinator_worker_info(p->coord, i, &wi) < 0)
            continue;
        const char *state = s_worker_state(r, &wi);
        bool up = strcmp(state, "running") == 0 || strcmp(state, "idle") == 0;
        json_t *w = json_pack("{s:i, s:s, s:s, s:b, s:I, s:i, s:I, s:I, s:i}", "task", (int)i, "endpoint",
                              wi.endpoint, "state", state, "up", up, "closures_done",
                              (json_int_t)(wi.closures_done + p->worker_closures[i]), "in_flight", wi.in_flight,
                              "in_flight_ms", (json_int_t)wi.oldest_in_flight_ms, "last_heartbeat_ms_ago",
                              (json_int_t)(wi.last_heard_ms ? now - wi.last_heard_ms : -1), "restarts",
                              (int)(wi.restarts + p->worker_restarts[i]));
        if (!w)
            continue;
        if (strcmp(state, "running") == 0)
            json_object_set_new(w, "job", json_string(r->cfg->job_id));
        json_object_set_new(w, "joined", json_boolean(i < COORD_MAX_WORKERS && r->cfg->joined[i]));
        if (wi.lost_since_ms && !wi.up)
            coord_run_lost_json(w, now, wi.lost_since_ms, wi.lost_why);
        has[i] = coord_run_step_json(r, (int)i, now, w, &p50[i]);
        if (has[i])
            sorted[nsorted++] = p50[i];
        shown[i] = w;
    }
    /* The lower median: with two workers, the faster one is the yardstick. */
    double median = coord_run_lower_median(sorted, nsorted);
    for (size_t i = 0; i < nw; i++) {
        if (!shown[i])
            continue;
        json_object_set_new(shown[i], "straggler", json_boolean(has[i] && nsorted >= 2 && p50[i] >= 2 * median));
        json_array_append_new(workers, shown[i]);
    }
}

/* ---- checkpoints ---- */

static bool s_ps_changed(coord_run_t *r);
static bool s_ps_changed_(coord_run_t *r, bool only_restarts);

static int
s_ckpt_save(coord_run_t *r, int64_t step)
{
    char dir[1100];
    coord_run_ckpt_dir(r, step, dir, sizeof dir);
    uint64_t total = 0;
    for (int i = 0; i < r->cfg->num_ps; i++) {
        uint64_t bytes = 0;
        zdist_error_t err = {0};
        zdist_ps_save_t save = {dir, step, i, r->cfg->job_id, (int32_t) r->cfg->job.spec.ckpt_full_every};
        int64_t quick = zdist_ps_client_set_timeout(r->ps[i], S_CKPT_TIMEOUT_MS);
        int rc = zdist_ps_client_save_with(r->ps[i], &save, &bytes, &err);
        zdist_ps_client_set_timeout(r->ps[i], quick);
        if (rc < 0) {
            char why[ZDIST_ERROR_TEXT_MAX + 32];
            snprintf(why, sizeof why, "ps %d: %s", i, err.text);
            coord_run_ckpt_failed(r, step, why);
            return rc;
        }
        total += bytes;
    }
    /* A psd restarted since the attempt began holds none of the job's
       variables (its restore is still to come): its "save" succeeded with
       nothing, and committing would leave a checkpoint without its shards. */
    if (s_ps_changed_(r, true)) {
        coord_run_ckpt_failed(r, step, "a ps task restarted since this attempt began; the save is not committed");
        return -EAGAIN;
    }
    ((s_ps_t *)r->impl)->saved_bytes = total;
    char fields[320], where[64], visit[256];
    s_visitation_fields(r->impl, step, visit, sizeof visit);
    snprintf(fields, sizeof fields, "\"num_ps\": %d, %s", r->cfg->num_ps, visit);
    snprintf(where, sizeof where, "over %d ps", r->cfg->num_ps);
    return coord_run_ckpt_commit(r, step, fields, total, where);
}

static int
s_ckpt_restore(coord_run_t *r, int64_t step, zdist_error_t *err)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/ckpt-%lld", r->cfg->ckpt_root, (long long)step);
    for (int i = 0; i < r->cfg->num_ps; i++) {
        int64_t got;
        int64_t quick = zdist_ps_client_set_timeout(r->ps[i], S_CKPT_TIMEOUT_MS);
        int rc = zdist_ps_client_restore_job(r->ps[i], dir, r->cfg->job_id, &got, err);
        zdist_ps_client_set_timeout(r->ps[i], quick);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- ps health ---- */

/* A psd is not the incarnation the attempt began with; one that does not
   answer counts as changed unless only_restarts. */
static bool
s_ps_changed_(coord_run_t *r, bool only_restarts)
{
    s_ps_t *p = r->impl;
    for (int i = 0; i < r->cfg->num_ps; i++) {
        zdist_ps_stats_t *st = NULL;
        if (zdist_ps_client_stats(r->ps[i], &st, NULL) < 0) {
            if (only_restarts)
                continue;
            return true;
        }
        bool changed = st->incarnation != p->ps_inc[i];
        zdist_ps_stats_destroy(&st);
        if (changed)
            return true;
    }
    return false;
}

static bool
s_ps_changed(coord_run_t *r)
{
    return s_ps_changed_(r, false);
}

static void
s_ps_record(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    for (int i = 0; i < r->cfg->num_ps; i++) {
        zdist_ps_stats_t *st = NULL;
        if (zdist_ps_client_stats(r->ps[i], &st, NULL) == 0) {
            p->ps_inc[i] = st->incarnation;
            zdist_ps_stats_destroy(&st);
        }
    }
}

/* The attempt ends because a psd restarted or went away: why, for the log line. */
static int
s_ps_lost(coord_run_t *r, const char *when, const zdist_error_t *err)
{
    s_ps_t *p = r->impl;
    snprintf(p->lost_why, sizeof p->lost_why, "%s%s%s", when, err && err->text[0] ? ": " : "",
             err && err->text[0] ? err->text : "");
    return -EAGAIN;
}

/* ---- an attempt ---- */

/* At a step boundary with PREEMPTs pending (every closure scheduled has
   come back, so the psds hold exactly steps 1..r->step): the checkpoint,
   then the answer that lets the tasks exit. A preempted psd ends the
   attempt: training waits for it to restart, then restores this checkpoint
   (no step lost). 0 or as s_attempt. */
static int
s_preempt_save(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    int rc = r->ckpt_step == r->step ? 0 : s_ckpt_save(r, r->step);
    bool ps_gone = false;
    for (int k = 0; k < r->npreempt; k++) {
        int i = r->preempt[k].index;
        if (strcmp(r->preempt[k].type, "ps") == 0 && i < r->cfg->num_ps) {
            p->ps_preempted[i] = p->ps_inc[i] ? p->ps_inc[i] : 1;
            ps_gone = true;
        }
    }
    coord_run_preempt_saved(r, rc);
    if (ps_gone)
        return s_ps_lost(r, "a ps task was preempted (SIGTERM) after the checkpoint", NULL);
    if (rc < 0 && s_ps_changed(r))
        return s_ps_lost(r, "during a preemption checkpoint", NULL);
    return 0;
}

/* At a step boundary with a RESHARD pending (every closure scheduled is
   back: the psds hold exactly steps 1..r->step): the checkpoint at this
   step, then the layout of the first N. The attempt starts again on it
   (S_RESHARDED): the job's variables dropped from every ps task of the
   cluster (s_reshard_drop), the workers get the job with the new
   ps list, which creates the variables partitioned over N, and the
   checkpoint is restored onto them, each row (fixed tables by global row
   range, dynamic ones by id hash) with its shard's exactly-once record —
   the step ledger and client windows — so no step is applied twice or lost.
   A move that cannot begin (the save fails) leaves the job where it was. */
static int
s_reshard(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    int n = r->reshard;
    char line[1200];
    if (n == r->cfg->num_ps) {
        snprintf(line, sizeof line, "already on %d ps tasks (step %lld): nothing moved", n, (long long)r->step);
        coord_run_reshard_answer(r, true, line);
        return 0;
    }
    p->move.from = r->cfg->num_ps;
    p->move.step = r->step;
    p->move.t0_ms = zdist_clock_now_ms();
    int rc = r->ckpt_step == r->step ? 0 : s_ckpt_save(r, r->step);
    if (rc < 0) {
        snprintf(line, sizeof line, "the checkpoint at step %lld failed (%s): it stays on %d ps tasks",
                 (long long)r->step, r->ckpt_why, r->cfg->num_ps);
        memset(&p->move, 0, sizeof p->move);
        coord_run_reshard_answer(r, false, line);
        return s_ps_changed(r) ? s_ps_lost(r, "during a reshard's checkpoint", NULL) : 0;
    }
    p->move.saved_ms = zdist_clock_now_ms();
    p->move.bytes = p->saved_bytes;
    r->cfg->num_ps = n;
    zsys_info("job %s: checkpoint at step %lld saved (%.1f MiB in %.2f s): restoring it onto %d ps tasks",
              r->cfg->job_id, (long long)r->step, (double)p->move.bytes / 1048576.0,
              (double)(p->move.saved_ms - p->move.t0_ms) / 1000.0, n);
    return S_RESHARDED;
}

/* Before each attempt of a move (the first, and again after a psd's loss
   during it): the job's variables dropped from every ps task of the
   cluster (forced: the job is live), so the new layout's are created
   afresh, whatever shapes the old one left where. */
static void
s_reshard_drop(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    if (!p->move.t0_ms)
        return;
    for (int i = 0; i < r->cfg->cluster_ps; i++) {
        zdist_error_t err = {0};
        if (zdist_ps_client_drop_job(r->ps[i], r->cfg->job_id, true, NULL, NULL, &err) < 0 && err.code != -ENOENT)
            zsys_warning("job %s: reshard: dropping its variables from ps %d: %s", r->cfg->job_id, i, err.text);
    }
}

/* The new layout holds the move's checkpoint: the RESHARD is answered with
   what it took (the checkpoint, then the workers' restart and the restore). */
static void
s_reshard_done(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    if (!p->move.t0_ms)
        return;
    int64_t now = zdist_clock_now_ms();
    char line[400];
    snprintf(line, sizeof line, "moved from %d to %d ps tasks at step %lld: %.1f MiB in %.2f s (checkpoint %.2f s, "
             "workers restarted and the checkpoint restored %.2f s)",
             p->move.from, r->cfg->num_ps, (long long)p->move.step, (double)p->move.bytes / 1048576.0,
             (double)(now - p->move.t0_ms) / 1000.0, (double)(p->move.saved_ms - p->move.t0_ms) / 1000.0,
             (double)(now - p->move.saved_ms) / 1000.0);
    memset(&p->move, 0, sizeof p->move);
    coord_run_reshard_answer(r, true, line);
}

static void
s_worker_event(void *arg, bool problem, const char *line)
{
    coord_run_t *r = arg;
    if (problem)
        zsys_warning("job %s: %s", r->cfg->job_id, line);
    else
        zsys_info("job %s: %s", r->cfg->job_id, line);
    coord_run_event(r, problem ? "lost" : "back", line);
}

/* JOIN / DRAIN taken from the pipe, applied to the attempt's
   ClusterCoordinator: joined workers added (each gets the job and
   closures once it answers), left ones drained (their closures in flight
   finish, no new ones). */
static void
s_members(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    r->members_changed = false;
    if (!p->coord)
        return;
    char line[400];
    for (size_t n; (n = zdist_coordinator_num_workers(p->coord)) < (size_t)r->cfg->num_workers;) {
        zdist_error_t err = {0};
        if (zdist_coordinator_add_worker(p->coord, r->cfg->workers[n], &err) < 0) {
            zsys_warning("job %s: worker %zu (%s) cannot join: %s", r->cfg->job_id, n, r->cfg->workers[n], err.text);
            break;
        }
        snprintf(line, sizeof line, "worker %zu (%s) joined: closures once it has the job", n, r->cfg->workers[n]);
        s_worker_event(r, false, line);
        if (r->cfg->left[n])
            zdist_coordinator_drain_worker(p->coord, n);
    }
    for (int i = 0; i < r->cfg->num_workers; i++) {
        zdist_coordinator_worker_info_t wi;
        if (!r->cfg->left[i] || zdist_coordinator_worker_info(p->coord, (size_t)i, &wi) < 0 || wi.draining || wi.left)
            continue;
        snprintf(line, sizeof line, "worker %d (%s) drains: no more closures, those in flight finish", i,
                 r->cfg->workers[i]);
        s_worker_event(r, false, line);
        zdist_coordinator_drain_worker(p->coord, (size_t)i);
    }
}

/* A new ClusterCoordinator for this attempt (the workers' totals of the
   last one kept), its variables created and its workers started. */
static int
s_coordinator(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    coord_run_config_t *cfg = r->cfg;
    zdist_error_t err = {0};
    zdist_coordinator_options_t o;
    zdist_coordinator_options_default(&o);
    const char *wp[COORD_MAX_WORKERS], *pp[COORD_MAX_PS];
    for (int i = 0; i < cfg->num_workers; i++)
        wp[i] = cfg->workers[i];
    for (int i = 0; i < cfg->num_ps; i++)
        pp[i] = cfg->ps[i];
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s/", cfg->job_id);
    o.job = &p->job;
    o.repeat_input = true; /* the coordinator counts the steps of epochs */
    o.workers = wp;
    o.num_workers = (size_t)cfg->num_workers;
    o.ps = pp;
    o.num_ps = (size_t)cfg->num_ps;
    o.variable_prefix = prefix;
    if (cfg->closure_timeout_ms > 0)
        o.closure_timeout_ms = cfg->closure_timeout_ms;
    for (size_t i = 0; p->coord && i < zdist_coordinator_num_workers(p->coord) && i < COORD_MAX_WORKERS; i++) {
        zdist_coordinator_worker_info_t wi;
        if (zdist_coordinator_worker_info(p->coord, i, &wi) == 0) {
            p->worker_restarts[i] += wi.restarts;
            p->worker_closures[i] += wi.closures_done;
        }
    }
    zdist_coordinator_destroy(&p->coord);
    o.on_event = s_worker_event;
    o.on_event_arg = r;
    p->coord = zdist_coordinator_new(&o, &err);
    if (!p->coord) {
        snprintf(r->error, sizeof r->error, "%s", err.text);
        return -EINVAL;
    }
    s_ps_record(r);
    s_members(r); /* workers that left stay out */
    int rc = zdist_coordinator_start(p->coord, true, &err);
    if (rc < 0) {
        if (s_ps_changed(r))
            return s_ps_lost(r, "while starting the job", &err);
        snprintf(r->error, sizeof r->error, "starting the job: %s", err.text);
        return rc;
    }
    return 0;
}

/* The newest checkpoint that restores (a damaged one is set aside and the
   one before it tried), else a checkpoint at step 0: r->step set. */
static int
s_resume(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    coord_run_config_t *cfg = r->cfg;
    zdist_error_t err = {0};
    int64_t last;
    int rc;
    while ((last = coord_run_ckpt_last(cfg->ckpt_root)) >= 0) {
        char why[ZDIST_ERROR_TEXT_MAX + 1300];
        if (coord_run_ckpt_check(r, last, why, sizeof why) < 0) {
            coord_run_ckpt_reject(r, last, why);
            continue;
        }
        if ((rc = s_ckpt_restore(r, last, &err)) == 0)
            break;
        if (s_ps_changed(r))
            return s_ps_lost(r, "while restoring the checkpoint", &err);
        if (rc == -EBADMSG) { /* DATA_LOSS: a file fails its CRC, is cut short or missing */
            coord_run_ckpt_reject(r, last, err.text);
            continue;
        }
        snprintf(r->error, sizeof r->error, "restoring checkpoint step %lld: %s", (long long)last, err.text);
        return rc;
    }
    if (last < 0 && r->ckpt_damaged > 0)
        return coord_run_ckpt_all_damaged(r);
    if (last >= 0) {
        zsys_info("job %s: restored every ps from the checkpoint at step %lld", cfg->job_id, (long long)last);
        if (p->psd_recoveries > 0) {
            char line[160];
            snprintf(line, sizeof line, "every ps restored from the checkpoint at step %lld; training resumes",
                     (long long)last);
            coord_run_event(r, "recovered", line);
        }
        r->step = last;
        r->ckpt_step = r->ckpt_tried = last;
        return 0;
    }
    r->step = 0;
    if ((rc = s_ckpt_save(r, 0)) < 0) {
        snprintf(r->error, sizeof r->error, "checkpoint at step 0 into %s failed: %s (every ps task must be "
                 "able to write there: the psds' --checkpoint-root must hold it)", cfg->ckpt_root,
                 r->ckpt_why[0] ? r->ckpt_why : "see the coordinator's log");
        return s_ps_changed(r) ? s_ps_lost(r, "during the checkpoint at step 0", NULL) : rc;
    }
    return 0;
}

/* Closures until the steps are done or the pipe says stop: 0, or as s_attempt. */
static int
s_train(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    coord_run_config_t *cfg = r->cfg;
    zdist_error_t err = {0};
    int64_t spe = cfg->job.spec.steps_per_execution > 0 ? cfg->job.spec.steps_per_execution : 1;
    int64_t every = cfg->job.spec.ckpt_every;
    while (r->step < r->steps) {
        coord_run_check_pipe(r);
        if (r->cancel || r->term)
            break;
        if (r->members_changed)
            s_members(r);
        int64_t target = r->steps;
        if (every > 0) {
            int64_t next = coord_run_ckpt_next(r, every);
            if (next < target)
                target = next;
        }
        /* A task got SIGTERM, or the job moves: the next step boundary is what is scheduled. */
        if ((r->npreempt > 0 || r->reshard > 0) && p->scheduled < target)
            target = p->scheduled;
        /* Keep enough closures queued for every worker to have its RUN_STEPS
           in flight, short closures several to a message. */
        size_t want = 8 * (size_t)cfg->num_workers;
        while (p->scheduled < target && zdist_coordinator_queued(p->coord) < want) {
            int64_t n = target - p->scheduled < spe ? target - p->scheduled : spe;
            /* Detached: each closure's memory is reused once its result is
               accounted, not kept for the attempt's life (the chief grew by
               a closure's value, ~700 bytes, for every closure it ran). */
            if (zdist_coordinator_schedule_detached(p->coord, n) < 0) {
                snprintf(r->error, sizeof r->error, "out of memory");
                return -ENOMEM;
            }
            p->scheduled += n;
        }
        zdist_coordinator_poll(p->coord, 20);
        zdist_closure_result_t res;
        while (zdist_coordinator_next_result(p->coord, &res))
            coord_run_account(r, &res);
        if (zdist_coordinator_error(p->coord, &err) < 0) {
            zdist_coordinator_join(p->coord, &err);
            if (s_ps_changed(r) || err.code == -ENOENT) /* NOT_FOUND: its variables gone, as a lost psd's */
                return s_ps_lost(r, "during a step", &err);
            snprintf(r->error, sizeof r->error, "%s", err.text);
            return -EIO;
        }
        if (r->npreempt > 0 && r->step >= target && zdist_coordinator_done(p->coord)) {
            int rc = s_preempt_save(r);
            if (rc < 0)
                return rc;
            continue;
        }
        if (r->reshard > 0 && r->step >= target && zdist_coordinator_done(p->coord)) {
            int rc = s_reshard(r);
            if (rc != 0)
                return rc;
            continue;
        }
        if (r->step >= target && target < r->steps && zdist_coordinator_done(p->coord)) {
            if (s_ckpt_save(r, r->step) < 0 && s_ps_changed(r))
                return s_ps_lost(r, "during a checkpoint", NULL);
            /* A failed save keeps the previous one as the last complete
               and is tried again an interval later (ckpt_tried). */
        }
        coord_run_status(r, false);
    }
    return 0;
}

/* Cancelled or stopped: the closures in flight finish (30 s at most), and
   on $TERM a checkpoint when that leaves the job at a consistent point. */
static int
s_stop_early(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    zdist_coordinator_cancel_queued(p->coord);
    zdist_coordinator_pause(p->coord, true);
    int64_t until = zdist_clock_now_ms() + 30000;
    while (zdist_coordinator_in_flight(p->coord) > 0 && zdist_clock_now_ms() < until)
        zdist_coordinator_poll(p->coord, 50);
    zdist_closure_result_t res;
    while (zdist_coordinator_next_result(p->coord, &res))
        coord_run_account(r, &res);
    /* Only at a consistent point: with a closure still out, r->step
       counts steps that are not the first r->step ones, and a resume
       would number them again (the psds would take the re-run for the
       steps already applied). The last checkpoint then stays. */
    if (r->term && !r->cancel && zdist_coordinator_in_flight(p->coord) == 0)
        s_ckpt_save(r, r->step);
    return 1;
}

/* One attempt on the job's ps layout: start the workers, restore the last
   checkpoint, train until the steps are done. As s_attempt, or S_RESHARDED
   (the layout changed at a step boundary: again on the new one). */
static int
s_attempt_layout(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    s_reshard_drop(r);
    int rc = s_coordinator(r);
    if (rc < 0)
        return rc;
    if (r->cfg->job.spec.exactly_once && p->spe == 0)
        p->spe = zdist_coordinator_steps_per_epoch(p->coord);
    if (r->steps == 0)
        r->steps = r->cfg->job.spec.epochs * zdist_coordinator_steps_per_epoch(p->coord);
    if (r->steps <= 0) {
        snprintf(r->error, sizeof r->error, "dataset: no steps per epoch (too few examples for the batch size?)");
        return -EINVAL;
    }
    if ((rc = s_resume(r)) < 0 || (rc = s_visitation_resume(r, r->step)) < 0)
        return rc;
    s_ps_record(r);
    s_reshard_done(r);
    r->last_stats_ms = 0; /* the psds' figures at the next status hold the job's variables */
    p->scheduled = r->step;
    zdist_coordinator_set_step(p->coord, r->step); /* closures carry the job's step numbers from here */
    coord_run_window(r);
    if ((rc = s_train(r)) != 0)
        return rc;
    if (r->cancel || r->term)
        return s_stop_early(r);
    return 0;
}

/* One attempt: start the workers, restore the last checkpoint, train until
   the steps are done, again on each new ps layout. 0 done, -EAGAIN a psd was
   lost (try again), other negative errno failed (error set), 1 stopped
   (cancel or term). */
static int
s_attempt(coord_run_t *r)
{
    int rc;
    while ((rc = s_attempt_layout(r)) == S_RESHARDED)
        ;
    return rc;
}

/* ---- the ops ---- */

static int
s_start(coord_run_t *r)
{
    s_ps_t *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(r->error, sizeof r->error, "out of memory");
        return -ENOMEM;
    }
    r->impl = p;
    p->job = r->cfg->job.spec;
    /* Workers hold several jobs' sessions, by name: NAME@ID tells two
       submissions of one job file apart. */
    if (asprintf(&p->name, "%s@%s", r->cfg->job.spec.name, r->cfg->job_id) >= 0)
        p->job.name = p->name;
    else
        p->name = NULL;
    return 0;
}

/* A ps task was lost: says so, then waits until every ps answers; false
   when cancelled or stopped meanwhile. */
static bool
s_wait(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    p->psd_recoveries++;
    zsys_warning("job %s: a ps task was lost (%s); waiting for it, then restoring step %lld", r->cfg->job_id,
                 p->lost_why, (long long)r->ckpt_step);
    char line[1200];
    snprintf(line, sizeof line, "a ps task was lost (%s); waiting for it, then restoring step %lld", p->lost_why,
             (long long)r->ckpt_step);
    coord_run_event(r, "lost", line);
    coord_run_status(r, true);
    for (;;) {
        coord_run_check_pipe(r);
        if (r->cancel || r->term)
            return false;
        coord_run_preempt_idle(r);
        bool all = true;
        for (int i = 0; i < r->cfg->num_ps && all; i++) {
            zdist_ps_stats_t *st = NULL;
            if (zdist_ps_client_stats(r->ps[i], &st, NULL) < 0)
                all = false;
            else if (p->ps_preempted[i] && st->incarnation == p->ps_preempted[i])
                all = false; /* preempted, not yet gone and back */
            else
                p->ps_preempted[i] = 0;
            zdist_ps_stats_destroy(&st);
        }
        if (all)
            return true;
        coord_run_status(r, false);
        /* The stats calls wait for the psds themselves (a request reaches a
           psd as soon as it is back); between rounds only the pipe. */
        coord_run_wait_pipe(r, 200);
    }
}

static int
s_evaluate(coord_run_t *r, zdist_evaluation_t *ret, zdist_error_t *err)
{
    s_ps_t *p = r->impl;
    return zdist_coordinator_evaluate(p->coord, ret, err);
}

static void
s_finish(coord_run_t *r)
{
    if (r->ckpt_step != r->step)
        s_ckpt_save(r, r->step);
}

static void
s_stop(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    if (p && p->coord)
        zdist_coordinator_stop_job(p->coord, 2000);
}

static void
s_destroy(coord_run_t *r)
{
    s_ps_t *p = r->impl;
    if (!p)
        return;
    zdist_coordinator_destroy(&p->coord);
    free(p->name);
    free(p);
    r->impl = NULL;
}

const coord_run_ops_t coord_runner_ps_ops = {
    .start = s_start,
    .attempt = s_attempt,
    .wait = s_wait,
    .evaluate = s_evaluate,
    .finish = s_finish,
    .stop = s_stop,
    .status = s_status,
    .destroy = s_destroy,
};
