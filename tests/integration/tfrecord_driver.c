/* tfrecord_driver: reads TFRecord files of tf.train.Examples through libzdist
   (zdist/tfrecord.h, zdist/example.h) and prints every row, one line each,
   floats as their IEEE bits, so a writer's own account can be compared
   byte for byte. Usage:
     tfrecord_driver [--gzip] [--batch N] NAME:fixed|var:float32|int64[:DEFAULT[:DIM]] ... -- FILE...
   (an empty DEFAULT: none; DIM: a fixed feature of shape [DIM]) 
   Exit 0, or 1 printing the error (for tests of refusals). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/example.h"
#include "zdist/tfrecord.h"

static int
s_spec(char *arg, zdist_feature_spec_t *s)
{
    char *name = strsep(&arg, ":"), *kind = strsep(&arg, ":"), *dtype = strsep(&arg, ":");
    char *def = strsep(&arg, ":"), *dim = strsep(&arg, ":");
    if (!name || !kind || !dtype)
        return -1;
    *s = (zdist_feature_spec_t){.name = name};
    if (dim) {
        s->rank = 1;
        s->shape[0] = strtoll(dim, NULL, 10);
    }
    s->kind = !strcmp(kind, "var") ? ZDIST_FEATURE_VAR : ZDIST_FEATURE_FIXED;
    s->dtype = !strcmp(dtype, "int64") ? ZDIST_DTYPE_INT64 : ZDIST_DTYPE_FLOAT32;
    if (def && *def) {
        s->has_default = true;
        s->default_float = strtod(def, NULL);
        s->default_int = strtoll(def, NULL, 10);
    }
    return 0;
}

static void
s_value(const zdist_feature_column_t *c, int64_t i)
{
    if (c->dtype == ZDIST_DTYPE_INT64) {
        printf("%" PRId64, ((const int64_t *) c->values)[i]);
    } else {
        uint32_t bits;
        memcpy(&bits, (const float *) c->values + i, 4);
        printf("f%08" PRIx32, bits);
    }
}

static void
s_print(const zdist_example_parser_t *p)
{
    for (int64_t r = 0; r < zdist_example_parser_rows(p); r++) {
        for (int i = 0; i < zdist_example_parser_count(p); i++) {
            const zdist_feature_column_t *c = zdist_example_parser_column(p, i);
            printf(i ? " " : "");
            if (c->kind == ZDIST_FEATURE_FIXED) {
                for (int64_t k = 0; k < c->elems; k++)
                    printf(k ? "," : ""), s_value(c, r * c->elems + k);
            } else {
                printf("[");
                for (int64_t k = c->row_splits[r]; k < c->row_splits[r + 1]; k++)
                    printf(k > c->row_splits[r] ? "," : ""), s_value(c, k);
                printf("]");
            }
        }
        printf("\n");
    }
}

int
main(int argc, char **argv)
{
    zdist_feature_spec_t specs[64];
    int n = 0, a = 1;
    zdist_tfrecord_compression_t comp = ZDIST_TFRECORD_NONE;
    int64_t batch = 7;
    for (; a < argc && strcmp(argv[a], "--"); a++) {
        if (!strcmp(argv[a], "--gzip"))
            comp = ZDIST_TFRECORD_GZIP;
        else if (!strcmp(argv[a], "--batch") && a + 1 < argc)
            batch = strtoll(argv[++a], NULL, 10);
        else if (n == 64 || s_spec(argv[a], &specs[n++]) < 0)
            return fprintf(stderr, "tfrecord_driver: bad spec '%s'\n", argv[a]), 2;
    }
    zdist_error_t err = {0};
    zdist_example_parser_t *p = zdist_example_parser_new(specs, n, &err);
    if (!p)
        return fprintf(stderr, "%s\n", err.text), 1;
    int rc = 0;
    for (a++; a < argc && rc >= 0; a++) {
        zdist_tfrecord_reader_t *r = zdist_tfrecord_reader_open(argv[a], comp, &err);
        if (!r) {
            rc = -1;
            break;
        }
        const uint8_t *d;
        size_t len;
        while ((rc = zdist_tfrecord_reader_next(r, &d, &len, &err)) == 1) {
            if ((rc = zdist_example_parser_add(p, d, len, &err)) < 0)
                break;
            if (zdist_example_parser_rows(p) == batch) {
                s_print(p);
                zdist_example_parser_clear(p);
            }
        }
        zdist_tfrecord_reader_destroy(&r);
    }
    s_print(p);
    zdist_example_parser_destroy(&p);
    if (rc < 0)
        return fprintf(stderr, "%s\n", err.text), 1;
    return 0;
}
