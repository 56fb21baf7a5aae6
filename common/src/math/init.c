/* init: counter-based initializers, identical values under any sharding. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "zdist/init.h"

static const char *s_kind_names[] = {
    [ZDIST_INIT_ZEROS] = "zeros",
    [ZDIST_INIT_ONES] = "ones",
    [ZDIST_INIT_CONSTANT] = "constant",
    [ZDIST_INIT_RANDOM_UNIFORM] = "random_uniform",
    [ZDIST_INIT_RANDOM_NORMAL] = "random_normal",
    [ZDIST_INIT_TRUNCATED_NORMAL] = "truncated_normal",
    [ZDIST_INIT_GLOROT_UNIFORM] = "glorot_uniform",
};
#define S_NKINDS (sizeof s_kind_names / sizeof s_kind_names[0])

const char *
zdist_init_kind_name(zdist_init_kind_t kind)
{
    if ((unsigned) kind < S_NKINDS)
        return s_kind_names[kind];
    return "invalid";
}

int
zdist_init_kind_from_name(const char *name, zdist_init_kind_t *ret_kind)
{
    if (!name)
        return -EINVAL;
    for (size_t i = 0; i < S_NKINDS; i++)
        if (strcmp(s_kind_names[i], name) == 0) {
            *ret_kind = (zdist_init_kind_t) i;
            return 0;
        }
    return -EINVAL;
}

static bool
s_is_random(zdist_init_kind_t kind)
{
    return kind == ZDIST_INIT_RANDOM_UNIFORM || kind == ZDIST_INIT_RANDOM_NORMAL
           || kind == ZDIST_INIT_TRUNCATED_NORMAL || kind == ZDIST_INIT_GLOROT_UNIFORM;
}

int
zdist_init_validate(const zdist_initializer_t *init, zdist_dtype_t dtype, zdist_error_t *err)
{
    if ((unsigned) init->kind >= S_NKINDS)
        return zdist_error_set(err, -EINVAL, "unknown initializer %d; use one of zeros, ones, "
                               "constant, random_uniform, random_normal, truncated_normal, "
                               "glorot_uniform", (int) init->kind);
    if (!zdist_dtype_is_data(dtype))
        return zdist_error_set(err, -EINVAL, "dtype %s cannot hold variable values; use "
                               "float32, float64, int32, int64 or uint8", zdist_dtype_name(dtype));
    bool is_float = dtype == ZDIST_DTYPE_FLOAT32 || dtype == ZDIST_DTYPE_FLOAT64;
    if (s_is_random(init->kind) && !is_float)
        return zdist_error_set(err, -EINVAL, "initializer %s needs a float32 or float64 variable, "
                               "not %s; use zeros, ones or constant",
                               zdist_init_kind_name(init->kind), zdist_dtype_name(dtype));
    switch (init->kind) {
    case ZDIST_INIT_CONSTANT:
        if (!isfinite(init->value))
            return zdist_error_set(err, -EINVAL, "constant initializer value must be finite");
        if (!is_float) {
            /* whole numbers in [lo, hi) convert without undefined behaviour */
            double lo = dtype == ZDIST_DTYPE_UINT8 ? 0.0 : dtype == ZDIST_DTYPE_INT32 ? -0x1p31 : -0x1p63;
            double hi = dtype == ZDIST_DTYPE_UINT8 ? 256.0 : dtype == ZDIST_DTYPE_INT32 ? 0x1p31 : 0x1p63;
            if (init->value != floor(init->value) || init->value < lo || init->value >= hi)
                return zdist_error_set(err, -EINVAL, "constant %g does not fit a %s variable; use "
                                       "a whole number in its range", init->value,
                                       zdist_dtype_name(dtype));
        }
        break;
    case ZDIST_INIT_RANDOM_UNIFORM:
        if (!isfinite(init->minval) || !isfinite(init->maxval) || init->minval > init->maxval)
            return zdist_error_set(err, -EINVAL, "random_uniform needs finite minval <= maxval, "
                                   "got [%g, %g)", init->minval, init->maxval);
        break;
    case ZDIST_INIT_RANDOM_NORMAL:
    case ZDIST_INIT_TRUNCATED_NORMAL:
        if (!isfinite(init->mean) || !isfinite(init->stddev) || init->stddev < 0)
            return zdist_error_set(err, -EINVAL, "%s needs a finite mean and stddev >= 0, got "
                                   "mean %g stddev %g", zdist_init_kind_name(init->kind),
                                   init->mean, init->stddev);
        break;
    default:
        break;
    }
    return 0;
}

