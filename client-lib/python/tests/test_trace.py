"""test_trace.py — trace context against a real coordinator (docs/api.md §22): an explicit
traceparent on run_step and on the raw calls ends on the step (LookupStep, `idemctl step`); a
malformed one is INVALID_ARGUMENT naming the field; an HTTP request with a traceparent through
the WSGI middleware (a real wsgiref server on loopback) leaves its trace id on the step."""
import os
import subprocess
import threading
import unittest
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, make_server

import support

import idem_client
from idem_client import IdemError, Output, StepKey
from idem_client import idempotency_key as ik
from idem_client.wsgi import IdempotencyMiddleware

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TID}-00f067aa0ba902b7-01"


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class Trace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.coord = support.Coordinator()
        cls.tenant = support.unique("py-trace")
        cls.client = idem_client.connect(cls.coord.address, tenant=cls.tenant)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.coord.close()

    def test_explicit_traceparent_ends_on_the_step(self):
        gid = self.client.begin_saga().global_id
        key = StepKey(gid, "pay", "charge")
        rep = self.client.run_step(key, lambda ctx: Output("succeeded", 200, b"ok"),
                                   traceparent=TRACEPARENT, tracestate="vendor=1")
        self.assertTrue(rep.ran)
        rec = self.client.lookup(key)
        self.assertEqual((rec.begin_trace_id, rec.complete_trace_id), (TID, TID))
        idemctl = os.environ.get("IDEM_IDEMCTL_BIN")
        self.assertTrue(idemctl, "IDEM_IDEMCTL_BIN is not set (tests.cmake sets it)")
        out = subprocess.run([idemctl, "--addr", self.coord.address, "--tenant", self.tenant,
                              "step", gid, "pay", "charge"], capture_output=True, text=True,
                             timeout=30, check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(TID, out.stdout)

    def test_raw_calls_carry_it_and_none_is_empty(self):
        gid = self.client.begin_saga().global_id
        key = StepKey(gid, "pay", "raw")
        other = "0af7651916cd43dd8448eb211c80319c"
        b = self.client.begin_step(key, traceparent=TRACEPARENT)
        self.client.complete_step(key, b.attempt, "succeeded", traceparent=f"00-{other}-b7ad6b7169203331-00")
        rec = self.client.lookup(key)
        self.assertEqual((rec.begin_trace_id, rec.complete_trace_id), (TID, other))
        plain = StepKey(gid, "pay", "plain")  # no traceparent, no opentelemetry span: none
        self.client.run_step(plain, lambda ctx: Output("succeeded"))
        rec = self.client.lookup(plain)
        self.assertEqual((rec.begin_trace_id, rec.complete_trace_id), ("", ""))

    def test_malformed_traceparent_is_invalid_argument(self):
        key = StepKey(self.client.begin_saga().global_id, "pay", "bad")
        for bad, field in (("00-abc", "traceparent"), (f"ff-{TID}-00f067aa0ba902b7-01", "traceparent"),
                           (f"00-{'0' * 32}-00f067aa0ba902b7-01", "traceparent")):
            with self.subTest(traceparent=bad):
                with self.assertRaises(IdemError) as cm:
                    self.client.run_step(key, lambda ctx: Output("succeeded"), traceparent=bad)
                self.assertEqual((cm.exception.code, cm.exception.field), ("INVALID_ARGUMENT", field))
        with self.assertRaises(IdemError) as cm:
            self.client.begin_step(key, traceparent=TRACEPARENT, tracestate="bad\x01")
        self.assertEqual((cm.exception.code, cm.exception.field), ("INVALID_ARGUMENT", "tracestate"))
        with self.assertRaises(IdemError):
            self.client.lookup(key)  # nothing was begun

    def test_wsgi_request_with_traceparent_leaves_its_trace_id(self):
        def app(environ, start_response):
            start_response("201 Created", [("Content-Type", "application/json")])
            return [b"{}"]

        mw = IdempotencyMiddleware(app, self.client, "py-shop")
        server = make_server("127.0.0.1", 0, mw, handler_class=_Quiet)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        port = server.server_address[1]

        def post(key, traceparent):
            headers = {"Idempotency-Key": key, "Content-Type": "application/json"}
            if traceparent:
                headers["traceparent"] = traceparent
            req = urllib.request.Request(f"http://127.0.0.1:{port}/orders", data=b"{}",
                                         headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status

        self.assertEqual(post("order-1", TRACEPARENT), 201)
        rec = self.client.lookup(StepKey(ik.global_id("order-1"), "py-shop", ik.operation("POST", "/orders")))
        self.assertEqual((rec.begin_trace_id, rec.complete_trace_id), (TID, TID))
        # a malformed traceparent header is ignored, never an error
        self.assertEqual(post("order-2", "00-not-a-trace"), 201)
        rec = self.client.lookup(StepKey(ik.global_id("order-2"), "py-shop", ik.operation("POST", "/orders")))
        self.assertEqual(rec.begin_trace_id, "")


if __name__ == "__main__":
    unittest.main()
