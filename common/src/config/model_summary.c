/* model_summary: Keras's model.summary() of a sequential or functional model spec, as text. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_spec_private.h"
#include "zdist/model_spec.h"

/* ---- Keras's summary ---- */

typedef struct {
    char *buf;
    size_t len, cap;
    bool failed;
} s_text_t;

static void
s_put(s_text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
s_put(s_text_t *t, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !t->failed; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if (t->buf && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *nb = realloc(t->buf, cap);
        if (!nb) {
            t->failed = true;
            return;
        }
        t->buf = nb;
        t->cap = cap;
    }
}

/* One row as Keras's print_row: each field cut at its column's end, the
   last character of a full column given to the space before the next. */
static void
s_row_at(s_text_t *t, const char *const *fields, int n, const int *pos)
{
    char line[128] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0)
            line[len - 1] = ' ';
        len += (size_t)snprintf(line + len, sizeof line - len, "%s", fields[i]);
        if (len > (size_t)pos[i])
            len = (size_t)pos[i];
        while (len < (size_t)pos[i])
            line[len++] = ' ';
        line[len] = '\0';
    }
    s_put(t, "%s\n", line);
}

static void
s_row(s_text_t *t, const char *const fields[3])
{
    static const int pos[3] = {29, 55, 65};
    s_row_at(t, fields, 3, pos);
}

/* A functional model's rows as Keras's print_layer_summary_with_connections
   (98 columns): its InputLayers, then each layer with what it reads. */
static void
s_graph_rows(s_text_t *t, const zdist_model_spec_t *spec, const char *rule, const char *thick)
{
    static const int pos[4] = {32, 53, 65, 98};
    char name[ZDIST_LAYER_NAME_MAX + 40], shape[100], params[32], conn[ZDIST_LAYER_NAME_MAX + 16];
    s_row_at(t, (const char *const[]){"Layer (type)", "Output Shape", "Param #", "Connected to"}, 4, pos);
    s_put(t, "%s\n", thick);
    for (int k = 0; k < spec->num_inputs; k++) {
        const zdist_model_input_t *in = &spec->inputs[k];
        snprintf(name, sizeof name, "%s (InputLayer)", in->name);
        if (in->ragged || in->shape.rank == 0)
            snprintf(shape, sizeof shape, "%s", in->ragged ? "[(None, None)]" : "[(None,)]");
        else
            snprintf(shape, sizeof shape, "[%s]", model_spec_keras_shape(&in->shape, conn, sizeof conn));
        s_row_at(t, (const char *const[]){name, shape, "0", ""}, 4, pos);
        s_put(t, "%s\n", rule);
    }
    for (int i = 0; i < spec->num_layers; i++) {
        const zdist_layer_spec_t *l = &spec->layers[i];
        snprintf(name, sizeof name, "%s (%s)", l->name, model_spec_keras_type(l));
        snprintf(params, sizeof params, "%lld", (long long)l->params);
        if (l->ragged)
            snprintf(shape, sizeof shape, "(None, None)");
        else
            model_spec_keras_shape(&l->out, shape, sizeof shape);
        for (int j = 0; j < l->ninputs || j == 0; j++) {
            int src = j < l->ninputs ? l->inputs[j] : 0;
            snprintf(conn, sizeof conn, "%s[0][0]",
                     j >= l->ninputs ? "" : src >= 0 ? spec->layers[src].name : spec->inputs[-1 - src].name);
            s_row_at(t, j == 0 ? (const char *const[]){name, shape, params, conn}
                               : (const char *const[]){"", "", "", conn}, 4, pos);
        }
        s_put(t, "%s\n", i == spec->num_layers - 1 ? thick : rule);
    }
}

/* 1234567 -> "1,234,567" */
static const char *
s_thousands(int64_t v, char *buf, size_t size)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%lld", (long long)v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < size; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

int
zdist_model_spec_summary(const zdist_model_spec_t *spec, const char *model_name, char **ret_text)
{
    s_text_t t = {0};
    char rule[99], thick[99];
    int width = spec->graph ? 98 : 65;
    memset(rule, '_', (size_t)width);
    memset(thick, '=', (size_t)width);
    rule[width] = thick[width] = '\0';
    s_put(&t, "Model: \"%s\"\n%s\n", model_name ? model_name : ZDIST_MODEL_SEQUENTIAL, rule);
    if (spec->graph)
        s_graph_rows(&t, spec, rule, thick);
    else
        s_row(&t, (const char *const[]){"Layer (type)", "Output Shape", "Param #"});
    if (!spec->graph)
        s_put(&t, "%s\n", thick);
    for (int i = 0; i < spec->num_layers && !spec->graph; i++) {
        const zdist_layer_spec_t *l = &spec->layers[i];
        char name[ZDIST_LAYER_NAME_MAX + 40], shape[96], params[32];
        snprintf(name, sizeof name, "%s (%s)", l->name, model_spec_keras_type(l));
        snprintf(params, sizeof params, "%lld", (long long)l->params);
        s_row(&t, (const char *const[]){name, model_spec_keras_shape(&l->out, shape, sizeof shape), params});
        s_put(&t, "%s\n", i == spec->num_layers - 1 ? thick : rule);
    }
    char a[32], b[32], c[32];
    s_put(&t, "Total params: %s\nTrainable params: %s\nNon-trainable params: %s\n%s\n",
          s_thousands(spec->total_params, a, sizeof a),
          s_thousands(spec->total_params - spec->non_trainable_params, b, sizeof b),
          s_thousands(spec->non_trainable_params, c, sizeof c), rule);
    if (t.failed) {
        free(t.buf);
        return -ENOMEM;
    }
    *ret_text = t.buf;
    return 0;
}
