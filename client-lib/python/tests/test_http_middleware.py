"""test_http_middleware.py — the WSGI middleware over real HTTP on loopback against a real
coordinator, driven by client-lib/conformance/http-middleware.json: its problem tables,
defaults, coordinator error table (every code with every reason word), operation, header,
method, trace and stored-answer vectors, its request cases (chunked bodies, truncated and aborted uploads, limits, scope, a key
vs its hashed text, methods, large answers) behind a server that decodes chunked bodies and sets
wsgi.input_terminated as gunicorn does; a truncated upload behind plain wsgiref (no
input_terminated); 409, 500 coordinator-refused and 503 as problem documents; and a 200 MB answer
that keeps this process's RSS under the file's bound over its baseline."""
import base64
import hashlib
import http.client
import io
import json
import logging
import re
import socket
import threading
import unittest
from socketserver import ThreadingMixIn
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

import support

import idem_client
from idem_client import idempotency_key as ik
from idem_client import trace as _trace
from idem_client.waitress_server import waitress_server
from idem_client.wsgi import (PROBLEMS, SERVER_PROBLEMS, IdempotencyMiddleware, coordinator_problem,
                              request_target, stored_answer)

SPEC = json.loads((support.PY_DIR.parents[0] / "conformance" / "http-middleware.json").read_text())
INSTANCE = re.compile(r"^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


class _Chunked:
    """A chunked request body, decoded; ValueError when the framing breaks or the connection
    ends inside it (as gunicorn's reader raises)."""

    def __init__(self, f):
        self.f, self.left, self.done = f, 0, False

    def read(self, n=-1):
        out = bytearray()
        while (n < 0 or len(out) < n) and not self.done:
            if self.left == 0:
                line = self.f.readline(1024)
                if not line.endswith(b"\n"):
                    raise ValueError("the connection closed inside the chunked framing")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:
                        t = self.f.readline(1024)
                        if not t:
                            raise ValueError("the connection closed inside the trailers")
                        if t in (b"\r\n", b"\n"):
                            break
                    self.done = True
                    break
                self.left = size
            k = self.left if n < 0 else min(self.left, n - len(out))
            c = self.f.read(k)
            if len(c) < k:
                raise ValueError("the connection closed inside a chunk")
            out += c
            self.left -= k
            if self.left == 0 and self.f.read(2) != b"\r\n":
                raise ValueError("a chunk without its CRLF")
        return bytes(out)


class _Length:
    """At most Content-Length bytes; b"" at the end or when the connection closed early."""

    def __init__(self, f, n):
        self.f, self.left = f, n

    def read(self, n=-1):
        n = self.left if n < 0 else min(n, self.left)
        c = self.f.read(n) if n > 0 else b""
        self.left -= len(c)
        return c


class _Handler(WSGIRequestHandler):
    terminated = True  # gunicorn-like; False = plain wsgiref

    def log_message(self, *args):
        pass

    def handle(self):
        self.raw_requestline = self.rfile.readline(65537)
        if not self.parse_request():
            return
        env = self.get_environ()
        inp = self.rfile
        if self.terminated:
            env["wsgi.input_terminated"] = True
            if "chunked" in self.headers.get("transfer-encoding", "").lower():
                inp = _Chunked(self.rfile)
            else:
                inp = _Length(self.rfile, int(self.headers.get("content-length") or 0))
        handler = ServerHandler(inp, self.wfile, self.get_stderr(), env, multithread=True)
        handler.request_handler = self
        handler.run(self.server.get_app())


class _PlainHandler(_Handler):
    terminated = False


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class App:
    """The file's app: counts executions; 201 JSON, or Response-Bytes of 'x' in 64 KiB pieces."""

    def __init__(self):
        self.mu = threading.Lock()
        self.executions = 0
        self.started = threading.Event()

    def __call__(self, environ, start_response):
        with self.mu:
            self.executions += 1
            n = self.executions
        self.started.set()
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        delay = environ.get("HTTP_DELAY_MS")
        if delay:
            threading.Event().wait(int(delay) / 1000.0)
        nb = environ.get("HTTP_RESPONSE_BYTES")
        if nb is not None:
            start_response("200 OK", [("Content-Type", "application/octet-stream")])
            return self._bytes(int(nb))
        out = json.dumps({"execution": n, "body_sha256": hashlib.sha256(body).hexdigest()}).encode()
        start_response("201 Created", [("Content-Type", "application/json"),
                                       ("Content-Length", str(len(out)))])
        return [out]

    @staticmethod
    def _bytes(n):
        piece = b"x" * (64 * 1024)
        while n > 0:
            k = min(n, len(piece))
            n -= k
            yield piece[:k]


class _Logs(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


class Rig:
    def __init__(self, test, coord, token=None, handler=_Handler):
        self.client = idem_client.connect(coord.address, tenant=support.unique("py-mw"), token=token,
                                          timeout=1.0)
        test.addCleanup(self.client.close)
        self.app = App()
        self.logs = _Logs()
        logger = logging.getLogger(support.unique("idem-test"))
        logger.propagate = False
        logger.addHandler(self.logs)
        mw = IdempotencyMiddleware(self.app, self.client, "py-mw", timeout=3.0, logger=logger)

        def root(environ, start_response):
            if environ["PATH_INFO"] == "/stats":
                b = json.dumps({"executions": self.app.executions}).encode()
                start_response("200 OK", [("Content-Type", "application/json")])
                return [b]
            return mw(environ, start_response)

        self.server = _Server(("127.0.0.1", 0), handler)
        self.server.set_app(root)
        self.port = self.server.server_address[1]
        t = threading.Thread(target=self.server.serve_forever, daemon=True)
        t.start()

        def stop():
            self.server.shutdown()
            self.server.server_close()
            t.join(10)
        test.addCleanup(stop)


def send(port, q):
    """The request byte for byte; (status, headers, first MiB of the body, body length) or None
    when the server closed without an answer."""
    method, path = q.get("method", "POST"), q.get("path", "/echo")
    if "body" in q:
        body = q["body"].encode()
    else:
        body = b"x" * q.get("body_bytes", 0)
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json",
            "Connection: close"]
    if "key" in q:
        head.append(f"Idempotency-Key: {q['key']}")
    if "authorization" in q:
        head.append(f"Authorization: {q['authorization']}")
    for k, v in q.get("headers", {}).items():
        head.append(f"{k}: {v}")
    chunks = [c.encode() for c in q["chunks"]] if "chunks" in q else None
    if chunks is None and q.get("chunked"):
        chunks = [body[i:i + 65536] for i in range(0, len(body), 65536)]
    if chunks is not None:
        head.append("Transfer-Encoding: chunked")
        payload = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
        if not q.get("abort"):
            payload += b"0\r\n\r\n"
    else:
        head.append(f"Content-Length: {q.get('content_length', len(body))}")
        payload = body
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        try:
            s.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
            if q.get("abort"):
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server answered (413) and closed before it read all
        r = http.client.HTTPResponse(s)
        try:
            r.begin()
        except (http.client.HTTPException, OSError):
            if q.get("abort"):
                return None
            raise
        kept, n = [], 0
        while True:
            c = r.read(65536)
            if not c:
                break
            if n < (1 << 20):
                kept.append(c)
            n += len(c)
        return r.status, {k.lower(): v for k, v in r.getheaders()}, b"".join(kept), n
    finally:
        s.close()


def check_problem(test, what, answer, word, key):
    status, headers, body, _ = answer
    want = next(p for p in SPEC["problems"] if p["type"] == word)
    test.assertEqual(headers.get("content-type"), "application/problem+json", f"{what}: {status} {body!r}")
    doc = json.loads(body)
    test.assertEqual(status, want["status"], what)
    test.assertEqual(doc["type"], f"{SPEC['defaults']['problem_base']}#{word}", what)
    test.assertEqual(doc["title"], want["title"], what)
    test.assertEqual(doc["status"], want["status"], what)
    test.assertIs(doc["retryable"], want["retryable"], what)
    test.assertTrue(doc["detail"], what)
    test.assertRegex(doc["instance"], INSTANCE, what)
    if key is None:
        test.assertNotIn("idempotency_key", doc, what)
    else:
        test.assertEqual(doc["idempotency_key"], key, what)
    if not want["retryable"]:  # Retry-After only on a retryable problem, with the coordinator's hint
        test.assertNotIn("retry-after", headers, what)
    elif "retry-after" in headers:
        test.assertGreaterEqual(int(headers["retry-after"]), 1, what)
    return doc


def key_of(q):
    if "key" not in q:
        return None
    try:
        return ik.parse(q["key"])
    except ik.KeyError_:
        return None


GRPC_CODES = ["OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
              "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
              "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
              "UNAUTHENTICATED"]


def table_problem(code, reason):
    """coordinator_errors_rule, read from the file: the first row whose code (and reason, when
    the row names one) matches."""
    for row in SPEC["coordinator_errors"]:
        if row["code"] not in (code, "*"):
            continue
        if "reason" in row and row["reason"] != reason:
            continue
        return row["problem"]
    raise AssertionError(f"no row of coordinator_errors for {code} {reason!r}")


class _Echo:
    """A WSGI app on waitress that reports what the middleware reads from the request's lines:
    the key (or its rule word), the default scope and the trace context it would send."""

    def __call__(self, environ, start_response):
        out = {}
        try:
            out["key"] = ik.parse(environ.get("HTTP_IDEMPOTENCY_KEY"))
        except ik.KeyError_ as e:
            out["key_error"] = e.word
        out["scope"] = ik.authorization_scope(environ)
        out["traceparent"], out["tracestate"] = _trace.from_environ(environ)
        body = json.dumps(out).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]


