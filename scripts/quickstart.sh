#!/usr/bin/env bash
# The main job: install what is needed, build, then run what zdist can do
# today end to end on this machine (see README.md, "What the main job does").
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
build=${ZDIST_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)"
zdist="$build/cli/zdist"
psd="$build/psd/zdist-psd"

say() { printf '\n== %s\n' "$*"; }

# A local cluster on free loopback ports: chief, 2 workers, 2 ps.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
work=$(mktemp -d /tmp/zdist-quickstart.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/cluster.json" <<JSON
{"cluster": {"chief": ["127.0.0.1:$(free_port)"],
             "worker": ["127.0.0.1:$(free_port)", "127.0.0.1:$(free_port)"],
             "ps": ["127.0.0.1:$(free_port)", "127.0.0.1:$(free_port)"]}}
JSON

say "The cluster, as TFConfigClusterResolver sees it from each task"
for task in chief:0 worker:0 worker:1 ps:0 ps:1; do
    "$zdist" resolve --cluster "$work/cluster.json" --task "$task" --strategy parameter_server
done

say "An embedding table of 1,000,000 x 64 float32 (256 MB), MinSizePartitioner(256 KiB, max 4 shards) over 2 ps"
"$zdist" plan --shape 1000000,64 --partitioner min_size:262144:4 --num-ps 2 --name embedding \
    --ids 0,249999,250000,999999

coordinator="$build/coordinator/zdist-coordinator"
worker="$build/worker/zdist-worker"
say "Starting the cluster: 2 ps (zdist-psd), 2 workers (zdist-worker), the chief (zdist-coordinator)"
for i in 0 1; do
    "$psd" --cluster "$work/cluster.json" --task "ps:$i" 2>"$work/ps$i.log" &
    pids+=($!)
    "$worker" --cluster "$work/cluster.json" --task "worker:$i" 2>"$work/worker$i.log" &
    pids+=($!)
done
# The job's metrics, checkpoints and loss curve outlive the run, in the build tree.
state="$(cd "$build" && pwd)/quickstart-state"
rm -rf "$state"
mkdir -p "$state"
"$coordinator" --cluster "$work/cluster.json" --task chief:0 --state-dir "$state" 2>"$work/chief.log" &
pids+=($!)
for log in ps0 ps1 worker0 worker1 chief; do
    for _ in $(seq 300); do grep -q "serving at" "$work/$log.log" && break; sleep 0.1; done
    grep -q "serving at" "$work/$log.log" || { cat "$work/$log.log"; exit 1; }
done
echo "all 5 tasks serving"

say "Training the Fashion-MNIST mlp (256-128) under parameter_server: zdist submit"
start=$SECONDS
"$zdist" submit deploy/examples/fmnist-mlp-ps.json --cluster "$work/cluster.json"
"$zdist" submit --help >/dev/null
"$zdist" status --cluster "$work/cluster.json"
echo "trained in $((SECONDS - start)) s"
say "Done"
