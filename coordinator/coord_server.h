/* coord_server: the zdist-coordinator service (proto/coordinator.proto) and its job table, as a czmq actor. */
#ifndef COORD_SERVER_H
#define COORD_SERVER_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "coord_follow.h"
#include "coord_queue.h"
#include "coord_run.h"


typedef struct {
    char endpoint[256];    /* to bind */
    char state_dir[1024];  /* absolute */
    int num_workers, num_ps;
    char workers[COORD_MAX_WORKERS][256]; /* tcp:// endpoints of worker task i */
    char ps[COORD_MAX_PS][256];
    int64_t closure_timeout_ms;
    int64_t preflight_timeout_ms;
    char http[128]; /* --http ADDR: /metrics, the dashboard ("" none) */
    /* What peers control (0: the default): jobs kept in the table (10000),
       jobs queued or running (64), STATUS streams open (64, at most
       COORD_MAX_FOLLOWERS), and the largest request (32 MiB). */
    int max_jobs;
    int max_queued;
    int max_running; /* parameter_server jobs running at once (4, at most COORD_MAX_RUNNING) */
    int max_followers;
    size_t max_message_bytes;
    size_t max_calls_per_peer; /* calls answered later in flight per peer (0: ZDIST_RPC_MAX_CALLS_PER_PEER) */
    size_t max_connections_per_peer; /* 0: ZDIST_RPC_MAX_CONNECTIONS_PER_PEER */
    bool keep_variables; /* --keep-variables: ended jobs' variables stay on the psds */
} coord_server_config_t;

/* zactor_new (coord_server_actor, &config): copied at start. Sends "READY
   <endpoint>" or "ERROR <message>" on its pipe. Unfinished jobs found in
   the state dir are resumed. Up to max_running parameter_server jobs run
   at once, each with its own runner (their closures share the workers);
   a multi_worker_mirrored job runs alone. "$TERM": every running job
   checkpoints and stops (it resumes at the next start), then the actor ends.
   A parameter_server job that has ended (done, cancelled, failed; after its
   final checkpoint) has its variables dropped from every psd (coord_drop),
   recorded as "variables_dropped" in its state.json; ended jobs not
   recorded so are dropped at the next start. Not with keep_variables. */
void coord_server_actor(zsock_t *pipe, void *args);

#endif
