/* zdist endpoint: parses host:port, [v6]:port and tcp:// endpoints — the one address grammar. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "zdist/endpoint.h"
#include "zdist/parse.h"

static bool
s_valid_hostname(const char *host, size_t n)
{
    if (n > 253)
        return false;
    if (n > 1 && host[n - 1] == '.') /* fully qualified "host.example.com." */
        n--;
    size_t label = 0;
    for (size_t i = 0; i <= n; i++) {
        char c = i < n ? host[i] : '.';
        if (c == '.') {
            if (label == 0 || label > 63 || host[i - 1] == '-' || host[i - label] == '-')
                return false;
            label = 0;
        } else if (isalnum((unsigned char) c) || c == '-' || c == '_') {
            label++;
        } else {
            return false;
        }
    }
    return true;
}

/* host[0..n) is an address of family af. */
static bool
s_is_ip(int af, const char *host, size_t n)
{
    char buf[INET6_ADDRSTRLEN + 1];
    unsigned char addr[sizeof(struct in6_addr)];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, host, n);
    buf[n] = '\0';
    return inet_pton(af, buf, addr) == 1;
}

/* The bracketed host of text "[...]:port": fills ret's host and kind and
   points *ret_port after the ':'. */
static int
s_parse_v6(const char *text, zdist_endpoint_t *ret, const char **ret_port, zdist_error_t *err)
{
    const char *close = strchr(text, ']');
    if (!close || close[1] != ':')
        return zdist_error_set(err, -EINVAL,
                               "a bracketed IPv6 host must be followed by ':port', like [::1]:2222");
    size_t host_len = (size_t) (close - text) - 1;
    size_t v6_len = host_len;
    const char *zone = memchr(text + 1, '%', host_len);
    if (zone) {
        v6_len = (size_t) (zone - text) - 1;
        if (zone + 1 == close || !s_valid_hostname(zone + 1, (size_t) (close - zone) - 1))
            return zdist_error_set(err, -EINVAL, "the IPv6 zone after '%%' is not an interface name");
    }
    if (!s_is_ip(AF_INET6, text + 1, v6_len))
        return zdist_error_set(err, -EINVAL, "the host inside [] is not an IPv6 address");
    memcpy(ret->host, text + 1, host_len);
    ret->host[host_len] = '\0';
    ret->kind = ZDIST_HOST_IPV6;
    *ret_port = close + 2;
    return 0;
}

static int
s_parse_host(const char *text, unsigned flags, zdist_endpoint_t *ret, const char **ret_port,
             zdist_error_t *err)
{
    if (text[0] == '[')
        return s_parse_v6(text, ret, ret_port, err);
    const char *colon = strrchr(text, ':');
    if (!colon)
        return zdist_error_set(err, -EINVAL, "it has no ':port'");
    size_t n = (size_t) (colon - text);
    if (memchr(text, ':', n))
        return zdist_error_set(err, -EINVAL, "an IPv6 host needs brackets, like [::1]:2222");
    if (n == 0)
        return zdist_error_set(err, -EINVAL, "the host is empty");
    if (n == 1 && text[0] == '*' && (flags & ZDIST_ENDPOINT_WILDCARD)) {
        ret->kind = ZDIST_HOST_ANY;
    } else if (strspn(text, "0123456789.") >= n) {
        if (!s_is_ip(AF_INET, text, n))
            return zdist_error_set(err, -EINVAL, "the host is not an IPv4 address");
        ret->kind = ZDIST_HOST_IPV4;
    } else if (s_valid_hostname(text, n)) {
        ret->kind = ZDIST_HOST_NAME;
    } else {
        return zdist_error_set(err, -EINVAL,
                               "the host is not a valid host name (letters, digits, '-', '_', '.')");
    }
    memcpy(ret->host, text, n);
    ret->host[n] = '\0';
    *ret_port = colon + 1;
    return 0;
}

