#!/usr/bin/env bash
# client-lib/go/go.sh BUILD_DIR GO-ARGS... — runs the go tool on the Go SDK offline, in GOPATH
# mode: GO111MODULE=off, GOPROXY=off, GOPATH = BUILD_DIR/gopath (where idem.dev/client is a
# symlink to this folder) + /usr/share/gocode (Debian's golang-google-grpc-dev and friends),
# GOCACHE under BUILD_DIR (IDEM_GOCACHE names another: the tests share one). The command runs
# niced, from the package's GOPATH folder, so "./..."-style relative paths and plain import paths
# (idem.dev/client/idemhttp) both work. A pattern like idem.dev/client/... does not follow the
# symlink and matches nothing: go only warns and exits 0, so this script then fails (exit 1)
# rather than report a build of nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: client-lib/go/go.sh BUILD_DIR GO-ARGS..." >&2; exit 2; }
build=$(mkdir -p "$1" && cd "$1" && pwd)
shift
gocache=${IDEM_GOCACHE:-$build/gocache}
mkdir -p "$build/gopath/src/idem.dev" "$gocache"
link="$build/gopath/src/idem.dev/client"
if [ "$(readlink "$link" 2>/dev/null)" != "$here" ]; then
  # a new link renamed over the old one: two builds starting at once both succeed
  ln -sfn "$here" "$link.$$"
  mv -Tf "$link.$$" "$link"
fi
export GO111MODULE=off GOPROXY=off GOFLAGS= GOTOOLCHAIN=local
export GOPATH="$build/gopath:/usr/share/gocode" GOCACHE="$gocache"
cd "$link"
errs=$(mktemp)
trap 'rm -f "$errs"' EXIT
set +e # go's stderr goes on to ours and into $errs; its stdout stays as it is
{ nice -n 10 go "$@" 2>&1 1>&3 3>&- | tee "$errs" >&2; } 3>&1
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" = 0 ] && grep -q 'matched no packages' "$errs"; then
  echo "client-lib/go/go.sh: go $1: a pattern matched no packages, so nothing was done (inside" \
    "GOPATH, idem.dev/client is a symlink, which '...' patterns do not follow: use ./... or name" \
    "the packages)" >&2
  exit 1
fi
exit "$rc"
