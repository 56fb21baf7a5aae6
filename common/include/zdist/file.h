/* zdist file: crash-safe writes (temp file, fsync, rename, directory fsync) with a CRC-32, bounded whole-file
   reads, and JSON documents sealed with the CRC-32 of their canonical form.

   Every checkpoint, manifest and state file of every daemon is written
   through zdist_file_write: a reader sees the old file or the new one,
   never half of one, and a write that fails (a full disk) leaves the old
   file in place. Errors are negative errno with err naming the path. */
#ifndef ZDIST_FILE_H
#define ZDIST_FILE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One contiguous part of a file's contents (borrowed). */
typedef struct {
    const void *buf;
    size_t len;
} zdist_file_piece_t;

/* CRC-32 (zlib's polynomial) of len bytes continuing crc; start with 0.
   Any length (zlib's 32-bit length limit is split internally). */
ZDIST_EXPORT uint32_t zdist_crc32(uint32_t crc, const void *buf, size_t len);

/* Writes the pieces, in order, to `path` atomically: a temp file beside it
   (".NAME.tmp-PID"), fsync, rename over path, fsync of the directory. The
   file gets `mode` (e.g. 0644; the umask applies). ret_crc (may be NULL)
   receives the CRC-32 of everything written. On failure nothing at path
   changed and the temp file is gone. */
ZDIST_EXPORT int zdist_file_write(const char *path, const zdist_file_piece_t *pieces, int npieces, unsigned mode,
                                  uint32_t *ret_crc, zdist_error_t *err);
/* The same written in pieces as they are made (a checkpoint far larger
   than the memory spare for a copy of it): zdist_file_out_new opens the
   temp file, zdist_file_out_write appends (buffered: small records cost
   no system call each; the first error sticks and is returned again),
   zdist_file_out_commit flushes, fsyncs, renames over path, fsyncs the
   directory and frees the writer (ret_crc, ret_bytes may be NULL: the
   CRC-32 and length of everything written). zdist_file_out_destroy
   abandons one not committed: the temp file goes, path is untouched.
   _new returns NULL with err on failure. */
typedef struct zdist_file_out_t zdist_file_out_t;
ZDIST_EXPORT zdist_file_out_t *zdist_file_out_new(const char *path, unsigned mode, zdist_error_t *err);
ZDIST_EXPORT int zdist_file_out_write(zdist_file_out_t *self, const void *buf, size_t len);
ZDIST_EXPORT int zdist_file_out_commit(zdist_file_out_t **self_p, uint32_t *ret_crc, uint64_t *ret_bytes,
                                       zdist_error_t *err);
ZDIST_EXPORT void zdist_file_out_destroy(zdist_file_out_t **self_p);

/* The same for one NUL-terminated text (without its NUL). */
ZDIST_EXPORT int zdist_file_write_text(const char *path, const char *text, zdist_error_t *err);

/* Reads the whole file into a new buffer (the caller frees it), NUL
   terminated after len bytes for text use. -ENOENT when it does not exist,
   -EFBIG when it is larger than max_bytes. */
ZDIST_EXPORT int zdist_file_read(const char *path, size_t max_bytes, void **ret_buf, size_t *ret_len,
                                 zdist_error_t *err);

/* fsync of a directory, so a rename or unlink in it survives a crash. */
ZDIST_EXPORT int zdist_file_sync_dir(const char *dir, zdist_error_t *err);

/* Sealed JSON documents (manifests, state files). The member `field` of an
   object (e.g. "crc32") holds, as a JSON integer, the CRC-32 of the rest of
   the object in its canonical form: json_dumps with JSON_COMPACT |
   JSON_SORT_KEYS, without that member. Any change to a key or value is
   caught; whitespace and member order are not part of it. */

/* Sets doc's `field` to the CRC-32 of the rest of doc, replacing an earlier
   one. 0, -EINVAL when doc is not an object, or -ENOMEM. */
ZDIST_EXPORT int zdist_json_crc_seal(json_t *doc, const char *field, zdist_error_t *err);

/* Checks doc's `field` against the rest of doc and, when it matches,
   removes it (doc is again what was sealed). A doc without `field` passes
   unless `required` (files from before it was sealed). Otherwise -EBADMSG
   with err "NAME is damaged (...)" naming `name` (the file) and the field:
   not an object, no field, a field that is not an integer, or a CRC-32 that
   differs; -ENOMEM. doc is unchanged on failure. */
ZDIST_EXPORT int zdist_json_crc_check(json_t *doc, const char *field, bool required, const char *name,
                                      zdist_error_t *err);

/* Reads and parses the JSON file at path (at most max_bytes) and, when
   crc_field is not NULL, checks and removes that sealed CRC-32 member
   (zdist_json_crc_check, not required). A new reference, or NULL with err:
   -ENOENT, -EFBIG, -EBADMSG "PATH is damaged: not JSON (...)" or the CRC's
   error, -ENOMEM. */
ZDIST_EXPORT json_t *zdist_json_read(const char *path, size_t max_bytes, const char *crc_field,
                                     zdist_error_t *err);

/* Seals doc (zdist_json_crc_seal) and writes it to path crash-safe
   (zdist_file_write_text) as JSON_INDENT(1) | JSON_SORT_KEYS text. */
ZDIST_EXPORT int zdist_json_write_sealed(const char *path, json_t *doc, const char *field,
                                         zdist_error_t *err);

/* Paths an operator confines peers to. zdist_path_under: path lies strictly
   below root (both absolute, root canonical without a trailing slash unless
   it is "/"), compared component by component, path's "." and repeated
   slashes skipped. zdist_path_has_dotdot: a ".." component anywhere. */
ZDIST_EXPORT bool zdist_path_under(const char *path, const char *root);
ZDIST_EXPORT bool zdist_path_has_dotdot(const char *path);

#ifdef __cplusplus
}
#endif
#endif
