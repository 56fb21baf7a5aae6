/* coord_mwm: a multi_worker_mirrored job — the workers joined in a ring, stepped in lockstep, checkpointed
   from rank 0, and the ring re-formed from the last checkpoint when a worker is lost or comes back. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "coord_run.h"
#include "worker.pb-c.h"
#include "wire/body.h"
#include "zdist/cluster.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

/* Checkpoint file: magic, version, step, iterations, count, then per tensor
   (name length, name, byte count, float32 data), then a CRC-32 of all the
   bytes before it. Host byte order, as the psd's shard files. */
#define S_MAGIC "ZDMWSTA1"
#define S_STATE_FILE "workers-state.bin"
#define S_CALL_MS 30000 /* control calls (start, connect, state) */

typedef struct {
    zdist_rpc_client_t *cl;
    const char *endpoint; /* the cluster's, e.g. tcp://10.0.0.2:2222 */
    bool in_ring;
    bool dropped;         /* left out after the wait for it ran out */
    bool up;              /* answered the latest STATUS */
    bool has_job;         /* ... and runs this job */
    int rank;             /* in the ring; -1 outside */
    char ring_ep[300];    /* its end of the ring */
    uint64_t pending;     /* request id of the call in flight, 0 none */
} s_worker_t;

struct coord_mwm_t {
    s_worker_t w[COORD_MAX_TASKS];
    int n;
    int ring; /* workers in the ring */
    unsigned reforms;
    char last_failure[2048]; /* of the latest ring call */
    char reason[2048];       /* why the ring was last re-formed */
    int64_t round_steps;      /* RUN_STEPS size of the current round */
    const struct s_state_file *loaded; /* during a restore */
    int64_t loaded_skip;
    const char *job_name;
};

/* ---- calls ---- */

static zdist_msg_t *
s_request(uint32_t method, const ProtobufCMessage *body)
{
    zdist_msg_t *m = zdist_msg_new(method);
    if (m && zdist_msg_set_body(m, body) < 0)
        zdist_msg_destroy(&m);
    return m;
}

/* A fresh client for worker i: calls given up on are dropped with the old
   one (they would hold its in-flight slots until their deadlines). */
static int
s_client(coord_mwm_t *m, int i, zdist_error_t *err)
{
    zdist_rpc_client_options_t o;
    zdist_rpc_client_options_default(&o);
    o.max_in_flight = 4;
    zdist_rpc_client_destroy(&m->w[i].cl);
    m->w[i].pending = 0;
    m->w[i].cl = zdist_rpc_client_new(m->w[i].endpoint, &o, err);
    return m->w[i].cl ? 0 : -EINVAL;
}

/* Sends one request (destroyed) to worker i, its only call in flight (one
   given up on is dropped first); false when it could not be sent. */
static bool
s_send(coord_mwm_t *m, int i, zdist_msg_t **req, int64_t timeout_ms)
{
    if (m->w[i].pending && s_client(m, i, NULL) < 0)
        zdist_msg_destroy(req);
    if (!*req)
        return false;
    return zdist_rpc_client_send(m->w[i].cl, req, timeout_ms, &m->w[i].pending) == 0;
}

/* The reply to worker i's call in flight, waiting up to wait_ms; NULL when
   none came in that time (the call stays pending). */
static zdist_msg_t *
s_recv(coord_mwm_t *m, int i, int64_t wait_ms)
{
    int64_t until = zdist_clock_now_ms() + wait_ms;
    while (m->w[i].pending) {
        zdist_msg_t *reply = NULL;
        int64_t left = until - zdist_clock_now_ms();
        if (zdist_rpc_client_recv(m->w[i].cl, left > 0 ? left : 0, &reply) < 0)
            return NULL;
        if (zdist_msg_request_id(reply) == m->w[i].pending) {
            m->w[i].pending = 0;
            return reply;
        }
        zdist_msg_destroy(&reply); /* a call given up on earlier */
    }
    return NULL;
}

/* A reply's failure as "STATUS: message" into buf; NULL reply = no answer. */
static const char *
s_why(const zdist_msg_t *reply, char *buf, size_t size)
{
    if (!reply)
        snprintf(buf, size, "no answer");
    else
        snprintf(buf, size, "%s%s%s", zdist_status_name(zdist_msg_status(reply)),
                 *zdist_msg_status_message(reply) ? ": " : "", zdist_msg_status_message(reply));
    return buf;
}

