#!/usr/bin/env bash
# bench_join: elastic workers (issue 31) on real daemons, a local cluster on free ports (chief, 1 psd,
# 1 worker from the cluster file), in one run:
#
#  (a) how soon a joined worker gets closures: JOINS times, a worker is started with
#      `zdist-worker --join CHIEF --bind ADDR` while a parameter_server job runs, and the time from its
#      start (the exec) to the first poll of `zdist status --json` that shows a closure of it done
#      (polled every 20 ms) is taken, and when its log says it joined; it then leaves on SIGTERM before
#      the next one starts. Prints each time and their p50/p99 (the issue's goal: closures within 2 s);
#  (b) the examples/s trace of a job when a worker joins mid-job: the Fashion-MNIST mlp
#      (deploy/examples/fmnist-mlp-ps.json's model and batch, no checkpoints) on worker:0 alone for
#      BEFORE seconds, then a worker joins and the trace goes on for AFTER seconds. examples/s per
#      second is the job's step advance over that second (from the job's metrics.jsonl, a line every 8
#      steps with the chief's time, interpolated) times the global batch. Prints the trace, marks the join, and the mean
#      before and over the last 5 s after (the goal: examples/s up within 5 s of the join).
#
# Timings are printed, never asserted. Build Release first (cmake -B build-release -DCMAKE_BUILD_TYPE=Release).
# usage: bench_join.sh [--joins N] [--before S] [--after S]   (defaults 10, 10, 15)
# Binaries from ZDIST_BIN, ZDIST_PSD_BIN, ZDIST_WORKER_BIN, ZDIST_COORDINATOR_BIN, default the ones in
# ../../build-release. FMNIST_DIR (default /usr/share/datasets/fashion-mnist); without it (b) runs on
# synthetic data of the same shape and says so.
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../integration/lib.sh
source "$HERE/../integration/lib.sh"
# shellcheck source=../integration/coord_lib.sh
source "$HERE/../integration/coord_lib.sh"

JOINS=10
BEFORE=10
AFTER=15
while (($#)); do
    case $1 in
    --joins) JOINS=${2:?--joins N}; shift ;;
    --before) BEFORE=${2:?--before S}; shift ;;
    --after) AFTER=${2:?--after S}; shift ;;
    *) echo "usage: bench_join.sh [--joins N] [--before S] [--after S]" >&2; exit 2 ;;
    esac
    shift
done
BUILD=$(cd "$HERE/../.." && pwd)/build-release
: "${ZDIST_BIN:=$BUILD/cli/zdist}" "${ZDIST_PSD_BIN:=$BUILD/psd/zdist-psd}"
: "${ZDIST_WORKER_BIN:=$BUILD/worker/zdist-worker}" "${ZDIST_COORDINATOR_BIN:=$BUILD/coordinator/zdist-coordinator}"
export ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
zd_init bench_join
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
unset TF_CONFIG ZDIST_KEYS_DIR ZDIST_HTTP
FMNIST=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
OUT=$ZD_TMP/out
now() { date +%s.%N; }

coord_cluster 1 1
coord_up 1 1
echo "cluster: chief, 1 psd, worker:0 (Release binaries from $(dirname "$(dirname "$ZDIST_WORKER_BIN")"))"

# ---- (a) start to first closure, JOINS times ----
coord_softmax_job "$ZD_TMP/syn.json" 100000000 ', "checkpoint": {"every_steps": 100000000}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/syn.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 200 60
# first_closure K LOG T0: polls (every 20 ms) the worker's log for its join and the job's status for its
# first closure done; prints "JOINED_S CLOSURE_S", both from T0 (the worker's start).
first_closure() {
    python3 - "$ZDIST_BIN" "$CLUSTER" "$JOB" "$1" "$2" "$3" <<'PY2'
import json, subprocess, sys, time
zdist, cluster, job, k, log, t0 = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], float(sys.argv[6])
joined = None
while True:
    if joined is None and "joined the cluster through the chief" in open(log).read():
        joined = time.time() - t0
    r = subprocess.run([zdist, "status", job, "--cluster", cluster, "--json"], capture_output=True, text=True)
    try:
        w = json.loads(r.stdout)["workers"]
        if len(w) > k and w[k]["closures_done"] > 0:
            break
    except (ValueError, KeyError):
        pass
    time.sleep(0.02)
done = time.time() - t0
print("%.3f %.3f" % (joined if joined is not None else done, done))
PY2
}
TIMES=()
for ((k = 1; k <= JOINS; k++)); do
    addr="127.0.0.1:$(zd_free_port)"
    t0=$(now)
    zd_start "j$k" "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://$addr"
    read -r joined_s closure_s < <(first_closure "$k" "$ZD_TMP/j$k.log" "$t0")
    TIMES+=("$closure_s")
    printf 'join %2d (worker:%d): joined %s s, first closure done %s s after its start\n' "$k" "$k" "$joined_s" "$closure_s"
    zd_stop "j$k" TERM
    coord_wait_json "$JOB" "j['workers'][$k]['state'] == 'left'" 60
