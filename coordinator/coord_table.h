/* coord_table: the coordinator's job table — a row per job, kept in STATE/jobs/ID (job.json as submitted,
   state.json its row), read back at start, and the rows as the coordinator service replies them. */
#ifndef COORD_TABLE_H
#define COORD_TABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "zdist/coord_service.h"
#include "zdist/error.h"
#include "zdist/rpc.h"

typedef struct {
    char id[ZDIST_COORD_ID_MAX];
    char *name;
    char *text;        /* the submitted document (job.json) */
    uint32_t text_crc; /* its CRC-32, kept in state.json */
    char *base_dir;
    char state[ZDIST_COORD_STATE_MAX];
    int64_t step, steps;
    char *error;
    char *detail;      /* JSON */
    int64_t seq;       /* submission order */
    int priority;      /* the job's: a higher one starts first */
    bool mwm;          /* multi_worker_mirrored or tpu (the ring): runs alone */
    bool ps;           /* parameter_server: its variables live on the psds */
    bool vars_dropped; /* ... and are dropped from every psd */
    int64_t last_persist_ms; /* state.json written from a runner's status (at most once a second) */
} coord_row_t;

/* The rows, in the order they were added (the server's thread only). */
typedef struct {
    char state_dir[1024];
    coord_row_t **rows;
    size_t n;
    int64_t next_seq;
} coord_table_t;

/* An empty table kept under state_dir. */
void coord_table_init(coord_table_t *t, const char *state_dir);
void coord_table_release(coord_table_t *t);
/* Jobs of earlier runs from STATE/jobs: finished ones as they ended,
   unfinished ones queued again; a job that cannot be read is logged and
   left out. */
void coord_table_load(coord_table_t *t);
/* A new queued row for a job the service has checked: its id, its dir
   with job.json, state.json; 0 with *ret (the table's), or -errno with
   err set. */
int coord_table_submit(coord_table_t *t, const zdist_coord_submit_request_t *req, coord_row_t **ret,
                       zdist_error_t *err);
/* The row of id; "" or NULL: the latest job. NULL when none. */
coord_row_t *coord_table_find(coord_table_t *t, const char *id);
/* Rows not yet done, failed or cancelled. */
size_t coord_table_unfinished(const coord_table_t *t);
/* STATE/jobs/ID into buf. */
void coord_table_dir(const coord_table_t *t, const coord_row_t *j, char *buf, size_t size);
/* Writes the row's state.json (a failure is logged: the table goes on). */
void coord_table_persist(coord_table_t *t, coord_row_t *j);
/* Bytes of a job's .jsonl file read, at most. */
#define COORD_TABLE_READ_BYTES (64u << 20)
/* Picks from a line of a .jsonl file (a JSON object): a new value to keep, or NULL to skip it. */
typedef json_t *(coord_table_pick_fn)(json_t *line);
/* The last `keep` values pick takes from STATE/jobs/ID/<file>, one JSON
   object a line (a line that does not parse is skipped): an array, empty
   when there is no such file. */
json_t *coord_table_jsonl(const coord_table_t *t, const coord_row_t *j, const char *file, size_t keep,
                          coord_table_pick_fn *pick);
/* The sidecar evaluator's results for a job (zdist-worker --evaluator
   appends them to STATE/jobs/ID/evaluations.jsonl): [{eval_step,
   test_loss, test_accuracy, examples, time, eval_seconds}, ...] by
   eval_step, the last COORD_TABLE_EVALS; a cut line is skipped. */
#define COORD_TABLE_EVALS 200
json_t *coord_table_evaluations(const coord_table_t *t, const coord_row_t *j);
/* Replies rows to call (STATUS, LIST); with detail, STATUS's per-task
   detail and the evaluator's results. 0 or a negative errno. */
int coord_table_reply(const coord_table_t *t, zdist_rpc_call_t *call, coord_row_t *const *rows, size_t n,
                      bool detail);


#endif
