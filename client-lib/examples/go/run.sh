#!/usr/bin/env bash
# client-lib/examples/go/run.sh [ORDER-ID] — builds step.go offline (client-lib/go/go.sh: GOPATH
# mode over Debian's golang-go and grpc-go, GOPROXY=off) and runs it. The build and its cache go
# outside the checkout: IDEM_GO_BUILD_DIR, default ${XDG_CACHE_HOME:-~/.cache}/idem-go (the first
# build compiles grpc-go once, about a minute on 2 cores). IDEM_ADDRESS, IDEM_TENANT: step.go.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${IDEM_GO_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/idem-go}
if ! command -v go >/dev/null || [ ! -d /usr/share/gocode/src/google.golang.org/grpc ] ||
  [ ! -d /usr/share/gocode/src/go.opentelemetry.io/otel ]; then
  echo "client-lib/examples/go: Go, grpc-go or OpenTelemetry is missing: run 'bash client-lib/go/deps.sh .' (as root) first" >&2
  exit 1
fi
"$root/client-lib/go/go.sh" "$build" build -o "$build/bin/idem-step-example" "$here/step.go"
exec "$build/bin/idem-step-example" "$@"
