/* coord_ring_call: the ring runner's calls to its workers — one request each in flight, sent to several at
   once and waited for in one poll, failures sorted into losses and refusals — and each method's request. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord_ring.h"
#include "zdist/sys.h"

/* ---- calls ---- */

/* A fresh client for worker i: calls given up on are dropped with the old
   one (they would hold its in-flight slots until their deadlines). */
int
coord_ring_client(coord_ring_t *m, int i, zdist_error_t *err)
{
    zdist_rpc_client_options_t o;
    zdist_rpc_client_options_default(&o);
    o.max_in_flight = 4;
    zdist_worker_client_destroy(&m->w[i].cl);
    m->w[i].pending = 0;
    m->w[i].cl = zdist_worker_client_new(m->w[i].endpoint, &o, err);
    return m->w[i].cl ? 0 : -EINVAL;
}

/* Sends one request to worker i, its only call in flight (one given up on
   is dropped first); false when it could not be sent. */
bool
coord_ring_send(coord_run_t *r, int i, coord_ring_send_fn *send, int64_t timeout_ms)
{
    coord_ring_t *m = coord_ring_of(r);
    if (m->w[i].pending && coord_ring_client(m, i, NULL) < 0)
        return false;
    return send(r, i, timeout_ms, &m->w[i].pending) == 0;
}

/* Takes worker i's reply to its call in flight when it has come; false if not yet. */
bool
coord_ring_take(coord_ring_t *m, int i, zdist_worker_reply_t *ret)
{
    coord_ring_worker_t *w = &m->w[i];
    zdist_worker_reply_t rep;
    while (w->pending && zdist_worker_client_recv(w->cl, 0, &rep) == 0) {
        if (rep.id != w->pending) {
            zdist_worker_reply_release(&rep); /* a call given up on earlier */
            continue;
        }
        w->pending = 0;
        if (rep.incarnation) {
            if (w->incarnation && rep.incarnation != w->incarnation)
                w->restarts++;
            w->incarnation = rep.incarnation;
        }
        *ret = rep;
        return true;
    }
    return false;
}

/* One call to every worker in `which` at once, waiting in one poll over
   them. After the first failure the others get grace_ms more (survivors of
   a loss fail their collective within its deadline); calls left unanswered
   then are given up (a later reply is dropped by its id). */
void
coord_ring_call(coord_run_t *r, const bool *which, coord_ring_send_fn *send, int64_t timeout_ms, int64_t grace_ms, coord_ring_replies_t *out)
{
    coord_ring_t *m = coord_ring_of(r);
    bool waiting[COORD_MAX_WORKERS] = {0};
    int left = 0;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < m->n; i++)
        if (which[i] && coord_ring_send(r, i, send, timeout_ms)) {
            waiting[i] = true;
            left++;
        }
    int64_t give_up = timeout_ms > 0 ? zdist_clock_now_ms() + timeout_ms + 2000 : INT64_MAX;
    while (left > 0) {
        for (int i = 0; i < m->n; i++) {
            if (!waiting[i] || !coord_ring_take(m, i, &out->r[i]))
                continue;
            out->got[i] = true;
            waiting[i] = false;
            left--;
            if (out->r[i].status != ZDIST_STATUS_OK && give_up > zdist_clock_now_ms() + grace_ms)
                give_up = zdist_clock_now_ms() + grace_ms;
        }
        int64_t now = zdist_clock_now_ms();
        if (left == 0 || now >= give_up)
            break;
        zdist_worker_client_t *cls[COORD_MAX_WORKERS] = {0};
        for (int i = 0; i < m->n; i++)
            cls[i] = waiting[i] ? m->w[i].cl : NULL;
        int rc = zdist_worker_client_wait_any(cls, (size_t)m->n, NULL, give_up == INT64_MAX ? -1 : give_up - now);
        if (rc < 0 && rc != -EINTR)
            break;
    }
}

/* coord_ring_call to the ring's workers. */
void
coord_ring_call_ring(coord_run_t *r, coord_ring_send_fn *send, int64_t timeout_ms, int64_t grace_ms, coord_ring_replies_t *out)
{
    bool which[COORD_MAX_WORKERS] = {0};
    for (int i = 0; i < coord_ring_of(r)->n; i++)
        which[i] = coord_ring_of(r)->w[i].in_ring;
    coord_ring_call(r, which, send, timeout_ms, grace_ms, out);
}

void
coord_ring_replies_free(coord_ring_t *m, coord_ring_replies_t *rs)
{
    for (int i = 0; i < m->n; i++)
        zdist_worker_reply_release(&rs->r[i]);
}

