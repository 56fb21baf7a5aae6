/* psd_server: ps.proto handlers over the shard store, run as a czmq actor. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "psd_ckpt.h"
#include "psd_live.h"
#include "psd_server.h"
#include "zdist/prom.h"
#include "psd_store.h"
#include "psd_write.h"
#include "zdist/daemon.h"
#include "zdist/file.h"
#include "zdist/ps_service.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

typedef struct {
    psd_server_config_t config;
    psd_store_t *store;
    psd_live_t *live; /* each job's last write: DROP_JOB refuses a live one */
    zdist_rpc_server_t *rpc;
    int64_t started_ms;
    /* --max-bytes as the dynamic tables see it: what the fixed shards
       leave of it (s_budget_sync); past it new ids are refused */
    psd_dyntable_budget_t budget;
} self_t;

/* The dynamic tables' room: --max-bytes less the fixed shards' values and
   slots, set whenever those change (create, drop, restore). */
static void
s_budget_sync(self_t *self)
{
    psd_store_stats_t st;
    psd_store_stats(self->store, &st);
    uint64_t fixed = st.value_bytes + st.slot_bytes;
    /* Shards held: a SIGTERM then asks the chief for a checkpoint first. */
    zdist_daemon_set_jobs(st.shards > 0 ? 1 : 0);
    self->budget.max_bytes = self->config.max_bytes > fixed ? self->config.max_bytes - fixed : 1;
}

/* Logs, once per table, that it refused ids past --max-bytes. */
static void
s_tell_refusals(self_t *self, psd_shard_t *shard)
{
    if (!shard || !psd_shard_is_dynamic(shard) || !psd_shard_dyn_refusal_news(shard))
        return;
    psd_dyntable_stats_t st;
    psd_shard_dyn_stats(shard, &st);
    zsys_warning("dynamic table '%s': new ids refused admission: the dynamic tables hold %llu bytes of the %llu "
                 "zdist-psd --max-bytes leaves them (%llu rows here); existing rows are kept, refusals counted in "
                 "zdist_psd_embedding_refused_total (logged once per table)",
                 psd_shard_spec(shard)->name, (unsigned long long) self->budget.used,
                 (unsigned long long) self->budget.max_bytes, (unsigned long long) st.rows);
}

/* Sets the reply's status and logs the refusal once, here. */
static int
s_refuse_err(zdist_rpc_call_t *call, int rc, const zdist_error_t *err)
{
    return zdist_rpc_call_refuse(call, zdist_status_from_errno(rc), "%s",
                                 err->text[0] ? err->text : strerror(-rc));
}

static psd_shard_t *
s_find(self_t *self, zdist_rpc_call_t *call, const char *name, int32_t shard_index)
{
    psd_shard_t *shard = psd_store_find(self->store, name, shard_index);
    if (!shard)
        zdist_rpc_call_refuse(call, ZDIST_STATUS_NOT_FOUND,
                              "variable '%s' shard %d is not on ps task %d; create it first", name,
                              shard_index, self->config.ps_task);
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
    const zdist_ps_var_spec_t *req = zdist_rpc_call_body(call);
    zdist_error_t err = {0};
    psd_shard_spec_t spec = {
        .name = req->name,
        .dtype = req->dtype,
        .shape = req->shape,
        .shard_index = req->shard_index,
        .row_offset = req->row_offset,
        .rows = req->row_count,
        .init = req->init,
        .seed = req->seed,
        .init_name = req->init_name,
        .dynamic = req->dynamic,
        .budget = &self->budget,
    };
    bool existed = psd_store_find(self->store, req->name, req->shard_index) != NULL;
    if (!existed) {
        psd_store_stats_t st;
        psd_store_stats(self->store, &st);
        if (st.shards >= self->config.max_variables)
            return zdist_rpc_call_refuse(
                call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                "creating '%s' shard %d: ps task %d holds %zu variable shards, its limit "
                "(zdist-psd --max-variables %zu); wait for a job to end (the coordinator then drops its "
                "variables) or raise the limit",
                req->name, req->shard_index, self->config.ps_task, st.shards, self->config.max_variables);
        /* The new shard's value bytes, saturating (the store checks the shape itself). */
        uint64_t bytes = zdist_dtype_size(req->dtype), rows = req->row_count > 0 ? (uint64_t) req->row_count : 1;
        bool over = __builtin_mul_overflow(bytes, rows, &bytes);
        for (int d = 1; d < req->shape.rank && !over; d++)
            over = req->shape.dims[d] < 0 || __builtin_mul_overflow(bytes, (uint64_t) req->shape.dims[d], &bytes);
        uint64_t held = st.value_bytes + st.slot_bytes + self->budget.used;
        if (over || held + bytes > self->config.max_bytes || held + bytes < held)
            return zdist_rpc_call_refuse(
                call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                "creating '%s' shard %d: %llu bytes more on ps task %d, which holds %llu bytes of "
                "values and optimizer slots, would pass its limit of %llu (zdist-psd --max-bytes); use "
                "more ps tasks, wait for a job to end (the coordinator then drops its variables) or "
                "raise the limit",
                req->name, req->shard_index,
                over ? (unsigned long long) UINT64_MAX : (unsigned long long) bytes, self->config.ps_task,
                (unsigned long long) held, (unsigned long long) self->config.max_bytes);
    }
    int rc = psd_store_create(self->store, &spec, NULL, &err);
    if (rc < 0)
        return s_refuse_err(call, rc, &err);
    s_budget_sync(self);
    if (!existed && req->dynamic.enabled)
        zsys_info("created dynamic table '%s' part %d of %d (dim %lld, min_count %u)", req->name, req->shard_index,
                  (int) req->dynamic.num_ps, (long long) req->shape.dims[1], req->dynamic.min_count);
    else if (!existed)
        zsys_info("created variable '%s' shard %d rows %lld..%lld (%s)", req->name, req->shard_index,
                  (long long) spec.row_offset, (long long) (spec.row_offset + spec.rows),
                  zdist_dtype_name(req->dtype));
    return zdist_ps_reply_set_create(zdist_rpc_call_reply(call), !existed);
}

