/* zdist ClusterCoordinator: closures (RUN_STEPS) queued, pipelined onto workers, put back when a worker is lost. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/coordinator.h"
#include "zdist/step.h" /* ZDIST_OUTPUT_* */
#include "zdist/sys.h"
#include "zdist/worker_client.h"

#include "clients/coordinator_private.h"

void
zdist_coordinator_options_default(zdist_coordinator_options_t *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->create_variables = true;
    opts->max_in_flight_per_worker = 2;
    opts->max_closures_per_dispatch = 32;
    opts->closure_timeout_ms = 120000;
    opts->start_timeout_ms = 60000;
    opts->ping_interval_ms = 300;
}

void
zdist_coordinator_destroy(zdist_coordinator_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_coordinator_t *self = *self_p;
    for (size_t i = 0; self->workers && i < self->nworkers; i++) {
        zdist_worker_client_destroy(&self->workers[i].cl);
        free(self->workers[i].flight);
    }
    free(self->workers);
    free(self->clients);
    while (self->all) {
        zdist_remote_value_t *v = self->all;
        self->all = v->all_next;
        free(v);
    }
    for (size_t i = 0; self->ps && i < self->nps; i++)
        free(self->ps[i]);
    free(self->ps);
    zdist_job_release(&self->job);
    free(self->prefix);
    zdist_auc_destroy(&self->eval_auc);
    free(self);
    *self_p = NULL;
}

zdist_coordinator_t *
zdist_coordinator_new(const zdist_coordinator_options_t *opts, zdist_error_t *err)
{
    if (!opts || !opts->job || opts->num_workers == 0 || !opts->workers) {
        zdist_error_set(err, -EINVAL, "a coordinator needs a job and at least one worker");
        return NULL;
    }
    if (opts->num_workers > ZDIST_COORDINATOR_MAX_WORKERS) {
        zdist_error_set(err, -EINVAL, "%zu workers; at most %d", opts->num_workers, ZDIST_COORDINATOR_MAX_WORKERS);
        return NULL;
    }
    zdist_coordinator_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    if (zdist_job_copy(opts->job, &self->job, err) < 0) {
        zdist_coordinator_destroy(&self);
        return NULL;
    }
    self->prefix = strdup(opts->variable_prefix ? opts->variable_prefix : "");
    self->create_variables = opts->create_variables;
    self->repeat_input = opts->repeat_input;
    self->on_event = opts->on_event;
    self->on_event_arg = opts->on_event_arg;
    self->k = opts->max_in_flight_per_worker > 0 ? opts->max_in_flight_per_worker : 2;
    if (self->k > S_MAX_K)
        self->k = S_MAX_K;
    self->max_batch = opts->max_closures_per_dispatch > 0 ? opts->max_closures_per_dispatch : 1;
    if (self->max_batch > S_MAX_BATCH)
        self->max_batch = S_MAX_BATCH;
    self->closure_timeout_ms = opts->closure_timeout_ms > 0 ? opts->closure_timeout_ms : 120000;
    self->start_timeout_ms = opts->start_timeout_ms > 0 ? opts->start_timeout_ms : 60000;
    self->ping_interval_ms = opts->ping_interval_ms > 0 ? opts->ping_interval_ms : 300;
    self->nps = opts->num_ps;
    self->ps = opts->num_ps ? calloc(opts->num_ps, sizeof *self->ps) : NULL;
    self->workers = calloc(opts->num_workers, sizeof *self->workers);
    self->clients = calloc(opts->num_workers, sizeof *self->clients);
    self->nworkers = opts->num_workers;
    if (!self->prefix || !self->workers || !self->clients || (opts->num_ps && !self->ps)) {
        zdist_coordinator_destroy(&self);
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < opts->num_ps; i++)
        if (!(self->ps[i] = strdup(opts->ps[i]))) {
            zdist_coordinator_destroy(&self);
            zdist_error_set(err, -ENOMEM, "out of memory");
            return NULL;
        }
    for (size_t i = 0; i < opts->num_workers; i++) {
        s_worker_t *w = &self->workers[i];
        snprintf(w->endpoint, sizeof w->endpoint, "%s", opts->workers[i]);
        w->flight = calloc((size_t)(self->k * self->max_batch), sizeof *w->flight);
        if (!w->flight) {
            zdist_coordinator_destroy(&self);
            zdist_error_set(err, -ENOMEM, "out of memory");
            return NULL;
        }
        w->cl = self->clients[i] = zdist_worker_client_new(w->endpoint, NULL, err);
        if (!w->cl) {
            zdist_error_prefix(err, "worker %zu", i);
            zdist_coordinator_destroy(&self);
            return NULL;
        }
    }
    return self;
}

