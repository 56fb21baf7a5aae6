/* zdist submit: send a job to zdist-coordinator, follow its progress, print its final metrics. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_coord.h"
#include "coordinator.pb-c.h"
#include "wire/body.h"

static void
s_usage(FILE *out)
{
    fprintf(out, "usage: zdist submit JOB.json [--coordinator HOST:PORT] [--cluster FILE] [--detach] [--json]\n"
                 "Sends the job to zdist-coordinator (default: the chief of TF_CONFIG or --cluster FILE) and\n"
                 "follows its status stream until it ends, then prints its metrics.\n"
                 "  --detach   print the job id and return at once\n"
                 "  --json     print one JSON object (job_id, state, step, steps, metrics...) at the end\n"
                 "Exit status: 0 done, 1 failed or cancelled (or the cluster is not ready), 2 bad job or usage.\n");
}

static char *
s_read(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[8192];
    size_t got;
    while (m && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, got, m);
    if (m)
        fclose(m);
    fclose(f);
    return buf;
}

int
cli_submit_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"coordinator", required_argument, NULL, 'a'}, {"cluster", required_argument, NULL, 'c'},
        {"detach", no_argument, NULL, 'd'},            {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},              {0},
    };
    const char *addr = NULL, *cluster = NULL;
    bool detach = false, as_json = false;
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
    char *text = s_read(path);
    if (!text)
        return cli_usage_error("submit", "cannot read '%s'", path);
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
    int rc = cli_coord_address("submit", addr, cluster, endpoint, sizeof endpoint);
    if (rc) {
        free(text);
        return rc;
    }
    zdist_rpc_client_t *c = cli_coord_connect("submit", endpoint);
    if (!c) {
        free(text);
        return CLI_EXIT_FAILED;
    }
    Zdist__Coordinator__SubmitRequest req = ZDIST__COORDINATOR__SUBMIT_REQUEST__INIT;
    req.job_json = text;
    req.base_dir = base;
    zdist_msg_t *m = zdist_msg_new(ZDIST__COORDINATOR__METHOD__COORDINATOR_SUBMIT), *reply = NULL;
    if (!m || zdist_msg_set_body(m, &req.base) < 0 || zdist_rpc_client_call(c, &m, 30000, &reply) < 0) {
        free(text);
        zdist_rpc_client_destroy(&c);
        fprintf(stderr, "zdist submit: out of memory\n");
        return CLI_EXIT_FAILED;
    }
    free(text);
    int st = zdist_msg_status(reply);
    if (st != ZDIST_STATUS_OK) {
        if (st == ZDIST_STATUS_DEADLINE_EXCEEDED || st == ZDIST_STATUS_UNAVAILABLE)
            fprintf(stderr, "zdist submit: coordinator %s does not answer; is zdist-coordinator running?\n", endpoint);
        else
            fprintf(stderr, "zdist submit: %s: %s\n", path, zdist_msg_status_message(reply));
        zdist_msg_destroy(&reply);
        zdist_rpc_client_destroy(&c);
        return st == ZDIST_STATUS_INVALID_ARGUMENT ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    Zdist__Coordinator__SubmitReply *r = NULL;
    char job_id[64] = "";
    if (zdist_msg_unpack_body(reply, &zdist__coordinator__submit_reply__descriptor, (ProtobufCMessage **)&r, NULL) ==
        0) {
        snprintf(job_id, sizeof job_id, "%s", r->job_id);
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    zdist_msg_destroy(&reply);
    if (detach) {
        if (as_json)
            printf("{\"job_id\": \"%s\", \"state\": \"queued\"}\n", job_id);
        else
            printf("%s\n", job_id);
        zdist_rpc_client_destroy(&c);
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
            printf("metrics, checkpoints and loss.svg: %s\n", json_string_value(json_object_get(status, "dir")));
        }
    }
    json_decref(status);
    zdist_rpc_client_destroy(&c);
    return exit_code;
}
