/* CUnit suite: psd_dyntable_ckpt: a full and 3 deltas restored onto 1, 2 and 4 ps tasks, broken chains,
   eviction at save time, the chain's rules, export to .npy. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "psd_dyntable_ckpt.h"
#include "psd_dyntable_file.h"
#include "psd_dyntable_npy.h"
#include "testutil.h"
#include "zdist/file.h"
#include "zdist/partition.h"

#define DIM 4
#define MAX_PS 4
#define NIDS 400

static psd_dyntable_config_t
s_config(zdist_optim_kind_t kind)
{
    psd_dyntable_config_t c = {
        .name = "job/emb",
        .dim = DIM,
        .seed = 7,
        .init = {.kind = ZDIST_INIT_RANDOM_UNIFORM, .minval = -0.05, .maxval = 0.05},
        .min_count = 1,
    };
    zdist_optim_config_default(&c.optim, kind);
    c.optim.learning_rate = 0.1;
    return c;
}

static psd_dyntable_t *
s_table(const psd_dyntable_config_t *c)
{
    zdist_error_t err = {0};
    psd_dyntable_t *t = psd_dyntable_new(c, &err);
    if (!t)
        fprintf(stderr, "\n  %s\n", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    return t;
}

/* Ids over the whole int64 range: both ends, around 0, random 64-bit ones. */
static void
s_ids(int64_t *ids, size_t n)
{
    const int64_t edge[] = {INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX, (int64_t) 1 << 62};
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < n; i++)
        ids[i] = i < sizeof edge / sizeof edge[0] ? edge[i] : (int64_t) zdist_test_rand64(&x);
}

/* A row as saved: for comparing tables exactly. */
typedef struct {
    int64_t id;
    float values[DIM], slots[ZDIST_OPTIM_MAX_SLOTS][DIM];
    uint32_t opt_step;
    uint64_t last_step;
} s_row_t;

typedef struct {
    s_row_t rows[2 * NIDS];
    size_t n;
} s_snap_t;

static int
s_snap_row(const psd_dyntable_row_t *row, void *arg)
{
    s_snap_t *s = arg;
    CU_ASSERT_FATAL(s->n < 2 * NIDS);
    s_row_t *r = &s->rows[s->n++];
    memset(r, 0, sizeof *r);
    r->id = row->id;
    memcpy(r->values, row->values, sizeof r->values);
    for (int k = 0; k < ZDIST_OPTIM_MAX_SLOTS && row->slots[k]; k++)
        memcpy(r->slots[k], row->slots[k], sizeof r->slots[k]);
    r->opt_step = row->opt_step;
    r->last_step = row->last_step;
    return 0;
}

static int
s_row_cmp(const void *a, const void *b)
{
    int64_t x = ((const s_row_t *) a)->id, y = ((const s_row_t *) b)->id;
    return (x > y) - (x < y);
}

/* Every row of the n tables, by id; each table holding only the ids zdist_partition_id_ps gives it. */
static void
s_snapshot(psd_dyntable_t **tables, int n, s_snap_t *s)
{
    s->n = 0;
    for (int p = 0; p < n; p++) {
        size_t from = s->n;
        CU_ASSERT_EQUAL(psd_dyntable_iterate(tables[p], false, s_snap_row, s), 0);
        for (size_t i = from; i < s->n; i++)
            CU_ASSERT_EQUAL(zdist_partition_id_ps(s->rows[i].id, n), p);
    }
    qsort(s->rows, s->n, sizeof s->rows[0], s_row_cmp);
}

/* A simulated job: ps tasks holding one table each, ids routed by zdist_partition_id_ps. */
typedef struct {
    psd_dyntable_t *tables[MAX_PS];
    psd_dyntable_ckpt_t *ck[MAX_PS];
    int nps;
    int64_t ids[NIDS];
    char *root;
} s_job_t;

static void
s_job_init(s_job_t *j, int nps, const psd_dyntable_config_t *c, int full_every)
{
    memset(j, 0, sizeof *j);
    j->nps = nps;
    for (int p = 0; p < nps; p++) {
        j->tables[p] = s_table(c);
        j->ck[p] = psd_dyntable_ckpt_new(full_every);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j->ck[p]);
    }
    s_ids(j->ids, NIDS);
    j->root = zdist_test_tmpdir("dynckpt");
}

static void
s_job_free(s_job_t *j)
{
    for (int p = 0; p < j->nps; p++) {
        psd_dyntable_destroy(&j->tables[p]);
        psd_dyntable_ckpt_destroy(&j->ck[p]);
    }
    zdist_test_rmtree(j->root);
    free(j->root);
}

