/* CUnit suite: functional model specs — the graph's inputs, order, shapes and parameters, errors naming layer and field (unknown names, cycles, shapes), the summary, and the Criteo examples. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zdist/job.h"
#include "zdist/model_spec.h"

#define S_FEATURES                                                                                                    \
    "\"features\": {\"I1\": {\"kind\": \"fixed\", \"dtype\": \"float32\", \"shape\": []},"                         \
    " \"I2\": {\"kind\": \"fixed\", \"dtype\": \"float32\", \"shape\": []},"                                        \
    " \"V\": {\"kind\": \"fixed\", \"dtype\": \"float32\", \"shape\": [4]},"                                        \
    " \"C1\": {\"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": []},"                                          \
    " \"C2\": {\"kind\": \"var\", \"dtype\": \"int64\"},"                                                            \
    " \"C3\": {\"kind\": \"fixed\", \"dtype\": \"int64\", \"shape\": [3]}}"

/* A small DLRM, its layers out of order on purpose. */
static const char *s_dlrm =
    "{\"inputs\": [{\"name\": \"dense_in\", \"features\": [\"I1\", \"I2\", \"V\"]}],"
    " \"layers\": ["
    "{\"name\": \"top\", \"dense\": {\"units\": 1}, \"inputs\": [\"interact\"]},"
    "{\"name\": \"interact\", \"dot_interaction\": {\"concat_dense\": true},"
    " \"inputs\": [\"bottom\", \"e1\", \"e2\"]},"
    "{\"name\": \"bottom\", \"dense\": {\"units\": 8, \"activation\": \"relu\"}, \"inputs\": [\"dense_in\"]},"
    "{\"name\": \"e1\", \"embedding\": {\"input_dim\": 100, \"output_dim\": 8}, \"inputs\": [\"C1\"]},"
    "{\"name\": \"h2\", \"hashing\": {\"num_bins\": 50}, \"inputs\": [\"C2\"]},"
    "{\"name\": \"e2\", \"embedding\": {\"input_dim\": 50, \"output_dim\": 8, \"combiner\": \"sum\"},"
    " \"inputs\": [\"h2\"]}],"
    " \"output\": \"top\", \"loss\": \"binary_crossentropy\", " S_FEATURES "}";

static int
s_find(const zdist_model_spec_t *spec, const char *name)
{
    for (int i = 0; i < spec->num_layers; i++)
        if (strcmp(spec->layers[i].name, name) == 0)
            return i;
    return -1;
}

