/* bench_allreduce: zdist's ring all-reduce across 2 and 3 processes against OpenMPI's MPI_Allreduce (TCP and shared memory), in the same run.

   For each ring size N (2, 3) and each size (1, 16, 64 MiB of float32),
   N child processes (forked, each with its own libzmq context, on free
   loopback ports) run zdist_comm_all_reduce(SUM); then bench_allreduce_mpi
   runs the same sizes under mpirun, once with the TCP transport
   (--mca btl tcp,self) and once with shared memory (--mca btl vader,self).
   Times are medians over the iterations of the slowest rank. Ratios are
   zdist / MPI time: the goal is <= 1.0 against MPI over TCP; the ratio to
   shared memory says how far a loopback TCP ring is from it. Nothing is
   asserted. When mpirun is missing or fails, only the zdist column is
   printed, saying so.

   usage: bench_allreduce [--quick] [--iters N] [--mpi PATH-TO-bench_allreduce_mpi] */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_raw.h"
#include "zdist/collective.h"
#include "zdist/parse.h"
#include "zdist/sys.h"

#define MAXN 3
#define MAXS 3

static int
s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One rank: writes "MIB SECONDS" lines (rank 0 only) to fd. */
static int
s_child(int rank, int n, char eps[][64], const int *mib, int nsizes, int iters, int fd)
{
    zdist_error_t err;
    zdist_comm_config_t cfg = {.rank = rank, .size = n, .bind = eps[rank], .timeout_ms = 60000};
    zdist_comm_t *c = zdist_comm_new(&cfg, &err);
    const char *e[MAXN];
    for (int i = 0; i < n; i++)
        e[i] = eps[i];
    if (!c || zdist_comm_connect(c, e, &err) < 0) {
        fprintf(stderr, "bench_allreduce: rank %d: %s\n", rank, err.text);
        return 1;
    }
    FILE *out = rank == 0 ? fdopen(fd, "w") : NULL;
    int rc = 0;
    for (int s = 0; s < nsizes && rc == 0; s++) {
        int64_t len = (int64_t)mib[s] * (1 << 20) / 4;
        float *buf = malloc((size_t)len * 4);
        for (int64_t i = 0; i < len; i++)
            buf[i] = (float)(i % 97) + (float)rank;
        double *t = calloc((size_t)iters, sizeof *t);
        rc = zdist_comm_all_reduce(c, ZDIST_REDUCE_SUM, &buf, &len, 1, 0, &err); /* warm-up */
        for (int it = 0; it < iters && rc == 0; it++) {
            float one = 0, *p = &one;
            int64_t l1 = 1;
            rc = zdist_comm_all_reduce(c, ZDIST_REDUCE_SUM, &p, &l1, 1, 0, &err); /* barrier */
            int64_t t0 = zdist_clock_now_us();
            if (rc == 0)
                rc = zdist_comm_all_reduce(c, ZDIST_REDUCE_SUM, &buf, &len, 1, 0, &err);
            double dt = (double)(zdist_clock_now_us() - t0) / 1e6;
            void *all = NULL;
            int64_t rows;
            if (rc == 0)
                rc = zdist_comm_all_gather(c, &dt, 1, sizeof dt, &all, &rows, NULL, 0, &err);
            if (rc == 0) {
                double mx = 0, *d = all;
                for (int64_t q = 0; q < rows; q++)
                    mx = d[q] > mx ? d[q] : mx;
                t[it] = mx;
            }
            free(all);
        }
        if (rc == 0 && out) {
            qsort(t, (size_t)iters, sizeof *t, s_cmp);
            fprintf(out, "%d %.6f\n", mib[s], t[iters / 2]);
        }
        free(t);
        free(buf);
    }
    if (rc)
        fprintf(stderr, "bench_allreduce: rank %d: %s\n", rank, err.text);
    if (out)
        fclose(out);
    zdist_comm_destroy(&c);
    return rc ? 1 : 0;
}

/* Runs the zdist ring on n forked processes; fills secs[s]; 0 or -1. */
static int
s_run_zdist(int n, const int *mib, int nsizes, int iters, double *secs)
{
    char eps[MAXN][64];
    for (int i = 0; i < n; i++)
        snprintf(eps[i], sizeof eps[i], "tcp://127.0.0.1:%d", bench_free_port());
    int p[2];
    if (pipe(p) < 0)
        return -1;
    pid_t pids[MAXN];
    fflush(stdout);
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            close(p[0]);
            _exit(s_child(r, n, eps, mib, nsizes, iters, p[1]));
        }
    }
    close(p[1]);
    FILE *in = fdopen(p[0], "r");
    int got = 0, m;
    double t;
    while (in && fscanf(in, "%d %lf", &m, &t) == 2)
        for (int s = 0; s < nsizes; s++)
            if (mib[s] == m) {
                secs[s] = t;
                got++;
            }
    if (in)
        fclose(in);
    int bad = 0;
    for (int r = 0; r < n; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return bad || got != nsizes ? -1 : 0;
}

