/* psd_ckpt_state: a shard's exactly-once record in a checkpoint: its JSON, its parse, its intersection over
 * files. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psd_ckpt_state.h"

static int
s_bad(zdist_error_t *err, const char *where, const char *what)
{
    return zdist_error_set(err, -EBADMSG, "checkpoint manifest %s is damaged: %s", where, what);
}

/* The steps a shard applied (psd_ledger.h), saved with its values:
   {"base": word, "words": "16 hex digits per word", "top": step,
   "extra_floor": step, "extra": [[step, ordinal], ...]}; NULL when empty. */
json_t *
psd_ckpt_state_ledger_json(const psd_ledger_t *l)
{
    if (l->base == 0 && l->nwords == 0 && l->top == 0 && l->nextra == 0 && l->extra_floor == 0)
        return NULL;
    char *hex = malloc(l->nwords * 16 + 1);
    json_t *extra = json_array();
    if (!hex || !extra) {
        free(hex);
        json_decref(extra);
        return NULL;
    }
    for (size_t i = 0; i < l->nwords; i++)
        snprintf(hex + 16 * i, 17, "%016" PRIx64, l->words[i]);
    hex[16 * l->nwords] = 0;
    for (size_t i = 0; i < l->nextra; i++)
        json_array_append_new(
            extra, json_pack("[I, I]", (json_int_t) l->extra[i].step, (json_int_t) l->extra[i].ordinal));
    json_t *j = json_pack("{s:I, s:s, s:I, s:I, s:o}", "base", (json_int_t) l->base, "words", hex, "top",
                          (json_int_t) l->top, "extra_floor", (json_int_t) l->extra_floor, "extra", extra);
    free(hex);
    return j;
}

/* A shard's exactly-once table, [client, highest, window] in hex each,
   while its view is held; an empty array unless `fill`. */
json_t *
psd_ckpt_state_dedup_json(psd_shard_t *shard, const psd_shard_view_t *view, bool fill)
{
    json_t *dedup = json_array();
    for (size_t c = 0; fill && dedup && c < view->ndedup; c++) {
        psd_dedup_t d;
        psd_shard_view_dedup(shard, c, &d);
        char id[17], hi[17], win[17];
        snprintf(id, sizeof id, "%016" PRIx64, d.client_id);
        snprintf(hi, sizeof hi, "%016" PRIx64, d.highest);
        snprintf(win, sizeof win, "%016" PRIx64, d.window);
        json_array_append_new(dedup, json_pack("[s, s, s]", id, hi, win));
    }
    return dedup;
}

static bool
s_hex64(json_t *j, uint64_t *ret)
{
    const char *t = json_string_value(j);
    if (!t || strlen(t) != 16)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(t, &end, 16);
    if (errno || *end)
        return false;
    *ret = (uint64_t) v;
    return true;
}

/* A file's "dedup": [[client, highest, window], ...] in 16 hex digits each;
   absent in checkpoints written before it was kept (an empty table). */
static int
s_parse_dedup(const char *where, json_t *list, psd_ckpt_state_t *e, zdist_error_t *err)
{
    if (!list)
        return 0;
    if (!json_is_array(list) || json_array_size(list) > PSD_DEDUP_MAX_CLIENTS)
        return s_bad(err, where, "'dedup' is not an array of at most 1024 clients");
    size_t n = json_array_size(list);
    if (n == 0)
        return 0;
    if (!(e->dedup = calloc(n, sizeof *e->dedup)))
        return zdist_error_set(err, -ENOMEM, "out of memory");
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c)
    {
        psd_dedup_t *d = &e->dedup[i];
        if (!json_is_array(c) || json_array_size(c) != 3 || !s_hex64(json_array_get(c, 0), &d->client_id) ||
            !s_hex64(json_array_get(c, 1), &d->highest) || !s_hex64(json_array_get(c, 2), &d->window) ||
            d->client_id == 0)
            return s_bad(err, where,
                         "a 'dedup' record is not [client, highest, window] in 16 hex "
                         "digits each");
    }
    e->ndedup = n;
    return 0;
}

/* A file's "steps" (psd_ckpt_state_ledger_json); absent in checkpoints written before
   writes were deduplicated by step (an empty ledger). */
