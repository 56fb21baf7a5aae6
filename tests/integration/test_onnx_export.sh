#!/usr/bin/env bash
# zdist export (issue 32): the Fashion-MNIST mlp, the CNN, a CNN with SAME
# padding, strides, average pooling and activation layers, and a
# wide-and-deep recommender on sparse examples (an embedding and concat),
# a functional recommender on TFRecord examples (onnx_recsys.py: embeddings,
# dot interactions, crosses, concat, add), trained briefly by `zdist run`;
# a wide-and-deep model with a dynamic embedding table (its rows on the
# psds, exported as rows + an ai.onnx.ml LabelEncoder id->row map) against
# the job's own evaluation; the mlp and the recommender trained under
# parameter_server on real daemons with a variable split over 2 ps tasks,
# and the CNN variants under multi_worker_mirrored (the workers' state);
# each exported as an ONNX graph and run by runtimes this project did not
# write: Debian's python3-onnx (onnx.checker.check_model, full_check) and
# ONNX Runtime (npm's onnxruntime-node, installed by this script into the
# build tree) on the test set, every prediction within 1e-4 of zdist's own
# (`zdist run --dump-predictions`, or `zdist run --evaluate` of the
# parameter_server checkpoint) with the same test accuracy (and AUC). Then
# bad input: a target path cut short, a damaged checkpoint, one from
# another format version, a model without an exporter, a hashing layer, each refused
# clearly with no file (or the old one) left. Skips (77), saying why,
# without the data set, python3-onnx or npm's registry.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init onnx_export
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
HERE=$(cd "$(dirname "$0")" && pwd)
EXAMPLES=$HERE/../../deploy/examples
DATA=/usr/share/datasets/fashion-mnist
IMAGES=$DATA/t10k-images-idx3-ubyte.gz
LABELS=$DATA/t10k-labels-idx1-ubyte.gz
if [[ ! -f $IMAGES || ! -f $LABELS ]]; then
    echo "SKIP: the Fashion-MNIST test set is not in $DATA (the examples' data set)"
    exit 77
fi

# Debian's python3-onnx (its modules are the system python's): installed here when missing.
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
if ! "$PY" -c 'import onnx' 2>/dev/null && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-onnx >"$ZD_TMP/apt.log" 2>&1 || true
fi
if ! "$PY" -c 'import onnx' 2>/dev/null; then
    echo "SKIP: Debian's python3-onnx is needed (apt-get install python3-onnx): $(tail -n 2 "$ZD_TMP/apt.log" 2>/dev/null)"
    exit 77
fi
# ONNX Runtime for Node.js, into a cache under the build tree. Its install
# script fetches optional GPU libraries; the CPU runtime is in the package.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >"$ZD_TMP/apt.log" 2>&1 || true
    fi
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "SKIP: Node.js and npm are needed (apt-get install nodejs npm)"
    exit 77
fi
cache=${ZDIST_ONNX_NPM_CACHE:-$ZD_TMP/npm}
if ! NODE_PATH=$cache/node_modules node -e 'require("onnxruntime-node")' 2>/dev/null; then
    mkdir -p "$cache"
    if ! (cd "$cache" && timeout 300 npm install --no-audit --no-fund --ignore-scripts --prefix "$cache" \
        onnxruntime-node@1.30.0 >"$ZD_TMP/npm.log" 2>&1); then
        echo "SKIP: npm could not install onnxruntime-node: $(tail -n 3 "$ZD_TMP/npm.log")"
        exit 77
    fi
    if ! NODE_PATH=$cache/node_modules node -e 'require("onnxruntime-node")' 2>"$ZD_TMP/ort.err"; then
        echo "SKIP: onnxruntime-node does not load here: $(tail -n 3 "$ZD_TMP/ort.err")"
        exit 77
    fi
fi

