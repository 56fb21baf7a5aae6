/* zdist parameter-server client: ps.proto request builders, reply parsers, per-task client. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps.pb-c.h"
#include "wire/body.h"
#include "zdist/parse.h"
#include "zdist/ps_client.h"

const char *
zdist_ps_method_name(uint32_t method)
{
    switch (method) {
    case ZDIST_PS_CREATE:
        return "create";
    case ZDIST_PS_PULL:
        return "pull";
    case ZDIST_PS_PULL_ROWS:
        return "pull_rows";
    case ZDIST_PS_PUSH:
        return "push";
    case ZDIST_PS_ASSIGN:
        return "assign";
    case ZDIST_PS_ASSIGN_ADD:
        return "assign_add";
    case ZDIST_PS_ASSIGN_SUB:
        return "assign_sub";
    case ZDIST_PS_SCATTER_ADD:
        return "scatter_add";
    case ZDIST_PS_SCATTER_UPDATE:
        return "scatter_update";
    case ZDIST_PS_SAVE:
        return "save";
    case ZDIST_PS_RESTORE:
        return "restore";
    case ZDIST_PS_STATS:
        return "stats";
    case ZDIST_PS_SET_OPTIMIZER:
        return "set_optimizer";
    default:
        return "unknown";
    }
}

/* ---- builders ---- */

/* A request with `body` packed, or NULL. */
static zdist_msg_t *
s_request(uint32_t method, const ProtobufCMessage *body)
{
    zdist_msg_t *msg = zdist_msg_new(method);
    if (msg && body && zdist_msg_set_body(msg, body) < 0)
        zdist_msg_destroy(&msg);
    return msg;
}

/* Attaches data as a tensor: copied (ffn NULL) or zero-copy. On failure of
   a zero-copy attach, ffn is called here: ownership passed on entry. */
static int
s_attach(zdist_msg_t *msg, const char *name, zdist_dtype_t dtype, const zdist_shape_t *shape, const void *data,
         size_t nbytes, zdist_free_fn *ffn, void *hint)
{
    if (!ffn)
        return zdist_msg_add_tensor_copy(msg, name, dtype, shape, data, nbytes);
    int rc = zdist_msg_add_tensor(msg, name, dtype, shape, (void *) data, nbytes, ffn, hint);
    if (rc < 0)
        ffn((void *) data, hint);
    return rc;
}

static bool
s_tensor_ok(const zdist_tensor_t *t)
{
    size_t bytes;
    return t && zdist_dtype_is_data(t->dtype) && (t->data || t->nbytes == 0) &&
           zdist_tensor_byte_size(t->dtype, &t->shape, &bytes) == 0 && bytes == t->nbytes;
}

zdist_msg_t *
zdist_ps_request_create(const zdist_ps_var_spec_t *spec)
{
    if (!spec || !spec->name || spec->shape.rank < 0 || spec->shape.rank > ZDIST_MAX_RANK)
        return NULL;
    Zdist__Ps__CreateRequest req = ZDIST__PS__CREATE_REQUEST__INIT;
    Zdist__Ps__Initializer init = ZDIST__PS__INITIALIZER__INIT;
    req.name = (char *) spec->name;
    req.dtype = (char *) zdist_dtype_name(spec->dtype);
    req.n_shape = (size_t) spec->shape.rank;
    req.shape = (int64_t *) spec->shape.dims;
    req.shard_index = spec->shard_index;
    req.row_offset = spec->row_offset;
    req.row_count = spec->row_count;
    req.seed = spec->seed;
    init.kind = (char *) zdist_init_kind_name(spec->init.kind);
    init.value = spec->init.value;
    init.minval = spec->init.minval;
    init.maxval = spec->init.maxval;
    init.mean = spec->init.mean;
    init.stddev = spec->init.stddev;
    req.initializer = &init;
    return s_request(ZDIST_PS_CREATE, &req.base);
}

zdist_msg_t *
zdist_ps_request_pull(const char *name, int32_t shard_index, int64_t row_start, int64_t row_count)
{
    if (!name)
        return NULL;
    Zdist__Ps__PullRequest req = ZDIST__PS__PULL_REQUEST__INIT;
    req.name = (char *) name;
    req.shard_index = shard_index;
    req.row_start = row_start;
    req.row_count = row_count;
    return s_request(ZDIST_PS_PULL, &req.base);
}

