/* worker fault: the worker's test-only fault hook (ZDIST_TEST_DIE_AFTER_PUSH /
   ZDIST_TEST_STOP_AFTER_PUSH=N): the signal the process sends itself once
   its N-th step's pushes are acknowledged, before the RUN_STEPS reply
   leaves: the one window where a lost worker's closure is re-run with some
   of its steps already on the psds, which no outside kill hits reliably
   (integration.exactly_once). Compiled into test builds only (cmake
   -DZDIST_TEST_HOOKS=ON); in any other build these are no-ops and the
   variables are never read. */
#ifndef WORKER_FAULT_H
#define WORKER_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "zdist/error.h"

typedef struct {
    int64_t step; /* 0: none */
    int signal;   /* SIGKILL or SIGSTOP */
} worker_fault_t;

#ifdef ZDIST_TEST_HOOKS
/* Arms the fault from the environment: 0, or -EINVAL with err when it is not a step number. */
int worker_fault_arm(worker_fault_t *self, zdist_error_t *err);
/* After the pushes of the worker's steps-th step: the signal, when it is the armed step. Whether it was. */
bool worker_fault_after_push(const worker_fault_t *self, uint64_t steps);
/* After the closure: says that one stopped (and continued) ran to its end. */
void worker_fault_after_closure(const worker_fault_t *self, bool hit);
#else
static inline int
worker_fault_arm(worker_fault_t *self, zdist_error_t *err)
{
    (void) self;
    (void) err;
    return 0;
}

static inline bool
worker_fault_after_push(const worker_fault_t *self, uint64_t steps)
{
    (void) self;
    (void) steps;
    return false;
}

static inline void
worker_fault_after_closure(const worker_fault_t *self, bool hit)
{
    (void) self;
    (void) hit;
}
#endif

#endif