/* Runs bench_allreduce_mpi under mpirun with one btl list; 0 or -1. */
static int
s_run_mpi(const char *mpi, int n, const char *btl, const int *mib, int nsizes, int iters, double *secs, char *why,
          size_t whylen)
{
    char cmd[1024];
    int o = snprintf(cmd, sizeof cmd,
                     "mpirun -np %d --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl %s "
                     "--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x ASAN_OPTIONS=detect_leaks=0 %s %d",
                     n, btl, mpi, iters);
    for (int s = 0; s < nsizes; s++)
        o += snprintf(cmd + o, sizeof cmd - (size_t)o, " %d", mib[s]);
    snprintf(cmd + o, sizeof cmd - (size_t)o, " 2>&1");
    fflush(stdout);
    FILE *f = popen(cmd, "r");
    if (!f) {
        snprintf(why, whylen, "cannot start mpirun");
        return -1;
    }
    char line[512];
    int got = 0;
    why[0] = 0;
    while (fgets(line, sizeof line, f)) {
        int m;
        double t;
        if (sscanf(line, "%d %lf", &m, &t) == 2) {
            for (int s = 0; s < nsizes; s++)
                if (mib[s] == m) {
                    secs[s] = t;
                    got++;
                }
        } else if (!why[0]) {
            line[strcspn(line, "\n")] = 0;
            size_t l = strlen(line) < whylen - 1 ? strlen(line) : whylen - 1;
            memcpy(why, line, l);
            why[l] = 0;
        }
    }
    int st = pclose(f);
    if (st != 0 || got != nsizes) {
        if (!why[0])
            snprintf(why, whylen, "mpirun exited with status %d", st);
        return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    bool quick = false;
    int64_t iters = 7;
    const char *mpi = NULL;
    static const struct option opts[] = {{"quick", no_argument, NULL, 'q'},
                                         {"iters", required_argument, NULL, 'i'},
                                         {"mpi", required_argument, NULL, 'm'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "qi:m:h", opts, NULL)) != -1) {
        if (c == 'q')
            quick = true;
        else if (c == 'i') {
            if (zdist_parse_int64(optarg, 1, 1000, &iters) < 0) {
                fprintf(stderr, "bench_allreduce: --iters wants 1..1000, got '%s'\n", optarg);
                return 2;
            }
        } else if (c == 'm')
            mpi = optarg;
        else {
            fprintf(stderr, "usage: bench_allreduce [--quick] [--iters N] [--mpi PATH]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    int mib_full[MAXS] = {1, 16, 64}, mib_quick[MAXS] = {1, 0, 0};
    const int *mib = quick ? mib_quick : mib_full;
    int nsizes = quick ? 1 : 3;
    if (quick)
        iters = 2;

    printf("ring all-reduce (SUM, float32), zdist vs OpenMPI MPI_Allreduce; median of %d, slowest rank\n",
           (int)iters);
    if (!mpi)
        printf("(MPI part not built: CMake found no MPI; zdist only)\n");
    printf("%2s %5s | %10s %8s | %10s %9s | %10s %9s\n", "N", "MiB", "zdist ms", "GB/s", "MPI-TCP ms",
           "zdist/TCP", "MPI-shm ms", "zdist/shm");
    int failed = 0;
    for (int n = 2; n <= 3; n++) {
        double z[MAXS] = {0}, tcp[MAXS] = {0}, shm[MAXS] = {0};
        char why_tcp[256] = "", why_shm[256] = "";
        if (s_run_zdist(n, mib, nsizes, (int)iters, z) < 0) {
            printf("%2d: zdist ring failed\n", n);
            failed = 1;
            continue;
        }
        int have_tcp = mpi && s_run_mpi(mpi, n, "tcp,self", mib, nsizes, (int)iters, tcp, why_tcp, sizeof why_tcp) == 0;
        int have_shm = mpi && s_run_mpi(mpi, n, "vader,self", mib, nsizes, (int)iters, shm, why_shm, sizeof why_shm) == 0;
        for (int s = 0; s < nsizes; s++) {
            double bytes = (double)mib[s] * (1 << 20);
            printf("%2d %5d | %10.2f %8.2f | ", n, mib[s], z[s] * 1e3, bytes / z[s] / 1e9);
            if (have_tcp)
                printf("%10.2f %9.2f | ", tcp[s] * 1e3, z[s] / tcp[s]);
            else
                printf("%10s %9s | ", "-", "-");
            if (have_shm)
                printf("%10.2f %9.2f\n", shm[s] * 1e3, z[s] / shm[s]);
            else
                printf("%10s %9s\n", "-", "-");
        }
        if (mpi && !have_tcp)
            printf("   MPI over TCP not runnable here: %s\n", why_tcp);
        if (mpi && !have_shm)
            printf("   MPI over shared memory not runnable here: %s\n", why_shm);
    }
    return failed;
}
