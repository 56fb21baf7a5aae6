/* worker_trainer_rows: a replica context's reads of rows (step.h read_rows, read_rows_many) — ids checked and deduplicated, one backend exchange for every variable. */
#ifndef WORKER_TRAINER_ROWS_H
#define WORKER_TRAINER_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "worker_strategy.h"
#include "worker_vars.h"
#include "zdist/error.h"

/* A replica's scratch for reads of rows, kept across steps (zeroed to start). */
typedef struct {
    int64_t *uniq; /* every variable's unique ids, one after the other (in first-seen order) */
    size_t uniq_cap;
    int32_t *where; /* [total] each id's place among its variable's unique ids */
    size_t where_cap;
    int64_t *hkeys; /* the open-addressing table that finds them (a power of two of slots) */
    int32_t *hvals; /* -1: empty */
    size_t hcap;
    float *rows; /* their rows, likewise */
    size_t rows_cap;
    /* [n] per variable read: its unique count, where its ids and rows start */
    int64_t *nu;
    const int64_t **uids;
    float **routs;
    int *uvars;
    size_t n_cap;
} worker_rows_t;

/* Reads variable vars[i]'s rows ids[i][0..counts[i]) into outs[i] (rows of
   its width, in the order asked) for i < n, every variable's distinct ids
   in one backend exchange (its read_rows_many, else a read_rows each).
   Checks everything before reading: -EINVAL for a bad handle or count,
   -ERANGE for an id outside a fixed variable (a dynamic one takes any),
   err saying which; a backend failure's code with err empty (the backend
   keeps why). */
int worker_rows_read(worker_rows_t *self, worker_backend_t *be, int replica, const worker_vars_t *vars, int n,
                     const int *var, const int64_t *const *ids, const int64_t *counts, float *const *outs,
                     zdist_error_t *err);
/* Frees the scratch (and zeroes it). */
void worker_rows_free(worker_rows_t *self);

#endif
