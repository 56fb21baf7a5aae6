#!/usr/bin/env bash
# zdist-coordinator fault tolerance: kill -9 of a worker, of a psd, of the coordinator, mid-job; each job still ends with exactly the steps asked.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init coordinator-ft
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN
OUT=$ZD_TMP/out
coord_cluster 2 2
coord_up 2 2
# Slow enough steps to be killed mid-job: one step per closure, a wide model.
slow_job() {
    cat >"$1" <<JSON
{"name": "ft", "strategy": {"type": "parameter_server"},
 "model": {"name": "mlp", "params": {"hidden": [256]}}, "optimizer": {"type": "sgd", "learning_rate": 0.05},
 "dataset": {"format": "synthetic", "synthetic": {"n": 8192, "test_n": 1024, "dim": 256, "classes": 4, "seed": 7},
             "global_batch_size": 64},
 "steps": $2, "checkpoint": {"every_steps": 100, "keep": ${3:-2}}, "seed": 3}
JSON
}
job_dir() { echo "$ZD_TMP/state/jobs/$1"; }

# ---- a worker killed -9 mid-job, restarted: its closures run elsewhere, it rejoins ----
slow_job "$ZD_TMP/job.json" 1500
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 200
zd_stop worker1 KILL
coord_wait_step "$JOB" 400
coord_start_worker 1
coord_wait_state "$JOB" done 300
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == 1500 and j["steps"] == 1500 and j["workers"][1]["restarts"] >= 1 and j["workers"][1]["closures_done"] > 0'
[[ $(grep -cE "job $JOB: worker 1 \(.*\) lost: " "$ZD_TMP/chief.log") -eq 1 ]] || zd_fail "not one 'worker 1 lost' line in the chief's log"
[[ $(grep -cE "job $JOB: worker 1 \(.*\) is back \(rejoin 1\)" "$ZD_TMP/chief.log") -eq 1 ]] || zd_fail "not one 'worker 1 is back' line"
zd_ok "worker kill -9: job done with exactly 1500 steps, the worker rejoined (one line each in the chief's log)"

# ---- a psd killed -9 and restarted: every ps restored from the last checkpoint ----
slow_job "$ZD_TMP/job2.json" 1500
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job2.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 350
zd_stop ps1 KILL
# Down until its clients (the chief, the workers) have seen their connections close.
zd_wait_until 30 "ps1's clients seeing it gone" zd_port_unused "${ZD_PS_ADDRS[1]##*:}"
coord_start_ps 1
zd_wait_psd ps1 "${ZD_PS_ADDRS[1]}" 60
coord_wait_state "$JOB" done 300
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == 1500 and j["psd_recoveries"] >= 1'
grep -q "job $JOB: restored every ps from the checkpoint at step" "$ZD_TMP/chief.log" || zd_fail "no restore in the chief's log"
zd_ok "psd kill -9: restored from the last checkpoint, job done with exactly 1500 steps"

# ---- the coordinator killed -9 and restarted: the job resumes from its last checkpoint ----
slow_job "$ZD_TMP/job3.json" 1500
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job3.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 350
zd_start follow "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --follow
zd_wait_log follow "^step " 30
zd_stop chief KILL
coord_start_chief chief2
zd_wait_log chief2 "chief serving at" 60
zd_wait_log chief2 "job $JOB .* resuming it from its last checkpoint" 30
coord_wait_state "$JOB" done 300
zd_wait_until 30 "status --follow ending after the job ended" zd_exited follow
zd_wait follow
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == 1500 and j["state"] == "done"'
grep -q "job $JOB: restored every ps from the checkpoint at step [1-9]" "$ZD_TMP/chief2.log" || zd_fail "no restore after the restart"
[[ $ZD_RC -eq 0 ]] || zd_fail "status --follow across the restart exited $ZD_RC: $(cat "$ZD_TMP/follow.log")"
grep -q "job $JOB (ft): done, step 1500/1500" "$ZD_TMP/follow.log" || zd_fail "follow: $(cat "$ZD_TMP/follow.log")"
zd_ok "coordinator kill -9: the job resumed from its last checkpoint and completed; status --follow subscribed again"
# ---- damaged checkpoints: each set aside by its CRC, the job resumes from the newest good one ----
slow_job "$ZD_TMP/job4.json" 1000 3
zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job4.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
coord_wait_step "$JOB" 350
zd_stop chief2 KILL
complete=$(ls -d "$(job_dir "$JOB")"/ckpt-* | grep -E 'ckpt-[0-9]+$' | sort -t- -k2 -n |
    while read -r d; do if [[ -f $d/manifest.json ]]; then echo "$d"; fi; done)
