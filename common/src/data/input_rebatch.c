/* zdist input pipelines: TF's rebatching into per-replica batches, the step iterator, prefetch. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "rng.h"

enum { S_STREAM_SHUFFLE = 4 };

int
zdist_input_batch_sizes_for_worker(int64_t global_batch_size, int num_workers, int replicas_per_worker,
                                   int worker_index, int64_t *ret_sizes)
{
    if (global_batch_size < 1 || num_workers < 1 || replicas_per_worker < 1 || !ret_sizes)
        return -EINVAL;
    int64_t n = (int64_t) num_workers * replicas_per_worker;
    int64_t floor_ = global_batch_size / n;
    int64_t num_ceil = global_batch_size - n * floor_;
    /* TF's worker_0[offset:] + worker_0[:offset]: Python clamps both slices
       at the list's ends (a negative offset counts from the end), so an
       offset at or past the end leaves worker 0's list as it is, which a
       rotation modulo n would not. */
    int64_t offset = (int64_t) worker_index * replicas_per_worker;
    int64_t start = offset >= 0 ? (offset < n ? offset : n) : (offset + n > 0 ? offset + n : 0);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = (start + i) % n;
        ret_sizes[i] = floor_ + (k < num_ceil ? 1 : 0);
    }
    return 0;
}

int
zdist_input_rebatch_legacy(int64_t batch_size, int num_replicas, int64_t *ret_offsets, int64_t *ret_sizes)
{
    if (batch_size < 0 || num_replicas < 1 || !ret_sizes)
        return -EINVAL;
    int64_t interval = (batch_size + num_replicas - 1) / num_replicas;
    for (int j = 0; j < num_replicas; j++) {
        int64_t start = interval * j;
        int64_t end = start + interval < batch_size ? start + interval : batch_size;
        if (start >= end)
            start = end;
        if (ret_offsets)
            ret_offsets[j] = start;
        ret_sizes[j] = end - start;
    }
    return 0;
}

void
zdist_input_options_init(zdist_input_options_t *opts, int64_t global_batch_size)
{
    memset(opts, 0, sizeof *opts);
    opts->global_batch_size = global_batch_size;
    opts->epochs = 1;
    opts->shard_policy = ZDIST_AUTO_SHARD_AUTO;
}

/* ------------------------------------------------------------------ iterator */

typedef struct {
    zdist_input_step_t step;
    zdist_batch_t *batches; /* [R] */
    int64_t *indices;       /* [R * maxb] */
    float *features;        /* [R * maxb * dim] */
    char *labels;           /* [R * maxb * 4] */
    int64_t *row_offsets;   /* [R * (maxb + 1)] */
    int64_t *feature_ids;   /* [R * maxb * max_nnz] */
    float *feature_values;
    /* Named columns: cols [R * ncols] (replica r's are cols + r * ncols);
       column c's values [R * maxb * (width or its longest row)] and, ragged,
       its row offsets [R * (maxb + 1)]. */
    zdist_step_column_t *cols;
    char **col_values;
    int64_t **col_offsets;
} s_slot_t;

struct zdist_input_t {
    const zdist_dataset_t *ds;
    zdist_input_options_t opts;
    int workers, worker, replicas; /* W, w, local R */
    bool legacy;                   /* DATA: legacy rebatch, then shard */
    bool whole;                    /* opts.whole_batches */
    int cycle_workers;             /* W the batch is split over: 1 when whole */
    int64_t *cycle_sizes;          /* V2: [W * R] */
    int64_t epoch_len;             /* examples walked per epoch, after drop_remainder */
    int64_t steps_per_epoch;
    int64_t maxb;
    int64_t max_nnz;
    int64_t *legacy_offsets, *legacy_sizes; /* [W * R] scratch */

    /* Producer state: touched only by whoever produces (the thread, or the
       caller of zdist_input_next without prefetch). */
    int64_t *perm;
    bool started;
    int64_t epoch, step_in_epoch, step, pos, cycle;
    int64_t perm_epoch; /* the epoch perm is shuffled for (-1: none yet) */
    uint64_t seen_gen;  /* the last seek the producer applied */

