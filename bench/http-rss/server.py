#!/usr/bin/python3
"""server.py — bench/http-rss's Python server: a WSGI app behind IdempotencyMiddleware on
wsgiref (a thread per request); POST answers Response-Bytes bytes of 'x' in 64 KiB pieces.
IDEM_ADDRESS, IDEM_TENANT, PORT."""
import os
import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client-lib" / "python"))
import idem_client  # noqa: E402
from idem_client.wsgi import IdempotencyMiddleware  # noqa: E402

PIECE = b"x" * (64 * 1024)


def app(environ, start_response):
    n = int(environ.get("HTTP_RESPONSE_BYTES") or 0)
    start_response("200 OK", [("Content-Type", "application/octet-stream")])

    def body(n=n):
        while n > 0:
            k = min(n, len(PIECE))
            n -= k
            yield PIECE[:k]
    return body()


class Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


client = idem_client.connect(os.environ["IDEM_ADDRESS"], tenant=os.environ.get("IDEM_TENANT"))
srv = Server(("127.0.0.1", int(os.environ["PORT"])), Quiet)
srv.set_app(IdempotencyMiddleware(app, client, "http-rss"))
srv.serve_forever()
