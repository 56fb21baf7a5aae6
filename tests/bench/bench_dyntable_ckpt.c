/* bench_dyntable_ckpt: 10^7 distinct ids over 2 simulated ps tasks admitted, trained, checkpointed (full,
   then a delta of 1%) and restored.

   usage: bench_dyntable_ckpt [--quick] [--ids N] [--dim D] [--change PCT] [--dir DIR]

   Two dynamic tables (psd_dyntable, adagrad: one slot), one per ps task,
   the ids split between them by zdist_partition_id_ps as the psds split
   them. Measured, in one run:
     admit    N distinct random int64 ids by training lookups (batches of
              4096), seconds and ids/s;
     train    one sparse adagrad update of every row, seconds;
     memory   each table's bytes per row against payload + slots (+ 48,
              the bound issue 29 sets), and the process's resident set;
     full     psd_dyntable_ckpt_save of both tables (the first save: a
              full), bytes and seconds per ps task, against the baseline:
              as many bytes written from memory through zdist_file_out
              (the same temp + fsync + rename) in 1 MiB pieces;
     delta    PCT % of the rows (default 1) updated, then the next save (a
              delta), bytes and seconds, and its ratio to the full's; and
              the time to find and order the rows each writes
              (psd_dyntable_iterate with a visitor doing nothing);
     restore  both tables destroyed, new ones restored from the delta's
              checkpoint (the full and its delta replayed), seconds per
              ps task; a sample of 100,000 ids checked against the
              values before the save (the bench fails on a difference).
   Files go to DIR (default: a new directory under /tmp), removed at the
   end. --quick: 20,000 ids of dim 8 (ctest's entry); defaults: 10^7 ids
   of dim 32. Times are wall clock on this machine, read by people. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "psd_dyntable_ckpt.h"
#include "zdist/file.h"
#include "zdist/parse.h"
#include "zdist/partition.h"

#define S_BATCH 4096
#define S_SAMPLE 100000
#define S_NPS 2

typedef struct {
    int64_t ids, dim, change;
    char dir[512];
    bool own_dir;
} s_opts_t;

static double
s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
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
    *o = (s_opts_t){.ids = 10000000, .dim = 32, .change = 1};
    for (int i = 1; i < argc; i++) {
        int64_t *dst = NULL, lo = 1, hi = INT64_C(1) << 31;
        if (strcmp(argv[i], "--quick") == 0) {
            o->ids = 20000;
            o->dim = 8;
            continue;
        }
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            snprintf(o->dir, sizeof o->dir, "%s", argv[++i]);
            continue;
        }
        if (strcmp(argv[i], "--ids") == 0)
            dst = &o->ids, lo = 100;
        else if (strcmp(argv[i], "--dim") == 0)
            dst = &o->dim, hi = 65536;
        else if (strcmp(argv[i], "--change") == 0)
            dst = &o->change, hi = 100;
        if (!dst || i + 1 >= argc || zdist_parse_int64(argv[++i], lo, hi, dst) < 0)
            return -EINVAL;
    }
    if (!o->dir[0]) {
        snprintf(o->dir, sizeof o->dir, "/tmp/bench-dyntable-ckpt-XXXXXX");
        if (!mkdtemp(o->dir))
            return -errno;
        o->own_dir = true;
    }
    return 0;
}

static psd_dyntable_t *
s_table(const s_opts_t *o)
{
    psd_dyntable_config_t c = {
        .name = "bench/emb",
        .dim = o->dim,
        .seed = 1,
        .init = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -0.05, .maxval = 0.05},
        .min_count = 1,
    };
    zdist_optim_config_default(&c.optim, ZDIST_OPTIM_ADAGRAD);
    zdist_error_t err = {0};
    psd_dyntable_t *t = psd_dyntable_new(&c, &err);
    if (!t)
        fprintf(stderr, "bench_dyntable_ckpt: %s\n", err.text);
    return t;
}

/* Per ps task: a batch of its ids being gathered. */
typedef struct {
    int64_t ids[S_BATCH];
    size_t n;
} s_batch_t;

