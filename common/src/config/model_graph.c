/* model_graph: a job's functional model — named inputs over the dataset's features, layers naming what they read, checked as a DAG with shapes and dtypes. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_spec_private.h"
#include "zdist/model_spec.h"

#define S_MAX_DIM (INT64_C(1) << 24)      /* as sequential's */
#define S_MAX_ELEMENTS (INT64_C(1) << 24) /* one example's values in one layer */
#define S_MAX_PARAMS (INT64_C(1) << 36)
#define S_MAX_FEATURES 4096
#define S_INPUT_REF(k) (-1 - (k)) /* zdist_layer_spec_t.inputs: model input k */

/* One feature of the dataset's spec, as the model sees it. */
typedef struct {
    const char *name; /* borrowed from the tree */
    zdist_dtype_t dtype;  /* ZDIST_DTYPE_INVALID: neither float32 nor int64 */
    bool ragged;          /* kind "var" */
    zdist_shape_t shape;  /* fixed */
    int input;            /* the implicit input of this feature alone, -1: none yet */
} s_feature_t;

/* The parse's working state: layers in the file's order until sorted. */
typedef struct {
    zdist_model_spec_t *spec;
    s_feature_t *features;
    int nfeatures;
    int nexplicit;                  /* inputs declared in "inputs" */
    json_t **refs;                  /* each layer's "inputs" array, borrowed */
    char (*where)[ZDIST_LAYER_NAME_MAX + 32]; /* "model.layers[3] (top)": the file's index, sorted with the layers */
} s_graph_t;

/* ---- the dataset's features ---- */

static int
s_feature(const char *name, json_t *v, s_feature_t *f, zdist_error_t *err)
{
    *f = (s_feature_t){.name = name, .dtype = ZDIST_DTYPE_INVALID, .input = -1};
    if (!json_is_object(v))
        return zdist_error_set(err, -EINVAL, "dataset.features.%s: must be an object {\"kind\", \"dtype\", ...}",
                               name);
    const char *kind = json_string_value(json_object_get(v, "kind"));
    const char *dtype = json_string_value(json_object_get(v, "dtype"));
    f->ragged = kind && strcmp(kind, "var") == 0;
    if (dtype && strcmp(dtype, "float32") == 0)
        f->dtype = ZDIST_DTYPE_FLOAT32;
    else if (dtype && strcmp(dtype, "int64") == 0)
        f->dtype = ZDIST_DTYPE_INT64;
    json_t *shape = json_object_get(v, "shape");
    if (f->ragged || !shape)
        return 0;
    bool ok = json_is_array(shape) && json_array_size(shape) <= 2;
    for (size_t d = 0; ok && d < json_array_size(shape); d++) {
        json_t *x = json_array_get(shape, d);
        ok = json_is_integer(x) && json_integer_value(x) >= 1 && json_integer_value(x) <= S_MAX_DIM;
        if (ok)
            f->shape.dims[d] = json_integer_value(x);
    }
    if (!ok)
        return zdist_error_set(err, -EINVAL, "dataset.features.%s.shape: a model reads features of shape [], [k] "
                               "or [k, m] (each in 1..%lld)", name, (long long)S_MAX_DIM);
    f->shape.rank = (int)json_array_size(shape);
    return 0;
}

static int
s_features(s_graph_t *g, json_t *root, zdist_error_t *err)
{
    json_t *fs = json_object_get(root, "features");
    if (!json_is_object(fs) || json_object_size(fs) == 0)
        return zdist_error_set(err, -EINVAL, "model: a functional model reads named features: the dataset needs "
                               "a \"features\" spec (format \"tfrecord\": \"features\": {\"I1\": {\"kind\": "
                               "\"fixed\", \"dtype\": \"float32\", \"shape\": []}, ...})");
    if (json_object_size(fs) > S_MAX_FEATURES)
        return zdist_error_set(err, -EINVAL, "dataset.features: more than %d features", S_MAX_FEATURES);
    g->features = calloc(json_object_size(fs), sizeof *g->features);
    if (!g->features)
        return -ENOMEM;
    const char *key;
    json_t *val;
    json_object_foreach(fs, key, val) {
        int rc = s_feature(key, val, &g->features[g->nfeatures], err);
        if (rc < 0)
            return rc;
        g->nfeatures++;
    }
    return 0;
}

