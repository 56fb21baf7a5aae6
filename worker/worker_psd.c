/* worker_psd: the parameter_server strategy backend — variables live on psd tasks; reads are pulls, applies are pushes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_psd.h"
#include "zdist/endpoint.h"
#include "zdist/ps_client.h"

/* One request of a pipelined exchange, and what is needed to send it again. */
typedef struct {
    int ps;
    int shard;
    uint64_t id;
    int rc; /* of sending; then of the reply */
    zdist_msg_t *reply;
    /* writes */
    int var;
    uint64_t seq;
    const int64_t *ids; /* sparse push; NULL for dense */
    size_t nids;
    const float *data;
    int64_t rows; /* rows of data */
    /* read_rows: first position in the per-ps order */
    int64_t first;
} s_call_t;

typedef struct {
    worker_backend_t base;
    const worker_vars_t *vars;
    int num_ps;
    char **endpoints;
    zdist_ps_client_t **clients;
    int64_t timeout_ms;
    int retries;
    char **names;             /* [vars->n]: prefix + the variable's name, on the psds */
    zdist_layout_t **layouts; /* [vars->n] */
    float **vals;             /* [vars->n]: the latest pull of each variable */
    int num_shards;
    s_call_t *calls;
    size_t calls_cap;
    /* read_rows / sparse push scratch */
    int64_t *ids;
    int64_t *pos;
    int *owner;
    size_t idx_cap;
    float *rows;
    size_t rows_cap;
    int64_t *counts; /* [max(num_ps, shards of a variable) + 1] */
    size_t counts_cap;
    char last_error[ZDIST_ERROR_TEXT_MAX];
} s_psd_t;

static const worker_backend_ops_t s_ops;

/* Records why a call failed and returns code. Unanswered calls (after the
   retries) become -ENOTCONN: the psd is unreachable. */
