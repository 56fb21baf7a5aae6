"""A zdist key directory, read as the C client reads it (common/src/wire/auth.c).

DIR/NAME.key holds a CURVE public certificate and DIR/NAME.key_secret the
secret one, both in czmq's ZPL text (what `zdist keygen NAME --dir DIR`
writes). The server whose certificate a client trusts at an address is
named by DIR/servers ("HOST:PORT NAME" lines), else by server_key, else,
for the coordinator, "chief-0" (as `zdist --keys DIR submit` does).
"""

import os
import re
import stat

_Z85_LEN = 40
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,63}$")
SERVERS_FILE = "servers"


def valid_name(name):
    return bool(name) and not name.startswith(".") and bool(_NAME.match(name))


def read_zpl(path):
    """A ZPL file (czmq's zconfig text) as {"section/key": value}."""
    out = {}
    stack = []  # (indent, name)
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            body = line.lstrip(" ")
            if not body or body.startswith("#"):
                continue
            indent = (len(line) - len(body)) // 4
            del stack[indent:]
            m = re.match(r"^([^=\s]+)\s*(?:=\s*(.*))?$", body)
            if not m:
                continue
            name, value = m.group(1), m.group(2)
            stack.append(name)
            if value is not None:
                value = value.strip()
                if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                    value = value[1:-1]
                else:
                    value = value.split("#", 1)[0].strip()
                out["/".join(stack)] = value
    return out


def normalize(address):
    """host:port or tcp://host:port as tcp://host:port."""
    address = address.strip()
    return address if "://" in address else "tcp://" + address


class Keys:
    """The certificates of a key directory and this process's own (NAME)."""

    def __init__(self, directory, name="client", server_key=None):
        self.dir = directory
        if not valid_name(name):
            raise ValueError("key name '%s' is not valid (--key NAME: e.g. client, alice, worker-0)" % name)
        self.name = name
        self.public = {}
        self.places = {}
        try:
            entries = sorted(os.listdir(directory))
        except OSError as e:
            raise ValueError("cannot read key directory '%s': %s; create it with zdist keygen NAME --dir %s"
                             % (directory, e.strerror, directory)) from None
        for entry in entries:
            if not entry.endswith(".key") or not valid_name(entry[:-4]):
                continue
            pub = read_zpl(os.path.join(directory, entry)).get("curve/public-key", "")
            if len(pub) != _Z85_LEN:
                raise ValueError("'%s' is not a CURVE public certificate; recreate it with zdist keygen %s"
                                 % (os.path.join(directory, entry), entry[:-4]))
            self.public[entry[:-4]] = pub
        self._load_servers()
        self._load_self()
        self.default_server = None
        if server_key is not None:
            if server_key not in self.public:
                raise ValueError("--server-key %s: no '%s/%s.key'; copy the server's public key there"
                                 % (server_key, directory, server_key))
            self.default_server = server_key

    def _load_servers(self):
        path = os.path.join(self.dir, SERVERS_FILE)
        if not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                words = line.split()
                if not words or words[0].startswith("#"):
                    continue
                if len(words) != 2 or not valid_name(words[1]):
                    raise ValueError("%s line %d: write 'HOST:PORT NAME' (e.g. '127.0.0.1:5000 ps-0')" % (path, n))
                self.places[normalize(words[0])] = words[1]

    def _load_self(self):
        sec = os.path.join(self.dir, self.name + ".key_secret")
        try:
            st = os.stat(sec)
        except OSError:
            raise ValueError("no certificate '%s': create it with zdist keygen %s --dir %s"
                             % (sec, self.name, self.dir)) from None
        if st.st_mode & 0o077:
            raise ValueError("'%s' is readable by others (mode %04o): chmod 600 it" % (sec, stat.S_IMODE(st.st_mode)))
        zpl = read_zpl(sec)
        pub, secret = zpl.get("curve/public-key", ""), zpl.get("curve/secret-key", "")
        if len(pub) != _Z85_LEN or len(secret) != _Z85_LEN:
            raise ValueError("'%s' is not a CURVE secret certificate; recreate it with zdist keygen %s"
                             % (sec, self.name))
        if self.name not in self.public:
            raise ValueError("no public certificate '%s/%s.key' next to the secret one; recreate it with "
                             "zdist keygen %s --force" % (self.dir, self.name, self.name))
        self.self_public = pub
        self.self_secret = secret

    def server_name_at(self, endpoint, fallback=None):
        """The certificate name trusted at endpoint: DIR/servers, --server-key, else fallback."""
        return self.places.get(normalize(endpoint)) or self.default_server or fallback

    def apply_client(self, sock, server_name):
        """Sets CURVE client options on a zmq socket (before it connects)."""
        import zmq

        server = self.public.get(server_name)
        if server is None:
            raise ValueError("no public key for '%s' in '%s': copy %s.key there" % (server_name, self.dir, server_name))
        sock.setsockopt(zmq.CURVE_SERVERKEY, server.encode())
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.self_public.encode())
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.self_secret.encode())
