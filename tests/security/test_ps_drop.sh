#!/usr/bin/env bash
# Issue 36, item 2: zdist ps drop does not kill a running job. With the chief's rights (a plain cluster),
# the attacker drops a running job's variables from its psd: refused FAILED_PRECONDITION naming --force
# (the psd saw the job write within --live-job-seconds), the shards stay and the job trains on. Forced, the
# variables go, and the job restores them from its last checkpoint as after a psd loss and ends done. Under
# CURVE, `zdist --keys DIR --key chief-0 ps drop ADDR JOB` without TF_CONFIG finds the psd's key by
# --server-key NAME or the key directory's `servers` file.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/coord_lib.sh"
zd_init sec_drop
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
unset ZDIST_KEYS_DIR TF_CONFIG ZDIST_HTTP
OUT=$ZD_TMP/out

coord_cluster 1 1
coord_up 1 1
PS=${ZD_PS_ADDRS[0]}
coord_softmax_job "$ZD_TMP/job.json" 40000 ', "checkpoint": {"every_steps": 500}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 1200 120
shards() { "$ZDIST_BIN" ps stats "$PS" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["shards"])'; }
before=$(shards)
((before > 0)) || zd_fail "the psd holds no shards of the running job"

# ---- unforced: refused, nothing dropped ----
zd_run_expect 1 "$OUT" "$ZDIST_BIN" ps drop "$PS" "$JOB"
grep -q "FAILED_PRECONDITION: drop_job: job '$JOB' is live here" "$OUT.err" || zd_fail "drop of a live job: $(cat "$OUT.err")"
grep -q -- "--force" "$OUT.err" || zd_fail "the refusal does not name --force: $(cat "$OUT.err")"
[[ $(shards) == "$before" ]] || zd_fail "shards changed after the refused drop: $before -> $(shards)"
step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$ZD_TMP/st.json")
coord_wait_step "$JOB" $((step + 100)) 60
zd_ok "zdist ps drop of a running job: refused FAILED_PRECONDITION naming --force; its $before shards stay, it trains on"

# ---- forced: the job restores from its last checkpoint and ends done ----
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps drop "$PS" "$JOB" --force
grep -q "dropped job $JOB: $before shards" "$OUT" || zd_fail "forced drop: $(cat "$OUT")"
zd_wait_log chief "job $JOB: restored every ps from the checkpoint at step [1-9]" 120
coord_wait_state "$JOB" done 300
zd_ok "forced: the job's variables vanished and it restored them from its last checkpoint, then ended done"

# ---- the chief's own drop of the ended job needs no --force ----
zd_wait_log chief "job $JOB: dropped its variables from ps 0" 60
[[ $(shards) == 0 ]] || zd_fail "the ended job's shards were not dropped by the chief: $(shards)"
zd_ok "the chief's drop of the ended job (its word that it ended) is done at once"

# ---- CURVE: the psd's key found by address without TF_CONFIG ----
KEYS=$ZD_TMP/keys
for name in ps-0 chief-0; do zd_run_expect 0 "$OUT" "$ZDIST_BIN" keygen "$name" --dir "$KEYS"; done
PK=127.0.0.1:$(zd_free_port)
zd_start psk "$ZDIST_PSD_BIN" --bind "tcp://$PK" --task ps:0 --keys "$KEYS" --cluster "$CLUSTER"
zd_wait_log psk "serving at" 60
zd_run_expect 2 "$OUT" "$ZDIST_BIN" --keys "$KEYS" --key chief-0 ps drop "$PK" jgone
grep -q -- "--server-key NAME" "$OUT.err" || zd_fail "no key known: $(cat "$OUT.err")"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" --keys "$KEYS" --key chief-0 --server-key ps-0 ps drop "$PK" jgone
grep -q "dropped job jgone: 0 shards" "$OUT" || zd_fail "--server-key: $(cat "$OUT")"
echo "$PK ps-0" >"$KEYS/servers"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" --keys "$KEYS" --key chief-0 ps drop "$PK" jgone
grep -q "dropped job jgone: 0 shards" "$OUT" || zd_fail "the key directory's servers file: $(cat "$OUT")"
zd_ok "under CURVE without TF_CONFIG: the server's key by --server-key or DIR/servers"
echo "PASS: $ZD_PASSED checks"
