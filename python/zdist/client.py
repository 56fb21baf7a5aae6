"""zdist.Client: submit, follow, cancel and list jobs on zdist-coordinator.

It speaks the coordinator service of proto/coordinator.proto (methods
300-303) exactly as the C client does (common/src/clients/coord_client.c):
the same requests, deadlines, status stream and its resubscription. A
job's status is one dict, the object `zdist status --json` prints: the
coordinator's detail (metrics, workers, ps, checkpoint, ...) with job_id,
name, state, step, steps and error beside it.
"""

import json
import os
import time

from . import _proto
from ._rpc import DEADLINE_EXCEEDED, OK, UNAVAILABLE, RpcClient
from .errors import STATUS_CODES, ZdistError
from .keys import Keys, normalize

SUBMIT, STATUS, CANCEL, LIST = 300, 301, 302, 303
MAX_JOB_BYTES = 16 << 20  # ZDIST_COORD_MAX_JOB_BYTES
FINAL_STATES = ("done", "failed", "cancelled")
RESOURCE_EXHAUSTED = STATUS_CODES["RESOURCE_EXHAUSTED"]

# zdist_coord_follow_options_default
LOST_WAIT_S = 180.0
RESUBSCRIBE_S = 0.5
POLL_TIMEOUT_S = 2.0


def _job_dict(pb):
    """A JobStatus as `zdist status --json` prints it (cli_coord.c's s_job_json)."""
    try:
        out = json.loads(pb.detail_json) if pb.detail_json else {}
    except ValueError:
        out = {}
    if not isinstance(out, dict):
        out = {}
    out.update(job_id=pb.job_id, name=pb.name, state=pb.state, step=pb.step, steps=pb.steps, error=pb.error)
    out.setdefault("metrics", {})
    return out


def _chief_from_tf_config():
    tf = os.environ.get("TF_CONFIG")
    if not tf:
        raise ValueError("give chief='HOST:PORT' (no TF_CONFIG in the environment to find the chief in)")
    chiefs = json.loads(tf).get("cluster", {}).get("chief") or []
    if not chiefs:
        raise ValueError("no chief task in TF_CONFIG; give chief='HOST:PORT'")
    return chiefs[0]


