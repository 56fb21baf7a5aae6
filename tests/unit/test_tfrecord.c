/* CUnit suite: tfrecord — TFRecord files (zdist/tfrecord.h) and tf.train.Example parsing (zdist/example.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "zdist/criteo.h"
#include "zdist/example.h"
#include "zdist/tfrecord.h"

/* ------------------------------------------------------------------------ */
/* CRC-32C and the record format                                              */

static void
test_crc32c(void)
{
    /* The check value of CRC-32C (RFC 3720, B.4): "123456789". */
    CU_ASSERT_EQUAL(zdist_crc32c_extend(0, "123456789", 9), 0xe3069283u);
    /* Bytes 0..255 four times, by a bitwise Python reference:
       c = ~0; for each byte: c ^= x; 8 times c = c>>1 ^ (0x82f63b78 if c&1 else 0); ~c. */
    uint8_t buf[1024 + 8];
    for (int i = 0; i < 1024; i++)
        buf[i + 3] = (uint8_t) i;
    CU_ASSERT_EQUAL(zdist_crc32c_extend(0, buf + 3, 1024), 0x2cdf6e8fu);
    /* In pieces at every alignment, the same. */
    for (size_t cut = 0; cut < 20; cut++) {
        uint32_t c = zdist_crc32c_extend(0, buf + 3, cut);
        CU_ASSERT_EQUAL(zdist_crc32c_extend(c, buf + 3 + cut, 1024 - cut), 0x2cdf6e8fu);
    }
    for (uint32_t x = 1; x; x <<= 1)
        CU_ASSERT_EQUAL(zdist_crc32c_unmask(zdist_crc32c_mask(x)), x);
}

