#!/usr/bin/env bash
# deploy/examples/mirrored_loop.c as two multi_worker_mirrored workers (separate processes, 2 replicas each) over
# a loopback ring: both learn the teacher's weights, hold bitwise the same weights, and report the same losses as
# one mirrored:4 process (the replicas' updates are summed over both workers).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
zd_init strategy_mwm
zd_need MIRRORED_LOOP_BIN

eps="tcp://127.0.0.1:$(zd_free_port),tcp://127.0.0.1:$(zd_free_port)"
zd_start w0 "$MIRRORED_LOOP_BIN" multi_worker_mirrored:2 2 0 "$eps"
zd_start w1 "$MIRRORED_LOOP_BIN" multi_worker_mirrored:2 2 1 "$eps"
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
echo "passed: $ZD_PASSED"