static int
s_check_reply_bytes(self_t *self, zdist_rpc_call_t *call, const char *name, size_t bytes)
{
    if (bytes > self->config.max_tensor_bytes || bytes > self->config.limits.max_message_bytes)
        return zdist_rpc_call_refuse(
            call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
            "reading %zu bytes of '%s' exceeds the limit of %zu bytes per tensor; read fewer rows", bytes,
            name, self->config.max_tensor_bytes);
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

/* From this size a pull is answered from the shard's own buffer (pinned
   until sent) rather than a copy: copying is what a big pull costs the psd;
   a small one is cheaper copied than counted. */
#define S_PIN_MIN_BYTES (64 << 10)

/* Adds rows [start, start + n) of a shard (nrows_arg: n, or PSD_WHOLE_SHARD)
   to the reply, zero-copy when big. */
static int
s_reply_shard(self_t *self, zdist_rpc_call_t *call, const char *name, psd_shard_t *shard, int64_t start,
              int64_t nrows_arg, int64_t n)
{
    const psd_shard_spec_t *spec = psd_shard_spec(shard);
    size_t row_bytes = psd_shard_row_bytes(shard);
    zdist_error_t err = {0};
    void *buf;
    size_t bytes;
    int rc;
    if ((size_t) n * row_bytes < S_PIN_MIN_BYTES) {
        if ((rc = s_reply_rows(self, call, name, spec, n, row_bytes, &buf, &bytes)) < 0)
            return rc;
        rc = psd_shard_read(shard, start, nrows_arg, buf, bytes, &err);
        return rc < 0 ? s_refuse_err(call, rc, &err) : 0;
    }
    if ((rc = s_check_reply_bytes(self, call, name, (size_t) n * row_bytes)) < 0)
        return rc;
    void *pin;
    if ((rc = psd_shard_pin(shard, start, nrows_arg, &buf, &bytes, &pin, &err)) < 0)
        return s_refuse_err(call, rc, &err);
    zdist_shape_t shape;
    s_rows_shape(spec, n, &shape);
    rc = zdist_msg_add_tensor(zdist_rpc_call_reply(call), name, spec->dtype, &shape, buf, bytes, psd_shard_unpin, pin);
    if (rc < 0)
        psd_shard_unpin(buf, pin); /* not taken */
    return rc;
}

static int
s_pull(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_ps_pull_t *req = zdist_rpc_call_body(call);
    psd_shard_t *shard = s_find(self, call, req->name, req->shard_index);
    if (!shard)
        return -ENOENT;
    const psd_shard_spec_t *spec = psd_shard_spec(shard);
    int64_t start = req->row_count == 0 ? spec->row_offset : req->row_start;
    int64_t n = req->row_count == 0 ? spec->rows : req->row_count;
    if (start < spec->row_offset || start > spec->row_offset + spec->rows - n)
        return zdist_rpc_call_refuse(
            call, ZDIST_STATUS_INVALID_ARGUMENT,
            "pull '%s' shard %d: rows %lld..%lld are outside the shard's rows %lld..%lld", req->name,
            req->shard_index, (long long) start, (long long) (start + n), (long long) spec->row_offset,
            (long long) (spec->row_offset + spec->rows));
    return s_reply_shard(self, call, req->name, shard, start, req->row_count == 0 ? PSD_WHOLE_SHARD : n, n);
}

/* One item of a pull_rows: its rows appended to the reply as a tensor. */
static int
s_pull_rows_item(self_t *self, zdist_rpc_call_t *call, const char *name, const int64_t *ids, size_t nids,
                 size_t *total)
{
    psd_shard_t *any = psd_store_first(self->store, name);
    if (!any)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_NOT_FOUND, "variable '%s' is not on ps task %d", name,
                                     self->config.ps_task);
    const psd_shard_spec_t *spec = psd_shard_spec(any);
    if (spec->shape.rank == 0)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                                     "variable '%s' is a scalar: pull it whole", name);
    /* Every item's rows go back in one message: their sum is bounded too. */
    size_t row_bytes = psd_shard_row_bytes(any), limit = self->config.limits.max_message_bytes;
    if (nids > (limit - *total) / (row_bytes ? row_bytes : 1))
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_RESOURCE_EXHAUSTED,
                                     "pull_rows: the rows of '%s' and the variables before it in this call come to "
                                     "more than the message limit of %zu bytes; read fewer rows per call (or raise "
                                     "zdist-psd --max-message-bytes)",
                                     name, limit);
    *total += nids * row_bytes;
    void *buf;
    size_t bytes;
    int rc = s_reply_rows(self, call, name, spec, (int64_t) nids, row_bytes, &buf, &bytes);
    if (rc < 0)
        return rc;
    zdist_error_t err = {0};
    /* A dynamic table: this ps's part answers every id it is given (the
       default for one not admitted); a lookup counts nothing: the step's
       push does, exactly once. */
    if (psd_shard_is_dynamic(any))
        rc = psd_shard_lookup(any, ids, nids, buf, bytes, &err);
    else
        rc = psd_store_read_ids(self->store, name, ids, nids, buf, bytes, &err);
    return rc < 0 ? s_refuse_err(call, rc, &err) : 0;
}

