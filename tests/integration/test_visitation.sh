#!/usr/bin/env bash
# Exactly-once data visitation under parameter_server (issue 31), on real daemons: a chief, two psds and
# three workers. Every visit of an example is counted by the model itself, no hook: each example i of the
# libsvm file is "1 i:v" (label 1, one id, weight v = n/1024 where n is the size of its batch, so the
# partial last batch's examples count as the others do), the model is one embedding row per id (combiner
# sum, output_dim 1) under mean squared error, sgd at learning rate 512. An example's gradient on its own
# row is then 2 * v * (v * w - 1) / n = (v * w - 1) / 512, and each applied visit adds 1 - v * w (v * w
# under 0.01) to row i and touches no other: after the job, round(row i) is the number of times the psds
# applied a step that read example i (|initial value| < 0.05).
#
# One epoch with dataset.visitation "exactly_once" through a worker killed -9, a worker joining
# (zdist-worker --join), a worker frozen (SIGSTOP) past the closure deadline and thawed, a worker
# draining (zdist drain) and the joined one leaving on SIGTERM: every row is exactly 1. Then a job of three epochs whose psd is killed -9 (the job restores its last
# checkpoint, whose step is its acknowledged positions): every row is exactly 3. The same job with the
# option off runs as before (at_least_once: each worker its own shard of the batches, repeated; the job's
# steps are the workers' summed). The field's errors are checked at submit.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init visitation
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
G=4

# data FILE N: examples 1..N (ids), batches of G in file order, the last one partial when G does not divide N.
data() {
    python3 - "$1" "$2" "$G" <<'PY'
import sys
path, n, g = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "w") as f:
    for i in range(1, n + 1):
        size = min(g, n - (i - 1) // g * g)  # the size of the batch example i is in
        f.write("1 %d:%.10g\n" % (i, size / 1024.0))
PY
}

# job FILE N EPOCHS [EXTRA_DATASET_JSON] [EXTRA_JSON]
job() {
    cat >"$1" <<JSON
{"name": "visits", "strategy": {"type": "parameter_server", "partitioner": "fixed:2"},
 "model": {"name": "sequential", "input_shape": [$(($2 + 1))],
           "layers": [{"embedding": {"input_dim": $(($2 + 1)), "output_dim": 1, "combiner": "sum"}}],
           "loss": "mean_squared_error"},
 "optimizer": {"type": "sgd", "learning_rate": 512},
 "dataset": {"format": "libsvm", "dim": $(($2 + 1)), "train": {"path": "$ZD_TMP/train-$2.svm"},
             "global_batch_size": $G, "shuffle": false ${4:-}},
 "epochs": $3, "steps_per_execution": 4, "evaluation": {"at_end": false}, "seed": 11 ${5:-}}
JSON
}

# visits JOB N WANT WHAT: every example's row on the psds rounds to WANT (fails naming the rows that do not).
visits() {
    local i
    for ((i = 0; i < 2; i++)); do
        zd_run_expect 0 "$OUT.st$i" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json
    done
    python3 - "$ZDIST_BIN" "$1" "$2" "$3" "$OUT.st0" "$OUT.st1" "${ZD_PS_ADDRS[0]}" "${ZD_PS_ADDRS[1]}" <<'PY' ||
import json, subprocess, sys
zdist, job, n, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4].replace("-", "-1"))
var = job + "/embedding/embeddings"
rows = {}
for st, addr in ((sys.argv[5], sys.argv[7]), (sys.argv[6], sys.argv[8])):
    for s in json.load(open(st))["shard_info"]:
        if s["name"] != var:
            continue
        got = json.loads(subprocess.check_output([zdist, "ps", "get", addr, var, "--shard", str(s["shard_index"]),
                                                  "--json"]))
        for k, r in enumerate(got):
            rows[s["row_offset"] + k] = r[0]