static s_feature_t *
s_find_feature(s_graph_t *g, const char *name)
{
    for (int i = 0; i < g->nfeatures; i++)
        if (strcmp(g->features[i].name, name) == 0)
            return &g->features[i];
    return NULL;
}

/* ---- inputs ---- */

/* Input k from its features (names, count n): one feature as it is, or
   fixed features of one dtype concatenated along the last axis. */
static int
s_input_init(s_graph_t *g, int k, const char *const *names, int n, const char *where, zdist_error_t *err)
{
    zdist_model_input_t *in = &g->spec->inputs[k];
    in->features = calloc((size_t)n, sizeof *in->features);
    in->widths = calloc((size_t)n, sizeof *in->widths);
    if (!in->features || !in->widths)
        return -ENOMEM;
    in->nfeatures = n;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        s_feature_t *f = s_find_feature(g, names[i]);
        if (!f)
            return zdist_error_set(err, -EINVAL, "%s.features[%d]: '%.64s' is not a feature of dataset.features",
                                   where, i, names[i]);
        if (strlen(f->name) >= sizeof in->features[i])
            return zdist_error_set(err, -EINVAL, "%s.features[%d]: '%.64s...': a model reads features named in at "
                                   "most %zu bytes", where, i, f->name, sizeof in->features[i] - 1);
        if (f->dtype == ZDIST_DTYPE_INVALID || (f->ragged && f->dtype != ZDIST_DTYPE_INT64))
            return zdist_error_set(err, -EINVAL, "%s.features[%d]: '%s' must be float32 (fixed) or int64 (fixed "
                                   "or var) for a model to read it", where, i, f->name);
        if (i > 0 && f->dtype != in->dtype)
            return zdist_error_set(err, -EINVAL, "%s.features[%d]: '%s' is %s, '%s' before it %s; a group "
                                   "concatenates features of one dtype", where, i, f->name,
                                   f->dtype == ZDIST_DTYPE_INT64 ? "int64" : "float32", in->features[0],
                                   in->dtype == ZDIST_DTYPE_INT64 ? "int64" : "float32");
        if (n > 1 && (f->ragged || f->shape.rank > 1))
            return zdist_error_set(err, -EINVAL, "%s.features[%d]: '%s' is %s; a group concatenates fixed "
                                   "features of shape [] or [k]: give it an input of its own", where, i, f->name,
                                   f->ragged ? "a var feature" : "of rank 2");
        snprintf(in->features[i], sizeof in->features[i], "%s", f->name);
        in->widths[i] = f->ragged ? 0 : model_spec_elements(&f->shape);
        in->dtype = f->dtype;
        in->ragged = f->ragged;
        in->shape = f->shape;
        total += in->widths[i];
    }
    if (n > 1)
        in->shape = (zdist_shape_t){1, {total}};
    if (total > S_MAX_ELEMENTS)
        return zdist_error_set(err, -EINVAL, "%s: more than %lld values per example", where,
                               (long long)S_MAX_ELEMENTS);
    return 0;
}

