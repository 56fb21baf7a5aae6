#!/usr/bin/env bash
# zdist run: local training end to end — synthetic jobs, a plugin model, a short Fashion-MNIST job, bad jobs.
source "$(dirname "$0")/lib.sh"

ZDIST_BIN=${ZDIST_BIN:?set ZDIST_BIN to the zdist binary}
PLUGIN_DIR=$(cd "${ZDIST_TEST_PLUGIN_DIR:?set ZDIST_TEST_PLUGIN_DIR to the test plugins build directory}" && pwd)
FMNIST=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
zd_init run
TMP=$ZD_TMP
unset ZDIST_PLUGIN_PATH

failures=0
count=0
fail() {
    echo "FAIL: $*" >&2
    echo "  stdout: $(head -c 2000 "$TMP/out")" >&2
    echo "  stderr: $(head -c 2000 "$TMP/err")" >&2
    failures=$((failures + 1))
}

run() {
    rc=0
    "$ZDIST_BIN" run "$@" >"$TMP/out" 2>"$TMP/err" </dev/null || rc=$?
}

# expect_json PYTHON_EXPR ARGS...: exit 0 and one JSON object on stdout with PYTHON_EXPR (over j) true.
expect_json() {
    local expr=$1
    shift
    count=$((count + 1))
    run --json "$@"
    if [[ $rc -ne 0 ]]; then fail "run --json $* exited $rc, wanted 0"; return; fi
    if [[ $(wc -l <"$TMP/out") -ne 1 ]]; then fail "run --json $* printed more than one line"; return; fi
    if ! python3 -c '
import json, sys
j = json.loads(open(sys.argv[1]).read())
for k in ("job", "steps", "final_loss", "test_accuracy", "examples_per_sec", "wall_seconds"):
    assert k in j, k
ok = eval(sys.argv[2])
if not ok:
    print(j, file=sys.stderr)
sys.exit(0 if ok else 1)
' "$TMP/out" "$expr"; then
        fail "run --json $*: JSON does not satisfy: $expr"
    fi
}

# expect_error RC TEXT ARGS...: exit RC and TEXT in the one-line error.
expect_error() {
    local want_rc=$1 text=$2
    shift 2
    count=$((count + 1))
    run "$@"
    if [[ $rc -ne $want_rc ]]; then fail "run $* exited $rc, wanted $want_rc"; return; fi
    if ! grep -qF -- "$text" "$TMP/err"; then fail "run $*: stderr lacks '$text'"; fi
}

# job NAME JSON: writes $TMP/NAME.json
job() {
    printf '%s\n' "$2" >"$TMP/$1.json"
}

SYN_CLS='"dataset": {"format": "synthetic", "synthetic": {"n": 2048, "test_n": 512, "dim": 12, "classes": 3, "seed": 4}, "global_batch_size": 32}'

job softmax '{"name": "syn-softmax", "strategy": {"type": "one_device"}, "model": {"name": "softmax_regression"},
  "optimizer": {"type": "adam", "learning_rate": 0.01}, '"$SYN_CLS"', "epochs": 2, "seed": 1}'
expect_json 'j["job"] == "syn-softmax" and j["steps"] == 128 and j["test_accuracy"] > 0.9 and j["test_examples"] == 512' "$TMP/softmax.json"
expect_json 'j["steps"] == 10 and j["examples"] == 320' --steps 10 "$TMP/softmax.json"

job mirrored '{"name": "syn-mlp-mirrored", "strategy": {"type": "mirrored", "num_replicas": 3},
  "model": {"name": "mlp", "params": {"hidden": [32, 16]}}, "optimizer": {"type": "momentum", "learning_rate": 0.05, "nesterov": true},
  '"$SYN_CLS"', "steps": 150, "seed": 2}'
expect_json 'j["strategy"] == "mirrored" and j["num_replicas"] == 3 and j["test_accuracy"] > 0.9' "$TMP/mirrored.json"

job central '{"name": "syn-central", "strategy": {"type": "central_storage", "num_replicas": 2},
  "model": {"name": "mlp", "params": {"hidden": [16]}}, "optimizer": {"type": "adagrad", "learning_rate": 0.1},
  '"$SYN_CLS"', "epochs": 1}'
