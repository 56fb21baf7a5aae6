#!/usr/bin/env bash
# Dynamic embedding tables on real psds (issue 29): a parameter_server job
# whose embedding has no input_dim ("dynamic") trains on libsvm examples
# whose ids are spread over the whole int64 range (dataset.raw_ids: kept
# as they are, no hashing); an id becomes a row exactly at its min_count-th
# training occurrence; evaluation lookups count nothing; a step re-run
# after kill -9 of a worker counts, creates and applies nothing twice;
# `zdist ps stats --json`'s embeddings and /metrics show the tables; past
# --max-bytes new ids are refused, counted and logged once per table.
#
# Every global batch holds the same 96 occurrences (the workers' input
# pipelines each walk the data, whose every batch is one block of 24
# examples): 32 ids twice, 32 ids once, ids random over all of int64 with
# its extremes. After S steps an id seen once a batch has been counted
# exactly S times; min_count is S + 1, so these stay one short (counted,
# no row) while the ids seen twice are admitted (at step (S + 1) / 2): one
# step counted twice (a re-run, a retry) or an evaluation lookup counted
# would admit them, and the rows would not be exactly 32. The test set
# holds ids never trained and the pending ones. Labels come from a hidden
# weight per id, so the loss falls once the rows exist.
#
# The re-run is hit as test_exactly_once.sh hits it: the worker's test-only
# hook (ZDIST_TEST_DIE_AFTER_PUSH) SIGKILLs it once a step's pushes are
# acknowledged; without the hooks that part is skipped.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init dynamic-embedding
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
BATCH=24
STEPS=80
MIN_COUNT=$((STEPS + 1))
coord_cluster 2 2

# ---- the data: one block of 24 examples (4 ids each) repeated ----
python3 - "$ZD_TMP" $BATCH <<'PY'
import random, sys
out, b = sys.argv[1], int(sys.argv[2])
rng = random.Random(29)
taken = {-2**63, 2**63 - 1, 0, -1}
def fresh(k):
    ids = []
    while len(ids) < k:
        i = rng.randrange(-2**63, 2**63)
        if i not in taken:
            taken.add(i)
            ids.append(i)
    return ids
twice = [-2**63, 2**63 - 1, 0, -1] + fresh(28)
once = fresh(32)
bag = twice + twice + once
assert len(bag) == 4 * b
rng.shuffle(bag)
w = {i: rng.choice([-3.0, 3.0]) for i in twice}
def line(ids):
    s = sum(w.get(i, 0.0) for i in ids)
    return "%d %s\n" % (1 if s > 0 or (s == 0 and rng.random() < 0.5) else 0, " ".join("%d:1" % i for i in ids))
block = [line(bag[4 * e:4 * e + 4]) for e in range(b)]
with open(out + "/train.svm", "w") as f:
    f.writelines(block * 10)
unseen = fresh(64)
with open(out + "/test.svm", "w") as f:
    f.writelines(line([once[e], unseen[2 * e], unseen[2 * e + 1], twice[e]]) for e in range(32))
with open(out + "/expect", "w") as f:
    f.write("%d %d\n" % (len(twice), len(once)))
PY
read -r ROWS PENDING <"$ZD_TMP/expect"

# job FILE [EXTRA_JSON]: sequential, a dynamic embedding then one logit, adagrad; closures of 5 steps.
job() {
    cat >"$1" <<JSON
{"name": "dyn", "strategy": {"type": "parameter_server"},
 "model": {"name": "sequential", "input_shape": [1],
           "layers": [{"embedding": {"output_dim": 8, "combiner": "mean",
                                     "dynamic": {"min_count": $MIN_COUNT, "default": "zeros"}}},
                      {"dense": {"units": 1}}],
           "loss": "binary_crossentropy"},
 "optimizer": {"type": "adagrad", "learning_rate": 0.3},
 "dataset": {"format": "libsvm", "dim": 1, "raw_ids": true, "train": {"path": "$ZD_TMP/train.svm"},
             "test": {"path": "$ZD_TMP/test.svm"}, "global_batch_size": $BATCH, "shuffle": false, "shard_policy": "off"},
 "steps": $STEPS, "steps_per_execution": 5, "evaluation": {"at_end": true}, "seed": 5 ${2:-}}
JSON
}

# tables_check JOB WHAT [STEPS]: the job's table holds exactly the rows the data
# admits, counted once, over both psds (and each part applied STEPS pushes).
tables_check() {
    local i
    for ((i = 0; i < 2; i++)); do
        zd_run_expect 0 "$OUT.$i" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json
    done
    python3 - "$OUT.0" "$OUT.1" "$1" "$ROWS" "$PENDING" "${3:-0}" <<'PY' || zd_fail "$2: the dynamic table is not as the data admits (above)"
import json, sys
job, rows, pending, steps = sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
tot = {"rows": 0, "admitted": 0, "pending": 0, "refused": 0, "evicted": 0}
for f in sys.argv[1:3]:
    j = json.load(open(f))
    e = [x for x in j["embeddings"] if x["job"] == job and x["table"] == "embedding/embeddings"]
    if len(e) != 1 or e[0]["bytes"] <= 0:
        print("ps %s: embeddings %s" % (f, j["embeddings"])); sys.exit(1)
    for k in tot:
        tot[k] += e[0][k]
    parts = [s for s in j["shard_info"] if s["name"] == job + "/embedding/embeddings"]
    if steps and (len(parts) != 1 or parts[0]["step"] != steps):
        print("ps %s: the part did not apply exactly %d pushes: %s" % (f, steps, parts)); sys.exit(1)
want = {"rows": rows, "admitted": rows, "pending": pending, "refused": 0, "evicted": 0}
if tot != want:
    print("over both psds %s, expected %s" % (tot, want)); sys.exit(1)
PY
}

