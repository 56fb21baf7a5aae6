#!/usr/bin/env bash
# soak.sh [--state DIR] [--until-cpu CPU_MINUTES] MINUTES [BUILD_DIR]: runs every libFuzzer target of a fuzz
# build for MINUTES (wall clock, libFuzzer's -max_total_time) each, one after the other, and prints the CPU
# seconds, executions, coverage edges and features per target; exit 1 when a target crashed (its reproducer
# stays in the artifacts directory, named in the output).
#
# The fuzz build (clang; libzdist instrumented and built with ASan and UBSan, not only the harness):
#     CC=clang cmake -S . -B build-fuzz -DFUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
#     cmake --build build-fuzz -j --target fuzz_wire fuzz_cluster fuzz_partition fuzz_worker \
#         fuzz_model_spec fuzz_job fuzz_bodies fuzz_tf_config fuzz_ckpt fuzz_wstate fuzz_state \
#         fuzz_idx fuzz_csv fuzz_libsvm
#     tests/fuzz/soak.sh 30 build-fuzz
#
# --state DIR (or $ZDIST_FUZZ_STATE) makes a soak resumable across sessions: every target resumes from and
# adds to DIR/corpus/TARGET, crashes go to DIR/artifacts/TARGET, libFuzzer's output to DIR/logs, and each
# finished run appends one line to DIR/runs.tsv (UTC end, target, wall s, CPU s, executions, edges, features,
# corpus files, result). The table printed at the end sums runs.tsv per target, so CPU time accumulates
# honestly over any number of runs: it counts the fuzzer process's own user+system time (a niced soak on a
# busy machine gets less CPU than wall time), and a run killed before its end is not counted at all.
# Two soaks may share one DIR to use two cores when their BUILD_DIRs hold disjoint sets of targets (e.g.
# directories of symlinks to half the binaries each).
# --totals prints that table for DIR and exits (no run; MINUTES not needed).
# --until-cpu M repeats rounds of MINUTES per target, skipping targets that have M CPU-minutes in runs.tsv,
# until every target has (a target that crashed is left out for the rest of the invocation). With --state,
# each round takes the targets with the least CPU so far first.
# Without --state, new inputs go to WORK/corpus/TARGET (WORK: $ZDIST_FUZZ_WORK, else a new temp directory).
# tests/fuzz/corpus/TARGET (the seeds) is never written.
set -euo pipefail
usage="usage: soak.sh [--state DIR] [--until-cpu CPU_MINUTES] MINUTES [BUILD_DIR] | --state DIR --totals"
state=${ZDIST_FUZZ_STATE:-}
until_cpu=
totals_only=
while (($#)); do
    case $1 in
    --state) state=${2:?$usage}; shift 2 ;;
    --until-cpu) until_cpu=${2:?$usage}; shift 2 ;;
    --totals) totals_only=1; shift ;;
    -h | --help) echo "$usage"; exit 0 ;;
    --*) echo "soak.sh: unknown option '$1'; $usage" >&2; exit 2 ;;
    *) break ;;
    esac
done
# Totals over every run recorded in runs.tsv.
totals() {
    echo "totals in $runs:"
    awk -F'\t' 'NR > 1 { cpu[$2] += $4; ex[$2] += $5; n[$2]++; edges[$2] = $6; ft[$2] = $7; files[$2] = $8
                         if ($9 !~ /^ok/) crash[$2]++ }
        END { printf "%-14s %5s %10s %14s %7s %7s %7s %s\n", "target", "runs", "CPU-min", "executions", "edges", "ft",
                     "corpus", "crashes"
              for (t in cpu) printf "%-14s %5d %10.1f %14d %7s %7s %7s %d\n", t, n[t], cpu[t] / 60, ex[t], edges[t],
                                    ft[t], files[t], crash[t] }' "$runs" | { read -r head; echo "$head"; sort; }
}

if [[ -n $totals_only ]]; then
    [[ -n $state && -s $state/runs.tsv ]] || { echo "soak.sh: --totals needs --state DIR with a runs.tsv" >&2; exit 2; }
    runs=$state/runs.tsv
    totals
    exit 0
fi
minutes=${1:?$usage}
build=${2:-build-fuzz}
number='^[0-9]+(\.[0-9]+)?$'
[[ $minutes =~ $number ]] || { echo "soak.sh: MINUTES must be a number, got '$minutes'" >&2; exit 2; }
[[ -z $until_cpu || $until_cpu =~ $number ]] ||
    { echo "soak.sh: --until-cpu must be a number of CPU minutes, got '$until_cpu'" >&2; exit 2; }