class Table(unittest.TestCase):
    """Every table of http-middleware.json that is not a request case: read whole, each row
    checked (the request cases run below, the framing vectors and the example server's contract
    against examples/http.py in test_http_hostile)."""

    @classmethod
    def setUpClass(cls):
        cls.server = waitress_server(_Echo(), "127.0.0.1", 0, threads=2)
        cls.port = cls.server.socket.getsockname()[1]
        t = threading.Thread(target=cls.server.run, daemon=True)
        t.start()

        def stop():
            cls.server.close()
            t.join(10)
        cls.addClassCleanup(stop)

    def echo(self, lines):
        head = ["GET /echo HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
        head += [f"{n}: {v}" for n, v in lines]
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        try:
            s.sendall(("\r\n".join(head) + "\r\n\r\n").encode("utf-8"))
            r = http.client.HTTPResponse(s)
            r.begin()
            self.assertEqual(r.status, 200)
            return json.loads(r.read())
        finally:
            s.close()

    def test_problems_are_the_files(self):
        self.assertEqual({p["type"]: (p["status"], p["title"], p["retryable"]) for p in SPEC["problems"]},
                         PROBLEMS)
        self.assertEqual({p["type"]: (p["status"], p["title"], p["retryable"])
                          for p in SPEC["example_server"]["problems"]}, SERVER_PROBLEMS)

    def test_defaults_and_key_vectors(self):
        d = SPEC["defaults"]
        self.assertEqual(d["methods"], ["POST", "PATCH"])
        self.assertEqual((d["request_body_max"], d["stored_body_max"], d["coordinator_call_timeout_ms"]),
                         (1 << 20, 64 << 10, 5000))
        self.assertEqual(d["trace_max_bytes"], _trace.TRACEPARENT_MAX)
        self.assertEqual(d["keep_headers"], ["Content-Type"])
        for v in SPEC["key_to_step"]["vectors"]:
            env = {} if v["authorization"] is None else {"HTTP_AUTHORIZATION": v["authorization"]}
            self.assertEqual(ik.global_id(v["key"], ik.authorization_scope(env)), v["global_id"])

    def test_never_kept_headers_are_refused_when_made(self):
        for name in SPEC["defaults"]["never_kept"]:
            with self.subTest(name), self.assertRaisesRegex(ValueError, "keep_headers"):
                IdempotencyMiddleware(App(), None, "x", keep_headers=("Content-Type", name.upper()))

    def test_coordinator_errors_every_code_and_reason(self):
        codes = sorted(set(GRPC_CODES) | {r["code"] for r in SPEC["coordinator_errors"]} - {"*"})
        reasons = SPEC["reason_words"] + [""]
        self.assertIn("lease-lost", reasons)
        n = 0
        for code in codes:
            for reason in reasons:
                with self.subTest(code=code, reason=reason):
                    self.assertEqual(coordinator_problem(code, reason), table_problem(code, reason))
                    n += 1
        self.assertGreater(n, 400)

    def test_operation_vectors(self):
        for v in SPEC["operation_vectors"]:
            with self.subTest(target=v["target"]):
                if "error" in v:
                    self.assertEqual(v["error"], "target-malformed")
                    with self.assertRaises(ik.TargetMalformed):
                        ik.normalize_target(v["target"])
                    continue
                path, fp_target = ik.normalize_target(v["target"])
                self.assertEqual(path, v["path"])
                self.assertEqual(ik.operation(v["method"], path), v["operation"])
                self.assertEqual(fp_target, v["fingerprint_target"].encode("utf-8"))

    def test_operation_vectors_through_a_wsgi_environ(self):
        # the middleware's request_target: from REQUEST_URI (waitress), or rebuilt from PATH_INFO
        for v in SPEC["operation_vectors"]:
            if "error" in v:
                continue
            with self.subTest(target=v["target"]):
                self.assertEqual(request_target({"REQUEST_URI": v["target"]})[0], v["path"])

    def test_header_vectors_through_waitress(self):
        for v in SPEC["header_vectors"]:
            with self.subTest(v["about"]):
                got = self.echo(v["lines"])
                if "key_error" in v:
                    self.assertEqual(got.get("key_error"), v["key_error"], got)
                else:
                    self.assertEqual(got.get("key"), v["key"], got)
                if "scope" in v:
                    self.assertEqual(got["scope"], v["scope"])

    def test_method_vectors(self):
        mw = IdempotencyMiddleware(App(), None, "x")
        for v in SPEC["method_vectors"]:
            with self.subTest(v["method"]):
                self.assertEqual(mw.match({"REQUEST_METHOD": v["method"]}), v["wrapped"])
        for bad in (["post"], ["POST", "Patch"]):
            with self.subTest(bad), self.assertRaisesRegex(ValueError, "methods"):
                IdempotencyMiddleware(App(), None, "x", methods=bad)

    def test_trace_vectors_through_waitress(self):
        for v in SPEC["trace_vectors"]:
            with self.subTest(v["about"]):
                lines = [("traceparent", t) for t in v["traceparent"]]
                lines += [("tracestate", t) for t in v["tracestate"]]
                got = self.echo(lines)
                self.assertEqual((got["traceparent"], got["tracestate"]),
                                 (v["keep_traceparent"], v["keep_tracestate"]))
                # what is kept is what the SDK sends: it must take it without an error
                if got["traceparent"] is not None:
                    _trace.metadata(got["traceparent"], got["tracestate"])

    def test_stored_answer_vectors(self):
        keep = {h.lower() for h in SPEC["defaults"]["keep_headers"]}
        for v in SPEC["stored_answer_vectors"]:
            with self.subTest(v["about"]):
                data = v["doc"].encode("utf-8")
                if "problem" in v:
                    self.assertEqual(v["problem"], "stored-answer-invalid")
                    with self.assertRaises(ValueError):
                        stored_answer(data, v["code"], keep)
                    continue
                status, headers, body, omitted = stored_answer(data, v["code"], keep)
                self.assertEqual(status, v["status"])
                self.assertEqual([list(h) for h in headers], v["headers"])
                if "body_b64" in v:
                    self.assertEqual(base64.b64encode(body).decode(), v["body_b64"])
                self.assertEqual(omitted, v["body_omitted"])


class Cases(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.coord = support.Coordinator()
        cls.addClassCleanup(cls.coord.close)

    def run_cases(self, rig, cases):
        for case in cases:
            with self.subTest(case=case["name"]):
                for i, step in enumerate(case["requests"], 1):
                    q, e = step["request"], step["expect"]
                    what = f"{case['name']}: request {i}"
                    before = rig.app.executions
                    a = send(rig.port, q)
                    if "ran" in e:
                        self.assertEqual(rig.app.executions - before, 1 if e["ran"] else 0,
                                         f"{what}: executions ({a})")
                    if a is None:
                        self.assertTrue(e.get("answer_optional"), f"{what}: no answer")
                        continue
                    status, headers, body, n = a
                    self.assertEqual(status, e["status"], f"{what}: {body[:300]!r}")
                    if "problem" in e:
                        check_problem(self, what, a, e["problem"], key_of(q))
                    if "replayed" in e:
                        self.assertEqual(headers.get("idempotent-replayed") == "true", e["replayed"], what)
                    self.assertEqual(headers.get("idempotent-body-omitted") == "true",
                                     bool(e.get("body_omitted")), what)
                    if "body_length" in e:
                        self.assertEqual(n, e["body_length"], what)

    def test_every_case_of_the_file(self):
        self.run_cases(Rig(self, self.coord), SPEC["cases"])

    def test_truncated_upload_behind_plain_wsgiref(self):
        # no wsgi.input_terminated: Content-Length is read, a short body is 400 body-incomplete,
        # and a chunked body is refused rather than taken as empty
        cases = [c for c in SPEC["cases"] if c["name"].startswith("a truncated upload")]
        self.assertEqual(len(cases), 1)
        rig = Rig(self, self.coord, handler=_PlainHandler)
        self.run_cases(rig, cases)
        a = send(rig.port, {"key": "plain-chunked-1", "chunks": ["{}"]})
        check_problem(self, "chunked behind wsgiref", a, "body-incomplete", "plain-chunked-1")
        self.assertEqual(rig.app.executions, 1)

    def test_an_answer_closed_before_it_started_releases_the_key(self):
        # a WSGI server may close the iterable without iterating it (the client left): the step
        # must not stay in progress, the next request with the key runs the app
        client = idem_client.connect(self.coord.address, tenant=support.unique("py-mw-close"))
        self.addCleanup(client.close)
        runs = []

        def app(environ, start_response):
            runs.append(1)
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]

        mw = IdempotencyMiddleware(app, client, "py-mw")

        def environ():
            return {"REQUEST_METHOD": "POST", "PATH_INFO": "/x", "HTTP_IDEMPOTENCY_KEY": "closed-1",
                    "CONTENT_LENGTH": "0", "wsgi.input": io.BytesIO(b""), "SERVER_NAME": "t",
                    "SERVER_PORT": "80", "wsgi.url_scheme": "http"}
        mw(environ(), lambda s, h: None).close()
        got = {}
        body = b"".join(mw(environ(), lambda s, h: got.update(status=s)))
        self.assertEqual((got["status"], body, len(runs)), ("200 OK", b"ok", 1))

    def test_409_and_503_are_problems(self):
        coord = support.Coordinator()
        self.addCleanup(coord.close)
        rig = Rig(self, coord)
        first = []
        t = threading.Thread(target=lambda: first.append(
            send(rig.port, {"key": "slow-1", "body": "{}", "headers": {"Delay-Ms": "1500"}})))
        t.start()
        self.assertTrue(rig.app.started.wait(10))
        check_problem(self, "in progress", send(rig.port, {"key": "slow-1", "body": "{}"}),
                      "in-progress", "slow-1")
        t.join(30)
        self.assertEqual(first[0][0], 201)
        coord.stop()
        check_problem(self, "stopped", send(rig.port, {"key": "down-1", "body": "{}"}),
                      "coordinator-unavailable", "down-1")
        self.assertEqual(rig.app.executions, 1)

    def test_a_refused_token_is_500_coordinator_refused_logged_once(self):
        import tempfile
        import os
        d = tempfile.mkdtemp(prefix="idem-py-tokens.")
        tokens = os.path.join(d, "tokens")
        with open(tokens, "w") as f:
            f.write("right-token-0123456789 py-mw-tenant service\n")
        os.chmod(tokens, 0o600)
        coord = support.Coordinator("--tokens", tokens)
        self.addCleanup(coord.close)
        rig = Rig(self, coord, token="wrong-token-0123456789")
        a = send(rig.port, {"key": "refused-1", "body": "{}"})
        check_problem(self, "bad token", a, "coordinator-refused", "refused-1")
        self.assertEqual(rig.app.executions, 0)
        self.assertEqual(sum("coordinator-refused" in ln for ln in rig.logs.lines), 1, rig.logs.lines)


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(field)


class LargeAnswer(unittest.TestCase):
    def test_200_mb_answer_keeps_rss_bounded(self):
        coord = support.Coordinator()
        self.addCleanup(coord.close)
        rig = Rig(self, coord)
        n = SPEC["large_response"]["bytes"]
        self.assertEqual(send(rig.port, {"key": "rss-warm", "body": "{}",
                                         "headers": {"Response-Bytes": "100000"}})[0], 200)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak (VmHWM) starts again from here
        base = _status("VmRSS")
        a = send(rig.port, {"key": "rss-1", "body": "{}", "headers": {"Response-Bytes": str(n)}})
        peak = _status("VmHWM")
        self.assertEqual((a[0], a[3]), (200, n))
        print(f"\na {n}-byte answer: RSS baseline {base >> 20} MB, peak {peak >> 20} MB "
              f"(+{(peak - base) >> 20} MB)")
        self.assertLess(peak - base, SPEC["large_response"]["rss_over_baseline_max"])
        b = send(rig.port, {"key": "rss-1", "body": "{}", "headers": {"Response-Bytes": str(n)}})
        self.assertEqual(b[1].get("idempotent-replayed"), "true")
        self.assertEqual(b[1].get("idempotent-body-omitted"), "true")
        self.assertEqual(b[3], 0)


if __name__ == "__main__":
    unittest.main()
