/* CUnit suite: the sequential model spec — layers, shapes and parameter counts as Keras, errors naming layer and field, the summary. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zdist/job.h"
#include "zdist/model_spec.h"

/* The 2-conv Fashion-MNIST CNN of TensorFlow's tutorials. */
static const char *s_cnn =
    "{\"input_shape\": [28, 28, 1], \"layers\": ["
    "{\"conv2d\": {\"filters\": 32, \"kernel\": 3, \"activation\": \"relu\"}},"
    "{\"max_pool2d\": {\"pool\": 2}},"
    "{\"conv2d\": {\"filters\": 64, \"kernel\": 3, \"activation\": \"relu\"}},"
    "{\"max_pool2d\": {}},"
    "\"flatten\","
    "{\"dense\": {\"units\": 128, \"activation\": \"relu\"}},"
    "{\"dense\": {\"units\": 10}}],"
    " \"loss\": \"sparse_categorical_crossentropy\"}";

static void
test_cnn_shapes(void)
{
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_model_spec_parse(s_cnn, false, &spec, &err), 0);
    CU_ASSERT_EQUAL(spec.num_layers, 7);
    CU_ASSERT_EQUAL(zdist_model_spec_input_size(&spec), 784);
    const int64_t want[7][4] = {{3, 26, 26, 32}, {3, 13, 13, 32}, {3, 11, 11, 64}, {3, 5, 5, 64},
                                {1, 1600}, {1, 128}, {1, 10}};
    const int64_t params[7] = {320, 0, 18496, 0, 0, 204928, 1290};
    const char *names[7] = {"conv2d", "max_pooling2d", "conv2d_1", "max_pooling2d_1", "flatten", "dense", "dense_1"};
    for (int i = 0; i < 7; i++) {
        const zdist_layer_spec_t *l = &spec.layers[i];
        CU_ASSERT_EQUAL(l->out.rank, want[i][0]);
        for (int d = 0; d < l->out.rank; d++)
            CU_ASSERT_EQUAL(l->out.dims[d], want[i][d + 1]);
        CU_ASSERT_EQUAL(l->params, params[i]);
        CU_ASSERT_STRING_EQUAL(l->name, names[i]);
    }
    CU_ASSERT_EQUAL(spec.layers[0].activation, ZDIST_ACT_RELU);
    CU_ASSERT_EQUAL(spec.layers[6].activation, ZDIST_ACT_LINEAR);
    CU_ASSERT_EQUAL(spec.layers[1].strides[0], 2); /* strides default to the pool */
    CU_ASSERT_EQUAL(spec.total_params, 225034);
    CU_ASSERT_EQUAL(spec.non_trainable_params, 0);
    CU_ASSERT_EQUAL(zdist_model_spec_check_data(&spec, 784, 10, ZDIST_DTYPE_INT32, &err), 0);
    CU_ASSERT_EQUAL(zdist_model_spec_check_data(&spec, 100, 10, ZDIST_DTYPE_INT32, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "model.input_shape: (28, 28, 1) is 784 features per example, the data "
                                            "has 100"));
    CU_ASSERT_EQUAL(zdist_model_spec_check_data(&spec, 784, 12, ZDIST_DTYPE_INT32, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "model.layers[6]: 10 outputs for data with 12 classes"));
    zdist_model_spec_release(&spec);
    CU_ASSERT_PTR_NULL(spec.layers);
}

