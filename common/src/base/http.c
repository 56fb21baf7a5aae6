/* http: libmicrohttpd on its own thread, requests answered on the daemon's loop over an inproc PAIR. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zdist/http.h"
#include "zdist/endpoint.h"
#include "zdist/prom.h"

#define S_WAIT_MS 10000 /* a request the daemon's loop has not answered by then: 503 */
/* A client that sends half a request and waits must not take the server
   from others: each address holds at most S_PER_ADDRESS connections (the
   rest are refused at accept and counted), out of S_MAX_CONNECTIONS, so
   other addresses always find room; a connection idle S_TIMEOUT_S (its
   headers unfinished) is closed. libmicrohttpd's own per-IP limit refuses
   before any callback sees the connection, so it could not be counted:
   the accept policy below keeps the count. The listen backlog is the
   kernel's largest: connections waiting to be refused must not fill it,
   or another address's SYN is dropped and its client retries after 1 s. */
#define S_PER_ADDRESS 16
#define S_MAX_CONNECTIONS 512
#define S_TIMEOUT_S 3

struct zdist_http_t {
    struct MHD_Daemon *mhd;
    int fd;
    zloop_t *loop;
    zsock_t *front; /* the MHD thread's end */
    zsock_t *back;  /* the loop's end */
    zmq_pollitem_t item; /* back's ZMQ_FD, as the loop polls it */
    zdist_http_handler_fn *fn;
    void *arg;
    atomic_bool stopping;
    uint64_t seq; /* the MHD thread's */
    bool loopback;
    char url[128];
    /* The MHD thread's: open connections per address (all of them fit). */
    struct {
        struct sockaddr_storage addr;
        unsigned open;
    } peers[S_MAX_CONNECTIONS];
    atomic_uint_fast64_t refused; /* read by the loop for /metrics */
};

int
zdist_http_parse_addr(const char *addr, char *host, size_t host_size, int *ret_port, bool *ret_loopback,
                      zdist_error_t *err)
{
    if (!addr || !*addr)
        return zdist_error_set(err, -EINVAL, "--http '': give PORT, HOST:PORT or [V6]:PORT");
    /* A bare port: loopback. Else the one address grammar (zdist/endpoint.h), port 0 allowed. */
    char buf[ZDIST_ENDPOINT_MAX + 16];
    bool bare = strspn(addr, "0123456789") == strlen(addr);
    if ((size_t) snprintf(buf, sizeof buf, bare ? "127.0.0.1:%s" : "%s", addr) >= sizeof buf)
        return zdist_error_set(err, -EINVAL, "--http '%.40s...': too long", addr);
    zdist_endpoint_t ep;
    zdist_error_t perr = {0};
    if (zdist_endpoint_parse(buf, ZDIST_ENDPOINT_WILDCARD, &ep, &perr) < 0)
        return zdist_error_set(err, -EINVAL,
                               "--http '%s': %s (give PORT, HOST:PORT or [V6]:PORT; port 0: any free one)",
                               addr, perr.text);
    struct in_addr a4;
    struct in6_addr a6;
    bool loopback;
    if (ep.kind == ZDIST_HOST_IPV4 && inet_pton(AF_INET, ep.host, &a4) == 1)
        loopback = (ntohl(a4.s_addr) >> 24) == 127;
    else if (ep.kind == ZDIST_HOST_IPV6 && inet_pton(AF_INET6, ep.host, &a6) == 1)
        loopback = IN6_IS_ADDR_LOOPBACK(&a6);
    else
        return zdist_error_set(
            err, -EINVAL,
            "--http '%s': '%s' is not a numeric IP address (e.g. 127.0.0.1:9100, [::1]:9100, "
            "0.0.0.0:9100 for every interface)",
            addr, ep.host);
    if (ep.port < 0 || ep.port > 65535)
        return zdist_error_set(err, -EINVAL, "--http '%s': the port must be in 0..65535 (0: any free one)",
                               addr);
    if (strlen(ep.host) >= host_size)
        return zdist_error_set(err, -EINVAL, "--http '%s': address too long", addr);
    snprintf(host, host_size, "%s", ep.host);
    *ret_port = ep.port;
    *ret_loopback = loopback;
    return 0;
}

