#!/usr/bin/env bash
# The Fashion-MNIST CNN to the end under three strategies: test accuracy of each, and the spread.
#
#     bash tests/bench/accuracy_cnn.sh [BUILD_DIR] [--epochs N] [--only run,ps,mwm]
#
# Trains deploy/examples/fmnist-cnn-run.json with `zdist run` (one_device), then starts a local cluster on
# free 127.0.0.1 ports (a chief, 2 workers, 2 ps) and submits fmnist-cnn-ps.json (parameter_server) and
# fmnist-cnn-mwm.json (multi_worker_mirrored over the 2 workers). Prints one row per strategy (test
# accuracy, test loss, wall time) and the largest difference between them. Takes a while: 10 epochs of
# the CNN each (about 5 to 15 minutes per strategy on 2 cores). BUILD_DIR defaults to build-rel, then
# build (a Release build: the sanitizers' builds are several times slower). Each run's JSON result is
# kept in BUILD_DIR/accuracy-cnn/ (run.json, ps.json, mwm.json).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=""
epochs=""
only="run,ps,mwm"
while [[ $# -gt 0 ]]; do
    case $1 in
    --epochs) epochs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) build=$1; shift ;;
    esac
done
if [[ -z $build ]]; then
    for b in "$root/build-rel" "$root/build"; do [[ -x $b/cli/zdist ]] && { build=$b; break; }; done
fi
[[ -n $build && -x $build/cli/zdist ]] || { echo "accuracy_cnn.sh: build first (cmake --build build-rel)" >&2; exit 2; }
export ZDIST_BIN=$build/cli/zdist ZDIST_PSD_BIN=$build/psd/zdist-psd ZDIST_WORKER_BIN=$build/worker/zdist-worker
export ZDIST_COORDINATOR_BIN=$build/coordinator/zdist-coordinator
source "$root/tests/integration/lib.sh"
source "$root/tests/integration/coord_lib.sh"
zd_init accuracy-cnn
OUT=$ZD_TMP/out
KEEP=$build/accuracy-cnn
mkdir -p "$KEEP"
RESULTS=$ZD_TMP/results.txt
: >"$RESULTS"
wanted() { [[ ,$only, == *,$1,* ]]; }

# job_copy NAME: the example with --epochs applied, in $ZD_TMP.
job_copy() {
    python3 - "$root/deploy/examples/fmnist-cnn-$1.json" "$ZD_TMP/$1.json" "$epochs" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
if sys.argv[3]:
    j["epochs"] = int(sys.argv[3])
json.dump(j, open(sys.argv[2], "w"))
PY
}
# row STRATEGY ACCURACY LOSS SECONDS
row() { printf '%s %s %s %s\n' "$@" >>"$RESULTS"; zd_log "$1: test accuracy $2, test loss $3, $4 s"; }

if wanted run; then
    job_copy run
    t0=$SECONDS
    "$ZDIST_BIN" run "$ZD_TMP/run.json" --json --quiet >"$KEEP/run.json"
    # shellcheck disable=SC2046 # two numbers, split on purpose
    row one_device $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%.4f %.4f" % (j["test_accuracy"], j["test_loss"]))' "$KEEP/run.json") $((SECONDS - t0))
fi
if wanted ps || wanted mwm; then
    coord_cluster 2 2
    coord_up 2 2
    for s in ps mwm; do
        wanted $s || continue
        job_copy $s
        t0=$SECONDS
        zd_run_expect 0 "$KEEP/$s.json" "$ZDIST_BIN" submit "$ZD_TMP/$s.json" --cluster "$CLUSTER" --json
        name=parameter_server
        [[ $s == mwm ]] && name=multi_worker_mirrored
        # shellcheck disable=SC2046
        row $name $(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print("%.4f %.4f" % (m["test_accuracy"], m.get("test_loss", float("nan"))))' "$KEEP/$s.json") $((SECONDS - t0))
    done
fi
echo
printf '| %-22s | %13s | %9s | %8s |\n' strategy "test accuracy" "test loss" "wall (s)"
printf '|%s|%s|%s|%s|\n' "------------------------" "---------------" "-----------" "----------"
while read -r s a l t; do printf '| %-22s | %13s | %9s | %8s |\n' "$s" "$a" "$l" "$t"; done <"$RESULTS"
python3 - "$RESULTS" <<'PY'
import sys
acc = [float(l.split()[1]) for l in open(sys.argv[1]) if l.strip()]
if len(acc) > 1:
    print("largest difference: %.4f (%.2f %% of the lowest)" % (max(acc) - min(acc), 100 * (max(acc) - min(acc)) / min(acc)))
PY