/* Every item's rows, a tensor each, in order (a step's every table in one
   request); the first refusal refuses the call. */
static int
s_pull_rows(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_ps_pull_rows_t *req = zdist_rpc_call_body(call);
    size_t total = 0;
    int rc = s_pull_rows_item(self, call, req->name, req->ids, req->nids, &total);
    for (size_t k = 0; rc == 0 && k < req->nmore; k++)
        rc = s_pull_rows_item(self, call, req->more[k].name, req->more[k].ids, req->more[k].nids, &total);
    return rc;
}

static psd_op_t
s_op_for(uint32_t method, bool by_ids)
{
    switch (method) {
    case ZDIST_PS_PUSH:
        return by_ids ? PSD_OP_APPLY_SPARSE : PSD_OP_APPLY_DENSE;
    case ZDIST_PS_ASSIGN:
        return PSD_OP_ASSIGN;
    case ZDIST_PS_ASSIGN_ADD:
        return PSD_OP_ASSIGN_ADD;
    case ZDIST_PS_ASSIGN_SUB:
        return PSD_OP_ASSIGN_SUB;
    case ZDIST_PS_SCATTER_ADD:
        return PSD_OP_SCATTER_ADD;
    default:
        return PSD_OP_SCATTER_UPDATE;
    }
}

static int
s_write(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_ps_write_t *req = zdist_rpc_call_body(call);
    psd_shard_t *shard = s_find(self, call, req->name, req->shard_index);
    if (!shard)
        return -ENOENT;
    const zdist_tensor_t *values = &req->values;
    if (values->nbytes > self->config.max_tensor_bytes)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                                     "write to '%s': tensor of %zu bytes exceeds the limit of %zu bytes",
                                     req->name, values->nbytes, self->config.max_tensor_bytes);
    psd_write_t w = {
        .op = s_op_for(zdist_rpc_call_method(call), req->by_ids),
        .client_id = zdist_msg_client_id(zdist_rpc_call_request(call)),
        .sequence = req->sequence,
        .job_step = req->job_step,
        .step_write = req->step_write,
        .dtype = values->dtype,
        .data = values->data, /* aligned for its dtype by zdist_wire_recv */
        .nbytes = values->nbytes,
    };
    if (req->by_ids) {
        w.ids = req->ids;
        w.nids = req->nids;
    } else if (req->part_row == 0 && !req->more_parts) {
        w.row_start = req->row_count == 0 ? psd_shard_spec(shard)->row_offset : req->row_start;
        w.nrows = req->row_count == 0 ? PSD_WHOLE_SHARD : req->row_count;
    } else {
        /* A part of a push: its rows from part_row of the write's (the
           decoder checked that they fit a row_count; the shard's rows are
           checked here). */
        const psd_shard_spec_t *spec = psd_shard_spec(shard);
        int64_t rows = values->shape.dims[0];
        if (req->row_count == 0 && (rows > spec->rows || req->part_row > spec->rows - rows))
            return zdist_rpc_call_refuse(
                call, ZDIST_STATUS_INVALID_ARGUMENT,
                "push to '%s' shard %d: a part of %lld rows at part_row %lld is outside the shard's "
                "%lld rows",
                req->name, (int) req->shard_index, (long long) rows, (long long) req->part_row,
                (long long) spec->rows);
        w.row_start = (req->row_count == 0 ? spec->row_offset : req->row_start) + req->part_row;
        w.nrows = rows;
        w.more_parts = req->more_parts;
    }
    zdist_error_t err = {0};
    int rc = psd_shard_write(shard, &w, &err);
    s_tell_refusals(self, shard);
    if (rc < 0)
        return s_refuse_err(call, rc, &err);
    psd_live_touch(self->live, req->name, zdist_clock_now_ms());
    return zdist_ps_reply_set_write(zdist_rpc_call_reply(call), rc == PSD_DUPLICATE, psd_shard_step(shard));
}

