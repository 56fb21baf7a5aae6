/* Fuzz target: the job document parser (zdist/job.h) on arbitrary text.
   A job that parses must validate, copy, and survive its typed message
   (job.proto) unchanged in what validation sees; a refusal always says why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    zdist_job_t job, copy;
    zdist_error_t err = {0};
    if (zdist_job_parse(text, "/fuzz/base", &job, &err) == 0) {
        if (zdist_job_validate(&job, &err) != 0)
            __builtin_trap(); /* parsed means valid */
        if (zdist_job_copy(&job, &copy, &err) == 0) {
            if (zdist_job_validate(&copy, &err) != 0 || strcmp(copy.name, job.name) != 0)
                __builtin_trap();
            zdist_job_release(&copy);
        }
        zdist_job_release(&job);
    } else if (!err.text[0]) {
        __builtin_trap(); /* a refusal always says why */
    }
    free(text);
    return 0;
}
