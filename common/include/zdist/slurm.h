/* zdist on Slurm: a job step's allocation read as TensorFlow's
   SlurmClusterResolver reads it, turned into the TF_CONFIG a daemon takes. */
#ifndef ZDIST_SLURM_H
#define ZDIST_SLURM_H

#include "zdist/defs.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The semantics are those of tensorflow/python/distribute/cluster_resolver/
   slurm_cluster_resolver.py, GPU assignment aside (zdist assigns none):
   - the hosts are SLURM_STEP_NODELIST expanded (`n[1-2],m5,o[3-4,6,7-9]`;
     a range keeps its first bound's digits: `gpu-[01-02]` is gpu-01, gpu-02),
     paired in order with SLURM_STEP_TASKS_PER_NODE expanded (`3(x2),2,1` is
     3, 3, 2, 1; a host named twice keeps its last count);
   - every host in sorted order takes tasks host:port_base, host:port_base+1,
     ... as many as it runs; the jobs, sorted by name, take those addresses in
     turn, as many as each job counts (`{"ps": 2, "worker": 4}`: ps gets the
     first two);
   - this task is rank SLURM_PROCID of that list: its job and index;
   - the job counts must add up to the tasks Slurm assigned.
   Errors carry TensorFlow's texts ("SLURM_PROCID not found in environment.
   Not running inside a SLURM step?", "Requested 6 tasks but only 4 were
   assigned.", "Invalid hostlist format ...", "Invalid tasks-per-node list
   format ..."). */

#define ZDIST_SLURM_MAX_JOBS 16
#define ZDIST_SLURM_MAX_TASKS 65536

typedef struct {
    char name[64];
    int count;
} zdist_slurm_job_t;

/* "ps=2,worker=4" (zdist's --jobs; TF's `jobs` dict): names of letters,
   digits, '_' and '-', counts 0..65536, each name once. -EINVAL naming the
   flag and the fault. */
ZDIST_EXPORT int zdist_slurm_parse_jobs(const char *text, zdist_slurm_job_t *jobs, int max, int *ret_n,
                                        zdist_error_t *err);

/* The variables read, as strings (NULL: not set). */
typedef struct {
    const char *procid;         /* SLURM_PROCID */
    const char *nodelist;       /* SLURM_STEP_NODELIST */
    const char *tasks_per_node; /* SLURM_STEP_TASKS_PER_NODE */
    const char *num_tasks;      /* SLURM_STEP_NUM_TASKS: the jobs when none are given */
    int fixed_tasks_per_node;   /* > 0: every host runs this many (TF's tasks_per_node=N) */
} zdist_slurm_env_t;

/* Reads them from the environment (pointers into it). */
ZDIST_EXPORT zdist_slurm_env_t zdist_slurm_env_get(void);

/* Expands a hostlist into *ret (a NULL-terminated array of strings, all in
   one allocation: free(*ret) frees it) and *ret_n. -EINVAL with TF's text. */
ZDIST_EXPORT int zdist_slurm_expand_hostlist(const char *hostlist, char ***ret, int *ret_n, zdist_error_t *err);
/* Expands a tasks-per-node list into *ret (malloc'd) and *ret_n. */
ZDIST_EXPORT int zdist_slurm_expand_tasks_per_node(const char *text, int **ret, int *ret_n, zdist_error_t *err);

/* The TF_CONFIG text for this task: {"cluster": {job: ["host:port", ...]},
   "task": {"type": job, "index": i}} (jobs of 0 tasks left out), to be read
   by zdist_cluster_parse. No jobs (njobs 0): SLURM_STEP_NUM_TASKS workers,
   as TF's default. *ret is the caller's to free. port_base 1..65535, and no
   task's port past 65535 (TF's default base is 8888). */
ZDIST_EXPORT int zdist_slurm_tf_config(const zdist_slurm_env_t *env, const zdist_slurm_job_t *jobs, int njobs,
                                       int port_base, char **ret, zdist_error_t *err);

/* What --slurm means on a command line: this process's environment
   (zdist_slurm_env_get), jobs_text as --jobs (NULL: TF's default),
   port_base (0: 8888) and tasks_per_node (0: Slurm's own count), resolved
   with zdist_slurm_tf_config into *ret (the caller's to free). */
ZDIST_EXPORT int zdist_slurm_resolve(const char *jobs_text, int port_base, int tasks_per_node, char **ret,
                                     zdist_error_t *err);

#ifdef __cplusplus
}
#endif

#endif
