/* zdist partitioners (TF's Fixed/MinSize/MaxSize) and parameter-server placement (Div split, round robin). */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/parse.h"
#include "zdist/partition.h"

#define S_SPEC_USAGE                                                                          \
    "use none, fixed:NUM_SHARDS, min_size[:MIN_SHARD_BYTES[:MAX_SHARDS[:BYTES_PER_STRING]]] " \
    "or max_size:MAX_SHARD_BYTES[:MAX_SHARDS[:BYTES_PER_STRING]]"

/* Sizes are products of up to 8 int64 dims and a dtype size: they are
   computed in 128 bits and saturate, which keeps every comparison exact. */
typedef unsigned __int128 s_u128;
#define S_U128_MAX (~(s_u128) 0)

static s_u128
s_mul_sat(s_u128 a, s_u128 b)
{
    s_u128 r;
    if (__builtin_mul_overflow(a, b, &r))
        return S_U128_MAX;
    return r;
}

static int64_t
s_min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static const char *
s_kind_name(zdist_partitioner_kind_t kind)
{
    switch (kind) {
    case ZDIST_PARTITIONER_NONE:
        return "none";
    case ZDIST_PARTITIONER_FIXED:
        return "fixed";
    case ZDIST_PARTITIONER_MIN_SIZE:
        return "min_size";
    case ZDIST_PARTITIONER_MAX_SIZE:
        return "max_size";
    }
    return "unknown";
}

zdist_partitioner_t
zdist_partitioner_default_ps(int64_t num_ps)
{
    return (zdist_partitioner_t){.kind = ZDIST_PARTITIONER_MIN_SIZE,
                                 .min_shard_bytes = ZDIST_PARTITION_DEFAULT_MIN_SHARD_BYTES,
                                 .max_shards = num_ps,
                                 .bytes_per_string = ZDIST_PARTITION_DEFAULT_BYTES_PER_STRING};
}

static void
s_defaults(zdist_partitioner_kind_t kind, zdist_partitioner_t *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->kind = kind;
    spec->min_shard_bytes = ZDIST_PARTITION_DEFAULT_MIN_SHARD_BYTES;
    /* MinSizePartitioner defaults max_shards to 1, MaxSizePartitioner to None. */
    spec->max_shards = kind == ZDIST_PARTITIONER_MIN_SIZE ? 1 : 0;
    spec->bytes_per_string = ZDIST_PARTITION_DEFAULT_BYTES_PER_STRING;
}

int
zdist_partitioner_validate(const zdist_partitioner_t *spec, zdist_error_t *err)
{
    if (!spec)
        return zdist_error_set(err, -EINVAL, "partitioner is missing");
    const char *k = s_kind_name(spec->kind);
    switch (spec->kind) {
    case ZDIST_PARTITIONER_NONE:
        return 0;
    case ZDIST_PARTITIONER_FIXED:
        if (spec->num_shards < 1)
            return zdist_error_set(err, -EINVAL, "%s: num_shards must be positive, got %" PRId64, k,
                                   spec->num_shards);
        return 0;
    case ZDIST_PARTITIONER_MIN_SIZE:
        if (spec->min_shard_bytes < 1)
            return zdist_error_set(err, -EINVAL, "%s: min_shard_bytes must be positive, got %" PRId64, k,
                                   spec->min_shard_bytes);
        if (spec->max_shards < 1)
            return zdist_error_set(err, -EINVAL, "%s: max_shards must be positive, got %" PRId64, k,
                                   spec->max_shards);
        break;
    case ZDIST_PARTITIONER_MAX_SIZE:
        if (spec->max_shard_bytes < 1)
            return zdist_error_set(err, -EINVAL, "%s: max_shard_bytes must be positive, got %" PRId64, k,
                                   spec->max_shard_bytes);
        if (spec->max_shards < 0)
            return zdist_error_set(err, -EINVAL,
                                   "%s: max_shards must be positive (or 0 for no limit), got %" PRId64, k,
                                   spec->max_shards);
        break;
    default:
        return zdist_error_set(err, -EINVAL, "partitioner kind %d is unknown; %s", (int) spec->kind,
                               S_SPEC_USAGE);
    }
    if (spec->bytes_per_string < 1)
        return zdist_error_set(err, -EINVAL, "%s: bytes_per_string must be positive, got %" PRId64, k,
                               spec->bytes_per_string);
    return 0;
}

