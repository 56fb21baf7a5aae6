/* psd_ckpt_state: a shard's exactly-once record (its dedup table and step ledger) as a checkpoint keeps it.

   psd_ckpt writes it with each fixed shard's file ("dedup", "steps" in
   its manifest entry); a dynamic table's part saves the same two as the
   "state" of its table (psd_ckpt_dyn.c). A restore gathering rows from
   several files keeps what every one of them counts as applied. */
#ifndef PSD_CKPT_STATE_H
#define PSD_CKPT_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "psd_dedup.h"
#include "psd_ledger.h"
#include "psd_shard.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* At most this many files' records are intersected; more: none kept. */
#define PSD_CKPT_STATE_MAX_SOURCES 64

/* One file's record, parsed. */
typedef struct {
    psd_dedup_t *dedup;
    size_t ndedup;
    psd_ledger_t ledger;
} psd_ckpt_state_t;

/* The shard's exactly-once table, [client, highest, window] in 16 hex
   digits each, while its view is held; an empty array unless `fill`. */
json_t *psd_ckpt_state_dedup_json(psd_shard_t *shard, const psd_shard_view_t *view, bool fill);
/* The steps a shard applied: {"base", "words", "top", "extra_floor",
   "extra"}; NULL when empty. */
json_t *psd_ckpt_state_ledger_json(const psd_ledger_t *l);
/* Parses a "dedup" and a "steps" (either NULL: absent, empty) into st
   (zeroed by the caller); -EBADMSG naming `where` (the manifest), or
   -ENOMEM; st is cleared on error. */
int psd_ckpt_state_parse(json_t *dedup, json_t *steps, psd_ckpt_state_t *st, const char *where,
                         zdist_error_t *err);
void psd_ckpt_state_clear(psd_ckpt_state_t *st);
/* A new exactly-once table holding what every one of the nsrc records
   counts as applied (a client missing from one is not kept); nsrc 0 or
   above PSD_CKPT_STATE_MAX_SOURCES: an empty table. -ENOMEM. */
int psd_ckpt_state_intersect(const psd_ckpt_state_t *const *src, size_t nsrc, psd_dedup_table_t **ret,
                             zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
