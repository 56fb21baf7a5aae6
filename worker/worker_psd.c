/* worker_psd: the parameter_server strategy backend — variables live on psd tasks; reads are pulls, applies are pushes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_psd.h"
#include "zdist/endpoint.h"
#include "zdist/ps_client.h"
#include "zdist/rpc.h"

/* What the backend keeps beside an op of a run: which ps task, shard and
   variable it is for, and (read_rows) where its rows go. */
typedef struct {
    int ps;
    int shard;
    int var;
    int64_t first; /* read_rows: first position in the per-ps order */
    int item;      /* read_rows: which of the variables read */
} s_call_t;

typedef struct {
    worker_backend_t base;
    const worker_vars_t *vars;
    int num_ps;
    char **endpoints;
    zdist_ps_client_t **clients;
    char **names;             /* [vars->n]: prefix + the variable's name, on the psds */
    zdist_layout_t **layouts; /* [vars->n] */
    float **vals;             /* [vars->n]: the latest pull of each variable */
    /* [vars->n]: vals holds values no older than this worker's last push:
       the next read of the variable takes them without a round trip (and
       clears the flag: the read after pulls again). */
    bool *fresh;
    bool *dense_read; /* [vars->n]: read whole: a push asks for its values back */
    uint64_t *stamp;  /* [vars->n]: the apply that last had a gradient for it */
    uint64_t applies;
    int *arrived; /* [vars->n]: shards whose fresh values came back */
    /* Fused push-and-pull: one op per ps task, its items grouped by ps. */
    zdist_ps_op_t *pp_ops;            /* [num_ps] */
    zdist_ps_push_pull_item_t *items; /* grouped by ps */
    s_call_t *item_calls;             /* [i] for items[i] */
    zdist_tensor_t *item_vals;        /* [i]: the values item i pulled */
    size_t items_cap;
    int num_shards;
    zdist_ps_op_t *ops; /* one run's requests, sent together by the ps client */
    s_call_t *calls;    /* [i] for ops[i] */
    size_t calls_cap;
    /* read_rows / sparse push scratch */
    int64_t *ids;
    int64_t *pos;
    int *owner;
    size_t idx_cap;
    float *rows;
    size_t rows_cap;
    int64_t *counts; /* [max(num_ps, shards of a variable) + 1] */
    /* read_rows_many: ps task p's pull_rows items at [p * n, p * n + rows_n[p]) */
    zdist_ps_rows_item_t *rows_items;
    s_call_t *rows_calls;
    size_t rows_items_cap;
    size_t *rows_n; /* [num_ps] */
    size_t counts_cap;
    /* The job's step the writes belong to (0: none, when run without a
       coordinator): the psd applies each (step, ordinal) once per shard,
       whichever worker sends it. */
    uint64_t job_step;
    int *shard_base;       /* [vars->n]: the variable's first index in step_writes */
    uint32_t *step_writes; /* [num_shards]: writes job_step has made to the shard */
    char last_error[ZDIST_ERROR_TEXT_MAX];
    /* The job's namespace on the psds when the prefix is "JOB/" ("" else):
       its optimizer is set for its shards only, beside other jobs'. */
    char job[ZDIST_PS_JOB_MAX + 1];
} s_psd_t;

static const worker_backend_ops_t s_ops;

/* Records why a call failed and returns code. Unanswered calls (after the
   ps client's retries) become -ENOTCONN: the psd is unreachable. */
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
    if (zdist_rpc_unreachable(code))
        code = -ENOTCONN;
    if (ps >= 0)
        snprintf(self->last_error, sizeof self->last_error, "ps task %d at %.200s%s: %.280s", ps, self->endpoints[ps],
                 code == -ENOTCONN ? " is unreachable" : "", text);
    else
        snprintf(self->last_error, sizeof self->last_error, "%s", text);
    return code;
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

/* Grows n parallel arrays that share the capacity *cap to `need` elements
   each (elem[i] bytes apiece); *cap moves only when all of them grew. */
