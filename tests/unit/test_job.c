/* CUnit suite: the job class — parsed once (checkpoint and evaluation included), validated, carried as a typed message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/job_wire.h"
#include "testutil.h"
#include "zdist/job.h"

#define S_SYN "\"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 64, \"test_n\": 16, \"dim\": 4, " \
              "\"classes\": 3, \"seed\": 5}, \"global_batch_size\": 8, \"shard_policy\": \"data\"}"

static const char *s_ps_job =
    "{\"name\": \"syn\", \"strategy\": {\"type\": \"parameter_server\", \"partitioner\": \"fixed:2\"},"
    " \"model\": {\"name\": \"mlp\", \"params\": {\"hidden\": [8]}},"
    " \"optimizer\": {\"type\": \"adam\", \"learning_rate\": 0.01, \"lazy\": true}, " S_SYN ","
    " \"epochs\": 3, \"steps_per_execution\": 4, \"seed\": 9, \"log_every\": 10,"
    " \"checkpoint\": {\"every_steps\": 50, \"keep\": 2, \"dir\": \"/srv/ckpt\"}, \"evaluation\": {\"at_end\": true},"
    " \"priority\": 5}";

static void
test_parse_sections(void)
{
    zdist_job_t job;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(s_ps_job, NULL, &job, &err), 0);
    CU_ASSERT_STRING_EQUAL(job.name, "syn");
    CU_ASSERT_EQUAL(job.strategy, ZDIST_STRATEGY_PARAMETER_SERVER);
    CU_ASSERT_STRING_EQUAL(job.partitioner, "fixed:2");
    CU_ASSERT_EQUAL(job.optimizer.kind, ZDIST_OPTIM_ADAM);
    CU_ASSERT_DOUBLE_EQUAL(job.optimizer.learning_rate, 0.01, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(job.optimizer.beta2, 0.999, 1e-12); /* Keras default kept */
    CU_ASSERT_TRUE(job.optimizer.lazy);
    CU_ASSERT_EQUAL(job.epochs, 3);
    CU_ASSERT_EQUAL(job.steps, 0);
    CU_ASSERT_EQUAL(job.steps_per_execution, 4);
    CU_ASSERT_EQUAL(job.ckpt_every, 50);
    CU_ASSERT_EQUAL(job.ckpt_keep, 2);
    CU_ASSERT_STRING_EQUAL(job.ckpt_dir, "/srv/ckpt");
    CU_ASSERT_EQUAL(job.priority, 5);
    CU_ASSERT_TRUE(job.evaluate);
    CU_ASSERT_TRUE(job.has_test);
    CU_ASSERT_EQUAL(job.shard_policy, ZDIST_AUTO_SHARD_DATA);
    zdist_job_release(&job);

    /* Defaults: keep 3, evaluate when there is a test set. */
    const char *plain = "{\"name\": \"p\", \"strategy\": {\"type\": \"one_device\"}, \"model\": {\"name\": \"mlp\"},"
                        " \"optimizer\": {\"type\": \"sgd\"}, " S_SYN ", \"steps\": 5}";
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(plain, NULL, &job, &err), 0);
    CU_ASSERT_EQUAL(job.ckpt_every, 0);
    CU_ASSERT_EQUAL(job.ckpt_keep, 3);
    CU_ASSERT_PTR_NULL(job.ckpt_dir);
    CU_ASSERT_EQUAL(job.priority, 0);
    CU_ASSERT_TRUE(job.evaluate);
    zdist_job_release(&job);
}

/* parse(text) must fail with -EINVAL and a message containing want. */
static void
s_refused(const char *text, const char *want)
{
    zdist_job_t job;
    zdist_error_t err = {0};
    int rc = zdist_job_parse(text, NULL, &job, &err);
    CU_ASSERT_EQUAL(rc, -EINVAL);
    if (!strstr(err.text, want)) {
        fprintf(stderr, "\nwanted '%s' in '%s'\n", want, err.text);
        CU_FAIL("message does not name the field");
    }
}

