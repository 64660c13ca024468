#!/usr/bin/env bash
# client-lib/python/deps.sh ROOT — installs what the Python SDK (idem_client) needs, from Debian's
# archive only: Debian's python3 with python3-grpcio and python3-protobuf (the SDK runs on
# /usr/bin/python3), protoc to generate the messages (gen_proto.py), python3-venv for
# `pip install client-lib/python` into a venv with --system-site-packages, python3-waitress for the
# HTTP example's server (idem_client/waitress_server.py). Nothing from PyPI.
set -euo pipefail
need="python3 python3-grpcio python3-protobuf protobuf-compiler python3-venv python3-setuptools
  python3-waitress"
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
. "$root/scripts/lib/deps.sh"
# shellcheck disable=SC2086
deps_debs $need
