/* psd_ckpt_dyn: a job's dynamic embedding tables in the psd's checkpoints (psd_dyntable_ckpt behind
   psd_ckpt).

   psd_ckpt_save_job saves the fixed shards' manifest, then this: every
   dynamic part of the job on this psd in one psd_dyntable_ckpt_save (a
   full every K saves (the job file's checkpoint.full_every, default 10), deltas between; the save
   evicts at its step), each part under its write lock with its
   exactly-once record (psd_ckpt_state) as the table's "state". A restore
   reads new tables and records first (psd_ckpt_dyn_prepare), strictly
   (no fallback to a chain's full: a broken file is -EBADMSG, and the
   coordinator walks back to an older intact checkpoint), and swaps them
   in only when the fixed shards' restore succeeded too. */
#ifndef PSD_CKPT_DYN_H
#define PSD_CKPT_DYN_H

#include <stdint.h>

#include "psd_store.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Saves job's dynamic parts (none: nothing written) into dir at step as
   ps task ps_task, a full every full_every saves (0: as the job's chain
   has it, PSD_STORE_DYN_FULL_EVERY at first); *ret_bytes (may be NULL)
   gets the data files' bytes. Negative errno with err set; the previous
   dynamic-ps<N>.json stays. */
int psd_ckpt_dyn_save(psd_store_t *store, const char *dir, int64_t step, int ps_task, const char *job,
                      int full_every, uint64_t *ret_bytes, zdist_error_t *err);

typedef struct psd_ckpt_dyn_restore_t psd_ckpt_dyn_restore_t;

/* Reads job's dynamic parts from dir into new tables (*ret NULL when the
   job has none here). The checkpoint must be of `step` (the fixed
   shards'). Errors: -EBADMSG (DATA_LOSS) for anything missing, broken or
   inconsistent, including no dynamic-ps*.json in dir; -ENOMEM; -ENOSPC
   when the psd's --max-bytes cannot hold the new tables beside the old
   (both are held until the swap). Nothing of the store changes. */
int psd_ckpt_dyn_prepare(psd_store_t *store, const char *dir, const char *job, int64_t step,
                         psd_ckpt_dyn_restore_t **ret, zdist_error_t *err);
/* Swaps the prepared tables in (cannot fail) and frees *self_p; NULL-safe. */
void psd_ckpt_dyn_commit(psd_ckpt_dyn_restore_t **self_p);
/* Frees a prepared restore without swapping; NULL-safe. */
void psd_ckpt_dyn_abort(psd_ckpt_dyn_restore_t **self_p);

#ifdef __cplusplus
}
#endif
#endif
