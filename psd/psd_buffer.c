/* psd_buffer: values buffers counted for zero-copy replies, and each shard's spare. */
#include <stdlib.h>
#include <sys/mman.h>

#include "psd_buffer.h"

/* Big buffers start on a 2 MiB boundary and are marked for transparent
   huge pages before their first touch: a row gather over a big table is
   otherwise a TLB miss per row (a page walk that costs double on a virtual
   machine). Only the whole 2 MiB pages inside the buffer become huge:
   nothing is rounded up. */
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

#define S_SPARE_MAX_BYTES ((size_t) 64 << 20)
struct _psd_pool_t {
    atomic_uint refs;
    bool keep;                    /* a spare is kept at all */
    _Atomic(psd_values_t *) spare; /* refs 0, no pool reference; or NULL */
};

psd_pool_t *
psd_pool_new(size_t value_bytes)
{
    psd_pool_t *p = malloc(sizeof *p);
    if (p) {
        atomic_init(&p->refs, 1);
        p->keep = value_bytes <= S_SPARE_MAX_BYTES;
        atomic_init(&p->spare, NULL);
    }
    return p;
}

static void
s_values_free(psd_values_t *v)
{
    if (v) {
        free(v->data);
        free(v);
    }
}

void
psd_pool_release(psd_pool_t *self)
{
    if (self && atomic_fetch_sub_explicit(&self->refs, 1, memory_order_acq_rel) == 1) {
        s_values_free(atomic_exchange_explicit(&self->spare, NULL, memory_order_acq_rel));
        free(self);
    }
}

void
psd_pool_drop_spare(psd_pool_t *self)
{
    s_values_free(atomic_exchange_explicit(&self->spare, NULL, memory_order_acq_rel));
}

bool
psd_pool_has_spare(psd_pool_t *self)
{
    return atomic_load_explicit(&self->spare, memory_order_acquire) != NULL;
}

psd_values_t *
psd_values_wrap(psd_pool_t *pool, void *data)
{
    psd_values_t *v = malloc(sizeof *v);
    if (v) {
        atomic_init(&v->refs, 1);
        v->data = data;
        v->pool = pool;
        atomic_fetch_add_explicit(&pool->refs, 1, memory_order_relaxed);
    }
    return v;
}

psd_values_t *
psd_values_other(psd_pool_t *pool, size_t bytes)
{
    psd_values_t *v = atomic_exchange_explicit(&pool->spare, NULL, memory_order_acq_rel);
    if (v) {
        atomic_store_explicit(&v->refs, 1, memory_order_relaxed);
        v->pool = pool;
        atomic_fetch_add_explicit(&pool->refs, 1, memory_order_relaxed);
        return v;
    }
    void *data = psd_buffer_alloc(bytes);
    if (data && !(v = psd_values_wrap(pool, data)))
        free(data);
    return v;
}

void
psd_values_hold(psd_values_t *self)
{
    atomic_fetch_add_explicit(&self->refs, 1, memory_order_relaxed);
}

bool
psd_values_shared(psd_values_t *self)
{
    return atomic_load_explicit(&self->refs, memory_order_acquire) > 1;
}

void
psd_values_release(psd_values_t *self)
{
    if (!self || atomic_fetch_sub_explicit(&self->refs, 1, memory_order_acq_rel) != 1)
        return;
    psd_pool_t *pool = self->pool;
    self->pool = NULL;
    s_values_free(pool->keep ? atomic_exchange_explicit(&pool->spare, self, memory_order_acq_rel) : self);
    psd_pool_release(pool);
}