/* One numeric field of a spec; `none_ok` accepts "none" as 0 (TF's None). */
static int
s_parse_field(const char *kind, const char *field, const char *text, bool none_ok, int64_t *ret,
              zdist_error_t *err)
{
    if (none_ok && strcmp(text, "none") == 0) {
        *ret = 0;
        return 0;
    }
    int rc = zdist_parse_int64(text, INT64_MIN, INT64_MAX, ret);
    if (rc == -ERANGE)
        return zdist_error_set(err, -EINVAL, "%s: %s '%s' is out of range", kind, field, text);
    if (rc < 0)
        return zdist_error_set(err, -EINVAL, "%s: %s '%s' is not an integer%s", kind, field, text,
                               none_ok ? " (or none)" : "");
    return 0;
}

int
zdist_partitioner_parse(const char *spec, zdist_partitioner_t *ret_spec, zdist_error_t *err)
{
    if (!spec || !*spec)
        return zdist_error_set(err, -EINVAL, "partitioner spec is empty; " S_SPEC_USAGE);

    /* Split a copy at ':' into the kind and at most 3 fields (one more to
       notice extras). */
    char buf[256];
    if (strlen(spec) >= sizeof buf)
        return zdist_error_set(err, -EINVAL, "partitioner spec is too long (%zu bytes)", strlen(spec));
    strcpy(buf, spec);
    char *parts[5];
    int nparts = 0;
    char *p = buf;
    while (nparts < 5) {
        parts[nparts++] = p;
        char *colon = strchr(p, ':');
        if (!colon)
            break;
        *colon = '\0';
        p = colon + 1;
    }
    int nargs = nparts - 1;

    static const struct {
        const char *name;
        zdist_partitioner_kind_t kind;
        int min_args, max_args;
        const char *usage;
    } kinds[] = {
        {"none", ZDIST_PARTITIONER_NONE, 0, 0, "none"},
        {"fixed", ZDIST_PARTITIONER_FIXED, 1, 1, "fixed:NUM_SHARDS"},
        {"min_size", ZDIST_PARTITIONER_MIN_SIZE, 0, 3,
         "min_size[:MIN_SHARD_BYTES[:MAX_SHARDS[:BYTES_PER_STRING]]]"},
        {"max_size", ZDIST_PARTITIONER_MAX_SIZE, 1, 3, "max_size:MAX_SHARD_BYTES[:MAX_SHARDS[:BYTES_PER_STRING]]"},
    };
    size_t i;
    for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(parts[0], kinds[i].name) == 0)
            break;
    if (i == sizeof kinds / sizeof kinds[0])
        return zdist_error_set(err, -EINVAL, "partitioner '%s': unknown kind '%s'; " S_SPEC_USAGE, spec, parts[0]);
    if (nargs < kinds[i].min_args || nargs > kinds[i].max_args)
        return zdist_error_set(err, -EINVAL, "partitioner '%s': %s takes %s%d argument%s: %s", spec,
                               kinds[i].name, kinds[i].min_args == kinds[i].max_args ? "exactly " : "at most ",
                               kinds[i].max_args, kinds[i].max_args == 1 ? "" : "s", kinds[i].usage);

    zdist_partitioner_t out;
    s_defaults(kinds[i].kind, &out);
    const char *k = kinds[i].name;
    int rc = 0;
    switch (out.kind) {
    case ZDIST_PARTITIONER_NONE:
        break;
    case ZDIST_PARTITIONER_FIXED:
        rc = s_parse_field(k, "num_shards", parts[1], false, &out.num_shards, err);
        break;
    case ZDIST_PARTITIONER_MIN_SIZE:
    case ZDIST_PARTITIONER_MAX_SIZE: {
        bool is_min = out.kind == ZDIST_PARTITIONER_MIN_SIZE;
        if (nargs >= 1)
            rc = s_parse_field(k, is_min ? "min_shard_bytes" : "max_shard_bytes", parts[1], false,
                               is_min ? &out.min_shard_bytes : &out.max_shard_bytes, err);
        if (rc == 0 && nargs >= 2)
            rc = s_parse_field(k, "max_shards", parts[2], !is_min, &out.max_shards, err);
        if (rc == 0 && nargs >= 3)
            rc = s_parse_field(k, "bytes_per_string", parts[3], false, &out.bytes_per_string, err);
        break;
    }
    }
    if (rc < 0)
        return rc;
    rc = zdist_partitioner_validate(&out, err);
    if (rc < 0)
        return rc;
    *ret_spec = out;
    return 0;
}

