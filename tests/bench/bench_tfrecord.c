/* bench_tfrecord: TFRecord reading and tf.train.Example parsing into batches
   against `cat` of the same files, in the same run, on Criteo-schema data
   from zdist's generator (which is timed too). One thread reads and parses:
   the figures are per core. Usage:
     bench_tfrecord [--rows N] [--batch B] [--dir DIR] [--quick] */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_raw.h"
#include "zdist/criteo.h"
#include "zdist/example.h"
#include "zdist/input.h"
#include "zdist/tfrecord.h"

static double
s_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

static zdist_example_parser_t *
s_criteo_parser(void)
{
    zdist_feature_spec_t spec[ZDIST_CRITEO_FEATURES];
    int n = ZDIST_CRITEO_FEATURES;
    zdist_criteo_feature_specs(spec);
    zdist_error_t err = {0};
    zdist_example_parser_t *p = zdist_example_parser_new(spec, n, &err);
    if (!p)
        fprintf(stderr, "bench_tfrecord: %s\n", err.text);
    return p;
}

/* Reads and parses one file in batches; returns record bytes, -1 on error. */
static int64_t
s_read(const char *path, zdist_tfrecord_compression_t c, int64_t batch, zdist_example_parser_t *p, int64_t *rows)
{
    zdist_error_t err = {0};
    zdist_tfrecord_reader_t *r = zdist_tfrecord_reader_open(path, c, &err);
    if (!r)
        return fprintf(stderr, "bench_tfrecord: %s\n", err.text), -1;
    const uint8_t *d;
    size_t len;
    int64_t bytes = 0;
    int rc;
    while ((rc = zdist_tfrecord_reader_next(r, &d, &len, &err)) == 1) {
        if (zdist_example_parser_add(p, d, len, &err) < 0)
            break;
        bytes += (int64_t) len + 16;
        if (zdist_example_parser_rows(p) == batch) {
            *rows += batch;
            zdist_example_parser_clear(p);
        }
    }
    *rows += zdist_example_parser_rows(p);
    zdist_example_parser_clear(p);
    zdist_tfrecord_reader_destroy(&r);
    if (rc < 0 || err.code)
        return fprintf(stderr, "bench_tfrecord: %s\n", err.text), -1;
    return bytes;
}

/* The input pipeline: the files loaded as a "format": "tfrecord" job loads
   them (parsed into named columns, the label, the float features dense),
   then one shuffled epoch of batches gathered into the input's buffers.
   Seconds of each into ret[2]; -1 on error. */
static int
s_pipeline(const char *p0, const char *p1, zdist_tfrecord_compression_t c, int64_t batch, int64_t rows, double ret[2])
{
    zdist_feature_spec_t spec[ZDIST_CRITEO_FEATURES];
    zdist_criteo_feature_specs(spec);
    const char *paths[2] = {p0, p1};
    int n = 2;
    zdist_input_spec_t is = {.format = ZDIST_INPUT_FORMAT_TFRECORD, .paths = paths, .n_paths = (size_t) n,
                             .compression = c, .features = spec, .n_features = ZDIST_CRITEO_FEATURES,
                             .label = "label"};
    zdist_error_t err = {0};
    zdist_dataset_t *ds = NULL;
    double t0 = s_now();
    if (zdist_dataset_load(&is, NULL, ZDIST_AUTO_SHARD_OFF, &ds, NULL, &err) < 0)
        return fprintf(stderr, "bench_tfrecord: %s\n", err.text), -1;
    ret[0] = s_now() - t0;
    zdist_input_options_t o;
    zdist_input_options_init(&o, batch);
    o.shuffle = true;
    zdist_input_t *in = zdist_input_new(ds, NULL, &o, &err);
    if (!in || zdist_dataset_size(ds) != rows) {
        zdist_dataset_destroy(&ds);
        return fprintf(stderr, "bench_tfrecord: %s\n", in ? "rows differ" : err.text), -1;
    }
    const zdist_input_step_t *st;
    int64_t seen = 0;
    t0 = s_now();
    while (zdist_input_next(in, &st) == 1)
        seen += st->size;
    ret[1] = s_now() - t0;
    zdist_input_destroy(&in);
    zdist_dataset_destroy(&ds);
    return seen == rows ? 0 : -1;
}

