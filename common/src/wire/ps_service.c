/* ps_service: proto/ps.proto <-> plain C: request encoders, the psd's body types, reply encoders, parsers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps.pb-c.h"
#include "wire/body.h"
#include "zdist/ps_service.h"

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
    case ZDIST_PS_PUSH_PULL:
        return "push_pull";
    case ZDIST_PS_DROP_JOB:
        return "drop_job";
    default:
        return "unknown";
    }
}

bool
zdist_ps_method_is_write(uint32_t method)
{
    return method >= ZDIST_PS_PUSH && method <= ZDIST_PS_SCATTER_UPDATE;
}

/* Writes by ids: a sparse push, or scatter_*. */
static bool
s_method_by_ids(uint32_t method)
{
    return method == ZDIST_PS_PUSH || method == ZDIST_PS_SCATTER_ADD || method == ZDIST_PS_SCATTER_UPDATE;
}

/* Dense writes: a dense push, or assign*. */
static bool
s_method_dense(uint32_t method)
{
    return method == ZDIST_PS_PUSH || method == ZDIST_PS_ASSIGN || method == ZDIST_PS_ASSIGN_ADD ||
           method == ZDIST_PS_ASSIGN_SUB;
}

/* ---- request encoders ---- */

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
s_attach(zdist_msg_t *msg, const char *name, zdist_dtype_t dtype, const zdist_shape_t *shape,
         const void *data, size_t nbytes, zdist_free_fn *ffn, void *hint)
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
    return zdist_dtype_is_data(t->dtype) && (t->data || t->nbytes == 0) &&
           zdist_tensor_byte_size(t->dtype, &t->shape, &bytes) == 0 && bytes == t->nbytes;
}

static int
s_attach_ids(zdist_msg_t *msg, const int64_t *ids, size_t nids, zdist_free_fn *ffn, void *hint)
{
    zdist_shape_t shape = {.rank = 1, .dims = {(int64_t) nids}};
    return s_attach(msg, "ids", ZDIST_DTYPE_INT64, &shape, ids, nids * sizeof *ids, ffn, hint);
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
    req.init_name = (char *) (spec->init_name ? spec->init_name : "");
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
    if (name && (ids || nids == 0) && nids <= INT64_MAX / sizeof *ids) {
        Zdist__Ps__PullRowsRequest req = ZDIST__PS__PULL_ROWS_REQUEST__INIT;
        req.name = (char *) name;
        msg = s_request(ZDIST_PS_PULL_ROWS, &req.base);
    }
    if (!msg) {
        if (ffn)
            ffn((void *) ids, hint);
        return NULL;
    }
    if (s_attach_ids(msg, ids, nids, ffn, hint) < 0)
        zdist_msg_destroy(&msg);
    return msg;
}

/* Any write; with ffn the payloads (ids, then values) pass to the message,
   also when this fails. */
static zdist_msg_t *
s_encode_write(uint32_t method, const zdist_ps_write_t *w, zdist_free_fn *ffn, void *hint)
{
    const zdist_tensor_t *values = &w->values;
    bool ok = w->name && s_tensor_ok(values) && w->nids <= INT64_MAX / sizeof *w->ids;
    if (w->by_ids)
        ok = ok && s_method_by_ids(method) && (w->ids || w->nids == 0) && values->shape.rank >= 1 &&
             values->shape.dims[0] == (int64_t) w->nids;
    else
        ok = ok && s_method_dense(method);
    if (w->part_row != 0 || w->more_parts)
        ok = ok && method == ZDIST_PS_PUSH && !w->by_ids && w->part_row >= 0 && values->shape.rank >= 1;
    zdist_msg_t *msg = NULL;
    if (ok) {
        Zdist__Ps__WriteRequest req = ZDIST__PS__WRITE_REQUEST__INIT;
        req.name = (char *) w->name;
        req.shard_index = w->shard_index;
        req.row_start = w->by_ids ? 0 : w->row_start;
        req.row_count = w->by_ids ? 0 : w->row_count;
        req.sequence = w->sequence;
        req.job_step = w->job_step;
        req.step_write = w->step_write;
        req.part_row = w->part_row;
        req.more_parts = w->more_parts;
        msg = s_request(method, &req.base);
    }
    if (!msg) {
        if (ffn) {
            if (w->by_ids)
                ffn((void *) w->ids, hint);
            ffn(values->data, hint);
        }
        return NULL;
    }
    if (w->by_ids && s_attach_ids(msg, w->ids, w->nids, ffn, hint) < 0) {
        if (ffn)
            ffn(values->data, hint);
        zdist_msg_destroy(&msg);
        return NULL;
    }
    if (s_attach(msg, w->name, values->dtype, &values->shape, values->data, values->nbytes, ffn, hint) < 0)
        zdist_msg_destroy(&msg);
    return msg;
}

zdist_msg_t *
zdist_ps_request_write(uint32_t method, const char *name, int32_t shard_index, int64_t row_start,
                       int64_t row_count, uint64_t sequence, const zdist_tensor_t *values, zdist_free_fn *ffn,
                       void *hint)
{
    if (!values)
        return NULL;
    zdist_ps_write_t w = {.name = name,
                          .shard_index = shard_index,
                          .row_start = row_start,
                          .row_count = row_count,
                          .sequence = sequence,
                          .values = *values};
    return s_encode_write(method, &w, ffn, hint);
}

zdist_msg_t *
zdist_ps_request_write_from(uint32_t method, const zdist_ps_write_t *w, zdist_free_fn *ffn, void *hint)
{
    return w ? s_encode_write(method, w, ffn, hint) : NULL;
}

