#!/usr/bin/env bash
# The DLRM example end to end (issue 30): deploy/examples/dlrm-criteo-run.json and
# dlrm-criteo-ps.json, copied with only the data path, the batch and the epochs overridden,
# trained on `zdist gen criteo` files by `zdist run` and by parameter_server over 2 workers and
# 2 ps (the 26 tables row-sharded); the test AUC well above chance and of the teacher's order.
# A short run (18,000 train rows, ~280 steps): the AUC bound is loose on purpose, the teacher's
# AUC is the ceiling, and nothing here is timed.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init dlrm
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
EXAMPLES=$(cd "$(dirname "$0")/../../deploy/examples" && pwd)
OUT=$ZD_TMP/out
DATA=$ZD_TMP/data
mkdir -p "$DATA"

zd_run_expect 0 "$ZD_TMP/gen.json" "$ZDIST_BIN" gen criteo --rows 20000 --files 4 --seed 1 --out "$DATA/criteo" --json
TEACHER=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["teacher_auc"])' "$ZD_TMP/gen.json")

# copy EXAMPLE OUT: the example job with its data under $DATA, batch 64, 1 epoch.
copy() {
    python3 - "$EXAMPLES/$1" "$2" "$DATA" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
d = sys.argv[3]
j["dataset"]["train"]["files"] = d + "/criteo/train/part-*.tfrecord"
j["dataset"]["test"]["files"] = d + "/criteo/test/part-*.tfrecord"
j["dataset"]["global_batch_size"] = 64
j["epochs"] = 1
json.dump(j, open(sys.argv[2], "w"))
PY
}

# auc_ok FILE EXPR_FOR_METRICS: test_auc well above 0.5 and within 0.2 of the teacher's (never above it by
# more than noise: the teacher is the Bayes-optimal scorer of these labels).
auc_ok() {
    zd_json_check "$1" "$2 is not None and 0.6 < $2['test_auc'] < $TEACHER + 0.02 and $2['test_auc'] > $TEACHER - 0.2 and 0 < $2['test_loss'] < 0.7"
}

copy dlrm-criteo-run.json "$ZD_TMP/run.json"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/run.json" --json
auc_ok "$OUT" j
zd_ok "zdist run of dlrm-criteo-run.json: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%d steps, test AUC %.4f, log loss %.4f" % (j["steps"], j["test_auc"], j["test_loss"]))' "$OUT") (teacher $TEACHER)"

# ---- parameter_server: 2 ps, 2 workers, a chief ----
coord_cluster 2 2
coord_up 2 2

copy dlrm-criteo-ps.json "$ZD_TMP/ps.json"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/ps.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done"'
auc_ok "$OUT" 'j["metrics"]'
zd_ok "parameter_server dlrm-criteo-ps.json over 2 workers and 2 ps: $(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print("test AUC %.4f, log loss %.4f" % (m["test_auc"], m["test_loss"]))' "$OUT") (teacher $TEACHER)"

echo "test_dlrm.sh: $ZD_PASSED passed, 0 failed"
