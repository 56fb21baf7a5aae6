"""zdist.Client against a real chief, workers and psds: submit, follow, status, cancel, list, a refused
job, CURVE; and python3 -m zdist beside the C client."""

import json
import os
import subprocess
import sys

import pytest

import zdist


def softmax_job(steps, name="py-softmax", **extra):
    job = {"name": name, "strategy": {"type": "parameter_server"},
           "model": {"name": "softmax_regression"}, "optimizer": {"type": "sgd", "learning_rate": 0.1},
           "dataset": {"format": "synthetic",
                       "synthetic": {"n": 4096, "test_n": 1024, "dim": 16, "classes": 4, "seed": 7},
                       "global_batch_size": 64},
           "steps": steps, "steps_per_execution": 2, "seed": 3, "evaluation": {"at_end": True}}
    job.update(extra)
    return job


@pytest.fixture
def client(cluster):
    with zdist.Client(cluster.chief) as c:
        yield c


def test_generated_modules_load_with_debians_protobuf():
    from google.protobuf import __version__ as pb_version

    from zdist import _proto

    common = _proto.module("common")
    h = common.Header(version=1, request_id=7, method=301)
    assert common.Header.FromString(h.SerializeToString()).request_id == 7, pb_version
    assert _proto.module("coordinator").StatusRequest(job_id="x", follow=True).follow


def test_submit_follow_to_completion(client, cluster):
    job = client.submit(softmax_job(120))
    assert job.id
    records = list(job.follow())
    assert records, "follow yielded nothing"
    steps = [r["step"] for r in records]
    assert steps == sorted(steps), "steps go backwards: %s" % steps
    assert all(r["job_id"] == job.id for r in records)
    last = records[-1]
    assert last["state"] == "done", last
    assert last["step"] == last["steps"] == 120
    assert 0 <= last["metrics"]["test_accuracy"] <= 1
    # status fields, as zdist status --json prints them
    st = job.status()
    for field in ("job_id", "name", "state", "step", "steps", "error", "metrics", "workers", "ps", "dir"):
        assert field in st, field
    assert (st["job_id"], st["name"], st["state"], st["step"], st["error"]) == (job.id, "py-softmax", "done", 120, "")
    assert len(st["workers"]) == 2 and len(st["ps"]) == 2
    assert {w["endpoint"] for w in st["workers"]} == {"tcp://" + a for a in cluster.workers}
    assert st["metrics"]["test_accuracy"] == last["metrics"]["test_accuracy"]
    assert "loss" in st["metrics"] and "examples_per_sec" in st["metrics"]
    # and as the C client reads it
    out = subprocess.run([os.environ["ZDIST_BIN"], "status", job.id, "--coordinator", cluster.chief, "--json"],
                         check=True, capture_output=True, text=True).stdout
    c_st = json.loads(out)
    assert (c_st["state"], c_st["step"], c_st["steps"]) == (st["state"], st["step"], st["steps"])
    assert c_st["metrics"]["test_accuracy"] == st["metrics"]["test_accuracy"]
    # client.jobs() lists it
    listed = {j["job_id"]: j for j in client.jobs()}
    assert listed[job.id]["state"] == "done" and listed[job.id]["name"] == "py-softmax"
    # the latest job
    assert client.status()["job_id"] in listed


def test_submit_a_file_and_wait(client, tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(softmax_job(40, name="py-file")))
    job = client.submit(path)
    st = job.wait()
    assert (st["state"], st["step"], st["name"]) == ("done", 40, "py-file")


def test_cancel_a_running_job(client):
    job = client.submit(softmax_job(10_000_000, name="py-long"))
    running = None
    for rec in job.follow():
        if rec["state"] == "running" and rec["step"] > 0:
            running = rec
            break
    assert running is not None, "the job never ran"
    state = job.cancel()
    assert state in ("cancelling", "cancelled"), state  # the request's answer: on its way, or done
    st = job.wait()
    assert st["state"] == "cancelled", st
    assert 0 < st["step"] < 10_000_000
    assert job.status()["state"] == "cancelled"


def test_a_bad_job_is_refused_with_the_daemons_code_and_text(client, cluster, tmp_path):
    bad = softmax_job(10)
    bad["optimizer"] = {"type": "sgd", "learning_rat": 0.1}
    with pytest.raises(zdist.ZdistError) as e:
        client.submit(bad)
    err = e.value
    assert err.code == 3 and err.status == "INVALID_ARGUMENT", err
    assert "learning_rat" in err.message, err.message
    # the very text the C client prints for the same job
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    c = subprocess.run([os.environ["ZDIST_BIN"], "submit", str(path), "--coordinator", cluster.chief],
                       capture_output=True, text=True)
    assert c.returncode == 2
    assert err.message in c.stderr, (err.message, c.stderr)
    with pytest.raises(zdist.ZdistError) as e:
        client.submit({"name": "no-model", "strategy": {"type": "parameter_server"}})
    assert e.value.status == "INVALID_ARGUMENT" and "model" in e.value.message
    with pytest.raises(zdist.ZdistError) as e:
        client.job("j-no-such-job").cancel()
    assert e.value.code == 5 and "no such job" in e.value.message
    with pytest.raises(zdist.ZdistError) as e:
        client.status("j-no-such-job")
    assert e.value.status == "NOT_FOUND"