expect_json 'j["strategy"] == "central_storage" and j["test_accuracy"] > 0.8' "$TMP/central.json"

job linreg '{"name": "syn-linreg", "strategy": {"type": "one_device"}, "model": {"name": "linear_regression"},
  "optimizer": {"type": "sgd", "learning_rate": 0.05},
  "dataset": {"format": "synthetic", "synthetic": {"n": 2000, "test_n": 500, "dim": 8, "noise_std": 0.01, "seed": 9}, "global_batch_size": 50},
  "epochs": 5}'
expect_json 'j["test_accuracy"] is None and j["test_loss"] < 0.01' "$TMP/linreg.json"

# Sparse: a libsvm file, path relative to the job file.
python3 - "$TMP/train.svm" <<'PY'
import random, sys
random.seed(3)
with open(sys.argv[1], "w") as f:
    for i in range(1200):
        y = random.random() < 0.5
        feats = sorted(set(random.randrange(1, 200) for _ in range(6)) | {1000 + (7 if y else 8)})
        f.write(("+1" if y else "-1") + "".join(f" {k}:1" for k in feats) + "\n")
PY
job sparse '{"name": "svm-logreg", "strategy": {"type": "mirrored", "num_replicas": 2}, "model": {"name": "sparse_logreg"},
  "optimizer": {"type": "adagrad", "learning_rate": 0.5},
  "dataset": {"format": "libsvm", "dim": 2048, "train": {"path": "train.svm"}, "test": {"path": "train.svm"}, "global_batch_size": 64},
  "epochs": 2}'
expect_json 'j["test_accuracy"] > 0.95 and j["test_auc"] > 0.95' "$TMP/sparse.json"

# A plugin model, found through the job's plugin_path and through ZDIST_PLUGIN_PATH.
PLUGIN_JOB='"strategy": {"type": "mirrored", "num_replicas": 2}, "model": {"name": "plugin_linear"},
  "optimizer": {"type": "sgd", "learning_rate": 0.05},
  "dataset": {"format": "synthetic", "synthetic": {"n": 1024, "test_n": 256, "dim": 4, "noise_std": 0.01, "seed": 2}, "global_batch_size": 32},
  "epochs": 4'
job plugin '{"name": "plugin", "plugin_path": "'"$PLUGIN_DIR"'/good", '"$PLUGIN_JOB"'}'
expect_json 'j["test_loss"] < 0.01' "$TMP/plugin.json"
job plugin_env '{"name": "plugin-env", '"$PLUGIN_JOB"'}'
count=$((count + 1))
rc=0
ZDIST_PLUGIN_PATH="/nonexistent:$PLUGIN_DIR/good" "$ZDIST_BIN" run --json "$TMP/plugin_env.json" >"$TMP/out" 2>"$TMP/err" || rc=$?
[[ $rc -eq 0 ]] || fail "plugin through ZDIST_PLUGIN_PATH exited $rc"
expect_error 2 "unknown model 'plugin_linear'" "$TMP/plugin_env.json"
job plugin_bad '{"name": "plugin-bad", "plugin_path": "'"$PLUGIN_DIR"'/badabi", '"$PLUGIN_JOB"'}'
expect_error 2 "built for step ABI version 999, this zdist has version 1" "$TMP/plugin_bad.json"

# Plain progress lines when stderr is not a terminal.
count=$((count + 1))
run "$TMP/softmax.json"
if [[ $rc -ne 0 ]] || ! grep -q '^step 128/128 loss ' "$TMP/err" || ! grep -q 'test accuracy' "$TMP/out"; then
    fail "plain progress lines / final line"
fi

# Bad jobs: the message names the field and the fix; exit 2.
job unknown '{"name": "x", "strategy": {"type": "one_device"}, "model": {"name": "mlp"}, "optimizer": {"type": "adam"},
  '"$SYN_CLS"', "epochs": 1, "epocs": 2}'
expect_error 2 "epocs: unknown field" "$TMP/unknown.json"
job badtype '{"name": "x", "strategy": {"type": "one_device"}, "model": {"name": "mlp"}, "optimizer": {"type": "adam"},
  "dataset": {"format": "synthetic", "synthetic": {"n": 10, "dim": 2, "classes": 2}, "global_batch_size": "32"}, "epochs": 1}'
