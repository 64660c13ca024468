"""idempotency_key.py — the Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header)
as the middleware reads it, and the step key and fingerprint it derives; the rules and their
vectors are client-lib/conformance/idempotency-key.json (docs/api.md §19).

A value starting with `"` is an RFC 8941 String (escapes \\" and \\\\ only, nothing after the
closing quote); any other value is the key verbatim. "abc" and abc name the same key.
"""
import hashlib
import re

MAX_KEY = 255
_NOT_NAME = re.compile(r"[^a-z0-9._-]")

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
    scope's bytes, one 0x1F byte and the key's bytes, for every key (docs/api.md §19, amended),
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


def operation(method, path):
    """lower-case(method + " " + path without its query), every character outside
    [a-z0-9._-] as "-", cut to 64 characters."""
    path = path.split("?", 1)[0]
    return _NOT_NAME.sub("-", f"{method} {path}".lower())[:64]


def fingerprint(method, target, body):
    """SHA-256 of method + "\\n" + target (path and query as received) + "\\n" + body (32 bytes)."""
    h = hashlib.sha256()
    h.update(method.encode("latin-1") + b"\n" + target.encode("latin-1") + b"\n")
    h.update(body)
    return h.digest()
