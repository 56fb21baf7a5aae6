"""zdist's RPC over ZeroMQ, the client side, as common/src/wire/rpc_client.c speaks it.

A request is one frame: a zdist.Header (proto/common.proto) carrying the
protocol version, a request id, the method, the time budget left
(deadline_ms, 0 for a stream), the caller's client id and the method's
protobuf body. The reply echoes the request id and carries the status
(gRPC code and text) and `more` when further replies of a stream follow.
Frames after the header are tensors, which the coordinator never sends.

The socket is a DEALER with ZMTP heartbeats; a monitor tells a dead peer
(calls in flight end UNAVAILABLE once a handshake had succeeded) and a
refused CURVE handshake (UNAUTHENTICATED at once, not at the deadline).
"""

import os
import threading
import time
from collections import deque

import zmq
from zmq.utils.monitor import recv_monitor_message

from . import _proto
from .errors import STATUS_CODES

PROTOCOL_VERSION = 1  # ZDIST_PROTOCOL_VERSION, common/include/zdist/defs.h
MAX_MESSAGE_BYTES = 256 << 20  # zdist_wire_limits_default
_SLOT_BITS = 24  # rpc_client.c: a request id is (sequence << 24) | slot
_REFUSED_AT_ONCE_S = 5.0  # S_REFUSED_AT_ONCE_MS
_SLICE_S = 0.1  # the longest a poll holds the lock

OK = 0
DEADLINE_EXCEEDED = STATUS_CODES["DEADLINE_EXCEEDED"]
UNAVAILABLE = STATUS_CODES["UNAVAILABLE"]
UNAUTHENTICATED = STATUS_CODES["UNAUTHENTICATED"]
INTERNAL = STATUS_CODES["INTERNAL"]


class Reply:
    """One reply: status code and text, `more` (a stream goes on), the body bytes."""

    __slots__ = ("request_id", "status", "message", "more", "body", "incarnation")

    def __init__(self, request_id, status, message, more=False, body=b"", incarnation=0):
        self.request_id = request_id
        self.status = status
        self.message = message
        self.more = more
        self.body = body
        self.incarnation = incarnation


class _Call:
    __slots__ = ("method", "deadline", "replies")

    def __init__(self, method, deadline):
        self.method = method
        self.deadline = deadline  # time.monotonic() by which it ends, None for a stream
        self.replies = deque()


