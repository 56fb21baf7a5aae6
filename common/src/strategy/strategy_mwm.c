/* zdist strategy_mwm: multi_worker_mirrored — the ring formed from the
   cluster, and every collective as this worker's replicas combined, then the
   ring. */
#include "strategy_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zdist/collective.h"

/* MultiWorkerMirroredStrategy from TFConfigClusterResolver: the ranks are
   the cluster's chief then its workers (id_in_cluster), each at its task's
   address; this task binds its own and connects to the next, with the
   library's ring calls (those a zdist-worker session makes). */
int
strategy_ring_from_cluster(zdist_strategy_object_t *self, const zdist_strategy_spec_t *spec, zdist_error_t *err)
{
    const zdist_cluster_t *cl = spec->cluster;
    int rc = zdist_cluster_validate(cl, ZDIST_STRATEGY_MULTI_WORKER_MIRRORED, err);
    if (rc < 0) {
        zdist_error_prefix(err, "strategy spec: cluster");
        return rc;
    }
    const char *type = zdist_cluster_task_type(cl);
    if (!type || (strcmp(type, "chief") != 0 && strcmp(type, "worker") != 0) || !zdist_cluster_has_id_in_cluster(cl))
        return zdist_error_set(err, -EINVAL,
                               "strategy spec: multi_worker_mirrored needs the cluster's task (TF_CONFIG's "
                               "\"task\") to be the chief or a worker, not %s; set task.type and task.index",
                               type ? type : "none");
    int size = zdist_cluster_worker_count(cl), rank = zdist_cluster_id_in_cluster(cl);
    int chiefs = (int) zdist_cluster_num_tasks(cl, "chief");
    if (rank < 0 || rank >= size)
        return zdist_error_set(err, -EINVAL,
                               "strategy spec: cluster: this task's id in the cluster, %d, is not a ring rank "
                               "0..%d; number the chief and worker tasks from 0 without gaps",
                               rank, size - 1);
    self->workers = size;
    self->rank = rank;
    if (size == 1)
        return 0; /* one worker: no ring */
    char(*eps)[300] = calloc((size_t) size, sizeof *eps);
    const char **epp = calloc((size_t) size, sizeof *epp);
    if (!eps || !epp) {
        free(eps);
        free(epp);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    for (int r = 0; r < size && rc == 0; r++) {
        const char *job = r < chiefs ? "chief" : "worker";
        int index = 0;
        rc = zdist_cluster_job_task(cl, job, (size_t) (r < chiefs ? r : r - chiefs), &index, NULL);
        if (rc == 0)
            rc = zdist_cluster_endpoint(cl, job, index, eps[r], sizeof eps[r]);
        if (rc < 0)
            zdist_error_set(err, -EINVAL, "strategy spec: cluster: no address for ring rank %d (%s)", r, job);
        epp[r] = eps[r];
    }
    char bind[300];
    if (rc == 0 && (rc = zdist_cluster_bind_endpoint(cl, bind, sizeof bind)) < 0)
        zdist_error_set(err, -EINVAL, "strategy spec: cluster: this task has no address to bind its end of the ring");
    if (rc == 0) {
        zdist_comm_config_t cc = {.rank = rank, .size = size, .bind = bind, .timeout_ms = spec->collective_timeout_ms};
        self->own_comm = zdist_comm_new(&cc, err);
        if (!self->own_comm)
            rc = err && err->code ? err->code : -EINVAL;
        else if ((rc = zdist_comm_connect(self->own_comm, epp, err)) < 0)
            zdist_comm_destroy(&self->own_comm);
        if (rc < 0)
            zdist_error_prefix(err, "strategy spec: multi_worker_mirrored ring rank %d of %d at %s", rank, size,
                               eps[rank]);
    }
    free(eps);
    free(epp);
    self->comm = self->own_comm;
    return rc;
}
int
strategy_ring_dtype(const char *what, zdist_dtype_t dtype, zdist_error_t *err)
{
    if (dtype == ZDIST_DTYPE_FLOAT32)
        return 0;
    return zdist_error_set(
        err, -ENOTSUP,
        "%s: multi_worker_mirrored combines float32 values across workers (the ring's dtype), "
        "not %s",
        what, zdist_dtype_name(dtype));
}

static int
s_ring_sum(zdist_strategy_object_t *s, float *data, int64_t len, zdist_error_t *err)
{
    float *p = data;
    return zdist_comm_all_reduce(s->comm, ZDIST_REDUCE_SUM, &p, &len, 1, 0, err);
}

/* One value on the wire of s_mw_all_values: its dtype, rank, dims and byte
   count, then its bytes padded to 8. */
typedef struct {
    int32_t dtype;
    int32_t rank;
    int64_t dims[ZDIST_MAX_RANK];
    uint64_t nbytes;
} s_value_head_t;

static size_t
s_pad8(size_t n)
{
    return (n + 7) & ~(size_t) 7;
}

/* Every replica's value of every worker, in replica-id order (worker 0's
   local replicas first): each worker's n values go round the ring whole,
   with their dtypes and shapes, so that any dtype and any shape can then be
   combined exactly as one worker holding every replica would.
   *ret_all[workers * n] points into *ret_buf (the caller frees both). */
static int
s_mw_all_values(zdist_strategy_object_t *s, const zdist_tensor_t *values, int n, zdist_tensor_t **ret_all,
                void **ret_buf, zdist_error_t *err)
{
    size_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += sizeof(s_value_head_t) + s_pad8(values[i].nbytes);
    char *mine = calloc(1, bytes ? bytes : 1);
    if (!mine)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        s_value_head_t h = {.dtype = (int32_t) values[i].dtype,
                            .rank = values[i].shape.rank,
                            .nbytes = values[i].nbytes};
        for (int d = 0; d < values[i].shape.rank && d < ZDIST_MAX_RANK; d++)
            h.dims[d] = values[i].shape.dims[d];
        memcpy(mine + off, &h, sizeof h);
        off += sizeof h;
        if (values[i].nbytes)
            memcpy(mine + off, values[i].data, values[i].nbytes);
        off += s_pad8(values[i].nbytes);
    }
    void *all = NULL;
    int64_t total = 0;
    int rc = zdist_comm_all_gather(s->comm, mine, (int64_t) bytes, 1, &all, &total, NULL, 0, err);
    free(mine);
    if (rc < 0)
        return rc;
    int count = s->workers * n;
    zdist_tensor_t *vals = calloc((size_t) count, sizeof *vals);
    if (!vals) {
        free(all);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    off = 0;
    for (int i = 0; i < count; i++) {
        s_value_head_t h;
        if (off + sizeof h > (size_t) total) {
            rc = -EPROTO;
            break;
        }
        memcpy(&h, (char *) all + off, sizeof h);
        off += sizeof h;
        size_t want = 0;
        zdist_shape_t shape;
        if (h.rank < 0 || h.rank > ZDIST_MAX_RANK || zdist_shape_init(&shape, h.rank, h.dims) < 0 ||
            zdist_tensor_byte_size((zdist_dtype_t) h.dtype, &shape, &want) < 0 || want != h.nbytes ||
            off + s_pad8(h.nbytes) > (size_t) total) {
            rc = -EPROTO;
            break;
        }
        vals[i] = (zdist_tensor_t){.dtype = (zdist_dtype_t) h.dtype,
                                   .shape = shape,
                                   .data = (char *) all + off,
                                   .nbytes = h.nbytes};
        off += s_pad8(h.nbytes);
    }
    if (rc == 0 && off != (size_t) total)
        rc = -EPROTO;
    if (rc < 0) {
        free(vals);
        free(all);
        return zdist_error_set(err, rc,
                               "the workers' values do not agree: every worker must pass one value per local "
                               "replica (the same number of replicas on every worker)");
    }
    *ret_all = vals;
    *ret_buf = all;
    return 0;
}

/* Strategy.reduce over every worker: values[n] are this worker's replicas'. */
int
strategy_mw_reduce(zdist_strategy_object_t *s, zdist_reduce_op_t op, const zdist_tensor_t *values, int n,
                   const int *axes, int num_axes, zdist_tensor_t *ret, zdist_error_t *err)
{
    int rc;
    if (values[0].dtype != ZDIST_DTYPE_FLOAT32) {
        /* other dtypes: every replica's value, reduced here as one worker
           with all the replicas reduces them (MEAN of integers a float64) */
        zdist_tensor_t *all = NULL;
        void *buf = NULL;
        if ((rc = s_mw_all_values(s, values, n, &all, &buf, err)) < 0)
            return rc;
        rc = zdist_distribute_reduce_axes(op, all, s->workers * n, axes, num_axes, ret, err);
        free(all);
        free(buf);
        return rc;
    }
    zdist_tensor_t loc;
    double local_count = 0;
    if ((rc = zdist_distribute_reduce_count(op, values, n, axes, num_axes, &local_count, err)) < 0 ||
        (rc = zdist_distribute_reduce_axes(ZDIST_REDUCE_SUM, values, n, axes, num_axes, &loc, err)) < 0)
        return rc;
    int64_t len = (int64_t) (loc.nbytes / sizeof(float));
    double count = s->total;
    if (axes) {
        /* MEAN divides by the reduced axes' sizes over every replica of every worker */
        float *buf = malloc((size_t) (len + 1) * sizeof *buf);
        if (!buf) {
            free(loc.data);
            return zdist_error_set(err, -ENOMEM, "out of memory");
        }
        memcpy(buf, loc.data, loc.nbytes);
        buf[len] = (float) local_count;
        rc = s_ring_sum(s, buf, len + 1, err);
        if (rc == 0) {
            memcpy(loc.data, buf, loc.nbytes);
            count = buf[len];
        }
        free(buf);
    } else {
        rc = s_ring_sum(s, loc.data, len, err);
    }
    if (rc < 0) {
        free(loc.data);
        return rc;
    }
    if (op == ZDIST_REDUCE_MEAN)
        for (int64_t i = 0; i < len; i++)
            ((float *) loc.data)[i] = (float) (((float *) loc.data)[i] / count);
    *ret = loc;
    return 0;
}

/* Strategy.gather over every worker. */
int
strategy_mw_gather(zdist_strategy_object_t *s, const zdist_tensor_t *values, int n, int axis, zdist_tensor_t *ret,
            zdist_error_t *err)
{
    int rank = values[0].shape.rank, rc;
    if ((axis < 0 ? axis + rank : axis) != 0) {
        /* along another axis the workers' blocks interleave: every replica's
           value, concatenated here in replica order as one worker would */
        zdist_tensor_t *all = NULL;
        void *buf = NULL;
        if ((rc = s_mw_all_values(s, values, n, &all, &buf, err)) < 0)
            return rc;
        rc = zdist_distribute_gather(all, s->workers * n, axis, ret, err);
        free(all);
        free(buf);
        return rc;
    }
    zdist_tensor_t loc;
    rc = zdist_distribute_gather(values, n, axis, &loc, err);
    if (rc < 0)
        return rc;
    int64_t inner = 1;
    for (int d = 1; d < loc.shape.rank; d++)
        inner *= loc.shape.dims[d];
    size_t row_bytes = (size_t) inner * zdist_dtype_size(loc.dtype);
    void *all = NULL;
    int64_t rows = 0;
    rc = zdist_comm_all_gather(s->comm, loc.data, loc.shape.dims[0], row_bytes, &all, &rows, NULL, 0, err);
    free(loc.data);
    if (rc < 0)
        return rc;
    loc.shape.dims[0] = rows;
    loc.data = all;
    loc.nbytes = (size_t) rows * row_bytes;
    *ret = loc;
    return 0;
}

/* The one value an ON_WRITE variable takes from every replica's write
   (s->slots hold this worker's), for a cross-replica write of it. */
int
strategy_mw_combine_write(zdist_strategy_object_t *s, const zdist_strategy_var_t *var, zdist_tensor_t *ret,
                   zdist_error_t *err)
{
    int rc = zdist_distribute_check_replica_write(var->sync, var->agg, var->dtype, s->total, err);
    if (rc < 0)
        return rc;
    if (var->agg == ZDIST_AGG_SUM || var->agg == ZDIST_AGG_MEAN)
        return strategy_mw_reduce(s, var->agg == ZDIST_AGG_SUM ? ZDIST_REDUCE_SUM : ZDIST_REDUCE_MEAN, s->slots,
                           s->replicas, NULL, 0, ret, err);
    /* ONLY_FIRST_REPLICA: values_util.apply_aggregation takes
       experimental_local_results(value)[0], this worker's first replica's
       value (TF does not send it to the other workers) */
    if (s->slots[0].nbytes != var->nbytes || s->slots[0].dtype != var->dtype)
        return zdist_error_set(
            err, -EINVAL, "assign to %s: the value's dtype or size differs from the variable's", var->name);
    zdist_tensor_t v = var->copies[0];
    v.data = malloc(var->nbytes ? var->nbytes : 1);
    if (!v.data)
        return zdist_error_set(err, -ENOMEM, "out of memory");
    memcpy(v.data, s->slots[0].data, var->nbytes);
    *ret = v;
    return 0;
}

/* reduce_to / batch_reduce_to over every worker: every pair checked (float32,
   destinations of the reduced shape) before the first ring call. */
int
strategy_mw_batch_reduce_to(zdist_strategy_object_t *s, zdist_reduce_op_t op, const zdist_reduce_pair_t *pairs,
                     int n, zdist_error_t *err)
{
    if (!pairs && n > 0)
        return zdist_error_set(err, -EINVAL, "batch_reduce_to: pairs is NULL");
    for (int i = 0; i < n; i++) {
        const zdist_reduce_pair_t *p = &pairs[i];
        if (p->values && p->values[0].dtype != ZDIST_DTYPE_FLOAT32 && op == ZDIST_REDUCE_MEAN &&
            p->values[0].dtype != ZDIST_DTYPE_FLOAT64)
            return zdist_error_set(err, -EINVAL,
                                   "reduce_to: pair %d: MEAN of %s values is a float64, which does not fit "
                                   "their destination; reduce with SUM or use float values",
                                   i, zdist_dtype_name(p->values[0].dtype));
        for (int d = 0; d < p->num_dests; d++)
            if (!p->dests || p->dests[d].dtype != p->values[0].dtype || !p->dests[d].data ||
                !zdist_shape_equal(&p->dests[d].shape, &p->values[0].shape))
                return zdist_error_set(
                    err, -EINVAL,
                    "reduce_to: pair %d, destination %d: give a buffer of the values' dtype and "
                    "shape",
                    i, d);
    }
    for (int i = 0; i < n; i++) {
        zdist_tensor_t v;
        int rc = strategy_mw_reduce(s, op, pairs[i].values, pairs[i].num_replicas, NULL, 0, &v, err);
        if (rc < 0)
            return rc;
        for (int d = 0; d < pairs[i].num_dests; d++)
            memcpy(pairs[i].dests[d].data, v.data, v.nbytes);
        free(v.data);
    }
    return 0;
}
