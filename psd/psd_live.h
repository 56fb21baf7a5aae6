/* psd_live: when each job last wrote to this psd, so a DROP_JOB of a job still training is refused. */
#ifndef PSD_LIVE_H
#define PSD_LIVE_H

#include <stdint.h>

typedef struct psd_live_t psd_live_t;

/* NULL when out of memory. One per psd; the server's loop thread only. */
psd_live_t *psd_live_new(void);
/* NULL-safe, idempotent. */
void psd_live_destroy(psd_live_t **self_p);
/* A write to variable `name` ("JOB/..."; a name without a job is ignored)
   at now_ms: its job is live. At most one entry per job. */
void psd_live_touch(psd_live_t *self, const char *name, int64_t now_ms);
/* Milliseconds since `job`'s last write here, -1 when none was seen. */
int64_t psd_live_idle_ms(const psd_live_t *self, const char *job, int64_t now_ms);
/* The job's variables are gone: its entry too. */
void psd_live_forget(psd_live_t *self, const char *job);

#endif
