/* coord_drop: drops ended jobs' variables from every psd, on its own thread, retrying a psd that is down. */
#ifndef COORD_DROP_H
#define COORD_DROP_H

#include <czmq.h>

#include "coord_run.h" /* COORD_MAX_PS */

/* Between two tries at a psd that did not answer. */
#define COORD_DROP_RETRY_MS 2000

typedef struct {
    int num_ps;
    char ps[COORD_MAX_PS][256];
} coord_drop_config_t;

/* zactor_new (coord_drop_actor, &config): config copied at start. Takes
   "DROP" + a job id on its pipe and sends DROP_JOB for it to every psd
   (the chief's key under CURVE); a psd that is down or does not answer is
   tried again every COORD_DROP_RETRY_MS until it is back, without holding up
   the others or other jobs. One log line per psd and job: dropped (shards,
   bytes), or the first failure. Once every psd has dropped a job it sends
   "DROPPED" + the id. A psd that refuses (an older psd, a key that is not
   the chief's) is not retried: logged, and the job never reported dropped.
   "$TERM" ends it; drops not done then are forgotten (the server asks again
   at its next start for ended jobs not recorded as dropped). */
void coord_drop_actor(zsock_t *pipe, void *args);

#endif