[[ $(wc -l <<<"$complete") -ge 3 ]] || zd_fail "fewer than three complete checkpoints: $complete"
c1=$(tail -1 <<<"$complete")
c2=$(tail -2 <<<"$complete" | head -1)
c3=$(tail -3 <<<"$complete" | head -1)
# The newest: one byte of a psd's shard file flipped. The one before: its
# coordinator manifest changed in a way that still parses.
shard=$(ls "$c1"/*.bin | head -1)
python3 - "$shard" "$c2/manifest.json" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 2] ^= 0x01
open(sys.argv[1], "wb").write(b)
t = open(sys.argv[2]).read()
open(sys.argv[2], "w").write(t.replace('"bytes": ', '"bytes": 1', 1))
PY
coord_start_chief chief3
zd_wait_log chief3 "chief serving at" 60
s1=${c1##*ckpt-}
s2=${c2##*ckpt-}
s3=${c3##*ckpt-}
zd_wait_log chief3 "job $JOB: the checkpoint at step $s1 is damaged \\(.*$(basename "$shard") is corrupt: CRC32 .*\\): set aside as .*ckpt-$s1.damaged; resuming from the one at step $s2" 60
zd_wait_log chief3 "job $JOB: the checkpoint at step $s2 is damaged \\(.*manifest.json is damaged \\(CRC-32 .*\\)\\): set aside as .*ckpt-$s2.damaged; resuming from the one at step $s3" 60
zd_wait_log chief3 "job $JOB: restored every ps from the checkpoint at step $s3" 60
coord_wait_state "$JOB" done 300
zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
zd_json_check "$OUT" 'j["step"] == j["steps"] == 1000 and j["checkpoints_damaged"] == 2' 
[[ -z $(ls -d "$(job_dir "$JOB")"/ckpt-*.damaged 2>/dev/null) ]] ||
    zd_fail "damaged checkpoints not pruned once newer ones were kept: $(ls "$(job_dir "$JOB")")"
zd_ok "damaged newest checkpoints (a psd shard at step $s1, the manifest at $s2): set aside by CRC, resumed from step $s3, exactly 1000 steps"

# ---- a full disk during a save: the previous checkpoint stays, the job goes on and saves again later ----
FULL=$ZD_TMP/full
mkdir -p "$FULL"
if [[ $(id -u) -eq 0 ]] && mount -t tmpfs -o size=24m zdist-full "$FULL" 2>/dev/null; then
    unmount_full() { umount "$FULL" 2>/dev/null; }
    ZD_AFTER_STOP=unmount_full
    zd_stop chief3 TERM
    zd_start chief4 "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$FULL/state"
    zd_wait_log chief4 "chief serving at" 60
    slow_job "$ZD_TMP/job5.json" 600
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" submit "$ZD_TMP/job5.json" --cluster "$CLUSTER" --detach
    JOB=$(cat "$OUT")
    zd_wait_log chief4 "job $JOB: checkpoint at step 100 " 120
    # Fill what is left of the disk (dd ends with ENOSPC).
    dd if=/dev/zero of="$FULL/filler" bs=64k 2>/dev/null || true
    zd_wait_log chief4 "job $JOB: the checkpoint at step [0-9]+ failed \\(.*No space left on device.*\\); the one at step [0-9]+ stays, the job goes on, retrying at step [0-9]+" 120
    line=$(grep -E "job $JOB: the checkpoint at step [0-9]+ failed" "$ZD_TMP/chief4.log" | head -1)
    failed=$(sed -E 's/.*checkpoint at step ([0-9]+) failed.*/\1/' <<<"$line")
    kept=$(sed -E 's/.*the one at step ([0-9]+) stays.*/\1/' <<<"$line")
    retry=$(sed -E 's/.*retrying at step ([0-9]+).*/\1/' <<<"$line")
    [[ -f $FULL/state/jobs/$JOB/ckpt-$kept/manifest.json ]] || zd_fail "the checkpoint at step $kept is gone after the failed save"
    [[ ! -e $FULL/state/jobs/$JOB/ckpt-$failed ]] || zd_fail "the failed save at step $failed left its directory"
    rm -f "$FULL/filler"
    coord_wait_json "$JOB" "j['state'] == 'done'" 300
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" status "$JOB" --cluster "$CLUSTER" --json
    zd_json_check "$OUT" 'j["step"] == j["steps"] == 600 and j["checkpoints_failed"] >= 1'
    grep -qE "job $JOB: checkpoint at step ($retry|[0-9]+) " "$ZD_TMP/chief4.log" || zd_fail "no checkpoint after the disk had room again"
    zd_stop chief4 TERM
    umount "$FULL"
    ZD_AFTER_STOP=""
    zd_ok "disk full during the save at step $failed: step $kept stayed, the job went on (retry at $retry), exactly 600 steps"
else
    echo "SKIP: the full-disk case needs root and a tmpfs mount"
fi
echo "all $ZD_PASSED checks passed"
