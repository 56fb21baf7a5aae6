/* coord_runner_ring: the multi_worker_mirrored (and tpu) way of running a job (coord_run's ops): the workers
   joined in a ring and stepped in lockstep, checkpointed from rank 0, the ring re-formed when a worker is
   lost or comes back. */
#ifndef COORD_RUNNER_RING_H
#define COORD_RUNNER_RING_H

#include "coord_run.h"

extern const coord_run_ops_t coord_runner_ring_ops;

#endif
