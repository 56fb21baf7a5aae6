/* zdist ps service: the messages of proto/ps.proto as plain C structs, for the psd and its clients.

   Every ps request and reply has one C form, used by both sides:

   - a client fills a request struct (zdist_ps_request_t, or the builders
     below) and encodes it into a message;
   - the psd's method table names the body type of each method
     (zdist_ps_body_*). The rpc server decodes the request with it and checks
     it before any handler runs: a bad one (empty or over-long names, a
     dtype that cannot be stored, a negative or overflowing shape, negative
     rows or indices, ids and rows tensors that disagree, an unknown
     initializer or optimizer...) is answered INVALID_ARGUMENT with a
     message naming the field. The handler gets the same struct, filled and
     valid: zdist_rpc_call_body (call);
   - the psd sets its reply from plain values (zdist_ps_reply_set_*), and
     the client reads them back (zdist_ps_reply_*).

   protobuf-c stays inside libzdist. Conventions of the service (rows,
   shards, ids, sequences) are described in zdist/ps_client.h.

   Errors: see zdist/ps_client.h. Everything here is reentrant. */
#ifndef ZDIST_PS_SERVICE_H
#define ZDIST_PS_SERVICE_H

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
    ZDIST_PS_PUSH_PULL = 113,
    ZDIST_PS_DROP_JOB = 114,
} zdist_ps_method_t;

/* "pull", "assign_add"...; "unknown" for other values. */
ZDIST_EXPORT const char *zdist_ps_method_name(uint32_t method);
/* True for the methods whose request is a zdist_ps_write_t. */
ZDIST_EXPORT bool zdist_ps_method_is_write(uint32_t method);

#define ZDIST_PS_NAME_MAX 255 /* bytes of a variable name */
#define ZDIST_PS_DIR_MAX 4095 /* bytes of a checkpoint directory */

/* ---- requests ----
   Strings and arrays are borrowed. Decoded by the psd, they point into the
   request and live as long as the call. */

/* A dynamic embedding table's part (issue 29): rows keyed by any int64
   id, created at the id's min_count-th training occurrence (counted by the
   step's push, so exactly once), spread over num_ps ps tasks by
   zdist_partition_id_ps; the part on ps task p is shard p. */
typedef struct {
    bool enabled;
    uint32_t min_count;         /* 0 or 1: the first occurrence admits */
    uint64_t evict_after_steps; /* 0: never by age */
    double evict_l2_below;      /* 0: never by norm */
    int32_t num_ps;             /* >= 1; shard_index < num_ps */
    double default_value;       /* every element an id without a row reads (0: zeros) */
} zdist_ps_dynamic_t;

/* create: one shard of a variable. */
typedef struct {
    const char *name;
    zdist_dtype_t dtype; /* a data dtype */
    zdist_shape_t shape; /* the variable's FULL shape */
    int32_t shard_index;
    int64_t row_offset;       /* first global row of the shard */
    int64_t row_count;        /* rows of the shard */
    zdist_initializer_t init; /* zdist/init.h; a zeroed one is zeros */
    uint64_t seed;            /* values depend only on (seed, init_name, global row) */
    const char *init_name;    /* NULL or "": name. A job's variables carry its prefix on the
                                 psds but start as the unprefixed model's do */
    /* enabled: a dynamic table's part: float32, shape [0, dim], row_offset
       and row_count 0, shard_index the ps task (< num_ps) */
    zdist_ps_dynamic_t dynamic;
} zdist_ps_var_spec_t;

/* pull: rows [row_start, row_start + row_count) of shard shard_index;
   row_count 0: the whole shard (row_start ignored). */
typedef struct {
    const char *name;
    int32_t shard_index;
    int64_t row_start;
    int64_t row_count;
} zdist_ps_pull_t;

/* One variable's ids of a pull_rows. */
typedef struct {
    const char *name;
    const int64_t *ids;
    size_t nids;
} zdist_ps_rows_item_t;

/* Items one pull_rows may carry (the wire's default tensor limit). */
#define ZDIST_PS_PULL_ROWS_MAX_ITEMS 1024

/* pull_rows: rows by global id from whichever shards of `name` the psd
   holds (duplicates allowed); the ids travel as tensor 0, int64 [nids].
   With nmore > 0 the same request reads more variables (item k >= 1 is
   more[k - 1], its ids tensor k): the reply carries 1 + nmore tensors,
   item k's rows in tensor k (zdist_ps_reply_values_at); a refusal of any
   item refuses the call. */
