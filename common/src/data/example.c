/* zdist tf.train.Example parsing: a protobuf wire reader for Example,
   Features and Feature, and the columns it fills as parse_example does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/example.h"

#define S_MAX_ELEMS (INT64_C(1) << 24)

typedef struct {
    char *name;
    size_t name_len;
    zdist_feature_spec_t spec;
    zdist_feature_column_t col;
    int64_t cap_values; /* values the column holds room for */
    int64_t cap_rows;   /* rows the column holds room for */
    /* The record being parsed: */
    uint32_t seen;   /* == the parser's generation once it holds a value for this feature */
    int bad;         /* what was wrong with its last value (S_BAD_*), reported at the end */
    int64_t bad_arg; /* the count, or the dtype it had */
    int64_t pending; /* VAR: values of this row so far, from row_splits[rows] */
} s_feature_t;

enum { S_OK = 0, S_BAD_TYPE, S_BAD_COUNT, S_BAD_PARSE };

struct zdist_example_parser_t {
    s_feature_t *f;
    int n;
    int64_t rows;
    uint32_t gen;
    int *slots; /* open addressing: feature index + 1, 0 empty */
    uint32_t mask;
    int next; /* the feature after the last one matched: records from one
                 writer list their keys in one order, so this is usually it */
    int64_t cap_rows; /* rows every FIXED column holds room for */
    const uint8_t *rec_end; /* the record being parsed ends here: loads may reach it */
};

/* ------------------------------------------------------------------------ */
/* Protobuf wire format                                                       */

enum { S_VARINT = 0, S_I64 = 1, S_LEN = 2, S_I32 = 5 };

/* The slow path: bounds checked byte by byte. */
static int
s_varint_slow(const uint8_t **pp, const uint8_t *end, uint64_t *ret)
{
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
        uint8_t b = *p++;
        v |= (uint64_t) (b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *ret = v;
            return 0;
        }
    }
    return -1;
}

/* Most varints here are one byte (tags, lengths); ids are nine or ten.
   With ten bytes in reach, eight are taken as one word: the first clear
   high bit ends the varint, and the 7-bit groups are packed in three
   steps. */
static inline int
s_varint(const uint8_t **pp, const uint8_t *end, uint64_t *ret)
{
    const uint8_t *p = *pp;
    if (p < end && !(*p & 0x80)) {
        *ret = *p;
        *pp = p + 1;
        return 0;
    }
    if (end - p < 10)
        return s_varint_slow(pp, end, ret);
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t stops = ~w & 0x8080808080808080u;
    int bytes = stops ? __builtin_ctzll(stops) / 8 + 1 : 8;
    uint64_t x = w & 0x7f7f7f7f7f7f7f7fu;
    if (bytes < 8)
        x &= (UINT64_C(1) << (8 * bytes)) - 1;
    x = ((x & 0x7f007f007f007f00u) >> 1) | (x & 0x007f007f007f007fu);
    x = ((x & 0x3fff00003fff0000u) >> 2) | (x & 0x00003fff00003fffu);
    x = ((x & 0x0fffffff00000000u) >> 4) | (x & 0x000000000fffffffu);
    if (!stops) { /* nine or ten bytes */
        x |= (uint64_t) (p[8] & 0x7f) << 56;
        bytes = 9;
        if (p[8] & 0x80) {
            if (p[9] & 0x80)
                return -1; /* over ten bytes */
            x |= (uint64_t) p[9] << 63;
            bytes = 10;
        }
    }
    *ret = x;
    *pp = p + bytes;
    return 0;
}

/* A length-delimited field's bytes: [*ret, *ret + *ret_len). */
static inline int
s_len(const uint8_t **pp, const uint8_t *end, const uint8_t **ret, size_t *ret_len)
{
    uint64_t n;
    if (s_varint(pp, end, &n) < 0 || n > (uint64_t) (end - *pp))
        return -1;
    *ret = *pp;
    *ret_len = (size_t) n;
    *pp += n;
    return 0;
}