static int
s_inputs(s_graph_t *g, json_t *root, zdist_error_t *err)
{
    json_t *ins = json_object_get(root, "inputs");
    size_t nin = ins ? json_array_size(ins) : 0;
    if (ins && (!json_is_array(ins) || nin > ZDIST_GRAPH_MAX_INPUTS))
        return zdist_error_set(err, -EINVAL, "model.inputs: must be a list of at most %d inputs {\"name\": ..., "
                               "\"features\": [...]}", ZDIST_GRAPH_MAX_INPUTS);
    g->spec->inputs = calloc(nin + (size_t)g->nfeatures + 1, sizeof *g->spec->inputs);
    if (!g->spec->inputs)
        return -ENOMEM;
    for (size_t k = 0; k < nin; k++) {
        json_t *o = json_array_get(ins, k), *name = json_object_get(o, "name"), *fs = json_object_get(o, "features");
        char where[64], got[80];
        snprintf(where, sizeof where, "model.inputs[%zu]", k);
        const char *key;
        json_t *val;
        json_object_foreach(json_is_object(o) ? o : NULL, key, val) {
            if (strcmp(key, "name") && strcmp(key, "features") && strcmp(key, "comment"))
                return zdist_error_set(err, -EINVAL, "%s.%s: unknown field; an input takes name, features (and "
                                       "comment)", where, key);
        }
        if (!json_is_string(name) || !model_spec_name_ok(json_string_value(name)))
            return zdist_error_set(err, -EINVAL, "%s.name: must be 1..40 characters of [A-Za-z0-9_.-], got %s",
                                   where, name ? model_spec_shown(name, got, sizeof got) : "nothing");
        size_t nf = json_array_size(fs);
        if (!json_is_array(fs) || nf < 1 || nf > ZDIST_GRAPH_MAX_INPUTS)
            return zdist_error_set(err, -EINVAL, "%s.features: must be a list of 1..%d feature names, got %s",
                                   where, ZDIST_GRAPH_MAX_INPUTS,
                                   fs ? model_spec_shown(fs, got, sizeof got) : "nothing");
        const char *names[ZDIST_GRAPH_MAX_INPUTS];
        for (size_t i = 0; i < nf; i++)
            if (!(names[i] = json_string_value(json_array_get(fs, i))))
                return zdist_error_set(err, -EINVAL, "%s.features[%zu]: must be a feature's name", where, i);
        snprintf(g->spec->inputs[k].name, sizeof g->spec->inputs[k].name, "%s", json_string_value(name));
        for (size_t j = 0; j < k; j++)
            if (strcmp(g->spec->inputs[j].name, g->spec->inputs[k].name) == 0)
                return zdist_error_set(err, -EINVAL, "%s.name: '%s' is also model.inputs[%zu]'s; names are unique",
                                       where, g->spec->inputs[k].name, j);
        g->spec->num_inputs++;
        int rc = s_input_init(g, (int)k, names, (int)nf, where, err);
        if (rc < 0)
            return rc;
    }
    g->nexplicit = (int)nin;
    return 0;
}

/* ---- layers ---- */

/* Layer i of the file: {"name", "TYPE": {fields}, "inputs": [...]}. */
static int
s_layer(s_graph_t *g, int i, json_t *o, zdist_error_t *err)
{
    zdist_layer_spec_t *l = &g->spec->layers[i];
    char got[80];
    json_t *name = json_object_get(o, "name");
    if (!json_is_object(o))
        return zdist_error_set(err, -EINVAL, "model.layers[%d]: must be {\"name\": ..., \"TYPE\": {fields}, "
                               "\"inputs\": [...]}, got %s", i, model_spec_shown(o, got, sizeof got));
    if (!json_is_string(name) || !model_spec_name_ok(json_string_value(name)))
        return zdist_error_set(err, -EINVAL, "model.layers[%d].name: a functional model's layers are named (1..40 "
                               "characters of [A-Za-z0-9_.-]), got %s", i,
                               name ? model_spec_shown(name, got, sizeof got) : "nothing");
    snprintf(g->where[i], sizeof g->where[i], "model.layers[%d] (%s)", i, json_string_value(name));
    const char *type = NULL, *key;
    json_t *val, *fields = NULL;
    json_object_foreach(o, key, val) {
        if (strcmp(key, "name") == 0 || strcmp(key, "inputs") == 0 || strcmp(key, "comment") == 0)
            continue;
        if (!model_spec_type_known(key) || type)
            return zdist_error_set(err, -EINVAL, "%s.%s: %s; a layer is {\"name\", one \"TYPE\": {fields}, "
                                   "\"inputs\"} with TYPE one of dense, relu, tanh, sigmoid, softmax, flatten, "
                                   "concat, add, hashing, embedding, dot_interaction, cross", g->where[i], key,
                                   model_spec_type_known(key) ? "a second layer type" : "unknown field");
        type = key;
        fields = val;
    }
    if (!type)
        return zdist_error_set(err, -EINVAL, "%s: no layer type; add e.g. \"dense\": {\"units\": 64}", g->where[i]);
    char where[ZDIST_LAYER_NAME_MAX + 64];
    snprintf(where, sizeof where, "%s.%s", g->where[i], type);
    json_t *empty = json_is_string(fields) ? json_object() : NULL;
    int rc = model_spec_layer_fields(type, empty ? empty : fields, where, true, l, err);
    json_decref(empty);
    if (rc < 0)
        return rc;
    if (json_object_get(fields, "name"))
        return zdist_error_set(err, -EINVAL, "%s.name: a functional model names the layer beside its type: "
                               "{\"name\": ..., \"%s\": {...}}", where, type);
    if (l->logical_device >= 0 || l->num_split > 0)
        return zdist_error_set(err, -EINVAL, "%s: logical_device and split are for sequential models under "
                               "strategy tpu", where);
    snprintf(l->name, sizeof l->name, "%s", json_string_value(name));
    json_t *refs = json_object_get(o, "inputs");
    if (!json_is_array(refs) || json_array_size(refs) < 1 || json_array_size(refs) > ZDIST_LAYER_MAX_INPUTS)
        return zdist_error_set(err, -EINVAL, "%s.inputs: must be a list of 1..%d names of inputs, layers or "
                               "features, got %s", g->where[i], ZDIST_LAYER_MAX_INPUTS,
                               refs ? model_spec_shown(refs, got, sizeof got) : "nothing");
    g->refs[i] = refs;
    for (int j = 0; j < g->spec->num_inputs; j++)
        if (strcmp(g->spec->inputs[j].name, l->name) == 0)
            return zdist_error_set(err, -EINVAL, "%s.name: '%s' is also model.inputs[%d]'s; names are unique",
                                   g->where[i], l->name, j);
    for (int j = 0; j < i; j++)
        if (strcmp(g->spec->layers[j].name, l->name) == 0)
            return zdist_error_set(err, -EINVAL, "%s.name: '%s' is also model.layers[%d]'s; names are unique",
                                   g->where[i], l->name, j);
    return 0;
}