/* One worker step for this ps: every item checked first (a refusal changes
   nothing), then the pushes applied under the request's job step (or,
   without one, its client id and sequence): a retransmission or a re-run
   of the step is acknowledged per shard, not applied again;
   then the values of the items that pull, read after the updates. */
static int
s_push_pull(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_ps_push_pull_t *req = zdist_rpc_call_body(call);
    size_t n = req->nitems;
    uint64_t client_id = zdist_msg_client_id(zdist_rpc_call_request(call));
    psd_shard_t **shards = calloc(n ? n : 1, sizeof *shards);
    psd_write_t *writes = calloc(n ? n : 1, sizeof *writes);
    bool *dup = calloc(n ? n : 1, sizeof *dup);
    int64_t *step = calloc(n ? n : 1, sizeof *step);
    int rc = shards && writes && dup && step ? 0 : -ENOMEM;
    zdist_error_t err = {0};
    size_t reply_bytes = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const zdist_ps_push_pull_item_t *it = &req->items[i];
        if (!(shards[i] = s_find(self, call, it->name, it->shard_index))) {
            rc = -ENOENT;
            break;
        }
        const psd_shard_spec_t *spec = psd_shard_spec(shards[i]);
        if (it->pull && psd_shard_is_dynamic(shards[i])) {
            rc = zdist_rpc_call_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                                       "push_pull item %zu: '%s' is a dynamic table: read its rows by id (pull_rows)",
                                       i, it->name);
            break;
        }
        if (it->pull) {
            reply_bytes += psd_shard_value_bytes(shards[i]);
            if ((rc = s_check_reply_bytes(self, call, it->name, reply_bytes)) < 0)
                break;
        }
        if (!it->push)
            continue;
        if (it->grad.nbytes > self->config.max_tensor_bytes) {
            rc = zdist_rpc_call_refuse(
                call, ZDIST_STATUS_INVALID_ARGUMENT,
                "push_pull item %zu ('%s'): gradient of %zu bytes exceeds the limit of %zu bytes", i,
                it->name, it->grad.nbytes, self->config.max_tensor_bytes);
            break;
        }
        writes[i] = (psd_write_t){
            .op = it->by_ids ? PSD_OP_APPLY_SPARSE : PSD_OP_APPLY_DENSE,
            .client_id = client_id,
            .sequence = req->sequence,
            .job_step = req->job_step,
            .step_write = it->step_write,
            .dtype = it->grad.dtype,
            .row_start = spec->row_offset,
            .nrows = PSD_WHOLE_SHARD,
            .ids = it->ids,
            .nids = it->nids,
            .data = it->grad.data, /* aligned for its dtype by zdist_wire_recv */
            .nbytes = it->grad.nbytes,
        };
        if ((rc = psd_shard_check_write(shards[i], &writes[i], &err)) < 0) {
            zdist_error_prefix(&err, "push_pull item %zu", i);
            rc = s_refuse_err(call, rc, &err);
        }
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (req->items[i].push) {
            int w = psd_shard_write(shards[i], &writes[i], &err);
            if (w < 0) /* out of memory: the checks passed */
                rc = s_refuse_err(call, w, &err);
            dup[i] = w == PSD_DUPLICATE;
            s_tell_refusals(self, shards[i]);
        }
        step[i] = psd_shard_step(shards[i]);
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        const zdist_ps_push_pull_item_t *it = &req->items[i];
        if (!it->pull)
            continue;
        const psd_shard_spec_t *spec = psd_shard_spec(shards[i]);
        rc = s_reply_shard(self, call, it->name, shards[i], spec->row_offset, PSD_WHOLE_SHARD, spec->rows);
    }
    if (rc == 0 && n > 0)
        psd_live_touch(self->live, req->items[0].name, zdist_clock_now_ms()); /* one job per step */
    if (rc == 0)
        rc = zdist_ps_reply_set_push_pull(zdist_rpc_call_reply(call), n, dup, step);
    free(shards);
    free(writes);
    free(dup);
    free(step);
    return rc;
}

/* With --checkpoint-root: the checkpoint directory a peer named, held under
   a root. dir must be absolute, without "..", below a root as written (so
   nothing elsewhere is touched), and below one once resolved: the directory
   itself when it exists, else its parent (SAVE creates one level). real
   receives the resolved directory, which is what is then used. Without
   roots, dir is used as given. 0, or refused PERMISSION_DENIED naming the
   field and the roots. */
