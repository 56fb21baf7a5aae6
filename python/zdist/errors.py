"""zdist's errors as Python exceptions: the status code (gRPC's numbers, as
the daemons send them in the reply header) and the daemon's own text."""

# common/src/base/error.c's table: gRPC status codes by number.
STATUS_NAMES = {
    0: "OK",
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
}
STATUS_CODES = {v: k for k, v in STATUS_NAMES.items()}


class ZdistError(Exception):
    """A call refused or failed: `code` is the status number, `status` its
    name (INVALID_ARGUMENT, NOT_FOUND, ...), `message` the daemon's text
    (or, for a call that never got an answer, this client's), `endpoint`
    the daemon's address."""

    def __init__(self, code, message, endpoint=""):
        self.code = int(code)
        self.status = STATUS_NAMES.get(self.code, "STATUS_%d" % self.code)
        self.message = message or self.status
        self.endpoint = endpoint
        where = "%s: " % endpoint if endpoint else ""
        super().__init__("%s%s: %s" % (where, self.status, self.message))


class CheckpointError(Exception):
    """A checkpoint that cannot be read: damaged (a CRC that does not match,
    a truncated file), incomplete, or from another version. `path` names
    the file at fault."""

    def __init__(self, path, why):
        self.path = path
        self.why = why
        super().__init__("%s: %s" % (path, why))
