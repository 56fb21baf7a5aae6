"""The canonical JSON text whose CRC-32 seals zdist's manifests and state
files (common/src/base/file.c: jansson's json_dumps with JSON_COMPACT |
JSON_SORT_KEYS, reals as "%.17g"), so a reader in Python checks the same
CRC the daemons wrote."""

import zlib

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(s):
    out = ['"']
    for ch in s:
        e = _SHORT.get(ch)
        if e is not None:
            out.append(e)
        elif ord(ch) < 0x20:
            out.append("\\u%04X" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _real(x):
    # jansson's jsonp_dtostr: "%.17g", a ".0" where it would read back as
    # an integer, no '+' and no leading zeros in the exponent.
    text = "%.17g" % x
    if "." not in text and "e" not in text and "n" not in text:
        text += ".0"
    if "e" in text:
        mant, exp = text.split("e")
        sign = "-" if exp.startswith("-") else ""
        text = mant + "e" + sign + exp.lstrip("+-").lstrip("0")
    return text


def dumps(v):
    """v (as json.loads returned it) in jansson's compact, key-sorted form."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _real(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ",".join(dumps(x) for x in v) + "]"
    if isinstance(v, dict):
        # JSON_SORT_KEYS compares UTF-8 bytes (strcmp): code point order.
        return "{" + ",".join(_string(k) + ":" + dumps(v[k]) for k in sorted(v)) + "}"
    raise TypeError("not a JSON value: %r" % (v,))


def crc_check(doc, field):
    """None when doc's `field` is the CRC-32 of the rest (or absent), else
    why not. Removes the field, as zdist_json_crc_check does."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    if field not in doc:
        return None
    want = doc.pop(field)
    if not isinstance(want, int) or isinstance(want, bool):
        return '"%s" is not an integer' % field
    got = zlib.crc32(dumps(doc).encode("utf-8")) & 0xFFFFFFFF
    if got != want:
        return 'CRC-32 %08x, "%s" says %08x' % (got, field, want & 0xFFFFFFFFFFFFFFFF)
    return None