static void
test_dlrm(void)
{
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    int rc = zdist_model_graph_parse(s_dlrm, &spec, &err);
    if (rc < 0)
        fprintf(stderr, "\n  %s", err.text);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT(spec.graph);
    CU_ASSERT_EQUAL(spec.num_layers, 6);
    /* dense_in, then the features named directly, as they are met */
    CU_ASSERT_EQUAL_FATAL(spec.num_inputs, 3);
    CU_ASSERT_STRING_EQUAL(spec.inputs[0].name, "dense_in");
    CU_ASSERT_EQUAL(spec.inputs[0].shape.rank, 1);
    CU_ASSERT_EQUAL(spec.inputs[0].shape.dims[0], 6);
    CU_ASSERT_EQUAL(spec.inputs[0].nfeatures, 3);
    CU_ASSERT_EQUAL(spec.inputs[0].widths[2], 4);
    CU_ASSERT_STRING_EQUAL(spec.inputs[1].name, "C1");
    CU_ASSERT_EQUAL(spec.inputs[1].dtype, ZDIST_DTYPE_INT64);
    CU_ASSERT_EQUAL(spec.inputs[1].shape.rank, 0);
    CU_ASSERT(spec.inputs[2].ragged);
    /* each layer after what it reads, the output last */
    for (int i = 0; i < spec.num_layers; i++)
        for (int j = 0; j < spec.layers[i].ninputs; j++)
            CU_ASSERT(spec.layers[i].inputs[j] < i);
    CU_ASSERT_STRING_EQUAL(spec.layers[spec.num_layers - 1].name, "top");
    int inter = s_find(&spec, "interact"), h2 = s_find(&spec, "h2"), e1 = s_find(&spec, "e1");
    CU_ASSERT_FATAL(inter >= 0 && h2 >= 0 && e1 >= 0);
    /* 3 vectors of 8: 3 pairs after the 8 dense values */
    CU_ASSERT_EQUAL(spec.layers[inter].out.dims[0], 11);
    CU_ASSERT_EQUAL(spec.layers[inter].ninputs, 3);
    CU_ASSERT_EQUAL(spec.layers[h2].dtype, ZDIST_DTYPE_INT64);
    CU_ASSERT(spec.layers[h2].ragged);
    CU_ASSERT_EQUAL(spec.layers[e1].out.rank, 1);
    CU_ASSERT_EQUAL(spec.layers[e1].params, 800);
    CU_ASSERT_EQUAL(spec.layers[e1].inputs[0], -1 - 1);
    /* bottom 6*8+8, e1 800, e2 400, top 11+1 */
    CU_ASSERT_EQUAL(spec.total_params, 56 + 800 + 400 + 12);
    char *text = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_model_spec_summary(&spec, "functional", &text), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Model: \"functional\"\n"));
    /* Keras's columns: 32, 53, 65, 98 */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Layer (type)                    Output Shape         Param #     "
                                        "Connected to                     \n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "dense_in (InputLayer)           [(None, 6)]          0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "C1 (InputLayer)                 [(None,)]            0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "C2 (InputLayer)                 [(None, None)]       0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "interact (DotInteraction)       (None, 11)           0           "
                                        "bottom[0][0]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "                                                                 e1[0][0]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Total params: 1,268\n"));
    if (getenv("ZDIST_TEST_VERBOSE"))
        fprintf(stderr, "\n%s", text);
    free(text);
    zdist_model_spec_release(&spec);
    CU_ASSERT_PTR_NULL(spec.inputs);
}

/* parse must fail with -EINVAL and exactly this message. */
static void
s_refused(const char *inputs, const char *layers, const char *output, const char *want)
{
    char text[4096];
    snprintf(text, sizeof text, "{%s\"layers\": [%s], \"output\": \"%s\", \"loss\": \"binary_crossentropy\", "
             S_FEATURES "}", inputs, layers, output);
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    int rc = zdist_model_graph_parse(text, &spec, &err);
    CU_ASSERT_EQUAL(rc, -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, want);
    if (rc != -EINVAL || strcmp(err.text, want) != 0)
        fprintf(stderr, "\n  got '%s'\n  for %s", err.text, text);
    CU_ASSERT_PTR_NULL(spec.layers);
}

#define S_DENSE_IN "\"inputs\": [{\"name\": \"d\", \"features\": [\"I1\", \"I2\"]}], "
#define S_TOP(in) "{\"name\": \"top\", \"dense\": {\"units\": 1}, \"inputs\": [\"" in "\"]}"

