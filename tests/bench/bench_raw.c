/* The raw ZeroMQ baseline server the benchmarks measure against. */
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "bench_raw.h"

/* Reads every byte of data once. */
static uint64_t
s_read_all(const uint8_t *data, size_t n)
{
    uint64_t sum = 0, word;
    size_t i = 0;
    for (; i + sizeof word <= n; i += sizeof word) {
        memcpy(&word, data + i, sizeof word);
        sum += word;
    }
    for (; i < n; i++)
        sum += data[i];
    return sum;
}

void *
bench_raw_loop(void *arg)
{
    bench_raw_t *s = arg;
    while (!atomic_load(&s->stop)) {
        zmq_pollitem_t item = {s->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 50) <= 0)
            continue;
        while (1) {
            zmq_msg_t id, hdr, payload;
            zmq_msg_init(&id);
            if (zmq_msg_recv(&id, s->sock, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&id);
                break;
            }
            zmq_msg_init(&hdr);
            zmq_msg_recv(&hdr, s->sock, 0);
            uint64_t size = 0;
            if (zmq_msg_size(&hdr) >= sizeof size)
                memcpy(&size, zmq_msg_data(&hdr), sizeof size);
            bool more = zmq_msg_more(&hdr);
            while (more) {
                zmq_msg_init(&payload);
                zmq_msg_recv(&payload, s->sock, 0);
                if (s->touch)
                    s->sink += s_read_all(zmq_msg_data(&payload), zmq_msg_size(&payload));
                more = zmq_msg_more(&payload);
                zmq_msg_close(&payload);
            }
            zmq_msg_send(&id, s->sock, ZMQ_SNDMORE);
            if (size == 0 || size > s->blob_size) {
                zmq_msg_send(&hdr, s->sock, 0);
            } else {
                zmq_msg_send(&hdr, s->sock, ZMQ_SNDMORE);
                if (s->touch) {
                    if (zmq_msg_init_size(&payload, size) == 0)
                        memcpy(zmq_msg_data(&payload), s->blob, size);
                    else
                        zmq_msg_init(&payload); /* out of memory: an empty reply */
                } else {
                    /* Zero-copy: the blob outlives the server. */
                    zmq_msg_init_data(&payload, (void *) s->blob, size, NULL, NULL);
                }
                zmq_msg_send(&payload, s->sock, 0);
            }
        }
    }
    return NULL;
}

int
bench_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *) &a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *) &a, &l) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int
s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

double
bench_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t) n, sizeof *v, s_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

uint64_t
bench_mix64(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}