if sorted(rows) != list(range(n + 1)):
    print("rows on the psds: %d of %d" % (len(rows), n + 1))
    sys.exit(1)
bad = [(i, rows[i]) for i in range(1, n + 1) if round(rows[i]) != want or abs(rows[i] - want) > 0.3]
counts = {}
for i in range(1, n + 1):
    counts[round(rows[i])] = counts.get(round(rows[i]), 0) + 1
print("visits per example: %s" % ", ".join("%d: %d examples" % kv for kv in sorted(counts.items())))
if bad and want >= 0:
    print("examples not visited exactly %d times (id, row): %s%s" % (want, bad[:20], " ..." if len(bad) > 20 else ""))
    sys.exit(1)
PY
        zd_fail "$4: an example was visited more or less than $3 times (above)"
}

coord_cluster 2 3
# The rows are read after each job; a frozen worker's closures time out after 4 s (and any slow one's:
# a closure run twice must still count once).
COORD_CHIEF_ARGS="--keep-variables --closure-timeout-ms 4000"
coord_up 2 3
zd_ok "a chief, two psds and three workers"

# ---- the field's errors ----
N=4001
data "$ZD_TMP/train-$N.svm" $N
job "$ZD_TMP/bad.json" $N 1 ', "visitation": "exactly_twice"'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/bad.json" --cluster "$CLUSTER" --detach
grep -qF "dataset.visitation: unknown 'exactly_twice'; use at_least_once (the default) or exactly_once" "$OUT.err" ||
    zd_fail "unknown visitation: $(cat "$OUT.err")"
job "$ZD_TMP/bad.json" $N 1 ', "visitation": true'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/bad.json" --cluster "$CLUSTER" --detach
grep -qF "dataset.visitation: must be a non-empty string" "$OUT.err" || zd_fail "visitation true: $(cat "$OUT.err")"
job "$ZD_TMP/bad.json" $N 1 ', "visitation": "exactly_once"'
sed -i 's/"type": "parameter_server"/"type": "multi_worker_mirrored"/' "$ZD_TMP/bad.json"
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/bad.json" --cluster "$CLUSTER" --detach
grep -qF "dataset.visitation: exactly_once is for parameter_server" "$OUT.err" || zd_fail "mwm: $(cat "$OUT.err")"
zd_ok "dataset.visitation: an unknown value, a non-string and exactly_once under multi_worker_mirrored refused"

# ---- one epoch through kill -9, a join, a freeze, a drain and a SIGTERM ----
N=400001 # 100001 batches, the last one of 1 example
data "$ZD_TMP/train-$N.svm" $N
SPE=$(((N + G - 1) / G))
job "$ZD_TMP/once.json" $N 1 ', "visitation": "exactly_once"'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/once.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_json "$JOB" "j['steps'] == $SPE and j['visitation'] == {'mode': 'exactly_once', 'steps_per_epoch': $SPE, 'epoch': 0, 'epoch_batches_done': j['step']} and j['step'] >= 400" 120
# A worker joins (it starts, loads the data and gets the job meanwhile) as worker 2 is killed -9.
J_ADDR="127.0.0.1:$(zd_free_port)"
zd_start joined "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://$J_ADDR"
zd_stop worker2 KILL
zd_wait_log chief "job $JOB: worker 2 \(.*\) lost" 60
zd_ok "worker 2 killed -9 at step $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$ZD_TMP/st.json") of $SPE"
coord_wait_json "$JOB" "len(j['workers']) > 3 and j['workers'][3]['closures_done'] > 0" 120
# Worker 0 freezes (SIGSTOP) past the closure deadline: its closures run elsewhere; thawed, it pushes
# steps the psds already hold (duplicates) and takes closures again.
kill -STOP "${ZD_PID[worker0]}"
zd_wait_log chief "job $JOB: worker 0 \(.*\) lost: DEADLINE_EXCEEDED" 60
D0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workers"][0]["closures_done"])' "$ZD_TMP/st.json")
kill -CONT "${ZD_PID[worker0]}"
coord_wait_json "$JOB" "j['workers'][0]['closures_done'] > $D0 + 2" 120
zd_ok "worker 0 frozen past the closure deadline, then thawed: running closures again"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" drain worker:1 --cluster "$CLUSTER"
coord_wait_json "$JOB" "j['workers'][1]['state'] == 'left'" 120
zd_stop joined TERM
[[ $ZD_RC -eq 0 ]] || zd_fail "the joined worker exited $ZD_RC on SIGTERM (want 0)"
coord_wait_json "$JOB" "j['workers'][3]['state'] == 'left' or j['state'] == 'done'" 60
zd_json_check "$ZD_TMP/st.json" "j['step'] < $SPE" ||
    zd_fail "the epoch ended before the faults were all in it: make N larger"
