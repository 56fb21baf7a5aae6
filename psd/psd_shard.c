/* psd_shard: shard storage with per-shard rwlocks, exactly-once writes and optimizer applies. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "psd_shard.h"

/* A shard's buffer (values, a copy, optimizer slots). Big ones start on a
   2 MiB boundary and are marked for transparent huge pages before their
   first touch: a row gather over a big table is otherwise a TLB miss per
   row (a page walk that costs double on a virtual machine). Only the whole
   2 MiB pages inside the buffer become huge: nothing is rounded up. Freed
   with free(). */
#define S_HUGE_BYTES ((size_t) 2 << 20)
void *
psd_buffer_alloc(size_t bytes)
{
    if (bytes < S_HUGE_BYTES)
        return malloc(bytes ? bytes : 1);
    void *p = NULL;
    if (posix_memalign(&p, S_HUGE_BYTES, bytes) != 0)
        return NULL;
    (void) madvise(p, bytes, MADV_HUGEPAGE); /* advice only: without THP it changes nothing */
    return p;
}

typedef struct {
    uint64_t id;
    uint64_t highest; /* highest applied sequence, valid when has_seq */
    uint64_t window;  /* bit i: sequence highest - 1 - i was applied */
    uint64_t last_use;
    bool has_seq;
} s_client_t;

typedef struct _s_pool_t s_pool_t;

/* A shard's values, counted: a pull answered without copying holds a
   reference until libzmq has sent the reply (psd_shard_unpin, from its I/O
   thread), and a write while one is held goes to another buffer (copy on
   write), so a reply never sees a later write. */
typedef struct {
    atomic_uint refs;
    void *data;
    s_pool_t *pool; /* the shard's; a reference while refs > 0 */
} s_values_t;

/* A shard's spare values buffer: the last reply to release a buffer the
   shard has moved away from leaves it here, and the next write that needs
   another buffer takes it rather than fresh pages (which cost more than the
   write). Counted (the shard, and each buffer while referenced) because
   replies may outlive the shard: then the last of them frees it all.
   Shards over S_SPARE_MAX_BYTES keep none: a second copy of a big variable
   held for good (outside --max-bytes) costs more than its fresh pages. */
#define S_SPARE_MAX_BYTES ((size_t) 64 << 20)
struct _s_pool_t {
    atomic_uint refs;
    bool keep;                   /* a spare is kept at all */
    _Atomic(s_values_t *) spare; /* refs 0, no pool reference; or NULL */
};

static s_pool_t *
s_pool_new(size_t value_bytes)
{
    s_pool_t *p = malloc(sizeof *p);
    if (p) {
        atomic_init(&p->refs, 1);
        p->keep = value_bytes <= S_SPARE_MAX_BYTES;
        atomic_init(&p->spare, NULL);
    }
    return p;
}

static void
s_values_free(s_values_t *v)
{
    if (v) {
        free(v->data);
        free(v);
    }
}

static void
s_pool_release(s_pool_t *p)
{
    if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) {
        s_values_free(atomic_exchange_explicit(&p->spare, NULL, memory_order_acq_rel));
        free(p);
    }
}

static s_values_t *
s_values_wrap(s_pool_t *pool, void *data)
{
    s_values_t *v = malloc(sizeof *v);
    if (v) {
        atomic_init(&v->refs, 1);
        v->data = data;
        v->pool = pool;
        atomic_fetch_add_explicit(&pool->refs, 1, memory_order_relaxed);
    }
    return v;
}

/* From any thread. The last reference makes the buffer its pool's spare
   (an older spare is freed: one per shard), or frees it (no spare kept). */
static void
s_values_release(s_values_t *v)
{
    if (!v || atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1)
        return;
    s_pool_t *pool = v->pool;
    v->pool = NULL;
    s_values_free(pool->keep ? atomic_exchange_explicit(&pool->spare, v, memory_order_acq_rel) : v);
    s_pool_release(pool);
}

struct _psd_shard_t {
    psd_shard_spec_t spec; /* spec.name points at name */
    char name[PSD_NAME_MAX + 1];
    int64_t width;
    size_t esize, row_bytes, value_bytes;
    pthread_rwlock_t lock;
    bool lock_ready;
    /* guarded by lock */
    void *values;      /* vals->data */
    s_values_t *vals;
    s_pool_t *pool;    /* set once */
    void *slots[ZDIST_OPTIM_MAX_SLOTS];
    int nslots; /* allocated slots: 0 or the optimizer's count */
    zdist_optim_config_t optim;
    int64_t step;
    zdist_optim_scratch_t scratch;
    s_client_t *clients;
    size_t nclients, clients_cap;
    uint64_t tick;
    psd_ledger_t ledger; /* writes deduplicated by the job's step */
};

/* A job's own optimizer (set_optimizer naming the job). */
typedef struct {
    char *job;
    zdist_optim_config_t optim;
} s_job_optim_t;

struct _psd_store_t {
    pthread_rwlock_t lock;
    psd_shard_t **shards; /* sorted by (name, shard_index) */
    size_t nshards, cap;
    zdist_optim_config_t optim; /* the default */
    s_job_optim_t *jobs;
    size_t njobs;
};

/* ---------------------------------------------------------------- shard */

static void
s_shard_destroy(psd_shard_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    psd_shard_t *self = *self_p;
    if (self->lock_ready)
        pthread_rwlock_destroy(&self->lock);
    if (self->vals)
        s_values_release(self->vals);
    else
        free(self->values);
    if (self->pool) {
        /* Ours now; a buffer a reply still holds comes back to the pool
           after this, and the reply frees it with the pool. */
        s_values_free(atomic_exchange_explicit(&self->pool->spare, NULL, memory_order_acq_rel));
        s_pool_release(self->pool);
    }
    for (int i = 0; i < ZDIST_OPTIM_MAX_SLOTS; i++)
        free(self->slots[i]);
    zdist_optim_scratch_release(&self->scratch);
    free(self->clients);
    psd_ledger_clear(&self->ledger);
    free(self);
    *self_p = NULL;
}

static void
s_free_slots(psd_shard_t *self)
{
    for (int i = 0; i < ZDIST_OPTIM_MAX_SLOTS; i++) {
        free(self->slots[i]);
        self->slots[i] = NULL;
    }
    self->nslots = 0;
}

