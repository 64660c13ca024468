"""wsgi.py — IdempotencyMiddleware: the HTTP Idempotency-Key middleware for WSGI apps
(draft-ietf-httpapi-idempotency-key-header; docs/api.md §19 amended, docs/http-middleware.md,
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
import threading
import uuid
from http import HTTPStatus
from urllib.parse import quote

from . import idempotency_key as ik
from . import trace as _trace
from . import validate
from .errors import IdemError
from .types import Output, StepKey

LOG = logging.getLogger("idem_client.wsgi")

# type word → (status, title, retryable), as client-lib/conformance/http-middleware.json says
PROBLEMS = {
    "key-missing": (400, "Idempotency-Key missing", False),
    "key-malformed": (400, "Idempotency-Key malformed", False),
    "body-incomplete": (400, "Request body incomplete", False),
    "in-progress": (409, "Request in progress", True),
    "body-too-large": (413, "Request body too large", False),
    "fingerprint-mismatch": (422, "Idempotency-Key reused", False),
    "compensated": (422, "Request compensated", False),
    "coordinator-refused": (500, "Idempotency coordinator refused the middleware", False),
    "middleware-error": (500, "Idempotency middleware error", False),
    "coordinator-unavailable": (503, "Idempotency coordinator unavailable", True),
}
REFUSALS = ("UNAUTHENTICATED", "PERMISSION_DENIED", "INVALID_ARGUMENT")
_READ = 64 * 1024


class _BodyError(Exception):
    def __init__(self, word, detail):
        super().__init__(detail)
        self.word = word


def _default_match(environ):
    return environ.get("REQUEST_METHOD", "GET").upper() in ("POST", "PATCH")


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
    """(status, headers, body, omitted) from the stored form; ValueError when it is not one."""
    doc = json.loads(data.decode())
    status = int(doc["status"])
    headers = [(str(n), str(v)) for n, v in doc.get("headers", [])]
    body = base64.b64decode(doc.get("body_b64", ""), validate=True)
    return status, headers, body, bool(doc.get("body_omitted"))


def read_body(environ, limit):
    """The request body, read in full; _BodyError("body-too-large" | "body-incomplete")."""
    raw_len = environ.get("CONTENT_LENGTH") or ""
    try:
        length = int(raw_len) if raw_len.strip() else None
    except ValueError:
        raise _BodyError("body-incomplete", f"the Content-Length {raw_len!r} is not a number")
    if length is not None and length > limit:
        raise _BodyError("body-too-large", f"the request body of {length} bytes is longer than "
                                           f"the {limit}-byte limit")
    chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
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
    match         environ -> bool: which requests are wrapped (default POST and PATCH)
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

    def __init__(self, app, client, service="http", *, match=None, operation=None, scope=None,
                 keep_headers=("Content-Type",), body_limit=64 * 1024,
                 problem_base="docs/http-middleware.md", wait=False, timeout=5.0,
                 max_request_body=1024 * 1024, logger=None):
        validate.name(service, "service")
        self.app = app
        self.client = client
        self.service = service
        self.match = match or _default_match
        self.operation = operation
        self.scope = scope or ik.authorization_scope
        self.keep = {h.lower() for h in keep_headers}
        self.body_limit = int(body_limit)
        self.problem_base = problem_base
        self.wait = bool(wait)
        self.timeout = float(timeout)
        self.max_request_body = int(max_request_body)
        self.log = logger or LOG

    # --- answers ------------------------------------------------------------------------------

    def problem(self, environ, start_response, word, detail, key=None, retry_after_ms=0):
        status, title, retryable = PROBLEMS[word]
        doc = {"type": f"{self.problem_base}#{word}", "title": title, "status": status,
               "detail": detail, "instance": f"urn:uuid:{uuid.uuid4()}", "retryable": retryable}
        if key is not None:
            doc["idempotency_key"] = key
        self.log.warning("%s %s: %d %s instance=%s%s: %s", environ.get("REQUEST_METHOD"),
                         environ.get("PATH_INFO", ""), status, word, doc["instance"],
                         f" key={json.dumps(key)}" if key is not None else "", detail)
        body = json.dumps(doc).encode()
        headers = [("Content-Type", "application/problem+json"),
                   ("Content-Length", str(len(body)))]
        if retryable:
            headers.append(("Retry-After", str(retry_after_s(retry_after_ms))))
        start_response(_status_line(status), headers)
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
        method = environ.get("REQUEST_METHOD", "GET").upper()
        path = quote((environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""))
                     .encode("latin-1"), safe="/:@!$&'()*+,;=-._~%")
        qs = environ.get("QUERY_STRING", "")
        target = path + ("?" + qs if qs else "")
        try:
            op = self.operation(environ) if self.operation else ik.operation(method, path)
            step = StepKey(ik.global_id(key, str(self.scope(environ))), self.service, op)
        except Exception as e:  # noqa: BLE001 (the application's callbacks)
            return self.problem(environ, start_response, "middleware-error",
                                f"the operation or scope of idempotency key {shown} could not "
                                f"be named: {e}", key)
        inner = dict(environ)
        inner["wsgi.input"] = io.BytesIO(body)
        inner["CONTENT_LENGTH"] = str(len(body))
        inner.pop("HTTP_TRANSFER_ENCODING", None)
        return self._run(environ, inner, start_response, step, ik.fingerprint(method, target, body),
                         key)

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
                return self.problem(environ, start_response, "middleware-error",
                                    f"the middleware could not run the request with idempotency "
                                    f"key {shown}: {err}", key)
            e = err
            if e.code == "ABORTED":
                return self.problem(environ, start_response, "in-progress",
                                    f"a request with idempotency key {shown} is still being "
                                    "processed", key, e.retry_after_ms)
            if e.code == "FAILED_PRECONDITION" and e.reason in ("fingerprint-mismatch", ""):
                return self.problem(environ, start_response, "fingerprint-mismatch",
                                    f"idempotency key {shown} was used for another request "
                                    "(method, target or body)", key)
            if e.code in REFUSALS:
                return self.problem(environ, start_response, "coordinator-refused",
                                    f"the idem coordinator refused the middleware ({e.code}"
                                    f"{' ' + e.reason if e.reason else ''}): a misconfiguration "
                                    f"a retry does not fix; the app did not run: {e}", key)
            return self.problem(environ, start_response, "coordinator-unavailable",
                                f"no idem coordinator could decide on idempotency key {shown} "
                                f"({e.code}{' ' + e.reason if e.reason else ''}) and the "
                                "operation fails closed", key, e.retry_after_ms)
        if rep.decision != "REPLAY":  # a SKIP: the key names a compensated step
            return self.problem(environ, start_response, "compensated",
                                f"the request with idempotency key {shown} was compensated "
                                "and does not run again", key)
        res = rep.result
        extra = [("Idempotent-Replayed", "true")]
        try:
            status, headers, rbody, omitted = decode_response(res.body)
        except (ValueError, KeyError, TypeError):
            # past the policy's retention_s (outcome and code only), or not a stored answer
            status, headers, rbody, omitted = res.code or 500, [], b"", True
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
