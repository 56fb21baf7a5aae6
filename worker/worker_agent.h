/* worker_agent: the zdist-worker service, a czmq actor serving proto/worker.proto. */
#ifndef WORKER_AGENT_H
#define WORKER_AGENT_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "zdist/wire.h"

#define WORKER_AGENT_MAX_PS 64
#define WORKER_AGENT_ENDPOINT_MAX 256
#define WORKER_AGENT_MAX_DIRS 16
#define WORKER_AGENT_PATH_MAX 1024
/* Jobs one worker holds at once (parameter_server jobs of a coordinator
   running several; a multi_worker_mirrored job holds the worker alone):
   --max-jobs, default WORKER_AGENT_DEFAULT_JOBS, at most WORKER_AGENT_MAX_JOBS.
   The coordinator's --max-running-jobs should not pass it. */
#define WORKER_AGENT_DEFAULT_JOBS 8
#define WORKER_AGENT_MAX_JOBS 64

typedef struct {
    char endpoint[WORKER_AGENT_ENDPOINT_MAX]; /* ZeroMQ endpoint to bind */
    int worker_task;                          /* this worker's index in the worker job */
    bool evaluator;                           /* --evaluator: worker_eval_actor serves instead (worker_eval.h) */
    char state_dir[WORKER_AGENT_PATH_MAX];    /* --evaluator: the coordinator's --state-dir */
    /* The cluster's ps tasks, used when START_JOB names none. */
    int num_ps;
    char ps_endpoints[WORKER_AGENT_MAX_PS][WORKER_AGENT_ENDPOINT_MAX];
    int64_t ps_timeout_ms; /* per psd call attempt, when START_JOB gives none */
    int host_workers;      /* worker tasks of the cluster on this host (BLAS threads are shared out); 0 = 1 */
    int max_jobs;          /* jobs held at once, 1..WORKER_AGENT_MAX_JOBS (0: WORKER_AGENT_DEFAULT_JOBS) */
    zdist_wire_limits_t limits;
    size_t max_calls_per_peer; /* calls answered later in flight per peer (0: ZDIST_RPC_MAX_CALLS_PER_PEER) */
    size_t max_connections_per_peer; /* 0: ZDIST_RPC_MAX_CONNECTIONS_PER_PEER */
    char http[128]; /* --http ADDR: /metrics ("" none) */
    /* Where a job's code and data may come from (the operator's
       --plugin-dir / --data-root, canonical): plugins only from plugin_dirs
       (colon-separated, "" none); dataset files under data_roots when
       confine_data (else anywhere the worker's user may read). */
    char plugin_dirs[WORKER_AGENT_MAX_DIRS * WORKER_AGENT_PATH_MAX];
    bool confine_data;
    int num_data_roots;
    char data_roots[WORKER_AGENT_MAX_DIRS][WORKER_AGENT_PATH_MAX];
} worker_agent_config_t;

/* zactor_new (worker_agent_actor, &config): config is copied at start. The
   actor then sends one string on its pipe: "READY <endpoint>" when it
   serves, or "ERROR <message>" (and ends). "$TERM" stops it after answering
   the requests already received. Requests that touch a job run on a steps
   thread, one at a time: each job's in arrival order; between jobs, the
   higher `priority` first, equal ones round robin (a job's closures
   interleave with another's). */
void worker_agent_actor(zsock_t *pipe, void *args);

#endif
