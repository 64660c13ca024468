#!/usr/bin/env bash
# client-lib/node/deps.sh ROOT — what the Node SDK (idem-client) needs to build and test: Node.js
# and npm (Debian's, unless a node and npm are already on PATH), the npm packages at the exact
# versions of the committed package-lock.json (npm ci; skipped when that lock file was installed
# already), then the build (proto copy + tsc into dist/). Run by scripts/test; nothing else is
# fetched, and nothing at build time.
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
dir="$root/client-lib/node"
. "$root/scripts/lib/deps.sh"
deps_nodejs
cd "$dir"
stamp=node_modules/.idem-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  echo "$want" >"$stamp"
fi
flock .build.lock npm run --silent build # test/run.sh builds under the same lock
