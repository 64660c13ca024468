#!/usr/bin/env bash
# saga-examples/payment-go/deps.sh ROOT — what the Go payment participant needs from Debian's
# archive when missing: the Go SDK's packages (client-lib/go/deps.sh) and lib/pq
# (golang-github-lib-pq-dev, GOPATH sources under /usr/share/gocode). Nothing else is fetched.
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
bash "$root/client-lib/go/deps.sh" "$root"
. "$root/scripts/lib/deps.sh"
deps_debs golang-github-lib-pq-dev
