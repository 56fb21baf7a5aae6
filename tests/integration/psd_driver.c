/* psd_driver: drives real zdist-psd processes through the libzdist ps client for test_psd.sh.

   usage: psd_driver CASE ARGS...   (exit 0 when every check passed, 1 otherwise)
     basic ADDR0 [ADDR1]          create (sharded by placement), pull, push with
                                  sgd and adam, pull_rows, assign*, scatter*
     concurrency ADDR             8 clients x 10,000 assign_add(1) = 80,000 while
                                  a reader checks rows are never half-written
     exactly-once ADDR PSD_PID    same sequence twice -> applied once; and a real
                                  retransmission while the psd is SIGSTOPped
     push-pull ADDR PSD_PID       fused push-and-pull: dense, sparse and pull-only
                                  items in one message, post-update values back,
                                  the same sequence again (and a retransmission
                                  while the psd is SIGSTOPped) applied once, a bad
                                  item refuses the whole message
     ckpt-save DIR ADDR0 ADDR1    a variable in 3 shards over 2 psds, saved
     ckpt-check DIR ADDR          the same variable in 1 shard, restored, checked
     big-save DIR ADDR STEP VALUE MIB   create 'big', assign VALUE, save STEP
     big-check DIR ADDR MIB       restore 'big': every value equals the step's value
     bad-input ADDR               garbage, unknown variable, wrong dtype/length, ids
                                  out of range...: status + message, nothing changed
     oversized ADDR               (psd started with small limits) refusals by size
     held ADDR                    (psd started with --max-variables 3 --max-bytes
                                  65536) creates past either limit refused
                                  RESOURCE_EXHAUSTED naming the flag, nothing made
     ckpt-confine ADDR ROOT OUT   (psd started with --checkpoint-root ROOT) SAVE and
                                  RESTORE under ROOT work; OUT, ROOT/../x and a
                                  symbolic link ROOT/link -> OUT are refused
                                  PERMISSION_DENIED naming the flag, OUT untouched
     memory ADDR MIB              create a float32 variable of MIB MiB, print stats
     drop ADDR                    (psd started with --max-bytes 300000) drop_job of
                                  one job while a pull of its shard is in flight:
                                  the pull gets whole values, the job's shards go,
                                  another job's stay intact, the bytes count back
                                  (a create refused before fits after); again is 0
                                  shards; an empty or bad job is refused naming it
     auth ADDR allowed|denied     'sec' (8x16) created, pushed, assigned: allowed,
                                  or every write refused PERMISSION_DENIED with the
                                  values unchanged (stats and reads still answered);
                                  drop_job refused PERMISSION_DENIED for both (the
                                  chief's key alone may)
     pattern ADDR                 assigns 'pat' the bytes of a known ASCII pattern
                                  (PSD_DRIVER_PATTERN) and reads them back
     conn-limit ADDR LIMIT        (psd started with --max-connections-per-peer
                                  LIMIT) LIMIT connections answer PING; 2 more are
                                  refused (with a key: RESOURCE_EXHAUSTED naming
                                  the flag) while the first LIMIT still answer, and
                                  another peer (127.0.0.2, or with keys the key
                                  PSD_DRIVER_OTHER_KEY) is served; once the extra
                                  ones and one of the first close, a new one is
                                  served again
     dyn-ftrl ADDR0 ADDR1         three jobs' ftrl (Keras's defaults; every field
                                  set; learning_rate_power 0 and accumulator 0) on
                                  a dynamic table over both psds and a fixed one:
                                  3 sparse pushes (one id twice) checked row by row
                                  against TF's ApplyFtrlV2 computed here in double
     dyn-default ADDR0 ADDR1      a dynamic table, min_count 3, default -0.5: ids
                                  unseen or counted once or twice read -0.5, then
                                  their rows; one without a default reads zeros
   With PSD_DRIVER_KEY=NAME (and ZDIST_KEYS_DIR), every connection is CURVE with
   the certificate NAME, trusting the psd at ADDR as PSD_DRIVER_SERVER (ps-0). */
#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <dirent.h>
#include <unistd.h>

#include "zdist/auth.h"
#include "zdist/endpoint.h"
#include "zdist/parse.h"
#include "zdist/partition.h"
#include "zdist/ps_client.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

static atomic_int s_failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            atomic_fetch_add(&s_failures, 1);                                  \
        }                                                                      \
    } while (0)

/* A call that must succeed. */
#define OK(call)                                                               \
    do {                                                                       \
        int rc_ = (call);                                                      \
        CHECK(rc_ == 0, "rc %d: %s", rc_, s_err.text);                         \
    } while (0)

/* Error of the last OK()/EXPECT() call (one thread uses these macros). */
static __thread zdist_error_t s_err;

/* A call that must fail with errno `want` and a message containing `substr`. */
#define EXPECT(want, substr, call)                                                                  \
    do {                                                                                            \
        memset(&s_err, 0, sizeof s_err);                                                            \
        int rc_ = (call);                                                                           \
        CHECK(rc_ == (want), "rc %d (%s), wanted %d: %s", rc_, strerror(-rc_), (want), s_err.text); \
        CHECK(strstr(s_err.text, (substr)) != NULL, "message '%s' lacks '%s'", s_err.text, (substr)); \
    } while (0)

static void
s_ok(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("ok: ");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

static zdist_ps_client_t *
s_client(const char *addr, int64_t timeout_ms, int retries)
{
    char ep[300];
    zdist_error_t err = {0};
    if (zdist_endpoint_normalize(addr, ep, sizeof ep, &err) < 0) {
        fprintf(stderr, "psd_driver: %s\n", err.text);
        exit(2);
    }
    zdist_ps_client_options_t opts;
    zdist_ps_client_options_default(&opts);
    opts.timeout_ms = timeout_ms;
    opts.retries = retries;
    zdist_ps_client_t *c = zdist_ps_client_new(ep, &opts, &err);
    if (!c) {
        fprintf(stderr, "psd_driver: %s\n", err.text);
        exit(2);
    }
    return c;
}

static zdist_tensor_t
s_f32(float *data, int64_t rows, int64_t cols)
{
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = data, .nbytes = (size_t) (rows * cols) * sizeof(float)};
    t.shape.rank = 2;
    t.shape.dims[0] = rows;
    t.shape.dims[1] = cols;
    return t;
}

static zdist_ps_var_spec_t
s_spec(const char *name, int64_t rows, int64_t cols, int32_t shard, int64_t offset, int64_t count, const char *init,
       double value)
{
    zdist_ps_var_spec_t s = {0};
    s.name = name;
    s.dtype = ZDIST_DTYPE_FLOAT32;
    s.shape.rank = 2;
    s.shape.dims[0] = rows;
    s.shape.dims[1] = cols;
    s.shard_index = shard;
    s.row_offset = offset;
    s.row_count = count;
    if (zdist_init_kind_from_name(init, &s.init.kind) < 0)
        s.init.kind = (zdist_init_kind_t)99; /* a kind the psd does not know */
    s.init.value = value;
    s.seed = 7;
    return s;
}

/* Pulls rows [start, start+n) of a shard into out (n x cols floats);
   start -1: the whole shard, which must have n rows. */
static int
s_pull(zdist_ps_client_t *c, const char *name, int32_t shard, int64_t start, int64_t n, int64_t cols, float *out)
{
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = out, .nbytes = (size_t) (n * cols) * sizeof(float)};
    int rc = zdist_ps_client_pull(c, name, shard, start < 0 ? 0 : start, start < 0 ? 0 : n, &t, &s_err);
    if (rc == 0 && t.nbytes != (size_t) (n * cols) * sizeof(float))
        rc = zdist_error_set(&s_err, -EPROTO, "pulled %zu bytes", t.nbytes);
    return rc;
}

static bool
s_close(double a, double b, double tol)
{
    return fabs(a - b) <= tol;
}

/* ---- basic ---- */

