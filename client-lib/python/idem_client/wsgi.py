"""wsgi.py — IdempotencyMiddleware: the HTTP Idempotency-Key middleware for WSGI apps
(draft-ietf-httpapi-idempotency-key-header; docs/api.md §19, docs/http-middleware.md,
client-lib/conformance/http-middleware.json).

    app = IdempotencyMiddleware(app, idem_client.connect(...), service="payments-api")

For each wrapped request (default: POST and PATCH) the Idempotency-Key names one step (global
id from the caller's scope and the key, service, operation = the route's name); the first
request runs the app and its answer is stored; a repeat gets the stored answer with
`Idempotent-Replayed: true`. The request body is read in full first: a chunked body when the
server sets `wsgi.input_terminated` (to EOF), else Content-Length bytes; longer than
max_request_body → 413, shorter than its Content-Length or broken → 400 body-incomplete, and no
step is begun. The app's answer is held up to body_limit bytes; past it the rest streams to the
client and the step is stored without its body. Every answer the middleware makes itself (400,
409, 413, 422, 500, 503) is an RFC 9457 problem document (`application/problem+json`) with
`instance` and `idempotency_key`, and one log line naming the instance.

The stored answer is the step result's body, UTF-8 JSON (docs/sdk-python.md, "Stored response"):
    {"status": 201, "headers": [["Content-Type", "application/json"]], "body_b64": "..."}
plus "body_omitted": true when the app's body was not kept (stored without it).
The step's code is the status; 2xx/3xx complete as succeeded, 4xx as failed, 5xx as retryable
(the key is released: the next retry runs the app again).
"""
import base64
import io
import json
import logging
import math
import queue
import re
import threading
import uuid
from http import HTTPStatus
from urllib.parse import quote

from . import idempotency_key as ik
from . import reasons
from . import trace as _trace
from . import validate
from .errors import IdemError
from .types import Output, StepKey

LOG = logging.getLogger("idem_client.wsgi")

# type word → (status, title, retryable), as client-lib/conformance/http-middleware.json's
# "problems" (the middleware's) and "example_server" "problems" (what a server around it answers
# itself: waitress_server.py, the example's routes) say
PROBLEMS = {
    "body-incomplete": (400, "Request body incomplete", False),
    "body-malformed": (400, "Request body framing malformed", False),
    "key-malformed": (400, "Idempotency-Key malformed", False),
    "key-missing": (400, "Idempotency-Key missing", False),
    "target-malformed": (400, "Request target malformed", False),
    "in-progress": (409, "Request in progress", True),
    "body-too-large": (413, "Request body too large", False),
    "compensated": (422, "Request compensated", False),
    "fingerprint-mismatch": (422, "Idempotency-Key reused", False),
    "coordinator-refused": (500, "Idempotency coordinator refused the middleware", False),
    "middleware-error": (500, "Idempotency middleware error", False),
    "stored-answer-invalid": (500, "Stored answer invalid", False),
    "coordinator-unavailable": (503, "Idempotency coordinator unavailable", True),
}
SERVER_PROBLEMS = {
    "request-malformed": (400, "Request malformed", False),
    "not-found": (404, "Not found", False),
    "method-not-allowed": (405, "Method not allowed", False),
    "header-too-large": (431, "Request header fields too large", False),
}
REFUSALS = ("UNAUTHENTICATED", "PERMISSION_DENIED", "INVALID_ARGUMENT")
_READ = 64 * 1024
_DIGITS = re.compile(r"[0-9]+")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# framing and connection headers: the server writes them, never a stored answer (RFC 9110 7.6.1)
FRAMING = frozenset(("content-length", "transfer-encoding", "connection", "keep-alive", "upgrade",
                     "te", "trailer", "proxy-connection"))


class _BodyError(Exception):
    def __init__(self, word, detail):
        super().__init__(detail)
        self.word = word


def _method_match(methods):
    # methods are case-sensitive (RFC 9110 9.1): "post" is not POST and is not wrapped
    def match(environ):
        return environ.get("REQUEST_METHOD", "GET") in methods
    return match


