/* zdist cancel: stop a queued or running job. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "cli_coord.h"

int
cli_cancel_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COORD_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    cli_coord_options_t conn = {0};
    int opt;
    optind = 1;
    while ((opt = cli_coord_getopt(argc, argv, longopts, &conn)) != -1) {
        switch (opt) {
        case 'h':
            printf("usage: zdist cancel JOB " CLI_COORD_USAGE "\n"
                   "Cancels a queued or running job: queued closures are dropped, the workers stop it.\n");
            return CLI_EXIT_OK;
        default:
            return cli_usage_error("cancel", "see --help");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("cancel", "give the job id (zdist cancel JOB)");
    char endpoint[300];
    int rc;
    zdist_coord_client_t *c = cli_coord_open("cancel", &conn, endpoint, sizeof endpoint, &rc);
    if (!c)
        return rc;
    char state[ZDIST_COORD_STATE_MAX];
    zdist_error_t err = {0};
    rc = zdist_coord_client_cancel(c, argv[optind], 5000, state, &err);
    if (rc == 0) {
        printf("job %s: %s\n", argv[optind], state);
    } else {
        fprintf(stderr, "zdist cancel: %s: %s\n", zdist_status_name(zdist_status_from_errno(rc)), err.text);
        rc = rc == -ENOENT || rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    zdist_coord_client_destroy(&c);
    return rc;
}