static int
s_basic(int nps, char **addrs)
{
    zdist_ps_client_t *ps[2] = {NULL, NULL};
    for (int i = 0; i < nps; i++)
        ps[i] = s_client(addrs[i], 10000, 3);
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 0.1};
    for (int i = 0; i < nps; i++)
        OK(zdist_ps_client_set_optimizer(ps[i], &sgd, &s_err));

    /* w [10, 4] over 3 shards (FixedShardsPartitioner(3)), round robin over the psds. */
    enum { R = 10, C = 4 };
    zdist_placement_t *pl = zdist_placement_new(nps);
    zdist_partitioner_t part;
    OK(zdist_partitioner_parse("fixed:3", &part, &s_err));
    zdist_shape_t shape = {.rank = 2, .dims = {R, C}};
    zdist_layout_t *lay = NULL;
    OK(zdist_placement_place_variable(pl, "w", &shape, ZDIST_DTYPE_FLOAT32, &part, &lay, &s_err));
    if (!lay)
        return 1;
    CHECK(lay->num_shards == 3, "%d shards", lay->num_shards);
    for (int i = 0; i < lay->num_shards; i++) {
        zdist_ps_var_spec_t spec = s_spec("w", R, C, i, lay->shards[i].offset, lay->shards[i].rows, "ones", 0);
        bool created = false;
        OK(zdist_ps_client_create(ps[lay->shards[i].ps], &spec, &created, &s_err));
        CHECK(created, "shard %d not created", i);
        /* The same spec again is fine; another spec is ALREADY_EXISTS. */
        OK(zdist_ps_client_create(ps[lay->shards[i].ps], &spec, &created, &s_err));
        CHECK(!created, "shard %d created twice", i);
        spec.init.kind = ZDIST_INIT_ZEROS;
        EXPECT(-EEXIST, "ALREADY_EXISTS", zdist_ps_client_create(ps[lay->shards[i].ps], &spec, NULL, &s_err));
    }
    s_ok("created w [10,4] in 3 shards over %d psd(s); same spec again ok, other spec ALREADY_EXISTS", nps);

    /* Pull every shard: ones. */
    float w[R * C];
    for (int i = 0; i < lay->num_shards; i++)
        OK(s_pull(ps[lay->shards[i].ps], "w", i, lay->shards[i].offset, lay->shards[i].rows, C,
                  &w[lay->shards[i].offset * C]));
    for (int k = 0; k < R * C; k++)
        CHECK(w[k] == 1.0f, "w[%d] = %g", k, w[k]);
    s_ok("pull: initial values");

    /* Dense push with sgd lr 0.1: w -= 0.1 * g, g = 0.01 * k. */
    float g[R * C];
    for (int k = 0; k < R * C; k++)
        g[k] = 0.01f * (float) k;
    for (int i = 0; i < lay->num_shards; i++) {
        zdist_tensor_t t = s_f32(&g[lay->shards[i].offset * C], lay->shards[i].rows, C);
        zdist_ps_write_result_t res = {0};
        OK(zdist_ps_client_push(ps[lay->shards[i].ps], "w", i, 0, 0, &t, &res, &s_err));
        CHECK(!res.duplicate && res.step == 1, "push: duplicate %d step %" PRId64, res.duplicate, res.step);
    }
    for (int i = 0; i < lay->num_shards; i++)
        OK(s_pull(ps[lay->shards[i].ps], "w", i, lay->shards[i].offset, lay->shards[i].rows, C,
                  &w[lay->shards[i].offset * C]));
    for (int k = 0; k < R * C; k++)
        CHECK(s_close(w[k], 1.0 - 0.1 * 0.01 * k, 1e-6), "w[%d] = %.9g, wanted %.9g", k, w[k], 1.0 - 0.001 * k);
    /* By hand: w[0] = 1, w[39] = 1 - 0.1 * 0.39 = 0.961. */
    CHECK(s_close(w[39], 0.961, 1e-6), "w[39] = %.9g", w[39]);
    s_ok("push dense with sgd(0.1): w[39] = %.6f (hand: 0.961000)", w[39]);

    /* pull_rows with duplicate ids, across the shards this psd holds. */
    int64_t ids[8];
    size_t nids = 0;
    for (int64_t r = R - 1; r >= 0; r--) {
        int shard;
        int64_t row;
        OK(zdist_layout_lookup(lay, r, &shard, &row, &s_err));
        if (lay->shards[shard].ps == 0 && nids < 6) {
            ids[nids++] = r;
            if (nids == 2)
                ids[nids++] = r; /* a duplicate */
        }
    }
    float rows[8 * C];
    zdist_tensor_t rt = {.dtype = ZDIST_DTYPE_FLOAT32, .data = rows, .nbytes = sizeof rows};
    OK(zdist_ps_client_pull_rows(ps[0], "w", ids, nids, &rt, &s_err));
    CHECK(rt.shape.rank == 2 && rt.shape.dims[0] == (int64_t) nids && rt.shape.dims[1] == C, "shape");
    for (size_t i = 0; i < nids; i++)
        for (int c = 0; c < C; c++)
            CHECK(rows[i * C + c] == w[ids[i] * C + c], "pull_rows id %" PRId64 " col %d: %g vs %g", ids[i], c,
                  rows[i * C + c], w[ids[i] * C + c]);
    s_ok("pull_rows: %zu ids with a duplicate (first %" PRId64 ")", nids, ids[0]);

    /* assign_add +2 on global rows 5..6 of the shard holding row 5. */
    int sh;
    int64_t within;
    OK(zdist_layout_lookup(lay, 5, &sh, &within, &s_err));
    float two[2 * C];
    for (int k = 0; k < 2 * C; k++)
        two[k] = 2.0f;
    zdist_tensor_t tt = s_f32(two, 2, C);
    OK(zdist_ps_client_assign_add(ps[lay->shards[sh].ps], "w", sh, 5, 2, &tt, NULL, &s_err));
    float got[2 * C];
    OK(s_pull(ps[lay->shards[sh].ps], "w", sh, 5, 2, C, got));
    for (int k = 0; k < 2 * C; k++)
        CHECK(s_close(got[k], w[5 * C + k] + 2.0, 1e-6), "assign_add row %d: %g", 5 + k / C, got[k]);
    OK(zdist_ps_client_assign_sub(ps[lay->shards[sh].ps], "w", sh, 5, 2, &tt, NULL, &s_err));
    OK(s_pull(ps[lay->shards[sh].ps], "w", sh, 5, 2, C, got));
    for (int k = 0; k < 2 * C; k++)
        CHECK(s_close(got[k], w[5 * C + k], 1e-6), "assign_sub row %d: %g", 5 + k / C, got[k]);
    s_ok("assign_add / assign_sub on rows 5..6");

    /* scatter_add with a duplicate id into shard 0: row 1 += 2, row 2 += 1. */
    int64_t sids[3] = {1, 1, 2};
    float ones[3 * C];
    for (int k = 0; k < 3 * C; k++)
        ones[k] = 1.0f;
    zdist_tensor_t ot = s_f32(ones, 3, C);
    OK(zdist_ps_client_scatter_add(ps[lay->shards[0].ps], "w", 0, sids, 3, &ot, NULL, &s_err));
    float sc[3 * C];
    OK(s_pull(ps[lay->shards[0].ps], "w", 0, 0, 3, C, sc));
    for (int c = 0; c < C; c++) {
        CHECK(s_close(sc[0 * C + c], w[0 * C + c], 1e-6), "row 0 changed");
        CHECK(s_close(sc[1 * C + c], w[1 * C + c] + 2, 1e-6), "row 1: %g", sc[C + c]);
        CHECK(s_close(sc[2 * C + c], w[2 * C + c] + 1, 1e-6), "row 2: %g", sc[2 * C + c]);
    }
    /* scatter_update: row 8 := 42. */
    int64_t uid = 8;
    float v42[C] = {42, 42, 42, 42};
    zdist_tensor_t ut = s_f32(v42, 1, C);
    OK(zdist_layout_lookup(lay, 8, &sh, &within, &s_err));
    OK(zdist_ps_client_scatter_update(ps[lay->shards[sh].ps], "w", sh, &uid, 1, &ut, NULL, &s_err));
    OK(s_pull(ps[lay->shards[sh].ps], "w", sh, 8, 1, C, got));
    for (int c = 0; c < C; c++)
        CHECK(got[c] == 42.0f, "scatter_update: %g", got[c]);
    s_ok("scatter_add with duplicate ids, scatter_update");

    /* Sparse push, sgd lr 0.5, duplicate ids summed: row 0 -= 0.5 * (1 + 1). */
    sgd.learning_rate = 0.5;
    OK(zdist_ps_client_set_optimizer(ps[lay->shards[0].ps], &sgd, &s_err));
    int64_t pids[2] = {0, 0};
    zdist_tensor_t pt = s_f32(ones, 2, C);
    OK(zdist_ps_client_push_sparse(ps[lay->shards[0].ps], "w", 0, pids, 2, &pt, NULL, &s_err));
    OK(s_pull(ps[lay->shards[0].ps], "w", 0, 0, 1, C, got));
    for (int c = 0; c < C; c++)
        CHECK(s_close(got[c], w[c] - 1.0, 1e-6), "sparse push row 0: %g, wanted %g", got[c], w[c] - 1.0);
    s_ok("push sparse with duplicate ids summed: row 0 = %.6f", got[0]);

    /* Adam lr 0.1 (Keras defaults otherwise) on a fresh variable a = 0.5. */
    zdist_optim_config_t adam = {.kind = ZDIST_OPTIM_ADAM, .learning_rate = 0.1};
    OK(zdist_ps_client_set_optimizer(ps[0], &adam, &s_err));
    zdist_ps_var_spec_t aspec = s_spec("a", 2, 3, 0, 0, 2, "constant", 0.5);
    OK(zdist_ps_client_create(ps[0], &aspec, NULL, &s_err));
    float ag[2][6] = {{0.5f, -1.0f, 2.0f, 0.0f, 0.25f, -0.125f}, {-0.5f, 1.0f, 3.0f, 1.0f, 0.25f, 4.0f}};
    double m[6] = {0}, v[6] = {0}, wa[6];
    for (int k = 0; k < 6; k++)
        wa[k] = 0.5;
    const double lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-7;
    for (int t = 1; t <= 2; t++) {
        zdist_tensor_t at = s_f32(ag[t - 1], 2, 3);
        zdist_ps_write_result_t res = {0};
        OK(zdist_ps_client_push(ps[0], "a", 0, 0, 0, &at, &res, &s_err));
        CHECK(res.step == t, "adam step %" PRId64 ", wanted %d", res.step, t);
        double lr_t = lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
        for (int k = 0; k < 6; k++) {
            m[k] = b1 * m[k] + (1 - b1) * ag[t - 1][k];
            v[k] = b2 * v[k] + (1 - b2) * ag[t - 1][k] * ag[t - 1][k];
            wa[k] -= lr_t * m[k] / (sqrt(v[k]) + eps);
        }
    }
    float aw[6];
    OK(s_pull(ps[0], "a", 0, -1, 2, 3, aw));
    for (int k = 0; k < 6; k++)
        CHECK(s_close(aw[k], wa[k], 2e-5), "adam a[%d] = %.7f, wanted %.7f", k, aw[k], wa[k]);
    /* By hand for g = 0.5 then -0.5: step 1 m = 0.05, v = 0.00025,
       lr_t = 0.1 * sqrt(0.001) / 0.1 = 0.0316228, w = 0.5 - 0.0316228 * 0.05 /
       0.0158115 = 0.4000006; step 2 m = -0.005, v = 0.00049975,
       lr_t = 0.1 * sqrt(0.001999) / 0.19 = 0.0235317,
       w = 0.4000006 + 0.0235317 * 0.005 / 0.0223551 = 0.4052638. */
    CHECK(s_close(aw[0], 0.4052638, 2e-5), "adam a[0] = %.7f, hand 0.4052638", aw[0]);
    s_ok("push dense with adam(0.1), bias-corrected, 2 steps: a[0] = %.6f (hand: 0.405264)", aw[0]);

    zdist_layout_destroy(&lay);
    zdist_placement_destroy(&pl);
    for (int i = 0; i < nps; i++)
        zdist_ps_client_destroy(&ps[i]);
    return atomic_load(&s_failures) ? 1 : 0;
}

/* ---- concurrency ---- */

enum { CC_WRITERS = 8, CC_CALLS = 10000, CC_ROWS = 4, CC_COLS = 64 };

typedef struct {
    const char *addr;
    atomic_int *writers_left;
    int64_t reads;
    int64_t duplicates;
    uint64_t retransmissions;
} s_cc_t;

static void *
s_cc_writer(void *arg)
{
    s_cc_t *a = arg;
    zdist_ps_client_t *c = s_client(a->addr, 30000, 3);
    float ones[CC_ROWS * CC_COLS];
    for (int k = 0; k < CC_ROWS * CC_COLS; k++)
        ones[k] = 1.0f;
    zdist_tensor_t t = s_f32(ones, CC_ROWS, CC_COLS);
    for (int i = 0; i < CC_CALLS; i++) {
        zdist_ps_write_result_t res = {0};
        int rc = zdist_ps_client_assign_add(c, "counter", 0, 0, 0, &t, &res, &s_err);
        if (rc < 0) {
            CHECK(rc == 0, "assign_add %d: %s", i, s_err.text);
            break;
        }
        if (res.duplicate)
            a->duplicates++;
    }
    a->retransmissions = zdist_ps_client_retransmissions(c);
    zdist_ps_client_destroy(&c);
    atomic_fetch_sub(a->writers_left, 1);
    return NULL;
}

static void *
s_cc_reader(void *arg)
{
    s_cc_t *a = arg;
    zdist_ps_client_t *c = s_client(a->addr, 30000, 3);
    float buf[CC_ROWS * CC_COLS];
    float last = 0;
    while (atomic_load(a->writers_left) > 0) {
        if (s_pull(c, "counter", 0, -1, CC_ROWS, CC_COLS, buf) < 0) {
            CHECK(0, "reader pull: %s", s_err.text);
            break;
        }
        a->reads++;
        for (int r = 0; r < CC_ROWS; r++)
            for (int k = 1; k < CC_COLS; k++)
                if (buf[r * CC_COLS + k] != buf[r * CC_COLS]) {
                    CHECK(0, "row %d half-written: element %d = %g, element 0 = %g", r, k, buf[r * CC_COLS + k],
                          buf[r * CC_COLS]);
                    goto out;
                }
        /* Whole-shard writes are atomic per shard: every row agrees too. */
        for (int r = 1; r < CC_ROWS; r++)
            CHECK(buf[r * CC_COLS] == buf[0], "rows disagree: %g vs %g", buf[r * CC_COLS], buf[0]);
        CHECK(buf[0] >= last, "went backwards: %g after %g", buf[0], last);
        last = buf[0];
    }
out:
    zdist_ps_client_destroy(&c);
    return NULL;
}

static int
s_concurrency(const char *addr)
{
    zdist_ps_client_t *c = s_client(addr, 10000, 3);
    zdist_ps_var_spec_t spec = s_spec("counter", CC_ROWS, CC_COLS, 0, 0, CC_ROWS, "zeros", 0);
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    atomic_int left = CC_WRITERS;
    s_cc_t w[CC_WRITERS], r = {.addr = addr, .writers_left = &left};
    pthread_t tw[CC_WRITERS], tr;
    int64_t t0 = zdist_clock_now_ms();
    pthread_create(&tr, NULL, s_cc_reader, &r);
    for (int i = 0; i < CC_WRITERS; i++) {
        w[i] = (s_cc_t){.addr = addr, .writers_left = &left};
        pthread_create(&tw[i], NULL, s_cc_writer, &w[i]);
    }
    int64_t dups = 0;
    uint64_t retx = 0;
    for (int i = 0; i < CC_WRITERS; i++) {
        pthread_join(tw[i], NULL);
        dups += w[i].duplicates;
        retx += w[i].retransmissions;
    }
    pthread_join(tr, NULL);
    int64_t ms = zdist_clock_now_ms() - t0;
    float buf[CC_ROWS * CC_COLS];
    OK(s_pull(c, "counter", 0, -1, CC_ROWS, CC_COLS, buf));
    for (int k = 0; k < CC_ROWS * CC_COLS; k++)
        if (buf[k] != (float) (CC_WRITERS * CC_CALLS)) {
            CHECK(0, "counter[%d] = %.1f, wanted %d", k, buf[k], CC_WRITERS * CC_CALLS);
            break;
        }
    CHECK(dups == (int64_t) 0 || retx > 0, "%" PRId64 " duplicates without retransmission", dups);
    s_ok("concurrency: %d clients x %d assign_add = %.0f in %" PRId64 " ms; %" PRId64
         " consistent reads, %" PRIu64 " retransmissions",
         CC_WRITERS, CC_CALLS, buf[0], ms, r.reads, retx);
    zdist_ps_client_destroy(&c);
    return atomic_load(&s_failures) ? 1 : 0;
}

/* ---- exactly once ---- */

/* Stops the psd and returns once the kernel shows it stopped: kill()
   returns before every thread of a busy process has halted, and a request
   sent in that window could still be answered. */
static int
s_stop_psd(pid_t pid)
{
    if (kill(pid, SIGSTOP) != 0)
        return -errno;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long) pid);
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "re");
        if (!f)
            return -errno;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *close_paren = strrchr(buf, ')'); /* state follows "(comm)" */
        if (close_paren && (close_paren[2] == 'T' || close_paren[2] == 't'))
            return 0;
        usleep(1000);
    }
    return -ETIMEDOUT;
}