/* The worker's process or link is gone (not a refusal of the request). */
static bool
s_is_loss(const zdist_msg_t *reply)
{
    if (!reply)
        return true;
    int st = zdist_msg_status(reply);
    return st == ZDIST_STATUS_UNAVAILABLE || st == ZDIST_STATUS_DEADLINE_EXCEEDED || st == ZDIST_STATUS_ABORTED ||
           st == ZDIST_STATUS_CANCELLED;
}

static void
s_fail_note(coord_mwm_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
s_fail_note(coord_mwm_t *m, const char *fmt, ...)
{
    size_t len = strlen(m->last_failure);
    if (len + 3 >= sizeof m->last_failure)
        return;
    if (len)
        len += (size_t)snprintf(m->last_failure + len, sizeof m->last_failure - len, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->last_failure + len, sizeof m->last_failure - len, fmt, ap);
    va_end(ap);
}

/* One call to every ring worker at once; replies[i] for ring members (NULL
   when no answer). After the first failure the others get grace_ms more
   (survivors of a loss fail their collective within its deadline). */
static void
s_ring_call(coord_run_t *r, zdist_msg_t *(*make)(coord_run_t *, int), int64_t timeout_ms, int64_t grace_ms,
            zdist_msg_t **replies)
{
    coord_mwm_t *m = r->mwm;
    bool pending[COORD_MAX_TASKS] = {0};
    int left = 0;
    for (int i = 0; i < m->n; i++) {
        replies[i] = NULL;
        if (!m->w[i].in_ring)
            continue;
        zdist_msg_t *req = make(r, i);
        if (s_send(m, i, &req, timeout_ms)) {
            pending[i] = true;
            left++;
        }
    }
    int64_t give_up = timeout_ms > 0 ? zdist_clock_now_ms() + timeout_ms + 2000 : INT64_MAX;
    while (left > 0 && zdist_clock_now_ms() < give_up) {
        for (int i = 0; i < m->n && left > 0; i++) {
            if (!pending[i])
                continue;
            zdist_msg_t *reply = s_recv(m, i, left == 1 ? 50 : 10);
            if (!reply)
                continue;
            replies[i] = reply;
            pending[i] = false;
            left--;
            if (zdist_msg_status(reply) != ZDIST_STATUS_OK && give_up > zdist_clock_now_ms() + grace_ms)
                give_up = zdist_clock_now_ms() + grace_ms;
        }
    }
    /* Calls left unanswered: a later reply to them is dropped by id. */
}

static void
s_free_replies(coord_mwm_t *m, zdist_msg_t **replies)
{
    for (int i = 0; i < m->n; i++)
        zdist_msg_destroy(&replies[i]);
}

/* Sorts the ring's failed replies into m->last_failure; true when one of
   them means a worker was lost (re-form the ring), false for a refusal. */
static bool
s_ring_failures(coord_run_t *r, zdist_msg_t **replies, const char *what)
{
    coord_mwm_t *m = r->mwm;
    bool loss = false;
    char why[1024];
    for (int i = 0; i < m->n; i++) {
        if (!m->w[i].in_ring || (replies[i] && zdist_msg_status(replies[i]) == ZDIST_STATUS_OK))
            continue;
        bool gone = !replies[i] || zdist_msg_status(replies[i]) == ZDIST_STATUS_UNAVAILABLE;
        s_fail_note(m, "%sworker task %d (%s)%s: %s", what, i, m->w[i].endpoint, gone ? " lost" : "",
                    s_why(replies[i], why, sizeof why));
        /* FAILED_PRECONDITION: the worker still runs the ring before's
           step (its collective not yet timed out); retry after the wait. */
        loss = loss || s_is_loss(replies[i]) || zdist_msg_status(replies[i]) == ZDIST_STATUS_FAILED_PRECONDITION;
        if (gone)
            m->w[i].up = false; /* until a probe hears from it */
    }
    return loss;
}

/* ---- requests ---- */

static zdist_msg_t *
s_make_stop(coord_run_t *r, int i)
{
    (void)i;
    Zdist__Worker__StopJobRequest req = ZDIST__WORKER__STOP_JOB_REQUEST__INIT;
    req.job = r->cfg->job.name;
    return s_request(ZDIST__WORKER__METHOD__WORKER_STOP_JOB, &req.base);
}

static zdist_msg_t *
s_make_start(coord_run_t *r, int i)
{
    Zdist__Worker__StartJobRequest req = ZDIST__WORKER__START_JOB_REQUEST__INIT;
    req.job_json = r->cfg->job.worker_json;
    req.base_dir = r->cfg->base_dir ? r->cfg->base_dir : "";
    req.worker_index = r->mwm->w[i].rank;
    req.num_workers = r->mwm->ring;
    return s_request(ZDIST__WORKER__METHOD__WORKER_START_JOB, &req.base);
}

static zdist_msg_t *
s_make_connect(coord_run_t *r, int i)
{
    (void)i;
    coord_mwm_t *m = r->mwm;
    char *eps[COORD_MAX_TASKS];
    for (int k = 0; k < m->n; k++)
        if (m->w[k].in_ring)
            eps[m->w[k].rank] = m->w[k].ring_ep;
    Zdist__Worker__ConnectRequest req = ZDIST__WORKER__CONNECT_REQUEST__INIT;
    req.job = r->cfg->job.name;
    req.n_endpoints = (size_t)m->ring;
    req.endpoints = eps;
    return s_request(ZDIST__WORKER__METHOD__WORKER_CONNECT, &req.base);
}

static zdist_msg_t *
s_make_run(coord_run_t *r, int i)
{
    (void)i;
    Zdist__Worker__RunStepsRequest req = ZDIST__WORKER__RUN_STEPS_REQUEST__INIT;
    req.job = r->cfg->job.name;
    req.steps = r->mwm->round_steps;
    return s_request(ZDIST__WORKER__METHOD__WORKER_RUN_STEPS, &req.base);
}

static zdist_msg_t *
s_make_evaluate(coord_run_t *r, int i)
{
    (void)i;
    Zdist__Worker__EvaluateRequest req = ZDIST__WORKER__EVALUATE_REQUEST__INIT;
    req.job = r->cfg->job.name;
    return s_request(ZDIST__WORKER__METHOD__WORKER_EVALUATE, &req.base);
}

/* ---- checkpoints ---- */

typedef struct s_state_file {
    uint8_t *buf; /* the whole file */
    size_t len;
    int64_t step, iterations;
    uint32_t count;
} s_state_file_t;

static int
s_put(FILE *f, uLong *crc, const void *p, size_t n)
{
    *crc = crc32(*crc, p, (uInt)n);
    return fwrite(p, 1, n, f) == n ? 0 : -EIO;
}

/* Writes the GET_STATE reply's tensors to dir/workers-state.bin (fsynced). */
static int
s_state_write(const char *dir, const zdist_msg_t *reply, int64_t step, int64_t iterations, uint64_t *ret_bytes,
              zdist_error_t *err)
{
    char path[1200], tmp[1210];
    snprintf(path, sizeof path, "%s/%s", dir, S_STATE_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return zdist_error_set(err, -errno, "%s: %s", tmp, strerror(errno));
    uLong crc = crc32(0, Z_NULL, 0);
    uint32_t version = 1, count = (uint32_t)zdist_msg_tensor_count(reply);
    int rc = s_put(f, &crc, S_MAGIC, 8);
    if (rc == 0)
        rc = s_put(f, &crc, &version, sizeof version);
    if (rc == 0)
        rc = s_put(f, &crc, &step, sizeof step);
    if (rc == 0)
        rc = s_put(f, &crc, &iterations, sizeof iterations);
    if (rc == 0)
        rc = s_put(f, &crc, &count, sizeof count);
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < count && rc == 0; i++) {
        const zdist_tensor_t *t = zdist_msg_tensor(reply, i);
        uint32_t nlen = t->name ? (uint32_t)strlen(t->name) : 0;
        uint64_t nbytes = t->nbytes;
        rc = s_put(f, &crc, &nlen, sizeof nlen);
        if (rc == 0)
            rc = s_put(f, &crc, t->name ? t->name : "", nlen);
        if (rc == 0)
            rc = s_put(f, &crc, &nbytes, sizeof nbytes);
        if (rc == 0)
            rc = s_put(f, &crc, t->data, t->nbytes);
        bytes += nbytes;
    }
    uint32_t c32 = (uint32_t)crc;
    if (rc == 0 && fwrite(&c32, 1, sizeof c32, f) != sizeof c32)
        rc = -EIO;
    if ((fflush(f) != 0 || fsync(fileno(f)) != 0) && rc == 0)
        rc = -EIO;
    fclose(f);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc < 0) {
        unlink(tmp);
        return zdist_error_set(err, rc, "writing %s: %s", path, strerror(-rc));
    }
    *ret_bytes = bytes;
    return 0;
}

