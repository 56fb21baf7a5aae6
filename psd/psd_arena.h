/* psd_arena: rows of one size in chunks that never move, the big ones on huge pages.

   A dynamic embedding table (psd_dyntable) keeps its rows here. The
   invariants: a row's address stays the same from its allocation until it
   is freed (chunks are never moved, shrunk or freed before the arena), so
   a caller may hold a row's pointer across later allocations; row numbers
   are dense (0 .. used-1), freed ones reused last-freed first.

   The first PSD_ARENA_SMALL_CHUNKS chunks hold about 64 KiB each, so a
   small table stays small; later ones are 2 MiB, aligned and advised as
   transparent huge pages (MADV_HUGEPAGE): a lookup of random rows then
   misses the TLB once per 2 MiB instead of once per 4 KiB, which is most
   of a random row's cost once a table outgrows the caches. A row never
   straddles two chunks; at most one row's bytes per chunk go unused.

   psd_arena_map and psd_arena_unmap give the same huge pages to another
   big table (the dynamic table's index), zeroed.

   Not thread-safe: its owner's lock or thread guards it. */
#ifndef PSD_ARENA_H
#define PSD_ARENA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PSD_ARENA_SMALL_CHUNKS 32
#define PSD_ARENA_SMALL_BYTES ((size_t) 64 << 10)
#define PSD_ARENA_BIG_BYTES ((size_t) 2 << 20)
#define PSD_ARENA_NONE UINT32_MAX

/* n / d for any 32-bit n without a division (Lemire's fastdiv). */
typedef struct {
    uint64_t m; /* UINT64_MAX / d + 1; unused when d is 1 */
    uint32_t d;
} psd_arena_div_t;

typedef struct {
    size_t stride;             /* bytes per row, a multiple of 8 */
    psd_arena_div_t small, big; /* rows per small and per big chunk */
    uint32_t small_rows;       /* rows in all the small chunks */
    char **chunks;
    size_t nchunks, chunks_cap;
    uint32_t used;      /* rows handed out (live or freed) */
    uint32_t free_head; /* a freed row + 1; 0: none */
    uint64_t bytes;     /* held: chunks and the chunk list */
} psd_arena_t;

/* An empty arena of rows of `stride` bytes (8 .. 16 MiB, a multiple of 8). */
void psd_arena_init(psd_arena_t *self, size_t stride);
/* Frees every chunk; the arena is empty (and may be initialized again). */
void psd_arena_clear(psd_arena_t *self);

static inline uint32_t
psd_arena_divide(const psd_arena_div_t *div, uint32_t n)
{
    return div->d == 1 ? n : (uint32_t) (((unsigned __int128) div->m * n) >> 64);
}

/* Row r (< used): its first byte. */
static inline char *
psd_arena_row(const psd_arena_t *self, uint32_t r)
{
    if (r < self->small_rows) {
        uint32_t c = psd_arena_divide(&self->small, r);
        return self->chunks[c] + (size_t) (r - c * self->small.d) * self->stride;
    }
    uint32_t x = r - self->small_rows, c = psd_arena_divide(&self->big, x);
    return self->chunks[PSD_ARENA_SMALL_CHUNKS + c] + (size_t) (x - c * self->big.d) * self->stride;
}

/* A row: a freed one, or a new one, taking a new chunk when the last is
   full, if its bytes (and the chunk list's growth) are at most `room`
   (UINT64_MAX: no bound). PSD_ARENA_NONE with *ret_rc -ENOSPC (past room
   or 2^32 - 2^22 rows) or -ENOMEM. Its bytes are the caller's, but for
   the first 4 of a row it frees. */
uint32_t psd_arena_alloc(psd_arena_t *self, uint64_t room, int *ret_rc);
/* Gives row r back; its first 4 bytes become the arena's link. */
void psd_arena_free(psd_arena_t *self, uint32_t r);

/* bytes of zeros, on huge pages when bytes >= PSD_ARENA_BIG_BYTES (then
   the mapping is rounded up to whole huge pages: psd_arena_mapped_bytes).
   NULL when out of memory. */
void *psd_arena_map(size_t bytes);
/* What psd_arena_map(bytes) holds. */
size_t psd_arena_mapped_bytes(size_t bytes);
/* Frees what psd_arena_map(bytes) returned (NULL: nothing). */
void psd_arena_unmap(void *p, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
