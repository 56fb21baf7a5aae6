#!/usr/bin/env bash
# The coordinator's dashboard (--http) in a real browser: headless Chromium loads the page during a job and
# the DOM it built from /api/status holds the job, its loss curve, both workers and the ps, and the recent
# events (a worker lost and back); a worker that joined (--join) and drained is marked joined and left, the
# job's membership history lists both, and the cluster's workers card shows the members; a screenshot is taken (ZDIST_DASHBOARD_SCREENSHOT=FILE keeps it).
# Needs Debian's chromium: skips, saying so, without it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init dashboard
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $CHROMIUM ]] || ! command -v curl >/dev/null; then
    echo "SKIP: needs chromium and curl (scripts/install-deps.sh installs Debian's chromium)"
    exit 77
fi
OUT=$ZD_TMP/out

coord_cluster 1 2
HC=$(zd_free_port)
coord_start_ps 0
coord_start_worker 0
coord_start_worker 1
zd_start chief "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$ZD_TMP/state" \
    --http "127.0.0.1:$HC"
zd_wait_psd ps0 "${ZD_PS_ADDRS[0]}" 60
zd_wait_log worker0 "serving at" 60
zd_wait_log worker1 "serving at" 60
zd_wait_log chief "chief serving at" 60
URL=http://127.0.0.1:$HC/

# The page itself: static, no CDN, nothing fetched from elsewhere.
curl -sf "$URL" >"$OUT" || zd_fail "GET /"
grep -q "<title>zdist</title>" "$OUT" || zd_fail "the page: $(head -c 300 "$OUT")"
! grep -qE "(src|href)=\"(https?:)?//" "$OUT" || zd_fail "the page loads something from elsewhere"
curl -sf "http://127.0.0.1:$HC/api/status" >"$OUT" || zd_fail "GET /api/status"
zd_json_check "$OUT" 'j["jobs"] == [] and j["num_workers"] == 2 and j["num_ps"] == 1'

# A job with a loss line every 20 steps; worker 1 lost and back, for the events.
coord_softmax_job "$ZD_TMP/job.json" 1000000 ', "log_every": 20'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit --detach "$ZD_TMP/job.json" --cluster "$CLUSTER"
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 400 60
zd_stop worker1 KILL
coord_wait_json "$JOB" 'j["workers"][1]["state"] == "lost"' 60
coord_start_worker 1
coord_wait_json "$JOB" 'j["workers"][1]["state"] == "running" and j["workers"][1]["restarts"] >= 1' 60
# Membership: worker 2 joins (--join), runs closures, and drains (left for good).
J_ADDR="127.0.0.1:$(zd_free_port)"
zd_start joined "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://$J_ADDR"
coord_wait_json "$JOB" 'len(j["workers"]) > 2 and j["workers"][2]["closures_done"] > 0' 60
zd_run_expect 0 "$OUT" "$ZDIST_BIN" drain worker:2 --cluster "$CLUSTER"
coord_wait_json "$JOB" 'j["workers"][2]["state"] == "left"' 60
curl -sf "http://127.0.0.1:$HC/api/status" >"$OUT" || zd_fail "GET /api/status"
zd_json_check "$OUT" 'j["num_workers"] == 3 and [(m["task"], m["joined"], m["state"]) for m in j["members"]] == [(0, False, "member"), (1, False, "member"), (2, True, "left")]'

# chromium FLAGS...: headless, as root too, no GPU; virtual time lets the page's fetch finish first.
chromium() {
    "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$ZD_TMP/chromium" \
        --virtual-time-budget=5000 --window-size=1400,1000 --hide-scrollbars "$@" 2>>"$ZD_TMP/chromium.log"
}
chromium --dump-dom "$URL" >"$ZD_TMP/dom.html" || zd_fail "chromium --dump-dom failed: $(tail -5 "$ZD_TMP/chromium.log")"
python3 - "$ZD_TMP/dom.html" "$JOB" <<'PY' || zd_fail "the DOM: $(head -c 3000 "$ZD_TMP/dom.html")"
import re, sys
dom, job = open(sys.argv[1]).read(), sys.argv[2]
def need(ok, what):
    if not ok:
        print("missing:", what, file=sys.stderr)
        sys.exit(1)
need(f'id="job-{job}"' in dom and 'data-state="running"' in dom, "the running job's card")
svg = re.search(r'<svg[^>]*class="loss-curve"[^>]*id="loss-' + job + r'"[^>]*data-points="(\d+)"', dom)
need(svg and int(svg.group(1)) >= 2, "a loss curve with at least 2 points")
line = re.search(r'<polyline[^>]*class="loss-line"[^>]*points="([^"]*)"', dom)
need(line and len(line.group(1).split()) >= 2, "the loss polyline's points")
workers = re.findall(r'<tr class="worker" data-task="(\d)" data-state="(\w+)" data-joined="(\d)"', dom)
need(sorted(workers) == [("0", "running", "0"), ("1", "running", "0"), ("2", "left", "1")],
     f"both workers running, the joined one left, got {workers}")
need(re.search(r'<li class="member-event m-joined" data-task="2"', dom) and
     re.search(r'<li class="member-event m-drained" data-task="2"', dom), "the job's membership history")
members = re.findall(r'<tr class="member" data-task="(\d)" data-state="(\w+)" data-joined="(\d)"', dom)
need(members == [("0", "member", "0"), ("1", "member", "0"), ("2", "left", "1")], f"the cluster's workers, got {members}")
need(re.search(r'class="event k-joined"', dom) and re.search(r'class="event k-left"', dom), "joined and left events")
need(re.search(r'<tr class="ps-task" data-task="0"', dom), "the ps row")
need(re.search(r'push_pull [0-9.]+/s', dom), "the ps's push_pull rate")
need(re.search(r'class="event k-lost"', dom) and re.search(r'class="event k-back"', dom), "lost and back events")
need(re.search(r'\d+(\.\d+)? ms</td>', dom), "step times")
PY
SHOT=${ZDIST_DASHBOARD_SCREENSHOT:-$ZD_TMP/dashboard.png}
chromium --screenshot="$SHOT" "$URL" || zd_fail "chromium --screenshot failed: $(tail -5 "$ZD_TMP/chromium.log")"
[[ $(head -c 8 "$SHOT" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || zd_fail "$SHOT is not a PNG"
zd_ok "headless Chromium: the job's card, its loss curve, both workers running with step times, the ps, lost/back events, the joined worker left, the membership history and the cluster's workers; screenshot $SHOT"

zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
coord_wait_state "$JOB" cancelled 60
curl -sf "http://127.0.0.1:$HC/api/status" >"$OUT" || zd_fail "GET /api/status"
zd_json_check "$OUT" 'j["jobs"][0]["state"] == "cancelled" and any(e["kind"] == "cancelled" for e in j["events"]) and all(w["state"] == ("left" if w["joined"] else "idle") for w in j["jobs"][0]["detail"]["workers"])'
zd_ok "after the cancel: the job cancelled, a 'cancelled' event, the workers idle (the joined one left)"
echo "PASS: $ZD_PASSED checks"
