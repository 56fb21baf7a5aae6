#!/usr/bin/env bash
# deploy/examples/mirrored_loop.c as two multi_worker_mirrored workers (separate processes, 2 replicas each, each
# given only its TF_CONFIG: the Strategy object forms the ring over the cluster's addresses): both learn the teacher's weights, hold bitwise the same weights, and report the same losses as
# one mirrored:4 process (the replicas' updates are summed over both workers).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
zd_init strategy_mwm
zd_need MIRRORED_LOOP_BIN

# Each worker gets only TF_CONFIG naming its task: the strategy forms the ring from it.
cluster="{\"worker\": [\"127.0.0.1:$(zd_free_port)\", \"127.0.0.1:$(zd_free_port)\"]}"
TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": 0}}" \
    zd_start w0 "$MIRRORED_LOOP_BIN" multi_worker_mirrored:2 2
TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": 1}}" \
    zd_start w1 "$MIRRORED_LOOP_BIN" multi_worker_mirrored:2 2
for w in w0 w1; do
    if wait "${ZD_PID[$w]}"; then zd_ok "$w exited 0 (weights within 0.05 of the teacher's)"; else
        zd_fail "$w exited $?"
    fi
done
grep -q "MultiWorkerMirroredStrategy, 4 replicas" "$ZD_TMP/w0.log" || zd_fail "w0 did not report 4 replicas in sync"
w0=$(grep '^weights:' "$ZD_TMP/w0.log")
w1=$(grep '^weights:' "$ZD_TMP/w1.log")
[[ -n $w0 && $w0 == "$w1" ]] || zd_fail "the workers' weights differ: '$w0' vs '$w1'"
zd_ok "both workers hold bitwise the same weights"

"$MIRRORED_LOOP_BIN" mirrored:4 2 >"$ZD_TMP/mirrored.log" 2>&1 || zd_fail "mirrored:4 failed"
diff <(grep '^epoch' "$ZD_TMP/w0.log") <(grep '^epoch' "$ZD_TMP/mirrored.log") ||
    zd_fail "losses per epoch differ between 2 workers x 2 replicas and mirrored:4"
zd_ok "losses per epoch equal mirrored:4's"
# The same weights as one worker with all 4 replicas, up to float32 rounding: the ring adds each worker's sum of
# its 2 replicas, (r0+r1)+(r2+r3), where one worker adds r0+r1+r2+r3 in turn.
paste <(grep '^values:' "$ZD_TMP/w0.log" | tr ' ' '\n' | tail -n +2) \
    <(grep '^values:' "$ZD_TMP/mirrored.log" | tr ' ' '\n' | tail -n +2) >"$ZD_TMP/values"
[[ $(wc -l <"$ZD_TMP/values") == 9 ]] || zd_fail "expected 9 weights from each run: $(cat "$ZD_TMP/values")"
awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5) bad = 1 } END { exit bad }' "$ZD_TMP/values" ||
    zd_fail "2 workers x 2 replicas and one worker with the 4 replicas trained different weights: $(cat "$ZD_TMP/values")"
zd_ok "the trained weights are those of one worker with all 4 replicas (within 1e-5)"

# A task that is no worker of the cluster is refused, naming TF_CONFIG's task.
ps_cfg="{\"cluster\": {\"worker\": [\"127.0.0.1:$(zd_free_port)\"], \"ps\": [\"127.0.0.1:$(zd_free_port)\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}"
if TF_CONFIG="$ps_cfg" "$MIRRORED_LOOP_BIN" multi_worker_mirrored:2 1 >"$ZD_TMP/ps.log" 2>&1; then
    zd_fail "a ps task ran multi_worker_mirrored"
fi
grep -q 'task (TF_CONFIG.s "task") to be the chief or a worker, not ps' "$ZD_TMP/ps.log" ||
    zd_fail "the ps task's refusal does not say why: $(cat "$ZD_TMP/ps.log")"
zd_ok "a ps task is refused: multi_worker_mirrored needs the chief or a worker"
echo "passed: $ZD_PASSED"
