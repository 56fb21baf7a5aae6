/* Small OS helpers: monotonic clock, random ids. */
#include <sched.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "zdist/sys.h"

int64_t
zdist_clock_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
zdist_clock_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

uint64_t
zdist_random_u64(void)
{
    uint64_t v = 0;
    while (v == 0) {
        if (getrandom(&v, sizeof v, 0) != (ssize_t) sizeof v) {
            /* getrandom does not fail for 8 bytes after boot; mix the clock as a last resort. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            v = ((uint64_t) ts.tv_sec * 1000000007u) ^ (uint64_t) ts.tv_nsec ^ (uint64_t) (uintptr_t) &v;
        }
    }
    return v;
}

int
zdist_sys_cores(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int) n : 1;
}