static int
s_state_read(const char *dir, s_state_file_t *ret, zdist_error_t *err)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, S_STATE_FILE);
    memset(ret, 0, sizeof *ret);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return zdist_error_set(err, -e, "%s: %s", path, strerror(e));
    }
    ret->len = (size_t)sb.st_size;
    ret->buf = malloc(ret->len + 1);
    ssize_t got = ret->buf ? read(fd, ret->buf, ret->len) : -1;
    close(fd);
    const size_t head = 8 + 4 + 8 + 8 + 4;
    if (got != (ssize_t)ret->len || ret->len < head + 4)
        goto corrupt;
    uint32_t version, c32;
    memcpy(&c32, ret->buf + ret->len - 4, 4);
    if (memcmp(ret->buf, S_MAGIC, 8) != 0 || (uint32_t)crc32(crc32(0, Z_NULL, 0), ret->buf, (uInt)(ret->len - 4)) != c32)
        goto corrupt;
    memcpy(&version, ret->buf + 8, 4);
    memcpy(&ret->step, ret->buf + 12, 8);
    memcpy(&ret->iterations, ret->buf + 20, 8);
    memcpy(&ret->count, ret->buf + 28, 4);
    if (version != 1)
        goto corrupt;
    return 0;
corrupt:
    free(ret->buf);
    ret->buf = NULL;
    return zdist_error_set(err, -EBADMSG, "%s: not a complete zdist worker-state file (bad size, magic, version or "
                           "CRC); delete this checkpoint directory to resume from the one before", path);
}

