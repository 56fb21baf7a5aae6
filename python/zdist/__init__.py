"""zdist from Python: submit jobs to zdist-coordinator, follow and cancel
them (zdist.Client), and read checkpoints into NumPy (zdist.checkpoint).

Pure Python on Debian's python3-zmq, python3-protobuf and python3-numpy;
the protobuf modules are generated from proto/ at build time (see
python/README.md).
"""

from .client import Client, Job
from .errors import CheckpointError, ZdistError

__all__ = ["Client", "Job", "ZdistError", "CheckpointError", "checkpoint"]


def __getattr__(name):
    # zdist.checkpoint needs NumPy; a client that only submits does not.
    if name == "checkpoint":
        import importlib

        return importlib.import_module(__name__ + ".checkpoint")
    raise AttributeError("module 'zdist' has no attribute %r" % name)
