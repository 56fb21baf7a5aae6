#!/usr/bin/env python3
"""A zdist sequential model in PyTorch with Keras's semantics, for parity tests and accuracy baselines.

zdist follows TensorFlow/Keras where it and PyTorch differ, so this twin does too:
- variables in Keras's layouts (conv2d kernel [kh, kw, in, filters], dense kernel [in, units]), in the order
  zdist declares them, so zdist's dumped values load one to one;
- NHWC activations (flatten in height, width, channel order); padding "same" as TF (the odd pixel on the
  bottom/right, for strides 1 and 2), max pool padding never the maximum, average pool not counting it;
- glorot_uniform kernels (fans over the receptive field: kh*kw*in and kh*kw*filters), zero biases;
- batch normalization: the batch's mean and biased variance, moving += (1 - momentum) (batch - moving);
- Adam as Keras: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), w -= lr_t m / (sqrt(v) + epsilon) (epsilon "hat");
- sparse categorical cross-entropy averaged over the batch it is given (the last, partial one too);
- Keras's fit order: every epoch a fresh permutation of the whole training set (tf.data's
  shuffle(reshuffle_each_iteration=True) over a buffer as large as the set), the partial last batch kept
  unless drop_remainder; the parity command checks zdist's order for that (check_order).

    python3 keras_torch.py parity JOB.json DIR [--rtol R] [--evaluate]   (DIR from tests/integration/parity_driver)
    python3 keras_torch.py accuracy JOB.json [--seed S] [--epochs E] [--threads T] [--torch-defaults]
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    _, _, ndim = struct.unpack(">HBB", data[:4])
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_data(job_path, test=False):
    """(features [n, dim] float32 as zdist reads them: bytes / 255, labels int64) of the job's idx dataset."""
    job = json.load(open(job_path))
    ds = job["dataset"]
    base = os.path.dirname(os.path.abspath(job_path))
    part = ds["test" if test else "train"]

    def path(p):
        return p if os.path.isabs(p) else os.path.join(base, p)

    x = read_idx(path(part["images"]))
    x = (x.reshape(len(x), -1).astype(np.float32) / np.float32(255.0)).astype(np.float32)
    y = read_idx(path(part["labels"])).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def tf_same(size, k, s):
    """TF's "same": output size and the (before, after) padding, the odd one after."""
    out = (size + s - 1) // s
    total = max((out - 1) * s + k - size, 0)
    return out, total // 2, total - total // 2


