/* coord_runner_ring: a multi_worker_mirrored (or tpu) job — the workers joined in a ring, stepped in lockstep,
   checkpointed from rank 0, and the ring re-formed from the last checkpoint when a worker is lost or comes
   back (an elastic ring's sizes: coord_ring_elastic.c; the calls to the workers: coord_ring_call.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord_ring.h"
#include "coord_runner_ring.h"
#include "zdist/cluster.h"
#include "zdist/sys.h"

#define S_CALL_MS 30000  /* control calls (start, connect, state) */

/* ---- checkpoints ---- */

static int
s_save(coord_run_t *r, int64_t step)
{
    coord_ring_t *m = coord_ring_of(r);
    bool which[COORD_MAX_WORKERS] = {0};
    int w0 = -1;
    for (int i = 0; i < m->n && w0 < 0; i++)
        if (m->w[i].in_ring && m->w[i].rank == 0)
            w0 = i;
    if (w0 < 0)
        return -EIO;
    which[w0] = true;
    coord_ring_replies_t rs;
    coord_ring_call(r, which, coord_ring_send_get_state, S_CALL_MS, S_CALL_MS, &rs);
    const zdist_worker_reply_t *rep = coord_ring_ok(&rs, w0);
    char why[1024];
    zdist_tensor_t *ts = NULL;
    int rc = -EIO;
    if (!rep) {
        zdist_worker_reply_why(rs.got[w0] ? &rs.r[w0] : NULL, why, sizeof why);
        zsys_warning("job %s: checkpoint at step %lld: GET_STATE from worker task %d: %s", r->cfg->job_id,
                     (long long)step, w0, why);
        coord_ring_fail_note(m, "checkpoint: worker task %d: %s", w0, why);
        rc = coord_ring_is_loss(rs.got[w0] ? &rs.r[w0] : NULL) ? -EAGAIN : -EIO;
        if (rc != -EAGAIN)
            r->ckpt_tried = step; /* tried again an interval later */
        goto out;
    }
    if (rep->state.step != step) {
        zsys_error("job %s: worker task %d is at step %lld, the job at %lld: not saving", r->cfg->job_id, w0,
                   (long long)rep->state.step, (long long)step);
        r->ckpt_tried = step;
        goto out;
    }
    size_t n = zdist_worker_reply_tensor_count(rep);
    ts = calloc(n ? n : 1, sizeof *ts);
    if (!ts) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t k = 0; k < n; k++)
        ts[k] = *zdist_worker_reply_tensor(rep, k);
    char dir[1100], fields[128], where[64];
    uint64_t bytes = 0;
    zdist_error_t err = {0};
    coord_run_ckpt_dir(r, step, dir, sizeof dir);
    if ((rc = zdist_wstate_save(dir, step, rep->state.iterations, ts, n, &bytes, &err)) < 0) {
        coord_run_ckpt_failed(r, step, err.text);
        goto out;
    }
    snprintf(fields, sizeof fields, "\"strategy\": \"multi_worker_mirrored\", \"num_workers\": %d", m->ring);
    snprintf(where, sizeof where, "from worker task %d", w0);
    rc = coord_run_ckpt_commit(r, step, fields, bytes, where);
out:
    free(ts);
    coord_ring_replies_free(m, &rs);
    return rc;
}

/* ---- the ring ---- */

/* The ring endpoint worker w bound ("tcp://0.0.0.0:5" when it serves on
   every interface) as its peers reach it: a wildcard host becomes the host
   the cluster names the worker by. */
static void
s_ring_endpoint(const coord_ring_worker_t *w, const char *bound, char *out, size_t size)
{
    char host[256], whost[256];
    const char *port;
    if (zdist_endpoint_split(bound, host, sizeof host, &port) < 0 ||
        (strcmp(host, "0.0.0.0") != 0 && strcmp(host, "*") != 0 && strcmp(host, "[::]") != 0 &&
         strcmp(host, "[::0]") != 0) ||
        zdist_endpoint_split(w->endpoint, whost, sizeof whost, NULL) < 0) {
        snprintf(out, size, "%s", bound);
        return;
    }
    snprintf(out, size, "tcp://%s:%s", whost, port);
}

static void
s_ring_form(coord_ring_t *m)
{
    m->ring = 0;
    for (int i = 0; i < m->n; i++) {
        m->w[i].in_ring = !m->w[i].dropped;
        m->w[i].rank = m->w[i].in_ring ? m->ring++ : -1;
    }
}