zdist_msg_t *
zdist_ps_request_pull_rows(const char *name, const int64_t *ids, size_t nids, zdist_free_fn *ffn, void *hint)
{
    zdist_msg_t *msg = NULL;
    if (name && (ids || nids == 0) && nids <= INT64_MAX) {
        Zdist__Ps__PullRowsRequest req = ZDIST__PS__PULL_ROWS_REQUEST__INIT;
        req.name = (char *) name;
        msg = s_request(ZDIST_PS_PULL_ROWS, &req.base);
    }
    if (!msg) {
        if (ffn)
            ffn((void *) ids, hint);
        return NULL;
    }
    zdist_shape_t shape = {.rank = 1, .dims = {(int64_t) nids}};
    if (s_attach(msg, "ids", ZDIST_DTYPE_INT64, &shape, ids, nids * sizeof *ids, ffn, hint) < 0)
        zdist_msg_destroy(&msg);
    return msg;
}

static zdist_msg_t *
s_write_request(uint32_t method, const char *name, int32_t shard_index, int64_t row_start, int64_t row_count,
                uint64_t sequence)
{
    Zdist__Ps__WriteRequest req = ZDIST__PS__WRITE_REQUEST__INIT;
    req.name = (char *) name;
    req.shard_index = shard_index;
    req.row_start = row_start;
    req.row_count = row_count;
    req.sequence = sequence;
    return s_request(method, &req.base);
}

zdist_msg_t *
zdist_ps_request_write(uint32_t method, const char *name, int32_t shard_index, int64_t row_start,
                       int64_t row_count, uint64_t sequence, const zdist_tensor_t *values, zdist_free_fn *ffn,
                       void *hint)
{
    bool ok = method == ZDIST_PS_PUSH || method == ZDIST_PS_ASSIGN || method == ZDIST_PS_ASSIGN_ADD ||
              method == ZDIST_PS_ASSIGN_SUB;
    zdist_msg_t *msg = NULL;
    if (ok && name && s_tensor_ok(values))
        msg = s_write_request(method, name, shard_index, row_start, row_count, sequence);
    if (!msg) {
        if (ffn && values)
            ffn(values->data, hint);
        return NULL;
    }
    if (s_attach(msg, name, values->dtype, &values->shape, values->data, values->nbytes, ffn, hint) < 0)
        zdist_msg_destroy(&msg);
    return msg;
}

zdist_msg_t *
zdist_ps_request_write_ids(uint32_t method, const char *name, int32_t shard_index, uint64_t sequence,
                           const int64_t *ids, size_t nids, const zdist_tensor_t *rows, zdist_free_fn *ffn,
                           void *hint)
{
    bool ok = method == ZDIST_PS_PUSH || method == ZDIST_PS_SCATTER_ADD || method == ZDIST_PS_SCATTER_UPDATE;
    zdist_msg_t *msg = NULL;
    if (ok && name && (ids || nids == 0) && s_tensor_ok(rows) && rows->shape.rank >= 1 &&
        rows->shape.dims[0] == (int64_t) nids)
        msg = s_write_request(method, name, shard_index, 0, 0, sequence);
    if (!msg) {
        if (ffn) {
            ffn((void *) ids, hint);
            if (rows)
                ffn(rows->data, hint);
        }
        return NULL;
    }
    zdist_shape_t shape = {.rank = 1, .dims = {(int64_t) nids}};
    if (s_attach(msg, "ids", ZDIST_DTYPE_INT64, &shape, ids, nids * sizeof *ids, ffn, hint) < 0) {
        if (ffn)
            ffn(rows->data, hint);
        zdist_msg_destroy(&msg);
        return NULL;
    }
    if (s_attach(msg, name, rows->dtype, &rows->shape, rows->data, rows->nbytes, ffn, hint) < 0)
        zdist_msg_destroy(&msg);
    return msg;
}

zdist_msg_t *
zdist_ps_request_save(const char *dir, int64_t step, int32_t ps_task)
{
    if (!dir)
        return NULL;
    Zdist__Ps__SaveRequest req = ZDIST__PS__SAVE_REQUEST__INIT;
    req.dir = (char *) dir;
    req.step = step;
    req.ps_task = ps_task;
    return s_request(ZDIST_PS_SAVE, &req.base);
}

