"""Real daemons for the Python client's tests, started as tests/integration/lib.sh starts them: free
loopback ports, a TF_CONFIG-style cluster file, zdist-psd / zdist-worker / zdist-coordinator from the build
dir, each waited for by its readiness line; SIGTERM (then SIGKILL) at the end, their logs shown when a
test fails."""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

_given = set()


def free_port():
    """A TCP port on 127.0.0.1 nobody listens on now, never handed out twice."""
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in _given:
            _given.add(port)
            return port


def binary(var):
    path = os.environ.get(var)
    if not path or not os.access(path, os.X_OK):
        pytest.fail("set %s to the binary (ctest does)" % var)
    return path


class Cluster:
    """A chief, NPS psds and NWORKERS workers on free ports under dir (state in dir/state)."""

    def __init__(self, root, nps, nworkers, keys=None, chief_args=()):
        self.dir = root
        self.keys = keys
        self.procs = {}
        self.ps = ["127.0.0.1:%d" % free_port() for _ in range(nps)]
        self.workers = ["127.0.0.1:%d" % free_port() for _ in range(nworkers)]
        self.chief = "127.0.0.1:%d" % free_port()
        self.cluster_file = os.path.join(root, "cluster.json")
        with open(self.cluster_file, "w") as f:
            json.dump({"cluster": {"chief": [self.chief], "ps": self.ps, "worker": self.workers}}, f)
        key_args = ["--keys", keys] if keys else []
        common = ["--cluster", self.cluster_file] + key_args
        for i in range(nps):
            self._start("ps%d" % i, [binary("ZDIST_PSD_BIN"), "--task", "ps:%d" % i, "--checkpoint-root", root] + common)
        for i in range(nworkers):
            self._start("worker%d" % i, [binary("ZDIST_WORKER_BIN"), "--task", "worker:%d" % i] + common)
        self._start("chief", [binary("ZDIST_COORDINATOR_BIN"), "--task", "chief:0", "--state-dir",
                              os.path.join(root, "state"), "--checkpoint-root", root] + common + list(chief_args))
        try:
            for i in range(nps):
                self.wait_log("ps%d" % i, "serving at")
            for i in range(nworkers):
                self.wait_log("worker%d" % i, "serving at")
            self.wait_log("chief", "chief serving at")
        except BaseException:
            self.stop()
            raise

    def _start(self, name, argv):
        self.argv = getattr(self, "argv", {})
        self.argv[name] = argv
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    def kill(self, name):
        """SIGKILL, as a crash."""
        self.procs[name].kill()
        self.procs[name].wait()

    def restart(self, name, ready):
        """Starts name again (its log appended to), waiting for one more `ready` line in its log."""
        seen = self.log(name).count(ready)
        self._start(name, self.argv[name])
        deadline = time.monotonic() + 60
        while self.log(name).count(ready) <= seen:
            if self.procs[name].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("%s did not serve again:\n%s" % (name, self.log(name)[-3000:]))
            time.sleep(0.05)

    def log(self, name):
        with open(os.path.join(self.dir, name + ".log"), errors="replace") as f:
            return f.read()

    def wait_log(self, name, text, secs=60):
        deadline = time.monotonic() + secs
        while text not in self.log(name):
            if self.procs[name].poll() is not None:
                raise RuntimeError("%s exited (%d) before its log said '%s':\n%s"
                                   % (name, self.procs[name].returncode, text, self.log(name)[-3000:]))
            if time.monotonic() > deadline:
                raise RuntimeError("%s: no '%s' in its log within %d s" % (name, text, secs))
            time.sleep(0.05)

    def logs(self):
        return "\n".join("---- %s ----\n%s" % (n, self.log(n)[-4000:]) for n in self.procs)

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture(scope="session")
def tmp_root():
    d = tempfile.mkdtemp(prefix="zdist-pyclient.")
    yield d
    shutil.rmtree(d, ignore_errors=True)


_clusters = []


@pytest.fixture(scope="session")
def cluster(tmp_root):
    """2 ps, 2 workers and the chief, plain; the chief keeps ended jobs' variables on the psds, so a
    test reads them back with `zdist ps get`."""
    root = os.path.join(tmp_root, "plain")
    os.makedirs(root)
    c = Cluster(root, 2, 2, chief_args=["--keep-variables"])
    _clusters.append(c)
    yield c
    c.stop()


@pytest.fixture(scope="session")
def keyed(tmp_root):
    """A key directory made by `zdist keygen` (chief-0, ps-0, worker-0, client, alice), a stranger's
    (mallory's, with copies of the public keys), and a cluster of 1 ps, 1 worker and the chief under CURVE."""
    root = os.path.join(tmp_root, "keyed")
    keys, rogue = os.path.join(root, "keys"), os.path.join(root, "rogue")
    os.makedirs(root)
    zdist = binary("ZDIST_BIN")
    for name in ("chief-0", "ps-0", "worker-0", "client", "alice"):
        subprocess.run([zdist, "keygen", name, "--dir", keys], check=True, stdout=subprocess.DEVNULL)
    os.makedirs(rogue)
    for f in os.listdir(keys):
        if f.endswith(".key"):
            shutil.copy(os.path.join(keys, f), rogue)
    subprocess.run([zdist, "keygen", "mallory", "--dir", rogue], check=True, stdout=subprocess.DEVNULL)
    c = Cluster(root, 1, 1, keys=keys)
    c.rogue = rogue
    _clusters.append(c)
    yield c
    c.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        for c in _clusters:
            rep.sections.append(("daemon logs (%s)" % c.dir, c.logs()))
