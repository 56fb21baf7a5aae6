/* coord_runner: one job run to its end on its own thread (a czmq actor) with the libzdist ClusterCoordinator. */
#ifndef COORD_RUNNER_H
#define COORD_RUNNER_H

#include <czmq.h>
#include <stdint.h>

#include "coord_job.h"

#define COORD_MAX_TASKS 64

typedef struct {
    char job_id[64];
    char job_dir[1024];   /* STATE/jobs/ID (absolute): metrics, loss.svg */
    char ckpt_root[1024]; /* where ckpt-STEP/ go: job_dir, or checkpoint.dir/ID */
    char *base_dir;       /* owned */
    coord_job_t job;      /* owned */
    int num_workers, num_ps;
    char workers[COORD_MAX_TASKS][256];
    char ps[COORD_MAX_TASKS][256];
    int64_t closure_timeout_ms;
} coord_runner_config_t;

/* zactor_new (coord_runner_actor, config): takes the config (heap, freed by
   the runner). The runner sends on its pipe, as it goes, two-frame messages
   "STATUS" + a JSON object {state, step, steps, error, detail}; its last
   is "END" + the same, with a final state (done, failed, cancelled) or
   "running" when it was stopped by $TERM after a checkpoint (to resume
   later). Between them, "EVENT" + {kind, text}: a worker or ps lost, back,
   a recovery. It takes "CANCEL"
   and "$TERM". */
void coord_runner_actor(zsock_t *pipe, void *args);
void coord_runner_config_destroy(coord_runner_config_t **self_p);

#endif