static int
s_fail(s_psd_t *self, int code, int ps, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int
s_fail(s_psd_t *self, int code, int ps, const char *fmt, ...)
{
    char text[ZDIST_ERROR_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (code == -ETIMEDOUT || code == -ENOTCONN)
        code = -ENOTCONN;
    if (ps >= 0)
        snprintf(self->last_error, sizeof self->last_error, "ps task %d at %.200s%s: %.280s", ps, self->endpoints[ps],
                 code == -ENOTCONN ? " is unreachable" : "", text);
    else
        snprintf(self->last_error, sizeof self->last_error, "%s", text);
    return code;
}

static bool
s_unanswered(int rc)
{
    return rc == -ETIMEDOUT || rc == -ENOTCONN;
}

static int
s_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

static int
s_reserve_calls(s_psd_t *self, size_t n)
{
    return s_grow((void **)&self->calls, &self->calls_cap, n, sizeof *self->calls);
}

static int
s_reserve_idx(s_psd_t *self, size_t n)
{
    size_t cap = self->idx_cap;
    if (s_grow((void **)&self->ids, &cap, n, sizeof *self->ids) < 0)
        return -ENOMEM;
    cap = self->idx_cap;
    if (s_grow((void **)&self->pos, &cap, n, sizeof *self->pos) < 0)
        return -ENOMEM;
    cap = self->idx_cap;
    if (s_grow((void **)&self->owner, &cap, n, sizeof *self->owner) < 0)
        return -ENOMEM;
    self->idx_cap = cap;
    return 0;
}

static int
s_reserve_counts(s_psd_t *self, size_t n)
{
    return s_grow((void **)&self->counts, &self->counts_cap, n + 1, sizeof *self->counts);
}

static zdist_rpc_client_t *
s_rpc(s_psd_t *self, int ps)
{
    return zdist_ps_client_rpc(self->clients[ps]);
}

/* Sends *msg_p (taken) for calls[i]. */
static void
s_send(s_psd_t *self, s_call_t *c, zdist_msg_t **msg_p)
{
    c->reply = NULL;
    c->rc = *msg_p ? zdist_rpc_client_send(s_rpc(self, c->ps), msg_p, self->timeout_ms, &c->id) : -ENOMEM;
    zdist_msg_destroy(msg_p);
}

/* Waits for the replies of every sent call. A call without an answer gets
   rc -ETIMEDOUT; a reply's own status is left for its parser. */
static void
s_collect(s_psd_t *self, s_call_t *calls, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        s_call_t *c = &calls[i];
        while (c->rc == 0 && !c->reply) {
            zdist_msg_t *reply = NULL;
            /* The rpc client completes a call at its deadline itself; the
               margin only guards against a lost completion. */
            int rc = zdist_rpc_client_recv(s_rpc(self, c->ps), self->timeout_ms + 5000, &reply);
            if (rc < 0) {
                c->rc = -ETIMEDOUT;
                break;
            }
            uint64_t id = zdist_msg_request_id(reply);
            bool matched = false;
            for (size_t j = i; j < n && !matched; j++)
                if (calls[j].ps == c->ps && calls[j].rc == 0 && !calls[j].reply && calls[j].id == id) {
                    calls[j].reply = reply;
                    matched = true;
                }
            if (!matched)
                zdist_msg_destroy(&reply);
        }
    }
}

static void
s_release(s_call_t *calls, size_t n)
{
    for (size_t i = 0; i < n; i++)
        zdist_msg_destroy(&calls[i].reply);
}

/* Shape of `rows` rows of variable v. */
static zdist_shape_t
s_rows_shape(const worker_var_t *v, int64_t rows)
{
    zdist_shape_t s = v->shape;
    s.dims[0] = rows;
    return s;
}

/* ---- reads ---- */

/* Every shard of var into out (var->n floats): all pulls sent, then received. */
static int
s_pull_var(s_psd_t *self, int var, float *out)
{
    const worker_var_t *v = &self->vars->vars[var];
    const zdist_layout_t *L = self->layouts[var];
    if (s_reserve_calls(self, (size_t)L->num_shards) < 0)
        return -ENOMEM;
    s_call_t *calls = self->calls;
    for (int i = 0; i < L->num_shards; i++) {
        calls[i] = (s_call_t){.ps = L->shards[i].ps, .shard = i};
        zdist_msg_t *msg = zdist_ps_request_pull(self->names[var], i, 0, 0);
        s_send(self, &calls[i], &msg);
    }
    s_collect(self, calls, (size_t)L->num_shards);
    int first = 0;
    for (int i = 0; i < L->num_shards; i++) {
        s_call_t *c = &calls[i];
        const zdist_shard_t *sh = &L->shards[i];
        float *dst = out + sh->offset * v->width;
        size_t want = (size_t)(sh->rows * v->width) * sizeof(float);
        zdist_error_t err = {0};
        int rc = c->rc;
        zdist_tensor_t t = {0};
        if (rc == 0 && (rc = zdist_ps_reply_values(c->reply, &t, &err)) == 0) {
            if (t.dtype != ZDIST_DTYPE_FLOAT32 || t.nbytes != want)
                rc = zdist_error_set(&err, -EPROTO, "pull '%s' shard %d: %zu bytes of %s, wanted %zu of float32",
                                     v->name, i, t.nbytes, zdist_dtype_name(t.dtype), want);
            else
                memcpy(dst, t.data, want);
        }
        if (s_unanswered(rc)) {
            /* Reads are idempotent: the synchronous client retries. */
            t = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .data = dst, .nbytes = want};
            rc = zdist_ps_client_pull(self->clients[c->ps], self->names[var], i, 0, 0, &t, &err);
            if (rc == 0 && t.nbytes != want)
                rc = zdist_error_set(&err, -EPROTO, "pull '%s' shard %d: %zu bytes, wanted %zu", v->name, i,
                                     t.nbytes, want);
        }
        if (rc < 0 && first == 0)
            first = s_fail(self, rc, c->ps, "pull '%s' shard %d: %s", v->name, i,
                           err.text[0] ? err.text : strerror(-rc));
    }
    s_release(calls, (size_t)L->num_shards);
    return first;
}

