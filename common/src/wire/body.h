/* body: the protobuf-c side of messages, private to libzdist — daemons see typed C structs only (STYLE.md rule 12). */
#ifndef ZDIST_WIRE_BODY_H
#define ZDIST_WIRE_BODY_H

#include <protobuf-c/protobuf-c.h>

#include "zdist/rpc.h"
#include "zdist/wire.h"

/* A method's request body type (zdist/rpc.h names it opaquely). The server
   unpacks `desc`, then `decode` fills a zeroed struct of `size` bytes and
   checks its values; the typed struct may borrow strings and arrays from
   the unpacked message, which lives exactly as long. decode NULL: the
   typed struct is the unpacked message itself (for bodies with nothing to
   check). release (may be NULL) frees what decode allocated. */
struct zdist_rpc_body_t {
    const ProtobufCMessageDescriptor *desc;
    size_t size;
    int (*decode)(const ProtobufCMessage *pb, const zdist_msg_t *request, void *ret, zdist_error_t *err);
    void (*release)(void *typed);
};

/* Packs body (any protobuf-c message; NULL clears) into the message.
   -ENOMEM on allocation failure. */
int zdist_msg_set_body(zdist_msg_t *self, const ProtobufCMessage *body);
/* A message of `method` with body packed (NULL: none): what every service's
   request builder sends. NULL when out of memory. */
zdist_msg_t *zdist_msg_new_body(uint32_t method, const ProtobufCMessage *body);
/* Unpacks the body as `desc`; the caller frees it with
   protobuf_c_message_free_unpacked. -EPROTO (and err) when it does not decode. */
int zdist_msg_unpack_body(const zdist_msg_t *self, const ProtobufCMessageDescriptor *desc,
                          ProtobufCMessage **ret_body, zdist_error_t *err);

/* Unpacks a reply's body and hands it to `read` (which copies what it
   keeps); frees it after. -EPROTO with err when it does not decode. */
int zdist_msg_read_body(const zdist_msg_t *self, const ProtobufCMessageDescriptor *desc,
                        int (*read)(const ProtobufCMessage *pb, void *arg, zdist_error_t *err), void *arg,
                        zdist_error_t *err);

#endif
