/* Prometheus text exposition (format 0.0.4): HELP/TYPE lines, samples with
   escaped labels, and histograms with fixed buckets. For the /metrics page
   every zdist daemon serves over --http (zdist/http.h). */
#ifndef ZDIST_PROM_H
#define ZDIST_PROM_H

#include <stdint.h>
#include <stdio.h>

#include "zdist/defs.h"

#define ZDIST_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define ZDIST_PROM_MAX_BUCKETS 20

/* "# HELP name help" and "# TYPE name type" (type: counter, gauge,
   histogram). Once per metric family, before its samples. */
ZDIST_EXPORT void zdist_prom_family(FILE *out, const char *name, const char *type, const char *help);
/* One sample: `name{labels} value`. labels: NULL, or pairs of label name
   and value, NULL-terminated (values are escaped: \ " and newline). NaN and
   infinities are written as Prometheus spells them. */
ZDIST_EXPORT void zdist_prom_sample(FILE *out, const char *name, double value, ...);
/* Same, the label pairs as an array of 2*n strings. */
ZDIST_EXPORT void zdist_prom_sample_v(FILE *out, const char *name, const char *const *labels, int n,
                                      double value);

/* A histogram of non-negative values (seconds), cumulative at its bounds. */
typedef struct {
    int n; /* bounds, ascending (+Inf implicit) */
    double le[ZDIST_PROM_MAX_BUCKETS];
    uint64_t counts[ZDIST_PROM_MAX_BUCKETS + 1]; /* per bucket, not cumulative; last: above every bound */
    double sum;
    uint64_t count;
} zdist_prom_histogram_t;

/* Bounds for durations from 100 us to 60 s. */
ZDIST_EXPORT void zdist_prom_histogram_init_seconds(zdist_prom_histogram_t *h);
ZDIST_EXPORT void zdist_prom_histogram_observe(zdist_prom_histogram_t *h, double value);
/* name_bucket{labels,le="..."} (cumulative), name_sum, name_count. The
   family line (type histogram) is the caller's, once. */
ZDIST_EXPORT void zdist_prom_histogram_write(FILE *out, const char *name, const char *const *labels, int n,
                                             const zdist_prom_histogram_t *h);

#endif
