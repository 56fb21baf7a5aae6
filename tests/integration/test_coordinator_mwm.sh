#!/usr/bin/env bash
# zdist-coordinator with multi_worker_mirrored jobs on a cluster of a chief and two workers (no ps):
# Fashion-MNIST trained in lockstep; a worker killed -9 mid-job (back: resumed from the last checkpoint;
# not back: the job goes on with the other, global batch kept, and the worker rejoins later); a worker
# frozen by SIGSTOP and thawed; the coordinator killed -9 mid-job. Every job ends with exactly the steps
# asked.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init coordinator-mwm
zd_need ZDIST_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
FMNIST=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
OUT=$ZD_TMP/out

ZD_WORKER_ADDRS=("127.0.0.1:$(zd_free_port)" "127.0.0.1:$(zd_free_port)")
ZD_CHIEF="127.0.0.1:$(zd_free_port)"
CLUSTER=$ZD_TMP/cluster.json
printf '{"cluster": {"chief": ["%s"], "worker": ["%s", "%s"]}}\n' "$ZD_CHIEF" "${ZD_WORKER_ADDRS[@]}" >"$CLUSTER"
coord_up 0 2
zd_ok "a chief and two workers, no ps"

# ---- a parameter_server job on a cluster without ps: refused at submit ----
coord_softmax_job "$ZD_TMP/ps.json" 10
zd_run_expect 1 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/ps.json" --cluster "$CLUSTER" --detach
grep -q "parameter_server needs ps tasks and the cluster has none" "$OUT.err" || zd_fail "ps job: $(cat "$OUT.err")"
zd_ok "parameter_server job refused on a cluster without ps, saying why"

# ---- Fashion-MNIST: an mlp in lockstep over both workers ----
if [[ -r $FMNIST/train-images-idx3-ubyte.gz ]]; then
    python3 - "$ZD_TMP/fmnist.json" "$FMNIST" <<'PY'
import json, sys
d = sys.argv[2]
json.dump({"name": "fmnist-mwm", "strategy": {"type": "multi_worker_mirrored"},
           "model": {"name": "mlp", "params": {"hidden": [64]}},
           "optimizer": {"type": "adam", "learning_rate": 0.002},
           "dataset": {"format": "idx",
                       "train": {"images": d + "/train-images-idx3-ubyte.gz", "labels": d + "/train-labels-idx1-ubyte.gz"},
                       "test": {"images": d + "/t10k-images-idx3-ubyte.gz", "labels": d + "/t10k-labels-idx1-ubyte.gz"},
                       "global_batch_size": 128, "shuffle_seed": 42, "shard_policy": "data"},
           "epochs": 1, "steps_per_execution": 8, "evaluation": {"at_end": True}, "seed": 1},
          open(sys.argv[1], "w"))
PY
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/fmnist.json" --cluster "$CLUSTER" --json
    JOB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
    zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == j["steps"] == 469 and j["metrics"]["test_accuracy"] >= 0.80'
    zd_json_check "$OUT" 'all(w["in_ring"] for w in j["workers"]) and sorted(w["rank"] for w in j["workers"]) == [0, 1]'
    zd_ok "Fashion-MNIST mlp over 2 workers in lockstep: $(python3 -c 'import json,sys; print("test accuracy %.4f" % json.load(open(sys.argv[1]))["metrics"]["test_accuracy"])' "$OUT")"
else
    echo "note: no Fashion-MNIST under $FMNIST (package dataset-fashion-mnist): its job skipped"
fi

# Slow enough to be killed mid-job: one step per round, a wide model.
slow_job() {
    cat >"$1" <<JSON
{"name": "mwm-ft", "strategy": {"type": "multi_worker_mirrored", "collective_timeout_ms": 3000,
                                "lost_worker_wait_ms": $3},
 "model": {"name": "mlp", "params": {"hidden": [256]}}, "optimizer": {"type": "adam", "learning_rate": 0.001},
 "dataset": {"format": "synthetic", "synthetic": {"n": 8192, "test_n": 1024, "dim": 256, "classes": 4, "seed": 7,
             "noise_std": 2.0}, "global_batch_size": 64},
 "steps": $2, "checkpoint": {"every_steps": 100, "keep": 2}, "seed": 3}
JSON
}

# ---- a worker killed -9 and started again: the ring re-formed from the last checkpoint ----
slow_job "$ZD_TMP/job1.json" 1200 -1
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job1.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 250
zd_stop worker1 KILL
zd_wait_log chief "job $JOB: step [0-9]+ failed: .*worker task 1 \(tcp://${ZD_WORKER_ADDRS[1]}\) lost" 60
# Back once the chief waits for it (lost_worker_wait_ms -1: for ever).
zd_wait_log chief "job $JOB: waiting for 1 lost worker \(for ever\)" 60
coord_start_worker 1
coord_wait_state "$JOB" done 300
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == j["steps"] == 1200 and j["workers"][1]["restarts"] >= 1 and all(w["in_ring"] for w in j["workers"])'
# Lockstep: each worker's step time is the round's, p50 <= p99, over the last minute.
zd_json_check "$OUT" 'all(0 < w["step_time_p50_s"] <= w["step_time_p99_s"] and w["step_time_samples"] > 0 for w in j["workers"])'
zd_json_check "$OUT" '"worker task 1" in j["ring_reformed_because"]'
grep -qE "job $JOB: 2 workers in the ring, restored from the checkpoint at step [1-9][0-9]*00" "$ZD_TMP/chief.log" ||
    zd_fail "no restore from a checkpoint: $(grep "$JOB" "$ZD_TMP/chief.log" | tail -5)"
