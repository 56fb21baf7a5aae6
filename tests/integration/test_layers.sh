#!/usr/bin/env bash
# Sequential models end to end: Keras's summary, bad layers refused naming the layer and field (by zdist run and
# at submit), a small CNN with batch norm and dropout trained briefly by zdist run (one_device, mirrored), under
# parameter_server (2 workers, 2 ps) and multi_worker_mirrored (2 workers) through the coordinator, and wide and
# deep on generated libsvm data under parameter_server with its embedding row-sharded over both ps tasks.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init layers
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
EXAMPLES=$(cd "$(dirname "$0")/../../deploy/examples" && pwd)
FMNIST=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
OUT=$ZD_TMP/out

# ---- the summary, as Keras prints it ----
zd_run_expect 0 "$OUT" "$ZDIST_BIN" run --summary "$EXAMPLES/fmnist-cnn-run.json"
grep -qxF "conv2d_1 (Conv2D)            (None, 11, 11, 64)        18496     " "$OUT" || zd_fail "summary: $(cat "$OUT")"
grep -qxF "Total params: 225,418" "$OUT" && grep -qxF "Non-trainable params: 192" "$OUT" ||
    zd_fail "summary total: $(cat "$OUT")"
zd_ok "zdist run --summary prints Keras's model summary"

# cnn_job FILE STRATEGY STEPS [EXTRA]: a small CNN (conv, batch norm, pool, dropout) on Fashion-MNIST, or on
# synthetic 8x8 images when the data set is not installed.
if [[ -r $FMNIST/train-images-idx3-ubyte.gz ]]; then
    DATA=fmnist FLOOR=0.70
else
    DATA=synthetic FLOOR=0.60
    echo "note: no Fashion-MNIST under $FMNIST (package dataset-fashion-mnist): synthetic images instead"
fi
cnn_job() {
    python3 - "$@" "$DATA" "$FMNIST" <<'PY'
import json, sys
path, strategy, steps, extra, data, d = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
if data == "fmnist":
    shape, conv = [28, 28, 1], {"filters": 8, "kernel": 3, "strides": 2, "activation": "relu"}
    ds = {"format": "idx",
          "train": {"images": d + "/train-images-idx3-ubyte.gz", "labels": d + "/train-labels-idx1-ubyte.gz"},
          "test": {"images": d + "/t10k-images-idx3-ubyte.gz", "labels": d + "/t10k-labels-idx1-ubyte.gz"}}
else:
    shape, conv = [8, 8, 1], {"filters": 8, "kernel": 3, "padding": "same", "activation": "relu"}
    ds = {"format": "synthetic", "synthetic": {"n": 8192, "test_n": 2048, "dim": 64, "classes": 10, "seed": 5,
                                               "noise_std": 1.0}}
ds.update({"global_batch_size": 64, "shuffle_seed": 3, "shard_policy": "data"})
job = {"name": "cnn-" + strategy, "strategy": {"type": strategy},
       "model": {"name": "sequential", "input_shape": shape,
                 "layers": [{"conv2d": conv}, {"batch_norm": {"momentum": 0.9}}, {"max_pool2d": {"pool": 2}},
                            "flatten", {"dropout": {"rate": 0.2}}, {"dense": {"units": 10}}],
                 "loss": "sparse_categorical_crossentropy"},
       "optimizer": {"type": "adam", "learning_rate": 0.003}, "dataset": ds, "steps": steps, "seed": 2}
job.update(json.loads(extra or "{}"))
json.dump(job, open(path, "w"))
PY
}

# ---- bad layers: refused by zdist run and at submit, naming the layer and the field ----
cnn_job "$ZD_TMP/bad.json" one_device 10 '{"model": {"name": "sequential", "input_shape": [28, 28, 1], "layers": [{"conv2d": {"filters": 8, "kernel": 3}}, "flatten", {"conv2d": {"filters": 4, "kernel": 0}}], "loss": "sparse_categorical_crossentropy"}}'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/bad.json"
grep -qF "model.layers[2].conv2d.kernel: must be an integer in 1..15 or [height, width], got 0" "$OUT.err" ||
    zd_fail "bad layer: $(cat "$OUT.err")"
zd_ok "a bad layer is refused naming model.layers[2].conv2d.kernel"

