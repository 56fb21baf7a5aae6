#!/usr/bin/env bash
# Elastic workers through TF_CONFIG (issue 31) on real daemons: a chief, a psd and two workers from the
# cluster file; a worker started with a TF_CONFIG whose task (worker:2) is not in the chief's cluster joins
# through the chief TF_CONFIG names, without --join, and runs closures of the running parameter_server
# job. worker:4 started before worker:3 waits (FAILED_PRECONDITION, said once) and joins after it. A
# TF_CONFIG whose cluster disagrees with the chief's (another ps address; another address for worker:0)
# is refused naming the difference, and that worker exits 1. The cluster file's workers are told they
# are members; nothing changes for them.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init elastic_tf
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
unset TF_CONFIG ZDIST_KEYS_DIR
OUT=$ZD_TMP/out

coord_cluster 1 2
coord_up 1 2
zd_wait_log worker0 "the chief at tcp://$ZD_CHIEF has worker:0 in its cluster" 60
zd_ok "a chief, a psd and two workers; the cluster file's workers are members"

coord_softmax_job "$ZD_TMP/ps.json" 1000000 ', "checkpoint": {"every_steps": 1000000}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/ps.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 100 60

# tf_config INDEX ADDR [PS_ADDR [WORKER0_ADDR]]: the cluster file's cluster, worker:INDEX at ADDR added
# (a sparse worker job: {"0": ..., "1": ..., "INDEX": ADDR}), optionally another ps:0 or worker:0.
tf_config() {
    python3 - "$CLUSTER" "$@" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["cluster"]
index, addr = sys.argv[2], sys.argv[3]
c["worker"] = {str(i): a for i, a in enumerate(c["worker"])}
c["worker"][index] = addr
if len(sys.argv) > 4 and sys.argv[4]:
    c["ps"] = [sys.argv[4]]
if len(sys.argv) > 5:
    c["worker"]["0"] = sys.argv[5]
print(json.dumps({"cluster": c, "task": {"type": "worker", "index": int(index)}}))
PY
}

# ---- worker:2 from TF_CONFIG joins, no --join ----
A2="127.0.0.1:$(zd_free_port)"
TF_CONFIG=$(tf_config 2 "$A2") zd_start tf2 "$ZDIST_WORKER_BIN"
zd_wait_log tf2 "joined the cluster through the chief at tcp://$ZD_CHIEF as worker:2 \(3 workers\); reached at tcp://$A2" 60
zd_wait_log chief "worker:2 \(tcp://$A2\) joined the cluster: 3 workers" 10
coord_wait_json "$JOB" "len(j['workers']) > 2 and j['workers'][2]['joined'] and j['workers'][2]['closures_done'] > 0" 120
zd_ok "worker:2 (TF_CONFIG, not in the chief's cluster) joined and runs closures"

# ---- worker:4 before worker:3: it waits, then joins after worker:3 ----
A3="127.0.0.1:$(zd_free_port)"
A4="127.0.0.1:$(zd_free_port)"
TF_CONFIG=$(tf_config 4 "$A4") zd_start tf4 "$ZDIST_WORKER_BIN"
zd_wait_log tf4 "FAILED_PRECONDITION: join: worker:4 is not the chief's next worker \(it has 3: worker:3 joins next\)" 60
! grep -q "joined the cluster" "$ZD_TMP/tf4.log" || zd_fail "worker:4 joined before worker:3"
TF_CONFIG=$(tf_config 3 "$A3") zd_start tf3 "$ZDIST_WORKER_BIN"
zd_wait_log tf3 "as worker:3 \(4 workers\)" 60
zd_wait_log tf4 "as worker:4 \(5 workers\)" 60
coord_wait_json "$JOB" "len(j['workers']) == 5 and all(w['closures_done'] > 0 for w in j['workers'][3:])" 120
zd_ok "worker:4 waited for worker:3, then both joined and run closures"

# ---- a TF_CONFIG whose cluster disagrees with the chief's: refused, naming the difference; exit 1 ----
BAD_PS="127.0.0.1:$(zd_free_port)"
A5="127.0.0.1:$(zd_free_port)"
TF_CONFIG=$(tf_config 5 "$A5" "$BAD_PS") zd_start bad_ps "$ZDIST_WORKER_BIN"
zd_wait_until 60 "the worker whose ps disagrees exits" zd_exited bad_ps
zd_wait bad_ps
[[ $ZD_RC -eq 1 ]] || zd_fail "the worker whose ps disagrees exited $ZD_RC (want 1)"
grep -q "INVALID_ARGUMENT: join: worker:5's cluster disagrees with the chief's: ps:0 is tcp://$BAD_PS there, tcp://${ZD_PS_ADDRS[0]} here" \
    "$ZD_TMP/bad_ps.log" || zd_fail "ps disagreement: $(cat "$ZD_TMP/bad_ps.log")"
BAD_W0="127.0.0.1:$(zd_free_port)"
TF_CONFIG=$(tf_config 5 "$A5" "" "$BAD_W0") zd_start bad_w0 "$ZDIST_WORKER_BIN"
zd_wait_until 60 "the worker whose worker:0 disagrees exits" zd_exited bad_w0
zd_wait bad_w0
[[ $ZD_RC -eq 1 ]] || zd_fail "the worker whose worker:0 disagrees exited $ZD_RC (want 1)"
grep -q "join: worker:5's cluster disagrees with the chief's: worker:0 is tcp://$BAD_W0 there, tcp://${ZD_WORKER_ADDRS[0]} here" \
    "$ZD_TMP/bad_w0.log" || zd_fail "worker:0 disagreement: $(cat "$ZD_TMP/bad_w0.log")"
! grep -q "tcp://$A5) joined" "$ZD_TMP/chief.log" || zd_fail "the chief took in a worker whose cluster disagrees"
zd_ok "a TF_CONFIG whose cluster disagrees is refused naming the difference: $(grep -o "disagrees with the chief's: [^;]*" "$ZD_TMP/bad_w0.log" | head -1)"

# ---- the joined workers leave on SIGTERM; the job goes on ----
for w in tf2 tf3 tf4; do
    zd_stop "$w" TERM
    [[ $ZD_RC -eq 0 ]] || zd_fail "$w exited $ZD_RC on SIGTERM (want 0)"
done
coord_wait_json "$JOB" "[w['state'] for w in j['workers'][2:]] == ['left'] * 3" 60
zd_json_check "$ZD_TMP/st.json" "[(e['event'], e['task']) for e in j['membership_history']][:3] == [('joined', 2), ('joined', 3), ('joined', 4)]"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
coord_wait_state "$JOB" cancelled 60
zd_ok "the joined workers left on SIGTERM; the membership history holds their joins"
echo "passed: $ZD_PASSED"
