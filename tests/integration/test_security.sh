#!/usr/bin/env bash
# Let no one in who doesn't belong: a cluster with keys made by `zdist keygen` (CURVE on every connection)
# trains Fashion-MNIST under parameter_server and multi_worker_mirrored; a key not in the directory, no
# key, and a worker's key cannot submit (a clear message, exit 1, before their deadline); a client key
# cannot write to a psd; a job naming a plugin directory or data outside the workers' --data-root is
# refused naming the field, nothing loaded (a .so whose constructor writes a marker) nor read (a FIFO
# nobody opens); a plugin model named by name comes from the workers' --plugin-dir; the bytes of a known
# tensor cross a recording proxy in plain text without keys and never with them.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init security
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN PSD_DRIVER_BIN WORKER_DRIVER_BIN
PLUGINS=$(cd "${ZDIST_TEST_PLUGIN_DIR:?set ZDIST_TEST_PLUGIN_DIR to the test plugins build directory}" && pwd)
[[ -r $PLUGINS/marker/marker.so && -r $PLUGINS/good/plugin_linear.so ]] || zd_fail "test plugins not built in $PLUGINS"
FMNIST=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$ZD_TMP/out
unset ZDIST_KEYS_DIR ZDIST_PLUGIN_PATH ZDIST_PLUGIN_DIRS ZDIST_DATA_ROOTS TF_CONFIG
export ZDIST_TEST_MARKER=$ZD_TMP/marker-loaded # the marker .so writes it if anything loads it