static int
s_init(coord_run_t *r)
{
    coord_ring_t *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    r->impl = m;
    m->n = r->cfg->num_workers;
    m->job_name = r->cfg->job.spec.name;
    m->min = r->cfg->job.spec.min_workers;
    m->max = r->cfg->job.spec.max_workers;
    for (int i = 0; i < m->n; i++) {
        zdist_error_t err = {0};
        m->w[i].endpoint = r->cfg->workers[i];
        m->w[i].rank = -1;
        if (coord_ring_client(m, i, &err) < 0) {
            snprintf(r->error, sizeof r->error, "worker task %d: %s", i, err.text);
            return -EINVAL;
        }
    }
    s_ring_form(m);
    return 0;
}


/* Lockstep rounds until the next checkpoint boundary or the end. */
static int
s_rounds(coord_run_t *r, int64_t target)
{
    coord_ring_t *m = coord_ring_of(r);
    int64_t spe = r->cfg->job.spec.steps_per_execution > 0 ? r->cfg->job.spec.steps_per_execution : 1;
    int64_t ct = r->cfg->job.spec.collective_timeout_ms;
    /* A round may take long (big steps_per_execution); a worker that neither
       answers nor drops its link is caught by the survivors' collective
       deadline, after which the coordinator gives it ct + 5 s more. */
    int64_t round_ms = r->cfg->closure_timeout_ms > 0 ? r->cfg->closure_timeout_ms : 600000;
    coord_ring_replies_t rs;
    while (r->step < target) {
        coord_run_check_pipe(r);
        if (r->cancel || r->term)
            return 1;
        if (r->npreempt > 0)
            return 2; /* a task got SIGTERM: the checkpoint first */
        if (r->members_changed && coord_ring_elastic(m) && coord_ring_member_left(r))
            return 3; /* a ring worker drained: the checkpoint, then the ring without it */
        m->round_steps = target - r->step < spe ? target - r->step : spe;
        int64_t round_us = zdist_clock_now_us();
        coord_ring_call_ring(r, coord_ring_send_run, round_ms, ct + 5000, &rs);
        round_us = zdist_clock_now_us() - round_us;
        zdist_closure_result_t res = {.steps = -1, .worker = -1}; /* lockstep: no per-worker step time */
        bool ok = true;
        for (int i = 0; i < m->n; i++) {
            if (!m->w[i].in_ring)
                continue;
            const zdist_worker_reply_t *rep = coord_ring_ok(&rs, i);
            if (!rep) {
                ok = false;
                continue;
            }
            if (res.steps >= 0 && res.steps != (int64_t)rep->ran.num_steps)
                zsys_error("job %s: workers ran different numbers of steps in one round (%lld, %zu)",
                           r->cfg->job_id, (long long)res.steps, rep->ran.num_steps);
            res.steps = (int64_t)rep->ran.num_steps;
            /* Each worker's loss is its share of the global batch's mean. */
            res.loss_sum += rep->ran.loss_sum;
            res.examples += rep->ran.examples;
            res.correct += rep->ran.correct;
        }
        if (!ok) {
            m->last_failure[0] = '\0';
            bool loss = coord_ring_failures(r, &rs, "");
            coord_ring_replies_free(m, &rs);
            zsys_warning("job %s: step %lld failed: %s", r->cfg->job_id, (long long)r->step + 1, m->last_failure);
            if (loss)
                return -EAGAIN;
            snprintf(r->error, sizeof r->error, "step %lld: %s", (long long)r->step + 1, m->last_failure);
            return -EIO;
        }
        coord_ring_replies_free(m, &rs);
        if (res.steps <= 0) {
            snprintf(r->error, sizeof r->error, "step %lld: the workers ran no steps (input exhausted?)",
                     (long long)r->step + 1);
            return -EIO;
        }
        /* Lockstep: every worker of the ring waits for the slowest, so the
           round's time is each one's step time (and none is a straggler
           by it: the status leaves that flag out for these jobs). */
        for (int i = 0; i < m->n; i++)
            if (m->w[i].in_ring)
                coord_run_step_time(r, i, (double)round_us / 1e6 / (double)res.steps, res.steps);
        coord_run_account(r, &res);
        coord_ring_progressed(r);
        coord_run_status(r, false);
    }
    return 0;
}

