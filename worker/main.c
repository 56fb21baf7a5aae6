/* zdist-worker: the worker daemon (TF_CONFIG task type "worker"; "evaluator" with --evaluator). */
#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "worker_agent.h"
#include "worker_eval.h"
#include "worker_run.h"
#include "zdist/cluster.h"
#include "zdist/daemon.h"
#include "zdist/daemon_options.h"
#include "zdist/parse.h"
#include "zdist/step.h"

static void
s_usage(FILE *out)
{
    fprintf(out,
            "usage: zdist-worker [OPTIONS]\n"
            "       zdist-worker run JOB.json [--json] [--steps N] [--quiet]   (what `zdist run` runs)\n"
            "Runs step functions of a job on this worker (proto/worker.proto): start a job, run steps,\n"
            "evaluate, stop. Under parameter_server its variables live on the ps tasks.\n\n"
            "The task comes from TF_CONFIG (or --cluster/--task) and must be of type 'worker'\n"
            "('evaluator' with --evaluator).\n"
            "  --cluster FILE          cluster JSON (same form as TF_CONFIG) instead of the environment\n"
            "  --task worker:N         the task, overriding TF_CONFIG's \"task\"\n"
            "  --bind ENDPOINT         bind here instead of the task's address (e.g. tcp://127.0.0.1:5001)\n"
            "  --join CHIEF            join a running cluster through its chief (HOST:PORT or tcp://...) as the\n"
            "                          next worker:N (elastic parameter_server workers); needs --bind, an address\n"
            "                          the chief reaches. A worker whose TF_CONFIG task is not in the chief's\n"
            "                          cluster joins the same way, without --join, as the worker:N it names\n"
            "  --key NAME              with --keys: this worker's certificate (default worker-N); a worker that\n"
            "                          joins under CURVE needs one of its own, a worker-* key (zdist keygen)\n"
            "  --evaluator             serve an 'evaluator' task (TensorFlow's SidecarEvaluator): evaluate the\n"
            "                          newest checkpoint of each running job on its test set\n"
            "                          (older ones it could not keep up with are skipped) and append\n"
            "                          eval_step, test_loss, test_accuracy to STATE/jobs/ID/evaluations.jsonl,\n"
            "                          which `zdist status` shows. Needs --state-dir\n"
            "  --state-dir DIR         with --evaluator: the coordinator's --state-dir (also $ZDIST_STATE_DIR, then\n"
            "                          systemd's $STATE_DIRECTORY);\n"
            "                          on another host it must be the same directory, shared (e.g. NFS)\n"
            "  --ps-timeout-ms N       deadline of each psd call attempt (default 30000)\n"
            "  --max-message-bytes N   largest request accepted (default 268435456)\n"
            "  --max-jobs N            jobs held at once, 1..64 (default 8): parameter_server jobs of a coordinator\n"
            "                          running several (keep its --max-running-jobs at most this)\n"
            "  --max-calls-per-peer N  calls answered later that one peer (its key, else its connection) may\n"
            "                          have in flight; beyond, RESOURCE_EXHAUSTED (default 256)\n"
            "  --max-connections-per-peer N\n"
            "                          TCP connections one peer (its key, else its address) may hold open;\n"
            "                          beyond, refused (default 64)\n"
            "  --http ADDR             serve Prometheus metrics at http://ADDR/metrics (PORT, HOST:PORT;\n"
            "                          a bare PORT is on 127.0.0.1; default $ZDIST_HTTP, else off)\n"
            "  --keys DIR              CURVE: certificates (default $ZDIST_KEYS_DIR; see zdist keygen)\n"
            "  --plugin-dir DIR        load plugin models (every *.so) from DIR only; repeatable, also\n"
            "                          $ZDIST_PLUGIN_DIRS (colon-separated). A job names a model, never a\n"
            "                          place: its plugin_path is refused\n"
            "  --data-root DIR         a job's dataset files must resolve under DIR (no '..', no symbolic\n"
            "                          link out); repeatable, also $ZDIST_DATA_ROOTS (colon-separated).\n"
            "                          None given: any file this user can read (a warning at start)\n"
            "  --help, --version\n");
    zdist_daemon_options_usage_slurm(out);
}

/* Adds DIR (from `what`: "--plugin-dir" or an environment variable) to a
   list of canonical directories. A bad flag is fatal (2); a directory named
   by the environment that does not exist is skipped with a warning (a
   unit's default may name one the host does not have). */
