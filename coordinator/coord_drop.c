/* coord_drop: ended jobs' variables off every psd (DROP_JOB), with retries for a psd that is down. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord_drop.h"
#include "zdist/ps_client.h"
#include "zdist/rpc.h"
#include "zdist/sys.h"

#define S_CALL_MS 2000 /* per DROP_JOB: a drop only frees memory */

typedef struct {
    char job[64];
    bool done[COORD_MAX_PS];   /* dropped there, or given up (failed) */
    bool warned[COORD_MAX_PS]; /* its one line about a psd that is down */
    bool failed;                  /* a psd refused: never reported dropped */
} s_pending_t;

typedef struct {
    coord_drop_config_t config;
    zsock_t *pipe;
    zdist_ps_client_t *ps[COORD_MAX_PS];
    s_pending_t *pending;
    size_t npending;
    bool term;
} self_t;

static void
s_add(self_t *self, const char *job)
{
    for (size_t i = 0; i < self->npending; i++)
        if (strcmp(self->pending[i].job, job) == 0)
            return;
    s_pending_t *n = realloc(self->pending, (self->npending + 1) * sizeof *n);
    if (!n) {
        zsys_error("job %s: out of memory: its variables stay on the psds until the next start", job);
        return;
    }
    self->pending = n;
    s_pending_t *p = &self->pending[self->npending++];
    memset(p, 0, sizeof *p);
    snprintf(p->job, sizeof p->job, "%s", job);
}

/* Commands waiting on the pipe: DROP adds a job, $TERM ends. */
static void
s_read_pipe(self_t *self)
{
    while (!self->term && (zsock_events(self->pipe) & ZMQ_POLLIN)) {
        char *cmd = zstr_recv(self->pipe);
        if (!cmd) {
            self->term = true;
            break;
        }
        if (strcmp(cmd, "$TERM") == 0) {
            self->term = true;
        } else if (strcmp(cmd, "DROP") == 0) {
            char *job = zstr_recv(self->pipe);
            if (job)
                s_add(self, job);
            zstr_free(&job);
        }
        zstr_free(&cmd);
    }
}

/* One try at every drop not done. A psd that does not answer is skipped for
   the rest of the round: each down psd costs one call's deadline. */
static void
s_round(self_t *self)
{
    for (int i = 0; i < self->config.num_ps && !self->term; i++) {
        for (size_t k = 0; k < self->npending && !self->term; k++) {
            s_pending_t *p = &self->pending[k];
            if (p->done[i])
                continue;
            uint64_t shards = 0, bytes = 0;
            zdist_error_t err = {0};
            int rc = self->ps[i] ? zdist_ps_client_drop_job(self->ps[i], p->job, true, &shards, &bytes, &err)
                                 : zdist_error_set(&err, -ENOMEM, "no client: out of memory");
            s_read_pipe(self); /* may add a job: p moves */
            p = &self->pending[k];
            if (rc == 0) {
                zsys_info("job %s: dropped its variables from ps %d: %llu shards, %llu bytes freed", p->job, i,
                          (unsigned long long) shards, (unsigned long long) bytes);
                p->done[i] = true;
            } else if (zdist_rpc_unreachable(rc) || rc == -EAGAIN) {
                /* Down or restarting, or the call could not go out now (-EAGAIN): tried again. */
                if (!p->warned[i])
                    zsys_warning("job %s: ps %d is unreachable (%s): its variables are dropped there when it is "
                                 "back (tried every %d ms)", p->job, i, err.text, COORD_DROP_RETRY_MS);
                p->warned[i] = true;
                break; /* the next psd */
            } else {
                zsys_error("job %s: ps %d refused to drop its variables (%s); they stay there (needs a psd "
                           "with drop_job and the chief's key)", p->job, i, err.text);
                p->done[i] = true;
                p->failed = true;
            }
        }
    }
    /* Report and forget the jobs every psd is done with. */
    size_t kept = 0;
    for (size_t k = 0; k < self->npending; k++) {
        s_pending_t *p = &self->pending[k];
        bool all = true;
        for (int i = 0; i < self->config.num_ps; i++)
            all = all && p->done[i];
        if (!all) {
            self->pending[kept++] = *p;
            continue;
        }
        if (!p->failed) {
            zstr_sendm(self->pipe, "DROPPED");
            zstr_send(self->pipe, p->job);
        }
    }
    self->npending = kept;
}

void
coord_drop_actor(zsock_t *pipe, void *args)
{
    self_t self = {0};
    self.config = *(const coord_drop_config_t *) args;
    self.pipe = pipe;
    zsock_signal(pipe, 0);
    zdist_ps_client_options_t po;
    zdist_ps_client_options_default(&po);
    po.timeout_ms = S_CALL_MS;
    /* A psd restarted since this client first reached it fails the next call
       with 'connection lost' before the socket reconnects; a drop is
       idempotent, so one more try (rather than a warning that it is down). */
    po.retries = 1;
    for (int i = 0; i < self.config.num_ps; i++)
        self.ps[i] = zdist_ps_client_new(self.config.ps[i], &po, NULL);
    while (!self.term) {
        zmq_pollitem_t item = {zsock_resolve(pipe), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, self.npending ? COORD_DROP_RETRY_MS : -1) < 0 && errno != EINTR)
            break;
        s_read_pipe(&self);
        if (!self.term && self.npending)
            s_round(&self);
    }
    for (int i = 0; i < self.config.num_ps; i++)
        zdist_ps_client_destroy(&self.ps[i]);
    free(self.pending);
}
