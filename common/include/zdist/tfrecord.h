/* zdist TFRecord files: TensorFlow's record container, read and written
   record by record, every CRC checked, uncompressed or GZIP. */
#ifndef ZDIST_TFRECORD_H
#define ZDIST_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The format (tf.io.TFRecordWriter, tf.data.TFRecordDataset): a file is a
   sequence of records, each

       uint64  length          little-endian
       uint32  masked CRC-32C of the 8 length bytes
       byte    data[length]
       uint32  masked CRC-32C of data

   where mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. With
   GZIP (TFRecordOptions(compression_type="GZIP")) that byte stream is
   gzip-compressed as a whole; offsets below count bytes of the
   uncompressed stream, as TensorFlow's do.

   Thread rules: a reader or writer is used by one thread at a time. */

/* CRC-32C (Castagnoli) of n bytes, continuing from crc (0 to start).
   SSE 4.2's crc32 instruction where the processor has it (picked once, at
   the first call), else tables: both give the same value. */
ZDIST_EXPORT uint32_t zdist_crc32c_extend(uint32_t crc, const void *data, size_t n);
ZDIST_EXPORT uint32_t zdist_crc32c_mask(uint32_t crc);
ZDIST_EXPORT uint32_t zdist_crc32c_unmask(uint32_t masked);

typedef enum {
    ZDIST_TFRECORD_NONE = 0, /* "" or "NONE" in TensorFlow */
    ZDIST_TFRECORD_GZIP = 1, /* "GZIP" */
} zdist_tfrecord_compression_t;

/* "none", "" and "gzip", in any case (TensorFlow spells them "", "NONE",
   "GZIP"). -EINVAL with a message naming the accepted values otherwise;
   *ret written only on success. */
ZDIST_EXPORT int zdist_tfrecord_compression_parse(const char *text, zdist_tfrecord_compression_t *ret,
                                                  zdist_error_t *err);

/* The largest record a reader accepts (a corrupt length that passed its
   CRC by chance must not make it allocate without bound). */
#define ZDIST_TFRECORD_MAX_RECORD (INT64_C(1) << 30)

typedef struct zdist_tfrecord_reader_t zdist_tfrecord_reader_t;

/* Opens path for reading. Uncompressed regular files are mapped (records
   are then handed out without a copy); GZIP files and anything that cannot
   be mapped are read through a buffer. A file opened as GZIP that does not
   start with gzip's magic bytes is refused (-EINVAL, naming the file and
   the compression setting). NULL with err filled on failure. */
ZDIST_EXPORT zdist_tfrecord_reader_t *zdist_tfrecord_reader_open(const char *path,
                                                                 zdist_tfrecord_compression_t compression,
                                                                 zdist_error_t *err);
/* NULL-safe, idempotent; nulls *self_p. */
ZDIST_EXPORT void zdist_tfrecord_reader_destroy(zdist_tfrecord_reader_t **self_p);

/* The next record: 1 with *ret_data / *ret_len set (borrowed, valid until
   the next call or destroy); 0 at the end of the file; else a negative
   errno and err filled, naming the file and TensorFlow's text:
   -EBADMSG (DATA_LOSS) "corrupted record at OFFSET" (a CRC that does not
   match; " (Is this even a TFRecord file?)" added at offset 0, as
   TensorFlow does) or "truncated record at OFFSET" (the file ends inside a
   record); -EFBIG for a length over ZDIST_TFRECORD_MAX_RECORD; -EIO and
   friends for a failed read. OFFSET is where the record starts. After an
   error the reader stays at that record: every later call fails the same
   way. */
ZDIST_EXPORT int zdist_tfrecord_reader_next(zdist_tfrecord_reader_t *self, const uint8_t **ret_data,
                                            size_t *ret_len, zdist_error_t *err);
/* Where the next record starts (uncompressed bytes). */
ZDIST_EXPORT uint64_t zdist_tfrecord_reader_offset(const zdist_tfrecord_reader_t *self);
/* Records returned so far. */
ZDIST_EXPORT int64_t zdist_tfrecord_reader_count(const zdist_tfrecord_reader_t *self);
/* The path it was opened with (borrowed). */
ZDIST_EXPORT const char *zdist_tfrecord_reader_path(const zdist_tfrecord_reader_t *self);

typedef struct zdist_tfrecord_writer_t zdist_tfrecord_writer_t;

/* Creates path's temporary sibling and writes records there; close
   renames it over path, so a reader never sees a partial file. GZIP
   output is what tf.io.TFRecordWriter with compression_type "GZIP" reads.
   NULL with err filled on failure. */
ZDIST_EXPORT zdist_tfrecord_writer_t *zdist_tfrecord_writer_open(const char *path,
                                                                 zdist_tfrecord_compression_t compression,
                                                                 zdist_error_t *err);
/* Appends one record. -EFBIG above ZDIST_TFRECORD_MAX_RECORD, -EIO etc.
   for a failed write (the file is then abandoned at close). */
ZDIST_EXPORT int zdist_tfrecord_writer_write(zdist_tfrecord_writer_t *self, const void *data, size_t len);
/* Flushes, syncs and renames into place; on any earlier or present
   failure removes the temporary file instead and returns the error.
   Nulls *self_p; NULL-safe (returns 0). */
ZDIST_EXPORT int zdist_tfrecord_writer_close(zdist_tfrecord_writer_t **self_p, zdist_error_t *err);
/* Gives up: removes the temporary file. NULL-safe, idempotent. */
ZDIST_EXPORT void zdist_tfrecord_writer_destroy(zdist_tfrecord_writer_t **self_p);

#ifdef __cplusplus
}
#endif

#endif
