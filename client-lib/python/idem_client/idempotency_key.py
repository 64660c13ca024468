"""idempotency_key.py — the Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header)
as the middleware reads it, and the step key and fingerprint it derives; the rules and their
vectors are client-lib/conformance/idempotency-key.json (docs/api.md §19).

A value starting with `"` is an RFC 8941 String (escapes \\" and \\\\ only, nothing after the
closing quote); any other value is the key verbatim. "abc" and abc name the same key.
"""
import hashlib
import re

MAX_KEY = 255

# the rule each error word names, for a problem document's detail
RULES = {
    "missing": "the Idempotency-Key header is missing",
    "empty": "the idempotency key is empty",
    "too-long": f"the idempotency key is longer than {MAX_KEY} characters",
    "non-printable": "the idempotency key has a character outside printable ASCII",
    "comma": "a bare idempotency key has a comma (a list)",
    "trailing": "something follows the idempotency key's closing quote (a list or parameters)",
    "unterminated": "the idempotency key's String has no closing quote",
    "bad-escape": "the idempotency key's String has an escape other than \\\" and \\\\",
}


class KeyError_(ValueError):
    """A malformed or missing key; .word is the rule's word (missing, empty, ...)."""

    def __init__(self, word):
        super().__init__(RULES[word])
        self.word = word


def _printable(ch):
    return " " <= ch <= "~"


def parse(value):
    """The key the header value names; KeyError_ with the rule's word otherwise. None = no header."""
    if value is None:
        raise KeyError_("missing")
    if value == "":
        raise KeyError_("empty")
    if value[0] == '"':
        out = []
        i = 1
        while True:
            if i >= len(value):
                raise KeyError_("unterminated")
            ch = value[i]
            if ch == "\\":
                if i + 1 >= len(value):
                    raise KeyError_("unterminated")
                nxt = value[i + 1]
                if nxt not in ('"', "\\"):
                    raise KeyError_("bad-escape")
                out.append(nxt)
                i += 2
            elif ch == '"':
                if i + 1 != len(value):
                    raise KeyError_("trailing")
                break
            elif not _printable(ch):
                raise KeyError_("non-printable")
            else:
                out.append(ch)
                i += 1
        key = "".join(out)
    else:
        if not all(_printable(ch) for ch in value):
            raise KeyError_("non-printable")
        if "," in value:
            raise KeyError_("comma")
        key = value
    if key == "":
        raise KeyError_("empty")
    if len(key) > MAX_KEY:
        raise KeyError_("too-long")
    return key


def global_id(key, scope=""):
    """The step's global id of a key in a scope: "k-" + the lower-case hex SHA-256 of the
    scope's bytes, one 0x1F byte and the key's bytes, for every key (docs/api.md §19),
    so that neither two scopes (callers) nor two keys name one step."""
    h = hashlib.sha256(scope.encode())
    h.update(b"\x1f")
    h.update(key.encode())
    return "k-" + h.hexdigest()


def authorization_scope(environ):
    """The default scope of a WSGI request: the lower-case hex SHA-256 of its Authorization
    header, "" when it has none."""
    value = environ.get("HTTP_AUTHORIZATION")
    if value is None:
        return ""
    return hashlib.sha256(value.encode("latin-1")).hexdigest()


class TargetMalformed(ValueError):
    """A request target with no one spelling (docs/api.md §19 rule 5)."""


_ABSOLUTE = re.compile(r"(?i)https?://[^/?#]*")
_HEX = b"0123456789abcdefABCDEF"
_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789._-")


def _decode_once(raw):
    out, i = bytearray(), 0
    while i < len(raw):
        b = raw[i]
        if b == 0x25:  # %
            if i + 2 >= len(raw) or raw[i + 1] not in _HEX or raw[i + 2] not in _HEX:
                raise TargetMalformed(f"a % not followed by two hex digits at byte {i}")
            b = int(raw[i + 1:i + 3], 16)
            i += 3
        else:
            i += 1
        if b < 0x20 or b == 0x7f:
            raise TargetMalformed(f"a control byte 0x{b:02x} in the path")
        out.append(b)
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise TargetMalformed("the decoded path is not UTF-8") from None


def _remove_dot_segments(path):
    """RFC 3986 §5.2.4 on an absolute path."""
    out = []
    segs = path.split("/")[1:]
    for seg in segs:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    trailing = bool(segs) and segs[-1] in (".", "..")
    return "/" + "/".join(out) + ("/" if trailing and out else "")


def normalize_target(target):
    """(path, fingerprint target bytes) of a request target as received (the latin-1 text of its
    bytes): the path up to the first ? (an absolute-form target: its path), percent-decoded once,
    dot segments removed, runs of / as one, a trailing / dropped; the fingerprint's target is
    that path (UTF-8) plus, when the target had a ?, ? and the query as received. It is the
    route's one spelling (docs/api.md §19 rule 5); TargetMalformed naming what is
    wrong (a bad escape, a control byte, not UTF-8, not starting with /)."""
    m = _ABSOLUTE.match(target)
    if m:
        target = target[m.end():]
        if not target.startswith("/"):
            target = "/" + target
    if not target.startswith("/"):
        raise TargetMalformed(f"the request target {target[:64]!r} does not start with /")
    raw_path, q, query = target.partition("?")
    path = _remove_dot_segments(_decode_once(raw_path.encode("latin-1")))
    path = re.sub("/{2,}", "/", path)
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    return path, path.encode("utf-8") + (b"?" + query.encode("latin-1") if q else b"")


def operation(method, path):
    """lower-case(method + " " + path), every UTF-8 byte outside [a-z0-9._-] as one "-", cut
    to 64 characters; path: normalize_target's (decoded, so a "?" in it is part of the path)."""
    text = f"{method} {path}".encode("utf-8").lower()
    return "".join(chr(b) if b in _NAME_BYTES else "-" for b in text)[:64]


def fingerprint(method, target, body):
    """SHA-256 of method + "\n" + target + "\n" + body (32 bytes); target: normalize_target's
    fingerprint target (bytes), or text (its latin-1 bytes)."""
    if isinstance(target, str):
        target = target.encode("latin-1")
    h = hashlib.sha256()
    h.update(method.encode("latin-1") + b"\n" + target + b"\n")
    h.update(body)
    return h.digest()
