#!/usr/bin/env bash
# Dynamic embedding tables in a job's checkpoints (issue 29), on real
# daemons: a full every 10 saves, deltas between (psd_ckpt_dyn.c).
#
# One worker, so training is deterministic (every closure's pulls follow
# the previous one's pushes): a run whose psd is killed -9 between
# incremental saves, restored from the last checkpoint and re-run from
# there, must end with exactly the tables and the test loss of a run never
# interrupted — any row not restored to its last saved value, or a push
# applied twice or lost, would show. Then a delta file of the newest
# checkpoint is damaged: the restore refuses it (DATA_LOSS), the
# coordinator walks back to the older intact checkpoint, the job ends.
# Restoring onto another number of ps tasks (a cluster restarted with 1 or
# 4 psds) is test_dynamic_reshard.sh's.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init dynamic-ckpt
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
STEPS=600
coord_cluster 2 1

# ---- the data: ids over all of int64, each batch 24 examples of 4 ids ----
python3 "$(dirname "$0")/dyn_data.py" "$ZD_TMP" 29 50 96

# job FILE STEPS: a dynamic embedding then one logit, adagrad, a checkpoint every 20 steps.
job() {
    cat >"$1" <<JSON
{"name": "dynckpt", "strategy": {"type": "parameter_server"},
 "model": {"name": "sequential", "input_shape": [1],
           "layers": [{"embedding": {"output_dim": 8, "combiner": "mean", "dynamic": {"min_count": 1}}},
                      {"dense": {"units": 1}}],
           "loss": "binary_crossentropy"},
 "optimizer": {"type": "adagrad", "learning_rate": 0.1},
 "dataset": {"format": "libsvm", "dim": 1, "raw_ids": true, "train": {"path": "$ZD_TMP/train.svm"},
             "test": {"path": "$ZD_TMP/test.svm"}, "global_batch_size": 24, "shuffle": false, "shard_policy": "off"},
 "steps": $2, "steps_per_execution": 5, "evaluation": {"at_end": true},
 "checkpoint": {"every_steps": 20, "keep": 2}, "seed": 5}
JSON
}
job_dir() { echo "$ZD_TMP/state/jobs/$1"; }
test_loss() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(repr((j.get("metrics") or j["detail"]["metrics"])["test_loss"]))' "$1"; }
# tables JOB: each psd's rows of the job's table and its part's pushes.
tables() {
    local i
    for ((i = 0; i < 2; i++)); do
        zd_run_expect 0 "$OUT.$i" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json
        python3 - "$OUT.$i" "$1" <<'PY'
import json, sys
j, job = json.load(open(sys.argv[1])), sys.argv[2]
e = [x for x in j["embeddings"] if x["job"] == job]
p = [s for s in j["shard_info"] if s["name"] == job + "/embedding/embeddings"]
print("rows %d pushes %d" % (e[0]["rows"], p[0]["step"]))
PY
    done
}

COORD_CHIEF_ARGS=--keep-variables # the tables are read after each job
coord_up 2 1

# ---- the run never interrupted ----
job "$ZD_TMP/job.json" $STEPS
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == j["steps"]'
JOB_A=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
zd_run_expect 0 "$OUT.st" "$ZDIST_BIN" status "$JOB_A" --cluster "$CLUSTER" --json
LOSS_A=$(test_loss "$OUT.st")
TABLES_A=$(tables "$JOB_A")
ls "$(job_dir "$JOB_A")"/ckpt-*/ | grep -q -- '-delta-' || zd_fail "no delta file in the job's checkpoints: $(ls -R "$(job_dir "$JOB_A")")"
zd_ok "a run of $STEPS steps saved fulls and deltas; test loss $LOSS_A; tables: $(tr '\n' ' ' <<<"$TABLES_A")"

