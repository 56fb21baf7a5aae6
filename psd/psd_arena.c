/* psd_arena: fixed-size rows in chunks that never move (small ones first, then 2 MiB huge pages). */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "psd_arena.h"

static psd_arena_div_t
s_div(uint32_t d)
{
    return (psd_arena_div_t){.m = d > 1 ? UINT64_MAX / d + 1 : 0, .d = d};
}

void
psd_arena_init(psd_arena_t *self, size_t stride)
{
    assert(stride >= 8 && stride % 8 == 0 && stride <= PSD_ARENA_BIG_BYTES * 8);
    size_t small = PSD_ARENA_SMALL_BYTES / stride, big = PSD_ARENA_BIG_BYTES / stride;
    *self = (psd_arena_t){
        .stride = stride,
        .small = s_div((uint32_t) (small ? small : 1)),
        .big = s_div((uint32_t) (big ? big : 1)),
    };
    self->small_rows = self->small.d * PSD_ARENA_SMALL_CHUNKS;
}

size_t
psd_arena_mapped_bytes(size_t bytes)
{
    if (bytes < PSD_ARENA_BIG_BYTES)
        return bytes;
    return (bytes + PSD_ARENA_BIG_BYTES - 1) & ~(PSD_ARENA_BIG_BYTES - 1);
}

void *
psd_arena_map(size_t bytes)
{
    if (bytes < PSD_ARENA_BIG_BYTES)
        return calloc(1, bytes ? bytes : 1);
    size_t size = psd_arena_mapped_bytes(bytes), slack = PSD_ARENA_BIG_BYTES;
    /* Map one huge page more, then trim both ends to a 2 MiB boundary. */
    char *p = mmap(NULL, size + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    size_t off = (uintptr_t) p & (PSD_ARENA_BIG_BYTES - 1);
    size_t head = off ? PSD_ARENA_BIG_BYTES - off : 0;
    if (head)
        munmap(p, head);
    if (slack - head)
        munmap(p + head + size, slack - head);
    p += head;
#ifdef MADV_HUGEPAGE
    (void) madvise(p, size, MADV_HUGEPAGE); /* advice: without it the pages are 4 KiB */
#endif
    return p;
}

void
psd_arena_unmap(void *p, size_t bytes)
{
    if (!p)
        return;
    if (bytes < PSD_ARENA_BIG_BYTES)
        free(p);
    else
        munmap(p, psd_arena_mapped_bytes(bytes));
}

static size_t
s_chunk_bytes(const psd_arena_t *self, size_t c)
{
    return c < PSD_ARENA_SMALL_CHUNKS ? (size_t) self->small.d * self->stride : PSD_ARENA_BIG_BYTES;
}

void
psd_arena_clear(psd_arena_t *self)
{
    for (size_t c = 0; c < self->nchunks; c++)
        psd_arena_unmap(self->chunks[c], s_chunk_bytes(self, c));
    free(self->chunks);
    psd_arena_init(self, self->stride);
}

/* Rows the chunks hold. */
static uint64_t
s_capacity(const psd_arena_t *self)
{
    if (self->nchunks <= PSD_ARENA_SMALL_CHUNKS)
        return (uint64_t) self->nchunks * self->small.d;
    return self->small_rows + (uint64_t) (self->nchunks - PSD_ARENA_SMALL_CHUNKS) * self->big.d;
}

uint32_t
psd_arena_alloc(psd_arena_t *self, uint64_t room, int *ret_rc)
{
    if (self->free_head) {
        uint32_t r = self->free_head - 1;
        memcpy(&self->free_head, psd_arena_row(self, r), sizeof self->free_head);
        return r;
    }
    if (self->used < s_capacity(self))
        return self->used++;
    size_t c = self->nchunks, bytes = s_chunk_bytes(self, c);
    size_t grow = c == self->chunks_cap ? (self->chunks_cap ? self->chunks_cap : 64) : 0;
    uint32_t rows = c < PSD_ARENA_SMALL_CHUNKS ? self->small.d : self->big.d;
    if (s_capacity(self) + rows > UINT32_MAX - (1u << 22) || bytes + grow * sizeof(char *) > room) {
        *ret_rc = -ENOSPC;
        return PSD_ARENA_NONE;
    }
    if (grow) {
        char **chunks = realloc(self->chunks, (self->chunks_cap + grow) * sizeof *chunks);
        if (!chunks) {
            *ret_rc = -ENOMEM;
            return PSD_ARENA_NONE;
        }
        self->chunks = chunks;
        self->chunks_cap += grow;
        self->bytes += grow * sizeof(char *);
    }
    char *chunk = c < PSD_ARENA_SMALL_CHUNKS ? malloc(bytes) : psd_arena_map(bytes);
    if (!chunk) {
        *ret_rc = -ENOMEM;
        return PSD_ARENA_NONE;
    }
    self->chunks[self->nchunks++] = chunk;
    self->bytes += bytes;
    return self->used++;
}

void
psd_arena_free(psd_arena_t *self, uint32_t r)
{
    memcpy(psd_arena_row(self, r), &self->free_head, sizeof self->free_head);
    self->free_head = r + 1;
}
