/* zdist_dynfile: a dynamic embedding table's checkpoint data file (a full or a delta): its format and its one reader.

   Written by the psd (psd/psd_dyntable_file.c), named with its length and
   CRC-32 by a dynamic-ps<N>.json manifest (psd/psd_dyntable_ckpt.h); read
   by the psd's restore and by zdist_dynexport (`zdist export-embedding`)
   through zdist_dynfile_read, so both take the same format the same way.

   Raw little-endian:
     header, 64 bytes:
       0  "ZDDYNTB1"         8  u32 version (1 or 2)  12 u32 kind (1 full, 2 delta)
       16 i64 step           24 u32 dim               28 u32 slots per row
       32 u32 optimizer kind (zdist_optim_kind_t)     36 u32 saving ps task
       40 u32 its num_ps     44 u32 name length       48 u64 tombstones
       56 u64 pending (version 2; zero in version 1)
     the table's name, zero-padded to a multiple of 8;
     tombstones: that many i64 ids, ascending (a delta's ids evicted since
       the previous save: their rows or admission counters go; none in a
       full);
     rows, ascending by id, each: i64 id, u64 last update step,
       u32 optimizer step, u32 zero, f32 values[dim], then each slot's
       f32[dim];
     pending (version 2): that many admission counters of ids counted but
       not yet admitted (min_count > 1), ascending by id, each: i64 id,
       u32 occurrences, u32 zero, u64 global step last seen (a full: all
       of them; a delta: those counted since the previous save);
     footer, 16 bytes: u64 rows, "ZDDYNEND".
   Version 1 files (no pending counters) are read as ever. */
#ifndef ZDIST_DYNFILE_H
#define ZDIST_DYNFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZDIST_DYNFILE_MAGIC "ZDDYNTB1"
#define ZDIST_DYNFILE_END "ZDDYNEND"
#define ZDIST_DYNFILE_VERSION 2 /* written; 1 and 2 are read */
#define ZDIST_DYNFILE_HEAD_BYTES 64
#define ZDIST_DYNFILE_FOOT_BYTES 16
#define ZDIST_DYNFILE_PENDING_BYTES 24
#define ZDIST_DYNFILE_FULL 1
#define ZDIST_DYNFILE_DELTA 2
#define ZDIST_DYNFILE_NAME_MAX 4096

typedef struct {
    uint32_t version;
    int kind; /* ZDIST_DYNFILE_FULL or _DELTA */
    int64_t step;
    uint32_t dim, nslots, optim, ps_task, num_ps, name_len;
    uint64_t tombstones, pending;
    uint64_t rows; /* read: the rows its length holds (the footer is checked against it) */
} zdist_dynfile_head_t;

/* The 64 header bytes of h, as version ZDIST_DYNFILE_VERSION (h->rows is the footer's). */
ZDIST_EXPORT void zdist_dynfile_head_pack(const zdist_dynfile_head_t *h, unsigned char *out);
/* Bytes of one row record. */
ZDIST_EXPORT size_t zdist_dynfile_row_bytes(uint32_t dim, uint32_t nslots);

/* One row as read: borrowed until the callback returns. */
typedef struct {
    int64_t id;
    uint64_t last_step;
    uint32_t opt_step;
    const float *values;                       /* dim */
    const float *slots[ZDIST_OPTIM_MAX_SLOTS]; /* dim each; NULL past the file's nslots */
} zdist_dynfile_row_t;

/* What a read calls, in file order (each may be NULL): head once (its
   name, not terminated, name_len bytes), then each tombstone, row and
   pending counter. A negative return stops the read and is returned as
   it is (err untouched: the caller says why). */
typedef struct {
    void *arg;
    int (*head)(void *arg, const zdist_dynfile_head_t *h, const char *name);
    int (*tombstone)(void *arg, int64_t id);
    int (*row)(void *arg, const zdist_dynfile_row_t *row);
    int (*pending)(void *arg, int64_t id, uint32_t count, uint64_t last_seen);
} zdist_dynfile_visitor_t;

/* Reads the file at path, which its manifest says is `bytes` long with
   CRC-32 `crc`, in one pass (1 MiB at a time). -EBADMSG with err naming
   the file (and `manifest`, which lists it) when it is missing, of
   another length, not a dynamic table file of version 1 or 2, its parts
   do not add up to its length, its footer disagrees, or its CRC-32
   differs (known only once all is read: the callbacks have run by then);
   -ENOMEM, other I/O errors; or a callback's negative return. */
ZDIST_EXPORT int zdist_dynfile_read(const char *path, const char *manifest, uint64_t bytes, uint32_t crc,
                                    const zdist_dynfile_visitor_t *v, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
