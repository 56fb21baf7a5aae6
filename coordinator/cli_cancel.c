/* zdist cancel: stop a queued or running job. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "cli_coord.h"
#include "coordinator.pb-c.h"
#include "wire/body.h"

int
cli_cancel_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"coordinator", required_argument, NULL, 'a'},
        {"cluster", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *addr = NULL, *cluster = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'a':
            addr = optarg;
            break;
        case 'c':
            cluster = optarg;
            break;
        case 'h':
            printf("usage: zdist cancel JOB [--coordinator HOST:PORT] [--cluster FILE]\n"
                   "Cancels a queued or running job: queued closures are dropped, the workers stop it.\n");
            return CLI_EXIT_OK;
        default:
            return cli_usage_error("cancel", "see --help");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("cancel", "give the job id (zdist cancel JOB)");
    char endpoint[300];
    int rc = cli_coord_address("cancel", addr, cluster, endpoint, sizeof endpoint);
    if (rc)
        return rc;
    zdist_rpc_client_t *c = cli_coord_connect("cancel", endpoint);
    if (!c)
        return CLI_EXIT_FAILED;
    Zdist__Coordinator__CancelRequest req = ZDIST__COORDINATOR__CANCEL_REQUEST__INIT;
    req.job_id = argv[optind];
    zdist_msg_t *m = zdist_msg_new(ZDIST__COORDINATOR__METHOD__COORDINATOR_CANCEL), *reply = NULL;
    rc = CLI_EXIT_FAILED;
    if (m && zdist_msg_set_body(m, &req.base) == 0 && zdist_rpc_client_call(c, &m, 5000, &reply) == 0) {
        int st = zdist_msg_status(reply);
        Zdist__Coordinator__CancelReply *r = NULL;
        if (st == ZDIST_STATUS_OK &&
            zdist_msg_unpack_body(reply, &zdist__coordinator__cancel_reply__descriptor, (ProtobufCMessage **)&r,
                                  NULL) == 0) {
            printf("job %s: %s\n", argv[optind], r->state);
            protobuf_c_message_free_unpacked(&r->base, NULL);
            rc = CLI_EXIT_OK;
        } else {
            fprintf(stderr, "zdist cancel: %s: %s\n", zdist_status_name(st), zdist_msg_status_message(reply));
            rc = st == ZDIST_STATUS_NOT_FOUND ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
        }
    }
    zdist_msg_destroy(&reply);
    zdist_rpc_client_destroy(&c);
    return rc;
}
