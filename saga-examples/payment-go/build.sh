#!/usr/bin/env bash
# saga-examples/payment-go/build.sh BUILD_DIR [OUT] — builds the Go payment participant offline,
# in GOPATH mode through client-lib/go/go.sh (GOPATH BUILD_DIR/go/gopath + /usr/share/gocode):
# this folder is linked as idem.dev/saga-payment beside the SDK's idem.dev/client. OUT defaults
# to BUILD_DIR/saga-examples/saga-payment-go. Needs Debian's golang-github-lib-pq-dev besides
# the SDK's packages (deps.sh installs both).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: saga-examples/payment-go/build.sh BUILD_DIR [OUT]" >&2; exit 2; }
build=$(mkdir -p "$1" && cd "$1" && pwd)
out=${2:-$build/saga-examples/saga-payment-go}
mkdir -p "$build/go/gopath/src/idem.dev" "$(dirname "$out")"
link="$build/go/gopath/src/idem.dev/saga-payment"
if [ "$(readlink "$link" 2>/dev/null)" != "$here" ]; then
  # a new link renamed over the old one: two builds starting at once both succeed
  ln -sfn "$here" "$link.$$"
  mv -Tf "$link.$$" "$link"
fi
exec "$root/client-lib/go/go.sh" "$build/go" build -o "$out" idem.dev/saga-payment
