#!/usr/bin/env bash
# saga-examples/payment-go/gen.sh — regenerates shoppb/*.pb.go from saga-examples/proto
# (shop/v1/step.proto, payments.proto) with Debian's protoc, protoc-gen-go and
# protoc-gen-go-grpc, as client-lib/go/gen.sh does for idempb. The files are committed.
#   gen.sh --check   exit 1 when shoppb/ differs from what the protos generate
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
protos="$here/../proto"
map=Mshop/v1/step.proto=idem.dev/saga-payment/shoppb,Mshop/v1/payments.proto=idem.dev/saga-payment/shoppb
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
protoc -I "$protos" --go_out="$out" --go_opt=paths=source_relative,"$map" \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative,"$map" shop/v1/step.proto shop/v1/payments.proto
files="step.pb.go payments.pb.go payments_grpc.pb.go"
if [ "${1:-}" = --check ]; then
  for f in $files; do
    if ! cmp -s "$out/shop/v1/$f" "$here/shoppb/$f"; then
      echo "saga-examples/payment-go/shoppb/$f is stale: run saga-examples/payment-go/gen.sh" >&2
      exit 1
    fi
  done
  echo "saga-examples/payment-go/shoppb is current"
  exit 0
fi
for f in $files; do cp "$out/shop/v1/$f" "$here/shoppb/"; done
