/* psd_ckpt_dyn: the dynamic parts of a job's checkpoint: one chained save per psd, a strict all-or-nothing
 * restore. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "psd_ckpt_dyn.h"
#include "psd_ckpt_state.h"
#include "psd_dyntable_ckpt.h"

struct psd_ckpt_dyn_restore_t {
    psd_shard_t **parts;
    psd_dyntable_t **tables;
    psd_dedup_table_t **dedups;
    int64_t *steps; /* pushes each part had applied (its shard step) */
    size_t n;
};

/* The job's dynamic parts here, in the store's order; NULL when out of memory. */
static psd_shard_t **
s_dyn_parts(psd_store_t *store, const char *job, size_t *ret_n)
{
    return psd_store_list_job(store, job, true, ret_n);
}

/* The part's exactly-once record, while its lock is held: {"dedup",
   "steps", "step": the pushes it applied}. */
static json_t *
s_state_json(psd_shard_t *part, const psd_shard_view_t *view)
{
    json_t *state = json_object();
    if (state) {
        json_object_set_new(state, "dedup", psd_ckpt_state_dedup_json(part, view, true));
        json_t *steps = psd_ckpt_state_ledger_json(view->ledger);
        if (steps)
            json_object_set_new(state, "steps", steps);
        json_object_set_new(state, "step", json_integer(view->step));
    }
    return state;
}

int
psd_ckpt_dyn_save(psd_store_t *store, const char *dir, int64_t step, int ps_task, const char *job,
                  int full_every, uint64_t *ret_bytes, zdist_error_t *err)
{
    size_t n = 0;
    psd_shard_t **parts = s_dyn_parts(store, job, &n);
    if (!parts)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    if (n == 0) {
        free(parts);
        return 0;
    }
    int rc = 0;
    psd_dyntable_ckpt_t *chain = psd_store_dyn_ckpt(store, job, full_every, err);
    psd_dyntable_ckpt_table_t *tables = calloc(n, sizeof *tables);
    if (!chain || !tables) {
        rc =
            chain ? zdist_error_set(err, -ENOMEM, "out of memory") : (err && err->code ? err->code : -ENOMEM);
        free(tables);
        free(parts);
        return rc;
    }
    /* Every part's write lock at once (in the store's order, the only
       place that holds more than one): the save evicts and marks them,
       and each state is the record of exactly the rows saved. */
    for (size_t i = 0; i < n; i++) {
        psd_shard_view_t view;
        tables[i].name = psd_shard_spec(parts[i])->name;
        tables[i].table = psd_shard_dyn_save_begin(parts[i], &view);
        tables[i].state = s_state_json(parts[i], &view);
        if (!tables[i].state)
            rc = zdist_error_set(err, -ENOMEM, "out of memory");
    }
    psd_dyntable_ckpt_saved_t saved = {0};
    if (rc == 0)
        rc = psd_dyntable_ckpt_save(chain, tables, n, dir, step, ps_task,
                                    psd_shard_spec(parts[0])->dynamic.num_ps, &saved, err);
    for (size_t i = 0; i < n; i++) {
        psd_shard_view_end(parts[i]);
        json_decref(tables[i].state);
    }
    if (rc == 0 && ret_bytes)
        *ret_bytes = saved.bytes;
    free(tables);
    free(parts);
    return rc;
}

void
psd_ckpt_dyn_abort(psd_ckpt_dyn_restore_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    psd_ckpt_dyn_restore_t *self = *self_p;
    for (size_t i = 0; i < self->n; i++) {
        if (self->tables)
            psd_dyntable_destroy(&self->tables[i]);
        if (self->dedups)
            psd_dedup_table_destroy(&self->dedups[i]);
    }
    free(self->steps);
    free(self->tables);
    free(self->dedups);
    free(self->parts);
    free(self);
    *self_p = NULL;
}

void
psd_ckpt_dyn_commit(psd_ckpt_dyn_restore_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    psd_ckpt_dyn_restore_t *self = *self_p;
    for (size_t i = 0; i < self->n; i++)
        psd_shard_dyn_replace(self->parts[i], &self->tables[i], &self->dedups[i], self->steps[i]);
    psd_ckpt_dyn_abort(self_p);
}

/* The exactly-once table of part i from the states its rows came from:
   its own task's when the checkpoint had as many ps tasks as now, else
   what every saving task's counts (its rows are gathered from all); its
   step the highest of theirs (as a fixed shard's). */
