/* psd_dyntable_ckpt: dynamic tables' checkpoints that scale with change: fulls every K saves, deltas between.

   One ps task's dynamic tables (psd_dyntable) of one job are saved
   together, by the actor thread that owns them (not thread-safe, as the
   tables). Each save first evicts, at the save's global step, every row
   that qualifies (psd_dyntable_evict: by its last update step and its
   values' L2 norm only, so every run evicts the same rows), then writes
   per table either a full file (every row) or a delta (rows created or
   changed since the previous save, with values, slots and steps, and
   the ids evicted since then as tombstones): a full at the first save,
   every full_every-th save after it, and whenever the chain since the
   last full cannot be continued (its files gone or changed, a table
   added, a directory not beside this one). After a save succeeds every
   table is marked (psd_dyntable_mark); after one fails nothing is, so
   the next save writes what this one did not.

   Files (raw little-endian, documented in zdist/dynfile.h: rows, and
   since version 2 the ids counted but not yet admitted, as DeepRec keeps
   its counts), in the
   save's directory, each written crash-safe (temp, fsync, rename,
   directory fsync) with its CRC-32 in the manifest:
     dyn-ps<N>-t<I>-<STEP>-full-<NONCE>.bin  / ...-delta-<NONCE>.bin
     dynamic-ps<N>.json   written last, sealed with its own CRC-32
                          (zdist_json_write_sealed):
       {"format": "zdist-psd-dynamic", "version": 1, "step": S,
        "ps_task": N, "num_ps": P, "needs": ["ckpt-100", ...],
        "tables": [{"name", "dim", "optimizer", "slots", "state" (the
                    caller's, optional),
                    "chain": [{"dir", "file", "kind": "full"|"delta",
                               "step", "bytes", "crc32", "rows",
                               "tombstones"}, ...]}]}
   A chain is the table's full and every delta after it, in order; "dir"
   is "." (this directory) or the name of a directory beside it (the
   coordinator's ckpt-STEP of an earlier save). "needs" lists those
   directories: whoever prunes old checkpoints must keep every directory
   a kept checkpoint's dynamic-ps*.json needs, or that checkpoint can no
   longer be restored. Files of an earlier manifest of the same
   directory that the new one no longer names are removed after it is
   in place (as psd_ckpt does). */
#ifndef PSD_DYNTABLE_CKPT_H
#define PSD_DYNTABLE_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "psd_dyntable.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A table and its name in the checkpoint (the psd's "JOB/TABLE"), both
   borrowed; state (borrowed, may be NULL): saved with the table in this
   task's manifest as its "state", what the caller must restore with the
   rows (the part's exactly-once table and step ledger, taken under the
   same lock as the rows); restore ignores it: see
   psd_dyntable_ckpt_describe. */
typedef struct {
    const char *name;
    psd_dyntable_t *table;
    json_t *state;
} psd_dyntable_ckpt_table_t;

/* The chain state of one ps task's tables of one job: which files the
   next delta continues. It lives as long as the tables; a new one (a
   restarted psd) starts with a full. */
typedef struct psd_dyntable_ckpt_t psd_dyntable_ckpt_t;

/* full_every: a full every this many saves (1: every save is full); NULL
   when out of memory or full_every < 1. */
psd_dyntable_ckpt_t *psd_dyntable_ckpt_new(int full_every);
/* From the next save on, a full every full_every saves (a chain already
   that long or longer ends at the next save); < 1 changes nothing. */
void psd_dyntable_ckpt_set_full_every(psd_dyntable_ckpt_t *self, int full_every);
/* NULL-safe, idempotent; nulls the pointer. The files stay. */
void psd_dyntable_ckpt_destroy(psd_dyntable_ckpt_t **self_p);

typedef struct {
    bool full;           /* this save wrote fulls (else deltas) */
    uint64_t rows;       /* rows written, over all tables */
    uint64_t tombstones; /* evicted ids written */
    uint64_t evicted;    /* rows this save evicted */
    uint64_t bytes;      /* bytes of its data files */
} psd_dyntable_ckpt_saved_t;

