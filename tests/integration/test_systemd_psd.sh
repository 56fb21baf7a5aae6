#!/usr/bin/env bash
# zdist-psd@.service under a booted systemd (tests/systemd/sandbox.sh):
# Type=notify readiness, restart after kill -9 with a new incarnation,
# watchdog keep-alives, clean stop, one journal line per event, a checkpoint
# root (the state directory).
# Skips (exit 77) only where a container cannot boot here, saying why.
source "$(dirname "$0")/lib.sh"
zd_init systemd-psd
zd_need ZDIST_BIN ZDIST_PSD_BIN
: "${ZDIST_UNIT:?}"
here=$(cd "$(dirname "$0")" && pwd)
SB=${ZDIST_SANDBOX:-$here/../systemd/sandbox.sh}
name=zdist-psd-$$
skip() { echo "SKIP: $*"; exit 77; }

ldd "$ZDIST_PSD_BIN" | grep -q libasan && asan=1 || asan=0
work=$ZD_TMP
# At exit (lib.sh's trap): when the test failed, the unit's journal as a log
# the trap shows; then the sandbox goes.
stop_sandbox() {
    if ((ZD_STATUS != 0 && ZD_STATUS != 77)) && "$SB" running "$name" 2>/dev/null; then
        sx journalctl -u zdist-psd@0 --no-pager >"$work/journal-zdist-psd@0.log" 2>&1
    fi
    "$SB" stop "$name" >/dev/null 2>&1
}
ZD_AFTER_STOP=stop_sandbox
port=$(zd_free_port)
bindir=$(dirname "$ZDIST_PSD_BIN")
sed "s|^ExecStart=[^ ]*|ExecStart=/opt/zdist/bin/zdist-psd|" "$ZDIST_UNIT" >"$work/zdist-psd@.service"
# ASAN builds: leaks at a KILL are expected noise, the unit must still work.
((asan)) && sed -i 's|^\[Service\]|[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0|' "$work/zdist-psd@.service"
rc=0
"$SB" boot "$name" --bind-ro="$bindir:/opt/zdist/bin" \
    --bind-ro="$work/zdist-psd@.service:/etc/systemd/system/zdist-psd@.service" 2>"$work/boot.log" || rc=$?
((rc != 77)) || skip "$(tail -n 1 "$work/boot.log")"
cat "$work/boot.log"
((rc == 0)) || zd_fail "the sandbox did not boot"

sx() { "$SB" run "$name" "$@"; }
missing=$(sx ldd /opt/zdist/bin/zdist-psd | grep 'not found' || true)
[[ -z $missing ]] || zd_fail "the sandbox's rootfs lacks libraries zdist-psd needs (add their packages to tests/systemd/sandbox.sh): $missing"
sx mkdir -p /etc/zdist
echo "{\"cluster\": {\"worker\": [\"127.0.0.1:1\"], \"ps\": [\"127.0.0.1:$port\"]}}" | sx tee /etc/zdist/cluster.json >/dev/null
sx systemctl daemon-reload
sx systemctl start zdist-psd@0 || zd_fail "start"
[[ $(sx systemctl is-active zdist-psd@0) == active ]] || zd_fail "not active after start (Type=notify)"
inc1=$("$ZDIST_BIN" ps stats "127.0.0.1:$port" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["incarnation"])') ||
    zd_fail "stats after start"

sx systemctl kill -s KILL zdist-psd@0
restarted() { [[ $(sx systemctl show -p NRestarts --value zdist-psd@0) -ge 1 && $(sx systemctl is-active zdist-psd@0) == active ]]; }
zd_wait_until 30 "zdist-psd@0 restarted after kill -9 and active" restarted
inc2=$("$ZDIST_BIN" ps stats "127.0.0.1:$port" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["incarnation"])') ||
    zd_fail "stats after restart"
[[ $inc1 != "$inc2" ]] || zd_fail "same incarnation after a restart"

# The watchdog (WatchdogSec=): a keep-alive received more than one whole
# period after the process started means they arrive in time, and it is still
# the same process (not restarted by the watchdog). Waits for systemd's record
# of the last keep-alive (WatchdogTimestamp), at most three periods.
period_s=$(sed -n 's/^WatchdogSec=\([0-9]*\)$/\1/p' "$work/zdist-psd@.service")
[[ -n $period_s ]] || zd_fail "the unit has no WatchdogSec= in seconds"
pid=$(sx systemctl show -p MainPID --value zdist-psd@0)
started_us=$(sx systemctl show -p ExecMainStartTimestampMonotonic --value zdist-psd@0)
kept_alive() {
    local last
    last=$(sx systemctl show -p WatchdogTimestampMonotonic --value zdist-psd@0)
    ((last > started_us + period_s * 1000000))
}
zd_wait_until $((3 * period_s)) "a keep-alive more than ${period_s} s after the start" kept_alive
[[ $(sx systemctl show -p MainPID --value zdist-psd@0) == "$pid" ]] || zd_fail "restarted by the watchdog"

sx systemctl stop zdist-psd@0
[[ $(sx systemctl show -p Result --value zdist-psd@0) == success ]] || zd_fail "unclean stop"
journal=$(sx journalctl -u zdist-psd@0 --no-pager -o cat)
grep -q "serving at tcp://127.0.0.1:$port" <<<"$journal" || zd_fail "no readiness line in the journal"
grep -q "stopped" <<<"$journal" || zd_fail "no stop line in the journal"
# Its checkpoint root: the state directory (StateDirectory=zdist).
! grep -q "no --checkpoint-root" <<<"$journal" || zd_fail "the unit gives the psd no checkpoint root"
echo "systemd: notify, restart after kill -9 (incarnation $inc1 -> $inc2), watchdog, clean stop: ok"