static int
s_grow_all(size_t *cap, size_t need, int n, void **arrays[], const size_t elem[])
{
    size_t c = *cap;
    for (int i = 0; i < n; i++) {
        c = *cap;
        if (s_grow(arrays[i], &c, need, elem[i]) < 0)
            return -ENOMEM;
    }
    *cap = c;
    return 0;
}

static int
s_reserve_calls(s_psd_t *self, size_t n)
{
    void **arrays[] = {(void **) &self->ops, (void **) &self->calls};
    const size_t elem[] = {sizeof *self->ops, sizeof *self->calls};
    return s_grow_all(&self->calls_cap, n, 2, arrays, elem);
}

static int
s_reserve_idx(s_psd_t *self, size_t n)
{
    void **arrays[] = {(void **) &self->ids, (void **) &self->pos, (void **) &self->owner};
    const size_t elem[] = {sizeof *self->ids, sizeof *self->pos, sizeof *self->owner};
    return s_grow_all(&self->idx_cap, n, 3, arrays, elem);
}

static int
s_reserve_counts(s_psd_t *self, size_t n)
{
    return s_grow((void **)&self->counts, &self->counts_cap, n + 1, sizeof *self->counts);
}

/* Op i of the next run, to ps task call.ps (the request's fields are the caller's to fill). */
static zdist_ps_op_t *
s_op(s_psd_t *self, size_t i, s_call_t call, uint32_t method)
{
    self->calls[i] = call;
    zdist_ps_op_t *op = &self->ops[i];
    *op = (zdist_ps_op_t){.client = self->clients[call.ps], .request = {.method = method}};
    return op;
}

/* 0 when op was sent (its reply tells the rest), else why not, in err. */
static int
s_op_error(const zdist_ps_op_t *op, zdist_error_t *err)
{
    if (op->rc == -EINVAL)
        return zdist_error_set(err, -EINVAL, "invalid request (or out of memory)");
    return op->rc < 0 ? zdist_error_set(err, op->rc, "cannot send: %s", strerror(-op->rc)) : 0;
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
    size_t n = (size_t)L->num_shards;
    if (s_reserve_calls(self, n) < 0)
        return -ENOMEM;
    for (int i = 0; i < L->num_shards; i++)
        s_op(self, (size_t)i, (s_call_t){.ps = L->shards[i].ps, .shard = i, .var = var}, ZDIST_PS_PULL)
            ->request.pull = (zdist_ps_pull_t){self->names[var], i, 0, 0};
    zdist_ps_client_run(self->ops, n);
    int first = 0;
    for (int i = 0; i < L->num_shards; i++) {
        const zdist_ps_op_t *op = &self->ops[i];
        const zdist_shard_t *sh = &L->shards[i];
        size_t want = (size_t)(zdist_layout_shard_rows(L, i) * v->width) * sizeof(float);
        zdist_error_t err = {0};
        zdist_tensor_t t = {0};
        int rc = s_op_error(op, &err);
        if (rc == 0 && (rc = zdist_ps_reply_values(op->reply, &t, &err)) == 0) {
            if (t.dtype != ZDIST_DTYPE_FLOAT32 || t.nbytes != want)
                rc = zdist_error_set(&err, -EPROTO, "pull '%s' shard %d: %zu bytes of %s, wanted %zu of float32",
                                     v->name, i, t.nbytes, zdist_dtype_name(t.dtype), want);
            else
                memcpy(out + sh->offset * v->width, t.data, want);
        }
        if (rc < 0 && first == 0)
            first = s_fail(self, rc, sh->ps, "pull '%s' shard %d: %s", v->name, i,
                           err.text[0] ? err.text : strerror(-rc));
    }
    zdist_ps_ops_release(self->ops, n);
    return first;
}

static int
s_read(worker_backend_t *be, int replica, int var, const float **ret)
{
    s_psd_t *self = (s_psd_t *)be;
    (void)replica;
    if (self->vars->vars[var].dynamic)
        return s_fail(self, -EINVAL, -1, "read '%s': a dynamic table has no whole value; read its rows by id",
                      self->vars->vars[var].name);
    self->dense_read[var] = true;
    if (self->fresh[var]) {
        self->fresh[var] = false;
        *ret = self->vals[var];
        return 0;
    }
    int rc = s_pull_var(self, var, self->vals[var]);
    if (rc < 0)
        return rc;
    *ret = self->vals[var];
    return 0;
}