bool
zdist_init_equal(const zdist_initializer_t *a, const zdist_initializer_t *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case ZDIST_INIT_CONSTANT:
        return a->value == b->value;
    case ZDIST_INIT_RANDOM_UNIFORM:
        return a->minval == b->minval && a->maxval == b->maxval;
    case ZDIST_INIT_RANDOM_NORMAL:
    case ZDIST_INIT_TRUNCATED_NORMAL:
        return a->mean == b->mean && a->stddev == b->stddev;
    default:
        return true;
    }
}

void
zdist_init_compute_fans(const zdist_shape_t *shape, double *ret_fan_in, double *ret_fan_out)
{
    double fan_in, fan_out;
    if (shape->rank < 1) {
        fan_in = fan_out = 1;
    } else if (shape->rank == 1) {
        fan_in = fan_out = (double) shape->dims[0];
    } else if (shape->rank == 2) {
        fan_in = (double) shape->dims[0];
        fan_out = (double) shape->dims[1];
    } else {
        double rf = 1;
        for (int i = 0; i < shape->rank - 2; i++)
            rf *= (double) shape->dims[i];
        fan_in = (double) shape->dims[shape->rank - 2] * rf;
        fan_out = (double) shape->dims[shape->rank - 1] * rf;
    }
    *ret_fan_in = fan_in;
    *ret_fan_out = fan_out;
}

double
zdist_init_glorot_limit(const zdist_shape_t *shape)
{
    double fan_in, fan_out;
    zdist_init_compute_fans(shape, &fan_in, &fan_out);
    /* VarianceScaling(scale=1, mode="fan_avg", distribution="uniform") */
    double scale = 1.0 / fmax(1.0, (fan_in + fan_out) / 2.0);
    return sqrt(3.0 * scale);
}

/* splitmix64's finalizer: a bijective mix, so distinct counters stay distinct. */
static inline uint64_t
s_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t
s_name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *) name; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Uniform in [0, 1) with 53 random bits from counter (row key, column, draw). */
static inline double
s_uniform(uint64_t row_key, uint64_t col, uint64_t draw)
{
    uint64_t x = s_mix(s_mix(row_key ^ col) ^ (draw * 0xd1342543de82ef95ULL));
    return (double) (x >> 11) * 0x1.0p-53;
}

