/* coord_state: a job's state.json (its row of the coordinator's table), read back at start. */
#ifndef COORD_STATE_H
#define COORD_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "zdist/error.h"

/* Largest state.json read (its detail lists every task). */
#define COORD_STATE_MAX_BYTES (64u << 20)

typedef struct {
    char *name, *state, *error, *base_dir;
    char *detail; /* compact JSON */
    int64_t step, steps, seq;
    uint32_t job_crc; /* CRC-32 of the job's job.json */
    bool variables_dropped; /* its variables are off every psd (absent: false) */
} coord_state_row_t;

/* Reads path: JSON checked against its "crc32" (zdist_json_crc_check), with
   every field of the row present and of its type. 0 and *ret (release it),
   or a negative errno with err naming the file: -EINVAL (not JSON, a field
   missing or mistyped), -EBADMSG (damaged), -ENOMEM, or the file's error. */
int coord_state_read(const char *path, coord_state_row_t *ret, zdist_error_t *err);
/* NULL-safe; zeroes *row. */
void coord_state_row_release(coord_state_row_t *row);

#endif