/* The shard of variable var holding row id: a dynamic table's part on the
   ps task zdist_partition_id_ps gives (its part k is on ps task k), a
   fixed table's by its layout. -ERANGE with err for an id outside a fixed
   table. */
static int
s_owner(const s_psd_t *self, int var, int64_t id, zdist_error_t *err)
{
    if (self->vars->vars[var].dynamic)
        return zdist_partition_id_ps(id, self->num_ps);
    int shard;
    int64_t row;
    int rc = zdist_layout_lookup(self->layouts[var], id, &shard, &row, err);
    return rc < 0 ? rc : shard;
}

/* Groups n ids by owner (owner[base + k] in 0..nowners-1): self->ids from
   base gets the ids owner by owner (stable), self->pos their positions in
   the input, and cnt[o]..cnt[o+1] each owner's range (from base). */
static void
s_group(s_psd_t *self, const int64_t *ids, int64_t n, int nowners, int64_t base, int64_t *cnt)
{
    memset(cnt, 0, (size_t)(nowners + 1) * sizeof *cnt);
    for (int64_t k = 0; k < n; k++)
        cnt[self->owner[base + k] + 1]++;
    for (int o = 0; o < nowners; o++)
        cnt[o + 1] += cnt[o];
    /* cnt[o] is now the start of owner o; fill, then shift back. */
    for (int64_t k = 0; k < n; k++) {
        int64_t at = base + cnt[self->owner[base + k]]++;
        self->ids[at] = ids[k];
        self->pos[at] = k;
    }
    for (int o = nowners; o > 0; o--)
        cnt[o] = cnt[o - 1];
    cnt[0] = 0;
}

/* Variable i's ids grouped by ps task from base, each task's share
   appended to its items (ps p's at rows_items[p * n ...], rows_n[p] of them). */
static int
s_rows_items(s_psd_t *self, int n, int i, int var, const int64_t *ids, int64_t count, int64_t base)
{
    const worker_var_t *v = &self->vars->vars[var];
    const zdist_layout_t *L = self->layouts[var];
    int64_t *cnt = self->counts + (size_t)i * (size_t)(self->num_ps + 1);
    for (int64_t k = 0; k < count; k++) {
        int shard;
        zdist_error_t err = {0};
        if ((shard = s_owner(self, var, ids[k], &err)) < 0)
            return s_fail(self, -ERANGE, -1, "read_rows '%s': %s", v->name, err.text);
        self->owner[base + k] = L->shards[shard].ps;
    }
    /* The psd finds the rows in whichever of its shards. */
    s_group(self, ids, count, self->num_ps, base, cnt);
    for (int ps = 0; ps < self->num_ps; ps++) {
        int64_t lo = base + cnt[ps], hi = base + cnt[ps + 1];
        if (hi == lo)
            continue;
        size_t at = (size_t)ps * (size_t)n + self->rows_n[ps]++;
        self->rows_items[at] = (zdist_ps_rows_item_t){self->names[var], self->ids + lo, (size_t)(hi - lo)};
        self->rows_calls[at] = (s_call_t){.ps = ps, .var = var, .first = lo, .item = i};
    }
    return 0;
}

/* Item k of op i's rows into out (by the positions of its ids). */
static int
s_rows_take(s_psd_t *self, size_t i, size_t k, const s_call_t *c, size_t nitems, float *out, zdist_error_t *err)
{
    const zdist_ps_op_t *op = &self->ops[i];
    const worker_var_t *v = &self->vars->vars[c->var];
    size_t nids = k == 0 ? op->request.pull_rows.nids : op->request.pull_rows.more[k - 1].nids;
    size_t want = nids * (size_t)v->width * sizeof(float);
    zdist_tensor_t t = {0};
    int rc = s_op_error(op, err);
    if (rc == 0)
        rc = zdist_ps_reply_values_at(op->reply, k, nitems, &t, err);
    if (rc == 0 && (t.dtype != ZDIST_DTYPE_FLOAT32 || t.nbytes != want))
        rc = zdist_error_set(err, -EPROTO, "%zu bytes of %s, wanted %zu of float32", t.nbytes,
                             zdist_dtype_name(t.dtype), want);
    if (rc < 0)
        return rc;
    const float *src = t.data;
    for (size_t j = 0; j < nids; j++)
        memcpy(out + self->pos[c->first + (int64_t)j] * v->width, src + j * (size_t)v->width,
               (size_t)v->width * sizeof(float));
    return 0;
}

