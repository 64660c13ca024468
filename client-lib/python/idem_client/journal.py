"""journal.py — the unguarded-execution journal, in libidem's line format (idem.h), so that
`idemctl reconcile` replays it into the coordinator:

    idem1 TIME_MS SOURCE TENANT GLOBAL_ID SERVICE OPERATION PHASE OUTCOME CODE FP BODY

one space apart; SOURCE "client" (no coordinator could decide) or "server" (PROCEED_UNGUARDED);
FP lower-case hex; text fields percent-encoded (every byte outside [A-Za-z0-9._:/-] as %XX, and a
lone "-" too); an empty field is "-". Each line is appended with O_APPEND and fsync'd.
"""
import os
import threading
import time

_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/-")
_mu = threading.Lock()


def encode(value):
    if isinstance(value, str):
        value = value.encode()
    if not value:
        return "-"
    if value == b"-":
        return "%2D"
    return "".join(chr(b) if b in _PLAIN else "%%%02X" % b for b in value)


def line(source, tenant, key, fingerprint, result):
    phase = "compensation" if key.phase == "compensation" else "forward"
    outcome = result.outcome if result.outcome in ("succeeded", "failed", "retryable", "unknown") \
        else "unknown"
    fp = fingerprint.hex() if fingerprint else "-"
    fields = ["idem1", str(int(time.time() * 1000)), source, encode(tenant), encode(key.global_id),
              encode(key.service), encode(key.operation), phase, outcome, str(int(result.code)), fp,
              encode(result.body)]
    return " ".join(fields) + "\n"


def append(path, text):
    """Appends one line and fsyncs it; OSError when it cannot."""
    data = text.encode()
    with _mu:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            done = 0
            while done < len(data):
                done += os.write(fd, data[done:])
            os.fsync(fd)
        finally:
            os.close(fd)
