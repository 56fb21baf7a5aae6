/* zdist wstate: a worker's variables in a checkpoint (multi_worker_mirrored's, `zdist run --save`'s), saved the way psd checkpoints are. */
#ifndef ZDIST_WSTATE_H
#define ZDIST_WSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/tensor.h"

/* Format (version 1), the psd checkpoint's family (psd/psd_ckpt.h): in the
   checkpoint directory,
     workers-state.bin       the tensors' bytes one after the other, raw
                             little-endian (variables, then their slots, as
                             GET_STATE gave them)
     manifest-workers.json   written last: {"format": "zdist-worker-state",
                             "version": 1, "step": S, "iterations": I,
                             "file": "workers-state.bin", "bytes": B,
                             "crc32": C, "tensors": [{"name", "dtype",
                             "shape": [..], "offset", "bytes"}]}
   Both through zdist_file_write (temp file, fsync, rename, directory
   fsync); the coordinator's manifest.json, written after them, makes the
   checkpoint complete. */
#define ZDIST_WSTATE_DATA "workers-state.bin"
#define ZDIST_WSTATE_MANIFEST "manifest-workers.json"

typedef struct {
    int64_t step, iterations;
    size_t n;
    zdist_tensor_t *tensors; /* names and data owned by the state */
    void *data;
} zdist_wstate_t;

/* Saves n tensors (any data dtype) as the state of `step` into dir, which
   exists. ret_bytes (may be NULL): the data's size. Negative errno with err
   naming the file; an earlier state in dir stays whole on failure. */
ZDIST_EXPORT int zdist_wstate_save(const char *dir, int64_t step, int64_t iterations, const zdist_tensor_t *tensors,
                      size_t n, uint64_t *ret_bytes, zdist_error_t *err);
/* Loads the state saved in dir into *ret (release it). -EBADMSG when a file
   is missing, truncated, fails its CRC (the data's, or the manifest's own
   "manifest_crc32") or does not describe the data, with err naming that
   file (the coordinator then sets the checkpoint aside and resumes from the
   one before); -ENOMEM. */
ZDIST_EXPORT int zdist_wstate_load(const char *dir, zdist_wstate_t *ret, zdist_error_t *err);
/* NULL-safe; zeroes *state. */
ZDIST_EXPORT void zdist_wstate_release(zdist_wstate_t *state);

#endif
