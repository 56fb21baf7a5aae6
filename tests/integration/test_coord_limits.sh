#!/usr/bin/env bash
# What a client controls on the chief, each limit a flag: jobs queued or running (--max-queued-jobs), STATUS
# streams open (--max-followers), the size of a request (--max-message-bytes). Past a limit the request is
# refused (RESOURCE_EXHAUSTED naming the flag, or the oversized message dropped) and the chief keeps serving.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init coord-limits
zd_need ZDIST_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out

ZD_WORKER_ADDRS=("127.0.0.1:$(zd_free_port)")
ZD_CHIEF="127.0.0.1:$(zd_free_port)"
CLUSTER=$ZD_TMP/cluster.json
printf '{"cluster": {"chief": ["%s"], "worker": ["%s"]}}\n' "$ZD_CHIEF" "${ZD_WORKER_ADDRS[0]}" >"$CLUSTER"
coord_start_worker 0
zd_start chief "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$ZD_TMP/state" \
    --max-queued-jobs 1 --max-followers 1 --max-message-bytes 65536
zd_wait_log worker0 "serving at" 60
zd_wait_log chief "chief serving at" 60
zd_run_expect 2 "$OUT" "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --max-followers 5000
grep -q -- "--max-followers must be in 1..1024" "$OUT.err" || zd_fail "--max-followers 5000: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --max-calls-per-peer 0
grep -q -- "--max-calls-per-peer must be a number of calls in 1..1048576, got '0'" "$OUT.err" ||
    zd_fail "--max-calls-per-peer 0: $(cat "$OUT.err")"

long_job() { # FILE NAME
    cat >"$1" <<JSON
{"name": "$2", "strategy": {"type": "multi_worker_mirrored"}, "model": {"name": "softmax_regression"},
 "optimizer": {"type": "sgd", "learning_rate": 0.1},
 "dataset": {"format": "synthetic", "synthetic": {"n": 4096, "dim": 16, "classes": 4, "seed": 7}, "global_batch_size": 64},
 "steps": 100000000, "checkpoint": {"every_steps": 1000000}, "seed": 3}
JSON
}
long_job "$ZD_TMP/a.json" a
long_job "$ZD_TMP/b.json" b
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/a.json" --cluster "$CLUSTER" --detach
A=$(cat "$OUT")
zd_run_expect 1 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/b.json" --cluster "$CLUSTER" --detach
grep -q "1 jobs are queued or running, the limit (zdist-coordinator --max-queued-jobs 1)" "$OUT.err" ||
    zd_fail "second job: $(cat "$OUT.err")"
zd_ok "a second job past --max-queued-jobs 1 is refused naming the flag"

# One STATUS stream at a time: the second follower is refused a stream (its client then polls).
zd_start follow1 "$ZDIST_BIN" status "$A" --follow --cluster "$CLUSTER"
zd_wait_log follow1 "step" 60
zd_start follow2 "$ZDIST_BIN" status "$A" --follow --cluster "$CLUSTER"
zd_wait_log chief "status streams open, the limit \(zdist-coordinator --max-followers 1\)" 60
zd_ok "a second STATUS stream past --max-followers 1 is refused naming the flag"

# A request larger than --max-message-bytes never reaches a handler; the chief goes on serving.
python3 - "$ZD_TMP/b.json" "$ZD_TMP/big.json" <<'PY'
import sys
text = open(sys.argv[1]).read()
open(sys.argv[2], "w").write(text.replace('"name": "b"', '"name": "big"' + " " * 100000))
PY
zd_run_expect 1 "$OUT" timeout 120 "$ZDIST_BIN" submit "$ZD_TMP/big.json" --cluster "$CLUSTER" --detach
# The chief drops the connection (libzmq's ZMQ_MAXMSGSIZE): the client sees it closed, or no answer.
grep -qE "closed the connection \(100[0-9]* bytes of job sent\)|does not answer" "$OUT.err" ||
    zd_fail "big job: $(cat "$OUT.err")"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$A" --cluster "$CLUSTER"
coord_wait_state "$A" cancelled 60
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["job_id"] == "'"$A"'"' # the big one made no job
zd_ok "a request past --max-message-bytes is dropped; the chief still serves"
echo "PASS: $ZD_PASSED checks"