/* SET_STATE for worker i from the file (tensors copied into the message). */
static zdist_msg_t *
s_make_set_state(coord_run_t *r, int i)
{
    (void)i;
    const s_state_file_t *sf = r->mwm->loaded;
    Zdist__Worker__State body = ZDIST__WORKER__STATE__INIT;
    body.job = r->cfg->job.name;
    body.step = sf->step;
    body.iterations = sf->iterations;
    body.skip_steps = r->mwm->loaded_skip;
    zdist_msg_t *m = s_request(ZDIST__WORKER__METHOD__WORKER_SET_STATE, &body.base);
    size_t at = 32, end = sf->len - 4;
    for (uint32_t k = 0; m && k < sf->count; k++) {
        uint32_t nlen;
        uint64_t nbytes;
        char name[512];
        if (at + 4 > end || (memcpy(&nlen, sf->buf + at, 4), at += 4, nlen >= sizeof name) || at + nlen + 8 > end)
            goto bad;
        memcpy(name, sf->buf + at, nlen);
        name[nlen] = '\0';
        at += nlen;
        memcpy(&nbytes, sf->buf + at, 8);
        at += 8;
        if (nbytes % sizeof(float) != 0 || nbytes > end - at)
            goto bad;
        zdist_shape_t shape = {.rank = 1, .dims = {(int64_t)(nbytes / sizeof(float))}};
        if (zdist_msg_add_tensor_copy(m, name, ZDIST_DTYPE_FLOAT32, &shape, sf->buf + at, nbytes) < 0)
            goto bad;
        at += nbytes;
    }
    if (m && at == end)
        return m;
bad:
    zdist_msg_destroy(&m);
    return NULL;
}

static int
s_save(coord_run_t *r, int64_t step)
{
    coord_mwm_t *m = r->mwm;
    int w0 = -1;
    for (int i = 0; i < m->n && w0 < 0; i++)
        if (m->w[i].in_ring && m->w[i].rank == 0)
            w0 = i;
    Zdist__Worker__GetStateRequest req = ZDIST__WORKER__GET_STATE_REQUEST__INIT;
    req.job = r->cfg->job.name;
    zdist_msg_t *q = s_request(ZDIST__WORKER__METHOD__WORKER_GET_STATE, &req.base), *reply = NULL;
    zdist_error_t err = {0};
    char why[1024];
    Zdist__Worker__State *st = NULL;
    int rc = -EIO;
    if (!s_send(m, w0, &q, S_CALL_MS) || !(reply = s_recv(m, w0, S_CALL_MS + 2000)) ||
        zdist_msg_status(reply) != ZDIST_STATUS_OK ||
        zdist_msg_unpack_body(reply, &zdist__worker__state__descriptor, (ProtobufCMessage **)&st, &err) < 0) {
        zsys_warning("job %s: checkpoint at step %lld: GET_STATE from worker task %d: %s", r->cfg->job_id,
                     (long long)step, w0, st || !reply ? s_why(reply, why, sizeof why) : err.text);
        s_fail_note(m, "checkpoint: worker task %d: %s", w0, s_why(reply, why, sizeof why));
        rc = s_is_loss(reply) ? -EAGAIN : -EIO;
        goto out;
    }
    if (st->step != step) {
        zsys_error("job %s: worker task %d is at step %lld, the job at %lld: not saving", r->cfg->job_id, w0,
                   (long long)st->step, (long long)step);
        goto out;
    }
    char dir[1100], fields[128], where[64];
    uint64_t bytes = 0;
    coord_run_ckpt_dir(r, step, dir, sizeof dir);
    if ((rc = s_state_write(dir, reply, step, st->iterations, &bytes, &err)) < 0) {
        zsys_warning("job %s: checkpoint at step %lld: %s", r->cfg->job_id, (long long)step, err.text);
        goto out;
    }
    snprintf(fields, sizeof fields, "\"strategy\": \"multi_worker_mirrored\", \"num_workers\": %d", m->ring);
    snprintf(where, sizeof where, "from worker task %d", w0);
    rc = coord_run_ckpt_commit(r, step, fields, bytes, where);
out:
    if (st)
        protobuf_c_message_free_unpacked(&st->base, NULL);
    zdist_msg_destroy(&reply);
    return rc;
}

