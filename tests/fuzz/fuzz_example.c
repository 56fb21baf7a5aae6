/* Fuzz target: TFRecord framing (zdist_tfrecord_reader) and tf.train.Example
   parsing (zdist_example_parser) on a file holding the input after its first
   byte, which picks the spec; the same bytes are also parsed as one Example. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_files.h"
#include "zdist/criteo.h"
#include "zdist/example.h"
#include "zdist/tfrecord.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every column's row count and splits agree with the rows parsed. */
static void
s_check(const zdist_example_parser_t *p)
{
    int64_t rows = zdist_example_parser_rows(p);
    for (int i = 0; i < zdist_example_parser_count(p); i++) {
        const zdist_feature_column_t *c = zdist_example_parser_column(p, i);
        if (c->kind != ZDIST_FEATURE_VAR || rows == 0)
            continue;
        if (c->row_splits[0] != 0)
            __builtin_trap();
        for (int64_t r = 0; r < rows; r++)
            if (c->row_splits[r + 1] < c->row_splits[r])
                __builtin_trap();
    }
}

static zdist_example_parser_t *
s_parser(uint8_t pick)
{
    zdist_feature_spec_t spec[ZDIST_CRITEO_FEATURES];
    zdist_criteo_feature_specs(spec);
    int n = ZDIST_CRITEO_FEATURES;
    if (pick & 1) { /* var features and defaults too */
        spec[1].has_default = true;
        spec[14].kind = ZDIST_FEATURE_VAR;
        spec[15] = (zdist_feature_spec_t){.name = "dense", .kind = ZDIST_FEATURE_FIXED,
                                          .dtype = ZDIST_DTYPE_FLOAT32, .rank = 2, .shape = {2, 2}};
    }
    if (pick & 2)
        n = 3;
    zdist_error_t err = {0};
    return zdist_example_parser_new(spec, n, &err);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20))
        return 0;
    zdist_example_parser_t *p = s_parser(data[0]);
    if (!p)
        abort();
    zdist_error_t err = {0};
    int rc = zdist_example_parser_add(p, data + 1, size - 1, &err);
    if (rc < 0 && !err.text[0])
        __builtin_trap();
    s_check(p);
    zdist_example_parser_clear(p);

    char path[512];
    if (fz_write("data.tfrecord", data + 1, size - 1, path) != 0)
        abort();
    zdist_tfrecord_reader_t *r = zdist_tfrecord_reader_open(path, ZDIST_TFRECORD_NONE, &err);
    if (!r)
        abort(); /* the file exists */
    const uint8_t *rec;
    size_t len;
    int64_t records = 0;
    while ((rc = zdist_tfrecord_reader_next(r, &rec, &len, &err)) == 1) {
        records++;
        if (zdist_example_parser_add(p, rec, len, &err) < 0 && !err.text[0])
            __builtin_trap();
    }
    if (rc < 0 && !err.text[0])
        __builtin_trap();
    if (zdist_example_parser_rows(p) > records || zdist_tfrecord_reader_count(r) != records)
        __builtin_trap();
    s_check(p);
    fz_report(rc, err.text);
    zdist_tfrecord_reader_destroy(&r);
    zdist_example_parser_destroy(&p);
    return 0;
}
