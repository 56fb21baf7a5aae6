#!/usr/bin/env bash
# zdist reshard JOB --ps N (issue 31): a running parameter_server job moved
# from 3 ps tasks to 2, to 1 and back to 3 while it trains, and a checkpoint
# taken after a move restored onto the new layout (kill -9 of its one psd).
#
# The job is test_dynamic_reshard's (one worker, the same block of 24
# examples every step, ftrl: deterministic) with its dense kernel split by
# the partitioner into 3 Div row ranges, so both kinds of table move: fixed
# ones by global row range, dynamic ones by id hash. Every move checkpoints
# at a step boundary and restores onto the new ps list with each shard's
# exactly-once record, so a step lost or applied twice, a row restored on
# the wrong task or with other optimizer slots would change what later
# steps train: the job must end with exactly its steps and the variables
# (the dense layer's, merged by global rows, and the dynamic table as
# export-embedding writes it) of a run never moved, byte for byte.
# Then the refusals: --ps 0, more ps than the cluster has, an unknown job,
# a job that is not running, and one that is not parameter_server.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init reshard
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
STEPS=${RESHARD_STEPS:-2400}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# The checkpoints are read by the Python client's reader (python/zdist/checkpoint.py) on Debian's
# python3-numpy, installed here when missing (a test-only tool); skipped (77) saying why when it cannot be.
PY=/usr/bin/python3
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    skip() { echo "SKIP: $*"; exit 77; }
    [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null || skip "python3-numpy is missing; apt-get install it"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-numpy >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 || true
          DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-numpy >/dev/null 2>&1; } ||
        skip "cannot install python3-numpy with apt-get"
    "$PY" -c 'import numpy' 2>/dev/null || skip "python3-numpy installed, but $PY cannot import it"
fi

coord_cluster 3 1
python3 "$(dirname "$0")/dyn_data.py" "$ZD_TMP" 31 34
cat >"$ZD_TMP/job.json" <<JSON
{"name": "reshard", "strategy": {"type": "parameter_server", "partitioner": "min_size:4:3"},
 "model": {"name": "sequential", "input_shape": [1],
           "layers": [{"embedding": {"output_dim": 8, "combiner": "mean", "dynamic": {"min_count": 3}}},
                      {"dense": {"units": 4, "activation": "relu"}}, {"dense": {"units": 1}}],
           "loss": "binary_crossentropy"},
 "optimizer": {"type": "ftrl", "learning_rate": 0.1, "l1_regularization_strength": 0.001,
               "l2_shrinkage_regularization_strength": 0.01},
 "dataset": {"format": "libsvm", "dim": 1, "raw_ids": true, "train": {"path": "$ZD_TMP/train.svm"},
             "global_batch_size": 24, "shuffle": false, "shard_policy": "off"},
 "steps": $STEPS, "steps_per_execution": 5,
 "checkpoint": {"every_steps": 40, "keep": 3, "full_every": 4}, "seed": 5}
JSON
job_dir() { echo "$ZD_TMP/state/jobs/$1"; }
job_id() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$1"; }
# dense_vars JOB OUT: the job's newest checkpoint's dense variables (shards merged by global rows) as one .npz.
dense_vars() {
    "$PY" - "$(job_dir "$1")" "$2" "$SRC/python/zdist" <<'PY' || zd_fail "job $1: its checkpoint does not read"
import importlib, sys, types
import numpy as np
# The reader alone, without the package's client (zmq, protobuf).
pkg = types.ModuleType("zdck")
pkg.__path__ = [sys.argv[3]]
sys.modules["zdck"] = pkg
checkpoint = importlib.import_module("zdck.checkpoint")
v = checkpoint.load(sys.argv[1])
dense = {k.replace("/", "_"): a for k, a in v.items() if k.startswith("dense")}
assert len(dense) >= 4, sorted(v)
np.savez(sys.argv[2], **dense)
PY
}
# ckpt_ps JOB: the newest checkpoint's num_ps and its manifest-ps files, "N FILES".
ckpt_ps() {
    python3 - "$(job_dir "$1")" <<'PY'
import glob, json, os, re, sys
steps = [int(m.group(1)) for d in os.listdir(sys.argv[1]) for m in [re.match(r"^ckpt-(\d+)$", d)] if m
         and os.path.exists(os.path.join(sys.argv[1], d, "manifest.json"))]
d = os.path.join(sys.argv[1], "ckpt-%d" % max(steps))
print(json.load(open(d + "/manifest.json"))["num_ps"], len(glob.glob(d + "/manifest-ps*.json")), max(steps))
PY
}
# reshard JOB N: the move, its answer in $OUT.
reshard() {
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" reshard "$1" --ps "$2" --cluster "$CLUSTER"
    grep -qE "to $2 ps tasks at step [0-9]+" "$OUT" || zd_fail "zdist reshard $1 --ps $2: $(cat "$OUT")"
    coord_wait_json "$1" "len(j['ps']) == $2 and j['state'] == 'running'" 120
    zd_ok "$(cat "$OUT")"
}

# ---- the run never moved, on 3 psds ----
coord_up 3 1
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == j["steps"]'
JOB_A=$(job_id "$OUT")
zd_run_expect 0 "$OUT" "$ZDIST_BIN" export-embedding "$JOB_A" embedding/embeddings --out "$ZD_TMP/a" --cluster "$CLUSTER"
dense_vars "$JOB_A" "$ZD_TMP/a.npz"
zd_ok "a run of $STEPS steps on 3 psds, never moved"

