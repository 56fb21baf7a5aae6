#!/usr/bin/env bash
# zdist plan: exit codes, the JSON answer and one-line errors, run against the built CLI.
source "$(dirname "$0")/lib.sh"

ZDIST_BIN=${ZDIST_BIN:?set ZDIST_BIN to the zdist binary}
zd_init plan
TMP=$ZD_TMP

failures=0
count=0
fail() {
    echo "FAIL: $*" >&2
    echo "  stdout: $(cat "$TMP/out")" >&2
    echo "  stderr: $(cat "$TMP/err")" >&2
    failures=$((failures + 1))
}

# run ARGS...: runs `zdist plan ARGS`, sets $rc, keeps stdout/stderr in $TMP.
run() {
    rc=0
    "$ZDIST_BIN" plan "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
}

# expect_json PYTHON_EXPR ARGS...: exit 0, nothing on stderr, one JSON line on
# stdout for which PYTHON_EXPR (over `j`, the parsed object) is true.
expect_json() {
    local expr=$1
    shift
    count=$((count + 1))
    run "$@"
    if [[ $rc -ne 0 ]]; then fail "plan $* exited $rc, wanted 0"; return; fi
    if [[ -s $TMP/err ]]; then fail "plan $* wrote to stderr"; return; fi
    if [[ $(wc -l <"$TMP/out") -ne 1 ]]; then fail "plan $* printed more than one line"; return; fi
    if ! python3 -c '
import json, sys
j = json.loads(open(sys.argv[1]).read())
sys.exit(0 if eval(sys.argv[2]) else 1)
' "$TMP/out" "$expr"; then
        fail "plan $*: JSON does not satisfy: $expr"
    fi
}

# expect_usage SUBSTRING ARGS...: exit 2, nothing on stdout, exactly one line
# on stderr starting "zdist plan: " and containing SUBSTRING.
expect_usage() {
    local want=$1
    shift
    count=$((count + 1))
    run "$@"
    if [[ $rc -ne 2 ]]; then fail "plan $* exited $rc, wanted 2"; return; fi
    if [[ -s $TMP/out ]]; then fail "plan $* wrote to stdout"; return; fi
    if [[ $(wc -l <"$TMP/err") -ne 1 ]]; then fail "plan $*: stderr is not exactly one line"; return; fi
    local line
    line=$(cat "$TMP/err")
    if [[ $line != "zdist plan: "* ]]; then fail "plan $*: stderr lacks the 'zdist plan: ' prefix"; return; fi
    if [[ $line != *"$want"* ]]; then fail "plan $*: stderr lacks '$want'"; fi
}

# --- the whole answer, key order included -------------------------------
expect_json 'list(j.keys()) == ["shape","dtype","partitions","sharded","shards","lookups"]' \
    --shape 13,4 --partitioner fixed:5
run --shape 13,4 --partitioner fixed:5 --num-ps 2 --ids 0,2,3,8,9,12
count=$((count + 1))
want='{"shape":[13,4],"dtype":"float32","partitions":[5,1],"sharded":true,"shards":[{"index":0,"name":"var/part_0","ps":0,"offset":0,"rows":3},{"index":1,"name":"var/part_1","ps":1,"offset":3,"rows":3},{"index":2,"name":"var/part_2","ps":0,"offset":6,"rows":3},{"index":3,"name":"var/part_3","ps":1,"offset":9,"rows":2},{"index":4,"name":"var/part_4","ps":0,"offset":11,"rows":2}],"lookups":[{"id":0,"shard":0,"offset":0},{"id":2,"shard":0,"offset":2},{"id":3,"shard":1,"offset":0},{"id":8,"shard":2,"offset":2},{"id":9,"shard":3,"offset":0},{"id":12,"shard":4,"offset":1}]}'
[[ $rc -eq 0 && $(cat "$TMP/out") == "$want" ]] || fail "13 rows over 5 shards, 2 ps: exact output differs"

# --- defaults: none, float32, one ps, name var, no lookups ---------------
expect_json 'j == {"shape":[10],"dtype":"float32","partitions":[1],"sharded":False,"shards":[{"index":0,"name":"var","ps":0,"offset":0,"rows":10}],"lookups":[]}' \
    --shape 10

# --- Div split and round robin ------------------------------------------
expect_json '[s["rows"] for s in j["shards"]] == [3,3,2,2] and [s["offset"] for s in j["shards"]] == [0,3,6,8] and [s["ps"] for s in j["shards"]] == [0,1,2,0]' \
    --shape 10,2 --partitioner fixed:4 --num-ps 3
expect_json '[s["name"] for s in j["shards"]] == ["emb/part_0","emb/part_1"]' \
    --shape 6,3 --partitioner fixed:2 --name emb
# fewer rows than shards
expect_json 'j["partitions"] == [3,1] and [s["rows"] for s in j["shards"]] == [1,1,1]' \
    --shape 3,4 --partitioner fixed:8
# dimension 1: a plain variable
expect_json 'j["partitions"] == [1,1] and not j["sharded"] and j["shards"] == [{"index":0,"name":"var","ps":0,"offset":0,"rows":1}]' \
    --shape 1,8 --partitioner fixed:4

# --- TF's documented partitioner answers ---------------------------------
expect_json 'j["partitions"] == [2,1]' --shape 6,1 --partitioner min_size:4:2
expect_json 'j["partitions"] == [6,1]' --shape 6,1 --partitioner min_size:4:10
expect_json 'j["partitions"] == [6,1]' --shape 6,1 --partitioner max_size:4
expect_json 'j["partitions"] == [2,1]' --shape 6,1 --partitioner max_size:4:2
expect_json 'j["partitions"] == [1,1] and not j["sharded"]' --shape 6,1 --partitioner max_size:1024
expect_json 'j["partitions"] == [2,1] and [s["rows"] for s in j["shards"]] == [512,512]' \
    --shape 1024,1024 --partitioner min_size:262144:2
