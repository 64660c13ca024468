"""test_install.py — `pip install client-lib/python` into a fresh venv made by Debian's python3
with --system-site-packages works offline, and the installed package imports and talks gRPC."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import support


class Install(unittest.TestCase):
    def test_pip_install_into_venv(self):
        tmp = tempfile.mkdtemp(prefix="idem-py-venv.")
        try:
            venv = os.path.join(tmp, "venv")
            subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv],
                           check=True, capture_output=True)
            # a copy of the source, so the install cannot lean on files of the work tree
            src = os.path.join(tmp, "src")
            shutil.copytree(support.PY_DIR, src, ignore=shutil.ignore_patterns(
                "_gen", "build", "*.egg-info", "__pycache__"))
            env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                       IDEM_PROTO_DIR=str(support.PY_DIR.parents[1] / "proto"))
            r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", src],
                               capture_output=True, text=True, env=env, cwd=tmp)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            port = support.free_port()
            probe = ("import idem_client, idem_client.wsgi, sys\n"
                     "assert 'site-packages' in idem_client.__file__, idem_client.__file__\n"
                     f"c = idem_client.connect('127.0.0.1:{port}', timeout=0.3)\n"
                     "try:\n"
                     "    c.begin_saga()\n"
                     "except idem_client.IdemError as e:\n"
                     "    print(e.code)\n")
            r = subprocess.run([os.path.join(venv, "bin", "python"), "-c", probe],
                               capture_output=True, text=True, cwd=tmp)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(r.stdout.strip(), ("UNAVAILABLE", "DEADLINE_EXCEEDED"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(unittest.main())
