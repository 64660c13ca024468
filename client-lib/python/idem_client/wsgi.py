"""wsgi.py — IdempotencyMiddleware: the HTTP Idempotency-Key middleware for WSGI apps
(draft-ietf-httpapi-idempotency-key-header; docs/api.md §19, docs/http-middleware.md).

    app = IdempotencyMiddleware(app, idem_client.connect(...), service="payments-api")

For each wrapped request (default: POST and PATCH) the Idempotency-Key names one step
(global id from the key, service, operation = the route's name); the first request runs the
app and its answer is stored; a repeat gets the stored answer with `Idempotent-Replayed: true`.
400 / 409 / 422 / 503 are RFC 9457 problem documents (`application/problem+json`).

The stored answer is the step result's body, UTF-8 JSON (docs/sdk-python.md, "Stored response"):
    {"status": 201, "headers": [["Content-Type", "application/json"]], "body_b64": "..."}
plus "body_omitted": true when the app's body was larger than body_limit (stored without it).
The step's code is the status; 2xx/3xx complete as succeeded, 4xx as failed, 5xx as retryable
(the key is released: the next retry runs the app again).
"""
import base64
import io
import json
import math
from http import HTTPStatus
from urllib.parse import quote

from . import idempotency_key as ik
from . import validate
from .errors import IdemError
from .types import Output, StepKey

TITLES = {
    "key-missing": "Idempotency-Key missing",
    "key-malformed": "Idempotency-Key malformed",
    "fingerprint-mismatch": "Idempotency-Key reused",
    "in-progress": "Request in progress",
    "coordinator-unavailable": "Idempotency coordinator unavailable",
    "compensated": "Request compensated",
}
STATUS = {"key-missing": 400, "key-malformed": 400, "fingerprint-mismatch": 422,
          "in-progress": 409, "coordinator-unavailable": 503, "compensated": 422}


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


def encode_response(status, headers, body, keep, body_limit):
    """The stored form of an answer (kept headers in order); body_omitted past body_limit."""
    kept = [[n, v] for n, v in headers if n.lower() in keep]
    doc = {"status": status, "headers": kept, "body_b64": ""}
    if len(body) > body_limit:
        doc["body_omitted"] = True
    else:
        doc["body_b64"] = base64.b64encode(body).decode()
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_response(data):
    """(status, headers, body, omitted) from the stored form; ValueError when it is not one."""
    doc = json.loads(data.decode())
    status = int(doc["status"])
    headers = [(str(n), str(v)) for n, v in doc.get("headers", [])]
    body = base64.b64decode(doc.get("body_b64", ""), validate=True)
    return status, headers, body, bool(doc.get("body_omitted"))


class _Captured:
    status = 500
    headers = ()
    body = b""
    exc = None


def _capture(app, environ):
    """Runs the app to completion and keeps its answer."""
    cap = _Captured()
    chunks = []

    def start_response(status, headers, exc_info=None):
        cap.status = int(str(status).split(" ", 1)[0])
        cap.headers = list(headers)
        return chunks.append

    it = app(environ, start_response)
    try:
        for c in it:
            chunks.append(c)
    finally:
        if hasattr(it, "close"):
            it.close()
    cap.body = b"".join(chunks)
    return cap


