/* Fuzz target: a sequential model's section (zdist/model_spec.h); the first byte picks sparse input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/model_spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    zdist_model_spec_t spec;
    zdist_error_t err = {0};
    if (zdist_model_spec_parse(text, data[0] & 1, &spec, &err) == 0) {
        /* What the worker relies on: shapes chain, every dimension is >= 1,
           the totals are the layers' sums. */
        int64_t total = 0;
        for (int i = 0; i < spec.num_layers; i++) {
            const zdist_layer_spec_t *l = &spec.layers[i];
            const zdist_shape_t *in = i ? &spec.layers[i - 1].out : &spec.input_shape;
            if (!zdist_shape_equal(in, &l->in) || l->out.rank < 1 || l->params < 0)
                __builtin_trap();
            for (int d = 0; d < l->out.rank; d++)
                if (l->out.dims[d] < 1)
                    __builtin_trap();
            total += l->params;
        }
        if (total != spec.total_params || spec.layers[spec.num_layers - 1].out.rank != 1)
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