/* Keras's model.summary() of the same model, character for character. */
static void
test_summary(void)
{
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_model_spec_parse(s_cnn, false, &spec, &err), 0);
    char *text = NULL;
    CU_ASSERT_EQUAL_FATAL(zdist_model_spec_summary(&spec, "sequential", &text), 0);
    const char *want =
        "Model: \"sequential\"\n"
        "_________________________________________________________________\n"
        "Layer (type)                 Output Shape              Param #   \n"
        "=================================================================\n"
        "conv2d (Conv2D)              (None, 26, 26, 32)        320       \n"
        "_________________________________________________________________\n"
        "max_pooling2d (MaxPooling2D) (None, 13, 13, 32)        0         \n"
        "_________________________________________________________________\n"
        "conv2d_1 (Conv2D)            (None, 11, 11, 64)        18496     \n"
        "_________________________________________________________________\n"
        "max_pooling2d_1 (MaxPooling2 (None, 5, 5, 64)          0         \n"
        "_________________________________________________________________\n"
        "flatten (Flatten)            (None, 1600)              0         \n"
        "_________________________________________________________________\n"
        "dense (Dense)                (None, 128)               204928    \n"
        "_________________________________________________________________\n"
        "dense_1 (Dense)              (None, 10)                1290      \n"
        "=================================================================\n"
        "Total params: 225,034\n"
        "Trainable params: 225,034\n"
        "Non-trainable params: 0\n"
        "_________________________________________________________________\n";
    CU_ASSERT_STRING_EQUAL(text, want);
    if (strcmp(text, want) != 0)
        fprintf(stderr, "\n%s", text);
    free(text);
    zdist_model_spec_release(&spec);
}

/* Same padding and strides as TF; batch norm's moving statistics are
   non-trainable parameters; pools keep channels. */
