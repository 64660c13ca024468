#!/usr/bin/env bash
# client-lib/node/example-http.sh — run by `scripts/example-http node`: installs and builds
# idem-client if needed (deps.sh: npm ci from the lock file, tsc), then runs examples/http.js in
# the foreground on 127.0.0.1:$PORT against $IDEM_ADDRESS (docs/api.md §19).
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
bash "$dir/deps.sh" "$dir/../.." >&2
cd "$dir"
exec node examples/http.js