# onnx_check NAME MODEL PREDICTIONS SHAPE [softmax]: the checker's full check
# (and the input "input" float [N, SHAPE], the output [N, 10]; SHAPE sparse:
# the inputs "ids" int64 and "values" float [N, K], the output [N, 1], on
# the wide-and-deep test set), then ONNX Runtime on the test set against
# zdist's predictions: within 1e-4, the same accuracy (and the AUC to 1e-4:
# predictions 1e-7 apart may order two near-equal examples the other way).
onnx_check() {
    local name=$1 model=$2 pred=$3 shape=$4 link=${5:-} data=$IMAGES labels=$LABELS
    [[ $shape != sparse ]] || { data=$WD/test.svm; labels=-; }
    [[ $shape != feeds ]] || { data=$RS/feeds.json; labels=-; }
    "$PY" - "$model" "$shape" >"$ZD_TMP/$name.checker" 2>&1 <<'PY' || zd_fail "$name: onnx.checker refused $model: $(tail -n 5 "$ZD_TMP/$name.checker")"
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
assert m.opset_import[0].version >= 13, m.opset_import
dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
elem = lambda v: v.type.tensor_type.elem_type
T = onnx.TensorProto
if sys.argv[2] == "feeds":
    assert [o.name for o in m.graph.output] == ["predictions"] and dims(m.graph.output[0]) == ["N", 1], m.graph.output
elif sys.argv[2] == "sparse":
    (i, v), (o,) = m.graph.input, m.graph.output
    assert (i.name, elem(i), dims(i)) == ("ids", T.INT64, ["N", "K"]), i
    assert (v.name, elem(v), dims(v)) == ("values", T.FLOAT, ["N", "K"]), v
    assert dims(o) == ["N", 1], o
else:
    (i,), (o,) = m.graph.input, m.graph.output
    want = ["N"] + [int(x) for x in sys.argv[2].split(",")]
    assert (i.name, elem(i), dims(i)) == ("input", T.FLOAT, want), (i, want)
    assert dims(o) == ["N", 10], o
print("checked", [n.op_type for n in m.graph.node])
PY
    NODE_PATH=$cache/node_modules node "$HERE/onnx_check.js" "$model" "$data" "$labels" "$pred" "$shape" $link \
        >"$ZD_TMP/$name.check.json" || zd_fail "$name: onnxruntime-node could not run $model"
    zd_json_check "$ZD_TMP/$name.check.json" 'j["max_abs_diff"] <= 1e-4 and j["accuracy_onnx"] == j["accuracy_zdist"] and abs(j.get("auc_onnx", 0) - j.get("auc_zdist", 0)) < 1e-4'
}

acc() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["accuracy_onnx"])' "$1"; }

# run_export NAME JOB STEPS SHAPE: zdist run (saving the checkpoint and the
# test set's predictions), export, check; its accuracy is zdist run's.
run_export() {
    local name=$1 job=$2 steps=$3 shape=$4
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" run "$job" --steps "$steps" --quiet --json --save "$ZD_TMP/$name-save" \
        --dump-predictions "$ZD_TMP/$name-pred.txt"
    cp "$OUT" "$ZD_TMP/$name-run.json"
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" export "$ZD_TMP/$name-save" --onnx "$ZD_TMP/$name.onnx"
    onnx_check "$name" "$ZD_TMP/$name.onnx" "$ZD_TMP/$name-pred.txt" "$shape"
    # zdist run --json prints 6 significant digits
    zd_json_check "$ZD_TMP/$name-run.json" "abs(j['test_accuracy'] - $(acc "$ZD_TMP/$name.check.json")) < 1e-6"
    zd_ok "$name: $steps steps of zdist run exported; check_model(full_check) passes; onnxruntime-node on the test set: $(cat "$ZD_TMP/$name.check.json")"
}