class RpcClient:
    """A DEALER connected to one zdist daemon; many calls in flight, each
    with its deadline, replies matched by request id. Safe to share
    between threads (a lock; no poll holds it longer than 0.1 s)."""

    def __init__(self, endpoint, keys=None, server_name=None):
        self.endpoint = endpoint
        self.keys = keys
        self.server_name = server_name
        self._pb = _proto.module("common")
        self._lock = threading.RLock()
        self._ctx = zmq.Context()
        self._calls = {}
        self._seq = 0
        self.client_id = int.from_bytes(os.urandom(8), "little") or 1
        self.peer_incarnation = 0
        self._handshaken = False
        self._failed_handshakes = 0
        self._connected_at = None
        sock = self._ctx.socket(zmq.DEALER)
        self._sock = sock
        try:
            sock.setsockopt(zmq.LINGER, 0)
            # Calls are bounded by their deadlines, not by the socket: a send
            # never blocks while the peer is away.
            sock.setsockopt(zmq.SNDHWM, 0)
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
            sock.setsockopt(zmq.HEARTBEAT_IVL, 1000)
            sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 5000)
            sock.setsockopt(zmq.HEARTBEAT_TTL, 5000)
            sock.setsockopt(zmq.RECONNECT_IVL, 100)
            sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
            if keys is not None:
                keys.apply_client(sock, server_name)
            self._monitor = sock.get_monitor_socket(
                zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                | zmq.EVENT_HANDSHAKE_SUCCEEDED)
            sock.connect(endpoint)
        except Exception:
            self.close()
            raise
        self._poller = zmq.Poller()
        self._poller.register(sock, zmq.POLLIN)
        self._poller.register(self._monitor, zmq.POLLIN)

    # ---- lifetime ----

    def close(self):
        with self._lock:
            if self._sock is None:
                return
            mon = getattr(self, "_monitor", None)
            if mon is not None:
                try:
                    self._sock.disable_monitor()
                except zmq.ZMQError:
                    pass
                mon.close(0)
                self._monitor = None
            self._sock.close(0)
            self._sock = None
            self._ctx.term()
            self._calls.clear()

    # ---- calls ----

    def send(self, method, body, timeout=None):
        """Sends a request (body: a protobuf message); its id. timeout in
        seconds: the call ends DEADLINE_EXCEEDED then; None: a stream,
        without a deadline."""
        with self._lock:
            if self._sock is None:
                raise RuntimeError("the client is closed")
            self._seq += 1
            rid = (self._seq << _SLOT_BITS) | (self._seq & ((1 << _SLOT_BITS) - 1))
            h = self._pb.Header()
            h.version = PROTOCOL_VERSION
            h.request_id = rid
            h.method = method
            h.deadline_ms = int(timeout * 1000) if timeout else 0
            h.client_id = self.client_id
            h.body = body.SerializeToString()
            deadline = time.monotonic() + timeout if timeout else None
            self._calls[rid] = _Call(method, deadline)
            try:
                self._sock.send(h.SerializeToString(), zmq.NOBLOCK)
            except zmq.ZMQError:
                del self._calls[rid]
                raise
            return rid

    def recv(self, rid, wait=None):
        """The next reply of call rid; None when none came within wait
        seconds (None: until the call's deadline, or forever for a stream)."""
        until = None if wait is None else time.monotonic() + wait
        while True:
            with self._lock:
                call = self._calls.get(rid)
                if call is None:
                    raise KeyError("request %d is not in flight" % rid)
                if call.replies:
                    reply = call.replies.popleft()
                    if not reply.more:
                        del self._calls[rid]
                    return reply
                now = time.monotonic()
                if until is not None and now >= until:
                    return None
                wake = min([t for t in (until, self._earliest()) if t is not None], default=now + _SLICE_S)
                self._poll(min(max(wake - now, 0.0), _SLICE_S))

    def forget(self, rid):
        """Drops call rid (a stream no longer read): its later replies are dropped."""
        with self._lock:
            self._calls.pop(rid, None)

    def call(self, method, body, timeout):
        """One call; its (only) reply, after its deadline at the latest."""
        rid = self.send(method, body, timeout)
        return self.recv(rid)

    # ---- the socket ----

    def _earliest(self):
        ds = [c.deadline for c in self._calls.values() if c.deadline is not None and not c.replies]
        return min(ds) if ds else None

    def _poll(self, timeout_s):
        events = dict(self._poller.poll(int(timeout_s * 1000)))
        if self._monitor in events:
            self._read_monitor()
        if self._sock in events:
            self._read_replies()
        self._expire(time.monotonic())

    def _complete(self, rid, reply):
        call = self._calls.get(rid)
        if call is None:
            return  # a call forgotten or already ended: dropped
        if not reply.more:
            call.deadline = None  # answered: no expiry while its reply waits to be read
        call.replies.append(reply)

    def _fail(self, rid, status, why):
        call = self._calls.get(rid)
        if call is not None and not (call.replies and not call.replies[-1].more):
            self._complete(rid, Reply(rid, status, "%s (method %d, %s)" % (why, call.method, self.endpoint)))

    def _expire(self, now):
        for rid, call in list(self._calls.items()):
            if call.deadline is not None and call.deadline <= now:
                self._fail(rid, DEADLINE_EXCEEDED, "no reply before the deadline")

    def _fail_all(self, status, why):
        for rid in list(self._calls):
            self._fail(rid, status, why)

    def _read_replies(self):
        while True:
            try:
                frames = self._sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            h = self._pb.Header()
            try:
                h.ParseFromString(frames[0])
            except Exception:  # a header that does not decode: nothing to match it to
                continue
            rid = h.request_id
            if rid not in self._calls:
                continue
            if h.version != PROTOCOL_VERSION:
                self._complete(rid, Reply(rid, INTERNAL, "malformed reply: protocol version %d, expected %d"
                                          % (h.version, PROTOCOL_VERSION)))
                continue
            if h.incarnation:
                self.peer_incarnation = h.incarnation
            status = h.status.code if h.HasField("status") else OK
            message = h.status.message if h.HasField("status") else ""
            self._complete(rid, Reply(rid, status, message, h.more and status == OK, h.body, h.incarnation))

    def _read_monitor(self):
        while True:
            try:
                ev = recv_monitor_message(self._monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            event = ev["event"]
            if event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                # Once is a connection lost before its handshake ended; a
                # second in a row, at once after the connect, is a refusal
                # (a server speaking CURVE to a client without keys).
                self._failed_handshakes += 1
                at_once = self._connected_at is not None and \
                    time.monotonic() - self._connected_at < _REFUSED_AT_ONCE_S
                if self._failed_handshakes >= 2 and at_once:
                    self._handshake_failed(event, ev["value"])
            elif event in (zmq.EVENT_HANDSHAKE_FAILED_AUTH, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
                self._handshake_failed(event, ev["value"])
            elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._failed_handshakes = 0
                self._handshaken = True
            elif event == zmq.EVENT_CONNECTED:
                self._handshaken = False
                self._connected_at = time.monotonic()
            elif event == zmq.EVENT_DISCONNECTED:
                # Before a handshake nothing left: the calls wait for the
                # reconnect, up to their deadlines.
                if self._handshaken:
                    self._handshaken = False
                    self._fail_all(UNAVAILABLE, "connection lost")

    def _handshake_failed(self, event, value):
        keys = self.keys
        if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            why = ("the server at %s refused the key '%s' (ZAP status %d): its public key %s.key is not in its key "
                   "directory; the operator adds it there, or use a key that is"
                   % (self.endpoint, keys.name if keys else "?", value, keys.name if keys else "NAME"))
        elif keys is None:
            why = ("security handshake with %s failed (%s) twice, at once: it speaks CURVE and this client has no "
                   "keys; give keys=DIR (or --keys DIR) and key=NAME"
                   % (self.endpoint, "mechanism mismatch" if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                      else "no detail"))
        else:
            why = ("CURVE handshake with %s failed (%s, code 0x%x): it serves without keys, or not as the "
                   "certificate this client expects (%s); check the keys on both sides"
                   % (self.endpoint, "protocol error" if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                      else "no detail", value, self.server_name or "unknown"))
        self._fail_all(UNAUTHENTICATED, why)