int
main(int argc, char **argv)
{
    int64_t rows = 2000000, batch = 4096;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    static const struct option opts[] = {{"rows", required_argument, NULL, 'r'}, {"batch", required_argument, NULL, 'b'},
                                         {"dir", required_argument, NULL, 'd'},  {"quick", no_argument, NULL, 'q'},
                                         {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0}};
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (o) {
        case 'r': rows = strtoll(optarg, NULL, 10); break;
        case 'b': batch = strtoll(optarg, NULL, 10); break;
        case 'd': base = optarg; break;
        case 'q': rows = 20000; break;
        case 'h': printf("usage: bench_tfrecord [--rows N] [--batch B] [--dir DIR] [--quick]\n"); return 0;
        default: return 2;
        }
    }
    char dir[4096], cmd[16384];
    snprintf(dir, sizeof dir, "%s/zdist-bench-tfrecord.%d", base, (int) getpid());
    zdist_criteo_options_t o = zdist_criteo_defaults(rows);
    o.test_fraction = 0.5;
    zdist_criteo_report_t plain, gz;
    zdist_error_t err = {0};
    char gzdir[4200];
    snprintf(gzdir, sizeof gzdir, "%s/gz", dir);
    if (zdist_criteo_generate(dir, &o, &plain, &err) < 0)
        return fprintf(stderr, "bench_tfrecord: %s\n", err.text), 1;
    o.compression = ZDIST_TFRECORD_GZIP;
    if (zdist_criteo_generate(gzdir, &o, &gz, &err) < 0)
        return fprintf(stderr, "bench_tfrecord: %s\n", err.text), 1;
    printf("generator: %lld rows in %.2f s plain (%.0f rows/s, %.1f MB), %.2f s GZIP; teacher AUC %.4f, "
           "log loss %.4f, positives %.3f\n",
           (long long) rows, plain.seconds, (double) rows / plain.seconds, (double) plain.bytes / 1e6, gz.seconds,
           plain.teacher_auc, plain.teacher_logloss, plain.positive_rate);

    zdist_example_parser_t *p = s_criteo_parser();
    if (!p)
        return 1;
    char files[2][4300], gzfile[2][4400];
    for (int s = 0; s < 2; s++) {
        snprintf(files[s], sizeof files[s], "%s/%s/part-00000.tfrecord", dir, s ? "test" : "train");
        snprintf(gzfile[s], sizeof gzfile[s], "%s/%s/part-00000.tfrecord.gz", gzdir, s ? "test" : "train");
    }
    /* Round 0 warms the page cache and the parser's buffers and is not
       counted; the table gives each case's median over the counted rounds. */
    enum { S_ROUNDS = 5 };
    double cat_s[S_ROUNDS], plain_s[S_ROUNDS], gz_s[S_ROUNDS], load_s[S_ROUNDS], iter_s[S_ROUNDS], gzload_s[S_ROUNDS];
    int64_t bytes = 0;
    for (int round = 0; round <= S_ROUNDS; round++) {
        snprintf(cmd, sizeof cmd, "cat '%s' '%s' > /dev/null", files[0], files[1]);
        double t0 = s_now();
        if (system(cmd) != 0)
            return 1;
        double t_cat = s_now() - t0;
        int64_t n = 0, ngz = 0;
        bytes = 0;
        t0 = s_now();
        for (int s = 0; s < 2; s++)
            bytes += s_read(files[s], ZDIST_TFRECORD_NONE, batch, p, &n);
        double t_plain = s_now() - t0;
        t0 = s_now();
        for (int s = 0; s < 2; s++)
            s_read(gzfile[s], ZDIST_TFRECORD_GZIP, batch, p, &ngz);
        double t_gz = s_now() - t0;
        if (n != rows || ngz != rows)
            return fprintf(stderr, "bench_tfrecord: read %lld and %lld rows of %lld\n", (long long) n,
                           (long long) ngz, (long long) rows),
                   1;
        double pipe[2], gzpipe[2];
        if (s_pipeline(files[0], files[1], ZDIST_TFRECORD_NONE, batch, rows, pipe) < 0 ||
            s_pipeline(gzfile[0], gzfile[1], ZDIST_TFRECORD_GZIP, batch, rows, gzpipe) < 0)
            return 1;
        if (round > 0) {
            cat_s[round - 1] = t_cat, plain_s[round - 1] = t_plain, gz_s[round - 1] = t_gz;
            load_s[round - 1] = pipe[0], iter_s[round - 1] = pipe[1], gzload_s[round - 1] = gzpipe[0];
        }
    }
    double c = bench_median(cat_s, S_ROUNDS), t = bench_median(plain_s, S_ROUNDS), g = bench_median(gz_s, S_ROUNDS);
    printf("medians of %d warmed rounds, one thread, %.1f MB of records\n", S_ROUNDS, (double) bytes / 1e6);
    printf("%-26s %10s %10s %8s\n", "", "MB/s", "rows/s", "vs cat");
    printf("%-26s %10.0f %10s %8s\n", "cat", (double) bytes / c / 1e6, "-", "1.00");
    printf("%-26s %10.0f %10.0f %8.2f\n", "TFRecord + parse", (double) bytes / t / 1e6, (double) rows / t, c / t);
    printf("%-26s %10.0f %10.0f %8.2f\n", "GZIP TFRecord + parse", (double) bytes / g / 1e6, (double) rows / g, c / g);
    /* the job's input: the dataset loaded (columns), then one shuffled epoch gathered into batches */
    double l = bench_median(load_s, S_ROUNDS), it = bench_median(iter_s, S_ROUNDS);
    double gl = bench_median(gzload_s, S_ROUNDS);
    printf("%-26s %10.0f %10.0f %8.2f\n", "load into columns", (double) bytes / l / 1e6, (double) rows / l, c / l);
    printf("%-26s %10s %10.0f %8s\n", "epoch of shuffled batches", "-", (double) rows / it, "-");
    printf("%-26s %10.0f %10.0f %8.2f\n", "load + batches", (double) bytes / (l + it) / 1e6, (double) rows / (l + it),
           c / (l + it));
    printf("%-26s %10.0f %10.0f %8.2f\n", "GZIP load + batches", (double) bytes / (gl + it) / 1e6,
           (double) rows / (gl + it), c / (gl + it));
    zdist_example_parser_destroy(&p);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
