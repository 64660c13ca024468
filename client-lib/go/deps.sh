#!/usr/bin/env bash
# client-lib/go/deps.sh ROOT — installs what the Go SDK needs from Debian's archive when missing
# (run by scripts/test): Go 1.19, grpc-go 1.33, the protobuf runtimes and OpenTelemetry 1.1 (trace
# context and the idem.step span) as GOPATH sources under /usr/share/gocode.
# github.com/golang/protobuf must be the 1.5 line (APIv2-based; it conflicts with the 1.3
# package, which grpc's dependency would otherwise pull in). The generated idempb/*.pb.go are
# committed, so protoc-gen-go is only needed by gen.sh, not installed here.
set -euo pipefail
debs="golang-go golang-google-grpc-dev golang-golang-x-net-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev
  golang-opentelemetry-otel-dev
  protoc-gen-go protoc-gen-go-grpc protobuf-compiler"
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
. "$root/scripts/lib/deps.sh"
# shellcheck disable=SC2086
deps_debs $debs
