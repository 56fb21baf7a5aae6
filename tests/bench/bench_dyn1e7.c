/* bench_dyn1e7: issue 29's 10^7 distinct ids through 2 real zdist-psds: admitted, trained, checkpointed full and incremental, restored.

   usage: bench_dyn1e7 --psd PATH/zdist-psd --dir DIR [--ids N] [--dim D] [--touch PERCENT]

   Two zdist-psd children on free loopback ports hold one dynamic table
   ("b/emb", D float32 a row, adagrad, min_count 1) spread by
   zdist_partition_id_ps. N distinct ids from all of int64 are admitted and
   trained by sparse pushes of 4,096 ids (8 in flight a psd); each psd then
   saves a full checkpoint into DIR/ckpt-1 (SAVE of the job, as the
   coordinator sends it); PERCENT % of the ids (default 1) are trained
   again and a delta is saved into DIR/ckpt-2; both psds are stopped, two
   fresh ones started, the table created and ckpt-2 (the full and its
   delta) restored. Reported: the time of each phase, the bytes each save
   wrote, each psd's resident memory (VmRSS) after training and after the
   restore, and the table's bytes per row against payload + slots. Not a
   ctest: a run of minutes and gigabytes (tests/bench/bench_dyn1e7.sh). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_raw.h"
#include "zdist/partition.h"
#include "zdist/ps_client.h"
#include "zdist/sys.h"

#define S_IDS 4096
#define S_WINDOW 8
#define S_NPS 2

typedef struct {
    pid_t pid[S_NPS];
    zdist_ps_client_t *c[S_NPS];
} s_cluster_t;

static void
s_check(int rc, const char *what, const zdist_error_t *err)
{
    if (rc < 0) {
        fprintf(stderr, "bench_dyn1e7: %s: %s\n", what, err->text);
        exit(1);
    }
}

static double
s_now(void)
{
    return (double) zdist_clock_now_us() / 1e6;
}

/* VmRSS of pid in MiB, -1 when unknown. */
static double
s_rss_mib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
    FILE *f = fopen(path, "r");
    double kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lf kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib < 0 ? -1 : kib / 1024;
}

/* Two psds (ps tasks 0 and 1 of a cluster file in root: each saves as its task), a client each, the
   table created on both. */
static void
s_start(s_cluster_t *k, const char *psd, const char *root, int dim)
{
    zdist_error_t err = {0};
    int port[S_NPS];
    char cluster[4200];
    snprintf(cluster, sizeof cluster, "%s/cluster.json", root);
    FILE *f = fopen(cluster, "w");
    if (!f) {
        perror(cluster);
        exit(1);
    }
    fprintf(f, "{\"cluster\": {\"ps\": [");
    for (int p = 0; p < S_NPS; p++)
        fprintf(f, "%s\"127.0.0.1:%d\"", p ? ", " : "", port[p] = bench_free_port());
    fprintf(f, "], \"worker\": []}}\n");
    fclose(f);
    for (int p = 0; p < S_NPS; p++) {
        char bind[64], task[32];
        snprintf(bind, sizeof bind, "tcp://127.0.0.1:%d", port[p]);
        snprintf(task, sizeof task, "ps:%d", p);
        if ((k->pid[p] = fork()) == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            freopen("/dev/null", "w", stderr);
            execl(psd, psd, "--cluster", cluster, "--task", task, (char *) NULL);
            _exit(127);
        }
        zdist_ps_client_options_t opts;
        zdist_ps_client_options_default(&opts);
        opts.timeout_ms = 600000;
        k->c[p] = zdist_ps_client_new(bind, &opts, &err);
        s_check(k->c[p] ? 0 : -EINVAL, "client", &err);
        zdist_optim_config_t ada;
        zdist_optim_config_default(&ada, ZDIST_OPTIM_ADAGRAD);
        s_check(zdist_ps_client_set_optimizer_job(k->c[p], &ada, "b", &err), "set_optimizer", &err);
        zdist_ps_var_spec_t dyn = {.name = "b/emb", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {0, dim}},
                                   .shard_index = p, .seed = 1,
                                   .init = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -0.05, .maxval = 0.05},
                                   .dynamic = {.enabled = true, .min_count = 1, .num_ps = S_NPS}};
        s_check(zdist_ps_client_create(k->c[p], &dyn, NULL, &err), "create", &err);
    }
}