char *
zdist_partitioner_format(const zdist_partitioner_t *spec, char *buf, size_t size)
{
    if (!buf || size == 0)
        return buf;
    switch (spec->kind) {
    case ZDIST_PARTITIONER_NONE:
        snprintf(buf, size, "none");
        break;
    case ZDIST_PARTITIONER_FIXED:
        snprintf(buf, size, "fixed:%" PRId64, spec->num_shards);
        break;
    case ZDIST_PARTITIONER_MIN_SIZE:
        snprintf(buf, size, "min_size:%" PRId64 ":%" PRId64 ":%" PRId64, spec->min_shard_bytes, spec->max_shards,
                 spec->bytes_per_string);
        break;
    case ZDIST_PARTITIONER_MAX_SIZE:
        snprintf(buf, size, "max_size:%" PRId64 ":%" PRId64 ":%" PRId64, spec->max_shard_bytes, spec->max_shards,
                 spec->bytes_per_string);
        break;
    default:
        snprintf(buf, size, "unknown");
        break;
    }
    return buf;
}

static int
s_check_shape(const zdist_shape_t *shape, zdist_error_t *err)
{
    if (!shape || shape->rank < 0 || shape->rank > ZDIST_MAX_RANK)
        return zdist_error_set(err, -EINVAL, "shape must have rank 0..%d", ZDIST_MAX_RANK);
    for (int i = 0; i < shape->rank; i++)
        if (shape->dims[i] < 0)
            return zdist_error_set(err, -EINVAL, "shape dimension %d is negative (%" PRId64 ")", i,
                                   shape->dims[i]);
    return 0;
}

int
zdist_partitioner_partitions(const zdist_partitioner_t *spec, const zdist_shape_t *shape, zdist_dtype_t dtype,
                             int axis, int64_t *ret_partitions, zdist_error_t *err)
{
    int rc = zdist_partitioner_validate(spec, err);
    if (rc < 0)
        return rc;
    rc = s_check_shape(shape, err);
    if (rc < 0)
        return rc;
    char sbuf[8 * 21 + 3];
    zdist_shape_format(shape, sbuf, sizeof sbuf);
    if (shape->rank == 0)
        return zdist_error_set(err, -EINVAL, "cannot partition a rank-0 (scalar) variable along axis %d", axis);
    if (axis < 0 || axis >= shape->rank)
        return zdist_error_set(err, -EINVAL, "axis %d is out of range for shape %s: use 0..%d", axis, sbuf,
                               shape->rank - 1);

    int64_t out[ZDIST_MAX_RANK];
    for (int i = 0; i < shape->rank; i++)
        out[i] = 1;
    const int64_t dim = shape->dims[axis];
    const char *k = s_kind_name(spec->kind);

    if (spec->kind == ZDIST_PARTITIONER_FIXED)
        out[axis] = s_min64(spec->num_shards, dim);
    else if (spec->kind == ZDIST_PARTITIONER_MIN_SIZE || spec->kind == ZDIST_PARTITIONER_MAX_SIZE) {
        size_t esize = zdist_dtype_size_for_sizing(dtype, spec->bytes_per_string);
        if (esize == 0)
            return zdist_error_set(err, -EINVAL, "%s: dtype %d is not valid; use one of %s", k, (int) dtype,
                                   zdist_dtype_names());
        /* Bytes of one slice along axis (all other axes). */
        s_u128 slice_bytes = esize;
        for (int i = 0; i < shape->rank; i++)
            if (i != axis)
                slice_bytes = s_mul_sat(slice_bytes, (s_u128) shape->dims[i]);

        if (spec->kind == ZDIST_PARTITIONER_MIN_SIZE) {
            /* max(1, min(dim, max_shards, ceil(total_bytes / min_shard_bytes))) */
            s_u128 total = s_mul_sat(slice_bytes, (s_u128) dim);
            s_u128 msb = (s_u128) spec->min_shard_bytes;
            s_u128 want = total == S_U128_MAX ? S_U128_MAX : total / msb + (total % msb != 0);
            int64_t n = s_min64(dim, spec->max_shards);
            if (want < (s_u128) n)
                n = (int64_t) want;
            out[axis] = n < 1 ? 1 : n;
        } else {
            /* TF computes bytes_per_slice = num_elements / dim * size, which
               divides by zero for an empty shape; so do we refuse. */
            if (dim == 0 || slice_bytes == 0)
                return zdist_error_set(err, -EINVAL,
                                       "%s: cannot size shards of shape %s: it has no elements", k, sbuf);
            s_u128 slices_per_shard = (s_u128) spec->max_shard_bytes / slice_bytes;
            if (slices_per_shard < 1)
                slices_per_shard = 1;
            s_u128 shards = ((s_u128) dim - 1) / slices_per_shard + 1; /* ceil, dim >= 1 */
            int64_t n = (int64_t) shards; /* shards <= dim */
            if (spec->max_shards > 0)
                n = s_min64(n, spec->max_shards);
            out[axis] = n;
        }
    }
    memcpy(ret_partitions, out, (size_t) shape->rank * sizeof out[0]);
    return 0;
}

