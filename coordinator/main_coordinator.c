/* zdist-coordinator: the coordinator daemon (TF_CONFIG task type "chief"). */
#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "coord_job.h"
#include "coord_server.h"
#include "zdist/cluster.h"
#include "zdist/daemon.h"
#include "zdist/daemon_options.h"
#include "zdist/parse.h"

static void
s_usage(FILE *out)
{
    fprintf(out,
            "usage: zdist-coordinator [OPTIONS]\n"
            "Takes jobs from 'zdist submit' (proto/coordinator.proto), creates their variables on the ps tasks,\n"
            "schedules their steps on the workers (ClusterCoordinator), checkpoints, evaluates, and recovers\n"
            "from lost workers, ps tasks and its own restarts.\n\n"
            "The task comes from TF_CONFIG (or --cluster/--task) and must be of type 'chief'.\n"
            "  --cluster FILE            cluster JSON (same form as TF_CONFIG) instead of the environment\n"
            "  --task chief:0            the task, overriding TF_CONFIG's \"task\"\n"
            "  --bind ENDPOINT           bind here instead of the task's address\n"
            "  --state-dir DIR           jobs, checkpoints, metrics (default $STATE_DIRECTORY, else ./zdist-state);\n"
            "                            every ps task must be able to write there (same machine or shared fs)\n"
            "  --checkpoint-root DIR     a job's checkpoint.dir must lie under DIR (repeatable; default the state\n"
            "                            dir): refused at submit, naming the field, before anything is created\n"
            "  --closure-timeout-ms N    deadline of one closure (RUN_STEPS) on a worker (default 120000)\n"
            "  --http ADDR               serve a live dashboard at http://ADDR/, its JSON at /api/status and\n"
            "                            Prometheus metrics at /metrics (PORT, HOST:PORT; a bare PORT is on\n"
            "                            127.0.0.1; default $ZDIST_HTTP, else off; read-only, no authentication)\n"
            "  --keys DIR                CURVE: certificates (default $ZDIST_KEYS_DIR; see zdist keygen)\n"
            "  --max-jobs N              jobs kept in the state dir (default 10000)\n"
            "  --max-queued-jobs N       jobs queued or running at once (default 64)\n"
            "  --max-running-jobs N      parameter_server jobs running at once, sharing the workers and ps\n"
            "                            tasks, 1..64 (default 4; a multi_worker_mirrored job runs alone); at most\n"
            "                            the workers' --max-jobs (default 8): each job is a session on every worker\n"
            "  --max-followers N         STATUS streams open at once, 1..1024 (default 64)\n"
            "  --keep-variables          leave an ended job's variables on the psds (to inspect them with zdist ps\n"
            "                            get); by default they are dropped once its final checkpoint is written\n"
            "  --max-message-bytes N     largest request accepted (default 33554432)\n"
            "  --max-calls-per-peer N    STATUS streams and other calls answered later that one peer (its key,\n"
            "                            else its connection) may have open; beyond, RESOURCE_EXHAUSTED (256)\n"
            "  --max-connections-per-peer N\n"
            "                            TCP connections one peer (its key, else its address) may hold open;\n"
            "                            beyond, refused (default 64)\n"
            "  --help, --version\n");
    zdist_daemon_options_usage_slurm(out);
}

/* The workers' and ps tasks' endpoints from the cluster. 0, or 2 after one line on stderr. */
static int
s_tasks(coord_server_config_t *config, const zdist_cluster_t *cluster)
{
    const char *jobs[2] = {"worker", "ps"};
    for (int k = 0; k < 2; k++) {
        size_t n = zdist_cluster_num_tasks(cluster, jobs[k]);
        /* No ps tasks is a multi_worker_mirrored cluster. */
        int max = k == 0 ? COORD_MAX_WORKERS : COORD_MAX_PS;
        if ((n == 0 && k == 0) || n > (size_t)max) {
            fprintf(stderr, "zdist-coordinator: the cluster has %zu '%s' tasks; it needs %d..%d\n", n, jobs[k],
                    k == 0, max);
            return 2;
        }
        for (size_t i = 0; i < n; i++) {
            int index;
            char *ep = k == 0 ? config->workers[i] : config->ps[i];
            if (zdist_cluster_job_task(cluster, jobs[k], i, &index, NULL) < 0 ||
                zdist_cluster_endpoint(cluster, jobs[k], index, ep, 256) < 0) {
                fprintf(stderr, "zdist-coordinator: %s task %zu has no usable address\n", jobs[k], i);
                return 2;
            }
        }
        if (k == 0)
            config->num_workers = (int)n;
        else
            config->num_ps = (int)n;
    }
    return 0;
}

/* The state directory, created, canonical: --state-dir, else systemd's
   $STATE_DIRECTORY, else ./zdist-state. 0, or 2 after one line on stderr. */
static int
s_state_dir(coord_server_config_t *config, const char *state_dir)
{
    if (!state_dir)
        state_dir = getenv("STATE_DIRECTORY");
    if (!state_dir || !*state_dir)
        state_dir = "./zdist-state";
    mkdir(state_dir, 0755);
    char real[PATH_MAX];
    if (!realpath(state_dir, real) || strlen(real) >= sizeof config->state_dir - 200) {
        fprintf(stderr, "zdist-coordinator: --state-dir '%s': %s\n", state_dir, strerror(errno));
        return 2;
    }
    memcpy(config->state_dir, real, strlen(real) + 1); /* length checked above */
    return 0;
}

/* What the coordinator's own options fill (the shared ones: zdist/daemon_options.h). */
typedef struct {
    coord_server_config_t *config;
    const char *state_dir;
    const char *roots[COORD_MAX_CKPT_ROOTS]; /* --checkpoint-root, canonical */
    size_t nroots;
} s_options_t;

