/* Fuzz target: the ps and coordinator services' request bodies
   (zdist/ps_service.h, zdist/coord_service.h) on arbitrary bytes, as the
   rpc server decodes them before a handler runs. Input layout: [body type:
   1 byte][the body's protobuf bytes]. The type byte picks types[] modulo
   its length, so a new type goes last: the seeds (tests/fuzz/corpus/bodies,
   type bytes 0..13) keep naming the body they were written for. The request
   carries no tensors, so a write's or push_pull's payload checks meet an
   empty message. A refusal always says why. */
#include <protobuf-c/protobuf-c.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/body.h"
#include "zdist/coord_service.h"
#include "zdist/ps_service.h"
#include "zdist/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const zdist_rpc_body_t *const types[] = {
        &zdist_ps_body_create,      &zdist_ps_body_pull,       &zdist_ps_body_pull_rows, &zdist_ps_body_write,
        &zdist_ps_body_save,        &zdist_ps_body_restore,    &zdist_ps_body_stats,     &zdist_ps_body_push_pull,
        &zdist_ps_body_set_optimizer, &zdist_coord_body_submit, &zdist_coord_body_status, &zdist_coord_body_cancel,
        &zdist_coord_body_list,   &zdist_ps_body_drop_job,
    };
    if (size < 1)
        return 0;
    const zdist_rpc_body_t *type = types[data[0] % (sizeof types / sizeof types[0])];
    if (!type->desc)
        return 0;
    ProtobufCMessage *pb = protobuf_c_message_unpack(type->desc, NULL, size - 1, data + 1);
    if (!pb)
        return 0;
    zdist_msg_t *req = zdist_msg_new(100);
    void *typed = calloc(1, type->size ? type->size : 1);
    zdist_error_t err = {0};
    if (typed && req && type->decode) {
        if (type->decode(pb, req, typed, &err) != 0 && err.text[0] == '\0')
            __builtin_trap(); /* a refusal always says why */
        if (type->release)
            type->release(typed); /* after a refusal too, as the rpc server does */
    }
    free(typed);
    zdist_msg_destroy(&req);
    protobuf_c_message_free_unpacked(pb, NULL);
    return 0;
}