/* Worker i's reply when it is an OK one, else NULL. */
const zdist_worker_reply_t *
coord_ring_ok(const coord_ring_replies_t *rs, int i)
{
    return rs->got[i] && rs->r[i].status == ZDIST_STATUS_OK ? &rs->r[i] : NULL;
}

/* The worker's process or link is gone (not a refusal of the request). */
bool
coord_ring_is_loss(const zdist_worker_reply_t *reply)
{
    if (!reply)
        return true;
    int st = reply->status;
    return st == ZDIST_STATUS_UNAVAILABLE || st == ZDIST_STATUS_DEADLINE_EXCEEDED || st == ZDIST_STATUS_ABORTED ||
           st == ZDIST_STATUS_CANCELLED;
}

void
coord_ring_fail_note(coord_ring_t *m, const char *fmt, ...)
{
    size_t len = strlen(m->last_failure);
    if (len + 3 >= sizeof m->last_failure)
        return;
    if (len)
        len += (size_t)snprintf(m->last_failure + len, sizeof m->last_failure - len, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->last_failure + len, sizeof m->last_failure - len, fmt, ap);
    va_end(ap);
}

/* Worker w is lost: since when (the first time) and why, for the status. */
void
coord_ring_lost(coord_ring_worker_t *w, const char *why)
{
    if (w->lost_since_ms)
        return;
    w->lost_since_ms = zdist_clock_now_ms();
    snprintf(w->lost_why, sizeof w->lost_why, "%.*s", (int)sizeof w->lost_why - 1, why); /* cut to fit */
}

/* Sorts the ring's failed replies into m->last_failure; true when one of
   them means a worker was lost (re-form the ring), false for a refusal. */
bool
coord_ring_failures(coord_run_t *r, const coord_ring_replies_t *rs, const char *what)
{
    coord_ring_t *m = coord_ring_of(r);
    bool loss = false;
    char why[1024];
    for (int i = 0; i < m->n; i++) {
        if (!m->w[i].in_ring || coord_ring_ok(rs, i))
            continue;
        const zdist_worker_reply_t *rep = rs->got[i] ? &rs->r[i] : NULL;
        bool gone = !rep || rep->status == ZDIST_STATUS_UNAVAILABLE;
        zdist_worker_reply_why(rep, why, sizeof why);
        coord_ring_fail_note(m, "%sworker task %d (%s)%s: %s", what, i, m->w[i].endpoint, gone ? " lost" : "", why);
        if (gone)
            coord_ring_lost(&m->w[i], why);
        /* FAILED_PRECONDITION: the worker still runs the ring before's
           step (its collective not yet timed out); retry after the wait. */
        loss = loss || coord_ring_is_loss(rep) || rep->status == ZDIST_STATUS_FAILED_PRECONDITION;
        if (gone)
            m->w[i].up = false; /* until a probe hears from it */
    }
    return loss;
}

/* ---- requests ---- */

int
coord_ring_send_stop(coord_run_t *r, int i, int64_t timeout_ms, uint64_t *ret_id)
{
    return zdist_worker_client_stop_job(coord_ring_of(r)->w[i].cl, r->cfg->job.spec.name, timeout_ms, ret_id);
}

int
coord_ring_send_start(coord_run_t *r, int i, int64_t timeout_ms, uint64_t *ret_id)
{
    zdist_worker_start_t req = {
        .job = &r->cfg->job.spec,
        .worker_index = coord_ring_of(r)->w[i].rank,
        .num_workers = coord_ring_of(r)->ring,
        .repeat_input = true, /* the coordinator counts the steps of epochs */
    };
    return zdist_worker_client_start_job(coord_ring_of(r)->w[i].cl, &req, timeout_ms, ret_id);
}

int
coord_ring_send_connect(coord_run_t *r, int i, int64_t timeout_ms, uint64_t *ret_id)
{
    coord_ring_t *m = coord_ring_of(r);
    const char *eps[COORD_MAX_WORKERS];
    for (int k = 0; k < m->n; k++)
        if (m->w[k].in_ring)
            eps[m->w[k].rank] = m->w[k].ring_ep;
    zdist_worker_connect_t req = {r->cfg->job.spec.name, eps, (size_t)m->ring};
    return zdist_worker_client_connect(m->w[i].cl, &req, timeout_ms, ret_id);
}