/* ---- the ring ---- */

/* The ring endpoint worker w bound ("tcp://0.0.0.0:5" when it serves on
   every interface) as its peers reach it: a wildcard host becomes the host
   the cluster names the worker by. */
static void
s_ring_endpoint(const s_worker_t *w, const char *bound, char *out, size_t size)
{
    char host[256], whost[256];
    const char *port;
    if (zdist_endpoint_split(bound, host, sizeof host, &port) < 0 ||
        (strcmp(host, "0.0.0.0") != 0 && strcmp(host, "*") != 0 && strcmp(host, "[::]") != 0 &&
         strcmp(host, "[::0]") != 0) ||
        zdist_endpoint_split(w->endpoint, whost, sizeof whost, NULL) < 0) {
        snprintf(out, size, "%s", bound);
        return;
    }
    snprintf(out, size, "tcp://%s:%s", whost, port);
}

static void
s_ring_form(coord_mwm_t *m)
{
    m->ring = 0;
    for (int i = 0; i < m->n; i++) {
        m->w[i].in_ring = !m->w[i].dropped;
        m->w[i].rank = m->w[i].in_ring ? m->ring++ : -1;
    }
}

static int
s_init(coord_run_t *r)
{
    coord_mwm_t *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    r->mwm = m;
    m->n = r->cfg->num_workers;
    m->job_name = r->cfg->job.name;
    for (int i = 0; i < m->n; i++) {
        zdist_error_t err = {0};
        m->w[i].endpoint = r->cfg->workers[i];
        m->w[i].rank = -1;
        if (s_client(m, i, &err) < 0) {
            snprintf(r->error, sizeof r->error, "worker task %d: %s", i, err.text);
            return -EINVAL;
        }
    }
    s_ring_form(m);
    return 0;
}

/* Which workers answer STATUS now (m->w[i].up). Returns how many. */
static int
s_probe(coord_mwm_t *m, int64_t timeout_ms)
{
    Zdist__Worker__StatusRequest req = ZDIST__WORKER__STATUS_REQUEST__INIT;
    bool sent[COORD_MAX_TASKS] = {0};
    for (int i = 0; i < m->n; i++) {
        zdist_msg_t *q = s_request(ZDIST__WORKER__METHOD__WORKER_STATUS, &req.base);
        sent[i] = s_send(m, i, &q, timeout_ms);
        m->w[i].up = false;
    }
    int up = 0;
    for (int i = 0; i < m->n; i++) {
        zdist_msg_t *reply = sent[i] ? s_recv(m, i, timeout_ms + 500) : NULL;
        m->w[i].up = reply && zdist_msg_status(reply) == ZDIST_STATUS_OK;
        Zdist__Worker__StatusReply *st = NULL;
        m->w[i].has_job = m->w[i].up &&
                          zdist_msg_unpack_body(reply, &zdist__worker__status_reply__descriptor,
                                                (ProtobufCMessage **)&st, NULL) == 0 &&
                          strcmp(st->job, m->job_name) == 0;
        if (st)
            protobuf_c_message_free_unpacked(&st->base, NULL);
        up += m->w[i].up;
        zdist_msg_destroy(&reply);
    }
    return up;
}