static void *
s_resume_later(void *arg)
{
    pid_t pid = (pid_t) (intptr_t) arg;
    usleep(900 * 1000);
    kill(pid, SIGCONT);
    return NULL;
}

static int
s_exactly_once(const char *addr, pid_t psd_pid)
{
    zdist_ps_client_t *c = s_client(addr, 10000, 3);
    zdist_ps_client_t *other = s_client(addr, 10000, 3);
    zdist_ps_var_spec_t spec = s_spec("once", 1, 2, 0, 0, 1, "zeros", 0);
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    float one[2] = {1, 1}, got[2];
    zdist_tensor_t t = s_f32(one, 1, 2);

    uint64_t seq = zdist_ps_client_next_sequence(c);
    zdist_ps_write_result_t res = {0};
    OK(zdist_ps_client_write_seq(c, ZDIST_PS_ASSIGN_ADD, "once", 0, 0, 0, seq, &t, &res, &s_err));
    CHECK(!res.duplicate, "first write reported duplicate");
    OK(zdist_ps_client_write_seq(c, ZDIST_PS_ASSIGN_ADD, "once", 0, 0, 0, seq, &t, &res, &s_err));
    CHECK(res.duplicate, "second write with the same sequence not reported duplicate");
    OK(s_pull(c, "once", 0, -1, 1, 2, got));
    CHECK(got[0] == 1 && got[1] == 1, "value %g %g, wanted 1 1", got[0], got[1]);
    /* Another client with the same sequence number is another write. */
    OK(zdist_ps_client_write_seq(other, ZDIST_PS_ASSIGN_ADD, "once", 0, 0, 0, seq, &t, &res, &s_err));
    CHECK(!res.duplicate, "another client's write reported duplicate");
    OK(s_pull(c, "once", 0, -1, 1, 2, got));
    CHECK(got[0] == 2, "value %g, wanted 2", got[0]);
    s_ok("exactly-once: same (client, sequence) twice -> applied once, second reply duplicate=true");

    /* A real retransmission: the psd is stopped, the first attempt times out,
       the client sends the same (client id, sequence) again; when the psd
       resumes it sees both and applies one. */
    if (psd_pid > 0) {
        zdist_ps_client_options_t opts;
        zdist_ps_client_options_default(&opts);
        opts.timeout_ms = 300;
        opts.retries = 8;
        char ep[300];
        OK(zdist_endpoint_normalize(addr, ep, sizeof ep, &s_err));
        zdist_ps_client_t *r = zdist_ps_client_new(ep, &opts, &s_err);
        OK(s_pull(r, "once", 0, -1, 1, 2, got)); /* connected */
        CHECK(s_stop_psd(psd_pid) == 0, "SIGSTOP: the psd did not stop");
        pthread_t th;
        pthread_create(&th, NULL, s_resume_later, (void *) (intptr_t) psd_pid);
        memset(&res, 0, sizeof res);
        OK(zdist_ps_client_assign_add(r, "once", 0, 0, 0, &t, &res, &s_err));
        pthread_join(th, NULL);
        uint64_t retx = zdist_ps_client_retransmissions(r);
        CHECK(retx >= 1, "no retransmission happened");
        CHECK(res.duplicate, "the answered attempt was not a duplicate (retransmissions %" PRIu64 ")", retx);
        OK(s_pull(c, "once", 0, -1, 1, 2, got));
        CHECK(got[0] == 3 && got[1] == 3, "value %g %g after the retransmitted write, wanted 3 3", got[0], got[1]);
        s_ok("exactly-once over a stopped psd: %" PRIu64 " retransmissions of sequence %" PRIu64
             ", applied once (value %g)",
             retx, res.sequence, got[0]);

        /* The same, pipelined: three writes and a read in one run while the
           psd is stopped; every write is sent again with its sequence, the
           psd applies each once. */
        CHECK(s_stop_psd(psd_pid) == 0, "SIGSTOP: the psd did not stop");
        pthread_create(&th, NULL, s_resume_later, (void *) (intptr_t) psd_pid);
        zdist_ps_op_t ops[4];
        for (int i = 0; i < 3; i++) {
            ops[i] = (zdist_ps_op_t){.client = r, .request = {.method = ZDIST_PS_ASSIGN_ADD}};
            ops[i].request.write = (zdist_ps_write_t){.name = "once", .values = t};
        }
        ops[3] = (zdist_ps_op_t){.client = r, .request = {.method = ZDIST_PS_PULL, .pull = {"once", 0, 0, 0}}};
        uint64_t retx0 = zdist_ps_client_retransmissions(r);
        zdist_ps_client_run(ops, 4);
        pthread_join(th, NULL);
        for (int i = 0; i < 4; i++) {
            CHECK(ops[i].rc == 0 && zdist_msg_status(ops[i].reply) == ZDIST_STATUS_OK, "op %d: rc %d status %d", i,
                  ops[i].rc, ops[i].reply ? zdist_msg_status(ops[i].reply) : -1);
            CHECK(i == 3 || ops[i].attempts >= 2, "write %d was sent %u times", i, ops[i].attempts);
        }
        zdist_ps_ops_release(ops, 4);
        retx = zdist_ps_client_retransmissions(r) - retx0;
        OK(s_pull(c, "once", 0, -1, 1, 2, got));
        CHECK(got[0] == 6 && got[1] == 6, "value %g %g after 3 pipelined retransmitted writes, wanted 6 6", got[0],
              got[1]);
        s_ok("exactly-once, pipelined over a stopped psd: %" PRIu64 " retransmissions of 3 writes, each applied once",
             retx);
        zdist_ps_client_destroy(&r);
    }
    zdist_ps_client_destroy(&other);
    zdist_ps_client_destroy(&c);
    return atomic_load(&s_failures) ? 1 : 0;
}

/* ---- exactly-once across a psd restart ----
   before: client C writes sequences 1..5 (+1 each), the psd saves them to
   DIR at step 5, then C writes sequence 6 (not in the checkpoint). The test
   kills the psd with SIGKILL and starts a new one; after: the same client
   restores DIR and sends its writes again. */

#define S_RESTART_CLIENT 0xC1D0C1D0C1D00001ULL

static zdist_ps_client_t *
s_client_id(const char *addr, uint64_t id)
{
    char ep[300];
    zdist_error_t err = {0};
    if (zdist_endpoint_normalize(addr, ep, sizeof ep, &err) < 0) {
        fprintf(stderr, "psd_driver: %s\n", err.text);
        exit(2);
    }
    zdist_ps_client_options_t opts;
    zdist_ps_client_options_default(&opts);
    opts.timeout_ms = 10000;
    opts.rpc.client_id = id;
    zdist_ps_client_t *c = zdist_ps_client_new(ep, &opts, &err);
    if (!c) {
        fprintf(stderr, "psd_driver: %s\n", err.text);
        exit(2);
    }
    return c;
}

static float
s_add_seq(zdist_ps_client_t *c, uint64_t seq, bool *ret_dup)
{
    float one[2] = {1, 1}, got[2] = {-1, -1};
    zdist_tensor_t t = s_f32(one, 1, 2);
    zdist_ps_write_result_t res = {0};
    OK(zdist_ps_client_write_seq(c, ZDIST_PS_ASSIGN_ADD, "rd", 0, 0, 0, seq, &t, &res, &s_err));
    CHECK(res.sequence == seq, "reply for sequence %" PRIu64 ", sent %" PRIu64, res.sequence, seq);
    *ret_dup = res.duplicate;
    OK(s_pull(c, "rd", 0, -1, 1, 2, got));
    CHECK(got[0] == got[1], "values %g %g differ", got[0], got[1]);
    return got[0];
}

static int
s_restart_dedup(const char *phase, const char *addr, const char *dir)
{
    zdist_ps_client_t *c = s_client_id(addr, S_RESTART_CLIENT);
    zdist_ps_var_spec_t spec = s_spec("rd", 1, 2, 0, 0, 1, "zeros", 0);
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    bool dup = false;
    float v = 0;
    if (strcmp(phase, "before") == 0) {
        for (uint64_t seq = 1; seq <= 5; seq++) {
            v = s_add_seq(c, seq, &dup);
            CHECK(!dup && v == (float) seq, "sequence %" PRIu64 ": value %g duplicate %d", seq, v, dup);
        }
        OK(zdist_ps_client_save(c, dir, 5, 0, NULL, &s_err));
        v = s_add_seq(c, 6, &dup);
        CHECK(!dup && v == 6, "sequence 6 after the save: value %g duplicate %d", v, dup);
        s_ok("client %016llx applied sequences 1..5, saved them at step 5, applied 6 after the save",
             (unsigned long long) S_RESTART_CLIENT);
    } else {
        int64_t step = -1;
        float got[2] = {-1, -1};
        OK(s_pull(c, "rd", 0, -1, 1, 2, got));
        CHECK(got[0] == 0, "a fresh psd holds %g, wanted 0 (is this the restarted one?)", got[0]);
        OK(zdist_ps_client_restore(c, dir, &step, &s_err));
        CHECK(step == 5, "restored step %lld, wanted 5", (long long) step);
        for (uint64_t seq = 5; seq >= 1; seq--) {
            v = s_add_seq(c, seq, &dup);
            CHECK(dup && v == 5,
                  "retransmitted sequence %" PRIu64 " after the restart: value %g, duplicate %d "
                  "(wanted 5, a duplicate)",
                  seq, v, dup);
        }
        v = s_add_seq(c, 6, &dup);
        CHECK(!dup && v == 6, "sequence 6 (not in the checkpoint): value %g duplicate %d, wanted 6 applied",
              v, dup);
        v = s_add_seq(c, 6, &dup);
        CHECK(dup && v == 6, "sequence 6 again: value %g duplicate %d, wanted 6 duplicate", v, dup);
        zdist_ps_client_t *other = s_client_id(addr, S_RESTART_CLIENT + 1);
        v = s_add_seq(other, 5, &dup);
        CHECK(!dup && v == 7, "another client's sequence 5: value %g duplicate %d, wanted 7 applied", v, dup);
        zdist_ps_client_destroy(&other);
        s_ok("after kill -9 and a restore of step 5: sequences 1..5 of client %016llx answered duplicate, "
             "nothing applied twice; 6 (after the save) applied once",
             (unsigned long long) S_RESTART_CLIENT);
    }
    zdist_ps_client_destroy(&c);
    return atomic_load(&s_failures) ? 1 : 0;
}

/* ---- push_pull ---- */

enum { PP_COLS = 2 };

/* A push_pull of one dense gradient g for both shards of 'ppd' ([4, 2]: rows
   0-1, 2-3), a sparse one (ids 1, 1, 4: 2 x g on row 1, g on row 4) for
   'pps' ([6, 2], one shard), and a pull-only item for 'ppr'. */
typedef struct {
    float dense[2][2 * PP_COLS];
    int64_t ids[3];
    float rows[3 * PP_COLS];
    zdist_ps_push_pull_item_t items[4];
} s_pp_t;

static void
s_pp_init(s_pp_t *pp, float g)
{
    memset(pp, 0, sizeof *pp);
    for (int i = 0; i < 2 * PP_COLS; i++)
        pp->dense[0][i] = pp->dense[1][i] = g;
    for (int i = 0; i < 3 * PP_COLS; i++)
        pp->rows[i] = g;
    pp->ids[0] = 1, pp->ids[1] = 1, pp->ids[2] = 4;
    for (int s = 0; s < 2; s++)
        pp->items[s] = (zdist_ps_push_pull_item_t){.name = "ppd",
                                                   .shard_index = s,
                                                   .push = true,
                                                   .grad = s_f32(pp->dense[s], 2, PP_COLS),
                                                   .pull = true};
    pp->items[2] = (zdist_ps_push_pull_item_t){.name = "pps",
                                               .push = true,
                                               .by_ids = true,
                                               .ids = pp->ids,
                                               .nids = 3,
                                               .grad = s_f32(pp->rows, 3, PP_COLS)};
    pp->items[3] = (zdist_ps_push_pull_item_t){.name = "ppr", .pull = true};
}

/* Runs it through c (sequence 0: the client numbers it); checks the reply
   carries 'ppd' == want_dense, 'ppr' == 5 and the duplicate flags. */
