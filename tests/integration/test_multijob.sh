#!/usr/bin/env bash
# Several parameter_server jobs at once on one cluster: two Fashion-MNIST jobs run side by side (their closures
# interleaved on the same workers, their variables side by side on the same psds), a psd killed -9 mid-way is
# restored per job from each job's own checkpoint, checkpoint.dir is honoured; jobs past --max-running-jobs wait
# and say why, the higher priority starts first, a multi_worker_mirrored job waits to run alone; an ended job's
# variables leave every psd (a running job's stay and it trains on), until the psds hold nothing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init multijob
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
FMNIST=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
if [[ ! -r $FMNIST/train-images-idx3-ubyte.gz ]]; then
    echo "skip: no Fashion-MNIST under $FMNIST (package dataset-fashion-mnist)"
    exit 0
fi
OUT=$ZD_TMP/out
coord_cluster 2 2
python3 - "$CLUSTER" "127.0.0.1:$(zd_free_port)" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["cluster"]["evaluator"] = [sys.argv[2]]
json.dump(c, open(sys.argv[1], "w"))
PY
mkdir -p "$ZD_TMP/state"
for i in 0 1; do coord_start_ps "$i"; done
for i in 0 1; do coord_start_worker "$i"; done
zd_start chief "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$ZD_TMP/state" --checkpoint-root "$ZD_TMP" \
    --max-running-jobs 2
for i in 0 1; do zd_wait_psd "ps$i" "${ZD_PS_ADDRS[$i]}" 60; done
for i in 0 1; do zd_wait_log "worker$i" "serving at" 60; done
zd_wait_log chief "chief serving at" 60
zd_start evaluator "$ZDIST_WORKER_BIN" --evaluator --cluster "$CLUSTER" --task evaluator:0 --state-dir "$ZD_TMP/state"
zd_wait_log evaluator "evaluator task 0 serving at" 60

# ps_shards N: "name step" of every shard on ps N, one per line.
ps_shards() {
    "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$1]}" --json |
        python3 -c 'import json,sys; [print(s["name"], s["step"]) for s in json.load(sys.stdin)["shard_info"]]'
}
# dropped LOG JOB: the chief (LOG) dropped JOB's variables from both psds, which hold none of them now, and its
# state.json says so.
dropped() {
    local i
    for i in 0 1; do
        zd_wait_log "$1" "job $2: dropped its variables from ps $i: [0-9]+ shards" 30
        ! ps_shards "$i" | grep -q "^$2/" || zd_fail "ps $i still holds job $2's variables: $(ps_shards "$i" | head -3)"
    done
    local deadline=$((SECONDS + 10))
    until python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["variables_dropped"] else 1)' \
        "$ZD_TMP/state/jobs/$2/state.json" 2>/dev/null; do
        ((SECONDS < deadline)) || zd_fail "job $2: state.json does not record variables_dropped"
        sleep 0.2
    done
}

# fmnist_job FILE NAME [EXTRA]: the Fashion-MNIST MLP, 300 steps, a checkpoint every 50.
fmnist_job() {
    cat >"$1" <<JSON
{"name": "$2", "strategy": {"type": "parameter_server"},
 "model": {"name": "mlp", "params": {"hidden": [256, 128]}}, "optimizer": {"type": "adam", "learning_rate": 0.001},
 "dataset": {"format": "idx",
   "train": {"images": "$FMNIST/train-images-idx3-ubyte.gz", "labels": "$FMNIST/train-labels-idx1-ubyte.gz"},
   "test": {"images": "$FMNIST/t10k-images-idx3-ubyte.gz", "labels": "$FMNIST/t10k-labels-idx1-ubyte.gz"},
   "global_batch_size": 128, "shuffle_seed": 42, "shard_policy": "data"},
 "steps": 300, "checkpoint": {"every_steps": 50, "keep": 2 ${3:-}}, "seed": 1}
JSON
}
CKPT_A=$ZD_TMP/ckpt-a
fmnist_job "$ZD_TMP/a.json" fmnist-a ", \"dir\": \"$CKPT_A\""
fmnist_job "$ZD_TMP/b.json" fmnist-b

# ---- checkpoint.dir is checked at submit ----
fmnist_job "$ZD_TMP/rel.json" rel ', "dir": "ckpt"'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/rel.json" --cluster "$CLUSTER" --detach
grep -q "checkpoint.dir: 'ckpt' is a relative path" "$OUT.err" || zd_fail "relative checkpoint.dir: $(cat "$OUT.err")"
touch "$ZD_TMP/afile"
fmnist_job "$ZD_TMP/bad.json" bad ", \"dir\": \"$ZD_TMP/afile/sub\""
zd_run_expect 2 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/bad.json" --cluster "$CLUSTER" --detach
grep -q "checkpoint.dir: cannot create '$ZD_TMP/afile/sub'" "$OUT.err" || zd_fail "uncreatable checkpoint.dir: $(cat "$OUT.err")"
zd_ok "checkpoint.dir: a relative or uncreatable one is refused at submit, naming the field"

