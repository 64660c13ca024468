#!/usr/bin/python3
"""examples/http.py — a payments API behind the WSGI Idempotency-Key middleware (docs/api.md §19).

    IDEM_ADDRESS=127.0.0.1:50051 IDEM_TENANT=shop PORT=8083 /usr/bin/python3 examples/http.py
    curl -si -X POST -H 'Idempotency-Key: "order-42"' -d '{"amount":100}' 127.0.0.1:8083/payments

POST /payments (and POST /refunds) are wrapped: 201 with a JSON body naming the execution
number; the same key again gets the stored answer with Idempotent-Replayed: true. A body with
"fail": true makes the handler answer 500 (stored as retryable: the next retry runs again);
"delay_ms": N makes it take N ms. GET /stats → {"executions": N}, the handler's count.

Environment: IDEM_ADDRESS (default 127.0.0.1:50051), IDEM_TENANT (default shop), IDEM_TOKEN, PORT
(default 8083), IDEM_SERVICE (default http-python), IDEM_JOURNAL (the fail-open journal; default
idem-http-journal.log in the temporary folder), IDEM_HTTP_TIMEOUT_S (default 10), IDEM_HTTP_WAIT=1
(wait for a request in progress instead of 409). Served by wsgiref on a thread per request. The
defaults differ from the Go (8081, http-go) and Node (8082, http-node) examples' and from
quickstart's console (8080), so that all of them run side by side. A port already taken is
refused before anything else: the port is named, "listening" is printed only once the port is
bound, and the exit status is 1.
"""
import os
import sys
from pathlib import Path

# this file is named http.py (docs/api.md §19): keep its folder off sys.path, or it would shadow
# the standard library's http package that wsgiref imports
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import errno  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from socketserver import ThreadingMixIn  # noqa: E402
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server  # noqa: E402
try:
    import idem_client  # noqa: E402
except ImportError:  # run from the source tree: generate the messages first
    import gen_proto  # noqa: E402
    gen_proto.generate()
    import idem_client  # noqa: E402
from idem_client.wsgi import IdempotencyMiddleware  # noqa: E402


class Payments:
    """The application: counts its executions."""

    def __init__(self):
        self.mu = threading.Lock()
        self.executions = 0

    def __call__(self, environ, start_response):
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if method == "GET" and path == "/stats":
            with self.mu:
                return self.json(start_response, 200, {"executions": self.executions})
        if method == "POST" and path in ("/payments", "/refunds"):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            raw = environ["wsgi.input"].read(length) if length else b""
            try:
                req = json.loads(raw or b"{}")
            except ValueError:
                req = {}
            req = req if isinstance(req, dict) else {}
            with self.mu:
                self.executions += 1
                n = self.executions
            if req.get("delay_ms"):
                time.sleep(min(float(req["delay_ms"]), 10000) / 1000.0)
            if req.get("fail"):
                return self.json(start_response, 500, {"error": "payment gateway failed",
                                                       "execution": n})
            kind = path.strip("/")[:-1]
            return self.json(start_response, 201, {kind: f"{kind}-{n}", "execution": n,
                                                    "amount": req.get("amount")})
        return self.json(start_response, 404, {"error": "not found"})

    @staticmethod
    def json(start_response, status, doc):
        body = json.dumps(doc).encode()
        start_response(f"{status} {'OK' if status < 300 else 'Error'}",
                       [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 512


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        if os.environ.get("IDEM_HTTP_LOG"):
            super().log_message(*args)


def main():
    port = int(os.environ.get("PORT") or 8083)
    tenant = os.environ.get("IDEM_TENANT") or "shop"
    service = os.environ.get("IDEM_SERVICE") or "http-python"
    app = Payments()
    try:  # the port first: a taken one is named before anything else starts
        srv = make_server("127.0.0.1", port, app, server_class=ThreadingServer,
                          handler_class=QuietHandler)
    except OSError as e:
        print(f"examples/http.py: cannot listen on 127.0.0.1:{port}: {e.strerror or e}",
              file=sys.stderr)
        if e.errno == errno.EADDRINUSE:
            print(f"examples/http.py: port {port} is taken (quickstart's console holds 8080): "
                  "choose another with PORT=, e.g. PORT=8093", file=sys.stderr)
        return 1
    client = idem_client.connect(
        os.environ.get("IDEM_ADDRESS") or "127.0.0.1:50051",
        tenant=tenant, token=os.environ.get("IDEM_TOKEN") or None,
        journal_path=os.environ.get("IDEM_JOURNAL") or
        os.path.join(tempfile.gettempdir(), "idem-http-journal.log"))
    srv.set_app(IdempotencyMiddleware(app, client, service,
                                      wait=os.environ.get("IDEM_HTTP_WAIT") == "1",
                                      timeout=float(os.environ.get("IDEM_HTTP_TIMEOUT_S") or 10)))
    with srv:
        print(f"examples/http.py: listening on http://127.0.0.1:{port} (coordinator "
              f"{os.environ.get('IDEM_ADDRESS') or '127.0.0.1:50051'}, tenant {tenant}, "
              f"service {service})", flush=True)
        try:
            srv.serve_forever()
        except KeyboardInterrupt:
            pass
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
