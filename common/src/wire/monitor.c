/* Socket monitors opened and closed so that libzmq's IO thread never blocks
   on an event (see monitor.h). */
#include "wire/monitor.h"

#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

zsock_t *
zdist_monitor_open(void *sock, int events, const char *what, zdist_error_t *err)
{
    static atomic_uint_fast64_t next;
    char endpoint[96];
    snprintf(endpoint, sizeof endpoint, "inproc://zdist-monitor-%ld-%llu", (long) getpid(),
             (unsigned long long) atomic_fetch_add(&next, 1));
    if (zmq_socket_monitor(sock, endpoint, events) != 0) {
        zdist_error_set(err, -EIO, "cannot monitor %s: %s", what, zmq_strerror(errno));
        return NULL;
    }
    zsock_t *reader = zsock_new(ZMQ_PAIR);
    if (reader) {
        zsock_set_rcvhwm(reader, 0);
        if (zsock_connect(reader, "%s", endpoint) == 0)
            return reader;
    }
    zdist_error_set(err, -EIO, "cannot monitor %s: cannot connect its reader", what);
    zdist_monitor_close(sock, &reader);
    return NULL;
}

void
zdist_monitor_close(void *sock, zsock_t **reader_p)
{
    if (sock)
        zmq_socket_monitor(sock, NULL, 0);
    zsock_destroy(reader_p);
}
