/* Fuzz target: the worker service's request bodies (zdist/worker_service.h) on arbitrary bytes.
   Input layout: [body type: 1 byte, mod 7][the body's protobuf bytes]. A body
   that decodes must hold what its declaration promises. */
#include <protobuf-c/protobuf-c.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/body.h"
#include "zdist/worker_service.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
s_check(const zdist_rpc_body_t *type, const void *typed)
{
    if (type == &zdist_worker_body_start_job) {
        const zdist_worker_start_t *q = typed;
        if (!q->job || zdist_job_validate(q->job, NULL) != 0 || q->num_ps > ZDIST_WORKER_MAX_PS ||
            q->num_workers < 0 || q->ps_timeout_ms < 0 || q->collective_timeout_ms < 0)
            __builtin_trap();
        for (size_t i = 0; i < q->num_ps; i++)
            if (!q->ps_endpoints[i] || !*q->ps_endpoints[i])
                __builtin_trap();
    } else if (type == &zdist_worker_body_run_steps) {
        const zdist_worker_run_t *q = typed;
        if (!q->job || q->steps < 0 || q->steps > ZDIST_WORKER_MAX_STEPS_PER_CALL)
            __builtin_trap();
    } else if (type == &zdist_worker_body_connect) {
        const zdist_worker_connect_t *q = typed;
        if (!q->job || q->num_endpoints > ZDIST_WORKER_MAX_RING)
            __builtin_trap();
        for (size_t i = 0; i < q->num_endpoints; i++)
            if (strncmp(q->endpoints[i], "tcp://", 6) != 0 || strchr(q->endpoints[i], '*'))
                __builtin_trap();
    } else if (type == &zdist_worker_body_set_state) {
        const zdist_worker_state_t *q = typed;
        if (!q->job || q->step < 0 || q->iterations < 0 || q->skip_steps < 0)
            __builtin_trap();
    } else if (!((const zdist_worker_job_arg_t *) typed)->job) {
        __builtin_trap();
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const zdist_rpc_body_t *const types[] = {
        &zdist_worker_body_start_job, &zdist_worker_body_run_steps, &zdist_worker_body_evaluate,
        &zdist_worker_body_stop_job,  &zdist_worker_body_get_state, &zdist_worker_body_connect,
        &zdist_worker_body_set_state,
    };
    if (size < 1)
        return 0;
    const zdist_rpc_body_t *type = types[data[0] % (sizeof types / sizeof types[0])];
    ProtobufCMessage *pb = protobuf_c_message_unpack(type->desc, NULL, size - 1, data + 1);
    if (!pb)
        return 0;
    void *typed = calloc(1, type->size);
    zdist_error_t err = {0};
    if (typed && type->decode(pb, NULL, typed, &err) == 0)
        s_check(type, typed);
    else if (typed && err.text[0] == '\0')
        __builtin_trap(); /* a refusal always says why */
    if (typed && type->release)
        type->release(typed);
    free(typed);
    protobuf_c_message_free_unpacked(pb, NULL);
    return 0;
}