typedef struct {
    const char *name;
    const int64_t *ids;
    size_t nids;
    const zdist_ps_rows_item_t *more;
    size_t nmore;
} zdist_ps_pull_rows_t;

/* Largest step_write: a step writes one shard at most this many times + 1. */
#define ZDIST_PS_MAX_STEP_WRITE 65535

/* push, assign, assign_add, assign_sub, scatter_add, scatter_update. */
typedef struct {
    const char *name;
    int32_t shard_index;
    int64_t row_start;  /* dense: first global row */
    int64_t row_count;  /* dense: rows; 0 = the whole shard */
    uint64_t sequence;  /* with the sender's client id: applied at most once
                           (0 in zdist_ps_client_run: numbered by the client) */
    uint64_t job_step;  /* the job's step that writes (0: none); when set the psd
                           applies (job_step, step_write) once, whoever sends it */
    uint32_t step_write; /* ordinal among the step's writes to this shard */
    int64_t part_row;   /* a dense push in parts: the part's first row from the write's first */
    bool more_parts;    /* a dense push in parts: more follow (the step advances with the last) */
    bool by_ids;        /* a sparse push or scatter_*: ids + rows, not a range */
    const int64_t *ids; /* by_ids: global rows of the shard, duplicates allowed */
    size_t nids;
    zdist_tensor_t values; /* dense [row_count, ...] (the whole shard for 0);
                              by_ids [nids, ...]; values.name is ignored */
} zdist_ps_write_t;

/* push_pull: one item of a fused push-and-pull (ps-lite's ZPushPull): a
   gradient for one shard (dense: the whole shard; sparse: ids + rows),
   and/or a request for the shard's values after the update. */
typedef struct {
    const char *name;
    int32_t shard_index;
    bool push;          /* carries a gradient, applied by the optimizer */
    bool by_ids;        /* push: a sparse gradient */
    const int64_t *ids; /* by_ids: global rows of the shard, duplicates summed */
    size_t nids;
    zdist_tensor_t grad; /* push: dense [shard rows, ...]; by_ids [nids, ...];
                            grad.name is ignored */
    bool pull;           /* answer with the whole shard's values, after the update */
    uint32_t step_write; /* push with a job_step: ordinal among the step's writes to this shard */
} zdist_ps_push_pull_item_t;

/* Every item of one worker step for one ps task, in one message. All the
   pushes share `sequence` (with the sender's client id): each shard applies
   it at most once, so a shard appears in at most one item. The psd checks
   every item before it applies any. */
#define ZDIST_PS_PUSH_PULL_MAX_ITEMS 1024
typedef struct {
    uint64_t sequence; /* 0 in zdist_ps_client_run: numbered by the client */
    uint64_t job_step; /* the job's step of the pushes (0: none), as zdist_ps_write_t's */
    const zdist_ps_push_pull_item_t *items;
    size_t nitems;
} zdist_ps_push_pull_t;

/* A job's namespace on a psd: the shards whose names begin "JOB/" (the
   coordinator's variable prefix). A job name is 1..ZDIST_PS_JOB_MAX bytes
   of [A-Za-z0-9._-]; NULL or "" names no job: every shard. */
#define ZDIST_PS_JOB_MAX 63

/* save: every shard of the psd (of `job` only, when given) into dir
   (created if missing) as ps task ps_task, under `step`. */
typedef struct {
    const char *dir;
    int64_t step;
    int32_t ps_task;
    const char *job; /* "" or NULL: every shard */
    /* Dynamic tables: a full every this many saves, deltas between
       (0: the psd's default, 10; at most ZDIST_PS_FULL_EVERY_MAX). */
    int32_t full_every;
} zdist_ps_save_t;
#define ZDIST_PS_FULL_EVERY_MAX 1000000

/* restore: every shard of the psd (of `job` only, when given; other jobs'
   shards are not touched) from dir, by global row range: any sharding
   onto any other. Create the shards first. */
typedef struct {
    const char *dir;
    const char *job; /* "" or NULL: every shard */
} zdist_ps_restore_t;

/* set_optimizer: the optimizer of `job`'s shards (existing ones and those
   created later), or with no job of every shard and the default for
   shards of jobs that set none. `config` comes first: a pointer to this
   is one to it. */