metrics_loss_falls() {
    python3 - "$ZD_TMP/state/jobs/$1/metrics.jsonl" <<'PY' || zd_fail "job $1: the loss did not fall"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
losses = [r["loss"] for r in rows if r.get("loss") is not None]
print("loss %.4f -> %.4f over %d reports" % (losses[0], losses[-1], len(losses)))
sys.exit(0 if len(losses) >= 2 and losses[-1] < 0.9 * losses[0] else 1)
PY
}

HTTP0=127.0.0.1:$(zd_free_port)
COORD_CHIEF_ARGS=--keep-variables # the tables are read after each job
zd_start ps0 "$ZDIST_PSD_BIN" --cluster "$CLUSTER" --task ps:0 --checkpoint-root "$ZD_TMP" --http "$HTTP0"
coord_start_ps 1
coord_start_worker 0
coord_start_worker 1
coord_start_chief
for i in 0 1; do zd_wait_psd "ps$i" "${ZD_PS_ADDRS[$i]}" 60; done
for i in 0 1; do zd_wait_log "worker$i" "serving at" 60; done
zd_wait_log chief "chief serving at" 60

# ---- the job file: errors name the field ----
job "$ZD_TMP/bad.json"
sed -i "s/\"min_count\": $MIN_COUNT/\"min_count\": -1/" "$ZD_TMP/bad.json"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/bad.json" --cluster "$CLUSTER" --detach
grep -qF "model.layers[0].embedding.dynamic.min_count" "$OUT.err" || zd_fail "bad min_count: $(cat "$OUT.err")"
job "$ZD_TMP/bad.json"
sed -i 's/"output_dim": 8,/"output_dim": 8, "input_dim": 100,/' "$ZD_TMP/bad.json"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/bad.json" --cluster "$CLUSTER" --detach
grep -qF "model.layers[0].embedding.input_dim" "$OUT.err" || zd_fail "dynamic with input_dim: $(cat "$OUT.err")"
zd_ok "a dynamic embedding's bad fields are refused at submit, naming the field"

# ---- a job trains; admission exactly at min_count; evaluation counts nothing ----
job "$ZD_TMP/job.json"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == j["steps"]'
JOB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
metrics_loss_falls "$JOB"
tables_check "$JOB" "a job to its end" $STEPS
zd_ok "the job trains; ids over all of int64: $ROWS rows admitted, $PENDING ids one occurrence short of min_count $MIN_COUNT counted only, the evaluation's lookups created and counted nothing"

# ---- /metrics: the embedding families, labelled by job and table ----
curl -sf "http://$HTTP0/metrics" >"$OUT.metrics" || zd_fail "no /metrics from ps 0"
for f in zdist_psd_embedding_rows zdist_psd_embedding_admitted_total zdist_psd_embedding_refused_total \
    zdist_psd_embedding_evicted_total zdist_psd_embedding_bytes; do
    grep -qE "^$f\{job=\"$JOB\",table=\"embedding/embeddings\"\} [0-9]" "$OUT.metrics" || zd_fail "/metrics lacks $f: $(grep embedding "$OUT.metrics")"
done
zd_ok "/metrics: zdist_psd_embedding_{rows,admitted_total,refused_total,evicted_total,bytes}{job,table}"

# ---- a step re-run after kill -9 of a worker: nothing counted, created or applied twice ----
if [[ ${ZDIST_TEST_HOOKS:-0} == 1 ]]; then
    zd_stop worker1 KILL
    zd_start worker1_die env ZDIST_TEST_DIE_AFTER_PUSH=15 "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task worker:1
    zd_wait_log worker1_die "serving at" 60
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
    JOB=$(cat "$OUT")
    zd_wait_log worker1_die "test fault: step 15 pushed; SIGKILL before replying" 120
    # Back (as systemd would restart it): it rejoins, and the evaluation at the end has every worker.
    coord_start_worker 1
    coord_wait_state "$JOB" done 300
    grep -qE "job $JOB: worker 1 \(.*\) lost: " "$ZD_TMP/chief.log" || zd_fail "the chief never lost worker 1"
    tables_check "$JOB" "worker killed after its push" $STEPS
    zd_ok "a worker SIGKILLed after its step's push, the closure re-run: still $ROWS rows and $PENDING pending, each part applied exactly $STEPS pushes"
else
    echo "skip: the re-run after kill -9 (zdist-worker built without its test hooks)"
fi

# ---- --max-bytes: new ids refused, counted, logged once per table; the job still ends ----
for i in 0 1; do zd_stop "ps$i" TERM; done
for i in 0 1; do
    zd_start "psb$i" "$ZDIST_PSD_BIN" --cluster "$CLUSTER" --task "ps:$i" --checkpoint-root "$ZD_TMP" --max-bytes 4096
done
for i in 0 1; do zd_wait_psd "psb$i" "${ZD_PS_ADDRS[$i]}" 60; done
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == j["steps"]'
JOB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
for i in 0 1; do
    zd_run_expect 0 "$OUT.$i" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json
    zd_json_check "$OUT.$i" "[e for e in j['embeddings'] if e['job'] == '$JOB' and e['refused'] > 0 and e['bytes'] <= 4096]"
    n=$(grep -c "dynamic table '$JOB/embedding/embeddings': new ids refused admission" "$ZD_TMP/psb$i.log" || true)
    [[ $n == 1 ]] || zd_fail "ps $i logged the refusal $n times, not once"
done
zd_ok "past --max-bytes 4096: new ids refused and counted, logged once per table, the job ran to its end"
echo "all $ZD_PASSED checks passed"
