#!/usr/bin/env bash
# zdist.target under a booted systemd (tests/systemd/sandbox.sh): the
# installed units (zdist-psd@0,1, zdist-worker@0,1, zdist-coordinator) enabled
# and started through zdist.target, a Fashion-MNIST job from `zdist submit`,
# a worker and then a psd killed -9 mid-job: systemd restarts both and the job
# still completes with exactly its steps; one journal line per event;
# `systemd-analyze verify` silent; a clean stop of the whole target.
# Skips (exit 77) only where a container cannot boot here, saying why.
set -euo pipefail
: "${ZDIST_BIN:?}" "${ZDIST_PSD_BIN:?}" "${ZDIST_WORKER_BIN:?}" "${ZDIST_COORDINATOR_BIN:?}"
: "${ZDIST_UNIT_DIR:?configured units (BUILD/deploy/systemd)}" "${ZDIST_TARGET:?deploy/systemd/zdist.target}"
here=$(cd "$(dirname "$0")" && pwd)
SB=${ZDIST_SANDBOX:-$here/../systemd/sandbox.sh}
name=zdist-cluster-$$
data=${ZDIST_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
min_accuracy=${ZDIST_SYSTEMD_MIN_ACCURACY:-0.80}
skip() { echo "SKIP: $*"; exit 77; }

for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    [[ -r $data/$f ]] || { echo "FAIL: no Fashion-MNIST at $data ($f): set ZDIST_FMNIST_DIR"; exit 1; }
done
ldd "$ZDIST_PSD_BIN" | grep -q libasan && asan=1 || asan=0

work=$(mktemp -d /tmp/zdist-systemd-cluster.XXXXXX)
cleanup() { "$SB" stop "$name" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
t0=$SECONDS
sx() { "$SB" run "$name" "$@"; }
units=(zdist-coordinator zdist-psd@0 zdist-psd@1 zdist-worker@0 zdist-worker@1)
fail() {
    echo "FAIL: $*"
    if "$SB" running "$name" 2>/dev/null; then
        for u in "${units[@]}"; do
            echo "---- journalctl -u $u (last 25 lines)"
            sx journalctl -u "$u" --no-pager -o short-monotonic | tail -25
        done
    fi
    [[ -s $work/st.json ]] && echo "---- last status: $(cat "$work/st.json")"
    exit 1
}

# Install the configured units as an operator would, with ExecStart= pointing
# at the build's binaries (bind-mounted read-only where the units expect them).
for u in zdist-psd@.service zdist-worker@.service zdist-coordinator.service; do
    [[ -r $ZDIST_UNIT_DIR/$u ]] || fail "no configured unit $ZDIST_UNIT_DIR/$u"
    sed 's|^ExecStart=[^ ]*/\(zdist-[a-z]*\) |ExecStart=/opt/zdist/bin/\1 |' "$ZDIST_UNIT_DIR/$u" >"$work/$u"
    # ASAN builds: leaks at a KILL are expected noise, the units must still work.
    ((asan)) && sed -i 's|^\[Service\]|[Service]\nEnvironment=ASAN_OPTIONS=detect_leaks=0|' "$work/$u"
done
cp "$ZDIST_TARGET" "$work/zdist.target"
rc=0
"$SB" boot "$name" --bind-ro="$ZDIST_PSD_BIN:/opt/zdist/bin/zdist-psd" \
    --bind-ro="$ZDIST_WORKER_BIN:/opt/zdist/bin/zdist-worker" \
    --bind-ro="$ZDIST_COORDINATOR_BIN:/opt/zdist/bin/zdist-coordinator" \
    --bind-ro="$data:$data" 2>"$work/boot.log" || rc=$?
((rc != 77)) || skip "$(tail -n 1 "$work/boot.log")"
cat "$work/boot.log"
((rc == 0)) || fail "the sandbox did not boot"
for b in zdist-psd zdist-worker zdist-coordinator; do
    missing=$(sx ldd "/opt/zdist/bin/$b" | grep 'not found' || true)
    [[ -z $missing ]] || fail "the sandbox's rootfs lacks libraries $b needs (add their packages to tests/systemd/sandbox.sh): $missing"
done
for u in zdist-psd@.service zdist-worker@.service zdist-coordinator.service zdist.target; do
    "$SB" copy "$name" "$work/$u" "/etc/systemd/system/$u"
done
sx systemctl daemon-reload

out=$(sx systemd-analyze verify /etc/systemd/system/zdist-psd@.service /etc/systemd/system/zdist-worker@.service \
    /etc/systemd/system/zdist-coordinator.service /etc/systemd/system/zdist.target 2>&1) ||
    fail "systemd-analyze verify failed: $out"
[[ -z $out ]] || fail "systemd-analyze verify is not silent:"$'\n'"$out"
echo "ok: systemd-analyze verify prints nothing for the four units"

# The cluster: one file for every unit (they pass --cluster and --task).
# The container shares the host's network: the client runs on the host.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -A port
for t in chief worker0 worker1 ps0 ps1; do port[$t]=$(free_port); done
chief=127.0.0.1:${port[chief]}
sx mkdir -p /etc/zdist
sx tee /etc/zdist/cluster.json >/dev/null <<JSON
{"cluster": {"chief": ["$chief"],
             "worker": ["127.0.0.1:${port[worker0]}", "127.0.0.1:${port[worker1]}"],
             "ps": ["127.0.0.1:${port[ps0]}", "127.0.0.1:${port[ps1]}"]}}
JSON
# The workers read datasets only under their data roots (the unit's default:
# /usr/share/datasets and /srv); the operator's worker.env names this one.
echo "ZDIST_DATA_ROOTS=$data" | sx tee /etc/zdist/worker.env >/dev/null

# Enable the instances (WantedBy=zdist.target) and the target itself
# (WantedBy=multi-user.target), then start the target: it pulls in all five.
sx systemctl enable -q zdist.target zdist-coordinator.service zdist-psd@0 zdist-psd@1 zdist-worker@0 zdist-worker@1 ||
    fail "systemctl enable"
[[ $(sx systemctl is-enabled zdist.target) == enabled ]] || fail "zdist.target not enabled"
wants=$(sx systemctl show -p Wants --value zdist.target)
for u in "${units[@]}"; do
    [[ " $wants " == *" $u.service "* ]] || fail "zdist.target does not want $u.service (Wants=$wants)"
done
sx systemctl start zdist.target || fail "systemctl start zdist.target"
for u in "${units[@]}"; do
    [[ $(sx systemctl is-active "$u") == active ]] || fail "$u not active after starting zdist.target (Type=notify)"
done
echo "ok: zdist.target started the coordinator, 2 psd and 2 workers ($((SECONDS - t0)) s)"

# ---- a Fashion-MNIST job: the 784-256-128-10 mlp, 4 epochs (4 x 469 global batches of 128: 1876 steps) ----
cat >"$work/job.json" <<JSON
{"name": "fmnist-systemd", "strategy": {"type": "parameter_server"},
 "model": {"name": "mlp", "params": {"hidden": [256, 128]}}, "optimizer": {"type": "adam", "learning_rate": 0.001},
 "dataset": {"format": "idx",
   "train": {"images": "$data/train-images-idx3-ubyte.gz", "labels": "$data/train-labels-idx1-ubyte.gz"},
   "test": {"images": "$data/t10k-images-idx3-ubyte.gz", "labels": "$data/t10k-labels-idx1-ubyte.gz"},
   "global_batch_size": 128, "shuffle_seed": 42, "shard_policy": "data"},
 "epochs": 4, "steps_per_execution": 4, "checkpoint": {"every_steps": 250, "keep": 2},
 "evaluation": {"at_end": true}, "seed": 1}
JSON
"$ZDIST_BIN" submit "$work/job.json" --coordinator "$chief" --detach --json >"$work/submit.json" ||
    fail "zdist submit"
job=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$work/submit.json")

# jcheck EXPR: EXPR (python, over the status JSON `j`) holds now.
jcheck() {
    "$ZDIST_BIN" status "$job" --coordinator "$chief" --json >"$work/st.json" 2>"$work/st.err" &&
        python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
            "$work/st.json" "$1"
}
jget() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$work/st.json" "$1"; }
# wait_status EXPR SECONDS: until EXPR holds (liveness bound only).
wait_status() {
    local deadline=$((SECONDS + $2))
    until jcheck "$1"; do
        ((SECONDS < deadline)) || fail "job $job: not '$1' within $2 s"
        sleep 0.2
    done
}
# wait_restarted UNIT: systemd restarted it once and it is serving again.
wait_restarted() {
    local deadline=$((SECONDS + 60))
    until [[ $(sx systemctl show -p NRestarts --value "$1") -ge 1 && $(sx systemctl is-active "$1") == active ]]; do
        ((SECONDS < deadline)) || fail "$1 not restarted and active within 60 s"
        sleep 0.2
    done
}

wait_status 'j["state"] == "running" and j["step"] >= 300' 180
step=$(jget 'j["step"]')
w1_done=$(jget 'j["workers"][1]["closures_done"]')
sx systemctl kill -s KILL zdist-worker@1
echo "ok: worker 1 killed -9 at step $step"
wait_restarted zdist-worker@1
# The coordinator takes the restarted worker back (a new incarnation) and it
# runs closures again. (Checked here: the workers' "restarts" count only the
# current attempt, and the psd recovery below starts a new one.)
wait_status 'j["workers"][1]["restarts"] >= 1 and j["workers"][1]["closures_done"] > '"$w1_done"' and j["step"] >= '"$((step + 300))" 180
jcheck 'j["state"] == "running" and j["step"] < j["steps"]' || fail "the job ended before the psd could be killed: $(cat "$work/st.json")"
step=$(jget 'j["step"]')
sx systemctl kill -s KILL zdist-psd@0
echo "ok: worker 1 restarted by systemd and back in the job; psd 0 killed -9 at step $step"
wait_restarted zdist-psd@0
wait_status 'j["state"] in ("done", "failed", "cancelled")' 300
python3 - "$work/st.json" "$min_accuracy" <<'PY' || fail "the job: $(cat "$work/st.json")"
import json, sys
j = json.load(open(sys.argv[1]))
acc = j.get("metrics", {}).get("test_accuracy")
print(f"job {j['job_id']}: {j['state']}, step {j['step']}/{j['steps']}, psd recoveries {j['psd_recoveries']}, "
      f"test accuracy {acc}")
assert j["state"] == "done", "not done"
assert j["steps"] == 1876 and j["step"] == j["steps"], "not exactly its steps"
assert j["psd_recoveries"] == 1, "not one psd recovery"
assert acc is not None and acc >= float(sys.argv[2]), "test accuracy below the target"
PY
echo "ok: job $job done with exactly its steps through both kills ($((SECONDS - t0)) s)"

# ---- systemd's view: one restart of each killed unit, none elsewhere ----
for u in "${units[@]}"; do
    want=0
    [[ $u == zdist-worker@1 || $u == zdist-psd@0 ]] && want=1
    [[ $(sx systemctl show -p NRestarts --value "$u") == "$want" ]] || fail "$u: NRestarts is not $want"
    [[ $(sx systemctl is-active "$u") == active ]] || fail "$u not active after the job"
done

# ---- the journal: one line per event ----
# expect UNIT N PATTERN: the unit's journal has PATTERN (grep -E) on exactly N lines.
expect() {
    local n
    n=$(grep -cE -- "$3" "$work/$1.journal" || true)
    [[ $n -eq $2 ]] || fail "journalctl -u $1: $n lines match '$3', expected $2"
}
for u in "${units[@]}"; do sx journalctl -u "$u" --no-pager -o cat >"$work/$u.journal"; done
for u in zdist-worker@1 zdist-psd@0; do
    expect "$u" 1 "^$u.service: Main process exited, code=killed, status=9/KILL$"
    expect "$u" 1 "^$u.service: Failed with result 'signal'\.$"
    expect "$u" 1 "^$u.service: Scheduled restart job, restart counter is at 1\.$"
done
for u in zdist-coordinator zdist-worker@0 zdist-psd@1; do expect "$u" 0 "code=killed|Scheduled restart job"; done
for u in "${units[@]}"; do expect "$u" 0 "[Ww]atchdog timeout"; done
# Readiness: one "serving at" line (and systemd's "Started") per process start.
expect zdist-coordinator 1 "chief serving at tcp://$chief "
expect zdist-psd@0 2 "ps task 0 serving at tcp://127.0.0.1:${port[ps0]} "
expect zdist-psd@0 2 "^Started (zdist-psd@0\.service - )?zdist parameter server \(ps task 0\)\.$"
expect zdist-psd@1 1 "ps task 1 serving at tcp://127.0.0.1:${port[ps1]} "
expect zdist-worker@0 1 "worker task 0 serving at tcp://127.0.0.1:${port[worker0]} "
expect zdist-worker@1 2 "worker task 1 serving at tcp://127.0.0.1:${port[worker1]} "
expect zdist-worker@1 2 "^Started (zdist-worker@1\.service - )?zdist worker \(worker task 1\)\.$"
# The workers: the job started once, again on the restarted worker 1 when the
# coordinator took it back, and once more on both after the psd recovery.
# (A parameter_server job is NAME@ID on the workers: two submissions of one file differ.)
expect zdist-worker@0 2 "job 'fmnist-systemd@$job' started: "
expect zdist-worker@1 3 "job 'fmnist-systemd@$job' started: "
awk '/worker task 1 serving at/ { n++ } n == 2 && /job .fmnist-systemd@[a-z0-9]+. started: / { ok = 1 } END { exit !ok }' \
    "$work/zdist-worker@1.journal" || fail "the restarted worker 1 did not get the job back"
# The coordinator: the job's life, the lost psd and the recovery.
expect zdist-coordinator 1 "job $job \('fmnist-systemd'\): running on 2 workers and 2 ps$"
expect zdist-coordinator 1 "job $job \('fmnist-systemd'\) submitted$"
expect zdist-coordinator 1 "job $job: worker 1 \(tcp://127.0.0.1:${port[worker1]}\) lost: "
expect zdist-coordinator 1 "job $job: worker 1 \(tcp://127.0.0.1:${port[worker1]}\) is back \(rejoin 1\): running closures again$"
expect zdist-coordinator 0 "job $job: worker 0 \(.*\) lost: "
expect zdist-coordinator 1 "job $job: a ps task was lost \(.*\); waiting for it, then restoring step [0-9]+$"
expect zdist-coordinator 1 "job $job: restored every ps from the checkpoint at step [0-9]+$"
expect zdist-coordinator 1 "job $job: test accuracy "
expect zdist-coordinator 1 "job $job \('fmnist-systemd'\): done at step 1876 of 1876$"
# Each ps restored its shard once from the coordinator's checkpoint, in the
# job's directory under the state directory the units share (persistent under
# DynamicUser), which is the psds' checkpoint root: no warning about none.
for u in zdist-psd@0 zdist-psd@1; do
    expect "$u" 1 "restored step [0-9]+ of job $job from '/var/lib/private/zdist/jobs/$job/ckpt-[0-9]+'"
    expect "$u" 0 "no --checkpoint-root"
done
# Sanitizer builds: no report from any daemon.
sx journalctl --no-pager -o cat >"$work/all.journal"
! grep -nE "ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:" "$work/all.journal" ||
    fail "a sanitizer report in the journal"
echo "ok: journal: one line per start, kill, restart, submit, psd loss, restore, completion"

# ---- a clean stop: stopping the target stops every unit (PartOf=) with SIGTERM ----
# The target is ordered after its services, so it stops first and systemctl
# returns before they are down: wait for them.
sx systemctl stop zdist.target
for u in "${units[@]}"; do
    deadline=$((SECONDS + 120))
    until [[ $(sx systemctl is-active "$u") == inactive ]]; do
        ((SECONDS < deadline)) || fail "$u $(sx systemctl is-active "$u") 120 s after stopping zdist.target"
        sleep 0.2
    done
    [[ $(sx systemctl show -p Result --value "$u") == success ]] || fail "$u: unclean stop"
done
echo "ok: systemctl stop zdist.target stopped all five cleanly"
echo "systemd cluster: zdist.target, a job through kill -9 of a worker and a psd, journal, verify: ok ($((SECONDS - t0)) s)"
