/* bench_dynserve: a dynamic embedding table served by a real zdist-psd against a fixed table of the same rows, in the same run.

   A zdist-psd runs as a child process on a free loopback port. Two tables
   of ROWS rows x 64 float32 with adagrad: "fixed" ([ROWS, 64], one shard,
   ids 0..ROWS-1) and "dynamic" (its part on this one ps task, ROWS ids
   spread over all of int64, admitted at first sight by sparse pushes
   first). Then, 8 calls in flight through the ps client, each of 1,024
   random ids of the table:
     pull_rows      the rows by id
     push+adagrad   1,024 gradient rows by id, applied by adagrad
   and the dynamic table's bytes per row against its payload and slots
   (64 x 4 x 2 = 512 bytes). Ratios are dynamic / fixed rows per second;
   issue 29's goal is >= 0.8 (reported, never asserted). --quick: 2^16
   rows, fewer calls (what ctest runs, so it keeps working). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_raw.h"
#include "zdist/ps_client.h"
#include "zdist/sys.h"

#define S_DIM 64
#define S_IDS 1024
#define S_WINDOW 8

/* The dynamic table's id number i: anywhere in int64. */
static int64_t
s_dyn_id(uint64_t i)
{
    return (int64_t) bench_mix64(i * 2 + 1);
}

/* One round of `calls` ops (S_WINDOW at a time) of S_IDS ids each; seconds. */
static double
s_round(zdist_ps_client_t *c, const char *name, bool dynamic, bool push, uint64_t rows, int calls, uint64_t *seed,
        int64_t *ids, float *grads)
{
    zdist_ps_op_t ops[S_WINDOW];
    int64_t t0 = zdist_clock_now_us();
    for (int done = 0; done < calls; done += S_WINDOW) {
        for (int k = 0; k < S_WINDOW; k++) {
            int64_t *mine = ids + (size_t) k * S_IDS;
            for (int i = 0; i < S_IDS; i++) {
                uint64_t r = bench_mix64((*seed)++) % rows;
                mine[i] = dynamic ? s_dyn_id(r) : (int64_t) r;
            }
            ops[k] = (zdist_ps_op_t){.client = c, .request = {.method = push ? ZDIST_PS_PUSH : ZDIST_PS_PULL_ROWS}};
            if (push)
                ops[k].request.write = (zdist_ps_write_t){
                    .name = name, .by_ids = true, .ids = mine, .nids = S_IDS,
                    .values = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {S_IDS, S_DIM}}, .data = grads,
                               .nbytes = (size_t) S_IDS * S_DIM * sizeof(float)}};
            else
                ops[k].request.pull_rows = (zdist_ps_pull_rows_t){.name = name, .ids = mine, .nids = S_IDS};
        }
        zdist_ps_client_run(ops, S_WINDOW);
        for (int k = 0; k < S_WINDOW; k++)
            if (ops[k].rc < 0 || zdist_msg_status(ops[k].reply) != ZDIST_STATUS_OK) {
                fprintf(stderr, "bench_dynserve: %s of '%s' failed: %s\n", push ? "push" : "pull_rows", name,
                        ops[k].reply ? zdist_msg_status_message(ops[k].reply) : strerror(-ops[k].rc));
                exit(1);
            }
        zdist_ps_ops_release(ops, S_WINDOW);
    }
    return (double) (zdist_clock_now_us() - t0) / 1e6;
}

static void
s_check(int rc, const char *what, const zdist_error_t *err)
{
    if (rc < 0) {
        fprintf(stderr, "bench_dynserve: %s: %s\n", what, err->text);
        exit(1);
    }
}

