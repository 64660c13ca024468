"""setup.py — `pip install client-lib/python` (into a venv made with --system-site-packages:
grpc and protobuf are Debian's python3-grpcio and python3-protobuf, never fetched).

No pyproject.toml on purpose: pip then builds with the setuptools already installed instead of
fetching one into an isolated build environment. The protobuf messages are generated at build
time with Debian's protoc from proto/idem/v1/coordinator.proto (gen_proto.py; IDEM_PROTO_DIR
points elsewhere when the package is built outside this repository).
"""
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_proto  # noqa: E402


# before setup(): egg_info and build_py both need idem_client/_gen to exist
gen_proto.generate()


class BuildWithProto(build_py):
    def run(self):
        gen_proto.generate()
        super().run()


setup(
    name="idem_client",
    version="0.2.0",
    description="Python client and WSGI Idempotency-Key middleware of the idem coordinator",
    packages=["idem_client", "idem_client._gen"],
    python_requires=">=3.9",
    install_requires=[],  # grpcio and protobuf: Debian's python3-grpcio / python3-protobuf
    cmdclass={"build_py": BuildWithProto},
)
