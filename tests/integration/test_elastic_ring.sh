#!/usr/bin/env bash
# Synchronous strategies that change size (issue 31) on real daemons: a chief and three workers, no ps.
# A multi_worker_mirrored job with strategy.min_workers 2 and max_workers 4 starts on the 3 workers; worker 2
# is killed -9 and the ring goes on with 2 at once (the status shows it), from the last checkpoint, the
# global batch kept; worker 2 restarted is taken in at a checkpoint boundary, and so is a fourth worker
# that joins through the chief (zdist-worker --join). The job ends with exactly its steps and its final
# variables equal on every replica. A tpu-strategy job the same in short form (1..3 workers), submitted while
# a worker is down (a job without min/max is still refused then). Jobs whose
# global batch some size in MIN..MAX does not divide, or that do not shard by data, are refused at submit
# naming the fields. Prints examples/s before and after the shrink and each re-form's time (measured, not
# asserted).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init elastic-ring
zd_need ZDIST_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out

ZD_WORKER_ADDRS=("127.0.0.1:$(zd_free_port)" "127.0.0.1:$(zd_free_port)" "127.0.0.1:$(zd_free_port)")
ZD_CHIEF="127.0.0.1:$(zd_free_port)"
CLUSTER=$ZD_TMP/cluster.json
printf '{"cluster": {"chief": ["%s"], "worker": ["%s", "%s", "%s"]}}\n' "$ZD_CHIEF" "${ZD_WORKER_ADDRS[@]}" >"$CLUSTER"
coord_up 0 3
zd_ok "a chief and three workers, no ps"

# elastic_job FILE TYPE STEPS MIN MAX BATCH [SHARD_POLICY]: an mlp slow enough to be killed mid-job.
elastic_job() {
    cat >"$1" <<JSON
{"name": "elastic-$2", "strategy": {"type": "$2", "collective_timeout_ms": 10000, "lost_worker_wait_ms": -1,
                                  "min_workers": $4, "max_workers": $5},
 "model": {"name": "mlp", "params": {"hidden": [256]}}, "optimizer": {"type": "adam", "learning_rate": 0.001},
 "dataset": {"format": "synthetic", "synthetic": {"n": 9600, "test_n": 1024, "dim": 256, "classes": 4, "seed": 7,
             "noise_std": 2.0}, "global_batch_size": $6, "shard_policy": "${7:-data}"},
 "steps": $3, "checkpoint": {"every_steps": 100, "keep": 3}, "seed": 3}
JSON
}
# st FIELD...: a value of the last status read ($ZD_TMP/st.json) by a Python expression over j.
st() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$ZD_TMP/st.json" "$1"; }
# rate JOB: the job's examples/s once 3 more rounds of status have come (the window's rate).
rate() {
    local s0
    coord_wait_json "$1" "True" 10
    s0=$(st "j['step']")
    coord_wait_json "$1" "j['step'] >= $s0 + 60 or j['state'] != 'running'" 120
    st "round(j['metrics']['examples_per_sec'])"
}

# ---- refused at submit, naming the fields ----
# refused FILE TEXT: zdist submit refuses FILE with TEXT in its message.
refused() {
    zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$1" --cluster "$CLUSTER" --detach
    grep -qF -- "$2" "$OUT.err" || zd_fail "$1: wanted '$2' in: $(cat "$OUT.err")"
}
elastic_job "$ZD_TMP/bad.json" multi_worker_mirrored 100 2 5 96
refused "$ZD_TMP/bad.json" "dataset.global_batch_size: 96 does not divide by 5 workers x 1 replica (strategy.min_workers 2 .. strategy.max_workers 5, strategy.num_replicas 1)"
refused "$ZD_TMP/bad.json" "use a multiple of 60 (every"
elastic_job "$ZD_TMP/bad2.json" tpu 100 1 3 100
sed -i 's/"collective_timeout_ms": 10000/"num_replicas": 4, "collective_timeout_ms": 10000/' "$ZD_TMP/bad2.json"
refused "$ZD_TMP/bad2.json" "dataset.global_batch_size: 100 does not divide by 2 workers x 4 replicas"
elastic_job "$ZD_TMP/bad3.json" multi_worker_mirrored 100 2 3 96 off
refused "$ZD_TMP/bad3.json" "dataset.shard_policy: an elastic ring"
elastic_job "$ZD_TMP/bad4.json" multi_worker_mirrored 100 2 3 96
sed -i 's/, "max_workers": 3//' "$ZD_TMP/bad4.json"
refused "$ZD_TMP/bad4.json" "strategy.min_workers: give strategy.min_workers and strategy.max_workers together"
zd_ok "refused at submit naming the fields: a batch some size does not divide, shard_policy off, min without max"

