/* zdist export: a dynamic embedding table as its checkpointed rows plus an id->row map (ai.onnx.ml LabelEncoder). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_export.h"
#include "zdist/dynexport.h"

#define S_ML_DOMAIN "ai.onnx.ml"
#define S_ML_OPSET 2 /* LabelEncoder-2: int64 keys and values */
/* LabelEncoder's keys and values are attributes (an int count): far beyond a table exported to serve */
#define S_MAX_ROWS (INT_MAX / 2)

/* Table l's ids (ascending) and vectors (rows of them) from the
   checkpoint, through libzdist's dynexport (the documented reader of the
   psd's table files). */
static int
s_load(cli_export_t *x, const zdist_layer_spec_t *l, int64_t **ret_ids, float **ret_vectors, uint64_t *ret_rows)
{
    char table[ZDIST_LAYER_NAME_MAX + 16];
    snprintf(table, sizeof table, "%s/embeddings", l->name);
    int64_t dim = 0;
    int rc = zdist_dynexport_read(x->ckpt_dir, table, ret_ids, ret_vectors, ret_rows, &dim, x->err);
    if (rc == 0 && *ret_rows > S_MAX_ROWS)
        rc = zdist_error_set(x->err, -EFBIG, "dynamic table '%s' has %llu rows; ONNX's LabelEncoder takes at most %d",
                             table, (unsigned long long)*ret_rows, S_MAX_ROWS);
    else if (rc == 0 && dim != l->output_dim)
        rc = zdist_error_set(x->err, -EBADMSG, "dynamic table '%s' has rows of %lld floats, the model's output_dim is %lld",
                             table, (long long)dim, (long long)l->output_dim);
    if (rc < 0) {
        free(*ret_ids);
        free(*ret_vectors);
        *ret_ids = NULL;
        *ret_vectors = NULL;
        zdist_error_prefix(x->err, "layer '%s' (a dynamic table)", l->name);
    }
    return rc;
}

/* ids mapped to rows: LabelEncoder(keys = the table's ids, values = 0..n-1,
   default n: the default row). An empty table: every id to row 0 (the
   default row). */
static int
s_map(cli_export_t *x, const zdist_layer_spec_t *l, const char *ids, const int64_t *keys, int64_t n, char *ret_rows)
{
    if (n == 0) {
        char zero[CLI_EXPORT_NAME];
        int rc = cli_export_const_i64(x, l->name, "no_rows", 0, 0, zero);
        return rc < 0 ? rc : cli_export_op(x, "Mul", (const char *const[]){ids, zero}, 2, NULL, 0, ret_rows);
    }
    int64_t *values = malloc((size_t)n * sizeof *values);
    if (!values)
        return zdist_error_set(x->err, -ENOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++)
        values[i] = i;
    zdist_onnx_attr_t attrs[] = {
        {"keys_int64s", ZDIST_ONNX_ATTR_INTS, .ints = keys, .n = (int)n},
        {"values_int64s", ZDIST_ONNX_ATTR_INTS, .ints = values, .n = (int)n},
        {"default_int64", ZDIST_ONNX_ATTR_INT, .i = n},
    };
    snprintf(ret_rows, CLI_EXPORT_NAME, "%s/row", l->name);
    int rc = zdist_onnx_import(x->g, S_ML_DOMAIN, S_ML_OPSET);
    if (rc == 0)
        rc = zdist_onnx_node_domain(x->g, S_ML_DOMAIN, "LabelEncoder", (const char *const[]){ids}, 1,
                                    (const char *const[]){ret_rows}, 1, attrs, 3);
    free(values);
    return rc;
}

int
cli_export_dynamic_rows(cli_export_t *x, const zdist_layer_spec_t *l, const char *ids, char *ret_table,
                        char *ret_rows)
{
    int64_t *keys = NULL;
    float *vectors = NULL;
    uint64_t rows = 0;
    int rc = s_load(x, l, &keys, &vectors, &rows);
    if (rc < 0)
        return rc;
    int64_t e = l->output_dim, n = (int64_t)rows;
    /* the rows, then the default row: dynamic.default in every element, what
       the psd answers for an id without a row */
    float *table = realloc(vectors, (size_t)((n + 1) * e) * sizeof *table);
    if (!table) {
        free(vectors);
        free(keys);
        return zdist_error_set(x->err, -ENOMEM, "out of memory for dynamic table '%s'", l->name);
    }
    for (int64_t k = 0; k < e; k++)
        table[n * e + k] = (float)l->dyn_default;
    rc = cli_export_const(x, l->name, "embeddings", (const int64_t[]){n + 1, e}, 2, table, ret_table);
    if (rc == 0)
        rc = s_map(x, l, ids, keys, n, ret_rows);
    free(table);
    free(keys);
    return rc;
}
