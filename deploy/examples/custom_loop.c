/* custom_loop: a custom training loop on the libzdist ClusterCoordinator (zdist/coordinator.h), as with TF's
   ClusterCoordinator: schedule closures, join, fetch their remote values, evaluate.

   usage: custom_loop JOB.json CLOSURES STEPS_PER_CLOSURE tcp://WORKER... -- tcp://PS...
   The job must be a parameter_server job (its checkpoint and evaluation sections are not used here). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/coordinator.h"
#include "zdist/job.h"

int
main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: custom_loop JOB.json CLOSURES STEPS_PER_CLOSURE tcp://WORKER... -- tcp://PS...\n");
        return 2;
    }
    zdist_job_t job;
    zdist_error_t err = {0};
    if (zdist_job_load(argv[1], &job, &err) < 0) {
        fprintf(stderr, "custom_loop: %s: %s\n", argv[1], err.text);
        return 2;
    }
    int closures = atoi(argv[2]), steps = atoi(argv[3]);
    const char *workers[64], *ps[64];
    size_t nw = 0, nps = 0;
    int i = 4;
    for (; i < argc && strcmp(argv[i], "--") != 0 && nw < 64; i++)
        workers[nw++] = argv[i];
    for (i++; i < argc && nps < 64; i++)
        ps[nps++] = argv[i];

    zdist_coordinator_options_t opts;
    zdist_coordinator_options_default(&opts);
    opts.job = &job;
    opts.workers = workers;
    opts.num_workers = nw;
    opts.ps = ps;
    opts.num_ps = nps;
    opts.variable_prefix = "custom_loop/";
    zdist_coordinator_t *coord = zdist_coordinator_new(&opts, &err);
    if (!coord || zdist_coordinator_start(coord, true, &err) < 0) {
        fprintf(stderr, "custom_loop: %s\n", err.text);
        return 1;
    }
    /* schedule returns at once; the closures run on whichever worker is free. */
    zdist_remote_value_t **values = calloc((size_t)closures, sizeof *values);
    for (int c = 0; c < closures; c++)
        values[c] = zdist_coordinator_schedule(coord, steps);
    int rc = zdist_coordinator_join(coord, &err);
    if (rc < 0)
        fprintf(stderr, "custom_loop: %s\n", err.text);
    long long total_steps = 0;
    int fetched = 0;
    double first_loss = 0, last_loss = 0;
    for (int c = 0; rc == 0 && c < closures; c++) {
        zdist_closure_result_t r;
        if (zdist_remote_value_fetch(values[c], &r, &err) < 0) {
            fprintf(stderr, "custom_loop: closure %d: %s\n", c, err.text);
            continue;
        }
        double loss = r.steps ? r.loss_sum / (double)r.steps : 0.0;
        if (fetched++ == 0)
            first_loss = loss;
        last_loss = loss;
        total_steps += r.steps;
        if (c % 10 == 0 || c == closures - 1)
            printf("closure %d: %lld steps on worker %d, mean loss %.4f\n", c, (long long)r.steps, r.worker, loss);
    }
    if (rc == 0)
        printf("fetched %d of %d closures, %lld steps; mean loss first %.6f, last %.6f\n", fetched, closures,
               total_steps, first_loss, last_loss);
    zdist_evaluation_t ev;
    if (rc == 0 && zdist_coordinator_evaluate(coord, &ev, &err) == 0 && ev.total > 0)
        printf("test accuracy %.4f over %lld examples\n", ev.has_correct ? (double)ev.correct / (double)ev.total : 0.0,
               (long long)ev.total);
    zdist_coordinator_stop_job(coord, 2000);
    zdist_coordinator_destroy(&coord);
    free(values);
    zdist_job_release(&job);
    return rc < 0 ? 1 : 0;
}
