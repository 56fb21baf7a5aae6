/* ps_service: proto/ps.proto <-> plain C: method names and the request encoders (a ps client's side).
   The psd's body types are ps_service_body.c; replies both ways ps_service_reply.c. */
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
    Zdist__Ps__Dynamic dyn = ZDIST__PS__DYNAMIC__INIT;
    if (spec->dynamic.enabled) {
        dyn.enabled = true;
        dyn.min_count = spec->dynamic.min_count;
        dyn.evict_after_steps = spec->dynamic.evict_after_steps;
        dyn.evict_l2_below = spec->dynamic.evict_l2_below;
        dyn.num_ps = spec->dynamic.num_ps;
        dyn.default_value = spec->dynamic.default_value;
        req.dynamic = &dyn;
    }
    return zdist_msg_new_body(ZDIST_PS_CREATE, &req.base);
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
    return zdist_msg_new_body(ZDIST_PS_PULL, &req.base);
}

zdist_msg_t *
zdist_ps_request_pull_rows(const char *name, const int64_t *ids, size_t nids, zdist_free_fn *ffn, void *hint)
{
    zdist_msg_t *msg = NULL;
    if (name && (ids || nids == 0) && nids <= INT64_MAX / sizeof *ids) {
        Zdist__Ps__PullRowsRequest req = ZDIST__PS__PULL_ROWS_REQUEST__INIT;
        req.name = (char *) name;
        msg = zdist_msg_new_body(ZDIST_PS_PULL_ROWS, &req.base);
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

zdist_msg_t *
zdist_ps_request_pull_rows_items(const zdist_ps_pull_rows_t *p)
{
    if (!p || p->nmore == 0)
        return p ? zdist_ps_request_pull_rows(p->name, p->ids, p->nids, NULL, NULL) : NULL;
    if (!p->name || !p->more || p->nmore >= ZDIST_PS_PULL_ROWS_MAX_ITEMS || (!p->ids && p->nids))
        return NULL;
    char **names = malloc(p->nmore * sizeof *names);
    if (!names)
        return NULL;
    bool ok = true;
    for (size_t k = 0; k < p->nmore; k++) {
        names[k] = (char *) p->more[k].name;
        ok = ok && names[k] && (p->more[k].ids || p->more[k].nids == 0) &&
             p->more[k].nids <= INT64_MAX / sizeof(int64_t);
    }
    Zdist__Ps__PullRowsRequest req = ZDIST__PS__PULL_ROWS_REQUEST__INIT;
    req.name = (char *) p->name;
    req.n_more = p->nmore;
    req.more = names;
    zdist_msg_t *msg = ok && p->nids <= INT64_MAX / sizeof(int64_t) ? zdist_msg_new_body(ZDIST_PS_PULL_ROWS, &req.base)
                                                                     : NULL;
    free(names);
    int rc = msg ? s_attach_ids(msg, p->ids, p->nids, NULL, NULL) : -EINVAL;
    for (size_t k = 0; rc == 0 && k < p->nmore; k++)
        rc = s_attach_ids(msg, p->more[k].ids, p->more[k].nids, NULL, NULL);
    if (rc < 0)
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
        msg = zdist_msg_new_body(method, &req.base);
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
        msg = zdist_msg_new_body(ZDIST_PS_PUSH_PULL, &req.base);
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
zdist_ps_request_save_with(const zdist_ps_save_t *save)
{
    if (!save || !save->dir)
        return NULL;
    Zdist__Ps__SaveRequest req = ZDIST__PS__SAVE_REQUEST__INIT;
    req.dir = (char *) save->dir;
    req.step = save->step;
    req.ps_task = save->ps_task;
    req.job = (char *) (save->job ? save->job : "");
    req.full_every = save->full_every;
    return zdist_msg_new_body(ZDIST_PS_SAVE, &req.base);
}

zdist_msg_t *
zdist_ps_request_save_job(const char *dir, int64_t step, int32_t ps_task, const char *job)
{
    zdist_ps_save_t save = {dir, step, ps_task, job, 0};
    return zdist_ps_request_save_with(&save);
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
    return zdist_msg_new_body(ZDIST_PS_RESTORE, &req.base);
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
    return zdist_msg_new_body(ZDIST_PS_STATS, &req.base);
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
    req.learning_rate_power = opt->learning_rate_power;
    req.l1_regularization_strength = opt->l1;
    req.l2_regularization_strength = opt->l2;
    req.l2_shrinkage_regularization_strength = opt->l2_shrinkage;
    req.beta = opt->beta;
    req.exact = opt->kind == ZDIST_OPTIM_FTRL;
    return zdist_msg_new_body(ZDIST_PS_SET_OPTIMIZER, &req.base);
}

static zdist_msg_t *
s_request_drop_job(const zdist_ps_drop_job_t *d)
{
    if (!d->job)
        return NULL;
    Zdist__Ps__DropJobRequest req = ZDIST__PS__DROP_JOB_REQUEST__INIT;
    req.job = (char *) d->job;
    req.force = d->force;
    return zdist_msg_new_body(ZDIST_PS_DROP_JOB, &req.base);
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
        return zdist_ps_request_pull_rows_items(&req->pull_rows);
    case ZDIST_PS_SAVE:
        return zdist_ps_request_save_with(&req->save);
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
