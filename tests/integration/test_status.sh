#!/usr/bin/env bash
# zdist status says what is true: workers running (job) / lost (since when, why) / running again / idle after
# the job; step-time p50/p99 per worker and a straggler flag; per ps, bytes, requests/s and p99 per method;
# progress lines with the real totals (no "step 0/0", no "0/10" before a 10-step job's end).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init status
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
coord_cluster 1 2
coord_up 1 2

# ---- a 10-step job: no progress line before it ran a step, the end says 10/10 ----
coord_softmax_job "$ZD_TMP/short.json" 10
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/short.json" --cluster "$CLUSTER"
grep -q "done, step 10/10" "$OUT" || zd_fail "10-step job: $(cat "$OUT")"
! grep -qE "step 0/|/0 " "$OUT" || zd_fail "10-step job: a line with step 0 or no total: $(cat "$OUT")"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status --cluster "$CLUSTER"
grep -qE "worker 0 .*: idle," "$OUT" && grep -qE "worker 1 .*: idle," "$OUT" ||
    zd_fail "after the job the workers are idle, not down: $(cat "$OUT")"
! grep -q "down" "$OUT" || zd_fail "a live worker shown down: $(cat "$OUT")"
zd_ok "a 10-step job: no 0/N line, done 10/10, workers idle afterwards"

# ---- an epochs job (steps unknown at submit): every progress line has the real total ----
# 3000 epochs: far longer than losing a worker and getting it back takes, on
# any load (200 epochs, ~10 s unloaded, could end before the kill); cancelled
# once the checks are done.
cat >"$ZD_TMP/long.json" <<JSON
{"name": "long", "strategy": {"type": "parameter_server"},
 "model": {"name": "softmax_regression"}, "optimizer": {"type": "sgd", "learning_rate": 0.1},
 "dataset": {"format": "synthetic", "synthetic": {"n": 4096, "test_n": 256, "dim": 16, "classes": 4, "seed": 7},
             "global_batch_size": 64},
 "epochs": 3000, "steps_per_execution": 2, "seed": 3, "log_every": 100}
JSON
"$ZDIST_BIN" submit "$ZD_TMP/long.json" --cluster "$CLUSTER" >"$ZD_TMP/submit.out" 2>&1 &
SUBMIT_PID=$!
coord_wait_json "" "j['state'] == 'running' and j['step'] >= 400" 120
JOB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$ZD_TMP/st.json")
STEPS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"])' "$ZD_TMP/st.json")
((STEPS >= 3000 * 32)) || zd_fail "3000 epochs of 32 steps or more, the status says $STEPS steps"
zd_json_check "$ZD_TMP/st.json" 'all(w["state"] == "running" and w["job"] == "'"$JOB"'" for w in j["workers"])'
zd_json_check "$ZD_TMP/st.json" \
    'all(0 < w["step_time_p50_s"] <= w["step_time_p99_s"] and w["step_time_samples"] > 0 for w in j["workers"])'
# The psds' figures are refreshed every 2 s (the previous job's variables are gone: dropped when it ended).
coord_wait_json "$JOB" \
    'j["ps"][0]["bytes"] > 0 and any(m["method"] == "push_pull" and m["per_s"] > 0 and m["p99_us"] > 0 and m["requests"] > 0 for m in j["ps"][0]["methods"])' 30
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER"
grep -qE "worker 0 .*: running \(job $JOB\), step time p50 [0-9.e+-]+ ms p99 [0-9.e+-]+ ms over the last minute" "$OUT" ||
    zd_fail "status text: $(cat "$OUT")"
grep -qE "ps 0 .*: [0-9]+ bytes held, [0-9]+ requests;.* push_pull [0-9.]+/s p99 [0-9.e+-]+ ms" "$OUT" ||
    zd_fail "ps line: $(cat "$OUT")"
zd_ok "running: workers running the job with step-time p50/p99, the ps with bytes, requests/s and p99 per method"

