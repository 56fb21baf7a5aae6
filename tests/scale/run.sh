#!/usr/bin/env bash
# Scale rehearsal on this machine: 1 chief, P ps, W workers and an evaluator
# on loopback, a small job, and what it costs. Writes a Markdown report.
#
#   tests/scale/run.sh [--tasks 64] [--ps P] [--workers W] [--build DIR] [--out FILE] [--seconds S]
#                      [--strategy parameter_server|multi_worker_mirrored] [--sweep [N,N,...]] [--kill]
#                      [--no-evaluator] [--no-hold]
#
# --tasks N: 1 chief, N/4 ps and the rest workers (--ps, --workers override;
# multi_worker_mirrored has no ps), and an evaluator besides (--no-evaluator). Every run measures: the time to serve, from
# submit to the first step and to every worker busy; steps/s, examples/s and
# closures/s (parameter_server) over S seconds; the chief's CPU per closure
# (or per step in lockstep) from its utime+stime over that window; RSS and
# open descriptors of every daemon idle and busy; connections per psd;
# `zdist status` and /metrics latency; the chief's CPU while it holds a job
# whose closures are long (nothing to dispatch: its status and psd polls and
# ZMTP heartbeats), per heartbeat received (--no-hold: not). --sweep: closures/s, examples/s
# and CPU per closure with the chief given the first N workers, for each N
# (default 1,2,4,8,16,32 and all). --kill: kill -9 of W/6 workers and P/4 ps
# at once (8 and 4 at 64 tasks), restarted a second later as systemd would;
# the time until every worker runs closures again and until the step passes
# the one at the kill; and exactness as tests/chaos checks it (the job ends
# at exactly its steps, every psd shard applied exactly one update per step:
# adam's step counter). The load average is noted with every figure: the
# machine may be shared.
#
# Fails only on what is not a timing: a job that does not reach its steps,
# an update lost or doubled, a worker never busy, a daemon that died, an
# evaluator that never evaluated. The figures are reported, never asserted.
# Not in ctest at 64 tasks (minutes on 2 cores); ctest's scale.short runs 8.
# A Release build is what the figures mean (scripts/quickstart.sh makes one).
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/coord_lib.sh"
tasks=64 nps="" nworkers="" build=build out=scale-report.md secs=15 strategy=parameter_server
sweep="" kill=0 evaluator=1 hold=1
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while (($#)); do
    case $1 in
    --tasks) tasks=$2; shift 2 ;;
    --ps) nps=$2; shift 2 ;;
    --workers) nworkers=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --strategy) strategy=$2; shift 2 ;;
    --sweep) if [[ ${2:-} =~ ^[0-9,]+$ ]]; then sweep=$2; shift 2; else sweep=default; shift; fi ;;
    --kill) kill=1; shift ;;
    --no-evaluator) evaluator=0; shift ;;
    --no-hold) hold=0; shift ;;
    *) usage ;;
    esac
done
for v in tasks secs; do [[ ${!v} =~ ^[0-9]+$ && ${!v} -ge 1 ]] || { echo "run.sh: --$v must be a positive integer" >&2; exit 2; }; done
case $strategy in
parameter_server) nps=${nps:-$((tasks / 4))} ;;
multi_worker_mirrored) nps=${nps:-0} ;;
*) echo "run.sh: --strategy must be parameter_server or multi_worker_mirrored" >&2; exit 2 ;;
esac
nworkers=${nworkers:-$((tasks - 1 - nps))}
((nworkers >= 1)) || { echo "run.sh: no worker left" >&2; exit 2; }
[[ $strategy == multi_worker_mirrored ]] || ((nps >= 1)) || { echo "run.sh: parameter_server needs a ps" >&2; exit 2; }
((nworkers <= 1024 && nps <= 64)) || { echo "run.sh: the coordinator takes at most 1024 workers and 64 ps" >&2; exit 2; }
if [[ $sweep == default ]]; then
    sweep=""
    for k in 1 2 4 8 16 32; do ((k < nworkers)) && sweep+="$k,"; done
    sweep+=$nworkers
