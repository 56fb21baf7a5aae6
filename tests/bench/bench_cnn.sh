#!/usr/bin/env bash
# zdist run vs PyTorch on the same CNN, optimizer and batch, in the same sitting: examples/s of each and the ratio.
#
#     bash tests/bench/bench_cnn.sh [JOB.json] [--steps N] [--rounds R]
#
# JOB defaults to deploy/examples/fmnist-cnn-run.json. Both train on the job's training set:
# zdist with `zdist run JOB --steps N` (BLAS threads as the worker chooses: the machine's cores),
# PyTorch with tests/bench/bench_cnn_torch.py (the same layers, optimizer, learning rate and batch,
# torch.set_num_threads(2), after 5 warm-up steps). They run one after the other, R rounds, and the
# best round of each counts (the machine is shared). Debian's python3-torch is installed with apt-get
# when /usr/bin/python3 cannot import torch: a benchmark dependency, never a build or test one.
# ZDIST_BIN names the zdist binary (default: build/cli/zdist, then build-rel/, then PATH).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
job=$root/deploy/examples/fmnist-cnn-run.json
steps=200
torch_steps=60
rounds=2
while [[ $# -gt 0 ]]; do
    case $1 in
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_cnn.sh: unknown option $1" >&2; exit 2 ;;
    *) job=$1; shift ;;
    esac
done

zdist=${ZDIST_BIN:-}
if [[ -z $zdist ]]; then
    for c in "$root/build/cli/zdist" "$root/build-rel/cli/zdist" "$(command -v zdist || true)"; do
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

best_z=0 best_t=0
for ((r = 1; r <= rounds; r++)); do
    z=$("$zdist" run "$job" --steps "$steps" --json --quiet |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["examples_per_sec"])')
    t=$($py "$here/bench_cnn_torch.py" "$job" --steps "$torch_steps" --threads 2 |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["examples_per_sec"])')
    printf 'round %d: zdist %.0f examples/s, PyTorch %.0f examples/s\n' "$r" "$z" "$t"
    best_z=$(python3 -c "print(max($best_z, $z))")
    best_t=$(python3 -c "print(max($best_t, $t))")
done
torch_version=$($py -c 'import torch; print(torch.__version__)')
echo
echo "$(basename "$job"), batch $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dataset"]["global_batch_size"])' "$job"), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| %-28s | %12s |\n' "trainer" "examples/s"
printf '|%s|%s|\n' "------------------------------" "--------------"
printf '| %-28s | %12.0f |\n' "zdist run ($steps steps)" "$best_z"
printf '| %-28s | %12.0f |\n' "PyTorch $torch_version, 2 threads" "$best_t"
python3 -c "print('ratio zdist / PyTorch: %.2fx' % ($best_z / $best_t))"