zd_ok "worker 3 joined, worker 0 froze and thawed, worker 1 drained, worker 3 left on SIGTERM, all within the epoch (at step $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$ZD_TMP/st.json"))"
coord_wait_state "$JOB" done 600
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" "j['step'] == j['steps'] == $SPE"
visits "$JOB" $N 1 "exactly_once through kill -9, join, freeze, drain and SIGTERM"
zd_ok "exactly_once: every one of $N examples visited exactly once in the epoch (the partial last batch too)"

# ---- three epochs, a psd killed -9: restored from the checkpoint, the epochs resume where it says ----
coord_start_worker 2 # worker 2 back; worker 0 and 2 run it
N=40001
data "$ZD_TMP/train-$N.svm" $N
SPE=$(((N + G - 1) / G))
job "$ZD_TMP/three.json" $N 3 ', "visitation": "exactly_once"' ', "checkpoint": {"every_steps": 2000}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/three.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_json "$JOB" "j['step'] >= $((SPE + 800))" 300
zd_stop ps1 KILL
coord_start_ps 1
coord_wait_state "$JOB" done 600
grep -qE "job $JOB: exactly-once visitation resumes epoch [0-9]+ after its first [1-9][0-9]* of $SPE batches" "$ZD_TMP/chief.log" ||
    zd_fail "no resume after the psd's restore: $(grep "job $JOB" "$ZD_TMP/chief.log" | tail -5)"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" "j['step'] == j['steps'] == 3 * $SPE and j['psd_recoveries'] >= 1 and j['visitation']['epoch'] == 3"
# Every checkpoint's manifest: the acknowledged positions its step stands for.
for m in "$ZD_TMP"/state/jobs/"$JOB"/ckpt-*/manifest.json; do
    zd_json_check "$m" "j['visitation'] == 'exactly_once' and j['steps_per_epoch'] == $SPE and j['epoch'] == j['step'] // $SPE and j['epoch_batches_done'] == j['step'] % $SPE"
done
visits "$JOB" $N 3 "exactly_once over three epochs through a psd restore"
zd_ok "exactly_once, 3 epochs, a psd killed -9 and restored: every example visited exactly 3 times"

# ---- the option off: as before ----
# at_least_once, TensorFlow's: worker w of the job's 4 (1 and 3 have left) repeats global batches w, w + 4,
# ... and the job's steps are the answering workers' epochs summed, so the batches of the workers that left
# are not read at all, and a worker's are read again while the others catch up: the counts are shown.
job "$ZD_TMP/least.json" $N 1 ', "shard_policy": "data"'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/least.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_json "$JOB" "j['state'] in ('done', 'failed')" 600
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" "j['state'] == 'done' and j['step'] == j['steps'] == sum(($SPE - 1 - w) // 4 + 1 for w in (0, 2)) and j['visitation'] == {'mode': 'at_least_once'}"
visits "$JOB" $N - "at_least_once"
zd_ok "at_least_once (the default): each answering worker's shard of the batches, $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"])' "$OUT") steps, as before"

echo "passed: $ZD_PASSED"
