/* zdist keys: CurveZMQ certificates in a key directory, who a peer is, and
   the ZAP handler that admits only the directory's keys.

   A key directory holds one czmq zcert pair per task and per person or
   script: NAME.key (public) and NAME.key_secret (secret, mode 0600), written
   by `zdist keygen NAME`. A daemon serves as its task's certificate
   ("ps-0", "worker-1", "chief-0"); the client uses --key NAME ("client" by
   default). A peer's role follows from its certificate's name: ps-*,
   worker-*, chief-*, evaluator-*, anything else is a client.

   With keys, every RPC server socket is a CURVE server with its own
   certificate, every client socket a CURVE client that checks the server's
   public key, and a ZAP handler (one per ZeroMQ context, refcounted) admits
   only the directory's public keys and hands ZeroMQ the certificate's name
   as the connection's User-Id, which the RPC server maps to a role.

   Thread rule: a zdist_keys_t is read-only after zdist_keys_load and its
   cluster/endpoint calls; any thread may read it. zdist_keys_add_endpoint
   alone may also be called later, from one thread, while others read (the
   chief learns the certificate of a worker that joins). */
#ifndef ZDIST_AUTH_H
#define ZDIST_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "zdist/cluster.h"
#include "zdist/defs.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Roles as a bitmask, for zdist_rpc_method_t.allow (0 = everyone). */
#define ZDIST_ROLE_CLIENT (1u << 0)
#define ZDIST_ROLE_PS (1u << 1)
#define ZDIST_ROLE_WORKER (1u << 2)
#define ZDIST_ROLE_CHIEF (1u << 3)
#define ZDIST_ROLE_EVALUATOR (1u << 4)

/* Where the directory comes from when no --keys is given. */
#define ZDIST_KEYS_ENV "ZDIST_KEYS_DIR"

typedef struct zdist_keys_t zdist_keys_t;

/* Writes a new certificate pair DIR/NAME.key and DIR/NAME.key_secret (mode
   0600). NAME: letters, digits, '-', '_', '.'; not starting with '.'.
   -EEXIST (naming the path) unless force; -EINVAL for a bad name. */
ZDIST_EXPORT int zdist_keys_generate(const char *dir, const char *name, bool force, zdist_error_t *err);

/* Loads the key directory `dir` (NULL: $ZDIST_KEYS_DIR; neither: no keys,
   *ret_keys = NULL and 0) and this process's own certificate
   DIR/SELF_NAME.key_secret. Every *.key in DIR is a public key the ZAP
   handler admits. Errors name the path and the fix. The caller destroys. */
ZDIST_EXPORT int zdist_keys_load(const char *dir, const char *self_name, zdist_keys_t **ret_keys,
                                 zdist_error_t *err);
/* NULL-safe, idempotent; stops the ZAP handlers this object started. */
ZDIST_EXPORT void zdist_keys_destroy(zdist_keys_t **self_p);

ZDIST_EXPORT const char *zdist_keys_dir(const zdist_keys_t *self);
ZDIST_EXPORT const char *zdist_keys_self_name(const zdist_keys_t *self);
/* Z85 public key of the certificate NAME in the directory; NULL when none. */
ZDIST_EXPORT const char *zdist_keys_public(const zdist_keys_t *self, const char *name);
/* The role of a certificate name (never 0: unknown names are clients). */
ZDIST_EXPORT unsigned zdist_keys_role_of(const char *name);

/* Learns which task serves which endpoint ("tcp://127.0.0.1:5000" ->
   "ps-0"), so a client that connects by endpoint finds the server's key. */
ZDIST_EXPORT int zdist_keys_learn_cluster(zdist_keys_t *self, const zdist_cluster_t *cluster);
ZDIST_EXPORT int zdist_keys_add_endpoint(zdist_keys_t *self, const char *endpoint, const char *name);
/* The certificate name serving `endpoint`: learned (the cluster, the key
   directory's `servers` file, zdist_keys_add_endpoint), else the default
   server (zdist_keys_set_default_server); NULL when neither. */
ZDIST_EXPORT const char *zdist_keys_name_at(const zdist_keys_t *self, const char *endpoint);
/* The certificate a client trusts at an endpoint it has not learned (the
   CLI's --server-key NAME: a command given an address without TF_CONFIG).
   -EINVAL for a bad name, -ENOENT (err naming the file) when DIR/NAME.key
   is missing. */
ZDIST_EXPORT int zdist_keys_set_default_server(zdist_keys_t *self, const char *name, zdist_error_t *err);

/* zdist_keys_load also reads DIR/servers when there: one "HOST:PORT NAME"
   (or "tcp://HOST:PORT NAME") per line, '#' comments, so a command given
   an address finds its server's key without TF_CONFIG. A malformed line is
   -EINVAL naming the file and line. */
#define ZDIST_KEYS_SERVERS_FILE "servers"

/* Makes a libzmq socket a CURVE server with this process's certificate,
   starting the ZAP handler of the socket's context `zmq_ctx` (NULL: czmq's)
   first. Call before bind. */
ZDIST_EXPORT int zdist_keys_apply_server(zdist_keys_t *self, void *zmq_ctx, void *socket, zdist_error_t *err);
/* Releases one hold on the ZAP handler of a context other than czmq's,
   taken by zdist_keys_apply_server; the last release stops it. Call before
   zmq_ctx_term of that context. */
ZDIST_EXPORT void zdist_keys_zap_release(void *zmq_ctx);
/* Makes a libzmq socket a CURVE client with this process's certificate,
   trusting the certificate `server_name` as the server. Call before connect. */
ZDIST_EXPORT int zdist_keys_apply_client(const zdist_keys_t *self, void *socket, const char *server_name,
                                         zdist_error_t *err);

/* The keys every RPC server and client of this process uses unless their
   options say otherwise (set once in main, before any socket; NULL: none).
   Borrowed: the caller keeps it alive while sockets use it. */
ZDIST_EXPORT void zdist_keys_set_process(zdist_keys_t *keys);
ZDIST_EXPORT zdist_keys_t *zdist_keys_process(void);

#ifdef __cplusplus
}
#endif
#endif
