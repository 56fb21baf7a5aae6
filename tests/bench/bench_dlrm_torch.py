#!/usr/bin/python3
"""The PyTorch twin of deploy/examples/dlrm-criteo-run.json, for tests/bench/bench_dlrm.sh.

    /usr/bin/python3 bench_dlrm_torch.py JOB.json TRAIN.txt TEST.txt [--threads N] [--epochs E]

TRAIN.txt and TEST.txt are the rows of `zdist gen criteo` files as tests/integration/tfrecord_driver
prints them (label, I1..I13 as 'f' + IEEE bits in hex, C1..C26 as decimal int64), so both sides read
the same examples in the same order (no shuffling: the job has no shuffle_seed).

The same model, read from the job file: the bottom MLP, each C feature hashed as Keras's Hashing does
(FarmHash Fingerprint64 of the id's decimal text, mod num_bins: ported below with numpy, the hashes
computed before the clock starts) into its own table (the 26 fused as row ranges of one nn.Embedding(sparse=True)), TFRS's DotInteraction
(no self interaction, the bottom output concatenated in front), the top MLP, a sigmoid and binary
cross-entropy. Keras's initializers (glorot_uniform kernels, zero biases, uniform(-0.05, 0.05)
embeddings). The same optimizer semantics: Keras's Adagrad (initial accumulator 0.1, epsilon 1e-7)
for every variable, which torch.optim.Adagrad is when given those two (its defaults are 0 and 1e-10);
on the sparse embedding gradients it updates only the rows a batch touched, as Keras's sparse apply
does. Prints one JSON line: train examples/s (the training loop alone, the data already tensors),
test AUC (exact, ties averaged) and test log loss.
"""
import argparse
import itertools
import json
import sys
import time

import numpy as np
import torch
from torch import nn

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)
K0, K1, K2 = np.uint64(0xC3A5C85C97CB3127), np.uint64(0xB492B66FBE98F273), np.uint64(0x9AE16A3B2F90404F)


def _ror(v, s):
    return (v >> np.uint64(s)) | (v << np.uint64(64 - s))


def _len16(u, v, mul):
    a = (u ^ v) * mul
    a ^= a >> np.uint64(47)
    b = (v ^ a) * mul
    b ^= b >> np.uint64(47)
    return b * mul


def _fetch(buf, off, width):
    """Little-endian words of width 4 or 8 bytes at column offsets off (per row) of a uint8 matrix."""
    rows = np.arange(buf.shape[0])
    v = np.zeros(buf.shape[0], dtype=np.uint64)
    for k in range(width):
        v |= buf[rows, off + k].astype(np.uint64) << np.uint64(8 * k)
    return v


