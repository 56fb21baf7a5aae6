#!/usr/bin/env bash
# zdist resolve: exit codes, the JSON answer (exact key order) and one-line errors, run against the built CLI.
source "$(dirname "$0")/lib.sh"

ZDIST_BIN=${ZDIST_BIN:?set ZDIST_BIN to the zdist binary}
EXAMPLES=$(cd "$(dirname "$0")/../../deploy/examples" && pwd)
zd_init resolve
TMP=$ZD_TMP
unset TF_CONFIG

failures=0
count=0
fail() {
    echo "FAIL: $*" >&2
    echo "  stdout: $(cat "$TMP/out")" >&2
    echo "  stderr: $(cat "$TMP/err")" >&2
    failures=$((failures + 1))
}

# run ARGS...: runs `zdist resolve ARGS` (TF_CONFIG from $CONFIG when set), sets $rc.
run() {
    rc=0
    if [[ -n ${CONFIG+x} ]]; then
        TF_CONFIG=$CONFIG "$ZDIST_BIN" resolve "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
    else
        "$ZDIST_BIN" resolve "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
    fi
}

# expect_json PYTHON_EXPR ARGS...: exit 0, empty stderr, one JSON line on stdout
# with the documented key order, for which PYTHON_EXPR (over `j`) is true.
expect_json() {
    local expr=$1
    shift
    count=$((count + 1))
    run "$@"
    if [[ $rc -ne 0 ]]; then fail "resolve $* exited $rc, wanted 0"; return; fi
    if [[ -s $TMP/err ]]; then fail "resolve $* wrote to stderr"; return; fi
    if [[ $(wc -l <"$TMP/out") -ne 1 ]]; then fail "resolve $* printed more than one line"; return; fi
    if ! python3 -c '
import json, sys
j = json.loads(open(sys.argv[1]).read())
keys = ["task_type", "task_id", "rpc_layer", "master", "cluster", "is_chief", "id_in_cluster", "worker_count"]
if list(j) != keys:
    sys.exit("keys: %r" % list(j))
if list(j["cluster"]) != sorted(j["cluster"]):
    sys.exit("jobs not sorted")
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
' "$TMP/out" "$expr"; then
        fail "resolve $*: JSON does not satisfy: $expr"
    fi
}

# expect_error STATUS SUBSTRING ARGS...: exit STATUS, nothing on stdout, exactly
# one line on stderr starting "zdist resolve: " and holding SUBSTRING.
expect_error() {
    local status=$1 want=$2
    shift 2
    count=$((count + 1))
    run "$@"
    if [[ $rc -ne $status ]]; then fail "resolve $* exited $rc, wanted $status"; return; fi
    if [[ -s $TMP/out ]]; then fail "resolve $* wrote to stdout"; return; fi
    if [[ $(wc -l <"$TMP/err") -ne 1 ]]; then fail "resolve $* did not write exactly one line"; return; fi
    if [[ $(cat "$TMP/err") != "zdist resolve: "* ]]; then fail "resolve $*: no 'zdist resolve: ' prefix"; return; fi
    if ! grep -qF -- "$want" "$TMP/err"; then fail "resolve $*: stderr lacks '$want'"; fi
}

# --- no TF_CONFIG: the empty config
unset CONFIG
expect_json 'j == {"task_type": None, "task_id": None, "rpc_layer": None, "master": "", "cluster": {},
                   "is_chief": False, "id_in_cluster": None, "worker_count": 0}'

# --- TF_CONFIG from the environment
CONFIG='{"cluster": {"worker": ["w0:1", "w1:1"], "chief": ["c:1"], "ps": {"0": "p0:1", "10": "p10:1", "2": "p2:1"}},
         "task": {"type": "worker", "index": "1"}, "rpc_layer": "grpc"}'
expect_json 'j["task_type"] == "worker" and j["task_id"] == 1 and j["master"] == "grpc://w1:1"
             and j["id_in_cluster"] == 2 and j["worker_count"] == 3 and j["is_chief"] is False
             and list(j["cluster"]["ps"]) == ["0", "2", "10"] and j["cluster"]["worker"] == ["w0:1", "w1:1"]'
expect_json 'j["task_type"] == "chief" and j["is_chief"] and j["id_in_cluster"] == 0' --task chief:0
expect_json 'j["task_type"] == "ps" and j["id_in_cluster"] is None and j["master"] == "grpc://p10:1"' -t ps:10
expect_json 'j["rpc_layer"] == "grpc+verbs" and j["master"] == "grpc+verbs://w1:1"' --rpc-layer grpc+verbs
expect_json 'j["rpc_layer"] is None and j["master"] == "w1:1"' --rpc-layer ''
expect_json 'j["task_type"] == "evaluator" and j["is_chief"] and j["worker_count"] == 0 and j["master"] == ""' \
    --task evaluator:0
expect_json 'True' --strategy parameter_server
expect_json 'True' --strategy multi_worker_mirrored
CONFIG='{"cluster": {"worker": ["w0:1", "w1:1"]}, "task": {"type": "worker", "index": 0}, "session_master": "grpc://s:9"}'
expect_json 'j["is_chief"] and j["master"] == "grpc://s:9" and j["id_in_cluster"] == 0 and j["worker_count"] == 2'

