/* psd_dedup: a shard's exactly-once table, which decides whether a write was already applied.

   A write names itself one of two ways. A training step's write carries the
   job's step and its ordinal among that step's writes to the shard: the
   shard's ledger (psd_ledger.h) decides, whoever sends it. Any other write
   carries its client's id and a sequence number, increasing per client:
   the table remembers, per client, the highest sequence applied and a
   window of PSD_DEDUP_WINDOW below it (anything older counts as applied),
   for PSD_DEDUP_MAX_CLIENTS clients (the least recently used evicted
   beyond). A write with neither is not deduplicated.

   A write asks psd_dedup_admit first, which also makes room to record it,
   then applies, then psd_dedup_record, which cannot fail: an applied write
   is always recorded, a refused one never.

   Not thread-safe: the shard's write lock guards its table. */
#ifndef PSD_DEDUP_H
#define PSD_DEDUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "psd_ledger.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Clients remembered per shard for exactly-once writes (least recently used
   evicted beyond), and how many sequence numbers below the highest applied
   one are tracked individually. */
#define PSD_DEDUP_MAX_CLIENTS 1024
#define PSD_DEDUP_WINDOW 64
/* Positive return of a write that was a retransmission: acknowledged, not
   applied again. */
#define PSD_DUPLICATE 1

/* What a shard remembers of one client for exactly-once writes: the
   highest sequence applied, and bit i of window set when sequence
   highest - 1 - i was applied (older ones count as applied). */
typedef struct {
    uint64_t client_id;
    uint64_t highest;
    uint64_t window;
} psd_dedup_t;

/* True when (client, seq) counts as applied by this record. */
bool psd_dedup_seen(const psd_dedup_t *d, uint64_t seq);

typedef struct _psd_dedup_table_t psd_dedup_table_t;

/* A table holding the first PSD_DEDUP_MAX_CLIENTS records of list (n may
   be 0) with a client id other than 0, and an empty ledger: what a shard
   starts with, or what a restore swaps into it (so the swap cannot fail).
   NULL when out of memory. */
psd_dedup_table_t *psd_dedup_table_new(const psd_dedup_t *list, size_t n);
void psd_dedup_table_destroy(psd_dedup_table_t **self_p);
/* Forgets every client and step: the table of a shard whose values were
   replaced without one. Cannot fail. */
void psd_dedup_table_clear(psd_dedup_table_t *self);
/* The table's ledger of steps becomes *ledger (taken; *ledger emptied). */
void psd_dedup_table_set_ledger(psd_dedup_table_t *self, psd_ledger_t *ledger);
/* The ledger of steps applied (borrowed, valid while the table is). */
const psd_ledger_t *psd_dedup_table_ledger(const psd_dedup_table_t *self);
/* Clients remembered, and client i (< the count) of them. */
size_t psd_dedup_table_size(const psd_dedup_table_t *self);
void psd_dedup_table_get(const psd_dedup_table_t *self, size_t i, psd_dedup_t *ret);

/* A write's identity: by step when job_step is not 0, else by client when
   client_id is not 0, else none. admit fills the rest for the record. */
typedef struct {
    uint64_t job_step;
    uint32_t step_write;
    uint64_t client_id;
    uint64_t sequence;
    size_t client; /* set by psd_dedup_admit: the client's entry, or SIZE_MAX */
} psd_dedup_key_t;

/* Whether the write *key names may be applied: 0 (room made to record it),
   PSD_DUPLICATE (already applied: acknowledge it, apply nothing) or
   -ENOMEM. A client seen for the first time is remembered either way. */
int psd_dedup_admit(psd_dedup_table_t *self, psd_dedup_key_t *key);
/* Records the write admitted with key as applied. Cannot fail. */
void psd_dedup_record(psd_dedup_table_t *self, const psd_dedup_key_t *key);

#ifdef __cplusplus
}
#endif
#endif
