/* coord_state: a job's state.json, read back at start (coord_server writes it). */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coord_state.h"
#include "zdist/file.h"

void
coord_state_row_release(coord_state_row_t *row)
{
    if (!row)
        return;
    free(row->name);
    free(row->state);
    free(row->error);
    free(row->base_dir);
    free(row->detail);
    memset(row, 0, sizeof *row);
}

int
coord_state_read(const char *path, coord_state_row_t *ret, zdist_error_t *err)
{
    memset(ret, 0, sizeof *ret);
    void *buf = NULL;
    size_t len = 0;
    int rc = zdist_file_read(path, COORD_STATE_MAX_BYTES, &buf, &len, err);
    if (rc < 0)
        return rc;
    json_error_t jerr;
    json_t *st = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    free(buf);
    if (!st)
        return zdist_error_set(err, -EINVAL, "%s: not JSON (line %d: %s)", path, jerr.line, jerr.text);
    rc = zdist_json_crc_check(st, "crc32", true, path, err);
    if (rc < 0) {
        json_decref(st);
        return rc;
    }
    const char *state = NULL, *name = NULL, *error = NULL, *base = NULL;
    json_int_t step = 0, steps = 0, seq = 0, job_crc = 0;
    json_t *detail = NULL;
    if (json_unpack(st, "{s:s, s:s, s:I, s:I, s:s, s:s, s:I, s:o, s:I}", "state", &state, "name", &name, "step",
                    &step, "steps", &steps, "error", &error, "base_dir", &base, "seq", &seq, "detail", &detail,
                    "job_crc32", &job_crc) < 0) {
        json_decref(st);
        return zdist_error_set(err, -EINVAL, "%s: a field is missing or of the wrong type", path);
    }
    if (!json_is_object(detail) || job_crc < 0 || job_crc > (json_int_t) UINT32_MAX) {
        /* Said before the decref: detail belongs to st. */
        const char *why = json_is_object(detail) ? "job_crc32 is not a CRC-32 (0 .. 4294967295)"
                                                 : "detail is not an object";
        json_decref(st);
        return zdist_error_set(err, -EINVAL, "%s: %s", path, why);
    }
    ret->name = strdup(name);
    ret->state = strdup(state);
    ret->error = strdup(error);
    ret->base_dir = strdup(base);
    ret->detail = json_dumps(detail, JSON_COMPACT);
    ret->step = step;
    ret->steps = steps;
    ret->seq = seq;
    ret->job_crc = (uint32_t) job_crc;
    ret->variables_dropped = json_is_true(json_object_get(st, "variables_dropped"));
    json_decref(st);
    if (!ret->name || !ret->state || !ret->error || !ret->base_dir || !ret->detail) {
        coord_state_row_release(ret);
        return zdist_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}