# ---- a worker lost: since when and why; back: running again with a rejoin ----
zd_stop worker1 KILL
coord_wait_json "$JOB" 'j["workers"][1]["state"] == "lost" and j["workers"][1]["lost_why"] != "" and j["workers"][1]["lost_ms_ago"] >= 0 and j["workers"][1]["lost_since"] > 1e9' 60
zd_json_check "$ZD_TMP/st.json" 'j["workers"][0]["state"] == "running" and "lost_why" not in j["workers"][0]'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER"
grep -qE "worker 1 .*: lost \(lost since [0-9:]+, [0-9.]+ s ago: .+\)" "$OUT" || zd_fail "lost worker: $(cat "$OUT")"
coord_start_worker 1
zd_wait_log worker1 "serving at" 60
coord_wait_json "$JOB" 'j["workers"][1]["state"] == "running" and j["workers"][1]["restarts"] >= 1 and "lost_why" not in j["workers"][1]' 60
zd_ok "kill -9 of a worker: lost (since, why), then running again with one rejoin"

# ---- the end: the submit's progress lines all had the real total ----
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
rc=0
wait "$SUBMIT_PID" || rc=$?
((rc == 1)) || zd_fail "submit of a cancelled job exited $rc, not 1: $(cat "$ZD_TMP/submit.out")"
grep -q "cancelled" "$ZD_TMP/submit.out" || zd_fail "submit: $(cat "$ZD_TMP/submit.out")"
grep -qE "^step [0-9]+/" "$ZD_TMP/submit.out" || zd_fail "submit printed no progress line: $(cat "$ZD_TMP/submit.out")"
! grep -E "^step " "$ZD_TMP/submit.out" | grep -vqE "^step [1-9][0-9]*/$STEPS loss (-|[0-9])" ||
    zd_fail "a progress line without the real total or a loss: $(grep -E '^step ' "$ZD_TMP/submit.out" | head -3)"
coord_wait_state "$JOB" cancelled 30
coord_wait_json "$JOB" 'all(w["state"] == "idle" and w["up"] for w in j["workers"])' 30
zd_ok "epochs job: every progress line 'step N/$STEPS loss ...', cancelled, both workers idle"

# ---- a straggler: worker 1 stopped most of the time ----
# Closures of 100 steps; worker 1 is SIGSTOPped 300 ms of every 350 ms, so each of its closures spans a stop.
coord_softmax_job "$ZD_TMP/strag.json" 100000
python3 - "$ZD_TMP/strag.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); j["steps_per_execution"] = 100
json.dump(j, open(sys.argv[1], "w"))
PY
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit --detach "$ZD_TMP/strag.json" --cluster "$CLUSTER"
SJOB=$(cat "$OUT")
W1=${ZD_PID[worker1]}
(
    trap 'kill -CONT '"$W1"' 2>/dev/null; exit 0' TERM
    while kill -STOP "$W1" 2>/dev/null; do
        sleep 0.3
        kill -CONT "$W1" 2>/dev/null
        sleep 0.05
    done
) &
zd_adopt stopper $!
coord_wait_json "$SJOB" 'len(j["workers"]) == 2 and all(w.get("step_time_samples", 0) >= 3 for w in j["workers"]) and j["workers"][1]["straggler"] and not j["workers"][0]["straggler"]' 120
# The text line while worker 1 is still being stopped: once it runs freely its
# fast steps pull its p50 back under 2x the median, and the flag goes, as it should.
straggler_shown() {
    "$ZDIST_BIN" status "$SJOB" --cluster "$CLUSTER" >"$OUT" 2>"$OUT.err" && grep -qE "worker 1 .*STRAGGLER" "$OUT"
}
zd_wait_until 60 "zdist status's line for worker 1 saying STRAGGLER (see $OUT)" straggler_shown
zd_stop stopper
kill -CONT "$W1"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$SJOB" --cluster "$CLUSTER"
coord_wait_state "$SJOB" cancelled 60
zd_ok "a worker stopped most of the time is flagged a straggler (>= 2x the median step time), the other not"
echo "PASS: $ZD_PASSED checks"
