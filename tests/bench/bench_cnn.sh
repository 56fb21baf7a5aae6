#!/usr/bin/env bash
# zdist run vs PyTorch on the same CNN, optimizer and batch, in the same sitting: examples/s of each and the ratio.
#
#     bash tests/bench/bench_cnn.sh [JOB.json] [--steps N] [--rounds R]
#
# JOB defaults to deploy/examples/fmnist-cnn-run.json. Both train on the job's training set for the same
# N steps after the same 5 warm-up steps, which neither counts: zdist with `zdist run JOB --steps N+5`
# (its warm_examples_per_sec; BLAS threads as the worker chooses: the machine's cores), PyTorch with
# tests/bench/bench_cnn_torch.py (the same layers, optimizer, learning rate and batch,
# torch.set_num_threads(2), --warmup 5 --steps N). They alternate, R rounds (default 3); the table gives
# each side's median and the ratio of the medians, and each round's ratio (the machine is shared: a
# pair measured together is the fairest ratio). Debian's python3-torch is installed with apt-get when
# /usr/bin/python3 cannot import torch: a benchmark dependency, never a build or test one.
# ZDIST_BIN names the zdist binary (default: build-rel/cli/zdist, then build/, then PATH).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
job=$root/deploy/examples/fmnist-cnn-run.json
steps=200
rounds=3
while [[ $# -gt 0 ]]; do
    case $1 in
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_cnn.sh: unknown option $1" >&2; exit 2 ;;
    *) job=$1; shift ;;
    esac
done

zdist=${ZDIST_BIN:-}
if [[ -z $zdist ]]; then
    for c in "$root/build-rel/cli/zdist" "$root/build/cli/zdist" "$(command -v zdist || true)"; do
        if [[ -n $c && -x $c ]]; then zdist=$c; break; fi
    done
fi
[[ -n $zdist && -x $zdist ]] || { echo "bench_cnn.sh: no zdist binary: build first or set ZDIST_BIN" >&2; exit 2; }

py=/usr/bin/python3
if ! $py -c 'import torch' 2>/dev/null; then
    echo "bench_cnn.sh: installing Debian's python3-torch for the PyTorch baseline (apt-get)" >&2
    if [[ $(id -u) -ne 0 ]]; then
        echo "bench_cnn.sh: run as root, or install python3-torch first: apt-get install python3-torch" >&2
        exit 2
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch >/dev/null
fi

zs=() ts=()
for ((r = 1; r <= rounds; r++)); do
    z=$("$zdist" run "$job" --steps $((steps + 5)) --json --quiet |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["warm_examples_per_sec"])')
    t=$($py "$here/bench_cnn_torch.py" "$job" --steps "$steps" --warmup 5 --threads 2 |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["examples_per_sec"])')
    printf 'round %d: zdist %.0f examples/s, PyTorch %.0f examples/s, ratio %.2fx\n' "$r" "$z" "$t" \
        "$(python3 -c "print($z / $t)")"
    zs+=("$z") ts+=("$t")
done
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
mz=$(med "${zs[@]}") mt=$(med "${ts[@]}")
torch_version=$($py -c 'import torch; print(torch.__version__)')
echo
echo "$(basename "$job"), batch $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dataset"]["global_batch_size"])' "$job"), $steps steps after 5 warm-up steps, median of $rounds rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| %-28s | %12s |\n' "trainer" "examples/s"
printf '|%s|%s|\n' "------------------------------" "--------------"
printf '| %-28s | %12.0f |\n' "zdist run" "$mz"
printf '| %-28s | %12.0f |\n' "PyTorch $torch_version, 2 threads" "$mt"
python3 -c "print('ratio of the medians zdist / PyTorch: %.2fx' % ($mz / $mt))"
