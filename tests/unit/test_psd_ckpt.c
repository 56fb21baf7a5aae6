/* CUnit suite: psd_ckpt format, resharding restores, corruption and crash safety. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "psd_ckpt.h"
#include "psd_store.h"
#include "psd_write.h"
#include "testutil.h"
#include "zdist/file.h"

#define EMB "emb/table"
#define EMB_ROWS 13
#define EMB_COLS 3
#define BIAS "bias"
#define BIAS_ROWS 5

/* Creates Div shards [first, first + count) of k for both variables (the
   bias has at most 5 shards); with `train`, sets values by global row and
   applies two adam steps with gradients that depend only on the global row,
   so the state is the same under any sharding. */
static void
s_populate(psd_store_t *store, int k, int first, int count, bool train)
{
    zdist_optim_config_t adam;
    zdist_optim_config_default(&adam, ZDIST_OPTIM_ADAM);
    adam.learning_rate = 0.05;
    CU_ASSERT_EQUAL(psd_store_set_optimizer(store, &adam, NULL), 0);
    for (int var = 0; var < 2; var++) {
        int64_t rows = var ? BIAS_ROWS : EMB_ROWS;
        int64_t cols = var ? 1 : EMB_COLS;
        int kk = var && k > BIAS_ROWS ? BIAS_ROWS : k;
        zdist_dtype_t dtype = var ? ZDIST_DTYPE_FLOAT64 : ZDIST_DTYPE_FLOAT32;
        int64_t off = 0;
        for (int i = 0; i < kk; i++) {
            int64_t n = rows / kk + (i < rows % kk ? 1 : 0);
            if (i >= first && i < first + count) {
                psd_shard_spec_t s = {
                    .name = var ? BIAS : EMB,
                    .shape = {.rank = var ? 1 : 2, .dims = {rows, cols}},
                    .dtype = dtype, .shard_index = i, .row_offset = off, .rows = n,
                    .init = {.kind = ZDIST_INIT_GLOROT_UNIFORM}, .seed = 5,
                };
                psd_shard_t *sh = NULL;
                zdist_error_t err = {0};
                CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &s, &sh, &err), 0);
                if (train) {
                    size_t esz = zdist_dtype_size(dtype), len = (size_t) (n * cols) * esz;
                    char *buf = malloc(len), *g = malloc(len);
                    for (int64_t e = 0; e < n * cols; e++) {
                        int64_t r = off + e / cols, c = e % cols;
                        double v = 10.0 * (double) r + (double) c, gv = sin((double) (r * 7 + c));
                        if (var) {
                            ((double *) buf)[e] = v;
                            ((double *) g)[e] = gv;
                        } else {
                            ((float *) buf)[e] = (float) v;
                            ((float *) g)[e] = (float) gv;
                        }
                    }
                    psd_write_t w = {.op = PSD_OP_ASSIGN, .dtype = dtype,
                                     .nrows = PSD_WHOLE_SHARD, .data = buf, .nbytes = len};
                    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, NULL), 0);
                    w.op = PSD_OP_APPLY_DENSE;
                    w.data = g;
                    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, NULL), 0);
                    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, NULL), 0);
                    free(buf);
                    free(g);
                }
            }
            off += n;
        }
    }
}

/* Values, m and v of a variable gathered by global row from a store's
   shards; rows the store does not hold stay as they were. */
typedef struct {
    char values[EMB_ROWS * EMB_COLS * 8];
    char m[EMB_ROWS * EMB_COLS * 8];
    char v[EMB_ROWS * EMB_COLS * 8];
} s_dump_t;

static void
s_dump(psd_store_t *store, const char *name, s_dump_t *d, int64_t *ret_min_step)
{
    psd_shard_t *list[32];
    size_t n = psd_store_list(store, list, 32);
    int64_t min_step = INT64_MAX;
    for (size_t i = 0; i < n && i < 32; i++) {
        const psd_shard_spec_t *s = psd_shard_spec(list[i]);
        if (strcmp(s->name, name) != 0)
            continue;
        size_t rb = psd_shard_row_bytes(list[i]), off = (size_t) s->row_offset * rb;
        size_t len = (size_t) s->rows * rb;
        CU_ASSERT_EQUAL(psd_shard_read(list[i], 0, PSD_WHOLE_SHARD, d->values + off, len, NULL), 0);
        CU_ASSERT_EQUAL(psd_shard_read_slot(list[i], 0, 0, PSD_WHOLE_SHARD, d->m + off, len, NULL), 0);
        CU_ASSERT_EQUAL(psd_shard_read_slot(list[i], 1, 0, PSD_WHOLE_SHARD, d->v + off, len, NULL), 0);
        int64_t st = psd_shard_step(list[i]);
        min_step = st < min_step ? st : min_step;
    }
    if (ret_min_step)
        *ret_min_step = min_step;
}

static bool
s_dump_equal(const s_dump_t *a, const s_dump_t *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* First file in dir whose name contains `part` (and is not a temp file). */
static bool
s_find_file(const char *dir, const char *part, char *out, size_t size)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    bool found = false;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.' && strstr(de->d_name, part)) {
            snprintf(out, size, "%s/%s", dir, de->d_name);
            found = true;
            break;
        }
    if (d)
        closedir(d);
    return found;
}

static int
s_count_files(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)))
        n += strstr(de->d_name, part) != NULL;
    if (d)
        closedir(d);
    return n;
}

