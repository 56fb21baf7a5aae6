/* cli_coord: what `zdist submit`, `status` and `cancel` share — the coordinator's address, calls, printing a job. */
#ifndef CLI_COORD_H
#define CLI_COORD_H

#include <jansson.h>
#include <getopt.h>
#include <stdbool.h>

#include "zdist/coord_client.h"

/* The connection options of every subcommand that talks to the
   coordinator: --coordinator ADDR, else the chief of --cluster FILE or
   TF_CONFIG. Put CLI_COORD_OPTIONS in the subcommand's getopt_long table
   and read its options with cli_coord_getopt. */
enum { CLI_OPT_COORDINATOR = 0x200, CLI_OPT_CLUSTER };
#define CLI_COORD_OPTIONS                                                                                              \
    {"coordinator", required_argument, NULL, CLI_OPT_COORDINATOR}, {"cluster", required_argument, NULL, CLI_OPT_CLUSTER}
#define CLI_COORD_USAGE "[--coordinator HOST:PORT] [--cluster FILE]"
typedef struct {
    const char *addr;    /* --coordinator, borrowed from argv */
    const char *cluster; /* --cluster, borrowed from argv */
} cli_coord_options_t;
/* getopt_long (argc, argv, "", longopts) from optind 1 on the first call
   (optind = 1 before it), the connection options taken into o: the next
   other option (optarg set), or -1 at the end. */
int cli_coord_getopt(int argc, char **argv, const struct option *longopts, cli_coord_options_t *o);
/* The command line of a subcommand that takes one operand and only the
   connection options (cancel, drain): -1 with *ret_operand set to go on,
   else the exit status (--help printed "usage: zdist SUB OPERAND_NAME
   [options]" and help, or a usage error). */
int cli_coord_one_operand(int argc, char **argv, const char *sub, const char *operand_name, const char *help,
                          cli_coord_options_t *conn, const char **ret_operand);
/* A client of the coordinator the options name, its address as
   "tcp://host:port" in endpoint; NULL after printing why, *ret_exit set
   (CLI_EXIT_USAGE a bad address or cluster, else CLI_EXIT_FAILED). */
zdist_coord_client_t *cli_coord_open(const char *sub, const cli_coord_options_t *o, char *endpoint, size_t size,
                                     int *ret_exit);
/* Prints a failed call (rc and err of a zdist_coord_client_* function) as
   "zdist SUB: coordinator ENDPOINT: STATUS: message"; returns the exit
   status: CLI_EXIT_USAGE for a request refused as invalid, else 1. */
int cli_coord_failure(const char *sub, zdist_coord_client_t *c, int rc, const zdist_error_t *err);
/* STATUS of job_id ("" = latest) as one JSON object {job_id, name, state,
   step, steps, error, metrics, workers, ps, ...}; NULL after printing why
   (*ret_exit set: 1 unreachable / not found, 2 a bad job id). */
json_t *cli_coord_status(const char *sub, zdist_coord_client_t *c, const char *job_id, int64_t timeout_ms,
                         int *ret_exit);
/* Progress of a followed job: a bar on stderr on a terminal (tty), else a
   plain line on stdout every 10% or 5 s. */
typedef struct {
    int64_t t0_ms;      /* when following started */
    int64_t last_ms;    /* the last plain line */
    int64_t last_step;
    int64_t running_ms; /* when it was first seen running */
    int64_t first_step; /* the step it was first seen running at; -1 not yet */
    bool printed;       /* a plain line went out */
} cli_coord_progress_t;
void cli_coord_progress(json_t *st, bool tty, cli_coord_progress_t *p);
/* Follows job_id ("" = the latest job) to its end (zdist_coord_client_follow:
   it subscribes again across a restart of the coordinator and gives up
   after 3 minutes without an answer), showing progress when show is set.
   Returns the last status seen (the caller's; NULL when none) with
   *ret_exit 0 done, 1 failed, cancelled, unreachable or not found, 2 a bad
   job id (the reason printed). */
json_t *cli_coord_follow(const char *sub, zdist_coord_client_t *c, const char *job_id, bool show, bool tty,
                         int *ret_exit);
/* The human form of a status object. */
void cli_coord_print(FILE *out, json_t *st, bool tasks);

#endif