static int
s_reserve_rows_items(s_psd_t *self, size_t n)
{
    void **arrays[] = {(void **) &self->rows_items, (void **) &self->rows_calls};
    const size_t elem[] = {sizeof *self->rows_items, sizeof *self->rows_calls};
    return s_grow_all(&self->rows_items_cap, n, 2, arrays, elem);
}

/* Every variable's ids, one pull_rows per ps task carrying all of them
   (its first item in the request's name and ids, the others in `more`),
   every task's sent at once, then every reply taken: one request per ps
   task per step, not one per table. An id outside a fixed table fails the
   call before anything is sent. */
static int
s_read_rows_many(worker_backend_t *be, int replica, int n, const int *vars, const int64_t *const *ids,
                 const int64_t *counts, float *const *outs)
{
    s_psd_t *self = (s_psd_t *)be;
    (void)replica;
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += counts[i];
    size_t maxitems = (size_t)n * (size_t)self->num_ps;
    if (s_reserve_idx(self, (size_t)total) < 0 || s_reserve_counts(self, maxitems + (size_t)n) < 0 ||
        s_reserve_calls(self, (size_t)self->num_ps) < 0 || s_reserve_rows_items(self, maxitems) < 0)
        return -ENOMEM;
    memset(self->rows_n, 0, (size_t)self->num_ps * sizeof *self->rows_n);
    total = 0; /* now each variable's first place in ids and pos */
    for (int i = 0, rc; i < n; total += counts[i++])
        if ((rc = s_rows_items(self, n, i, vars[i], ids[i], counts[i], total)) < 0)
            return rc;
    size_t nops = 0;
    for (int ps = 0; ps < self->num_ps; ps++) {
        const zdist_ps_rows_item_t *it = &self->rows_items[(size_t)ps * (size_t)n];
        if (self->rows_n[ps] > 0)
            s_op(self, nops++, (s_call_t){.ps = ps, .item = ps * n}, ZDIST_PS_PULL_ROWS)->request.pull_rows =
                (zdist_ps_pull_rows_t){it->name, it->ids, it->nids, it + 1, self->rows_n[ps] - 1};
    }
    zdist_ps_client_run(self->ops, nops);
    int first = 0;
    for (size_t i = 0; i < nops; i++) {
        size_t nitems = self->rows_n[self->calls[i].ps];
        for (size_t k = 0; k < nitems; k++) {
            const s_call_t *c = &self->rows_calls[(size_t)self->calls[i].item + k];
            zdist_error_t err = {0};
            int rc = s_rows_take(self, i, k, c, nitems, outs[c->item], &err);
            if (rc < 0 && first == 0)
                first = s_fail(self, rc, c->ps, "pull_rows '%s' (%zu ids): %s", self->vars->vars[c->var].name,
                               self->rows_items[(size_t)self->calls[i].item + k].nids,
                               err.text[0] ? err.text : strerror(-rc));
        }
    }
    zdist_ps_ops_release(self->ops, nops);
    return first;
}

static int
s_read_rows(worker_backend_t *be, int replica, int var, const int64_t *ids, int64_t n, float *out)
{
    return s_read_rows_many(be, replica, 1, &var, &ids, &n, &out);
}

/* ---- writes ---- */

/* Op i of the next run: a write of `rows` rows of variable var (by ids
   when ids is not NULL) to shard s. The data stays put until the run ends. */
