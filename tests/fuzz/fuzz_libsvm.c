/* Fuzz target: the LIBSVM reader (zdist_dataset_read_libsvm) on a file
   holding the input after its first byte, which gives the dimension (1 + byte). */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_files.h"
#include "zdist/input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20))
        return 0;
    int64_t dim = 1 + (int64_t) data[0];
    char path[512];
    if (fz_write("data.svm", data + 1, size - 1, path) != 0)
        abort();
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    int rc = zdist_dataset_read_libsvm(path, dim, &ds, &err);
    fz_report(rc, err.text);
    if (rc == 0) {
        int64_t n = zdist_dataset_size(ds);
        if (n < 0 || zdist_dataset_dim(ds) != dim || !zdist_dataset_is_sparse(ds))
            __builtin_trap();
        const int64_t *off = zdist_dataset_row_offsets(ds), *ids = zdist_dataset_feature_ids(ds);
        for (int64_t i = 0; i < n; i++) {
            if (off[i + 1] < off[i])
                __builtin_trap();
            for (int64_t k = off[i]; k < off[i + 1]; k++)
                if (ids[k] < 0 || ids[k] >= dim)
                    __builtin_trap(); /* every id inside the dimension */
        }
        zdist_dataset_destroy(&ds);
    } else if (!err.text[0] || ds) {
        __builtin_trap();
    }
    return 0;
}