static void
test_errors(void)
{
    s_refused(S_DENSE_IN, S_TOP("dence"), "top",
              "model.layers[0] (top).inputs[0]: 'dence' is not an input, a layer or a feature of dataset.features");
    s_refused(S_DENSE_IN, S_TOP("d"), "tpo", "model.output: must name the layer whose value is the model's output, "
                                             "got \"tpo\"");
    /* a cycle, named along its path */
    s_refused(S_DENSE_IN,
              "{\"name\": \"a\", \"dense\": {\"units\": 2}, \"inputs\": [\"b\"]},"
              "{\"name\": \"b\", \"dense\": {\"units\": 2}, \"inputs\": [\"c\"]},"
              "{\"name\": \"c\", \"add\": {}, \"inputs\": [\"a\", \"d\"]}," S_TOP("a"),
              "top", "model.layers[0] (a).inputs: a cycle: 'a' -> 'b' -> 'c' -> 'a' (each reads the next); a "
                     "functional model is a DAG");
    s_refused(S_DENSE_IN, "{\"name\": \"top\", \"dense\": {\"units\": 1}, \"inputs\": [\"top\"]}", "top",
              "model.layers[0] (top).inputs[0]: a layer cannot read itself");
    /* shapes and dtypes */
    s_refused(S_DENSE_IN, "{\"name\": \"s\", \"add\": {}, \"inputs\": [\"d\", \"V\"]}," S_TOP("s"), "top",
              "model.layers[0] (s).inputs[1]: 'V' has shape (4), 'd' (inputs[0]) (2); add sums tensors of one shape");
    s_refused(S_DENSE_IN, "{\"name\": \"x\", \"dot_interaction\": {}, \"inputs\": [\"d\", \"V\"]}," S_TOP("x"), "top",
              "model.layers[0] (x).inputs[1]: 'V' has shape (4), 'd' (inputs[0]) (2); the vectors must have one width");
    s_refused(S_DENSE_IN, "{\"name\": \"x\", \"cross\": {}, \"inputs\": [\"d\", \"V\"]}," S_TOP("x"), "top",
              "model.layers[0] (x).inputs[1]: 'V' has shape (4), 'd' (inputs[0]) (2); the vectors must have one width");
    s_refused("", S_TOP("C1"), "top",
              "model.layers[0] (top).inputs[0]: 'C1' gives int64 ids; dense reads float32 values (put ids through an "
              "embedding first)");
    s_refused("", "{\"name\": \"e\", \"embedding\": {\"input_dim\": 9, \"output_dim\": 2}, \"inputs\": [\"I1\"]},"
              S_TOP("e"), "top",
              "model.layers[0] (e).inputs[0]: 'I1' gives float32 values; embedding reads int64 ids (a categorical "
              "feature, or a hashing of one)");
    s_refused("", "{\"name\": \"e\", \"embedding\": {\"input_dim\": 9, \"output_dim\": 2}, \"inputs\": [\"C3\"]},"
              S_TOP("e"), "top", "model.layers[1] (top).inputs[0]: 'e' has shape (3, 2); dense reads vectors (add a "
                                 "flatten layer)");
    s_refused(S_DENSE_IN, "{\"name\": \"c\", \"concat\": {}, \"inputs\": [\"d\"]}," S_TOP("c"), "top",
              "model.layers[0] (c).inputs: concat reads 2..64 inputs, got 1");
    /* names, fields, what leads nowhere */
    s_refused(S_DENSE_IN, "{\"name\": \"d\", \"dense\": {\"units\": 2}, \"inputs\": [\"I1\"]}," S_TOP("d"), "top",
              "model.layers[0] (d).name: 'd' is also model.inputs[0]'s; names are unique");
    s_refused(S_DENSE_IN, "{\"name\": \"u\", \"dense\": {\"units\": 2}, \"inputs\": [\"d\"]}," S_TOP("d"), "top",
              "model.layers[0] (u): does not lead to model.output ('top'): it would not be trained; remove it or "
              "connect it");
    s_refused("\"inputs\": [{\"name\": \"d\", \"features\": [\"I1\", \"C1\"]}], ", S_TOP("d"), "top",
              "model.inputs[0].features[1]: 'C1' is int64, 'I1' before it float32; a group concatenates features of "
              "one dtype");
    s_refused("\"inputs\": [{\"name\": \"d\", \"features\": [\"I9\"]}], ", S_TOP("d"), "top",
              "model.inputs[0].features[0]: 'I9' is not a feature of dataset.features");
    s_refused(S_DENSE_IN, "{\"name\": \"top\", \"dense\": {\"units\": 1}, \"conv\": {}, \"inputs\": [\"d\"]}", "top",
              "model.layers[0] (top).conv: unknown field; a layer is {\"name\", one \"TYPE\": {fields}, \"inputs\"} "
              "with TYPE one of dense, relu, tanh, sigmoid, softmax, flatten, concat, add, hashing, embedding, "
              "dot_interaction, cross");
    s_refused(S_DENSE_IN, "{\"name\": \"top\", \"dense\": {\"units\": 1, \"activation\": \"relu\"}, \"inputs\": "
              "[\"d\"]}", "top", "model.output ('top'): binary_crossentropy takes a logit (no activation) or sigmoid, "
                                 "not relu");
    s_refused(S_DENSE_IN, "{\"name\": \"h\", \"hashing\": {}, \"inputs\": [\"C1\"]}," S_TOP("d"), "top",
              "model.layers[0] (h).hashing.num_bins: missing; add the number of ids to hash into, e.g. \"num_bins\": "
              "100000");
    s_refused(S_DENSE_IN, "{\"name\": \"x\", \"conv2d\": {\"filters\": 2, \"kernel\": 1}, \"inputs\": [\"d\"]},"
              S_TOP("x"), "top", "model.layers[0] (x): conv2d is not a layer of functional models yet; use it in a "
                                 "sequential model");
    /* a feature whose name the batch's columns would not match */
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    char text[1024], name[80];
    memset(name, 'f', 70);
    name[70] = '\0';
    snprintf(text, sizeof text, "{\"layers\": [" S_TOP("%s") "], \"output\": \"top\", \"loss\": "
             "\"binary_crossentropy\", \"features\": {\"%s\": {\"kind\": \"fixed\", \"dtype\": \"float32\", "
             "\"shape\": [2]}}}", name, name);
    CU_ASSERT_EQUAL(zdist_model_graph_parse(text, &spec, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "model.layers[0] (top).inputs[0].features[0]: 'ffff"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "a model reads features named in at most 63 bytes"));
    /* without the dataset's features */
    CU_ASSERT_EQUAL(zdist_model_graph_parse("{\"layers\": [" S_TOP("I1") "], \"output\": \"top\", \"loss\": "
                                            "\"binary_crossentropy\"}", &spec, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "model: a functional model reads named features: the dataset needs a "
                                            "\"features\" spec"));
    /* a sequential stack refuses the graph's layers */
    CU_ASSERT_EQUAL(zdist_model_spec_parse("{\"input_shape\": [4], \"layers\": [{\"cross\": {}}, {\"dense\": "
                                           "{\"units\": 1}}], \"loss\": \"binary_crossentropy\"}", false, &spec, &err),
                    -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "model.layers[0].cross: cross reads named features or several layers: it is a "
                                     "layer of functional models (model.name \"functional\"), not of a sequential "
                                     "stack");
}

