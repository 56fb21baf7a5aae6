#!/usr/bin/env bash
# Issue 36, item 3: diagnoses that send operators after the right thing. (1) On a plain cluster 200
# connections from 127.0.0.1 fill the chief's --max-connections-per-peer: zdist status says its connection
# was refused by that limit, naming the flag (RESOURCE_EXHAUSTED), not "UNAUTHENTICATED: it speaks CURVE";
# the attacker's extra connections are shut down. (2) On a keyed cluster the chief is killed (-9) while a
# client's CURVE handshake with it is under way: that is a lost connection, retried: once the chief is
# back the same zdist status gets its answer, and nothing speaks of keys.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/coord_lib.sh"
zd_init sec_diag
zd_need ZDIST_BIN ZDIST_COORDINATOR_BIN
unset ZDIST_KEYS_DIR TF_CONFIG ZDIST_HTTP
OUT=$ZD_TMP/out
coord_cluster 1 1

# ---- (1) the connection limit, named ----
COORD_CHIEF_ARGS="--max-connections-per-peer 20" coord_start_chief
zd_wait_log chief "chief serving at" 60
PORT=${ZD_CHIEF##*:}
python3 - "$PORT" 200 10 >"$ZD_TMP/hold.log" 2>&1 <<'PY' &
import socket, sys, time
port, n, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
print("holding", len(socks), flush=True)
time.sleep(secs)
closed = 0
for s in socks:  # the chief's greeting, then its end of the connection (or nothing yet)
    s.setblocking(False)
    try:
        while s.recv(4096):
            pass
        closed += 1
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
print("closed by the chief:", closed, flush=True)
PY
HOLD=$!
for _ in $(seq 100); do grep -qs holding "$ZD_TMP/hold.log" && break; sleep 0.1; done
zd_run_expect 1 "$OUT" "$ZDIST_BIN" status --cluster "$CLUSTER"
grep -q "RESOURCE_EXHAUSTED" "$OUT.err" && grep -q -- "--max-connections-per-peer 20" "$OUT.err" ||
    zd_fail "a connection past the limit: $(cat "$OUT.err")"
grep -qi "UNAUTHENTICATED\|CURVE\|keys" "$OUT.err" && zd_fail "the limit was taken for a key problem: $(cat "$OUT.err")"
wait "$HOLD"
grep -q "closed by the chief: 1[0-9][0-9]" "$ZD_TMP/hold.log" || zd_fail "the extra connections were not shut down: $(cat "$ZD_TMP/hold.log")"
zd_ok "past --max-connections-per-peer zdist status says so, naming the flag: $(head -c 160 "$OUT.err")"
# No job yet: the chief's answer is NOT_FOUND (exit 1).
zd_run_expect 1 "$OUT" "$ZDIST_BIN" status --cluster "$CLUSTER"
grep -q "no such job yet" "$OUT.err" || zd_fail "after the attack: $(cat "$OUT.err")"
zd_ok "once the connections are gone zdist status answers"
zd_stop chief

# ---- (2) the chief killed during the CURVE handshake ----
KEYS=$ZD_TMP/keys
for name in chief-0 alice; do zd_run_expect 0 "$OUT" "$ZDIST_BIN" keygen "$name" --dir "$KEYS"; done
COORD_CHIEF_ARGS="--keys $KEYS" coord_start_chief chief2
zd_wait_log chief2 "chief serving at" 60
zd_run_expect 1 "$OUT" "$ZDIST_BIN" --keys "$KEYS" --key alice status --cluster "$CLUSTER"
grep -q "no such job yet" "$OUT.err" || zd_fail "alice's status: $(cat "$OUT.err")"
kill -STOP "${ZD_PID[chief2]}"
"$ZDIST_BIN" --keys "$KEYS" --key alice status --cluster "$CLUSTER" >"$ZD_TMP/st.out" 2>"$ZD_TMP/st.err" &
CLI=$!
sleep 1 # its TCP connection accepted by the kernel, its handshake waiting on the frozen chief
kill -9 "${ZD_PID[chief2]}"
wait "${ZD_PID[chief2]}" 2>/dev/null || true
ZD_PID[chief2]=""
sleep 0.5
COORD_CHIEF_ARGS="--keys $KEYS" coord_start_chief chief3
rc=0
wait "$CLI" || rc=$?
grep -qi "UNAUTHENTICATED\|CURVE\|key" "$ZD_TMP/st.err" &&
    zd_fail "a chief killed during the handshake was taken for a key problem: $(cat "$ZD_TMP/st.err")"
grep -q "no such job yet" "$ZD_TMP/st.err" ||
    zd_fail "zdist status exited $rc without the restarted chief's answer: $(cat "$ZD_TMP/st.err")"
zd_ok "a chief killed during the CURVE handshake: the client retried and got its answer from the restarted chief"
echo "PASS: $ZD_PASSED checks"
