/* ps_service_reply: ps.proto replies: the psd's encoders and a client's parsers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps.pb-c.h"
#include "wire/body.h"
#include "zdist/ps_service.h"

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

/* The stats reply's dynamic tables, then its body. */
static int
s_set_embeddings(zdist_msg_t *reply, Zdist__Ps__StatsReply *r, const zdist_ps_stats_t *st)
{
    size_t ne = st->nembeddings;
    Zdist__Ps__EmbeddingInfo *ei = calloc(ne ? ne : 1, sizeof *ei);
    Zdist__Ps__EmbeddingInfo **eip = calloc(ne ? ne : 1, sizeof *eip);
    int rc = -ENOMEM;
    if (ei && eip) {
        for (size_t i = 0; i < ne; i++) {
            const zdist_ps_embedding_info_t *e = &st->embeddings[i];
            zdist__ps__embedding_info__init(&ei[i]);
            ei[i].name = (char *) e->name;
            ei[i].rows = e->rows;
            ei[i].admitted = e->admitted;
            ei[i].refused = e->refused;
            ei[i].evicted = e->evicted;
            ei[i].bytes = e->bytes;
            ei[i].pending = e->pending;
            ei[i].dropped_grads = e->dropped_grads;
            eip[i] = &ei[i];
        }
        r->n_embeddings = ne;
        r->embeddings = eip;
        rc = zdist_msg_set_body(reply, &r->base);
    }
    free(ei);
    free(eip);
    return rc;
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
        rc = s_set_embeddings(reply, &r, st);
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

int
zdist_ps_reply_values_at(const zdist_msg_t *reply, size_t index, size_t count, zdist_tensor_t *ret_values,
                         zdist_error_t *err)
{
    int rc = zdist_ps_reply_check(reply, err);
    if (rc < 0)
        return rc;
    const zdist_tensor_t *t = zdist_msg_tensor(reply, index);
    if (!t || index >= count || zdist_msg_tensor_count(reply) != count)
        return zdist_error_set(err, -EPROTO, "%s reply: expected %zu values tensors, got %zu",
                               zdist_ps_method_name(zdist_msg_method(reply)), count, zdist_msg_tensor_count(reply));
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
    for (size_t i = 0; self->embeddings && i < self->nembeddings; i++)
        free((char *) self->embeddings[i].name);
    free(self->embeddings);
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
    if (!(st->embeddings = calloc(r->n_embeddings ? r->n_embeddings : 1, sizeof *st->embeddings)))
        goto nomem;
    for (size_t i = 0; i < r->n_embeddings; i++) {
        const Zdist__Ps__EmbeddingInfo *e = r->embeddings[i];
        zdist_ps_embedding_info_t *o = &st->embeddings[st->nembeddings];
        if (!(o->name = strdup(e->name ? e->name : "")))
            goto nomem;
        st->nembeddings++;
        o->rows = e->rows;
        o->admitted = e->admitted;
        o->refused = e->refused;
        o->evicted = e->evicted;
        o->bytes = e->bytes;
        o->pending = e->pending;
        o->dropped_grads = e->dropped_grads;
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

