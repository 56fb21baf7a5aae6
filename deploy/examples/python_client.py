#!/usr/bin/python3
"""Fashion-MNIST's CNN from Python, notebook style: submit the job to a zdist cluster, follow it with a
progress bar, load its checkpoint into NumPy and compute the test accuracy here, with NumPy alone, to
compare with the accuracy zdist reported.

    PYTHONPATH=python ZDIST_PROTO_PY=build/python/zdist_pb \\
        python3 deploy/examples/python_client.py --cluster deploy/examples/cluster-ps.json

Needs Debian's python3-zmq, python3-protobuf and python3-numpy, the protobuf modules the build
generates (python/README.md) and a running cluster (deploy/examples/cluster-ps.json's chief, workers
and ps; README "Run a cluster"). --steps N trains N steps instead of the job's 10 epochs.
"""

import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np

import zdist
import zdist.checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))

# %% The job: deploy/examples/fmnist-cnn-ps.json (conv 32 - batch norm - pool - conv 64 - batch norm -
# pool - dense 128 - dense 10), under parameter_server.
ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--job", default=os.path.join(HERE, "fmnist-cnn-ps.json"))
ap.add_argument("--coordinator", metavar="HOST:PORT", help="the chief (default: --cluster's, else TF_CONFIG's)")
ap.add_argument("--cluster", metavar="FILE", help="a TF_CONFIG-style cluster file naming the chief")
ap.add_argument("--keys", help="a key directory (zdist keygen): speak CURVE")
ap.add_argument("--key", default="client")
ap.add_argument("--steps", type=int, help="train this many steps instead of the job's epochs")
ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="Fashion-MNIST's idx files")
args = ap.parse_args()

with open(args.job) as f:
    job = json.load(f)
if args.steps:
    job.pop("epochs", None)
    job["steps"] = args.steps
chief = args.coordinator
if not chief and args.cluster:
    with open(args.cluster) as f:
        chief = json.load(f)["cluster"]["chief"][0]

# %% Submit, and follow it with a progress bar.
client = zdist.Client(chief, keys=args.keys, key=args.key)
submitted = client.submit(job)
print("job %s submitted to %s" % (submitted.id, client.endpoint))


def bar(st, t0):
    step, steps = st["step"], st["steps"]
    if steps <= 0:
        return "%-9s" % st["state"]
    fill = 40 * step // steps
    loss = st["metrics"].get("loss")
    rate = st["metrics"].get("examples_per_sec", 0)
    el = time.monotonic() - t0
    eta = el * (steps - step) / step if step else 0
    return "[%s%s] %5d/%d  loss %s  %6.0f ex/s  %4.0fs left  %s" % (
        "#" * fill, "." * (40 - fill), step, steps, "%.4f" % loss if loss is not None else "  -   ", rate, eta,
        st["state"])


t0 = time.monotonic()
for st in submitted.follow():
    sys.stderr.write("\r" + bar(st, t0))
    sys.stderr.flush()
sys.stderr.write("\n")
if st["state"] != "done":
    sys.exit("job %s ended %s: %s" % (submitted.id, st["state"], st["error"]))
reported = st["metrics"].get("test_accuracy")
print("done in %.0f s; zdist reports test accuracy %s" % (time.monotonic() - t0, reported))

# %% Its checkpoint into NumPy: every variable whole (the ps tasks' shards merged), CRCs checked.
where = st.get("checkpoint_dir") or st["dir"]
weights = zdist.checkpoint.load(where)
for name, w in sorted(weights.items()):
    print("  %-38s %-16s %s" % (name, w.shape, w.dtype))


# %% Fashion-MNIST's test set, as the workers read it (idx, pixels / 255).
def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, rank = struct.unpack(">HBB", data[:4])
    assert zero == 0 and dtype == 0x08, path  # unsigned bytes
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