size_t
zdist_ps_write_parts(uint32_t method, const zdist_ps_write_t *w, size_t part_bytes,
                     zdist_ps_write_t parts[ZDIST_PS_MAX_PARTS])
{
    parts[0] = *w;
    const zdist_tensor_t *v = &w->values;
    if (method != ZDIST_PS_PUSH || w->by_ids || w->job_step != 0 || w->part_row != 0 || w->more_parts ||
        part_bytes == 0 || v->nbytes <= part_bytes || v->shape.rank < 1 || v->shape.dims[0] < 2)
        return 1;
    int64_t rows = v->shape.dims[0];
    size_t row_bytes = v->nbytes / (size_t) rows;
    if (row_bytes == 0 || row_bytes * (size_t) rows != v->nbytes)
        return 1;
    /* At most ZDIST_PS_MAX_PARTS parts: the psd remembers that many
       sequences below a client's highest, so a part sent again after a later
       one went through is still recognised. */
    size_t bytes = part_bytes;
    if (bytes < (v->nbytes + ZDIST_PS_MAX_PARTS - 1) / ZDIST_PS_MAX_PARTS)
        bytes = (v->nbytes + ZDIST_PS_MAX_PARTS - 1) / ZDIST_PS_MAX_PARTS;
    int64_t per = (int64_t) ((bytes + row_bytes - 1) / row_bytes); /* >= 1: bytes > 0 */
    size_t n = 0;
    for (int64_t r = 0; r < rows; r += per, n++) {
        int64_t take = rows - r < per ? rows - r : per;
        zdist_ps_write_t *p = &parts[n];
        *p = *w;
        p->sequence = w->sequence ? w->sequence + n : 0;
        p->part_row = r;
        p->more_parts = r + take < rows;
        p->values.shape.dims[0] = take;
        p->values.data = (char *) v->data + (size_t) r * row_bytes;
        p->values.nbytes = (size_t) take * row_bytes;
    }
    return n;
}

zdist_msg_t *
zdist_ps_request_write_ids(uint32_t method, const char *name, int32_t shard_index, uint64_t sequence,
                           const int64_t *ids, size_t nids, const zdist_tensor_t *rows, zdist_free_fn *ffn,
                           void *hint)
{
    if (!rows) {
        if (ffn)
            ffn((void *) ids, hint);
        return NULL;
    }
    zdist_ps_write_t w = {.name = name,
                          .shard_index = shard_index,
                          .sequence = sequence,
                          .by_ids = true,
                          .ids = ids,
                          .nids = nids,
                          .values = *rows};
    return s_encode_write(method, &w, ffn, hint);
}

/* Hands every gradient buffer of items [from, n) to ffn (ownership passed
   to a builder that failed). */
static void
s_free_items(const zdist_ps_push_pull_t *pp, size_t from, zdist_free_fn *ffn, void *hint)
{
    for (size_t i = from; ffn && i < pp->nitems; i++) {
        const zdist_ps_push_pull_item_t *it = &pp->items[i];
        if (it->push && it->by_ids)
            ffn((void *) it->ids, hint);
        if (it->push)
            ffn(it->grad.data, hint);
    }
}

zdist_msg_t *
zdist_ps_request_push_pull(const zdist_ps_push_pull_t *pp, zdist_free_fn *ffn, void *hint)
{
    if (!pp)
        return NULL;
    bool ok = (pp->items || pp->nitems == 0) && pp->nitems <= ZDIST_PS_PUSH_PULL_MAX_ITEMS;
    for (size_t i = 0; ok && i < pp->nitems; i++) {
        const zdist_ps_push_pull_item_t *it = &pp->items[i];
        ok = it->name && (!it->push || s_tensor_ok(&it->grad));
        if (ok && it->push && it->by_ids)
            ok = (it->ids || it->nids == 0) && it->nids <= INT64_MAX / sizeof *it->ids &&
                 it->grad.shape.rank >= 1 && it->grad.shape.dims[0] == (int64_t) it->nids;
    }
    Zdist__Ps__PushPullItem *items = ok ? calloc(pp->nitems ? pp->nitems : 1, sizeof *items) : NULL;
    Zdist__Ps__PushPullItem **itemp = ok ? calloc(pp->nitems ? pp->nitems : 1, sizeof *itemp) : NULL;
    zdist_msg_t *msg = NULL;
    if (items && itemp) {
        for (size_t i = 0; i < pp->nitems; i++) {
            const zdist_ps_push_pull_item_t *it = &pp->items[i];
            zdist__ps__push_pull_item__init(&items[i]);
            items[i].name = (char *) it->name;
            items[i].shard_index = it->shard_index;
            items[i].push = it->push;
            items[i].sparse = it->push && it->by_ids;
            items[i].pull = it->pull;
            items[i].step_write = it->step_write;
            itemp[i] = &items[i];
        }
        Zdist__Ps__PushPullRequest req = ZDIST__PS__PUSH_PULL_REQUEST__INIT;
        req.n_items = pp->nitems;
        req.items = itemp;
        req.sequence = pp->sequence;
        req.job_step = pp->job_step;
        msg = s_request(ZDIST_PS_PUSH_PULL, &req.base);
    }
    free(items);
    free(itemp);
    if (!msg) {
        s_free_items(pp, 0, ffn, hint);
        return NULL;
    }
    for (size_t i = 0; i < pp->nitems; i++) {
        const zdist_ps_push_pull_item_t *it = &pp->items[i];
        if (!it->push)
            continue;
        int rc = 0;
        if (it->by_ids && (rc = s_attach_ids(msg, it->ids, it->nids, ffn, hint)) < 0) {
            if (ffn)
                ffn(it->grad.data, hint);
        } else {
            rc = s_attach(msg, it->name, it->grad.dtype, &it->grad.shape, it->grad.data, it->grad.nbytes, ffn,
                          hint);
        }
        if (rc < 0) {
            s_free_items(pp, i + 1, ffn, hint);
            zdist_msg_destroy(&msg);
            return NULL;
        }
    }
    return msg;
}

