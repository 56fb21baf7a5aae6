#!/usr/bin/env python3
"""PyTorch baseline for tests/bench/bench_cnn.sh and bench_layers.sh: the model of a zdist job, trained the same way.

Reads the job file, builds the same layers (conv2d/max_pool2d/flatten/dropout/dense/..., or the mlp),
the same optimizer (adam or sgd, the job's learning rate) and batch, trains --steps steps on
the job's training set with torch.set_num_threads(THREADS) after --warmup steps (not counted, as
zdist run's warm_examples_per_sec leaves out its first 5), and prints one JSON line:
{"examples_per_sec": ..., "steps": ..., "final_loss": ..., "threads": ...}.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

from keras_torch import read_idx  # noqa: E402 (tests/bench, this script's directory)


def build(model):
    """torch layers for a zdist sequential model section (NCHW inside torch), or the built-in mlp."""
    if model.get("name") == "mlp":
        sizes = [784] + list(model.get("params", {}).get("hidden", [128])) + [10]
        layers = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(*layers[:-1])
    shape = list(model["input_shape"])
    if len(shape) == 3:  # zdist: [h, w, c] channels last; torch: [c, h, w]
        shape = [shape[2], shape[0], shape[1]]
    layers = []

    def pair(v):
        return (v, v) if isinstance(v, int) else tuple(v)

    for entry in model["layers"]:
        if isinstance(entry, str):
            kind, f = entry, {}
        else:
            (kind, f), = entry.items()
        act = f.get("activation", "linear")
        if kind == "conv2d":
            k = pair(f["kernel"])
            s = pair(f.get("strides", 1))
            pad = "same" if f.get("padding", "valid") == "same" else 0
            layers.append(nn.Conv2d(shape[0], f["filters"], k, stride=s, padding=pad,
                                    bias=f.get("use_bias", True)))
            with torch.no_grad():
                shape = list(layers[-1](torch.zeros([1] + shape)).shape[1:])
        elif kind in ("max_pool2d", "avg_pool2d"):
            p = pair(f.get("pool", 2))
            s = pair(f.get("strides", p))
            cls = nn.MaxPool2d if kind == "max_pool2d" else nn.AvgPool2d
            layers.append(cls(p, stride=s))
            with torch.no_grad():
                shape = list(layers[-1](torch.zeros([1] + shape)).shape[1:])
        elif kind == "flatten":
            layers.append(nn.Flatten())
            shape = [int(np.prod(shape))]
        elif kind == "dropout":
            layers.append(nn.Dropout(f["rate"]))
        elif kind == "dense":
            layers.append(nn.Linear(shape[0], f["units"], bias=f.get("use_bias", True)))
            shape = [f["units"]]
        elif kind == "batch_norm":
            cls = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
            layers.append(cls(shape[0], eps=f.get("epsilon", 1e-3), momentum=1 - f.get("momentum", 0.99)))
        elif kind in ("relu", "tanh", "sigmoid", "softmax"):
            act = kind
        else:
            sys.exit(f"bench_cnn_torch.py: layer {kind} has no PyTorch twin here")
        if act in ("relu", "tanh", "sigmoid"):
            layers.append({"relu": nn.ReLU(), "tanh": nn.Tanh(), "sigmoid": nn.Sigmoid()}[act])
        # softmax on the last layer is part of the loss (CrossEntropyLoss takes logits)
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("job")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    job = json.load(open(args.job))
    ds = job["dataset"]
    base = os.path.dirname(os.path.abspath(args.job))

    def path(p):
        return p if os.path.isabs(p) else os.path.join(base, p)

    x = read_idx(path(ds["train"]["images"])).astype(np.float32) / 255.0
    y = read_idx(path(ds["train"]["labels"])).astype(np.int64)
    shape = job["model"].get("input_shape", [784])
    if len(shape) == 3:
        x = x.reshape(-1, shape[0], shape[1], shape[2]).transpose(0, 3, 1, 2).copy()
    else:
        x = x.reshape(len(x), -1)
    x = torch.from_numpy(x)
    y = torch.from_numpy(y)
    model = build(job["model"])
    opt = job["optimizer"]
    lr = opt.get("learning_rate", 0.001)
    if opt["type"] == "adam":
        optim = torch.optim.Adam(model.parameters(), lr=lr, betas=(opt.get("beta_1", 0.9), opt.get("beta_2", 0.999)),
                                 eps=opt.get("epsilon", 1e-7))
    else:
        optim = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    batch = ds["global_batch_size"]
    g = torch.Generator().manual_seed(ds.get("shuffle_seed", 0))
    perm = torch.randperm(len(x), generator=g)
    model.train()
    done, t0, loss = 0, None, None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            t0 = time.perf_counter()
        lo = (step * batch) % (len(x) // batch * batch)
        idx = perm[lo:lo + batch]
        xb, yb = x[idx], y[idx]
        optim.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optim.step()
        if step >= args.warmup:
            done += len(idx)
    secs = time.perf_counter() - t0
    print(json.dumps({"examples_per_sec": done / secs, "steps": args.steps, "final_loss": float(loss),
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