static int
s_read(worker_backend_t *be, int replica, int var, const float **ret)
{
    s_psd_t *self = (s_psd_t *)be;
    (void)replica;
    int rc = s_pull_var(self, var, self->vals[var]);
    if (rc < 0)
        return rc;
    *ret = self->vals[var];
    return 0;
}

/* Groups n ids by owner (owner[k] in 0..nowners-1): self->ids gets the ids
   owner by owner (stable), self->pos their positions in the input, and
   self->counts[o]..counts[o+1] each owner's range. */
static void
s_group(s_psd_t *self, const int64_t *ids, int64_t n, int nowners)
{
    int64_t *cnt = self->counts;
    memset(cnt, 0, (size_t)(nowners + 1) * sizeof *cnt);
    for (int64_t k = 0; k < n; k++)
        cnt[self->owner[k] + 1]++;
    for (int o = 0; o < nowners; o++)
        cnt[o + 1] += cnt[o];
    /* cnt[o] is now the start of owner o; fill, then shift back. */
    for (int64_t k = 0; k < n; k++) {
        int64_t at = cnt[self->owner[k]]++;
        self->ids[at] = ids[k];
        self->pos[at] = k;
    }
    for (int o = nowners; o > 0; o--)
        cnt[o] = cnt[o - 1];
    cnt[0] = 0;
}

static int
s_read_rows(worker_backend_t *be, int replica, int var, const int64_t *ids, int64_t n, float *out)
{
    s_psd_t *self = (s_psd_t *)be;
    (void)replica;
    const worker_var_t *v = &self->vars->vars[var];
    const zdist_layout_t *L = self->layouts[var];
    if (s_reserve_idx(self, (size_t)n) < 0 || s_reserve_counts(self, (size_t)self->num_ps) < 0 ||
        s_reserve_calls(self, (size_t)self->num_ps) < 0)
        return -ENOMEM;
    for (int64_t k = 0; k < n; k++) {
        int shard;
        int64_t row;
        zdist_error_t err = {0};
        if (zdist_layout_lookup(L, ids[k], &shard, &row, &err) < 0)
            return s_fail(self, -ERANGE, -1, "read_rows '%s': %s", v->name, err.text);
        self->owner[k] = L->shards[shard].ps;
    }
    /* One pull_rows per ps task: the psd finds the rows in whichever of its shards. */
    s_group(self, ids, n, self->num_ps);
    size_t ncalls = 0;
    s_call_t *calls = self->calls;
    for (int ps = 0; ps < self->num_ps; ps++) {
        int64_t lo = self->counts[ps], hi = self->counts[ps + 1];
        if (hi == lo)
            continue;
        s_call_t *c = &calls[ncalls++];
        *c = (s_call_t){.ps = ps, .first = lo, .ids = self->ids + lo, .nids = (size_t)(hi - lo)};
        zdist_msg_t *msg = zdist_ps_request_pull_rows(self->names[var], c->ids, c->nids, NULL, NULL);
        s_send(self, c, &msg);
    }
    s_collect(self, calls, ncalls);
    int first = 0;
    for (size_t i = 0; i < ncalls; i++) {
        s_call_t *c = &calls[i];
        size_t want = c->nids * (size_t)v->width * sizeof(float);
        zdist_error_t err = {0};
        zdist_tensor_t t = {0};
        int rc = c->rc;
        if (rc == 0)
            rc = zdist_ps_reply_values(c->reply, &t, &err);
        if (s_unanswered(rc)) {
            if (s_grow((void **)&self->rows, &self->rows_cap, want / sizeof(float), sizeof(float)) < 0) {
                rc = -ENOMEM;
            } else {
                t = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .data = self->rows, .nbytes = want};
                rc = zdist_ps_client_pull_rows(self->clients[c->ps], self->names[var], c->ids, c->nids, &t, &err);
            }
        }
        if (rc == 0 && (t.dtype != ZDIST_DTYPE_FLOAT32 || t.nbytes != want))
            rc = zdist_error_set(&err, -EPROTO, "%zu bytes of %s, wanted %zu of float32", t.nbytes,
                                 zdist_dtype_name(t.dtype), want);
        if (rc == 0) {
            const float *src = t.data;
            for (size_t j = 0; j < c->nids; j++)
                memcpy(out + self->pos[c->first + (int64_t)j] * v->width, src + j * (size_t)v->width,
                       (size_t)v->width * sizeof(float));
        } else if (first == 0) {
            first = s_fail(self, rc, c->ps, "pull_rows '%s' (%zu ids): %s", v->name, c->nids,
                           err.text[0] ? err.text : strerror(-rc));
        }
    }
    s_release(calls, ncalls);
    return first;
}

