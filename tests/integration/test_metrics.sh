#!/usr/bin/env bash
# /metrics on every daemon given --http: `promtool check metrics` passes on each, the names follow Prometheus
# conventions, and a real Prometheus on a loopback port scrapes all four daemons during a job (up == 1, a
# growing step counter). Needs Debian's prometheus package (promtool, prometheus): skips without it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init metrics
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null || ! command -v curl >/dev/null; then
    echo "SKIP: needs promtool, prometheus and curl (scripts/install-deps.sh installs Debian's prometheus)"
    exit 77
fi
OUT=$ZD_TMP/out

# ---- --http's address is checked ----
zd_run_expect 2 "$OUT" "$ZDIST_PSD_BIN" --bind tcp://127.0.0.1:0 --http nonsense
grep -q "\-\-http 'nonsense'" "$OUT.err" || zd_fail "bad --http: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$ZDIST_WORKER_BIN" --bind tcp://127.0.0.1:0 --http 127.0.0.1:70000
grep -q "the port is out of range" "$OUT.err" || zd_fail "bad port: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$ZDIST_COORDINATOR_BIN" --http localhost:9100
grep -q "not a numeric IP address" "$OUT.err" || zd_fail "bad host: $(cat "$OUT.err")"
ZDIST_HTTP=nonsense zd_run_expect 2 "$OUT" "$ZDIST_PSD_BIN" --bind tcp://127.0.0.1:0
grep -q "ZDIST_HTTP: .*'nonsense'" "$OUT.err" || zd_fail "bad ZDIST_HTTP: $(cat "$OUT.err")"
zd_ok "--http: a bad address, port or host name is refused with exit 2, naming it (ZDIST_HTTP too)"

# ---- a cluster with --http everywhere ----
coord_cluster 1 2
HP=$(zd_free_port)
HW0=$(zd_free_port)
HW1=$(zd_free_port)
HC=$(zd_free_port)
zd_start ps0 "$ZDIST_PSD_BIN" --cluster "$CLUSTER" --task ps:0 --http "$HP"
zd_start worker0 "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task worker:0 --http "127.0.0.1:$HW0"
# worker 1 takes its address from the environment, as the systemd units do.
ZDIST_HTTP="127.0.0.1:$HW1" zd_start worker1 "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task worker:1
zd_start chief "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$ZD_TMP/state" \
    --http "127.0.0.1:$HC"
zd_wait_psd ps0 "${ZD_PS_ADDRS[0]}" 60
zd_wait_log worker0 "serving at" 60
zd_wait_log worker1 "serving at" 60
zd_wait_log chief "chief serving at" 60
grep -q "http: serving http://127.0.0.1:$HP (/metrics)" "$ZD_TMP/ps0.log" || zd_fail "psd log: $(cat "$ZD_TMP/ps0.log")"
grep -q "http: serving http://127.0.0.1:$HW1 (/metrics)" "$ZD_TMP/worker1.log" ||
    zd_fail "ZDIST_HTTP: worker 1's log: $(cat "$ZD_TMP/worker1.log")"
# The port is taken: the daemon says so and exits 1.
zd_run_expect 1 "$OUT" "$ZDIST_PSD_BIN" --bind tcp://127.0.0.1:0 --http "$HP"
grep -q "cannot listen there" "$OUT.err" || zd_fail "port taken: $(cat "$OUT.err")"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$HP/metrics")
[[ $code == 405 ]] || zd_fail "POST /metrics: HTTP $code, wanted 405"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HW0/nothing")
[[ $code == 404 ]] || zd_fail "GET /nothing: HTTP $code, wanted 404"
ctype=$(curl -s -o /dev/null -w '%{content_type}' "http://127.0.0.1:$HC/metrics")
[[ $ctype == "text/plain; version=0.0.4; charset=utf-8" ]] || zd_fail "content type '$ctype'"
zd_ok "every daemon serves --http (a bare port on 127.0.0.1); a taken port fails the start; POST 405, unknown 404"

