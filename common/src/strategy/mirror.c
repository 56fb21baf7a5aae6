/* zdist mirror: mirrored variables on the replica runtime — one_device, mirrored, central_storage, tpu
   (mirrored replicas with logical devices) and multi_worker_mirrored (mirrored whose reductions also cross
   workers through a ring communicator): reduce, then apply on every copy. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/mirror.h"

#include "zdist/collective.h"
#include "zdist/distribute.h"

/* What a replica shows the others during a collective. */
typedef struct {
    const void *a;
    const void *b;
    int64_t n;
    const zdist_shape_t *shape;
} s_post_t;

typedef struct {
    float *buf;
    size_t cap;
    int64_t *ids;
    size_t ids_cap;
} s_buf_t;

/* A sparse gradient gathered from every worker (malloc'd by the communicator). */
typedef struct {
    int64_t *ids;
    float *values;
    int64_t n;
} s_xsparse_t;

struct zdist_mirror_t {
    zdist_strategy_t kind;
    zdist_replicas_t *rt; /* borrowed: the replicas and their barrier */
    int n;      /* replicas */
    int nv;     /* variables */
    bool central;
    const zdist_mirror_var_t *vars; /* [nv], borrowed */
    zdist_optim_config_t optim;
    int nslots;
    float **w;         /* [n * nv]: copy r of var v at r*nv+v (NULL when not held) */
    float **slots;     /* [n * nv * ZDIST_OPTIM_MAX_SLOTS] */
    int64_t *iterations; /* [n]: apply count of copy r (Keras optimizer.iterations) */
    zdist_optim_scratch_t *scratch; /* [n] */
    s_buf_t *bufs;     /* [n] gather / concat buffers */
    s_post_t *posts;   /* [n] */
    int merge_rc;
    /* multi_worker_mirrored: replica 0 runs the cross-worker collective of
       each reduction and posts its result for the others. */
    zdist_comm_t *comm; /* borrowed */
    int num_workers;
    int64_t comm_timeout_ms;
    int comm_rc;
    zdist_error_t comm_err;
    s_xsparse_t *xs; /* [xs_cap]: apply's sparse gradients of every worker */
    float **xbufs;   /* [xs_cap]: apply's dense gradients, for the all-reduce */
    int64_t *xlens;  /* [xs_cap] */
    int xs_cap;
    zdist_shape_t xshape; /* all_gather's result across workers */
};

static int
s_copy(const zdist_mirror_t *self, int replica, int var)
{
    if (self->central && self->vars[var].synchronization == ZDIST_SYNC_ON_WRITE)
        return 0;
    return replica;
}

static float *
s_w(const zdist_mirror_t *self, int replica, int var)
{
    return self->w[(size_t)s_copy(self, replica, var) * self->nv + var];
}

static float **
s_slots(const zdist_mirror_t *self, int replica, int var)
{
    return &self->slots[((size_t)s_copy(self, replica, var) * self->nv + var) * ZDIST_OPTIM_MAX_SLOTS];
}

/* Chunk [lo, hi) of a total of len elements that replica r works on. */
static void
s_chunk(int64_t len, int n, int r, int64_t *lo, int64_t *hi)
{
    *lo = len * r / n;
    *hi = len * (r + 1) / n;
}

static int
s_grow(s_buf_t *b, size_t nfloats, size_t nids)
{
    if (nfloats > b->cap) {
        float *p = realloc(b->buf, nfloats * sizeof *p);
        if (!p)
            return -ENOMEM;
        b->buf = p;
        b->cap = nfloats;
    }
    if (nids > b->ids_cap) {
        int64_t *p = realloc(b->ids, nids * sizeof *p);
        if (!p)
            return -ENOMEM;
        b->ids = p;
        b->ids_cap = nids;
    }
    return 0;
}

