#!/usr/bin/env bash
# zdist gen criteo: the files it promises, read back through libzdist's TFRecord
# reader (tfrecord_driver), the same bytes for the same seed, no overwrite,
# and bad options refused naming them.
source "$(dirname "$0")/lib.sh"
zd_init gen
: "${ZDIST_BIN:?}" "${TFRECORD_DRIVER_BIN:?}"
out=$ZD_TMP/out.json
zd_run_expect 0 "$out" "$ZDIST_BIN" gen criteo --rows 5000 --out "$ZD_TMP/a" --files 3 --seed 7 --json
python3 - "$out" <<'PY' || zd_fail "report: $(cat "$out")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["train_rows"] == 4500 and r["test_rows"] == 500 and r["files"] == 3, r
assert 0.1 < r["positive_rate"] < 0.45 and 0.65 < r["teacher_auc"] < 0.95, r
PY
zd_ok "5000 rows: 4500 train, 500 test, teacher AUC $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["teacher_auc"])' "$out")"
spec=(label:fixed:int64)
for k in $(seq 13); do spec+=("I$k:fixed:float32"); done
for k in $(seq 26); do spec+=("C$k:fixed:int64"); done
"$TFRECORD_DRIVER_BIN" "${spec[@]}" -- "$ZD_TMP"/a/train/part-0000{0,1,2}.tfrecord >"$ZD_TMP/train.txt"
[[ $(wc -l <"$ZD_TMP/train.txt") -eq 4500 ]] || zd_fail "read $(wc -l <"$ZD_TMP/train.txt") train rows, wanted 4500"
awk '{print $1}' "$ZD_TMP/train.txt" | sort -u | tr '\n' ' ' | grep -qx '0 1 ' || zd_fail "labels other than 0 and 1"
zd_ok "every train row read back with 40 features, labels 0 or 1"
zd_run_expect 0 "$out" "$ZDIST_BIN" gen criteo --rows 5000 --out "$ZD_TMP/b" --files 3 --seed 7
diff -r "$ZD_TMP/a" "$ZD_TMP/b" >/dev/null || zd_fail "the same seed wrote different files"
zd_run_expect 2 "$out" "$ZDIST_BIN" gen criteo --rows 5000 --out "$ZD_TMP/a"
grep -qF "already holds part files" "$out.err" || zd_fail "overwrite: $(cat "$out.err")"
zd_run_expect 2 "$out" "$ZDIST_BIN" gen criteo --rows 0 --out "$ZD_TMP/c"
grep -qF -- "--rows must be a whole number >= 1, got '0'" "$out.err" || zd_fail "rows 0: $(cat "$out.err")"
zd_run_expect 2 "$out" "$ZDIST_BIN" gen parquet --rows 10 --out "$ZD_TMP/c"
grep -qF "unknown data set 'parquet' (known: criteo)" "$out.err" || zd_fail "data set: $(cat "$out.err")"
zd_ok "same seed, same bytes; no overwrite; bad options named"
echo "test_gen.sh: $ZD_PASSED passed, 0 failed"