/* A step boundary with PREEMPTs pending: the checkpoint, then the answer
   that lets the tasks exit. A preempted worker of the ring is out of it
   until it has restarted: the ring is re-formed (-EAGAIN) from this
   checkpoint, with it when it is back within lost_worker_wait_ms, else
   without it. 0 or as s_attempt. */
static int
s_preempt_save(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    int rc = r->ckpt_step == r->step ? 0 : s_save(r, r->step);
    int gone = -1;
    for (int k = 0; k < r->npreempt; k++) {
        int i = r->preempt[k].index;
        if (strcmp(r->preempt[k].type, "worker") != 0 || i >= m->n || !m->w[i].in_ring)
            continue;
        m->w[i].preempted = true;
        m->w[i].preempted_inc = m->w[i].incarnation;
        m->w[i].up = false;
        coord_ring_lost(&m->w[i], "preempted (SIGTERM)");
        gone = i;
    }
    coord_run_preempt_saved(r, rc);
    if (rc == -EAGAIN)
        return rc;
    if (gone >= 0) {
        snprintf(m->last_failure, sizeof m->last_failure,
                 "worker task %d (%s) was preempted (SIGTERM) at step %lld: re-forming the ring from its checkpoint",
                 gone, m->w[gone].endpoint, (long long)r->step);
        zsys_info("job %s: %s", r->cfg->job_id, m->last_failure);
        return -EAGAIN;
    }
    return 0;
}

/* Restores the ring from the checkpoint of `last`: 0, -EAGAIN (a worker
   lost), or another negative errno with r->error set. */
static int
s_restore(coord_run_t *r, int64_t last)
{
    coord_ring_t *m = coord_ring_of(r);
    char dir[1100];
    zdist_wstate_t ws;
    zdist_error_t err = {0};
    coord_run_ckpt_dir(r, last, dir, sizeof dir);
    char why[ZDIST_ERROR_TEXT_MAX + 1300];
    int rc = coord_run_ckpt_check(r, last, why, sizeof why);
    if (rc == 0 && (rc = zdist_wstate_load(dir, &ws, &err)) < 0)
        snprintf(why, sizeof why, "%s", err.text);
    if (rc == -EBADMSG) {
        coord_run_ckpt_reject(r, last, why);
        return -ESTALE; /* the caller tries the one before */
    }
    if (rc < 0) {
        snprintf(r->error, sizeof r->error, "restoring checkpoint step %lld: %s", (long long) last, why);
        return rc;
    }
    m->loaded = &ws;
    m->loaded_skip = last;
    coord_ring_replies_t rs;
    coord_ring_call_ring(r, coord_ring_send_set_state, S_CALL_MS, S_CALL_MS, &rs);
    m->loaded = NULL;
    zdist_wstate_release(&ws);
    bool loss = coord_ring_failures(r, &rs, "restoring the checkpoint on ");
    coord_ring_replies_free(m, &rs);
    if (m->last_failure[0]) {
        if (loss)
            return -EAGAIN;
        snprintf(r->error, sizeof r->error, "restoring checkpoint step %lld: %s", (long long)last, m->last_failure);
        return -EIO;
    }
    return 0;
}

/* Every worker of the ring started on the job (one still holding it from
   the ring before stopped first), the steps per epoch known, the ring
   connected: 0, -EAGAIN (a worker lost), or another negative errno. */