# ---- two jobs at once, a third waits ----
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/a.json" --cluster "$CLUSTER" --detach
A=$(cat "$OUT")
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/b.json" --cluster "$CLUSTER" --detach
B=$(cat "$OUT")
# C (parameter_server), then D (multi_worker_mirrored), then E (parameter_server, priority 5): all wait.
coord_softmax_job "$ZD_TMP/c.json" 40
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/c.json" --cluster "$CLUSTER" --detach
C=$(cat "$OUT")
sed 's/"parameter_server"/"multi_worker_mirrored"/; s/syn-softmax/syn-mwm/' "$ZD_TMP/c.json" >"$ZD_TMP/d.json"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/d.json" --cluster "$CLUSTER" --detach
D=$(cat "$OUT")
coord_softmax_job "$ZD_TMP/e.json" 40 ', "priority": 5'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/e.json" --cluster "$CLUSTER" --detach
E=$(cat "$OUT")
coord_wait_json "$C" "j['state'] == 'queued' and 'job $E (priority 5) starts before it' in j.get('waiting', '')" 30
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$C" --cluster "$CLUSTER"
grep -q "queued: waiting for one of the 2 running jobs ($A, $B\|queued: waiting for one of the 2 running jobs ($B, $A" \
    "$OUT" || zd_fail "the third job does not say what it waits for: $(cat "$OUT")"
zd_ok "a job past --max-running-jobs 2 stays queued: '$(grep queued: "$OUT" | sed 's/^ *//')'"
coord_wait_json "$D" "j['state'] == 'queued' and \"owns the workers' ring and runs alone\" in j.get('waiting', '')" 30
zd_ok "a multi_worker_mirrored job waits for the running ones: '$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["waiting"])' "$ZD_TMP/st.json")'"

# Both running at one moment, each with its own progress, in one 'zdist status'.
coord_wait_json "" "len([x for x in j.get('jobs', []) if x['state'] == 'running' and x['step'] > 0]) >= 2" 120
zd_json_check "$ZD_TMP/st.json" "set(x['job_id'] for x in j['jobs'] if x['state'] == 'running') == {'$A', '$B'}"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status --cluster "$CLUSTER"
grep -qE "^job $A \(fmnist-a\): running, step [0-9]+/300" "$OUT" || zd_fail "status does not list job A: $(cat "$OUT")"
grep -qE "^job $B \(fmnist-b\): running, step [0-9]+/300" "$OUT" || zd_fail "status does not list job B: $(cat "$OUT")"
zd_ok "jobs $A and $B run at the same time ('zdist status' lists both with their own step)"

# ---- a psd killed -9 mid-way, restarted as systemd would: each job restored from its own checkpoint ----
both_past() { coord_wait_json "" "len([x for x in j.get('jobs', []) if x['job_id'] in ('$A', '$B') and x['step'] >= $1]) == 2" 120; }
both_past 60
zd_json_check "$ZD_TMP/st.json" "all(x['state'] == 'running' and x['step'] < 300 for x in j['jobs'] if x['job_id'] in ('$A', '$B'))"
zd_stop ps1 KILL
# Down until its clients (the chief, the workers) have seen their connections close.
zd_wait_until 30 "ps1's clients seeing it gone" zd_port_unused "${ZD_PS_ADDRS[1]##*:}"
coord_start_ps 1
zd_wait_psd ps1 "${ZD_PS_ADDRS[1]}" 60
coord_wait_state "$A" done 180
coord_wait_state "$B" done 180
for J in "$A" "$B"; do
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$J" --cluster "$CLUSTER" --json
    zd_json_check "$OUT" 'j["step"] == 300 and j["steps"] == 300 and j["psd_recoveries"] >= 1'
    zd_json_check "$OUT" '0.74 <= j["metrics"]["test_accuracy"] <= 0.92'
    grep -q "job $J: restored every ps from the checkpoint at step" "$ZD_TMP/chief.log" || zd_fail "job $J: no restore"
    grep -qE "restored step [0-9]+ of job $J from" "$ZD_TMP/ps1.log" || zd_fail "ps1 restored no step of job $J"
    echo "job $J: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("step", j["step"], "test accuracy", j["metrics"]["test_accuracy"])' "$OUT")"