/* Layer i's inputs as references: a layer, an input, else a feature (its implicit input, made once). */
static int
s_resolve(s_graph_t *g, int i, zdist_error_t *err)
{
    zdist_model_spec_t *spec = g->spec;
    zdist_layer_spec_t *l = &spec->layers[i];
    l->ninputs = (int)json_array_size(g->refs[i]);
    for (int j = 0; j < l->ninputs; j++) {
        const char *name = json_string_value(json_array_get(g->refs[i], j));
        int ref = INT32_MIN;
        for (int k = 0; name && k < spec->num_layers && ref == INT32_MIN; k++)
            if (strcmp(spec->layers[k].name, name) == 0)
                ref = k;
        for (int k = 0; name && k < g->nexplicit && ref == INT32_MIN; k++)
            if (strcmp(spec->inputs[k].name, name) == 0)
                ref = S_INPUT_REF(k);
        s_feature_t *f = name && ref == INT32_MIN ? s_find_feature(g, name) : NULL;
        if (f && f->input < 0) {
            char where[ZDIST_LAYER_NAME_MAX + 48];
            snprintf(where, sizeof where, "%s.inputs[%d]", g->where[i], j);
            snprintf(spec->inputs[spec->num_inputs].name, sizeof spec->inputs[0].name, "%s", f->name);
            int rc = s_input_init(g, spec->num_inputs, &f->name, 1, where, err);
            spec->num_inputs++;
            if (rc < 0)
                return rc;
            f->input = spec->num_inputs - 1;
        }
        if (f)
            ref = S_INPUT_REF(f->input);
        if (ref == INT32_MIN)
            return zdist_error_set(err, -EINVAL, "%s.inputs[%d]: %s%.64s%s is not an input, a layer or a feature "
                                   "of dataset.features", g->where[i], j, name ? "'" : "", name ? name : "not a name",
                                   name ? "'" : "");
        if (ref == i)
            return zdist_error_set(err, -EINVAL, "%s.inputs[%d]: a layer cannot read itself", g->where[i], j);
        l->inputs[j] = ref;
    }
    return 0;
}

/* Layer k's first input that is a layer not yet placed (k itself when none). */
static int
s_unplaced_input(const zdist_model_spec_t *spec, const int *pos, int k)
{
    for (int j = 0; j < spec->layers[k].ninputs; j++) {
        int r = spec->layers[k].inputs[j];
        if (r >= 0 && pos[r] < 0)
            return r;
    }
    return k;
}

/* Refuses the cycle among the layers Kahn's left unplaced (pos < 0): a
   layer left over reads one left over; following those reads ends on a
   cycle, named from its first layer in the file along its path. */
static int
s_cycle(const s_graph_t *g, const int *pos, zdist_error_t *err)
{
    const zdist_model_spec_t *spec = g->spec;
    int n = spec->num_layers, k = 0;
    while (pos[k] >= 0)
        k++;
    for (int steps = 0; steps < n; steps++)
        k = s_unplaced_input(spec, pos, k);
    int first = k, at = k;
    do {
        at = s_unplaced_input(spec, pos, at);
        first = at < first ? at : first;
    } while (at != k);
    char path[512] = "";
    at = first;
    do {
        snprintf(path + strlen(path), sizeof path - strlen(path), "'%s' -> ", spec->layers[at].name);
        at = s_unplaced_input(spec, pos, at);
    } while (at != first && strlen(path) < 400);
    return zdist_error_set(err, -EINVAL, "%s.inputs: a cycle: %s'%s' (each reads the next); a functional model "
                           "is a DAG", g->where[first], path, spec->layers[first].name);
}

