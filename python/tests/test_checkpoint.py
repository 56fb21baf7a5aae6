"""zdist.checkpoint against checkpoints real daemons wrote: a parameter_server job's shards (fixed:2 over
2 ps) merged into whole variables equal to what the psds hold; multi_worker_mirrored's state; damaged,
incomplete and other-version checkpoints refused naming the file."""

import glob
import json
import os
import shutil
import subprocess
import zlib

import numpy as np
import pytest

import zdist
from zdist import _canon
from zdist import checkpoint as ckpt


def mlp_job(strategy, steps, **extra):
    job = {"name": "py-mlp-" + strategy, "strategy": {"type": strategy},
           "model": {"name": "mlp", "params": {"hidden": [24]}},
           "optimizer": {"type": "adam", "learning_rate": 0.01},
           "dataset": {"format": "synthetic",
                       "synthetic": {"n": 2048, "test_n": 512, "dim": 12, "classes": 3, "seed": 5},
                       "global_batch_size": 32},
           "steps": steps, "steps_per_execution": 2, "seed": 1, "evaluation": {"at_end": True},
           "checkpoint": {"every_steps": 20, "keep": 2}}
    job["strategy"].update(extra)
    return job


@pytest.fixture(scope="module")
def ps_job(cluster):
    with zdist.Client(cluster.chief) as c:
        job = c.submit(mlp_job("parameter_server", 60, partitioner="fixed:2"))
        st = job.wait()
    assert st["state"] == "done", st
    return st


def zdist_cli(*args):
    out = subprocess.run([os.environ["ZDIST_BIN"]] + list(args), capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def psd_rows(cluster, var):
    """{row_offset: values} of every shard of var the psds hold, read by the C client (zdist ps stats/get)."""
    rows = {}
    for addr in cluster.ps:
        for shard in zdist_cli("ps", "stats", addr, "--json")["shard_info"]:
            if shard["name"] == var:
                vals = zdist_cli("ps", "get", addr, var, "--shard", str(shard["shard_index"]), "--json")
                rows[shard["row_offset"]] = np.asarray(vals, dtype=np.float32)
    return rows


def test_shards_merge_into_whole_variables(cluster, ps_job):
    d = ps_job["dir"]
    info = ckpt.info(d)
    assert info["kind"] == "parameter_server" and info["step"] == 60 and info["job_id"] == ps_job["job_id"]
    v = ckpt.load(d)
    assert v, "no variables"
    # the manifests' declared shapes, and every variable split over both ps tasks
    declared, holders = {}, {}
    for m in sorted(glob.glob(os.path.join(info["dir"], "manifest-ps*.json"))):
        for var in json.load(open(m))["variables"]:
            name = var["name"].split("/", 1)[1]
            declared[name] = tuple(var["shape"])
            holders.setdefault(name, set()).add(os.path.basename(m))
    assert set(v) == set(declared)
    for name, arr in v.items():
        assert arr.shape == declared[name], name
        assert arr.dtype == np.float32
        assert np.isfinite(arr).all()
    assert any(len(h) == 2 for h in holders.values()), "fixed:2 split no variable over 2 ps: %s" % holders
    kernels = [k for k in v if k.endswith("kernel")]
    assert kernels and v[kernels[0]].shape[0] == 12  # the input dim
    # equal to the values the psds hold (the chief keeps them: --keep-variables)
    for name, arr in v.items():
        rows = psd_rows(cluster, ps_job["job_id"] + "/" + name)
        assert rows, "the psds hold no shard of %s" % name
        whole = np.concatenate([rows[k].reshape((-1,) + arr.shape[1:]) for k in sorted(rows)])
        np.testing.assert_array_equal(whole.reshape(arr.shape), arr, err_msg=name)
    # metrics: what the coordinator reported
    m = ckpt.metrics(d)
    assert m["final"]["test_accuracy"] == ps_job["metrics"]["test_accuracy"]
    assert m["state"] == "done" and m["step"] == 60 and m["history"]
    assert ckpt.metrics(info["dir"])["final"] == m["final"]


def test_multi_worker_mirrored_state(cluster):
    with zdist.Client(cluster.chief) as c:
        st = c.submit(mlp_job("multi_worker_mirrored", 40)).wait()
    assert st["state"] == "done", st
    info = ckpt.info(st["dir"])
    assert info["kind"] == "workers" and info["step"] == 40
    v = ckpt.load(st["dir"])
    kernels = [k for k in v if k.endswith("kernel")]
    assert kernels and all(np.isfinite(a).all() for a in v.values())
    assert sorted(a.shape for k, a in v.items() if k.endswith("kernel")) == [(12, 24), (24, 3)]
    assert not any("/slot" in k for k in v), sorted(v)  # Adam's slots are not variables


@pytest.fixture
def copy(ps_job, tmp_path):
    src = ckpt.info(ps_job["dir"])["dir"]
    dst = tmp_path / os.path.basename(src)
    shutil.copytree(src, dst)
    return str(dst)


def biggest_shard(d):
    return max(glob.glob(os.path.join(d, "*.bin")), key=os.path.getsize)


def test_a_flipped_byte_is_refused_naming_the_file(copy):
    f = biggest_shard(copy)
    with open(f, "r+b") as fp:
        fp.seek(5)
        b = fp.read(1)
        fp.seek(5)
        fp.write(bytes([b[0] ^ 0x40]))
    with pytest.raises(zdist.CheckpointError) as e:
        ckpt.load(copy)
    assert e.value.path == f and os.path.basename(f) in str(e.value) and "CRC-32" in str(e.value)


def test_a_truncated_file_is_refused_naming_it(copy):
    f = biggest_shard(copy)
    os.truncate(f, os.path.getsize(f) - 4)
    with pytest.raises(zdist.CheckpointError) as e:
        ckpt.load(copy)
    assert e.value.path == f and "truncated" in str(e.value)


def test_a_damaged_manifest_is_refused_naming_it(copy):
    m = os.path.join(copy, "manifest-ps0.json")
    doc = json.load(open(m))
    doc["step"] += 1  # not resealed
    json.dump(doc, open(m, "w"))
    with pytest.raises(zdist.CheckpointError) as e:
        ckpt.load(copy)
    assert e.value.path == m and "damaged" in str(e.value)


def reseal(path, doc, field):
    doc.pop(field, None)
    doc[field] = zlib.crc32(_canon.dumps(doc).encode()) & 0xFFFFFFFF
    json.dump(doc, open(path, "w"), indent=1, sort_keys=True)


def test_another_version_is_refused_clearly(copy):
    m = os.path.join(copy, "manifest-ps1.json")
    doc = json.load(open(m))
    doc["version"] = 2
    reseal(m, doc, "crc32")  # sealed as that version would: only the version is foreign
    with pytest.raises(zdist.CheckpointError) as e:
        ckpt.load(copy)
    assert e.value.path == m and "another version" in str(e.value) and "version 2" in str(e.value)


def test_an_incomplete_checkpoint_is_refused(copy):
    os.remove(os.path.join(copy, "manifest-ps1.json"))
    with pytest.raises(zdist.CheckpointError) as e:
        ckpt.load(copy)
    assert "manifest-ps1.json" in str(e.value) and "incomplete" in str(e.value)
    os.remove(os.path.join(copy, "manifest.json"))
    with pytest.raises(zdist.CheckpointError):
        ckpt.load(os.path.dirname(copy))  # no complete ckpt-STEP left there
