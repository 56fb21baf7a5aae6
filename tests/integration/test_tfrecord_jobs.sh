#!/usr/bin/env bash
# TFRecord jobs end to end (issue 30): `zdist gen criteo` files read through the job file's
# contract ("format": "tfrecord", globs, features, label) by `zdist run` and by parameter_server
# over 2 workers and 2 ps, sharded by FILE and by DATA; every example read exactly once per
# epoch (counted by origin: file and record); the exact test AUC and log loss reported; GZIP
# files; a bad CRC refused naming the file and the offset; bad feature specs refused naming the
# field; a missing feature named with its record; a glob reaching outside --data-root refused.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init tfrecord_jobs
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
DATA=$ZD_TMP/data
mkdir -p "$DATA"

zd_run_expect 0 "$OUT" "$ZDIST_BIN" gen criteo --rows 12000 --files 4 --seed 5 --out "$DATA/plain" \
    --max-cardinality 1000
zd_run_expect 0 "$OUT" "$ZDIST_BIN" gen criteo --rows 12000 --files 4 --seed 5 --out "$DATA/gz" \
    --max-cardinality 1000 --gzip

# job FILE STRATEGY DIR [COMPRESSION [EXTRA_DATASET_JSON [EXTRA_JOB_JSON]]]: an mlp over I1..I13 with a
# sigmoid output (binary cross-entropy), every Criteo feature in the spec (C1..C26 as columns).
job() {
    python3 - "$@" <<'PY'
import json, sys
out, strategy, d = sys.argv[1:4]
comp = sys.argv[4] if len(sys.argv) > 4 else "none"
extra_ds = json.loads(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else {}
extra = json.loads(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[6] else {}
feats = {"label": {"kind": "fixed", "dtype": "int64", "shape": []}}
for i in range(1, 14):
    feats["I%d" % i] = {"kind": "fixed", "dtype": "float32", "shape": [], "default": 0.0}
for i in range(1, 27):
    feats["C%d" % i] = {"kind": "fixed", "dtype": "int64", "shape": []}
ext = ".tfrecord" + (".gz" if comp == "gzip" else "")
j = {"name": "criteo-mlp", "strategy": {"type": strategy},
     "model": {"name": "sequential", "input_shape": [13],
               "layers": [{"dense": {"units": 32, "activation": "relu"}}, {"dense": {"units": 1, "activation": "sigmoid"}}],
               "loss": "binary_crossentropy"},
     "optimizer": {"type": "adam", "learning_rate": 0.003},
     "dataset": {"format": "tfrecord", "compression": comp,
                 "train": {"files": d + "/train/part-*"}, "test": {"files": d + "/test/*"},
                 "features": feats, "label": "label", "global_batch_size": 128, "shuffle_seed": 3},
     "epochs": 2, "seed": 1}
j["dataset"].update(extra_ds)
j.update(extra)
json.dump(j, open(out, "w"))
PY
}

# ---- zdist run: plain and GZIP, the same examples: the same AUC ----
job "$ZD_TMP/run.json" one_device "$DATA/plain"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/run.json" --json
zd_json_check "$OUT" 'j["test_auc"] > 0.5 and 0 < j["test_loss"] < 1 and j["test_examples"] == 1200 and j["examples"] == 2 * 10800'
cp "$OUT" "$ZD_TMP/run_plain.json"
job "$ZD_TMP/run_gz.json" one_device "$DATA/gz" gzip
zd_run_expect 0 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/run_gz.json" --json
python3 - "$ZD_TMP/run_plain.json" "$OUT" <<'PY' || zd_fail "GZIP files gave other numbers than the plain ones"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if a["test_auc"] == b["test_auc"] and a["test_loss"] == b["test_loss"] else 1)
PY
zd_ok "zdist run over 4 plain and 4 GZIP files: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("test AUC %.4f, log loss %.4f over %d examples, the same from both" % (j["test_auc"], j["test_loss"], j["test_examples"]))' "$OUT")"

# ---- refusals: a bad CRC (file and offset), bad specs (the field), a missing feature (feature and record) ----
mkdir -p "$DATA/bad/train" "$DATA/bad/test"
cp "$DATA/plain/test/part-00000.tfrecord" "$DATA/bad/test/"
cp "$DATA/plain/train/part-00000.tfrecord" "$DATA/bad/train/"
cp "$DATA/plain/train/part-00001.tfrecord" "$DATA/bad/train/"
len0=$(od -An -tu8 -N8 "$DATA/bad/train/part-00001.tfrecord" | tr -d ' ')
second=$((16 + len0))
printf '\xff' | dd of="$DATA/bad/train/part-00001.tfrecord" bs=1 seek=$((second + 12 + 5)) conv=notrunc status=none
job "$ZD_TMP/badcrc.json" one_device "$DATA/bad"
zd_run_expect 1 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/badcrc.json"
grep -qF "'$DATA/bad/train/part-00001.tfrecord': corrupted record at $second" "$OUT.err" ||
    zd_fail "bad CRC: $(cat "$OUT.err")"
zd_ok "a damaged record refused: $(grep -o "'$DATA/bad/train/part-00001.tfrecord': corrupted record at [0-9]*" "$OUT.err")"

job "$ZD_TMP/bad1.json" one_device "$DATA/plain" none '{"features": {"label": {"kind": "fixed", "dtype": "int64", "shape": []}, "I1": {"kind": "fixed", "dtype": "int32", "shape": []}}}'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/bad1.json"
grep -qF 'dataset.features.I1.dtype: must be "float32" or "int64"' "$OUT.err" || zd_fail "bad dtype: $(cat "$OUT.err")"
job "$ZD_TMP/bad2.json" one_device "$DATA/plain" none '{"features": {"label": {"kind": "fixed", "dtype": "int64", "shape": []}, "I1": {"kind": "fixed", "dtype": "float32"}}}'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/bad2.json"
grep -qF 'dataset.features.I1.shape: missing' "$OUT.err" || zd_fail "no shape: $(cat "$OUT.err")"
job "$ZD_TMP/bad3.json" one_device "$DATA/plain" none '{"features": {"label": {"kind": "var", "dtype": "int64"}}}'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/bad3.json"
grep -qF 'dataset.features.label: the label must be' "$OUT.err" || zd_fail "var label: $(cat "$OUT.err")"
job "$ZD_TMP/bad4.json" one_device "$DATA/plain" none '{"compression": "zip"}'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/bad4.json"
grep -qF 'dataset.compression: use "gzip" or "none"' "$OUT.err" || zd_fail "compression: $(cat "$OUT.err")"
job "$ZD_TMP/bad5.json" one_device "$DATA/plain" none '{"train": {"files": "'"$DATA"'/nothing/*.tfrecord"}}'
zd_run_expect 1 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/bad5.json"
grep -qF "dataset.train.files: '$DATA/nothing/*.tfrecord' matches no file" "$OUT.err" || zd_fail "no match: $(cat "$OUT.err")"
job "$ZD_TMP/bad6.json" one_device "$DATA/plain" none '{"features": {"label": {"kind": "fixed", "dtype": "int64", "shape": []}, "I1": {"kind": "fixed", "dtype": "float32", "shape": []}, "clicks": {"kind": "fixed", "dtype": "float32", "shape": []}}}' '{"model": {"name": "sequential", "input_shape": [2], "layers": [{"dense": {"units": 1}}], "loss": "binary_crossentropy"}}'
zd_run_expect 1 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/bad6.json"
grep -qF "'$DATA/plain/train/part-00000.tfrecord': record 0 (offset 0): Name: <unknown>, Feature: clicks (data type: float) is required but could not be found." "$OUT.err" ||
    zd_fail "missing feature: $(cat "$OUT.err")"
zd_ok "bad specs refused naming the field; a missing feature without default named with its file and record"

# ---- parameter_server, 2 workers, 2 ps, workers confined to --data-root ----
coord_cluster 2 2
coord_start_ps 0
coord_start_ps 1
for i in 0 1; do
    zd_start "worker$i" "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task "worker:$i" --data-root "$DATA"
done
HC=$(zd_free_port)
COORD_CHIEF_ARGS="--http 127.0.0.1:$HC" coord_start_chief
zd_wait_psd ps0 "${ZD_PS_ADDRS[0]}" 60
zd_wait_psd ps1 "${ZD_PS_ADDRS[1]}" 60
zd_wait_log worker0 "serving at" 60
zd_wait_log worker1 "serving at" 60
zd_wait_log chief "chief serving at" 60

# The examples of the train split: each file's record count, from the files' framing.
python3 - "$DATA/plain/train" >"$ZD_TMP/want.txt" <<'PY'
import glob, os, struct, sys
M = (1 << 64) - 1
def mix(x):
    x = (x + 0x9e3779b97f4a7c15) & M
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M
    return x ^ (x >> 31)
n = fp = 0
for k, path in enumerate(sorted(glob.glob(os.path.join(sys.argv[1], "part-*")))):
    data = open(path, "rb").read()
    at = r = 0
    while at < len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        at += 16 + length
        fp = (fp + mix((k << 40) | r)) & M
        r += 1
    n += r
print(n, "%016x" % fp)
PY

# epoch_once POLICY: both workers' logs say what their epoch 0 read, and together it is the train split,
# each example once (count and the fingerprint of the examples' origins).
epoch_once() {
    python3 - "$ZD_TMP/want.txt" "criteo-ps-$1" "$ZD_TMP/worker0.log" "$ZD_TMP/worker1.log" >"$ZD_TMP/once.txt" <<'PY'
import re, sys
want = open(sys.argv[1]).read().split()
pat = re.compile(r"job '%s(?:@\w+)?': input epoch 0 read (\d+) examples \(fingerprint ([0-9a-f]+)\)" % re.escape(sys.argv[2]))
got = [m.groups() for p in sys.argv[3:] for m in pat.finditer(open(p).read())]
n = sum(int(a) for a, _ in got)
fp = sum(int(b, 16) for _, b in got) % (1 << 64)
print("epoch 0: %d reads over %d worker(s), %d examples in the split" % (n, len(got), int(want[0])))
sys.exit(0 if len(got) == 2 and n == int(want[0]) and fp == int(want[1], 16) else 1)
PY
}

# ps_job POLICY: an epoch's worth of reads counted over both workers' logs, exactly the train split.
ps_job() {
    local policy=$1 rows
    job "$ZD_TMP/ps_$policy.json" parameter_server "$DATA/plain" none "{\"auto_shard_policy\": \"$policy\"}" \
        '{"epochs": 3, "steps_per_execution": 4, "name": "criteo-ps-'"$policy"'"}'
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/ps_$policy.json" --cluster "$CLUSTER" --json
    zd_json_check "$OUT" 'j["state"] == "done" and j["metrics"]["test_auc"] > 0.5 and 0 < j["metrics"]["test_loss"] < 1'
    local job_id
    job_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
    zd_run_expect 0 "$ZD_TMP/st.json" "$ZDIST_BIN" status "$job_id" --cluster "$CLUSTER" --json
    zd_json_check "$ZD_TMP/st.json" 'j["metrics"]["test_auc"] > 0.5 and "test_loss" in j["metrics"]'
    python3 - "$ZD_TMP/state/jobs/$job_id/metrics.jsonl" <<'PY' || zd_fail "metrics.jsonl has no evaluation line with test_auc"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if any(r.get("test_auc") and r["test_auc"] > 0.5 and r.get("test_examples") == 1200 for r in rows) else 1)
PY
    # the workers' lines may reach their logs after the job's end: waited for, with a deadline
    zd_wait_until 60 "$policy: the workers' epoch 0 reading every example exactly once" epoch_once "$policy"
    grep -qE "job 'criteo-ps-$policy@[a-z0-9]+' started: .*input pipeline 1 of 2 sharded by $policy" "$ZD_TMP/worker1.log" ||
        zd_fail "$policy: worker 1 did not shard by $policy"
    zd_ok "parameter_server $policy over 2 workers: $(cat "$ZD_TMP/once.txt"), each once; $(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print("test AUC %.4f, test loss %.4f" % (m["test_auc"], m["test_loss"]))' "$OUT")"
}
ps_job FILE
ps_job DATA
# The coordinator's /metrics and the dashboard's /api/status carry them too.
curl -sf "http://127.0.0.1:$HC/metrics" >"$ZD_TMP/metrics.txt" || zd_fail "GET /metrics"
grep -qE '^zdist_coordinator_job_test_auc\{job_id="[^"]+"[^}]*\} 0\.[5-9]' "$ZD_TMP/metrics.txt" ||
    zd_fail "/metrics has no test AUC: $(grep test_ "$ZD_TMP/metrics.txt")"