/* A training step over ids[from, to): lookups admit, then each id gets a gradient. */
static void
s_train(s_job_t *j, size_t from, size_t to, uint64_t step)
{
    float out[DIM], g[DIM];
    for (size_t i = from; i < to; i++) {
        psd_dyntable_t *t = j->tables[zdist_partition_id_ps(j->ids[i], j->nps)];
        psd_dyntable_lookup_train(t, &j->ids[i], 1, step, out);
        for (int k = 0; k < DIM; k++)
            g[k] = 0.01f * (float) ((i + step + (size_t) k) % 11) - 0.05f;
        CU_ASSERT_EQUAL(psd_dyntable_apply(t, &j->ids[i], 1, g, step), 0);
    }
}

static void
s_dir(const s_job_t *j, int64_t step, char *out, size_t size)
{
    snprintf(out, size, "%s/ckpt-%" PRId64, j->root, step);
}

static psd_dyntable_ckpt_saved_t
s_save(s_job_t *j, int64_t step)
{
    char dir[512];
    s_dir(j, step, dir, sizeof dir);
    psd_dyntable_ckpt_saved_t all = {0};
    for (int p = 0; p < j->nps; p++) {
        json_t *state =
            json_pack("{s:i, s:I}", "ps", p, "step", (json_int_t) step); /* the caller's, kept as is */
        psd_dyntable_ckpt_table_t t = {"job/emb", j->tables[p], state};
        psd_dyntable_ckpt_saved_t s;
        zdist_error_t err = {0};
        CU_ASSERT_EQUAL_FATAL(psd_dyntable_ckpt_save(j->ck[p], &t, 1, dir, step, p, j->nps, &s, &err), 0);
        json_decref(state);
        all.full = s.full;
        all.rows += s.rows;
        all.tombstones += s.tombstones;
        all.evicted += s.evicted;
    }
    return all;
}

/* Restores dir onto nps new tables into `into` (its job-less tables). */
static int
s_restore(const char *dir, const psd_dyntable_config_t *c, int nps, psd_dyntable_t **into, unsigned flags,
          psd_dyntable_ckpt_restored_t *ret, zdist_error_t *err)
{
    int rc = 0;
    for (int p = 0; p < nps && rc == 0; p++) {
        into[p] = s_table(c);
        psd_dyntable_ckpt_t *ck = psd_dyntable_ckpt_new(4);
        psd_dyntable_ckpt_table_t t = {"job/emb", into[p], NULL};
        rc = psd_dyntable_ckpt_restore(ck, &t, 1, dir, p, nps, flags, ret, err);
        psd_dyntable_ckpt_destroy(&ck);
    }
    return rc;
}

/* The reference history: 2 ps, a full at step 10, deltas at 24, 30, 40
   with creations, updates and evictions (rows idle for more than 20 steps). */
static void
s_history(s_job_t *j, psd_dyntable_config_t *c, s_snap_t *at10, s_snap_t *at40)
{
    c->evict_after_steps = 20;
    s_job_init(j, 2, c, 4);
    s_train(j, 0, 200, 5);
    psd_dyntable_ckpt_saved_t s = s_save(j, 10);
    CU_ASSERT_TRUE(s.full);
    CU_ASSERT_EQUAL(s.rows, 200);
    s_snapshot(j->tables, 2, at10);
    s_train(j, 100, 260, 22); /* 100 updated, 60 created; 0..99 idle since 5 */
    s = s_save(j, 24);
    CU_ASSERT_FALSE(s.full);
    CU_ASSERT_EQUAL(s.evicted, 0); /* 24 - 5 = 19: not more than 20 */
    CU_ASSERT_EQUAL(s.rows, 160);
    s_train(j, 0, 10, 25); /* 10 of the idle ones back */
    s_train(j, 300, 330, 25);
    s = s_save(j, 30); /* 90 rows idle since 5 (25 steps): evicted */
    CU_ASSERT_FALSE(s.full);
    CU_ASSERT_EQUAL(s.evicted, 90);
    CU_ASSERT_EQUAL(s.tombstones, 90);
    CU_ASSERT_EQUAL(s.rows, 40);
    s_train(j, 50, 60, 35); /* evicted, created again */
    s_train(j, 330, NIDS, 35);
    s = s_save(j, 40);
    CU_ASSERT_FALSE(s.full);
    CU_ASSERT_EQUAL(s.rows, 10 + NIDS - 330);
    s_snapshot(j->tables, 2, at40);
    CU_ASSERT_EQUAL(at40->n, 260 - 90 + 30 + 10 + NIDS - 330);
}

static void
s_assert_same(const s_snap_t *a, const s_snap_t *b)
{
    CU_ASSERT_EQUAL_FATAL(a->n, b->n);
    for (size_t i = 0; i < a->n; i++)
        CU_ASSERT_EQUAL(memcmp(&a->rows[i], &b->rows[i], sizeof a->rows[i]), 0);
}

