/* The raw ZeroMQ baseline server the benchmarks measure against. */
#ifndef ZDIST_BENCH_RAW_H
#define ZDIST_BENCH_RAW_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A ROUTER answering [id][hdr: reply bytes, u64][payload frames...] with
   [id][hdr][reply bytes of blob, when > 0 and <= blob_size]. Request
   payloads are received and dropped, and the reply is the blob itself
   (zero-copy): an echo that moves bytes nobody reads or writes. With touch
   set, the server reads every request byte once (summed into sink) and
   writes every reply byte once (the blob copied into a fresh message): the
   least a server that consumes or produces the data must do. Run
   bench_raw_loop on its own thread until stop is set; sock is a bound raw
   libzmq ROUTER. */
typedef struct {
    atomic_int stop;
    void *sock;
    const uint8_t *blob;
    size_t blob_size;
    bool touch;
    uint64_t sink; /* touch: the sum of what was read, so the reads stay */
} bench_raw_t;

void *bench_raw_loop(void *arg);

/* A TCP port free on 127.0.0.1 now (for a child to bind), or -1. */
int bench_free_port(void);

/* The median of v[0..n) (sorted in place; of two middles, their mean). */
double bench_median(double *v, int n);

/* splitmix64's finalizer: the benchmarks' ids from a counter, spread over all of 64 bits. */
uint64_t bench_mix64(uint64_t x);

#endif
