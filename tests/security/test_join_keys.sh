#!/usr/bin/env bash
# Elastic workers under CURVE (issue 31): only a worker key may join. A worker with a worker key of its own
# (--key worker-join-1) joins a running parameter_server job and runs closures; a ps key and a client key
# are refused PERMISSION_DENIED (the worker says why and exits 1); a worker without keys is never admitted
# (UNAUTHENTICATED: it is told to give --keys, and exits 1). Least privilege: a worker key preempts only its own task (PREEMPT of worker:0 or ps:0 with
# worker-join-1's key is refused), and a JOIN must carry the key it was authenticated with (coord_call).
# The joined worker's own SIGTERM is its preemption, accepted: it leaves, exit 0.
source "$(dirname "$0")/../integration/lib.sh"
source "$(dirname "$0")/../integration/coord_lib.sh"
zd_init sec_join
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN ZDIST_COORDINATOR_BIN COORD_CALL_BIN
unset ZDIST_KEYS_DIR TF_CONFIG ZDIST_HTTP
OUT=$ZD_TMP/out
KEYS=$ZD_TMP/keys
for name in chief-0 ps-0 worker-0 worker-join-1 worker-join-2 alice; do
    zd_run_expect 0 "$OUT" "$ZDIST_BIN" keygen "$name" --dir "$KEYS"
done

coord_cluster 1 1
zd_start ps0 "$ZDIST_PSD_BIN" --cluster "$CLUSTER" --task ps:0 --keys "$KEYS" --checkpoint-root "$ZD_TMP"
zd_start worker0 "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task worker:0 --keys "$KEYS"
COORD_CHIEF_ARGS="--keys $KEYS" coord_start_chief
zd_wait_log ps0 "serving at" 60
zd_wait_log worker0 "serving at" 60
zd_wait_log chief "chief serving at" 60
ZD=("$ZDIST_BIN" --keys "$KEYS" --key alice)

# key_wait JOB PYTHON_EXPR [SECONDS]: coord_wait_json with alice's key.
key_wait() {
    local deadline=$((SECONDS + ${3:-120}))
    while :; do
        if "${ZD[@]}" status "$1" --cluster "$CLUSTER" --json >"$ZD_TMP/st.json" 2>/dev/null &&
            python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
                "$ZD_TMP/st.json" "$2"; then
            return 0
        fi
        ((SECONDS < deadline)) || zd_fail "job $1: not '$2': $(cat "$ZD_TMP/st.json" 2>/dev/null)"
        sleep 0.2
    done
}

coord_softmax_job "$ZD_TMP/job.json" 1000000 ', "checkpoint": {"every_steps": 1000000}'
zd_run_expect 0 "$OUT" "${ZD[@]}" submit "$ZD_TMP/job.json" --cluster "$CLUSTER" --detach
JOB=$(cat "$OUT")
key_wait "$JOB" "j['step'] >= 50" 120
zd_ok "a CURVE cluster (chief, psd, worker:0) runs job $JOB"

# ---- --join with keys needs a certificate of the worker's own ----
zd_run_expect 2 "$OUT" "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://127.0.0.1:$(zd_free_port)" --keys "$KEYS"
grep -q -- "--join with keys needs --key NAME" "$OUT.err" || zd_fail "--join --keys without --key: $(cat "$OUT.err")"

# ---- a worker key joins and trains ----
A_ADDR="127.0.0.1:$(zd_free_port)"
zd_start joined "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://$A_ADDR" --keys "$KEYS" --key worker-join-1
zd_wait_log joined "joined the cluster through the chief at tcp://$ZD_CHIEF as worker:1 \(2 workers\)" 60
zd_wait_log chief "worker:1 \(tcp://$A_ADDR\) joined the cluster with key worker-join-1" 10
key_wait "$JOB" "len(j['workers']) > 1 and j['workers'][1]['joined'] and j['workers'][1]['closures_done'] > 0" 120
zd_ok "worker-join-1 joined as worker:1 and runs closures ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workers"][1]["closures_done"])' "$ZD_TMP/st.json") so far)"

