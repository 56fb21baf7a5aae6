#!/usr/bin/env bash
# A job's dynamic tables checkpointed on 2 psds (a full every
# checkpoint.full_every = 3 saves, deltas between), then its cluster
# restarted with 1 and with 4 psds: the coordinator resumes the job there,
# each psd restoring the rows the id hash now gives it (issue 29).
#
# The job trains with ftrl from the job file (its accumulator and linear
# slots restored with the rows) and admits an id at its 100th occurrence:
# an id seen once a step is admitted at step 100, after the restore (from
# step 80), so its count must come back with the checkpoint (format
# version 2) and its row start as it would have (drawn for the table's
# name, not the job-prefixed one). One worker and the same batch every step,
# so training is deterministic:
# a run stopped (SIGTERM: the chief checkpoints every job and stops) and
# resumed on another number of ps tasks must end with exactly the tables of
# a run never stopped — a row restored on the wrong task, lost, doubled or
# with other values or optimizer slots would change what the next steps
# train. The ends are compared as `zdist export-embedding` writes them.
# The job file's checkpoint.full_every (3) is checked in every checkpoint's
# dynamic-ps*.json: save k (step 40k) holds a chain of k % 3 + 1 files. The
# runs stopped have full_every 100: what they restore is a full and deltas.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init dynamic-reshard
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
STEPS=400
coord_cluster 2 1
CLUSTER2=$CLUSTER

python3 "$(dirname "$0")/dyn_data.py" "$ZD_TMP" 31 34

job_file() { # FULL_EVERY
    cat >"$ZD_TMP/job$1.json" <<JSON
{"name": "reshard", "strategy": {"type": "parameter_server"},
 "model": {"name": "sequential", "input_shape": [1],
           "layers": [{"embedding": {"output_dim": 8, "combiner": "mean", "dynamic": {"min_count": 100}}},
                      {"dense": {"units": 1}}],
           "loss": "binary_crossentropy"},
 "optimizer": {"type": "ftrl", "learning_rate": 0.1, "l1_regularization_strength": 0.001,
               "l2_shrinkage_regularization_strength": 0.01},
 "dataset": {"format": "libsvm", "dim": 1, "raw_ids": true, "train": {"path": "$ZD_TMP/train.svm"},
             "global_batch_size": 24, "shuffle": false, "shard_policy": "off"},
 "steps": $STEPS, "steps_per_execution": 5,
 "checkpoint": {"every_steps": 40, "keep": 1000, "full_every": $1}, "seed": 5}
JSON
}
job_file 3
job_file 100
job_dir() { echo "$ZD_TMP/state/jobs/$1"; }

