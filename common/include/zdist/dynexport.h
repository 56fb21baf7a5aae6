/* zdist_dynexport: a dynamic embedding table's rows, read from a checkpoint directory, as a .npy pair.

   What `zdist export-embedding` needs without a psd: the psd's dynamic
   tables' checkpoint files (psd/psd_dyntable_ckpt.h: dynamic-ps<N>.json
   manifests, each table a chain of a full and deltas, in this directory
   or directories beside it) read through zdist_dynfile_read
   (zdist/dynfile.h, the psd's restore's reader too), CRC-checked, and
   every saving task's rows gathered. */
#ifndef ZDIST_DYNEXPORT_H
#define ZDIST_DYNEXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A .npy (format 1.0) header for a C-order array of numpy dtype `descr`
   ("<i8", "<f4") and shape (rows,) when dim is 0, else (rows, dim), into
   out (at least 256 bytes); returns its length (a multiple of 64). */
ZDIST_EXPORT size_t zdist_npy_header(char *out, const char *descr, uint64_t rows, int64_t dim);

/* Writes table `table`'s rows of the checkpoint in dir: ids_path the ids,
   int64 shape (n,), ascending; vectors_path their values, float32 shape
   (n, dim), row i of ids[i]; both crash-safe (vectors first). `table`
   is the name the psd saved ("JOB/TABLE") or its part after the job
   ("TABLE", when one table of dir ends so). ret_rows (may be NULL): n.
   Errors (err names the file): -ENOENT no dynamic-ps*.json in dir or no
   such table; -EBADMSG a manifest or data file damaged, missing or not
   what its manifest says; -EINVAL an ambiguous name; other I/O errors. */
ZDIST_EXPORT int zdist_dynexport_npy(const char *dir, const char *table, const char *ids_path,
                                     const char *vectors_path, uint64_t *ret_rows, zdist_error_t *err);
/* The same rows in memory: *ret_ids (ascending) and *ret_vectors (row i
   of ids[i], *ret_dim floats each), both the caller's to free, *ret_rows
   of them (a table with no rows: 0, and the pointers still to free).
   ret_dim may be NULL. The same errors. */
ZDIST_EXPORT int zdist_dynexport_read(const char *dir, const char *table, int64_t **ret_ids, float **ret_vectors,
                                      uint64_t *ret_rows, int64_t *ret_dim, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
