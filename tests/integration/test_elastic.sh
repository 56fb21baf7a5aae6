#!/usr/bin/env bash
# Elastic workers of a parameter_server job (issue 31) on real daemons: a chief, a psd and two workers
# from the cluster file. A third worker joins mid-job (zdist-worker --join CHIEF) and gets closures;
# worker 1 drains (zdist drain worker:1): it finishes what it runs and gets no more; the joined worker
# leaves on SIGTERM (exit 0). `zdist status` shows the membership and its history, and the job ends
# with exactly its steps (the psds apply each step once).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init elastic
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
STEPS=60000

coord_cluster 1 2
coord_up 1 2
zd_ok "a chief, a psd and two workers"

coord_softmax_job "$ZD_TMP/ps.json" $STEPS ', "checkpoint": {"every_steps": 100000}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/ps.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 100 60

# ---- a third worker joins through the chief ----
J_ADDR="127.0.0.1:$(zd_free_port)"
zd_run_expect 2 "$OUT" "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF"
grep -q "needs --bind" "$OUT.err" || zd_fail "--join without --bind: $(cat "$OUT.err")"
zd_start joined "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://$J_ADDR"
zd_wait_log joined "joined the cluster through the chief at tcp://$ZD_CHIEF as worker:2 \(3 workers\)" 60
zd_wait_log chief "worker:2 \(tcp://$J_ADDR\) joined the cluster" 10
coord_wait_json "$JOB" "len(j['workers']) > 2 and j['workers'][2]['closures_done'] > 0 and j['workers'][2]['joined']" 60
zd_ok "worker 2 joined at $J_ADDR and runs closures"

# ---- worker 1 drains: its closures in flight finish, no new ones ----
zd_run_expect 2 "$OUT" "$ZDIST_BIN" drain worker:9 --cluster "$CLUSTER"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" drain ps:0 --cluster "$CLUSTER"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" drain worker:1 --cluster "$CLUSTER"
grep -q "worker:1: draining" "$OUT" || zd_fail "drain: $(cat "$OUT")"
coord_wait_json "$JOB" "j['workers'][1]['state'] == 'left' and j['workers'][1]['in_flight'] == 0" 60
DONE1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workers"][1]["closures_done"])' "$ZD_TMP/st.json")
# 200 steps more without it (or the job's end, when it came first on a fast machine)
coord_wait_json "$JOB" "j['step'] >= $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$ZD_TMP/st.json") + 200 or j['state'] == 'done'" 60
zd_json_check "$ZD_TMP/st.json" "j['workers'][1]['closures_done'] == $DONE1 and j['workers'][1]['state'] == 'left'"
zd_ok "worker 1 drained: left after $DONE1 closures, none since"

# ---- the joined worker leaves on SIGTERM ----
# (On an idle machine the job may end first: then the chief's line is all there is to see.)
zd_stop joined TERM
[[ $ZD_RC -eq 0 ]] || zd_fail "the joined worker exited $ZD_RC on SIGTERM (want 0)"
zd_wait_log chief "worker:2 \(tcp://$J_ADDR\) leaves: SIGTERM" 10
coord_wait_json "$JOB" "j['workers'][2]['state'] == 'left' or j['state'] == 'done'" 60
zd_ok "the joined worker left on SIGTERM ($(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("job %s at step %d" % (j["state"], j["step"]))' "$ZD_TMP/st.json")), exit 0"

coord_wait_state "$JOB" done 120
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" "j['step'] == j['steps'] == $STEPS"
zd_json_check "$OUT" "[(e['event'], e['task']) for e in j['membership_history']] in ([('joined', 2), ('drained', 1), ('drained', 2)], [('joined', 2), ('drained', 1)])"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER"
grep -qE "worker 2 tcp://$J_ADDR \(joined\): (left|idle)" "$OUT" || zd_fail "status text: $(cat "$OUT")"
grep -q "membership: worker 2 tcp://$J_ADDR joined at" "$OUT" || zd_fail "status text: $(cat "$OUT")"
zd_ok "the job ended with exactly $STEPS steps; status shows the membership and its history"

# ---- between jobs: another worker joins (worker:3) and leaves on SIGTERM, holding no job ----
K_ADDR="127.0.0.1:$(zd_free_port)"
zd_start joined2 "$ZDIST_WORKER_BIN" --join "tcp://$ZD_CHIEF" --bind "tcp://$K_ADDR"
zd_wait_log joined2 "joined the cluster through the chief at tcp://$ZD_CHIEF as worker:3 \(4 workers\)" 60
zd_stop joined2 TERM
[[ $ZD_RC -eq 0 ]] || zd_fail "worker:3 exited $ZD_RC on SIGTERM (want 0)"
zd_wait_log chief "worker:3 \(tcp://$K_ADDR\) leaves: SIGTERM" 10
zd_ok "worker:3 joined with no job running and left on SIGTERM"

echo "passed: $ZD_PASSED"