/* Lockstep rounds until the next checkpoint boundary or the end. */
static int
s_rounds(coord_run_t *r, int64_t target)
{
    coord_mwm_t *m = r->mwm;
    int64_t spe = r->cfg->job.steps_per_execution > 0 ? r->cfg->job.steps_per_execution : 1;
    int64_t ct = r->cfg->job.collective_timeout_ms;
    /* A round may take long (big steps_per_execution); a worker that neither
       answers nor drops its link is caught by the survivors' collective
       deadline, after which the coordinator gives it ct + 5 s more. */
    int64_t round_ms = r->cfg->closure_timeout_ms > 0 ? r->cfg->closure_timeout_ms : 600000;
    zdist_msg_t *replies[COORD_MAX_TASKS];
    while (r->step < target) {
        coord_run_check_pipe(r);
        if (r->cancel || r->term)
            return 1;
        m->round_steps = target - r->step < spe ? target - r->step : spe;
        s_ring_call(r, s_make_run, round_ms, ct + 5000, replies);
        zdist_closure_result_t res = {.steps = -1};
        bool ok = true;
        for (int i = 0; i < m->n; i++) {
            if (!m->w[i].in_ring)
                continue;
            Zdist__Worker__RunStepsReply *rep = NULL;
            if (!replies[i] || zdist_msg_status(replies[i]) != ZDIST_STATUS_OK ||
                zdist_msg_unpack_body(replies[i], &zdist__worker__run_steps_reply__descriptor,
                                      (ProtobufCMessage **)&rep, NULL) < 0) {
                ok = false;
                continue;
            }
            if (res.steps >= 0 && res.steps != (int64_t)rep->n_steps)
                zsys_error("job %s: workers ran different numbers of steps in one round (%lld, %zu)",
                           r->cfg->job_id, (long long)res.steps, rep->n_steps);
            res.steps = (int64_t)rep->n_steps;
            /* Each worker's loss is its share of the global batch's mean. */
            for (size_t s = 0; s < rep->n_steps; s++)
                for (size_t k = 0; k < rep->steps[s]->n_outputs; k++) {
                    const Zdist__Worker__Output *o = rep->steps[s]->outputs[k];
                    if (strcmp(o->name, ZDIST_OUTPUT_LOSS) == 0)
                        res.loss_sum += o->value;
                    else if (strcmp(o->name, ZDIST_OUTPUT_EXAMPLES) == 0)
                        res.examples += o->value;
                    else if (strcmp(o->name, ZDIST_OUTPUT_CORRECT) == 0)
                        res.correct += o->value;
                }
            protobuf_c_message_free_unpacked(&rep->base, NULL);
        }
        if (!ok) {
            m->last_failure[0] = '\0';
            bool loss = s_ring_failures(r, replies, "");
            s_free_replies(m, replies);
            zsys_warning("job %s: step %lld failed: %s", r->cfg->job_id, (long long)r->step + 1, m->last_failure);
            if (loss)
                return -EAGAIN;
            snprintf(r->error, sizeof r->error, "step %lld: %s", (long long)r->step + 1, m->last_failure);
            return -EIO;
        }
        s_free_replies(m, replies);
        if (res.steps <= 0) {
            snprintf(r->error, sizeof r->error, "step %lld: the workers ran no steps (input exhausted?)",
                     (long long)r->step + 1);
            return -EIO;
        }
        coord_run_account(r, &res);
        coord_run_status(r, false);
    }
    return 0;
}

