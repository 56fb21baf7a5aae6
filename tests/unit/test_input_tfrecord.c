/* CUnit suite: TFRecord input (issue 30) — files of tf.train.Example loaded
   against a feature spec into named columns and batches, sharded by FILE or
   DATA (TF's AUTO); the job file's tfrecord contract and its refusals; the
   exact AUC of a test split evaluated in parts, combined. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zdist/example.h"
#include "zdist/input.h"
#include "zdist/job.h"
#include "zdist/metrics.h"
#include "zdist/tfrecord.h"
#include "zdist/worker_client.h"

/* File k of `files`, rows rows: label r % 2, x = [r, -r] (float32), id = 1000 k + r (int64),
   tags = r % 3 ids (var int64); the row's global number is k * rows + r. */
static char *
s_write(const char *dir, int k, int rows)
{
    char *path = NULL;
    CU_ASSERT_FATAL(asprintf(&path, "%s/part-%d.tfrecord", dir, k) > 0);
    zdist_tfrecord_writer_t *w = zdist_tfrecord_writer_open(path, ZDIST_TFRECORD_NONE, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    for (int r = 0; r < rows; r++) {
        int64_t label = r % 2, id = 1000 * k + r, tags[3] = {r, r + 1, r + 2};
        float x[2] = {(float) r, (float) -r};
        zdist_example_feature_t f[] = {{"label", ZDIST_DTYPE_INT64, &label, 1},
                                       {"x", ZDIST_DTYPE_FLOAT32, x, 2},
                                       {"id", ZDIST_DTYPE_INT64, &id, 1},
                                       {"tags", ZDIST_DTYPE_INT64, tags, r % 3}};
        uint8_t buf[256];
        int64_t len = zdist_example_encode(f, 4, buf, sizeof buf, NULL);
        CU_ASSERT_FATAL(len > 0);
        CU_ASSERT_EQUAL_FATAL(zdist_tfrecord_writer_write(w, buf, (size_t) len), 0);
    }
    CU_ASSERT_EQUAL_FATAL(zdist_tfrecord_writer_close(&w, NULL), 0);
    return path;
}

static const zdist_feature_spec_t s_specs[] = {
    {.name = "label", .kind = ZDIST_FEATURE_FIXED, .dtype = ZDIST_DTYPE_INT64},
    {.name = "x", .kind = ZDIST_FEATURE_FIXED, .dtype = ZDIST_DTYPE_FLOAT32, .rank = 1, .shape = {2}},
    {.name = "id", .kind = ZDIST_FEATURE_FIXED, .dtype = ZDIST_DTYPE_INT64},
    {.name = "tags", .kind = ZDIST_FEATURE_VAR, .dtype = ZDIST_DTYPE_INT64},
};

static void
test_columns_and_batches(void)
{
    char *dir = zdist_test_tmpdir("tfr");
    char *paths[2] = {s_write(dir, 0, 5), s_write(dir, 1, 4)};
    zdist_input_spec_t spec = {.format = ZDIST_INPUT_FORMAT_TFRECORD, .paths = (const char *const *) paths,
                               .n_paths = 2, .features = s_specs, .n_features = 4, .label = "label"};
    zdist_dataset_t *ds = NULL;
    zdist_error_t err = {0};
    zdist_auto_shard_policy_t applied;
    CU_ASSERT_EQUAL_FATAL(zdist_dataset_load(&spec, NULL, ZDIST_AUTO_SHARD_AUTO, &ds, &applied, &err), 0);
    CU_ASSERT_EQUAL(applied, ZDIST_AUTO_SHARD_FILE);
    CU_ASSERT_EQUAL(zdist_dataset_size(ds), 9);
    CU_ASSERT_EQUAL(zdist_dataset_dim(ds), 2); /* the float32 features: x */
    CU_ASSERT_EQUAL(zdist_dataset_label_dtype(ds), ZDIST_DTYPE_INT32);
    CU_ASSERT_EQUAL(zdist_dataset_num_classes(ds), 2);
    CU_ASSERT_EQUAL(zdist_dataset_num_columns(ds), 3); /* the label is not a column */
    CU_ASSERT_EQUAL(zdist_dataset_origins(ds)[6], (INT64_C(1) << 40) | 1);

    /* batches of 4, in order: the columns follow the rows */
    zdist_input_options_t o;
    zdist_input_options_init(&o, 4);
    zdist_input_t *in = zdist_input_new(ds, NULL, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    const zdist_input_step_t *st;
    CU_ASSERT_EQUAL(zdist_input_next(in, &st), 1);
    CU_ASSERT_EQUAL(zdist_input_next(in, &st), 1); /* rows 4..7: file 0's row 4, file 1's rows 0..2 */
    const zdist_batch_t *b = &st->replicas[0];
    CU_ASSERT_EQUAL_FATAL(b->ncolumns, 3);
    CU_ASSERT_STRING_EQUAL(b->columns[0].name, "x");
    CU_ASSERT_EQUAL(b->columns[0].width, 2);
    CU_ASSERT_EQUAL(((const float *) b->columns[0].values)[1], -4.0f);
    CU_ASSERT_EQUAL(b->features[0], 4.0f); /* the dense features: x, row by row */
    CU_ASSERT_EQUAL(b->features[1], -4.0f);
    CU_ASSERT_EQUAL(b->features[2], 0.0f); /* row 1 of the batch: file 1's row 0, x = [0, -0] */
    CU_ASSERT_EQUAL(b->features[7], -2.0f); /* row 3: file 1's row 2 */
    CU_ASSERT_EQUAL(((const int64_t *) b->columns[1].values)[3], 1002);
    CU_ASSERT_EQUAL(((const int32_t *) b->labels)[0], 0);
    CU_ASSERT_EQUAL(((const int32_t *) b->labels)[2], 1);
    const zdist_step_column_t *tags = &b->columns[2];
    CU_ASSERT_EQUAL(tags->width, 0);
    /* rows 4 (4 % 3 = 1 tag), file 1's 0 (none), 1 (one), 2 (two) */
    const int64_t want_off[] = {0, 1, 1, 2, 4}, want_ids[] = {4, 1, 2, 3};
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(tags->row_offsets[i], want_off[i]);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(((const int64_t *) tags->values)[i], want_ids[i]);
    zdist_input_destroy(&in);
    zdist_dataset_destroy(&ds);

    /* FILE over 2 pipelines: file k to pipeline k; over 3: too few files, AUTO falls back to DATA */
    zdist_input_context_t *c1 = zdist_input_context_new(2, 1, 2, NULL), *c3 = zdist_input_context_new(3, 0, 3, NULL);
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, c1, ZDIST_AUTO_SHARD_AUTO, &ds, &applied, &err), 0);
    CU_ASSERT_EQUAL(applied, ZDIST_AUTO_SHARD_FILE);
    CU_ASSERT_EQUAL(zdist_dataset_size(ds), 4);
    CU_ASSERT_EQUAL(zdist_dataset_origins(ds)[0], INT64_C(1) << 40);
    zdist_dataset_destroy(&ds);
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, c3, ZDIST_AUTO_SHARD_AUTO, &ds, &applied, &err), 0);
    CU_ASSERT_EQUAL(applied, ZDIST_AUTO_SHARD_DATA);
    CU_ASSERT_EQUAL(zdist_dataset_size(ds), 9);
    zdist_dataset_destroy(&ds);
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, c3, ZDIST_AUTO_SHARD_FILE, &ds, NULL, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "Could not apply FILE based sharding"));

    /* a missing fixed feature without a default: the file, the record, TF's text */
    zdist_feature_spec_t more[5];
    memcpy(more, s_specs, sizeof s_specs);
    more[4] = (zdist_feature_spec_t){.name = "clicks", .kind = ZDIST_FEATURE_FIXED, .dtype = ZDIST_DTYPE_FLOAT32};
    spec.features = more;
    spec.n_features = 5;
    CU_ASSERT_EQUAL(zdist_dataset_load(&spec, NULL, ZDIST_AUTO_SHARD_OFF, &ds, NULL, &err), -EINVAL);
    char want[600];
    snprintf(want, sizeof want, "'%s': record 0 (offset 0): Name: <unknown>, Feature: clicks (data type: float) is "
             "required but could not be found.", paths[0]);
    CU_ASSERT_STRING_EQUAL(err.text, want);
    zdist_input_context_destroy(&c1);
    zdist_input_context_destroy(&c3);
    for (int k = 0; k < 2; k++)
        free(paths[k]);
    zdist_test_rmtree(dir);
    free(dir);
}

