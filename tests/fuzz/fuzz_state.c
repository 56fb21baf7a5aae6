/* Fuzz target: a job's state.json as the coordinator reads it back at start
   (coord_state_read): JSON, its "crc32" seal, the row's fields. Each input
   is read as is (the seal almost never matches a mutation), then, when it
   is a JSON object, sealed again (zdist_json_write_sealed, as the
   coordinator writes it) and read once more, so the fields' checks see
   mutated rows too. */
#include <stdint.h>
#include <jansson.h>
#include <stdlib.h>

#include "coord_state.h"
#include "fuzz_files.h"
#include "zdist/file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
s_read(const char *path)
{
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
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    char path[512];
    if (fz_write("state.json", data, size, path) != 0)
        abort();
    s_read(path);
    json_t *doc = json_loadb((const char *) data, size, JSON_REJECT_DUPLICATES, NULL);
    zdist_error_t err = {0};
    if (json_is_object(doc) && zdist_json_write_sealed(path, doc, "crc32", &err) == 0)
        s_read(path);
    json_decref(doc);
    return 0;
}
