/* psd_ledger: which of a job's steps a shard has applied, for writes deduplicated by step identity.

   Under parameter_server a closure of steps may run twice: a worker lost
   (killed, frozen, cut off) while its closure is in flight has its closure
   re-run on another worker by the ClusterCoordinator, although the lost
   worker may already have pushed some of its steps. Every write a step
   makes carries the job's global number of that step and, for the rare
   step that writes one shard more than once, the write's ordinal among
   that step's writes to the shard (0 for the first). A shard applies a
   (step, ordinal) once, whoever sends it: a re-run's write is acknowledged
   as a duplicate, a write that never arrived is applied.

   Ordinal 0 is kept as a bitmap of steps above a floor (every step below
   it counts as applied); the floor moves up over steps that are applied
   without a gap, so a shard every step writes keeps a few words. Steps that
   skip the shard (sparse rows) leave gaps: the bitmap then spans at most
   PSD_LEDGER_WINDOW steps below the highest applied one, and an older gap
   counts as applied (a re-run arrives within the coordinator's closure
   deadline, far inside the window). Ordinals >= 1 are listed one by one
   within the same window.

   Not thread-safe: the shard's lock guards it. */
#ifndef PSD_LEDGER_H
#define PSD_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Steps tracked one by one below the highest applied one (a multiple of 64). */
#define PSD_LEDGER_WINDOW ((uint64_t) 1 << 18)
/* Writes with an ordinal >= 1 remembered (older ones count as applied). */
#define PSD_LEDGER_MAX_EXTRA 65536

typedef struct {
    uint64_t step;
    uint32_t ordinal;
} psd_ledger_key_t;

typedef struct {
    uint64_t base;   /* word index of words[0]: it holds steps base*64 .. base*64+63 */
    uint64_t *words; /* bit b of words[i]: step (base + i) * 64 + b applied; steps below base*64 count as applied */
    size_t nwords, cap;
    uint64_t top;    /* highest step applied + 1; 0 when none */
    psd_ledger_key_t *extra; /* ordinals >= 1 applied, at steps >= extra_floor */
    size_t nextra, extra_cap;
    uint64_t extra_floor; /* ordinals >= 1 of steps below count as applied */
} psd_ledger_t;

/* An empty ledger is all zeros. Frees its buffers and empties it. */
void psd_ledger_clear(psd_ledger_t *self);
/* True when (step, ordinal) counts as applied. Step 0 is never tracked. */
bool psd_ledger_seen(const psd_ledger_t *self, uint64_t step, uint32_t ordinal);
/* Makes room to record (step, ordinal), so that the record cannot fail:
   what a write calls before it applies anything. 0 or -ENOMEM. */
int psd_ledger_reserve(psd_ledger_t *self, uint64_t step, uint32_t ordinal);
/* Records (step, ordinal) as applied; cannot fail after a reserve of the
   same key. -ENOMEM leaves the ledger as it was. */
int psd_ledger_record(psd_ledger_t *self, uint64_t step, uint32_t ordinal);
/* The first step not yet counted as applied (every one below is). */
uint64_t psd_ledger_floor(const psd_ledger_t *self);

/* The writes every ledger of srcs[0..n) counts as applied (a reshard: a
   step seen by only some of the rows is applied again, not half lost). */
int psd_ledger_intersect(psd_ledger_t *dst, const psd_ledger_t *const *srcs, size_t n);

#ifdef __cplusplus
}
#endif
#endif