/* ---- the MHD thread ---- */

static bool
s_same_host(const struct sockaddr *a, const struct sockaddr_storage *b)
{
    if (a->sa_family != b->ss_family)
        return false;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *) a)->sin_addr.s_addr == ((const struct sockaddr_in *) b)->sin_addr.s_addr;
    return a->sa_family == AF_INET6 && memcmp(&((const struct sockaddr_in6 *) a)->sin6_addr,
                                              &((const struct sockaddr_in6 *) b)->sin6_addr, 16) == 0;
}

/* An address's slot (or a free one when add), NULL when none. */
static unsigned *
s_peer(zdist_http_t *self, const struct sockaddr *addr, bool add)
{
    for (size_t i = 0; i < S_MAX_CONNECTIONS; i++)
        if (self->peers[i].open > 0 && s_same_host(addr, &self->peers[i].addr))
            return &self->peers[i].open;
    for (size_t i = 0; add && i < S_MAX_CONNECTIONS; i++)
        if (self->peers[i].open == 0) {
            memcpy(&self->peers[i].addr, addr,
                   addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
            return &self->peers[i].open;
        }
    return NULL;
}

static enum MHD_Result
s_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void) addrlen;
    zdist_http_t *self = cls;
    unsigned *open = s_peer(self, addr, true);
    if (!open || *open >= S_PER_ADDRESS) {
        atomic_fetch_add(&self->refused, 1);
        return MHD_NO;
    }
    ++*open;
    return MHD_YES;
}

static void
s_notify(void *cls, struct MHD_Connection *conn, void **socket_context, enum MHD_ConnectionNotificationCode toe)
{
    (void) socket_context;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    unsigned *open = toe == MHD_CONNECTION_NOTIFY_CLOSED && info ? s_peer(cls, info->client_addr, false) : NULL;
    if (open && *open > 0)
        --*open;
}

static enum MHD_Result
s_queue(struct MHD_Connection *conn, int status, const char *ctype, char *body, size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, body ? body : (char *) "", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned) status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result
s_text(struct MHD_Connection *conn, int status, const char *text)
{
    char *body = strdup(text);
    return s_queue(conn, status, "text/plain; charset=utf-8", body, body ? strlen(body) : 0);
}

static enum MHD_Result
s_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method, const char *version,
         const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    (void) version;
    (void) upload_data;
    zdist_http_t *self = cls;
    static int marker;
    if (*con_cls != &marker) { /* headers only so far */
        *con_cls = &marker;
        return MHD_YES;
    }
    if (*upload_data_size) {
        *upload_data_size = 0; /* a body is not read */
        return MHD_YES;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return s_text(conn, 405, "only GET and HEAD: this server is read-only\n");
    uint64_t seq = ++self->seq;
    char seq_s[32];
    snprintf(seq_s, sizeof seq_s, "%llu", (unsigned long long) seq);
    if (zstr_sendx(self->front, seq_s, url ? url : "/", NULL) < 0)
        return s_text(conn, 503, "the daemon is not answering\n");
    zpoller_t *poller = zpoller_new(self->front, NULL);
    int64_t waited = 0;
    while (poller && !atomic_load(&self->stopping) && waited < S_WAIT_MS) {
        if (!zpoller_wait(poller, 100)) {
            waited += 100;
            continue;
        }
        zmsg_t *m = zmsg_recv(self->front);
        char *rseq = m ? zmsg_popstr(m) : NULL, *status = m ? zmsg_popstr(m) : NULL;
        char *ctype = m ? zmsg_popstr(m) : NULL;
        zframe_t *body = m ? zmsg_pop(m) : NULL;
        bool mine = rseq && status && ctype && body && strcmp(rseq, seq_s) == 0;
        enum MHD_Result rc = MHD_NO;
        if (mine) {
            size_t len = zframe_size(body);
            char *copy = malloc(len ? len : 1);
            if (copy) {
                memcpy(copy, zframe_data(body), len);
                rc = s_queue(conn, atoi(status), ctype, copy, len);
            }
        }
        zstr_free(&rseq);
        zstr_free(&status);
        zstr_free(&ctype);
        zframe_destroy(&body);
        zmsg_destroy(&m);
        if (mine) {
            zpoller_destroy(&poller);
            return rc;
        }
    }
    zpoller_destroy(&poller);
    return s_text(conn, 503, "the daemon did not answer in time\n");
}

