"""test_sdk.py — the step helper and the calls of idem_client against a real coordinator:
bad input refused before any call, replay, lease keep-alive, a lost lease, GetSaga/Lookup,
and a fail-open journal that `idemctl reconcile` accepts."""
import os
import subprocess
import threading
import time
import unittest
from concurrent import futures

import grpc

import support

import idem_client
from idem_client import IdemError, Output, StepKey
from idem_client import journal


class BadInput(unittest.TestCase):
    """Bad input: INVALID_ARGUMENT naming the field, and no call (the address has no server,
    so a call would be UNAVAILABLE instead)."""

    @classmethod
    def setUpClass(cls):
        cls.client = idem_client.connect(f"127.0.0.1:{support.free_port()}", timeout=0.5)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def refused(self, field, fn, *args, **kw):
        with self.assertRaises(IdemError) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT", cm.exception)
        self.assertEqual(cm.exception.field, field, cm.exception)
        self.assertIn(field, cm.exception.message)
        return cm.exception

    def test_malformed_address(self):
        for bad in ("", "localhost", "127.0.0.1:", "127.0.0.1:99999", "a b:1", "h:1,,x"):
            with self.subTest(address=bad):
                self.refused("address", idem_client.connect, bad)

    def test_empty_key_parts(self):
        ran = []
        for key, field in ((StepKey("", "svc", "op"), "global_id"),
                           (StepKey("g1", "", "op"), "service"),
                           (StepKey("g1", "svc", ""), "operation"),
                           (StepKey("g1", "svc", "op", "sideways"), "phase"),
                           (StepKey("g 1", "svc", "op"), "global_id"),
                           (StepKey("g1", "Svc", "op"), "service")):
            with self.subTest(key=key):
                self.refused(field, self.client.run_step, key, lambda ctx: ran.append(1))
                self.refused(field, self.client.begin_step, key)
                self.refused(field, self.client.lookup, key)
                self.refused(field, self.client.complete_step, key, 1, "succeeded")
        self.assertEqual(ran, [])

    def test_body_over_limit(self):
        self.refused("body", self.client.complete_step, StepKey("g1", "svc", "op"), 1, "succeeded",
                     200, b"x" * (64 * 1024 + 1))

    def test_fingerprint_over_limit(self):
        self.refused("fingerprint", self.client.begin_step, StepKey("g1", "svc", "op"), b"f" * 65)

    def test_unreachable_run_does_not_run_the_action(self):
        # no server and no journal: BeginStep fails, the action never runs
        with self.assertRaises(IdemError) as cm:
            self.client.run_step(StepKey("g1", "svc", "op"), lambda ctx: 1 / 0, timeout=0.3)
        self.assertIn(cm.exception.code, ("UNAVAILABLE", "DEADLINE_EXCEEDED"))


