/* worker_sched: which job's request a worker's steps thread runs next, when several jobs share it. */
#ifndef WORKER_SCHED_H
#define WORKER_SCHED_H

#include <stddef.h>
#include <stdint.h>

/* A queued request, as the policy sees it. */
typedef struct {
    const char *job;      /* the job it names */
    int priority;         /* the job's priority */
    uint64_t last_served; /* when a request of the job last ran (0: never, or a job not held yet) */
} worker_sched_item_t;

/* The index (< n) of the request to run next among q[0..n), given in
   arrival order: each job's requests in that order; between jobs, the
   higher priority first, then the one served longest ago (round robin;
   a job never served goes first). n must be >= 1. */
size_t worker_sched_pick(const worker_sched_item_t *q, size_t n);

#endif
