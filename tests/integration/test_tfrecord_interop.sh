#!/usr/bin/env bash
# TFRecord files of tf.train.Examples from a writer this project did not
# write (npm's @roboflow/tfrecords, on Node.js), read through libzdist: every
# row the same as the writer's own account, plain and GZIP, and damage refused
# naming the file and the offset. Skips (77), saying why, without Node.js or
# npm's registry.
source "$(dirname "$0")/lib.sh"
zd_init tfrecord

: "${TFRECORD_DRIVER_BIN:?}"
cache=${ZDIST_NPM_CACHE:-/var/cache/zdist/npm}
# Node.js is a test-only tool: Debian's, installed here when missing.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >"$ZD_TMP/apt.log" 2>&1 || true
    fi
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "SKIP: Node.js and npm are needed (apt-get install nodejs npm)"
    exit 77
fi
if [[ ! -d $cache/node_modules/@roboflow/tfrecords ]]; then
    mkdir -p "$cache"
    if ! (cd "$cache" && timeout 300 npm install --no-audit --no-fund --prefix "$cache" @roboflow/tfrecords@1.0.4 \
        >"$ZD_TMP/npm.log" 2>&1); then
        echo "SKIP: npm could not install @roboflow/tfrecords: $(tail -n 3 "$ZD_TMP/npm.log")"
        exit 77
    fi
fi

data=$ZD_TMP/data
mkdir -p "$data"
NODE_PATH=$cache/node_modules node "$(dirname "$0")/tfrecord_writer.js" "$data" 203 >"$ZD_TMP/want.txt"
[[ $(wc -l <"$ZD_TMP/want.txt") -eq 203 ]] || zd_fail "the writer did not describe 203 rows"

spec=(label:fixed:int64 I1:fixed:float32 C1:fixed:int64 dense:fixed:float32::3 tags:var:int64 I2:fixed:float32:-1)
"$TFRECORD_DRIVER_BIN" "${spec[@]}" -- "$data/part-0.tfrecord" "$data/part-1.tfrecord" >"$ZD_TMP/got.txt"
diff "$ZD_TMP/want.txt" "$ZD_TMP/got.txt" >"$ZD_TMP/diff.txt" || {
    head -n 20 "$ZD_TMP/diff.txt"
    zd_fail "rows read from the plain files differ from what the writer wrote"
}
zd_ok "203 rows in 2 plain files, every value the writer's (negative and 53-bit ids, defaults, empty var rows)"

"$TFRECORD_DRIVER_BIN" --gzip --batch 64 "${spec[@]}" -- "$data/all.tfrecord.gz" >"$ZD_TMP/got_gz.txt"
diff -q "$ZD_TMP/want.txt" "$ZD_TMP/got_gz.txt" >/dev/null || zd_fail "rows read from the GZIP file differ"
zd_ok "the same rows from one GZIP file (node's zlib)"

# Damage: one byte of the second record's data. The first record ends at
# 16 + its length, which the driver cannot know, so the offset is read from
# the file: the second record starts at 8 + 4 + len0 + 4.
len0=$(od -An -tu4 -N4 "$data/part-0.tfrecord" | tr -d ' ')
second=$((16 + len0))
cp "$data/part-0.tfrecord" "$data/bad.tfrecord"
printf '\x00' | dd of="$data/bad.tfrecord" bs=1 seek=$((second + 12 + 3)) conv=notrunc status=none
if "$TFRECORD_DRIVER_BIN" "${spec[@]}" -- "$data/bad.tfrecord" >"$ZD_TMP/bad.txt" 2>"$ZD_TMP/bad.err"; then
    zd_fail "a damaged record was read without an error"
fi
grep -qF "'$data/bad.tfrecord': corrupted record at $second" "$ZD_TMP/bad.err" ||
    zd_fail "the refusal does not name the file and offset $second: $(cat "$ZD_TMP/bad.err")"
[[ $(wc -l <"$ZD_TMP/bad.txt") -eq 1 ]] || zd_fail "the record before the damage was not delivered"
zd_ok "a damaged record refused: $(cat "$ZD_TMP/bad.err")"

# A spec asking for a feature every record lacks, without a default.
if "$TFRECORD_DRIVER_BIN" label:fixed:int64 clicks:fixed:int64 -- "$data/part-0.tfrecord" >/dev/null 2>"$ZD_TMP/miss.err"; then
    zd_fail "a missing required feature was not refused"
fi
grep -qF "Feature: clicks (data type: int64) is required but could not be found." "$ZD_TMP/miss.err" ||
    zd_fail "unexpected refusal: $(cat "$ZD_TMP/miss.err")"
zd_ok "a missing required feature refused with TensorFlow's text"

# The same files through a job file's contract ("format": "tfrecord"), trained and evaluated by zdist run:
# the float32 features (I1, dense, I2 with its default) are the mlp's input, C1 and tags columns.
if [[ -n ${ZDIST_BIN:-} ]]; then
    for comp in none gzip; do
        python3 - "$ZD_TMP/job_$comp.json" "$data" "$comp" <<'PY'
import json, sys
out, d, comp = sys.argv[1:]
files = d + ("/all.tfrecord.gz" if comp == "gzip" else "/part-*.tfrecord")
feats = {"label": {"kind": "fixed", "dtype": "int64", "shape": []},
         "I1": {"kind": "fixed", "dtype": "float32", "shape": []},
         "C1": {"kind": "fixed", "dtype": "int64", "shape": []},
         "dense": {"kind": "fixed", "dtype": "float32", "shape": [3]},
         "tags": {"kind": "var", "dtype": "int64"},
         "I2": {"kind": "fixed", "dtype": "float32", "shape": [], "default": -1}}
json.dump({"name": "npm-" + comp, "strategy": {"type": "one_device"},
           "model": {"name": "sequential", "input_shape": [5], "layers": [{"dense": {"units": 1}}],
                     "loss": "binary_crossentropy"},
           "optimizer": {"type": "sgd", "learning_rate": 0.01},
           "dataset": {"format": "tfrecord", "compression": comp, "train": {"files": files}, "test": {"files": files},
                       "features": feats, "label": "label", "global_batch_size": 32},
           "epochs": 2, "seed": 1}, open(out, "w"))
PY
        "$ZDIST_BIN" run "$ZD_TMP/job_$comp.json" --json >"$ZD_TMP/run_$comp.json" 2>"$ZD_TMP/run_$comp.err" ||
            zd_fail "zdist run over the npm-written files ($comp): $(cat "$ZD_TMP/run_$comp.err")"
        python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["examples"] == 406 and j["test_examples"] == 203 and 0 <= j["test_auc"] <= 1 and j["test_loss"] > 0 else 1)' \
            "$ZD_TMP/run_$comp.json" || zd_fail "zdist run ($comp): $(cat "$ZD_TMP/run_$comp.json")"
    done
    zd_ok "the npm-written files (plain, and GZIP) through a tfrecord job file: zdist run trains 2 epochs of 203 and evaluates 203"
fi

echo "test_tfrecord_interop.sh: $ZD_PASSED passed, 0 failed"
