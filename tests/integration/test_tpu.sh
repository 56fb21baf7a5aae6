#!/usr/bin/env bash
# Strategy tpu under zdist run: the device assignment checked against the cores the process was given
# (oversubscribe admits more), TensorFlow's ValueError for logical_device under SPMD, steps_per_execution's
# device loop reporting every step's loss, and the same numbers: a CNN trained 50 steps with its layers
# replicated, assigned to logical devices, split spatially (conv2d) or along units (dense) gives step by step
# the losses of one replica on one device (--dump-losses), within float tolerance; and the same over 2 workers
# (a replica each, split over 2 logical devices) joined by multi_worker_mirrored's ring (metrics.jsonl).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init tpu
zd_need ZDIST_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out

# job FILE STRATEGY_JSON PLACEMENT [EXTRA_JSON]: a small CNN with batch norm and dropout (whose masks follow
# the examples, whatever replica holds them) on synthetic 8x8 images; PLACEMENT annotates it:
# none, assign (conv2d_1 on device 1, the hidden dense on the last), conv (conv2d [2, 1], conv2d_1 [1, 2]),
# conv4 ([2, 2] both), dense (the hidden dense split over every device).
job() {
    python3 - "$@" <<'PY'
import json, sys
path, st, placement = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
extra = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
L = st.get("logical_devices_per_replica", 1)
conv = {"filters": 8, "kernel": 3, "padding": "same", "activation": "relu"}
conv1 = {"filters": 8, "kernel": 3, "activation": "relu"}
hidden = {"units": 32, "activation": "relu"}
if placement == "assign":
    conv1["logical_device"] = 1
    hidden["logical_device"] = L - 1
elif placement == "conv":
    conv["split"], conv1["split"] = [2, 1], [1, 2]
elif placement == "conv4":
    conv["split"], conv1["split"] = [2, 2], [2, 2]
elif placement == "dense":
    hidden["split"] = [L]
job = {"name": "tpu-" + placement, "strategy": st,
       "model": {"name": "sequential", "input_shape": [8, 8, 1],
                 "layers": [{"conv2d": conv}, {"batch_norm": {"momentum": 0.9}}, {"conv2d": conv1},
                            {"max_pool2d": {"pool": 2}}, "flatten", {"dropout": {"rate": 0.25}}, {"dense": hidden},
                            {"dense": {"units": 10}}],
                 "loss": "sparse_categorical_crossentropy"},
       "optimizer": {"type": "adam", "learning_rate": 0.003},
       "dataset": {"format": "synthetic", "synthetic": {"n": 4096, "test_n": 512, "dim": 64, "classes": 10,
                                                        "seed": 5, "noise_std": 1.0},
                   "global_batch_size": 64, "shuffle_seed": 3, "shard_policy": "data"},
       "steps": 50, "seed": 2}
job.update(extra)
json.dump(job, open(path, "w"))
PY
}

# same_losses REF GOT TOL: GOT's 50 per-step losses are REF's within TOL x max(1, |loss|).
same_losses() {
    python3 - "$@" <<'PY' || zd_fail "$2 differs from $1: $(paste "$1" "$2" | head -60)"
import sys
ref = [float(l.split()[1]) for l in open(sys.argv[1])]
got = [float(l.split()[1]) for l in open(sys.argv[2])]
tol = float(sys.argv[3])
assert len(ref) == 50 and len(got) == 50, (len(ref), len(got))
assert ref[-1] < ref[0] / 4, "the reference did not train"
for i, (a, b) in enumerate(zip(ref, got)):
    assert abs(a - b) <= tol * max(1.0, abs(a)), "step %d: %r vs %r" % (i + 1, a, b)
PY
}

TPU22='{"type": "tpu", "num_replicas": 2, "logical_devices_per_replica": 2, "oversubscribe": true}'

