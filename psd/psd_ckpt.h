/* psd_ckpt: atomic, CRC-checked checkpoints of a psd's shards, restorable onto any sharding. */
#ifndef PSD_CKPT_H
#define PSD_CKPT_H

#include <stdint.h>

#include "psd_store.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Format (version 1). A checkpoint directory holds, per saving ps task N:
     <var>__rows_<start>_<end>__step_<step>_<nonce>.bin   one per shard:
         the shard's values, then each optimizer slot (same size), raw
         little-endian row-major; <var> is the name with bytes outside
         [A-Za-z0-9._-] written %XX (long names shortened plus a hash)
     manifest-ps<N>.json   written last, atomically:
         {"format": "zdist-psd-checkpoint", "version": 1, "step": S,
          "ps_task": N, "variables": [{"name", "dtype", "shape": [..],
            "files": [{"file", "shard_index", "row_start", "row_end",
                       "bytes", "crc32",
                       "optimizer": {"kind", "step", "slots": [names],
                                     "config": {hyperparameters}},
                       "dedup": [[client, highest, window], ...]}]}],
          "crc32": C}
         "dedup" is the shard's exactly-once table as of the values in the
         file (taken under the same lock), each number 16 hex digits; "crc32"
         is the CRC-32 of the manifest's canonical JSON (compact, keys
         sorted) without "crc32". Both are absent in older checkpoints,
         which restore with an empty table and no manifest check.
   Every file is written to a temporary name, fsync'd and renamed; the
   directory is fsync'd before and after the manifest's rename. A crash
   (kill -9) at any point leaves the previous manifest and the files it
   names intact: new data files have new names (the nonce), and files of
   the previous manifest are removed only after the new one is in place.
   Several ps tasks may save into one shared directory, each writing its
   own files and manifest; a coordinator can later add its own top-level
   file (restore reads only manifest-ps*.json). For a checkpoint that all
   ps tasks agree on, give each step its own directory. */

/* Saves every shard of the store (values, slots, optimizer step) under
   `step` as ps task `ps_task`. Each shard is written under its read lock,
   so it is consistent per shard (writes to it wait meanwhile). Creates dir
   (one level) if missing. Negative errno with a message naming the file on
   I/O errors; the previous checkpoint in dir stays usable. */
int psd_ckpt_save(psd_store_t *store, const char *dir, int64_t step, int ps_task,
                  zdist_error_t *err);

/* Restores every shard of the store from all manifest-ps*.json in dir, by
   global row range: each shard's rows are gathered from whichever files
   overlap them, so any sharding restores onto any other. Slots are restored
   when the file's optimizer kind matches the shard's (else they start
   fresh); a shard's step counter becomes the highest step of the files it
   read with that kind. Each shard's exactly-once table becomes the one
   saved with its rows (so a write retransmitted after a restart or a
   restore is a duplicate exactly when the restored values hold it; on a
   reshard a write counts as held only when every file it is gathered
   from holds it). Everything is read and verified into new buffers
   first and swapped in only when all succeeded, so on error nothing is
   changed. Errors (message names the file or variable):
     -EBADMSG  (DATA_LOSS) a manifest does not parse, fails its CRC-32 or
               is inconsistent,
               a listed file is missing, truncated or fails its CRC,
               manifests disagree on the step
     -ENOENT   no manifest in dir, or a variable (or some of its rows) of
               the store is not in the checkpoint
     -EINVAL   the checkpoint holds the variable with another dtype/shape
     -ENOMEM, or another negative errno from the file system.
   ret_step (may be NULL) receives the checkpoint's step on success. */
int psd_ckpt_restore(psd_store_t *store, const char *dir, int64_t *ret_step, zdist_error_t *err);

/* The same for the shards of one job (psd_shard_in_job: names "JOB/..."):
   a save writes only them (ret_bytes, may be NULL: their values and slots),
   a restore reads only them and leaves every other shard as it is — so
   each job checkpoints into its own directory and one job's restore never
   rolls back another's. The exactly-once tables travel with each shard as
   above. job NULL or "": every shard. full_every: the job's dynamic
   tables' full every this many saves (psd_ckpt_dyn_save; 0: as before). */
int psd_ckpt_save_job(psd_store_t *store, const char *dir, int64_t step, int ps_task, const char *job,
                      int full_every, uint64_t *ret_bytes, zdist_error_t *err);
int psd_ckpt_restore_job(psd_store_t *store, const char *dir, const char *job, int64_t *ret_step,
                         zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
