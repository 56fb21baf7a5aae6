/* Fuzz target: the coordinator's worker-state reader (zdist_wstate_load):
   manifest-workers.json (the first part of the input) and the files it names
   ("\n--file workers-state.bin\n" parts, fuzz_files.h). A load either fails
   saying why or gives tensors that lie inside the data it read. */
#include <stdint.h>
#include <stdlib.h>

#include "zdist/wstate.h"
#include "fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    fz_unpack(data, size, ZDIST_WSTATE_MANIFEST);
    zdist_wstate_t st;
    zdist_error_t err = {0};
    int rc = zdist_wstate_load(fz_dir(), &st, &err);
    fz_report(rc, err.text);
    if (rc == 0) {
        for (size_t i = 0; i < st.n; i++) {
            size_t bytes = 0;
            if (zdist_tensor_byte_size(st.tensors[i].dtype, &st.tensors[i].shape, &bytes) != 0 ||
                bytes != st.tensors[i].nbytes || !st.tensors[i].name)
                __builtin_trap();
            volatile uint8_t x = 0;
            for (size_t b = 0; b < bytes; b++)
                x ^= ((const uint8_t *) st.tensors[i].data)[b]; /* every byte readable */
        }
        zdist_wstate_release(&st);
    } else if (!err.text[0]) {
        __builtin_trap();
    }
    return 0;
}
