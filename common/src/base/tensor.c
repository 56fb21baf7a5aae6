/* zdist tensors: dtype table, shapes, checked byte sizes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "zdist/parse.h"
#include "zdist/tensor.h"

static const struct {
    zdist_dtype_t dtype;
    const char *name;
    size_t size;
} s_dtypes[] = {
    {ZDIST_DTYPE_FLOAT32, "float32", 4},
    {ZDIST_DTYPE_FLOAT64, "float64", 8},
    {ZDIST_DTYPE_INT32, "int32", 4},
    {ZDIST_DTYPE_INT64, "int64", 8},
    {ZDIST_DTYPE_UINT8, "uint8", 1},
    {ZDIST_DTYPE_FLOAT16, "float16", 2},
    {ZDIST_DTYPE_BFLOAT16, "bfloat16", 2},
    {ZDIST_DTYPE_INT8, "int8", 1},
    {ZDIST_DTYPE_INT16, "int16", 2},
    {ZDIST_DTYPE_UINT16, "uint16", 2},
    {ZDIST_DTYPE_UINT32, "uint32", 4},
    {ZDIST_DTYPE_UINT64, "uint64", 8},
    {ZDIST_DTYPE_BOOL, "bool", 1},
    {ZDIST_DTYPE_COMPLEX64, "complex64", 8},
    {ZDIST_DTYPE_COMPLEX128, "complex128", 16},
    {ZDIST_DTYPE_STRING, "string", 0},
};
#define S_NDTYPES (sizeof s_dtypes / sizeof s_dtypes[0])

/* TensorFlow also accepts these spellings (tf.as_dtype). */
static const struct {
    const char *alias;
    zdist_dtype_t dtype;
} s_aliases[] = {
    {"float", ZDIST_DTYPE_FLOAT32},  {"double", ZDIST_DTYPE_FLOAT64},
    {"half", ZDIST_DTYPE_FLOAT16},   {"complex", ZDIST_DTYPE_COMPLEX128},
};

zdist_dtype_t
zdist_dtype_from_name(const char *name)
{
    if (!name)
        return ZDIST_DTYPE_INVALID;
    for (size_t i = 0; i < S_NDTYPES; i++)
        if (strcmp(s_dtypes[i].name, name) == 0)
            return s_dtypes[i].dtype;
    for (size_t i = 0; i < sizeof s_aliases / sizeof s_aliases[0]; i++)
        if (strcmp(s_aliases[i].alias, name) == 0)
            return s_aliases[i].dtype;
    return ZDIST_DTYPE_INVALID;
}

const char *
zdist_dtype_name(zdist_dtype_t dtype)
{
    for (size_t i = 0; i < S_NDTYPES; i++)
        if (s_dtypes[i].dtype == dtype)
            return s_dtypes[i].name;
    return "invalid";
}

size_t
zdist_dtype_size(zdist_dtype_t dtype)
{
    for (size_t i = 0; i < S_NDTYPES; i++)
        if (s_dtypes[i].dtype == dtype)
            return s_dtypes[i].size;
    return 0;
}

size_t
zdist_dtype_size_for_sizing(zdist_dtype_t dtype, int64_t bytes_per_string)
{
    if (dtype == ZDIST_DTYPE_STRING)
        return bytes_per_string > 0 ? (size_t) bytes_per_string : 0;
    return zdist_dtype_size(dtype);
}

bool
zdist_dtype_is_data(zdist_dtype_t dtype)
{
    return dtype >= ZDIST_DTYPE_FLOAT32 && dtype <= ZDIST_DTYPE_UINT8;
}

const char *
zdist_dtype_names(void)
{
    return "float32, float64, int32, int64, uint8, float16, bfloat16, int8, int16, "
           "uint16, uint32, uint64, bool, complex64, complex128, string";
}

int
zdist_shape_init(zdist_shape_t *shape, int rank, const int64_t *dims)
{
    if (rank < 0 || rank > ZDIST_MAX_RANK)
        return -EINVAL;
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0)
            return -EINVAL;
    memset(shape, 0, sizeof *shape);
    shape->rank = rank;
    if (rank > 0)
        memcpy(shape->dims, dims, (size_t) rank * sizeof dims[0]);
    return 0;
}

int
zdist_shape_num_elements(const zdist_shape_t *shape, int64_t *ret_n)
{
    int64_t n = 1;
    for (int i = 0; i < shape->rank; i++) {
        if (shape->dims[i] < 0)
            return -EINVAL;
        if (__builtin_mul_overflow(n, shape->dims[i], &n))
            return -EOVERFLOW;
    }
    *ret_n = n;
    return 0;
}

bool
zdist_shape_equal(const zdist_shape_t *a, const zdist_shape_t *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

char *
zdist_shape_format(const zdist_shape_t *shape, char *buf, size_t size)
{
    size_t used = 0;
    int n = snprintf(buf, size, "[");
    used = n > 0 ? (size_t) n : 0;
    for (int i = 0; i < shape->rank && used < size; i++) {
        n = snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long) shape->dims[i]);
        used += n > 0 ? (size_t) n : 0;
    }
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

int
zdist_shape_parse(const char *text, zdist_shape_t *ret_shape, zdist_error_t *err)
{
    if (!text || !*text)
        return zdist_error_set(err, -EINVAL, "shape is empty: give dimensions like 13,4");
    zdist_shape_t shape = {0};
    const char *p = text;
    while (1) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t) (comma - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof item)
            return zdist_error_set(err, -EINVAL, "shape '%s': each dimension must be a non-negative integer", text);
        if (shape.rank == ZDIST_MAX_RANK)
            return zdist_error_set(err, -EINVAL, "shape '%s': rank is at most %d", text, ZDIST_MAX_RANK);
        memcpy(item, p, len);
        item[len] = '\0';
        int64_t d;
        int rc = zdist_parse_int64(item, 0, INT64_MAX, &d);
        if (rc < 0)
            return zdist_error_set(err, -EINVAL, "shape '%s': dimension '%s' must be a non-negative integer", text, item);
        shape.dims[shape.rank++] = d;
        if (!comma)
            break;
        p = comma + 1;
    }
    *ret_shape = shape;
    return 0;
}

int
zdist_tensor_byte_size(zdist_dtype_t dtype, const zdist_shape_t *shape, size_t *ret_bytes)
{
    size_t esize = zdist_dtype_size(dtype);
    if (esize == 0)
        return -EINVAL;
    int64_t n;
    int rc = zdist_shape_num_elements(shape, &n);
    if (rc < 0)
        return rc;
    size_t bytes;
    if (__builtin_mul_overflow((size_t) n, esize, &bytes))
        return -EOVERFLOW;
    *ret_bytes = bytes;
    return 0;
}