static int
s_parse_port(const char *text, unsigned flags, int *ret_port, zdist_error_t *err)
{
    bool wildcard = flags & ZDIST_ENDPOINT_WILDCARD;
    if (wildcard && strcmp(text, "*") == 0) {
        *ret_port = 0;
        return 0;
    }
    int64_t port = 0;
    if (!*text || strspn(text, "0123456789") != strlen(text))
        return zdist_error_set(err, -EINVAL, "the port is not a number");
    if (zdist_parse_int64(text, 0, 65535, &port) != 0)
        return zdist_error_set(err, -EINVAL, "the port is out of range 1..65535");
    if (port == 0 && !wildcard)
        return zdist_error_set(err, -EINVAL, "port 0 is not allowed, peers must know the port to connect to");
    *ret_port = (int) port;
    return 0;
}

int
zdist_endpoint_parse(const char *text, unsigned flags, zdist_endpoint_t *ret, zdist_error_t *err)
{
    if (!text || !*text)
        return zdist_error_set(err, -EINVAL, "it is empty");
    size_t n = strnlen(text, ZDIST_ENDPOINT_MAX + 1);
    if (n > ZDIST_ENDPOINT_MAX)
        return zdist_error_set(err, -EINVAL, "it is longer than %d characters", ZDIST_ENDPOINT_MAX);
    const char *scheme = strstr(text, "://");
    if (scheme) {
        int len = (int) (scheme - text > 16 ? 16 : scheme - text);
        if (!(flags & ZDIST_ENDPOINT_SCHEME))
            return zdist_error_set(err, -EINVAL,
                                   "it has a scheme; drop the '%.*s://' prefix (set rpc_layer instead)", len,
                                   text);
        if (strncmp(text, "tcp://", 6) != 0)
            return zdist_error_set(
                err, -EINVAL, "the scheme '%.*s://' is not tcp://; zdist speaks ZeroMQ over TCP", len, text);
        text += 6;
        if (!*text)
            return zdist_error_set(err, -EINVAL, "it has no host:port after tcp://");
    }
    zdist_endpoint_t ep = {0};
    const char *port_text = NULL;
    int rc = s_parse_host(text, flags, &ep, &port_text, err);
    if (rc == 0)
        rc = s_parse_port(port_text, flags, &ep.port, err);
    if (rc == 0 && ret)
        *ret = ep;
    return rc;
}

int
zdist_endpoint_format(const zdist_endpoint_t *ep, char *buf, size_t size)
{
    char port[12] = "*"; /* any int: the parser keeps ports to 1..65535, the formatter needn't trust it */
    if (ep->port > 0)
        snprintf(port, sizeof port, "%d", ep->port);
    bool v6 = ep->kind == ZDIST_HOST_IPV6;
    int n = snprintf(buf, size, "tcp://%s%s%s:%s", v6 ? "[" : "", ep->host, v6 ? "]" : "", port);
    if (n < 0 || (size_t) n >= size) {
        if (size)
            buf[0] = '\0';
        return -ENOSPC;
    }
    return 0;
}

int
zdist_endpoint_normalize(const char *text, char *buf, size_t size, zdist_error_t *err)
{
    zdist_endpoint_t ep;
    int rc = zdist_endpoint_parse(text, ZDIST_ENDPOINT_SCHEME, &ep, err);
    if (rc < 0) {
        zdist_error_t why = err ? *err : (zdist_error_t){0};
        return zdist_error_set(err, rc,
                               "address '%.200s' is not valid: %s; give host:port or tcp://host:port, e.g. "
                               "127.0.0.1:5000",
                               text ? text : "", why.text);
    }
    if (zdist_endpoint_format(&ep, buf, size) < 0)
        return zdist_error_set(err, -ENOSPC, "address '%.200s' is too long", text);
    return 0;
}

int
zdist_endpoint_split(const char *endpoint, char *host, size_t host_size, const char **ret_port)
{
    zdist_endpoint_t ep;
    if (zdist_endpoint_parse(endpoint, ZDIST_ENDPOINT_SCHEME | ZDIST_ENDPOINT_WILDCARD, &ep, NULL) < 0)
        return -EINVAL;
    bool v6 = ep.kind == ZDIST_HOST_IPV6;
    int n = snprintf(host, host_size, "%s%s%s", v6 ? "[" : "", ep.host, v6 ? "]" : "");
    if (n < 0 || (size_t) n >= host_size)
        return -ENOSPC;
    /* The port follows the last ':' (an IPv6 host's are inside brackets). */
    if (ret_port)
        *ret_port = strrchr(endpoint, ':') + 1;
    return 0;
}
