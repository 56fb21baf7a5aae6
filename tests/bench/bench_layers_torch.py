#!/usr/bin/env python3
"""PyTorch's side of tests/bench/bench_layers.sh: bench_layers's cases (from `bench_layers --list` on stdin),
timed as bench_layers times zdist's kernels: batch 128, warmed, the median over rounds of the mean time of
one call, forward (with autograd recording, as in training) and backward (autograd.grad over a retained
graph: the kernel's gradient, the bias's and, unless the layer is a model's first, the input's).
Layers as a PyTorch user writes them: NCHW, nn.functional's conv2d / max_pool2d / avg_pool2d / linear,
"same" as symmetric padding of the same output size. Prints "NAME PASS MS" lines like bench_layers.

    bench_layers --list | python3 bench_layers_torch.py [--rounds R] [--threads T] [--quick] [--only TEXT] [--cpu]
"""
import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def case_fns(kind, h, w, c, k, s, filters, same, first):
    n = 128
    if kind == "d":
        x = torch.randn(n, c, requires_grad=not first)
        wt = torch.randn(filters, c, requires_grad=True)
        b = torch.randn(filters, requires_grad=True)
        fwd = lambda: F.linear(x, wt, b)  # noqa: E731
        params = [wt, b]
    else:
        x = torch.randn(n, c, h, w, requires_grad=not first or kind != "c")
        pad = (k - 1) // 2 if same else 0
        if kind == "c":
            wt = torch.randn(filters, c, k, k, requires_grad=True)
            b = torch.randn(filters, requires_grad=True)
            fwd = lambda: F.conv2d(x, wt, b, stride=s, padding=pad)  # noqa: E731
            params = [wt, b]
        elif kind == "m":
            fwd = lambda: F.max_pool2d(x, k, s, padding=pad)  # noqa: E731
            params = []
        else:
            fwd = lambda: F.avg_pool2d(x, k, s, padding=pad, count_include_pad=False)  # noqa: E731
            params = []
    inputs = params + ([x] if x.requires_grad else [])
    return fwd, inputs


CLOCK = time.perf_counter


def timed(fn, rounds, round_secs):
    t0, calls = CLOCK(), 0
    while calls < 3 or CLOCK() - t0 < round_secs / 4:
        fn()
        calls += 1
    per = (CLOCK() - t0) / calls
    reps = int(round_secs / max(per, 1e-6)) + 1
    ms = []
    for _ in range(rounds):
        a = CLOCK()
        for _ in range(reps):
            fn()
        ms.append((CLOCK() - a) / reps * 1e3)
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--cpu", action="store_true", help="the process's CPU time instead of wall time")
    args = ap.parse_args()
    global CLOCK
    if args.cpu:
        CLOCK = time.process_time
    torch.set_num_threads(args.threads)
    round_secs = 0.01 if args.quick else 0.2
    for line in sys.stdin:
        name, kind, *nums = line.rstrip("\n").split("\t")
        if args.only not in name:
            continue
        h, w, c, k, s, filters, same, first = (int(v) for v in nums)
        fwd, inputs = case_fns(kind, h, w, c, k, s, filters, bool(same), bool(first))
        print(f"{name}\tforward\t{timed(fwd, args.rounds, round_secs):.4f}", flush=True)
        y = fwd()
        dy = torch.randn_like(y)
        back = lambda: torch.autograd.grad(y, inputs, dy, retain_graph=True)  # noqa: E731
        print(f"{name}\tbackward\t{timed(back, args.rounds, round_secs):.4f}", flush=True)


if __name__ == "__main__":
    main()
