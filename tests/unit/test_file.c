/* CUnit suite: file — JSON documents sealed with the CRC-32 of their canonical form (zdist_json_crc_*). */
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

void
zdist_test_file_register(void)
{
    ZDIST_SUITE("file",
                {"sealed JSON: the on-disk format is zlib's CRC-32 of the canonical text", test_golden},
                {"sealed JSON: written, read back and checked round-trips", test_round_trip},
                {"sealed JSON: a tampered document is refused naming the file and field", test_tampered},
                {"paths held under a root: component-wise, '..' found", test_path_under});
}