/* Standard normal by Box-Muller from draws 2k and 2k+1. */
static inline double
s_normal(uint64_t row_key, uint64_t col, uint64_t k)
{
    double u1 = 1.0 - s_uniform(row_key, col, 2 * k); /* (0, 1] so log is finite */
    double u2 = s_uniform(row_key, col, 2 * k + 1);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static double
s_value(const zdist_initializer_t *init, double glorot_limit, uint64_t row_key, uint64_t col)
{
    switch (init->kind) {
    case ZDIST_INIT_ZEROS:
        return 0.0;
    case ZDIST_INIT_ONES:
        return 1.0;
    case ZDIST_INIT_CONSTANT:
        return init->value;
    case ZDIST_INIT_RANDOM_UNIFORM:
        return init->minval + (init->maxval - init->minval) * s_uniform(row_key, col, 0);
    case ZDIST_INIT_GLOROT_UNIFORM:
        return -glorot_limit + 2.0 * glorot_limit * s_uniform(row_key, col, 0);
    case ZDIST_INIT_RANDOM_NORMAL:
        return init->mean + init->stddev * s_normal(row_key, col, 0);
    case ZDIST_INIT_TRUNCATED_NORMAL:
        for (uint64_t k = 0;; k++) {
            double z = s_normal(row_key, col, k);
            if (fabs(z) <= 2.0)
                return init->mean + init->stddev * z;
        }
    }
    return 0.0;
}

static uint64_t
s_var_key(uint64_t seed, const char *name)
{
    return s_mix(s_mix(seed) ^ s_name_hash(name ? name : ""));
}

/* Elements in one row of shape (the product of dims 1..). */
static int
s_row_width(const zdist_shape_t *shape, int64_t *ret_width, zdist_error_t *err)
{
    int64_t width = 1;
    for (int i = 1; i < shape->rank; i++)
        if (__builtin_mul_overflow(width, shape->dims[i], &width))
            return zdist_error_set(err, -EOVERFLOW, "variable shape is too large");
    *ret_width = width;
    return 0;
}

static double
s_limit(const zdist_initializer_t *init, const zdist_shape_t *shape)
{
    return init->kind == ZDIST_INIT_GLOROT_UNIFORM ? zdist_init_glorot_limit(shape) : 0.0;
}

/* Rows first_row .. first_row + rows - 1 (any int64: the key wraps as
   uint64, so a dynamic table's negative ids are rows too) into buf. */
static void
s_fill_rows(const zdist_initializer_t *init, uint64_t var_key, double limit, zdist_dtype_t dtype,
            int64_t first_row, int64_t rows, int64_t width, void *buf)
{
    for (int64_t r = 0; r < rows; r++) {
        uint64_t row_key = s_mix(var_key ^ ((uint64_t) first_row + (uint64_t) r));
        size_t base = (size_t) r * (size_t) width;
        for (int64_t c = 0; c < width; c++) {
            double v = s_value(init, limit, row_key, (uint64_t) c);
            size_t i = base + (size_t) c;
            switch (dtype) {
            case ZDIST_DTYPE_FLOAT32:
                ((float *) buf)[i] = (float) v;
                break;
            case ZDIST_DTYPE_FLOAT64:
                ((double *) buf)[i] = v;
                break;
            case ZDIST_DTYPE_INT32:
                ((int32_t *) buf)[i] = (int32_t) v;
                break;
            case ZDIST_DTYPE_INT64:
                ((int64_t *) buf)[i] = (int64_t) v;
                break;
            case ZDIST_DTYPE_UINT8:
                ((uint8_t *) buf)[i] = (uint8_t) v;
                break;
            default:
                break;
            }
        }
    }
}

/* rows x width elements from first_row on into buf, once buf_bytes is
   checked to hold exactly them. */
static int
s_fill_checked(const zdist_initializer_t *init, uint64_t seed, const char *name, zdist_dtype_t dtype,
               const zdist_shape_t *shape, int64_t first_row, int64_t rows, int64_t width, void *buf,
               size_t buf_bytes, zdist_error_t *err)
{
    int64_t n;
    size_t need;
    if (__builtin_mul_overflow(rows, width, &n)
        || __builtin_mul_overflow((size_t) n, zdist_dtype_size(dtype), &need))
        return zdist_error_set(err, -EOVERFLOW, "shard is too large");
    if (need != buf_bytes)
        return zdist_error_set(err, -EINVAL, "initializer buffer holds %zu bytes, expected %zu",
                               buf_bytes, need);
    if (init->kind == ZDIST_INIT_ZEROS) {
        memset(buf, 0, need);
        return 0;
    }
    s_fill_rows(init, s_var_key(seed, name), s_limit(init, shape), dtype, first_row, rows, width, buf);
    return 0;
}

int
zdist_init_fill(const zdist_initializer_t *init, uint64_t seed, const char *name, zdist_dtype_t dtype,
              const zdist_shape_t *shape, int64_t row_offset, int64_t rows, void *buf,
              size_t buf_bytes, zdist_error_t *err)
{
    int rc = zdist_init_validate(init, dtype, err);
    if (rc < 0)
        return rc;
    int64_t total_rows = shape->rank > 0 ? shape->dims[0] : 1;
    int64_t width = 1;
    if ((rc = s_row_width(shape, &width, err)) < 0)
        return rc;
    if (row_offset < 0 || rows < 0 || row_offset > total_rows || rows > total_rows - row_offset)
        return zdist_error_set(err, -EINVAL, "rows [%lld, %lld) are outside the variable's "
                               "%lld rows", (long long) row_offset,
                               (long long) row_offset + (long long) rows, (long long) total_rows);
    return s_fill_checked(init, seed, name, dtype, shape, row_offset, rows, width, buf, buf_bytes, err);
}

int
zdist_init_fill_row(const zdist_initializer_t *init, uint64_t seed, const char *name, zdist_dtype_t dtype,
                    const zdist_shape_t *shape, int64_t row, void *buf, size_t buf_bytes,
                    zdist_error_t *err)
{
    int rc = zdist_init_validate(init, dtype, err);
    if (rc < 0)
        return rc;
    int64_t width = 1;
    if ((rc = s_row_width(shape, &width, err)) < 0)
        return rc;
    return s_fill_checked(init, seed, name, dtype, shape, row, 1, width, buf, buf_bytes, err);
}
