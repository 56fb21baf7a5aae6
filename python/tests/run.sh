#!/usr/bin/env bash
# The Python client's tests (python3-pytest against real daemons), from ctest's integration.python_client.
# Installs Debian's python3-zmq, python3-protobuf, python3-numpy, python3-pytest (and protobuf-compiler
# when the build had no protoc) itself, idempotently; exit 77 (skipped) saying why when it cannot.
# Needs ZDIST_BIN, ZDIST_PSD_BIN, ZDIST_WORKER_BIN, ZDIST_COORDINATOR_BIN, ZDIST_PROTO_PY (where the
# build put the generated modules) and ZDIST_PROTO_DIR (proto/), as ctest sets them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Debian's interpreter, where apt installs the modules (not a python3 of pyenv or a venv on PATH).
PY=${ZDIST_TEST_PYTHON:-/usr/bin/python3}
skip() {
    echo "SKIP: $*"
    exit 77
}
[[ -x $PY ]] || skip "no $PY (Debian's python3)"

have_modules() { "$PY" -c 'import zmq, google.protobuf, numpy, pytest' 2>/dev/null; }
need=()
have_modules || need+=(python3-zmq python3-protobuf python3-numpy python3-pytest)
[[ -f ${ZDIST_PROTO_PY:-}/coordinator_pb2.py ]] || command -v protoc >/dev/null || need+=(protobuf-compiler)
if ((${#need[@]})); then
    [[ $(id -u) -eq 0 ]] || skip "missing ${need[*]}; run as root (or apt-get install them) to test the Python client"
    command -v apt-get >/dev/null || skip "missing ${need[*]} and no apt-get to install them"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
        apt-get update -q >/dev/null 2>&1 || true
        apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
            skip "cannot install ${need[*]} with apt-get"
    fi
    have_modules || skip "${need[*]} installed, but $PY still cannot import zmq, google.protobuf, numpy, pytest"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zdist-pytest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The build generates the modules when it found protoc; else they are generated here, as it would.
if [[ ! -f ${ZDIST_PROTO_PY:-}/coordinator_pb2.py ]]; then
    [[ -d ${ZDIST_PROTO_DIR:-} ]] || skip "set ZDIST_PROTO_DIR to proto/ (no generated modules in '${ZDIST_PROTO_PY:-}')"
    mkdir -p "$tmp/pb"
    protoc --proto_path="$ZDIST_PROTO_DIR" --python_out="$tmp/pb" "$ZDIST_PROTO_DIR"/*.proto
    export ZDIST_PROTO_PY=$tmp/pb
fi
export PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
cd "$tmp"
"$PY" -m pytest -p no:cacheprovider -q -rs "$here" "$@"
