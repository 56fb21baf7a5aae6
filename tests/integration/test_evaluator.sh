#!/usr/bin/env bash
# The sidecar evaluator (zdist-worker --evaluator, TF's SidecarEvaluator): while a parameter_server job trains it
# evaluates the newest checkpoint, appends eval_step/test_loss/test_accuracy to the job's evaluations (shown by
# `zdist status`), skips checkpoints it missed, survives its own kill -9 without re-evaluating older checkpoints,
# and its evaluation of the final checkpoint equals the coordinator's own end-of-job evaluation (same test loss to
# 1e-4 relative: float sums in another order; the previous checkpoint's differs by percents); the same for a
# multi_worker_mirrored job, whose checkpoints are the workers' state.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init evaluator
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
coord_cluster 2 2
EVAL_ADDR="127.0.0.1:$(zd_free_port)"
python3 - "$CLUSTER" "$EVAL_ADDR" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["cluster"]["evaluator"] = [sys.argv[2]]
json.dump(c, open(sys.argv[1], "w"))
PY
mkdir -p "$ZD_TMP/state"

# ---- bad flags are refused, naming the fix ----
zd_run_expect 2 "$OUT" "$ZDIST_WORKER_BIN" --evaluator --cluster "$CLUSTER" --task evaluator:0
grep -q -- "--evaluator needs --state-dir DIR" "$OUT.err" || zd_fail "no --state-dir: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task worker:0 --state-dir "$ZD_TMP/state"
grep -q -- "--state-dir is for --evaluator only" "$OUT.err" || zd_fail "worker with --state-dir: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$ZDIST_WORKER_BIN" --evaluator --cluster "$CLUSTER" --task evaluator:0 --state-dir "$ZD_TMP/nope"
grep -q -- "--state-dir '$ZD_TMP/nope'" "$OUT.err" || zd_fail "missing state dir: $(cat "$OUT.err")"
zd_ok "the evaluator's flags: --state-dir required, an existing directory, and refused on a worker"

HC=$(zd_free_port)
for i in 0 1; do coord_start_ps "$i"; coord_start_worker "$i"; done
zd_start chief "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$ZD_TMP/state" \
    --http "127.0.0.1:$HC"
for i in 0 1; do zd_wait_psd "ps$i" "${ZD_PS_ADDRS[$i]}" 60; zd_wait_log "worker$i" "serving at" 60; done
zd_wait_log chief "chief serving at" 60
EH=$(zd_free_port)
start_evaluator() {
    zd_start "$1" "$ZDIST_WORKER_BIN" --evaluator --cluster "$CLUSTER" --task evaluator:0 --state-dir "$ZD_TMP/state" \
        --http "127.0.0.1:$EH"
    zd_wait_log "$1" "evaluator task 0 serving at" 60
}
start_evaluator eval1


cat >"$ZD_TMP/job.json" <<JSON
{"name": "sidecar", "strategy": {"type": "parameter_server"},
 "model": {"name": "mlp", "params": {"hidden": [128]}}, "optimizer": {"type": "sgd", "learning_rate": 0.0005},
 "dataset": {"format": "synthetic", "synthetic": {"n": 8192, "test_n": 2048, "dim": 64, "classes": 10, "seed": 7},
             "global_batch_size": 64},
 "steps": 2400, "checkpoint": {"every_steps": 100, "keep": 50}, "seed": 3}
JSON
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
EVALS=$ZD_TMP/state/jobs/$JOB/evaluations.jsonl

# ---- evaluations appear while the job trains, at least two distinct steps ----
coord_wait_json "$JOB" 'j["state"] == "running" and len({e["eval_step"] for e in j.get("evaluations", [])}) >= 2' 60
zd_json_check "$ZD_TMP/st.json" 'all(0 < e["test_loss"] < 10 and 0 <= e["test_accuracy"] <= 1 and e["examples"] == 2048 and e["eval_step"] % 100 == 0 for e in j["evaluations"])'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER"
grep -qE "^    eval_step [0-9]+: test_loss [0-9.]+, test_accuracy [0-9.]+$" "$OUT" || zd_fail "zdist status shows no evaluation: $(cat "$OUT")"
zd_ok "evaluations of $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["evaluations"]))' "$ZD_TMP/st.json") checkpoints while the job runs (zdist status --json and text)"

