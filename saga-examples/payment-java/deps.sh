#!/usr/bin/env bash
# saga-examples/payment-java/deps.sh ROOT — what the Java payment participant needs from Debian's
# archive: the Java SDK's packages (IDEM_JAVA_DEBS of scripts/lib/deps.sh, which lists
# PostgreSQL's JDBC driver for this participant too).
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
bash "$root/client-lib/java/deps.sh" "$root"
