#!/usr/bin/env bash
# Issue 29's benchmark: 10^7 distinct ids over 2 real zdist-psds (bench_dyn1e7.c says what it does).
# Not a ctest: minutes, a few GiB of memory and of disk. Builds a release tree (no sanitizers) unless
# BUILD names one, runs once, prints the load average before and after (the machine may be shared).
#   tests/bench/bench_dyn1e7.sh [--ids N] [--dim D] [--touch PERCENT]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$SRC/build-bench}
if [[ ! -x $BUILD/tests/bench/bench_dyn1e7 ]]; then
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    nice -n 5 cmake --build "$BUILD" -j2 --target zdist-psd bench_dyn1e7 >/dev/null
fi
DIR=$(mktemp -d "${TMPDIR:-/tmp}/bench-dyn1e7.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
"$BUILD/tests/bench/bench_dyn1e7" --psd "$BUILD/psd/zdist-psd" --dir "$DIR" "$@"
du -sh "$DIR"/ckpt-1 "$DIR"/ckpt-2
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
