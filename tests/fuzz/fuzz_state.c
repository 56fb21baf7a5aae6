/* Fuzz target: a job's state.json as the coordinator reads it back at start
   (coord_state_read): JSON, its "crc32" seal, the row's fields. */
#include <stdint.h>
#include <stdlib.h>

#include "coord_state.h"
#include "fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    char path[512];
    if (fz_write("state.json", data, size, path) != 0)
        abort();
    coord_state_row_t row;
    zdist_error_t err = {0};
    int rc = coord_state_read(path, &row, &err);
    fz_report(rc, err.text);
    if (rc == 0) {
        if (!row.name || !row.state || !row.error || !row.base_dir || !row.detail || row.detail[0] != '{')
            __builtin_trap();
        coord_state_row_release(&row);
    } else if (!err.text[0] || row.name) {
        __builtin_trap();
    }
    return 0;
}