void
zdist_mirror_destroy(zdist_mirror_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_mirror_t *self = *self_p;
    if (self->w)
        for (size_t i = 0; i < (size_t)self->n * self->nv; i++)
            free(self->w[i]);
    if (self->slots)
        for (size_t i = 0; i < (size_t)self->n * self->nv * ZDIST_OPTIM_MAX_SLOTS; i++)
            free(self->slots[i]);
    if (self->scratch)
        for (int r = 0; r < self->n; r++)
            zdist_optim_scratch_release(&self->scratch[r]);
    if (self->bufs)
        for (int r = 0; r < self->n; r++) {
            free(self->bufs[r].buf);
            free(self->bufs[r].ids);
        }
    for (int i = 0; i < self->xs_cap; i++) {
        free(self->xs[i].ids);
        free(self->xs[i].values);
    }
    free(self->xs);
    free(self->xbufs);
    free(self->xlens);
    free(self->w);
    free(self->slots);
    free(self->iterations);
    free(self->scratch);
    free(self->bufs);
    free(self->posts);
    free(self);
    *self_p = NULL;
}

static float *
s_alloc_floats(int64_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, (size_t)n * sizeof(float)) != 0)
        return NULL;
    return p;
}

zdist_mirror_t *
zdist_mirror_new(zdist_strategy_t kind, zdist_replicas_t *rt, const zdist_mirror_var_t *vars, int nvars,
                 const zdist_optim_config_t *optim, zdist_mirror_init_fn init, void *init_arg, zdist_error_t *err)
{
    int num_replicas = zdist_replicas_count(rt);
    if (kind != ZDIST_STRATEGY_ONE_DEVICE && kind != ZDIST_STRATEGY_MIRRORED &&
        kind != ZDIST_STRATEGY_CENTRAL_STORAGE && kind != ZDIST_STRATEGY_MULTI_WORKER_MIRRORED &&
        kind != ZDIST_STRATEGY_TPU) {
        zdist_error_set(err, -EINVAL, "strategy '%s' does not run in one process", zdist_strategy_name(kind));
        return NULL;
    }
    if (num_replicas < 1 || num_replicas > ZDIST_MIRROR_MAX_REPLICAS ||
        (kind == ZDIST_STRATEGY_ONE_DEVICE && num_replicas != 1)) {
        zdist_error_set(err, -EINVAL, "num_replicas %d: one_device has 1 replica, others 1..64", num_replicas);
        return NULL;
    }
    if (zdist_optim_config_validate(optim, err) < 0)
        return NULL;
    zdist_mirror_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->kind = kind;
    self->rt = rt;
    self->n = num_replicas;
    self->nv = nvars;
    self->central = kind == ZDIST_STRATEGY_CENTRAL_STORAGE;
    self->num_workers = 1;
    self->vars = vars;
    self->optim = *optim;
    self->nslots = zdist_optim_num_slots(optim->kind);
    size_t ncopies = (size_t)self->n * self->nv;
    self->w = calloc(ncopies, sizeof *self->w);
    self->slots = calloc(ncopies * ZDIST_OPTIM_MAX_SLOTS, sizeof *self->slots);
    self->iterations = calloc((size_t)self->n, sizeof *self->iterations);
    self->scratch = calloc((size_t)self->n, sizeof *self->scratch);
    self->bufs = calloc((size_t)self->n, sizeof *self->bufs);
    self->posts = calloc((size_t)self->n, sizeof *self->posts);
    if (!self->w || !self->slots || !self->iterations || !self->scratch || !self->bufs || !self->posts)
        goto oom;
    for (int v = 0; v < self->nv; v++) {
        const zdist_mirror_var_t *var = &vars[v];
        float *first = NULL;
        for (int r = 0; r < self->n; r++) {
            if (s_copy(self, r, v) != r)
                continue;
            float *w = s_alloc_floats(var->n);
            if (!w)
                goto oom;
            self->w[(size_t)r * self->nv + v] = w;
            /* Every copy starts from the same values, as MirroredVariable's
               initial value broadcast. */
            if (first)
                memcpy(w, first, (size_t)var->n * sizeof *w);
            else if (init(init_arg, v, w, err) < 0)
                goto fail;
            first = w;
            if (!var->trainable)
                continue;
            for (int s = 0; s < self->nslots; s++) {
                float *slot = s_alloc_floats(var->n);
                if (!slot)
                    goto oom;
                zdist_optim_slot_fill(optim, s, ZDIST_DTYPE_FLOAT32, slot, (size_t)var->n);
                self->slots[((size_t)r * self->nv + v) * ZDIST_OPTIM_MAX_SLOTS + s] = slot;
            }
        }
    }
    return self;
oom:
    zdist_error_set(err, -ENOMEM, "out of memory for the variables' copies");
fail:
    zdist_mirror_destroy(&self);
    return NULL;
}

