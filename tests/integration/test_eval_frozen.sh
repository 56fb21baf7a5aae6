#!/usr/bin/env bash
# A parameter_server job whose training ends while one of its workers is
# frozen (SIGSTOP) for longer than the closure deadline: the other worker
# runs the last steps, the evaluation waits for the frozen one to come back
# (its part of the test set is its own) and the job ends done with its test
# accuracy (the chaos soak found it done without one: the evaluation had
# given up after one closure deadline).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init eval_frozen
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN

coord_cluster 1 2
closure_ms=1000
COORD_CHIEF_ARGS="--closure-timeout-ms $closure_ms"
# Worker 1 must freeze while training still runs. With the worker's test
# hook it stops itself after its 10th pushed step, whatever the machine's
# speed; without it (a build without -DZDIST_TEST_HOOKS) the script stops it
# once the job's status shows step 10, which a loaded machine can see only
# after the 6000 steps are done (CI once did: the chief then never lost it).
coord_start_ps 0
coord_start_worker 0
if [[ ${ZDIST_TEST_HOOKS:-0} == 1 ]]; then
    zd_start worker1 env ZDIST_TEST_STOP_AFTER_PUSH=10 "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task worker:1
else
    coord_start_worker 1
fi
coord_start_chief
zd_wait_psd ps0 "${ZD_PS_ADDRS[0]}" 60
for i in 0 1; do zd_wait_log "worker$i" "serving at" 60; done
zd_wait_log chief "chief serving at" 60
coord_softmax_job "$ZD_TMP/job.json" 6000
zd_run_expect 0 "$ZD_TMP/out" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
job=$(cat "$ZD_TMP/out")
if [[ ${ZDIST_TEST_HOOKS:-0} == 1 ]]; then
    zd_wait_log worker1 "test fault: step 10 pushed; SIGSTOP before replying" 120
else
    coord_wait_step "$job" 10 120
    kill -STOP "${ZD_PID[worker1]}"
fi
zd_wait_log chief "job $job: worker 1 .* lost" 60
# Training done: worker 0 has evaluated its part (the status's step is not
# refreshed while the chief evaluates).
zd_wait_log worker0 "job 'syn-softmax@$job' evaluated at step" 300
# Frozen past the closure deadline with every step done. The evaluation began
# before worker 0 had evaluated its part, so from here one deadline
# (closure_ms) must pass: a wait for time itself, three deadlines, during
# which a chief that gives up after one says so ("evaluation failed").
thawed_at=$((SECONDS + 3 * closure_ms / 1000))
held() { ((SECONDS >= thawed_at)) || grep -q "job $job: evaluation failed" "$ZD_TMP/chief.log"; }
zd_wait_until $((3 * closure_ms / 1000 + 5)) "three closure deadlines with worker 1 frozen" held
kill -CONT "${ZD_PID[worker1]}"
coord_wait_state "$job" done 120
zd_json_check "$ZD_TMP/st.json" "j['step'] == 6000 and j['metrics'].get('test_accuracy') is not None"
grep -q "job $job: evaluation failed" "$ZD_TMP/chief.log" && zd_fail "the evaluation failed: $(grep "evaluation failed" "$ZD_TMP/chief.log")"
zd_ok "a worker frozen past the closure deadline as training ends: the evaluation waits for it, the job is done with its accuracy ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics"]["test_accuracy"])' "$ZD_TMP/st.json"))"
