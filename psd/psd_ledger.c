/* psd_ledger: the steps a shard has applied (a bitmap above a floor, plus the rare second writes of a step). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "psd_ledger.h"

#define S_MAX_WORDS ((size_t) (PSD_LEDGER_WINDOW / 64))

void
psd_ledger_clear(psd_ledger_t *self)
{
    free(self->words);
    free(self->extra);
    *self = (psd_ledger_t){0};
}

static uint64_t
s_word(const psd_ledger_t *self, uint64_t w)
{
    if (w < self->base)
        return ~0ULL;
    uint64_t i = w - self->base;
    return i < self->nwords ? self->words[i] : 0;
}

bool
psd_ledger_seen(const psd_ledger_t *self, uint64_t step, uint32_t ordinal)
{
    if (step == 0)
        return false;
    if (ordinal == 0)
        return (s_word(self, step / 64) >> (step % 64)) & 1;
    if (step < self->extra_floor)
        return true;
    for (size_t i = 0; i < self->nextra; i++)
        if (self->extra[i].step == step && self->extra[i].ordinal == ordinal)
            return true;
    return false;
}

uint64_t
psd_ledger_floor(const psd_ledger_t *self)
{
    uint64_t at = self->base * 64;
    if (self->nwords > 0)
        at += (uint64_t) __builtin_ctzll(~self->words[0]); /* words[0] is never all ones */
    return at;
}

/* Drops the first d words (their steps count as applied). */
static void
s_drop_words(psd_ledger_t *self, size_t d)
{
    if (d >= self->nwords) {
        self->base += d;
        self->nwords = 0;
        return;
    }
    memmove(self->words, self->words + d, (self->nwords - d) * sizeof *self->words);
    self->nwords -= d;
    self->base += d;
}

/* Moves the floor over the words applied without a gap. */
static void
s_normalize(psd_ledger_t *self)
{
    size_t d = 0;
    while (d < self->nwords && self->words[d] == ~0ULL)
        d++;
    if (d)
        s_drop_words(self, d);
}

/* Forgets second writes older than the window (they count as applied). */
static void
s_prune_extra(psd_ledger_t *self)
{
    if (self->top > PSD_LEDGER_WINDOW && self->top - PSD_LEDGER_WINDOW > self->extra_floor)
        self->extra_floor = self->top - PSD_LEDGER_WINDOW;
    size_t k = 0;
    for (size_t i = 0; i < self->nextra; i++)
        if (self->extra[i].step >= self->extra_floor)
            self->extra[k++] = self->extra[i];
    self->nextra = k;
}

/* arr with room for `need` elements of `size` bytes (its capacity *cap,
   doubled from `first`); NULL when out of memory, arr and *cap unchanged. */
static void *
s_grow(void *arr, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return arr;
    size_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    void *p = realloc(arr, n * size);
    if (p)
        *cap = n;
    return p;
}

static int
s_reserve_words(psd_ledger_t *self, size_t need)
{
    uint64_t *p = s_grow(self->words, &self->cap, need, sizeof *p, 4);
    if (!p)
        return -ENOMEM;
    self->words = p;
    return 0;
}

static int
s_reserve_extra(psd_ledger_t *self, size_t need)
{
    psd_ledger_key_t *p = s_grow(self->extra, &self->extra_cap, need, sizeof *p, 8);
    if (!p)
        return -ENOMEM;
    self->extra = p;
    return 0;
}

static int
s_record_first(psd_ledger_t *self, uint64_t step)
{
    uint64_t i = step / 64 - self->base; /* step >= base*64: it was not seen */
    size_t slide = i >= S_MAX_WORDS ? (size_t) (i - S_MAX_WORDS + 1) : 0;
    size_t need = (size_t) (i - slide) + 1;
    if (s_reserve_words(self, need) < 0)
        return -ENOMEM;
    if (slide)
        s_drop_words(self, slide);
    i -= slide;
    if (self->nwords < need) {
        if (self->base == 0 && self->nwords == 0)
            self->words[0] = 1; /* step 0 names no step: the floor starts above it */
        size_t from = self->base == 0 && self->nwords == 0 ? 1 : self->nwords;
        if (need > from)
            memset(self->words + from, 0, (need - from) * sizeof *self->words);
        self->nwords = need;
    }
    self->words[i] |= 1ULL << (step % 64);
    s_normalize(self);
    return 0;
}