const float *
zdist_mirror_copy(const zdist_mirror_t *self, int replica, int var)
{
    if (!self || replica < 0 || replica >= self->n || var < 0 || var >= self->nv)
        return NULL;
    return s_w(self, replica, var);
}

void
zdist_mirror_set_comm(zdist_mirror_t *self, zdist_comm_t *comm, int num_workers, int64_t timeout_ms)
{
    self->comm = comm;
    self->num_workers = comm ? num_workers : 1;
    self->comm_timeout_ms = timeout_ms;
}

const char *
zdist_mirror_last_error(const zdist_mirror_t *self)
{
    return self ? self->comm_err.text : "";
}

int
zdist_mirror_num_slots(const zdist_mirror_t *self)
{
    return self->nslots;
}

int64_t
zdist_mirror_iterations(const zdist_mirror_t *self)
{
    return self->iterations[0];
}

const float *
zdist_mirror_slot(const zdist_mirror_t *self, int var, int slot)
{
    if (var < 0 || var >= self->nv || slot < 0 || slot >= self->nslots)
        return NULL;
    return s_slots(self, 0, var)[slot];
}

int
zdist_mirror_set_state(zdist_mirror_t *self, int var, const float *values, const float *const *slots)
{
    if (var < 0 || var >= self->nv)
        return -EINVAL;
    const zdist_mirror_var_t *v = &self->vars[var];
    for (int r = 0; r < self->n; r++) {
        if (s_copy(self, r, var) != r)
            continue;
        memcpy(s_w(self, r, var), values, (size_t)v->n * sizeof(float));
        float **sl = s_slots(self, r, var);
        for (int k = 0; k < self->nslots && slots; k++)
            if (sl[k] && slots[k])
                memcpy(sl[k], slots[k], (size_t)v->n * sizeof(float));
    }
    return 0;
}

void
zdist_mirror_set_iterations(zdist_mirror_t *self, int64_t iterations)
{
    for (int r = 0; r < self->n; r++)
        self->iterations[r] = iterations;
}

int
zdist_mirror_read(zdist_mirror_t *self, int replica, int var, const float **ret)
{
    *ret = s_w(self, replica, var);
    return 0;
}

int
zdist_mirror_read_rows(zdist_mirror_t *self, int replica, int var, const int64_t *ids, int64_t n, float *out)
{
    const float *w = s_w(self, replica, var);
    int64_t width = self->vars[var].width;
    for (int64_t i = 0; i < n; i++)
        memcpy(out + i * width, w + ids[i] * width, (size_t)width * sizeof *out);
    return 0;
}

/* The replicas called apply with the same variables, in the same order, all
   dense or all sparse alike. Decided by every replica from the same posts. */
static int
s_same_grads(const zdist_mirror_t *self)
{
    const zdist_grad_t *g0 = self->posts[0].a;
    for (int q = 1; q < self->n; q++) {
        const zdist_grad_t *gq = self->posts[q].a;
        if (self->posts[q].n != self->posts[0].n)
            return -EINVAL;
        for (int64_t i = 0; i < self->posts[0].n; i++)
            if (gq[i].var != g0[i].var || (gq[i].ids == NULL) != (g0[i].ids == NULL))
                return -EINVAL;
    }
    return 0;
}