/* Evicts and saves the n tables (names distinct) as ps task ps_task of
   num_ps at global step `step` (>= 0) into dir (created, one level, if
   missing), as above. Every table of the job on this ps task goes in
   one call: a directory holds one manifest per ps task, so a second
   call into it replaces the first's (and removes its files). Several
   ps tasks may save into one directory. 0
   with ret (may be NULL) filled, or a negative errno with err naming the
   file: the files of this save are removed, the previous manifest of
   dir stays, no table is marked (the rows evicted stay evicted and are
   written as tombstones by the next save). */
int psd_dyntable_ckpt_save(psd_dyntable_ckpt_t *self, const psd_dyntable_ckpt_table_t *tables, size_t n,
                           const char *dir, int64_t step, int ps_task, int num_ps,
                           psd_dyntable_ckpt_saved_t *ret, zdist_error_t *err);

/* Restore: on a broken chain, restore the previous full instead. */
#define PSD_DYNTABLE_CKPT_FALLBACK 1u

typedef struct {
    int64_t step;   /* the checkpoint's step (the full's when fell_back) */
    bool fell_back; /* a delta was broken: the full's checkpoint was restored; why says which file */
    char why[512];
    uint64_t rows;    /* rows the tables hold now */
    uint64_t skipped; /* rows read that belong to other ps tasks */
    char from[4096];  /* the directory restored: dir, or the full's when fell_back */
} psd_dyntable_ckpt_restored_t;

/* Fills the n tables (new and empty, of the job's configuration) from
   every dynamic-ps*.json in dir, whichever ps tasks wrote them: each
   table's chain of each saving task is replayed in order (the full,
   then each delta: its tombstones removed, its rows put with their
   values, slots, optimizer step and last update step), keeping only the
   ids that zdist_partition_id_ps(id, num_ps) gives to ps_task, so a
   checkpoint of any number of ps tasks restores onto any other. Slots
   are restored when the file's optimizer is the table's (else they
   start at the optimizer's initial values). The deltas' CRCs are checked
   before anything is read into a table, the full's as it is read. Then
   every table is marked and self forgets its chain (the next save is a
   full). Errors (err names the file or table):
     -EBADMSG  a manifest does not parse or fails its CRC-32, manifests
               disagree on the step, a file is missing, truncated, not
               what its manifest says or fails its CRC-32 — a broken
               chain. With PSD_DYNTABLE_CKPT_FALLBACK a broken delta is
               not an error: the checkpoint whose save wrote that chain's
               full (in its directory beside dir) is restored instead,
               ret->fell_back set and ret->why naming the broken file.
               What is lost: every change saved after that full — up to
               full_every - 1 saves of every table of every task (the
               deltas before the broken one too: a checkpoint is one
               step for all tasks and for the job's fixed variables, so
               the caller restores those from the same step, ret->step).
     -ENOENT   no dynamic-ps*.json in dir, or a table is in none
     -EINVAL   a table's dim differs from the checkpoint's, bad ps_task
     -ENOSPC   a table's memory budget is too small for its rows
   On error the tables hold part of the checkpoint: destroy them (the
   caller keeps its old ones until a restore succeeds). ret may be NULL. */
int psd_dyntable_ckpt_restore(psd_dyntable_ckpt_t *self, const psd_dyntable_ckpt_table_t *tables, size_t n,
                              const char *dir, int ps_task, int num_ps, unsigned flags,
                              psd_dyntable_ckpt_restored_t *ret, zdist_error_t *err);

/* What dir holds of table `name`: its dim, and (ret_states may be NULL)
   a new JSON array of the "state" each saving task stored with it, in
   ps task order (null where none). A restore onto another number of ps
   tasks gathers every task's rows, so its state is what all of them
   agree on (as psd_ckpt intersects the exactly-once tables of the files
   a shard is gathered from). Read it from ret->from after a restore.
   -ENOENT when no manifest there holds the table; -EBADMSG as restore. */
int psd_dyntable_ckpt_describe(const char *dir, const char *name, int64_t *ret_dim, json_t **ret_states,
                               zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