    s_slot_t *slots;
    int nslots;

    /* Hand-off between the prefetch thread and the consumer. */
    bool threaded;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_free, cv_ready;
    int *ready_q, ready_head, ready_count;
    int *free_q, free_head, free_count;
    int held;
    bool stop, done;
    int status;
    /* zdist_input_seek: the position the producer moves to (seek_gen
       counts the seeks), and the step it is producing (busy). */
    uint64_t seek_gen;
    int64_t seek_epoch, seek_step;
    bool busy;
    uint64_t busy_gen;
    int64_t busy_epoch, busy_step;
};

static void
s_shuffle(zdist_input_t *self)
{
    int64_t n = self->ds->n;
    for (int64_t i = 0; i < n; i++)
        self->perm[i] = i;
    self->perm_epoch = self->epoch;
    if (!self->opts.shuffle)
        return;
    zdist_rng_t rng;
    zdist_rng_seed_(&rng, self->opts.shuffle_seed, S_STREAM_SHUFFLE, (uint64_t) self->epoch);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t) zdist_rng_below_(&rng, (uint64_t) i + 1);
        int64_t t = self->perm[i];
        self->perm[i] = self->perm[j];
        self->perm[j] = t;
    }
}

/* Width of column c's per-example room: its width, or its longest row. */
static int64_t
s_col_room(const zdist_dataset_t *ds, int c)
{
    if (ds->cols[c].width > 0)
        return ds->cols[c].width;
    return ds->col_max_row[c] > 0 ? ds->col_max_row[c] : 1;
}

/* The named columns of rows into replica r's buffers of slot. */
static void
s_gather_columns(const zdist_input_t *self, s_slot_t *slot, int r, const int64_t *rows, int64_t count)
{
    const zdist_dataset_t *ds = self->ds;
    zdist_batch_t *b = &slot->batches[r];
    zdist_step_column_t *out = slot->cols + (size_t) r * ds->ncols;
    for (int c = 0; c < ds->ncols; c++) {
        const zdist_step_column_t *src = &ds->cols[c];
        size_t es = src->dtype == ZDIST_DTYPE_INT64 ? 8 : 4;
        char *vals = slot->col_values[c] + (size_t) r * self->maxb * s_col_room(ds, c) * es;
        out[c] = *src;
        out[c].values = vals;
        if (src->width == 1 && es == 8) { /* one id per example: the common categorical column */
            const int64_t *in = src->values;
            int64_t *o = (int64_t *) (void *) vals;
            for (int64_t i = 0; i < count; i++)
                o[i] = in[rows[i]];
            continue;
        }
        if (src->width == 1) {
            const float *in = src->values;
            float *o = (float *) (void *) vals;
            for (int64_t i = 0; i < count; i++)
                o[i] = in[rows[i]];
            continue;
        }
        if (src->width > 0) {
            size_t row = (size_t) src->width * es;
            for (int64_t i = 0; i < count; i++)
                memcpy(vals + (size_t) i * row, (const char *) src->values + (size_t) rows[i] * row, row);
            continue;
        }
        int64_t *ro = slot->col_offsets[c] + (size_t) r * (self->maxb + 1), at = 0;
        ro[0] = 0;
        for (int64_t i = 0; i < count; i++) {
            int64_t s = src->row_offsets[rows[i]], e = src->row_offsets[rows[i] + 1];
            memcpy(vals + (size_t) at * es, (const char *) src->values + (size_t) s * es, (size_t) (e - s) * es);
            at += e - s;
            ro[i + 1] = at;
        }
        out[c].row_offsets = ro;
    }
    b->ncolumns = ds->ncols;
    b->columns = ds->ncols ? out : NULL;
}

