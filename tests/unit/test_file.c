/* CUnit suite: file — JSON documents sealed with the CRC-32 of their canonical form (zdist_json_crc_*). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "zdist/file.h"

/* The format every sealed file on disk has: "crc32" is zlib's CRC-32 of the
   compact, key-sorted text without it (worked out by Python's zlib.crc32 of
   {"a":"x","b":[1,2],"n":{"y":null,"z":1.5}}). A file written before this
   helper existed must still pass. */
static const char *s_golden =
    "{\"n\": {\"z\": 1.5, \"y\": null},\n \"crc32\": 1201796400, \"b\": [1, 2], \"a\": \"x\"}";

static json_t *
s_doc(void)
{
    return json_pack("{s:s, s:[i,i], s:{s:n, s:f}}", "a", "x", "b", 1, 2, "n", "y", "z", 1.5);
}

static void
test_golden(void)
{
    json_t *doc = json_loads(s_golden, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_json_crc_check(doc, "crc32", true, "golden.json", &err), 0);
    CU_ASSERT_PTR_NULL(json_object_get(doc, "crc32")); /* removed: doc is what was sealed */
    json_t *want = s_doc();
    CU_ASSERT_TRUE(json_equal(doc, want));
    /* Sealing it again gives the same number. */
    CU_ASSERT_EQUAL(zdist_json_crc_seal(want, "crc32", &err), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(want, "crc32")), 1201796400);
    /* The seal is the CRC of the rest, whatever another member holds. */
    json_object_set_new(want, "crc32", json_string("stale"));
    CU_ASSERT_EQUAL(zdist_json_crc_seal(want, "crc32", &err), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(want, "crc32")), 1201796400);
    json_decref(want);
    json_decref(doc);
}

static void
test_round_trip(void)
{
    char *dir = zdist_test_tmpdir("jsonseal");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    json_t *doc = s_doc();
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_json_write_sealed(path, doc, "manifest_crc32", &err), 0);
    /* On disk: indented, keys sorted, the seal among them. */
    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(zdist_file_read(path, 1 << 20, (void **) &text, &len, &err), 0);
    char *want = json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS);
    CU_ASSERT_STRING_EQUAL(text, want);
    free(want);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"manifest_crc32\": 1201796400"));
    free(text);

    json_t *back = json_load_file(path, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_EQUAL(zdist_json_crc_check(back, "manifest_crc32", true, path, &err), 0);
    json_object_del(doc, "manifest_crc32");
    CU_ASSERT_TRUE(json_equal(back, doc));
    json_decref(back);

    /* zdist_json_read: the same document back, its seal checked and removed;
       a changed byte is refused naming the file, and not JSON too. */
    back = zdist_json_read(path, 1 << 20, "manifest_crc32", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_TRUE(json_equal(back, doc));
    json_decref(back);
    json_t *changed = json_deep_copy(doc);
    json_object_set_new(changed, "step", json_integer(8));
    json_object_set_new(changed, "manifest_crc32", json_integer(1201796400));
    char *tampered = json_dumps(changed, JSON_SORT_KEYS);
    CU_ASSERT_EQUAL(zdist_file_write_text(path, tampered, &err), 0);
    free(tampered);
    json_decref(changed);
    CU_ASSERT_PTR_NULL(zdist_json_read(path, 1 << 20, "manifest_crc32", &err));
    CU_ASSERT_EQUAL(err.code, -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, path));
    CU_ASSERT_EQUAL(zdist_file_write_text(path, "{\"step\": ", &err), 0);
    CU_ASSERT_PTR_NULL(zdist_json_read(path, 1 << 20, NULL, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "not JSON"));

    /* Unwritable: refused naming the path. */
    CU_ASSERT(zdist_json_write_sealed("/nonexistent/dir/m.json", doc, "crc32", &err) < 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "/nonexistent/dir"));
    json_decref(doc);
    zdist_test_rmtree(dir);
    free(dir);
}

/* Refused with -EBADMSG, err naming the file and the field; doc unchanged. */
static void
s_refused(json_t *doc, bool required, const char *what)
{
    json_t *before = json_deep_copy(doc);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_json_crc_check(doc, "crc32", required, "/ckpt-7/manifest.json", &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "/ckpt-7/manifest.json is damaged"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, what));
    CU_ASSERT_TRUE(json_equal(doc, before));
    json_decref(before);
}

static void
test_tampered(void)
{
    zdist_error_t err = {0};
    json_t *doc = s_doc();
    CU_ASSERT_EQUAL_FATAL(zdist_json_crc_seal(doc, "crc32", &err), 0);

    /* A value changed in a way that still parses; nested; a key added. */
    json_object_set_new(doc, "a", json_string("y"));
    s_refused(doc, false, "\"crc32\" says 47a1f530");
    json_object_set_new(doc, "a", json_string("x"));
    json_object_set_new(json_object_get(doc, "n"), "z", json_real(1.25));
    s_refused(doc, false, "CRC-32");
    json_object_set_new(json_object_get(doc, "n"), "z", json_real(1.5));
    json_object_set_new(doc, "extra", json_true());
    s_refused(doc, false, "CRC-32");
    json_object_del(doc, "extra");
    /* The seal itself changed, or not a number. */
    json_object_set_new(doc, "crc32", json_integer(1201796401));
    s_refused(doc, false, "\"crc32\" says 47a1f531");
    json_object_set_new(doc, "crc32", json_string("47a1f530"));
    s_refused(doc, false, "\"crc32\" is not an integer");
    /* Missing: an older file passes unless the seal is required. */
    json_object_del(doc, "crc32");
    s_refused(doc, true, "no \"crc32\"");
    CU_ASSERT_EQUAL(zdist_json_crc_check(doc, "crc32", false, "old.json", &err), 0);
    json_decref(doc);

    /* Not an object. */
    json_t *arr = json_pack("[i]", 1);
    s_refused(arr, false, "not a JSON object");
    CU_ASSERT_EQUAL(zdist_json_crc_seal(arr, "crc32", &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "\"crc32\""));
    json_decref(arr);
}

