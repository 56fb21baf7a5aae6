#!/usr/bin/env bash
# Chaos soak: a real job on a local cluster while N faults are injected at
# times drawn from a seed; then the job must be done with exactly its steps,
# every psd shard must have applied exactly one update per step (none twice,
# none lost), test accuracy must be in range, every daemon's RSS bounded and
# every fault seen by the coordinator (a line in its logs) where it logs one.
#
#   tests/chaos/run.sh --faults N --seed S [--strategy parameter_server|multi_worker_mirrored]
#                      [--steps STEPS | --fault-seconds S] [--min-accuracy A] [--max-rss-mib M] [--kinds K1,K2,...]
#                      [--soak MINUTES [--soak-warmup MINUTES] [--rss-every SECONDS]
#                       [--max-rss-growth PCT]] [--loopback] [--keep-logs DIR]
#
# Each daemon is a host of its own (a network namespace, joined to the others
# by a veth pair on a bridge; deploy/multihost/netns.sh) where namespaces can
# be made (root), else all are on loopback (--loopback asks for that).
# Faults, drawn in rounds that hit every kind once in an order from the seed:
# kill -9 of a worker, a psd or the coordinator (kill_worker kill_ps
# kill_chief); two daemons killed at once (kill_two); a worker or a psd frozen
# (SIGSTOP) past the deadlines then thawed (stop_worker stop_ps); a worker's
# or a psd's link down past the deadlines, then up (link_down, namespaces
# only); the newest complete checkpoint damaged (a byte flipped) with the
# coordinator killed so that its resume meets it (corrupt_ckpt); the
# coordinator's state directory (a small tmpfs, root only) full across a
# checkpoint, then freed (disk_full); a psd killed and the coordinator killed
# while it recovers that psd (kill_chief_in_recovery). A killed daemon is
# started again after a second, as systemd's Restart=always would. The
# elastic kinds: a worker not in the cluster file joins mid-job
# (zdist-worker --join CHIEF --bind ADDR; at most two joined at once, the
# oldest drained first) (join); a joined worker leaves, drained (zdist drain
# worker:N, then stopped once it is out) or by SIGTERM (leave; one joins
# first when none is there); SIGTERM (twice) to a worker, a psd or the
# coordinator, which must checkpoint, exit 0 and be started again
# (preempt_worker preempt_ps preempt_chief); a move of the job's variables
# to another number of ps tasks (reshard: skipped, saying so, while this
# zdist has no `reshard` command). A restarted coordinator forgets the
# workers that joined it: the harness stops them. Under
# multi_worker_mirrored a joined worker joins the cluster, not the running
# ring. --kinds draws only from the named kinds (`classic` and `elastic`
# name the two groups; kill_two then picks among the daemons the others
# hit). One line per fault, then a summary: with the time to progress again
# after any fault, and after a join or a leave alone (from the job's step
# timeline, ZD_TMP/timeline: the time from the membership change until the
# step passes where it was), and under parameter_server the time until a
# joined worker has run a closure. --keep-logs copies every daemon's log,
# the step timeline and the RSS series into DIR at the end. Without --steps
# the job is sized for --fault-seconds (12) of fault-free training a fault,
# at the pace a 3 s trial job measures (a fault that finds the job done is
# skipped and counted).
#
# --soak MINUTES runs faults for that long instead of N: jobs back to back,
# each sized from the pace of the one before to run 5 minutes (or to the
# soak's end) and checked as above as it ends (its variables then dropped
# from the psds).
# Every daemon's RSS is read from /proc every --rss-every seconds (60), by
# role (a restarted daemon continues its role's series); the soak prints the
# series and each role's growth: its largest RSS after the first
# --soak-warmup minutes (15) against its largest before, failing past
# --max-rss-growth percent (10); and the same of RssAnon alone (reported,
# not checked).
#
# The binaries come from ZDIST_BIN, ZDIST_PSD_BIN, ZDIST_WORKER_BIN and
# ZDIST_COORDINATOR_BIN, or from the build directory ZDIST_BUILD (default:
# build-test beside this script's repository).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FAULTS=10
SEED=1
STRATEGY=parameter_server
STEPS=""
FAULT_S=12 # seconds of fault-free training the job is sized for, per fault (--steps unset)
MIN_ACC=0.80
MAX_RSS_MIB=2048
ONLY=""
LOOPBACK=0
KEEP_LOGS=""
SOAK=0
WARMUP=15
RSS_EVERY=60
MAX_GROWTH=10
usage() {
    sed -n '2,60p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}
while (($#)); do
    case $1 in
    --faults) FAULTS=${2:-}; shift 2 ;;
    --seed) SEED=${2:-}; shift 2 ;;
    --strategy) STRATEGY=${2:-}; shift 2 ;;
    --steps) STEPS=${2:-}; shift 2 ;;
    --fault-seconds) FAULT_S=${2:-}; shift 2 ;;
    --min-accuracy) MIN_ACC=${2:-}; shift 2 ;;
    --max-rss-mib) MAX_RSS_MIB=${2:-}; shift 2 ;;
    --kinds) ONLY=${2:-}; shift 2 ;;
    --soak) SOAK=${2:-}; shift 2 ;;
    --soak-warmup) WARMUP=${2:-}; shift 2 ;;
    --rss-every) RSS_EVERY=${2:-}; shift 2 ;;
    --max-rss-growth) MAX_GROWTH=${2:-}; shift 2 ;;
    --loopback) LOOPBACK=1; shift ;;
    --keep-logs) KEEP_LOGS=${2:-}; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $FAULT_S =~ ^[0-9]+$ && $FAULT_S -ge 1 && $FAULT_S -le 3600 ]] || { echo "run.sh: --fault-seconds must be 1..3600, got '$FAULT_S'" >&2; exit 2; }
[[ $FAULTS =~ ^[0-9]+$ && $FAULTS -ge 1 && $FAULTS -le 10000 ]] || { echo "run.sh: --faults must be 1..10000, got '$FAULTS'" >&2; exit 2; }
[[ $SEED =~ ^[0-9]+$ ]] || { echo "run.sh: --seed must be a non-negative integer, got '$SEED'" >&2; exit 2; }
[[ $STRATEGY == parameter_server || $STRATEGY == multi_worker_mirrored ]] ||
    { echo "run.sh: --strategy must be parameter_server or multi_worker_mirrored, got '$STRATEGY'" >&2; exit 2; }
