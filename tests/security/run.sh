#!/usr/bin/env bash
# Issue 36's holes, each as the attacker's steps against real daemons on 127.0.0.1: runs every
# tests/security/test_*.sh (or those named: run.sh ckpt_dir ps_drop ...) and says which failed.
# Binaries as the integration tests take them: ZDIST_BIN, ZDIST_PSD_BIN, ZDIST_WORKER_BIN,
# ZDIST_COORDINATOR_BIN (default: the ones in ../../build-test, else ../../build).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for b in "$here/../../build-test" "$here/../../build"; do
    [[ -x $b/coordinator/zdist ]] || continue
    : "${ZDIST_BIN:=$b/coordinator/zdist}" "${ZDIST_PSD_BIN:=$b/psd/zdist-psd}"
    : "${ZDIST_WORKER_BIN:=$b/worker/zdist-worker}" "${ZDIST_COORDINATOR_BIN:=$b/coordinator/zdist-coordinator}"
    break
done
export ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
tests=("$@")
if ((${#tests[@]} == 0)); then
    for f in "$here"/test_*.sh; do tests+=("$(basename "$f" .sh)"); done
fi
failed=()
for t in "${tests[@]}"; do
    t=${t#test_}
    echo "==== $t"
    start=$SECONDS
    bash "$here/test_$t.sh"
    rc=$?
    if ((rc == 77)); then
        echo "==== $t: skipped"
    elif ((rc != 0)); then
        failed+=("$t")
        echo "==== $t: FAILED (exit $rc, $((SECONDS - start)) s)"
    else
        echo "==== $t: passed ($((SECONDS - start)) s)"
    fi
done
if ((${#failed[@]})); then
    echo "security: ${#failed[@]} of ${#tests[@]} failed: ${failed[*]}"
    exit 1
fi
echo "security: all ${#tests[@]} passed"