/* ---- writes ---- */

static zdist_msg_t *
s_write_request(s_psd_t *self, uint32_t method, const s_call_t *c)
{
    const worker_var_t *v = &self->vars->vars[c->var];
    const char *name = self->names[c->var];
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = (void *)c->data};
    t.shape = s_rows_shape(v, c->ids ? (int64_t)c->nids : c->rows);
    t.nbytes = (size_t)((c->ids ? (int64_t)c->nids : c->rows) * v->width) * sizeof(float);
    if (c->ids)
        return zdist_ps_request_write_ids(method, name, c->shard, c->seq, c->ids, c->nids, &t, NULL, NULL);
    return zdist_ps_request_write(method, name, c->shard, 0, 0, c->seq, &t, NULL, NULL);
}

/* Sends every write (sequence numbers taken in sending order), collects the
   acknowledgements, and sends unanswered ones again with the SAME sequence,
   so that the psd applies each exactly once. */
static int
s_write_all(s_psd_t *self, uint32_t method, s_call_t *calls, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        s_call_t *c = &calls[i];
        c->seq = zdist_ps_client_next_sequence(self->clients[c->ps]);
        zdist_msg_t *msg = s_write_request(self, method, c);
        s_send(self, c, &msg);
    }
    s_collect(self, calls, n);
    int first = 0;
    for (size_t i = 0; i < n; i++) {
        s_call_t *c = &calls[i];
        const char *name = self->names[c->var];
        zdist_error_t err = {0};
        int rc = c->rc;
        if (rc == 0)
            rc = zdist_ps_reply_write(c->reply, NULL, NULL, &err);
        for (int attempt = 0; s_unanswered(rc) && attempt < self->retries; attempt++) {
            zdist_msg_t *msg = s_write_request(self, method, c);
            zdist_msg_t *reply = NULL;
            if (!msg)
                rc = -ENOMEM;
            else if ((rc = zdist_ps_client_call(self->clients[c->ps], &msg, &reply, &err)) == 0)
                rc = zdist_ps_reply_write(reply, NULL, NULL, &err);
            zdist_msg_destroy(&reply);
        }
        if (rc < 0 && first == 0)
            first = s_fail(self, rc, c->ps, "%s '%s' shard %d: %s", zdist_ps_method_name(method), name, c->shard,
                           err.text[0] ? err.text : strerror(-rc));
    }
    s_release(calls, n);
    return first;
}

