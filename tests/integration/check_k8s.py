#!/usr/bin/python3
"""Checks deploy/kubernetes against the daemons: flags, ports, probes, mounts, keys, image.

Usage: check_k8s.py DEPLOY_DIR ZDIST_COORDINATOR ZDIST_PSD ZDIST_WORKER
Prints one line per check and exits 1 on the first file that disagrees with the code."""
import re
import subprocess
import sys

import yaml

deploy, coordinator, psd, worker = sys.argv[1:5]
binaries = {"/usr/bin/zdist-coordinator": coordinator, "/usr/bin/zdist-psd": psd, "/usr/bin/zdist-worker": worker}
failures = []
passed = 0


def check(ok, what):
    global passed
    if ok:
        passed += 1
    else:
        failures.append(what)
        print("FAIL: " + what)


help_text = {}
for path, real in binaries.items():
    out = subprocess.run([real, "--help"], capture_output=True, text=True)
    help_text[path] = out.stdout + out.stderr


def flags_of(args):
    return [a for a in args if a.startswith("--")]


def arg_value(args, flag):
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


docs = {}
for name in ("tfjob.yaml", "volumes.yaml"):
    with open(f"{deploy}/{name}") as f:
        docs[name] = [d for d in yaml.safe_load_all(f) if d]

claims = {d["metadata"]["name"] for d in docs["volumes.yaml"] if d["kind"] == "PersistentVolumeClaim"}
tfjob = docs["tfjob.yaml"][0]
check(tfjob["apiVersion"] == "kubeflow.org/v1" and tfjob["kind"] == "TFJob", "tfjob.yaml is a kubeflow.org/v1 TFJob")
specs = tfjob["spec"]["tfReplicaSpecs"]
check(set(specs) <= {"Chief", "PS", "Worker", "Evaluator", "Master"}, f"replica types {sorted(specs)} are TFJob's")
check("Chief" in specs and "PS" in specs and "Worker" in specs, "a chief, ps and workers")
state_dirs, checkpoint_roots = {}, {}
for rtype, spec in specs.items():
    pod = spec["template"]["spec"]
    (c,) = [c for c in pod["containers"] if c["name"] == "tensorflow"]  # TFJob requires this name
    cmd, args = c["command"][0], c.get("args", [])
    check(cmd in binaries, f"{rtype}: runs a zdist daemon ({cmd})")
    wanted = {"Chief": "zdist-coordinator", "PS": "zdist-psd", "Worker": "zdist-worker", "Evaluator": "zdist-worker"}
    check(cmd.endswith(wanted[rtype]), f"{rtype}: runs {wanted[rtype]}")
    for flag in flags_of(args):
        check(re.search(r"(^|\s|, )" + re.escape(flag) + r"\b", help_text[cmd]) is not None,
              f"{rtype}: {cmd} --help lists {flag}")
    check(rtype != "Evaluator" or "--evaluator" in args, "the Evaluator runs zdist-worker --evaluator")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    # The training operator's TF_CONFIG addresses use the port named tfjob-port (default 2222).
    check(ports.get("tfjob-port") == 2222, f"{rtype}: listens on tfjob-port 2222")
    bind = arg_value(args, "--bind")
    check(bind is not None and bind.endswith(":%d" % ports.get("tfjob-port", -1)),
          f"{rtype}: --bind {bind} is the tfjob-port")
    http = arg_value(args, "--http")
    probe = c.get("livenessProbe", {}).get("httpGet", {})
    check(http is not None and probe.get("path") == "/metrics" and http.endswith(":%s" % probe.get("port")),
          f"{rtype}: the liveness probe asks /metrics on the --http port ({http})")
    check(probe.get("port") in ports.values(), f"{rtype}: the probe's port is a container port")
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    for name in env:
        check(name in help_text[cmd], f"{rtype}: {cmd} --help names the variable {name}")
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for m in mounts:
        check(m in volumes, f"{rtype}: the mount {m} has a volume")
    for v in volumes.values():
        claim = v.get("persistentVolumeClaim", {}).get("claimName")
        check(claim is None or claim in claims, f"{rtype}: the claim {claim} is in volumes.yaml")
    check(env.get("ZDIST_KEYS_DIR") == mounts.get("keys"), f"{rtype}: ZDIST_KEYS_DIR is where the keys are mounted")
    check(volumes.get("keys", {}).get("secret", {}).get("secretName") == "zdist-keys", f"{rtype}: keys from a Secret")
    sc = pod.get("securityContext", {})
    check(sc.get("runAsNonRoot") is True and sc.get("runAsUser", 0) != 0, f"{rtype}: runs as a user without privileges")
    if arg_value(args, "--state-dir"):
        state_dirs[rtype] = (arg_value(args, "--state-dir"), mounts)
    if arg_value(args, "--checkpoint-root"):
        checkpoint_roots[rtype] = (arg_value(args, "--checkpoint-root"), mounts)
    data_root = arg_value(args, "--data-root")
    check(data_root is None or data_root in mounts.values(), f"{rtype}: --data-root {data_root} is a mounted volume")

chief_state, chief_mounts = state_dirs.get("Chief", (None, {}))
check(chief_state in chief_mounts.values(), "the chief has a --state-dir on a mounted volume")
for rtype, (root, mounts) in checkpoint_roots.items():
    shared = [n for n, p in mounts.items() if p == root]
    check(shared and chief_mounts.get(shared[0]) == chief_state,
          f"{rtype}: --checkpoint-root {root} is the chief's state volume, so its checkpoints land there")
check(set(checkpoint_roots) == {"PS"}, "every ps task has a --checkpoint-root")

with open(f"{deploy}/Dockerfile") as f:
    dockerfile = f.read()
check("FROM debian:12" in dockerfile, "the image is Debian 12")
check("scripts/install-deps.sh --build" in dockerfile and "install-deps.sh --runtime" in dockerfile,
      "the image installs with the project's own script")
user = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
check(user and not user[-1].startswith("0") and user[-1] != "root", "the image runs as a user without privileges")
uid = user[-1].split(":")[0] if user else None
for rtype, spec in specs.items():
    check(str(spec["template"]["spec"]["securityContext"]["runAsUser"]) == uid, f"{rtype}: runAsUser is the image's user")
for path in binaries:
    check(f"{path}" in dockerfile or "/install/usr/bin/" in dockerfile, f"the image carries {path}")

print(f"check_k8s: {passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
