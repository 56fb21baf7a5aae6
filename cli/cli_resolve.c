/* zdist resolve: prints what TF_CONFIG (or --cluster FILE) means, as one JSON object. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "zdist/cluster.h"
#include "zdist/defs.h"

#define S_SUB "resolve"

static void
s_usage(FILE *out)
{
    fprintf(out,
            "usage: zdist resolve [--cluster FILE] [--task TYPE:INDEX] [--rpc-layer NAME] [--strategy S]\n"
            "\n"
            "Resolves the cluster like TensorFlow's TFConfigClusterResolver and prints one JSON\n"
            "object on stdout:\n"
            "  {\"task_type\", \"task_id\", \"rpc_layer\", \"master\", \"cluster\", \"is_chief\",\n"
            "   \"id_in_cluster\", \"worker_count\"}\n"
            "\n"
            "options:\n"
            "  -c, --cluster FILE     read the TF_CONFIG JSON from FILE instead of $TF_CONFIG\n"
            "  -t, --task TYPE:INDEX  override the task (e.g. worker:1)\n"
            "  -r, --rpc-layer NAME   override rpc_layer (e.g. grpc); \"\" clears it\n"
            "  -s, --strategy S       also check the cluster for a strategy: parameter_server,\n"
            "                         multi_worker_mirrored, mirrored, central_storage, one_device, tpu\n"
            "  -h, --help             show this help\n"
            "      --version          show the version\n"
            "\n"
            "Exit status: 0 resolved; 2 bad input (one line on stderr says why); 1 other failure.\n");
}

int
cli_resolve_main(int argc, char **argv)
{
    enum { OPT_VERSION = 256 };
    static const struct option options[] = {
        {"cluster", required_argument, NULL, 'c'},
        {"task", required_argument, NULL, 't'},
        {"rpc-layer", required_argument, NULL, 'r'},
        {"strategy", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    const char *cluster_file = NULL, *task_spec = NULL, *rpc_layer = NULL, *strategy_name = NULL;
    bool have_rpc_layer = false;

    opterr = 0; /* our own one-line messages */
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":c:t:r:s:h", options, NULL)) != -1) {
        switch (c) {
        case 'c':
            cluster_file = optarg;
            break;
        case 't':
            task_spec = optarg;
            break;
        case 'r':
            rpc_layer = optarg;
            have_rpc_layer = true;
            break;
        case 's':
            strategy_name = optarg;
            break;
        case 'h':
            s_usage(stdout);
            return CLI_EXIT_OK;
        case OPT_VERSION:
            printf("zdist %s (protocol %d)\n", ZDIST_VERSION_STRING, ZDIST_PROTOCOL_VERSION);
            return CLI_EXIT_OK;
        case ':':
            return cli_usage_error(S_SUB, "option '%s' needs a value; see 'zdist resolve --help'",
                                   argv[optind - 1]);
        default:
            /* A long option given a value it does not take ("--help=x")
               also lands here, with optopt set to its short letter. */
            if (strncmp(argv[optind - 1], "--", 2) == 0 && optopt != 0)
                return cli_usage_error(S_SUB, "option '%s' takes no value; see 'zdist resolve --help'",
                                       argv[optind - 1]);
            if (strncmp(argv[optind - 1], "--", 2) == 0)
                return cli_usage_error(S_SUB, "unknown option '%s'; see 'zdist resolve --help'",
                                       argv[optind - 1]);
            return cli_usage_error(S_SUB, "unknown option '-%c'; see 'zdist resolve --help'", optopt);
        }
    }
    if (optind < argc)
        return cli_usage_error(S_SUB, "unexpected argument '%s'; see 'zdist resolve --help'", argv[optind]);

    zdist_error_t err = {0};
    zdist_strategy_t strategy = ZDIST_STRATEGY_INVALID;
    if (strategy_name && zdist_strategy_parse(strategy_name, &strategy, &err) < 0)
        return cli_usage_error(S_SUB, "--strategy: %s", err.text);

    zdist_cluster_t *cluster = NULL;
    int rc = zdist_cluster_load(cluster_file, task_spec, &cluster, &err);
    if (rc == 0 && have_rpc_layer)
        rc = zdist_cluster_set_rpc_layer(cluster, rpc_layer, &err);
    if (rc == 0 && strategy_name)
        rc = zdist_cluster_validate(cluster, strategy, &err);
    if (rc < 0) {
        zdist_cluster_destroy(&cluster);
        if (rc == -ENOMEM) {
            fprintf(stderr, "zdist %s: %s\n", S_SUB, err.text);
            return CLI_EXIT_FAILED;
        }
        return cli_usage_error(S_SUB, "%s", err.text);
    }

    char *json = zdist_cluster_to_json(cluster);
    zdist_cluster_destroy(&cluster);
    if (!json) {
        fprintf(stderr, "zdist %s: out of memory\n", S_SUB);
        return CLI_EXIT_FAILED;
    }
    printf("%s\n", json);
    free(json);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "zdist %s: cannot write the result to stdout\n", S_SUB);
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}