zdist_msg_t *
zdist_ps_request_save_job(const char *dir, int64_t step, int32_t ps_task, const char *job)
{
    if (!dir)
        return NULL;
    Zdist__Ps__SaveRequest req = ZDIST__PS__SAVE_REQUEST__INIT;
    req.dir = (char *) dir;
    req.step = step;
    req.ps_task = ps_task;
    req.job = (char *) (job ? job : "");
    return s_request(ZDIST_PS_SAVE, &req.base);
}

zdist_msg_t *
zdist_ps_request_save(const char *dir, int64_t step, int32_t ps_task)
{
    return zdist_ps_request_save_job(dir, step, ps_task, NULL);
}

zdist_msg_t *
zdist_ps_request_restore_job(const char *dir, const char *job)
{
    if (!dir)
        return NULL;
    Zdist__Ps__RestoreRequest req = ZDIST__PS__RESTORE_REQUEST__INIT;
    req.dir = (char *) dir;
    req.job = (char *) (job ? job : "");
    return s_request(ZDIST_PS_RESTORE, &req.base);
}

zdist_msg_t *
zdist_ps_request_restore(const char *dir)
{
    return zdist_ps_request_restore_job(dir, NULL);
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
    return zdist_ps_request_set_optimizer_job(opt, NULL);
}

zdist_msg_t *
zdist_ps_request_set_optimizer_job(const zdist_optim_config_t *opt, const char *job)
{
    if (!opt)
        return NULL;
    Zdist__Ps__Optimizer req = ZDIST__PS__OPTIMIZER__INIT;
    req.job = (char *) (job ? job : "");
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

static zdist_msg_t *
s_request_drop_job(const zdist_ps_drop_job_t *d)
{
    if (!d->job)
        return NULL;
    Zdist__Ps__DropJobRequest req = ZDIST__PS__DROP_JOB_REQUEST__INIT;
    req.job = (char *) d->job;
    req.force = d->force;
    return s_request(ZDIST_PS_DROP_JOB, &req.base);
}

zdist_msg_t *
zdist_ps_request_drop_job(const char *job)
{
    return s_request_drop_job(&(zdist_ps_drop_job_t){job, false});
}

zdist_msg_t *
zdist_ps_request_encode(const zdist_ps_request_t *req)
{
    if (!req)
        return NULL;
    switch (req->method) {
    case ZDIST_PS_CREATE:
        return zdist_ps_request_create(&req->create);
    case ZDIST_PS_PULL:
        return zdist_ps_request_pull(req->pull.name, req->pull.shard_index, req->pull.row_start,
                                     req->pull.row_count);
    case ZDIST_PS_PULL_ROWS:
        return zdist_ps_request_pull_rows(req->pull_rows.name, req->pull_rows.ids, req->pull_rows.nids, NULL,
                                          NULL);
    case ZDIST_PS_SAVE:
        return zdist_ps_request_save_job(req->save.dir, req->save.step, req->save.ps_task, req->save.job);
    case ZDIST_PS_RESTORE:
        return zdist_ps_request_restore_job(req->restore.dir, req->restore.job);
    case ZDIST_PS_STATS:
        return zdist_ps_request_stats();
    case ZDIST_PS_SET_OPTIMIZER:
        return zdist_ps_request_set_optimizer_job(&req->optimizer, req->optimizer_job);
    case ZDIST_PS_PUSH_PULL:
        return zdist_ps_request_push_pull(&req->push_pull, NULL, NULL);
    case ZDIST_PS_DROP_JOB:
        return s_request_drop_job(&req->drop_job);
    default:
        return zdist_ps_method_is_write(req->method) ? s_encode_write(req->method, &req->write, NULL, NULL)
                                                     : NULL;
    }
}

/* ---- request decoders: the psd's body types ---- */

/* A variable name: non-empty, bounded, printable (it goes into logs). */
static int
s_check_name(const char *name, zdist_error_t *err)
{
    if (!name || !*name)
        return zdist_error_set(err, -EINVAL, "name is empty; give the variable's name");
    size_t n = strnlen(name, ZDIST_PS_NAME_MAX + 1);
    if (n > ZDIST_PS_NAME_MAX)
        return zdist_error_set(err, -EINVAL, "name '%.40s...' is longer than %d bytes; use a shorter name",
                               name, ZDIST_PS_NAME_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char) name[i] < 0x20 || name[i] == 0x7f)
            return zdist_error_set(err, -EINVAL,
                                   "name has a control character (byte %zu); use printable characters", i);
    return 0;
}

static int
s_check_dir(const char *dir, const char *what, zdist_error_t *err)
{
    if (!dir || !*dir)
        return zdist_error_set(err, -EINVAL, "dir is empty; give the checkpoint directory to %s", what);
    if (strnlen(dir, ZDIST_PS_DIR_MAX + 1) > ZDIST_PS_DIR_MAX)
        return zdist_error_set(err, -EINVAL, "dir is longer than %d bytes; use a shorter path",
                               ZDIST_PS_DIR_MAX);
    return 0;
}

static int
s_check_shard_index(const char *name, int32_t shard_index, zdist_error_t *err)
{
    if (shard_index < 0)
        return zdist_error_set(err, -EINVAL, "variable '%s': shard_index %d is negative; shards count from 0",
                               name, (int) shard_index);
    return 0;
}

/* A dense range: row_count 0 = the whole shard, else rows from row_start. */
static int
s_check_range(const char *name, int64_t row_start, int64_t row_count, zdist_error_t *err)
{
    if (row_count < 0)
        return zdist_error_set(err, -EINVAL,
                               "variable '%s': row_count %lld is negative; 0 means the whole shard", name,
                               (long long) row_count);
    if (row_count > 0 && row_start < 0)
        return zdist_error_set(err, -EINVAL, "variable '%s': row_start %lld is negative; rows count from 0",
                               name, (long long) row_start);
    if (row_count > 0 && row_start > INT64_MAX - row_count)
        return zdist_error_set(err, -EINVAL, "variable '%s': row_start %lld + row_count %lld overflows", name,
                               (long long) row_start, (long long) row_count);
    return 0;
}

