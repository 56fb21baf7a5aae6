#!/usr/bin/env bash
# soak.sh MINUTES [BUILD_DIR]: runs every libFuzzer target of a fuzz build for MINUTES each, one after the
# other, and prints executions, coverage edges and features per target; exit 1 when a target crashed (its
# reproducer stays in the work directory, named in the output).
#
# The fuzz build (clang; libzdist instrumented and built with ASan and UBSan, not only the harness):
#     CC=clang cmake -S . -B build-fuzz -DFUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
#     cmake --build build-fuzz -j --target fuzz_wire fuzz_cluster fuzz_partition fuzz_worker \
#         fuzz_model_spec fuzz_job fuzz_bodies fuzz_tf_config fuzz_ckpt fuzz_wstate fuzz_state \
#         fuzz_idx fuzz_csv fuzz_libsvm
#     tests/fuzz/soak.sh 30 build-fuzz
# New inputs go to WORK/corpus/TARGET (WORK: $ZDIST_FUZZ_WORK, else a new temp directory), seeded from
# tests/fuzz/corpus/TARGET, which is never written.
set -euo pipefail
minutes=${1:?usage: soak.sh MINUTES [BUILD_DIR]}
build=${2:-build-fuzz}
[[ $minutes =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "soak.sh: MINUTES must be a number, got '$minutes'" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/tests/fuzz
work=${ZDIST_FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/zdist-soak.XXXXXX")}
secs=$(python3 -c "print(max(1, int(float('$minutes') * 60)))")
targets=()
for f in "$bin"/fuzz_*; do
    [[ -f $f && -x $f ]] || continue
    help=$("$f" -help=1 2>&1 || true)
    [[ $help == *libFuzzer* ]] && targets+=("$(basename "$f")")
done
((${#targets[@]})) || { echo "soak.sh: no libFuzzer targets in $bin (configure with CC=clang -DFUZZ=ON)" >&2; exit 2; }
echo "soak: ${#targets[@]} targets, ${secs}s each, work directory $work"
printf '%-18s %14s %10s %8s %8s %s\n' target executions exec/s edges features result
crashed=0
for t in "${targets[@]}"; do
    name=${t#fuzz_}
    mkdir -p "$work/corpus/$name" "$work/artifacts/$name"
    log=$work/$name.log
    rc=0
    "$bin/$t" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$work/artifacts/$name/" \
        -rss_limit_mb=2048 -timeout=25 "$work/corpus/$name" "$here/corpus/$name" >"$log" 2>&1 || rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    edges=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
    ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
    result=ok
    if ((rc != 0)); then
        result="CRASH (exit $rc): $(ls "$work/artifacts/$name" | head -1), log $log"
        crashed=1
    fi
    printf '%-18s %14s %10s %8s %8s %s\n' "$name" "${execs:-?}" "${speed:-?}" "${edges:-?}" "${ft:-?}" "$result"
done
exit $crashed