zdist_msg_t *
zdist_ps_request_restore(const char *dir)
{
    if (!dir)
        return NULL;
    Zdist__Ps__RestoreRequest req = ZDIST__PS__RESTORE_REQUEST__INIT;
    req.dir = (char *) dir;
    return s_request(ZDIST_PS_RESTORE, &req.base);
}

zdist_msg_t *
zdist_ps_request_stats(void)
{
    Zdist__Ps__StatsRequest req = ZDIST__PS__STATS_REQUEST__INIT;
    return s_request(ZDIST_PS_STATS, &req.base);
}

zdist_msg_t *
zdist_ps_request_set_optimizer(const zdist_optim_config_t *opt)
{
    if (!opt)
        return NULL;
    Zdist__Ps__Optimizer req = ZDIST__PS__OPTIMIZER__INIT;
    req.kind = (char *) zdist_optim_kind_name(opt->kind);
    req.learning_rate = opt->learning_rate;
    req.momentum = opt->momentum;
    req.nesterov = opt->nesterov;
    req.initial_accumulator_value = opt->initial_accumulator_value;
    req.beta1 = opt->beta1;
    req.beta2 = opt->beta2;
    req.epsilon = opt->epsilon;
    req.lazy = opt->lazy;
    return s_request(ZDIST_PS_SET_OPTIMIZER, &req.base);
}

/* ---- parsers ---- */

int
zdist_ps_reply_check(const zdist_msg_t *reply, zdist_error_t *err)
{
    if (!reply)
        return zdist_error_set(err, -EINVAL, "no reply");
    int status = zdist_msg_status(reply);
    if (status == ZDIST_STATUS_OK)
        return 0;
    int rc = zdist_status_to_errno(status);
    return zdist_error_set(err, rc ? rc : -EIO, "%s: %s", zdist_status_name(status),
                           zdist_msg_status_message(reply));
}

static int
s_unpack(const zdist_msg_t *reply, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **ret,
         zdist_error_t *err)
{
    int rc = zdist_ps_reply_check(reply, err);
    if (rc < 0)
        return rc;
    rc = zdist_msg_unpack_body(reply, desc, ret, err);
    if (rc < 0)
        zdist_error_prefix(err, "%s reply", zdist_ps_method_name(zdist_msg_method(reply)));
    return rc;
}

int
zdist_ps_reply_values(const zdist_msg_t *reply, zdist_tensor_t *ret_values, zdist_error_t *err)
{
    int rc = zdist_ps_reply_check(reply, err);
    if (rc < 0)
        return rc;
    const zdist_tensor_t *t = zdist_msg_tensor(reply, 0);
    if (!t || zdist_msg_tensor_count(reply) != 1)
        return zdist_error_set(err, -EPROTO, "%s reply: expected one values tensor, got %zu",
                               zdist_ps_method_name(zdist_msg_method(reply)), zdist_msg_tensor_count(reply));
    if (ret_values)
        *ret_values = *t;
    return 0;
}

int
zdist_ps_reply_create(const zdist_msg_t *reply, bool *ret_created, zdist_error_t *err)
{
    ProtobufCMessage *body = NULL;
    int rc = s_unpack(reply, &zdist__ps__create_reply__descriptor, &body, err);
    if (rc < 0)
        return rc;
    if (ret_created)
        *ret_created = ((Zdist__Ps__CreateReply *) body)->created;
    protobuf_c_message_free_unpacked(body, NULL);
    return 0;
}

int
zdist_ps_reply_write(const zdist_msg_t *reply, bool *ret_duplicate, int64_t *ret_step, zdist_error_t *err)
{
    ProtobufCMessage *body = NULL;
    int rc = s_unpack(reply, &zdist__ps__write_reply__descriptor, &body, err);
    if (rc < 0)
        return rc;
    const Zdist__Ps__WriteReply *w = (const Zdist__Ps__WriteReply *) body;
    if (ret_duplicate)
        *ret_duplicate = w->duplicate;
    if (ret_step)
        *ret_step = w->step;
    protobuf_c_message_free_unpacked(body, NULL);
    return 0;
}

