/* worker_run: a job trained in this process — `zdist-worker run`, which `zdist run` executes. */
#ifndef WORKER_RUN_H
#define WORKER_RUN_H

#define WORKER_RUN_OK 0
#define WORKER_RUN_FAILED 1
#define WORKER_RUN_USAGE 2

/* argv[0] = "run"; JOB.json [--json] [--steps N] [--quiet]. Returns an exit status. */
int worker_run_main(int argc, char **argv);

#endif