expect_json 'j["partitions"] == [16,1]' --shape 1024,1024 --partitioner min_size:262144:100

# --- string dtype uses bytes_per_string; dtype aliases are canonicalised ---
expect_json 'j["dtype"] == "string" and j["partitions"] == [5,1]' \
    --shape 10,2 --dtype string --partitioner min_size:64:10
expect_json 'j["partitions"] == [10,1]' --shape 10,2 --dtype string --partitioner min_size:64:10:100
expect_json 'j["dtype"] == "float64" and j["partitions"] == [3,1]' --shape 10,2 --dtype double --partitioner min_size:64:10

# --- lookups at shard boundaries -----------------------------------------
expect_json '[(l["id"], l["shard"], l["offset"]) for l in j["lookups"]] == [(2,0,2),(3,1,0),(5,1,2),(6,2,0),(7,2,1),(8,3,0),(9,3,1)]' \
    --shape 10 --partitioner fixed:4 --ids 2,3,5,6,7,8,9

# --- placement impossible: an answer, exit 0 ------------------------------
expect_json 'list(j.keys()) == ["shape","dtype","partitions","sharded","shards","lookups","placement_error"] and j["partitions"] == [1,2] and j["sharded"] is False and j["shards"] is None and j["lookups"] is None and j["placement_error"] == "variable_partitioner must return a list/tuple whose elements are 1 besides the first element (non-zero), got: [1, 2]"' \
    --shape 13,4 --partitioner fixed:2 --axis 1 --ids 3
expect_json 'j["partitions"] == [0,1] and j["shards"] is None and "(non-zero), got: [0, 1]" in j["placement_error"]' \
    --shape 0,4 --partitioner fixed:3
# axis 1 answered 1: placement is plain
expect_json 'j["partitions"] == [1,1] and j["shards"][0]["name"] == "var"' --shape 4,10 --partitioner max_size:1024 --axis 1
expect_json 'j["partitions"] == [1,5]' --shape 4,10 --partitioner max_size:40 --axis 1

# --- help and version ----------------------------------------------------
count=$((count + 1))
run --help
[[ $rc -eq 0 && ! -s $TMP/err ]] && grep -q '^usage: zdist plan --shape' "$TMP/out" && grep -q 'placement_error' "$TMP/out" \
    || fail "--help"
count=$((count + 1))
run --version
[[ $rc -eq 0 ]] && grep -q '^zdist ' "$TMP/out" || fail "--version"

# --- bad input: exit 2, one line ------------------------------------------
expect_usage '--shape is required' --partitioner fixed:2
expect_usage "shape '4,x': dimension 'x' must be a non-negative integer" --shape 4,x
expect_usage "dimension '-3'" --shape 4,-3
expect_usage 'rank is at most 8' --shape 1,1,1,1,1,1,1,1,1
expect_usage "unknown dtype 'float33'; use one of float32, float64" --shape 4 --dtype float33
expect_usage "unknown kind 'even'" --shape 4 --partitioner even:2
expect_usage 'fixed: num_shards must be positive, got 0' --shape 4 --partitioner fixed:0
expect_usage "fixed: num_shards 'x' is not an integer" --shape 4 --partitioner fixed:x
expect_usage 'min_size: min_shard_bytes must be positive, got 0' --shape 4 --partitioner min_size:0
expect_usage 'min_size: max_shards must be positive, got -1' --shape 4 --partitioner min_size:4:-1
expect_usage 'max_size: max_shard_bytes must be positive, got 0' --shape 4 --partitioner max_size:0
expect_usage 'max_size: bytes_per_string must be positive, got 0' --shape 4 --partitioner max_size:4:2:0
expect_usage 'max_size: cannot size shards of shape [0,3]: it has no elements' --shape 0,3 --partitioner max_size:4
expect_usage 'axis 2 is out of range for shape [4,3]: use 0..1' --shape 4,3 --axis 2
expect_usage 'axis -1 is out of range' --shape 4,3 --axis -1
expect_usage "--axis: 'one' is not an integer" --shape 4,3 --axis one
expect_usage "--num-ps must be a positive integer, got '0'" --shape 4 --num-ps 0
expect_usage "--num-ps must be a positive integer, got 'two'" --shape 4 --num-ps two
expect_usage '--name must not be empty' --shape 4 --name ''
expect_usage "--ids: row id 13 is out of range: valid ids of variable 'emb' are 0..12" --shape 13 --name emb --ids 0,13
expect_usage '--ids: row id -1 is out of range' --shape 13 --ids -1
expect_usage "--ids: 'x' is not an integer row id" --shape 13 --ids 1,x
expect_usage "--ids: '' is not an integer row id" --shape 13 --ids 1,,2
expect_usage '--ids is empty' --shape 13 --ids ''
expect_usage "variable 'var' has no rows" --shape 0 --ids 0
expect_usage "unknown option '--bogus'" --shape 4 --bogus
expect_usage "option '--shape' needs a value" --shape
expect_usage "unexpected argument 'extra'" --shape 4 extra
expect_usage 'at most 65536 are supported' --shape 100000 --partitioner fixed:100000

echo "test_plan.sh: $((count - failures))/$count passed"
[[ $failures -eq 0 ]]