def coordinator_problem(code, reason):
    """The problem type word of a coordinator error (http-middleware.json's coordinator_errors)."""
    if code == "ABORTED":
        return "in-progress"
    if code == "FAILED_PRECONDITION" and reason in (reasons.FINGERPRINT_MISMATCH, ""):
        return "fingerprint-mismatch"
    if code in REFUSALS:
        return "coordinator-refused"
    return "coordinator-unavailable"


def problem_document(word, detail, key=None, base="docs/http-middleware.md", retry_after_ms=0,
                     extra_headers=()):
    """An RFC 9457 problem document of one of PROBLEMS' or SERVER_PROBLEMS' words: (status line,
    headers, body bytes, instance). The middleware answers with it, and so does the server
    around it for what it answers itself (404, 405 with extra_headers' Allow, its own 400s)."""
    status, title, retryable = PROBLEMS.get(word) or SERVER_PROBLEMS[word]
    doc = {"type": f"{base}#{word}", "title": title, "status": status, "detail": detail,
           "instance": f"urn:uuid:{uuid.uuid4()}", "retryable": retryable}
    if key is not None:
        doc["idempotency_key"] = key
    body = json.dumps(doc).encode()
    headers = [("Content-Type", "application/problem+json"), ("Content-Length", str(len(body)))]
    if retryable and retry_after_ms > 0:  # the coordinator's hint only, never made up
        headers.append(("Retry-After", str(retry_after_s(retry_after_ms))))
    headers.extend(extra_headers)
    return _status_line(status), headers, body, doc["instance"]


def _status_line(code):
    try:
        return f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        return f"{code} Status {code}"


def retry_after_s(retry_after_ms):
    """Whole seconds, rounded up from idem-retry-after-ms, at least 1."""
    return max(1, math.ceil(retry_after_ms / 1000.0)) if retry_after_ms > 0 else 1


def encode_response(status, headers, body, keep, body_limit, max_doc=validate.BODY_MAX):
    """The stored form of an answer (kept headers in order); body_omitted past body_limit, when
    body is None (it streamed) or when the document would not fit max_doc bytes."""
    kept = [[n, v] for n, v in headers if n.lower() in keep]
    doc = {"status": status, "headers": kept, "body_b64": ""}
    if body is not None and len(body) <= body_limit:
        doc["body_b64"] = base64.b64encode(body).decode()
        out = json.dumps(doc, separators=(",", ":")).encode()
        if len(out) <= max_doc:
            return out
        doc["body_b64"] = ""
    doc["body_omitted"] = True
    out = json.dumps(doc, separators=(",", ":")).encode()
    if len(out) > max_doc:
        doc["headers"] = []
        out = json.dumps(doc, separators=(",", ":")).encode()
    return out


def decode_response(data):
    """(status, headers, body, omitted) from the stored form; ValueError naming what is wrong
    when it is not one (http-middleware.json's stored_answer_rule: a JSON object, status an
    integer, headers [name, value] text pairs, body_b64 base64 text, body_omitted a boolean)."""
    doc = json.loads(data.decode())
    if not isinstance(doc, dict):
        raise ValueError("the stored answer is not a JSON object")
    status = doc.get("status")
    if type(status) is not int:  # noqa: E721 (a bool is an int too)
        raise ValueError(f"the stored status {status!r} is not an integer")
    headers = doc.get("headers", [])
    if not isinstance(headers, list) or not all(
            isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h)
            for h in headers):
        raise ValueError("the stored headers are not a list of [name, value] texts")
    b64 = doc.get("body_b64", "")
    if not isinstance(b64, str):
        raise ValueError("the stored body_b64 is not text")
    body = base64.b64decode(b64, validate=True)
    omitted = doc.get("body_omitted", False)
    if not isinstance(omitted, bool):
        raise ValueError("the stored body_omitted is not a boolean")
    return status, [(n, v) for n, v in headers], body, omitted


def stored_answer(data, code, keep):
    """(status, headers, body, omitted) to replay from a step result's body and code, or
    ValueError naming what is wrong (http-middleware.json's stored_answer_rule). An empty body
    (dropped past the policy's retention_s) replays the code, no headers, body omitted."""
    if data:
        status, headers, body, omitted = decode_response(data)
    else:
        status, headers, body, omitted = code, [], b"", True
    check_stored(status, headers, keep)
    return status, headers, body, omitted


