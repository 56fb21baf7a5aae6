/* coord_ring: the state of a multi_worker_mirrored (or tpu) job's ring as its runner keeps it, and what the
   runner's files share: coord_ring_call.c (calls to the ring's workers, each one's request), coord_ring_elastic.c
   (strategy.min_workers/max_workers: the ring re-formed with the workers present and grown back at a
   checkpoint boundary; the replicas' final variables compared), coord_runner_ring.c (the ops: start, steps,
   checkpoints, re-forming). Private to the coordinator. */
#ifndef COORD_RING_H
#define COORD_RING_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "coord_run.h"
#include "zdist/wstate.h"
#include "zdist/worker_client.h"

#define COORD_RING_HISTORY 64  /* ring changes kept for the status */
#define COORD_RING_AWAIT_MS 2000 /* longest wait for a lost worker between status updates */

typedef struct {
    zdist_worker_client_t *cl;
    const char *endpoint; /* the cluster's, e.g. tcp://10.0.0.2:2222 */
    bool in_ring;
    bool dropped;         /* left out after the wait for it ran out */
    bool up;              /* answered the latest STATUS */
    bool has_job;         /* ... and runs this job */
    int rank;             /* in the ring; -1 outside */
    char ring_ep[300];    /* its end of the ring */
    uint64_t pending;     /* request id of the call in flight, 0 none */
    uint64_t incarnation; /* from its latest reply */
    unsigned restarts;    /* times the incarnation changed */
    int64_t lost_since_ms; /* zdist_clock_now_ms when it was lost; 0 while up */
    bool preempted;        /* got SIGTERM: out of the ring until another incarnation answers */
    uint64_t preempted_inc;
    char lost_why[512];
} coord_ring_worker_t;

/* One change of the ring's size, for the status: when, from which step,
   how many workers, why, and how long from the failure (or the boundary)
   until the re-formed ring had run its first round (-1 until it has). */
typedef struct {
    double time; /* wall clock, seconds */
    int64_t step;
    int size;
    int64_t reform_ms;
    double ex_per_s_before; /* the job's examples/s when the ring broke or grew */
    char why[256];
} coord_ring_change_t;

typedef struct {
    coord_ring_worker_t w[COORD_MAX_WORKERS];
    int n;
    int ring; /* workers in the ring */
    unsigned reforms;
    char last_failure[2048]; /* of the latest ring call */
    char reason[2048];       /* why the ring was last re-formed */
    int64_t round_steps;     /* RUN_STEPS size of the current round */
    const zdist_wstate_t *loaded; /* during a restore */
    int64_t loaded_skip;
    const char *job_name;
    /* Elastic (strategy.min_workers/max_workers; both 0 otherwise): the ring
       is formed of the workers up, at most max, and needs min. */
    int min, max;
    int64_t spe0;          /* steps per epoch the first ring reported (0: not yet) */
    int64_t probed_ms;     /* when the latest probe ended */
    int64_t broke_ms;      /* zdist_clock_now_ms when the ring last broke or was asked to grow; 0 none */
    double ex_per_s_broke; /* the job's examples/s then */
    coord_ring_change_t hist[COORD_RING_HISTORY];
    int nhist; /* changes recorded; the newest COORD_RING_HISTORY kept */
    json_t *final_crc; /* elastic: each ring worker's final variables' CRC-32 ([{task, crc32}]) */
    bool final_equal;
} coord_ring_t;

/* The replies of one call to several workers: got[i] when worker i answered
   (or its call completed here: deadline, lost connection). */
typedef struct {
    zdist_worker_reply_t r[COORD_MAX_WORKERS];
    bool got[COORD_MAX_WORKERS];
} coord_ring_replies_t;

/* The ring's state: the ops' own (r->impl). */
static inline coord_ring_t *
coord_ring_of(coord_run_t *r)
{
    return r->impl;
}

/* Sends worker i's request with a deadline; 0 with *ret_id or a negative errno. */
typedef int(coord_ring_send_fn)(coord_run_t *r, int i, int64_t timeout_ms, uint64_t *ret_id);

/* ---- coord_ring_call.c ---- */

