/* Helpers shared by the CUnit suites. */
#ifndef ZDIST_TESTUTIL_H
#define ZDIST_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <stdint.h>

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
/* Milliseconds on the monotonic clock. */
int64_t zdist_test_now_ms(void);
/* A fresh directory under /tmp; the caller removes it with zdist_test_rmtree. */
char *zdist_test_tmpdir(const char *tag);
void zdist_test_rmtree(const char *path);

#endif
