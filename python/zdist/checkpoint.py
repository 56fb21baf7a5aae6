"""zdist checkpoints into NumPy.

A job's checkpoint is a directory ckpt-STEP (under the job's directory,
STATE/jobs/ID, or its checkpoint.dir) holding the coordinator's
manifest.json (written last: a checkpoint without it is incomplete) and

- parameter_server: each ps task's manifest-psN.json (format
  "zdist-psd-checkpoint", version 1) naming its shard files, each a
  variable's rows [row_start, row_end) (values, then the optimizer's
  slots) with its size and CRC-32 (psd/psd_ckpt.c);
- multi_worker_mirrored (and tpu over workers): manifest-workers.json
  (format "zdist-worker-state", version 1) and workers-state.bin, every
  variable (and its optimizer slots, "VAR/slotK") at its offset
  (coordinator/coord_wstate.c); checkpoints written before the workers
  sent their variables' shapes hold them flat (rank 1).

Every manifest is JSON sealed with the CRC-32 of its canonical form
(zdist_json_write_sealed). load() checks every CRC and size and merges
the shards of each variable into the whole variable; a damaged file is
refused naming it, a format of another version refused as such.
"""

import glob
import json
import os
import re
import zlib

import numpy as np

from . import _canon
from .errors import CheckpointError

PSD_FORMAT, WORKERS_FORMAT, VERSION = "zdist-psd-checkpoint", "zdist-worker-state", 1
_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64, "uint8": np.uint8}
_CKPT = re.compile(r"^ckpt-(\d+)$")
_CHUNK = 1 << 20


def _load_json(path, seal):
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise CheckpointError(path, "missing") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(path, "damaged: does not parse as JSON (%s)" % e) from None
    why = _canon.crc_check(doc, seal)
    if why:
        raise CheckpointError(path, "damaged (%s)" % why)
    return doc


def _version(path, doc, want):
    fmt, ver = doc.get("format"), doc.get("version")
    if fmt != want or ver != VERSION:
        raise CheckpointError(path, "written by another version of zdist (format %r version %r); this reader "
                              "knows %s version %d" % (fmt, ver, want, VERSION))


