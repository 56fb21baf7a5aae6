/* psd_server: ps.proto handlers over the shard store, run as a czmq actor. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps.pb-c.h"
#include "wire/body.h"
#include "psd_ckpt.h"
#include "psd_server.h"
#include "psd_shard.h"
#include "zdist/daemon.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

typedef struct {
    psd_server_config_t config;
    psd_store_t *store;
    zdist_rpc_server_t *rpc;
    int64_t started_ms;
} self_t;

/* Sets the reply's status and logs the refusal once, here. */
static int
s_refuse(zdist_rpc_call_t *call, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
s_refuse(zdist_rpc_call_t *call, int status, const char *fmt, ...)
{
    char text[ZDIST_ERROR_TEXT_MAX + 128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    zsys_warning("refused method %u from %s: %s: %s", zdist_rpc_call_method(call),
                 zdist_msg_peer(zdist_rpc_call_request(call)), zdist_status_name(status), text);
    return zdist_rpc_call_fail(call, status, "%s", text);
}

static int
s_refuse_err(zdist_rpc_call_t *call, int rc, const zdist_error_t *err)
{
    return s_refuse(call, zdist_status_from_errno(rc), "%s", err->text[0] ? err->text : strerror(-rc));
}

static psd_shard_t *
s_find(self_t *self, zdist_rpc_call_t *call, const char *name, int32_t shard_index)
{
    psd_shard_t *shard = psd_store_find(self->store, name, shard_index);
    if (!shard)
        s_refuse(call, ZDIST_STATUS_NOT_FOUND, "variable '%s' shard %d is not on ps task %d; create it first",
                 name, shard_index, self->config.ps_task);
    return shard;
}

/* Reply shape of `nrows` rows of a shard: [nrows, dims[1:]] (scalars: []). */
static void
s_rows_shape(const psd_shard_spec_t *spec, int64_t nrows, zdist_shape_t *ret)
{
    *ret = spec->shape;
    if (ret->rank > 0)
        ret->dims[0] = nrows;
}

static int
s_create(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Ps__CreateRequest *req = (const Zdist__Ps__CreateRequest *) zdist_rpc_call_body(call);
    zdist_error_t err = {0};
    psd_shard_spec_t spec = {0};
    spec.name = req->name;
    spec.dtype = zdist_dtype_from_name(req->dtype);
    if (!zdist_dtype_is_data(spec.dtype))
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                        "create '%s': dtype '%s' cannot be stored; use float32, float64, int32, int64 or uint8",
                        req->name, req->dtype);
    if (zdist_shape_init(&spec.shape, (int) (req->n_shape <= ZDIST_MAX_RANK ? req->n_shape : ZDIST_MAX_RANK + 1),
                         req->shape) < 0)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                        "create '%s': shape must have rank <= %d and no negative dimension", req->name,
                        ZDIST_MAX_RANK);
    spec.shard_index = req->shard_index;
    spec.row_offset = req->row_offset;
    spec.rows = req->row_count;
    spec.seed = req->seed;
    spec.init.kind = ZDIST_INIT_ZEROS;
    if (req->initializer && req->initializer->kind && *req->initializer->kind) {
        zdist_init_kind_t kind;
        if (zdist_init_kind_from_name(req->initializer->kind, &kind) < 0)
            return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                            "create '%s': unknown initializer '%s'; use zeros, ones, constant, random_uniform, "
                            "random_normal, truncated_normal or glorot_uniform",
                            req->name, req->initializer->kind);
        spec.init.kind = kind;
        spec.init.value = req->initializer->value;
        spec.init.minval = req->initializer->minval;
        spec.init.maxval = req->initializer->maxval;
        spec.init.mean = req->initializer->mean;
        spec.init.stddev = req->initializer->stddev;
    }
    size_t bytes;
    if (zdist_tensor_byte_size(spec.dtype, &spec.shape, &bytes) < 0)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT, "create '%s': the shape overflows", req->name);
    bool existed = psd_store_find(self->store, req->name, req->shard_index) != NULL;
    int rc = psd_store_create(self->store, &spec, NULL, &err);
    if (rc < 0)
        return s_refuse_err(call, rc, &err);
    Zdist__Ps__CreateReply reply = ZDIST__PS__CREATE_REPLY__INIT;
    reply.created = !existed;
    if (!existed)
        zsys_info("created variable '%s' shard %d rows %lld..%lld (%s)", req->name, req->shard_index,
                  (long long) spec.row_offset, (long long) (spec.row_offset + spec.rows), req->dtype);
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
}

