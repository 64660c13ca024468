#!/usr/bin/env bash
# client-lib/go/gen.sh — regenerates idempb/*.pb.go from proto/idem/v1/coordinator.proto with
# Debian's protoc, protoc-gen-go (golang-google-protobuf-dev 1.28.1) and protoc-gen-go-grpc
# (golang-google-grpc-dev 1.33.3, "protoc-gen-go-grpc 1.0"). The generated files are committed:
# a build needs neither plugin. The proto has no go_package option; M flags map it here.
#   gen.sh           rewrite idempb/
#   gen.sh --check   exit 1 when idempb/ differs from what the proto generates (ctest go_pb_current)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
map=Midem/v1/coordinator.proto=idem.dev/client/idempb
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
protoc -I "$root/proto" --go_out="$out" --go_opt=paths=source_relative,"$map" \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative,"$map" idem/v1/coordinator.proto
if [ "${1:-}" = --check ]; then
  for f in coordinator.pb.go coordinator_grpc.pb.go; do
    if ! cmp -s "$out/idem/v1/$f" "$here/idempb/$f"; then
      echo "client-lib/go/idempb/$f is stale: run client-lib/go/gen.sh" >&2
      diff -u "$here/idempb/$f" "$out/idem/v1/$f" | head -40 >&2 || true
      exit 1
    fi
  done
  echo "client-lib/go/idempb is current"
  exit 0
fi
cp "$out/idem/v1/coordinator.pb.go" "$out/idem/v1/coordinator_grpc.pb.go" "$here/idempb/"