class Client:
    """A client of zdist-coordinator at chief ("host:port"; None: TF_CONFIG's
    chief). keys: a key directory (`zdist keygen`), then every byte is
    CURVE-encrypted, as the key NAME (key=, default "client"), trusting the
    chief's certificate: the one DIR/servers names for its address, else
    server_key, else "chief-0". timeout: seconds a call may take."""

    def __init__(self, chief=None, keys=None, key="client", server_key=None, timeout=30.0):
        self.endpoint = normalize(chief if chief is not None else _chief_from_tf_config())
        self.timeout = timeout
        self._pb = _proto.module("coordinator")
        self.keys = Keys(os.fspath(keys), key, server_key) if keys is not None else None
        server = self.keys.server_name_at(self.endpoint, "chief-0") if self.keys else None
        self._rpc = RpcClient(self.endpoint, self.keys, server)

    def close(self):
        self._rpc.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "zdist.Client(%r%s)" % (self.endpoint, ", keys=%r" % self.keys.dir if self.keys else "")

    # ---- calls ----

    def _check(self, reply):
        if reply.status != OK:
            raise ZdistError(reply.status, reply.message, self.endpoint)
        return reply

    def _call(self, method, body, timeout=None):
        return self._check(self._rpc.call(method, body, timeout or self.timeout))

    def submit(self, job):
        """Sends a job (a dict, or the path of its JSON file) to the
        coordinator; its Job. A job refused raises ZdistError with the
        coordinator's code (INVALID_ARGUMENT, naming the field) and text.
        Relative data paths resolve against the file's directory, or for
        a dict the current directory."""
        if isinstance(job, dict):
            text = json.dumps(job)
            base = os.getcwd()
        else:
            path = os.fspath(job)
            with open(path, "rb") as f:
                raw = f.read(MAX_JOB_BYTES + 1)
            if len(raw) > MAX_JOB_BYTES:
                raise ValueError("%s: larger than %d MiB" % (path, MAX_JOB_BYTES >> 20))
            text = raw.decode("utf-8")
            base = os.path.dirname(os.path.realpath(path)) or "/"
        req = self._pb.SubmitRequest(job_json=text, base_dir=base)
        reply = self._call(SUBMIT, req)
        r = self._pb.SubmitReply()
        r.ParseFromString(reply.body)
        if not r.job_id:
            raise ZdistError(STATUS_CODES["INTERNAL"], "SUBMIT reply: no job_id", self.endpoint)
        return Job(self, r.job_id)

    def job(self, job_id=""):
        """The Job of an id ("" = the latest job)."""
        return Job(self, job_id)

    def status(self, job_id=""):
        """A job's status dict ("" = the latest job)."""
        reply = self._call(STATUS, self._pb.StatusRequest(job_id=job_id, follow=False), min(self.timeout, 5.0))
        return self._one(reply)

    def _one(self, reply):
        r = self._pb.StatusReply()
        r.ParseFromString(reply.body)
        if len(r.jobs) != 1:
            raise ZdistError(STATUS_CODES["INTERNAL"], "STATUS reply: %d jobs instead of one" % len(r.jobs),
                             self.endpoint)
        return _job_dict(r.jobs[0])

    def cancel(self, job_id):
        """Cancels a queued or running job; its state after the request."""
        reply = self._call(CANCEL, self._pb.CancelRequest(job_id=job_id), min(self.timeout, 5.0))
        r = self._pb.CancelReply()
        r.ParseFromString(reply.body)
        return r.state

    def jobs(self):
        """Every job the coordinator holds, as status dicts (without per-task detail)."""
        reply = self._call(LIST, self._pb.ListRequest(), min(self.timeout, 5.0))
        r = self._pb.StatusReply()
        r.ParseFromString(reply.body)
        return [_job_dict(j) for j in r.jobs]

    def follow(self, job_id="", lost_wait=LOST_WAIT_S):
        """Status records of a job as it runs (the coordinator's stream: one
        at once, one whenever the step or state changes, at least every
        5 s), the last one when it has ended. A coordinator that stops or
        restarts is subscribed to again; silence for lost_wait seconds
        raises ZdistError DEADLINE_EXCEEDED."""
        job = job_id
        stream = True  # False: too many followers, poll instead
        heard = time.monotonic()
        sent = None
        while True:
            if sent is not None:  # not more often than every RESUBSCRIBE_S
                time.sleep(max(0.0, min(sent + RESUBSCRIBE_S, heard + lost_wait) - time.monotonic()))
            if time.monotonic() >= heard + lost_wait:
                break
            req = self._pb.StatusRequest(job_id=job, follow=stream)
            rid = self._rpc.send(STATUS, req, None if stream else POLL_TIMEOUT_S)
            sent = time.monotonic()
            try:
                while True:
                    reply = self._rpc.recv(rid, max(0.0, heard + lost_wait - time.monotonic()))
                    if reply is None:
                        break  # silent for lost_wait
                    st = reply.status
                    if st in (UNAVAILABLE, DEADLINE_EXCEEDED):
                        break  # the coordinator stopped or restarts: subscribe again
                    if st == RESOURCE_EXHAUSTED and stream:
                        stream = False
                        break
                    self._check(reply)
                    record = self._one(reply)
                    heard = time.monotonic()
                    job = record["job_id"]  # stay with this job, also when asked for the latest
                    yield record
                    if record["state"] in FINAL_STATES:
                        return
                    if not reply.more:
                        break
            finally:
                self._rpc.forget(rid)
        raise ZdistError(DEADLINE_EXCEEDED, "coordinator %s: nothing heard for %.0f s" % (self.endpoint, lost_wait),
                         self.endpoint)


class Job:
    """A job on the coordinator, by id."""

    def __init__(self, client, job_id):
        self.client = client
        self.id = job_id

    def __repr__(self):
        return "zdist.Job(%r)" % self.id

    def status(self):
        """Its status dict: job_id, name, state (queued, running, done,
        failed, cancelled), step, steps, error, metrics {loss,
        examples_per_sec, test_accuracy, ...}, workers, ps, dir, ..."""
        return self.client.status(self.id)

    def follow(self, lost_wait=LOST_WAIT_S):
        """An iterator of its status records until it ends (see Client.follow)."""
        return self.client.follow(self.id, lost_wait)

    def wait(self, lost_wait=LOST_WAIT_S):
        """Follows it to its end; its last status (state done, failed or cancelled)."""
        last = None
        for last in self.follow(lost_wait):
            pass
        return last

    def cancel(self):
        """Cancels it; its state after the request."""
        return self.client.cancel(self.id)
