/* zdist parameter-server client: a per-task client of the ps service, with retries and exactly-once writes.

   Two layers, both usable by the worker and the coordinator:

   1. The service's messages (zdist/ps_service.h): request builders and
      reply parsers, for pipelining on a zdist_rpc_client_t by hand: build
      any number of requests, send them with zdist_rpc_client_send, receive
      the replies with zdist_rpc_client_recv (in any order; match them by
      request id) and parse each with the zdist_ps_reply_* function of its
      method. Nothing there blocks.

   2. zdist_ps_client_t, one per ps task endpoint, over its own rpc client:
      zdist_ps_client_run sends any number of operations to any number of
      ps tasks at once and collects the replies; the synchronous calls (one
      per operation) are runs of one. It numbers writes itself and, when a
      call ends UNAVAILABLE or DEADLINE_EXCEEDED, sends the same request
      again (same client id and sequence, so the psd applies a write exactly
      once) up to `retries` more times.

   Conventions of the service (proto/ps.proto):
   - rows are global rows of the variable (axis 0); a shard holds rows
     [row_offset, row_offset + row_count); dense reads and writes take
     row_start + row_count, row_count 0 meaning the whole shard;
   - writes by ids (sparse push, scatter_*) carry ids (int64 [n], global
     rows of that shard, duplicates allowed) and rows [n, ...];
   - a dense push with one gradient tensor and a sparse push with ids +
     gradient rows are applied by the psd's optimizer (set_optimizer);
   - every write carries a sequence number which, with the client id of the
     rpc client that sends it, makes it idempotent: the psd acknowledges a
     retransmission with duplicate = true and does not apply it again. The
     psd remembers, per shard and client, the highest sequence and the 64
     below it; older sequences count as applied. So sequences of one client
     must increase (per shard) in the order writes are sent.

   Errors: functions return 0 or a negative errno. When the psd refused a
   call, the errno is its status's (zdist_status_to_errno: INVALID_ARGUMENT
   -EINVAL, NOT_FOUND -ENOENT, ALREADY_EXISTS -EEXIST, DEADLINE_EXCEEDED
   -ETIMEDOUT, UNAVAILABLE -ENOTCONN, DATA_LOSS -EBADMSG,
   RESOURCE_EXHAUSTED -ENOSPC...) and err->text reads
   "STATUS_NAME: <the psd's message>" (zdist_ps_client_t prefixes the
   operation and endpoint). err may be NULL.

   Threads: builders and parsers are reentrant. A zdist_ps_client_t, like the
   rpc client under it, belongs to one thread; use one client per thread. */
#ifndef ZDIST_PS_CLIENT_H
#define ZDIST_PS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/optim.h"
#include "zdist/ps_service.h"
#include "zdist/rpc.h"
#include "zdist/tensor.h"
#include "zdist/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the per-task client ---- */

typedef struct zdist_ps_client_t zdist_ps_client_t;

/* 1 MiB parts: on loopback the psd's apply of one part then hides behind
   the next part's transfer (tests/bench/bench_ps, push+sgd), and a part
   costs one more request, ~100 us against ~300 us on the wire. */
#define ZDIST_PS_PART_BYTES ((size_t) 1 << 20)

typedef struct {
    zdist_rpc_client_options_t rpc; /* client_id 0: random (usual) */
    int64_t timeout_ms;             /* deadline of each attempt; default 30000 */
    int retries;                    /* extra attempts after UNAVAILABLE or
                                       DEADLINE_EXCEEDED; default 3 */
    size_t part_bytes;              /* the synchronous dense push sends a gradient
                                       larger than this in parts, pipelined
                                       (zdist_ps_write_parts); default
                                       ZDIST_PS_PART_BYTES, 0: always whole.
                                       Each part is applied exactly once; a
                                       push that fails (a part refused or
                                       given up on) may have been applied in
                                       part: to the rows of the parts that
                                       went through */
} zdist_ps_client_options_t;

ZDIST_EXPORT void zdist_ps_client_options_default(zdist_ps_client_options_t *opts);

/* Connects to endpoint ("tcp://host:port"; asynchronously: the psd may come
   up later). opts NULL: defaults. NULL with err on a bad endpoint. */
