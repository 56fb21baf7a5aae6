/* worker_client: the worker protocol's client — requests from C structs, pipelined, replies decoded into C
 * structs. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/worker_client.h"
#include "zdist/worker_service.h"

struct zdist_worker_client_t {
    zdist_rpc_client_t *rpc;
};

zdist_worker_client_t *
zdist_worker_client_new(const char *endpoint, const zdist_rpc_client_options_t *opts, zdist_error_t *err)
{
    zdist_worker_client_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->rpc = zdist_rpc_client_new(endpoint, opts, err);
    if (!self->rpc)
        zdist_worker_client_destroy(&self);
    return self;
}

void
zdist_worker_client_destroy(zdist_worker_client_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_rpc_client_destroy(&(*self_p)->rpc);
    free(*self_p);
    *self_p = NULL;
}

const char *
zdist_worker_client_endpoint(const zdist_worker_client_t *self)
{
    return zdist_rpc_client_endpoint(self->rpc);
}

size_t
zdist_worker_client_in_flight(const zdist_worker_client_t *self)
{
    return zdist_rpc_client_in_flight(self->rpc);
}

/* ---- requests ---- */

/* Sends request m (taken; NULL: it could not be made). */
static int
s_send(zdist_worker_client_t *self, zdist_msg_t *m, int64_t timeout_ms, uint64_t *ret_id)
{
    if (!m)
        return -ENOMEM;
    uint64_t id = 0;
    int rc = zdist_rpc_client_send(self->rpc, &m, timeout_ms, &id);
    if (rc == 0 && ret_id)
        *ret_id = id;
    return rc;
}

int
zdist_worker_client_start_job(zdist_worker_client_t *self, const zdist_worker_start_t *req,
                              int64_t timeout_ms, uint64_t *ret_id)
{
    if (!req || !req->job || req->num_ps > ZDIST_WORKER_MAX_PS || (req->num_ps && !req->ps_endpoints))
        return -EINVAL;
    return s_send(self, zdist_worker_request_start_job(req), timeout_ms, ret_id);
}

int
zdist_worker_client_run_steps(zdist_worker_client_t *self, const zdist_worker_run_t *req, int64_t timeout_ms,
                              uint64_t *ret_id)
{
    if (!req || !req->job)
        return -EINVAL;
    return s_send(self, zdist_worker_request_run_steps(req), timeout_ms, ret_id);
}

int
zdist_worker_client_evaluate(zdist_worker_client_t *self, const char *job, int64_t timeout_ms,
                             uint64_t *ret_id)
{
    return s_send(self, zdist_worker_request_job(ZDIST_WORKER_EVALUATE, job), timeout_ms, ret_id);
}

int
zdist_worker_client_stop_job(zdist_worker_client_t *self, const char *job, int64_t timeout_ms,
                             uint64_t *ret_id)
{
    return s_send(self, zdist_worker_request_job(ZDIST_WORKER_STOP_JOB, job), timeout_ms, ret_id);
}

int
zdist_worker_client_status(zdist_worker_client_t *self, int64_t timeout_ms, uint64_t *ret_id)
{
    return s_send(self, zdist_msg_new(ZDIST_WORKER_STATUS), timeout_ms, ret_id);
}

int
zdist_worker_client_ping(zdist_worker_client_t *self, int64_t timeout_ms, uint64_t *ret_id)
{
    return s_send(self, zdist_msg_new(ZDIST_METHOD_PING), timeout_ms, ret_id);
}

int
zdist_worker_client_connect(zdist_worker_client_t *self, const zdist_worker_connect_t *req,
                            int64_t timeout_ms, uint64_t *ret_id)
{
    if (!req || (req->num_endpoints && !req->endpoints))
        return -EINVAL;
    return s_send(self, zdist_worker_request_connect(req), timeout_ms, ret_id);
}

int
zdist_worker_client_get_state(zdist_worker_client_t *self, const char *job, int64_t timeout_ms,
                              uint64_t *ret_id)
{
    return s_send(self, zdist_worker_request_job(ZDIST_WORKER_GET_STATE, job), timeout_ms, ret_id);
}

int
zdist_worker_client_set_state(zdist_worker_client_t *self, const zdist_worker_state_t *state,
                              const zdist_tensor_t *tensors, size_t n, int64_t timeout_ms, uint64_t *ret_id)
{
    if (!state || (n && !tensors))
        return -EINVAL;
    zdist_msg_t *m = NULL;
    int rc = zdist_worker_request_set_state(state, tensors, n, &m);
    return rc < 0 ? rc : s_send(self, m, timeout_ms, ret_id);
}

/* ---- replies ---- */

const char *
zdist_worker_reply_why(const zdist_worker_reply_t *reply, char *buf, size_t size)
{
    if (!reply)
        snprintf(buf, size, "no answer");
    else
        snprintf(buf, size, "%s%s%s", zdist_status_name(reply->status), *reply->message ? ": " : "",
                 reply->message);
    return buf;
}

int
zdist_worker_client_recv(zdist_worker_client_t *self, int64_t wait_ms, zdist_worker_reply_t *ret)
{
    zdist_msg_t *msg = NULL;
    int rc = zdist_rpc_client_recv(self->rpc, wait_ms, &msg);
    return rc < 0 ? rc : zdist_worker_reply_decode(&msg, zdist_worker_client_endpoint(self), ret);
}

int
zdist_worker_client_wait(zdist_worker_client_t *self, uint64_t id, zdist_worker_reply_t *ret)
{
    zdist_msg_t *msg = NULL;
    int rc = zdist_rpc_client_recv_id(self->rpc, id, -1, &msg);
    return rc < 0 ? rc : zdist_worker_reply_decode(&msg, zdist_worker_client_endpoint(self), ret);
}

int
zdist_worker_client_wait_any(zdist_worker_client_t *const *clients, size_t n, void *also, int64_t wait_ms)
{
    zdist_rpc_client_t **rpcs = calloc(n ? n : 1, sizeof *rpcs);
    if (!rpcs)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        rpcs[i] = clients[i] ? clients[i]->rpc : NULL;
    int rc = zdist_rpc_client_wait_any(rpcs, n, also, wait_ms);
    free(rpcs);
    return rc;
}

/* ---- evaluations: a worker's share added to the whole ---- */

int
zdist_evaluation_add(zdist_evaluation_t *sum, const zdist_evaluation_t *part, zdist_auc_t *auc)
{
    sum->correct += part->correct;
    sum->total += part->total;
    sum->loss_sum += part->loss_sum;
    sum->has_correct = sum->has_correct || part->has_correct;
    if (auc && part->scored > 0 && part->predictions && part->positives)
        return zdist_auc_update_u8(auc, part->positives, part->predictions, part->scored);
    return 0;
}

int
zdist_evaluation_finish(zdist_evaluation_t *sum, const zdist_auc_t *auc)
{
    sum->predictions = NULL;
    sum->positives = NULL;
    sum->scored = auc ? zdist_auc_count(auc) : 0;
    sum->has_auc = false;
    if (sum->scored > 0) {
        int rc = zdist_auc_result(auc, &sum->auc);
        if (rc < 0)
            return rc;
        sum->has_auc = true;
    }
    return 0;
}
