#!/usr/bin/env bash
# client-lib/go/gen.sh — regenerates idempb/*.pb.go from proto/idem/v1/coordinator.proto with
# Debian's protoc, protoc-gen-go (golang-google-protobuf-dev 1.28.1) and protoc-gen-go-grpc
# (golang-google-grpc-dev 1.33.3, "protoc-gen-go-grpc 1.0"). The generated files are committed:
# a build needs neither plugin. The proto has no go_package option; M flags map it here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
map=Midem/v1/coordinator.proto=idem.dev/client/idempb
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
protoc -I "$root/proto" --go_out="$out" --go_opt=paths=source_relative,"$map" \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative,"$map" idem/v1/coordinator.proto
dest=${1:-$here/idempb}
mkdir -p "$dest"
cp "$out/idem/v1/coordinator.pb.go" "$out/idem/v1/coordinator_grpc.pb.go" "$dest/"
