/* zdist ckpt: a checkpoint's variables read whole, whichever strategy saved it (psd shards merged, or a worker's state). */
#ifndef ZDIST_CKPT_H
#define ZDIST_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A checkpoint directory (ckpt-STEP/) holds either the ps tasks' shards
   (manifest-ps*.json, psd/psd_ckpt.h's format version 1: parameter_server)
   or one worker's state (manifest-workers.json, zdist/wstate.h:
   multi_worker_mirrored, tpu across workers, `zdist run --save`). Both are
   read here for programs outside the daemons (`zdist export`): every file's
   CRC-32 checked, the ps shards' rows gathered by global row range into
   whole variables. Optimizer slots are left out. */

#define ZDIST_CKPT_FORMAT_VERSION 1

typedef struct {
    char *name;          /* without the job's namespace ("conv2d/kernel") */
    zdist_shape_t shape; /* as saved (a worker's state saves variables flat) */
    int64_t n;
    float *values;
} zdist_ckpt_var_t;

typedef struct {
    int64_t step;
    char *job_id; /* the coordinator's manifest.json's job_id (NULL when absent) */
    size_t n;
    zdist_ckpt_var_t *vars;
} zdist_ckpt_t;

/* Loads the checkpoint in dir into *ret (zeroed first; release it). psd
   variables are named "JOB_ID/NAME" on the ps tasks: the namespace (the
   job_id of the coordinator's manifest.json) is taken off. Errors name the file: -ENOENT (no manifest, or a
   variable's rows missing), -EPROTO (a manifest of another format or
   version: "written by another zdist version"), -EBADMSG (a file damaged,
   truncated or inconsistent with its manifest), -ENOMEM. */
ZDIST_EXPORT int zdist_ckpt_load(const char *dir, zdist_ckpt_t *ret, zdist_error_t *err);
/* The variable named `name`, or NULL. */
ZDIST_EXPORT const zdist_ckpt_var_t *zdist_ckpt_find(const zdist_ckpt_t *ckpt, const char *name);
/* NULL-safe; zeroes *ckpt. */
ZDIST_EXPORT void zdist_ckpt_release(zdist_ckpt_t *ckpt);

/* The checkpoints under root (its ckpt-STEP/ directories; with `complete`
   only those holding manifest.json, which is written last; ckpt-STEP.damaged
   and temporaries skipped): how many there are, the newest min(that, max)
   of their steps into steps[] in ascending order; -errno when root cannot
   be read, -ENOMEM. */
ZDIST_EXPORT int zdist_ckpt_list(const char *root, bool complete, int64_t *steps, int max);
/* The newest complete checkpoint under root (ckpt-STEP/ with its
   manifest.json, which is written last; ckpt-STEP.damaged and temporaries
   skipped): its step, or -ENOENT. */
ZDIST_EXPORT int64_t zdist_ckpt_newest(const char *root);
/* The checkpoint `path` names into ret (size bytes): path itself when it
   holds a manifest (manifest.json, manifest-workers.json or
   manifest-ps*.json), else its newest complete ckpt-STEP/ (a job's
   directory, a checkpoint.dir, `zdist run --save`'s DIR). -ENOENT naming
   path when neither, -ENAMETOOLONG. */
ZDIST_EXPORT int zdist_ckpt_locate(const char *path, char *ret, size_t size, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