static char *
s_path(const char *dir, const char *name)
{
    char *p = NULL;
    CU_ASSERT_FATAL(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

static void
s_write(const char *path, zdist_tfrecord_compression_t c, int n, size_t (*size_of)(int))
{
    zdist_error_t err = {0};
    zdist_tfrecord_writer_t *w = zdist_tfrecord_writer_open(path, c, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    for (int i = 0; i < n; i++) {
        size_t len = size_of(i);
        uint8_t *data = malloc(len + 1);
        for (size_t k = 0; k < len; k++)
            data[k] = (uint8_t) (i * 31 + k);
        CU_ASSERT_EQUAL(zdist_tfrecord_writer_write(w, data, len), 0);
        free(data);
    }
    CU_ASSERT_EQUAL(zdist_tfrecord_writer_close(&w, &err), 0);
    CU_ASSERT_PTR_NULL(w);
}

static size_t
s_sizes(int i)
{
    static const size_t sizes[] = {0, 1, 5, 7, 8, 100, 4093, 70000, 1500000};
    return sizes[i % 9];
}

/* Reads every record back and checks its bytes; returns the count. */
static int
s_read_all(const char *path, zdist_tfrecord_compression_t c, size_t (*size_of)(int))
{
    zdist_error_t err = {0};
    zdist_tfrecord_reader_t *r = zdist_tfrecord_reader_open(path, c, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    const uint8_t *data;
    size_t len;
    int i = 0, rc;
    uint64_t at = 0;
    while ((rc = zdist_tfrecord_reader_next(r, &data, &len, &err)) == 1) {
        CU_ASSERT_EQUAL(len, size_of(i));
        bool same = true;
        for (size_t k = 0; k < len; k++)
            same &= data[k] == (uint8_t) (i * 31 + k);
        CU_ASSERT_TRUE(same);
        at += 16 + len;
        CU_ASSERT_EQUAL(zdist_tfrecord_reader_offset(r), at);
        i++;
    }
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(zdist_tfrecord_reader_count(r), i);
    /* The end stays the end. */
    CU_ASSERT_EQUAL(zdist_tfrecord_reader_next(r, &data, &len, &err), 0);
    zdist_tfrecord_reader_destroy(&r);
    CU_ASSERT_PTR_NULL(r);
    return i;
}

static void
test_golden_record(void)
{
    /* "hello" as tf.io.TFRecordWriter writes it (length, masked CRC-32C of
       the length, data, masked CRC-32C of the data), from the Python
       reference above with mask(c) = ((c >> 15 | c << 17) + 0xa282ead8). */
    static const uint8_t want[] = {0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xea, 0xb2, 0x04,
                                   0x3e, 'h',  'e',  'l',  'l',  'o',  0xbb, 0x1f, 0x1c, 0x19};
    char *dir = zdist_test_tmpdir("tfrecord");
    char *path = s_path(dir, "hello.tfrecord");
    zdist_error_t err = {0};
    zdist_tfrecord_writer_t *w = zdist_tfrecord_writer_open(path, ZDIST_TFRECORD_NONE, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    /* Nothing at the path until close. */
    CU_ASSERT_EQUAL(zdist_tfrecord_writer_write(w, "hello", 5), 0);
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    CU_ASSERT_EQUAL(zdist_tfrecord_writer_close(&w, &err), 0);
    uint8_t got[64];
    int fd = open(path, O_RDONLY);
    CU_ASSERT_EQUAL(read(fd, got, sizeof got), (ssize_t) sizeof want);
    close(fd);
    CU_ASSERT_EQUAL(memcmp(got, want, sizeof want), 0);
    /* A writer given up leaves the old file as it was and no temporary. */
    w = zdist_tfrecord_writer_open(path, ZDIST_TFRECORD_NONE, &err);
    CU_ASSERT_EQUAL(zdist_tfrecord_writer_write(w, "x", 1), 0);
    zdist_tfrecord_writer_destroy(&w);
    fd = open(path, O_RDONLY);
    CU_ASSERT_EQUAL(read(fd, got, sizeof got), (ssize_t) sizeof want);
    close(fd);
    CU_ASSERT_EQUAL(memcmp(got, want, sizeof want), 0);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq 1", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
    zdist_test_rmtree(dir);
    free(path);
    free(dir);
}

static void
test_round_trip(void)
{
    char *dir = zdist_test_tmpdir("tfrecord");
    char *plain = s_path(dir, "a.tfrecord"), *gz = s_path(dir, "a.tfrecord.gz"), *empty = s_path(dir, "e");
    s_write(plain, ZDIST_TFRECORD_NONE, 27, s_sizes);
    s_write(gz, ZDIST_TFRECORD_GZIP, 27, s_sizes);
    s_write(empty, ZDIST_TFRECORD_NONE, 0, s_sizes);
    CU_ASSERT_EQUAL(s_read_all(plain, ZDIST_TFRECORD_NONE, s_sizes), 27);
    CU_ASSERT_EQUAL(s_read_all(gz, ZDIST_TFRECORD_GZIP, s_sizes), 27);
    CU_ASSERT_EQUAL(s_read_all(empty, ZDIST_TFRECORD_NONE, s_sizes), 0);
    /* The gzip file is gzip. */
    uint8_t magic[2] = {0};
    int fd = open(gz, O_RDONLY);
    CU_ASSERT_EQUAL(read(fd, magic, 2), 2);
    close(fd);
    CU_ASSERT_TRUE(magic[0] == 0x1f && magic[1] == 0x8b);
    zdist_test_rmtree(dir);
    free(plain);
    free(gz);
    free(empty);
    free(dir);
}

static void
s_poke(const char *path, off_t at, uint8_t xor_with)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    CU_ASSERT_EQUAL(pread(fd, &b, 1, at), 1);
    b ^= xor_with;
    CU_ASSERT_EQUAL(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

/* Reads until the first error; returns its code and copies its text. */
static int
s_first_error(const char *path, zdist_tfrecord_compression_t c, char *text, int *ret_good)
{
    zdist_error_t err = {0};
    zdist_tfrecord_reader_t *r = zdist_tfrecord_reader_open(path, c, &err);
    if (!r) {
        snprintf(text, ZDIST_ERROR_TEXT_MAX, "%s", err.text);
        return err.code;
    }
    const uint8_t *d;
    size_t n;
    int rc, good = 0;
    while ((rc = zdist_tfrecord_reader_next(r, &d, &n, &err)) == 1)
        good++;
    snprintf(text, ZDIST_ERROR_TEXT_MAX, "%s", err.text);
    /* It stays failed, with the same text. */
    zdist_error_t again = {0};
    if (rc < 0) {
        CU_ASSERT_EQUAL(zdist_tfrecord_reader_next(r, &d, &n, &again), rc);
        CU_ASSERT_STRING_EQUAL(again.text, err.text);
    }
    zdist_tfrecord_reader_destroy(&r);
    *ret_good = good;
    return rc;
}

static size_t
s_hundred(int i)
{
    (void) i;
    return 100;
}

static void
test_damage(void)
{
    char *dir = zdist_test_tmpdir("tfrecord");
    char *path = s_path(dir, "d.tfrecord"), *gz = s_path(dir, "d.tfrecord.gz");
    char text[ZDIST_ERROR_TEXT_MAX], want[ZDIST_ERROR_TEXT_MAX];
    int good;
    /* Records of 100 bytes take 116: the third starts at 232. A byte of its
       data flipped: the two before it are read, then DATA_LOSS naming it. */
    s_write(path, ZDIST_TFRECORD_NONE, 4, s_hundred);
    s_poke(path, 232 + 12 + 50, 0x01);
    CU_ASSERT_EQUAL(s_first_error(path, ZDIST_TFRECORD_NONE, text, &good), -EBADMSG);
    CU_ASSERT_EQUAL(good, 2);
    snprintf(want, sizeof want, "'%s': corrupted record at 232", path);
    CU_ASSERT_STRING_EQUAL(text, want);
    /* The first record's length CRC: TensorFlow's hint at offset 0. */
    s_write(path, ZDIST_TFRECORD_NONE, 4, s_hundred);
    s_poke(path, 9, 0x80);
    CU_ASSERT_EQUAL(s_first_error(path, ZDIST_TFRECORD_NONE, text, &good), -EBADMSG);
    CU_ASSERT_EQUAL(good, 0);
    snprintf(want, sizeof want, "'%s': corrupted record at 0 (Is this even a TFRecord file?)", path);
    CU_ASSERT_STRING_EQUAL(text, want);
    /* Cut inside the fourth record, and inside a header. */
    s_write(path, ZDIST_TFRECORD_NONE, 4, s_hundred);
    CU_ASSERT_EQUAL(truncate(path, 348 + 60), 0);
    CU_ASSERT_EQUAL(s_first_error(path, ZDIST_TFRECORD_NONE, text, &good), -EBADMSG);
    CU_ASSERT_EQUAL(good, 3);
    snprintf(want, sizeof want, "'%s': truncated record at 348", path);
    CU_ASSERT_STRING_EQUAL(text, want);
    CU_ASSERT_EQUAL(truncate(path, 348 + 5), 0);
    CU_ASSERT_EQUAL(s_first_error(path, ZDIST_TFRECORD_NONE, text, &good), -EBADMSG);
    CU_ASSERT_STRING_EQUAL(text, want);
    /* The same damage inside a GZIP stream: offsets of the uncompressed bytes. */
    s_write(path, ZDIST_TFRECORD_NONE, 4, s_hundred);
    s_poke(path, 232 + 12 + 50, 0x01);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "gzip -c '%s' > '%s'", path, gz);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    CU_ASSERT_EQUAL(s_first_error(gz, ZDIST_TFRECORD_GZIP, text, &good), -EBADMSG);
    CU_ASSERT_EQUAL(good, 2);
    snprintf(want, sizeof want, "'%s': corrupted record at 232", gz);
    CU_ASSERT_STRING_EQUAL(text, want);
    /* A gzip file read as plain fails its first CRC; a plain one read as
       GZIP is refused at open, naming the setting to change. */
    CU_ASSERT_EQUAL(s_first_error(gz, ZDIST_TFRECORD_NONE, text, &good), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "corrupted record at 0 (Is this even a TFRecord file?)"));
    CU_ASSERT_EQUAL(s_first_error(path, ZDIST_TFRECORD_GZIP, text, &good), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "not a gzip file"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"compression\": \"none\""));
    /* A file that is not there. */
    snprintf(want, sizeof want, "%s/missing", dir);
    CU_ASSERT_EQUAL(s_first_error(want, ZDIST_TFRECORD_NONE, text, &good), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "missing"));
    zdist_test_rmtree(dir);
    free(path);
    free(gz);
    free(dir);
}

static void
test_compression_names(void)
{
    zdist_tfrecord_compression_t c = ZDIST_TFRECORD_GZIP;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_tfrecord_compression_parse("", &c, &err), 0);
    CU_ASSERT_EQUAL(c, ZDIST_TFRECORD_NONE);
    CU_ASSERT_EQUAL(zdist_tfrecord_compression_parse("GZIP", &c, &err), 0);
    CU_ASSERT_EQUAL(c, ZDIST_TFRECORD_GZIP);
    CU_ASSERT_EQUAL(zdist_tfrecord_compression_parse("NONE", &c, &err), 0);
    CU_ASSERT_EQUAL(c, ZDIST_TFRECORD_NONE);
    CU_ASSERT_EQUAL(zdist_tfrecord_compression_parse("zstd", &c, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "compression 'zstd' is not one of \"none\", \"gzip\"");
    CU_ASSERT_EQUAL(c, ZDIST_TFRECORD_NONE);
}

/* ------------------------------------------------------------------------ */
/* tf.train.Example                                                           */

/* A protobuf writer just big enough to build Examples by hand. */
typedef struct {
    uint8_t b[4096];
    size_t n;
} s_pb_t;

static void
s_varint(s_pb_t *pb, uint64_t v)
{
    while (v >= 0x80) {
        pb->b[pb->n++] = (uint8_t) (v | 0x80);
        v >>= 7;
    }
    pb->b[pb->n++] = (uint8_t) v;
}

static void
s_bytes(s_pb_t *pb, int field, const void *data, size_t len)
{
    s_varint(pb, (uint64_t) field << 3 | 2);
    s_varint(pb, len);
    memcpy(pb->b + pb->n, data, len);
    pb->n += len;
}

/* Feature{float_list{value: packed}} */
static s_pb_t
s_floats(const float *v, int n, bool packed)
{
    s_pb_t list = {.n = 0}, feature = {.n = 0};
    if (packed) {
        s_bytes(&list, 1, v, (size_t) n * 4);
    } else {
        for (int i = 0; i < n; i++) {
            s_varint(&list, 1 << 3 | 5);
            memcpy(list.b + list.n, &v[i], 4);
            list.n += 4;
        }
    }
    s_bytes(&feature, 2, list.b, list.n);
    return feature;
}

static s_pb_t
s_ints(const int64_t *v, int n, bool packed)
{
    s_pb_t list = {.n = 0}, values = {.n = 0}, feature = {.n = 0};
    for (int i = 0; i < n; i++) {
        if (!packed)
            s_varint(&list, 1 << 3 | 0);
        s_varint(packed ? &values : &list, (uint64_t) v[i]);
    }
    if (packed)
        s_bytes(&list, 1, values.b, values.n);
    s_bytes(&feature, 3, list.b, list.n);
    return feature;
}

/* Adds map entry {key, feature} to a Features message. */
static void
s_entry(s_pb_t *features, const char *key, const s_pb_t *feature)
{
    s_pb_t e = {.n = 0};
    s_bytes(&e, 1, key, strlen(key));
    s_bytes(&e, 2, feature->b, feature->n);
    s_bytes(features, 1, e.b, e.n);
}

static s_pb_t
s_example(const s_pb_t *features)
{
    s_pb_t ex = {.n = 0};
    s_bytes(&ex, 1, features->b, features->n);
    return ex;
}

static zdist_example_parser_t *
s_parser(void)
{
    zdist_feature_spec_t specs[] = {
        {.name = "label", .kind = ZDIST_FEATURE_FIXED, .dtype = ZDIST_DTYPE_INT64},
        {.name = "I1", .kind = ZDIST_FEATURE_FIXED, .dtype = ZDIST_DTYPE_FLOAT32, .has_default = true,
         .default_float = -1.5},
        {.name = "dense", .kind = ZDIST_FEATURE_FIXED, .dtype = ZDIST_DTYPE_FLOAT32, .rank = 2, .shape = {2, 2}},
        {.name = "tags", .kind = ZDIST_FEATURE_VAR, .dtype = ZDIST_DTYPE_INT64},
    };
    zdist_error_t err = {0};
    zdist_example_parser_t *p = zdist_example_parser_new(specs, 4, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    return p;
}

static void
test_example_columns(void)
{
    zdist_example_parser_t *p = s_parser();
    zdist_error_t err = {0};
    const float dense[4] = {1, 2, 3, 4}, i1 = 0.25f;
    const int64_t label = 1, tags[3] = {INT64_MIN, -1, INT64_MAX};
    /* Row 0: everything, packed, keys in spec order. */
    s_pb_t fs = {.n = 0}, f;
    f = s_ints(&label, 1, true), s_entry(&fs, "label", &f);
    f = s_floats(&i1, 1, true), s_entry(&fs, "I1", &f);
    f = s_floats(dense, 4, true), s_entry(&fs, "dense", &f);
    f = s_ints(tags, 3, true), s_entry(&fs, "tags", &f);
    s_pb_t ex = s_example(&fs);
    CU_ASSERT_EQUAL(zdist_example_parser_add(p, ex.b, ex.n, &err), 0);
    /* Row 1: unpacked, other order, an unknown feature, I1 and tags left
       out (I1 takes its default, tags an empty row), a key named twice
       (the last wins, as protobuf's map and TensorFlow's parser). */
    s_pb_t fs1 = {.n = 0};
    const int64_t zero = 0;
    const float other[4] = {9, 9, 9, 9};
    f = s_floats(other, 4, false), s_entry(&fs1, "dense", &f);
    f = s_ints(&zero, 1, false), s_entry(&fs1, "label", &f);
    f = s_floats(dense, 2, true), s_entry(&fs1, "unknown", &f);
    f = s_floats(dense, 4, false), s_entry(&fs1, "dense", &f);
    ex = s_example(&fs1);
    CU_ASSERT_EQUAL(zdist_example_parser_add(p, ex.b, ex.n, &err), 0);
    CU_ASSERT_EQUAL(zdist_example_parser_rows(p), 2);

    const zdist_feature_column_t *c = zdist_example_parser_column(p, zdist_example_parser_find(p, "label"));
    CU_ASSERT_EQUAL(((int64_t *) c->values)[0], 1);
    CU_ASSERT_EQUAL(((int64_t *) c->values)[1], 0);
    c = zdist_example_parser_column(p, 1);
    CU_ASSERT_EQUAL(((float *) c->values)[0], 0.25f);
    CU_ASSERT_EQUAL(((float *) c->values)[1], -1.5f);
    c = zdist_example_parser_column(p, 2);
    CU_ASSERT_EQUAL(c->elems, 4);
    for (int i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(((float *) c->values)[i], dense[i % 4]);
    c = zdist_example_parser_column(p, 3);
    CU_ASSERT_EQUAL(c->row_splits[0], 0);
    CU_ASSERT_EQUAL(c->row_splits[1], 3);
    CU_ASSERT_EQUAL(c->row_splits[2], 3);
    CU_ASSERT_EQUAL(((int64_t *) c->values)[0], INT64_MIN);
    CU_ASSERT_EQUAL(((int64_t *) c->values)[1], -1);
    CU_ASSERT_EQUAL(((int64_t *) c->values)[2], INT64_MAX);
    CU_ASSERT_EQUAL(zdist_example_parser_find(p, "nope"), -1);
    /* Row 2: an empty Feature after a full one. TensorFlow passes over a
       dense feature without a list (the earlier value stands) but takes a
       ragged one's last entry as it is (an empty row). */
    s_pb_t fs2 = {.n = 0}, empty = {.n = 0};
    f = s_ints(&label, 1, true), s_entry(&fs2, "label", &f);
    s_entry(&fs2, "label", &empty);
    f = s_floats(dense, 4, true), s_entry(&fs2, "dense", &f);
    f = s_ints(tags, 3, true), s_entry(&fs2, "tags", &f);
    s_entry(&fs2, "tags", &empty);
    ex = s_example(&fs2);
    CU_ASSERT_EQUAL(zdist_example_parser_add(p, ex.b, ex.n, &err), 0);
    CU_ASSERT_EQUAL(((int64_t *) zdist_example_parser_column(p, 0)->values)[2], 1);
    CU_ASSERT_EQUAL(zdist_example_parser_column(p, 3)->row_splits[3], 3);
    zdist_example_parser_clear(p);
    CU_ASSERT_EQUAL(zdist_example_parser_rows(p), 0);
    zdist_example_parser_destroy(&p);
    CU_ASSERT_PTR_NULL(p);
}

/* Adds ex to p, expecting -EINVAL with exactly `want`, and the batch as it was. */
static void
s_refused(zdist_example_parser_t *p, const s_pb_t *ex, const char *want)
{
    zdist_error_t err = {0};
    int64_t rows = zdist_example_parser_rows(p);
    int64_t tags = zdist_example_parser_column(p, 3)->row_splits[rows];
    CU_ASSERT_EQUAL(zdist_example_parser_add(p, ex->b, ex->n, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, want);
    CU_ASSERT_EQUAL(zdist_example_parser_rows(p), rows);
    CU_ASSERT_EQUAL(zdist_example_parser_column(p, 3)->row_splits[rows], tags);
}

static void
test_example_errors(void)
{
    /* TensorFlow's texts, from example_proto_fast_parsing.cc
       (FastParseSerializedExample): Name is "<unknown>" when no names are
       given, Index the row in the batch. */
    zdist_example_parser_t *p = s_parser();
    zdist_error_t err = {0};
    const float dense[4] = {1, 2, 3, 4}, two[2] = {1, 2};
    const int64_t label = 1, tags[2] = {5, 6};
    s_pb_t good = {.n = 0}, f;
    f = s_ints(&label, 1, true), s_entry(&good, "label", &f);
    f = s_floats(dense, 4, true), s_entry(&good, "dense", &f);
    f = s_ints(tags, 2, true), s_entry(&good, "tags", &f);
    s_pb_t ex = s_example(&good);
    CU_ASSERT_EQUAL(zdist_example_parser_add(p, ex.b, ex.n, &err), 0);

    s_pb_t no_label = {.n = 0};
    f = s_floats(dense, 4, true), s_entry(&no_label, "dense", &f);
    f = s_ints(tags, 2, true), s_entry(&no_label, "tags", &f);
    ex = s_example(&no_label);
    s_refused(p, &ex, "Name: <unknown>, Feature: label (data type: int64) is required but could not be found.");

    s_pb_t wrong_type = {.n = 0};
    f = s_ints(tags, 2, true), s_entry(&wrong_type, "tags", &f);
    f = s_floats(two, 1, true), s_entry(&wrong_type, "label", &f);
    f = s_floats(dense, 4, true), s_entry(&wrong_type, "dense", &f);
    ex = s_example(&wrong_type);
    s_refused(p, &ex,
              "Name: <unknown>, Key: label, Index: 1.  Data types don't match. Data type: float but expected "
              "type: int64");

    s_pb_t wrong_count = {.n = 0};
    f = s_ints(&label, 1, true), s_entry(&wrong_count, "label", &f);
    f = s_floats(two, 2, true), s_entry(&wrong_count, "I1", &f);
    f = s_floats(dense, 4, true), s_entry(&wrong_count, "dense", &f);
    ex = s_example(&wrong_count);
    s_refused(p, &ex,
              "Name: <unknown>, Key: I1, Index: 1.  Number of float values != expected.  Values size: 2 but "
              "output shape: []");
    s_pb_t wrong_shape = {.n = 0};
    f = s_ints(&label, 1, true), s_entry(&wrong_shape, "label", &f);
    f = s_floats(dense, 3, true), s_entry(&wrong_shape, "dense", &f);
    ex = s_example(&wrong_shape);
    s_refused(p, &ex,
              "Name: <unknown>, Key: dense, Index: 1.  Number of float values != expected.  Values size: 3 but "
              "output shape: [2,2]");

    s_pb_t var_type = {.n = 0};
    f = s_ints(&label, 1, true), s_entry(&var_type, "label", &f);
    f = s_floats(dense, 4, true), s_entry(&var_type, "dense", &f);
    f = s_floats(two, 2, true), s_entry(&var_type, "tags", &f);
    ex = s_example(&var_type);
    s_refused(p, &ex,
              "Name: <unknown>, Key: tags, Index: 1.  Data types don't match. Expected type: int64, Actual "
              "type: float");

    /* A packed float list whose length is not a multiple of 4. */
    s_pb_t bad_list = {.n = 0}, broken = {.n = 0}, list = {.n = 0};
    f = s_ints(&label, 1, true), s_entry(&bad_list, "label", &f);
    s_bytes(&list, 1, "abcde", 5);
    s_bytes(&broken, 2, list.b, list.n);
    s_entry(&bad_list, "dense", &broken);
    ex = s_example(&bad_list);
    s_refused(p, &ex, "Name: <unknown>, Key: dense, Index: 1.  Can't parse serialized Example.");

    /* Not protobuf at all: a length running past the end. */
    s_pb_t junk = {.b = {0x0a, 0x7f, 0x01}, .n = 3};
    s_refused(p, &junk, "Could not parse example input (3 bytes are not a tf.train.Example)");

    /* The batch is still the one good row, and takes the next. */
    ex = s_example(&good);
    CU_ASSERT_EQUAL(zdist_example_parser_add(p, ex.b, ex.n, &err), 0);
    CU_ASSERT_EQUAL(zdist_example_parser_rows(p), 2);
    const zdist_feature_column_t *c = zdist_example_parser_column(p, 3);
    CU_ASSERT_EQUAL(c->row_splits[2], 4);
    CU_ASSERT_EQUAL(((int64_t *) c->values)[3], 6);
    zdist_example_parser_destroy(&p);
}

static void
test_example_spec_refused(void)
{
    zdist_error_t err = {0};
    zdist_feature_spec_t twice[] = {
        {.name = "a", .kind = ZDIST_FEATURE_FIXED, .dtype = ZDIST_DTYPE_INT64},
        {.name = "a", .kind = ZDIST_FEATURE_VAR, .dtype = ZDIST_DTYPE_INT64},
    };
    CU_ASSERT_PTR_NULL(zdist_example_parser_new(twice, 2, &err));
    CU_ASSERT_STRING_EQUAL(err.text, "feature 'a' is named twice in the spec");
    zdist_feature_spec_t dtype[] = {{.name = "s", .kind = ZDIST_FEATURE_FIXED, .dtype = ZDIST_DTYPE_FLOAT64}};
    CU_ASSERT_PTR_NULL(zdist_example_parser_new(dtype, 1, &err));
    CU_ASSERT_STRING_EQUAL(err.text, "feature 's': dtype must be \"float32\" or \"int64\"");
    zdist_feature_spec_t neg[] = {
        {.name = "n", .kind = ZDIST_FEATURE_FIXED, .dtype = ZDIST_DTYPE_INT64, .rank = 1, .shape = {-2}}};
    CU_ASSERT_PTR_NULL(zdist_example_parser_new(neg, 1, &err));
    CU_ASSERT_STRING_EQUAL(err.text, "feature 'n': shape dimension 0 is negative");
    CU_ASSERT_PTR_NULL(zdist_example_parser_new(neg, 0, &err));
    CU_ASSERT_EQUAL(err.code, -EINVAL);
}

static void
test_example_encode(void)
{
    /* Byte for byte what the hand-made protobuf above builds (which the
       parser reads as TensorFlow does), and read back. */
    const int64_t label = 1, tags[3] = {INT64_MIN, 0, 300};
    const float i1 = 0.25f, dense[4] = {1, 2, 3, 4};
    s_pb_t fs = {.n = 0}, f;
    f = s_ints(&label, 1, true), s_entry(&fs, "label", &f);
    f = s_floats(&i1, 1, true), s_entry(&fs, "I1", &f);
    f = s_floats(dense, 4, true), s_entry(&fs, "dense", &f);
    f = s_ints(tags, 3, true), s_entry(&fs, "tags", &f);
    s_pb_t want = s_example(&fs);
    zdist_example_feature_t feats[] = {
        {"label", ZDIST_DTYPE_INT64, &label, 1},
        {"I1", ZDIST_DTYPE_FLOAT32, &i1, 1},
        {"dense", ZDIST_DTYPE_FLOAT32, dense, 4},
        {"tags", ZDIST_DTYPE_INT64, tags, 3},
    };
    uint8_t buf[512];
    size_t needed = 0;
    CU_ASSERT_EQUAL(zdist_example_encode(feats, 4, buf, 10, &needed), -ENOSPC);
    CU_ASSERT_EQUAL(needed, want.n);
    CU_ASSERT_EQUAL_FATAL(zdist_example_encode(feats, 4, buf, sizeof buf, NULL), (int64_t) want.n);
    CU_ASSERT_EQUAL(memcmp(buf, want.b, want.n), 0);
    zdist_example_parser_t *p = s_parser();
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_example_parser_add(p, buf, want.n, &err), 0);
    const zdist_feature_column_t *c = zdist_example_parser_column(p, 3);
    CU_ASSERT_EQUAL(c->row_splits[1], 3);
    CU_ASSERT_EQUAL(((int64_t *) c->values)[0], INT64_MIN);
    CU_ASSERT_EQUAL(((int64_t *) c->values)[2], 300);
    /* An empty list is a Feature with an empty Int64List: a var row of none. */
    feats[3].count = 0;
    int64_t len = zdist_example_encode(feats, 4, buf, sizeof buf, NULL);
    CU_ASSERT_EQUAL(zdist_example_parser_add(p, buf, (size_t) len, &err), 0);
    CU_ASSERT_EQUAL(c->row_splits[2], 3);
    zdist_example_parser_destroy(&p);
}

/* Reads a split's files back with the Criteo spec; returns rows read. */
static int64_t
s_read_criteo(const char *dir, const char *split, int files, double *ret_pos, int64_t *ret_negative_ids,
              int64_t *ret_top_count)
{
    zdist_feature_spec_t spec[ZDIST_CRITEO_FEATURES];
    int n = ZDIST_CRITEO_FEATURES;
    zdist_criteo_feature_specs(spec);
    zdist_error_t err = {0};
    zdist_example_parser_t *p = zdist_example_parser_new(spec, n, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int f = 0; f < files; f++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s/part-%05d.tfrecord", dir, split, f);
        zdist_tfrecord_reader_t *r = zdist_tfrecord_reader_open(path, ZDIST_TFRECORD_NONE, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        const uint8_t *d;
        size_t len;
        int rc;
        while ((rc = zdist_tfrecord_reader_next(r, &d, &len, &err)) == 1)
            CU_ASSERT_EQUAL_FATAL(zdist_example_parser_add(p, d, len, &err), 0);
        CU_ASSERT_EQUAL(rc, 0);
        zdist_tfrecord_reader_destroy(&r);
    }
    int64_t rows = zdist_example_parser_rows(p), pos = 0, neg_ids = 0, top = 0;
    const int64_t *label = zdist_example_parser_column(p, 0)->values;
    const int64_t *c3 = zdist_example_parser_column(p, 1 + ZDIST_CRITEO_DENSE + 2)->values;
    for (int64_t i = 0; i < rows; i++) {
        CU_ASSERT_TRUE(label[i] == 0 || label[i] == 1);
        pos += label[i];
        neg_ids += c3[i] < 0;
    }
    /* The most common C3 id (10^7 possible): Zipf puts rank 1 far ahead. */
    for (int64_t i = 0; i < rows && i < 50; i++) {
        int64_t same = 0;
        for (int64_t k = 0; k < rows; k++)
            same += c3[k] == c3[i];
        top = same > top ? same : top;
    }
    *ret_pos = rows ? (double) pos / (double) rows : 0;
    *ret_negative_ids = neg_ids;
    *ret_top_count = top;
    zdist_example_parser_destroy(&p);
    return rows;
}

static void
test_criteo_generator(void)
{
    char *dir = zdist_test_tmpdir("criteo");
    char *a = s_path(dir, "a"), *b = s_path(dir, "b");
    zdist_criteo_options_t o = zdist_criteo_defaults(4000);
    o.files = 3;
    o.seed = 42;
    zdist_criteo_report_t rep = {0};
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_criteo_generate(a, &o, &rep, &err), 0);
    CU_ASSERT_EQUAL(rep.train_rows, 3600);
    CU_ASSERT_EQUAL(rep.test_rows, 400);
    CU_ASSERT_TRUE(rep.positive_rate > 0.1 && rep.positive_rate < 0.45);
    CU_ASSERT_TRUE(rep.teacher_auc > 0.65 && rep.teacher_auc < 0.95);
    double pos;
    int64_t neg_ids, top;
    CU_ASSERT_EQUAL(s_read_criteo(a, "train", 3, &pos, &neg_ids, &top), 3600);
    CU_ASSERT_EQUAL(s_read_criteo(a, "test", 3, &pos, &neg_ids, &top), 400);
    /* Ids over the whole int64 range, skewed. */
    CU_ASSERT_TRUE(neg_ids > 100 && neg_ids < 300);
    CU_ASSERT_TRUE(top >= 10);
    /* The same seed writes the same bytes; another directory, same files. */
    CU_ASSERT_EQUAL_FATAL(zdist_criteo_generate(b, &o, NULL, &err), 0);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "diff -r '%s' '%s' >/dev/null", a, b);
    CU_ASSERT_EQUAL(system(cmd), 0);
    /* Nothing is overwritten; bad options name themselves. */
    CU_ASSERT_EQUAL(zdist_criteo_generate(a, &o, NULL, &err), -EEXIST);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "already holds part files"));
    o.files = 0;
    CU_ASSERT_EQUAL(zdist_criteo_generate(b, &o, NULL, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text, "files must be from 1 to 4096 (got 0)");
    zdist_test_rmtree(dir);
    free(a);
    free(b);
    free(dir);
}

void
zdist_test_tfrecord_register(void)
{
    ZDIST_SUITE("tfrecord", {"CRC-32C check values and masks", test_crc32c},
                {"a record byte for byte as TensorFlow writes it", test_golden_record},
                {"plain and GZIP round trips, records of 0 B to 1.5 MB", test_round_trip},
                {"damaged, truncated and mislabelled files refused with TF's texts", test_damage},
                {"compression names", test_compression_names},
                {"Example columns: fixed, default, shaped, var, packed or not, last key wins", test_example_columns},
                {"Example errors: TF's texts, the batch unchanged", test_example_errors},
                {"Example spec refused naming the feature", test_example_spec_refused},
                {"Example encoding, byte for byte, read back", test_example_encode},
                {"Criteo generator: splits, labels, skewed int64 ids, deterministic, no overwrite",
                 test_criteo_generator});
}