run_export mlp "$EXAMPLES/fmnist-mlp-run.json" 60 784
run_export cnn "$EXAMPLES/fmnist-cnn-run.json" 12 28,28,1
zd_run_expect 0 "$OUT" "$ZDIST_BIN" export "$ZD_TMP/cnn-save" --onnx "$ZD_TMP/cnn-logits.onnx" --logits
onnx_check cnn-logits "$ZD_TMP/cnn-logits.onnx" "$ZD_TMP/cnn-pred.txt" 28,28,1 softmax
grep -q '"output":"logits"' "$ZD_TMP/cnn-logits.check.json" || zd_fail "--logits: the output is not named logits"
zd_ok "cnn --logits: the graph ends before the softmax (output \"logits\"), whose softmax is zdist's prediction"

"$PY" - "$EXAMPLES/fmnist-cnn-run.json" "$ZD_TMP/variants.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j.pop("comment", None)
j["name"] = "fmnist-cnn-variants"
j["model"]["layers"] = [
    {"conv2d": {"filters": 6, "kernel": 3, "strides": 2, "padding": "same", "activation": "tanh"}},
    {"batch_norm": {"center": False}},
    {"avg_pool2d": {"pool": 3, "strides": 2, "padding": "same"}},
    {"conv2d": {"filters": 8, "kernel": [2, 3], "padding": "valid", "use_bias": False}},
    "relu",
    {"max_pool2d": {"pool": 2, "padding": "same"}},
    "flatten",
    {"dropout": {"rate": 0.5}},
    {"batch_norm": {}},
    {"dense": {"units": 10, "activation": "softmax"}}]
json.dump(j, open(sys.argv[2], "w"))
PY
run_export variants "$ZD_TMP/variants.json" 40 28,28,1

# A recommender on sparse libsvm examples: an embedding (mean of its rows)
# of the categorical ids, concatenated with the numeric features.
WD=$ZD_TMP/wd
python3 "$EXAMPLES/gen_wide_deep.py" "$WD" --train 8000 --test 3000 >/dev/null
wide_deep() { # wide_deep OUT STRATEGY COMBINER STEPS
    "$PY" - "$EXAMPLES/wide-deep-ps.json" "$1" "$2" "$3" "$4" "$WD" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j.pop("comment", None)
j.pop("epochs", None)
j["strategy"]["type"] = sys.argv[3]
j["steps"] = int(sys.argv[5])
j["model"]["layers"][0]["embedding"]["combiner"] = sys.argv[4]
j["dataset"]["train"]["path"] = sys.argv[6] + "/train.svm"
j["dataset"]["test"]["path"] = sys.argv[6] + "/test.svm"
j["checkpoint"] = {"every_steps": j["steps"], "keep": 1}
json.dump(j, open(sys.argv[2], "w"))
PY
}
wide_deep "$ZD_TMP/wd-run.json" one_device mean 60
run_export wide-deep "$ZD_TMP/wd-run.json" 60 sparse

# A functional recommender (onnx_recsys.py: fixed-vocabulary embeddings of
# an id, a [2]-id and a var feature, dot interactions with and without self
# interaction, DCN-v2 crosses, concat, add) on TFRecord examples: every
# named input stated with its dtype and a dynamic batch dimension.
RS=$ZD_TMP/recsys
mkdir -p "$RS"
"$PY" "$HERE/onnx_recsys.py" "$RS" 150
run_export recsys "$RS/job.json" 150 feeds
"$PY" - "$ZD_TMP/recsys.onnx" <<'PY' || zd_fail "recsys: the graph's inputs are not the model's"
import sys, onnx
m = onnx.load(sys.argv[1])
T = onnx.TensorProto
got = {i.name: (i.type.tensor_type.elem_type, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim])
       for i in m.graph.input}
assert got == {"dense_in": (T.FLOAT, ["N", 4]), "C1": (T.INT64, ["N"]), "C2": (T.INT64, ["N"]),
               "pair": (T.INT64, ["N", 2]), "tags": (T.INT64, ["N", "K"]), "tags_mask": (T.FLOAT, ["N", "K"])}, got
PY
zd_ok "functional recsys inputs: dense_in float [N, 4], C1 and C2 int64 [N], pair int64 [N, 2], tags int64 and tags_mask float [N, K]"

