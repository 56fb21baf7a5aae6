/* psd_store: the psd's shards, sorted by (name, shard index) under one rwlock, and each job's optimizer. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psd_store.h"

/* A job's own optimizer (set_optimizer naming the job). */
typedef struct {
    char *job;
    zdist_optim_config_t optim;
} s_job_optim_t;

/* A job's dynamic tables' checkpoint chain on this psd (psd_dyntable_ckpt):
   which files its next save continues; made at its first save. */
typedef struct {
    char *job;
    psd_dyntable_ckpt_t *ckpt;
} s_job_dyn_t;

struct _psd_store_t {
    pthread_rwlock_t lock;
    psd_shard_t **shards; /* sorted by (name, shard_index) */
    size_t nshards, cap;
    zdist_optim_config_t optim; /* the default */
    s_job_optim_t *jobs;
    size_t njobs;
    s_job_dyn_t *dyn; /* beside the optimizers, dropped with the job */
    size_t ndyn;
};

static const char *
s_describe(const psd_shard_spec_t *s, char *buf, size_t size)
{
    char shape[160];
    zdist_shape_format(&s->shape, shape, sizeof shape);
    snprintf(buf, size, "part %d rows [%" PRId64 ", %" PRId64 ") of %s %s, %s initializer, seed %" PRIu64,
             (int) s->shard_index, s->row_offset, s->row_offset + s->rows, shape,
             zdist_dtype_name(s->dtype), zdist_init_kind_name(s->init.kind), s->seed);
    return buf;
}

static bool
s_spec_equal(const psd_shard_spec_t *a, const psd_shard_spec_t *b)
{
    return strcmp(a->name, b->name) == 0 && zdist_shape_equal(&a->shape, &b->shape)
           && a->dtype == b->dtype && a->shard_index == b->shard_index
           && a->row_offset == b->row_offset && a->rows == b->rows
           && zdist_init_equal(&a->init, &b->init) && a->seed == b->seed
           && a->dynamic.enabled == b->dynamic.enabled && a->dynamic.min_count == b->dynamic.min_count
           && a->dynamic.evict_after_steps == b->dynamic.evict_after_steps
           && a->dynamic.evict_l2_below == b->dynamic.evict_l2_below && a->dynamic.num_ps == b->dynamic.num_ps;
}


psd_store_t *
psd_store_new(void)
{
    psd_store_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    if (pthread_rwlock_init(&self->lock, NULL) != 0) {
        free(self);
        return NULL;
    }
    zdist_optim_config_default(&self->optim, ZDIST_OPTIM_SGD);
    return self;
}