static int
s_add_dir(const char *what, const char *dir, bool from_env, char list[][WORKER_AGENT_PATH_MAX], int *n)
{
    char real[PATH_MAX];
    struct stat st;
    if (!*dir)
        return 0;
    const char *why = NULL;
    if (!realpath(dir, real))
        why = strerror(errno);
    else if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
        why = "not a directory";
    if (why) {
        if (from_env) {
            fprintf(stderr, "zdist-worker: warning: %s: '%s' skipped: %s\n", what, dir, why);
            return 0;
        }
        fprintf(stderr, "zdist-worker: %s '%s': %s; give an existing directory\n", what, dir, why);
        return 2;
    }
    if (strchr(real, ':') || strlen(real) >= WORKER_AGENT_PATH_MAX) {
        fprintf(stderr, "zdist-worker: %s '%s': a directory whose path holds ':' or is longer than %d bytes cannot "
                "be used\n", what, dir, WORKER_AGENT_PATH_MAX - 1);
        return 2;
    }
    for (int i = 0; i < *n; i++)
        if (strcmp(list[i], real) == 0)
            return 0;
    if (*n == WORKER_AGENT_MAX_DIRS) {
        fprintf(stderr, "zdist-worker: %s: at most %d directories\n", what, WORKER_AGENT_MAX_DIRS);
        return 2;
    }
    memcpy(list[(*n)++], real, strlen(real) + 1);
    return 0;
}

/* Each entry of a colon-separated environment variable, through s_add_dir. */
static int
s_add_env_dirs(const char *var, char list[][WORKER_AGENT_PATH_MAX], int *n, bool *seen)
{
    const char *v = getenv(var);
    if (!v)
        return 0;
    *seen = true;
    char *copy = strdup(v), *save = NULL;
    if (!copy)
        return 2;
    int rc = 0;
    for (char *e = strtok_r(copy, ":", &save); e && rc == 0; e = strtok_r(NULL, ":", &save))
        rc = s_add_dir(var, e, true, list, n);
    free(copy);
    return rc;
}

/* How many of the cluster's worker tasks share this task's host (0 when none). */
static int
s_workers_on_host(const zdist_cluster_t *cluster, const char *endpoint)
{
    char mine[256], ep[256], host[256];
    if (zdist_endpoint_split(endpoint, mine, sizeof mine, NULL) < 0)
        return 1;
    int n = 0;
    size_t nw = zdist_cluster_num_tasks(cluster, "worker");
    for (size_t i = 0; i < nw; i++) {
        int index;
        if (zdist_cluster_job_task(cluster, "worker", i, &index, NULL) < 0 ||
            zdist_cluster_endpoint(cluster, "worker", index, ep, sizeof ep) < 0 ||
            zdist_endpoint_split(ep, host, sizeof host, NULL) < 0)
            continue;
        n += strcmp(host, mine) == 0;
    }
    return n;
}

/* The evaluator's state directory, canonical, into config->state_dir:
   --state-dir, else $ZDIST_STATE_DIR, else systemd's $STATE_DIRECTORY. A
   worker takes none. 0, or 2 after one line on stderr. */
static int
s_state_dir(worker_agent_config_t *config, const char *state_dir)
{
    if (state_dir && !config->evaluator) {
        fprintf(stderr, "zdist-worker: --state-dir is for --evaluator only (a worker keeps no state); remove it\n");
        return 2;
    }
    if (!state_dir && config->evaluator)
        state_dir = getenv("ZDIST_STATE_DIR");
    if (!state_dir && config->evaluator)
        state_dir = getenv("STATE_DIRECTORY"); /* systemd's StateDirectory=, as the coordinator's */
    if (config->evaluator) {
        char real[PATH_MAX];
        struct stat st;
        if (!state_dir || !*state_dir) {
            fprintf(stderr, "zdist-worker: --evaluator needs --state-dir DIR (or ZDIST_STATE_DIR): the "
                    "coordinator's state directory, where it writes the jobs' checkpoints\n");
            return 2;
        }
        errno = 0;
        if (!realpath(state_dir, real) || stat(real, &st) < 0 || !S_ISDIR(st.st_mode) ||
            strlen(real) >= sizeof config->state_dir) {
            fprintf(stderr, "zdist-worker: --state-dir '%s': %s; give the coordinator's existing state directory "
                    "(shared, when the evaluator runs on another host)\n", state_dir,
                    errno ? strerror(errno) : "not a directory");
            return 2;
        }
        memcpy(config->state_dir, real, strlen(real) + 1);
    }
    return 0;
}

/* The ps tasks' endpoints and this host's share of BLAS threads, from the cluster. */
static void
s_from_cluster(worker_agent_config_t *config, const zdist_cluster_t *cluster)
{
    size_t nps = zdist_cluster_num_tasks(cluster, "ps");
    for (size_t i = 0; i < nps && i < WORKER_AGENT_MAX_PS; i++) {
        int index;
        if (zdist_cluster_job_task(cluster, "ps", i, &index, NULL) < 0 || index != (int)i ||
            zdist_cluster_endpoint(cluster, "ps", index, config->ps_endpoints[i],
                                   sizeof config->ps_endpoints[i]) < 0)
            break;
        config->num_ps = (int)i + 1;
    }
    /* BLAS threads are shared out between the worker tasks of a host;
       an evaluator beside them counts as one more. */
    int n = s_workers_on_host(cluster, config->endpoint);
    config->host_workers = config->evaluator ? n + 1 : n > 0 ? n : 1;
}