# ---- one_device and mirrored through zdist run: the loss falls, the accuracy clears a floor ----
# run_loss_falls OUTFILE: zdist run's progress lines (stderr) show a lower loss at the end than at the start.
loss_falls() {
    python3 - "$1" <<'PY' || zd_fail "the loss did not fall: $(cat "$1")"
import re, sys
losses = [float(m) for m in re.findall(r"loss ([0-9.]+)", open(sys.argv[1]).read())]
sys.exit(0 if len(losses) >= 2 and losses[-1] < losses[0] else 1)
PY
}
for s in one_device mirrored; do
    extra='{}'
    [[ $s == mirrored ]] && extra='{"strategy": {"type": "mirrored", "num_replicas": 2}}'
    cnn_job "$ZD_TMP/run-$s.json" "$s" 120 "$extra"
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/run-$s.json" --quiet
    acc=$(sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p' "$OUT")
    python3 -c "import sys; sys.exit(0 if float('$acc') >= $FLOOR else 1)" || zd_fail "$s: test accuracy $acc < $FLOOR"
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/run-$s.json" --steps 40
    loss_falls "$OUT.err"
    zd_ok "zdist run, $s: the CNN trains (test accuracy $acc after 120 steps)"
done

# ---- a cluster: chief, 2 workers, 2 ps ----
coord_cluster 2 2
COORD_CHIEF_ARGS=--keep-variables # each job's variables are read from the psds after it
coord_up 2 2
zd_ok "a chief, 2 workers and 2 ps"

# submit_done JOBFILE: submits, waits for the end; the job id in $JOB, its status in $OUT.
submit_done() {
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$1" --cluster "$CLUSTER" --json
    JOB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
    zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == j["steps"]'
}
# metrics_loss_falls JOB: the coordinator's metrics.jsonl shows the loss falling.
metrics_loss_falls() {
    python3 - "$ZD_TMP/state/jobs/$1/metrics.jsonl" <<'PY' || zd_fail "job $1: the loss did not fall"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
losses = [r["loss"] for r in rows if r.get("loss") is not None]
sys.exit(0 if len(losses) >= 2 and losses[-1] < losses[0] else 1)
PY
}

# The bad job is refused at submit too, before anything runs.
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/bad.json" --cluster "$CLUSTER" --detach
grep -qF "model.layers[2].conv2d.kernel" "$OUT.err" || zd_fail "submit of a bad layer: $(cat "$OUT.err")"
zd_ok "the coordinator refuses the bad layer at submit"

# ---- parameter_server: variables (batch norm's moving statistics too) on the ps tasks ----
cnn_job "$ZD_TMP/ps.json" parameter_server 160 '{"steps_per_execution": 4, "evaluation": {"at_end": true}}'
submit_done "$ZD_TMP/ps.json"
zd_json_check "$OUT" "j['metrics']['test_accuracy'] >= $FLOOR"
metrics_loss_falls "$JOB"
zd_run_expect 0 "$OUT.ps" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[0]}" --json
zd_run_expect 0 "$OUT.ps1" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[1]}" --json
grep -q "batch_normalization/moving_variance" "$OUT.ps" "$OUT.ps1" || zd_fail "no moving variance on the ps tasks"
zd_ok "parameter_server, 2 workers and 2 ps: the CNN trains ($(python3 -c 'import json,sys; print("test accuracy %.4f" % json.load(open(sys.argv[1]))["metrics"]["test_accuracy"])' "$OUT"))"

# ---- multi_worker_mirrored: both workers in lockstep, batch norm over the global batch ----
cnn_job "$ZD_TMP/mwm.json" multi_worker_mirrored 120 '{"steps_per_execution": 4, "evaluation": {"at_end": true}}'
submit_done "$ZD_TMP/mwm.json"
zd_json_check "$OUT" "j['metrics']['test_accuracy'] >= $FLOOR and all(w['in_ring'] for w in j['workers'])"
metrics_loss_falls "$JOB"
zd_ok "multi_worker_mirrored, 2 workers: the CNN trains ($(python3 -c 'import json,sys; print("test accuracy %.4f" % json.load(open(sys.argv[1]))["metrics"]["test_accuracy"])' "$OUT"))"

# ---- wide and deep on libsvm under parameter_server: the embedding row-sharded over both ps ----
python3 "$EXAMPLES/gen_wide_deep.py" "$ZD_TMP/wide-deep" --train 6000 --test 2000 >/dev/null
python3 - "$EXAMPLES/wide-deep-ps.json" "$ZD_TMP/wd.json" "$ZD_TMP/wide-deep" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))
job["dataset"]["train"]["path"] = sys.argv[3] + "/train.svm"
job["dataset"]["test"]["path"] = sys.argv[3] + "/test.svm"
job.pop("epochs")
job["steps"] = 200
json.dump(job, open(sys.argv[2], "w"))
PY
submit_done "$ZD_TMP/wd.json"
zd_json_check "$OUT" 'j["metrics"]["test_accuracy"] >= 0.70'
metrics_loss_falls "$JOB"
zd_run_expect 0 "$OUT.ps" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[0]}" --json
zd_run_expect 0 "$OUT.ps1" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[1]}" --json
grep -q "embedding/embeddings" "$OUT.ps" && grep -q "embedding/embeddings" "$OUT.ps1" ||
    zd_fail "the embedding is not on both ps tasks: $(cat "$OUT.ps" "$OUT.ps1")"
grep -q "pull_rows" "$OUT.ps" || grep -qi "PULL_ROWS" "$OUT.ps" || zd_fail "no row pulls on ps 0: $(cat "$OUT.ps")"
zd_ok "wide and deep under parameter_server: embedding rows read by id from both ps ($(python3 -c 'import json,sys; print("test accuracy %.4f" % json.load(open(sys.argv[1]))["metrics"]["test_accuracy"])' "$OUT"))"

echo "passed: $ZD_PASSED checks"
