"""Data for the dynamic-table checkpoint tests: libsvm examples of 4 ids each, ids over all of int64.

usage: dyn_data.py DIR SEED REPEATS [TEST_EXAMPLES]
Writes DIR/train.svm: one block of 24 examples (96 ids drawn from 200, the
int64 extremes, 0 and -1 among them) repeated REPEATS times, so every batch
of 24 is the same block and where an input pipeline resumes after a restore
does not change what a step trains on; labels from a hidden weight of +-3
per id. With TEST_EXAMPLES, DIR/test.svm holds that many more examples of
the same ids. The same SEED gives the same files."""
import random
import sys

out, seed, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
ids = [-2**63, 2**63 - 1, 0, -1] + [rng.randrange(-2**63, 2**63) for _ in range(196)]
w = {i: rng.choice([-3.0, 3.0]) for i in ids}


def example():
    ex = rng.sample(ids, 4)
    return "%d %s\n" % (1 if sum(w[i] for i in ex) > 0 else 0, " ".join("%d:1" % i for i in ex))


block = [example() for _ in range(24)]
with open(out + "/train.svm", "w") as f:
    f.writelines(block * repeats)
if len(sys.argv) > 4:
    with open(out + "/test.svm", "w") as f:
        f.writelines(example() for _ in range(int(sys.argv[4])))