class KerasSequential:
    """The layers of a zdist model section; variables (Keras layouts, zdist's order) in self.vars."""

    def __init__(self, model):
        self.layers, self.vars, self.trainable = [], [], []
        shape = list(model["input_shape"])
        self.input_shape = shape
        for entry in model["layers"]:
            kind, f = (entry, {}) if isinstance(entry, str) else next(iter(entry.items()))
            layer = {"kind": kind, "act": f.get("activation", "linear")}
            if kind in ("relu", "tanh", "sigmoid", "softmax"):
                layer = {"kind": "activation", "act": kind}
            elif kind == "conv2d":
                k, s = pair(f["kernel"]), pair(f.get("strides", 1))
                layer.update(k=k, s=s, same=f.get("padding", "valid") == "same")
                shape = self._window(shape, layer, f["filters"])
                layer["w"] = self._var([k[0], k[1], layer["cin"], f["filters"]])
                layer["b"] = self._var([f["filters"]]) if f.get("use_bias", True) else None
            elif kind in ("max_pool2d", "avg_pool2d"):
                p = pair(f.get("pool", 2))
                layer.update(k=p, s=pair(f.get("strides", p)), same=f.get("padding", "valid") == "same")
                shape = self._window(shape, layer, shape[2])
            elif kind == "flatten":
                shape = [int(np.prod(shape))]
            elif kind == "dense":
                layer["w"] = self._var([shape[0], f["units"]])
                layer["b"] = self._var([f["units"]]) if f.get("use_bias", True) else None
                shape = [f["units"]]
            elif kind == "batch_norm":
                c = shape[-1]
                layer.update(eps=f.get("epsilon", 1e-3), momentum=f.get("momentum", 0.99))
                layer["gamma"] = self._var([c]) if f.get("scale", True) else None
                layer["beta"] = self._var([c]) if f.get("center", True) else None
                layer["mean"] = self._var([c], trainable=False)
                layer["var"] = self._var([c], trainable=False)
            elif kind == "dropout":
                layer["rate"] = f["rate"]
            else:
                sys.exit(f"keras_torch.py: layer {kind} has no twin here")
            self.layers.append(layer)

    def _var(self, shape, trainable=True):
        t = torch.zeros(shape, dtype=torch.float32, requires_grad=trainable)
        self.vars.append(t)
        if trainable:
            self.trainable.append(t)
        return t

    @staticmethod
    def _window(shape, layer, cout):
        h, w, c = shape
        layer["cin"] = c
        (kh, kw), (sh, sw) = layer["k"], layer["s"]
        if layer["same"]:
            oh, top, bottom = tf_same(h, kh, sh)
            ow, left, right = tf_same(w, kw, sw)
            layer["pad"] = (left, right, top, bottom)
        else:
            oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
            layer["pad"] = (0, 0, 0, 0)
        return [oh, ow, cout]

    def keras_init(self, seed):
        """glorot_uniform kernels (Keras's fans), zero biases and betas, ones for gamma and moving variance."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for layer in self.layers:
                if "w" in layer:
                    shape = layer["w"].shape
                    rf = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
                    fan_in, fan_out = shape[-2] * rf, shape[-1] * rf
                    limit = math.sqrt(6.0 / (fan_in + fan_out))
                    layer["w"].uniform_(-limit, limit, generator=g)
                for name, value in (("b", 0.0), ("beta", 0.0), ("gamma", 1.0), ("mean", 0.0), ("var", 1.0)):
                    if layer.get(name) is not None:
                        layer[name].fill_(value)

    def torch_init(self, seed):
        """PyTorch's defaults instead (nn.Conv2d, nn.Linear): kernels and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
        g = torch.Generator().manual_seed(seed)
        self.keras_init(seed)
        with torch.no_grad():
            for layer in self.layers:
                if "w" in layer:
                    bound = 1 / math.sqrt(int(np.prod(layer["w"].shape[:-1])))
                    layer["w"].uniform_(-bound, bound, generator=g)
                    if layer["b"] is not None:
                        layer["b"].uniform_(-bound, bound, generator=g)

    def load(self, flat):
        """Every variable from zdist's dump (float32 numpy, the variables one after the other)."""
        at = 0
        with torch.no_grad():
            for t in self.vars:
                n = t.numel()
                t.copy_(torch.from_numpy(flat[at:at + n].copy()).reshape(t.shape))
                at += n
        if at != len(flat):
            raise ValueError(f"zdist dumped {len(flat)} floats, the twin has {at}")

    def flat(self):
        return torch.cat([t.detach().reshape(-1) for t in self.vars]).numpy()

    def forward(self, x, train, dropout_gen=None):
        """Logits of x [n, dim] (NHWC examples as zdist reads them)."""
        if len(self.input_shape) == 3:
            h, w, c = self.input_shape
            x = x.reshape(-1, h, w, c).permute(0, 3, 1, 2)  # NCHW for torch's kernels
        for layer in self.layers:
            x = self._layer(layer, x, train, dropout_gen)
        return x

    def _layer(self, layer, x, train, dropout_gen):
        kind = layer["kind"]
        if kind == "conv2d":
            x = F.conv2d(F.pad(x, layer["pad"]), layer["w"].permute(3, 2, 0, 1), layer["b"], stride=layer["s"])
        elif kind == "max_pool2d":
            x = F.max_pool2d(F.pad(x, layer["pad"], value=-math.inf), layer["k"], layer["s"])
        elif kind == "avg_pool2d":
            ones = torch.ones_like(x[:1, :1])
            sums = F.avg_pool2d(F.pad(x, layer["pad"]), layer["k"], layer["s"], divisor_override=1)
            x = sums / F.avg_pool2d(F.pad(ones, layer["pad"]), layer["k"], layer["s"], divisor_override=1)
        elif kind == "flatten":
            x = (x.permute(0, 2, 3, 1) if x.dim() == 4 else x).reshape(x.shape[0], -1)
        elif kind == "dense":
            x = x @ layer["w"] + (layer["b"] if layer["b"] is not None else 0)
        elif kind == "batch_norm":
            x = self._batch_norm(layer, x, train)
        elif kind == "dropout" and train:
            keep = torch.rand(x.shape, generator=dropout_gen) >= layer["rate"]
            x = x * keep / (1 - layer["rate"])
        act = layer["act"]
        if act == "relu":
            x = torch.relu(x)
        elif act == "tanh":
            x = torch.tanh(x)
        elif act == "sigmoid":
            x = torch.sigmoid(x)
        # softmax: part of the loss (cross-entropy of the logits)
        return x

    @staticmethod
    def _batch_norm(layer, x, train):
        dims = [0, 2, 3] if x.dim() == 4 else [0]
        view = [1, -1, 1, 1] if x.dim() == 4 else [1, -1]
        if train:
            mean = x.mean(dim=dims)
            var = ((x - mean.reshape(view)) ** 2).mean(dim=dims)
            with torch.no_grad():
                f = 1 - layer["momentum"]
                layer["mean"] += f * (mean.detach() - layer["mean"])
                layer["var"] += f * (var.detach() - layer["var"])
        else:
            mean, var = layer["mean"], layer["var"]
        y = (x - mean.reshape(view)) / torch.sqrt(var.reshape(view) + layer["eps"])
        if layer["gamma"] is not None:
            y = y * layer["gamma"].reshape(view)
        if layer["beta"] is not None:
            y = y + layer["beta"].reshape(view)
        return y