static void
s_stop(s_cluster_t *k)
{
    for (int p = 0; p < S_NPS; p++) {
        zdist_ps_client_destroy(&k->c[p]);
        kill(k->pid[p], SIGTERM);
        waitpid(k->pid[p], NULL, 0);
    }
}

/* Sparse pushes of ids number [0, n) times `stride` (every stride-th id):
   each psd gets its own ids, S_WINDOW calls in flight over both. */
static void
s_push(s_cluster_t *k, uint64_t n, uint64_t stride, int dim, float *grads)
{
    int64_t *ids = malloc((size_t) S_NPS * S_WINDOW * S_IDS * sizeof *ids);
    size_t fill[S_NPS][S_WINDOW] = {{0}};
    int nops[S_NPS] = {0};
    for (uint64_t i = 0; i <= n; i++) {
        int full = -1;
        if (i < n) {
            int64_t id = (int64_t) bench_mix64(i * stride);
            int p = zdist_partition_id_ps(id, S_NPS);
            ids[((size_t) p * S_WINDOW + (size_t) nops[p]) * S_IDS + fill[p][nops[p]]++] = id;
            if (fill[p][nops[p]] == S_IDS && ++nops[p] == S_WINDOW)
                full = p;
        }
        for (int p = 0; p < S_NPS; p++) {
            if (p != full && !(i == n && (nops[p] || fill[p][nops[p]])))
                continue;
            int m = nops[p] + (nops[p] < S_WINDOW && fill[p][nops[p]] ? 1 : 0);
            zdist_ps_op_t ops[S_WINDOW];
            for (int o = 0; o < m; o++) {
                size_t cnt = fill[p][o];
                ops[o] = (zdist_ps_op_t){.client = k->c[p], .request = {.method = ZDIST_PS_PUSH}};
                ops[o].request.write = (zdist_ps_write_t){
                    .name = "b/emb", .shard_index = p, .by_ids = true,
                    .ids = ids + ((size_t) p * S_WINDOW + (size_t) o) * S_IDS, .nids = cnt,
                    .values = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {(int64_t) cnt, dim}}, .data = grads,
                               .nbytes = cnt * (size_t) dim * sizeof(float)}};
                fill[p][o] = 0;
            }
            zdist_ps_client_run(ops, (size_t) m);
            for (int o = 0; o < m; o++) {
                zdist_error_t err = {0};
                int rc = ops[o].rc == 0 ? zdist_ps_reply_write(ops[o].reply, NULL, NULL, &err) : ops[o].rc;
                if (rc < 0)
                    s_check(rc, "push", &err);
            }
            zdist_ps_ops_release(ops, (size_t) m);
            nops[p] = 0;
        }
    }
    free(ids);
}

/* Both psds save into dir at step; bytes written in all; seconds. */
static double
s_save(s_cluster_t *k, const char *dir, int64_t step, uint64_t *ret_bytes)
{
    zdist_error_t err = {0};
    double t0 = s_now();
    *ret_bytes = 0;
    for (int p = 0; p < S_NPS; p++) {
        uint64_t b = 0;
        zdist_ps_save_t save = {dir, step, p, "b", 10};
        s_check(zdist_ps_client_save_with(k->c[p], &save, &b, &err), "save", &err);
        *ret_bytes += b;
    }
    return s_now() - t0;
}

