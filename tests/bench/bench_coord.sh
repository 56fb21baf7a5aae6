#!/usr/bin/env bash
# bench_coord: zdist-coordinator throughput on real daemons (local cluster on free ports), in one run:
#
#  (a) dispatch overhead: closures per second of a near-empty step through the
#      libzdist ClusterCoordinator (bench_closures: linear_regression, 1-d
#      synthetic data, batch 1, one step per closure) with 1 and 2 workers and
#      1 or 2 RUN_STEPS messages in flight per worker, each carrying up to 32
#      queued closures (the coordinator's default), and with one closure per
#      message (per_dispatch 1, the unbatched baseline), against `zdist run`
#      steps/s of the same job on one device (the cost of the step itself);
#  (b) examples/s of the Fashion-MNIST mlp (deploy/examples/fmnist-mlp-ps.json,
#      STEPS steps, no intermediate checkpoint, no evaluation) submitted to
#      zdist-coordinator with 2 ps and 1, then 2 workers, and the same model
#      under multi_worker_mirrored (deploy/examples/fmnist-mlp-mwm.json) on the
#      2 workers, against `zdist run` of deploy/examples/fmnist-mlp-run.json
#      (one_device, same model and batch) for the same number of steps.
#
# examples/s under the coordinator is the training rate from the job's
# metrics.jsonl (examples over the time between its first and last line:
# START_JOB, variable creation and the final checkpoint are left out, as
# `zdist run` leaves out loading and evaluation); the wall column is the whole
# `zdist submit` / `zdist run`. Timings are printed, never asserted.
#
# Each case runs REPEAT times (the machine is shared: other processes add
# noise); one_device runs after each parameter_server job, 2 x REPEAT times,
# so that its baseline sees the same load; the tables show medians.
#
# usage: bench_coord.sh [--quick] [--steps N] [--closures N] [--repeat N]
#   defaults: 600 steps, 2000 closures, 3 repeats (about a minute on 2 cores, Release)
#   --quick       a tiny run (ctest bench.coord.quick): 24 steps, 100 closures, once
# Binaries from the environment: ZDIST_BIN, ZDIST_PSD_BIN, ZDIST_WORKER_BIN,
# ZDIST_COORDINATOR_BIN, BENCH_CLOSURES_BIN. FMNIST_DIR (default
# /usr/share/datasets/fashion-mnist); without it, (b) runs on synthetic data
# of the same shape and says so.
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../integration/lib.sh
source "$HERE/../integration/lib.sh"
# shellcheck source=../integration/coord_lib.sh
source "$HERE/../integration/coord_lib.sh"

STEPS=600
CLOSURES=2000
REPEAT=3
QUICK=0
while (($#)); do
    case $1 in
    --quick) QUICK=1 STEPS=24 CLOSURES=100 REPEAT=1 ;;
    --steps) STEPS=${2:?--steps N}; shift ;;
    --closures) CLOSURES=${2:?--closures N}; shift ;;
    --repeat) REPEAT=${2:?--repeat N}; shift ;;
    -h | --help) sed -n '2,/^HERE=/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_coord: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for n in "$STEPS" "$CLOSURES" "$REPEAT"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "bench_coord: --steps, --closures and --repeat take counts >= 1" >&2; exit 2; }
done

zd_init bench-coord
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN BENCH_CLOSURES_BIN
EXAMPLES=$HERE/../../deploy/examples
FMNIST=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
OUT=$ZD_TMP/out
RESULTS=$ZD_TMP/results.tsv
CLOSURE_RESULTS=$ZD_TMP/closures.tsv
: >"$RESULTS"
: >"$CLOSURE_RESULTS"

# ---- cluster ----

# bench_down: stops every daemon of the current cluster.
bench_down() {
    local name
    for name in "${ZD_NAMES[@]}"; do
        [[ -n ${ZD_PID[$name]:-} ]] && zd_stop "$name"
    done
    return 0
}

# bench_up NPS NWORKERS: a fresh local cluster (chief, workers, ps) on free ports.
bench_up() {
    bench_down
    coord_cluster "$1" "$2"
    coord_up "$1" "$2"
}

# ---- jobs ----

# The near-empty step: linear_regression on 1-d synthetic data, batch 1.
empty_job() { # FILE STRATEGY STEPS
    cat >"$1" <<JSON
{"name": "bench-empty", "strategy": {"type": "$2"}, "model": {"name": "linear_regression"},
 "optimizer": {"type": "sgd", "learning_rate": 0.01},
 "dataset": {"format": "synthetic", "synthetic": {"n": 256, "dim": 1, "noise_std": 0.01, "seed": 5},
             "global_batch_size": 1},
 "steps": $3, "seed": 1}
JSON
}