/* Sorts the layers so each follows what it reads (Kahn's, in the file's
   order where free), refusing a cycle with its path; then every layer and
   input must lead to the output, which ends up last. */
static int
s_sort(s_graph_t *g, int output, zdist_error_t *err)
{
    zdist_model_spec_t *spec = g->spec;
    int n = spec->num_layers, placed = 0;
    int *order = calloc((size_t)n, sizeof *order), *pos = calloc((size_t)n, sizeof *pos);
    zdist_layer_spec_t *sorted = calloc((size_t)n, sizeof *sorted);
    bool *live = calloc((size_t)n, sizeof *live), *used = calloc((size_t)spec->num_inputs + 1, sizeof *used);
    int rc = -ENOMEM;
    if (!order || !pos || !sorted || !live || !used)
        goto out;
    for (int k = 0; k < n; k++)
        pos[k] = -1;
    for (bool progress = true; progress && placed < n;) {
        progress = false;
        for (int k = 0; k < n; k++) {
            bool ready = pos[k] < 0;
            for (int j = 0; ready && j < spec->layers[k].ninputs; j++)
                ready = spec->layers[k].inputs[j] < 0 || pos[spec->layers[k].inputs[j]] >= 0;
            if (ready) {
                pos[k] = placed;
                order[placed++] = k;
                progress = true;
            }
        }
    }
    if (placed < n) {
        rc = s_cycle(g, pos, err);
        goto out;
    }
    /* what leads to the output: walk back from it, in reverse order */
    live[output] = true;
    for (int p = n - 1; p >= 0; p--) {
        const zdist_layer_spec_t *l = &spec->layers[order[p]];
        for (int j = 0; live[order[p]] && j < l->ninputs; j++) {
            if (l->inputs[j] >= 0)
                live[l->inputs[j]] = true;
            else
                used[-1 - l->inputs[j]] = true;
        }
    }
    for (int k = 0; k < n; k++)
        if (!live[k]) {
            rc = zdist_error_set(err, -EINVAL, "%s: does not lead to model.output ('%s'): it would not be trained; "
                                 "remove it or connect it", g->where[k], spec->layers[output].name);
            goto out;
        }
    for (int k = 0; k < spec->num_inputs; k++)
        if (!used[k]) {
            rc = zdist_error_set(err, -EINVAL, "model.inputs[%d] (%s): no layer reads it; remove it or name it in "
                                 "a layer's inputs", k, spec->inputs[k].name);
            goto out;
        }
    /* the output is the only layer nothing reads: Kahn's placed it... anywhere; put it last */
    for (int p = pos[output]; p < n - 1; p++) {
        order[p] = order[p + 1];
        pos[order[p]] = p;
    }
    order[n - 1] = output;
    pos[output] = n - 1;
    char (*where)[ZDIST_LAYER_NAME_MAX + 32] = calloc((size_t)n, sizeof *where);
    if (!where)
        goto out;
    for (int p = 0; p < n; p++) {
        sorted[p] = spec->layers[order[p]];
        memcpy(where[p], g->where[order[p]], sizeof where[p]);
        for (int j = 0; j < sorted[p].ninputs; j++)
            if (sorted[p].inputs[j] >= 0)
                sorted[p].inputs[j] = pos[sorted[p].inputs[j]];
    }
    free(g->where);
    g->where = where;
    free(spec->layers);
    spec->layers = sorted;
    sorted = NULL;
    rc = 0;
out:
    free(order);
    free(pos);
    free(sorted);
    free(live);
    free(used);
    return rc;
}

/* ---- shapes ---- */

typedef struct {
    zdist_dtype_t dtype;
    bool ragged;
    zdist_shape_t shape;
    const char *name;
} s_value_t;

static s_value_t
s_value_of(const zdist_model_spec_t *spec, int ref)
{
    if (ref >= 0)
        return (s_value_t){spec->layers[ref].dtype, spec->layers[ref].ragged, spec->layers[ref].out,
                           spec->layers[ref].name};
    const zdist_model_input_t *in = &spec->inputs[-1 - ref];
    return (s_value_t){in->dtype, in->ragged, in->shape, in->name};
}

