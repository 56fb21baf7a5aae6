/* zdist collective: ring all-reduce, all-gather and broadcast between processes over ZeroMQ. */
#ifndef ZDIST_COLLECTIVE_H
#define ZDIST_COLLECTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "zdist/auth.h"
#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/step.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator of `size` ranks on a ring. Rank r binds a PULL socket at
   its own endpoint and connects a PUSH socket to rank (r+1) % size; every
   collective moves data one way round the ring, chunked and pipelined, with
   payloads sent zero-copy out of the caller's buffers. Every message is
   checked (magic, version, sender rank, ring size, collective id, step,
   chunk index, offset, lengths): stale messages of an earlier, failed
   collective are dropped, anything else wrong fails the call with -EPROTO.

   Thread rule: a communicator is used by one thread at a time; all ranks
   must call the same collectives in the same order with matching sizes. */
typedef struct zdist_comm_t zdist_comm_t;

typedef struct {
    int rank;
    int size;
    const char *bind;      /* this rank's endpoint, e.g. "tcp://127.0.0.1:5555"
                              (port "*" picks one: see zdist_comm_endpoint) */
    size_t chunk_bytes;    /* pipeline unit; 0 -> 1 MiB (rounded to 4 bytes) */
    size_t bytes_per_pack; /* all_reduce packs (copies) consecutive tensors
                              smaller than this into one buffer up to this
                              size; larger tensors are reduced in place.
                              0 -> 4 MiB */
    int64_t timeout_ms;    /* default deadline of one collective; 0 -> 30 s */
    zdist_keys_t *keys;    /* CURVE between ranks (rank r is certificate
                              "worker-r"); NULL: zdist_keys_process() */
} zdist_comm_config_t;

/* Binds. NULL with err filled on failure (bad config, bind failed). */
ZDIST_EXPORT zdist_comm_t *zdist_comm_new(const zdist_comm_config_t *config, zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. */
ZDIST_EXPORT void zdist_comm_destroy(zdist_comm_t **self_p);
/* The endpoint this rank bound, resolved (borrowed). */
ZDIST_EXPORT const char *zdist_comm_endpoint(zdist_comm_t *self);
/* Learns every rank's endpoint (endpoints[size], copied; used in errors)
   and connects to the right neighbour. Once, before any collective. */
ZDIST_EXPORT int zdist_comm_connect(zdist_comm_t *self, const char *const *endpoints, zdist_error_t *err);

/* Every collective: timeout_ms <= 0 uses the configured deadline. Returns 0,
   -ETIMEDOUT (err names the rank not heard from and its endpoint: the first
   collective checks that every rank joined, and names the nearest one
   upstream that did not), -EPROTO (a peer disagreed: sizes, sequence),
   -EINVAL (bad arguments), -ENOMEM. When a call fails, buffers may hold
   partial results; the communicator stays usable for later calls, except
   after a failed join (the first collective): then destroy and recreate
   it on every rank, as after a restart. */

/* In-place all-reduce of n float32 tensors (bufs[i] holds lens[i] elements;
   the same lens on every rank): ring reduce-scatter then all-gather. MEAN
   divides by size. The result is bitwise identical on every rank: each
   element is summed in one fixed order, by one rank, then copied. */
ZDIST_EXPORT int zdist_comm_all_reduce(zdist_comm_t *self, zdist_reduce_op_t op, float *const *bufs,
                                       const int64_t *lens, int n, int64_t timeout_ms, zdist_error_t *err);

/* Concatenates every rank's rows along axis 0, in rank order. Rank r gives
   rows[r] rows of row_bytes each (row_bytes equal on every rank; rows may
   differ). *ret_data (malloc'd, caller frees; NULL when 0 rows in all) gets
   the rows and *ret_rows their total. ret_rank_rows (may be NULL) gets
   each rank's row count [size]. */
ZDIST_EXPORT int zdist_comm_all_gather(zdist_comm_t *self, const void *data, int64_t rows, size_t row_bytes,
                                       void **ret_data, int64_t *ret_rows, int64_t *ret_rank_rows,
                                       int64_t timeout_ms, zdist_error_t *err);

/* Copies root's buf[bytes] into every other rank's buf (same bytes everywhere). */
ZDIST_EXPORT int zdist_comm_broadcast(zdist_comm_t *self, int root, void *buf, size_t bytes, int64_t timeout_ms,
                                      zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