void
zdist_coordinator_set_create_variables(zdist_coordinator_t *self, bool create)
{
    if (self)
        self->create_variables = create;
}

/* ---- requests ---- */

static int
s_send_start(zdist_coordinator_t *self, size_t i, bool create)
{
    s_worker_t *w = &self->workers[i];
    /* A worker still holding the job from an earlier run stops it first. */
    if (zdist_worker_client_stop_job(w->cl, self->job.name, self->start_timeout_ms, NULL) < 0)
        return -ENOMEM;
    zdist_worker_start_t req = {
        .job = &self->job,
        .worker_index = (int)i,
        .num_workers = (int)self->nworkers,
        .ps_endpoints = (const char *const *)self->ps,
        .num_ps = self->nps,
        .create_variables = create,
        .variable_prefix = self->prefix,
        .repeat_input = self->repeat_input,
    };
    if (zdist_worker_client_start_job(w->cl, &req, self->start_timeout_ms, &w->start_id) < 0)
        return -ENOMEM;
    w->state = W_STARTING;
    return 0;
}

static int
s_send_ping(zdist_coordinator_t *self, s_worker_t *w)
{
    int64_t t = self->ping_interval_ms * 3;
    return zdist_worker_client_ping(w->cl, t < 1000 ? 1000 : t, &w->ping_id);
}

/* ---- queue ---- */

static void
s_push_front(zdist_coordinator_t *self, zdist_remote_value_t *v)
{
    v->state = S_QUEUED;
    v->qnext = self->qhead;
    self->qhead = v;
    if (!self->qtail)
        self->qtail = v;
    self->nqueued++;
}

static zdist_remote_value_t *
s_pop(zdist_coordinator_t *self)
{
    zdist_remote_value_t *v = self->qhead;
    if (v) {
        self->qhead = v->qnext;
        if (!self->qhead)
            self->qtail = NULL;
        v->qnext = NULL;
        self->nqueued--;
    }
    return v;
}

static void
s_recycle(zdist_coordinator_t *self, zdist_remote_value_t *v)
{
    v->qnext = self->spare;
    self->spare = v;
}

static void
s_complete(zdist_coordinator_t *self, zdist_remote_value_t *v, int rc)
{
    v->state = S_DONE;
    v->rc = rc;
    v->qnext = NULL;
    if (rc < 0 && v->detached) {
        s_recycle(self, v); /* the coordinator's error says why; nobody reads this value's */
    } else if (rc == 0) {
        if (self->ctail)
            self->ctail->qnext = v;
        else
            self->chead = v;
        self->ctail = v;
    }
}

/* A value for a new closure: a spare detached one when there is one, else
   a new one on the list of every value. */
static zdist_remote_value_t *
s_value_new(zdist_coordinator_t *self)
{
    zdist_remote_value_t *v = self->spare;
    if (v) {
        self->spare = v->qnext;
        zdist_remote_value_t *all_next = v->all_next;
        memset(v, 0, sizeof *v);
        v->all_next = all_next;
        return v;
    }
    if (!(v = calloc(1, sizeof *v)))
        return NULL;
    v->all_next = self->all;
    self->all = v;
    return v;
}

