"""validate.py — the contract's input rules (docs/api.md §1), checked before any call is made.

A violation raises IdemError INVALID_ARGUMENT naming the field; nothing is sent.
"""
import re

from .errors import invalid

GLOBAL_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}")
NAME_RE = re.compile(r"[a-z0-9._-]{1,64}")
POLICY_NAME_RE = re.compile(r"\*|[a-z0-9._-]{1,64}")
HOST_PORT_RE = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")
FINGERPRINT_MAX = 64
BODY_MAX = 64 * 1024


def _matching(value, field, pattern, rule):
    if not isinstance(value, str) or not value:
        raise invalid(field, "is empty")
    if not pattern.fullmatch(value):
        raise invalid(field, rule)
    return value


def global_id(value, field="global_id"):
    return _matching(value, field, GLOBAL_ID_RE, "must be 1-128 characters of [A-Za-z0-9._:-]")


def name(value, field):
    return _matching(value, field, NAME_RE, "must be 1-64 characters of [a-z0-9._-]")


def policy_name(value, field):
    return _matching(value, field, POLICY_NAME_RE, "must be \"*\" or 1-64 characters of [a-z0-9._-]")


def to_bytes(value, field, limit):
    if value is None:
        return b""
    if isinstance(value, str):
        value = value.encode()
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise invalid(field, "must be bytes or str")
    value = bytes(value)
    if len(value) > limit:
        raise invalid(field, f"is {len(value)} bytes, more than the limit of {limit}")
    return value


def address(value):
    """One "host:port" (an IPv6 host in brackets)."""
    if not isinstance(value, str) or not value.strip():
        raise invalid("address", "is empty")
    m = HOST_PORT_RE.fullmatch(value.strip())
    if not m or not 1 <= int(m.group(2)) <= 65535:
        raise invalid("address", f"{value!r} is not host:port")
    return value.strip()


def addresses(value):
    """A list of "host:port", or one string "h1:p1,h2:p2"."""
    if isinstance(value, str):
        value = [a for a in value.split(",") if a.strip()] or [value]
    if not value:
        raise invalid("address", "is empty")
    out = []
    for a in value:
        a = address(a)
        if a not in out:
            out.append(a)
    return out
