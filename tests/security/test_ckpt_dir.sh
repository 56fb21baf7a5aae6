#!/usr/bin/env bash
# Issue 36, item 1: the chief creates nothing where a job's checkpoint.dir points outside its checkpoint
# roots (--checkpoint-root, default its state directory). The attacker, with any client key (here a plain
# cluster), submits checkpoint.dir "/etc", a directory outside the roots, and a symbolic link inside the
# state directory pointing out: each is refused at submit, PERMISSION_DENIED naming checkpoint.dir and the
# flag, and nothing is created there; a directory under a root is still taken.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/coord_lib.sh"
zd_init sec_ckpt_dir
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
unset ZDIST_KEYS_DIR TF_CONFIG ZDIST_HTTP
OUT=$ZD_TMP/out
# Outside the test's directory (the chief's root): a sibling the test removes.
OUTSIDE=$(mktemp -d "${TMPDIR:-/tmp}/zdist-sec-outside.XXXXXX")
ZD_AFTER_STOP="rm -rf $OUTSIDE"

coord_cluster 1 1
coord_up 1 1
coord_softmax_job "$ZD_TMP/ok.json" 100000

# submit_refused NAME DIR: a job with checkpoint.dir DIR is refused at submit (exit 1), PERMISSION_DENIED
# naming the field and the flag; extra text to find in the message is $3.
submit_refused() {
    coord_softmax_job "$ZD_TMP/$1.json" 100 ", \"checkpoint\": {\"dir\": \"$2\"}"
    zd_run_expect 1 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/$1.json" --cluster "$CLUSTER" --detach
    grep -q "PERMISSION_DENIED: checkpoint.dir: '$2'" "$OUT.err" || zd_fail "$1: not refused naming the field: $(cat "$OUT.err")"
    grep -q -- "--checkpoint-root" "$OUT.err" || zd_fail "$1: the refusal does not name the flag: $(cat "$OUT.err")"
    grep -q "${3:-.}" "$OUT.err" || zd_fail "$1: no '$3' in the refusal: $(cat "$OUT.err")"
}

# ---- /etc: nothing created there ----
before=$(ls -a /etc | md5sum)
submit_refused etc /etc "outside the coordinator's checkpoint roots"
[[ $(ls -a /etc | md5sum) == "$before" ]] || zd_fail "/etc changed after the refused submit"
zd_ok "checkpoint.dir /etc: refused at submit naming the field and --checkpoint-root; /etc unchanged"

# ---- a directory outside the roots, missing or there ----
submit_refused outside "$OUTSIDE/new/deeper" "outside the coordinator's checkpoint roots"
submit_refused outside2 "$OUTSIDE" "outside the coordinator's checkpoint roots"
[[ -z $(ls -A "$OUTSIDE") ]] || zd_fail "created under $OUTSIDE: $(ls -A "$OUTSIDE")"
zd_ok "checkpoint.dir outside the roots (missing or existing): refused, nothing created"

# ---- a symbolic link inside the state directory that points out ----
ln -s "$OUTSIDE" "$ZD_TMP/state/link"
submit_refused link "$ZD_TMP/state/link/sub" "resolves to '$(realpath "$OUTSIDE")/sub' (a symbolic link)"
submit_refused link2 "$ZD_TMP/state/link" "a symbolic link"
[[ -z $(ls -A "$OUTSIDE") ]] || zd_fail "created through the link: $(ls -A "$OUTSIDE")"
zd_ok "checkpoint.dir through a symbolic link out of the state dir: refused, nothing created"

# ---- no refused job was stored ----
[[ -z $(ls -A "$ZD_TMP/state/jobs" 2>/dev/null) ]] || zd_fail "a refused job was stored: $(ls "$ZD_TMP/state/jobs")"
zd_ok "no refused job in the chief's state directory"

# ---- under a root: taken ----
coord_softmax_job "$ZD_TMP/in.json" 100000 ", \"checkpoint\": {\"dir\": \"$ZD_TMP/ckpt-in\"}"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/in.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
[[ -d $ZD_TMP/ckpt-in/$JOB ]] || zd_fail "no $ZD_TMP/ckpt-in/$JOB"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
zd_ok "checkpoint.dir under --checkpoint-root: taken ($JOB)"

# ---- the default root is the state directory ----
zd_stop chief
CHIEF2=127.0.0.1:$(zd_free_port)
zd_start chief2 "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --bind "tcp://$CHIEF2" \
    --state-dir "$ZD_TMP/state2"
zd_wait_log chief2 "chief serving at" 60
coord_softmax_job "$ZD_TMP/d.json" 100 ", \"checkpoint\": {\"dir\": \"$ZD_TMP/ckpt-in\"}"
zd_run_expect 1 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/d.json" --coordinator "$CHIEF2" --detach
grep -q "checkpoint.dir: '$ZD_TMP/ckpt-in' is outside the coordinator's checkpoint roots (--checkpoint-root $(realpath "$ZD_TMP/state2"))" "$OUT.err" ||
    zd_fail "default root: $(cat "$OUT.err")"
zd_ok "without --checkpoint-root the root is the state directory"
echo "PASS: $ZD_PASSED checks"