static int
s_skip(const uint8_t **pp, const uint8_t *end, int wire)
{
    uint64_t v;
    const uint8_t *b;
    size_t n;
    switch (wire) {
    case S_VARINT:
        return s_varint(pp, end, &v);
    case S_I64:
        if (end - *pp < 8)
            return -1;
        *pp += 8;
        return 0;
    case S_I32:
        if (end - *pp < 4)
            return -1;
        *pp += 4;
        return 0;
    case S_LEN:
        return s_len(pp, end, &b, &n);
    default: /* groups: not in these messages */
        return -1;
    }
}

/* ------------------------------------------------------------------------ */
/* The spec                                                                   */

static uint64_t
s_hash(const uint8_t *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3u;
    return h;
}

static inline bool
s_same(const char *name, const uint8_t *key, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((uint8_t) name[i] != key[i])
            return false;
    return true;
}

static int
s_lookup(const zdist_example_parser_t *self, const uint8_t *key, size_t n)
{
    const s_feature_t *g = &self->f[self->next];
    if (g->name_len == n && s_same(g->name, key, n))
        return self->next;
    for (uint32_t i = (uint32_t) s_hash(key, n) & self->mask;; i = (i + 1) & self->mask) {
        int d = self->slots[i] - 1;
        if (d < 0)
            return -1;
        if (self->f[d].name_len == n && !memcmp(self->f[d].name, key, n))
            return d;
    }
}

static const char *
s_tf_dtype(zdist_dtype_t dtype)
{
    return dtype == ZDIST_DTYPE_INT64 ? "int64" : dtype == ZDIST_DTYPE_FLOAT32 ? "float" : "string";
}

static void
s_shape_text(const zdist_feature_spec_t *spec, char *buf, size_t size)
{
    size_t at = (size_t) snprintf(buf, size, "[");
    for (int i = 0; i < spec->rank && at < size; i++)
        at += (size_t) snprintf(buf + at, size - at, "%s%lld", i ? "," : "", (long long) spec->shape[i]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
}

static int
s_check_spec(const zdist_feature_spec_t *s, int i, int64_t *ret_elems, zdist_error_t *err)
{
    if (!s->name || !*s->name || strlen(s->name) >= ZDIST_FEATURE_NAME_MAX)
        return zdist_error_set(err, -EINVAL, "feature %d: a name of 1 to %d bytes is required", i,
                               ZDIST_FEATURE_NAME_MAX - 1);
    if (s->dtype != ZDIST_DTYPE_FLOAT32 && s->dtype != ZDIST_DTYPE_INT64)
        return zdist_error_set(err, -EINVAL, "feature '%s': dtype must be \"float32\" or \"int64\"", s->name);
    if (s->kind != ZDIST_FEATURE_FIXED && s->kind != ZDIST_FEATURE_VAR)
        return zdist_error_set(err, -EINVAL, "feature '%s': kind must be \"fixed\" or \"var\"", s->name);
    int64_t elems = 1;
    if (s->kind == ZDIST_FEATURE_FIXED) {
        if (s->rank < 0 || s->rank > ZDIST_FEATURE_MAX_RANK)
            return zdist_error_set(err, -EINVAL, "feature '%s': shape may have at most %d dimensions", s->name,
                                   ZDIST_FEATURE_MAX_RANK);
        for (int k = 0; k < s->rank; k++) {
            if (s->shape[k] < 0)
                return zdist_error_set(err, -EINVAL, "feature '%s': shape dimension %d is negative", s->name, k);
            elems *= s->shape[k];
            if (elems > S_MAX_ELEMS)
                return zdist_error_set(err, -EINVAL, "feature '%s': shape has more than %lld values", s->name,
                                       (long long) S_MAX_ELEMS);
        }
    }
    *ret_elems = elems;
    return 0;
}

zdist_example_parser_t *
zdist_example_parser_new(const zdist_feature_spec_t *specs, int n, zdist_error_t *err)
{
    if (n < 1 || n > ZDIST_FEATURE_MAX) {
        zdist_error_set(err, -EINVAL, "a feature spec needs 1 to %d features (got %d)", ZDIST_FEATURE_MAX, n);
        return NULL;
    }
    zdist_example_parser_t *self = calloc(1, sizeof *self);
    uint32_t size = 16;
    while (size < 2u * (uint32_t) n)
        size *= 2;
    if (self) {
        self->f = calloc((size_t) n, sizeof *self->f);
        self->slots = calloc(size, sizeof *self->slots);
        self->mask = size - 1;
    }
    if (!self || !self->f || !self->slots) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        zdist_example_parser_destroy(&self);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        s_feature_t *f = &self->f[i];
        int64_t elems = 0;
        if (s_check_spec(&specs[i], i, &elems, err) < 0 || !(f->name = strdup(specs[i].name))) {
            if (f->name == NULL && specs[i].name && err && err->code == 0)
                zdist_error_set(err, -ENOMEM, "out of memory");
            zdist_example_parser_destroy(&self);
            return NULL;
        }
        self->n = i + 1;
        f->name_len = strlen(f->name);
        f->spec = specs[i];
        f->spec.name = f->name;
        f->col = (zdist_feature_column_t){.dtype = specs[i].dtype, .kind = specs[i].kind, .elems = elems};
        if (zdist_example_parser_find(self, f->name) != i) {
            zdist_error_set(err, -EINVAL, "feature '%s' is named twice in the spec", f->name);
            zdist_example_parser_destroy(&self);
            return NULL;
        }
        uint32_t k = (uint32_t) s_hash((const uint8_t *) f->name, f->name_len) & self->mask;
        while (self->slots[k])
            k = (k + 1) & self->mask;
        self->slots[k] = i + 1;
    }
    return self;
}

