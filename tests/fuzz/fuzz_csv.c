/* Fuzz target: the CSV reader (zdist_dataset_read_csv) on a file holding the
   input after its first byte, which picks the options: bit 0 header, bit 1
   float32 labels, bits 2-4 the label column (-4 .. 3). */
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
    zdist_csv_options_t opts = {
        .header = data[0] & 1,
        .label_dtype = data[0] & 2 ? ZDIST_DTYPE_FLOAT32 : ZDIST_DTYPE_INT32,
        .label_column = (int) ((data[0] >> 2) & 7) - 4,
    };
    char path[512];
    if (fz_write("data.csv", data + 1, size - 1, path) != 0)
        abort();
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    int rc = zdist_dataset_read_csv(path, &opts, &ds, &err);
    fz_report(rc, err.text);
    if (rc == 0) {
        int64_t n = zdist_dataset_size(ds), dim = zdist_dataset_dim(ds);
        if (n < 0 || dim < 0 || zdist_dataset_is_sparse(ds))
            __builtin_trap();
        volatile float sum = 0;
        const float *x = zdist_dataset_features(ds);
        for (int64_t i = 0; i < n * dim; i++)
            sum += x[i]; /* every feature readable */
        zdist_dataset_destroy(&ds);
    } else if (!err.text[0] || ds) {
        __builtin_trap();
    }
    return 0;
}