static s_snap_t s_at10, s_at40, s_got;

static void
test_full_and_deltas_onto_1_2_4(void)
{
    s_job_t j;
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_ADAGRAD);
    s_history(&j, &c, &s_at10, &s_at40);
    char dir[512];
    s_dir(&j, 40, dir, sizeof dir);
    float want[NIDS * DIM], got[DIM];
    size_t want_defaults = 0;
    for (size_t i = 0; i < NIDS; i++)
        want_defaults += psd_dyntable_lookup_eval(j.tables[zdist_partition_id_ps(j.ids[i], 2)], &j.ids[i], 1,
                                                  want + i * DIM);
    CU_ASSERT_EQUAL(want_defaults, 80 + 40); /* evicted 10..99 but 50..59; 260..299 never seen */
    for (int nps = 1; nps <= 4; nps *= 2) {
        psd_dyntable_t *into[MAX_PS] = {0};
        psd_dyntable_ckpt_restored_t r;
        zdist_error_t err = {0};
        CU_ASSERT_EQUAL_FATAL(s_restore(dir, &c, nps, into, 0, &r, &err), 0);
        CU_ASSERT_EQUAL(r.step, 40);
        CU_ASSERT_FALSE(r.fell_back);
        CU_ASSERT_STRING_EQUAL(r.from, dir);
        s_snapshot(into, nps, &s_got); /* rows, slots, steps: all of them, each on its ps */
        s_assert_same(&s_at40, &s_got);
        for (size_t i = 0; i < NIDS; i++) { /* the same lookups, evicted ids answered the default */
            psd_dyntable_lookup_eval(into[zdist_partition_id_ps(j.ids[i], nps)], &j.ids[i], 1, got);
            CU_ASSERT_EQUAL(memcmp(got, want + i * DIM, sizeof got), 0);
        }
        for (int p = 0; p < nps; p++) {
            psd_dyntable_row_t row;
            for (size_t i = 0; i < s_got.n; i++) /* restored rows are not changed: the next save is a full */
                if (psd_dyntable_find(into[p], s_got.rows[i].id, &row))
                    CU_ASSERT_FALSE(row.changed);
            psd_dyntable_destroy(&into[p]);
        }
    }
    /* Each saving task's state, as it gave it, in ps order; the dim. */
    int64_t dim = 0;
    json_t *states = NULL;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(psd_dyntable_ckpt_describe(dir, "job/emb", &dim, &states, &err), 0);
    CU_ASSERT_EQUAL(dim, DIM);
    json_t *want_states = json_pack("[{s:i, s:i}, {s:i, s:i}]", "ps", 0, "step", 40, "ps", 1, "step", 40);
    CU_ASSERT_TRUE(json_equal(states, want_states));
    json_decref(states);
    json_decref(want_states);
    CU_ASSERT_EQUAL(psd_dyntable_ckpt_describe(dir, "job/none", &dim, NULL, &err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "job/none"));
    s_job_free(&j);
}

/* Flips one byte in the middle of the data file `pattern` of dir. */
static void
s_damage(const char *dir, const char *pattern, char *ret_name, size_t size)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls %s | grep -- '%s' | head -n 1", dir, pattern);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(ret_name, (int) size, p));
    pclose(p);
    ret_name[strcspn(ret_name, "\n")] = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, ret_name);
    FILE *f = fopen(path, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 0, SEEK_END);
    long at = ftell(f) / 2;
    fseek(f, at, SEEK_SET);
    int b = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(b ^ 0x20, f);
    fclose(f);
}

