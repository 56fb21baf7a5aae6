#!/usr/bin/env bash
# deploy/examples/custom_loop.c, the custom training loop on the ClusterCoordinator alone, on real daemons
# (2 zdist-psd, 2 zdist-worker): every closure fetched, each of its steps counted (closures x steps), the mean
# loss of the last closure under the first's, and the evaluation run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/coord_lib.sh"
zd_init custom_loop
zd_need ZDIST_BIN ZDIST_PSD_BIN ZDIST_WORKER_BIN CUSTOM_LOOP_BIN
OUT=$ZD_TMP/out

zd_ps_workers_up 2 2
coord_softmax_job "$ZD_TMP/job.json" 1
zd_run_expect 0 "$OUT" "$CUSTOM_LOOP_BIN" "$ZD_TMP/job.json" 20 10 "${ZD_WORKER_EPS[@]}" -- "${ZD_PS_EPS[@]}"
cat "$OUT"
grep -q '^fetched 20 of 20 closures, 200 steps;' "$OUT" ||
    zd_fail "not every closure fetched with its 10 steps: $(grep fetched "$OUT" || cat "$OUT.err")"
zd_ok "20 closures x 10 steps: every closure fetched, 200 steps counted"
python3 - "$OUT" <<'PY' || zd_fail "the mean loss did not fall: $(grep fetched "$OUT")"
import re, sys
first, last = map(float, re.search(r"mean loss first (\S+), last (\S+)", open(sys.argv[1]).read()).groups())
assert last < first / 2, (first, last)
PY
zd_ok "the last closure's mean loss is under half the first's"
python3 - "$OUT" <<'PY' || zd_fail "no evaluation, or at chance: $(grep accuracy "$OUT" || true)"
import re, sys
acc, n = re.search(r"test accuracy (\S+) over (\d+) examples", open(sys.argv[1]).read()).groups()
assert int(n) == 1024 and float(acc) > 0.5, (acc, n)  # 4 classes: chance is 0.25
PY
zd_ok "evaluated on the 1024 test examples, above chance"
# The workers trained what the loop scheduled: its variables on the psds under its prefix.
zd_run_expect 0 "$ZD_TMP/ps0.json" "$ZDIST_BIN" ps stats "${ZD_PS_ADDRS[0]}" --json
grep -q '"custom_loop/' "$ZD_TMP/ps0.json" || zd_fail "no custom_loop/ variable on ps 0: $(cat "$ZD_TMP/ps0.json")"
zd_ok "its variables live on the psds under custom_loop/"
echo "passed: $ZD_PASSED"