static void
test_padding_and_batch_norm(void)
{
    const char *text =
        "{\"input_shape\": [28, 28, 3], \"layers\": ["
        "{\"conv2d\": {\"filters\": 8, \"kernel\": [5, 3], \"strides\": 2, \"padding\": \"same\", \"use_bias\": false}},"
        "{\"batch_norm\": {\"momentum\": 0.9}},"
        "\"relu\","
        "{\"avg_pool2d\": {\"pool\": 3, \"strides\": [2, 1], \"padding\": \"same\"}},"
        "{\"max_pool2d\": {\"pool\": [2, 3], \"strides\": 1}},"
        "\"flatten\", {\"dropout\": {\"rate\": 0.25}},"
        "{\"dense\": {\"units\": 1, \"activation\": \"sigmoid\", \"name\": \"out\"}}],"
        " \"loss\": \"binary_crossentropy\"}";
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_model_spec_parse(text, false, &spec, &err), 0);
    const zdist_layer_spec_t *c = &spec.layers[0];
    CU_ASSERT_EQUAL(c->out.dims[0], 14);
    CU_ASSERT_EQUAL(c->out.dims[1], 14);
    CU_ASSERT_EQUAL(c->out.dims[2], 8);
    CU_ASSERT_EQUAL(c->pad_top, 1);  /* (13*2 + 5 - 28) / 2 */
    CU_ASSERT_EQUAL(c->pad_left, 0); /* (13*2 + 3 - 28) / 2 */
    CU_ASSERT_EQUAL(c->params, 5 * 3 * 3 * 8);
    CU_ASSERT_EQUAL(spec.layers[1].params, 32);
    CU_ASSERT_EQUAL(spec.layers[1].non_trainable, 16);
    CU_ASSERT_DOUBLE_EQUAL(spec.layers[1].momentum, 0.9, 0);
    CU_ASSERT_DOUBLE_EQUAL(spec.layers[1].epsilon, 1e-3, 0);
    CU_ASSERT_EQUAL(spec.layers[2].kind, ZDIST_LAYER_ACTIVATION);
    CU_ASSERT_EQUAL(spec.layers[2].activation, ZDIST_ACT_RELU);
    CU_ASSERT_EQUAL(spec.layers[3].out.dims[0], 7);
    CU_ASSERT_EQUAL(spec.layers[3].out.dims[1], 14);
    CU_ASSERT_EQUAL(spec.layers[3].pad_top, 0);  /* (6*2 + 3 - 14) / 2 */
    CU_ASSERT_EQUAL(spec.layers[3].pad_left, 1); /* (13*1 + 3 - 14) / 2 */
    CU_ASSERT_EQUAL(spec.layers[4].out.dims[0], 6);
    CU_ASSERT_EQUAL(spec.layers[4].out.dims[1], 12);
    CU_ASSERT_EQUAL(spec.layers[5].out.dims[0], 6 * 12 * 8);
    CU_ASSERT_STRING_EQUAL(spec.layers[7].name, "out");
    CU_ASSERT_EQUAL(spec.total_params, 360 + 32 + 577);
    CU_ASSERT_EQUAL(spec.non_trainable_params, 16);
    char *sum = NULL;
    CU_ASSERT_EQUAL(zdist_model_spec_summary(&spec, "bn", &sum), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(sum, "batch_normalization (BatchNo (None, 14, 14, 8)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(sum, "Trainable params: 953\nNon-trainable params: 16\n"));
    free(sum);
    zdist_model_spec_release(&spec);
}

/* Wide and deep on libsvm: an embedding of the ids, then the dense features. */
static void
test_embedding_concat(void)
{
    const char *text =
        "{\"input_shape\": [1013], \"layers\": ["
        "{\"embedding\": {\"input_dim\": 1000, \"output_dim\": 8, \"combiner\": \"sum\", \"first_id\": 13}},"
        "{\"concat\": {\"dense_features\": 13}},"
        "{\"dense\": {\"units\": 16, \"activation\": \"relu\"}}, {\"dense\": {\"units\": 1}}],"
        " \"loss\": \"binary_crossentropy\"}";
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_model_spec_parse(text, true, &spec, &err), 0);
    CU_ASSERT_EQUAL(spec.layers[0].out.dims[0], 8);
    CU_ASSERT_EQUAL(spec.layers[0].combiner, ZDIST_COMBINER_SUM);
    CU_ASSERT_EQUAL(spec.layers[0].first_id, 13);
    CU_ASSERT_EQUAL(spec.layers[0].params, 8000);
    CU_ASSERT_EQUAL(spec.layers[1].out.dims[0], 21);
    CU_ASSERT_EQUAL(spec.total_params, 8000 + 21 * 16 + 16 + 17);
    zdist_model_spec_release(&spec);
    /* sqrtn is TF's third combiner; a fourth is refused by name */
    const char *sq = "{\"input_shape\": [20], \"layers\": [{\"embedding\": {\"input_dim\": 10, \"output_dim\": 4, "
                     "\"combiner\": \"sqrtn\"}}, {\"dense\": {\"units\": 1}}], \"loss\": \"mean_squared_error\"}";
    CU_ASSERT_EQUAL_FATAL(zdist_model_spec_parse(sq, true, &spec, &err), 0);
    CU_ASSERT_EQUAL(spec.layers[0].combiner, ZDIST_COMBINER_SQRTN);
    zdist_model_spec_release(&spec);
    const char *mx = "{\"input_shape\": [20], \"layers\": [{\"embedding\": {\"input_dim\": 10, \"output_dim\": 4, "
                     "\"combiner\": \"max\"}}, {\"dense\": {\"units\": 1}}], \"loss\": \"mean_squared_error\"}";
    CU_ASSERT_EQUAL(zdist_model_spec_parse(mx, true, &spec, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "combiner"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "sqrtn"));
    /* The same on dense data is refused. */
    CU_ASSERT_EQUAL(zdist_model_spec_parse(text, false, &spec, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "model.layers[0].embedding: an embedding looks up the ids of sparse"));
}

/* parse must fail with -EINVAL and exactly this message. */
static void
s_refused(const char *text, bool sparse, const char *want)
{
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    int rc = zdist_model_spec_parse(text, sparse, &spec, &err);
    CU_ASSERT_EQUAL(rc, -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, want);
    if (rc != -EINVAL || strcmp(err.text, want) != 0)
        fprintf(stderr, "\n  got '%s'\n  for %s", err.text, text);
    CU_ASSERT_PTR_NULL(spec.layers);
}

#define S_IN "{\"input_shape\": [28, 28, 1], \"loss\": \"sparse_categorical_crossentropy\", \"layers\": "