# ---- multi_worker_mirrored, 2..4 workers: 3 -> 2 (kill -9) -> 3 (back) -> 4 (joined) ----
STEPS=3000
elastic_job "$ZD_TMP/mwm.json" multi_worker_mirrored $STEPS 2 4 96
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/mwm.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_json "$JOB" "j['step'] >= 250 and j['ring_size'] == 3 and j['min_workers'] == 2 and j['max_workers'] == 4" 180
BEFORE=$(rate "$JOB")
zd_stop worker2 KILL
T0=$SECONDS
zd_wait_log chief "job $JOB: re-forming the ring with 2 workers \(strategy.min_workers 2, max_workers 4\)" 60
coord_wait_json "$JOB" "j['ring_size'] == 2 and j['workers'][2]['state'] == 'lost' and not j['workers'][2]['in_ring'] and j['ring_history'][-1]['size'] == 2 and j['ring_history'][-1]['reform_ms'] >= 0" 60
SHRINK_MS=$(st "j['ring_history'][-1]['reform_ms']")
SHRINK_FROM=$(st "j['ring_history'][-1]['step']")
echo "measured: kill -9 to the 2-worker ring running: $((SECONDS - T0)) s (whole seconds); re-form ${SHRINK_MS} ms from the failed round to the first round of the new ring, from step $SHRINK_FROM"
# Never waited for the lost worker (lost_worker_wait_ms -1 would wait for ever without min_workers).
grep -q "job $JOB: waiting for 1 lost worker" "$ZD_TMP/chief.log" && zd_fail "the elastic ring waited for the lost worker"
AFTER=$(rate "$JOB")
echo "measured: examples/s with 3 workers $BEFORE, with 2 workers $AFTER (global batch 96 kept)"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER"
grep -q "ring: 2 workers (min_workers 2, max_workers 4)" "$OUT" || zd_fail "status text: $(cat "$OUT")"
zd_ok "worker 2 killed -9: the ring went on with 2 workers from step $SHRINK_FROM (status shows it)"

coord_start_worker 2
coord_wait_json "$JOB" "j['ring_size'] == 3 and j['workers'][2]['in_ring'] and j['ring_history'][-1]['reform_ms'] >= 0" 180
# Taken in at a checkpoint boundary (or, when a collective timed out on a loaded machine first, by that re-form).
grep -qE "job $JOB: (worker task 2 \(tcp://${ZD_WORKER_ADDRS[2]}\) up outside the ring: re-forming it with 3 workers from step [0-9]+00|re-forming the ring with 3 workers)" "$ZD_TMP/chief.log" ||
    zd_fail "worker 2 not taken in at a checkpoint boundary: $(grep "$JOB" "$ZD_TMP/chief.log" | tail -5)"
echo "measured: growing back to 3 workers: re-form $(st "j['ring_history'][-1]['reform_ms']") ms from the checkpoint boundary at step $(st "j['ring_history'][-1]['step']")"
zd_ok "worker 2 back: taken in at the checkpoint boundary, step $(st "j['ring_history'][-1]['step']")"

