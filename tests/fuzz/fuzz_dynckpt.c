/* Fuzz target: the reader of dynamic tables' checkpoints (psd_dyntable_ckpt_restore and _describe) —
   manifests, full and delta files. The input packs a checkpoint directory
   (fuzz_files.h): the first part is dynamic-ps0.json, then "\n--file
   NAME\n" parts (data files, more manifests). They are restored onto a new
   table "job/emb" of dim 2 with adagrad as ps task 0 of 1, strictly and
   with the fallback; a restore either fails saying why or succeeds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_files.h"
#include "psd_dyntable_ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
s_restore(unsigned flags)
{
    psd_dyntable_config_t c = {
        .name = "job/emb", .dim = 2, .init = {.kind = ZDIST_INIT_ZEROS}, .min_count = 1};
    zdist_optim_config_default(&c.optim, ZDIST_OPTIM_ADAGRAD);
    psd_dyntable_budget_t budget = {.max_bytes = 64 << 20}; /* a file may claim any number of rows */
    c.budget = &budget;
    psd_dyntable_t *table = psd_dyntable_new(&c, NULL);
    psd_dyntable_ckpt_t *ck = psd_dyntable_ckpt_new(3);
    if (!table || !ck)
        abort();
    psd_dyntable_ckpt_table_t t = {"job/emb", table, NULL};
    psd_dyntable_ckpt_restored_t r;
    zdist_error_t err = {0};
    int rc = psd_dyntable_ckpt_restore(ck, &t, 1, fz_dir(), 0, 1, flags, &r, &err);
    fz_report(rc, err.text);
    if (rc != 0 && !err.text[0])
        __builtin_trap(); /* a refusal always says why */
    if (rc == 0 && r.fell_back && !r.why[0])
        __builtin_trap();
    psd_dyntable_ckpt_destroy(&ck);
    psd_dyntable_destroy(&table);
    return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    fz_unpack(data, size, "dynamic-ps0.json");
    s_restore(0);
    s_restore(PSD_DYNTABLE_CKPT_FALLBACK);
    int64_t dim = 0;
    json_t *states = NULL;
    zdist_error_t err = {0};
    if (psd_dyntable_ckpt_describe(fz_dir(), "job/emb", &dim, &states, &err) == 0) {
        if (dim < 1 || !json_is_array(states))
            __builtin_trap();
        json_decref(states);
    } else if (!err.text[0]) {
        __builtin_trap();
    }
    return 0;
}