/* An embedding without a vocabulary: "dynamic" instead of input_dim. */
static void
test_embedding_dynamic(void)
{
    const char *text = "{\"input_shape\": [1], \"layers\": [{\"embedding\": {\"output_dim\": 8, \"dynamic\": "
                       "{\"min_count\": 3, \"evict_after_steps\": 1000, \"evict_l2_below\": 0.01, "
                       "\"default\": \"zeros\"}}}, {\"dense\": {\"units\": 1}}], \"loss\": \"binary_crossentropy\"}";
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_model_spec_parse(text, true, &spec, &err), 0);
    const zdist_layer_spec_t *l = &spec.layers[0];
    CU_ASSERT(l->dynamic && l->min_count == 3 && l->evict_after_steps == 1000 && l->evict_l2_below == 0.01);
    CU_ASSERT_EQUAL(l->input_dim, 0);
    CU_ASSERT_EQUAL(l->out.dims[0], 8);
    CU_ASSERT_EQUAL(l->params, 0); /* its rows come as ids are admitted */
    zdist_model_spec_release(&spec);
    const char *min1 = "{\"input_shape\": [1], \"layers\": [{\"embedding\": {\"output_dim\": 4, \"dynamic\": {}}}, "
                       "{\"dense\": {\"units\": 1}}], \"loss\": \"mean_squared_error\"}";
    CU_ASSERT_EQUAL_FATAL(zdist_model_spec_parse(min1, true, &spec, &err), 0);
    CU_ASSERT(spec.layers[0].dynamic && spec.layers[0].min_count == 1); /* admitted at first sight */
    CU_ASSERT_EQUAL(spec.layers[0].dyn_default, 0.0); /* zeros */
    zdist_model_spec_release(&spec);
    /* default: "ones" or a number, every element of an unadmitted id's lookup */
    const char *ones = "{\"input_shape\": [1], \"layers\": [{\"embedding\": {\"output_dim\": 4, \"dynamic\": "
                       "{\"default\": \"ones\"}}}, {\"dense\": {\"units\": 1}}], \"loss\": \"mean_squared_error\"}";
    CU_ASSERT_EQUAL_FATAL(zdist_model_spec_parse(ones, true, &spec, &err), 0);
    CU_ASSERT_EQUAL(spec.layers[0].dyn_default, 1.0);
    zdist_model_spec_release(&spec);
    const char *num = "{\"input_shape\": [1], \"layers\": [{\"embedding\": {\"output_dim\": 4, \"dynamic\": "
                      "{\"default\": -0.25}}}, {\"dense\": {\"units\": 1}}], \"loss\": \"mean_squared_error\"}";
    CU_ASSERT_EQUAL_FATAL(zdist_model_spec_parse(num, true, &spec, &err), 0);
    CU_ASSERT_EQUAL(spec.layers[0].dyn_default, -0.25);
    zdist_model_spec_release(&spec);

