/* Helpers shared by the CUnit suites. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ftw.h>
#include <unistd.h>

#include "testutil.h"

void
zdist_test_add_suite(const char *name, const zdist_testcase_t *cases, size_t n)
{
    CU_pSuite suite = CU_add_suite(name, NULL, NULL);
    if (!suite) {
        fprintf(stderr, "cannot add suite %s\n", name);
        abort();
    }
    for (size_t i = 0; i < n; i++)
        if (!CU_add_test(suite, cases[i].name, cases[i].fn)) {
            fprintf(stderr, "cannot add test %s\n", cases[i].name);
            abort();
        }
}

double
zdist_test_uniform(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return (double)(x >> 11) / 9007199254740992.0;
}

int64_t
zdist_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *
zdist_test_tmpdir(const char *tag)
{
    char tmpl[256];
    snprintf(tmpl, sizeof tmpl, "/tmp/zdist-test-%s-XXXXXX", tag);
    char *dir = mkdtemp(tmpl);
    return dir ? strdup(dir) : NULL;
}

static int
s_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void) sb;
    (void) flag;
    (void) ftw;
    return remove(path);
}

void
zdist_test_rmtree(const char *path)
{
    if (path)
        nftw(path, s_rm, 16, FTW_DEPTH | FTW_PHYS);
}
