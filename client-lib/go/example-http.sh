#!/usr/bin/env bash
# client-lib/go/example-http.sh — what `scripts/example-http go` runs: builds examples/http
# offline (go.sh: GOPATH mode over Debian's packages; cache in build/go, or IDEM_GO_BUILD_DIR)
# and runs it in the foreground on 127.0.0.1:$PORT. Environment: IDEM_ADDRESS, IDEM_TENANT,
# IDEM_TOKEN, PORT, IDEM_SERVICE, IDEM_JOURNAL (examples/http/main.go).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${IDEM_GO_BUILD_DIR:-$root/build/go}
bash "$here/deps.sh" "$root"
"$here/go.sh" "$build" build -o "$build/bin/example-http" idem.dev/client/examples/http
exec "$build/bin/example-http"