fi
[[ -z $sweep || $strategy == parameter_server ]] || { echo "run.sh: --sweep is parameter_server's" >&2; exit 2; }
[[ $kill == 0 || $strategy == parameter_server ]] || { echo "run.sh: --kill is parameter_server's (it kills ps)" >&2; exit 2; }
ntasks=$((1 + nps + nworkers + evaluator))
ZDIST_BIN=$build/cli/zdist ZDIST_PSD_BIN=$build/psd/zdist-psd ZDIST_WORKER_BIN=$build/worker/zdist-worker
ZDIST_COORDINATOR_BIN=$build/coordinator/zdist-coordinator
for b in "$ZDIST_BIN" "$ZDIST_PSD_BIN" "$ZDIST_WORKER_BIN" "$ZDIST_COORDINATOR_BIN"; do
    [[ -x $b ]] || { echo "run.sh: $b is missing; build first (bash scripts/quickstart.sh builds build/)" >&2; exit 2; }
done
ulimit -n 65536 2>/dev/null || true
zd_init scale
now_ms() { date +%s%3N; }
load1() { cut -d' ' -f1 /proc/loadavg; }
hz=$(getconf CLK_TCK)
cpu_ms() { awk -v hz="$hz" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"; }
py() { python3 -c "$@"; }
REPORT=$ZD_TMP/report.md
: >"$REPORT"
say() { printf '%s\n' "$*" >>"$REPORT"; }

# ---- the cluster: every task's address, and the chief's view of it ----
ZD_PS_ADDRS=() ZD_WORKER_ADDRS=()
for ((i = 0; i < nps; i++)); do ZD_PS_ADDRS+=("127.0.0.1:$(zd_free_port)"); done
for ((i = 0; i < nworkers; i++)); do ZD_WORKER_ADDRS+=("127.0.0.1:$(zd_free_port)"); done
ZD_CHIEF="127.0.0.1:$(zd_free_port)" EVAL_ADDR="127.0.0.1:$(zd_free_port)"
# cluster_file FILE K: the cluster with the first K workers (the daemons' own: all of them).
cluster_file() {
    py 'import json, sys
ps, ws = sys.argv[4].split(), sys.argv[5].split()[: int(sys.argv[2])]
c = {"chief": [sys.argv[3]], "worker": ws}
if ps: c["ps"] = ps
if sys.argv[6] != "-": c["evaluator"] = [sys.argv[6]]
json.dump({"cluster": c}, open(sys.argv[1], "w"))' "$1" "$2" "$ZD_CHIEF" "${ZD_PS_ADDRS[*]}" "${ZD_WORKER_ADDRS[*]}" \
        "$( ((evaluator)) && echo "$EVAL_ADDR" || echo -)"
}
CLUSTER=$ZD_TMP/cluster.json
cluster_file "$CLUSTER" "$nworkers"
STATE=$ZD_TMP/state
mkdir -p "$STATE"
http_port=$(zd_free_port)
CHIEF=chief
# start_chief NAME CLUSTER_FILE [OPTION...]: the chief, the variables kept
# after a job (for the exactness check).
start_chief() {
    CHIEF=$1
    zd_start "$1" "$ZDIST_COORDINATOR_BIN" --cluster "$2" --task chief:0 --state-dir "$STATE" --checkpoint-root "$ZD_TMP" \
        --http "127.0.0.1:$http_port" --keep-variables "${@:3}"
    zd_wait_log "$1" "chief serving at" 60
}
# Every worker connects from 127.0.0.1 here: a psd's per-address connection limit (64) would refuse the 65th.
start_ps() {
    zd_start "$1" "$ZDIST_PSD_BIN" --cluster "$CLUSTER" --task "ps:$2" --checkpoint-root "$ZD_TMP" \
        --max-connections-per-peer $((nworkers + 64))
}
start_worker() { zd_start "$1" "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task "worker:$2" --ps-timeout-ms 2000; }
t0=$(now_ms)
for ((i = 0; i < nps; i++)); do start_ps "ps$i" "$i"; done
for ((i = 0; i < nworkers; i++)); do start_worker "worker$i" "$i"; done
start_chief chief "$CLUSTER"
if ((evaluator)); then
    zd_start evaluator "$ZDIST_WORKER_BIN" --evaluator --cluster "$CLUSTER" --task evaluator:0 --state-dir "$STATE"
    zd_wait_log evaluator "evaluator task 0 serving at" 60
fi
for ((i = 0; i < nps; i++)); do zd_wait_psd "ps$i" "${ZD_PS_ADDRS[$i]}" 60; done
for ((i = 0; i < nworkers; i++)); do zd_wait_log "worker$i" "serving at" 60; done
t_serving=$(($(now_ms) - t0)) la_serving=$(load1)
zd_ok "$ntasks tasks serving in $t_serving ms ($nps ps, $nworkers workers, 1 chief$( ((evaluator)) && echo ", 1 evaluator"))"

# ---- per daemon: RSS and descriptors ----
declare -A IDLE BUSY
# sample ARRAY: "rss_kb fds" of every running daemon, by name, into the array.
sample() {
    local -n into=$1
    local n p kb
    for n in "${ZD_NAMES[@]}"; do
        p=${ZD_PID[$n]:-}
        [[ -n $p && -d /proc/$p ]] || continue
        kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null) || continue
        into[$n]="$kb $(find "/proc/$p/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)"
    done
}
# kind_stats ARRAY GLOB: "median_rss max_rss median_fds max_fds" over the names matching GLOB.
kind_stats() {
    local -n from=$1
    local n v=()
    for n in "${!from[@]}"; do [[ $n == $2 ]] && v+=("${from[$n]}"); done
    printf '%s\n' "${v[@]}" | py 'import statistics, sys
r = [tuple(map(int, l.split())) for l in sys.stdin if l.strip()]
if not r: print("- - - -"); sys.exit()
print(int(statistics.median(x[0] for x in r)), max(x[0] for x in r), int(statistics.median(x[1] for x in r)), max(x[1] for x in r))'
}
sample IDLE
la_idle=$(load1)

