/* Fuzz target: the IDX reader (zdist_dataset_read_idx). The input packs two
   files (fuzz_files.h): the images, then "\n--file labels\n" and the labels
   (a missing labels part: the reader finds no file, and says so). */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_files.h"
#include "zdist/input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (4u << 20))
        return 0;
    fz_unpack(data, size, "images");
    char images[512], labels[512];
    snprintf(images, sizeof images, "%s/images", fz_dir());
    snprintf(labels, sizeof labels, "%s/labels", fz_dir());
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    int rc = zdist_dataset_read_idx(images, labels, &ds, &err);
    fz_report(rc, err.text);
    if (rc == 0) {
        int64_t n = zdist_dataset_size(ds), dim = zdist_dataset_dim(ds);
        if (n < 0 || dim < 0 || zdist_dataset_is_sparse(ds))
            __builtin_trap();
        const float *x = zdist_dataset_features(ds);
        for (int64_t i = 0; i < n * dim; i++)
            if (!(x[i] >= 0.0f && x[i] <= 1.0f))
                __builtin_trap(); /* pixels / 255 */
        const int32_t *y = zdist_dataset_labels(ds);
        for (int64_t i = 0; i < n; i++)
            if (y[i] < 0 || y[i] > 255)
                __builtin_trap();
        zdist_dataset_destroy(&ds);
    } else if (!err.text[0] || ds) {
        __builtin_trap();
    }
    return 0;
}
