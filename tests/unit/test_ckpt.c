/* CUnit suite: ckpt — any checkpoint's variables read whole: psd shards merged by row range, a worker's state without its slots, damage and other versions refused by name; and the ONNX builder's refusals. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "zdist/ckpt.h"
#include "zdist/file.h"
#include "zdist/onnx.h"
#include "zdist/wstate.h"

/* "j1/dense/kernel" [4, 2]: rows [rs, re) of 0..7 then one slot of as many zeros, in dir/FILE, under ps task `task`'s manifest (format version `version`). */
static void
s_shard(const char *dir, int task, int64_t rs, int64_t re, int version)
{
    float buf[16] = {0};
    for (int64_t i = 0; i < (re - rs) * 2; i++)
        buf[i] = (float)(rs * 2 + i);
    size_t bytes = (size_t)(re - rs) * 2 * sizeof(float) * 2;
    char file[64], path[512];
    snprintf(file, sizeof file, "kernel_%d.bin", task);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    uint32_t crc = 0;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_file_write(path, &(zdist_file_piece_t){buf, bytes}, 1, 0644, &crc, &err), 0);
    json_t *m = json_pack("{s:s, s:i, s:i, s:i, s:[{s:s, s:s, s:[i, i], s:[{s:s, s:i, s:I, s:I, s:I, s:I, "
                          "s:{s:[s]}}]}]}",
                          "format", "zdist-psd-checkpoint", "version", version, "step", 5, "ps_task", task,
                          "variables", "name", "j1/dense/kernel", "dtype", "float32", "shape", 4, 2, "files", "file",
                          file, "shard_index", task, "row_start", (json_int_t)rs, "row_end", (json_int_t)re, "bytes",
                          (json_int_t)bytes, "crc32", (json_int_t)crc, "optimizer", "slots", "m");
    snprintf(path, sizeof path, "%s/manifest-ps%d.json", dir, task);
    CU_ASSERT_EQUAL_FATAL(zdist_json_write_sealed(path, m, "crc32", &err), 0);
    json_decref(m);
}

static char *
s_psd_ckpt(void)
{
    char *dir = zdist_test_tmpdir("ckpt");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    s_shard(dir, 0, 0, 3, 1);
    s_shard(dir, 1, 3, 4, 1);
    char path[512];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    json_t *m = json_pack("{s:s, s:i}", "job_id", "j1", "step", 5);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_json_write_sealed(path, m, "crc32", &err), 0);
    json_decref(m);
    return dir;
}

