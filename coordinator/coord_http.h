/* coord_http: what zdist-coordinator serves over --http besides its RPC counters: the jobs' Prometheus
   metrics (from the status details the runners send) and the dashboard page. */
#ifndef COORD_HTTP_H
#define COORD_HTTP_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    const char *id, *name, *state;
    int64_t step, steps;
    json_t *detail; /* the runner's STATUS detail (borrowed; may be NULL) */
} coord_http_job_t;

/* Families zdist_coordinator_job_* and zdist_coordinator_worker_* /
   _ps_*, labelled {job_id="ID"} (not "job": Prometheus keeps that for the scrape job) (and worker="N",
   ps="N"). */
void coord_http_jobs_metrics(FILE *out, const coord_http_job_t *jobs, size_t n);

/* coordinator/dashboard.html, embedded at build time (NUL-terminated). */
extern const char coord_dashboard_html[];

#endif
