#!/usr/bin/env bash
# Chaos soak: a real job on a local cluster while N faults are injected at
# times drawn from a seed; then the job must be done with exactly its steps,
# every psd shard must have applied exactly one update per step (none twice,
# none lost), test accuracy must be in range, every daemon's RSS bounded and
# every fault seen by the coordinator (a line in its logs) where it logs one.
#
#   tests/chaos/run.sh --faults N --seed S [--strategy parameter_server|multi_worker_mirrored]
#                      [--steps STEPS] [--min-accuracy A] [--max-rss-mib M] [--kinds K1,K2,...]
#                      [--loopback] [--keep-logs DIR]
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
# started again after a second, as systemd's Restart=always would. One line
# per fault, then a summary. --kinds draws only from the named kinds (kill_two
# then picks among the daemons the others hit). --keep-logs copies every
# daemon's log into DIR at the end.
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
MIN_ACC=0.80
MAX_RSS_MIB=2048
ONLY=""
LOOPBACK=0
KEEP_LOGS=""
usage() {
    sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}
while (($#)); do
    case $1 in
    --faults) FAULTS=${2:-}; shift 2 ;;
    --seed) SEED=${2:-}; shift 2 ;;
    --strategy) STRATEGY=${2:-}; shift 2 ;;
    --steps) STEPS=${2:-}; shift 2 ;;
    --min-accuracy) MIN_ACC=${2:-}; shift 2 ;;
    --max-rss-mib) MAX_RSS_MIB=${2:-}; shift 2 ;;
    --kinds) ONLY=${2:-}; shift 2 ;;
    --loopback) LOOPBACK=1; shift ;;
    --keep-logs) KEEP_LOGS=${2:-}; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $FAULTS =~ ^[0-9]+$ && $FAULTS -ge 1 && $FAULTS -le 10000 ]] || { echo "run.sh: --faults must be 1..10000, got '$FAULTS'" >&2; exit 2; }
[[ $SEED =~ ^[0-9]+$ ]] || { echo "run.sh: --seed must be a non-negative integer, got '$SEED'" >&2; exit 2; }
[[ $STRATEGY == parameter_server || $STRATEGY == multi_worker_mirrored ]] ||
    { echo "run.sh: --strategy must be parameter_server or multi_worker_mirrored, got '$STRATEGY'" >&2; exit 2; }