static void
s_pp_run(zdist_ps_client_t *c, s_pp_t *pp, uint64_t sequence, bool want_duplicate, float want_dense,
         const char *what)
{
    zdist_ps_op_t op = {.client = c, .request = {.method = ZDIST_PS_PUSH_PULL}};
    op.request.push_pull = (zdist_ps_push_pull_t){.sequence = sequence, .items = pp->items, .nitems = 4};
    zdist_ps_client_run(&op, 1);
    bool dup[4] = {0};
    int64_t step[4] = {0};
    zdist_tensor_t vals[4];
    int rc = op.rc;
    CHECK(rc == 0, "%s: rc %d", what, rc);
    if (rc == 0)
        OK(rc = zdist_ps_reply_push_pull(op.reply, &op.request.push_pull, dup, step, vals, &s_err));
    if (rc == 0) {
        for (int i = 0; i < 3; i++)
            CHECK(dup[i] == want_duplicate, "%s: item %d duplicate %d", what, i, dup[i]);
        CHECK(!dup[3], "%s: the pull-only item reported duplicate", what);
        CHECK(vals[2].data == NULL, "%s: the sparse item (no pull) got values", what);
        for (int s = 0; s < 2; s++) {
            const float *v = vals[s].data;
            CHECK(vals[s].nbytes == 2 * PP_COLS * sizeof(float) && v[0] == want_dense &&
                      v[2 * PP_COLS - 1] == want_dense,
                  "%s: 'ppd' shard %d: %zu bytes, %g, wanted %g", what, s, vals[s].nbytes,
                  vals[s].nbytes ? v[0] : 0.0, want_dense);
        }
        const float *r = vals[3].data;
        CHECK(vals[3].nbytes == PP_COLS * sizeof(float) && r[0] == 5 && r[1] == 5, "%s: 'ppr' values", what);
    }
    zdist_ps_ops_release(&op, 1);
}

/* 'pps' rows 1 and 4 after k applies of gradient 1 with sgd lr 1 from ones. */
static void
s_pp_check_sparse(zdist_ps_client_t *c, int k, const char *what)
{
    float got[6 * PP_COLS];
    OK(s_pull(c, "pps", 0, -1, 6, PP_COLS, got));
    CHECK(got[0] == 1 && got[1 * PP_COLS] == 1 - 2 * k && got[4 * PP_COLS] == 1 - k && got[5 * PP_COLS] == 1,
          "%s: 'pps' rows 0, 1, 4, 5 = %g %g %g %g, wanted 1 %d %d 1", what, got[0], got[PP_COLS],
          got[4 * PP_COLS], got[5 * PP_COLS], 1 - 2 * k, 1 - k);
}

static int
s_push_pull(const char *addr, pid_t psd_pid)
{
    zdist_ps_client_t *c = s_client(addr, 10000, 3);
    zdist_ps_var_spec_t specs[4] = {
        s_spec("ppd", 4, PP_COLS, 0, 0, 2, "zeros", 0), s_spec("ppd", 4, PP_COLS, 1, 2, 2, "zeros", 0),
        s_spec("pps", 6, PP_COLS, 0, 0, 6, "ones", 0), s_spec("ppr", 1, PP_COLS, 0, 0, 1, "constant", 5)};
    for (int i = 0; i < 4; i++)
        OK(zdist_ps_client_create(c, &specs[i], NULL, &s_err));
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 1.0};
    OK(zdist_ps_client_set_optimizer(c, &sgd, &s_err));

    s_pp_t pp;
    s_pp_init(&pp, 1);
    s_pp_run(c, &pp, 0, false, -1, "first push_pull");
    s_pp_check_sparse(c, 1, "first push_pull");
    uint64_t seq = zdist_ps_client_next_sequence(c);
    s_pp_run(c, &pp, seq, false, -2, "second push_pull");
    s_pp_run(c, &pp, seq, true, -2, "the same sequence again");
    s_pp_check_sparse(c, 2, "the same sequence again");
    s_ok("push_pull: dense, sparse and pull-only items in one message, post-update values back; the same "
         "sequence again is acknowledged duplicate, applied once");

    /* A bad item anywhere refuses the whole message: nothing applied. */
    s_pp_init(&pp, 1);
    pp.items[3] = pp.items[0]; /* 'ppd' shard 0 twice */
    zdist_ps_op_t op = {.client = c, .request = {.method = ZDIST_PS_PUSH_PULL}};
    op.request.push_pull = (zdist_ps_push_pull_t){.items = pp.items, .nitems = 4};
    zdist_ps_client_run(&op, 1);
    EXPECT(-EINVAL, "send one item per shard",
           zdist_ps_reply_push_pull(op.reply, &op.request.push_pull, NULL, NULL, NULL, &s_err));
    zdist_ps_ops_release(&op, 1);
    s_pp_init(&pp, 1);
    pp.items[3] = (zdist_ps_push_pull_item_t){
        .name = "ppr", .push = true, .grad = s_f32(pp.dense[0], 2, PP_COLS)}; /* 2 rows for a 1-row shard */
    op = (zdist_ps_op_t){.client = c, .request = {.method = ZDIST_PS_PUSH_PULL}};
    op.request.push_pull = (zdist_ps_push_pull_t){.items = pp.items, .nitems = 4};
    zdist_ps_client_run(&op, 1);
    EXPECT(-EINVAL, "item 3",
           zdist_ps_reply_push_pull(op.reply, &op.request.push_pull, NULL, NULL, NULL, &s_err));
    zdist_ps_ops_release(&op, 1);
    float got[4 * PP_COLS];
    OK(s_pull(c, "ppd", 0, -1, 2, PP_COLS, got));
    CHECK(got[0] == -2, "'ppd' is %g after refused push_pulls, wanted -2", got[0]);
    s_pp_check_sparse(c, 2, "refused push_pulls");
    s_ok("push_pull: a bad item (a shard twice, a wrong gradient size) refuses the message; nothing applied");

    /* A real retransmission: the psd is stopped, the attempt times out and
       goes again with the same sequence; applied once, values after it. */
    if (psd_pid > 0) {
        zdist_ps_client_t *r = s_client(addr, 300, 8);
        OK(s_pull(r, "ppd", 0, -1, 2, PP_COLS, got)); /* connected */
        CHECK(s_stop_psd(psd_pid) == 0, "SIGSTOP: the psd did not stop");
        pthread_t th;
        pthread_create(&th, NULL, s_resume_later, (void *) (intptr_t) psd_pid);
        s_pp_init(&pp, 1);
        uint64_t retx0 = zdist_ps_client_retransmissions(r);
        /* The answered attempt may be the first (applied) or a later one
           (duplicate): either way the values are those after one apply. */
        zdist_ps_op_t rop = {.client = r, .request = {.method = ZDIST_PS_PUSH_PULL}};
        rop.request.push_pull = (zdist_ps_push_pull_t){.items = pp.items, .nitems = 4};
        zdist_ps_client_run(&rop, 1);
        pthread_join(th, NULL);
        zdist_tensor_t vals[4];
        CHECK(rop.rc == 0 && rop.attempts >= 2, "rc %d, sent %u times, reply status %s", rop.rc, rop.attempts,
              rop.reply ? zdist_status_name(zdist_msg_status(rop.reply)) : "none");
        OK(zdist_ps_reply_push_pull(rop.reply, &rop.request.push_pull, NULL, NULL, vals, &s_err));
        CHECK(vals[0].nbytes && ((const float *) vals[0].data)[0] == -3, "'ppd' in the reply: %g, wanted -3",
              vals[0].nbytes ? ((const float *) vals[0].data)[0] : 0.0);
        zdist_ps_ops_release(&rop, 1);
        OK(s_pull(c, "ppd", 1, -1, 2, PP_COLS, got));
        CHECK(got[0] == -3, "'ppd' is %g after a retransmitted push_pull, wanted -3", got[0]);
        s_pp_check_sparse(c, 3, "a retransmitted push_pull");
        s_ok("push_pull over a stopped psd: %" PRIu64 " retransmissions, applied once",
             zdist_ps_client_retransmissions(r) - retx0);
        zdist_ps_client_destroy(&r);
    }
    sgd.learning_rate = 0.1; /* as the basic case left it */
    OK(zdist_ps_client_set_optimizer(c, &sgd, &s_err));
    zdist_ps_client_destroy(&c);
    return atomic_load(&s_failures) ? 1 : 0;
}

/* ---- checkpoints ---- */

enum { CK_R = 11, CK_C = 3 };

static float
s_ck_value(int64_t r, int64_t c)
{
    return (float) (r * 100 + c) + 0.25f;
}

static int
s_ckpt_save(const char *dir, char **addrs)
{
    zdist_ps_client_t *ps[2] = {s_client(addrs[0], 10000, 3), s_client(addrs[1], 10000, 3)};
    zdist_placement_t *pl = zdist_placement_new(2);
    zdist_shape_t shape = {.rank = 2, .dims = {CK_R, CK_C}};
    int64_t parts[2] = {3, 1};
    zdist_layout_t *lay = NULL;
    OK(zdist_placement_place(pl, "ck", &shape, parts, &lay, &s_err));
    if (!lay)
        return 1;
    for (int i = 0; i < lay->num_shards; i++) {
        const zdist_shard_t *s = &lay->shards[i];
        zdist_ps_var_spec_t spec = s_spec("ck", CK_R, CK_C, i, s->offset, s->rows, "random_normal", 0);
        spec.init.stddev = 1;
        OK(zdist_ps_client_create(ps[s->ps], &spec, NULL, &s_err));
        float vals[CK_R * CK_C];
        for (int64_t r = 0; r < s->rows; r++)
            for (int64_t c = 0; c < CK_C; c++)
                vals[r * CK_C + c] = s_ck_value(s->offset + r, c);
        zdist_tensor_t t = s_f32(vals, s->rows, CK_C);
        OK(zdist_ps_client_assign(ps[s->ps], "ck", i, 0, 0, &t, NULL, &s_err));
    }
    for (int p = 0; p < 2; p++) {
        uint64_t bytes = 0;
        OK(zdist_ps_client_save(ps[p], dir, 5, p, &bytes, &s_err));
        CHECK(bytes > 0, "saved 0 bytes");
    }
    s_ok("saved 'ck' [%d,%d] as 3 shards on 2 psds into %s", CK_R, CK_C, dir);
    zdist_layout_destroy(&lay);
    zdist_placement_destroy(&pl);
    zdist_ps_client_destroy(&ps[0]);
    zdist_ps_client_destroy(&ps[1]);
    return atomic_load(&s_failures) ? 1 : 0;
}

static int
s_ckpt_check(const char *dir, const char *addr)
{
    zdist_ps_client_t *c = s_client(addr, 10000, 3);
    zdist_ps_var_spec_t spec = s_spec("ck", CK_R, CK_C, 0, 0, CK_R, "zeros", 0);
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    int64_t step = -1;
    OK(zdist_ps_client_restore(c, dir, &step, &s_err));
    CHECK(step == 5, "restored step %" PRId64 ", wanted 5", step);
    float vals[CK_R * CK_C];
    OK(s_pull(c, "ck", 0, -1, CK_R, CK_C, vals));
    for (int64_t r = 0; r < CK_R; r++)
        for (int64_t k = 0; k < CK_C; k++)
            CHECK(vals[r * CK_C + k] == s_ck_value(r, k), "ck[%" PRId64 "][%" PRId64 "] = %g, wanted %g", r, k,
                  vals[r * CK_C + k], s_ck_value(r, k));
    /* A directory without a checkpoint. */
    EXPECT(-ENOENT, "NOT_FOUND", zdist_ps_client_restore(c, "/nonexistent/zdist-ckpt", NULL, &s_err));
    s_ok("restored 'ck' from 3 shards on 2 psds onto 1 shard on 1 psd: step %" PRId64 ", values equal", step);
    zdist_ps_client_destroy(&c);
    return atomic_load(&s_failures) ? 1 : 0;
}

static int64_t
s_big_rows(int64_t mib)
{
    return mib * 1024; /* rows of 256 float32 = 1 KiB */
}

static int
s_big_create(zdist_ps_client_t *c, int64_t mib)
{
    zdist_ps_var_spec_t spec = s_spec("big", s_big_rows(mib), 256, 0, 0, s_big_rows(mib), "zeros", 0);
    return zdist_ps_client_create(c, &spec, NULL, &s_err);
}

static int
s_big_save(const char *dir, const char *addr, int64_t step, double value, int64_t mib)
{
    zdist_ps_client_t *c = s_client(addr, 120000, 0);
    OK(s_big_create(c, mib));
    size_t n = (size_t) s_big_rows(mib) * 256;
    float *vals = malloc(n * sizeof *vals);
    for (size_t i = 0; i < n; i++)
        vals[i] = (float) value;
    zdist_tensor_t t = s_f32(vals, s_big_rows(mib), 256);
    OK(zdist_ps_client_assign(c, "big", 0, 0, 0, &t, NULL, &s_err));
    free(vals);
    printf("saving step %" PRId64 "\n", step);
    fflush(stdout);
    int rc = zdist_ps_client_save(c, dir, step, 0, NULL, &s_err);
    if (rc == 0)
        s_ok("saved 'big' (%" PRId64 " MiB) step %" PRId64 " = %g", mib, step, value);
    else
        printf("save step %" PRId64 " did not complete: %s\n", step, s_err.text);
    zdist_ps_client_destroy(&c);
    return atomic_load(&s_failures) ? 1 : (rc < 0 ? 3 : 0);
}