static zdist_remote_value_t *
s_schedule(zdist_coordinator_t *self, int64_t steps, bool detached)
{
    if (steps < 1)
        return NULL;
    zdist_remote_value_t *v = s_value_new(self);
    if (!v)
        return NULL;
    v->owner = self;
    v->steps = steps;
    v->detached = detached;
    if (self->numbered) {
        v->first_step = self->next_step + 1;
        self->next_step += steps;
    }
    v->result.worker = -1;
    if (self->first_rc < 0) {
        /* After the first error nothing more runs. */
        zdist_error_set(&v->err, -ECANCELED, "cancelled: an earlier closure failed");
        s_complete(self, v, -ECANCELED);
        return v;
    }
    v->state = S_QUEUED;
    if (self->qtail)
        self->qtail->qnext = v;
    else
        self->qhead = v;
    self->qtail = v;
    self->nqueued++;
    return v;
}

zdist_remote_value_t *
zdist_coordinator_schedule(zdist_coordinator_t *self, int64_t steps)
{
    return s_schedule(self, steps, false);
}

int
zdist_coordinator_schedule_detached(zdist_coordinator_t *self, int64_t steps)
{
    if (steps < 1)
        return -EINVAL;
    return s_schedule(self, steps, true) ? 0 : -ENOMEM;
}

void
zdist_coordinator_set_step(zdist_coordinator_t *self, int64_t step)
{
    self->next_step = step > 0 ? step : 0;
    self->numbered = true;
}

void
zdist_coordinator_cancel_queued(zdist_coordinator_t *self)
{
    zdist_remote_value_t *v;
    while ((v = s_pop(self))) {
        zdist_error_set(&v->err, -ECANCELED, "cancelled before it ran");
        s_complete(self, v, -ECANCELED);
    }
}