/* Every input of layer i: float32 vectors (rank 1, or any rank when
   any_rank), fixed; how many (min..max). */
static int
s_check_floats(const s_graph_t *g, int i, int min, int max, bool any_rank, zdist_error_t *err)
{
    const zdist_layer_spec_t *l = &g->spec->layers[i];
    char sb[96];
    if (l->ninputs < min || l->ninputs > max)
        return zdist_error_set(err, -EINVAL, "%s.inputs: %s reads %d%s%d inputs, got %d", g->where[i],
                               model_spec_type_key(l), min, max > min ? ".." : "", max > min ? max : min,
                               l->ninputs);
    for (int j = 0; j < l->ninputs; j++) {
        s_value_t v = s_value_of(g->spec, l->inputs[j]);
        if (v.dtype != ZDIST_DTYPE_FLOAT32 || v.ragged)
            return zdist_error_set(err, -EINVAL, "%s.inputs[%d]: '%s' gives %s; %s reads float32 values (put "
                                   "ids through an embedding first)", g->where[i], j, v.name,
                                   v.ragged ? "a ragged row of ids" : "int64 ids", model_spec_type_key(l));
        if (!any_rank && v.shape.rank != 1)
            return zdist_error_set(err, -EINVAL, "%s.inputs[%d]: '%s' has shape %s; %s reads vectors (add a "
                                   "flatten layer)", g->where[i], j, v.name,
                                   model_spec_shape_text(&v.shape, sb, sizeof sb), model_spec_type_key(l));
    }
    return 0;
}

/* Inputs j > 0 have input 0's shape (all axes, or all but the last). */
static int
s_check_same(const s_graph_t *g, int i, bool but_last, zdist_error_t *err)
{
    const zdist_layer_spec_t *l = &g->spec->layers[i];
    s_value_t a = s_value_of(g->spec, l->inputs[0]);
    char sa[96], sb[96];
    for (int j = 1; j < l->ninputs; j++) {
        s_value_t b = s_value_of(g->spec, l->inputs[j]);
        bool same = a.shape.rank == b.shape.rank && a.shape.rank >= 1;
        for (int d = 0; same && d < a.shape.rank - (but_last ? 1 : 0); d++)
            same = a.shape.dims[d] == b.shape.dims[d];
        if (!same)
            return zdist_error_set(err, -EINVAL, "%s.inputs[%d]: '%s' has shape %s, '%s' (inputs[0]) %s; %s", 
                                   g->where[i], j, b.name, model_spec_shape_text(&b.shape, sb, sizeof sb), a.name,
                                   model_spec_shape_text(&a.shape, sa, sizeof sa),
                                   but_last ? "concat joins shapes equal but for the last axis"
                                   : l->kind == ZDIST_LAYER_ADD ? "add sums tensors of one shape"
                                                                : "the vectors must have one width");
    }
    return 0;
}

/* Ids in: hashing and embedding read one int64 input. */
static int
s_check_ids(const s_graph_t *g, int i, zdist_error_t *err)
{
    const zdist_layer_spec_t *l = &g->spec->layers[i];
    if (l->ninputs != 1)
        return zdist_error_set(err, -EINVAL, "%s.inputs: %s reads 1 input, got %d", g->where[i],
                               model_spec_type_key(l), l->ninputs);
    s_value_t v = s_value_of(g->spec, l->inputs[0]);
    char sb[96];
    if (v.dtype != ZDIST_DTYPE_INT64)
        return zdist_error_set(err, -EINVAL, "%s.inputs[0]: '%s' gives float32 values; %s reads int64 ids (a "
                               "categorical feature, or a hashing of one)", g->where[i], v.name,
                               model_spec_type_key(l));
    if (!v.ragged && v.shape.rank > 1)
        return zdist_error_set(err, -EINVAL, "%s.inputs[0]: '%s' has shape %s; %s reads one id or [k] ids per "
                               "example", g->where[i], v.name, model_spec_shape_text(&v.shape, sb, sizeof sb),
                               model_spec_type_key(l));
    return 0;
}