/* ---- the loop's side ---- */

/* Every daemon's /metrics also counts the HTTP connections refused. */
static void
s_metrics_append(zdist_http_t *self, zdist_http_reply_t *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return;
    zdist_prom_family(f, "zdist_http_refused_connections_total", "counter",
                      "HTTP connections refused at accept: past the per-address limit (16) or the total (512).");
    zdist_prom_sample_v(f, "zdist_http_refused_connections_total", NULL, 0, (double) atomic_load(&self->refused));
    char *grown = fclose(f) == 0 ? realloc(r->body, r->len + len + 1) : NULL;
    if (grown) {
        memcpy(grown + r->len, text, len + 1);
        r->body = grown;
        r->len += len;
    }
    free(text);
}

static void
s_answer(zdist_http_t *self)
{
    zsock_t *sock = self->back;
    char *seq = NULL, *path = NULL;
    if (zstr_recvx(sock, &seq, &path, NULL) < 0 || !seq || !path) {
        zstr_free(&seq);
        zstr_free(&path);
        return;
    }
    char *q = strchr(path, '?');
    if (q)
        *q = '\0';
    zdist_http_reply_t r = {200, NULL, NULL, 0};
    self->fn(self->arg, path, &r);
    if (r.content_type && strcmp(r.content_type, ZDIST_PROM_CONTENT_TYPE) == 0)
        s_metrics_append(self, &r);
    char status[16];
    snprintf(status, sizeof status, "%d", r.status ? r.status : 200);
    zmsg_t *m = zmsg_new();
    zmsg_addstr(m, seq);
    zmsg_addstr(m, status);
    zmsg_addstr(m, r.content_type ? r.content_type : "text/plain; charset=utf-8");
    zmsg_addmem(m, r.body, r.body ? r.len : 0);
    zmsg_send(&m, sock);
    free(r.body);
    zstr_free(&seq);
    zstr_free(&path);
}

/* Polled by its ZMQ_FD (see zdist_daemon_serve: no ZMQ_EVENTS probes per
   wake-up), which is edge-triggered: every request waiting, until the
   socket says none is left. */
static int
s_on_request(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    (void) loop;
    (void) item;
    zdist_http_t *self = arg;
    while (zsock_events(self->back) & ZMQ_POLLIN)
        s_answer(self);
    return 0;
}