void
psd_store_destroy(psd_store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    psd_store_t *self = *self_p;
    for (size_t i = 0; i < self->nshards; i++)
        psd_shard_destroy(&self->shards[i]);
    free(self->shards);
    for (size_t i = 0; i < self->njobs; i++)
        free(self->jobs[i].job);
    free(self->jobs);
    for (size_t i = 0; i < self->ndyn; i++) {
        free(self->dyn[i].job);
        psd_dyntable_ckpt_destroy(&self->dyn[i].ckpt);
    }
    free(self->dyn);
    pthread_rwlock_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

int
psd_store_set_optimizer(psd_store_t *self, const zdist_optim_config_t *cfg, zdist_error_t *err)
{
    int rc = zdist_optim_config_validate(cfg, err);
    if (rc < 0)
        return rc;
    pthread_rwlock_wrlock(&self->lock);
    self->optim = *cfg;
    for (size_t i = 0; i < self->nshards; i++)
        psd_shard_set_optimizer(self->shards[i], cfg, NULL);
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

/* The optimizer a shard named `name` takes: its job's, else the default.
   Under the store lock. */
static const zdist_optim_config_t *
s_optim_for(const psd_store_t *self, const char *name)
{
    for (size_t i = 0; i < self->njobs; i++)
        if (psd_name_in_job(name, self->jobs[i].job))
            return &self->jobs[i].optim;
    return &self->optim;
}

int
psd_store_set_optimizer_job(psd_store_t *self, const char *job, const zdist_optim_config_t *cfg,
                            zdist_error_t *err)
{
    if (!job || !*job)
        return psd_store_set_optimizer(self, cfg, err);
    int rc = zdist_optim_config_validate(cfg, err);
    if (rc < 0)
        return rc;
    pthread_rwlock_wrlock(&self->lock);
    s_job_optim_t *e = NULL;
    for (size_t i = 0; i < self->njobs && !e; i++)
        if (strcmp(self->jobs[i].job, job) == 0)
            e = &self->jobs[i];
    if (!e && self->njobs >= PSD_MAX_JOBS)
        rc = zdist_error_set(err, -ENOSPC, "job '%s': this psd already holds the optimizers of %d jobs", job,
                             PSD_MAX_JOBS);
    if (!e && rc == 0) {
        s_job_optim_t *n = realloc(self->jobs, (self->njobs + 1) * sizeof *n);
        char *copy = strdup(job);
        if (!n || !copy) {
            free(copy);
            if (n)
                self->jobs = n;
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
        } else {
            self->jobs = n;
            e = &self->jobs[self->njobs++];
            e->job = copy;
        }
    }
    if (e) {
        e->optim = *cfg;
        for (size_t i = 0; i < self->nshards; i++)
            if (psd_shard_in_job(self->shards[i], job))
                psd_shard_set_optimizer(self->shards[i], cfg, NULL);
    }
    pthread_rwlock_unlock(&self->lock);
    return rc;
}

int
psd_store_drop_job(psd_store_t *self, const char *job, uint64_t *ret_bytes)
{
    if (!job || !*job)
        return -EINVAL;
    size_t kept = 0, dropped = 0;
    uint64_t bytes = 0;
    pthread_rwlock_wrlock(&self->lock);
    for (size_t i = 0; i < self->nshards; i++) {
        psd_shard_t *s = self->shards[i];
        if (!psd_shard_in_job(s, job)) {
            self->shards[kept++] = s;
            continue;
        }
        bytes += psd_shard_retire(&s);
        dropped++;
    }
    self->nshards = kept; /* still sorted: the kept ones keep their order */
    for (size_t i = 0; i < self->njobs; i++)
        if (strcmp(self->jobs[i].job, job) == 0) {
            free(self->jobs[i].job);
            self->jobs[i] = self->jobs[--self->njobs];
            break;
        }
    for (size_t i = 0; i < self->ndyn; i++)
        if (strcmp(self->dyn[i].job, job) == 0) {
            free(self->dyn[i].job);
            psd_dyntable_ckpt_destroy(&self->dyn[i].ckpt);
            self->dyn[i] = self->dyn[--self->ndyn];
            break;
        }
    pthread_rwlock_unlock(&self->lock);
    if (ret_bytes)
        *ret_bytes = bytes;
    return (int) (dropped > INT32_MAX ? INT32_MAX : dropped);
}

psd_shard_t **
psd_store_list_job(psd_store_t *self, const char *job, bool dynamic, size_t *ret_n)
{
    size_t n = psd_store_list(self, NULL, 0);
    psd_shard_t **shards = calloc(n ? n : 1, sizeof *shards);
    if (!shards)
        return NULL;
    n = psd_store_list(self, shards, n);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (psd_shard_in_job(shards[i], job) && psd_shard_is_dynamic(shards[i]) == dynamic)
            shards[kept++] = shards[i];
    *ret_n = kept;
    return shards;
}

psd_dyntable_ckpt_t *
psd_store_dyn_ckpt(psd_store_t *self, const char *job, int full_every, zdist_error_t *err)
{
    if (!job)
        job = "";
    psd_dyntable_ckpt_t *ckpt = NULL;
    pthread_rwlock_wrlock(&self->lock);
    for (size_t i = 0; i < self->ndyn && !ckpt; i++)
        if (strcmp(self->dyn[i].job, job) == 0)
            ckpt = self->dyn[i].ckpt;
    if (!ckpt && self->ndyn >= PSD_MAX_JOBS) {
        zdist_error_set(err, -ENOSPC, "job '%s': this psd already keeps the dynamic checkpoints of %d jobs", job,
                        PSD_MAX_JOBS);
    } else if (!ckpt) {
        s_job_dyn_t *n = realloc(self->dyn, (self->ndyn + 1) * sizeof *n);
        if (n)
            self->dyn = n;
        char *copy = strdup(job);
        ckpt = n && copy ? psd_dyntable_ckpt_new(full_every > 0 ? full_every : PSD_STORE_DYN_FULL_EVERY) : NULL;
        if (ckpt)
            self->dyn[self->ndyn++] = (s_job_dyn_t){copy, ckpt};
        else {
            free(copy);
            zdist_error_set(err, -ENOMEM, "out of memory");
        }
    } else {
        psd_dyntable_ckpt_set_full_every(ckpt, full_every);
    }
    pthread_rwlock_unlock(&self->lock);
    return ckpt;
}

void
psd_store_get_optimizer(psd_store_t *self, zdist_optim_config_t *ret_cfg)
{
    pthread_rwlock_rdlock(&self->lock);
    *ret_cfg = self->optim;
    pthread_rwlock_unlock(&self->lock);
}

static int
s_key_cmp(const char *name, int32_t index, const psd_shard_t *shard)
{
    const psd_shard_spec_t *s = psd_shard_spec(shard);
    int c = strcmp(name, s->name);
    if (c)
        return c;
    return (index > s->shard_index) - (index < s->shard_index);
}

/* First position whose key is >= (name, index); under the store lock. */
static size_t
s_lower_bound(psd_store_t *self, const char *name, int32_t index)
{
    size_t lo = 0, hi = self->nshards;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s_key_cmp(name, index, self->shards[mid]) > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Conflicts of spec with what the store holds; under the store lock.
   Sets *ret_same when the identical shard exists. */
static int
s_conflicts(psd_store_t *self, const psd_shard_spec_t *spec, psd_shard_t **ret_same,
            zdist_error_t *err)
{
    char have[400], want[400];
    *ret_same = NULL;
    for (size_t i = s_lower_bound(self, spec->name, INT32_MIN);
         i < self->nshards && strcmp(psd_shard_spec(self->shards[i])->name, spec->name) == 0; i++) {
        const psd_shard_spec_t *o = psd_shard_spec(self->shards[i]);
        if (o->shard_index == spec->shard_index) {
            if (s_spec_equal(o, spec)) {
                *ret_same = self->shards[i];
                return 0;
            }
            return zdist_error_set(err, -EEXIST, "variable '%s' part %d already exists as %s; "
                                   "this request asks for %s", spec->name,
                                   (int) spec->shard_index, s_describe(o, have, sizeof have),
                                   s_describe(spec, want, sizeof want));
        }
        if (o->dtype != spec->dtype || !zdist_shape_equal(&o->shape, &spec->shape))
            return zdist_error_set(err, -EEXIST, "variable '%s' already exists with another "
                                   "dtype or shape: %s; this request asks for %s", spec->name,
                                   s_describe(o, have, sizeof have),
                                   s_describe(spec, want, sizeof want));
        if (spec->row_offset < o->row_offset + o->rows && o->row_offset < spec->row_offset + spec->rows)
            return zdist_error_set(err, -EEXIST, "variable '%s': rows of %s overlap existing %s",
                                   spec->name, s_describe(spec, want, sizeof want),
                                   s_describe(o, have, sizeof have));
    }
    return 0;
}

int
psd_store_create(psd_store_t *self, const psd_shard_spec_t *spec, psd_shard_t **ret_shard,
                 zdist_error_t *err)
{
    int64_t width = 0;
    size_t value_bytes = 0;
    int rc = psd_shard_spec_validate(spec, &width, &value_bytes, err);
    if (rc < 0)
        return rc;
    psd_shard_t *same;
    pthread_rwlock_rdlock(&self->lock);
    rc = s_conflicts(self, spec, &same, err);
    zdist_optim_config_t optim = *s_optim_for(self, spec->name);
    pthread_rwlock_unlock(&self->lock);
    if (rc < 0)
        return rc;
    if (same) {
        if (ret_shard)
            *ret_shard = same;
        return 0;
    }
    /* Initial values are computed outside the store lock: big shards take time. */
    psd_shard_t *shard = psd_shard_new(spec, width, value_bytes, &optim, &rc, err);
    if (!shard)
        return rc != -ENOMEM ? rc
                             : zdist_error_set(err, -ENOMEM, "variable '%s': out of memory for "
                                               "%zu bytes", spec->name, value_bytes);
    pthread_rwlock_wrlock(&self->lock);
    rc = s_conflicts(self, spec, &same, err); /* another thread may have won */
    if (rc == 0 && !same && self->nshards == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 16;
        psd_shard_t **p = realloc(self->shards, cap * sizeof *p);
        if (!p)
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
        else {
            self->shards = p;
            self->cap = cap;
        }
    }
    if (rc == 0 && !same) {
        psd_shard_set_optimizer(shard, s_optim_for(self, spec->name), NULL);
        size_t pos = s_lower_bound(self, spec->name, spec->shard_index);
        memmove(&self->shards[pos + 1], &self->shards[pos],
                (self->nshards - pos) * sizeof self->shards[0]);
        self->shards[pos] = shard;
        self->nshards++;
        same = shard;
        shard = NULL;
    }
    pthread_rwlock_unlock(&self->lock);
    psd_shard_destroy(&shard);
    if (rc == 0 && ret_shard)
        *ret_shard = same;
    return rc;
}

psd_shard_t *
psd_store_find(psd_store_t *self, const char *name, int32_t shard_index)
{
    psd_shard_t *found = NULL;
    pthread_rwlock_rdlock(&self->lock);
    size_t i = s_lower_bound(self, name, shard_index);
    if (i < self->nshards && s_key_cmp(name, shard_index, self->shards[i]) == 0)
        found = self->shards[i];
    pthread_rwlock_unlock(&self->lock);
    return found;
}

/* Under the store lock. */
static psd_shard_t *
s_find_row(psd_store_t *self, const char *name, int64_t row, bool *ret_known)
{
    *ret_known = false;
    for (size_t i = s_lower_bound(self, name, INT32_MIN);
         i < self->nshards && strcmp(psd_shard_spec(self->shards[i])->name, name) == 0; i++) {
        const psd_shard_spec_t *s = psd_shard_spec(self->shards[i]);
        *ret_known = true;
        if (row >= s->row_offset && row < s->row_offset + s->rows)
            return self->shards[i];
    }
    return NULL;
}

psd_shard_t *
psd_store_first(psd_store_t *self, const char *name)
{
    pthread_rwlock_rdlock(&self->lock);
    size_t i = s_lower_bound(self, name, INT32_MIN);
    psd_shard_t *found =
        i < self->nshards && strcmp(psd_shard_spec(self->shards[i])->name, name) == 0 ? self->shards[i] : NULL;
    pthread_rwlock_unlock(&self->lock);
    return found;
}

psd_shard_t *
psd_store_find_row(psd_store_t *self, const char *name, int64_t row)
{
    bool known;
    pthread_rwlock_rdlock(&self->lock);
    psd_shard_t *found = s_find_row(self, name, row, &known);
    pthread_rwlock_unlock(&self->lock);
    return found;
}

size_t
psd_store_list(psd_store_t *self, psd_shard_t **out, size_t max)
{
    pthread_rwlock_rdlock(&self->lock);
    size_t n = self->nshards;
    if (out) {
        n = n < max ? n : max;
        for (size_t i = 0; i < n; i++)
            out[i] = self->shards[i];
    }
    pthread_rwlock_unlock(&self->lock);
    return n;
}

/* True when shard s (may be NULL) holds global row `row`. */
static bool
s_holds(const psd_shard_t *s, int64_t row)
{
    if (!s)
        return false;
    const psd_shard_spec_t *spec = psd_shard_spec(s);
    return row >= spec->row_offset && row - spec->row_offset < spec->rows;
}

int
psd_store_read_ids(psd_store_t *self, const char *name, const int64_t *ids, size_t nids,
                   void *buf, size_t buf_bytes, zdist_error_t *err)
{
    int rc = 0;
    pthread_rwlock_rdlock(&self->lock);
    bool known = false;
    size_t at = s_lower_bound(self, name, INT32_MIN);
    psd_shard_t *first =
        at < self->nshards && strcmp(psd_shard_spec(self->shards[at])->name, name) == 0 ? self->shards[at] : NULL;
    /* validate every id before copying anything */
    if (!first) {
        rc = zdist_error_set(err, -ENOENT, "variable '%s' has no shard on this ps", name);
        goto out;
    }
    if (nids > 0 && !ids) {
        rc = zdist_error_set(err, -EINVAL, "%zu ids announced but none given", nids);
        goto out;
    }
    if ((rc = psd_shard_check_buf(first, nids, buf_bytes, err)) < 0)
        goto out;
    psd_shard_t *cur = NULL;
    for (size_t i = 0; i < nids; i++) {
        if (!s_holds(cur, ids[i]) && !(cur = s_find_row(self, name, ids[i], &known))) {
            rc = zdist_error_set(err, -EINVAL, "id %" PRId64 " (at position %zu) of variable '%s' "
                                 "is not held by any shard on this ps", ids[i], i, name);
            goto out;
        }
    }
    /* Ids usually come in runs within one shard: look a shard up only when
       an id leaves the current one, and read the run under one read lock. */
    size_t row_bytes = psd_shard_row_bytes(first);
    for (size_t i = 0, end; i < nids; i = end) {
        cur = s_find_row(self, name, ids[i], &known);
        for (end = i + 1; end < nids && s_holds(cur, ids[end]); end++)
            ;
        psd_shard_read_ids(cur, ids + i, end - i, (char *) buf + i * row_bytes, (end - i) * row_bytes, NULL);
    }
out:
    pthread_rwlock_unlock(&self->lock);
    return rc;
}

void
psd_store_stats(psd_store_t *self, psd_store_stats_t *ret_stats)
{
    psd_store_stats_t st = {0};
    pthread_rwlock_rdlock(&self->lock);
    st.shards = self->nshards;
    for (size_t i = 0; i < self->nshards; i++) {
        psd_shard_t *s = self->shards[i];
        if (i == 0 || strcmp(psd_shard_spec(self->shards[i - 1])->name, psd_shard_spec(s)->name) != 0)
            st.variables++;
        st.value_bytes += psd_shard_value_bytes(s);
        uint64_t slot_bytes, spare_bytes;
        psd_shard_memory(s, &slot_bytes, &spare_bytes);
        st.slot_bytes += slot_bytes;
        st.spare_bytes += spare_bytes;
    }
    pthread_rwlock_unlock(&self->lock);
    *ret_stats = st;
}
