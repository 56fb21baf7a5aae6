#!/usr/bin/env bash
# Multi-host test: every task on its own "host" — a Linux network namespace
# joined to the others by a veth pair on one bridge, with addresses that exist
# only inside those namespaces. Runs ps x2, worker x2 and the chief from one
# cluster file, submits the Fashion-MNIST mlp, takes worker 1's link down
# mid-job and brings it back: the job must complete with its accuracy. Then
# the same outage under a multi_worker_mirrored job (ZDIST_MULTIHOST_MWM_JOB,
# default fmnist-softmax-mwm-short.json here, whose 3 s collective deadline is
# shorter than the outage; "" skips it): the ring's step
# fails on its collective deadline, the ring is re-formed from the last
# checkpoint when the link is back, and the job completes.
# Exit 77 (skip), saying why, only where namespaces cannot be created.
set -euo pipefail
: "${ZDIST_BIN:?}" "${ZDIST_PSD_BIN:?}" "${ZDIST_WORKER_BIN:?}" "${ZDIST_COORDINATOR_BIN:?}"
here=$(cd "$(dirname "$0")" && pwd)
job=${ZDIST_MULTIHOST_JOB:-$here/../examples/fmnist-mlp-ps.json}
mwm_job=${ZDIST_MULTIHOST_MWM_JOB-$here/fmnist-softmax-mwm-short.json}
mwm_min_accuracy=${ZDIST_MULTIHOST_MWM_MIN_ACCURACY:-0.78}
min_accuracy=${ZDIST_MULTIHOST_MIN_ACCURACY:-0.85}
tag=zd$$
hosts=(ps0 ps1 worker0 worker1 chief)
skip() { echo "SKIP: $*"; exit 77; }
source "$here/netns.sh"

why=$(netns_why "$tag") || skip "$why"

work=$(mktemp -d /tmp/zdist-multihost.XXXXXX)
pids=()
cleanup() {
    local rc=$?
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    if ((rc != 0 && rc != 77)); then
        for h in "${hosts[@]}"; do echo "---- $h log"; tail -20 "$work/$h.log" 2>/dev/null || true; done
    fi
    netns_down
    rm -rf "$work"
}
trap cleanup EXIT

# The network: one bridge, one namespace per host.
netns_up "$tag" "${hosts[@]}"
declare -A addr
for h in "${hosts[@]}"; do addr[$h]=${NETNS_ADDR[$h]}; done
subnet=$NETNS_SUBNET
port=7100
cat >"$work/cluster.json" <<JSON
{"cluster": {"chief": ["${addr[chief]}:$port"],
             "worker": ["${addr[worker0]}:$port", "${addr[worker1]}:$port"],
             "ps": ["${addr[ps0]}:$port", "${addr[ps1]}:$port"]}}
JSON
on() { local h=$1; shift; ip netns exec "$tag-$h" "$@"; }

start() {
    local h=$1 bin=$2 task=$3; shift 3
    # ip netns exec execs the daemon, so $! is the daemon itself (a function
    # in the background would be a subshell that a TERM does not pass on).
    ip netns exec "$tag-$h" "$bin" --cluster "$work/cluster.json" --task "$task" "$@" 2>"$work/$h.log" &
    pids+=($!)
}
start ps0 "$ZDIST_PSD_BIN" ps:0
start ps1 "$ZDIST_PSD_BIN" ps:1
start worker0 "$ZDIST_WORKER_BIN" worker:0
start worker1 "$ZDIST_WORKER_BIN" worker:1
start chief "$ZDIST_COORDINATOR_BIN" chief:0 --state-dir "$work/state"
for h in "${hosts[@]}"; do
    for _ in $(seq 300); do grep -q "serving at" "$work/$h.log" && break; sleep 0.1; done
    grep -q "serving at" "$work/$h.log" || { echo "FAIL: $h did not start"; exit 1; }
done
echo "ok: 5 hosts serving on $subnet.0/24 (chief ${addr[chief]})"

# outage_job JOB MIN_ACCURACY: submitted from the chief's host; worker 1's link goes down
# mid-job for 8 s and comes back; the job must end done, with exactly its
# steps and its accuracy.
outage_job() {
    local job=$1 min=$2 step step_down state
    on chief "$ZDIST_BIN" submit "$job" --cluster "$work/cluster.json" --detach --json >"$work/submit.json"
    id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$work/submit.json")
    for _ in $(seq 600); do
        step=$(status | field step)
        ((step >= ${ZDIST_MULTIHOST_OUTAGE_STEP:-200})) && break
        sleep 0.1
    done
    ip link set "${NETNS_VETH[worker1]}" down
    echo "ok: worker1's link down at step $step"
    sleep 8
    step_down=$(status | field step)
    ip link set "${NETNS_VETH[worker1]}" up
    echo "ok: worker1's link up again at step $step_down"
    for _ in $(seq 1800); do
        state=$(status | field state)
        [[ $state == done || $state == failed || $state == cancelled ]] && break
        sleep 0.2
    done
    status >"$work/final.json"
    python3 - "$work/final.json" "$min" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
acc = d.get("metrics", {}).get("test_accuracy")
print(f"job {d['job_id']}: {d['state']}, step {d['step']}/{d['steps']}, test accuracy {acc}")
assert d["state"] == "done", "job did not finish"
assert d["step"] == d["steps"], "job did not run exactly its steps"
assert acc is not None and acc >= float(sys.argv[2]), "accuracy below the target"
PY
}
status() { on chief "$ZDIST_BIN" status "$id" --cluster "$work/cluster.json" --json; }
field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[sys.argv[1]])' "$1"; }

outage_job "$job" "$min_accuracy"
echo "ok: multi-host job completed through a link outage"
if [[ -n $mwm_job ]]; then
    outage_job "$mwm_job" "$mwm_min_accuracy"
    grep -qE "job $id: step [0-9]+ failed: .*worker task 1 \(tcp://${addr[worker1]}:[0-9]+\)" "$work/chief.log" ||
        { echo "FAIL: the ring's step did not fail naming worker 1"; tail -20 "$work/chief.log"; exit 1; }
    grep -qE "job $id: 2 workers in the ring, restored from the checkpoint at step" "$work/chief.log" ||
        { echo "FAIL: the ring was not re-formed from a checkpoint"; tail -20 "$work/chief.log"; exit 1; }
    echo "ok: multi_worker_mirrored job: the step failed on the collective deadline naming worker 1, the ring re-formed from the last checkpoint, completed"
fi
