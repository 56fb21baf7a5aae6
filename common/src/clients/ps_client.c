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
    opts->part_bytes = ZDIST_PS_PART_BYTES;
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

/* ---- runs: the one retry loop ---- */

static bool
s_retryable(const zdist_msg_t *reply)
{
    int status = zdist_msg_status(reply);
    return status == ZDIST_STATUS_UNAVAILABLE || status == ZDIST_STATUS_DEADLINE_EXCEEDED;
}

/* Sends an attempt of op: the first numbers a write without a sequence. */
static void
s_op_send(zdist_ps_op_t *op)
{
    zdist_ps_client_t *c = op->client;
    op->reply = NULL;
    op->id_ = 0;
    if (!c) {
        op->rc = -EINVAL;
        return;
    }
    uint64_t *seq = zdist_ps_method_is_write(op->request.method) ? &op->request.write.sequence
                    : op->request.method == ZDIST_PS_PUSH_PULL   ? &op->request.push_pull.sequence
                                                                 : NULL;
    if (op->attempts == 0 && seq && *seq == 0)
        *seq = zdist_ps_client_next_sequence(c);
    zdist_msg_t *msg = zdist_ps_request_encode(&op->request);
    if (!msg) {
        op->rc = -EINVAL;
        return;
    }
    if (op->attempts++ > 0)
        c->retransmissions++;
    op->rc = zdist_rpc_client_send(c->rpc, &msg, c->opts.timeout_ms, &op->id_);
}

/* Waits for the reply of op's attempt in flight. The rpc client completes
   every call by its deadline (DEADLINE_EXCEEDED) or when the connection
   drops (UNAVAILABLE). */
static void
s_op_wait(zdist_ps_op_t *op)
{
    if (op->rc == 0 && !op->reply) {
        int rc = zdist_rpc_client_recv_id(op->client->rpc, op->id_, -1, &op->reply);
        if (rc < 0)
            op->rc = rc;
    }
}

void
zdist_ps_client_run(zdist_ps_op_t *ops, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ops[i].attempts = 0;
        s_op_send(&ops[i]);
    }
    bool again = n > 0;
    while (again) {
        for (size_t i = 0; i < n; i++)
            s_op_wait(&ops[i]);
        again = false;
        for (size_t i = 0; i < n; i++) {
            zdist_ps_op_t *op = &ops[i];
            if (op->rc < 0 || !s_retryable(op->reply) || op->attempts > (unsigned) op->client->opts.retries)
                continue;
            zdist_msg_destroy(&op->reply);
            s_op_send(op);
            again = true;
        }
    }
}

void
zdist_ps_ops_release(zdist_ps_op_t *ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        zdist_msg_destroy(&ops[i].reply);
}

/* 0 when op has a reply (its status may be an error), else a negative
   errno and err says why no request could be sent. */
static int
s_op_rc(const zdist_ps_op_t *op, zdist_error_t *err)
{
    const char *method = zdist_ps_method_name(op->request.method);
    const char *endpoint = zdist_rpc_client_endpoint(op->client->rpc);
    if (op->rc == -EINVAL && !op->reply)
        return zdist_error_set(err, -EINVAL, "%s to %s: invalid arguments (or out of memory)", method, endpoint);
    if (op->rc < 0)
        return zdist_error_set(err, op->rc, "%s to %s: cannot send: %s", method, endpoint, strerror(-op->rc));
    return 0;
}

/* Runs one request through this client. Returns 0 and *ret_reply (its
   status may be an error), or a negative errno (err says what) when no
   request could be sent. *req gets the sequence a write was sent with. */