static void
s_gather(zdist_input_t *self, s_slot_t *slot, int r, const int64_t *rows, int64_t count)
{
    const zdist_dataset_t *ds = self->ds;
    zdist_batch_t *b = &slot->batches[r];
    int64_t *idx = slot->indices + (size_t) r * self->maxb;
    char *lab = slot->labels + (size_t) r * self->maxb * 4;
    memcpy(idx, rows, (size_t) count * sizeof(int64_t));
    for (int64_t i = 0; i < count; i++)
        memcpy(lab + i * 4, (const char *) ds->labels + rows[i] * 4, 4);
    b->size = count;
    b->indices = idx;
    b->labels = lab;
    if (ds->ncols > 0)
        s_gather_columns(self, slot, r, rows, count);
    if (!ds->sparse) {
        size_t d = (size_t) ds->dim;
        float *f = slot->features + (size_t) r * self->maxb * d;
        for (int64_t i = 0; i < count; i++)
            memcpy(f + (size_t) i * d, ds->features + (size_t) rows[i] * d, d * sizeof(float));
        b->features = f;
        return;
    }
    int64_t *ro = slot->row_offsets + (size_t) r * (self->maxb + 1);
    int64_t *ids = slot->feature_ids + (size_t) r * self->maxb * self->max_nnz;
    float *vals = slot->feature_values + (size_t) r * self->maxb * self->max_nnz;
    int64_t at = 0;
    ro[0] = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t s = ds->row_offsets[rows[i]], e = ds->row_offsets[rows[i] + 1];
        memcpy(ids + at, ds->feature_ids + s, (size_t) (e - s) * sizeof(int64_t));
        memcpy(vals + at, ds->feature_values + s, (size_t) (e - s) * sizeof(float));
        at += e - s;
        ro[i + 1] = at;
    }
    b->row_offsets = ro;
    b->feature_ids = ids;
    b->feature_values = vals;
}

/* Fills slot with the next step: 1, or 0 at the end. */
static int
s_produce(zdist_input_t *self, s_slot_t *slot)
{
    if (!self->started || self->step_in_epoch == self->steps_per_epoch) {
        if (self->started)
            self->epoch++;
        self->started = true;
        if (self->steps_per_epoch == 0)
            return 0;
        if (self->opts.epochs != ZDIST_INPUT_REPEAT_FOREVER && self->epoch >= self->opts.epochs)
            return 0;
        s_shuffle(self);
        self->step_in_epoch = 0;
        self->pos = 0;
        self->cycle = 0;
    }
    int R = self->replicas, W = self->workers;
    int64_t total = 0;
    if (self->legacy && self->whole) {
        /* this pipeline's next whole batch: batch w + W * step of the common order */
        int64_t start = (self->step_in_epoch * W + self->worker) * self->opts.global_batch_size;
        int64_t b = self->epoch_len - start;
        if (b > self->opts.global_batch_size)
            b = self->opts.global_batch_size;
        zdist_input_rebatch_legacy(b, R, self->legacy_offsets, self->legacy_sizes);
        for (int r = 0; r < R; r++) {
            s_gather(self, slot, r, self->perm + start + self->legacy_offsets[r], self->legacy_sizes[r]);
            total += self->legacy_sizes[r];
        }
    } else if (self->legacy) {
        int64_t start = self->step_in_epoch * self->opts.global_batch_size;
        int64_t b = self->epoch_len - start;
        if (b > self->opts.global_batch_size)
            b = self->opts.global_batch_size;
        zdist_input_rebatch_legacy(b, W * R, self->legacy_offsets, self->legacy_sizes);
        for (int r = 0; r < R; r++) {
            int j = self->worker + r * W;
            s_gather(self, slot, r, self->perm + start + self->legacy_offsets[j], self->legacy_sizes[j]);
            total += self->legacy_sizes[j];
        }
    } else {
        int64_t n = (int64_t) self->cycle_workers * R;
        for (int r = 0; r < R; r++) {
            int64_t take = self->cycle_sizes[self->cycle % n];
            if (take > self->epoch_len - self->pos)
                take = self->epoch_len - self->pos;
            s_gather(self, slot, r, self->perm + self->pos, take);
            self->pos += take;
            self->cycle++;
            total += take;
        }
    }
    slot->step.step = self->step;
    slot->step.epoch = self->epoch;
    slot->step.step_in_epoch = self->step_in_epoch;
    slot->step.num_replicas = R;
    slot->step.size = total;
    slot->step.replicas = slot->batches;
    self->step++;
    self->step_in_epoch++;
    return 1;
}