class StoredAnswerInvalid(ValueError):
    """A stored answer the middleware must not send."""


def check_stored(status, headers, keep):
    """A stored answer may carry a status of 200-599, only the kept headers (never a framing
    one), names that are tokens and values without control characters; StoredAnswerInvalid
    naming what is wrong otherwise (it is never sent: a stored header with CR LF would split the
    answer)."""
    if not 200 <= status <= 599:
        raise StoredAnswerInvalid(f"the stored status {status} is outside 200-599")
    for n, v in headers:
        if not _TOKEN.fullmatch(n):
            raise StoredAnswerInvalid(f"the stored header name {n!r} is not an HTTP token")
        if n.lower() in FRAMING or n.lower() not in keep:
            raise StoredAnswerInvalid(f"the stored header {n!r} is not one the middleware keeps")
        if _CONTROL.search(v):
            raise StoredAnswerInvalid(f"the stored value of header {n!r} has a control character")
        if any(ord(c) > 0xff for c in v):
            raise StoredAnswerInvalid(f"the stored value of header {n!r} is not Latin-1")


def check_framing(content_length, transfer_encoding):
    """The length a request declares (None: none), or _BodyError("body-malformed") when its framing
    is ambiguous: Content-Length with Transfer-Encoding, a Content-Length that is not one run of
    digits (negative, signed, two lengths joined by the server), a Transfer-Encoding other than
    chunked. A request smuggled past one reader must not run the handler (RFC 9112 6.3)."""
    raw_len = (content_length or "").strip(" \t")
    te = transfer_encoding
    if te is not None and raw_len:
        raise _BodyError("body-malformed", f"the request has both Content-Length {raw_len!r} and "
                                           f"Transfer-Encoding {te!r}")
    if te is not None and te.strip(" \t").lower() != "chunked":
        raise _BodyError("body-malformed", f"the Transfer-Encoding {te!r} is not chunked")
    if not raw_len:
        return None
    if not _DIGITS.fullmatch(raw_len):
        raise _BodyError("body-malformed", f"the Content-Length {raw_len!r} is not one length "
                                           "(digits only: a negative, signed or repeated length "
                                           "is refused)")
    return int(raw_len)


def request_target(environ):
    """(normalized path, fingerprint target bytes) of a WSGI request: from the target as
    received (waitress's REQUEST_URI, gunicorn's RAW_URI), else rebuilt from SCRIPT_NAME,
    PATH_INFO and QUERY_STRING; ik.TargetMalformed when it has no one spelling."""
    raw = environ.get("REQUEST_URI") or environ.get("RAW_URI")
    if raw is None:
        raw = quote((environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""))
                    .encode("latin-1"), safe="/:@!$&'()*+,;=-._~")
        qs = environ.get("QUERY_STRING", "")
        raw += "?" + qs if qs else ""
    return ik.normalize_target(raw)


def read_body(environ, limit):
    """The request body, read in full; _BodyError("body-too-large" | "body-incomplete" |
    "body-malformed")."""
    chunked = environ.get("HTTP_TRANSFER_ENCODING") is not None
    length = check_framing(environ.get("CONTENT_LENGTH"), environ.get("HTTP_TRANSFER_ENCODING"))
    if length is not None and length > limit:
        raise _BodyError("body-too-large", f"the request body of {length} bytes is longer than "
                                           f"the {limit}-byte limit")
    terminated = bool(environ.get("wsgi.input_terminated"))
    if not terminated and length is None:
        if chunked:  # the server hands over the raw framing or nothing: refuse, never guess
            raise _BodyError("body-incomplete", "a chunked request body, and the WSGI server "
                                                "does not set wsgi.input_terminated")
        return b""
    inp = environ["wsgi.input"]
    want = limit + 1 if terminated else length
    parts, n = [], 0
    try:
        while n < want:
            c = inp.read(min(_READ, want - n))
            if not c:
                break
            parts.append(c)
            n += len(c)
    except Exception as e:  # noqa: BLE001 (servers raise their own: a broken chunk, a reset)
        raise _BodyError("body-incomplete", f"the request body could not be read ({e})")
    if n > limit:
        raise _BodyError("body-too-large", f"the request body is longer than the {limit}-byte "
                                           "limit")
    if length is not None and n < length:
        raise _BodyError("body-incomplete", f"the request body ended after {n} of its "
                                            f"{length} bytes")
    return b"".join(parts)


