#!/usr/bin/env bash
# client-lib/python/deps.sh ROOT — installs what the Python SDK (idem_client) needs, from Debian's
# archive only: Debian's python3 with python3-grpcio and python3-protobuf (the SDK runs on
# /usr/bin/python3), protoc to generate the messages (gen_proto.py), python3-venv for
# `pip install client-lib/python` into a venv with --system-site-packages. Nothing from PyPI.
set -euo pipefail
need="python3 python3-grpcio python3-protobuf protobuf-compiler python3-venv python3-setuptools"
missing=""
for p in $need; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "client-lib/python: missing Debian packages:$missing (run as root, or: sudo apt-get install$missing)" >&2
  exit 1
fi
echo "client-lib/python: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing </dev/null >/dev/null