/* The worker is lost: its closures go back to the front of the queue. */
static void
s_event(zdist_coordinator_t *self, bool problem, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void
s_event(zdist_coordinator_t *self, bool problem, const char *fmt, ...)
{
    if (!self->on_event)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    self->on_event(self->on_event_arg, problem, line);
}

/* The worker is lost: its closures go back to the front of the queue.
   why NULL: a deliberate reset (start, stop), not worth a line. */
static void
s_lose(zdist_coordinator_t *self, s_worker_t *w, const char *why)
{
    if (why && w->state == W_UP)
        s_event(self, true, "worker %zu (%s) %s; %d closure%s put back in the queue", (size_t)(w - self->workers),
                w->endpoint, why, w->nflight, w->nflight == 1 ? "" : "s");
    if (why && !w->lost_since_ms) {
        w->lost_since_ms = zdist_clock_now_ms();
        snprintf(w->lost_why, sizeof w->lost_why, "%s", why);
    }
    for (int k = w->nflight - 1; k >= 0; k--) {
        zdist_remote_value_t *v = w->flight[k];
        v->result.attempts++;
        if (self->first_rc < 0) {
            zdist_error_set(&v->err, -ECANCELED, "cancelled: an earlier closure failed");
            s_complete(self, v, -ECANCELED);
        } else {
            s_push_front(self, v);
        }
    }
    w->nflight = 0;
    w->nmsgs = 0;
    w->state = w->draining ? W_LEFT : W_DOWN;
    w->ping_id = 0;
    w->start_id = 0;
    w->eval_id = 0;
    w->next_ping_ms = zdist_clock_now_ms() + self->ping_interval_ms;
}

static void
s_fail_first(zdist_coordinator_t *self, int rc, const zdist_error_t *err)
{
    if (self->first_rc == 0) {
        self->first_rc = rc;
        self->first_err = *err;
        self->error_raised = false;
    }
    zdist_coordinator_cancel_queued(self);
}

static bool
s_transient(int status)
{
    return status == ZDIST_STATUS_UNAVAILABLE || status == ZDIST_STATUS_DEADLINE_EXCEEDED;
}

/* Sums a closure's share of a RUN_STEPS reply: steps [from, from + n). */
static void
s_take_steps(zdist_closure_result_t *res, const zdist_worker_ran_t *ran, size_t from, size_t n)
{
    res->steps = (int64_t)n;
    res->loss_sum = res->examples = res->correct = 0;
    res->last_loss = NAN;
    for (size_t s = from; s < from + n; s++) {
        const zdist_worker_step_t *st = &ran->steps[s];
        for (int o = 0; o < st->num_outputs; o++) {
            if (strcmp(st->names[o], ZDIST_OUTPUT_LOSS) == 0) {
                res->loss_sum += st->values[o];
                res->last_loss = st->values[o];
            } else if (strcmp(st->names[o], ZDIST_OUTPUT_EXAMPLES) == 0) {
                res->examples += st->values[o];
            } else if (strcmp(st->names[o], ZDIST_OUTPUT_CORRECT) == 0) {
                res->correct += st->values[o];
            }
        }
    }
}

/* A draining worker with nothing in flight has left. */
static void
s_drained(zdist_coordinator_t *self, s_worker_t *w)
{
    if (!w->draining || w->nflight > 0 || w->state == W_LEFT)
        return;
    w->state = W_LEFT;
    s_event(self, false, "worker %zu (%s) drained: its closures are done, it has left the job",
            (size_t)(w - self->workers), w->endpoint);
}

static void
s_on_run_reply(zdist_coordinator_t *self, size_t wi, const zdist_worker_reply_t *reply)
{
    s_worker_t *w = &self->workers[wi];
    /* The closures this RUN_STEPS carried, in the order they were sent. */
    zdist_remote_value_t *batch[S_MAX_BATCH];
    int nb = 0, kept = 0;
    int64_t asked = 0;
    for (int k = 0; k < w->nflight; k++)
        if (w->flight[k]->req_id == reply->id && nb < S_MAX_BATCH) {
            batch[nb++] = w->flight[k];
            asked += w->flight[k]->steps;
        }
    if (nb == 0)
        return; /* closures already put back */
    int status = reply->status;
    uint64_t inc = reply->incarnation;
    if (s_transient(status) || (status != ZDIST_STATUS_OK && inc != 0 && inc != w->incarnation)) {
        /* A reply the client made (no incarnation) or from a restarted
           worker means the worker is gone; else it failed transiently. */
        char why[600];
        snprintf(why, sizeof why, "%s: %s%s%s", inc == 0 || inc != w->incarnation ? "lost" : "failed a closure",
                 zdist_status_name(status), *reply->message ? ": " : "", reply->message);
        s_lose(self, w, why);
        return;
    }
    for (int k = 0; k < w->nflight; k++)
        if (w->flight[k]->req_id != reply->id)
            w->flight[kept++] = w->flight[k];
    w->nflight = kept;
    w->nmsgs--;
    if (status != ZDIST_STATUS_OK) {
        for (int b = 0; b < nb; b++) {
            zdist_remote_value_t *v = batch[b];
            v->result.worker = (int)wi;
            v->result.attempts++;
            zdist_error_set(&v->err, zdist_status_to_errno(status), "worker %zu (%s): %s: %s", wi, w->endpoint,
                            zdist_status_name(status), reply->message);
            s_fail_first(self, v->err.code, &v->err); /* before s_complete may recycle a detached v */
            s_complete(self, v, v->err.code);
        }
        return;
    }
    int64_t now = zdist_clock_now_us();
    /* Messages run one after the other on a worker: this one started when
       it was sent or when the one before it ended, whichever is later; its
       closures share that time by their steps. */
    int64_t run_us = now - (w->last_done_us > batch[0]->sent_us ? w->last_done_us : batch[0]->sent_us);
    w->last_done_us = now;
    size_t ran = reply->ran.num_steps < (size_t)asked ? reply->ran.num_steps : (size_t)asked, from = 0;
    if (ran > 0) {
        double per_step = (double)run_us / (double)ran;
        w->us_per_step = w->us_per_step > 0 ? 0.75 * w->us_per_step + 0.25 * per_step : per_step;
    }
    /* A stopping worker (SIGTERM) answers with the steps it ran, fewer than
       asked without the input's end: the closures it did not finish go back
       to the front of the queue, in their order, whole (their steps keep
       their numbers, so the psds skip the ones it pushed; counting its part
       here as well would lose steps from the job's count). Unnumbered
       closures would apply those steps twice: they keep what they ran. */
    int cut = nb;
    if (self->numbered && !reply->ran.end_of_data && ran < (size_t)asked) {
        size_t covered = 0;
        for (cut = 0; cut < nb && covered + (size_t)batch[cut]->steps <= ran; cut++)
            covered += (size_t)batch[cut]->steps;
        for (int b = nb - 1; b >= cut; b--) {
            batch[b]->result.attempts++;
            s_push_front(self, batch[b]);
        }
    }
    for (int b = 0; b < cut; b++) {
        zdist_remote_value_t *v = batch[b];
        zdist_closure_result_t *res = &v->result;
        size_t n = ran - from < (size_t)v->steps ? ran - from : (size_t)v->steps;
        res->worker = (int)wi;
        res->attempts++;
        s_take_steps(res, &reply->ran, from, n);
        from += n;
        /* The input ran out within this closure (or an earlier one of the message). */
        res->end_of_data = reply->ran.end_of_data && n < (size_t)v->steps;
        res->run_us = ran ? run_us * (int64_t)n / (int64_t)ran : 0;
        w->done++;
        s_complete(self, v, 0);
    }
    s_drained(self, w);
}

static void
s_on_evaluate_reply(zdist_coordinator_t *self, size_t wi, const zdist_worker_reply_t *reply)
{
    s_worker_t *w = &self->workers[wi];
    w->eval_id = 0;
    if (s_transient(reply->status)) {
        s_lose(self, w, "lost: no answer to EVALUATE");
    } else if (reply->status != ZDIST_STATUS_OK) {
        if (self->eval_rc == 0)
            self->eval_rc = zdist_error_set(&self->eval_err, zdist_status_to_errno(reply->status),
                                            "worker %zu (%s): evaluation: %s: %s", wi, w->endpoint,
                                            zdist_status_name(reply->status), reply->message);
    } else {
        w->evaluation = reply->evaluation;
        w->evaluated = true;
        /* the pairs live in the reply: into the whole now */
        if (self->eval_auc && zdist_evaluation_add(&(zdist_evaluation_t){0}, &reply->evaluation, self->eval_auc) < 0 &&
            self->eval_rc == 0)
            self->eval_rc = zdist_error_set(&self->eval_err, -ENOMEM, "evaluation: out of memory for the AUC's "
                                            "%lld predictions", (long long)reply->evaluation.scored);
        w->evaluation.predictions = NULL;
        w->evaluation.positives = NULL;
    }
}

static void
s_on_reply(zdist_coordinator_t *self, size_t wi, const zdist_worker_reply_t *reply)
{
    s_worker_t *w = &self->workers[wi];
    uint64_t id = reply->id;
    int status = reply->status;
    if (status == ZDIST_STATUS_OK)
        w->last_heard_ms = zdist_clock_now_ms();
    if (w->state == W_LEFT)
        return; /* drained: its closures are back; a late ping or start reply changes nothing */
    if (w->state == W_DOWN && id == w->ping_id && w->ping_id) {
        w->ping_id = 0;
        if (status == ZDIST_STATUS_OK)
            s_send_start(self, wi, false);
        else
            w->next_ping_ms = zdist_clock_now_ms() + self->ping_interval_ms;
        return;
    }
    if (w->state == W_STARTING && id == w->start_id) {
        w->start_id = 0;
        if (status == ZDIST_STATUS_OK) {
            w->steps_per_epoch = reply->started.steps_per_epoch;
            w->incarnation = reply->incarnation;
            if (w->ever_up) {
                w->restarts++;
                s_event(self, false, "worker %zu (%s) is back (rejoin %u): running closures again", wi, w->endpoint,
                        w->restarts);
            }
            w->ever_up = true;
            w->state = W_UP;
            w->lost_since_ms = 0;
            w->lost_why[0] = '\0';
        } else if (s_transient(status)) {
            w->state = W_DOWN;
            w->next_ping_ms = zdist_clock_now_ms() + self->ping_interval_ms;
        } else {
            zdist_error_t e;
            zdist_error_set(&e, zdist_status_to_errno(status), "worker %zu (%s) refused the job: %s: %s", wi,
                            w->endpoint, zdist_status_name(status), reply->message);
            w->state = W_DOWN;
            w->next_ping_ms = zdist_clock_now_ms() + 10 * self->ping_interval_ms;
            s_fail_first(self, e.code, &e);
        }
        return;
    }
    if (id && id == w->eval_id) {
        s_on_evaluate_reply(self, wi, reply);
        return;
    }
    s_on_run_reply(self, wi, reply);
}

static void
s_dispatch(zdist_coordinator_t *self)
{
    int64_t now = zdist_clock_now_ms();
    for (size_t i = 0; i < self->nworkers; i++) {
        s_worker_t *w = &self->workers[i];
        if (w->state == W_DOWN && !w->ping_id && now >= w->next_ping_ms) {
            if (s_send_ping(self, w) < 0)
                w->next_ping_ms = now + self->ping_interval_ms;
        }
    }
    if (self->paused || self->first_rc < 0)
        return;
    /* Fill the least loaded worker first, one message at a time, so the
       queue spreads over every worker. */
    while (self->qhead) {
        s_worker_t *best = NULL;
        size_t free_slots = 0;
        for (size_t n = 0; n < self->nworkers; n++) {
            s_worker_t *w = &self->workers[(self->rr + n) % self->nworkers];
            if (w->state != W_UP || w->draining || w->nmsgs >= self->k)
                continue;
            free_slots += (size_t)(self->k - w->nmsgs);
            if (!best || w->nmsgs < best->nmsgs)
                best = w;
        }
        if (!best)
            break;
        self->rr = (self->rr + 1) % self->nworkers;
        /* Closures in this message: the queue shared out over the free
           slots, up to S_BATCH_TARGET_US of this worker's measured time
           (one closure until it has a measure). */
        size_t want = (self->nqueued + free_slots - 1) / free_slots;
        if (want > (size_t)self->max_batch)
            want = (size_t)self->max_batch;
        zdist_remote_value_t *batch[S_MAX_BATCH];
        size_t nb = 0;
        int64_t steps = 0;
        while (self->qhead && nb < want) {
            int64_t s = steps + self->qhead->steps;
            if (nb > 0 && (best->us_per_step <= 0 || (double)s * best->us_per_step > S_BATCH_TARGET_US ||
                           s > ZDIST_WORKER_MAX_STEPS_PER_CALL))
                break;
            /* One message numbers its steps from one first_step: only
               closures that follow each other (a put-back one may not). */
            if (nb > 0 && self->numbered &&
                self->qhead->first_step != batch[nb - 1]->first_step + batch[nb - 1]->steps)
                break;
            batch[nb++] = s_pop(self);
            steps = s;
        }
        if (nb == 0)
            break;
        zdist_worker_run_t req = {self->job.name, steps, batch[0]->first_step};
        uint64_t id = 0;
        if (zdist_worker_client_run_steps(best->cl, &req, self->closure_timeout_ms, &id) < 0) {
            while (nb > 0)
                s_push_front(self, batch[--nb]);
            break;
        }
        int64_t sent_ms = zdist_clock_now_ms(), sent_us = zdist_clock_now_us();
        for (size_t b = 0; b < nb; b++) {
            zdist_remote_value_t *v = batch[b];
            v->req_id = id;
            v->state = S_FLIGHT;
            v->sent_ms = sent_ms;
            v->sent_us = sent_us;
            best->flight[best->nflight++] = v;
        }
        best->nmsgs++;
    }
}

static int
s_drain(zdist_coordinator_t *self, size_t wi, int64_t wait_ms)
{
    s_worker_t *w = &self->workers[wi];
    int n = 0;
    zdist_worker_reply_t reply;
    while (w->cl && zdist_worker_client_recv(w->cl, n ? 0 : wait_ms, &reply) == 0) {
        s_on_reply(self, wi, &reply);
        zdist_worker_reply_release(&reply);
        n++;
    }
    /* A worker that has left is out for good: its client goes, or a socket
       reconnecting to the gone worker for ever (and its monitor) would stay
       in every poll and in memory, one more with every worker that joins
       and leaves, in every later attempt too. */
    if (w->state == W_LEFT && w->cl) {
        zdist_worker_client_destroy(&w->cl);
        self->clients[wi] = NULL;
    }
    return n;
}

int
zdist_coordinator_poll(zdist_coordinator_t *self, int64_t wait_ms)
{
    int64_t until = zdist_clock_now_ms() + (wait_ms > 0 ? wait_ms : 0);
    for (;;) {
        s_dispatch(self);
        int events = 0;
        for (size_t i = 0; i < self->nworkers; i++)
            events += s_drain(self, i, 0);
        s_dispatch(self);
        int64_t now = zdist_clock_now_ms();
        if (events > 0 || now >= until)
            return events;
        /* One poll over every worker: a reply, a call's deadline, the next
           PING of a lost worker or the caller's time, whichever is first. */
        int64_t wake = until;
        for (size_t i = 0; i < self->nworkers; i++) {
            const s_worker_t *w = &self->workers[i];
            if (w->state == W_DOWN && !w->ping_id && w->next_ping_ms < wake)
                wake = w->next_ping_ms;
        }
        if (wake > now && zdist_worker_client_wait_any(self->clients, self->nworkers, NULL, wake - now) < 0)
            return events; /* interrupted */
    }
}

int
zdist_coordinator_start(zdist_coordinator_t *self, bool stop_first, zdist_error_t *err)
{
    (void)stop_first; /* a STOP_JOB always precedes START_JOB: harmless when none runs */
    int64_t until = zdist_clock_now_ms() + self->start_timeout_ms;
    for (size_t i = 0; i < self->nworkers; i++)
        s_lose(self, &self->workers[i], NULL);
    self->first_rc = 0;
    /* The first worker that answers creates the variables; the others
       start once they exist. */
    size_t creator = self->nworkers;
    while (creator == self->nworkers && zdist_clock_now_ms() < until) {
        for (size_t i = 0; i < self->nworkers && creator == self->nworkers; i++) {
            s_worker_t *w = &self->workers[i];
            if (w->start_id || w->state == W_LEFT)
                continue;
            zdist_worker_reply_t reply;
            uint64_t ping;
            if (zdist_worker_client_ping(w->cl, 1000, &ping) < 0 || zdist_worker_client_wait(w->cl, ping, &reply) < 0)
                continue;
            int st = reply.status;
            zdist_worker_reply_release(&reply);
            if (st != ZDIST_STATUS_OK)
                continue;
            if (s_send_start(self, i, self->create_variables) < 0)
                return zdist_error_set(err, -ENOMEM, "out of memory");
            for (int64_t now; w->state == W_STARTING && (now = zdist_clock_now_ms()) < until;)
                s_drain(self, i, until - now);
            if (self->first_rc < 0) {
                *err = self->first_err;
                self->error_raised = true;
                return self->first_rc;
            }
            if (w->state == W_UP)
                creator = i;
        }
    }
    if (creator == self->nworkers)
        return zdist_error_set(err, -ENOTCONN, "no worker answered START_JOB within %lld ms",
                               (long long)self->start_timeout_ms);
    for (size_t i = 0; i < self->nworkers; i++)
        if (i != creator && self->workers[i].state != W_LEFT && s_send_start(self, i, false) < 0)
            return zdist_error_set(err, -ENOMEM, "out of memory");
    for (;;) {
        bool starting = false;
        for (size_t i = 0; i < self->nworkers; i++)
            starting = starting || self->workers[i].state == W_STARTING;
        if (!starting || zdist_clock_now_ms() >= until)
            break;
        zdist_coordinator_poll(self, 50);
    }
    if (self->first_rc < 0) {
        *err = self->first_err;
        self->error_raised = true;
        return self->first_rc;
    }
    return 0;
}

int64_t
zdist_coordinator_steps_per_epoch(const zdist_coordinator_t *self)
{
    int64_t n = 0;
    for (size_t i = 0; i < self->nworkers; i++) {
        int64_t w = self->workers[i].steps_per_epoch;
        /* exactly_once: each worker's pipeline is the whole dataset, the
           epoch's batches shared out by the closures' step numbers. */
        n = self->job.exactly_once ? (w > n ? w : n) : n + w;
    }
    return n;
}

bool
zdist_coordinator_done(const zdist_coordinator_t *self)
{
    if (self->nqueued)
        return false;
    for (size_t i = 0; i < self->nworkers; i++)
        if (self->workers[i].nflight)
            return false;
    return true;
}

int
zdist_coordinator_error(const zdist_coordinator_t *self, zdist_error_t *err)
{
    if (self->first_rc < 0 && err)
        *err = self->first_err;
    return self->first_rc;
}

int
zdist_coordinator_join(zdist_coordinator_t *self, zdist_error_t *err)
{
    while (!zdist_coordinator_done(self) && !(self->paused && zdist_coordinator_in_flight(self) == 0))
        zdist_coordinator_poll(self, 50);
    if (self->first_rc < 0 && !self->error_raised) {
        self->error_raised = true;
        if (err)
            *err = self->first_err;
        return self->first_rc;
    }
    return 0;
}

void
zdist_coordinator_pause(zdist_coordinator_t *self, bool paused)
{
    self->paused = paused;
}

size_t
zdist_coordinator_queued(const zdist_coordinator_t *self)
{
    return self->nqueued;
}

size_t
zdist_coordinator_in_flight(const zdist_coordinator_t *self)
{
    size_t n = 0;
    for (size_t i = 0; i < self->nworkers; i++)
        n += (size_t)self->workers[i].nflight;
    return n;
}

bool
zdist_coordinator_next_result(zdist_coordinator_t *self, zdist_closure_result_t *ret)
{
    zdist_remote_value_t *v = self->chead;
    if (!v)
        return false;
    self->chead = v->qnext;
    if (!self->chead)
        self->ctail = NULL;
    v->qnext = NULL;
    *ret = v->result;
    if (v->detached)
        s_recycle(self, v);
    return true;
}

void
zdist_coordinator_drain_worker(zdist_coordinator_t *self, size_t i)
{
    if (i >= self->nworkers || self->workers[i].draining)
        return;
    s_worker_t *w = &self->workers[i];
    w->draining = true;
    if (w->state != W_UP) {
        w->state = W_LEFT; /* nothing in flight: lost or starting workers hold no closure */
        return;
    }
    s_drained(self, w);
}

int
zdist_remote_value_fetch(zdist_remote_value_t *value, zdist_closure_result_t *ret, zdist_error_t *err)
{
    while (value->state != S_DONE)
        zdist_coordinator_poll(value->owner, 50);
    if (value->rc < 0) {
        if (err)
            *err = value->err;
        return value->rc;
    }
    if (ret)
        *ret = value->result;
    return 0;
}

/* ---- stop ---- */

void
zdist_coordinator_stop_job(zdist_coordinator_t *self, int64_t timeout_ms)
{
    uint64_t *ids = calloc(self->nworkers, sizeof *ids);
    for (size_t i = 0; ids && i < self->nworkers; i++)
        if (self->workers[i].cl) /* NULL: it has left */
            zdist_worker_client_stop_job(self->workers[i].cl, self->job.name, timeout_ms, &ids[i]);
    /* Each call completes by its deadline: the replies, or no answer. */
    for (size_t i = 0; i < self->nworkers; i++) {
        zdist_worker_reply_t reply;
        if (ids && ids[i] && zdist_worker_client_wait(self->workers[i].cl, ids[i], &reply) == 0)
            zdist_worker_reply_release(&reply);
        s_lose(self, &self->workers[i], NULL);
        self->workers[i].next_ping_ms = INT64_MAX; /* stays away */
    }
    free(ids);
    zdist_coordinator_cancel_queued(self);
}