# ---- a ps key and a client key are refused, clearly; the worker exits 1 ----
for key in ps-0 alice; do
    zd_start "join-$key" "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://127.0.0.1:$(zd_free_port)" --keys "$KEYS" \
        --key "$key"
    zd_wait_until 60 "the worker with key $key exits" zd_exited "join-$key"
    zd_wait "join-$key"
    [[ $ZD_RC -eq 1 ]] || zd_fail "the worker with key $key exited $ZD_RC (want 1): $(cat "$ZD_TMP/join-$key.log")"
    grep -q "PERMISSION_DENIED: join: key '$key' .* may not call it; stopping" "$ZD_TMP/join-$key.log" ||
        zd_fail "key $key: $(cat "$ZD_TMP/join-$key.log")"
    zd_ok "key $key may not join: $(grep -o "PERMISSION_DENIED: join: key '$key'[^(]*" "$ZD_TMP/join-$key.log" | head -1)"
done

# ---- no key: never admitted; the worker says why and exits 1 ----
N_ADDR="127.0.0.1:$(zd_free_port)"
zd_start nokey "$ZDIST_WORKER_BIN" --join "$ZD_CHIEF" --bind "tcp://$N_ADDR"
zd_wait_until 60 "the worker without keys exits" zd_exited nokey
zd_wait nokey
[[ $ZD_RC -eq 1 ]] || zd_fail "the worker without keys exited $ZD_RC (want 1): $(cat "$ZD_TMP/nokey.log")"
grep -q "UNAUTHENTICATED: .*it speaks CURVE and this process has no keys; give --keys DIR" "$ZD_TMP/nokey.log" ||
    zd_fail "no key: $(cat "$ZD_TMP/nokey.log")"
! grep -q "joined the cluster" "$ZD_TMP/nokey.log" || zd_fail "a worker without keys joined"
! grep -q "tcp://$N_ADDR) joined" "$ZD_TMP/chief.log" || zd_fail "the chief took in a worker without keys"
zd_ok "a worker without keys is not admitted: $(grep -o "UNAUTHENTICATED: [^(]*" "$ZD_TMP/nokey.log" | head -1)"

# ---- least privilege: a worker key preempts only its own task; a JOIN carries its own key ----
for task in "worker 0" "ps 0"; do
    # shellcheck disable=SC2086 # TYPE INDEX, split on purpose
    zd_run_expect 3 "$OUT" "$COORD_CALL_BIN" "$KEYS" worker-join-1 "tcp://$ZD_CHIEF" preempt $task
    grep -q "PERMISSION_DENIED: preempt: key 'worker-join-1' may preempt only its own task; ${task/ /:} is key '${task/ /-}'" "$OUT" ||
        zd_fail "preempt $task with worker-join-1's key: $(cat "$OUT")"
done
zd_ok "worker-join-1 may not preempt worker:0 or ps:0: $(cat "$OUT")"
PUB1=$(grep -oE 'public-key = "[^"]+"' "$KEYS/worker-join-1.key" | cut -d'"' -f2)
[[ ${#PUB1} -eq 40 ]] || zd_fail "worker-join-1.key: no public key read ($PUB1)"
zd_run_expect 3 "$OUT" "$COORD_CALL_BIN" "$KEYS" worker-join-2 "tcp://$ZD_CHIEF" join "tcp://127.0.0.1:$(zd_free_port)" "$PUB1"
grep -q "PERMISSION_DENIED: join: the public key sent .* is not the key of the certificate 'worker-join-2'" "$OUT" ||
    zd_fail "a JOIN carrying another worker's key: $(cat "$OUT")"
zd_run_expect 3 "$OUT" "$COORD_CALL_BIN" "$KEYS" worker-0 "tcp://$ZD_CHIEF" join "tcp://127.0.0.1:$(zd_free_port)" \
    "$(grep -oE 'public-key = "[^"]+"' "$KEYS/worker-0.key" | cut -d'"' -f2)"
grep -q "PERMISSION_DENIED: join: key 'worker-0' is worker:0's" "$OUT" || zd_fail "worker-0's key joining again: $(cat "$OUT")"
zd_ok "a JOIN carrying another key, or a member's key at another address, is refused"

# ---- the joined worker's SIGTERM: its own preemption, accepted; it leaves ----
zd_stop joined TERM
[[ $ZD_RC -eq 0 ]] || zd_fail "the joined worker exited $ZD_RC on SIGTERM (want 0)"
zd_wait_log chief "worker:1 \(tcp://$A_ADDR\) leaves: SIGTERM" 10
grep -q "preemption checkpoint done" "$ZD_TMP/joined.log" || zd_fail "the joined worker's preemption: $(tail -5 "$ZD_TMP/joined.log")"
key_wait "$JOB" "j['workers'][1]['state'] == 'left'" 60
zd_ok "the joined worker's own PREEMPT is accepted: it left, exit 0"

zd_run_expect 0 "$OUT" "${ZD[@]}" cancel "$JOB" --cluster "$CLUSTER"
key_wait "$JOB" "j['state'] == 'cancelled'" 60
echo "passed: $ZD_PASSED"
