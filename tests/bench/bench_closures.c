/* bench_closures: dispatch overhead of the libzdist ClusterCoordinator, in closures per second.

   usage: bench_closures [--per-dispatch N] JOB.json CLOSURES IN_FLIGHT tcp://WORKER... -- tcp://PS...

   Real zdist-worker and zdist-psd tasks (started by bench_coord.sh) get a
   parameter_server job whose step costs next to nothing (linear_regression
   on a 1-dimensional synthetic dataset, batch 1), so a closure of one step
   measures the coordinator's path: RUN_STEPS to a worker, the worker's
   pull and push on the ps tasks, the reply. CLOSURES closures of one step
   are scheduled at once and joined, with IN_FLIGHT RUN_STEPS messages
   pipelined per worker, each carrying up to N closures (--per-dispatch,
   default the coordinator's; 1: one closure per message); a warm-up of
   min(CLOSURES/10, 50) closures runs first. Every closure must come back
   with its one step (else exit 1): batching must not lose or merge any.

   Prints one line: closures=N workers=W in_flight=K per_dispatch=N seconds=S closures_per_sec=R us_per_closure=U */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/coordinator.h"
#include "zdist/job.h"
#include "zdist/parse.h"
#include "zdist/sys.h"

#define S_MAX_TASKS 64

static int
s_usage(void)
{
    fprintf(stderr,
            "usage: bench_closures [--per-dispatch N] JOB.json CLOSURES IN_FLIGHT tcp://WORKER... -- tcp://PS...\n");
    return 2;
}

/* Schedules n closures of one step and joins them; 0 or the first error.
   Every closure must report exactly its one step. */
static int
s_round(zdist_coordinator_t *coord, int64_t n, zdist_error_t *err)
{
    for (int64_t c = 0; c < n; c++)
        if (!zdist_coordinator_schedule(coord, 1))
            return zdist_error_set(err, -ENOMEM, "out of memory scheduling closure %lld", (long long) c);
    int rc = zdist_coordinator_join(coord, err);
    if (rc < 0)
        return rc;
    zdist_closure_result_t r;
    int64_t results = 0, bad = 0;
    while (zdist_coordinator_next_result(coord, &r)) {
        results++;
        bad += r.steps != 1 || r.end_of_data;
    }
    if (results != n || bad)
        return zdist_error_set(err, -EPROTO, "%lld closures of 1 step: %lld results, %lld not of exactly 1 step",
                               (long long) n, (long long) results, (long long) bad);
    return 0;
}

int
main(int argc, char **argv)
{
    int64_t per_dispatch = 0;
    if (argc > 2 && strcmp(argv[1], "--per-dispatch") == 0) {
        if (zdist_parse_int64(argv[2], 1, 64, &per_dispatch) < 0) {
            fprintf(stderr, "bench_closures: --per-dispatch takes 1..64 closures per RUN_STEPS\n");
            return s_usage();
        }
        argv += 2;
        argc -= 2;
    }
    if (argc < 6)
        return s_usage();
    int64_t closures = 0, in_flight = 0;
    if (zdist_parse_int64(argv[2], 1, INT64_C(10000000), &closures) < 0 ||
        zdist_parse_int64(argv[3], 1, 16, &in_flight) < 0) {
        fprintf(stderr, "bench_closures: CLOSURES must be 1..10000000 and IN_FLIGHT 1..16\n");
        return s_usage();
    }
    const char *workers[S_MAX_TASKS], *ps[S_MAX_TASKS];
    size_t nw = 0, nps = 0;
    int i = 4;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (nw == S_MAX_TASKS)
            return s_usage();
        workers[nw++] = argv[i];
    }
    for (i++; i < argc; i++) {
        if (nps == S_MAX_TASKS)
            return s_usage();
        ps[nps++] = argv[i];
    }
    if (nw == 0 || nps == 0)
        return s_usage();

    zdist_job_t job;
    zdist_error_t err = {0};
    if (zdist_job_load(argv[1], &job, &err) < 0) {
        fprintf(stderr, "bench_closures: %s: %s\n", argv[1], err.text);
        return 2;
    }

    /* A fresh prefix per run: the ps tasks may still hold an earlier run's variables. */
    char prefix[64];
    snprintf(prefix, sizeof prefix, "bench_closures_%llx/", (unsigned long long) zdist_random_u64());
    zdist_coordinator_options_t opts;
    zdist_coordinator_options_default(&opts);
    opts.job = &job;
    opts.workers = workers;
    opts.num_workers = nw;
    opts.ps = ps;
    opts.num_ps = nps;
    opts.variable_prefix = prefix;
    opts.max_in_flight_per_worker = (int) in_flight;
    if (per_dispatch > 0)
        opts.max_closures_per_dispatch = (int) per_dispatch;
    int status = 1;
    zdist_coordinator_t *coord = zdist_coordinator_new(&opts, &err);
    if (!coord || zdist_coordinator_start(coord, true, &err) < 0) {
        fprintf(stderr, "bench_closures: %s\n", err.text);
        goto out;
    }
    int64_t warm = closures / 10 < 50 ? closures / 10 : 50;
    if (warm > 0 && s_round(coord, warm, &err) < 0) {
        fprintf(stderr, "bench_closures: warm-up: %s\n", err.text);
        goto out;
    }
    int64_t t0 = zdist_clock_now_us();
    if (s_round(coord, closures, &err) < 0) {
        fprintf(stderr, "bench_closures: %s\n", err.text);
        goto out;
    }
    double secs = (double) (zdist_clock_now_us() - t0) / 1e6;
    if (secs <= 0)
        secs = 1e-6;
    printf(
        "closures=%lld workers=%zu in_flight=%lld per_dispatch=%d seconds=%.3f closures_per_sec=%.1f "
        "us_per_closure=%.1f\n",
        (long long) closures, nw, (long long) in_flight, opts.max_closures_per_dispatch, secs, (double) closures / secs,
        secs * 1e6 / (double) closures);
    status = 0;
out:
    if (coord)
        zdist_coordinator_stop_job(coord, 2000);
    zdist_coordinator_destroy(&coord);
    zdist_job_release(&job);
    return status;
}
