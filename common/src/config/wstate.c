/* zdist wstate: a worker's variables as a checkpoint (multi_worker_mirrored's, and `zdist run --save`'s): a raw data file and a sealed JSON manifest, through zdist_file. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/wstate.h"
#include "zdist/file.h"

#define S_FORMAT "zdist-worker-state"
#define S_VERSION 1
#define S_PATH_MAX 4096
#define S_MANIFEST_MAX ((size_t) 64 << 20)
#define S_MAX_TENSORS 65536

void
zdist_wstate_release(zdist_wstate_t *state)
{
    if (!state)
        return;
    for (size_t i = 0; state->tensors && i < state->n; i++)
        free((char *) state->tensors[i].name);
    free(state->tensors);
    free(state->data);
    memset(state, 0, sizeof *state);
}

static int
s_paths(const char *dir, char *data, char *manifest, zdist_error_t *err)
{
    if ((size_t) snprintf(data, S_PATH_MAX, "%s/%s", dir, ZDIST_WSTATE_DATA) >= S_PATH_MAX ||
        (size_t) snprintf(manifest, S_PATH_MAX, "%s/%s", dir, ZDIST_WSTATE_MANIFEST) >= S_PATH_MAX)
        return zdist_error_set(err, -ENAMETOOLONG, "%s: path too long for the worker state", dir);
    return 0;
}

static json_t *
s_shape_json(const zdist_shape_t *shape)
{
    json_t *a = json_array();
    for (int d = 0; a && d < shape->rank; d++)
        json_array_append_new(a, json_integer(shape->dims[d]));
    return a;
}

int
zdist_wstate_save(const char *dir, int64_t step, int64_t iterations, const zdist_tensor_t *tensors, size_t n,
                  uint64_t *ret_bytes, zdist_error_t *err)
{
    char data[S_PATH_MAX], manifest[S_PATH_MAX];
    int rc = s_paths(dir, data, manifest, err);
    if (rc < 0)
        return rc;
    if (n > S_MAX_TENSORS)
        return zdist_error_set(err, -EINVAL, "%s: %zu tensors, at most %d", data, n, S_MAX_TENSORS);
    zdist_file_piece_t *pieces = calloc(n ? n : 1, sizeof *pieces);
    json_t *list = json_array(), *root = NULL;
    if (!pieces || !list) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    uint64_t offset = 0;
    for (size_t k = 0; k < n; k++) {
        const zdist_tensor_t *t = &tensors[k];
        size_t want = 0;
        if (!t->name || !*t->name || zdist_tensor_byte_size(t->dtype, &t->shape, &want) < 0 ||
            !zdist_dtype_is_data(t->dtype) || want != t->nbytes) {
            rc = zdist_error_set(err, -EINVAL,
                                 "%s: tensor %zu ('%s') has no name, or its bytes do not match its "
                                 "dtype and shape",
                                 data, k, t->name ? t->name : "");
            goto out;
        }
        pieces[k] = (zdist_file_piece_t){t->data, t->nbytes};
        if (json_array_append_new(list, json_pack("{s:s, s:s, s:o, s:I, s:I}", "name", t->name, "dtype",
                                                  zdist_dtype_name(t->dtype), "shape",
                                                  s_shape_json(&t->shape), "offset", (json_int_t) offset,
                                                  "bytes", (json_int_t) t->nbytes)) < 0) {
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        offset += t->nbytes;
    }
    uint32_t crc = 0;
    if ((rc = zdist_file_write(data, pieces, (int) n, 0644, &crc, err)) < 0)
        goto out;
    root =
        json_pack("{s:s, s:i, s:I, s:I, s:s, s:I, s:I, s:O}", "format", S_FORMAT, "version", S_VERSION,
                  "step", (json_int_t) step, "iterations", (json_int_t) iterations, "file", ZDIST_WSTATE_DATA,
                  "bytes", (json_int_t) offset, "crc32", (json_int_t) crc, "tensors", list);
    if (!root) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = zdist_json_write_sealed(manifest, root, "manifest_crc32", err)) < 0)
        goto out;
    if (ret_bytes)
        *ret_bytes = offset;
out:
    json_decref(root);
    json_decref(list);
    free(pieces);
    return rc;
}

/* The one refusal of a damaged state, naming the file. */
static int
s_damaged(zdist_error_t *err, const char *path, const char *what)
{
    return zdist_error_set(err, -EBADMSG, "%s: not a complete zdist worker-state file (%s)", path, what);
}