static int
s_big_check(const char *dir, const char *addr, int64_t mib)
{
    zdist_ps_client_t *c = s_client(addr, 120000, 0);
    OK(s_big_create(c, mib));
    int64_t step = -1;
    OK(zdist_ps_client_restore(c, dir, &step, &s_err));
    CHECK(step == 1 || step == 2, "restored step %" PRId64, step);
    size_t n = (size_t) s_big_rows(mib) * 256;
    float *vals = malloc(n * sizeof *vals);
    int64_t chunk = 16 * 1024;
    for (int64_t r = 0; r < s_big_rows(mib); r += chunk)
        OK(s_pull(c, "big", 0, r, chunk, 256, vals + r * 256));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += vals[i] != (float) step;
    CHECK(bad == 0, "%zu values differ from the step's value %" PRId64, bad, step);
    free(vals);
    s_ok("after kill -9 around a save, the checkpoint restores whole: step %" PRId64 ", all values = %" PRId64, step,
         step);
    zdist_ps_client_destroy(&c);
    return atomic_load(&s_failures) ? 1 : 0;
}

/* ---- bad input ---- */

/* Sends raw frames on a DEALER and returns the reply's status (or -1 when
   nothing came back within 3 s); message into msg. */
static int
s_raw_exchange(const char *ep, const char **frames, const size_t *lens, int nframes, char *msg, size_t size)
{
    zsock_t *s = zsock_new(ZMQ_DEALER);
    zsock_set_linger(s, 0);
    void *h = zsock_resolve(s);
    zmq_connect(h, ep);
    for (int i = 0; i < nframes; i++)
        zmq_send(h, frames[i], lens[i], i + 1 < nframes ? ZMQ_SNDMORE : 0);
    int status = -1;
    zmq_pollitem_t item = {h, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, 3000) > 0) {
        zdist_msg_t *reply = NULL;
        zdist_wire_limits_t limits;
        zdist_wire_limits_default(&limits);
        zdist_error_t err = {0};
        if (zdist_wire_recv(h, false, &limits, 0, &reply, &err) == 0) {
            status = zdist_msg_status(reply);
            snprintf(msg, size, "%s", zdist_msg_status_message(reply));
        } else {
            snprintf(msg, size, "undecodable reply: %.400s", err.text);
        }
        zdist_msg_destroy(&reply);
    }
    zsock_destroy(&s);
    return status;
}

static void
s_check_unchanged(zdist_ps_client_t *c, const float *want, const char *after)
{
    float now[4 * 8];
    OK(s_pull(c, "bad", 0, -1, 4, 8, now));
    CHECK(memcmp(now, want, sizeof now) == 0, "values changed after %s", after);
    zdist_ps_stats_t *st = NULL;
    OK(zdist_ps_client_stats(c, &st, &s_err));
    zdist_ps_stats_destroy(&st);
}

static int
s_bad_input(const char *addr)
{
    zdist_ps_client_t *c = s_client(addr, 10000, 0);
    char ep[300];
    OK(zdist_endpoint_normalize(addr, ep, sizeof ep, &s_err));
    zdist_ps_var_spec_t spec = s_spec("bad", 4, 8, 0, 0, 4, "random_uniform", 0);
    spec.init.minval = -1;
    spec.init.maxval = 1;
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    float before[4 * 8];
    OK(s_pull(c, "bad", 0, -1, 4, 8, before));
    zdist_ps_stats_t *st = NULL;
    OK(zdist_ps_client_stats(c, &st, &s_err));
    uint64_t variables = st ? st->variables : 0;
    zdist_ps_stats_destroy(&st);

    /* Garbage frames from a raw socket. */
    char msg[512];
    const char *garbage[2] = {"\xff\xfe not a header", "payload"};
    size_t glens[2] = {strlen(garbage[0]), strlen(garbage[1])};
    int status = s_raw_exchange(ep, garbage, glens, 2, msg, sizeof msg);
    CHECK(status == ZDIST_STATUS_INVALID_ARGUMENT, "garbage: status %d (%s)", status, msg);
    s_check_unchanged(c, before, "garbage frames");
    s_ok("garbage frames: INVALID_ARGUMENT (%s)", msg);

    /* Unknown method, built properly. */
    zdist_msg_t *req = zdist_msg_new(199);
    zdist_msg_t *reply = NULL;
    OK(zdist_ps_client_call(c, &req, &reply, &s_err));
    CHECK(reply && zdist_msg_status(reply) == ZDIST_STATUS_UNIMPLEMENTED, "method 199: status %d",
          reply ? zdist_msg_status(reply) : -1);
    zdist_msg_destroy(&reply);
    s_ok("unknown method: UNIMPLEMENTED");

    /* Unknown variable. */
    float buf[4 * 8];
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = buf, .nbytes = sizeof buf};
    EXPECT(-ENOENT, "NOT_FOUND", zdist_ps_client_pull(c, "nope", 0, 0, 0, &t, &s_err));
    CHECK(strstr(s_err.text, "'nope'"), "message lacks the name: %s", s_err.text);
    zdist_tensor_t w = s_f32(buf, 4, 8);
    memset(buf, 0, sizeof buf);
    EXPECT(-ENOENT, "NOT_FOUND", zdist_ps_client_assign_add(c, "nope", 0, 0, 0, &w, NULL, &s_err));
    EXPECT(-ENOENT, "NOT_FOUND", zdist_ps_client_assign_add(c, "bad", 3, 0, 0, &w, NULL, &s_err));
    s_check_unchanged(c, before, "unknown variable");
    s_ok("unknown variable or shard: NOT_FOUND naming it");

    /* Wrong dtype: float64 into float32. */
    double d[4 * 8] = {0};
    zdist_tensor_t dt = {.dtype = ZDIST_DTYPE_FLOAT64, .data = d, .nbytes = sizeof d, .shape = {2, {4, 8}}};
    EXPECT(-EINVAL, "INVALID_ARGUMENT", zdist_ps_client_assign_add(c, "bad", 0, 0, 0, &dt, NULL, &s_err));
    CHECK(strstr(s_err.text, "float32") && strstr(s_err.text, "float64"), "dtype message: %s", s_err.text);
    EXPECT(-EINVAL, "INVALID_ARGUMENT", zdist_ps_client_push(c, "bad", 0, 0, 0, &dt, NULL, &s_err));
    s_check_unchanged(c, before, "wrong dtype");
    s_ok("wrong dtype: INVALID_ARGUMENT (%s)", s_err.text);

    /* Wrong shape / length: 3 rows for a 4-row shard; 2 rows at row 3. */
    zdist_tensor_t short_t = s_f32(buf, 3, 8);
    EXPECT(-EINVAL, "INVALID_ARGUMENT", zdist_ps_client_assign(c, "bad", 0, 0, 0, &short_t, NULL, &s_err));
    zdist_tensor_t two = s_f32(buf, 2, 8);
    EXPECT(-EINVAL, "INVALID_ARGUMENT", zdist_ps_client_assign(c, "bad", 0, 3, 2, &two, NULL, &s_err));
    zdist_tensor_t cols = s_f32(buf, 4, 7);
    cols.nbytes = 4 * 7 * sizeof(float);
    EXPECT(-EINVAL, "INVALID_ARGUMENT", zdist_ps_client_assign(c, "bad", 0, 0, 0, &cols, NULL, &s_err));
    EXPECT(-EINVAL, "INVALID_ARGUMENT", zdist_ps_client_pull(c, "bad", 0, 2, 5, &t, &s_err));
    s_check_unchanged(c, before, "wrong shape");
    s_ok("wrong shape or length: INVALID_ARGUMENT (%s)", s_err.text);

    /* Ids out of range. */
    int64_t ids[3] = {1, 1000, 2};
    EXPECT(-EINVAL, "1000", zdist_ps_client_pull_rows(c, "bad", ids, 3, &t, &s_err));
    CHECK(strstr(s_err.text, "INVALID_ARGUMENT"), "%s", s_err.text);
    zdist_tensor_t r3 = s_f32(buf, 3, 8);
    EXPECT(-EINVAL, "1000", zdist_ps_client_scatter_add(c, "bad", 0, ids, 3, &r3, NULL, &s_err));
    int64_t neg[1] = {-1};
    zdist_tensor_t r1 = s_f32(buf, 1, 8);
    EXPECT(-EINVAL, "-1", zdist_ps_client_push_sparse(c, "bad", 0, neg, 1, &r1, NULL, &s_err));
    /* ids and rows disagreeing never leave the client. */
    EXPECT(-EINVAL, "invalid arguments", zdist_ps_client_scatter_add(c, "bad", 0, ids, 2, &r3, NULL, &s_err));
    s_check_unchanged(c, before, "ids out of range");
    s_ok("ids out of range: INVALID_ARGUMENT naming the id (%s)", s_err.text);

    /* Bad create, bad optimizer. */
    zdist_ps_var_spec_t bs = s_spec("bad2", 4, 8, 0, 0, 4, "fancy", 0);
    EXPECT(-EINVAL, "unknown initializer", zdist_ps_client_create(c, &bs, NULL, &s_err));
    bs = s_spec("bad3", 4, 8, 0, 2, 4, "zeros", 0);
    EXPECT(-EINVAL, "INVALID_ARGUMENT", zdist_ps_client_create(c, &bs, NULL, &s_err));
    zdist_optim_config_t o = {.kind = (zdist_optim_kind_t)99}; /* a kind the psd does not know */
    EXPECT(-EINVAL, "unknown", zdist_ps_client_set_optimizer(c, &o, &s_err));
    s_check_unchanged(c, before, "bad create");
    s_ok("bad initializer, rows outside the shape, unknown optimizer: INVALID_ARGUMENT");

    OK(zdist_ps_client_stats(c, &st, &s_err));
    CHECK(st && st->variables == variables, "variables %" PRIu64 " after refusals, %" PRIu64 " before",
          st ? st->variables : 0, variables);
    zdist_ps_stats_destroy(&st);
    zdist_ps_client_destroy(&c);
    return atomic_load(&s_failures) ? 1 : 0;
}

/* Against a psd started with --max-message-bytes 65536 --max-tensor-bytes 65536. */
static int
s_oversized(const char *addr)
{
    zdist_ps_client_t *c = s_client(addr, 3000, 0);
    /* 128 rows x 256 float32 = 128 KiB: more than the limits. */
    zdist_ps_var_spec_t spec = s_spec("wide", 128, 256, 0, 0, 128, "ones", 0);
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    float *buf = calloc(128 * 256, sizeof *buf);
    zdist_tensor_t t = {.dtype = ZDIST_DTYPE_FLOAT32, .data = buf, .nbytes = 128 * 256 * sizeof(float)};
    EXPECT(-ENOSPC, "RESOURCE_EXHAUSTED", zdist_ps_client_pull(c, "wide", 0, 0, 0, &t, &s_err));
    s_ok("reply over --max-tensor-bytes: RESOURCE_EXHAUSTED (%s)", s_err.text);

    zdist_tensor_t w = s_f32(buf, 128, 256);
    EXPECT(-EINVAL, "exceeds", zdist_ps_client_assign_add(c, "wide", 0, 0, 0, &w, NULL, &s_err));
    CHECK(strstr(s_err.text, "INVALID_ARGUMENT"), "%s", s_err.text);
    s_ok("request over --max-message-bytes: INVALID_ARGUMENT (%s)", s_err.text);

    /* Far over the limit: the transport drops it (ZMQ_MAXMSGSIZE) and the
       connection; the client sees UNAVAILABLE or DEADLINE_EXCEEDED. */
    float *huge = calloc(1024 * 1024, sizeof *huge);
    zdist_tensor_t h = s_f32(huge, 1024, 1024);
    memset(&s_err, 0, sizeof s_err);
    int rc = zdist_ps_client_assign(c, "wide", 0, 0, 0, &h, NULL, &s_err);
    CHECK(rc == -ENOTCONN || rc == -ETIMEDOUT || rc == -EINVAL, "4 MiB request: rc %d (%s)", rc, s_err.text);
    s_ok("4 MiB request: refused (%s)", s_err.text);
    free(huge);

    /* Nothing changed, and it still serves. */
    float row[256];
    OK(s_pull(c, "wide", 0, 5, 1, 256, row));
    for (int k = 0; k < 256; k++)
        CHECK(row[k] == 1.0f, "wide[5][%d] = %g", k, row[k]);
    s_ok("values unchanged and still serving after oversized requests");
    free(buf);
    zdist_ps_client_destroy(&c);
    return atomic_load(&s_failures) ? 1 : 0;
}

/* ---- memory ---- */