static void
test_bad_sections(void)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\": \"x\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": \"mlp\"},"
             " \"optimizer\": {\"type\": \"sgd\"}, " S_SYN ", \"steps\": 5, \"checkpoint\": {\"every\": 5}}");
    s_refused(text, "checkpoint.every: unknown field");
    snprintf(text, sizeof text,
             "{\"name\": \"x\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": \"mlp\"},"
             " \"optimizer\": {\"type\": \"sgd\"}, " S_SYN ", \"steps\": 5, \"checkpoint\": {\"keep\": 0}}");
    s_refused(text, "checkpoint.keep: must be an integer in 1..1000, got 0");
    snprintf(text, sizeof text,
             "{\"name\": \"x\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": \"mlp\"},"
             " \"optimizer\": {\"type\": \"sgd\"}, \"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 8,"
             " \"dim\": 2, \"classes\": 2}, \"global_batch_size\": 4}, \"steps\": 5, \"evaluation\": {\"at_end\": true}}");
    s_refused(text, "evaluation.at_end: the job has no test set");
    snprintf(text, sizeof text,
             "{\"name\": \"x\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": \"mlp\"},"
             " \"optimizer\": {\"type\": \"sgd\"}, " S_SYN ", \"steps\": 5, \"evaluation\": {\"at_end\": 1}}");
    s_refused(text, "evaluation.at_end: must be true or false");
    s_refused("{\"name\": \"x\",\n \"strategy\": }", "line 2");
    static const char *const bad[][2] = {
        {"\"priority\": 1001", "priority: must be an integer in -1000..1000, got 1001"},
        {"\"priority\": \"high\"", "priority: must be an integer in -1000..1000, got \"high\""},
        {"\"checkpoint\": {\"dir\": \"ckpt\"}", "checkpoint.dir: 'ckpt' is a relative path; give an absolute"},
        {"\"checkpoint\": {\"dir\": \"/srv/../etc\"}", "checkpoint.dir: '/srv/../etc' contains '..'"},
        {"\"checkpoint\": {\"dir\": 7}", "checkpoint.dir: must be a non-empty string, got 7"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text,
                 "{\"name\": \"x\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": \"mlp\"},"
                 " \"optimizer\": {\"type\": \"sgd\"}, " S_SYN ", \"steps\": 5, %s}", bad[i][0]);
        s_refused(text, bad[i][1]);
    }
}

