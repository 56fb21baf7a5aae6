/* psd_dyntable: a dynamic embedding table: an open-addressing index of int64 ids over rows in a psd_arena. */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "psd_arena.h"
#include "psd_dyntable.h"
#include "psd_dyntable_impl.h"

#define S_NONE PSD_ARENA_NONE
/* Index and counters start at this many entries (powers of two). */
#define S_MIN_CAP 16
/* Ids a lookup resolves per pass (see s_resolve). */
#define S_BLOCK 512

typedef psd_dyntable_head_t s_head_t;
typedef psd_dyntable_counter_t s_counter_t;

/* murmur3's fmix64: a mix unrelated to zdist_partition_id_hash, whose
   remainder every id on one ps task shares. */
static inline uint64_t
s_hash(int64_t id)
{
    uint64_t k = (uint64_t) id;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

static inline uint32_t
s_tag(int64_t id)
{
    return (uint32_t) (s_hash(id) >> 32);
}

static inline s_head_t *
s_head(const psd_dyntable_t *self, uint32_t r)
{
    return (s_head_t *) psd_arena_row(&self->arena, r);
}

static inline float *
s_values(s_head_t *h)
{
    return (float *) (h + 1);
}

static inline float *
s_slot(const psd_dyntable_t *self, s_head_t *h, int k)
{
    return s_values(h) + (size_t) self->dim * (size_t) (k + 1);
}

/* Budget. */

static bool
s_fits(const psd_dyntable_t *self, uint64_t more)
{
    const psd_dyntable_budget_t *b = self->budget;
    return !b || b->max_bytes == 0 || (b->used <= b->max_bytes && more <= b->max_bytes - b->used);
}

static void
s_take(psd_dyntable_t *self, uint64_t n)
{
    self->bytes += n;
    if (self->budget)
        self->budget->used += n;
}

static void
s_give(psd_dyntable_t *self, uint64_t n)
{
    assert(self->bytes >= n);
    self->bytes -= n;
    if (self->budget)
        self->budget->used -= n;
}

/* The index. */

static inline uint32_t
s_find_tagged(const psd_dyntable_t *self, int64_t id, uint32_t tag, size_t *ret_pos)
{
    size_t mask = self->index_cap - 1;
    for (size_t pos = tag & mask;; pos = (pos + 1) & mask) {
        uint64_t e = self->index[pos];
        if (e == 0)
            return S_NONE;
        if ((uint32_t) (e >> 32) == tag) {
            uint32_t r = (uint32_t) e - 1;
            if (s_head(self, r)->id == id) {
                if (ret_pos)
                    *ret_pos = pos;
                return r;
            }
        }
    }
}

static uint32_t
s_find(const psd_dyntable_t *self, int64_t id, size_t *ret_pos)
{
    return self->index_cap ? s_find_tagged(self, id, s_tag(id), ret_pos) : S_NONE;
}

static void
s_index_put(uint64_t *index, size_t cap, uint64_t e)
{
    size_t mask = cap - 1;
    size_t pos = (size_t) (e >> 32) & mask;
    while (index[pos])
        pos = (pos + 1) & mask;
    index[pos] = e;
}

/* Backward-shift deletion from slot pos of a table whose entries' homes
   are home(entry) & mask: later entries of the probe run move up. */
#define S_SHIFT_DELETE(arr, cap, pos, EMPTY, IS_EMPTY, HOME)                                   \
    do {                                                                                       \
        size_t mask_ = (cap) - 1, i_ = (pos), j_ = (pos);                                      \
        for (;;) {                                                                             \
            j_ = (j_ + 1) & mask_;                                                             \
            if (IS_EMPTY((arr)[j_]))                                                           \
                break;                                                                         \
            size_t home_ = HOME((arr)[j_]) & mask_;                                            \
            if (((j_ - home_) & mask_) >= ((j_ - i_) & mask_)) {                               \
                (arr)[i_] = (arr)[j_];                                                         \
                i_ = j_;                                                                       \
            }                                                                                  \
        }                                                                                      \
        (arr)[i_] = EMPTY;                                                                     \
    } while (0)

#define S_ENTRY_EMPTY(e) ((e) == 0)
#define S_ENTRY_HOME(e) ((size_t) ((e) >> 32))
#define S_COUNTER_EMPTY(c) ((c).count == 0)
#define S_COUNTER_HOME(c) ((size_t) s_tag((c).id))

static void
s_index_delete(psd_dyntable_t *self, size_t pos)
{
    S_SHIFT_DELETE(self->index, self->index_cap, pos, 0, S_ENTRY_EMPTY, S_ENTRY_HOME);
}

/* Doubles the index when one more row would pass load 0.8. */
static int
s_index_reserve(psd_dyntable_t *self)
{
    if ((self->nrows + 1) * 5 <= (uint64_t) self->index_cap * 4)
        return 0;
    size_t cap = self->index_cap ? self->index_cap * 2 : S_MIN_CAP;
    if (cap > ((size_t) 1 << 32))
        return -ENOSPC;
    size_t was = psd_arena_mapped_bytes(self->index_cap * sizeof(uint64_t));
    size_t now = psd_arena_mapped_bytes(cap * sizeof(uint64_t));
    if (!s_fits(self, now - was))
        return -ENOSPC;
    uint64_t *index = psd_arena_map(cap * sizeof *index);
    if (!index)
        return -ENOMEM;
    for (size_t i = 0; i < self->index_cap; i++)
        if (self->index[i])
            s_index_put(index, cap, self->index[i]);
    psd_arena_unmap(self->index, self->index_cap * sizeof *self->index);
    self->index = index;
    self->index_cap = cap;
    s_take(self, now - was);
    return 0;
}

/* The arena. */

/* A row slot, taking a chunk within the budget; S_NONE with *ret_rc. */
static uint32_t
s_row_alloc(psd_dyntable_t *self, int *ret_rc)
{
    const psd_dyntable_budget_t *b = self->budget;
    uint64_t room = UINT64_MAX;
    if (b && b->max_bytes)
        room = b->used < b->max_bytes ? b->max_bytes - b->used : 0;
    uint64_t before = self->arena.bytes;
    uint32_t r = psd_arena_alloc(&self->arena, room, ret_rc);
    s_take(self, self->arena.bytes - before);
    return r;
}

static void
s_row_free(psd_dyntable_t *self, uint32_t r)
{
    s_head(self, r)->epoch = 0;
    psd_arena_free(&self->arena, r);
}

/* Row r (header h) changed: it takes the epoch, listed the first time. */
static inline void
s_touch(psd_dyntable_t *self, uint32_t r, s_head_t *h)
{
    bool again = h->epoch == self->epoch;
    h->epoch = self->epoch;
    if (again || self->dirty_lost)
        return;
    if (self->ndirty == self->dirty_cap) {
        size_t cap = self->dirty_cap ? self->dirty_cap * 2 : 1024;
        bool few = self->ndirty < 1024 || self->ndirty <= self->nrows / 8;
        uint32_t *list = few ? realloc(self->dirty, cap * sizeof *list) : NULL;
        if (!list) {
            self->dirty_lost = true; /* freed at the mark */
            return;
        }
        self->dirty = list;
        s_take(self, (cap - self->dirty_cap) * sizeof *list); /* above the budget if need be */
        self->dirty_cap = cap;
    }
    self->dirty[self->ndirty++] = r;
}

/* Initial values and slots of id's row. */
static void
s_row_init(psd_dyntable_t *self, s_head_t *h)
{
    int rc = zdist_init_fill_row(&self->init, self->seed, self->name, ZDIST_DTYPE_FLOAT32, &self->shape,
                                 h->id, s_values(h), (size_t) self->dim * sizeof(float), NULL);
    assert(rc == 0); /* validated by _new */
    (void) rc;
    for (int k = 0; k < self->nslots; k++)
        zdist_optim_slot_fill(&self->optim, k, ZDIST_DTYPE_FLOAT32, s_slot(self, h, k), (size_t) self->dim);
}

/* Creates id's row (it has none): its index entry, a row slot, its initial values if `fill` (a restore's
   put overwrites them). S_NONE, counted as refused, when it does not fit. */
static uint32_t
s_create(psd_dyntable_t *self, int64_t id, uint64_t step, bool fill, int *ret_rc)
{
    int rc = -ENOSPC;
    uint32_t r = S_NONE;
    if (self->nrows < PSD_DYNTABLE_MAX_ROWS && (rc = s_index_reserve(self)) == 0)
        r = s_row_alloc(self, &rc);
    if (r == S_NONE) {
        self->st.refused++;
        if (ret_rc)
            *ret_rc = rc;
        return S_NONE;
    }
    s_head_t *h = s_head(self, r);
    *h = (s_head_t){.id = id, .last_step = step, .opt_step = 0};
    s_touch(self, r, h);
    if (fill)
        s_row_init(self, h);
    s_index_put(self->index, self->index_cap, (uint64_t) s_tag(id) << 32 | (uint64_t) (r + 1));
    self->nrows++;
    self->st.admitted++;
    return r;
}

/* Takes id's row out of the index and the arena. */
static void
s_drop_row(psd_dyntable_t *self, size_t pos, uint32_t r)
{
    s_index_delete(self, pos);
    s_row_free(self, r);
    self->nrows--;
}

/* Admission counters. */

static s_counter_t *
s_counter_find(psd_dyntable_t *self, int64_t id, size_t *ret_pos)
{
    if (!self->counters_cap)
        return NULL;
    size_t mask = self->counters_cap - 1;
    for (size_t pos = s_tag(id) & mask;; pos = (pos + 1) & mask) {
        s_counter_t *c = &self->counters[pos];
        if (c->count == 0)
            return NULL;
        if (c->id == id) {
            *ret_pos = pos;
            return c;
        }
    }
}

static void
s_counter_put(s_counter_t *arr, size_t cap, const s_counter_t *c)
{
    size_t mask = cap - 1;
    size_t pos = s_tag(c->id) & mask;
    while (arr[pos].count)
        pos = (pos + 1) & mask;
    arr[pos] = *c;
}

/* A new counter for id at *ret_pos (count 0, to be raised by the caller
   at once: 0 marks an empty entry), or NULL when it does not fit the
   budget or memory. */
static s_counter_t *
s_counter_add(psd_dyntable_t *self, int64_t id, size_t *ret_pos)
{
    if ((self->npending + 1) * 2 > self->counters_cap) {
        size_t cap = self->counters_cap ? self->counters_cap * 2 : S_MIN_CAP;
        uint64_t grow = (uint64_t) (cap - self->counters_cap) * sizeof(s_counter_t);
        if (!s_fits(self, grow))
            return NULL;
        s_counter_t *arr = calloc(cap, sizeof *arr);
        if (!arr)
            return NULL;
        for (size_t i = 0; i < self->counters_cap; i++)
            if (self->counters[i].count)
                s_counter_put(arr, cap, &self->counters[i]);
        free(self->counters);
        self->counters = arr;
        self->counters_cap = cap;
        s_take(self, grow);
    }
    size_t mask = self->counters_cap - 1;
    size_t pos = s_tag(id) & mask;
    while (self->counters[pos].count)
        pos = (pos + 1) & mask;
    self->counters[pos] = (s_counter_t){.id = id};
    self->npending++;
    *ret_pos = pos;
    return &self->counters[pos];
}

static void
s_counter_delete(psd_dyntable_t *self, size_t pos)
{
    S_SHIFT_DELETE(self->counters, self->counters_cap, pos, (s_counter_t){0}, S_COUNTER_EMPTY,
                   S_COUNTER_HOME);
    self->npending--;
}

/* One training occurrence of id: counts it and creates its row at
   min_count. */
static void
s_occurrence(psd_dyntable_t *self, int64_t id, uint64_t step)
{
    if (s_find(self, id, NULL) != S_NONE) /* created earlier in this lookup */
        return;
    if (self->min_count <= 1) {
        s_create(self, id, step, true, NULL);
        return;
    }
    size_t pos = 0;
    s_counter_t *c = s_counter_find(self, id, &pos);
    if (!c && !(c = s_counter_add(self, id, &pos))) {
        self->st.refused++;
        return;
    }
    if (c->count < UINT32_MAX)
        c->count++;
    c->last_seen = step;
    c->epoch = self->epoch;
    /* A refused creation keeps the counter: the next occurrence tries again. */
    if (c->count >= self->min_count && s_create(self, id, step, true, NULL) != S_NONE)
        s_counter_delete(self, pos);
}

/* Lifecycle. */

static int
s_check_config(const psd_dyntable_config_t *cfg, zdist_error_t *err)
{
    if (cfg->dim < 1 || cfg->dim > 65536)
        return zdist_error_set(err, -EINVAL, "dynamic table '%s': dim must be in [1, 65536], got %lld",
                               cfg->name ? cfg->name : "", (long long) cfg->dim);
    if (!(cfg->evict_l2_below >= 0) || !isfinite(cfg->evict_l2_below))
        return zdist_error_set(err, -EINVAL, "dynamic table '%s': evict_l2_below must be >= 0, got %g",
                               cfg->name ? cfg->name : "", cfg->evict_l2_below);
    int rc = zdist_optim_config_validate(&cfg->optim, err);
    if (rc == 0)
        rc = zdist_init_validate(&cfg->init, ZDIST_DTYPE_FLOAT32, err);
    if (rc < 0)
        zdist_error_prefix(err, "dynamic table '%s'", cfg->name ? cfg->name : "");
    return rc;
}

psd_dyntable_t *
psd_dyntable_new(const psd_dyntable_config_t *cfg, zdist_error_t *err)
{
    if (s_check_config(cfg, err) < 0)
        return NULL;
    psd_dyntable_t *self = calloc(1, sizeof *self);
    if (!self || !(self->name = strdup(cfg->name ? cfg->name : ""))) {
        free(self);
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->dim = cfg->dim;
    self->seed = cfg->seed;
    self->init = cfg->init;
    self->shape = (zdist_shape_t){.rank = 2, .dims = {cfg->dim, cfg->dim}};
    self->optim = cfg->optim;
    self->optim.lazy = true;
    self->nslots = zdist_optim_num_slots(cfg->optim.kind);
    self->min_count = cfg->min_count;
    self->evict_after = cfg->evict_after_steps;
    self->evict_l2 = cfg->evict_l2_below;
    self->budget = cfg->budget;
    self->epoch = 1;
    size_t payload = (size_t) cfg->dim * sizeof(float) * (size_t) (1 + self->nslots);
    self->stride = (sizeof(s_head_t) + payload + 7) & ~(size_t) 7;
    psd_arena_init(&self->arena, self->stride);
    if (cfg->default_value) {
        size_t bytes = (size_t) cfg->dim * sizeof(float);
        if (!(self->defval = malloc(bytes))) {
            psd_dyntable_destroy(&self);
            zdist_error_set(err, -ENOMEM, "out of memory");
            return NULL;
        }
        memcpy(self->defval, cfg->default_value, bytes);
    }
    return self;
}

void
psd_dyntable_destroy(psd_dyntable_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    psd_dyntable_t *self = *self_p;
    psd_arena_clear(&self->arena);
    psd_arena_unmap(self->index, self->index_cap * sizeof *self->index);
    free(self->counters);
    free(self->evicted);
    free(self->dirty);
    free(self->defval);
    free(self->rows);
    free(self->heads);
    free(self->umap);
    free(self->ugrad);
    free(self->usum);
    free(self->name);
    if (self->budget)
        self->budget->used -= self->bytes;
    free(self);
    *self_p = NULL;
}

int64_t
psd_dyntable_dim(const psd_dyntable_t *self)
{
    return self->dim;
}

const char *
psd_dyntable_name(const psd_dyntable_t *self)
{
    return self->name;
}

const zdist_optim_config_t *
psd_dyntable_optim(const psd_dyntable_t *self)
{
    return &self->optim;
}

void
psd_dyntable_stats(const psd_dyntable_t *self, psd_dyntable_stats_t *ret_stats)
{
    *ret_stats = self->st;
    ret_stats->rows = self->nrows;
    ret_stats->pending = self->npending;
    ret_stats->bytes = self->bytes;
}

/* Lookups. */

static int
s_grow_scratch(void **buf, size_t *cap, size_t n, size_t elem)
{
    if (*cap >= n)
        return 0;
    size_t want = *cap ? *cap : 1024;
    while (want < n)
        want *= 2;
    void *p = realloc(*buf, want * elem);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = want;
    return 0;
}

/* rows[i] = the row of ids[i] or S_NONE, heads[i] its header or NULL, for a block of ids. A random id
   waits for memory twice (its index entry, then its row), so each step
   runs over the whole block before the next: prefetch every index entry
   (keeping the tags in rows[]); walk the index to the first entry with
   each tag (the id's row but for a tag collision), keep that row and
   prefetch its first `bytes`; check each id against its row, walking the
   index again only on a collision. The misses of a step overlap like a
   plain array's gather does; interleaving the steps a few ids apart
   instead was half as fast, its prefetches waiting on each other. */
static void
s_resolve_block(const psd_dyntable_t *self, const int64_t *ids, size_t n, uint32_t *rows, s_head_t **heads,
                size_t bytes)
{
    size_t mask = self->index_cap - 1;
    for (size_t i = 0; i < n; i++) {
        rows[i] = s_tag(ids[i]);
        __builtin_prefetch(&self->index[rows[i] & mask]);
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t tag = rows[i];
        uint64_t e;
        for (size_t p = tag & mask; (e = self->index[p]) && (uint32_t) (e >> 32) != tag;)
            p = (p + 1) & mask;
        rows[i] = e ? (uint32_t) e - 1 : S_NONE; /* no entry with the tag: no row */
        heads[i] = e ? s_head(self, rows[i]) : NULL;
        for (size_t off = 0; e && off < bytes; off += 64)
            __builtin_prefetch((const char *) heads[i] + off);
    }
    for (size_t i = 0; i < n; i++)
        if (heads[i] && heads[i]->id != ids[i]) { /* a tag collision: look further */
            rows[i] = s_find(self, ids[i], NULL);
            heads[i] = rows[i] != S_NONE ? s_head(self, rows[i]) : NULL;
        }
}

/* The block's prefetches stay in the caches until its last step. */
static void
s_resolve(const psd_dyntable_t *self, const int64_t *ids, size_t n, uint32_t *rows, s_head_t **heads,
          size_t bytes)
{
    if (!self->index_cap) {
        for (size_t i = 0; i < n; i++) {
            rows[i] = S_NONE;
            heads[i] = NULL;
        }
        return;
    }
    for (size_t at = 0; at < n; at += S_BLOCK)
        s_resolve_block(self, ids + at, n - at < S_BLOCK ? n - at : S_BLOCK, rows + at, heads + at, bytes);
}

static size_t
s_answer(const psd_dyntable_t *self, s_head_t *const *heads, size_t n, float *out)
{
    size_t row_bytes = (size_t) self->dim * sizeof(float), defaults = 0;
    for (size_t i = 0; i < n; i++) {
        float *o = out + i * (size_t) self->dim;
        if (heads[i]) {
            memcpy(o, s_values(heads[i]), row_bytes);
        } else {
            defaults++;
            if (self->defval)
                memcpy(o, self->defval, row_bytes);
            else
                memset(o, 0, row_bytes);
        }
    }
    return defaults;
}

/* Scratch rows and heads for n ids; -ENOMEM. */
static int
s_rows_scratch(psd_dyntable_t *self, size_t n)
{
    if (s_grow_scratch((void **) &self->rows, &self->rows_cap, n, sizeof *self->rows) < 0
        || s_grow_scratch((void **) &self->heads, &self->heads_cap, n, sizeof *self->heads) < 0)
        return -ENOMEM;
    return 0;
}

/* Resolves ids into the scratch heads (and rows), or NULL when the
   scratch cannot grow (the caller then goes id by id). */
static s_head_t **
s_heads_for(psd_dyntable_t *self, const int64_t *ids, size_t n)
{
    if (s_rows_scratch(self, n) < 0)
        return NULL;
    s_resolve(self, ids, n, self->rows, self->heads, sizeof(s_head_t) + (size_t) self->dim * sizeof(float));
    return self->heads;
}

static s_head_t *
s_head_of(psd_dyntable_t *self, int64_t id)
{
    uint32_t r = s_find(self, id, NULL);
    return r != S_NONE ? s_head(self, r) : NULL;
}

size_t
psd_dyntable_lookup_eval(psd_dyntable_t *self, const int64_t *ids, size_t n, float *out)
{
    s_head_t **heads = s_heads_for(self, ids, n);
    if (heads)
        return s_answer(self, heads, n, out);
    size_t defaults = 0; /* no scratch: one id at a time */
    for (size_t i = 0; i < n; i++) {
        s_head_t *h = s_head_of(self, ids[i]);
        defaults += s_answer(self, &h, 1, out + i * (size_t) self->dim);
    }
    return defaults;
}

size_t
psd_dyntable_lookup_train(psd_dyntable_t *self, const int64_t *ids, size_t n, uint64_t global_step,
                          float *out)
{
    s_head_t **heads = s_heads_for(self, ids, n);
    if (!heads) {
        for (size_t i = 0; i < n; i++)
            s_occurrence(self, ids[i], global_step);
        return psd_dyntable_lookup_eval(self, ids, n, out);
    }
    bool missing = false;
    for (size_t i = 0; i < n; i++)
        if (!heads[i]) {
            s_occurrence(self, ids[i], global_step);
            missing = true;
        }
    /* Resolve the misses again (rows this lookup created), so every
       occurrence of an id gets the same answer. */
    for (size_t i = 0; missing && i < n; i++)
        if (!heads[i])
            heads[i] = s_head_of(self, ids[i]);
    return s_answer(self, heads, n, out);
}

size_t
psd_dyntable_count(psd_dyntable_t *self, const int64_t *ids, size_t n, uint64_t global_step)
{
    uint64_t before = self->st.admitted;
    /* Resolved a block at a time, their misses overlapping (and the rows
       the apply after it reads are then in the caches); without scratch,
       id by id. */
    s_head_t **heads = s_heads_for(self, ids, n);
    for (size_t i = 0; i < n; i++)
        if (!(heads ? heads[i] : s_head_of(self, ids[i])))
            s_occurrence(self, ids[i], global_step);
    return (size_t) (self->st.admitted - before);
}

/* Updates. */

/* Scratch for n gradient rows; -ENOMEM. */
static int
s_apply_scratch(psd_dyntable_t *self, size_t n)
{
    if (s_rows_scratch(self, n) < 0)
        return -ENOMEM;
    if (self->ucap < n) {
        size_t cap = self->ucap ? self->ucap : 1024;
        while (cap < n)
            cap *= 2;
        const float **ugrad = realloc(self->ugrad, cap * sizeof *ugrad);
        if (!ugrad)
            return -ENOMEM;
        self->ugrad = ugrad;
        float *usum = realloc(self->usum, cap * (size_t) self->dim * sizeof(float));
        if (!usum)
            return -ENOMEM;
        self->usum = usum;
        self->ucap = cap;
    }
    size_t mcap = S_MIN_CAP;
    while (mcap < 2 * n)
        mcap *= 2;
    return s_grow_scratch((void **) &self->umap, &self->umap_cap, mcap, sizeof *self->umap);
}

/* Sums the gradient rows of each id (in request order) and leaves the
   unique rows in self->rows[0..) with their gradients in self->ugrad.
   Returns how many. */
static size_t
s_unique(psd_dyntable_t *self, size_t n, const float *grads)
{
    size_t bits = 4;
    while (((size_t) 1 << bits) < 2 * n)
        bits++;
    size_t mask = ((size_t) 1 << bits) - 1, dim = (size_t) self->dim, nu = 0, nsum = 0;
    const uint32_t SUMMED = (uint32_t) 1 << 31;
    memset(self->umap, 0, (mask + 1) * sizeof *self->umap);
    uint32_t *rows = self->rows; /* rows[u] for u <= i is written after rows[i] is read */
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rows[i];
        const float *g = grads + i * dim;
        if (r == S_NONE) {
            self->st.dropped_grads++;
            continue;
        }
        size_t pos = (size_t) (((uint64_t) r * 0x9e3779b97f4a7c15ULL) >> (64 - bits));
        while (self->umap[pos] && rows[(self->umap[pos] & ~SUMMED) - 1] != r)
            pos = (pos + 1) & mask;
        uint32_t *e = &self->umap[pos];
        if (!*e) {
            rows[nu] = r;
            self->ugrad[nu] = g;
            *e = (uint32_t) ++nu;
            continue;
        }
        size_t u = (*e & ~SUMMED) - 1;
        if (!(*e & SUMMED)) {
            float *sum = self->usum + nsum++ * dim;
            memcpy(sum, self->ugrad[u], dim * sizeof(float));
            self->ugrad[u] = sum;
            *e |= SUMMED;
        }
        float *sum = (float *) self->ugrad[u];
        for (size_t k = 0; k < dim; k++)
            sum[k] += g[k];
    }
    return nu;
}

int
psd_dyntable_apply(psd_dyntable_t *self, const int64_t *ids, size_t n, const float *grads,
                   uint64_t global_step)
{
    if (n == 0)
        return 0;
    if (n >= ((size_t) 1 << 30) || s_apply_scratch(self, n) < 0)
        return -ENOMEM;
    s_resolve(self, ids, n, self->rows, self->heads, self->stride);
    size_t nu = s_unique(self, n, grads);
    for (size_t u = 0; u < nu; u++) {
        s_head_t *h = s_head(self, self->rows[u]);
        if (h->opt_step < UINT32_MAX)
            h->opt_step++;
        h->last_step = global_step;
        s_touch(self, self->rows[u], h);
        void *slots[ZDIST_OPTIM_MAX_SLOTS] = {0};
        for (int k = 0; k < self->nslots; k++)
            slots[k] = s_slot(self, h, k);
        int rc = zdist_optim_apply_dense(&self->optim, ZDIST_DTYPE_FLOAT32, h->opt_step, s_values(h),
                                         slots, self->ugrad[u], (size_t) self->dim);
        assert(rc == 0); /* float32 */
        (void) rc;
    }
    return 0;
}

/* Eviction. */

static bool
s_qualifies(const psd_dyntable_t *self, s_head_t *h, uint64_t step)
{
    if (self->evict_after && step > h->last_step && step - h->last_step > self->evict_after)
        return true;
    if (self->evict_l2 > 0) {
        const float *v = s_values(h);
        double sq = 0;
        for (int64_t k = 0; k < self->dim; k++)
            sq += (double) v[k] * (double) v[k];
        return sqrt(sq) < self->evict_l2;
    }
    return false;
}

static int
s_list_evicted(psd_dyntable_t *self, int64_t id)
{
    if (self->nevicted == self->evicted_cap) {
        size_t cap = self->evicted_cap ? self->evicted_cap * 2 : 64;
        int64_t *list = realloc(self->evicted, cap * sizeof *list);
        if (!list)
            return -ENOMEM;
        self->evicted = list;
        s_take(self, (cap - self->evicted_cap) * sizeof *list); /* above the budget if need be */
        self->evicted_cap = cap;
    }
    self->evicted[self->nevicted++] = id;
    return 0;
}

size_t
psd_dyntable_evict(psd_dyntable_t *self, uint64_t global_step)
{
    size_t n = 0;
    for (uint32_t r = 0; (self->evict_after > 0 || self->evict_l2 > 0) && r < self->arena.used; r++) {
        s_head_t *h = s_head(self, r);
        if (!h->epoch || !s_qualifies(self, h, global_step))
            continue;
        if (s_list_evicted(self, h->id) < 0)
            break; /* the row stays until a later eviction can list it */
        size_t pos;
        uint32_t found = s_find(self, h->id, &pos);
        assert(found == r);
        (void) found;
        s_drop_row(self, pos, r);
        n++;
    }
    /* Counters not seen for as long go too. A deletion shifts later
       entries of the run back into slot i, so i is looked at again. */
    for (size_t i = 0; self->evict_after && i < self->counters_cap;) {
        const s_counter_t *c = &self->counters[i];
        /* Listed as evicted (a tombstone), so a delta removes a counter it once saved. */
        if (c->count && global_step > c->last_seen && global_step - c->last_seen > self->evict_after &&
            s_list_evicted(self, c->id) == 0)
            s_counter_delete(self, i);
        else
            i++;
    }
    self->st.evicted += n;
    return n;
}

/* Rows one by one. */

static void
s_fill_row(const psd_dyntable_t *self, s_head_t *h, psd_dyntable_row_t *ret)
{
    *ret = (psd_dyntable_row_t){
        .id = h->id,
        .values = s_values(h),
        .opt_step = h->opt_step,
        .last_step = h->last_step,
        .changed = h->epoch == self->epoch,
    };
    for (int k = 0; k < self->nslots; k++)
        ret->slots[k] = s_slot(self, h, k);
}

bool
psd_dyntable_find(psd_dyntable_t *self, int64_t id, psd_dyntable_row_t *ret_row)
{
    uint32_t r = s_find(self, id, NULL);
    if (r == S_NONE)
        return false;
    s_fill_row(self, s_head(self, r), ret_row);
    return true;
}

int
psd_dyntable_put(psd_dyntable_t *self, int64_t id, const float *values, const float *const *slots,
                 int nslots, uint32_t opt_step, uint64_t last_step)
{
    if (slots && nslots != self->nslots)
        return -EINVAL;
    uint32_t r = s_find(self, id, NULL);
    int rc = 0;
    if (r == S_NONE && (r = s_create(self, id, last_step, false, &rc)) == S_NONE)
        return rc;
    size_t pos;
    if (s_counter_find(self, id, &pos)) /* admitted since the counter was saved */
        s_counter_delete(self, pos);
    s_head_t *h = s_head(self, r);
    size_t bytes = (size_t) self->dim * sizeof(float);
    memcpy(s_values(h), values, bytes);
    for (int k = 0; k < self->nslots; k++) {
        if (slots)
            memcpy(s_slot(self, h, k), slots[k], bytes);
        else
            zdist_optim_slot_fill(&self->optim, k, ZDIST_DTYPE_FLOAT32, s_slot(self, h, k),
                                  (size_t) self->dim);
    }
    h->opt_step = opt_step;
    h->last_step = last_step;
    s_touch(self, r, h);
    return 0;
}

bool
psd_dyntable_remove(psd_dyntable_t *self, int64_t id)
{
    size_t pos;
    uint32_t r = s_find(self, id, &pos);
    if (r == S_NONE) {
        if (s_counter_find(self, id, &pos))
            s_counter_delete(self, pos);
        return false;
    }
    s_drop_row(self, pos, r);
    return true;
}

int
psd_dyntable_put_pending(psd_dyntable_t *self, int64_t id, uint32_t count, uint64_t last_seen)
{
    size_t pos;
    if (count == 0 || s_find(self, id, NULL) != S_NONE)
        return 0;
    s_counter_t *c = s_counter_find(self, id, &pos);
    if (!c && !(c = s_counter_add(self, id, &pos)))
        return -ENOSPC;
    *c = (s_counter_t){.id = id, .count = count, .epoch = self->epoch, .last_seen = last_seen};
    return 0;
}

static int
s_pending_cmp(const void *a, const void *b)
{
    int64_t x = ((const psd_dyntable_pending_t *) a)->id, y = ((const psd_dyntable_pending_t *) b)->id;
    return (x > y) - (x < y);
}

psd_dyntable_pending_t *
psd_dyntable_pending(psd_dyntable_t *self, bool changed_only, size_t *ret_n)
{
    psd_dyntable_pending_t *list = malloc((self->npending + 1) * sizeof *list);
    size_t n = 0;
    for (size_t i = 0; list && i < self->counters_cap; i++) {
        const s_counter_t *c = &self->counters[i];
        if (c->count && (!changed_only || c->epoch == self->epoch))
            list[n++] = (psd_dyntable_pending_t){c->id, c->count, c->last_seen};
    }
    if (list)
        qsort(list, n, sizeof *list, s_pending_cmp);
    *ret_n = n;
    return list;
}

/* Checkpoints. */

typedef struct {
    int64_t id;
    uint32_t row;
} s_pair_t;

static int
s_pair_cmp(const void *a, const void *b)
{
    int64_t x = ((const s_pair_t *) a)->id, y = ((const s_pair_t *) b)->id;
    return (x > y) - (x < y);
}

static int
s_id_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

int
psd_dyntable_iterate(psd_dyntable_t *self, bool changed_only, psd_dyntable_visit_fn fn, void *arg)
{
    if (self->nrows == 0)
        return 0;
    bool listed = changed_only && !self->dirty_lost; /* the changed rows' list, else a walk */
    size_t n = 0, end = listed ? self->ndirty : self->arena.used;
    s_pair_t *pairs = malloc((listed ? self->ndirty + 1 : (size_t) self->nrows) * sizeof *pairs);
    if (!pairs)
        return -ENOMEM;
    for (size_t i = 0; i < end; i++) {
        uint32_t r = listed ? self->dirty[i] : (uint32_t) i;
        s_head_t *h = s_head(self, r);
        if (h->epoch && (!changed_only || h->epoch == self->epoch))
            pairs[n++] = (s_pair_t){h->id, r};
    }
    qsort(pairs, n, sizeof *pairs, s_pair_cmp);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i > 0 && pairs[i].row == pairs[i - 1].row)
            continue; /* a slot listed twice (freed and reused) holds one row */
        psd_dyntable_row_t row;
        s_fill_row(self, s_head(self, pairs[i].row), &row);
        rc = fn(&row, arg);
    }
    free(pairs);
    return rc;
}

const int64_t *
psd_dyntable_evicted(psd_dyntable_t *self, size_t *ret_n)
{
    if (self->nevicted > 1)
        qsort(self->evicted, self->nevicted, sizeof *self->evicted, s_id_cmp);
    *ret_n = self->nevicted;
    return self->evicted;
}

void
psd_dyntable_mark(psd_dyntable_t *self)
{
    if (++self->epoch == 0) /* 0 marks a free row */
        self->epoch = 1;
    s_give(self, self->evicted_cap * sizeof *self->evicted);
    free(self->evicted);
    self->evicted = NULL;
    if (self->dirty_lost || self->dirty_cap > 65536) { /* not kept for deltas of a hundredth */
        s_give(self, self->dirty_cap * sizeof *self->dirty);
        free(self->dirty);
        self->dirty = NULL;
        self->dirty_cap = 0;
    }
    self->ndirty = 0;
    self->dirty_lost = false;
    self->nevicted = self->evicted_cap = 0;
}
