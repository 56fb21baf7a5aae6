/* zdist status: a job's state, step, metrics, what each worker / ps is doing; --follow streams it to the end. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "cli_coord.h"

/* The status of every job queued or running, in the coordinator's table
   order (NULL when the list fails: the latest job is shown alone). */
static json_t *
s_unfinished(zdist_coord_client_t *c)
{
    zdist_coord_job_t *jobs = NULL;
    size_t n = 0;
    if (zdist_coord_client_list(c, 5000, &jobs, &n, NULL) < 0)
        return NULL;
    json_t *out = json_array();
    for (size_t i = 0; i < n && out; i++) {
        if (zdist_coord_state_final(jobs[i].state))
            continue;
        int ex;
        json_t *st = cli_coord_status("status", c, jobs[i].job_id, 5000, &ex);
        if (st)
            json_array_append_new(out, st);
    }
    zdist_coord_jobs_free(&jobs, n);
    return out;
}

int
cli_status_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COORD_OPTIONS,
        {"json", no_argument, NULL, 'j'},              {"follow", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},              {0},
    };
    cli_coord_options_t conn = {0};
    bool as_json = false, follow = false;
    int opt;
    optind = 1;
    while ((opt = cli_coord_getopt(argc, argv, longopts, &conn)) != -1) {
        switch (opt) {
        case 'j':
            as_json = true;
            break;
        case 'f':
            follow = true;
            break;
        case 'h':
            printf("usage: zdist status [JOB] " CLI_COORD_USAGE " [--follow] [--json]\n"
                   "A job's state (queued, running, done, failed, cancelled), step/steps, metrics (loss,\n"
                   "examples/s, test_accuracy once evaluated), each worker's closures done / in flight and\n"
                   "last heartbeat, each ps task's bytes and requests, and the sidecar evaluator's results\n"
                   "(zdist-worker --evaluator: eval_step, test_loss, test_accuracy per checkpoint; 'evaluations'\n"
                   "in --json). Without JOB: the latest job, or every job queued or running when there are\n"
                   "several (each with its own progress; --json adds them as \"jobs\" to the latest job's object).\n"
                   "  --follow   show progress until the job ends (waiting up to 3 minutes for a restarting\n"
                   "             coordinator), then its status; exit 0 done, 1 failed or cancelled\n");
            return CLI_EXIT_OK;
        default:
            return cli_usage_error("status", "see --help");
        }
    }
    if (argc - optind > 1)
        return cli_usage_error("status", "at most one job id; see --help");
    const char *job = optind < argc ? argv[optind] : "";
    char endpoint[300];
    int ex;
    zdist_coord_client_t *c = cli_coord_open("status", &conn, endpoint, sizeof endpoint, &ex);
    if (!c)
        return ex;
    bool tty = follow && !as_json && isatty(STDERR_FILENO);
    json_t *st = follow ? cli_coord_follow("status", c, job, !as_json, tty, &ex)
                        : cli_coord_status("status", c, job, 5000, &ex);
    json_t *all = st && !follow && !*job ? s_unfinished(c) : NULL;
    zdist_coord_client_destroy(&c);
    if (all && json_array_size(all) >= 2) {
        if (as_json) {
            json_object_set(st, "jobs", all);
        } else {
            size_t i;
            json_t *one;
            json_array_foreach(all, i, one) cli_coord_print(stdout, one, true);
            json_decref(all);
            json_decref(st);
            return CLI_EXIT_OK;
        }
    }
    json_decref(all);
    if (tty)
        fputc('\n', stderr);
    if (!st)
        return ex;
    if (as_json) {
        char *out = json_dumps(st, JSON_COMPACT);
        printf("%s\n", out ? out : "{}");
        free(out);
    } else {
        cli_coord_print(stdout, st, true);
    }
    json_decref(st);
    return follow ? ex : CLI_EXIT_OK;
}
