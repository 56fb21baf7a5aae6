/* zdist cancel: stop a queued or running job. */
#include <errno.h>
#include <stdio.h>

#include "cli.h"
#include "cli_coord.h"

int
cli_cancel_main(int argc, char **argv)
{
    cli_coord_options_t conn = {0};
    const char *job = NULL;
    int rc = cli_coord_one_operand(argc, argv, "cancel", "JOB",
                                   "Cancels a queued or running job: queued closures are dropped, the workers stop "
                                   "it.\n",
                                   &conn, &job);
    if (rc >= 0)
        return rc;
    char endpoint[300];
    zdist_coord_client_t *c = cli_coord_open("cancel", &conn, endpoint, sizeof endpoint, &rc);
    if (!c)
        return rc;
    char state[ZDIST_COORD_STATE_MAX];
    zdist_error_t err = {0};
    rc = zdist_coord_client_cancel(c, job, 5000, state, &err);
    if (rc == 0) {
        printf("job %s: %s\n", job, state);
    } else {
        fprintf(stderr, "zdist cancel: %s: %s\n", zdist_status_name(zdist_status_from_errno(rc)), err.text);
        rc = rc == -ENOENT || rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    zdist_coord_client_destroy(&c);
    return rc;
}