/* Producer: the step s_produce makes next is step s of epoch e. */
static void
s_position(zdist_input_t *self, int64_t e, int64_t s)
{
    self->started = true;
    self->epoch = e;
    if (self->perm_epoch != e)
        s_shuffle(self);
    self->step_in_epoch = s;
    self->step = e * self->steps_per_epoch + s;
    /* Whole batches: a step takes R sub-batches that add up to G. */
    self->pos = s * self->opts.global_batch_size;
    self->cycle = s * self->replicas;
}

/* Producer: the epoch and step in it s_produce makes next. */
static void
s_next_position(const zdist_input_t *self, int64_t *ret_epoch, int64_t *ret_step)
{
    bool rolls = !self->started || self->step_in_epoch == self->steps_per_epoch;
    *ret_epoch = !self->started ? 0 : rolls ? self->epoch + 1 : self->epoch;
    *ret_step = rolls ? 0 : self->step_in_epoch;
}

static void *
s_prefetch_thread(void *arg)
{
    zdist_input_t *self = arg;
    for (;;) {
        pthread_mutex_lock(&self->mu);
        while (self->free_count == 0 && !self->stop)
            pthread_cond_wait(&self->cv_free, &self->mu);
        if (self->stop) {
            pthread_mutex_unlock(&self->mu);
            break;
        }
        int idx = self->free_q[self->free_head];
        self->free_head = (self->free_head + 1) % self->nslots;
        self->free_count--;
        uint64_t gen = self->seek_gen;
        if (gen != self->seen_gen) {
            s_position(self, self->seek_epoch, self->seek_step);
            self->seen_gen = gen;
        }
        self->busy = true;
        self->busy_gen = gen;
        s_next_position(self, &self->busy_epoch, &self->busy_step);
        pthread_mutex_unlock(&self->mu);

        int r = s_produce(self, &self->slots[idx]);

        pthread_mutex_lock(&self->mu);
        self->busy = false;
        if (r > 0 && gen != self->seek_gen) { /* sought elsewhere meanwhile: not the step wanted */
            self->free_q[(self->free_head + self->free_count) % self->nslots] = idx;
            self->free_count++;
            pthread_mutex_unlock(&self->mu);
            continue;
        }
        if (r <= 0) {
            self->free_q[(self->free_head + self->free_count) % self->nslots] = idx;
            self->free_count++;
            self->done = true;
            self->status = r;
            pthread_cond_broadcast(&self->cv_ready);
            pthread_mutex_unlock(&self->mu);
            break;
        }
        self->ready_q[(self->ready_head + self->ready_count) % self->nslots] = idx;
        self->ready_count++;
        pthread_cond_broadcast(&self->cv_ready);
        pthread_mutex_unlock(&self->mu);
    }
    return NULL;
}

/* Steps in an epoch. DATA: one per global batch. OFF/FILE: TF's
   RebatchDatasetV2 emits sub-batches of the cycling sizes; one whose size is
   0 is emitted empty without reading the input (so also after the input ran
   out, as long as no read has seen its end), one of size d > 0 ends the
   epoch when nothing is left, and takes what is left when less than d
   remains (that read saw the end: nothing follows). A step is R sub-batches,
   the last one padded with empty batches. So sizes [0, 1] over range(8)
   give [],[0],[],[1],...,[],[7],[] (17), and [1, 0] give [0],[],...,[7],[]
   (16), as rebatch_dataset_test's testEmptyFirstSplits / testEmptyLastSplits. */