static void
test_psd_merged(void)
{
    char *dir = s_psd_ckpt();
    zdist_ckpt_t ck;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_ckpt_load(dir, &ck, &err), 0);
    CU_ASSERT_EQUAL(ck.step, 5);
    CU_ASSERT_STRING_EQUAL(ck.job_id, "j1");
    CU_ASSERT_EQUAL_FATAL(ck.n, 1);
    const zdist_ckpt_var_t *v = zdist_ckpt_find(&ck, "dense/kernel"); /* the job's namespace taken off */
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(v->shape.rank, 2);
    CU_ASSERT_EQUAL(v->n, 8);
    for (int i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(v->values[i], (float)i);
    zdist_ckpt_release(&ck);
    zdist_ckpt_release(&ck); /* twice is harmless */
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_psd_refused(void)
{
    char *dir = s_psd_ckpt(), path[512];
    zdist_ckpt_t ck;
    zdist_error_t err = {0};
    /* a shard cut short */
    snprintf(path, sizeof path, "%s/kernel_1.bin", dir);
    CU_ASSERT_EQUAL(truncate(path, 4), 0);
    CU_ASSERT_EQUAL(zdist_ckpt_load(dir, &ck, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "kernel_1.bin"));
    CU_ASSERT_EQUAL(ck.n, 0);
    /* a ps task's manifest missing: its rows are */
    snprintf(path, sizeof path, "%s/manifest-ps1.json", dir);
    CU_ASSERT_EQUAL(unlink(path), 0);
    CU_ASSERT_EQUAL(zdist_ckpt_load(dir, &ck, &err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "3 of its 4 rows"));
    /* another format version */
    s_shard(dir, 1, 3, 4, 2);
    CU_ASSERT_EQUAL(zdist_ckpt_load(dir, &ck, &err), -EPROTO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "written by another zdist version"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "manifest-ps1.json"));
    /* not a checkpoint */
    CU_ASSERT_EQUAL(zdist_ckpt_load("/nonexistent", &ck, &err), -ENOENT);
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_wstate_and_locate(void)
{
    char *root = zdist_test_tmpdir("ckpt"), dir[512], path[600];
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    float w[6] = {1, 2, 3, 4, 5, 6}, slot[6] = {0};
    zdist_tensor_t t[3] = {
        {"conv2d/kernel", ZDIST_DTYPE_FLOAT32, {.rank = 1, .dims = {6}}, w, sizeof w},
        {"conv2d/kernel/slot0", ZDIST_DTYPE_FLOAT32, {.rank = 1, .dims = {6}}, slot, sizeof slot},
        {"conv2d/slot", ZDIST_DTYPE_FLOAT32, {.rank = 1, .dims = {6}}, slot, sizeof slot}, /* not a slot */
    };
    zdist_error_t err = {0};
    int64_t steps[] = {3, 7, 9};
    for (int i = 0; i < 3; i++) {
        snprintf(dir, sizeof dir, "%s/ckpt-%lld", root, (long long)steps[i]);
        CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
        CU_ASSERT_EQUAL(zdist_wstate_save(dir, steps[i], 1, t, 3, NULL, &err), 0);
        snprintf(path, sizeof path, "%s/manifest.json", dir);
        if (steps[i] != 9) /* ckpt-9 incomplete: no manifest.json */
            CU_ASSERT_EQUAL(zdist_file_write_text(path, "{\"step\": 1}", &err), 0);
    }
    snprintf(path, sizeof path, "%s/ckpt-8.damaged", root);
    CU_ASSERT_EQUAL(mkdir(path, 0755), 0);
    CU_ASSERT_EQUAL(zdist_ckpt_newest(root), 7);
    int64_t got[3] = {-1, -1, -1};
    CU_ASSERT_EQUAL(zdist_ckpt_list(root, false, got, 3), 3); /* ascending, the incomplete one too */
    CU_ASSERT(got[0] == 3 && got[1] == 7 && got[2] == 9);
    CU_ASSERT_EQUAL(zdist_ckpt_list(root, true, got, 1), 2); /* two complete, the newest kept */
    CU_ASSERT_EQUAL(got[0], 7);
    snprintf(path, sizeof path, "%s/nowhere", root);
    CU_ASSERT_EQUAL(zdist_ckpt_list(path, true, got, 3), -ENOENT);
    CU_ASSERT(zdist_ckpt_newest(path) < 0);
    CU_ASSERT_EQUAL(zdist_ckpt_locate(root, dir, sizeof dir, &err), 0);
    snprintf(path, sizeof path, "%s/ckpt-7", root);
    CU_ASSERT_STRING_EQUAL(dir, path);
    char again[512];
    CU_ASSERT_EQUAL(zdist_ckpt_locate(dir, again, sizeof again, &err), 0); /* a checkpoint names itself */
    CU_ASSERT_STRING_EQUAL(again, dir);
    zdist_ckpt_t ck;
    CU_ASSERT_EQUAL_FATAL(zdist_ckpt_load(dir, &ck, &err), 0);
    CU_ASSERT_EQUAL(ck.step, 7);
    CU_ASSERT_EQUAL(ck.n, 2);
    CU_ASSERT_PTR_NOT_NULL(zdist_ckpt_find(&ck, "conv2d/kernel"));
    CU_ASSERT_PTR_NOT_NULL(zdist_ckpt_find(&ck, "conv2d/slot"));
    CU_ASSERT_PTR_NULL(zdist_ckpt_find(&ck, "conv2d/kernel/slot0"));
    CU_ASSERT_EQUAL(zdist_ckpt_find(&ck, "conv2d/kernel")->values[5], 6.0f);
    zdist_ckpt_release(&ck);
    snprintf(path, sizeof path, "%s/nothing", root);
    CU_ASSERT_EQUAL(mkdir(path, 0755), 0);
    CU_ASSERT_EQUAL(zdist_ckpt_locate(path, dir, sizeof dir, &err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "no checkpoint here"));
    zdist_test_rmtree(root);
    free(root);
}

static void
test_onnx_builder(void)
{
    char *dir = zdist_test_tmpdir("onnx"), path[512];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    zdist_onnx_t *g = zdist_onnx_new("g", 13, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const int64_t dims[] = {ZDIST_ONNX_BATCH, 4};
    const float w[4] = {1, 2, 3, 4};
    CU_ASSERT_EQUAL(zdist_onnx_input(g, "input", ZDIST_DTYPE_FLOAT32, dims, 2), 0);
    CU_ASSERT_EQUAL(zdist_onnx_initializer(g, "w", ZDIST_DTYPE_FLOAT32, (const int64_t[]){4, 1}, 2, w), 0);
    CU_ASSERT_EQUAL(zdist_onnx_node(g, "MatMul", (const char *const[]){"input", "w"}, 2, (const char *const[]){"y"},
                                    1, NULL, 0), 0);
    CU_ASSERT_EQUAL(zdist_onnx_output(g, "y", ZDIST_DTYPE_FLOAT32, (const int64_t[]){ZDIST_ONNX_BATCH, 1}, 2), 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_onnx_encode(g, &buf, &len, &err), 0);
    CU_ASSERT(len > sizeof w);
    free(buf);
    /* a target in a missing directory: an error naming it, nothing written */
    snprintf(path, sizeof path, "%s/no/m.onnx", dir);
    CU_ASSERT(zdist_onnx_write(g, path, &err) < 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "/no/"));
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    CU_ASSERT_EQUAL(zdist_onnx_write(g, path, &err), 0);
    CU_ASSERT_EQUAL(access(path, F_OK), 0);
    /* a bad argument sticks: every later call and the write report it */
    CU_ASSERT_EQUAL(zdist_onnx_input(g, "s", ZDIST_DTYPE_STRING, dims, 2), -EINVAL);
    CU_ASSERT_EQUAL(zdist_onnx_status(g), -EINVAL);
    CU_ASSERT_EQUAL(zdist_onnx_output(g, "y2", ZDIST_DTYPE_FLOAT32, dims, 2), -EINVAL);
    snprintf(path, sizeof path, "%s/bad.onnx", dir);
    CU_ASSERT_EQUAL(zdist_onnx_write(g, path, &err), -EINVAL);
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    zdist_onnx_destroy(&g);
    zdist_onnx_destroy(&g);
    CU_ASSERT_PTR_NULL(g);
    zdist_test_rmtree(dir);
    free(dir);
}

/* Operator sets of other domains (ai.onnx.ml's LabelEncoder for dynamic tables): imported once, a node of an
   unimported domain refused. */
static void
test_onnx_domains(void)
{
    zdist_onnx_t *g = zdist_onnx_new("g", 13, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const int64_t dims[] = {ZDIST_ONNX_BATCH};
    const int64_t keys[] = {-7, 42};
    const int64_t values[] = {0, 1};
    zdist_onnx_attr_t attrs[] = {
        {"keys_int64s", ZDIST_ONNX_ATTR_INTS, .ints = keys, .n = 2},
        {"values_int64s", ZDIST_ONNX_ATTR_INTS, .ints = values, .n = 2},
        {"default_int64", ZDIST_ONNX_ATTR_INT, .i = 2},
    };
    CU_ASSERT_EQUAL(zdist_onnx_input(g, "ids", ZDIST_DTYPE_INT64, dims, 1), 0);
    CU_ASSERT_EQUAL(zdist_onnx_import(g, "ai.onnx.ml", 2), 0);
    CU_ASSERT_EQUAL(zdist_onnx_import(g, "ai.onnx.ml", 2), 0); /* again at the same version: nothing */
    CU_ASSERT_EQUAL(zdist_onnx_node_domain(g, "ai.onnx.ml", "LabelEncoder", (const char *const[]){"ids"}, 1,
                                           (const char *const[]){"rows"}, 1, attrs, 3), 0);
    CU_ASSERT_EQUAL(zdist_onnx_output(g, "rows", ZDIST_DTYPE_INT64, dims, 1), 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(zdist_onnx_encode(g, &buf, &len, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(memmem(buf, len, "ai.onnx.ml", 10));
    CU_ASSERT_PTR_NOT_NULL(memmem(buf, len, "LabelEncoder", 12));
    free(buf);
    /* one version per domain */
    CU_ASSERT_EQUAL(zdist_onnx_import(g, "ai.onnx.ml", 3), -EINVAL);
    zdist_onnx_destroy(&g);
    g = zdist_onnx_new("g", 13, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(zdist_onnx_node_domain(g, "ai.onnx.ml", "LabelEncoder", (const char *const[]){"ids"}, 1,
                                           (const char *const[]){"rows"}, 1, attrs, 3), -EINVAL);
    zdist_onnx_destroy(&g);
}

void
zdist_test_ckpt_register(void)
{
    ZDIST_SUITE("ckpt",
                {"psd shards merged by row range, the job's namespace taken off", test_psd_merged},
                {"psd: a cut shard, missing rows, another version, no checkpoint refused by name", test_psd_refused},
                {"a worker's state without its slots; the newest complete checkpoint located", test_wstate_and_locate},
                {"the ONNX builder: encode, atomic write, a sticky bad argument", test_onnx_builder},
                {"the ONNX builder: another domain's operator set imported once, an unimported one refused",
                 test_onnx_domains});
}