done
zd_ok "psd kill -9: both jobs restored from their own checkpoints, both done with exactly 300 steps and a normal accuracy"
for J in "$A" "$B"; do dropped chief "$J"; done
grep -qE "dropped job $A: [1-9][0-9]* shards, [1-9][0-9]* bytes" "$ZD_TMP/ps0.log" || zd_fail "ps0 did not log the drop of $A"
zd_ok "jobs $A and $B ended: their variables are dropped from both psds ($(grep "dropped job $A" "$ZD_TMP/ps0.log" | sed 's/.*dropped/dropped/'))"

# The worker held both jobs' sessions at once: each started before either stopped.
for w in worker0 worker1; do
    python3 - "$ZD_TMP/$w.log" "$A" "$B" <<'PY' || zd_fail "$w did not hold both jobs at once"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
def first(pat):
    return next((i for i, l in enumerate(lines) if re.search(pat, l)), None)
sa, sb = first(r"job 'fmnist-a@%s' started" % sys.argv[2]), first(r"job 'fmnist-b@%s' started" % sys.argv[3])
stop = first(r"job 'fmnist-[ab]@j[0-9a-f]+' stopped")
sys.exit(0 if sa is not None and sb is not None and (stop is None or max(sa, sb) < stop) else 1)
PY
done
zd_ok "each worker held both jobs' sessions at once and ran their closures interleaved"

# checkpoint.dir holds job A's checkpoints; job B's are under the state dir.
[[ -r $CKPT_A/$A/ckpt-300/manifest.json && -r $CKPT_A/$A/ckpt-300/manifest-ps0.json ]] ||
    zd_fail "no final checkpoint of job A in its checkpoint.dir: $(ls -R "$CKPT_A" 2>&1 | head)"
compgen -G "$ZD_TMP/state/jobs/$A/ckpt-*" >/dev/null && zd_fail "job A's checkpoints also under the state dir"
[[ -r $ZD_TMP/state/jobs/$B/ckpt-300/manifest.json ]] || zd_fail "no final checkpoint of job B under the state dir"
python3 - "$CKPT_A/$A/ckpt-300" "$A" <<'PY' || zd_fail "job A's checkpoint holds another job's variables"
import glob, json, sys
names = [v["name"] for m in glob.glob(sys.argv[1] + "/manifest-ps*.json") for v in json.load(open(m))["variables"]]
sys.exit(0 if names and all(n.startswith(sys.argv[2] + "/") for n in names) else 1)
PY
zd_ok "job A's checkpoints are in its checkpoint.dir ($CKPT_A/$A), holding only its variables; job B's under the state dir"

# The sidecar evaluator found each job's checkpoints where they are: its final one evaluated.
for J in "$A" "$B"; do
    deadline=$((SECONDS + 60))
    until grep -qE '"eval_step": ?300[,}]' "$ZD_TMP/state/jobs/$J/evaluations.jsonl" 2>/dev/null; do
        ((SECONDS < deadline)) || zd_fail "job $J: no evaluation of step 300: $(tail -3 "$ZD_TMP/evaluator.log")"
        sleep 0.2
    done
done
zd_ok "the sidecar evaluator evaluated both jobs' final checkpoints (job A's from its checkpoint.dir)"

for J in "$E" "$C" "$D"; do coord_wait_state "$J" done 120; done
python3 - "$ZD_TMP/chief.log" "$A" "$B" "$C" "$D" "$E" <<'PY' || zd_fail "the queued jobs did not start in order: $(grep -E 'running on|: done at' "$ZD_TMP/chief.log")"
import re, sys
log = open(sys.argv[1]).read().splitlines()
a, b, c, d, e = sys.argv[2:]
def at(pat):
    return next(i for i, l in enumerate(log) if re.search(pat, l))
start = {j: at(r"job %s \(.*\): running on" % j) for j in (c, d, e)}
end = {j: at(r"job %s \(.*\): done at step" % j) for j in (a, b, c, e)}
assert start[e] < start[c], "E (priority 5) starts before C"
assert start[e] > min(end[a], end[b]), "E waits for a slot"
assert start[d] > max(end.values()), "D (multi_worker_mirrored) starts once every other job ended"
assert "beside other jobs" not in log[start[d]]
PY
zd_ok "queued jobs ran as slots freed: the priority-5 job first, the multi_worker_mirrored job alone once all others ended"
for J in "$E" "$C"; do dropped chief "$J"; done
for i in 0 1; do
    "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json >"$OUT"
    zd_json_check "$OUT" 'j["shards"] == 0 and j["variables"] == 0 and j["value_bytes"] + j["slot_bytes"] == 0'
done
zd_ok "every job ended: both psds hold no shard and no byte"

