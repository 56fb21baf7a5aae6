/* CUnit suite: the job class — parsed once (checkpoint and evaluation included), validated, carried as a typed message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wire/job_wire.h"
#include "testutil.h"
#include "zdist/job.h"

#define S_SYN "\"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 64, \"test_n\": 16, \"dim\": 4, " \
              "\"classes\": 3, \"seed\": 5}, \"global_batch_size\": 8, \"shard_policy\": \"data\"}"

static const char *s_ps_job =
    "{\"name\": \"syn\", \"strategy\": {\"type\": \"parameter_server\", \"partitioner\": \"fixed:2\"},"
    " \"model\": {\"name\": \"mlp\", \"params\": {\"hidden\": [8]}},"
    " \"optimizer\": {\"type\": \"adam\", \"learning_rate\": 0.01, \"lazy\": true}, " S_SYN ","
    " \"epochs\": 3, \"steps_per_execution\": 4, \"seed\": 9, \"log_every\": 10,"
    " \"checkpoint\": {\"every_steps\": 50, \"keep\": 2, \"dir\": \"/srv/ckpt\", \"full_every\": 4}, \"evaluation\": {\"at_end\": true},"
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
    CU_ASSERT_EQUAL(job.ckpt_full_every, 4);
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
    CU_ASSERT_EQUAL(job.ckpt_full_every, 0); /* the psd's default, 10 */
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
             " \"optimizer\": {\"type\": \"sgd\"}, " S_SYN ", \"steps\": 5, \"checkpoint\": {\"full_every\": 0}}");
    s_refused(text, "checkpoint.full_every: must be an integer in 1..1000000, got 0");
    snprintf(text, sizeof text,
             "{\"name\": \"x\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": \"mlp\"},"
             " \"optimizer\": {\"type\": \"ftrl\", \"l2_regularization_strength\": -0.5}, " S_SYN ", \"steps\": 5}");
    s_refused(text, "l2_regularization_strength must be >= 0");
    snprintf(text, sizeof text,
             "{\"name\": \"x\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": \"mlp\"},"
             " \"optimizer\": {\"type\": \"ftrl\", \"beta_1\": 0.9}, " S_SYN ", \"steps\": 5}");
    s_refused(text, "optimizer.beta_1: unknown field");
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

/* A sequential job under strategy st (JSON) with layers (JSON list) on 8x8 images. */
static void
s_seq_job(char *text, size_t size, const char *st, const char *layers)
{
    snprintf(text, size,
             "{\"name\": \"t\", \"strategy\": %s, \"model\": {\"name\": \"sequential\", \"input_shape\": [8, 8, 1],"
             " \"layers\": %s, \"loss\": \"sparse_categorical_crossentropy\"}, \"optimizer\": {\"type\": \"sgd\"},"
             " \"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 64, \"dim\": 64, \"classes\": 4},"
             " \"global_batch_size\": 8}, \"steps\": 5}",
             st, layers);
}