static int
s_memory(const char *addr, int64_t mib)
{
    zdist_ps_client_t *c = s_client(addr, 600000, 0);
    /* random_uniform so every page is really written. */
    zdist_ps_var_spec_t spec = s_spec("huge", mib * 1024, 256, 0, 0, mib * 1024, "random_uniform", 0);
    spec.init.minval = -1;
    spec.init.maxval = 1;
    int64_t t0 = zdist_clock_now_ms();
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    zdist_ps_stats_t *st = NULL;
    OK(zdist_ps_client_stats(c, &st, &s_err));
    if (st)
        printf("value_bytes %" PRIu64 " slot_bytes %" PRIu64 " create_ms %" PRId64 "\n", st->value_bytes,
               st->slot_bytes, zdist_clock_now_ms() - t0);
    zdist_ps_stats_destroy(&st);
    zdist_ps_client_destroy(&c);
    return atomic_load(&s_failures) ? 1 : 0;
}

static int64_t
s_int_arg(const char *text)
{
    int64_t v;
    if (zdist_parse_int64(text, INT64_MIN, INT64_MAX, &v) < 0) {
        fprintf(stderr, "psd_driver: '%s' is not a number\n", text);
        exit(2);
    }
    return v;
}

/* held: what a psd with --max-variables 3 --max-bytes 65536 lets peers create. */
static int
s_held(const char *addr)
{
    zdist_ps_client_t *c = s_client(addr, 5000, 0);
    zdist_ps_var_spec_t spec = s_spec("a", 4, 16, 0, 0, 4, "zeros", 0);
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    zdist_ps_var_spec_t huge = s_spec("huge", 128, 256, 0, 0, 128, "zeros", 0); /* 128 KiB */
    EXPECT(-ENOSPC, "zdist-psd --max-bytes", zdist_ps_client_create(c, &huge, NULL, &s_err));
    printf("huge refused: %s\n", s_err.text);
    spec.name = "b";
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    spec.name = "c";
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    spec.name = "d";
    EXPECT(-ENOSPC, "zdist-psd --max-variables 3", zdist_ps_client_create(c, &spec, NULL, &s_err));
    printf("d refused: %s\n", s_err.text);
    spec.name = "a"; /* creating what exists stays idempotent at the limit */
    bool created = true;
    OK(zdist_ps_client_create(c, &spec, &created, &s_err));
    CHECK(!created, "'a' created twice");
    zdist_ps_stats_t *st = NULL;
    OK(zdist_ps_client_stats(c, &st, &s_err));
    if (st)
        CHECK(st->shards == 3, "%zu shards, wanted 3", (size_t) st->shards);
    zdist_ps_stats_destroy(&st);
    zdist_ps_client_destroy(&c);
    if (!s_failures)
        s_ok("held: shards and bytes past --max-variables / --max-bytes refused, nothing made");
    return s_failures ? 1 : 0;
}

/* ---- drop_job ---- */

#define DROP_ROWS 256
#define DROP_COLS 128 /* 128 KiB of float32 per variable */

static int
s_drop(const char *addr)
{
    zdist_ps_client_t *c = s_client(addr, 5000, 0);
    static float pattern[DROP_ROWS * DROP_COLS], got[DROP_ROWS * DROP_COLS];
    for (int i = 0; i < DROP_ROWS * DROP_COLS; i++)
        pattern[i] = (float) i;
    zdist_tensor_t t = s_f32(pattern, DROP_ROWS, DROP_COLS);
    const char *names[] = {"j1/w", "j2/w"};
    for (int i = 0; i < 2; i++) {
        zdist_ps_var_spec_t spec = s_spec(names[i], DROP_ROWS, DROP_COLS, 0, 0, DROP_ROWS, "zeros", 0);
        OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
        OK(zdist_ps_client_assign(c, names[i], 0, 0, DROP_ROWS, &t, NULL, &s_err));
    }
    zdist_ps_var_spec_t small = s_spec("j1/b", 4, 16, 0, 0, 4, "ones", 0);
    OK(zdist_ps_client_create(c, &small, NULL, &s_err));
    zdist_ps_var_spec_t third = s_spec("j3/w", DROP_ROWS, DROP_COLS, 0, 0, DROP_ROWS, "zeros", 0);
    EXPECT(-ENOSPC, "zdist-psd --max-bytes", zdist_ps_client_create(c, &third, NULL, &s_err));

    /* A pull of j1/w and the drop of j1 in one batch on one connection: the
       psd answers the pull, then frees the shard while that reply may still
       be on its way; the reply must hold the values whole. */
    zdist_ps_op_t ops[2] = {
        {.client = c, .request = {.method = ZDIST_PS_PULL, .pull = {"j1/w", 0, 0, 0}}},
        {.client = c, .request = {.method = ZDIST_PS_DROP_JOB, .drop_job = {"j1"}}},
    };
    zdist_ps_client_run(ops, 2);
    zdist_tensor_t values = {0};
    CHECK(ops[0].rc == 0 && zdist_ps_reply_values(ops[0].reply, &values, &s_err) == 0, "pull: rc %d %s", ops[0].rc,
          s_err.text);
    CHECK(values.nbytes == sizeof pattern && memcmp(values.data, pattern, sizeof pattern) == 0,
          "the pull answered beside the drop lost its values (%zu bytes)", values.nbytes);
    uint64_t shards = 0, bytes = 0;
    CHECK(ops[1].rc == 0 && zdist_ps_reply_drop_job(ops[1].reply, &shards, &bytes, &s_err) == 0, "drop: %s",
          s_err.text);
    CHECK(shards == 2 && bytes == sizeof pattern + 4 * 16 * sizeof(float), "dropped %llu shards, %llu bytes",
          (unsigned long long) shards, (unsigned long long) bytes);
    zdist_ps_ops_release(ops, 2);

    EXPECT(-ENOENT, "create it first", s_pull(c, "j1/w", 0, -1, DROP_ROWS, DROP_COLS, got));
    OK(s_pull(c, "j2/w", 0, -1, DROP_ROWS, DROP_COLS, got));
    CHECK(memcmp(got, pattern, sizeof got) == 0, "j2/w changed with j1's drop");
    zdist_ps_stats_t *st = NULL;
    OK(zdist_ps_client_stats(c, &st, &s_err));
    if (st)
        CHECK(st->shards == 1 && st->value_bytes == sizeof pattern, "%llu shards, %llu bytes after the drop",
              (unsigned long long) st->shards, (unsigned long long) st->value_bytes);
    zdist_ps_stats_destroy(&st);
    OK(zdist_ps_client_create(c, &third, NULL, &s_err)); /* j1's bytes counted back */
    OK(zdist_ps_client_drop_job(c, "j1", false, &shards, &bytes, &s_err));
    CHECK(shards == 0 && bytes == 0, "a second drop of j1: %llu shards", (unsigned long long) shards);
    OK(zdist_ps_client_drop_job(c, "never-here", false, &shards, NULL, &s_err));
    CHECK(shards == 0, "an unknown job dropped %llu shards", (unsigned long long) shards);
    EXPECT(-EINVAL, "drop_job: job is empty; name the job", zdist_ps_client_drop_job(c, "", false, NULL, NULL, &s_err));
    printf("empty job refused: %s\n", s_err.text);
    EXPECT(-EINVAL, "job 'j2/w': byte 2 is not one of", zdist_ps_client_drop_job(c, "j2/w", false, NULL, NULL, &s_err));
    OK(s_pull(c, "j2/w", 0, -1, DROP_ROWS, DROP_COLS, got));
    zdist_ps_client_destroy(&c);
    if (!s_failures)
        s_ok("drop: one job's shards gone (a pull in flight beside it whole), the other's intact, bytes counted "
             "back; repeatable; empty and bad job names refused");
    return s_failures ? 1 : 0;
}

/* ---- checkpoint roots ---- */

static int
s_ckpt_confine(const char *addr, const char *root, const char *out)
{
    zdist_ps_client_t *c = s_client(addr, 5000, 0);
    zdist_ps_var_spec_t spec = s_spec("conf", 4, 2, 0, 0, 4, "ones", 0);
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    char ok[1024], dotdot[1024], link[1024], outdir[1024];
    snprintf(ok, sizeof ok, "%s/ckpt-1", root);
    snprintf(dotdot, sizeof dotdot, "%s/../escaped", root);
    snprintf(link, sizeof link, "%s/link", root);
    snprintf(outdir, sizeof outdir, "%s/ckpt-2", out);
    CHECK(symlink(out, link) == 0, "symlink %s: %s", link, strerror(errno));
    char via_link[1100];
    snprintf(via_link, sizeof via_link, "%s/ckpt-3", link);

    OK(zdist_ps_client_save(c, ok, 1, 0, NULL, &s_err)); /* created under the root */
    int64_t step = -1;
    OK(zdist_ps_client_restore(c, ok, &step, &s_err));
    CHECK(step == 1, "restored step %lld", (long long) step);
    EXPECT(-EACCES, "outside this psd's checkpoint roots (--checkpoint-root ", zdist_ps_client_save(c, outdir, 2, 0, NULL, &s_err));
    printf("outside refused: %s\n", s_err.text);
    EXPECT(-EACCES, "contains '..'", zdist_ps_client_save(c, dotdot, 2, 0, NULL, &s_err));
    EXPECT(-EACCES, "(a symbolic link), outside", zdist_ps_client_save(c, via_link, 2, 0, NULL, &s_err));
    EXPECT(-EACCES, "is a relative path", zdist_ps_client_save(c, "ckpt-4", 2, 0, NULL, &s_err));
    EXPECT(-EACCES, "outside this psd's checkpoint roots", zdist_ps_client_restore(c, out, &step, &s_err));
    EXPECT(-EACCES, "(a symbolic link), outside", zdist_ps_client_restore(c, link, &step, &s_err));
    /* Nothing was written outside the root. */
    DIR *d = opendir(out);
    int entries = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        entries += e->d_name[0] != '.';
    if (d)
        closedir(d);
    CHECK(entries == 0, "%d entries appeared in %s", entries, out);
    zdist_ps_client_destroy(&c);
    if (!s_failures)
        s_ok("checkpoint roots: SAVE/RESTORE under --checkpoint-root work; outside, '..', a symbolic link out and a "
             "relative dir are refused PERMISSION_DENIED naming the flag, nothing written outside");
    return s_failures ? 1 : 0;
}

/* ---- auth / pattern (test_security.sh) ---- */

#define SEC_ROWS 8
#define SEC_COLS 16

static int
s_auth(const char *addr, bool allowed)
{
    zdist_ps_client_t *c = s_client(addr, 5000, 0);
    zdist_ps_var_spec_t spec = s_spec("sec", SEC_ROWS, SEC_COLS, 0, 0, SEC_ROWS, "zeros", 0);
    float ones[SEC_ROWS * SEC_COLS], got[SEC_ROWS * SEC_COLS], before[SEC_ROWS * SEC_COLS];
    for (int i = 0; i < SEC_ROWS * SEC_COLS; i++)
        ones[i] = 1.0f;
    zdist_tensor_t t = s_f32(ones, SEC_ROWS, SEC_COLS);
    zdist_ps_stats_t *st = NULL;
    OK(zdist_ps_client_stats(c, &st, &s_err)); /* open to every admitted key */
    zdist_ps_stats_destroy(&st);
    if (allowed) {
        OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
        OK(zdist_ps_client_push(c, "sec", 0, 0, SEC_ROWS, &t, NULL, &s_err));
        OK(s_pull(c, "sec", 0, 0, SEC_ROWS, SEC_COLS, got));
        CHECK(got[0] != 0.0f, "sec[0] still 0 after a push");
        s_ok("auth: this key creates and pushes");
        /* Only the chief ends jobs: a worker's key may not drop one's variables. */
        EXPECT(-EACCES, "", zdist_ps_client_drop_job(c, "j1", false, NULL, NULL, &s_err));
        printf("drop_job refused: %s\n", s_err.text);
    } else {
        OK(s_pull(c, "sec", 0, 0, SEC_ROWS, SEC_COLS, before)); /* reads are open */
        spec.name = "sec2";
        EXPECT(-EACCES, "", zdist_ps_client_create(c, &spec, NULL, &s_err));
        printf("create refused: %s\n", s_err.text);
        EXPECT(-EACCES, "", zdist_ps_client_push(c, "sec", 0, 0, SEC_ROWS, &t, NULL, &s_err));
        EXPECT(-EACCES, "", zdist_ps_client_assign(c, "sec", 0, 0, SEC_ROWS, &t, NULL, &s_err));
        EXPECT(-EACCES, "", zdist_ps_client_drop_job(c, "j1", false, NULL, NULL, &s_err));
        OK(s_pull(c, "sec", 0, 0, SEC_ROWS, SEC_COLS, got));
        CHECK(memcmp(got, before, sizeof got) == 0, "a refused write changed 'sec'");
        memset(&s_err, 0, sizeof s_err);
        CHECK(s_pull(c, "sec2", 0, 0, SEC_ROWS, SEC_COLS, got) < 0, "the refused create made 'sec2'");
        s_ok("auth: create, push and assign refused PERMISSION_DENIED, values unchanged");
    }
    zdist_ps_client_destroy(&c);
    return s_failures ? 1 : 0;
}