static int
s_ckpt_dir(self_t *self, zdist_rpc_call_t *call, const char *dir, char *real, size_t size)
{
    int n = self->config.num_ckpt_roots;
    if (n == 0) {
        snprintf(real, size, "%s", dir);
        return 0;
    }
    char roots[1200] = "";
    for (int i = 0; i < n; i++) {
        size_t len = strlen(roots);
        snprintf(roots + len, sizeof roots - len, "%s--checkpoint-root %s", i ? ", " : "", self->config.ckpt_roots[i]);
    }
    const char *m = zdist_rpc_call_method(call) == ZDIST_PS_SAVE ? "save" : "restore";
    if (dir[0] != '/')
        return zdist_rpc_call_fail(call, ZDIST_STATUS_PERMISSION_DENIED,
                                   "%s: dir '%.200s' is a relative path; this psd keeps checkpoints only under its "
                                   "checkpoint roots (%s): give an absolute directory there", m, dir, roots);
    if (zdist_path_has_dotdot(dir))
        return zdist_rpc_call_fail(call, ZDIST_STATUS_PERMISSION_DENIED,
                                   "%s: dir '%.200s' contains '..'; name a directory under the checkpoint roots (%s) "
                                   "without '..'", m, dir, roots);
    bool inside = false;
    for (int i = 0; i < n && !inside; i++)
        inside = zdist_path_under(dir, self->config.ckpt_roots[i]);
    if (!inside)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_PERMISSION_DENIED,
                                   "%s: dir '%.200s' is outside this psd's checkpoint roots (%s); checkpoint under one "
                                   "of them (the coordinator's --state-dir must lie there) or ask the operator to add "
                                   "a root", m, dir, roots);
    char buf[PATH_MAX];
    if (!realpath(dir, buf)) {
        /* Not there yet: its parent must be (SAVE creates one level). */
        int e = errno;
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", dir);
        size_t len = strlen(parent);
        while (len > 1 && parent[len - 1] == '/')
            parent[--len] = 0;
        char *slash = strrchr(parent, '/'), leaf[NAME_MAX + 1] = "";
        if (slash && strlen(slash + 1) <= NAME_MAX)
            memcpy(leaf, slash + 1, strlen(slash + 1) + 1);
        if (slash && slash != parent)
            *slash = 0;
        else
            parent[1] = 0;
        char rp[PATH_MAX];
        if (e == ENOENT && *leaf && strcmp(leaf, ".") != 0 && !realpath(parent, rp))
            e = errno;
        else if (e == ENOENT && *leaf && strcmp(leaf, ".") != 0 &&
                 snprintf(buf, sizeof buf, "%s/%s", strcmp(rp, "/") ? rp : "", leaf) < (int) sizeof buf)
            e = 0;
        if (e)
            return zdist_rpc_call_fail(call, ZDIST_STATUS_NOT_FOUND, "%s: dir '%.200s' does not resolve: %s", m, dir,
                                       strerror(e));
    }
    inside = false;
    for (int i = 0; i < n && !inside; i++)
        inside = zdist_path_under(buf, self->config.ckpt_roots[i]);
    if (!inside)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_PERMISSION_DENIED,
                                   "%s: dir '%.200s' resolves to '%.200s' (a symbolic link), outside this psd's "
                                   "checkpoint roots (%s); name a directory under one of them", m, dir, buf, roots);
    if (snprintf(real, size, "%s", buf) >= (int) size)
        return zdist_rpc_call_fail(call, ZDIST_STATUS_INVALID_ARGUMENT, "%s: dir '%.200s' is too long", m, dir);
    return 0;
}

static int
s_save(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_ps_save_t *req = zdist_rpc_call_body(call);
    zdist_error_t err = {0};
    char dir[PATH_MAX];
    int rc = s_ckpt_dir(self, call, req->dir, dir, sizeof dir);
    if (rc < 0)
        return rc;
    int64_t t0 = zdist_clock_now_ms();
    uint64_t bytes = 0;
    rc = psd_ckpt_save_job(self->store, dir, req->step, self->config.ps_task, req->job, req->full_every, &bytes,
                           &err);
    if (rc < 0)
        return s_refuse_err(call, rc, &err);
    zsys_info("saved step %lld%s%s to '%s' (%llu bytes, %lld ms)", (long long) req->step, *req->job ? " of job " : "",
              req->job, dir, (unsigned long long) bytes, (long long) (zdist_clock_now_ms() - t0));
    return zdist_ps_reply_set_save(zdist_rpc_call_reply(call), bytes);
}

static int
s_restore(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_ps_restore_t *req = zdist_rpc_call_body(call);
    zdist_error_t err = {0};
    int64_t step = 0;
    char dir[PATH_MAX];
    int rc = s_ckpt_dir(self, call, req->dir, dir, sizeof dir);
    if (rc < 0)
        return rc;
    rc = psd_ckpt_restore_job(self->store, dir, req->job, &step, &err);
    s_budget_sync(self);
    if (rc < 0)
        return s_refuse_err(call, rc, &err);
    zsys_info("restored step %lld%s%s from '%s'", (long long) step, *req->job ? " of job " : "", req->job, dir);
    return zdist_ps_reply_set_restore(zdist_rpc_call_reply(call), step);
}