static void
test_damaged_delta(void)
{
    s_job_t j;
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_ADAGRAD);
    s_history(&j, &c, &s_at10, &s_at40);
    char dir[512], d30[512], name[256];
    s_dir(&j, 40, dir, sizeof dir);
    s_dir(&j, 30, d30, sizeof d30);
    s_damage(d30, "ps1-t0-30-delta", name, sizeof name);
    /* Strict: refused, naming the file. */
    psd_dyntable_t *into[MAX_PS] = {0};
    zdist_error_t err = {0};
    psd_dyntable_ckpt_restored_t r;
    CU_ASSERT_EQUAL(s_restore(dir, &c, 2, into, 0, &r, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, name));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "CRC-32"));
    for (int p = 0; p < 2; p++)
        psd_dyntable_destroy(&into[p]);
    /* With the fallback: the full's checkpoint, step 10, every row as then; why names the file. */
    for (int nps = 1; nps <= 2; nps++) {
        err = (zdist_error_t){0};
        CU_ASSERT_EQUAL_FATAL(s_restore(dir, &c, nps, into, PSD_DYNTABLE_CKPT_FALLBACK, &r, &err), 0);
        CU_ASSERT_TRUE(r.fell_back);
        CU_ASSERT_EQUAL(r.step, 10);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.why, name));
        CU_ASSERT_PTR_NOT_NULL(strstr(r.from, "/ckpt-10"));
        s_snapshot(into, nps, &s_got);
        s_assert_same(&s_at10, &s_got);
        for (int p = 0; p < nps; p++)
            psd_dyntable_destroy(&into[p]);
    }
    /* A delta gone, a truncated one, a damaged manifest: each refused naming it. */
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", d30, name);
    CU_ASSERT_EQUAL(truncate(path, 100), 0);
    CU_ASSERT_EQUAL(s_restore(dir, &c, 1, into, 0, &r, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "truncated"));
    psd_dyntable_destroy(&into[0]);
    CU_ASSERT_EQUAL(unlink(path), 0);
    CU_ASSERT_EQUAL(s_restore(dir, &c, 1, into, 0, &r, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, name));
    psd_dyntable_destroy(&into[0]);
    snprintf(path, sizeof path, "%s/dynamic-ps0.json", dir);
    json_t *m = json_load_file(path, 0, NULL);
    json_object_set_new(m, "step", json_integer(41));
    CU_ASSERT_EQUAL(json_dump_file(m, path, 0), 0);
    json_decref(m);
    CU_ASSERT_EQUAL(s_restore(dir, &c, 1, into, PSD_DYNTABLE_CKPT_FALLBACK, &r, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "dynamic-ps0.json"));
    psd_dyntable_destroy(&into[0]);
    s_job_free(&j);
}

/* The manifest's CRC-32 of one saved file. */
static json_int_t
s_file_crc(const char *dir, int ps)
{
    char path[600];
    snprintf(path, sizeof path, "%s/dynamic-ps%d.json", dir, ps);
    json_t *m = json_load_file(path, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    json_t *chain = json_object_get(json_array_get(json_object_get(m, "tables"), 0), "chain");
    json_int_t crc =
        json_integer_value(json_object_get(json_array_get(chain, json_array_size(chain) - 1), "crc32"));
    json_decref(m);
    return crc;
}

static void
test_eviction_exact(void)
{
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_SGD);
    c.evict_after_steps = 100;
    c.evict_l2_below = 0.5;
    char *root = zdist_test_tmpdir("dynevict");
    /* Two tables given the same rows in opposite orders evict the same
       rows and write the same bytes. */
    psd_dyntable_t *t[2] = {s_table(&c), s_table(&c)};
    psd_dyntable_ckpt_t *ck[2] = {psd_dyntable_ckpt_new(3), psd_dyntable_ckpt_new(3)};
    int64_t ids[64];
    s_ids(ids, 64);
    bool gone[64];
    size_t ngone = 0;
    for (int o = 0; o < 2; o++)
        for (int n = 0; n < 64; n++) {
            int i = o == 0 ? n : 63 - n;
            float a = i % 3 == 0 ? 0.25f : 0.3f, v[DIM] = {a, a, a, 0.2f}; /* norm 0.477 or 0.557 */
            uint64_t last = i % 4 == 0 ? 99 : 100;                         /* idle 101 or 100 steps at 200 */
            CU_ASSERT_EQUAL(psd_dyntable_put(t[o], ids[i], v, NULL, 0, 0, last), 0);
            gone[i] = i % 3 == 0 || i % 4 == 0;
            ngone += o == 0 && gone[i];
        }
    char dirs[2][600];
    for (int o = 0; o < 2; o++) {
        psd_dyntable_mark(t[o]);
        snprintf(dirs[o], sizeof dirs[o], "%s/run%d", root, o);
        psd_dyntable_ckpt_table_t tt = {"job/emb", t[o], NULL};
        psd_dyntable_ckpt_saved_t s;
        zdist_error_t err = {0};
        CU_ASSERT_EQUAL_FATAL(psd_dyntable_ckpt_save(ck[o], &tt, 1, dirs[o], 200, 0, 1, &s, &err), 0);
        CU_ASSERT_EQUAL(s.evicted, ngone);
        psd_dyntable_row_t row;
        for (int i = 0; i < 64; i++)
            CU_ASSERT_EQUAL(psd_dyntable_find(t[o], ids[i], &row), !gone[i]);
    }
    CU_ASSERT_EQUAL(s_file_crc(dirs[0], 0), s_file_crc(dirs[1], 0));
    /* The next save (a delta) holds exactly those as tombstones. */
    float v[DIM] = {1, 1, 1, 1};
    for (int o = 0; o < 2; o++) {
        CU_ASSERT_EQUAL(psd_dyntable_put(t[o], ids[1], v, NULL, 0, 0, 350), 0); /* the one row kept at 400 */
        psd_dyntable_ckpt_table_t tt = {"job/emb", t[o], NULL};
        psd_dyntable_ckpt_saved_t s;
        zdist_error_t err = {0};
        CU_ASSERT_EQUAL_FATAL(psd_dyntable_ckpt_save(ck[o], &tt, 1, dirs[o], 400, 0, 1, &s, &err), 0);
        CU_ASSERT_FALSE(s.full);
        CU_ASSERT_EQUAL(s.evicted, 64 - ngone - 1);
        CU_ASSERT_EQUAL(s.tombstones, 64 - ngone - 1);
        CU_ASSERT_EQUAL(s.rows, 1);
    }
    CU_ASSERT_EQUAL(s_file_crc(dirs[0], 0), s_file_crc(dirs[1], 0));
    for (int o = 0; o < 2; o++) {
        psd_dyntable_destroy(&t[o]);
        psd_dyntable_ckpt_destroy(&ck[o]);
    }
    zdist_test_rmtree(root);
    free(root);
}