int
zdist_partition_div(int64_t total, int64_t num_shards, int64_t index, int64_t *ret_offset, int64_t *ret_rows)
{
    if (total < 0 || num_shards < 1 || index < 0 || index >= num_shards)
        return -EINVAL;
    int64_t base = total / num_shards;
    int64_t extra = total % num_shards;
    /* Every shard before `index` has base rows, plus one if among the first
       `extra`; index * base <= total, so nothing overflows. */
    *ret_offset = index * base + s_min64(index, extra);
    *ret_rows = base + (index < extra ? 1 : 0);
    return 0;
}

int
zdist_partitions_check_ps(const int64_t *partitions, int rank, zdist_error_t *err)
{
    /* TF: `not num_partitions or num_partitions[0] == 0 or any(v != 1 for v
       in num_partitions[1:])`. A negative first element passes TF's check and
       then fails further on; refuse it here with the same text. */
    bool ok = partitions && rank >= 1 && partitions[0] > 0;
    for (int i = 1; ok && i < rank; i++)
        if (partitions[i] != 1)
            ok = false;
    if (ok)
        return 0;
    /* Python's repr of the list: "[2, 1]". */
    char list[ZDIST_MAX_RANK * 22 + 3];
    size_t used = 0;
    list[used++] = '[';
    for (int i = 0; partitions && i < rank && i < ZDIST_MAX_RANK; i++) {
        int n = snprintf(list + used, sizeof list - used, "%s%" PRId64, i ? ", " : "", partitions[i]);
        if (n > 0)
            used += (size_t) n;
    }
    snprintf(list + used, sizeof list - used, "]");
    return zdist_error_set(err, -EINVAL,
                           "variable_partitioner must return a list/tuple whose elements are 1 besides the first "
                           "element (non-zero), got: %s",
                           list);
}

int64_t
zdist_layout_shard_rows(const zdist_layout_t *layout, int s)
{
    return layout->shape.rank == 0 ? 1 : layout->shards[s].rows;
}

void
zdist_layout_destroy(zdist_layout_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_layout_t *self = *self_p;
    if (self->shards) {
        for (int i = 0; i < self->num_shards; i++)
            free(self->shards[i].name);
        free(self->shards);
    }
    free(self->name);
    free(self);
    *self_p = NULL;
}

