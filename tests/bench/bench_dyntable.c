/* bench_dyntable: a dynamic embedding table (psd_dyntable) against a fixed table of the same rows.

   usage: bench_dyntable [--quick] [--fixed-huge-pages] [--rows N] [--dim D] [--batch B] [--reps R]

   Both tables hold the same N rows of D float32 values with adagrad's
   accumulator beside them: the dynamic one keyed by N random int64 ids
   (admitted by training lookups), the fixed one a plain array indexed by
   row, as a psd shard holds a variable (malloc'd: 4 KiB pages, while
   the dynamic table's big chunks and index are on 2 MiB huge pages where
   the kernel gives them; --fixed-huge-pages puts the fixed table there
   too, to tell the two effects apart). Each repetition draws B random rows
   (the same for both, duplicates possible as in a real batch) and times on
   each table, alternating which goes first:
     gather  B rows into a B x D buffer: psd_dyntable_lookup_train (every
             id has a row: the training path, counting nothing) against a
             memcpy per row;
     apply   B gradient rows with sparse adagrad: psd_dyntable_apply
             against zdist_optim_apply_sparse, the fixed shard's own call
             (both sum duplicate ids first).
   Prints the median over repetitions (other processes on the machine
   skew means) of ns per id for each, the ratio fixed time / dynamic time
   (1.0: as fast; issue 29 asks >= 0.8 end to end), and the dynamic table's bytes
   per row against its payload + slots. --quick: 100,000 rows, 20
   repetitions (ctest's entry); defaults: 1,048,576 rows, D 32, B 1024,
   200 repetitions. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "psd_arena.h"
#include "psd_dyntable.h"
#include "zdist/optim.h"
#include "zdist/parse.h"

typedef struct {
    int64_t rows, dim, batch, reps;
    bool huge; /* the fixed table on huge pages too */
} s_opts_t;

static int
s_usage(void)
{
    fprintf(
        stderr,
        "usage: bench_dyntable [--quick] [--fixed-huge-pages] [--rows N] [--dim D] [--batch B] [--reps R]\n");
    return 2;
}