static void
s_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static void
s_flip_byte(const char *path, off_t at)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    CU_ASSERT_FATAL(fd >= 0);
    unsigned char b;
    CU_ASSERT_EQUAL(pread(fd, &b, 1, at), 1);
    b ^= 0x40;
    CU_ASSERT_EQUAL(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

static void
s_reshard(int from, int to)
{
    char *dir = zdist_test_tmpdir("ckpt");
    psd_store_t *a = psd_store_new(), *b = psd_store_new();
    s_populate(a, from, 0, from, true);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(psd_ckpt_save(a, dir, 100, 0, &err), 0);
    s_populate(b, to, 0, to, false);
    s_dump_t da = {0}, db = {0};
    s_dump(a, EMB, &da, NULL);
    s_dump(b, EMB, &db, NULL);
    CU_ASSERT_FALSE(s_dump_equal(&da, &db)); /* the restore has work to do */
    int64_t step = -1, shard_step = -1;
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, &step, &err), 0);
    CU_ASSERT_EQUAL(step, 100);
    for (int var = 0; var < 2; var++) {
        const char *name = var ? BIAS : EMB;
        memset(&da, 0, sizeof da);
        memset(&db, 0, sizeof db);
        s_dump(a, name, &da, NULL);
        s_dump(b, name, &db, &shard_step);
        CU_ASSERT_TRUE(s_dump_equal(&da, &db));
        CU_ASSERT_EQUAL(shard_step, 2);
    }
    /* training continues identically: the adam step counter came along */
    psd_shard_t *sa = psd_store_find_row(a, EMB, 0), *sb = psd_store_find_row(b, EMB, 0);
    float g[EMB_COLS] = {0.5f, -1, 2};
    psd_write_t w = {.op = PSD_OP_APPLY_DENSE, .dtype = ZDIST_DTYPE_FLOAT32, .row_start = 0,
                     .nrows = 1, .data = g, .nbytes = sizeof g};
    CU_ASSERT_EQUAL(psd_shard_write(sa, &w, NULL), 0);
    CU_ASSERT_EQUAL(psd_shard_write(sb, &w, NULL), 0);
    float ra[EMB_COLS], rb[EMB_COLS];
    CU_ASSERT_EQUAL(psd_shard_read(sa, 0, 1, ra, sizeof ra, NULL), 0);
    CU_ASSERT_EQUAL(psd_shard_read(sb, 0, 1, rb, sizeof rb, NULL), 0);
    CU_ASSERT_EQUAL(memcmp(ra, rb, sizeof ra), 0);
    psd_store_destroy(&a);
    psd_store_destroy(&b);
    zdist_test_rmtree(dir);
    free(dir);
}

static void test_reshard_4_to_1(void) { s_reshard(4, 1); }
static void test_reshard_1_to_4(void) { s_reshard(1, 4); }
static void test_reshard_4_to_2(void) { s_reshard(4, 2); }
static void test_reshard_2_to_4(void) { s_reshard(2, 4); }

