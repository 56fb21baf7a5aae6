# Shared helpers for integration tests: free ports, cluster files, real daemons, readiness, cleanup.
#
# Source it first thing from a test script:
#     source "$(dirname "$0")/lib.sh"
#     zd_init psd            # temp dir $ZD_TMP, the trap
# Then:
#     port=$(zd_free_port)
#     zd_write_cluster FILE PS_COUNT WORKER_COUNT   # sets ZD_PS_ADDRS / ZD_WORKER_ADDRS
#     zd_start NAME CMD ARGS...                     # background, log in $ZD_TMP/NAME.log
#     zd_wait_psd NAME ADDR [SECONDS]               # until it answers `zdist ps stats`
#     zd_wait_until SECONDS WHAT CMD ARGS...        # until CMD succeeds
#     zd_stop NAME                                  # SIGTERM, sets ZD_RC to its exit status
# Tests wait on conditions (a log line, an answer, a socket's state), never
# on a fixed sleep: a pause that stands for a timeout expiring is derived
# from that configured timeout and says so.
# On exit every process started is killed; when the script fails, every
# daemon's log is printed. Binaries come from the environment:
# ZDIST_BIN, ZDIST_PSD_BIN (and whatever else a test needs).
set -euo pipefail

declare -A ZD_PID=()
ZD_NAMES=()
ZD_TMP=""
ZD_PASSED=0

zd_log() { echo "[$(date +%H:%M:%S)] $*"; }
zd_ok() { ZD_PASSED=$((ZD_PASSED + 1)); echo "ok: $*"; }
zd_fail() {
    echo "FAIL: $*" >&2
    exit 1
}

