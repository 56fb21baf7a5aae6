/* zdist on Slurm: hostlists, tasks per node and the cluster they make, as
   TensorFlow's SlurmClusterResolver builds it. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/slurm.h"

#define S_HOST_MAX 256

int
zdist_slurm_parse_jobs(const char *text, zdist_slurm_job_t *jobs, int max, int *ret_n, zdist_error_t *err)
{
    int n = 0;
    const char *p = text ? text : "";
    if (!*p)
        return zdist_error_set(err, -EINVAL, "--jobs: give each job's task count, e.g. --jobs ps=2,worker=4");
    while (*p) {
        const char *eq = strchr(p, '='), *comma = strchr(p, ',');
        if (!comma)
            comma = p + strlen(p);
        if (!eq || eq > comma || eq == p)
            return zdist_error_set(err, -EINVAL, "--jobs: '%.*s' is not NAME=COUNT (e.g. --jobs ps=2,worker=4)",
                                   (int) (comma - p), p);
        if (n == max)
            return zdist_error_set(err, -EINVAL, "--jobs: at most %d jobs", max);
        size_t len = (size_t) (eq - p);
        if (len >= sizeof jobs[n].name)
            return zdist_error_set(err, -EINVAL, "--jobs: the job name '%.*s' is too long", (int) len, p);
        for (size_t i = 0; i < len; i++)
            if (!isalnum((unsigned char) p[i]) && p[i] != '_' && p[i] != '-')
                return zdist_error_set(err, -EINVAL, "--jobs: the job name '%.*s' may hold only letters, digits, _ and -",
                                       (int) len, p);
        memcpy(jobs[n].name, p, len);
        jobs[n].name[len] = '\0';
        char *end;
        errno = 0;
        long count = strtol(eq + 1, &end, 10);
        if (end == eq + 1 || end != comma || errno || count < 0 || count > ZDIST_SLURM_MAX_TASKS)
            return zdist_error_set(err, -EINVAL, "--jobs: the count of '%s' must be a whole number from 0 to %d",
                                   jobs[n].name, ZDIST_SLURM_MAX_TASKS);
        jobs[n].count = (int) count;
        for (int k = 0; k < n; k++)
            if (!strcmp(jobs[k].name, jobs[n].name))
                return zdist_error_set(err, -EINVAL, "--jobs: '%s' is named twice", jobs[n].name);
        n++;
        p = *comma ? comma + 1 : comma;
        if (*comma && !*p)
            return zdist_error_set(err, -EINVAL, "--jobs: a job is missing after the last ','");
    }
    *ret_n = n;
    return 0;
}

zdist_slurm_env_t
zdist_slurm_env_get(void)
{
    return (zdist_slurm_env_t){.procid = getenv("SLURM_PROCID"),
                               .nodelist = getenv("SLURM_STEP_NODELIST"),
                               .tasks_per_node = getenv("SLURM_STEP_TASKS_PER_NODE"),
                               .num_tasks = getenv("SLURM_STEP_NUM_TASKS")};
}

/* ------------------------------------------------------------------------ */
/* Hostlists                                                                  */

typedef struct {
    char (*names)[S_HOST_MAX];
    int n, cap;
} s_hosts_t;

static int
s_push(s_hosts_t *h, const char *prefix, size_t plen, const char *suffix)
{
    if (h->n == ZDIST_SLURM_MAX_TASKS)
        return -E2BIG;
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 16;
        void *names = realloc(h->names, (size_t) cap * sizeof *h->names);
        if (!names)
            return -ENOMEM;
        h->names = names;
        h->cap = cap;
    }
    if (plen + strlen(suffix) >= S_HOST_MAX)
        return -ENAMETOOLONG;
    snprintf(h->names[h->n++], S_HOST_MAX, "%.*s%s", (int) plen, prefix, suffix);
    return 0;
}

static bool
s_digits(const char *s, size_t n)
{
    if (n == 0 || n > 9)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char) s[i]))
            return false;
    return true;
}

/* One range expression's parts, "3-5,7": each a number or two; values keep
   the first bound's digits (Python's str(i).zfill(len(first))). */
