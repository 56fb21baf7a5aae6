/* zdist reshard: a running parameter_server job's variables moved onto another number of ps tasks. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_coord.h"
#include "zdist/parse.h"

#define S_HELP                                                                                                         \
    "usage: zdist reshard JOB --ps N [--timeout SECONDS] " CLI_COORD_USAGE "\n"                                        \
    "Moves a running parameter_server job's variables onto ps tasks 0..N-1 of the cluster\n"                          \
    "(N from 1 to the cluster's ps tasks: fewer drains the others, more spreads onto them).\n"                        \
    "At its next step boundary the job stops scheduling, its closures in flight come back,\n"                         \
    "it checkpoints, the variables are restored from that checkpoint partitioned over N\n"                            \
    "(fixed tables by row ranges, dynamic tables by id hash, each shard's step ledger with\n"                         \
    "its rows, so no step is lost or applied twice) and training resumes there. Its\n"                                \
    "checkpoints from then on are of the new layout. Returns once the job trains on N ps\n"                           \
    "tasks, printing what the move took; --timeout (default 600) bounds the wait.\n"

int
cli_reshard_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COORD_OPTIONS,
        {"ps", required_argument, NULL, 'p'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    cli_coord_options_t conn = {0};
    int64_t num_ps = -1, timeout_s = 600;
    int opt;
    optind = 1;
    while ((opt = cli_coord_getopt(argc, argv, longopts, &conn)) != -1) {
        if (opt == 'h') {
            fputs(S_HELP, stdout);
            return CLI_EXIT_OK;
        }
        if (opt == 'p' && zdist_parse_int64(optarg, 0, 1 << 20, &num_ps) < 0)
            return cli_usage_error("reshard", "--ps '%s': give the number of ps tasks, an integer >= 1", optarg);
        if (opt == 't' && zdist_parse_int64(optarg, 1, 86400, &timeout_s) < 0)
            return cli_usage_error("reshard", "--timeout '%s': give seconds, 1 to 86400", optarg);
        if (opt != 'p' && opt != 't')
            return cli_usage_error("reshard", "see --help");
    }
    if (argc - optind != 1)
        return cli_usage_error("reshard", "give one job id (zdist reshard JOB --ps N)");
    if (num_ps < 0)
        return cli_usage_error("reshard", "give the new number of ps tasks: --ps N");
    if (num_ps == 0)
        return cli_usage_error("reshard", "--ps 0: a job needs at least one ps task for its variables");
    const char *job = argv[optind];
    char endpoint[300];
    int rc;
    zdist_coord_client_t *c = cli_coord_open("reshard", &conn, endpoint, sizeof endpoint, &rc);
    if (!c)
        return rc;
    char detail[1200];
    int now_ps = 0;
    zdist_error_t err = {0};
    rc = zdist_coord_client_reshard(c, job, (int)num_ps, timeout_s * 1000, &now_ps, detail, sizeof detail, &err);
    if (rc == 0) {
        printf("%s\n", detail);
    } else {
        fprintf(stderr, "zdist reshard: %s: %s\n", zdist_status_name(zdist_status_from_errno(rc)), err.text);
        rc = rc == -ENOENT || rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    zdist_coord_client_destroy(&c);
    return rc;
}