/* An embedding without input_dim and with "dynamic" (issue 29's block, the
   sequential parser's): a table without a vocabulary reading an int64
   feature as it is; no parameters counted (rows come as ids are admitted). */
static void
test_dynamic(void)
{
    const char *text =
        "{\"inputs\": [{\"name\": \"d\", \"features\": [\"I1\", \"I2\"]}], \"layers\": ["
        "{\"name\": \"bottom\", \"dense\": {\"units\": 4}, \"inputs\": [\"d\"]},"
        "{\"name\": \"e1\", \"embedding\": {\"output_dim\": 4, \"dynamic\": {\"min_count\": 2, "
        "\"evict_after_steps\": 100}}, \"inputs\": [\"C1\"]},"
        "{\"name\": \"e2\", \"embedding\": {\"output_dim\": 4, \"combiner\": \"sum\", \"dynamic\": {}}, "
        "\"inputs\": [\"C2\"]},"
        "{\"name\": \"x\", \"dot_interaction\": {\"concat_dense\": true}, \"inputs\": [\"bottom\", \"e1\", \"e2\"]},"
        S_TOP("x") "], \"output\": \"top\", \"loss\": \"binary_crossentropy\", " S_FEATURES "}";
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    int rc = zdist_model_graph_parse(text, &spec, &err);
    if (rc < 0)
        fprintf(stderr, "\n  %s", err.text);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    int e1 = s_find(&spec, "e1"), e2 = s_find(&spec, "e2");
    CU_ASSERT_FATAL(e1 >= 0 && e2 >= 0);
    CU_ASSERT(spec.layers[e1].dynamic && spec.layers[e2].dynamic);
    CU_ASSERT_EQUAL(spec.layers[e1].min_count, 2);
    CU_ASSERT_EQUAL(spec.layers[e1].evict_after_steps, 100);
    CU_ASSERT_EQUAL(spec.layers[e1].input_dim, 0);
    CU_ASSERT_EQUAL(spec.layers[e1].params, 0);
    CU_ASSERT_EQUAL(spec.layers[e1].out.dims[0], 4);
    CU_ASSERT_EQUAL(spec.layers[e2].out.rank, 1); /* a var feature's ids combined */
    /* bottom 2*4+4, top (4 + 3 pairs) + 1: the tables count nothing */
    CU_ASSERT_EQUAL(spec.total_params, 12 + 8);
    zdist_model_spec_release(&spec);

    /* the ids as they are: a hashing before a dynamic table is refused, naming the field */
    s_refused("",
              "{\"name\": \"h\", \"hashing\": {\"num_bins\": 10}, \"inputs\": [\"C1\"]},"
              "{\"name\": \"e\", \"embedding\": {\"output_dim\": 2, \"dynamic\": {}}, \"inputs\": [\"h\"]},"
              S_TOP("e"), "top",
              "model.layers[1] (e).inputs[0]: 'h' is a hashing layer; a dynamic embedding (no input_dim) takes the "
              "ids as they are: name the int64 feature itself (or an input of int64 features)");
    s_refused("",
              "{\"name\": \"e\", \"embedding\": {\"output_dim\": 2, \"dynamic\": {}}, \"inputs\": [\"I1\"]},"
              S_TOP("e"), "top",
              "model.layers[0] (e).inputs[0]: 'I1' gives float32 values; embedding reads int64 ids (a categorical "
              "feature, or a hashing of one)");
    /* the dynamic block is the sequential parser's, its errors with the graph's place */
    s_refused("",
              "{\"name\": \"e\", \"embedding\": {\"input_dim\": 5, \"output_dim\": 2, \"dynamic\": {}}, "
              "\"inputs\": [\"C1\"]}," S_TOP("e"), "top",
              "model.layers[0] (e).embedding.input_dim: a dynamic embedding has no vocabulary: its rows are keyed "
              "by the ids as they are; drop input_dim");
}