/* Routes ids[0..n) to their tables in batches: lookup_train into buf, or apply of grads. */
static int
s_route(psd_dyntable_t **tables, const int64_t *ids, size_t n, bool apply, uint64_t step, float *buf,
        const float *grads)
{
    static s_batch_t b[S_NPS];
    for (size_t i = 0; i <= n; i++) {
        for (int p = 0; p < S_NPS; p++) {
            bool flush = b[p].n == S_BATCH || (i == n && b[p].n > 0);
            if (!flush)
                continue;
            if (apply) {
                int rc = psd_dyntable_apply(tables[p], b[p].ids, b[p].n, grads, step);
                if (rc < 0)
                    return rc;
            } else {
                psd_dyntable_lookup_train(tables[p], b[p].ids, b[p].n, step, buf);
            }
            b[p].n = 0;
        }
        if (i < n) {
            int p = zdist_partition_id_ps(ids[i], S_NPS);
            b[p].ids[b[p].n++] = ids[i];
        }
    }
    return 0;
}

static long
s_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* The I/O floor: bytes written crash-safe from memory; seconds. */
static double
s_baseline(const s_opts_t *o, uint64_t bytes)
{
    char path[600];
    snprintf(path, sizeof path, "%s/baseline.bin", o->dir);
    static char chunk[1 << 20];
    memset(chunk, 0x5a, sizeof chunk);
    zdist_error_t err = {0};
    double t0 = s_now();
    zdist_file_out_t *out = zdist_file_out_new(path, 0644, &err);
    for (uint64_t at = 0; out && at < bytes; at += sizeof chunk)
        zdist_file_out_write(out, chunk, bytes - at < sizeof chunk ? (size_t) (bytes - at) : sizeof chunk);
    int rc = out ? zdist_file_out_commit(&out, NULL, NULL, &err) : -EIO;
    double secs = s_now() - t0;
    unlink(path);
    return rc < 0 ? -1 : secs;
}

static int
s_nothing(const psd_dyntable_row_t *row, void *arg)
{
    (void) row;
    (void) arg;
    return 0;
}

/* Seconds to find and order the rows a full (changed_only false) or a delta writes, over both tables. */
static double
s_order(psd_dyntable_t **tables, bool changed_only)
{
    double t0 = s_now();
    for (int p = 0; p < S_NPS; p++)
        psd_dyntable_iterate(tables[p], changed_only, s_nothing, NULL);
    return s_now() - t0;
}

/* Saves both tables at step into DIR/ckpt-STEP; prints a line per ps task. */
static int
s_save(const s_opts_t *o, psd_dyntable_t **tables, psd_dyntable_ckpt_t **ck, int64_t step,
       uint64_t *ret_bytes, double *ret_secs)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ckpt-%" PRId64, o->dir, step);
    *ret_bytes = 0;
    *ret_secs = 0;
    for (int p = 0; p < S_NPS; p++) {
        psd_dyntable_ckpt_table_t t = {"bench/emb", tables[p], NULL};
        psd_dyntable_ckpt_saved_t s;
        zdist_error_t err = {0};
        double t0 = s_now();
        int rc = psd_dyntable_ckpt_save(ck[p], &t, 1, dir, step, p, S_NPS, &s, &err);
        double secs = s_now() - t0;
        if (rc < 0) {
            fprintf(stderr, "bench_dyntable_ckpt: save: %s\n", err.text);
            return rc;
        }
        printf("save          ps=%d kind=%s rows=%" PRIu64 " bytes=%" PRIu64 " seconds=%.3f MB_per_s=%.0f\n",
               p, s.full ? "full" : "delta", s.rows, s.bytes, secs, (double) s.bytes / 1e6 / secs);
        *ret_bytes += s.bytes;
        *ret_secs += secs;
    }
    return 0;
}