# ---- kill -9 of the evaluator; checkpoints committed meanwhile are skipped, none evaluated twice ----
zd_stop eval1 KILL
LAST=$(python3 -c 'import json,sys; print(max(json.loads(l)["eval_step"] for l in open(sys.argv[1]) if l.strip()))' "$EVALS")
coord_wait_json "$JOB" "j['state'] == 'running' and j['checkpoint_step'] >= $LAST + 300" 60
CKPT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checkpoint_step"])' "$ZD_TMP/st.json")
start_evaluator eval2
zd_wait_log eval2 "job $JOB: evaluated up to step $LAST before \(evaluations.jsonl\): continuing after it" 30
zd_wait_log eval2 "job $JOB: checkpoint at step [0-9]+ evaluated" 60
FIRST=$(grep -oE "job $JOB: checkpoint at step [0-9]+ evaluated" "$ZD_TMP/eval2.log" | head -1 | grep -oE "step [0-9]+" | cut -d' ' -f2)
((FIRST >= CKPT)) || zd_fail "the restarted evaluator began with step $FIRST, older than the newest checkpoint $CKPT at its start"
grep -qE "job $JOB: [0-9]+ older checkpoints? skipped to evaluate the newest" "$ZD_TMP/eval2.log" ||
    zd_fail "no skipped checkpoints logged"
zd_ok "evaluator kill -9: restarted, it continued after step $LAST with the newest checkpoint ($FIRST >= $CKPT), skipping the ones in between"

# ---- the job ends: the final checkpoint is evaluated, as the coordinator's own evaluation ----
coord_wait_state "$JOB" done 120
zd_wait_log eval2 "job $JOB ended \(done\): last evaluation at step 2400" 60
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" '[e["eval_step"] for e in j["evaluations"]] == sorted({e["eval_step"] for e in j["evaluations"]})'
zd_json_check "$OUT" 'j["evaluations"][0]["test_loss"] > j["evaluations"][-1]["test_loss"]'
echo "evaluations: $(python3 -c 'import json,sys; print([(e["eval_step"], round(e["test_loss"], 4), round(e["test_accuracy"], 4)) for e in json.load(open(sys.argv[1]))["evaluations"]])' "$OUT")"
zd_json_check "$OUT" "all(not ($LAST < e['eval_step'] < $FIRST) for e in j['evaluations'])"
zd_json_check "$OUT" 'j["evaluations"][-1]["eval_step"] == 2400 and abs(j["evaluations"][-1]["test_accuracy"] - j["metrics"]["test_accuracy"]) < 1e-9 and abs(j["evaluations"][-1]["test_loss"] - j["metrics"]["test_loss"]) <= 1e-4 * j["metrics"]["test_loss"]'
zd_ok "every eval_step once, ascending; the final checkpoint (step 2400) evaluated with the coordinator's test accuracy $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics"]["test_accuracy"])' "$OUT")"

# ---- the evaluator's /metrics ----
if command -v curl >/dev/null; then
    curl -sf "http://127.0.0.1:$EH/metrics" >"$OUT" || zd_fail "GET the evaluator's /metrics"
    grep -qE '^zdist_evaluator_evaluations_total [1-9]' "$OUT" || zd_fail "no evaluations counted: $(grep evaluator_ "$OUT")"
    grep -qE '^zdist_evaluator_last_eval_step 2400$' "$OUT" || zd_fail "last_eval_step: $(grep last_eval "$OUT")"
    grep -qE '^zdist_evaluator_skipped_checkpoints_total [1-9]' "$OUT" || zd_fail "skips: $(grep skipped "$OUT")"
    if command -v promtool >/dev/null; then
        promtool check metrics <"$OUT" || zd_fail "promtool check metrics refused the evaluator's /metrics"
    fi
    zd_ok "the evaluator's /metrics: evaluations, skipped checkpoints, the last eval_step (promtool: $(command -v promtool >/dev/null && echo checked || echo absent))"