/* Output shape, dtype and parameters of layer i from its inputs. */
static int
s_infer(s_graph_t *g, int i, zdist_error_t *err)
{
    zdist_layer_spec_t *l = &g->spec->layers[i];
    int rc = 0;
    l->dtype = ZDIST_DTYPE_FLOAT32;
    switch (l->kind) {
    case ZDIST_LAYER_DENSE:
    case ZDIST_LAYER_CROSS:
        if ((rc = s_check_floats(g, i, 1, l->kind == ZDIST_LAYER_CROSS ? 2 : 1, false, err)) < 0 ||
            (rc = s_check_same(g, i, false, err)) < 0)
            return rc;
        l->in = s_value_of(g->spec, l->inputs[0]).shape;
        if (l->kind == ZDIST_LAYER_DENSE) {
            l->out = (zdist_shape_t){1, {l->units}};
            l->params = l->in.dims[0] * l->units + (l->use_bias ? l->units : 0);
        } else {
            l->out = l->in;
            l->params = l->in.dims[0] * l->in.dims[0] + (l->use_bias ? l->in.dims[0] : 0);
        }
        break;
    case ZDIST_LAYER_ACTIVATION:
    case ZDIST_LAYER_FLATTEN:
        if ((rc = s_check_floats(g, i, 1, 1, true, err)) < 0)
            return rc;
        l->in = l->out = s_value_of(g->spec, l->inputs[0]).shape;
        if (l->kind == ZDIST_LAYER_FLATTEN)
            l->out = (zdist_shape_t){1, {model_spec_elements(&l->in)}};
        break;
    case ZDIST_LAYER_ADD:
    case ZDIST_LAYER_CONCAT:
        if ((rc = s_check_floats(g, i, 2, ZDIST_LAYER_MAX_INPUTS, true, err)) < 0 ||
            (rc = s_check_same(g, i, l->kind == ZDIST_LAYER_CONCAT, err)) < 0)
            return rc;
        l->in = l->out = s_value_of(g->spec, l->inputs[0]).shape;
        for (int j = 1; l->kind == ZDIST_LAYER_CONCAT && j < l->ninputs; j++)
            l->out.dims[l->out.rank - 1] += s_value_of(g->spec, l->inputs[j]).shape.dims[l->out.rank - 1];
        break;
    case ZDIST_LAYER_DOT_INTERACTION: {
        if ((rc = s_check_floats(g, i, 2, ZDIST_LAYER_MAX_INPUTS, false, err)) < 0 ||
            (rc = s_check_same(g, i, false, err)) < 0)
            return rc;
        l->in = s_value_of(g->spec, l->inputs[0]).shape;
        int64_t f = l->ninputs;
        int64_t pairs = l->skip_gather ? f * f : l->self_interaction ? f * (f + 1) / 2 : f * (f - 1) / 2;
        l->out = (zdist_shape_t){1, {pairs + (l->concat_dense ? l->in.dims[0] : 0)}};
        break;
    }
    case ZDIST_LAYER_HASHING:
    case ZDIST_LAYER_EMBEDDING: {
        if ((rc = s_check_ids(g, i, err)) < 0)
            return rc;
        s_value_t v = s_value_of(g->spec, l->inputs[0]);
        l->in = v.shape;
        if (l->kind == ZDIST_LAYER_HASHING) {
            l->dtype = ZDIST_DTYPE_INT64;
            l->ragged = v.ragged;
            l->out = v.shape;
            break;
        }
        if (l->first_id != 0)
            return zdist_error_set(err, -EINVAL, "%s.embedding.first_id: for libsvm data in sequential models; "
                                   "a functional model's ids are the feature's own", g->where[i]);
        /* a hashing before a dynamic table would only add collisions: its rows are keyed by any int64 */
        if (l->dynamic && l->inputs[0] >= 0)
            return zdist_error_set(err, -EINVAL, "%s.inputs[0]: '%s' is a %s layer; a dynamic embedding (no "
                                   "input_dim) takes the ids as they are: name the int64 feature itself (or an "
                                   "input of int64 features)", g->where[i], v.name, model_spec_type_key(
                                   &g->spec->layers[l->inputs[0]]));
        l->out = v.ragged || v.shape.rank == 0 ? (zdist_shape_t){1, {l->output_dim}}
                                                : (zdist_shape_t){2, {v.shape.dims[0], l->output_dim}};
        l->params = l->input_dim * l->output_dim;
        break;
    }
    default:
        return zdist_error_set(err, -EINVAL, "%s: %s is not a layer of functional models yet; use it in a "
                               "sequential model", g->where[i], model_spec_type_key(l));
    }
    char sb[96];
    for (int d = 0; d < l->out.rank; d++)
        if (l->out.dims[d] > S_MAX_DIM || model_spec_elements(&l->out) > S_MAX_ELEMENTS)
            return zdist_error_set(err, -EINVAL, "%s: its output %s is too large (at most %lld values per "
                                   "example)", g->where[i], model_spec_shape_text(&l->out, sb, sizeof sb),
                                   (long long)S_MAX_ELEMENTS);
    return 0;
}