# fmnist_job SRC DST STEPS: the example job cut to STEPS steps, no intermediate
# checkpoint, no evaluation; synthetic data of the same shape without FMNIST.
fmnist_job() {
    python3 - "$1" "$2" "$3" "$FMNIST" <<'PY'
import json, os, sys
src, dst, steps, fmnist = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
j = json.load(open(src))
j.pop("epochs", None)
j.pop("comment", None)
j["steps"] = steps
if j["strategy"]["type"] in ("parameter_server", "multi_worker_mirrored"):
    j["checkpoint"] = {"every_steps": steps * 10, "keep": 1}
    j["evaluation"] = {"at_end": False}
ds = j["dataset"]
names = [ds[s][k] for s in ("train", "test") for k in ("images", "labels")]
if all(os.path.exists(os.path.join(fmnist, os.path.basename(n))) for n in names):
    for s in ("train", "test"):
        for k in ("images", "labels"):
            ds[s][k] = os.path.join(fmnist, os.path.basename(ds[s][k]))
else:
    for k in ("train", "test"):
        ds.pop(k)
    ds["format"] = "synthetic"
    ds["synthetic"] = {"n": 8192, "test_n": 1024, "dim": 784, "classes": 10, "seed": 3}
    if ds.get("shard_policy") == "file":
        ds["shard_policy"] = "data"
json.dump(j, open(dst, "w"))
print(ds["format"])
PY
}

# result KIND WORKERS STEPS EXAMPLES_PER_SEC STEPS_PER_SEC WALL_S: one row for the table.
result() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RESULTS"; }

# json_get FILE KEY: a top-level value of the one JSON object in FILE.
json_get() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# train_rate METRICS_JSONL: "EXAMPLES_PER_SEC STEPS_PER_SEC" between its first and last line.
train_rate() {
    python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
dt = rows[-1]["time"] - rows[0]["time"] if len(rows) > 1 else 0
if dt <= 0:
    print("%.1f 0" % (rows[-1]["examples_per_sec"] if rows else 0.0))
else:
    ex = sum(r["examples_per_sec"] * (r["time"] - p["time"]) for p, r in zip(rows, rows[1:]))
    print("%.1f %.1f" % (ex / dt, (rows[-1]["step"] - rows[0]["step"]) / dt))
PY
}

# ps_job NWORKERS [STRATEGY]: submits the Fashion-MNIST job of that strategy
# (default parameter_server) to the running cluster, once.
ps_job() {
    local job kind=${2:-parameter_server}
    zd_log "$kind, $1 worker(s): $STEPS steps"
    local start
    start=$(date +%s.%N)
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/$kind.json" --cluster "$CLUSTER" --json
    local wall
    wall=$(python3 -c 'import sys, time; print("%.1f" % (time.time() - float(sys.argv[1])))' "$start")
    zd_json_check "$OUT" "j['state'] == 'done' and j['step'] == $STEPS"
    job=$(json_get "$OUT" job_id)
    local m=$ZD_TMP/state/jobs/$job/metrics.jsonl
    [[ -s $m ]] || zd_fail "no $m"
    local rate
    read -r -a rate <<<"$(train_rate "$m")"
    result "$kind" "$1" "$STEPS" "${rate[0]}" "${rate[1]}" "$wall"
}

# ---- (a) dispatch overhead ----
zd_log "bench_coord: $([[ $QUICK == 1 ]] && echo quick || echo full) run: $CLOSURES closures, $STEPS steps, $REPEAT time(s) each"
empty_job "$ZD_TMP/empty-ps.json" parameter_server 1
empty_job "$ZD_TMP/empty-run.json" one_device "$CLOSURES"
for ((r = 0; r < REPEAT; r++)); do
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/empty-run.json" --json
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("local\t-\t-\t%.1f" % (j["steps"] / j["train_seconds"]))' \
        "$OUT" >>"$CLOSURE_RESULTS"
done

