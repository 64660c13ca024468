"""test_http_hostile.py — examples/http.py (waitress + the WSGI middleware) against a real
coordinator, sent what an attacker or a careless client sends, byte for byte over loopback
(docs/api.md §19): HTTP/1.1 answers, chunked bodies read in full, ambiguous framing
refused before the handler, stored answers that must not be sent (CR LF in a header, a status
outside 200-599, a header the middleware does not keep), trace context that is invalid or too
large dropped before any coordinator call, and the server's own errors as problem documents
without its name or a traceback."""
import base64
import http.client
import json
import os
import shutil
import socket
import tempfile
import unittest

import support
from test_http import Example, problem

import idem_client
from idem_client import idempotency_key as ik

SERVICE = "http-example"
SPEC = json.loads((support.PY_DIR.parents[0] / "conformance" / "http-middleware.json").read_text())


def raw(port, data, timeout=30):
    """Sends the bytes as they are; (HTTP version, status, headers (lower-case names, values
    joined), body, the status line and header block as text)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        r = http.client.HTTPResponse(s)
        r.begin()
        body = r.read()
        hs = {}
        for k, v in r.getheaders():
            hs[k.lower()] = v if k.lower() not in hs else hs[k.lower()] + ", " + v
        head = "\n".join(f"{k}: {v}" for k, v in r.getheaders())
        return r.version, r.status, hs, body, head
    finally:
        s.close()


def request(method, path, headers, body=b"", version="HTTP/1.1"):
    head = [f"{method} {path} {version}", "Host: 127.0.0.1", "Connection: close"] + list(headers)
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def post(key, body, *extra, path="/payments"):
    """A POST with its Content-Length, the key and the extra header lines."""
    hs = [f"Idempotency-Key: {key}", "Content-Type: application/json",
          f"Content-Length: {len(body)}", *extra]
    return request("POST", path, hs, body)


def as_answer(a):
    """test_http.problem's (status, headers, body) of a raw() answer."""
    return a[1], a[2], a[3]


