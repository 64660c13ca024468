"""test_key.py — the middleware's header parser, step key and fingerprint against every case of
client-lib/conformance/idempotency-key.json (the one table all middlewares read)."""
import json
import os
import subprocess
import unittest

import support

from idem_client import idempotency_key as ik

TABLE = json.loads((support.PY_DIR.parents[0] / "conformance" / "idempotency-key.json").read_text())


class KeyTable(unittest.TestCase):
    def test_header_cases(self):
        self.assertGreater(len(TABLE["header"]), 20)
        for case in TABLE["header"]:
            with self.subTest(header=case["header"], about=case["about"]):
                if "key" in case:
                    self.assertEqual(ik.parse(case["header"]), case["key"])
                else:
                    self.assertIn(case["error"], TABLE["errors"])
                    with self.assertRaises(ik.KeyError_) as cm:
                        ik.parse(case["header"])
                    self.assertEqual(cm.exception.word, case["error"])

    def test_every_error_word_has_a_rule(self):
        self.assertEqual(sorted(ik.RULES), sorted(TABLE["errors"]))

    def test_global_id(self):
        for case in TABLE["global_id"]:
            with self.subTest(scope=case["scope"], key=case["key"]):
                self.assertEqual(ik.global_id(case["key"], case["scope"]), case["global_id"])

    def test_default_scope(self):
        self.assertGreaterEqual(len(TABLE["scope_default"]), 2)
        for case in TABLE["scope_default"]:
            environ = {} if case["authorization"] is None else {"HTTP_AUTHORIZATION": case["authorization"]}
            self.assertEqual(ik.authorization_scope(environ), case["scope"])

    def test_idemctl_http_key(self):
        # idemctl http-key (C, OpenSSL's SHA-256) prints the same global ids
        ctl = os.environ.get("IDEM_IDEMCTL_BIN")
        if not ctl:
            self.skipTest("IDEM_IDEMCTL_BIN is not set")
        for case in TABLE["global_id"]:
            with self.subTest(scope=case["scope"], key=case["key"]):
                args = [ctl, "http-key", "--scope", case["scope"], "--", case["key"]]
                out = subprocess.run(args, capture_output=True, text=True, timeout=10, check=True)
                self.assertEqual(out.stdout.strip(), case["global_id"])

    def test_operation(self):
        # the table's path is a request target: normalized first (its query is not part of it)
        for case in TABLE["operation"]:
            with self.subTest(path=case["path"]):
                path, _ = ik.normalize_target(case["path"])
                self.assertEqual(ik.operation(case["method"], path), case["operation"])

    def test_fingerprint(self):
        for case in TABLE["fingerprint"]:
            with self.subTest(target=case["target"], body=case["body"]):
                fp = ik.fingerprint(case["method"], case["target"], case["body"].encode())
                self.assertEqual(fp.hex(), case["sha256"])


if __name__ == "__main__":
    unittest.main()