/* Where plugins and datasets may come from, logged at start. */
static void
s_log_places(const worker_agent_config_t *config)
{
    zsys_info("%d ps task%s in the cluster", config->num_ps, config->num_ps == 1 ? "" : "s");
    zsys_info("plugins from: %s", config->plugin_dirs[0] ? config->plugin_dirs : "none (built-in models only)");
    if (getenv("ZDIST_PLUGIN_PATH"))
        zsys_notice("ZDIST_PLUGIN_PATH is ignored by the daemon (it is `zdist run`'s); use --plugin-dir or "
                    "ZDIST_PLUGIN_DIRS");
    if (!config->confine_data) {
        zsys_warning("no --data-root: a job may name any file this worker's user can read as its dataset; give "
                     "--data-root DIR (or ZDIST_DATA_ROOTS) on a shared cluster");
    } else {
        char roots[WORKER_AGENT_MAX_DIRS * WORKER_AGENT_PATH_MAX] = "";
        for (int i = 0; i < config->num_data_roots; i++) {
            size_t len = strlen(roots);
            snprintf(roots + len, sizeof roots - len, "%s%s", i ? ", " : "", config->data_roots[i]);
        }
        zsys_info("dataset files only under: %s", config->num_data_roots ? roots : "nothing (synthetic data only)");
    }
}

/* Preemption of this task and joining through its cluster's chief (a
   TF_CONFIG task the chief may not have: JOIN tells, see
   zdist_daemon_set_join), or joining through the chief given by --join
   (with --bind). 0, or 2 after a line on stderr. */
static int
s_join_setup(const worker_agent_config_t *config, const zdist_cluster_t *cluster, const char *join, const char *bind)
{
    char chief[300] = "";
    if (join)
        snprintf(chief, sizeof chief, "%s%s", strstr(join, "://") ? "" : "tcp://", join);
    if (!chief[0]) {
        zdist_daemon_set_preempt(cluster, "worker", config->worker_task);
        char ep[256];
        if (cluster && zdist_cluster_has_job(cluster, "chief") &&
            zdist_cluster_endpoint(cluster, "chief", 0, chief, sizeof chief) == 0 &&
            zdist_cluster_endpoint(cluster, "worker", config->worker_task, ep, sizeof ep) == 0)
            zdist_daemon_set_join(chief, ep, cluster, config->worker_task);
        return 0;
    }
    if (!bind || strncmp(config->endpoint, "tcp://", 6) != 0 || strstr(config->endpoint, "://*") ||
        strstr(config->endpoint, "://0.0.0.0")) {
        fprintf(stderr, "zdist-worker: joining through the chief needs --bind tcp://HOST:PORT, an address the chief "
                "reaches this worker at\n");
        return 2;
    }
    zdist_daemon_set_join(chief, config->endpoint, NULL, -1);
    return 0;
}

/* What the worker's own options fill (the shared ones: zdist/daemon_options.h). */
typedef struct {
    worker_agent_config_t *config;
    const char *state_dir;
    char (*plugin_dirs)[WORKER_AGENT_PATH_MAX];
    int num_plugin_dirs;
    const char *join; /* --join CHIEF */
    const char *key;  /* --key NAME */
} s_options_t;

static int
s_option(void *arg, int opt, const char *value)
{
    s_options_t *o = arg;
    worker_agent_config_t *config = o->config;
    int64_t v;
    switch (opt) {
    case 'e':
        config->evaluator = true;
        return 0;
    case 'S':
        o->state_dir = value;
        return 0;
    case 'p':
        if (zdist_parse_int64(value, 1, INT64_C(86400000), &v) < 0) {
            fprintf(stderr, "zdist-worker: --ps-timeout-ms must be milliseconds in 1..86400000, got '%s'\n", value);
            return 2;
        }
        config->ps_timeout_ms = v;
        return 0;
    case 'j':
        if (zdist_parse_int64(value, 1, WORKER_AGENT_MAX_JOBS, &v) < 0) {
            fprintf(stderr, "zdist-worker: --max-jobs must be a number of jobs in 1..%d (those a worker holds at "
                    "once; default %d), got '%s'\n", WORKER_AGENT_MAX_JOBS, WORKER_AGENT_DEFAULT_JOBS, value);
            return 2;
        }
        config->max_jobs = (int) v;
        return 0;
    case 'P':
        return s_add_dir("--plugin-dir", value, false, o->plugin_dirs, &o->num_plugin_dirs);
    case 'J':
        o->join = value;
        return 0;
    case 'K':
        o->key = value;
        return 0;
    default: /* 'D' */
        config->confine_data = true;
        return s_add_dir("--data-root", value, false, config->data_roots, &config->num_data_roots);
    }
}