fi

# ---- the dashboard: /api/status carries the evaluations, the page draws them on the loss curve ----
if command -v curl >/dev/null; then
    curl -sf "http://127.0.0.1:$HC/api/status" >"$OUT" || zd_fail "GET /api/status"
    zd_json_check "$OUT" "[len(x['evaluations']) for x in j['jobs'] if x['job_id'] == '$JOB'][0] >= 3"
    CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
    if [[ -n $CHROMIUM ]]; then
        "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$ZD_TMP/chromium" \
            --virtual-time-budget=5000 --window-size=1400,1000 --dump-dom "http://127.0.0.1:$HC/" \
            >"$ZD_TMP/dom.html" 2>"$ZD_TMP/chromium.log" || zd_fail "chromium --dump-dom: $(tail -3 "$ZD_TMP/chromium.log")"
        python3 - "$ZD_TMP/dom.html" "$JOB" <<'PY' || zd_fail "the DOM has no evaluation curve: $(head -c 2000 "$ZD_TMP/dom.html")"
import re, sys
dom, job = open(sys.argv[1]).read(), sys.argv[2]
svg = re.search(r'<svg[^>]*id="loss-' + job + r'"[^>]*data-evaluations="(\d+)"', dom)
assert svg and int(svg.group(1)) >= 3, "data-evaluations"
assert re.search(r'<polyline[^>]*class="eval-line"[^>]*points="[^"]+ [^"]+"', dom), "eval-line"
assert len(re.findall(r'<circle[^>]*class="eval-point"', dom)) >= 3, "eval points"
assert re.search(r'evaluated at step 2400: test accuracy 1\.0000', dom), "the card's fact"
PY
        zd_ok "dashboard (headless Chromium): the job's test-loss points on its loss curve, its last evaluation in the card"
    else
        zd_ok "dashboard: /api/status carries the evaluations (no chromium here to render the page)"
    fi
fi

# ---- a multi_worker_mirrored job: its checkpoints are the workers' state ----
cat >"$ZD_TMP/mwm.json" <<JSON
{"name": "sidecar-mwm", "strategy": {"type": "multi_worker_mirrored"},
 "model": {"name": "mlp", "params": {"hidden": [64]}}, "optimizer": {"type": "adam", "learning_rate": 0.001},
 "dataset": {"format": "synthetic", "synthetic": {"n": 4096, "test_n": 1024, "dim": 32, "classes": 4, "seed": 5},
             "global_batch_size": 64},
 "steps": 1200, "checkpoint": {"every_steps": 100, "keep": 3}, "seed": 3}
JSON
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/mwm.json" --cluster "$CLUSTER" --detach
MJOB=$(cat "$OUT")
coord_wait_state "$MJOB" done 120
zd_wait_log eval2 "job $MJOB ended \(done\): last evaluation at step 1200" 60
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$MJOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'len(j["evaluations"]) >= 2 and j["evaluations"][-1]["eval_step"] == 1200 and j["evaluations"][-1]["examples"] == 1024 and abs(j["evaluations"][-1]["test_accuracy"] - j["metrics"]["test_accuracy"]) < 1e-9 and abs(j["evaluations"][-1]["test_loss"] - j["metrics"]["test_loss"]) <= 1e-4 * j["metrics"]["test_loss"]'
zd_ok "multi_worker_mirrored: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["evaluations"]))' "$OUT") checkpoints evaluated from the workers' state, the final one as the coordinator's evaluation"

zd_stop eval2
[[ $ZD_RC -eq 0 ]] || zd_fail "the evaluator exited $ZD_RC on SIGTERM"
zd_ok "the evaluator stops cleanly on SIGTERM"
echo "passed: $ZD_PASSED"
