/* CUnit suite: slurm — a Slurm step's allocation as TensorFlow's SlurmClusterResolver reads it (zdist/slurm.h),
   following tensorflow/python/distribute/cluster_resolver/slurm_cluster_resolver_test.py case by case. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zdist/cluster.h"
#include "zdist/slurm.h"

/* Expands and joins with spaces, or returns the error text. */
static char *
s_hosts(const char *list)
{
    static char out[4096];
    char **hosts = NULL;
    int n = 0;
    zdist_error_t err = {0};
    if (zdist_slurm_expand_hostlist(list, &hosts, &n, &err) < 0) {
        snprintf(out, sizeof out, "%s", err.text);
        return out;
    }
    out[0] = '\0';
    for (int i = 0; i < n; i++)
        strcat(strcat(out, i ? " " : ""), hosts[i]);
    CU_ASSERT_PTR_NULL(hosts[n]);
    free(hosts);
    return out;
}

static void
test_expand_hostlist(void)
{
    /* test_expand_hostlist */
    CU_ASSERT_STRING_EQUAL(s_hosts("n1"), "n1");
    CU_ASSERT_STRING_EQUAL(s_hosts("n[1,3]"), "n1 n3");
    CU_ASSERT_STRING_EQUAL(s_hosts("n[1-3]"), "n1 n2 n3");
    CU_ASSERT_STRING_EQUAL(s_hosts("n[1-2],m5,o[3-4,6,7-9]"), "n1 n2 m5 o3 o4 o6 o7 o8 o9");
    CU_ASSERT_STRING_EQUAL(s_hosts("n[0001-0003],m5,o[009-011]"), "n0001 n0002 n0003 m5 o009 o010 o011");
    /* The examples; a trailing comma is passed over, as TF's split does. */
    CU_ASSERT_STRING_EQUAL(s_hosts("node[1-3,7],gpu-[01-02]"), "node1 node2 node3 node7 gpu-01 gpu-02");
    CU_ASSERT_STRING_EQUAL(s_hosts("a,"), "a");
    /* Refusals in TF's outer text. */
    CU_ASSERT_STRING_EQUAL(s_hosts("n[1-2]x"), "Invalid hostlist format \"n[1-2]x\": Invalid part: n[1-2]x");
    CU_ASSERT_STRING_EQUAL(s_hosts(",a"), "Invalid hostlist format \",a\": an empty host");
    CU_ASSERT_STRING_EQUAL(s_hosts("n[1-a]"), "Invalid hostlist format \"n[1-a]\": a range is NUMBER or NUMBER-NUMBER");
    CU_ASSERT_STRING_EQUAL(s_hosts("n[[1]]"), "Invalid hostlist format \"n[[1]]\": '[' inside a range");
}

