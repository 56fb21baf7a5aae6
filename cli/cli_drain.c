/* zdist drain: a worker leaves the running cluster on purpose (elastic parameter_server workers). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_coord.h"
#include "zdist/parse.h"

int
cli_drain_main(int argc, char **argv)
{
    cli_coord_options_t conn = {0};
    const char *task = NULL;
    int64_t index;
    int rc = cli_coord_one_operand(argc, argv, "drain", "worker:N",
                                   "The worker leaves the running jobs and the cluster: it gets no more closures, "
                                   "those it runs\nfinish (or go back to the queue whole), so no step is lost or "
                                   "applied twice. `zdist status`\nshows it 'draining', then 'left'.\n",
                                   &conn, &task);
    if (rc >= 0)
        return rc;
    if (strncmp(task, "worker:", 7) != 0 || zdist_parse_int64(task + 7, 0, 1 << 20, &index) < 0)
        return cli_usage_error("drain", "give the worker task (zdist drain worker:N), not '%s'", task);
    char endpoint[300];
    zdist_coord_client_t *c = cli_coord_open("drain", &conn, endpoint, sizeof endpoint, &rc);
    if (!c)
        return rc;
    char state[ZDIST_COORD_STATE_MAX];
    zdist_error_t err = {0};
    rc = zdist_coord_client_drain(c, (int)index, 5000, state, &err);
    if (rc == 0) {
        printf("%s: %s\n", task, state);
    } else {
        fprintf(stderr, "zdist drain: %s: %s\n", zdist_status_name(zdist_status_from_errno(rc)), err.text);
        rc = rc == -ENOENT || rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    zdist_coord_client_destroy(&c);
    return rc;
}