typedef struct {
    zdist_optim_config_t config;
    const char *job; /* "" or NULL: every shard */
} zdist_ps_set_optimizer_t;

/* drop_job: every shard of `job`'s namespace (with its optimizer slots and
   exactly-once table) and the job's optimizer, removed; a job the psd does
   not hold drops nothing. job names one job: never NULL or "". */
typedef struct {
    const char *job;
    bool force; /* even a job the psd saw write lately (the chief's word that it ended, or --force) */
} zdist_ps_drop_job_t;

/* Any request: `method` says which member holds it. set_optimizer's is a
   zdist_optim_config_t (zero fields: Keras's defaults for the kind); stats
   has no fields. */
typedef struct {
    uint32_t method;
    union {
        zdist_ps_var_spec_t create;
        zdist_ps_pull_t pull;
        zdist_ps_pull_rows_t pull_rows;
        zdist_ps_write_t write;
        zdist_ps_save_t save;
        zdist_ps_restore_t restore;
        zdist_optim_config_t optimizer;
        zdist_ps_push_pull_t push_pull;
        zdist_ps_drop_job_t drop_job;
    };
    const char *optimizer_job; /* set_optimizer: for this job's shards (NULL or "": every shard) */
} zdist_ps_request_t;

/* A new message holding the request, payloads copied (the request's memory
   may be reused as soon as this returns), or NULL on invalid arguments (an
   unknown method, a NULL name or dir, a dtype that is not a data dtype,
   nbytes not matching dtype x shape, ids and rows disagreeing) or out of
   memory. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_encode(const zdist_ps_request_t *req);

/* The same, one builder per method. Each returns a new request the caller
   sends (zdist_rpc_client_send takes it) or destroys, or NULL as above.

   Payloads (ids, values, gradient rows): with ffn NULL the builder copies
   the data into the message. Otherwise the data is attached zero-copy and
   its ownership passes to the message: ffn(data, hint) is called exactly
   once per buffer when libzmq no longer needs it (after sending, or when
   the message is destroyed unsent, or at once when the builder fails);
   until then the buffer must stay valid and unchanged. It may run on
   libzmq's I/O thread. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_create(const zdist_ps_var_spec_t *spec);
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_pull(const char *name, int32_t shard_index, int64_t row_start,
                                                int64_t row_count);
/* The reply holds [nids, ...]. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_pull_rows(const char *name, const int64_t *ids, size_t nids,
                                                     zdist_free_fn *ffn, void *hint);
/* A pull_rows of every item of p (1 + p->nmore variables; ids copied). The
   reply holds one [nids, ...] tensor per item. NULL for invalid arguments. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_pull_rows_items(const zdist_ps_pull_rows_t *p);
/* A dense write: method ZDIST_PS_PUSH (gradient, applied by the optimizer),
   ZDIST_PS_ASSIGN, ZDIST_PS_ASSIGN_ADD or ZDIST_PS_ASSIGN_SUB, of `values`
   ([row_count, ...] of the shard's dtype; for row_count 0 the whole shard)
   at rows row_start.. of shard shard_index. values->name is ignored. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_write(uint32_t method, const char *name, int32_t shard_index,
                                                 int64_t row_start, int64_t row_count, uint64_t sequence,
                                                 const zdist_tensor_t *values, zdist_free_fn *ffn,
                                                 void *hint);
/* A write by ids into shard shard_index: method ZDIST_PS_PUSH (a sparse
   gradient; duplicate ids are summed), ZDIST_PS_SCATTER_ADD or
   ZDIST_PS_SCATTER_UPDATE. rows is [nids, ...]. With ffn, both the ids and
   rows->data are attached zero-copy (ffn is called for each). */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_write_ids(uint32_t method, const char *name, int32_t shard_index,
                                                     uint64_t sequence, const int64_t *ids, size_t nids,
                                                     const zdist_tensor_t *rows, zdist_free_fn *ffn,
                                                     void *hint);
/* Any write from its struct (method and payloads as above): what
   zdist_ps_write_parts makes, sent without copying with ffn. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_write_from(uint32_t method, const zdist_ps_write_t *w,
                                                      zdist_free_fn *ffn, void *hint);
/* A dense push of more than part_bytes, split into parts of whole rows
   (about part_bytes each, at most ZDIST_PS_MAX_PARTS) that borrow w's
   values: sent back to back, the psd applies each part while the next is
   on the wire, and the optimizer's step advances once, with the last
   (more_parts false). Each part needs its own sequence: w->sequence + k
   when w has one, else 0 (numbered in order by zdist_ps_client_run).
   Anything else (another method, a sparse push, a push under a job step,
   whose (job_step, step_write) names one write, or part_bytes 0) is one
   part, *w. Returns the number of parts filled. */