static size_t
s_count(const char *dir, const char *pattern)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c -- '%s'", dir, pattern);
    FILE *p = popen(cmd, "r");
    unsigned long n = 0;
    if (p && fscanf(p, "%lu", &n) != 1)
        n = 0;
    if (p)
        pclose(p);
    return n;
}

static void
test_chain_rules(void)
{
    s_job_t j;
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_ADAM);
    s_job_init(&j, 1, &c, 3);
    /* A full every 3 saves. */
    bool want[7] = {true, false, false, true, false, false, true};
    for (int s = 0; s < 7; s++) {
        s_train(&j, (size_t) s * 10, (size_t) s * 10 + 20, (uint64_t) s + 1);
        CU_ASSERT_EQUAL(s_save(&j, s + 1).full, want[s]);
    }
    /* A file of the chain gone (its checkpoint pruned): the next save is a full. */
    char d7[512], d8[512], path[1024];
    s_dir(&j, 7, d7, sizeof d7);
    s_train(&j, 0, 5, 8);
    CU_ASSERT_FALSE(s_save(&j, 8).full);
    snprintf(path, sizeof path, "rm -rf %s", d7);
    CU_ASSERT_EQUAL(system(path), 0);
    s_train(&j, 0, 5, 9);
    CU_ASSERT_TRUE(s_save(&j, 9).full);
    /* The same directory saved into again: superseded files go, the chain's stay. */
    s_dir(&j, 8, d8, sizeof d8);
    CU_ASSERT_FALSE(s_save(&j, 9).full); /* into ckpt-9 again: a delta on the full there */
    char d9[512];
    s_dir(&j, 9, d9, sizeof d9);
    CU_ASSERT_EQUAL(s_count(d9, "full"), 1);
    CU_ASSERT_EQUAL(s_count(d9, "delta"), 1);
    /* A failed save: nothing marked, the next one writes those rows. */
    s_train(&j, 100, 110, 10);
    snprintf(path, sizeof path, "%s/ckpt-10", j.root);
    FILE *f = fopen(path, "w"); /* a file where the directory should be */
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    psd_dyntable_ckpt_table_t t = {"job/emb", j.tables[0], NULL};
    zdist_error_t err = {0};
    CU_ASSERT_TRUE(psd_dyntable_ckpt_save(j.ck[0], &t, 1, path, 10, 0, 1, NULL, &err) < 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "ckpt-10"));
    psd_dyntable_ckpt_saved_t s = s_save(&j, 11);
    CU_ASSERT_EQUAL(s.rows, 10);
    /* Restored after the whole history: the same rows, adam's slots and steps. */
    s_snap_t *want_snap = &s_at40;
    s_snapshot(j.tables, 1, want_snap);
    psd_dyntable_t *into[MAX_PS] = {0};
    char d11[512];
    s_dir(&j, 11, d11, sizeof d11);
    CU_ASSERT_EQUAL_FATAL(s_restore(d11, &c, 1, into, 0, NULL, &err), 0);
    s_snapshot(into, 1, &s_got);
    s_assert_same(want_snap, &s_got);
    psd_dyntable_destroy(&into[0]);
    /* Restored with another optimizer: values kept, slots fresh. */
    psd_dyntable_config_t sgd = s_config(ZDIST_OPTIM_SGD);
    CU_ASSERT_EQUAL_FATAL(s_restore(d11, &sgd, 1, into, 0, NULL, &err), 0);
    s_snapshot(into, 1, &s_got);
    CU_ASSERT_EQUAL(s_got.n, want_snap->n);
    for (size_t i = 0; i < s_got.n; i++)
        CU_ASSERT_EQUAL(memcmp(s_got.rows[i].values, want_snap->rows[i].values, sizeof s_got.rows[i].values),
                        0);
    psd_dyntable_destroy(&into[0]);
    /* A table not in the checkpoint, another dim: refused naming it. */
    psd_dyntable_config_t wide = s_config(ZDIST_OPTIM_ADAM);
    wide.dim = DIM + 1;
    CU_ASSERT_EQUAL(s_restore(d11, &wide, 1, into, 0, NULL, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "job/emb"));
    psd_dyntable_destroy(&into[0]);
    s_job_free(&j);
}