zdist_http_t *
zdist_http_new(const char *addr, zloop_t *loop, zdist_http_handler_fn *fn, void *arg, zdist_error_t *err)
{
    char host[64];
    int port;
    bool loopback;
    if (zdist_http_parse_addr(addr, host, sizeof host, &port, &loopback, err) < 0)
        return NULL;
    zdist_http_t *self = calloc(1, sizeof *self);
    if (!self) {
        zdist_error_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    self->fd = -1;
    self->fn = fn;
    self->arg = arg;
    self->loop = loop;
    self->loopback = loopback;
    bool v6 = strchr(host, ':') != NULL;
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    if (v6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) &ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t) port);
        inet_pton(AF_INET6, host, &s6->sin6_addr);
        sl = sizeof *s6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *) &ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t) port);
        inet_pton(AF_INET, host, &s4->sin_addr);
        sl = sizeof *s4;
    }
    int one = 1;
    self->fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (self->fd < 0 || setsockopt(self->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(self->fd, (struct sockaddr *) &ss, sl) < 0 || listen(self->fd, SOMAXCONN) < 0 ||
        getsockname(self->fd, (struct sockaddr *) &ss, &sl) < 0) {
        zdist_error_set(err, -errno, "--http %s: cannot listen there: %s", addr, strerror(errno));
        goto fail;
    }
    port = ntohs(v6 ? ((struct sockaddr_in6 *) &ss)->sin6_port : ((struct sockaddr_in *) &ss)->sin_port);
    snprintf(self->url, sizeof self->url, v6 ? "http://[%s]:%d" : "http://%s:%d", host, port);
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://zdist-http-%p", (void *) self);
    self->back = zsock_new(ZMQ_PAIR);
    self->front = zsock_new(ZMQ_PAIR);
    self->item = (zmq_pollitem_t){NULL, -1, ZMQ_POLLIN, 0};
    size_t fd_size = sizeof self->item.fd;
    if (!self->back || !self->front || zsock_bind(self->back, "%s", ep) < 0 ||
        zsock_connect(self->front, "%s", ep) < 0 ||
        zmq_getsockopt(zsock_resolve(self->back), ZMQ_FD, &self->item.fd, &fd_size) != 0 ||
        zloop_poller(loop, &self->item, s_on_request, self) < 0) {
        zdist_error_set(err, -ENOMEM, "--http %s: cannot set up its socket pair", addr);
        goto fail;
    }
    s_on_request(loop, NULL, self); /* from here on its descriptor signals each request */
    zsock_set_sndtimeo(self->front, 1000);
    zsock_set_sndtimeo(self->back, 1000);
    self->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | (v6 ? MHD_USE_IPv6 : 0), 0,
                                 s_accept, self, s_access, self, MHD_OPTION_LISTEN_SOCKET, self->fd,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) S_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned) S_MAX_CONNECTIONS, MHD_OPTION_NOTIFY_CONNECTION, s_notify, self,
                                 MHD_OPTION_END);
    if (!self->mhd) {
        zloop_poller_end(loop, &self->item);
        zdist_error_set(err, -EIO, "--http %s: libmicrohttpd did not start", addr);
        goto fail;
    }
    return self;
fail:
    zsock_destroy(&self->front);
    zsock_destroy(&self->back);
    if (self->fd >= 0)
        close(self->fd);
    free(self);
    return NULL;
}

const char *
zdist_http_url(const zdist_http_t *self)
{
    return self->url;
}

bool
zdist_http_is_loopback(const zdist_http_t *self)
{
    return self->loopback;
}

void
zdist_http_destroy(zdist_http_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zdist_http_t *self = *self_p;
    atomic_store(&self->stopping, true);
    MHD_stop_daemon(self->mhd); /* joins its thread; the listening socket is ours */
    close(self->fd);
    zloop_poller_end(self->loop, &self->item);
    zsock_destroy(&self->front);
    zsock_destroy(&self->back);
    free(self);
    *self_p = NULL;
}

void
zdist_http_reply_metrics(zdist_http_reply_t *reply, zdist_http_metrics_fn *write, void *arg)
{
    FILE *f = open_memstream(&reply->body, &reply->len);
    if (!f) {
        reply->status = 500;
        return;
    }
    write(arg, f);
    if (fclose(f) != 0)
        reply->status = 500;
    reply->content_type = ZDIST_PROM_CONTENT_TYPE;
}

void
zdist_http_serve_metrics(void *metrics, const char *path, zdist_http_reply_t *reply)
{
    const zdist_http_metrics_t *m = metrics;
    if (strcmp(path, "/metrics") != 0) {
        reply->status = 404;
        reply->body = strdup("not found: this daemon serves /metrics\n");
        reply->len = reply->body ? strlen(reply->body) : 0;
        return;
    }
    zdist_http_reply_metrics(reply, m->write, m->arg);
}
