/* zdist daemon options: the command line the daemons share, parsed once. */
#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "zdist/daemon_options.h"
#include "zdist/http.h"
#include "zdist/parse.h"
#include "zdist/slurm.h"

#define S_MAX_OPTIONS 64 /* a daemon's own and the shared ones */

/* Above any char a daemon's own options use as their val. */
enum {
    S_CLUSTER = 256,
    S_TASK,
    S_BIND,
    S_KEYS,
    S_HTTP,
    S_MESSAGE,
    S_CALLS,
    S_CONNECTIONS,
    S_HELP,
    S_VERSION,
    S_SLURM,
    S_JOBS,
    S_PORT_BASE,
    S_TASKS_PER_NODE,
};

static const struct option s_shared[] = {
    {"cluster", required_argument, NULL, S_CLUSTER},
    {"task", required_argument, NULL, S_TASK},
    {"bind", required_argument, NULL, S_BIND},
    {"keys", required_argument, NULL, S_KEYS},
    {"http", required_argument, NULL, S_HTTP},
    {"max-message-bytes", required_argument, NULL, S_MESSAGE},
    {"max-calls-per-peer", required_argument, NULL, S_CALLS},
    {"max-connections-per-peer", required_argument, NULL, S_CONNECTIONS},
    {"help", no_argument, NULL, S_HELP},
    {"version", no_argument, NULL, S_VERSION},
    {"slurm", no_argument, NULL, S_SLURM},
    {"jobs", required_argument, NULL, S_JOBS},
    {"port-base", required_argument, NULL, S_PORT_BASE},
    {"tasks-per-node", required_argument, NULL, S_TASKS_PER_NODE},
};

void
zdist_daemon_options_usage_slurm(FILE *out)
{
    fprintf(out, "  --slurm                 the task from the Slurm job step (SLURM_PROCID, SLURM_STEP_NODELIST,\n"
                 "                          SLURM_STEP_TASKS_PER_NODE) as TensorFlow's SlurmClusterResolver reads it,\n"
                 "                          in place of TF_CONFIG\n"
                 "  --jobs NAME=N,...       with --slurm: tasks per job, e.g. chief=1,ps=2,worker=4 (default\n"
                 "                          worker=$SLURM_STEP_NUM_TASKS)\n"
                 "  --port-base N           with --slurm: a node's first task listens on N, the next on N+1 (8888)\n"
                 "  --tasks-per-node N      with --slurm: every node runs N tasks (default: Slurm's own count)\n");
}

/* One line on stderr, "IDENT: [WHAT: ]why", when addr is not an --http address. */
static int
s_http_check(const char *ident, const char *what, const char *addr)
{
    char host[64];
    int port;
    bool loopback;
    zdist_error_t err = {0};
    if (zdist_http_parse_addr(addr, host, sizeof host, &port, &loopback, &err) < 0) {
        fprintf(stderr, "%s: %s%s%s\n", ident, what ? what : "", what ? ": " : "", err.text);
        return 2;
    }
    return 0;
}

/* No --http given: the address from $ZDIST_HTTP when it is set, which is
   how the systemd units' environment files turn it on. */
static int
s_http_env(zdist_daemon_options_t *self)
{
    const char *env = getenv("ZDIST_HTTP");
    if (self->http[0] || !env || !*env)
        return 0;
    if (s_http_check(self->ident, "ZDIST_HTTP", env) != 0)
        return 2;
    if ((size_t) snprintf(self->http, sizeof self->http, "%s", env) >= sizeof self->http) {
        fprintf(stderr, "%s: ZDIST_HTTP: '%s' is too long\n", self->ident, env);
        self->http[0] = 0;
        return 2;
    }
    return 0;
}

/* A count in 1..2^20 of what one peer may hold (`what`: "calls"). */
static int
s_per_peer(const char *ident, const char *flag, const char *what, const char *value, size_t *ret)
{
    int64_t v;
    if (zdist_parse_int64(value, 1, 1 << 20, &v) < 0) {
        fprintf(stderr, "%s: --%s must be a number of %s in 1..1048576, got '%s'\n", ident, flag, what, value);
        return 2;
    }
    *ret = (size_t) v;
    return 0;
}