/* Tensor `index` of a request as the ids: int64 [n]. */
static int
s_decode_ids(const zdist_msg_t *request, size_t index, const int64_t **ret_ids, size_t *ret_nids,
             zdist_error_t *err)
{
    const zdist_tensor_t *t = zdist_msg_tensor(request, index);
    if (!t || t->dtype != ZDIST_DTYPE_INT64 || t->shape.rank != 1)
        return zdist_error_set(err, -EINVAL, "tensor %zu must be the ids: int64 with shape [n]", index);
    *ret_ids = t->data; /* zdist_wire_recv hands over payloads aligned for their dtype */
    *ret_nids = (size_t) t->shape.dims[0];
    return 0;
}

static int
s_decode_create(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    const Zdist__Ps__CreateRequest *r = (const Zdist__Ps__CreateRequest *) pb;
    zdist_ps_var_spec_t *spec = ret;
    (void) request;
    int rc = s_check_name(r->name, err);
    if (rc < 0)
        return rc;
    spec->name = r->name;
    spec->dtype = zdist_dtype_from_name(r->dtype);
    if (!zdist_dtype_is_data(spec->dtype))
        return zdist_error_set(
            err, -EINVAL,
            "variable '%s': dtype '%.40s' cannot be stored; use float32, float64, int32, int64 "
            "or uint8",
            r->name, r->dtype);
    size_t bytes;
    if (r->n_shape > ZDIST_MAX_RANK || zdist_shape_init(&spec->shape, (int) r->n_shape, r->shape) < 0)
        return zdist_error_set(err, -EINVAL,
                               "variable '%s': shape must have rank <= %d and no negative dimension", r->name,
                               ZDIST_MAX_RANK);
    if (zdist_tensor_byte_size(spec->dtype, &spec->shape, &bytes) < 0)
        return zdist_error_set(err, -EINVAL, "variable '%s': the shape overflows", r->name);
    if ((rc = s_check_shard_index(r->name, r->shard_index, err)) < 0)
        return rc;
    int64_t total = spec->shape.rank > 0 ? spec->shape.dims[0] : 1;
    if (r->row_offset < 0 || r->row_count < 0 || r->row_offset > total ||
        r->row_count > total - r->row_offset)
        return zdist_error_set(
            err, -EINVAL,
            "variable '%s' shard %d: row_offset %lld and row_count %lld do not fit its %lld rows", r->name,
            (int) r->shard_index, (long long) r->row_offset, (long long) r->row_count, (long long) total);
    spec->shard_index = r->shard_index;
    spec->row_offset = r->row_offset;
    spec->row_count = r->row_count;
    spec->seed = r->seed;
    spec->init_name = r->init_name && *r->init_name ? r->init_name : NULL;
    spec->init.kind = ZDIST_INIT_ZEROS;
    const Zdist__Ps__Initializer *init = r->initializer;
    if (init && init->kind && *init->kind) {
        if (zdist_init_kind_from_name(init->kind, &spec->init.kind) < 0)
            return zdist_error_set(err, -EINVAL,
                                   "variable '%s': unknown initializer '%.40s'; use zeros, ones, constant, "
                                   "random_uniform, random_normal, truncated_normal or glorot_uniform",
                                   r->name, init->kind);
        spec->init.value = init->value;
        spec->init.minval = init->minval;
        spec->init.maxval = init->maxval;
        spec->init.mean = init->mean;
        spec->init.stddev = init->stddev;
    }
    if ((rc = zdist_init_validate(&spec->init, spec->dtype, err)) < 0)
        zdist_error_prefix(err, "variable '%s': initializer", r->name);
    return rc;
}

static int
s_decode_pull(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    const Zdist__Ps__PullRequest *r = (const Zdist__Ps__PullRequest *) pb;
    zdist_ps_pull_t *p = ret;
    (void) request;
    int rc;
    if ((rc = s_check_name(r->name, err)) < 0 ||
        (rc = s_check_shard_index(r->name, r->shard_index, err)) < 0 ||
        (rc = s_check_range(r->name, r->row_start, r->row_count, err)) < 0)
        return rc;
    *p = (zdist_ps_pull_t){r->name, r->shard_index, r->row_start, r->row_count};
    return 0;
}

static int
s_decode_pull_rows(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    const Zdist__Ps__PullRowsRequest *r = (const Zdist__Ps__PullRowsRequest *) pb;
    zdist_ps_pull_rows_t *p = ret;
    int rc = s_check_name(r->name, err);
    if (rc < 0 || (rc = s_decode_ids(request, 0, &p->ids, &p->nids, err)) < 0)
        return rc;
    p->name = r->name;
    return 0;
}

