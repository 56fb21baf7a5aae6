/* coord_events: the coordinator's recent events (a job submitted, running, a worker lost, back, a job ended),
   the newest COORD_MAX_EVENTS, for the dashboard. */
#ifndef COORD_EVENTS_H
#define COORD_EVENTS_H

#include <jansson.h>

#include "zdist/coord_service.h"

#define COORD_MAX_EVENTS 64

typedef struct {
    struct {
        double time; /* seconds since the epoch */
        char job[ZDIST_COORD_ID_MAX];
        char kind[16];
        char *text;
    } ev[COORD_MAX_EVENTS]; /* a ring, oldest at head when full */
    int head, n;
} coord_events_t;

/* Seconds since the epoch, for a time an operator reads. */
double coord_events_now_s(void);
/* Adds an event of job (kind: submitted, running, lost, back, ...), the oldest dropped when full. */
void coord_events_add(coord_events_t *e, const char *job, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* [{time, job, kind, text}], newest first. */
json_t *coord_events_json(const coord_events_t *e);
/* Frees the texts; e is empty after. */
void coord_events_release(coord_events_t *e);

#endif