[[ -z $STEPS || $STEPS =~ ^[0-9]+$ ]] || { echo "run.sh: --steps must be a positive integer, got '$STEPS'" >&2; exit 2; }
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
    if [[ -n $KEEP_LOGS ]]; then mkdir -p "$KEEP_LOGS" && cp "$ZD_TMP"/*.log "$KEEP_LOGS"/ 2>/dev/null; fi
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
    netns_up "zc$$" "${ROLES[@]}" || zd_fail "could not build the namespaces' network"
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
}
for role in "${ROLES[@]}"; do start_role "$role" "$role"; done
for ((i = 0; i < NPS; i++)); do zd_wait_psd "ps$i" "${ZD_PS_ADDRS[$i]}" 60; done
for ((i = 0; i < NW; i++)); do zd_wait_log "worker$i" "serving at" 60; done
zd_wait_log chief "chief serving at" 60

declare -A GEN MAXRSS
restart() { # role: started again under a new name (its own log), as systemd would
    local role=$1 name
    GEN[$role]=$((${GEN[$role]:-0} + 1))
    name="${role}_r${GEN[$role]}"
    start_role "$role" "$name"
    CUR[$role]=$name
    if [[ $role == chief ]]; then zd_wait_log "$name" "chief serving at" 60; else zd_wait_log "$name" "serving at" 60; fi
}
kill9() {
    local name=${CUR[$1]}
    kill -KILL "${ZD_PID[$name]}" 2>/dev/null
    wait "${ZD_PID[$name]}" 2>/dev/null
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
status_json() { "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json >"$ZD_TMP/st.json" 2>/dev/null; }
jget() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$ZD_TMP/st.json" "$1" 2>/dev/null || echo ""; }
job_step() { status_json && jget 'j["step"]' || echo -1; }
job_state() { status_json && jget 'j["state"]' || echo unknown; }
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
if [[ -z $STEPS ]]; then
    # Enough steps for the faults (about 12 s of training each), at the pace
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
    STEPS=$(((s1 - s0) * 12000 * FAULTS / (t1 - t0) + 1000))
fi
job_spec "$ZD_TMP/job.json" chaos "$STEPS"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
JOB_DIR=$STATE/jobs/$JOB
echo "chaos: job $JOB, $STRATEGY, $STEPS steps, $FAULTS faults, seed $SEED"

KINDS=(kill_worker kill_chief kill_two stop_worker corrupt_ckpt)
[[ $STRATEGY == parameter_server ]] && KINDS+=(kill_ps stop_ps kill_chief_in_recovery)
((NETNS)) && KINDS+=(link_down)
((TMPFS)) && KINDS+=(disk_full)
has() { [[ " ${KINDS[*]} " == *" $1 "* ]]; }
if [[ -n $ONLY ]]; then
    IFS=, read -r -a want <<<"$ONLY"
    keep=()
    for k in "${want[@]}"; do
        has "$k" || zd_fail "--kinds: '$k' is not a fault kind for $STRATEGY here (one of: ${KINDS[*]})"
        keep+=("$k")
    done
    KINDS=("${keep[@]}")
    # kill_two picks among the daemons the other kinds may hit.
    pool=()
    for role in "${ROLES[@]}"; do
        case $role in
        ps*) if has kill_ps || has stop_ps || has link_down || has kill_chief_in_recovery; then pool+=("$role"); fi ;;
        worker*) if has kill_worker || has stop_worker || has link_down; then pool+=("$role"); fi ;;
        chief) if has kill_chief || has corrupt_ckpt || has kill_chief_in_recovery; then pool+=("$role"); fi ;;
        esac
    done
    ((${#pool[@]} >= 2)) || ! has kill_two || zd_fail "--kinds: kill_two needs two daemons the other kinds hit"
else
    pool=("${ROLES[@]}")
fi
LINKED=() # link_down: a worker's or a psd's
for role in "${ROLES[@]}"; do [[ $role == chief ]] || LINKED+=("$role"); done
declare -A NKIND
RECOVER_MS=()
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

FAILS=0
bad() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
SKIPPED=0
LOST_PS="job $JOB: a ps task was lost"
CKPT_FAILED="job $JOB: the checkpoint at step [0-9]+ failed"
# What the coordinator logs for a fault, by kind (none: not checked).
if ((NPS > 0)); then
    WORKER_LOST="job $JOB: worker [0-9]+ \("
else
    WORKER_LOST="job $JOB: (step [0-9]+ failed|waiting for [0-9]+ lost worker)"
fi
RING_BACK="job $JOB: [0-9]+ workers in the ring, restored from the checkpoint at step"
CHIEF_BACK="job $JOB \('chaos'\) was running, its last checkpoint at step [0-9]+: resuming it"
# A psd frozen or cut off: a worker's step fails on it or (past the closure
# deadline first) the workers waiting on it are lost, or the chief's
# checkpoint meets it.
ps_unreachable() {
    echo "job $JOB: (worker [0-9]+ \(.* ps task ${1#ps} at [^ ]+ is unreachable|worker [0-9]+ \([^)]*\) lost|a ps task was lost|the checkpoint at step [0-9]+ failed \(ps ${1#ps}:)"
}
declare -A VIS=([kill_worker]=$WORKER_LOST [stop_worker]=$WORKER_LOST [kill_ps]=$LOST_PS [kill_chief]=$CHIEF_BACK
    [corrupt_ckpt]="job $JOB: the checkpoint at step [0-9]+ is damaged" [disk_full]=$CKPT_FAILED
    [kill_chief_in_recovery]=$LOST_PS)

for ((f = 1; f <= FAULTS; f++)); do
    # A time from the seed: 2 to 5 s after the previous fault's recovery.
    sleep $((2 + RANDOM % 4)).$((RANDOM % 10))
    if [[ $(job_state) != running ]]; then
        echo "fault $f/$FAULTS: skipped, the job is $(jget 'j["state"]') (give it more --steps)"
        SKIPPED=$((SKIPPED + 1))
        continue
    fi
    next_kind
    kind=$KIND
    step=$(job_step)
    what=""
    vis=${VIS[$kind]:-}
    before=0
    [[ -n $vis ]] && before=$(chief_lines "$vis")
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
    esac
    NKIND[$kind]=$((${NKIND[$kind]:-0} + 1))
    ms=$(wait_progress "$step")
    RECOVER_MS+=("$ms")
    sample_rss
    if [[ -n $vis ]]; then
        if seen "$vis" "$before"; then
            what+="; logged: $(chief_last "$vis" | cut -c1-110)"
        else
            bad "fault $f ($kind): the coordinator's logs have no new line matching '$vis'"
        fi
    fi
    echo "fault $f/$FAULTS at step $step: $kind: $what; progress again after ${ms} ms"
done

coord_wait_state "$JOB" done 1200
status_json
sample_rss
steps_done=$(jget 'j["step"]')
[[ $steps_done == "$STEPS" && $(jget 'j["steps"]') == "$STEPS" ]] || bad "the job ended at step $steps_done of $STEPS"
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
p50=$(printf '%s\n' "${RECOVER_MS[@]}" | sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print 0}')
p99=$(printf '%s\n' "${RECOVER_MS[@]}" | sort -n | awk '{a[NR]=$1} END {if (NR) {i=int(NR*0.99+0.999); if (i>NR) i=NR; print a[i]} else print 0}')
damaged=$(chief_lines "job $JOB: the checkpoint at step [0-9]+ is damaged")
# Counted over every generation of the chief (its status counts since its start).
if ((NPS > 0)); then
    recoveries="psd recoveries $(chief_lines "$LOST_PS")"
else
    recoveries="ring re-formed from a checkpoint $(chief_lines "$RING_BACK") times"
fi
echo "summary: $STRATEGY seed $SEED: ${#RECOVER_MS[@]} faults (${kinds%, }), $SKIPPED skipped;" \
    "job $(jget 'j["state"]') at step $steps_done/$STEPS; $recoveries, damaged checkpoints set aside $damaged," \
    "checkpoints failed $(chief_lines "$CKPT_FAILED");" \
    "time to progress again p50 ${p50} ms, p99 ${p99} ms; updates per step: $applied; test accuracy $acc; max RSS: ${rss%, }"
((FAILS == 0)) || zd_fail "$FAILS checks failed"
echo "chaos: passed"
