/* psd_dyntable_npy: export-embedding's file format, a dynamic table's ids and vectors as a .npy pair.

   What serving needs of a trained table, in a format numpy (and every
   tool that reads .npy) loads as it is. Not thread-safe: the table's
   owner calls it. */
#ifndef PSD_DYNTABLE_NPY_H
#define PSD_DYNTABLE_NPY_H

#include <stdint.h>

#include "psd_dyntable.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* export-embedding's format: a pair of NumPy .npy files (format 1.0,
   numpy.load reads them): ids_path holds the row ids, int64 ('<i8')
   shape (n,), ascending; vectors_path their values, float32 ('<f4')
   shape (n, dim), C order, row i the values of ids[i]. Both written
   crash-safe. Slots and steps are not exported (serving needs none).
   ret_rows (may be NULL) receives n. */
int psd_dyntable_npy_write(psd_dyntable_t *table, const char *ids_path, const char *vectors_path,
                           uint64_t *ret_rows, zdist_error_t *err);

/* The same from a checkpoint, without a psd: table `name`'s rows of
   every saving ps task in dir (psd_dyntable_ckpt's files), gathered as
   onto one task, by libzdist's reader (zdist_dynexport_npy, the one
   `zdist export-embedding` uses). -ENOENT when the table is not in the
   checkpoint, -EBADMSG when a file of its chain is damaged. */
int psd_dyntable_npy_from_ckpt(const char *dir, const char *name, const char *ids_path,
                               const char *vectors_path, uint64_t *ret_rows, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
