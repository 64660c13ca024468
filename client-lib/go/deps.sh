#!/usr/bin/env bash
# client-lib/go/deps.sh ROOT — installs what the Go SDK needs from Debian's archive when missing
# (run by scripts/test): Go 1.19, grpc-go 1.33 and the protobuf runtimes as GOPATH sources under
# /usr/share/gocode. github.com/golang/protobuf must be the 1.5 line (APIv2-based; it conflicts
# with the 1.3 package, which grpc's dependency would otherwise pull in). The generated
# idempb/*.pb.go are committed, so protoc-gen-go is only needed by gen.sh, not installed here.
set -euo pipefail
debs="golang-go golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev
  protoc-gen-go protoc-gen-go-grpc protobuf-compiler"
missing=""
for p in $debs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "client-lib/go: missing Debian packages:$missing (run as root, or: sudo apt-get install$missing)" >&2
  exit 1
fi
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing </dev/null >/dev/null