static void
test_path_under(void)
{
    CU_ASSERT_TRUE(zdist_path_under("/srv/data/a.gz", "/srv/data"));
    CU_ASSERT_TRUE(zdist_path_under("/srv//data/./a.gz", "/srv/data"));
    CU_ASSERT_TRUE(zdist_path_under("/anything", "/"));
    /* the root itself is not below it; a sibling sharing its prefix is not either */
    CU_ASSERT_FALSE(zdist_path_under("/srv/data", "/srv/data"));
    CU_ASSERT_FALSE(zdist_path_under("/srv/data/", "/srv/data"));
    CU_ASSERT_FALSE(zdist_path_under("/srv/database/a", "/srv/data"));
    CU_ASSERT_FALSE(zdist_path_under("srv/data/a", "/srv/data"));
    CU_ASSERT_FALSE(zdist_path_under("/srv", "/srv/data"));
    CU_ASSERT_TRUE(zdist_path_has_dotdot("/srv/data/../etc/passwd"));
    CU_ASSERT_TRUE(zdist_path_has_dotdot(".."));
    CU_ASSERT_FALSE(zdist_path_has_dotdot("/srv/data/..a/b..c/..."));
}

/* A file written in pieces as they are made: the same bytes and CRC as
   zdist_file_write of one piece; an abandoned one leaves nothing. */
static void
test_stream_writer(void)
{
    char *dir = zdist_test_tmpdir("file-out");
    char path[512], listing[600];
    snprintf(path, sizeof path, "%s/data.bin", dir);
    size_t total = (3 << 20) + 12345;
    unsigned char *want = malloc(total);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    for (size_t i = 0; i < total; i++)
        want[i] = (unsigned char) (i * 7 + (i >> 13));
    zdist_error_t err = {0};
    zdist_file_out_t *out = zdist_file_out_new(path, 0644, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    /* Small records, an empty one, a piece larger than the buffer. */
    size_t at = 0;
    for (size_t len = 1; at + len <= 100000; len = len * 3 % 997 + 1) {
        CU_ASSERT_EQUAL(zdist_file_out_write(out, want + at, len), 0);
        at += len;
    }
    CU_ASSERT_EQUAL(zdist_file_out_write(out, NULL, 0), 0);
    CU_ASSERT_EQUAL(zdist_file_out_write(out, want + at, (2 << 20) + 5), 0);
    at += (2 << 20) + 5;
    CU_ASSERT_EQUAL(zdist_file_out_write(out, want + at, total - at), 0);
    uint32_t crc = 0;
    uint64_t bytes = 0;
    CU_ASSERT_EQUAL(zdist_file_out_commit(&out, &crc, &bytes, &err), 0);
    CU_ASSERT_PTR_NULL(out);
    CU_ASSERT_EQUAL(bytes, total);
    CU_ASSERT_EQUAL(crc, zdist_crc32(0, want, total));
    void *got = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(zdist_file_read(path, total, &got, &len, &err), 0);
    CU_ASSERT_EQUAL(len, total);
    CU_ASSERT_EQUAL(memcmp(got, want, total), 0);
    free(got);
    /* Abandoned: the old file stays as it was, no temp file is left. */
    out = zdist_file_out_new(path, 0644, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_EQUAL(zdist_file_out_write(out, "x", 1), 0);
    zdist_file_out_destroy(&out);
    zdist_file_out_destroy(&out);
    CU_ASSERT_EQUAL(zdist_file_read(path, total, &got, &len, &err), 0);
    CU_ASSERT_EQUAL(len, total);
    free(got);
    snprintf(listing, sizeof listing, "%s", dir);
    DIR *d = opendir(listing);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));)
        entries += e->d_name[0] != '.';
    closedir(d);
    CU_ASSERT_EQUAL(entries, 1);
    free(want);
    zdist_test_rmtree(dir);
    free(dir);
}

void
zdist_test_file_register(void)
{
    ZDIST_SUITE("file",
                {"sealed JSON: the on-disk format is zlib's CRC-32 of the canonical text", test_golden},
                {"sealed JSON: written, read back and checked round-trips", test_round_trip},
                {"sealed JSON: a tampered document is refused naming the file and field", test_tampered},
                {"paths held under a root: component-wise, '..' found", test_path_under},
                {"a file written in pieces: the same bytes and CRC, abandoned leaves nothing", test_stream_writer});
}