# A hashing layer (FarmHash64: no ONNX operator) is refused naming it, with what to do instead.
"$PY" - "$RS/job.json" "$ZD_TMP/hashing.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["model"]["layers"].insert(0, {"name": "hash_C1", "hashing": {"num_bins": 20}, "inputs": ["C1"]})
next(l for l in j["model"]["layers"] if l["name"] == "emb_C1")["inputs"] = ["hash_C1"]
json.dump(j, open(sys.argv[2], "w"))
PY
zd_run_expect 1 "$OUT" "$ZDIST_BIN" export "$ZD_TMP/recsys-save" --job "$ZD_TMP/hashing.json" --onnx "$ZD_TMP/hashing.onnx"
grep -q "layer 'hash_C1': hashing .* has no ONNX operator.*dynamic table" "$OUT.err" || zd_fail "a hashing layer: $(cat "$OUT.err")"
[[ ! -e $ZD_TMP/hashing.onnx ]] || zd_fail "a refused export wrote its target"
zd_ok "a hashing layer refused by name: $(head -n 1 "$OUT.err")"

# job_done JOB: until the job ends; it must have succeeded.
job_done() {
    coord_wait_json "$1" "j['state'] in ('done', 'failed', 'cancelled')" 300
    zd_json_check "$ZD_TMP/st.json" "j['state'] == 'done'"
}

# ---- parameter_server: the psd shards of a split variable merged ----
coord_cluster 2 2
mkdir -p "$ZD_TMP/state"
coord_up 2 2
"$PY" - "$EXAMPLES/fmnist-mlp-ps.json" "$ZD_TMP/ps.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j.pop("comment", None)
j.pop("epochs", None)
j["steps"] = 60
j["strategy"]["partitioner"] = "min_size:65536:2"
j["checkpoint"] = {"every_steps": 30, "keep": 2}
json.dump(j, open(sys.argv[2], "w"))
PY
# cluster_job NAME JOB_FILE: submits it and waits for its success; JOB and JD (its directory) set.
cluster_job() {
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$2" --cluster "$CLUSTER" --detach
    JOB=$(cat "$OUT")
    job_done "$JOB"
    JD=$ZD_TMP/state/jobs/$JOB
}

# split_over_ps CKPT SUFFIX: a variable whose name ends in SUFFIX has rows on both ps tasks.
split_over_ps() {
    "$PY" - "$1" "$2" <<'PY' || zd_fail "$1: no variable '*$2' split over both ps tasks"
import glob, json, sys
held = [m for m in glob.glob(sys.argv[1] + "/manifest-ps*.json")
        if any(v["name"].endswith(sys.argv[2]) for v in json.load(open(m))["variables"])]
assert len(held) == 2, held
PY
}

# cluster_check NAME SHAPE EXPORT_ARG...: export (the job given by EXPORT_ARG...), then
# zdist run --evaluate of the job's newest checkpoint, then the runtimes against it.
cluster_check() {
    local name=$1 shape=$2
    shift 2
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" export "$@" --onnx "$ZD_TMP/$name.onnx"
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" run --evaluate "$JD" "$JD/job.json" --quiet --json \
        --dump-predictions "$ZD_TMP/$name-pred.txt"
    cp "$OUT" "$ZD_TMP/$name-run.json"
    onnx_check "$name" "$ZD_TMP/$name.onnx" "$ZD_TMP/$name-pred.txt" "$shape"
    zd_json_check "$ZD_TMP/$name-run.json" "abs(j['test_accuracy'] - $(acc "$ZD_TMP/$name.check.json")) < 1e-6"
    # The job's own final evaluation (its workers, each a share of the test
    # set) scored the variables its last checkpoint holds: a worker's first
    # eval batch once read the values its own last push_pull returned, older
    # than the other worker's last pushes.
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
    "$PY" - "$OUT" "$ZD_TMP/$name-run.json" <<'PY' || zd_fail "$name: the job's own evaluation differs from zdist run --evaluate of its final checkpoint: $(head -c 400 "$OUT")"
import json, sys
m, r = json.load(open(sys.argv[1]))["metrics"], json.load(open(sys.argv[2]))
assert abs(m["test_loss"] - r["test_loss"]) <= 1e-5 * max(1.0, abs(r["test_loss"])), (m["test_loss"], r["test_loss"])
assert abs(m["test_accuracy"] - r["test_accuracy"]) < 1e-6, (m["test_accuracy"], r["test_accuracy"])
PY
}