static void
test_typed_round_trip(void)
{
    zdist_job_t job, back;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(s_ps_job, NULL, &job, &err), 0);
    zdist_job_pb_t pb;
    zdist_job_to_pb(&job, &pb);
    size_t len = protobuf_c_message_get_packed_size(&pb.job.base);
    uint8_t *buf = malloc(len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    protobuf_c_message_pack(&pb.job.base, buf);
    Zdist__Job__Job *un = zdist__job__job__unpack(NULL, len, buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(un);
    CU_ASSERT_EQUAL_FATAL(zdist_job_from_pb(un, &back, &err), 0);
    CU_ASSERT_STRING_EQUAL(back.name, job.name);
    CU_ASSERT_STRING_EQUAL(back.model, job.model);
    CU_ASSERT_STRING_EQUAL(back.model_params, job.model_params);
    CU_ASSERT_STRING_EQUAL(back.partitioner, job.partitioner);
    CU_ASSERT_EQUAL(back.strategy, job.strategy);
    CU_ASSERT_EQUAL(back.optimizer.kind, job.optimizer.kind);
    CU_ASSERT_TRUE(zdist_optim_config_equal(&back.optimizer, &job.optimizer));
    CU_ASSERT_EQUAL(back.format, job.format);
    CU_ASSERT_EQUAL(back.shard_policy, job.shard_policy);
    CU_ASSERT_EQUAL(back.synthetic_n, job.synthetic_n);
    CU_ASSERT_EQUAL(back.synthetic_classes, job.synthetic_classes);
    CU_ASSERT_EQUAL(back.epochs, job.epochs);
    CU_ASSERT_EQUAL(back.steps_per_execution, job.steps_per_execution);
    CU_ASSERT_EQUAL(back.seed, job.seed);
    CU_ASSERT_EQUAL(back.ckpt_every, job.ckpt_every);
    CU_ASSERT_EQUAL(back.ckpt_keep, job.ckpt_keep);
    CU_ASSERT_STRING_EQUAL(back.ckpt_dir, job.ckpt_dir);
    CU_ASSERT_EQUAL(back.priority, job.priority);
    CU_ASSERT_EQUAL(back.evaluate, job.evaluate);
    CU_ASSERT_PTR_NULL(back.plugin_path);
    zdist_job_release(&back);

    /* A received job is held to the parser's rules: each field named. */
    un->global_batch_size = 0;
    CU_ASSERT_EQUAL(zdist_job_from_pb(un, &back, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dataset.global_batch_size"));
    un->global_batch_size = 8;
    un->steps = 10; /* and epochs 3 */
    CU_ASSERT_EQUAL(zdist_job_from_pb(un, &back, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "give exactly one"));
    un->steps = 0;
    free(un->optimizer->kind);
    un->optimizer->kind = strdup("rmsprop");
    CU_ASSERT_EQUAL(zdist_job_from_pb(un, &back, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "optimizer"));
    zdist__job__job__free_unpacked(un, NULL);
    free(buf);
    zdist_job_release(&job);
}

static void
test_copy(void)
{
    zdist_job_t job, copy;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(s_ps_job, NULL, &job, &err), 0);
    CU_ASSERT_EQUAL_FATAL(zdist_job_copy(&job, &copy, &err), 0);
    CU_ASSERT_STRING_EQUAL(copy.name, job.name);
    CU_ASSERT_PTR_NOT_EQUAL(copy.name, job.name); /* deep */
    CU_ASSERT_STRING_EQUAL(copy.model_params, job.model_params);
    CU_ASSERT_STRING_EQUAL(copy.partitioner, job.partitioner);
    CU_ASSERT_TRUE(zdist_optim_config_equal(&copy.optimizer, &job.optimizer));
    CU_ASSERT(copy.epochs == job.epochs && copy.steps == job.steps && copy.ckpt_every == job.ckpt_every &&
              copy.ckpt_keep == job.ckpt_keep && copy.evaluate == job.evaluate && copy.seed == job.seed &&
              copy.global_batch_size == job.global_batch_size && copy.synthetic_n == job.synthetic_n);
    zdist_job_release(&job); /* the copy outlives it */
    CU_ASSERT_EQUAL(zdist_job_validate(&copy, &err), 0);
    zdist_job_release(&copy);
}


/* One csv job whose train path is `path`, confined to `root`: the return
   code, err's text in msg, the (resolved) path in got. */
static int
s_confine(const char *path, const char *root, char *msg, size_t msg_size, char *got, size_t got_size)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"c\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": \"mlp\"},"
             " \"optimizer\": {\"type\": \"sgd\", \"learning_rate\": 0.1}, \"dataset\": {\"format\": \"csv\","
             " \"train\": {\"path\": \"%s\"}, \"global_batch_size\": 8}, \"steps\": 1}", path);
    zdist_job_t job;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(text, NULL, &job, &err), 0);
    const char *roots[] = {"/nonexistent-root", root};
    int rc = zdist_job_confine_data(&job, roots, root ? 2 : 0, &err);
    snprintf(msg, msg_size, "%s", err.text);
    snprintf(got, got_size, "%s", job.train.path ? job.train.path : "");
    zdist_job_release(&job);
    return rc;
}