#define S_DYN(inner) "{\"input_shape\": [1], \"layers\": [{\"embedding\": " inner "}], \"loss\": \"mean_squared_error\"}"
    s_refused(S_DYN("{\"output_dim\": 4, \"input_dim\": 10, \"dynamic\": {}}"), true,
              "model.layers[0].embedding.input_dim: a dynamic embedding has no vocabulary: its rows are keyed by the "
              "ids as they are; drop input_dim");
    s_refused(S_DYN("{\"output_dim\": 4, \"first_id\": 1, \"dynamic\": {}}"), true,
              "model.layers[0].embedding.first_id: a dynamic embedding has no vocabulary: its rows are keyed by the "
              "ids as they are; drop first_id");
    s_refused(S_DYN("{\"output_dim\": 4, \"dynamic\": {\"min_count\": -1}}"), true,
              "model.layers[0].embedding.dynamic.min_count: must be an integer in 0..4294967295, got -1");
    s_refused(S_DYN("{\"output_dim\": 4, \"dynamic\": {\"evict_l2_below\": -1}}"), true,
              "model.layers[0].embedding.dynamic.evict_l2_below: must be a number in [0, 1e+30], got -1");
    s_refused(S_DYN("{\"output_dim\": 4, \"dynamic\": {\"default\": \"random_normal\"}}"), true,
              "model.layers[0].embedding.dynamic.default: must be \"zeros\", \"ones\" or a number (every element "
              "of what an id without a row reads), got \"random_normal\"");
    s_refused(S_DYN("{\"output_dim\": 4, \"dynamic\": {\"default\": [1, 2, 3, 4]}}"), true,
              "model.layers[0].embedding.dynamic.default: must be \"zeros\", \"ones\" or a number (every element "
              "of what an id without a row reads), got [1,2,3,4]");
    s_refused(S_DYN("{\"output_dim\": 4, \"dynamic\": {\"min_cnt\": 2}}"), true,
              "model.layers[0].embedding.dynamic.min_cnt: unknown field; dynamic takes min_count, evict_after_steps, "
              "evict_l2_below and default");
    s_refused(S_DYN("{\"output_dim\": 4, \"dynamic\": 3}"), true,
              "model.layers[0].embedding.dynamic: must be an object {\"min_count\": N, \"evict_after_steps\": S, "
              "\"evict_l2_below\": x, \"default\": \"zeros\" | \"ones\" | x}, got 3");
    s_refused(S_DYN("{\"dynamic\": {}}"), true,
              "model.layers[0].embedding.output_dim: missing; an embedding needs its width");
#undef S_DYN
}

