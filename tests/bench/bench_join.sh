#!/usr/bin/env bash
# bench_join: elastic workers (issue 31) on real daemons, a local cluster on free ports (chief, 1 psd,
# 1 worker from the cluster file), in one run:
#
#  (a) how soon a joined worker gets closures: JOINS times, a worker is started with
#      `zdist-worker --join CHIEF --bind ADDR` while a parameter_server job runs, and the time from its
#      start (the exec) to the first poll of `zdist status --json` that shows a closure of it done
#      (polled every 20 ms) is taken; it then leaves on SIGTERM before the next one starts. Prints each
#      time and their p50/p99 (the issue's goal: closures within 2 s);
#  (b) the examples/s trace of a job when a worker joins mid-job: the Fashion-MNIST mlp
#      (deploy/examples/fmnist-mlp-ps.json's model and batch, no checkpoints) on worker:0 alone for
#      BEFORE seconds, then a worker joins and the trace goes on for AFTER seconds. examples/s per
#      second is the job's step advance over that second times the global batch (status polled every
#      0.25 s). Prints the trace, marks the join, and the mean before and over the last 5 s after (the
#      goal: examples/s up within 5 s of the join).
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
status() { "$ZDIST_BIN" status "$1" --cluster "$CLUSTER" --json 2>/dev/null; }

coord_cluster 1 1
coord_up 1 1
echo "cluster: chief, 1 psd, worker:0 (Release binaries from $(dirname "$(dirname "$ZDIST_WORKER_BIN")"))"

# ---- (a) start to first closure, JOINS times ----
coord_softmax_job "$ZD_TMP/syn.json" 100000000 ', "checkpoint": {"every_steps": 100000000}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/syn.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 200 60
TIMES=()
for ((k = 1; k <= JOINS; k++)); do
    addr="127.0.0.1:$(zd_free_port)"
    t0=$(now)
    zd_start "j$k" "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://$addr"
    until status "$JOB" | python3 -c 'import json,sys; j=json.load(sys.stdin); k=int(sys.argv[1]); sys.exit(0 if len(j["workers"]) > k and j["workers"][k]["closures_done"] > 0 else 1)' "$k" 2>/dev/null; do
        zd_exited "j$k" && zd_fail "joined worker $k exited: $(cat "$ZD_TMP/j$k.log")"
        sleep 0.02
    done
    t1=$(now)
    TIMES+=("$(python3 -c "print('%.3f' % ($t1 - $t0))")")
    printf 'join %2d (worker:%d): first closure done %s s after its start\n' "$k" "$k" "${TIMES[-1]}"
    zd_stop "j$k" TERM
    coord_wait_json "$JOB" "j['workers'][$k]['state'] == 'left'" 60
done
python3 - "${TIMES[@]}" <<'PY'
import sys
t = sorted(float(x) for x in sys.argv[1:])
def pct(p):
    i = min(len(t) - 1, max(0, int(round(p / 100 * len(t) + 0.5)) - 1))
    return t[i]
print("start to first closure over %d joins: p50 %.3f s, p99 %.3f s, min %.3f s, max %.3f s"
      % (len(t), pct(50), pct(99), t[0], t[-1]))
PY
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
 "steps": 100000000, "steps_per_execution": 4, "checkpoint": {"every_steps": 100000000}, "seed": 1}
JSON
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/mlp.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 100 120
echo "(b) the mlp on $WHAT, global batch $BATCH: examples/s per second (step advance x batch)"
# trace SECONDS LABEL: one line per second; the per-second figures appended to $ZD_TMP/trace.LABEL
trace() {
    local end prev_t prev_s t s
    end=$(python3 -c "print($(now) + $1)")
    prev_t=$(now)
    prev_s=$(status "$JOB" | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')
    while python3 -c "import sys; sys.exit(0 if $(now) < $end else 1)"; do
        sleep 0.25
        t=$(now)
        python3 -c "import sys; sys.exit(0 if $t - $prev_t >= 1.0 else 1)" || continue
        s=$(status "$JOB" | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')
        python3 -c "r = ($s - $prev_s) * $BATCH / ($t - $prev_t); print('%8.1f s  %s  %9.0f examples/s' % ($t - $T0, '$2', r)); open('$ZD_TMP/trace.$2', 'a').write('%f %f\n' % ($t - $T0, r))"
        prev_t=$t prev_s=$s
    done
}
T0=$(python3 -c "print($(now) + $BEFORE)") # time 0: the join
trace "$BEFORE" before
J_ADDR="127.0.0.1:$(zd_free_port)"
zd_start joiner "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://$J_ADDR"
echo "     0.0 s  ---- a worker joins (zdist-worker --join) ----"
trace "$AFTER" after
python3 - "$ZD_TMP/trace.before" "$ZD_TMP/trace.after" <<'PY'
import sys
def rows(p):
    return [tuple(map(float, l.split())) for l in open(p)]
b, a = rows(sys.argv[1]), rows(sys.argv[2])
mb = sum(r for _, r in b) / len(b)
last = [r for t, r in a if t >= a[-1][0] - 5]
ma = sum(last) / len(last)
first = next((t for t, r in a if r > 1.1 * mb), None)
print("examples/s: %.0f before the join (mean of %d s), %.0f over the last 5 s after it (%.2fx); first second above "
      "1.1x the mean before: %s" % (mb, len(b), ma, ma / mb, "%.1f s after the join" % first if first is not None else "none"))
PY
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
coord_wait_state "$JOB" cancelled 60
