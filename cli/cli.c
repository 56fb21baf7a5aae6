/* The zdist client: dispatches subcommands. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "zdist/auth.h"
#include "zdist/cluster.h"
#include "zdist/defs.h"

static const struct {
    const char *name;
    int (*main_fn)(int argc, char **argv);
    const char *summary;
} s_commands[] = {
    {"plan", cli_plan_main, "show how a variable is partitioned over ps tasks"},
    {"run", cli_run_main, "train a job in this process (one_device, mirrored replica threads)"},
    {"resolve", cli_resolve_main, "resolve TF_CONFIG (or --cluster FILE) like TFConfigClusterResolver"},
    {"ps", cli_ps_main, "ask a zdist-psd: stats, or the values of a variable (get)"},
    {"submit", cli_submit_main, "send a job to zdist-coordinator and follow it to its end"},
    {"status", cli_status_main, "a job's state, step, metrics, workers and ps tasks"},
    {"cancel", cli_cancel_main, "cancel a queued or running job"},
    {"drain", cli_drain_main, "make a worker leave the running cluster (elastic workers)"},
    {"reshard", cli_reshard_main, "move a running parameter_server job's variables onto N ps tasks"},
    {"keygen", cli_keygen_main, "write a CurveZMQ certificate pair (NAME.key, NAME.key_secret)"},
    {"export", cli_export_main, "write a trained checkpoint as an ONNX model (--onnx FILE)"},
    {"gen", cli_gen_main, "write a data set: criteo (TFRecord files, labels from a known teacher)"},
    {"export-embedding", cli_export_embedding_main, "write a dynamic embedding table of a checkpoint as .npy (ids, vectors)"},
};
#define S_NCOMMANDS (sizeof s_commands / sizeof s_commands[0])

int
cli_usage_error(const char *sub, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "zdist %s: ", sub);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

static void
s_usage(FILE *out)
{
    fprintf(out, "usage: zdist COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < S_NCOMMANDS; i++)
        fprintf(out, "  %-10s %s\n", s_commands[i].name, s_commands[i].summary);
    fprintf(out, "\n'zdist COMMAND --help' tells more. --version prints the version.\n"
                 "Before COMMAND: --keys DIR (default $ZDIST_KEYS_DIR) speaks CURVE with the certificate\n"
                 "DIR/NAME.key_secret of --key NAME (default 'client'); --server-key NAME trusts the\n"
                 "certificate NAME at an address given without TF_CONFIG (or list 'HOST:PORT NAME' in\n"
                 "DIR/servers).\n");
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        s_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        s_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("zdist %s (protocol %d)\n", ZDIST_VERSION_STRING, ZDIST_PROTOCOL_VERSION);
        return CLI_EXIT_OK;
    }
    /* zdist [--keys DIR] [--key NAME] COMMAND ... */
    const char *keys_dir = NULL, *key_name = "client", *server_key = NULL;
    while (argc > 2 && (strcmp(argv[1], "--keys") == 0 || strcmp(argv[1], "--key") == 0 ||
                        strcmp(argv[1], "--server-key") == 0)) {
        if (strcmp(argv[1], "--keys") == 0)
            keys_dir = argv[2];
        else if (strcmp(argv[1], "--server-key") == 0)
            server_key = argv[2];
        else
            key_name = argv[2];
        argc -= 2;
        argv += 2;
    }
    for (size_t i = 0; i < S_NCOMMANDS; i++)
        if (strcmp(argv[1], s_commands[i].name) == 0) {
            zdist_keys_t *keys = NULL;
            zdist_error_t err = {0};
            if (s_commands[i].main_fn != cli_keygen_main && (zdist_keys_load(keys_dir, key_name, &keys, &err) < 0 ||
                (keys && server_key && zdist_keys_set_default_server(keys, server_key, &err) < 0))) {
                zdist_keys_destroy(&keys);
                fprintf(stderr, "zdist: --keys: %s\n", err.text);
                return CLI_EXIT_FAILED;
            }
            if (keys) {
                zdist_cluster_t *cluster = zdist_cluster_from_env_or_file(NULL, NULL);
                zdist_keys_learn_cluster(keys, cluster);
                zdist_cluster_destroy(&cluster);
                zdist_keys_set_process(keys);
            }
            int rc = s_commands[i].main_fn(argc - 1, argv + 1);
            zdist_keys_destroy(&keys);
            return rc;
        }
    fprintf(stderr, "zdist: unknown command '%s'; run 'zdist --help' for the list\n", argv[1]);
    return CLI_EXIT_USAGE;
}
