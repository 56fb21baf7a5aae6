#!/usr/bin/env bash
# A worker stopped (SIGTERM) while its step is blocked on a frozen psd, and
# signalled again while it waits for that step (the chaos soak's cleanup,
# systemd and a user's second Ctrl-C do): it must wait for its steps thread
# and exit 0, never leave it running while main returns (exit() then closes
# the sockets that thread still uses: an abort in czmq, zsock_set_sndtimeo).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init worker_stop_blocked
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN

coord_cluster 1 1
coord_start_ps 0
# Its psd calls give up after 3 s: the step outlives the first signals.
zd_start worker0 "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task worker:0 --ps-timeout-ms 3000
coord_start_chief
zd_wait_psd ps0 "${ZD_PS_ADDRS[0]}" 60
zd_wait_log worker0 "serving at" 60
zd_wait_log chief "chief serving at" 60
coord_softmax_job "$ZD_TMP/job.json" 1000000
zd_run_expect 0 "$ZD_TMP/out" "$ZDIST_BIN" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
job=$(cat "$ZD_TMP/out")
coord_wait_step "$job" 20 120
zd_ok "job $job running"

kill -STOP "${ZD_PID[ps0]}"
# The worker's next psd call now waits on the frozen psd: its request lies
# unread in the psd's socket.
zd_wait_until 30 "a worker request waiting on the frozen psd" zd_unread "${ZD_PS_ADDRS[0]##*:}" "${ZD_PID[worker0]}"
pid=${ZD_PID[worker0]}
kill -TERM "$pid"
zd_wait_log worker0 "stopping" 30
for _ in 1 2 3 4 5 6 7 8 9 10; do
    kill -TERM "$pid" 2>/dev/null
    kill -INT "$pid" 2>/dev/null
    sleep 0.1
done
kill -CONT "${ZD_PID[ps0]}"
zd_wait worker0
grep -q "Assertion\|AddressSanitizer\|runtime error" "$ZD_TMP/worker0.log" &&
    zd_fail "the worker aborted while stopping: $(grep -m1 "Assertion\|AddressSanitizer\|runtime error" "$ZD_TMP/worker0.log")"
[[ $ZD_RC -eq 0 ]] || zd_fail "the worker exited $ZD_RC when stopped with a step blocked on a frozen psd"
grep -q "stopped" "$ZD_TMP/worker0.log" || zd_fail "the worker did not log that it stopped"
zd_ok "a worker stopped with its step blocked on a frozen psd, signalled again, exits 0 once the step ends"