# ---- SIGTERM of the chief with two jobs running: both checkpoint, both resume at the next start; cancel one ----
coord_softmax_job "$ZD_TMP/long1.json" 1000000 ', "checkpoint": {"every_steps": 100000}'
coord_softmax_job "$ZD_TMP/long2.json" 1000000 ', "checkpoint": {"every_steps": 100000}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/long1.json" --cluster "$CLUSTER" --detach
L1=$(cat "$OUT")
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/long2.json" --cluster "$CLUSTER" --detach
L2=$(cat "$OUT")
coord_wait_json "" "len([x for x in j.get('jobs', []) if x['job_id'] in ('$L1', '$L2') and x['step'] >= 20]) == 2" 60
zd_stop chief TERM
[[ $ZD_RC -eq 0 ]] || zd_fail "chief exit status $ZD_RC after SIGTERM"
for J in "$L1" "$L2"; do
    grep -qE "job $J: checkpoint at step [1-9][0-9]*" "$ZD_TMP/chief.log" || zd_fail "job $J: no checkpoint at the stop"
done
zd_start chief2 "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$ZD_TMP/state" --checkpoint-root "$ZD_TMP" \
    --max-running-jobs 2
zd_wait_log chief2 "chief serving at" 60
for J in "$L1" "$L2"; do
    zd_wait_log chief2 "job $J: restored every ps from the checkpoint at step [1-9]" 60
done
ps_shards 0 | grep "^$L2/" >"$ZD_TMP/l2-before" || zd_fail "ps 0 holds no variable of job $L2"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$L1" --cluster "$CLUSTER"
coord_wait_state "$L1" cancelled 60
zd_json_check "$ZD_TMP/st.json" 'j["step"] > 20'
dropped chief2 "$L1"
coord_wait_json "$L2" "j['state'] == 'running'" 10
# Job L2's shards are all still there, each trained on since: its step counters only went up, and go on.
python3 - "$ZD_TMP/l2-before" <(ps_shards 0 | grep "^$L2/") <<'PY' || zd_fail "job $L2's shards changed with $L1's drop"
import sys
before = dict(l.split() for l in open(sys.argv[1]))
after = dict(l.split() for l in open(sys.argv[2]))
assert before.keys() == after.keys(), (before, after)
assert all(int(after[k]) >= int(before[k]) for k in before), (before, after)
PY
deadline=$((SECONDS + 30))
until [[ $(ps_shards 0 | grep "^$L2/" | sort) != $(sort "$ZD_TMP/l2-before") ]]; do
    ((SECONDS < deadline)) || zd_fail "job $L2 does not train on after $L1's drop"
    sleep 0.2
done
zd_ok "a cancelled job's variables leave both psds; the running job's shards are all there and it trains on"
zd_run_expect 0 "$OUT" "$ZDIST_BIN" cancel "$L2" --cluster "$CLUSTER"
coord_wait_state "$L2" cancelled 60
dropped chief2 "$L2"
zd_ok "SIGTERM of the chief with two jobs running: both checkpointed, both resumed from their own checkpoint; a cancel ends one, the other runs on"

# ---- --keep-variables keeps them; a later chief without it drops them, a psd that is down at that moment when it is back ----
zd_stop chief2 TERM
zd_start chief3 "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$ZD_TMP/state" --keep-variables
zd_wait_log chief3 "chief serving at" 60
coord_softmax_job "$ZD_TMP/k.json" 40
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/k.json" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == 40'
K=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
for i in 0 1; do ps_shards "$i" | grep -q "^$K/" || zd_fail "--keep-variables: ps $i holds no variable of job $K"; done
! grep -q "job $K: dropped" "$ZD_TMP/chief3.log" || zd_fail "--keep-variables: job $K's variables were dropped"
zd_stop chief3 TERM
kill -STOP "${ZD_PID[ps1]}" # down (holding job K's variables) when the next chief starts
zd_start chief4 "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$ZD_TMP/state"
zd_wait_log chief4 "job $K: dropped its variables from ps 0: [1-9][0-9]* shards" 30
zd_wait_log chief4 "job $K: ps 1 is unreachable .*dropped there when it is back" 30
zd_json_check "$ZD_TMP/state/jobs/$K/state.json" 'not j["variables_dropped"]'
kill -CONT "${ZD_PID[ps1]}"
dropped chief4 "$K"
# The drop sent while ps 1 was stopped, or the one after, took its shard (the other then finds none).
grep -qE "dropped job $K: [1-9][0-9]* shards" "$ZD_TMP/ps1.log" || zd_fail "ps 1 never dropped job $K's shards"
[[ $(grep -c "job $K: ps 1 is unreachable" "$ZD_TMP/chief4.log") == 1 ]] || zd_fail "not one line for the psd that was down"
for J in "$A" "$B" "$C" "$E" "$L1" "$L2"; do ! grep -q "job $J: dropped" "$ZD_TMP/chief4.log" || zd_fail "job $J dropped twice"; done
zd_ok "--keep-variables kept job $K's variables; the next chief dropped them, from ps 1 once it was back (one line while it was down)"
echo "all $ZD_PASSED checks passed"
