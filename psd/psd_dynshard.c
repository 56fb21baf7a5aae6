/* psd_dynshard: a dynamic embedding table's part as a shard: its psd_dyntable behind the shard's lock and exactly-once table.

   A part is a shard like any other to the store (named, dropped with its
   job, listed in stats), so the server's create, pull_rows, push and
   push_pull paths reach it as they reach a fixed table; only what it holds
   differs. Admission counts occurrences at the push, not at the lookup:
   the push is what the step ledger deduplicates (the worker's lookup also
   sends each distinct id once), so a retried or re-run step counts, creates
   and applies nothing twice. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "psd_shard_impl.h"
#include "zdist/partition.h"

bool
psd_shard_is_dynamic(const psd_shard_t *self)
{
    return self->dyn != NULL;
}

/* The table's config from the part's spec and an optimizer. */
static psd_dyntable_config_t
s_config(const psd_shard_t *self, const char *init_name, const zdist_optim_config_t *optim)
{
    const psd_shard_spec_t *s = &self->spec;
    return (psd_dyntable_config_t){
        .name = init_name ? init_name : s->name,
        .dim = s->shape.dims[1],
        .seed = s->seed,
        .init = s->init,
        .optim = *optim,
        .min_count = s->dynamic.min_count,
        .evict_after_steps = s->dynamic.evict_after_steps,
        .evict_l2_below = s->dynamic.evict_l2_below,
        .budget = s->budget,
    };
}

/* A new, empty table of the part's config: rows drawn for init_name (the
   create's; a later table keeps its predecessor's, so rows admitted after
   a restore or an optimizer change start as they would have before), ids
   without a row answered with the spec's default_value in every element. */
static psd_dyntable_t *
s_table_new(const psd_shard_t *self, const char *init_name, const zdist_optim_config_t *optim, zdist_error_t *err)
{
    psd_dyntable_config_t cfg = s_config(self, init_name, optim);
    float *defval = NULL;
    if (self->spec.dynamic.default_value != 0) {
        if (!(defval = malloc((size_t) cfg.dim * sizeof *defval))) {
            zdist_error_set(err, -ENOMEM, "out of memory");
            return NULL;
        }
        for (int64_t i = 0; i < cfg.dim; i++)
            defval[i] = (float) self->spec.dynamic.default_value;
        cfg.default_value = defval;
    }
    psd_dyntable_t *t = psd_dyntable_new(&cfg, err);
    free(defval);
    return t;
}

int
psd_shard_dyn_open(psd_shard_t *self, const psd_shard_spec_t *spec, zdist_error_t *err)
{
    if (spec->dtype != ZDIST_DTYPE_FLOAT32 || spec->shape.rank != 2 || spec->shape.dims[0] != 0 || spec->rows != 0
        || spec->dynamic.num_ps < 1 || spec->shard_index >= spec->dynamic.num_ps)
        return zdist_error_set(err, -EINVAL, "variable '%s': a dynamic table's part is float32 [0, dim], part %d of "
                               "%d ps tasks", spec->name, (int) spec->shard_index, (int) spec->dynamic.num_ps);
    if (!(self->dyn = s_table_new(self, spec->init_name, &self->optim, err))) {
        zdist_error_prefix(err, "variable '%s'", spec->name);
        return err && err->code ? err->code : -ENOMEM;
    }
    return 0;
}

int
psd_shard_dyn_set_optimizer(psd_shard_t *self, const zdist_optim_config_t *cfg, zdist_error_t *err)
{
    int rc = 0;
    pthread_rwlock_wrlock(&self->lock);
    psd_dyntable_stats_t st;
    psd_dyntable_stats(self->dyn, &st);
    /* A job sets its optimizer before it creates its variables; a table
       already trained keeps the slots its rows hold. */
    if (memcmp(cfg, &self->optim, sizeof *cfg) != 0 && st.rows == 0 && st.pending == 0) {
        psd_dyntable_t *fresh = s_table_new(self, psd_dyntable_name(self->dyn), cfg, err);
        if (fresh) {
            psd_dyntable_destroy(&self->dyn);
            self->dyn = fresh;
            self->optim = *cfg;
        } else {
            rc = err && err->code ? err->code : -ENOMEM;
        }
    }
    pthread_rwlock_unlock(&self->lock);
    return rc;
}

/* Every id lives on this part: zdist_partition_id_ps (id, num_ps) is its index. */
static int
s_check_ids(const psd_shard_t *self, const int64_t *ids, size_t nids, zdist_error_t *err)
{
    const psd_shard_spec_t *s = &self->spec;
    if (nids > 0 && !ids)
        return zdist_error_set(err, -EINVAL, "%zu ids announced but none given", nids);
    for (size_t i = 0; i < nids; i++) {
        int ps = zdist_partition_id_ps(ids[i], s->dynamic.num_ps);
        if (ps != s->shard_index)
            return zdist_error_set(err, -EINVAL, "id %" PRId64 " (at position %zu) of dynamic table '%s' lives on "
                                   "ps task %d of %d (zdist_partition_id_ps), not on part %d",
                                   ids[i], i, s->name, ps, (int) s->dynamic.num_ps, (int) s->shard_index);
    }
    return 0;
}