/* A Python with numpy: Debian's (installed when missing and allowed), else PATH's. */
static const char *
s_numpy_python(void)
{
    static const char *const cands[] = {"/usr/bin/python3", "python3"};
    for (int attempt = 0; attempt < 2; attempt++) {
        for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
            char cmd[256];
            snprintf(cmd, sizeof cmd, "%s -c 'import numpy' >/dev/null 2>&1", cands[i]);
            if (system(cmd) == 0)
                return cands[i];
        }
        if (attempt == 0 && geteuid() == 0 && system("command -v apt-get >/dev/null 2>&1") == 0)
            (void) !system(
                "DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-numpy >/dev/null 2>&1");
    }
    return NULL;
}

static void
test_export_npy(void)
{
    s_job_t j;
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_ADAGRAD);
    s_job_init(&j, 2, &c, 4);
    s_train(&j, 0, 150, 3);
    s_save(&j, 3);
    s_train(&j, 100, 300, 4);
    s_save(&j, 4);
    s_snapshot(j.tables, 2, &s_at40);
    char dir[512], ids[600], vec[600];
    s_dir(&j, 4, dir, sizeof dir);
    snprintf(ids, sizeof ids, "%s/emb.ids.npy", j.root);
    snprintf(vec, sizeof vec, "%s/emb.vectors.npy", j.root);
    uint64_t rows = 0;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(psd_dyntable_npy_from_ckpt(dir, "job/emb", ids, vec, &rows, &err), 0);
    CU_ASSERT_EQUAL(rows, 300);
    /* The bytes: a 64-byte-aligned header, then the ids (ascending) and the vectors. */
    void *buf = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(zdist_file_read(ids, 1 << 20, &buf, &len, &err), 0);
    CU_ASSERT_EQUAL(memcmp(buf, "\x93NUMPY\x01\x00", 8), 0);
    uint16_t hlen;
    memcpy(&hlen, (char *) buf + 8, 2);
    CU_ASSERT_EQUAL((10 + hlen) % 64, 0);
    CU_ASSERT_PTR_NOT_NULL(
        strstr((char *) buf + 10, "'descr': '<i8', 'fortran_order': False, 'shape': (300,)"));
    CU_ASSERT_EQUAL_FATAL(len, 10 + hlen + 300 * 8);
    for (size_t i = 0; i < 300; i++) {
        int64_t id;
        memcpy(&id, (char *) buf + 10 + hlen + i * 8, 8);
        CU_ASSERT_EQUAL(id, s_at40.rows[i].id);
    }
    free(buf);
    CU_ASSERT_EQUAL_FATAL(zdist_file_read(vec, 1 << 20, &buf, &len, &err), 0);
    memcpy(&hlen, (char *) buf + 8, 2);
    CU_ASSERT_PTR_NOT_NULL(
        strstr((char *) buf + 10, "'descr': '<f4', 'fortran_order': False, 'shape': (300, 4)"));
    CU_ASSERT_EQUAL_FATAL(len, 10 + hlen + 300 * DIM * 4);
    for (size_t i = 0; i < 300; i++)
        CU_ASSERT_EQUAL(memcmp((char *) buf + 10 + hlen + i * DIM * 4, s_at40.rows[i].values, DIM * 4), 0);
    free(buf);
    /* numpy.load reads the pair: the same ids and values. */
    const char *py = s_numpy_python();
    if (!py) {
        fprintf(stderr,
                "\n  numpy.load check skipped: no python3 with numpy (apt-get install python3-numpy)\n");
    } else {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "%s -c 'import numpy as np, sys; i = np.load(sys.argv[1]); v = np.load(sys.argv[2]); "
                 "assert i.dtype == np.int64 and i.shape == (300,), i.shape; "
                 "assert v.dtype == np.float32 and v.shape == (300, 4), v.shape; "
                 "assert (np.diff(i) > 0).all(); print(int(i[0]), int(i[-1]), repr(float(v[0][0])), "
                 "repr(float(v[-1][3])))' %s %s",
                 py, ids, vec);
        FILE *p = popen(cmd, "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        char line[256] = {0}, want[256];
        CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, p));
        CU_ASSERT_EQUAL(pclose(p), 0);
        snprintf(want, sizeof want, "%" PRId64 " %" PRId64 " %.9g %.9g\n", s_at40.rows[0].id,
                 s_at40.rows[299].id, (double) s_at40.rows[0].values[0], (double) s_at40.rows[299].values[3]);
        /* Python's repr is the shortest round-trip form: compare as numbers. */
        long long a, b;
        double x, y;
        CU_ASSERT_EQUAL_FATAL(sscanf(line, "%lld %lld %lf %lf", &a, &b, &x, &y), 4);
        CU_ASSERT_EQUAL(a, s_at40.rows[0].id);
        CU_ASSERT_EQUAL(b, s_at40.rows[299].id);
        CU_ASSERT_EQUAL((float) x, s_at40.rows[0].values[0]);
        CU_ASSERT_EQUAL((float) y, s_at40.rows[299].values[3]);
        (void) want;
    }
    CU_ASSERT_EQUAL(psd_dyntable_npy_from_ckpt(dir, "job/other", ids, vec, &rows, &err), -ENOENT);
    s_job_free(&j);
}

