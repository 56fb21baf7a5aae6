/* CUnit suite: the address grammar — host:port, [v6]:port, tcp:// endpoints, wildcards. */
#include <errno.h>
#include <string.h>

#include "testutil.h"
#include "zdist/endpoint.h"

static void
s_parses(const char *text, unsigned flags, zdist_host_kind_t kind, const char *host, int port)
{
    zdist_endpoint_t ep;
    zdist_error_t err = {0};
    int rc = zdist_endpoint_parse(text, flags, &ep, &err);
    if (rc != 0)
        fprintf(stderr, "\n  '%s': %s\n", text, err.text);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(ep.kind, kind);
    CU_ASSERT_STRING_EQUAL(ep.host, host);
    CU_ASSERT_EQUAL(ep.port, port);
}

static void
s_fails(const char *text, unsigned flags, const char *want)
{
    zdist_endpoint_t ep = {.port = -7};
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_endpoint_parse(text, flags, &ep, &err), -EINVAL);
    if (!strstr(err.text, want))
        fprintf(stderr, "\n  '%s': message '%s' lacks '%s'\n", text, err.text, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
    CU_ASSERT_EQUAL(ep.port, -7); /* written only on success */
}

static void
test_forms(void)
{
    s_parses("10.0.0.1:2222", 0, ZDIST_HOST_IPV4, "10.0.0.1", 2222);
    s_parses("localhost:65535", 0, ZDIST_HOST_NAME, "localhost", 65535);
    s_parses("w-1.svc.cluster.local.:4", 0, ZDIST_HOST_NAME, "w-1.svc.cluster.local.", 4);
    s_parses("[::1]:1", 0, ZDIST_HOST_IPV6, "::1", 1);
    s_parses("[fe80::1%eth0]:2", 0, ZDIST_HOST_IPV6, "fe80::1%eth0", 2);
    s_parses("tcp://127.0.0.1:5000", ZDIST_ENDPOINT_SCHEME, ZDIST_HOST_IPV4, "127.0.0.1", 5000);
    s_parses("tcp://[::1]:5", ZDIST_ENDPOINT_SCHEME, ZDIST_HOST_IPV6, "::1", 5);
    s_parses("tcp://*:*", ZDIST_ENDPOINT_SCHEME | ZDIST_ENDPOINT_WILDCARD, ZDIST_HOST_ANY, "*", 0);
    s_parses("0.0.0.0:0", ZDIST_ENDPOINT_WILDCARD, ZDIST_HOST_IPV4, "0.0.0.0", 0);
    CU_ASSERT_EQUAL(zdist_endpoint_parse("a:1", 0, NULL, NULL), 0);
}

static void
test_errors_say_why(void)
{
    s_fails("", 0, "it is empty");
    s_fails(NULL, 0, "it is empty");
    char long_text[400];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    s_fails(long_text, 0, "it is longer than 300 characters");
    s_fails("b", 0, "it has no ':port'");
    s_fails("a:0", 0, "port 0 is not allowed, peers must know the port to connect to");
    s_fails("a:65536", 0, "the port is out of range 1..65535");
    s_fails("a:http", 0, "the port is not a number");
    s_fails("a:", 0, "the port is not a number");
    s_fails("a:+5", 0, "the port is not a number");
    s_fails(":1", 0, "the host is empty");
    s_fails("::1:5", 0, "an IPv6 host needs brackets, like [::1]:2222");
    s_fails("[::g]:5", 0, "the host inside [] is not an IPv6 address");
    s_fails("[::1]", 0, "must be followed by ':port'");
    s_fails("[fe80::1%]:5", 0, "the IPv6 zone after '%' is not an interface name");
    s_fails("1.2.3.999:5", 0, "the host is not an IPv4 address");
    s_fails("bad host:5", 0, "the host is not a valid host name");
    s_fails("-a:5", 0, "the host is not a valid host name");
    s_fails("grpc://a:5", 0, "it has a scheme; drop the 'grpc://' prefix (set rpc_layer instead)");
    /* A TF_CONFIG address has no scheme; an endpoint's is tcp://. */
    s_fails("tcp://a:5", 0, "drop the 'tcp://' prefix");
    s_fails("http://a:5", ZDIST_ENDPOINT_SCHEME, "the scheme 'http://' is not tcp://");
    s_fails("tcp://", ZDIST_ENDPOINT_SCHEME, "it has no host:port after tcp://");
    /* Wildcards only where a socket binds. */
    s_fails("*:5", ZDIST_ENDPOINT_SCHEME, "the host is not a valid host name");
    s_fails("a:*", ZDIST_ENDPOINT_SCHEME, "the port is not a number");
}

