#!/usr/bin/env python3
"""A small recommender data set and functional model for test_onnx_export.sh.

Usage: onnx_recsys.py DIR STEPS

Writes DIR/train.tfrecord and DIR/test.tfrecord (tf.train.Examples, written
here by the TFRecord format's spec: length, masked CRC32C, data, masked
CRC32C), DIR/job.json (a DLRM-like functional model over them: a bottom
MLP, fixed-vocabulary embeddings of a fixed id, a [2]-id feature and a var
(ragged) feature, a dot interaction with and one without self interaction,
two DCN-v2 crosses, an add, a top MLP) and DIR/feeds.json (the test set
as the exported graph's inputs: each named input [N, ...], the var feature
padded with id 0 plus its mask, and the labels).
"""
import json
import random
import struct
import sys

DIR, STEPS = sys.argv[1], int(sys.argv[2])
RNG = random.Random(32)


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = _crc_table()


def masked_crc(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(num, payload):  # a length-delimited field
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def feature(value):
    kind, vals = value
    if kind == "f":
        packed = b"".join(struct.pack("<f", v) for v in vals)
        return field(2, field(1, packed))
    return field(3, field(1, b"".join(varint(v) for v in vals)))


def example(feats):
    entries = b"".join(field(1, field(1, k.encode()) + field(2, feature(v))) for k, v in sorted(feats.items()))
    return field(1, entries)


def record(data):
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked_crc(n)) + data + struct.pack("<I", masked_crc(data))


f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
W = [RNG.gauss(0, 1) for _ in range(4)]
B1 = [RNG.gauss(0, 1) for _ in range(20)]
B2 = [RNG.gauss(0, 1) for _ in range(30)]
B3 = [RNG.gauss(0, 1) for _ in range(40)]
B4 = [RNG.gauss(0, 0.5) for _ in range(10)]


def row():
    i = [f32(RNG.random()) for _ in range(4)]
    c1, c2 = RNG.randrange(20), RNG.randrange(30)
    pair = [RNG.randrange(10), RNG.randrange(10)]
    tags = [RNG.randrange(40) for _ in range(RNG.randrange(4))]
    logit = sum(w * (x - 0.5) for w, x in zip(W, i)) + B1[c1] + B2[c2] + sum(B3[t] for t in tags) + B4[pair[0]] * B4[pair[1]] * 4
    label = 1 if RNG.random() < 1 / (1 + 2.718281828 ** -logit) else 0
    return {"label": label, "I": i, "C1": c1, "C2": c2, "pair": pair, "tags": tags}


def write(path, rows):
    with open(path, "wb") as out:
        for r in rows:
            feats = {"label": ("i", [r["label"]]), "C1": ("i", [r["C1"]]), "C2": ("i", [r["C2"]]),
                     "pair": ("i", r["pair"]), "tags": ("i", r["tags"])}
            for k in range(4):
                feats["I%d" % (k + 1)] = ("f", [r["I"][k]])
            out.write(record(example(feats)))


train = [row() for _ in range(4000)]
test = [row() for _ in range(1000)]
write(DIR + "/train.tfrecord", train)
write(DIR + "/test.tfrecord", test)

fixed = lambda dtype, shape: {"kind": "fixed", "dtype": dtype, "shape": shape}
job = {
    "name": "onnx-recsys",
    "strategy": {"type": "one_device"},
    "model": {
        "name": "functional",
        "inputs": [{"name": "dense_in", "features": ["I1", "I2", "I3", "I4"]}],
        "layers": [
            {"name": "bottom", "dense": {"units": 8, "activation": "relu"}, "inputs": ["dense_in"]},
            {"name": "emb_C1", "embedding": {"input_dim": 20, "output_dim": 8}, "inputs": ["C1"]},
            {"name": "emb_C2", "embedding": {"input_dim": 30, "output_dim": 8}, "inputs": ["C2"]},
            {"name": "emb_tags", "embedding": {"input_dim": 40, "output_dim": 8, "combiner": "sqrtn"},
             "inputs": ["tags"]},
            {"name": "emb_pair", "embedding": {"input_dim": 10, "output_dim": 4}, "inputs": ["pair"]},
            {"name": "pair_flat", "flatten": {}, "inputs": ["emb_pair"]},
            {"name": "interaction", "dot_interaction": {"concat_dense": True},
             "inputs": ["bottom", "emb_C1", "emb_C2", "emb_tags"]},
            {"name": "self_inter", "dot_interaction": {"self_interaction": True, "skip_gather": True},
             "inputs": ["emb_C1", "pair_flat", "emb_tags"]},
            {"name": "x0", "concat": {}, "inputs": ["interaction", "self_inter", "dense_in"]},
            {"name": "cross_1", "cross": {}, "inputs": ["x0"]},
            {"name": "cross_2", "cross": {"diag_scale": 0.5}, "inputs": ["x0", "cross_1"]},
            {"name": "deep", "dense": {"units": 27, "activation": "tanh"}, "inputs": ["x0"]},
            {"name": "sum", "add": {}, "inputs": ["cross_2", "deep"]},
            {"name": "top", "dense": {"units": 8, "activation": "relu"}, "inputs": ["sum"]},
            {"name": "click", "dense": {"units": 1, "activation": "sigmoid"}, "inputs": ["top"]},
        ],
        "output": "click",
        "loss": "binary_crossentropy",
    },
    "optimizer": {"type": "adagrad", "learning_rate": 0.05},
    "dataset": {
        "format": "tfrecord", "compression": "none",
        "train": {"files": DIR + "/train.tfrecord"}, "test": {"files": DIR + "/test.tfrecord"},
        "features": dict({"label": fixed("int64", []), "C1": fixed("int64", []), "C2": fixed("int64", []),
                          "pair": fixed("int64", [2]), "tags": {"kind": "var", "dtype": "int64"}},
                         **{"I%d" % k: fixed("float32", []) for k in range(1, 5)}),
        "label": "label", "global_batch_size": 64, "shuffle": False,
    },
    "steps": STEPS,
    "evaluation": {"at_end": True},
    "seed": 3,
}
json.dump(job, open(DIR + "/job.json", "w"), indent=1)

n, k = len(test), max(1, max(len(r["tags"]) for r in test))
feeds = {
    "dense_in": {"type": "float32", "dims": [n, 4], "data": [x for r in test for x in r["I"]]},
    "C1": {"type": "int64", "dims": [n], "data": [r["C1"] for r in test]},
    "C2": {"type": "int64", "dims": [n], "data": [r["C2"] for r in test]},
    "pair": {"type": "int64", "dims": [n, 2], "data": [x for r in test for x in r["pair"]]},
    "tags": {"type": "int64", "dims": [n, k], "data": [(r["tags"] + [0] * k)[j] for r in test for j in range(k)]},
    "tags_mask": {"type": "float32", "dims": [n, k],
                  "data": [1.0 if j < len(r["tags"]) else 0.0 for r in test for j in range(k)]},
}
json.dump({"feeds": feeds, "labels": [r["label"] for r in test]}, open(DIR + "/feeds.json", "w"))
