#!/usr/bin/env bash
# zdist-coordinator end to end: chief, 2 workers, 2 ps on free ports; submit, status, cancel, bad jobs, preflight.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init coordinator
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
C=$ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out

# ---- command line ----
zd_run_expect 0 "$OUT" "$C" --help
grep -q -- "--state-dir DIR" "$OUT" || zd_fail "--help: $(cat "$OUT")"
zd_run_expect 0 "$OUT" "$C" --version
grep -q "^zdist-coordinator " "$OUT" || zd_fail "--version"
coord_cluster 2 2
zd_run_expect 2 "$OUT" "$C" --cluster "$CLUSTER" --task worker:0
grep -q "serves task type 'chief', but the task is 'worker'" "$OUT.err" || zd_fail "worker task: $(cat "$OUT.err")"
zd_ok "command line: --help, --version, --task worker:0 refused"

# ---- preflight: a worker is missing ----
coord_start_ps 0
coord_start_ps 1
coord_start_worker 0
coord_start_chief
zd_wait_psd ps0 "${ZD_PS_ADDRS[0]}" 60
zd_wait_psd ps1 "${ZD_PS_ADDRS[1]}" 60
zd_wait_log worker0 "serving at" 60
zd_wait_log chief "chief serving at" 60
coord_softmax_job "$ZD_TMP/job.json" 200
zd_run_expect 1 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER"
grep -q "preflight: task worker:1 (tcp://${ZD_WORKER_ADDRS[1]})" "$OUT.err" || zd_fail "preflight: $(cat "$OUT.err")"
zd_ok "preflight names the missing task"
coord_start_worker 1
zd_wait_log worker1 "serving at" 60

# ---- bad jobs: exit 2, the field named ----
echo '{"name": "x", "strategy": {"type": "parameter_server"}, "model": {"name": "softmax_regression"}, "optimizer": {"type": "sgd"}, "dataset": {"format": "synthetic", "synthetic": {"n": 64, "dim": 2, "classes": 2}, "global_batch_size": "8"}, "steps": 4}' >"$ZD_TMP/bad.json"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/bad.json" --cluster "$CLUSTER"
grep -q "dataset.global_batch_size" "$OUT.err" || zd_fail "bad batch: $(cat "$OUT.err")"
coord_softmax_job "$ZD_TMP/bad2.json" 10 ', "checkpoint": {"every": 5}'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/bad2.json" --cluster "$CLUSTER"
grep -q "checkpoint.every: unknown field" "$OUT.err" || zd_fail "bad checkpoint: $(cat "$OUT.err")"
sed 's/parameter_server/mirrored/' "$ZD_TMP/job.json" >"$ZD_TMP/bad3.json"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/bad3.json" --cluster "$CLUSTER"
grep -q "strategy.type" "$OUT.err" || zd_fail "mirrored: $(cat "$OUT.err")"
zd_ok "bad jobs refused with exit 2, naming the field"

# ---- a job to its end: exactly the steps, test accuracy, status ----
coord_softmax_job "$ZD_TMP/job.json" 301 ', "checkpoint": {"every_steps": 100, "keep": 2}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == 301 and j["steps"] == 301 and j["metrics"]["test_accuracy"] > 0.6 and "job_id" in j'
JOB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == 301 and len(j["workers"]) == 2 and all(w["closures_done"] > 0 for w in j["workers"]) and len(j["ps"]) == 2 and all(p["requests"] > 0 and p["bytes"] > 0 for p in j["ps"])'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status --coordinator "$ZD_CHIEF"
grep -q "job $JOB (syn-softmax): done, step 301/301" "$OUT" || zd_fail "status: $(cat "$OUT")"
grep -q "worker 1 tcp://" "$OUT" || zd_fail "status workers: $(cat "$OUT")"
D=$ZD_TMP/state/jobs/$JOB
ls "$D" >"$OUT"
[[ -f $D/ckpt-301/manifest.json && -f $D/ckpt-300/manifest.json && ! -e $D/ckpt-100 ]] || zd_fail "checkpoints: $(cat "$OUT")"
[[ -s $D/metrics.jsonl && -s $D/loss.svg ]] || zd_fail "metrics: $(cat "$OUT")"
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$D/metrics.jsonl"
zd_ok "submit: done with exactly 301 steps, test accuracy, checkpoints kept 2 + final, metrics.jsonl, loss.svg"

# ---- status --follow: the STATUS stream, progress lines, then the final status ----
coord_softmax_job "$ZD_TMP/follow.json" 3000
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/follow.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --follow
python3 - "$OUT" "$JOB" <<'PY' || zd_fail "status --follow: $(cat "$OUT")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
final = [i for i, l in enumerate(lines) if l.startswith("job %s (syn-softmax): done, step 3000/3000" % sys.argv[2])]
progress = [i for i, l in enumerate(lines) if re.match(r"step \d+/3000 loss ", l)]
sys.exit(0 if final and len([i for i in progress if i < final[0]]) >= 2 else 1)
PY
grep -q "worker 1 tcp://" "$OUT" || zd_fail "status --follow workers: $(cat "$OUT")"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --follow --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == 3000'
zd_run_expect 1 "$OUT" "$ZDIST_BIN" status nosuchjob --cluster "$CLUSTER" --follow
grep -q "NOT_FOUND" "$OUT.err" || zd_fail "status --follow nosuchjob: $(cat "$OUT.err")"
zd_ok "status --follow: progress lines from the stream, then the final status, exit 0"

# ---- epochs: steps from the workers' steps per epoch ----
sed 's/"steps": 301, //; s/"seed": 3/"seed": 3, "epochs": 1/' "$ZD_TMP/job.json" >"$ZD_TMP/ep.json"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/ep.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["steps"] == 64 and j["step"] == 64'
zd_ok "epochs: 1 epoch = 64 whole global batches shared out by 2 workers"

# ---- cancel ----
coord_softmax_job "$ZD_TMP/long.json" 1000000
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/long.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 20
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
coord_wait_state "$JOB" cancelled 60
zd_run_expect 2 "$OUT" "$ZDIST_BIN" cancel nosuchjob --cluster "$CLUSTER"
zd_ok "cancel"

zd_stop chief
[[ $ZD_RC -eq 0 ]] || zd_fail "chief exit status $ZD_RC after SIGTERM"
zd_ok "SIGTERM: exit 0"
echo "all $ZD_PASSED checks passed"
