#!/usr/bin/env bash
# deploy/kubernetes checked against the daemons (tests/integration/check_k8s.py):
# flags, ports, probes, mounts, keys and the image recipe. Nothing is deployed.
source "$(dirname "$0")/lib.sh"
zd_init k8s
: "${ZDIST_COORDINATOR_BIN:?}" "${ZDIST_PSD_BIN:?}" "${ZDIST_WORKER_BIN:?}"
# PyYAML is a test-only tool: Debian's, installed here when missing.
if ! /usr/bin/python3 -c 'import yaml' 2>/dev/null && [[ $(id -u) -eq 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-yaml >"$ZD_TMP/apt.log" 2>&1 || true
fi
if ! /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
    echo "SKIP: Debian's python3-yaml is needed (apt-get install python3-yaml)"
    exit 77
fi
/usr/bin/python3 "$(dirname "$0")/check_k8s.py" "$(dirname "$0")/../../deploy/kubernetes" \
    "$ZDIST_COORDINATOR_BIN" "$ZDIST_PSD_BIN" "$ZDIST_WORKER_BIN"