int
zdist_layout_lookup(const zdist_layout_t *layout, int64_t global_id, int *ret_shard, int64_t *ret_row,
                    zdist_error_t *err)
{
    assert(layout);
    const char *name = layout->name ? layout->name : "";
    if (layout->shape.rank == 0)
        return zdist_error_set(err, -ERANGE, "row id %" PRId64 " is out of range: variable '%s' is a scalar and has no rows",
                               global_id, name);
    int64_t n = layout->shape.dims[0];
    if (global_id < 0 || global_id >= n) {
        if (n == 0)
            return zdist_error_set(err, -ERANGE, "row id %" PRId64 " is out of range: variable '%s' has no rows",
                                   global_id, name);
        return zdist_error_set(err, -ERANGE,
                               "row id %" PRId64 " is out of range: valid ids of variable '%s' are 0..%" PRId64,
                               global_id, name, n - 1);
    }
    if (layout->num_shards < 1 || !layout->shards)
        return zdist_error_set(err, -EINVAL, "layout of variable '%s' has no shards", name);
    /* Last shard whose offset is <= id. */
    int lo = 0, hi = layout->num_shards - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (layout->shards[mid].offset <= global_id)
            lo = mid;
        else
            hi = mid - 1;
    }
    const zdist_shard_t *s = &layout->shards[lo];
    if (global_id < s->offset || global_id - s->offset >= s->rows)
        return zdist_error_set(err, -EINVAL, "layout of variable '%s' does not cover row %" PRId64, name,
                               global_id);
    *ret_shard = lo;
    *ret_row = global_id - s->offset;
    return 0;
}

struct _zdist_placement_t {
    int num_ps;
    int64_t count; /* TF's _variable_count */
};

zdist_placement_t *
zdist_placement_new(int num_ps)
{
    if (num_ps < 1)
        return NULL;
    zdist_placement_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->num_ps = num_ps;
    return self;
}

void
zdist_placement_destroy(zdist_placement_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free(*self_p);
    *self_p = NULL;
}

int
zdist_placement_num_ps(const zdist_placement_t *self)
{
    assert(self);
    return self->num_ps;
}

int64_t
zdist_placement_count(const zdist_placement_t *self)
{
    assert(self);
    return self->count;
}

int
zdist_placement_place(zdist_placement_t *self, const char *name, const zdist_shape_t *shape,
                      const int64_t *partitions, zdist_layout_t **ret_layout, zdist_error_t *err)
{
    assert(self);
    assert(ret_layout);
    if (!name || !*name)
        return zdist_error_set(err, -EINVAL, "variable name is empty");
    int rc = s_check_shape(shape, err);
    if (rc < 0)
        return rc;

    int64_t k = 1;
    if (shape->rank > 0 && partitions) { /* TF skips partitioning rank-0 variables */
        rc = zdist_partitions_check_ps(partitions, shape->rank, err);
        if (rc < 0)
            return rc;
        if (partitions[0] > 1) {
            k = s_min64(partitions[0], shape->dims[0]);
            if (k == 0)
                return zdist_error_set(err, -EINVAL,
                                       "variable '%s' has no rows along axis 0; it cannot be split into %" PRId64
                                       " shards",
                                       name, partitions[0]);
        }
    }
    if (k > ZDIST_PARTITION_MAX_SHARDS)
        return zdist_error_set(err, -E2BIG, "variable '%s' would have %" PRId64 " shards; at most %d are supported",
                               name, k, ZDIST_PARTITION_MAX_SHARDS);

    zdist_layout_t *layout = calloc(1, sizeof *layout);
    if (!layout)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    layout->name = strdup(name);
    layout->shape = *shape;
    layout->num_shards = (int) k;
    layout->sharded = k > 1;
    layout->shards = calloc((size_t) k, sizeof layout->shards[0]);
    if (!layout->name || !layout->shards)
        goto oom;
    int64_t rows = shape->rank > 0 ? shape->dims[0] : 0;
    for (int i = 0; i < layout->num_shards; i++) {
        zdist_shard_t *s = &layout->shards[i];
        if (k > 1) {
            if (asprintf(&s->name, "%s/part_%d", name, i) < 0) {
                s->name = NULL;
                goto oom;
            }
            rc = zdist_partition_div(rows, k, i, &s->offset, &s->rows);
            assert(rc == 0);
        } else {
            s->name = strdup(name);
            if (!s->name)
                goto oom;
            s->offset = 0;
            s->rows = rows;
        }
        s->ps = (int) ((self->count + i) % self->num_ps);
    }
    self->count += k;
    *ret_layout = layout;
    return 0;
oom:
    zdist_layout_destroy(&layout);
    return zdist_error_set(err, -ENOMEM, "out of memory");
}

