/* coord_follow: STATUS streams, each sent its job's news as it changes. */
#include <stdio.h>
#include <string.h>

#include "coord_follow.h"
#include "zdist/sys.h"

#define S_FOLLOW_MIN_MS 250   /* at most one update per follower this often */
#define S_FOLLOW_IDLE_MS 5000 /* and at least one this often, changed or not */

static int s_on_follow_timer(zloop_t *loop, int timer_id, void *arg);

void
coord_follow_init(coord_follow_t *fs, zloop_t *loop, coord_table_t *table, int max)
{
    fs->n = 0;
    fs->max = max;
    fs->timer = -1;
    fs->loop = loop;
    fs->table = table;
}

/* When a follower is next owed a reply: its job changed (S_FOLLOW_MIN_MS
   after the last), S_FOLLOW_IDLE_MS without one, or its call's deadline. */
static int64_t
s_follower_due(coord_follow_t *fs, const coord_follower_t *f, int64_t now)
{
    coord_row_t *j = coord_table_find(fs->table, f->job_id);
    bool changed = !j || j->step != f->step || strcmp(j->state, f->state) != 0;
    int64_t due = f->sent_ms + (changed ? S_FOLLOW_MIN_MS : S_FOLLOW_IDLE_MS);
    int64_t left = zdist_rpc_call_remaining_ms(f->call);
    if (left < due - now)
        due = now + left;
    return due;
}

int
coord_follow_status(coord_follow_t *fs, zdist_rpc_call_t *call, coord_row_t *j, bool follow)
{
    follow = follow && !zdist_coord_state_final(j->state);
    if (follow && fs->n >= (size_t)fs->max) {
        zsys_warning("STATUS stream of job %s refused: %zu status streams open, the limit (zdist-coordinator "
                     "--max-followers %d)", j->id, fs->n, fs->max);
        return zdist_rpc_call_fail(call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                                   "%zu status streams open, the limit (zdist-coordinator --max-followers %d); poll "
                                   "STATUS without follow", fs->n, fs->max);
    }
    int rc = coord_table_reply(fs->table, call, &j, 1, true);
    if (rc < 0 || !follow)
        return rc;
    /* The snapshot goes out now marked `more`; coord_follow_update sends the rest. */
    rc = zdist_rpc_call_send_partial(zdist_rpc_call_defer(call));
    if (rc < 0)
        return rc; /* the RPC layer finishes the call with that error */
    coord_follower_t *f = &fs->f[fs->n++];
    f->call = call;
    snprintf(f->job_id, sizeof f->job_id, "%s", j->id);
    snprintf(f->state, sizeof f->state, "%s", j->state);
    f->step = j->step;
    f->sent_ms = zdist_clock_now_ms();
    coord_follow_update(fs, false);
    return 0;
}

void
coord_follow_update(coord_follow_t *fs, bool stopping)
{
    int64_t now = zdist_clock_now_ms();
    for (size_t i = 0; i < fs->n;) {
        coord_follower_t *f = &fs->f[i];
        coord_row_t *j = coord_table_find(fs->table, f->job_id);
        bool expired = zdist_rpc_call_remaining_ms(f->call) <= 0; /* a caller that sent a deadline gave up */
        bool end = stopping || expired || !j || zdist_coord_state_final(j->state);
        if (stopping) {
            zdist_rpc_call_fail(f->call, ZDIST_STATUS_UNAVAILABLE, "coordinator stopping");
        } else if (expired) {
            zdist_rpc_call_fail(f->call, ZDIST_STATUS_DEADLINE_EXCEEDED, "status stream: past its deadline");
        } else if (!j) {
            zdist_rpc_call_fail(f->call, ZDIST_STATUS_NOT_FOUND, "job '%s': no such job", f->job_id);
        } else {
            if (!end && s_follower_due(fs, f, now) > now) {
                i++;
                continue;
            }
            if (coord_table_reply(fs->table, f->call, &j, 1, true) < 0) {
                if (!end) {
                    i++;
                    continue; /* out of memory: try again at the next update */
                }
                zdist_rpc_call_fail(f->call, ZDIST_STATUS_INTERNAL, "out of memory");
            }
        }
        if (end) {
            zdist_rpc_call_finish(&f->call);
            fs->f[i] = fs->f[--fs->n];
            continue;
        }
        zdist_rpc_call_send_partial(f->call); /* a failed send is logged; the next update follows */
        snprintf(f->state, sizeof f->state, "%s", j->state);
        f->step = j->step;
        f->sent_ms = now;
        i++;
    }
    if (fs->timer >= 0) {
        zloop_timer_end(fs->loop, fs->timer);
        fs->timer = -1;
    }
    if (stopping || fs->n == 0)
        return;
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < fs->n; i++) {
        int64_t due = s_follower_due(fs, &fs->f[i], now);
        next = due < next ? due : next;
    }
    fs->timer = zloop_timer(fs->loop, next > now ? (size_t)(next - now) : 1, 1, s_on_follow_timer, fs);
}

static int
s_on_follow_timer(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    coord_follow_t *fs = arg;
    fs->timer = -1; /* a one-shot timer: zloop frees it */
    coord_follow_update(fs, false);
    return 0;
}
