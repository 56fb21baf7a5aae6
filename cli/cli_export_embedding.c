/* zdist export-embedding: a dynamic embedding table of a checkpoint as a .npy pair (ids, vectors). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_coord.h"
#include "zdist/dynexport.h"

#define S_SUB "export-embedding"

static void
s_usage(FILE *out)
{
    fprintf(out,
            "usage: zdist " S_SUB " JOB|CHECKPOINT_DIR TABLE --out PREFIX " CLI_COORD_USAGE "\n"
            "Writes dynamic embedding table TABLE (e.g. embedding/embeddings) of a checkpoint as two NumPy\n"
            "files: PREFIX.ids.npy (int64, shape (n,), ascending) and PREFIX.vectors.npy (float32, shape\n"
            "(n, dim), row i the values of ids[i]), read from the checkpoint's files (no psd is asked).\n"
            "JOB: its newest checkpoint, as the coordinator reports it; CHECKPOINT_DIR: that directory\n"
            "(a job's ckpt-STEP). Exit 0, 1 on a damaged or missing checkpoint, 2 on a usage error.\n");
}

/* The newest checkpoint directory of job `job`, from the coordinator. */
static int
s_job_dir(const cli_coord_options_t *conn, const char *job, char *dir, size_t size)
{
    char endpoint[300];
    int rc;
    zdist_coord_client_t *c = cli_coord_open(S_SUB, conn, endpoint, sizeof endpoint, &rc);
    if (!c)
        return rc;
    json_t *st = cli_coord_status(S_SUB, c, job, 5000, &rc);
    zdist_coord_client_destroy(&c);
    if (!st)
        return rc;
    json_t *detail = json_object_get(st, "detail");
    json_t *root = json_object_get(st, "checkpoint_dir");
    json_t *step = json_object_get(st, "checkpoint_step");
    if (!root && detail)
        root = json_object_get(detail, "checkpoint_dir");
    if (!step && detail)
        step = json_object_get(detail, "checkpoint_step");
    rc = CLI_EXIT_OK;
    if (!json_is_string(root) || !json_is_integer(step) || json_integer_value(step) < 0) {
        fprintf(stderr, "zdist " S_SUB ": job %s has no checkpoint yet\n", job);
        rc = CLI_EXIT_FAILED;
    } else {
        snprintf(dir, size, "%s/ckpt-%" PRId64, json_string_value(root), (int64_t) json_integer_value(step));
    }
    json_decref(st);
    return rc;
}

int
cli_export_embedding_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COORD_OPTIONS,
        {"out", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    cli_coord_options_t conn = {0};
    const char *prefix = NULL;
    int opt;
    optind = 1;
    while ((opt = cli_coord_getopt(argc, argv, longopts, &conn)) != -1) {
        switch (opt) {
        case 'o':
            prefix = optarg;
            break;
        case 'h':
            s_usage(stdout);
            return CLI_EXIT_OK;
        default:
            return cli_usage_error(S_SUB, "see --help");
        }
    }
    if (argc - optind != 2 || !prefix || !*prefix)
        return cli_usage_error(S_SUB, "give JOB or CHECKPOINT_DIR, TABLE and --out PREFIX (see --help)");
    const char *what = argv[optind], *table = argv[optind + 1];
    char dir[4096];
    struct stat sb;
    int rc = CLI_EXIT_OK;
    if (stat(what, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(dir, sizeof dir, "%s", what);
    else if ((rc = s_job_dir(&conn, what, dir, sizeof dir)) != CLI_EXIT_OK)
        return rc;
    char ids[4200], vectors[4200];
    snprintf(ids, sizeof ids, "%s.ids.npy", prefix);
    snprintf(vectors, sizeof vectors, "%s.vectors.npy", prefix);
    zdist_error_t err = {0};
    uint64_t rows = 0;
    rc = zdist_dynexport_npy(dir, table, ids, vectors, &rows, &err);
    if (rc < 0) {
        fprintf(stderr, "zdist " S_SUB ": %s\n", err.text);
        return rc == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    printf("%s: %" PRIu64 " rows of '%s' from %s\n", prefix, rows, table, dir);
    return CLI_EXIT_OK;
}