/* The job file's functional model: its params carry the dataset's features
   without the label; `zdist_job_parse` checks the graph. The example files
   are checked whole once the job parser knows format "tfrecord" (the
   TFRecord input), and their model against their features until then. */
static void
s_example(const char *file, int want_layers, int64_t want_params)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/deploy/examples/%s", ZDIST_SOURCE_DIR, file);
    zdist_job_t job;
    zdist_error_t err = {0};
    char *params = NULL;
    int rc = zdist_job_load(path, &job, &err);
    if (rc == 0) {
        CU_ASSERT_STRING_EQUAL(job.model, ZDIST_MODEL_FUNCTIONAL);
        params = strdup(job.model_params);
        zdist_job_release(&job);
    } else {
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dataset."));
        if (!strstr(err.text, "dataset."))
            fprintf(stderr, "\n  %s: %s", file, err.text);
        json_error_t jerr;
        json_t *root = json_load_file(path, 0, &jerr), *model = json_deep_copy(json_object_get(root, "model"));
        json_t *features = json_deep_copy(json_object_get(json_object_get(root, "dataset"), "features"));
        CU_ASSERT_FATAL(model && features);
        json_object_del(model, "name");
        json_object_del(features, json_string_value(json_object_get(json_object_get(root, "dataset"), "label")));
        json_object_set_new(model, "features", features);
        params = json_dumps(model, JSON_COMPACT);
        json_decref(model);
        json_decref(root);
    }
    zdist_model_spec_t spec;
    rc = zdist_model_graph_parse(params, &spec, &err);
    if (rc < 0)
        fprintf(stderr, "\n  %s: %s", file, err.text);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(spec.num_layers, want_layers);
    CU_ASSERT_EQUAL(spec.total_params, want_params);
    CU_ASSERT_EQUAL(spec.num_inputs, 27); /* dense_in and C1..C26 */
    free(params);
    zdist_model_spec_release(&spec);
}