static const char *
s_describe(const psd_shard_spec_t *s, char *buf, size_t size)
{
    char shape[160];
    zdist_shape_format(&s->shape, shape, sizeof shape);
    snprintf(buf, size, "part %d rows [%" PRId64 ", %" PRId64 ") of %s %s, %s initializer, seed %" PRIu64,
             (int) s->shard_index, s->row_offset, s->row_offset + s->rows, shape,
             zdist_dtype_name(s->dtype), zdist_init_kind_name(s->init.kind), s->seed);
    return buf;
}

static bool
s_spec_equal(const psd_shard_spec_t *a, const psd_shard_spec_t *b)
{
    return strcmp(a->name, b->name) == 0 && zdist_shape_equal(&a->shape, &b->shape)
           && a->dtype == b->dtype && a->shard_index == b->shard_index
           && a->row_offset == b->row_offset && a->rows == b->rows
           && zdist_init_equal(&a->init, &b->init) && a->seed == b->seed;
}

/* Checks a spec on its own and computes its sizes. */
static int
s_spec_validate(const psd_shard_spec_t *spec, int64_t *ret_width, size_t *ret_value_bytes,
                zdist_error_t *err)
{
    if (!spec->name || !spec->name[0])
        return zdist_error_set(err, -EINVAL, "variable name is empty; give the variable a name");
    size_t len = strnlen(spec->name, PSD_NAME_MAX + 1);
    if (len > PSD_NAME_MAX)
        return zdist_error_set(err, -EINVAL, "variable name is longer than %d bytes", PSD_NAME_MAX);
    if (!zdist_dtype_is_data(spec->dtype))
        return zdist_error_set(err, -EINVAL, "variable '%s': dtype %s cannot be stored; use "
                               "float32, float64, int32, int64 or uint8", spec->name,
                               zdist_dtype_name(spec->dtype));
    zdist_shape_t shape;
    if (zdist_shape_init(&shape, spec->shape.rank, spec->shape.dims) < 0)
        return zdist_error_set(err, -EINVAL, "variable '%s': shape has rank %d or a negative "
                               "dimension; rank is 0..%d, dimensions >= 0", spec->name,
                               spec->shape.rank, ZDIST_MAX_RANK);
    size_t bytes;
    if (zdist_tensor_byte_size(spec->dtype, &spec->shape, &bytes) < 0)
        return zdist_error_set(err, -EINVAL, "variable '%s': shape is too large", spec->name);
    int64_t total = spec->shape.rank > 0 ? spec->shape.dims[0] : 1;
    int64_t width = 1;
    for (int i = 1; i < spec->shape.rank; i++)
        width *= spec->shape.dims[i]; /* no overflow: the whole shape fits */
    if (spec->shard_index < 0)
        return zdist_error_set(err, -EINVAL, "variable '%s': shard index %d is negative",
                               spec->name, (int) spec->shard_index);
    if (spec->row_offset < 0 || spec->rows < 0 || spec->row_offset > total
        || spec->rows > total - spec->row_offset)
        return zdist_error_set(err, -EINVAL, "variable '%s' part %d: rows [%" PRId64 ", %" PRId64
                               ") are outside its %" PRId64 " rows", spec->name,
                               (int) spec->shard_index, spec->row_offset,
                               spec->row_offset + spec->rows, total);
    int rc = zdist_init_validate(&spec->init, spec->dtype, err);
    if (rc < 0) {
        zdist_error_prefix(err, "variable '%s'", spec->name);
        return rc;
    }
    *ret_width = width;
    *ret_value_bytes = (size_t) spec->rows * (size_t) width * zdist_dtype_size(spec->dtype);
    return 0;
}

static psd_shard_t *
s_shard_new(const psd_shard_spec_t *spec, int64_t width, size_t value_bytes,
            const zdist_optim_config_t *optim, int *ret_rc, zdist_error_t *err)
{
    *ret_rc = -ENOMEM;
    psd_shard_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->spec = *spec;
    snprintf(self->name, sizeof self->name, "%s", spec->name);
    self->spec.name = self->name;
    self->spec.init_name = NULL; /* the caller's, used by the fill below only */
    self->width = width;
    self->esize = zdist_dtype_size(spec->dtype);
    self->row_bytes = (size_t) width * self->esize;
    self->value_bytes = value_bytes;
    self->optim = *optim;
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* glibc favours readers by default; a steady stream of pulls would starve pushes. */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(&self->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0)
        goto fail;
    self->lock_ready = true;
    self->values = psd_buffer_alloc(value_bytes);
    if (!self->values || !(self->pool = s_pool_new(value_bytes)) || !(self->vals = s_values_wrap(self->pool, self->values)))
        goto fail;
    if ((*ret_rc = zdist_init_fill(&spec->init, spec->seed, spec->init_name ? spec->init_name : spec->name, spec->dtype, &spec->shape,
                                 spec->row_offset, spec->rows, self->values, value_bytes, err)) < 0)
        goto fail;
    return self;
fail:
    s_shard_destroy(&self);
    return NULL;
}

const psd_shard_spec_t *
psd_shard_spec(const psd_shard_t *self)
{
    return &self->spec;
}

int64_t
psd_shard_row_width(const psd_shard_t *self)
{
    return self->width;
}

size_t
psd_shard_row_bytes(const psd_shard_t *self)
{
    return self->row_bytes;
}

size_t
psd_shard_value_bytes(const psd_shard_t *self)
{
    return self->value_bytes;
}

int64_t
psd_shard_step(psd_shard_t *self)
{
    pthread_rwlock_rdlock(&self->lock);
    int64_t step = self->step;
    pthread_rwlock_unlock(&self->lock);
    return step;
}

void
psd_shard_get_optimizer(psd_shard_t *self, zdist_optim_config_t *ret_cfg)
{
    pthread_rwlock_rdlock(&self->lock);
    *ret_cfg = self->optim;
    pthread_rwlock_unlock(&self->lock);
}

