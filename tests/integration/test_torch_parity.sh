#!/usr/bin/env bash
# zdist and PyTorch compute the same training steps: small CNNs trained by zdist (parity_driver: the session
# `zdist run` uses) and by tests/bench/keras_torch.py (PyTorch with Keras's semantics, which zdist follows)
# from zdist's initial variables on zdist's batches give the same loss at every step (float32 summation
# noise apart) and the same variables after the last one. The models cover conv2d 5x5/3x3/4x4 with
# padding same (TF's odd pixel bottom/right) and valid, strides 1 and 2, max and average pools (same and
# valid), batch norm, dense, Adam (Keras's epsilon) and the partial last batch of an epoch; the issue's CNN
# on 28x28x1 images over three epochs (two epoch boundaries: Adam's step count and the reshuffle go on);
# and the data order of Keras's fit (every epoch a fresh permutation of the whole set, the partial batch
# kept), over two whole Fashion-MNIST epochs, whose losses cannot be compared step by step. Debian's
# python3-torch is installed with apt-get when missing; the test skips (77), saying why, when it cannot be.
source "$(dirname "$0")/lib.sh"
zd_init torch_parity
zd_need PARITY_DRIVER_BIN
TWIN=$(cd "$(dirname "$0")/../bench" && pwd)/keras_torch.py
FMNIST=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
OUT=$ZD_TMP/out

py=/usr/bin/python3
if ! $py -c 'import torch' 2>/dev/null; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch >"$ZD_TMP/apt.log" 2>&1 || true
    fi
    if ! $py -c 'import torch' 2>/dev/null; then
        echo "SKIP: PyTorch (Debian's python3-torch) is not importable and apt-get could not install it" \
             "($(tail -1 "$ZD_TMP/apt.log" 2>/dev/null || echo 'not root or no apt-get'))"
        exit 77
    fi
fi

# parity NAME STEPS JOB_JSON [TWIN_OPTIONS [ORDER_STEPS]]: zdist's run of the job dumped, then repeated by
# the twin, which checks zdist's initial values (Keras's initializers), the data order (of ORDER_STEPS
# steps when given, else of the steps run), each step's loss and the final variables.
parity() {
    local name=$1 steps=$2 dir=$ZD_TMP/$1
    mkdir -p "$dir"
    printf '%s\n' "$3" >"$dir/job.json"
    zd_run_expect 0 "$OUT" "$PARITY_DRIVER_BIN" "$dir/job.json" "$dir" "$steps" ${5:-}
    if ! $py "$TWIN" parity "$dir/job.json" "$dir" ${4:-} >"$dir/twin.txt" 2>&1; then
        cat "$dir/twin.txt"
        zd_fail "$name: zdist and PyTorch differ"
    fi
    zd_ok "$name: $(tail -1 "$dir/twin.txt")"
}

# Tolerances: float32 rounding differs between the two (summation order in GEMMs and reductions), and
# training amplifies it: Adam's step is scale-free, so a gradient at rounding level moves its weight by
# a whole learning rate, and a max pool's near-tie routes a gradient to another element. On Fashion-MNIST
# (many exact zeros and near-ties) the losses drift apart ~10x every 3-4 steps from 1e-7 at step 1 (1e-5
# by step 8, 1e-3 by step 25, either way), on the synthetic noise images they stay within 1e-5. A
# semantic difference (padding, an initializer's fans, Adam's epsilon, the partial batch's mean) shows
# from the first steps at 1e-3 and more.
SYN_TOL="--rtol 3e-5 --wtol 1e-4"
FM_TOL="--rtol 2e-4 --wtol 1e-2"
# Synthetic 12x12x3 images, 600 examples in batches of 128: 5 steps an epoch, the last of 88, two epochs.
SYN='"format": "synthetic", "synthetic": {"n": 600, "dim": 432, "classes": 10, "seed": 7, "noise_std": 1.0},
     "global_batch_size": 128, "shuffle_seed": 5'
parity shapes 10 '{"name": "shapes", "strategy": {"type": "one_device"}, "seed": 3, "epochs": 2,
  "model": {"name": "sequential", "input_shape": [12, 12, 3], "loss": "sparse_categorical_crossentropy",
    "layers": [{"conv2d": {"filters": 8, "kernel": 5, "strides": 2, "padding": "same", "activation": "relu"}},
               {"conv2d": {"filters": 6, "kernel": 4, "padding": "same", "activation": "tanh"}},
               {"batch_norm": {"momentum": 0.9}},
               {"avg_pool2d": {"pool": 3, "strides": 2, "padding": "same"}},
               {"conv2d": {"filters": 5, "kernel": 3, "strides": 1, "activation": "relu"}},
               {"max_pool2d": {"pool": 2, "padding": "same"}},
               "flatten", {"dense": {"units": 16, "activation": "relu"}}, {"dense": {"units": 10}}]},
  "optimizer": {"type": "adam", "learning_rate": 0.01},
  "dataset": {'"$SYN"'}}' "$SYN_TOL"