static void
test_manifest_format(void)
{
    char *dir = zdist_test_tmpdir("ckpt");
    psd_store_t *a = psd_store_new();
    s_populate(a, 4, 0, 4, true);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(psd_ckpt_save(a, dir, 7, 3, &err), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/manifest-ps3.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "step")), 7);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(root, "ps_task")), 3);
    json_t *vars = json_object_get(root, "variables");
    CU_ASSERT_EQUAL(json_array_size(vars), 2);
    json_t *emb = json_array_get(vars, 1); /* sorted: bias, emb/table */
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(emb, "name")), EMB);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(emb, "dtype")), "float32");
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(emb, "shape"), 0)), 13);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(emb, "shape"), 1)), 3);
    json_t *files = json_object_get(emb, "files");
    CU_ASSERT_EQUAL_FATAL(json_array_size(files), 4);
    /* Div: 13 rows over 4 shards -> 4, 3, 3, 3 */
    const int64_t starts[4] = {0, 4, 7, 10}, ends[4] = {4, 7, 10, 13};
    for (size_t i = 0; i < 4; i++) {
        json_t *f = json_array_get(files, i);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(f, "shard_index")), (json_int_t) i);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(f, "row_start")), starts[i]);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(f, "row_end")), ends[i]);
        const char *fname = json_string_value(json_object_get(f, "file"));
        CU_ASSERT_PTR_NOT_NULL(strstr(fname, "emb%2Ftable__rows_"));
        json_t *opt = json_object_get(f, "optimizer");
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(opt, "kind")), "adam");
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(opt, "step")), 2);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(opt, "slots"), 0)), "m");
        CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(opt, "slots"), 1)), "v");
        /* bytes and CRC describe the file: values + m + v */
        char fpath[1024];
        snprintf(fpath, sizeof fpath, "%s/%s", dir, fname);
        FILE *fp = fopen(fpath, "rbe");
        CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
        unsigned char buf[4096];
        size_t len = fread(buf, 1, sizeof buf, fp);
        fclose(fp);
        size_t expect = (size_t) (ends[i] - starts[i]) * EMB_COLS * 4 * 3;
        CU_ASSERT_EQUAL(len, expect);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(f, "bytes")), (json_int_t) expect);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(f, "crc32")),
                        (json_int_t) crc32(crc32(0, NULL, 0), buf, (uInt) len));
        /* the first values are the shard's first row */
        float first;
        memcpy(&first, buf, 4);
        CU_ASSERT(fabsf(first - (float) (10 * starts[i])) < 1.0f);
    }
    json_decref(root);
    CU_ASSERT_EQUAL(s_count_files(dir, ".tmp"), 0);
    psd_store_destroy(&a);
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_two_ps_shared_dir(void)
{
    /* ps0 holds parts 0 and 2 of 4, ps1 parts 1 and 3 (the bias: 0,2 and 1,3 as well) */
    char *dir = zdist_test_tmpdir("ckpt");
    psd_store_t *ps0 = psd_store_new(), *ps1 = psd_store_new(), *ref = psd_store_new();
    s_populate(ps0, 4, 0, 1, true);
    s_populate(ps0, 4, 2, 1, true);
    s_populate(ps1, 4, 1, 1, true);
    s_populate(ps1, 4, 3, 1, true);
    s_populate(ref, 1, 0, 1, true);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(psd_ckpt_save(ps0, dir, 50, 0, &err), 0);
    CU_ASSERT_EQUAL(psd_ckpt_save(ps1, dir, 50, 1, &err), 0);
    /* one new ps holding everything in 2 shards */
    psd_store_t *b = psd_store_new();
    s_populate(b, 2, 0, 2, false);
    int64_t step = 0;
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, &step, &err), 0);
    CU_ASSERT_EQUAL(step, 50);
    s_dump_t dr = {0}, db = {0};
    s_dump(ref, EMB, &dr, NULL);
    s_dump(b, EMB, &db, NULL);
    CU_ASSERT_TRUE(s_dump_equal(&dr, &db));
    /* ps0 alone restores its own shards from the shared directory */
    psd_store_t *c = psd_store_new();
    s_populate(c, 4, 2, 1, false);
    CU_ASSERT_EQUAL(psd_ckpt_restore(c, dir, &step, &err), 0);
    s_dump_t dc;
    memcpy(&dc, &dr, sizeof dc);
    s_dump(c, EMB, &dc, NULL); /* overwrites rows 7..9 only */
    CU_ASSERT_TRUE(s_dump_equal(&dr, &dc));
    /* manifests at different steps are an incomplete checkpoint */
    CU_ASSERT_EQUAL(psd_ckpt_save(ps1, dir, 60, 1, &err), 0);
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, &step, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "step"));
    psd_store_destroy(&ps0);
    psd_store_destroy(&ps1);
    psd_store_destroy(&ref);
    psd_store_destroy(&b);
    psd_store_destroy(&c);
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_corruption(void)
{
    char *dir = zdist_test_tmpdir("ckpt");
    psd_store_t *a = psd_store_new(), *b = psd_store_new();
    s_populate(a, 4, 0, 4, true);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(psd_ckpt_save(a, dir, 9, 0, &err), 0);
    s_populate(b, 2, 0, 2, false);
    s_dump_t before_e, before_b, now;
    memset(&before_e, 0, sizeof before_e);
    memset(&before_b, 0, sizeof before_b);
    s_dump(b, EMB, &before_e, NULL);
    s_dump(b, BIAS, &before_b, NULL);
#define UNCHANGED()                                                       \
    do {                                                                  \
        int64_t st_;                                                      \
        memset(&now, 0, sizeof now);                                      \
        s_dump(b, EMB, &now, &st_);                                       \
        CU_ASSERT_TRUE(s_dump_equal(&now, &before_e));                    \
        CU_ASSERT_EQUAL(st_, 0);                                          \
        memset(&now, 0, sizeof now);                                      \
        s_dump(b, BIAS, &now, NULL);                                      \
        CU_ASSERT_TRUE(s_dump_equal(&now, &before_b));                    \
    } while (0)

    /* flip a byte in the last file read: earlier files were fine, still nothing restored */
    char victim[1024];
    CU_ASSERT_FATAL(s_find_file(dir, "emb%2Ftable__rows_10_13", victim, sizeof victim));
    s_flip_byte(victim, 5);
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, NULL, &err), -EBADMSG);
    CU_ASSERT_EQUAL(zdist_status_from_errno(-EBADMSG), ZDIST_STATUS_DATA_LOSS);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "rows_10_13"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "CRC"));
    UNCHANGED();
    /* a flip in the optimizer slots is caught too */
    s_flip_byte(victim, 5);
    s_flip_byte(victim, 3 * EMB_COLS * 4 * 2 + 1);
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, NULL, &err), -EBADMSG);
    UNCHANGED();
    s_flip_byte(victim, 3 * EMB_COLS * 4 * 2 + 1);

    /* truncated */
    struct stat st;
    CU_ASSERT_EQUAL(stat(victim, &st), 0);
    CU_ASSERT_EQUAL(truncate(victim, st.st_size - 4), 0);
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, NULL, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "truncated"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "rows_10_13"));
    UNCHANGED();
    /* missing */
    CU_ASSERT_EQUAL(unlink(victim), 0);
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, NULL, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "rows_10_13"));
    UNCHANGED();

    /* a manifest that does not parse */
    CU_ASSERT_EQUAL(psd_ckpt_save(a, dir, 10, 0, &err), 0);
    char mpath[512];
    snprintf(mpath, sizeof mpath, "%s/manifest-ps0.json", dir);
    s_write_text(mpath, "{\"format\": \"zdist-psd-checkpoint\", \"step\": ");
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, NULL, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "manifest-ps0.json"));
    UNCHANGED();
    /* parses, but lies about the bytes */
    s_write_text(mpath, "{\"format\": \"zdist-psd-checkpoint\", \"version\": 1, \"step\": 1, "
                        "\"ps_task\": 0, \"variables\": [{\"name\": \"bias\", \"dtype\": "
                        "\"float64\", \"shape\": [5], \"files\": [{\"file\": \"x.bin\", "
                        "\"shard_index\": 0, \"row_start\": 0, \"row_end\": 5, \"bytes\": 7, "
                        "\"crc32\": 0, \"optimizer\": {\"kind\": \"sgd\", \"step\": 0, "
                        "\"slots\": []}}]}]}");
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, NULL, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "bytes"));
    /* a path outside the directory */
    s_write_text(mpath, "{\"format\": \"zdist-psd-checkpoint\", \"version\": 1, \"step\": 1, "
                        "\"ps_task\": 0, \"variables\": [{\"name\": \"bias\", \"dtype\": "
                        "\"float64\", \"shape\": [5], \"files\": [{\"file\": \"../x.bin\", "
                        "\"shard_index\": 0, \"row_start\": 0, \"row_end\": 5, \"bytes\": 40, "
                        "\"crc32\": 0, \"optimizer\": {\"kind\": \"sgd\", \"step\": 0, "
                        "\"slots\": []}}]}]}");
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, NULL, &err), -EBADMSG);
    UNCHANGED();

    /* a variable this ps holds but the checkpoint lacks */
    CU_ASSERT_EQUAL(psd_ckpt_save(a, dir, 11, 0, &err), 0);
    psd_shard_spec_t extra = {.name = "extra", .shape = {.rank = 1, .dims = {2}},
                              .dtype = ZDIST_DTYPE_FLOAT32, .rows = 2};
    CU_ASSERT_EQUAL(psd_store_create(b, &extra, NULL, &err), 0);
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, NULL, &err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "'extra'"));
    UNCHANGED();
    /* another shape for a variable */
    psd_store_t *c = psd_store_new();
    psd_shard_spec_t wrong = {.name = BIAS, .shape = {.rank = 1, .dims = {6}},
                              .dtype = ZDIST_DTYPE_FLOAT64, .rows = 6};
    CU_ASSERT_EQUAL(psd_store_create(c, &wrong, NULL, &err), 0);
    CU_ASSERT_EQUAL(psd_ckpt_restore(c, dir, NULL, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "[5]"));
    /* no checkpoint at all */
    char empty[600];
    snprintf(empty, sizeof empty, "%s/empty", dir);
    CU_ASSERT_EQUAL(mkdir(empty, 0700), 0);
    CU_ASSERT_EQUAL(psd_ckpt_restore(c, empty, NULL, &err), -ENOENT);
