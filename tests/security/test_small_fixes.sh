#!/usr/bin/env bash
# Issue 36, the smaller ones. (1) zdist submit with a key whose role may not submit (a worker's) is refused
# with the PERMISSION_DENIED code that zdist status shows for the same key, and nothing is stored. (2) A
# chief killed -9 mid-job and restarted logs the step it actually restores (its last checkpoint's), the
# same the runner restores, not state.json's lagging one.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/coord_lib.sh"
zd_init sec_small
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
unset ZDIST_KEYS_DIR TF_CONFIG ZDIST_HTTP
OUT=$ZD_TMP/out
coord_cluster 1 1

# ---- (1) a wrong role's submit carries PERMISSION_DENIED ----
KEYS=$ZD_TMP/keys
for name in chief-0 worker-0; do zd_run_expect 0 "$OUT" "$ZDIST_BIN" keygen "$name" --dir "$KEYS"; done
COORD_CHIEF_ARGS="--keys $KEYS" coord_start_chief keyed
zd_wait_log keyed "chief serving at" 60
coord_softmax_job "$ZD_TMP/job.json" 100
zd_run_expect 1 "$OUT" "$ZDIST_BIN" --keys "$KEYS" --key worker-0 status --cluster "$CLUSTER"
grep -q "PERMISSION_DENIED" "$OUT.err" || zd_fail "status with a worker key: $(cat "$OUT.err")"
zd_run_expect 1 "$OUT" "$ZDIST_BIN" --keys "$KEYS" --key worker-0 submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
grep -q "PERMISSION_DENIED" "$OUT.err" || zd_fail "submit with a worker key lacks the code: $(cat "$OUT.err")"
[[ -z $(ls -A "$ZD_TMP/state/jobs" 2>/dev/null) ]] || zd_fail "a refused job was stored"
zd_ok "a worker key's submit: $(head -c 150 "$OUT.err")"
zd_stop keyed

# ---- (2) the restart names the step it restores ----
coord_up 1 1
coord_softmax_job "$ZD_TMP/long.json" 60000 ', "checkpoint": {"every_steps": 500}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/long.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 1600 120
zd_stop chief KILL
coord_start_chief chief2
zd_wait_log chief2 "job $JOB \('syn-softmax'\) was running, its last checkpoint at step [0-9]+: resuming it" 60
said=$(grep -oE "job $JOB .* its last checkpoint at step [0-9]+" "$ZD_TMP/chief2.log" | grep -oE '[0-9]+$')
zd_wait_log chief2 "job $JOB: restored every ps from the checkpoint at step [0-9]+" 60
restored=$(grep -oE "job $JOB: restored every ps from the checkpoint at step [0-9]+" "$ZD_TMP/chief2.log" | grep -oE '[0-9]+$')
((said >= 1500)) || zd_fail "the restart logged step $said, the job was past 1500"
[[ $said == "$restored" ]] || zd_fail "the restart logged step $said, the runner restored $restored"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
zd_ok "a restarted chief logs the step it restores ($said), as its runner does"
echo "PASS: $ZD_PASSED checks"