grep -qE '^zdist_coordinator_job_test_loss\{job_id="[^"]+"[^}]*\} 0\.' "$ZD_TMP/metrics.txt" || zd_fail "/metrics has no test loss"
curl -sf "http://127.0.0.1:$HC/api/status" >"$ZD_TMP/api.json" || zd_fail "GET /api/status"
zd_json_check "$ZD_TMP/api.json" 'sum(1 for x in j["jobs"] if x["detail"]["metrics"].get("test_auc", 0) > 0.5) == 2'
zd_ok "/metrics and /api/status (the dashboard's) carry both jobs' test AUC and test loss"

# A glob whose match is a symbolic link out of --data-root is refused at the worker, naming the field.
mkdir -p "$ZD_TMP/outside" "$DATA/escape/train" "$DATA/escape/test"
cp "$DATA/plain/train/part-00000.tfrecord" "$ZD_TMP/outside/x.tfrecord"
cp "$DATA/plain/train/part-00000.tfrecord" "$DATA/escape/train/part-00000.tfrecord"
ln -s "$ZD_TMP/outside/x.tfrecord" "$DATA/escape/train/part-00001.tfrecord"
cp "$DATA/plain/test/part-00000.tfrecord" "$DATA/escape/test/"
job "$ZD_TMP/escape.json" parameter_server "$DATA/escape" none '' '{"epochs": 1, "name": "escape"}'
"$ZDIST_BIN" submit "$ZD_TMP/escape.json" --cluster "$CLUSTER" --json >"$OUT" 2>"$OUT.err" &&
    zd_fail "a job reading out of --data-root was not refused: $(cat "$OUT")"
grep -qF "dataset.train.files: '$DATA/escape/train/part-00001.tfrecord' resolves to" "$OUT" "$OUT.err" ||
    zd_fail "escape: $(cat "$OUT" "$OUT.err")"
zd_ok "a matched file linking out of --data-root refused, naming dataset.train.files"

echo "test_tfrecord_jobs.sh: $ZD_PASSED passed, 0 failed"
