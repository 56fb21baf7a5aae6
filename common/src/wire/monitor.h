/* A socket's connection events (zmq_socket_monitor), opened and closed the
   one safe way for the RPC server and client. Internal to libzdist. */
#ifndef ZDIST_WIRE_MONITOR_H
#define ZDIST_WIRE_MONITOR_H

#include <czmq.h>

#include "zdist/error.h"

/* Starts monitoring `sock` for `events` (ZMQ_EVENT_* bits) and returns the
   reader: a PAIR with an unbounded queue. libzmq sends the events from its
   IO thread with a blocking send, so a full queue would stall that thread
   and every socket of the process. NULL with err set ("cannot monitor
   WHAT: ..."). */
zsock_t *zdist_monitor_open(void *sock, int events, const char *what, zdist_error_t *err);

/* Stops the monitoring of `sock`, then destroys the reader: an event sent
   with no reader left would block the IO thread the same way. */
void zdist_monitor_close(void *sock, zsock_t **reader_p);

#endif