static void
s_write_op(s_psd_t *self, size_t i, uint32_t method, int var, int s, const int64_t *ids, int64_t rows,
           const float *data)
{
    const worker_var_t *v = &self->vars->vars[var];
    const zdist_layout_t *L = self->layouts[var];
    zdist_ps_op_t *op = s_op(self, i, (s_call_t){.ps = L->shards[s].ps, .shard = s, .var = var}, method);
    zdist_ps_write_t *w = &op->request.write;
    w->name = self->names[var];
    w->shard_index = s;
    w->by_ids = ids != NULL;
    w->ids = ids;
    w->nids = ids ? (size_t)rows : 0;
    w->values = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32,
                                 .shape = s_rows_shape(v, rows),
                                 .data = (void *)data,
                                 .nbytes = (size_t)(rows * v->width) * sizeof(float)};
    if (self->job_step) {
        w->job_step = self->job_step;
        w->step_write = self->step_writes[self->shard_base[var] + s]++;
    }
}

/* Sends every write at once; the ps client numbers them and sends the
   unanswered ones again with the SAME sequence, so that the psd applies
   each exactly once. */
static int
s_write_all(s_psd_t *self, size_t n)
{
    zdist_ps_client_run(self->ops, n);
    int first = 0;
    for (size_t i = 0; i < n; i++) {
        const zdist_ps_op_t *op = &self->ops[i];
        const s_call_t *c = &self->calls[i];
        zdist_error_t err = {0};
        int rc = s_op_error(op, &err);
        if (rc == 0)
            rc = zdist_ps_reply_write(op->reply, NULL, NULL, &err);
        if (rc < 0 && first == 0)
            first = s_fail(self, rc, c->ps, "%s '%s' shard %d: %s", zdist_ps_method_name(op->request.method),
                           self->names[c->var], c->shard, err.text[0] ? err.text : strerror(-rc));
    }
    zdist_ps_ops_release(self->ops, n);
    return first;
}

/* Item k of the fused run, for shard s of variable var on ps task ps. */
static zdist_ps_push_pull_item_t *
s_item(s_psd_t *self, size_t k, int ps, int var, int s)
{
    self->item_calls[k] = (s_call_t){.ps = ps, .shard = s, .var = var};
    zdist_ps_push_pull_item_t *it = &self->items[k];
    *it = (zdist_ps_push_pull_item_t){
        .name = self->names[var], .shard_index = s, .pull = self->dense_read[var]};
    return it;
}

/* Copies the values item k pulled into vals; a variable all of whose
   shards came back is fresh for its next read. */
static int
s_take_values(s_psd_t *self, size_t k, zdist_error_t *err)
{
    const s_call_t *c = &self->item_calls[k];
    const worker_var_t *v = &self->vars->vars[c->var];
    const zdist_shard_t *sh = &self->layouts[c->var]->shards[c->shard];
    const zdist_tensor_t *t = &self->item_vals[k];
    size_t want = (size_t) (zdist_layout_shard_rows(self->layouts[c->var], c->shard) * v->width) * sizeof(float);
    if (t->dtype != ZDIST_DTYPE_FLOAT32 || t->nbytes != want)
        return zdist_error_set(err, -EPROTO, "'%s' shard %d: %zu bytes of %s, wanted %zu of float32", v->name,
                               c->shard, t->nbytes, zdist_dtype_name(t->dtype), want);
    memcpy(self->vals[c->var] + sh->offset * v->width, t->data, want);
    if (++self->arrived[c->var] == self->layouts[c->var]->num_shards)
        self->fresh[c->var] = true;
    return 0;
}

/* The n writes built by s_write_op (pushes, at most one per shard) as one
   push_pull per ps task, each also asking back the values of every
   variable read whole (with pull-only items for those without a
   gradient): the next step's reads need no round trip. The ps client sends
   the unanswered ones again with the SAME sequence: applied exactly once. */
