#!/usr/bin/env bash
# One task of a zdist cluster in a Slurm job step: asks `zdist resolve --slurm`
# which task this rank is (TensorFlow's SlurmClusterResolver's ordering: hosts
# sorted, jobs taken in name order, ports from --port-base) and runs that daemon.
#   srun zdist-task.sh                 # inside an allocation; see zdist.sbatch
# Environment: ZDIST_SLURM_JOBS (chief=1,ps=1,worker=2), ZDIST_PORT_BASE (8888),
# ZDIST_STATE_DIR (the chief's state, shared with the ps tasks), and where the
# programs are: ZDIST_BIN, ZDIST_PSD_BIN, ZDIST_WORKER_BIN, ZDIST_COORDINATOR_BIN
# (default /usr/bin/...). Extra arguments go to the daemon.
set -euo pipefail
jobs=${ZDIST_SLURM_JOBS:-chief=1,ps=1,worker=2}
port_base=${ZDIST_PORT_BASE:-8888}
state=${ZDIST_STATE_DIR:?set ZDIST_STATE_DIR to a directory the chief and the ps tasks share}
zdist=${ZDIST_BIN:-/usr/bin/zdist}
slurm=(--slurm --jobs "$jobs" --port-base "$port_base")
resolved=$("$zdist" resolve "${slurm[@]}")
type=$(printf '%s\n' "$resolved" | sed -n 's/^{"task_type":"\([a-z_]*\)".*/\1/p')
case $type in
chief) exec "${ZDIST_COORDINATOR_BIN:-/usr/bin/zdist-coordinator}" "${slurm[@]}" --state-dir "$state" "$@" ;;
ps) exec "${ZDIST_PSD_BIN:-/usr/bin/zdist-psd}" "${slurm[@]}" --checkpoint-root "$state" "$@" ;;
worker) exec "${ZDIST_WORKER_BIN:-/usr/bin/zdist-worker}" "${slurm[@]}" "$@" ;;
evaluator) exec "${ZDIST_WORKER_BIN:-/usr/bin/zdist-worker}" --evaluator "${slurm[@]}" --state-dir "$state" "$@" ;;
*)
    echo "zdist-task.sh: rank ${SLURM_PROCID:-?} is no task of --jobs $jobs: $resolved" >&2
    exit 2
    ;;
esac