int
zdist_ps_reply_save(const zdist_msg_t *reply, uint64_t *ret_bytes, zdist_error_t *err)
{
    ProtobufCMessage *body = NULL;
    int rc = s_unpack(reply, &zdist__ps__save_reply__descriptor, &body, err);
    if (rc < 0)
        return rc;
    if (ret_bytes)
        *ret_bytes = ((Zdist__Ps__SaveReply *) body)->bytes;
    protobuf_c_message_free_unpacked(body, NULL);
    return 0;
}

int
zdist_ps_reply_restore(const zdist_msg_t *reply, int64_t *ret_step, zdist_error_t *err)
{
    ProtobufCMessage *body = NULL;
    int rc = s_unpack(reply, &zdist__ps__restore_reply__descriptor, &body, err);
    if (rc < 0)
        return rc;
    if (ret_step)
        *ret_step = ((Zdist__Ps__RestoreReply *) body)->step;
    protobuf_c_message_free_unpacked(body, NULL);
    return 0;
}

void
zdist_ps_stats_destroy(zdist_ps_stats_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_ps_stats_t *self = *self_p;
    for (size_t i = 0; self->shard_info && i < self->nshard_info; i++)
        free(self->shard_info[i].name);
    free(self->shard_info);
    free(self->methods);
    free(self);
    *self_p = NULL;
}

int
zdist_ps_reply_stats(const zdist_msg_t *reply, zdist_ps_stats_t **ret_stats, zdist_error_t *err)
{
    ProtobufCMessage *body = NULL;
    int rc = s_unpack(reply, &zdist__ps__stats_reply__descriptor, &body, err);
    if (rc < 0)
        return rc;
    const Zdist__Ps__StatsReply *r = (const Zdist__Ps__StatsReply *) body;
    zdist_ps_stats_t *st = calloc(1, sizeof *st);
    if (!st)
        goto nomem;
    st->variables = r->variables;
    st->shards = r->shards;
    st->value_bytes = r->value_bytes;
    st->slot_bytes = r->slot_bytes;
    st->uptime_ms = r->uptime_ms;
    st->incarnation = r->incarnation;
    st->ps_task = r->ps_task;
    snprintf(st->optimizer, sizeof st->optimizer, "%s", r->optimizer ? r->optimizer : "");
    st->methods = calloc(r->n_methods ? r->n_methods : 1, sizeof *st->methods);
    st->shard_info = calloc(r->n_shard_info ? r->n_shard_info : 1, sizeof *st->shard_info);
    if (!st->methods || !st->shard_info)
        goto nomem;
    for (size_t i = 0; i < r->n_methods; i++) {
        const Zdist__Ps__MethodStats *m = r->methods[i];
        zdist_ps_method_stats_t *o = &st->methods[st->nmethods++];
        snprintf(o->name, sizeof o->name, "%s", m->name ? m->name : "");
        o->requests = m->requests;
        o->errors = m->errors;
        o->p50_us = m->p50_us;
        o->p99_us = m->p99_us;
    }
    for (size_t i = 0; i < r->n_shard_info; i++) {
        const Zdist__Ps__ShardInfo *s = r->shard_info[i];
        if (s->n_shape > ZDIST_MAX_RANK) {
            rc = zdist_error_set(err, -EPROTO, "stats reply: shard '%s' has rank %zu", s->name ? s->name : "",
                                 s->n_shape);
            goto fail;
        }
        zdist_ps_shard_info_t *o = &st->shard_info[st->nshard_info];
        if (!(o->name = strdup(s->name ? s->name : "")))
            goto nomem;
        st->nshard_info++;
        o->shard_index = s->shard_index;
        o->dtype = zdist_dtype_from_name(s->dtype ? s->dtype : "");
        o->shape.rank = (int) s->n_shape;
        for (size_t d = 0; d < s->n_shape; d++)
            o->shape.dims[d] = s->shape[d];
        o->row_offset = s->row_offset;
        o->row_count = s->row_count;
        o->step = s->step;
    }
    protobuf_c_message_free_unpacked(body, NULL);
    if (ret_stats)
        *ret_stats = st;
    else
        zdist_ps_stats_destroy(&st);
    return 0;
nomem:
    rc = zdist_error_set(err, -ENOMEM, "stats reply: out of memory");
fail:
    zdist_ps_stats_destroy(&st);
    protobuf_c_message_free_unpacked(body, NULL);
    return rc;
}

/* ---- the per-task client ---- */