static int64_t
s_steps_per_epoch(const zdist_input_t *self)
{
    int64_t L = self->epoch_len, G = self->opts.global_batch_size;
    if (L == 0)
        return 0;
    if (self->legacy && self->whole) {
        int64_t batches = (L + G - 1) / G, w = self->worker, W = self->workers;
        return batches > w ? (batches - 1 - w) / W + 1 : 0;
    }
    if (self->legacy)
        return (L + G - 1) / G;
    int64_t n = (int64_t) self->cycle_workers * self->replicas, pos = 0, k = 0;
    /* Whole cycles take G each and emit all n sub-batches; walk the tail. */
    int64_t cycles = L / G;
    if (cycles > 0) {
        cycles--; /* keep the last full cycle in the walk: its end may be the end */
        pos = cycles * G;
        k = cycles * n;
    }
    for (;;) { /* ends: the sizes add up to G >= 1, so one of every n is > 0 */
        int64_t want = self->cycle_sizes[k % n];
        if (want == 0) {
            k++;
            continue;
        }
        if (pos == L)
            break;
        int64_t take = want < L - pos ? want : L - pos;
        pos += take;
        k++;
        if (take < want)
            break;
    }
    return (k + self->replicas - 1) / self->replicas;
}

/* A slot's column buffers, sized for maxb examples per replica. */
static int
s_alloc_columns(const zdist_input_t *self, s_slot_t *s)
{
    const zdist_dataset_t *ds = self->ds;
    size_t R = (size_t) self->replicas, mb = (size_t) self->maxb, nc = (size_t) ds->ncols;
    s->cols = calloc(R * nc, sizeof *s->cols);
    s->col_values = calloc(nc, sizeof *s->col_values);
    s->col_offsets = calloc(nc, sizeof *s->col_offsets);
    if (!s->cols || !s->col_values || !s->col_offsets)
        return -ENOMEM;
    for (int c = 0; c < ds->ncols; c++) {
        size_t room = (size_t) s_col_room(ds, c), es = ds->cols[c].dtype == ZDIST_DTYPE_INT64 ? 8 : 4;
        if (room && R * mb > SIZE_MAX / es / room)
            return -ENOMEM;
        if (!(s->col_values[c] = malloc(R * mb * room * es + 1)))
            return -ENOMEM;
        if (ds->cols[c].width == 0 && !(s->col_offsets[c] = malloc(R * (mb + 1) * sizeof(int64_t))))
            return -ENOMEM;
    }
    return 0;
}

static void
s_free_columns(const zdist_input_t *self, s_slot_t *s)
{
    for (int c = 0; c < self->ds->ncols; c++) {
        if (s->col_values)
            free(s->col_values[c]);
        if (s->col_offsets)
            free(s->col_offsets[c]);
    }
    free(s->cols);
    free(s->col_values);
    free(s->col_offsets);
}

