#!/usr/bin/env bash
# The DLRM example against its PyTorch twin, and zdist's strategies against each other (issue 30).
#
#     bash tests/bench/bench_dlrm.sh [BUILD_DIR] [--rows N] [--rounds R] [--epochs E] [--only run,torch,ps2,ps1,psdyn]
#
# Generates N rows (default 100000; the issue's goal is 10^7) with `zdist gen criteo` (4 files per
# split), then, R rounds (default 3) one after the other in one sitting, trains
# deploy/examples/dlrm-criteo-run.json (data path and epochs overridden) with `zdist run`, its PyTorch
# twin tests/bench/bench_dlrm_torch.py (the same model, Keras hashing, Adagrad with Keras's initial
# accumulator 0.1, batch and epochs; 2 threads), and dlrm-criteo-ps-hashed.json (the same model and
# tables) under parameter_server on a local cluster of 2 ps + 2 workers + a chief and on one of 2 ps +
# 1 worker + a chief; with --only ...,psdyn also dlrm-criteo-ps.json (dynamic tables) on the first. Prints the
# median examples/s and test AUC of each beside the teacher's AUC (the ceiling); every run's JSON is
# kept in BUILD_DIR/bench-dlrm/. A warm-up round of
# each comes first and is not counted. BUILD_DIR defaults to build-rel, then build (Release: the
# sanitizers' builds are several times slower). Debian's python3-torch is installed with apt-get
# when /usr/bin/python3 cannot import torch; without it the twin is skipped, saying why.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=""
rows=100000
rounds=3
epochs=1
only="run,torch,ps2,ps1"
while [[ $# -gt 0 ]]; do
    case $1 in
    --rows) rows=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) build=$1; shift ;;
    esac
done
if [[ -z $build ]]; then
    for b in "$root/build-rel" "$root/build"; do [[ -x $b/cli/zdist ]] && { build=$b; break; }; done
fi
[[ -n $build && -x $build/cli/zdist ]] || { echo "bench_dlrm.sh: build first (cmake --build build-rel)" >&2; exit 2; }
driver=$build/tests/integration/tfrecord_driver
export ZDIST_BIN=$build/cli/zdist ZDIST_PSD_BIN=$build/psd/zdist-psd ZDIST_WORKER_BIN=$build/worker/zdist-worker
export ZDIST_COORDINATOR_BIN=$build/coordinator/zdist-coordinator
source "$root/tests/integration/lib.sh"
zd_init bench-dlrm
wanted() { [[ ,$only, == *,$1,* ]]; }

py=/usr/bin/python3
if wanted torch && ! $py -c 'import torch' 2>/dev/null; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        echo "bench_dlrm.sh: installing Debian's python3-torch for the PyTorch twin (apt-get)" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch >/dev/null 2>&1 || true
    fi
    if ! $py -c 'import torch' 2>/dev/null; then
        echo "bench_dlrm.sh: skipping the PyTorch twin: /usr/bin/python3 cannot import torch and apt-get install python3-torch did not work (not root, or no apt)" >&2
        only=${only//torch/}
    fi
fi
[[ -x $driver ]] || { wanted torch && echo "bench_dlrm.sh: skipping the PyTorch twin: no $driver to read the files" >&2; only=${only//torch/}; }
[[ $only == *[a-z]* ]] || exit 77 # nothing left to measure: skipped, the reason above

DATA=$ZD_TMP/data
mkdir -p "$DATA"
zd_log "generating $rows rows"
"$ZDIST_BIN" gen criteo --rows "$rows" --files 4 --seed 1 --out "$DATA/criteo" --json >"$ZD_TMP/gen.json"
teacher=$(python3 -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["teacher_auc"])' "$ZD_TMP/gen.json")

# job_copy EXAMPLE OUT: the example with its data under $DATA and --epochs.
job_copy() {
    python3 - "$root/deploy/examples/$1" "$2" "$DATA" "$epochs" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["dataset"]["train"]["files"] = sys.argv[3] + "/criteo/train/part-*.tfrecord"
j["dataset"]["test"]["files"] = sys.argv[3] + "/criteo/test/part-*.tfrecord"
j["epochs"] = int(sys.argv[4])
j.pop("checkpoint", None)  # examples/s of training, not of checkpoints
json.dump(j, open(sys.argv[2], "w"))
PY
}
job_copy dlrm-criteo-run.json "$ZD_TMP/run.json"
job_copy dlrm-criteo-ps-hashed.json "$ZD_TMP/ps.json"
job_copy dlrm-criteo-ps.json "$ZD_TMP/psdyn.json"

if wanted torch; then
    spec="label:fixed:int64"
    for i in $(seq 1 13); do spec="$spec I$i:fixed:float32"; done
    for i in $(seq 1 26); do spec="$spec C$i:fixed:int64"; done
    # shellcheck disable=SC2086 # the feature list, split on purpose
    "$driver" $spec -- "$DATA"/criteo/train/part-*.tfrecord >"$ZD_TMP/train.txt"
    # shellcheck disable=SC2086
    "$driver" $spec -- "$DATA"/criteo/test/part-*.tfrecord >"$ZD_TMP/test.txt"
fi

# cluster NAME NWORKERS: 2 psds, NWORKERS workers (--data-root $DATA) and a chief, serving; its file in $ZD_TMP/NAME.json.
cluster() {
    local name=$1 n=$2 i
    zd_write_cluster "$ZD_TMP/$name.json" 2 "$n"
    python3 - "$ZD_TMP/$name.json" "127.0.0.1:$(zd_free_port)" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["cluster"]["chief"] = [sys.argv[2]]
json.dump(c, open(sys.argv[1], "w"))
PY
    for i in 0 1; do zd_start "$name-ps$i" "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/$name.json" --task "ps:$i" --checkpoint-root "$ZD_TMP"; done
    for ((i = 0; i < n; i++)); do
        zd_start "$name-worker$i" "$ZDIST_WORKER_BIN" --cluster "$ZD_TMP/$name.json" --task "worker:$i" --data-root "$DATA"
    done
    zd_start "$name-chief" "$ZDIST_COORDINATOR_BIN" --cluster "$ZD_TMP/$name.json" --task chief:0 \
        --state-dir "$ZD_TMP/$name-state" --checkpoint-root "$ZD_TMP"
    for i in 0 1; do zd_wait_psd "$name-ps$i" "${ZD_PS_ADDRS[$i]}" 60; done
    for ((i = 0; i < n; i++)); do zd_wait_log "$name-worker$i" "serving at" 60; done
    zd_wait_log "$name-chief" "chief serving at" 60
}
{ wanted ps2 || wanted psdyn; } && cluster ps2 2
wanted ps1 && cluster ps1 1

KEEP=$build/bench-dlrm
mkdir -p "$KEEP"
RESULTS=$KEEP/results.txt
: >"$RESULTS"
# one KIND ROUND: a run; its examples/s, test AUC and log loss appended to $RESULTS (round 0: warm-up, dropped).
one() {
    local kind=$1 round=$2 out=$KEEP/$1-$2.json
    case $kind in
    run) "$ZDIST_BIN" run "$ZD_TMP/run.json" --json --quiet >"$out" ;;
    torch) $py "$here/bench_dlrm_torch.py" "$ZD_TMP/run.json" "$ZD_TMP/train.txt" "$ZD_TMP/test.txt" --threads 2 >"$out" ;;
    psdyn) "$ZDIST_BIN" submit "$ZD_TMP/psdyn.json" --cluster "$ZD_TMP/ps2.json" --json >"$out" ;;
    ps*) "$ZDIST_BIN" submit "$ZD_TMP/ps.json" --cluster "$ZD_TMP/$kind.json" --json >"$out" ;;
    esac
    # examples/s of training: zdist run's examples / train_seconds; PyTorch's loop alone (data already
    # tensors); parameter_server's from metrics.jsonl, steps between its first and last training lines
    # over their times (the coordinator's examples_per_sec is the last window's). The whole job's rate
    # (setup, tables created, evaluation, the final checkpoint too) beside it.
    python3 - "$out" "$kind" "$round" "$ZD_TMP/run.json" >>"$RESULTS" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1]))