static int
s_parse(const char *dataset, zdist_job_t *job, zdist_error_t *err)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\": \"t\", \"strategy\": {\"type\": \"one_device\"}, \"model\": {\"name\": \"mlp\"}, "
             "\"optimizer\": {\"type\": \"sgd\"}, \"epochs\": 1, \"dataset\": {\"format\": \"tfrecord\", "
             "\"global_batch_size\": 8, %s}}", dataset);
    return zdist_job_parse(text, "/d", job, err);
}

static void
test_job_contract(void)
{
    zdist_job_t job;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(s_parse("\"compression\": \"gzip\", \"train\": {\"files\": \"tr/*.tfr\"}, "
                                  "\"test\": {\"files\": \"/t/*\"}, \"label\": \"y\", \"auto_shard_policy\": \"DATA\", "
                                  "\"features\": {\"y\": {\"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": []}, "
                                  "\"d\": {\"kind\": \"fixed\", \"dtype\": \"float32\", \"shape\": [2, 3], \"default\": 0.5}, "
                                  "\"c\": {\"kind\": \"var\", \"dtype\": \"int64\"}}",
                                  &job, &err),
                          0);
    CU_ASSERT_EQUAL(job.format, ZDIST_INPUT_FORMAT_TFRECORD);
    CU_ASSERT_EQUAL(job.compression, ZDIST_TFRECORD_GZIP);
    CU_ASSERT_EQUAL(job.shard_policy, ZDIST_AUTO_SHARD_DATA);
    CU_ASSERT_STRING_EQUAL(job.train.path, "/d/tr/*.tfr");
    CU_ASSERT_STRING_EQUAL(job.label, "y");
    CU_ASSERT_EQUAL_FATAL(job.n_features, 3);
    CU_ASSERT_STRING_EQUAL(job.features[1].name, "d"); /* the document's order */
    CU_ASSERT_EQUAL(job.features[1].rank, 2);
    CU_ASSERT_EQUAL(job.features[1].shape[1], 3);
    CU_ASSERT(job.features[1].has_default && job.features[1].default_float == 0.5);
    CU_ASSERT_EQUAL(job.features[2].kind, ZDIST_FEATURE_VAR);
    /* the message form carries it all */
    zdist_job_t copy;
    CU_ASSERT_EQUAL_FATAL(zdist_job_copy(&job, &copy, &err), 0);
    CU_ASSERT_EQUAL(copy.compression, ZDIST_TFRECORD_GZIP);
    CU_ASSERT_EQUAL_FATAL(copy.n_features, 3);
    CU_ASSERT_EQUAL(copy.features[1].shape[0], 2);
    CU_ASSERT_EQUAL(copy.features[1].default_float, 0.5);
    CU_ASSERT_STRING_EQUAL(copy.label, "y");
    zdist_job_release(&copy);
    zdist_job_release(&job);

    static const struct {
        const char *dataset, *field;
    } bad[] = {
        {"\"train\": {\"path\": \"a\"}, \"label\": \"y\", \"features\": {\"y\": {\"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": []}}",
         "dataset.train.path: unknown field"},
        {"\"train\": {\"files\": \"a\"}, \"label\": \"y\", \"features\": {\"y\": {\"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": [-1]}}",
         "dataset.features.y.shape: every dimension"},
        {"\"train\": {\"files\": \"a\"}, \"label\": \"y\", \"features\": {\"y\": {\"kind\": \"ragged\", \"dtype\": \"int64\"}}",
         "dataset.features.y.kind: must be \"fixed\" or \"var\""},
        {"\"train\": {\"files\": \"a\"}, \"label\": \"y\", \"features\": {\"y\": {\"kind\": \"var\", \"dtype\": \"int64\", \"shape\": []}}",
         "dataset.features.y.shape: unknown field"},
        {"\"train\": {\"files\": \"a\"}, \"label\": \"z\", \"features\": {\"y\": {\"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": []}}",
         "dataset.label: 'z' is not among the features"},
        {"\"train\": {\"files\": \"a\"}, \"label\": \"y\", \"features\": {\"y\": {\"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": [], \"default\": 0.5}}",
         "dataset.features.y.default: must be an integer"},
        {"\"train\": {\"files\": \"a\"}, \"features\": {\"y\": {\"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": []}}",
         "dataset.label: missing"},
        {"\"train\": {\"files\": \"a\"}, \"label\": \"y\", \"features\": {}", "dataset.features: must be an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        CU_ASSERT_EQUAL(s_parse(bad[i].dataset, &job, &err), -EINVAL);
        if (strncmp(err.text, bad[i].field, strlen(bad[i].field)) != 0) {
            fprintf(stderr, "\n  case %zu: got '%s', want '%s...'\n", i, err.text, bad[i].field);
            CU_FAIL("the refusal does not name the field");
        }
    }
}

