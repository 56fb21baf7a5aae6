#!/usr/bin/env bash
# FTRL (tf.keras.optimizers.Ftrl, issue 29) over real psds: dynamic tables
# spread over 2 psds and a fixed table, trained by sparse pushes, match TF's
# ApplyFtrlV2 computed by psd_driver (its dyn-ftrl case says how); a dynamic
# table's default value (dynamic.default) read for ids without a row; then the
# job file's ftrl fields: `zdist run` trains with them in process, and a
# bad one is refused naming the field.
source "$(dirname "$0")/lib.sh"
zd_init dynamic-ftrl
zd_need ZDIST_BIN ZDIST_PSD_BIN PSD_DRIVER_BIN
zd_write_cluster "$ZD_TMP/cluster.json" 2 1
zd_start ps0 "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/cluster.json" --task ps:0
zd_start ps1 "$ZDIST_PSD_BIN" --cluster "$ZD_TMP/cluster.json" --task ps:1
zd_wait_psd ps0 "${ZD_PS_ADDRS[0]}" 60
zd_wait_psd ps1 "${ZD_PS_ADDRS[1]}" 60

"$PSD_DRIVER_BIN" dyn-ftrl "${ZD_PS_ADDRS[0]}" "${ZD_PS_ADDRS[1]}" || zd_fail "ftrl rows differ from TF's formula (above)"
zd_ok "ftrl on dynamic and fixed tables of 2 psds matches TF's ApplyFtrlV2"
"$PSD_DRIVER_BIN" dyn-default "${ZD_PS_ADDRS[0]}" "${ZD_PS_ADDRS[1]}" || zd_fail "a dynamic table's default (above)"
zd_ok "a dynamic table's default value: read for ids without a row, on both psds"

# The job file's ftrl, in process: a softmax regression on synthetic data.
# job FILE OPTIMIZER_JSON
job() {
    cat >"$1" <<JSON
{"name": "ftrl", "strategy": {"type": "one_device"}, "model": {"name": "softmax_regression"}, "optimizer": $2,
 "dataset": {"format": "synthetic", "synthetic": {"n": 2048, "test_n": 512, "dim": 12, "classes": 3, "seed": 4},
             "global_batch_size": 32}, "epochs": 2, "seed": 1}
JSON
}
OUT=$ZD_TMP/out
job "$ZD_TMP/ftrl.json" '{"type": "ftrl", "learning_rate": 0.5, "learning_rate_power": -0.5,
    "initial_accumulator_value": 0.1, "l1_regularization_strength": 0.001, "l2_regularization_strength": 0.001,
    "l2_shrinkage_regularization_strength": 0.0, "beta": 0.1}'
zd_run_expect 0 "$OUT" "$ZDIST_BIN" run --json "$ZD_TMP/ftrl.json"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j); sys.exit(0 if j["test_accuracy"] > 0.9 else 1)' "$OUT" \
    || zd_fail "zdist run with ftrl did not learn: $(cat "$OUT")"
zd_ok "zdist run trains with the job file's ftrl (test accuracy > 0.9)"
job "$ZD_TMP/bad.json" '{"type": "ftrl", "l1_regularization_strength": -1}'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/bad.json"
grep -qF "optimizer" "$OUT.err" && grep -qF "l1_regularization_strength" "$OUT.err" \
    || zd_fail "a negative l1 is not refused naming the field: $(cat "$OUT.err")"
job "$ZD_TMP/bad.json" '{"type": "ftrl", "epsilon": 1e-7}'
zd_run_expect 2 "$OUT" "$ZDIST_BIN" run "$ZD_TMP/bad.json"
grep -qF "epsilon" "$OUT.err" || zd_fail "adam's epsilon on ftrl is not refused naming it: $(cat "$OUT.err")"
zd_ok "the job file's ftrl fields: errors name the field"
echo "test_dynamic_ftrl: $ZD_PASSED checks passed"
