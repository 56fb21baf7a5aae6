#!/usr/bin/env bash
# dataset.pipelines in job files (distribute_datasets_from_function as a file list): zdist run trains a
# mirrored:2 job from its one pipeline's file; a job of 2 pipelines under zdist run (1 pipeline) is refused naming
# the field; a multi_worker_mirrored job of 2 pipelines on a chief and 2 zdist-worker daemons trains to its end,
# each worker reading its own file whole, in batches of global_batch_size / num_replicas_in_sync (pipeline 0's 60
# rows are 12 steps of 5, pipeline 1's 40 rows 8: nothing sharded, nothing rebatched).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init pipelines
zd_need ZDIST_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out

# y = 2 x0 - x1 + 0.5, rows split into two pipeline files of 60 and 40 rows, and a test file.
python3 - "$ZD_TMP" <<'PY'
import random, sys
random.seed(5)
def rows(n):
    out = []
    for _ in range(n):
        x0, x1 = random.uniform(-1, 1), random.uniform(-1, 1)
        out.append("%.6f,%.6f,%.6f\n" % (x0, x1, 2 * x0 - x1 + 0.5))
    return out
for name, n in (("p0.csv", 60), ("p1.csv", 40), ("test.csv", 50)):
    open(sys.argv[1] + "/" + name, "w").writelines(rows(n))
PY
job() { # job FILE STRATEGY PIPELINES LENGTH
    cat >"$1" <<JSON
{"name": "pipes", "strategy": $2, "model": {"name": "linear_regression"},
 "optimizer": {"type": "sgd", "learning_rate": 0.1},
 "dataset": {"format": "csv", "pipelines": $3, "test": {"path": "$ZD_TMP/test.csv"}, "label_dtype": "float32",
             "shuffle": false, "global_batch_size": 10},
 $4, "seed": 1}
JSON
}

job "$ZD_TMP/run.json" '{"type": "mirrored", "num_replicas": 2}' "[{\"path\": \"$ZD_TMP/p0.csv\"}]" '"epochs": 40'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/run.json" --json
zd_json_check "$OUT" 'j["steps"] == 40 * 6 and j["test_loss"] < 0.01'
zd_ok "zdist run: mirrored:2 over one pipeline's 60 rows, 6 steps of 2 x 5 an epoch, learns y (test loss < 0.01)"

job "$ZD_TMP/two.json" '{"type": "mirrored", "num_replicas": 2}' \
    "[{\"path\": \"$ZD_TMP/p0.csv\"}, {\"path\": \"$ZD_TMP/p1.csv\"}]" '"epochs": 1'
zd_run_expect 1 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/two.json"
grep -q "dataset.pipelines: 2 given, but the job runs 1 input pipeline (one per worker); give one per worker" \
    "$OUT.err" || zd_fail "2 pipelines on 1 worker: $(cat "$OUT.err")"
zd_ok "2 pipelines for zdist run's 1 input pipeline: refused naming dataset.pipelines"

ZD_WORKER_ADDRS=("127.0.0.1:$(zd_free_port)" "127.0.0.1:$(zd_free_port)")
ZD_CHIEF="127.0.0.1:$(zd_free_port)"
CLUSTER=$ZD_TMP/cluster.json
printf '{"cluster": {"chief": ["%s"], "worker": ["%s", "%s"]}}\n' "$ZD_CHIEF" "${ZD_WORKER_ADDRS[@]}" >"$CLUSTER"
coord_up 0 2
job "$ZD_TMP/mwm.json" '{"type": "multi_worker_mirrored"}' \
    "[{\"path\": \"$ZD_TMP/p0.csv\"}, {\"path\": \"$ZD_TMP/p1.csv\"}]" '"steps": 200'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/mwm.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == 200'
zd_ok "multi_worker_mirrored over 2 pipelines runs its 200 steps"
grep -qE "input pipeline 0 of 2( sharded by [A-Z]+)?, 12 steps per epoch" "$ZD_TMP/worker0.log" ||
    zd_fail "worker 0 does not read pipeline 0's 60 rows in batches of 5: $(grep started "$ZD_TMP/worker0.log")"
grep -qE "input pipeline 1 of 2( sharded by [A-Z]+)?, 8 steps per epoch" "$ZD_TMP/worker1.log" ||
    zd_fail "worker 1 does not read pipeline 1's 40 rows in batches of 5: $(grep started "$ZD_TMP/worker1.log")"
zd_ok "each worker reads its own pipeline's file whole, in per-replica batches of 5 (12 and 8 steps an epoch)"
echo "passed: $ZD_PASSED"
