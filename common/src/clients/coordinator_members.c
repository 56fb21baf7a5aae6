/* zdist ClusterCoordinator: its workers as the status sees them, workers that join a running job, and the
   evaluation over every worker that has the job. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/coordinator_private.h"
#include "zdist/sys.h"

size_t
zdist_coordinator_num_workers(const zdist_coordinator_t *self)
{
    return self->nworkers;
}

int
zdist_coordinator_worker_info(zdist_coordinator_t *self, size_t i, zdist_coordinator_worker_info_t *ret)
{
    if (i >= self->nworkers)
        return -ENOENT;
    s_worker_t *w = &self->workers[i];
    int64_t now = zdist_clock_now_ms();
    *ret = (zdist_coordinator_worker_info_t){
        .endpoint = w->endpoint,
        .up = w->state == W_UP,
        .closures_done = w->done,
        .in_flight = w->nflight,
        .oldest_in_flight_ms = w->nflight ? now - w->flight[0]->sent_ms : 0,
        .last_heard_ms = w->last_heard_ms,
        .restarts = w->restarts,
        .rejoining = w->state == W_STARTING && w->ever_up,
        .lost_since_ms = w->state == W_UP || w->state == W_LEFT ? 0 : w->lost_since_ms,
        .lost_why = w->lost_why,
        .draining = w->draining && w->state != W_LEFT,
        .left = w->state == W_LEFT,
    };
    return 0;
}

int
zdist_coordinator_add_worker(zdist_coordinator_t *self, const char *endpoint, zdist_error_t *err)
{
    if (self->nworkers >= ZDIST_COORDINATOR_MAX_WORKERS)
        return zdist_error_set(err, -ENOSPC, "%zu workers already; at most %d", self->nworkers,
                               ZDIST_COORDINATOR_MAX_WORKERS);
    s_worker_t *ws = realloc(self->workers, (self->nworkers + 1) * sizeof *ws);
    if (ws)
        self->workers = ws;
    zdist_worker_client_t **cs = ws ? realloc(self->clients, (self->nworkers + 1) * sizeof *cs) : NULL;
    if (cs)
        self->clients = cs;
    if (!ws || !cs)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    s_worker_t *w = &self->workers[self->nworkers];
    memset(w, 0, sizeof *w);
    snprintf(w->endpoint, sizeof w->endpoint, "%s", endpoint);
    w->flight = calloc((size_t)(self->k * self->max_batch), sizeof *w->flight);
    if (!w->flight)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    w->cl = self->clients[self->nworkers] = zdist_worker_client_new(w->endpoint, NULL, err);
    if (!w->cl) {
        free(w->flight);
        zdist_error_prefix(err, "worker %zu", self->nworkers);
        return err && err->code < 0 ? err->code : -EINVAL;
    }
    /* W_DOWN, due for a ping now: once it answers it gets START_JOB and closures. */
    w->state = W_DOWN;
    return (int)self->nworkers++;
}

/* ---- evaluate ---- */

#define S_EVAL_LOST_WAIT_MS 60000

int
zdist_coordinator_evaluate(zdist_coordinator_t *self, zdist_evaluation_t *ret, zdist_error_t *err)
{
    zdist_error_t jerr = {0};
    int rc = zdist_coordinator_join(self, &jerr);
    if (rc < 0) {
        if (err)
            *err = jerr;
        return rc;
    }
    for (size_t i = 0; i < self->nworkers; i++) {
        self->workers[i].evaluated = false;
        self->workers[i].eval_id = 0;
    }
    self->eval_rc = 0;
    zdist_auc_destroy(&self->eval_auc);
    if (!(self->eval_auc = zdist_auc_new(0, err)))
        return -ENOMEM;
    /* Each EVALUATE has the closure deadline (the worker is lost past it);
       a lost worker's part is waited for until it rejoins, a minute at
       least: a frozen or cut-off worker is back after longer than one
       closure's deadline, and its part is its own. */
    int64_t until = zdist_clock_now_ms() +
                    (self->closure_timeout_ms > S_EVAL_LOST_WAIT_MS ? self->closure_timeout_ms : S_EVAL_LOST_WAIT_MS);
    for (;;) {
        size_t left = 0;
        for (size_t i = 0; i < self->nworkers; i++) {
            s_worker_t *w = &self->workers[i];
            w->evaluated = w->evaluated || w->state == W_LEFT; /* drained: no part of its own */
            left += !w->evaluated;
            /* Every worker at once; a lost one once it has rejoined. */
            if (!w->evaluated && !w->eval_id && w->state == W_UP &&
                zdist_worker_client_evaluate(w->cl, self->job.name, self->closure_timeout_ms, &w->eval_id) < 0)
                return zdist_error_set(err, -ENOMEM, "out of memory");
        }
        if (self->eval_rc < 0) {
            if (err)
                *err = self->eval_err;
            return self->eval_rc;
        }
        if (left == 0)
            break;
        int64_t now = zdist_clock_now_ms();
        if (now >= until)
            return zdist_error_set(err, -ETIMEDOUT, "evaluation: %zu worker(s) did not answer in time", left);
        zdist_coordinator_poll(self, until - now);
    }
    zdist_evaluation_t sum = {0};
    for (size_t i = 0; i < self->nworkers; i++)
        zdist_evaluation_add(&sum, &self->workers[i].evaluation, NULL);
    if (zdist_evaluation_finish(&sum, self->eval_auc) < 0)
        return zdist_error_set(err, -ENOMEM, "evaluation: out of memory for the AUC");
    if (ret)
        *ret = sum;
    return 0;
}

