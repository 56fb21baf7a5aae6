/* psd_dedup: per-client sequence windows and the ledger of steps, behind one admit/record pair. */
#include <errno.h>
#include <stdlib.h>

#include "psd_dedup.h"

typedef struct {
    uint64_t id;
    uint64_t highest; /* highest applied sequence, valid when has_seq */
    uint64_t window;  /* bit i: sequence highest - 1 - i was applied */
    uint64_t last_use;
    bool has_seq;
} s_client_t;

struct _psd_dedup_table_t {
    s_client_t *clients;
    size_t n, cap;
    uint64_t tick;
    psd_ledger_t ledger; /* writes deduplicated by the job's step */
};

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

/* Finds or makes the client's entry; NULL only when out of memory. */
static s_client_t *
s_client(psd_dedup_table_t *self, uint64_t id)
{
    self->tick++;
    for (size_t i = 0; i < self->n; i++)
        if (self->clients[i].id == id) {
            self->clients[i].last_use = self->tick;
            return &self->clients[i];
        }
    s_client_t *c;
    if (self->n == PSD_DEDUP_MAX_CLIENTS) {
        c = &self->clients[0]; /* evict the least recently used */
        for (size_t i = 1; i < self->n; i++)
            if (self->clients[i].last_use < c->last_use)
                c = &self->clients[i];
    } else {
        if (self->n == self->cap) {
            size_t cap = self->cap ? self->cap * 2 : 8;
            s_client_t *p = realloc(self->clients, cap * sizeof *p);
            if (!p)
                return NULL;
            self->clients = p;
            self->cap = cap;
        }
        c = &self->clients[self->n++];
    }
    *c = (s_client_t){.id = id, .last_use = self->tick};
    return c;
}

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
    t->cap = n;
    /* Restored clients count as used in their order, before any new one. */
    for (size_t i = 0; i < n; i++)
        if (list[i].client_id != 0)
            t->clients[t->n++] = (s_client_t){.id = list[i].client_id,
                                              .highest = list[i].highest,
                                              .window = list[i].window,
                                              .last_use = ++t->tick,
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
psd_dedup_table_clear(psd_dedup_table_t *self)
{
    free(self->clients);
    self->clients = NULL;
    self->n = self->cap = 0;
    psd_ledger_clear(&self->ledger);
}

void
psd_dedup_table_set_ledger(psd_dedup_table_t *self, psd_ledger_t *ledger)
{
    psd_ledger_clear(&self->ledger);
    self->ledger = *ledger;
    *ledger = (psd_ledger_t){0};
}

const psd_ledger_t *
psd_dedup_table_ledger(const psd_dedup_table_t *self)
{
    return &self->ledger;
}

size_t
psd_dedup_table_size(const psd_dedup_table_t *self)
{
    return self->n;
}

void
psd_dedup_table_get(const psd_dedup_table_t *self, size_t i, psd_dedup_t *ret)
{
    const s_client_t *c = &self->clients[i];
    *ret = (psd_dedup_t){.client_id = c->id, .highest = c->highest, .window = c->window};
}

int
psd_dedup_admit(psd_dedup_table_t *self, psd_dedup_key_t *key)
{
    key->client = SIZE_MAX;
    if (key->job_step != 0) {
        /* A step's identity decides, whoever sends it: a closure re-run on
           another worker sends the same steps again. Room first, so that
           an applied write is always recorded. */
        if (psd_ledger_seen(&self->ledger, key->job_step, key->step_write))
            return PSD_DUPLICATE;
        return psd_ledger_reserve(&self->ledger, key->job_step, key->step_write);
    }
    if (key->client_id == 0)
        return 0;
    s_client_t *c = s_client(self, key->client_id);
    if (!c)
        return -ENOMEM;
    key->client = (size_t) (c - self->clients);
    return s_client_seen(c, key->sequence) ? PSD_DUPLICATE : 0;
}

void
psd_dedup_record(psd_dedup_table_t *self, const psd_dedup_key_t *key)
{
    if (key->job_step != 0)
        psd_ledger_record(&self->ledger, key->job_step, key->step_write); /* reserved: cannot fail */
    else if (key->client != SIZE_MAX)
        s_client_record(&self->clients[key->client], key->sequence);
}
