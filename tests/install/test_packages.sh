#!/usr/bin/env bash
# tests/install/test_packages.sh — the Debian packages of scripts/package, really installed: dpkg -i
# of idem-coordinator, libidem0 and libidem-dev into this machine; the C example built against
# them with pkg-config (no PKG_CONFIG_PATH: the system's) and run against /usr/bin/idem-coordinator
# (ran, replayed, one charge); their version (CMake's) and the postinst that restarts the unit
# on an upgrade; `systemd-analyze verify` of the unit; the man pages; then
# dpkg --purge, and nothing of them is left. Runs as root (scripts/test does); purges on failure.
set -euo pipefail
src=${IDEM_SOURCE_DIR:?IDEM_SOURCE_DIR is not set}
: "${IDEM_TEST_PG_URL:?IDEM_TEST_PG_URL is not set}"
[ "$(id -u)" = 0 ] || { echo "test_packages: needs root (dpkg -i)" >&2; exit 1; }
pkgs="idem-coordinator libidem-dev libidem0"
work=$(mktemp -d /tmp/idem-pkg.XXXXXX)
server_pid=""
purge() { dpkg --purge $pkgs >/dev/null 2>&1 || true; }
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; fi
  purge
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "test_packages: FAILED: $*" >&2; exit 1; }

purge # a run that was killed may have left them
export IDEM_PACKAGE_BUILD=${IDEM_PACKAGE_BUILD:-$work/build}
debs=$("$src/scripts/package" 2>"$work/package.log") || { cat "$work/package.log"; fail "scripts/package"; }
[ "$(wc -l <<<"$debs")" = 3 ] || fail "scripts/package made: $debs"
# shellcheck disable=SC2086 # one word per file
dpkg -i $debs >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
echo "installed: $(dpkg-query -W -f='${Package} ${Version}, ' $pkgs)"
# the version is the build's (docs/api.md §23; a dev build's X.Y.Z~dev+COMMIT), and an upgrade restarts a running unit (postinst)
. "$src/scripts/lib/release.sh"
for p in $pkgs; do
  [ "$(dpkg-query -W -f='${Version}' "$p")" = "$(release_deb_version "$src")" ] ||
    fail "$p is version $(dpkg-query -W -f='${Version}' "$p"), the build's is $(release_deb_version "$src")"
done
dpkg-deb -I "$(grep /idem-coordinator_ <<<"$debs")" postinst | grep -q "systemctl try-restart idem-coordinator.service" ||
  fail "idem-coordinator's postinst does not restart the unit on an upgrade"

# the unit, the env file, the man pages
unit=/usr/lib/systemd/system/idem-coordinator.service
[ -f "$unit" ] || fail "no $unit"
[ -f /etc/idem/idem.env ] || fail "no /etc/idem/idem.env"
dpkg-query -W -f='${Conffiles}' idem-coordinator | grep -q /etc/idem/idem.env || fail "idem.env is not a conffile"
verify=$(systemd-analyze verify "$unit" 2>&1) || { echo "$verify"; fail "systemd-analyze verify"; }
[ -z "$verify" ] || { echo "$verify"; fail "systemd-analyze verify has remarks"; }
echo "systemd-analyze verify $unit: clean; man pages idem-coordinator.1, idemctl.1"
for m in "idem-coordinator listen" "idemctl tenant"; do # the page, and an option of it
  set -- $m
  page=$(zcat "/usr/share/man/man1/$1.1.gz") || fail "no man page for $1"
  grep -q '^\.TH' <<<"$page" || fail "$1.1 is not a man page"
  grep -qF "\fB\-\-$2\fR" <<<"$page" || fail "$1.1 lacks --$2"
done

# the example against the system's libidem, with the user's plain compiler command
unset PKG_CONFIG_PATH
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror "$src/client-lib/examples/c/step.c" $(pkg-config --cflags --libs idem) \
  -o "$work/step" 2>"$work/cc.log" || { cat "$work/cc.log"; fail "cc with pkg-config"; }
libs=$(ldd "$work/step")
grep -Eq "libidem.so.0 => (/usr)?/lib/x86_64-linux-gnu/libidem.so.0" <<<"$libs" \
  || { echo "$libs"; fail "the example does not load the system's libidem"; }
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
/usr/bin/idem-coordinator --listen "127.0.0.1:$port" --pg "$IDEM_TEST_PG_URL" >"$work/server.log" 2>&1 &
server_pid=$!
deadline=$((SECONDS + 30))
until idemctl --addr "127.0.0.1:$port" status >/dev/null 2>&1; do
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; fail "/usr/bin/idem-coordinator exited"; }
  [ "$SECONDS" -lt "$deadline" ] || fail "/usr/bin/idem-coordinator did not answer within 30 s"
  sleep 0.1
done
out=$(IDEM_ADDRESS="127.0.0.1:$port" IDEM_TENANT="pkg-$$-$RANDOM" "$work/step" order-pkg 2>&1) \
  || { echo "$out"; fail "the example failed"; }
grep -qF "charged 1 time(s) for two requests" <<<"$out" || { echo "$out"; fail "not one charge"; }
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=""
echo "the example built with pkg-config against the packages: ran once, replayed once"

# shellcheck disable=SC2086
dpkg --purge $pkgs >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "dpkg --purge"; }
for f in /usr/bin/idem-coordinator /usr/bin/idemctl "$unit" /etc/idem/idem.env /usr/include/idem/idem.h; do
  [ ! -e "$f" ] || fail "$f is still there after dpkg --purge"
done
echo "test_packages: ok (3 packages installed, verified, used and purged)"