class Hostile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.coord = support.Coordinator()
        cls.addClassCleanup(cls.coord.close)
        cls.tmp = tempfile.mkdtemp(prefix="idem-py-hostile.")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.tenant = support.unique("py-hostile")
        cls.ex = Example(cls.coord.address, cls.tenant, SERVICE, os.path.join(cls.tmp, "journal"))
        cls.addClassCleanup(cls.ex.stop)
        cls.client = idem_client.connect(cls.coord.address, tenant=cls.tenant)
        cls.addClassCleanup(cls.client.close)

    def send(self, data):
        return raw(self.ex.port, data)

    def no_leak(self, a):
        """No server name or version and no traceback in the answer."""
        _, _, hs, body, head = a
        self.assertNotIn("server", hs, head)
        text = (head + "\n" + body.decode("latin-1")).lower()
        for word in ("waitress", "traceback", "python", 'file "'):
            self.assertNotIn(word, text, f"{word!r} in {head}\n{body!r}")

    def unchanged(self, before, what):
        self.assertEqual(self.ex.executions(), before, f"{what}: the handler ran")

    # --- the server -----------------------------------------------------------------------------

    def test_answers_http_1_1(self):
        a = self.send(post(support.unique("k"), b"{}"))
        self.assertEqual((a[0], a[1]), (11, 201), a[4])
        self.no_leak(a)

    def test_a_chunked_body_is_read_in_full_and_replayed_by_its_plain_twin(self):
        key, before = support.unique("k"), self.ex.executions()
        body = b'{"amount":' + b" " * 70000 + b"42}"
        chunks = [body[i:i + 1000] for i in range(0, len(body), 1000)]
        framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
        a = self.send(request("POST", "/payments", [f"Idempotency-Key: {key}",
                                                    "Transfer-Encoding: chunked"], framed))
        self.assertEqual(a[1], 201, a[3])
        self.assertEqual(json.loads(a[3])["amount"], 42)
        self.assertEqual(self.ex.executions(), before + 1)
        b = self.send(post(key, body))
        self.assertEqual((b[1], b[2].get("idempotent-replayed"), b[3]), (201, "true", a[3]))
        self.assertEqual(self.ex.executions(), before + 1)

    def test_framing_vectors(self):
        n = 0
        for v in SPEC["framing_vectors"]:
            with self.subTest(v["about"]):
                key, before = support.unique("k"), self.ex.executions()
                data = request("POST", "/payments", [f"Idempotency-Key: {key}", *v["lines"]],
                               v["body"].encode())
                a = self.send(data)
                self.no_leak(a)
                if "problem" not in v:
                    self.assertEqual(a[1], v["status"], a[3])
                    self.assertEqual(self.ex.executions(), before + 1)
                    continue
                problem(self, as_answer(a), v["status"], v["problem"])
                self.unchanged(before, v["about"])
                # the key was not used: the same request, framed plainly, runs once
                self.assertEqual(self.send(post(key, b"abc"))[1], 201)
                n += 1
        self.assertGreaterEqual(n, 10)

    def test_chunked_on_http_1_0_is_body_malformed(self):
        key, before = support.unique("k"), self.ex.executions()
        a = self.send(request("POST", "/payments", [f"Idempotency-Key: {key}",
                                                   "Transfer-Encoding: chunked"],
                              b"2\r\n{}\r\n0\r\n\r\n", version="HTTP/1.0"))
        problem(self, as_answer(a), 400, "body-malformed")
        self.unchanged(before, "HTTP/1.0 chunked")

    def test_the_servers_own_errors_are_problem_documents(self):
        cases = {
            "a field line without a colon": (request("POST", "/payments", [
                "Idempotency-Key: x", "Content-Length: 0", "no colon here"]),
                400, "request-malformed"),
            "a control character in a field": (request("POST", "/payments", [
                "Idempotency-Key: x", "X-A: a\x01b", "Content-Length: 0"]),
                400, "request-malformed"),
            "a folded field line": (request("POST", "/payments", [
                "Idempotency-Key: fold-1", " continued", "Content-Length: 0"]),
                400, "request-malformed"),
            "a lower-case method": (request("post", "/payments", [
                "Idempotency-Key: x", "Content-Length: 0"]), 400, "request-malformed"),
            "a method with one lower-case letter": (request("Post", "/payments", [
                "Idempotency-Key: x", "Content-Length: 0"]), 400, "request-malformed"),
            "a bare CR in the request line": (b"POST /pay\rments HTTP/1.1\r\nHost: x\r\n\r\n",
                                              400, "request-malformed"),
            "a broken chunk": (request("POST", "/payments", ["Idempotency-Key: x",
                                                             "Transfer-Encoding: chunked"],
                                       b"zz\r\n{}\r\n0\r\n\r\n"), 400, "body-incomplete"),
            "a bad escape in the target": (post("t-1", b"{}", path="/p%zzyments"),
                                           400, "target-malformed"),
            "CR LF escaped in the target": (post("t-2", b"{}", path="/p%0d%0aSet-Cookie:x"),
                                            400, "target-malformed"),
            "a target not starting with /": (post("t-3", b"{}", path="payments"),
                                             400, "target-malformed"),
            "no such route": (post("r-1", b"{}", path="/nowhere"), 404, "not-found"),
            "a GET of a POST route": (request("GET", "/payments", []), 405, "method-not-allowed"),
            "a POST of a GET route": (post("r-2", b"{}", path="/stats"),
                                      405, "method-not-allowed"),
        }
        for what, (data, status, word) in cases.items():
            with self.subTest(what):
                before = self.ex.executions()
                a = self.send(data)
                doc = problem(self, as_answer(a), status, word)
                self.no_leak(a)
                self.unchanged(before, what)
                if word == "method-not-allowed":
                    self.assertIn(a[2].get("allow"), ("POST", "GET"), a[4])
                if status != 404 and word.startswith(("request-", "target-")):
                    self.assertNotIn("idempotency_key", doc)

    def test_head_limits(self):
        d = SPEC["defaults"]
        self.assertEqual(SPEC["example_server"]["head_limit"], d["head_limit_setting"])
        pad = "x" * (d["head_accepted_bytes"] - 300)
        a = self.send(post(support.unique("k"), b"{}", f"X-Pad: {pad}"))
        self.assertEqual(a[1], 201, a[3][:300])
        pad = "x" * d["head_refused_bytes"]
        try:
            a = self.send(post(support.unique("k"), b"{}", f"X-Pad: {pad}"))
        except ConnectionResetError:  # answered, then closed before reading the rest
            self.skipTest("the connection was reset before the answer could be read")
        problem(self, as_answer(a), 431, "header-too-large")
        self.no_leak(a)

    def test_routes_of_the_example_server(self):
        routes = {(r["method"], r["path"]): r for r in SPEC["example_server"]["routes"]}
        self.assertEqual(set(routes), {("POST", "/payments"), ("POST", "/refunds"),
                                       ("GET", "/stats")})
        before = self.ex.executions()
        for path, kind in (("/payments", "payment"), ("/refunds", "refund")):
            a = self.send(post(support.unique("k"), b'{"amount":7}', path=path))
            doc = json.loads(a[3])
            self.assertEqual((a[1], a[2].get("content-type"), doc["amount"]),
                             (201, "application/json", 7))
            self.assertEqual(doc[kind], f"{kind}-{doc['execution']}")
        a = self.send(post(support.unique("k"), b'{"big": 3000}'))
        self.assertEqual((a[1], a[2].get("content-type"), a[3]), (201, "text/plain", b"x" * 3000))
        a = self.send(post(support.unique("k"), b'{"fail": true}'))
        self.assertEqual((a[1], a[2].get("content-type")), (500, "application/json"))
        a = self.send(post(support.unique("k"), b"not json"))
        self.assertEqual((a[1], json.loads(a[3])["amount"]), (201, None))
        a = self.send(request("GET", "/stats", []))
        self.assertEqual(json.loads(a[3])["executions"], before + 5)

    def test_one_route_many_spellings_runs_once(self):
        key, before = support.unique("k"), self.ex.executions()
        first = self.send(post(key, b"{}"))
        self.assertEqual(first[1], 201, first[3])
        for path in ("/p%61yments", "/payments/", "/x/../payments", "/%2e%2e/payments",
                     "//payments//", "/./payments/."):
            with self.subTest(path):
                a = self.send(post(key, b"{}", path=path))
                self.assertEqual((a[1], a[2].get("idempotent-replayed"), a[3]),
                                 (201, "true", first[3]))
        self.assertEqual(self.ex.executions(), before + 1)
        # the query is part of the fingerprint: the same key with one is another request
        problem(self, as_answer(self.send(post(key, b"{}", path="/payments?x=1"))), 422,
                "fingerprint-mismatch")

    # --- stored answers -----------------------------------------------------------------------

    def store(self, key, doc, body=b"{}", code=201):
        """Completes the step the middleware would begin for POST /payments with this key and
        body (no Authorization: the empty scope), its result the given stored document."""
        step = idem_client.StepKey(ik.global_id(key, ""), SERVICE, "post--payments")
        data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        rep = self.client.run_step(step, lambda ctx: idem_client.Output("succeeded", code, data),
                                   ik.fingerprint("POST", "/payments", body))
        self.assertTrue(rep.ran)

    def test_a_stored_header_with_crlf_is_never_sent(self):
        key, before = support.unique("k"), self.ex.executions()
        self.store(key, {"status": 201, "headers": [
            ["Content-Type", "application/json\r\nSet-Cookie: session=stolen"]],
            "body_b64": "e30="})
        a = self.send(post(key, b"{}"))
        self.assertNotIn("set-cookie", a[2], a[4])
        doc = problem(self, as_answer(a), 500, "stored-answer-invalid")
        self.assertNotIn("stolen", json.dumps(doc))
        self.unchanged(before, "replay")
        support.wait_until(lambda: doc["instance"] in self.ex.output(), 5,
                           "the example's log line naming the answer's instance")

    def test_stored_answer_vectors_over_http(self):
        for v in SPEC["stored_answer_vectors"]:
            with self.subTest(v["about"]):
                key, before = support.unique("k"), self.ex.executions()
                self.store(key, v["doc"].encode("utf-8"), code=v["code"])
                a = self.send(post(key, b"{}"))
                self.unchanged(before, v["about"])
                self.no_leak(a)
                if "problem" in v:
                    problem(self, as_answer(a), 500, v["problem"])
                    self.assertNotIn("set-cookie", a[2])
                    self.assertNotIn("idempotent-replayed", a[2])
                    continue
                self.assertEqual(a[1], v["status"], a[3])
                self.assertEqual(a[2].get("idempotent-replayed"), "true")
                self.assertEqual(a[2].get("idempotent-body-omitted") == "true", v["body_omitted"])
                for name, value in v["headers"]:
                    self.assertEqual(a[2].get(name.lower()), value)
                if "body_b64" in v:
                    self.assertEqual(a[3], base64.b64decode(v["body_b64"]))
                self.assertNotIn("transfer-encoding", a[2])

    def test_a_valid_stored_answer_is_replayed(self):
        # the control: the same store path with a valid document replays it
        key = support.unique("k")
        self.store(key, {"status": 202, "headers": [["Content-Type", "text/plain"]],
                         "body_b64": "b2s="})
        a = self.send(post(key, b"{}"))
        self.assertEqual((a[1], a[2].get("content-type"), a[2].get("idempotent-replayed"), a[3]),
                         (202, "text/plain", "true", b"ok"))
        self.assertNotIn("transfer-encoding", a[2])

    # --- trace context ------------------------------------------------------------------------

    def test_bad_or_large_trace_context_is_dropped_and_the_handler_runs(self):
        tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        cases = {
            "version 01 with a TAB": [f"traceparent: 01-{tid}-{sid}-01-\tx"],
            "version 01, 9000 characters": [f"traceparent: 01-{tid}-{sid}-01-" + "a" * 9000],
            "a tracestate of 9000 characters": [f"traceparent: 00-{tid}-{sid}-01",
                                                "tracestate: " + ",".join(
                                                    f"k{i}=" + "v" * 200 for i in range(44))],
        }
        for v in SPEC["trace_vectors"]:
            cases[v["about"]] = ([f"traceparent: {t}" for t in v["traceparent"]] +
                                 [f"tracestate: {t}" for t in v["tracestate"]])
        for what, lines in cases.items():
            with self.subTest(what):
                key, before = support.unique("k"), self.ex.executions()
                a = raw(self.ex.port, ("\r\n".join(
                    ["POST /payments HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
                     f"Idempotency-Key: {key}", "Content-Length: 2", *lines]) +
                    "\r\n\r\n{}").encode("utf-8"))
                self.assertEqual(a[1], 201, f"{what}: {a[3][:400]!r}")
                self.assertEqual(self.ex.executions(), before + 1)
                self.no_leak(a)

    # --- routes ---------------------------------------------------------------------------------


if __name__ == "__main__":
    unittest.main()
