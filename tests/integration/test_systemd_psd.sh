#!/usr/bin/env bash
# zdist-psd@.service under a booted systemd (tests/systemd/sandbox.sh):
# Type=notify readiness, restart after kill -9 with a new incarnation,
# watchdog keep-alives, clean stop, one journal line per event, a checkpoint
# root (the state directory).
# Skips (exit 77) only where a container cannot boot here, saying why.
set -euo pipefail
: "${ZDIST_BIN:?}" "${ZDIST_PSD_BIN:?}" "${ZDIST_UNIT:?}"
here=$(cd "$(dirname "$0")" && pwd)
SB=${ZDIST_SANDBOX:-$here/../systemd/sandbox.sh}
name=zdist-psd-$$
skip() { echo "SKIP: $*"; exit 77; }

ldd "$ZDIST_PSD_BIN" | grep -q libasan && asan=1 || asan=0
work=$(mktemp -d /tmp/zdist-systemd.XXXXXX)
cleanup() { "$SB" stop "$name" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
bindir=$(dirname "$ZDIST_PSD_BIN")
sed "s|^ExecStart=[^ ]*|ExecStart=/opt/zdist/bin/zdist-psd|" "$ZDIST_UNIT" >"$work/zdist-psd@.service"
# ASAN builds: leaks at a KILL are expected noise, the unit must still work.
((asan)) && sed -i 's|^\[Service\]|[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0|' "$work/zdist-psd@.service"
rc=0
"$SB" boot "$name" --bind-ro="$bindir:/opt/zdist/bin" \
    --bind-ro="$work/zdist-psd@.service:/etc/systemd/system/zdist-psd@.service" 2>"$work/boot.log" || rc=$?
((rc != 77)) || skip "$(tail -n 1 "$work/boot.log")"
cat "$work/boot.log"
((rc == 0)) || { echo "FAIL: the sandbox did not boot"; exit 1; }

fail() { echo "FAIL: $*"; "$SB" run "$name" journalctl -u zdist-psd@0 --no-pager | tail -30; exit 1; }
sx() { "$SB" run "$name" "$@"; }
missing=$(sx ldd /opt/zdist/bin/zdist-psd | grep 'not found' || true)
[[ -z $missing ]] || fail "the sandbox's rootfs lacks libraries zdist-psd needs (add their packages to tests/systemd/sandbox.sh): $missing"
sx mkdir -p /etc/zdist
echo "{\"cluster\": {\"worker\": [\"127.0.0.1:1\"], \"ps\": [\"127.0.0.1:$port\"]}}" | sx tee /etc/zdist/cluster.json >/dev/null
sx systemctl daemon-reload
sx systemctl start zdist-psd@0 || fail "start"
[[ $(sx systemctl is-active zdist-psd@0) == active ]] || fail "not active after start (Type=notify)"
inc1=$("$ZDIST_BIN" ps stats "127.0.0.1:$port" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["incarnation"])') ||
    fail "stats after start"

sx systemctl kill -s KILL zdist-psd@0
for _ in $(seq 50); do
    [[ $(sx systemctl show -p NRestarts --value zdist-psd@0) -ge 1 && $(sx systemctl is-active zdist-psd@0) == active ]] && break
    sleep 0.2
done
[[ $(sx systemctl show -p NRestarts --value zdist-psd@0) -ge 1 ]] || fail "not restarted after kill -9"
inc2=$("$ZDIST_BIN" ps stats "127.0.0.1:$port" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["incarnation"])') ||
    fail "stats after restart"
[[ $inc1 != "$inc2" ]] || fail "same incarnation after a restart"

# WatchdogSec=10: still the same process after 12 s means keep-alives arrive.
pid=$(sx systemctl show -p MainPID --value zdist-psd@0)
sleep 12
[[ $(sx systemctl show -p MainPID --value zdist-psd@0) == "$pid" ]] || fail "restarted by the watchdog"

sx systemctl stop zdist-psd@0
[[ $(sx systemctl show -p Result --value zdist-psd@0) == success ]] || fail "unclean stop"
journal=$(sx journalctl -u zdist-psd@0 --no-pager -o cat)
grep -q "serving at tcp://127.0.0.1:$port" <<<"$journal" || fail "no readiness line in the journal"
grep -q "stopped" <<<"$journal" || fail "no stop line in the journal"
# Its checkpoint root: the state directory (StateDirectory=zdist).
! grep -q "no --checkpoint-root" <<<"$journal" || fail "the unit gives the psd no checkpoint root"
echo "systemd: notify, restart after kill -9 (incarnation $inc1 -> $inc2), watchdog, clean stop: ok"
