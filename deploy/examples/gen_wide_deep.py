#!/usr/bin/env python3
"""Writes a synthetic click-through data set in libsvm format for the wide-and-deep example.

Each example has 13 numeric features (ids 0..12, values in [0, 1]) and 8 categorical
fields, one value each, as one-hot ids 13 + field * 1000 + value (value < 1000, drawn
from a skewed distribution, as real categorical data). The label (0/1) is drawn from
a logistic model in which every category has its own effect, two fields interact,
one field interacts with a numeric feature, and a numeric feature enters
non-linearly: a logistic regression on the ids (sparse_logreg) cannot fit those
terms, embeddings and dense layers can.

    python3 deploy/examples/gen_wide_deep.py [DIR] [--train N] [--test N] [--seed S]

writes DIR/train.svm and DIR/test.svm (DIR defaults to deploy/examples/wide-deep, where
deploy/examples/wide-deep-ps.json looks for them). The data depend only on the seed.
"""
import argparse
import math
import os
import random

NUMERIC = 13
FIELDS = 8
VOCAB = 1000
DIM = NUMERIC + FIELDS * VOCAB


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", default=os.path.join(here, "wide-deep"))
    ap.add_argument("--train", type=int, default=40000)
    ap.add_argument("--test", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    effect = [[rnd.gauss(0, 1.0) for _ in range(VOCAB)] for _ in range(FIELDS)]
    slope = [rnd.gauss(0, 1.5) for _ in range(NUMERIC)]
    left = [rnd.gauss(0, 1.0) for _ in range(VOCAB)]
    right = [rnd.gauss(0, 1.0) for _ in range(VOCAB)]
    os.makedirs(args.dir, exist_ok=True)
    for name, n in (("train.svm", args.train), ("test.svm", args.test)):
        with open(os.path.join(args.dir, name), "w") as f:
            for _ in range(n):
                x = [rnd.random() for _ in range(NUMERIC)]
                cats = [min(VOCAB - 1, int(rnd.paretovariate(1.2)) - 1) for _ in range(FIELDS)]
                z = sum(s * (v - 0.5) for s, v in zip(slope, x))
                z += sum(effect[k][c] for k, c in enumerate(cats))
                z += 4.0 * effect[0][cats[0]] * (x[0] - 0.5)   # a category x numeric interaction
                z += 2.0 * left[cats[1]] * right[cats[2]]       # a category x category interaction
                z += 3.0 * math.sin(6.0 * x[1])                 # a non-linear numeric effect
                y = 1 if rnd.random() < 1.0 / (1.0 + math.exp(-z)) else 0
                feats = " ".join("%d:%.4f" % (i, v) for i, v in enumerate(x))
                ids = " ".join("%d:1" % (NUMERIC + k * VOCAB + c) for k, c in enumerate(cats))
                f.write("%d %s %s\n" % (y, feats, ids))
    print("wrote %s/{train,test}.svm: %d + %d examples, dim %d" % (args.dir, args.train, args.test, DIM))


if __name__ == "__main__":
    main()
