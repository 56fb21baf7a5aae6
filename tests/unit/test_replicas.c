/* CUnit suite: the replica runtime (zdist/replicas.h) — replica threads, the barrier a departed replica fails with -EPIPE, logical devices. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "testutil.h"
#include "zdist/replicas.h"

#define S_N 4

typedef struct {
    zdist_replicas_t *rt;
    pthread_t thread[S_N];
    int rc[S_N];
    int departed[S_N];
    int rounds;
    atomic_int count;
} s_run_t;

/* Every replica meets `rounds` times, counting between meetings. */
static void
s_meet(void *p, int r)
{
    s_run_t *run = p;
    run->thread[r] = pthread_self();
    run->rc[r] = 0;
    for (int i = 0; i < run->rounds && run->rc[r] == 0; i++) {
        atomic_fetch_add(&run->count, 1);
        run->rc[r] = zdist_replicas_barrier(run->rt, &run->departed[r]);
    }
}

/* Replica 2 leaves at once; the others wait for it at their first meeting. */
static void
s_desert(void *p, int r)
{
    s_run_t *run = p;
    run->departed[r] = -1;
    run->rc[r] = r == 2 ? 0 : zdist_replicas_barrier(run->rt, &run->departed[r]);
}

static void
test_run_and_barrier(void)
{
    zdist_error_t err = {0};
    zdist_replicas_t *rt = NULL;
    zdist_replicas_config_t cfg = {.replicas = S_N, .caller_runs_first = true};
    CU_ASSERT_EQUAL_FATAL(zdist_replicas_new(&cfg, &rt, &err), 0);
    CU_ASSERT_EQUAL(zdist_replicas_count(rt), S_N);
    CU_ASSERT_EQUAL(zdist_replicas_devices(rt), 1);
    s_run_t run = {.rt = rt, .rounds = 50};
    zdist_replicas_run(rt, s_meet, &run);
    CU_ASSERT_EQUAL(atomic_load(&run.count), S_N * 50);
    CU_ASSERT_TRUE(pthread_equal(run.thread[0], pthread_self())); /* caller_runs_first */
    for (int r = 0; r < S_N; r++)
        CU_ASSERT_EQUAL(run.rc[r], 0);
    /* a departure fails the others' wait instead of hanging them, naming it */
    zdist_replicas_run(rt, s_desert, &run);
    for (int r = 0; r < S_N; r++)
        if (r != 2) {
            CU_ASSERT_EQUAL(run.rc[r], -EPIPE);
            CU_ASSERT_EQUAL(run.departed[r], 2);
        }
    /* the next run opens a new round */
    atomic_store(&run.count, 0);
    run.rounds = 3;
    zdist_replicas_run(rt, s_meet, &run);
    CU_ASSERT_EQUAL(atomic_load(&run.count), S_N * 3);
    for (int r = 0; r < S_N; r++)
        CU_ASSERT_EQUAL(run.rc[r], 0);
    zdist_replicas_destroy(&rt);
    CU_ASSERT_PTR_NULL(rt);
    zdist_replicas_destroy(&rt);
    cfg.replicas = 0;
    CU_ASSERT_EQUAL(zdist_replicas_new(&cfg, &rt, &err), -EINVAL);
}

typedef struct {
    zdist_replicas_t *rt;
    atomic_int seen[S_N][3];
    int rc[S_N];
} s_dev_run_t;

typedef struct {
    s_dev_run_t *run;
    int replica;
} s_dev_arg_t;

static int
s_device(void *p, int device)
{
    s_dev_arg_t *a = p;
    atomic_fetch_add(&a->run->seen[a->replica][device], 1);
    return device == 2 && a->replica == 1 ? -EIO : 0;
}

static void
s_use_devices(void *p, int r)
{
    s_dev_run_t *run = p;
    s_dev_arg_t a = {.run = run, .replica = r};
    int rc = zdist_replicas_run_on_devices(run->rt, r, -1, s_device, &a);
    if (rc == 0)
        rc = zdist_replicas_run_on_devices(run->rt, r, 1, s_device, &a);
    run->rc[r] = rc;
}

static int s_slots[S_N * 3];

static void
s_on_start(void *arg, int slot)
{
    (void)arg;
    s_slots[slot]++;
}

static void
test_logical_devices(void)
{
    zdist_error_t err = {0};
    zdist_replicas_t *rt = NULL;
    memset(s_slots, 0, sizeof s_slots);
    zdist_replicas_config_t cfg = {.replicas = 2, .devices = 3, .on_thread_start = s_on_start};
    CU_ASSERT_EQUAL_FATAL(zdist_replicas_new(&cfg, &rt, &err), 0);
    s_dev_run_t run = {.rt = rt};
    zdist_replicas_run(rt, s_use_devices, &run);
    /* every device once (-1), device 1 again; replica 1's device 2 fails */
    CU_ASSERT_EQUAL(run.rc[0], 0);
    CU_ASSERT_EQUAL(run.rc[1], -EIO);
    CU_ASSERT_EQUAL(atomic_load(&run.seen[0][0]), 1);
    CU_ASSERT_EQUAL(atomic_load(&run.seen[0][1]), 2);
    CU_ASSERT_EQUAL(atomic_load(&run.seen[0][2]), 1);
    CU_ASSERT_EQUAL(atomic_load(&run.seen[1][1]), 1);
    CU_ASSERT_EQUAL(zdist_replicas_run_on_devices(rt, 0, 3, s_device, NULL), -EINVAL);
    zdist_replicas_destroy(&rt);
    /* a thread of every replica and device, replica 0's too: 2 x 3 slots */
    for (int s = 0; s < 6; s++)
        CU_ASSERT_EQUAL(s_slots[s], 1);
}

void
zdist_test_replicas_register(void)
{
    ZDIST_SUITE("replicas", {"runs, the barrier, a departed replica's -EPIPE, the next round", test_run_and_barrier},
                {"logical devices: one, all at once, errors; a start hook per thread", test_logical_devices});
}
