#!/usr/bin/env bash
# colocate_vars_with on real daemons: a plugin model declares plugin/w_avg under colocate_vars_with(plugin/w) and
# runs under parameter_server on 2 ps with the job's fixed:2 partitioner; w is split over both psds, w_avg is one
# unsharded shard on the psd of w's first shard, and the round robin goes on as if it did not exist.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init colocate
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN ZDIST_TEST_PLUGIN_DIR
PLUGIN_DIR=$(cd "$ZDIST_TEST_PLUGIN_DIR" && pwd)
OUT=$ZD_TMP/out

coord_cluster 2 1
# The operator's plugin directory: a job names its model, never a place (--plugin-dir's environment form).
export ZDIST_PLUGIN_DIRS=$PLUGIN_DIR/good
COORD_CHIEF_ARGS=--keep-variables # the placement is read from the psds after the job
coord_up 2 1
cat >"$ZD_TMP/job.json" <<JSON
{"name": "colocated",
 "strategy": {"type": "parameter_server", "partitioner": "fixed:2"},
 "model": {"name": "plugin_linear_colocated"}, "optimizer": {"type": "sgd", "learning_rate": 0.05},
 "dataset": {"format": "synthetic", "synthetic": {"n": 512, "test_n": 128, "dim": 8, "noise_std": 0.01, "seed": 2},
             "global_batch_size": 32},
 "steps": 40, "seed": 3, "checkpoint": {"every_steps": 20, "keep": 2}}
JSON
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == 40'
zd_ok "a parameter_server job of a model with a colocated variable runs to its end"

for i in 0 1; do
    zd_run_expect 0 "$ZD_TMP/ps$i.json" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json
done
# w: shards 0 and 1 on ps 0 and 1 (count 2); b (1 row, one shard): ps 0 (count 2 -> 0, count 3);
# w_avg: beside w's shard 0 on ps 0, 8 rows in one shard, no turn taken.
python3 - "$ZD_TMP/ps0.json" "$ZD_TMP/ps1.json" <<'PY' || zd_fail "placement: $(cat "$ZD_TMP/ps0.json" "$ZD_TMP/ps1.json")"
import json, sys
ps = [json.load(open(f))["shard_info"] for f in sys.argv[1:]]
def on(i, suffix):
    return [s for s in ps[i] if s["name"].endswith(suffix)]
assert len(on(0, "plugin/w")) == 1 and on(0, "plugin/w")[0]["shard_index"] == 0, ps
assert len(on(1, "plugin/w")) == 1 and on(1, "plugin/w")[0]["shard_index"] == 1, ps
avg = on(0, "plugin/w_avg")
assert len(avg) == 1 and avg[0]["shard_index"] == 0 and avg[0]["row_offset"] == 0 and avg[0]["row_count"] == 8, avg
assert on(1, "plugin/w_avg") == [], ps[1]
assert len(on(0, "plugin/b")) == 1 and on(1, "plugin/b") == [], ps
PY
zd_ok "w split over both psds, w_avg whole beside w's first shard, b where the round robin puts it"

# The checkpoints hold w_avg as one variable of 8 rows, saved by ps 0 alone.
ckpt=$(ls -d "$ZD_TMP"/state/jobs/*/ckpt-* 2>/dev/null | sort | tail -1)
[[ -n "$ckpt" ]] || zd_fail "no checkpoint directory under $ZD_TMP/state/jobs"
python3 - "$ckpt" <<'PY' || zd_fail "checkpoint manifests in $ckpt: $(ls "$ckpt")"
import glob, json, os, sys
seen = {}
for m in glob.glob(os.path.join(sys.argv[1], "manifest-ps*.json")):
    j = json.load(open(m))
    for v in j["variables"]:
        if v["name"].endswith("plugin/w_avg"):
            seen.setdefault(j["ps_task"], []).extend((f["row_start"], f["row_end"]) for f in v["files"])
assert seen == {0: [(0, 8)]}, seen
PY
zd_ok "the checkpoint keeps w_avg whole, in ps 0's files"
echo "all $ZD_PASSED checks passed"