zdist_input_t *
zdist_input_new(const zdist_dataset_t *dataset, const zdist_input_context_t *ctx,
                const zdist_input_options_t *opts, zdist_error_t *err)
{
    if (!dataset || !opts) {
        zdist_error_set(err, -EINVAL, "input: no dataset or options");
        return NULL;
    }
    int W = ctx ? zdist_input_context_num_input_pipelines(ctx) : 1;
    int w = ctx ? zdist_input_context_input_pipeline_id(ctx) : 0;
    int RT = ctx ? zdist_input_context_num_replicas_in_sync(ctx) : 1;
    if (opts->global_batch_size < 1) {
        zdist_error_set(err, -EINVAL, "global batch size %lld: it must be at least 1",
                        (long long) opts->global_batch_size);
        return NULL;
    }
    if (opts->epochs < 1 && opts->epochs != ZDIST_INPUT_REPEAT_FOREVER) {
        zdist_error_set(err, -EINVAL, "epochs %lld: use at least 1, or repeat forever",
                        (long long) opts->epochs);
        return NULL;
    }
    if (opts->prefetch < 0 || opts->prefetch > 1024) {
        zdist_error_set(err, -EINVAL, "prefetch %d: use 0..1024 steps", opts->prefetch);
        return NULL;
    }
    if (RT % W != 0) {
        zdist_error_set(err, -EINVAL, "tf.distribute expects every worker to have the same number of replicas. "
                        "However, encountered `num_replicas_in_sync` (%d) that cannot be divided by "
                        "`num_workers` (%d)",
                        RT, W);
        return NULL;
    }
    zdist_input_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->ds = dataset;
    self->opts = *opts;
    self->workers = W;
    self->worker = w;
    self->replicas = RT / W;
    self->held = -1;
    self->perm_epoch = -1;
    self->legacy = opts->shard_policy == ZDIST_AUTO_SHARD_DATA || opts->shard_policy == ZDIST_AUTO_SHARD_AUTO;
    self->whole = opts->whole_batches;
    self->cycle_workers = self->whole ? 1 : W;
    int64_t G = opts->global_batch_size;
    int64_t n = dataset->n;
    self->epoch_len = opts->drop_remainder ? n / G * G : n;
    self->maxb = (G + self->cycle_workers * self->replicas - 1) / (self->cycle_workers * self->replicas);
    self->max_nnz = dataset->sparse ? (dataset->max_row_nnz ? dataset->max_row_nnz : 1) : 0;
    size_t ncycle = (size_t) W * (size_t) self->replicas;
    self->cycle_sizes = calloc(ncycle, sizeof(int64_t));
    self->legacy_offsets = calloc(ncycle, sizeof(int64_t));
    self->legacy_sizes = calloc(ncycle, sizeof(int64_t));
    self->perm = malloc((n ? (size_t) n : 1) * sizeof(int64_t));
    self->nslots = opts->prefetch > 0 ? opts->prefetch + 1 : 1;
    self->slots = calloc((size_t) self->nslots, sizeof(s_slot_t));
    self->ready_q = calloc((size_t) self->nslots, sizeof(int));
    self->free_q = calloc((size_t) self->nslots, sizeof(int));
    if (!self->cycle_sizes || !self->legacy_offsets || !self->legacy_sizes || !self->perm || !self->slots ||
        !self->ready_q || !self->free_q)
        goto oom;
    zdist_input_batch_sizes_for_worker(G, self->cycle_workers, self->replicas, self->whole ? 0 : w, self->cycle_sizes);
    self->steps_per_epoch = s_steps_per_epoch(self);

    size_t R = (size_t) self->replicas, mb = (size_t) self->maxb, d = (size_t) dataset->dim;
    for (int i = 0; i < self->nslots; i++) {
        s_slot_t *s = &self->slots[i];
        s->batches = calloc(R, sizeof(zdist_batch_t));
        s->indices = malloc(R * mb * sizeof(int64_t));
        s->labels = malloc(R * mb * 4);
        if (!s->batches || !s->indices || !s->labels)
            goto oom;
        if (!dataset->sparse) {
            if (d && R * mb > SIZE_MAX / sizeof(float) / d)
                goto oom;
            s->features = malloc(R * mb * d * sizeof(float) + 1);
            if (!s->features)
                goto oom;
        } else {
            size_t nnz = R * mb * (size_t) self->max_nnz;
            s->row_offsets = malloc(R * (mb + 1) * sizeof(int64_t));
            s->feature_ids = malloc(nnz * sizeof(int64_t) + 1);
            s->feature_values = malloc(nnz * sizeof(float) + 1);
            if (!s->row_offsets || !s->feature_ids || !s->feature_values)
                goto oom;
        }
        if (dataset->ncols > 0 && s_alloc_columns(self, s) < 0)
            goto oom;
        self->free_q[i] = i;
    }
    self->free_count = self->nslots;

    if (opts->prefetch > 0) {
        pthread_mutex_init(&self->mu, NULL);
        pthread_cond_init(&self->cv_free, NULL);
        pthread_cond_init(&self->cv_ready, NULL);
        int r = pthread_create(&self->thread, NULL, s_prefetch_thread, self);
        if (r != 0) {
            pthread_cond_destroy(&self->cv_ready);
            pthread_cond_destroy(&self->cv_free);
            pthread_mutex_destroy(&self->mu);
            zdist_error_set(err, -r, "input: cannot start the prefetch thread: %s", strerror(r));
            zdist_input_destroy(&self);
            return NULL;
        }
        self->threaded = true;
    }
    return self;
oom:
    zdist_error_set(err, -ENOMEM, "input: out of memory for %d buffers of %lld examples", self->nslots,
                    (long long) self->maxb);
    zdist_input_destroy(&self);
    return NULL;
}

