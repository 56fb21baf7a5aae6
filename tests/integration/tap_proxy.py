#!/usr/bin/env python3
"""tap_proxy: a pass-through TCP proxy that records every byte it forwards.

    tap_proxy.py LISTEN_PORT TARGET_HOST:TARGET_PORT CAPTURE_FILE

Listens on 127.0.0.1:LISTEN_PORT, forwards each connection to the target
and appends what passes in either direction to CAPTURE_FILE. Prints
"listening" once it accepts. test_security.sh looks for a known tensor's
bytes in the capture: seen in plain text, not seen under CURVE."""
import selectors
import socket
import sys


def main():
    port = int(sys.argv[1])
    host, tport = sys.argv[2].rsplit(":", 1)
    out = open(sys.argv[3], "ab", buffering=0)
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(16)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ, None)
    peer = {}
    print("listening", flush=True)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is lsock:
                c, _ = lsock.accept()
                try:
                    t = socket.create_connection((host, int(tport)))
                except OSError:
                    c.close()
                    continue
                peer[c], peer[t] = t, c
                sel.register(c, selectors.EVENT_READ, None)
                sel.register(t, selectors.EVENT_READ, None)
                continue
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            other = peer.get(s)
            if not data or other is None:
                for x in (s, other):
                    if x is not None and x in peer:
                        sel.unregister(x)
                        peer.pop(x, None)
                        x.close()
                continue
            out.write(data)
            try:
                other.sendall(data)
            except OSError:
                pass


if __name__ == "__main__":
    main()
