#!/usr/bin/env bash
# Ring collectives between 3 separate processes (collective_driver) on loopback:
# correct sums, bitwise-identical results, and a missing rank named on time.
source "$(dirname "$0")/lib.sh"
zd_init collective
zd_need COLLECTIVE_DRIVER_BIN
dir=$ZD_TMP

# rank NAME RANK TIMEOUT_MS: the driver as rank RANK in the background, its
# digest in $dir/outRANK, its stderr in $dir/NAME.log.
rank() {
    "$COLLECTIVE_DRIVER_BIN" "$2" "$3" "${eps[@]}" >"$dir/out$2" 2>"$dir/$1.log" &
    zd_adopt "$1" $!
}

eps=()
for i in 0 1 2; do eps+=("tcp://127.0.0.1:$(zd_free_port)"); done

echo "== 3 ranks: all_reduce, all_gather, broadcast"
for r in 0 1 2; do rank "rank$r" "$r" 20000; done
fail=0
for r in 0 1 2; do
    zd_wait "rank$r"
    if ((ZD_RC != 0)); then
        echo "rank $r failed:"; cat "$dir/rank$r.log"; fail=1
    fi
done
((fail == 0))
d0=$(cat "$dir/out0"); d1=$(cat "$dir/out1"); d2=$(cat "$dir/out2")
echo "   $d0 / $d1 / $d2"
[[ $d0 == digest* && $d0 == "$d1" && $d0 == "$d2" ]] || { echo "digests differ"; exit 1; }

echo "== rank 2 never starts: ranks 0 and 1 fail within the deadline, naming it"
start=$(date +%s%N)
for r in 0 1; do rank "alone$r" "$r" 1000; done
for r in 0 1; do
    zd_wait "alone$r"
    if ((ZD_RC == 0)); then echo "rank $r should have failed"; exit 1; fi
done
elapsed=$((($(date +%s%N) - start) / 1000000))
for r in 0 1; do
    cat "$dir/alone$r.log"
    grep -q "rank 2 (${eps[2]}) did not join" "$dir/alone$r.log" || { echo "rank $r did not name rank 2"; exit 1; }
done
echo "   failed after ${elapsed} ms (deadline 1000 ms)"
# Not a speed bound: a rank that ignored its deadline would wait for ever. 15 s leaves room for starting
# two ASan processes on a loaded machine (4 s did not, once in CI) and still fails a missed deadline.
((elapsed < 15000)) || { echo "the ranks took ${elapsed} ms to give up on a 1000 ms deadline"; exit 1; }
echo "PASS"
