/* zdist parameter-server client: ps.proto requests, replies and a per-task client.

   Two layers, both usable by the worker and the coordinator:

   1. Request builders and reply parsers, for pipelining on a
      zdist_rpc_client_t: build any number of requests, send them with
      zdist_rpc_client_send, receive the replies with zdist_rpc_client_recv
      (in any order; match them by request id) and parse each with the
      zdist_ps_reply_* function of its method. Nothing here blocks.

   2. zdist_ps_client_t, one per ps task endpoint: a synchronous call per
      operation over its own rpc client. It numbers writes itself and, when
      a call ends UNAVAILABLE or DEADLINE_EXCEEDED, sends the same request
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
#include "zdist/init.h"
#include "zdist/optim.h"
#include "zdist/rpc.h"
#include "zdist/tensor.h"
#include "zdist/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ps.proto method numbers (the zdist_msg_method of requests and replies). */
typedef enum {
    ZDIST_PS_CREATE = 100,
    ZDIST_PS_PULL = 101,
    ZDIST_PS_PULL_ROWS = 102,
    ZDIST_PS_PUSH = 103,
    ZDIST_PS_ASSIGN = 104,
    ZDIST_PS_ASSIGN_ADD = 105,
    ZDIST_PS_ASSIGN_SUB = 106,
    ZDIST_PS_SCATTER_ADD = 107,
    ZDIST_PS_SCATTER_UPDATE = 108,
    ZDIST_PS_SAVE = 109,
    ZDIST_PS_RESTORE = 110,
    ZDIST_PS_STATS = 111,
    ZDIST_PS_SET_OPTIMIZER = 112,
} zdist_ps_method_t;

/* "pull", "assign_add"...; "unknown" for other values. */
ZDIST_EXPORT const char *zdist_ps_method_name(uint32_t method);

/* One shard of a variable, as created on a psd. Strings are borrowed. */
typedef struct {
    const char *name;
    zdist_dtype_t dtype;   /* a data dtype */
    zdist_shape_t shape;   /* the variable's FULL shape */
    int32_t shard_index;
    int64_t row_offset;    /* first global row of the shard */
    int64_t row_count;     /* rows of the shard */
    zdist_initializer_t init; /* zdist/init.h; a zeroed one is zeros */
    uint64_t seed;         /* values depend only on (seed, name, global row) */
} zdist_ps_var_spec_t;

/* The psd's optimizer is a zdist_optim_config_t (zdist/optim.h). Zero
   fields take Keras's defaults for the kind (sgd lr 0.01; momentum
   0.01/0.9; adagrad 0.001, accumulator 0.1, epsilon 1e-7; adam 0.001, 0.9,
   0.999, 1e-7). */

/* ---- request builders ----
   Each returns a new request the caller sends (zdist_rpc_client_send takes
   it) or destroys, or NULL on invalid arguments (NULL name, a dtype that is
   not a data dtype, nbytes not matching dtype x shape, ids and rows
   disagreeing, a method not of that builder's kind) or out of memory.

   Payloads (ids, values, gradient rows): with ffn NULL the builder copies
   the data into the message. Otherwise the data is attached zero-copy and
   its ownership passes to the message: ffn(data, hint) is called exactly
   once per buffer when libzmq no longer needs it (after sending, or when
   the message is destroyed unsent, or at once when the builder fails);
   until then the buffer must stay valid and unchanged. It may run on
   libzmq's I/O thread. */

ZDIST_EXPORT zdist_msg_t *zdist_ps_request_create(const zdist_ps_var_spec_t *spec);

/* Rows [row_start, row_start + row_count) of shard shard_index;
   row_count 0: the whole shard (row_start ignored). */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_pull(const char *name, int32_t shard_index, int64_t row_start,
                                                int64_t row_count);

/* Rows by global id from whichever shards of `name` the psd holds
   (duplicates allowed). The reply holds [nids, ...]. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_pull_rows(const char *name, const int64_t *ids, size_t nids,
                                                     zdist_free_fn *ffn, void *hint);

/* A dense write: method ZDIST_PS_PUSH (gradient, applied by the optimizer),
   ZDIST_PS_ASSIGN, ZDIST_PS_ASSIGN_ADD or ZDIST_PS_ASSIGN_SUB, of `values`
   ([row_count, ...] of the shard's dtype; for row_count 0 the whole shard)
   at rows row_start.. of shard shard_index. values->name is ignored. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_write(uint32_t method, const char *name, int32_t shard_index,
                                                 int64_t row_start, int64_t row_count, uint64_t sequence,
                                                 const zdist_tensor_t *values, zdist_free_fn *ffn, void *hint);

/* A write by ids into shard shard_index: method ZDIST_PS_PUSH (a sparse
   gradient; duplicate ids are summed), ZDIST_PS_SCATTER_ADD or
   ZDIST_PS_SCATTER_UPDATE. rows is [nids, ...]. With ffn, both the ids and
   rows->data are attached zero-copy (ffn is called for each). */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_write_ids(uint32_t method, const char *name, int32_t shard_index,
                                                     uint64_t sequence, const int64_t *ids, size_t nids,
                                                     const zdist_tensor_t *rows, zdist_free_fn *ffn,
                                                     void *hint);