# ---- zdist status: the job's tables per ps, from the psds' stats ----
rows=$(awk '{s += $2} END {print s}' <<<"$TABLES_A")
python3 - "$OUT.st" "$rows" <<'PY' || zd_fail "status --json: the embeddings are not the tables (above)"
import json, sys
j = json.load(open(sys.argv[1]))
ps = j.get("ps") or j["detail"]["ps"]
e = [x for p in ps for x in p.get("embeddings", [])]
assert e and all(x["table"] == "embedding/embeddings" for x in e), ps
assert sum(x["rows"] for x in e) == int(sys.argv[2]) and sum(x["bytes"] for x in e) > 0, e
PY
zd_run_expect 0 "$OUT.txt" "$ZDIST_BIN" status "$JOB_A" --cluster "$CLUSTER"
grep -qE "embedding embedding/embeddings: [0-9]+ rows \([0-9]+ admitted, 0 refused, 0 evicted, 0 pending\), [0-9]+ bytes" "$OUT.txt" ||
    zd_fail "zdist status shows no embeddings: $(cat "$OUT.txt")"
zd_ok "zdist status (text, --json): the job's dynamic table per ps, $rows rows in all"

# ---- kill -9 of a psd between incremental saves: restored, the same end ----
# wait_past STEP: until the job's directory holds a checkpoint at a step >=
# STEP. Bash only, no process per poll: under load one `zdist status` can take
# longer than the rest of this short job (CI once saw it end before the kill).
wait_past() {
    local dir d n deadline=$((SECONDS + 300))
    dir=$(job_dir "$JOB")
    while ((SECONDS < deadline)); do
        for d in "$dir"/ckpt-*; do
            n=${d##*ckpt-}
            [[ $n =~ ^[0-9]+$ ]] && ((n >= $1)) && return 0
        done
        sleep 0.02
    done
    zd_fail "job $JOB: no checkpoint at a step >= $1 within 300 s"
}
# kill_run: a run whose ps 1 is killed -9 at step >= 250; sets JOB and FROM
# (the step restored; empty when the job ended before the kill landed).
kill_run() {
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
    JOB=$(cat "$OUT")
    wait_past 260
    zd_stop ps1 KILL
    zd_wait_until 30 "ps1's clients seeing it gone" zd_port_unused "${ZD_PS_ADDRS[1]##*:}"
    coord_start_ps 1
    zd_wait_psd ps1 "${ZD_PS_ADDRS[1]}" 60
    coord_wait_state "$JOB" done 300
    FROM=$(grep -oE "job $JOB: restored every ps from the checkpoint at step [0-9]+" "$ZD_TMP/chief.log" | grep -oE '[0-9]+$' | head -1)
    [[ -n $FROM ]] || return 0
    grep -qE "restored step $FROM of job $JOB" "$ZD_TMP/ps1.log" || zd_fail "ps 1 did not log its restore"
}
# Fulls are saved at steps 0, 200, 400 (a full every 10 saves): a kill
# that lands just after one restores no delta, and one that lands after the
# job's end restores nothing; run again then (at most 3).
for try in 1 2 3; do
    kill_run
    [[ -n $FROM ]] && (( FROM % 200 != 0 )) && break
    echo "restored from step '${FROM:-none: the job had ended}', not a delta: again"
done
[[ -n $FROM ]] && (( FROM % 200 != 0 )) || zd_fail "three kills all restored a full or nothing"
zd_run_expect 0 "$OUT.st" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT.st" 'j["step"] == j["steps"] and j["psd_recoveries"] >= 1'
LOSS_B=$(test_loss "$OUT.st")
TABLES_B=$(tables "$JOB")
[[ $LOSS_B == "$LOSS_A" ]] || zd_fail "test loss $LOSS_B after the restore, $LOSS_A without"
[[ $TABLES_B == "$TABLES_A" ]] || zd_fail "tables after the restore: $TABLES_B; without: $TABLES_A"
zd_ok "psd kill -9 at step >= 250, restored from step $FROM (a full and deltas), re-run: exactly $STEPS steps, the same rows, pushes and test loss ($LOSS_B) as the run never interrupted"

# ---- zdist export-embedding: the final checkpoints of both runs as .npy pairs ----
zd_run_expect 0 "$OUT" "$ZDIST_BIN" export-embedding "$JOB_A" embedding/embeddings --out "$ZD_TMP/a" --cluster "$CLUSTER"
last=$(ls -d "$(job_dir "$JOB")"/ckpt-* | grep -E 'ckpt-[0-9]+$' | sort -t- -k2 -n | tail -1)
zd_run_expect 0 "$OUT" "$ZDIST_BIN" export-embedding "$last" embedding/embeddings --out "$ZD_TMP/b"
cmp -s "$ZD_TMP/a.ids.npy" "$ZD_TMP/b.ids.npy" && cmp -s "$ZD_TMP/a.vectors.npy" "$ZD_TMP/b.vectors.npy" ||
    zd_fail "the restored run's exported table differs from the uninterrupted run's"
zd_run_expect 1 "$OUT" "$ZDIST_BIN" export-embedding "$last" embedding/nope --out "$ZD_TMP/c"
grep -qF "no dynamic table 'embedding/nope'" "$OUT.err" || zd_fail "unknown table: $(cat "$OUT.err")"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    rows=$(awk '{s += $2} END {print s}' <<<"$TABLES_A")
    /usr/bin/python3 - "$ZD_TMP/a" "$rows" <<'PY' || zd_fail "the .npy pair is not the table (above)"
import sys, numpy as np
ids, vec = np.load(sys.argv[1] + ".ids.npy"), np.load(sys.argv[1] + ".vectors.npy")
n = int(sys.argv[2])
assert ids.dtype == np.int64 and ids.shape == (n,), (ids.dtype, ids.shape, n)
assert vec.dtype == np.float32 and vec.shape == (n, 8), (vec.dtype, vec.shape)
assert (np.diff(ids) > 0).all() and np.isfinite(vec).all() and (np.abs(vec).sum(axis=1) > 0).all()
print("numpy: %d ids ascending, vectors %s" % (n, vec.shape))
PY
    zd_ok "export-embedding (by job, by directory): numpy.load reads $rows ascending ids and their trained vectors; the restored run's export is byte for byte the uninterrupted run's"
else
    echo "skip: numpy.load of the export (python3-numpy not installed); the exports still match byte for byte"
fi

# ---- a damaged delta: that checkpoint refused, the older intact one restored ----
job "$ZD_TMP/job3.json" 2000
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job3.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
# The coordinator killed -9 when its newest complete checkpoint is a
# delta's (not a full's: run on and kill again, at most 3 times).
CH=chief
newest=""
for try in 1 2 3; do
    coord_wait_step "$JOB" $((250 * try))
    zd_stop "$CH" KILL
    newest=$(ls -d "$(job_dir "$JOB")"/ckpt-* | grep -E 'ckpt-[0-9]+$' | sort -t- -k2 -n -r |
        while read -r d; do if [[ -f $d/manifest.json ]]; then echo "$d"; break; fi; done)
    if ls "$newest" | grep -q -- '-delta-'; then break; fi
    newest=""
    CH=chief_$try
    coord_start_chief "$CH"
    zd_wait_log "$CH" "chief serving at" 60
done
[[ -n $newest ]] || zd_fail "three kills all found a full newest: $(ls "$(job_dir "$JOB")")"
delta=$(ls "$newest"/*-delta-*.bin | head -1)
python3 - "$delta" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 2] ^= 0x01
open(sys.argv[1], "wb").write(b)
PY
s1=${newest##*ckpt-}
coord_start_chief chief2
zd_wait_log chief2 "chief serving at" 60
zd_wait_log chief2 "job $JOB: the checkpoint at step $s1 is damaged \\(.*$(basename "$delta").*\\): set aside as .*ckpt-$s1.damaged; resuming from the one at step [0-9]+" 60
zd_wait_log chief2 "job $JOB: restored every ps from the checkpoint at step [0-9]+" 60
coord_wait_state "$JOB" done 300
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == j["steps"] == 2000 and j["checkpoints_damaged"] == 1'
zd_ok "a damaged delta ($(basename "$delta") at step $s1): set aside, resumed from the older intact checkpoint, exactly 2000 steps"
echo "all $ZD_PASSED checks passed"
