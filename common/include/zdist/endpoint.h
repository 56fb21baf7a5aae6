/* zdist endpoint: the one grammar of task addresses (host:port, [v6]:port) and the tcp:// endpoints ZeroMQ
   takes.

   Every address zdist reads goes through zdist_endpoint_parse: TF_CONFIG's
   cluster addresses, command-line flags (--coordinator, `zdist ps ADDR`),
   ps task endpoints handed to workers, and endpoints a socket bound.

       address   = host ":" port
       host      = IPv4 literal | host name | "[" IPv6 literal [ "%" zone ] "]"
                 | "*"                       (ZDIST_ENDPOINT_WILDCARD only)
       port      = 1..65535
                 | "*" | 0                   (ZDIST_ENDPOINT_WILDCARD only)
       endpoint  = [ "tcp://" ] address      (the scheme with ZDIST_ENDPOINT_SCHEME)

   A host name is labels of letters, digits, '-' and '_' (not starting or
   ending with '-') joined by '.', at most 253 characters; an IPv6 host
   goes in brackets. Reentrant. */
#ifndef ZDIST_ENDPOINT_H
#define ZDIST_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "zdist/defs.h"
#include "zdist/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZDIST_ENDPOINT_MAX 300 /* characters of an address or endpoint */

/* What a text may hold besides host:port. */
enum {
    ZDIST_ENDPOINT_SCHEME = 1 << 0,   /* a "tcp://" prefix (an endpoint, not a TF_CONFIG address) */
    ZDIST_ENDPOINT_WILDCARD = 1 << 1, /* host "*", port "*" or 0: what a socket binds */
};

typedef enum {
    ZDIST_HOST_NAME = 1, /* a DNS name, "localhost" included */
    ZDIST_HOST_IPV4,
    ZDIST_HOST_IPV6, /* written in brackets */
    ZDIST_HOST_ANY,  /* "*" */
} zdist_host_kind_t;

typedef struct {
    zdist_host_kind_t kind;
    char host[ZDIST_ENDPOINT_MAX + 1]; /* as written, without brackets (an IPv6 zone kept) */
    int port;                          /* 1..65535; 0 for a wildcard port */
} zdist_endpoint_t;

/* Parses text with `flags` (ZDIST_ENDPOINT_*). 0, or -EINVAL with err
   saying why as a phrase the caller puts after the field and the text
   ("it has no ':port'", "the port is out of range 1..65535",
   "an IPv6 host needs brackets, like [::1]:2222"...). *ret is written only
   on success; it may be NULL to only check. */
ZDIST_EXPORT int zdist_endpoint_parse(const char *text, unsigned flags, zdist_endpoint_t *ret,
                                      zdist_error_t *err);

/* "tcp://HOST:PORT" ("tcp://[HOST]:PORT" for IPv6, "*" for wildcards) into
   buf. 0, or -ENOSPC (buf then holds ""). */
ZDIST_EXPORT int zdist_endpoint_format(const zdist_endpoint_t *ep, char *buf, size_t size);

/* An address a client connects to, "host:port" or "tcp://host:port", as
   the endpoint "tcp://host:port" in buf. -EINVAL with err "address 'TEXT'
   is not valid: WHY; give host:port or tcp://host:port, e.g.
   127.0.0.1:5000" (callers prefix the field: the flag or the task), or
   -ENOSPC. */
ZDIST_EXPORT int zdist_endpoint_normalize(const char *text, char *buf, size_t size, zdist_error_t *err);

/* Splits an endpoint ("tcp://" optional, wildcards allowed) into HOST as
   written (brackets of an IPv6 literal kept, "*" for the wildcard) in
   host[host_size], and *ret_port (may be NULL) pointing at PORT in
   endpoint. 0, -EINVAL (not an endpoint of the grammar), -ENOSPC. */
ZDIST_EXPORT int zdist_endpoint_split(const char *endpoint, char *host, size_t host_size,
                                      const char **ret_port);

#ifdef __cplusplus
}
#endif
#endif