static int
s_call(zdist_ps_client_t *self, zdist_ps_request_t *req, zdist_msg_t **ret_reply, zdist_error_t *err)
{
    zdist_ps_op_t op = {.client = self, .request = *req};
    zdist_ps_client_run(&op, 1);
    *req = op.request;
    int rc = s_op_rc(&op, err);
    if (rc == 0)
        *ret_reply = op.reply;
    return rc;
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

int64_t
zdist_ps_client_set_timeout(zdist_ps_client_t *self, int64_t timeout_ms)
{
    int64_t before = self->opts.timeout_ms;
    if (timeout_ms > 0)
        self->opts.timeout_ms = timeout_ms;
    return before;
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

/* ---- one call per operation ---- */

int
zdist_ps_client_create(zdist_ps_client_t *self, const zdist_ps_var_spec_t *spec, bool *ret_created,
                       zdist_error_t *err)
{
    if (!spec)
        return zdist_error_set(err, -EINVAL, "create on %s: no variable spec", zdist_rpc_client_endpoint(self->rpc));
    zdist_ps_request_t req = {.method = ZDIST_PS_CREATE, .create = *spec};
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, &req, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_create(reply, ret_created, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_CREATE, spec->name, err);
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

/* A read into out. */
static int
s_read(zdist_ps_client_t *self, zdist_ps_request_t *req, const char *name, zdist_tensor_t *out, zdist_error_t *err)
{
    zdist_msg_t *reply = NULL;
    int rc = out ? s_call(self, req, &reply, err) : zdist_error_set(err, -EINVAL, "no output tensor");
    if (rc == 0)
        rc = s_copy_out(reply, out, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, req->method, name, err);
}

int
zdist_ps_client_pull(zdist_ps_client_t *self, const char *name, int32_t shard_index, int64_t row_start,
                     int64_t row_count, zdist_tensor_t *out, zdist_error_t *err)
{
    zdist_ps_request_t req = {.method = ZDIST_PS_PULL, .pull = {name, shard_index, row_start, row_count}};
    return s_read(self, &req, name, out, err);
}

int
zdist_ps_client_pull_rows(zdist_ps_client_t *self, const char *name, const int64_t *ids, size_t nids,
                          zdist_tensor_t *out, zdist_error_t *err)
{
    zdist_ps_request_t req = {.method = ZDIST_PS_PULL_ROWS, .pull_rows = {name, ids, nids}};
    return s_read(self, &req, name, out, err);
}

/* A dense push in parts (zdist_ps_write_parts), all sent at once through
   one run. Like one write: the first error; duplicate when every part was;
   the step after the last part; the first part's sequence (a replay with
   zdist_ps_client_write_seq splits the same way and reuses the same ones). */
static int
s_write_parts(zdist_ps_client_t *self, const zdist_ps_write_t *parts, size_t n, zdist_ps_write_result_t *res,
              zdist_error_t *err)
{
    zdist_ps_op_t *ops = calloc(n, sizeof *ops);
    if (!ops)
        return zdist_error_set(err, -ENOMEM, "push to %s: out of memory", zdist_rpc_client_endpoint(self->rpc));
    for (size_t i = 0; i < n; i++)
        ops[i] = (zdist_ps_op_t){.client = self, .request = {.method = ZDIST_PS_PUSH, .write = parts[i]}};
    zdist_ps_client_run(ops, n);
    int rc = 0;
    res->duplicate = true;
    for (size_t i = 0; i < n && rc == 0; i++) {
        bool dup = false;
        if ((rc = s_op_rc(&ops[i], err)) == 0)
            rc = zdist_ps_reply_write(ops[i].reply, &dup, &res->step, err);
        if (rc < 0)
            zdist_error_prefix(err, "part %zu of %zu (rows from %lld)", i + 1, n, (long long) parts[i].part_row);
        res->duplicate = res->duplicate && dup;
    }
    res->sequence = ops[0].request.write.sequence;
    zdist_ps_ops_release(ops, n);
    free(ops);
    return rc;
}

/* A write, numbered by s_call when its sequence is 0. */
static int
s_write(zdist_ps_client_t *self, uint32_t method, const zdist_ps_write_t *w, const zdist_tensor_t *values,
        zdist_ps_write_result_t *ret, zdist_error_t *err)
{
    zdist_ps_request_t req = {.method = method, .write = *w};
    zdist_msg_t *reply = NULL;
    zdist_ps_write_result_t res = {0};
    int rc = -EINVAL;
    if (values)
        req.write.values = *values;
    zdist_ps_write_t parts[ZDIST_PS_MAX_PARTS];
    size_t nparts = values ? zdist_ps_write_parts(method, &req.write, self->opts.part_bytes, parts) : 1;
    if (nparts > 1) {
        rc = s_write_parts(self, parts, nparts, &res, err);
    } else if (values && zdist_ps_method_is_write(method)) {
        if ((rc = s_call(self, &req, &reply, err)) == 0)
            rc = zdist_ps_reply_write(reply, &res.duplicate, &res.step, err);
        res.sequence = req.write.sequence;
    } else {
        zdist_error_set(err, rc, "%s to %s: invalid arguments (or out of memory)", zdist_ps_method_name(method),
                        zdist_rpc_client_endpoint(self->rpc));
    }
    zdist_msg_destroy(&reply);
    if (rc == 0 && ret)
        *ret = res;
    return s_context(self, rc, method, w->name, err);
}

int
zdist_ps_client_write_seq(zdist_ps_client_t *self, uint32_t method, const char *name, int32_t shard_index,
                          int64_t row_start, int64_t row_count, uint64_t sequence, const zdist_tensor_t *values,
                          zdist_ps_write_result_t *ret, zdist_error_t *err)
{
    zdist_ps_write_t w = {.name = name, .shard_index = shard_index, .row_start = row_start, .row_count = row_count,
                          .sequence = sequence}; /* 0: numbered when sent (each part of a push its own) */
    return s_write(self, method, &w, values, ret, err);
}

int
zdist_ps_client_write(zdist_ps_client_t *self, uint32_t method, const char *name, int32_t shard_index,
                      int64_t row_start, int64_t row_count, const zdist_tensor_t *values,
                      zdist_ps_write_result_t *ret, zdist_error_t *err)
{
    zdist_ps_write_t w = {.name = name, .shard_index = shard_index, .row_start = row_start, .row_count = row_count};
    return s_write(self, method, &w, values, ret, err);
}

int
zdist_ps_client_write_ids(zdist_ps_client_t *self, uint32_t method, const char *name, int32_t shard_index,
                          const int64_t *ids, size_t nids, const zdist_tensor_t *rows, zdist_ps_write_result_t *ret,
                          zdist_error_t *err)
{
    zdist_ps_write_t w = {.name = name, .shard_index = shard_index, .by_ids = true, .ids = ids, .nids = nids};
    return s_write(self, method, &w, rows, ret, err);
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

/* ---- save, restore, stats, optimizer ---- */

int
zdist_ps_client_save(zdist_ps_client_t *self, const char *dir, int64_t step, int32_t ps_task, uint64_t *ret_bytes,
                     zdist_error_t *err)
{
    return zdist_ps_client_save_job(self, dir, step, ps_task, NULL, ret_bytes, err);
}

int
zdist_ps_client_save_job(zdist_ps_client_t *self, const char *dir, int64_t step, int32_t ps_task, const char *job,
                         uint64_t *ret_bytes, zdist_error_t *err)
{
    zdist_ps_save_t save = {dir, step, ps_task, job, 0};
    return zdist_ps_client_save_with(self, &save, ret_bytes, err);
}

int
zdist_ps_client_save_with(zdist_ps_client_t *self, const zdist_ps_save_t *save, uint64_t *ret_bytes,
                          zdist_error_t *err)
{
    zdist_ps_request_t req = {.method = ZDIST_PS_SAVE, .save = *save};
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, &req, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_save(reply, ret_bytes, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_SAVE, save->dir, err);
}

int
zdist_ps_client_restore(zdist_ps_client_t *self, const char *dir, int64_t *ret_step, zdist_error_t *err)
{
    return zdist_ps_client_restore_job(self, dir, NULL, ret_step, err);
}

int
zdist_ps_client_restore_job(zdist_ps_client_t *self, const char *dir, const char *job, int64_t *ret_step,
                            zdist_error_t *err)
{
    zdist_ps_request_t req = {.method = ZDIST_PS_RESTORE, .restore = {dir, job}};
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, &req, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_restore(reply, ret_step, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_RESTORE, dir, err);
}

int
zdist_ps_client_drop_job(zdist_ps_client_t *self, const char *job, bool force, uint64_t *ret_shards,
                         uint64_t *ret_bytes, zdist_error_t *err)
{
    zdist_ps_request_t req = {.method = ZDIST_PS_DROP_JOB, .drop_job = {job, force}};
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, &req, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_drop_job(reply, ret_shards, ret_bytes, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_DROP_JOB, job, err);
}

int
zdist_ps_client_stats(zdist_ps_client_t *self, zdist_ps_stats_t **ret_stats, zdist_error_t *err)
{
    zdist_ps_request_t req = {.method = ZDIST_PS_STATS};
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, &req, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_stats(reply, ret_stats, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_STATS, NULL, err);
}

int
zdist_ps_client_set_optimizer(zdist_ps_client_t *self, const zdist_optim_config_t *opt, zdist_error_t *err)
{
    return zdist_ps_client_set_optimizer_job(self, opt, NULL, err);
}

int
zdist_ps_client_set_optimizer_job(zdist_ps_client_t *self, const zdist_optim_config_t *opt, const char *job,
                                  zdist_error_t *err)
{
    if (!opt)
        return zdist_error_set(err, -EINVAL, "set_optimizer on %s: no optimizer", zdist_rpc_client_endpoint(self->rpc));
    zdist_ps_request_t req = {.method = ZDIST_PS_SET_OPTIMIZER, .optimizer = *opt, .optimizer_job = job};
    zdist_msg_t *reply = NULL;
    int rc = s_call(self, &req, &reply, err);
    if (rc == 0)
        rc = zdist_ps_reply_write(reply, NULL, NULL, err);
    zdist_msg_destroy(&reply);
    return s_context(self, rc, ZDIST_PS_SET_OPTIMIZER, zdist_optim_kind_name(opt->kind), err);
}
