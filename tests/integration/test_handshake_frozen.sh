#!/usr/bin/env bash
# A client connecting to a daemon that is frozen (SIGSTOP): the TCP
# connection is accepted by the kernel, the ZMTP handshake times out (30 s).
# That is a lost connection, not a failed security handshake: the call ends
# UNAVAILABLE (which callers retry), not UNAUTHENTICATED ("it speaks CURVE
# and this process has no keys", which they do not). The chaos soak's job
# failed so: the chief took a frozen worker's handshake timeout for a
# refusal of the job.
source "$(dirname "$0")/lib.sh"
zd_init handshake_frozen
zd_need ZDIST_BIN ZDIST_PSD_BIN

zd_write_cluster "$ZD_TMP/cluster.json" 1 1
addr=${ZD_PS_ADDRS[0]}
zd_start ps0 "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/cluster.json" --task ps:0
zd_wait_psd ps0 "$addr" 60
kill -STOP "${ZD_PID[ps0]}"
"$ZDIST_BIN" ps stats "$addr" --timeout 60000 --json >"$ZD_TMP/stats.json" 2>"$ZD_TMP/stats.err" &
zd_adopt cli $!
# The client's connection (the kernel accepts it for the frozen psd); frozen
# past libzmq's 30 s handshake deadline (ZMQ_HANDSHAKE_IVL), the client gives
# that connection up (it closes its end) or its call ends. Thawed then, before
# a second handshake could time out too.
port=${addr##*:}
client_port() {
    cport=$(zd_client_ports "$port" "${ZD_PID[cli]}" | head -n 1)
    [[ -n $cport ]] || zd_exited cli
}
zd_wait_until 30 "the client's connection to the frozen psd" client_port
given_up() {
    zd_exited cli || [[ -z $(ss -tnH state established "( sport = :$cport and dport = :$port )") ]]
}
zd_wait_until 50 "the client giving up its handshake with the frozen psd" given_up
kill -CONT "${ZD_PID[ps0]}"
zd_wait cli
rc=$ZD_RC
grep -qi "CURVE\|UNAUTHENTICATED\|handshake" "$ZD_TMP/stats.err" &&
    zd_fail "a frozen daemon's handshake timeout was taken for a security failure: $(cat "$ZD_TMP/stats.err")"
[[ $rc -eq 0 ]] || grep -q "UNAVAILABLE: connection lost" "$ZD_TMP/stats.err" ||
    zd_fail "zdist ps stats exited $rc, not for a lost connection: $(cat "$ZD_TMP/stats.err")"
zd_wait_psd ps0 "$addr" 60
zd_ok "a handshake that timed out on a frozen psd is a lost connection (exit $rc: $(head -c 120 "$ZD_TMP/stats.err")), the psd answers once it runs again"
