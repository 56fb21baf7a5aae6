/* ps_service_body: the psd's request body types: each ps.proto request decoded and checked into its plain C struct. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps.pb-c.h"
#include "wire/body.h"
#include "zdist/ps_service.h"

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

/* A dynamic table's part: float32 [0, dim], no row range, this ps among num_ps. */
static int
s_decode_dynamic(const Zdist__Ps__CreateRequest *r, zdist_ps_var_spec_t *spec, zdist_error_t *err)
{
    const Zdist__Ps__Dynamic *d = r->dynamic;
    if (spec->dtype != ZDIST_DTYPE_FLOAT32 || spec->shape.rank != 2 || spec->shape.dims[0] != 0 ||
        spec->shape.dims[1] < 1 || spec->shape.dims[1] > 65536 || r->row_offset != 0 || r->row_count != 0)
        return zdist_error_set(err, -EINVAL,
                               "variable '%s': a dynamic table is float32 of shape [0, dim] (dim 1..65536) with "
                               "row_offset and row_count 0", r->name);
    if (d->num_ps < 1 || r->shard_index >= d->num_ps)
        return zdist_error_set(err, -EINVAL,
                               "variable '%s': dynamic.num_ps %d: give the ps task count (>= 1, above the "
                               "shard_index %d)", r->name, (int) d->num_ps, (int) r->shard_index);
    if (!(d->evict_l2_below >= 0) || d->evict_l2_below > 1e300)
        return zdist_error_set(err, -EINVAL, "variable '%s': dynamic.evict_l2_below must be a number >= 0",
                               r->name);
    if (!isfinite(d->default_value) || fabs(d->default_value) > 3.4e38)
        return zdist_error_set(err, -EINVAL, "variable '%s': dynamic.default_value must be a finite float32",
                               r->name);
    spec->dynamic = (zdist_ps_dynamic_t){.enabled = true, .min_count = d->min_count,
                                         .evict_after_steps = d->evict_after_steps,
                                         .evict_l2_below = d->evict_l2_below, .num_ps = d->num_ps,
                                         .default_value = d->default_value};
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
    if (rc == 0 && r->dynamic && r->dynamic->enabled)
        rc = s_decode_dynamic(r, spec, err);
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
    if (r->n_more == 0)
        return zdist_msg_tensor_count(request) == 1
                   ? 0
                   : zdist_error_set(err, -EINVAL, "pull_rows of one variable takes one ids tensor, got %zu",
                                     zdist_msg_tensor_count(request));
    if (r->n_more >= ZDIST_PS_PULL_ROWS_MAX_ITEMS || zdist_msg_tensor_count(request) != r->n_more + 1)
        return zdist_error_set(err, -EINVAL, "pull_rows of %zu variables (at most %d) takes as many ids tensors, got %zu",
                               r->n_more + 1, ZDIST_PS_PULL_ROWS_MAX_ITEMS, zdist_msg_tensor_count(request));
    zdist_ps_rows_item_t *more = calloc(r->n_more, sizeof *more);
    if (!more)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    p->more = more; /* released by s_release_pull_rows, also on error */
    p->nmore = r->n_more;
    for (size_t k = 0; k < r->n_more; k++) {
        if ((rc = s_check_name(r->more[k], err)) < 0 ||
            (rc = s_decode_ids(request, k + 1, &more[k].ids, &more[k].nids, err)) < 0)
            return zdist_error_prefix(err, "item %zu", k + 1), rc;
        more[k].name = r->more[k];
    }
    return 0;
}

static void
s_release_pull_rows(void *typed)
{
    zdist_ps_pull_rows_t *p = typed;
    free((void *) p->more);
    p->more = NULL;
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
    if (r->full_every < 0 || r->full_every > ZDIST_PS_FULL_EVERY_MAX)
        return zdist_error_set(err, -EINVAL, "full_every %d is out of range: 0 (the default) to %d",
                               (int) r->full_every, ZDIST_PS_FULL_EVERY_MAX);
    *s = (zdist_ps_save_t){r->dir, r->step, r->ps_task, r->job, r->full_every};
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
                               "optimizer '%.40s' is unknown; use sgd, momentum, adagrad, adam or ftrl", r->kind);
    zdist_optim_config_default(cfg, kind);
    if (r->exact) { /* ftrl: these zeros mean zero */
        cfg->initial_accumulator_value = r->initial_accumulator_value;
        cfg->learning_rate_power = r->learning_rate_power;
    }
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
    if (r->learning_rate_power != 0)
        cfg->learning_rate_power = r->learning_rate_power;
    /* ftrl's regularization strengths default to 0: as given either way. */
    cfg->l1 = r->l1_regularization_strength;
    cfg->l2 = r->l2_regularization_strength;
    cfg->l2_shrinkage = r->l2_shrinkage_regularization_strength;
    cfg->beta = r->beta;
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
                                                  sizeof(zdist_ps_pull_rows_t), s_decode_pull_rows,
                                                  s_release_pull_rows};
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
