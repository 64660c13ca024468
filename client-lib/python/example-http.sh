#!/usr/bin/env bash
# client-lib/python/example-http.sh — run by `scripts/example-http python`: generates the protobuf
# messages (Debian's protoc) and runs examples/http.py in the foreground on 127.0.0.1:$PORT with
# Debian's python3 (IDEM_ADDRESS, IDEM_TENANT, PORT; docs/api.md §19).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
/usr/bin/python3 "$here/gen_proto.py" >/dev/null
exec /usr/bin/python3 "$here/examples/http.py"
