/* Helpers shared by the CUnit suites. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ftw.h>
#include <unistd.h>

#include "psd_server.h"
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

uint64_t
zdist_test_rand64(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

double
zdist_test_uniform(uint64_t *state)
{
    return (double)(zdist_test_rand64(state) >> 11) / 9007199254740992.0;
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

zactor_t *
zdist_test_psd_start(int ps_task, char *endpoint, size_t size)
{
    return zdist_test_psd_start_limited(ps_task, 0, endpoint, size);
}

zactor_t *
zdist_test_psd_start_limited(int ps_task, size_t max_message_bytes, char *endpoint, size_t size)
{
    psd_server_config_t cfg = {.endpoint = "tcp://127.0.0.1:*", .max_tensor_bytes = 1 << 20, .ps_task = ps_task};
    zdist_wire_limits_default(&cfg.limits);
    if (max_message_bytes)
        cfg.limits.max_message_bytes = max_message_bytes;
    zactor_t *psd = zactor_new(psd_server_actor, &cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(psd);
    char *hello = zstr_recv(psd);
    CU_ASSERT_FATAL(hello && strncmp(hello, "READY ", 6) == 0);
    snprintf(endpoint, size, "%s", hello + 6);
    zstr_free(&hello);
    return psd;
}

uint64_t
zdist_test_psd_requests(zdist_ps_client_t *c, const char *name)
{
    zdist_ps_stats_t *st = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_ps_client_stats(c, &st, NULL), 0);
    uint64_t n = 0;
    for (size_t i = 0; i < st->nmethods; i++)
        if (strcmp(st->methods[i].name, name) == 0)
            n = st->methods[i].requests;
    zdist_ps_stats_destroy(&st);
    return n;
}
