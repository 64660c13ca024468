#!/usr/bin/env bash
# client-lib/go/example-http.sh — what `scripts/example-http go` runs: builds examples/http
# offline (go.sh: GOPATH mode over Debian's packages; the build and its cache outside the checkout,
# in IDEM_GO_BUILD_DIR, default ${XDG_CACHE_HOME:-~/.cache}/idem-go, shared with examples/go)
# and runs it in the foreground on 127.0.0.1:$PORT. Environment: IDEM_ADDRESS, IDEM_TENANT,
# IDEM_TOKEN, PORT, IDEM_SERVICE, IDEM_JOURNAL (examples/http/main.go).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${IDEM_GO_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/idem-go}
bash "$here/deps.sh" "$root"
"$here/go.sh" "$build" build -o "$build/bin/example-http" idem.dev/client/examples/http
exec "$build/bin/example-http"
