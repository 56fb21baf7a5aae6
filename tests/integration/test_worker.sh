#!/usr/bin/env bash
# zdist-worker end to end: real zdist-psd and zdist-worker daemons on free localhost ports, driven by worker_driver.
source "$(dirname "$0")/lib.sh"
zd_init worker
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN WORKER_DRIVER_BIN
D=$WORKER_DRIVER_BIN
W=$ZDIST_WORKER_BIN
FMNIST=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
OUT=$ZD_TMP/out

# ---- command line: --help, --version, wrong task type, no task ----
zd_run_expect 0 "$OUT" "$W" --help
grep -q -- "--task worker:N" "$OUT" || zd_fail "--help: $(cat "$OUT")"
zd_run_expect 0 "$OUT" "$W" --version
grep -q "^zdist-worker " "$OUT" || zd_fail "--version: $(cat "$OUT")"
zd_write_cluster "$ZD_TMP/cluster.json" 2 2
zd_run_expect 2 "$OUT" "$W" --cluster "$ZD_TMP/cluster.json" --task ps:0
grep -q "serves task type 'worker', but the task is 'ps'; start zdist-psd" "$OUT.err" || zd_fail "ps task: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$W"
grep -q "no task" "$OUT.err" || zd_fail "no task: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$W" --bind tcp://127.0.0.1:1 extra
zd_run_expect 2 "$OUT" "$W" --ps-timeout-ms 0 --bind tcp://127.0.0.1:1
for n in 0 65 x; do
    zd_run_expect 2 "$OUT" "$W" --max-jobs "$n" --bind tcp://127.0.0.1:1
    grep -q "zdist-worker: --max-jobs must be a number of jobs in 1..64 (those a worker holds at once; default 8), got '$n'" \
        "$OUT.err" || zd_fail "--max-jobs $n: $(cat "$OUT.err")"
done
zd_ok "command line: --help, --version, --task ps:0 refused (exit 2), usage errors"

# ---- two psds and two workers from one cluster file ----
PS0=${ZD_PS_ADDRS[0]}
PS1=${ZD_PS_ADDRS[1]}
W0=${ZD_WORKER_ADDRS[0]}
W1=${ZD_WORKER_ADDRS[1]}
zd_start ps0 "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/cluster.json" --task ps:0
zd_start ps1 "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/cluster.json" --task ps:1
zd_start worker0 "$W" --cluster "$ZD_TMP/cluster.json" --task worker:0
zd_start worker1 env TF_CONFIG="$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["task"]={"type":"worker","index":1}; print(json.dumps(c))' "$ZD_TMP/cluster.json")" "$W"
zd_wait_psd ps0 "$PS0"
zd_wait_psd ps1 "$PS1"
zd_wait_log worker0 "worker task 0 serving at tcp://$W0"
zd_wait_log worker1 "worker task 1 serving at tcp://$W1"
zd_wait_log worker1 "2 ps tasks in the cluster"
zd_ok "two psds and two workers serving"

# ---- one worker: bad input, synthetic training, evaluation, stop; a short Fashion-MNIST job ----
if [[ -r $FMNIST/train-images-idx3-ubyte.gz ]]; then
    "$D" train "$W0" "$PS0" "$PS1" "$FMNIST"
else
    echo "note: $FMNIST not found, skipping the Fashion-MNIST job"
    "$D" train "$W0" "$PS0" "$PS1"
fi
grep -q "refused method" "$ZD_TMP/worker0.log" || zd_fail "refusals are not logged"
grep -q "job 'syn-ps' started" "$ZD_TMP/worker0.log" || zd_fail "job start not logged"
zd_ok "train: one worker against two psds"

# The psd holds the job's variables, sharded by fixed:2 (zdist ps get).
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps stats "$PS0" --json
zd_json_check "$OUT" 'j["optimizer"] in ("sgd", "adam") and j["shards"] >= 2 and any(m["name"] == "push_pull" and m["requests"] > 0 for m in j["methods"])'
zd_ok "psd stats show the worker's pushes, fused with its pulls (push_pull)"

# ---- two workers, one job ----
"$D" two "$W0" "$W1" "$PS0" "$PS1"
zd_ok "two workers share the psd variables"

# ---- sparse: embedding rows pulled by id, sparse pushes ----
python3 - "$ZD_TMP/train.svm" <<'PY'
import random, sys
random.seed(3)
with open(sys.argv[1], "w") as f:
    for i in range(1200):
        y = random.random() < 0.5
        feats = sorted(set(random.randrange(1, 200) for _ in range(6)) | {1000 + (7 if y else 8)})
        f.write(("+1" if y else "-1") + "".join(f" {k}:1" for k in feats) + "\n")
PY
"$D" sparse "$W1" "$PS0" "$PS1" "$ZD_TMP/train.svm"
zd_ok "sparse_logreg under parameter_server"

# ---- multi_worker_mirrored over the two workers: a ring, lockstep, identical copies ----
"$D" mwm "$W0" "$W1" "$ZD_TMP/train.svm"
grep -q "job 'mwm': rank 1 of 2 in the ring" "$ZD_TMP/worker1.log" || zd_fail "worker 1 did not log its place in the ring"
zd_ok "multi_worker_mirrored: ring, lockstep, bitwise-identical copies, state, a missing peer's deadline"

# ---- a worker under a systemd watchdog shorter than the collective deadline ----
W2=127.0.0.1:$(zd_free_port)
zd_start worker2 env WATCHDOG_USEC=20000000 "$W" --bind "tcp://$W2"
zd_wait_log worker2 "serving at tcp://$W2"
"$D" mwm_watchdog "$W2"
zd_stop worker2
zd_ok "multi_worker_mirrored: a collective deadline the watchdog would not survive is refused"

# ---- --max-jobs: the jobs a worker holds at once ----
W3=127.0.0.1:$(zd_free_port)
zd_start worker3 "$W" --bind "tcp://$W3" --max-jobs 1
zd_wait_log worker3 "serving at tcp://$W3"
"$D" max_jobs "$W3" "$PS0" "$PS1"
zd_stop worker3
zd_ok "--max-jobs 1: a worker holds one job, a second is refused naming the flag"

# ---- an unreachable ps task ----
DEAD=127.0.0.1:$(zd_free_port)
"$D" unreachable "$W1" "$PS0" "$DEAD"
zd_ok "unreachable psd"

# ---- SIGTERM: exit 0 ----
for name in worker0 worker1; do
    zd_stop "$name"
    [[ $ZD_RC -eq 0 ]] || zd_fail "$name exited $ZD_RC on SIGTERM"
    grep -q "stopped" "$ZD_TMP/$name.log" || zd_fail "$name: no 'stopped' in its log"
done
zd_ok "SIGTERM: both workers exit 0"

echo "test_worker: $ZD_PASSED checks passed"