# ---- keys: one per task, one for the person who submits; a stranger with the cluster's public keys ----
KEYS=$ZD_TMP/keys
ROGUE=$ZD_TMP/rogue
for name in chief-0 worker-0 worker-1 ps-0 alice; do
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" keygen "$name" --dir "$KEYS"
done
mkdir -p "$ROGUE"
cp "$KEYS"/*.key "$ROGUE"/
zd_run_expect 0 "$OUT" "$ZDIST_BIN" keygen mallory --dir "$ROGUE"
[[ $(stat -c %a "$KEYS/alice.key_secret") == 600 ]] || zd_fail "alice.key_secret is not mode 0600"
zd_ok "keys made by zdist keygen: 4 tasks and alice; mallory's only in a directory of her own"

# ---- places: data roots, a plugin directory, and what lies outside them ----
DATA=$ZD_TMP/data
OUTSIDE=$ZD_TMP/outside
EVIL=$ZD_TMP/evil-plugins
mkdir -p "$DATA" "$OUTSIDE" "$EVIL"
cp "$PLUGINS/marker/marker.so" "$EVIL/"
mkfifo "$OUTSIDE/fifo"         # opening it to read would block: a worker that tried would hang
ln -s "$OUTSIDE/fifo" "$DATA/link" # inside the root, pointing out of it
python3 - "$DATA/small.csv" <<'PY'
import random, sys
r = random.Random(3)
with open(sys.argv[1], "w") as f:
    for i in range(256):
        x = [r.uniform(-1, 1) for _ in range(4)]
        f.write(",".join("%.4f" % v for v in x) + ",%d\n" % (1 if x[0] + x[1] > 0 else 0))
PY
ROOTS=(--data-root "$DATA")
[[ -d $FMNIST ]] && ROOTS+=(--data-root "$FMNIST")

# no reader ever opened the FIFO: opening it to write without blocking fails with ENXIO
fifo_unread() {
    python3 - "$OUTSIDE/fifo" <<'PY' || zd_fail "somebody holds $OUTSIDE/fifo open for reading"
import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
except OSError as e:
    sys.exit(0 if e.errno == errno.ENXIO else 1)
os.close(fd)
sys.exit(1)
PY
}
no_marker() { [[ ! -e $ZDIST_TEST_MARKER ]] || zd_fail "marker.so was loaded: $1"; }

# ---- the cluster, CURVE everywhere ----
coord_cluster 1 2
zd_start ps0 "$ZDIST_PSD_BIN" --cluster "$CLUSTER" --task ps:0 --keys "$KEYS"
for i in 0 1; do
    zd_start "worker$i" "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task "worker:$i" --keys "$KEYS" \
        --plugin-dir "$PLUGINS/good" "${ROOTS[@]}"
done
zd_start chief "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$ZD_TMP/state" --keys "$KEYS"
zd_wait_log ps0 "serving at" 60
for i in 0 1; do zd_wait_log "worker$i" "serving at" 60; done
zd_wait_log chief "chief serving at" 60
grep -q "plugins from: $PLUGINS/good" "$ZD_TMP/worker0.log" || zd_fail "worker0 does not log its plugin directory"
grep -q "dataset files only under: " "$ZD_TMP/worker0.log" || zd_fail "worker0 does not log its data roots"
ZD=("$ZDIST_BIN" --keys "$KEYS" --key alice)
zd_ok "psd, 2 workers and the chief serve with --keys"

# ---- whole jobs under CURVE ----
fmnist_job() { # FILE STRATEGY
    python3 - "$1" "$2" "$FMNIST" <<'PY'
import json, sys
d = sys.argv[3]
json.dump({"name": "fmnist-" + sys.argv[2], "strategy": {"type": sys.argv[2]},
           "model": {"name": "mlp", "params": {"hidden": [32]}},
           "optimizer": {"type": "adam", "learning_rate": 0.003},
           "dataset": {"format": "idx",
                       "train": {"images": d + "/train-images-idx3-ubyte.gz", "labels": d + "/train-labels-idx1-ubyte.gz"},
                       "test": {"images": d + "/t10k-images-idx3-ubyte.gz", "labels": d + "/t10k-labels-idx1-ubyte.gz"},
                       "global_batch_size": 64, "shuffle_seed": 42, "shard_policy": "data"},
           "steps": 60, "steps_per_execution": 4, "evaluation": {"at_end": True}, "seed": 1},
          open(sys.argv[1], "w"))
PY
}
if [[ -r $FMNIST/train-images-idx3-ubyte.gz ]]; then
    for strategy in parameter_server multi_worker_mirrored; do
        fmnist_job "$ZD_TMP/$strategy.json" "$strategy"
        zd_run_expect 0 "$OUT" "${ZD[@]}" submit "$ZD_TMP/$strategy.json" --cluster "$CLUSTER" --json
        zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == j["steps"] == 60 and j["metrics"]["test_accuracy"] > 0.3'
        if [[ $strategy == parameter_server ]]; then
            # The chief drops the ended job's variables over CURVE, with its own key.
            PSJOB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
            zd_wait_log chief "job $PSJOB: dropped its variables from ps 0: [1-9][0-9]* shards" 30
            grep -qE "dropped job $PSJOB: [1-9][0-9]* shards" "$ZD_TMP/ps0.log" || zd_fail "ps0 did not drop job $PSJOB"
        fi
        zd_ok "Fashion-MNIST under $strategy with CURVE: $(python3 -c 'import json,sys; print("test accuracy %.4f" % json.load(open(sys.argv[1]))["metrics"]["test_accuracy"])' "$OUT")"
    done
else
    echo "note: no Fashion-MNIST under $FMNIST (package dataset-fashion-mnist): its jobs skipped"
fi
# A plugin model by name, from the workers' --plugin-dir.
cat >"$ZD_TMP/plugin.json" <<'JSON'
{"name": "plugin-by-name", "strategy": {"type": "multi_worker_mirrored"}, "model": {"name": "plugin_linear"},
 "optimizer": {"type": "sgd", "learning_rate": 0.05},
 "dataset": {"format": "synthetic", "synthetic": {"n": 1024, "test_n": 256, "dim": 4, "noise_std": 0.01, "seed": 2},
             "global_batch_size": 32}, "steps": 40}
JSON
zd_run_expect 0 "$OUT" "${ZD[@]}" submit "$ZD_TMP/plugin.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == 40'
zd_ok "a plugin model named by name comes from the workers' --plugin-dir"

# ---- who may submit ----
coord_softmax_job "$ZD_TMP/syn.json" 4
# Each within its own deadline: `timeout` only guards the test (124 would fail it).
zd_run_expect 1 "$OUT" timeout 120 "$ZDIST_BIN" --keys "$ROGUE" --key mallory submit "$ZD_TMP/syn.json" --cluster "$CLUSTER"
grep -q "refused the key 'mallory'" "$OUT.err" && grep -q "mallory.key is not in its key directory" "$OUT.err" ||
    zd_fail "mallory: $(cat "$OUT.err")"
zd_ok "a key not in the directory cannot submit: $(head -c 160 "$OUT.err")..."
zd_run_expect 1 "$OUT" timeout 120 "$ZDIST_BIN" submit "$ZD_TMP/syn.json" --cluster "$CLUSTER"
grep -q "it speaks CURVE and this process has no keys; give --keys DIR" "$OUT.err" || zd_fail "no key: $(cat "$OUT.err")"
zd_ok "no key cannot submit, told to give --keys"
zd_run_expect 1 "$OUT" timeout 120 "$ZDIST_BIN" --keys "$KEYS" --key worker-0 submit "$ZD_TMP/syn.json" --cluster "$CLUSTER"
grep -q "key 'worker-0'" "$OUT.err" || zd_fail "worker key: $(cat "$OUT.err")"
grep -q "worker-0" "$ZD_TMP/chief.log" || zd_fail "the chief did not log the refused worker key"
zd_ok "a worker's key cannot submit: $(cat "$OUT.err")"
zd_run_expect 0 "$OUT" "${ZD[@]}" status --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["name"] == "plugin-by-name"' # none of the refused submissions made a job

# ---- who may write to a psd ----
PS0=${ZD_PS_ADDRS[0]}
zd_run_expect 0 "$OUT.w" env ZDIST_KEYS_DIR="$KEYS" PSD_DRIVER_KEY=worker-0 "$PSD_DRIVER_BIN" auth "$PS0" allowed
zd_run_expect 0 "$OUT" env ZDIST_KEYS_DIR="$KEYS" PSD_DRIVER_KEY=alice "$PSD_DRIVER_BIN" auth "$PS0" denied
grep -q "PERMISSION_DENIED\|may not" "$OUT" || zd_fail "client key on the psd: $(cat "$OUT")"
zd_ok "a client key reads a psd but cannot create, push or assign: $(grep 'create refused' "$OUT")"
grep -q "drop_job refused: .*PERMISSION_DENIED" "$OUT.w" || zd_fail "worker key drop_job: $(cat "$OUT.w")"
zd_ok "only the chief's key drops a job's variables (the chief did after the parameter_server job); a worker's: $(grep 'drop_job refused' "$OUT.w" | head -c 160)"

# ---- a job names code and data, never places ----
sed 's/"name": "plugin-by-name"/"name": "evil-plugin", "plugin_path": "'"${EVIL//\//\\/}"'"/' "$ZD_TMP/plugin.json" >"$ZD_TMP/evil.json"
zd_run_expect 1 "$OUT" "${ZD[@]}" submit "$ZD_TMP/evil.json" --cluster "$CLUSTER"
grep -q "plugin_path: '$EVIL'" "$OUT.err" && grep -q "remove plugin_path" "$OUT.err" || zd_fail "plugin_path: $(cat "$OUT.err")"
no_marker "the coordinator took a job with plugin_path"
zd_ok "a job naming a plugin directory is refused at submit, naming plugin_path; nothing loaded"
csv_job() { # FILE NAME PATH
    cat >"$1" <<JSON
{"name": "$2", "strategy": {"type": "multi_worker_mirrored"}, "model": {"name": "softmax_regression"},
 "optimizer": {"type": "sgd", "learning_rate": 0.1},
 "dataset": {"format": "csv", "train": {"path": "$3"}, "label_column": -1, "global_batch_size": 32, "shard_policy": "data"}, "steps": 4}
JSON
}
csv_job "$ZD_TMP/outside.json" outside "$OUTSIDE/fifo"
zd_run_expect 1 "$OUT" timeout 300 "${ZD[@]}" submit "$ZD_TMP/outside.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "failed" and "dataset.train.path: '"'$OUTSIDE/fifo'"' is outside the data roots (--data-root " in j["error"]'
fifo_unread
zd_ok "a job whose dataset lies outside the data roots fails naming the field; the file is never opened"
csv_job "$ZD_TMP/inside.json" inside "$DATA/small.csv"
zd_run_expect 0 "$OUT" "${ZD[@]}" submit "$ZD_TMP/inside.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done"'
zd_ok "the same job on a file under the root runs"

# The workers themselves, told by a chief that skips the coordinator's check (plain text here: the
# confinement does not depend on keys).
WP="127.0.0.1:$(zd_free_port)"
zd_start plainworker "$ZDIST_WORKER_BIN" --bind "tcp://$WP" --plugin-dir "$PLUGINS/good" "${ROOTS[@]}"
zd_wait_log plainworker "serving at" 60
start_expect() { # WANT_RC JOBFILE PATTERN
    zd_run_expect "$1" "$OUT" "$WORKER_DRIVER_BIN" start "$WP" "$2"
    grep -qF -- "$3" "$OUT" || zd_fail "START_JOB of $2: wanted '$3', got: $(cat "$OUT")"
}
start_expect 3 "$ZD_TMP/evil.json" "PERMISSION_DENIED: plugin_path: '$EVIL'"
no_marker "a worker took a job with plugin_path"
start_expect 3 "$ZD_TMP/outside.json" "PERMISSION_DENIED: dataset.train.path: '$OUTSIDE/fifo' is outside the data roots (--data-root $(realpath "$DATA")"
csv_job "$ZD_TMP/dotdot.json" dotdot "$DATA/../outside/fifo"
start_expect 3 "$ZD_TMP/dotdot.json" "dataset.train.path: '$DATA/../outside/fifo' contains '..'"
csv_job "$ZD_TMP/link.json" link "$DATA/link"
start_expect 3 "$ZD_TMP/link.json" "(a symbolic link), outside the data roots"
fifo_unread
no_marker "after the refused starts"
start_expect 0 "$ZD_TMP/inside.json" "OK"
zd_ok "a worker refuses plugin_path, data elsewhere, '..' and a link out of the root, naming the field"

# ---- the wire: a known tensor's bytes through a recording proxy ----
PATTERN="zdist-known-tensor-bytes:0123456789abcdef"
tap() { # NAME TARGET: starts a proxy, sets TAP to its host:port
    local port
    port=$(zd_free_port)
    zd_start "$1" python3 "$HERE/tap_proxy.py" "$port" "$2" "$ZD_TMP/$1.bin"
    zd_wait_log "$1" listening 30
    TAP=127.0.0.1:$port
}
seen() { python3 -c 'import sys; sys.exit(0 if sys.argv[2].encode() in open(sys.argv[1], "rb").read() else 1)' "$@"; }
PLAIN="127.0.0.1:$(zd_free_port)"
zd_start plainps "$ZDIST_PSD_BIN" --bind "tcp://$PLAIN"
zd_wait_psd plainps "$PLAIN" 60
tap tap_plain "$PLAIN"
zd_run_expect 0 "$OUT" env PSD_DRIVER_PATTERN="$PATTERN" "$PSD_DRIVER_BIN" pattern "$TAP"
seen "$ZD_TMP/tap_plain.bin" "$PATTERN" || zd_fail "the proxy did not record the pattern in plain text: the check is blind"
zd_ok "without keys the tensor's bytes cross the proxy in plain text ($(stat -c %s "$ZD_TMP/tap_plain.bin") bytes recorded)"
tap tap_curve "$PS0"
zd_run_expect 0 "$OUT" env ZDIST_KEYS_DIR="$KEYS" PSD_DRIVER_KEY=worker-0 PSD_DRIVER_PATTERN="$PATTERN" \
    "$PSD_DRIVER_BIN" pattern "$TAP"
[[ $(stat -c %s "$ZD_TMP/tap_curve.bin") -gt 8192 ]] || zd_fail "the CURVE proxy recorded almost nothing"
seen "$ZD_TMP/tap_curve.bin" "${PATTERN:0:12}" && zd_fail "the tensor's bytes crossed the wire in plain text under CURVE"
zd_ok "with keys the same tensor assigned and read back through the proxy never shows ($(stat -c %s "$ZD_TMP/tap_curve.bin") bytes recorded)"

no_marker "at the end"
echo "PASS: $ZD_PASSED checks"