# ---- jobs and their status ----
st() { "$ZDIST_BIN" status "$1" --cluster "$CLUSTER" --json >"$ZD_TMP/st.json" 2>/dev/null; }
jq_() { py 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$ZD_TMP/st.json" "$1"; }
submit() { # FILE: the job id in JOB
    zd_run_expect 0 "$ZD_TMP/submit" "$ZDIST_BIN" submit "$1" --cluster "$CLUSTER" --detach --json
    JOB=$(py 'import json, sys; print(json.load(open(sys.argv[1]))["job_id"])' "$ZD_TMP/submit")
}
cancel() { zd_run_expect 0 "$ZD_TMP/cancel" "$ZDIST_BIN" cancel "$1" --cluster "$CLUSTER"; coord_wait_state "$1" cancelled 300; }
# job FILE STEPS STRATEGY_JSON [OPTIMIZER] [EXTRA]: softmax regression on synthetic data, 2 steps per closure;
# 4096 examples, more past 64 workers: each worker's shard holds a global batch of 64 at least.
n_examples=$((64 * (nworkers > 64 ? nworkers : 64)))
job() {
    cat >"$1" <<JSON
{"name": "scale", "strategy": $3,
 "model": {"name": "softmax_regression"}, "optimizer": {"type": "${4:-sgd}", "learning_rate": 0.1},
 "dataset": {"format": "synthetic", "synthetic": {"n": $n_examples, "test_n": 1024, "dim": 16, "classes": 4, "seed": 7},
             "global_batch_size": 64},
 "steps": $2, "steps_per_execution": ${SPE:-2}, "seed": 3 ${5:-}}
JSON
}
PS_STRAT='{"type": "parameter_server"}'
[[ $strategy == multi_worker_mirrored ]] && PS_STRAT='{"type": "multi_worker_mirrored", "collective_timeout_ms": 30000}'
busy_expr='all(w.get("closures_done", 0) > 0 for w in j["workers"])'
[[ $strategy == multi_worker_mirrored ]] && busy_expr='j["step"] >= 1 and all(w.get("in_ring") for w in j["workers"])'
# snap JOB PID: "step closures examples" and "ms cpu_ms rss_kb": the job's status and the chief's CPU and
# RSS at one moment.
snap() {
    local t u m
    u=$(cpu_ms "$2") t=$(now_ms) m=$(awk '/^VmRSS:/ {print $2}' "/proc/$2/status")
    st "$1"
    py 'import json, sys
j = json.load(open(sys.argv[1]))
print(j["step"], sum(w.get("closures_done", 0) for w in j["workers"]), int(j["metrics"].get("examples", 0)))' "$ZD_TMP/st.json"
    echo "$t $u $m"
}
# window JOB PID: over $secs s, into W_STEPS W_EX W_CLOS (per second), W_CPU_MS (the chief's CPU), W_RSS_KBS
# (its RSS growth, KiB/s), W_LA.
window() {
    local s0 c0 e0 w0 u0 m0 s1 c1 e1 w1 u1 m1
    { read -r s0 c0 e0; read -r w0 u0 m0; } < <(snap "$1" "$2")
    local deadline=$((SECONDS + secs))
    window_over() { ((SECONDS >= deadline)); }
    zd_wait_until $((secs + 5)) "the measuring window" window_over # the job runs; only the clock is awaited
    { read -r s1 c1 e1; read -r w1 u1 m1; } < <(snap "$1" "$2")
    W_LA=$(load1) W_CPU_MS=$((u1 - u0)) W_MS=$((w1 - w0)) W_CLOS_N=$((c1 - c0)) W_STEPS_N=$((s1 - s0))
    W_RSS_KBS=$(((m1 - m0) * 1000 / W_MS)) W_STEPS=$((W_STEPS_N * 1000 / W_MS)) W_EX=$(((e1 - e0) * 1000 / W_MS)) W_CLOS=$((W_CLOS_N * 1000 / W_MS))
}
per() { py "print('%.1f' % ($1 * 1000 / $2) if $2 > 0 else '-')"; } # per MS N: µs of MS ms per N
chief_conns() { ss -tnpH state established | grep -c "pid=${ZD_PID[$CHIEF]}," || true; }

# ---- the main job: to first step, every worker busy, the window ----
job "$ZD_TMP/job.json" 100000000 "$PS_STRAT"
t0=$(now_ms)
submit "$ZD_TMP/job.json"
MAIN=$JOB
coord_wait_step "$MAIN" 1 300
t_first=$(($(now_ms) - t0)) la_first=$(load1)
coord_wait_json "$MAIN" "$busy_expr" 300
t_busy=$(($(now_ms) - t0)) la_busy=$(load1)
zd_ok "first step after $t_first ms, every worker busy after $t_busy ms"
psd_cpu() { local n t=0; for ((n = 0; n < nps; n++)); do t=$((t + $(cpu_ms "${ZD_PID[ps$n]}"))); done; echo $t; }
p0=$(psd_cpu)
window "$MAIN" "${ZD_PID[$CHIEF]}"
P_CPU=$(($(psd_cpu) - p0))
# The psds' requests per second (the chief's status, from each psd's STATS; its own polling left out).
P_REQS=$(jq_ 'round(sum(m["per_s"] for p in j.get("ps", []) for m in p.get("methods", [])))')
P_PER_REQ=$(py "print('%.1f' % ($P_CPU * 1000 / ($P_REQS * $W_MS / 1000)) if $P_REQS > 0 else '-')")
M_STEPS=$W_STEPS M_EX=$W_EX M_CLOS=$W_CLOS M_LA=$W_LA M_CPU=$W_CPU_MS M_MS=$W_MS M_RSS_KBS=$W_RSS_KBS
M_PER_CLOS=$(per "$W_CPU_MS" "$W_CLOS_N") M_PER_STEP=$(per "$W_CPU_MS" "$W_STEPS_N")
sample BUSY
conns=()
for a in "${ZD_PS_ADDRS[@]}"; do conns+=("$(ss -tnH state established "( sport = :${a##*:} )" | wc -l)"); done
conn_med=0
((nps == 0)) || conn_med=$(printf '%s\n' "${conns[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
lat() { # median ms of 5 runs of a command
    local t=() s
    for _ in 1 2 3 4 5; do s=$(now_ms); "$@" >/dev/null 2>&1; t+=($(($(now_ms) - s))); done
    printf '%s\n' "${t[@]}" | sort -n | sed -n 3p
}
status_ms=$(lat "$ZDIST_BIN" status "$MAIN" --cluster "$CLUSTER" --json)
metrics_ms=$(lat curl -sf "http://127.0.0.1:$http_port/metrics")
la_lat=$(load1)
cancel "$MAIN"
zd_ok "$M_STEPS steps/s, $M_CLOS closures/s over ${secs} s (load $M_LA); zdist status ${status_ms} ms, /metrics ${metrics_ms} ms"

# ---- holding a job with nothing to dispatch: status, psd polls, heartbeats ----
# Closures of about the window and 1 s more each (at the main job's pace per
# worker): in the window the chief dispatches next to nothing.
H_CPU=- H_MS=- H_LA=- H_CLOS_N=- H_CONNS=- H_BEATS=- H_PER_BEAT=-
if [[ $strategy == parameter_server ]] && ((hold)); then
    SPE=$(py "print(max(100, min(100000, int($M_STEPS / $nworkers * ($secs + 1)))))") job "$ZD_TMP/hold.json" 100000000 "$PS_STRAT"
    submit "$ZD_TMP/hold.json"
    HOLD=$JOB
    coord_wait_json "$HOLD" "all(w.get('in_flight', 0) > 0 for w in j['workers'])" 300
    H_CONNS=$(chief_conns)
    window "$HOLD" "${ZD_PID[$CHIEF]}"
    H_CPU=$W_CPU_MS H_MS=$W_MS H_LA=$W_LA H_CLOS_N=$W_CLOS_N
    H_BEATS=$((2 * H_CONNS * H_MS / 1000)) # a ZMTP PING from the peer and a PONG to the chief's own, per second
    H_PER_BEAT=$(per "$H_CPU" "$H_BEATS")
    cancel "$HOLD"
    zd_ok "holding a job: chief ${H_CPU} ms CPU in ${H_MS} ms over $H_CONNS connections (~$H_BEATS heartbeats received)"
fi

# ---- kill -9 of W/6 workers and P/4 ps at once ----
if ((kill)); then
    kw=$(((nworkers + 5) / 6)) kp=$((nps / 4 > 0 ? nps / 4 : 1))
    # Variables split over every ps, adam (each shard's step counter counts its updates), checkpoints.
    K_STEPS=$((M_STEPS * 4 + 600))
    every=$((K_STEPS / 12 > 50 ? K_STEPS / 12 : 50))
    job "$ZD_TMP/kill.json" "$K_STEPS" \
        "{\"type\": \"parameter_server\", \"partitioner\": \"fixed:$nps\"}" adam ", \"checkpoint\": {\"every_steps\": $every, \"keep\": 3}"
    # A chief whose closure deadline is short, so a killed worker is noticed in seconds.
    zd_stop "$CHIEF"
    start_chief chief_k "$CLUSTER" --closure-timeout-ms 3000
    submit "$ZD_TMP/kill.json"
    KJOB=$JOB
    coord_wait_json "$KJOB" "j['state'] != 'running' or (j['step'] >= $K_STEPS // 4 and j.get('checkpoint_step', 0) > 0)" 600
    [[ $(jq_ 'j["state"]') == running ]] || zd_fail "the kill job ended before the kill (give it more steps): $(cat "$ZD_TMP/st.json")"
    k_step=$(jq_ 'j["step"]') la_kill=$(load1) rec0=$(jq_ 'j.get("psd_recoveries", 0)')
    victims=()
    for ((i = nworkers - kw; i < nworkers; i++)); do victims+=("worker$i"); done
    for ((i = 0; i < kp; i++)); do victims+=("ps$i"); done
    tk=$(now_ms)
    for v in "${victims[@]}"; do kill -KILL "${ZD_PID[$v]}"; done
    for v in "${victims[@]}"; do wait "${ZD_PID[$v]}" 2>/dev/null || true; ZD_PID[$v]=""; done
    sleep 1 # systemd's RestartSec=1
    for v in "${victims[@]}"; do
        if [[ $v == ps* ]]; then start_ps "${v}_r" "${v#ps}"; else start_worker "${v}_r" "${v#worker}"; fi
    done
    for v in "${victims[@]}"; do zd_wait_log "${v}_r" "serving at" 60; done
    # The chief's recovery first (until it notices, the survivors' closures still count steps).
    coord_wait_json "$KJOB" "j['state'] != 'running' or j.get('psd_recoveries', 0) > $rec0" 600
    t_detect=$(($(now_ms) - tk))
    coord_wait_json "$KJOB" "j['state'] != 'running' or j['step'] > $k_step" 600
    t_progress=$(($(now_ms) - tk))
    coord_wait_json "$KJOB" "j['state'] != 'running' or all(w['state'] == 'running' for w in j['workers'])" 600
    t_all_back=$(($(now_ms) - tk)) la_back=$(load1)
    recoveries=$(jq_ 'j.get("psd_recoveries", 0)')
    if ((evaluator)); then
        coord_wait_json "$KJOB" 'j["state"] != "running" or len(j.get("evaluations", [])) > 0' 600
        declare -A KBUSY
        sample KBUSY
        BUSY[evaluator]=${KBUSY[evaluator]} # busy: evaluating the kill job's checkpoints
    fi
    coord_wait_state "$KJOB" done 1200
    # A checkpoint's fan-out: SAVE's time on each psd (p50, p99 over the psds' own histograms).
    K_SAVE=$(jq_ '"%d / %d" % (max([m["p50_us"] for p in j.get("ps", []) for m in p["methods"] if m["method"] == "save"] or [0]) // 1000, max([m["p99_us"] for p in j.get("ps", []) for m in p["methods"] if m["method"] == "save"] or [0]) // 1000)')
    K_CKPTS=$(ls -d "$STATE/jobs/$KJOB"/ckpt-* 2>/dev/null | wc -l)
    [[ $(jq_ 'j["step"]') == "$K_STEPS" && $(jq_ 'j["steps"]') == "$K_STEPS" ]] ||
        zd_fail "the kill job ended at step $(jq_ 'j["step"]') of $K_STEPS"
    # Each step pushes one update to every shard: with adam each shard's step
    # counter (saved and restored with its checkpoint) counts the updates it
    # holds. More than the steps: one applied twice; fewer: one lost.
    doubled=0 lost=0 shards=0
    for ((i = 0; i < nps; i++)); do
        zd_run_expect 0 "$ZD_TMP/ps$i.stats" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json
        read -r d l n < <(py 'import json, sys
j = json.load(open(sys.argv[1])); steps = int(sys.argv[2]); d = l = n = 0
for s in j["shard_info"]:
    if s["name"].startswith(sys.argv[3] + "/"):
        n += 1; d += max(0, s["step"] - steps); l += max(0, steps - s["step"])
print(d, l, n)' "$ZD_TMP/ps$i.stats" "$K_STEPS" "$KJOB")
        doubled=$((doubled + d)) lost=$((lost + l)) shards=$((shards + n))
        ((n > 0)) || zd_fail "ps $i holds no shard of the kill job"
    done
    ((doubled == 0 && lost == 0)) || zd_fail "psd updates per step: $doubled doubled, $lost lost over $shards shards"
    if ((evaluator)); then
        st "$KJOB"
        evals=$(jq_ 'len(j.get("evaluations", []))')
        ((evals > 0)) || zd_fail "the evaluator evaluated none of the kill job's checkpoints"
    fi
    zd_ok "kill -9 of $kw workers and $kp ps at step $k_step: progress after $t_progress ms, every worker back after $t_all_back ms; $K_STEPS steps exactly, $shards shards with one update per step"
fi

# ---- the sweep: the chief given the first K workers ----
SWEEP_ROWS=()
if [[ -n $sweep ]]; then
    IFS=, read -r -a ks <<<"$sweep"
    n=0
    for k in "${ks[@]}"; do
        ((k >= 1 && k <= nworkers)) || zd_fail "--sweep: $k is not in 1..$nworkers"
        zd_stop "$CHIEF"
        n=$((n + 1))
        cluster_file "$ZD_TMP/cluster-$k.json" "$k"
        start_chief "chief_s$n" "$ZD_TMP/cluster-$k.json"
        job "$ZD_TMP/sweep.json" 100000000 "$PS_STRAT"
        submit "$ZD_TMP/sweep.json"
        coord_wait_json "$JOB" "$busy_expr" 300
        window "$JOB" "${ZD_PID[$CHIEF]}"
        SWEEP_ROWS+=("| $k | $W_CLOS | $W_EX | $W_STEPS | $(per "$W_CPU_MS" "$W_CLOS_N") | $(py "print(round($W_CPU_MS * 100 / $W_MS))") | $W_RSS_KBS | $W_LA |")
        cancel "$JOB"
        zd_ok "sweep: $k workers: $W_CLOS closures/s, $W_EX examples/s (load $W_LA)"
    done
fi

# ---- every daemon is still there ----
for n in "${ZD_NAMES[@]}"; do
    [[ -z ${ZD_PID[$n]} ]] || kill -0 "${ZD_PID[$n]}" 2>/dev/null || zd_fail "$n died during the rehearsal (its log: $ZD_TMP/$n.log)"
done

# ---- the report ----
read -r ps_rss ps_rss_max ps_fd ps_fd_max < <(kind_stats IDLE 'ps*')
read -r w_rss w_rss_max w_fd w_fd_max < <(kind_stats IDLE 'worker*')
read -r ps_rss_b ps_rss_bmax ps_fd_b ps_fd_bmax < <(kind_stats BUSY 'ps*')
read -r w_rss_b w_rss_bmax w_fd_b w_fd_bmax < <(kind_stats BUSY 'worker*')
read -r c_rss c_fd <<<"${IDLE[chief]}"
read -r c_rss_b c_fd_b <<<"${BUSY[chief]}"
say "# Scale rehearsal: $ntasks tasks, $strategy, on $(nproc) cores ($(date -u '+%Y-%m-%d %H:%M UTC'))"
say ""
say "1 chief, $nps ps, $nworkers workers$( ((evaluator)) && echo ", 1 evaluator") on loopback"
say "(\`tests/scale/run.sh --tasks $tasks --strategy $strategy --ps $nps --workers $nworkers${sweep:+ --sweep $sweep}$( ((kill)) && echo " --kill")\`, build \`$build\`);"
say "the job: softmax regression on synthetic data (dim 16, 4 classes, global batch 64), 2 steps per closure."
say "The machine is shared: the 1-minute load average is given with each figure."
say ""
say "| what | figure | load |"
say "|---|---|---|"
say "| all tasks serving after start | $t_serving ms | $la_serving |"
say "| submit to first step | $t_first ms | $la_first |"
say "| submit to every worker busy | $t_busy ms | $la_busy |"
say "| steps/s (over $M_MS ms) | $M_STEPS | $M_LA |"
say "| examples/s | $M_EX | $M_LA |"
[[ $strategy == parameter_server ]] && say "| closures/s | $M_CLOS | $M_LA |"
say "| chief CPU over the window | $M_CPU ms in $M_MS ms ($(py "print(round($M_CPU * 100 / $M_MS))") % of a core) | $M_LA |"
[[ $strategy == parameter_server ]] && say "| chief CPU per closure (incl. background) | $M_PER_CLOS µs | $M_LA |"
say "| chief CPU per step | $M_PER_STEP µs | $M_LA |"
if [[ $strategy == parameter_server ]] && ((hold)); then
    say "| chief holding a job, nothing to dispatch ($H_CLOS_N closures in the window) | $H_CPU ms CPU in $H_MS ms | $H_LA |"
    say "| chief's connections then (ss) | $H_CONNS | $H_LA |"
    say "| chief CPU per heartbeat received (all of the above over 2 ZMTP heartbeats per connection per second: $H_BEATS) | $H_PER_BEAT µs | $H_LA |"
fi
say "| \`zdist status --json\` (median of 5) | $status_ms ms | $la_lat |"
say "| chief's \`/metrics\` (median of 5) | $metrics_ms ms | $la_lat |"
((nps > 0)) && say "| psd RSS idle / busy, median (max) | ${ps_rss} (${ps_rss_max}) / ${ps_rss_b} (${ps_rss_bmax}) KiB | $la_idle / $M_LA |"
say "| worker RSS idle / busy, median (max) | ${w_rss} (${w_rss_max}) / ${w_rss_b} (${w_rss_bmax}) KiB | $la_idle / $M_LA |"
say "| chief RSS idle / busy | ${c_rss} / ${c_rss_b} KiB | $la_idle / $M_LA |"
say "| chief RSS growth while busy (over the window) | $M_RSS_KBS KiB/s | $M_LA |"
if ((evaluator)); then
    read -r e_rss e_fd <<<"${IDLE[evaluator]}"
    read -r e_rss_b e_fd_b <<<"${BUSY[evaluator]}"
    say "| evaluator RSS idle / busy$( ((kill)) || echo " (busy: during the main job, which it has nothing of to evaluate)") | ${e_rss} / ${e_rss_b} KiB | $la_idle / $M_LA |"
    say "| evaluator open descriptors idle / busy | ${e_fd} / ${e_fd_b} | $la_idle / $M_LA |"
fi
((nps > 0)) && say "| psd open descriptors idle / busy, median (max) | ${ps_fd} (${ps_fd_max}) / ${ps_fd_b} (${ps_fd_bmax}) | $la_idle / $M_LA |"
say "| worker open descriptors idle / busy, median (max) | ${w_fd} (${w_fd_max}) / ${w_fd_b} (${w_fd_bmax}) | $la_idle / $M_LA |"
say "| chief open descriptors idle / busy | ${c_fd} / ${c_fd_b} | $la_idle / $M_LA |"
say "| open-files limit (soft) of the chief / of a psd | $(awk '/^Max open files/ {print $4}' "/proc/${ZD_PID[$CHIEF]}/limits") / $( ((nps)) && awk '/^Max open files/ {print $4}' "/proc/${ZD_PID[ps$((nps - 1))]}/limits" || echo -) | |"
if ((nps > 0)); then
    say "| established connections per psd, median | $conn_med | $M_LA |"
    say "| psd requests/s, all psds (the chief's view of their STATS) | $P_REQS | $M_LA |"
    say "| psd CPU, all psds, over the window | $P_CPU ms in $M_MS ms; $P_PER_REQ µs per request | $M_LA |"
fi
if ((kill)); then
    say ""
    say "## kill -9 of $kw workers and $kp ps at once"
    say ""
    say "Job: the same model with adam, its variables split over every ps (\`fixed:$nps\`), a checkpoint every $every steps,"
    say "$K_STEPS steps; killed at step $k_step (load $la_kill), restarted a second later; chief \`--closure-timeout-ms 3000\`, workers \`--ps-timeout-ms 2000\`."
    say ""
    say "| what | figure |"
    say "|---|---|"
    say "| kill to the chief's recovery (a psd lost: every ps restored from the last checkpoint) | $t_detect ms |"
    say "| kill to the step past the one at the kill (the psds restored from the last checkpoint, the steps since redone) | $t_progress ms |"
    say "| kill to every killed worker back running closures | $t_all_back ms (load $la_back) |"
    say "| psd recoveries (restores of every ps) | $recoveries |"
    say "| a checkpoint's SAVE on one psd, p50 / p99 (slowest psd; the chief calls the psds one after another) | $K_SAVE ms |"
    say "| final step / asked | $K_STEPS / $K_STEPS |"
    say "| shards with exactly one update per step | $shards of $shards (0 doubled, 0 lost) |"
    ((evaluator)) && say "| checkpoints the evaluator evaluated meanwhile | $evals |"
fi
if ((${#SWEEP_ROWS[@]})); then
    say ""
    say "## Throughput by workers (the chief given the first N)"
    say ""
    say "| workers | closures/s | examples/s | steps/s | chief CPU µs per closure | chief CPU % of a core | chief RSS growth KiB/s | load |"
    say "|---|---|---|---|---|---|---|---|"
    for r in "${SWEEP_ROWS[@]}"; do say "$r"; done
fi
say ""
say "## Every daemon: RSS (KiB) and open descriptors, idle and busy"
say ""
say "| daemon | RSS idle | RSS busy | fds idle | fds busy |"
say "|---|---|---|---|---|"
for n in "${ZD_NAMES[@]}"; do
    [[ -n ${IDLE[$n]:-} ]] || continue
    read -r a b <<<"${IDLE[$n]}"
    read -r c d <<<"${BUSY[$n]:-- -}"
    say "| $n | $a | $c | $b | $d |"
done
cp "$REPORT" "$out"
echo "report: $out"
echo "run.sh: $ZD_PASSED passed, 0 failed"
