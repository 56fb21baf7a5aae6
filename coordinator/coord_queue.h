/* coord_queue: which queued job starts next — the highest priority, then the oldest; up to max_running at
   once, a multi_worker_mirrored (ring) job alone — and, for those that wait, what they wait for. */
#ifndef COORD_QUEUE_H
#define COORD_QUEUE_H

#include "coord_table.h"

/* Jobs running at once, at most (--max-running-jobs): what a worker may be
   told to hold (zdist-worker --max-jobs, 1..64, default 8). Each running
   parameter_server job is a session on every worker, so the operator keeps
   --max-running-jobs at most the workers' --max-jobs. */
#define COORD_MAX_RUNNING 64

/* The queued job to start now beside the running ones, or NULL: none is
   queued, or the next one must wait, and then every queued job's detail
   says what it waits for ({"waiting": why}). */
coord_row_t *coord_queue_next(coord_table_t *t, coord_row_t *const *running, int nrunning, int max_running);

#endif