/* Concatenates replicas' sparse gradients of grad i, in replica order. */
static int
s_concat_sparse(zdist_mirror_t *self, int replica, int64_t i, int64_t width, const int64_t **ret_ids,
                const float **ret_vals, int64_t *ret_n)
{
    if (self->n == 1) {
        const zdist_grad_t *g = &((const zdist_grad_t *)self->posts[0].a)[i];
        *ret_ids = g->ids;
        *ret_vals = g->values;
        *ret_n = g->nids;
        return 0;
    }
    /* The gather along axis 0 of the replicas' ids and of their rows. */
    zdist_tensor_t ids[ZDIST_MIRROR_MAX_REPLICAS], rows[ZDIST_MIRROR_MAX_REPLICAS];
    int64_t total = 0;
    for (int q = 0; q < self->n; q++) {
        const zdist_grad_t *g = &((const zdist_grad_t *)self->posts[q].a)[i];
        ids[q] = (zdist_tensor_t){.dtype = ZDIST_DTYPE_INT64, .shape = {.rank = 1, .dims = {g->nids}},
                                  .data = (void *)g->ids, .nbytes = (size_t)g->nids * sizeof *g->ids};
        rows[q] = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = {.rank = 2, .dims = {g->nids, width}},
                                   .data = (void *)g->values,
                                   .nbytes = (size_t)(g->nids * width) * sizeof *g->values};
        total += g->nids;
    }
    s_buf_t *b = &self->bufs[replica];
    if (s_grow(b, (size_t)(total * width), (size_t)total) < 0)
        return -ENOMEM;
    zdist_tensor_t all_ids = {.data = b->ids, .nbytes = b->ids_cap * sizeof *b->ids};
    zdist_tensor_t all_rows = {.data = b->buf, .nbytes = b->cap * sizeof *b->buf};
    if (zdist_distribute_gather_into(ids, self->n, 0, &all_ids, NULL) < 0 ||
        zdist_distribute_gather_into(rows, self->n, 0, &all_rows, NULL) < 0)
        return -EINVAL;
    *ret_ids = b->ids;
    *ret_vals = b->buf;
    *ret_n = total;
    return 0;
}

/* Replica 0, after the local reduction of apply: the dense gradients summed
   across workers in one packed all-reduce, the sparse ones gathered from
   every worker (ids and rows) into self->xs. */
static int
s_cross_apply(zdist_mirror_t *self, int n)
{
    const zdist_grad_t *g0 = self->posts[0].a;
    int rc = 0, nd = 0;
    if (n > self->xs_cap) {
        s_xsparse_t *xs = realloc(self->xs, (size_t)n * sizeof *xs);
        float **xbufs = xs ? realloc(self->xbufs, (size_t)n * sizeof *xbufs) : NULL;
        int64_t *xlens = xbufs ? realloc(self->xlens, (size_t)n * sizeof *xlens) : NULL;
        if (xs)
            self->xs = xs;
        if (xbufs)
            self->xbufs = xbufs;
        if (xlens)
            self->xlens = xlens;
        if (!xlens)
            return zdist_error_set(&self->comm_err, -ENOMEM, "out of memory");
        memset(xs + self->xs_cap, 0, (size_t)(n - self->xs_cap) * sizeof *xs);
        self->xs_cap = n;
    }
    /* Buffers kept from step to step: no allocation on this path. */
    float **bufs = self->xbufs;
    int64_t *lens = self->xlens;
    for (int i = 0; i < n; i++)
        if (!g0[i].ids) {
            bufs[nd] = g0[i].values;
            lens[nd++] = self->vars[g0[i].var].n;
        }
    if (nd > 0 && (rc = zdist_comm_all_reduce(self->comm, ZDIST_REDUCE_SUM, bufs, lens, nd, self->comm_timeout_ms,
                                              &self->comm_err)) < 0)
        return rc;
    for (int i = 0; i < n; i++) {
        if (!g0[i].ids)
            continue;
        int64_t width = self->vars[g0[i].var].width, nids, nvals;
        const int64_t *ids;
        const float *vals;
        s_xsparse_t *x = &self->xs[i];
        free(x->ids);
        free(x->values);
        *x = (s_xsparse_t){0};
        if ((rc = s_concat_sparse(self, 0, i, width, &ids, &vals, &nids)) < 0 ||
            (rc = zdist_comm_all_gather(self->comm, ids, nids, sizeof *ids, (void **)&x->ids, &x->n, NULL,
                                        self->comm_timeout_ms, &self->comm_err)) < 0 ||
            (rc = zdist_comm_all_gather(self->comm, vals, nids, (size_t)width * sizeof *vals, (void **)&x->values,
                                        &nvals, NULL, self->comm_timeout_ms, &self->comm_err)) < 0) {
            if (rc == -ENOMEM && !self->comm_err.text[0])
                zdist_error_set(&self->comm_err, rc, "out of memory");
            return rc;
        }
        if (nvals != x->n)
            return zdist_error_set(&self->comm_err, -EPROTO, "workers disagree on sparse gradient %d's rows", i);
    }
    return 0;
}