parity strides 10 '{"name": "strides", "strategy": {"type": "one_device"}, "seed": 4, "epochs": 2,
  "model": {"name": "sequential", "input_shape": [12, 12, 3], "loss": "sparse_categorical_crossentropy",
    "layers": [{"conv2d": {"filters": 4, "kernel": 3, "strides": 2, "activation": "relu"}},
               {"conv2d": {"filters": 7, "kernel": [2, 3], "strides": [1, 2], "padding": "same"}},
               {"max_pool2d": {"pool": 2, "strides": 1}},
               "flatten", {"dense": {"units": 10}}]},
  "optimizer": {"type": "sgd", "learning_rate": 0.05},
  "dataset": {'"$SYN"'}}' "$SYN_TOL"

# The issue's CNN at Fashion-MNIST's shapes (28x28x1) on 1000 synthetic images: 8 steps an epoch, the last
# of 104, three epochs. Everything that changes at an epoch boundary (the reshuffle, the partial batch,
# Adam's step count going on, no reset of any state) shows in the losses of the steps after it. This model
# learns the images (loss 2.3 to 0.09 in 24 steps), so rounding drifts to ~8e-4 by the third epoch; Adam's
# moments and step count reset at the boundary differ by 2e-2 to 5e-1 from step 10 on, the partial batch's
# loss summed over 128 instead of averaged by 1e-2 from step 9.
EB_TOL="--rtol 3e-3 --wtol 1e-2"
parity epoch_boundary 24 '{"name": "epoch-boundary", "strategy": {"type": "one_device"}, "seed": 2, "epochs": 3,
  "model": {"name": "sequential", "input_shape": [28, 28, 1], "loss": "sparse_categorical_crossentropy",
    "layers": [{"conv2d": {"filters": 16, "kernel": 5, "padding": "same", "activation": "relu"}},
               {"max_pool2d": {"pool": 2}}, {"conv2d": {"filters": 24, "kernel": 3, "activation": "relu"}},
               {"max_pool2d": {"pool": 2}}, "flatten", {"dense": {"units": 64, "activation": "relu"}},
               {"dense": {"units": 10}}]},
  "optimizer": {"type": "adam", "learning_rate": 0.001},
  "dataset": {"format": "synthetic", "synthetic": {"n": 1000, "dim": 784, "classes": 10, "seed": 9,
    "noise_std": 1.0}, "global_batch_size": 128, "shuffle_seed": 11}}' "$EB_TOL"

if [[ -r $FMNIST/train-images-idx3-ubyte.gz ]]; then
    DS='"format": "idx", "train": {"images": "'$FMNIST'/train-images-idx3-ubyte.gz",
        "labels": "'$FMNIST'/train-labels-idx1-ubyte.gz"}, "global_batch_size": 128, "shuffle_seed": 42'
    # The issue's CNN (#35), as a new user writes it.
    # 8 steps compared; the order of 939 (two whole epochs of 469, the last of 96, and a step) checked.
    parity issue_cnn 8 '{"name": "issue-cnn", "strategy": {"type": "one_device"}, "seed": 1, "epochs": 3,
      "model": {"name": "sequential", "input_shape": [28, 28, 1], "loss": "sparse_categorical_crossentropy",
        "layers": [{"conv2d": {"filters": 16, "kernel": 5, "padding": "same", "activation": "relu"}},
                   {"max_pool2d": {"pool": 2}}, {"conv2d": {"filters": 24, "kernel": 3, "activation": "relu"}},
                   {"max_pool2d": {"pool": 2}}, "flatten", {"dense": {"units": 64, "activation": "relu"}},
                   {"dense": {"units": 10}}]},
      "optimizer": {"type": "adam", "learning_rate": 0.001}, "dataset": {'"$DS"'}}' "$FM_TOL" 939
    # The project's CNN (deploy/examples/fmnist-cnn-run.json) without its dropout (masks are each side's own).
    parity project_cnn 8 '{"name": "project-cnn", "strategy": {"type": "one_device"}, "seed": 1, "epochs": 1,
      "model": {"name": "sequential", "input_shape": [28, 28, 1], "loss": "sparse_categorical_crossentropy",
        "layers": [{"conv2d": {"filters": 32, "kernel": 3, "activation": "relu"}}, {"batch_norm": {}},
                   {"max_pool2d": {"pool": 2}}, {"conv2d": {"filters": 64, "kernel": 3, "activation": "relu"}},
                   {"batch_norm": {}}, {"max_pool2d": {"pool": 2}}, "flatten",
                   {"dense": {"units": 128, "activation": "relu"}}, {"dense": {"units": 10}}]},
      "optimizer": {"type": "adam", "learning_rate": 0.001}, "dataset": {'"$DS"'}}' "$FM_TOL"
else
    echo "note: no Fashion-MNIST under $FMNIST (package dataset-fashion-mnist): the synthetic models only"
fi
echo "passed: $ZD_PASSED checks"