struct zdist_ps_client_t {
    zdist_rpc_client_t *rpc;
    zdist_ps_client_options_t opts;
    uint64_t sequence; /* last one handed out */
    uint64_t retransmissions;
};

void
zdist_ps_client_options_default(zdist_ps_client_options_t *opts)
{
    memset(opts, 0, sizeof *opts);
    zdist_rpc_client_options_default(&opts->rpc);
    opts->timeout_ms = 30000;
    opts->retries = 3;
}

void
zdist_ps_client_destroy(zdist_ps_client_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_rpc_client_destroy(&(*self_p)->rpc);
    free(*self_p);
    *self_p = NULL;
}

zdist_ps_client_t *
zdist_ps_client_new(const char *endpoint, const zdist_ps_client_options_t *opts, zdist_error_t *err)
{
    zdist_ps_client_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    if (opts)
        self->opts = *opts;
    else
        zdist_ps_client_options_default(&self->opts);
    if (self->opts.retries < 0)
        self->opts.retries = 0;
    self->rpc = zdist_rpc_client_new(endpoint, &self->opts.rpc, err);
    if (!self->rpc)
        zdist_ps_client_destroy(&self);
    return self;
}

zdist_rpc_client_t *
zdist_ps_client_rpc(zdist_ps_client_t *self)
{
    return self->rpc;
}

uint64_t
zdist_ps_client_next_sequence(zdist_ps_client_t *self)
{
    return ++self->sequence;
}

uint64_t
zdist_ps_client_retransmissions(const zdist_ps_client_t *self)
{
    return self->retransmissions;
}

/* Rebuilds the request of an attempt (the first and every retransmission). */
typedef zdist_msg_t *(s_build_fn)(const void *args);

static bool
s_retryable(const zdist_msg_t *reply)
{
    int status = zdist_msg_status(reply);
    return status == ZDIST_STATUS_UNAVAILABLE || status == ZDIST_STATUS_DEADLINE_EXCEEDED;
}

/* Calls build(args) until a reply that is not a transport failure, or the
   retries are spent. Returns 0 and *ret_reply (its status may be an error),
   or a negative errno (err says what) when no request could be sent. */
static int
s_call_retry(zdist_ps_client_t *self, uint32_t method, s_build_fn *build, const void *args,
             zdist_msg_t **ret_reply, zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    for (int attempt = 0; attempt <= self->opts.retries; attempt++) {
        zdist_msg_t *req = build(args);
        if (!req)
            return zdist_error_set(err, -EINVAL, "%s to %s: invalid arguments (or out of memory)",
                                   zdist_ps_method_name(method), zdist_rpc_client_endpoint(self->rpc));
        zdist_msg_destroy(&reply);
        if (attempt > 0)
            self->retransmissions++;
        int rc = zdist_rpc_client_call(self->rpc, &req, self->opts.timeout_ms, &reply);
        if (rc < 0)
            return zdist_error_set(err, rc, "%s to %s: cannot send: %s", zdist_ps_method_name(method),
                                   zdist_rpc_client_endpoint(self->rpc), strerror(-rc));
        if (!s_retryable(reply))
            break;
    }
    *ret_reply = reply;
    return 0;
}

/* Adds "OP 'name' on ENDPOINT: " before err's text. */
static int
s_context(zdist_ps_client_t *self, int rc, uint32_t method, const char *name, zdist_error_t *err)
{
    if (rc < 0 && err) {
        if (name)
            zdist_error_prefix(err, "%s '%s' on %s", zdist_ps_method_name(method), name,
                               zdist_rpc_client_endpoint(self->rpc));
        else
            zdist_error_prefix(err, "%s on %s", zdist_ps_method_name(method), zdist_rpc_client_endpoint(self->rpc));
    }
    return rc;
}

int
zdist_ps_client_call(zdist_ps_client_t *self, zdist_msg_t **request_p, zdist_msg_t **ret_reply, zdist_error_t *err)
{
    if (!request_p || !*request_p)
        return zdist_error_set(err, -EINVAL, "no request");
    uint32_t method = zdist_msg_method(*request_p);
    int rc = zdist_rpc_client_call(self->rpc, request_p, self->opts.timeout_ms, ret_reply);
    if (rc < 0)
        return zdist_error_set(err, rc, "%s to %s: cannot send: %s", zdist_ps_method_name(method),
                               zdist_rpc_client_endpoint(self->rpc), strerror(-rc));
    return 0;
}