static int64_t
s_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t
s_rand(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

static int
s_parse(int argc, char **argv, s_opts_t *o)
{
    *o = (s_opts_t){.rows = 1 << 20, .dim = 32, .batch = 1024, .reps = 200};
    for (int i = 1; i < argc; i++) {
        int64_t *dst = NULL, lo = 1, hi = INT64_C(1) << 30;
        if (strcmp(argv[i], "--fixed-huge-pages") == 0) {
            o->huge = true;
            continue;
        }
        if (strcmp(argv[i], "--quick") == 0) {
            o->rows = 100000;
            o->reps = 20;
            continue;
        }
        if (strcmp(argv[i], "--rows") == 0)
            dst = &o->rows;
        else if (strcmp(argv[i], "--dim") == 0)
            dst = &o->dim, hi = 65536;
        else if (strcmp(argv[i], "--batch") == 0)
            dst = &o->batch, hi = 1 << 24;
        else if (strcmp(argv[i], "--reps") == 0)
            dst = &o->reps;
        if (!dst || i + 1 >= argc || zdist_parse_int64(argv[++i], lo, hi, dst) < 0)
            return -EINVAL;
    }
    return 0;
}

/* One repetition's times, ns. */
typedef struct {
    int64_t gather_fixed, gather_dyn, apply_fixed, apply_dyn;
} s_times_t;

/* One repetition on both tables, the fixed one first when fixed_first. */
static int
s_rep(const s_opts_t *o, psd_dyntable_t *dyn, float *w, float *acc, const zdist_optim_config_t *cfg,
      zdist_optim_scratch_t *scratch, const int64_t *pos, const int64_t *ids, float *out, const float *g,
      uint64_t step, bool fixed_first, s_times_t *t)
{
    size_t row_bytes = (size_t) o->dim * sizeof(float), n = (size_t) o->batch;
    void *slots[1] = {acc};
    for (int pass = 0; pass < 2; pass++) {
        bool fixed = (pass == 0) == fixed_first;
        int64_t t0 = s_now_ns();
        if (fixed) {
            for (size_t i = 0; i < n; i++)
                memcpy(out + i * (size_t) o->dim, w + (size_t) pos[i] * (size_t) o->dim, row_bytes);
        } else if (psd_dyntable_lookup_train(dyn, ids, n, step, out) != 0) {
            return -EPROTO; /* every id has a row */
        }
        int64_t t1 = s_now_ns();
        int rc = fixed ? zdist_optim_apply_sparse(cfg, ZDIST_DTYPE_FLOAT32, (int64_t) step, w, slots, 0,
                                                  o->rows, o->dim, pos, n, g, scratch)
                       : psd_dyntable_apply(dyn, ids, n, g, step);
        int64_t t2 = s_now_ns();
        if (rc < 0)
            return rc;
        *(fixed ? &t->gather_fixed : &t->gather_dyn) = t1 - t0;
        *(fixed ? &t->apply_fixed : &t->apply_dyn) = t2 - t1;
    }
    return 0;
}

/* The dynamic table with o->rows random ids, admitted in batches; ids[] gets them. */
static psd_dyntable_t *
s_fill_dyn(const s_opts_t *o, const zdist_optim_config_t *cfg, int64_t *ids, float *buf)
{
    psd_dyntable_config_t c = {
        .name = "bench",
        .dim = o->dim,
        .seed = 1,
        .init = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -0.05, .maxval = 0.05},
        .optim = *cfg,
        .min_count = 1,
    };
    zdist_error_t err = {0};
    psd_dyntable_t *dyn = psd_dyntable_new(&c, &err);
    if (!dyn) {
        fprintf(stderr, "bench_dyntable: %s\n", err.text);
        return NULL;
    }
    uint64_t x = 0x2545f4914f6cdd1dULL;
    for (int64_t i = 0; i < o->rows; i++)
        ids[i] = (int64_t) s_rand(&x); /* distinct: xorshift64 does not repeat within 2^64 - 1 draws */
    for (int64_t at = 0; at < o->rows; at += o->batch) {
        size_t n = (size_t) (o->rows - at < o->batch ? o->rows - at : o->batch);
        psd_dyntable_lookup_train(dyn, ids + at, n, 1, buf);
    }
    psd_dyntable_stats_t st;
    psd_dyntable_stats(dyn, &st);
    if (st.rows != (uint64_t) o->rows) {
        fprintf(stderr, "bench_dyntable: %llu rows admitted, not %lld\n", (unsigned long long) st.rows,
                (long long) o->rows);
        psd_dyntable_destroy(&dyn);
    }
    return dyn;
}

static int
s_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

/* The median of field `off` over the repetitions, ns per id. */
static double
s_median(s_times_t *all, int64_t reps, size_t off, double batch)
{
    int64_t *v = malloc((size_t) reps * sizeof *v);
    if (!v)
        return 0;
    for (int64_t r = 0; r < reps; r++)
        v[r] = *(const int64_t *) ((const char *) &all[r] + off);
    qsort(v, (size_t) reps, sizeof *v, s_cmp_i64);
    double m = (double) v[reps / 2] / batch;
    free(v);
    return m;
}

