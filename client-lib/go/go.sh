#!/usr/bin/env bash
# client-lib/go/go.sh BUILD_DIR GO-ARGS... — runs the go tool on the Go SDK offline, in GOPATH
# mode: GO111MODULE=off, GOPROXY=off, GOPATH = BUILD_DIR/gopath (where idem.dev/client is a
# symlink to this folder) + /usr/share/gocode (Debian's golang-google-grpc-dev and friends),
# GOCACHE under BUILD_DIR. The command runs niced, from the package's GOPATH folder, so
# "./..."-style relative paths and plain import paths (idem.dev/client/...) both work.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: client-lib/go/go.sh BUILD_DIR GO-ARGS..." >&2; exit 2; }
build=$(mkdir -p "$1" && cd "$1" && pwd)
shift
mkdir -p "$build/gopath/src/idem.dev" "$build/gocache"
link="$build/gopath/src/idem.dev/client"
if [ "$(readlink "$link" 2>/dev/null)" != "$here" ]; then
  rm -f "$link"
  ln -s "$here" "$link"
fi
export GO111MODULE=off GOPROXY=off GOFLAGS= GOTOOLCHAIN=local
export GOPATH="$build/gopath:/usr/share/gocode" GOCACHE="$build/gocache"
cd "$link"
exec nice -n 10 go "$@"
