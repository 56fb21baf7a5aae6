/* coord_ring_elastic: a ring that changes size (strategy.min_workers / max_workers, as TorchElastic's
   --nnodes MIN:MAX). When a worker is lost the ring is re-formed at once with the workers present, from the
   last checkpoint, as long as min_workers of them answer; a worker that comes back, or joins through the
   chief, is taken in at the next checkpoint boundary, up to max_workers. The global batch is kept (the job
   parser refused a size whose replicas do not divide it), so each replica's batch is recomputed by the
   workers' START_JOB and an epoch stays the same steps. Also what every ring's status shows of its changes:
   when, from which step, its size, and how long the re-form took. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "coord_ring.h"
#include "zdist/file.h"
#include "zdist/sys.h"

static double
s_wall_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

int
coord_ring_add_joined(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    while (m->n < r->cfg->num_workers && m->n < COORD_MAX_WORKERS) {
        int i = m->n;
        zdist_error_t err = {0};
        m->w[i] = (coord_ring_worker_t){.endpoint = r->cfg->workers[i], .rank = -1};
        if (coord_ring_client(m, i, &err) < 0) {
            /* the endpoint was checked at JOIN: out of memory; tried again at the next boundary */
            zsys_warning("job %s: joined worker task %d (%s): %s", r->cfg->job_id, i, m->w[i].endpoint, err.text);
            return 0;
        }
        m->n++;
        zsys_info("job %s: worker task %d (%s) joined the cluster: taken into the ring at a checkpoint boundary",
                  r->cfg->job_id, i, m->w[i].endpoint);
    }
    return 0;
}

void
coord_ring_form_elastic(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    m->ring = 0;
    for (int i = 0; i < m->n; i++) {
        coord_ring_worker_t *w = &m->w[i];
        w->in_ring = w->up && !r->cfg->left[i] && m->ring < m->max;
        w->rank = w->in_ring ? m->ring++ : -1;
    }
}

int
coord_ring_check_size(coord_run_t *r, int64_t spe)
{
    coord_ring_t *m = coord_ring_of(r);
    const zdist_job_t *job = &r->cfg->job.spec;
    int64_t per = job->num_replicas > 0 ? job->num_replicas : 1, g = job->global_batch_size;
    /* A backstop: the parser refuses such a job at submit. */
    if (g % (m->ring * per) != 0) {
        snprintf(r->error, sizeof r->error,
                 "dataset.global_batch_size: %lld does not divide by the ring's %d workers x %lld replicas "
                 "(strategy.num_replicas): the ring cannot re-form with the global batch kept",
                 (long long)g, m->ring, (long long)per);
        return -EINVAL;
    }
    if (m->spe0 == 0)
        m->spe0 = spe;
    if (spe != m->spe0) {
        snprintf(r->error, sizeof r->error,
                 "a ring of %d workers has %lld steps per epoch, the first ring %lld: its epochs would not be the "
                 "same steps (dataset.shard_policy: \"data\" keeps them)",
                 m->ring, (long long)spe, (long long)m->spe0);
        return -EINVAL;
    }
    return 0;
}

/* Workers that could be in the ring: up and not departed. */
static int
s_available(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    int n = 0;
    for (int i = 0; i < m->n; i++)
        n += m->w[i].up && !r->cfg->left[i];
    return n;
}

bool
coord_ring_wait_elastic(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    int before = -1;
    for (;;) {
        coord_run_check_pipe(r);
        if (r->cancel || r->term)
            return false;
        coord_run_preempt_idle(r);
        if (r->members_changed)
            coord_ring_member_left(r);
        /* A restarted worker answers within milliseconds; a dead one is not waited for long. */
        coord_ring_probe(r, 500);
        int avail = s_available(r);
        if (avail >= m->min) {
            int size = avail < m->max ? avail : m->max;
            zsys_info("job %s: re-forming the ring with %d worker%s (strategy.min_workers %d, max_workers %d) from "
                      "the last checkpoint, the global batch kept",
                      r->cfg->job_id, size, size == 1 ? "" : "s", m->min, m->max);
            return true;
        }
        if (avail != before)
            zsys_info("job %s: waiting for workers: %d up, strategy.min_workers is %d", r->cfg->job_id, avail,
                      m->min);
        before = avail;
        coord_run_status(r, false);
        coord_ring_await(r, INT64_MAX);
    }
}

bool
coord_ring_member_left(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    r->members_changed = false;
    coord_ring_add_joined(r);
    for (int i = 0; i < m->n; i++)
        if (m->w[i].in_ring && r->cfg->left[i]) {
            snprintf(m->last_failure, sizeof m->last_failure,
                     "worker task %d (%s) left (drained): re-forming the ring without it from step %lld", i,
                     m->w[i].endpoint, (long long)r->step);
            zsys_info("job %s: %s", r->cfg->job_id, m->last_failure);
            coord_ring_broke(r);
            return true;
        }
    return false;
}