#undef UNCHANGED
    psd_store_destroy(&a);
    psd_store_destroy(&b);
    psd_store_destroy(&c);
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_crash_during_save(void)
{
    char *dir = zdist_test_tmpdir("ckpt");
    psd_store_t *a = psd_store_new();
    s_populate(a, 2, 0, 2, true);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(psd_ckpt_save(a, dir, 100, 0, &err), 0);
    s_dump_t saved = {0};
    s_dump(a, EMB, &saved, NULL);

    /* training moves on ... */
    psd_shard_t *sh = psd_store_find(a, EMB, 0);
    float g[7 * EMB_COLS];
    for (int i = 0; i < 7 * EMB_COLS; i++)
        g[i] = 1.0f;
    psd_write_t w = {.op = PSD_OP_APPLY_DENSE, .dtype = ZDIST_DTYPE_FLOAT32,
                     .nrows = PSD_WHOLE_SHARD, .data = g, .nbytes = sizeof g};
    CU_ASSERT_EQUAL(psd_shard_write(sh, &w, NULL), 0);
    /* ... and the save of step 200 is killed midway: a renamed data file,
       a half-written temp file and a half-written temp manifest */
    char path[1024];
    snprintf(path, sizeof path, "%s/emb%%2Ftable__rows_0_7__step_200_0badf00d.bin", dir);
    s_write_text(path, "partial");
    snprintf(path, sizeof path, "%s/.emb%%2Ftable__rows_7_13__step_200_0badf00d.bin.tmp-4242", dir);
    s_write_text(path, "partial too");
    snprintf(path, sizeof path, "%s/.manifest-ps0.json.tmp-4242", dir);
    s_write_text(path, "{\"format\": \"zdist-psd-che");

    psd_store_t *b = psd_store_new();
    s_populate(b, 3, 0, 3, false);
    int64_t step = 0, shard_step = 0;
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, &step, &err), 0);
    CU_ASSERT_EQUAL(step, 100);
    s_dump_t got = {0};
    s_dump(b, EMB, &got, &shard_step);
    CU_ASSERT_TRUE(s_dump_equal(&saved, &got));
    CU_ASSERT_EQUAL(shard_step, 2);

    /* the next complete save replaces step 100 and removes its files */
    CU_ASSERT_EQUAL(s_count_files(dir, "__step_100_"), 4); /* emb x2, bias x2 */
    CU_ASSERT_EQUAL(psd_ckpt_save(a, dir, 200, 0, &err), 0);
    CU_ASSERT_EQUAL(s_count_files(dir, "__step_100_"), 0);
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, &step, &err), 0);
    CU_ASSERT_EQUAL(step, 200);
    s_dump(a, EMB, &saved, NULL);
    s_dump(b, EMB, &got, NULL);
    CU_ASSERT_TRUE(s_dump_equal(&saved, &got));
    psd_store_destroy(&a);
    psd_store_destroy(&b);
    zdist_test_rmtree(dir);
    free(dir);
}

