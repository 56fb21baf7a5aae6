/* worker fault: the test-only fault hook, in test builds only (see worker_fault.h). */
#include <czmq.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include "worker_fault.h"
#include "zdist/parse.h"

int
worker_fault_arm(worker_fault_t *self, zdist_error_t *err)
{
    const char *fault;
    if (!(fault = getenv("ZDIST_TEST_DIE_AFTER_PUSH")) && !(fault = getenv("ZDIST_TEST_STOP_AFTER_PUSH")))
        return 0;
    if (zdist_parse_int64(fault, 1, INT64_MAX, &self->step) < 0)
        return zdist_error_set(err, -EINVAL, "ZDIST_TEST_DIE_AFTER_PUSH / ZDIST_TEST_STOP_AFTER_PUSH: '%.40s' is "
                               "not a step number >= 1", fault);
    self->signal = getenv("ZDIST_TEST_DIE_AFTER_PUSH") ? SIGKILL : SIGSTOP;
    return 0;
}

bool
worker_fault_after_push(const worker_fault_t *self, uint64_t steps)
{
    if (self->step <= 0 || (int64_t) steps != self->step)
        return false;
    zsys_warning("test fault: step %lld pushed; %s before replying", (long long) self->step,
                 self->signal == SIGKILL ? "SIGKILL" : "SIGSTOP");
    raise(self->signal);
    return true; /* SIGSTOP: going on after SIGCONT */
}

void
worker_fault_after_closure(const worker_fault_t *self, bool hit)
{
    if (hit)
        zsys_warning("test fault: the closure of step %lld ran to its end after SIGCONT", (long long) self->step);
}
