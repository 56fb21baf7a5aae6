/* A latency histogram of fixed buckets: bucketing and quantiles. */
#include <math.h>

#include "wire/latency.h"

/* Bucket 1 + 4*floor(log2 us) + the next two bits: no floating point on
   the request path. */
int
zdist_latency_bucket(int64_t us)
{
    if (us < 1)
        return 0;
    int octave = 63 - __builtin_clzll((unsigned long long) us);
    int sub = octave >= 2 ? (int) ((us >> (octave - 2)) & 3) : (int) ((us << (2 - octave)) & 3);
    int b = 1 + octave * 4 + sub;
    return b < ZDIST_LATENCY_BUCKETS ? b : ZDIST_LATENCY_BUCKETS - 1;
}

static int64_t
s_bucket_us(int b)
{
    if (b == 0)
        return 0;
    int octave = (b - 1) / 4, sub = (b - 1) % 4;
    return (int64_t) llround(exp2(octave) * (1.0 + sub / 4.0));
}

int64_t
zdist_latency_percentile(const uint32_t *latency, double q)
{
    uint64_t total = 0;
    for (int b = 0; b < ZDIST_LATENCY_BUCKETS; b++)
        total += latency[b];
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t) ceil(q * (double) total);
    uint64_t seen = 0;
    for (int b = 0; b < ZDIST_LATENCY_BUCKETS; b++) {
        seen += latency[b];
        if (seen >= want)
            return s_bucket_us(b);
    }
    return s_bucket_us(ZDIST_LATENCY_BUCKETS - 1);
}
