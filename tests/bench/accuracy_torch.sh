#!/usr/bin/env bash
# Test accuracy of zdist run against PyTorch on the same models, several seeds each, in one sitting.
#
#     bash tests/bench/accuracy_torch.sh [--seeds "1 2 3"] [--only issue,project] [--epochs "1 2"] [--paired]
#
# Models: the issue's CNN (#35: conv2d 16 5x5 same, max_pool 2, conv2d 24 3x3, max_pool 2, flatten, dense 64
# relu, dense 10; Adam 1e-3, batch 128) and the project's deploy/examples/fmnist-cnn-run.json, for each
# number of epochs. zdist: `zdist run` with seed S and shuffle_seed S. PyTorch: tests/bench/keras_torch.py
# twice, with Keras's semantics (glorot_uniform, zero biases, Keras's Adam: what zdist computes) and with
# PyTorch's defaults (nn.Conv2d/nn.Linear initializers, torch.optim.Adam), torch seed S. Prints each run and
# a table of the mean test accuracy of each. PyTorch runs on one thread: accuracy, not speed, is measured
# here, and two threads of it on a loaded machine wait on each other ten times longer. ZDIST_BIN names the zdist binary (default build-rel/, build/).
# --paired instead trains the Keras twin from zdist's initial weights on zdist's batches (parity_driver's
# dump, PARITY_DRIVER_BIN or the build's): the seed's draw of weights and order is then common to both
# sides, so the difference left is what each computes (a few seeds' means otherwise differ by ~0.3 points
# of sampling noise after 2 epochs). Dropout's masks stay each side's own.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seeds="1 2 3"
only="issue,project"
epoch_list="1 2"
paired=0
while [[ $# -gt 0 ]]; do
    case $1 in
    --seeds) seeds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --epochs) epoch_list=$2; shift 2 ;;
    --paired) paired=1; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "accuracy_torch.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
zdist=${ZDIST_BIN:-}
for c in "$root/build-rel/cli/zdist" "$root/build/cli/zdist"; do
    [[ -z $zdist && -x $c ]] && zdist=$c
done
[[ -n $zdist ]] || { echo "accuracy_torch.sh: build first or set ZDIST_BIN" >&2; exit 2; }
driver=${PARITY_DRIVER_BIN:-$(dirname "$(dirname "$zdist")")/tests/integration/parity_driver}
[[ $paired == 0 || -x $driver ]] || { echo "accuracy_torch.sh: --paired needs parity_driver ($driver)" >&2; exit 2; }
py=/usr/bin/python3
$py -c 'import torch' 2>/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
results=$tmp/results

# job MODEL SEED EPOCHS OUT: the model's job with the seeds and epochs set.
job() {
    python3 - "$root" "$@" <<'PY'
import json, sys
root, model, seed, epochs, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
j = json.load(open(root + "/deploy/examples/fmnist-cnn-run.json"))
if model == "issue":
    j["name"] = "issue-cnn"
    j["model"]["layers"] = [
        {"conv2d": {"filters": 16, "kernel": 5, "padding": "same", "activation": "relu"}}, {"max_pool2d": {"pool": 2}},
        {"conv2d": {"filters": 24, "kernel": 3, "activation": "relu"}}, {"max_pool2d": {"pool": 2}}, "flatten",
        {"dense": {"units": 64, "activation": "relu"}}, {"dense": {"units": 10}}]
j["seed"], j["dataset"]["shuffle_seed"], j["epochs"] = seed, seed, epochs
json.dump(j, open(out, "w"))
PY
}

for model in issue project; do
    [[ ,$only, == *,$model,* ]] || continue
    for epochs in $epoch_list; do
        for seed in $seeds; do
            job "$model" "$seed" "$epochs" "$tmp/job.json"
            if [[ $paired == 1 ]]; then
                # zdist's run dumped, the twin from its weights on its batches: both accuracies in one line
                rm -rf "$tmp/dump" && mkdir "$tmp/dump"
                "$driver" "$tmp/job.json" "$tmp/dump" 1000000000 >/dev/null
                $py "$here/keras_torch.py" parity "$tmp/job.json" "$tmp/dump" --evaluate >"$tmp/twin.txt"
                read -r z k < <(sed -n 's/^test accuracy: zdist.s final variables \([0-9.]*\), the twin.s \([0-9.]*\);.*/\1 \2/p' "$tmp/twin.txt")
                echo "$model $epochs $seed $z $k nan" | tee -a "$results"
                continue
            fi
            z=$("$zdist" run "$tmp/job.json" --json --quiet | python3 -c 'import json,sys; print(json.load(sys.stdin)["test_accuracy"])')
            k=$($py "$here/keras_torch.py" accuracy "$tmp/job.json" --seed "$seed" --threads 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["test_accuracy"])')
            t=$($py "$here/keras_torch.py" accuracy "$tmp/job.json" --seed "$seed" --threads 1 --torch-defaults | python3 -c 'import json,sys; print(json.load(sys.stdin)["test_accuracy"])')
            echo "$model $epochs $seed $z $k $t" | tee -a "$results"
        done
    done
done
python3 - "$results" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m, e, s, z, k, t = line.split()
    rows[(m, int(e))].append((float(z), float(k), float(t)))
print()
if any(line.split()[5] == "nan" for line in open(sys.argv[1])):
    print("(--paired: the twin from zdist's initial weights on zdist's batches; no defaults column)")
print("| model | epochs | seeds | zdist run | PyTorch, Keras's semantics | PyTorch, its defaults | zdist - Keras twin |")
print("|---|---|---|---|---|---|---|")
for (m, e), r in sorted(rows.items()):
    z, k, t = (statistics.mean(c) for c in zip(*r))
    print(f"| {m} CNN | {e} | {len(r)} | {z:.4f} | {k:.4f} | {t:.4f} | {100 * (z - k):+.2f} points |")
PY