void
zdist_input_destroy(zdist_input_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_input_t *self = *self_p;
    if (self->threaded) {
        pthread_mutex_lock(&self->mu);
        self->stop = true;
        pthread_cond_broadcast(&self->cv_free);
        pthread_mutex_unlock(&self->mu);
        pthread_join(self->thread, NULL);
        pthread_cond_destroy(&self->cv_ready);
        pthread_cond_destroy(&self->cv_free);
        pthread_mutex_destroy(&self->mu);
    }
    for (int i = 0; self->slots && i < self->nslots; i++) {
        s_slot_t *s = &self->slots[i];
        free(s->batches);
        free(s->indices);
        free(s->labels);
        free(s->features);
        free(s->row_offsets);
        free(s->feature_ids);
        free(s->feature_values);
        s_free_columns(self, s);
    }
    free(self->slots);
    free(self->ready_q);
    free(self->free_q);
    free(self->perm);
    free(self->cycle_sizes);
    free(self->legacy_offsets);
    free(self->legacy_sizes);
    free(self);
    *self_p = NULL;
}

int
zdist_input_next(zdist_input_t *self, const zdist_input_step_t **ret_step)
{
    if (!self || !ret_step)
        return -EINVAL;
    if (!self->threaded) {
        int r = s_produce(self, &self->slots[0]);
        if (r == 1)
            *ret_step = &self->slots[0].step;
        return r;
    }
    pthread_mutex_lock(&self->mu);
    if (self->held >= 0) {
        self->free_q[(self->free_head + self->free_count) % self->nslots] = self->held;
        self->free_count++;
        self->held = -1;
        pthread_cond_signal(&self->cv_free);
    }
    while (self->ready_count == 0 && !self->done)
        pthread_cond_wait(&self->cv_ready, &self->mu);
    int r;
    if (self->ready_count > 0) {
        int idx = self->ready_q[self->ready_head];
        self->ready_head = (self->ready_head + 1) % self->nslots;
        self->ready_count--;
        self->held = idx;
        *ret_step = &self->slots[idx].step;
        r = 1;
    } else {
        r = self->status;
    }
    pthread_mutex_unlock(&self->mu);
    return r;
}

int
zdist_input_seek(zdist_input_t *self, int64_t epoch, int64_t step_in_epoch)
{
    if (!self || !self->whole || self->opts.epochs != ZDIST_INPUT_REPEAT_FOREVER || epoch < 0 || step_in_epoch < 0 ||
        step_in_epoch >= self->steps_per_epoch)
        return -EINVAL;
    int64_t e, s;
    if (!self->threaded) {
        s_next_position(self, &e, &s);
        if (e != epoch || s != step_in_epoch)
            s_position(self, epoch, step_in_epoch);
        return 0;
    }
    pthread_mutex_lock(&self->mu);
    bool there;
    if (self->ready_count > 0) {
        const zdist_input_step_t *st = &self->slots[self->ready_q[self->ready_head]].step;
        there = st->epoch == epoch && st->step_in_epoch == step_in_epoch;
    } else {
        there = self->busy && self->busy_gen == self->seek_gen && self->busy_epoch == epoch &&
                self->busy_step == step_in_epoch;
    }
    if (!there) { /* what was prefetched is not what comes next: dropped, the producer moves */
        while (self->ready_count > 0) {
            self->free_q[(self->free_head + self->free_count) % self->nslots] = self->ready_q[self->ready_head];
            self->free_count++;
            self->ready_head = (self->ready_head + 1) % self->nslots;
            self->ready_count--;
        }
        self->seek_gen++;
        self->seek_epoch = epoch;
        self->seek_step = step_in_epoch;
        pthread_cond_signal(&self->cv_free);
    }
    pthread_mutex_unlock(&self->mu);
    return 0;
}

int64_t
zdist_input_steps_per_epoch(const zdist_input_t *self)
{
    return self->steps_per_epoch;
}