static int
s_set_optimizer(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_ps_set_optimizer_t *req = zdist_rpc_call_body(call);
    const zdist_optim_config_t *cfg = &req->config;
    zdist_error_t err = {0};
    int rc = psd_store_set_optimizer_job(self->store, req->job, cfg, &err);
    if (rc < 0)
        return s_refuse_err(call, rc, &err);
    zsys_info("optimizer %s, learning rate %g%s%s", zdist_optim_kind_name(cfg->kind), cfg->learning_rate,
              *req->job ? ", for job " : "", req->job);
    return zdist_ps_reply_set_write(zdist_rpc_call_reply(call), false, 0);
}

/* A job that wrote here within --live-job-seconds is still training:
   dropping its variables would fail it (or, restored from its checkpoint,
   lose the steps since), so only the chief's word that it ended or the
   operator's --force drops it. 0, or refused FAILED_PRECONDITION. */
static int
s_drop_check_live(self_t *self, zdist_rpc_call_t *call, const zdist_ps_drop_job_t *req)
{
    int64_t idle = psd_live_idle_ms(self->live, req->job, zdist_clock_now_ms());
    if (req->force || self->config.live_job_ms <= 0 || idle < 0 || idle >= self->config.live_job_ms)
        return 0;
    int rc = zdist_rpc_call_refuse(call, ZDIST_STATUS_FAILED_PRECONDITION,
                      "drop_job: job '%s' is live here: it wrote %.1f s ago (within zdist-psd --live-job-seconds "
                      "%lld); cancel it first (zdist cancel %s), or drop it anyway with --force", req->job,
                      (double) idle / 1000, (long long) (self->config.live_job_ms / 1000), req->job);
    return rc < 0 ? rc : -EAGAIN;
}

/* A job's variables go once it has ended (the coordinator, after its final
   checkpoint): every shard of its namespace, slots, exactly-once tables and
   its optimizer. Their bytes count back toward --max-bytes at once (every
   reply owns what it sends). */
static int
s_drop_job(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    const zdist_ps_drop_job_t *req = zdist_rpc_call_body(call);
    int live = s_drop_check_live(self, call, req);
    if (live < 0)
        return live;
    psd_live_forget(self->live, req->job);
    uint64_t bytes = 0;
    int n = psd_store_drop_job(self->store, req->job, &bytes);
    s_budget_sync(self);
    if (n < 0)
        return zdist_rpc_call_refuse(call, ZDIST_STATUS_INVALID_ARGUMENT,
                                     "drop_job: job '%s' is not a job id", req->job);
    psd_store_stats_t st;
    psd_store_stats(self->store, &st);
    zsys_info("dropped job %s: %d shards, %llu bytes of values and optimizer slots freed (%llu bytes held)",
              req->job, n, (unsigned long long) bytes, (unsigned long long) (st.value_bytes + st.slot_bytes));
    return zdist_ps_reply_set_drop_job(zdist_rpc_call_reply(call), (uint64_t) n, bytes);
}

static int s_stats(zdist_rpc_call_t *call, void *state);

