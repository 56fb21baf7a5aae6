#!/usr/bin/env bash
# Scale rehearsal on this machine: 1 chief, P ps and the rest workers on
# loopback, a small parameter_server job, and what it costs: the time to serve,
# to the first step and to all workers busy; steps/s; RSS and open
# descriptors of idle and busy daemons; connections per psd; the latency of
# `zdist status` and of the chief's /metrics. Writes a Markdown report.
#   tests/scale/run.sh [--tasks 64] [--ps 16] [--build build] [--out scale-report.md] [--seconds 15]
# Not part of ctest (64 daemons on 2 cores take minutes); a Release build is
# what the figures mean (scripts/quickstart.sh makes one in build/).
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/coord_lib.sh"
tasks=64 nps="" build=build out=scale-report.md secs=15
while (($#)); do
    case $1 in
    --tasks) tasks=$2; shift 2 ;;
    --ps) nps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    *) echo "usage: tests/scale/run.sh [--tasks N] [--ps P] [--build DIR] [--out FILE] [--seconds S]" >&2; exit 2 ;;
    esac
done
nps=${nps:-$((tasks / 4))}
nworkers=$((tasks - 1 - nps))
((nps >= 1 && nworkers >= 1)) || { echo "run.sh: --tasks $tasks leaves no ps or no worker" >&2; exit 2; }
ZDIST_BIN=$build/cli/zdist ZDIST_PSD_BIN=$build/psd/zdist-psd ZDIST_WORKER_BIN=$build/worker/zdist-worker
ZDIST_COORDINATOR_BIN=$build/coordinator/zdist-coordinator
for b in "$ZDIST_BIN" "$ZDIST_PSD_BIN" "$ZDIST_WORKER_BIN" "$ZDIST_COORDINATOR_BIN"; do
    [[ -x $b ]] || { echo "run.sh: $b is missing; build first (bash scripts/quickstart.sh builds build/)" >&2; exit 2; }
done
ulimit -n 65536 2>/dev/null || true
zd_init scale
now_ms() { date +%s%3N; }

# rss_fds PATTERN: "median_rss_kb max_rss_kb median_fds max_fds" over the daemons named PATTERN.
rss_fds() {
    local pids=() n
    for n in "${ZD_NAMES[@]}"; do [[ $n == $1 && -n ${ZD_PID[$n]} ]] && pids+=("${ZD_PID[$n]}"); done
    python3 - "${pids[@]}" <<'PY'
import os, statistics, sys
rss, fds = [], []
for p in sys.argv[1:]:
    try:
        for l in open(f"/proc/{p}/status"):
            if l.startswith("VmRSS:"): rss.append(int(l.split()[1]))
        fds.append(len(os.listdir(f"/proc/{p}/fd")))
    except OSError:
        pass
print(int(statistics.median(rss)), max(rss), int(statistics.median(fds)), max(fds))
PY
}

coord_cluster "$nps" "$nworkers"
http_port=$(zd_free_port)
COORD_CHIEF_ARGS="--http 127.0.0.1:$http_port"
t0=$(now_ms)
coord_up "$nps" "$nworkers"
t_serving=$(($(now_ms) - t0))
zd_ok "$tasks tasks serving in $t_serving ms ($nps ps, $nworkers workers, 1 chief)"
read -r ps_rss ps_rss_max ps_fd ps_fd_max < <(rss_fds 'ps*')
read -r w_rss w_rss_max w_fd w_fd_max < <(rss_fds 'worker*')
read -r c_rss _ c_fd _ < <(rss_fds chief)

coord_softmax_job "$ZD_TMP/job.json" 100000000
t0=$(now_ms)
zd_run_expect 0 "$ZD_TMP/submit" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach --json
JOB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$ZD_TMP/submit")
coord_wait_step "$JOB" 1 300
t_first=$(($(now_ms) - t0))
coord_wait_json "$JOB" 'all(w.get("closures_done", 0) > 0 for w in j["workers"])' 300
t_busy=$(($(now_ms) - t0))
zd_ok "first step after $t_first ms, every worker busy after $t_busy ms"

step_of() { "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])'; }
s0=$(step_of); w0=$(now_ms)
# The window: the job runs; the script only waits for the clock here.
deadline=$((SECONDS + secs))
window_over() { ((SECONDS >= deadline)); }
zd_wait_until $((secs + 5)) "the measuring window" window_over
s1=$(step_of); w1=$(now_ms)
rate=$(python3 -c "print(round(($s1 - $s0) * 1000 / ($w1 - $w0)))")
read -r ps_rss_b ps_rss_bmax ps_fd_b ps_fd_bmax < <(rss_fds 'ps*')
read -r w_rss_b w_rss_bmax w_fd_b w_fd_bmax < <(rss_fds 'worker*')
read -r c_rss_b _ c_fd_b _ < <(rss_fds chief)
conns=()
for a in "${ZD_PS_ADDRS[@]}"; do conns+=("$(ss -tnH state established "( sport = :${a##*:} )" | wc -l)"); done
conn_med=$(printf '%s\n' "${conns[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
lat() { # median ms of 5 runs of a command
    local t=()
    for _ in 1 2 3 4 5; do local s; s=$(now_ms); "$@" >/dev/null 2>&1; t+=($(($(now_ms) - s))); done
    printf '%s\n' "${t[@]}" | sort -n | sed -n 3p
}
status_ms=$(lat "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json)
metrics_ms=$(lat curl -sf "http://127.0.0.1:$http_port/metrics")
zd_run_expect 0 "$ZD_TMP/cancel" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
zd_ok "$rate steps/s over ${secs} s; zdist status ${status_ms} ms, /metrics ${metrics_ms} ms"

cat >"$out" <<REPORT
# Scale rehearsal: $tasks tasks on $(nproc) cores ($(date -u +%Y-%m-%d))

1 chief, $nps ps, $nworkers workers on loopback (\`tests/scale/run.sh --tasks $tasks\`, build \`$build\`);
the job: softmax regression on synthetic data, parameter_server, 2 steps per closure.

| what | figure |
|---|---|
| all tasks serving after start | $t_serving ms |
| submit to first step | $t_first ms |
| submit to every worker busy | $t_busy ms |
| steps/s (global batch 64) over ${secs} s | $rate |
| \`zdist status --json\` (median of 5) | $status_ms ms |
| chief's \`/metrics\` (median of 5) | $metrics_ms ms |
| psd RSS idle / busy, median (max) | ${ps_rss} (${ps_rss_max}) / ${ps_rss_b} (${ps_rss_bmax}) KiB |
| worker RSS idle / busy, median (max) | ${w_rss} (${w_rss_max}) / ${w_rss_b} (${w_rss_bmax}) KiB |
| chief RSS idle / busy | ${c_rss} / ${c_rss_b} KiB |
| psd open descriptors idle / busy, median (max) | ${ps_fd} (${ps_fd_max}) / ${ps_fd_b} (${ps_fd_bmax}) |
| worker open descriptors idle / busy, median (max) | ${w_fd} (${w_fd_max}) / ${w_fd_b} (${w_fd_bmax}) |
| chief open descriptors idle / busy | ${c_fd} / ${c_fd_b} |
| established connections per psd, median | $conn_med |
REPORT
echo "report: $out"
echo "run.sh: $ZD_PASSED passed, 0 failed"