cluster_job ps "$ZD_TMP/ps.json"
split_over_ps "$JD/ckpt-60" /dense_0/kernel
cluster_check ps 784 "$JOB" --state-dir "$ZD_TMP/state"
zd_json_check "$ZD_TMP/ps-run.json" "j['steps'] == 60"
zd_ok "parameter_server: job $JOB's checkpoint (dense_0/kernel split over 2 ps tasks) exported by job id; onnxruntime-node agrees with zdist run --evaluate of it: $(cat "$ZD_TMP/ps.check.json")"

wide_deep "$ZD_TMP/wd-ps.json" parameter_server sqrtn 40
cluster_job wd-ps "$ZD_TMP/wd-ps.json"
split_over_ps "$JD/ckpt-40" /embeddings
cluster_check wd-ps sparse "$JD"
zd_ok "parameter_server wide-and-deep (sqrtn combiner): its embedding table split over 2 ps tasks, exported from the job's directory; onnxruntime-node agrees with zdist run --evaluate: $(cat "$ZD_TMP/wd-ps.check.json")"

"$PY" - "$RS/job.json" "$ZD_TMP/recsys-ps.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["name"] = "recsys-ps"
j["strategy"] = {"type": "parameter_server", "partitioner": "min_size:512:2"}
j["dataset"]["shard_policy"] = "data"
j["steps"] = 60
j["checkpoint"] = {"every_steps": 60, "keep": 1}
json.dump(j, open(sys.argv[2], "w"))
PY
cluster_job recsys-ps "$ZD_TMP/recsys-ps.json"
split_over_ps "$JD/ckpt-60" /cross_1/kernel
cluster_check recsys-ps feeds "$JOB" --state-dir "$ZD_TMP/state"
zd_ok "parameter_server functional recsys: its checkpoint (cross_1/kernel split over 2 ps tasks) exported by job id; onnxruntime-node agrees with zdist run --evaluate: $(cat "$ZD_TMP/recsys-ps.check.json")"

# The same functional recommender with two of its tables dynamic (a single
# id, and the var feature under sqrtn; min_count 2, default 0.1): exported by
# job id, ONNX Runtime's metrics over the test set are the job's own final
# evaluation's (no zdist run reference: the local strategies serve no
# dynamic table).
"$PY" - "$ZD_TMP/recsys-ps.json" "$ZD_TMP/recsys-dyn.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["name"] = "recsys-dyn"
for l in j["model"]["layers"]:
    if l.get("name") in ("emb_C1", "emb_tags"):
        l["embedding"].pop("input_dim")
        l["embedding"]["dynamic"] = {"min_count": 2, "default": 0.1}
json.dump(j, open(sys.argv[2], "w"))
PY
grep -q '"dynamic"' "$ZD_TMP/recsys-dyn.json" || zd_fail "recsys-dyn: no layer made dynamic: $(head -c 600 "$ZD_TMP/recsys-dyn.json")"
cluster_job recsys-dyn "$ZD_TMP/recsys-dyn.json"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
cp "$OUT" "$ZD_TMP/recsys-dyn-st.json"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" export "$JOB" --state-dir "$ZD_TMP/state" --onnx "$ZD_TMP/recsys-dyn.onnx"
"$PY" - "$ZD_TMP/recsys-dyn.onnx" <<'PY' || zd_fail "recsys-dyn: the graph is not a checked model with two id->row maps"
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
assert sum(n.op_type == "LabelEncoder" for n in m.graph.node) == 2, [n.op_type for n in m.graph.node]
PY
NODE_PATH=$cache/node_modules node "$HERE/onnx_check.js" "$ZD_TMP/recsys-dyn.onnx" "$RS/feeds.json" - - feeds \
    >"$ZD_TMP/recsys-dyn.check.json" || zd_fail "recsys-dyn: onnxruntime-node could not run the model"