done
python3 - "${TIMES[@]}" <<'PY2'
import sys
t = sorted(float(x) for x in sys.argv[1:])
def pct(p):  # nearest rank
    return t[min(len(t) - 1, max(0, -(-p * len(t) // 100) - 1))]
print("start to first closure over %d joins: p50 %.3f s, p99 %.3f s, min %.3f s, max %.3f s"
      % (len(t), pct(50), pct(99), t[0], t[-1]))
PY2
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
coord_wait_state "$JOB" cancelled 60

# ---- (b) examples/s per second, a worker joining mid-job ----
if [[ -r $FMNIST/train-images-idx3-ubyte.gz ]]; then
    DATA="\"format\": \"idx\", \"train\": {\"images\": \"$FMNIST/train-images-idx3-ubyte.gz\", \"labels\": \"$FMNIST/train-labels-idx1-ubyte.gz\"}, \"test\": {\"images\": \"$FMNIST/t10k-images-idx3-ubyte.gz\", \"labels\": \"$FMNIST/t10k-labels-idx1-ubyte.gz\"},"
    WHAT="Fashion-MNIST"
else
    DATA='"format": "synthetic", "synthetic": {"n": 60000, "test_n": 1000, "dim": 784, "classes": 10, "seed": 7},'
    WHAT="synthetic data of Fashion-MNIST's shape (no $FMNIST)"
fi
BATCH=128
cat >"$ZD_TMP/mlp.json" <<JSON
{"name": "mlp-join", "strategy": {"type": "parameter_server"},
 "model": {"name": "mlp", "params": {"hidden": [256, 128]}}, "optimizer": {"type": "adam", "learning_rate": 0.001},
 "dataset": {$DATA "global_batch_size": $BATCH, "shuffle_seed": 42, "shard_policy": "data"},
 "steps": 100000000, "steps_per_execution": 4, "log_every": 8, "checkpoint": {"every_steps": 100000000},
 "seed": 1}
JSON
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/mlp.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 100 120
echo "(b) the mlp on $WHAT, global batch $BATCH: examples/s per second (step advance x batch)"
# The trace comes from the job's metrics.jsonl: a line every 8 steps with its step and the chief's
# CLOCK_MONOTONIC time, which python's time.monotonic() reads too (the join's time below).
sleep "$BEFORE"
T_JOIN=$(python3 -c 'import time; print(time.monotonic())')
J_ADDR="127.0.0.1:$(zd_free_port)"
zd_start joiner "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://$J_ADDR"
sleep "$AFTER"
python3 - "$ZD_TMP/state/jobs/$JOB/metrics.jsonl" "$ZD_TMP/samples" <<'PY2'
import json, sys
with open(sys.argv[2], "w") as out:
    for l in open(sys.argv[1]):
        j = json.loads(l)
        if "loss" in j:
            out.write("%.3f %d\n" % (j["time"], j["step"]))
PY2
python3 - "$ZD_TMP/samples" "$T_JOIN" "$BATCH" "$BEFORE" <<'PY2'
import math, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
tj, batch = float(sys.argv[2]), int(sys.argv[3])
def step_at(t):  # linear between samples
    for (t0, s0), (t1, s1) in zip(rows, rows[1:]):
        if t0 <= t <= t1:
            return s0 + (s1 - s0) * (t - t0) / (t1 - t0) if t1 > t0 else s1
    return None
lo, hi = max(math.ceil(rows[0][0] - tj), -int(sys.argv[4])), math.floor(rows[-1][0] - tj)
before, after = [], []
for sec in range(lo, hi):
    a, b = step_at(tj + sec), step_at(tj + sec + 1)
    if a is None or b is None:
        continue
    r = (b - a) * batch
    (before if sec < 0 else after).append((sec, r))
    if sec == 0:
        print("   ---- a worker joins (zdist-worker --join) at 0 s ----")
    print("  %+4d..%+3d s  %9.0f examples/s" % (sec, sec + 1, r))
mb = sum(r for _, r in before) / len(before)
last = [r for s, r in after if s >= after[-1][0] - 4]
ma = sum(last) / len(last)
first = next((s + 1 for s, r in after if r > 1.1 * mb), None)
print("examples/s: %.0f before the join (mean of %d s), %.0f over the last 5 s (%.2fx); first second above 1.1x the "
      "mean before ends %s" % (mb, len(before), ma, ma / mb, "%d s after the join" % first if first else "never"))
PY2
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
coord_wait_state "$JOB" cancelled 60
