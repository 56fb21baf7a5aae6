#!/usr/bin/env bash
# Where parameter_server's time goes on DLRM (issue 30: "five processes share two cores: say where the
# time goes"). Not in CI.
#
#     bash tests/bench/bench_dlrm_profile.sh [BUILD_DIR] [--rows N] [--job EXAMPLE] [--workers W]
#
# Generates N rows (default 200000), trains EXAMPLE (default dlrm-criteo-ps-hashed.json, the run
# example's model) for one epoch on a local cluster of 2 ps + W workers (default 2) + a chief, and
# reports, from /proc and the psds' own counters (no profiler needed): each process's CPU seconds
# (user and system) over the job against its wall time and the machine's cores; its voluntary and
# involuntary context switches; each psd's requests per method with their p50 and p99 service time
# (`zdist ps stats --json`), so requests per step and the psds' share of a step follow; the
# examples/s; and zdist run's examples/s and CPU on the same data (dlrm-criteo-run.json). BUILD_DIR defaults to build-rel, then build (Release).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=""
rows=200000
job=dlrm-criteo-ps-hashed.json
workers=2
while [[ $# -gt 0 ]]; do
    case $1 in
    --rows) rows=$2; shift 2 ;;
    --job) job=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) build=$1; shift ;;
    esac
done
if [[ -z $build ]]; then
    for b in "$root/build-rel" "$root/build"; do [[ -x $b/cli/zdist ]] && { build=$b; break; }; done
fi
[[ -n $build && -x $build/cli/zdist ]] || { echo "bench_dlrm_profile.sh: build first (cmake --build build-rel)" >&2; exit 2; }
export ZDIST_BIN=$build/cli/zdist ZDIST_PSD_BIN=$build/psd/zdist-psd ZDIST_WORKER_BIN=$build/worker/zdist-worker
export ZDIST_COORDINATOR_BIN=$build/coordinator/zdist-coordinator
source "$root/tests/integration/lib.sh"
zd_init bench-dlrm-profile
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"

DATA=$ZD_TMP/data
mkdir -p "$DATA"
"$ZDIST_BIN" gen criteo --rows "$rows" --files 4 --seed 1 --out "$DATA/criteo" --json >"$ZD_TMP/gen.json"
# job_copy EXAMPLE OUT: the example on this data, one epoch, no checkpoints.
job_copy() {
    python3 - "$root/deploy/examples/$1" "$2" "$DATA" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["dataset"]["train"]["files"] = sys.argv[3] + "/criteo/train/part-*.tfrecord"
j["dataset"]["test"]["files"] = sys.argv[3] + "/criteo/test/part-*.tfrecord"
j["epochs"] = 1
j.pop("checkpoint", None)
json.dump(j, open(sys.argv[2], "w"))
PY
}
job_copy "$job" "$ZD_TMP/job.json"
job_copy dlrm-criteo-run.json "$ZD_TMP/run.json"

zd_write_cluster "$ZD_TMP/cluster.json" 2 "$workers"
python3 - "$ZD_TMP/cluster.json" "127.0.0.1:$(zd_free_port)" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["cluster"]["chief"] = [sys.argv[2]]
json.dump(c, open(sys.argv[1], "w"))
PY
names=(ps0 ps1)
for i in 0 1; do zd_start "ps$i" "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/cluster.json" --task "ps:$i" --checkpoint-root "$ZD_TMP"; done
for ((i = 0; i < workers; i++)); do
    zd_start "worker$i" "$ZDIST_WORKER_BIN" --cluster "$ZD_TMP/cluster.json" --task "worker:$i" --data-root "$DATA"
    names+=("worker$i")
done
zd_start chief "$ZDIST_COORDINATOR_BIN" --cluster "$ZD_TMP/cluster.json" --task chief:0 --state-dir "$ZD_TMP/state" \
    --checkpoint-root "$ZD_TMP"
names+=(chief)
for i in 0 1; do zd_wait_psd "ps$i" "${ZD_PS_ADDRS[$i]}" 60; done
for ((i = 0; i < workers; i++)); do zd_wait_log "worker$i" "serving at" 60; done
zd_wait_log chief "chief serving at" 60

# The sampler: every 0.2 s each process's threads' CPU ticks and context switches, first and last seen per
# thread (a thread's share counts while it lives; the process's own totals from /proc/PID/stat include the
# threads that ended).
pids=""
for n in "${names[@]}"; do pids="$pids $n=${ZD_PID[$n]}"; done
python3 - "$ZD_TMP/threads.json" $pids <<'PY' &
import json, os, signal, sys, time
out, procs = sys.argv[1], dict(a.split("=") for a in sys.argv[2:])
first, last, totals0, stop = {}, {}, {}, []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
def proc_ticks(pid):
    f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