"$PY" - "$ZD_TMP/recsys-dyn-st.json" "$ZD_TMP/recsys-dyn.check.json" <<'PY' || zd_fail "recsys-dyn: ONNX Runtime's metrics differ from the job's own evaluation: $(cat "$ZD_TMP/recsys-dyn.check.json")"
import json, sys
m, o = json.load(open(sys.argv[1]))["metrics"], json.load(open(sys.argv[2]))
assert abs(m["test_accuracy"] - o["accuracy_onnx"]) < 1e-6, (m, o)
assert abs(m["test_auc"] - o["auc_onnx"]) < 1e-4 and abs(m["test_loss"] - o["log_loss_onnx"]) < 1e-4, (m, o)
PY
zd_ok "parameter_server functional recsys on dynamic tables: exported by job id (two LabelEncoder id->row maps); onnxruntime-node's accuracy, AUC and log loss are the job's own evaluation's: $(cat "$ZD_TMP/recsys-dyn.check.json")"

# ---- a dynamic embedding table: its rows on the psds, an id->row map in the graph ----
# zdist run cannot evaluate a dynamic table (its rows live on the psds), so
# the reference predictions are computed here with NumPy from the table
# `zdist export-embedding` reads out of the checkpoint (an id it does not
# hold: the job's default, as the psd answers) and the dense layers' weights; and the
# job's own final evaluation, of the same rows, agrees to float rounding.
"$PY" - "$ZD_TMP/wd-ps.json" "$ZD_TMP/dyn.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["name"] = "wide-deep-dynamic"
j["strategy"].pop("partitioner", None)
# ids seen once are never admitted: they (and the test set's new ids) look up the default, 0.25 in every element
j["model"]["layers"][0] = {"embedding": {"output_dim": 8, "combiner": "mean", "dynamic": {"min_count": 2, "default": 0.25}}}
json.dump(j, open(sys.argv[2], "w"))
PY
cluster_job dyn "$ZD_TMP/dyn.json"
cp "$ZD_TMP/st.json" "$ZD_TMP/dyn-st.json"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" export "$JD" --onnx "$ZD_TMP/dyn.onnx"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" export-embedding "$JD/ckpt-40" embedding/embeddings --out "$ZD_TMP/dyn-emb"
"$PY" - "$ZD_TMP/dyn.onnx" "$ZD_TMP/dyn-emb" "$WD/test.svm" "$ZD_TMP/dyn-pred.txt" >"$ZD_TMP/dyn.rows" 2>"$ZD_TMP/dyn.checker" <<'PY' ||
import sys, numpy as np, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
assert {o.domain: o.version for o in m.opset_import} == {"": 13, "ai.onnx.ml": 2}, m.opset_import
le = [n for n in m.graph.node if n.op_type == "LabelEncoder"]
assert len(le) == 1 and le[0].domain == "ai.onnx.ml", le
w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
ids, vec = np.load(sys.argv[2] + ".ids.npy"), np.load(sys.argv[2] + ".vectors.npy")
assert w["embedding/embeddings"].shape == (len(ids) + 1, 8) and len(ids) > 0, (w["embedding/embeddings"].shape, len(ids))
row = {int(i): vec[k] for k, i in enumerate(ids)}
default = np.full(8, 0.25)  # the job's dynamic.default: an id without a row
def score(feats):
    e, total = np.zeros(8), sum(v for _, v in feats)
    for i, v in feats:
        e += v * row.get(i, default)
    e = e / total if total else e
    dense = np.zeros(13)
    for i, v in feats:
        if 0 <= i < 13:
            dense[i] += v
    h = np.maximum(np.concatenate([e, dense]) @ w["dense/kernel"] + w["dense/bias"], 0)
    z = float(h @ w["dense_1/kernel"] + w["dense_1/bias"])
    return 1 / (1 + np.exp(-z))