static int
s_pattern(const char *addr)
{
    const char *pat = getenv("PSD_DRIVER_PATTERN");
    if (!pat || strlen(pat) < 8) {
        fprintf(stderr, "psd_driver: set PSD_DRIVER_PATTERN to at least 8 ASCII characters\n");
        return 2;
    }
    zdist_ps_client_t *c = s_client(addr, 5000, 0);
    static float vals[64 * 16], got[64 * 16];
    uint8_t *b = (uint8_t *) vals;
    size_t plen = strlen(pat);
    for (size_t i = 0; i < sizeof vals; i++)
        b[i] = (uint8_t) pat[i % plen]; /* ASCII bytes: finite floats */
    zdist_ps_var_spec_t spec = s_spec("pat", 64, 16, 0, 0, 64, "zeros", 0);
    OK(zdist_ps_client_create(c, &spec, NULL, &s_err));
    zdist_tensor_t t = s_f32(vals, 64, 16);
    OK(zdist_ps_client_assign(c, "pat", 0, 0, 64, &t, NULL, &s_err));
    OK(s_pull(c, "pat", 0, 0, 64, 16, got));
    CHECK(memcmp(got, vals, sizeof got) == 0, "'pat' read back differs from what was assigned");
    s_ok("pattern: %zu bytes of the pattern assigned and read back", sizeof vals);
    zdist_ps_client_destroy(&c);
    return s_failures ? 1 : 0;
}

/* One connection to the psd at ep (ZeroMQ's "tcp://SOURCE:0;HOST:PORT"
   picks the source address), as keys' certificate (NULL: plain). */
static zdist_rpc_client_t *
s_connection(const char *ep, const zdist_keys_t *keys)
{
    zdist_rpc_client_options_t o;
    zdist_rpc_client_options_default(&o);
    o.keys = keys;
    o.server_name = keys ? "ps-0" : NULL;
    zdist_error_t err = {0};
    zdist_rpc_client_t *c = zdist_rpc_client_new(ep, &o, &err);
    if (!c) {
        fprintf(stderr, "psd_driver: %s\n", err.text);
        exit(2);
    }
    return c;
}

/* PING's status on c (its message in msg); a status made here when the call
   got no answer before its deadline or lost its connection. */
static int
s_ping_status(zdist_rpc_client_t *c, int64_t timeout_ms, char *msg, size_t cap)
{
    zdist_msg_t *req = zdist_msg_new(ZDIST_METHOD_PING), *reply = NULL;
    snprintf(msg, cap, "not sent");
    if (!req || zdist_rpc_client_call(c, &req, timeout_ms, &reply) < 0 || !reply)
        return ZDIST_STATUS_INTERNAL;
    int status = zdist_msg_status(reply);
    snprintf(msg, cap, "%s", zdist_msg_status_message(reply) ? zdist_msg_status_message(reply) : "");
    zdist_msg_destroy(&reply);
    return status;
}

static int
s_conn_limit(const char *addr, int64_t limit)
{
    char ep[300], other_ep[320], msg[512];
    zdist_error_t err = {0};
    if (zdist_endpoint_normalize(addr, ep, sizeof ep, &err) < 0 || limit < 1 || limit > 64) {
        fprintf(stderr, "psd_driver: conn-limit ADDR LIMIT (1..64): %s\n", err.text);
        return 2;
    }
    const zdist_keys_t *keys = zdist_keys_process();
    zdist_keys_t *other_keys = NULL;
    if (keys) {
        const char *other = getenv("PSD_DRIVER_OTHER_KEY");
        if (!other || zdist_keys_load(NULL, other, &other_keys, &err) < 0 || !other_keys) {
            fprintf(stderr, "psd_driver: conn-limit with keys needs PSD_DRIVER_OTHER_KEY: %s\n", err.text);
            return 2;
        }
        snprintf(other_ep, sizeof other_ep, "%s", ep);
    } else /* another source address on the loopback: another peer */
        snprintf(other_ep, sizeof other_ep, "tcp://127.0.0.2:0;%s", ep + strlen("tcp://"));
    zdist_rpc_client_t *first[64] = {0}, *extra[2] = {0};
    for (int64_t i = 0; i < limit; i++) {
        first[i] = s_connection(ep, keys);
        int st = s_ping_status(first[i], 20000, msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK, "connection %" PRId64 " of %" PRId64 ": status %d: %s", i + 1, limit, st, msg);
    }
    s_ok("conn-limit: %" PRId64 " connections served", limit);
    for (int i = 0; i < 2; i++) {
        extra[i] = s_connection(ep, keys);
        int st = s_ping_status(extra[i], 3000, msg, sizeof msg);
        CHECK(st != ZDIST_STATUS_OK, "connection %" PRId64 " past the limit was served", limit + 1 + i);
        if (keys) {
            CHECK(st == ZDIST_STATUS_RESOURCE_EXHAUSTED, "past the limit: status %d, wanted RESOURCE_EXHAUSTED: %s",
                  st, msg);
            CHECK(strstr(msg, "--max-connections-per-peer") != NULL, "the refusal does not name the flag: %s", msg);
        }
    }
    s_ok("conn-limit: 2 more refused (%s)", keys ? msg : "closed by the psd");
    for (int64_t i = 0; i < limit; i++) {
        int st = s_ping_status(first[i], 20000, msg, sizeof msg);
        CHECK(st == ZDIST_STATUS_OK, "connection %" PRId64 " after the refusals: status %d: %s", i + 1, st, msg);
    }
    s_ok("conn-limit: the first %" PRId64 " are still served", limit);
    zdist_rpc_client_t *other = s_connection(other_ep, other_keys);
    int st = s_ping_status(other, 20000, msg, sizeof msg);
    CHECK(st == ZDIST_STATUS_OK, "another peer (%s): status %d: %s", keys ? "key" : "127.0.0.2", st, msg);
    s_ok("conn-limit: another peer (%s) is served", keys ? getenv("PSD_DRIVER_OTHER_KEY") : "127.0.0.2");
    /* Closing frees a slot once the psd hears of the close: a new
       connection is tried until then (each one refused until then). */
    zdist_rpc_client_destroy(&extra[0]);
    zdist_rpc_client_destroy(&extra[1]);
    zdist_rpc_client_destroy(&first[0]);
    st = -1;
    for (int attempt = 0; attempt < 20 && st != ZDIST_STATUS_OK; attempt++) {
        zdist_rpc_client_t *again = s_connection(ep, keys);
        st = s_ping_status(again, 3000, msg, sizeof msg);
        zdist_rpc_client_destroy(&again);
    }
    CHECK(st == ZDIST_STATUS_OK, "no new connection served after one of the first closed: status %d: %s", st, msg);
    s_ok("conn-limit: after a close a new connection is served");
    for (int64_t i = 0; i < limit; i++)
        zdist_rpc_client_destroy(&first[i]);
    zdist_rpc_client_destroy(&other);
    zdist_keys_destroy(&other_keys);
    return s_failures ? 1 : 0;
}

/* PSD_DRIVER_KEY: this process speaks CURVE as that certificate. */
static zdist_keys_t *
s_keys(const char *addr)
{
    const char *name = getenv("PSD_DRIVER_KEY");
    if (!name || !*name)
        return NULL;
    zdist_keys_t *keys = NULL;
    zdist_error_t err = {0};
    char ep[300];
    if (zdist_keys_load(NULL, name, &keys, &err) < 0 || !keys ||
        zdist_endpoint_normalize(addr, ep, sizeof ep, &err) < 0 ||
        zdist_keys_add_endpoint(keys, ep, getenv("PSD_DRIVER_SERVER") ? getenv("PSD_DRIVER_SERVER") : "ps-0") < 0) {
        fprintf(stderr, "psd_driver: keys: %s\n", err.text[0] ? err.text : "no key directory ($ZDIST_KEYS_DIR)");
        exit(2);
    }
    zdist_keys_set_process(keys);
    return keys;
}

/* ---- dynamic tables: ftrl against TF's formula, the default value (test_dynamic_ftrl.sh) ---- */

#define S_DYN_DIM 3
#define S_DYN_NIDS 4
#define S_DYN_STEPS 3
#define S_DYN_W0 0.25

/* TF's ApplyFtrlV2 (training_ops.cc, multiply_linear_by_lr false) on one
   element, in double, with Keras's beta folded into l2 as
   tf.keras.optimizers.Ftrl does (l2 + beta / (2 * lr)). */
static void
s_dyn_ftrl_ref(const zdist_optim_config_t *c, double *w, double *accum, double *linear, double g)
{
    double lr = c->learning_rate, p = c->learning_rate_power;
    double l2 = c->l2 + c->beta / (2.0 * lr);
    double gs = g + 2.0 * c->l2_shrinkage * *w;
    double na = *accum + g * g;
    *linear += gs - (pow(na, -p) - pow(*accum, -p)) / lr * *w;
    double quadratic = pow(na, -p) / lr + 2.0 * l2;
    *w = fabs(*linear) > c->l1 ? ((*linear > 0 ? c->l1 : -c->l1) - *linear) / quadratic : 0.0;
    *accum = na;
}

/* The gradient of id slot i, element j at step s: varied, both signs. */
static float
s_dyn_grad(int s, int i, int j)
{
    return (float) (0.3 * sin(1.7 * s + 2.3 * i + 0.9 * j) + 0.05 * (i - 1));
}

/* One job: its optimizer on both psds, a dynamic table over both and a
   fixed [S_DYN_NIDS, S_DYN_DIM] table on ps 0, S_DYN_STEPS sparse pushes, rows checked. */