static int
s_decode_write(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    const Zdist__Ps__WriteRequest *r = (const Zdist__Ps__WriteRequest *) pb;
    zdist_ps_write_t *w = ret;
    uint32_t method = zdist_msg_method(request);
    size_t ntensors = zdist_msg_tensor_count(request);
    if (!zdist_ps_method_is_write(method))
        return zdist_error_set(err, -EINVAL, "method %u is not a write", method);
    int rc;
    if ((rc = s_check_name(r->name, err)) < 0 || (rc = s_check_shard_index(r->name, r->shard_index, err)) < 0)
        return rc;
    w->name = r->name;
    w->shard_index = r->shard_index;
    w->sequence = r->sequence;
    if (r->step_write > ZDIST_PS_MAX_STEP_WRITE)
        return zdist_error_set(err, -EINVAL, "write to '%s': step_write %u is above %d; a step writes a shard "
                               "at most %d times", r->name, (unsigned) r->step_write, ZDIST_PS_MAX_STEP_WRITE,
                               ZDIST_PS_MAX_STEP_WRITE + 1);
    w->job_step = r->job_step;
    w->step_write = r->step_write;
    /* A push is sparse when it carries ids; scatter_* always does. */
    w->by_ids = method == ZDIST_PS_SCATTER_ADD || method == ZDIST_PS_SCATTER_UPDATE ||
                (method == ZDIST_PS_PUSH && ntensors == 2);
    if (ntensors != (w->by_ids ? 2u : 1u))
        return zdist_error_set(err, -EINVAL,
                               w->by_ids
                                   ? "write to '%s' by ids takes two tensors (ids int64 [n], rows [n, ...]), "
                                     "got %zu"
                                   : "write to '%s' takes one values tensor, got %zu",
                               r->name, ntensors);
    const zdist_tensor_t *values = zdist_msg_tensor(request, w->by_ids ? 1 : 0);
    if (!zdist_dtype_is_data(values->dtype))
        return zdist_error_set(err, -EINVAL, "write to '%s': values of dtype %s cannot be written", r->name,
                               zdist_dtype_name(values->dtype));
    w->values = *values;
    if (r->part_row != 0 || r->more_parts) {
        if (method != ZDIST_PS_PUSH || w->by_ids)
            return zdist_error_set(err, -EINVAL, "write to '%s': only a dense push is sent in parts (part_row "
                                   "%lld, more_parts %d); send this write whole", r->name, (long long) r->part_row,
                                   (int) r->more_parts);
        int64_t rows = values->shape.rank ? values->shape.dims[0] : 0;
        if (r->part_row < 0 || values->shape.rank < 1 ||
            (r->row_count > 0 && (rows > r->row_count || r->part_row > r->row_count - rows)))
            return zdist_error_set(err, -EINVAL, "write to '%s': a part of %lld rows at part_row %lld does not "
                                   "fit the write's rows (row_count %lld, 0: the whole shard)", r->name,
                                   (long long) rows, (long long) r->part_row, (long long) r->row_count);
        w->part_row = r->part_row;
        w->more_parts = r->more_parts;
    }
    if (w->by_ids) {
        if ((rc = s_decode_ids(request, 0, &w->ids, &w->nids, err)) < 0)
            return rc;
        if (values->shape.rank < 1 || values->shape.dims[0] != (int64_t) w->nids)
            return zdist_error_set(err, -EINVAL, "write to '%s': %zu ids but the rows tensor has %lld rows",
                                   r->name, w->nids,
                                   values->shape.rank ? (long long) values->shape.dims[0] : 0LL);
        return 0;
    }
    if ((rc = s_check_range(r->name, r->row_start, r->row_count, err)) < 0)
        return rc;
    w->row_start = r->row_start;
    w->row_count = r->row_count;
    return 0;
}

/* A job's name, which names its namespace "JOB/" on the psd: "" (none) or
   1..ZDIST_PS_JOB_MAX bytes of [A-Za-z0-9._-]. */