/* create */

static zdist_msg_t *
s_build_create(const void *args)
{
    return zdist_ps_request_create(args);
}

int
zdist_ps_client_create(zdist_ps_client_t *self, const zdist_ps_var_spec_t *spec, bool *ret_created,
                       zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    int rc = s_call_retry(self, ZDIST_PS_CREATE, s_build_create, spec, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_create(reply, ret_created, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_CREATE, spec ? spec->name : NULL, err);
}

/* pulls */

typedef struct {
    const char *name;
    int32_t shard_index;
    int64_t row_start, row_count;
    const int64_t *ids;
    size_t nids;
} s_pull_args_t;

static zdist_msg_t *
s_build_pull(const void *args)
{
    const s_pull_args_t *a = args;
    return zdist_ps_request_pull(a->name, a->shard_index, a->row_start, a->row_count);
}

static zdist_msg_t *
s_build_pull_rows(const void *args)
{
    const s_pull_args_t *a = args;
    return zdist_ps_request_pull_rows(a->name, a->ids, a->nids, NULL, NULL);
}

static int
s_copy_out(const zdist_msg_t *reply, zdist_tensor_t *out, zdist_error_t *err)
{
    zdist_tensor_t got;
    int rc = zdist_ps_reply_values(reply, &got, err);
    if (rc < 0)
        return rc;
    if (out->dtype != ZDIST_DTYPE_INVALID && out->dtype != got.dtype)
        return zdist_error_set(err, -EINVAL, "the values are %s, not %s", zdist_dtype_name(got.dtype),
                               zdist_dtype_name(out->dtype));
    if (got.nbytes > out->nbytes)
        return zdist_error_set(err, -EMSGSIZE, "%zu bytes do not fit the buffer of %zu bytes", got.nbytes,
                               out->nbytes);
    if (got.nbytes)
        memcpy(out->data, got.data, got.nbytes);
    out->name = NULL;
    out->dtype = got.dtype;
    out->shape = got.shape;
    out->nbytes = got.nbytes;
    return 0;
}

int
zdist_ps_client_pull(zdist_ps_client_t *self, const char *name, int32_t shard_index, int64_t row_start,
                     int64_t row_count, zdist_tensor_t *out, zdist_error_t *err)
{
    s_pull_args_t a = {name, shard_index, row_start, row_count, NULL, 0};
    zdist_msg_t *reply = NULL;
    int rc = out ? s_call_retry(self, ZDIST_PS_PULL, s_build_pull, &a, &reply, err)
                 : zdist_error_set(err, -EINVAL, "no output tensor");
    if (rc == 0)
        rc = s_copy_out(reply, out, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_PULL, name, err);
}

int
zdist_ps_client_pull_rows(zdist_ps_client_t *self, const char *name, const int64_t *ids, size_t nids,
                          zdist_tensor_t *out, zdist_error_t *err)
{
    s_pull_args_t a = {name, 0, 0, 0, ids, nids};
    zdist_msg_t *reply = NULL;
    int rc = out ? s_call_retry(self, ZDIST_PS_PULL_ROWS, s_build_pull_rows, &a, &reply, err)
                 : zdist_error_set(err, -EINVAL, "no output tensor");
    if (rc == 0)
        rc = s_copy_out(reply, out, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_PULL_ROWS, name, err);
}

/* writes */

typedef struct {
    uint32_t method;
    const char *name;
    int32_t shard_index;
    int64_t row_start, row_count;
    uint64_t sequence;
    const int64_t *ids;
    size_t nids;
    const zdist_tensor_t *values;
    bool by_ids;
} s_write_args_t;

static zdist_msg_t *
s_build_write(const void *args)
{
    const s_write_args_t *a = args;
    if (a->by_ids)
        return zdist_ps_request_write_ids(a->method, a->name, a->shard_index, a->sequence, a->ids, a->nids,
                                          a->values, NULL, NULL);
    return zdist_ps_request_write(a->method, a->name, a->shard_index, a->row_start, a->row_count, a->sequence,
                                  a->values, NULL, NULL);
}

static int
s_write(zdist_ps_client_t *self, const s_write_args_t *a, zdist_ps_write_result_t *ret, zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    zdist_ps_write_result_t res = {.sequence = a->sequence};
    int rc = s_call_retry(self, a->method, s_build_write, a, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_write(reply, &res.duplicate, &res.step, err);
    zdist_msg_destroy(&reply);
    if (rc == 0 && ret)
        *ret = res;
    return s_context(self, rc, a->method, a->name, err);
}

int
zdist_ps_client_write_seq(zdist_ps_client_t *self, uint32_t method, const char *name, int32_t shard_index,
                          int64_t row_start, int64_t row_count, uint64_t sequence, const zdist_tensor_t *values,
                          zdist_ps_write_result_t *ret, zdist_error_t *err)
{
    s_write_args_t a = {method, name, shard_index, row_start, row_count, sequence, NULL, 0, values, false};
    return s_write(self, &a, ret, err);
}

int
zdist_ps_client_write(zdist_ps_client_t *self, uint32_t method, const char *name, int32_t shard_index,
                      int64_t row_start, int64_t row_count, const zdist_tensor_t *values,
                      zdist_ps_write_result_t *ret, zdist_error_t *err)
{
    return zdist_ps_client_write_seq(self, method, name, shard_index, row_start, row_count,
                                     zdist_ps_client_next_sequence(self), values, ret, err);
}

int
zdist_ps_client_write_ids(zdist_ps_client_t *self, uint32_t method, const char *name, int32_t shard_index,
                          const int64_t *ids, size_t nids, const zdist_tensor_t *rows, zdist_ps_write_result_t *ret,
                          zdist_error_t *err)
{
    s_write_args_t a = {method, name, shard_index, 0, 0, zdist_ps_client_next_sequence(self), ids, nids, rows, true};
    return s_write(self, &a, ret, err);
}

int
zdist_ps_client_push(zdist_ps_client_t *self, const char *name, int32_t shard_index, int64_t row_start,
                     int64_t row_count, const zdist_tensor_t *grad, zdist_ps_write_result_t *ret, zdist_error_t *err)
{
    return zdist_ps_client_write(self, ZDIST_PS_PUSH, name, shard_index, row_start, row_count, grad, ret, err);
}

int
zdist_ps_client_push_sparse(zdist_ps_client_t *self, const char *name, int32_t shard_index, const int64_t *ids,
                            size_t nids, const zdist_tensor_t *grad_rows, zdist_ps_write_result_t *ret,
                            zdist_error_t *err)
{
    return zdist_ps_client_write_ids(self, ZDIST_PS_PUSH, name, shard_index, ids, nids, grad_rows, ret, err);
}

int
zdist_ps_client_assign(zdist_ps_client_t *self, const char *name, int32_t shard_index, int64_t row_start,
                       int64_t row_count, const zdist_tensor_t *values, zdist_ps_write_result_t *ret,
                       zdist_error_t *err)
{
    return zdist_ps_client_write(self, ZDIST_PS_ASSIGN, name, shard_index, row_start, row_count, values, ret, err);
}

int
zdist_ps_client_assign_add(zdist_ps_client_t *self, const char *name, int32_t shard_index, int64_t row_start,
                           int64_t row_count, const zdist_tensor_t *values, zdist_ps_write_result_t *ret,
                           zdist_error_t *err)
{
    return zdist_ps_client_write(self, ZDIST_PS_ASSIGN_ADD, name, shard_index, row_start, row_count, values, ret,
                                 err);
}

int
zdist_ps_client_assign_sub(zdist_ps_client_t *self, const char *name, int32_t shard_index, int64_t row_start,
                           int64_t row_count, const zdist_tensor_t *values, zdist_ps_write_result_t *ret,
                           zdist_error_t *err)
{
    return zdist_ps_client_write(self, ZDIST_PS_ASSIGN_SUB, name, shard_index, row_start, row_count, values, ret,
                                 err);
}

int
zdist_ps_client_scatter_add(zdist_ps_client_t *self, const char *name, int32_t shard_index, const int64_t *ids,
                            size_t nids, const zdist_tensor_t *rows, zdist_ps_write_result_t *ret,
                            zdist_error_t *err)
{
    return zdist_ps_client_write_ids(self, ZDIST_PS_SCATTER_ADD, name, shard_index, ids, nids, rows, ret, err);
}

int
zdist_ps_client_scatter_update(zdist_ps_client_t *self, const char *name, int32_t shard_index, const int64_t *ids,
                               size_t nids, const zdist_tensor_t *rows, zdist_ps_write_result_t *ret,
                               zdist_error_t *err)
{
    return zdist_ps_client_write_ids(self, ZDIST_PS_SCATTER_UPDATE, name, shard_index, ids, nids, rows, ret, err);
}

/* save, restore, stats, optimizer */

typedef struct {
    const char *dir;
    int64_t step;
    int32_t ps_task;
} s_ckpt_args_t;

static zdist_msg_t *
s_build_save(const void *args)
{
    const s_ckpt_args_t *a = args;
    return zdist_ps_request_save(a->dir, a->step, a->ps_task);
}

static zdist_msg_t *
s_build_restore(const void *args)
{
    return zdist_ps_request_restore(((const s_ckpt_args_t *) args)->dir);
}

int
zdist_ps_client_save(zdist_ps_client_t *self, const char *dir, int64_t step, int32_t ps_task, uint64_t *ret_bytes,
                     zdist_error_t *err)
{
    s_ckpt_args_t a = {dir, step, ps_task};
    zdist_msg_t *reply = NULL;
    int rc = s_call_retry(self, ZDIST_PS_SAVE, s_build_save, &a, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_save(reply, ret_bytes, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_SAVE, dir, err);
}

int
zdist_ps_client_restore(zdist_ps_client_t *self, const char *dir, int64_t *ret_step, zdist_error_t *err)
{
    s_ckpt_args_t a = {dir, 0, 0};
    zdist_msg_t *reply = NULL;
    int rc = s_call_retry(self, ZDIST_PS_RESTORE, s_build_restore, &a, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_restore(reply, ret_step, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_RESTORE, dir, err);
}

static zdist_msg_t *
s_build_stats(const void *args)
{
    (void) args;
    return zdist_ps_request_stats();
}

int
zdist_ps_client_stats(zdist_ps_client_t *self, zdist_ps_stats_t **ret_stats, zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    int rc = s_call_retry(self, ZDIST_PS_STATS, s_build_stats, NULL, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_stats(reply, ret_stats, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_STATS, NULL, err);
}

static zdist_msg_t *
s_build_set_optimizer(const void *args)
{
    return zdist_ps_request_set_optimizer(args);
}

int
zdist_ps_client_set_optimizer(zdist_ps_client_t *self, const zdist_optim_config_t *opt, zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    int rc = s_call_retry(self, ZDIST_PS_SET_OPTIMIZER, s_build_set_optimizer, opt, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_write(reply, NULL, NULL, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_SET_OPTIMIZER, opt ? zdist_optim_kind_name(opt->kind) : NULL, err);
}

/* ---- endpoints ---- */

int
zdist_ps_endpoint_parse(const char *text, char *buf, size_t size, zdist_error_t *err)
{
    if (!text || !*text)
        return zdist_error_set(err, -EINVAL, "address is empty; give host:port or tcp://host:port");
    const char *hostport = text;
    const char *scheme = strstr(text, "://");
    if (scheme) {
        if (strncmp(text, "tcp://", 6) != 0)
            return zdist_error_set(err, -EINVAL, "address '%.200s' must be host:port or tcp://host:port", text);
        hostport = text + 6;
    }
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport)
        return zdist_error_set(err, -EINVAL, "address '%.200s' has no host:port; give e.g. 127.0.0.1:5000", text);
    if (hostport[0] == '[' && colon[-1] != ']')
        return zdist_error_set(err, -EINVAL, "address '%.200s': an IPv6 host goes in brackets, [::1]:5000", text);
    int64_t port;
    if (zdist_parse_int64(colon + 1, 1, 65535, &port) < 0)
        return zdist_error_set(err, -EINVAL, "address '%.200s': port '%.20s' must be a number in 1..65535", text,
                               colon + 1);
    for (const char *p = hostport; p < colon; p++)
        if (*p == ' ' || *p == '/' || *p == '*')
            return zdist_error_set(err, -EINVAL, "address '%.200s': host has a '%c'", text, *p);
    int n = snprintf(buf, size, "tcp://%s", hostport);
    if (n < 0 || (size_t) n >= size)
        return zdist_error_set(err, -EINVAL, "address '%.200s' is too long", text);
    return 0;
}
