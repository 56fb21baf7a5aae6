/* zdist wire codec: frame 0 a protobuf-c header, frames 1..n raw tensor payloads.

   A zdist_msg_t is one request or reply. Outgoing payloads are attached
   zero-copy: libzmq sends the caller's buffer and calls its free function
   when done. Incoming payloads stay in the frames libzmq received into, and
   tensors point at them: valid until the message is destroyed.

   Not thread-safe: one message belongs to one thread at a time. */
#ifndef ZDIST_WIRE_H
#define ZDIST_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zdist/defs.h"
#include "zdist/error.h"
#include "zdist/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zdist_msg_t zdist_msg_t;

/* Called once when a zero-copy payload is no longer needed (sent, or the
   message destroyed unsent). May run on libzmq's I/O thread. */
typedef void(zdist_free_fn)(void *data, void *hint);

/* Hard limits on what a peer may send; checked before anything else. */
typedef struct {
    size_t max_message_bytes; /* header + payloads; default 256 MiB */
    size_t max_tensors;       /* payload frames; default 1024 */
} zdist_wire_limits_t;

ZDIST_EXPORT void zdist_wire_limits_default(zdist_wire_limits_t *limits);

ZDIST_EXPORT zdist_msg_t *zdist_msg_new(uint32_t method);
/* NULL-safe, idempotent; frees unsent payloads through their free functions. */
ZDIST_EXPORT void zdist_msg_destroy(zdist_msg_t **self_p);

/* Header fields. */
ZDIST_EXPORT uint32_t zdist_msg_method(const zdist_msg_t *self);
ZDIST_EXPORT void zdist_msg_set_method(zdist_msg_t *self, uint32_t method);
ZDIST_EXPORT uint64_t zdist_msg_request_id(const zdist_msg_t *self);
ZDIST_EXPORT void zdist_msg_set_request_id(zdist_msg_t *self, uint64_t id);
ZDIST_EXPORT int64_t zdist_msg_deadline_ms(const zdist_msg_t *self);
ZDIST_EXPORT void zdist_msg_set_deadline_ms(zdist_msg_t *self, int64_t budget_ms);
ZDIST_EXPORT uint64_t zdist_msg_incarnation(const zdist_msg_t *self);
ZDIST_EXPORT void zdist_msg_set_incarnation(zdist_msg_t *self, uint64_t incarnation);
ZDIST_EXPORT uint64_t zdist_msg_client_id(const zdist_msg_t *self);
ZDIST_EXPORT void zdist_msg_set_client_id(zdist_msg_t *self, uint64_t client_id);
ZDIST_EXPORT bool zdist_msg_more(const zdist_msg_t *self);
ZDIST_EXPORT void zdist_msg_set_more(zdist_msg_t *self, bool more);
/* Status of a reply (ZDIST_STATUS_*) and its message ("" when none). */
ZDIST_EXPORT int zdist_msg_status(const zdist_msg_t *self);
ZDIST_EXPORT const char *zdist_msg_status_message(const zdist_msg_t *self);
ZDIST_EXPORT void zdist_msg_set_status(zdist_msg_t *self, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Raw body bytes (borrowed). Bodies are set and read by the service
   classes of libzdist (ps, worker, coordinator), which give callers typed
   C structs; the protobuf-c types never leave the library. */
ZDIST_EXPORT const uint8_t *zdist_msg_body(const zdist_msg_t *self, size_t *ret_len);
/* Sets the body to a copy of len raw bytes (an encoded message, or what no
   encoder makes: a test's malformed body). 0 or -ENOMEM. */
ZDIST_EXPORT int zdist_msg_set_body_bytes(zdist_msg_t *self, const void *data, size_t len);

/* Attaches a payload without copying: data stays the caller's until `ffn`
   is called (ffn NULL: the caller guarantees data outlives the send, as for
   static tables). nbytes must equal dtype size x elements: -EINVAL if not,
   or if the dtype is not a data dtype; ffn is NOT called on failure. */
ZDIST_EXPORT int zdist_msg_add_tensor(zdist_msg_t *self, const char *name, zdist_dtype_t dtype,
                                      const zdist_shape_t *shape, void *data, size_t nbytes,
                                      zdist_free_fn *ffn, void *hint);
/* Same, copying data into a buffer the message owns. */
ZDIST_EXPORT int zdist_msg_add_tensor_copy(zdist_msg_t *self, const char *name, zdist_dtype_t dtype,
                                           const zdist_shape_t *shape, const void *data, size_t nbytes);
/* Same, allocating an uninitialised payload the caller fills through
   *ret_data before sending (the message owns it). */
ZDIST_EXPORT int zdist_msg_add_tensor_alloc(zdist_msg_t *self, const char *name, zdist_dtype_t dtype,
                                            const zdist_shape_t *shape, void **ret_data);
ZDIST_EXPORT size_t zdist_msg_tensor_count(const zdist_msg_t *self);
/* Borrowed view; NULL when index is out of range. Received tensors' data is
   writable: it belongs to this message. */
ZDIST_EXPORT const zdist_tensor_t *zdist_msg_tensor(const zdist_msg_t *self, size_t index);
/* Total bytes of header body and payloads (for accounting). */
ZDIST_EXPORT size_t zdist_msg_payload_bytes(const zdist_msg_t *self);

/* Routing identity (ROUTER sockets): copied from the received message into
   the reply so it goes back to the same peer. */
ZDIST_EXPORT int zdist_msg_copy_route(zdist_msg_t *dst, const zdist_msg_t *src);
/* Printable peer id for logs, e.g. "peer 00a3f1c2" ("" without a route). */
ZDIST_EXPORT const char *zdist_msg_peer(const zdist_msg_t *self);
/* A received message's User-Id (the certificate name the ZAP handler of
   zdist/auth.h gave a CURVE connection); NULL on a plain connection. */
ZDIST_EXPORT const char *zdist_msg_user_id(const zdist_msg_t *self);
/* The file descriptor of the TCP connection a message was received on
   (libzmq's ZMQ_SRCFD: what its socket monitor names connections by); -1
   for a message built here or from another transport. */
ZDIST_EXPORT int zdist_msg_source_fd(const zdist_msg_t *self);

/* Sends and destroys *msg_p (also on failure) on a raw libzmq socket. A ROUTER
   socket needs a route. Returns 0, -EAGAIN (would block with ZMQ_DONTWAIT in
   flags), -EHOSTUNREACH, or another negative errno. */
ZDIST_EXPORT int zdist_wire_send(void *socket, zdist_msg_t **msg_p, int flags);

/* Receives one whole multipart message, validating it against limits:
   version, header decode, frame count, payload lengths against dtype x shape,
   total size. Returns:
     0        *ret_msg is a valid message;
     -EAGAIN  nothing to read (ZMQ_DONTWAIT in flags);
     -EINTR   interrupted;
     -EPROTO  malformed: err says why; *ret_msg is still set (route and request
              id when known) so the caller can answer INVALID_ARGUMENT, and
              zdist_msg_request_id may be 0 when the header did not decode.
   `routed`: the socket is a ROUTER (first frame is the peer's identity). */
ZDIST_EXPORT int zdist_wire_recv(void *socket, bool routed, const zdist_wire_limits_t *limits, int flags,
                                 zdist_msg_t **ret_msg, zdist_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
