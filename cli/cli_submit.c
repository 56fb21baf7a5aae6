/* zdist submit: send a job to zdist-coordinator, follow its progress, print its final metrics. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_coord.h"
#include "zdist/file.h"

static void
s_usage(FILE *out)
{
    fprintf(out, "usage: zdist submit JOB.json " CLI_COORD_USAGE " [--detach] [--json]\n"
                 "Sends the job to zdist-coordinator (default: the chief of TF_CONFIG or --cluster FILE) and\n"
                 "follows its status stream until it ends, then prints its metrics.\n"
                 "  --detach   print the job id and return at once\n"
                 "  --json     print one JSON object (job_id, state, step, steps, metrics...) at the end\n"
                 "Exit status: 0 done, 1 failed or cancelled (or the cluster is not ready), 2 bad job or usage.\n");
}

int
cli_submit_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COORD_OPTIONS,
        {"detach", no_argument, NULL, 'd'},            {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},              {0},
    };
    cli_coord_options_t conn = {0};
    bool detach = false, as_json = false;
    int opt;
    optind = 1;
    while ((opt = cli_coord_getopt(argc, argv, longopts, &conn)) != -1) {
        switch (opt) {
        case 'd':
            detach = true;
            break;
        case 'j':
            as_json = true;
            break;
        case 'h':
            s_usage(stdout);
            return CLI_EXIT_OK;
        default:
            s_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("submit", "give one job file (zdist submit JOB.json); see --help");
    const char *path = argv[optind];
    void *text = NULL;
    size_t len = 0;
    zdist_error_t err = {0};
    if (zdist_file_read(path, ZDIST_COORD_MAX_JOB_BYTES, &text, &len, &err) < 0)
        return cli_usage_error("submit", "cannot read '%s': %s", path, err.text);
    char real[PATH_MAX], base[PATH_MAX];
    snprintf(base, sizeof base, ".");
    if (realpath(path, real)) {
        char *slash = strrchr(real, '/');
        if (slash) {
            *slash = '\0';
            snprintf(base, sizeof base, "%s", *real ? real : "/");
        }
    }
    char endpoint[300];
    int rc;
    zdist_coord_client_t *c = cli_coord_open("submit", &conn, endpoint, sizeof endpoint, &rc);
    if (!c) {
        free(text);
        return rc;
    }
    char job_id[ZDIST_COORD_ID_MAX];
    rc = zdist_coord_client_submit(c, text, base, 30000, job_id, &err);
    free(text);
    if (rc < 0) {
        if (rc == -ETIMEDOUT)
            fprintf(stderr, "zdist submit: coordinator %s does not answer; is zdist-coordinator running?\n", endpoint);
        else if (rc == -ENOTCONN)
            fprintf(stderr, "zdist submit: coordinator %s closed the connection (%zu bytes of job sent); is "
                    "zdist-coordinator running, and the request under its --max-message-bytes?\n", endpoint, len);
        else if (rc == -EPERM || rc == -EACCES) /* the code, as zdist status prints it */
            fprintf(stderr, "zdist submit: coordinator %s: %s: %s\n", endpoint,
                    zdist_status_name(zdist_status_from_errno(rc)), err.text);
        else
            fprintf(stderr, "zdist submit: %s: %s\n", path, err.text);
        zdist_coord_client_destroy(&c);
        return rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    if (detach) {
        if (as_json)
            printf("{\"job_id\": \"%s\", \"state\": \"queued\"}\n", job_id);
        else
            printf("%s\n", job_id);
        zdist_coord_client_destroy(&c);
        return CLI_EXIT_OK;
    }
    if (!as_json)
        printf("job %s submitted to %s\n", job_id, endpoint);
    bool tty = !as_json && isatty(STDERR_FILENO);
    int exit_code;
    json_t *status = cli_coord_follow("submit", c, job_id, !as_json, tty, &exit_code);
    if (tty)
        fputc('\n', stderr);
    if (status) {
        if (as_json) {
            char *out = json_dumps(status, JSON_COMPACT);
            printf("%s\n", out ? out : "{}");
            free(out);
        } else {
            cli_coord_print(stdout, status, false);
            json_t *mt = json_object_get(status, "metrics");
            if (json_object_get(mt, "test_accuracy"))
                printf("test accuracy: %.4f\n", json_number_value(json_object_get(mt, "test_accuracy")));
            if (json_object_get(mt, "test_auc"))
                printf("test AUC: %.4f, test loss: %.4f\n", json_number_value(json_object_get(mt, "test_auc")),
                       json_number_value(json_object_get(mt, "test_loss")));
            printf("metrics, checkpoints and loss.svg: %s\n", json_string_value(json_object_get(status, "dir")));
        }
    }
    json_decref(status);
    zdist_coord_client_destroy(&c);
    return exit_code;
}