def fingerprint64_decimal(ids):
    """FarmHash Fingerprint64 (farmhashna::Hash64) of each int64's decimal text, as worker/layers/layer_graph.c."""
    text = np.char.mod("%d", ids).astype("S24")
    lens = np.char.str_len(text).astype(np.int64)
    buf = np.frombuffer(text.tobytes(), dtype=np.uint8).reshape(len(ids), 24)
    out = np.zeros(len(ids), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for n in np.unique(lens):
            sel = lens == n
            b = buf[sel]
            ln = np.uint64(n)
            mul = K2 + ln * np.uint64(2)
            z = np.zeros(b.shape[0], dtype=np.int64)
            if n > 16:
                a = _fetch(b, z, 8) * K1
                bb = _fetch(b, z + 8, 8)
                c = _fetch(b, z + n - 8, 8) * mul
                d = _fetch(b, z + n - 16, 8) * K2
                h = _len16(_ror(a + bb, 43) + _ror(c, 30) + d, a + _ror(bb + K2, 18) + c, mul)
            elif n >= 8:
                a = _fetch(b, z, 8) + K2
                bb = _fetch(b, z + n - 8, 8)
                c = _ror(bb, 37) * mul + a
                d = (_ror(a, 25) + bb) * mul
                h = _len16(c, d, mul)
            elif n >= 4:
                a = _fetch(b, z, 4)
                h = _len16(ln + (a << np.uint64(3)), _fetch(b, z + n - 4, 4), mul)
            else:
                a, bm, c = (b[:, i].astype(np.uint64) for i in (0, n >> 1, n - 1))
                y = a + (bm << np.uint64(8))
                zz = ln + (c << np.uint64(2))
                h = ((y * K2) ^ (zz * K0))
                h = (h ^ (h >> np.uint64(47))) * K2
            out[sel] = h
    return out


def _columns(lines, bins):
    rows = [line.split() for line in lines]
    cols = list(zip(*rows))
    label = np.array(cols[0], dtype=np.float32)
    dense = np.stack([np.array([int(t[1:], 16) for t in cols[1 + i]], dtype=np.uint32).view(np.float32)
                      for i in range(13)], axis=1)
    cats = np.stack([(fingerprint64_decimal(np.array(cols[14 + i], dtype=np.int64)) % np.uint64(bins[i])).astype(np.int64)
                     for i in range(26)], axis=1)
    return label, dense, cats


def load(path, bins, chunk=1 << 18):
    # In chunks of lines: a whole file's Python strings would take ~2.4 kB a row (24 GB at 10^7 rows);
    # the arrays take 264 bytes a row.
    parts = []
    with open(path) as f:
        while True:
            lines = list(itertools.islice(f, chunk))
            if not lines:
                break
            parts.append(_columns(lines, bins))
    label, dense, cats = (np.concatenate([p[i] for p in parts]) for i in range(3))
    return torch.from_numpy(label), torch.from_numpy(dense), torch.from_numpy(cats)


def mlp(sizes, last_sigmoid=False):
    layers = []
    for i in range(len(sizes) - 1):
        lin = nn.Linear(sizes[i], sizes[i + 1])
        nn.init.xavier_uniform_(lin.weight)  # glorot_uniform
        nn.init.zeros_(lin.bias)
        layers.append(lin)
        layers.append(nn.Sigmoid() if last_sigmoid and i == len(sizes) - 2 else nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, bins, dim, bottom, top):
        super().__init__()
        self.bottom = mlp([13] + bottom)
        # the 26 tables as disjoint row ranges of one sparse table (TorchRec's fusing): one lookup and one
        # optimizer update per step instead of 26 (per-table updates made PyTorch's step 3x slower)
        self.emb = nn.Embedding(sum(bins), dim, sparse=True)
        nn.init.uniform_(self.emb.weight, -0.05, 0.05)
        self.register_buffer("base", torch.tensor(np.cumsum([0] + bins[:-1]), dtype=torch.int64))
        f = len(bins) + 1
        self.li, self.lj = torch.tril_indices(f, f, offset=-1)
        self.top = mlp([bottom[-1] + f * (f - 1) // 2] + top + [1], last_sigmoid=True)

    def forward(self, dense, cats):
        x = self.bottom(dense)
        t = torch.cat([x.unsqueeze(1), self.emb(cats + self.base)], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, z], dim=1)).squeeze(1)


def auc(y, p):
    """Exact ROC AUC, ties averaged (Mann-Whitney)."""
    order = np.argsort(p, kind="mergesort")
    ps, ys = p[order], y[order]
    ranks = np.empty(len(p))
    i = 0
    while i < len(p):
        j = i
        while j + 1 < len(p) and ps[j + 1] == ps[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    npos = ys.sum()
    nneg = len(ys) - npos
    return (ranks[ys == 1].sum() - npos * (npos + 1) / 2) / (npos * nneg)


def spec(job):
    layers = {l["name"]: l for l in job["model"]["layers"]}
    bins = [layers["hash_C%d" % i]["hashing"]["num_bins"] for i in range(1, 27)]
    dim = layers["emb_C1"]["embedding"]["output_dim"]
    bottom = [layers[n]["dense"]["units"] for n in ("bottom_1", "bottom_2")]
    top = [layers[n]["dense"]["units"] for n in ("top_1", "top_2")]
    return bins, dim, bottom, top


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("job")
    ap.add_argument("train")
    ap.add_argument("test")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    job = json.load(open(a.job))
    opt = job["optimizer"]
    assert opt["type"] == "adagrad", "the twin does Keras's Adagrad only"
    bins, dim, bottom, top = spec(job)
    torch.manual_seed(job.get("seed", 1))
    ytr, dtr, ctr = load(a.train, bins)
    yte, dte, cte = load(a.test, bins)
    model = DLRM(bins, dim, bottom, top)
    optim = torch.optim.Adagrad(model.parameters(), lr=opt["learning_rate"],
                                initial_accumulator_value=opt.get("initial_accumulator_value", 0.1),
                                eps=opt.get("epsilon", 1e-7))
    bs = job["dataset"]["global_batch_size"]
    epochs = a.epochs or job.get("epochs", 1)
    lossf = nn.BCELoss()
    n = len(ytr)
    t0 = time.perf_counter()
    for _ in range(epochs):
        for s in range(0, n, bs):
            optim.zero_grad()
            loss = lossf(model(dtr[s:s + bs], ctr[s:s + bs]), ytr[s:s + bs])
            loss.backward()
            optim.step()
    secs = time.perf_counter() - t0
    with torch.no_grad():
        p = torch.cat([model(dte[s:s + 4096], cte[s:s + 4096]) for s in range(0, len(yte), 4096)])
    pc = p.clamp(1e-7, 1 - 1e-7).double().numpy()
    y = yte.double().numpy()
    logloss = float(-(y * np.log(pc) + (1 - y) * np.log(1 - pc)).mean())
    print(json.dumps({"examples_per_sec": epochs * n / secs, "train_seconds": secs, "examples": epochs * n,
                      "test_auc": float(auc(y, p.double().numpy())), "test_loss": logloss,
                      "threads": a.threads, "torch": torch.__version__}))


if __name__ == "__main__":
    sys.exit(main())