/* Restores both tables from DIR/ckpt-STEP into new ones. */
static int
s_restore(const s_opts_t *o, psd_dyntable_t **tables, int64_t step)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ckpt-%" PRId64, o->dir, step);
    for (int p = 0; p < S_NPS; p++) {
        psd_dyntable_ckpt_t *ck = psd_dyntable_ckpt_new(10);
        psd_dyntable_ckpt_table_t t = {"bench/emb", tables[p] = s_table(o), NULL};
        psd_dyntable_ckpt_restored_t r;
        zdist_error_t err = {0};
        double t0 = s_now();
        int rc = t.table && ck ? psd_dyntable_ckpt_restore(ck, &t, 1, dir, p, S_NPS, 0, &r, &err) : -ENOMEM;
        double secs = s_now() - t0;
        psd_dyntable_ckpt_destroy(&ck);
        if (rc < 0) {
            fprintf(stderr, "bench_dyntable_ckpt: restore: %s\n", err.text);
            return rc;
        }
        printf("restore       ps=%d rows=%" PRIu64 " skipped=%" PRIu64 " seconds=%.3f rows_per_s=%.0f\n", p,
               r.rows, r.skipped, secs, (double) r.rows / secs);
    }
    return 0;
}

static void
s_memory(const s_opts_t *o, psd_dyntable_t **tables)
{
    double payload = (double) o->dim * sizeof(float) * 2; /* values + adagrad's accumulator */
    for (int p = 0; p < S_NPS; p++) {
        psd_dyntable_stats_t st;
        psd_dyntable_stats(tables[p], &st);
        double per_row = (double) st.bytes / (double) st.rows;
        printf("memory        ps=%d rows=%" PRIu64 " bytes=%" PRIu64
               " bytes_per_row=%.1f payload_and_slots=%.0f "
               "overhead_per_row=%.1f bound=%.0f\n",
               p, st.rows, st.bytes, per_row, payload, per_row - payload, payload + 48);
    }
    printf("memory        process_rss_MiB=%.0f\n", (double) s_rss_kib() / 1024.0);
}

/* The sample's values now, into out (S_SAMPLE x dim). */
static void
s_sample(psd_dyntable_t **tables, const int64_t *sample, size_t n, int64_t dim, float *out)
{
    for (size_t i = 0; i < n; i++)
        psd_dyntable_lookup_eval(tables[zdist_partition_id_ps(sample[i], S_NPS)], &sample[i], 1,
                                 out + i * (size_t) dim);
}