int
coord_mwm_attempt(coord_run_t *r)
{
    coord_runner_config_t *cfg = r->cfg;
    int rc;
    if (!r->mwm && (rc = s_init(r)) < 0) {
        if (!r->error[0])
            snprintf(r->error, sizeof r->error, "out of memory");
        return rc;
    }
    coord_mwm_t *m = r->mwm;
    s_ring_form(m);
    if (m->ring == 0) {
        snprintf(r->error, sizeof r->error, "no worker left to train on");
        return -EIO;
    }
    m->last_failure[0] = '\0';
    zdist_msg_t *replies[COORD_MAX_TASKS];
    /* A worker may still hold the job from the ring before: stop it first. */
    s_probe(m, 2000);
    bool stale = false;
    for (int i = 0; i < m->n; i++)
        stale = stale || (m->w[i].in_ring && m->w[i].has_job);
    if (stale) {
        s_ring_call(r, s_make_stop, 5000, 5000, replies);
        s_free_replies(m, replies);
    }
    s_ring_call(r, s_make_start, S_CALL_MS, S_CALL_MS, replies);
    int64_t spe_data = 0;
    for (int i = 0; i < m->n; i++) {
        Zdist__Worker__StartJobReply *rep = NULL;
        if (!m->w[i].in_ring || !replies[i] || zdist_msg_status(replies[i]) != ZDIST_STATUS_OK ||
            zdist_msg_unpack_body(replies[i], &zdist__worker__start_job_reply__descriptor, (ProtobufCMessage **)&rep,
                                  NULL) < 0)
            continue;
        s_ring_endpoint(&m->w[i], rep->collective_endpoint, m->w[i].ring_ep, sizeof m->w[i].ring_ep);
        if (m->w[i].rank == 0)
            spe_data = rep->steps_per_epoch;
        protobuf_c_message_free_unpacked(&rep->base, NULL);
    }
    if (s_ring_failures(r, replies, "starting the job on ")) {
        s_free_replies(m, replies);
        return -EAGAIN;
    }
    if (m->last_failure[0]) {
        s_free_replies(m, replies);
        snprintf(r->error, sizeof r->error, "%s", m->last_failure);
        return -EINVAL;
    }
    s_free_replies(m, replies);
    if (r->steps == 0)
        r->steps = cfg->job.epochs * spe_data;
    if (r->steps <= 0) {
        snprintf(r->error, sizeof r->error, "dataset: no steps per epoch (too few examples for the batch size?)");
        return -EINVAL;
    }
    if (m->ring > 1) {
        s_ring_call(r, s_make_connect, S_CALL_MS, S_CALL_MS, replies);
        bool loss = s_ring_failures(r, replies, "connecting the ring on ");
        s_free_replies(m, replies);
        if (m->last_failure[0]) {
            if (loss)
                return -EAGAIN;
            snprintf(r->error, sizeof r->error, "%s", m->last_failure);
            return -EIO;
        }
    }
    int64_t last = coord_run_ckpt_last(cfg->job_dir);
    if (last >= 0) {
        char dir[1100];
        s_state_file_t sf;
        zdist_error_t err = {0};
        coord_run_ckpt_dir(r, last, dir, sizeof dir);
        if ((rc = s_state_read(dir, &sf, &err)) < 0) {
            snprintf(r->error, sizeof r->error, "restoring checkpoint step %lld: %s", (long long)last, err.text);
            return rc;
        }
        m->loaded = &sf;
        m->loaded_skip = last;
        s_ring_call(r, s_make_set_state, S_CALL_MS, S_CALL_MS, replies);
        m->loaded = NULL;
        free(sf.buf);
        bool loss = s_ring_failures(r, replies, "restoring the checkpoint on ");
        s_free_replies(m, replies);
        if (m->last_failure[0]) {
            if (loss)
                return -EAGAIN;
            snprintf(r->error, sizeof r->error, "restoring checkpoint step %lld: %s", (long long)last,
                     m->last_failure);
            return -EIO;
        }
        zsys_info("job %s: %d workers in the ring, restored from the checkpoint at step %lld", cfg->job_id, m->ring,
                  (long long)last);
        r->step = r->ckpt_step = last;
    } else {
        r->step = 0;
        if ((rc = s_save(r, 0)) < 0) {
            if (rc == -EAGAIN)
                return rc;
            snprintf(r->error, sizeof r->error, "checkpoint at step 0 failed (is the state dir writable?)");
            return rc;
        }
        zsys_info("job %s: %d workers in the ring, starting at step 0", cfg->job_id, m->ring);
    }
    r->win_start_ms = zdist_clock_now_ms();
    r->win_steps = 0;
    r->win_loss = r->win_examples = 0;
    r->last_line_step = r->step;
    coord_run_status(r, true);
    int64_t every = cfg->job.ckpt_every;
    while (r->step < r->steps) {
        int64_t target = r->steps;
        if (every > 0 && (r->ckpt_step / every + 1) * every < target)
            target = (r->ckpt_step / every + 1) * every;
        rc = s_rounds(r, target);
        if (rc == 1) {
            if (r->term && !r->cancel && r->ckpt_step != r->step)
                s_save(r, r->step);
            return 1;
        }
        if (rc < 0)
            return rc;
        if (target < r->steps) {
            if ((rc = s_save(r, r->step)) == -EAGAIN)
                return rc;
            /* A worker left out earlier and back now joins from here. */
            s_probe(m, 1000);
            for (int i = 0; i < m->n; i++)
                if (m->w[i].dropped && m->w[i].up) {
                    m->w[i].dropped = false;
                    snprintf(m->last_failure, sizeof m->last_failure,
                             "worker task %d (%s) is back: re-forming the ring from step %lld", i, m->w[i].endpoint,
                             (long long)r->step);
                    zsys_info("job %s: %s", cfg->job_id, m->last_failure);
                    return -EAGAIN;
                }
        }
    }
    if (r->ckpt_step != r->step && (rc = s_save(r, r->step)) < 0)
        zsys_warning("job %s: the final checkpoint failed; the one at step %lld stays", cfg->job_id,
                     (long long)r->ckpt_step);
    return 0;
}