static int
s_start_ring(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    coord_ring_replies_t rs;
    bool which[COORD_MAX_WORKERS];
    for (int i = 0; i < m->n; i++)
        which[i] = !coord_ring_elastic(m) || m->w[i].in_ring; /* elastic: the others were just probed */
    coord_ring_probe_some(r, which, 2000);
    bool stale = false;
    for (int i = 0; i < m->n; i++)
        stale = stale || (m->w[i].in_ring && m->w[i].has_job);
    if (stale) {
        coord_ring_call_ring(r, coord_ring_send_stop, 5000, 5000, &rs);
        coord_ring_replies_free(m, &rs);
    }
    coord_ring_call_ring(r, coord_ring_send_start, S_CALL_MS, S_CALL_MS, &rs);
    int64_t spe_data = 0;
    for (int i = 0; i < m->n; i++) {
        const zdist_worker_reply_t *rep = m->w[i].in_ring ? coord_ring_ok(&rs, i) : NULL;
        if (!rep)
            continue;
        s_ring_endpoint(&m->w[i], rep->started.collective_endpoint, m->w[i].ring_ep, sizeof m->w[i].ring_ep);
        if (m->w[i].rank == 0)
            spe_data = rep->started.steps_per_epoch;
    }
    if (coord_ring_failures(r, &rs, "starting the job on ")) {
        coord_ring_replies_free(m, &rs);
        return -EAGAIN;
    }
    coord_ring_replies_free(m, &rs);
    if (m->last_failure[0]) {
        snprintf(r->error, sizeof r->error, "%s", m->last_failure);
        return -EINVAL;
    }
    int rc = coord_ring_elastic(m) ? coord_ring_check_size(r, spe_data) : 0;
    if (rc < 0)
        return rc;
    if (r->steps == 0)
        r->steps = r->cfg->job.spec.epochs * spe_data;
    if (r->steps <= 0) {
        snprintf(r->error, sizeof r->error, "dataset: no steps per epoch (too few examples for the batch size?)");
        return -EINVAL;
    }
    if (m->ring > 1) {
        coord_ring_call_ring(r, coord_ring_send_connect, S_CALL_MS, S_CALL_MS, &rs);
        bool loss = coord_ring_failures(r, &rs, "connecting the ring on ");
        coord_ring_replies_free(m, &rs);
        if (m->last_failure[0]) {
            if (loss)
                return -EAGAIN;
            snprintf(r->error, sizeof r->error, "%s", m->last_failure);
            return -EIO;
        }
    }
    return 0;
}

/* The ring from the newest checkpoint that loads (damaged ones set aside),
   else a checkpoint at step 0: r->step set. */
static int
s_resume(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    int64_t last;
    int rc = 0;
    while ((last = coord_run_ckpt_last(r->cfg->ckpt_root)) >= 0 && (rc = s_restore(r, last)) == -ESTALE)
        ; /* a damaged checkpoint was set aside: the one before */
    if (last < 0 && r->ckpt_damaged > 0)
        return coord_run_ckpt_all_damaged(r);
    if (last >= 0) {
        if (rc < 0)
            return rc;
        zsys_info("job %s: %d workers in the ring, restored from the checkpoint at step %lld", r->cfg->job_id,
                  m->ring, (long long)last);
        r->step = r->ckpt_step = r->ckpt_tried = last;
        return 0;
    }
    r->step = 0;
    if ((rc = s_save(r, 0)) < 0) {
        if (rc == -EAGAIN)
            return rc;
        snprintf(r->error, sizeof r->error, "checkpoint at step 0 failed (is the state dir writable?)");
        return rc;
    }
    zsys_info("job %s: %d workers in the ring, starting at step 0", r->cfg->job_id, m->ring);
    return 0;
}

/* At a checkpoint boundary: a worker left out earlier and back now joins
   from here (-EAGAIN re-forms the ring); 0 when none is. */
static int
s_rejoin(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    if (coord_ring_elastic(m))
        return coord_ring_grow(r);
    coord_ring_probe(r, 1000);
    for (int i = 0; i < m->n; i++)
        if (m->w[i].dropped && m->w[i].up) {
            m->w[i].dropped = false;
            snprintf(m->last_failure, sizeof m->last_failure,
                     "worker task %d (%s) is back: re-forming the ring from step %lld", i, m->w[i].endpoint,
                     (long long)r->step);
            zsys_info("job %s: %s", r->cfg->job_id, m->last_failure);
            return -EAGAIN;
        }
    return 0;
}

/* One attempt: the ring formed of the workers not left out, started,
   restored, and stepped to the end with checkpoints between. */