# ---- the example loads (its splits fit its shapes and devices) ----
EXAMPLES=$(cd "$(dirname "$0")/../../deploy/examples" && pwd)
zd_run_expect 0 "$OUT" "$ZDIST_BIN" run --summary "$EXAMPLES/fmnist-cnn-tpu.json"
grep -qF "Total params: 422,026" "$OUT" || zd_fail "fmnist-cnn-tpu.json summary: $(cat "$OUT")"
zd_ok "deploy/examples/fmnist-cnn-tpu.json is a valid tpu job"

# ---- the device assignment must fit the cores given (one core here, by affinity) ----
job "$ZD_TMP/fit.json" '{"type": "tpu", "num_replicas": 1, "logical_devices_per_replica": 2}' none
zd_run_expect 2 "$OUT" taskset -c 0 "$ZDIST_BIN" run --quiet "$ZD_TMP/fit.json"
grep -qF "strategy: num_replicas 1 x logical_devices_per_replica 2 = 2 logical devices do not fit the 1 cores" \
    "$OUT.err" && grep -qF "strategy.oversubscribe" "$OUT.err" || zd_fail "R x L > cores: $(cat "$OUT.err")"
job "$ZD_TMP/over.json" '{"type": "tpu", "num_replicas": 1, "logical_devices_per_replica": 2, "oversubscribe": true}' \
    none '{"steps": 3}'
zd_run_expect 0 "$OUT" taskset -c 0 "$ZDIST_BIN" run --quiet "$ZD_TMP/over.json"
zd_ok "2 logical devices on 1 core: refused naming both numbers, admitted with oversubscribe"

