/* psd_dyntable_file: one dynamic table's full or delta checkpoint file: its writer and reader.

   The format (version 2, with the table's admission counters; version 1
   files are read too) and its reader are libzdist's zdist/dynfile.h.

   A full holds every row of a table, a delta the rows changed since the
   table's mark and the ids evicted since (tombstones); psd_dyntable_ckpt
   chains them. Not thread-safe: the table's owner calls these. */
#ifndef PSD_DYNTABLE_FILE_H
#define PSD_DYNTABLE_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "psd_dyntable.h"
#include "zdist/dynfile.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PSD_DYNTABLE_FILE_FULL ZDIST_DYNFILE_FULL
#define PSD_DYNTABLE_FILE_DELTA ZDIST_DYNFILE_DELTA
/* The longest table name a file holds. */
#define PSD_DYNTABLE_FILE_NAME_MAX ZDIST_DYNFILE_NAME_MAX

/* One file, as a manifest names it (dir and file owned: psd_dyntable_file_clear frees them). */
typedef struct {
    char *dir;  /* its directory */
    char *file; /* its name in dir */
    int kind;   /* PSD_DYNTABLE_FILE_FULL or _DELTA */
    int64_t step;
    uint64_t bytes, rows, tombstones;
    uint32_t crc; /* CRC-32 of all its bytes */
} psd_dyntable_file_t;

void psd_dyntable_file_clear(psd_dyntable_file_t *f);

/* Writes dir/file crash-safe (zdist_file_out): table `name`'s every row
   and admission counter (full) or its rows and counters changed since the
   mark and its evicted ids (a delta), ascending, saved by ps task ps_task of num_ps at `step`. ret
   gets what a manifest records of it. Negative errno with err naming the
   file; nothing is left at its path then. The table is not marked. */
int psd_dyntable_file_write(psd_dyntable_t *table, const char *name, const char *dir, const char *file,
                            bool full, int64_t step, int ps_task, int num_ps, psd_dyntable_file_t *ret,
                            zdist_error_t *err);

/* What a file is read into: table NULL to check the file only. Ids that
   zdist_partition_id_ps(id, num_ps) gives another task than ps_task are
   skipped (counted); a tombstone removes the id's row. */
typedef struct {
    psd_dyntable_t *table;
    const char *name; /* the table the file must hold */
    int64_t dim;      /* and its dim */
    int ps_task, num_ps;
    uint64_t skipped;
} psd_dyntable_file_into_t;

/* Reads f through zdist_dynfile_read (its tombstones, then its rows, put
   with values, slots when the file's optimizer is the table's, optimizer
   and last update steps, then its admission counters)
   checking its length, header and footer against f and its CRC-32 once
   read. -EBADMSG naming the file (and `manifest`, which lists it) when it
   is missing, truncated, not what f says or fails its CRC-32 — after
   rows may already be in the table; -ENOSPC past the table's budget. */
int psd_dyntable_file_read(const psd_dyntable_file_t *f, const char *manifest, psd_dyntable_file_into_t *into,
                           zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
