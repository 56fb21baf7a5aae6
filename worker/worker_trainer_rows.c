/* worker_trainer_rows: a replica context's reads of rows — ids checked and deduplicated, one backend exchange for every variable. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "worker_trainer_rows.h"

/* Grows *p (elements of elem bytes, capacity *cap) to need. */
static int
s_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    void *q = realloc(*p, need * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = need;
    return 0;
}

static int
s_reserve(worker_rows_t *self, size_t n)
{
    if (n <= self->n_cap)
        return 0;
    size_t c;
    c = self->n_cap;
    if (s_grow((void **)&self->nu, &c, n, sizeof *self->nu) < 0)
        return -ENOMEM;
    c = self->n_cap;
    if (s_grow((void **)&self->uids, &c, n, sizeof *self->uids) < 0)
        return -ENOMEM;
    c = self->n_cap;
    if (s_grow((void **)&self->routs, &c, n, sizeof *self->routs) < 0)
        return -ENOMEM;
    c = self->n_cap;
    if (s_grow((void **)&self->uvars, &c, n, sizeof *self->uvars) < 0)
        return -ENOMEM;
    self->n_cap = n;
    return 0;
}

/* Every handle, count and id, before anything is read; *ret_total: the ids. */
static int
s_check(const worker_vars_t *vars, int n, const int *var, const int64_t *const *ids, const int64_t *counts,
        int64_t *ret_total, zdist_error_t *err)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (var[i] < 0 || var[i] >= vars->n)
            return zdist_error_set(err, -EINVAL, "variable handle %d is not one of the model's %d", var[i], vars->n);
        if (counts[i] < 0)
            return zdist_error_set(err, -EINVAL, "read_rows: negative count %lld", (long long)counts[i]);
        const worker_var_t *v = &vars->vars[var[i]];
        for (int64_t k = 0; k < counts[i] && !v->dynamic; k++) /* a dynamic table takes any int64 id */
            if (ids[i][k] < 0 || ids[i][k] >= v->rows)
                return zdist_error_set(err, -ERANGE, "read_rows: id %lld is outside variable '%s' (%lld rows)",
                                       (long long)ids[i][k], v->name, (long long)v->rows);
        total += counts[i];
    }
    *ret_total = total;
    return 0;
}

/* ids[0..count) deduplicated into u (first-seen order; returns how many),
   where[k] the place of ids[k] in u: a hash table, not a sort and a
   binary search per id (which took an eighth of a DLRM worker's time). */
static int64_t
s_unique(worker_rows_t *self, const int64_t *ids, int64_t count, int64_t *u, int32_t *where)
{
    size_t cap = 16;
    while (cap < (size_t)count * 2)
        cap *= 2;
    memset(self->hvals, 0xff, cap * sizeof *self->hvals);
    int shift = 64 - __builtin_ctzll(cap);
    int64_t nu = 0;
    for (int64_t k = 0; k < count; k++) {
        size_t h = (size_t)(((uint64_t)ids[k] * 0x9E3779B97F4A7C15ull) >> shift);
        while (self->hvals[h] >= 0 && self->hkeys[h] != ids[k])
            h = (h + 1) & (cap - 1);
        if (self->hvals[h] < 0) {
            self->hkeys[h] = ids[k];
            self->hvals[h] = (int32_t)nu;
            u[nu++] = ids[k];
        }
        where[k] = self->hvals[h];
    }
    return nu;
}

/* Deduplicates each variable's ids into self->uniq (each distinct row
   travels, or is copied, once), keeping where each id's row is; lays the
   rows out after. */
static int
s_dedup(worker_rows_t *self, const worker_vars_t *vars, int n, const int *var, const int64_t *const *ids,
        const int64_t *counts, int64_t total, int *ret_m)
{
    int64_t most = 0;
    for (int i = 0; i < n; i++)
        most = counts[i] > most ? counts[i] : most;
    if (most > INT32_MAX / 2)
        return -E2BIG;
    size_t slots = 16, hc = self->hcap; /* s_unique's table for the longest list */
    while (slots < (size_t)most * 2)
        slots *= 2;
    if (s_grow((void **)&self->uniq, &self->uniq_cap, (size_t)total, sizeof *self->uniq) < 0 ||
        s_grow((void **)&self->where, &self->where_cap, (size_t)total, sizeof *self->where) < 0 ||
        s_grow((void **)&self->hkeys, &hc, slots, sizeof *self->hkeys) < 0 ||
        s_grow((void **)&self->hvals, &self->hcap, slots, sizeof *self->hvals) < 0)
        return -ENOMEM;
    int64_t at = 0, floats = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (counts[i] == 0)
            continue;
        int64_t *u = self->uniq + at;
        int64_t nu = s_unique(self, ids[i], counts[i], u, self->where + at);
        self->uvars[m] = var[i];
        self->uids[m] = u;
        self->nu[m] = nu;
        floats += nu * vars->vars[var[i]].width;
        at += counts[i];
        m++;
    }
    if (s_grow((void **)&self->rows, &self->rows_cap, (size_t)floats, sizeof *self->rows) < 0)
        return -ENOMEM;
    floats = 0;
    for (int j = 0; j < m; j++) {
        self->routs[j] = self->rows + floats;
        floats += self->nu[j] * vars->vars[self->uvars[j]].width;
    }
    *ret_m = m;
    return 0;
}

int
worker_rows_read(worker_rows_t *self, worker_backend_t *be, int replica, const worker_vars_t *vars, int n,
                 const int *var, const int64_t *const *ids, const int64_t *counts, float *const *outs,
                 zdist_error_t *err)
{
    if (n < 0 || (n > 0 && (!var || !ids || !counts || !outs)))
        return zdist_error_set(err, -EINVAL, "read_rows_many: bad variable list");
    int64_t total = 0;
    int m = 0, rc = s_check(vars, n, var, ids, counts, &total, err);
    if (rc < 0)
        return rc;
    if (total == 0)
        return 0;
    if (s_reserve(self, (size_t)n) < 0)
        return -ENOMEM;
    if ((rc = s_dedup(self, vars, n, var, ids, counts, total, &m)) < 0)
        return rc == -E2BIG ? zdist_error_set(err, rc, "read_rows_many: %lld ids for one variable in one read",
                                              (long long)total)
                            : rc;
    if (be->ops->read_rows_many)
        rc = be->ops->read_rows_many(be, replica, m, self->uvars, self->uids, self->nu, self->routs);
    for (int j = 0; !be->ops->read_rows_many && j < m && rc == 0; j++)
        rc = be->ops->read_rows(be, replica, self->uvars[j], self->uids[j], self->nu[j], self->routs[j]);
    if (rc < 0)
        return rc;
    int64_t at = 0;
    for (int i = 0, j = 0; i < n; i++) {
        if (counts[i] == 0)
            continue;
        int64_t width = vars->vars[var[i]].width;
        for (int64_t k = 0; k < counts[i]; k++)
            memcpy(outs[i] + k * width, self->routs[j] + (int64_t)self->where[at + k] * width,
                   (size_t)width * sizeof(float));
        at += counts[i];
        j++;
    }
    return 0;
}

void
worker_rows_free(worker_rows_t *self)
{
    free(self->uniq);
    free(self->where);
    free(self->hkeys);
    free(self->hvals);
    free(self->rows);
    free(self->nu);
    free(self->uids);
    free(self->routs);
    free(self->uvars);
    memset(self, 0, sizeof *self);
}
