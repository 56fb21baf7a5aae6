/* Helpers shared by the CUnit suites. */
#ifndef ZDIST_TESTUTIL_H
#define ZDIST_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <czmq.h>
#include <stdint.h>

#include "zdist/ps_client.h"

/* Adds a suite with its tests; aborts the runner on registry errors.
   Use: ZDIST_SUITE("tensor", {"dtype sizes", test_fn}, ...). */
typedef struct {
    const char *name;
    CU_TestFunc fn;
} zdist_testcase_t;
void zdist_test_add_suite(const char *name, const zdist_testcase_t *cases, size_t n);
#define ZDIST_SUITE(name, ...)                                                          \
    do {                                                                                \
        static const zdist_testcase_t cases_[] = {__VA_ARGS__};                         \
        zdist_test_add_suite(name, cases_, sizeof cases_ / sizeof cases_[0]);           \
    } while (0)

/* A uniform draw in [0, 1) from *state (xorshift64: the same sequence for
   the same seed, so a test's random data is the same on every run). */
double zdist_test_uniform(uint64_t *state);
/* The next 64 random bits of the same sequence (an id anywhere in int64). */
uint64_t zdist_test_rand64(uint64_t *state);
/* Milliseconds on the monotonic clock. */
int64_t zdist_test_now_ms(void);
/* A fresh directory under /tmp; the caller removes it with zdist_test_rmtree. */
char *zdist_test_tmpdir(const char *tag);
void zdist_test_rmtree(const char *path);

/* A psd server (psd_server_actor) in this process, ps task ps_task, on a
   free loopback port (written to endpoint), tensors up to 1 MiB. Fails the
   test when it does not come up; zactor_destroy stops it. */
zactor_t *zdist_test_psd_start(int ps_task, char *endpoint, size_t size);
/* The same with messages of at most max_message_bytes (0: the default). */
zactor_t *zdist_test_psd_start_limited(int ps_task, size_t max_message_bytes, char *endpoint, size_t size);
/* Requests of method `name` ("push", "pull_rows"...) the psd behind c has served. */
uint64_t zdist_test_psd_requests(zdist_ps_client_t *c, const char *name);

#endif
