#!/usr/bin/env bash
# zdist-psd end to end: real daemons on free localhost ports, driven by psd_driver and the zdist CLI.
source "$(dirname "$0")/lib.sh"
zd_init psd
zd_need ZDIST_BIN ZDIST_PSD_BIN PSD_DRIVER_BIN
D=$PSD_DRIVER_BIN

# ---- start: two ps tasks from a cluster file ----
zd_write_cluster "$ZD_TMP/cluster.json" 2 1
PS0=${ZD_PS_ADDRS[0]}
PS1=${ZD_PS_ADDRS[1]}
zd_start ps0 "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/cluster.json" --task ps:0
zd_start ps1 "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/cluster.json" --task ps:1
zd_wait_psd ps0 "$PS0"
zd_wait_psd ps1 "$PS1"
zd_ok "two psds serving at $PS0 and $PS1"

# ---- create / pull / push / pull_rows / assign / scatter, sgd and adam ----
"$D" basic "$PS0" "$PS1"
zd_ok "basic operations through the client API"

# ---- zdist ps stats / get ----
OUT=$ZD_TMP/out
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps stats "$PS0" --json
zd_json_check "$OUT" 'j["ps_task"] == 0 and j["variables"] == 2 and any(s["name"] == "w" for s in j["shard_info"]) and j["value_bytes"] > 0 and any(m["name"] == "push" and m["requests"] >= 2 for m in j["methods"])'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps stats "tcp://$PS1"
grep -q "ps task 1 at tcp://$PS1" "$OUT" || zd_fail "stats table: $(cat "$OUT")"
grep -qE '^  push +[0-9]+' "$OUT" || zd_fail "stats table lacks the push line"
# w [10,4] in 3 shards: parts 0 (rows 0..3) and 2 (rows 7..9) on ps0, part 1 (rows 4..6) on ps1.
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps get "$PS0" w --json
zd_json_check "$OUT" 'len(j) == 7 and all(len(r) == 4 for r in j) and j[5] == [42, 42, 42, 42]'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps get "$PS0" w --rows 8:10 --json
zd_json_check "$OUT" 'len(j) == 2 and j[0] == [42, 42, 42, 42] and all(isinstance(x, float) for x in j[1])'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps get "$PS1" w --shard 1 --json
zd_json_check "$OUT" 'len(j) == 3 and all(len(r) == 4 for r in j)'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps get "$PS0" w --rows 8:9
grep -qE '^ +8: 42 42 42 42$' "$OUT" || zd_fail "get table: $(cat "$OUT")"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps get "$PS0" a --json
zd_json_check "$OUT" 'len(j) == 2 and abs(j[0][0] - 0.4052638) < 2e-5'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" ps get "$PS0" w --rows 3:5
grep -q "not all on ps task 0" "$OUT.err" || zd_fail "rows on another psd: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" ps get "$PS0" w --rows 5:3
zd_run_expect 2 "$OUT" "$ZDIST_BIN" ps get "$PS0" w --rows 0:11
zd_run_expect 2 "$OUT" "$ZDIST_BIN" ps get "$PS0" w --shard 1
zd_run_expect 2 "$OUT" "$ZDIST_BIN" ps get "$PS0" nope
grep -q "'nope' is not on ps task 0" "$OUT.err" || zd_fail "unknown variable: $(cat "$OUT.err")"
[[ $(wc -l <"$OUT.err") -eq 1 ]] || zd_fail "more than one line on stderr"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" ps get "http://$PS0" w
zd_run_expect 2 "$OUT" "$ZDIST_BIN" ps stats 127.0.0.1:0
zd_run_expect 2 "$OUT" "$ZDIST_BIN" ps frob "$PS0"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps --help
grep -q "zdist ps get ADDR VAR" "$OUT" || zd_fail "--help"
DEAD=127.0.0.1:$(zd_free_port)
zd_run_expect 1 "$OUT" "$ZDIST_BIN" ps stats "$DEAD" --timeout 300
grep -q "no answer from tcp://$DEAD" "$OUT.err" || zd_fail "unreachable: $(cat "$OUT.err")"
grep -q "DEADLINE_EXCEEDED" "$OUT.err" || zd_fail "unreachable: status missing: $(cat "$OUT.err")"
zd_ok "zdist ps stats / get: JSON, table, --rows, --shard, exit 2 on bad input, exit 1 when unreachable"

# ---- 8 clients x 10,000 assign_add while a reader checks rows ----
"$D" concurrency "$PS0"
zd_ok "concurrency"

# ---- exactly once, including a real retransmission to a stopped psd ----
"$D" exactly-once "$PS1" "${ZD_PID[ps1]}"
zd_ok "exactly-once"

