/* Fuzz target: a functional model's section with its features (zdist_model_graph_parse), and its summary. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/model_spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    if (zdist_model_graph_parse(text, &spec, &err) == 0) {
        /* What the worker relies on: each layer reads inputs or layers
           before it, the output is last, float32 and flat, the totals are
           the layers' sums. */
        int64_t total = 0;
        for (int i = 0; i < spec.num_layers; i++) {
            const zdist_layer_spec_t *l = &spec.layers[i];
            if (l->ninputs < 1 || l->ninputs > ZDIST_LAYER_MAX_INPUTS || l->params < 0)
                __builtin_trap();
            for (int j = 0; j < l->ninputs; j++)
                if (l->inputs[j] >= i || -1 - l->inputs[j] >= spec.num_inputs)
                    __builtin_trap();
            total += l->params;
        }
        const zdist_layer_spec_t *out = &spec.layers[spec.num_layers - 1];
        if (total != spec.total_params || out->out.rank != 1 || out->dtype != ZDIST_DTYPE_FLOAT32)
            __builtin_trap();
        char *summary = NULL;
        if (zdist_model_spec_summary(&spec, "fuzz", &summary) == 0)
            free(summary);
        zdist_model_spec_release(&spec);
    } else if (!err.text[0]) {
        __builtin_trap(); /* every refusal says why */
    }
    free(text);
    return 0;
}