out = ["%.9g" % score([(int(a), float(b)) for a, b in (t.split(":") for t in line.split()[1:])])
       for line in open(sys.argv[3])]
open(sys.argv[4], "w").write("\n".join(out) + "\n")
assert 4611686018427387903 not in row
open(sys.argv[4] + ".unseen", "w").write("%.9g %.9g\n" % (score([(4611686018427387903, 1.0)]), score([])))
print(len(ids))
PY
    zd_fail "dyn: onnx.checker, the graph or the reference: $(tail -n 5 "$ZD_TMP/dyn.checker")"
ROWS=$(cat "$ZD_TMP/dyn.rows")
NODE_PATH=$cache/node_modules node "$HERE/onnx_check.js" "$ZD_TMP/dyn.onnx" "$WD/test.svm" - "$ZD_TMP/dyn-pred.txt" sparse \
    >"$ZD_TMP/dyn.check.json" || zd_fail "dyn: onnxruntime-node could not run the model"
zd_json_check "$ZD_TMP/dyn.check.json" 'j["max_abs_diff"] <= 1e-4 and j["accuracy_onnx"] == j["accuracy_zdist"] and abs(j["auc_onnx"] - j["auc_zdist"]) < 1e-4'
read -r UNSEEN EMPTY <"$ZD_TMP/dyn-pred.txt.unseen"
zd_json_check "$ZD_TMP/dyn.check.json" "abs(j['unseen_id'] - $UNSEEN) < 1e-5 and abs(j['empty'] - $EMPTY) < 1e-5 and j['unseen_id'] != j['empty']"
"$PY" - "$ZD_TMP/dyn-st.json" "$ZD_TMP/dyn.check.json" <<'PY' || zd_fail "dyn: ONNX Runtime's metrics are far from the job's: $(cat "$ZD_TMP/dyn.check.json") vs $(head -c 300 "$ZD_TMP/dyn-st.json")"
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
o = json.load(open(sys.argv[2]))
assert abs(m["test_accuracy"] - o["accuracy_onnx"]) < 1e-6 and abs(m["test_auc"] - o["auc_onnx"]) < 1e-4, (m, o)
assert abs(m["test_loss"] - o["log_loss_onnx"]) < 1e-4, (m, o)
PY
zd_ok "parameter_server dynamic table ($ROWS admitted rows on 2 psds): exported as rows + LabelEncoder (ai.onnx.ml 2); check_model(full_check) passes; onnxruntime-node within 1e-4 of NumPy over export-embedding's rows, an id never admitted scoring as no id, and near the job's own evaluation ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics"])' "$ZD_TMP/dyn-st.json")): $(cat "$ZD_TMP/dyn.check.json")"

# ---- multi_worker_mirrored: the workers' state (flat variables, optimizer slots beside them) ----
"$PY" - "$ZD_TMP/variants.json" "$ZD_TMP/mwm.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["name"] = "variants-mwm"
j["strategy"] = {"type": "multi_worker_mirrored"}
j["dataset"]["shard_policy"] = "data"
j.pop("epochs", None)
j["steps"] = 20
j["checkpoint"] = {"every_steps": 20, "keep": 1}
json.dump(j, open(sys.argv[2], "w"))
PY
cluster_job mwm "$ZD_TMP/mwm.json"
[[ -f $JD/ckpt-20/manifest-workers.json ]] || zd_fail "no workers' state checkpoint in $JD/ckpt-20"
cluster_check mwm 28,28,1 "$JOB" --state-dir "$ZD_TMP/state"
zd_ok "multi_worker_mirrored CNN variants: the workers' state checkpoint exported; onnxruntime-node agrees with zdist run --evaluate: $(cat "$ZD_TMP/mwm.check.json")"