static void
test_slots_follow_optimizer(void)
{
    /* a checkpoint without slots (sgd), restored onto an adam store: values
       come back, slots start fresh; and an adam checkpoint onto sgd. */
    char *dir = zdist_test_tmpdir("ckpt");
    psd_store_t *a = psd_store_new(), *b = psd_store_new();
    s_populate(a, 2, 0, 2, true); /* adam, step 2 */
    zdist_error_t err = {0};
    zdist_optim_config_t sgd;
    zdist_optim_config_default(&sgd, ZDIST_OPTIM_SGD);
    s_populate(b, 1, 0, 1, false);
    CU_ASSERT_EQUAL(psd_store_set_optimizer(b, &sgd, NULL), 0);
    CU_ASSERT_EQUAL(psd_ckpt_save(a, dir, 1, 0, &err), 0);
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, NULL, &err), 0);
    psd_store_stats_t st;
    psd_store_stats(b, &st);
    CU_ASSERT_EQUAL(st.slot_bytes, 0);
    CU_ASSERT_EQUAL(psd_shard_step(psd_store_find(b, EMB, 0)), 0);
    float va[EMB_ROWS * EMB_COLS], vb[EMB_ROWS * EMB_COLS];
    s_dump_t da = {0};
    s_dump(a, EMB, &da, NULL);
    memcpy(va, da.values, sizeof va);
    CU_ASSERT_EQUAL(psd_shard_read(psd_store_find(b, EMB, 0), 0, PSD_WHOLE_SHARD, vb, sizeof vb,
                                   NULL), 0);
    CU_ASSERT_EQUAL(memcmp(va, vb, sizeof va), 0);
    psd_store_stats(a, &st);
    CU_ASSERT_EQUAL(st.slot_bytes, 2 * st.value_bytes);
    psd_store_destroy(&a);
    psd_store_destroy(&b);
    zdist_test_rmtree(dir);
    free(dir);
}

/* A one-row float shard "x" [rows, 1] covering [off, off + n). */
static psd_shard_t *
s_row_shard(psd_store_t *store, int64_t rows, int idx, int64_t off, int64_t n)
{
    psd_shard_spec_t s = {.name = "x",
                          .shape = {.rank = 2, .dims = {rows, 1}},
                          .dtype = ZDIST_DTYPE_FLOAT32,
                          .shard_index = idx,
                          .row_offset = off,
                          .rows = n};
    psd_shard_t *sh = NULL;
    CU_ASSERT_EQUAL_FATAL(psd_store_create(store, &s, &sh, NULL), 0);
    return sh;
}

/* assign_add of 1 to every row of the shard as (client, seq). */
static int
s_add_one(psd_shard_t *sh, uint64_t client, uint64_t seq)
{
    float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int64_t n = psd_shard_spec(sh)->rows;
    psd_write_t w = {.op = PSD_OP_ASSIGN_ADD,
                     .client_id = client,
                     .sequence = seq,
                     .dtype = ZDIST_DTYPE_FLOAT32,
                     .row_start = psd_shard_spec(sh)->row_offset,
                     .nrows = n,
                     .data = ones,
                     .nbytes = (size_t) n * sizeof(float)};
    return psd_shard_write(sh, &w, NULL);
}

static float
s_row0(psd_shard_t *sh)
{
    float v = -1;
    CU_ASSERT_EQUAL(psd_shard_read(sh, psd_shard_spec(sh)->row_offset, 1, &v, sizeof v, NULL), 0);
    return v;
}

/* The exactly-once table travels with the values: a write the checkpoint
   holds is a duplicate after the restore (on a fresh store, as after a
   restart), one made after the save is applied again, a sequence far
   below the window still counts as applied. */