class AgainstCoordinator(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.coord = support.Coordinator()
        cls.addClassCleanup(cls.coord.close)  # runs even when setUpClass fails half-way
        cls.tenant = support.unique("py-sdk")
        cls.client = idem_client.connect(cls.coord.address, tenant=cls.tenant)
        cls.addClassCleanup(cls.client.close)

    def key(self, op="charge"):
        return StepKey(self.client.begin_saga().global_id, "payment", op)

    def test_run_replay_lookup_saga(self):
        key = self.key()
        calls = []
        rep = self.client.run_step(key, lambda ctx: calls.append(ctx.attempt) or
                                   Output("succeeded", 201, b"receipt"), b"fp")
        self.assertEqual((rep.decision, rep.ran, rep.attempt, rep.result.body),
                         ("PROCEED", True, 1, b"receipt"))
        rep2 = self.client.run_step(key, lambda ctx: calls.append(ctx.attempt), b"fp")
        self.assertEqual((rep2.decision, rep2.replayed, rep2.result.code, rep2.result.body),
                         ("REPLAY", True, 201, b"receipt"))
        self.assertEqual(calls, [1])
        rec = self.client.lookup(key)
        self.assertEqual((rec.state, rec.attempt, rec.fingerprint), ("succeeded", 1, b"fp"))
        saga = self.client.get_saga(key.global_id)
        self.assertEqual([s.key for s in saga.steps], [key])

    def test_action_exception_completes_unknown_and_reraises(self):
        key = self.key()
        with self.assertRaises(ZeroDivisionError):
            self.client.run_step(key, lambda ctx: 1 / 0)
        self.assertEqual(self.client.lookup(key).state, "unknown")

    def test_lease_is_extended_while_the_action_runs(self):
        key = self.key("long")
        other = []

        def action(ctx):
            # 3 leases long: without ExtendLease another caller would take the step over
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                try:
                    self.client.begin_step(key)
                    other.append("proceed")
                except IdemError as e:
                    other.append(e.reason)
                time.sleep(0.1)
            return Output("succeeded", 0, b"done")

        rep = self.client.run_step(key, action, lease_ms=500)
        self.assertEqual((rep.attempt, rep.takeover, rep.result.body), (1, False, b"done"))
        self.assertTrue(other and set(other) == {"in-progress"}, other)
        self.assertEqual(self.client.lookup(key).state, "succeeded")

    def test_lost_lease_is_reported_not_completed(self):
        key = self.key("lost")
        idemctl = os.environ.get("IDEM_IDEMCTL_BIN")
        if not idemctl:
            self.skipTest("IDEM_IDEMCTL_BIN not set")

        def action(ctx):
            # an operator settles the step while it runs: the lease is gone
            subprocess.run([idemctl, "--addr", self.coord.address, "--tenant", self.tenant,
                            "resolve", key.global_id, key.service, key.operation, "--outcome",
                            "failed", "--code", "409", "--reason", "test", "--yes"],
                           check=True, capture_output=True)
            support.wait_until(ctx.lease_lost.is_set, 5, "the lease to be reported lost")
            return Output("succeeded", 0, b"late")

        with self.assertRaises(IdemError) as cm:
            self.client.run_step(key, action, lease_ms=300)
        self.assertEqual((cm.exception.code, cm.exception.reason), ("ABORTED", "lease-lost"))
        self.assertTrue(cm.exception.report.ran)
        rec = self.client.lookup(key)
        self.assertEqual((rec.state, rec.result.code), ("failed", 409))

    def test_concurrent_runs_execute_once(self):
        key = self.key("race")
        ran, results = [], []

        def one():
            rep = self.client.run_step(key, lambda ctx: ran.append(1) or time.sleep(0.2) or
                                       Output("succeeded", 0, b"once"))
            results.append(rep.result.body)

        ts = [threading.Thread(target=one) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(len(ran), 1)
        self.assertEqual(results, [b"once"] * 8)

    def test_journal_lines_are_reconciled_by_idemctl(self):
        idemctl = os.environ.get("IDEM_IDEMCTL_BIN")
        if not idemctl:
            self.skipTest("IDEM_IDEMCTL_BIN not set")
        gid = self.client.begin_saga().global_id
        cases = [(StepKey(gid, "payment", "open-op"), b"\x01\xfe",
                  idem_client.Result("succeeded", 200, b"paid 5% - ok\n")),
                 (StepKey(gid, "payment", "dash"), b"", idem_client.Result("failed", 402, b"-")),
                 (StepKey(gid, "payment", "empty", "compensation"), b"",
                  idem_client.Result("succeeded", 0, b""))]
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), support.unique("py-journal"))
        try:
            for key, fp, res in cases:
                journal.append(path, journal.line("client", self.tenant, key, fp, res))
            r = subprocess.run([idemctl, "--addr", self.coord.address, "--tenant", self.tenant,
                                "reconcile", path], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        finally:
            os.unlink(path)
        for key, fp, res in cases:
            rec = self.client.lookup(key)
            self.assertEqual((rec.state, rec.result.code, rec.result.body, rec.fingerprint),
                             (res.outcome, res.code, res.body, fp))


class FakeNode:
    """A stand-in node on a free loopback port: every call runs behaviour(context) (which ends
    it, e.g. with context.abort); counts calls and sets `reached` on the first."""

    def __init__(self, behaviour):
        self.calls = 0
        self.reached = threading.Event()

        def unary(_req, context):
            self.calls += 1
            self.reached.set()
            behaviour(context)
            return b""

        class Handler(grpc.GenericRpcHandler):
            def service(self, _details):
                return grpc.unary_unary_rpc_method_handler(unary)

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[Handler()])
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def stop(self):
        self.server.stop(None)


