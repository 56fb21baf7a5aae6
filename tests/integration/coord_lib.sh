# Helpers for the coordinator tests: a local cluster (chief, workers, ps) and jobs.
# Needs lib.sh sourced and zd_init done. Sets ZD_CHIEF (host:port), CLUSTER (file).

# coord_cluster NPS NWORKERS: writes $ZD_TMP/cluster.json with a chief too.
coord_cluster() {
    zd_write_cluster "$ZD_TMP/cluster.json" "$1" "$2"
    ZD_CHIEF="127.0.0.1:$(zd_free_port)"
    python3 - "$ZD_TMP/cluster.json" "$ZD_CHIEF" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["cluster"]["chief"] = [sys.argv[2]]
json.dump(c, open(sys.argv[1], "w"))
PY
    CLUSTER=$ZD_TMP/cluster.json
}

# psds and the chief keep checkpoints only under the test's directory, where the chief's --state-dir is.
coord_start_ps() { zd_start "ps$1" "$ZDIST_PSD_BIN" --cluster "$CLUSTER" --task "ps:$1" --checkpoint-root "$ZD_TMP"; }
coord_start_worker() { zd_start "worker$1" "$ZDIST_WORKER_BIN" --cluster "$CLUSTER" --task "worker:$1"; }
# COORD_CHIEF_ARGS: more options for the chief (e.g. --keep-variables, to inspect the psds after a job).
coord_start_chief() {
    # shellcheck disable=SC2086 # options, split on purpose
    zd_start "${1:-chief}" "$ZDIST_COORDINATOR_BIN" --cluster "$CLUSTER" --task chief:0 --state-dir "$ZD_TMP/state" --checkpoint-root "$ZD_TMP" \
        ${COORD_CHIEF_ARGS:-}
}

# coord_up NPS NWORKERS: every daemon started and serving.
coord_up() {
    local i
    for ((i = 0; i < $1; i++)); do coord_start_ps "$i"; done
    for ((i = 0; i < $2; i++)); do coord_start_worker "$i"; done
    coord_start_chief
    for ((i = 0; i < $1; i++)); do zd_wait_psd "ps$i" "${ZD_PS_ADDRS[$i]}" 60; done
    for ((i = 0; i < $2; i++)); do zd_wait_log "worker$i" "serving at" 60; done
    zd_wait_log chief "chief serving at" 60
}

# coord_wait_json JOB PYTHON_EXPR [SECONDS]: until zdist status --json of JOB
# satisfies PYTHON_EXPR (over j); the last status stays in $ZD_TMP/st.json.
coord_wait_json() {
    local job=$1 expr=$2 secs=${3:-120} deadline=$((SECONDS + ${3:-120}))
    while :; do
        if "$ZDIST_BIN" status "$job" --cluster "$CLUSTER" --json >"$ZD_TMP/st.json" 2>/dev/null &&
            python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
                "$ZD_TMP/st.json" "$expr"; then
            return 0
        fi
        ((SECONDS < deadline)) || zd_fail "job $job: not '$expr' within ${secs}s: $(cat "$ZD_TMP/st.json" 2>/dev/null)"
        sleep 0.1
    done
}

# coord_wait_state JOB STATE [SECONDS]: until zdist status says STATE.
coord_wait_state() { coord_wait_json "$1" "j['state'] == '$2'" "${3:-120}"; }

# coord_wait_step JOB N [SECONDS]: until the job's step is at least N.
coord_wait_step() { coord_wait_json "$1" "j['step'] >= $2" "${3:-120}"; }

# coord_softmax_job FILE STEPS [EXTRA_JSON]: a synthetic softmax_regression job under parameter_server.
coord_softmax_job() {
    cat >"$1" <<JSON
{"name": "syn-softmax", "strategy": {"type": "parameter_server"},
 "model": {"name": "softmax_regression"}, "optimizer": {"type": "sgd", "learning_rate": 0.1},
 "dataset": {"format": "synthetic", "synthetic": {"n": 4096, "test_n": 1024, "dim": 16, "classes": 4, "seed": 7},
             "global_batch_size": 64},
 "steps": $2, "steps_per_execution": 2, "seed": 3 ${3:-}}
JSON
}