static int
s_tensor(const char *manifest, json_t *j, uint64_t *offset, uint64_t total, zdist_tensor_t *ret,
         zdist_error_t *err)
{
    json_error_t jerr;
    const char *name, *dtype_name;
    json_t *shape_j;
    json_int_t at, bytes;
    if (json_unpack_ex(j, &jerr, JSON_STRICT, "{s:s, s:s, s:o, s:I, s:I}", "name", &name, "dtype",
                       &dtype_name, "shape", &shape_j, "offset", &at, "bytes", &bytes) < 0)
        return s_damaged(err, manifest, jerr.text);
    zdist_shape_t shape = {0};
    size_t rank = json_is_array(shape_j) ? json_array_size(shape_j) : SIZE_MAX;
    int64_t dims[ZDIST_MAX_RANK];
    for (size_t d = 0; rank <= ZDIST_MAX_RANK && d < rank; d++) {
        json_t *x = json_array_get(shape_j, d);
        dims[d] = json_is_integer(x) ? json_integer_value(x) : -1;
    }
    size_t want = 0;
    zdist_dtype_t dtype = zdist_dtype_from_name(dtype_name);
    if (!*name || !zdist_dtype_is_data(dtype) || rank > ZDIST_MAX_RANK ||
        zdist_shape_init(&shape, (int) rank, dims) < 0 || zdist_tensor_byte_size(dtype, &shape, &want) < 0 ||
        bytes < 0 || (uint64_t) bytes != want || at < 0 || (uint64_t) at != *offset || want > total - *offset)
        return s_damaged(err, manifest, "a tensor's name, dtype, shape or place in the data is wrong");
    char *copy = strdup(name);
    if (!copy)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    *ret = (zdist_tensor_t){copy, dtype, shape, NULL, want};
    *offset += want;
    return 0;
}

int
zdist_wstate_load(const char *dir, zdist_wstate_t *ret, zdist_error_t *err)
{
    memset(ret, 0, sizeof *ret);
    char data[S_PATH_MAX], manifest[S_PATH_MAX];
    int rc = s_paths(dir, data, manifest, err);
    if (rc < 0)
        return rc;
    void *mtext = NULL;
    size_t mlen = 0;
    zdist_error_t ferr = {0};
    if ((rc = zdist_file_read(manifest, S_MANIFEST_MAX, &mtext, &mlen, &ferr)) < 0)
        return rc == -ENOMEM ? zdist_error_set(err, rc, "%s", ferr.text)
                             : s_damaged(err, manifest, ferr.text);
    json_error_t jerr;
    json_t *root = json_loadb(mtext, mlen, 0, &jerr), *list = NULL;
    free(mtext);
    const char *format = "", *file = "";
    int version = 0;
    json_int_t step, iterations, bytes, crc;
    /* "manifest_crc32": the CRC-32 of the rest in canonical form (absent in
       older states, which the data's CRC alone guards). */
    if (root && (rc = zdist_json_crc_check(root, "manifest_crc32", false, "the manifest", &ferr)) < 0) {
        rc = rc == -ENOMEM ? zdist_error_set(err, rc, "%s", ferr.text) : s_damaged(err, manifest, ferr.text);
        goto out;
    }
    if (!root ||
        json_unpack_ex(root, &jerr, JSON_STRICT, "{s:s, s:i, s:I, s:I, s:s, s:I, s:I, s:o}", "format",
                       &format, "version", &version, "step", &step, "iterations", &iterations, "file", &file,
                       "bytes", &bytes, "crc32", &crc, "tensors", &list) < 0) {
        rc = s_damaged(err, manifest, jerr.text);
        goto out;
    }
    if (strcmp(format, S_FORMAT) != 0 || version != S_VERSION || strcmp(file, ZDIST_WSTATE_DATA) != 0 ||
        step < 0 || iterations < 0 || bytes < 0 || crc < 0 || crc > UINT32_MAX || !json_is_array(list) ||
        json_array_size(list) > S_MAX_TENSORS) {
        rc = s_damaged(err, manifest, "not a version 1 " S_FORMAT " manifest");
        goto out;
    }
    size_t len = 0;
    if ((rc = zdist_file_read(data, (size_t) bytes, &ret->data, &len, &ferr)) < 0) {
        rc = rc == -ENOMEM ? zdist_error_set(err, rc, "%s", ferr.text)
                           : s_damaged(err, data, rc == -EFBIG ? "larger than its manifest says" : ferr.text);
        goto out;
    }
    if (len != (size_t) bytes || zdist_crc32(0, ret->data, len) != (uint32_t) crc) {
        rc = s_damaged(err, data, len != (size_t) bytes ? "shorter than its manifest says" : "bad CRC-32");
        goto out;
    }
    ret->n = json_array_size(list);
    ret->tensors = calloc(ret->n ? ret->n : 1, sizeof *ret->tensors);
    if (!ret->tensors) {
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    uint64_t offset = 0;
    for (size_t k = 0; k < ret->n && rc == 0; k++) {
        rc = s_tensor(manifest, json_array_get(list, k), &offset, (uint64_t) bytes, &ret->tensors[k], err);
        if (rc == 0)
            ret->tensors[k].data = (char *) ret->data + (offset - ret->tensors[k].nbytes);
    }
    if (rc == 0 && offset != (uint64_t) bytes)
        rc = s_damaged(err, manifest, "its tensors do not cover the data");
    ret->step = step;
    ret->iterations = iterations;
out:
    json_decref(root);
    if (rc < 0)
        zdist_wstate_release(ret);
    return rc;
}