# cluster_with N: a cluster file of N psds (new ports), the same chief and worker.
cluster_with() {
    python3 - "$CLUSTER2" "$ZD_TMP/cluster$1.json" "$1" <<'PY'
import json, socket, sys
c = json.load(open(sys.argv[1]))
ps = []
for _ in range(int(sys.argv[3])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ps.append("127.0.0.1:%d" % s.getsockname()[1]); s.close()
c["cluster"]["ps"] = ps
json.dump(c, open(sys.argv[2], "w"))
PY
    CLUSTER=$ZD_TMP/cluster$1.json
    mapfile -t ZD_PS_ADDRS < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["cluster"]["ps"]))' "$CLUSTER")
}
# wait_past JOB STEP: until the job's directory holds a checkpoint at a step
# >= STEP (bash only: the job runs 400 steps in seconds, a status call per
# poll could miss the middle of it).
wait_past() {
    local dir d n deadline=$((SECONDS + 300))
    dir=$(job_dir "$1")
    while ((SECONDS < deadline)); do
        for d in "$dir"/ckpt-*; do
            n=${d##*ckpt-}
            [[ $n =~ ^[0-9]+$ ]] && ((n >= $2)) && return 0
        done
        sleep 0.02
    done
    zd_fail "job $1: no checkpoint at a step >= $2 within 300 s"
}
# down NPS: every daemon stopped (the chief first: it checkpoints running jobs).
down() {
    local i
    zd_stop chief
    zd_stop worker0
    for ((i = 0; i < $1; i++)); do zd_stop "ps$i"; done
}

# ---- the run never stopped, on 2 psds ----
coord_up 2 1
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job3.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == j["steps"]'
JOB_A=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
zd_run_expect 0 "$OUT" "$ZDIST_BIN" export-embedding "$JOB_A" embedding/embeddings --out "$ZD_TMP/a" --cluster "$CLUSTER"
python3 - "$(job_dir "$JOB_A")" <<'PY' || zd_fail "checkpoint.full_every 3 is not what the psds saved (above)"
import glob, json, os, sys
seen = 0
for d in sorted(glob.glob(sys.argv[1] + "/ckpt-*")):
    step = int(d.rsplit("-", 1)[1]) if d.rsplit("-", 1)[1].isdigit() else None
    if step is None or step % 40:
        continue
    for m in glob.glob(d + "/dynamic-ps*.json"):
        chain = json.load(open(m))["tables"][0]["chain"]
        kinds = [c["kind"] for c in chain]
        want = (step // 40) % 3 + 1
        if len(chain) != want or kinds[0] != "full" or any(k != "delta" for k in kinds[1:]):
            print("%s: chain %s, expected a full and %d deltas" % (m, kinds, want - 1)); sys.exit(1)
        seen += 1
if seen < 2 * 10:
    print("only %d manifests checked" % seen); sys.exit(1)
print("%d manifests: a full every 3 saves" % seen)
PY
zd_ok "a run of $STEPS steps on 2 psds; its checkpoints hold a full every 3 saves (checkpoint.full_every), deltas between"
down 2

# ---- stopped on 2 psds, resumed on N: the same end ----
for N in 1 4; do
    CLUSTER=$CLUSTER2
    mapfile -t ZD_PS_ADDRS < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["cluster"]["ps"]))' "$CLUSTER")
    coord_up 2 1
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job100.json" --cluster "$CLUSTER" --detach
    JOB=$(cat "$OUT")
    wait_past "$JOB" 80
    down 2
    cp "$ZD_TMP/chief.log" "$ZD_TMP/chief.log.before"
    grep -qE "job $JOB: checkpointing before the stop" "$ZD_TMP/chief.log.before" || zd_fail "the chief did not checkpoint job $JOB at its stop"
    cluster_with "$N"
    coord_up "$N" 1
    coord_wait_state "$JOB" done 300
    FROM=$(grep -oE "job $JOB: restored every ps from the checkpoint at step [0-9]+" "$ZD_TMP/chief.log" | grep -oE '[0-9]+$' | head -1)
    [[ -n $FROM && $FROM -gt 0 ]] || zd_fail "job $JOB: not restored from a checkpoint on $N psds"
    chain=$(python3 -c 'import json,sys; print(" ".join(c["kind"] for c in json.load(open(sys.argv[1]))["tables"][0]["chain"]))' \
        "$(job_dir "$JOB")/ckpt-$FROM/dynamic-ps0.json")
    [[ $chain == full\ delta* ]] || zd_fail "job $JOB: the checkpoint at step $FROM is not a full and deltas: $chain"
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" export-embedding "$JOB" embedding/embeddings --out "$ZD_TMP/b$N" --cluster "$CLUSTER"
    cmp -s "$ZD_TMP/a.ids.npy" "$ZD_TMP/b$N.ids.npy" && cmp -s "$ZD_TMP/a.vectors.npy" "$ZD_TMP/b$N.vectors.npy" ||
        zd_fail "job $JOB, checkpointed on 2 psds at step $FROM and resumed on $N: its table differs from the run never stopped"
    zd_ok "stopped at step $FROM on 2 psds (chain: $chain), resumed on $N psd(s): the job's final table is byte for byte the run never stopped"
    down "$N"
done
echo "all $ZD_PASSED checks passed"