class KerasAdam:
    """Keras's Adam (TF's ApplyAdam): epsilon outside the bias correction."""

    def __init__(self, params, lr=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
        self.params, self.lr, self.b1, self.b2, self.eps = list(params), lr, beta_1, beta_2, epsilon
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    @torch.no_grad()
    def step(self):
        self.t += 1
        lr_t = self.lr * math.sqrt(1 - self.b2 ** self.t) / (1 - self.b1 ** self.t)
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            p.sub_(lr_t * m / (v.sqrt() + self.eps))
            p.grad = None


def make_optimizer(job, params, torch_adam=False):
    opt = job["optimizer"]
    lr = opt.get("learning_rate", 0.001)
    if opt["type"] == "adam" and torch_adam:
        return torch.optim.Adam(params, lr=lr, betas=(opt.get("beta_1", 0.9), opt.get("beta_2", 0.999)),
                                eps=opt.get("epsilon", 1e-7))
    if opt["type"] == "adam":
        return KerasAdam(params, lr, opt.get("beta_1", 0.9), opt.get("beta_2", 0.999), opt.get("epsilon", 1e-7))
    if opt["type"] == "sgd":
        return torch.optim.SGD(params, lr=lr)
    sys.exit(f"keras_torch.py: optimizer {opt['type']} has no twin here")


def train_step(model, optim, x, y):
    logits = model.forward(x, True)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optim.step()
    if hasattr(optim, "zero_grad"):
        optim.zero_grad(set_to_none=True)
    return float(loss)


def evaluate(model, x, y, batch=1000):
    correct = 0
    with torch.no_grad():
        for lo in range(0, len(x), batch):
            correct += int((model.forward(x[lo:lo + batch], False).argmax(1) == y[lo:lo + batch]).sum())
    return correct / len(x)


def check_init(model):
    """zdist's initial values are Keras's: kernels glorot_uniform with Keras's fans (conv2d: kh*kw*in and
    kh*kw*filters), biases and betas 0, gammas and moving variances 1, moving means 0. Problems, as text."""
    bad = []
    for i, layer in enumerate(model.layers):
        for name, value in (("b", 0.0), ("beta", 0.0), ("gamma", 1.0), ("mean", 0.0), ("var", 1.0)):
            t = layer.get(name)
            if t is not None and not bool((t == value).all()):
                bad.append(f"layer {i} ({layer['kind']}) {name} is not all {value}")
        if "w" not in layer:
            continue
        w = layer["w"].detach()
        rf = int(np.prod(w.shape[:-2])) if w.dim() > 2 else 1
        limit = math.sqrt(6.0 / (w.shape[-2] * rf + w.shape[-1] * rf))
        # uniform on [-limit, limit): the extremes near the limit and the spread limit / sqrt(3)
        lo, hi, std = float(w.min()), float(w.max()), float(w.std())
        n = w.numel()
        if hi > limit or lo < -limit or (n >= 200 and (hi < 0.9 * limit or lo > -0.9 * limit)) or \
                (n >= 200 and abs(std * math.sqrt(3) / limit - 1) > 4 / math.sqrt(n) + 0.02):
            bad.append(f"layer {i} ({layer['kind']}) kernel {list(w.shape)}: range [{lo:.4f}, {hi:.4f}], std {std:.4f};"
                       f" glorot_uniform wants [-{limit:.4f}, {limit:.4f}), std {limit / math.sqrt(3):.4f}")
    return bad


def dataset_size(job, job_path):
    """Examples in the job's training set (synthetic: its n; idx: the labels file's count)."""
    ds = job["dataset"]
    if ds["format"] == "synthetic":
        return ds["synthetic"]["n"]
    labels = ds["train"]["labels"]
    if not os.path.isabs(labels):
        labels = os.path.join(os.path.dirname(os.path.abspath(job_path)), labels)
    return len(read_idx(labels))


def check_order(job, job_path, steps):
    """zdist's batches (rows per step, from step 1) against Keras's fit: each epoch every example once in
    batches of global_batch_size, the partial last one kept (unless drop_remainder), in a fresh random
    order each epoch (not the file's order, not a small buffer's near-file order, not the last epoch's
    again). Problems, as text."""
    ds = job["dataset"]
    n, batch = dataset_size(job, job_path), ds["global_batch_size"]
    drop, shuffle = ds.get("drop_remainder", False), ds.get("shuffle", True)
    sizes = [batch] * (n // batch) + ([] if drop or n % batch == 0 else [n % batch])
    bad, epochs = [], [steps[at:at + len(sizes)] for at in range(0, len(steps), len(sizes))]
    # a random permutation's correlations are about 1/sqrt(n); a buffer shuffle's or a repeat's near 1
    limit = max(0.25, 8 / math.sqrt(n))
    orders = []
    for e, ep in enumerate(epochs):
        got = [len(rows) for rows in ep]
        if got != sizes[:len(got)]:
            bad.append(f"epoch {e + 1}: batch sizes {got[:3]}...{got[-3:]}, Keras's fit gives "
                       f"{sizes[:3]}...{sizes[-3:]} ({n} examples, batch {batch}, drop_remainder {drop})")
            continue
        if len(got) < len(sizes):
            continue  # the last, unfinished epoch: its sizes only
        order = np.array([r for rows in ep for r in rows])
        if drop and len(np.unique(order)) != len(order) or not drop and not np.array_equal(np.sort(order), np.arange(n)):
            bad.append(f"epoch {e + 1}: its rows are not every example once")
            continue
        if not shuffle:
            if not np.array_equal(order, np.arange(len(order))):
                bad.append(f"epoch {e + 1}: shuffle is off, yet the rows are not in the file's order")
            continue
        c = abs(float(np.corrcoef(order, np.arange(len(order)))[0, 1]))
        if c > limit:
            bad.append(f"epoch {e + 1}: the order follows the file's (correlation {c:.2f}): "
                       "a buffer shuffle, not a permutation of the whole set")
        orders.append(order)
    for e in range(1, len(orders)):
        if drop:
            break  # the epochs hold different examples; the size check above is what holds
        pos_a, pos_b = np.argsort(orders[e - 1]), np.argsort(orders[e])
        c = abs(float(np.corrcoef(pos_a, pos_b)[0, 1]))
        if c > limit:
            bad.append(f"epoch {e + 1} repeats epoch {e}'s order (correlation {c:.2f}): "
                       "Keras reshuffles every epoch")
    return bad


def cmd_parity(args):
    """zdist's dumped run repeated here step by step: per-step losses (and the final variables) must agree."""
    job = json.load(open(args.job))
    model = KerasSequential(job["model"])
    model.load(np.fromfile(os.path.join(args.dir, "init.f32"), dtype=np.float32))
    bad_init = check_init(model)
    for line in bad_init:
        print("initial values: " + line)
    optim = make_optimizer(job, model.trainable)
    sizes = [len(line.split()) for line in open(os.path.join(args.dir, "batches.txt"))]
    x = torch.from_numpy(np.fromfile(os.path.join(args.dir, "x.f32"), dtype=np.float32))
    y = torch.from_numpy(np.fromfile(os.path.join(args.dir, "y.i32"), dtype=np.int32).astype(np.int64))
    x = x.reshape(len(y), -1)
    zl = [float(v) for v in open(os.path.join(args.dir, "losses.txt"))]
    order_path = os.path.join(args.dir, "order.txt")
    if not os.path.exists(order_path):
        order_path = os.path.join(args.dir, "batches.txt")
    bad_order = check_order(job, args.job, [[int(r) for r in line.split()] for line in open(order_path)])
    for line in bad_order:
        print("data order: " + line)
    worst, bad, at, tl = 0.0, [], 0, []
    for step, (size, want) in enumerate(zip(sizes, zl)):
        got = train_step(model, optim, x[at:at + size], y[at:at + size])
        tl.append(got)
        at += size
        rel = abs(got - want) / max(abs(want), 1e-6)
        worst = max(worst, rel)
        print(f"step {step + 1} batch {size}: zdist {want:.7f} torch {got:.7f} rel {rel:.2e}")
        if rel > args.rtol:
            bad.append(step + 1)
    zf = np.fromfile(os.path.join(args.dir, "final.f32"), dtype=np.float32)
    tf = model.flat()
    wdiff = float(np.max(np.abs(zf - tf)) / max(float(np.max(np.abs(tf))), 1e-12))
    order_steps = sum(1 for _ in open(order_path))
    print(f"{len(zl)} steps: largest relative loss difference {worst:.2e} (tolerance {args.rtol:.0e}); "
          f"final variables' largest difference {wdiff:.2e} of their largest magnitude; "
          f"the order of {order_steps} steps {'is not' if bad_order else 'is'} Keras's fit's")
    if args.evaluate:
        # the whole run's outcome: the test accuracy of both sides' final variables
        xt, yt = load_data(args.job, test=True)
        twin_acc = evaluate(model, xt, yt)
        model.load(zf)
        print(f"test accuracy: zdist's final variables {evaluate(model, xt, yt):.4f}, the twin's {twin_acc:.4f}; "
              f"mean loss: zdist {np.mean(zl):.4f}, the twin {np.mean(tl):.4f}")
        return 0
    if len(sizes) < len(zl) or not zl:
        print("keras_torch.py: fewer batches than losses, or no steps")
        return 1
    if bad_init:
        print("keras_torch.py: zdist's initial values are not Keras's")
        return 1
    if bad_order:
        print("keras_torch.py: zdist's data order is not Keras's fit's")
        return 1
    if bad:
        print(f"keras_torch.py: losses differ beyond {args.rtol:.0e} at steps {bad[:10]}")
        return 1
    if wdiff > args.wtol:
        print(f"keras_torch.py: final variables differ by {wdiff:.2e} > {args.wtol:.0e}")
        return 1
    return 0


def cmd_accuracy(args):
    """Trains the job's model from Keras's initializers (seed) for its epochs; one JSON line with the test accuracy."""
    torch.set_num_threads(args.threads)
    job = json.load(open(args.job))
    model = KerasSequential(job["model"])
    if args.torch_defaults:
        model.torch_init(args.seed)
    else:
        model.keras_init(args.seed)
    optim = make_optimizer(job, model.trainable, args.torch_defaults)
    x, y = load_data(args.job)
    xt, yt = load_data(args.job, test=True)
    batch = job["dataset"]["global_batch_size"]
    epochs = args.epochs or job.get("epochs", 1)
    # the data order's own stream: the same seed as the initializer's would start both on the same draws
    g = torch.Generator().manual_seed(args.seed * 1000003 + 17)
    t0, loss = time.perf_counter(), float("nan")
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=g)
        for lo in range(0, len(x), batch):  # Keras's fit: the last, partial batch is kept
            idx = perm[lo:lo + batch]
            loss = train_step(model, optim, x[idx], y[idx])
    secs = time.perf_counter() - t0
    print(json.dumps({"seed": args.seed, "epochs": epochs, "semantics": "torch" if args.torch_defaults else "keras", "final_loss": loss, "test_accuracy": evaluate(model, xt, yt),
                      "examples_per_sec": epochs * len(x) / secs, "torch": torch.__version__}))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("parity")
    p.add_argument("job")
    p.add_argument("dir")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--wtol", type=float, default=1e-3)
    p.add_argument("--evaluate", action="store_true",
                   help="a long run: report both sides' test accuracy and mean loss instead of checking steps")
    a = sub.add_parser("accuracy")
    a.add_argument("job")
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--epochs", type=int, default=0)
    a.add_argument("--threads", type=int, default=2)
    a.add_argument("--torch-defaults", action="store_true",
                   help="PyTorch's initializers and Adam instead of Keras's (what a PyTorch user gets)")
    args = ap.parse_args()
    torch.set_num_threads(getattr(args, "threads", 1))
    return cmd_parity(args) if args.cmd == "parity" else cmd_accuracy(args)


if __name__ == "__main__":
    sys.exit(main())