static int
s_expand_range(s_hosts_t *h, const char *prefix, size_t plen, const char *r, size_t rlen, const char **why)
{
    for (const char *part = r; part < r + rlen;) {
        const char *end = memchr(part, ',', (size_t) (r + rlen - part));
        if (!end)
            end = r + rlen;
        const char *dash = memchr(part, '-', (size_t) (end - part));
        const char *lo = part, *hi = dash ? dash + 1 : part;
        size_t lo_len = (size_t) ((dash ? dash : end) - part), hi_len = (size_t) (end - hi);
        if ((dash && memchr(hi, '-', hi_len)) || !s_digits(lo, lo_len) || !s_digits(hi, hi_len))
            return *why = "a range is NUMBER or NUMBER-NUMBER", -EINVAL;
        long a = strtol(lo, NULL, 10), b = strtol(hi, NULL, 10);
        for (long i = a; i <= b; i++) {
            char num[32];
            snprintf(num, sizeof num, "%0*ld", (int) lo_len, i);
            int rc = s_push(h, prefix, plen, num);
            if (rc < 0)
                return *why = rc == -ENOMEM ? "out of memory" : "too many hosts, or a name too long", rc;
        }
        part = end + 1;
    }
    return 0;
}

/* One part: a prefix without ",[]" and at most one range in brackets, last. */
static int
s_expand_part(s_hosts_t *h, const char *part, size_t len, const char **why)
{
    const char *open = memchr(part, '[', len);
    size_t plen = open ? (size_t) (open - part) : len;
    if (memchr(part, ']', plen) || (open && (len < plen + 3 || part[len - 1] != ']' ||
                                              memchr(open + 1, ']', len - plen - 2))))
        return *why = "Invalid part", -EINVAL;
    if (!open) {
        int rc = s_push(h, part, plen, "");
        return rc < 0 ? (*why = "too many hosts, or a name too long", rc) : 0;
    }
    return s_expand_range(h, part, plen, open + 1, len - plen - 2, why);
}

static int
s_hostlist(const char *hostlist, s_hosts_t *h, zdist_error_t *err)
{
    const char *why = NULL, *bad = NULL;
    size_t bad_len = 0;
    int rc = 0, in_brackets = 0;
    const char *start = hostlist;
    for (const char *c = hostlist;; c++) {
        if (*c && in_brackets) {
            if (*c == '[') {
                why = "'[' inside a range", rc = -EINVAL;
                break;
            }
            in_brackets = *c != ']';
            continue;
        }
        if (*c == '[') {
            in_brackets = 1;
            continue;
        }
        if (*c != ',' && *c)
            continue;
        if (*c == ',' && c == start) {
            why = "an empty host", rc = -EINVAL;
            break;
        }
        if (c > start && (rc = s_expand_part(h, start, (size_t) (c - start), &why)) < 0) {
            bad = start, bad_len = (size_t) (c - start);
            break;
        }
        if (!*c)
            break;
        start = c + 1;
    }
    if (rc < 0 && bad && !strcmp(why, "Invalid part"))
        return zdist_error_set(err, rc, "Invalid hostlist format \"%s\": Invalid part: %.*s", hostlist, (int) bad_len,
                               bad);
    if (rc < 0)
        return zdist_error_set(err, rc, "Invalid hostlist format \"%s\": %s", hostlist, why);
    return 0;
}

int
zdist_slurm_expand_hostlist(const char *hostlist, char ***ret, int *ret_n, zdist_error_t *err)
{
    s_hosts_t h = {0};
    int rc = s_hostlist(hostlist ? hostlist : "", &h, err);
    char **out = NULL;
    if (rc == 0) {
        out = malloc((size_t) (h.n + 1) * sizeof *out + (size_t) h.n * S_HOST_MAX);
        if (!out)
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
    }
    if (rc == 0) {
        char *names = (char *) (out + h.n + 1);
        for (int i = 0; i < h.n; i++) {
            out[i] = names + (size_t) i * S_HOST_MAX;
            memcpy(out[i], h.names[i], S_HOST_MAX);
        }
        out[h.n] = NULL;
        *ret = out;
        *ret_n = h.n;
    }
    free(h.names);
    return rc;
}

int
zdist_slurm_expand_tasks_per_node(const char *text, int **ret, int *ret_n, zdist_error_t *err)
{
    int *out = NULL, n = 0, cap = 0;
    const char *p = text ? text : "";
    for (;;) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *q = p;
        while (q < end && isdigit((unsigned char) *q))
            q++;
        long count = q > p && q - p < 7 ? strtol(p, NULL, 10) : -1, times = 1;
        if (count >= 0 && q < end) { /* "(xN)" */
            const char *r = q + 2, *s = r;
            while (s < end && isdigit((unsigned char) *s))
                s++;
            bool ok = end - q >= 4 && q[0] == '(' && q[1] == 'x' && s > r && s - r < 7 && s + 1 == end && *s == ')';
            times = ok ? strtol(r, NULL, 10) : -1;
        }
        if (count < 0 || times < 0 || n + times > ZDIST_SLURM_MAX_TASKS) {
            free(out);
            return zdist_error_set(err, -EINVAL, "Invalid tasks-per-node list format \"%s\": '%.*s' is not N or N(xM)",
                                   text ? text : "", (int) (end - p), p);
        }
        if (n + times > cap) {
            cap = (int) (n + times) * 2;
            int *o = realloc(out, (size_t) cap * sizeof *o);
            if (!o) {
                free(out);
                return zdist_error_set(err, -ENOMEM, "out of memory");
            }
            out = o;
        }
        for (long i = 0; i < times; i++)
            out[n++] = (int) count;
        if (!*end)
            break;
        p = end + 1;
    }
    *ret = out;
    *ret_n = n;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The cluster                                                                */

