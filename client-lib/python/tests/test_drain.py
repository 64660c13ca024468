"""test_drain.py — an idle client's next call while its only node drains (docs/internals.md, "An
idle client's next call: read the GOAWAY before writing"; libidem's
drain::an_idle_clients_next_call_is_not_lost does the same with the C client).

The client is answered once by a real coordinator, then sits idle while the coordinator is
SIGTERMed: gRPC core (python3-grpcio runs on it, as libidem does) reads a client's connection only
while a thread polls, so the GOAWAY of the node's gRPC shutdown can sit unread on it. A call
written on that connection reaches a server whose shutdown has begun, which ends it CANCELLED
without handling it: a lost try, and run_step ends STEP_UNKNOWN with the outcome unknown. Checked:
once the node's listener is closed, the client's next run_step ends UNAVAILABLE or
DEADLINE_EXCEEDED with its outcome known (nothing was sent), the action not run, and the node
drains and exits 0."""
import signal
import subprocess
import unittest

import support

import idem_client
from idem_client import IdemError, Output, StepKey


class IdleClientThroughADrain(unittest.TestCase):
    def setUp(self):
        self.coord = support.Coordinator()
        self.addCleanup(self.coord.close)
        self.client = idem_client.connect(self.coord.address, tenant=support.unique("py-drain"),
                                          timeout=1.0)
        self.addCleanup(self.client.close)

    def test_an_idle_clients_next_call_is_not_lost(self):
        gid = support.unique("idle")
        b = self.client.begin_step(StepKey(gid, "pay", "charge"))
        self.assertEqual(b.decision, "PROCEED", "the first call is answered")
        # the drain: gRPC's shutdown closes the listener and sends the client's connection a GOAWAY
        self.coord.proc.send_signal(signal.SIGTERM)
        support.wait_until(lambda: not support.port_open(self.coord.port), 10,
                           "the draining node to close its listener")
        ran = []
        with self.assertRaises(IdemError) as cm:  # a fresh key, no policy: fail-closed
            self.client.run_step(StepKey(gid, "pay", "refund"),
                                 lambda ctx: ran.append(1) or Output("succeeded", 200, b""),
                                 timeout=1.0)
        e = cm.exception
        print(f"drain: the idle client's step run after the GOAWAY: {e.code}: {e.message} "
              f"(outcome {'unknown' if e.outcome_unknown else 'known'})", flush=True)
        self.assertIn(e.code, ("UNAVAILABLE", "DEADLINE_EXCEEDED"),
                      f"no node is left to answer, and no try was lost (STEP_UNKNOWN): {e}")
        self.assertFalse(e.outcome_unknown,
                         f"the call reached no coordinator, so its outcome is known: {e}")
        self.assertEqual(ran, [], "the action did not run")
        try:
            status = self.coord.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.fail(f"the node did not exit within 20 s of its SIGTERM:\n{self.coord.tail()}")
        self.assertEqual(status, 0, f"the node drained and exited 0:\n{self.coord.tail()}")


if __name__ == "__main__":
    unittest.main()