J_ADDR="127.0.0.1:$(zd_free_port)"
zd_start joined "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://$J_ADDR"
zd_wait_log joined "as worker:3 \(4 workers\)" 60
coord_wait_json "$JOB" "j['ring_size'] == 4 and len(j['workers']) == 4 and j['workers'][3]['in_ring'] and j['workers'][3]['joined']" 180
grep -qE "job $JOB: (worker task 3 \(tcp://$J_ADDR\) up outside the ring: re-forming it with 4 workers from step [0-9]+00|re-forming the ring with 4 workers)" "$ZD_TMP/chief.log" ||
    zd_fail "worker 3 not taken in at a checkpoint boundary: $(grep "$JOB" "$ZD_TMP/chief.log" | tail -5)"
zd_ok "a fourth worker joined through the chief: taken in at the checkpoint boundary, step $(st "j['ring_history'][-1]['step']")"

coord_wait_state "$JOB" done 600
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" "j['step'] == j['steps'] == $STEPS"
# The sizes the ring took, in order (a collective that timed out on a loaded machine re-forms the ring at the
# same size: such repeats are collapsed).
sizes() { echo "[s for k, s in enumerate(h['size'] for h in j['ring_history']) if k == 0 or j['ring_history'][k - 1]['size'] != s]"; }
zd_json_check "$OUT" "$(sizes) == [3, 2, 3, 4]"
zd_json_check "$OUT" "j['final_variables']['equal'] and len(j['final_variables']['workers']) == 4 and len(set(w['crc32'] for w in j['final_variables']['workers'])) == 1 and all(w['step'] == $STEPS for w in j['final_variables']['workers'])"
grep -q "job $JOB: the final variables of the ring's 4 workers are equal" "$ZD_TMP/chief.log" || zd_fail "no equality line in the chief's log"
# Each ring's workers split the global batch: 96 / 3 = 32 per replica, 96 / 2 = 48, 96 / 4 = 24.
grep -q "job 'elastic-multi_worker_mirrored' started: .*input pipeline 0 of 2" "$ZD_TMP/worker0.log" ||
    zd_fail "worker 0 not restarted in a ring of 2: $(grep "elastic-multi" "$ZD_TMP/worker0.log" | head -5)"
zd_ok "the job ended with exactly $STEPS steps over rings of 3, 2, 3 and 4 workers; final variables equal on all 4"

# ---- tpu, 1..3 workers, short, submitted with worker 2 down: 2 -> 1 (kill -9) -> 3 (both back) ----
zd_stop joined TERM
zd_stop worker2 TERM
# Without min_workers/max_workers a job still needs every worker at submit, as before.
elastic_job "$ZD_TMP/plain.json" multi_worker_mirrored 100 2 3 96
python3 - "$ZD_TMP/plain.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
del j["strategy"]["min_workers"], j["strategy"]["max_workers"]
json.dump(j, open(sys.argv[1], "w"))
PY
zd_run_expect 1 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/plain.json" --cluster "$CLUSTER" --detach
grep -q "preflight: task worker:2 .* is unreachable" "$OUT.err" || zd_fail "plain job, worker 2 down: $(cat "$OUT.err")"
TSTEPS=1500
elastic_job "$ZD_TMP/tpu.json" tpu $TSTEPS 1 3 96
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/tpu.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_json "$JOB" "j['step'] >= 250 and j['ring_size'] == 2 and j['workers'][2]['state'] == 'lost'" 180
zd_stop worker1 KILL
zd_wait_log chief "job $JOB: re-forming the ring with 1 worker \(strategy.min_workers 1, max_workers 3\)" 60
coord_wait_json "$JOB" "j['ring_size'] == 1 and j['ring_history'][-1]['reform_ms'] >= 0" 60
echo "measured: tpu re-form with 1 worker: $(st "j['ring_history'][-1]['reform_ms']") ms"
coord_start_worker 1
coord_start_worker 2
coord_wait_state "$JOB" done 600
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" "j['step'] == j['steps'] == $TSTEPS and $(sizes)[:2] == [2, 1] and $(sizes)[-1] == 3 and j['ring_size'] == 3"
zd_json_check "$OUT" "j['final_variables']['equal'] and len(j['final_variables']['workers']) == 3"
zd_ok "tpu submitted with a worker down: 2 -> 1 -> 3 workers, exactly $TSTEPS steps, final variables equal"

echo "passed: $ZD_PASSED"