static void
test_dedup_restored(void)
{
    char *dir = zdist_test_tmpdir("ckpt");
    const uint64_t C = 0xC0FFEE0000000001ULL, D = 0xD00D;
    psd_store_t *a = psd_store_new();
    psd_shard_t *sa = s_row_shard(a, 4, 0, 0, 4);
    for (uint64_t seq = 1; seq <= 100; seq++)
        if (seq != 98) /* a gap inside the window: not applied */
            CU_ASSERT_EQUAL(s_add_one(sa, C, seq), 0);
    CU_ASSERT_EQUAL(s_add_one(sa, D, 7), 0);
    CU_ASSERT_EQUAL(s_row0(sa), 100.0f);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(psd_ckpt_save(a, dir, 100, 0, &err), 0);
    CU_ASSERT_EQUAL(s_add_one(sa, C, 101), 0); /* after the save: not in the checkpoint */
    char mpath[600];
    snprintf(mpath, sizeof mpath, "%s/manifest-ps0.json", dir);
    json_t *m = json_load_file(mpath, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    json_t *dd = json_object_get(
        json_array_get(json_object_get(json_array_get(json_object_get(m, "variables"), 0), "files"), 0),
        "dedup");
    CU_ASSERT_EQUAL(json_array_size(dd), 2);
    CU_ASSERT_TRUE(json_is_integer(json_object_get(m, "crc32")));
    json_decref(m);

    psd_store_t *b = psd_store_new();
    psd_shard_t *sb = s_row_shard(b, 4, 0, 0, 4);
    CU_ASSERT_EQUAL(s_add_one(sb, C, 500), 0); /* live state the restore replaces */
    CU_ASSERT_EQUAL(psd_ckpt_restore(b, dir, NULL, &err), 0);
    CU_ASSERT_EQUAL(s_row0(sb), 100.0f);
    CU_ASSERT_EQUAL(s_add_one(sb, C, 100), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_add_one(sb, C, 60), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_add_one(sb, C, 3), PSD_DUPLICATE); /* beyond the window */
    CU_ASSERT_EQUAL(s_add_one(sb, D, 7), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_row0(sb), 100.0f);
    CU_ASSERT_EQUAL(s_add_one(sb, C, 98), 0);  /* the gap was never applied */
    CU_ASSERT_EQUAL(s_add_one(sb, C, 101), 0); /* lost with the restore: applied again */
    CU_ASSERT_EQUAL(s_add_one(sb, C, 101), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_add_one(sb, 0xE, 100), 0); /* another client */
    CU_ASSERT_EQUAL(s_row0(sb), 103.0f);
    psd_store_destroy(&b);

    /* Resharded onto one shard from two files: a write counts as applied
       only when both halves hold it. */
    char dir2[700];
    snprintf(dir2, sizeof dir2, "%s/two", dir);
    psd_store_t *c = psd_store_new();
    psd_shard_t *c0 = s_row_shard(c, 4, 0, 0, 2), *c1 = s_row_shard(c, 4, 1, 2, 2);
    for (uint64_t seq = 1; seq <= 10; seq++) {
        CU_ASSERT_EQUAL(s_add_one(c0, C, seq), 0);
        if (seq != 9)
            CU_ASSERT_EQUAL(s_add_one(c1, C, seq), 0);
    }
    CU_ASSERT_EQUAL(s_add_one(c0, D, 1), 0); /* only on one half */
    CU_ASSERT_EQUAL(psd_ckpt_save(c, dir2, 10, 0, &err), 0);
    psd_store_t *e = psd_store_new();
    psd_shard_t *e0 = s_row_shard(e, 4, 0, 0, 4);
    CU_ASSERT_EQUAL(psd_ckpt_restore(e, dir2, NULL, &err), 0);
    CU_ASSERT_EQUAL(s_add_one(e0, C, 10), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_add_one(e0, C, 2), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_add_one(e0, C, 9), 0);
    CU_ASSERT_EQUAL(s_add_one(e0, D, 1), 0);
    psd_store_destroy(&c);
    psd_store_destroy(&e);

    /* A manifest changed in a way that still parses fails its CRC-32. */
    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(zdist_file_read(mpath, 1 << 20, (void **) &text, &len, &err), 0);
    char *at = strstr(text, "\"step\": 100");
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    at[strlen("\"step\": 10")] = '1';
    s_write_text(mpath, text);
    free(text);
    psd_store_t *f = psd_store_new();
    s_row_shard(f, 4, 0, 0, 4);
    CU_ASSERT_EQUAL(psd_ckpt_restore(f, dir, NULL, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "CRC-32"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "manifest-ps0.json"));
    psd_store_destroy(&f);
    psd_store_destroy(&a);
    zdist_test_rmtree(dir);
    free(dir);
}

/* assign_add of 1 to every row as the job's step `step` (write `ord` of it). */
static int
s_add_step(psd_shard_t *sh, uint64_t client, uint64_t step, uint32_t ord)
{
    float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int64_t n = psd_shard_spec(sh)->rows;
    psd_write_t w = {.op = PSD_OP_ASSIGN_ADD,
                     .client_id = client,
                     .sequence = step,
                     .job_step = step,
                     .step_write = ord,
                     .dtype = ZDIST_DTYPE_FLOAT32,
                     .row_start = psd_shard_spec(sh)->row_offset,
                     .nrows = n,
                     .data = ones,
                     .nbytes = (size_t) n * sizeof(float)};
    return psd_shard_write(sh, &w, NULL);
}

/* The ledger of steps travels with the values: after a restart and a
   restore, a step the checkpoint holds is a duplicate (whoever sends it), a
   step after the save is applied again; resharded, a step counts only when
   every source file holds it. */
static void
test_ledger_restored(void)
{
    char *dir = zdist_test_tmpdir("ckpt");
    psd_store_t *a = psd_store_new();
    psd_shard_t *sa = s_row_shard(a, 4, 0, 0, 4);
    for (uint64_t s = 1; s <= 100; s++)
        if (s != 90) /* in flight at the save: not applied */
            CU_ASSERT_EQUAL(s_add_step(sa, 0xA, s, 0), 0);
    CU_ASSERT_EQUAL(s_add_step(sa, 0xA, 95, 1), 0);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(psd_ckpt_save(a, dir, 100, 0, &err), 0);
    CU_ASSERT_EQUAL(s_add_step(sa, 0xA, 101, 0), 0); /* after the save */

    psd_store_t *b = psd_store_new();
    psd_shard_t *sb = s_row_shard(b, 4, 0, 0, 4);
    CU_ASSERT_EQUAL(s_add_step(sb, 0xB, 100, 0), 0); /* live state the restore replaces */
    CU_ASSERT_EQUAL_FATAL(psd_ckpt_restore(b, dir, NULL, &err), 0);
    CU_ASSERT_EQUAL(s_row0(sb), 99.0f + 1.0f);
    CU_ASSERT_EQUAL(s_add_step(sb, 0xB, 100, 0), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_add_step(sb, 0xC, 3, 0), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_add_step(sb, 0xC, 95, 1), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_add_step(sb, 0xC, 90, 0), 0);  /* never applied */
    CU_ASSERT_EQUAL(s_add_step(sb, 0xC, 101, 0), 0); /* lost with the restore: applied again */
    CU_ASSERT_EQUAL(s_add_step(sb, 0xD, 101, 0), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_row0(sb), 102.0f);
    psd_store_destroy(&b);

    /* Two halves onto one shard: step 9 reached only one half. */
    char dir2[700];
    snprintf(dir2, sizeof dir2, "%s/two", dir);
    psd_store_t *c = psd_store_new();
    psd_shard_t *c0 = s_row_shard(c, 4, 0, 0, 2), *c1 = s_row_shard(c, 4, 1, 2, 2);
    for (uint64_t s = 1; s <= 10; s++) {
        CU_ASSERT_EQUAL(s_add_step(c0, 0xA, s, 0), 0);
        if (s != 9)
            CU_ASSERT_EQUAL(s_add_step(c1, 0xB, s, 0), 0);
    }
    CU_ASSERT_EQUAL(psd_ckpt_save(c, dir2, 10, 0, &err), 0);
    psd_store_t *e = psd_store_new();
    psd_shard_t *e0 = s_row_shard(e, 4, 0, 0, 4);
    CU_ASSERT_EQUAL_FATAL(psd_ckpt_restore(e, dir2, NULL, &err), 0);
    CU_ASSERT_EQUAL(s_add_step(e0, 0xE, 10, 0), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_add_step(e0, 0xE, 8, 0), PSD_DUPLICATE);
    CU_ASSERT_EQUAL(s_add_step(e0, 0xE, 9, 0), 0);
    psd_store_destroy(&c);
    psd_store_destroy(&e);

    /* A damaged "steps" record is refused naming it. */
    char mpath[600];
    snprintf(mpath, sizeof mpath, "%s/manifest-ps0.json", dir);
    json_t *m = json_load_file(mpath, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    json_t *f0 = json_array_get(json_object_get(json_array_get(json_object_get(m, "variables"), 0), "files"), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json_object_get(f0, "steps"));
    json_object_set_new(json_object_get(f0, "steps"), "words", json_string("zz"));
    json_object_del(m, "crc32"); /* an older manifest without its seal: parsed, then refused */
    CU_ASSERT_EQUAL(json_dump_file(m, mpath, 0), 0);
    json_decref(m);
    psd_store_t *g = psd_store_new();
    s_row_shard(g, 4, 0, 0, 4);
    CU_ASSERT_EQUAL(psd_ckpt_restore(g, dir, NULL, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "'steps'"));
    psd_store_destroy(&g);
    psd_store_destroy(&a);
    zdist_test_rmtree(dir);
    free(dir);
}

/* Two jobs on one store, each saved into its own directory: a restore of
   job A brings back A's values, optimizer state and exactly-once table and
   leaves B's shards as they are; each job keeps its own optimizer. */
static float
s_read0(psd_store_t *store, const char *name)
{
    float v = NAN;
    psd_shard_t *sh = psd_store_find(store, name, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sh);
    CU_ASSERT_EQUAL(psd_shard_read(sh, 0, 1, &v, sizeof v, NULL), 0);
    return v;
}

static void
test_per_job(void)
{
    char *root = zdist_test_tmpdir("ckpt-jobs"), dir_a[600], dir_b[600];
    snprintf(dir_a, sizeof dir_a, "%s/a", root);
    snprintf(dir_b, sizeof dir_b, "%s/b", root);
    psd_store_t *st = psd_store_new();
    zdist_optim_config_t sgd, adam;
    zdist_optim_config_default(&sgd, ZDIST_OPTIM_SGD);
    sgd.learning_rate = 1;
    zdist_optim_config_default(&adam, ZDIST_OPTIM_ADAM);
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(psd_store_set_optimizer_job(st, "jA", &sgd, &err), 0);
    CU_ASSERT_EQUAL(psd_store_set_optimizer_job(st, "jB", &adam, &err), 0);
    const char *names[2] = {"jA/w", "jB/w"};
    for (int k = 0; k < 2; k++) {
        psd_shard_spec_t s = {.name = names[k], .shape = {.rank = 1, .dims = {4}}, .dtype = ZDIST_DTYPE_FLOAT32,
                              .rows = 4, .init = {.kind = ZDIST_INIT_ZEROS}};
        CU_ASSERT_EQUAL_FATAL(psd_store_create(st, &s, NULL, &err), 0);
    }
    zdist_optim_config_t got;
    psd_shard_get_optimizer(psd_store_find(st, "jA/w", 0), &got);
    CU_ASSERT_EQUAL(got.kind, ZDIST_OPTIM_SGD);
    psd_shard_get_optimizer(psd_store_find(st, "jB/w", 0), &got);
    CU_ASSERT_EQUAL(got.kind, ZDIST_OPTIM_ADAM);
    CU_ASSERT_TRUE(psd_name_in_job("jA/w", "jA"));
    CU_ASSERT_FALSE(psd_name_in_job("jAB/w", "jA"));
    CU_ASSERT_TRUE(psd_name_in_job("jAB/w", ""));

    float g[4] = {1, 1, 1, 1};
    psd_write_t w = {.op = PSD_OP_APPLY_DENSE, .client_id = 7, .sequence = 1, .dtype = ZDIST_DTYPE_FLOAT32,
                     .nrows = PSD_WHOLE_SHARD, .data = g, .nbytes = sizeof g};
    for (int k = 0; k < 2; k++)
        CU_ASSERT_EQUAL(psd_shard_write(psd_store_find(st, names[k], 0), &w, NULL), 0);
    uint64_t bytes_a = 0;
    CU_ASSERT_EQUAL(psd_ckpt_save_job(st, dir_a, 1, 0, "jA", 0, &bytes_a, &err), 0);
    CU_ASSERT_EQUAL(bytes_a, 4 * sizeof(float)); /* sgd: no slots; B's shard not in it */
    CU_ASSERT_EQUAL(psd_ckpt_save_job(st, dir_b, 1, 0, "jB", 0, NULL, &err), 0);
    char mpath[700];
    snprintf(mpath, sizeof mpath, "%s/manifest-ps0.json", dir_a);
    json_t *m = json_load_file(mpath, 0, NULL);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(m, "variables")), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(json_object_get(m, "variables"), 0),
                                                             "name")), "jA/w");
    json_decref(m);

    float a1 = s_read0(st, "jA/w"), b1 = s_read0(st, "jB/w");
    CU_ASSERT_DOUBLE_EQUAL(a1, -1.0, 1e-6);
    /* both train on; then A goes back to its checkpoint, B does not */
    w.sequence = 2;
    for (int k = 0; k < 2; k++)
        CU_ASSERT_EQUAL(psd_shard_write(psd_store_find(st, names[k], 0), &w, NULL), 0);
    float b2 = s_read0(st, "jB/w");
    CU_ASSERT_NOT_EQUAL(b1, b2);
    int64_t step = -1;
    CU_ASSERT_EQUAL(psd_ckpt_restore_job(st, dir_a, "jA", &step, &err), 0);
    CU_ASSERT_EQUAL(step, 1);
    CU_ASSERT_DOUBLE_EQUAL(s_read0(st, "jA/w"), a1, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(s_read0(st, "jB/w"), b2, 1e-7);
    /* A's exactly-once table is the saved one: sequence 1 is a duplicate,
       2 (lost with the rollback) applies again */
    w.sequence = 1;
    CU_ASSERT_EQUAL(psd_shard_write(psd_store_find(st, "jA/w", 0), &w, NULL), PSD_DUPLICATE);
    w.sequence = 2;
    CU_ASSERT_EQUAL(psd_shard_write(psd_store_find(st, "jA/w", 0), &w, NULL), 0);
    CU_ASSERT_EQUAL(psd_shard_write(psd_store_find(st, "jB/w", 0), &w, NULL), PSD_DUPLICATE);
    /* a restore of every shard from A's directory lacks B's variable */
    CU_ASSERT_EQUAL(psd_ckpt_restore(st, dir_a, NULL, &err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "jB/w"));
    psd_store_destroy(&st);

    /* a psd restarted empty: each job restores from its own directory */
    st = psd_store_new();
    CU_ASSERT_EQUAL(psd_store_set_optimizer_job(st, "jA", &sgd, &err), 0);
    CU_ASSERT_EQUAL(psd_store_set_optimizer_job(st, "jB", &adam, &err), 0);
    for (int k = 0; k < 2; k++) {
        psd_shard_spec_t s = {.name = names[k], .shape = {.rank = 1, .dims = {4}}, .dtype = ZDIST_DTYPE_FLOAT32,
                              .rows = 4, .init = {.kind = ZDIST_INIT_ZEROS}};
        CU_ASSERT_EQUAL_FATAL(psd_store_create(st, &s, NULL, &err), 0);
    }
    CU_ASSERT_EQUAL(psd_ckpt_restore_job(st, dir_a, "jA", NULL, &err), 0);
    CU_ASSERT_EQUAL(psd_ckpt_restore_job(st, dir_b, "jB", NULL, &err), 0);
    CU_ASSERT_DOUBLE_EQUAL(s_read0(st, "jA/w"), a1, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(s_read0(st, "jB/w"), b1, 1e-7);
    CU_ASSERT_EQUAL(psd_shard_step(psd_store_find(st, "jB/w", 0)), 1); /* adam's counter came back */
    psd_store_destroy(&st);
    zdist_test_rmtree(root);
    free(root);
}

void
zdist_test_psd_ckpt_register(void)
{
    ZDIST_SUITE("psd_ckpt", {"manifest format, CRCs and byte lengths", test_manifest_format},
                {"reshard 4 -> 1 (values and slots)", test_reshard_4_to_1},
                {"reshard 1 -> 4", test_reshard_1_to_4}, {"reshard 4 -> 2", test_reshard_4_to_2},
                {"reshard 2 -> 4", test_reshard_2_to_4},
                {"two ps tasks share a directory", test_two_ps_shared_dir},
                {"corrupt, truncated, missing: DATA_LOSS, nothing restored", test_corruption},
                {"kill -9 during save keeps the previous checkpoint", test_crash_during_save},
                {"slots follow the optimizer kind", test_slots_follow_optimizer},
                {"the exactly-once table is saved and restored with the values", test_dedup_restored},
                {"the ledger of steps is saved and restored with the values", test_ledger_restored},
                {"per job: own directory, own optimizer, a restore leaves other jobs alone", test_per_job});
}
