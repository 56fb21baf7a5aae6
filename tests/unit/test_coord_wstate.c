/* CUnit suite: coord_wstate — a worker's state in a checkpoint: round trip, and damage named by file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include "zdist/wstate.h"
#include "testutil.h"
#include "zdist/file.h"

static float s_w[6] = {1, -2, 3.5f, 4, 5, 6};
static float s_slot[6] = {0.25f, 0, 0, 0, 0, -1};
static int64_t s_ids[3] = {7, 8, 9};

static void
s_tensors(zdist_tensor_t *t)
{
    t[0] =
        (zdist_tensor_t){"dense/kernel", ZDIST_DTYPE_FLOAT32, {.rank = 2, .dims = {2, 3}}, s_w, sizeof s_w};
    t[1] = (zdist_tensor_t){
        "dense/kernel/slot0", ZDIST_DTYPE_FLOAT32, {.rank = 1, .dims = {6}}, s_slot, sizeof s_slot};
    t[2] = (zdist_tensor_t){"ids", ZDIST_DTYPE_INT64, {.rank = 1, .dims = {3}}, s_ids, sizeof s_ids};
}

static char *
s_saved(void)
{
    char *dir = zdist_test_tmpdir("wstate");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    zdist_tensor_t t[3];
    s_tensors(t);
    uint64_t bytes = 0;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_wstate_save(dir, 40, 39, t, 3, &bytes, &err), 0);
    CU_ASSERT_EQUAL(bytes, sizeof s_w + sizeof s_slot + sizeof s_ids);
    return dir;
}

static void
test_round_trip(void)
{
    char *dir = s_saved();
    zdist_wstate_t ws;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_wstate_load(dir, &ws, &err), 0);
    CU_ASSERT(ws.step == 40 && ws.iterations == 39 && ws.n == 3);
    zdist_tensor_t t[3];
    s_tensors(t);
    for (size_t i = 0; i < 3 && i < ws.n; i++) {
        CU_ASSERT_STRING_EQUAL(ws.tensors[i].name, t[i].name);
        CU_ASSERT_EQUAL(ws.tensors[i].dtype, t[i].dtype);
        CU_ASSERT_TRUE(zdist_shape_equal(&ws.tensors[i].shape, &t[i].shape));
        CU_ASSERT_EQUAL_FATAL(ws.tensors[i].nbytes, t[i].nbytes);
        CU_ASSERT_EQUAL(memcmp(ws.tensors[i].data, t[i].data, t[i].nbytes), 0);
    }
    zdist_wstate_release(&ws);
    zdist_wstate_release(&ws); /* zeroed: harmless */
    /* Saved again over it (the same step after a restart): still whole, no temp files left. */
    CU_ASSERT_EQUAL(zdist_wstate_save(dir, 40, 39, t, 2, NULL, &err), 0);
    CU_ASSERT_EQUAL(zdist_wstate_load(dir, &ws, &err), 0);
    CU_ASSERT_EQUAL(ws.n, 2);
    zdist_wstate_release(&ws);
    DIR *d = opendir(dir);
    int files = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        files += e->d_name[0] != '.' || strstr(e->d_name, ".tmp") != NULL;
    if (d)
        closedir(d);
    CU_ASSERT_EQUAL(files, 2); /* workers-state.bin, manifest-workers.json */
    zdist_test_rmtree(dir);
    free(dir);
}

/* Flips one byte of dir/name at offset (negative: from the end) or truncates it (flip false). */
static void
s_damage(const char *dir, const char *name, long offset, bool flip)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    if (flip) {
        long at = offset < 0 ? len + offset : offset;
        fseek(f, at, SEEK_SET);
        int c = fgetc(f);
        fseek(f, at, SEEK_SET);
        fputc(c ^ 0xFF, f);
        fclose(f);
    } else {
        fclose(f);
        CU_ASSERT_EQUAL(truncate(path, len - 4), 0);
    }
}

static void
s_refused(const char *dir, const char *file, const char *what)
{
    zdist_wstate_t ws;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_wstate_load(dir, &ws, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, file));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "not a complete zdist worker-state file"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, what));
    CU_ASSERT_PTR_NULL(ws.tensors);
    CU_ASSERT_EQUAL(ws.n, 0);
}

static void
test_damage_named(void)
{
    char *dir = s_saved();
    s_damage(dir, ZDIST_WSTATE_DATA, 20, true);
    s_refused(dir, "/" ZDIST_WSTATE_DATA, "bad CRC-32");
    zdist_test_rmtree(dir);
    free(dir);

    dir = s_saved();
    s_damage(dir, ZDIST_WSTATE_DATA, 0, false);
    s_refused(dir, "/" ZDIST_WSTATE_DATA, "shorter than its manifest says");
    zdist_test_rmtree(dir);
    free(dir);

    dir = s_saved();
    s_damage(dir, ZDIST_WSTATE_MANIFEST, 0, false);
    s_refused(dir, "/" ZDIST_WSTATE_MANIFEST, "");
    zdist_test_rmtree(dir);
    free(dir);

    /* A manifest that parses but does not describe the data. */
    dir = s_saved();
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, ZDIST_WSTATE_MANIFEST);
    void *text = NULL;
    size_t len = 0;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_file_read(path, 1 << 20, &text, &len, &err), 0);
    char *at = strstr(text, "\"offset\": 24");
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    memcpy(at, "\"offset\": 28", 12);
    CU_ASSERT_EQUAL(zdist_file_write_text(path, text, &err), 0);
    s_refused(dir, "/" ZDIST_WSTATE_MANIFEST, "CRC-32"); /* the manifest's own CRC */
    /* Without its own CRC (an older state), the check of the tensors catches it. */
    char *m = strstr(text, "\"manifest_crc32\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    char *eol = strchr(m, '\n');
    CU_ASSERT_PTR_NOT_NULL_FATAL(eol);
    memmove(m, eol + 1, strlen(eol + 1) + 1);
    CU_ASSERT_EQUAL(zdist_file_write_text(path, text, &err), 0);
    free(text);
    s_refused(dir, "/" ZDIST_WSTATE_MANIFEST, "place in the data");
    zdist_test_rmtree(dir);
    free(dir);

    /* Nothing there. */
    dir = zdist_test_tmpdir("wstate");
    s_refused(dir, "/" ZDIST_WSTATE_MANIFEST, "No such file");
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_bad_save(void)
{
    zdist_tensor_t t[3];
    s_tensors(t);
    zdist_error_t err = {0};
    t[1].nbytes = 8; /* not its shape's */
    char *dir = zdist_test_tmpdir("wstate");
    CU_ASSERT_EQUAL(zdist_wstate_save(dir, 1, 1, t, 3, NULL, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "tensor 1 ('dense/kernel/slot0')"));
    s_tensors(t);
    CU_ASSERT(zdist_wstate_save("/nonexistent/ckpt-1", 1, 1, t, 3, NULL, &err) < 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "/nonexistent/ckpt-1/"));
    zdist_test_rmtree(dir);
    free(dir);
}

void
zdist_test_coord_wstate_register(void)
{
    ZDIST_SUITE("coord_wstate",
                {"save and load: names, dtypes, shapes, bytes; atomic rewrite", test_round_trip},
                {"damage refused naming the file: CRC, truncation, manifest", test_damage_named},
                {"bad tensors and unwritable directories refused", test_bad_save});
}