int
coord_ring_grow(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    if (r->members_changed && coord_ring_member_left(r))
        return -EAGAIN;
    if (m->ring >= m->max)
        return 0;
    bool which[COORD_MAX_WORKERS];
    int outside = 0;
    for (int i = 0; i < m->n; i++)
        outside += which[i] = !m->w[i].in_ring && !r->cfg->left[i];
    /* A short probe: one that misses it is taken in at the next boundary. */
    if (outside == 0 || coord_ring_probe_some(r, which, 300) == 0)
        return 0;
    int first = -1, up = 0;
    for (int i = 0; i < m->n; i++)
        if (which[i] && m->w[i].up) {
            first = first < 0 ? i : first;
            up++;
        }
    int size = m->ring + up < m->max ? m->ring + up : m->max;
    snprintf(m->last_failure, sizeof m->last_failure,
             "worker task %d (%s)%s up outside the ring: re-forming it with %d workers from step %lld", first,
             m->w[first].endpoint, up > 1 ? " and others" : "", size, (long long)r->step);
    zsys_info("job %s: %s", r->cfg->job_id, m->last_failure);
    coord_ring_broke(r);
    return -EAGAIN;
}

void
coord_ring_broke(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    if (m->broke_ms)
        return; /* the first sign counts */
    m->broke_ms = zdist_clock_now_ms();
    m->ex_per_s_broke = r->ex_per_s;
}

void
coord_ring_formed(coord_run_t *r, int64_t step)
{
    coord_ring_t *m = coord_ring_of(r);
    coord_ring_change_t *c = &m->hist[m->nhist++ % COORD_RING_HISTORY];
    *c = (coord_ring_change_t){.time = s_wall_s(), .step = step, .size = m->ring, .reform_ms = -1,
                               .ex_per_s_before = m->broke_ms ? m->ex_per_s_broke : 0};
    snprintf(c->why, sizeof c->why, "%.*s", (int)sizeof c->why - 1, m->nhist == 1 ? "the first ring" : m->reason);
}

void
coord_ring_progressed(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    if (!m->broke_ms || m->nhist == 0)
        return;
    coord_ring_change_t *c = &m->hist[(m->nhist - 1) % COORD_RING_HISTORY];
    c->reform_ms = zdist_clock_now_ms() - m->broke_ms;
    m->broke_ms = 0;
    zsys_info("job %s: the ring of %d workers re-formed from step %lld ran its first round %lld ms after it broke "
              "or was to grow",
              r->cfg->job_id, m->ring, (long long)c->step, (long long)c->reform_ms);
}

void
coord_ring_verify(coord_run_t *r)
{
    coord_ring_t *m = coord_ring_of(r);
    bool which[COORD_MAX_WORKERS];
    for (int i = 0; i < m->n; i++)
        which[i] = m->w[i].in_ring;
    coord_ring_replies_t rs;
    coord_ring_call(r, which, coord_ring_send_get_state, 30000, 30000, &rs);
    json_t *a = json_array();
    bool equal = true, any = false;
    uint32_t first = 0;
    char why[1024];
    for (int i = 0; i < m->n && a; i++) {
        if (!which[i])
            continue;
        const zdist_worker_reply_t *rep = coord_ring_ok(&rs, i);
        if (!rep) {
            equal = false;
            zdist_worker_reply_why(rs.got[i] ? &rs.r[i] : NULL, why, sizeof why);
            json_array_append_new(a, json_pack("{s:i, s:s}", "task", i, "error", why));
            continue;
        }
        uint32_t crc = 0;
        for (size_t k = 0; k < zdist_worker_reply_tensor_count(rep); k++) {
            const zdist_tensor_t *t = zdist_worker_reply_tensor(rep, k);
            crc = zdist_crc32(crc, t->data, t->nbytes);
        }
        equal = equal && (!any || crc == first);
        first = any ? first : crc;
        any = true;
        json_array_append_new(a, json_pack("{s:i, s:i, s:I, s:I}", "task", i, "rank", m->w[i].rank, "step",
                                           (json_int_t)rep->state.step, "crc32", (json_int_t)crc));
    }
    coord_ring_replies_free(m, &rs);
    json_decref(m->final_crc);
    m->final_crc = a;
    m->final_equal = equal && any;
    if (m->final_equal)
        zsys_info("job %s: the final variables of the ring's %d workers are equal (CRC-32 %08x)", r->cfg->job_id,
                  m->ring, first);
    else
        zsys_warning("job %s: the final variables of the ring's %d workers differ or could not be read",
                     r->cfg->job_id, m->ring);
}

void
coord_ring_status(coord_run_t *r, json_t *detail)
{
    coord_ring_t *m = coord_ring_of(r);
    json_object_set_new(detail, "ring_size", json_integer(m->ring));
    if (coord_ring_elastic(m)) {
        json_object_set_new(detail, "min_workers", json_integer(m->min));
        json_object_set_new(detail, "max_workers", json_integer(m->max));
    }
    json_t *h = json_array();
    int from = m->nhist > COORD_RING_HISTORY ? m->nhist - COORD_RING_HISTORY : 0;
    for (int k = from; k < m->nhist && h; k++) {
        const coord_ring_change_t *c = &m->hist[k % COORD_RING_HISTORY];
        json_array_append_new(h, json_pack("{s:f, s:I, s:i, s:I, s:f, s:s}", "time", c->time, "step",
                                           (json_int_t)c->step, "size", c->size, "reform_ms",
                                           (json_int_t)c->reform_ms, "examples_per_sec_before", c->ex_per_s_before,
                                           "why", c->why));
    }
    if (h)
        json_object_set_new(detail, "ring_history", h);
    if (m->final_crc)
        json_object_set_new(detail, "final_variables",
                            json_pack("{s:b, s:O}", "equal", m->final_equal, "workers", m->final_crc));
}
