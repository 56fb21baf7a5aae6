/* worker_sched: a job's requests in order; between jobs, priority first, then round robin. */
#include <stdbool.h>
#include <string.h>

#include "worker_sched.h"

size_t
worker_sched_pick(const worker_sched_item_t *q, size_t n)
{
    size_t best = 0;
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        bool later = false; /* an older request of the same job is the job's candidate */
        for (size_t k = 0; k < i && !later; k++)
            later = strcmp(q[k].job, q[i].job) == 0;
        if (later)
            continue;
        if (!found || q[i].priority > q[best].priority ||
            (q[i].priority == q[best].priority && q[i].last_served < q[best].last_served)) {
            best = i;
            found = true;
        }
    }
    return best;
}
