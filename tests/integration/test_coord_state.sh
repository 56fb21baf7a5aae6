#!/usr/bin/env bash
# zdist-coordinator's state dir and requests: jobs kept crash-safe with CRC-32s, a damaged job refused at the next start naming its file, bad job ids refused before any handler.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init coord-state
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
coord_cluster 1 1
coord_up 1 1
D=$ZD_TMP/state/jobs

# ---- three short jobs to their end ----
declare -a JOBS
for n in 1 2 3; do
    coord_softmax_job "$ZD_TMP/job$n.json" 20
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job$n.json" --cluster "$CLUSTER" --json
    zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == 20'
    JOBS[$n]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
done
for n in 1 2 3; do
    python3 - "$D/${JOBS[$n]}" <<'PY' || zd_fail "state of ${JOBS[$n]}: $(cat "$D/${JOBS[$n]}/state.json")"
import json, os, sys, zlib
d = sys.argv[1]
st = json.load(open(d + "/state.json"))
doc = open(d + "/job.json", "rb").read()
ok = (isinstance(st.get("crc32"), int) and st["job_crc32"] == zlib.crc32(doc) and st["state"] == "done"
      and not [f for f in os.listdir(d) if ".tmp" in f])
sys.exit(0 if ok else 1)
PY
done
zd_ok "state.json carries its CRC-32 and job.json's; no temp files left beside them"

# ---- damaged on disk while the coordinator is down: refused at start, naming the file ----
zd_stop chief
[[ $ZD_RC -eq 0 ]] || zd_fail "chief exit status $ZD_RC after SIGTERM"
python3 - "$D/${JOBS[1]}/state.json" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
st["step"] += 1  # still JSON, still every field: only the CRC tells
json.dump(st, open(sys.argv[1], "w"), indent=1)
PY
sed -i 's/"steps": 20/"steps": 21/' "$D/${JOBS[2]}/job.json"
coord_start_chief chief2
zd_wait_log chief2 "chief serving at" 60
grep -qF "'$D/${JOBS[1]}' is not a job I can read: $D/${JOBS[1]}/state.json is damaged (CRC-32" "$ZD_TMP/chief2.log" ||
    zd_fail "damaged state.json: $(cat "$ZD_TMP/chief2.log")"
grep -qF "'$D/${JOBS[2]}' is not a job I can read: $D/${JOBS[2]}/job.json: damaged" "$ZD_TMP/chief2.log" ||
    zd_fail "damaged job.json: $(cat "$ZD_TMP/chief2.log")"
zd_run_expect 1 "$OUT" "$ZDIST_BIN" status "${JOBS[1]}" --cluster "$CLUSTER"
grep -q "NOT_FOUND" "$OUT.err" || zd_fail "status of the damaged job: $(cat "$OUT.err")"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "${JOBS[3]}" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == 20 and j["steps"] == 20'
zd_ok "a damaged state.json or job.json is refused at start naming the file; the intact job is still there"

# ---- job ids are bounded: a usage error, before any handler ----
LONG=j$(printf '%063d' 0)
zd_run_expect 2 "$OUT" "$ZDIST_BIN" status "$LONG" --cluster "$CLUSTER"
grep -q "INVALID_ARGUMENT: status: job_id: longer than 63 bytes" "$OUT.err" || zd_fail "status: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" status "$LONG" --cluster "$CLUSTER" --follow
grep -q "job_id: longer than 63 bytes" "$OUT.err" || zd_fail "status --follow: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" cancel "$LONG" --cluster "$CLUSTER"
grep -q "INVALID_ARGUMENT: cancel: job_id: longer than 63 bytes" "$OUT.err" || zd_fail "cancel: $(cat "$OUT.err")"
zd_ok "a job id longer than 63 bytes: exit 2, naming job_id"

zd_stop chief2
[[ $ZD_RC -eq 0 ]] || zd_fail "chief exit status $ZD_RC after SIGTERM"
echo "all $ZD_PASSED checks passed"