int
zdist_mirror_apply(zdist_mirror_t *self, int replica, const zdist_grad_t *grads, int n)
{
    self->posts[replica] = (s_post_t){.a = grads, .n = n};
    int rc = zdist_replicas_barrier(self->rt, NULL);
    if (rc < 0)
        return rc;
    int bad = s_same_grads(self);
    int64_t t = self->iterations[self->central ? 0 : replica] + 1;
    /* Dense: replica r sums its chunk of every gradient into replica 0's
       buffer, in replica order, so every copy gets bitwise the same sum. */
    if (!bad && self->n > 1)
        for (int i = 0; i < n; i++) {
            if (grads[i].ids)
                continue;
            float *bufs[ZDIST_MIRROR_MAX_REPLICAS];
            for (int q = 0; q < self->n; q++)
                bufs[q] = ((const zdist_grad_t *)self->posts[q].a)[i].values;
            int64_t lo, hi;
            s_chunk(self->vars[grads[i].var].n, self->n, replica, &lo, &hi);
            zdist_distribute_reduce_f32(ZDIST_REDUCE_SUM, bufs, self->n, lo, hi);
        }
    rc = zdist_replicas_barrier(self->rt, NULL);
    if (rc < 0)
        return rc;
    if (bad)
        goto done;
    if (self->comm) {
        if (replica == 0)
            self->comm_rc = s_cross_apply(self, n);
        rc = zdist_replicas_barrier(self->rt, NULL);
        if (rc < 0)
            return rc;
        if (self->comm_rc < 0)
            return self->comm_rc; /* every replica, before any copy changed */
    }
    const zdist_grad_t *red = self->posts[0].a;
    for (int i = 0; i < n; i++) {
        const zdist_mirror_var_t *var = &self->vars[red[i].var];
        float *w = s_w(self, replica, red[i].var);
        float **slots = s_slots(self, replica, red[i].var);
        if (!red[i].ids) {
            int64_t lo = 0, hi = var->n;
            if (self->central)
                s_chunk(var->n, self->n, replica, &lo, &hi);
            void *sl[ZDIST_OPTIM_MAX_SLOTS] = {0};
            for (int s = 0; s < self->nslots; s++)
                sl[s] = slots[s] + lo;
            if (hi > lo)
                zdist_optim_apply_dense(&self->optim, ZDIST_DTYPE_FLOAT32, t, w + lo, sl, red[i].values + lo,
                                      (size_t)(hi - lo));
        } else {
            if (self->central && i % self->n != replica)
                continue;
            const int64_t *ids = NULL;
            const float *vals = NULL;
            int64_t nids = 0;
            if (self->comm) {
                ids = self->xs[i].ids;
                vals = self->xs[i].values;
                nids = self->xs[i].n;
            }
            if ((!self->comm && s_concat_sparse(self, replica, i, var->width, &ids, &vals, &nids) < 0) ||
                zdist_optim_apply_sparse(&self->optim, ZDIST_DTYPE_FLOAT32, t, w, (void *const *)slots, 0,
                                       var->rows, var->width, ids, (size_t)nids, vals,
                                       &self->scratch[replica]) < 0) {
                /* Copies would diverge: nothing sensible can follow. */
                zdist_mirror_abort(self, replica);
                return -ENOMEM;
            }
        }
    }
    if (!self->central)
        self->iterations[replica] = t;
done:
    rc = zdist_replicas_barrier(self->rt, NULL);
    if (rc < 0)
        return rc;
    if (self->central && replica == 0 && !bad)
        self->iterations[0] = t;
    return bad;
}

/* assign of an ON_WRITE variable under multi_worker_mirrored: replica 0
   aggregates the local values, then across workers (SUM and MEAN by an
   all-reduce, ONLY_FIRST_REPLICA by worker 0's broadcast); every copy then
   takes the result. Called after the posting barrier. */