[[ -z $STEPS || $STEPS =~ ^[0-9]+$ ]] || { echo "run.sh: --steps must be a positive integer, got '$STEPS'" >&2; exit 2; }
[[ $SOAK =~ ^[0-9]+$ && $SOAK -le 10000 ]] || { echo "run.sh: --soak must be 1..10000 minutes, got '$SOAK'" >&2; exit 2; }
[[ $WARMUP =~ ^[0-9]+$ ]] || { echo "run.sh: --soak-warmup must be a number of minutes, got '$WARMUP'" >&2; exit 2; }
[[ $RSS_EVERY =~ ^[0-9]+$ && $RSS_EVERY -ge 1 ]] || { echo "run.sh: --rss-every must be 1 or more seconds, got '$RSS_EVERY'" >&2; exit 2; }
[[ $MAX_GROWTH =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "run.sh: --max-rss-growth must be a percentage, got '$MAX_GROWTH'" >&2; exit 2; }
((SOAK == 0 || WARMUP < SOAK)) || { echo "run.sh: --soak-warmup ($WARMUP min) must be shorter than --soak ($SOAK min)" >&2; exit 2; }
B=${ZDIST_BUILD:-$ROOT/build-test}
: "${ZDIST_BIN:=$B/cli/zdist}" "${ZDIST_PSD_BIN:=$B/psd/zdist-psd}"
: "${ZDIST_WORKER_BIN:=$B/worker/zdist-worker}" "${ZDIST_COORDINATOR_BIN:=$B/coordinator/zdist-coordinator}"
export ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN

source "$ROOT/tests/integration/lib.sh"
source "$ROOT/tests/integration/coord_lib.sh"
source "$ROOT/deploy/multihost/netns.sh"
set +e +o pipefail # lib.sh sets them; every check here is explicit
zd_init chaos
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
RANDOM=$SEED
NW=2
NPS=2
[[ $STRATEGY == multi_worker_mirrored ]] && NPS=0
MAX_JOINED=2 # joined workers alive at once (each a host of its own: join0, join1)

# The daemons by role; CUR[role] is the zd_start name of its running process.
declare -A CUR
ROLES=()
for ((i = 0; i < NPS; i++)); do CUR[ps$i]=ps$i; ROLES+=("ps$i"); done
for ((i = 0; i < NW; i++)); do CUR[worker$i]=worker$i; ROLES+=("worker$i"); done
CUR[chief]=chief
ROLES+=(chief)

STATE=$ZD_TMP/state
mkdir -p "$STATE"
teardown() { # once the daemons are gone (lib.sh's ZD_AFTER_STOP)
    if [[ -n $KEEP_LOGS ]]; then
        mkdir -p "$KEEP_LOGS" && cp "$ZD_TMP"/*.log "$KEEP_LOGS"/ 2>/dev/null
        cp "$ZD_TMP/timeline" "$ZD_TMP/rss.tsv" "$KEEP_LOGS"/ 2>/dev/null
    fi
    if ((TMPFS)); then umount -l "$STATE" 2>/dev/null; fi
    netns_down
}
TMPFS=0
ZD_AFTER_STOP=teardown
NETNS=0
if ((LOOPBACK)); then
    echo "chaos: every daemon on loopback (--loopback); link_down left out"
elif why=$(netns_why "zc$$"); then
    NETNS=1
else
    echo "chaos: every daemon on loopback, link_down left out: $why"
fi
# The chief's state directory (its checkpoints too) on a small filesystem of
# its own, for disk_full to fill.
if [[ $(id -u) -eq 0 ]] && mount -t tmpfs -o size=64m "chaos-$$" "$STATE" 2>"$ZD_TMP/mount.err"; then
    TMPFS=1
else
    echo "chaos: disk_full left out: no tmpfs for the state directory ($( [[ $(id -u) -eq 0 ]] && head -1 "$ZD_TMP/mount.err" || echo "needs root"))"
fi
if ((NETNS)); then
    netns_up "zc$$" "${ROLES[@]}" join0 join1 || zd_fail "could not build the namespaces' network"
    host() { echo "${NETNS_ADDR[$1]}:7100"; }
    echo "chaos: every daemon a host of its own on $NETNS_SUBNET.0/24 (network namespaces)"
else
    host() { echo "127.0.0.1:$(zd_free_port)"; }
fi
ZD_PS_ADDRS=()
ZD_WORKER_ADDRS=()
for ((i = 0; i < NPS; i++)); do ZD_PS_ADDRS+=("$(host "ps$i")"); done
for ((i = 0; i < NW; i++)); do ZD_WORKER_ADDRS+=("$(host "worker$i")"); done
ZD_CHIEF=$(host chief)
CLUSTER=$ZD_TMP/cluster.json
python3 - "$CLUSTER" "$ZD_CHIEF" "${ZD_WORKER_ADDRS[*]}" "${ZD_PS_ADDRS[*]}" <<'PY'
import json, sys
c = {"chief": [sys.argv[2]], "worker": sys.argv[3].split()}
if sys.argv[4]:
    c["ps"] = sys.argv[4].split()
json.dump({"cluster": c}, open(sys.argv[1], "w"))
PY

# Every daemon started, as "ROLE PID START" lines (START: its start time in
# /proc/PID/stat, so that a pid the kernel gave another process since is
# not read as this one's): the RSS sampler reads them.
DAEMONS=$ZD_TMP/daemons
: >"$DAEMONS"
started() { echo "$1 $2 $(awk '{print $22}' "/proc/$2/stat" 2>/dev/null)" >>"$DAEMONS"; }
# Deadlines shorter than a fault: a closure (parameter_server) or a
# collective (multi_worker_mirrored, in the job) that meets a frozen or cut
# off daemon fails after 3 s, a worker's psd call after 2 s.
start_role() { # ROLE NAME: in its namespace when there are namespaces
    local role=$1 name=$2 in=()
    ((NETNS)) && in=(ip netns exec "$NETNS_TAG-$role")
    case $role in
    ps*) zd_start "$name" "${in[@]}" "$ZDIST_PSD_BIN" --cluster "$CLUSTER" --task "ps:${role#ps}" --checkpoint-root "$ZD_TMP" ;;
    worker*) zd_start "$name" "${in[@]}" "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task "worker:${role#worker}" \
        --ps-timeout-ms 2000 ;;
    chief) zd_start "$name" "${in[@]}" "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$STATE" \
        --keep-variables --closure-timeout-ms 3000 ;; # each shard's update count is read after the job
    esac
    started "$role" "${ZD_PID[$name]}"
}
for role in "${ROLES[@]}"; do start_role "$role" "$role"; done
for ((i = 0; i < NPS; i++)); do zd_wait_psd "ps$i" "${ZD_PS_ADDRS[$i]}" 60; done
for ((i = 0; i < NW; i++)); do zd_wait_log "worker$i" "serving at" 60; done
zd_wait_log chief "chief serving at" 60

# ---- every daemon's RSS, by role, every RSS_EVERY s ----
# A process of its own (so that a long fault does not delay a sample),
# killed at exit as the daemons are; "SECONDS ROLE PID KIB ANON_KIB" lines
# (VmRSS, and RssAnon: the part that is not the binary's and the
# libraries' pages, which a daemon of 13 MiB maps in as it first runs
# each path: some 10 MiB of it).
RSS=$ZD_TMP/rss.tsv
rss_sampler() {
    local t0=$SECONDS role pid start kb st
    while :; do
        while read -r role pid start; do
            st=$(awk '{print $3, $22}' "/proc/$pid/stat" 2>/dev/null)
            [[ -n $st && $st != Z* && ${st#* } == "$start" ]] || continue
            kb=$(awk '/^VmRSS:/ {r = $2} /^RssAnon:/ {a = $2} END {if (r) print r, a}' "/proc/$pid/status" 2>/dev/null)
            [[ -n $kb ]] && echo "$((SECONDS - t0)) $role $pid $kb"
        done <"$DAEMONS" >>"$RSS"
        echo "$((SECONDS - t0)) load 0 $(awk '{printf "%d", $1 * 100}' /proc/loadavg)" >>"$RSS"
        sleep "$RSS_EVERY"
    done
}
: >"$RSS"
rss_sampler &
zd_adopt rss_sampler $!

declare -A GEN MAXRSS
restart() { # role: started again under a new name (its own log), as systemd would
    local role=$1 name
    GEN[$role]=$((${GEN[$role]:-0} + 1))
    name="${role}_r${GEN[$role]}"
    start_role "$role" "$name"
    CUR[$role]=$name
    if [[ $role == chief ]]; then
        zd_wait_log "$name" "chief serving at" 60
        forget_joined
    else
        zd_wait_log "$name" "serving at" 60
    fi
}
kill9() {
    local name=${CUR[$1]}
    kill -KILL "${ZD_PID[$name]}" 2>/dev/null
    wait "${ZD_PID[$name]}" 2>/dev/null
    ZD_PID[$name]=""
}
# exited NAME SECS: waits up to SECS for NAME to exit, its status in RC; 1
# (and NAME killed -9) when it had not exited by then.
exited() {
    local name=$1 pid=${ZD_PID[$1]} deadline=$((SECONDS + $2)) st
    while st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) && [[ $st != Z ]]; do
        if ((SECONDS >= deadline)); then
            kill -KILL "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            ZD_PID[$name]=""
            RC=137
            return 1
        fi
        sleep 0.2
    done
    wait "$pid"
    RC=$?
    ZD_PID[$name]=""
}
sample_rss() {
    local role pid kb
    for role in "${ROLES[@]}"; do
        pid=${ZD_PID[${CUR[$role]}]:-}
        [[ -n $pid ]] || continue
        kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        [[ -n $kb ]] || kb=0
        if ((kb > ${MAXRSS[$role]:-0})); then MAXRSS[$role]=$kb; fi
    done
}
# The job's step, each reading also on the step timeline ("MS STEP" lines).
TIMELINE=$ZD_TMP/timeline
: >"$TIMELINE"
status_json() { "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json >"$ZD_TMP/st.json" 2>/dev/null; }
jget() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$ZD_TMP/st.json" "$1" 2>/dev/null || echo ""; }
job_step() {
    local s
    status_json && s=$(jget 'j["step"]') && [[ -n $s ]] || { echo -1; return; }
    echo "$(date +%s%3N) $s" >>"$TIMELINE"
    echo "$s"
}
job_state() { status_json && jget 'j["state"]' || echo unknown; }
ended() { [[ $(job_state) == done ]]; }
# json_wait EXPR SECS: until the job's status satisfies EXPR; 1 when it did not within SECS.
json_wait() {
    local deadline=$((SECONDS + $2))
    until status_json && [[ $(jget "bool($1)") == True ]]; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}
# chief_lines PATTERN: how many lines of every chief's log (each generation) match.
chief_lines() { cat "$ZD_TMP"/chief*.log 2>/dev/null | grep -cE "$1"; }
# chief_last PATTERN: the newest line of the chiefs' logs matching, from the match on
# (generation order: chief, chief_r1, chief_r2, ... chief_r10; not the glob's).
chief_last() { ls "$ZD_TMP"/chief*.log | sort -V | xargs cat | grep -oE "$1.*" | tail -1; }

# The job: a dense model (every shard updated by every step) with adam, whose
# step counter each psd saves and restores with its checkpoint.
if [[ $STRATEGY == parameter_server ]]; then
    STRAT='{"type": "parameter_server"}'
else
    STRAT='{"type": "multi_worker_mirrored", "collective_timeout_ms": 3000, "lost_worker_wait_ms": 4000}'
fi
job_spec() { # FILE NAME STEPS
    cat >"$1" <<JSON
{"name": "$2", "strategy": $STRAT,
 "model": {"name": "mlp", "params": {"hidden": [64]}}, "optimizer": {"type": "adam", "learning_rate": 0.002},
 "dataset": {"format": "synthetic", "synthetic": {"n": 8192, "test_n": 2048, "dim": 64, "classes": 4, "seed": 7,
                                                 "noise_std": 2.0},
             "global_batch_size": 64},
 "steps": $3, "checkpoint": {"every_steps": 50, "keep": 3}, "seed": 3}
JSON
}
PACE=0 # steps per second without faults (the pace job's), when measured
if [[ -z $STEPS ]] || ((SOAK)); then
    # Enough steps for the faults (about FAULT_S s of training each), at the pace
    # this cluster trains now (3 s of a job, then cancelled): faults must not
    # find the job done, nor the job run on long after them.
    job_spec "$ZD_TMP/pace.json" chaos-pace 100000000
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/pace.json" --cluster "$CLUSTER" --detach
    JOB=$(cat "$OUT")
    coord_wait_step "$JOB" 200 600
    s0=$(job_step) t0=$(date +%s%3N)
    sleep 3
    s1=$(job_step) t1=$(date +%s%3N)
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$JOB" --cluster "$CLUSTER"
    coord_wait_state "$JOB" cancelled 120
    ((s1 > s0)) || zd_fail "the pace job made no progress in 3 s (step $s0, then $s1)"
    PACE=$(((s1 - s0) * 1000 / (t1 - t0) + 1))
    [[ -n $STEPS ]] || STEPS=$(((s1 - s0) * FAULT_S * 1000 * FAULTS / (t1 - t0) + 1000))
fi

# The kinds, in two groups (--kinds classic,elastic names them).
CLASSIC=(kill_worker kill_chief kill_two stop_worker corrupt_ckpt)
[[ $STRATEGY == parameter_server ]] && CLASSIC+=(kill_ps stop_ps kill_chief_in_recovery)
((NETNS)) && CLASSIC+=(link_down)
((TMPFS)) && CLASSIC+=(disk_full)
ELASTIC=(join leave preempt_worker preempt_chief)
[[ $STRATEGY == parameter_server ]] && ELASTIC+=(preempt_ps reshard)
KINDS=("${CLASSIC[@]}" "${ELASTIC[@]}")
has() { [[ " ${KINDS[*]} " == *" $1 "* ]]; }
if [[ -n $ONLY ]]; then
    IFS=, read -r -a want <<<"$ONLY"
    keep=()
    for k in "${want[@]}"; do
        case $k in
        classic) keep+=("${CLASSIC[@]}") ;;
        elastic) keep+=("${ELASTIC[@]}") ;;
        *) has "$k" || zd_fail "--kinds: '$k' is not a fault kind for $STRATEGY here (one of: ${KINDS[*]}; or classic, elastic)"
           keep+=("$k") ;;
        esac
    done
    KINDS=("${keep[@]}")
    # kill_two picks among the daemons the other kinds may hit.
    pool=()
    for role in "${ROLES[@]}"; do
        case $role in
        ps*) if has kill_ps || has stop_ps || has link_down || has kill_chief_in_recovery || has preempt_ps; then pool+=("$role"); fi ;;
        worker*) if has kill_worker || has stop_worker || has link_down || has preempt_worker; then pool+=("$role"); fi ;;
        chief) if has kill_chief || has corrupt_ckpt || has kill_chief_in_recovery || has preempt_chief; then pool+=("$role"); fi ;;
        esac
    done
    ((${#pool[@]} >= 2)) || ! has kill_two || zd_fail "--kinds: kill_two needs two daemons the other kinds hit"
else
    pool=("${ROLES[@]}")
fi
# reshard: wired once `zdist reshard JOB --ps N` exists (another branch adds it).
RESHARD=0
"$ZDIST_BIN" reshard --help >/dev/null 2>&1 && RESHARD=1
LINKED=() # link_down: a worker's or a psd's
for role in "${ROLES[@]}"; do [[ $role == chief ]] || LINKED+=("$role"); done
declare -A NKIND
RECOVER_MS=() JOIN_MS=() LEAVE_MS=() FIRST_CLOSURE_MS=()
STOP_S=8 # past the closure, psd call and collective deadlines
# pick ROLE N: R is ROLE0..ROLE(N-1), drawn from the seed. Not in $(...): a
# subshell draws from a RANDOM of its own, reseeded each time.
pick() { R="$1$((RANDOM % $2))"; }
# next_kind: KIND is the next fault kind; every kind once per round, each
# round in an order drawn from the seed.
BAG=()
next_kind() {
    local i j t
    if ((${#BAG[@]} == 0)); then
        BAG=("${KINDS[@]}")
        for ((i = ${#BAG[@]} - 1; i > 0; i--)); do
            j=$((RANDOM % (i + 1)))
            t=${BAG[$i]} BAG[$i]=${BAG[$j]} BAG[$j]=$t
        done
    fi
    KIND=${BAG[0]}
    BAG=("${BAG[@]:1}")
}
# seen PATTERN BEFORE: the coordinator's logs hold more lines matching
# PATTERN than BEFORE (waiting up to a minute for the line).
seen() {
    local deadline=$((SECONDS + 60))
    while (($(chief_lines "$1") <= $2)); do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

wait_progress() { # until the job's step passes $1 or it ends; prints ms waited
    local from=$1 t0 s st
    t0=$(date +%s%3N)
    while :; do
        s=$(job_step)
        ((s > from)) && break
        st=$(jget 'j["state"]')
        [[ $st == done || $st == failed || $st == cancelled ]] && break
        (($(date +%s%3N) - t0 < 300000)) || zd_fail "no progress past step $from within 300 s after a fault"
        sleep 0.2
    done
    echo $(($(date +%s%3N) - t0))
}
# since_ms T0_MS STEP: from the step timeline, the ms from T0_MS until the
# first reading past STEP (at or after T0_MS); the job's end counts as progress.
since_ms() {
    local t0=$1 from=$2
    wait_progress "$from" >/dev/null
    awk -v t0="$t0" -v from="$from" '$1 >= t0 && $2 > from {print $1 - t0; found = 1; exit}
        END {if (!found) print "-"}' "$TIMELINE"
}
# pct P: the P-th percentile of the numbers on stdin (nearest rank).
pct() { sort -n | awk -v p="$1" 'NF {a[++n]=$1} END {if (!n) {print "-"; exit} i=int(n*p/100+0.999); if (i<1) i=1; if (i>n) i=n; print a[i]}'; }

FAILS=0
bad() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
SKIPPED=0
# What the coordinator logs for a fault, by kind (none: not checked); they name the job.
set_patterns() {
    LOST_PS="job $JOB: a ps task was lost"
    CKPT_FAILED="job $JOB: the checkpoint at step [0-9]+ failed"
    if ((NPS > 0)); then
        WORKER_LOST="job $JOB: worker [0-9]+ \("
    else
        WORKER_LOST="job $JOB: (step [0-9]+ failed|waiting for [0-9]+ lost worker)"
    fi
    RING_BACK="job $JOB: [0-9]+ workers in the ring, restored from the checkpoint at step"
    CHIEF_BACK="job $JOB \('chaos'\) was running, its last checkpoint at step [0-9]+: resuming it"
    VIS=([kill_worker]=$WORKER_LOST [stop_worker]=$WORKER_LOST [kill_ps]=$LOST_PS [kill_chief]=$CHIEF_BACK
        [corrupt_ckpt]="job $JOB: the checkpoint at step [0-9]+ is damaged" [disk_full]=$CKPT_FAILED
        [kill_chief_in_recovery]=$LOST_PS [join]="worker:[0-9]+ \([^)]*\) joined the cluster"
        [leave]="worker:[0-9]+ \([^)]*\) leaves: " [preempt_worker]="job $JOB: worker:[0-9]+ got SIGTERM"
        [preempt_ps]="job $JOB: ps:[0-9]+ got SIGTERM" [preempt_chief]="job $JOB: checkpointing before the stop")
}
declare -A VIS
# A psd frozen or cut off: a worker's step fails on it or (past the closure
# deadline first) the workers waiting on it are lost, or the chief's
# checkpoint meets it.
ps_unreachable() {
    echo "job $JOB: (worker [0-9]+ \(.* ps task ${1#ps} at [^ ]+ is unreachable|worker [0-9]+ \([^)]*\) lost|a ps task was lost|the checkpoint at step [0-9]+ failed \(ps ${1#ps}:)"
}

# ---- elastic workers ----
JOINED=()            # zd_start names of the joined workers alive, oldest first
declare -A JIDX JSLOT # a joined worker's index (worker:N) and its host (join0, join1)
NJOINED=0
FORGOTTEN=0
NOTE="" # what a fault did besides (a joined worker drained to make room, forgotten by a restarted chief)
# join_one: a worker joins through the chief (zdist-worker --join); JNAME,
# JN its name and index. JOIN_MS gets the time to progress after it, and
# under parameter_server FIRST_CLOSURE_MS the time until it ran a closure.
join_one() {
    local slot="" s addr in=() t0 from used n
    for s in join0 join1; do
        used=0
        for n in "${JOINED[@]}"; do [[ ${JSLOT[$n]} == "$s" ]] && used=1; done
        ((used)) || { slot=$s; break; }
    done
    NJOINED=$((NJOINED + 1))
    JNAME=joined$NJOINED
    if ((NETNS)); then
        addr="${NETNS_ADDR[$slot]}:$((7100 + NJOINED))"
        in=(ip netns exec "$NETNS_TAG-$slot")
    else
        addr="127.0.0.1:$(zd_free_port)"
    fi
    zd_start "$JNAME" "${in[@]}" "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://$addr" --ps-timeout-ms 2000
    started joined "${ZD_PID[$JNAME]}"
    zd_wait_log "$JNAME" "joined the cluster through the chief at .* as worker:[0-9]+" 60
    from=$(job_step) t0=$(date +%s%3N)
    JN=$(grep -oE "as worker:[0-9]+" "$ZD_TMP/$JNAME.log" | head -1 | grep -oE '[0-9]+$')
    JOINED+=("$JNAME")
    JIDX[$JNAME]=$JN
    JSLOT[$JNAME]=$slot
    if ((NPS > 0)); then
        if json_wait "len(j['workers']) > $JN and j['workers'][$JN]['closures_done'] > 0" 60; then
            FIRST_CLOSURE_MS+=("$(($(date +%s%3N) - t0))")
        else
            bad "joined worker:$JN ran no closure within 60 s"
        fi
    fi
    JOIN_MS+=("$(since_ms "$t0" "$from")")
}
# leave_one NAME HOW: the joined worker NAME leaves, drained (zdist drain
# worker:N; stopped once the job has it out) or by SIGTERM; it must exit 0.
# LEAVE_MS gets the time to progress after the drain or the signal.
leave_one() {
    local name=$1 how=$2 n=${JIDX[$1]} t0 from keep=() x
    from=$(job_step) t0=$(date +%s%3N)
    if [[ $how == drain ]]; then
        "$ZDIST_BIN" drain "worker:$n" --cluster "$CLUSTER" >"$OUT" 2>&1 || bad "zdist drain worker:$n: $(cat "$OUT")"
        if ((NPS > 0)) && ! json_wait "j['workers'][$n]['state'] == 'left' and j['workers'][$n]['in_flight'] == 0" 60; then
            bad "drained worker:$n is not out of the job within 60 s"
        fi
    fi
    kill -TERM "${ZD_PID[$name]}"
    exited "$name" 60 || bad "joined worker:$n did not exit within 60 s of SIGTERM"
    ((RC == 0)) || bad "joined worker:$n exited $RC on SIGTERM (want 0)"
    for x in "${JOINED[@]}"; do [[ $x == "$name" ]] || keep+=("$x"); done
    JOINED=("${keep[@]}")
    LEAVE_MS+=("$(since_ms "$t0" "$from")")
}
# A restarted chief knows only the cluster file's workers (it does not keep
# who joined): the joined ones, idle from then on, are stopped.
forget_joined() {
    local name
    for name in "${JOINED[@]}"; do
        kill -TERM "${ZD_PID[$name]}"
        exited "$name" 60
        FORGOTTEN=$((FORGOTTEN + 1))
        NOTE+="; joined worker:${JIDX[$name]} stopped (the restarted chief does not know it; exit $RC)"
    done
    JOINED=()
}
# preempt ROLE: SIGTERM (twice: the second is no crash); the chief logs the
# preemption's checkpoint; the task exits 0 and is started again.
preempt() {
    local r=$1 name=${CUR[$1]} pat n
    case $r in
    chief) pat="job $JOB: checkpointing before the stop" ;;
    ps*) pat="job $JOB: ps:${r#ps} got SIGTERM: checkpointing" ;;
    *) pat="job $JOB: worker:${r#worker} got SIGTERM: checkpointing" ;;
    esac
    n=$(chief_lines "$pat")
    kill -TERM "${ZD_PID[$name]}"
    # (A job that ends first has nothing to checkpoint: the chief answers at once.)
    seen "$pat" "$n" || ended || bad "fault $f: SIGTERM to $r: no '$pat' in the coordinator's logs"
    kill -TERM "${ZD_PID[$name]}" 2>/dev/null
    if exited "$name" 60; then
        ((RC == 0)) || bad "fault $f: $r exited $RC after SIGTERM (want 0)"
    else
        bad "fault $f: $r did not exit within 60 s of SIGTERM (killed)"
    fi
    what="SIGTERM twice to $r, exit $RC, started again"
    restart "$r"
}

# inject KIND: one fault; sets `what`, and `vis`/`before` when it differs
# from the kind's line; PROGRESS=0 when it did nothing to wait for.
inject() {
    local kind=$1 a b k newest victim kept r
    PROGRESS=1
    case $kind in
    kill_worker) pick worker $NW; r=$R; kill9 "$r"; what="kill -9 $r"; sleep 1; restart "$r" ;;
    kill_ps) pick ps $NPS; r=$R; kill9 "$r"; what="kill -9 $r"; sleep 1; restart "$r" ;;
    kill_chief) kill9 chief; what="kill -9 chief"; sleep 1; restart chief ;;
    kill_two)
        a=${pool[$((RANDOM % ${#pool[@]}))]}
        b=$a
        while [[ $b == "$a" ]]; do b=${pool[$((RANDOM % ${#pool[@]}))]}; done
        kill9 "$a"; kill9 "$b"; what="kill -9 $a and $b at once"; sleep 1; restart "$a"; restart "$b" ;;
    stop_worker | stop_ps)
        if [[ $kind == stop_ps ]]; then pick ps $NPS; else pick worker $NW; fi
        r=$R
        [[ $r == ps* ]] && vis=$(ps_unreachable "$r") && before=$(chief_lines "$vis")
        kill -STOP "${ZD_PID[${CUR[$r]}]}"; sleep "$STOP_S"; kill -CONT "${ZD_PID[${CUR[$r]}]}"
        what="SIGSTOP $r for ${STOP_S} s, then SIGCONT" ;;
    link_down)
        r=${LINKED[$((RANDOM % ${#LINKED[@]}))]}
        if [[ $r == worker* ]]; then vis=$WORKER_LOST; else vis=$(ps_unreachable "$r"); fi
        before=$(chief_lines "$vis")
        ip link set "${NETNS_VETH[$r]}" down; sleep "$STOP_S"; ip link set "${NETNS_VETH[$r]}" up
        what="$r's link down for ${STOP_S} s, then up" ;;
    disk_full)
        # Full until a checkpoint has failed on it (and a second more), then freed.
        dd if=/dev/zero of="$STATE/filler" bs=1M 2>/dev/null
        what="state directory full ($(df --output=avail -k "$STATE" | tail -1 | tr -d ' ') KiB free) until a checkpoint failed, then freed"
        if seen "$CKPT_FAILED" "$before"; then
            # Nothing newer can complete while full: the one the line names must be whole.
            kept=$(chief_last "$CKPT_FAILED" | sed -nE 's/.*the one at step ([0-9]+) stays.*/\1/p')
            [[ -n $kept && -f $JOB_DIR/ckpt-$kept/manifest.json ]] ||
                bad "fault $f: the checkpoint the coordinator keeps (step '${kept}') is not complete in $JOB_DIR"
            what+="; ckpt-$kept kept whole"
            sleep 1
        fi
        rm -f "$STATE/filler" ;;
    kill_chief_in_recovery)
        # The coordinator finds a psd lost when it is back (a new
        # incarnation; until then its closures are retried), so the psd is
        # restarted first, as systemd would, and the chief killed as soon as
        # it logs that it recovers: while it waits for the psds or restores.
        pick ps $NPS
        r=$R
        kill9 "$r"
        sleep 1
        restart "$r"
        seen "$LOST_PS" "$before" || bad "fault $f: the coordinator did not log that it recovers $r"
        kill9 chief
        what="kill -9 $r, restarted; kill -9 chief once it logged the recovery"
        sleep 1
        restart chief ;;
    corrupt_ckpt)
        # The chief first: alive, it may complete a newer checkpoint (every
        # 50 steps is several a second) after the pick, and resume from that.
        kill9 chief
        newest=$(ls -d "$JOB_DIR"/ckpt-* 2>/dev/null | grep -E 'ckpt-[0-9]+$' | sort -t- -k2 -n |
            while read -r d; do if [[ -f $d/manifest.json ]]; then echo "$d"; fi; done | tail -1)
        k=$((1 + RANDOM % 2))
        victim=$(ls "$newest"/*.bin 2>/dev/null | sort | head -"$k" | tail -1)
        if [[ -n $victim ]]; then
            python3 - "$victim" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 3] ^= 0x10
open(sys.argv[1], "wb").write(b)
PY
            what="$(basename "$newest")/$(basename "$victim") damaged, chief killed -9"
        else
            what="no complete checkpoint to damage; chief killed -9"
            vis=""
        fi
        sleep 1
        restart chief ;;
    join)
        if ((${#JOINED[@]} >= MAX_JOINED)); then
            leave_one "${JOINED[0]}" drain
            NOTE+="; the oldest joined worker drained first ($MAX_JOINED at most)"
        fi
        join_one
        what="worker:$JN joined (zdist-worker --join)"
        ((NPS > 0)) && what+=", its first closure after ${FIRST_CLOSURE_MS[-1]:-?} ms"
        what+=", progress after ${JOIN_MS[-1]} ms" ;;
    leave)
        if ((${#JOINED[@]} == 0)); then
            join_one
            NOTE+="; worker:$JN joined first"
        fi
        k=drain
        ((RANDOM % 2)) && k=term
        r=${JOINED[0]}
        leave_one "$r" "$k"
        what="worker:${JIDX[$r]} left ($([[ $k == drain ]] && echo "zdist drain, then SIGTERM" || echo SIGTERM)), exit $RC, progress after ${LEAVE_MS[-1]} ms" ;;
    preempt_worker) pick worker $NW; preempt "$R" ;;
    preempt_ps) pick ps $NPS; preempt "$R" ;;
    preempt_chief) preempt chief ;;
    reshard)
        # The hook for `zdist reshard JOB --ps N` (another branch): from two
        # ps tasks to one and back, the exactness checks as for any fault.
        if ((RESHARD)); then
            k=$((NPS - (${NKIND[reshard]:-0} % 2)))
            if "$ZDIST_BIN" reshard "$JOB" --ps "$k" --cluster "$CLUSTER" >"$OUT" 2>&1; then
                what="zdist reshard --ps $k"
            else
                bad "fault $f: zdist reshard $JOB --ps $k: $(head -3 "$OUT")"
                what="zdist reshard --ps $k failed"
            fi
        else
            what="skipped: this zdist has no 'reshard' command (the hook waits for zdist reshard JOB --ps N)"
            PROGRESS=0
        fi ;;
    esac
}

# one_fault: the next kind, injected; a line for it.
one_fault() {
    local kind step ms
    next_kind
    kind=$KIND
    step=$(job_step)
    what="" NOTE=""
    vis=${VIS[$kind]:-}
    before=0
    [[ -n $vis ]] && before=$(chief_lines "$vis")
    inject "$kind"
    NKIND[$kind]=$((${NKIND[$kind]:-0} + 1))
    if ((!PROGRESS)); then
        SKIPPED=$((SKIPPED + 1))
        echo "fault $f$OF at step $step: $kind: $what"
        return
    fi
    ms=$(wait_progress "$step")
    RECOVER_MS+=("$ms")
    sample_rss
    if [[ -n $vis ]]; then
        if seen "$vis" "$before"; then
            what+="; logged: $(chief_last "$vis" | cut -c1-110)"
        elif ended; then
            what+="; the job ended first: no line to look for"
        else
            bad "fault $f ($kind): the coordinator's logs have no new line matching '$vis'"
        fi
    fi
    echo "fault $f$OF at step $step: $kind: $what$NOTE; progress again after ${ms} ms"
}

# check_job: the job ended with exactly its steps, each psd shard applied
# one update per step, accuracy; the summary line.
check_job() {
    local steps_done acc applied doubled lost d l i rss role mib kinds k p50 p99 damaged recoveries first
    status_json
    sample_rss
    steps_done=$(jget 'j["step"]')
    [[ $steps_done == "$STEPS" && $(jget 'j["steps"]') == "$STEPS" ]] || bad "job $JOB ended at step $steps_done of $STEPS"
    acc=$(jget 'j["metrics"]["test_accuracy"]')
    python3 -c "import sys; sys.exit(0 if float('$acc') >= $MIN_ACC else 1)" 2>/dev/null ||
        bad "test accuracy $acc below $MIN_ACC"
    applied="n/a (no psd)"
    if ((NPS > 0)); then
        # Each step pushes one update to every shard: with adam, each shard's
        # step counter (saved and restored with its checkpoint) is the count of
        # updates it holds. More than the steps: one applied twice; fewer: lost.
        doubled=0 lost=0
        for ((i = 0; i < NPS; i++)); do
            "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json >"$ZD_TMP/ps$i.stats" || bad "ps $i: no stats"
            read -r d l < <(python3 - "$ZD_TMP/ps$i.stats" "$STEPS" "$JOB" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
steps = int(sys.argv[2])
d = l = 0
for s in j["shard_info"]:
    if not s["name"].startswith(sys.argv[3] + "/"):
        continue
    d += max(0, s["step"] - steps)
    l += max(0, steps - s["step"])
    if s["step"] != steps:
        print("shard %s/%d applied %d updates for %d steps" % (s["name"], s["shard_index"], s["step"], steps),
              file=sys.stderr)
print(d, l)
PY
            )
            doubled=$((doubled + d))
            lost=$((lost + l))
        done
        applied="$doubled doubled, $lost lost"
        ((doubled == 0 && lost == 0)) || bad "psd updates per step: $applied"
    fi
    rss=""
    for role in "${ROLES[@]}"; do
        mib=$((${MAXRSS[$role]:-0} / 1024))
        rss+="$role ${mib} MiB, "
        ((mib <= MAX_RSS_MIB)) || bad "$role RSS $mib MiB above $MAX_RSS_MIB MiB"
    done
    kinds=""
    for k in "${!NKIND[@]}"; do kinds+="$k ${NKIND[$k]}, "; done
    # Under multi_worker_mirrored a joined worker joins the cluster, not the running ring.
    first="no closures: the ring does not take a joined worker"
    ((NPS > 0)) && first="first closure p50 $(printf '%s\n' "${FIRST_CLOSURE_MS[@]}" | pct 50) ms, p99 $(printf '%s\n' "${FIRST_CLOSURE_MS[@]}" | pct 99) ms"
    p50=$(printf '%s\n' "${RECOVER_MS[@]}" | pct 50)
    p99=$(printf '%s\n' "${RECOVER_MS[@]}" | pct 99)
    damaged=$(chief_lines "job $JOB: the checkpoint at step [0-9]+ is damaged")
    # Counted over every generation of the chief (its status counts since its start).
    if ((NPS > 0)); then
        recoveries="psd recoveries $(chief_lines "$LOST_PS")"
    else
        recoveries="ring re-formed from a checkpoint $(chief_lines "$RING_BACK") times"
    fi
    echo "summary: $STRATEGY seed $SEED: ${#RECOVER_MS[@]} faults (${kinds%, }), $SKIPPED skipped;" \
        "job $JOB $(jget 'j["state"]') at step $steps_done/$STEPS; $recoveries, damaged checkpoints set aside $damaged," \
        "checkpoints failed $(chief_lines "$CKPT_FAILED");" \
        "time to progress again p50 ${p50} ms, p99 ${p99} ms;" \
        "after a join p50 $(printf '%s\n' "${JOIN_MS[@]}" | pct 50) ms, p99 $(printf '%s\n' "${JOIN_MS[@]}" | pct 99) ms" \
        "(${#JOIN_MS[@]}; $first);" \
        "after a leave p50 $(printf '%s\n' "${LEAVE_MS[@]}" | pct 50) ms, p99 $(printf '%s\n' "${LEAVE_MS[@]}" | pct 99) ms" \
        "(${#LEAVE_MS[@]}); joined workers a restarted chief forgot $FORGOTTEN;" \
        "updates per step: $applied; test accuracy $acc; max RSS: ${rss%, }"
}

# run_job STEPS: a job under faults (FAULTS of them, or until the soak's
# end), then checked.
run_job() {
    STEPS=$1
    job_spec "$ZD_TMP/job.json" chaos "$STEPS"
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
    JOB=$(cat "$OUT")
    JOB_DIR=$STATE/jobs/$JOB
    set_patterns
    if ((SOAK)); then
        echo "chaos: job $JOB, $STRATEGY, $STEPS steps, faults until the soak's end in $(((SOAK_END - SECONDS) / 60)) min, seed $SEED"
    else
        echo "chaos: job $JOB, $STRATEGY, $STEPS steps, $FAULTS faults, seed $SEED"
    fi
    while :; do
        if ((SOAK)); then
            ((SECONDS < SOAK_END)) || break
        else
            ((f < FAULTS)) || break
        fi
        # A time from the seed: 2 to 5 s after the previous fault's recovery.
        sleep $((2 + RANDOM % 4)).$((RANDOM % 10))
        f=$((f + 1))
        if [[ $(job_state) != running ]]; then
            if ((SOAK)); then f=$((f - 1)); break; fi
            echo "fault $f$OF: skipped, the job is $(jget 'j["state"]') (give it more --steps)"
            SKIPPED=$((SKIPPED + 1))
            continue
        fi
        one_fault
    done
    coord_wait_state "$JOB" done 1200
    check_job
}

# soak_report: each role's RSS series and its growth after the warm-up.
soak_report() {
    python3 - "$RSS" "$((WARMUP * 60))" "$MAX_GROWTH" <<'PY'
import sys
from collections import defaultdict
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
warm, limit = int(sys.argv[2]), float(sys.argv[3])
series = defaultdict(list)  # role -> [(t, pid, kib)]
anon = defaultdict(list)  # role -> [(t, kib)]: RssAnon
for r in rows:
    series[r[1]].append((int(r[0]), r[2], int(r[3])))
    if len(r) > 4:
        anon[r[1]].append((int(r[0]), int(r[4])))
over = []
for role in sorted(series):
    s = series[role]
    if role == "load":
        vals = [k / 100 for _, _, k in s]
        print("soak: load average (1 min) per sample: mean %.2f, max %.2f" % (sum(vals) / len(vals), max(vals)))
        continue
    before = [k for t, _, k in s if t <= warm]
    after = [k for t, _, k in s if t > warm]
    pids = []
    for _, p, _ in s:
        if p not in pids:
            pids.append(p)
    line = "soak: %s RSS MiB by sample: %s" % (role, " ".join("%.0f" % (k / 1024) for _, _, k in s))
    print(line)
    if before and after:
        g = 100.0 * (max(after) - max(before)) / max(before)
        ok = role == "joined" or g < limit
        print("soak: %s growth after the first %d min: %+.1f %% (largest %.1f MiB before, %.1f MiB after; %d process%s)%s"
              % (role, warm // 60, g, max(before) / 1024, max(after) / 1024, len(pids), "" if len(pids) == 1 else "es",
                 "" if ok else "  <-- over %g %%" % limit))
        if not ok:
            over.append(role)
        ab = [k for t, k in anon[role] if t <= warm]
        aa = [k for t, k in anon[role] if t > warm]
        if ab and aa:
            print("soak: %s anonymous memory (RssAnon) growth after the first %d min: %+.1f %% (%.1f MiB before, %.1f MiB after)"
                  % (role, warm // 60, 100.0 * (max(aa) - max(ab)) / max(ab), max(ab) / 1024, max(aa) / 1024))
    # The longest-lived process: its own RSS from the warm-up (or its start) to its end.
    best = max(pids, key=lambda p: sum(1 for _, q, _ in s if q == p))
    mine = [(t, k) for t, q, k in s if q == best]
    own = [(t, k) for t, k in mine if t > warm] or mine
    print("soak: %s longest-lived process (pid %s, %d samples): %.1f -> %.1f MiB" %
          (role, best, len(mine), own[0][1] / 1024, own[-1][1] / 1024))
print(" ".join(over))
PY
}

f=0
OF=/$FAULTS
if ((SOAK)); then
    OF=""
    SOAK_END=$((SECONDS + SOAK * 60))
    rate=$((PACE / 2 + 1)) # steps/s under faults: a first guess, then measured
    echo "chaos: soak of $SOAK min ($STRATEGY, seed $SEED, kinds: ${KINDS[*]}); RSS every $RSS_EVERY s; load $(cut -d' ' -f1-3 /proc/loadavg)"
    while ((SOAK_END - SECONDS > 30)); do
        t=$SECONDS
        # At most 5 minutes a job: a guess that is off costs little, and each job is checked.
        left=$((SOAK_END - SECONDS))
        ((left <= 300)) || left=300
        steps=$((rate * left))
        ((steps >= 1000)) || steps=1000
        run_job "$steps"
        rate=$((steps / (SECONDS - t + 1) + 1))
        # The psds keep every job's variables (--keep-variables, for the counts): dropped once checked.
        for ((i = 0; i < NPS; i++)); do
            "$ZDIST_BIN" ps drop "${ZD_PS_ADDRS[$i]}" "$JOB" --force >"$OUT" 2>&1 || bad "ps $i: drop $JOB: $(cat "$OUT")"
        done
    done
    echo "chaos: soak done after $((SECONDS / 60)) min; load $(cut -d' ' -f1-3 /proc/loadavg)"
    over=$(soak_report | tee "$ZD_TMP/soak.txt" | tail -1)
    sed '$d' "$ZD_TMP/soak.txt"
    [[ -z $over ]] || bad "RSS grew by $MAX_GROWTH % or more after the first $WARMUP min: $over"
else
    run_job "$STEPS"
fi
((FAILS == 0)) || zd_fail "$FAILS checks failed"
echo "chaos: passed"