# --- --cluster FILE wins over TF_CONFIG
CONFIG='{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}'
expect_json 'j["cluster"] == {"chief": ["127.0.0.1:5000"], "worker": ["127.0.0.1:5001", "127.0.0.1:5002"],
             "ps": ["127.0.0.1:5010", "127.0.0.1:5011"]} and j["task_type"] == "worker" and j["id_in_cluster"] == 1' \
    --cluster "$EXAMPLES/cluster-ps.json" --strategy parameter_server
expect_json 'j["cluster"]["worker"] == {"0": "worker-0.zdist.svc:2222", "2": "worker-2.zdist.svc:2222"}
             and j["master"] == "grpc://worker-2.zdist.svc:2222"' \
    -c "$EXAMPLES/cluster-ps-sparse.json" -s parameter_server
expect_json 'j["is_chief"] and j["worker_count"] == 3' --cluster="$EXAMPLES/cluster-mwm.json" -s multi_worker_mirrored
expect_json 'j["cluster"] == {}' --cluster "$EXAMPLES/cluster-local.json" --strategy mirrored

# --- bad input: exit 2, one line
unset CONFIG
expect_error 2 "cluster file '$TMP/missing.json': cannot open: No such file or directory" --cluster "$TMP/missing.json"
printf '{"cluster": {\n  "worker": ["a:1",\n     "b:1" x]}}\n' >"$TMP/broken.json"
expect_error 2 "cluster file '$TMP/broken.json': invalid JSON at line 3, column 12" --cluster "$TMP/broken.json"
CONFIG='{"cluster": {"worker": ["a:1", "b"]}}'
expect_error 2 "TF_CONFIG: cluster.worker[1]: 'b' is not a valid address: it has no ':port'"
CONFIG=$'{"cluster": {"worker": ["a:1", "b\\nc:1"]}}'
expect_error 2 "'b\\x0ac:1' is not a valid address"
CONFIG='{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}'
expect_error 2 "TF_CONFIG: task.index: job 'worker' has no task 3"
expect_json 'j["task_id"] == 0' --task worker:0
expect_error 2 "task 'worker:x': the index 'x' is not an integer" --task worker:x
expect_error 2 "There must be at least one ps." --task worker:0 --strategy parameter_server
expect_error 2 "unknown strategy 'TPUStrategy'; use one of parameter_server, multi_worker_mirrored, mirrored, central_storage, one_device, tpu" --strategy TPUStrategy
expect_error 2 "rpc layer 'a b' is not a protocol name" --task worker:0 --rpc-layer 'a b'
CONFIG='{"cluster": {"chief": ["c:1", "c:2"], "worker": ["w:1"]}}'
expect_error 2 "cluster.chief: There must be at most one 'chief' job" --strategy multi_worker_mirrored
CONFIG='{"cluster": {"foo": ["f:1"], "worker": ["w:1"], "ps": ["p:1"]}}'
expect_error 2 "cluster.foo: Disallowed task type found in cluster spec: 'foo'" --strategy parameter_server
unset CONFIG
expect_error 2 "unknown option '--bogus'" --bogus
expect_error 2 "option '--help=x' takes no value" --help=x
expect_error 2 "option '--task' needs a value" --task
expect_error 2 "unexpected argument 'extra'" extra

# --- --slurm: a Slurm step's allocation as TensorFlow's SlurmClusterResolver reads it
unset CONFIG
export SLURM_PROCID=2 SLURM_STEP_NODELIST='node[1-2]' SLURM_STEP_TASKS_PER_NODE='2(x2)' SLURM_STEP_NUM_TASKS=4
expect_json 'j["cluster"] == {"chief": ["node1:9000"], "ps": ["node1:9001"], "worker": ["node2:9000", "node2:9001"]} and j["task_type"] == "worker" and j["task_id"] == 0' \
    --slurm --jobs worker=2,ps=1,chief=1 --port-base 9000
expect_json 'j["cluster"] == {"worker": ["node1:8888", "node1:8889", "node2:8888", "node2:8889"]} and j["task_id"] == 2' --slurm
SLURM_PROCID=1 SLURM_STEP_NODELIST='gpu-[01-02]' expect_json 'j["cluster"] == {"ps": ["gpu-01:8888"], "worker": ["gpu-02:8888"]} and j["task_type"] == "worker"' \
    --slurm --jobs ps=1,worker=1 --tasks-per-node 1
SLURM_PROCID=1 expect_json 'j["task_type"] == "ps" and j["master"] == "node1:8889"' --slurm --jobs chief=1,ps=1,worker=2
expect_error 2 "Requested 5 tasks but only 4 were assigned." --slurm --jobs ps=1,worker=4
expect_error 2 "go with --slurm" --jobs ps=1
SLURM_STEP_NODELIST='n[1-2]x' expect_error 2 'Invalid hostlist format "n[1-2]x"' --slurm
unset SLURM_PROCID
expect_error 2 "SLURM_PROCID not found in environment. Not running inside a SLURM step?" --slurm --jobs ps=1
unset SLURM_STEP_NODELIST SLURM_STEP_TASKS_PER_NODE SLURM_STEP_NUM_TASKS

# --- --help: usage on stdout, exit 0
count=$((count + 1))
run --help
if [[ $rc -ne 0 ]] || ! grep -q '^usage: zdist resolve' "$TMP/out" || [[ -s $TMP/err ]]; then
    fail "resolve --help"
fi

if [[ $failures -ne 0 ]]; then
    echo "test_resolve: $failures of $count checks failed" >&2
    exit 1
fi
echo "test_resolve: all $count checks passed"
