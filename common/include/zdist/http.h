/* zdist http: a small read-only HTTP server (libmicrohttpd) for a daemon's
   --http ADDR: /metrics, and the coordinator's dashboard. libmicrohttpd
   parses HTTP on a thread of its own; each GET is handed to the daemon's
   loop over an inproc socket and answered by a handler there, so the
   handler reads the daemon's state on the daemon's own thread, without
   locks. Only GET and HEAD are served; anything else is 405. */
#ifndef ZDIST_HTTP_H
#define ZDIST_HTTP_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "zdist/defs.h"
#include "zdist/error.h"

typedef struct zdist_http_t zdist_http_t;

/* What a handler answers: status 200 unless set; body malloc'd (taken),
   NULL for an empty one; content_type a static string (default
   "text/plain; charset=utf-8"). */
typedef struct {
    int status;
    const char *content_type;
    char *body;
    size_t len;
} zdist_http_reply_t;

/* Runs on the thread of the loop given to zdist_http_new; path without the
   query string ("/metrics"). */
typedef void(zdist_http_handler_fn)(void *arg, const char *path, zdist_http_reply_t *reply);

/* Parses ADDR: "PORT" (loopback, 127.0.0.1), "HOST:PORT" or "[V6]:PORT",
   HOST a numeric address; PORT 0 picks a free one. Writes the host and
   port; ret_loopback: whether the host is a loopback address. -EINVAL with
   err naming the address and the form it needs. */
ZDIST_EXPORT int zdist_http_parse_addr(const char *addr, char *host, size_t host_size, int *ret_port,
                                       bool *ret_loopback, zdist_error_t *err);
/* Binds ADDR and serves: the handler runs in `loop` (a reader is added;
   zdist_http_destroy removes it). NULL with err (bad address, port taken). */
ZDIST_EXPORT zdist_http_t *zdist_http_new(const char *addr, zloop_t *loop, zdist_http_handler_fn *fn,
                                          void *arg, zdist_error_t *err);
/* "http://127.0.0.1:PORT" with the bound port. */
ZDIST_EXPORT const char *zdist_http_url(const zdist_http_t *self);
ZDIST_EXPORT bool zdist_http_is_loopback(const zdist_http_t *self);
/* Writes a daemon's metrics into the reply (the exposition format's content
   type; 500 when the text cannot be kept). */
typedef void(zdist_http_metrics_fn)(void *arg, FILE *f);
ZDIST_EXPORT void zdist_http_reply_metrics(zdist_http_reply_t *reply, zdist_http_metrics_fn *write, void *arg);
/* A handler for daemons that serve /metrics alone: arg is a
   zdist_http_metrics_t; any other path is 404 saying what is served. */
typedef struct {
    zdist_http_metrics_fn *write;
    void *arg;
} zdist_http_metrics_t;
ZDIST_EXPORT void zdist_http_serve_metrics(void *metrics, const char *path, zdist_http_reply_t *reply);
/* NULL-safe; stops the server thread (a request waiting on the loop is
   answered 503) and nulls *self_p. Call on the loop's thread. */
ZDIST_EXPORT void zdist_http_destroy(zdist_http_t **self_p);

#endif
