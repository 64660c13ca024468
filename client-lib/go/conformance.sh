#!/usr/bin/env bash
# client-lib/go/conformance.sh BUILD_DIR [SCENARIO...] — builds the Go conformance runner
# (cmd/idem-conformance) into BUILD_DIR and runs it; meant as the RUNNER of
# client-lib/conformance/run, which provides the environment (README.md there).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: client-lib/go/conformance.sh BUILD_DIR [SCENARIO...]" >&2; exit 2; }
build=$(mkdir -p "$1" && cd "$1" && pwd)
shift
"$here/go.sh" "$build" build -o "$build/bin/idem-conformance" idem.dev/client/cmd/idem-conformance
exec "$build/bin/idem-conformance" "$@"
