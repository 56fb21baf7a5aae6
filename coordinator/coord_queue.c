/* coord_queue: the next queued job to start, and why the others wait. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord_queue.h"

/* The queued job to start next: the highest priority, then the oldest. */
static coord_row_t *
s_next_queued(coord_table_t *t)
{
    coord_row_t *next = NULL;
    for (size_t i = 0; i < t->n; i++) {
        coord_row_t *j = t->rows[i];
        if (strcmp(j->state, "queued") != 0)
            continue;
        if (!next || j->priority > next->priority || (j->priority == next->priority && j->seq < next->seq))
            next = j;
    }
    return next;
}

/* Why `next` cannot start now ("" when it can). */
static void
s_why_waiting(coord_row_t *const *running, int nrunning, int max_running, const coord_row_t *next, char *why,
              size_t size)
{
    why[0] = 0;
    char ids[COORD_MAX_RUNNING * (ZDIST_COORD_ID_MAX + 2)] = "";
    for (int i = 0; i < nrunning; i++) {
        size_t len = strlen(ids);
        snprintf(ids + len, sizeof ids - len, "%s%s", i ? ", " : "", running[i]->id);
    }
    for (int i = 0; i < nrunning; i++)
        if (running[i]->mwm) {
            snprintf(why, size, "waiting for job %s to end (multi_worker_mirrored: it owns the workers' ring and "
                     "runs alone)", running[i]->id);
            return;
        }
    if (next->mwm && nrunning > 0)
        snprintf(why, size, "waiting for job%s %s to end (a multi_worker_mirrored job owns the workers' ring and "
                 "runs alone)", nrunning > 1 ? "s" : "", ids);
    else if (nrunning >= max_running)
        snprintf(why, size, "waiting for one of the %d running jobs (%s) to end: the limit (zdist-coordinator "
                 "--max-running-jobs %d)", nrunning, ids, max_running);
}

/* A queued job's detail says why it waits ({"waiting": why}). */
static void
s_set_waiting(coord_row_t *j, const char *why)
{
    json_t *d = json_pack("{s:s}", "waiting", why);
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (text) {
        free(j->detail);
        j->detail = text;
    }
}

coord_row_t *
coord_queue_next(coord_table_t *t, coord_row_t *const *running, int nrunning, int max_running)
{
    coord_row_t *next = s_next_queued(t);
    if (!next)
        return NULL;
    char why[1024];
    s_why_waiting(running, nrunning, max_running, next, why, sizeof why);
    if (!why[0])
        return next;
    /* Each queued job: what it waits for, and the job before it. */
    for (size_t i = 0; i < t->n; i++) {
        coord_row_t *j = t->rows[i];
        if (strcmp(j->state, "queued") != 0)
            continue;
        char mine[1024], line[1200];
        s_why_waiting(running, nrunning, max_running, j, mine, sizeof mine);
        if (j == next)
            snprintf(line, sizeof line, "%s", mine);
        else
            snprintf(line, sizeof line, "%s%sjob %s (priority %d) starts before it", mine, mine[0] ? "; " : "",
                     next->id, next->priority);
        s_set_waiting(j, line);
    }
    return NULL;
}
