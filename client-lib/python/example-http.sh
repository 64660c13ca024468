#!/usr/bin/env bash
# client-lib/python/example-http.sh — run by `scripts/example-http python`: generates the protobuf
# messages (Debian's protoc) and runs examples/http.py in the foreground on 127.0.0.1:$PORT with
# Debian's python3 on waitress (IDEM_ADDRESS, IDEM_TENANT, PORT; docs/api.md §19). deps.sh installs
# what is missing (python3-waitress among them) as root, or names it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/deps.sh" "$here/../.."
/usr/bin/python3 "$here/gen_proto.py" >/dev/null
exec /usr/bin/python3 "$here/examples/http.py"