# ---- promtool on each, before and during a job ----
check_all() { # check_all WHEN
    local name port
    for name in ps0:$HP worker0:$HW0 worker1:$HW1 chief:$HC; do
        port=${name#*:}
        curl -sf "http://127.0.0.1:$port/metrics" >"$ZD_TMP/${name%%:*}.prom" || zd_fail "$name: no /metrics"
        promtool check metrics <"$ZD_TMP/${name%%:*}.prom" >"$OUT" 2>&1 ||
            zd_fail "$1: promtool check metrics on ${name%%:*}: $(cat "$OUT")"
    done
}
check_all "before a job"
coord_softmax_job "$ZD_TMP/job.json" 1000000
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit --detach "$ZD_TMP/job.json" --cluster "$CLUSTER"
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 300 60
check_all "during a job"
grep -qE '^zdist_psd_requests_total\{method="push_pull"\} [1-9]' "$ZD_TMP/ps0.prom" || zd_fail "psd requests"
grep -qE '^zdist_psd_received_bytes_total\{method="push_pull"\} [1-9]' "$ZD_TMP/ps0.prom" || zd_fail "psd bytes"
grep -qE '^zdist_psd_request_duration_seconds_bucket\{method="push_pull",le="\+Inf"\} [1-9]' "$ZD_TMP/ps0.prom" ||
    zd_fail "psd latency histogram"
grep -qE '^zdist_worker_steps_total [1-9]' "$ZD_TMP/worker0.prom" || zd_fail "worker steps"
grep -qE '^zdist_worker_examples_total [1-9]' "$ZD_TMP/worker0.prom" || zd_fail "worker examples"
grep -qE '^zdist_worker_step_seconds_count [1-9]' "$ZD_TMP/worker1.prom" || zd_fail "worker step histogram"
grep -qE '^zdist_worker_loss [0-9]' "$ZD_TMP/worker1.prom" || zd_fail "worker loss"
grep -qE "^zdist_coordinator_job_step\\{job_id=\"$JOB\",name=\"syn-softmax\"\\} [1-9]" "$ZD_TMP/chief.prom" ||
    zd_fail "coordinator job step: $(grep job_step "$ZD_TMP/chief.prom")"
grep -qE '^zdist_coordinator_jobs\{state="running"\} 1$' "$ZD_TMP/chief.prom" || zd_fail "jobs by state"
grep -qE "^zdist_coordinator_worker_step_seconds_bucket\\{job_id=\"$JOB\",worker=\"1\",le=\"\\+Inf\"\\} [1-9]" \
    "$ZD_TMP/chief.prom" || zd_fail "coordinator step-time histogram"
grep -qE "^zdist_coordinator_ps_latency_p99_seconds\\{job_id=\"$JOB\",ps=\"0\",method=\"push_pull\"\\} " \
    "$ZD_TMP/chief.prom" || zd_fail "coordinator ps p99"
grep -qE "^zdist_coordinator_job_psd_recoveries_total\\{job_id=\"$JOB\",name=\"syn-softmax\"\\} 0" "$ZD_TMP/chief.prom" ||
    zd_fail "recoveries"
zd_ok "promtool check metrics passes on all four daemons, before and during a job; requests, bytes, steps, examples, loss, step-time histograms, recoveries"

# ---- a real Prometheus scraping them ----
PP=$(zd_free_port)
cat >"$ZD_TMP/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: zdist
    static_configs:
      - targets: ['127.0.0.1:$HP', '127.0.0.1:$HW0', '127.0.0.1:$HW1', '127.0.0.1:$HC']
YAML
zd_start prometheus prometheus --config.file="$ZD_TMP/prometheus.yml" --storage.tsdb.path="$ZD_TMP/prom" \
    --web.listen-address="127.0.0.1:$PP" --log.level=warn
deadline=$((SECONDS + 30))
until curl -sf "http://127.0.0.1:$PP/-/ready" >/dev/null; do
    kill -0 "${ZD_PID[prometheus]}" 2>/dev/null || zd_fail "prometheus exited"
    ((SECONDS < deadline)) || zd_fail "prometheus not ready within 30 s"
    sleep 0.2
done
# query EXPR: the vector's samples as "instance value" lines.
query() {
    curl -sf "http://127.0.0.1:$PP/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["status"] == "success", j
for r in j["data"]["result"]:
    print(r["metric"].get("instance", "-"), r["value"][1])'
}
deadline=$((SECONDS + 30))
until query 'up == 1' >"$OUT" && [[ $(wc -l <"$OUT") == 4 ]]; do
    ((SECONDS < deadline)) || zd_fail "up == 1 for 4 targets within 30 s: $(query up)"
    sleep 0.5
done
first=""
deadline=$((SECONDS + 30))
while :; do
    now=$(query 'sum(zdist_worker_steps_total)' | awk '{print $2}')
    if [[ -n $now ]]; then
        [[ -z $first ]] && first=$now
        python3 -c "import sys; sys.exit(0 if float('$now') > float('$first') else 1)" && break
    fi
    ((SECONDS < deadline)) || zd_fail "sum(zdist_worker_steps_total) did not grow within 30 s (first '$first', now '$now')"
    sleep 0.5
done
query "zdist_coordinator_job_step{job_id=\"$JOB\"}" >"$OUT"
grep -q "^127.0.0.1:$HC [1-9]" "$OUT" || zd_fail "the job's step not scraped from the coordinator: $(cat "$OUT")"
zd_ok "Prometheus scrapes all four daemons (up == 1) and sees the step counter grow ($first -> $now)"

zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
coord_wait_state "$JOB" cancelled 60
echo "PASS: $ZD_PASSED checks"