static int
s_push_pull_all(s_psd_t *self, size_t n)
{
    size_t need = n;
    for (int var = 0; var < self->vars->n; var++) {
        self->arrived[var] = 0;
        if (self->dense_read[var] && self->stamp[var] != self->applies)
            need += (size_t) self->layouts[var]->num_shards;
    }
    /* Every push may take two tensors: beyond a message's limits, one push per shard. */
    if (2 * need > ZDIST_PS_PUSH_PULL_MAX_ITEMS)
        return s_write_all(self, n);
    void **arrays[] = {(void **) &self->items, (void **) &self->item_calls, (void **) &self->item_vals};
    const size_t elem[] = {sizeof *self->items, sizeof *self->item_calls, sizeof *self->item_vals};
    if (s_grow_all(&self->items_cap, need, 3, arrays, elem) < 0)
        return -ENOMEM;
    size_t k = 0, nops = 0;
    for (int ps = 0; ps < self->num_ps; ps++) {
        size_t first = k;
        for (size_t i = 0; i < n; i++) {
            const s_call_t *c = &self->calls[i];
            const zdist_ps_write_t *w = &self->ops[i].request.write;
            if (c->ps != ps)
                continue;
            zdist_ps_push_pull_item_t *it = s_item(self, k++, ps, c->var, c->shard);
            it->push = true;
            it->by_ids = w->by_ids;
            it->ids = w->ids;
            it->nids = w->nids;
            it->grad = w->values;
            it->step_write = w->step_write;
        }
        for (int var = 0; var < self->vars->n; var++) {
            const zdist_layout_t *L = self->layouts[var];
            if (!self->dense_read[var] || self->stamp[var] == self->applies)
                continue;
            for (int s = 0; s < L->num_shards; s++)
                if (L->shards[s].ps == ps)
                    s_item(self, k++, ps, var, s);
        }
        if (k > first)
            self->pp_ops[nops++] = (zdist_ps_op_t){
                .client = self->clients[ps],
                .request = {.method = ZDIST_PS_PUSH_PULL,
                            .push_pull = {.job_step = self->job_step, .items = self->items + first,
                                          .nitems = k - first}}};
    }
    zdist_ps_client_run(self->pp_ops, nops);
    int first = 0;
    for (size_t i = 0; i < nops; i++) {
        const zdist_ps_op_t *op = &self->pp_ops[i];
        const zdist_ps_push_pull_t *pp = &op->request.push_pull;
        size_t at = (size_t) (pp->items - self->items);
        int ps = self->item_calls[at].ps;
        zdist_error_t err = {0};
        int rc = s_op_error(op, &err);
        if (rc == 0)
            rc = zdist_ps_reply_push_pull(op->reply, pp, NULL, NULL, self->item_vals + at, &err);
        for (size_t j = 0; rc == 0 && j < pp->nitems; j++)
            if (pp->items[j].pull)
                rc = s_take_values(self, at + j, &err);
        if (rc < 0 && first == 0)
            first = s_fail(self, rc, ps, "push_pull (%zu shards): %s", pp->nitems,
                           err.text[0] ? err.text : strerror(-rc));
    }
    zdist_ps_ops_release(self->pp_ops, nops);
    if (first < 0)
        memset(self->fresh, 0, (size_t) self->vars->n * sizeof *self->fresh);
    return first;
}

void
worker_psd_forget(worker_backend_t *be)
{
    s_psd_t *self = (s_psd_t *)be;
    memset(self->fresh, 0, (size_t)self->vars->n * sizeof *self->fresh);
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
    /* One push_pull per ps unless a variable has two gradients here (a
       shard takes one sequence once): then one push per shard. */
    bool fuse = true;
    self->applies++;
    /* Values kept from the last push_pull are older than this push. */
    memset(self->fresh, 0, (size_t) self->vars->n * sizeof *self->fresh);
    for (int i = 0; i < n; i++) {
        fuse = fuse && self->stamp[grads[i].var] != self->applies;
        self->stamp[grads[i].var] = self->applies;
    }
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
                s_write_op(self, nc++, ZDIST_PS_PUSH, g->var, s, NULL, zdist_layout_shard_rows(L, s),
                           g->values + L->shards[s].offset * v->width);
            continue;
        }
        /* Sparse: ids (global rows) and their gradient rows, shard by shard. */
        for (int64_t k = 0; k < g->nids; k++) {
            int shard;
            zdist_error_t err = {0};
            if ((shard = s_owner(self, g->var, g->ids[k], &err)) < 0) {
                rc = s_fail(self, -ERANGE, -1, "push '%s': %s", v->name, err.text);
                break;
            }
            self->owner[k] = shard;
        }
        if (rc < 0)
            break;
        s_group(self, g->ids, g->nids, L->num_shards, 0, self->counts);
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
            s_write_op(self, nc++, ZDIST_PS_PUSH, g->var, s, ids, hi - lo, rows);
        }
    }
    if (rc == 0)
        rc = fuse ? s_push_pull_all(self, nc) : s_write_all(self, nc);
    free(all_ids);
    return rc;
}