static int
s_check_reply_bytes(self_t *self, zdist_rpc_call_t *call, const char *name, size_t bytes)
{
    if (bytes > self->config.max_tensor_bytes || bytes > self->config.limits.max_message_bytes)
        return s_refuse(call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                        "reading %zu bytes of '%s' exceeds the limit of %zu bytes per tensor; read fewer rows",
                        bytes, name, self->config.max_tensor_bytes);
    return 0;
}

/* Adds the reply tensor for nrows rows of a variable (checked against the
   limits) and hands back its buffer for the rows to be read into. */
static int
s_reply_rows(self_t *self, zdist_rpc_call_t *call, const char *name, const psd_shard_spec_t *spec, int64_t nrows,
             size_t row_bytes, void **ret_buf, size_t *ret_bytes)
{
    zdist_shape_t shape;
    s_rows_shape(spec, nrows, &shape);
    size_t bytes = (size_t) nrows * row_bytes;
    int rc = s_check_reply_bytes(self, call, name, bytes);
    if (rc < 0)
        return rc;
    rc = zdist_msg_add_tensor_alloc(zdist_rpc_call_reply(call), name, spec->dtype, &shape, ret_buf);
    if (rc < 0)
        return rc;
    *ret_bytes = bytes;
    return 0;
}

static int
s_pull(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Ps__PullRequest *req = (const Zdist__Ps__PullRequest *) zdist_rpc_call_body(call);
    psd_shard_t *shard = s_find(self, call, req->name, req->shard_index);
    if (!shard)
        return -ENOENT;
    const psd_shard_spec_t *spec = psd_shard_spec(shard);
    int64_t start = req->row_count == 0 ? spec->row_offset : req->row_start;
    int64_t n = req->row_count == 0 ? spec->rows : req->row_count;
    if (n < 0 || start < spec->row_offset || start > spec->row_offset + spec->rows - n)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                        "pull '%s' shard %d: rows %lld..%lld are outside the shard's rows %lld..%lld", req->name,
                        req->shard_index, (long long) start, (long long) (start + n), (long long) spec->row_offset,
                        (long long) (spec->row_offset + spec->rows));
    void *buf;
    size_t bytes;
    int rc = s_reply_rows(self, call, req->name, spec, n, psd_shard_row_bytes(shard), &buf, &bytes);
    if (rc < 0)
        return rc;
    zdist_error_t err = {0};
    rc = psd_shard_read(shard, start, req->row_count == 0 ? PSD_WHOLE_SHARD : n, buf, bytes, &err);
    return rc < 0 ? s_refuse_err(call, rc, &err) : 0;
}

/* Some shard of variable `name` on this ps (for its dtype and row shape). */
static psd_shard_t *
s_any_shard(self_t *self, const char *name)
{
    size_t n = psd_store_list(self->store, NULL, 0);
    psd_shard_t **all = calloc(n ? n : 1, sizeof *all);
    psd_shard_t *found = NULL;
    if (!all)
        return NULL;
    n = psd_store_list(self->store, all, n);
    for (size_t i = 0; i < n && !found; i++)
        if (strcmp(psd_shard_spec(all[i])->name, name) == 0)
            found = all[i];
    free(all);
    return found;
}

/* The int64 [n] ids tensor of a request, or a refusal. */
static const zdist_tensor_t *
s_ids(zdist_rpc_call_t *call, size_t index)
{
    const zdist_tensor_t *t = zdist_msg_tensor(zdist_rpc_call_request(call), index);
    if (!t || t->dtype != ZDIST_DTYPE_INT64 || t->shape.rank != 1) {
        s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT, "tensor %zu must be the ids: int64 with shape [n]", index);
        return NULL;
    }
    return t;
}

static int
s_pull_rows(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Ps__PullRowsRequest *req = (const Zdist__Ps__PullRowsRequest *) zdist_rpc_call_body(call);
    const zdist_tensor_t *ids = s_ids(call, 0);
    if (!ids)
        return -EINVAL;
    size_t nids = (size_t) ids->shape.dims[0];
    psd_shard_t *any = s_any_shard(self, req->name);
    if (!any)
        return s_refuse(call, ZDIST_STATUS_NOT_FOUND, "variable '%s' is not on ps task %d", req->name,
                        self->config.ps_task);
    const psd_shard_spec_t *spec = psd_shard_spec(any);
    if (spec->shape.rank == 0)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT, "variable '%s' is a scalar: pull it whole", req->name);
    void *buf;
    size_t bytes;
    int rc = s_reply_rows(self, call, req->name, spec, (int64_t) nids, psd_shard_row_bytes(any), &buf, &bytes);
    if (rc < 0)
        return rc;
    zdist_error_t err = {0};
    /* zdist_wire_recv hands over payloads aligned for their dtype. */
    rc = psd_store_read_ids(self->store, req->name, ids->data, nids, buf, bytes, &err);
    return rc < 0 ? s_refuse_err(call, rc, &err) : 0;
}