# Worker 0's step fails on the collective deadline naming rank 1 unless
# worker 1 died after its part of the last all-reduce was sent.
if grep -qE "job $JOB: step [0-9]+ failed: worker task 0 .*DEADLINE_EXCEEDED" "$ZD_TMP/chief.log"; then
    grep -qE "all_reduce: no data from rank 1 .* within the deadline" "$ZD_TMP/worker0.log" ||
        zd_fail "worker 0's step did not fail on the collective deadline naming rank 1"
fi
zd_ok "worker kill -9 and back: the step failed naming worker 1, the ring re-formed from the last checkpoint, exactly 1200 steps"

# ---- a worker killed -9 and not back in time: the job goes on with one, the worker rejoins later ----
slow_job "$ZD_TMP/job2.json" 1500 2000
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job2.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 250
zd_stop worker1 KILL
zd_wait_log chief "job $JOB: worker task 1 \(.*\) did not come back within 2000 ms: going on with 1 workers" 60
zd_wait_log chief "job $JOB: 1 workers in the ring, restored from the checkpoint" 60
# The status reaches the server on its next update: poll it.
coord_wait_json "$JOB" 'not j["workers"][1]["in_ring"] and j["workers"][0]["in_ring"] and j["workers"][0]["rank"] == 0' 30
# The lost worker's status says since when and why.
coord_wait_json "$JOB" 'j["workers"][1]["state"] == "lost" and j["workers"][1]["lost_ms_ago"] >= 0 and j["workers"][1]["lost_since"] > 0 and len(j["workers"][1]["lost_why"]) > 0' 30
grep -q "job 'mwm-ft' started: .*input pipeline 0 of 1" "$ZD_TMP/worker0.log" || zd_fail "worker 0 not restarted as the only pipeline"
coord_start_worker 1
zd_wait_log chief "job $JOB: worker task 1 \(.*\) is back: re-forming the ring" 120
coord_wait_state "$JOB" done 300
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == j["steps"] == 1500 and all(w["in_ring"] for w in j["workers"])'
zd_ok "worker kill -9, not back within 2 s: went on with 1 worker (global batch kept), rejoined at a checkpoint, exactly 1500 steps"

# ---- a worker frozen (SIGSTOP): its call is given up on, the job goes on with one; thawed, it rejoins ----
slow_job "$ZD_TMP/job4.json" 1200 2000
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job4.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 250
kill -STOP "${ZD_PID[worker1]}"
zd_wait_log chief "job $JOB: worker task 1 \(.*\) did not come back within 2000 ms: going on with 1 workers" 90
zd_wait_log chief "job $JOB: 1 workers in the ring, restored from the checkpoint" 60
kill -CONT "${ZD_PID[worker1]}"
zd_wait_log chief "job $JOB: worker task 1 \(.*\) is back: re-forming the ring" 120
coord_wait_state "$JOB" done 300
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == j["steps"] == 1200 and all(w["in_ring"] for w in j["workers"])'
zd_ok "worker frozen by SIGSTOP: went on with 1 worker, thawed it rejoined at a checkpoint, exactly 1200 steps"

# ---- the coordinator killed -9 mid-job: the job resumes from its last checkpoint ----
slow_job "$ZD_TMP/job3.json" 800 -1
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job3.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 250
zd_stop chief KILL
coord_start_chief chief2
zd_wait_log chief2 "chief serving at" 60
coord_wait_state "$JOB" done 300
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == j["steps"] == 800'
grep -qE "job $JOB: 2 workers in the ring, restored from the checkpoint at step [1-9]" "$ZD_TMP/chief2.log" ||
    zd_fail "no restore after the coordinator restart"
zd_ok "coordinator kill -9: the multi_worker_mirrored job resumed from its last checkpoint, exactly 800 steps"
# ---- a damaged checkpoint: set aside by its CRC, the job resumes from the one before ----
slow_job "$ZD_TMP/job5.json" 800 -1
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job5.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 250
zd_stop chief2 KILL
# The newest complete checkpoint (its manifest.json is written last): the
# kill may have caught a newer one half-written, which a resume ignores.
complete=$(ls -d "$ZD_TMP/state/jobs/$JOB"/ckpt-* | grep -E 'ckpt-[0-9]+$' | sort -t- -k2 -n |
    while read -r d; do if [[ -f $d/manifest.json ]]; then echo "$d"; fi; done)
last=$(tail -1 <<<"$complete")
prev=$(tail -2 <<<"$complete" | head -1)
[[ -n $prev && $prev != "$last" ]] || zd_fail "fewer than two complete checkpoints: $complete"
python3 - "$last/workers-state.bin" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0xFF
open(p, "wb").write(b)
PY
coord_start_chief chief3
zd_wait_log chief3 "chief serving at" 60
lstep=${last##*ckpt-}
pstep=${prev##*ckpt-}
zd_wait_log chief3 "job $JOB: the checkpoint at step $lstep is damaged \\(.*workers-state.bin: not a complete zdist worker-state file \\(bad CRC-32\\)\\): set aside as .*ckpt-$lstep.damaged; resuming from the one at step $pstep" 60
zd_wait_log chief3 "job $JOB: 2 workers in the ring, restored from the checkpoint at step $pstep" 60
coord_wait_state "$JOB" done 300
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == j["steps"] == 800'
zd_ok "a damaged checkpoint (workers-state.bin at step $lstep): set aside by its CRC, resumed from step $pstep, exactly 800 steps"
echo "all $ZD_PASSED checks passed"