ZDIST_EXPORT zdist_ps_client_t *zdist_ps_client_new(const char *endpoint, const zdist_ps_client_options_t *opts,
                                                    zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. */
ZDIST_EXPORT void zdist_ps_client_destroy(zdist_ps_client_t **self_p);

/* The rpc client underneath (borrowed), to pipeline built requests on the
   same connection and client id, or read the psd's incarnation. Replies of
   calls sent through it stay queued for zdist_rpc_client_recv while the
   synchronous calls below wait for their own. */
ZDIST_EXPORT zdist_rpc_client_t *zdist_ps_client_rpc(zdist_ps_client_t *self);
/* Reserves the next write sequence number of this client, for a request
   built by hand and sent through zdist_ps_client_rpc. Never 0. */
ZDIST_EXPORT uint64_t zdist_ps_client_next_sequence(zdist_ps_client_t *self);
/* Attempts that ended UNAVAILABLE or DEADLINE_EXCEEDED and were sent again. */
ZDIST_EXPORT uint64_t zdist_ps_client_retransmissions(const zdist_ps_client_t *self);

/* ---- pipelined operations, with retries ----
   zdist_ps_client_run sends every op at once, each through its own client
   (any mix of ps tasks and methods), then waits for all the replies. The
   ops that ended UNAVAILABLE or DEADLINE_EXCEEDED are sent again, together,
   up to their client's `retries` more times: writes with the same client
   id and sequence, so the psd applies each exactly once. This is the one
   place where the ps client decides to send a request again.

   A write whose request.write.sequence (push_pull: request.push_pull.sequence)
   is 0 is numbered by its client when first sent, in op order, and keeps
   that number. Every attempt has the
   client's timeout_ms as deadline. Payloads are copied into each request,
   so what the ops borrow needs to live only until the run returns.
   All the clients of a run must belong to the calling thread. */
typedef struct {
    zdist_ps_client_t *client;  /* the ps task it goes to */
    zdist_ps_request_t request; /* what to send (zdist/ps_service.h) */
    /* Outcome. rc 0: `reply` holds it (parse it with its zdist_ps_reply_*;
       its status may be a refusal, or DEADLINE_EXCEEDED / UNAVAILABLE after
       the retries). rc -EINVAL: the request could not be built (invalid
       arguments or out of memory); another negative errno: it could not be
       sent. */
    int rc;
    zdist_msg_t *reply; /* the op's until zdist_ps_ops_release */
    unsigned attempts;  /* requests sent for it */
    uint64_t id_;       /* private: the call in flight */
} zdist_ps_op_t;

ZDIST_EXPORT void zdist_ps_client_run(zdist_ps_op_t *ops, size_t n);
/* Destroys the ops' replies. */
ZDIST_EXPORT void zdist_ps_ops_release(zdist_ps_op_t *ops, size_t n);

/* Sends *request_p (taken, also on failure) and waits for its reply, with
   the client's timeout, without retrying. For requests built by hand. */
ZDIST_EXPORT int zdist_ps_client_call(zdist_ps_client_t *self, zdist_msg_t **request_p, zdist_msg_t **ret_reply,
                                      zdist_error_t *err);

ZDIST_EXPORT int zdist_ps_client_create(zdist_ps_client_t *self, const zdist_ps_var_spec_t *spec,
                                        bool *ret_created, zdist_error_t *err);

/* Reads rows into a caller buffer. out->data and out->nbytes give the
   buffer; out->dtype is the expected dtype (ZDIST_DTYPE_INVALID: any).
   On success out->dtype, out->shape and out->nbytes describe what was read
   (out->name is set to NULL). -EINVAL when the dtype differs, -EMSGSIZE
   when the buffer is too small (nothing copied). */
ZDIST_EXPORT int zdist_ps_client_pull(zdist_ps_client_t *self, const char *name, int32_t shard_index,
                                      int64_t row_start, int64_t row_count, zdist_tensor_t *out,
                                      zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_client_pull_rows(zdist_ps_client_t *self, const char *name, const int64_t *ids,
                                           size_t nids, zdist_tensor_t *out, zdist_error_t *err);

/* What a write did (each output may be ignored by passing NULL). */
typedef struct {
    uint64_t sequence; /* the sequence number it was sent with */
    bool duplicate;    /* the psd had applied it already (a retransmission) */
    int64_t step;      /* the shard's optimizer step after it */
} zdist_ps_write_result_t;

/* Dense writes (see zdist_ps_request_write); the payload is copied once per
   call into the request, so `values` may be reused as soon as this returns
   even after a timeout. */
ZDIST_EXPORT int zdist_ps_client_write(zdist_ps_client_t *self, uint32_t method, const char *name,
                                       int32_t shard_index, int64_t row_start, int64_t row_count,
                                       const zdist_tensor_t *values, zdist_ps_write_result_t *ret,
                                       zdist_error_t *err);
/* Writes by ids (see zdist_ps_request_write_ids); copies as above. */
ZDIST_EXPORT int zdist_ps_client_write_ids(zdist_ps_client_t *self, uint32_t method, const char *name,
                                           int32_t shard_index, const int64_t *ids, size_t nids,
                                           const zdist_tensor_t *rows, zdist_ps_write_result_t *ret,
                                           zdist_error_t *err);
/* Same with an explicit sequence (not taken from the client's counter;
   0 takes the next of it): to replay a write, or to test exactly-once. */
ZDIST_EXPORT int zdist_ps_client_write_seq(zdist_ps_client_t *self, uint32_t method, const char *name,
                                           int32_t shard_index, int64_t row_start, int64_t row_count,
                                           uint64_t sequence, const zdist_tensor_t *values,
                                           zdist_ps_write_result_t *ret, zdist_error_t *err);

/* One call per operation, for readability at call sites. */
ZDIST_EXPORT int zdist_ps_client_push(zdist_ps_client_t *self, const char *name, int32_t shard_index,
                                      int64_t row_start, int64_t row_count, const zdist_tensor_t *grad,
                                      zdist_ps_write_result_t *ret, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_client_push_sparse(zdist_ps_client_t *self, const char *name, int32_t shard_index,
                                             const int64_t *ids, size_t nids, const zdist_tensor_t *grad_rows,
                                             zdist_ps_write_result_t *ret, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_client_assign(zdist_ps_client_t *self, const char *name, int32_t shard_index,
                                        int64_t row_start, int64_t row_count, const zdist_tensor_t *values,
                                        zdist_ps_write_result_t *ret, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_client_assign_add(zdist_ps_client_t *self, const char *name, int32_t shard_index,
                                            int64_t row_start, int64_t row_count, const zdist_tensor_t *values,
                                            zdist_ps_write_result_t *ret, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_client_assign_sub(zdist_ps_client_t *self, const char *name, int32_t shard_index,
                                            int64_t row_start, int64_t row_count, const zdist_tensor_t *values,
                                            zdist_ps_write_result_t *ret, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_client_scatter_add(zdist_ps_client_t *self, const char *name, int32_t shard_index,
                                             const int64_t *ids, size_t nids, const zdist_tensor_t *rows,
                                             zdist_ps_write_result_t *ret, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_client_scatter_update(zdist_ps_client_t *self, const char *name, int32_t shard_index,
                                                const int64_t *ids, size_t nids, const zdist_tensor_t *rows,
                                                zdist_ps_write_result_t *ret, zdist_error_t *err);

ZDIST_EXPORT int zdist_ps_client_save(zdist_ps_client_t *self, const char *dir, int64_t step, int32_t ps_task,
                                      uint64_t *ret_bytes, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_client_restore(zdist_ps_client_t *self, const char *dir, int64_t *ret_step,
                                         zdist_error_t *err);
/* *ret_stats is the caller's (zdist_ps_stats_destroy). */
ZDIST_EXPORT int zdist_ps_client_stats(zdist_ps_client_t *self, zdist_ps_stats_t **ret_stats, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_client_set_optimizer(zdist_ps_client_t *self, const zdist_optim_config_t *opt,
                                               zdist_error_t *err);
/* The same for one job's namespace on the psd (its shards are named
   "JOB/..."): save and restore touch only them, set_optimizer sets theirs.
   job NULL or "": every shard, as above. */
ZDIST_EXPORT int zdist_ps_client_save_job(zdist_ps_client_t *self, const char *dir, int64_t step, int32_t ps_task,
                                          const char *job, uint64_t *ret_bytes, zdist_error_t *err);
/* A save with every field of zdist_ps_save_t (full_every too). */
ZDIST_EXPORT int zdist_ps_client_save_with(zdist_ps_client_t *self, const zdist_ps_save_t *save,
                                           uint64_t *ret_bytes, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_client_restore_job(zdist_ps_client_t *self, const char *dir, const char *job,
                                             int64_t *ret_step, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_client_set_optimizer_job(zdist_ps_client_t *self, const zdist_optim_config_t *opt,
                                                   const char *job, zdist_error_t *err);
/* Sets the deadline of this client's calls from now on (ms > 0) and
   returns the one before: a checkpoint of gigabytes takes longer than the
   quick deadline that tells a lost psd. */
ZDIST_EXPORT int64_t zdist_ps_client_set_timeout(zdist_ps_client_t *self, int64_t timeout_ms);
/* Removes every shard of job `job` (non-empty) from the psd, with its
   optimizer slots and exactly-once tables: what the coordinator does once a
   job has ended. A job the psd does not hold is 0 shards, not an error.
   Under CURVE only the chief's key may (PERMISSION_DENIED otherwise).
   A job the psd saw write within its --live-job-seconds is refused
   FAILED_PRECONDITION (-EBUSY, err saying when it wrote) unless force:
   the chief's word that the job ended, or the operator's --force.
   ret_shards and ret_bytes (values and slots freed) may be NULL. */
ZDIST_EXPORT int zdist_ps_client_drop_job(zdist_ps_client_t *self, const char *job, bool force,
                                          uint64_t *ret_shards, uint64_t *ret_bytes, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
