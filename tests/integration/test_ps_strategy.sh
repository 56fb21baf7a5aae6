#!/usr/bin/env bash
# zdist/strategy.h's parameter_server flavour on real daemons: deploy/examples/ps_strategy_loop.c creates the
# linear_regression model's variables under the strategy's scope on 2 zdist-psd tasks (the job's fixed:2
# partitioner splits the kernel; a counter colocated with the kernel stays whole on its first shard's psd),
# schedules closures on 2 zdist-worker tasks, fetches and reduces their losses, and reads the trained weights back
# from the psds: the teacher's, every step counted.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
zd_init ps_strategy
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN PS_STRATEGY_LOOP_BIN
OUT=$ZD_TMP/out

zd_ps_workers_up 2 2
cat >"$ZD_TMP/job.json" <<JSON
{"name": "ps-strategy",
 "strategy": {"type": "parameter_server", "partitioner": "fixed:2"},
 "model": {"name": "linear_regression"}, "optimizer": {"type": "sgd", "learning_rate": 0.05},
 "dataset": {"format": "synthetic", "synthetic": {"n": 2000, "dim": 8, "noise_std": 0.01, "seed": 9},
             "global_batch_size": 50},
 "steps": 1, "seed": 3}
JSON
zd_run_expect 0 "$OUT" "$PS_STRATEGY_LOOP_BIN" "$ZD_TMP/job.json" 20 10 "${ZD_WORKER_EPS[@]}" -- "${ZD_PS_EPS[@]}"
cat "$OUT"
grep -q '^ParameterServerStrategy, 1 replica in sync per step$' "$OUT" || zd_fail "no ParameterServerStrategy line"
grep -q '^steps seen: 200$' "$OUT" || zd_fail "the colocated counter did not count 20 closures x 10 steps"
zd_ok "200 steps trained on the workers learn the teacher's weights (within 0.05), read back from the psds"
grep -q '^kernel: 2 shards on ps 0 1$' "$OUT" || zd_fail "kernel is not split over ps 0 and 1"
grep -q '^bias: 1 shard on ps 0$' "$OUT" || zd_fail "bias is not where the round robin puts it (ps 0)"
grep -q '^kernel_steps_seen: 1 shard on ps 0$' "$OUT" || zd_fail "the colocated counter is not beside kernel's shard 0"
python3 - "$OUT" <<'PY' || zd_fail "the losses did not fall: $(grep closure "$OUT")"
import re, sys
first, last = map(float, re.search(r"closure 0: mean loss (\S+); closure \d+: mean loss (\S+)", open(sys.argv[1]).read()).groups())
assert last < first / 10, (first, last)
PY
zd_ok "the fetched, reduced mean loss of the last closure is under a tenth of the first's"

# The psds hold what the strategy placed, under the job's prefix: kernel's parts on each, the counter whole on ps 0.
for i in 0 1; do
    zd_run_expect 0 "$ZD_TMP/ps$i.json" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json
done
python3 - "$ZD_TMP/ps0.json" "$ZD_TMP/ps1.json" <<'PY' || zd_fail "placement: $(cat "$ZD_TMP/ps0.json" "$ZD_TMP/ps1.json")"
import json, sys
ps = [json.load(open(f))["shard_info"] for f in sys.argv[1:]]
names = [sorted((s["name"], s["shard_index"]) for s in p) for p in ps]
assert names[0] == [("ps_strategy_loop/bias", 0), ("ps_strategy_loop/kernel", 0), ("ps_strategy_loop/kernel_steps_seen", 0)], names
assert names[1] == [("ps_strategy_loop/kernel", 1)], names
PY
zd_ok "on the psds: kernel's 2 parts on ps 0 and 1, bias and the colocated counter on ps 0"

# A second run over the same psds finds the variables there (an earlier run's) and says what to do.
zd_run_expect 2 "$OUT" "$PS_STRATEGY_LOOP_BIN" "$ZD_TMP/job.json" 1 1 "${ZD_WORKER_EPS[@]}" -- "${ZD_PS_EPS[@]}"
grep -q "already exists on ps task 0 (an earlier run's); drop that job's variables (zdist ps drop ENDPOINT ps_strategy_loop)" "$OUT.err" ||
    zd_fail "a second run is not refused clearly: $(cat "$OUT.err")"
zd_ok "a second run over the first's variables is refused, naming zdist ps drop"
echo "passed: $ZD_PASSED"