def find(path):
    """The checkpoint directory path names: path itself when it is one
    (it holds a manifest), else the newest complete ckpt-STEP under it
    (a job's directory, or its checkpoint.dir)."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise CheckpointError(path, "not a directory (give a ckpt-STEP directory or a job's directory)")
    if glob.glob(os.path.join(path, "manifest*.json")):
        return path
    steps = []
    for name in os.listdir(path):
        m = _CKPT.match(name)
        if m and os.path.exists(os.path.join(path, name, "manifest.json")):
            steps.append((int(m.group(1)), name))
    if not steps:
        raise CheckpointError(path, "no complete checkpoint here (no ckpt-STEP/manifest.json)")
    return os.path.join(path, max(steps)[1])


def _read_file(path, size, crc, manifest):
    """path's bytes, checked against the manifest's size and CRC-32."""
    try:
        have = os.path.getsize(path)
    except OSError:
        raise CheckpointError(path, "missing (listed in %s)" % manifest) from None
    if have != size:
        raise CheckpointError(path, "truncated or damaged: %d bytes, %s says %d" % (have, manifest, size))
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    with open(path, "rb") as f:
        while got < size:
            n = f.readinto(view[got:got + _CHUNK])
            if not n:
                raise CheckpointError(path, "truncated while read")
            got += n
    have_crc = zlib.crc32(buf) & 0xFFFFFFFF
    if have_crc != crc:
        raise CheckpointError(path, "damaged: CRC-32 %08x, %s says %08x" % (have_crc, manifest, crc))
    return buf


def _psd_variables(ckpt, manifests, step):
    """{name: (dtype, shape, [(row_start, row_end, path, bytes, crc, manifest)])} over every ps manifest."""
    out = {}
    for mpath in manifests:
        doc = _load_json(mpath, "crc32")
        _version(mpath, doc, PSD_FORMAT)
        if step is not None and doc.get("step") != step:
            raise CheckpointError(mpath, "incomplete checkpoint: step %r, manifest.json says %d" % (doc.get("step"), step))
        for v in doc.get("variables", []):
            try:
                name, dtype, shape = v["name"], v["dtype"], tuple(int(d) for d in v["shape"])
                files = [(int(f["row_start"]), int(f["row_end"]), f["file"], int(f["bytes"]), int(f["crc32"]),
                          len(f["optimizer"]["slots"])) for f in v["files"]]
            except (KeyError, TypeError, ValueError) as e:
                raise CheckpointError(mpath, "damaged: a variable entry lacks %s" % e) from None
            if dtype not in _DTYPES:
                raise CheckpointError(mpath, "variable '%s': unknown dtype %r" % (name, dtype))
            have = out.setdefault(name, (dtype, shape, []))
            if have[0] != dtype or have[1] != shape:
                raise CheckpointError(mpath, "variable '%s' is %s %s here, %s %s in another manifest"
                                      % (name, dtype, list(shape), have[0], list(have[1])))
            for rs, re_, fname, nbytes, crc, nslots in files:
                if not fname or "/" in fname or fname.startswith("."):
                    raise CheckpointError(mpath, "damaged: file name %r outside the checkpoint directory" % fname)
                have[2].append((rs, re_, os.path.join(ckpt, fname), nbytes, crc, nslots, mpath))
    return out


def _merge(name, dtype, shape, files):
    """The whole variable from its shard files (values sections, by global rows)."""
    np_dtype = np.dtype(_DTYPES[dtype]).newbyteorder("<")
    rows = shape[0] if shape else 1
    row_elems = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
    out = np.empty((rows, row_elems), dtype=np_dtype)
    covered = np.zeros(rows, dtype=bool)
    for rs, re_, path, nbytes, crc, nslots, mpath in sorted(files):
        if rs < 0 or re_ < rs or re_ > rows or nbytes != (re_ - rs) * row_elems * np_dtype.itemsize * (1 + nslots):
            raise CheckpointError(mpath, "damaged: variable '%s': rows [%d, %d) or bytes %d do not fit %s"
                                  % (name, rs, re_, nbytes, list(shape)))
        if covered[rs:re_].any():
            raise CheckpointError(path, "rows of '%s' [%d, %d) are in another shard file too" % (name, rs, re_))
        buf = _read_file(path, nbytes, crc, mpath)
        values = np.frombuffer(buf, dtype=np_dtype, count=(re_ - rs) * row_elems)
        out[rs:re_] = values.reshape(re_ - rs, row_elems)
        covered[rs:re_] = True
    if not covered.all():
        raise CheckpointError(os.path.dirname(files[0][2]) if files else name,
                              "incomplete checkpoint: variable '%s' has %d of its %d rows"
                              % (name, int(covered.sum()), rows))
    return out.reshape(shape).astype(np_dtype.newbyteorder("="), copy=False)


def _load_workers(ckpt, step):
    mpath = os.path.join(ckpt, "manifest-workers.json")
    doc = _load_json(mpath, "manifest_crc32")
    _version(mpath, doc, WORKERS_FORMAT)
    if step is not None and doc.get("step") != step:
        raise CheckpointError(mpath, "incomplete checkpoint: step %r, manifest.json says %d" % (doc.get("step"), step))
    fname = doc.get("file", "")
    if not fname or "/" in fname or fname.startswith("."):
        raise CheckpointError(mpath, "damaged: file name %r outside the checkpoint directory" % fname)
    path = os.path.join(ckpt, fname)
    buf = _read_file(path, int(doc["bytes"]), int(doc["crc32"]), mpath)
    out = {}
    for t in doc.get("tensors", []):
        dtype, shape, at, nbytes = t["dtype"], tuple(int(d) for d in t["shape"]), int(t["offset"]), int(t["bytes"])
        np_dtype = np.dtype(_DTYPES.get(dtype, np.float32)).newbyteorder("<")
        count = int(np.prod(shape, dtype=np.int64))
        if dtype not in _DTYPES or count * np_dtype.itemsize != nbytes or at < 0 or at + nbytes > len(buf):
            raise CheckpointError(mpath, "damaged: tensor '%s' does not fit the data" % t.get("name"))
        arr = np.frombuffer(buf, dtype=np_dtype, count=count, offset=at).reshape(shape)
        out[t["name"]] = arr.astype(np_dtype.newbyteorder("="), copy=True)
    # The optimizer's slots travel beside each variable as "VAR/slotK"; a
    # checkpoint's variables are what load() returns, as for the psd's.
    return {k: v for k, v in out.items() if not (re.match(r"^(.*)/slot\d+$", k) and
                                                 re.match(r"^(.*)/slot\d+$", k).group(1) in out)}


def _strip_job(variables, job_id):
    """A job's variables live under its namespace on the psd ("ID/name"): its own names."""
    prefix = job_id + "/" if job_id else None
    if not prefix or not all(k.startswith(prefix) for k in variables):
        return variables
    return {k[len(prefix):]: v for k, v in variables.items()}