int
psd_shard_set_optimizer(psd_shard_t *self, const zdist_optim_config_t *cfg, zdist_error_t *err)
{
    int rc = zdist_optim_config_validate(cfg, err);
    if (rc < 0)
        return rc;
    pthread_rwlock_wrlock(&self->lock);
    if (cfg->kind != self->optim.kind) {
        s_free_slots(self);
        self->step = 0;
    }
    self->optim = *cfg;
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

static bool
s_is_float(zdist_dtype_t dtype)
{
    return dtype == ZDIST_DTYPE_FLOAT32 || dtype == ZDIST_DTYPE_FLOAT64;
}

/* Resolves a dense row range (PSD_WHOLE_SHARD allowed) to a local row. */
static int
s_range(const psd_shard_t *self, int64_t row_start, int64_t nrows, int64_t *ret_local,
        int64_t *ret_n, zdist_error_t *err)
{
    const psd_shard_spec_t *s = &self->spec;
    if (nrows == PSD_WHOLE_SHARD) {
        *ret_local = 0;
        *ret_n = s->rows;
        return 0;
    }
    if (nrows < 0 || row_start < s->row_offset || row_start > s->row_offset + s->rows
        || nrows > s->row_offset + s->rows - row_start)
        return zdist_error_set(err, -EINVAL, "rows [%" PRId64 ", %" PRId64 ") are outside shard "
                               "'%s' part %d, which holds rows [%" PRId64 ", %" PRId64 ")",
                               row_start, row_start + (nrows > 0 ? nrows : 0), s->name,
                               (int) s->shard_index, s->row_offset, s->row_offset + s->rows);
    *ret_local = row_start - s->row_offset;
    *ret_n = nrows;
    return 0;
}

static int
s_check_ids(const psd_shard_t *self, const int64_t *ids, size_t nids, zdist_error_t *err)
{
    const psd_shard_spec_t *s = &self->spec;
    int64_t lo = s->row_offset, hi = s->row_offset + s->rows;
    if (nids > 0 && !ids)
        return zdist_error_set(err, -EINVAL, "%zu ids announced but none given", nids);
    for (size_t i = 0; i < nids; i++)
        if (ids[i] < lo || ids[i] >= hi)
            return zdist_error_set(err, -EINVAL, "id %" PRId64 " (at position %zu) is outside "
                                   "shard '%s' part %d, which holds rows [%" PRId64 ", %" PRId64 ")",
                                   ids[i], i, s->name, (int) s->shard_index, lo, hi);
    return 0;
}

/* Bytes of n rows, or -EINVAL when it cannot be. */
static int
s_rows_bytes(const psd_shard_t *self, uint64_t n, size_t *ret)
{
    size_t bytes;
    if (n > SIZE_MAX || __builtin_mul_overflow((size_t) n, self->row_bytes, &bytes))
        return -EINVAL;
    *ret = bytes;
    return 0;
}

static int
s_check_buf(const psd_shard_t *self, uint64_t nrows, size_t buf_bytes, zdist_error_t *err)
{
    size_t need = 0;
    if (s_rows_bytes(self, nrows, &need) < 0 || buf_bytes < need)
        return zdist_error_set(err, -EINVAL, "buffer of %zu bytes is too small for %" PRIu64
                               " rows of %zu bytes", buf_bytes, nrows, self->row_bytes);
    return 0;
}

int
psd_shard_read(psd_shard_t *self, int64_t row_start, int64_t nrows, void *buf, size_t buf_bytes,
               zdist_error_t *err)
{
    int64_t local = 0, n = 0;
    int rc = s_range(self, row_start, nrows, &local, &n, err);
    if (rc < 0 || (rc = s_check_buf(self, (uint64_t) n, buf_bytes, err)) < 0)
        return rc;
    if (n == 0)
        return 0;
    pthread_rwlock_rdlock(&self->lock);
    memcpy(buf, (char *) self->values + (size_t) local * self->row_bytes,
           (size_t) n * self->row_bytes);
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

int
psd_shard_pin(psd_shard_t *self, int64_t row_start, int64_t nrows, void **ret_data, size_t *ret_bytes,
              void **ret_pin, zdist_error_t *err)
{
    int64_t local = 0, n = 0;
    int rc = s_range(self, row_start, nrows, &local, &n, err);
    if (rc < 0)
        return rc;
    pthread_rwlock_rdlock(&self->lock);
    atomic_fetch_add_explicit(&self->vals->refs, 1, memory_order_relaxed);
    *ret_pin = self->vals;
    *ret_data = (char *) self->values + (size_t) local * self->row_bytes;
    *ret_bytes = (size_t) n * self->row_bytes;
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

void
psd_shard_unpin(void *data, void *pin)
{
    (void) data;
    s_values_release(pin);
}

/* True while a reply holds the values; under the write lock (no new pin
   comes meanwhile, only releases). */
static bool
s_pinned(psd_shard_t *self)
{
    return atomic_load_explicit(&self->vals->refs, memory_order_acquire) > 1;
}

/* Another values buffer for the shard (contents undefined): the spare, else
   new memory. NULL when out of memory. Under the write lock. */
static s_values_t *
s_other_values(psd_shard_t *self)
{
    s_values_t *v = atomic_exchange_explicit(&self->pool->spare, NULL, memory_order_acq_rel);
    if (v) {
        atomic_store_explicit(&v->refs, 1, memory_order_relaxed);
        v->pool = self->pool;
        atomic_fetch_add_explicit(&self->pool->refs, 1, memory_order_relaxed);
        return v;
    }
    void *data = psd_buffer_alloc(self->value_bytes);
    if (data && !(v = s_values_wrap(self->pool, data)))
        free(data);
    return v;
}

int
psd_shard_read_ids(psd_shard_t *self, const int64_t *ids, size_t nids, void *buf,
                   size_t buf_bytes, zdist_error_t *err)
{
    int rc = s_check_ids(self, ids, nids, err);
    if (rc < 0 || (rc = s_check_buf(self, nids, buf_bytes, err)) < 0)
        return rc;
    pthread_rwlock_rdlock(&self->lock);
    for (size_t i = 0; i < nids; i++)
        memcpy((char *) buf + i * self->row_bytes,
               (char *) self->values + (size_t) (ids[i] - self->spec.row_offset) * self->row_bytes,
               self->row_bytes);
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

int
psd_shard_read_slot(psd_shard_t *self, int slot, int64_t row_start, int64_t nrows, void *buf,
                    size_t buf_bytes, zdist_error_t *err)
{
    int64_t local = 0, n = 0;
    int rc = s_range(self, row_start, nrows, &local, &n, err);
    if (rc < 0 || (rc = s_check_buf(self, (uint64_t) n, buf_bytes, err)) < 0)
        return rc;
    pthread_rwlock_rdlock(&self->lock);
    int count = zdist_optim_num_slots(self->optim.kind);
    if (slot < 0 || slot >= count || !s_is_float(self->spec.dtype)) {
        pthread_rwlock_unlock(&self->lock);
        return zdist_error_set(err, -EINVAL, "shard '%s' has no optimizer slot %d (%s has %d)",
                               self->name, slot, zdist_optim_kind_name(self->optim.kind), count);
    }
    size_t off = (size_t) local * self->row_bytes, len = (size_t) n * self->row_bytes;
    if (self->nslots)
        memcpy(buf, (char *) self->slots[slot] + off, len);
    else
        zdist_optim_slot_fill(&self->optim, slot, self->spec.dtype, buf, len / self->esize);
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

/* ---- exactly-once bookkeeping (under the write lock) ---- */

/* Finds or makes the client's entry; NULL only when out of memory. */
static s_client_t *
s_client(psd_shard_t *self, uint64_t id)
{
    self->tick++;
    for (size_t i = 0; i < self->nclients; i++)
        if (self->clients[i].id == id) {
            self->clients[i].last_use = self->tick;
            return &self->clients[i];
        }
    s_client_t *c;
    if (self->nclients == PSD_DEDUP_MAX_CLIENTS) {
        c = &self->clients[0]; /* evict the least recently used */
        for (size_t i = 1; i < self->nclients; i++)
            if (self->clients[i].last_use < c->last_use)
                c = &self->clients[i];
    } else {
        if (self->nclients == self->clients_cap) {
            size_t cap = self->clients_cap ? self->clients_cap * 2 : 8;
            s_client_t *p = realloc(self->clients, cap * sizeof *p);
            if (!p)
                return NULL;
            self->clients = p;
            self->clients_cap = cap;
        }
        c = &self->clients[self->nclients++];
    }
    *c = (s_client_t){.id = id, .last_use = self->tick};
    return c;
}

static bool
s_client_seen(const s_client_t *c, uint64_t seq)
{
    if (!c->has_seq || seq > c->highest)
        return false;
    uint64_t d = c->highest - seq;
    if (d == 0 || d > PSD_DEDUP_WINDOW)
        return true; /* beyond the window: assume it was applied */
    return (c->window >> (d - 1)) & 1;
}

static void
s_client_record(s_client_t *c, uint64_t seq)
{
    if (!c->has_seq) {
        c->has_seq = true;
        c->highest = seq;
        c->window = 0;
    } else if (seq > c->highest) {
        uint64_t shift = seq - c->highest;
        c->window = shift >= 64 ? 0 : c->window << shift;
        if (shift <= 64)
            c->window |= 1ULL << (shift - 1); /* the old highest */
        c->highest = seq;
    } else {
        c->window |= 1ULL << (c->highest - seq - 1);
    }
}

/* ---- element kernels ---- */

/* dst := X + src (or X - src) elementwise, X being dst itself or another
   buffer (values a reply still holds). */
#define S_ADDSUB(T, U, X)                                               \
    do {                                                                \
        T *d = dst;                                                     \
        const T *x = X, *s = src;                                       \
        if (sub)                                                        \
            for (size_t i = 0; i < n; i++)                              \
                d[i] = (T) ((U) x[i] - (U) s[i]);                       \
        else                                                            \
            for (size_t i = 0; i < n; i++)                              \
                d[i] = (T) ((U) x[i] + (U) s[i]);                       \
    } while (0)

/* Integer arithmetic wraps as TF's does (computed unsigned: no UB). */
#define S_ADDSUB_DTYPES(X)                                              \
    do {                                                                \
        switch (dtype) {                                                \
        case ZDIST_DTYPE_FLOAT32:                                       \
            S_ADDSUB(float, float, X);                                  \
            break;                                                      \
        case ZDIST_DTYPE_FLOAT64:                                       \
            S_ADDSUB(double, double, X);                                \
            break;                                                      \
        case ZDIST_DTYPE_INT32:                                         \
            S_ADDSUB(int32_t, uint32_t, X);                             \
            break;                                                      \
        case ZDIST_DTYPE_INT64:                                         \
            S_ADDSUB(int64_t, uint64_t, X);                             \
            break;                                                      \
        case ZDIST_DTYPE_UINT8:                                         \
            S_ADDSUB(uint8_t, uint8_t, X);                              \
            break;                                                      \
        default:                                                        \
            break;                                                      \
        }                                                               \
    } while (0)

static void
s_addsub(zdist_dtype_t dtype, void *restrict dst, const void *restrict src, size_t n, bool sub)
{
    S_ADDSUB_DTYPES(dst);
}

/* In a separate function: restrict keeps dst apart from in. */
static void
s_addsub_to(zdist_dtype_t dtype, void *restrict dst, const void *restrict in, const void *restrict src,
            size_t n, bool sub)
{
    S_ADDSUB_DTYPES(in);
}

static const char *
s_op_name(psd_op_t op)
{
    switch (op) {
    case PSD_OP_ASSIGN:
        return "assign";
    case PSD_OP_ASSIGN_ADD:
        return "assign_add";
    case PSD_OP_ASSIGN_SUB:
        return "assign_sub";
    case PSD_OP_SCATTER_ADD:
        return "scatter_add";
    case PSD_OP_SCATTER_UPDATE:
        return "scatter_update";
    case PSD_OP_APPLY_DENSE:
        return "apply (dense)";
    case PSD_OP_APPLY_SPARSE:
        return "apply (sparse)";
    }
    return "unknown";
}

/* Allocates slots at their initial values; under the write lock. */
static int
s_ensure_slots(psd_shard_t *self)
{
    int count = zdist_optim_num_slots(self->optim.kind);
    if (self->nslots == count)
        return 0;
    void *fresh[ZDIST_OPTIM_MAX_SLOTS] = {0};
    size_t n = self->value_bytes / self->esize;
    for (int i = 0; i < count; i++) {
        fresh[i] = psd_buffer_alloc(self->value_bytes);
        if (!fresh[i]) {
            for (int k = 0; k < i; k++)
                free(fresh[k]);
            return -ENOMEM;
        }
        zdist_optim_slot_fill(&self->optim, i, self->spec.dtype, fresh[i], n);
    }
    s_free_slots(self);
    for (int i = 0; i < count; i++)
        self->slots[i] = fresh[i];
    self->nslots = count;
    return 0;
}

/* Everything psd_shard_write checks before it takes the lock: the local
   first row, the rows and the bytes the write covers. */
static int
s_check_write(psd_shard_t *self, const psd_write_t *w, int64_t *ret_local, size_t *ret_need,
              zdist_error_t *err)
{
    const psd_shard_spec_t *s = &self->spec;
    bool dense = w->op == PSD_OP_ASSIGN || w->op == PSD_OP_ASSIGN_ADD
                 || w->op == PSD_OP_ASSIGN_SUB || w->op == PSD_OP_APPLY_DENSE;
    bool by_id = w->op == PSD_OP_SCATTER_ADD || w->op == PSD_OP_SCATTER_UPDATE
                 || w->op == PSD_OP_APPLY_SPARSE;
    if (!dense && !by_id)
        return zdist_error_set(err, -EINVAL, "unknown write operation %d", (int) w->op);
    const char *op = s_op_name(w->op);
    if (w->dtype != s->dtype)
        return zdist_error_set(err, -EINVAL, "%s on '%s' part %d: expected dtype %s, got %s", op,
                               s->name, (int) s->shard_index, zdist_dtype_name(s->dtype),
                               zdist_dtype_name(w->dtype));
    bool apply = w->op == PSD_OP_APPLY_DENSE || w->op == PSD_OP_APPLY_SPARSE;
    if (apply && !s_is_float(s->dtype))
        return zdist_error_set(err, -EINVAL, "%s on '%s': optimizers need a float32 or float64 "
                               "variable, not %s", op, s->name, zdist_dtype_name(s->dtype));
    int64_t local = 0, n = 0;
    uint64_t rows;
    int rc;
    if (dense) {
        if ((rc = s_range(self, w->row_start, w->nrows, &local, &n, err)) < 0) {
            zdist_error_prefix(err, "%s", op);
            return rc;
        }
        rows = (uint64_t) n;
    } else {
        if ((rc = s_check_ids(self, w->ids, w->nids, err)) < 0) {
            zdist_error_prefix(err, "%s", op);
            return rc;
        }
        rows = w->nids;
    }
    size_t need = 0;
    if (s_rows_bytes(self, rows, &need) < 0 || need != w->nbytes || (need > 0 && !w->data)) {
        char shape[160];
        zdist_shape_t rs = s->shape;
        if (rs.rank == 0)
            rs.rank = 1;
        rs.dims[0] = (int64_t) rows;
        zdist_shape_format(&rs, shape, sizeof shape);
        return zdist_error_set(err, -EINVAL, "%s on '%s' part %d: expected %s %s = %zu bytes, "
                               "got %zu bytes", op, s->name, (int) s->shard_index, shape,
                               zdist_dtype_name(s->dtype), need, w->data ? w->nbytes : 0);
    }
    *ret_local = local;
    *ret_need = need;
    return 0;
}

int
psd_shard_check_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err)
{
    int64_t local;
    size_t need;
    return s_check_write(self, w, &local, &need, err);
}

int
psd_shard_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err)
{
    const psd_shard_spec_t *s = &self->spec;
    int64_t local = 0;
    size_t need = 0;
    int rc = s_check_write(self, w, &local, &need, err);
    if (rc < 0)
        return rc;

    pthread_rwlock_wrlock(&self->lock);
    s_values_t *held = NULL; /* the values a reply holds, when the write moved away from them */
    s_client_t *client = NULL;
    bool by_step = w->job_step != 0;
    if (by_step) {
        /* A step's identity decides, whoever sends it: a closure re-run on
           another worker sends the same steps again. Room first, so that
           an applied write is always recorded. */
        if (psd_ledger_seen(&self->ledger, w->job_step, w->step_write)) {
            rc = PSD_DUPLICATE;
            goto out;
        }
        if ((rc = psd_ledger_reserve(&self->ledger, w->job_step, w->step_write)) < 0)
            goto out;
    } else if (w->client_id != 0) {
        client = s_client(self, w->client_id);
        if (!client) {
            rc = -ENOMEM;
            goto out;
        }
        if (s_client_seen(client, w->sequence)) {
            rc = PSD_DUPLICATE;
            goto out;
        }
    }
    bool apply = w->op == PSD_OP_APPLY_DENSE || w->op == PSD_OP_APPLY_SPARSE;
    if (apply && (rc = s_ensure_slots(self)) < 0)
        goto out;
    /* A buffer a reply still holds is left to it and the write goes to
       another. A dense write of the whole shard computes the new values
       there from the held ones in one pass; any other copies them first.
       The shard's reference to the held buffer goes once the write is done:
       a reply released meanwhile must not free what it reads. */
    const char *old = self->values; /* what the write reads */
    if (s_pinned(self)) {
        s_values_t *v = s_other_values(self);
        if (!v) {
            rc = -ENOMEM;
            goto out;
        }
        bool dense = w->op == PSD_OP_ASSIGN || w->op == PSD_OP_ASSIGN_ADD || w->op == PSD_OP_ASSIGN_SUB
                     || w->op == PSD_OP_APPLY_DENSE;
        if (!(dense && local == 0 && need == self->value_bytes)) {
            memcpy(v->data, self->values, self->value_bytes);
            old = v->data;
        }
        held = self->vals;
        self->vals = v;
        self->values = v->data;
    }
    char *base = (char *) self->values + (size_t) local * self->row_bytes;
    const char *from = old + (size_t) local * self->row_bytes;
    size_t nelem = need / self->esize;
    switch (w->op) {
    case PSD_OP_ASSIGN:
        if (need)
            memcpy(base, w->data, need);
        break;
    case PSD_OP_ASSIGN_ADD:
    case PSD_OP_ASSIGN_SUB:
        if (from == base)
            s_addsub(s->dtype, base, w->data, nelem, w->op == PSD_OP_ASSIGN_SUB);
        else
            s_addsub_to(s->dtype, base, from, w->data, nelem, w->op == PSD_OP_ASSIGN_SUB);
        break;
    case PSD_OP_SCATTER_ADD:
    case PSD_OP_SCATTER_UPDATE:
        for (size_t i = 0; i < w->nids; i++) {
            char *row = (char *) self->values + (size_t) (w->ids[i] - s->row_offset) * self->row_bytes;
            const char *src = (const char *) w->data + i * self->row_bytes;
            if (w->op == PSD_OP_SCATTER_UPDATE)
                memcpy(row, src, self->row_bytes);
            else
                s_addsub(s->dtype, row, src, (size_t) self->width, false);
        }
        break;
    case PSD_OP_APPLY_DENSE:
    case PSD_OP_APPLY_SPARSE: {
        int64_t step = self->step + 1;
        if (w->op == PSD_OP_APPLY_DENSE) {
            void *row_slots[ZDIST_OPTIM_MAX_SLOTS] = {0};
            for (int i = 0; i < self->nslots; i++)
                row_slots[i] = (char *) self->slots[i] + (size_t) local * self->row_bytes;
            rc = zdist_optim_apply_dense_to(&self->optim, s->dtype, step, base, from, row_slots, w->data,
                                            nelem);
        } else {
            rc = zdist_optim_apply_sparse(&self->optim, s->dtype, step, self->values, self->slots,
                                        s->row_offset, s->rows, self->width, w->ids, w->nids,
                                        w->data, &self->scratch);
        }
        if (rc < 0)
            goto out;
        if (!w->more_parts) /* a push in parts advances the step once, with its last */
            self->step = step;
        break;
    }
    }
    if (by_step)
        psd_ledger_record(&self->ledger, w->job_step, w->step_write); /* reserved: cannot fail */
    else if (client)
        s_client_record(client, w->sequence);
    rc = 0;
out:
    pthread_rwlock_unlock(&self->lock);
    s_values_release(held);
    if (rc == -ENOMEM)
        zdist_error_set(err, rc, "%s on '%s': out of memory", s_op_name(w->op), s->name);
    return rc;
}

void
psd_shard_view_begin(psd_shard_t *self, psd_shard_view_t *ret_view)
{
    pthread_rwlock_rdlock(&self->lock);
    psd_shard_view_t v = {
        .values = self->values,
        .value_bytes = self->value_bytes,
        .optim = self->optim,
        .nslots = self->nslots,
        .step = self->step,
        .ndedup = self->nclients,
        .ledger = &self->ledger,
    };
    for (int i = 0; i < self->nslots; i++)
        v.slots[i] = self->slots[i];
    *ret_view = v;
}

void
psd_shard_view_end(psd_shard_t *self)
{
    pthread_rwlock_unlock(&self->lock);
}

void
psd_shard_view_dedup(psd_shard_t *self, size_t i, psd_dedup_t *ret)
{
    const s_client_t *c = &self->clients[i];
    *ret = (psd_dedup_t){.client_id = c->id, .highest = c->highest, .window = c->window};
}

struct _psd_dedup_table_t {
    s_client_t *clients;
    size_t n;
    psd_ledger_t ledger;
};

bool
psd_dedup_seen(const psd_dedup_t *d, uint64_t seq)
{
    s_client_t c = {.id = d->client_id, .highest = d->highest, .window = d->window, .has_seq = true};
    return s_client_seen(&c, seq);
}

psd_dedup_table_t *
psd_dedup_table_new(const psd_dedup_t *list, size_t n)
{
    psd_dedup_table_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (n > PSD_DEDUP_MAX_CLIENTS)
        n = PSD_DEDUP_MAX_CLIENTS;
    if (n && !(t->clients = calloc(n, sizeof *t->clients))) {
        free(t);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (list[i].client_id != 0)
            t->clients[t->n++] = (s_client_t){.id = list[i].client_id,
                                              .highest = list[i].highest,
                                              .window = list[i].window,
                                              .has_seq = true};
    return t;
}

void
psd_dedup_table_destroy(psd_dedup_table_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->clients);
    psd_ledger_clear(&(*self_p)->ledger);
    free(*self_p);
    *self_p = NULL;
}

void
psd_dedup_table_set_ledger(psd_dedup_table_t *self, psd_ledger_t *ledger)
{
    psd_ledger_clear(&self->ledger);
    self->ledger = *ledger;
    *ledger = (psd_ledger_t){0};
}

void
psd_shard_replace(psd_shard_t *self, void **values_p, void **slots_p, int nslots, zdist_optim_kind_t kind,
                  int64_t step, psd_dedup_table_t **dedup_p)
{
    psd_dedup_table_t *table = dedup_p ? *dedup_p : NULL;
    if (dedup_p)
        *dedup_p = NULL;
    s_client_t *clients = table ? table->clients : NULL;
    size_t n = table ? table->n : 0;
    psd_ledger_t ledger = table ? table->ledger : (psd_ledger_t){0};
    free(table);
    pthread_rwlock_wrlock(&self->lock);
    psd_ledger_clear(&self->ledger);
    self->ledger = ledger;
    free(self->clients);
    self->clients = clients;
    self->nclients = n;
    self->clients_cap = clients ? n : 0;
    for (size_t i = 0; i < n; i++)
        clients[i].last_use = ++self->tick;
    /* The new values get a count of their own; the old ones go when the
       last reply holding them is sent. Without memory for the count, wait
       for those replies and reuse it (replace cannot fail). */
    s_values_t *old = self->vals, *v = s_values_wrap(self->pool, *values_p);
    if (!v) {
        while (atomic_load_explicit(&old->refs, memory_order_acquire) > 1)
            sched_yield();
        free(old->data);
        old->data = *values_p;
        v = old;
        old = NULL;
    }
    self->vals = v;
    self->values = v->data;
    *values_p = NULL;
    s_free_slots(self);
    bool install = nslots > 0 && kind == self->optim.kind
                   && nslots == zdist_optim_num_slots(self->optim.kind);
    for (int i = 0; i < nslots; i++) {
        if (install)
            self->slots[i] = slots_p[i];
        else
            free(slots_p[i]);
        slots_p[i] = NULL;
    }
    self->nslots = install ? nslots : 0;
    self->step = kind == self->optim.kind ? step : 0;
    pthread_rwlock_unlock(&self->lock);
    s_values_release(old);
}

/* ---------------------------------------------------------------- store */

psd_store_t *
psd_store_new(void)
{
    psd_store_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    if (pthread_rwlock_init(&self->lock, NULL) != 0) {
        free(self);
        return NULL;
    }
    zdist_optim_config_default(&self->optim, ZDIST_OPTIM_SGD);
    return self;
}

void
psd_store_destroy(psd_store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    psd_store_t *self = *self_p;
    for (size_t i = 0; i < self->nshards; i++)
        s_shard_destroy(&self->shards[i]);
    free(self->shards);
    for (size_t i = 0; i < self->njobs; i++)
        free(self->jobs[i].job);
    free(self->jobs);
    pthread_rwlock_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

int
psd_store_set_optimizer(psd_store_t *self, const zdist_optim_config_t *cfg, zdist_error_t *err)
{
    int rc = zdist_optim_config_validate(cfg, err);
    if (rc < 0)
        return rc;
    pthread_rwlock_wrlock(&self->lock);
    self->optim = *cfg;
    for (size_t i = 0; i < self->nshards; i++)
        psd_shard_set_optimizer(self->shards[i], cfg, NULL);
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

bool
psd_name_in_job(const char *name, const char *job)
{
    if (!job || !*job)
        return true;
    size_t n = strlen(job);
    return strncmp(name, job, n) == 0 && name[n] == '/';
}

bool
psd_shard_in_job(const psd_shard_t *self, const char *job)
{
    return psd_name_in_job(self->name, job);
}

/* The optimizer a shard named `name` takes: its job's, else the default.
   Under the store lock. */
static const zdist_optim_config_t *
s_optim_for(const psd_store_t *self, const char *name)
{
    for (size_t i = 0; i < self->njobs; i++)
        if (psd_name_in_job(name, self->jobs[i].job))
            return &self->jobs[i].optim;
    return &self->optim;
}

int
psd_store_set_optimizer_job(psd_store_t *self, const char *job, const zdist_optim_config_t *cfg,
                            zdist_error_t *err)
{
    if (!job || !*job)
        return psd_store_set_optimizer(self, cfg, err);
    int rc = zdist_optim_config_validate(cfg, err);
    if (rc < 0)
        return rc;
    pthread_rwlock_wrlock(&self->lock);
    s_job_optim_t *e = NULL;
    for (size_t i = 0; i < self->njobs && !e; i++)
        if (strcmp(self->jobs[i].job, job) == 0)
            e = &self->jobs[i];
    if (!e && self->njobs >= PSD_MAX_JOBS)
        rc = zdist_error_set(err, -ENOSPC, "job '%s': this psd already holds the optimizers of %d jobs", job,
                             PSD_MAX_JOBS);
    if (!e && rc == 0) {
        s_job_optim_t *n = realloc(self->jobs, (self->njobs + 1) * sizeof *n);
        char *copy = strdup(job);
        if (!n || !copy) {
            free(copy);
            if (n)
                self->jobs = n;
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
        } else {
            self->jobs = n;
            e = &self->jobs[self->njobs++];
            e->job = copy;
        }
    }
    if (e) {
        e->optim = *cfg;
        for (size_t i = 0; i < self->nshards; i++)
            if (psd_shard_in_job(self->shards[i], job))
                psd_shard_set_optimizer(self->shards[i], cfg, NULL);
    }
    pthread_rwlock_unlock(&self->lock);
    return rc;
}

int
psd_store_drop_job(psd_store_t *self, const char *job, uint64_t *ret_bytes)
{
    if (!job || !*job)
        return -EINVAL;
    size_t kept = 0, dropped = 0;
    uint64_t bytes = 0;
    pthread_rwlock_wrlock(&self->lock);
    for (size_t i = 0; i < self->nshards; i++) {
        psd_shard_t *s = self->shards[i];
        if (!psd_shard_in_job(s, job)) {
            self->shards[kept++] = s;
            continue;
        }
        /* Its write lock: a reader on another thread (the store's API
           allows one) finishes before the shard goes. */
        pthread_rwlock_wrlock(&s->lock);
        bytes += s->value_bytes + (uint64_t) s->nslots * s->value_bytes;
        pthread_rwlock_unlock(&s->lock);
        s_shard_destroy(&s);
        dropped++;
    }
    self->nshards = kept; /* still sorted: the kept ones keep their order */
    for (size_t i = 0; i < self->njobs; i++)
        if (strcmp(self->jobs[i].job, job) == 0) {
            free(self->jobs[i].job);
            self->jobs[i] = self->jobs[--self->njobs];
            break;
        }
    pthread_rwlock_unlock(&self->lock);
    if (ret_bytes)
        *ret_bytes = bytes;
    return (int) (dropped > INT32_MAX ? INT32_MAX : dropped);
}

void
psd_store_get_optimizer(psd_store_t *self, zdist_optim_config_t *ret_cfg)
{
    pthread_rwlock_rdlock(&self->lock);
    *ret_cfg = self->optim;
    pthread_rwlock_unlock(&self->lock);
}

static int
s_key_cmp(const char *name, int32_t index, const psd_shard_t *shard)
{
    int c = strcmp(name, shard->name);
    if (c)
        return c;
    return (index > shard->spec.shard_index) - (index < shard->spec.shard_index);
}

/* First position whose key is >= (name, index); under the store lock. */
static size_t
s_lower_bound(psd_store_t *self, const char *name, int32_t index)
{
    size_t lo = 0, hi = self->nshards;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s_key_cmp(name, index, self->shards[mid]) > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Conflicts of spec with what the store holds; under the store lock.
   Sets *ret_same when the identical shard exists. */
static int
s_conflicts(psd_store_t *self, const psd_shard_spec_t *spec, psd_shard_t **ret_same,
            zdist_error_t *err)
{
    char have[400], want[400];
    *ret_same = NULL;
    for (size_t i = s_lower_bound(self, spec->name, INT32_MIN);
         i < self->nshards && strcmp(self->shards[i]->name, spec->name) == 0; i++) {
        const psd_shard_spec_t *o = &self->shards[i]->spec;
        if (o->shard_index == spec->shard_index) {
            if (s_spec_equal(o, spec)) {
                *ret_same = self->shards[i];
                return 0;
            }
            return zdist_error_set(err, -EEXIST, "variable '%s' part %d already exists as %s; "
                                   "this request asks for %s", spec->name,
                                   (int) spec->shard_index, s_describe(o, have, sizeof have),
                                   s_describe(spec, want, sizeof want));
        }
        if (o->dtype != spec->dtype || !zdist_shape_equal(&o->shape, &spec->shape))
            return zdist_error_set(err, -EEXIST, "variable '%s' already exists with another "
                                   "dtype or shape: %s; this request asks for %s", spec->name,
                                   s_describe(o, have, sizeof have),
                                   s_describe(spec, want, sizeof want));
        if (spec->row_offset < o->row_offset + o->rows && o->row_offset < spec->row_offset + spec->rows)
            return zdist_error_set(err, -EEXIST, "variable '%s': rows of %s overlap existing %s",
                                   spec->name, s_describe(spec, want, sizeof want),
                                   s_describe(o, have, sizeof have));
    }
    return 0;
}

int
psd_store_create(psd_store_t *self, const psd_shard_spec_t *spec, psd_shard_t **ret_shard,
                 zdist_error_t *err)
{
    int64_t width = 0;
    size_t value_bytes = 0;
    int rc = s_spec_validate(spec, &width, &value_bytes, err);
    if (rc < 0)
        return rc;
    psd_shard_t *same;
    pthread_rwlock_rdlock(&self->lock);
    rc = s_conflicts(self, spec, &same, err);
    zdist_optim_config_t optim = *s_optim_for(self, spec->name);
    pthread_rwlock_unlock(&self->lock);
    if (rc < 0)
        return rc;
    if (same) {
        if (ret_shard)
            *ret_shard = same;
        return 0;
    }
    /* Initial values are computed outside the store lock: big shards take time. */
    psd_shard_t *shard = s_shard_new(spec, width, value_bytes, &optim, &rc, err);
    if (!shard)
        return rc != -ENOMEM ? rc
                             : zdist_error_set(err, -ENOMEM, "variable '%s': out of memory for "
                                               "%zu bytes", spec->name, value_bytes);
    pthread_rwlock_wrlock(&self->lock);
    rc = s_conflicts(self, spec, &same, err); /* another thread may have won */
    if (rc == 0 && !same && self->nshards == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 16;
        psd_shard_t **p = realloc(self->shards, cap * sizeof *p);
        if (!p)
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
        else {
            self->shards = p;
            self->cap = cap;
        }
    }
    if (rc == 0 && !same) {
        shard->optim = *s_optim_for(self, spec->name);
        size_t pos = s_lower_bound(self, spec->name, spec->shard_index);
        memmove(&self->shards[pos + 1], &self->shards[pos],
                (self->nshards - pos) * sizeof self->shards[0]);
        self->shards[pos] = shard;
        self->nshards++;
        same = shard;
        shard = NULL;
    }
    pthread_rwlock_unlock(&self->lock);
    s_shard_destroy(&shard);
    if (rc == 0 && ret_shard)
        *ret_shard = same;
    return rc;
}

psd_shard_t *
psd_store_find(psd_store_t *self, const char *name, int32_t shard_index)
{
    psd_shard_t *found = NULL;
    pthread_rwlock_rdlock(&self->lock);
    size_t i = s_lower_bound(self, name, shard_index);
    if (i < self->nshards && s_key_cmp(name, shard_index, self->shards[i]) == 0)
        found = self->shards[i];
    pthread_rwlock_unlock(&self->lock);
    return found;
}

/* Under the store lock. */
static psd_shard_t *
s_find_row(psd_store_t *self, const char *name, int64_t row, bool *ret_known)
{
    *ret_known = false;
    for (size_t i = s_lower_bound(self, name, INT32_MIN);
         i < self->nshards && strcmp(self->shards[i]->name, name) == 0; i++) {
        const psd_shard_spec_t *s = &self->shards[i]->spec;
        *ret_known = true;
        if (row >= s->row_offset && row < s->row_offset + s->rows)
            return self->shards[i];
    }
    return NULL;
}

psd_shard_t *
psd_store_first(psd_store_t *self, const char *name)
{
    pthread_rwlock_rdlock(&self->lock);
    size_t i = s_lower_bound(self, name, INT32_MIN);
    psd_shard_t *found = i < self->nshards && strcmp(self->shards[i]->name, name) == 0 ? self->shards[i] : NULL;
    pthread_rwlock_unlock(&self->lock);
    return found;
}

psd_shard_t *
psd_store_find_row(psd_store_t *self, const char *name, int64_t row)
{
    bool known;
    pthread_rwlock_rdlock(&self->lock);
    psd_shard_t *found = s_find_row(self, name, row, &known);
    pthread_rwlock_unlock(&self->lock);
    return found;
}

size_t
psd_store_list(psd_store_t *self, psd_shard_t **out, size_t max)
{
    pthread_rwlock_rdlock(&self->lock);
    size_t n = self->nshards;
    if (out) {
        n = n < max ? n : max;
        for (size_t i = 0; i < n; i++)
            out[i] = self->shards[i];
    }
    pthread_rwlock_unlock(&self->lock);
    return n;
}

/* True when shard s (may be NULL) holds global row `row`. */
static bool
s_holds(const psd_shard_t *s, int64_t row)
{
    return s && row >= s->spec.row_offset && row - s->spec.row_offset < s->spec.rows;
}

int
psd_store_read_ids(psd_store_t *self, const char *name, const int64_t *ids, size_t nids,
                   void *buf, size_t buf_bytes, zdist_error_t *err)
{
    int rc = 0;
    pthread_rwlock_rdlock(&self->lock);
    bool known = false;
    psd_shard_t *first = NULL;
    size_t row_bytes = 0;
    /* validate every id before copying anything */
    for (size_t i = s_lower_bound(self, name, INT32_MIN);
         i < self->nshards && strcmp(self->shards[i]->name, name) == 0; i++) {
        first = self->shards[i];
        row_bytes = first->row_bytes;
        known = true;
        break;
    }
    if (!known) {
        rc = zdist_error_set(err, -ENOENT, "variable '%s' has no shard on this ps", name);
        goto out;
    }
    if (nids > 0 && !ids) {
        rc = zdist_error_set(err, -EINVAL, "%zu ids announced but none given", nids);
        goto out;
    }
    if ((rc = s_check_buf(first, nids, buf_bytes, err)) < 0)
        goto out;
    /* Ids usually come in runs within one shard: look a shard up only when
       an id leaves the current one, and hold its read lock across the run. */
    psd_shard_t *cur = NULL;
    for (size_t i = 0; i < nids; i++) {
        if (!s_holds(cur, ids[i]) && !(cur = s_find_row(self, name, ids[i], &known))) {
            rc = zdist_error_set(err, -EINVAL, "id %" PRId64 " (at position %zu) of variable '%s' "
                                 "is not held by any shard on this ps", ids[i], i, name);
            goto out;
        }
    }
    cur = NULL;
    for (size_t i = 0; i < nids; i++) {
        if (!s_holds(cur, ids[i])) {
            if (cur)
                pthread_rwlock_unlock(&cur->lock);
            cur = s_find_row(self, name, ids[i], &known);
            pthread_rwlock_rdlock(&cur->lock);
        }
        memcpy((char *) buf + i * row_bytes,
               (char *) cur->values + (size_t) (ids[i] - cur->spec.row_offset) * row_bytes, row_bytes);
    }
    if (cur)
        pthread_rwlock_unlock(&cur->lock);
out:
    pthread_rwlock_unlock(&self->lock);
    return rc;
}

void
psd_store_stats(psd_store_t *self, psd_store_stats_t *ret_stats)
{
    psd_store_stats_t st = {0};
    pthread_rwlock_rdlock(&self->lock);
    st.shards = self->nshards;
    for (size_t i = 0; i < self->nshards; i++) {
        psd_shard_t *s = self->shards[i];
        if (i == 0 || strcmp(self->shards[i - 1]->name, s->name) != 0)
            st.variables++;
        st.value_bytes += s->value_bytes;
        pthread_rwlock_rdlock(&s->lock);
        st.slot_bytes += (uint64_t) s->nslots * s->value_bytes;
        pthread_rwlock_unlock(&s->lock);
        if (atomic_load_explicit(&s->pool->spare, memory_order_acquire))
            st.spare_bytes += s->value_bytes;
    }
    pthread_rwlock_unlock(&self->lock);
    *ret_stats = st;
}
