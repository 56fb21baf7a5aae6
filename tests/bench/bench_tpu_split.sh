#!/usr/bin/env bash
# Model parallelism of strategy tpu: a wide dense network (784-4096-4096-10 by default) whose hidden
# layers are split along their units over L logical devices, against the same network on one logical
# device, both with one BLAS thread per device (strategy tpu sets it), in the same sitting.
#
#     bash tests/bench/bench_tpu_split.sh [--steps N] [--rounds R] [--width W] [--devices L]
#
# Runs `zdist run JOB --steps N --json` for L = 1 and for L devices, alternating, R rounds, and prints
# each round's examples/s, the median of each and the ratio (split / one device). Both jobs train the
# same synthetic data (784 features, 10 classes) with the same seed; the split changes where the
# columns of each kernel are computed, not the numbers (integration.tpu asserts that). The machine is
# shared: run it idle, and read the spread of the rounds before the ratio.
# ZDIST_BIN names the zdist binary (default: build-rel/cli/zdist, then build/, then PATH).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
steps=30
rounds=5
width=4096
devices=2
while [[ $# -gt 0 ]]; do
    case $1 in
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --width) width=$2; shift 2 ;;
    --devices) devices=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_tpu_split.sh: unknown argument $1; see --help" >&2; exit 2 ;;
    esac
done
for v in "$steps" "$rounds" "$width" "$devices"; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bench_tpu_split.sh: '$v' is not a positive integer" >&2; exit 2; }
done
((width % devices == 0)) || { echo "bench_tpu_split.sh: --width $width is not divisible by --devices $devices" >&2; exit 2; }

zdist=${ZDIST_BIN:-}
if [[ -z $zdist ]]; then
    for c in "$root/build-rel/cli/zdist" "$root/build/cli/zdist" "$(command -v zdist || true)"; do
        if [[ -n $c && -x $c ]]; then zdist=$c; break; fi
    done
fi
[[ -n $zdist && -x $zdist ]] || { echo "bench_tpu_split.sh: no zdist binary: build first or set ZDIST_BIN" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zdist-tpu-split.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# job FILE L: the network over L logical devices, each hidden layer split L ways along its units.
job() {
    python3 - "$1" "$2" "$width" <<'PY'
import json, sys
path, L, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hidden = {"units": width, "activation": "relu"}
if L > 1:
    hidden["split"] = [L]
json.dump({"name": "tpu-split-%d" % L,
           "strategy": {"type": "tpu", "num_replicas": 1, "logical_devices_per_replica": L, "oversubscribe": True},
           "model": {"name": "sequential", "input_shape": [784],
                     "layers": [{"dense": dict(hidden)}, {"dense": dict(hidden)}, {"dense": {"units": 10}}],
                     "loss": "sparse_categorical_crossentropy"},
           "optimizer": {"type": "sgd", "learning_rate": 0.01},
           "dataset": {"format": "synthetic",
                       "synthetic": {"n": 8192, "test_n": 128, "dim": 784, "classes": 10, "seed": 5},
                       "global_batch_size": 128, "shuffle_seed": 3},
           "steps": 1000000, "seed": 2}, open(path, "w"))  # zdist run --steps cuts it
PY
}
job "$tmp/one.json" 1
job "$tmp/split.json" "$devices"

# run JOB: examples/s of one zdist run (training only, from its --json line).
run() {
    "$zdist" run "$1" --steps "$steps" --json 2>"$tmp/err" | python3 -c '
import json, sys
print("%.1f" % json.loads(sys.stdin.read().strip().splitlines()[-1])["examples_per_sec"])' ||
        { echo "bench_tpu_split.sh: zdist run $1 failed: $(tail -5 "$tmp/err")" >&2; exit 1; }
}

echo "784-$width-$width-10, batch 128, $steps steps a run, one BLAS thread per logical device; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %14s %14s\n' round "L=1 ex/s" "L=$devices ex/s"
ones=()
splits=()
for ((r = 1; r <= rounds; r++)); do
    a=$(run "$tmp/one.json")
    b=$(run "$tmp/split.json")
    ones+=("$a")
    splits+=("$b")
    printf '%-6s %14s %14s\n' "$r" "$a" "$b"
done
python3 - "${ones[*]}" "${splits[*]}" "$devices" <<'PY'
import statistics, sys
one = [float(x) for x in sys.argv[1].split()]
split = [float(x) for x in sys.argv[2].split()]
m1, m2 = statistics.median(one), statistics.median(split)
print("median  %14.1f %14.1f" % (m1, m2))
print("split over %s logical devices vs one: %.2fx (goal >= 1.6x)" % (sys.argv[3], m2 / m1))
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