kind = sys.argv[2]
gbs = json.load(open(sys.argv[4]))["dataset"]["global_batch_size"]
if kind.startswith("ps"):
    m = j["metrics"]
    lines = [json.loads(l) for l in open(os.path.join(j["dir"], "metrics.jsonl")) if l.strip()]
    lines = [l for l in lines if "time" in l and "step" in l and "test_auc" not in l]
    a, b = lines[0], lines[-1]
    train = (b["step"] - a["step"]) * gbs / (b["time"] - a["time"]) if b["time"] > a["time"] else 0
    whole = m["examples"] / j["elapsed_s"]
elif kind == "run":
    m = j
    train, whole = j["examples"] / j["train_seconds"], j["examples"] / j["wall_seconds"]
else:
    m = j
    train = whole = j["examples_per_sec"]
print(kind, sys.argv[3], "%.0f" % train, "%.0f" % whole, "%.4f" % m["test_auc"], "%.4f" % m["test_loss"])
PY
    zd_log "$(tail -1 "$RESULTS")"
}
for ((r = 0; r <= rounds; r++)); do
    for k in run torch ps2 ps1 psdyn; do wanted $k && one $k $r; done
done

python3 - "$RESULTS" "$teacher" "$rows" "$epochs" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
names = {"run": "zdist run (one_device)", "torch": "PyTorch twin, 2 threads",
         "ps2": "parameter_server 2 workers + 2 ps", "ps1": "parameter_server 1 worker + 2 ps",
         "psdyn": "the same 2w + 2ps, dynamic tables"}
med = {}
print("\n%s rows (90%% train), %s epoch(s); teacher's test AUC %s; medians of %d rounds after a warm-up"
      % (sys.argv[3], sys.argv[4], sys.argv[2], max(int(r[1]) for r in rows)))
print("| %-34s | %10s | %10s | %8s | %8s |" % ("", "train ex/s", "job ex/s", "test AUC", "log loss"))
print("|%s|%s|%s|%s|%s|" % ("-" * 36, "-" * 12, "-" * 12, "-" * 10, "-" * 10))
for k in ("run", "torch", "ps2", "ps1", "psdyn"):
    got = [r for r in rows if r[0] == k and int(r[1]) > 0]
    if not got:
        continue
    med[k] = [statistics.median(float(r[i]) for r in got) for i in (2, 3, 4, 5)]
    print("| %-34s | %10.0f | %10.0f | %8.4f | %8.4f |" % (names[k], *med[k]))
def ratio(a, b, what):
    if a in med and b in med:
        print("%s: %.2fx" % (what, med[a][0] / med[b][0]))
ratio("run", "torch", "zdist run / PyTorch")
ratio("ps2", "run", "parameter_server 2w+2ps / zdist run")
ratio("ps2", "ps1", "parameter_server 2w+2ps / 1 worker")
ratio("psdyn", "ps2", "dynamic tables / hashed tables (2w+2ps)")
PY
