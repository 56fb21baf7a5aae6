/* CUnit suite: the order in which a worker runs several jobs' requests (fair share, priority, each job in order). */
#include <string.h>

#include "testutil.h"
#include "worker_sched.h"

/* Runs the queue to empty as the steps thread does (a job served becomes
   the most recent) and writes the jobs' names in the order they ran. */
static void
s_drain(worker_sched_item_t *q, size_t n, const char *const *jobs, const int *prio, char *order, size_t size)
{
    uint64_t served[8] = {0}, turn = 0;
    order[0] = 0;
    while (n > 0) {
        for (size_t i = 0; i < n; i++)
            for (int k = 0; jobs[k]; k++)
                if (strcmp(q[i].job, jobs[k]) == 0) {
                    q[i].last_served = served[k];
                    q[i].priority = prio[k];
                }
        size_t p = worker_sched_pick(q, n);
        size_t len = strlen(order);
        snprintf(order + len, size - len, "%s", q[p].job);
        for (int k = 0; jobs[k]; k++)
            if (strcmp(q[p].job, jobs[k]) == 0)
                served[k] = ++turn;
        memmove(&q[p], &q[p + 1], (n - p - 1) * sizeof q[0]);
        n--;
    }
}

static void
test_round_robin(void)
{
    /* A's closures arrived first, then B's: they alternate. */
    worker_sched_item_t q[] = {{"A", 0, 0}, {"A", 0, 0}, {"A", 0, 0}, {"B", 0, 0}, {"B", 0, 0}, {"B", 0, 0}};
    const char *const jobs[] = {"A", "B", NULL};
    const int prio[] = {0, 0};
    char order[32];
    s_drain(q, 6, jobs, prio, order, sizeof order);
    CU_ASSERT_STRING_EQUAL(order, "ABABAB");
}

static void
test_priority(void)
{
    /* B has the higher priority: its requests go first, A's get the gaps. */
    worker_sched_item_t q[] = {{"A", 0, 0}, {"A", 0, 0}, {"B", 0, 0}, {"A", 0, 0}, {"B", 0, 0}};
    const char *const jobs[] = {"A", "B", NULL};
    const int prio[] = {0, 5};
    char order[32];
    s_drain(q, 5, jobs, prio, order, sizeof order);
    CU_ASSERT_STRING_EQUAL(order, "BBAAA");
}

static void
test_in_order_per_job(void)
{
    /* Whatever runs first, each job's requests keep their order: the pick is
       always the oldest of its job. */
    worker_sched_item_t q[] = {{"A", 0, 5}, {"B", 0, 1}, {"A", 0, 5}, {"B", 0, 1}};
    CU_ASSERT_EQUAL(worker_sched_pick(q, 4), 1);
    q[1].last_served = q[3].last_served = 9;
    CU_ASSERT_EQUAL(worker_sched_pick(q, 4), 0);
    /* a job not held yet (its START_JOB) goes before jobs already served */
    worker_sched_item_t s[] = {{"A", 0, 3}, {"C", 0, 0}};
    CU_ASSERT_EQUAL(worker_sched_pick(s, 2), 1);
    /* one job alone: its oldest */
    worker_sched_item_t one[] = {{"A", 0, 3}, {"A", 0, 3}};
    CU_ASSERT_EQUAL(worker_sched_pick(one, 2), 0);
}

void
zdist_test_worker_sched_register(void)
{
    ZDIST_SUITE("worker_sched", {"equal priorities take turns (round robin)", test_round_robin},
                {"the higher priority first", test_priority},
                {"each job's requests in arrival order; a new job first", test_in_order_per_job});
}
