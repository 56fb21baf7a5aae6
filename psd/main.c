/* zdist-psd: the parameter-server daemon (TF_CONFIG task type "ps"). */
#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "psd_server.h"
#include "zdist/daemon.h"
#include "zdist/daemon_options.h"
#include "zdist/parse.h"

static void
s_usage(FILE *out)
{
    fprintf(out,
            "usage: zdist-psd [OPTIONS]\n"
            "Serves variable shards of a ps task (TensorFlow's ParameterServerStrategy).\n\n"
            "The task comes from TF_CONFIG (or --cluster/--task) and must be of type 'ps'.\n"
            "  --cluster FILE          cluster JSON (same form as TF_CONFIG) instead of the environment\n"
            "  --task ps:N             the task, overriding TF_CONFIG's \"task\"\n"
            "  --bind ENDPOINT         bind here instead of the task's address (e.g. tcp://127.0.0.1:5000)\n"
            "  --max-message-bytes N   largest request accepted (default 268435456)\n"
            "  --max-tensor-bytes N    largest tensor in a request or reply (default 268435456)\n"
            "  --http ADDR             serve Prometheus metrics at http://ADDR/metrics (PORT, HOST:PORT;\n"
            "                          a bare PORT is on 127.0.0.1; default $ZDIST_HTTP, else off)\n"
            "  --max-variables N       variable shards peers may create here (default 65536)\n"
            "  --max-bytes N           bytes of values and optimizer slots peers may make this psd hold\n"
            "                          (checked at create; default 3/4 of the machine's memory); dynamic\n"
            "                          embedding tables get what fixed variables leave: past it new ids are\n"
            "                          refused admission (counted, logged once per table), no row dropped\n"
            "  --max-calls-per-peer N  calls answered later that one peer (its key, else its connection) may\n"
            "                          have in flight; beyond, RESOURCE_EXHAUSTED (default 256)\n"
            "  --max-connections-per-peer N\n"
            "                          TCP connections one peer (its key, else its address) may hold open;\n"
            "                          beyond, refused (default 64)\n"
            "  --live-job-seconds N    a job that wrote here within N seconds is live: DROP_JOB of it is\n"
            "                          refused unless forced (the chief's own drops, zdist ps drop --force);\n"
            "                          0: every drop is done (default 60)\n"
            "  --checkpoint-root DIR   SAVE and RESTORE may name directories under DIR only (absolute, no\n"
            "                          '..', no symbolic link out); repeatable, also $ZDIST_CHECKPOINT_ROOTS\n"
            "                          (colon-separated). None given: anywhere this user may write (a warning)\n"
            "  --keys DIR              CURVE: certificates (default $ZDIST_KEYS_DIR; see zdist keygen)\n"
            "  --help, --version\n");
    zdist_daemon_options_usage_slurm(out);
}

/* A checkpoint root, canonical; a bad one is fatal (2). */
static int
s_add_root(const char *dir, const char *what, psd_server_config_t *config)
{
    char real[PATH_MAX];
    struct stat st;
    const char *why = NULL;
    if (!realpath(dir, real))
        why = strerror(errno);
    else if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
        why = "not a directory";
    else if (config->num_ckpt_roots >= PSD_MAX_CKPT_ROOTS)
        why = "too many checkpoint roots (at most 16)";
    else if (strlen(real) >= PSD_CKPT_ROOT_MAX)
        why = "the path is too long";
    if (why) {
        fprintf(stderr, "zdist-psd: %s '%s': %s; give an existing directory\n", what, dir, why);
        return 2;
    }
    memcpy(config->ckpt_roots[config->num_ckpt_roots++], real, strlen(real) + 1); /* length checked above */
    return 0;
}

/* --live-job-seconds N: 0..86400 (0: no job is live). */
static int
s_live_seconds(const char *text, psd_server_config_t *config)
{
    int64_t v;
    if (zdist_parse_int64(text, 0, 86400, &v) < 0) {
        fprintf(stderr, "zdist-psd: --live-job-seconds must be a number of seconds in 0..86400, got '%s'\n", text);
        return 2;
    }
    config->live_job_ms = v * 1000;
    return 0;
}