def test_an_unreachable_coordinator_ends_at_the_deadline():
    from conftest import free_port

    with zdist.Client("127.0.0.1:%d" % free_port(), timeout=1.0) as c:
        with pytest.raises(zdist.ZdistError) as e:
            c.jobs()
        assert e.value.status == "DEADLINE_EXCEEDED" and "no reply before the deadline" in e.value.message


def test_curve_with_keys(keyed):
    keys = os.path.join(keyed.dir, "keys")
    with zdist.Client(keyed.chief, keys=keys, key="alice") as c:
        job = c.submit(softmax_job(20, name="py-curve"))
        st = job.wait()
        assert (st["state"], st["step"]) == ("done", 20), st
        assert any(j["job_id"] == job.id for j in c.jobs())
    # no keys against a CURVE chief: refused at the handshake (UNAUTHENTICATED), not left to the deadline
    # (which would end it DEADLINE_EXCEEDED)
    with zdist.Client(keyed.chief, timeout=120) as c:
        with pytest.raises(zdist.ZdistError) as e:
            c.jobs()
        assert e.value.status == "UNAUTHENTICATED" and "no keys" in e.value.message, e.value
    # a key the chief does not know
    with zdist.Client(keyed.chief, keys=keyed.rogue, key="mallory", timeout=120) as c:
        with pytest.raises(zdist.ZdistError) as e:
            c.jobs()
        assert e.value.status == "UNAUTHENTICATED" and "mallory" in e.value.message, e.value
    # a worker's key may not submit
    with zdist.Client(keyed.chief, keys=keys, key="worker-0") as c:
        with pytest.raises(zdist.ZdistError) as e:
            c.submit(softmax_job(10))
        assert e.value.status in ("PERMISSION_DENIED", "UNAUTHENTICATED"), e.value
    # a key directory without this key
    with pytest.raises(ValueError, match="nobody"):
        zdist.Client(keyed.chief, keys=keys, key="nobody")


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "zdist"] + list(args), capture_output=True, text=True)


def test_cli_mirrors_zdist(cluster, tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(softmax_job(30, name="py-cli")))
    r = run_cli("submit", str(path), "--coordinator", cluster.chief, "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert (st["state"], st["step"], st["name"]) == ("done", 30, "py-cli")
    r = run_cli("status", st["job_id"], "--cluster", cluster.cluster_file)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("job %s (py-cli): done, step 30/30" % st["job_id"]), r.stdout
    r = run_cli("submit", str(path), "--coordinator", cluster.chief, "--detach")
    assert r.returncode == 0, r.stderr
    job_id = r.stdout.strip()
    r = run_cli("status", job_id, "--coordinator", cluster.chief, "--follow", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["state"] == "done", (r.stdout, r.stderr)
    r = run_cli("cancel", "j-no-such-job", "--coordinator", cluster.chief)
    assert r.returncode == 2 and "NOT_FOUND" in r.stderr, r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "strategy": {"type": "parameter_server"}}))
    r = run_cli("submit", str(bad), "--coordinator", cluster.chief)
    c = subprocess.run([os.environ["ZDIST_BIN"], "submit", str(bad), "--coordinator", cluster.chief],
                       capture_output=True, text=True)
    assert r.returncode == c.returncode == 2
    assert r.stderr == c.stderr, (r.stderr, c.stderr)


def test_follow_survives_a_coordinator_restart(tmp_path):
    from conftest import Cluster

    c = Cluster(str(tmp_path), 1, 1)
    try:
        with zdist.Client(c.chief) as client:
            job = client.submit(softmax_job(10_000_000, name="py-restart", checkpoint={"every_steps": 50}))
            records = job.follow()
            for rec in records:
                if rec["state"] == "running" and rec["step"] > 0:
                    break
            # the chief crashes and comes back: it resumes the job; the stream is subscribed to again
            c.kill("chief")
            c.restart("chief", "chief serving at")
            resumed = None
            for rec in records:
                if rec["state"] == "running" and rec["step"] > 0:
                    resumed = rec
                    break
            assert resumed is not None and resumed["job_id"] == job.id
            job.cancel()
            last = None
            for last in records:
                pass
            assert last["state"] == "cancelled", last
    finally:
        c.stop()
