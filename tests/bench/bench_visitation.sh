#!/usr/bin/env bash
# bench_visitation: what dataset.visitation "exactly_once" costs under parameter_server (issue 31), on
# real daemons (2 ps, 2 workers, a local cluster on free ports): examples/s of the same job with the
# option off (at_least_once, TensorFlow's: each worker repeats its own shard) and on (each worker holds
# the whole dataset and reads the batches its closures' step numbers name), the two run alternately
# REPEAT times, medians shown. Two jobs:
#   mlp   the Fashion-MNIST 784-256-128-10 mlp of deploy/examples/fmnist-mlp-ps.json (batch 128, 4 steps
#         a closure; synthetic data of that shape without FMNIST_DIR), a step of real work;
#   embed a one-row-per-id embedding on libsvm ids (test_visitation.sh's counting model, batch 4, 4 steps
#         a closure, 10 x the steps): a step of almost nothing, where a closure's jump to other batches
#         shows most.
# examples/s is the job's own training rate: examples between the first and the last line of its
# metrics.jsonl over their time (START_JOB, variable creation and the final checkpoint left out).
# Printed, never asserted.
#
# usage: bench_visitation.sh [--quick] [--steps N] [--repeat N]
#   defaults: 1500 steps, 3 repeats; --quick: 40 steps, once (ctest bench.visitation.quick)
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../integration/lib.sh
source "$HERE/../integration/lib.sh"
# shellcheck source=../integration/coord_lib.sh
source "$HERE/../integration/coord_lib.sh"

STEPS=1500
REPEAT=3
while (($#)); do
    case $1 in
    --quick) STEPS=40 REPEAT=1 ;;
    --steps) STEPS=${2:?--steps N}; shift ;;
    --repeat) REPEAT=${2:?--repeat N}; shift ;;
    *) echo "bench_visitation: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done
zd_init bench-visitation
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
FMNIST=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
OUT=$ZD_TMP/out
RESULTS=$ZD_TMP/results.tsv
: >"$RESULTS"

# make_jobs: mlp-V.json and embed-V.json for V in at_least_once, exactly_once.
make_jobs() {
    python3 - "$HERE/../../deploy/examples/fmnist-mlp-ps.json" "$ZD_TMP" "$STEPS" "$FMNIST" <<'PY'
import json, os, sys
src, tmp, steps, fmnist = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
mlp = json.load(open(src))
mlp.pop("epochs"); mlp.pop("comment", None)
ds = mlp["dataset"]
if not all(os.path.exists(ds[s][k]) for s in ("train", "test") for k in ("images", "labels")):
    mlp["dataset"] = ds = {"format": "synthetic", "synthetic": {"n": 60000, "dim": 784, "classes": 10, "seed": 3},
                           "global_batch_size": 128, "shuffle_seed": 42}
n = 200001
with open(tmp + "/ids.svm", "w") as f:
    for i in range(1, n + 1):
        f.write("1 %d:0.00390625\n" % i)
embed = {"name": "embed", "strategy": {"type": "parameter_server"},
         "model": {"name": "sequential", "input_shape": [n + 1],
                   "layers": [{"embedding": {"input_dim": n + 1, "output_dim": 1, "combiner": "sum"}}],
                   "loss": "mean_squared_error"},
         "optimizer": {"type": "sgd", "learning_rate": 512},
         "dataset": {"format": "libsvm", "dim": n + 1, "train": {"path": tmp + "/ids.svm"},
                     "global_batch_size": 4, "shuffle": False, "shard_policy": "data"},
         "steps_per_execution": 4, "seed": 11}
for kind, j in (("mlp", mlp), ("embed", embed)):
    j["steps"] = steps if kind == "mlp" else 10 * steps  # an embed step is ~1/10 of an mlp one
    j["checkpoint"] = {"every_steps": steps * 10, "keep": 1}
    j["evaluation"] = {"at_end": False}
    for v in ("at_least_once", "exactly_once"):
        j["dataset"]["visitation"] = v
        json.dump(j, open("%s/%s-%s.json" % (tmp, kind, v), "w"))
PY
}

# run KIND VISITATION: one submission; a row "KIND VISITATION EXAMPLES_PER_SEC".
run() {
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/$1-$2.json" --cluster "$CLUSTER" --json
    zd_json_check "$OUT" "j['state'] == 'done' and j['step'] == $([[ $1 == mlp ]] && echo "$STEPS" || echo $((10 * STEPS)))"
    local job
    job=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
    python3 - "$ZD_TMP/state/jobs/$job/metrics.jsonl" "$1" "$2" >>"$RESULTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
first, last = rows[0], rows[-1]
# the rate over each interval, weighted by its length: examples between the first line and the last
ex = sum(r["examples_per_sec"] * (r["time"] - p["time"]) for p, r in zip(rows, rows[1:]))
print("%s\t%s\t%.1f" % (sys.argv[2], sys.argv[3], ex / (last["time"] - first["time"])))
PY
    zd_log "$1 $2: $(tail -1 "$RESULTS" | cut -f3) examples/s"
}

make_jobs
coord_cluster 2 2
coord_up 2 2
for ((r = 0; r < REPEAT; r++)); do
    for kind in mlp embed; do
        run "$kind" at_least_once
        run "$kind" exactly_once
    done
done
python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
print("\njob    visitation      examples/s (median of %d)   vs at_least_once" % (len(rows) // 4))
for kind in ("mlp", "embed"):
    base = None
    for v in ("at_least_once", "exactly_once"):
        vals = [float(r[2]) for r in rows if r[0] == kind and r[1] == v]
        m = statistics.median(vals)
        base = base or m
        print("%-6s %-15s %10.0f   (%s)   %.3fx" % (kind, v, m, ", ".join("%.0f" % x for x in vals), m / base))
PY