class _Answer:
    """The running answer's iterable. A server that closes it before the first item (the client
    left) still ends the step: the app did not run, so the key is released."""

    def __init__(self, gen, outputs, events, timeout):
        self._gen, self._outputs, self._events, self._started = gen, outputs, events, False
        self._timeout = timeout

    def __iter__(self):
        return self

    def __next__(self):
        self._started = True
        return next(self._gen)

    def close(self):
        if not self._started:
            self._outputs.put(Output("retryable", 0, b""))
            try:  # the step is completed (released) before the server goes on
                self._events.get(timeout=self._timeout + 5)
            except queue.Empty:
                pass
        self._gen.close()


class IdempotencyMiddleware:
    """Options:
    client        an idem_client.Client (with journal_path for fail-open operations)
    service       the step's service name (1-64 of [a-z0-9._-])
    methods       the wrapped methods, upper-case tokens (default POST and PATCH); matched
                  case-sensitively: "post" is not POST
    match         environ -> bool: which requests are wrapped (instead of methods)
    operation     environ -> str: the route's operation name (default method and path,
                  lower-cased, other characters as "-", at most 64)
    scope         environ -> str: the caller's part of the step key (default the hex SHA-256 of
                  the Authorization header, "" without one); two scopes never share a step
    keep_headers  the app's headers stored and replayed (default Content-Type)
    body_limit    the app's answer is held up to this many body bytes (default 64 KiB); past it
                  the rest streams to the client and the step is stored without its body
                  (replayed with Idempotent-Body-Omitted: true)
    problem_base  the base of problem documents' type (default "docs/http-middleware.md")
    wait          a request meeting its key in progress waits for the first (up to timeout)
                  and replays it, instead of answering 409 at once
    timeout       seconds for the coordinator's part of one request (default 5)
    max_request_body  a longer request body is refused with 413 (default 1 MiB)
    logger        where the one line per problem answer goes (default idem_client.wsgi)
    """

    def __init__(self, app, client, service="http", *, methods=("POST", "PATCH"), match=None,
                 operation=None, scope=None,
                 keep_headers=("Content-Type",), body_limit=64 * 1024,
                 problem_base="docs/http-middleware.md", wait=False, timeout=5.0,
                 max_request_body=1024 * 1024, logger=None):
        validate.name(service, "service")
        self.app = app
        self.client = client
        self.service = service
        for m in methods:
            if not isinstance(m, str) or not re.fullmatch(r"[A-Z0-9!#$%&'*+.^_`|~-]+", m):
                raise ValueError(f"methods: {m!r} is not an upper-case method token (methods "
                                 "match case-sensitively: POST, not post)")
        self.match = match or _method_match(frozenset(methods))
        self.operation = operation
        self.scope = scope or ik.authorization_scope
        self.keep = {h.lower() for h in keep_headers}
        framing = sorted(self.keep & FRAMING)
        if framing:
            raise ValueError(f"keep_headers: {', '.join(framing)} is a framing header the server "
                             "writes; it cannot be stored and replayed")
        self.body_limit = int(body_limit)
        self.problem_base = problem_base
        self.wait = bool(wait)
        self.timeout = float(timeout)
        self.max_request_body = int(max_request_body)
        self.log = logger or LOG

    # --- answers ------------------------------------------------------------------------------

    def problem(self, environ, start_response, word, detail, key=None, retry_after_ms=0):
        status, headers, body, instance = problem_document(word, detail, key, self.problem_base,
                                                           retry_after_ms)
        self.log.warning("%s %s: %s %s instance=%s%s: %s", environ.get("REQUEST_METHOD"),
                         environ.get("PATH_INFO", ""), status.split(" ", 1)[0], word, instance,
                         f" key={json.dumps(key)}" if key is not None else "", detail)
        start_response(status, headers)
        return [body]

    @staticmethod
    def _send(start_response, status, headers, body, extra=()):
        headers = [(n, v) for n, v in headers if n.lower() != "content-length"]
        headers += list(extra) + [("Content-Length", str(len(body)))]
        start_response(_status_line(status), headers)
        return [body]

    # --- the request --------------------------------------------------------------------------

    def __call__(self, environ, start_response):
        if not self.match(environ):
            return self.app(environ, start_response)
        try:
            path, fp_target = request_target(environ)
        except ik.TargetMalformed as e:
            return self.problem(environ, start_response, "target-malformed",
                                f"{e}; the request target has no one spelling and nothing ran")
        # several Idempotency-Key lines reach here joined with ", " by the server: one list,
        # refused by the parser's comma or trailing rule
        raw = environ.get("HTTP_IDEMPOTENCY_KEY")
        try:
            key = ik.parse(raw)
        except ik.KeyError_ as e:
            if e.word == "missing":
                return self.problem(environ, start_response, "key-missing",
                                    'rule "missing": the Idempotency-Key header is missing')
            return self.problem(environ, start_response, "key-malformed",
                                f'rule "{e.word}": {e}; header value {json.dumps(raw)}')
        shown = json.dumps(key)
        try:
            body = read_body(environ, self.max_request_body)
        except _BodyError as e:
            return self.problem(environ, start_response, e.word,
                                f"{e}; the app did not run and idempotency key {shown} was not "
                                "used", key)
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            op = self.operation(environ) if self.operation else ik.operation(method, path)
            step = StepKey(ik.global_id(key, str(self.scope(environ))), self.service, op)
        except Exception as e:  # noqa: BLE001 (the application's callbacks)
            self.log.error("idempotency key %s: the operation or scope could not be named: %r",
                           shown, e)
            return self.problem(environ, start_response, "middleware-error",
                                f"the operation or scope of idempotency key {shown} could not "
                                "be named; the app did not run", key)
        inner = dict(environ)
        inner["wsgi.input"] = io.BytesIO(body)
        inner["CONTENT_LENGTH"] = str(len(body))
        inner.pop("HTTP_TRANSFER_ENCODING", None)
        return self._run(environ, inner, start_response, step,
                         ik.fingerprint(method, fp_target, body), key)

    def _run(self, environ, inner, start_response, step, fp, key):
        """The step helper runs on a thread of its own; its action hands over to this one, which
        runs the app (in the server's thread, as without the middleware) and streams what is
        past body_limit, then hands the result back for CompleteStep."""
        events = queue.Queue()
        outputs = queue.Queue()
        # the request's trace continues on the step (docs/api.md §22): its traceparent header,
        # else opentelemetry's current span, taken here (the step runs on another thread)
        traceparent, tracestate = _trace.from_environ(environ)
        if traceparent is None:
            current = dict(_trace.metadata())
            traceparent, tracestate = current.get("traceparent"), current.get("tracestate")

        def action(ctx):
            events.put(("proceed",))
            return outputs.get()

        def runner():
            try:
                rep = self.client.run_step(step, action, fp, timeout=self.timeout,
                                           no_wait=not self.wait, retry_in_progress=self.wait,
                                           traceparent=traceparent, tracestate=tracestate)
                events.put(("done", rep, None))
            except BaseException as e:  # noqa: BLE001 (handed to the request's thread)
                events.put(("done", None, e))

        threading.Thread(target=runner, name="idem-wsgi-step", daemon=True).start()
        ev = events.get()
        if ev[0] == "done":
            return self._decided(environ, start_response, ev[1], ev[2], key)
        return _Answer(self._proceed(environ, inner, start_response, outputs, events, key),
                       outputs, events, self.timeout)

    def _decided(self, environ, start_response, rep, err, key):
        """The answer when the app did not run here: a replay or a problem."""
        shown = json.dumps(key)
        if err is not None:
            if not isinstance(err, IdemError):
                self.log.error("idempotency key %s: the middleware failed: %r", shown, err)
                return self.problem(environ, start_response, "middleware-error",
                                    f"the middleware could not run the request with idempotency "
                                    f"key {shown}; the app did not run", key)
            e = err
            why = f"{e.code}{' ' + e.reason if e.reason else ''}"
            word = coordinator_problem(e.code, e.reason)
            if word == "in-progress":
                return self.problem(environ, start_response, word,
                                    f"a request with idempotency key {shown} is still being "
                                    "processed", key, e.retry_after_ms)
            if word == "fingerprint-mismatch":
                return self.problem(environ, start_response, word,
                                    f"idempotency key {shown} was used for another request "
                                    "(method, target or body)", key)
            if word == "coordinator-refused":
                return self.problem(environ, start_response, word,
                                    f"the idem coordinator refused the middleware ({why}): a "
                                    "misconfiguration a retry does not fix; the app did not run",
                                    key)
            return self.problem(environ, start_response, word,
                                f"no idem coordinator could decide on idempotency key {shown} "
                                f"({why}) and the operation fails closed", key, e.retry_after_ms)
        if rep.decision != "REPLAY":  # a SKIP: the key names a compensated step
            return self.problem(environ, start_response, "compensated",
                                f"the request with idempotency key {shown} was compensated "
                                "and does not run again", key)
        res = rep.result
        extra = [("Idempotent-Replayed", "true")]
        try:
            status, headers, rbody, omitted = stored_answer(res.body, res.code, self.keep)
        except ValueError as e:
            return self.problem(environ, start_response, "stored-answer-invalid",
                                f"the answer stored under idempotency key {shown} cannot be "
                                f"replayed ({e}); it was not sent", key)
        if omitted:
            extra.append(("Idempotent-Body-Omitted", "true"))
        return self._send(start_response, status, headers, rbody, extra)

    def _proceed(self, environ, inner, start_response, outputs, events, key):
        """A generator: runs the app, holds its answer up to body_limit, streams past it."""
        state = {"status": 500, "headers": [], "streaming": False}
        held, held_n = [], 0
        delivered = False

        def app_start_response(status, headers, exc_info=None):
            state["status_line"] = str(status)
            state["status"] = int(str(status).split(" ", 1)[0])
            state["headers"] = list(headers)
            return held.append  # the legacy write(): held like yielded data

        def deliver(out):
            nonlocal delivered
            if not delivered:
                delivered = True
                outputs.put(out)

        def outcome(status):
            return "retryable" if status >= 500 else "failed" if status >= 400 else "succeeded"

        try:
            try:
                it = self.app(inner, app_start_response)
                try:
                    for chunk in it:
                        if not chunk:
                            continue
                        if state["streaming"]:
                            yield chunk
                            continue
                        held.append(chunk)
                        held_n += len(chunk)
                        if held_n > self.body_limit:
                            state["streaming"] = True
                            start_response(state["status_line"], state["headers"])
                            first, held[:] = b"".join(held), []
                            yield first
                finally:
                    if hasattr(it, "close"):
                        it.close()
            except Exception:
                # the key is released (retryable); raised again once the step helper finished
                deliver(Output("retryable", 500, b""))
                events.get()
                raise
            status = state["status"]
            body = None if state["streaming"] else b"".join(held)
            deliver(Output(outcome(status), status,
                           encode_response(status, state["headers"], body, self.keep,
                                           self.body_limit, self.client.max_body)))
            _, rep, err = events.get()
            if err is not None and not isinstance(err, IdemError):
                LOG.warning("idempotency key %s: the step helper failed after the app ran: %s",
                            json.dumps(key), err)
            if not state["streaming"]:
                headers = [(n, v) for n, v in state["headers"] if n.lower() != "content-length"]
                headers.append(("Content-Length", str(len(body))))
                start_response(state["status_line"], headers)
                yield body
        finally:
            # the client went away mid-stream (GeneratorExit): what the app answered stands,
            # stored without its body
            if not delivered:
                st = state["status"]
                deliver(Output(outcome(st), st,
                               encode_response(st, state["headers"], None, self.keep,
                                               self.body_limit, self.client.max_body)))