class LostTry(unittest.TestCase):
    """A CANCELLED the client did not cause (a draining node's gRPC killed the try, no
    idem-reason) is a lost try: repeated on the next node when repeatable, else raised with its
    outcome unknown. One that close() caused stays final."""

    @classmethod
    def setUpClass(cls):
        cls.coord = support.Coordinator()
        cls.addClassCleanup(cls.coord.close)
        cls.tenant = support.unique("py-lost-try")
        cls.draining = FakeNode(
            lambda ctx: ctx.abort(grpc.StatusCode.CANCELLED, "server is shutting down"))
        cls.addClassCleanup(cls.draining.stop)

    def connect(self, first, timeout=5.0):
        c = idem_client.connect(f"{first},{self.coord.address}", tenant=self.tenant, timeout=timeout)
        self.addCleanup(c.close)
        return c

    def close_when_reached(self, node, c):
        """Closes c from another thread once a call has reached node."""
        closer = threading.Thread(target=lambda: node.reached.wait(10) and c.close())
        closer.start()
        self.addCleanup(closer.join)

    def test_repeatable_call_goes_on_to_the_next_node(self):
        c = self.connect(self.draining.address)
        rep = c.run_step(StepKey("lost-try-1", "payment", "charge"),
                         lambda ctx: Output("succeeded", 200, b"next node"))
        self.assertEqual((rep.ran, rep.result.body), (True, b"next node"))
        self.assertGreater(self.draining.calls, 0)

    def test_begin_saga_without_request_id_is_not_repeated(self):
        c = self.connect(self.draining.address)
        before = self.draining.calls
        with self.assertRaises(IdemError) as cm:
            c.begin_saga()
        e = cm.exception
        self.assertEqual((e.code, e.reason, e.outcome_unknown), ("CANCELLED", "", True), e)
        self.assertEqual(self.draining.calls - before, 1)

    def test_close_during_a_call_is_final(self):
        def hang(ctx):
            end = time.monotonic() + 10
            while ctx.is_active() and time.monotonic() < end:
                time.sleep(0.01)

        hanging = FakeNode(hang)
        self.addCleanup(hanging.stop)
        c = self.connect(hanging.address, timeout=10.0)
        self.close_when_reached(hanging, c)
        with self.assertRaises(IdemError) as cm:
            c.lookup(StepKey("lost-try-2", "payment", "charge"))
        e = cm.exception
        self.assertEqual((e.code, e.outcome_unknown), ("CANCELLED", False), e)

    def test_close_between_tries_is_final(self):
        # a node that answers UNAVAILABLE without a leader: the client waits, then tries again;
        # close() in that wait ends the call with CANCELLED, not grpc's closed-channel ValueError
        refusing = FakeNode(lambda ctx: ctx.abort(grpc.StatusCode.UNAVAILABLE, "not yet"))
        self.addCleanup(refusing.stop)
        c = self.connect(refusing.address, timeout=10.0)
        self.close_when_reached(refusing, c)
        with self.assertRaises(IdemError) as cm:
            c.lookup(StepKey("lost-try-3", "payment", "charge"))
        # (its outcome is unknown when a try before it was: an UNAVAILABLE without a leader)
        self.assertEqual(cm.exception.code, "CANCELLED", cm.exception)
        self.assertGreater(refusing.calls, 0)


if __name__ == "__main__":
    unittest.main()