static int
s_assign(worker_backend_t *be, int replica, int var, const float *values, bool add)
{
    s_psd_t *self = (s_psd_t *)be;
    (void)replica;
    self->fresh[var] = false;
    const worker_var_t *v = &self->vars->vars[var];
    const zdist_layout_t *L = self->layouts[var];
    if (s_reserve_calls(self, (size_t)L->num_shards) < 0)
        return -ENOMEM;
    for (int s = 0; s < L->num_shards; s++)
        s_write_op(self, (size_t)s, add ? ZDIST_PS_ASSIGN_ADD : ZDIST_PS_ASSIGN, var, s, NULL,
                   zdist_layout_shard_rows(L, s),
                   values + L->shards[s].offset * v->width);
    return s_write_all(self, (size_t)L->num_shards);
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
    free(self->fresh);
    free(self->dense_read);
    free(self->stamp);
    free(self->arrived);
    free(self->pp_ops);
    free(self->items);
    free(self->item_calls);
    free(self->item_vals);
    free(self->clients);
    free(self->endpoints);
    free(self->ops);
    free(self->calls);
    free(self->ids);
    free(self->pos);
    free(self->owner);
    free(self->rows);
    free(self->counts);
    free(self->rows_items);
    free(self->rows_calls);
    free(self->rows_n);
    free(self->shard_base);
    free(self->step_writes);
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
    .read_rows_many = s_read_rows_many,
};

/* A dynamic table's layout: a part on every ps task, part k on task k,
   none holding rows of its own (ids find their part by
   zdist_partition_id_ps). It takes no turn of the placement counter. */