static int
s_record_extra(psd_ledger_t *self, uint64_t step, uint32_t ordinal)
{
    if (self->nextra == PSD_LEDGER_MAX_EXTRA) {
        /* Full: the oldest goes, and with it every second write up to its step. */
        uint64_t low = self->extra[0].step;
        for (size_t i = 1; i < self->nextra; i++)
            if (self->extra[i].step < low)
                low = self->extra[i].step;
        self->extra_floor = low + 1;
        s_prune_extra(self);
        if (step < self->extra_floor)
            return 0;
    }
    int rc = s_reserve_extra(self, self->nextra + 1);
    if (rc < 0)
        return rc;
    self->extra[self->nextra++] = (psd_ledger_key_t){step, ordinal};
    return 0;
}

int
psd_ledger_reserve(psd_ledger_t *self, uint64_t step, uint32_t ordinal)
{
    if (step == 0 || psd_ledger_seen(self, step, ordinal))
        return 0;
    if (ordinal > 0) {
        if (self->nextra == PSD_LEDGER_MAX_EXTRA)
            return 0;
        return s_reserve_extra(self, self->nextra + 1);
    }
    uint64_t i = step / 64 - self->base;
    size_t slide = i >= S_MAX_WORDS ? (size_t) (i - S_MAX_WORDS + 1) : 0;
    return s_reserve_words(self, (size_t) (i - slide) + 1);
}

int
psd_ledger_record(psd_ledger_t *self, uint64_t step, uint32_t ordinal)
{
    if (step == 0 || psd_ledger_seen(self, step, ordinal))
        return 0;
    int rc = ordinal == 0 ? s_record_first(self, step) : s_record_extra(self, step, ordinal);
    if (rc < 0)
        return rc;
    if (step + 1 > self->top)
        self->top = step + 1;
    s_prune_extra(self);
    return 0;
}

int
psd_ledger_intersect(psd_ledger_t *dst, const psd_ledger_t *const *srcs, size_t n)
{
    *dst = (psd_ledger_t){0};
    if (n == 0)
        return 0;
    uint64_t base = srcs[0]->base, end = 0;
    for (size_t k = 0; k < n; k++) {
        if (srcs[k]->base < base)
            base = srcs[k]->base;
        if (srcs[k]->base + srcs[k]->nwords > end)
            end = srcs[k]->base + srcs[k]->nwords;
        if (srcs[k]->top > dst->top)
            dst->top = srcs[k]->top;
    }
    if (end < base)
        end = base;
    /* Keep the newest window of words: older gaps count as applied anyway. */
    if (end - base > S_MAX_WORDS)
        base = end - S_MAX_WORDS;
    dst->base = base;
    size_t nw = (size_t) (end - base);
    if (nw && s_reserve_words(dst, nw) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < nw; i++) {
        uint64_t w = ~0ULL;
        for (size_t k = 0; k < n; k++)
            w &= s_word(srcs[k], base + i);
        dst->words[i] = w;
    }
    dst->nwords = nw;
    s_normalize(dst);
    dst->extra_floor = srcs[0]->extra_floor;
    for (size_t k = 1; k < n; k++)
        if (srcs[k]->extra_floor < dst->extra_floor)
            dst->extra_floor = srcs[k]->extra_floor;
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < srcs[k]->nextra; i++) {
            psd_ledger_key_t key = srcs[k]->extra[i];
            bool all = !psd_ledger_seen(dst, key.step, key.ordinal);
            for (size_t m = 0; m < n && all; m++)
                all = psd_ledger_seen(srcs[m], key.step, key.ordinal);
            if (all && s_record_extra(dst, key.step, key.ordinal) < 0) {
                psd_ledger_clear(dst);
                return -ENOMEM;
            }
        }
    s_prune_extra(dst);
    return 0;
}