static psd_op_t
s_op_for(uint32_t method, size_t ntensors)
{
    switch (method) {
    case ZDIST__PS__METHOD__PS_PUSH:
        return ntensors == 2 ? PSD_OP_APPLY_SPARSE : PSD_OP_APPLY_DENSE;
    case ZDIST__PS__METHOD__PS_ASSIGN:
        return PSD_OP_ASSIGN;
    case ZDIST__PS__METHOD__PS_ASSIGN_ADD:
        return PSD_OP_ASSIGN_ADD;
    case ZDIST__PS__METHOD__PS_ASSIGN_SUB:
        return PSD_OP_ASSIGN_SUB;
    case ZDIST__PS__METHOD__PS_SCATTER_ADD:
        return PSD_OP_SCATTER_ADD;
    default:
        return PSD_OP_SCATTER_UPDATE;
    }
}

static int
s_write(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Ps__WriteRequest *req = (const Zdist__Ps__WriteRequest *) zdist_rpc_call_body(call);
    const zdist_msg_t *msg = zdist_rpc_call_request(call);
    size_t ntensors = zdist_msg_tensor_count(msg);
    psd_op_t op = s_op_for(zdist_rpc_call_method(call), ntensors);
    bool by_ids = op == PSD_OP_APPLY_SPARSE || op == PSD_OP_SCATTER_ADD || op == PSD_OP_SCATTER_UPDATE;
    if (by_ids && ntensors != 2)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                        "write to '%s' by ids takes two tensors (ids int64 [n], rows [n, ...]), got %zu", req->name,
                        ntensors);
    psd_shard_t *shard = s_find(self, call, req->name, req->shard_index);
    if (!shard)
        return -ENOENT;
    psd_write_t w = {0};
    w.op = op;
    w.client_id = zdist_msg_client_id(msg);
    w.sequence = req->sequence;
    const zdist_tensor_t *values = zdist_msg_tensor(msg, by_ids ? 1 : 0);
    if (by_ids) {
        const zdist_tensor_t *ids = s_ids(call, 0);
        if (!ids)
            return -EINVAL;
        w.ids = ids->data;
        w.nids = (size_t) ids->shape.dims[0];
        if (values->shape.rank < 1 || values->shape.dims[0] != (int64_t) w.nids)
            return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                            "write to '%s': %zu ids but the rows tensor has %lld rows", req->name, w.nids,
                            values->shape.rank ? (long long) values->shape.dims[0] : 0LL);
    } else {
        w.row_start = req->row_count == 0 ? psd_shard_spec(shard)->row_offset : req->row_start;
        w.nrows = req->row_count == 0 ? PSD_WHOLE_SHARD : req->row_count;
    }
    if (values->nbytes > self->config.max_tensor_bytes)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                        "write to '%s': tensor of %zu bytes exceeds the limit of %zu bytes", req->name,
                        values->nbytes, self->config.max_tensor_bytes);
    w.dtype = values->dtype;
    w.nbytes = values->nbytes;
    zdist_error_t err = {0};
    w.data = values->data; /* aligned for its dtype by zdist_wire_recv */
    int rc = psd_shard_write(shard, &w, &err);
    if (rc < 0)
        return s_refuse_err(call, rc, &err);
    Zdist__Ps__WriteReply reply = ZDIST__PS__WRITE_REPLY__INIT;
    reply.duplicate = rc == PSD_DUPLICATE;
    reply.step = psd_shard_step(shard);
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
}

static int
s_save(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Ps__SaveRequest *req = (const Zdist__Ps__SaveRequest *) zdist_rpc_call_body(call);
    if (!req->dir || !*req->dir)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT, "save: dir is empty; give a checkpoint directory");
    zdist_error_t err = {0};
    int64_t t0 = zdist_clock_now_ms();
    int rc = psd_ckpt_save(self->store, req->dir, req->step, self->config.ps_task, &err);
    if (rc < 0)
        return s_refuse_err(call, rc, &err);
    psd_store_stats_t st;
    psd_store_stats(self->store, &st);
    zsys_info("saved step %lld to '%s' (%llu bytes, %lld ms)", (long long) req->step, req->dir,
              (unsigned long long) (st.value_bytes + st.slot_bytes), (long long) (zdist_clock_now_ms() - t0));
    Zdist__Ps__SaveReply reply = ZDIST__PS__SAVE_REPLY__INIT;
    reply.bytes = st.value_bytes + st.slot_bytes;
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
}