static int
s_assign_cross(zdist_mirror_t *self, int replica, int var, bool add)
{
    const zdist_mirror_var_t *v = &self->vars[var];
    if (replica == 0) {
        self->comm_rc = s_grow(&self->bufs[0], (size_t)v->n + 1, 0);
        float *acc = self->bufs[0].buf;
        if (self->comm_rc == 0) {
            const float *values[ZDIST_MIRROR_MAX_REPLICAS];
            for (int q = 0; q < self->n; q++)
                values[q] = self->posts[q].a;
            zdist_distribute_aggregate_f32(v->aggregation, values, self->n, 0, v->n, acc);
            if (v->aggregation == ZDIST_AGG_ONLY_FIRST_REPLICA)
                self->comm_rc = zdist_comm_broadcast(self->comm, 0, acc, (size_t)v->n * sizeof *acc,
                                                     self->comm_timeout_ms, &self->comm_err);
            else
                self->comm_rc = zdist_comm_all_reduce(
                    self->comm, v->aggregation == ZDIST_AGG_MEAN ? ZDIST_REDUCE_MEAN : ZDIST_REDUCE_SUM, &acc,
                    &v->n, 1, self->comm_timeout_ms, &self->comm_err);
        }
    }
    int rc = zdist_replicas_barrier(self->rt, NULL);
    if (rc < 0)
        return rc;
    if (self->comm_rc < 0)
        return self->comm_rc;
    float *w = s_w(self, replica, var);
    const float *acc = self->bufs[0].buf;
    for (int64_t j = 0; j < v->n; j++)
        w[j] = add ? w[j] + acc[j] : acc[j];
    return zdist_replicas_barrier(self->rt, NULL);
}

int
zdist_mirror_assign(zdist_mirror_t *self, int replica, int var, const float *values, bool add)
{
    const zdist_mirror_var_t *v = &self->vars[var];
    if (v->synchronization == ZDIST_SYNC_ON_READ) {
        float *w = s_w(self, replica, var);
        for (int64_t j = 0; j < v->n; j++)
            w[j] = add ? w[j] + values[j] : values[j];
        return 0;
    }
    if (zdist_distribute_check_replica_write(v->synchronization, v->aggregation, ZDIST_DTYPE_FLOAT32,
                                             self->n * self->num_workers, NULL) < 0)
        return -EINVAL;
    self->posts[replica] = (s_post_t){.a = values};
    int rc = zdist_replicas_barrier(self->rt, NULL);
    if (rc < 0)
        return rc;
    if (self->comm)
        return s_assign_cross(self, replica, var, add);
    /* Each replica aggregates its chunk into its own scratch, then writes
       its copy (central_storage: its chunk of the one copy). */
    int64_t lo = 0, hi = v->n;
    if (self->central)
        s_chunk(v->n, self->n, replica, &lo, &hi);
    if (s_grow(&self->bufs[replica], (size_t)v->n + 1, 0) < 0)
        rc = -ENOMEM;
    float *acc = self->bufs[replica].buf, *w = s_w(self, replica, var);
    if (rc == 0) {
        const float *posted[ZDIST_MIRROR_MAX_REPLICAS];
        for (int q = 0; q < self->n; q++)
            posted[q] = self->posts[q].a;
        zdist_distribute_aggregate_f32(v->aggregation, posted, self->n, lo, hi, acc);
        for (int64_t j = lo; j < hi; j++)
            w[j] = add ? w[j] + acc[j] : acc[j];
    }
    int brc = zdist_replicas_barrier(self->rt, NULL);
    return brc < 0 ? brc : rc;
}

int
zdist_mirror_all_reduce(zdist_mirror_t *self, int replica, zdist_reduce_op_t op, float *const *bufs, const int64_t *lens,
             int n)
{
    if (self->n == 1 && !self->comm)
        return 0; /* the sum and the mean of one value are the value */
    self->posts[replica] = (s_post_t){.a = bufs, .b = lens, .n = n};
    int rc = zdist_replicas_barrier(self->rt, NULL);
    if (rc < 0)
        return rc;
    int bad = 0;
    for (int q = 1; q < self->n && !bad; q++) {
        if (self->posts[q].n != n)
            bad = -EINVAL;
        for (int i = 0; i < n && !bad; i++)
            if (((const int64_t *)self->posts[q].b)[i] != lens[i])
                bad = -EINVAL;
    }
    if (!bad)
        for (int i = 0; i < n; i++) {
            float *qbufs[ZDIST_MIRROR_MAX_REPLICAS];
            for (int q = 0; q < self->n; q++)
                qbufs[q] = ((float *const *)self->posts[q].a)[i];
            int64_t lo, hi;
            s_chunk(lens[i], self->n, replica, &lo, &hi);
            zdist_distribute_reduce_f32(op, qbufs, self->n, lo, hi);
        }
    rc = zdist_replicas_barrier(self->rt, NULL);
    if (rc < 0)
        return rc;
    if (self->comm && !bad) {
        /* The mean of the workers' means is the mean: every worker has n replicas. */
        if (replica == 0)
            self->comm_rc = zdist_comm_all_reduce(self->comm, op, (float *const *)self->posts[0].a, lens, n,
                                                  self->comm_timeout_ms, &self->comm_err);
        rc = zdist_replicas_barrier(self->rt, NULL);
        if (rc < 0)
            return rc;
        if (self->comm_rc < 0)
            return self->comm_rc;
    }
    if (!bad && replica != 0)
        for (int i = 0; i < n; i++)
            memcpy(bufs[i], ((float *const *)self->posts[0].a)[i], (size_t)lens[i] * sizeof(float));
    rc = zdist_replicas_barrier(self->rt, NULL);
    return rc < 0 ? rc : bad;
}