/* psd's own options (the shared ones: zdist/daemon_options.h). */
static int
s_option(void *arg, int opt, const char *value)
{
    psd_server_config_t *config = arg;
    int64_t v;
    switch (opt) {
    case 'T':
        if (zdist_parse_int64(value, 1024, INT64_MAX, &v) < 0) {
            fprintf(stderr, "zdist-psd: --max-tensor-bytes must be a number of bytes >= 1024, got '%s'\n", value);
            return 2;
        }
        config->max_tensor_bytes = (size_t) v;
        return 0;
    case 'v':
        if (zdist_parse_int64(value, 1, INT64_C(1) << 30, &v) < 0) {
            fprintf(stderr, "zdist-psd: --max-variables must be a number of shards in 1..2^30, got '%s'\n", value);
            return 2;
        }
        config->max_variables = (size_t) v;
        return 0;
    case 'B':
        if (zdist_parse_int64(value, 1024, INT64_MAX, &v) < 0) {
            fprintf(stderr, "zdist-psd: --max-bytes must be a number of bytes >= 1024, got '%s'\n", value);
            return 2;
        }
        config->max_bytes = (uint64_t) v;
        return 0;
    case 'L':
        return s_live_seconds(value, config);
    default: /* 'R' */
        return s_add_root(value, "--checkpoint-root", config);
    }
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"max-tensor-bytes", required_argument, NULL, 'T'},
        {"max-variables", required_argument, NULL, 'v'},
        {"max-bytes", required_argument, NULL, 'B'},
        {"checkpoint-root", required_argument, NULL, 'R'},
        {"live-job-seconds", required_argument, NULL, 'L'},
        {0},
    };
    psd_server_config_t config = {0};
    zdist_wire_limits_default(&config.limits);
    config.max_tensor_bytes = (size_t) 256 << 20;
    config.live_job_ms = 60000;
    zdist_daemon_options_t opts = {.ident = "zdist-psd", .usage = s_usage};
    int rc = zdist_daemon_options_parse(&opts, argc, argv, longopts, s_option, &config);
    if (rc != ZDIST_DAEMON_OPTIONS_RUN)
        return rc;
    zdist_daemon_options_apply(&opts, &config.limits.max_message_bytes, &config.max_calls_per_peer,
                               &config.max_connections_per_peer, config.http, sizeof config.http);
    const char *env_roots = getenv("ZDIST_CHECKPOINT_ROOTS");
    if (config.num_ckpt_roots == 0 && env_roots && *env_roots) {
        char *copy = strdup(env_roots), *save = NULL;
        for (char *r = copy ? strtok_r(copy, ":", &save) : NULL; r; r = strtok_r(NULL, ":", &save))
            if (s_add_root(r, "ZDIST_CHECKPOINT_ROOTS", &config) != 0) {
                free(copy);
                return 2;
            }
        free(copy);
    }

    /* Reply buffers are allocated here and freed by libzmq's I/O thread once
       sent. Served from mmap, each would cost fresh page faults and a
       cross-thread munmap (TLB shootdown); from the heap they are reused. */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    zsys_init();
    zsys_set_logident("zdist-psd");
    zsys_set_logstream(stderr);

    zdist_cluster_t *cluster = NULL;
    if (zdist_daemon_find_task("zdist-psd", opts.cluster_file, opts.task, opts.bind, "ps", &config.ps_task,
                               config.endpoint, sizeof config.endpoint, &cluster) != 0)
        return 2;
    rc = zdist_daemon_keys("zdist-psd", opts.keys_dir, "ps", config.ps_task, cluster);
    zdist_daemon_set_preempt(cluster, "ps", config.ps_task);
    zdist_cluster_destroy(&cluster);
    if (rc != 0)
        return rc;
    if (config.num_ckpt_roots == 0)
        zsys_warning("no --checkpoint-root: a peer allowed to SAVE or RESTORE may name any directory this psd's user "
                     "can write or read; give --checkpoint-root DIR (the coordinator's --state-dir, or a parent)");
    char what[64];
    snprintf(what, sizeof what, "ps task %d", config.ps_task);
    return zdist_daemon_run(psd_server_actor, &config, what);
}