images = idx(os.path.join(args.data, "t10k-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
labels = idx(os.path.join(args.data, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)


# %% The model's forward pass in NumPy, layer by layer as the job declares it (Keras's semantics and
# default layer names: conv2d, conv2d_1, batch_normalization, ...; kernels [kh, kw, in, out]; NHWC).
def windows(x, kh, kw, sh, sw):
    n, h, w, c = x.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    s = x.strides
    return np.lib.stride_tricks.as_strided(x, (n, oh, ow, kh, kw, c), (s[0], s[1] * sh, s[2] * sw, s[1], s[2], s[3]))


def pad_same(x, k, s, fill=0.0):
    pads = []
    for size, kk, ss in zip(x.shape[1:3], k, s):
        out = -(-size // ss)
        total = max((out - 1) * ss + kk - size, 0)
        pads.append((total // 2, total - total // 2))
    return np.pad(x, [(0, 0)] + pads + [(0, 0)], constant_values=fill)


def activate(x, name):
    if name in (None, "linear"):
        return x
    if name == "relu":
        return np.maximum(x, 0)
    if name == "tanh":
        return np.tanh(x)
    if name == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if name == "softmax":
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    raise ValueError("activation %s" % name)


def pair(v, default):
    v = default if v is None else v
    return (v, v) if isinstance(v, int) else tuple(v)


def forward(model, w, x):
    seen = {}
    for layer in model["layers"]:
        kind, spec = (layer, {}) if isinstance(layer, str) else next(iter(layer.items()))
        base = {"conv2d": "conv2d", "dense": "dense", "batch_norm": "batch_normalization", "max_pool2d":
                "max_pooling2d", "avg_pool2d": "average_pooling2d", "flatten": "flatten", "dropout": "dropout"}.get(
                    kind, "activation")
        n = seen.get(base, 0)
        seen[base] = n + 1
        name = spec.get("name") or (base if n == 0 else "%s_%d" % (base, n))
        if kind == "conv2d":
            k, s = w[name + "/kernel"], pair(spec.get("strides"), 1)
            if spec.get("padding") == "same":
                x = pad_same(x, k.shape[:2], s)
            x = np.einsum("nhwijc,ijco->nhwo", windows(x, k.shape[0], k.shape[1], *s), k, optimize=True)
            x = activate(x + w.get(name + "/bias", 0), spec.get("activation"))
        elif kind in ("max_pool2d", "avg_pool2d"):
            p = pair(spec.get("pool"), 2)
            s = pair(spec.get("strides"), p)
            if spec.get("padding") == "same":
                x = pad_same(x, p, s, -np.inf if kind == "max_pool2d" else 0.0)
            win = windows(np.ascontiguousarray(x), p[0], p[1], *s)
            x = win.max(axis=(3, 4)) if kind == "max_pool2d" else win.mean(axis=(3, 4))
        elif kind == "batch_norm":
            eps = spec.get("epsilon", 1e-3)
            x = (x - w[name + "/moving_mean"]) / np.sqrt(w[name + "/moving_variance"] + eps)
            x = x * w.get(name + "/gamma", 1) + w.get(name + "/beta", 0)
        elif kind == "flatten":
            x = x.reshape(x.shape[0], -1)
        elif kind == "dense":
            x = activate(x @ w[name + "/kernel"] + w.get(name + "/bias", 0), spec.get("activation"))
        elif kind == "dropout":
            pass  # identity at inference
        else:
            x = activate(x, kind)
    return x


shape = job["model"].get("input_shape", [28, 28, 1])
correct = 0
for i in range(0, len(images), 500):
    logits = forward(job["model"], weights, images[i:i + 500].reshape((-1,) + tuple(shape)))
    correct += int((logits.argmax(axis=1) == labels[i:i + 500]).sum())
accuracy = correct / len(images)
print("test accuracy computed here with NumPy: %.4f over %d images" % (accuracy, len(images)))
if reported is not None:
    print("zdist reported:                        %.4f (difference %+.4f)" % (reported, accuracy - reported))
client.close()
