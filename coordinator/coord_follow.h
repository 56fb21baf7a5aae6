/* coord_follow: STATUS streams (STATUS with follow) — each follower is sent its job's news as it changes, at
   least every few seconds, and the last reply when the job ends. The server's thread only. */
#ifndef COORD_FOLLOW_H
#define COORD_FOLLOW_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "coord_table.h"
#include "zdist/rpc.h"

#define COORD_MAX_FOLLOWERS 1024

/* A STATUS stream: the deferred call and what it was last sent. A client that
   goes away without a word stays here until its job ends or its call's
   deadline passes (ROUTER drops what it cannot route), hence the limit. */
typedef struct {
    zdist_rpc_call_t *call;
    char job_id[ZDIST_COORD_ID_MAX];
    char state[ZDIST_COORD_STATE_MAX];
    int64_t step;
    int64_t sent_ms;
} coord_follower_t;

typedef struct {
    coord_follower_t f[COORD_MAX_FOLLOWERS];
    size_t n;
    int max;          /* streams open at once (--max-followers) */
    int timer;        /* zloop timer of the next update due; -1 none */
    zloop_t *loop;    /* borrowed */
    coord_table_t *table; /* borrowed: the jobs followed */
} coord_follow_t;

/* No followers yet; at most max at once. */
void coord_follow_init(coord_follow_t *fs, zloop_t *loop, coord_table_t *table, int max);
/* Answers a STATUS of job j (a handler's return): a snapshot, and with
   follow (while the job has not ended) a stream that goes on; a stream past
   the limit is refused RESOURCE_EXHAUSTED. */
int coord_follow_status(coord_follow_t *fs, zdist_rpc_call_t *call, coord_row_t *j, bool follow);
/* Sends each follower its job's news: an update when the step or state
   changed, the last reply when the job ended; with stopping, ends every
   stream with UNAVAILABLE so clients subscribe again. Then sets a timer for
   the next update due. Runs while the RPC server exists. */
void coord_follow_update(coord_follow_t *fs, bool stopping);

#endif