/* Replica 0: its local gather (bufs[0], shape *local) concatenated along
   axis with every other worker's, in worker order, into bufs[0]; the
   result's shape goes to self->xshape. */
static int
s_cross_gather(zdist_mirror_t *self, int axis, const zdist_shape_t *local)
{
    int64_t total = 0, rows = 0;
    zdist_shape_num_elements(local, &total);
    int64_t *rank_rows = calloc((size_t)self->num_workers, sizeof *rank_rows);
    int64_t mine[ZDIST_MAX_RANK + 1] = {local->rank}, *shapes = NULL, nshapes = 0;
    memcpy(mine + 1, local->dims, sizeof local->dims);
    float *all = NULL;
    if (!rank_rows)
        return zdist_error_set(&self->comm_err, -ENOMEM, "out of memory");
    /* Every worker sees every shape first, so all decide alike. */
    int rc = zdist_comm_all_gather(self->comm, mine, 1, sizeof mine, (void **)&shapes, &nshapes, NULL,
                                   self->comm_timeout_ms, &self->comm_err);
    if (rc < 0)
        goto out;
    zdist_shape_t out = *local;
    out.dims[axis] = 0;
    for (int q = 0; q < self->num_workers; q++) {
        const int64_t *sq = shapes + q * (ZDIST_MAX_RANK + 1);
        for (int d = 0; d < local->rank && sq[0] == local->rank; d++)
            if (d != axis && sq[1 + d] != local->dims[d])
                rc = -EINVAL;
        if (rc < 0 || sq[0] != local->rank) {
            rc = -EINVAL; /* the shapes' fault, as the local check's: not the ring's */
            goto out;
        }
        out.dims[axis] += sq[1 + axis];
    }
    if ((rc = zdist_comm_all_gather(self->comm, self->bufs[0].buf, total, sizeof(float), (void **)&all, &rows,
                                    rank_rows, self->comm_timeout_ms, &self->comm_err)) < 0)
        goto out;
    if ((rc = s_grow(&self->bufs[0], (size_t)rows + 1, 0)) < 0) {
        zdist_error_set(&self->comm_err, rc, "out of memory");
        goto out;
    }
    /* The workers' parts, each a [outer, along_q, inner] block of `all`,
       concatenated along axis: the gather across workers. */
    zdist_tensor_t *parts = calloc((size_t)self->num_workers, sizeof *parts);
    if (!parts) {
        rc = zdist_error_set(&self->comm_err, -ENOMEM, "out of memory");
        goto out;
    }
    int64_t at = 0;
    for (int q = 0; q < self->num_workers; q++) {
        parts[q] = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = *local, .data = all + at,
                                    .nbytes = (size_t)rank_rows[q] * sizeof *all};
        parts[q].shape.dims[axis] = shapes[q * (ZDIST_MAX_RANK + 1) + 1 + axis];
        at += rank_rows[q];
    }
    zdist_tensor_t dst = {.data = self->bufs[0].buf, .nbytes = self->bufs[0].cap * sizeof(float)};
    rc = zdist_distribute_gather_into(parts, self->num_workers, axis, &dst, &self->comm_err);
    free(parts);
    if (rc < 0)
        goto out;
    self->xshape = out;
out:
    free(shapes);
    free(all);
    free(rank_rows);
    return rc;
}