static int
s_attempt(coord_run_t *r)
{
    coord_run_config_t *cfg = r->cfg;
    int rc;
    if (!r->impl && (rc = s_init(r)) < 0) {
        if (!r->error[0])
            snprintf(r->error, sizeof r->error, "out of memory");
        return rc;
    }
    coord_ring_t *m = coord_ring_of(r);
    m->last_failure[0] = '\0';
    if (coord_ring_elastic(m)) {
        /* The workers up now, at most max_workers; fewer than min_workers: wait for more. */
        if ((rc = coord_ring_add_joined(r)) < 0)
            return rc;
        if (zdist_clock_now_ms() - m->probed_ms > 1000)
            coord_ring_probe(r, 1000);
        coord_ring_form_elastic(r);
        if (m->ring < m->min) {
            snprintf(m->last_failure, sizeof m->last_failure, "%d worker%s up, strategy.min_workers is %d",
                     m->ring, m->ring == 1 ? "" : "s", m->min);
            return -EAGAIN;
        }
    } else {
        s_ring_form(m);
    }
    if (m->ring == 0) {
        snprintf(r->error, sizeof r->error, "no worker left to train on");
        return -EIO;
    }
    /* A worker may still hold the job from the ring before: stopped first. */
    if ((rc = s_start_ring(r)) < 0 || (rc = s_resume(r)) < 0)
        return rc;
    coord_ring_formed(r, r->step);
    coord_run_window(r);
    coord_run_status(r, true);
    int64_t every = cfg->job.spec.ckpt_every;
    while (r->step < r->steps) {
        int64_t target = r->steps;
        if (every > 0 && coord_run_ckpt_next(r, every) < target)
            target = coord_run_ckpt_next(r, every);
        rc = s_rounds(r, target);
        if (rc == 2) {
            if ((rc = s_preempt_save(r)) < 0)
                return rc;
            continue;
        }
        if (rc == 3) { /* elastic: a ring worker left on purpose; re-formed without it from here */
            if (r->ckpt_step != r->step && (rc = s_save(r, r->step)) == -EAGAIN)
                return rc;
            return -EAGAIN;
        }
        if (rc == 1) {
            if (r->term && !r->cancel && r->ckpt_step != r->step)
                s_save(r, r->step);
            return 1;
        }
        if (rc < 0)
            return rc;
        if (target < r->steps && ((rc = s_save(r, r->step)) == -EAGAIN || (rc = s_rejoin(r)) < 0))
            return rc;
    }
    if (r->ckpt_step != r->step && (rc = s_save(r, r->step)) < 0)
        zsys_warning("job %s: the final checkpoint failed; the one at step %lld stays", cfg->job_id,
                     (long long)r->ckpt_step);
    if (coord_ring_elastic(m))
        coord_ring_verify(r);
    return 0;
}

/* Re-forms the ring: waits for the lost workers (or, after the job's
   lost_worker_wait_ms, goes on without them); false when stopped or given up. */
static bool
s_wait(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    coord_run_status(r, true);
    if (!m)
        return true;
    snprintf(m->reason, sizeof m->reason, "%s", m->last_failure);
    if (++m->reforms > 1000) {
        snprintf(r->error, sizeof r->error, "the ring was re-formed 1000 times: giving up (%s)", m->last_failure);
        return false;
    }
    coord_ring_broke(r);
    if (coord_ring_elastic(m))
        return coord_ring_wait_elastic(r);
    int64_t wait = r->cfg->job.spec.lost_worker_wait_ms;
    int64_t start = zdist_clock_now_ms();
    int missing_before = -1;
    for (;;) {
        coord_run_check_pipe(r);
        if (r->cancel || r->term)
            return false;
        coord_run_preempt_idle(r);
        coord_ring_probe(r, 1000);
        int missing = 0, up = 0;
        for (int i = 0; i < m->n; i++) {
            up += m->w[i].up;
            missing += !m->w[i].dropped && !m->w[i].up;
        }
        if (missing == 0) {
            for (int i = 0; i < m->n; i++)
                m->w[i].dropped = m->w[i].dropped && !m->w[i].up;
            return true;
        }
        if (missing != missing_before)
            zsys_info("job %s: waiting for %d lost worker%s (%s)", r->cfg->job_id, missing, missing == 1 ? "" : "s",
                      wait < 0 ? "for ever" : "then going on without");
        missing_before = missing;
        if (wait >= 0 && zdist_clock_now_ms() - start >= wait && up > 0) {
            for (int i = 0; i < m->n; i++)
                if (!m->w[i].dropped && !m->w[i].up) {
                    m->w[i].dropped = true;
                    zsys_warning("job %s: worker task %d (%s) did not come back within %lld ms: going on with %d "
                                 "workers, global batch kept",
                                 r->cfg->job_id, i, m->w[i].endpoint, (long long)wait, up);
                }
            return true;
        }
        coord_run_status(r, false);
        /* Going on without needs a worker that is up: until then, wait for any. */
        coord_ring_await(r, wait >= 0 && up > 0 ? start + wait : INT64_MAX);
    }
}

