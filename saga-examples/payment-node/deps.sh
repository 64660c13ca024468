#!/usr/bin/env bash
# saga-examples/payment-node/deps.sh ROOT — what the Node payment participant needs: the SDK
# (client-lib/node/deps.sh: Node, its npm packages from its lock file, the build into dist/),
# then this folder's npm packages at the exact versions of the committed package-lock.json
# (npm ci; skipped when that lock file was installed already).
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
bash "$root/client-lib/node/deps.sh" "$root"
cd "$root/saga-examples/payment-node"
stamp=node_modules/.idem-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  echo "$want" >"$stamp"
fi
