/* zdist daemon runtime: what every zdist daemon does around its service —
   find its task, run its actor, tell systemd, stop cleanly. For daemons
   only: these functions log (through czmq's zsys) and talk to systemd. */
#ifndef ZDIST_DAEMON_H
#define ZDIST_DAEMON_H

#include <czmq.h>
#include <stddef.h>

#include "zdist/cluster.h"
#include "zdist/defs.h"
#include "zdist/http.h"
#include "zdist/rpc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Finds the task a daemon serves: TF_CONFIG, or cluster_file (may be NULL)
   plus the task_spec override ("TYPE:INDEX", may be NULL). The task's type
   must be `want_type` ("ps", "worker", "chief", ...); otherwise a message
   names the daemon to start instead. bind (may be NULL) overrides the
   task's address; with bind and no configuration at all the task is
   want_type:0. On success writes the task index and the endpoint to bind,
   and *ret_cluster (may be NULL; the caller destroys it; NULL when there is
   no configuration). Returns 0, or 2 (usage) after printing one line on
   stderr prefixed with ident. */
ZDIST_EXPORT int zdist_daemon_find_task(const char *ident, const char *cluster_file, const char *task_spec,
                                        const char *bind, const char *want_type, int *ret_index,
                                        char *endpoint, size_t endpoint_size, zdist_cluster_t **ret_cluster);

/* Tells glibc's malloc to keep the memory of freed buffers up to 32 MiB
   (M_MMAP_THRESHOLD) and not to give back less than 64 MiB of free heap
   (M_TRIM_THRESHOLD): message buffers, pull replies and ring chunks then
   reuse pages already mapped instead of faulting in fresh ones (~11 us per
   4 KiB page on a virtual machine) on every request. MALLOC_MMAP_THRESHOLD_
   or MALLOC_TRIM_THRESHOLD_ in the environment win. zdist_daemon_run calls
   it; a program that trains without it (zdist run) calls it first. */
ZDIST_EXPORT void zdist_daemon_keep_memory(void);
/* Loads the key directory (keys_dir, or $ZDIST_KEYS_DIR; neither: plain
   ZeroMQ, returns 0) with this daemon's certificate "<type>-<index>",
   learns the cluster's endpoints (cluster may be NULL) and makes the keys
   the process's (zdist_keys_set_process): every RPC server, client and ring
   of the daemon then speaks CURVE. zdist_daemon_run destroys them at the
   end. Returns 0, or 2 after printing one line on stderr prefixed with
   ident. */
ZDIST_EXPORT int zdist_daemon_keys(const char *ident, const char *keys_dir, const char *type, int index,
                                   const zdist_cluster_t *cluster);
/* The same with the certificate `name` (zdist-worker --key NAME: a worker
   that joins has a certificate of its own, e.g. worker-join-1). */
ZDIST_EXPORT int zdist_daemon_keys_as(const char *ident, const char *keys_dir, const char *name,
                                      const zdist_cluster_t *cluster);

/* Runs `actor` (zactor_new (actor, args)) as the daemon's service: the actor
   first sends "READY <endpoint>" or "ERROR <message>" on its pipe. Then logs
   that `what` ("ps task 0") serves there (warning when a non-loopback
   address has no CURVE), tells systemd READY=1 and STATUS, waits for SIGTERM
   or SIGINT, tells systemd STOPPING=1, and stops the actor with $TERM.
   Returns the process exit status: 0 after a clean stop, 1 when the actor
   failed. */
ZDIST_EXPORT int zdist_daemon_run(zactor_fn *actor, void *args, const char *what);

/* Preemption, TensorFlow's PreemptionCheckpointHandler for every strategy:
   once set (a cluster with a chief), the SIGTERM that stops the daemon first
   sends PREEMPT (type:index) to the chief while the service still serves,
   and waits for its answer: each running job the task serves saves a
   checkpoint at its next step boundary, so the job resumes with at most one
   step lost. The wait is at most $ZDIST_PREEMPT_TIMEOUT_MS (default 25000,
   under the units' TimeoutStopSec of 30 s; 0: no preemption checkpoint),
   and only while the daemon holds jobs (zdist_daemon_set_jobs) and the chief
   answers a PING within 2 s. A second SIGTERM meanwhile is logged and the
   wait goes on; the daemon still exits 0. Call before zdist_daemon_run. */
ZDIST_EXPORT void zdist_daemon_set_preempt(const zdist_cluster_t *cluster, const char *type, int index);
/* Elastic workers: once the daemon serves, it joins the cluster through
   the chief at chief_endpoint (JOIN with `endpoint`, where the chief
   reaches it, and under CURVE the public key of the process's
   certificate), trying again every second until the chief answers, and
   learns its task index: worker:N from then on (its SIGTERM is a
   preemption of that task, sent with jobs held or not: it leaves the
   cluster). `cluster` NULL: `--join`, the chief gives the next index; else
   a TF_CONFIG worker `task_index`, its cluster's ps and worker addresses
   sent along: the chief answers that it is a member (nothing changes), or
   takes it in as worker:task_index when that is its next index. A refusal
   other than FAILED_PRECONDITION (tried again) stops the daemon (exit 1)
   with the chief's reason. Call before zdist_daemon_run. */
ZDIST_EXPORT void zdist_daemon_set_join(const char *chief_endpoint, const char *endpoint,
                                        const zdist_cluster_t *cluster, int task_index);
/* How many jobs the daemon holds now (any thread): a preemption waits for
   the chief only while it is above 0. */
ZDIST_EXPORT void zdist_daemon_set_jobs(int n);

/* In the actor, after sending READY: the event loop of a service. Handles
   up to `batch` requests per wake-up (1 when each may take long), feeds
   systemd's watchdog from the loop when it is enabled, survives signals
   interrupting its poll, and on $TERM answers every request already
   received, then returns. `loop` may carry the service's own readers and
   timers; it is not destroyed. The loop polls the pipe by its descriptor:
   nothing else may read or send on `pipe` while it serves. */
ZDIST_EXPORT void zdist_daemon_serve(zloop_t *loop, zsock_t *pipe, zdist_rpc_server_t *rpc, int batch);

/* --http ADDR (NULL or "": none): zdist_http_new on the actor's loop,
   logging the URL it serves, with a warning when the address is not a
   loopback one (the pages are read-only and unauthenticated). NULL after
   logging why when it cannot listen; the caller then stops with an error. */
ZDIST_EXPORT zdist_http_t *zdist_daemon_http(const char *addr, zloop_t *loop, zdist_http_handler_fn *fn, void *arg,
                                             zdist_error_t *err);
/* zdist_rpc_server_options_t.log target: one warning line per refusal. */
ZDIST_EXPORT void zdist_daemon_rpc_log(void *state, const char *line);

#ifdef __cplusplus
}
#endif
#endif