#define ZDIST_PS_MAX_PARTS 64
ZDIST_EXPORT size_t zdist_ps_write_parts(uint32_t method, const zdist_ps_write_t *w, size_t part_bytes,
                                         zdist_ps_write_t parts[ZDIST_PS_MAX_PARTS]);
/* A fused push-and-pull (zdist_ps_push_pull_t). With ffn, every gradient
   buffer (ids, then rows, item by item) is attached zero-copy and passes to
   the message as above; otherwise copied. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_push_pull(const zdist_ps_push_pull_t *pp, zdist_free_fn *ffn,
                                                     void *hint);
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_save(const char *dir, int64_t step, int32_t ps_task);
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_restore(const char *dir);
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_stats(void);
/* set_optimizer: a zero field of opt means the Keras default for its
   kind (so {kind, learning_rate} is enough), except ftrl's
   learning_rate_power and initial_accumulator_value, sent as they are
   (zero is TF's fixed rate, an empty accumulator): start an ftrl config
   from zdist_optim_config_default. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_set_optimizer(const zdist_optim_config_t *opt);
/* The same for one job's namespace (job NULL or "": every shard, as above). */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_save_job(const char *dir, int64_t step, int32_t ps_task,
                                                    const char *job);
/* The same with every field of a save (full_every too); NULL without dir. */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_save_with(const zdist_ps_save_t *save);
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_restore_job(const char *dir, const char *job);
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_set_optimizer_job(const zdist_optim_config_t *opt, const char *job);
/* NULL for a NULL job (an empty one is encoded: the psd refuses it). */
ZDIST_EXPORT zdist_msg_t *zdist_ps_request_drop_job(const char *job);

/* ---- the psd's body types ----
   For its method table (zdist_rpc_method_t.request). The handler's
   zdist_rpc_call_body (call) is then the struct named here, checked. */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_ps_body_create;    /* zdist_ps_var_spec_t */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_ps_body_pull;      /* zdist_ps_pull_t */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_ps_body_pull_rows; /* zdist_ps_pull_rows_t */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_ps_body_write;     /* zdist_ps_write_t (any write method) */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_ps_body_save;      /* zdist_ps_save_t */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_ps_body_restore;   /* zdist_ps_restore_t */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_ps_body_stats;     /* no fields */
/* zdist_ps_push_pull_t: items checked (names, shard indices, one item per
   shard, tensors present, ids int64 [n] matching the gradient rows); the
   handler still checks each against its shard. */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_ps_body_push_pull;
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_ps_body_set_optimizer; /* zdist_ps_set_optimizer_t, defaults
                                                                           filled in and validated */
/* zdist_ps_drop_job_t: job a valid, non-empty job id. */
ZDIST_EXPORT extern const zdist_rpc_body_t zdist_ps_body_drop_job;

/* ---- replies ---- */

/* stats, as plain C. */
typedef struct {
    char name[32];
    uint64_t requests;
    uint64_t errors;
    int64_t p50_us;
    int64_t p99_us;
} zdist_ps_method_stats_t;

typedef struct {
    const char *name; /* owned by stats from zdist_ps_reply_stats; borrowed when set */
    int32_t shard_index;
    zdist_dtype_t dtype;
    zdist_shape_t shape; /* the variable's full shape */
    int64_t row_offset;
    int64_t row_count;
    int64_t step;
} zdist_ps_shard_info_t;

/* A dynamic table's part on the psd (its counters since it was created). */
typedef struct {
    const char *name; /* as zdist_ps_shard_info_t's */
    uint64_t rows, admitted, refused, evicted, bytes, pending, dropped_grads;
} zdist_ps_embedding_info_t;

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
    size_t nembeddings;
    zdist_ps_embedding_info_t *embeddings; /* dynamic tables, ordered by name */
} zdist_ps_stats_t;

/* Setting a reply's body (the psd): 0 or -ENOMEM. Tensors (pull, pull_rows)
   are added to the reply directly (zdist_msg_add_tensor_alloc). */
