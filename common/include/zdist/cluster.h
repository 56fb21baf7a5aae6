/* zdist cluster resolver: TF_CONFIG (or a cluster file) -> jobs, task, master, roles. */
#ifndef ZDIST_CLUSTER_H
#define ZDIST_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "zdist/defs.h"
#include "zdist/endpoint.h" /* addresses follow its grammar; zdist_endpoint_split */
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cluster description TensorFlow's TFConfigClusterResolver reads:

     {"cluster": {"chief": ["host:port"], "worker": ["h1:p", "h2:p"],
                  "ps": {"0": "h3:p", "2": "h4:p"}},         (sparse job)
      "task": {"type": "worker", "index": 1},
      "rpc_layer": "grpc", "session_master": "..."}

   Semantics follow TensorFlow (tfconfig_cluster_resolver.py,
   multi_worker_util.py, server_lib.ClusterSpec):
   - every key is optional; a missing or empty TF_CONFIG is an empty config;
     other top-level keys ("environment", "job") and other task keys
     ("trial", "cloud") are accepted and ignored, as TF does;
   - task.type: a string, or a number turned into its Python str();
     task.index: an integer >= 0 or a string of digits;
   - a job is a list of "host:port" addresses (task i = element i), or an
     object {"INDEX": "host:port"} with digit-string keys (a sparse job);
   - rpc_layer "" is the same as no rpc_layer.
   zdist is stricter than TF and refuses, with a message naming the field
   (e.g. `cluster.worker[1]`, `task.index`) and the fix:
   - job names other than [A-Za-z0-9_-]{1,64};
   - addresses that are not host:port — host a DNS name, an IPv4 address or
     a [bracketed] IPv6 address, port 1..65535 (port 0 is refused: peers
     must know where to connect, and an ephemeral port is known to nobody);
   - an address used twice in the cluster (hosts compared case-insensitively);
   - a task whose type is not a job of the cluster (except "evaluator",
     which TF lets live outside the cluster), or whose index is not a task
     of its job.
   Messages are one line; user values in them are quoted, escaped and cut.

   Errors: functions taking `zdist_error_t *err` (may be NULL) fill it on
   failure: code -EINVAL for bad input, -ENOENT/-EACCES/... (the errno) for a
   cluster file that cannot be read, -ENOMEM. JSON syntax errors also set
   err->line and err->column (1-based, as jansson reports them); other errors
   leave them 0. Text starts with the source: "TF_CONFIG: ..." or
   "cluster file 'x.json': ...".

   Threads: a zdist_cluster_t is a plain value; concurrent reads are safe,
   writes (set_task, set_rpc_layer) need the caller's exclusion. */

typedef struct _zdist_cluster_t zdist_cluster_t;

/* The strategies (ARCHITECTURE.md, "Strategies"). */
typedef enum {
    ZDIST_STRATEGY_INVALID = -1,
    ZDIST_STRATEGY_PARAMETER_SERVER = 0,
    ZDIST_STRATEGY_MULTI_WORKER_MIRRORED,
    ZDIST_STRATEGY_MIRRORED,
    ZDIST_STRATEGY_CENTRAL_STORAGE,
    ZDIST_STRATEGY_ONE_DEVICE,
    /* TPUStrategy's model on CPU cores: mirrored replicas, each of
       logical_devices_per_replica threads (zdist/job.h). */
    ZDIST_STRATEGY_TPU,
} zdist_strategy_t;

/* "parameter_server", "multi_worker_mirrored", "mirrored",
   "central_storage", "one_device", "tpu"; NULL for anything else. */
ZDIST_EXPORT const char *zdist_strategy_name(zdist_strategy_t strategy);
/* multi_worker_mirrored and tpu: every worker holds whole replicas, kept
   in sync with the other workers' over the ring. */
ZDIST_EXPORT bool zdist_strategy_syncs_workers(zdist_strategy_t strategy);
/* Exact name -> enum; ZDIST_STRATEGY_INVALID when unknown or NULL. */
ZDIST_EXPORT zdist_strategy_t zdist_strategy_from_name(const char *name);
/* As from_name, but an unknown name is -EINVAL with a message listing the
   valid names. ret written only on success. */
ZDIST_EXPORT int zdist_strategy_parse(const char *name, zdist_strategy_t *ret, zdist_error_t *err);