static int
s_apply(worker_backend_t *be, int replica, const zdist_grad_t *grads, int n)
{
    s_psd_t *self = (s_psd_t *)be;
    (void)replica;
    /* Sizes first: the grouped sparse ids and rows stay put until every
       write is acknowledged (they may be sent again). */
    size_t ncalls = 0, nids = 0, nrows = 0;
    int max_shards = self->num_ps;
    for (int i = 0; i < n; i++) {
        const zdist_layout_t *L = self->layouts[grads[i].var];
        ncalls += (size_t)L->num_shards;
        if (L->num_shards > max_shards)
            max_shards = L->num_shards;
        if (grads[i].ids) {
            nids += (size_t)grads[i].nids;
            nrows += (size_t)(grads[i].nids * self->vars->vars[grads[i].var].width);
        }
    }
    if (s_reserve_calls(self, ncalls) < 0 || s_reserve_idx(self, nids) < 0 ||
        s_reserve_counts(self, (size_t)max_shards) < 0 ||
        s_grow((void **)&self->rows, &self->rows_cap, nrows, sizeof(float)) < 0)
        return -ENOMEM;
    int64_t *all_ids = NULL;
    if (nids > 0 && !(all_ids = malloc(nids * sizeof *all_ids)))
        return -ENOMEM;
    size_t nc = 0, id_at = 0, row_at = 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const zdist_grad_t *g = &grads[i];
        const worker_var_t *v = &self->vars->vars[g->var];
        const zdist_layout_t *L = self->layouts[g->var];
        if (!g->ids) {
            for (int s = 0; s < L->num_shards; s++)
                self->calls[nc++] = (s_call_t){.ps = L->shards[s].ps, .shard = s, .var = g->var,
                                               .data = g->values + L->shards[s].offset * v->width,
                                               .rows = L->shards[s].rows};
            continue;
        }
        /* Sparse: ids (global rows) and their gradient rows, shard by shard. */
        for (int64_t k = 0; k < g->nids; k++) {
            int shard;
            int64_t row;
            zdist_error_t err = {0};
            if (zdist_layout_lookup(L, g->ids[k], &shard, &row, &err) < 0) {
                rc = s_fail(self, -ERANGE, -1, "push '%s': %s", v->name, err.text);
                break;
            }
            self->owner[k] = shard;
        }
        if (rc < 0)
            break;
        s_group(self, g->ids, g->nids, L->num_shards);
        for (int s = 0; s < L->num_shards; s++) {
            int64_t lo = self->counts[s], hi = self->counts[s + 1];
            if (hi == lo)
                continue;
            int64_t *ids = all_ids + id_at;
            float *rows = self->rows + row_at;
            for (int64_t k = lo; k < hi; k++) {
                ids[k - lo] = self->ids[k];
                memcpy(rows + (k - lo) * v->width, g->values + self->pos[k] * v->width,
                       (size_t)v->width * sizeof(float));
            }
            id_at += (size_t)(hi - lo);
            row_at += (size_t)((hi - lo) * v->width);
            self->calls[nc++] = (s_call_t){.ps = L->shards[s].ps, .shard = s, .var = g->var, .ids = ids,
                                           .nids = (size_t)(hi - lo), .data = rows};
        }
    }
    if (rc == 0)
        rc = s_write_all(self, ZDIST_PS_PUSH, self->calls, nc);
    free(all_ids);
    return rc;
}

static int
s_assign(worker_backend_t *be, int replica, int var, const float *values, bool add)
{
    s_psd_t *self = (s_psd_t *)be;
    (void)replica;
    const worker_var_t *v = &self->vars->vars[var];
    const zdist_layout_t *L = self->layouts[var];
    if (s_reserve_calls(self, (size_t)L->num_shards) < 0)
        return -ENOMEM;
    for (int s = 0; s < L->num_shards; s++)
        self->calls[s] = (s_call_t){.ps = L->shards[s].ps, .shard = s, .var = var,
                                    .data = values + L->shards[s].offset * v->width, .rows = L->shards[s].rows};
    return s_write_all(self, add ? ZDIST_PS_ASSIGN_ADD : ZDIST_PS_ASSIGN, self->calls, (size_t)L->num_shards);
}

/* ---- one replica: collectives are the identity ---- */

static int
s_all_reduce(worker_backend_t *be, int replica, zdist_reduce_op_t op, float *const *bufs, const int64_t *lens,
             int n)
{
    (void)be, (void)replica, (void)op, (void)bufs, (void)lens, (void)n;
    return 0;
}

static int
s_all_gather(worker_backend_t *be, int replica, const float *in, const zdist_shape_t *shape, int axis,
             const float **ret, zdist_shape_t *ret_shape)
{
    (void)be, (void)replica, (void)axis;
    *ret = in;
    *ret_shape = *shape;
    return 0;
}

static int
s_merge_call(worker_backend_t *be, int replica, zdist_merge_fn fn, void *arg)
{
    (void)be, (void)replica;
    void *args[1] = {arg};
    return fn(args, 1);
}

