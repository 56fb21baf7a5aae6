/* coord_runner: one job run to its end on its own thread (a czmq actor): parameter_server jobs by
   coord_runner_ps (libzdist's ClusterCoordinator), multi_worker_mirrored and tpu jobs by coord_runner_ring. */
#ifndef COORD_RUNNER_H
#define COORD_RUNNER_H

#include <czmq.h>
#include <stdint.h>

#include "coord_run.h"

/* zactor_new (coord_runner_actor, config): takes the coord_run_config_t
   (heap, freed by the runner). The runner sends on its pipe, as it goes,
   two-frame messages "STATUS" + a JSON object {state, step, steps, error,
   detail}; its last is "END" + the same, with a final state (done, failed,
   cancelled) or "running" when it was stopped by $TERM after a checkpoint
   (to resume later). Between them, "EVENT" + {kind, text}: a worker or ps
   lost, back, a recovery. It takes "CANCEL" and "$TERM". */
void coord_runner_actor(zsock_t *pipe, void *args);

#endif
