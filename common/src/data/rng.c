/* zdist random numbers for the input pipelines: xoshiro256** seeded by splitmix64. */
#include <math.h>
#include <stdint.h>

#include "rng.h"

static uint64_t
s_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void
zdist_rng_seed_(zdist_rng_t *rng, uint64_t seed, uint64_t stream, uint64_t index)
{
    uint64_t x = seed;
    uint64_t a = s_splitmix64(&x) ^ stream;
    a = s_splitmix64(&a) ^ index;
    for (int i = 0; i < 4; i++)
        rng->s[i] = s_splitmix64(&a);
}

static uint64_t
s_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t
zdist_rng_next_(zdist_rng_t *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = s_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s_rotl(s[3], 45);
    return result;
}

uint64_t
zdist_rng_below_(zdist_rng_t *rng, uint64_t bound)
{
    /* Lemire's multiply-and-reject: unbiased without a division per draw. */
    __uint128_t m = (__uint128_t) zdist_rng_next_(rng) * bound;
    uint64_t low = (uint64_t) m;
    if (low < bound) {
        uint64_t threshold = -bound % bound;
        while (low < threshold) {
            m = (__uint128_t) zdist_rng_next_(rng) * bound;
            low = (uint64_t) m;
        }
    }
    return (uint64_t) (m >> 64);
}

double
zdist_rng_normal_(zdist_rng_t *rng)
{
    /* Box-Muller; u1 in (0, 1] so the log is finite. */
    double u1 = ((double) (zdist_rng_next_(rng) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (double) (zdist_rng_next_(rng) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
