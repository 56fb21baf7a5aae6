#!/usr/bin/env bash
# Issue 36, item 4: a job the workers would refuse is refused at submit, and leaves the chief as it was.
# The attacker submits an mlp with "hidden": [1000000000] and one with 4 million entries: each is refused
# INVALID_ARGUMENT naming the field (the check a worker makes at START_JOB, libzdist's
# zdist_model_params_check; the 4 million before any tree is built, zdist_job_check_size), nothing is stored, no worker sees a job, and the chief's RSS after 1,000
# refused submissions (and the big ones) stays within 2x its idle figure.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/coord_lib.sh"
zd_init sec_model
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
unset ZDIST_KEYS_DIR TF_CONFIG ZDIST_HTTP
OUT=$ZD_TMP/out

coord_cluster 1 1
# Under ASan freed memory waits in a quarantine (256 MiB) before it is reused or returned: a small one, so
# the RSS measures what the chief holds.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4
coord_up 1 1
rss() { awk '/^VmRSS/ { print $2 }' "/proc/${ZD_PID[chief]}/status"; }

# mlp_job FILE HIDDEN_JSON: a synthetic mlp job under parameter_server.
mlp_job() {
    coord_softmax_job "$1" 100
    python3 - "$1" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
h = sys.argv[2]
j["model"] = {"name": "mlp", "params": {"hidden": json.loads(open(h).read() if h.startswith("/") else h)}}
json.dump(j, open(sys.argv[1], "w"))
PY
}

# ---- one absurd width ----
mlp_job "$ZD_TMP/wide.json" '[1000000000]'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/wide.json" --cluster "$CLUSTER" --detach
grep -q "model.params.hidden\[0\]: a layer width is an integer in 1..65536" "$OUT.err" ||
    zd_fail "hidden [1000000000]: $(cat "$OUT.err")"
zd_ok "hidden [1000000000]: refused at submit naming model.params.hidden[0]"

# ---- 4 million widths ----
python3 -c 'print("[" + ",".join(["1"] * 4000000) + "]")' >"$ZD_TMP/long.hidden"
mlp_job "$ZD_TMP/long.json" "$ZD_TMP/long.hidden"
sleep 1
IDLE=$(rss)
for i in 1 2 3; do
    zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/long.json" --cluster "$CLUSTER" --detach
    grep -q "model.params.hidden: more than 65536 entries" "$OUT.err" ||
        zd_fail "hidden of 4 million entries: $(cat "$OUT.err")"
done
zd_ok "hidden of 4 million entries: refused at submit naming model.params.hidden (3 times)"

# ---- 1,000 refused submissions ----
seq 1000 | xargs -P 4 -I{} sh -c '"$0" submit "$1" --cluster "$2" --detach >/dev/null 2>&1; [ $? -eq 2 ]' \
    "$ZDIST_BIN" "$ZD_TMP/wide.json" "$CLUSTER" || zd_fail "a refused submission did not exit 2"
sleep 2
AFTER=$(rss)
echo "    chief RSS: idle ${IDLE} kB, after 3 big and 1000 refused submissions ${AFTER} kB"
((AFTER <= 2 * IDLE)) || zd_fail "the chief's RSS grew from ${IDLE} kB to ${AFTER} kB"
zd_ok "the chief's RSS after the refused submissions is within 2x its idle figure (${IDLE} -> ${AFTER} kB)"

# ---- nothing stored, no worker saw a job ----
[[ -z $(ls -A "$ZD_TMP/state/jobs" 2>/dev/null) ]] || zd_fail "a refused job was stored: $(ls "$ZD_TMP/state/jobs")"
grep -qi "start_job\|starting job\|job .* started" "$ZD_TMP/worker0.log" && zd_fail "the worker saw a job: $(cat "$ZD_TMP/worker0.log")"
zd_ok "nothing stored, no START_JOB on the worker"
echo "PASS: $ZD_PASSED checks"