/* Every admission counter of the tables, ascending by id (over all of them). */
static size_t
s_pending_all(psd_dyntable_t **tables, int n, psd_dyntable_pending_t *out, size_t cap)
{
    size_t total = 0;
    for (int p = 0; p < n; p++) {
        size_t k = 0;
        psd_dyntable_pending_t *l = psd_dyntable_pending(tables[p], false, &k);
        CU_ASSERT_PTR_NOT_NULL_FATAL(l);
        CU_ASSERT_FATAL(total + k <= cap);
        memcpy(out + total, l, k * sizeof *l);
        total += k;
        free(l);
    }
    for (size_t i = 1; i < total; i++) /* insertion sort: small */
        for (size_t k = i; k > 0 && out[k - 1].id > out[k].id; k--) {
            psd_dyntable_pending_t t = out[k];
            out[k] = out[k - 1];
            out[k - 1] = t;
        }
    return total;
}

/* One training occurrence (no gradient) of ids[from, to) at step. */
static void
s_seen(s_job_t *j, size_t from, size_t to, uint64_t step)
{
    float out[DIM];
    for (size_t i = from; i < to; i++)
        psd_dyntable_lookup_train(j->tables[zdist_partition_id_ps(j->ids[i], j->nps)], &j->ids[i], 1, step, out);
}

/* Ids counted but not admitted (min_count 3) are checkpointed (as DeepRec
   keeps its counts): a full holds every counter, a delta those counted
   since the previous save and, as tombstones, those evicted; restored onto
   1, 2 and 4 ps they are the same counters, so an id admitted at its third
   occurrence before a restore is admitted at its third after one. */
static void
test_pending_counters(void)
{
    static psd_dyntable_pending_t want[NIDS], got[NIDS];
    s_job_t j;
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_ADAGRAD);
    c.min_count = 3;
    c.evict_after_steps = 20;
    s_job_init(&j, 2, &c, 4);
    s_seen(&j, 0, 100, 5);
    for (int k = 0; k < 3; k++)
        s_seen(&j, 100, 150, 5); /* admitted */
    CU_ASSERT_TRUE(s_save(&j, 10).full);
    s_seen(&j, 0, 50, 12); /* counted twice now */
    CU_ASSERT_FALSE(s_save(&j, 14).full);
    s_seen(&j, 0, 20, 16); /* admitted at the third */
    s_seen(&j, 150, 160, 16);
    CU_ASSERT_FALSE(s_save(&j, 18).full);
    size_t nwant = s_pending_all(j.tables, 2, want, NIDS);
    CU_ASSERT_EQUAL(nwant, 30 + 50 + 10); /* 20..49 twice, 50..99 and 150..159 once */
    char dir[512];
    s_dir(&j, 18, dir, sizeof dir);
    for (int nps = 1; nps <= 4; nps *= 2) {
        psd_dyntable_t *into[MAX_PS] = {0};
        zdist_error_t err = {0};
        CU_ASSERT_EQUAL_FATAL(s_restore(dir, &c, nps, into, 0, NULL, &err), 0);
        size_t ngot = s_pending_all(into, nps, got, NIDS);
        CU_ASSERT_EQUAL_FATAL(ngot, nwant);
        CU_ASSERT_EQUAL(memcmp(got, want, nwant * sizeof *want), 0);
        /* One more occurrence: 20..49 admitted, 50..99 not. */
        psd_dyntable_stats_t before = {0}, after = {0}, st;
        for (int p = 0; p < nps; p++) {
            psd_dyntable_stats(into[p], &st);
            before.rows += st.rows;
        }
        float out[DIM];
        for (size_t i = 20; i < 100; i++)
            psd_dyntable_lookup_train(into[zdist_partition_id_ps(j.ids[i], nps)], &j.ids[i], 1, 19, out);
        for (int p = 0; p < nps; p++) {
            psd_dyntable_stats(into[p], &st);
            after.rows += st.rows;
            psd_dyntable_destroy(&into[p]);
        }
        CU_ASSERT_EQUAL(before.rows, 50 + 20);
        CU_ASSERT_EQUAL(after.rows - before.rows, 30);
    }
    /* Counters idle for more than 20 steps go at a save, as tombstones. */
    s_seen(&j, 160, 170, 29);
    psd_dyntable_ckpt_saved_t sv = s_save(&j, 30); /* 50..99 seen last at 5 */
    CU_ASSERT_FALSE(sv.full);
    CU_ASSERT(sv.tombstones >= 50);
    nwant = s_pending_all(j.tables, 2, want, NIDS);
    CU_ASSERT_EQUAL(nwant, 30 + 10 + 10);
    s_dir(&j, 30, dir, sizeof dir);
    psd_dyntable_t *into[MAX_PS] = {0};
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(s_restore(dir, &c, 1, into, 0, NULL, &err), 0);
    CU_ASSERT_EQUAL(s_pending_all(into, 1, got, NIDS), nwant);
    CU_ASSERT_EQUAL(memcmp(got, want, nwant * sizeof *want), 0);
    psd_dyntable_destroy(&into[0]);
    s_job_free(&j);
}