int
coord_ring_send_run(coord_run_t *r, int i, int64_t timeout_ms, uint64_t *ret_id)
{
    zdist_worker_run_t req = {.job = r->cfg->job.spec.name, .steps = coord_ring_of(r)->round_steps};
    return zdist_worker_client_run_steps(coord_ring_of(r)->w[i].cl, &req, timeout_ms, ret_id);
}

int
coord_ring_send_evaluate(coord_run_t *r, int i, int64_t timeout_ms, uint64_t *ret_id)
{
    return zdist_worker_client_evaluate(coord_ring_of(r)->w[i].cl, r->cfg->job.spec.name, timeout_ms, ret_id);
}

int
coord_ring_send_status(coord_run_t *r, int i, int64_t timeout_ms, uint64_t *ret_id)
{
    return zdist_worker_client_status(coord_ring_of(r)->w[i].cl, timeout_ms, ret_id);
}

int
coord_ring_send_get_state(coord_run_t *r, int i, int64_t timeout_ms, uint64_t *ret_id)
{
    return zdist_worker_client_get_state(coord_ring_of(r)->w[i].cl, r->cfg->job.spec.name, timeout_ms, ret_id);
}

/* SET_STATE from the loaded checkpoint (tensors copied into the request). */
int
coord_ring_send_set_state(coord_run_t *r, int i, int64_t timeout_ms, uint64_t *ret_id)
{
    const zdist_wstate_t *ws = coord_ring_of(r)->loaded;
    zdist_worker_state_t st = {r->cfg->job.spec.name, ws->step, ws->iterations, coord_ring_of(r)->loaded_skip};
    return zdist_worker_client_set_state(coord_ring_of(r)->w[i].cl, &st, ws->tensors, ws->n, timeout_ms, ret_id);
}

/* Which of the workers in `which` (NULL: every one) answer STATUS now (m->w[i].up). Returns how many. */
int
coord_ring_probe_some(coord_run_t *r, const bool *which, int64_t timeout_ms)
{
    coord_ring_t *m = coord_ring_of(r);
    bool all[COORD_MAX_WORKERS];
    for (int i = 0; i < m->n; i++)
        all[i] = !which || which[i];
    coord_ring_replies_t rs;
    coord_ring_call(r, all, coord_ring_send_status, timeout_ms, timeout_ms, &rs);
    int up = 0;
    for (int i = 0; i < m->n; i++) {
        if (!all[i])
            continue;
        const zdist_worker_reply_t *rep = coord_ring_ok(&rs, i);
        if (rep && m->w[i].preempted && rep->incarnation == m->w[i].preempted_inc)
            rep = NULL; /* still stopping: not back until it has restarted */
        else if (rep)
            m->w[i].preempted = false;
        m->w[i].up = rep != NULL;
        m->w[i].has_job = rep && strcmp(rep->worker.job, m->job_name) == 0;
        if (rep)
            m->w[i].lost_since_ms = 0;
        else
            coord_ring_lost(&m->w[i], m->w[i].preempted ? "preempted (SIGTERM)" : "it does not answer STATUS");
        up += m->w[i].up;
    }
    coord_ring_replies_free(m, &rs);
    m->probed_ms = zdist_clock_now_ms();
    return up;
}

int
coord_ring_probe(coord_run_t *r, int64_t timeout_ms)
{
    return coord_ring_probe_some(r, NULL, timeout_ms);
}

/* Waits until a lost worker answers (a STATUS reaches it as soon as it is
   back), the pipe speaks (CANCEL, $TERM), or `until`, in one poll; at most
   COORD_RING_AWAIT_MS, so the status stays fresh. */
void
coord_ring_await(coord_run_t *r, int64_t until)
{
    coord_ring_t *m = coord_ring_of(r);
    int64_t now = zdist_clock_now_ms();
    if (until - now > COORD_RING_AWAIT_MS)
        until = now + COORD_RING_AWAIT_MS;
    zdist_worker_client_t *cls[COORD_MAX_WORKERS] = {0};
    for (int i = 0; i < m->n && until > now; i++)
        if (!m->w[i].dropped && !m->w[i].up && coord_ring_send(r, i, coord_ring_send_status, until - now))
            cls[i] = m->w[i].cl;
    if (until > now)
        zdist_worker_client_wait_any(cls, (size_t)m->n, zsock_resolve(r->pipe), until - now);
    for (int i = 0; i < m->n; i++) {
        zdist_worker_reply_t rep;
        if (cls[i] && coord_ring_take(m, i, &rep))
            zdist_worker_reply_release(&rep); /* the probe that follows asks again */
    }
    coord_run_check_pipe(r);
}
