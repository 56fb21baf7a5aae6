/* zdist resolve: prints what TF_CONFIG (or --cluster FILE) means, as one JSON object. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "zdist/cluster.h"
#include "zdist/defs.h"
#include "zdist/parse.h"
#include "zdist/slurm.h"

#define S_SUB "resolve"

static void
s_usage(FILE *out)
{
    fprintf(out,
            "usage: zdist resolve [--cluster FILE] [--task TYPE:INDEX] [--rpc-layer NAME] [--strategy S]\n"
            "       zdist resolve --slurm [--jobs NAME=N,...] [--port-base N] [--tasks-per-node N] [...]\n"
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
            "      --slurm            the cluster of this Slurm job step, as TensorFlow's SlurmClusterResolver\n"
            "                         builds it (SLURM_PROCID, SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE)\n"
            "      --jobs NAME=N,...  with --slurm: tasks per job, e.g. chief=1,ps=2,worker=4 (ranks go to the\n"
            "                         jobs in name order; default worker=$SLURM_STEP_NUM_TASKS)\n"
            "      --port-base N      with --slurm: a node's tasks listen on N, N+1, ... (default 8888)\n"
            "      --tasks-per-node N with --slurm: every node runs N tasks (default: Slurm's own count)\n"
            "  -h, --help             show this help\n"
            "      --version          show the version\n"
            "\n"
            "Exit status: 0 resolved; 2 bad input (one line on stderr says why); 1 other failure.\n");
}

typedef struct {
    const char *cluster_file, *task_spec, *rpc_layer, *strategy_name, *jobs;
    bool have_rpc_layer, slurm;
    int port_base, tasks_per_node;
} s_args_t;

enum { S_OPT_VERSION = 256, S_OPT_SLURM, S_OPT_JOBS, S_OPT_PORT_BASE, S_OPT_TASKS_PER_NODE };

/* An option getopt did not take: one line, CLI_EXIT_USAGE. */
static int
s_bad_option(char **argv)
{
    /* A long option given a value it does not take ("--help=x") also lands
       here, with optopt set to its short letter. */
    if (strncmp(argv[optind - 1], "--", 2) == 0 && optopt != 0)
        return cli_usage_error(S_SUB, "option '%s' takes no value; see 'zdist resolve --help'", argv[optind - 1]);
    if (strncmp(argv[optind - 1], "--", 2) == 0)
        return cli_usage_error(S_SUB, "unknown option '%s'; see 'zdist resolve --help'", argv[optind - 1]);
    return cli_usage_error(S_SUB, "unknown option '-%c'; see 'zdist resolve --help'", optopt);
}

/* Returns -1 to go on, else the exit status. */
static int
s_parse(int argc, char **argv, s_args_t *a)
{
    static const struct option options[] = {
        {"cluster", required_argument, NULL, 'c'},
        {"task", required_argument, NULL, 't'},
        {"rpc-layer", required_argument, NULL, 'r'},
        {"strategy", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, S_OPT_VERSION},
        {"slurm", no_argument, NULL, S_OPT_SLURM},
        {"jobs", required_argument, NULL, S_OPT_JOBS},
        {"port-base", required_argument, NULL, S_OPT_PORT_BASE},
        {"tasks-per-node", required_argument, NULL, S_OPT_TASKS_PER_NODE},
        {NULL, 0, NULL, 0},
    };
    opterr = 0; /* our own one-line messages */
    optind = 1;
    int c;
    int64_t v;
    while ((c = getopt_long(argc, argv, ":c:t:r:s:h", options, NULL)) != -1) {
        switch (c) {
        case 'c': a->cluster_file = optarg; break;
        case 't': a->task_spec = optarg; break;
        case 'r': a->rpc_layer = optarg, a->have_rpc_layer = true; break;
        case 's': a->strategy_name = optarg; break;
        case S_OPT_SLURM: a->slurm = true; break;
        case S_OPT_JOBS: a->jobs = optarg; break;
        case S_OPT_PORT_BASE:
        case S_OPT_TASKS_PER_NODE:
            if (zdist_parse_int64(optarg, 1, c == S_OPT_PORT_BASE ? 65535 : 65536, &v) < 0)
                return cli_usage_error(S_SUB, "%s must be a number in 1..%d, got '%s'",
                                       c == S_OPT_PORT_BASE ? "--port-base" : "--tasks-per-node",
                                       c == S_OPT_PORT_BASE ? 65535 : 65536, optarg);
            *(c == S_OPT_PORT_BASE ? &a->port_base : &a->tasks_per_node) = (int) v;
            break;
        case 'h':
            s_usage(stdout);
            return CLI_EXIT_OK;
        case S_OPT_VERSION:
            printf("zdist %s (protocol %d)\n", ZDIST_VERSION_STRING, ZDIST_PROTOCOL_VERSION);
            return CLI_EXIT_OK;
        case ':':
            return cli_usage_error(S_SUB, "option '%s' needs a value; see 'zdist resolve --help'",
                                   argv[optind - 1]);
        default:
            return s_bad_option(argv);
        }
    }
    if (optind < argc)
        return cli_usage_error(S_SUB, "unexpected argument '%s'; see 'zdist resolve --help'", argv[optind]);
    if (!a->slurm && (a->jobs || a->port_base || a->tasks_per_node))
        return cli_usage_error(S_SUB, "--jobs, --port-base and --tasks-per-node go with --slurm");
    if (a->slurm && a->cluster_file)
        return cli_usage_error(S_SUB, "--slurm reads the cluster from Slurm; leave out --cluster");
    return -1;
}

/* --slurm: the step's allocation as TF_CONFIG text, then the usual class. */
static int
s_load_slurm(const s_args_t *a, zdist_cluster_t **ret, zdist_error_t *err)
{
    char *text = NULL;
    int rc = zdist_slurm_resolve(a->jobs, a->port_base, a->tasks_per_node, &text, err);
    if (rc < 0)
        return rc;
    *ret = zdist_cluster_parse(text, "--slurm", err);
    free(text);
    if (*ret && a->task_spec)
        rc = zdist_cluster_set_task_spec(*ret, a->task_spec, err);
    return *ret ? rc : err->code ? err->code : -EINVAL;
}

int
cli_resolve_main(int argc, char **argv)
{
    s_args_t a = {0};
    int exit_rc = s_parse(argc, argv, &a);
    if (exit_rc >= 0)
        return exit_rc;
    zdist_error_t err = {0};
    zdist_strategy_t strategy = ZDIST_STRATEGY_INVALID;
    if (a.strategy_name && zdist_strategy_parse(a.strategy_name, &strategy, &err) < 0)
        return cli_usage_error(S_SUB, "--strategy: %s", err.text);

    zdist_cluster_t *cluster = NULL;
    int rc = a.slurm ? s_load_slurm(&a, &cluster, &err) : zdist_cluster_load(a.cluster_file, a.task_spec, &cluster, &err);
    if (rc == 0 && a.have_rpc_layer)
        rc = zdist_cluster_set_rpc_layer(cluster, a.rpc_layer, &err);
    if (rc == 0 && a.strategy_name)
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