# ---- bad input: refused clearly, and never a partial file ----
zd_run_expect 1 "$OUT" "$ZDIST_BIN" export "$ZD_TMP/mlp-save" --onnx "$ZD_TMP/no/such/dir/m.onnx"
grep -q "does not exist" "$OUT.err" || zd_fail "a target in a missing directory: $(cat "$OUT.err")"
[[ ! -e $ZD_TMP/no ]] || zd_fail "a refused export created something"
zd_run_expect 1 "$OUT" "$ZDIST_BIN" export "$ZD_TMP/mlp-save" --onnx "$ZD_TMP/"
grep -q "names a directory" "$OUT.err" || zd_fail "a directory as target: $(cat "$OUT.err")"
zd_ok "a target path cut short (missing directory, a directory) refused: $(head -n 1 "$OUT.err")"

CK=$(ls -d "$ZD_TMP"/mlp-save/ckpt-*)
cp -r "$ZD_TMP/mlp-save" "$ZD_TMP/damaged"
DCK=$ZD_TMP/damaged/$(basename "$CK")
truncate -s 1000 "$DCK/workers-state.bin"
cp "$ZD_TMP/mlp.onnx" "$ZD_TMP/keep.onnx"
zd_run_expect 1 "$OUT" "$ZDIST_BIN" export "$ZD_TMP/damaged" --onnx "$ZD_TMP/keep.onnx"
grep -q "workers-state.bin" "$OUT.err" || zd_fail "a truncated checkpoint file is not named: $(cat "$OUT.err")"
cmp -s "$ZD_TMP/mlp.onnx" "$ZD_TMP/keep.onnx" || zd_fail "a failed export changed the existing target"
! ls -a "$ZD_TMP" | grep -q '^\.keep\.onnx\.tmp' || zd_fail "a failed export left a temporary file"
zd_ok "a truncated checkpoint refused naming the file; the target kept as it was: $(head -n 1 "$OUT.err")"

cp -r "$ZD_TMP/mlp-save" "$ZD_TMP/v2"
"$PY" - "$ZD_TMP/v2/$(basename "$CK")/manifest-workers.json" <<'PY'
import json, sys, zlib
# A manifest as a later format version would write it, sealed as zdist seals them.
m = json.load(open(sys.argv[1]))
m.pop("manifest_crc32")
m["version"] = 2
m["manifest_crc32"] = zlib.crc32(json.dumps(m, separators=(",", ":"), sort_keys=True).encode())
json.dump(m, open(sys.argv[1], "w"))
PY
zd_run_expect 1 "$OUT" "$ZDIST_BIN" export "$ZD_TMP/v2" --onnx "$ZD_TMP/v2.onnx"
grep -q "written by another zdist version" "$OUT.err" || zd_fail "a version 2 checkpoint: $(cat "$OUT.err")"
[[ ! -e $ZD_TMP/v2.onnx ]] || zd_fail "a refused export wrote its target"
zd_ok "a checkpoint of another format version refused: $(head -n 1 "$OUT.err")"

"$PY" - "$EXAMPLES/fmnist-mlp-run.json" "$ZD_TMP/linear.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j.pop("comment", None)
j["model"] = {"name": "linear_regression"}
json.dump(j, open(sys.argv[2], "w"))
PY
zd_run_expect 1 "$OUT" "$ZDIST_BIN" export "$ZD_TMP/mlp-save" --job "$ZD_TMP/linear.json" --onnx "$ZD_TMP/linear.onnx"
grep -q "model 'linear_regression' is not exported" "$OUT.err" || zd_fail "an unsupported model is not named: $(cat "$OUT.err")"
[[ ! -e $ZD_TMP/linear.onnx ]] || zd_fail "a refused export wrote its target"
zd_ok "an unsupported model refused by name: $(head -n 1 "$OUT.err")"

echo "test_onnx_export.sh: $ZD_PASSED passed, 0 failed"