/* --checkpoint-root DIR: canonical, kept for coord_job_set_checkpoint_roots; a bad one is fatal (2). */
static int
s_add_root(const char *dir, s_options_t *own)
{
    static char real[COORD_MAX_CKPT_ROOTS][PATH_MAX];
    size_t n = own->nroots;
    if (n == COORD_MAX_CKPT_ROOTS || !realpath(dir, real[n])) {
        fprintf(stderr, "zdist-coordinator: --checkpoint-root '%s': %s; give an existing directory (at most %d)\n",
                dir, n == COORD_MAX_CKPT_ROOTS ? "too many" : strerror(errno), COORD_MAX_CKPT_ROOTS);
        return 2;
    }
    own->roots[n] = real[n];
    own->nroots = n + 1;
    return 0;
}

/* The checkpoint roots the chief confines checkpoint.dir to: --checkpoint-root's, else the state dir.
   0, or 2 (out of memory). */
static int
s_checkpoint_roots(const s_options_t *own, const coord_server_config_t *config)
{
    const char *state_dir = config->state_dir;
    if (own->nroots)
        return coord_job_set_checkpoint_roots(own->roots, own->nroots) < 0 ? 2 : 0;
    return coord_job_set_checkpoint_roots(&state_dir, 1) < 0 ? 2 : 0;
}

static int
s_option(void *arg, int opt, const char *value)
{
    s_options_t *own = arg;
    coord_server_config_t *config = own->config;
    int64_t v;
    switch (opt) {
    case 's':
        own->state_dir = value;
        return 0;
    case 'T':
        if (zdist_parse_int64(value, 100, INT64_C(86400000), &v) < 0) {
            fprintf(stderr, "zdist-coordinator: --closure-timeout-ms must be in 100..86400000, got '%s'\n", value);
            return 2;
        }
        config->closure_timeout_ms = v;
        return 0;
    case 'K':
        config->keep_variables = true;
        return 0;
    case 'C':
        return s_add_root(value, own);
    case 'J':
    case 'Q':
    case 'F':
        if (zdist_parse_int64(value, 1, opt == 'F' ? COORD_MAX_FOLLOWERS : 1000000, &v) < 0) {
            fprintf(stderr, "zdist-coordinator: --%s must be in 1..%d, got '%s'\n",
                    opt == 'J' ? "max-jobs" : opt == 'Q' ? "max-queued-jobs" : "max-followers",
                    opt == 'F' ? COORD_MAX_FOLLOWERS : 1000000, value);
            return 2;
        }
        *(opt == 'J' ? &config->max_jobs : opt == 'Q' ? &config->max_queued : &config->max_followers) = (int) v;
        return 0;
    default: /* 'R' */
        if (zdist_parse_int64(value, 1, COORD_MAX_RUNNING, &v) < 0) {
            fprintf(stderr, "zdist-coordinator: --max-running-jobs must be a number of jobs in 1..%d, got '%s'\n",
                    COORD_MAX_RUNNING, value);
            return 2;
        }
        config->max_running = (int) v;
        return 0;
    }
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"state-dir", required_argument, NULL, 's'},
        {"closure-timeout-ms", required_argument, NULL, 'T'},
        {"max-jobs", required_argument, NULL, 'J'},
        {"max-queued-jobs", required_argument, NULL, 'Q'},
        {"max-running-jobs", required_argument, NULL, 'R'},
        {"max-followers", required_argument, NULL, 'F'},
        {"keep-variables", no_argument, NULL, 'K'},
        {"checkpoint-root", required_argument, NULL, 'C'},
        {0},
    };
    static coord_server_config_t config;
    config.closure_timeout_ms = 120000;
    zdist_daemon_options_t opts = {
        .ident = "zdist-coordinator", .usage = s_usage, .max_message_bytes_max = INT64_C(1) << 40};
    s_options_t own = {.config = &config};
    int rc = zdist_daemon_options_parse(&opts, argc, argv, longopts, s_option, &own);
    if (rc != ZDIST_DAEMON_OPTIONS_RUN)
        return rc;
    zdist_daemon_options_apply(&opts, &config.max_message_bytes, &config.max_calls_per_peer,
                               &config.max_connections_per_peer, config.http, sizeof config.http);
    zsys_init();
    zsys_set_logident("zdist-coordinator");
    zsys_set_logstream(stderr);

    zdist_cluster_t *cluster = NULL;
    int chief_index = 0;
    if (zdist_daemon_find_task("zdist-coordinator", opts.cluster_file, opts.task, opts.bind, "chief", &chief_index,
                               config.endpoint, sizeof config.endpoint, &cluster) != 0)
        return 2;
    if (!cluster) {
        fprintf(stderr, "zdist-coordinator: needs the cluster (its workers and ps tasks): set TF_CONFIG or pass "
                        "--cluster FILE\n");
        return 2;
    }
    if (zdist_daemon_keys("zdist-coordinator", opts.keys_dir, "chief", chief_index, cluster) != 0) {
        zdist_cluster_destroy(&cluster);
        return 2;
    }
    rc = s_tasks(&config, cluster);
    zdist_cluster_destroy(&cluster);
    if (rc != 0)
        return rc;
    if (s_state_dir(&config, own.state_dir) != 0 || s_checkpoint_roots(&own, &config) != 0)
        return 2;

    zsys_info("%d workers, %d ps, state dir '%s'", config.num_workers, config.num_ps, config.state_dir);
    /* On SIGTERM the actor checkpoints the running job before it stops. */
    return zdist_daemon_run(coord_server_actor, &config, "chief");
}
