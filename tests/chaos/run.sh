#!/usr/bin/env bash
# Chaos soak: a real job on a loopback cluster while N faults are injected at
# times drawn from a seed; then the job must be done with exactly its steps,
# every psd shard must have applied exactly one update per step (none twice,
# none lost), test accuracy must be in range and every daemon's RSS bounded.
#
#   tests/chaos/run.sh --faults N --seed S [--strategy parameter_server|multi_worker_mirrored]
#                      [--steps STEPS] [--min-accuracy A] [--max-rss-mib M] [--kinds K1,K2,...]
#
# Faults: kill -9 of a worker, a psd or the coordinator; two daemons killed
# at once; a worker or a psd frozen (SIGSTOP) past the deadlines then thawed
# (SIGCONT); the newest complete checkpoint damaged (a byte flipped) with the
# coordinator killed so that its resume meets it. A killed daemon is started
# again after a second, as systemd's Restart=always would. One line per fault,
# then a summary. Not yet: network partitions (netns) and a full disk (the
# full-disk case is in integration.coordinator_ft). --kinds draws only from
# the named kinds: kill_worker kill_ps kill_chief kill_two stop_worker
# stop_ps corrupt_ckpt (kill_two then picks among the daemons the others hit).
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
usage() {
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
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
    -h | --help) usage 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $FAULTS =~ ^[0-9]+$ && $FAULTS -ge 1 && $FAULTS -le 10000 ]] || { echo "run.sh: --faults must be 1..10000, got '$FAULTS'" >&2; exit 2; }
[[ $SEED =~ ^[0-9]+$ ]] || { echo "run.sh: --seed must be a non-negative integer, got '$SEED'" >&2; exit 2; }
[[ $STRATEGY == parameter_server || $STRATEGY == multi_worker_mirrored ]] ||
    { echo "run.sh: --strategy must be parameter_server or multi_worker_mirrored, got '$STRATEGY'" >&2; exit 2; }
[[ -z $STEPS || $STEPS =~ ^[0-9]+$ ]] || { echo "run.sh: --steps must be a positive integer, got '$STEPS'" >&2; exit 2; }
[[ -n $STEPS ]] || STEPS=$((FAULTS * 1500 + 1000))
B=${ZDIST_BUILD:-$ROOT/build-test}
: "${ZDIST_BIN:=$B/coordinator/zdist}" "${ZDIST_PSD_BIN:=$B/psd/zdist-psd}"
: "${ZDIST_WORKER_BIN:=$B/worker/zdist-worker}" "${ZDIST_COORDINATOR_BIN:=$B/coordinator/zdist-coordinator}"
export ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN

source "$ROOT/tests/integration/lib.sh"
source "$ROOT/tests/integration/coord_lib.sh"
set +e +o pipefail # lib.sh sets them; every check here is explicit
zd_init chaos
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
RANDOM=$SEED
NW=2
NPS=2
[[ $STRATEGY == multi_worker_mirrored ]] && NPS=0
if ((NPS > 0)); then
    coord_cluster "$NPS" "$NW"
else
    ZD_WORKER_ADDRS=("127.0.0.1:$(zd_free_port)" "127.0.0.1:$(zd_free_port)")
    ZD_CHIEF="127.0.0.1:$(zd_free_port)"
    CLUSTER=$ZD_TMP/cluster.json
    printf '{"cluster": {"chief": ["%s"], "worker": ["%s", "%s"]}}\n' "$ZD_CHIEF" "${ZD_WORKER_ADDRS[@]}" >"$CLUSTER"
fi
COORD_CHIEF_ARGS=--keep-variables # each shard's update count is read after the job
coord_up "$NPS" "$NW"

# The daemons by role; CUR[role] is the zd_start name of its running process.
declare -A CUR
ROLES=()
for ((i = 0; i < NPS; i++)); do CUR[ps$i]=ps$i; ROLES+=("ps$i"); done
for ((i = 0; i < NW; i++)); do CUR[worker$i]=worker$i; ROLES+=("worker$i"); done
CUR[chief]=chief
ROLES+=(chief)
declare -A GEN MAXRSS
restart() { # role: started again under a new name (its own log), as systemd would
    local role=$1 name
    GEN[$role]=$((${GEN[$role]:-0} + 1))
    name="${role}_r${GEN[$role]}"
    case $role in
    ps*) zd_start "$name" "$ZDIST_PSD_BIN" --cluster "$CLUSTER" --task "ps:${role#ps}" ;;
    worker*) zd_start "$name" "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task "worker:${role#worker}" ;;
    chief) zd_start "$name" "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$ZD_TMP/state" \
        --keep-variables ;;
    esac
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

# The job: a dense model (every shard updated by every step) with adam, whose
# step counter each psd saves and restores with its checkpoint.
if [[ $STRATEGY == parameter_server ]]; then
    STRAT='{"type": "parameter_server"}'