# ---- push_pull: one message per ps and step, exactly once, values after the update ----
"$D" push-pull "$PS1" "${ZD_PID[ps1]}"
zd_ok "push-pull"

# ---- exactly once across kill -9: the dedup table is restored with the checkpoint ----
RD=$ZD_TMP/restart-dedup
PS6=127.0.0.1:$(zd_free_port)
zd_start ps6 "$ZDIST_PSD_BIN" --bind "tcp://$PS6"
zd_wait_psd ps6 "$PS6"
"$D" restart-dedup before "$PS6" "$RD"
zd_stop ps6 KILL
[[ $ZD_RC -eq 137 ]] || zd_fail "kill -9 of ps6: exit status $ZD_RC"
zd_start ps6b "$ZDIST_PSD_BIN" --bind "tcp://$PS6"
zd_wait_psd ps6b "$PS6"
"$D" restart-dedup after "$PS6" "$RD"
zd_stop ps6b
zd_ok "exactly-once across kill -9 and a restore: retransmitted writes the checkpoint holds answered duplicate"

# ---- bad input: each refused with its status, nothing changed, still serving ----
"$D" bad-input "$PS0"
grep -q "refused" "$ZD_TMP/ps0.log" || zd_fail "refusals are not logged"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps stats "$PS0" --json
zd_json_check "$OUT" 'all(m["errors"] >= 0 for m in j["methods"]) and sum(m["errors"] for m in j["methods"]) >= 10'
zd_ok "bad input"

# ---- checkpoint: 3 shards on 2 psds -> 1 shard on 1 psd ----
CK=$ZD_TMP/ckpt
"$D" ckpt-save "$CK" "$PS0" "$PS1"
ls "$CK"/manifest-ps0.json "$CK"/manifest-ps1.json >/dev/null || zd_fail "manifests missing: $(ls "$CK")"
PS2=127.0.0.1:$(zd_free_port)
zd_start ps2 "$ZDIST_PSD_BIN" --bind "tcp://$PS2"
zd_wait_psd ps2 "$PS2"
"$D" ckpt-check "$CK" "$PS2"
zd_stop ps2
zd_ok "save on 2 psds, restore onto 1"

# ---- kill -9 during a save, and after one: the last checkpoint restores whole ----
BIG=$ZD_TMP/big
BIG_MIB=${ZD_BIG_MIB:-64}
for when in during after; do
    rm -rf "$BIG"
    PS3=127.0.0.1:$(zd_free_port)
    zd_start ps3 "$ZDIST_PSD_BIN" --bind "tcp://$PS3"
    zd_wait_psd ps3 "$PS3"
    "$D" big-save "$BIG" "$PS3" 1 1 "$BIG_MIB" >"$ZD_TMP/big1.out"
    zd_start save2 "$D" big-save "$BIG" "$PS3" 2 2 "$BIG_MIB"
    if [[ $when == during ]]; then
        zd_wait_log save2 "saving step 2" 120
        sleep 0.02
    else
        zd_wait_log save2 "ok: saved 'big'.*step 2" 120
    fi
    zd_stop ps3 KILL
    [[ $ZD_RC -eq 137 ]] || zd_fail "kill -9 of the psd: exit status $ZD_RC"
    zd_stop save2 TERM
    PS4=127.0.0.1:$(zd_free_port)
    zd_start ps4 "$ZDIST_PSD_BIN" --bind "tcp://$PS4"
    zd_wait_psd ps4 "$PS4"
    "$D" big-check "$BIG" "$PS4" "$BIG_MIB" | tee "$ZD_TMP/check.out"
    if [[ $when == after ]]; then
        grep -q "step 2" "$ZD_TMP/check.out" || zd_fail "after a completed save, step 2 must restore"
    fi
    zd_stop ps4
    [[ $ZD_RC -eq 0 ]] || zd_fail "ps4 exit status $ZD_RC"
    zd_ok "kill -9 $when a save of $BIG_MIB MiB: $(grep -o 'step [0-9]' "$ZD_TMP/check.out" | head -1) restores whole"
done

