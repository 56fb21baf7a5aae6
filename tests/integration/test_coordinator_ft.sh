#!/usr/bin/env bash
# zdist-coordinator fault tolerance: kill -9 of a worker, of a psd, of the coordinator, mid-job; each job still ends with exactly the steps asked.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init coordinator-ft
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
coord_cluster 2 2
coord_up 2 2
# Slow enough steps to be killed mid-job: one step per closure, a wide model.
slow_job() {
    cat >"$1" <<JSON
{"name": "ft", "strategy": {"type": "parameter_server"},
 "model": {"name": "mlp", "params": {"hidden": [256]}}, "optimizer": {"type": "sgd", "learning_rate": 0.05},
 "dataset": {"format": "synthetic", "synthetic": {"n": 8192, "test_n": 1024, "dim": 256, "classes": 4, "seed": 7},
             "global_batch_size": 64},
 "steps": $2, "checkpoint": {"every_steps": 100, "keep": 2}, "seed": 3}
JSON
}
job_dir() { echo "$ZD_TMP/state/jobs/$1"; }

# ---- a worker killed -9 mid-job, restarted: its closures run elsewhere, it rejoins ----
slow_job "$ZD_TMP/job.json" 1500
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 200
zd_stop worker1 KILL
coord_wait_step "$JOB" 400
coord_start_worker 1
coord_wait_state "$JOB" done 300
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == 1500 and j["steps"] == 1500 and j["workers"][1]["restarts"] >= 1 and j["workers"][1]["closures_done"] > 0'
[[ $(grep -cE "job $JOB: worker 1 \(.*\) lost: " "$ZD_TMP/chief.log") -eq 1 ]] || zd_fail "not one 'worker 1 lost' line in the chief's log"
[[ $(grep -cE "job $JOB: worker 1 \(.*\) is back \(rejoin 1\)" "$ZD_TMP/chief.log") -eq 1 ]] || zd_fail "not one 'worker 1 is back' line"
zd_ok "worker kill -9: job done with exactly 1500 steps, the worker rejoined (one line each in the chief's log)"

# ---- a psd killed -9 and restarted: every ps restored from the last checkpoint ----
slow_job "$ZD_TMP/job2.json" 1500
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job2.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 350
zd_stop ps1 KILL
sleep 0.5
coord_start_ps 1
zd_wait_psd ps1 "${ZD_PS_ADDRS[1]}" 60
coord_wait_state "$JOB" done 300
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == 1500 and j["psd_recoveries"] >= 1'
grep -q "job $JOB: restored every ps from the checkpoint at step" "$ZD_TMP/chief.log" || zd_fail "no restore in the chief's log"
zd_ok "psd kill -9: restored from the last checkpoint, job done with exactly 1500 steps"

# ---- the coordinator killed -9 and restarted: the job resumes from its last checkpoint ----
slow_job "$ZD_TMP/job3.json" 1500
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job3.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 350
zd_start follow "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --follow
zd_wait_log follow "^step " 30
zd_stop chief KILL
coord_start_chief chief2
zd_wait_log chief2 "chief serving at" 60
zd_wait_log chief2 "job $JOB .* resuming it from its last checkpoint" 30
coord_wait_state "$JOB" done 300
for _ in $(seq 300); do kill -0 "${ZD_PID[follow]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${ZD_PID[follow]}" 2>/dev/null && zd_fail "status --follow still running 30 s after the job ended"
ZD_RC=0
wait "${ZD_PID[follow]}" || ZD_RC=$?
ZD_PID[follow]=""
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == 1500 and j["state"] == "done"'
grep -q "job $JOB: restored every ps from the checkpoint at step [1-9]" "$ZD_TMP/chief2.log" || zd_fail "no restore after the restart"
[[ $ZD_RC -eq 0 ]] || zd_fail "status --follow across the restart exited $ZD_RC: $(cat "$ZD_TMP/follow.log")"
grep -q "job $JOB (ft): done, step 1500/1500" "$ZD_TMP/follow.log" || zd_fail "follow: $(cat "$ZD_TMP/follow.log")"
zd_ok "coordinator kill -9: the job resumed from its last checkpoint and completed; status --follow subscribed again"
echo "all $ZD_PASSED checks passed"
