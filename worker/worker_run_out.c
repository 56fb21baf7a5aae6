/* worker_run_out: `zdist run --save` (a worker-state checkpoint with its job) and `--dump-predictions` (per-example outputs in order). */
#include "worker_run_out.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "models/models.h"
#include "worker_strategy.h"
#include "worker_trainer.h"
#include "worker_vars.h"
#include "zdist/file.h"
#include "zdist/wstate.h"

#define S_MAX_JOB_BYTES (16u << 20)

static int
s_mkdir(const char *dir, zdist_error_t *err)
{
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return zdist_error_set(err, -errno, "%s: cannot create the directory: %s", dir, strerror(errno));
    return 0;
}

int
worker_run_save(worker_session_t *sess, const char *job_path, const char *dir, int64_t step, zdist_error_t *err)
{
    worker_trainer_t *tr = worker_session_trainer(sess);
    const worker_vars_t *vars = worker_trainer_vars(tr);
    worker_backend_t *be = worker_trainer_backend(tr);
    char ckpt[PATH_MAX], path[PATH_MAX + 16];
    int n = snprintf(ckpt, sizeof ckpt, "%s/ckpt-%lld", dir, (long long)step);
    if (n < 0 || (size_t)n >= sizeof ckpt)
        return zdist_error_set(err, -ENAMETOOLONG, "%s: path too long", dir);
    int rc = s_mkdir(dir, err);
    if (rc == 0)
        rc = s_mkdir(ckpt, err);
    zdist_tensor_t *t = calloc((size_t)vars->n + 1, sizeof *t);
    if (rc == 0 && !t)
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
    for (int v = 0; rc == 0 && v < vars->n; v++) {
        const float *w = NULL;
        if ((rc = be->ops->read(be, 0, v, &w)) < 0)
            rc = zdist_error_set(err, rc, "reading variable '%s': %s", vars->vars[v].name, strerror(-rc));
        t[v] = (zdist_tensor_t){.name = vars->vars[v].name, .dtype = ZDIST_DTYPE_FLOAT32,
                                .shape = vars->vars[v].shape, .data = (void *)w,
                                .nbytes = (size_t)vars->vars[v].n * sizeof(float)};
    }
    if (rc == 0)
        rc = zdist_wstate_save(ckpt, step, worker_local_iterations(be), t, (size_t)vars->n, NULL, err);
    free(t);
    void *text = NULL;
    size_t len = 0;
    if (rc == 0 && (rc = zdist_file_read(job_path, S_MAX_JOB_BYTES, &text, &len, err)) == 0) {
        snprintf(path, sizeof path, "%s/job.json", ckpt);
        rc = zdist_file_write(path, &(zdist_file_piece_t){text, len}, 1, 0644, NULL, err);
    }
    free(text);
    json_t *m = rc == 0 ? json_pack("{s:s, s:I, s:s}", "job_id", worker_session_job(sess)->name, "step",
                                    (json_int_t)step, "saved_by", "zdist run")
                        : NULL;
    if (rc == 0 && !m)
        rc = zdist_error_set(err, -ENOMEM, "out of memory");
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/manifest.json", ckpt);
        rc = zdist_json_write_sealed(path, m, "crc32", err);
    }
    json_decref(m);
    return rc;
}

/* One replica's part of one step. */
typedef struct {
    float *rows;
    int64_t n;
} s_part_t;

struct worker_predictions_t {
    pthread_mutex_t lock;
    int nrep;
    int64_t width;
    int failed; /* -ENOMEM while collecting */
    s_part_t **parts; /* [replica][k] */
    size_t *nparts, *caps;
};

static void
s_collect(void *arg, int replica, const float *rows, int64_t n, int64_t width)
{
    worker_predictions_t *self = arg;
    pthread_mutex_lock(&self->lock);
    if (replica < 0 || replica >= self->nrep || (self->width && width != self->width)) {
        self->failed = -EINVAL;
    } else if (!self->failed) {
        self->width = width;
        size_t *np = &self->nparts[replica], *cap = &self->caps[replica];
        if (*np == *cap) {
            size_t c = *cap ? 2 * *cap : 64;
            s_part_t *p = realloc(self->parts[replica], c * sizeof *p);
            if (p) {
                self->parts[replica] = p;
                *cap = c;
            }
        }
        float *copy = *np < *cap ? malloc((size_t)(n * width + 1) * sizeof *copy) : NULL;
        if (!copy) {
            self->failed = -ENOMEM;
        } else {
            memcpy(copy, rows, (size_t)(n * width) * sizeof *copy);
            self->parts[replica][(*np)++] = (s_part_t){copy, n};
        }
    }
    pthread_mutex_unlock(&self->lock);
}

worker_predictions_t *
worker_predictions_start(int num_replicas)
{
    worker_predictions_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    int nrep = num_replicas > 0 ? num_replicas : 1;
    self->nrep = nrep;
    self->parts = calloc((size_t)nrep, sizeof *self->parts);
    self->nparts = calloc((size_t)nrep, sizeof *self->nparts);
    self->caps = calloc((size_t)nrep, sizeof *self->caps);
    pthread_mutex_init(&self->lock, NULL);
    if (!self->parts || !self->nparts || !self->caps) {
        worker_predictions_stop(&self);
        return NULL;
    }
    model_predictions_sink(s_collect, self);
    return self;
}

int
worker_predictions_write(worker_predictions_t *self, const char *path, zdist_error_t *err)
{
    if (self->failed)
        return zdist_error_set(err, self->failed, "collecting the predictions failed: %s", strerror(-self->failed));
    if (!self->width)
        return zdist_error_set(err, -ENODATA, "the model handed no predictions (the built-in models do; a plugin "
                               "does not)");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    size_t steps = 0;
    for (int r = 0; r < self->nrep; r++)
        steps = self->nparts[r] > steps ? self->nparts[r] : steps;
    for (size_t k = 0; k < steps; k++)
        for (int r = 0; r < self->nrep; r++) {
            if (k >= self->nparts[r])
                continue;
            const s_part_t *p = &self->parts[r][k];
            for (int64_t i = 0; i < p->n; i++)
                for (int64_t j = 0; j < self->width; j++)
                    fprintf(f, "%.9g%c", p->rows[i * self->width + j], j + 1 == self->width ? '\n' : ' ');
        }
    int bad = ferror(f);
    fclose(f);
    int rc = bad || !buf ? zdist_error_set(err, -ENOMEM, "out of memory")
                         : zdist_file_write(path, &(zdist_file_piece_t){buf, len}, 1, 0644, NULL, err);
    free(buf);
    return rc;
}

void
worker_predictions_stop(worker_predictions_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    worker_predictions_t *self = *self_p;
    model_predictions_sink(NULL, NULL);
    for (int r = 0; self->parts && r < self->nrep; r++) {
        for (size_t k = 0; k < self->nparts[r]; k++)
            free(self->parts[r][k].rows);
        free(self->parts[r]);
    }
    free(self->parts);
    free(self->nparts);
    free(self->caps);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}