static int
s_evaluate(coord_run_t *r, zdist_evaluation_t *ret, zdist_error_t *err)
{
    coord_ring_t *m = coord_ring_of(r);
    memset(ret, 0, sizeof *ret);
    coord_ring_replies_t rs;
    coord_ring_call_ring(r, coord_ring_send_evaluate, 600000, 10000, &rs);
    zdist_auc_t *auc = zdist_auc_new(0, err); /* every worker's scored examples: the exact AUC */
    int rc = auc ? 0 : -ENOMEM;
    char why[1024];
    for (int i = 0; i < m->n && rc == 0; i++) {
        if (!m->w[i].in_ring)
            continue;
        const zdist_worker_reply_t *rep = coord_ring_ok(&rs, i);
        if (!rep) {
            rc = zdist_error_set(err, -EIO, "worker task %d: %s",
                                 i, zdist_worker_reply_why(rs.got[i] ? &rs.r[i] : NULL, why, sizeof why));
            break;
        }
        if (zdist_evaluation_add(ret, &rep->evaluation, auc) < 0)
            rc = zdist_error_set(err, -ENOMEM, "evaluation: out of memory for the AUC");
    }
    if (rc == 0 && zdist_evaluation_finish(ret, auc) < 0)
        rc = zdist_error_set(err, -ENOMEM, "evaluation: out of memory for the AUC");
    zdist_auc_destroy(&auc);
    coord_ring_replies_free(m, &rs);
    return rc;
}

static void
s_stop(coord_run_t *r)
{
    if (!r->impl)
        return;
    coord_ring_t *m = coord_ring_of(r);
    coord_ring_replies_t rs;
    bool which[COORD_MAX_WORKERS];
    for (int i = 0; i < m->n; i++) /* elastic: also one outside the ring still holding the job */
        which[i] = m->w[i].in_ring || (coord_ring_elastic(m) && m->w[i].has_job);
    coord_ring_call(r, which, coord_ring_send_stop, 2000, 2000, &rs);
    coord_ring_replies_free(m, &rs);
}

/* The workers of the ring (state, rank, ring endpoint, step times) and why
   the ring was last re-formed. */
static void
s_status(coord_run_t *r, json_t *detail, int64_t now)
{
    coord_ring_t *m = coord_ring_of(r);
    json_t *a = json_object_get(detail, "workers");
    for (int i = 0; m && i < m->n; i++) {
        const coord_ring_worker_t *w = &m->w[i];
        bool final = strcmp(r->state, "running") != 0;
        const char *state = !w->up ? "lost" : final ? "idle" : w->in_ring ? "running" : "rejoining";
        if (coord_ring_elastic(m) && !w->in_ring && (w->up || r->cfg->left[i]))
            /* out of the ring: drained, or waiting for the next checkpoint boundary (or for room under max) */
            state = r->cfg->left[i] ? "left" : final ? "idle" : m->ring < m->max ? "joining" : "standby";
        json_t *j = json_pack("{s:i, s:s, s:s, s:b, s:b, s:i, s:s, s:i}", "task", i, "endpoint", w->endpoint,
                              "state", state, "up", w->up, "in_ring", w->in_ring, "rank", w->rank, "ring_endpoint",
                              w->ring_ep, "restarts", (int)w->restarts);
        if (!j)
            continue;
        if (strcmp(state, "running") == 0)
            json_object_set_new(j, "job", json_string(r->cfg->job_id));
        if (coord_ring_elastic(m))
            json_object_set_new(j, "joined", json_boolean(r->cfg->joined[i]));
        if (!w->up && w->lost_since_ms)
            coord_run_lost_json(j, now, w->lost_since_ms, w->lost_why);
        coord_run_step_json(r, i, now, j, NULL);
        json_array_append_new(a, j);
    }
    if (m)
        json_object_set_new(detail, "ring_reformed_because", json_string(m->reason));
    if (m)
        coord_ring_status(r, detail);
}

static void
s_destroy(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    if (!m)
        return;
    for (int i = 0; i < m->n; i++)
        zdist_worker_client_destroy(&m->w[i].cl);
    json_decref(m->final_crc);
    free(m);
    r->impl = NULL;
}

/* No start (the ring is set up by the first attempt, so a job's first
   status shows no workers yet) and no finish (every attempt saves its own
   last checkpoint). */
const coord_run_ops_t coord_runner_ring_ops = {
    .attempt = s_attempt,
    .wait = s_wait,
    .evaluate = s_evaluate,
    .stop = s_stop,
    .status = s_status,
    .destroy = s_destroy,
};
