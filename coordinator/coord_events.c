/* coord_events: the recent events the dashboard shows, in a ring. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coord_events.h"

double
coord_events_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void
coord_events_add(coord_events_t *e, const char *job, const char *kind, const char *fmt, ...)
{
    int at = (e->head + e->n) % COORD_MAX_EVENTS;
    if (e->n == COORD_MAX_EVENTS) {
        at = e->head;
        e->head = (e->head + 1) % COORD_MAX_EVENTS;
    } else {
        e->n++;
    }
    free(e->ev[at].text);
    e->ev[at].time = coord_events_now_s();
    snprintf(e->ev[at].job, sizeof e->ev[at].job, "%s", job);
    snprintf(e->ev[at].kind, sizeof e->ev[at].kind, "%s", kind);
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&e->ev[at].text, fmt, ap) < 0)
        e->ev[at].text = NULL;
    va_end(ap);
}

json_t *
coord_events_json(const coord_events_t *e)
{
    json_t *events = json_array();
    for (int k = e->n - 1; k >= 0; k--) { /* newest first */
        int at = (e->head + k) % COORD_MAX_EVENTS;
        json_array_append_new(events, json_pack("{s:f, s:s, s:s, s:s}", "time", e->ev[at].time, "job",
                                                e->ev[at].job, "kind", e->ev[at].kind, "text",
                                                e->ev[at].text ? e->ev[at].text : ""));
    }
    return events;
}

void
coord_events_release(coord_events_t *e)
{
    for (int i = 0; i < COORD_MAX_EVENTS; i++) {
        free(e->ev[i].text);
        e->ev[i].text = NULL;
    }
    e->head = e->n = 0;
}