static int
s_run(const s_opts_t *o, int64_t *ids, float *buf, const float *grads, float *want, float *got,
      int64_t *sample, size_t nsample)
{
    psd_dyntable_t *tables[S_NPS] = {s_table(o), s_table(o)};
    psd_dyntable_ckpt_t *ck[S_NPS] = {psd_dyntable_ckpt_new(10), psd_dyntable_ckpt_new(10)};
    if (!tables[0] || !tables[1] || !ck[0] || !ck[1])
        return -ENOMEM;
    size_t n = (size_t) o->ids, dim = (size_t) o->dim;
    double t0 = s_now();
    int rc = s_route(tables, ids, n, false, 1, buf, grads);
    double t1 = s_now();
    printf("admit         ids=%zu seconds=%.3f ids_per_s=%.0f\n", n, t1 - t0, (double) n / (t1 - t0));
    if (rc == 0)
        rc = s_route(tables, ids, n, true, 1, buf, grads);
    printf("train         rows=%zu seconds=%.3f (one adagrad update each)\n", n, s_now() - t1);
    s_memory(o, tables);
    uint64_t full_bytes = 0, delta_bytes = 0;
    double full_secs = 0, delta_secs = 0, order_full = s_order(tables, false);
    if (rc == 0)
        rc = s_save(o, tables, ck, 1, &full_bytes, &full_secs);
    double base = rc == 0 ? s_baseline(o, full_bytes) : -1;
    printf("baseline      bytes=%" PRIu64 " seconds=%.3f MB_per_s=%.0f full_save_over_baseline=%.2f\n",
           full_bytes, base, (double) full_bytes / 1e6 / base, full_secs / base);
    size_t nchange = n * (size_t) o->change / 100;
    uint64_t x = 0x1234567887654321ULL;
    for (size_t i = 0; rc == 0 && i < nchange; i++) { /* a random PCT % of the rows (Fisher-Yates) */
        size_t j = i + (size_t) (s_rand(&x) % (n - i));
        int64_t t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
    if (rc == 0)
        rc = s_route(tables, ids, nchange, true, 2, buf, grads);
    double order_delta = s_order(tables, true);
    printf("order         full_seconds=%.3f delta_seconds=%.4f (finding and sorting the rows each writes)\n",
           order_full, order_delta);
    if (rc == 0)
        rc = s_save(o, tables, ck, 2, &delta_bytes, &delta_secs);
    if (rc == 0)
        printf("checkpoint    full_bytes=%" PRIu64 " full_seconds=%.3f delta_rows=%zu delta_bytes=%" PRIu64
               " delta_seconds=%.3f bytes_ratio=%.4f seconds_ratio=%.4f\n",
               full_bytes, full_secs, nchange, delta_bytes, delta_secs,
               (double) delta_bytes / (double) full_bytes, delta_secs / full_secs);
    s_sample(tables, sample, nsample, o->dim, want);
    for (int p = 0; p < S_NPS; p++) {
        psd_dyntable_destroy(&tables[p]);
        psd_dyntable_ckpt_destroy(&ck[p]);
    }
    if (rc == 0)
        rc = s_restore(o, tables, 2);
    if (rc == 0) {
        s_sample(tables, sample, nsample, o->dim, got);
        if (memcmp(want, got, nsample * dim * sizeof(float)) != 0) {
            fprintf(stderr, "bench_dyntable_ckpt: restored values differ from the saved ones\n");
            rc = -EPROTO;
        }
    }
    for (int p = 0; p < S_NPS; p++)
        psd_dyntable_destroy(&tables[p]);
    return rc;
}

int
main(int argc, char **argv)
{
    s_opts_t o;
    if (s_parse(argc, argv, &o) < 0) {
        fprintf(stderr,
                "usage: bench_dyntable_ckpt [--quick] [--ids N] [--dim D] [--change PCT] [--dir DIR]\n");
        return 2;
    }
    size_t n = (size_t) o.ids, dim = (size_t) o.dim, nsample = n < S_SAMPLE ? n : S_SAMPLE;
    int64_t *ids = malloc(n * sizeof *ids), *sample = malloc(nsample * sizeof *sample);
    float *buf = malloc(S_BATCH * dim * sizeof *buf), *grads = malloc(S_BATCH * dim * sizeof *grads);
    float *want = malloc(nsample * dim * sizeof *want), *got = malloc(nsample * dim * sizeof *got);
    if (!ids || !sample || !buf || !grads || !want || !got) {
        fprintf(stderr, "bench_dyntable_ckpt: out of memory\n");
        return 1;
    }
    uint64_t x = 0x2545f4914f6cdd1dULL;
    for (size_t i = 0; i < n; i++)
        ids[i] = (int64_t) s_rand(&x); /* distinct: xorshift64 does not repeat within 2^64 - 1 draws */
    for (size_t i = 0; i < nsample; i++)
        sample[i] = ids[i * (n / nsample)];
    for (size_t i = 0; i < S_BATCH * dim; i++)
        grads[i] = 0.001f * (float) (i % 13) - 0.006f;
    printf("ids=%zu dim=%zu ps=%d optimizer=adagrad change=%" PRId64 "%% dir=%s\n", n, dim, S_NPS, o.change,
           o.dir);
    int rc = s_run(&o, ids, buf, grads, want, got, sample, nsample);
    if (o.own_dir) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", o.dir);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_dyntable_ckpt: could not remove %s\n", o.dir);
    }
    free(ids);
    free(sample);
    free(buf);
    free(grads);
    free(want);
    free(got);
    if (rc < 0)
        fprintf(stderr, "bench_dyntable_ckpt: failed: %s\n", strerror(-rc));
    return rc < 0 ? 1 : 0;
}
