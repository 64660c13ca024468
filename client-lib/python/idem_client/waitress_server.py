"""waitress_server.py — a WSGI app behind the Idempotency-Key middleware on waitress, Debian's
python3-waitress (docs/http-middleware.md, "Python"): HTTP/1.1, chunked request bodies read in
full (waitress buffers them before the app runs and sets wsgi.input_terminated), and every answer
the server makes itself a problem document of http-middleware.json's table, with no server
version (no Server header) and no traceback.

    server = waitress_server(app, "127.0.0.1", 8083)   # app: the middleware (or what wraps it)
    server.run()

What waitress refuses itself, before the app runs, and the problem it answers:
  - a request framed twice (Content-Length with Transfer-Encoding; Transfer-Encoding on HTTP/1.0;
    a Content-Length that is not one run of digits: negative, signed, two lengths) or with a
    transfer coding other than chunked: 400 body-malformed
  - a broken chunked framing: 400 body-incomplete
  - a body past max_request_body (+ the chunked framing's slack): 413 body-too-large
  - a request head past 16 KiB (http-middleware.json's head_limit_setting): 431
    header-too-large; a folded field line, a method with a lower-case letter and any other
    malformed request (a bad request line, a bare CR, a control character or no colon in a
    field): 400 request-malformed
  - the app raised (the middleware answers its own failures; this is the app's): 500
    middleware-error, with the traceback only in the log (http-middleware.json has no word of
    its own for a handler's exception)
"""
import logging

import waitress
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError
from waitress.task import ErrorTask
from waitress.utilities import (BadRequest, InternalServerError, RequestEntityTooLarge,
                                RequestHeaderFieldsTooLarge, ServerNotImplemented)

from . import idempotency_key as ik
from .wsgi import PROBLEMS, problem_document

LOG = logging.getLogger("idem_client.waitress")

# waitress's own messages (its parser and chunked reader) whose problem is the body's framing
_FRAMING = ("framing: ", "Content-Length is invalid")
_CHUNKS = ("Chunk not properly terminated", "Invalid chunk extension", "Invalid chunk size")


class _Parser(HTTPRequestParser):
    """waitress's parser, refusing first what http-middleware.json's rules refuse and waitress
    would let through: a folded field line (waitress unfolds it), Content-Length beside
    Transfer-Encoding (waitress takes chunked), Content-Length twice (waitress joins equal ones),
    a Transfer-Encoding other than one chunked (waitress takes "chunked, chunked"), and
    Transfer-Encoding on HTTP/1.0 (waitress ignores it). RFC 9112 5.2, 6.1, 6.3."""

    def parse_header(self, header_plus):
        te, cl = [], []
        for line in header_plus.split(b"\r\n")[1:]:
            if line[:1] in (b" ", b"\t"):
                raise ParsingError("a folded field line (obs-fold)")
            name, _, value = line.partition(b":")
            name = name.lower()
            if name == b"transfer-encoding":
                te.append(value.strip(b" \t"))
            elif name == b"content-length":
                cl.append(value.strip(b" \t"))
        if te and cl:
            raise ParsingError("framing: both Content-Length and Transfer-Encoding")
        if len(cl) > 1:
            raise ParsingError(f"framing: Content-Length comes {len(cl)} times")
        if cl and not cl[0].isdigit():
            raise ParsingError(f"framing: the Content-Length {cl[0].decode('latin-1')!r} is not "
                               "one run of digits")
        if te and (len(te) > 1 or te[0].lower() != b"chunked"):
            raise ParsingError("framing: the Transfer-Encoding is not one chunked")
        super().parse_header(header_plus)
        if self.version != "1.1" and "TRANSFER_ENCODING" in self.headers:
            raise ParsingError(f"framing: Transfer-Encoding on an HTTP/{self.version} request")


def problem_of(error):
    """The (type word, detail) of one of waitress's errors."""
    text = str(getattr(error, "body", "") or "")
    if isinstance(error, RequestEntityTooLarge):
        return "body-too-large", "the request body is longer than the server's limit"
    if isinstance(error, RequestHeaderFieldsTooLarge):
        return "header-too-large", "the request's header section is longer than the server's limit"
    if isinstance(error, ServerNotImplemented):
        return "body-malformed", "the Transfer-Encoding is not chunked"
    if isinstance(error, InternalServerError):
        return "middleware-error", "the application failed; the server's log has the details"
    if isinstance(error, BadRequest) and text.startswith(_CHUNKS):
        return "body-incomplete", f"the chunked request body is broken ({text})"
    if isinstance(error, BadRequest) and text.startswith(_FRAMING):
        return "body-malformed", f"the request body's framing is ambiguous ({text})"
    return "request-malformed", f"the request is not valid HTTP/1.1 ({text or 'malformed'})"


class _ProblemErrorTask(ErrorTask):
    """waitress's error answer as a problem document (and one log line with its instance)."""

    problem_base = "docs/http-middleware.md"

    def execute(self):
        word, detail = problem_of(self.request.error)
        key = None
        if word in PROBLEMS:  # the middleware's own words carry the key, the server's never
            try:
                key = ik.parse(self.request.headers.get("IDEMPOTENCY_KEY"))
            except ik.KeyError_:
                pass
        status, headers, body, instance = problem_document(word, detail, key, self.problem_base)
        LOG.warning("%s %s: %s %s instance=%s: %s", getattr(self.request, "command", "-"),
                    getattr(self.request, "path", "-"), status.split(" ", 1)[0], word, instance,
                    detail)
        self.status = status
        self.version = "1.1"  # the server's version, whatever the request line said
        self.response_headers.extend(h for h in headers if h[0] != "Content-Length")
        self.response_headers.append(("Connection", "close"))
        self.close_on_finish = True
        self.content_length = len(body)
        self.write(body)


class _Channel(HTTPChannel):
    parser_class = _Parser
    error_task_class = _ProblemErrorTask


def waitress_server(app, host, port, *, threads=16, max_request_body=1024 * 1024,
                    problem_base="docs/http-middleware.md", **adjustments):
    """A waitress server bound to host:port (OSError when it cannot bind), not yet running:
    call .run(), and .close() to stop. max_request_body: waitress refuses a body past it plus
    the chunked framing's slack (64 KiB) before buffering more; the middleware's own limit
    (the same by default) answers the rest. adjustments: waitress's (channel_timeout, ...)."""
    task = type("ProblemErrorTask", (_ProblemErrorTask,), {"problem_base": problem_base})
    channel = type("ProblemChannel", (_Channel,), {"error_task_class": task})
    kw = dict(host=host, port=port, threads=threads, ident="", expose_tracebacks=False,
              max_request_header_size=16 * 1024,
              max_request_body_size=max_request_body + 64 * 1024, connection_limit=1000,
              clear_untrusted_proxy_headers=True)
    kw.update(adjustments)
    server = waitress.create_server(app, **kw)
    server.channel_class = channel
    return server
