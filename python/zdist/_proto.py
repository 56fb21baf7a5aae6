"""The protobuf modules protoc generates from proto/ (never committed).

They are found, in this order, in $ZDIST_PROTO_PY, in this package's own
_pb/ (an installed copy), or in a build tree next to the source tree
(build*/python/zdist_pb, the newest first). They are loaded under private
names, so a program's own common_pb2 never clashes with zdist's.
"""

import glob
import importlib.util
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_MODULES = ("common", "coordinator")
_loaded = {}


def _candidates():
    env = os.environ.get("ZDIST_PROTO_PY")
    if env:
        yield env
    yield os.path.join(_HERE, "_pb")
    root = os.path.dirname(os.path.dirname(_HERE))
    found = glob.glob(os.path.join(root, "build*", "python", "zdist_pb"))
    found.sort(key=lambda d: os.path.getmtime(d), reverse=True)
    yield from found


def _find():
    tried = []
    for d in _candidates():
        if all(os.path.isfile(os.path.join(d, m + "_pb2.py")) for m in _MODULES):
            return d
        tried.append(d)
    raise ImportError(
        "zdist: the protobuf modules generated from proto/ are not found (looked in %s); build them with "
        "'cmake --build BUILD --target zdist_python_proto' (needs protoc: apt-get install protobuf-compiler) "
        "or set ZDIST_PROTO_PY to the directory holding common_pb2.py and coordinator_pb2.py"
        % (", ".join(tried) or "nowhere"))


def module(name):
    """The generated module NAME_pb2 (common or coordinator)."""
    if name not in _loaded:
        d = _find()
        path = os.path.join(d, name + "_pb2.py")
        spec = importlib.util.spec_from_file_location("zdist._pb_" + name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _loaded[name] = mod
    return _loaded[name]
