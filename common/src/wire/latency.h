/* A latency histogram of fixed buckets, for the RPC server's per-method
   figures: 4 buckets per power of two of microseconds. Internal to libzdist. */
#ifndef ZDIST_WIRE_LATENCY_H
#define ZDIST_WIRE_LATENCY_H

#include <stdint.h>

#define ZDIST_LATENCY_BUCKETS 160

/* The bucket of a latency of `us` microseconds: 0..ZDIST_LATENCY_BUCKETS-1. */
int zdist_latency_bucket(int64_t us);

/* The q-quantile (0..1) of the histogram `latency` (ZDIST_LATENCY_BUCKETS
   counts), as its bucket's lower bound in microseconds; 0 when empty. */
int64_t zdist_latency_percentile(const uint32_t *latency, double q);

#endif
