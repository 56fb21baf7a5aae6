/* zdist parameter-server client: one client per ps task, retries, exactly-once writes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/ps_client.h"

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