static void
test_errors(void)
{
    s_refused(S_IN "[{\"conv2d\": {\"filters\": 8, \"kernel\": 3}}, \"flatten\", "
                   "{\"conv2d\": {\"filters\": 8, \"kernel\": 0}}]}", false,
              "model.layers[2].conv2d.kernel: must be an integer in 1..15 or [height, width], got 0");
    s_refused(S_IN "[{\"conv2d\": {\"filters\": 8, \"kernel\": [3, 3, 3]}}]}", false,
              "model.layers[0].conv2d.kernel: must be an integer in 1..15 or [height, width], got [3,3,3]");
    s_refused(S_IN "[{\"conv2d\": {\"filters\": 8}}]}", false,
              "model.layers[0].conv2d.kernel: missing; a conv2d needs filters and kernel, e.g. "
              "{\"filters\": 32, \"kernel\": 3}");
    s_refused(S_IN "[{\"conv2d\": {\"filters\": 8, \"kernel\": 3, \"padding\": \"full\"}}]}", false,
              "model.layers[0].conv2d.padding: must be one of \"valid\", \"same\", got \"full\"");
    s_refused(S_IN "[{\"conv2d\": {\"filters\": 8, \"kernel\": 3, \"kernel_size\": 3}}]}", false,
              "model.layers[0].conv2d.kernel_size: unknown field; conv2d takes filters, kernel, strides, padding, "
              "activation, use_bias, split, name, logical_device (and comment)");
    s_refused(S_IN "[{\"conv2d\": {\"filters\": 8, \"kernel\": 3, \"activation\": \"gelu\"}}]}", false,
              "model.layers[0].conv2d.activation: must be one of \"linear\", \"relu\", \"tanh\", \"sigmoid\", "
              "\"softmax\", got \"gelu\"");
    s_refused(S_IN "[{\"conv2d\": {\"filters\": 8, \"kernel\": 3}}, {\"dense\": {\"units\": 10}}]}", false,
              "model.layers[1].dense: its input has shape (26, 26, 8); add a flatten layer before it");
    s_refused(S_IN "[{\"max_pool2d\": {\"pool\": 15}}, {\"conv2d\": {\"filters\": 4, \"kernel\": 5}}]}", false,
              "model.layers[1].conv2d: its input (1, 1, 1) is smaller than the kernel 5x5 with padding \"valid\"; "
              "use padding \"same\" or a smaller kernel");
    s_refused(S_IN "[{\"dropout\": {\"rate\": 1}}]}", false,
              "model.layers[0].dropout.rate: must be a number in [0, 1), got 1");
    s_refused(S_IN "[{\"dense\": {\"units\": 10}}]}", false,
              "model.layers[0].dense: its input has shape (28, 28, 1); add a flatten layer before it");
    s_refused(S_IN "[\"flatten\", {\"dense\": {\"units\": 10}}, {\"Dense\": {\"units\": 10}}]}", false,
              "model.layers[2]: must be {\"TYPE\": {fields}} (or \"TYPE\" for a layer without fields) with TYPE one "
              "of dense, conv2d, max_pool2d, avg_pool2d, flatten, dropout, relu, tanh, sigmoid, softmax, batch_norm, "
              "embedding, concat; got {\"Dense\":{\"units\":10}}");
    s_refused(S_IN "[\"flatten\", {\"dense\": {\"units\": 10, \"name\": \"x\"}}, {\"dense\": {\"units\": 10, "
                   "\"name\": \"x\"}}]}", false,
              "model.layers[2].dense.name: 'x' is also the name of model.layers[1]; layer names are unique");
    s_refused(S_IN "[\"flatten\", {\"dense\": {\"units\": 10, \"activation\": \"relu\"}}]}", false,
              "model.layers[1]: sparse_categorical_crossentropy takes logits (no activation) or softmax, not relu");
    s_refused(S_IN "[\"flatten\", {\"dense\": {\"units\": 1}}]}", false,
              "model.layers[1]: sparse_categorical_crossentropy needs one output per class (at least 2), the model "
              "gives 1");
    s_refused(S_IN "[{\"conv2d\": {\"filters\": 8, \"kernel\": 3}}]}", false,
              "model.layers[0]: the model's output has shape (26, 26, 8); end with flatten and dense layers");
    s_refused(S_IN "[]}", false,
              "model.layers: must be a list of 1..64 layers, e.g. [{\"dense\": {\"units\": 10}}], got []");
    s_refused("{\"input_shape\": [784], \"layers\": [{\"dense\": {\"units\": 10}}]}", false,
              "model.loss: missing; add sparse_categorical_crossentropy, binary_crossentropy or mean_squared_error");
    s_refused("{\"input_shape\": [784], \"layers\": [{\"dense\": {\"units\": 10}}], \"loss\": \"mse\"}", false,
              "model.loss: must be one of \"sparse_categorical_crossentropy\", \"binary_crossentropy\", "
              "\"mean_squared_error\", got \"mse\"");
    s_refused("{\"input_shape\": [28, 0], \"layers\": [\"flatten\"], \"loss\": \"mean_squared_error\"}", false,
              "model.input_shape: must be a list of 1 to 3 dimensions in 1..16777216, e.g. [28, 28, 1], got [28,0]");
    s_refused("{\"input_shape\": [16777216, 16777216, 16777216], \"layers\": [\"flatten\"], \"loss\": "
              "\"mean_squared_error\"}", false,
              "model.input_shape: [16777216,16777216,16777216] has more than 16777216 features per example");
    s_refused("{\"input_shape\": [784], \"layers\": [\"flatten\"], \"optimizer\": 1, \"loss\": \"mean_squared_error\"}",
              false, "model.optimizer: unknown field; a sequential model takes name, input_shape, layers, loss (and "
                     "comment)");
    s_refused("{\"input_shape\": [100], \"layers\": [{\"dense\": {\"units\": 1}}], \"loss\": \"binary_crossentropy\"}",
              true, "model.layers[0].dense: sparse (libsvm) examples go through an embedding first; start the layers "
                    "with {\"embedding\": {\"input_dim\": ..., \"output_dim\": ...}}");
    s_refused("{\"input_shape\": [100], \"layers\": [{\"embedding\": {\"input_dim\": 10, \"output_dim\": 4}}, "
              "{\"concat\": {\"dense_features\": 101}}, {\"dense\": {\"units\": 1}}], \"loss\": \"binary_crossentropy\"}",
              true, "model.layers[1].concat.dense_features: 101 is more than the input's 100 features");
}

