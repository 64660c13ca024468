#!/usr/bin/env bash
# saga-examples/payment-go/deps.sh ROOT — what the Go payment participant needs from Debian's
# archive when missing: the Go SDK's packages (client-lib/go/deps.sh) and lib/pq
# (golang-github-lib-pq-dev, GOPATH sources under /usr/share/gocode). Nothing else is fetched.
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
bash "$root/client-lib/go/deps.sh" "$root"
p=golang-github-lib-pq-dev
dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "saga-examples/payment-go: missing Debian package: $p (run as root, or: sudo apt-get install $p)" >&2
  exit 1
fi
echo "installing: $p" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "$p" </dev/null >/dev/null
