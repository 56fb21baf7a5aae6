/* CUnit suite: zdist/prom.h's exposition text and zdist/http.h — the --http address, and real GETs answered
   by a handler on a zloop's thread. */
#include <arpa/inet.h>
#include <czmq.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"
#include "zdist/http.h"
#include "zdist/prom.h"

static char *
s_render(void (*fn)(FILE *f))
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fn(f);
    fclose(f);
    return text;
}

static void
s_samples(FILE *f)
{
    zdist_prom_family(f, "x_total", "counter", "Help with a \\ and\na newline.");
    zdist_prom_sample(f, "x_total", 3, "method", "pu\"ll\\", NULL);
    zdist_prom_sample(f, "x_total", 2.5, NULL);
    zdist_prom_sample(f, "x_total", NAN, "a", "1", "b", "2", NULL);
}

static void
test_samples(void)
{
    char *t = s_render(s_samples);
    CU_ASSERT_STRING_EQUAL(t, "# HELP x_total Help with a \\\\ and\\na newline.\n"
                              "# TYPE x_total counter\n"
                              "x_total{method=\"pu\\\"ll\\\\\"} 3\n"
                              "x_total 2.5\n"
                              "x_total{a=\"1\",b=\"2\"} NaN\n");
    free(t);
}

static void
s_histogram(FILE *f)
{
    zdist_prom_histogram_t h;
    zdist_prom_histogram_init_seconds(&h);
    zdist_prom_histogram_observe(&h, 0.00005); /* first bucket */
    zdist_prom_histogram_observe(&h, 0.001);   /* on a bound: le is inclusive */
    zdist_prom_histogram_observe(&h, 100);     /* above every bound */
    zdist_prom_histogram_observe(&h, NAN);     /* ignored */
    const char *labels[2] = {"worker", "0"};
    zdist_prom_histogram_write(f, "s", labels, 1, &h);
}

static void
test_histogram(void)
{
    char *t = s_render(s_histogram);
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "s_bucket{worker=\"0\",le=\"0.0001\"} 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "s_bucket{worker=\"0\",le=\"0.0005\"} 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "s_bucket{worker=\"0\",le=\"0.001\"} 2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "s_bucket{worker=\"0\",le=\"60\"} 2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "s_bucket{worker=\"0\",le=\"+Inf\"} 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "s_count{worker=\"0\"} 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "s_sum{worker=\"0\"} 100.00105\n"));
    free(t);
}

static void
s_addr_ok(const char *addr, const char *host, int port, bool loopback)
{
    char h[64];
    int p = -1;
    bool lo = !loopback;
    zdist_error_t err = {0};
    int rc = zdist_http_parse_addr(addr, h, sizeof h, &p, &lo, &err);
    if (rc)
        fprintf(stderr, "\n  '%s': %s\n", addr, err.text);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(h, host);
    CU_ASSERT_EQUAL(p, port);
    CU_ASSERT_EQUAL(lo, loopback);
}

static void
s_addr_bad(const char *addr, const char *want)
{
    char h[64];
    int p = -1;
    bool lo = false;
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_http_parse_addr(addr, h, sizeof h, &p, &lo, &err), -EINVAL);
    if (!strstr(err.text, want))
        fprintf(stderr, "\n  '%s': '%s' lacks '%s'\n", addr, err.text, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "--http"));
}

static void
test_addresses(void)
{
    s_addr_ok("9100", "127.0.0.1", 9100, true);
    s_addr_ok("0", "127.0.0.1", 0, true);
    s_addr_ok("127.0.0.2:80", "127.0.0.2", 80, true);
    s_addr_ok("[::1]:9100", "::1", 9100, true);
    s_addr_ok("10.1.2.3:9100", "10.1.2.3", 9100, false);
    s_addr_ok("0.0.0.0:9100", "0.0.0.0", 9100, false);
    s_addr_bad("", "give PORT");
    s_addr_bad("localhost:9100", "not a numeric IP address");
    s_addr_bad("1.2.3.4", "no ':port'");
    s_addr_bad("1.2.3.4:99999", "out of range");
}

/* ---- a server on a loop of its own thread ---- */

static void
s_handler(void *arg, const char *path, zdist_http_reply_t *reply)
{
    (void) arg;
    if (strcmp(path, "/missing") == 0) {
        reply->status = 404;
        return;
    }
    reply->content_type = "text/x-test";
    if (asprintf(&reply->body, "path=%s", path) < 0)
        reply->body = NULL;
    reply->len = reply->body ? strlen(reply->body) : 0;
}

static int
s_on_pipe(zloop_t *loop, zsock_t *pipe, void *arg)
{
    (void) loop;
    (void) arg;
    char *cmd = zstr_recv(pipe);
    zstr_free(&cmd);
    return -1; /* the $TERM: end the loop */
}

static void
s_server(zsock_t *pipe, void *args)
{
    (void) args;
    zloop_t *loop = zloop_new();
    zdist_error_t err = {0};
    zdist_http_t *h = zdist_http_new("0", loop, s_handler, NULL, &err);
    zsock_signal(pipe, 0);
    zstr_send(pipe, h ? zdist_http_url(h) : err.text);
    zloop_reader(loop, pipe, s_on_pipe, NULL);
    zloop_start(loop);
    zdist_http_destroy(&h);
    zloop_destroy(&loop);
}

/* One request over a raw socket; the whole response. */
static char *
s_request(int port, const char *req)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    CU_ASSERT_EQUAL_FATAL(connect(fd, (struct sockaddr *) &sa, sizeof sa), 0);
    CU_ASSERT_EQUAL(write(fd, req, strlen(req)), (ssize_t) strlen(req));
    static char buf[8192];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t) r;
    buf[n] = '\0';
    close(fd);
    return buf;
}

static void
test_serve(void)
{
    zactor_t *a = zactor_new(s_server, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    char *url = zstr_recv(a);
    int port = 0;
    CU_ASSERT_EQUAL(sscanf(url, "http://127.0.0.1:%d", &port), 1);
    zstr_free(&url);
    char *r = s_request(port, "GET /metrics?x=1 HTTP/1.0\r\n\r\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(r, "HTTP/1.0 200") ? r : strstr(r, "HTTP/1.1 200"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r, "Content-Type: text/x-test"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r, "\r\n\r\npath=/metrics")); /* the query string is not the path */
    r = s_request(port, "GET /missing HTTP/1.0\r\n\r\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(r, " 404 "));
    r = s_request(port, "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc");
    CU_ASSERT_PTR_NOT_NULL(strstr(r, " 405 "));
    zactor_destroy(&a);
}

void
zdist_test_http_register(void)
{
    ZDIST_SUITE("http", {"prom samples", test_samples}, {"prom histogram", test_histogram},
                {"--http addresses", test_addresses}, {"serve", test_serve});
}