bool
coord_mwm_wait(coord_run_t *r)
{
    coord_mwm_t *m = r->mwm;
    if (!m)
        return true;
    snprintf(m->reason, sizeof m->reason, "%s", m->last_failure);
    if (++m->reforms > 1000) {
        snprintf(r->error, sizeof r->error, "the ring was re-formed 1000 times: giving up (%s)", m->last_failure);
        return false;
    }
    int64_t wait = r->cfg->job.lost_worker_wait_ms;
    int64_t start = zdist_clock_now_ms();
    int missing_before = -1;
    for (;;) {
        coord_run_check_pipe(r);
        if (r->cancel || r->term)
            return false;
        s_probe(m, 1000);
        int missing = 0, up = 0;
        for (int i = 0; i < m->n; i++) {
            up += m->w[i].up;
            missing += !m->w[i].dropped && !m->w[i].up;
        }
        if (missing == 0) {
            for (int i = 0; i < m->n; i++)
                m->w[i].dropped = m->w[i].dropped && !m->w[i].up;
            return true;
        }
        if (missing != missing_before)
            zsys_info("job %s: waiting for %d lost worker%s (%s)", r->cfg->job_id, missing, missing == 1 ? "" : "s",
                      wait < 0 ? "for ever" : "then going on without");
        missing_before = missing;
        if (wait >= 0 && zdist_clock_now_ms() - start >= wait && up > 0) {
            for (int i = 0; i < m->n; i++)
                if (!m->w[i].dropped && !m->w[i].up) {
                    m->w[i].dropped = true;
                    zsys_warning("job %s: worker task %d (%s) did not come back within %lld ms: going on with %d "
                                 "workers, global batch kept",
                                 r->cfg->job_id, i, m->w[i].endpoint, (long long)wait, up);
                }
            return true;
        }
        coord_run_status(r, false);
        zclock_sleep(200);
    }
}

int
coord_mwm_evaluate(coord_run_t *r, zdist_evaluation_t *ret, zdist_error_t *err)
{
    coord_mwm_t *m = r->mwm;
    memset(ret, 0, sizeof *ret);
    zdist_msg_t *replies[COORD_MAX_TASKS];
    s_ring_call(r, s_make_evaluate, 600000, 10000, replies);
    int rc = 0;
    char why[1024];
    for (int i = 0; i < m->n && rc == 0; i++) {
        if (!m->w[i].in_ring)
            continue;
        Zdist__Worker__EvaluateReply *rep = NULL;
        if (!replies[i] || zdist_msg_status(replies[i]) != ZDIST_STATUS_OK ||
            zdist_msg_unpack_body(replies[i], &zdist__worker__evaluate_reply__descriptor, (ProtobufCMessage **)&rep,
                                  NULL) < 0) {
            rc = zdist_error_set(err, -EIO, "worker task %d: %s", i, s_why(replies[i], why, sizeof why));
            break;
        }
        ret->correct += rep->correct;
        ret->total += rep->total;
        ret->loss_sum += rep->loss_sum;
        ret->has_correct = ret->has_correct || rep->has_correct;
        protobuf_c_message_free_unpacked(&rep->base, NULL);
    }
    s_free_replies(m, replies);
    return rc;
}

void
coord_mwm_stop(coord_run_t *r)
{
    if (!r->mwm)
        return;
    zdist_msg_t *replies[COORD_MAX_TASKS];
    s_ring_call(r, s_make_stop, 2000, 2000, replies);
    s_free_replies(r->mwm, replies);
}

const char *
coord_mwm_last_failure(const coord_run_t *r)
{
    return r->mwm ? r->mwm->reason : "";
}

json_t *
coord_mwm_workers_json(coord_run_t *r)
{
    json_t *a = json_array();
    coord_mwm_t *m = r->mwm;
    for (int i = 0; m && i < m->n; i++) {
        const s_worker_t *w = &m->w[i];
        json_array_append_new(a, json_pack("{s:i, s:s, s:b, s:b, s:i, s:s, s:i}", "task", i, "endpoint", w->endpoint,
                                           "up", w->up, "in_ring", w->in_ring, "rank", w->rank,
                                           "ring_endpoint", w->ring_ep, "restarts",
                                           (int)zdist_rpc_client_peer_restarts(w->cl)));
    }
    return a;
}

void
coord_mwm_destroy(coord_run_t *r)
{
    if (!r->mwm)
        return;
    for (int i = 0; i < r->mwm->n; i++)
        zdist_rpc_client_destroy(&r->mwm->w[i].cl);
    free(r->mwm);
    r->mwm = NULL;
}
