/* Fuzz target: the psd checkpoint reader (psd_ckpt_restore) — manifests and
   shard files. The input packs the files of a checkpoint directory
   (fuzz_files.h): the first part is manifest-ps0.json, then
   "\n--file NAME\n" parts (data files, more manifests). They are restored
   onto a store holding "emb/table" float32 [6,2] in two shards (rows 0-2,
   3-5) and "bias" float64 [3], with Adam; a restore either fails saying why
   and leaves the store as it was, or succeeds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_files.h"
#include "psd_ckpt.h"
#include "psd_store.h"
#include "psd_write.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static psd_store_t *
s_store(void)
{
    psd_store_t *store = psd_store_new();
    if (!store)
        abort();
    zdist_optim_config_t adam;
    zdist_optim_config_default(&adam, ZDIST_OPTIM_ADAM);
    if (psd_store_set_optimizer(store, &adam, NULL) != 0)
        abort();
    const psd_shard_spec_t specs[] = {
        {.name = "emb/table", .shape = {.rank = 2, .dims = {6, 2}}, .dtype = ZDIST_DTYPE_FLOAT32,
         .shard_index = 0, .row_offset = 0, .rows = 3, .init = {.kind = ZDIST_INIT_ONES}, .seed = 1},
        {.name = "emb/table", .shape = {.rank = 2, .dims = {6, 2}}, .dtype = ZDIST_DTYPE_FLOAT32,
         .shard_index = 1, .row_offset = 3, .rows = 3, .init = {.kind = ZDIST_INIT_ONES}, .seed = 1},
        {.name = "bias", .shape = {.rank = 1, .dims = {3}}, .dtype = ZDIST_DTYPE_FLOAT64, .shard_index = 0,
         .row_offset = 0, .rows = 3, .init = {.kind = ZDIST_INIT_ONES}, .seed = 1},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        if (psd_store_create(store, &specs[i], NULL, NULL) != 0)
            abort();
    return store;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    fz_unpack(data, size, "manifest-ps0.json");
    psd_store_t *store = s_store();
    int64_t step = -1;
    zdist_error_t err = {0};
    int rc = psd_ckpt_restore(store, fz_dir(), &step, &err);
    fz_report(rc, err.text);
    psd_shard_t *emb = psd_store_find(store, "emb/table", 1);
    float v[6];
    if (!emb || psd_shard_read(emb, 3, PSD_WHOLE_SHARD, v, sizeof v, NULL) != 0)
        __builtin_trap();
    if (rc != 0) {
        if (!err.text[0])
            __builtin_trap(); /* a refusal always says why */
        for (int i = 0; i < 6; i++)
            if (v[i] != 1.0f)
                __builtin_trap(); /* and changes nothing */
    }
    psd_store_destroy(&store);
    return 0;
}