static void
test_tpu(void)
{
    char text[2048];
    zdist_job_t job, back;
    zdist_error_t err = {0};
    const char *tpu2 = "{\"type\": \"tpu\", \"num_replicas\": 2, \"logical_devices_per_replica\": 2}";
    const char *spmd2 = "{\"type\": \"tpu\", \"logical_devices_per_replica\": 2, \"spmd\": true}";
    s_seq_job(text, sizeof text, tpu2,
              "[{\"conv2d\": {\"filters\": 4, \"kernel\": 3, \"split\": [2, 1]}}, {\"conv2d\": {\"filters\": 4, "
              "\"kernel\": 3, \"logical_device\": 1}}, \"flatten\", {\"dense\": {\"units\": 4, \"split\": [2]}}]");
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(text, NULL, &job, &err), 0);
    CU_ASSERT_EQUAL(job.strategy, ZDIST_STRATEGY_TPU);
    CU_ASSERT_EQUAL(job.num_replicas, 2);
    CU_ASSERT_EQUAL(job.logical_devices_per_replica, 2);
    CU_ASSERT_FALSE(job.spmd);
    /* The typed message carries the device assignment. */
    zdist_job_pb_t pb;
    zdist_job_to_pb(&job, &pb);
    CU_ASSERT_EQUAL_FATAL(zdist_job_from_pb(&pb.job, &back, &err), 0);
    CU_ASSERT_EQUAL(back.logical_devices_per_replica, 2);
    CU_ASSERT_EQUAL(back.strategy, ZDIST_STRATEGY_TPU);
    zdist_job_release(&back);
    zdist_job_release(&job);

    s_seq_job(text, sizeof text, "{\"type\": \"mirrored\", \"logical_devices_per_replica\": 2}", "[\"flatten\"]");
    s_refused(text, "strategy.logical_devices_per_replica: only tpu has it");
    s_seq_job(text, sizeof text, "{\"type\": \"tpu\", \"logical_devices_per_replica\": 65}", "[\"flatten\"]");
    s_refused(text, "strategy.logical_devices_per_replica: must be an integer in 1..64");
    s_seq_job(text, sizeof text, "{\"type\": \"mirrored\"}", "[\"flatten\", {\"dense\": {\"units\": 4, \"split\": [2]}}]");
    s_refused(text, "model.layers[1].dense.split: only strategy tpu has logical devices");
    /* TensorFlow's ValueErrors, naming the layer. */
    s_seq_job(text, sizeof text, spmd2, "[\"flatten\", {\"dense\": {\"units\": 4, \"logical_device\": 1}}]");
    s_refused(text, "model.layers[1].dense.logical_device: Cannot assign a tensor to a logical device in SPMD mode. "
                    "To disable SPMD, Please construct the TPUStrategy with `experimental_spmd_xla_partitioning=False`");
    s_seq_job(text, sizeof text, tpu2, "[\"flatten\", {\"dense\": {\"units\": 4, \"logical_device\": 2}}]");
    s_refused(text, "model.layers[1].dense.logical_device: `logical_core_id` to assign must be lower then total number "
                    "of logical devices per replica. Received logical device id 2 but there are only total of 2");
    s_seq_job(text, sizeof text, spmd2,
              "[{\"conv2d\": {\"filters\": 4, \"kernel\": 3}}, {\"conv2d\": {\"filters\": 4, \"kernel\": 3, "
              "\"split\": [2, 2]}}, \"flatten\", {\"dense\": {\"units\": 4}}]");
    s_refused(text, "model.layers[1].conv2d.split: The product of `partition_dimensions` should be the same as the "
                    "number of logical devices (=2). Received `partition_dimensions`=[1, 2, 2, 1],and their product is 4.");
    /* The second conv's input is 6x6: 6 rows do not split 4 ways. */
    s_seq_job(text, sizeof text, "{\"type\": \"tpu\", \"logical_devices_per_replica\": 4}",
              "[{\"conv2d\": {\"filters\": 4, \"kernel\": 3}}, {\"conv2d\": {\"filters\": 4, \"kernel\": 3, "
              "\"split\": [4, 1]}}, \"flatten\", {\"dense\": {\"units\": 4}}]");
    s_refused(text, "model.layers[1].conv2d.split: Tensor shape at `partition_dimensions[1]` must be divisible by "
                    "corresponding value specified by `partition_dimensions` (4). Received: 6.");
    s_seq_job(text, sizeof text, tpu2, "[\"flatten\", {\"dense\": {\"units\": 4, \"split\": [2, 1]}}]");
    s_refused(text, "model.layers[1].dense.split: must be [parts] in 1..64");
    s_seq_job(text, sizeof text, tpu2, "[\"flatten\", {\"dense\": {\"units\": 4, \"split\": [2], \"logical_device\": 0}}]");
    s_refused(text, "model.layers[1].dense: logical_device and split both given");
}

/* tf.keras.optimizers.Ftrl's fields by their names, Keras's defaults for
   those not given, carried by the typed message. */
