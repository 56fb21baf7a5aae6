/* prom: the Prometheus text exposition format. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "zdist/prom.h"

void
zdist_prom_family(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s ", name);
    for (const char *p = help; *p; p++) {
        if (*p == '\\')
            fputs("\\\\", out);
        else if (*p == '\n')
            fputs("\\n", out);
        else
            fputc(*p, out);
    }
    fprintf(out, "\n# TYPE %s %s\n", name, type);
}

static void
s_value(FILE *out, double v)
{
    if (isnan(v))
        fputs("NaN", out);
    else if (isinf(v))
        fputs(v > 0 ? "+Inf" : "-Inf", out);
    else if (v == floor(v) && fabs(v) < 1e15)
        fprintf(out, "%.0f", v);
    else
        fprintf(out, "%.9g", v);
}

static void
s_labels(FILE *out, const char *const *labels, int n, const char *le)
{
    if (n <= 0 && !le)
        return;
    fputc('{', out);
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s%s=\"", i ? "," : "", labels[2 * i]);
        for (const char *p = labels[2 * i + 1] ? labels[2 * i + 1] : ""; *p; p++) {
            if (*p == '\\' || *p == '"')
                fprintf(out, "\\%c", *p);
            else if (*p == '\n')
                fputs("\\n", out);
            else
                fputc(*p, out);
        }
        fputc('"', out);
    }
    if (le)
        fprintf(out, "%sle=\"%s\"", n > 0 ? "," : "", le);
    fputc('}', out);
}

void
zdist_prom_sample_v(FILE *out, const char *name, const char *const *labels, int n, double value)
{
    fputs(name, out);
    s_labels(out, labels, n, NULL);
    fputc(' ', out);
    s_value(out, value);
    fputc('\n', out);
}

void
zdist_prom_sample(FILE *out, const char *name, double value, ...)
{
    const char *labels[16];
    int n = 0;
    va_list ap;
    va_start(ap, value);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k || n >= 8)
            break;
        labels[2 * n] = k;
        labels[2 * n + 1] = va_arg(ap, const char *);
        n++;
    }
    va_end(ap);
    zdist_prom_sample_v(out, name, labels, n, value);
}

void
zdist_prom_histogram_init_seconds(zdist_prom_histogram_t *h)
{
    static const double le[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
    memset(h, 0, sizeof *h);
    h->n = (int) (sizeof le / sizeof le[0]);
    memcpy(h->le, le, sizeof le);
}

void
zdist_prom_histogram_observe(zdist_prom_histogram_t *h, double value)
{
    if (isnan(value))
        return;
    int b = 0;
    while (b < h->n && value > h->le[b])
        b++;
    h->counts[b]++;
    h->sum += value;
    h->count++;
}

void
zdist_prom_histogram_write(FILE *out, const char *name, const char *const *labels, int n,
                           const zdist_prom_histogram_t *h)
{
    char metric[256], le[32];
    uint64_t cum = 0;
    snprintf(metric, sizeof metric, "%s_bucket", name);
    for (int b = 0; b <= h->n; b++) {
        cum += h->counts[b];
        if (b < h->n)
            snprintf(le, sizeof le, "%g", h->le[b]);
        else
            snprintf(le, sizeof le, "+Inf");
        fputs(metric, out);
        s_labels(out, labels, n, le);
        fprintf(out, " %llu\n", (unsigned long long) cum);
    }
    snprintf(metric, sizeof metric, "%s_sum", name);
    zdist_prom_sample_v(out, metric, labels, n, h->sum);
    snprintf(metric, sizeof metric, "%s_count", name);
    zdist_prom_sample_v(out, metric, labels, n, (double) h->count);
}
