/* The zdist client: one entry point per subcommand. */
#ifndef ZDIST_CLI_H
#define ZDIST_CLI_H

/* Exit statuses every subcommand uses. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAILED 1
#define CLI_EXIT_USAGE 2

/* Each takes argv with argv[0] = subcommand name; returns an exit status. */
int cli_plan_main(int argc, char **argv);
int cli_resolve_main(int argc, char **argv);
int cli_run_main(int argc, char **argv);
int cli_ps_main(int argc, char **argv);
int cli_submit_main(int argc, char **argv);
int cli_status_main(int argc, char **argv);
int cli_cancel_main(int argc, char **argv);
int cli_drain_main(int argc, char **argv);
int cli_reshard_main(int argc, char **argv);
int cli_keygen_main(int argc, char **argv);
int cli_gen_main(int argc, char **argv);
int cli_export_main(int argc, char **argv);
int cli_export_embedding_main(int argc, char **argv);

/* Prints "zdist SUB: <message>" on stderr, one line; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