[[ -z $until_cpu || -n $state ]] ||
    { echo "soak.sh: --until-cpu counts CPU time in a state directory: give --state DIR too" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/tests/fuzz
if [[ -n $state ]]; then
    mkdir -p "$state/logs"
    work=$(cd "$state" && pwd)
else
    work=${ZDIST_FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/zdist-soak.XXXXXX")}
    mkdir -p "$work/logs"
fi
runs=$work/runs.tsv
[[ -s $runs ]] || printf 'end_utc\ttarget\twall_s\tcpu_s\texecutions\tedges\tfeatures\tcorpus_files\tresult\n' >"$runs"
secs=$(python3 -c "print(max(1, int(float('$minutes') * 60)))")
targets=()
for f in "$bin"/fuzz_*; do
    [[ -f $f && -x $f ]] || continue
    help=$("$f" -help=1 2>&1 || true)
    [[ $help == *libFuzzer* ]] && targets+=("$(basename "$f")")
done
((${#targets[@]})) || { echo "soak.sh: no libFuzzer targets in $bin (configure with CC=clang -DFUZZ=ON)" >&2; exit 2; }

# CPU seconds (user + system) between two outputs of bash's `times` (second line: this shell's finished
# children). `times` runs in this shell: in a $(...) subshell it would count that subshell's children.
cpu_between() {
    python3 - "$1" "$2" <<'EOF2'
import re, sys
def cpu(path):
    line = open(path).read().splitlines()[-1]
    return sum(int(m) * 60 + float(s) for m, s in re.findall(r'(\d+)m([\d.]+)s', line))
print(round(cpu(sys.argv[2]) - cpu(sys.argv[1]), 1))
EOF2
}

# CPU seconds of TARGET so far in runs.tsv.
cpu_so_far() {
    awk -F'\t' -v t="$1" 'NR > 1 && $2 == t { s += $4 } END { printf "%.0f", s + 0 }' "$runs"
}

# The file readers' targets (csv, libsvm, idx, state, ckpt, ...) write each input to a file: on a disk
# file system that is a create and unlink per execution, and measured here they ran ~100x fewer inputs per
# second and used a quarter of their wall time on CPU. So their files go to tmpfs when there is one
# ($ZDIST_FUZZ_TMPDIR overrides).
fuzz_tmp=${ZDIST_FUZZ_TMPDIR:-}
if [[ -z $fuzz_tmp ]]; then
    fuzz_tmp=${TMPDIR:-/tmp}
    [[ -d /dev/shm && -w /dev/shm ]] && fuzz_tmp=/dev/shm
fi

crashed=0
declare -A broken=()
# One run of target $1 for $secs seconds; appends its line to runs.tsv.
run_one() {
    local t=$1 name=${1#fuzz_} rc=0 start log
    mkdir -p "$work/corpus/$name" "$work/artifacts/$name"
    log=$work/logs/$name-$(date -u +%Y%m%dT%H%M%SZ).log
    start=$(date +%s)
    times >"$work/.times-before.$$"
    TMPDIR=$fuzz_tmp "$bin/$t" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$work/artifacts/$name/" \
        -rss_limit_mb=2048 -timeout=25 "$work/corpus/$name" "$here/corpus/$name" >"$log" 2>&1 || rc=$?
    times >"$work/.times-after.$$"
    local wall=$(($(date +%s) - start))
    local cpu execs last edges ft files result=ok
    cpu=$(cpu_between "$work/.times-before.$$" "$work/.times-after.$$")
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    edges=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
    ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
    files=$(find "$work/corpus/$name" -type f | wc -l)
    # libFuzzer's -timeout is wall-clock time: a soak paused with SIGSTOP (to
    # benchmark on a quiet machine) times out on whatever input it was running.
    # A timeout whose input runs through at once when replayed is that, not a hang.
    local art
    art=$(ls -t "$work/artifacts/$name" 2>/dev/null | head -1)
    if ((rc == 70)) && [[ $art == timeout-* ]] &&
        timeout 60 "$bin/$t" -timeout=25 -rss_limit_mb=2048 "$work/artifacts/$name/$art" >>"$log" 2>&1; then
        mkdir -p "$work/artifacts/spurious"
        mv "$work/artifacts/$name/$art" "$work/artifacts/spurious/$name-$art"
        result="ok (a timeout that did not reproduce: the run was paused; input in artifacts/spurious)"
        rc=0
    fi
    if ((rc != 0)); then
        result="CRASH (exit $rc): $art, log $log"
        crashed=1
        broken[$t]=1
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$name" "$wall" "$cpu" \
        "${execs:-0}" "${edges:-?}" "${ft:-?}" "$files" "$result" >>"$runs"
    printf '%-12s %-12s %6ss wall %7ss CPU %12s execs %6s edges %6s ft  %s\n' "$(date -u +%H:%M:%S)" "$name" \
        "$wall" "$cpu" "${execs:-0}" "${edges:-?}" "${ft:-?}" "$result"
}

echo "soak: ${#targets[@]} targets, ${secs}s each per round, state in $work${until_cpu:+, until each has $until_cpu CPU-minutes}"
while :; do
    ran=0
    # Least CPU so far first: a soak stopped and resumed (each session) still reaches every target.
    order=("${targets[@]}")
    if [[ -n $state ]]; then
        mapfile -t order < <(for t in "${targets[@]}"; do echo "$(cpu_so_far "${t#fuzz_}") $t"; done |
            sort -s -n -k1,1 | cut -d' ' -f2)
    fi
    for t in "${order[@]}"; do
        [[ -z ${broken[$t]:-} ]] || continue
        if [[ -n $until_cpu ]] &&
            python3 -c "import sys; sys.exit(0 if $(cpu_so_far "${t#fuzz_}") >= float('$until_cpu') * 60 else 1)"; then
            continue
        fi
        run_one "$t"
        ran=1
    done
    [[ -n $until_cpu && $ran == 1 ]] || break
done

totals
exit $crashed
