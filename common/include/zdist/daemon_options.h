/* zdist daemon options: the command line every zdist daemon shares, parsed
   once for all of them. A daemon's main () names its own options and takes
   them in a callback; the shared ones (the task, the keys, --http, the
   per-peer and message limits, --help, --version) are parsed here, with
   the same texts and exit statuses in every daemon. */
#ifndef ZDIST_DAEMON_OPTIONS_H
#define ZDIST_DAEMON_OPTIONS_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "zdist/defs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* zdist_daemon_options_parse: the daemon should start. */
#define ZDIST_DAEMON_OPTIONS_RUN (-1)

/* A daemon's own option: opt is its longopts' val, value its argument
   (NULL for none). 0 to go on, else 2 (the process then exits 2) after
   printing one line on stderr. */
typedef int(zdist_daemon_option_fn)(void *arg, int opt, const char *value);

typedef struct {
    /* Set by main () before parsing. */
    const char *ident;            /* "zdist-psd": starts every message and --version */
    void (*usage)(FILE *out);     /* --help (stdout, exit 0); after a bad option (stderr, exit 2) */
    const char *version_extra;    /* --version's text after the protocol (", step ABI 1"); NULL: none */
    int64_t max_message_bytes_max; /* --max-message-bytes' upper bound; 0: INT64_MAX */
    /* Parsed: NULL, "" or 0 when not given. */
    const char *cluster_file; /* --cluster */
    const char *task;         /* --task */
    const char *bind;         /* --bind */
    const char *keys_dir;     /* --keys */
    char http[128];           /* --http, else $ZDIST_HTTP */
    size_t max_message_bytes;
    size_t max_calls_per_peer;
    size_t max_connections_per_peer;
    /* --slurm: the task from the Slurm job step (zdist/slurm.h) instead of
       TF_CONFIG; parsing then sets TF_CONFIG to what it resolves to. */
    int slurm;
    const char *slurm_jobs;  /* --jobs ps=2,worker=4 */
    int slurm_port_base;     /* --port-base (default 8888, TF's) */
    int slurm_tasks_per_node; /* --tasks-per-node (default: SLURM_STEP_TASKS_PER_NODE) */
} zdist_daemon_options_t;

/* Parses argv: the shared options into self, the daemon's own (`own`,
   terminated by a zeroed entry; its vals below 256) through fn. Refuses a
   positional argument, then takes --http from $ZDIST_HTTP when it was not
   given. Returns ZDIST_DAEMON_OPTIONS_RUN, or the process exit status: 0
   after --help or --version, 2 after one line on stderr (or getopt's and
   the usage) saying what is wrong. */
ZDIST_EXPORT int zdist_daemon_options_parse(zdist_daemon_options_t *self, int argc, char **argv,
                                            const struct option *own, zdist_daemon_option_fn *fn, void *arg);

/* The shared options' help lines that every daemon prints alike (--slurm
   and its companions), for a daemon's usage. */
ZDIST_EXPORT void zdist_daemon_options_usage_slurm(FILE *out);

/* The shared values into a daemon's configuration: each limit given on the
   command line (its pointer may be NULL: not taken), the --http address
   (http[http_size], "" for none). A limit not given keeps its value. Also
   raises the process's limits for many peers, so call it before any ZeroMQ
   socket exists: the soft limit of open files to the hard one (at most
   1,048,576) and czmq's socket limit (1024 by default) with it, up to
   65,536 — a chief holds a socket and two descriptors per worker and ps
   task, a psd a descriptor per client, and 1024 of either stopped a cluster
   of a few hundred tasks. */
ZDIST_EXPORT void zdist_daemon_options_apply(const zdist_daemon_options_t *self, size_t *max_message_bytes,
                                             size_t *max_calls_per_peer, size_t *max_connections_per_peer,
                                             char *http, size_t http_size);

#ifdef __cplusplus
}
#endif
#endif