# ---- every logical device's thread pinned to its own core (where there are 2 cores to give) ----
if taskset -c 0,1 true 2>/dev/null; then
    job "$ZD_TMP/pin.json" '{"type": "tpu", "num_replicas": 1, "logical_devices_per_replica": 2}' dense \
        '{"steps": 100000}'
    taskset -c 0,1 "$ZDIST_BIN" run --quiet "$ZD_TMP/pin.json" >"$ZD_TMP/pin.out" 2>&1 &
    PIN_PID=$!
    pinned=""
    for _ in $(seq 600); do
        pinned=$(cat /proc/$PIN_PID/task/*/status 2>/dev/null | sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' |
            sort -u | tr '\n' ' ')
        [[ " $pinned" == *" 0 "*" 1 "* ]] && break
        sleep 0.1
    done
    kill $PIN_PID 2>/dev/null || true
    wait $PIN_PID 2>/dev/null || true
    [[ " $pinned" == *" 0 "*" 1 "* ]] || zd_fail "logical devices not pinned to cores 0 and 1: threads allow '$pinned'"
    zd_ok "2 logical devices pinned to cores 0 and 1 (threads' affinities: $pinned)"
else
    echo "note: fewer than 2 cores here: pinning not checked"
fi

# ---- SPMD: no per-layer assignment (TensorFlow's ValueError), splits must match the devices ----
job "$ZD_TMP/spmd.json" '{"type": "tpu", "logical_devices_per_replica": 2, "spmd": true, "oversubscribe": true}' assign
zd_run_expect 2 "$OUT" "$ZDIST_BIN" run --quiet "$ZD_TMP/spmd.json"
grep -qF 'model.layers[2].conv2d.logical_device: Cannot assign a tensor to a logical device in SPMD mode. To disable SPMD, Please construct the TPUStrategy with `experimental_spmd_xla_partitioning=False`' \
    "$OUT.err" || zd_fail "SPMD assign: $(cat "$OUT.err")"
job "$ZD_TMP/spmd4.json" '{"type": "tpu", "logical_devices_per_replica": 2, "spmd": true, "oversubscribe": true}' conv4
zd_run_expect 2 "$OUT" "$ZDIST_BIN" run --quiet "$ZD_TMP/spmd4.json"
grep -qF 'model.layers[0].conv2d.split: The product of `partition_dimensions` should be the same as the number of logical devices (=2)' \
    "$OUT.err" || zd_fail "split product: $(cat "$OUT.err")"
zd_ok "under spmd logical_device is refused with TensorFlow's text; a 4-way split of 2 devices names the layer"

# ---- the same numbers ----
job "$ZD_TMP/ref.json" '{"type": "one_device"}' none
# One BLAS thread, as each logical device has: OpenBLAS may pick other kernels
# (another summation order) for more threads, and "the very same numbers"
# below compare the layers' placement, not OpenBLAS's threading.
zd_run_expect 0 "$OUT" env OPENBLAS_NUM_THREADS=1 "$ZDIST_BIN" run --quiet --dump-losses "$ZD_TMP/ref.txt" "$ZD_TMP/ref.json"
for placement in none assign conv dense; do
    job "$ZD_TMP/$placement.json" "$TPU22" "$placement"
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" run --quiet --dump-losses "$ZD_TMP/$placement.txt" "$ZD_TMP/$placement.json"
    same_losses "$ZD_TMP/ref.txt" "$ZD_TMP/$placement.txt" 1e-3
done
zd_ok "2 replicas x 2 logical devices, replicated, assigned, conv split, dense split: one device's 50 losses"
TPU14='{"type": "tpu", "num_replicas": 1, "logical_devices_per_replica": 4, "oversubscribe": true}'
for placement in assign conv4 dense; do
    job "$ZD_TMP/$placement-4.json" "$TPU14" "$placement"
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" run --quiet --dump-losses "$ZD_TMP/$placement-4.txt" "$ZD_TMP/$placement-4.json"
    same_losses "$ZD_TMP/ref.txt" "$ZD_TMP/$placement-4.txt" 1e-3
done
# Assigned layers run the same kernels on another thread: the very same numbers.
cmp -s "$ZD_TMP/ref.txt" "$ZD_TMP/assign-4.txt" || zd_fail "assign on 1 replica: $(paste "$ZD_TMP/ref.txt" "$ZD_TMP/assign-4.txt")"
zd_ok "1 replica x 4 logical devices: assigned (bit for bit), conv split [2, 2] (halos), dense split 4 ways"

# ---- steps_per_execution: one dispatch runs 8 steps, every step's loss reported ----
job "$ZD_TMP/spe.json" "$TPU22" conv '{"steps_per_execution": 8}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" run --quiet --dump-losses "$ZD_TMP/spe.txt" "$ZD_TMP/spe.json"
cmp -s "$ZD_TMP/conv.txt" "$ZD_TMP/spe.txt" || zd_fail "steps_per_execution 8: $(paste "$ZD_TMP/conv.txt" "$ZD_TMP/spe.txt")"
zd_ok "steps_per_execution 8: 50 per-step losses, the same as one step per dispatch"

# ---- across 2 workers: each hosts a whole replica (2 logical devices), the ring all-reduces ----
ZD_WORKER_ADDRS=("127.0.0.1:$(zd_free_port)" "127.0.0.1:$(zd_free_port)")
ZD_CHIEF="127.0.0.1:$(zd_free_port)"
CLUSTER=$ZD_TMP/cluster.json
printf '{"cluster": {"chief": ["%s"], "worker": ["%s", "%s"]}}\n' "$ZD_CHIEF" "${ZD_WORKER_ADDRS[@]}" >"$CLUSTER"
coord_up 0 2
job "$ZD_TMP/ring.json" '{"type": "tpu", "num_replicas": 1, "logical_devices_per_replica": 2, "oversubscribe": true}' \
    conv '{"log_every": 1}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/ring.json" --cluster "$CLUSTER" --json
JOB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$OUT")
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["state"] == "done" and j["step"] == 50 and all(w["in_ring"] for w in j["workers"])'
python3 -c 'import json,sys
for l in open(sys.argv[1]):
    m = json.loads(l)
    if "loss" in m: print(m["step"], m["loss"])  # an evaluation line has test_* instead' \
    "$ZD_TMP/state/jobs/$JOB/metrics.jsonl" >"$ZD_TMP/ring.txt"
same_losses "$ZD_TMP/ref.txt" "$ZD_TMP/ring.txt" 1e-3
zd_ok "tpu over 2 workers (a replica of 2 logical devices each, conv split) in the ring: one device's 50 losses"

echo "passed: $ZD_PASSED checks"
