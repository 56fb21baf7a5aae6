/* coord_call: one PREEMPT or JOIN to a chief under CURVE, as a chosen key, for test_join_keys.sh (a task's
   key asking what only another task may ask). Real requests through libzdist's coordinator codecs.

   usage: coord_call KEYS_DIR KEY CHIEF_ENDPOINT preempt TYPE INDEX
          coord_call KEYS_DIR KEY CHIEF_ENDPOINT join ENDPOINT PUBLIC_KEY
   Prints "OK" or "STATUS: message"; exits 0 on OK, 3 on a refusal, 1 when the chief did not answer. */
#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zdist/auth.h"
#include "zdist/coord_service.h"
#include "zdist/rpc.h"
#include "zdist/wire.h"

int
main(int argc, char **argv)
{
    if (argc != 7 || (strcmp(argv[4], "preempt") != 0 && strcmp(argv[4], "join") != 0)) {
        fprintf(stderr, "usage: coord_call KEYS_DIR KEY CHIEF_ENDPOINT preempt TYPE INDEX | join ENDPOINT PUBKEY\n");
        return 2;
    }
    zsys_init();
    zdist_keys_t *keys = NULL;
    zdist_error_t err = {0};
    if (zdist_keys_load(argv[1], argv[2], &keys, &err) < 0 || !keys ||
        zdist_keys_add_endpoint(keys, argv[3], "chief-0") < 0) {
        fprintf(stderr, "coord_call: --keys: %s\n", err.text);
        return 2;
    }
    zdist_keys_set_process(keys);
    zdist_msg_t *req = NULL;
    if (strcmp(argv[4], "preempt") == 0) {
        req = zdist_coord_request_preempt(argv[5], atoi(argv[6]));
    } else {
        zdist_coord_join_request_t j = {.endpoint = argv[5], .public_key = argv[6], .task_index = -1};
        req = zdist_coord_request_join(&j);
    }
    zdist_rpc_client_t *c = zdist_rpc_client_new(argv[3], NULL, &err);
    zdist_msg_t *reply = NULL;
    int rc = c ? zdist_rpc_client_call(c, &req, 10000, &reply) : -1;
    int exit_code = 1;
    if (rc == 0 && reply) {
        int status = zdist_msg_status(reply);
        if (status == ZDIST_STATUS_OK)
            printf("OK\n");
        else
            printf("%s: %s\n", zdist_status_name(status), zdist_msg_status_message(reply));
        exit_code = status == ZDIST_STATUS_OK ? 0 : 3;
    } else {
        printf("no answer (%d)\n", rc);
    }
    zdist_msg_destroy(&reply);
    zdist_msg_destroy(&req);
    zdist_rpc_client_destroy(&c);
    zdist_keys_destroy(&keys);
    return exit_code;
}
