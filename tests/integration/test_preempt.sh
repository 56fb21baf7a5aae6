#!/usr/bin/env bash
# Preemption (TensorFlow's PreemptionCheckpointHandler) on real daemons: a chief, one psd and two
# workers. SIGTERM (twice) to a worker of a parameter_server job, to the psd of one, to a worker
# of a multi_worker_mirrored job, and to the chief: the chief checkpoints at the next step boundary, the task exits 0,
# and the job resumes from that checkpoint (no step lost: it is at or past the step the task had
# reached when the chief heard of it) and ends with exactly its steps. Periodic checkpoints are far
# apart, so the only one near is the preemption's.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init preempt
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out

coord_cluster 1 2
coord_up 1 2
zd_ok "a chief, a psd and two workers"

# preempt_check JOB TASK NAME: TASK (worker:1, ps:0) got SIGTERM twice; it exits 0 after the chief's
# checkpoint, which is at or past the step the job had when the chief heard (no step lost). Sets CKPT.
preempt_check() {
    local job=$1 task=$2 name=$3 heard
    kill -TERM "${ZD_PID[$name]}"
    zd_wait_log chief "job $job: $task got SIGTERM: checkpointing at the next step boundary" 60
    kill -TERM "${ZD_PID[$name]}" 2>/dev/null || true # a second SIGTERM is not a crash
    zd_wait "$name"
    [[ $ZD_RC -eq 0 ]] || zd_fail "$task: exit status $ZD_RC after SIGTERM (want 0)"
    heard=$(grep -oE "job $job: $task got SIGTERM: checkpointing at the next step boundary \(step [0-9]+ now\)" \
        "$ZD_TMP/chief.log" | tail -1 | grep -oE '[0-9]+ now' | grep -oE '[0-9]+')
    CKPT=$(grep -oE "job $job: checkpoint at step [0-9]+" "$ZD_TMP/chief.log" | tail -1 | grep -oE '[0-9]+$')
    [[ -n $heard && -n $CKPT ]] || zd_fail "$task: no preemption checkpoint in the chief's log"
    ((CKPT >= heard)) || zd_fail "$task: checkpoint at step $CKPT, before step $heard the job had reached"
    grep -qE "preemption checkpoint done: job $job: checkpoint at step $CKPT" "$ZD_TMP/$name.log" ||
        zd_fail "$task: its log does not confirm the checkpoint: $(tail -5 "$ZD_TMP/$name.log")"
    cp "$ZD_TMP/$name.log" "$ZD_TMP/$name-preempted.log.txt"
}

# ---- parameter_server: a worker preempted ----
coord_softmax_job "$ZD_TMP/ps.json" 60000 ', "checkpoint": {"every_steps": 100000}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/ps.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 200 60
preempt_check "$JOB" worker:1 worker1
coord_start_worker 1
zd_ok "parameter_server: worker 1 preempted, checkpoint at step $CKPT, exit 0"

# ---- parameter_server: the psd preempted; back, the job restores the preemption's checkpoint ----
preempt_check "$JOB" ps:0 ps0
coord_start_ps 0
zd_wait_log chief "job $JOB: restored every ps from the checkpoint at step $CKPT" 60
coord_wait_state "$JOB" done 120
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == j["steps"] == 60000'
zd_ok "parameter_server: the psd preempted, restored from its checkpoint at step $CKPT; 60000 steps exactly"

# ---- multi_worker_mirrored: a worker preempted; back, the ring re-forms from the checkpoint ----
cat >"$ZD_TMP/mwm.json" <<'JSON'
{"name": "mwm-preempt", "strategy": {"type": "multi_worker_mirrored", "collective_timeout_ms": 5000,
                                      "lost_worker_wait_ms": -1},
 "model": {"name": "mlp", "params": {"hidden": [64]}}, "optimizer": {"type": "adam", "learning_rate": 0.001},
 "dataset": {"format": "synthetic", "synthetic": {"n": 4096, "test_n": 256, "dim": 64, "classes": 4, "seed": 7},
             "global_batch_size": 64},
 "steps": 4000, "checkpoint": {"every_steps": 100000}, "seed": 3}
JSON
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/mwm.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 100 60
preempt_check "$JOB" worker:1 worker1
coord_start_worker 1
zd_wait_log chief "job $JOB: 2 workers in the ring, restored from the checkpoint at step $CKPT" 60
coord_wait_state "$JOB" done 120
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == j["steps"] == 4000 and all(w["in_ring"] for w in j["workers"])'
zd_ok "multi_worker_mirrored: worker 1 preempted, the ring re-formed from its checkpoint at step $CKPT; 4000 steps exactly"


# ---- the chief preempted: its jobs checkpoint as it stops; restarted, it resumes there ----
coord_softmax_job "$ZD_TMP/ps2.json" 12000 ', "checkpoint": {"every_steps": 100000}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/ps2.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 200 60
kill -TERM "${ZD_PID[chief]}"
zd_wait_log chief "job $JOB: checkpointing before the stop" 60
kill -TERM "${ZD_PID[chief]}" 2>/dev/null || true
zd_wait chief
[[ $ZD_RC -eq 0 ]] || zd_fail "chief: exit status $ZD_RC after SIGTERM (want 0)"
CKPT=$(grep -oE "job $JOB: checkpoint at step [0-9]+" "$ZD_TMP/chief.log" | tail -1 | grep -oE '[0-9]+$')
STOPPED=$(grep -oE "job $JOB \('syn-softmax'\): running at step [0-9]+" "$ZD_TMP/chief.log" | tail -1 | grep -oE '[0-9]+$')
[[ -n $CKPT && $CKPT == "$STOPPED" ]] || zd_fail "chief: stopped at step $STOPPED, checkpoint at step $CKPT"
coord_start_chief chief2
zd_wait_log chief2 "job $JOB: restored every ps from the checkpoint at step $CKPT" 60
coord_wait_state "$JOB" done 120
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == j["steps"] == 12000'
zd_ok "the chief preempted: checkpoint at step $CKPT where it stopped, exit 0, resumed there; 12000 steps exactly"

echo "passed: $ZD_PASSED"