int
main(int argc, char **argv)
{
    /* `zdist run`: the job in this process, through the same session START_JOB builds. */
    zdist_daemon_keep_memory();
    if (argc > 1 && strcmp(argv[1], "run") == 0)
        return worker_run_main(argc - 1, argv + 1);

    static const struct option longopts[] = {
        {"evaluator", no_argument, NULL, 'e'},
        {"state-dir", required_argument, NULL, 'S'},
        {"ps-timeout-ms", required_argument, NULL, 'p'},
        {"max-jobs", required_argument, NULL, 'j'},
        {"plugin-dir", required_argument, NULL, 'P'},
        {"data-root", required_argument, NULL, 'D'},
        {"join", required_argument, NULL, 'J'},
        {"key", required_argument, NULL, 'K'},
        {0},
    };
    static worker_agent_config_t config;
    static char plugin_dirs[WORKER_AGENT_MAX_DIRS][WORKER_AGENT_PATH_MAX];
    bool plugin_env = false;
    zdist_wire_limits_default(&config.limits);
    config.ps_timeout_ms = 30000;
    char version[32];
    snprintf(version, sizeof version, ", step ABI %d", ZDIST_STEP_ABI_VERSION);
    zdist_daemon_options_t opts = {.ident = "zdist-worker", .usage = s_usage, .version_extra = version};
    s_options_t own = {.config = &config, .plugin_dirs = plugin_dirs};
    int rc = zdist_daemon_options_parse(&opts, argc, argv, longopts, s_option, &own);
    if (rc != ZDIST_DAEMON_OPTIONS_RUN)
        return rc;
    zdist_daemon_options_apply(&opts, &config.limits.max_message_bytes, &config.max_calls_per_peer,
                               &config.max_connections_per_peer, config.http, sizeof config.http);
    if (s_state_dir(&config, own.state_dir) != 0)
        return 2;
    if (s_add_env_dirs("ZDIST_PLUGIN_DIRS", plugin_dirs, &own.num_plugin_dirs, &plugin_env) != 0 ||
        s_add_env_dirs("ZDIST_DATA_ROOTS", config.data_roots, &config.num_data_roots, &config.confine_data) != 0)
        return 2;
    for (int i = 0; i < own.num_plugin_dirs; i++) {
        size_t len = strlen(config.plugin_dirs);
        snprintf(config.plugin_dirs + len, sizeof config.plugin_dirs - len, "%s%s", i ? ":" : "", plugin_dirs[i]);
    }

    zsys_init();
    zsys_set_logident("zdist-worker");
    zsys_set_logstream(stderr);

    if (own.join && !opts.bind) {
        fprintf(stderr, "zdist-worker: --join needs --bind tcp://HOST:PORT, an address the chief reaches this "
                "worker at\n");
        return 2;
    }
    const char *want = config.evaluator ? "evaluator" : "worker";
    zdist_cluster_t *cluster = NULL;
    if (zdist_daemon_find_task("zdist-worker", opts.cluster_file, opts.task, opts.bind, want, &config.worker_task,
                               config.endpoint, sizeof config.endpoint, &cluster) != 0)
        return 2;
    if (own.join && !own.key && (opts.keys_dir || getenv("ZDIST_KEYS_DIR"))) {
        fprintf(stderr, "zdist-worker: --join with keys needs --key NAME, the joining worker's own certificate (a "
                "worker-* one, e.g. `zdist keygen worker-join-1`, in the key directory of every task)\n");
        zdist_cluster_destroy(&cluster);
        return 2;
    }
    if ((own.key ? zdist_daemon_keys_as("zdist-worker", opts.keys_dir, own.key, cluster)
                 : zdist_daemon_keys("zdist-worker", opts.keys_dir, want, config.worker_task, cluster)) != 0) {
        zdist_cluster_destroy(&cluster);
        return 2;
    }
    if (!config.evaluator && s_join_setup(&config, cluster, own.join, opts.bind) != 0) {
        zdist_cluster_destroy(&cluster);
        return 2;
    }
    if (cluster) {
        s_from_cluster(&config, cluster);
        zdist_cluster_destroy(&cluster);
    }
    s_log_places(&config);
    char what[64];
    snprintf(what, sizeof what, "%s task %d", want, config.worker_task);
    return zdist_daemon_run(config.evaluator ? worker_eval_actor : worker_agent_actor, &config, what);
}