ZDIST_EXPORT int zdist_ps_reply_set_create(zdist_msg_t *reply, bool created);
/* push, assign*, scatter*, set_optimizer. */
ZDIST_EXPORT int zdist_ps_reply_set_write(zdist_msg_t *reply, bool duplicate, int64_t step);
/* push_pull: one (duplicate, step) per item, in item order; the values of
   the items that pull are added as tensors, in item order, by the psd. */
ZDIST_EXPORT int zdist_ps_reply_set_push_pull(zdist_msg_t *reply, size_t nitems, const bool *duplicate,
                                              const int64_t *step);
ZDIST_EXPORT int zdist_ps_reply_set_save(zdist_msg_t *reply, uint64_t bytes);
ZDIST_EXPORT int zdist_ps_reply_set_restore(zdist_msg_t *reply, int64_t step);
/* drop_job: shards removed and their bytes (values and slots) freed. */
ZDIST_EXPORT int zdist_ps_reply_set_drop_job(zdist_msg_t *reply, uint64_t shards, uint64_t bytes);
/* Reads `stats` (borrowed) into the body. */
ZDIST_EXPORT int zdist_ps_reply_set_stats(zdist_msg_t *reply, const zdist_ps_stats_t *stats);

/* Reading a reply (the client). All check the reply's status first: a
   refusal (or a completion made by the rpc client: DEADLINE_EXCEEDED,
   UNAVAILABLE) returns its errno with err "STATUS_NAME: <message>". A reply
   whose body does not decode, or that lacks the tensor its method returns,
   is -EPROTO. Outputs are written only on success; each may be NULL. */

/* 0 when the status is OK, else its errno and err. */
ZDIST_EXPORT int zdist_ps_reply_check(const zdist_msg_t *reply, zdist_error_t *err);
/* pull, pull_rows: a view of the values in the reply (borrowed: valid until
   the reply is destroyed; writable, it belongs to the reply). */
ZDIST_EXPORT int zdist_ps_reply_values(const zdist_msg_t *reply, zdist_tensor_t *ret_values,
                                       zdist_error_t *err);
/* pull_rows of count items: a view of item index's values (as
   zdist_ps_reply_values); -EPROTO when the reply has not count tensors. */
ZDIST_EXPORT int zdist_ps_reply_values_at(const zdist_msg_t *reply, size_t index, size_t count,
                                          zdist_tensor_t *ret_values, zdist_error_t *err);
/* create: false when the same shard already existed with the same spec. */
ZDIST_EXPORT int zdist_ps_reply_create(const zdist_msg_t *reply, bool *ret_created, zdist_error_t *err);
/* push, assign*, scatter*, set_optimizer: duplicate = a retransmission that
   was acknowledged, not applied again; step = the shard's optimizer step. */
ZDIST_EXPORT int zdist_ps_reply_write(const zdist_msg_t *reply, bool *ret_duplicate, int64_t *ret_step,
                                      zdist_error_t *err);
/* push_pull of nitems items: per item (arrays of nitems, each may be NULL)
   whether it was a retransmission already applied, and the shard's step;
   ret_values (may be NULL; an array of nitems) gets, for each item that
   pulled, a view of its values (borrowed from the reply, like
   zdist_ps_reply_values) and a zeroed tensor for the others. -EPROTO when
   the reply does not have one result per item or one values tensor per
   pulling item (`pull` of the request's items says which). */
ZDIST_EXPORT int zdist_ps_reply_push_pull(const zdist_msg_t *reply, const zdist_ps_push_pull_t *request,
                                          bool *ret_duplicate, int64_t *ret_step, zdist_tensor_t *ret_values,
                                          zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_reply_save(const zdist_msg_t *reply, uint64_t *ret_bytes, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_reply_restore(const zdist_msg_t *reply, int64_t *ret_step, zdist_error_t *err);
ZDIST_EXPORT int zdist_ps_reply_drop_job(const zdist_msg_t *reply, uint64_t *ret_shards, uint64_t *ret_bytes,
                                         zdist_error_t *err);
/* *ret_stats is the caller's: free it with zdist_ps_stats_destroy. */
ZDIST_EXPORT int zdist_ps_reply_stats(const zdist_msg_t *reply, zdist_ps_stats_t **ret_stats,
                                      zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. */
ZDIST_EXPORT void zdist_ps_stats_destroy(zdist_ps_stats_t **self_p);

#ifdef __cplusplus
}
#endif
#endif
