/* psd_dyntable_npy: a dynamic table's ids and vectors as a pair of NumPy .npy files. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "psd_dyntable_npy.h"
#include "zdist/dynexport.h"
#include "zdist/file.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error ".npy files are written '<i8' and '<f4': a big-endian host must swap"
#endif

typedef struct {
    zdist_file_out_t *ids, *vectors;
    size_t value_bytes;
} s_npy_t;

static int
s_npy_row(const psd_dyntable_row_t *row, void *arg)
{
    s_npy_t *w = arg;
    int rc = zdist_file_out_write(w->ids, &row->id, sizeof row->id);
    return rc < 0 ? rc : zdist_file_out_write(w->vectors, row->values, w->value_bytes);
}

int
psd_dyntable_npy_write(psd_dyntable_t *table, const char *ids_path, const char *vectors_path,
                       uint64_t *ret_rows, zdist_error_t *err)
{
    zdist_error_t spare;
    err = err ? err : &spare; /* codes are read back from it */
    psd_dyntable_stats_t st;
    psd_dyntable_stats(table, &st);
    int64_t dim = psd_dyntable_dim(table);
    s_npy_t w = {.value_bytes = (size_t) dim * sizeof(float)};
    if (!(w.vectors = zdist_file_out_new(vectors_path, 0644, err)))
        return err->code;
    if (!(w.ids = zdist_file_out_new(ids_path, 0644, err))) {
        zdist_file_out_destroy(&w.vectors);
        return err->code;
    }
    char head[256];
    zdist_file_out_write(w.ids, head, zdist_npy_header(head, "<i8", st.rows, 0));
    zdist_file_out_write(w.vectors, head, zdist_npy_header(head, "<f4", st.rows, dim));
    int rc = psd_dyntable_iterate(table, false, s_npy_row, &w);
    if (rc < 0) {
        zdist_file_out_destroy(&w.ids);
        zdist_file_out_destroy(&w.vectors);
        return zdist_error_set(err, rc, "cannot write %s and %s: %s", ids_path, vectors_path, strerror(-rc));
    }
    /* The vectors first: a pair cut short by a crash has new vectors under old ids, told by their lengths. */
    if ((rc = zdist_file_out_commit(&w.vectors, NULL, NULL, err)) < 0) {
        zdist_file_out_destroy(&w.ids);
        return rc;
    }
    if ((rc = zdist_file_out_commit(&w.ids, NULL, NULL, err)) == 0 && ret_rows)
        *ret_rows = st.rows;
    return rc;
}

int
psd_dyntable_npy_from_ckpt(const char *dir, const char *name, const char *ids_path, const char *vectors_path,
                           uint64_t *ret_rows, zdist_error_t *err)
{
    /* libzdist's reader, the one `zdist export-embedding` uses. */
    return zdist_dynexport_npy(dir, name, ids_path, vectors_path, ret_rows, err);
}
