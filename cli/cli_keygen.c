/* zdist keygen: writes a CurveZMQ certificate pair for a task or a person. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <stdbool.h>
#include <stdio.h>

#include "cli.h"
#include "zdist/auth.h"

static void
s_usage(FILE *out)
{
    fprintf(out, "usage: zdist keygen NAME [--dir DIR] [--force]\n\n"
                 "Writes DIR/NAME.key (public) and DIR/NAME.key_secret (secret, mode 0600).\n"
                 "One per task (ps-0, worker-1, chief-0: the daemons serve as <type>-<index>)\n"
                 "and one per person or script that submits jobs (zdist --key NAME).\n\n"
                 "  --dir DIR   key directory (default $ZDIST_KEYS_DIR, else .)\n"
                 "  --force     replace an existing certificate\n");
}

int
cli_keygen_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *dir = getenv(ZDIST_KEYS_ENV);
    bool force = false;
    int opt;
    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'd':
            dir = optarg;
            break;
        case 'f':
            force = true;
            break;
        case 'h':
            s_usage(stdout);
            return CLI_EXIT_OK;
        default:
            s_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (optind + 1 != argc)
        return cli_usage_error("keygen", "takes one NAME (e.g. ps-0, worker-1, chief-0, alice); see --help");
    zdist_error_t err = {0};
    int rc = zdist_keys_generate(dir && *dir ? dir : ".", argv[optind], force, &err);
    if (rc < 0) {
        fprintf(stderr, "zdist keygen: %s\n", err.text);
        return rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    printf("%s/%s.key\n%s/%s.key_secret\n", dir && *dir ? dir : ".", argv[optind], dir && *dir ? dir : ".",
           argv[optind]);
    return CLI_EXIT_OK;
}
