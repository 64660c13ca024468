"""support.py — what the Python SDK's tests share: the generated code, a coordinator of their
own on a free loopback port (started and stopped by PID), free ports, polling with a deadline.

Environment (scripts/test and ctest set it): IDEM_TEST_PG_URL, IDEM_COORDINATOR_BIN,
IDEM_SOURCE_DIR; IDEM_IDEMCTL_BIN for the journal test.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

PY_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PY_DIR))
import gen_proto  # noqa: E402

_GEN = PY_DIR / "idem_client" / "_gen" / "coordinator_pb2.py"
_PROTO = gen_proto.default_proto_dir() / gen_proto.PROTO
# generated again when the contract changed since (a merge that adds fields)
if not _GEN.exists() or (_PROTO.exists() and _PROTO.stat().st_mtime > _GEN.stat().st_mtime):
    gen_proto.generate()

START_TIMEOUT_S = 20


def need_env(*names):
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} must be set (scripts/test / ctest set them)")
    return [os.environ[n] for n in names]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def wait_until(cond, timeout, what):
    """Polls cond() until it is true; AssertionError naming `what` at the deadline."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Coordinator:
    """A single-node coordinator on IDEM_TEST_PG_URL, on a free port."""

    def __init__(self, *extra):
        binary, pg = need_env("IDEM_COORDINATOR_BIN", "IDEM_TEST_PG_URL")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="idem-py-coord.", suffix=".log", delete=False)
        self.proc = subprocess.Popen([binary, "--listen", self.address, "--pg", pg,
                                      "--reaper-interval", "0", *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: self.proc.poll() is not None or
                       (port_open(self.port) and b"listening" in Path(self.log.name).read_bytes()),
                       START_TIMEOUT_S, "the coordinator to listen")
            if self.proc.poll() is not None:
                raise RuntimeError(f"coordinator exited {self.proc.returncode}:\n{self.tail()}")
        except BaseException:
            self.stop()
            raise

    def tail(self):
        return Path(self.log.name).read_text(errors="replace")[-3000:]

    def stop(self):
        """SIGTERM by PID, then wait; returns once the port refuses connections."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        wait_until(lambda: not port_open(self.port), 5, "the coordinator's port to close")

    def close(self):
        self.stop()
        self.log.close()
        os.unlink(self.log.name)
