/* CUnit suite: TF_CONFIG cluster resolver (forms, master, roles, validation, strategies). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zdist/cluster.h"

/* Parses text as TF_CONFIG; asserts success. */
static zdist_cluster_t *
s_parse_ok(const char *text)
{
    zdist_error_t err = {0};
    zdist_cluster_t *c = zdist_cluster_parse(text, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL(c);
    if (!c)
        fprintf(stderr, "\nunexpected error: %s\n", err.text);
    return c;
}

/* Parses text; asserts it fails with -EINVAL and a message holding want. */
static void
s_parse_fails(const char *text, const char *want)
{
    zdist_error_t err = {0};
    zdist_cluster_t *c = zdist_cluster_parse(text, NULL, &err);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(err.code, -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "TF_CONFIG: "));
    CU_ASSERT_PTR_NULL(strchr(err.text, '\n'));
    if (!strstr(err.text, want))
        fprintf(stderr, "\nwanted '%s' in '%s'\n", want, err.text);
    zdist_cluster_destroy(&c);
}

static void
s_assert_master(const zdist_cluster_t *c, const char *want)
{
    char *m = zdist_cluster_master(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_STRING_EQUAL(m, want);
    free(m);
}

static void
test_list_job(void)
{
    zdist_cluster_t *c =
        s_parse_ok("{\"cluster\": {\"worker\": [\"w0:2222\", \"w1:2222\"], "
                   "\"chief\": [\"c:2222\"]}, \"task\": {\"type\": \"worker\", \"index\": 1}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(zdist_cluster_num_jobs(c), 2);
    CU_ASSERT_STRING_EQUAL(zdist_cluster_job_name(c, 0), "chief"); /* sorted */
    CU_ASSERT_STRING_EQUAL(zdist_cluster_job_name(c, 1), "worker");
    CU_ASSERT_PTR_NULL(zdist_cluster_job_name(c, 2));
    CU_ASSERT_TRUE(zdist_cluster_has_job(c, "worker"));
    CU_ASSERT_FALSE(zdist_cluster_has_job(c, "ps"));
    CU_ASSERT_FALSE(zdist_cluster_job_is_sparse(c, "worker"));
    CU_ASSERT_EQUAL(zdist_cluster_num_tasks(c, "worker"), 2);
    CU_ASSERT_EQUAL(zdist_cluster_num_tasks(c, "ps"), 0);
    int index = -7;
    const char *addr = NULL;
    CU_ASSERT_EQUAL(zdist_cluster_job_task(c, "worker", 1, &index, &addr), 0);
    CU_ASSERT_EQUAL(index, 1);
    CU_ASSERT_STRING_EQUAL(addr, "w1:2222");
    CU_ASSERT_EQUAL(zdist_cluster_job_task(c, "worker", 2, &index, &addr), -ENOENT);
    CU_ASSERT_EQUAL(zdist_cluster_job_task(c, "ps", 0, NULL, NULL), -ENOENT);
    CU_ASSERT_STRING_EQUAL(zdist_cluster_task_address(c, "worker", 0), "w0:2222");
    CU_ASSERT_PTR_NULL(zdist_cluster_task_address(c, "worker", 2));
    CU_ASSERT_PTR_NULL(zdist_cluster_task_address(c, "worker", -1));
    CU_ASSERT_STRING_EQUAL(zdist_cluster_task_type(c), "worker");
    CU_ASSERT_EQUAL(zdist_cluster_task_id(c), 1);
    CU_ASSERT_TRUE(zdist_cluster_has_task(c));
    CU_ASSERT_PTR_NULL(zdist_cluster_rpc_layer(c));
    s_assert_master(c, "w1:2222");
    zdist_cluster_destroy(&c);
    CU_ASSERT_PTR_NULL(c);
    zdist_cluster_destroy(&c); /* idempotent */
    zdist_cluster_destroy(NULL);
}

static void
test_sparse_job(void)
{
    zdist_cluster_t *c =
        s_parse_ok("{\"cluster\": {\"ps\": {\"10\": \"p10:1\", \"2\": \"p2:1\", \"0\": \"p0:1\"}, "
                   "\"worker\": [\"w0:1\"]}, \"task\": {\"type\": \"ps\", \"index\": 10}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_TRUE(zdist_cluster_job_is_sparse(c, "ps"));
    CU_ASSERT_EQUAL(zdist_cluster_num_tasks(c, "ps"), 3); /* len(), as TF */
    int idx[3] = {-1, -1, -1};
    for (size_t i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(zdist_cluster_job_task(c, "ps", i, &idx[i], NULL), 0);
    CU_ASSERT_EQUAL(idx[0], 0); /* numeric order, not text order */
    CU_ASSERT_EQUAL(idx[1], 2);
    CU_ASSERT_EQUAL(idx[2], 10);
    CU_ASSERT_STRING_EQUAL(zdist_cluster_task_address(c, "ps", 2), "p2:1");
    CU_ASSERT_PTR_NULL(zdist_cluster_task_address(c, "ps", 1));
    s_assert_master(c, "p10:1");
    CU_ASSERT_FALSE(zdist_cluster_is_chief(c));
    CU_ASSERT_EQUAL(zdist_cluster_id_in_cluster(c), -1);
    CU_ASSERT_FALSE(zdist_cluster_has_id_in_cluster(c));
    char *json = zdist_cluster_to_json(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"ps\":{\"0\":\"p0:1\",\"2\":\"p2:1\",\"10\":\"p10:1\"}"));
    free(json);
    zdist_cluster_destroy(&c);

    /* The task index must be a key of a sparse job. */
    s_parse_fails("{\"cluster\": {\"ps\": {\"0\": \"p0:1\", \"2\": \"p2:1\"}}, \"task\": {\"type\": \"ps\", "
                  "\"index\": 1}}",
                  "task.index: job 'ps' has no task 1 (its task indices: 0, 2)");
}

static void
test_task_forms(void)
{
    /* Numeric task type becomes its str(). */
    zdist_cluster_t *c =
        s_parse_ok("{\"cluster\": {\"1\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": 1, \"index\": 0}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(zdist_cluster_task_type(c), "1");
    s_assert_master(c, "a:1");
    zdist_cluster_destroy(&c);
    /* A float type is Python's str(float). */
    s_parse_fails("{\"task\": {\"type\": 1.0, \"index\": 0}}", "task.type: '1.0' is not a job");
    s_parse_fails("{\"task\": {\"type\": 1e16, \"index\": 0}}", "task.type: '1e+16' is not a job");
    s_parse_fails("{\"task\": {\"type\": 0.0001, \"index\": 0}}", "task.type: '0.0001' is not a job");
    /* A string index of digits is accepted. */
    c = s_parse_ok("{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": \"worker\", "
                   "\"index\": \"1\"}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(zdist_cluster_task_id(c), 1);
    zdist_cluster_destroy(&c);
    /* Other top-level and task keys (Cloud ML Engine sets them) are ignored. */
    c = s_parse_ok(
        "{\"cluster\": {\"master\": [\"m:1\"], \"worker\": [\"a:1\"]}, \"environment\": \"cloud\", "
        "\"job\": {}, \"task\": {\"type\": \"master\", \"index\": 0, \"trial\": \"1\"}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    s_assert_master(c, "m:1");
    zdist_cluster_destroy(&c);
}

static void
test_rpc_layer_and_session_master(void)
{
    zdist_cluster_t *c = s_parse_ok("{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": "
                                    "\"worker\", \"index\": 1}, \"rpc_layer\": \"grpc\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(zdist_cluster_rpc_layer(c), "grpc");
    s_assert_master(c, "grpc://b:1");
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_cluster_set_rpc_layer(c, "grpc+verbs", &err), 0);
    s_assert_master(c, "grpc+verbs://b:1");
    CU_ASSERT_EQUAL(zdist_cluster_set_rpc_layer(c, "bad layer", &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "'bad layer' is not a protocol name"));
    CU_ASSERT_STRING_EQUAL(zdist_cluster_rpc_layer(c), "grpc+verbs"); /* unchanged */
    CU_ASSERT_EQUAL(zdist_cluster_set_rpc_layer(c, "", &err), 0);
    CU_ASSERT_PTR_NULL(zdist_cluster_rpc_layer(c));
    s_assert_master(c, "b:1");
    zdist_cluster_destroy(&c);

    /* "" is no rpc_layer, as TF's `if rpc_layer:`. */
    c = s_parse_ok(
        "{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}, "
        "\"rpc_layer\": \"\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NULL(zdist_cluster_rpc_layer(c));
    s_assert_master(c, "a:1");
    zdist_cluster_destroy(&c);

    /* session_master wins over everything, as in TFConfigClusterResolver.master(). */
    c = s_parse_ok(
        "{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}, "
        "\"rpc_layer\": \"grpc\", \"session_master\": \"grpc://elsewhere:9\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(zdist_cluster_session_master(c), "grpc://elsewhere:9");
    s_assert_master(c, "grpc://elsewhere:9");
    zdist_cluster_destroy(&c);
}

static void
test_no_task_no_cluster_empty(void)
{
    /* No task: master "" and no roles. */
    zdist_cluster_t *c = s_parse_ok("{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NULL(zdist_cluster_task_type(c));
    CU_ASSERT_EQUAL(zdist_cluster_task_id(c), -1);
    CU_ASSERT_FALSE(zdist_cluster_has_task(c));
    s_assert_master(c, "");
    CU_ASSERT_FALSE(zdist_cluster_is_chief(c));
    CU_ASSERT_EQUAL(zdist_cluster_id_in_cluster(c), -1);
    CU_ASSERT_EQUAL(zdist_cluster_worker_count(c), 2);
    char buf[64];
    CU_ASSERT_EQUAL(zdist_cluster_bind_endpoint(c, buf, sizeof buf), -ENOENT);
    zdist_cluster_destroy(&c);

    /* Type without index: still no task. */
    c = s_parse_ok("{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": \"worker\"}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(zdist_cluster_task_type(c), "worker");
    CU_ASSERT_FALSE(zdist_cluster_has_task(c));
    s_assert_master(c, "");
    zdist_cluster_destroy(&c);

    /* No cluster, and the empty config. */
    const char *empties[] = {"{}", "{\"rpc_layer\": \"grpc\"}", " { } "};
    for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++) {
        c = s_parse_ok(empties[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        CU_ASSERT_EQUAL(zdist_cluster_num_jobs(c), 0);
        s_assert_master(c, "");
        CU_ASSERT_EQUAL(zdist_cluster_worker_count(c), 0);
        char *json = zdist_cluster_to_json(c);
        CU_ASSERT_PTR_NOT_NULL_FATAL(json);
        CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"cluster\":{}"));
        free(json);
        zdist_cluster_destroy(&c);
    }
    /* One job with one task: TF's master() is "" (the only job). */
    c = s_parse_ok("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    s_assert_master(c, "");
    CU_ASSERT_EQUAL(zdist_cluster_bind_endpoint(c, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "tcp://*:1");
    zdist_cluster_destroy(&c);
}

typedef struct {
    const char *task; /* "type", index */
    int index;
    bool is_chief;
    int id;
    int worker_count;
} s_role_case_t;

static void
s_check_roles(const char *cluster_json, const s_role_case_t *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char text[512];
        snprintf(text, sizeof text, "{\"cluster\": %s, \"task\": {\"type\": \"%s\", \"index\": %d}}",
                 cluster_json, cases[i].task, cases[i].index);
        zdist_cluster_t *c = s_parse_ok(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        CU_ASSERT_EQUAL(zdist_cluster_is_chief(c), cases[i].is_chief);
        CU_ASSERT_EQUAL(zdist_cluster_id_in_cluster(c), cases[i].id);
        CU_ASSERT_EQUAL(zdist_cluster_has_id_in_cluster(c), cases[i].id >= 0);
        CU_ASSERT_EQUAL(zdist_cluster_worker_count(c), cases[i].worker_count);
        if (zdist_cluster_is_chief(c) != cases[i].is_chief || zdist_cluster_id_in_cluster(c) != cases[i].id ||
            zdist_cluster_worker_count(c) != cases[i].worker_count)
            fprintf(stderr, "\nrole mismatch for %s:%d in %s\n", cases[i].task, cases[i].index, cluster_json);
        zdist_cluster_destroy(&c);
    }
}

static void
test_roles_matrix(void)
{
    static const s_role_case_t with_chief[] = {
        {"chief", 0, true, 0, 4},     {"worker", 0, false, 1, 4}, {"worker", 1, false, 2, 4},
        {"worker", 2, false, 3, 4},   {"ps", 0, false, -1, 4},    {"ps", 1, false, -1, 4},
        {"evaluator", 0, true, 0, 1},
    };
    s_check_roles("{\"chief\": [\"c:1\"], \"worker\": [\"w0:1\", \"w1:1\", \"w2:1\"], \"ps\": [\"p0:1\", "
                  "\"p1:1\"], \"evaluator\": [\"e:1\"]}",
                  with_chief, sizeof with_chief / sizeof with_chief[0]);
    static const s_role_case_t no_chief[] = {
        {"worker", 0, true, 0, 2},
        {"worker", 1, false, 1, 2},
        {"ps", 0, false, -1, 2},
        {"evaluator", 0, true, 0, 0}, /* evaluator outside the cluster: TF allows it */
    };
    s_check_roles("{\"worker\": [\"w0:1\", \"w1:1\"], \"ps\": [\"p0:1\"]}", no_chief,
                  sizeof no_chief / sizeof no_chief[0]);
    static const s_role_case_t other[] = {{"master", 0, false, -1, 1}};
    s_check_roles("{\"master\": [\"m:1\"], \"worker\": [\"w0:1\"]}", other, 1);
}

static void
test_validation_errors(void)
{
    static const struct {
        const char *text;
        const char *want;
    } cases[] = {
        {"[]", "the top level must be an object"},
        {"{\"cluster\": []}", "cluster: must be an object mapping job names"},
        {"{\"cluster\": null}", "cluster: must be an object"},
        {"{\"cluster\": {\"worker\": \"a:1\"}}", "cluster.worker: a job must be a list of addresses"},
        {"{\"cluster\": {\"worker\": [\"a:1\", 5]}}", "cluster.worker[1]: an address must be a string"},
        {"{\"cluster\": {\"worker\": [\"a:1\", \"b\"]}}",
         "cluster.worker[1]: 'b' is not a valid address: it has no ':port'"},
        {"{\"cluster\": {\"worker\": [\"a:0\"]}}",
         "cluster.worker[0]: 'a:0' is not a valid address: port 0 is not allowed"},
        {"{\"cluster\": {\"worker\": [\"a:65536\"]}}", "out of range 1..65535"},
        {"{\"cluster\": {\"worker\": [\"a:http\"]}}", "the port is not a number"},
        {"{\"cluster\": {\"worker\": [\":1\"]}}", "the host is empty"},
        {"{\"cluster\": {\"worker\": [\"\"]}}", "it is empty"},
        {"{\"cluster\": {\"worker\": [\"::1:5\"]}}", "an IPv6 host needs brackets"},
        {"{\"cluster\": {\"worker\": [\"[::g]:5\"]}}", "the host inside [] is not an IPv6 address"},
        {"{\"cluster\": {\"worker\": [\"[::1]\"]}}", "must be followed by ':port'"},
        {"{\"cluster\": {\"worker\": [\"1.2.3.999:5\"]}}", "the host is not an IPv4 address"},
        {"{\"cluster\": {\"worker\": [\"bad host:5\"]}}", "the host is not a valid host name"},
        {"{\"cluster\": {\"worker\": [\"grpc://a:5\"]}}", "drop the 'grpc://' prefix"},
        {"{\"cluster\": {\"worker\": [\"a\\nb:5\"]}}", "'a\\x0ab:5'"},
        {"{\"cluster\": {\"ps\": {\"x\": \"a:1\"}}}", "cluster.ps: key 'x' is not a task index"},
        {"{\"cluster\": {\"ps\": {\"-1\": \"a:1\"}}}", "cluster.ps: key '-1' is not a task index"},
        {"{\"cluster\": {\"ps\": {\"1\": \"a:1\", \"01\": \"b:1\"}}}",
         "cluster.ps: task index 1 is given twice"},
        {"{\"cluster\": {\"ps\": {\"3\": 7}}}", "cluster.ps[\"3\"]: an address must be a string"},
        {"{\"cluster\": {\"bad/job\": [\"a:1\"]}}", "cluster: job name 'bad/job' is not valid"},
        {"{\"cluster\": {\"worker\": [\"a:1\"], \"ps\": [\"A:1\"]}}",
         "cluster.worker[0]: address 'a:1' is already used by cluster.ps[0]"},
        {"{\"cluster\": {\"worker\": [\"a:1\", \"a:1\"]}}",
         "cluster.worker[1]: address 'a:1' is already used by cluster.worker[0]"},
        {"{\"task\": []}", "task: must be an object"},
        {"{\"task\": {\"type\": true}}", "task.type: must be a job name like \"worker\", got a boolean"},
        {"{\"task\": {\"type\": null}}", "task.type: must be a job name"},
        {"{\"task\": {\"type\": \"\"}}", "task.type: is empty"},
        {"{\"task\": {\"index\": -1}}", "task.index: -1 is out of range"},
        {"{\"task\": {\"index\": 1.5}}", "task.index: must be an integer >= 0"},
        {"{\"task\": {\"index\": \"1x\"}}", "task.index: '1x' is not a task index"},
        {"{\"task\": {\"index\": \" 1\"}}", "task.index: ' 1' is not a task index"},
        {"{\"task\": {\"index\": 4294967296}}", "task.index: 4294967296 is out of range"},
        {"{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"wrker\", \"index\": 0}}",
         "task.type: 'wrker' is not a job of the cluster (jobs: 'worker')"},
        {"{\"task\": {\"type\": \"worker\", \"index\": 0}}", "(jobs: none, the cluster is empty)"},
        {"{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 2}}",
         "task.index: job 'worker' has no task 2 (its task indices: 0..1); use one of those or add the "
         "address to "
         "cluster.worker"},
        {"{\"cluster\": {\"evaluator\": [\"e:1\"]}, \"task\": {\"type\": \"evaluator\", \"index\": 1}}",
         "task.index: job 'evaluator' has no task 1"},
        {"{\"rpc_layer\": 3}", "rpc_layer: must be a string"},
        {"{\"rpc_layer\": \"g rpc\"}", "rpc_layer: 'g rpc' is not a protocol name"},
        {"{\"session_master\": 3}", "session_master: must be a string"},
        {"{\"cluster\": {\"worker\": [\"a:1\"], \"worker\": [\"b:1\"]}}", "duplicate object key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        s_parse_fails(cases[i].text, cases[i].want);

    /* Good address forms. */
    zdist_cluster_t *c =
        s_parse_ok("{\"cluster\": {\"worker\": [\"[::1]:1\", \"[fe80::1%eth0]:2\", \"10.0.0.1:3\", "
                   "\"w-1.svc.cluster.local.:4\", \"localhost:65535\"]}}");
    CU_ASSERT_EQUAL(zdist_cluster_num_tasks(c, "worker"), 5);
    zdist_cluster_destroy(&c);

    /* Long values are cut in messages. */
    char text[1024];
    char long_addr[400];
    memset(long_addr, 'x', sizeof long_addr - 1);
    long_addr[sizeof long_addr - 1] = '\0';
    snprintf(text, sizeof text, "{\"cluster\": {\"worker\": [\"%s\"]}}", long_addr);
    s_parse_fails(text, "...' is not a valid address: it is longer than 300 characters");
    /* ... and never in the middle of a UTF-8 sequence. */
    char utf8[128] = "a";
    for (int i = 0; i < 30; i++)
        strcat(utf8, "\xc3\xa9");
    snprintf(text, sizeof text, "{\"cluster\": {\"worker\": [\"%s:1\"]}}", utf8);
    s_parse_fails(text, "\xc3\xa9...' is not a valid address: the host is not a valid host name");
}

static void
test_broken_json(void)
{
    zdist_error_t err = {0};
    zdist_cluster_t *c =
        zdist_cluster_parse("{\"cluster\": {\n  \"worker\": [\"a:1\",\n     \"b:1\" x]}}", NULL, &err);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(err.code, -EINVAL);
    CU_ASSERT_EQUAL(err.line, 3);
    CU_ASSERT_EQUAL(err.column, 12); /* the x */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "TF_CONFIG: invalid JSON at line 3, column 12: "));

    c = zdist_cluster_parse("{\"task\": ", "cluster file 'x.json'", &err);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(err.line, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "cluster file 'x.json': invalid JSON at line 1"));

    /* A later, non-JSON error does not keep a stale position. */
    c = zdist_cluster_parse("{\"task\": []}", NULL, &err);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(err.line, 0);
    CU_ASSERT_EQUAL(err.column, 0);

    CU_ASSERT_PTR_NULL(zdist_cluster_parse(NULL, NULL, &err));
    CU_ASSERT_EQUAL(err.code, -EINVAL);
    CU_ASSERT_PTR_NULL(zdist_cluster_parse("{", NULL, NULL)); /* err may be NULL */
}

static void
test_env_and_file(void)
{
    const char *saved = getenv("TF_CONFIG");
    char *saved_copy = saved ? strdup(saved) : NULL;
    zdist_error_t err = {0};

    /* Missing and blank TF_CONFIG = empty config. */
    unsetenv("TF_CONFIG");
    zdist_cluster_t *c = zdist_cluster_from_env_or_file(NULL, &err);
    CU_ASSERT_PTR_NOT_NULL(c);
    CU_ASSERT_EQUAL(zdist_cluster_num_jobs(c), 0);
    zdist_cluster_destroy(&c);
    setenv("TF_CONFIG", "  ", 1);
    c = zdist_cluster_from_env_or_file(NULL, &err);
    CU_ASSERT_PTR_NOT_NULL(c);
    zdist_cluster_destroy(&c);

    setenv("TF_CONFIG",
           "{\"cluster\": {\"worker\": [\"127.0.0.1:5001\", \"localhost:5002\"], \"ps\": [\"p:5003\"]}, "
           "\"task\": {\"type\": \"worker\", \"index\": 0}}",
           1);
    c = zdist_cluster_from_env_or_file(NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(zdist_cluster_task_type(c), "worker");
    char buf[64];
    CU_ASSERT_EQUAL(zdist_cluster_bind_endpoint(c, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "tcp://127.0.0.1:5001");
    CU_ASSERT_EQUAL(zdist_cluster_endpoint(c, "ps", 0, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "tcp://p:5003");
    CU_ASSERT_EQUAL(zdist_cluster_endpoint(c, "ps", 1, buf, sizeof buf), -ENOENT);
    CU_ASSERT_EQUAL(zdist_cluster_endpoint(c, "ps", 0, buf, 5), -ENOSPC);
    CU_ASSERT_STRING_EQUAL(buf, "");
    zdist_cluster_destroy(&c);

    /* load: --task overrides, even when the config's task is not in the cluster. */
    setenv("TF_CONFIG",
           "{\"cluster\": {\"worker\": [\"a:1\", \"localhost:2\"]}, \"task\": {\"type\": \"ps\", "
           "\"index\": 9}}",
           1);
    CU_ASSERT_PTR_NULL(zdist_cluster_from_env_or_file(NULL, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "TF_CONFIG: task.type: 'ps' is not a job"));
    c = NULL;
    CU_ASSERT_EQUAL(zdist_cluster_load(NULL, "worker:1", &c, &err), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(zdist_cluster_task_id(c), 1);
    CU_ASSERT_EQUAL(zdist_cluster_bind_endpoint(c, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "tcp://127.0.0.1:2");
    zdist_cluster_destroy(&c);
    static const struct {
        const char *spec;
        const char *want;
    } bad[] = {
        {"worker", "task 'worker': write TYPE:INDEX"},
        {":1", "task ':1': write TYPE:INDEX"},
        {"worker:x", "the index 'x' is not an integer >= 0"},
        {"worker:-1", "the index '-1' is not an integer >= 0"},
        {"worker:2", "task 'worker:2': job 'worker' has no task 2"},
        {"ps:0", "task 'ps:0': 'ps' is not a job of the cluster"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = NULL;
        CU_ASSERT_EQUAL(zdist_cluster_load(NULL, bad[i].spec, &c, &err), -EINVAL);
        CU_ASSERT_PTR_NULL(c);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, bad[i].want));
        if (!strstr(err.text, bad[i].want))
            fprintf(stderr, "\nwanted '%s' in '%s'\n", bad[i].want, err.text);
    }
    /* An evaluator outside the cluster is accepted (TF allows it). */
    CU_ASSERT_EQUAL(zdist_cluster_load(NULL, "evaluator:0", &c, &err), 0);
    CU_ASSERT_TRUE(zdist_cluster_is_chief(c));
    CU_ASSERT_EQUAL(zdist_cluster_bind_endpoint(c, buf, sizeof buf), -ENOENT);
    s_assert_master(c, "");
    /* set_task failing leaves the task as it was. */
    CU_ASSERT_EQUAL(zdist_cluster_set_task(c, "worker", 5, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(zdist_cluster_task_type(c), "evaluator");
    CU_ASSERT_EQUAL(zdist_cluster_set_task(c, "worker", 0, &err), 0);
    s_assert_master(c, "a:1");
    zdist_cluster_destroy(&c);

    /* The file wins over TF_CONFIG. */
    char *dir = zdist_test_tmpdir("cluster");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char path[512];
    snprintf(path, sizeof path, "%s/cluster.json", dir);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("{\"cluster\": {\"chief\": [\"c:7\"], \"worker\": [\"w:8\"]},\n \"task\": {\"type\": \"chief\", "
          "\"index\": 0}}\n",
          f);
    fclose(f);
    c = zdist_cluster_from_env_or_file(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(zdist_cluster_task_type(c), "chief");
    CU_ASSERT_TRUE(zdist_cluster_is_chief(c));
    zdist_cluster_destroy(&c);
    /* Errors name the file. */
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("{\"cluster\": {\"worker\": [\"w:8\"]}}\n{", f);
    fclose(f);
    CU_ASSERT_PTR_NULL(zdist_cluster_from_env_or_file(path, &err));
    CU_ASSERT_EQUAL(err.line, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "cluster file '"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "cluster.json': invalid JSON at line 2"));
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    CU_ASSERT_PTR_NULL(zdist_cluster_from_env_or_file(path, &err));
    CU_ASSERT_EQUAL(err.code, -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "cluster.json': is empty"));
    snprintf(path, sizeof path, "%s/missing.json", dir);
    CU_ASSERT_PTR_NULL(zdist_cluster_from_env_or_file(path, &err));
    CU_ASSERT_EQUAL(err.code, -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "missing.json': cannot open: No such file or directory"));
    CU_ASSERT_PTR_NULL(zdist_cluster_from_env_or_file(dir, &err));
    CU_ASSERT_EQUAL(err.code, -EISDIR);
    CU_ASSERT_EQUAL(zdist_cluster_load(path, NULL, &c, &err), -ENOENT);
    zdist_test_rmtree(dir);
    free(dir);

    if (saved_copy)
        setenv("TF_CONFIG", saved_copy, 1);
    else
        unsetenv("TF_CONFIG");
    free(saved_copy);
}

static void
s_validate_fails(const char *cluster_json, zdist_strategy_t s, const char *want)
{
    char text[512];
    snprintf(text, sizeof text, "{\"cluster\": %s}", cluster_json);
    zdist_cluster_t *c = s_parse_ok(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_cluster_validate(c, s, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
    if (!strstr(err.text, want))
        fprintf(stderr, "\nwanted '%s' in '%s'\n", want, err.text);
    zdist_cluster_destroy(&c);
}

static void
s_validate_ok(const char *cluster_json, zdist_strategy_t s)
{
    char text[512];
    snprintf(text, sizeof text, "{\"cluster\": %s}", cluster_json);
    zdist_cluster_t *c = s_parse_ok(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_cluster_validate(c, s, &err), 0);
    zdist_cluster_destroy(&c);
}

static void
test_strategies(void)
{
    const zdist_strategy_t PS = ZDIST_STRATEGY_PARAMETER_SERVER, MWM = ZDIST_STRATEGY_MULTI_WORKER_MIRRORED;
    s_validate_ok(
        "{\"chief\": [\"c:1\"], \"worker\": [\"w:1\"], \"ps\": [\"p:1\"], \"evaluator\": [\"e:1\"]}", PS);
    s_validate_ok("{\"worker\": [\"w:1\"], \"ps\": {\"3\": \"p:1\"}}", PS);
    s_validate_fails("{\"worker\": [\"w:1\"]}", PS, "TF_CONFIG: cluster.ps: There must be at least one ps.");
    s_validate_fails("{\"ps\": [\"p:1\"]}", PS, "cluster.worker: There must be at least one worker.");
    s_validate_fails("{\"ps\": [\"p:1\"], \"worker\": []}", PS, "There must be at least one worker.");
    s_validate_fails("{}", PS, "There must be at least one ps.");
    s_validate_fails("{\"chief\": [\"c:1\", \"c:2\"], \"worker\": [\"w:1\"], \"ps\": [\"p:1\"]}", PS,
                     "cluster.chief: There must be at most one 'chief' job (it has 2 tasks)");
    s_validate_fails("{\"evaluator\": [\"e:1\", \"e:2\"], \"worker\": [\"w:1\"], \"ps\": [\"p:1\"]}", PS,
                     "cluster.evaluator: There must be at most one 'evaluator' job");
    s_validate_fails(
        "{\"master\": [\"m:1\"], \"worker\": [\"w:1\"], \"ps\": [\"p:1\"]}", PS,
        "cluster.master: Disallowed task type found in cluster spec: 'master'. Allowed types are "
        "'chief', 'worker', 'ps' and 'evaluator' and the cluster spec has jobs 'master', 'ps', "
        "'worker'; remove or rename job 'master'");

    s_validate_ok("{\"worker\": [\"w:1\", \"w:2\"]}", MWM);
    s_validate_ok("{\"chief\": [\"c:1\"], \"worker\": [\"w:1\"], \"custom\": [\"x:1\"]}", MWM);
    s_validate_fails("{\"chief\": [\"c:1\"]}", MWM, "There must be at least one worker.");
    s_validate_fails("{\"chief\": [\"c:1\", \"c:2\"], \"worker\": [\"w:1\"]}", MWM,
                     "There must be at most one 'chief' job");

    s_validate_ok("{}", ZDIST_STRATEGY_MIRRORED);
    s_validate_ok("{}", ZDIST_STRATEGY_ONE_DEVICE);
    s_validate_ok("{\"worker\": [\"w:1\"]}", ZDIST_STRATEGY_CENTRAL_STORAGE);
    s_validate_fails("{\"chief\": [\"c:1\", \"c:2\"]}", ZDIST_STRATEGY_MIRRORED, "at most one 'chief'");
    s_validate_fails("{}", ZDIST_STRATEGY_INVALID, "unknown strategy -1");

    /* Names. */
    for (int s = ZDIST_STRATEGY_PARAMETER_SERVER; s <= ZDIST_STRATEGY_TPU; s++)
        CU_ASSERT_EQUAL(zdist_strategy_from_name(zdist_strategy_name((zdist_strategy_t) s)), s);
    CU_ASSERT_STRING_EQUAL(zdist_strategy_name(MWM), "multi_worker_mirrored");
    CU_ASSERT_PTR_NULL(zdist_strategy_name(ZDIST_STRATEGY_INVALID));
    CU_ASSERT_PTR_NULL(zdist_strategy_name((zdist_strategy_t) 99));
    CU_ASSERT_EQUAL(zdist_strategy_from_name("ParameterServer"), ZDIST_STRATEGY_INVALID);
    CU_ASSERT_EQUAL(zdist_strategy_from_name(NULL), ZDIST_STRATEGY_INVALID);
    zdist_strategy_t got = ZDIST_STRATEGY_ONE_DEVICE;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_strategy_parse("parameter_server", &got, &err), 0);
    CU_ASSERT_EQUAL(got, PS);
    CU_ASSERT_EQUAL(zdist_strategy_parse("TPUStrategy", &got, &err), -EINVAL);
    CU_ASSERT_EQUAL(got, PS); /* untouched */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "unknown strategy 'TPUStrategy'; use one of parameter_server, "
                                            "multi_worker_mirrored, mirrored, central_storage, one_device, tpu"));
}

static void
test_to_json(void)
{
    zdist_cluster_t *c =
        s_parse_ok("{\"cluster\": {\"worker\": [\"w0:1\", \"w1:1\"], \"chief\": [\"c:1\"], "
                   "\"ps\": {\"1\": \"p1:1\"}}, \"task\": {\"type\": \"worker\", \"index\": \"0\"}, "
                   "\"rpc_layer\": \"grpc\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char *json = zdist_cluster_to_json(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    CU_ASSERT_STRING_EQUAL(json, "{\"task_type\":\"worker\",\"task_id\":0,\"rpc_layer\":\"grpc\",\"master\":"
                                 "\"grpc://w0:1\",\"cluster\":{\"chief\":[\"c:1\"],\"ps\":{\"1\":\"p1:1\"},"
                                 "\"worker\":[\"w0:1\",\"w1:1\"]},\"is_chief\":false,\"id_in_cluster\":1,"
                                 "\"worker_count\":3}");
    free(json);
    zdist_cluster_destroy(&c);

    c = s_parse_ok("{}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    json = zdist_cluster_to_json(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    CU_ASSERT_STRING_EQUAL(json,
                           "{\"task_type\":null,\"task_id\":null,\"rpc_layer\":null,\"master\":\"\","
                           "\"cluster\":{},\"is_chief\":false,\"id_in_cluster\":null,\"worker_count\":0}");
    /* The output reads back as the same cluster. */
    json_t *doc = json_loads(json, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL(doc);
    json_decref(doc);
    free(json);
    zdist_cluster_destroy(&c);
}

static void
test_examples_parse(void)
{
    /* Every deploy/examples/cluster-*.json resolves and fits its strategy. */
    static const struct {
        const char *file;
        zdist_strategy_t strategy;
    } examples[] = {
        {"cluster-ps.json", ZDIST_STRATEGY_PARAMETER_SERVER},
        {"cluster-ps-sparse.json", ZDIST_STRATEGY_PARAMETER_SERVER},
        {"cluster-mwm.json", ZDIST_STRATEGY_MULTI_WORKER_MIRRORED},
        {"cluster-mwm-chief.json", ZDIST_STRATEGY_MULTI_WORKER_MIRRORED},
        {"cluster-local.json", ZDIST_STRATEGY_MIRRORED},
    };
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/deploy/examples/%s", ZDIST_SOURCE_DIR, examples[i].file);
        zdist_error_t err = {0};
        zdist_cluster_t *c = zdist_cluster_from_env_or_file(path, &err);
        CU_ASSERT_PTR_NOT_NULL(c);
        if (!c) {
            fprintf(stderr, "\n%s\n", err.text);
            continue;
        }
        CU_ASSERT_EQUAL(zdist_cluster_validate(c, examples[i].strategy, &err), 0);
        zdist_cluster_destroy(&c);
    }
}

void
zdist_test_cluster_register(void)
{
    ZDIST_SUITE(
        "cluster", {"list job", test_list_job}, {"sparse job", test_sparse_job},
        {"task forms", test_task_forms}, {"rpc_layer and session_master", test_rpc_layer_and_session_master},
        {"no task, no cluster, empty", test_no_task_no_cluster_empty}, {"roles matrix", test_roles_matrix},
        {"validation errors", test_validation_errors}, {"broken JSON", test_broken_json},
        {"environment and file", test_env_and_file}, {"strategies", test_strategies},
        {"to_json", test_to_json}, {"examples parse", test_examples_parse});
}