else
    STRAT='{"type": "multi_worker_mirrored", "collective_timeout_ms": 3000, "lost_worker_wait_ms": 4000}'
fi
cat >"$ZD_TMP/job.json" <<JSON
{"name": "chaos", "strategy": $STRAT,
 "model": {"name": "mlp", "params": {"hidden": [64]}}, "optimizer": {"type": "adam", "learning_rate": 0.002},
 "dataset": {"format": "synthetic", "synthetic": {"n": 8192, "test_n": 2048, "dim": 64, "classes": 4, "seed": 7,
                                                 "noise_std": 2.0},
             "global_batch_size": 64},
 "steps": $STEPS, "checkpoint": {"every_steps": 50, "keep": 3}, "seed": 3}
JSON
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
JOB_DIR=$ZD_TMP/state/jobs/$JOB
echo "chaos: job $JOB, $STRATEGY, $STEPS steps, $FAULTS faults, seed $SEED"

KINDS=(kill_worker kill_chief kill_two stop_worker corrupt_ckpt)
[[ $STRATEGY == parameter_server ]] && KINDS+=(kill_ps stop_ps)
if [[ -n $ONLY ]]; then
    IFS=, read -r -a want <<<"$ONLY"
    keep=()
    for k in "${want[@]}"; do
        case " ${KINDS[*]} " in
        *" $k "*) keep+=("$k") ;;
        *) zd_fail "--kinds: '$k' is not a fault kind for $STRATEGY (one of: ${KINDS[*]})" ;;
        esac
    done
    KINDS=("${keep[@]}")
    # kill_two picks among the daemons the other kinds may hit.
    pool=()
    for role in "${ROLES[@]}"; do
        case $role in
        ps*) [[ " ${KINDS[*]} " == *" kill_ps "* || " ${KINDS[*]} " == *" stop_ps "* ]] && pool+=("$role") ;;
        worker*) [[ " ${KINDS[*]} " == *" kill_worker "* || " ${KINDS[*]} " == *" stop_worker "* ]] && pool+=("$role") ;;
        chief) [[ " ${KINDS[*]} " == *" kill_chief "* || " ${KINDS[*]} " == *" corrupt_ckpt "* ]] && pool+=("$role") ;;
        esac
    done
    ((${#pool[@]} >= 2)) || [[ " ${KINDS[*]} " != *" kill_two "* ]] ||
        zd_fail "--kinds: kill_two needs two daemons the other kinds hit"
else
    pool=("${ROLES[@]}")
fi
declare -A NKIND
RECOVER_MS=()
STOP_S=8 # past the closure and collective deadlines
# pick ROLE N: R is ROLE0..ROLE(N-1), drawn from the seed. Not in $(...): a
# subshell draws from a RANDOM of its own, reseeded each time.
pick() { R="$1$((RANDOM % $2))"; }

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

for ((f = 1; f <= FAULTS; f++)); do
    # A time from the seed: 2 to 5 s after the previous fault's recovery.
    sleep $((2 + RANDOM % 4)).$((RANDOM % 10))
    if [[ $(job_state) != running ]]; then
        echo "fault $f/$FAULTS: skipped, the job is $(jget 'j["state"]') (give it more --steps)"
        continue
    fi
    kind=${KINDS[$((RANDOM % ${#KINDS[@]}))]}
    step=$(job_step)
    what=""
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
        kill -STOP "${ZD_PID[${CUR[$r]}]}"; sleep "$STOP_S"; kill -CONT "${ZD_PID[${CUR[$r]}]}"
        what="SIGSTOP $r for ${STOP_S} s, then SIGCONT" ;;
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
        fi
        sleep 1
        restart chief
        if [[ -n $victim ]]; then
            zd_wait_log "${CUR[chief]}" "job $JOB: the checkpoint at step ${newest##*ckpt-} is damaged" 60
        fi ;;
    esac
    NKIND[$kind]=$((${NKIND[$kind]:-0} + 1))
    ms=$(wait_progress "$step")
    RECOVER_MS+=("$ms")
    sample_rss
    echo "fault $f/$FAULTS at step $step: $kind: $what; progress again after ${ms} ms"
done

coord_wait_state "$JOB" done 1200
status_json
sample_rss
FAILS=0
bad() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
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
damaged=$(cat "$ZD_TMP"/chief*.log | grep -c "job $JOB: the checkpoint at step [0-9]* is damaged" || true)
echo "summary: $STRATEGY seed $SEED: ${#RECOVER_MS[@]} faults (${kinds%, }); job $(jget 'j["state"]') at step $steps_done/$STEPS;" \
    "psd recoveries $(jget 'j["psd_recoveries"]'), damaged checkpoints set aside $damaged;" \
    "time to progress again p50 ${p50} ms, p99 ${p99} ms; updates per step: $applied; test accuracy $acc; max RSS: ${rss%, }"
((FAILS == 0)) || zd_fail "$FAILS checks failed"
echo "chaos: passed"