int
zdist_placement_place_variable(zdist_placement_t *self, const char *name, const zdist_shape_t *shape,
                               zdist_dtype_t dtype, const zdist_partitioner_t *partitioner,
                               zdist_layout_t **ret_layout, zdist_error_t *err)
{
    if (!partitioner || partitioner->kind == ZDIST_PARTITIONER_NONE || (shape && shape->rank == 0))
        return zdist_placement_place(self, name, shape, NULL, ret_layout, err);
    int64_t parts[ZDIST_MAX_RANK];
    int rc = zdist_partitioner_partitions(partitioner, shape, dtype, 0, parts, err);
    if (rc < 0)
        return rc;
    return zdist_placement_place(self, name, shape, parts, ret_layout, err);
}

int
zdist_placement_colocate(zdist_placement_t *self, const char *name, const zdist_shape_t *shape,
                         const zdist_layout_t *anchor, zdist_layout_t **ret_layout, zdist_error_t *err)
{
    assert(self);
    assert(ret_layout);
    if (!anchor || anchor->num_shards < 1 || !anchor->shards)
        return zdist_error_set(err, -EINVAL, "variable '%s': colocate_vars_with needs a placed anchor variable",
                               name ? name : "(null)");
    int ps = anchor->shards[0].ps;
    if (ps < 0 || ps >= self->num_ps)
        return zdist_error_set(err, -EINVAL, "variable '%s': its anchor '%s' is on ps task %d, outside 0..%d",
                               name ? name : "(null)", anchor->name ? anchor->name : "?", ps, self->num_ps - 1);
    int64_t count = self->count;
    int rc = zdist_placement_place(self, name, shape, NULL, ret_layout, err);
    if (rc < 0)
        return rc;
    self->count = count;
    (*ret_layout)->shards[0].ps = ps;
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* embedding_lookup's partition_strategy (embedding_ops.py _embedding_lookup_and_transform)          */

int
zdist_partition_strategy_from_name(const char *name, zdist_partition_strategy_t *ret, zdist_error_t *err)
{
    if (name && strcmp(name, "div") == 0)
        *ret = ZDIST_PARTITION_STRATEGY_DIV;
    else if (name && strcmp(name, "mod") == 0)
        *ret = ZDIST_PARTITION_STRATEGY_MOD;
    else /* TF's ValueError, its missing space included */
        return zdist_error_set(err, -EINVAL,
                               "Unrecognized partition strategy: %s.Must be one of either `mod` or `div`.",
                               name ? name : "None");
    return 0;
}

const char *
zdist_partition_strategy_name(zdist_partition_strategy_t strategy)
{
    return strategy == ZDIST_PARTITION_STRATEGY_MOD   ? "mod"
           : strategy == ZDIST_PARTITION_STRATEGY_DIV ? "div"
                                                      : "?";
}

/* Python's (TF's floordiv / floormod on int64) rounding towards -inf; d > 0. */
static int64_t
s_floordiv(int64_t a, int64_t d)
{
    int64_t q = a / d;
    return (a % d != 0 && a < 0) ? q - 1 : q;
}

static int64_t
s_floormod(int64_t a, int64_t d)
{
    int64_t m = a % d;
    return m < 0 ? m + d : m;
}

/* TF's partition and new id of one id; 0, or -EDOM when div divides by zero. */
static int
s_assign_one(zdist_partition_strategy_t strategy, int64_t total, int num_shards, int64_t id, int64_t *p,
             int64_t *row)
{
    if (num_shards == 1) { /* TF gathers params[0] directly */
        *p = 0;
        *row = id;
    } else if (strategy == ZDIST_PARTITION_STRATEGY_MOD) {
        *p = s_floormod(id, num_shards);
        *row = s_floordiv(id, num_shards);
    } else {
        int64_t per = total / num_shards, extras = total % num_shards;
        if (per == 0)
            return -EDOM;
        int64_t a = s_floordiv(id, per + 1), b = s_floordiv(id - extras, per);
        *p = a > b ? a : b;
        *row = *p < extras ? s_floormod(id, per + 1) : s_floormod(id - extras, per);
    }
    return 0;
}

typedef struct {
    int64_t id, k;
} s_first_t;

static int
s_first_cmp(const void *x, const void *y)
{
    const s_first_t *a = x, *b = y;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return (a->k > b->k) - (a->k < b->k);
}

/* listed[k]: whether ids[k] is in the list TF partitions (every id, or with
   unique the first occurrence of each: array_ops.unique keeps that order). */
static int
s_listed(const int64_t *ids, int64_t n, bool unique, bool *listed)
{
    for (int64_t k = 0; k < n; k++)
        listed[k] = true;
    if (!unique || n < 2)
        return 0;
    s_first_t *f = malloc((size_t) n * sizeof *f);
    if (!f)
        return -ENOMEM;
    for (int64_t k = 0; k < n; k++)
        f[k] = (s_first_t){ids[k], k};
    qsort(f, (size_t) n, sizeof *f, s_first_cmp);
    for (int64_t i = 1; i < n; i++)
        if (f[i].id == f[i - 1].id)
            listed[f[i].k] = false;
    free(f);
    return 0;
}

int
zdist_partition_assign_ids(zdist_partition_strategy_t strategy, const int64_t *rows, int num_shards,
                           const int64_t *ids, int64_t n, bool unique, int *ret_shard, int64_t *ret_row,
                           zdist_error_t *err)
{
    if (strategy != ZDIST_PARTITION_STRATEGY_DIV && strategy != ZDIST_PARTITION_STRATEGY_MOD)
        return zdist_error_set(err, -EINVAL, "unknown partition strategy %d", (int) strategy);
    if (num_shards < 1 || !rows || n < 0 || (n > 0 && (!ids || !ret_shard || !ret_row)))
        return zdist_error_set(err, -EINVAL, "assign ids: need shards, their rows and the outputs");
    int64_t total = 0;
    for (int s = 0; s < num_shards; s++)
        total += rows[s];
    bool *listed = malloc((size_t) (n ? n : 1) * sizeof *listed);
    int64_t *count = calloc((size_t) num_shards, sizeof *count);
    int rc = 0;
    if (!listed || !count || s_listed(ids, n, unique, listed) < 0)
        rc = zdist_error_set(err, -ENOMEM, "assign ids: out of memory");
    /* dynamic_partition sees every listed id first; then params[p] is
       gathered for p = 0, 1, ..., each reporting its first bad index. */
    int64_t pos = 0, bad_p = num_shards, bad_j = 0, bad_row = 0;
    for (int64_t k = 0; rc == 0 && k < n; k++) {
        int64_t p, row;
        if (s_assign_one(strategy, total, num_shards, ids[k], &p, &row) < 0) {
            rc = zdist_error_set(err, -EINVAL, "Integer division by zero");
            break;
        }
        if (p < 0 || p >= num_shards) {
            rc = zdist_error_set(err, -EINVAL, "partitions[%" PRId64 "] = %" PRId64 " is not in [0, %d)", pos,
                                 p, num_shards);
            break;
        }
        ret_shard[k] = (int) p;
        ret_row[k] = row;
        if (!listed[k])
            continue;
        pos++;
        int64_t j = count[p]++;
        if ((row < 0 || row >= rows[p]) && p < bad_p) {
            bad_p = p;
            bad_j = j;
            bad_row = row;
        }
    }
    if (rc == 0 && bad_p < num_shards)
        rc = zdist_error_set(err, -EINVAL, "indices[%" PRId64 "] = %" PRId64 " is not in [0, %" PRId64 ")",
                             bad_j, bad_row, rows[bad_p]);
    free(listed);
    free(count);
    return rc;
}

/* Dynamic tables' row placement: the header writes this function out, and
   it may never change (checkpoints' rows are placed by it). */
uint64_t
zdist_partition_id_hash(int64_t id)
{
    uint64_t z = (uint64_t) id + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int
zdist_partition_id_ps(int64_t id, int num_ps)
{
    if (num_ps < 1)
        return 0;
    return (int) (zdist_partition_id_hash(id) % (uint64_t) num_ps);
}