/* Saves every shard of the psd into dir (created if missing) as ps task
   ps_task, under `step`. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_save(const char *dir, int64_t step, int32_t ps_task);
/* Restores every shard of the psd (create them first) from dir, by global
   row range: any sharding onto any other. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_restore(const char *dir);
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_stats(void);
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_set_optimizer(const zdist_optim_config_t *opt);

/* ---- reply parsers ----
   All check the reply's status first: a refusal (or a completion made by
   the rpc client: DEADLINE_EXCEEDED, UNAVAILABLE) returns its errno with
   err as described at the top. A reply whose body does not decode, or that
   lacks the tensor its method returns, is -EPROTO. Outputs are written
   only on success; each may be NULL. */

/* 0 when the status is OK, else its errno and err. */
ZDIST_EXPORT int zdist_ps_reply_check(const zdist_msg_t *reply, zdist_error_t *err);

/* pull, pull_rows: a view of the values in the reply (borrowed: valid until
   the reply is destroyed; writable, it belongs to the reply). */
ZDIST_EXPORT int zdist_ps_reply_values(const zdist_msg_t *reply, zdist_tensor_t *ret_values, zdist_error_t *err);
/* create: false when the same shard already existed with the same spec. */
ZDIST_EXPORT int zdist_ps_reply_create(const zdist_msg_t *reply, bool *ret_created, zdist_error_t *err);
/* push, assign*, scatter*, set_optimizer: duplicate = a retransmission that
   was acknowledged, not applied again; step = the shard's optimizer step. */
ZDIST_EXPORT int zdist_ps_reply_write(const zdist_msg_t *reply, bool *ret_duplicate, int64_t *ret_step,
                                      zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_reply_save(const zdist_msg_t *reply, uint64_t *ret_bytes, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_reply_restore(const zdist_msg_t *reply, int64_t *ret_step, zdist_error_t *err);

/* stats, as plain C. */
typedef struct {
    char name[32];
    uint64_t requests;
    uint64_t errors;
    int64_t p50_us;
    int64_t p99_us;
} zdist_ps_method_stats_t;

typedef struct {
    char *name; /* owned by the stats */
    int32_t shard_index;
    zdist_dtype_t dtype;
    zdist_shape_t shape; /* the variable's full shape */
    int64_t row_offset;
    int64_t row_count;
    int64_t step;
} zdist_ps_shard_info_t;

typedef struct {
    uint64_t variables;
    uint64_t shards;
    uint64_t value_bytes;
    uint64_t slot_bytes;
    int64_t uptime_ms;
    uint64_t incarnation;
    int32_t ps_task;
    char optimizer[32];
    size_t nmethods;
    zdist_ps_method_stats_t *methods;
    size_t nshard_info;
    zdist_ps_shard_info_t *shard_info; /* ordered by name, then shard index */
} zdist_ps_stats_t;

/* *ret_stats is the caller's: free it with zdist_ps_stats_destroy. */
ZDIST_EXPORT int zdist_ps_reply_stats(const zdist_msg_t *reply, zdist_ps_stats_t **ret_stats,
                                      zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. */
ZDIST_EXPORT void zdist_ps_stats_destroy(zdist_ps_stats_t **self_p);

/* ---- per-task synchronous client ---- */

typedef struct zdist_ps_client_t zdist_ps_client_t;

typedef struct {
    zdist_rpc_client_options_t rpc; /* client_id 0: random (usual) */
    int64_t timeout_ms;             /* deadline of each attempt; default 30000 */
    int retries;                    /* extra attempts after UNAVAILABLE or
                                       DEADLINE_EXCEEDED; default 3 */
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

/* Sends *request_p (taken, also on failure) and waits for its reply, with
   the client's timeout, without retrying. For requests built above. */
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
/* Same with an explicit sequence (not taken from the client's counter): to
   replay a write, or to test exactly-once. */
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

/* "host:port" or "tcp://host:port" -> "tcp://host:port" in buf. -EINVAL
   (err names the text) for anything else: no port, port outside 1..65535,
   another scheme. */
ZDIST_EXPORT int zdist_ps_endpoint_parse(const char *text, char *buf, size_t size, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
