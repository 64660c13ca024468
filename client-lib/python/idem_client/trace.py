"""trace.py — the caller's W3C trace context as gRPC metadata (docs/api.md §22, docs/sdk-python.md).

A call sends `traceparent` (and `tracestate`): the one passed explicitly (run_step(...,
traceparent=...), the raw step calls, the WSGI middleware passing the request's header), else
the current span's when the opentelemetry package is importable and a span is active, else none.
"""
import re

from .errors import invalid

# a later version may append fields after a "-": printable ASCII without spaces, and the whole
# value at most TRACEPARENT_MAX characters (it travels as gRPC metadata, which the coordinator
# bounds: docs/api.md §16)
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\x21-\x7e]*)?")
_TRACESTATE = re.compile(r"[\x20-\x7e]{0,512}")
TRACEPARENT_MAX = 512


def parse_traceparent(value):
    """(trace_id, span_id, flags) of a W3C traceparent, or None when it is not one (version ff,
    all-zero ids, version 00 with more fields, anything else)."""
    if not isinstance(value, str):
        return None
    value = value.strip(" \t")
    if len(value) > TRACEPARENT_MAX:
        return None
    m = _TRACEPARENT.fullmatch(value)
    if not m:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    if trace_id == "0" * 32 or span_id == "0" * 16:
        return None
    return trace_id, span_id, int(flags, 16)


def valid_tracestate(value):
    return isinstance(value, str) and bool(_TRACESTATE.fullmatch(value))


_otel = None  # opentelemetry.trace, False when it cannot be imported (looked up once)


def _otel_trace():
    global _otel  # noqa: PLW0603 (a cache)
    if _otel is None:
        try:
            from opentelemetry import trace as otel_trace  # noqa: PLC0415 (optional)
            _otel = otel_trace
        except ImportError:
            _otel = False
    return _otel


def _from_opentelemetry():
    """The current span's traceparent/tracestate pairs, when opentelemetry is importable."""
    otel_trace = _otel_trace()
    if not otel_trace:
        return ()
    sc = otel_trace.get_current_span().get_span_context()
    if not sc.is_valid:
        return ()
    pairs = [("traceparent", f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags) & 0xff:02x}")]
    state = sc.trace_state.to_header() if sc.trace_state else ""
    if state:
        pairs.append(("tracestate", state))
    return tuple(pairs)


def metadata(traceparent=None, tracestate=None):
    """The metadata pairs of one call (a tuple). An explicit traceparent must be valid:
    INVALID_ARGUMENT naming the field otherwise; without one, opentelemetry's current span."""
    if traceparent is None:
        if tracestate is not None:
            raise invalid("tracestate", "needs a traceparent")
        return _from_opentelemetry()
    if parse_traceparent(traceparent) is None:
        raise invalid("traceparent", "must be a W3C traceparent: 00-<32 hex trace id>-"
                                     "<16 hex span id>-<2 hex flags>")
    pairs = [("traceparent", traceparent.strip(" \t"))]
    if tracestate is not None:
        if not valid_tracestate(tracestate):
            raise invalid("tracestate", "must be printable ASCII, at most 512 characters")
        if tracestate:
            pairs.append(("tracestate", tracestate))
    return tuple(pairs)


def from_environ(environ):
    """The (traceparent, tracestate) of a WSGI request's headers, (None, None) when it has no
    valid traceparent: a malformed, too long or repeated one (the server joins two headers with a
    comma) is no trace context, never an error. A tracestate that is not valid or too long is
    dropped, the traceparent kept. Both are checked here, before any coordinator call."""
    tp = environ.get("HTTP_TRACEPARENT")
    if parse_traceparent(tp) is None:
        return None, None
    ts = environ.get("HTTP_TRACESTATE")
    if ts:  # several lines reach here joined with ", ": list members joined with ","
        ts = ",".join(m.strip(" \t") for m in ts.split(","))
    return tp.strip(" \t"), (ts if ts and valid_tracestate(ts) else None)