static void
test_ftrl(void)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\": \"x\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": \"mlp\"},"
             " \"optimizer\": {\"type\": \"ftrl\", \"learning_rate\": 0.05, \"learning_rate_power\": 0,"
             " \"l1_regularization_strength\": 0.01, \"l2_regularization_strength\": 0.02,"
             " \"l2_shrinkage_regularization_strength\": 0.03, \"beta\": 0.5}, " S_SYN ", \"steps\": 5}");
    zdist_job_t job, back;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(text, NULL, &job, &err), 0);
    const zdist_optim_config_t *o = &job.optimizer;
    CU_ASSERT_EQUAL(o->kind, ZDIST_OPTIM_FTRL);
    CU_ASSERT_EQUAL(o->learning_rate, 0.05);
    CU_ASSERT_EQUAL(o->learning_rate_power, 0);
    CU_ASSERT_EQUAL(o->initial_accumulator_value, 0.1); /* Keras's default */
    CU_ASSERT_EQUAL(o->l1, 0.01);
    CU_ASSERT_EQUAL(o->l2, 0.02);
    CU_ASSERT_EQUAL(o->l2_shrinkage, 0.03);
    CU_ASSERT_EQUAL(o->beta, 0.5);
    zdist_job_pb_t pb;
    zdist_job_to_pb(&job, &pb);
    CU_ASSERT_EQUAL_FATAL(zdist_job_from_pb(&pb.job, &back, &err), 0);
    CU_ASSERT_TRUE(zdist_optim_config_equal(&back.optimizer, o));
    zdist_job_release(&back);
    zdist_job_release(&job);
}

/* strategy.min_workers / max_workers: parsed and carried; refused naming the fields where the global batch
   does not divide by some size's replicas, where the dataset is not sharded by data, and alone. */
static void
test_elastic(void)
{
    char text[2048];
    const char *fmt = "{\"name\": \"e\", \"strategy\": {\"type\": \"%s\", \"num_replicas\": %d%s},"
                      " \"model\": {\"name\": \"mlp\"}, \"optimizer\": {\"type\": \"sgd\"},"
                      " \"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 64, \"dim\": 4,"
                      " \"classes\": 2}, \"global_batch_size\": %d%s}, \"steps\": 5}";
    zdist_job_t job, back;
    zdist_error_t err = {0};
    snprintf(text, sizeof text, fmt, "multi_worker_mirrored", 2, ", \"min_workers\": 2, \"max_workers\": 4", 48, "");
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(text, NULL, &job, &err), 0);
    CU_ASSERT_EQUAL(job.min_workers, 2);
    CU_ASSERT_EQUAL(job.max_workers, 4);
    zdist_job_pb_t pb;
    zdist_job_to_pb(&job, &pb);
    CU_ASSERT_EQUAL_FATAL(zdist_job_from_pb(&pb.job, &back, &err), 0);
    CU_ASSERT_EQUAL(back.min_workers, 2);
    CU_ASSERT_EQUAL(back.max_workers, 4);
    zdist_job_release(&back);
    zdist_job_release(&job);
    snprintf(text, sizeof text, fmt, "multi_worker_mirrored", 1, "", 50, "");
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(text, NULL, &job, &err), 0); /* not elastic: any batch, as before */
    CU_ASSERT_EQUAL(job.min_workers, 0);
    CU_ASSERT_EQUAL(job.max_workers, 0);
    zdist_job_release(&job);
    /* 2 replicas a worker over 2..4 workers: 4, 6 and 8 replicas; 48 divides by all, 40 not by 6. */
    snprintf(text, sizeof text, fmt, "tpu", 2, ", \"min_workers\": 2, \"max_workers\": 4", 40, "");
    s_refused(text, "dataset.global_batch_size: 40 does not divide by 3 workers x 2 replicas (strategy.min_workers 2 .. "
                    "strategy.max_workers 4, strategy.num_replicas 2)");
    s_refused(text, "use a multiple of 24");
    snprintf(text, sizeof text, fmt, "multi_worker_mirrored", 1, ", \"min_workers\": 2, \"max_workers\": 3", 48,
             ", \"shard_policy\": \"off\"");
    s_refused(text, "dataset.shard_policy: an elastic ring");
    snprintf(text, sizeof text, fmt, "multi_worker_mirrored", 1, ", \"max_workers\": 3", 48, "");
    s_refused(text, "strategy.max_workers: give strategy.min_workers and strategy.max_workers together");
    snprintf(text, sizeof text, fmt, "multi_worker_mirrored", 1, ", \"min_workers\": 3, \"max_workers\": 2", 48, "");
    s_refused(text, "give 1 <= min_workers <= max_workers");
    snprintf(text, sizeof text, fmt, "multi_worker_mirrored", 1, ", \"min_workers\": 0, \"max_workers\": 2", 48, "");
    s_refused(text, "strategy.min_workers: must be an integer in 1..1024");
    snprintf(text, sizeof text, fmt, "parameter_server", 1, ", \"min_workers\": 1, \"max_workers\": 2", 48, "");
    s_refused(text, "strategy.min_workers: only multi_worker_mirrored and tpu have it");
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
    CU_ASSERT_EQUAL(back.ckpt_full_every, 4);
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