/* The job carries the layers as the model's params and checks them with the rest. */
static void
test_job(void)
{
    const char *head = "{\"name\": \"cnn\", \"strategy\": {\"type\": \"one_device\"}, \"optimizer\": {\"type\": "
                       "\"adam\"}, \"dataset\": {\"format\": \"synthetic\", \"synthetic\": {\"n\": 64, \"dim\": 784, "
                       "\"classes\": 10}, \"global_batch_size\": 8}, \"steps\": 5, \"model\": ";
    char text[2048];
    snprintf(text, sizeof text, "%s{\"name\": \"sequential\", \"input_shape\": [28, 28, 1], \"layers\": "
             "[\"flatten\", {\"dense\": {\"units\": 10}}], \"loss\": \"sparse_categorical_crossentropy\"}}", head);
    zdist_job_t job;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_job_parse(text, NULL, &job, &err), 0);
    CU_ASSERT_STRING_EQUAL(job.model, "sequential");
    zdist_model_spec_t spec;
    CU_ASSERT_EQUAL(zdist_model_spec_parse(job.model_params, false, &spec, &err), 0);
    CU_ASSERT_EQUAL(spec.num_layers, 2);
    CU_ASSERT_EQUAL(spec.total_params, 7850);
    zdist_model_spec_release(&spec);
    CU_ASSERT_EQUAL(zdist_job_validate(&job, &err), 0);
    zdist_job_release(&job);

    snprintf(text, sizeof text, "%s{\"name\": \"sequential\", \"input_shape\": [28, 28, 1], \"layers\": "
             "[{\"max_pool2d\": {\"pool\": 2, \"padding\": \"valid\"}}, {\"conv2d\": {\"filters\": 4, \"kernel\": 0}}],"
             " \"loss\": \"sparse_categorical_crossentropy\"}}", head);
    CU_ASSERT_EQUAL(zdist_job_parse(text, NULL, &job, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text,
                           "model.layers[1].conv2d.kernel: must be an integer in 1..15 or [height, width], got 0");
    /* A sequential model takes its layers, not params; others take params only. */
    snprintf(text, sizeof text, "%s{\"name\": \"sequential\", \"params\": {}}}", head);
    CU_ASSERT_EQUAL(zdist_job_parse(text, NULL, &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "model.params: unknown field; known fields here: name, input_shape, "
                                            "layers, loss"));
    snprintf(text, sizeof text, "%s{\"name\": \"mlp\", \"layers\": []}}", head);
    CU_ASSERT_EQUAL(zdist_job_parse(text, NULL, &job, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "model.layers: unknown field"));

    /* libsvm: the input is the data's dimension. */
    const char *svm = "{\"name\": \"wd\", \"strategy\": {\"type\": \"one_device\"}, \"optimizer\": {\"type\": \"sgd\"},"
                      " \"dataset\": {\"format\": \"libsvm\", \"dim\": 50, \"train\": {\"path\": \"x.svm\"}, "
                      "\"global_batch_size\": 8}, \"steps\": 5, \"model\": {\"name\": \"sequential\", "
                      "\"input_shape\": [40], \"layers\": [{\"embedding\": {\"input_dim\": 10, \"output_dim\": 4}}, "
                      "{\"dense\": {\"units\": 1}}], \"loss\": \"binary_crossentropy\"}}";
    CU_ASSERT_EQUAL(zdist_job_parse(svm, NULL, &job, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "model.input_shape: [40] differs from dataset.dim 50; give the data's dimension");
}

void
zdist_test_model_spec_register(void)
{
    ZDIST_SUITE("model_spec",
                {"CNN shapes, names and parameter counts as Keras", test_cnn_shapes},
                {"summary as Keras prints it", test_summary},
                {"same padding, strides, batch norm, pools", test_padding_and_batch_norm},
                {"embedding and concat on sparse input", test_embedding_concat},
                {"a dynamic embedding: its fields, errors naming them", test_embedding_dynamic},
                {"errors name the layer and the field", test_errors},
                {"the job carries and checks the layers", test_job});
}
