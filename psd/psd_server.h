/* psd_server: the zdist-psd service, a czmq actor serving proto/ps.proto. */
#ifndef PSD_SERVER_H
#define PSD_SERVER_H

#include <czmq.h>

#include "zdist/wire.h"

#define PSD_MAX_CKPT_ROOTS 16
#define PSD_CKPT_ROOT_MAX 1024

typedef struct {
    char endpoint[256];          /* ZeroMQ endpoint to bind */
    int ps_task;                 /* this psd's index in the ps job */
    zdist_wire_limits_t limits;  /* per request */
    size_t max_tensor_bytes;     /* one tensor in a request or reply */
    char http[128];              /* --http ADDR: /metrics ("" none) */
    /* What peers may make this psd hold: variable shards, and bytes of
       values plus optimizer slots (checked when a shard is created: slots
       an optimizer adds later may take up to twice the values more).
       0: the defaults, 65536 shards and 3/4 of the machine's memory. */
    size_t max_variables;
    uint64_t max_bytes;
    /* Where SAVE and RESTORE may name a directory (--checkpoint-root,
       canonical): a dir must be absolute, without "..", under a root as
       written and once resolved. None: anywhere this user may write. */
    char ckpt_roots[PSD_MAX_CKPT_ROOTS][PSD_CKPT_ROOT_MAX];
    int num_ckpt_roots;
    size_t max_calls_per_peer; /* calls answered later in flight per peer (0: ZDIST_RPC_MAX_CALLS_PER_PEER) */
    size_t max_connections_per_peer; /* 0: ZDIST_RPC_MAX_CONNECTIONS_PER_PEER */
    /* --live-job-seconds: a job that wrote here within it is live, and a
       DROP_JOB of it is refused FAILED_PRECONDITION unless forced (0: no
       job is, every drop is done). */
    int64_t live_job_ms;
} psd_server_config_t;

/* zactor_new (psd_server_actor, &config): config is copied at start. After
   zactor_new returns, the actor sends one string on its pipe: "READY
   <endpoint>" when it serves, or "ERROR <message>" (and then ends). "$TERM"
   stops it after answering every request already received. */
void psd_server_actor(zsock_t *pipe, void *args);

#endif