/* ---- creating ---- */

/* Parses and validates a TF_CONFIG JSON text. source_name says where the
   text came from in messages (NULL = "TF_CONFIG"). Returns a new cluster
   the caller destroys, or NULL with err filled. */
ZDIST_EXPORT zdist_cluster_t *zdist_cluster_parse(const char *json_text, const char *source_name,
                                                  zdist_error_t *err);
/* Reads cluster_file when not NULL (source "cluster file 'PATH'", the
   environment is then not consulted), else the TF_CONFIG environment
   variable (unset or blank = empty config). Parses and validates as above. */
ZDIST_EXPORT zdist_cluster_t *zdist_cluster_from_env_or_file(const char *cluster_file, zdist_error_t *err);
/* What every daemon does at start: from_env_or_file(cluster_file), then
   the --task override task_spec "TYPE:INDEX" when not NULL (it replaces the
   config's task, which then need not name a task of the cluster, though its
   JSON types are still checked), then validation.
   Returns 0 and *ret (the caller's), or a negative errno with err filled;
   *ret is written only on success. */
ZDIST_EXPORT int zdist_cluster_load(const char *cluster_file, const char *task_spec, zdist_cluster_t **ret,
                                    zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. */
ZDIST_EXPORT void zdist_cluster_destroy(zdist_cluster_t **self_p);

/* ---- jobs and tasks ---- */

/* Jobs in name order (strcmp). job_name returns NULL when i is out of range;
   the string is borrowed from the cluster. */
ZDIST_EXPORT size_t zdist_cluster_num_jobs(const zdist_cluster_t *self);
ZDIST_EXPORT const char *zdist_cluster_job_name(const zdist_cluster_t *self, size_t i);
ZDIST_EXPORT bool zdist_cluster_has_job(const zdist_cluster_t *self, const char *job);
/* True when the job was written as an {"INDEX": address} object. */
ZDIST_EXPORT bool zdist_cluster_job_is_sparse(const zdist_cluster_t *self, const char *job);
/* Number of tasks of a job (0 when absent). For a sparse job this is the
   number of entries, as len() in TF, not the largest index + 1. */
ZDIST_EXPORT size_t zdist_cluster_num_tasks(const zdist_cluster_t *self, const char *job);
/* The i-th task of a job in index order: its index and address (borrowed).
   0, or -ENOENT when the job is absent or i out of range. Outputs are
   written only on success; either may be NULL. */
ZDIST_EXPORT int zdist_cluster_job_task(const zdist_cluster_t *self, const char *job, size_t i,
                                        int *ret_index, const char **ret_address);
/* "host:port" of task (job, index), borrowed; NULL when there is none. */
ZDIST_EXPORT const char *zdist_cluster_task_address(const zdist_cluster_t *self, const char *job, int index);
/* ZeroMQ endpoint "tcp://host:port" to connect to task (job, index).
   0, -ENOENT (no such task), -ENOSPC (buffer too small; buf then holds "").
   rpc_layer does not matter here: zdist always speaks ZeroMQ over TCP. */
ZDIST_EXPORT int zdist_cluster_endpoint(const zdist_cluster_t *self, const char *job, int index, char *buf,
                                        size_t size);
/* ZeroMQ endpoint the current task binds: "tcp://IP:port" when its host is
   an IP literal, "tcp://127.0.0.1:port" for "localhost", and the wildcard
   (every interface, written *:port after the tcp scheme) for any other host
   name: ZeroMQ cannot bind a DNS name, and TF's servers likewise listen on
   every interface.
   0, -ENOENT (no current task or it is not in the cluster), -ENOSPC. */
ZDIST_EXPORT int zdist_cluster_bind_endpoint(const zdist_cluster_t *self, char *buf, size_t size);

/* ---- current task ---- */

/* Borrowed; NULL when TF_CONFIG names no task type. */
ZDIST_EXPORT const char *zdist_cluster_task_type(const zdist_cluster_t *self);
/* The task index, or -1 when TF_CONFIG names none. */
ZDIST_EXPORT int zdist_cluster_task_id(const zdist_cluster_t *self);
/* True when both a task type and a task index are known. */
ZDIST_EXPORT bool zdist_cluster_has_task(const zdist_cluster_t *self);
/* Replaces the current task (both type and index, like TFConfigClusterResolver's
   task_type/task_id arguments) after validating it against the cluster:
   0, or -EINVAL (the cluster is unchanged) or -ENOMEM. */
ZDIST_EXPORT int zdist_cluster_set_task(zdist_cluster_t *self, const char *type, int index,
                                        zdist_error_t *err);
/* Same from "TYPE:INDEX" (the --task flag); a bad spec is -EINVAL. */
ZDIST_EXPORT int zdist_cluster_set_task_spec(zdist_cluster_t *self, const char *task_spec,
                                             zdist_error_t *err);

/* ---- rpc layer and master ---- */

/* Borrowed; NULL when there is none. */
ZDIST_EXPORT const char *zdist_cluster_rpc_layer(const zdist_cluster_t *self);
/* Overrides rpc_layer (the --rpc-layer flag); NULL or "" clears it. The name
   must be a URI scheme ([A-Za-z][A-Za-z0-9+.-]*, e.g. "grpc", "grpc+verbs").
   0, -EINVAL (unchanged), -ENOMEM. */
ZDIST_EXPORT int zdist_cluster_set_rpc_layer(zdist_cluster_t *self, const char *rpc_layer,
                                             zdist_error_t *err);
/* TF_CONFIG's session_master, borrowed; NULL when absent or null. */
ZDIST_EXPORT const char *zdist_cluster_session_master(const zdist_cluster_t *self);
/* TFConfigClusterResolver.master(), in this order:
   1. session_master when TF_CONFIG sets it (returned as is);
   2. "" when the cluster is empty or holds a single job with a single task
      (TF: "we are the only job in the ClusterSpec");
   3. "" when there is no current task, or its job is not in the cluster
      (TF raises there; an evaluator outside the cluster is the usual case);
   4. "RPC_LAYER://ADDRESS" of the current task, or ADDRESS without rpc_layer.
   Returns a new string the caller frees; NULL only when out of memory. */
ZDIST_EXPORT char *zdist_cluster_master(const zdist_cluster_t *self);

/* ---- roles (multi_worker_util) ---- */

/* chief -> true; evaluator -> true; worker 0 when there is no chief job ->
   true; anything else, or no current task -> false. */
ZDIST_EXPORT bool zdist_cluster_is_chief(const zdist_cluster_t *self);
/* chief -> 0; worker i -> i + number of chief tasks; evaluator -> its index;
   ps, other types or no current task -> -1 (TF: no id). */
ZDIST_EXPORT int zdist_cluster_id_in_cluster(const zdist_cluster_t *self);
/* id_in_cluster() != -1. */
ZDIST_EXPORT bool zdist_cluster_has_id_in_cluster(const zdist_cluster_t *self);
/* Number of chief tasks + number of worker tasks (the chief also trains);
   for an evaluator task, the number of evaluator tasks (TF: the evaluator
   lives in its own partition of the cluster). */
ZDIST_EXPORT int zdist_cluster_worker_count(const zdist_cluster_t *self);

/* ---- strategy checks ---- */

/* Checks the cluster for a strategy (parameter_server_strategy_v2.py,
   multi_worker_util._validate_cluster_spec):
   - every strategy: at most one chief task and at most one evaluator task;
   - parameter_server and multi_worker_mirrored: at least one worker task;
   - parameter_server: at least one ps task, and no jobs other than
     chief, worker, ps and evaluator.
   0, or -EINVAL with a message naming the job and the fix. */
ZDIST_EXPORT int zdist_cluster_validate(const zdist_cluster_t *self, zdist_strategy_t strategy,
                                        zdist_error_t *err);

/* ---- output ---- */

/* The `zdist resolve` document, one line, keys in this order:
   {"task_type": str|null, "task_id": int|null, "rpc_layer": str|null,
    "master": str, "cluster": {JOB: [addr, ...] | {"INDEX": addr, ...}},
    "is_chief": bool, "id_in_cluster": int|null, "worker_count": int}
   Jobs in name order; a sparse job is an object with keys in numeric order.
   Returns a new string the caller frees; NULL only when out of memory. */
ZDIST_EXPORT char *zdist_cluster_to_json(const zdist_cluster_t *self);

#ifdef __cplusplus
}
#endif
#endif