def sample():
    for name, pid in procs.items():
        try:
            totals0.setdefault(name, proc_ticks(pid))
            last[("proc", name)] = proc_ticks(pid)
            for tid in os.listdir("/proc/%s/task" % pid):
                st = open("/proc/%s/task/%s/stat" % (pid, tid)).read()
                comm = st[st.index("(") + 1:st.rindex(")")]
                f = st.rsplit(")", 1)[1].split()
                cs = {l.split(":")[0]: int(l.split()[1]) for l in open("/proc/%s/task/%s/status" % (pid, tid))
                      if "ctxt_switches" in l}
                v = (int(f[11]), int(f[12]), cs["voluntary_ctxt_switches"], cs["nonvoluntary_ctxt_switches"])
                first.setdefault((name, tid, comm), v)
                last[(name, tid, comm)] = v
        except (FileNotFoundError, ProcessLookupError, ValueError):
            pass
while not stop:
    sample()
    time.sleep(0.2)
sample()
rows = [[k[0], k[2], *[y - x for x, y in zip(first[k], last[k])]] for k in first]
json.dump({"threads": rows, "procs": {n: last[("proc", n)] - totals0[n] for n in totals0}}, open(out, "w"))
PY
sampler=$!
t0=$(date +%s.%N)
"$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$ZD_TMP/cluster.json" --json >"$ZD_TMP/job.out"
t1=$(date +%s.%N)
kill -TERM "$sampler"
wait "$sampler" || true
for i in 0 1; do "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[$i]}" --json >"$ZD_TMP/stats$i.json"; done
python3 - "$ZD_TMP" "$t0" "$t1" "$(getconf CLK_TCK)" "$(nproc)" <<'PY'
import collections, json, sys
tmp, t0, t1, hz, cores = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
wall = t1 - t0
j = json.load(open(tmp + "/job.out"))
m = j.get("metrics", {})
steps = j.get("step") or 0
t = json.load(open(tmp + "/threads.json"))
print("job: %s, %s examples in %.1f s wall (%.0f examples/s), %s steps; test AUC %s"
      % (j.get("state"), m.get("examples"), wall, (m.get("examples") or 0) / wall, steps, m.get("test_auc")))
tot = sum(t["procs"].values()) / hz
print("CPU of the five processes: %.1f s of the %.1f s the machine had (%.0f%%; the rest went to other processes)"
      % (tot, wall * cores, 100 * tot / wall / cores))
print("| process | thread | CPU s (user + sys) | user s | sys s | voluntary cs | per step | involuntary cs |")
print("|---|---|---|---|---|---|---|---|")
agg = collections.defaultdict(lambda: [0, 0, 0, 0])
for name, comm, u, s_, v, iv in t["threads"]:
    a = agg[(name, comm)]
    for i, x in enumerate((u, s_, v, iv)):
        a[i] += x
for (name, comm), (u, s_, v, iv) in sorted(agg.items()):
    if u + s_ + v > 0:
        print("| %s | %s | %.2f | %.2f | %.2f | %d | %.1f | %d |"
              % (name, comm, (u + s_) / hz, u / hz, s_ / hz, v, v / max(steps, 1), iv))
print("per process (with the threads that ended): " + ", ".join("%s %.2f s" % (n, c / hz) for n, c in t["procs"].items()))
for i in (0, 1):
    st = json.load(open("%s/stats%d.json" % (tmp, i)))
    ms = [x for x in st["methods"] if x["requests"] > 0 and x["name"] in ("pull", "pull_rows", "push", "push_pull")]
    print("ps%d serves: " % i + ", ".join("%s %d (%.1f a step, p50 %d us, p99 %d us)"
                                       % (x["name"], x["requests"], x["requests"] / max(steps, 1), x["p50_us"],
                                          x["p99_us"]) for x in ms))
PY
# The same data by zdist run (dlrm-criteo-run.json: the hashed model in one process), its CPU beside.
/usr/bin/time -f "%U %S %e" -o "$ZD_TMP/run.time" "$ZDIST_BIN" run "$ZD_TMP/run.json" --json --quiet >"$ZD_TMP/run.out"
python3 - "$ZD_TMP" "$(getconf CLK_TCK)" <<'PY'
import json, sys
tmp, hz = sys.argv[1], int(sys.argv[2])
r = json.load(open(tmp + "/run.out"))
u, s, e = (float(x) for x in open(tmp + "/run.time").read().split())
t = json.load(open(tmp + "/threads.json"))
j = json.load(open(tmp + "/job.out"))
ps_cpu, ps_ex = sum(t["procs"].values()) / hz, j.get("metrics", {}).get("examples") or 1
print("zdist run: %d examples, %.0f examples/s of training, %.1f CPU s (user %.1f, sys %.1f) in %.1f s wall"
      % (r["examples"], r["examples"] / r["train_seconds"], u + s, u, s, e))
print("CPU per 1000 examples: zdist run %.1f ms (the whole process: loading and evaluation too), parameter_server %.1f ms"
      % (1e6 * (u + s) / r["examples"], 1e6 * ps_cpu / ps_ex))
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