/* ---- the model ---- */

static int
s_parse(s_graph_t *g, json_t *root, zdist_error_t *err)
{
    zdist_model_spec_t *spec = g->spec;
    char got[80];
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "inputs") && strcmp(key, "layers") && strcmp(key, "output") && strcmp(key, "loss") &&
            strcmp(key, "features") && strcmp(key, "comment"))
            return zdist_error_set(err, -EINVAL, "model.%s: unknown field; a functional model takes name, inputs, "
                                   "layers, output, loss (and comment)", key);
    }
    int rc;
    if ((rc = s_features(g, root, err)) < 0 || (rc = s_inputs(g, root, err)) < 0)
        return rc;
    json_t *layers = json_object_get(root, "layers");
    size_t nl = json_array_size(layers);
    if (!json_is_array(layers) || nl < 1 || nl > ZDIST_GRAPH_MAX_LAYERS)
        return zdist_error_set(err, -EINVAL, "model.layers: must be a list of 1..%d layers {\"name\", \"TYPE\": "
                               "{fields}, \"inputs\": [...]}, got %s", ZDIST_GRAPH_MAX_LAYERS,
                               layers ? model_spec_shown(layers, got, sizeof got) : "nothing");
    spec->layers = calloc(nl, sizeof *spec->layers);
    g->refs = calloc(nl, sizeof *g->refs);
    g->where = calloc(nl, sizeof *g->where);
    if (!spec->layers || !g->refs || !g->where)
        return -ENOMEM;
    for (size_t i = 0; i < nl; i++) {
        if ((rc = s_layer(g, (int)i, json_array_get(layers, i), err)) < 0)
            return rc;
        spec->num_layers++;
    }
    for (int i = 0; i < spec->num_layers; i++)
        if ((rc = s_resolve(g, i, err)) < 0)
            return rc;
    json_t *out = json_object_get(root, "output");
    int output = -1;
    for (int k = 0; json_is_string(out) && k < spec->num_layers && output < 0; k++)
        if (strcmp(spec->layers[k].name, json_string_value(out)) == 0)
            output = k;
    if (output < 0)
        return zdist_error_set(err, -EINVAL, "model.output: must name the layer whose value is the model's output, "
                               "got %s", out ? model_spec_shown(out, got, sizeof got) : "nothing");
    if ((rc = s_sort(g, output, err)) < 0)
        return rc;
    for (int i = 0; i < spec->num_layers; i++) {
        if ((rc = s_infer(g, i, err)) < 0)
            return rc;
        spec->total_params += spec->layers[i].params;
        if (spec->total_params > S_MAX_PARAMS)
            return zdist_error_set(err, -EINVAL, "%s: the model has more than %lld parameters", g->where[i],
                                   (long long)S_MAX_PARAMS);
    }
    if ((rc = model_spec_loss(root, &spec->loss, err)) < 0)
        return rc;
    if (spec->layers[spec->num_layers - 1].dtype != ZDIST_DTYPE_FLOAT32)
        return zdist_error_set(err, -EINVAL, "model.output ('%s'): gives int64 ids; the output is a float32 "
                               "layer", spec->layers[spec->num_layers - 1].name);
    return model_spec_check_loss(spec, err);
}

int
zdist_model_graph_parse(const char *json_text, zdist_model_spec_t *spec, zdist_error_t *err)
{
    memset(spec, 0, sizeof *spec);
    spec->graph = true;
    json_error_t jerr;
    json_t *root = json_loads(json_text ? json_text : "", JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return zdist_error_set(err, -EINVAL, "model: not JSON: %s", jerr.text);
    s_graph_t g = {.spec = spec};
    int rc = json_is_object(root) ? s_parse(&g, root, err)
                                  : zdist_error_set(err, -EINVAL, "model: must be an object with inputs, layers, "
                                                    "output and loss");
    free(g.features);
    free(g.refs);
    free(g.where);
    json_decref(root);
    if (rc < 0)
        zdist_model_spec_release(spec);
    return rc;
}