zd_cleanup() {
    # (Its locals are seen by ZD_AFTER_STOP: bash scopes them dynamically.)
    local zd_status=$? zd_name zd_pid zd_f
    set +e
    for zd_name in "${ZD_NAMES[@]}"; do
        zd_pid=${ZD_PID[$zd_name]:-}
        if [[ -n $zd_pid ]] && kill -0 "$zd_pid" 2>/dev/null; then
            kill -CONT "$zd_pid" 2>/dev/null
            kill -TERM "$zd_pid" 2>/dev/null
        fi
    done
    for zd_name in "${ZD_NAMES[@]}"; do
        zd_pid=${ZD_PID[$zd_name]:-}
        [[ -z $zd_pid ]] && continue
        for _ in $(seq 50); do kill -0 "$zd_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$zd_pid" 2>/dev/null
        wait "$zd_pid" 2>/dev/null
    done
    # ZD_AFTER_STOP: a command run once the daemons are gone, before the logs
    # are shown and $ZD_TMP removed (e.g. unmount what the test mounted
    # there, or put more logs in it); the script's exit status in ZD_STATUS.
    ZD_STATUS=$zd_status
    [[ -n ${ZD_AFTER_STOP:-} ]] && $ZD_AFTER_STOP
    # 77: skipped (ctest's SKIP_RETURN_CODE), not failed.
    if [[ $zd_status -ne 0 && $zd_status -ne 77 && -n $ZD_TMP ]]; then
        echo "---- test failed (status $zd_status); daemon logs ----" >&2
        for zd_f in "$ZD_TMP"/*.log; do
            [[ -e $zd_f ]] || continue
            echo "---- $(basename "$zd_f") ----" >&2
            tail -n 200 "$zd_f" >&2
        done
    fi
    [[ -n $ZD_TMP ]] && rm -rf "$ZD_TMP"
    exit $zd_status
}

# zd_init NAME: temp dir and the trap.
zd_init() {
    ZD_TMP=$(mktemp -d "${TMPDIR:-/tmp}/zdist-$1.XXXXXX")
    trap zd_cleanup EXIT
    trap 'exit 130' INT TERM
}

# zd_need VAR...: every named variable is set and names an executable.
zd_need() {
    for v in "$@"; do
        [[ -n ${!v:-} ]] || zd_fail "set $v (the test needs that binary)"
        [[ -x ${!v} ]] || zd_fail "$v='${!v}' is not an executable"
    done
}

# zd_free_port: a TCP port on 127.0.0.1 nobody listens on now.
zd_free_port() {
    # A port is free until its daemon binds it, and the kernel may offer it
    # again before then: never hand out one twice in a test (in a file, as
    # this runs in $(...)).
    local port
    while :; do
        if command -v python3 >/dev/null; then
            port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
        else
            port=$((20000 + RANDOM % 40000))
            if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi
        fi
        if [[ -n ${ZD_TMP:-} ]]; then
            grep -qx "$port" "$ZD_TMP/.ports-given" 2>/dev/null && continue
            echo "$port" >>"$ZD_TMP/.ports-given"
        fi
        echo "$port"
        return
    done
}

# zd_write_cluster FILE PS WORKERS: a TF_CONFIG-style cluster file (no task)
# with free ports; the ps and worker addresses land in ZD_PS_ADDRS and
# ZD_WORKER_ADDRS (host:port).
zd_write_cluster() {
    local file=$1 nps=$2 nworkers=$3 i
    ZD_PS_ADDRS=()
    ZD_WORKER_ADDRS=()
    for ((i = 0; i < nps; i++)); do ZD_PS_ADDRS+=("127.0.0.1:$(zd_free_port)"); done
    for ((i = 0; i < nworkers; i++)); do ZD_WORKER_ADDRS+=("127.0.0.1:$(zd_free_port)"); done
    local ps_json worker_json
    ps_json=$(printf '"%s",' "${ZD_PS_ADDRS[@]}")
    worker_json=$(printf '"%s",' "${ZD_WORKER_ADDRS[@]}")
    printf '{"cluster": {"ps": [%s], "worker": [%s]}}\n' "${ps_json%,}" "${worker_json%,}" >"$file"
}

# zd_start NAME CMD ARGS...: runs CMD in the background, stdout and stderr
# into $ZD_TMP/NAME.log; its pid is ${ZD_PID[NAME]}.
zd_start() {
    local name=$1
    shift
    "$@" >"$ZD_TMP/$name.log" 2>&1 &
    ZD_PID[$name]=$!
    ZD_NAMES+=("$name")
}

# zd_adopt NAME PID: a process the test started itself (with redirections
# of its own) is killed at exit like zd_start's; its stderr belongs in
# $ZD_TMP/NAME.log to be shown when the test fails.
zd_adopt() {
    ZD_PID[$1]=$2
    ZD_NAMES+=("$1")
}

# zd_wait_until SECONDS WHAT CMD ARGS...: until CMD succeeds (tried every
# 0.1 s), failing with WHAT when the deadline passes first.
zd_wait_until() {
    local secs=$1 what=$2
    shift 2
    local deadline=$((SECONDS + secs))
    until "$@"; do
        ((SECONDS < deadline)) || zd_fail "$what: not within ${secs}s"
        sleep 0.1
    done
}

# zd_wait_log NAME PATTERN [SECONDS]: until the log of NAME matches (grep -E),
# failing when the process dies or the deadline passes.
zd_wait_log() {
    local name=$1 pattern=$2 secs=${3:-30}
    local deadline=$((SECONDS + secs))
    while ! grep -qE "$pattern" "$ZD_TMP/$name.log" 2>/dev/null; do
        kill -0 "${ZD_PID[$name]}" 2>/dev/null || zd_fail "$name exited before its log said '$pattern'"
        ((SECONDS < deadline)) || zd_fail "$name: no '$pattern' in its log within ${secs}s"
        sleep 0.05
    done
}

# zd_wait_psd NAME ADDR [SECONDS]: until the psd logs "serving at" and answers stats.
zd_wait_psd() {
    local name=$1 addr=$2 secs=${3:-30}
    local deadline=$((SECONDS + secs))
    zd_wait_log "$name" "serving at" "$secs"
    while ! "$ZDIST_BIN" ps stats "$addr" --timeout 1000 >/dev/null 2>&1; do
        kill -0 "${ZD_PID[$name]}" 2>/dev/null || zd_fail "$name exited while starting"
        ((SECONDS < deadline)) || zd_fail "$name at $addr does not answer stats within ${secs}s"
        sleep 0.05
    done
}

# zd_ps_workers_up NPS NWORKERS: $ZD_TMP/cluster.json written (zd_write_cluster), a zdist-psd per ps task
# (ps0...) and a zdist-worker per worker task (worker0...) started and serving; their endpoints as a
# ClusterCoordinator takes them in ZD_PS_EPS and ZD_WORKER_EPS (tcp://host:port).
zd_ps_workers_up() {
    local i
    zd_write_cluster "$ZD_TMP/cluster.json" "$1" "$2"
    for ((i = 0; i < $1; i++)); do zd_start "ps$i" "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/cluster.json" --task "ps:$i"; done
    for ((i = 0; i < $2; i++)); do
        zd_start "worker$i" "$ZDIST_WORKER_BIN" --cluster "$ZD_TMP/cluster.json" --task "worker:$i"
    done
    for ((i = 0; i < $1; i++)); do zd_wait_psd "ps$i" "${ZD_PS_ADDRS[$i]}" 60; done
    for ((i = 0; i < $2; i++)); do zd_wait_log "worker$i" "serving at" 60; done
    ZD_PS_EPS=("${ZD_PS_ADDRS[@]/#/tcp://}")
    ZD_WORKER_EPS=("${ZD_WORKER_ADDRS[@]/#/tcp://}")
}

# zd_stop NAME [SIGNAL]: signals NAME (default TERM), waits for it; its exit
# status in ZD_RC (128+n when killed by signal n).
zd_stop() {
    local name=$1 sig=${2:-TERM}
    kill "-$sig" "${ZD_PID[$name]}" 2>/dev/null || true
    zd_wait "$name"
}

# zd_wait NAME: waits for NAME to exit; its exit status in ZD_RC.
zd_wait() {
    local pid=${ZD_PID[$1]}
    ZD_RC=0
    wait "$pid" || ZD_RC=$?
    ZD_PID[$1]=""
}

# zd_exited NAME: NAME has exited (it may not have been waited for yet).
zd_exited() { ! kill -0 "${ZD_PID[$1]}" 2>/dev/null; }

# zd_port_unused PORT: no client holds a connection to 127.0.0.1:PORT (a
# daemon killed there: every client has seen its connections close).
zd_port_unused() {
    [[ -z $(ss -tnH state established state close-wait "( dport = :$1 )") ]]
}

# zd_client_ports PORT PID: the local ports of PID's connections to the
# daemon on 127.0.0.1:PORT, one a line.
zd_client_ports() {
    ss -tnpH state established "( dport = :$1 )" | awk -v pid="pid=$2," 'index($0, pid) { n = split($3, a, ":"); print a[n] }'
}

# zd_unread PORT PID: bytes PID sent to the daemon on 127.0.0.1:PORT wait
# unread in that daemon's socket (a request to a frozen daemon).
zd_unread() {
    local p
    for p in $(zd_client_ports "$1" "$2"); do
        ss -tnH state established "( sport = :$1 and dport = :$p )" | awk '$1 > 0 { found = 1 } END { exit !found }' && return 0
    done
    return 1
}

# zd_run_expect WANT_RC OUTFILE CMD ARGS...: runs CMD, stdout into OUTFILE,
# stderr into OUTFILE.err; fails unless it exits WANT_RC.
zd_run_expect() {
    local want=$1 out=$2
    shift 2
    local rc=0
    "$@" >"$out" 2>"$out.err" || rc=$?
    if [[ $rc -ne $want ]]; then
        echo "  stdout: $(head -c 2000 "$out")" >&2
        echo "  stderr: $(head -c 2000 "$out.err")" >&2
        zd_fail "'$*' exited $rc, wanted $want"
    fi
}

# zd_json_check FILE PYTHON_EXPR: FILE holds one JSON document for which
# PYTHON_EXPR (over j) is true.
zd_json_check() {
    python3 - "$1" "$2" <<'EOF' || zd_fail "JSON in $1 does not satisfy: $2 ($(head -c 500 "$1"))"
import json, sys
j = json.loads(open(sys.argv[1]).read())
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}
