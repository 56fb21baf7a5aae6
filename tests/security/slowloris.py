"""Holds N connections from 127.0.0.1 to each HTTP port, each having sent half a request line, reopening
any the server closes, for SECONDS; then prints how many were opened and closed by the server.
Loopback only, bounded in count and time: slowloris.py SECONDS N PORT..."""
import selectors, socket, sys, time

secs, n, ports = float(sys.argv[1]), int(sys.argv[2]), [int(p) for p in sys.argv[3:]]
sel = selectors.DefaultSelector()
opened = closed = 0


def open_one(port):
    global opened
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    sel.register(s, selectors.EVENT_WRITE, (port, False))
    opened += 1


for port in ports:
    for _ in range(n):
        open_one(port)
print("ready", flush=True)
end = time.time() + secs
while time.time() < end:
    for key, ev in sel.select(timeout=0.2):
        s, (port, sent) = key.fileobj, key.data
        if not sent:
            try:
                s.send(b"GET /metr")
                sel.modify(s, selectors.EVENT_READ, (port, True))
                continue
            except OSError:
                pass
        else:
            try:
                if s.recv(4096):
                    continue
            except OSError:
                pass
        sel.unregister(s)
        s.close()
        closed += 1
        if opened < 5 * n * len(ports):
            open_one(port)
print("opened %d, closed by the server %d" % (opened, closed))