expect_error 2 'dataset.global_batch_size: must be an integer in 1..16777216, got "32" (a string)' "$TMP/badtype.json"
job badopt '{"name": "x", "strategy": {"type": "one_device"}, "model": {"name": "mlp"}, "optimizer": {"type": "sgd", "momentum": 0.9},
  '"$SYN_CLS"', "epochs": 1}'
expect_error 2 "optimizer.momentum: unknown field" "$TMP/badopt.json"
job badparams '{"name": "x", "strategy": {"type": "one_device"}, "model": {"name": "mlp", "params": {"hiden": [3]}}, "optimizer": {"type": "adam"},
  '"$SYN_CLS"', "epochs": 1}'
expect_error 2 "model.params: unknown field 'hiden'" "$TMP/badparams.json"
job both '{"name": "x", "strategy": {"type": "one_device"}, "model": {"name": "mlp"}, "optimizer": {"type": "adam"},
  '"$SYN_CLS"', "epochs": 1, "steps": 3}'
expect_error 2 "give exactly one of them" "$TMP/both.json"
job ps '{"name": "x", "strategy": {"type": "parameter_server"}, "model": {"name": "mlp"}, "optimizer": {"type": "adam"},
  '"$SYN_CLS"', "epochs": 1}'
expect_error 2 "needs a cluster" "$TMP/ps.json"
job mwm '{"name": "x", "strategy": {"type": "multi_worker_mirrored"}, "model": {"name": "mlp"}, "optimizer": {"type": "adam"},
  '"$SYN_CLS"', "epochs": 1}'
expect_error 2 "'multi_worker_mirrored' needs a cluster" "$TMP/mwm.json"
job mwmfield '{"name": "x", "strategy": {"type": "mirrored", "collective_timeout_ms": 5000}, "model": {"name": "mlp"},
  "optimizer": {"type": "adam"}, '"$SYN_CLS"', "epochs": 1}'
expect_error 2 "strategy.collective_timeout_ms: only multi_worker_mirrored and tpu have it; remove it" "$TMP/mwmfield.json"
job mwmrange '{"name": "x", "strategy": {"type": "multi_worker_mirrored", "collective_timeout_ms": 5}, "model": {"name": "mlp"},
  "optimizer": {"type": "adam"}, '"$SYN_CLS"', "epochs": 1}'
expect_error 2 "strategy.collective_timeout_ms: must be an integer in 100..86400000, got 5" "$TMP/mwmrange.json"
printf '{"name": "x",\n "strategy": }\n' >"$TMP/syntax.json"
expect_error 2 "line 2" "$TMP/syntax.json"
job nofile '{"name": "x", "strategy": {"type": "one_device"}, "model": {"name": "softmax_regression"}, "optimizer": {"type": "adam"},
  "dataset": {"format": "idx", "train": {"images": "/nonexistent/i.gz", "labels": "/nonexistent/l.gz"}, "global_batch_size": 8}, "epochs": 1}'
expect_error 1 "/nonexistent/i.gz" "$TMP/nofile.json"
expect_error 2 "expected one job file"
expect_error 2 "--steps" --steps 0 "$TMP/softmax.json"

# Fashion-MNIST, short: the shipped job files with a step limit.
if [[ -r $FMNIST/train-images-idx3-ubyte.gz ]]; then
    EX=$(cd "$(dirname "$0")/../../deploy/examples" && pwd)
    expect_json 'j["job"] == "fmnist-softmax" and j["steps"] == 300 and j["test_accuracy"] > 0.75 and j["test_examples"] == 10000' \
        --steps 300 "$EX/fmnist-softmax-run.json"
    expect_json 'j["job"] == "fmnist-mlp-mirrored" and j["steps"] == 100 and j["test_accuracy"] > 0.7' \
        --steps 100 "$EX/fmnist-mlp-mirrored-run.json"
else
    echo "SKIP: Fashion-MNIST not found in $FMNIST" >&2
fi

echo "$((count - failures))/$count passed"
[[ $failures -eq 0 ]]
