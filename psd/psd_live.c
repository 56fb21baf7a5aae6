/* psd_live: each job's last write here (a job is live while it writes), by job id. */
#include <czmq.h>
#include <stdlib.h>
#include <string.h>

#include "psd_live.h"

struct psd_live_t {
    zhashx_t *last_ms; /* job id -> int64_t * */
};

static void
s_free(void **item)
{
    free(*item);
    *item = NULL;
}

psd_live_t *
psd_live_new(void)
{
    psd_live_t *self = calloc(1, sizeof *self);
    if (!self || !(self->last_ms = zhashx_new())) {
        free(self);
        return NULL;
    }
    zhashx_set_destructor(self->last_ms, s_free);
    return self;
}

void
psd_live_destroy(psd_live_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zhashx_destroy(&(*self_p)->last_ms);
    free(*self_p);
    *self_p = NULL;
}

void
psd_live_touch(psd_live_t *self, const char *name, int64_t now_ms)
{
    const char *slash = name ? strchr(name, '/') : NULL;
    char job[128];
    if (!self || !slash || slash == name || (size_t) (slash - name) >= sizeof job)
        return;
    memcpy(job, name, (size_t) (slash - name));
    job[slash - name] = 0;
    int64_t *t = zhashx_lookup(self->last_ms, job);
    if (!t && (t = malloc(sizeof *t)) && zhashx_insert(self->last_ms, job, t) != 0) {
        free(t);
        t = NULL;
    }
    if (t)
        *t = now_ms;
}

int64_t
psd_live_idle_ms(const psd_live_t *self, const char *job, int64_t now_ms)
{
    const int64_t *t = self && job ? zhashx_lookup(self->last_ms, job) : NULL;
    return t ? now_ms - *t : -1;
}

void
psd_live_forget(psd_live_t *self, const char *job)
{
    if (self && job)
        zhashx_delete(self->last_ms, job);
}
