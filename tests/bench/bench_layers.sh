#!/usr/bin/env bash
# zdist vs PyTorch in one sitting: every layer and shape of bench_layers (forward and backward), then whole
# models (examples/s and peak RSS): the mlp, the project's CNN and the issue's CNN (#35).
#
#     bash tests/bench/bench_layers.sh [--rounds R] [--steps N] [--threads T] [--cpu] [--only layers|models] [BUILD_DIR]
#
# Layers: R rounds (default 3), each one run of tests/bench/bench_layers (zdist's kernels, batch 128) then
# one of bench_layers_torch.py (the same shapes in PyTorch, as many threads as zdist's BLAS), alternating; each
# side's median of the rounds, and the ratio PyTorch ms / zdist ms (above 1: zdist is faster). Models: R
# rounds of `zdist run JOB --steps N+5` (warm_examples_per_sec: the N steps after 5 warm-up steps) and
# bench_cnn_torch.py (--warmup 5 --steps N), alternating, under /usr/bin/time for the peak RSS;
# medians and the ratio zdist / PyTorch examples/s. BUILD_DIR defaults to build-rel, then build. Debian's
# python3-torch is installed with apt-get when missing (a benchmark dependency, never a build one).
# --threads T (default 2, the machine's cores) sets both sides' threads: OPENBLAS_NUM_THREADS (which also
# splits zdist's direct convolutions) and torch.set_num_threads; 1 compares the kernels alone, and is
# the fair setting on a loaded machine, where two threads of either side wait on each other. --cpu times
# the layers by the process's CPU time instead of wall time (with --threads 1: the work each side does,
# whatever else the machine runs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=3
steps=150
threads=2
cpu=""
only="layers,models"
build=""
while [[ $# -gt 0 ]]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --cpu) cpu=--cpu; shift ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_layers.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
    esac
done
if [[ -z $build ]]; then
    for b in "$root/build-rel" "$root/build"; do [[ -x $b/tests/bench/bench_layers ]] && { build=$b; break; }; done
fi
[[ -n $build && -x $build/tests/bench/bench_layers ]] || { echo "bench_layers.sh: build first" >&2; exit 2; }
py=/usr/bin/python3
if ! $py -c 'import torch' 2>/dev/null; then
    echo "bench_layers.sh: installing Debian's python3-torch (apt-get)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=$threads
echo "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), PyTorch $($py -c 'import torch; print(torch.__version__)'), $rounds rounds, $threads threads each"

if [[ ,$only, == *,layers,* ]]; then
    for ((r = 1; r <= rounds; r++)); do
        "$build/tests/bench/bench_layers" --rounds 1 $cpu >"$tmp/z$r"
        "$build/tests/bench/bench_layers" --list | $py "$here/bench_layers_torch.py" --rounds 1 --threads "$threads" $cpu >"$tmp/t$r"
        echo "layers: round $r of $rounds done" >&2
    done
    python3 - "$tmp" "$rounds" <<'PY'
import collections, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
runs = {"z": collections.defaultdict(list), "t": collections.defaultdict(list)}
order = []
for side in "zt":
    for r in range(1, rounds + 1):
        for line in open(f"{tmp}/{side}{r}"):
            name, what, ms = line.rstrip("\n").split("\t")
            runs[side][(name, what)].append(float(ms))
            if (name, what) not in order:
                order.append((name, what))
print()
print("| layer (batch 128) | pass | zdist ms | PyTorch ms | PyTorch / zdist |")
print("|---|---|---|---|---|")
for key in order:
    z, t = statistics.median(runs["z"][key]), statistics.median(runs["t"][key])
    print(f"| {key[0]} | {key[1]} | {z:.3f} | {t:.3f} | {t / z:.2f}x |")
PY
fi

if [[ ,$only, == *,models,* ]]; then
    python3 - "$root" "$tmp/issue.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1] + "/deploy/examples/fmnist-cnn-run.json"))
j["name"] = "issue-cnn"
j["model"]["layers"] = [
    {"conv2d": {"filters": 16, "kernel": 5, "padding": "same", "activation": "relu"}}, {"max_pool2d": {"pool": 2}},
    {"conv2d": {"filters": 24, "kernel": 3, "activation": "relu"}}, {"max_pool2d": {"pool": 2}}, "flatten",
    {"dense": {"units": 64, "activation": "relu"}}, {"dense": {"units": 10}}]
json.dump(j, open(sys.argv[2], "w"))
PY
    : >"$tmp/models"
    for model in mlp:"$root/deploy/examples/fmnist-mlp-run.json" project-cnn:"$root/deploy/examples/fmnist-cnn-run.json" \
                 issue-cnn:"$tmp/issue.json"; do
        name=${model%%:*} job=${model#*:}
        for ((r = 1; r <= rounds; r++)); do
            /usr/bin/time -f '%M' -o "$tmp/zrss" "$build/cli/zdist" run "$job" --steps $((steps + 5)) --json --quiet >"$tmp/zout"
            /usr/bin/time -f '%M' -o "$tmp/trss" $py "$here/bench_cnn_torch.py" "$job" --steps "$steps" --warmup 5 --threads "$threads" >"$tmp/tout"
            z=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["warm_examples_per_sec"])' "$tmp/zout")
            t=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["examples_per_sec"])' "$tmp/tout")
            echo "$name $z $t $(tail -1 "$tmp/zrss") $(tail -1 "$tmp/trss")" | tee -a "$tmp/models" >&2
        done
    done
    python3 - "$tmp/models" "$steps" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, *v = line.split()
    rows[name].append([float(x) for x in v])
print()
print(f"| model ({sys.argv[2]} steps after 5, batch 128) | zdist run ex/s | PyTorch ex/s | zdist / PyTorch | "
      "zdist peak RSS | PyTorch peak RSS |")
print("|---|---|---|---|---|---|")
for name, r in rows.items():
    z, t, zr, tr = (statistics.median(c) for c in zip(*r))
    pairs = ", ".join(f"{a / b:.2f}" for a, b, _, _ in r)
    print(f"| {name} | {z:.0f} | {t:.0f} | {z / t:.2f}x (pairs {pairs}) | {zr / 1024:.0f} MB | {tr / 1024:.0f} MB |")
PY
fi