/* A fresh client for worker i (calls given up on dropped with the old one): 0 or -EINVAL. */
int coord_ring_client(coord_ring_t *m, int i, zdist_error_t *err);
/* Sends one request to worker i, its only call in flight; false when it could not be sent. */
bool coord_ring_send(coord_run_t *r, int i, coord_ring_send_fn *send, int64_t timeout_ms);
/* Takes worker i's reply to its call in flight when it has come; false if not yet. */
bool coord_ring_take(coord_ring_t *m, int i, zdist_worker_reply_t *ret);
/* One call to every worker in `which` at once; after the first failure the others get grace_ms more. */
void coord_ring_call(coord_run_t *r, const bool *which, coord_ring_send_fn *send, int64_t timeout_ms,
                     int64_t grace_ms, coord_ring_replies_t *out);
/* coord_ring_call to the ring's workers. */
void coord_ring_call_ring(coord_run_t *r, coord_ring_send_fn *send, int64_t timeout_ms, int64_t grace_ms,
                          coord_ring_replies_t *out);
void coord_ring_replies_free(coord_ring_t *m, coord_ring_replies_t *rs);
/* Worker i's reply when it is an OK one, else NULL. */
const zdist_worker_reply_t *coord_ring_ok(const coord_ring_replies_t *rs, int i);
/* The worker's process or link is gone (not a refusal of the request). */
bool coord_ring_is_loss(const zdist_worker_reply_t *reply);
/* Appends to m->last_failure ("; " between). */
void coord_ring_fail_note(coord_ring_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Worker w is lost: since when (the first time) and why, for the status. */
void coord_ring_lost(coord_ring_worker_t *w, const char *why);
/* Sorts the ring's failed replies into m->last_failure; true when one means a worker was lost. */
bool coord_ring_failures(coord_run_t *r, const coord_ring_replies_t *rs, const char *what);
/* Which workers answer STATUS now (m->w[i].up, has_job); how many. */
int coord_ring_probe(coord_run_t *r, int64_t timeout_ms);
/* The same for the workers in `which` only (NULL: every one); how many of them. */
int coord_ring_probe_some(coord_run_t *r, const bool *which, int64_t timeout_ms);
/* Waits until a lost worker answers, the pipe speaks (CANCEL, $TERM), or `until`, in one poll; at most
   COORD_RING_AWAIT_MS, so the status stays fresh. */
void coord_ring_await(coord_run_t *r, int64_t until);

coord_ring_send_fn coord_ring_send_stop, coord_ring_send_start, coord_ring_send_connect, coord_ring_send_run,
    coord_ring_send_evaluate, coord_ring_send_status, coord_ring_send_get_state, coord_ring_send_set_state;

/* ---- coord_ring_elastic.c ---- */

/* Whether the job is elastic (strategy.min_workers/max_workers). */
static inline bool
coord_ring_elastic(const coord_ring_t *m)
{
    return m->max > 0;
}
/* Workers that joined through the chief since (JOIN from the pipe) added to the ring's table. 0 or -ENOMEM. */
int coord_ring_add_joined(coord_run_t *r);
/* The elastic ring: the workers up and not departed, the lowest tasks first, at most max_workers; ranks set. */
void coord_ring_form_elastic(coord_run_t *r);
/* Before a ring of m->ring starts: the global batch divides by its replicas, and the steps per epoch are the
   first ring's (rank 0's figure, spe); 0, or -EINVAL with r->error naming the fields. */
int coord_ring_check_size(coord_run_t *r, int64_t spe);
/* Re-forming an elastic ring: waits until min_workers are up (or cancel / term); false when stopped. */
bool coord_ring_wait_elastic(coord_run_t *r);
/* At a checkpoint boundary of an elastic ring: -EAGAIN to re-form when workers up outside it could join
   (below max_workers), or a ring worker has left (drained); 0 otherwise. */
int coord_ring_grow(coord_run_t *r);
/* A ring worker drained (zdist drain, a joined one's SIGTERM): true when the ring must re-form without it. */
bool coord_ring_member_left(coord_run_t *r);
/* The ring broke, or is to grow or shrink, now: the time and rate the next change measures from (the first
   sign counts). */
void coord_ring_broke(coord_run_t *r);
/* A ring of m->ring started from `step`: recorded in the history. */
void coord_ring_formed(coord_run_t *r, int64_t step);
/* The first round of a re-formed ring ran: its re-form time. */
void coord_ring_progressed(coord_run_t *r);
/* Elastic: every ring worker's variables (GET_STATE) compared by CRC-32 after the last step; logged, kept
   for the status. */
void coord_ring_verify(coord_run_t *r);
/* The elastic fields of the status detail: ring_size, min/max_workers, ring_history, final_variables. */
void coord_ring_status(coord_run_t *r, json_t *detail);

#endif