int
zdist_mirror_all_gather(zdist_mirror_t *self, int replica, const float *in, const zdist_shape_t *shape, int axis,
             const float **ret, zdist_shape_t *ret_shape)
{
    self->posts[replica] = (s_post_t){.a = in, .shape = shape};
    int rc = zdist_replicas_barrier(self->rt, NULL);
    if (rc < 0)
        return rc;
    /* Every replica gathers the posted values itself (the local gather). */
    int bad = 0;
    zdist_tensor_t parts[ZDIST_MIRROR_MAX_REPLICAS];
    int64_t total = 0;
    for (int q = 0; q < self->n && !bad; q++) {
        const zdist_shape_t *sq = self->posts[q].shape;
        int64_t count = 0;
        if (sq->rank != shape->rank || zdist_shape_num_elements(sq, &count) < 0)
            bad = -EINVAL;
        parts[q] = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = *sq, .data = (void *)self->posts[q].a,
                                    .nbytes = (size_t)count * sizeof(float)};
        total += count;
    }
    if (!bad && s_grow(&self->bufs[replica], (size_t)total + 1, 0) < 0)
        bad = -ENOMEM;
    zdist_tensor_t gathered = {.data = self->bufs[replica].buf, .nbytes = self->bufs[replica].cap * sizeof(float)};
    if (!bad && zdist_distribute_gather_into(parts, self->n, axis, &gathered, NULL) < 0)
        bad = -EINVAL; /* shapes differ outside axis */
    zdist_shape_t out = gathered.shape;
    rc = zdist_replicas_barrier(self->rt, NULL);
    if (rc < 0)
        return rc;
    if (bad)
        return bad;
    if (self->comm) {
        if (replica == 0)
            self->comm_rc = s_cross_gather(self, axis, &out);
        rc = zdist_replicas_barrier(self->rt, NULL);
        if (rc < 0)
            return rc;
        if (self->comm_rc < 0)
            return self->comm_rc;
        out = self->xshape;
        if (replica != 0) {
            int64_t all = 0;
            zdist_shape_num_elements(&out, &all);
            if (s_grow(&self->bufs[replica], (size_t)all + 1, 0) < 0)
                bad = -ENOMEM;
            else
                memcpy(self->bufs[replica].buf, self->bufs[0].buf, (size_t)all * sizeof(float));
        }
        rc = zdist_replicas_barrier(self->rt, NULL);
        if (rc < 0)
            return rc;
        if (bad)
            return bad;
    }
    *ret = self->bufs[replica].buf;
    *ret_shape = out;
    return 0;
}

int
zdist_mirror_merge_call(zdist_mirror_t *self, int replica, zdist_merge_fn fn, void *arg)
{
    self->posts[replica] = (s_post_t){.a = arg};
    int rc = zdist_replicas_barrier(self->rt, NULL);
    if (rc < 0)
        return rc;
    if (replica == 0) {
        void *args[64];
        for (int q = 0; q < self->n; q++)
            args[q] = (void *)self->posts[q].a;
        self->merge_rc = fn(args, self->n);
    }
    rc = zdist_replicas_barrier(self->rt, NULL);
    return rc < 0 ? rc : self->merge_rc;
}

int
zdist_mirror_read_cross_replica(zdist_mirror_t *self, int var, float *out, zdist_error_t *err)
{
    const zdist_mirror_var_t *v = &self->vars[var];
    /* ON_WRITE copies are identical (central_storage holds one): replica 0's. */
    int ncopies = v->synchronization == ZDIST_SYNC_ON_READ ? self->n : 1;
    zdist_tensor_t copies[ZDIST_MIRROR_MAX_REPLICAS];
    for (int q = 0; q < ncopies; q++)
        copies[q] = (zdist_tensor_t){.dtype = ZDIST_DTYPE_FLOAT32, .shape = v->shape, .data = s_w(self, q, var),
                                     .nbytes = (size_t)v->n * sizeof(float)};
    zdist_tensor_t ret = copies[0];
    ret.data = out;
    int rc = zdist_distribute_var_read_cross_replica(v->synchronization, v->aggregation, copies, ncopies, &ret, err);
    if (rc < 0 && v->aggregation == ZDIST_AGG_NONE)
        zdist_error_prefix(err, "variable '%s' is ON_READ with aggregation NONE: it cannot be read across replicas "
                                "(declare SUM, MEAN or ONLY_FIRST_REPLICA)", v->name);
    else if (rc < 0)
        zdist_error_prefix(err, "variable '%s'", v->name);
    return rc;
}

void
zdist_mirror_abort(zdist_mirror_t *self, int replica)
{
    zdist_replicas_depart(self->rt, replica);
}