static void
s_table(s_cluster_t *k, const char *when, int dim)
{
    zdist_error_t err = {0};
    uint64_t rows = 0, bytes = 0;
    for (int p = 0; p < S_NPS; p++) {
        zdist_ps_stats_t *st = NULL;
        s_check(zdist_ps_client_stats(k->c[p], &st, &err), "stats", &err);
        for (size_t i = 0; i < st->nembeddings; i++) {
            rows += st->embeddings[i].rows;
            bytes += st->embeddings[i].bytes;
        }
        printf("  %s: ps %d holds %.0f MiB resident (VmRSS)\n", when, p, s_rss_mib(k->pid[p]));
        zdist_ps_stats_destroy(&st);
    }
    printf("  %s: %" PRIu64 " rows, %" PRIu64 " table bytes: %.1f a row (payload + adagrad slot %d, overhead %.1f)\n",
           when, rows, bytes, rows ? (double) bytes / (double) rows : 0, dim * 8,
           rows ? (double) bytes / (double) rows - dim * 8 : 0);
}

int
main(int argc, char **argv)
{
    const char *psd = NULL, *root = NULL;
    uint64_t n = 10000000;
    int dim = 16;
    double touch = 1.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--psd") == 0 && i + 1 < argc)
            psd = argv[++i];
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            root = argv[++i];
        else if (strcmp(argv[i], "--ids") == 0 && i + 1 < argc)
            n = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--dim") == 0 && i + 1 < argc)
            dim = atoi(argv[++i]);
        else if (strcmp(argv[i], "--touch") == 0 && i + 1 < argc)
            touch = atof(argv[++i]);
    }
    if (!psd || !root || n < 1 || dim < 1 || dim > 4096 || !(touch > 0 && touch <= 100)) {
        fprintf(stderr, "usage: bench_dyn1e7 --psd PATH/zdist-psd --dir DIR [--ids N] [--dim D] [--touch PERCENT]\n");
        return 2;
    }
    float *grads = malloc((size_t) S_IDS * (size_t) dim * sizeof *grads);
    for (size_t i = 0; i < (size_t) S_IDS * (size_t) dim; i++)
        grads[i] = 0.001f * (float) (i % 7) - 0.003f;
    char full[4096], delta[4096];
    snprintf(full, sizeof full, "%s/ckpt-1", root);
    snprintf(delta, sizeof delta, "%s/ckpt-2", root);
    mkdir(root, 0755);
    printf("bench_dyn1e7: %" PRIu64 " distinct ids over %d psds, %d float32 a row, adagrad, %g%% trained again "
           "before the incremental save\n", n, S_NPS, dim, touch);
    s_cluster_t k = {0};
    s_start(&k, psd, root, dim);
    double t0 = s_now();
    s_push(&k, n, 1, dim, grads);
    double t_admit = s_now() - t0;
    printf("admitted and trained (one push each): %.1f s, %.0f ids/s\n", t_admit, (double) n / t_admit);
    s_table(&k, "after training", dim);
    uint64_t b_full = 0, b_delta = 0;
    double t_full = s_save(&k, full, 1, &b_full);
    printf("full checkpoint: %.1f s, %.1f MiB (%.1f bytes a row)\n", t_full, (double) b_full / 1048576.0,
           (double) b_full / (double) n);
    uint64_t stride = (uint64_t) (100.0 / touch + 0.5);
    t0 = s_now();
    s_push(&k, n / stride, stride, dim, grads); /* every stride-th id again */
    double t_touch = s_now() - t0;
    double t_delta = s_save(&k, delta, 2, &b_delta);
    printf("trained %" PRIu64 " rows again (%.2f s); incremental checkpoint: %.2f s, %.2f MiB (%.1f bytes a changed "
           "row)\n", n / stride, t_touch, t_delta, (double) b_delta / 1048576.0,
           (double) b_delta / (double) (n / stride));
    s_stop(&k);
    s_start(&k, psd, root, dim);
    zdist_error_t err = {0};
    t0 = s_now();
    for (int p = 0; p < S_NPS; p++) {
        int64_t step = 0;
        s_check(zdist_ps_client_restore_job(k.c[p], delta, "b", &step, &err), "restore", &err);
    }
    double t_restore = s_now() - t0;
    printf("restored the full and its delta onto 2 fresh psds: %.1f s\n", t_restore);
    s_table(&k, "after the restore", dim);
    s_stop(&k);
    free(grads);
    return 0;
}