/* A libsvm job whose ids are any int64 (dataset.raw_ids) feeding a dynamic
   embedding: parsed, carried by the typed message, refused when not a bool. */
static void
test_libsvm_raw_ids(void)
{
    const char *text =
        "{\"name\": \"dyn\", \"strategy\": {\"type\": \"parameter_server\"},"
        " \"model\": {\"name\": \"sequential\", \"input_shape\": [1], \"layers\": [{\"embedding\": {\"output_dim\": 4,"
        " \"dynamic\": {\"min_count\": 2}}}, {\"dense\": {\"units\": 1}}], \"loss\": \"binary_crossentropy\"},"
        " \"dataset\": {\"format\": \"libsvm\", \"dim\": 1, \"raw_ids\": true, \"train\": {\"path\": \"/d/a.svm\"},"
        " \"global_batch_size\": 8}, \"optimizer\": {\"type\": \"sgd\", \"learning_rate\": 0.1}, \"steps\": 10}";
    zdist_job_t job, copy;
    zdist_error_t err = {0};
    int rc = zdist_job_parse(text, NULL, &job, &err);
    if (rc != 0)
        fprintf(stderr, "\n  %s\n", err.text);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_TRUE(job.libsvm_raw_ids);
    CU_ASSERT_EQUAL_FATAL(zdist_job_copy(&job, &copy, &err), 0); /* through the typed message */
    CU_ASSERT_TRUE(copy.libsvm_raw_ids);
    zdist_job_release(&copy);
    zdist_job_release(&job);
    char bad[2048];
    snprintf(bad, sizeof bad, "%s", text);
    char *at = strstr(bad, "\"raw_ids\": true");
    memcpy(at, "\"raw_ids\": 1   ", strlen("\"raw_ids\": true"));
    CU_ASSERT_EQUAL(zdist_job_parse(bad, NULL, &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dataset.raw_ids"));
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

/* dataset.pipelines: distribute_datasets_from_function as a file list */

static char *
s_pipelines_job(const char *pipelines, const char *extra)
{
    char *text = NULL;
    if (asprintf(&text,
                 "{\"name\": \"pipes\", \"strategy\": {\"type\": \"mirrored\", \"num_replicas\": 2}, \"model\": "
                 "{\"name\": \"linear_regression\"}, \"optimizer\": {\"type\": \"sgd\"}, \"dataset\": {\"format\": "
                 "\"csv\", \"pipelines\": %s, \"label_dtype\": \"float32\", \"global_batch_size\": 10, \"shuffle\": "
                 "false%s}, \"epochs\": 1}",
                 pipelines, extra) < 0)
        return NULL;
    return text;
}

static int
s_parse_text(char *text, zdist_job_t *job, zdist_error_t *err)
{
    int rc = text ? zdist_job_parse(text, NULL, job, err) : -ENOMEM;
    free(text);
    return rc;
}

static void
s_write_rows(const char *path, const int *rows, int n)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%d,%d\n", rows[i], rows[i]); /* feature, label: the row's number */
    fclose(f);
}

static void
test_pipelines(void)
{
    zdist_job_t job, copy;
    zdist_error_t err = {0};
    /* What range(14).batch(5).shard(2, i) yields, one file per input pipeline (TF's documented case) */
    char *dir = zdist_test_tmpdir("pipelines");
    char p0[512], p1[512], list[1200];
    snprintf(p0, sizeof p0, "%s/p0.csv", dir);
    snprintf(p1, sizeof p1, "%s/p1.csv", dir);
    static const int r0[] = {0, 1, 2, 3, 4, 10, 11, 12, 13}, r1[] = {5, 6, 7, 8, 9};
    s_write_rows(p0, r0, 9);
    s_write_rows(p1, r1, 5);
    snprintf(list, sizeof list, "[{\"path\": \"%s\"}, {\"path\": \"%s\"}]", p0, p1);
    CU_ASSERT_EQUAL_FATAL(s_parse_text(s_pipelines_job(list, ""), &job, &err), 0);
    CU_ASSERT_EQUAL(job.num_pipelines, 2);
    CU_ASSERT_STRING_EQUAL(job.pipelines[1].path, p1);
    CU_ASSERT_PTR_NULL(job.train.path);
    CU_ASSERT_EQUAL(job.shard_policy, ZDIST_AUTO_SHARD_OFF); /* never sharded */
    /* what travels to the workers keeps them */
    CU_ASSERT_EQUAL_FATAL(zdist_job_copy(&job, &copy, &err), 0);
    CU_ASSERT_EQUAL(copy.num_pipelines, 2);
    CU_ASSERT_STRING_EQUAL(copy.pipelines[0].path, p0);
    CU_ASSERT_STRING_EQUAL(copy.pipelines[1].path, p1);
    zdist_job_release(&copy);

    /* the worker's input path: pipeline i of 2, 1 replica each (2 in sync), global batch 10: batches of 5,
       neither rebatched nor sharded: pipeline 0's first is [0..4], then [10..13]; pipeline 1's [5..9] */
    for (int i = 0; i < 2; i++) {
        zdist_input_context_t *ictx = zdist_input_context_new(2, i, 2, &err);
        zdist_dataset_t *ds = NULL;
        zdist_auto_shard_policy_t applied = ZDIST_AUTO_SHARD_AUTO;
        CU_ASSERT_PTR_NOT_NULL_FATAL(ictx);
        CU_ASSERT_EQUAL_FATAL(zdist_job_load_dataset(&job, false, ictx, job.shard_policy, &ds, &applied, &err), 0);
        CU_ASSERT_EQUAL(applied, ZDIST_AUTO_SHARD_OFF);
        zdist_input_options_t opts;
        zdist_input_options_init(&opts, job.global_batch_size);
        opts.shard_policy = applied;
        zdist_input_t *in = zdist_input_new(ds, ictx, &opts, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(in);
        const zdist_input_step_t *st = NULL;
        CU_ASSERT_EQUAL_FATAL(zdist_input_next(in, &st), 1);
        CU_ASSERT_EQUAL(st->num_replicas, 1);
        CU_ASSERT_EQUAL_FATAL(st->replicas[0].size, 5);
        for (int k = 0; k < 5; k++)
            CU_ASSERT_EQUAL(st->replicas[0].features[k], (float) (5 * i + k));
        int got = zdist_input_next(in, &st);
        if (i == 0) {
            CU_ASSERT_EQUAL_FATAL(got, 1);
            CU_ASSERT_EQUAL_FATAL(st->replicas[0].size, 4);
            CU_ASSERT_EQUAL(st->replicas[0].features[0], 10.0f);
            CU_ASSERT_EQUAL(st->replicas[0].features[3], 13.0f);
        }
        CU_ASSERT_EQUAL(i == 0 ? zdist_input_next(in, &st) : got, 0); /* then the end */
        zdist_input_destroy(&in);
        zdist_dataset_destroy(&ds);
        zdist_input_context_destroy(&ictx);
    }
    /* one pipeline of 2 replicas (mirrored:2, PER_WORKER): replica r of a step takes the pipeline's next batch */
    zdist_input_context_t *one = zdist_input_context_new(1, 0, 2, &err);
    zdist_dataset_t *ds = NULL;
    CU_ASSERT_EQUAL(zdist_job_load_dataset(&job, false, one, job.shard_policy, &ds, NULL, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dataset.pipelines: 2 given, but the job runs 1 input pipeline (one per "
                                            "worker); give one per worker"));
    zdist_input_context_destroy(&one);
    zdist_input_context_t *three = zdist_input_context_new(2, 0, 6, &err);
    job.global_batch_size = 9;
    CU_ASSERT_EQUAL(zdist_job_load_dataset(&job, false, three, job.shard_policy, &ds, NULL, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "The `global_batch_size` 9 is not divisible by `num_replicas_in_sync` 6"));
    zdist_input_context_destroy(&three);
    zdist_job_release(&job);

    /* bad forms name the field */
    snprintf(list, sizeof list, "[{\"path\": \"%s\"}]", p0);
    CU_ASSERT_EQUAL(s_parse_text(s_pipelines_job(list, ", \"train\": {\"path\": \"x.csv\"}"), &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dataset.pipelines: give either dataset.train"));
    CU_ASSERT_EQUAL(s_parse_text(s_pipelines_job("{\"path\": \"a.csv\"}", ""), &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dataset.pipelines: must be a list of 1..256 files objects"));
    CU_ASSERT_EQUAL(s_parse_text(s_pipelines_job("[]", ""), &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dataset.pipelines: must be a list"));
    CU_ASSERT_EQUAL(s_parse_text(s_pipelines_job("[\"a.csv\"]", ""), &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dataset.pipelines[0]: must be an object {\"path\": ...}"));
    CU_ASSERT_EQUAL(s_parse_text(s_pipelines_job("[{\"file\": \"a.csv\"}]", ""), &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dataset.pipelines[0]"));
    CU_ASSERT_EQUAL(s_parse_text(s_pipelines_job(list, ", \"shard_policy\": \"file\""), &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dataset.shard_policy: a dataset per pipeline is never sharded"));
    char *ps = NULL;
    CU_ASSERT(asprintf(&ps, "{\"name\": \"p\", \"strategy\": {\"type\": \"parameter_server\"}, \"model\": {\"name\": "
                            "\"linear_regression\"}, \"optimizer\": {\"type\": \"sgd\"}, \"dataset\": {\"format\": "
                            "\"csv\", \"pipelines\": %s, \"global_batch_size\": 10}, \"steps\": 1}",
                       list) > 0);
    CU_ASSERT_EQUAL(s_parse_text(ps, &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dataset.pipelines: parameter_server shares one dataset out"));
    unlink(p0);
    unlink(p1);
    zdist_test_rmtree(dir);
    free(dir);
}

void
zdist_test_job_register(void)
{
    ZDIST_SUITE("job",
                {"parse: checkpoint and evaluation sections, defaults", test_parse_sections},
                {"bad sections name the field", test_bad_sections},
                {"typed message round trip, validated on arrival", test_typed_round_trip},
                {"optimizer ftrl: Keras's fields and defaults, carried", test_ftrl},
                {"libsvm raw_ids for a dynamic embedding: parsed, carried, checked", test_libsvm_raw_ids},
                {"a deep copy outlives its source", test_copy},
                {"strategy tpu: logical devices, placement refused with TensorFlow's text", test_tpu},
                {"strategy.min_workers/max_workers: carried; a batch some size does not divide refused by field",
                 test_elastic},
                {"dataset files confined to the data roots: '..', links out, elsewhere refused by field",
                 test_confine_data},
                {"dataset.pipelines: a file list per input pipeline, TF's range(14) case, bad forms by field",
                 test_pipelines});
}
