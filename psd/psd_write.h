/* psd_write: a write to a shard: assign, scatter or an optimizer step, applied exactly once.

   The write path (psd_write.c) reads in three stages under the shard's
   write lock: dedup (psd_dedup.h: was this write applied already?), copy
   on write (psd_buffer.h: a reply still holds the values? then write to
   another buffer), apply (the element kernels or zdist/optim.h's). */
#ifndef PSD_WRITE_H
#define PSD_WRITE_H

#include "psd_shard.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PSD_OP_ASSIGN = 1,      /* dense rows := data */
    PSD_OP_ASSIGN_ADD,      /* dense rows += data */
    PSD_OP_ASSIGN_SUB,      /* dense rows -= data */
    PSD_OP_SCATTER_ADD,     /* rows[ids[i]] += data[i] */
    PSD_OP_SCATTER_UPDATE,  /* rows[ids[i]] := data[i] (later duplicates win) */
    PSD_OP_APPLY_DENSE,     /* optimizer step with a dense gradient for rows */
    PSD_OP_APPLY_SPARSE,    /* optimizer step with gradient rows by id (summed) */
} psd_op_t;

/* One write. Data is row-major, little-endian, of the shard's dtype:
   nrows x row bytes for dense ops, nids x row bytes for id ops. */
typedef struct {
    psd_op_t op;
    uint64_t client_id; /* 0: not deduplicated */
    uint64_t sequence;  /* per client, increasing */
    uint64_t job_step;  /* the job's step that writes (psd_ledger.h); 0: deduplicated by client and sequence */
    uint32_t step_write; /* its ordinal among that step's writes to the shard */
    zdist_dtype_t dtype;
    int64_t row_start; /* dense ops: first global row */
    int64_t nrows;     /* dense ops: rows, or PSD_WHOLE_SHARD */
    bool more_parts;   /* APPLY_DENSE: a part of a push, more follow; the step advances with the last */
    const int64_t *ids;
    size_t nids;
    const void *data;
    size_t nbytes;
} psd_write_t;

/* Validates everything, then applies the write under the shard's write
   lock. Returns 0 when applied, PSD_DUPLICATE when (job_step, step_write)
   was already applied to this shard (psd_ledger.h) or, for a write without
   a job step, when (client_id, sequence) was (the highest sequence plus a
   window of PSD_DEDUP_WINDOW below it are remembered; anything older
   counts as applied), or a negative errno with a message naming expected vs got:
   -EINVAL for a wrong dtype, length, row range or id, or an optimizer op on
   an integer shard; -ENOMEM. A refused write changes nothing and is not
   recorded, so it may be retried. */
int psd_shard_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err);
/* The checks of psd_shard_write alone (0 or its -EINVAL and message): what
   a write of several shards runs on all of them before it applies any. */
int psd_shard_check_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