static void
s_report(const s_opts_t *o, s_times_t *all, const psd_dyntable_t *dyn)
{
    double b = (double) o->batch;
    double gf = s_median(all, o->reps, offsetof(s_times_t, gather_fixed), b);
    double gd = s_median(all, o->reps, offsetof(s_times_t, gather_dyn), b);
    double af = s_median(all, o->reps, offsetof(s_times_t, apply_fixed), b);
    double ad = s_median(all, o->reps, offsetof(s_times_t, apply_dyn), b);
    psd_dyntable_stats_t st;
    psd_dyntable_stats(dyn, &st);
    double per_row = (double) st.bytes / (double) st.rows;
    double payload = (double) o->dim * sizeof(float) * 2; /* values + adagrad's accumulator */
    printf("rows=%lld dim=%lld batch=%lld reps=%lld fixed_pages=%s\n", (long long) o->rows,
           (long long) o->dim, (long long) o->batch, (long long) o->reps, o->huge ? "huge" : "4k");
    printf("gather        fixed_ns_per_id=%.1f dynamic_ns_per_id=%.1f ratio=%.2f\n", gf, gd, gf / gd);
    printf("apply_adagrad fixed_ns_per_id=%.1f dynamic_ns_per_id=%.1f ratio=%.2f\n", af, ad, af / ad);
    printf("memory        bytes_per_row=%.1f payload_and_slots=%.0f overhead_per_row=%.1f "
           "fixed_bytes_per_row=%.0f\n",
           per_row, payload, per_row - payload, payload);
}

int
main(int argc, char **argv)
{
    s_opts_t o;
    if (s_parse(argc, argv, &o) < 0)
        return s_usage();
    zdist_optim_config_t cfg;
    zdist_optim_config_default(&cfg, ZDIST_OPTIM_ADAGRAD);
    size_t dim = (size_t) o.dim, rows = (size_t) o.rows, n = (size_t) o.batch;
    int64_t *ids = malloc(rows * sizeof *ids), *pos = malloc(n * sizeof *pos),
            *bids = malloc(n * sizeof *bids);
    size_t fixed_bytes = rows * dim * sizeof(float);
    float *w = o.huge ? psd_arena_map(fixed_bytes) : malloc(fixed_bytes);
    float *acc = o.huge ? psd_arena_map(fixed_bytes) : malloc(fixed_bytes);
    float *out = malloc(n * dim * sizeof *out), *g = malloc(n * dim * sizeof *g);
    if (!ids || !pos || !bids || !w || !acc || !out || !g) {
        fprintf(stderr, "bench_dyntable: out of memory\n");
        return 1;
    }
    psd_dyntable_t *dyn = s_fill_dyn(&o, &cfg, ids, out);
    if (!dyn)
        return 1;
    for (size_t i = 0; i < rows * dim; i++)
        w[i] = 0.01f * (float) (i % 7);
    zdist_optim_slot_fill(&cfg, 0, ZDIST_DTYPE_FLOAT32, acc, rows * dim);
    for (size_t i = 0; i < n * dim; i++)
        g[i] = 0.001f * (float) (i % 13) - 0.006f;
    zdist_optim_scratch_t scratch = {0};
    s_times_t *all = calloc((size_t) o.reps, sizeof *all);
    if (!all)
        return 1;
    uint64_t x = 88172645463325252ULL;
    int rc = 0;
    for (int64_t r = 0; r < o.reps + 2 && rc == 0; r++) {
        for (size_t i = 0; i < n; i++) {
            pos[i] = (int64_t) (s_rand(&x) % rows);
            bids[i] = ids[pos[i]];
        }
        s_times_t *into = r < 2 ? &(s_times_t){0} : &all[r - 2]; /* two warm-up repetitions */
        rc = s_rep(&o, dyn, w, acc, &cfg, &scratch, pos, bids, out, g, (uint64_t) r + 2, r % 2 == 0, into);
    }
    if (rc < 0) {
        fprintf(stderr, "bench_dyntable: a repetition failed: %s\n", strerror(-rc));
        return 1;
    }
    s_report(&o, all, dyn);
    free(all);
    psd_dyntable_destroy(&dyn);
    zdist_optim_scratch_release(&scratch);
    free(ids);
    free(pos);
    free(bids);
    if (o.huge) {
        psd_arena_unmap(w, fixed_bytes);
        psd_arena_unmap(acc, fixed_bytes);
    } else {
        free(w);
        free(acc);
    }
    free(out);
    free(g);
    return 0;
}
