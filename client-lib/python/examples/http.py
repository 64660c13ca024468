#!/usr/bin/python3
"""examples/http.py — a payments API behind the WSGI Idempotency-Key middleware (docs/api.md §19).

    IDEM_ADDRESS=127.0.0.1:50051 IDEM_TENANT=shop PORT=8083 /usr/bin/python3 examples/http.py
    curl -si -X POST -H 'Idempotency-Key: "order-42"' -d '{"amount":100}' 127.0.0.1:8083/payments

POST /payments (and POST /refunds) are wrapped: 201 with a JSON body naming the execution
number; the same key again gets the stored answer with Idempotent-Replayed: true. A body with
"fail": true makes the handler answer 500 (stored as retryable: the next retry runs again);
"delay_ms": N makes it take N ms; "big": N answers 201 text/plain with N bytes of x. GET /stats
→ {"executions": N}, the handler's count. Another path is 404, another method 405 (problem
documents; client-lib/conformance/http-middleware.json's example_server).

Environment: IDEM_ADDRESS (default 127.0.0.1:50051), IDEM_TENANT (default shop), IDEM_TOKEN, PORT
(default 8083), IDEM_SERVICE (default http-python), IDEM_JOURNAL (the fail-open journal; default
idem-http-journal.log in the temporary folder), IDEM_HTTP_TIMEOUT_S (default 10), IDEM_HTTP_WAIT=1
(wait for a request in progress instead of 409), IDEM_HTTP_THREADS (default 16). Served by waitress
(Debian's python3-waitress: HTTP/1.1, chunked request bodies read in full, its own errors as
problem documents: idem_client/waitress_server.py). The defaults differ from the Go (8081,
http-go), Node (8082, http-node) and Java (8084, http-java) examples' and from quickstart's
console (8080), so that all of them run side by side. A port already taken is
refused before anything else: the port is named, "listening" is printed only once the port is
bound, and the exit status is 1.
"""
import os
import sys
from pathlib import Path

# this file is named http.py (docs/api.md §19): keep its folder off sys.path, or it would shadow
# the standard library's http package that waitress imports
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import errno  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
try:
    import idem_client  # noqa: E402
except ImportError:  # run from the source tree: generate the messages first
    import gen_proto  # noqa: E402
    gen_proto.generate()
    import idem_client  # noqa: E402
from idem_client.idempotency_key import TargetMalformed  # noqa: E402
from idem_client.wsgi import IdempotencyMiddleware, problem_document, request_target  # noqa: E402
try:
    from idem_client.waitress_server import waitress_server  # noqa: E402
except ImportError:
    sys.exit("examples/http.py: waitress is missing: install Debian's python3-waitress "
             "(client-lib/python/deps.sh installs it)")


class Payments:
    """The application: counts its executions. Routes on the request's one spelling (docs/api.md
    §19 rule 5: /p%61yments, /payments/ and /x/../payments are /payments); another
    path is 404 not-found, a route's path with another method 405 method-not-allowed with Allow,
    both problem documents (http-middleware.json's example_server)."""

    ROUTES = {"/payments": ("POST",), "/refunds": ("POST",), "/stats": ("GET",)}

    def __init__(self):
        self.mu = threading.Lock()
        self.executions = 0

    def route(self, environ, start_response, wrapped):
        """Routing comes first (http-middleware.json's example_server.routing): a target with no
        one spelling is 400, another path 404, another method 405, all before the middleware,
        which wraps only the two POST routes (`wrapped`: the middleware around this app)."""
        method = environ["REQUEST_METHOD"]  # a lower-case letter: waitress answers 400 itself
        try:
            path, _ = request_target(environ)
        except TargetMalformed as e:
            return self.problem(start_response, "target-malformed", f"{e}; nothing ran")
        allowed = self.ROUTES.get(path)
        if allowed is None:
            return self.problem(start_response, "not-found", f"no route has the path {path!r}")
        if method not in allowed:
            return self.problem(start_response, "method-not-allowed",
                                f"{path} answers {', '.join(allowed)}, not {method}",
                                [("Allow", ", ".join(allowed))])
        if path == "/stats":
            return self(environ, start_response)
        return wrapped(environ, start_response)

    def __call__(self, environ, start_response):
        path, _ = request_target(environ)
        if path == "/stats":
            with self.mu:
                return self.json(start_response, 200, {"executions": self.executions})
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
        if isinstance(req.get("delay_ms"), (int, float)) and req["delay_ms"] > 0:
            time.sleep(min(float(req["delay_ms"]), 10000) / 1000.0)
        if req.get("fail") is True:
            return self.json(start_response, 500, {"error": "payment gateway failed",
                                                   "execution": n})
        if isinstance(req.get("big"), int) and req["big"] >= 0:
            body = b"x" * req["big"]
            start_response("201 Created", [("Content-Type", "text/plain"),
                                           ("Content-Length", str(len(body)))])
            return [body]
        kind = path.strip("/")[:-1]
        return self.json(start_response, 201, {kind: f"{kind}-{n}", "execution": n,
                                                "amount": req.get("amount")})

    @staticmethod
    def json(start_response, status, doc):
        body = json.dumps(doc).encode()
        start_response(f"{status} {'OK' if status < 300 else 'Error'}",
                       [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    @staticmethod
    def problem(start_response, word, detail, extra=()):
        status, headers, body, _ = problem_document(word, detail, extra_headers=extra)
        start_response(status, headers)
        return [body]


def main():
    port = int(os.environ.get("PORT") or 8083)
    tenant = os.environ.get("IDEM_TENANT") or "shop"
    service = os.environ.get("IDEM_SERVICE") or "http-python"
    app = Payments()
    routes = {}  # the middleware, once the coordinator's client exists

    def root(environ, start_response):
        return app.route(environ, start_response, routes["app"])

    try:  # the port first: a taken one is named before anything else starts
        srv = waitress_server(root, "127.0.0.1", port,
                              threads=int(os.environ.get("IDEM_HTTP_THREADS") or 16))
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
    routes["app"] = IdempotencyMiddleware(app, client, service,
                                          wait=os.environ.get("IDEM_HTTP_WAIT") == "1",
                                          timeout=float(os.environ.get("IDEM_HTTP_TIMEOUT_S") or 10))
    print(f"examples/http.py: listening on http://127.0.0.1:{port} (coordinator "
          f"{os.environ.get('IDEM_ADDRESS') or '127.0.0.1:50051'}, tenant {tenant}, "
          f"service {service})", flush=True)
    try:
        srv.run()
    except KeyboardInterrupt:
        pass
    finally:
        srv.close()
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