# ---- limits: oversized requests and replies ----
PS5=127.0.0.1:$(zd_free_port)
zd_start ps5 "$ZDIST_PSD_BIN" --bind "tcp://$PS5" --max-message-bytes 65536 --max-tensor-bytes 65536
zd_wait_psd ps5 "$PS5"
"$D" oversized "$PS5"
zd_stop ps5
[[ $ZD_RC -eq 0 ]] || zd_fail "ps5 exit status $ZD_RC"
zd_ok "oversized"
PS6=127.0.0.1:$(zd_free_port)
zd_start ps6 "$ZDIST_PSD_BIN" --bind "tcp://$PS6" --max-variables 3 --max-bytes 65536
zd_wait_psd ps6 "$PS6"
"$D" held "$PS6"
grep -q "psd --max-variables 3" "$ZD_TMP/ps6.log" || zd_fail "ps6 did not log the refused create"
zd_stop ps6
zd_ok "variables and bytes per psd: --max-variables, --max-bytes"
PS8=127.0.0.1:$(zd_free_port)
zd_start ps8 "$ZDIST_PSD_BIN" --bind "tcp://$PS8" --max-bytes 300000 --live-job-seconds 0
zd_wait_psd ps8 "$PS8"
"$D" drop "$PS8"
grep -q "dropped job j1: 2 shards, 131328 bytes" "$ZD_TMP/ps8.log" || zd_fail "ps8 did not log the drop: $(grep drop "$ZD_TMP/ps8.log")"
# The operator's form: zdist ps drop ADDR JOB (j2/w and j3/w are left).
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps drop "$PS8" j2
grep -q "^ps task 0 at tcp://$PS8: dropped job j2: 1 shards, 128.0 KiB freed$" "$OUT" || zd_fail "ps drop: $(cat "$OUT")"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps drop "$PS8" j3 --json
zd_json_check "$OUT" 'j == {"ps_task": 0, "job": "j3", "shards": 1, "bytes": 131072}'
zd_run_expect 1 "$OUT" "$ZDIST_BIN" ps drop "$PS8" "a/b"
grep -q "INVALID_ARGUMENT: drop_job: job 'a/b': byte 1 is not one of" "$OUT.err" || zd_fail "ps drop a/b: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" ps drop "$PS8"
grep -q "drop needs ADDR (host:port of a zdist-psd) and JOB" "$OUT.err" || zd_fail "ps drop without JOB: $(cat "$OUT.err")"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" ps stats "$PS8" --json
zd_json_check "$OUT" 'j["shards"] == 0 and j["value_bytes"] == 0'
zd_stop ps8
[[ $ZD_RC -eq 0 ]] || zd_fail "ps8 exit status $ZD_RC"
zd_ok "drop_job: a job's shards go with a pull in flight, another's stay, the bytes count back toward --max-bytes"

# ---- checkpoint roots: SAVE/RESTORE name directories under --checkpoint-root only ----
PS7=127.0.0.1:$(zd_free_port)
mkdir -p "$ZD_TMP/ckroot" "$ZD_TMP/ckout"
zd_start ps7 "$ZDIST_PSD_BIN" --bind "tcp://$PS7" --checkpoint-root "$ZD_TMP/ckroot"
zd_wait_psd ps7 "$PS7"
"$D" ckpt-confine "$PS7" "$ZD_TMP/ckroot" "$ZD_TMP/ckout"
[[ -f $ZD_TMP/ckroot/ckpt-1/manifest-ps0.json ]] || zd_fail "no checkpoint under the root"
[[ ! -e $ZD_TMP/escaped ]] || zd_fail "'..' escaped the root"
zd_stop ps7
zd_run_expect 2 "$OUT" "$ZDIST_PSD_BIN" --bind "tcp://$PS7" --checkpoint-root "$ZD_TMP/no-such-dir"
grep -q -- "--checkpoint-root '$ZD_TMP/no-such-dir': No such file or directory" "$OUT.err" ||
    zd_fail "missing root: $(cat "$OUT.err")"
grep -q "no --checkpoint-root" "$ZD_TMP/ps6.log" || zd_fail "ps6 did not warn that it has no checkpoint root"
zd_ok "checkpoint roots: --checkpoint-root confines SAVE/RESTORE (outside, '..', symlink out refused)"

# ---- refusals at start, --help ----
zd_run_expect 2 "$OUT" "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/cluster.json" --task worker:0
grep -q "serves task type 'ps'" "$OUT.err" || zd_fail "--task worker:0: $(cat "$OUT.err")"
grep -q "zdist-worker" "$OUT.err" || zd_fail "--task worker:0 does not point at zdist-worker"
zd_run_expect 2 "$OUT" "$ZDIST_PSD_BIN" --max-message-bytes 12
zd_run_expect 0 "$OUT" "$ZDIST_PSD_BIN" --help
zd_ok "--task worker:0 refused with exit 2 and a message; --help"

# ---- SIGTERM: exit 0 ----
for p in ps0 ps1; do
    zd_stop $p TERM
    [[ $ZD_RC -eq 0 ]] || zd_fail "$p exited $ZD_RC on SIGTERM"
    grep -q "stopped" "$ZD_TMP/$p.log" || zd_fail "$p did not log 'stopped'"
done
zd_ok "SIGTERM -> exit 0"

echo "test_psd: $ZD_PASSED checks passed"
