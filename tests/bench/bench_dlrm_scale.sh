#!/usr/bin/env bash
# Embedding tables of gigabytes on the psds (issue 30's goal: >= 2 GiB of values and optimizer slots spread
# over the psds, trained and checkpointed). Not in CI: minutes, and gigabytes of memory and disk.
#
#     bash tests/bench/bench_dlrm_scale.sh [BUILD_DIR] [--rows N] [--dim D] [--optimizer adam|adagrad]
#                                          [--every S] [--batch B]
#
# Generates N rows (default 1200000) with `zdist gen criteo` (4 files per split), then trains
# deploy/examples/dlrm-criteo-ps.json (26 dynamic tables, the C features' ids as they are) for one epoch
# on a local cluster of 2 ps + 2 workers + a chief (--keep-variables, so the tables stay on the psds
# after the job), with the tables and the bottom MLP's output D wide (default 192: DLRM's interaction
# takes vectors of one width), the optimizer's slots beside every row (adam, default: 2 slots; adagrad:
# 1), global batch B (default 512) and a checkpoint every S steps (default: a fifth of the epoch), the
# last at the end. A row takes D * 4 * (1 + slots) bytes plus at most 48 of index and header; the
# defaults (~1.2M distinct ids, 2,352 bytes a row) make about 2.6 GiB.
# Reports: the load average before and after, the generation's time, the job's time and test AUC
# against the teacher's, per psd the rows and bytes of its tables (`zdist ps stats --json`) and its
# resident memory, and every save each psd logged (step, bytes, milliseconds: the first a full
# checkpoint of the dynamic tables, then incremental ones, a full every 10th) with the checkpoint
# directories' sizes on disk. BUILD_DIR defaults to build-rel, then build (Release).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=""
rows=1200000
dim=192
optimizer=adam
every=0
batch=512
while [[ $# -gt 0 ]]; do
    case $1 in
    --rows) rows=$2; shift 2 ;;
    --dim) dim=$2; shift 2 ;;
    --optimizer) optimizer=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) build=$1; shift ;;
    esac
done
if [[ -z $build ]]; then
    for b in "$root/build-rel" "$root/build"; do [[ -x $b/cli/zdist ]] && { build=$b; break; }; done
fi
[[ -n $build && -x $build/cli/zdist ]] || { echo "bench_dlrm_scale.sh: build first (cmake --build build-rel)" >&2; exit 2; }
export ZDIST_BIN=$build/cli/zdist ZDIST_PSD_BIN=$build/psd/zdist-psd ZDIST_WORKER_BIN=$build/worker/zdist-worker
export ZDIST_COORDINATOR_BIN=$build/coordinator/zdist-coordinator
source "$root/tests/integration/lib.sh"
zd_init bench-dlrm-scale
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(awk '/MemAvailable/ {printf "%.1f GiB available", $2 / 1048576}' /proc/meminfo)"

DATA=$ZD_TMP/data
mkdir -p "$DATA"
t0=$SECONDS
"$ZDIST_BIN" gen criteo --rows "$rows" --files 4 --seed 1 --out "$DATA/criteo" --json >"$ZD_TMP/gen.json"
python3 - "$ZD_TMP/gen.json" "$((SECONDS - t0))" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
print("generated %d train + %d test rows (%.2f GB of records) in %s s; the teacher's test AUC %.4f"
      % (g["train_rows"], g["test_rows"], g["bytes"] / 1e9, sys.argv[2], g["teacher_auc"]))
PY

# The example, D wide, the optimizer, batch, checkpoints every S steps; one epoch.
python3 - "$root/deploy/examples/dlrm-criteo-ps.json" "$ZD_TMP/job.json" "$DATA" "$dim" "$optimizer" "$every" \
    "$batch" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["train_rows"])' "$ZD_TMP/gen.json")" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
d, dim, opt, every, batch, train = sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
j["name"] = "dlrm-scale"
j["dataset"]["train"]["files"] = d + "/criteo/train/part-*.tfrecord"
j["dataset"]["test"]["files"] = d + "/criteo/test/part-*.tfrecord"
j["dataset"]["global_batch_size"] = batch
j["epochs"] = 1
for l in j["model"]["layers"]:
    if "embedding" in l:
        l["embedding"]["output_dim"] = dim
    if l["name"] == "bottom_2":
        l["dense"]["units"] = dim