static int
s_check_job(const char *job, zdist_error_t *err)
{
    size_t n = strnlen(job, ZDIST_PS_JOB_MAX + 1);
    if (n > ZDIST_PS_JOB_MAX)
        return zdist_error_set(err, -EINVAL, "job is longer than %d bytes; give the job's id", ZDIST_PS_JOB_MAX);
    for (size_t i = 0; i < n; i++) {
        char c = job[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return zdist_error_set(err, -EINVAL, "job '%.64s': byte %zu is not one of [A-Za-z0-9._-]; give the "
                                   "job's id (its variables are named \"JOB/...\")", job, i);
    }
    if (strcmp(job, ".") == 0 || strcmp(job, "..") == 0)
        return zdist_error_set(err, -EINVAL, "job '%s' is not a job id", job);
    return 0;
}

static int
s_decode_save(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    const Zdist__Ps__SaveRequest *r = (const Zdist__Ps__SaveRequest *) pb;
    zdist_ps_save_t *s = ret;
    (void) request;
    int rc = s_check_dir(r->dir, "save into", err);
    if (rc < 0)
        return rc;
    if (r->step < 0)
        return zdist_error_set(err, -EINVAL, "step %lld is negative; give the training step saved",
                               (long long) r->step);
    if (r->ps_task < 0)
        return zdist_error_set(err, -EINVAL, "ps_task %d is negative; give this psd's task index",
                               (int) r->ps_task);
    if ((rc = s_check_job(r->job, err)) < 0)
        return rc;
    *s = (zdist_ps_save_t){r->dir, r->step, r->ps_task, r->job};
    return 0;
}

static int
s_decode_restore(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    const Zdist__Ps__RestoreRequest *r = (const Zdist__Ps__RestoreRequest *) pb;
    zdist_ps_restore_t *s = ret;
    (void) request;
    int rc = s_check_dir(r->dir, "restore from", err);
    if (rc == 0)
        rc = s_check_job(r->job, err);
    if (rc == 0)
        *s = (zdist_ps_restore_t){r->dir, r->job};
    return rc;
}

static int
s_decode_drop_job(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    const Zdist__Ps__DropJobRequest *r = (const Zdist__Ps__DropJobRequest *) pb;
    (void) request;
    if (!*r->job)
        return zdist_error_set(err, -EINVAL, "job is empty; name the job whose variables to drop (its "
                               "id: the psd holds them as \"JOB/...\")");
    int rc = s_check_job(r->job, err);
    if (rc < 0)
        return rc;
    ((zdist_ps_drop_job_t *) ret)->job = r->job;
    ((zdist_ps_drop_job_t *) ret)->force = r->force;
    return 0;
}

static int
s_decode_stats(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    (void) pb, (void) request, (void) ret, (void) err;
    return 0;
}

static int
s_decode_set_optimizer(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    const Zdist__Ps__Optimizer *r = (const Zdist__Ps__Optimizer *) pb;
    zdist_ps_set_optimizer_t *so = ret;
    zdist_optim_config_t *cfg = &so->config;
    (void) request;
    int jrc = s_check_job(r->job, err);
    if (jrc < 0)
        return jrc;
    so->job = r->job;
    zdist_optim_kind_t kind;
    if (zdist_optim_kind_from_name(r->kind, &kind) < 0)
        return zdist_error_set(err, -EINVAL,
                               "optimizer '%.40s' is unknown; use sgd, momentum, adagrad or adam", r->kind);
    zdist_optim_config_default(cfg, kind);
    /* Zero means "not given": keep the Keras default. */
    if (r->learning_rate != 0)
        cfg->learning_rate = r->learning_rate;
    if (r->momentum != 0)
        cfg->momentum = r->momentum;
    cfg->nesterov = r->nesterov;
    if (r->initial_accumulator_value != 0)
        cfg->initial_accumulator_value = r->initial_accumulator_value;
    if (r->beta1 != 0)
        cfg->beta1 = r->beta1;
    if (r->beta2 != 0)
        cfg->beta2 = r->beta2;
    if (r->epsilon != 0)
        cfg->epsilon = r->epsilon;
    cfg->lazy = r->lazy;
    int rc = zdist_optim_config_validate(cfg, err);
    if (rc < 0)
        zdist_error_prefix(err, "optimizer %s", zdist_optim_kind_name(kind));
    return rc;
}

static int
s_decode_push_pull(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err)
{
    const Zdist__Ps__PushPullRequest *r = (const Zdist__Ps__PushPullRequest *) pb;
    zdist_ps_push_pull_t *pp = ret;
    size_t ntensors = zdist_msg_tensor_count(request);
    if (r->n_items > ZDIST_PS_PUSH_PULL_MAX_ITEMS)
        return zdist_error_set(err, -EINVAL,
                               "%zu items exceed the limit of %d per push_pull; send fewer shards",
                               r->n_items, ZDIST_PS_PUSH_PULL_MAX_ITEMS);
    zdist_ps_push_pull_item_t *items = calloc(r->n_items ? r->n_items : 1, sizeof *items);
    if (!items)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    pp->items = items; /* released by s_release_push_pull, also on error */
    pp->nitems = r->n_items;
    pp->sequence = r->sequence;
    pp->job_step = r->job_step;
    size_t t = 0;
    int rc;
    for (size_t i = 0; i < r->n_items; i++) {
        const Zdist__Ps__PushPullItem *in = r->items[i];
        zdist_ps_push_pull_item_t *it = &items[i];
        if ((rc = s_check_name(in->name, err)) < 0 ||
            (rc = s_check_shard_index(in->name, in->shard_index, err)) < 0)
            return zdist_error_prefix(err, "item %zu", i), rc;
        for (size_t j = 0; j < i; j++)
            if (items[j].shard_index == in->shard_index && strcmp(items[j].name, in->name) == 0)
                return zdist_error_set(
                    err, -EINVAL,
                    "items %zu and %zu both name variable '%s' shard %d; send one item per shard", j, i,
                    in->name, (int) in->shard_index);
        it->name = in->name;
        it->shard_index = in->shard_index;
        it->pull = in->pull;
        it->push = in->push;
        if (in->step_write > ZDIST_PS_MAX_STEP_WRITE)
            return zdist_error_set(err, -EINVAL, "item %zu ('%s'): step_write %u is above %d; a step writes a "
                                   "shard at most %d times", i, in->name, (unsigned) in->step_write,
                                   ZDIST_PS_MAX_STEP_WRITE, ZDIST_PS_MAX_STEP_WRITE + 1);
        it->step_write = in->step_write;
        it->by_ids = in->push && in->sparse;
        if (!it->push)
            continue;
        if (t + (it->by_ids ? 2 : 1) > ntensors)
            return zdist_error_set(
                err, -EINVAL,
                "item %zu (variable '%s'): its gradient tensor is missing (%zu tensors for the "
                "items' pushes)",
                i, in->name, ntensors);
        if (it->by_ids && (rc = s_decode_ids(request, t++, &it->ids, &it->nids, err)) < 0)
            return zdist_error_prefix(err, "item %zu (variable '%s')", i, in->name), rc;
        it->grad = *zdist_msg_tensor(request, t++);
        if (!zdist_dtype_is_data(it->grad.dtype))
            return zdist_error_set(err, -EINVAL,
                                   "item %zu (variable '%s'): a gradient of dtype %s cannot be applied", i,
                                   in->name, zdist_dtype_name(it->grad.dtype));
        if (it->by_ids && (it->grad.shape.rank < 1 || it->grad.shape.dims[0] != (int64_t) it->nids))
            return zdist_error_set(
                err, -EINVAL, "item %zu (variable '%s'): %zu ids but the gradient has %lld rows", i, in->name,
                it->nids, it->grad.shape.rank ? (long long) it->grad.shape.dims[0] : 0LL);
    }
    if (t != ntensors)
        return zdist_error_set(err, -EINVAL, "push_pull: the items' pushes take %zu tensors, got %zu", t,
                               ntensors);
    return 0;
}

static void
s_release_push_pull(void *typed)
{
    zdist_ps_push_pull_t *pp = typed;
    free((void *) pp->items);
    pp->items = NULL;
}

const zdist_rpc_body_t zdist_ps_body_create = {&zdist__ps__create_request__descriptor,
                                               sizeof(zdist_ps_var_spec_t), s_decode_create, NULL};
const zdist_rpc_body_t zdist_ps_body_pull = {&zdist__ps__pull_request__descriptor, sizeof(zdist_ps_pull_t),
                                             s_decode_pull, NULL};
const zdist_rpc_body_t zdist_ps_body_pull_rows = {&zdist__ps__pull_rows_request__descriptor,
                                                  sizeof(zdist_ps_pull_rows_t), s_decode_pull_rows, NULL};
const zdist_rpc_body_t zdist_ps_body_write = {&zdist__ps__write_request__descriptor, sizeof(zdist_ps_write_t),
                                              s_decode_write, NULL};
const zdist_rpc_body_t zdist_ps_body_save = {&zdist__ps__save_request__descriptor, sizeof(zdist_ps_save_t),
                                             s_decode_save, NULL};
const zdist_rpc_body_t zdist_ps_body_restore = {&zdist__ps__restore_request__descriptor,
                                                sizeof(zdist_ps_restore_t), s_decode_restore, NULL};
const zdist_rpc_body_t zdist_ps_body_drop_job = {&zdist__ps__drop_job_request__descriptor,
                                                 sizeof(zdist_ps_drop_job_t), s_decode_drop_job, NULL};
const zdist_rpc_body_t zdist_ps_body_stats = {&zdist__ps__stats_request__descriptor, 0, s_decode_stats, NULL};
const zdist_rpc_body_t zdist_ps_body_push_pull = {&zdist__ps__push_pull_request__descriptor,
                                                  sizeof(zdist_ps_push_pull_t), s_decode_push_pull,
                                                  s_release_push_pull};
const zdist_rpc_body_t zdist_ps_body_set_optimizer = {
    &zdist__ps__optimizer__descriptor, sizeof(zdist_ps_set_optimizer_t), s_decode_set_optimizer, NULL};

/* ---- reply encoders ---- */

int
zdist_ps_reply_set_create(zdist_msg_t *reply, bool created)
{
    Zdist__Ps__CreateReply r = ZDIST__PS__CREATE_REPLY__INIT;
    r.created = created;
    return zdist_msg_set_body(reply, &r.base);
}

int
zdist_ps_reply_set_write(zdist_msg_t *reply, bool duplicate, int64_t step)
{
    Zdist__Ps__WriteReply r = ZDIST__PS__WRITE_REPLY__INIT;
    r.duplicate = duplicate;
    r.step = step;
    return zdist_msg_set_body(reply, &r.base);
}

int
zdist_ps_reply_set_push_pull(zdist_msg_t *reply, size_t nitems, const bool *duplicate, const int64_t *step)
{
    Zdist__Ps__WriteReply *res = calloc(nitems ? nitems : 1, sizeof *res);
    Zdist__Ps__WriteReply **resp = calloc(nitems ? nitems : 1, sizeof *resp);
    int rc = -ENOMEM;
    if (res && resp) {
        for (size_t i = 0; i < nitems; i++) {
            zdist__ps__write_reply__init(&res[i]);
            res[i].duplicate = duplicate[i];
            res[i].step = step[i];
            resp[i] = &res[i];
        }
        Zdist__Ps__PushPullReply r = ZDIST__PS__PUSH_PULL_REPLY__INIT;
        r.n_results = nitems;
        r.results = resp;
        rc = zdist_msg_set_body(reply, &r.base);
    }
    free(res);
    free(resp);
    return rc;
}

int
zdist_ps_reply_set_save(zdist_msg_t *reply, uint64_t bytes)
{
    Zdist__Ps__SaveReply r = ZDIST__PS__SAVE_REPLY__INIT;
    r.bytes = bytes;
    return zdist_msg_set_body(reply, &r.base);
}

int
zdist_ps_reply_set_restore(zdist_msg_t *reply, int64_t step)
{
    Zdist__Ps__RestoreReply r = ZDIST__PS__RESTORE_REPLY__INIT;
    r.step = step;
    return zdist_msg_set_body(reply, &r.base);
}

int
zdist_ps_reply_set_drop_job(zdist_msg_t *reply, uint64_t shards, uint64_t bytes)
{
    Zdist__Ps__DropJobReply r = ZDIST__PS__DROP_JOB_REPLY__INIT;
    r.shards = shards;
    r.bytes = bytes;
    return zdist_msg_set_body(reply, &r.base);
}

int
zdist_ps_reply_set_stats(zdist_msg_t *reply, const zdist_ps_stats_t *st)
{
    Zdist__Ps__StatsReply r = ZDIST__PS__STATS_REPLY__INIT;
    r.variables = st->variables;
    r.shards = st->shards;
    r.value_bytes = st->value_bytes;
    r.slot_bytes = st->slot_bytes;
    r.uptime_ms = st->uptime_ms;
    r.incarnation = st->incarnation;
    r.ps_task = st->ps_task;
    r.optimizer = (char *) st->optimizer;
    size_t nm = st->nmethods, ns = st->nshard_info;
    Zdist__Ps__MethodStats *ms = calloc(nm ? nm : 1, sizeof *ms);
    Zdist__Ps__MethodStats **msp = calloc(nm ? nm : 1, sizeof *msp);
    Zdist__Ps__ShardInfo *si = calloc(ns ? ns : 1, sizeof *si);
    Zdist__Ps__ShardInfo **sip = calloc(ns ? ns : 1, sizeof *sip);
    int rc = -ENOMEM;
    if (ms && msp && si && sip) {
        for (size_t i = 0; i < nm; i++) {
            const zdist_ps_method_stats_t *m = &st->methods[i];
            zdist__ps__method_stats__init(&ms[i]);
            ms[i].name = (char *) m->name;
            ms[i].requests = m->requests;
            ms[i].errors = m->errors;
            ms[i].p50_us = m->p50_us;
            ms[i].p99_us = m->p99_us;
            msp[i] = &ms[i];
        }
        for (size_t i = 0; i < ns; i++) {
            const zdist_ps_shard_info_t *s = &st->shard_info[i];
            zdist__ps__shard_info__init(&si[i]);
            si[i].name = (char *) s->name;
            si[i].shard_index = s->shard_index;
            si[i].dtype = (char *) zdist_dtype_name(s->dtype);
            si[i].n_shape = (size_t) s->shape.rank;
            si[i].shape = (int64_t *) s->shape.dims;
            si[i].row_offset = s->row_offset;
            si[i].row_count = s->row_count;
            si[i].step = s->step;
            sip[i] = &si[i];
        }
        r.n_methods = nm;
        r.methods = msp;
        r.n_shard_info = ns;
        r.shard_info = sip;
        rc = zdist_msg_set_body(reply, &r.base);
    }
    free(ms);
    free(msp);
    free(si);
    free(sip);
    return rc;
}

/* ---- reply parsers ---- */

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

/* The fields of the small replies: create, write, save, restore. */
typedef struct {
    bool flag; /* created, duplicate */
    int64_t step;
    uint64_t bytes;
} s_scalars_t;

static int
s_reply_scalars(const zdist_msg_t *reply, const ProtobufCMessageDescriptor *desc, s_scalars_t *ret,
                zdist_error_t *err)
{
    ProtobufCMessage *body = NULL;
    int rc = s_unpack(reply, desc, &body, err);
    if (rc < 0)
        return rc;
    if (desc == &zdist__ps__create_reply__descriptor) {
        ret->flag = ((const Zdist__Ps__CreateReply *) body)->created;
    } else if (desc == &zdist__ps__write_reply__descriptor) {
        ret->flag = ((const Zdist__Ps__WriteReply *) body)->duplicate;
        ret->step = ((const Zdist__Ps__WriteReply *) body)->step;
    } else if (desc == &zdist__ps__save_reply__descriptor) {
        ret->bytes = ((const Zdist__Ps__SaveReply *) body)->bytes;
    } else {
        ret->step = ((const Zdist__Ps__RestoreReply *) body)->step;
    }
    protobuf_c_message_free_unpacked(body, NULL);
    return 0;
}

int
zdist_ps_reply_create(const zdist_msg_t *reply, bool *ret_created, zdist_error_t *err)
{
    s_scalars_t s = {0};
    int rc = s_reply_scalars(reply, &zdist__ps__create_reply__descriptor, &s, err);
    if (rc == 0 && ret_created)
        *ret_created = s.flag;
    return rc;
}

int
zdist_ps_reply_write(const zdist_msg_t *reply, bool *ret_duplicate, int64_t *ret_step, zdist_error_t *err)
{
    s_scalars_t s = {0};
    int rc = s_reply_scalars(reply, &zdist__ps__write_reply__descriptor, &s, err);
    if (rc == 0 && ret_duplicate)
        *ret_duplicate = s.flag;
    if (rc == 0 && ret_step)
        *ret_step = s.step;
    return rc;
}

int
zdist_ps_reply_push_pull(const zdist_msg_t *reply, const zdist_ps_push_pull_t *request, bool *ret_duplicate,
                         int64_t *ret_step, zdist_tensor_t *ret_values, zdist_error_t *err)
{
    if (!request)
        return zdist_error_set(err, -EINVAL, "push_pull reply: no request to match it with");
    ProtobufCMessage *body = NULL;
    int rc = s_unpack(reply, &zdist__ps__push_pull_reply__descriptor, &body, err);
    if (rc < 0)
        return rc;
    const Zdist__Ps__PushPullReply *r = (const Zdist__Ps__PushPullReply *) body;
    size_t npull = 0;
    for (size_t i = 0; i < request->nitems; i++)
        npull += request->items[i].pull;
    if (r->n_results != request->nitems || zdist_msg_tensor_count(reply) != npull) {
        rc = zdist_error_set(err, -EPROTO,
                             "push_pull reply: %zu results and %zu tensors for %zu items (%zu pulls)",
                             r->n_results, zdist_msg_tensor_count(reply), request->nitems, npull);
    } else {
        size_t t = 0;
        for (size_t i = 0; i < request->nitems; i++) {
            if (ret_duplicate)
                ret_duplicate[i] = r->results[i]->duplicate;
            if (ret_step)
                ret_step[i] = r->results[i]->step;
            if (ret_values)
                ret_values[i] = request->items[i].pull ? *zdist_msg_tensor(reply, t) : (zdist_tensor_t){0};
            t += request->items[i].pull;
        }
    }
    protobuf_c_message_free_unpacked(body, NULL);
    return rc;
}

int
zdist_ps_reply_save(const zdist_msg_t *reply, uint64_t *ret_bytes, zdist_error_t *err)
{
    s_scalars_t s = {0};
    int rc = s_reply_scalars(reply, &zdist__ps__save_reply__descriptor, &s, err);
    if (rc == 0 && ret_bytes)
        *ret_bytes = s.bytes;
    return rc;
}

int
zdist_ps_reply_restore(const zdist_msg_t *reply, int64_t *ret_step, zdist_error_t *err)
{
    s_scalars_t s = {0};
    int rc = s_reply_scalars(reply, &zdist__ps__restore_reply__descriptor, &s, err);
    if (rc == 0 && ret_step)
        *ret_step = s.step;
    return rc;
}

int
zdist_ps_reply_drop_job(const zdist_msg_t *reply, uint64_t *ret_shards, uint64_t *ret_bytes, zdist_error_t *err)
{
    ProtobufCMessage *body = NULL;
    int rc = s_unpack(reply, &zdist__ps__drop_job_reply__descriptor, &body, err);
    if (rc < 0)
        return rc;
    const Zdist__Ps__DropJobReply *r = (const Zdist__Ps__DropJobReply *) body;
    if (ret_shards)
        *ret_shards = r->shards;
    if (ret_bytes)
        *ret_bytes = r->bytes;
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
        free((char *) self->shard_info[i].name);
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