static int
s_read_cross_replica(worker_backend_t *be, int var, float *out, zdist_error_t *err)
{
    s_psd_t *self = (s_psd_t *)be;
    int rc = s_pull_var(self, var, out);
    if (rc < 0)
        zdist_error_set(err, rc, "%s", self->last_error);
    return rc;
}

static void
s_abort(worker_backend_t *be)
{
    (void)be; /* one replica: nobody waits for it */
}

static void
s_destroy(worker_backend_t **be_p)
{
    if (!be_p || !*be_p)
        return;
    s_psd_t *self = (s_psd_t *)*be_p;
    if (self->layouts)
        for (int v = 0; v < self->vars->n; v++)
            zdist_layout_destroy(&self->layouts[v]);
    if (self->names)
        for (int v = 0; v < self->vars->n; v++)
            free(self->names[v]);
    free(self->names);
    if (self->vals)
        for (int v = 0; v < self->vars->n; v++)
            free(self->vals[v]);
    if (self->clients)
        for (int p = 0; p < self->num_ps; p++)
            zdist_ps_client_destroy(&self->clients[p]);
    if (self->endpoints)
        for (int p = 0; p < self->num_ps; p++)
            free(self->endpoints[p]);
    free(self->layouts);
    free(self->vals);
    free(self->clients);
    free(self->endpoints);
    free(self->calls);
    free(self->ids);
    free(self->pos);
    free(self->owner);
    free(self->rows);
    free(self->counts);
    free(self);
    *be_p = NULL;
}

static const worker_backend_ops_t s_ops = {
    .name = "psd",
    .read = s_read,
    .read_rows = s_read_rows,
    .apply = s_apply,
    .assign = s_assign,
    .all_reduce = s_all_reduce,
    .all_gather = s_all_gather,
    .merge_call = s_merge_call,
    .read_cross_replica = s_read_cross_replica,
    .abort = s_abort,
    .destroy = s_destroy,
};

worker_backend_t *
worker_psd_new(const worker_vars_t *vars, const worker_psd_config_t *cfg, zdist_error_t *err)
{
    if (cfg->num_ps < 1 || !cfg->endpoints) {
        zdist_error_set(err, -EINVAL, "parameter_server needs at least one ps task; the cluster has none");
        return NULL;
    }
    s_psd_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    worker_backend_t *be = &self->base;
    zdist_placement_t *pl = NULL;
    self->base.ops = &s_ops;
    self->vars = vars;
    self->num_ps = cfg->num_ps;
    self->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 30000;
    self->retries = cfg->retries >= 0 ? cfg->retries : 3;
    self->endpoints = calloc((size_t)cfg->num_ps, sizeof *self->endpoints);
    self->clients = calloc((size_t)cfg->num_ps, sizeof *self->clients);
    self->layouts = calloc((size_t)(vars->n ? vars->n : 1), sizeof *self->layouts);
    self->vals = calloc((size_t)(vars->n ? vars->n : 1), sizeof *self->vals);
    self->names = calloc((size_t)(vars->n ? vars->n : 1), sizeof *self->names);
    if (!self->endpoints || !self->clients || !self->layouts || !self->vals || !self->names)
        goto oom;
    zdist_ps_client_options_t opts;
    zdist_ps_client_options_default(&opts);
    opts.timeout_ms = self->timeout_ms;
    opts.retries = self->retries;
    for (int p = 0; p < cfg->num_ps; p++) {
        char ep[300];
        if (zdist_endpoint_normalize(cfg->endpoints[p], ep, sizeof ep, err) < 0) {
            zdist_error_prefix(err, "ps task %d", p);
            goto fail;
        }
        if (!(self->endpoints[p] = strdup(ep)))
            goto oom;
        if (!(self->clients[p] = zdist_ps_client_new(ep, &opts, err))) {
            zdist_error_prefix(err, "ps task %d", p);
            goto fail;
        }
    }
    /* ParameterServerStrategyV2: one counter over every variable (and
       shard) in creation order. */
    pl = zdist_placement_new(cfg->num_ps);
    if (!pl)
        goto oom;
    for (int v = 0; v < vars->n; v++) {
        const worker_var_t *var = &vars->vars[v];
        const char *spec = var->partitioner ? var->partitioner : cfg->partitioner;
        if (asprintf(&self->names[v], "%s%s", cfg->prefix ? cfg->prefix : "", var->name) < 0) {
            self->names[v] = NULL;
            goto oom;
        }
        /* Without a partitioner in the job or the model: the documented
           default, MinSizePartitioner(256 KiB, max_shards = number of ps). */
        zdist_partitioner_t part = {.kind = ZDIST_PARTITIONER_MIN_SIZE,
                                    .min_shard_bytes = 262144,
                                    .max_shards = cfg->num_ps,
                                    .bytes_per_string = 16};
        if (spec && zdist_partitioner_parse(spec, &part, err) < 0) {
            zdist_error_prefix(err, "variable '%s': partitioner", var->name);
            goto fail;
        }
        if (zdist_placement_place_variable(pl, self->names[v], &var->shape, var->dtype, &part, &self->layouts[v], err) <
            0) {
            zdist_error_prefix(err, "variable '%s'", var->name);
            goto fail;
        }
        self->num_shards += self->layouts[v]->num_shards;
        if (posix_memalign((void **)&self->vals[v], 64, (size_t)(var->n ? var->n : 1) * sizeof(float)) != 0)
            goto oom;
    }
    zdist_placement_destroy(&pl);
    return be;
oom:
    zdist_error_set(err, -ENOMEM, "out of memory");
fail:
    zdist_placement_destroy(&pl);
    s_destroy(&be);
    return NULL;
}

