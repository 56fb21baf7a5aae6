#!/usr/bin/env bash
# Exactly-once steps under parameter_server: a worker lost while its closure
# is in flight has that closure re-run on another worker; the steps it had
# already pushed must not be applied twice, the ones it had not must be
# applied once. Every psd shard (adam: its step counter counts the updates
# it applied) must end with exactly the job's steps.
#
# The window (the worker's push applied, its RUN_STEPS reply not yet sent)
# is hit deterministically with the worker's test-only fault hook:
# ZDIST_TEST_DIE_AFTER_PUSH=N / ZDIST_TEST_STOP_AFTER_PUSH=N make it SIGKILL
# / SIGSTOP itself once its N-th step's pushes are acknowledged. No outside
# kill hits that window reliably. The hook is compiled into test builds only
# (cmake -DZDIST_TEST_HOOKS=ON, the default of a Debug build): without it the
# test is skipped (exit 77).
if [[ ${ZDIST_TEST_HOOKS:-0} != 1 ]]; then
    echo "SKIP: zdist-worker was built without its test hooks (configure with -DZDIST_TEST_HOOKS=ON, as scripts/test.sh does)"
    exit 77
fi
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init exactly-once
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
STEPS=200
coord_cluster 2 2

# job FILE STEPS: a dense model (every step updates every shard) with adam; closures of 10 steps.
job() {
    cat >"$1" <<JSON
{"name": "once", "strategy": {"type": "parameter_server"},
 "model": {"name": "mlp", "params": {"hidden": [32]}}, "optimizer": {"type": "adam", "learning_rate": 0.002},
 "dataset": {"format": "synthetic", "synthetic": {"n": 4096, "test_n": 512, "dim": 32, "classes": 4, "seed": 7},
             "global_batch_size": 32},
 "steps": $2, "steps_per_execution": 10, "checkpoint": {"every_steps": 100, "keep": 2}, "evaluation": {"at_end": false},
 "seed": 3}
JSON
}

# applied_check JOB STEPS WHAT: every shard of JOB on every psd applied exactly STEPS updates.
applied_check() {
    local i
    for ((i = 0; i < 2; i++)); do
        zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json
        python3 - "$OUT" "$1" "$2" <<'PY' || zd_fail "$3: ps $i applied a step twice or lost one (above)"
import json, sys
j = json.load(open(sys.argv[1]))
mine = [s for s in j["shard_info"] if s["name"].startswith(sys.argv[2] + "/")]
bad = [(s["name"], s["shard_index"], s["step"]) for s in mine if s["step"] != int(sys.argv[3])]
if not mine or bad:
    print("shards (name, index, updates applied) not at %s: %s (of %d)" % (sys.argv[3], bad, len(mine)))
    sys.exit(1)
PY
    done
}

COORD_CHIEF_ARGS=--keep-variables # each shard's update count is read after the job
for i in 0 1; do coord_start_ps "$i"; done
coord_start_worker 0
zd_start worker1 env ZDIST_TEST_DIE_AFTER_PUSH=15 "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task worker:1
coord_start_chief
for i in 0 1; do zd_wait_psd "ps$i" "${ZD_PS_ADDRS[$i]}" 60; done
zd_wait_log worker0 "serving at" 60
zd_wait_log worker1 "serving at" 60
zd_wait_log chief "chief serving at" 60

# ---- killed after its push: the closure's first 5 steps are on the psds, the re-run skips them ----
job "$ZD_TMP/job.json" $STEPS
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_state "$JOB" done 300
zd_wait_log worker1 "test fault: step 15 pushed; SIGKILL before replying" 5
grep -qE "job $JOB: worker 1 \(.*\) lost: " "$ZD_TMP/chief.log" || zd_fail "the chief never lost worker 1"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" "j['step'] == $STEPS"
applied_check "$JOB" $STEPS "worker killed after its push"
zd_ok "a worker SIGKILLed between its step's push and its reply: every shard applied exactly $STEPS updates"

# ---- frozen after its push, thawed after the re-run: its late pushes are duplicates ----
zd_stop worker1 KILL
zd_start worker1_stop env ZDIST_TEST_STOP_AFTER_PUSH=15 "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task worker:1
zd_wait_log worker1_stop "serving at" 60
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
zd_wait_log worker1_stop "test fault: step 15 pushed; SIGSTOP before replying" 120
# Lost (no heartbeat), its closure re-run on worker 0 and finished; then it
# wakes up and pushes the rest of its old closure.
zd_wait_log chief "job $JOB: worker 1 \(.*\) lost: " 60
coord_wait_step "$JOB" 100 300
kill -CONT "${ZD_PID[worker1_stop]}"
coord_wait_state "$JOB" done 300
# The rest of its old closure, pushed late (its steps ran on worker 0 meanwhile).
zd_wait_log worker1_stop "test fault: the closure of step 15 ran to its end after SIGCONT" 120
applied_check "$JOB" $STEPS "worker frozen after its push"
zd_ok "a worker SIGSTOPped between its push and its reply, thawed after its closure ran elsewhere: exactly $STEPS updates"

# ---- a psd killed -9: every ps back to the last checkpoint, the steps after it applied once ----
job "$ZD_TMP/long.json" 3000
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/long.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_json "$JOB" "j['state'] == 'running' and j['step'] >= 250" 300
zd_stop ps0 KILL
zd_start ps0_r "$ZDIST_PSD_BIN" --cluster "$CLUSTER" --task ps:0 --checkpoint-root "$ZD_TMP"
zd_wait_psd ps0_r "${ZD_PS_ADDRS[0]}" 60
coord_wait_state "$JOB" done 300
grep -qE "job $JOB: restored every ps from the checkpoint at step" "$ZD_TMP/chief.log" || zd_fail "no restore after the psd restart"
applied_check "$JOB" 3000 "psd restarted"
zd_ok "a psd killed -9 mid-job: restored from the checkpoint, every shard applied exactly 3000 updates"
echo "all $ZD_PASSED checks passed"
