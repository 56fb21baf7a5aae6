#!/usr/bin/env bash
# zdist reshard on ~1 GiB of tables (issue 31's goal: a move of 1 GiB stalls training <= 10 s). Not in
# CI: a gigabyte of memory per psd, and of disk for the checkpoints.
#
#     bash tests/bench/bench_reshard.sh [BUILD_DIR] [--rows R] [--dim D] [--workers W]
#
# A local cluster of 2 ps, W workers (default 2) and a chief trains a parameter_server job whose one
# fixed embedding table is R x D float32 (defaults 4194304 x 64: 1 GiB; sgd, so no optimizer slots),
# split by the default partitioner over the ps tasks, read and updated by row from libsvm examples
# of 8 ids. Once it trains, `zdist reshard JOB --ps 1` (2 -> 1: drain) and then `--ps 2` (1 -> 2).
# Reports for each move: the command's wall time, the chief's breakdown (the checkpoint at the step
# boundary; the workers restarted and the checkpoint restored on the new layout), the examples/s
# in the 10 s before it and over the move's wall time, and the longest time the job's step did not
# advance (its status polled every 100 ms): the stall. BUILD_DIR defaults to build-rel (Release).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=""
rows=4194304
dim=64
workers=2
while [[ $# -gt 0 ]]; do
    case $1 in
    --rows) rows=$2; shift 2 ;;
    --dim) dim=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) build=$1; shift ;;
    esac
done
if [[ -z $build ]]; then
    for b in "$root/build-rel" "$root/build"; do [[ -x $b/cli/zdist ]] && { build=$b; break; }; done
fi
[[ -n $build && -x $build/cli/zdist ]] || { echo "bench_reshard.sh: build first (cmake --build build-rel)" >&2; exit 2; }
export ZDIST_BIN=$build/cli/zdist ZDIST_PSD_BIN=$build/psd/zdist-psd ZDIST_WORKER_BIN=$build/worker/zdist-worker
export ZDIST_COORDINATOR_BIN=$build/coordinator/zdist-coordinator
source "$root/tests/integration/lib.sh"
source "$root/tests/integration/coord_lib.sh"
zd_init bench-reshard
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(awk '/MemAvailable/ {printf "%.1f GiB available", $2 / 1048576}' /proc/meminfo)"
echo "build: $build; table $rows x $dim float32 = $(python3 -c "print('%.2f GiB' % ($rows * $dim * 4 / 2**30))"); $workers workers, 2 ps"

python3 - "$ZD_TMP/train.svm" "$rows" <<'PY'
import random, sys
rng = random.Random(1)
rows = int(sys.argv[2])
with open(sys.argv[1], "w") as f:
    for _ in range(20000):
        ids = sorted(set(rng.randrange(rows) for _ in range(8)))
        f.write("%d %s\n" % (rng.random() < 0.5, " ".join("%d:1" % i for i in ids)))
PY
cat >"$ZD_TMP/job.json" <<JSON
{"name": "reshard-bench", "strategy": {"type": "parameter_server"},
 "model": {"name": "sequential", "input_shape": [$rows],
           "layers": [{"embedding": {"input_dim": $rows, "output_dim": $dim, "combiner": "sum"}},
                      {"dense": {"units": 1}}],
           "loss": "binary_crossentropy"},
 "optimizer": {"type": "sgd", "learning_rate": 0.01},
 "dataset": {"format": "libsvm", "dim": $rows, "train": {"path": "$ZD_TMP/train.svm"}, "global_batch_size": 256,
             "shard_policy": "data"},
 "steps": 100000000, "steps_per_execution": 4, "seed": 1}
JSON
coord_cluster 2 "$workers"
coord_up 2 "$workers"
"$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach >"$ZD_TMP/job.id"
JOB=$(cat "$ZD_TMP/job.id")
t0=$SECONDS
coord_wait_json "$JOB" "j['step'] >= 50 or j['state'] != 'running'" 600
zd_json_check "$ZD_TMP/st.json" 'j["state"] == "running"'
echo "job $JOB trains after $((SECONDS - t0)) s (the table created on the psds)"

# The job's step every 100 ms, "TIME STEP" lines, until this script stops it.
(
    while :; do
        s=$("$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json 2>/dev/null |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])' 2>/dev/null) &&
            echo "$(date +%s.%N) $s"
        sleep 0.1
    done
) >"$ZD_TMP/steps.txt" &
POLL=$!
stop_poll() { kill "$POLL" 2>/dev/null || true; }
ZD_AFTER_STOP=stop_poll

# wait_seconds S: S seconds of training to measure (a benchmark's pause, not a wait for a condition).
wait_seconds() { sleep "$1"; }
move() {
    wait_seconds 10
    local a b
    a=$(date +%s.%N)
    "$ZDIST_BIN" reshard "$JOB" --ps "$1" --cluster "$CLUSTER" --timeout 600 >"$ZD_TMP/move.txt"
    b=$(date +%s.%N)
    python3 - "$ZD_TMP/steps.txt" "$a" "$b" "$(cat "$ZD_TMP/move.txt")" 256 <<'PY'
import sys
pts = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
a, b, line, batch = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
def step_at(t):
    before = [s for (u, s) in pts if u <= t]
    return before[-1] if before else pts[0][1]
pre = (step_at(a) - step_at(a - 10)) * batch / 10
during = (step_at(b) - step_at(a)) * batch / (b - a)
stall, last_t, last_s = 0.0, None, None
for (u, s) in pts:
    if u < a - 1 or u > b + 5:
        continue
    if last_s is None or s != last_s:
        last_t, last_s = u, s
    stall = max(stall, u - last_t)
print(line.split(": ", 1)[1] if ": " in line else line)
print("  command %.2f s; examples/s: %.0f in the 10 s before, %.0f over the move; longest stall of the step: %.2f s"
      % (b - a, pre, during, stall))
PY
}
move 1
move 2
wait_seconds 5
for i in 0 1; do
    pid=${ZD_PID[ps$i]}
    echo "ps$i: resident $(awk '/VmRSS/ {printf "%.2f GiB", $2 / 1048576}' "/proc/$pid/status"), peak $(awk '/VmHWM/ {printf "%.2f GiB", $2 / 1048576}' "/proc/$pid/status")"
done
stop_poll
"$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER" >/dev/null
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
