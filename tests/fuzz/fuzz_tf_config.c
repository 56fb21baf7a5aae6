/* Fuzz target: what every daemon does at start with TF_CONFIG
   (zdist_cluster_load): the environment variable, or the same text as a
   --cluster-file, then a --task override. Input: the first line is the
   --task value (empty: none); the first byte of it, when '@', reads the rest
   from a file instead of the environment. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_files.h"
#include "zdist/cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    const uint8_t *nl = memchr(data, '\n', size);
    size_t tlen = nl ? (size_t) (nl - data) : 0;
    const uint8_t *body = nl ? nl + 1 : data;
    size_t blen = size - (size_t) (body - data);
    int from_file = tlen > 0 && data[0] == '@';
    /* putenv with a string we own and free after unsetenv: glibc's setenv
       keeps every value it was ever given, so millions of inputs ran the
       fuzzer out of memory (2 GB after 27 million). */
    static const char key[] = "TF_CONFIG=";
    char *task = malloc(tlen + 1), *kv = malloc(sizeof key + blen);
    if (!task || !kv) {
        free(task);
        free(kv);
        return 0;
    }
    memcpy(task, data + from_file, tlen - (size_t) from_file);
    task[tlen - (size_t) from_file] = '\0';
    memcpy(kv, key, sizeof key - 1);
    memcpy(kv + sizeof key - 1, body, blen);
    kv[sizeof key - 1 + blen] = '\0';
    char path[512] = "";
    if (from_file) {
        unsetenv("TF_CONFIG");
        if (fz_write("cluster.json", body, blen, path) != 0)
            abort();
    } else {
        putenv(kv);
    }
    zdist_cluster_t *c = NULL;
    zdist_error_t err = {0};
    int rc = zdist_cluster_load(from_file ? path : NULL, *task ? task : NULL, &c, &err);
    fz_report(rc, err.text);
    if (rc == 0) {
        if (!c)
            __builtin_trap();
        char *json = zdist_cluster_to_json(c);
        if (json) {
            /* What it prints parses again. */
            zdist_error_t err2 = {0};
            zdist_cluster_t *again = zdist_cluster_parse(json, "round trip", &err2);
            zdist_cluster_destroy(&again);
        }
        free(json);
        char *master = zdist_cluster_master(c);
        free(master);
        zdist_cluster_destroy(&c);
    } else if (!err.text[0] || c) {
        __builtin_trap(); /* a refusal always says why, and returns nothing */
    }
    unsetenv("TF_CONFIG");
    free(task);
    free(kv);
    return 0;
}