# ---- moved 3 -> 2 -> 1 (then kill -9 of that psd) -> 3 while it trains ----
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 100 120
reshard "$JOB" 2
reshard "$JOB" 1
MOVED=$(grep -oE "at step [0-9]+" "$OUT" | grep -oE '[0-9]+')
# A checkpoint of the new layout, then its one psd lost: the job restores it there.
coord_wait_json "$JOB" "j['checkpoint_step'] >= $MOVED + 40" 120
read -r NPS NFILES AT < <(ckpt_ps "$JOB")
[[ $NPS == 1 && $NFILES == 1 ]] || zd_fail "job $JOB: its checkpoint at step $AT after the move to 1 ps holds num_ps $NPS, $NFILES manifest-ps files"
RESTORED="job $JOB: restored every ps from the checkpoint at step"
N0=$(grep -c "$RESTORED" "$ZD_TMP/chief.log")
zd_stop ps0 KILL
coord_start_ps 0
zd_wait_psd ps0 "${ZD_PS_ADDRS[0]}" 60
zd_wait_until 120 "the chief restoring job $JOB after the psd's loss" \
    bash -c '(( $(grep -c "$1" "$2") > $3 ))' _ "$RESTORED" "$ZD_TMP/chief.log" "$N0"
FROM=$(grep -oE "$RESTORED [0-9]+" "$ZD_TMP/chief.log" | tail -1 | grep -oE '[0-9]+$')
((FROM >= AT)) || zd_fail "job $JOB: restored from step $FROM after the psd's loss, not from its checkpoint at step $AT or later"
coord_wait_json "$JOB" "j['state'] == 'running' and len(j['ps']) == 1 and j['step'] > $AT" 120
zd_ok "kill -9 of the one psd after the move: the job restored its checkpoint at step $FROM, of the new layout, there"
reshard "$JOB" 3
coord_wait_state "$JOB" done 600
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == j["steps"] == '"$STEPS"' and len(j["ps"]) == 3'
read -r NPS NFILES AT < <(ckpt_ps "$JOB")
[[ $NPS == 3 && $NFILES == 3 && $AT == "$STEPS" ]] || zd_fail "job $JOB: its final checkpoint holds num_ps $NPS, $NFILES manifest-ps files, step $AT"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" export-embedding "$JOB" embedding/embeddings --out "$ZD_TMP/b" --cluster "$CLUSTER"
cmp -s "$ZD_TMP/a.ids.npy" "$ZD_TMP/b.ids.npy" && cmp -s "$ZD_TMP/a.vectors.npy" "$ZD_TMP/b.vectors.npy" ||
    zd_fail "job $JOB: its dynamic table differs from the run never moved"
dense_vars "$JOB" "$ZD_TMP/b.npz"
"$PY" - "$ZD_TMP/a.npz" "$ZD_TMP/b.npz" <<'PY' || zd_fail "job $JOB: its dense variables differ from the run never moved"
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert sorted(a.files) == sorted(b.files), (a.files, b.files)
for k in a.files:
    assert a[k].tobytes() == b[k].tobytes(), (k, a[k], b[k])
print("dense variables equal:", ", ".join("%s %s" % (k, a[k].shape) for k in sorted(a.files)))
PY
grep -q "job $JOB: moving from 3 to 2 ps tasks" "$ZD_TMP/chief.log" || zd_fail "the chief did not log the first move"
zd_ok "moved 3 -> 2 -> 1 -> 3 ps while training: exactly $STEPS steps, its final table and dense variables byte for byte the run never moved"

# ---- refusals ----
zd_run_expect 2 "$OUT" "$ZDIST_BIN" reshard "$JOB" --ps 0 --cluster "$CLUSTER"
grep -q "at least one ps task" "$OUT.err" || zd_fail "--ps 0: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" reshard "$JOB" --ps 4 --cluster "$CLUSTER"
grep -q "INVALID_ARGUMENT.*--ps 4, but the cluster has 3 ps tasks" "$OUT.err" || zd_fail "--ps 4: $(cat "$OUT.err")"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" reshard no-such-job --ps 1 --cluster "$CLUSTER"
grep -q "NOT_FOUND.*no job 'no-such-job'" "$OUT.err" || zd_fail "an unknown job: $(cat "$OUT.err")"
zd_run_expect 1 "$OUT" "$ZDIST_BIN" reshard "$JOB" --ps 2 --cluster "$CLUSTER"
grep -q "FAILED_PRECONDITION.*is done; only a running job moves" "$OUT.err" || zd_fail "a done job: $(cat "$OUT.err")"
coord_softmax_job "$ZD_TMP/mwm.json" 100000
sed -i 's/"parameter_server"/"multi_worker_mirrored"/' "$ZD_TMP/mwm.json"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/mwm.json" --cluster "$CLUSTER" --detach
MWM=$(cat "$OUT")
zd_run_expect 1 "$OUT" "$ZDIST_BIN" reshard "$MWM" --ps 1 --cluster "$CLUSTER"
grep -q "FAILED_PRECONDITION.*is not a parameter_server job" "$OUT.err" || zd_fail "a multi_worker_mirrored job: $(cat "$OUT.err")"
"$ZDIST_BIN" cancel "$MWM" --cluster "$CLUSTER" >/dev/null
zd_ok "refused: --ps 0, --ps beyond the cluster's 3, an unknown job, a job that is done, a multi_worker_mirrored job"
echo "all $ZD_PASSED checks passed"