void
zdist_example_parser_destroy(zdist_example_parser_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_example_parser_t *self = *self_p;
    for (int i = 0; self->f && i < self->n; i++) {
        free(self->f[i].name);
        free(self->f[i].col.values);
        free(self->f[i].col.row_splits);
    }
    free(self->f);
    free(self->slots);
    free(self);
    *self_p = NULL;
}

void
zdist_example_parser_clear(zdist_example_parser_t *self)
{
    self->rows = 0;
}

int64_t
zdist_example_parser_rows(const zdist_example_parser_t *self)
{
    return self->rows;
}

int
zdist_example_parser_count(const zdist_example_parser_t *self)
{
    return self->n;
}

const zdist_feature_column_t *
zdist_example_parser_column(const zdist_example_parser_t *self, int i)
{
    return i >= 0 && i < self->n ? &self->f[i].col : NULL;
}

int
zdist_example_parser_find(const zdist_example_parser_t *self, const char *name)
{
    for (int i = 0; i < self->n; i++)
        if (!strcmp(self->f[i].name, name))
            return i;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* One record                                                                 */

/* Each Feature is decoded straight into its row as its map entry is met. A
   key met again overwrites (FIXED) or restarts (VAR) what the earlier
   entry wrote, so the last entry wins, as TensorFlow's parser has it; a
   FIXED feature's empty entry is passed over, as TensorFlow passes over a
   dense feature without a list. What is wrong with a value is noted and
   reported once the record is read, so a later entry can still replace
   it; the row becomes part of the batch only when every feature is good. */

static size_t
s_size(zdist_dtype_t dtype)
{
    return dtype == ZDIST_DTYPE_INT64 ? 8 : 4;
}

static int
s_reserve(void **buf, int64_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int64_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *b = realloc(*buf, (size_t) c * elem);
    if (!b)
        return -ENOMEM;
    *buf = b;
    *cap = c;
    return 0;
}

/* Feature: which list it holds (1 bytes, 2 float, 3 int64; 0 none) and
   that list's bytes. */
static int
s_feature_list(const uint8_t *p, const uint8_t *end, int *ret_kind, const uint8_t **ret, size_t *ret_len)
{
    /* The usual Feature: one list, under 128 bytes. */
    if (end - p >= 2 && (p[0] == 0x0a || p[0] == 0x12 || p[0] == 0x1a) && p[1] < 0x80 && p + 2 + p[1] == end) {
        *ret_kind = p[0] >> 3;
        *ret = p + 2;
        *ret_len = p[1];
        return 0;
    }
    *ret_kind = 0;
    while (p < end) {
        uint64_t tag;
        if (s_varint(&p, end, &tag) < 0)
            return -1;
        uint64_t field = tag >> 3;
        if ((tag & 7) == S_LEN && field >= 1 && field <= 3) {
            if (s_len(&p, end, ret, ret_len) < 0)
                return -1;
            *ret_kind = (int) field;
        } else if (s_skip(&p, end, (int) (tag & 7)) < 0) {
            return -1;
        }
    }
    return 0;
}

/* FloatList or Int64List: writes up to cap values to dst and counts them
   all in *ret_count. */
static int
s_decode_list(zdist_dtype_t dtype, const uint8_t *p, const uint8_t *end, void *dst, int64_t cap,
              int64_t *ret_count)
{
    int64_t n = 0;
    float *fo = dst;
    int64_t *io = dst;
    while (p < end) {
        uint64_t tag, v;
        if (s_varint(&p, end, &tag) < 0)
            return -1;
        if (tag == ((1u << 3) | S_LEN)) { /* packed */
            const uint8_t *q, *q_end;
            size_t q_len;
            if (s_len(&p, end, &q, &q_len) < 0)
                return -1;
            q_end = q + q_len;
            if (dtype == ZDIST_DTYPE_FLOAT32) {
                if (q_len % 4)
                    return -1;
                int64_t k = (int64_t) (q_len / 4);
                if (n < cap)
                    memcpy(fo + n, q, (size_t) ((k < cap - n ? k : cap - n) * 4));
                n += k;
            } else {
                while (q < q_end) {
                    if (s_varint(&q, q_end, &v) < 0)
                        return -1;
                    if (n < cap)
                        io[n] = (int64_t) v;
                    n++;
                }
            }
        } else if (dtype == ZDIST_DTYPE_FLOAT32 && tag == ((1u << 3) | S_I32)) {
            if (end - p < 4)
                return -1;
            if (n < cap)
                memcpy(fo + n, p, 4);
            p += 4;
            n++;
        } else if (dtype == ZDIST_DTYPE_INT64 && tag == ((1u << 3) | S_VARINT)) {
            if (s_varint(&p, end, &v) < 0)
                return -1;
            if (n < cap)
                io[n] = (int64_t) v;
            n++;
        } else if (s_skip(&p, end, (int) (tag & 7)) < 0) {
            return -1;
        }
    }
    *ret_count = n;
    return 0;
}

static zdist_dtype_t
s_kind_dtype(int kind)
{
    /* 1, a BytesList: no spec asks for bytes, so it reads as "string". */
    return kind == 2 ? ZDIST_DTYPE_FLOAT32 : kind == 3 ? ZDIST_DTYPE_INT64 : ZDIST_DTYPE_INVALID;
}

static void
s_take_fixed(zdist_example_parser_t *self, s_feature_t *f, int kind, const uint8_t *list, size_t len)
{
    zdist_feature_column_t *c = &f->col;
    f->seen = self->gen;
    f->bad = S_OK;
    zdist_dtype_t have = s_kind_dtype(kind);
    if (have != c->dtype) {
        f->bad = S_BAD_TYPE;
        f->bad_arg = have;
        return;
    }
    void *dst = (uint8_t *) c->values + (size_t) (self->rows * c->elems) * s_size(c->dtype);
    int64_t count;
    /* The common case, one packed value: 0x0a, its length, the value. */
    if (c->elems == 1 && len >= 2 && list[0] == ((1u << 3) | S_LEN)) {
        const uint8_t *q = list + 2, *end = list + len;
        if (c->dtype == ZDIST_DTYPE_FLOAT32 && list[1] == 4 && len == 6) {
            memcpy(dst, q, 4);
            return;
        }
        uint64_t v;
        /* The varint may be read a word at a time up to the record's end. */
        if (c->dtype == ZDIST_DTYPE_INT64 && list[1] == len - 2 && s_varint(&q, self->rec_end, &v) == 0 && q == end) {
            *(int64_t *) dst = (int64_t) v;
            return;
        }
    }
    if (s_decode_list(c->dtype, list, list + len, dst, c->elems, &count) < 0) {
        f->bad = S_BAD_PARSE;
    } else if (count != c->elems) {
        f->bad = S_BAD_COUNT;
        f->bad_arg = count;
    }
}

static int
s_take_var(zdist_example_parser_t *self, s_feature_t *f, int kind, const uint8_t *list, size_t len)
{
    zdist_feature_column_t *c = &f->col;
    f->seen = self->gen;
    f->bad = S_OK;
    f->pending = 0; /* a key met again starts the row over */
    if (kind == 0)
        return 0;
    zdist_dtype_t have = s_kind_dtype(kind);
    if (have != c->dtype) {
        f->bad = S_BAD_TYPE;
        f->bad_arg = have;
        return 0;
    }
    int64_t at = c->row_splits[self->rows];
    size_t sz = s_size(c->dtype);
    for (int pass = 0; pass < 2; pass++) {
        int64_t room = f->cap_values - at, count;
        if (s_decode_list(c->dtype, list, list + len, (uint8_t *) c->values + (size_t) at * sz, room, &count) < 0) {
            f->bad = S_BAD_PARSE;
            return 0;
        }
        f->pending = count;
        if (count <= room)
            return 0;
        if (s_reserve(&c->values, &f->cap_values, at + count, sz) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* A map entry's Feature, for feature d. */
static int
s_take(zdist_example_parser_t *self, s_feature_t *f, const uint8_t *val, size_t val_len)
{
    int kind = 0;
    const uint8_t *list = val;
    size_t len = 0;
    if (s_feature_list(val, val + val_len, &kind, &list, &len) < 0) {
        f->seen = self->gen;
        f->bad = S_BAD_PARSE;
        f->pending = 0;
        return 0;
    }
    if (f->col.kind == ZDIST_FEATURE_VAR)
        return s_take_var(self, f, kind, list, len);
    if (kind != 0)
        s_take_fixed(self, f, kind, list, len);
    return 0;
}

/* Features: each map entry {key = 1, value = 2} whose key is in the spec. */
static int
s_scan_features(zdist_example_parser_t *self, const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        const uint8_t *key = (const uint8_t *) "", *val = (const uint8_t *) "";
        size_t key_len = 0, val_len = 0;
        /* The usual entry, every length under 128: 0a L 0a K key 12 V value. */
        if (end - p >= 6 && p[0] == 0x0a && p[1] < 0x80 && p + 2 + p[1] <= end && p[2] == 0x0a && p[3] < 0x80) {
            const uint8_t *e = p + 2, *e_end = e + p[1], *v = e + 2 + e[1];
            if (v + 2 <= e_end && v[0] == 0x12 && v[1] < 0x80 && v + 2 + v[1] == e_end) {
                key = e + 2;
                key_len = e[1];
                val = v + 2;
                val_len = v[1];
                p = e_end;
                goto found;
            }
        }
        uint64_t tag;
        if (s_varint(&p, end, &tag) < 0)
            return -1;
        if (tag != ((1u << 3) | S_LEN)) {
            if (s_skip(&p, end, (int) (tag & 7)) < 0)
                return -1;
            continue;
        }
        const uint8_t *e, *e_end;
        size_t e_len;
        if (s_len(&p, end, &e, &e_len) < 0)
            return -1;
        e_end = e + e_len;
        while (e < e_end) {
            if (s_varint(&e, e_end, &tag) < 0)
                return -1;
            int rc = tag == ((1u << 3) | S_LEN)   ? s_len(&e, e_end, &key, &key_len)
                     : tag == ((2u << 3) | S_LEN) ? s_len(&e, e_end, &val, &val_len)
                                                  : s_skip(&e, e_end, (int) (tag & 7));
            if (rc < 0)
                return -1;
        }
    found:;
        int d = s_lookup(self, key, key_len);
        if (d < 0)
            continue;
        self->next = d + 1 < self->n ? d + 1 : 0;
        if (s_take(self, &self->f[d], val, val_len) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int
s_scan_example(zdist_example_parser_t *self, const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        uint64_t tag;
        if (s_varint(&p, end, &tag) < 0)
            return -1;
        if (tag == ((1u << 3) | S_LEN)) {
            const uint8_t *fs;
            size_t fs_len;
            if (s_len(&p, end, &fs, &fs_len) < 0)
                return -1;
            int rc = s_scan_features(self, fs, fs + fs_len);
            if (rc < 0)
                return rc;
        } else if (s_skip(&p, end, (int) (tag & 7)) < 0) {
            return -1;
        }
    }
    return 0;
}

#define S_KEY_ERROR(err, self, f, fmt, ...)                                                                  \
    zdist_error_set(err, -EINVAL, "Name: <unknown>, Key: %s, Index: %lld.  " fmt, (f)->name,                \
                    (long long) (self)->rows, __VA_ARGS__)

/* After the record: defaults for the FIXED features it lacked, or the
   first thing wrong, with TensorFlow's text. */
static int
s_finish_feature(zdist_example_parser_t *self, s_feature_t *f, zdist_error_t *err)
{
    zdist_feature_column_t *c = &f->col;
    if (f->seen == self->gen) {
        switch (f->bad) {
        case S_BAD_TYPE:
            if (c->kind == ZDIST_FEATURE_VAR)
                return S_KEY_ERROR(err, self, f, "Data types don't match. Expected type: %s, Actual type: %s",
                                   s_tf_dtype(c->dtype), s_tf_dtype((zdist_dtype_t) f->bad_arg));
            return S_KEY_ERROR(err, self, f, "Data types don't match. Data type: %s but expected type: %s",
                               s_tf_dtype((zdist_dtype_t) f->bad_arg), s_tf_dtype(c->dtype));
        case S_BAD_COUNT: {
            char shape[96];
            s_shape_text(&f->spec, shape, sizeof shape);
            return S_KEY_ERROR(err, self, f,
                               "Number of %s values != expected.  Values size: %lld but output shape: %s",
                               s_tf_dtype(c->dtype), (long long) f->bad_arg, shape);
        }
        case S_BAD_PARSE:
            return S_KEY_ERROR(err, self, f, "%s", "Can't parse serialized Example.");
        default:
            return 0;
        }
    }
    if (c->kind == ZDIST_FEATURE_VAR) {
        f->pending = 0;
        return 0;
    }
    if (!f->spec.has_default)
        return zdist_error_set(err, -EINVAL,
                               "Name: <unknown>, Feature: %s (data type: %s) is required but could not be found.",
                               f->name, s_tf_dtype(c->dtype));
    void *dst = (uint8_t *) c->values + (size_t) (self->rows * c->elems) * s_size(c->dtype);
    for (int64_t i = 0; i < c->elems; i++) {
        if (c->dtype == ZDIST_DTYPE_INT64)
            ((int64_t *) dst)[i] = f->spec.default_int;
        else
            ((float *) dst)[i] = (float) f->spec.default_float;
    }
    return 0;
}

/* Room for one more row in every column. */
static int
s_room(zdist_example_parser_t *self, zdist_error_t *err)
{
    bool grow = self->rows >= self->cap_rows;
    int64_t rows = grow ? (self->cap_rows ? 2 * self->cap_rows : 256) : self->cap_rows;
    for (int i = 0; grow && i < self->n; i++) {
        s_feature_t *f = &self->f[i];
        zdist_feature_column_t *c = &f->col;
        int rc = c->kind == ZDIST_FEATURE_FIXED
                     ? s_reserve(&c->values, &f->cap_values, rows * c->elems + 1, s_size(c->dtype))
                     : s_reserve((void **) &c->row_splits, &f->cap_rows, rows + 1, sizeof(int64_t));
        if (rc == 0 && c->kind == ZDIST_FEATURE_VAR)
            rc = s_reserve(&c->values, &f->cap_values, 1, s_size(c->dtype));
        if (rc < 0)
            return zdist_error_set(err, -ENOMEM, "out of memory for feature '%s'", f->name);
    }
    self->cap_rows = rows;
    return 0;
}

int
zdist_example_parser_add(zdist_example_parser_t *self, const uint8_t *data, size_t len, zdist_error_t *err)
{
    if (s_room(self, err) < 0)
        return -ENOMEM;
    if (++self->gen == 0) { /* wrapped: no stale mark may look current */
        for (int i = 0; i < self->n; i++)
            self->f[i].seen = 0;
        self->gen = 1;
    }
    for (int i = 0; i < self->n; i++)
        if (self->f[i].col.kind == ZDIST_FEATURE_VAR && self->rows == 0)
            self->f[i].col.row_splits[0] = 0;
    self->rec_end = data + len;
    int rc = s_scan_example(self, data, data + len);
    if (rc == -ENOMEM)
        return zdist_error_set(err, -ENOMEM, "out of memory for a feature's values");
    if (rc < 0)
        return zdist_error_set(err, -EINVAL, "Could not parse example input (%zu bytes are not a tf.train.Example)",
                               len);
    for (int i = 0; i < self->n; i++)
        if ((rc = s_finish_feature(self, &self->f[i], err)) < 0)
            return rc; /* rows unchanged: what this record wrote is past the end */
    for (int i = 0; i < self->n; i++) {
        zdist_feature_column_t *c = &self->f[i].col;
        if (c->kind == ZDIST_FEATURE_VAR)
            c->row_splits[self->rows + 1] = c->row_splits[self->rows] + self->f[i].pending;
    }
    self->rows++;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                    */

static size_t
s_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *
s_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t) (v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t) v;
    return p;
}

/* The packed values' bytes of one feature. */
static size_t
s_payload_len(const zdist_example_feature_t *f)
{
    if (f->dtype == ZDIST_DTYPE_FLOAT32)
        return (size_t) f->count * 4;
    size_t n = 0;
    for (int64_t i = 0; i < f->count; i++)
        n += s_varint_len((uint64_t) ((const int64_t *) f->values)[i]);
    return n;
}

/* Sizes of one map entry's nested messages: the list, the Feature, the entry. */
typedef struct {
    size_t payload, list, feature, entry;
} s_sizes_t;

static s_sizes_t
s_entry_sizes(const zdist_example_feature_t *f)
{
    s_sizes_t s;
    s.payload = s_payload_len(f);
    s.list = f->count ? 1 + s_varint_len(s.payload) + s.payload : 0;
    s.feature = 1 + s_varint_len(s.list) + s.list;
    size_t key = strlen(f->name);
    s.entry = 1 + s_varint_len(key) + key + 1 + s_varint_len(s.feature) + s.feature;
    return s;
}

int64_t
zdist_example_encode(const zdist_example_feature_t *features, int n, uint8_t *buf, size_t cap, size_t *ret_needed)
{
    size_t body = 0;
    for (int i = 0; i < n; i++) {
        if (features[i].dtype != ZDIST_DTYPE_FLOAT32 && features[i].dtype != ZDIST_DTYPE_INT64)
            return -EINVAL;
        size_t e = s_entry_sizes(&features[i]).entry;
        body += 1 + s_varint_len(e) + e;
    }
    size_t total = 1 + s_varint_len(body) + body;
    if (ret_needed)
        *ret_needed = total;
    if (total > cap)
        return -ENOSPC;
    uint8_t *p = buf;
    *p++ = 1 << 3 | 2; /* Example.features */
    p = s_put_varint(p, body);
    for (int i = 0; i < n; i++) {
        const zdist_example_feature_t *f = &features[i];
        s_sizes_t s = s_entry_sizes(f);
        size_t key = strlen(f->name);
        *p++ = 1 << 3 | 2; /* Features.feature: a map entry */
        p = s_put_varint(p, s.entry);
        *p++ = 1 << 3 | 2; /* key */
        p = s_put_varint(p, key);
        memcpy(p, f->name, key);
        p += key;
        *p++ = 2 << 3 | 2; /* value: Feature */
        p = s_put_varint(p, s.feature);
        *p++ = (uint8_t) ((f->dtype == ZDIST_DTYPE_FLOAT32 ? 2 : 3) << 3 | 2); /* float_list / int64_list */
        p = s_put_varint(p, s.list);
        if (!f->count)
            continue;
        *p++ = 1 << 3 | 2; /* value, packed */
        p = s_put_varint(p, s.payload);
        if (f->dtype == ZDIST_DTYPE_FLOAT32) {
            memcpy(p, f->values, s.payload);
            p += s.payload;
        } else {
            for (int64_t k = 0; k < f->count; k++)
                p = s_put_varint(p, (uint64_t) ((const int64_t *) f->values)[k]);
        }
    }
    return (int64_t) (p - buf);
}
