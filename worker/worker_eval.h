/* worker_eval: zdist-worker --evaluator, TensorFlow's SidecarEvaluator — evaluates each new checkpoint of running jobs. */
#ifndef WORKER_EVAL_H
#define WORKER_EVAL_H

#include <czmq.h>

#include "worker_agent.h"

/* zactor_new (worker_eval_actor, &config): the evaluator task's service
   (config.evaluator, config.state_dir set; config copied at start). Like
   worker_agent_actor it sends "READY <endpoint>" or "ERROR <message>" on
   its pipe and stops on "$TERM". It serves PING (and --http /metrics) on
   the task's address, and on a thread of its own watches
   STATE/jobs/<ID>/ (the coordinator's --state-dir, which must be readable
   here: a shared directory when the evaluator runs on another host):
   for every running job (parameter_server or multi_worker_mirrored) with
   a test set, the newest complete checkpoint (ckpt-STEP/ with its
   manifest.json) newer than the last one evaluated is read (every ps
   task's manifest-ps*.json and shard files, or multi_worker_mirrored's
   workers' state; CRC-checked), loaded into a one_device copy of the job's
   model and evaluated on the job's test set; checkpoints committed meanwhile are
   skipped (always the newest, as SidecarEvaluator). Each evaluation is
   appended, fsync'd, to STATE/jobs/<ID>/evaluations.jsonl as
   {"eval_step", "test_loss", "test_accuracy", "examples", "time",
   "eval_seconds"}; the coordinator shows the file in the job's status. A
   restarted evaluator reads that file and continues after its last
   eval_step. */
void worker_eval_actor(zsock_t *pipe, void *args);

#endif
