#!/usr/bin/env bash
# Issue 36, item 5: a slow client does not blind the operator. 300 connections from 127.0.0.1 to every
# daemon's --http port (chief, worker, psd), each having sent half a request line and waiting, reopened as
# soon as they are closed: /metrics (and the chief's dashboard) still answer another address (127.0.0.2)
# within 1 s every time; each daemon counts the refusals (zdist_http_refused_connections_total) and closes
# the half requests it took after its short header timeout.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/coord_lib.sh"
zd_init sec_http
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
command -v curl >/dev/null || { echo "SKIP: needs curl"; exit 77; }
unset ZDIST_KEYS_DIR TF_CONFIG ZDIST_HTTP
ulimit -n 4096 2>/dev/null || true

coord_cluster 1 1
H_PS=$(zd_free_port) H_W=$(zd_free_port) H_C=$(zd_free_port)
zd_start ps0 "$ZDIST_PSD_BIN" --cluster "$CLUSTER" --task ps:0 --checkpoint-root "$ZD_TMP" --http "$H_PS"
zd_start worker0 "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task worker:0 --http "$H_W"
COORD_CHIEF_ARGS="--http $H_C" coord_start_chief
zd_wait_psd ps0 "${ZD_PS_ADDRS[0]}" 60
zd_wait_log worker0 "serving at" 60
zd_wait_log chief "chief serving at" 60

# scrape PORT PATH: from 127.0.0.2, within 1 s, 200.
scrape() { curl -sf --interface 127.0.0.2 --max-time 1 -o "$ZD_TMP/scrape" "http://127.0.0.1:$1$2"; }
for p in "$H_PS" "$H_W" "$H_C"; do scrape "$p" /metrics || zd_fail "port $p: no /metrics before the attack"; done

timeout 60 python3 "$(dirname "$0")/slowloris.py" 12 300 "$H_PS" "$H_W" "$H_C" >"$ZD_TMP/slow.log" 2>&1 &
SLOW=$!
for _ in $(seq 100); do grep -qs ready "$ZD_TMP/slow.log" && break; sleep 0.1; done
sleep 1
fails=0 tries=0
t_end=$((SECONDS + 9))
while ((SECONDS < t_end)); do
    for target in "$H_PS /metrics" "$H_W /metrics" "$H_C /metrics" "$H_C /"; do
        tries=$((tries + 1))
        # shellcheck disable=SC2086 # port and path
        scrape $target || { fails=$((fails + 1)); echo "    no answer within 1 s: $target"; }
    done
    sleep 0.3
done
wait "$SLOW" || zd_fail "the slow client failed: $(cat "$ZD_TMP/slow.log")"
sed 's/^/    /' "$ZD_TMP/slow.log"
((fails == 0)) || zd_fail "$fails of $tries scrapes from 127.0.0.2 got no answer within 1 s under the slow client"
zd_ok "under 300 half-request connections per daemon from 127.0.0.1, $tries scrapes of /metrics and the dashboard from 127.0.0.2 answered within 1 s"

grep -q "closed by the server [1-9]" "$ZD_TMP/slow.log" || zd_fail "the server closed none of the half requests"
for p in "$H_PS" "$H_W" "$H_C"; do
    scrape "$p" /metrics || zd_fail "port $p: no /metrics after the attack"
    n=$(awk '$1 == "zdist_http_refused_connections_total" { print $2 }' "$ZD_TMP/scrape")
    [[ -n $n ]] && (( ${n%.*} >= 284 )) || zd_fail "port $p: zdist_http_refused_connections_total is '$n', wanted >= 284"
    grep -q "^# TYPE zdist_http_refused_connections_total counter" "$ZD_TMP/scrape" || zd_fail "port $p: no TYPE line"
done
zd_ok "each daemon counts the refused connections in /metrics and closed the half requests it took"
echo "PASS: $ZD_PASSED checks"
