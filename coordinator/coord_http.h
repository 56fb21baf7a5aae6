/* coord_http: what zdist-coordinator serves over --http besides its RPC counters: the jobs' Prometheus
   metrics (from the status details the runners send) and the dashboard page. */
#ifndef COORD_HTTP_H
#define COORD_HTTP_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "coord_events.h"
#include "coord_table.h"
#include "zdist/http.h"
#include "zdist/rpc.h"

typedef struct {
    const char *id, *name, *state;
    int64_t step, steps;
    json_t *detail; /* the runner's STATUS detail (borrowed; may be NULL) */
} coord_http_job_t;

/* Families zdist_coordinator_job_* and zdist_coordinator_worker_* /
   _ps_*, labelled {job_id="ID"} (not "job": Prometheus keeps that for the scrape job) (and worker="N",
   ps="N"). */
void coord_http_jobs_metrics(FILE *out, const coord_http_job_t *jobs, size_t n);

/* What the --http pages show (borrowed; the server's thread only, as the
   handler runs on its loop). */
typedef struct {
    coord_table_t *table;
    const coord_events_t *events;
    zdist_rpc_server_t *rpc;
    int num_workers, num_ps;
    /* The cluster's workers as the chief knows them now: joined through
       JOIN, left for good (the server updates num_workers as they join). */
    const char (*workers)[256];
    const bool *joined, *left;
} coord_http_view_t;
/* zdist_daemon_http's handler, arg a coord_http_view_t: "/" the dashboard,
   "/api/status" its JSON (jobs with their loss curves and evaluations, the
   recent events, the cluster's workers with their membership), "/metrics" (the RPC counters, the jobs by state and the
   jobs' families), else 404. */
void coord_http_handle(void *arg, const char *path, zdist_http_reply_t *reply);

/* coordinator/dashboard.html, embedded at build time (NUL-terminated). */
extern const char coord_dashboard_html[];

#endif