bench_up 2 2
PS_EPS=("tcp://${ZD_PS_ADDRS[0]}" "tcp://${ZD_PS_ADDRS[1]}")
W_EPS=("tcp://${ZD_WORKER_ADDRS[0]}" "tcp://${ZD_WORKER_ADDRS[1]}")
for ((r = 0; r < REPEAT; r++)); do
    for nw in 1 2; do
        for kd in 1:32 2:32 2:1; do
            k=${kd%:*} pd=${kd#*:}
            zd_run_expect 0 "$OUT" "$BENCH_CLOSURES_BIN" --per-dispatch "$pd" "$ZD_TMP/empty-ps.json" "$CLOSURES" "$k" \
                "${W_EPS[@]:0:nw}" -- "${PS_EPS[@]}"
            sed -n "s/.*closures_per_sec=\([0-9.]*\) .*/$nw\t$k\t$pd\t\1/p" "$OUT" >>"$CLOSURE_RESULTS"
        done
    done
done

# ---- (b) Fashion-MNIST mlp ----
FORMAT=$(fmnist_job "$EXAMPLES/fmnist-mlp-ps.json" "$ZD_TMP/parameter_server.json" "$STEPS")
fmnist_job "$EXAMPLES/fmnist-mlp-mwm.json" "$ZD_TMP/multi_worker_mirrored.json" "$STEPS" >/dev/null
fmnist_job "$EXAMPLES/fmnist-mlp-run.json" "$ZD_TMP/run.json" "$STEPS" >/dev/null
# one_device runs between the cluster's jobs, so that the baseline sees the
# same machine load as they do (the machine is shared); its median is taken
# over all of them.
one_device() {
    zd_log "one_device (zdist run): $STEPS steps"
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/run.json" --json --steps "$STEPS"
    result "one_device (zdist run)" 1 "$(json_get "$OUT" steps)" "$(json_get "$OUT" examples_per_sec)" \
        "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%.1f" % (j["steps"] / j["train_seconds"]))' "$OUT")" \
        "$(json_get "$OUT" wall_seconds)"
}
for ((r = 0; r < REPEAT; r++)); do ps_job 2; one_device; done
# multi_worker_mirrored on the same two workers (the ps tasks sit idle).
for ((r = 0; r < REPEAT; r++)); do ps_job 2 multi_worker_mirrored; done
bench_up 2 1
for ((r = 0; r < REPEAT; r++)); do ps_job 1; one_device; done
bench_down

# ---- the tables (medians) ----
python3 - "$CLOSURE_RESULTS" "$RESULTS" "$CLOSURES" "$STEPS" "$FORMAT" "$REPEAT" <<'PY'
import statistics, sys
closures, results, nclosures, steps, fmt, repeat = sys.argv[1:]
med = statistics.median

def groups(path, key_len):
    g = {}
    for line in open(path):
        if line.strip():
            f = line.rstrip("\n").split("\t")
            g.setdefault(tuple(f[:key_len]), []).append([float(x) for x in f[key_len:]])
    return {k: [med(c) for c in zip(*v)] for k, v in g.items()}

a = groups(closures, 3)
local = a.pop(("local", "-", "-"))[0]
print()
print("(a) dispatch overhead: closures of 1 near-empty step (linear_regression, dim 1, batch 1), 2 ps,")
print("    %s closures, median of %s; in_flight: RUN_STEPS per worker, per_dispatch: closures per RUN_STEPS at most" %
      (nclosures, repeat))
print("%-8s %-10s %-13s %12s %12s %14s" % ("workers", "in_flight", "per_dispatch", "closures/s", "us/closure",
                                           "vs_local_step"))
for (nw, k, pd), (cps,) in sorted(a.items(), key=lambda kv: (kv[0][0], -int(kv[0][2]), kv[0][1])):
    print("%-8s %-10s %-13s %12.0f %12.1f %14.4f" % (nw, k, pd, cps, 1e6 / cps, cps / local))
print("%-33s %12.0f %12.1f  (steps/s of the same job under zdist run, one_device)" % ("local step", local, 1e6 / local))

b = groups(results, 2)
base = next(v[1] for k, v in b.items() if k[0].startswith("one_device"))
one = b.get(("parameter_server", "1"), [None] * 4)[1]
print()
print("(b) mlp 784-256-128-10, adam, global batch 128, %s steps, data: %s, median of %s" % (steps, fmt, repeat))
print("    (parameter_server: a worker's step is the whole global batch, as TF's; multi_worker_mirrored: its share; vs_1_worker against")
print("    parameter_server with 1 worker)")
print("%-24s %7s %9s %11s %10s %11s %7s" % ("strategy", "workers", "steps/s", "examples/s", "vs_one_dev", "vs_1_worker",
                                          "wall_s"))
for (kind, nw), (_, eps, sps, wall) in sorted(b.items(), key=lambda kv: (not kv[0][0].startswith("one_device"), kv[0][1])):
    vs1 = "%.2f" % (eps / one) if kind != "one_device (zdist run)" and one else "-"
    print("%-24s %7s %9.0f %11.0f %10.2f %11s %7.1f" % (kind, nw, sps, eps, eps / base if base else 0, vs1, wall))
PY