static const zdist_rpc_method_t s_methods[] = {
    {ZDIST_PS_CREATE, "create", &zdist_ps_body_create, s_create, 0, 0, ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
    {ZDIST_PS_PULL, "pull", &zdist_ps_body_pull, s_pull, 0, 0, 0},
    {ZDIST_PS_PULL_ROWS, "pull_rows", &zdist_ps_body_pull_rows, s_pull_rows, 1, ZDIST_PS_PULL_ROWS_MAX_ITEMS, 0},
    {ZDIST_PS_PUSH, "push", &zdist_ps_body_write, s_write, 1, 2, ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
    {ZDIST_PS_ASSIGN, "assign", &zdist_ps_body_write, s_write, 1, 1, ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
    {ZDIST_PS_ASSIGN_ADD, "assign_add", &zdist_ps_body_write, s_write, 1, 1, ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
    {ZDIST_PS_ASSIGN_SUB, "assign_sub", &zdist_ps_body_write, s_write, 1, 1, ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
    {ZDIST_PS_SCATTER_ADD, "scatter_add", &zdist_ps_body_write, s_write, 2, 2, ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
    {ZDIST_PS_SCATTER_UPDATE, "scatter_update", &zdist_ps_body_write, s_write, 2, 2, ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
    {ZDIST_PS_SAVE, "save", &zdist_ps_body_save, s_save, 0, 0, ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
    {ZDIST_PS_RESTORE, "restore", &zdist_ps_body_restore, s_restore, 0, 0, ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
    {ZDIST_PS_STATS, "stats", &zdist_ps_body_stats, s_stats, 0, 0, 0},
    {ZDIST_PS_SET_OPTIMIZER, "set_optimizer", &zdist_ps_body_set_optimizer, s_set_optimizer, 0, 0, ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
    {ZDIST_PS_PUSH_PULL, "push_pull", &zdist_ps_body_push_pull, s_push_pull, 0, 2 * ZDIST_PS_PUSH_PULL_MAX_ITEMS,
     ZDIST_ROLE_WORKER | ZDIST_ROLE_CHIEF},
    /* Only the coordinator ends jobs: a worker's key must not drop another job's variables. */
    {ZDIST_PS_DROP_JOB, "drop_job", &zdist_ps_body_drop_job, s_drop_job, 0, 0, ZDIST_ROLE_CHIEF},
};
#define S_NMETHODS (sizeof s_methods / sizeof s_methods[0])

/* A dynamic table's part as stats show it. */
static void
s_embedding_info(psd_shard_t *shard, zdist_ps_embedding_info_t *ret)
{
    psd_dyntable_stats_t st;
    psd_shard_dyn_stats(shard, &st);
    *ret = (zdist_ps_embedding_info_t){
        .name = psd_shard_spec(shard)->name, .rows = st.rows, .admitted = st.admitted, .refused = st.refused,
        .evicted = st.evicted, .bytes = st.bytes, .pending = st.pending, .dropped_grads = st.dropped_grads};
}

static int
s_stats(zdist_rpc_call_t *call, void *state)
{
    self_t *self = state;
    psd_store_stats_t st;
    psd_store_stats(self->store, &st);
    zdist_ps_stats_t reply = {
        .variables = st.variables,
        .shards = st.shards,
        .value_bytes = st.value_bytes,
        .slot_bytes = st.slot_bytes,
        .uptime_ms = zdist_clock_now_ms() - self->started_ms,
        .incarnation = zdist_rpc_server_incarnation(self->rpc),
        .ps_task = self->config.ps_task,
    };
    zdist_optim_config_t cfg;
    psd_store_get_optimizer(self->store, &cfg);
    snprintf(reply.optimizer, sizeof reply.optimizer, "%s", zdist_optim_kind_name(cfg.kind));

    zdist_ps_method_stats_t methods[S_NMETHODS + 1];
    for (size_t i = 0; i <= S_NMETHODS; i++) {
        uint32_t method = i < S_NMETHODS ? s_methods[i].method : ZDIST_METHOD_PING;
        zdist_rpc_method_stats_t mst;
        if (zdist_rpc_server_method_stats(self->rpc, method, &mst) < 0)
            continue;
        zdist_ps_method_stats_t *m = &methods[reply.nmethods++];
        snprintf(m->name, sizeof m->name, "%s", i < S_NMETHODS ? s_methods[i].name : "ping");
        m->requests = mst.requests;
        m->errors = mst.errors;
        m->p50_us = mst.p50_us;
        m->p99_us = mst.p99_us;
    }
    reply.methods = methods;

    size_t nshards = psd_store_list(self->store, NULL, 0);
    psd_shard_t **shards = calloc(nshards ? nshards : 1, sizeof *shards);
    zdist_ps_shard_info_t *info = calloc(nshards ? nshards : 1, sizeof *info);
    if (!shards || !info) {
        free(shards);
        free(info);
        return -ENOMEM;
    }
    nshards = psd_store_list(self->store, shards, nshards);
    for (size_t i = 0; i < nshards; i++) {
        const psd_shard_spec_t *spec = psd_shard_spec(shards[i]);
        info[i] = (zdist_ps_shard_info_t){
            .name = spec->name,
            .shard_index = spec->shard_index,
            .dtype = spec->dtype,
            .shape = spec->shape,
            .row_offset = spec->row_offset,
            .row_count = spec->rows,
            .step = psd_shard_step(shards[i]),
        };
    }
    reply.nshard_info = nshards;
    reply.shard_info = info;
    zdist_ps_embedding_info_t *emb = calloc(nshards ? nshards : 1, sizeof *emb);
    int rc = emb ? 0 : -ENOMEM;
    for (size_t i = 0; emb && i < nshards; i++)
        if (psd_shard_is_dynamic(shards[i]))
            s_embedding_info(shards[i], &emb[reply.nembeddings++]);
    reply.embeddings = emb;
    if (rc == 0)
        rc = zdist_ps_reply_set_stats(zdist_rpc_call_reply(call), &reply);
    free(shards);
    free(info);
    free(emb);
    return rc;
}

/* The dynamic tables' families, a sample per table part here labelled by
   its job (the name up to its first '/') and table (the rest). */
static void
s_metrics_embeddings(self_t *self, FILE *f)
{
    static const struct {
        const char *name, *type, *help;
    } fam[] = {
        {"zdist_psd_embedding_rows", "gauge", "Rows a dynamic embedding table holds here."},
        {"zdist_psd_embedding_admitted_total", "counter", "Ids admitted (rows created) in a dynamic table."},
        {"zdist_psd_embedding_refused_total", "counter", "Ids refused admission past zdist-psd --max-bytes."},
        {"zdist_psd_embedding_evicted_total", "counter", "Rows evicted from a dynamic table."},
        {"zdist_psd_embedding_bytes", "gauge", "Bytes a dynamic embedding table holds here."},
    };
    size_t n = psd_store_list(self->store, NULL, 0);
    psd_shard_t **shards = calloc(n ? n : 1, sizeof *shards);
    if (!shards)
        return;
    n = psd_store_list(self->store, shards, n);
    for (size_t k = 0; k < sizeof fam / sizeof fam[0]; k++) {
        zdist_prom_family(f, fam[k].name, fam[k].type, fam[k].help);
        for (size_t i = 0; i < n; i++) {
            if (!psd_shard_is_dynamic(shards[i]))
                continue;
            zdist_ps_embedding_info_t e;
            s_embedding_info(shards[i], &e);
            const uint64_t v[] = {e.rows, e.admitted, e.refused, e.evicted, e.bytes};
            char job[ZDIST_PS_NAME_MAX + 1];
            const char *slash = strchr(e.name, '/');
            size_t jl = slash ? (size_t) (slash - e.name) : 0;
            memcpy(job, e.name, jl);
            job[jl] = 0;
            zdist_prom_sample(f, fam[k].name, (double) v[k], "job", job, "table", slash ? slash + 1 : e.name, NULL);
        }
    }
    free(shards);
}

/* --http: /metrics, on the actor's thread. */
static void
s_metrics(void *arg, FILE *f)
{
    self_t *self = arg;
    zdist_rpc_server_write_metrics(self->rpc, f, "zdist_psd");
    psd_store_stats_t st;
    psd_store_stats(self->store, &st);
    zdist_prom_family(f, "zdist_psd_variables", "gauge", "Variables with at least one shard here.");
    zdist_prom_sample(f, "zdist_psd_variables", (double) st.variables, NULL);
    zdist_prom_family(f, "zdist_psd_shards", "gauge", "Variable shards held.");
    zdist_prom_sample(f, "zdist_psd_shards", (double) st.shards, NULL);
    zdist_prom_family(f, "zdist_psd_held_bytes", "gauge", "Bytes held by the shards, by kind (value, slot; spare: a buffer kept for writes while a reply holds the values).");
    zdist_prom_sample(f, "zdist_psd_held_bytes", (double) st.value_bytes, "kind", "value", NULL);
    zdist_prom_sample(f, "zdist_psd_held_bytes", (double) st.slot_bytes, "kind", "slot", NULL);
    zdist_prom_sample(f, "zdist_psd_held_bytes", (double) st.spare_bytes, "kind", "spare", NULL);
    zdist_prom_family(f, "zdist_psd_ps_task", "gauge", "This psd's index in the ps job.");
    zdist_prom_sample(f, "zdist_psd_ps_task", (double) self->config.ps_task, NULL);
    s_metrics_embeddings(self, f);
}

void
psd_server_actor(zsock_t *pipe, void *args)
{
    self_t self = {0};
    self.config = *(const psd_server_config_t *) args;
    if (self.config.max_variables == 0)
        self.config.max_variables = 65536;
    if (self.config.max_bytes == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        self.config.max_bytes = pages > 0 && page > 0 ? (uint64_t) pages * (uint64_t) page / 4 * 3 : UINT64_MAX;
    }
    self.started_ms = zdist_clock_now_ms();
    self.budget.max_bytes = self.config.max_bytes;
    zsock_signal(pipe, 0);

    self.store = psd_store_new();
    self.live = psd_live_new();
    zdist_rpc_server_options_t opts;
    zdist_rpc_server_options_default(&opts);
    opts.role = "ps";
    opts.limits = self.config.limits;
    if (self.config.max_calls_per_peer)
        opts.max_calls_per_peer = self.config.max_calls_per_peer;
    if (self.config.max_connections_per_peer)
        opts.max_connections_per_peer = self.config.max_connections_per_peer;
    opts.log = zdist_daemon_rpc_log;
    zdist_error_t err = {0};
    if (self.store && self.live)
        self.rpc = zdist_rpc_server_new(self.config.endpoint, s_methods, S_NMETHODS, &self, &opts, &err);
    if (!self.rpc) {
        zstr_sendf(pipe, "ERROR %s", self.store ? err.text : "out of memory");
        psd_store_destroy(&self.store);
        psd_live_destroy(&self.live);
        return;
    }
    zloop_t *loop = zloop_new();
    zdist_http_t *http = NULL;
    zdist_http_metrics_t metrics = {s_metrics, &self};
    if (loop && *self.config.http &&
        !(http = zdist_daemon_http(self.config.http, loop, zdist_http_serve_metrics, &metrics, &err))) {
        zstr_sendf(pipe, "ERROR %s", err.text);
        zloop_destroy(&loop);
        zdist_rpc_server_destroy(&self.rpc);
        psd_store_destroy(&self.store);
        psd_live_destroy(&self.live);
        return;
    }
    zstr_sendf(pipe, "READY %s", zdist_rpc_server_endpoint(self.rpc));

    zdist_daemon_serve(loop, pipe, self.rpc, 256);
    zdist_http_destroy(&http);
    zloop_destroy(&loop);
    zdist_rpc_server_destroy(&self.rpc);
    psd_store_destroy(&self.store);
    psd_live_destroy(&self.live);
}
