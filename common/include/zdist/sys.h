/* Small OS helpers: the monotonic clock in milliseconds and random ids. */
#ifndef ZDIST_SYS_H
#define ZDIST_SYS_H

#include <stdint.h>

#include "zdist/defs.h"

/* Monotonic milliseconds (never jumps with the wall clock). */
ZDIST_EXPORT int64_t zdist_clock_now_ms(void);
/* Monotonic microseconds, for latency measurement. */
ZDIST_EXPORT int64_t zdist_clock_now_us(void);
/* A non-zero random 64-bit value from the kernel (incarnations, client ids). */
ZDIST_EXPORT uint64_t zdist_random_u64(void);
/* The cores this process may run on: its CPU affinity, else the online
   ones; at least 1. */
ZDIST_EXPORT int zdist_sys_cores(void);

#endif