int
worker_psd_create_variables(worker_backend_t *be, const zdist_optim_config_t *optim, uint64_t seed,
                            bool *ret_created, zdist_error_t *err)
{
    s_psd_t *self = (s_psd_t *)be;
    int rc;
    for (int p = 0; p < self->num_ps; p++)
        if ((rc = zdist_ps_client_set_optimizer(self->clients[p], optim, err)) < 0) {
            s_fail(self, rc, p, "set_optimizer: %s", err && err->text[0] ? err->text : strerror(-rc));
            return zdist_error_set(err, s_unanswered(rc) ? -ENOTCONN : rc, "%s", self->last_error);
        }
    bool created = false;
    for (int v = 0; v < self->vars->n; v++) {
        const worker_var_t *var = &self->vars->vars[v];
        const zdist_layout_t *L = self->layouts[v];
        for (int s = 0; s < L->num_shards; s++) {
            zdist_ps_var_spec_t spec = {
                .name = self->names[v],
                .dtype = var->dtype,
                .shape = var->shape,
                .shard_index = s,
                .row_offset = L->shards[s].offset,
                .row_count = L->shards[s].rows,
                .init = var->init,
                .seed = seed,
            };
            bool c = false;
            int ps = L->shards[s].ps;
            if ((rc = zdist_ps_client_create(self->clients[ps], &spec, &c, err)) < 0) {
                s_fail(self, rc, ps, "create '%s' shard %d: %s", self->names[v], s,
                       err && err->text[0] ? err->text : strerror(-rc));
                return zdist_error_set(err, s_unanswered(rc) ? -ENOTCONN : rc, "%s", self->last_error);
            }
            created = created || c;
        }
    }
    if (ret_created)
        *ret_created = created;
    return 0;
}

int
worker_psd_num_shards(const worker_backend_t *be)
{
    return ((const s_psd_t *)be)->num_shards;
}

const zdist_layout_t *
worker_psd_layout(const worker_backend_t *be, int var)
{
    const s_psd_t *self = (const s_psd_t *)be;
    return var >= 0 && var < self->vars->n ? self->layouts[var] : NULL;
}

const char *
worker_psd_last_error(const worker_backend_t *be)
{
    return ((const s_psd_t *)be)->last_error;
}

bool
worker_psd_is(const worker_backend_t *be)
{
    return be && be->ops == &s_ops;
}