j["optimizer"] = {"type": "adam", "learning_rate": 0.001} if opt == "adam" else {"type": "adagrad", "learning_rate": 0.05}
j["checkpoint"] = {"every_steps": every or max(1, train // batch // 5)}
json.dump(j, open(sys.argv[2], "w"))
PY

# 2 psds, 2 workers (--data-root $DATA), a chief keeping the ended job's variables.
zd_write_cluster "$ZD_TMP/cluster.json" 2 2
python3 - "$ZD_TMP/cluster.json" "127.0.0.1:$(zd_free_port)" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["cluster"]["chief"] = [sys.argv[2]]
json.dump(c, open(sys.argv[1], "w"))
PY
for i in 0 1; do zd_start "ps$i" "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/cluster.json" --task "ps:$i" --checkpoint-root "$ZD_TMP"; done
for i in 0 1; do
    zd_start "worker$i" "$ZDIST_WORKER_BIN" --cluster "$ZD_TMP/cluster.json" --task "worker:$i" --data-root "$DATA"
done
zd_start chief "$ZDIST_COORDINATOR_BIN" --cluster "$ZD_TMP/cluster.json" --task chief:0 --state-dir "$ZD_TMP/state" \
    --checkpoint-root "$ZD_TMP" --keep-variables
for i in 0 1; do zd_wait_psd "ps$i" "${ZD_PS_ADDRS[$i]}" 60; done
for i in 0 1; do zd_wait_log "worker$i" "serving at" 60; done
zd_wait_log chief "chief serving at" 60

t0=$SECONDS
"$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$ZD_TMP/cluster.json" --json >"$ZD_TMP/job.out"
elapsed=$((SECONDS - t0))
for i in 0 1; do
    "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json >"$ZD_TMP/stats$i.json"
    awk '/VmRSS|VmHWM/ {print $1, $2}' "/proc/${ZD_PID[ps$i]}/status" >"$ZD_TMP/rss$i.txt"
done
python3 - "$ZD_TMP" "$elapsed" "$dim" "$optimizer" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["teacher_auc"])' "$ZD_TMP/gen.json")" <<'PY'
import glob, json, os, re, sys
tmp, elapsed, dim, opt, teacher = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
j = json.load(open(tmp + "/job.out"))
m = j.get("metrics", {})
print("job %s: %s in %d s, %s examples, test AUC %s (teacher %.4f), log loss %s"
      % (j.get("job_id"), j.get("state"), elapsed, m.get("examples"), m.get("test_auc"), teacher, m.get("test_loss")))
slots = {"adam": 2, "adagrad": 1}[opt]
total_rows = total_bytes = 0
print("| psd | tables | rows | bytes | bytes/row | payload+slots/row | VmRSS | VmHWM |")
print("|---|---|---|---|---|---|---|---|")
for i in (0, 1):
    es = json.load(open("%s/stats%d.json" % (tmp, i)))["embeddings"]
    rows, b = sum(e["rows"] for e in es), sum(e["bytes"] for e in es)
    mem = dict(l.split() for l in open("%s/rss%d.txt" % (tmp, i)))
    total_rows += rows
    total_bytes += b
    print("| ps%d | %d | %d | %.3f GiB | %.0f | %d | %.2f GiB | %.2f GiB |"
          % (i, len(es), rows, b / 2**30, b / max(rows, 1), dim * 4 * (1 + slots),
             int(mem["VmRSS:"]) / 2**20, int(mem["VmHWM:"]) / 2**20))
print("in all: %d rows, %.3f GiB of tables (values and %s's %d slot(s) per row)"
      % (total_rows, total_bytes / 2**30, opt, slots))
print("\nsaves (each psd's log: step, bytes, ms):")
for i in (0, 1):
    for line in open("%s/ps%d.log" % (tmp, i)):
        s = re.search(r"saved step (\d+) of job \S+ to '([^']+)' \((\d+) bytes, (\d+) ms\)", line)
        if s:
            print("  ps%d step %6s: %8.1f MB in %6s ms  (%.0f MB/s)" % (i, s.group(1), int(s.group(3)) / 1e6, s.group(4),
                  int(s.group(3)) / 1e6 / max(int(s.group(4)), 1) * 1000))
print("\ncheckpoint directories on disk:")
for d in sorted(glob.glob(tmp + "/**/ckpt-*", recursive=True), key=lambda p: int(p.rsplit("-", 1)[1])):
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)
    print("  %s: %.1f MB" % (os.path.relpath(d, tmp), size / 1e6))
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