static void
test_normalize_and_format(void)
{
    char buf[64];
    zdist_error_t err = {0};
    CU_ASSERT_EQUAL(zdist_endpoint_normalize("127.0.0.1:5000", buf, sizeof buf, &err), 0);
    CU_ASSERT_STRING_EQUAL(buf, "tcp://127.0.0.1:5000");
    CU_ASSERT_EQUAL(zdist_endpoint_normalize("tcp://ps-0.example:2222", buf, sizeof buf, &err), 0);
    CU_ASSERT_STRING_EQUAL(buf, "tcp://ps-0.example:2222");
    CU_ASSERT_EQUAL(zdist_endpoint_normalize("[::1]:7", buf, sizeof buf, &err), 0);
    CU_ASSERT_STRING_EQUAL(buf, "tcp://[::1]:7");
    CU_ASSERT_EQUAL(zdist_endpoint_normalize("http://a:5", buf, sizeof buf, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.text,
                           "address 'http://a:5' is not valid: the scheme 'http://' is not tcp://; zdist "
                           "speaks ZeroMQ over TCP; give host:port or tcp://host:port, e.g. "
                           "127.0.0.1:5000");
    CU_ASSERT_EQUAL(zdist_endpoint_normalize("127.0.0.1:0", buf, sizeof buf, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "port 0 is not allowed"));
    CU_ASSERT_EQUAL(zdist_endpoint_normalize("a-rather-long-host-name:5", buf, 12, &err), -ENOSPC);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "is too long"));

    zdist_endpoint_t ep = {.kind = ZDIST_HOST_ANY, .host = "*", .port = 0};
    CU_ASSERT_EQUAL(zdist_endpoint_format(&ep, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "tcp://*:*");
    ep = (zdist_endpoint_t){.kind = ZDIST_HOST_IPV6, .host = "fe80::1%eth0", .port = 9};
    CU_ASSERT_EQUAL(zdist_endpoint_format(&ep, buf, sizeof buf), 0);
    CU_ASSERT_STRING_EQUAL(buf, "tcp://[fe80::1%eth0]:9");
    CU_ASSERT_EQUAL(zdist_endpoint_format(&ep, buf, 8), -ENOSPC);
    CU_ASSERT_STRING_EQUAL(buf, "");
}

static void
test_split(void)
{
    char host[64];
    const char *port = NULL;
    CU_ASSERT_EQUAL(zdist_endpoint_split("tcp://10.0.0.2:2222", host, sizeof host, &port), 0);
    CU_ASSERT_STRING_EQUAL(host, "10.0.0.2");
    CU_ASSERT_STRING_EQUAL(port, "2222");
    CU_ASSERT_EQUAL(zdist_endpoint_split("tcp://[::1]:5", host, sizeof host, &port), 0);
    CU_ASSERT_STRING_EQUAL(host, "[::1]");
    CU_ASSERT_STRING_EQUAL(port, "5");
    CU_ASSERT_EQUAL(zdist_endpoint_split("tcp://[fe80::1%eth0]:5", host, sizeof host, &port), 0);
    CU_ASSERT_STRING_EQUAL(host, "[fe80::1%eth0]");
    CU_ASSERT_EQUAL(zdist_endpoint_split("tcp://*:*", host, sizeof host, &port), 0);
    CU_ASSERT_STRING_EQUAL(host, "*");
    CU_ASSERT_STRING_EQUAL(port, "*");
    CU_ASSERT_EQUAL(zdist_endpoint_split("tcp://0.0.0.0:41234", host, sizeof host, &port), 0);
    CU_ASSERT_STRING_EQUAL(host, "0.0.0.0");
    CU_ASSERT_STRING_EQUAL(port, "41234");
    CU_ASSERT_EQUAL(zdist_endpoint_split("worker-1.example:80", host, sizeof host, NULL), 0);
    CU_ASSERT_STRING_EQUAL(host, "worker-1.example");
    CU_ASSERT_EQUAL(zdist_endpoint_split("tcp://nocolon", host, sizeof host, NULL), -EINVAL);
    CU_ASSERT_EQUAL(zdist_endpoint_split("tcp://:5", host, sizeof host, NULL), -EINVAL);
    CU_ASSERT_EQUAL(zdist_endpoint_split("tcp://bad host:5", host, sizeof host, NULL), -EINVAL);
    CU_ASSERT_EQUAL(zdist_endpoint_split("tcp://a:70000", host, sizeof host, NULL), -EINVAL);
    CU_ASSERT_EQUAL(zdist_endpoint_split(NULL, host, sizeof host, NULL), -EINVAL);
    CU_ASSERT_EQUAL(zdist_endpoint_split("tcp://a-rather-long-host-name:5", host, 8, NULL), -ENOSPC);
}

void
zdist_test_endpoint_register(void)
{
    ZDIST_SUITE("endpoint", {"forms", test_forms}, {"errors say why", test_errors_say_why},
                {"normalize and format", test_normalize_and_format}, {"split", test_split});
}