static void
s_dyn_job(zdist_ps_client_t **ps, const char *job, const zdist_optim_config_t *cfg, const int64_t *ids)
{
    char dyn[64], fixed[64];
    snprintf(dyn, sizeof dyn, "%s/emb/embeddings", job);
    snprintf(fixed, sizeof fixed, "%s/fixed/embeddings", job);
    for (int p = 0; p < 2; p++)
        OK(zdist_ps_client_set_optimizer_job(ps[p], cfg, job, &s_err));
    for (int p = 0; p < 2; p++) {
        zdist_ps_var_spec_t s = {.name = dyn, .dtype = ZDIST_DTYPE_FLOAT32, .shard_index = p, .seed = 3};
        s.shape.rank = 2;
        s.shape.dims[0] = 0;
        s.shape.dims[1] = S_DYN_DIM;
        s.init.kind = ZDIST_INIT_CONSTANT;
        s.init.value = S_DYN_W0;
        s.dynamic = (zdist_ps_dynamic_t){.enabled = true, .min_count = 1, .num_ps = 2};
        OK(zdist_ps_client_create(ps[p], &s, NULL, &s_err));
    }
    zdist_ps_var_spec_t f = {.name = fixed, .dtype = ZDIST_DTYPE_FLOAT32, .row_count = S_DYN_NIDS, .seed = 3};
    f.shape.rank = 2;
    f.shape.dims[0] = S_DYN_NIDS;
    f.shape.dims[1] = S_DYN_DIM;
    f.init.kind = ZDIST_INIT_CONSTANT;
    f.init.value = S_DYN_W0;
    OK(zdist_ps_client_create(ps[0], &f, NULL, &s_err));

    double w[S_DYN_NIDS][S_DYN_DIM], a[S_DYN_NIDS][S_DYN_DIM], z[S_DYN_NIDS][S_DYN_DIM];
    for (int i = 0; i < S_DYN_NIDS; i++)
        for (int j = 0; j < S_DYN_DIM; j++)
            w[i][j] = S_DYN_W0, a[i][j] = cfg->initial_accumulator_value, z[i][j] = 0;
    for (int s = 0; s < S_DYN_STEPS; s++) {
        /* Step 1 pushes id slot 0 twice (summed before the update). */
        double gsum[S_DYN_NIDS][S_DYN_DIM] = {{0}};
        for (int p = 0; p < 2; p++) {
            int64_t pid[S_DYN_NIDS + 1];
            float g[(S_DYN_NIDS + 1) * S_DYN_DIM];
            size_t n = 0;
            for (int k = 0; k < S_DYN_NIDS + (s == 1); k++) {
                int i = k % S_DYN_NIDS;
                if (zdist_partition_id_ps(ids[i], 2) != p)
                    continue;
                for (int j = 0; j < S_DYN_DIM; j++) {
                    g[n * S_DYN_DIM + j] = s_dyn_grad(s + k / S_DYN_NIDS, i, j);
                    gsum[i][j] += (double) g[n * S_DYN_DIM + j];
                }
                pid[n++] = ids[i];
            }
            zdist_tensor_t gt = s_f32(g, (int64_t) n, S_DYN_DIM);
            OK(zdist_ps_client_push_sparse(ps[p], dyn, p, pid, n, &gt, NULL, &s_err));
        }
        /* The fixed table gets the same gradients by row: id slot i is row i. */
        int64_t rows[S_DYN_NIDS];
        float gf[S_DYN_NIDS * S_DYN_DIM];
        for (int i = 0; i < S_DYN_NIDS; i++) {
            rows[i] = i;
            for (int j = 0; j < S_DYN_DIM; j++)
                gf[i * S_DYN_DIM + j] = (float) gsum[i][j];
        }
        zdist_tensor_t gt = s_f32(gf, S_DYN_NIDS, S_DYN_DIM);
        OK(zdist_ps_client_push_sparse(ps[0], fixed, 0, rows, S_DYN_NIDS, &gt, NULL, &s_err));
        for (int i = 0; i < S_DYN_NIDS; i++)
            for (int j = 0; j < S_DYN_DIM; j++)
                s_dyn_ftrl_ref(cfg, &w[i][j], &a[i][j], &z[i][j], gsum[i][j]);
    }

    int64_t fixed_rows[S_DYN_NIDS] = {0, 1, 2, 3};
    float got[S_DYN_NIDS * S_DYN_DIM];
    zdist_tensor_t out = s_f32(got, S_DYN_NIDS, S_DYN_DIM);
    OK(zdist_ps_client_pull_rows(ps[0], fixed, fixed_rows, S_DYN_NIDS, &out, &s_err));
    for (int i = 0; i < S_DYN_NIDS; i++)
        for (int j = 0; j < S_DYN_DIM; j++)
            CHECK(fabs(got[i * S_DYN_DIM + j] - w[i][j]) <= 1e-5 * (1 + fabs(w[i][j])),
                  "%s fixed row %d[%d]: %.8g, TF's formula %.8g", job, i, j, got[i * S_DYN_DIM + j], w[i][j]);
    for (int i = 0; i < S_DYN_NIDS; i++) {
        int p = zdist_partition_id_ps(ids[i], 2);
        float row[S_DYN_DIM];
        zdist_tensor_t r = s_f32(row, 1, S_DYN_DIM);
        OK(zdist_ps_client_pull_rows(ps[p], dyn, &ids[i], 1, &r, &s_err));
        for (int j = 0; j < S_DYN_DIM; j++)
            CHECK(fabs(row[j] - w[i][j]) <= 1e-5 * (1 + fabs(w[i][j])),
                  "%s id %" PRId64 "[%d] on ps %d: %.8g, TF's formula %.8g", job, ids[i], j, p, row[j], w[i][j]);
    }
    /* An id never trained: the default, and no row made by the lookup. */
    int64_t unseen = 123456789;
    int p = zdist_partition_id_ps(unseen, 2);
    float row[S_DYN_DIM] = {1, 1, 1};
    zdist_tensor_t r = s_f32(row, 1, S_DYN_DIM);
    OK(zdist_ps_client_pull_rows(ps[p], dyn, &unseen, 1, &r, &s_err));
    for (int j = 0; j < S_DYN_DIM; j++)
        CHECK(row[j] == 0.0f, "%s unseen id [%d]: %g, not the default 0", job, j, row[j]);
    printf("ok: %s: ftrl (lr %g, power %g, acc0 %g, l1 %g, l2 %g, shrinkage %g, beta %g): %d dynamic rows over "
           "2 psds and %d fixed rows match TF's ApplyFtrlV2 after %d pushes (w[0][0] %.6f)\n",
           job, cfg->learning_rate, cfg->learning_rate_power, cfg->initial_accumulator_value, cfg->l1, cfg->l2,
           cfg->l2_shrinkage, cfg->beta, S_DYN_NIDS, S_DYN_NIDS, S_DYN_STEPS, w[0][0]);
}

static int
s_dyn_ftrl(char **addrs)
{
    zdist_ps_client_t *ps[2] = {s_client(addrs[0], 20000, 3), s_client(addrs[1], 20000, 3)};
    /* Ids from all of int64 with its extremes; both psds get some (checked). */
    const int64_t ids[S_DYN_NIDS] = {INT64_MIN, INT64_MAX, -7046029254386353131, 4611686018427387913};
    int on[2] = {0, 0};
    for (int i = 0; i < S_DYN_NIDS; i++)
        on[zdist_partition_id_ps(ids[i], 2)]++;
    CHECK(on[0] > 0 && on[1] > 0, "ids all on one ps (%d, %d): pick others", on[0], on[1]);

    zdist_optim_config_t keras;
    zdist_optim_config_default(&keras, ZDIST_OPTIM_FTRL);
    keras.learning_rate = 0.5;
    s_dyn_job(ps, "ftrl-keras", &keras, ids);

    zdist_optim_config_t all = keras;
    all.learning_rate = 0.2;
    all.learning_rate_power = -0.3;
    all.initial_accumulator_value = 0.4;
    all.l1 = 0.01;
    all.l2 = 0.05;
    all.l2_shrinkage = 0.1;
    all.beta = 0.3;
    s_dyn_job(ps, "ftrl-all", &all, ids);

    zdist_optim_config_t zero = keras;
    zero.learning_rate = 0.1;
    zero.learning_rate_power = 0;
    zero.initial_accumulator_value = 0;
    zero.l2 = 0.5;
    s_dyn_job(ps, "ftrl-zero", &zero, ids);

    for (int p = 0; p < 2; p++)
        zdist_ps_client_destroy(&ps[p]);
    return s_failures ? 1 : 0;
}

/* Reads id's row from its psd into row (S_DYN_DIM floats). */
static void
s_dyn_lookup(zdist_ps_client_t **ps, const char *name, int64_t id, float *row)
{
    zdist_tensor_t r = s_f32(row, 1, S_DYN_DIM);
    OK(zdist_ps_client_pull_rows(ps[zdist_partition_id_ps(id, 2)], name, &id, 1, &r, &s_err));
}

static int
s_dyn_default(char **addrs)
{
    zdist_ps_client_t *ps[2] = {s_client(addrs[0], 20000, 3), s_client(addrs[1], 20000, 3)};
    zdist_optim_config_t sgd = {.kind = ZDIST_OPTIM_SGD, .learning_rate = 0.5};
    const char *name = "dflt/emb/embeddings", *plain = "dflt/plain/embeddings";
    for (int p = 0; p < 2; p++) {
        OK(zdist_ps_client_set_optimizer_job(ps[p], &sgd, "dflt", &s_err));
        for (int t = 0; t < 2; t++) {
            zdist_ps_var_spec_t s = {.name = t ? plain : name, .dtype = ZDIST_DTYPE_FLOAT32, .shard_index = p,
                                     .seed = 3};
            s.shape.rank = 2;
            s.shape.dims[1] = S_DYN_DIM;
            s.init.kind = ZDIST_INIT_CONSTANT;
            s.init.value = S_DYN_W0;
            s.dynamic = (zdist_ps_dynamic_t){.enabled = true, .min_count = 3, .num_ps = 2,
                                             .default_value = t ? 0.0 : -0.5};
            OK(zdist_ps_client_create(ps[p], &s, NULL, &s_err));
        }
    }
    const int64_t ids[2] = {INT64_MIN + 5, 8070450532247928832};
    float row[S_DYN_DIM];
    for (int push = 0; push <= 3; push++) {
        for (int i = 0; i < 2; i++) {
            s_dyn_lookup(ps, name, ids[i], row);
            for (int j = 0; j < S_DYN_DIM; j++) {
                if (push < 3)
                    CHECK(row[j] == -0.5f, "id %" PRId64 " after %d occurrences [%d]: %g, not the default -0.5",
                          ids[i], push, j, row[j]);
                else
                    CHECK(fabs(row[j] - (S_DYN_W0 - 0.5 * 0.1)) < 1e-6 || row[j] == (float) S_DYN_W0,
                          "id %" PRId64 " admitted [%d]: %g, not its row (0.25 less the update)", ids[i], j, row[j]);
            }
            s_dyn_lookup(ps, plain, ids[i], row);
            for (int j = 0; j < S_DYN_DIM && push < 3; j++)
                CHECK(row[j] == 0.0f, "table without a default: id %" PRId64 " [%d]: %g, not 0", ids[i], j, row[j]);
        }
        if (push == 3)
            break;
        for (int i = 0; i < 2; i++) { /* one occurrence of each id, gradient 0.1 */
            int p = zdist_partition_id_ps(ids[i], 2);
            float g[S_DYN_DIM] = {0.1f, 0.1f, 0.1f};
            zdist_tensor_t gt = s_f32(g, 1, S_DYN_DIM);
            OK(zdist_ps_client_push_sparse(ps[p], name, p, &ids[i], 1, &gt, NULL, &s_err));
            OK(zdist_ps_client_push_sparse(ps[p], plain, p, &ids[i], 1, &gt, NULL, &s_err));
        }
    }
    printf("ok: default -0.5 read by ids unseen and counted below min_count 3 on both psds; their rows once "
           "admitted; a table without a default reads zeros\n");
    for (int p = 0; p < 2; p++)
        zdist_ps_client_destroy(&ps[p]);
    return s_failures ? 1 : 0;
}

int
main(int argc, char **argv)
{
    zsys_init();
    zsys_set_logstream(NULL);
    if (argc < 3) {
        fprintf(stderr, "usage: psd_driver CASE ARGS... (see the source)\n");
        return 2;
    }
    const char *cmd = argv[1];
    int rc;
    zdist_keys_t *keys = s_keys(argv[2]);
    if (strcmp(cmd, "basic") == 0)
        rc = s_basic(argc >= 4 ? 2 : 1, argv + 2);
    else if (strcmp(cmd, "concurrency") == 0)
        rc = s_concurrency(argv[2]);
    else if (strcmp(cmd, "exactly-once") == 0)
        rc = s_exactly_once(argv[2], argc >= 4 ? (pid_t) s_int_arg(argv[3]) : 0);
    else if (strcmp(cmd, "push-pull") == 0)
        rc = s_push_pull(argv[2], argc >= 4 ? (pid_t) s_int_arg(argv[3]) : 0);
    else if (strcmp(cmd, "ckpt-save") == 0 && argc == 5)
        rc = s_ckpt_save(argv[2], argv + 3);
    else if (strcmp(cmd, "restart-dedup") == 0 && argc == 5)
        rc = s_restart_dedup(argv[2], argv[3], argv[4]);
    else if (strcmp(cmd, "ckpt-check") == 0 && argc == 4)
        rc = s_ckpt_check(argv[2], argv[3]);
    else if (strcmp(cmd, "big-save") == 0 && argc == 7)
        rc = s_big_save(argv[2], argv[3], s_int_arg(argv[4]), (double) s_int_arg(argv[5]), s_int_arg(argv[6]));
    else if (strcmp(cmd, "big-check") == 0 && argc == 5)
        rc = s_big_check(argv[2], argv[3], s_int_arg(argv[4]));
    else if (strcmp(cmd, "bad-input") == 0)
        rc = s_bad_input(argv[2]);
    else if (strcmp(cmd, "oversized") == 0)
        rc = s_oversized(argv[2]);
    else if (strcmp(cmd, "memory") == 0 && argc == 4)
        rc = s_memory(argv[2], s_int_arg(argv[3]));
    else if (strcmp(cmd, "ckpt-confine") == 0 && argc == 5)
        rc = s_ckpt_confine(argv[2], argv[3], argv[4]);
    else if (strcmp(cmd, "held") == 0)
        rc = s_held(argv[2]);
    else if (strcmp(cmd, "drop") == 0)
        rc = s_drop(argv[2]);
    else if (strcmp(cmd, "auth") == 0 && argc == 4)
        rc = s_auth(argv[2], strcmp(argv[3], "allowed") == 0);
    else if (strcmp(cmd, "pattern") == 0)
        rc = s_pattern(argv[2]);
    else if (strcmp(cmd, "conn-limit") == 0 && argc == 4)
        rc = s_conn_limit(argv[2], s_int_arg(argv[3]));
    else if (strcmp(cmd, "dyn-ftrl") == 0 && argc == 4)
        rc = s_dyn_ftrl(argv + 2);
    else if (strcmp(cmd, "dyn-default") == 0 && argc == 4)
        rc = s_dyn_default(argv + 2);
    else {
        fprintf(stderr, "psd_driver: unknown case '%s' or wrong arguments\n", cmd);
        return 2;
    }
    zdist_keys_set_process(NULL);
    zdist_keys_destroy(&keys);
    zsys_shutdown();
    return rc;
}