/* A shared option: ZDIST_DAEMON_OPTIONS_RUN to go on, else the exit status. */
static int
s_take(zdist_daemon_options_t *self, int opt, const char *value)
{
    int64_t v;
    switch (opt) {
    case S_CLUSTER:
        self->cluster_file = value;
        break;
    case S_TASK:
        self->task = value;
        break;
    case S_BIND:
        self->bind = value;
        break;
    case S_KEYS:
        self->keys_dir = value;
        break;
    case S_HTTP:
        if (s_http_check(self->ident, NULL, value) != 0)
            return 2;
        snprintf(self->http, sizeof self->http, "%s", value);
        break;
    case S_MESSAGE:
        if (zdist_parse_int64(value, 1024, self->max_message_bytes_max ? self->max_message_bytes_max : INT64_MAX,
                              &v) < 0) {
            fprintf(stderr, "%s: --max-message-bytes must be a number of bytes >= 1024, got '%s'\n", self->ident,
                    value);
            return 2;
        }
        self->max_message_bytes = (size_t) v;
        break;
    case S_CALLS:
        return s_per_peer(self->ident, "max-calls-per-peer", "calls", value, &self->max_calls_per_peer) ?
                   2 : ZDIST_DAEMON_OPTIONS_RUN;
    case S_CONNECTIONS:
        return s_per_peer(self->ident, "max-connections-per-peer", "connections", value,
                          &self->max_connections_per_peer) ?
                   2 : ZDIST_DAEMON_OPTIONS_RUN;
    case S_SLURM:
        self->slurm = 1;
        break;
    case S_JOBS:
        self->slurm_jobs = value;
        break;
    case S_PORT_BASE:
    case S_TASKS_PER_NODE:
        if (zdist_parse_int64(value, 1, opt == S_PORT_BASE ? 65535 : 65536, &v) < 0) {
            fprintf(stderr, "%s: --%s must be a number in 1..%d, got '%s'\n", self->ident,
                    opt == S_PORT_BASE ? "port-base" : "tasks-per-node", opt == S_PORT_BASE ? 65535 : 65536, value);
            return 2;
        }
        *(opt == S_PORT_BASE ? &self->slurm_port_base : &self->slurm_tasks_per_node) = (int) v;
        break;
    case S_HELP:
        self->usage(stdout);
        return 0;
    case S_VERSION:
        printf("%s %s (protocol %d%s)\n", self->ident, ZDIST_VERSION_STRING, ZDIST_PROTOCOL_VERSION,
               self->version_extra ? self->version_extra : "");
        return 0;
    default:
        self->usage(stderr);
        return 2;
    }
    return ZDIST_DAEMON_OPTIONS_RUN;
}

/* --slurm: resolves the step's allocation into TF_CONFIG, which the task
   lookup then reads like any other. */
static int
s_slurm(zdist_daemon_options_t *self)
{
    if (!self->slurm) {
        if (self->slurm_jobs || self->slurm_port_base || self->slurm_tasks_per_node) {
            fprintf(stderr, "%s: --jobs, --port-base and --tasks-per-node go with --slurm\n", self->ident);
            return 2;
        }
        return 0;
    }
    if (self->cluster_file || self->task) {
        fprintf(stderr, "%s: --slurm finds the task itself; leave out --cluster and --task\n", self->ident);
        return 2;
    }
    zdist_error_t err = {0};
    char *tf_config = NULL;
    if (zdist_slurm_resolve(self->slurm_jobs, self->slurm_port_base, self->slurm_tasks_per_node, &tf_config, &err) <
        0) {
        fprintf(stderr, "%s: --slurm: %s\n", self->ident, err.text);
        return 2;
    }
    int rc = setenv("TF_CONFIG", tf_config, 1);
    free(tf_config);
    if (rc < 0) {
        fprintf(stderr, "%s: --slurm: cannot set TF_CONFIG: %s\n", self->ident, strerror(errno));
        return 2;
    }
    return 0;
}

int
zdist_daemon_options_parse(zdist_daemon_options_t *self, int argc, char **argv, const struct option *own,
                           zdist_daemon_option_fn *fn, void *arg)
{
    /* getopt_long takes one table: the daemon's own options, then ours. */
    struct option all[S_MAX_OPTIONS];
    size_t n = 0, num_shared = sizeof s_shared / sizeof s_shared[0];
    for (; own && own[n].name; n++) {
        if (n + num_shared + 1 > S_MAX_OPTIONS) {
            fprintf(stderr, "%s: too many options\n", self->ident);
            return 2;
        }
        all[n] = own[n];
    }
    memcpy(all + n, s_shared, sizeof s_shared);
    memset(all + n + num_shared, 0, sizeof all[0]);
    int opt;
    while ((opt = getopt_long(argc, argv, "", all, NULL)) != -1) {
        int rc = ZDIST_DAEMON_OPTIONS_RUN;
        if (opt <= 0 || opt >= S_CLUSTER || opt == '?')
            rc = s_take(self, opt, optarg);
        else if (!fn || fn(arg, opt, optarg) != 0)
            rc = 2;
        if (rc != ZDIST_DAEMON_OPTIONS_RUN)
            return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", self->ident, argv[optind]);
        return 2;
    }
    return s_http_env(self) || s_slurm(self) ? 2 : ZDIST_DAEMON_OPTIONS_RUN;
}

/* Open files and ZeroMQ sockets for many peers (see the header). A limit
   that cannot be raised stays as it was: the daemon then serves fewer peers,
   as before. */
static void
s_raise_limits(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 1048576 ? 1048576 : rl.rlim_max;
        if (want > rl.rlim_cur) {
            rl.rlim_cur = want;
            (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    /* A ZeroMQ socket takes at least one descriptor: no more sockets than files. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 1024)
        zsys_set_max_sockets(rl.rlim_cur > 65536 ? 65536 : (size_t)rl.rlim_cur);
}

void
zdist_daemon_options_apply(const zdist_daemon_options_t *self, size_t *max_message_bytes,
                           size_t *max_calls_per_peer, size_t *max_connections_per_peer, char *http, size_t http_size)
{
    s_raise_limits();
    if (max_message_bytes && self->max_message_bytes)
        *max_message_bytes = self->max_message_bytes;
    if (max_calls_per_peer && self->max_calls_per_peer)
        *max_calls_per_peer = self->max_calls_per_peer;
    if (max_connections_per_peer && self->max_connections_per_peer)
        *max_connections_per_peer = self->max_connections_per_peer;
    if (http && http_size)
        snprintf(http, http_size, "%s", self->http);
}