static int
s_dynamic_layout(const char *name, const zdist_shape_t *shape, int num_ps, zdist_layout_t **ret, zdist_error_t *err)
{
    zdist_layout_t *L = calloc(1, sizeof *L);
    if (L && (L->name = strdup(name)) && (L->shards = calloc((size_t) num_ps, sizeof *L->shards))) {
        L->shape = *shape;
        L->num_shards = num_ps;
        L->sharded = num_ps > 1;
        for (int k = 0; k < num_ps; k++) {
            L->shards[k].ps = k;
            if (asprintf(&L->shards[k].name, "%s/part_%d", name, k) < 0) {
                L->shards[k].name = NULL;
                break;
            }
        }
        if (L->shards[num_ps - 1].name) {
            *ret = L;
            return 0;
        }
    }
    zdist_layout_destroy(&L);
    return zdist_error_set(err, -ENOMEM, "out of memory");
}

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
    size_t plen = cfg->prefix ? strlen(cfg->prefix) : 0;
    if (plen >= 2 && plen - 1 <= ZDIST_PS_JOB_MAX && cfg->prefix[plen - 1] == '/' &&
        strspn(cfg->prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == plen - 1)
        memcpy(self->job, cfg->prefix, plen - 1);
    self->endpoints = calloc((size_t)cfg->num_ps, sizeof *self->endpoints);
    self->clients = calloc((size_t)cfg->num_ps, sizeof *self->clients);
    self->layouts = calloc((size_t)(vars->n ? vars->n : 1), sizeof *self->layouts);
    self->vals = calloc((size_t)(vars->n ? vars->n : 1), sizeof *self->vals);
    self->names = calloc((size_t)(vars->n ? vars->n : 1), sizeof *self->names);
    size_t nv = (size_t) (vars->n ? vars->n : 1);
    self->fresh = calloc(nv, sizeof *self->fresh);
    self->dense_read = calloc(nv, sizeof *self->dense_read);
    self->stamp = calloc(nv, sizeof *self->stamp);
    self->arrived = calloc(nv, sizeof *self->arrived);
    self->pp_ops = calloc((size_t) cfg->num_ps, sizeof *self->pp_ops);
    self->shard_base = calloc(nv, sizeof *self->shard_base);
    self->rows_n = calloc((size_t) cfg->num_ps, sizeof *self->rows_n);
    if (!self->endpoints || !self->clients || !self->layouts || !self->vals || !self->names || !self->fresh ||
        !self->dense_read || !self->stamp || !self->arrived || !self->pp_ops || !self->shard_base || !self->rows_n)
        goto oom;
    zdist_ps_client_options_t opts;
    zdist_ps_client_options_default(&opts);
    opts.timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 30000;
    opts.retries = cfg->retries >= 0 ? cfg->retries : 3;
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
        /* Without a partitioner in the job or the model: the documented default. */
        zdist_partitioner_t part = zdist_partitioner_default_ps(cfg->num_ps);
        if (spec && zdist_partitioner_parse(spec, &part, err) < 0) {
            zdist_error_prefix(err, "variable '%s': partitioner", var->name);
            goto fail;
        }
        if (var->colocated && (var->anchor < 0 || var->anchor >= v)) {
            zdist_error_set(err, -EINVAL, "variable '%s': colocated with variable %d, which is not declared before it",
                            var->name, var->anchor);
            goto fail;
        }
        /* colocate_vars_with: unpartitioned, on the anchor's ps task (declared earlier, so placed). */
        int prc = var->dynamic ? s_dynamic_layout(self->names[v], &var->shape, cfg->num_ps, &self->layouts[v], err)
                  : var->colocated
                      ? zdist_placement_colocate(pl, self->names[v], &var->shape, self->layouts[var->anchor],
                                                 &self->layouts[v], err)
                      : zdist_placement_place_variable(pl, self->names[v], &var->shape, var->dtype, &part,
                                                       &self->layouts[v], err);
        if (prc < 0) {
            zdist_error_prefix(err, "variable '%s'", var->name);
            goto fail;
        }
        self->shard_base[v] = self->num_shards;
        self->num_shards += self->layouts[v]->num_shards;
        if (posix_memalign((void **)&self->vals[v], 64, (size_t)(var->n ? var->n : 1) * sizeof(float)) != 0)
            goto oom;
    }
    zdist_placement_destroy(&pl);
    if (!(self->step_writes = calloc((size_t) (self->num_shards ? self->num_shards : 1), sizeof *self->step_writes)))
        goto oom;
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
        if ((rc = zdist_ps_client_set_optimizer_job(self->clients[p], optim, self->job, err)) < 0) {
            s_fail(self, rc, p, "set_optimizer: %s", err && err->text[0] ? err->text : strerror(-rc));
            return zdist_error_set(err, zdist_rpc_unreachable(rc) ? -ENOTCONN : rc, "%s", self->last_error);
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
                .row_count = zdist_layout_shard_rows(L, s), /* a rank-0 variable: 1 */
                .init = var->init,
                .seed = seed,
                .init_name = var->name,
            };
            if (var->dynamic)
                spec.dynamic = (zdist_ps_dynamic_t){.enabled = true, .min_count = var->dyn.min_count,
                                                    .evict_after_steps = var->dyn.evict_after_steps,
                                                    .evict_l2_below = var->dyn.evict_l2_below,
                                                    .default_value = var->dyn.default_value,
                                                    .num_ps = self->num_ps};
            bool c = false;
            int ps = L->shards[s].ps;
            if ((rc = zdist_ps_client_create(self->clients[ps], &spec, &c, err)) < 0) {
                s_fail(self, rc, ps, "create '%s' shard %d: %s", self->names[v], s,
                       err && err->text[0] ? err->text : strerror(-rc));
                return zdist_error_set(err, zdist_rpc_unreachable(rc) ? -ENOTCONN : rc, "%s", self->last_error);
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

void
worker_psd_set_job_step(worker_backend_t *be, uint64_t job_step)
{
    s_psd_t *self = (s_psd_t *)be;
    if (job_step != self->job_step)
        memset(self->step_writes, 0, (size_t) self->num_shards * sizeof *self->step_writes);
    self->job_step = job_step;
}

bool
worker_psd_is(const worker_backend_t *be)
{
    return be && be->ops == &s_ops;
}