def info(path):
    """What load(path) would read: {"dir", "step", "job_id", "kind" (
    "parameter_server" or "workers"), "num_ps"}, the coordinator's
    manifest checked."""
    ckpt = find(path)
    top = os.path.join(ckpt, "manifest.json")
    meta = _load_json(top, "crc32") if os.path.exists(top) else {}
    if os.path.exists(os.path.join(ckpt, "manifest-workers.json")):
        kind = "workers"
    elif glob.glob(os.path.join(ckpt, "manifest-ps*.json")):
        kind = "parameter_server"
    elif os.path.exists(top):
        raise CheckpointError(ckpt, "incomplete checkpoint: manifest.json but no manifest-ps*.json or "
                              "manifest-workers.json")
    else:
        raise CheckpointError(ckpt, "not a zdist checkpoint (no manifest.json)")
    return {"dir": ckpt, "step": meta.get("step"), "job_id": meta.get("job_id", ""), "kind": kind,
            "num_ps": meta.get("num_ps")}


def load(path):
    """The variables of a zdist checkpoint as {name: numpy.ndarray}, each
    whole (a parameter_server job's shards merged by their global rows),
    named as the model declares them ("dense/kernel", ...). path: a
    ckpt-STEP directory, or a job's directory (its newest complete
    checkpoint). Raises CheckpointError naming the file at fault."""
    i = info(path)
    ckpt, step = i["dir"], i["step"]
    if i["kind"] == "workers":
        return _load_workers(ckpt, step)
    manifests = sorted(glob.glob(os.path.join(ckpt, "manifest-ps*.json")))
    num_ps = i["num_ps"]
    if isinstance(num_ps, int):
        missing = [n for n in range(num_ps) if not os.path.exists(os.path.join(ckpt, "manifest-ps%d.json" % n))]
        if missing:
            raise CheckpointError(os.path.join(ckpt, "manifest-ps%d.json" % missing[0]),
                                  "missing: incomplete checkpoint of %d ps tasks (manifest.json)" % num_ps)
    found = _psd_variables(ckpt, manifests, step)
    out = {name: _merge(name, d, s, f) for name, (d, s, f) in found.items()}
    return _strip_job(out, i["job_id"])


def _jsonl(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line cut short by a crash: the rest is whole
    return out


def _job_dir(path):
    path = os.fspath(path)
    for d in (path, os.path.dirname(os.path.abspath(path))):
        if os.path.exists(os.path.join(d, "state.json")) or os.path.exists(os.path.join(d, "metrics.jsonl")):
            return d
    raise CheckpointError(path, "no state.json or metrics.jsonl here nor in its parent (give the job's directory, "
                          "the 'dir' of its status)")


def metrics(path):
    """A job's metrics from its directory (or one of its ckpt-STEP
    directories under it): {"final": the last metrics the coordinator
    reported (loss, examples_per_sec, test_accuracy, test_loss, ...),
    "state": the job's state, "step": its step, "history": the training
    log [{step, loss, examples_per_sec, time}] (metrics.jsonl),
    "evaluations": the sidecar evaluator's [{eval_step, test_loss,
    test_accuracy, ...}]}."""
    d = _job_dir(path)
    out = {"final": {}, "state": None, "step": None, "history": _jsonl(os.path.join(d, "metrics.jsonl")),
           "evaluations": _jsonl(os.path.join(d, "evaluations.jsonl"))}
    sp = os.path.join(d, "state.json")
    if os.path.exists(sp):
        st = _load_json(sp, "crc32")
        detail = st.get("detail") or {}
        out["final"] = detail.get("metrics") or {}
        out["state"] = st.get("state")
        out["step"] = st.get("step")
    return out