static void
test_examples(void)
{
    /* DLRM: bottom 13x64+64, 64x16+16; tables; top 367x64+64, 64x32+32, 32+1 */
    int64_t bins[26] = {2920, 1166, 131072, 131072, 610, 48, 25034, 1266, 16, 131072, 11366, 131072, 6388,
                        54, 29984, 131072, 20, 11304, 4346, 16, 131072, 36, 30, 131072, 210, 131072};
    int64_t rows = 0;
    for (int i = 0; i < 26; i++)
        rows += bins[i];
    int64_t dlrm = 13 * 64 + 64 + 64 * 16 + 16 + rows * 16 + 367 * 64 + 64 + 64 * 32 + 32 + 32 + 1;
    s_example("dlrm-criteo-run.json", 2 + 52 + 1 + 3, dlrm);
    s_example("dlrm-criteo-ps-hashed.json", 2 + 52 + 1 + 3, dlrm);
    /* on dynamic tables: no hashing layers, and the tables count no parameters */
    s_example("dlrm-criteo-ps.json", 2 + 26 + 1 + 3, dlrm - rows * 16);
    /* DCN-v2: x0 = 13 + 26x8 = 221; two crosses; 221x128+128, 128x64+64, 64+1 */
    int64_t dcn = rows * 8 + 2 * (221 * 221 + 221) + 221 * 128 + 128 + 128 * 64 + 64 + 64 + 1;
    s_example("dcn-criteo-run.json", 52 + 1 + 2 + 3, dcn);
}

/* zdist_job_parse: a functional model's params carry the dataset's
   features, the label left out; the graph is checked at parse. */
static void
test_job(void)
{
    zdist_job_t job;
    zdist_error_t err = {0};
    const char *text = "{\"name\": \"f\", \"strategy\": {\"type\": \"one_device\"}, \"optimizer\": {\"type\": \"sgd\"},"
                       " \"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 64, \"dim\": 4, "
                       "\"classes\": 2}, \"global_batch_size\": 8}, \"steps\": 5, \"model\": {\"name\": "
                       "\"functional\", \"layers\": [" S_TOP("I1") "], \"output\": \"top\", \"loss\": "
                       "\"binary_crossentropy\"}}";
    /* no features (synthetic data): refused at parse, naming the fix */
    CU_ASSERT_EQUAL(zdist_job_parse(text, NULL, &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "model: a functional model reads named features"));
    const char *bad = "{\"name\": \"f\", \"strategy\": {\"type\": \"one_device\"}, \"optimizer\": {\"type\": \"sgd\"},"
                      " \"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 64, \"dim\": 4, "
                      "\"classes\": 2}, \"global_batch_size\": 8}, \"steps\": 5, \"model\": {\"name\": "
                      "\"functional\", \"layers\": [], \"output\": \"top\", \"loss\": \"binary_crossentropy\", "
                      "\"input_shape\": [3]}}";
    CU_ASSERT_EQUAL(zdist_job_parse(bad, NULL, &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "model.input_shape: unknown field"));
}

void
zdist_test_model_graph_register(void)
{
    ZDIST_SUITE("model_graph",
                {"a DLRM graph: inputs, order, shapes, parameters, summary", test_dlrm},
                {"errors name the layer and field: names, cycles, shapes, dtypes", test_errors},
                {"dynamic embeddings: ids as they are, no vocabulary, errors naming the field", test_dynamic},
                {"the Criteo examples' models (DLRM, DLRM under parameter_server on dynamic and hashed tables, DCN-v2)", test_examples},
                {"the job carries the features and checks the graph", test_job});
}
