/* zdist random numbers of the input pipelines (internal): counter-based,
   so an example's randomness depends on its seed, stream and index only. */
#ifndef ZDIST_RNG_H
#define ZDIST_RNG_H

#include <stdint.h>

/* Counter-based random numbers: xoshiro256** seeded by splitmix64. */
typedef struct {
    uint64_t s[4];
} zdist_rng_t;
void zdist_rng_seed_(zdist_rng_t *rng, uint64_t seed, uint64_t stream, uint64_t index);
uint64_t zdist_rng_next_(zdist_rng_t *rng);
/* Uniform in [0, bound), unbiased; bound >= 1. */
uint64_t zdist_rng_below_(zdist_rng_t *rng, uint64_t bound);
/* N(0, 1). */
double zdist_rng_normal_(zdist_rng_t *rng);

#endif