static int
s_parse_ledger(const char *where, json_t *j, psd_ckpt_state_t *e, zdist_error_t *err)
{
    if (!j)
        return 0;
    json_int_t base, top, floor;
    const char *hex;
    json_t *extra;
    psd_ledger_t *l = &e->ledger;
    if (json_unpack(j, "{s:I, s:s, s:I, s:I, s:o}", "base", &base, "words", &hex, "top", &top, "extra_floor",
                    &floor, "extra", &extra) < 0 ||
        base < 0 || top < 0 || floor < 0 || !json_is_array(extra) || strlen(hex) % 16 != 0 ||
        strlen(hex) / 16 > PSD_LEDGER_WINDOW / 64 + 1 || json_array_size(extra) > PSD_LEDGER_MAX_EXTRA)
        return s_bad(err, where,
                     "'steps' is not {base, words (16 hex digits each, at most one "
                     "window), top, extra_floor, extra}");
    size_t nwords = strlen(hex) / 16, nextra = json_array_size(extra);
    if ((nwords && !(l->words = calloc(nwords, sizeof *l->words))) ||
        (nextra && !(l->extra = calloc(nextra, sizeof *l->extra))))
        return zdist_error_set(err, -ENOMEM, "out of memory");
    l->cap = nwords;
    l->extra_cap = nextra;
    for (size_t i = 0; i < nwords; i++) {
        char word[17];
        memcpy(word, hex + 16 * i, 16);
        word[16] = 0;
        if (strspn(word, "0123456789abcdef") != 16)
            return s_bad(err, where, "'steps' words are not 16 hex digits each");
        l->words[i] = (uint64_t) strtoull(word, NULL, 16);
    }
    l->nwords = nwords;
    size_t i;
    json_t *k;
    json_array_foreach(extra, i, k)
    {
        json_int_t step, ordinal;
        if (json_unpack(k, "[I, I]", &step, &ordinal) < 0 || step <= 0 || ordinal <= 0 ||
            ordinal > UINT32_MAX)
            return s_bad(err, where, "a 'steps' extra is not [step, ordinal >= 1]");
        l->extra[l->nextra++] = (psd_ledger_key_t){(uint64_t) step, (uint32_t) ordinal};
    }
    l->base = (uint64_t) base;
    l->top = (uint64_t) top;
    l->extra_floor = (uint64_t) floor;
    return 0;
}

/* The largest sequence <= from that every record counts as applied
   (records beyond their window count everything as applied, so the scan
   ends within 65 steps of the lowest highest). */
static uint64_t
s_common_highest(const psd_dedup_t *const *recs, size_t n, uint64_t from)
{
    for (uint64_t seq = from;; seq--) {
        bool all = true;
        for (size_t k = 0; k < n && all; k++)
            all = psd_dedup_seen(recs[k], seq);
        if (all || seq == 0)
            return seq;
    }
}

int
psd_ckpt_state_parse(json_t *dedup, json_t *steps, psd_ckpt_state_t *st, const char *where,
                     zdist_error_t *err)
{
    int rc = s_parse_dedup(where, dedup, st, err);
    if (rc == 0)
        rc = s_parse_ledger(where, steps, st, err);
    if (rc < 0)
        psd_ckpt_state_clear(st);
    return rc;
}

void
psd_ckpt_state_clear(psd_ckpt_state_t *st)
{
    free(st->dedup);
    st->dedup = NULL;
    st->ndedup = 0;
    psd_ledger_clear(&st->ledger);
}

int
psd_ckpt_state_intersect(const psd_ckpt_state_t *const *src, size_t nsrc, psd_dedup_table_t **ret,
                         zdist_error_t *err)
{
    *ret = NULL;
    if (nsrc > PSD_CKPT_STATE_MAX_SOURCES)
        nsrc = 0; /* too many to intersect: nothing counts as applied */
    psd_dedup_t *out = NULL;
    size_t nout = 0;
    if (nsrc > 0 && src[0]->ndedup > 0) {
        out = calloc(src[0]->ndedup, sizeof *out);
        if (!out)
            return zdist_error_set(err, -ENOMEM, "out of memory");
        for (size_t i = 0; i < src[0]->ndedup; i++) {
            const psd_dedup_t *recs[PSD_CKPT_STATE_MAX_SOURCES] = {&src[0]->dedup[i]};
            bool everywhere = true;
            for (size_t k = 1; k < nsrc && everywhere; k++) {
                everywhere = false;
                for (size_t j = 0; j < src[k]->ndedup && !everywhere; j++)
                    if (src[k]->dedup[j].client_id == recs[0]->client_id) {
                        recs[k] = &src[k]->dedup[j];
                        everywhere = true;
                    }
            }
            if (!everywhere)
                continue;
            uint64_t low = recs[0]->highest;
            for (size_t k = 1; k < nsrc; k++)
                if (recs[k]->highest < low)
                    low = recs[k]->highest;
            psd_dedup_t d = {.client_id = recs[0]->client_id};
            d.highest = s_common_highest(recs, nsrc, low);
            for (uint64_t b = 0; b < PSD_DEDUP_WINDOW && b < d.highest; b++) {
                bool all = true;
                for (size_t k = 0; k < nsrc && all; k++)
                    all = psd_dedup_seen(recs[k], d.highest - 1 - b);
                if (all)
                    d.window |= 1ULL << b;
            }
            out[nout++] = d;
        }
    }
    psd_dedup_table_t *table = psd_dedup_table_new(out, nout);
    free(out);
    if (!table)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    /* The steps applied: those every file counts (as the table above). */
    if (nsrc > 0) {
        const psd_ledger_t *ls[PSD_CKPT_STATE_MAX_SOURCES];
        for (size_t k = 0; k < nsrc; k++)
            ls[k] = &src[k]->ledger;
        psd_ledger_t ledger;
        if (psd_ledger_intersect(&ledger, ls, nsrc) < 0) {
            psd_dedup_table_destroy(&table);
            return zdist_error_set(err, -ENOMEM, "out of memory");
        }
        psd_dedup_table_set_ledger(table, &ledger);
    }
    *ret = table;
    return 0;
}