static int
s_restore(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Ps__RestoreRequest *req = (const Zdist__Ps__RestoreRequest *) zdist_rpc_call_body(call);
    zdist_error_t err = {0};
    int64_t step = 0;
    int rc = psd_ckpt_restore(self->store, req->dir, &step, &err);
    if (rc < 0)
        return s_refuse_err(call, rc, &err);
    zsys_info("restored step %lld from '%s'", (long long) step, req->dir);
    Zdist__Ps__RestoreReply reply = ZDIST__PS__RESTORE_REPLY__INIT;
    reply.step = step;
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
}

static int
s_set_optimizer(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const Zdist__Ps__Optimizer *req = (const Zdist__Ps__Optimizer *) zdist_rpc_call_body(call);
    zdist_optim_kind_t kind;
    if (zdist_optim_kind_from_name(req->kind, &kind) < 0)
        return s_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                        "optimizer '%s' is unknown; use sgd, momentum, adagrad or adam", req->kind);
    zdist_optim_config_t cfg;
    zdist_optim_config_default(&cfg, kind);
    /* Zero means "not given": keep the Keras default. */
    if (req->learning_rate != 0)
        cfg.learning_rate = req->learning_rate;
    if (req->momentum != 0)
        cfg.momentum = req->momentum;
    cfg.nesterov = req->nesterov;
    if (req->initial_accumulator_value != 0)
        cfg.initial_accumulator_value = req->initial_accumulator_value;
    if (req->beta1 != 0)
        cfg.beta1 = req->beta1;
    if (req->beta2 != 0)
        cfg.beta2 = req->beta2;
    if (req->epsilon != 0)
        cfg.epsilon = req->epsilon;
    cfg.lazy = req->lazy;
    zdist_error_t err = {0};
    int rc = psd_store_set_optimizer(self->store, &cfg, &err);
    if (rc < 0)
        return s_refuse_err(call, rc, &err);
    zsys_info("optimizer %s, learning rate %g", zdist_optim_kind_name(kind), cfg.learning_rate);
    Zdist__Ps__WriteReply reply = ZDIST__PS__WRITE_REPLY__INIT;
    return zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
}

static int s_stats(zdist_rpc_call_t *call, void *state);