/* Creates both tables and admits the dynamic one's rows (zero gradients, first sight). */
static void
s_setup(zdist_ps_client_t *c, uint64_t rows, int64_t *ids, float *grads)
{
    zdist_error_t err = {0};
    zdist_optim_config_t ada;
    zdist_optim_config_default(&ada, ZDIST_OPTIM_ADAGRAD);
    s_check(zdist_ps_client_set_optimizer(c, &ada, &err), "set_optimizer", &err);
    zdist_initializer_t init = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -0.05, .maxval = 0.05};
    zdist_ps_var_spec_t fixed = {.name = "b/fixed", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {(int64_t) rows, S_DIM}},
                                 .row_count = (int64_t) rows, .init = init, .seed = 1};
    s_check(zdist_ps_client_create(c, &fixed, NULL, &err), "create fixed", &err);
    zdist_ps_var_spec_t dyn = {.name = "b/dynamic", .dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {0, S_DIM}},
                               .init = init, .seed = 1, .dynamic = {.enabled = true, .min_count = 1, .num_ps = 1}};
    s_check(zdist_ps_client_create(c, &dyn, NULL, &err), "create dynamic", &err);
    memset(grads, 0, (size_t) S_IDS * S_DIM * sizeof *grads);
    zdist_ps_op_t ops[S_WINDOW];
    for (uint64_t at = 0; at < rows;) {
        size_t nops = 0;
        for (; nops < S_WINDOW && at < rows; nops++) {
            int64_t *mine = ids + nops * S_IDS;
            size_t n = 0;
            for (; n < S_IDS && at < rows; n++)
                mine[n] = s_dyn_id(at++);
            ops[nops] = (zdist_ps_op_t){.client = c, .request = {.method = ZDIST_PS_PUSH}};
            ops[nops].request.write = (zdist_ps_write_t){
                .name = "b/dynamic", .by_ids = true, .ids = mine, .nids = n,
                .values = {.dtype = ZDIST_DTYPE_FLOAT32, .shape = {2, {(int64_t) n, S_DIM}}, .data = grads,
                           .nbytes = n * S_DIM * sizeof(float)}};
        }
        zdist_ps_client_run(ops, nops);
        zdist_ps_ops_release(ops, nops);
    }
}

int
main(int argc, char **argv)
{
    const char *psd = NULL;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--psd") == 0 && i + 1 < argc)
            psd = argv[++i];
    }
    if (!psd) {
        fprintf(stderr, "usage: bench_dynserve --psd PATH/zdist-psd [--quick]\n");
        return 2;
    }
    uint64_t rows = quick ? UINT64_C(1) << 16 : UINT64_C(1) << 20;
    int calls = quick ? 64 : 512, repeats = quick ? 1 : 9;
    char bind[64], ep[64];
    int port = bench_free_port();
    snprintf(bind, sizeof bind, "tcp://127.0.0.1:%d", port);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        freopen("/dev/null", "w", stderr);
        execl(psd, psd, "--bind", bind, (char *) NULL);
        _exit(127);
    }
    zdist_ps_client_options_t opts;
    zdist_ps_client_options_default(&opts);
    opts.timeout_ms = 60000;
    zdist_error_t err = {0};
    zdist_ps_client_t *c = zdist_ps_client_new(ep, &opts, &err);
    s_check(c ? 0 : -EINVAL, "client", &err);
    int64_t *ids = calloc((size_t) S_WINDOW * S_IDS, sizeof *ids);
    float *grads = calloc((size_t) S_IDS * S_DIM, sizeof *grads);
    s_setup(c, rows, ids, grads);
    for (int i = 0; i < S_IDS * S_DIM; i++)
        grads[i] = 0.001f * (float) (i % 7);

    const char *names[2] = {"pull_rows", "push+adagrad"};
    printf("bench_dynserve: %" PRIu64 " rows x %d float32, %d ids a call, %d in flight, median of %d rounds of %d "
           "calls after a warm-up round, fixed and dynamic alternating\n", rows, S_DIM, S_IDS, S_WINDOW, repeats, calls);
    printf("%-14s %16s %16s %8s\n", "case", "fixed rows/s", "dynamic rows/s", "ratio");
    uint64_t seed = 1;
    for (int p = 0; p < 2; p++) {
        double t[2][9];
        for (int r = -1; r < repeats; r++) /* round -1 warms up, uncounted */
            for (int d = 0; d < 2; d++) {
                double s = s_round(c, d ? "b/dynamic" : "b/fixed", d, p, rows, calls, &seed, ids, grads);
                if (r >= 0)
                    t[d][r] = s;
            }
        double moved = (double) calls * S_IDS, med[2] = {bench_median(t[0], repeats), bench_median(t[1], repeats)};
        printf("%-14s %16.0f %16.0f %8.2f\n", names[p], moved / med[0], moved / med[1], med[0] / med[1]);
    }
    zdist_ps_stats_t *st = NULL;
    s_check(zdist_ps_client_stats(c, &st, &err), "stats", &err);
    for (size_t i = 0; i < st->nembeddings; i++) {
        const zdist_ps_embedding_info_t *e = &st->embeddings[i];
        double per = e->rows ? (double) e->bytes / (double) e->rows : 0;
        printf("dynamic table: %" PRIu64 " rows, %" PRIu64 " bytes: %.1f bytes a row, payload + slots %d, overhead "
               "%.1f (goal <= 48)\n", e->rows, e->bytes, per, S_DIM * 4 * 2, per - S_DIM * 4 * 2);
    }
    zdist_ps_stats_destroy(&st);
    zdist_ps_client_destroy(&c);
    free(ids);
    free(grads);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return 0;
}