static int
s_part_dedup(psd_ckpt_dyn_restore_t *self, size_t i, const char *from, zdist_error_t *err)
{
    const psd_shard_spec_t *s = psd_shard_spec(self->parts[i]);
    json_t *states = NULL;
    int64_t dim = 0;
    int rc = psd_dyntable_ckpt_describe(from, s->name, &dim, &states, err);
    if (rc < 0)
        return rc;
    size_t nstates = json_array_size(states), lo = 0, hi = nstates;
    if (nstates == (size_t) s->dynamic.num_ps) {
        lo = (size_t) s->shard_index;
        hi = lo + 1;
    }
    psd_ckpt_state_t parsed[PSD_CKPT_STATE_MAX_SOURCES];
    const psd_ckpt_state_t *src[PSD_CKPT_STATE_MAX_SOURCES];
    size_t nsrc = 0;
    for (size_t k = lo; k < hi && rc == 0 && nsrc < PSD_CKPT_STATE_MAX_SOURCES; k++) {
        json_t *st = json_array_get(states, k);
        parsed[nsrc] = (psd_ckpt_state_t){0};
        json_int_t step = json_integer_value(json_object_get(st, "step"));
        if (step > self->steps[i])
            self->steps[i] = step;
        if (json_is_object(st)) {
            char where[4200];
            snprintf(where, sizeof where, "%s (dynamic table '%s')", from, s->name);
            rc = psd_ckpt_state_parse(json_object_get(st, "dedup"), json_object_get(st, "steps"),
                                      &parsed[nsrc], where, err);
        }
        if (rc == 0) {
            src[nsrc] = &parsed[nsrc];
            nsrc++;
        }
    }
    if (rc == 0)
        rc = psd_ckpt_state_intersect(src, hi - lo > nsrc ? 0 : nsrc, &self->dedups[i], err);
    for (size_t k = 0; k < nsrc; k++)
        psd_ckpt_state_clear(&parsed[k]);
    json_decref(states);
    return rc;
}

/* Reads the tables and records of self's parts from dir. */
static int
s_read(psd_ckpt_dyn_restore_t *self, psd_store_t *store, const char *dir, const char *job, int64_t step,
       zdist_error_t *err)
{
    psd_dyntable_ckpt_table_t *tables = calloc(self->n, sizeof *tables);
    if (!tables)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < self->n && rc == 0; i++) {
        tables[i].name = psd_shard_spec(self->parts[i])->name;
        tables[i].table = self->tables[i] = psd_shard_dyn_table_new(self->parts[i], err);
        if (!tables[i].table)
            rc = err && err->code ? err->code : -ENOMEM;
    }
    const psd_shard_spec_t *s0 = psd_shard_spec(self->parts[0]);
    psd_dyntable_ckpt_t *chain =
        rc == 0 ? psd_store_dyn_ckpt(store, job, 0, err) : NULL;
    if (rc == 0 && !chain)
        rc = err && err->code ? err->code : -ENOMEM;
    psd_dyntable_ckpt_restored_t r = {0};
    /* Strict (flags 0): a broken delta fails this checkpoint, and the
       coordinator walks back to an older one that is intact. Falling back
       here to the chain's full would restore the dynamic tables at
       another step than the fixed shards. */
    if (rc == 0)
        rc = psd_dyntable_ckpt_restore(chain, tables, self->n, dir, s0->shard_index, s0->dynamic.num_ps, 0,
                                       &r, err);
    if (rc == -ENOENT)
        zdist_error_prefix(err, "job '%s' has dynamic tables but checkpoint %s does not hold them",
                           job ? job : "", dir);
    if (rc == 0 && r.step != step)
        rc = zdist_error_set(err, -EBADMSG,
                             "checkpoint %s: its dynamic tables are at step %lld, its variables at "
                             "step %lld",
                             dir, (long long) r.step, (long long) step);
    for (size_t i = 0; i < self->n && rc == 0; i++)
        rc = s_part_dedup(self, i, r.from, err);
    free(tables);
    return rc;
}

int
psd_ckpt_dyn_prepare(psd_store_t *store, const char *dir, const char *job, int64_t step,
                     psd_ckpt_dyn_restore_t **ret, zdist_error_t *err)
{
    *ret = NULL;
    psd_ckpt_dyn_restore_t *self = calloc(1, sizeof *self);
    if (!self || !(self->parts = s_dyn_parts(store, job, &self->n))) {
        free(self);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    if (self->n == 0) {
        psd_ckpt_dyn_abort(&self);
        return 0;
    }
    self->tables = calloc(self->n, sizeof *self->tables);
    self->dedups = calloc(self->n, sizeof *self->dedups);
    self->steps = calloc(self->n, sizeof *self->steps);
    int rc = self->tables && self->dedups && self->steps ? s_read(self, store, dir, job, step, err)
                                                         : zdist_error_set(err, -ENOMEM, "out of memory");
    if (rc < 0) {
        psd_ckpt_dyn_abort(&self);
        /* Anything but memory (this psd's, or its --max-bytes while the
           old tables are still held) is a checkpoint that cannot be
           restored: DATA_LOSS, so the coordinator tries an older one. */
        if (rc == -ENOMEM || rc == -ENOSPC)
            return rc;
        return err ? (err->code = -EBADMSG) : -EBADMSG;
    }
    *ret = self;
    return 0;
}
