#!/usr/bin/env bash
# test/run.sh COMMAND [ARGS...] — builds idem-client (proto copy + tsc into dist/, under a lock so
# that tests started in parallel do not build over each other), then runs COMMAND in
# client-lib/node. Used by tests.cmake: `test/run.sh node --test test/sdk.test.js`.
set -euo pipefail
dir=$(cd "$(dirname "$0")/.." && pwd)
cd "$dir"
[ -d node_modules/@grpc/grpc-js ] || { echo "client-lib/node: node_modules is missing: run client-lib/node/deps.sh" >&2; exit 1; }
flock .build.lock npm run --silent build
exec "$@"