static void
test_confine_data(void)
{
    char base[] = "/tmp/zdist-confine.XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(base));
    char root[256], out[256], f[300], o[300], p[600], msg[1024], got[1024], real_root[4096];
    snprintf(root, sizeof root, "%s/data", base);
    snprintf(out, sizeof out, "%s/database", base); /* a sibling whose name starts with the root's */
    CU_ASSERT_EQUAL_FATAL(mkdir(root, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(mkdir(out, 0700), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(root, real_root));
    snprintf(f, sizeof f, "%s/a.csv", root);
    snprintf(o, sizeof o, "%s/secret.csv", out);
    FILE *fp = fopen(f, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    fclose(fp);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp = fopen(o, "w"));
    fclose(fp);
    snprintf(p, sizeof p, "%s/out", root);
    CU_ASSERT_EQUAL(symlink(o, p), 0);
    snprintf(p, sizeof p, "%s/in", root);
    CU_ASSERT_EQUAL(symlink(f, p), 0);

    /* Under the root, as written and through "." and "//": accepted, resolved. */
    CU_ASSERT_EQUAL(s_confine(f, real_root, msg, sizeof msg, got, sizeof got), 0);
    CU_ASSERT_STRING_EQUAL(got, f);
    snprintf(p, sizeof p, "%s/.//in", root);
    CU_ASSERT_EQUAL(s_confine(p, real_root, msg, sizeof msg, got, sizeof got), 0);
    CU_ASSERT_STRING_EQUAL(got, f); /* the link's target, what will be read */
    /* Elsewhere, by "..", by a symbolic link out, relative, the sibling: refused, naming the field. */
    CU_ASSERT_EQUAL(s_confine(o, real_root, msg, sizeof msg, got, sizeof got), -EACCES);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "dataset.train.path: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "is outside the data roots (--data-root /nonexistent-root, --data-root "));
    CU_ASSERT_STRING_EQUAL(got, o); /* untouched */
    snprintf(p, sizeof p, "%s/../database/secret.csv", root);
    CU_ASSERT_EQUAL(s_confine(p, real_root, msg, sizeof msg, got, sizeof got), -EACCES);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "contains '..'"));
    snprintf(p, sizeof p, "%s/out", root);
    CU_ASSERT_EQUAL(s_confine(p, real_root, msg, sizeof msg, got, sizeof got), -EACCES);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "(a symbolic link), outside the data roots"));
    CU_ASSERT_EQUAL(s_confine("a.csv", real_root, msg, sizeof msg, got, sizeof got), -EACCES);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "is a relative path"));
    CU_ASSERT_EQUAL(s_confine(real_root, real_root, msg, sizeof msg, got, sizeof got), -EACCES); /* the root itself */
    /* Missing under the root: -ENOENT; no roots at all: nothing admitted. */
    snprintf(p, sizeof p, "%s/missing.csv", root);
    CU_ASSERT_EQUAL(s_confine(p, real_root, msg, sizeof msg, got, sizeof got), -ENOENT);
    CU_ASSERT_EQUAL(s_confine(f, NULL, msg, sizeof msg, got, sizeof got), -EACCES);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "reads no data files, only synthetic data"));

    snprintf(p, sizeof p, "%s/out", root);
    unlink(p);
    snprintf(p, sizeof p, "%s/in", root);
    unlink(p);
    unlink(f);
    unlink(o);
    rmdir(root);
    rmdir(out);
    rmdir(base);
}

void
zdist_test_job_register(void)
{
    ZDIST_SUITE("job",
                {"parse: checkpoint and evaluation sections, defaults", test_parse_sections},
                {"bad sections name the field", test_bad_sections},
                {"typed message round trip, validated on arrival", test_typed_round_trip},
                {"a deep copy outlives its source", test_copy},
                {"dataset files confined to the data roots: '..', links out, elsewhere refused by field",
                 test_confine_data});
}
