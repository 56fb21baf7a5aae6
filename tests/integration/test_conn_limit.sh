#!/usr/bin/env bash
# Connections per peer (issue 17): a psd with --max-connections-per-peer 3 serves a peer's first 3
# connections and refuses more while those 3 keep working, serves another peer meanwhile, and serves a new
# connection of the first peer once one of its connections closed; one log line per refused peer, and
# /metrics counts the refusals. Plain, a peer is its source address (127.0.0.1; the other one 127.0.0.2,
# also loopback) and a connection past the limit is closed at once; with CURVE a peer is its key and a
# connection past the limit gets RESOURCE_EXHAUSTED naming the flag. Every daemon has the flag.
source "$(dirname "$0")/lib.sh"
zd_init conn_limit
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN PSD_DRIVER_BIN
command -v curl >/dev/null || { echo "SKIP: needs curl"; exit 77; }
OUT=$ZD_TMP/out
unset ZDIST_KEYS_DIR TF_CONFIG ZDIST_HTTP

# ---- the flag on every daemon; a bad value is refused naming it ----
for bin in "$ZDIST_PSD_BIN" "$ZDIST_WORKER_BIN" "$ZDIST_COORDINATOR_BIN"; do
    zd_run_expect 0 "$OUT" "$bin" --help
    grep -q -- "--max-connections-per-peer N" "$OUT" || zd_fail "$(basename "$bin") --help lacks the flag"
    zd_run_expect 2 "$OUT" "$bin" --max-connections-per-peer 0
    grep -q -- "--max-connections-per-peer must be a number of connections in 1..1048576, got '0'" "$OUT.err" ||
        zd_fail "$(basename "$bin") --max-connections-per-peer 0: $(cat "$OUT.err")"
done
zd_ok "--max-connections-per-peer in every daemon's --help; 0 refused naming the flag"

# metric NAME PORT: the value of a psd's /metrics sample NAME.
metric() { curl -s "http://127.0.0.1:$2/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }

# run_case NAME WHO [DRIVER ENV...]: a psd with the limit 3, the driver's conn-limit, then the psd's log
# says WHO was refused exactly once and /metrics counts at least the driver's 2 refused connections.
run_case() {
    local name=$1 who=$2 http port
    shift 2
    port=$(zd_free_port)
    http=$(zd_free_port)
    zd_start "$name" "$ZDIST_PSD_BIN" --bind "tcp://127.0.0.1:$port" --task ps:0 --http "$http" \
        --max-connections-per-peer 3 "${PSD_KEYS[@]}"
    zd_wait_log "$name" "serving at"
    env "$@" "$PSD_DRIVER_BIN" conn-limit "127.0.0.1:$port" 3 >"$ZD_TMP/$name-driver.log" 2>&1 ||
        zd_fail "$name: conn-limit: $(cat "$ZD_TMP/$name-driver.log")"
    local refused
    refused=$(metric zdist_psd_refused_connections_total "$http")
    [[ ${refused:-0} -ge 2 ]] || zd_fail "$name: zdist_psd_refused_connections_total is '$refused', wanted >= 2"
    local lines
    lines=$(grep -F "refused a connection of $who: it holds 3 connections here" "$ZD_TMP/$name.log" |
        grep -cF -- "--max-connections-per-peer 3" || true)
    [[ $lines == 1 ]] || zd_fail "$name: $lines refusal lines for $who, wanted 1: $(grep refused "$ZD_TMP/$name.log")"
    if grep "refused a connection of" "$ZD_TMP/$name.log" | grep -qvF "$who"; then
        zd_fail "$name: another peer was refused: $(grep 'refused a connection' "$ZD_TMP/$name.log")"
    fi
    zd_stop "$name"
    [[ $ZD_RC == 0 ]] || zd_fail "$name: psd exited $ZD_RC"
    sed 's/^/    /' "$ZD_TMP/$name-driver.log"
    zd_ok "$name: 3 connections of $who served, more refused (one log line, $refused counted), the other peer served"
}

# The task from TF_CONFIG; --bind puts it on a free port.
export TF_CONFIG='{"cluster": {"ps": ["127.0.0.1:1"]}, "task": {"type": "ps", "index": 0}}'

# ---- plain: a peer is its source address ----
PSD_KEYS=()
run_case plain "address 127.0.0.1"

# ---- CURVE: a peer is its key ----
KEYS=$ZD_TMP/keys
for name in ps-0 alice bob; do
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" keygen "$name" --dir "$KEYS"
done
ALICE=$(grep public-key "$KEYS/alice.key" | cut -d'"' -f2)
PSD_KEYS=(--keys "$KEYS")
run_case curve "key 'alice' ($ALICE)" ZDIST_KEYS_DIR="$KEYS" PSD_DRIVER_KEY=alice PSD_DRIVER_OTHER_KEY=bob