/* The exact AUC of a split evaluated in parts (workers), combined: the AUC of
   every pair together, as one evaluator would compute it, and not the mean of
   the parts' AUCs. */
static void
test_exact_auc_of_parts(void)
{
    enum { N = 3000 };
    static float y[N], p[N];
    uint64_t s = 7;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        y[i] = (float) ((s >> 33) % 3 == 0);
        /* coarse scores: many ties, and the positives score higher in part 0 only */
        p[i] = (float) ((s >> 40) % 50) / 49.0f;
        if (i < N / 3 && y[i] != 0)
            p[i] = p[i] * 0.5f + 0.5f;
    }
    /* Mann-Whitney by pairs: positives over negatives, ties half */
    double good = 0, pairs = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; i < N && y[i] != 0 && j < N; j++)
            if (y[j] == 0) {
                pairs += 1;
                good += p[i] > p[j] ? 1 : p[i] == p[j] ? 0.5 : 0;
            }
    double want = good / pairs;

    zdist_auc_t *whole = zdist_auc_new(0, NULL), *parts[3];
    zdist_evaluation_t ev[3];
    uint8_t lab[N];
    double mean_of_parts = 0;
    for (int i = 0; i < N; i++)
        lab[i] = y[i] != 0;
    for (int k = 0; k < 3; k++) {
        parts[k] = zdist_auc_new(0, NULL);
        CU_ASSERT_EQUAL(zdist_auc_update(parts[k], y + k * N / 3, p + k * N / 3, N / 3), 0);
        double a;
        CU_ASSERT_EQUAL(zdist_auc_result(parts[k], &a), 0);
        mean_of_parts += a / 3;
        ev[k] = (zdist_evaluation_t){.total = N / 3, .loss_sum = k + 1.0, .correct = 10, .has_correct = true};
        ev[k].scored = zdist_auc_exact_parts(parts[k], &ev[k].predictions, &ev[k].positives);
        CU_ASSERT_EQUAL(ev[k].scored, N / 3);
        CU_ASSERT_EQUAL(memcmp(ev[k].positives, lab + k * N / 3, N / 3), 0);
    }
    zdist_evaluation_t sum = {0};
    for (int k = 0; k < 3; k++)
        CU_ASSERT_EQUAL(zdist_evaluation_add(&sum, &ev[k], whole), 0);
    CU_ASSERT_EQUAL(zdist_evaluation_finish(&sum, whole), 0);
    CU_ASSERT(sum.has_auc);
    CU_ASSERT_EQUAL(sum.scored, N);
    CU_ASSERT_EQUAL(sum.total, N);
    CU_ASSERT_EQUAL(sum.correct, 30);
    CU_ASSERT_DOUBLE_EQUAL(sum.loss_sum, 6.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(sum.auc, want, 1e-12);
    CU_ASSERT(fabs(mean_of_parts - want) > 1e-3); /* averaging would have been wrong here */
    /* a part without predictions adds counts only; no AUC from none */
    zdist_evaluation_t none = {0}, plain = {.total = 5};
    zdist_auc_t *empty = zdist_auc_new(0, NULL);
    CU_ASSERT_EQUAL(zdist_evaluation_add(&none, &plain, empty), 0);
    CU_ASSERT_EQUAL(zdist_evaluation_finish(&none, empty), 0);
    CU_ASSERT(!none.has_auc);
    CU_ASSERT_EQUAL(none.total, 5);
    zdist_auc_destroy(&empty);
    for (int k = 0; k < 3; k++)
        zdist_auc_destroy(&parts[k]);
    zdist_auc_destroy(&whole);
}

void
zdist_test_input_tfrecord_register(void)
{
    ZDIST_SUITE("input_tfrecord", {"columns, labels and batches; FILE, DATA and AUTO; a missing feature", test_columns_and_batches},
                {"the job file's tfrecord contract and refusals naming the field", test_job_contract},
                {"the exact AUC of parts combined equals the whole's", test_exact_auc_of_parts});
}
