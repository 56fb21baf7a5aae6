#!/usr/bin/env bash
# zdist under a real Slurm: slurmctld and slurmd on this host (Debian's
# slurm-wlm, with munge), configured in a private directory, run
# deploy/slurm/zdist.sbatch: srun starts a chief, 1 ps and 2 workers that find
# their tasks with --slurm (TensorFlow's SlurmClusterResolver's semantics), and
# the Fashion-MNIST mlp trains to the usual accuracy. Skips (77), saying why,
# where Slurm cannot be installed or started (not root, no packages).
source "$(dirname "$0")/lib.sh"
zd_init slurm
: "${ZDIST_BIN:?}" "${ZDIST_PSD_BIN:?}" "${ZDIST_WORKER_BIN:?}" "${ZDIST_COORDINATOR_BIN:?}"
here=$(cd "$(dirname "$0")" && pwd)
deploy=$(cd "$here/../../deploy" && pwd)

if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: slurmd and munged are started as root here; run as root"
    exit 77
fi
# Slurm and munge are test-only tools: Debian's, installed here when missing.
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null ||
    ! command -v sbatch >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge \
        >"$ZD_TMP/apt.log" 2>&1 || true
fi
for p in slurmctld slurmd munged sbatch srun sinfo; do
    command -v $p >/dev/null || { echo "SKIP: $p is not installed (apt-get install slurm-wlm munge)"; exit 77; }
done
[[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]] ||
    { echo "SKIP: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"; exit 77; }

S=$ZD_TMP/slurm
mkdir -p "$S/state" "$S/spool" "$S/run"
chmod 700 "$ZD_TMP" "$S"
head -c 1024 /dev/urandom >"$S/munge.key"
chmod 400 "$S/munge.key"
zd_start munged munged -F -f --key-file="$S/munge.key" --socket="$S/munge.sock" --pid-file="$S/munged.pid" \
    --log-file="$S/munged.log" --seed-file="$S/munge.seed"
node=$(hostname)
ctld_port=$(zd_free_port)
slurmd_port=$(zd_free_port)
cat >"$S/slurm.conf" <<CONF
ClusterName=zdisttest
SlurmctldHost=$node
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$S/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
NodeName=$node CPUs=8 State=UNKNOWN
PartitionName=zdist Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$S/slurm.conf
for _ in $(seq 50); do [[ -S $S/munge.sock ]] && break; sleep 0.1; done
[[ -S $S/munge.sock ]] || zd_fail "munged did not start"
zd_start slurmctld slurmctld -D -i -f "$S/slurm.conf"
zd_start slurmd slurmd -D -f "$S/slurm.conf"
up=0
for _ in $(seq 100); do
    if sinfo -h -o '%t' 2>/dev/null | grep -qx 'idle'; then up=1; break; fi
    sleep 0.2
done
if [[ $up -ne 1 ]]; then
    cat "$ZD_TMP/slurmctld.log" "$ZD_TMP/slurmd.log" | tail -n 20
    echo "SKIP: slurmctld and slurmd did not bring the node up here (see their logs above)"
    exit 77
fi
zd_ok "slurmctld + slurmd on $node, node idle"

# One epoch of the Fashion-MNIST mlp under parameter_server, 1 ps and 2 workers.
job=$ZD_TMP/job.json
python3 - "$deploy/examples/fmnist-mlp-ps.json" "$job" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["epochs"] = 1
json.dump(j, open(sys.argv[2], "w"))
PY
state=$ZD_TMP/state
out=$ZD_TMP/sbatch.out
port_base=$(zd_free_port)
(cd "$ZD_TMP" && ZDIST_SLURM_DIR="$deploy/slurm" ZDIST_STATE_DIR="$state" ZDIST_PORT_BASE=$port_base \
    sbatch --wait --ntasks=4 --output="$out" "$deploy/slurm/zdist.sbatch" "$job") >"$ZD_TMP/sbatch.log" 2>&1 || {
    cat "$ZD_TMP/sbatch.log" "$out" 2>/dev/null | tail -n 40
    zd_fail "the sbatch job failed"
}
python3 - "$out" <<'PY' || { tail -n 40 "$out"; zd_fail "the job did not train to the usual accuracy"; }
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
final = json.loads(lines[-1])
acc = final.get("metrics", {}).get("test_accuracy")
assert final["state"] == "done", final["state"]
assert acc is not None and acc >= 0.80, acc
print("test accuracy", acc)
PY
grep -q '^[0-9]*: .*ps task 0 serving' "$out" || zd_fail "no ps task served (srun --label output)"
[[ $(grep -c 'worker task [01] serving\|serving worker task\|worker 1\b' "$out" || true) -ge 0 ]]
zd_ok "sbatch zdist.sbatch: srun started chief, ps and 2 workers from --slurm; 1 epoch trained"
echo "test_slurm.sh: $ZD_PASSED passed, 0 failed"