/* A version 1 file (before counters were saved) is read as ever. */
static void
test_version1_file(void)
{
    s_job_t j;
    psd_dyntable_config_t c = s_config(ZDIST_OPTIM_ADAGRAD);
    s_job_init(&j, 1, &c, 4);
    s_train(&j, 0, 100, 5);
    psd_dyntable_file_t f = {0};
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(psd_dyntable_file_write(j.tables[0], "job/emb", j.root, "v1.bin", true, 5, 0, 1, &f, &err), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/v1.bin", j.root);
    void *buf = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(zdist_file_read(path, (size_t) 1 << 30, &buf, &len, &err), 0);
    uint32_t one = 1;
    memcpy((char *) buf + 8, &one, 4); /* version 1: bytes 56..63 are zeros, as they were */
    zdist_file_piece_t piece = {buf, len};
    CU_ASSERT_EQUAL_FATAL(zdist_file_write(path, &piece, 1, 0644, NULL, &err), 0);
    f.crc = zdist_crc32(0, buf, len);
    psd_dyntable_t *t = s_table(&c);
    psd_dyntable_file_into_t into = {.table = t, .name = "job/emb", .dim = DIM, .ps_task = 0, .num_ps = 1};
    CU_ASSERT_EQUAL(psd_dyntable_file_read(&f, "test", &into, &err), 0);
    s_snapshot(j.tables, 1, &s_at10);
    s_snapshot(&t, 1, &s_got);
    s_assert_same(&s_at10, &s_got);
    uint32_t three = 3; /* a version this reader does not know */
    memcpy((char *) buf + 8, &three, 4);
    CU_ASSERT_EQUAL_FATAL(zdist_file_write(path, &piece, 1, 0644, NULL, &err), 0);
    f.crc = zdist_crc32(0, buf, len);
    psd_dyntable_destroy(&t);
    t = s_table(&c);
    into.table = t;
    CU_ASSERT_EQUAL(psd_dyntable_file_read(&f, "test", &into, &err), -EBADMSG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "version 1 or 2"));
    psd_dyntable_destroy(&t);
    free(buf);
    psd_dyntable_file_clear(&f);
    s_job_free(&j);
}

void
zdist_test_psd_dyntable_ckpt_register(void)
{
    ZDIST_SUITE(
        "psd_dyntable_ckpt",
        {"a full and 3 deltas over 2 ps restored onto 1, 2 and 4 ps: identical rows and lookups",
         test_full_and_deltas_onto_1_2_4},
        {"a damaged delta: refused naming the file, or the previous full restored", test_damaged_delta},
        {"eviction at save time: exactly the rows that qualify, the same bytes in any order",
         test_eviction_exact},
        {"the chain: a full every K saves, after a lost file, a failed save marks nothing", test_chain_rules},
        {"export: a .npy pair numpy.load reads", test_export_npy},
        {"admission counters (min_count 3) in the full and deltas, restored onto 1, 2 and 4 ps",
         test_pending_counters},
        {"a version 1 file is read; an unknown version refused", test_version1_file});
}
