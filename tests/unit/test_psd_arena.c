/* CUnit suite: psd_arena: rows that never move (small and huge-page chunks), reuse, the room bound. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "psd_arena.h"
#include "testutil.h"

static void
test_rows_stay(void)
{
    psd_arena_t a;
    psd_arena_init(&a, 4096); /* 16 rows a small chunk, 512 a big one */
    CU_ASSERT_EQUAL(a.small.d, 16);
    CU_ASSERT_EQUAL(a.big.d, 512);
    CU_ASSERT_EQUAL(a.small_rows, 16 * PSD_ARENA_SMALL_CHUNKS);
    enum { N = 2000 }; /* the small chunks, then three big ones */
    char **at = malloc(N * sizeof *at);
    int rc = 0;
    for (uint32_t i = 0; i < N; i++) {
        CU_ASSERT_EQUAL_FATAL(psd_arena_alloc(&a, UINT64_MAX, &rc), i);
        at[i] = psd_arena_row(&a, i);
        memset(at[i], (int) (i % 251), 4096);
    }
    CU_ASSERT_EQUAL(a.nchunks, PSD_ARENA_SMALL_CHUNKS + 3);
    CU_ASSERT_EQUAL(a.bytes, PSD_ARENA_SMALL_CHUNKS * 16 * 4096 + 3 * PSD_ARENA_BIG_BYTES
                                 + a.chunks_cap * sizeof(char *));
    /* Every row where it was, holding what was written; big chunks 2 MiB aligned. */
    for (uint32_t i = 0; i < N; i++) {
        CU_ASSERT_PTR_EQUAL(psd_arena_row(&a, i), at[i]);
        CU_ASSERT_EQUAL((unsigned char) at[i][0], i % 251);
        CU_ASSERT_EQUAL((unsigned char) at[i][4095], i % 251);
    }
    CU_ASSERT_EQUAL((uintptr_t) a.chunks[PSD_ARENA_SMALL_CHUNKS] % PSD_ARENA_BIG_BYTES, 0);
    CU_ASSERT_PTR_EQUAL(psd_arena_row(&a, a.small_rows), a.chunks[PSD_ARENA_SMALL_CHUNKS]);
    CU_ASSERT_PTR_EQUAL(psd_arena_row(&a, a.small_rows + 513), a.chunks[PSD_ARENA_SMALL_CHUNKS + 1] + 4096);
    /* Freed rows come back last-freed first; their bytes past the link are untouched. */
    psd_arena_free(&a, 7);
    psd_arena_free(&a, 1500);
    CU_ASSERT_EQUAL((unsigned char) at[1500][100], 1500 % 251);
    CU_ASSERT_EQUAL(psd_arena_alloc(&a, 0, &rc), 1500);
    CU_ASSERT_EQUAL(psd_arena_alloc(&a, 0, &rc), 7);
    /* A new chunk must fit the room. */
    uint64_t bytes = a.bytes;
    for (uint32_t i = N; i < 3 * 512 + a.small_rows; i++)
        CU_ASSERT_EQUAL(psd_arena_alloc(&a, 0, &rc), i); /* the last big chunk's free rows */
    CU_ASSERT_EQUAL(psd_arena_alloc(&a, PSD_ARENA_BIG_BYTES - 1, &rc), PSD_ARENA_NONE);
    CU_ASSERT_EQUAL(rc, -ENOSPC);
    CU_ASSERT_EQUAL(a.bytes, bytes);
    psd_arena_clear(&a);
    CU_ASSERT_EQUAL(a.nchunks, 0);
    CU_ASSERT_EQUAL(a.bytes, 0);
    CU_ASSERT_EQUAL(a.stride, 4096);
    free(at);
}

static void
test_map(void)
{
    size_t sizes[] = {0, 100, PSD_ARENA_BIG_BYTES, 3 * PSD_ARENA_BIG_BYTES + 5};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned char *p = psd_arena_map(sizes[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT(psd_arena_mapped_bytes(sizes[k]) >= sizes[k]);
        size_t nz = 0;
        for (size_t i = 0; i < sizes[k]; i += 4093)
            nz += p[i] != 0;
        CU_ASSERT_EQUAL(nz, 0);
        if (sizes[k] >= PSD_ARENA_BIG_BYTES) {
            CU_ASSERT_EQUAL((uintptr_t) p % PSD_ARENA_BIG_BYTES, 0);
            CU_ASSERT_EQUAL(psd_arena_mapped_bytes(sizes[k]) % PSD_ARENA_BIG_BYTES, 0);
        }
        if (sizes[k])
            p[sizes[k] - 1] = 1;
        psd_arena_unmap(p, sizes[k]);
    }
    psd_arena_unmap(NULL, 5);
    /* A row bigger than a small chunk: one row a chunk. */
    psd_arena_t a;
    psd_arena_init(&a, PSD_ARENA_SMALL_BYTES * 2);
    CU_ASSERT_EQUAL(a.small.d, 1);
    CU_ASSERT_EQUAL(a.big.d, 16);
    int rc = 0;
    for (uint32_t i = 0; i < a.small_rows + 20; i++)
        CU_ASSERT_EQUAL(psd_arena_alloc(&a, UINT64_MAX, &rc), i);
    CU_ASSERT_PTR_EQUAL(psd_arena_row(&a, 3), a.chunks[3]);
    CU_ASSERT_PTR_EQUAL(psd_arena_row(&a, a.small_rows + 17), a.chunks[PSD_ARENA_SMALL_CHUNKS + 1] + a.stride);
    psd_arena_clear(&a);
}

void
zdist_test_psd_arena_register(void)
{
    ZDIST_SUITE("psd_arena",
                {"rows stay put across small and huge-page chunks; reuse; the room bound", test_rows_stay},
                {"huge-page mappings: zeroed, aligned; rows larger than a small chunk", test_map});
}
