/* psd_buffer: the buffers a shard's values live in, counted so that a reply sent zero-copy keeps its own.

   A pull answered without copying holds a reference to the shard's values
   (psd_values_t) until libzmq has sent the reply, from its I/O thread. A
   write while one is held goes to another buffer (copy on write), so a
   reply never sees a later write. The buffer the last reply releases
   becomes its shard's spare (psd_pool_t), which the next write that needs
   another buffer takes rather than fresh pages (which cost more than the
   write).

   Thread rules: psd_values_release and psd_pool_release may be called from
   any thread; the rest under the owning shard's write lock (or before the
   shard is shared). */
#ifndef PSD_BUFFER_H
#define PSD_BUFFER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A buffer for a shard's values or slots: big ones on huge-page boundaries.
   Freed with free(). */
void *psd_buffer_alloc(size_t bytes);

typedef struct _psd_pool_t psd_pool_t;

/* One values buffer, counted: the shard holds one reference, each reply
   that sends it zero-copy another. */
typedef struct {
    atomic_uint refs;
    void *data;
    psd_pool_t *pool; /* the shard's; a reference while refs > 0 */
} psd_values_t;

/* A shard's pool of values buffers of value_bytes each: keeps at most one
   spare, none for shards over 64 MiB (a second copy of a big variable held
   for good, outside --max-bytes, costs more than its fresh pages). Counted
   (the shard, and each buffer while referenced) because replies may outlive
   the shard: then the last of them frees it all. NULL when out of memory. */
psd_pool_t *psd_pool_new(size_t value_bytes);
/* Drops one reference; the last frees the pool and its spare. */
void psd_pool_release(psd_pool_t *self);
/* Frees the spare now (the shard is going; a buffer a reply still holds
   comes back after this, and the reply frees it with the pool). */
void psd_pool_drop_spare(psd_pool_t *self);
/* True when the pool keeps a spare buffer. */
bool psd_pool_has_spare(psd_pool_t *self);

/* Wraps data (taken) in a buffer of the pool with one reference; NULL when
   out of memory (data is then still the caller's). */
psd_values_t *psd_values_wrap(psd_pool_t *pool, void *data);
/* Another buffer of the pool (contents undefined): its spare, else new
   memory of bytes. One reference; NULL when out of memory. */
psd_values_t *psd_values_other(psd_pool_t *pool, size_t bytes);
/* One more reference (a reply pinning it). */
void psd_values_hold(psd_values_t *self);
/* True while someone besides the shard holds the buffer; under the shard's
   write lock no new holder comes meanwhile, only releases. */
bool psd_values_shared(psd_values_t *self);
/* From any thread; NULL-safe. The last reference makes the buffer its
   pool's spare (an older spare is freed: one per shard), or frees it (no
   spare kept). */
void psd_values_release(psd_values_t *self);

#ifdef __cplusplus
}
#endif
#endif
