/* coord_runner_ps: the parameter_server way of running a job (coord_run's ops): closures of N steps
   scheduled to any free worker by libzdist's ClusterCoordinator, the psds checkpointed and restored. */
#ifndef COORD_RUNNER_PS_H
#define COORD_RUNNER_PS_H

#include "coord_run.h"

extern const coord_run_ops_t coord_runner_ps_ops;

#endif