int
psd_shard_lookup(psd_shard_t *self, const int64_t *ids, size_t nids, float *out, size_t out_bytes,
                 zdist_error_t *err)
{
    int rc = s_check_ids(self, ids, nids, err);
    if (rc < 0 || (rc = psd_shard_check_buf(self, nids, out_bytes, err)) < 0)
        return rc;
    /* The write lock: a lookup reuses the table's scratch. */
    pthread_rwlock_wrlock(&self->lock);
    psd_dyntable_lookup_eval(self->dyn, ids, nids, out);
    pthread_rwlock_unlock(&self->lock);
    return 0;
}

int
psd_shard_dyn_check_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err)
{
    const psd_shard_spec_t *s = &self->spec;
    if (w->op != PSD_OP_APPLY_SPARSE)
        return zdist_error_set(err, -EINVAL, "'%s' is a dynamic table: it takes sparse pushes (gradient rows by id) "
                               "only", s->name);
    if (w->dtype != ZDIST_DTYPE_FLOAT32)
        return zdist_error_set(err, -EINVAL, "push to dynamic table '%s': expected float32 gradients, got %s",
                               s->name, zdist_dtype_name(w->dtype));
    int rc = s_check_ids(self, w->ids, w->nids, err);
    if (rc < 0)
        return rc;
    size_t need = 0;
    if (psd_shard_rows_bytes(self, w->nids, &need) < 0 || need != w->nbytes || (need > 0 && !w->data))
        return zdist_error_set(err, -EINVAL, "push to dynamic table '%s': expected [%zu, %" PRId64 "] float32 = %zu "
                               "bytes, got %zu bytes", s->name, w->nids, self->width, need, w->data ? w->nbytes : 0);
    return 0;
}

int
psd_shard_dyn_write(psd_shard_t *self, const psd_write_t *w, zdist_error_t *err)
{
    int rc = psd_shard_dyn_check_write(self, w, err);
    if (rc < 0)
        return rc;
    psd_dedup_key_t key = {.job_step = w->job_step, .step_write = w->step_write,
                           .client_id = w->client_id, .sequence = w->sequence};
    pthread_rwlock_wrlock(&self->lock);
    rc = psd_dedup_admit(self->dedup, &key);
    if (rc == 0) {
        /* Count first, so the gradients of the step that admits an id
           train its new row (its lookup answered the default: the row did
           not exist yet), as DeepRec's admitting lookup would. */
        psd_dyntable_count(self->dyn, w->ids, w->nids, w->job_step);
        rc = psd_dyntable_apply(self->dyn, w->ids, w->nids, w->data, w->job_step);
        /* Recorded even when the apply found no memory for its scratch:
           the occurrences are counted, and counting them again on a retry
           would admit early. The error tells the worker its gradients were
           lost. */
        psd_dedup_record(self->dedup, &key);
        self->step++;
    }
    pthread_rwlock_unlock(&self->lock);
    if (rc == -ENOMEM)
        zdist_error_set(err, rc, "apply (sparse) on dynamic table '%s': out of memory", self->spec.name);
    return rc;
}

void
psd_shard_dyn_stats(psd_shard_t *self, psd_dyntable_stats_t *ret_stats)
{
    pthread_rwlock_rdlock(&self->lock);
    psd_dyntable_stats(self->dyn, ret_stats);
    pthread_rwlock_unlock(&self->lock);
}

size_t
psd_shard_dyn_evict(psd_shard_t *self, uint64_t step)
{
    pthread_rwlock_wrlock(&self->lock);
    size_t n = psd_dyntable_evict(self->dyn, step);
    pthread_rwlock_unlock(&self->lock);
    return n;
}

bool
psd_shard_dyn_refusal_news(psd_shard_t *self)
{
    psd_dyntable_stats_t st;
    psd_shard_dyn_stats(self, &st);
    if (st.refused == 0 || self->dyn_refusal_told)
        return false;
    self->dyn_refusal_told = true;
    return true;
}

psd_dyntable_t *
psd_shard_dyn_save_begin(psd_shard_t *self, psd_shard_view_t *ret_view)
{
    pthread_rwlock_wrlock(&self->lock);
    *ret_view = (psd_shard_view_t){
        .optim = self->optim,
        .step = self->step,
        .ndedup = psd_dedup_table_size(self->dedup),
        .ledger = psd_dedup_table_ledger(self->dedup),
    };
    return self->dyn;
}

psd_dyntable_t *
psd_shard_dyn_table_new(psd_shard_t *self, zdist_error_t *err)
{
    pthread_rwlock_rdlock(&self->lock);
    psd_dyntable_t *t = s_table_new(self, psd_dyntable_name(self->dyn), &self->optim, err);
    pthread_rwlock_unlock(&self->lock);
    return t;
}

void
psd_shard_dyn_replace(psd_shard_t *self, psd_dyntable_t **table_p, psd_dedup_table_t **dedup_p, int64_t step)
{
    psd_dyntable_t *table = *table_p;
    psd_dedup_table_t *dedup = *dedup_p;
    *table_p = NULL;
    *dedup_p = NULL;
    pthread_rwlock_wrlock(&self->lock);
    psd_dyntable_t *old = self->dyn;
    self->dyn = table;
    psd_dedup_table_t *mine = self->dedup;
    self->dedup = dedup;
    self->step = step;
    self->dyn_refusal_told = false;
    pthread_rwlock_unlock(&self->lock);
    /* freed outside the lock */
    psd_dyntable_destroy(&old);
    psd_dedup_table_destroy(&mine);
}