static char *
s_tasks(const char *text)
{
    static char out[1024];
    int *t = NULL, n = 0;
    zdist_error_t err = {0};
    if (zdist_slurm_expand_tasks_per_node(text, &t, &n, &err) < 0) {
        snprintf(out, sizeof out, "%s", err.text);
        return out;
    }
    out[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%d", i ? " " : "", t[i]);
    free(t);
    return out;
}

static void
test_expand_tasks_per_node(void)
{
    /* test_expand_tasks_per_node */
    CU_ASSERT_STRING_EQUAL(s_tasks("2"), "2");
    CU_ASSERT_STRING_EQUAL(s_tasks("2,1,3"), "2 1 3");
    CU_ASSERT_STRING_EQUAL(s_tasks("3(x2),2,1"), "3 3 2 1");
    CU_ASSERT_STRING_EQUAL(s_tasks("3(x2),2,11(x4)"), "3 3 2 11 11 11 11");
    CU_ASSERT_STRING_EQUAL(s_tasks("13(x10)"), "13 13 13 13 13 13 13 13 13 13");
    CU_ASSERT_STRING_EQUAL(s_tasks("2(x3"),
                           "Invalid tasks-per-node list format \"2(x3\": '2(x3' is not N or N(xM)");
    CU_ASSERT_STRING_EQUAL(s_tasks("2,,1"), "Invalid tasks-per-node list format \"2,,1\": '' is not N or N(xM)");
}

/* The TF_CONFIG for env and jobs ("ps=1,worker=2", or NULL for the default), or the error text. */
static char *
s_config(zdist_slurm_env_t env, const char *jobs_text, int port_base)
{
    static char out[4096];
    zdist_slurm_job_t jobs[ZDIST_SLURM_MAX_JOBS];
    int n = 0;
    zdist_error_t err = {0};
    char *json = NULL;
    if ((jobs_text && zdist_slurm_parse_jobs(jobs_text, jobs, ZDIST_SLURM_MAX_JOBS, &n, &err) < 0) ||
        zdist_slurm_tf_config(&env, jobs, n, port_base, &json, &err) < 0) {
        snprintf(out, sizeof out, "%s", err.text);
        return out;
    }
    snprintf(out, sizeof out, "%s", json);
    /* What the daemons do with it: it parses as TF_CONFIG. */
    zdist_cluster_t *c = zdist_cluster_parse(json, "slurm", &err);
    CU_ASSERT_PTR_NOT_NULL(c);
    zdist_cluster_destroy(&c);
    free(json);
    return out;
}

static void
test_cluster(void)
{
    /* testSimpleRetrievalFromEnv: jobs default to SLURM_STEP_NUM_TASKS workers. */
    zdist_slurm_env_t env = {.procid = "0", .num_tasks = "3", .tasks_per_node = "1(x3)",
                             .nodelist = "t02n13,t02n41,t02n43"};
    CU_ASSERT_STRING_EQUAL(s_config(env, NULL, 8888),
                           "{\"cluster\": {\"worker\": [\"t02n13:8888\", \"t02n41:8888\", \"t02n43:8888\"]}, "
                           "\"task\": {\"index\": 0, \"type\": \"worker\"}}");
    /* testSimpleSuccessfulRetrieval: tasks_per_node=1 given, no SLURM_STEP_TASKS_PER_NODE. */
    zdist_slurm_env_t fixed = {.procid = "0", .num_tasks = "3", .nodelist = "t02n13,t02n41,t02n43",
                               .fixed_tasks_per_node = 1};
    CU_ASSERT_STRING_EQUAL(s_config(fixed, "ps=1,worker=2", 8888),
                           "{\"cluster\": {\"ps\": [\"t02n13:8888\"], \"worker\": [\"t02n41:8888\", \"t02n43:8888\"]}, "
                           "\"task\": {\"index\": 0, \"type\": \"ps\"}}");
    /* testMultiTaskPerNodeRetrieval: rank 1 of 2(x2),1 is worker 0 on the first host's second port. */
    zdist_slurm_env_t multi = {.procid = "1", .num_tasks = "5", .tasks_per_node = "2(x2),1",
                               .nodelist = "t02n13,t02n41,t02n43"};
    CU_ASSERT_STRING_EQUAL(s_config(multi, "worker=4,ps=1", 8888),
                           "{\"cluster\": {\"ps\": [\"t02n13:8888\"], \"worker\": [\"t02n13:8889\", \"t02n41:8888\", "
                           "\"t02n41:8889\", \"t02n43:8888\"]}, \"task\": {\"index\": 0, \"type\": \"worker\"}}");
    /* Hosts sorted by name, jobs sorted by name (chief < ps < worker), a port base given. */
    zdist_slurm_env_t sorted = {.procid = "2", .tasks_per_node = "1,2", .nodelist = "b,a"};
    CU_ASSERT_STRING_EQUAL(s_config(sorted, "worker=1,ps=1,chief=1", 9000),
                           "{\"cluster\": {\"chief\": [\"a:9000\"], \"ps\": [\"a:9001\"], \"worker\": [\"b:9000\"]}, "
                           "\"task\": {\"index\": 0, \"type\": \"worker\"}}");
    /* Refusals: TF's texts where TF has one. */
    CU_ASSERT_STRING_EQUAL(s_config(multi, "ps=2,worker=4", 8888), "Requested 6 tasks but only 5 were assigned.");
    zdist_slurm_env_t none = {0};
    CU_ASSERT_STRING_EQUAL(s_config(none, "ps=1", 8888),
                           "SLURM_PROCID not found in environment. Not running inside a SLURM step?");
    zdist_slurm_env_t no_list = {.procid = "0"};
    CU_ASSERT_STRING_EQUAL(s_config(no_list, "ps=1", 8888),
                           "SLURM_STEP_NODELIST not found in environment. Not running inside a SLURM step?");
    zdist_slurm_env_t bad_rank = env;
    bad_rank.procid = "x";
    CU_ASSERT_STRING_EQUAL(s_config(bad_rank, NULL, 8888),
                           "invalid literal for int() with base 10: 'x' (SLURM_PROCID)");
    CU_ASSERT_STRING_EQUAL(s_config(multi, "ps=1,worker=4", 65535),
                           "--port-base 65535: host t02n13 would need port 65536, past 65535");
    zdist_slurm_env_t beyond = sorted;
    beyond.procid = "3";
    CU_ASSERT_STRING_EQUAL(s_config(beyond, "worker=1,ps=1,chief=1", 9000),
                           "SLURM_PROCID 3 is not one of the 3 tasks assigned");
    CU_ASSERT_STRING_EQUAL(s_config(env, "ps=1,ps=2", 8888), "--jobs: 'ps' is named twice");
    CU_ASSERT_STRING_EQUAL(s_config(env, "ps:1", 8888), "--jobs: 'ps:1' is not NAME=COUNT (e.g. --jobs ps=2,worker=4)");
}

void
zdist_test_slurm_register(void)
{
    ZDIST_SUITE("slurm", {"hostlists (TF's test_expand_hostlist and more)", test_expand_hostlist},
                {"tasks per node (TF's test_expand_tasks_per_node)", test_expand_tasks_per_node},
                {"the cluster and this task, as TF's resolver builds them", test_cluster});
}
