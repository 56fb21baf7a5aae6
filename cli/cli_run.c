/* zdist run: trains a job in this process by executing `zdist-worker run` — the worker's own code path, not a copy. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define S_WORKER "zdist-worker"

/* dir/name when it is an executable file. */
static bool
s_try(char *buf, size_t size, const char *dir, const char *name)
{
    int n = snprintf(buf, size, "%s/%s", dir, name);
    return n > 0 && (size_t)n < size && access(buf, X_OK) == 0;
}

/* The zdist-worker to run: $ZDIST_WORKER_BIN, then beside this program
   (installed: both in bindir), then in the build tree's worker/ folder,
   then PATH. Returns the path or the bare name for execvp. */
static const char *
s_find_worker(char *buf, size_t size)
{
    const char *env = getenv("ZDIST_WORKER_BIN");
    if (env && *env)
        return env;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            if (s_try(buf, size, self, S_WORKER))
                return buf;
            char tree[PATH_MAX + 16];
            snprintf(tree, sizeof tree, "%s/../worker", self);
            if (s_try(buf, size, tree, S_WORKER))
                return buf;
        }
    }
    return S_WORKER;
}

int
cli_run_main(int argc, char **argv)
{
    char path[PATH_MAX + 32];
    const char *worker = s_find_worker(path, sizeof path);
    /* argv is ("run", args..., NULL): zdist-worker takes the same words. */
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) {
        fprintf(stderr, "zdist run: out of memory\n");
        return CLI_EXIT_FAILED;
    }
    args[0] = (char *)worker;
    for (int i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    fflush(NULL);
    execvp(worker, args);
    int e = errno;
    free(args);
    fprintf(stderr, "zdist run: cannot run %s: %s; install zdist-worker beside zdist, put it on PATH or set "
            "ZDIST_WORKER_BIN\n", worker, strerror(e));
    return CLI_EXIT_FAILED;
}