class IdempotencyMiddleware:
    """Options:
    client        an idem_client.Client (with journal_path for fail-open operations)
    service       the step's service name (1-64 of [a-z0-9._-])
    match         environ -> bool: which requests are wrapped (default POST and PATCH)
    operation     environ -> str: the route's operation name (default method and path,
                  lower-cased, other characters as "-", at most 64)
    keep_headers  the app's headers stored and replayed (default Content-Type)
    body_limit    a larger answer is stored without its body (replayed with
                  Idempotent-Body-Omitted: true); default 48 KiB (base64 must fit 64 KiB)
    problem_base  the base of problem documents' type (default "docs/http-middleware.md")
    wait          a request meeting its key in progress waits for the first (up to timeout)
                  and replays it, instead of answering 409 at once
    timeout       seconds for the coordinator's part of one request (default 10)
    max_request_body  a larger request body is refused with 413 (default 10 MiB)
    """

    def __init__(self, app, client, service="http", *, match=None, operation=None,
                 keep_headers=("Content-Type",), body_limit=48 * 1024,
                 problem_base="docs/http-middleware.md", wait=False, timeout=10.0,
                 max_request_body=10 * 1024 * 1024):
        validate.name(service, "service")
        self.app = app
        self.client = client
        self.service = service
        self.match = match or _default_match
        self.operation = operation
        self.keep = {h.lower() for h in keep_headers}
        self.body_limit = min(int(body_limit), client.max_body * 3 // 4 - 4096)
        self.problem_base = problem_base
        self.wait = bool(wait)
        self.timeout = float(timeout)
        self.max_request_body = int(max_request_body)

    # --- answers ------------------------------------------------------------------------------

    def problem(self, start_response, anchor, detail, retry_after_ms=0):
        status = STATUS[anchor]
        retryable = status in (409, 503)
        doc = {"type": f"{self.problem_base}#{anchor}", "title": TITLES[anchor], "status": status,
               "detail": detail, "retryable": retryable}
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
                return self.problem(start_response, "key-missing",
                                    'rule "missing": the Idempotency-Key header is missing')
            return self.problem(start_response, "key-malformed",
                                f'rule "{e.word}": {e}; header value {json.dumps(raw)}')
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > self.max_request_body:
            start_response("413 Content Too Large", [("Content-Type", "text/plain")])
            return [b"request body too large\n"]
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        method = environ.get("REQUEST_METHOD", "GET").upper()
        path = quote((environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""))
                     .encode("latin-1"), safe="/:@!$&'()*+,;=-._~%")
        qs = environ.get("QUERY_STRING", "")
        target = path + ("?" + qs if qs else "")
        op = self.operation(environ) if self.operation else ik.operation(method, path)
        step = StepKey(ik.global_id(key), self.service, op)
        fp = ik.fingerprint(method, target, body)
        shown = json.dumps(key)

        inner = dict(environ)
        inner["wsgi.input"] = io.BytesIO(body)
        inner["CONTENT_LENGTH"] = str(len(body))
        cap = None

        def action(ctx):
            nonlocal cap
            try:
                cap = _capture(self.app, inner)
            except Exception as exc:  # noqa: BLE001 (raised again once the key is released)
                cap = _Captured()
                cap.exc = exc
                return Output("retryable", 500, b"")
            outcome = "retryable" if cap.status >= 500 else "failed" if cap.status >= 400 \
                else "succeeded"
            return Output(outcome, cap.status,
                          encode_response(cap.status, cap.headers, cap.body, self.keep,
                                          self.body_limit))

        try:
            rep = self.client.run_step(step, action, fp, timeout=self.timeout,
                                       no_wait=not self.wait, retry_in_progress=self.wait)
        except IdemError as e:
            if cap is not None:  # the app ran here (5xx released, lease lost, complete failed)
                if cap.exc is not None:
                    raise cap.exc
                return self._send(start_response, cap.status, cap.headers, cap.body)
            if e.code == "ABORTED":
                return self.problem(start_response, "in-progress",
                                    f"a request with idempotency key {shown} is still being "
                                    "processed", e.retry_after_ms)
            if e.code == "FAILED_PRECONDITION":
                return self.problem(start_response, "fingerprint-mismatch",
                                    f"idempotency key {shown} was used for another request "
                                    "(method, target or body)")
            return self.problem(start_response, "coordinator-unavailable",
                                f"no idem coordinator could decide on idempotency key {shown} "
                                f"({e.code}{' ' + e.reason if e.reason else ''}) and the "
                                "operation fails closed", e.retry_after_ms)
        if rep.ran:
            return self._send(start_response, cap.status, cap.headers, cap.body)
        if rep.decision != "REPLAY":  # a SKIP: the key names a compensated step
            return self.problem(start_response, "compensated",
                                f"the request with idempotency key {shown} was compensated "
                                "and does not run again")
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