typedef struct {
    const char *host;
    int tasks;
    int order; /* its place in the hostlist */
} s_node_t;

/* By host, then by place in the hostlist. */
static int
s_cmp_node(const void *a, const void *b)
{
    const s_node_t *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

static int
s_cmp_job(const void *a, const void *b)
{
    return strcmp(((const zdist_slurm_job_t *) a)->name, ((const zdist_slurm_job_t *) b)->name);
}

/* TF's dict(zip(hosts, counts)), sorted by host: a host named twice keeps
   its last count. Returns the node count. */
static int
s_nodes(char **hosts, int nhosts, const int *counts, int ncounts, s_node_t *nodes)
{
    int all = nhosts < ncounts ? nhosts : ncounts, n = 0;
    for (int i = 0; i < all; i++)
        nodes[i] = (s_node_t){hosts[i], counts[i], i};
    qsort(nodes, (size_t) all, sizeof *nodes, s_cmp_node);
    for (int i = 0; i < all; i++) /* the last of each run of one host */
        if (i + 1 == all || strcmp(nodes[i].host, nodes[i + 1].host))
            nodes[n++] = nodes[i];
    return n;
}

static int
s_rank(const char *procid, int *ret, zdist_error_t *err)
{
    if (!procid)
        return zdist_error_set(err, -EINVAL, "SLURM_PROCID not found in environment. Not running inside a SLURM step?");
    char *end;
    errno = 0;
    long r = strtol(procid, &end, 10);
    while (isspace((unsigned char) *end))
        end++;
    if (end == procid || *end || errno || r < 0 || r >= ZDIST_SLURM_MAX_TASKS)
        return zdist_error_set(err, -EINVAL, "invalid literal for int() with base 10: '%s' (SLURM_PROCID)", procid);
    *ret = (int) r;
    return 0;
}

/* Builds the JSON once the nodes and the rank are known. */
static int
s_tf_config(const s_node_t *nodes, int nnodes, zdist_slurm_job_t *jobs, int njobs, int port_base, int rank,
            char **ret, zdist_error_t *err)
{
    json_t *cluster = json_object(), *doc = NULL;
    int node = 0, offset = 0, at = 0, rc = 0;
    const char *type = NULL;
    int index = -1;
    qsort(jobs, (size_t) njobs, sizeof *jobs, s_cmp_job);
    for (int j = 0; j < njobs && rc == 0; j++) {
        json_t *list = json_array();
        for (int t = 0; t < jobs[j].count; t++, at++) {
            while (offset >= nodes[node].tasks)
                node++, offset = 0;
            if (port_base + offset > 65535) {
                rc = zdist_error_set(err, -EINVAL, "--port-base %d: host %s would need port %d, past 65535", port_base,
                                     nodes[node].host, port_base + offset);
                break;
            }
            char addr[S_HOST_MAX + 8];
            snprintf(addr, sizeof addr, "%s:%d", nodes[node].host, port_base + offset++);
            json_array_append_new(list, json_string(addr));
            if (at == rank)
                type = jobs[j].name, index = t;
        }
        if (jobs[j].count > 0)
            json_object_set_new(cluster, jobs[j].name, list);
        else
            json_decref(list);
    }
    if (rc == 0) {
        doc = json_pack("{s:o, s:{s:s, s:i}}", "cluster", cluster, "task", "type", type, "index", index);
        cluster = NULL;
        *ret = doc ? json_dumps(doc, JSON_SORT_KEYS) : NULL;
        if (!*ret)
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
    }
    json_decref(cluster);
    json_decref(doc);
    return rc;
}

int
zdist_slurm_tf_config(const zdist_slurm_env_t *env, const zdist_slurm_job_t *jobs_in, int njobs, int port_base,
                      char **ret, zdist_error_t *err)
{
    if (port_base < 1 || port_base > 65535)
        return zdist_error_set(err, -EINVAL, "--port-base must be from 1 to 65535 (got %d)", port_base);
    if (njobs < 0 || njobs > ZDIST_SLURM_MAX_JOBS)
        return zdist_error_set(err, -EINVAL, "--jobs: give at most %d jobs", ZDIST_SLURM_MAX_JOBS);
    int rank = 0;
    int rc = s_rank(env->procid, &rank, err);
    if (rc < 0)
        return rc;
    zdist_slurm_job_t jobs[ZDIST_SLURM_MAX_JOBS];
    memcpy(jobs, jobs_in, (size_t) njobs * sizeof *jobs);
    if (njobs == 0) { /* TF: jobs = {'worker': SLURM_STEP_NUM_TASKS} */
        char *end = NULL;
        long n = env->num_tasks ? strtol(env->num_tasks, &end, 10) : -1;
        if (!env->num_tasks)
            return zdist_error_set(err, -EINVAL,
                                   "SLURM_STEP_NUM_TASKS not found in environment. Not running inside a SLURM step?");
        if (end == env->num_tasks || *end || n < 0 || n > ZDIST_SLURM_MAX_TASKS)
            return zdist_error_set(err, -EINVAL, "invalid literal for int() with base 10: '%s' (SLURM_STEP_NUM_TASKS)",
                                   env->num_tasks);
        jobs[0] = (zdist_slurm_job_t){.name = "worker", .count = (int) n};
        njobs = 1;
    }
    if (!env->nodelist)
        return zdist_error_set(err, -EINVAL,
                               "SLURM_STEP_NODELIST not found in environment. Not running inside a SLURM step?");
    if (!env->tasks_per_node && env->fixed_tasks_per_node <= 0)
        return zdist_error_set(err, -EINVAL,
                               "SLURM_STEP_TASKS_PER_NODE not found in environment. Not running inside a SLURM step?");
    char **hosts = NULL;
    int *counts = NULL, nhosts = 0, ncounts = 0;
    rc = zdist_slurm_expand_hostlist(env->nodelist, &hosts, &nhosts, err);
    if (rc == 0 && env->fixed_tasks_per_node > 0) {
        counts = malloc((size_t) (nhosts + 1) * sizeof *counts);
        for (int i = 0; counts && i < nhosts; i++)
            counts[i] = env->fixed_tasks_per_node;
        ncounts = nhosts;
        if (!counts)
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
    } else if (rc == 0) {
        rc = zdist_slurm_expand_tasks_per_node(env->tasks_per_node, &counts, &ncounts, err);
    }
    s_node_t *nodes = rc == 0 ? calloc((size_t) nhosts + 1, sizeof *nodes) : NULL;
    if (rc == 0 && !nodes)
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
    if (rc == 0) {
        int nnodes = s_nodes(hosts, nhosts, counts, ncounts, nodes);
        long assigned = 0, requested = 0;
        for (int i = 0; i < nnodes; i++)
            assigned += nodes[i].tasks;
        for (int j = 0; j < njobs; j++)
            requested += jobs[j].count;
        if (nnodes == 0)
            rc = zdist_error_set(err, -EINVAL, "SLURM_STEP_NODELIST \"%s\" names no host", env->nodelist);
        else if (requested != assigned)
            rc = zdist_error_set(err, -EINVAL, "Requested %ld tasks but only %ld were assigned.", requested, assigned);
        else if (rank >= assigned)
            rc = zdist_error_set(err, -EINVAL, "SLURM_PROCID %d is not one of the %ld tasks assigned", rank, assigned);
        else
            rc = s_tf_config(nodes, nnodes, jobs, njobs, port_base, rank, ret, err);
    }
    free(nodes);
    free(hosts);
    free(counts);
    return rc;
}

int
zdist_slurm_resolve(const char *jobs_text, int port_base, int tasks_per_node, char **ret, zdist_error_t *err)
{
    zdist_slurm_job_t jobs[ZDIST_SLURM_MAX_JOBS];
    int njobs = 0;
    if (jobs_text) {
        int rc = zdist_slurm_parse_jobs(jobs_text, jobs, ZDIST_SLURM_MAX_JOBS, &njobs, err);
        if (rc < 0)
            return rc;
    }
    zdist_slurm_env_t env = zdist_slurm_env_get();
    env.fixed_tasks_per_node = tasks_per_node;
    return zdist_slurm_tf_config(&env, jobs, njobs, port_base ? port_base : 8888, ret, err);
}