/* Transitional: bodies passed through undecoded until this service has typed ones. */
static const zdist_rpc_body_t s_body_ps_create_request = {&zdist__ps__create_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_ps_optimizer = {&zdist__ps__optimizer__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_ps_pull_request = {&zdist__ps__pull_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_ps_pull_rows_request = {&zdist__ps__pull_rows_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_ps_restore_request = {&zdist__ps__restore_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_ps_save_request = {&zdist__ps__save_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_ps_stats_request = {&zdist__ps__stats_request__descriptor, 0, NULL, NULL};
static const zdist_rpc_body_t s_body_ps_write_request = {&zdist__ps__write_request__descriptor, 0, NULL, NULL};

static const zdist_rpc_method_t s_methods[] = {
    {ZDIST__PS__METHOD__PS_CREATE, "create", &s_body_ps_create_request, s_create, 0, 0},
    {ZDIST__PS__METHOD__PS_PULL, "pull", &s_body_ps_pull_request, s_pull, 0, 0},
    {ZDIST__PS__METHOD__PS_PULL_ROWS, "pull_rows", &s_body_ps_pull_rows_request, s_pull_rows, 1, 1},
    {ZDIST__PS__METHOD__PS_PUSH, "push", &s_body_ps_write_request, s_write, 1, 2},
    {ZDIST__PS__METHOD__PS_ASSIGN, "assign", &s_body_ps_write_request, s_write, 1, 1},
    {ZDIST__PS__METHOD__PS_ASSIGN_ADD, "assign_add", &s_body_ps_write_request, s_write, 1, 1},
    {ZDIST__PS__METHOD__PS_ASSIGN_SUB, "assign_sub", &s_body_ps_write_request, s_write, 1, 1},
    {ZDIST__PS__METHOD__PS_SCATTER_ADD, "scatter_add", &s_body_ps_write_request, s_write, 2, 2},
    {ZDIST__PS__METHOD__PS_SCATTER_UPDATE, "scatter_update", &s_body_ps_write_request, s_write, 2, 2},
    {ZDIST__PS__METHOD__PS_SAVE, "save", &s_body_ps_save_request, s_save, 0, 0},
    {ZDIST__PS__METHOD__PS_RESTORE, "restore", &s_body_ps_restore_request, s_restore, 0, 0},
    {ZDIST__PS__METHOD__PS_STATS, "stats", &s_body_ps_stats_request, s_stats, 0, 0},
    {ZDIST__PS__METHOD__PS_SET_OPTIMIZER, "set_optimizer", &s_body_ps_optimizer, s_set_optimizer, 0, 0},
};
#define S_NMETHODS (sizeof s_methods / sizeof s_methods[0])

static int
s_stats(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    psd_store_stats_t st;
    psd_store_stats(self->store, &st);
    Zdist__Ps__StatsReply reply = ZDIST__PS__STATS_REPLY__INIT;
    reply.variables = st.variables;
    reply.shards = st.shards;
    reply.value_bytes = st.value_bytes;
    reply.slot_bytes = st.slot_bytes;
    reply.uptime_ms = zdist_clock_now_ms() - self->started_ms;
    reply.incarnation = zdist_rpc_server_incarnation(self->rpc);
    reply.ps_task = self->config.ps_task;
    zdist_optim_config_t cfg;
    psd_store_get_optimizer(self->store, &cfg);
    reply.optimizer = (char *) zdist_optim_kind_name(cfg.kind);

    Zdist__Ps__MethodStats ms[S_NMETHODS + 1];
    Zdist__Ps__MethodStats *msp[S_NMETHODS + 1];
    size_t nm = 0;
    for (size_t i = 0; i <= S_NMETHODS; i++) {
        uint32_t method = i < S_NMETHODS ? s_methods[i].method : ZDIST_METHOD_PING;
        zdist_rpc_method_stats_t mst;
        if (zdist_rpc_server_method_stats(self->rpc, method, &mst) < 0)
            continue;
        zdist__ps__method_stats__init(&ms[nm]);
        ms[nm].name = (char *) (i < S_NMETHODS ? s_methods[i].name : "ping");
        ms[nm].requests = mst.requests;
        ms[nm].errors = mst.errors;
        ms[nm].p50_us = mst.p50_us;
        ms[nm].p99_us = mst.p99_us;
        msp[nm] = &ms[nm];
        nm++;
    }
    reply.n_methods = nm;
    reply.methods = msp;

    size_t nshards = psd_store_list(self->store, NULL, 0);
    psd_shard_t **shards = calloc(nshards ? nshards : 1, sizeof *shards);
    Zdist__Ps__ShardInfo *info = calloc(nshards ? nshards : 1, sizeof *info);
    Zdist__Ps__ShardInfo **infop = calloc(nshards ? nshards : 1, sizeof *infop);
    if (!shards || !info || !infop) {
        free(shards);
        free(info);
        free(infop);
        return -ENOMEM;
    }
    nshards = psd_store_list(self->store, shards, nshards);
    for (size_t i = 0; i < nshards; i++) {
        const psd_shard_spec_t *spec = psd_shard_spec(shards[i]);
        zdist__ps__shard_info__init(&info[i]);
        info[i].name = (char *) spec->name;
        info[i].shard_index = spec->shard_index;
        info[i].dtype = (char *) zdist_dtype_name(spec->dtype);
        info[i].n_shape = (size_t) spec->shape.rank;
        info[i].shape = (int64_t *) spec->shape.dims;
        info[i].row_offset = spec->row_offset;
        info[i].row_count = spec->rows;
        info[i].step = psd_shard_step(shards[i]);
        infop[i] = &info[i];
    }
    reply.n_shard_info = nshards;
    reply.shard_info = infop;
    int rc = zdist_msg_set_body(zdist_rpc_call_reply(call), &reply.base);
    free(shards);
    free(info);
    free(infop);
    return rc;
}

void
psd_server_actor(zsock_t *pipe, void *args)
{
    self_t self = {0};
    self.config = *(const psd_server_config_t *) args;
    self.started_ms = zdist_clock_now_ms();
    zsock_signal(pipe, 0);

    self.store = psd_store_new();
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = "ps";
    opts.limits = self.config.limits;
    opts.log = zdist_daemon_rpc_log;
    zdist_error_t err = {0};
    if (self.store)
        self.rpc = zdist_rpc_server_new(self.config.endpoint, s_methods, S_NMETHODS, &self, &opts, &err);
    if (!self.rpc) {
        zstr_sendf(pipe, "ERROR %s", self.store ? err.text : "out of memory");
        psd_store_destroy(&self.store);
        return;
    }
    zstr_sendf(pipe, "READY %s", zdist_rpc_server_endpoint(self.rpc));

    zloop_t *loop = zloop_new();
    zdist_daemon_serve(loop, pipe, self.rpc, 256);
    zloop_destroy(&loop);
    zdist_rpc_server_destroy(&self.rpc);
    psd_store_destroy(&self.store);
}
